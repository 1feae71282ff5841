//! Pipelines of models: InferLine's low-frequency planner and high-frequency tuner (Crankshaw
//! et al., SoCC'20), made model-less.
//!
//! A pipeline is a DAG of nodes in topological order; each node has a list of candidate
//! variants ([`PlanOption`]: different models of the node's application, on different hardware,
//! with different maximum batch sizes) and the planner picks one option per node and a number
//! of replicas, cheapest first, such that the end-to-end latency of the given percentile of a
//! sample workload meets the SLO (and, optionally, an estimated end-to-end accuracy floor and a
//! cost ceiling hold).
//!
//! - [`plan()`] ([`plan`](mod@plan)): InferLine's Algorithm 1 (a feasible start: fastest options at
//!   batch 1, replicas added to the bottleneck until the estimate meets the SLO) then
//!   Algorithm 2 (greedy cost minimisation: larger batch, fewer replicas, another option), with
//!   an [`Estimator`] judging every candidate. The estimator is a trait: the simulator provides
//!   a trace-driven discrete-event one (`infaas_sim::pipeline::TraceEstimator`).
//! - [`tuner`]: traffic envelopes and the reactive scaler (Algorithms 3 and 4) that adjusts
//!   replicas per node between plans, and tells when the workload has drifted far enough from
//!   the planning sample to plan again.
//!
//! Everything here is a pure function of its arguments (no I/O, no clock, no async).

use std::collections::HashMap;
use std::hash::Hash;

use infaas_core::HardwareKind;
use serde::Serialize;

use crate::snapshot::{Prices, VariantEntry};

pub mod plan;
pub mod tuner;

pub use plan::plan;
pub use tuner::{
    envelope, envelope_windows_ms, Provisioning, Tuner, TunerAction, TunerConfig, TunerNode,
};

/// One candidate variant of a node.
///
/// Options in the same `group` are the same model file on the same hardware and threads,
/// differing only in `variant.max_batch`: "increase batch" moves a node to the option of its
/// group with the next larger `max_batch`.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanOption {
    pub variant: VariantEntry,
    pub group: u32,
}

/// A node of a pipeline.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanNode {
    pub name: String,
    /// Indices of earlier nodes (nodes are in topological order: every parent index is below
    /// the node's own).
    pub parents: Vec<usize>,
    /// Probability that a query that reached this node's parents runs this node (1.0:
    /// unconditional; below 1 for a branch of a switch).
    pub branch_probability: f64,
    /// Candidate variants; not empty.
    pub options: Vec<PlanOption>,
}

/// What the planner is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanProblem {
    pub nodes: Vec<PlanNode>,
    /// End-to-end latency SLO, ms.
    pub slo_ms: f64,
    /// The SLO holds for this percentile of the queries (e.g. 99.0).
    pub percentile: f64,
    /// Floor of the estimated end-to-end accuracy ([`estimated_accuracy`]).
    pub min_accuracy: Option<f64>,
    /// Ceiling of the configuration's price per hour ([`cost_per_hour`]).
    pub max_cost_per_hour: Option<f64>,
    pub prices: Prices,
    /// Most replicas of any one node.
    pub max_replicas: usize,
    /// End-to-end accuracy measured on the pipeline's validation set, per combination of
    /// models; configurations it does not cover are estimated ([`estimated_accuracy`]).
    pub measured_accuracy: Option<MeasuredAccuracy>,
}

/// End-to-end accuracies measured on a validation set, by the model each node ran.
///
/// The key is one model name per node of the problem, in node order. Variants of one model
/// that differ in accuracy (a quantised file, say) scale the measured figure by their
/// accuracy relative to the variant the measurement ran (`reference`), weighted by the
/// node's reach, as the estimate does.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MeasuredAccuracy {
    pub table: HashMap<Vec<String>, f64>,
    /// Per model, the accuracy (on its own validation set) of the variant that ran it.
    pub reference: HashMap<String, f64>,
}

impl MeasuredAccuracy {
    /// The measured accuracy of the configuration choosing `option(m)` at each node, if its
    /// models were measured.
    fn lookup(
        &self,
        problem: &PlanProblem,
        reach: &[f64],
        option: &impl Fn(usize) -> usize,
    ) -> Option<f64> {
        let chosen: Vec<&VariantEntry> = problem
            .nodes
            .iter()
            .enumerate()
            .map(|(m, n)| n.options.get(option(m)).map(|o| &o.variant))
            .collect::<Option<_>>()?;
        let key: Vec<String> = chosen.iter().map(|v| v.model.clone()).collect();
        let measured = *self.table.get(&key)?;
        let scale: f64 = chosen
            .iter()
            .zip(reach)
            .map(|(v, r)| match self.reference.get(&v.model) {
                Some(&a) if a > 0.0 => (v.accuracy / a).min(1.0).powf(*r),
                _ => 1.0,
            })
            .product();
        Some(measured * scale)
    }
}

