//! The accuracy ceiling: the catalogue's bound on the capacity at a relative accuracy, in the
//! plans' own terms.

use std::collections::BTreeMap;
use std::time::Instant;

use infaas_scheduler::loki::{
    accuracy_scaling, Allocation, LokiProblem, LokiSettings, SolveStatus,
};
use serde::Serialize;

use super::capacity::demand_search;
use super::plans::Overload;
use super::problem::OverloadError;

impl Overload {
    /// The catalogue's ceiling on the capacity at relative accuracy ≥ `min_relative_accuracy`
    /// (the 13% drop: 0.87), in the plans' own terms: the largest steady demand for
    /// which SOME allocation of the cluster carries the whole demand with expected relative
    /// accuracy ≥ `min_relative_accuracy`, found by the search of
    /// [`Overload::planned_accuracy_scaling_capacity`] on [`accuracy_scaling`] (to 1%).
    ///
    /// **The measure** is the simulator's (the `cap13` column's): per query, the mean over the
    /// root-to-end paths it ran of their accuracy over the same paths on the most accurate
    /// variants ([`Overload::reference_accuracy`]). Its expectation is linear in the plan's
    /// path ratios, so the problem's [`LokiProblem::path_accuracy`] is set so that the MILP's
    /// relative accuracy (per task path, weighted by its leaf's reach) is exactly it. On
    /// chains it is the MILP's own measure; on `cascade` and `traffic` it weighs the later
    /// tasks less than Loki's (a query that takes no branch is judged on the tasks it ran),
    /// so loki's plans do not maximise it there.
    ///
    /// **Why it bounds every plan.** At demand `d` the accuracy-scaling MILP maximises
    /// `100 s + s r` (`s` the served fraction, `r` the relative accuracy; less 1e-6 an
    /// instance; `infaas_scheduler::loki::milp`): it may give up to about 1% of the demand for
    /// accuracy, so served ≥ 99.9% and `r ≥ a` from its plan would not be a sound test. If any
    /// plan carries the whole `d` at `r ≥ a`, the optimum's value is at least `100 + a`; so `d`
    /// counts as carried when the plan has `s (100 + r) ≥ 100 + a` (less 1e-4 for the
    /// tie-break and the solver's tolerances), and a demand that fails it when solved to
    /// optimality admits no such plan. A plan that passes has `s ≥ (100 + a) / 101` (99.87% at
    /// 0.87) and `r ≥ a`: it carries all of `s d`. What a plan carries, it carries at any
    /// lower demand, so the demands carried are an interval and the search applies: the
    /// ceiling lies between 0.9987 [`AccuracyCeiling::qps`] and
    /// [`AccuracyCeiling::fails_at_qps`]. The candidates are every variant no other variant of
    /// its task and pool dominates (at least as accurate, no slower at any batch: a swap that
    /// loses nothing), not loki's 256 paths (six candidates a task on three-task pipelines).
    ///
    /// **Limits.** It is a bound on plans in Loki's model: latency budgets are the profiled p99
    /// (the catalogue's 90th percentile) of a variant's batch, processing gets half the SLO,
    /// one batch a variant, queues aside; the simulator serves batches in their mean time and
    /// loki's plans are made for the demand over the manager's target utilisation
    /// ([`ManagerSettings::utilisation`]), so a simulated capacity is not bounded by it in all
    /// cases. Each solve has
    /// [`OverloadSettings::ceiling_time_limit`]: one stopped by it (or the greedy fallback)
    /// may miss a plan, and [`AccuracyCeiling::proved`] says whether every demand judged not
    /// carried was solved to optimality.
    pub fn accuracy_ceiling(
        &self,
        min_relative_accuracy: f64,
    ) -> Result<AccuracyCeiling, OverloadError> {
        let started = Instant::now();
        let problem = self.query_accuracy_problem()?;
        let s = LokiSettings {
            time_limit: self.settings.ceiling_time_limit,
            max_paths: usize::MAX,
            max_candidates: usize::MAX,
            ..self.settings.loki
        };
        let a = min_relative_accuracy;
        let mut proved = true;
        let mut probes = Vec::new();
        let (qps, fails_at_qps) = demand_search(self.full_capacity_qps, CEILING_TOLERANCE, |d| {
            let plan = accuracy_scaling(&problem.with_demand(d), &s)?;
            let carried = ceiling_carries(&plan, a);
            let optimal = plan.status == SolveStatus::Optimal;
            proved &= carried || optimal;
            probes.push(CeilingProbe {
                demand_qps: d,
                served_fraction: plan.served_fraction,
                relative_accuracy: plan.relative_accuracy,
                optimal,
                carried,
                solve_s: plan.solve_ms / 1e3,
            });
            Ok(carried)
        })?;
        Ok(AccuracyCeiling {
            min_relative_accuracy: a,
            qps,
            fails_at_qps: fails_at_qps.is_finite().then_some(fails_at_qps),
            proved,
            probes,
            solve_s: started.elapsed().as_secs_f64(),
        })
    }

