//! The estimator: InferLine's trace-driven simulation of a pipeline, stage by stage.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use infaas_core::stats::{nearest_rank, select_percentile};
use infaas_scheduler::pipeline::{Estimate, Estimator, NodeConfig, PlanProblem};
use serde::Serialize;

use super::branches::{branch_draw, fingerprint, reach, service_table, Reach};

/// One node's simulated completions under one configuration of it and its ancestors.
#[derive(Debug, Clone)]
struct NodeResult {
    key: Vec<NodeConfig>,
    /// Completion time per query (dense; meaningful only for the queries reaching the node).
    comp: Vec<f64>,
    /// The queries reaching the node, in completion order.
    order: Vec<u32>,
    p99_ms: f64,
    queue_ms: f64,
    used: u64,
}

/// Counters of a [`TraceEstimator`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct EstimatorStats {
    /// Calls to `estimate` or `feasible`.
    pub calls: usize,
    /// Stages simulated (cache misses).
    pub stages: usize,
    /// Stages taken from the cache.
    pub hits: usize,
    /// Calls cut short because too many queries had already missed the SLO.
    pub aborted: usize,
}

/// InferLine's Estimator over a sample trace (SIMULATED; see the module documentation).
#[derive(Debug, Clone)]
pub struct TraceEstimator {
    arrivals: Vec<f64>,
    /// Where each query's latency is counted from: its arrival less its overhead (the time
    /// it spends outside the models' queues and batches), so that latencies include it.
    origins: Vec<f64>,
    seed: u64,
    early_abort: bool,
    capacity: usize,
    routing: Option<Reach>,
    cache: Vec<Vec<NodeResult>>,
    clock: u64,
    stats: EstimatorStats,
    running: Vec<f64>,
    queue: Vec<(f64, u32)>,
    batches: Vec<(u64, u32, u32)>,
    latencies: Vec<f64>,
}

/// How a run of the estimator ended.
struct Run {
    misses: usize,
    aborted: bool,
    /// Cache entry used per node, `usize::MAX` for the nodes not reached.
    used: Vec<usize>,
}

impl TraceEstimator {
    /// An estimator over the pipeline-entry arrivals `arrivals_ms` (sorted here; negative
    /// times count as 0, non-finite ones are dropped); branch draws from `seed`.
    pub fn new(arrivals_ms: Vec<f64>, seed: u64) -> TraceEstimator {
        let mut arrivals: Vec<f64> = arrivals_ms
            .into_iter()
            .filter(|t| t.is_finite())
            .map(|t| t.max(0.0))
            .collect();
        arrivals.sort_by(f64::total_cmp);
        TraceEstimator {
            origins: arrivals.clone(),
            arrivals,
            seed,
            early_abort: true,
            capacity: 6,
            routing: None,
            cache: Vec::new(),
            clock: 0,
            stats: EstimatorStats::default(),
            running: Vec::new(),
            queue: Vec::new(),
            batches: Vec::new(),
            latencies: Vec::new(),
        }
    }

    /// Turns the early abort of feasibility checks on or off (on by default); the verdicts
    /// are the same.
    pub fn with_early_abort(mut self, on: bool) -> TraceEstimator {
        self.early_abort = on;
        self
    }

    /// Adds a per-query overhead (ms) to every query's latency: what a query spends outside
    /// the models' queues and batches on the real server (dispatch, transfers, combiners),
    /// as measured samples; query `q` takes a sample chosen by a hash of `q` and the seed, so
    /// every estimate sees the same overheads. Empty samples: no overhead (the default).
    pub fn with_overhead(mut self, samples_ms: &[f64]) -> TraceEstimator {
        let samples: Vec<f64> = samples_ms
            .iter()
            .copied()
            .filter(|o| o.is_finite())
            .map(|o| o.max(0.0))
            .collect();
        self.origins = self
            .arrivals
            .iter()
            .enumerate()
            .map(|(q, a)| {
                if samples.is_empty() {
                    *a
                } else {
                    let k = (branch_draw(self.seed ^ 0x6f76_6572, q, 0) * samples.len() as f64)
                        as usize;
                    a - samples[k.min(samples.len() - 1)]
                }
            })
            .collect();
        self
    }