impl PlanProblem {
    /// A problem with the P99 SLO `slo_ms`, no accuracy floor, no cost ceiling, the default
    /// prices and at most 64 replicas per node.
    pub fn new(nodes: Vec<PlanNode>, slo_ms: f64) -> PlanProblem {
        PlanProblem {
            nodes,
            slo_ms,
            percentile: 99.0,
            min_accuracy: None,
            max_cost_per_hour: None,
            prices: Prices::default(),
            max_replicas: 64,
            measured_accuracy: None,
        }
    }

    /// Checks the problem's shape and figures; [`plan()`] calls it first.
    pub fn validate(&self) -> Result<(), PlanError> {
        let bad = |m: String| Err(PlanError::Invalid(m));
        if self.nodes.is_empty() {
            return bad("the pipeline has no node".into());
        }
        if !(self.slo_ms.is_finite() && self.slo_ms > 0.0) {
            return bad(format!("slo_ms {} must be positive", self.slo_ms));
        }
        if !(self.percentile > 0.0 && self.percentile <= 100.0) {
            return bad(format!(
                "percentile {} must be in (0, 100]",
                self.percentile
            ));
        }
        if self.max_replicas == 0 {
            return bad("max_replicas must be at least 1".into());
        }
        if let Some(a) = self.min_accuracy {
            if !(0.0..=1.0).contains(&a) {
                return bad(format!("min_accuracy {a} must be in [0, 1]"));
            }
        }
        if let Some(c) = self.max_cost_per_hour {
            if c.is_nan() || c < 0.0 {
                return bad(format!("max_cost_per_hour {c} must not be negative"));
            }
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if n.options.is_empty() {
                return bad(format!("node '{}' has no option", n.name));
            }
            if let Some(p) = n.parents.iter().find(|&&p| p >= i) {
                return bad(format!(
                    "node '{}' (index {i}) has parent {p}: nodes must be in topological order",
                    n.name
                ));
            }
            if !(0.0..=1.0).contains(&n.branch_probability) {
                return bad(format!(
                    "node '{}': branch_probability {} must be in [0, 1]",
                    n.name, n.branch_probability
                ));
            }
            for o in &n.options {
                let v = &o.variant;
                if v.max_batch == 0 || v.latency.is_empty() {
                    return bad(format!(
                        "node '{}': option '{}' needs max_batch >= 1 and a latency profile",
                        n.name, v.name
                    ));
                }
                let ok = |x: f64| x.is_finite() && x > 0.0;
                if v.latency
                    .iter()
                    .any(|p| !ok(p.mean_ms) || !ok(p.p99_ms) || !ok(p.p50_ms))
                {
                    return bad(format!(
                        "node '{}': option '{}' has a latency point that is not positive",
                        n.name, v.name
                    ));
                }
                if !v.latency.windows(2).all(|w| w[0].batch < w[1].batch) {
                    return bad(format!(
                        "node '{}': option '{}' latency points must be sorted by batch",
                        n.name, v.name
                    ));
                }
            }
        }
        Ok(())
    }

    /// Nodes on the longest path (the pipeline's depth).
    pub fn depth(&self) -> usize {
        let mut d = vec![0usize; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            d[i] = 1 + n
                .parents
                .iter()
                .filter_map(|&p| d.get(p).copied())
                .max()
                .unwrap_or(0);
        }
        d.into_iter().max().unwrap_or(0)
    }
}

/// The option and replica count of one node.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize)]
pub struct NodeConfig {
    /// Index into the node's [`PlanNode::options`].
    pub option: usize,
    pub replicas: usize,
}

/// What an [`Estimator`] found for a configuration.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// End-to-end latency at the problem's percentile, ms (infinite when the estimator gave up
    /// early because too many queries already missed the SLO).
    pub latency_ms: f64,
    pub p99_ms: f64,
    /// Fraction of the queries within the SLO (an upper bound when the estimate was cut short).
    pub attainment: f64,
    /// P99 of each node's own latency (queueing and processing), ms; NaN for a node the
    /// estimate did not reach.
    pub per_node_p99_ms: Vec<f64>,
    /// Mean queueing delay at each node, ms; NaN for a node the estimate did not reach.
    pub per_node_queue_ms: Vec<f64>,
}

