#![allow(clippy::unwrap_used)]

use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::pipeline::{plan, Estimator, NodeConfig, PlanNode, PlanOption, PlanProblem};
use infaas_scheduler::VariantEntry;

use super::*;
use crate::generate::poisson;

fn point(batch: usize, ms: f64) -> LatencyPoint {
    LatencyPoint {
        batch,
        p50_ms: ms,
        p99_ms: ms * 1.1,
        mean_ms: ms,
        throughput_per_s: batch as f64 * 1e3 / ms,
    }
}

fn variant(name: &str, hw: HardwareKind, accuracy: f64, points: &[(usize, f64)]) -> VariantEntry {
    VariantEntry {
        id: name.into(),
        name: name.into(),
        model: name.into(),
        app: "app".into(),
        accuracy,
        hardware: hw,
        threads: 1,
        max_batch: points.last().map_or(1, |p| p.0),
        load_ms: 1_000.0,
        memory_bytes: 1 << 30,
        latency: points.iter().map(|&(b, ms)| point(b, ms)).collect(),
    }
}

fn node(name: &str, parents: &[usize], p: f64, variants: Vec<VariantEntry>) -> PlanNode {
    PlanNode {
        name: name.into(),
        parents: parents.to_vec(),
        branch_probability: p,
        options: variants
            .into_iter()
            .enumerate()
            .map(|(i, variant)| PlanOption {
                variant,
                group: i as u32,
            })
            .collect(),
    }
}

fn cfg(option: usize, replicas: usize) -> NodeConfig {
    NodeConfig { option, replicas }
}

#[test]
fn measured_overhead_adds_to_every_latency_and_to_the_verdict() {
    let a = variant("a", HardwareKind::Gpu, 0.9, &[(1, 10.0), (2, 15.0)]);
    let single = PlanProblem::new(vec![node("a", &[], 1.0, vec![a])], 16.0);
    let arrivals = vec![0.0, 100.0, 200.0];
    let mut plain = TraceEstimator::new(arrivals.clone(), 7);
    assert_eq!(
        plain.latencies(&single, &[cfg(0, 1)]),
        vec![10.0, 10.0, 10.0]
    );
    assert!(plain.feasible(&single, &[cfg(0, 1)]));
    // A constant 5 ms overhead: every latency 15 ms, still within 16 ms.
    let mut five = TraceEstimator::new(arrivals.clone(), 7).with_overhead(&[5.0]);
    assert_eq!(
        five.latencies(&single, &[cfg(0, 1)]),
        vec![15.0, 15.0, 15.0]
    );
    assert!(five.feasible(&single, &[cfg(0, 1)]));
    let e = five.estimate(&single, &[cfg(0, 1)]);
    assert_eq!((e.p99_ms, e.attainment), (15.0, 1.0));
    // 7 ms: every query misses, in the early-aborting check and the full estimate alike.
    let mut seven = TraceEstimator::new(arrivals.clone(), 7).with_overhead(&[7.0]);
    assert!(!seven.feasible(&single, &[cfg(0, 1)]));
    assert_eq!(seven.estimate(&single, &[cfg(0, 1)]).attainment, 0.0);
    // An overhead that alone passes the SLO is a miss too.
    let mut huge = TraceEstimator::new(arrivals, 7).with_overhead(&[50.0]);
    assert_eq!(huge.estimate(&single, &[cfg(0, 1)]).attainment, 0.0);
}