    /// How many configurations of each node are cached (6 by default, at least 1).
    pub fn with_cache(mut self, per_node: usize) -> TraceEstimator {
        self.capacity = per_node.max(1);
        self
    }

    pub fn arrivals(&self) -> &[f64] {
        &self.arrivals
    }

    pub fn stats(&self) -> EstimatorStats {
        self.stats
    }

    /// How many queries of the trace reach each node of `problem`.
    pub fn reached(&mut self, problem: &PlanProblem) -> Vec<usize> {
        self.ensure_routing(problem);
        self.routing
            .as_ref()
            .map_or_else(Vec::new, |r| r.reached.iter().map(Vec::len).collect())
    }

    /// Every query's end-to-end latency under `configs`, ms, in arrival order (a full run,
    /// never cut short).
    pub fn latencies(&mut self, problem: &PlanProblem, configs: &[NodeConfig]) -> Vec<f64> {
        match self.run(problem, configs, false) {
            Some(_) => self
                .running
                .iter()
                .zip(&self.origins)
                .map(|(c, a)| c - a)
                .collect(),
            None => vec![f64::INFINITY; self.arrivals.len()],
        }
    }

    fn ensure_routing(&mut self, problem: &PlanProblem) {
        let fp = fingerprint(problem);
        if self.routing.as_ref().is_some_and(|r| r.fingerprint == fp) {
            return;
        }
        self.routing = Some(reach(problem, self.arrivals.len(), self.seed));
        self.cache = vec![Vec::new(); problem.nodes.len()];
    }

