//! Branches: which queries take which branch of a pipeline (seeded draws), and the batch
//! service times of an option, shared by the estimator and the runner.

use std::hash::{Hash, Hasher};

use infaas_scheduler::pipeline::{PlanOption, PlanProblem};

use crate::generate::mix;

/// The uniform draw in [0, 1) that decides whether query `query` takes the branch into node
/// `node` (it does when the draw is below the node's branch probability).
pub fn branch_draw(seed: u64, query: usize, node: usize) -> f64 {
    let h = mix(mix(seed ^ mix(node as u64 + 1)) ^ query as u64);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Which queries reach which node (under one problem and seed).
#[derive(Debug, Clone)]
pub(super) struct Reach {
    pub(super) fingerprint: u64,
    /// Per node, the queries that reach it, ascending.
    pub(super) reached: Vec<Vec<u32>>,
    /// Per node, per query: whether it reaches the node.
    pub(super) member: Vec<Vec<bool>>,
    /// Per node, its ancestors and itself, ascending.
    pub(super) ancestors: Vec<Vec<usize>>,
}

pub(super) fn fingerprint(problem: &PlanProblem) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    problem.nodes.len().hash(&mut h);
    for n in &problem.nodes {
        n.parents.hash(&mut h);
        n.branch_probability.to_bits().hash(&mut h);
        n.options.len().hash(&mut h);
        for o in &n.options {
            o.variant.id.hash(&mut h);
            o.variant.max_batch.hash(&mut h);
            for p in &o.variant.latency {
                p.batch.hash(&mut h);
                p.mean_ms.to_bits().hash(&mut h);
            }
        }
    }
    h.finish()
}

pub(super) fn reach(problem: &PlanProblem, queries: usize, seed: u64) -> Reach {
    let nodes = &problem.nodes;
    let mut member: Vec<Vec<bool>> = Vec::with_capacity(nodes.len());
    let mut reached = Vec::with_capacity(nodes.len());
    let mut ancestors: Vec<Vec<usize>> = Vec::with_capacity(nodes.len());
    for (m, n) in nodes.iter().enumerate() {
        let p = n.branch_probability;
        let mut mem = vec![false; queries];
        let mut list = Vec::new();
        for (q, slot) in mem.iter_mut().enumerate() {
            let upstream = n.parents.is_empty() || n.parents.iter().any(|&a| member[a][q]);
            if upstream && (p >= 1.0 || branch_draw(seed, q, m) < p) {
                *slot = true;
                list.push(q as u32);
            }
        }
        let mut anc: Vec<usize> = n
            .parents
            .iter()
            .flat_map(|&a| ancestors[a].iter().copied())
            .collect();
        anc.push(m);
        anc.sort_unstable();
        anc.dedup();
        ancestors.push(anc);
        member.push(mem);
        reached.push(list);
    }
    Reach {
        fingerprint: fingerprint(problem),
        reached,
        member,
        ancestors,
    }
}

/// Batch service times of an option: `svc[b]` for `b` in `1..=max_batch` (the profile's mean
/// at the profiled batch holding `b`); `svc[0]` is unused.
pub(super) fn service_table(option: &PlanOption) -> Vec<f64> {
    let v = &option.variant;
    (0..=v.max_batch.max(1))
        .map(|b| {
            v.latency_at(b.max(1))
                .map_or(f64::INFINITY, |(p, k)| p.mean_ms * k)
        })
        .collect()
}
