//! Pipelines of models on a SIMULATED cluster: InferLine's trace-driven Estimator, a runner
//! that replays a live trace on a plan with the tuner driving replicas, pipelines built from
//! the Proteus catalogue, the per-stage and coarse-grained (CG-Peak) baselines, and the
//! evaluation that compares them. Nothing here runs a model: every figure is SIMULATED from
//! measured profiles.
//!
//! **The estimator** ([`TraceEstimator`]) simulates the pipeline stage by stage in
//! topological order: a stage's arrivals are its parents' completions (the latest of the
//! parents a query reached), and each stage is a centralised FIFO batched queue (InferLine's
//! serving model): a free replica takes up to `max_batch` queued queries at once, and a batch
//! of `b` takes the profile's **mean** at `b` (`VariantEntry::latency_at(b)`, the profiled
//! batch that holds `b`), deterministically. Which queries run a branch of a switch is drawn
//! once per (query, node) from the seed, so every estimate sees the same branches. Per-node
//! completion times are cached by the configurations of the node and its ancestors, so a
//! change at node `m` recomputes only `m` and its descendants. A feasibility check
//! ([`Estimator::feasible`], what the planner asks of every candidate) gives up as soon as more
//! queries have missed the SLO than the percentile allows (their latency can only grow
//! downstream), which the planner's many infeasible candidates make worth it; a full
//! [`Estimator::estimate`] always runs to the end.
//!
//! **The runner** ([`replay`]) replays a (longer) live trace on a configuration with the same
//! stage model, replicas changing over time as the tuner decides once a second from the
//! arrivals of the last 60 s; an added replica serves after its variant's load time, a removed
//! one stops taking batches at once; cost is every replica's held time (loading included) at
//! its price. Service times are the same deterministic means as the estimator's, so what
//! differs from the estimate is the workload (live versus planning trace) and the tuner's
//! reaction (decision period, activation delay).
//!
//! **The evaluation** ([`evaluate`]): [`pipelines`] built from the catalogue ([`problem_for`]:
//! every profiled (model, accelerator, batch) of a stage's family is an option, grouped by
//! (model, accelerator)), planned on a prefix of a Proteus trace pattern and replayed on the
//! whole pattern under InferLine (plan + tuner) and the baselines ([`per_stage`],
//! [`cg_peak`]).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{Hash, Hasher};
use std::time::Instant;

use infaas_scheduler::pipeline::{
    cost_per_hour, estimated_accuracy, node_plans, option_throughput_per_s, plan,
    reach_probabilities, Estimate, Estimator, NodeConfig, NodePlan, Plan, PlanError, PlanNode,
    PlanOption, PlanProblem, Provisioning, Tuner, TunerConfig,
};
use infaas_scheduler::Prices;
use serde::Serialize;

use crate::catalogue::{Accelerator, Profile};
use crate::report::Histogram;
use crate::trace::Trace;

// ---------------------------------------------------------------------------------------------
// Branches

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The uniform draw in [0, 1) that decides whether query `query` takes the branch into node
/// `node` (it does when the draw is below the node's branch probability).
pub fn branch_draw(seed: u64, query: usize, node: usize) -> f64 {
    let h = mix(mix(seed ^ mix(node as u64 + 1)) ^ query as u64);
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Which queries reach which node.
#[derive(Debug, Clone)]
struct Routing {
    fingerprint: u64,
    /// Per node, the queries that reach it, ascending.
    reached: Vec<Vec<u32>>,
    /// Per node, per query: whether it reaches the node.
    member: Vec<Vec<bool>>,
    /// Per node, its ancestors and itself, ascending.
    ancestors: Vec<Vec<usize>>,
}

fn fingerprint(problem: &PlanProblem) -> u64 {
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

fn route(problem: &PlanProblem, queries: usize, seed: u64) -> Routing {
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
    Routing {
        fingerprint: fingerprint(problem),
        reached,
        member,
        ancestors,
    }
}

/// Batch service times of an option: `svc[b]` for `b` in `1..=max_batch` (the profile's mean
/// at the profiled batch holding `b`); `svc[0]` is unused.
fn service_table(option: &PlanOption) -> Vec<f64> {
    let v = &option.variant;
    (0..=v.max_batch.max(1))
        .map(|b| {
            v.latency_at(b.max(1))
                .map_or(f64::INFINITY, |(p, k)| p.mean_ms * k)
        })
        .collect()
}

/// The value at `percentile` of `values` (reordered): the `ceil(p/100 n)`-th smallest.
fn quantile(values: &mut [f64], percentile: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let i = rank_of(percentile, values.len()) - 1;
    *values.select_nth_unstable_by(i, f64::total_cmp).1
}

fn rank_of(percentile: f64, n: usize) -> usize {
    ((percentile / 100.0 * n as f64).ceil() as usize).clamp(1, n.max(1))
}

// ---------------------------------------------------------------------------------------------
// The estimator

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
    routing: Option<Routing>,
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
        self.routing = Some(route(problem, self.arrivals.len(), self.seed));
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
        let budget = n - rank_of(problem.percentile, n);
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
            result.p99_ms = quantile(latencies, 99.0);
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
        let latency_ms = quantile(&mut e2e, problem.percentile);
        let p99_ms = quantile(&mut e2e, 99.0);
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
            Some(run) => !run.aborted && run.misses <= n - rank_of(problem.percentile, n),
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

// ---------------------------------------------------------------------------------------------
// The runner

/// How [`replay`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// The report's name for the policy.
    pub policy: String,
    /// The tuner driving replicas (`None`: the configuration's replicas throughout).
    pub tuner: Option<TunerConfig>,
    /// Period of the tuner's decisions, ms.
    pub tick_ms: f64,
    /// Seed of the branch draws.
    pub seed: u64,
}

/// One second of a replay (queries counted in the second they arrived).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySecond {
    pub second: usize,
    pub arrivals: u64,
    pub slo_attainment: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Replicas held per node at the end of the second (loading ones included).
    pub replicas: Vec<usize>,
    pub cost_per_s: f64,
}

