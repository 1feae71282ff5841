//! InferLine's tuner decides alike on the controller and in the simulator. One arrival sequence
//! (steady at the plan, a step up, a spike, a fall and a long quiet spell) is fed to
//! - the controller's tuning logic: the arrivals recorded in its `PipelineActivity` as the query
//!   path records them, and its `Tuners` driven every `TUNER_PERIOD` on a test clock, each
//!   decision on `PipelineActivity::arrivals_at(.., now, TUNER_WINDOW_MS)` (what the tuner loop,
//!   `control/src/pipelines/tune.rs`, does at the wall clock's now);
//! - the simulator's replay (`infaas_sim::pipeline::replay` with the same `TunerConfig` and its
//!   default tick), whose report records the tuner's decisions;
//!
//! and both give the same targets and actions at the same times, in the same order. The tuner
//! scales out after the step and the spike and in after the fall, at hand-derived times. The
//! spike is 40 queries in one millisecond on a whole second, so the decision exactly 60 s later
//! depends on the window's start being included: a caller that dropped it would scale in a
//! second earlier than the other.
#![allow(clippy::unwrap_used)]

use infaas_control::pipelines::activity::PipelineActivity;
use infaas_control::pipelines::tune::TUNER_PERIOD;
use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::pipeline::tuner::{TunerAction, TUNER_PERIOD_MS, TUNER_WINDOW_MS};
use infaas_scheduler::pipeline::{
    NodeConfig, PlanNode, PlanOption, PlanProblem, Provisioning, Tuner, TunerConfig, TunerNode,
};
use infaas_scheduler::VariantEntry;
use infaas_sim::pipeline::{replay, tuner_decisions, ReplayOptions};

const TENANT: &str = "acme";
const PIPELINE: &str = "p";

/// (from s, to s, queries per second), evenly spaced within each second.
const PHASES: [(i64, i64, usize); 3] = [
    // At the plan (20 q/s).
    (0, 30, 20),
    // A step up to 60 q/s.
    (30, 90, 60),
    // A fall to 10 q/s, long enough for both scale-ins (15 s stabilisation, 30-s horizon).
    (90, 200, 10),
];

/// The spike: this many queries more, all at `SPIKE_AT_MS`.
const SPIKE: usize = 40;
const SPIKE_AT_MS: f64 = 40_000.0;

/// Arrivals in whole ms from 0, ascending: one at every whole second, where the decisions are.
fn arrivals() -> Vec<f64> {
    let mut a: Vec<f64> = PHASES
        .iter()
        .flat_map(|&(from, to, n)| {
            (from..to).flat_map(move |s| {
                (0..n).map(move |k| (s * 1000 + (k as i64 * 1000) / n as i64) as f64)
            })
        })
        .collect();
    a.extend(std::iter::repeat_n(SPIKE_AT_MS, SPIKE));
    a.sort_by(f64::total_cmp);
    a
}

/// One node of 10 q/s a replica (a 100-ms batch of 1), planned at 2 replicas for 20 q/s.
fn problem() -> (PlanProblem, Vec<NodeConfig>) {
    let variant = VariantEntry {
        id: "v".into(),
        name: "v".into(),
        model: "m".into(),
        app: "app".into(),
        accuracy: 0.9,
        hardware: HardwareKind::Cpu,
        threads: 1,
        max_batch: 1,
        load_ms: 1_000.0,
        memory_bytes: 1 << 30,
        latency: vec![LatencyPoint {
            batch: 1,
            p50_ms: 100.0,
            p99_ms: 100.0,
            mean_ms: 100.0,
            throughput_per_s: 10.0,
        }],
    };
    let node = PlanNode {
        name: "v".into(),
        parents: vec![],
        branch_probability: 1.0,
        options: vec![PlanOption { variant, group: 0 }],
    };
    let problem = PlanProblem::new(vec![node], 1_000.0);
    (
        problem,
        vec![NodeConfig {
            option: 0,
            replicas: 2,
        }],
    )
}

/// The tuner of [`problem`]'s plan: planned envelope 20 q/s over 1-s and 5-s windows.
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

type Trace = Vec<(f64, Vec<usize>, TunerAction)>;