    /// Simulates `configs`; `None` for configurations that name no option or no replica.
    fn run(&mut self, problem: &PlanProblem, configs: &[NodeConfig], early: bool) -> Option<Run> {
        self.stats.calls += 1;
        if configs.len() != problem.nodes.len()
            || configs
                .iter()
                .zip(&problem.nodes)
                .any(|(c, n)| c.replicas == 0 || c.option >= n.options.len())
        {
            return None;
        }
        self.ensure_routing(problem);
        let n = self.arrivals.len();
        let budget = n - nearest_rank(problem.percentile / 100.0, n);
        let slo = problem.slo_ms;
        let TraceEstimator {
            arrivals,
            origins,
            routing,
            cache,
            clock,
            stats,
            running,
            queue,
            batches,
            latencies,
            capacity,
            ..
        } = self;
        let routing = routing.as_ref()?;
        running.clear();
        running.extend_from_slice(arrivals);
        // A query whose overhead alone passes the SLO misses whatever the models do.
        let mut misses = arrivals
            .iter()
            .zip(origins.iter())
            .filter(|(a, o)| *a - *o > slo)
            .count();
        let mut used = vec![usize::MAX; problem.nodes.len()];
        for m in 0..problem.nodes.len() {
            *clock += 1;
            let key: Vec<NodeConfig> = routing.ancestors[m].iter().map(|&a| configs[a]).collect();
            let (before, rest) = cache.split_at_mut(m);
            let own = &mut rest[0];
            if let Some(idx) = own.iter().position(|r| r.key == key) {
                stats.hits += 1;
                let r = &mut own[idx];
                r.used = *clock;
                for &q in &r.order {
                    let q = q as usize;
                    let c = r.comp[q];
                    if c > running[q] {
                        let a = origins[q];
                        if running[q] - a <= slo && c - a > slo {
                            misses += 1;
                        }
                        running[q] = c;
                    }
                }
                used[m] = idx;
                if early && misses > budget {
                    stats.aborted += 1;
                    return Some(Run {
                        misses,
                        aborted: true,
                        used,
                    });
                }
                continue;
            }
            stats.stages += 1;
            let node = &problem.nodes[m];
            // Arrivals at the node, in time order.
            queue.clear();
            match node.parents.as_slice() {
                [] => queue.extend(
                    routing.reached[m]
                        .iter()
                        .map(|&q| (arrivals[q as usize], q)),
                ),
                [p] => {
                    let parent = &before[*p][used[*p]];
                    let member = &routing.member[m];
                    queue.extend(
                        parent
                            .order
                            .iter()
                            .filter(|&&q| member[q as usize])
                            .map(|&q| (parent.comp[q as usize], q)),
                    );
                }
                parents => {
                    for &q in &routing.reached[m] {
                        let t = parents
                            .iter()
                            .filter(|&&p| routing.member[p][q as usize])
                            .map(|&p| before[p][used[p]].comp[q as usize])
                            .fold(f64::NEG_INFINITY, f64::max);
                        queue.push((t, q));
                    }
                    queue.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
            }
            // A buffer for the result: the least recently used entry's when full.
            let mut result = if own.len() >= *capacity {
                let lru = own
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, r)| r.used)
                    .map_or(0, |(i, _)| i);
                own.swap_remove(lru)
            } else {
                NodeResult {
                    key: Vec::new(),
                    comp: vec![0.0; n],
                    order: Vec::new(),
                    p99_ms: f64::NAN,
                    queue_ms: f64::NAN,
                    used: 0,
                }
            };
            let option = &node.options[configs[m].option];
            let svc = service_table(option);
            let out = stage_fixed(
                queue,
                &svc,
                configs[m].replicas,
                &mut result.comp,
                batches,
                latencies,
                StageCheck {
                    running,
                    origins,
                    slo,
                    misses: &mut misses,
                    budget: early.then_some(budget),
                },
            );
            if out.aborted {
                stats.aborted += 1;
                // The buffer goes back unused (its key no longer matches anything).
                result.key.clear();
                result.used = 0;
                own.push(result);
                return Some(Run {
                    misses,
                    aborted: true,
                    used,
                });
            }
            result.order.clear();
            for &(_, i, j) in batches.iter() {
                result
                    .order
                    .extend(queue[i as usize..j as usize].iter().map(|e| e.1));
            }
            result.p99_ms = select_percentile(latencies, 0.99).unwrap_or(f64::NAN);
            result.queue_ms = out.queue_ms;
            result.key = key;
            result.used = *clock;
            own.push(result);
            used[m] = own.len() - 1;
        }
        Some(Run {
            misses,
            aborted: false,
            used,
        })
    }

    fn estimate_of(&mut self, problem: &PlanProblem, run: Option<Run>) -> Estimate {
        let nodes = problem.nodes.len();
        let Some(run) = run else {
            return Estimate {
                latency_ms: f64::INFINITY,
                p99_ms: f64::INFINITY,
                attainment: 0.0,
                per_node_p99_ms: vec![f64::NAN; nodes],
                per_node_queue_ms: vec![f64::NAN; nodes],
            };
        };
        let n = self.arrivals.len().max(1);
        let per_node = |f: &dyn Fn(&NodeResult) -> f64| -> Vec<f64> {
            (0..nodes)
                .map(|m| {
                    self.cache
                        .get(m)
                        .and_then(|c| c.get(run.used[m]))
                        .map_or(f64::NAN, f)
                })
                .collect()
        };
        let per_node_p99_ms = per_node(&|r| r.p99_ms);
        let per_node_queue_ms = per_node(&|r| r.queue_ms);
        let attainment = 1.0 - run.misses as f64 / n as f64;
        if run.aborted {
            return Estimate {
                latency_ms: f64::INFINITY,
                p99_ms: f64::INFINITY,
                attainment,
                per_node_p99_ms,
                per_node_queue_ms,
            };
        }
        let mut e2e: Vec<f64> = self
            .running
            .iter()
            .zip(&self.origins)
            .map(|(c, a)| c - a)
            .collect();
        let latency_ms =
            select_percentile(&mut e2e, problem.percentile / 100.0).unwrap_or(f64::NAN);
        let p99_ms = select_percentile(&mut e2e, 0.99).unwrap_or(f64::NAN);
        Estimate {
            latency_ms,
            p99_ms,
            attainment,
            per_node_p99_ms,
            per_node_queue_ms,
        }
    }
}

