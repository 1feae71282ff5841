#![allow(clippy::unwrap_used)]

use infaas_core::LatencyPoint;
use infaas_scheduler::pipeline::{
    cost_per_hour, estimated_accuracy, node_plans, plan, Estimator, NodeConfig, PlanProblem,
    TunerConfig,
};
use infaas_sim::catalogue::{Accelerator, Profile};
use infaas_sim::generate::poisson;
use infaas_sim::pipeline::{replay, ReplayOptions, TraceEstimator};

use super::*;

fn point(batch: usize, ms: f64) -> LatencyPoint {
    LatencyPoint {
        batch,
        p50_ms: ms,
        p99_ms: ms * 1.1,
        mean_ms: ms,
        throughput_per_s: batch as f64 * 1e3 / ms,
    }
}

fn cfg(option: usize, replicas: usize) -> NodeConfig {
    NodeConfig { option, replicas }
}

fn profile(
    model: &str,
    family: &str,
    acc: Accelerator,
    accuracy: f64,
    base: f64,
    per_row: f64,
) -> Profile {
    Profile {
        model: model.into(),
        family: family.into(),
        accelerator: acc,
        accuracy,
        latency: [1, 2, 4, 8, 16]
            .iter()
            .map(|&b| point(b, base + per_row * b as f64))
            .collect(),
    }
}

/// A made-up catalogue shaped like the Proteus one (two families, a small and a large
/// model each, on CPU and a GPU).
fn catalogue() -> Vec<Profile> {
    use Accelerator::{Cpu, GpuPascal};
    vec![
        profile("yolo-small", "yolo", Cpu, 0.40, 30.0, 25.0),
        profile("yolo-small", "yolo", GpuPascal, 0.40, 8.0, 2.0),
        profile("yolo-large", "yolo", Cpu, 0.50, 120.0, 100.0),
        profile("yolo-large", "yolo", GpuPascal, 0.50, 14.0, 4.0),
        profile("resnet-18", "resnet", Cpu, 0.70, 20.0, 18.0),
        profile("resnet-18", "resnet", GpuPascal, 0.70, 10.0, 3.0),
        profile("resnet-50", "resnet", Cpu, 0.77, 60.0, 55.0),
        profile("resnet-50", "resnet", GpuPascal, 0.77, 14.0, 5.0),
    ]
}

fn detect_classify(slo_ms: f64) -> PlanProblem {
    let spec = pipeline("detect-classify").unwrap();
    let mut p = problem_for(&spec, &catalogue(), slo_ms, &OptionSettings::default()).unwrap();
    p.min_accuracy = Some(0.9 * best_accuracy(&p));
    p
}
#[test]
fn early_abort_gives_the_same_verdicts() {
    let p = detect_classify(120.0);
    let arrivals = poisson(&[(60.0, 150.0)], 5);
    let mut quick = TraceEstimator::new(arrivals.clone(), 1);
    let mut full = TraceEstimator::new(arrivals, 1).with_early_abort(false);
    let (mut yes, mut no) = (0, 0);
    for a in 0..p.nodes[0].options.len() {
        for b in (0..p.nodes[1].options.len()).step_by(3) {
            for r in [1, 2, 4] {
                let c = [cfg(a, r), cfg(b, r)];
                let v = quick.feasible(&p, &c);
                assert_eq!(v, full.feasible(&p, &c), "{c:?}");
                assert_eq!(v, full.estimate(&p, &c).meets(&p), "{c:?}");
                if v {
                    yes += 1;
                } else {
                    no += 1;
                }
            }
        }
    }
    assert!(yes > 0 && no > 0, "{yes} feasible, {no} not");
    assert!(quick.stats().aborted > 0);
    assert_eq!(full.stats().aborted, 0);
}

#[test]
fn plans_are_feasible_under_the_estimator_and_cheaper_than_the_start() {
    let p = detect_classify(150.0);
    let arrivals = poisson(&[(60.0, 300.0)], 9);
    let mut e = TraceEstimator::new(arrivals.clone(), 1);
    let plan = plan(&p, &mut e).unwrap();
    assert!(plan.estimate.latency_ms <= p.slo_ms, "{:?}", plan.estimate);
    assert!(plan.accuracy >= p.min_accuracy.unwrap());
    assert!(plan.cost_per_hour < plan.initial_cost_per_hour, "{plan:#?}");
    // An independent estimator without shortcuts agrees.
    let mut check = TraceEstimator::new(arrivals.clone(), 1).with_early_abort(false);
    assert!(check.feasible(&p, &plan.configs));
    // One replica fewer anywhere breaks it or is not allowed (a local optimum).
    for m in 0..p.nodes.len() {
        let mut c = plan.configs.clone();
        if c[m].replicas > 1 {
            c[m].replicas -= 1;
            assert!(!check.feasible(&p, &c), "node {m} had a spare replica");
        }
    }
    // Replaying the planning trace without the tuner sees what the estimator saw.
    let r = replay(
        &p,
        &plan.configs,
        &arrivals,
        &ReplayOptions {
            policy: "plan".into(),
            tuner: None,
            tick_ms: infaas_scheduler::pipeline::tuner::TUNER_PERIOD_MS,
            seed: 1,
        },
    );
    assert_eq!(r.p99_ms, plan.estimate.p99_ms);
    assert!((r.slo_attainment - plan.estimate.attainment).abs() < 1e-12);
    let hours = r.duration_s / 3600.0;
    assert!((r.cost - plan.cost_per_hour * hours).abs() < 1e-9 * plan.cost_per_hour.max(1.0));
}