    /// The pipeline's problem with [`LokiProblem::path_accuracy`] set so that an allocation's
    /// relative accuracy is the simulator's expected relative accuracy of a query (see
    /// [`Overload::accuracy_ceiling`]).
    ///
    /// A query runs a random set of tasks `S` (each child of a task it runs with the child's
    /// branch probability) and its relative accuracy is the mean, over the tasks `t` of `S`
    /// that end a path (no child in `S`), of `R_t`, the product of `accuracy / reference` on
    /// the path from the root to `t`. Its expectation is `Σ_t π_t R_t` with
    /// `π_t = E[1{t ends a path} / ends]` (by enumerating the sets: at most 2^7). `R_t` depends
    /// on the variants from the root to `t`, which every task path through `t` agrees on
    /// (Loki's split constraints), so each `π_t R_t` is shared among those paths: `β_{t,k}`
    /// with `Σ_k β_{t,k} = π_t` and, per task path `k`, `Σ_t β_{t,k} = w_k`, the MILP's
    /// weight of `k` (its leaf's reach over the sum of all leaves'). Then the path accuracy
    /// `Â_k(p) = Σ_t β_{t,k} R_t(p) / w_k` is 1 on the most accurate variants (the path's
    /// best, which normalises it) and the MILP's `Σ_k w_k Σ_p c(p) Â_k(p)` is the expected
    /// measure times the served fraction. The shares are assigned leaves first (each task's
    /// paths form a subtree's leaves), which finds them whenever they exist; an error when
    /// they do not (some subtree's tasks weigh more than its leaves' reach: none of
    /// [`OVERLOAD_PIPELINES`]).
    pub(super) fn query_accuracy_problem(&self) -> Result<LokiProblem, OverloadError> {
        let nodes = &self.problem.nodes;
        let n = nodes.len();
        let parent = |t: usize| nodes[t].parents.first().copied();
        let branch: Vec<f64> = nodes
            .iter()
            .map(|node| node.branch_probability.clamp(0.0, 1.0))
            .collect();
        // π_t over the sets of tasks a query can run (closed under parents, root included).
        let mut pi = vec![0.0f64; n];
        for set in 0u32..(1u32 << n) {
            let runs = |t: usize| set & (1 << t) != 0;
            if !runs(0) || (1..n).any(|t| runs(t) && parent(t).is_some_and(|p| !runs(p))) {
                continue;
            }
            let prob: f64 = (1..n)
                .filter(|&t| parent(t).is_some_and(runs))
                .map(|t| if runs(t) { branch[t] } else { 1.0 - branch[t] })
                .product();
            let ends: Vec<usize> = (0..n)
                .filter(|&t| runs(t) && !self.children[t].iter().any(|&c| runs(c)))
                .collect();
            for &t in &ends {
                pi[t] += prob / ends.len() as f64;
            }
        }
        // Task paths (root to each leaf, leaves in index order) and their weights.
        let paths: Vec<Vec<usize>> = (0..n)
            .filter(|&t| self.children[t].is_empty())
            .map(|leaf| {
                let mut path = vec![leaf];
                while let Some(p) = path.last().and_then(|&t| parent(t)) {
                    path.push(p);
                }
                path.reverse();
                path
            })
            .collect();
        let leaves: f64 = paths
            .iter()
            .filter_map(|p| p.last())
            .map(|&l| self.reach[l])
            .sum();
        if leaves <= 0.0 {
            return Err(OverloadError::Ceiling(
                "no leaf of the tree is ever reached".into(),
            ));
        }
        let weight: Vec<f64> = paths
            .iter()
            .filter_map(|p| p.last())
            .map(|&l| self.reach[l] / leaves)
            .collect();
        // β, deepest tasks first (indices are topological).
        let mut left = weight.clone();
        let mut beta = vec![vec![0.0f64; n]; paths.len()];
        for t in (0..n).rev() {
            let mut supply = pi[t];
            for (k, path) in paths.iter().enumerate() {
                if supply <= 0.0 || !path.contains(&t) {
                    continue;
                }
                let take = supply.min(left[k].max(0.0));
                beta[k][t] += take;
                left[k] -= take;
                supply -= take;
            }
            if supply > 1e-9 {
                return Err(OverloadError::Ceiling(format!(
                    "the tasks from '{}' down weigh more in the queries' accuracy than the \
                     MILP's weights of their paths",
                    nodes[t].name
                )));
            }
        }
        // Per task, its variants (groups) and their accuracy over the reference, at most 1
        // (a variant more accurate than the reference is not usable: it never carries traffic).
        let groups: Vec<Vec<(u32, f64)>> = nodes
            .iter()
            .enumerate()
            .map(|(t, node)| {
                let mut g: BTreeMap<u32, f64> = BTreeMap::new();
                for o in &node.options {
                    let rho = (o.variant.accuracy / self.reference_accuracy[t].max(1e-12)).min(1.0);
                    let e = g.entry(o.group).or_insert(rho);
                    *e = e.max(rho);
                }
                g.into_iter().collect()
            })
            .collect();
        if let Some(t) = groups.iter().position(Vec::is_empty) {
            return Err(OverloadError::Ceiling(format!(
                "task '{}' has no variant",
                nodes[t].name
            )));
        }
        let mut problem = self.problem.clone();
        problem.path_accuracy.clear();
        for (k, path) in paths.iter().enumerate() {
            let mut combo = vec![0usize; path.len()];
            'combos: loop {
                let mut accuracy = 0.0;
                let mut r = 1.0;
                for (pos, &t) in path.iter().enumerate() {
                    r *= groups[t][combo[pos]].1;
                    accuracy += beta[k][t] * r;
                }
                let key = path
                    .iter()
                    .zip(&combo)
                    .map(|(&t, &i)| (t, groups[t][i].0))
                    .collect();
                let accuracy = if weight[k] > 0.0 {
                    accuracy / weight[k]
                } else {
                    0.0
                };
                problem.path_accuracy.insert(key, accuracy);
                for pos in (0..path.len()).rev() {
                    combo[pos] += 1;
                    if combo[pos] < groups[path[pos]].len() {
                        continue 'combos;
                    }
                    combo[pos] = 0;
                }
                break;
            }
        }
        Ok(problem)
    }
}

