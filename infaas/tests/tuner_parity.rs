//! InferLine's tuner decides alike on the controller and in the simulator: one arrival sequence
//! (steady at the plan, a step up, a spike, a fall and a quiet spell) fed to the controller's
//! tuning logic (`infaas_control::pipelines::tuners::Tuners`, every `TUNER_PERIOD` on a test
//! clock, each decision on the arrivals the controller's `PipelineActivity` returns for its
//! window) and to the simulator's replay (`infaas_sim::pipeline::tuner_decisions`, which the
//! replay's schedule runs) gives the same targets and actions at the same times, in the same
//! order; and the tuner scales out after the step and in after the fall.
#![allow(clippy::unwrap_used)]

use infaas_control::pipelines::activity::PipelineActivity;
use infaas_control::pipelines::tune::TUNER_PERIOD;
use infaas_scheduler::pipeline::tuner::{TunerAction, MAX_WINDOW_MS, TUNER_PERIOD_MS};
use infaas_scheduler::pipeline::{Provisioning, Tuner, TunerConfig, TunerNode};
use infaas_sim::pipeline::tuner_decisions;

const TENANT: &str = "acme";
const PIPELINE: &str = "p";

/// (from s, to s, queries per second).
const PHASES: [(i64, i64, usize); 5] = [
    // At the plan (20 q/s).
    (0, 30, 20),
    // A step up.
    (30, 60, 60),
    // A spike of 2 s.
    (60, 62, 200),
    (62, 80, 60),
    // A fall, long enough for the scale-in rules (15 s stabilisation, 30-s horizon).
    (80, 180, 10),
];

/// Arrivals in ms from 0, evenly spaced within each second; whole milliseconds, so some fall
/// exactly on a window's start.
fn arrivals() -> Vec<f64> {
    PHASES
        .iter()
        .flat_map(|&(from, to, n)| {
            (from..to).flat_map(move |s| {
                (0..n).map(move |k| (s * 1000 + (k as i64 * 1000) / n as i64) as f64)
            })
        })
        .collect()
}

/// One node of 10 q/s per replica, planned at 2 replicas for 20 q/s.
fn config() -> TunerConfig {
    TunerConfig {
        windows_ms: vec![1_000.0, 5_000.0],
        planned_rates: vec![20.0, 20.0],
        planned_scale_down_rate: 20.0,
        planned_mean_rate: 20.0,
        nodes: vec![TunerNode {
            reach: 1.0,
            throughput_per_s: 10.0,
            planned_replicas: 2,
        }],
        provisioning: Provisioning::Timescale,
        headroom: 1.2,
        stabilisation_ms: 15_000.0,
        scale_down_window_ms: 5_000.0,
        scale_down_horizon_ms: 30_000.0,
        replan_after_ms: 300_000.0,
        max_replicas: 64,
    }
}

#[test]
fn the_controller_and_the_simulator_tune_alike() {
    assert_eq!(TUNER_PERIOD.as_secs_f64() * 1e3, TUNER_PERIOD_MS);
    let arrivals = arrivals();
    let end_ms = *arrivals.last().unwrap();

    // The simulator.
    let sim: Vec<(f64, Vec<usize>, TunerAction)> =
        tuner_decisions(&config(), &arrivals, end_ms, TUNER_PERIOD_MS)
            .into_iter()
            .map(|d| (d.at_ms, d.targets, d.action))
            .collect();

    // The controller: the arrivals recorded as its query path records them, and its tuners
    // driven every period on a test clock (its loop passes the wall clock's `now`).
    let activity = PipelineActivity::default();
    for &t in &arrivals {
        activity.arrival(TENANT, PIPELINE, t);
    }
    activity.tuners.install(
        TENANT,
        PIPELINE,
        Tuner::new(config()),
        vec!["v".to_string()],
    );
    let mut controller: Vec<(f64, Vec<usize>, TunerAction)> = Vec::new();
    let mut now = TUNER_PERIOD_MS;
    while now <= end_ms + TUNER_PERIOD_MS {
        let decisions = activity.tuners.decide(now, |tenant, name| {
            activity.arrivals_at(tenant, name, now, MAX_WINDOW_MS)
        });
        assert_eq!(decisions.len(), 1);
        let d = &decisions[0];
        controller.push((now, d.targets.iter().map(|(_, k)| *k).collect(), d.action));
        now += TUNER_PERIOD_MS;
    }

    assert_eq!(controller.len(), sim.len());
    for (c, s) in controller.iter().zip(&sim) {
        assert_eq!(c, s, "the controller and the simulator part at {} ms", c.0);
    }

    // And the tuner did its work: out after the step and the spike, in after the fall.
    let at = |ms: f64| sim.iter().find(|d| d.0 == ms).map(|d| d.1[0]).unwrap();
    assert_eq!(at(20_000.0), 2, "at the plan: the planned replicas");
    // The spike: 200 q/s over the 1-s window, x1.2 headroom, 10 q/s a replica at ratio 1.
    assert_eq!(at(62_000.0), 24, "{sim:?}");
    let peak = sim.iter().map(|d| d.1[0]).max().unwrap();
    assert_eq!(peak, 24);
    assert_eq!(at(175_000.0), 2, "back to the plan after the fall: {sim:?}");
    let outs = sim.iter().filter(|d| d.2 == TunerAction::ScaleOut).count();
    let ins = sim.iter().filter(|d| d.2 == TunerAction::ScaleIn).count();
    assert!(outs >= 2 && ins >= 1, "scale-outs {outs}, scale-ins {ins}");
}
