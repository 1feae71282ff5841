//! Loki's resource manager and load balancer (Ahmad et al., HPDC'24, §4-5), as pure policy
//! functions over a pipeline's nodes and their options (no I/O, no async; the only clock read
//! is the solve time reported in [`Allocation::solve_ms`] and the solver's own time limit).
//!
//! - [`allocate`] ([`mod@milp`]): the resource manager. Step 1, [`hardware_scaling`]: the most
//!   accurate variant of every task, fewest instances that carry the demand (Eq 8-11). Step 2,
//!   when step 1 is infeasible, [`accuracy_scaling`]: the most accurate mix of variants and
//!   paths (Eq 1-7, 12), serving less than all of the demand only when even that cannot carry
//!   it. Both are MILPs solved through [`crate::milp`] under a time limit, with a greedy
//!   fallback ([`greedy`]) when a solve fails or stops without a usable incumbent.
//! - [`mod@manager`]: the resource manager's loop ([`Manager`], [`ManagerSettings`]): the
//!   demand estimate, when to plan again (every period, and on a significant change of
//!   demand) and for what demand, and the target utilisation plans are made at; the
//!   controller and the simulator both run it.
//! - [`route`]: the load balancer's MostAccurateFirst (Algorithm 1): routing tables per
//!   upstream variant, and the per-query pick.
//! - [`mod@drop`]: early dropping with opportunistic rerouting (§5.2) and its ablations.
//!
//! **Variants.** A Loki variant is one (model, hardware) of a task: the node's options of one
//! [`PlanOption::group`] (the same model on the same hardware, differing only in `max_batch`).
//! Its allowed batch sizes `B` are the profiled batches of the group's largest-`max_batch`
//! option; at batch `b` it serves `q(b) = b / latency_ms(b) * 1000` queries/s, `latency_ms`
//! being the profiled p99 (so the latency budget `l = y / q(y)` is the p99 of a batch of `y`).
//! An instance uses one worker of its variant's pool ([`default_pool`], or
//! [`LokiProblem::pools`]), as in Loki.
//!
//! **Pipelines** are rooted trees (Loki's assumption): node 0 is the root, every other node has
//! exactly one parent. A query reaching a node runs each child with the child's
//! `branch_probability`; a variant with multiplicative factor `r` sends `r` requests to each
//! child per request it serves. A single application is a one-node pipeline.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use serde::Serialize;

use crate::milp::Solver;
use crate::pipeline::{PlanNode, PlanOption};
use crate::snapshot::VariantEntry;

pub mod drop;
mod greedy;
pub mod manager;
pub mod milp;
mod prep;
pub mod route;
mod solution;
#[cfg(test)]
mod tests;

pub use drop::{alternatives, on_arrival, Alternative, Arrival, Decision, DropPolicy, Hop, Spent};
pub use greedy::greedy;
pub use manager::{Manager, ManagerSettings, Replan, ReplanRule, MIN_DEMAND_QPS};
pub use milp::{accuracy_scaling, allocate, hardware_scaling, verify};
pub use route::{most_accurate_first, Pick, RoutingTables, Table};

/// What the resource manager is asked.
#[derive(Debug, Clone, PartialEq)]
pub struct LokiProblem {
    /// The pipeline's tasks, a rooted tree in topological order (see the module documentation),
    /// each with its candidate options.
    pub nodes: Vec<PlanNode>,
    /// Queries per second arriving at the root (`D`).
    pub demand_qps: f64,
    /// End-to-end latency SLO, ms (`L`); processing along a path must fit half of it (§4.1).
    pub slo_ms: f64,
    /// Communication latency per task on a path, ms, taken off the half SLO (§4.2).
    pub comm_latency_ms: f64,
    /// Workers per pool (e.g. `{"cpu": 12, "gpu_pascal": 8}`): each instance uses one worker of
    /// its variant's pool (`S`, per pool).
    pub workers: BTreeMap<String, usize>,
    /// Pool of a variant, by `(node, group)`, overriding [`default_pool`].
    pub pools: HashMap<(usize, u32), String>,
    /// Multiplicative factor `r` of a variant, by `(node, group)` (default 1.0).
    pub multiplicative: HashMap<(usize, u32), f64>,
    /// Measured end-to-end accuracy `Â(p)` of a path, keyed by the `(node, group)` of each task
    /// from the root to a leaf; by default the product of the variants' accuracies.
    pub path_accuracy: HashMap<Vec<(usize, u32)>, f64>,
}

impl LokiProblem {
    /// A problem with no communication latency, the default pools, multiplicative factors of
    /// 1 and path accuracies that are products of the variants' accuracies.
    pub fn new<S: Into<String>>(
        nodes: Vec<PlanNode>,
        demand_qps: f64,
        slo_ms: f64,
        workers: impl IntoIterator<Item = (S, usize)>,
    ) -> LokiProblem {
        LokiProblem {
            nodes,
            demand_qps,
            slo_ms,
            comm_latency_ms: 0.0,
            workers: workers.into_iter().map(|(k, n)| (k.into(), n)).collect(),
            pools: HashMap::new(),
            multiplicative: HashMap::new(),
            path_accuracy: HashMap::new(),
        }
    }

    /// The same problem at another demand.
    pub fn with_demand(&self, demand_qps: f64) -> LokiProblem {
        LokiProblem {
            demand_qps,
            ..self.clone()
        }
    }

    /// The pool of option `option` of node `node`: the override of its `(node, group)` in
    /// [`LokiProblem::pools`], else [`default_pool`]; `None` for an option that does not exist.
    pub fn pool_of(&self, node: usize, option: usize) -> Option<String> {
        let o = self.nodes.get(node)?.options.get(option)?;
        Some(
            self.pools
                .get(&(node, o.group))
                .cloned()
                .unwrap_or_else(|| default_pool(&o.variant)),
        )
    }

