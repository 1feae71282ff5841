//! A plan in the prepared problem's terms (variants, batch indices, path combinations), its
//! feasibility check, and its conversion into an [`Allocation`].

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use super::prep::Prepared;
use super::{Allocation, LokiError, LokiProblem, Mode, PathShare, Placement, SolveStatus};

/// Absolute slack of the checks, in fractions of the demand and in ms.
const EPS: f64 = 1e-6;

/// A plan: per used variant its batch (index into its batches) and instances, per augmented
/// path (task path, variant per position) its ratio `c(p)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Solution {
    pub served: f64,
    pub placements: BTreeMap<usize, (usize, usize)>,
    pub paths: Vec<(usize, Vec<usize>, f64)>,
}

impl Solution {
    /// Instances per pool.
    pub fn pool_use(&self, prep: &Prepared) -> Vec<usize> {
        let mut used = vec![0usize; prep.pools.len()];
        for (&v, &(_, n)) in &self.placements {
            used[prep.variants[v].pool] += n;
        }
        used
    }

    /// `Σ w Σ c Â / top` (relative) and raw: the objective's accuracy term.
    pub fn accuracy_terms(&self, prep: &Prepared) -> (f64, f64) {
        let mut rel = 0.0;
        let mut raw = 0.0;
        for (k, combo, c) in &self.paths {
            let w = prep.paths[*k].weight;
            rel += w * c * prep.relative_accuracy(*k, combo);
            raw += w * c * prep.raw_accuracy(*k, combo);
        }
        (rel, raw)
    }

    /// Load per variant in fractions of the demand, counted on each task's first path.
    pub fn loads(&self, prep: &Prepared) -> HashMap<usize, f64> {
        let mut load: HashMap<usize, f64> = HashMap::new();
        for (k, combo, c) in &self.paths {
            for (pos, &t) in prep.paths[*k].tasks.iter().enumerate() {
                if prep.first_path[t] == *k {
                    *load.entry(combo[pos]).or_default() += c * prep.multiplier(*k, combo, pos);
                }
            }
        }
        load
    }

