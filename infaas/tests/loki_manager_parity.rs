//! Loki's resource manager decides alike on the controller and in the simulator: one arrival
//! sequence (a step up, a spike, a fall) fed to the controller's loop logic
//! (`infaas_control::pipelines::overload::Managers`, on a test clock, as its loop feeds it from
//! the registry's arrivals) and to the simulator's run (`infaas_eval::overload::Overload::run`,
//! its event loop counting the same arrivals) gives the same plans, decided at the same times
//! for the same demands, in the same order; and they are the ones the manager's rules give.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use infaas_control::pipelines::overload::{Managers, PipelineKey};
use infaas_core::trace::Trace;
use infaas_eval::overload::{
    loki_problem, overload_pipeline, DemandEstimate, Overload, OverloadPolicy, OverloadSettings,
};
use infaas_scheduler::loki::manager::Cause;
use infaas_scheduler::loki::{DropPolicy, ManagerSettings, Replan};
use infaas_sim::catalogue::Profile;

/// Queries per second before the sequence, and over its seconds: (from s, to s, rate).
const BEFORE_QPS: usize = 40;
const PHASES: [(u32, u32, u32); 5] = [
    (0, 20, 40),
    // A step up.
    (20, 40, 100),
    // A spike of 2 s.
    (40, 42, 400),
    (42, 60, 100),
    // A fall.
    (60, 90, 20),
];

/// Queries in second `s` (before the sequence: [`BEFORE_QPS`]).
fn rate(s: i64) -> usize {
    if s < 0 {
        return BEFORE_QPS;
    }
    PHASES
        .iter()
        .find(|(from, to, _)| (i64::from(*from)..i64::from(*to)).contains(&s))
        .map_or(0, |p| p.2 as usize)
}

/// The arrivals, ms from 0: evenly spaced within each second.
fn arrivals() -> Vec<f64> {
    let trace = Trace::evenly_spaced("guarded", None, &PHASES);
    trace.arrivals.iter().map(|a| a.at_ms).collect()
}

/// Arrivals from `from_ms` to `to_ms` (whole seconds), as the controller's registry counts them.
fn count(_: &PipelineKey, from_ms: i64, to_ms: i64) -> usize {
    (from_ms.div_euclid(1000)..to_ms.div_euclid(1000))
        .map(rate)
        .sum()
}

/// A small catalogue: per family, three models (fast and inaccurate to slow and accurate) on
/// the CPU and a GPU.
fn catalogue() -> Vec<Profile> {
    Profile::ladder(&[("yolo", 6.0), ("resnet", 3.0)])
}

/// The controller's decisions: the pipeline tracked at 0 (after [`BEFORE_QPS`]), then one
/// tick a second while the sequence lasts (the simulator ticks while arrivals remain).
fn controller(last_arrival_ms: f64) -> Vec<Replan> {
    let key: PipelineKey = ("acme".into(), "guarded".into());
    let mut m = Managers::new(ManagerSettings::default());
    let mut out: Vec<Replan> = m
        .track(0, std::slice::from_ref(&key), count, |_| None)
        .into_iter()
        .map(|(_, r)| r)
        .collect();
    let last = (last_arrival_ms / 1e3).floor() as i64;
    for s in 1..=last {
        out.extend(
            m.tick(s * 1000, count, |_| None)
                .into_iter()
                .map(|(_, r)| r),
        );
    }
    out
}

/// The simulator's decisions for `policy` on the same arrivals, from the same rate.
fn simulator(policy: OverloadPolicy, arrivals: &[f64]) -> Vec<Replan> {
    let workers: BTreeMap<String, usize> =
        [("cpu".to_owned(), 2), ("gpu_pascal".to_owned(), 3)].into();
    let settings = OverloadSettings {
        workers: workers.clone(),
        slo_ms: 300.0,
        ..OverloadSettings::default()
    };
    assert_eq!(settings.manager, ManagerSettings::default());
    let spec = overload_pipeline("detect-classify").unwrap();
    let p = loki_problem(&spec, &catalogue(), settings.slo_ms, &workers).unwrap();
    let mut o = Overload::new(p, settings).unwrap();
    let stats = o
        .run(
            policy,
            arrivals,
            DemandEstimate::Ewma {
                initial_qps: BEFORE_QPS as f64,
            },
        )
        .unwrap();
    assert_eq!(
        stats.change_replans,
        stats.change_replans_at_s().len(),
        "{stats:?}"
    );
    stats.decisions
}

fn show(d: &[Replan]) -> Vec<String> {
    d.iter()
        .map(|r| format!("{:?}@{} {:.3}", r.cause, r.at_s, r.demand_qps))
        .collect()
}

#[test]
fn loki_manager_parity_the_controller_and_the_simulator_replan_alike() {
    let arrivals = arrivals();
    let ctrl = controller(*arrivals.last().unwrap());
    // What the rules give (1-s ticks, 10-s period, re-plan on the last 2 s beyond +25% or
    // below half, a full window after the last plan; the period restarting from a change):
    let want = [
        (Cause::Start, 0.0, 40.0),
        (Cause::Periodic, 10.0, 40.0),
        (Cause::Periodic, 20.0, 40.0),
        // The step at 20 s: the window [20, 22) is the first wholly after the 20-s plan.
        (Cause::Change, 22.0, 100.0),
        (Cause::Periodic, 32.0, 100.0),
        // The spike at 40 s, on its first second: (100 + 400) / 2.
        (Cause::Change, 41.0, 250.0),
        // Its end: [42, 44) below half of 250.
        (Cause::Change, 44.0, 100.0),
        (Cause::Periodic, 54.0, 100.0),
        // The fall at 60 s: [59, 61) at 60 is not below half of 100; [60, 62) is.
        (Cause::Change, 62.0, 20.0),
        (Cause::Periodic, 72.0, 20.0),
        (Cause::Periodic, 82.0, 20.0),
    ];
    assert_eq!(ctrl.len(), want.len(), "{:#?}", show(&ctrl));
    let u = ManagerSettings::default().utilisation;
    for (r, (cause, at, demand)) in ctrl.iter().zip(want) {
        assert_eq!((r.cause, r.at_s), (cause, at), "{:#?}", show(&ctrl));
        assert!((r.demand_qps - demand).abs() < 1e-6, "{:#?}", show(&ctrl));
        assert!((r.plan_qps - demand / u).abs() < 1e-6, "{:#?}", show(&ctrl));
    }
    // The simulator decides the same, whatever the policy makes of the plans.
    for policy in [
        OverloadPolicy::InferLine,
        OverloadPolicy::Loki(DropPolicy::RerouteThenDrop),
    ] {
        let sim = simulator(policy, &arrivals);
        assert_eq!(
            sim.len(),
            ctrl.len(),
            "{policy:?}\nsimulator {:#?}\ncontroller {:#?}",
            show(&sim),
            show(&ctrl)
        );
        for (s, c) in sim.iter().zip(&ctrl) {
            assert_eq!(
                (s.cause, s.at_s),
                (c.cause, c.at_s),
                "{policy:?}\nsimulator {:#?}\ncontroller {:#?}",
                show(&sim),
                show(&ctrl)
            );
            for (x, y) in [
                (s.estimate_qps, c.estimate_qps),
                (s.demand_qps, c.demand_qps),
                (s.plan_qps, c.plan_qps),
            ] {
                assert!(
                    (x - y).abs() < 1e-9,
                    "{policy:?}\nsimulator {s:?}\ncontroller {c:?}"
                );
            }
        }
    }
}