/// What a replay measured (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    pub policy: String,
    pub simulated: bool,
    pub queries: usize,
    pub duration_s: f64,
    /// Fraction of the queries within the SLO.
    pub slo_attainment: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Latency at the planned percentile, ms.
    pub percentile_ms: f64,
    /// Every replica's held time at its price.
    pub cost: f64,
    /// `cost` per hour of the trace.
    pub cost_per_hour: f64,
    pub scale_outs: usize,
    pub scale_ins: usize,
    /// When the tuner first reported drift (re-plan), s.
    pub drift_at_s: Option<f64>,
    pub max_replicas: Vec<usize>,
    pub mean_replicas: Vec<f64>,
    pub series: Vec<ReplaySecond>,
}

/// A replica position of a node over time: intervals of (billed from, serving from, until).
#[derive(Debug, Clone, Default)]
struct Slot {
    intervals: Vec<(f64, f64, f64)>,
    next: usize,
    free: f64,
}

impl Slot {
    /// Earliest time at or after `t` at which the slot can start a batch.
    fn start_at(&mut self, t: f64) -> f64 {
        let t = t.max(self.free);
        while let Some(&(_, from, until)) = self.intervals.get(self.next) {
            if until > t.max(from) {
                return t.max(from);
            }
            self.next += 1;
        }
        f64::INFINITY
    }
}

/// Replicas of each node over time: the tuner's decisions turned into slots.
fn schedule(
    problem: &PlanProblem,
    configs: &[NodeConfig],
    arrivals: &[f64],
    end_ms: f64,
    opts: &ReplayOptions,
) -> (Vec<Vec<Slot>>, usize, usize, Option<f64>) {
    let mut slots: Vec<Vec<Slot>> = configs
        .iter()
        .map(|c| {
            (0..c.replicas)
                .map(|_| Slot {
                    intervals: vec![(0.0, 0.0, f64::INFINITY)],
                    ..Slot::default()
                })
                .collect()
        })
        .collect();
    let (mut outs, mut ins, mut drift_at) = (0, 0, None);
    if let Some(config) = &opts.tuner {
        let mut tuner = Tuner::new(config.clone());
        let mut current: Vec<usize> = configs.iter().map(|c| c.replicas).collect();
        let load_ms: Vec<f64> = problem
            .nodes
            .iter()
            .zip(configs)
            .map(|(n, c)| n.options.get(c.option).map_or(0.0, |o| o.variant.load_ms))
            .collect();
        let tick = opts.tick_ms.max(1.0);
        let mut now = tick;
        while now <= end_ms + tick {
            let from = arrivals.partition_point(|&t| t <= now - 60_000.0);
            let to = arrivals.partition_point(|&t| t <= now);
            let target = tuner.decide(now, &arrivals[from..to]);
            if tuner.drift() && drift_at.is_none() {
                drift_at = Some(now / 1e3);
            }
            let mut changed = (false, false);
            for m in 0..current.len() {
                let (k, want) = (current[m], target[m]);
                if want > k {
                    changed.0 = true;
                    for s in k..want {
                        if s >= slots[m].len() {
                            slots[m].push(Slot::default());
                        }
                        slots[m][s]
                            .intervals
                            .push((now, now + load_ms[m], f64::INFINITY));
                    }
                } else if want < k {
                    changed.1 = true;
                    for slot in &mut slots[m][want..k] {
                        if let Some(last) = slot.intervals.last_mut() {
                            last.2 = now;
                        }
                    }
                }
                current[m] = want;
            }
            outs += usize::from(changed.0);
            ins += usize::from(changed.1);
            now += tick;
        }
    }
    (slots, outs, ins, drift_at)
}

/// One stage with replicas changing over time (see [`stage_fixed`]); queries no replica will
/// ever take complete at infinity.
fn stage_slots(queue: &[(f64, u32)], svc: &[f64], slots: &mut [Slot], comp: &mut [f64]) {
    let max_batch = svc.len().saturating_sub(1).max(1);
    let len = queue.len();
    let mut i = 0;
    while i < len {
        let head = queue[i].0;
        let mut best = (f64::INFINITY, usize::MAX);
        for (k, s) in slots.iter_mut().enumerate() {
            let t = s.start_at(head);
            if t < best.0 {
                best = (t, k);
            }
        }
        let (start, k) = best;
        if !start.is_finite() {
            for &(_, q) in &queue[i..] {
                comp[q as usize] = f64::INFINITY;
            }
            return;
        }
        let limit = (i + max_batch).min(len);
        let mut j = i + 1;
        while j < limit && queue[j].0 <= start {
            j += 1;
        }
        let done = start + svc[j - i];
        slots[k].free = done;
        for &(_, q) in &queue[i..j] {
            comp[q as usize] = done;
        }
        i = j;
    }
}

