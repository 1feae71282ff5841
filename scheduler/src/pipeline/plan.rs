//! The planner: InferLine's Algorithm 1 (a feasible start) then Algorithm 2 (greedy cost
//! minimisation), model-less.
//!
//! 1. Service time: the longest path of the fastest options' batch-1 p99; at or above the SLO
//!    nothing can meet it ([`PlanError::ServiceTime`]).
//! 2. Start: every node on the fastest of its groups' smallest-batch options (batch 1 in the
//!    Proteus catalogue). While the estimated accuracy is below the floor, the node whose more
//!    accurate option costs the least batch-1 latency moves to it (keeping the path below the
//!    SLO), else [`PlanError::Accuracy`].
//! 3. Replicas start at the stability bound `ceil(reach * rate / throughput)` (the estimator's
//!    [`Estimator::arrival_rate_per_s`]), then Algorithm 1 adds one replica at a time to the
//!    bottleneck (highest utilisation `reach * rate / (replicas * throughput)` among nodes below
//!    the cap) until the estimator finds the SLO met ([`PlanError::Replicas`] at the cap).
//! 4. Algorithm 2, repeated until no candidate lowers the cost: for every node, the candidates
//!    are (a) a larger batch of the same group, (b) fewer replicas of the same option, (c) an
//!    option of another group that keeps the accuracy floor (the model-less "downgrade
//!    hardware": another model or hardware, at every batch whose full batch fits the SLO
//!    beside the rest of the path, or its smallest). Every candidate takes the fewest
//!    replicas the estimator accepts, found by bisection between its stability bound and the
//!    most it may have while still being cheaper than the best candidate so far. When even
//!    that fails, the candidate is repaired as the paper re-initialises a downgraded node:
//!    from its stability bound, replicas go to the bottleneck of the whole pipeline (a few
//!    steps at most) while it stays cheaper; this escapes the local optima where a node's new
//!    option makes its output burstier and a neighbour needs more replicas for a while.
//!    Candidates are tried in order of their cost
//!    lower bound (stability replicas), so the search stops as soon as no remaining candidate
//!    can beat the best one found; the cheapest is taken.
//! 5. As at the end of the paper's Algorithm 2 (a larger batch is taken at equal cost when
//!    nothing cheaper is feasible), every node then moves to the next larger batch of its
//!    group while the estimate stays feasible: throughput headroom for the tuner at no cost.
//! 6. The cost ceiling, if any, is checked last ([`PlanError::Cost`]).
//!
//! Estimates of identical configurations are asked once (memoised).

use std::collections::HashMap;

use super::{
    accuracy_with, cost_per_hour, estimated_accuracy, longest_path, node_plans,
    option_throughput_per_s, reach_probabilities, service_time_ms, Estimator, NodeConfig,
    PipelinePlan, PlanError, PlanProblem,
};

/// Relative margin under which two costs are equal.
const EPS: f64 = 1e-9;

/// Most replicas a repair adds to a failing candidate (each step is one estimate).
const REPAIR_STEPS: usize = 6;

/// Most cost-reducing steps of Algorithm 2 (each strictly lowers the cost, so it ends long
/// before in practice).
const MAX_STEPS: usize = 100_000;

/// Plans `problem` against `estimator` (see the module documentation).
pub fn plan(
    problem: &PlanProblem,
    estimator: &mut dyn Estimator,
) -> Result<PipelinePlan, PlanError> {
    problem.validate()?;
    let service = service_time_ms(problem);
    if service >= problem.slo_ms {
        return Err(PlanError::ServiceTime {
            service_ms: service,
            slo_ms: problem.slo_ms,
        });
    }
    let mut s = Search::new(problem, estimator);
    let mut configs = s.start()?;
    s.initialise(&mut configs)?;
    let initial = configs.clone();
    let steps = s.minimise(&mut configs) + s.widen_batches(&mut configs);
    let estimate = s.estimate(&configs);
    let cost = cost_per_hour(problem, &configs);
    if let Some(ceiling) = problem.max_cost_per_hour {
        if cost > ceiling * (1.0 + EPS) {
            return Err(PlanError::Cost {
                cheapest: cost,
                ceiling,
            });
        }
    }
    Ok(PipelinePlan {
        nodes: node_plans(problem, &configs),
        accuracy: estimated_accuracy(problem, &configs),
        cost_per_hour: cost,
        estimate,
        estimates: s.estimates,
        service_time_ms: service,
        initial_cost_per_hour: cost_per_hour(problem, &initial),
        initial,
        configs,
        steps,
    })
}

