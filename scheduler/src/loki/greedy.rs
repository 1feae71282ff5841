//! The resource manager's bounded-time fallback: a greedy plan with one variant per task.
//!
//! 1. Every task starts on its most accurate candidate (ties: the highest throughput per
//!    worker). Each task's batch starts at its largest allowed one; while a task path's
//!    processing latency exceeds its budget, the slowest task on it that can moves to its
//!    next smaller batch. Instances are `ceil(load / q)` per task, the load being the demand
//!    times the path's branch probabilities and the upstream multiplicative factors.
//! 2. While the plan needs more workers than a pool has (or cannot meet the latency budget
//!    even at batch 1), the task whose move to another candidate loses the least end-to-end
//!    accuracy per worker of overflow it removes moves (a move to the same accuracy on a pool
//!    with room loses nothing, so it comes first). Each move strictly reduces the overflow, so
//!    this ends.
//! 3. If no move removes the overflow, the plan serves the largest fraction of the demand its
//!    pools can carry (bisection on the fraction).
//!
//! One variant per task keeps it fast (a few hundred evaluations of a pipeline's tasks) but
//! cannot split a task over pools as the MILP does, so it carries less at high demand.

use std::time::Instant;

use super::prep::Prepared;
use super::solution::Solution;
use super::{Allocation, LokiError, LokiProblem, LokiSettings, Mode, SolveStatus};

/// Overflow cost of one ms of processing latency over a path's budget, in workers.
const LATENCY_OVERFLOW: f64 = 1000.0;

/// The greedy plan of `problem` over step 2's candidates (see the module documentation),
/// what [`super::allocate`] falls back to when a solve fails or runs out of time. Its mode is
/// [`Mode::HardwareScaling`] when it carries the whole demand at full accuracy.
pub fn greedy(problem: &LokiProblem, settings: &LokiSettings) -> Result<Allocation, LokiError> {
    let started = Instant::now();
    let prep = Prepared::new(problem)?;
    let cand = prep.candidates(settings);
    let sol = if problem.demand_qps <= 0.0 {
        Solution {
            served: 1.0,
            ..Solution::default()
        }
    } else {
        greedy_solution(&prep, &cand).unwrap_or_default()
    };
    let (rel, _) = sol.accuracy_terms(&prep);
    let full = sol.served >= 1.0 - 1e-9 && rel >= sol.served - 1e-9;
    let mode = if full {
        Mode::HardwareScaling
    } else {
        Mode::AccuracyScaling
    };
    Ok(sol.finish(&prep, mode, SolveStatus::Fallback, started))
}

/// A plan's figures under one assignment of variants to tasks.
struct Eval {
    batch: Vec<usize>,
    instances: Vec<usize>,
    /// Workers over the pools' sizes plus latency over the budgets (weighted).
    overflow: f64,
    latency_ok: bool,
}