impl Estimator for TraceEstimator {
    fn estimate(&mut self, problem: &PlanProblem, configs: &[NodeConfig]) -> Estimate {
        if self.arrivals.is_empty() {
            return Estimate {
                latency_ms: 0.0,
                p99_ms: 0.0,
                attainment: 1.0,
                per_node_p99_ms: vec![0.0; problem.nodes.len()],
                per_node_queue_ms: vec![0.0; problem.nodes.len()],
            };
        }
        let run = self.run(problem, configs, false);
        self.estimate_of(problem, run)
    }

    fn feasible(&mut self, problem: &PlanProblem, configs: &[NodeConfig]) -> bool {
        if self.arrivals.is_empty() {
            return true;
        }
        let n = self.arrivals.len();
        match self.run(problem, configs, self.early_abort) {
            Some(run) => {
                !run.aborted && run.misses <= n - nearest_rank(problem.percentile / 100.0, n)
            }
            None => false,
        }
    }

    fn arrival_rate_per_s(&self) -> Option<f64> {
        let (first, last) = (self.arrivals.first()?, self.arrivals.last()?);
        let span_s = (last - first) / 1e3;
        (span_s > 0.0).then(|| self.arrivals.len() as f64 / span_s)
    }
}

/// What a stage run checks as it goes: every query's latest completion so far (`running`),
/// and the misses against the SLO, with the budget that ends the run early.
struct StageCheck<'a> {
    running: &'a mut [f64],
    /// Where each query's latency is counted from (its arrival less its overhead).
    origins: &'a [f64],
    slo: f64,
    misses: &'a mut usize,
    budget: Option<usize>,
}

struct StageOut {
    aborted: bool,
    queue_ms: f64,
}

/// One stage with `replicas` fixed replicas: a centralised FIFO batched queue. `queue` holds
/// the arrivals at the stage in time order; completion times go to `comp`, the batches
/// (completion bits, first and past-last queue index) to `batches` in completion order, and
/// each query's latency at the stage to `latencies`.
fn stage_fixed(
    queue: &[(f64, u32)],
    svc: &[f64],
    replicas: usize,
    comp: &mut [f64],
    batches: &mut Vec<(u64, u32, u32)>,
    latencies: &mut Vec<f64>,
    check: StageCheck<'_>,
) -> StageOut {
    let StageCheck {
        running,
        origins,
        slo,
        misses,
        budget,
    } = check;
    batches.clear();
    latencies.clear();
    let max_batch = svc.len().saturating_sub(1).max(1);
    // Replica free times as f64 bits (non-negative floats order like their bits).
    let mut free: BinaryHeap<Reverse<u64>> = (0..replicas.max(1)).map(|_| Reverse(0)).collect();
    let mut queued_ms = 0.0;
    let mut i = 0;
    let len = queue.len();
    while i < len {
        let Some(mut top) = free.peek_mut() else {
            break;
        };
        let head = queue[i].0;
        let start = f64::from_bits(top.0).max(head);
        let limit = (i + max_batch).min(len);
        let mut j = i + 1;
        while j < limit && queue[j].0 <= start {
            j += 1;
        }
        let done = start + svc[j - i];
        top.0 = done.to_bits();
        drop(top);
        for &(t, q) in &queue[i..j] {
            let q = q as usize;
            comp[q] = done;
            latencies.push(done - t);
            queued_ms += start - t;
            if done > running[q] {
                let a = origins[q];
                if running[q] - a <= slo && done - a > slo {
                    *misses += 1;
                }
                running[q] = done;
            }
        }
        batches.push((done.to_bits(), i as u32, j as u32));
        if budget.is_some_and(|b| *misses > b) {
            return StageOut {
                aborted: true,
                queue_ms: f64::NAN,
            };
        }
        i = j;
    }
    // Completion order (batches start in order; only replicas finishing out of turn move).
    batches.sort_by_key(|b| b.0);
    StageOut {
        aborted: false,
        queue_ms: if len > 0 { queued_ms / len as f64 } else { 0.0 },
    }
}