#[test]
fn batches_and_stages_are_simulated_exactly() {
    // 3 arrivals, 1 replica taking up to 2 queries: batch of 1 takes 10 ms, of 2 15 ms.
    let a = variant("a", HardwareKind::Gpu, 0.9, &[(1, 10.0), (2, 15.0)]);
    let b = variant("b", HardwareKind::Cpu, 0.9, &[(1, 5.0)]);
    let single = PlanProblem::new(vec![node("a", &[], 1.0, vec![a.clone()])], 30.0);
    let mut e = TraceEstimator::new(vec![0.0, 1.0, 2.0], 7);
    assert_eq!(e.arrival_rate_per_s(), Some(1500.0));
    // q0 alone at 0-10; q1 and q2 queued by then, one batch 10-25.
    assert_eq!(e.latencies(&single, &[cfg(0, 1)]), vec![10.0, 24.0, 23.0]);
    // Two replicas: q1 starts alone at 1 on the second; q2 waits for the first one.
    assert_eq!(e.latencies(&single, &[cfg(0, 2)]), vec![10.0, 10.0, 18.0]);
    // A second stage of 5 ms per query: arrivals 10, 25, 25; 15, 30, 35.
    let mut chain = PlanProblem::new(
        vec![node("a", &[], 1.0, vec![a]), node("b", &[0], 1.0, vec![b])],
        30.0,
    );
    assert_eq!(
        e.latencies(&chain, &[cfg(0, 1), cfg(0, 1)]),
        vec![15.0, 29.0, 33.0]
    );
    chain.percentile = 100.0;
    assert!(!e.feasible(&chain, &[cfg(0, 1), cfg(0, 1)]));
    assert_eq!(e.stats().aborted, 1, "q2 missed: no budget left at P100");
    let est = e.estimate(&chain, &[cfg(0, 1), cfg(0, 1)]);
    assert_eq!(est.latency_ms, 33.0);
    assert!((est.attainment - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(est.per_node_p99_ms, vec![24.0, 10.0]);
    assert!((est.per_node_queue_ms[1] - 5.0 / 3.0).abs() < 1e-12);
    // The cache: a change at b recomputes b only.
    let before = e.stats();
    e.estimate(&chain, &[cfg(0, 1), cfg(0, 2)]);
    let after = e.stats();
    assert_eq!(
        (after.stages - before.stages, after.hits - before.hits),
        (1, 1)
    );
}

#[test]
fn switch_branches_reduce_downstream_load_proportionally() {
    let v = |n: &str| variant(n, HardwareKind::Cpu, 0.9, &[(1, 10.0)]);
    let problem = |p: f64| {
        let mut pb = PlanProblem::new(
            vec![
                node("root", &[], 1.0, vec![v("r")]),
                node("branch", &[0], p, vec![v("b")]),
                node("leaf", &[1], 0.5, vec![v("l")]),
            ],
            100.0,
        );
        pb.max_replicas = 100;
        pb
    };
    let arrivals = poisson(&[(200.0, 500.0)], 3);
    let n = arrivals.len() as f64;
    let mut e = TraceEstimator::new(arrivals.clone(), 11);
    let reached = e.reached(&problem(0.3));
    assert_eq!(reached[0] as f64, n);
    assert!((reached[1] as f64 / n - 0.3).abs() < 0.01, "{reached:?}");
    assert!((reached[2] as f64 / n - 0.15).abs() < 0.01, "{reached:?}");
    // The same draws every time, other ones with another seed.
    assert_eq!(
        TraceEstimator::new(arrivals.clone(), 11).reached(&problem(0.3)),
        reached
    );
    assert_ne!(
        TraceEstimator::new(arrivals.clone(), 12).reached(&problem(0.3)),
        reached
    );
    // The planner gives the branch replicas in proportion: 10 ms a query is 100 queries/s
    // a replica, so 500 queries/s need at least 5 at the root, 150 at least 2.
    let full = plan(
        &problem(1.0),
        &mut TraceEstimator::new(arrivals.clone(), 11),
    )
    .unwrap();
    let third = plan(&problem(0.3), &mut TraceEstimator::new(arrivals, 11)).unwrap();
    let (r1, r3) = (full.configs[1].replicas, third.configs[1].replicas);
    assert!(r1 >= 5 && r3 >= 2, "{r1} {r3}");
    assert!(r3 as f64 <= (r1 as f64 * 0.3).ceil() + 1.0, "{r1} {r3}");
    assert!(third.configs[2].replicas <= third.configs[1].replicas);
}