/// Replays `arrivals_ms` (the pipeline's entry, sorted) on `configs`, the tuner (if any)
/// driving replicas; SIMULATED (see the module documentation).
pub fn replay(
    problem: &PlanProblem,
    configs: &[NodeConfig],
    arrivals_ms: &[f64],
    opts: &ReplayOptions,
) -> ReplayReport {
    let n = arrivals_ms.len();
    let end_ms = arrivals_ms.last().copied().unwrap_or(0.0);
    let routing = route(problem, n, opts.seed);
    let (mut slots, scale_outs, scale_ins, drift_at_s) =
        schedule(problem, configs, arrivals_ms, end_ms, opts);
    let mut comp: Vec<Vec<f64>> = vec![vec![f64::NEG_INFINITY; n]; problem.nodes.len()];
    let mut done: Vec<f64> = arrivals_ms.to_vec();
    let mut queue: Vec<(f64, u32)> = Vec::new();
    for (m, node) in problem.nodes.iter().enumerate() {
        queue.clear();
        for &q in &routing.reached[m] {
            let qi = q as usize;
            let t = if node.parents.is_empty() {
                arrivals_ms[qi]
            } else {
                node.parents
                    .iter()
                    .filter(|&&p| routing.member[p][qi])
                    .map(|&p| comp[p][qi])
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            queue.push((t, q));
        }
        queue.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(option) = node.options.get(configs[m].option) else {
            continue;
        };
        let svc = service_table(option);
        stage_slots(&queue, &svc, &mut slots[m], &mut comp[m]);
        for &q in &routing.reached[m] {
            let qi = q as usize;
            done[qi] = done[qi].max(comp[m][qi]);
        }
    }
    let slo = problem.slo_ms;
    let mut latencies: Vec<f64> = done.iter().zip(arrivals_ms).map(|(d, a)| d - a).collect();
    let seconds = (end_ms / 1e3).floor() as usize + 1;
    let mut per_second: Vec<(u64, u64, Histogram)> =
        (0..seconds).map(|_| (0, 0, Histogram::default())).collect();
    let mut met = 0usize;
    for (l, a) in latencies.iter().zip(arrivals_ms) {
        let s = ((a / 1e3) as usize).min(seconds - 1);
        let e = &mut per_second[s];
        e.0 += 1;
        if *l <= slo {
            e.1 += 1;
            met += 1;
        }
        e.2.add(if l.is_finite() { *l } else { 1e12 });
    }
    // Cost and replicas per second.
    let prices: Vec<f64> = problem
        .nodes
        .iter()
        .zip(configs)
        .map(|(nd, c)| {
            nd.options
                .get(c.option)
                .map_or(0.0, |o| problem.prices.rate_per_s(&o.variant))
        })
        .collect();
    let mut cost = 0.0;
    let mut cost_s = vec![0.0; seconds];
    let mut held = vec![vec![0usize; problem.nodes.len()]; seconds];
    let mut mean_replicas = vec![0.0; problem.nodes.len()];
    for (m, node_slots) in slots.iter().enumerate() {
        for s in node_slots {
            for &(bill, _, until) in &s.intervals {
                let until = until.min(end_ms);
                if until <= bill {
                    continue;
                }
                let held_s = (until - bill) / 1e3;
                cost += held_s * prices[m];
                mean_replicas[m] += held_s;
                let (a, b) = (
                    (bill / 1e3) as usize,
                    ((until / 1e3).ceil() as usize).min(seconds),
                );
                for (sec, c) in cost_s.iter_mut().enumerate().take(b).skip(a) {
                    let lo = bill.max(sec as f64 * 1e3);
                    let hi = until.min((sec + 1) as f64 * 1e3);
                    if hi > lo {
                        *c += (hi - lo) / 1e3 * prices[m];
                    }
                    if until >= (sec + 1) as f64 * 1e3 || until >= end_ms {
                        held[sec][m] += 1;
                    }
                }
            }
        }
    }
    let duration_s = (end_ms / 1e3).max(1e-9);
    for r in &mut mean_replicas {
        *r /= duration_s;
    }
    let max_replicas: Vec<usize> = (0..problem.nodes.len())
        .map(|m| held.iter().map(|h| h[m]).max().unwrap_or(0))
        .collect();
    let series = per_second
        .into_iter()
        .enumerate()
        .map(|(s, (arr, ok, h))| ReplaySecond {
            second: s,
            arrivals: arr,
            slo_attainment: (arr > 0).then(|| ok as f64 / arr as f64),
            p99_ms: h.quantile(0.99),
            replicas: held[s].clone(),
            cost_per_s: cost_s[s],
        })
        .collect();
    let nq = latencies.len();
    let (p50, p99, pct) = if nq > 0 {
        (
            quantile(&mut latencies, 50.0),
            quantile(&mut latencies, 99.0),
            quantile(&mut latencies, problem.percentile),
        )
    } else {
        (0.0, 0.0, 0.0)
    };
    ReplayReport {
        policy: opts.policy.clone(),
        simulated: true,
        queries: n,
        duration_s: end_ms / 1e3,
        slo_attainment: if n > 0 { met as f64 / n as f64 } else { 1.0 },
        p50_ms: p50,
        p99_ms: p99,
        percentile_ms: pct,
        cost,
        cost_per_hour: cost / duration_s * 3600.0,
        scale_outs,
        scale_ins,
        drift_at_s,
        max_replicas,
        mean_replicas,
        series,
    }
}

// ---------------------------------------------------------------------------------------------
// Pipelines of the Proteus catalogue

/// A stage of a catalogue pipeline: a node serving an application (a Proteus family).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StageSpec {
    pub name: &'static str,
    pub family: &'static str,
    pub parents: Vec<usize>,
    pub branch_probability: f64,
}