/// Bisection tolerance of [`Overload::accuracy_ceiling`].
pub(super) const CEILING_TOLERANCE: f64 = 1.01;
/// Weight of the served fraction in the accuracy-scaling MILP's objective (against at most 1
/// for the relative accuracy; `infaas_scheduler::loki::milp`). [`ceiling_carries`] is sound
/// for any weight at least this.
pub(super) const MILP_SERVE_WEIGHT: f64 = 100.0;

/// Whether an optimal accuracy-scaling plan at some demand shows that a plan carrying all of it
/// at relative accuracy ≥ `a` may exist: its objective `s (100 + r)` reaches `100 + a` (see
/// [`Overload::accuracy_ceiling`]).
fn ceiling_carries(plan: &Allocation, a: f64) -> bool {
    plan.served_fraction * (MILP_SERVE_WEIGHT + plan.relative_accuracy)
        >= MILP_SERVE_WEIGHT + a - 1e-4
}

/// What [`Overload::accuracy_ceiling`] found (in the plans' own terms, not simulated).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccuracyCeiling {
    /// The relative accuracy the plans keep.
    pub min_relative_accuracy: f64,
    /// The largest demand found carried, q/s (0: none): some plan carries at least 99.87% of
    /// it whole at `min_relative_accuracy`.
    pub qps: f64,
    /// The smallest demand found not carried, q/s (`None`: every demand up to 256x the
    /// full-accuracy capacity was): when `proved`, no plan carries it at
    /// `min_relative_accuracy`.
    pub fails_at_qps: Option<f64>,
    /// Whether every demand judged not carried was solved to optimality.
    pub proved: bool,
    /// The demands the search solved, in its order.
    pub probes: Vec<CeilingProbe>,
    /// Wall time of the search, s.
    pub solve_s: f64,
}

/// One solve of [`Overload::accuracy_ceiling`]'s search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CeilingProbe {
    pub demand_qps: f64,
    /// The plan's served fraction and relative accuracy (the simulator's measure).
    pub served_fraction: f64,
    pub relative_accuracy: f64,
    /// Whether the solver proved the plan optimal.
    pub optimal: bool,
    /// Whether the demand counted as carried.
    pub carried: bool,
    pub solve_s: f64,
}