/// The greedy plan over the candidates `cand` (`None` when a task has none).
pub(crate) fn greedy_solution(prep: &Prepared, cand: &[Vec<usize>]) -> Option<Solution> {
    let n = cand.len();
    let mut assign = Vec::with_capacity(n);
    for vs in cand {
        let best = vs.iter().copied().max_by(|&a, &b| {
            let (va, vb) = (&prep.variants[a], &prep.variants[b]);
            va.accuracy
                .total_cmp(&vb.accuracy)
                .then(va.peak_qps().total_cmp(&vb.peak_qps()))
        })?;
        assign.push(best);
    }
    let mut current = evaluate(prep, &assign, 1.0);
    while current.overflow > 0.0 {
        let here = accuracy(prep, &assign);
        let mut best: Option<(f64, f64, usize, usize, Eval)> = None;
        for (t, vs) in cand.iter().enumerate() {
            for &v in vs {
                if v == assign[t] {
                    continue;
                }
                let mut next = assign.clone();
                next[t] = v;
                let e = evaluate(prep, &next, 1.0);
                let freed = current.overflow - e.overflow;
                if freed <= 1e-12 {
                    continue;
                }
                let loss = (here - accuracy(prep, &next)).max(0.0);
                let score = loss / freed;
                let better = best.as_ref().is_none_or(|(s, f, _, _, _)| {
                    score < *s - 1e-12 || (score <= *s + 1e-12 && freed > *f)
                });
                if better {
                    best = Some((score, freed, t, v, e));
                }
            }
        }
        match best {
            Some((_, _, t, v, e)) => {
                assign[t] = v;
                current = e;
            }
            None => break,
        }
    }
    let served = if current.overflow <= 0.0 {
        1.0
    } else if !current.latency_ok {
        0.0
    } else {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        for _ in 0..48 {
            let mid = 0.5 * (lo + hi);
            if evaluate(prep, &assign, mid).overflow <= 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        current = evaluate(prep, &assign, lo);
        lo
    };
    let mut sol = Solution {
        served,
        ..Solution::default()
    };
    if served > 0.0 {
        for (t, &v) in assign.iter().enumerate() {
            sol.placements
                .insert(v, (current.batch[t], current.instances[t]));
        }
    }
    for (k, tp) in prep.paths.iter().enumerate() {
        let combo = tp.tasks.iter().map(|&t| assign[t]).collect();
        sol.paths.push((k, combo, served));
    }
    Some(sol)
}

/// The relative end-to-end accuracy of one variant per task.
fn accuracy(prep: &Prepared, assign: &[usize]) -> f64 {
    prep.paths
        .iter()
        .enumerate()
        .map(|(k, tp)| {
            let combo: Vec<usize> = tp.tasks.iter().map(|&t| assign[t]).collect();
            tp.weight * prep.relative_accuracy(k, &combo)
        })
        .sum()
}

fn evaluate(prep: &Prepared, assign: &[usize], served: f64) -> Eval {
    let n = assign.len();
    let lat = |t: usize, b: usize| prep.variants[assign[t]].batches[b].latency_ms;
    let mut batch: Vec<usize> = assign
        .iter()
        .map(|&v| prep.variants[v].batches.len() - 1)
        .collect();
    'fit: loop {
        for tp in &prep.paths {
            let total: f64 = tp.tasks.iter().map(|&t| lat(t, batch[t])).sum();
            if total <= tp.budget_ms + 1e-9 {
                continue;
            }
            let slowest = tp
                .tasks
                .iter()
                .copied()
                .filter(|&t| batch[t] > 0)
                .max_by(|&a, &b| lat(a, batch[a]).total_cmp(&lat(b, batch[b])));
            if let Some(t) = slowest {
                batch[t] -= 1;
                continue 'fit;
            }
        }
        break;
    }
    let latency_over: f64 = prep
        .paths
        .iter()
        .map(|tp| {
            let total: f64 = tp.tasks.iter().map(|&t| lat(t, batch[t])).sum();
            (total - tp.budget_ms).max(0.0)
        })
        .sum();
    let d = prep.problem.demand_qps * served;
    let mut instances = vec![0usize; n];
    let mut used = vec![0usize; prep.pools.len()];
    for t in 0..n {
        let k = prep.first_path[t];
        let tp = &prep.paths[k];
        let combo: Vec<usize> = tp.tasks.iter().map(|&u| assign[u]).collect();
        let load = d * prep.multiplier(k, &combo, prep.depth[t]);
        let q = prep.variants[assign[t]].batches[batch[t]].qps;
        let need = if load > 0.0 {
            ((load / q) - 1e-9).ceil().max(1.0) as usize
        } else {
            0
        };
        instances[t] = need;
        used[prep.variants[assign[t]].pool] += need;
    }
    let workers_over: usize = used
        .iter()
        .zip(&prep.pools)
        .map(|(&u, (_, s))| u.saturating_sub(*s))
        .sum();
    Eval {
        batch,
        instances,
        overflow: workers_over as f64 + LATENCY_OVERFLOW * latency_over,
        latency_ok: latency_over <= 0.0,
    }
}