/// The controller's decisions: its tuner loop's logic every `TUNER_PERIOD` on a test clock,
/// from one period after the trace's start until one period past its last arrival.
fn controller(arrivals: &[f64]) -> Trace {
    let activity = PipelineActivity::default();
    for &t in arrivals {
        activity.arrival(TENANT, PIPELINE, t);
    }
    activity
        .tuners
        .install(TENANT, PIPELINE, Tuner::new(config()), vec!["v".into()]);
    let period_ms = TUNER_PERIOD.as_secs_f64() * 1e3;
    let end_ms = *arrivals.last().unwrap();
    let mut out = Vec::new();
    let mut now = period_ms;
    while now <= end_ms + period_ms {
        let decisions = activity.tuners.decide(now, |tenant, name| {
            activity.arrivals_at(tenant, name, now, TUNER_WINDOW_MS)
        });
        assert_eq!(decisions.len(), 1);
        let d = &decisions[0];
        assert!(!d.replan, "no drift in 300 s");
        out.push((now, d.targets.iter().map(|(_, k)| *k).collect(), d.action));
        now += period_ms;
    }
    out
}

#[test]
fn the_controller_and_the_simulator_tune_alike() {
    assert_eq!(TUNER_PERIOD.as_secs_f64() * 1e3, TUNER_PERIOD_MS);
    assert_eq!(ReplayOptions::default().tick_ms, TUNER_PERIOD_MS);
    let arrivals = arrivals();

    // The simulator: a replay with the tuner, at the default tick.
    let (problem, configs) = problem();
    let report = replay(
        &problem,
        &configs,
        &arrivals,
        &ReplayOptions {
            policy: "inferline".into(),
            tuner: Some(config()),
            ..ReplayOptions::default()
        },
    );
    let end_ms = *arrivals.last().unwrap();
    assert_eq!(
        report.tuner_decisions,
        tuner_decisions(&config(), &arrivals, end_ms, TUNER_PERIOD_MS),
        "the replay records the decisions it acted on"
    );
    assert!(report.tuner_decisions.iter().all(|d| !d.drift));
    let sim: Trace = report
        .tuner_decisions
        .iter()
        .map(|d| (d.at_ms, d.targets.clone(), d.action))
        .collect();

    // The controller, and the parity: the same targets and actions at the same times.
    let controller = controller(&arrivals);
    for (c, s) in controller.iter().zip(&sim) {
        assert_eq!(c, s, "the controller and the simulator part at {} ms", c.0);
    }
    assert_eq!(controller.len(), sim.len());

    // The tuner's work, derived by hand (10 q/s a replica, 1.2 headroom, the planned 20 q/s at
    // ratio 1):
    // - 31 s: the step's first second, 60 q/s: ceil(60 x 1.2 / 10) = 8;
    // - 40 s: the spike, 40 + 60 queries in one second: ceil(100 x 1.2 / 10) = 12;
    // - 116 s: the decision at 100 s still reads the spike (60 s old: the window's start is
    //   included); from 101 s the step alone needs 8, and after 15 s low: in to 8;
    // - 165 s: the step's last arrival (89.983 s) is out of the window from 150 s; the fall
    //   needs the plan, and 15 s later (and more than 15 s after the last change): in to 2.
    let changes: Vec<(f64, Vec<usize>, TunerAction)> = sim
        .iter()
        .filter(|d| d.2 != TunerAction::Hold)
        .cloned()
        .collect();
    assert_eq!(
        changes,
        vec![
            (31_000.0, vec![8], TunerAction::ScaleOut),
            (40_000.0, vec![12], TunerAction::ScaleOut),
            (116_000.0, vec![8], TunerAction::ScaleIn),
            (165_000.0, vec![2], TunerAction::ScaleIn),
        ],
    );
    let at = |ms: f64| sim.iter().find(|d| d.0 == ms).map(|d| d.1[0]).unwrap();
    assert_eq!((at(30_000.0), at(100_000.0), at(200_000.0)), (2, 12, 2));
    assert_eq!(sim.len(), 200, "one decision a second until 200 s");
    assert_eq!((report.scale_outs, report.scale_ins), (2, 2));
    assert_eq!(report.max_replicas, vec![12]);
}