/// A candidate of Algorithm 2: node `node` on option `option`, with at least `lower`
/// replicas.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    node: usize,
    option: usize,
    lower: usize,
    /// Cost per second of the configuration with `lower` replicas.
    bound: f64,
    max_batch: usize,
}

struct Search<'a> {
    problem: &'a PlanProblem,
    estimator: &'a mut dyn Estimator,
    reach: Vec<f64>,
    rate: Option<f64>,
    memo: HashMap<Vec<NodeConfig>, bool>,
    estimates: usize,
    /// Per node, per option: price per second of a replica.
    price: Vec<Vec<f64>>,
    /// Per node, per option: saturation throughput of a replica, queries/s.
    throughput: Vec<Vec<f64>>,
    /// Per node, per option: profiled batch-1 p99, ms.
    p99_1: Vec<Vec<f64>>,
    /// Per node, per option: the smallest profiled batch-1 figure (mean, p50, p99), a lower
    /// bound of any estimator's batch-1 time.
    floor_1: Vec<Vec<f64>>,
    /// Per node, per option: the profiled mean of a full batch, ms.
    full: Vec<Vec<f64>>,
}

impl<'a> Search<'a> {
    fn new(problem: &'a PlanProblem, estimator: &'a mut dyn Estimator) -> Search<'a> {
        let per_option = |f: &dyn Fn(&super::PlanOption) -> f64| -> Vec<Vec<f64>> {
            problem
                .nodes
                .iter()
                .map(|n| n.options.iter().map(f).collect())
                .collect()
        };
        let price = per_option(&|o| problem.prices.rate_per_s(&o.variant));
        let throughput = per_option(&option_throughput_per_s);
        let p99_1 = per_option(&|o| o.variant.latency_ms(1));
        let floor_1 = per_option(&|o| {
            o.variant.latency_at(1).map_or(f64::INFINITY, |(p, k)| {
                p.mean_ms.min(p.p50_ms).min(p.p99_ms) * k
            })
        });
        let full = per_option(&|o| {
            o.variant
                .latency_at(o.variant.max_batch)
                .map_or(f64::INFINITY, |(p, k)| p.mean_ms * k)
        });
        let rate = estimator
            .arrival_rate_per_s()
            .filter(|r| r.is_finite() && *r > 0.0);
        Search {
            reach: reach_probabilities(problem),
            problem,
            estimator,
            rate,
            memo: HashMap::new(),
            estimates: 0,
            price,
            throughput,
            p99_1,
            floor_1,
            full,
        }
    }

    fn feasible(&mut self, configs: &[NodeConfig]) -> bool {
        if let Some(&f) = self.memo.get(configs) {
            return f;
        }
        self.estimates += 1;
        let f = self.estimator.feasible(self.problem, configs);
        self.memo.insert(configs.to_vec(), f);
        f
    }

    fn estimate(&mut self, configs: &[NodeConfig]) -> super::Estimate {
        self.estimates += 1;
        self.estimator.estimate(self.problem, configs)
    }

    /// The stability bound of node `m` on `option`: `ceil(reach * rate / throughput)`, at
    /// least 1.
    fn lower(&self, m: usize, option: usize) -> usize {
        let Some(rate) = self.rate else { return 1 };
        let mu = self.throughput[m][option];
        if mu.is_nan() || mu <= 0.0 {
            return usize::MAX;
        }
        let need = self.reach[m] * rate / mu;
        ((need - EPS).ceil().max(1.0)) as usize
    }

    /// Options of each group with the smallest max batch.
    fn smallest_batches(&self, m: usize) -> Vec<usize> {
        let mut best: HashMap<u32, usize> = HashMap::new();
        for (i, o) in self.problem.nodes[m].options.iter().enumerate() {
            best.entry(o.group)
                .and_modify(|b| {
                    if o.variant.max_batch < self.problem.nodes[m].options[*b].variant.max_batch {
                        *b = i;
                    }
                })
                .or_insert(i);
        }
        let mut v: Vec<usize> = best.into_values().collect();
        v.sort_unstable();
        v
    }

    /// Step 2: the start options (replicas at the stability bound).
    fn start(&mut self) -> Result<Vec<NodeConfig>, PlanError> {
        let p = self.problem;
        let reps: Vec<Vec<usize>> = (0..p.nodes.len())
            .map(|m| self.smallest_batches(m))
            .collect();
        let mut option: Vec<usize> = reps
            .iter()
            .enumerate()
            .map(|(m, r)| {
                let mut r = r.clone();
                r.sort_by(|&a, &b| {
                    self.p99_1[m][a].total_cmp(&self.p99_1[m][b]).then(
                        p.nodes[m].options[b]
                            .variant
                            .accuracy
                            .total_cmp(&p.nodes[m].options[a].variant.accuracy),
                    )
                });
                r[0]
            })
            .collect();
        if let Some(min) = p.min_accuracy {
            loop {
                let acc = accuracy_with(p, &self.reach, |m| option[m]);
                if acc >= min - EPS {
                    break;
                }
                // The upgrade that costs the least batch-1 latency and keeps the path below
                // the SLO.
                let mut best: Option<(f64, f64, usize, usize)> = None;
                for m in 0..p.nodes.len() {
                    let current = &p.nodes[m].options[option[m]];
                    for &o in &reps[m] {
                        let v = &p.nodes[m].options[o].variant;
                        if v.accuracy <= current.variant.accuracy {
                            continue;
                        }
                        let weights: Vec<f64> = (0..p.nodes.len())
                            .map(|i| self.p99_1[i][if i == m { o } else { option[i] }])
                            .collect();
                        if longest_path(p, &weights) >= p.slo_ms {
                            continue;
                        }
                        let cost = self.p99_1[m][o] - self.p99_1[m][option[m]];
                        let key = (cost, v.accuracy, m, o);
                        if best.is_none_or(|b| (key.0, key.1) < (b.0, b.1)) {
                            best = Some(key);
                        }
                    }
                }
                match best {
                    Some((_, _, m, o)) => option[m] = o,
                    None => {
                        return Err(PlanError::Accuracy {
                            best: self.best_accuracy(&reps, acc),
                            min,
                        })
                    }
                }
            }
        }
        Ok(option
            .iter()
            .enumerate()
            .map(|(m, &o)| NodeConfig {
                option: o,
                replicas: self.lower(m, o).min(p.max_replicas),
            })
            .collect())
    }

    /// The best accuracy reachable: every node on its most accurate option when that keeps
    /// the service time below the SLO, else `greedy` (what the upgrades reached).
    fn best_accuracy(&self, reps: &[Vec<usize>], greedy: f64) -> f64 {
        let p = self.problem;
        let top: Vec<usize> = reps
            .iter()
            .enumerate()
            .map(|(m, r)| {
                let best_acc = r
                    .iter()
                    .map(|&o| p.nodes[m].options[o].variant.accuracy)
                    .fold(f64::NEG_INFINITY, f64::max);
                r.iter()
                    .copied()
                    .filter(|&o| p.nodes[m].options[o].variant.accuracy >= best_acc)
                    .min_by(|&a, &b| self.p99_1[m][a].total_cmp(&self.p99_1[m][b]))
                    .unwrap_or(0)
            })
            .collect();
        let weights: Vec<f64> = top
            .iter()
            .enumerate()
            .map(|(m, &o)| self.p99_1[m][o])
            .collect();
        if longest_path(p, &weights) < p.slo_ms {
            accuracy_with(p, &self.reach, |m| top[m])
        } else {
            greedy
        }
    }

    /// Algorithm 1: replicas to the bottleneck until the estimate meets the SLO.
    fn initialise(&mut self, configs: &mut [NodeConfig]) -> Result<(), PlanError> {
        let p = self.problem;
        loop {
            if self.feasible(configs) {
                return Ok(());
            }
            let utilisation = |m: usize| {
                let c = configs[m];
                self.reach[m] / (c.replicas as f64 * self.throughput[m][c.option])
            };
            let mut order: Vec<usize> = (0..p.nodes.len()).collect();
            order.sort_by(|&a, &b| utilisation(b).total_cmp(&utilisation(a)).then(a.cmp(&b)));
            match order
                .iter()
                .copied()
                .find(|&m| configs[m].replicas < p.max_replicas)
            {
                Some(m) => configs[m].replicas += 1,
                None => {
                    let e = self.estimate(configs);
                    return Err(PlanError::Replicas {
                        node: p.nodes[order[0]].name.clone(),
                        max: p.max_replicas,
                        latency_ms: e.latency_ms,
                    });
                }
            }
        }
    }

    /// Per node, the longest path through it without its own weight, with the floor batch-1
    /// times of the current options.
    fn rest_of_path(&self, configs: &[NodeConfig]) -> Vec<f64> {
        let p = self.problem;
        let n = p.nodes.len();
        let w: Vec<f64> = (0..n).map(|m| self.floor_1[m][configs[m].option]).collect();
        let mut up = vec![0.0f64; n];
        for m in 0..n {
            up[m] = p.nodes[m]
                .parents
                .iter()
                .map(|&q| up[q] + w[q])
                .fold(0.0, f64::max);
        }
        let mut down = vec![0.0f64; n];
        for m in (0..n).rev() {
            for &q in &p.nodes[m].parents {
                down[q] = down[q].max(w[m] + down[m]);
            }
        }
        (0..n).map(|m| up[m] + down[m]).collect()
    }

    fn candidates(&self, configs: &[NodeConfig]) -> Vec<Candidate> {
        let p = self.problem;
        let rest = self.rest_of_path(configs);
        let node_cost: Vec<f64> = (0..p.nodes.len())
            .map(|m| configs[m].replicas as f64 * self.price[m][configs[m].option])
            .collect();
        let total: f64 = node_cost.iter().sum();
        let mut out = Vec::new();
        for (m, node) in p.nodes.iter().enumerate() {
            let current = configs[m];
            let cur = &node.options[current.option];
            let mut push = |option: usize| {
                let lower = self.lower(m, option);
                if lower > p.max_replicas {
                    return;
                }
                out.push(Candidate {
                    node: m,
                    option,
                    lower,
                    bound: total - node_cost[m] + lower as f64 * self.price[m][option],
                    max_batch: node.options[option].variant.max_batch,
                });
            };
            // (b) fewer replicas.
            if self.lower(m, current.option) < current.replicas {
                push(current.option);
            }
            // (a) a larger batch of the same group.
            for (o, opt) in node.options.iter().enumerate() {
                if opt.group == cur.group && opt.variant.max_batch > cur.variant.max_batch {
                    push(o);
                }
            }
            // (c) another group: every batch whose full batch fits beside the rest of the path
            // (the group's smallest batch when none does).
            let mut groups: HashMap<u32, (Option<usize>, Vec<usize>)> = HashMap::new();
            for (o, opt) in node.options.iter().enumerate() {
                if opt.group == cur.group || self.floor_1[m][o] + rest[m] >= p.slo_ms {
                    continue;
                }
                if let Some(min) = p.min_accuracy {
                    let acc =
                        accuracy_with(
                            p,
                            &self.reach,
                            |i| {
                                if i == m {
                                    o
                                } else {
                                    configs[i].option
                                }
                            },
                        );
                    if acc < min - EPS {
                        continue;
                    }
                }
                let b = opt.variant.max_batch;
                let e = groups.entry(opt.group).or_insert((None, Vec::new()));
                if e.0.is_none_or(|s| b < node.options[s].variant.max_batch) {
                    e.0 = Some(o);
                }
                if self.full[m][o] + rest[m] <= p.slo_ms {
                    e.1.push(o);
                }
            }
            let mut picked: Vec<usize> = groups
                .into_values()
                .flat_map(|(smallest, fitting)| {
                    if fitting.is_empty() {
                        smallest.into_iter().collect()
                    } else {
                        fitting
                    }
                })
                .collect();
            picked.sort_unstable();
            for o in picked {
                push(o);
            }
        }
        out.sort_by(|a, b| {
            a.bound
                .total_cmp(&b.bound)
                .then(a.max_batch.cmp(&b.max_batch))
                .then(a.node.cmp(&b.node))
                .then(a.option.cmp(&b.option))
        });
        out
    }

    /// Price per second of a configuration.
    fn cost_of(&self, configs: &[NodeConfig]) -> f64 {
        configs
            .iter()
            .enumerate()
            .map(|(m, c)| c.replicas as f64 * self.price[m][c.option])
            .sum()
    }

    /// A candidate that fails even with the most replicas it may have on its own node: the
    /// paper's re-initialisation of a downgraded node, made global. The node starts at its
    /// stability bound and Algorithm 1 adds replicas to the bottleneck (any node) while the
    /// configuration stays cheaper than `limit`, at most [`REPAIR_STEPS`] times; the first
    /// feasible one is returned. This escapes the local optima where a node's new option
    /// changes its output's burstiness so that a neighbour needs more (or fewer) replicas.
    fn repair(
        &mut self,
        configs: &[NodeConfig],
        c: Candidate,
        limit: f64,
    ) -> Option<Vec<NodeConfig>> {
        let p = self.problem;
        let mut trial = configs.to_vec();
        trial[c.node] = NodeConfig {
            option: c.option,
            replicas: c.lower,
        };
        for _ in 0..REPAIR_STEPS {
            let utilisation = |m: usize| {
                let k = trial[m];
                self.reach[m] / (k.replicas as f64 * self.throughput[m][k.option])
            };
            let bottleneck = (0..p.nodes.len())
                .filter(|&m| trial[m].replicas < p.max_replicas)
                .max_by(|&a, &b| utilisation(a).total_cmp(&utilisation(b)).then(b.cmp(&a)))?;
            trial[bottleneck].replicas += 1;
            if self.cost_of(&trial) >= limit {
                return None;
            }
            if self.feasible(&trial) {
                return Some(trial);
            }
        }
        None
    }

    /// The end of InferLine's Algorithm 2, where a larger batch is taken at equal cost once
    /// nothing cheaper is feasible: every node moves to the next larger batch of its group
    /// while the estimate stays feasible (throughput headroom for the tuner, at no cost).
    /// Returns the number of steps taken.
    fn widen_batches(&mut self, configs: &mut [NodeConfig]) -> usize {
        let p = self.problem;
        let mut steps = 0;
        for m in 0..p.nodes.len() {
            loop {
                let cur = &p.nodes[m].options[configs[m].option];
                let next = p.nodes[m]
                    .options
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| {
                        o.group == cur.group && o.variant.max_batch > cur.variant.max_batch
                    })
                    .min_by_key(|(_, o)| o.variant.max_batch)
                    .map(|(i, _)| i);
                let Some(next) = next else { break };
                let mut trial = configs.to_vec();
                trial[m].option = next;
                if !self.feasible(&trial) {
                    break;
                }
                configs[m].option = next;
                steps += 1;
            }
        }
        steps
    }

    /// Algorithm 2; returns the number of steps taken.
    fn minimise(&mut self, configs: &mut Vec<NodeConfig>) -> usize {
        let p = self.problem;
        for step in 0..MAX_STEPS {
            let node_cost: Vec<f64> = (0..p.nodes.len())
                .map(|m| configs[m].replicas as f64 * self.price[m][configs[m].option])
                .collect();
            let total: f64 = node_cost.iter().sum();
            let mut best_cost = total;
            let mut best: Option<Vec<NodeConfig>> = None;
            for c in self.candidates(configs) {
                let limit = best_cost * (1.0 - EPS);
                if c.bound >= limit {
                    break;
                }
                let others = total - node_cost[c.node];
                let price = self.price[c.node][c.option];
                let mut hi = if price > 0.0 {
                    let budget = (limit - others) / price;
                    (budget.ceil() as usize).saturating_sub(1)
                } else {
                    // A free option: any replica count is as cheap; the cap.
                    p.max_replicas
                };
                hi = hi.min(p.max_replicas);
                if c.option == configs[c.node].option {
                    hi = hi.min(configs[c.node].replicas.saturating_sub(1));
                }
                if hi < c.lower {
                    continue;
                }
                let mut trial = configs.clone();
                trial[c.node] = NodeConfig {
                    option: c.option,
                    replicas: hi,
                };
                if !self.feasible(&trial) {
                    if let Some(repaired) = self.repair(configs, c, limit) {
                        best_cost = self.cost_of(&repaired);
                        best = Some(repaired);
                    }
                    continue;
                }
                let mut lo = c.lower;
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    trial[c.node].replicas = mid;
                    if self.feasible(&trial) {
                        hi = mid;
                    } else {
                        lo = mid + 1;
                    }
                }
                trial[c.node].replicas = hi;
                let cost = others + hi as f64 * price;
                if cost < limit {
                    best_cost = cost;
                    best = Some(trial);
                }
            }
            match best {
                Some(b) => *configs = b,
                None => return step,
            }
        }
        MAX_STEPS
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{batch_options, node};
    use super::super::{Estimate, PlanNode, PlanOption};
    use super::*;
    use infaas_core::HardwareKind;

    /// A fluid estimator for tests: a node is fine while its utilisation (at its max batch)
    /// stays below `rho`, and the path's full-batch latency fits the SLO.
    struct Fluid {
        rate: f64,
        rho: f64,
        calls: usize,
    }

    impl Estimator for Fluid {
        fn estimate(&mut self, p: &PlanProblem, configs: &[NodeConfig]) -> Estimate {
            self.calls += 1;
            let reach = reach_probabilities(p);
            let mut ok = true;
            let mut lat = Vec::new();
            for (m, n) in p.nodes.iter().enumerate() {
                let o = &n.options[configs[m].option];
                let mu = option_throughput_per_s(o) * configs[m].replicas as f64;
                if reach[m] * self.rate > self.rho * mu {
                    ok = false;
                }
                lat.push(
                    o.variant
                        .latency_at(o.variant.max_batch)
                        .map_or(0.0, |(pt, k)| pt.mean_ms * k),
                );
            }
            let path = longest_path(p, &lat);
            let latency = if ok { path } else { f64::INFINITY };
            Estimate {
                latency_ms: latency,
                p99_ms: latency,
                attainment: if latency <= p.slo_ms { 1.0 } else { 0.0 },
                per_node_p99_ms: lat,
                per_node_queue_ms: vec![0.0; p.nodes.len()],
            }
        }

        fn arrival_rate_per_s(&self) -> Option<f64> {
            Some(self.rate)
        }
    }

    fn chain(slo: f64) -> PlanProblem {
        let mut a = batch_options("a-fast", HardwareKind::Gpu, 0.9, 8, 4.0, 1.0, 0);
        a.extend(batch_options(
            "a-cpu",
            HardwareKind::Cpu,
            0.9,
            8,
            10.0,
            5.0,
            1,
        ));
        a.extend(batch_options(
            "a-small",
            HardwareKind::Cpu,
            0.6,
            8,
            5.0,
            2.0,
            2,
        ));
        let b = batch_options("b", HardwareKind::Gpu, 0.8, 16, 8.0, 1.0, 0);
        PlanProblem::new(vec![node("a", &[], 1.0, a), node("b", &[0], 1.0, b)], slo)
    }

    #[test]
    fn plans_are_feasible_and_cheaper_than_the_start() {
        let p = chain(100.0);
        let mut e = Fluid {
            rate: 400.0,
            rho: 0.7,
            calls: 0,
        };
        let plan = plan(&p, &mut e).unwrap();
        assert!(plan.estimate.meets(&p));
        assert!(plan.cost_per_hour < plan.initial_cost_per_hour);
        assert_eq!(plan.estimates, e.calls);
        // No accuracy floor: the cheap, less accurate model wins on node a.
        assert_eq!(plan.nodes[0].model, "a-small");
        // A floor keeps the accurate one.
        let mut p = chain(100.0);
        p.min_accuracy = Some(0.7);
        let plan = super::plan(&p, &mut e).unwrap();
        assert!(plan.accuracy >= 0.7);
        assert_ne!(plan.nodes[0].model, "a-small");
    }

    /// A measurement on the pipeline's validation set overrides the independence estimate
    /// both ways: a combination the estimate rejects may pass, one it accepts may fail.
    #[test]
    fn measured_accuracy_decides_over_the_estimate() {
        let measured = |small: f64| {
            let mut m = super::super::MeasuredAccuracy::default();
            for (a, acc) in [("a-fast", 0.8), ("a-cpu", 0.8), ("a-small", small)] {
                m.table.insert(vec![a.to_string(), "b".to_string()], acc);
            }
            m
        };
        let mut e = Fluid {
            rate: 400.0,
            rho: 0.7,
            calls: 0,
        };
        // Estimated a-small + b = 0.6 * 0.8 = 0.48, below 0.7; measured 0.75.
        let mut p = chain(100.0);
        p.min_accuracy = Some(0.7);
        p.measured_accuracy = Some(measured(0.75));
        let got = plan(&p, &mut e).unwrap();
        assert_eq!(got.nodes[0].model, "a-small");
        assert!((got.accuracy - 0.75).abs() < 1e-9, "{}", got.accuracy);
        // Estimated 0.48 meets 0.45; measured 0.3 does not.
        let mut p = chain(100.0);
        p.min_accuracy = Some(0.45);
        p.measured_accuracy = Some(measured(0.3));
        let got = plan(&p, &mut e).unwrap();
        assert_ne!(got.nodes[0].model, "a-small");
        assert!((got.accuracy - 0.8).abs() < 1e-9, "{}", got.accuracy);
        // A less accurate variant of a measured model scales the figure.
        let mut p = chain(100.0);
        let mut m = measured(0.75);
        m.reference.insert("b".into(), 0.8);
        for o in &mut p.nodes[1].options {
            o.variant.accuracy = 0.4;
        }
        p.measured_accuracy = Some(m);
        let configs: Vec<NodeConfig> = p
            .nodes
            .iter()
            .map(|_| NodeConfig {
                option: 0,
                replicas: 1,
            })
            .collect();
        assert!((super::super::estimated_accuracy(&p, &configs) - 0.4).abs() < 1e-9);
    }

    #[test]
    fn errors_name_the_closest_achievable() {
        let mut e = Fluid {
            rate: 100.0,
            rho: 0.7,
            calls: 0,
        };
        // Fastest path: a-fast (5) + b (9) = 14 ms.
        match plan(&chain(14.0), &mut e) {
            Err(PlanError::ServiceTime { service_ms, slo_ms }) => {
                assert_eq!((service_ms, slo_ms), (14.0, 14.0))
            }
            other => panic!("{other:?}"),
        }
        let mut p = chain(100.0);
        p.min_accuracy = Some(0.95);
        match plan(&p, &mut e) {
            Err(PlanError::Accuracy { best, min }) => {
                assert!((best - 0.72).abs() < 1e-9, "{best}");
                assert_eq!(min, 0.95);
            }
            other => panic!("{other:?}"),
        }
        let mut p = chain(100.0);
        p.max_cost_per_hour = Some(1e-6);
        let cheapest = plan(&chain(100.0), &mut e).unwrap().cost_per_hour;
        match plan(&p, &mut e) {
            Err(PlanError::Cost {
                cheapest: c,
                ceiling,
            }) => {
                assert!((c - cheapest).abs() < 1e-12);
                assert_eq!(ceiling, 1e-6);
            }
            other => panic!("{other:?}"),
        }
        let mut p = chain(100.0);
        p.max_replicas = 2;
        e.rate = 5000.0;
        assert!(matches!(
            plan(&p, &mut e),
            Err(PlanError::Replicas { max: 2, .. })
        ));
    }

    #[test]
    fn larger_batches_take_fewer_replicas_under_load() {
        let options: Vec<PlanOption> = batch_options("m", HardwareKind::Gpu, 0.9, 16, 10.0, 1.0, 0);
        let p = PlanProblem::new(
            vec![PlanNode {
                name: "m".into(),
                parents: vec![],
                branch_probability: 1.0,
                options,
            }],
            200.0,
        );
        let mut e = Fluid {
            rate: 1000.0,
            rho: 0.8,
            calls: 0,
        };
        let plan = plan(&p, &mut e).unwrap();
        assert_eq!(
            p.nodes[0].options[plan.initial[0].option].variant.max_batch,
            1
        );
        assert!(plan.nodes[0].max_batch > 1);
        assert!(plan.configs[0].replicas < plan.initial[0].replicas);
    }
}