    /// The multiplicative factor of `(node, group)` (1.0 unless overridden).
    pub fn factor(&self, node: usize, group: u32) -> f64 {
        self.multiplicative
            .get(&(node, group))
            .copied()
            .unwrap_or(1.0)
    }
}

/// The pool a variant's instances take a worker from: the accelerator named between `@` and
/// `#` of its id when there is one (the simulator's catalogue names variants
/// `model@gpu_pascal#b8`), else its hardware kind (`cpu`, `gpu`).
pub fn default_pool(v: &VariantEntry) -> String {
    v.id.split_once('@')
        .map(|(_, rest)| rest.split('#').next().unwrap_or(rest))
        .filter(|s| !s.is_empty())
        .map_or_else(|| v.hardware.as_str().to_owned(), str::to_owned)
}

/// How hard the resource manager works.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LokiSettings {
    pub solver: Solver,
    /// Time for the whole [`allocate`] (step 2 gets what step 1 left, at least a quarter of it;
    /// the solver is given [`milp::SOLVER_SHARE`] of that, the rest absorbing its overshoot);
    /// a solve stopped by it gives its incumbent or the greedy fallback.
    pub time_limit: Duration,
    /// Most augmented paths (variant combinations of root-to-leaf task paths) step 2 enumerates;
    /// candidates per task are cut to keep within it (see [`accuracy_scaling`]).
    pub max_paths: usize,
    /// Most candidate variants per task in step 2.
    pub max_candidates: usize,
}

impl Default for LokiSettings {
    /// The build's default solver, 400 ms, 256 paths, 16 candidates per task.
    fn default() -> Self {
        LokiSettings {
            solver: Solver::DEFAULT,
            time_limit: Duration::from_millis(400),
            max_paths: 256,
            max_candidates: 16,
        }
    }
}

/// Why no allocation could be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LokiError {
    #[error("invalid Loki problem: {0}")]
    Invalid(String),
    #[error("node '{node}' has {parents} parents: Loki's pipelines are rooted trees (one root, one parent per other node)")]
    NotATree { node: String, parents: usize },
    #[error("the allocation does not hold: {0}")]
    Violated(String),
}

/// Which step of the resource manager produced an allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Mode {
    /// Step 1: most accurate variants only, fewest instances.
    HardwareScaling,
    /// Step 2: accuracy traded for throughput.
    AccuracyScaling,
}

/// How the allocation was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SolveStatus {
    /// The solver proved it optimal (within its tolerances).
    Optimal,
    /// The solver's best incumbent when the time limit stopped it.
    TimeLimited,
    /// The greedy fallback ([`greedy`]): the solve failed, or gave no usable incumbent (or a
    /// worse one) within the time limit.
    Fallback,
}

/// The instances of one variant of a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Placement {
    /// Index into the node's options: the option of the variant's group whose `max_batch` is
    /// the chosen batch (or the group's largest one when no option has that `max_batch`).
    pub option: usize,
    pub group: u32,
    pub pool: String,
    /// `x(i, k)`.
    pub instances: usize,
    /// `y(i, k)`, the maximum batch.
    pub batch: usize,
    /// `l(i, k) = y / q(i, k, y)`: the task's latency budget on this variant, ms.
    pub budget_ms: f64,
    /// `x * q(i, k, y)`, queries/s.
    pub capacity_qps: f64,
    /// Queries/s the allocation's paths send to it (after multiplicative factors).
    pub load_qps: f64,
    pub accuracy: f64,
    /// `r(i, k)`.
    pub factor: f64,
}

/// The share of the root's queries on one augmented path (a variant per task of a
/// root-to-leaf task path).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PathShare {
    /// The task path's tasks, root first.
    pub tasks: Vec<usize>,
    /// Per task of `tasks`, the index into [`Allocation::tasks`]`[task]` of its placement.
    pub placements: Vec<usize>,
    /// `c(p)`.
    pub ratio: f64,
    /// `l̂(p)`: the sum of the placements' budgets, ms.
    pub latency_ms: f64,
    /// `Â(p)`.
    pub accuracy: f64,
}

/// The resource manager's plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Allocation {
    pub mode: Mode,
    pub status: SolveStatus,
    /// Per task, the variants hosted.
    pub tasks: Vec<Vec<Placement>>,
    /// Paths with traffic (`c(p) > 0`).
    pub paths: Vec<PathShare>,
    /// Expected end-to-end accuracy of the served queries: `Σ c(p) Â(p) / served`, the task
    /// paths of a branching tree weighted by how many queries reach their leaf.
    pub accuracy: f64,
    /// The same relative to the best reachable (every task on its most accurate usable
    /// variant): 1.0 at full accuracy.
    pub relative_accuracy: f64,
    /// Fraction of the demand the plan carries (1.0 unless even accuracy scaling cannot).
    pub served_fraction: f64,
    pub demand_qps: f64,
    /// Workers used per pool.
    pub workers_used: BTreeMap<String, usize>,
    /// Wall-clock time the allocation took, ms.
    pub solve_ms: f64,
}

impl Allocation {
    /// Instances over all tasks.
    pub fn instances(&self) -> usize {
        self.workers_used.values().sum()
    }
}

/// The option of `node` behind a placement, if any.
pub fn option_of<'a>(
    problem: &'a LokiProblem,
    node: usize,
    p: &Placement,
) -> Option<&'a PlanOption> {
    problem.nodes.get(node)?.options.get(p.option)
}