impl Estimate {
    /// Whether the configuration meets the SLO at the problem's percentile.
    pub fn meets(&self, problem: &PlanProblem) -> bool {
        self.latency_ms <= problem.slo_ms
    }
}

/// Estimates the end-to-end latency of a pipeline configuration on a sample workload
/// (InferLine's Estimator).
pub trait Estimator {
    fn estimate(&mut self, problem: &PlanProblem, configs: &[NodeConfig]) -> Estimate;

    /// Whether `configs` meets the SLO at the problem's percentile. The planner asks this for
    /// every candidate; an estimator may answer it more cheaply than a full [`Estimate`] (e.g.
    /// without computing percentiles), but must give the same verdict.
    fn feasible(&mut self, problem: &PlanProblem, configs: &[NodeConfig]) -> bool {
        self.estimate(problem, configs).meets(problem)
    }

    /// Mean arrival rate of the sample workload at the pipeline's entry, queries/s, when
    /// known: the planner starts every node at the replicas that keep it stable at this rate
    /// (`ceil(reach * rate / throughput)`), or at 1 replica when `None`.
    fn arrival_rate_per_s(&self) -> Option<f64> {
        None
    }
}

/// One node of a [`PipelinePlan`].
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodePlan {
    pub name: String,
    /// Index into the node's options.
    pub option: usize,
    /// The variant's name.
    pub variant: String,
    pub model: String,
    pub hardware: HardwareKind,
    pub max_batch: usize,
    pub replicas: usize,
    pub accuracy: f64,
    /// Price of the node's replicas per hour.
    pub cost_per_hour: f64,
    /// Saturation throughput of the node's replicas together (full batches at the profiled
    /// mean), queries/s.
    pub throughput_per_s: f64,
    /// The option's group.
    pub group: u32,
    /// Fraction of the pipeline's queries that reach the node.
    pub reach: f64,
}

/// The planner's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelinePlan {
    pub nodes: Vec<NodePlan>,
    pub configs: Vec<NodeConfig>,
    /// The estimator's full estimate of `configs`.
    pub estimate: Estimate,
    /// Estimated end-to-end accuracy ([`estimated_accuracy`]).
    pub accuracy: f64,
    pub cost_per_hour: f64,
    /// Estimator calls the planner made.
    pub estimates: usize,
    /// The pipeline's service time: the longest path of the fastest options' batch-1 p99, ms.
    pub service_time_ms: f64,
    /// Algorithm 1's feasible start, and its price per hour.
    pub initial: Vec<NodeConfig>,
    pub initial_cost_per_hour: f64,
    /// Cost-reducing steps Algorithm 2 took.
    pub steps: usize,
}

/// Why no plan could be made; each names the closest achievable figure.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("the pipeline's service time {service_ms:.1} ms (longest path of the fastest options at batch 1) is not below the SLO of {slo_ms:.1} ms")]
    ServiceTime { service_ms: f64, slo_ms: f64 },
    #[error("the estimated end-to-end accuracy cannot reach {min:.4}: the best reachable within the SLO's service time is {best:.4}")]
    Accuracy { best: f64, min: f64 },
    #[error("the cheapest configuration found that meets the SLO costs {cheapest:.4} per hour, above the ceiling of {ceiling:.4}")]
    Cost { cheapest: f64, ceiling: f64 },
    #[error("node '{node}' would need more than {max} replicas: with every node at most at the cap the estimated latency is {latency_ms:.1} ms")]
    Replicas {
        node: String,
        max: usize,
        latency_ms: f64,
    },
    #[error("invalid pipeline problem: {0}")]
    Invalid(String),
}

/// Fraction of the pipeline's queries that reach each node: the product of the branch
/// probabilities along its ancestors and its own; for a node with several parents, the
/// largest of the parents' fractions (a query reaches a join when it reached any parent).
pub fn reach_probabilities(problem: &PlanProblem) -> Vec<f64> {
    let mut reach = Vec::with_capacity(problem.nodes.len());
    for n in &problem.nodes {
        let upstream = if n.parents.is_empty() {
            1.0
        } else {
            n.parents
                .iter()
                .filter_map(|&p| reach.get(p).copied())
                .fold(0.0f64, f64::max)
        };
        reach.push(upstream * n.branch_probability.clamp(0.0, 1.0));
    }
    reach
}

/// End-to-end accuracy of a configuration: measured on the pipeline's validation set when the
/// problem carries a measurement of its models ([`MeasuredAccuracy`]), else estimated: the
/// product over nodes of the chosen option's accuracy raised to the node's reach probability
/// ([`reach_probabilities`]). The estimate treats the nodes' errors as independent and a
/// node's share of the queries as its weight, which is what the profiles allow.
pub fn estimated_accuracy(problem: &PlanProblem, configs: &[NodeConfig]) -> f64 {
    let reach = reach_probabilities(problem);
    accuracy_with(problem, &reach, |m| configs.get(m).map_or(0, |c| c.option))
}