/// A pipeline of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineSpec {
    pub name: &'static str,
    pub description: &'static str,
    pub stages: Vec<StageSpec>,
}

fn stage(
    name: &'static str,
    family: &'static str,
    parents: &[usize],
    branch_probability: f64,
) -> StageSpec {
    StageSpec {
        name,
        family,
        parents: parents.to_vec(),
        branch_probability,
    }
}

/// The pipelines [`pipelines`] defines, by name.
pub const PIPELINES: &[&str] = &["detect-classify", "three-stage", "cascade", "social-dag"];

/// The catalogue's pipelines:
/// - `detect-classify`: object detection (yolov5) then classification (resnet);
/// - `three-stage`: detection (yolov5), classification (efficientnet), then a text model on
///   the result (bert family);
/// - `cascade`: a cheap classifier (mobilenet) on every query, an expensive one (resnest) on
///   the 30% it is unsure of (a switch);
/// - `social-dag`: five nodes with a fan-out, a switch and a join: detection (yolov5) feeds
///   classification (resnet) and, for half the queries, a scene model (efficientnet);
///   classification feeds a fine-grained model (densenet) for 30% of them; a text model (bert)
///   joins the scene and fine-grained branches.
pub fn pipelines() -> Vec<PipelineSpec> {
    vec![
        PipelineSpec {
            name: "detect-classify",
            description: "yolov5 detection -> resnet classification",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "resnet", &[0], 1.0),
            ],
        },
        PipelineSpec {
            name: "three-stage",
            description: "yolov5 detection -> efficientnet classification -> bert text",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "efficientnet", &[0], 1.0),
                stage("text", "bert", &[1], 1.0),
            ],
        },
        PipelineSpec {
            name: "cascade",
            description: "mobilenet on every query -> resnest on 30% (switch)",
            stages: vec![
                stage("cheap", "mobilenet", &[], 1.0),
                stage("expensive", "resnest", &[0], 0.3),
            ],
        },
        PipelineSpec {
            name: "social-dag",
            description: "yolov5 -> {resnet -> densenet (30%), efficientnet (50%)} -> bert (join)",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "resnet", &[0], 1.0),
                stage("scene", "efficientnet", &[0], 0.5),
                stage("fine", "densenet", &[1], 0.3),
                stage("text", "bert", &[2, 3], 1.0),
            ],
        },
    ]
}

/// A pipeline of [`pipelines`] by name.
pub fn pipeline(name: &str) -> Option<PipelineSpec> {
    pipelines().into_iter().find(|p| p.name == name)
}

/// How the catalogue's profiles become options.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSettings {
    /// Hardware a node may run on.
    pub accelerators: Vec<Accelerator>,
    /// Cores a CPU replica holds.
    pub cpu_threads: usize,
    pub load_ms_cpu: f64,
    pub load_ms_gpu: f64,
    pub memory_bytes: u64,
}

impl Default for OptionSettings {
    /// CPU (4 cores a replica) and both GPU generations, the simulator's load times (2 s on
    /// CPU, 5 s on GPU, the activation time of InferLine's serving systems) and 2 GB of memory.
    fn default() -> Self {
        OptionSettings {
            accelerators: vec![
                Accelerator::Cpu,
                Accelerator::GpuPascal,
                Accelerator::GpuAmpere,
            ],
            cpu_threads: 4,
            load_ms_cpu: 2_000.0,
            load_ms_gpu: 5_000.0,
            memory_bytes: 2 << 30,
        }
    }
}

/// Every profiled (model, accelerator, batch) of `family` as options, one group per (model,
/// accelerator) ([`Profile::variants`]).
pub fn options_for(catalogue: &[Profile], family: &str, s: &OptionSettings) -> Vec<PlanOption> {
    let mut out = Vec::new();
    for (group, p) in catalogue
        .iter()
        .filter(|p| p.family == family && s.accelerators.contains(&p.accelerator))
        .enumerate()
    {
        let (threads, load_ms) = match p.accelerator {
            Accelerator::Cpu => (s.cpu_threads.max(1), s.load_ms_cpu),
            _ => (1, s.load_ms_gpu),
        };
        out.extend(
            p.variants(family, threads, load_ms, s.memory_bytes)
                .into_iter()
                .map(|variant| PlanOption {
                    variant,
                    group: group as u32,
                }),
        );
    }
    out
}