#[test]
fn per_stage_costs_at_least_the_joint_plan() {
    let p = detect_classify(150.0);
    let arrivals = poisson(&[(60.0, 300.0)], 21);
    let joint = plan(&p, &mut TraceEstimator::new(arrivals.clone(), 1)).unwrap();
    let stages = per_stage(&p, &joint.configs, &arrivals, 1).unwrap();
    let opts = |policy: &str| ReplayOptions {
        policy: policy.into(),
        tuner: None,
        tick_ms: infaas_scheduler::pipeline::tuner::TUNER_PERIOD_MS,
        seed: 1,
    };
    let j = replay(&p, &joint.configs, &arrivals, &opts("joint"));
    let s = replay(&p, &stages.configs, &arrivals, &opts("per-stage"));
    let target = p.percentile / 100.0;
    assert!(
        j.slo_attainment >= target && s.slo_attainment >= target,
        "{} {}",
        j.slo_attainment,
        s.slo_attainment
    );
    assert!(s.cost >= j.cost, "per-stage {} < joint {}", s.cost, j.cost);
    assert!(estimated_accuracy(&p, &stages.configs) >= joint.accuracy - 1e-9);
    // CG-Peak: one hardware kind, one batch size, whole units; no cheaper.
    let cg = cg_peak(&p, &joint.configs, &arrivals).unwrap();
    let nodes = node_plans(&p, &cg.configs);
    assert!(nodes
        .iter()
        .all(|n| n.max_batch == nodes[0].max_batch && n.replicas == nodes[0].replicas));
    assert!(nodes
        .iter()
        .all(|n| n.variant.split('@').nth(1) == nodes[0].variant.split('@').nth(1)));
    assert!(cost_per_hour(&p, &cg.configs) >= joint.cost_per_hour);
}

#[test]
fn the_tuner_follows_a_rising_load() {
    let p = detect_classify(150.0);
    let planning = poisson(&[(60.0, 100.0)], 4);
    let plan = plan(&p, &mut TraceEstimator::new(planning.clone(), 1)).unwrap();
    // Live: the planned rate for a minute, rising to three times that over the next one
    // (5-s steps), then staying there for another.
    let mut live = planning.clone();
    for k in 0..24 {
        let rate = 100.0 + 200.0 * (k.min(12) as f64) / 12.0;
        let from = 60_000.0 + k as f64 * 5_000.0;
        live.extend(
            poisson(&[(5.0, rate)], 100 + k)
                .into_iter()
                .map(|t| t + from),
        );
    }
    let run = |tuner: Option<TunerConfig>| {
        replay(
            &p,
            &plan.configs,
            &live,
            &ReplayOptions {
                policy: "x".into(),
                tuner,
                tick_ms: infaas_scheduler::pipeline::tuner::TUNER_PERIOD_MS,
                seed: 1,
            },
        )
    };
    let fixed = run(None);
    let tuned = run(Some(TunerConfig::from_plan(&p, &plan.configs, &planning)));
    assert!(tuned.scale_outs > 0);
    assert!(tuned.slo_attainment > fixed.slo_attainment);
    assert!(tuned.slo_attainment >= 0.99, "{}", tuned.slo_attainment);
    assert!(tuned.cost > fixed.cost);
    assert!(tuned
        .max_replicas
        .iter()
        .zip(&plan.configs)
        .all(|(m, c)| *m > c.replicas));
    let seconds = (live[live.len() - 1] / 1e3).floor() as usize + 1;
    assert_eq!(tuned.series.len(), seconds);
    let peak = tuned.series.iter().map(|s| s.replicas[0]).max().unwrap();
    assert_eq!(peak, tuned.max_replicas[0]);
}

#[test]
fn catalogue_pipelines_group_options_by_model_and_hardware() {
    let p = detect_classify(150.0);
    // Two models on two accelerators, five batch sizes each.
    assert_eq!(p.nodes[0].options.len(), 20);
    let groups: std::collections::BTreeSet<u32> =
        p.nodes[0].options.iter().map(|o| o.group).collect();
    assert_eq!(groups.len(), 4);
    let i = find_option(&p.nodes[0], "yolo-large", "gpu_pascal", 4).unwrap();
    let j = find_option(&p.nodes[0], "yolo-large", "gpu_pascal", 16).unwrap();
    assert_eq!(p.nodes[0].options[i].group, p.nodes[0].options[j].group);
    assert!(PIPELINES.iter().all(|n| pipeline(n).is_some()));
    let spec = pipeline("three-stage").unwrap();
    assert!(matches!(
        problem_for(&spec, &catalogue(), 150.0, &OptionSettings::default()),
        Err(PipelineError::NoProfile { family, .. }) if family == "efficientnet"
    ));
    let dag = pipeline("social-dag").unwrap();
    assert_eq!(dag.stages.len(), 5);
}