fn accuracy_with(problem: &PlanProblem, reach: &[f64], option: impl Fn(usize) -> usize) -> f64 {
    if let Some(m) = problem
        .measured_accuracy
        .as_ref()
        .and_then(|m| m.lookup(problem, reach, &option))
    {
        return m;
    }
    problem
        .nodes
        .iter()
        .enumerate()
        .map(|(m, n)| {
            let a = n.options.get(option(m)).map_or(0.0, |o| o.variant.accuracy);
            a.powf(reach[m])
        })
        .product()
}

/// Price per hour of a configuration: the sum over nodes of replicas times the price per
/// second of one instance of the chosen variant ([`Prices::rate_per_s`]) times 3600.
pub fn cost_per_hour(problem: &PlanProblem, configs: &[NodeConfig]) -> f64 {
    problem
        .nodes
        .iter()
        .zip(configs)
        .map(|(n, c)| {
            n.options.get(c.option).map_or(0.0, |o| {
                c.replicas as f64 * problem.prices.rate_per_s(&o.variant) * 3600.0
            })
        })
        .sum()
}

/// The pipeline's service time, ms: the longest path over nodes of the fastest option's
/// profiled batch-1 p99 (the lower bound of any query's latency, InferLine's `ServiceTime`).
pub fn service_time_ms(problem: &PlanProblem) -> f64 {
    let fastest: Vec<f64> = problem
        .nodes
        .iter()
        .map(|n| {
            n.options
                .iter()
                .map(|o| o.variant.latency_ms(1))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    longest_path(problem, &fastest)
}

/// The longest path through the DAG of the per-node figures `weight`.
pub fn longest_path(problem: &PlanProblem, weight: &[f64]) -> f64 {
    let mut d: Vec<f64> = Vec::with_capacity(problem.nodes.len());
    for (i, n) in problem.nodes.iter().enumerate() {
        let up = n
            .parents
            .iter()
            .filter_map(|&p| d.get(p).copied())
            .fold(0.0f64, f64::max);
        d.push(up + weight.get(i).copied().unwrap_or(0.0));
    }
    d.into_iter().fold(0.0, f64::max)
}

/// Saturation throughput of one replica of an option: full batches of `max_batch` at the
/// profiled mean, queries/s ([`VariantEntry::peak_qps`]).
pub fn option_throughput_per_s(option: &PlanOption) -> f64 {
    option.variant.peak_qps()
}

/// Options from a list of variants, grouped by `key` (options with equal keys share a group;
/// groups are numbered in the order their first variant appears). For registered variants,
/// `|v| (v.model.clone(), v.hardware, v.threads)` is the natural key.
pub fn group_options<K: Hash + Eq>(
    variants: Vec<VariantEntry>,
    key: impl Fn(&VariantEntry) -> K,
) -> Vec<PlanOption> {
    let mut groups: HashMap<K, u32> = HashMap::new();
    variants
        .into_iter()
        .map(|v| {
            let next = groups.len() as u32;
            let group = *groups.entry(key(&v)).or_insert(next);
            PlanOption { variant: v, group }
        })
        .collect()
}

/// The plan's per-node summary of a configuration.
pub fn node_plans(problem: &PlanProblem, configs: &[NodeConfig]) -> Vec<NodePlan> {
    let reach = reach_probabilities(problem);
    problem
        .nodes
        .iter()
        .zip(configs)
        .enumerate()
        .filter_map(|(m, (n, c))| {
            let o = n.options.get(c.option)?;
            let v = &o.variant;
            Some(NodePlan {
                name: n.name.clone(),
                option: c.option,
                variant: v.name.clone(),
                model: v.model.clone(),
                hardware: v.hardware,
                max_batch: v.max_batch,
                replicas: c.replicas,
                accuracy: v.accuracy,
                cost_per_hour: c.replicas as f64 * problem.prices.rate_per_s(v) * 3600.0,
                throughput_per_s: c.replicas as f64 * option_throughput_per_s(o),
                group: o.group,
                reach: reach[m],
            })
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use infaas_core::LatencyPoint;

    /// A variant whose batch of `b` takes `base + per_row * b` ms (mean = p50 = p99).
    pub(crate) fn linear_variant(
        name: &str,
        hw: HardwareKind,
        accuracy: f64,
        max_batch: usize,
        base: f64,
        per_row: f64,
    ) -> VariantEntry {
        let mut latency = Vec::new();
        let mut b = 1;
        while b <= max_batch {
            let ms = base + per_row * b as f64;
            latency.push(LatencyPoint {
                batch: b,
                p50_ms: ms,
                p99_ms: ms,
                mean_ms: ms,
                throughput_per_s: b as f64 * 1e3 / ms,
            });
            b *= 2;
        }
        VariantEntry {
            id: format!("{name}#b{max_batch}"),
            name: format!("{name}#b{max_batch}"),
            model: name.to_string(),
            app: "app".into(),
            accuracy,
            hardware: hw,
            threads: if hw == HardwareKind::Cpu { 4 } else { 1 },
            max_batch,
            load_ms: 1000.0,
            memory_bytes: 1 << 30,
            latency,
        }
    }

    /// Options of one model on one hardware with max batches 1, 2, 4, ... up to `top`.
    pub(crate) fn batch_options(
        name: &str,
        hw: HardwareKind,
        accuracy: f64,
        top: usize,
        base: f64,
        per_row: f64,
        group: u32,
    ) -> Vec<PlanOption> {
        let mut out = Vec::new();
        let mut b = 1;
        while b <= top {
            out.push(PlanOption {
                variant: linear_variant(name, hw, accuracy, b, base, per_row),
                group,
            });
            b *= 2;
        }
        out
    }

    pub(crate) fn node(
        name: &str,
        parents: &[usize],
        p: f64,
        options: Vec<PlanOption>,
    ) -> PlanNode {
        PlanNode {
            name: name.into(),
            parents: parents.to_vec(),
            branch_probability: p,
            options,
        }
    }

    #[test]
    fn reach_accuracy_cost_and_service_time() {
        let cheap = batch_options("cheap", HardwareKind::Cpu, 0.8, 1, 10.0, 0.0, 0);
        let heavy = batch_options("heavy", HardwareKind::Gpu, 0.9, 1, 30.0, 0.0, 1);
        let nodes = vec![
            node("a", &[], 1.0, cheap.clone()),
            node("b", &[0], 0.3, heavy.clone()),
            node("c", &[0], 0.5, cheap.clone()),
            node("d", &[1, 2], 1.0, heavy),
        ];
        let p = PlanProblem::new(nodes, 100.0);
        let r = reach_probabilities(&p);
        assert_eq!(r, vec![1.0, 0.3, 0.5, 0.5]);
        let configs = vec![
            NodeConfig {
                option: 0,
                replicas: 2
            };
            4
        ];
        let acc = estimated_accuracy(&p, &configs);
        let want = 0.8f64 * 0.9f64.powf(0.3) * 0.8f64.powf(0.5) * 0.9f64.powf(0.5);
        assert!((acc - want).abs() < 1e-12);
        let cost = cost_per_hour(&p, &configs);
        let cpu = p.prices.rate_per_s(&cheap[0].variant);
        let gpu = p.prices.rate_per_s(&p.nodes[1].options[0].variant);
        assert!((cost - 2.0 * 3600.0 * (2.0 * cpu + 2.0 * gpu)).abs() < 1e-9);
        // a (10) -> b (30) -> d (30) is the longest path.
        assert_eq!(service_time_ms(&p), 70.0);
        assert_eq!(p.depth(), 3);
        assert!(p.validate().is_ok());
    }

    #[test]
    fn invalid_problems_are_refused() {
        let o = batch_options("m", HardwareKind::Cpu, 0.8, 1, 10.0, 0.0, 0);
        let mut p = PlanProblem::new(vec![node("a", &[0], 1.0, o.clone())], 100.0);
        assert!(matches!(p.validate(), Err(PlanError::Invalid(m)) if m.contains("topological")));
        p.nodes[0].parents.clear();
        p.nodes[0].options.clear();
        assert!(matches!(p.validate(), Err(PlanError::Invalid(m)) if m.contains("no option")));
        p.nodes[0].options = o;
        p.percentile = 0.0;
        assert!(p.validate().is_err());
    }

    #[test]
    fn options_group_by_key() {
        let vs = vec![
            linear_variant("a", HardwareKind::Cpu, 0.5, 1, 1.0, 1.0),
            linear_variant("b", HardwareKind::Cpu, 0.5, 1, 1.0, 1.0),
            linear_variant("a", HardwareKind::Cpu, 0.5, 2, 1.0, 1.0),
            linear_variant("a", HardwareKind::Gpu, 0.5, 1, 1.0, 1.0),
        ];
        let o = group_options(vs, |v| (v.model.clone(), v.hardware));
        assert_eq!(o.iter().map(|o| o.group).collect::<Vec<_>>(), [0, 1, 0, 2]);
    }
}