/// Why a pipeline evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("unknown pipeline '{name}'; expected one of {}", PIPELINES.join(", "))]
    Unknown { name: String },
    #[error(
        "pipeline '{pipeline}', stage '{stage}': the catalogue has no profile of family '{family}'"
    )]
    NoProfile {
        pipeline: String,
        stage: String,
        family: String,
    },
    #[error("the input trace holds no arrivals")]
    EmptyTrace,
    #[error("planning pipeline '{pipeline}' ({policy}): {source}")]
    Plan {
        pipeline: String,
        policy: String,
        #[source]
        source: PlanError,
    },
}

/// The planning problem of a catalogue pipeline: its stages with every option of their
/// families, P`percentile` SLO `slo_ms`, the default prices.
pub fn problem_for(
    spec: &PipelineSpec,
    catalogue: &[Profile],
    slo_ms: f64,
    settings: &OptionSettings,
) -> Result<PlanProblem, PipelineError> {
    Ok(PlanProblem::new(
        plan_nodes(spec, catalogue, settings)?,
        slo_ms,
    ))
}

/// A catalogue pipeline's stages as planning nodes, each with every option of its family.
pub fn plan_nodes(
    spec: &PipelineSpec,
    catalogue: &[Profile],
    settings: &OptionSettings,
) -> Result<Vec<PlanNode>, PipelineError> {
    let mut nodes = Vec::new();
    for s in &spec.stages {
        let options = options_for(catalogue, s.family, settings);
        if options.is_empty() {
            return Err(PipelineError::NoProfile {
                pipeline: spec.name.into(),
                stage: s.name.into(),
                family: s.family.into(),
            });
        }
        nodes.push(PlanNode {
            name: s.name.into(),
            parents: s.parents.clone(),
            branch_probability: s.branch_probability,
            options,
        });
    }
    Ok(nodes)
}

/// The best estimated end-to-end accuracy of a problem (every node on its most accurate
/// option, latency aside).
pub fn best_accuracy(problem: &PlanProblem) -> f64 {
    let reach = reach_probabilities(problem);
    problem
        .nodes
        .iter()
        .zip(&reach)
        .map(|(n, r)| {
            n.options
                .iter()
                .map(|o| o.variant.accuracy)
                .fold(0.0, f64::max)
                .powf(*r)
        })
        .product()
}

/// Which arrivals of a Proteus pattern enter a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Input {
    /// Every query of the pattern (all families' files): the whole stream feeds the pipeline.
    All,
    /// The queries of the family of the pipeline's first stage only.
    Root,
}

/// The pipeline-entry arrivals (ms, sorted) of `trace` for `spec`.
pub fn input_arrivals(trace: &Trace, spec: &PipelineSpec, input: Input) -> Vec<f64> {
    let root = spec.stages.first().map(|s| s.family);
    let mut v: Vec<f64> = trace
        .arrivals
        .iter()
        .filter(|a| match input {
            Input::All => true,
            Input::Root => root.is_some_and(|r| trace.apps.get(a.app).is_some_and(|x| x == r)),
        })
        .map(|a| a.at_ms)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

// ---------------------------------------------------------------------------------------------
// Baselines

/// A baseline's configuration and what making it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub configs: Vec<NodeConfig>,
    pub planner_ms: f64,
    pub estimates: usize,
    /// What the baseline is, in words (e.g. CG-Peak's hardware, batch and units).
    pub note: String,
}

/// The per-stage baseline: every node planned alone by the same planner (on the same
/// planning arrivals, thinned to its reach) with an equal share `slo / depth` of the SLO and,
/// as its accuracy floor, the accuracy `reference` chose for it (so the end-to-end accuracy
/// is the same), then combined.
pub fn per_stage(
    problem: &PlanProblem,
    reference: &[NodeConfig],
    planning_ms: &[f64],
    seed: u64,
) -> Result<Baseline, PlanError> {
    let started = Instant::now();
    let reach = reach_probabilities(problem);
    let share = problem.slo_ms / problem.depth().max(1) as f64;
    let mut configs = Vec::new();
    let mut estimates = 0;
    for (m, node) in problem.nodes.iter().enumerate() {
        let floor = reference
            .get(m)
            .and_then(|c| node.options.get(c.option))
            .map(|o| o.variant.accuracy.powf(reach[m]));
        let single = PlanProblem {
            nodes: vec![PlanNode {
                name: node.name.clone(),
                parents: Vec::new(),
                branch_probability: reach[m],
                options: node.options.clone(),
            }],
            slo_ms: share,
            min_accuracy: floor.map(|f| f - 1e-12),
            max_cost_per_hour: None,
            measured_accuracy: None,
            ..problem.clone()
        };
        let mut e = TraceEstimator::new(planning_ms.to_vec(), seed);
        let p = plan(&single, &mut e)?;
        estimates += p.estimates;
        configs.push(p.configs[0]);
    }
    Ok(Baseline {
        configs,
        planner_ms: started.elapsed().as_secs_f64() * 1e3,
        estimates,
        note: format!("each node alone with {share:.0} ms"),
    })
}

