//! The resource manager's tests, on a Proteus-like catalogue: YOLOv5 detection and ResNet
//! classification, each model on a CPU and a GPU pool, batches 1-16, p99 latencies linear in
//! the batch (`base + per_row * b`).

use std::time::Duration;

use infaas_core::HardwareKind;

use super::*;
use crate::pipeline::tests::{batch_options, node};
use crate::pipeline::PlanOption;

/// (model, accuracy, GPU base ms, GPU ms per row, CPU base ms, CPU ms per row).
type Model = (&'static str, f64, f64, f64, f64, f64);

const YOLO: [Model; 5] = [
    ("yolov5n", 0.28, 6.0, 1.0, 20.0, 12.0),
    ("yolov5s", 0.37, 7.0, 2.0, 40.0, 25.0),
    ("yolov5m", 0.45, 10.0, 4.5, 90.0, 60.0),
    ("yolov5l", 0.49, 14.0, 8.0, 160.0, 110.0),
    ("yolov5x", 0.51, 20.0, 14.0, 280.0, 200.0),
];

const RESNET: [Model; 5] = [
    ("resnet18", 0.70, 3.0, 0.5, 10.0, 6.0),
    ("resnet34", 0.73, 4.0, 0.9, 18.0, 11.0),
    ("resnet50", 0.76, 5.0, 1.5, 25.0, 18.0),
    ("resnet101", 0.77, 8.0, 2.8, 45.0, 33.0),
    ("resnet152", 0.78, 11.0, 4.0, 65.0, 48.0),
];

/// Every model of `family` on CPU and GPU, max batches 1-16 (one group per model and hardware).
fn options(family: &[Model]) -> Vec<PlanOption> {
    let mut out = Vec::new();
    for (m, &(name, acc, gb, gr, cb, cr)) in family.iter().enumerate() {
        let g = 2 * m as u32;
        out.extend(batch_options(name, HardwareKind::Gpu, acc, 16, gb, gr, g));
        out.extend(batch_options(
            name,
            HardwareKind::Cpu,
            acc,
            16,
            cb,
            cr,
            g + 1,
        ));
    }
    out
}

const WORKERS: [(&str, usize); 2] = [("cpu", 12), ("gpu", 8)];

/// Detection then classification, SLO 300 ms (150 ms of processing), 12 CPU + 8 GPU workers.
fn two_task(demand: f64) -> LokiProblem {
    let nodes = vec![
        node("detect", &[], 1.0, options(&YOLO)),
        node("classify", &[0], 1.0, options(&RESNET)),
    ];
    LokiProblem::new(nodes, demand, 300.0, WORKERS)
}

fn one_task(demand: f64) -> LokiProblem {
    let nodes = vec![node("classify", &[], 1.0, options(&RESNET))];
    LokiProblem::new(nodes, demand, 300.0, WORKERS)
}

fn settings() -> LokiSettings {
    LokiSettings {
        time_limit: Duration::from_secs(20),
        ..LokiSettings::default()
    }
}

fn max_accuracy(p: &LokiProblem, task: usize) -> f64 {
    p.nodes[task]
        .options
        .iter()
        .map(|o| o.variant.accuracy)
        .fold(0.0, f64::max)
}

/// Best throughput of one instance of `(model, hw)` within `budget_ms` (batches 1-16).
fn best_qps(m: &Model, gpu: bool, budget_ms: f64) -> f64 {
    let (base, per_row) = if gpu { (m.2, m.3) } else { (m.4, m.5) };
    [1usize, 2, 4, 8, 16]
        .iter()
        .map(|&b| (b, base + per_row * b as f64))
        .filter(|&(_, ms)| ms <= budget_ms)
        .map(|(b, ms)| b as f64 / ms * 1000.0)
        .fold(0.0, f64::max)
}

#[test]
fn hardware_scaling_uses_the_most_accurate_variant_and_fewest_instances() {
    let demand = 500.0;
    let p = one_task(demand);
    let a = hardware_scaling(&p, &settings())
        .expect("valid")
        .expect("feasible");
    assert_eq!(a.mode, Mode::HardwareScaling);
    assert_eq!(a.status, SolveStatus::Optimal);
    assert!((a.served_fraction - 1.0).abs() < 1e-9);
    let top = max_accuracy(&p, 0);
    assert!(a.tasks[0].iter().all(|pl| pl.accuracy == top), "{a:#?}");
    // The fewest instances, by brute force over the two pools.
    let (qg, qc) = (
        best_qps(&RESNET[4], true, 150.0),
        best_qps(&RESNET[4], false, 150.0),
    );
    let fewest = (0..=8)
        .flat_map(|g| (0..=12).map(move |c| (g, c)))
        .filter(|&(g, c)| g as f64 * qg + c as f64 * qc >= demand)
        .map(|(g, c)| g + c)
        .min()
        .expect("feasible");
    assert_eq!(a.instances(), fewest, "{a:#?}");
    verify(&p, &a).expect("holds");

    // Two tasks: every placement on its task's most accurate model.
    let p = two_task(150.0);
    let a = allocate(&p, &settings()).expect("valid");
    assert_eq!(a.mode, Mode::HardwareScaling);
    for t in 0..2 {
        let top = max_accuracy(&p, t);
        assert!(a.tasks[t].iter().all(|pl| pl.accuracy == top), "{a:#?}");
    }
    assert!((a.relative_accuracy - 1.0).abs() < 1e-9);
    verify(&p, &a).expect("holds");
}

#[test]
fn accuracy_scaling_trades_accuracy_when_the_demand_exceeds_the_most_accurate_capacity() {
    let p = two_task(700.0);
    assert!(hardware_scaling(&p, &settings()).expect("valid").is_none());
    let a = allocate(&p, &settings()).expect("valid");
    assert_eq!(a.mode, Mode::AccuracyScaling);
    assert_eq!(a.status, SolveStatus::Optimal);
    assert!((a.served_fraction - 1.0).abs() < 1e-6, "{a:#?}");
    assert!(a.relative_accuracy < 1.0 - 1e-6, "{}", a.relative_accuracy);
    assert!(a.relative_accuracy > 0.5, "{}", a.relative_accuracy);
    let best = max_accuracy(&p, 0) * max_accuracy(&p, 1);
    assert!(a.accuracy < best && a.accuracy > 0.0);
    verify(&p, &a).expect("holds");
}

#[test]
fn accuracy_scaling_serves_a_fraction_when_even_the_fastest_cannot_carry_it() {
    let p = two_task(50_000.0);
    let a = allocate(&p, &settings()).expect("valid");
    assert_eq!(a.mode, Mode::AccuracyScaling);
    assert!(
        a.served_fraction > 0.0 && a.served_fraction < 1.0,
        "{}",
        a.served_fraction
    );
    // The whole cluster on the fastest models bounds what can be served.
    let bound = 8.0 * best_qps(&YOLO[0], true, 150.0) + 12.0 * best_qps(&YOLO[0], false, 150.0);
    assert!(a.served_fraction * p.demand_qps <= bound + 1e-6);
    verify(&p, &a).expect("holds");
}

/// Largest demand (q/s, to 1%) for which `carried` holds, by bisection.
fn largest(carried: impl Fn(f64) -> bool) -> f64 {
    let (mut lo, mut hi) = (1.0, 20_000.0);
    assert!(carried(lo));
    while hi / lo > 1.01 {
        let mid = (lo * hi).sqrt();
        if carried(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

#[test]
fn accuracy_scaling_carries_more_demand_than_hardware_scaling() {
    let s = settings();
    let at_max = largest(|d| hardware_scaling(&two_task(d), &s).expect("valid").is_some());
    let scaled = largest(|d| {
        accuracy_scaling(&two_task(d), &s)
            .expect("valid")
            .served_fraction
            >= 1.0 - 1e-6
    });
    let ratio = scaled / at_max;
    eprintln!(
        "largest demand carried: {at_max:.0} q/s at max accuracy, {scaled:.0} q/s with accuracy scaling (x{ratio:.2})"
    );
    assert!(ratio > 1.5, "{ratio}");
}

#[test]
fn every_path_with_traffic_meets_half_the_slo() {
    for d in [100.0, 250.0, 700.0, 2000.0] {
        let p = two_task(d);
        let a = allocate(&p, &settings()).expect("valid");
        // Solved, not the fallback: the MILP itself keeps to the budget.
        assert_eq!(a.status, SolveStatus::Optimal, "demand {d}");
        assert!(!a.paths.is_empty());
        for path in &a.paths {
            let sum: f64 = path
                .tasks
                .iter()
                .zip(&path.placements)
                .map(|(&t, &i)| a.tasks[t][i].budget_ms)
                .sum();
            assert!((sum - path.latency_ms).abs() < 1e-9);
            assert!(sum <= p.slo_ms / 2.0 + 1e-9, "demand {d}: {path:?}");
        }
        verify(&p, &a).expect("holds");
    }
    // Without the path constraint the plan at max accuracy would run both tasks at their
    // largest batch that fits alone (yolov5x b8 = 132 ms, resnet152 b16 = 75 ms).
    let a = hardware_scaling(&two_task(250.0), &settings())
        .expect("valid")
        .expect("feasible");
    assert_eq!(a.status, SolveStatus::Optimal);
    let biggest = |t: usize| a.tasks[t].iter().map(|p| p.batch).max().unwrap_or(0);
    assert!(biggest(0) < 8 || biggest(1) < 16, "{a:#?}");
}

#[test]
fn communication_latency_shrinks_the_budget() {
    let mut p = two_task(250.0);
    p.comm_latency_ms = 20.0;
    let a = allocate(&p, &settings()).expect("valid");
    for path in &a.paths {
        assert!(path.latency_ms <= 150.0 - 40.0 + 1e-9, "{path:?}");
    }
    verify(&p, &a).expect("holds");
}

#[test]
fn multiplicative_factor_raises_downstream_instances() {
    let mut p = two_task(100.0);
    let base = hardware_scaling(&p, &settings())
        .expect("valid")
        .expect("feasible");
    for o in &p.nodes[0].options {
        p.multiplicative.insert((0, o.group), 3.0);
    }
    let more = hardware_scaling(&p, &settings())
        .expect("valid")
        .expect("feasible");
    let count = |a: &Allocation, t: usize| a.tasks[t].iter().map(|p| p.instances).sum::<usize>();
    let load = |a: &Allocation, t: usize| a.tasks[t].iter().map(|p| p.load_qps).sum::<f64>();
    assert!(count(&more, 1) > count(&base, 1), "{base:#?}\n{more:#?}");
    assert!((load(&base, 1) - 100.0).abs() < 1e-6);
    assert!((load(&more, 1) - 300.0).abs() < 1e-6);
    verify(&p, &more).expect("holds");
}

#[test]
fn a_branching_tree_splits_alike_on_every_task_path() {
    let nodes = vec![
        node("detect", &[], 1.0, options(&YOLO)),
        node("cars", &[0], 0.6, options(&RESNET)),
        node("faces", &[0], 0.4, options(&RESNET)),
    ];
    let p = LokiProblem::new(nodes, 600.0, 300.0, WORKERS);
    let a = allocate(&p, &settings()).expect("valid");
    assert!((a.served_fraction - 1.0).abs() < 1e-6);
    verify(&p, &a).expect("holds");
    // The two task paths carry the same traffic through each detection placement.
    for (i, _) in a.tasks[0].iter().enumerate() {
        let via = |leaf: usize| -> f64 {
            a.paths
                .iter()
                .filter(|s| s.tasks.last() == Some(&leaf) && s.placements[0] == i)
                .map(|s| s.ratio)
                .sum()
        };
        assert!((via(1) - via(2)).abs() < 1e-6);
    }
    let load1: f64 = a.tasks[1].iter().map(|p| p.load_qps).sum();
    assert!((load1 - 360.0).abs() < 1e-6, "{load1}");
}

#[test]
fn joins_are_refused() {
    let nodes = vec![
        node("a", &[], 1.0, options(&RESNET)),
        node("b", &[0], 1.0, options(&RESNET)),
        node("c", &[0, 1], 1.0, options(&RESNET)),
    ];
    let p = LokiProblem::new(nodes, 10.0, 300.0, WORKERS);
    assert!(matches!(
        allocate(&p, &settings()),
        Err(LokiError::NotATree { parents: 2, .. })
    ));
    let mut p = two_task(10.0);
    p.slo_ms = 2.0;
    assert!(
        matches!(allocate(&p, &settings()), Err(LokiError::Invalid(m)) if m.contains("detect"))
    );
}

#[test]
fn the_greedy_fallback_carries_the_demand() {
    for d in [150.0, 500.0, 700.0] {
        let p = two_task(d);
        let g = greedy(&p, &settings()).expect("valid");
        assert_eq!(g.status, SolveStatus::Fallback);
        assert!((g.served_fraction - 1.0).abs() < 1e-9, "demand {d}: {g:#?}");
        verify(&p, &g).expect("holds");
        // One variant per task; no better than the MILP.
        assert!(g.tasks.iter().all(|ps| ps.len() == 1));
        let m = allocate(&p, &settings()).expect("valid");
        assert!(g.relative_accuracy <= m.relative_accuracy + 1e-9);
    }
    // Above what it can carry, the greedy serves the largest fraction its pools allow.
    let p = two_task(50_000.0);
    let g = greedy(&p, &settings()).expect("valid");
    assert!(g.served_fraction > 0.0 && g.served_fraction < 1.0);
    verify(&p, &g).expect("holds");
}

#[test]
fn a_tiny_time_limit_still_gives_a_valid_allocation() {
    let p = two_task(700.0);
    let s = LokiSettings {
        time_limit: Duration::from_millis(1),
        ..LokiSettings::default()
    };
    let a = allocate(&p, &s).expect("valid");
    assert_ne!(a.status, SolveStatus::Optimal);
    assert!(a.served_fraction > 0.99, "{a:#?}");
    verify(&p, &a).expect("holds");
}

#[test]
fn pruning_keeps_the_most_accurate_and_respects_the_path_cap() {
    let p = two_task(700.0);
    let prep = prep::Prepared::new(&p).expect("valid");
    let s = LokiSettings {
        max_paths: 16,
        ..LokiSettings::default()
    };
    let cand = prep.candidates(&s);
    let paths: usize = cand.iter().map(Vec::len).product();
    assert!(paths <= 16, "{paths}");
    for (t, vs) in cand.iter().enumerate() {
        let top = max_accuracy(&p, t);
        let kept_top = vs.iter().any(|&v| prep.variants[v].accuracy == top);
        assert!(kept_top, "task {t}");
    }
    // A dominated variant (same pool, less accurate, slower at every batch) is dropped.
    let mut slow = options(&RESNET[..1]);
    for o in &mut slow {
        o.group += 100;
        o.variant.accuracy = 0.5;
        for l in &mut o.variant.latency {
            l.p99_ms *= 3.0;
        }
    }
    let mut p = one_task(100.0);
    p.nodes[0].options.extend(slow);
    let prep = prep::Prepared::new(&p).expect("valid");
    let cand = prep.candidates(&LokiSettings::default());
    assert!(cand[0].iter().all(|&v| prep.variants[v].group < 100));
    assert_eq!(cand[0].len(), 10);
}

#[test]
fn default_pools_follow_the_catalogue_names() {
    let mut v = options(&RESNET[..1]).remove(0).variant;
    assert_eq!(default_pool(&v), "gpu");
    v.id = "resnet18_v1@gpu_pascal#b4".into();
    assert_eq!(default_pool(&v), "gpu_pascal");
}

#[test]
fn measured_path_accuracies_steer_the_traffic() {
    let mut p = two_task(700.0);
    // yolov5n and resnet18 on GPU (groups 0 and 0) measured better together than any pair.
    p.path_accuracy.insert(vec![(0, 0), (1, 0)], 0.9);
    let a = allocate(&p, &settings()).expect("valid");
    verify(&p, &a).expect("holds");
    let best = a
        .paths
        .iter()
        .max_by(|x, y| x.ratio.total_cmp(&y.ratio))
        .expect("paths");
    assert_eq!(best.accuracy, 0.9);
    let groups: Vec<u32> = best
        .tasks
        .iter()
        .zip(&best.placements)
        .map(|(&t, &i)| a.tasks[t][i].group)
        .collect();
    assert_eq!(groups, vec![0, 0]);
    assert!(a.accuracy > 0.5, "{}", a.accuracy);
}