    /// Whether the plan satisfies constraints 1-7 (and the pools' workers).
    pub fn check(&self, prep: &Prepared) -> Result<(), String> {
        let d = prep.problem.demand_qps;
        if !(-EPS..=1.0 + EPS).contains(&self.served) {
            return Err(format!("served fraction {} out of [0, 1]", self.served));
        }
        for (p, used) in self.pool_use(prep).into_iter().enumerate() {
            if used > prep.pools[p].1 {
                return Err(format!(
                    "pool '{}' uses {used} of {} workers",
                    prep.pools[p].0, prep.pools[p].1
                ));
            }
        }
        for (k, path) in prep.paths.iter().enumerate() {
            let sum: f64 = self
                .paths
                .iter()
                .filter(|(j, _, _)| *j == k)
                .map(|p| p.2)
                .sum();
            if (sum - self.served).abs() > 1e-5 {
                return Err(format!(
                    "the path to task {} carries {sum}, not the served {}",
                    path.tasks.last().copied().unwrap_or(0),
                    self.served
                ));
            }
        }
        for (k, combo, c) in &self.paths {
            if *c < -EPS {
                return Err(format!("negative path ratio {c}"));
            }
            if *c <= EPS {
                continue;
            }
            let mut latency = 0.0;
            for &v in combo {
                let Some(&(b, n)) = self.placements.get(&v) else {
                    return Err(format!("a path with traffic uses unplaced variant {v}"));
                };
                if n == 0 {
                    return Err(format!(
                        "a path with traffic uses variant {v} with no instance"
                    ));
                }
                latency += prep.variants[v].batches[b].latency_ms;
            }
            if latency > prep.paths[*k].budget_ms + 1e-6 {
                return Err(format!(
                    "a path with traffic takes {latency:.3} ms, above its {:.3} ms",
                    prep.paths[*k].budget_ms
                ));
            }
        }
        if d > 0.0 {
            for (v, load) in self.loads(prep) {
                let cap = self.placements.get(&v).map_or(0.0, |&(b, n)| {
                    n as f64 * prep.variants[v].batches[b].qps / d
                });
                if load > cap * (1.0 + 1e-6) + EPS {
                    return Err(format!(
                        "variant {v} gets {:.3} q/s for a capacity of {:.3}",
                        load * d,
                        cap * d
                    ));
                }
            }
        }
        // Branching trees: every task path through a task agrees on the traffic split up to it.
        for (t, kids) in prep.children.iter().enumerate() {
            if kids.len() < 2 {
                continue;
            }
            let pos = prep.depth[t];
            let mut split: BTreeMap<(usize, Vec<usize>), f64> = BTreeMap::new();
            for (k, combo, c) in &self.paths {
                if prep.paths[*k].tasks.get(pos) == Some(&t) {
                    *split.entry((*k, combo[..=pos].to_vec())).or_default() += c;
                }
            }
            let first = prep.first_path[t];
            for ((k, prefix), c) in &split {
                let base = split.get(&(first, prefix.clone())).copied().unwrap_or(0.0);
                if (c - base).abs() > 1e-5 {
                    return Err(format!(
                        "task paths {first} and {k} split the traffic at task {t} differently"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The allocation this plan describes.
    pub fn finish(
        &self,
        prep: &Prepared,
        mode: Mode,
        status: SolveStatus,
        started: Instant,
    ) -> Allocation {
        let problem = prep.problem;
        let d = problem.demand_qps;
        let loads = self.loads(prep);
        let mut tasks: Vec<Vec<Placement>> = vec![Vec::new(); problem.nodes.len()];
        let mut index: HashMap<usize, usize> = HashMap::new();
        for (&v, &(b, n)) in &self.placements {
            if n == 0 {
                continue;
            }
            let var = &prep.variants[v];
            let batch = &var.batches[b];
            index.insert(v, tasks[var.task].len());
            tasks[var.task].push(Placement {
                option: batch.option,
                group: var.group,
                pool: prep.pools[var.pool].0.clone(),
                instances: n,
                batch: batch.batch,
                budget_ms: batch.latency_ms,
                capacity_qps: n as f64 * batch.qps,
                load_qps: loads.get(&v).copied().unwrap_or(0.0) * d,
                accuracy: var.accuracy,
                factor: var.factor,
            });
        }
        let paths: Vec<PathShare> = self
            .paths
            .iter()
            .filter(|(_, _, c)| *c > EPS)
            .map(|(k, combo, c)| PathShare {
                tasks: prep.paths[*k].tasks.clone(),
                placements: combo
                    .iter()
                    .map(|v| index.get(v).copied().unwrap_or(usize::MAX))
                    .collect(),
                ratio: *c,
                latency_ms: combo
                    .iter()
                    .map(|&v| {
                        self.placements
                            .get(&v)
                            .map_or(0.0, |&(b, _)| prep.variants[v].batches[b].latency_ms)
                    })
                    .sum(),
                accuracy: prep.raw_accuracy(*k, combo),
            })
            .collect();
        let (rel, raw) = self.accuracy_terms(prep);
        let served = self.served.clamp(0.0, 1.0);
        let (accuracy, relative_accuracy) = if served > EPS {
            (raw / served, rel / served)
        } else {
            (0.0, 0.0)
        };
        let workers_used = prep
            .pools
            .iter()
            .zip(self.pool_use(prep))
            .filter(|(_, n)| *n > 0)
            .map(|((name, _), n)| (name.clone(), n))
            .collect();
        Allocation {
            mode,
            status,
            tasks,
            paths,
            accuracy,
            relative_accuracy,
            served_fraction: served,
            demand_qps: d,
            workers_used,
            solve_ms: started.elapsed().as_secs_f64() * 1e3,
        }
    }
}

/// Checks that `allocation` holds for `problem`: instances within each pool's workers, each
/// placement's budget and capacity as profiled at its batch, every path with traffic within the
/// processing budget (`SLO / 2` less communication), every task path carrying the served
/// fraction, and every placement's capacity above what the paths send it.
pub fn verify(problem: &LokiProblem, allocation: &Allocation) -> Result<(), LokiError> {
    let prep = Prepared::new(problem)?;
    let bad = |m: String| Err(LokiError::Violated(m));
    let d = problem.demand_qps;
    let mut used: BTreeMap<&str, usize> = BTreeMap::new();
    for (t, ps) in allocation.tasks.iter().enumerate() {
        let Some(node) = problem.nodes.get(t) else {
            return bad(format!("task {t} is not in the pipeline"));
        };
        for p in ps {
            *used.entry(p.pool.as_str()).or_default() += p.instances;
            let Some(o) = node.options.get(p.option) else {
                return bad(format!("task {t}: no option {}", p.option));
            };
            let Some(point) = o.variant.latency.iter().find(|l| l.batch == p.batch) else {
                return bad(format!(
                    "task {t}: option {} has no batch {}",
                    p.option, p.batch
                ));
            };
            let cap = p.instances as f64 * p.batch as f64 / point.p99_ms * 1000.0;
            if (point.p99_ms - p.budget_ms).abs() > 1e-9 || cap + 1e-6 < p.capacity_qps {
                return bad(format!(
                    "task {t}: placement figures differ from the profile"
                ));
            }
        }
    }
    for (pool, n) in used {
        let have = problem.workers.get(pool).copied().unwrap_or(0);
        if n > have {
            return bad(format!("pool '{pool}' uses {n} of {have} workers"));
        }
    }
    let mut load: HashMap<(usize, usize), f64> = HashMap::new();
    for (k, tp) in prep.paths.iter().enumerate() {
        let mine: Vec<&PathShare> = allocation
            .paths
            .iter()
            .filter(|p| p.tasks == tp.tasks)
            .collect();
        let sum: f64 = mine.iter().map(|p| p.ratio).sum();
        if (sum - allocation.served_fraction).abs() > 1e-5 {
            return bad(format!(
                "task path {:?} carries {sum:.6}, not the served {:.6}",
                tp.tasks, allocation.served_fraction
            ));
        }
        for p in mine {
            let mut latency = 0.0;
            let mut factor = 1.0;
            for (pos, (&t, &i)) in tp.tasks.iter().zip(&p.placements).enumerate() {
                let Some(pl) = allocation.tasks.get(t).and_then(|ps| ps.get(i)) else {
                    return bad(format!("a path names placement {i} of task {t}"));
                };
                latency += pl.budget_ms;
                if prep.first_path[t] == k {
                    *load.entry((t, i)).or_default() += d * p.ratio * factor * tp.reach[pos];
                }
                factor *= pl.factor;
            }
            if latency > tp.budget_ms + 1e-6 {
                return bad(format!(
                    "path {:?} takes {latency:.3} ms of processing, above {:.3} ms",
                    p.placements, tp.budget_ms
                ));
            }
        }
    }
    for ((t, i), l) in load {
        let cap = allocation.tasks[t][i].capacity_qps;
        if l > cap * (1.0 + 1e-6) + 1e-6 * d.max(1.0) {
            return bad(format!(
                "task {t}, placement {i}: {l:.3} q/s over a capacity of {cap:.3}"
            ));
        }
    }
    Ok(())
}