/// InferLine's coarse-grained baseline provisioned for the peak (CG-Peak): the pipeline as
/// one unit on one kind of hardware (every node on the model `reference` chose for it, so the
/// accuracy is the same), with the largest batch size common to all nodes whose batch
/// latency along the longest path (profiled p99) fits the SLO, replicated as a whole for the
/// peak rate of `peak_ms` (the highest rate in a sliding window as long as the SLO). The
/// cheapest hardware that can do it wins.
pub fn cg_peak(
    problem: &PlanProblem,
    reference: &[NodeConfig],
    peak_ms: &[f64],
) -> Option<Baseline> {
    let started = Instant::now();
    let reach = reach_probabilities(problem);
    let peak = infaas_scheduler::pipeline::envelope(peak_ms, &[problem.slo_ms])[0];
    let models: Vec<&str> = problem
        .nodes
        .iter()
        .zip(reference)
        .map(|(n, c)| {
            n.options
                .get(c.option)
                .map_or("", |o| o.variant.model.as_str())
        })
        .collect();
    // Hardware kinds are told apart by the options' groups' names (model@accelerator).
    let accel_of = |o: &PlanOption| -> String {
        o.variant
            .name
            .split('@')
            .nth(1)
            .and_then(|s| s.split('#').next())
            .unwrap_or(o.variant.hardware.as_str())
            .to_string()
    };
    let mut kinds: Vec<String> = problem
        .nodes
        .iter()
        .flat_map(|n| n.options.iter().map(accel_of))
        .collect();
    kinds.sort();
    kinds.dedup();
    let mut best: Option<(f64, Vec<NodeConfig>, String)> = None;
    for kind in &kinds {
        // Per node: its model's options on this hardware, by max batch.
        let per_node: Vec<Vec<(usize, usize)>> = problem
            .nodes
            .iter()
            .enumerate()
            .map(|(m, n)| {
                let mut v: Vec<(usize, usize)> = n
                    .options
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.variant.model == models[m] && &accel_of(o) == kind)
                    .map(|(i, o)| (o.variant.max_batch, i))
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        if per_node.iter().any(Vec::is_empty) {
            continue;
        }
        let mut batches: Vec<usize> = per_node[0].iter().map(|x| x.0).collect();
        batches.retain(|b| per_node.iter().all(|v| v.iter().any(|x| x.0 == *b)));
        let pick = |b: usize| -> Vec<usize> {
            per_node
                .iter()
                .map(|v| v.iter().find(|x| x.0 == b).map_or(0, |x| x.1))
                .collect()
        };
        let fits = |b: usize| {
            let o = pick(b);
            let w: Vec<f64> = (0..problem.nodes.len())
                .map(|m| problem.nodes[m].options[o[m]].variant.latency_ms(b))
                .collect();
            infaas_scheduler::pipeline::longest_path(problem, &w) <= problem.slo_ms
        };
        let Some(&b) = batches.iter().rev().find(|&&b| fits(b)) else {
            continue;
        };
        let options = pick(b);
        let unit = (0..problem.nodes.len())
            .filter(|&m| reach[m] > 0.0)
            .map(|m| option_throughput_per_s(&problem.nodes[m].options[options[m]]) / reach[m])
            .fold(f64::INFINITY, f64::min);
        if unit.is_nan() || unit <= 0.0 {
            continue;
        }
        let units = ((peak / unit - 1e-9).ceil() as usize).max(1);
        let configs: Vec<NodeConfig> = options
            .iter()
            .map(|&option| NodeConfig {
                option,
                replicas: units,
            })
            .collect();
        let cost = cost_per_hour(problem, &configs);
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((
                cost,
                configs,
                format!("{kind}, batch {b}, {units} units for {peak:.0} queries/s"),
            ));
        }
    }
    best.map(|(_, configs, note)| Baseline {
        configs,
        planner_ms: started.elapsed().as_secs_f64() * 1e3,
        estimates: 0,
        note,
    })
}

// ---------------------------------------------------------------------------------------------
// Evaluation

/// How [`evaluate`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSettings {
    pub slo_ms: f64,
    pub percentile: f64,
    /// An absolute floor of the estimated end-to-end accuracy; `None`: `accuracy_fraction` of
    /// the best reachable.
    pub min_accuracy: Option<f64>,
    pub accuracy_fraction: f64,
    /// The planning trace: the first `plan_s` seconds of the live arrivals.
    pub plan_s: f64,
    /// The plan is made for the planning trace at `1 + load_margin` times its rate (its
    /// arrival times divided by that), and the tuner's planned envelope is that trace's: room
    /// for a burst that lasts longer than in the sample while new replicas load.
    pub load_margin: f64,
    pub max_replicas: usize,
    pub seed: u64,
    /// The tuner's max-provisioning ratio and scale-out headroom.
    pub provisioning: Provisioning,
    pub headroom: f64,
    pub prices: Prices,
    pub options: OptionSettings,
}

impl Default for EvalSettings {
    /// SLO 300 ms (the Proteus traces') at P99.5, accuracy floor 90% of the best reachable,
    /// planning on the first 60 s with a 10% load margin, the tuner's timescale provisioning
    /// with headroom 1.2, at most 256 replicas a node, the default prices and options.
    fn default() -> Self {
        EvalSettings {
            slo_ms: 300.0,
            percentile: 99.5,
            min_accuracy: None,
            accuracy_fraction: 0.9,
            plan_s: 60.0,
            load_margin: 0.1,
            max_replicas: 256,
            seed: 1,
            provisioning: Provisioning::Timescale,
            headroom: 1.2,
            prices: Prices::default(),
            options: OptionSettings::default(),
        }
    }
}

/// One policy's row of the evaluation (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRow {
    pub pipeline: String,
    pub policy: String,
    pub slo_attainment: f64,
    pub p99_ms: f64,
    /// Mean price per hour over the replay.
    pub cost_per_hour: f64,
    /// `cost_per_hour` over InferLine's.
    pub cost_ratio: f64,
    pub planner_ms: f64,
    pub estimates: usize,
    pub accuracy: f64,
    pub note: String,
    /// The configuration replayed (as planned, before the tuner).
    pub nodes: Vec<NodePlan>,
    pub replay: ReplayReport,
}

/// One pipeline's evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineEval {
    pub pipeline: String,
    pub description: String,
    pub slo_ms: f64,
    pub percentile: f64,
    pub min_accuracy: f64,
    pub planning_queries: usize,
    pub planning_s: f64,
    pub live_queries: usize,
    pub live_s: f64,
    /// InferLine's plan on the planning trace.
    pub plan: Plan,
    pub rows: Vec<EvalRow>,
    /// Policies that could not be configured, and why.
    pub failed: Vec<(String, String)>,
}

/// Plans `spec` on the first `plan_s` seconds of `live_ms` (at `1 + load_margin` times their
/// rate) and replays the whole of `live_ms` under four policies (SIMULATED):
/// - `inferline`: the joint plan, the tuner driving replicas;
/// - `inferline-plan`: the joint plan alone (no tuner), to show what the tuner adds;
/// - `per-stage`: [`per_stage`] (each node alone with an equal share of the SLO and the joint
///   plan's accuracies as floors), the same tuner;
/// - `cg-peak`: [`cg_peak`], static, provisioned for the peak of the *live* trace (an oracle:
///   it knows the whole trace, which InferLine's planner does not; the paper's CG baselines
///   size on the sample and tune as a unit, which is not simulated here).
///
/// The cost ratios are each policy's mean price per hour over InferLine's.
pub fn evaluate(
    spec: &PipelineSpec,
    catalogue: &[Profile],
    live_ms: &[f64],
    s: &EvalSettings,
) -> Result<PipelineEval, PipelineError> {
    if live_ms.is_empty() {
        return Err(PipelineError::EmptyTrace);
    }
    let mut problem = problem_for(spec, catalogue, s.slo_ms, &s.options)?;
    problem.percentile = s.percentile;
    problem.prices = s.prices;
    problem.max_replicas = s.max_replicas;
    let min_accuracy = s
        .min_accuracy
        .unwrap_or_else(|| s.accuracy_fraction * best_accuracy(&problem));
    problem.min_accuracy = Some(min_accuracy);
    let start = live_ms[0];
    let factor = 1.0 + s.load_margin.max(0.0);
    let planning: Vec<f64> = live_ms
        .iter()
        .copied()
        .take_while(|&t| t < start + s.plan_s * 1e3)
        .map(|t| start + (t - start) / factor)
        .collect();
    let fail = |policy: &str, source: PlanError| PipelineError::Plan {
        pipeline: spec.name.into(),
        policy: policy.into(),
        source,
    };
    let started = Instant::now();
    let mut estimator = TraceEstimator::new(planning.clone(), s.seed);
    let joint = plan(&problem, &mut estimator).map_err(|e| fail("inferline", e))?;
    let planner_ms = started.elapsed().as_secs_f64() * 1e3;

    let tuner_for = |configs: &[NodeConfig]| {
        let mut t = TunerConfig::from_plan(&problem, configs, &planning);
        t.provisioning = s.provisioning;
        t.headroom = s.headroom;
        t
    };
    let run = |policy: &str, configs: &[NodeConfig], tuner: Option<TunerConfig>| {
        replay(
            &problem,
            configs,
            live_ms,
            &ReplayOptions {
                policy: policy.into(),
                tuner,
                tick_ms: 1_000.0,
                seed: s.seed,
            },
        )
    };
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    let mut push = |policy: &str,
                    configs: &[NodeConfig],
                    replay: ReplayReport,
                    planner_ms: f64,
                    estimates: usize,
                    note: String| {
        rows.push(EvalRow {
            pipeline: spec.name.into(),
            policy: policy.into(),
            slo_attainment: replay.slo_attainment,
            p99_ms: replay.p99_ms,
            cost_per_hour: replay.cost_per_hour,
            cost_ratio: f64::NAN,
            planner_ms,
            estimates,
            accuracy: estimated_accuracy(&problem, configs),
            note,
            nodes: node_plans(&problem, configs),
            replay,
        });
    };
    let describe = |configs: &[NodeConfig]| {
        node_plans(&problem, configs)
            .iter()
            .map(|n| format!("{}x{}", n.replicas, n.variant))
            .collect::<Vec<_>>()
            .join(" -> ")
    };
    push(
        "inferline",
        &joint.configs,
        run("inferline", &joint.configs, Some(tuner_for(&joint.configs))),
        planner_ms,
        joint.estimates,
        describe(&joint.configs),
    );
    push(
        "inferline-plan",
        &joint.configs,
        run("inferline-plan", &joint.configs, None),
        planner_ms,
        joint.estimates,
        "the plan, no tuner".into(),
    );
    match per_stage(&problem, &joint.configs, &planning, s.seed) {
        Ok(b) => push(
            "per-stage",
            &b.configs,
            run("per-stage", &b.configs, Some(tuner_for(&b.configs))),
            b.planner_ms,
            b.estimates,
            format!("{}: {}", b.note, describe(&b.configs)),
        ),
        Err(e) => failed.push(("per-stage".to_string(), e.to_string())),
    }
    match cg_peak(&problem, &joint.configs, live_ms) {
        Some(b) => push(
            "cg-peak",
            &b.configs,
            run("cg-peak", &b.configs, None),
            b.planner_ms,
            b.estimates,
            b.note,
        ),
        None => failed.push((
            "cg-peak".to_string(),
            "no hardware kind runs every node's model within the SLO".to_string(),
        )),
    }
    let base = rows.first().map_or(f64::NAN, |r: &EvalRow| r.cost_per_hour);
    for r in &mut rows {
        r.cost_ratio = r.cost_per_hour / base;
    }
    Ok(PipelineEval {
        pipeline: spec.name.into(),
        description: spec.description.into(),
        slo_ms: s.slo_ms,
        percentile: s.percentile,
        min_accuracy,
        planning_queries: planning.len(),
        planning_s: s.plan_s,
        live_queries: live_ms.len(),
        live_s: (live_ms[live_ms.len() - 1] - start) / 1e3,
        plan: joint,
        rows,
        failed,
    })
}

/// A fixed, seeded Poisson stream of `rate` queries/s over `seconds` (ms, sorted), for tests
/// and benchmarks.
pub fn poisson_arrivals(rate: f64, seconds: f64, seed: u64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut t = 0.0;
    let mut i = 0u64;
    loop {
        let u = ((mix(seed ^ mix(i)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
        t += -u.ln() / rate;
        if t >= seconds {
            return out;
        }
        out.push(t * 1e3);
        i += 1;
    }
}

/// Index of a pipeline's options by (model, accelerator) for tests and reports: the option
/// of `model` on the accelerator named `accel` (as in variant names) with max batch `batch`.
pub fn find_option(node: &PlanNode, model: &str, accel: &str, batch: usize) -> Option<usize> {
    let name = format!("{model}@{accel}#b{batch}");
    node.options.iter().position(|o| o.variant.name == name)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use infaas_core::{HardwareKind, LatencyPoint};
    use infaas_scheduler::VariantEntry;

    fn point(batch: usize, ms: f64) -> LatencyPoint {
        LatencyPoint {
            batch,
            p50_ms: ms,
            p99_ms: ms * 1.1,
            mean_ms: ms,
            throughput_per_s: batch as f64 * 1e3 / ms,
        }
    }

    fn variant(
        name: &str,
        hw: HardwareKind,
        accuracy: f64,
        points: &[(usize, f64)],
    ) -> VariantEntry {
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
        let arrivals = poisson_arrivals(500.0, 200.0, 3);
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

    #[test]
    fn early_abort_gives_the_same_verdicts() {
        let p = detect_classify(120.0);
        let arrivals = poisson_arrivals(150.0, 60.0, 5);
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
        let arrivals = poisson_arrivals(300.0, 60.0, 9);
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
                tick_ms: 1_000.0,
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
        let arrivals = poisson_arrivals(300.0, 60.0, 21);
        let joint = plan(&p, &mut TraceEstimator::new(arrivals.clone(), 1)).unwrap();
        let stages = per_stage(&p, &joint.configs, &arrivals, 1).unwrap();
        let opts = |policy: &str| ReplayOptions {
            policy: policy.into(),
            tuner: None,
            tick_ms: 1_000.0,
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
        let planning = poisson_arrivals(100.0, 60.0, 4);
        let plan = plan(&p, &mut TraceEstimator::new(planning.clone(), 1)).unwrap();
        // Live: the planned rate for a minute, rising to three times that over the next one
        // (5-s steps), then staying there for another.
        let mut live = planning.clone();
        for k in 0..24 {
            let rate = 100.0 + 200.0 * (k.min(12) as f64) / 12.0;
            let from = 60_000.0 + k as f64 * 5_000.0;
            live.extend(
                poisson_arrivals(rate, 5.0, 100 + k)
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
                    tick_ms: 1_000.0,
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
}
