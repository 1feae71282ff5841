//! Overload on a fixed cluster, SIMULATED: Loki's pipeline-aware accuracy scaling and early
//! dropping (Ahmad et al., HPDC'24) against hardware scaling alone (InferLine) and
//! pipeline-unaware, per-task accuracy scaling (Proteus). Nothing here runs a model: service
//! times are the Proteus catalogue's profiled means, decisions are the scheduler's own
//! functions ([`infaas_scheduler::loki`]), called, never copied.
//!
//! **The pipeline** is a rooted tree of tasks ([`overload_pipelines`]: the catalogue's
//! `detect-classify`, `three-stage` and `cascade`, and a Loki-like `traffic` tree), each task
//! with every profiled (model, accelerator, batch) of its family as an option
//! ([`loki_problem`], grouped per (model, accelerator) as Loki's variants), on a fixed cluster
//! ([`WORKERS`]: 8 CPU, 6 GPU Pascal, 6 GPU Ampere workers; an instance takes one worker of its
//! variant's pool).
//!
//! **The simulator** ([`Overload::run`]) is a discrete-event simulation. The resource
//! manager's loop is the controller's: [`Manager`] with [`OverloadSettings::manager`]
//! ([`ManagerSettings::default`], the controller's settings), fed the arrivals of every
//! 1-s tick of simulated time. It decides when to plan and for what demand: every period
//! (10 s, Loki §4.2) for its demand estimate (an exponentially weighted moving average of the
//! per-tick rate, or the last period's mean rate when higher), and at once on a significant
//! change of demand (Loki §4.2, every policy alike): the rate of the last 2 s more than 25%
//! above the demand the plan in force was made for or below half of it (a full window after
//! that plan), for that recent rate, the period restarting from it. A periodic plan takes
//! effect at once; a change-triggered one [`OverloadSettings::change_delay_s`] (0.5 s) later (a
//! fixed stand-in for the solve; a later decision supersedes one still pending). Plans are made
//! for the demand over the manager's target utilisation ([`ManagerSettings::utilisation`],
//! 0.6) and the routing tables are MostAccurateFirst over the placements with their
//! capacities derated to it (Algorithm 1 fills the most accurate placements to 100% of their
//! full-batch throughput, where a batched queue fed by Poisson arrivals never drains); every
//! policy gets the same treatment. A query arriving at the root draws which branches of the
//! tree it takes (each child with its branch probability) and, per task, a placement from the
//! routing tables (per upstream placement). The policy's [`DropPolicy`] decides ([`on_arrival`]: proceed, reroute to an alternative
//! with spare capacity, or drop) when a request is about to be forwarded to a task, and, for
//! reroute-then-drop and last-task dropping (the policies that judge the time left against the
//! budgets ahead), again when an instance takes it from the queue (the request is then in
//! the task's queue: only later tasks can be rerouted). Without that second check a FIFO queue
//! under sustained overload serves only requests that have already waited most of their SLO.
//! Per-task dropping compares a task's time (queueing and processing) with twice its
//! placement's budget (the plan gives processing half of the SLO and queueing the other half;
//! the budget alone is exceeded by any wait), and, for the per-stage policy, with the stage's
//! SLO share. Each placement is a FIFO queue served by its instances: a free instance takes up
//! to the placement's batch of queued requests at once, and a batch of `b` takes the variant's
//! profiled **mean** at `b` (the plans budget the profiled p99, the catalogue's 90th
//! percentile). A request still queued at its deadline is given up (every policy: nobody
//! serves a query that already missed its SLO). On a new plan, queued requests move to the new
//! plan's placements of their task and the new instances start idle (no load time: variant
//! swaps are free here, which favours the policies that change plans; batches already running
//! finish on the old instances). Plans are cached per 2% demand bucket; the MILP's time limit
//! makes a plan depend on the machine's speed, so runs with the same seed can differ slightly.
//!
//! **A query** is answered within its SLO when every request of it finished by its deadline
//! (arrival + SLO), late when one finished after it or was given up at it, dropped when the
//! policy dropped one of its requests early (or the plan had no placement for a task). Its
//! accuracy is the mean, over the root-to-end paths it ran, of the product of the accuracies
//! of the variants that served it (Loki's default path accuracy); its relative accuracy divides
//! that by the same paths on the most accurate variants hardware scaling uses. As in Loki §6.1:
//! the SLO violation ratio is (late + dropped) / all queries, the system accuracy the mean over
//! the queries answered within the SLO.
//!
//! **Policies** ([`Policy`]), each a plan (placements and routing) from the estimated demand:
//! - `inferline`: hardware scaling only ([`hardware_scaling`]: the most accurate variants,
//!   fewest instances); beyond what the whole cluster carries with them, the plan at that
//!   capacity, the excess queued; no early dropping ([`DropPolicy::NoDropping`]).
//! - `per_stage` (Proteus-like): each task planned alone by [`allocate`] as a one-node problem
//!   with an equal share of the SLO (`SLO / depth`), its own incoming demand, and the workers
//!   split per pool in proportion to the tasks' needs at full accuracy; routed most accurate
//!   first per task, independently of the upstream variant; [`DropPolicy::PerTaskDropping`].
//! - `loki`: [`allocate`] on the whole pipeline, [`most_accurate_first`], and
//!   [`DropPolicy::RerouteThenDrop`]; its ablations `loki/no-dropping`, `loki/last-task` and
//!   `loki/per-task` change only the drop policy (Loki Fig. 7).
//!
//! **Workloads**: a step overload ([`step_arrivals`]), Proteus traces rescaled
//! ([`trace_arrivals`]), and the capacity search ([`Overload::capacity`]: the largest steady
//! Poisson demand a policy serves with at most 1% SLO violations).

use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::rc::Rc;
use std::time::{Duration, Instant};

use infaas_scheduler::loki::manager::Cause;
use infaas_scheduler::loki::{
    accuracy_scaling, allocate, alternatives, hardware_scaling, most_accurate_first, on_arrival,
    Allocation, Alternative, Arrival, Decision, DropPolicy, Hop, LokiError, LokiProblem,
    LokiSettings, Manager, ManagerSettings, Placement, Replan, RoutingTables, SolveStatus, Spent,
};
use infaas_scheduler::pipeline::PlanNode;
use serde::Serialize;

use crate::catalogue::Profile;
use crate::pipeline::{
    branch_draw, pipelines, plan_nodes, OptionSettings, PipelineError, PipelineSpec, StageSpec,
};

/// The cluster of Loki's bench (`sim/benches/loki.rs`): workers per pool.
pub const WORKERS: [(&str, usize); 3] = [("cpu", 8), ("gpu_pascal", 6), ("gpu_ampere", 6)];
/// The default end-to-end SLO, ms (processing along a path gets half of it, Loki §4.1).
pub const SLO_MS: f64 = 600.0;
/// The pipelines [`overload_pipelines`] defines, by name.
pub const OVERLOAD_PIPELINES: &[&str] = &["detect-classify", "three-stage", "cascade", "traffic"];
/// Most tasks of a pipeline the simulator handles.
pub const MAX_TASKS: usize = 8;

/// Salt of the routing draws (the branch draws use the seed itself).
const ROUTE_SALT: u64 = 0x10C1_0E7E_5EED;
/// Plans are cached per demand bucket of this ratio (planned at the bucket's top).
const BUCKET: f64 = 1.02;
/// Salt of the admission draws.
const ADMIT_SALT: u64 = 0xAD_0017;
const NONE: u8 = u8::MAX;

/// Loki's traffic-analysis pipeline (§6.1) from Proteus families: object detection (yolov5),
/// then car classification (efficientnet) for 60% of the queries and face recognition (resnet,
/// standing in for Loki's VGG, which the catalogue lacks) for 40%, drawn independently.
pub fn traffic() -> PipelineSpec {
    let stage = |name, family, parents: &[usize], p| StageSpec {
        name,
        family,
        parents: parents.to_vec(),
        branch_probability: p,
    };
    PipelineSpec {
        name: "traffic",
        description: "yolov5 detection -> {efficientnet cars (60%), resnet faces (40%)}",
        stages: vec![
            stage("detect", "yolo", &[], 1.0),
            stage("car", "efficientnet", &[0], 0.6),
            stage("face", "resnet", &[0], 0.4),
        ],
    }
}

/// The pipelines of the overload evaluation: the catalogue's trees ([`pipelines`] without the
/// `social-dag`, whose join Loki's trees exclude) and [`traffic`].
pub fn overload_pipelines() -> Vec<PipelineSpec> {
    let mut v: Vec<PipelineSpec> = pipelines()
        .into_iter()
        .filter(|p| OVERLOAD_PIPELINES.contains(&p.name))
        .collect();
    v.push(traffic());
    v
}

/// A pipeline of [`overload_pipelines`] by name.
pub fn overload_pipeline(name: &str) -> Option<PipelineSpec> {
    overload_pipelines().into_iter().find(|p| p.name == name)
}

/// Why an overload evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum OverloadError {
    #[error("unknown pipeline '{name}'; expected one of {}", OVERLOAD_PIPELINES.join(", "))]
    Unknown { name: String },
    /// A stage's family has no profile in the catalogue.
    #[error(transparent)]
    Catalogue(#[from] PipelineError),
    #[error(
        "pipeline '{0}' is not a rooted tree of at most {MAX_TASKS} tasks in topological order"
    )]
    NotATree(String),
    #[error("the cluster cannot carry any demand with the most accurate variants")]
    NoCapacity,
    #[error("the workload holds no arrivals")]
    EmptyWorkload,
    /// [`Overload::accuracy_ceiling`] cannot express the simulator's accuracy measure.
    #[error("no accuracy ceiling: {0}")]
    Ceiling(String),
    #[error(transparent)]
    Loki(#[from] LokiError),
}

/// The Loki problem of a pipeline on a cluster: every option of each stage's family (the
/// simulator's [`crate::pipeline::options_for`] with its default settings: CPU with 4 cores
/// an instance, GPU Pascal and Ampere), the bench's cluster shape, SLO `slo_ms`; the demand
/// is set per plan.
pub fn loki_problem(
    spec: &PipelineSpec,
    catalogue: &[Profile],
    slo_ms: f64,
    workers: &BTreeMap<String, usize>,
) -> Result<LokiProblem, OverloadError> {
    if spec.stages.is_empty() || spec.stages.len() > MAX_TASKS {
        return Err(OverloadError::NotATree(spec.name.into()));
    }
    for (i, s) in spec.stages.iter().enumerate() {
        let tree = if i == 0 {
            s.parents.is_empty()
        } else {
            s.parents.len() == 1 && s.parents[0] < i
        };
        if !tree {
            return Err(OverloadError::NotATree(spec.name.into()));
        }
    }
    let nodes = plan_nodes(spec, catalogue, &OptionSettings::default())?;
    Ok(LokiProblem::new(
        nodes,
        0.0,
        slo_ms,
        workers.iter().map(|(k, v)| (k.clone(), *v)),
    ))
}

/// The cluster of [`WORKERS`].
pub fn default_workers() -> BTreeMap<String, usize> {
    WORKERS.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

/// The largest demand (to 1%) that [`hardware_scaling`] carries with the most accurate
/// variants on the whole cluster (0 when it carries none).
pub fn full_accuracy_capacity(p: &LokiProblem, s: &LokiSettings) -> Result<f64, LokiError> {
    let carried = |d: f64| hardware_scaling(&p.with_demand(d), s).map(|a| a.is_some());
    let (mut lo, mut hi) = (0.1f64, 1.0f64);
    if !carried(lo)? {
        return Ok(0.0);
    }
    while carried(hi)? {
        lo = hi;
        hi *= 2.0;
        if hi > 1e7 {
            return Ok(lo);
        }
    }
    while hi / lo > 1.01 {
        let mid = (lo * hi).sqrt();
        if carried(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

// ---------------------------------------------------------------------------------------------
// Policies and plans

/// A serving policy (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Policy {
    InferLine,
    PerStage,
    /// Loki's resource manager and load balancer with this early-dropping policy.
    Loki(DropPolicy),
}

impl Policy {
    /// The three systems compared (Loki §6.2).
    pub const MAIN: [Policy; 3] = [
        Policy::InferLine,
        Policy::PerStage,
        Policy::Loki(DropPolicy::RerouteThenDrop),
    ];
    /// The systems and Loki's ablations (Fig. 7).
    pub const ALL: [Policy; 6] = [
        Policy::InferLine,
        Policy::PerStage,
        Policy::Loki(DropPolicy::RerouteThenDrop),
        Policy::Loki(DropPolicy::NoDropping),
        Policy::Loki(DropPolicy::LastTaskDropping),
        Policy::Loki(DropPolicy::PerTaskDropping),
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::InferLine => "inferline",
            Policy::PerStage => "per_stage",
            Policy::Loki(DropPolicy::RerouteThenDrop) => "loki",
            Policy::Loki(DropPolicy::NoDropping) => "loki/no-dropping",
            Policy::Loki(DropPolicy::LastTaskDropping) => "loki/last-task",
            Policy::Loki(DropPolicy::PerTaskDropping) => "loki/per-task",
        }
    }

    pub fn parse(s: &str) -> Option<Policy> {
        Policy::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The early-dropping policy it runs with.
    pub fn drop_policy(self) -> DropPolicy {
        match self {
            Policy::InferLine => DropPolicy::NoDropping,
            Policy::PerStage => DropPolicy::PerTaskDropping,
            Policy::Loki(d) => d,
        }
    }

    /// Policies with the same plans (Loki's ablations share Loki's).
    fn class(self) -> u8 {
        match self {
            Policy::InferLine => 0,
            Policy::PerStage => 1,
            Policy::Loki(_) => 2,
        }
    }
}

/// How queries are routed to a task's placements.
#[derive(Debug, Clone)]
pub enum Routing {
    /// One set of tables over the pipeline (per upstream placement).
    Joint(RoutingTables),
    /// Per task, the tables of its own one-node problem (its frontend table).
    /// (`None` for a task its workers cannot run at all: its queries are dropped).
    PerTask(Vec<Option<RoutingTables>>),
}

/// A policy's plan at one demand.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Per task, the placements.
    pub tasks: Vec<Vec<Placement>>,
    pub routing: Routing,
    /// Loki's backup table: every task's placements with spare capacity.
    pub alternatives: Vec<Alternative>,
    /// Workers the plan uses.
    pub workers: usize,
    /// The demand planned for, queries/s at the root.
    pub demand_qps: f64,
    /// The fraction of it the plan carries (by its own model).
    pub served_fraction: f64,
    /// Whether the plan traded accuracy for throughput anywhere.
    pub accuracy_scaled: bool,
    pub solve_ms: f64,
}

/// How a run estimates the demand it plans for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    /// The resource manager's ([`Manager`]), starting as if the demand had been this rate for a
    /// period.
    Ewma { initial_qps: f64 },
    /// The true steady demand, known in advance (the capacity search): planned once, never
    /// again.
    Fixed(f64),
}

/// What the evaluation is run with.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadSettings {
    pub slo_ms: f64,
    pub workers: BTreeMap<String, usize>,
    pub loki: LokiSettings,
    /// The resource manager's loop: the controller's settings ([`ManagerSettings::default`]);
    /// `--replan-s` sets its [`ManagerSettings::period_s`] and `--no-replan-on-change` its
    /// [`ManagerSettings::replan_on_change`].
    pub manager: ManagerSettings,
    /// Delay before a change-triggered plan takes effect, s: a fixed stand-in for the MILP's
    /// solve (about 300 ms in Loki; its measured time here depends on the machine and is zero
    /// for a cached plan, so a fixed delay keeps runs comparable). Periodic plans take effect
    /// at once.
    pub change_delay_s: f64,
    pub seed: u64,
    /// The step overload: seconds at `step_low`, at `step_high`, and at `step_low` again.
    pub step_s: [f64; 3],
    /// Demands of the step, as multiples of the full-accuracy capacity.
    pub step_low: f64,
    pub step_high: f64,
    /// Peak of the rescaled traces (5-s moving average), as a multiple of that capacity.
    pub trace_peak: f64,
    /// Length of each steady run of the capacity search, s.
    pub capacity_s: f64,
    /// Highest SLO violation ratio a demand counts as carried at.
    pub max_violation: f64,
    /// The capacity search stops when its bounds are within this ratio.
    pub capacity_tolerance: f64,
    /// The accuracy-bounded capacity counts a demand as carried only within this drop of
    /// relative accuracy (the issue's target: 13%).
    pub max_accuracy_drop: f64,
    /// Time limit of each solve of [`Overload::accuracy_ceiling`] (a bound, not a plan that
    /// must be ready within a re-planning period).
    pub ceiling_time_limit: Duration,
    /// An experiment beyond Loki: when a loki plan carries less than the estimated demand
    /// (served fraction below 1), the frontend drops the excess on arrival instead of routing
    /// it over every placement (off by default).
    pub admission: bool,
}

impl Default for OverloadSettings {
    fn default() -> Self {
        OverloadSettings {
            slo_ms: SLO_MS,
            workers: default_workers(),
            loki: LokiSettings::default(),
            manager: ManagerSettings::default(),
            change_delay_s: 0.5,
            seed: 1,
            step_s: [60.0, 120.0, 60.0],
            step_low: 0.8,
            step_high: 3.0,
            trace_peak: 3.0,
            capacity_s: 30.0,
            max_violation: 0.01,
            capacity_tolerance: 1.03,
            max_accuracy_drop: 0.13,
            ceiling_time_limit: Duration::from_secs(10),
            admission: false,
        }
    }
}

/// A pipeline on the cluster, with its plans cached per policy and demand bucket.
#[derive(Debug)]
pub struct Overload {
    pub problem: LokiProblem,
    pub settings: OverloadSettings,
    /// What the whole cluster carries with the most accurate variants (q/s at the root).
    pub full_capacity_qps: f64,
    /// Per task, the accuracy of its most accurate usable variant (hardware scaling's).
    pub reference_accuracy: Vec<f64>,
    /// Per task, the share of the root's queries reaching it.
    pub reach: Vec<f64>,
    children: Vec<Vec<usize>>,
    full_allocation: Allocation,
    stage_workers: Option<Vec<BTreeMap<String, usize>>>,
    cache: HashMap<(u8, i64), Rc<Plan>>,
    /// MILP-backed plans made (cache misses).
    pub plans_made: usize,
    /// Wall time spent making them, ms.
    pub planning_ms: f64,
}

/// MostAccurateFirst over `a` with every placement's capacity derated to `utilisation`.
fn derated_tables(
    problem: &LokiProblem,
    a: &Allocation,
    demand: f64,
    utilisation: f64,
) -> RoutingTables {
    let mut routed = a.clone();
    for p in routed.tasks.iter_mut().flatten() {
        p.capacity_qps *= utilisation;
    }
    most_accurate_first(problem, &routed, demand)
}

fn joint_plan(problem: &LokiProblem, a: &Allocation, demand: f64, utilisation: f64) -> Plan {
    let tables = derated_tables(problem, a, demand * utilisation, utilisation);
    let alts = (0..a.tasks.len())
        .flat_map(|t| alternatives(a, &tables, t))
        .collect();
    Plan {
        tasks: a.tasks.clone(),
        routing: Routing::Joint(tables),
        alternatives: alts,
        workers: a.instances(),
        demand_qps: demand,
        served_fraction: a.served_fraction,
        accuracy_scaled: a.relative_accuracy < 1.0 - 1e-9,
        solve_ms: a.solve_ms,
    }
}

impl Overload {
    /// The pipeline's problem on the cluster of `settings`; finds the full-accuracy capacity
    /// (by bisection on [`hardware_scaling`]).
    pub fn new(
        mut problem: LokiProblem,
        settings: OverloadSettings,
    ) -> Result<Overload, OverloadError> {
        let n = problem.nodes.len();
        if n == 0 || n > MAX_TASKS {
            return Err(OverloadError::NotATree(format!("{n} tasks")));
        }
        problem.slo_ms = settings.slo_ms;
        problem.workers = settings.workers.clone();
        let mut children = vec![Vec::new(); n];
        let mut reach = vec![1.0; n];
        for (t, node) in problem.nodes.iter().enumerate().skip(1) {
            let Some(&p) = node.parents.first().filter(|&&p| p < t) else {
                return Err(OverloadError::NotATree(node.name.clone()));
            };
            children[p].push(t);
            reach[t] = reach[p] * node.branch_probability;
        }
        let started = Instant::now();
        let full = full_accuracy_capacity(&problem, &settings.loki)?;
        if full <= 0.0 {
            return Err(OverloadError::NoCapacity);
        }
        let a = hardware_scaling(&problem.with_demand(full), &settings.loki)?
            .ok_or(OverloadError::NoCapacity)?;
        let reference_accuracy = a
            .tasks
            .iter()
            .map(|ps| ps.iter().map(|p| p.accuracy).fold(0.0, f64::max))
            .collect();
        Ok(Overload {
            problem,
            settings,
            full_capacity_qps: full,
            reference_accuracy,
            reach,
            children,
            full_allocation: a,
            stage_workers: None,
            cache: HashMap::new(),
            plans_made: 0,
            planning_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Tasks on the longest root-to-leaf path.
    pub fn depth(&self) -> usize {
        let mut d = vec![1usize; self.problem.nodes.len()];
        for (t, node) in self.problem.nodes.iter().enumerate().skip(1) {
            d[t] = node.parents.first().map_or(1, |&p| d[p] + 1);
        }
        d.into_iter().max().unwrap_or(1)
    }

    /// The one-node problem of task `t` for the per-stage policy.
    fn stage_problem(
        &self,
        t: usize,
        demand: f64,
        workers: &BTreeMap<String, usize>,
    ) -> LokiProblem {
        let node = &self.problem.nodes[t];
        LokiProblem::new(
            vec![PlanNode {
                name: node.name.clone(),
                parents: Vec::new(),
                branch_probability: 1.0,
                options: node.options.clone(),
            }],
            demand,
            self.settings.slo_ms / self.depth() as f64,
            workers.iter().map(|(k, v)| (k.clone(), *v)),
        )
    }

    /// The per-stage policy's workers per task: each pool split in proportion to the tasks'
    /// needs at full accuracy (reach / the task's own full-accuracy capacity on the whole
    /// cluster), largest remainders first; equally when a task has no such capacity.
    pub fn stage_workers(&mut self) -> Result<Vec<BTreeMap<String, usize>>, OverloadError> {
        if let Some(w) = &self.stage_workers {
            return Ok(w.clone());
        }
        let n = self.problem.nodes.len();
        let mut need = Vec::with_capacity(n);
        for t in 0..n {
            let p = self.stage_problem(t, 0.0, &self.settings.workers);
            let cap = full_accuracy_capacity(&p, &self.settings.loki)?;
            need.push(if cap > 0.0 {
                self.reach[t] / cap
            } else {
                f64::NAN
            });
        }
        if need.iter().any(|x| !x.is_finite()) {
            need = vec![1.0; n];
        }
        let total: f64 = need.iter().sum();
        let mut out = vec![BTreeMap::new(); n];
        for (pool, &count) in &self.settings.workers {
            let exact: Vec<f64> = need.iter().map(|x| x / total * count as f64).collect();
            let mut given: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_by(|&a, &b| {
                (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor()))
            });
            let mut left = count.saturating_sub(given.iter().sum());
            for &t in order.iter().cycle().take(n * 2) {
                if left == 0 {
                    break;
                }
                given[t] += 1;
                left -= 1;
            }
            for (t, g) in given.into_iter().enumerate() {
                out[t].insert(pool.clone(), g);
            }
        }
        self.stage_workers = Some(out.clone());
        Ok(out)
    }

    /// The plan of `policy` for an estimated demand: made for the estimate over the manager's
    /// target utilisation ([`ManagerSettings::plan_qps`]; cached per demand bucket of 2%:
    /// planned for the bucket's top), routed with the placements derated to it.
    pub fn plan(&mut self, policy: Policy, estimate_qps: f64) -> Result<Rc<Plan>, OverloadError> {
        let u = self.settings.manager.utilisation_target();
        let planned = self.settings.manager.plan_qps(estimate_qps);
        let bucket = (planned.ln() / BUCKET.ln()).ceil() as i64;
        let key = (policy.class(), bucket);
        if let Some(p) = self.cache.get(&key) {
            return Ok(p.clone());
        }
        let demand = BUCKET.powi(bucket as i32);
        let started = Instant::now();
        let s = self.settings.loki;
        let plan = match policy {
            Policy::InferLine => match hardware_scaling(&self.problem.with_demand(demand), &s)? {
                Some(a) => joint_plan(&self.problem, &a, demand, u),
                None => {
                    let mut p = joint_plan(&self.problem, &self.full_allocation, demand, u);
                    p.served_fraction = self.full_capacity_qps / demand;
                    p
                }
            },
            Policy::Loki(_) => {
                let a = allocate(&self.problem.with_demand(demand), &s)?;
                joint_plan(&self.problem, &a, demand, u)
            }
            Policy::PerStage => {
                let workers = self.stage_workers()?;
                let mut tasks = Vec::new();
                let mut tables = Vec::new();
                let (mut used, mut served, mut scaled, mut solve) = (0, 1.0f64, false, 0.0);
                for (t, w) in workers.iter().enumerate() {
                    let d = demand * self.reach[t];
                    let p = self.stage_problem(t, d, w);
                    // A task whose share of the workers runs none of its variants in its SLO
                    // share serves nothing.
                    let Ok(a) = allocate(&p, &s) else {
                        tables.push(None);
                        tasks.push(Vec::new());
                        served = 0.0;
                        continue;
                    };
                    tables.push(Some(derated_tables(&p, &a, d * u, u)));
                    used += a.instances();
                    served = served.min(a.served_fraction);
                    scaled |= a.relative_accuracy < 1.0 - 1e-9;
                    solve += a.solve_ms;
                    tasks.push(a.tasks.into_iter().next().unwrap_or_default());
                }
                Plan {
                    tasks,
                    routing: Routing::PerTask(tables),
                    alternatives: Vec::new(),
                    workers: used,
                    demand_qps: demand,
                    served_fraction: served,
                    accuracy_scaled: scaled,
                    solve_ms: solve,
                }
            }
        };
        self.plans_made += 1;
        self.planning_ms += started.elapsed().as_secs_f64() * 1e3;
        let plan = Rc::new(plan);
        self.cache.insert(key, plan.clone());
        Ok(plan)
    }

    /// Simulates `policy` on the arrivals (ms from 0, sorted) at the pipeline's root.
    pub fn run(
        &mut self,
        policy: Policy,
        arrivals_ms: &[f64],
        estimate: Estimate,
    ) -> Result<RunStats, OverloadError> {
        if arrivals_ms.is_empty() {
            return Err(OverloadError::EmptyWorkload);
        }
        // The resource manager's loop (EWMA estimates only: a fixed estimate is the true
        // demand, planned once).
        let (mut manager, first) = match estimate {
            Estimate::Ewma { initial_qps } => {
                let (m, r) = Manager::start_at_rate(self.settings.manager, 0.0, initial_qps);
                (Some(m), r)
            }
            Estimate::Fixed(d) => (
                None,
                Replan {
                    at_s: 0.0,
                    cause: Cause::Start,
                    estimate_qps: d,
                    demand_qps: d,
                    plan_qps: self.settings.manager.plan_qps(d),
                },
            ),
        };
        let plan = self.plan(policy, first.demand_qps)?;
        let mut sim = Sim::new(self, policy, plan);
        sim.set_admission(&self.settings, first.demand_qps);
        sim.stats.decisions.push(first);
        let tick_ms = self.settings.manager.tick_s * 1e3;
        let tick_ms = if tick_ms > 0.0 && tick_ms.is_finite() {
            tick_ms
        } else {
            1e3
        };
        // Ticks so far, and the arrivals of the current one.
        let mut ticks = 0u64;
        let mut tick_arrivals = 0usize;
        let managed = manager.is_some();
        let next_tick = |ticks: u64| {
            if managed {
                (ticks + 1) as f64 * tick_ms
            } else {
                f64::INFINITY
            }
        };
        let delay_ms = self.settings.change_delay_s.max(0.0) * 1e3;
        // A change-triggered plan and when it takes effect.
        let mut pending: Option<(f64, Rc<Plan>, f64)> = None;
        let mut i = 0usize;
        let mut last_t = 0.0;
        loop {
            let t_event = sim.events.peek().map(|e| e.at);
            let t_arrival = arrivals_ms.get(i).copied();
            let t_pending = pending.as_ref().map_or(f64::INFINITY, |p| p.0);
            let t_tick = next_tick(ticks);
            let t_ctrl = t_tick.min(t_pending);
            let ctrl_due = t_arrival.is_some_and(|a| a >= t_ctrl);
            if ctrl_due && t_event.is_none_or(|e| e >= t_ctrl) {
                if t_pending <= t_ctrl {
                    let Some((at, plan, for_qps)) = pending.take() else {
                        unreachable!("t_pending is finite")
                    };
                    sim.workers_ms += sim.plan.workers as f64 * (at - last_t);
                    last_t = at;
                    sim.replan(plan, at, &self.problem);
                    sim.set_admission(&self.settings, for_qps);
                } else if let Some(m) = manager.as_mut() {
                    let now = t_tick;
                    ticks += 1;
                    let decision = m.tick(now / 1e3, tick_arrivals as f64, None);
                    tick_arrivals = 0;
                    let Some(r) = decision.replan() else {
                        continue;
                    };
                    sim.stats.decisions.push(r);
                    let plan = self.plan(policy, r.demand_qps)?;
                    if r.cause == Cause::Change {
                        sim.stats.change_replans += 1;
                        // A later decision supersedes one still pending.
                        pending = Some((now + delay_ms, plan, r.demand_qps));
                    } else {
                        pending = None;
                        sim.workers_ms += sim.plan.workers as f64 * (now - last_t);
                        last_t = now;
                        sim.replan(plan, now, &self.problem);
                        sim.set_admission(&self.settings, r.demand_qps);
                    }
                }
                continue;
            }
            match (t_event, t_arrival) {
                (None, None) => break,
                (Some(e), a) if a.is_none_or(|a| e <= a) => {
                    let Some(ev) = sim.events.pop() else { break };
                    sim.done(ev);
                }
                (_, Some(a)) => {
                    tick_arrivals += 1;
                    sim.arrive(i, a);
                    i += 1;
                }
                (Some(_), None) => unreachable!("covered above"),
            }
        }
        let end = arrivals_ms.last().copied().unwrap_or(0.0).max(last_t);
        sim.workers_ms += sim.plan.workers as f64 * (end - last_t);
        let mut stats = sim.stats;
        stats.policy = policy.name().to_owned();
        stats.arrivals = arrivals_ms.len();
        let failed = stats.late + stats.dropped;
        stats.violation_ratio = failed as f64 / stats.arrivals as f64;
        if stats.answered > 0 {
            stats.accuracy /= stats.answered as f64;
            stats.relative_accuracy /= stats.answered as f64;
        }
        stats.workers_mean = if end > 0.0 { sim.workers_ms / end } else { 0.0 };
        stats.duration_s = end / 1e3;
        stats.demand_qps = arrivals_ms.len() as f64 / (end / 1e3).max(1e-9);
        Ok(stats)
    }

    /// The largest steady Poisson demand `policy` serves with at most
    /// [`OverloadSettings::max_violation`] SLO violations over [`OverloadSettings::capacity_s`]
    /// (the plan made for the true demand from the start), found by doubling or halving from
    /// the full-accuracy capacity, then bisection; and the run at it.
    pub fn capacity(&mut self, policy: Policy) -> Result<Capacity, OverloadError> {
        self.capacity_with(policy, None)
    }

    /// [`Overload::capacity`] where a demand also counts as carried only if the queries
    /// answered keep at least `min_relative_accuracy` of the most accurate variants' accuracy.
    pub fn capacity_with(
        &mut self,
        policy: Policy,
        min_relative_accuracy: Option<f64>,
    ) -> Result<Capacity, OverloadError> {
        let s = self.settings.clone();
        let probe = |o: &mut Overload, d: f64| -> Result<RunStats, OverloadError> {
            let arrivals = poisson(&[(s.capacity_s, d)], s.seed ^ 0xCA9A);
            o.run(policy, &arrivals, Estimate::Fixed(d))
        };
        let ok = |r: &RunStats| {
            r.violation_ratio <= s.max_violation
                && min_relative_accuracy.is_none_or(|m| r.relative_accuracy >= m)
        };
        let mut runs = 0;
        let start = self.full_capacity_qps;
        let r = probe(self, start)?;
        runs += 1;
        let (mut lo, mut hi, mut best);
        if ok(&r) {
            (lo, best) = (start, Some(r));
            hi = start * 2.0;
            loop {
                let r = probe(self, hi)?;
                runs += 1;
                if !ok(&r) || hi > start * 64.0 {
                    if ok(&r) {
                        (lo, best) = (hi, Some(r));
                    }
                    break;
                }
                (lo, best) = (hi, Some(r));
                hi *= 2.0;
            }
        } else {
            hi = start;
            lo = start / 2.0;
            best = None;
            loop {
                let r = probe(self, lo)?;
                runs += 1;
                if ok(&r) {
                    best = Some(r);
                    break;
                }
                hi = lo;
                lo /= 2.0;
                if lo < start / 256.0 {
                    break;
                }
            }
        }
        while best.is_some() && hi / lo > s.capacity_tolerance {
            let mid = (lo * hi).sqrt();
            let r = probe(self, mid)?;
            runs += 1;
            if ok(&r) {
                (lo, best) = (mid, Some(r));
            } else {
                hi = mid;
            }
        }
        Ok(Capacity {
            policy: policy.name().to_owned(),
            qps: if best.is_some() { lo } else { 0.0 },
            ratio_to_full_accuracy: if best.is_some() {
                lo / self.full_capacity_qps
            } else {
                0.0
            },
            runs,
            at_capacity: best,
        })
    }

    /// The largest demand loki's plans say they carry (served fraction ≥ 99.9%), by bisection
    /// on [`allocate`]: what the catalogue's variants allow at their profiled p99, queues
    /// aside. Not a bound on the simulated capacity, whose batches take their mean, and only
    /// as good as the time-limited solves (a solve stopped early may serve less).
    pub fn planned_accuracy_scaling_capacity(&mut self) -> Result<f64, OverloadError> {
        let s = self.settings.loki;
        let problem = &self.problem;
        let (carried, _) = demand_search(self.full_capacity_qps, PLANNED_TOLERANCE, |d| {
            Ok(allocate(&problem.with_demand(d), &s)?.served_fraction >= 0.999)
        })?;
        Ok(carried)
    }

    /// The catalogue's ceiling on the capacity at relative accuracy ≥ `min_relative_accuracy`
    /// (the issue's 13% drop: 0.87), in the plans' own terms: the largest steady demand for
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
    fn query_accuracy_problem(&self) -> Result<LokiProblem, OverloadError> {
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

/// Bisection tolerance of [`Overload::planned_accuracy_scaling_capacity`].
const PLANNED_TOLERANCE: f64 = 1.02;
/// Bisection tolerance of [`Overload::accuracy_ceiling`].
const CEILING_TOLERANCE: f64 = 1.01;
/// Weight of the served fraction in the accuracy-scaling MILP's objective (against at most 1
/// for the relative accuracy; `infaas_scheduler::loki::milp`). [`ceiling_carries`] is sound
/// for any weight at least this.
const MILP_SERVE_WEIGHT: f64 = 100.0;

/// Whether an optimal accuracy-scaling plan at some demand shows that a plan carrying all of it
/// at relative accuracy ≥ `a` may exist: its objective `s (100 + r)` reaches `100 + a` (see
/// [`Overload::accuracy_ceiling`]).
fn ceiling_carries(plan: &Allocation, a: f64) -> bool {
    plan.served_fraction * (MILP_SERVE_WEIGHT + plan.relative_accuracy)
        >= MILP_SERVE_WEIGHT + a - 1e-4
}

/// The demand search of the planned capacities: from `full` (the full-accuracy capacity),
/// doubling while `carried` holds (up to 256x) or halving until it does (down to 1/256),
/// then bisection until the bounds are within `tolerance`. Returns the largest demand found
/// carried (0 when none) and the smallest found not carried (infinite when 256x still is).
fn demand_search(
    full: f64,
    tolerance: f64,
    mut carried: impl FnMut(f64) -> Result<bool, OverloadError>,
) -> Result<(f64, f64), OverloadError> {
    let (mut lo, mut hi);
    if carried(full)? {
        (lo, hi) = (full, full * 2.0);
        while carried(hi)? {
            lo = hi;
            if hi >= full * 256.0 {
                return Ok((lo, f64::INFINITY));
            }
            hi *= 2.0;
        }
    } else {
        (lo, hi) = (full / 2.0, full);
        while !carried(lo)? {
            hi = lo;
            lo /= 2.0;
            if lo < full / 256.0 {
                return Ok((0.0, hi));
            }
        }
    }
    while hi / lo > tolerance {
        let mid = (lo * hi).sqrt();
        if carried(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, hi))
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

/// What a run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunStats {
    pub policy: String,
    pub arrivals: usize,
    pub duration_s: f64,
    /// Mean arrival rate, q/s.
    pub demand_qps: f64,
    /// Answered within the SLO.
    pub answered: usize,
    /// Finished after the deadline, or given up at it while queued.
    pub late: usize,
    /// Of the late: given up at the deadline while queued.
    pub expired: usize,
    /// Dropped early by the policy (or with no placement for a task).
    pub dropped: usize,
    /// Requests rerouted to a faster alternative.
    pub rerouted: usize,
    /// (late + dropped) / arrivals.
    pub violation_ratio: f64,
    /// Mean end-to-end accuracy of the queries answered within the SLO.
    pub accuracy: f64,
    /// The same relative to the most accurate variants (1.0).
    pub relative_accuracy: f64,
    /// Workers the plans used, time-weighted mean.
    pub workers_mean: f64,
    /// Plans that changed during the run.
    pub replans: usize,
    /// Re-plans triggered by a significant change of demand
    /// ([`ManagerSettings::replan_on_change`]).
    pub change_replans: usize,
    /// The resource manager's decisions, in order: the first plan's, then every re-plan
    /// (periodic or on a change), when decided and for what demand.
    #[serde(skip)]
    pub decisions: Vec<Replan>,
    /// Plans taking effect after the first (periodic or on a change) that scaled accuracy.
    pub accuracy_scaled_periods: usize,
}

impl RunStats {
    /// When each re-plan on a change of demand was decided, s.
    pub fn change_replans_at_s(&self) -> Vec<f64> {
        self.decisions
            .iter()
            .filter(|d| d.cause == Cause::Change)
            .map(|d| d.at_s)
            .collect()
    }
}

/// A policy's capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    pub policy: String,
    /// The largest steady demand carried with at most 1% violations, q/s (0: none found).
    pub qps: f64,
    /// `qps` over the full-accuracy capacity of hardware scaling's plan.
    pub ratio_to_full_accuracy: f64,
    /// Simulations the search ran.
    pub runs: usize,
    /// The run at `qps`.
    pub at_capacity: Option<RunStats>,
}

// ---------------------------------------------------------------------------------------------
// The discrete-event simulation

#[derive(Debug)]
struct Event {
    at: f64,
    seq: u64,
    epoch: u32,
    task: u8,
    placement: u16,
    accuracy: f32,
    budget_ms: f64,
    /// (query, when it entered the task).
    items: Vec<(u32, f64)>,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Earliest first in a max-heap.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.at.total_cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// A planned hop: (task, placement, budget ms).
type PathHop = (usize, usize, f64);

#[derive(Debug)]
struct Slot {
    queue: VecDeque<(u32, f64)>,
    free: usize,
    batch: usize,
    /// Service time of a batch of `b` at `b - 1`, ms.
    service: Vec<f64>,
    budget_ms: f64,
    accuracy: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    None,
    Dropped,
    Expired,
}

#[derive(Debug, Clone)]
struct Query {
    deadline: f64,
    /// Tasks the query runs (bit per task).
    runs: u8,
    pending: u16,
    fail: Fail,
    finish: f64,
    accuracy: [f32; MAX_TASKS],
    /// Rerouted placements, valid in `override_epoch`.
    rerouted: [u8; MAX_TASKS],
    override_epoch: u32,
}

struct Sim {
    policy: Policy,
    seed: u64,
    slo_ms: f64,
    /// The per-stage policy's SLO share of a task (`SLO / depth`).
    stage_slo_ms: f64,
    names: Vec<String>,
    parents: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Per task, its branch probability.
    branch: Vec<f64>,
    reference: Vec<f64>,
    plan: Rc<Plan>,
    epoch: u32,
    slots: Vec<Vec<Slot>>,
    events: BinaryHeap<Event>,
    seq: u64,
    queries: Vec<Query>,
    stats: RunStats,
    workers_ms: f64,
    /// Share of the arrivals the frontend admits ([`OverloadSettings::admission`]).
    admit: f64,
}

fn slots_of(problem: &LokiProblem, plan: &Plan) -> Vec<Vec<Slot>> {
    plan.tasks
        .iter()
        .enumerate()
        .map(|(t, ps)| {
            ps.iter()
                .map(|p| {
                    let o = &problem.nodes[t].options[p.option].variant;
                    let batch = p.batch.max(1);
                    let service = (1..=batch)
                        .map(|b| o.latency_at(b).map_or(p.budget_ms, |(l, k)| l.mean_ms * k))
                        .collect();
                    Slot {
                        queue: VecDeque::new(),
                        free: p.instances,
                        batch,
                        service,
                        budget_ms: p.budget_ms,
                        accuracy: p.accuracy,
                    }
                })
                .collect()
        })
        .collect()
}

impl Sim {
    fn new(o: &Overload, policy: Policy, plan: Rc<Plan>) -> Sim {
        Sim {
            policy,
            seed: o.settings.seed,
            slo_ms: o.settings.slo_ms,
            stage_slo_ms: o.settings.slo_ms / o.depth() as f64,
            names: o.problem.nodes.iter().map(|n| n.name.clone()).collect(),
            parents: o
                .problem
                .nodes
                .iter()
                .map(|n| n.parents.first().copied().unwrap_or(usize::MAX))
                .collect(),
            children: o.children.clone(),
            reference: o.reference_accuracy.clone(),
            branch: o
                .problem
                .nodes
                .iter()
                .map(|n| n.branch_probability)
                .collect(),
            slots: slots_of(&o.problem, &plan),
            plan,
            epoch: 0,
            events: BinaryHeap::new(),
            seq: 0,
            queries: Vec::new(),
            stats: RunStats::default(),
            workers_ms: 0.0,
            admit: 1.0,
        }
    }

    /// The placement of `task` for query `q` in the current plan, from upstream placement
    /// `up` (the parent's, in the current plan).
    fn planned(&self, q: usize, task: usize, up: Option<usize>) -> Option<usize> {
        let query = &self.queries[q];
        if query.override_epoch == self.epoch && query.rerouted[task] != NONE {
            return Some(query.rerouted[task] as usize);
        }
        if self.plan.tasks.get(task).is_none_or(|ps| ps.is_empty()) {
            return None;
        }
        let u = branch_draw(self.seed ^ ROUTE_SALT, q, task);
        let pick = match &self.plan.routing {
            Routing::Joint(r) => r.pick(task, if task == 0 { None } else { up }, u),
            Routing::PerTask(v) => v
                .get(task)
                .and_then(Option::as_ref)
                .and_then(|r| r.pick(0, None, u)),
        };
        pick.map(|p| p.placement)
    }

    /// The placement of `task` for `q` in the current plan, its ancestors' drawn from the
    /// root (for a request whose parent ran under an older plan).
    fn virtual_placement(&self, q: usize, task: usize) -> Option<usize> {
        let up = match self.parents[task] {
            usize::MAX => None,
            p => Some(self.virtual_placement(q, p)?),
        };
        self.planned(q, task, up)
    }

    /// The planned rest of `q`'s path from `task` at placement `at`: the task, then the chain
    /// of its running descendants with the largest budgets.
    fn chain(&self, q: usize, task: usize, at: usize, out: &mut Vec<PathHop>) {
        let budget = self.plan.tasks[task][at].budget_ms;
        out.push((task, at, budget));
        let runs = self.queries[q].runs;
        let mut best: Option<(f64, Vec<PathHop>)> = None;
        for &c in &self.children[task] {
            if runs & (1 << c) == 0 {
                continue;
            }
            let Some(pc) = self.planned(q, c, Some(at)) else {
                continue;
            };
            let mut sub = Vec::new();
            self.chain(q, c, pc, &mut sub);
            let total: f64 = sub.iter().map(|h| h.2).sum();
            if best.as_ref().is_none_or(|(b, _)| total > *b) {
                best = Some((total, sub));
            }
        }
        if let Some((_, sub)) = best {
            out.extend(sub);
        }
    }

    fn release(&mut self, q: usize) {
        let query = &mut self.queries[q];
        query.pending = query.pending.saturating_sub(1);
        if query.pending > 0 {
            return;
        }
        match query.fail {
            Fail::Dropped => self.stats.dropped += 1,
            Fail::Expired => {
                self.stats.late += 1;
                self.stats.expired += 1;
            }
            Fail::None if query.finish > query.deadline => self.stats.late += 1,
            Fail::None => {
                self.stats.answered += 1;
                let (mut acc, mut rel, mut ends) = (0.0, 0.0, 0usize);
                for t in 0..self.names.len() {
                    if query.runs & (1 << t) == 0
                        || self.children[t].iter().any(|&c| query.runs & (1 << c) != 0)
                    {
                        continue;
                    }
                    let (mut a, mut r, mut k) = (1.0f64, 1.0f64, t);
                    loop {
                        a *= query.accuracy[k] as f64;
                        r *= self.reference[k].max(1e-9);
                        match self.parents[k] {
                            usize::MAX => break,
                            p => k = p,
                        }
                    }
                    acc += a;
                    rel += a / r;
                    ends += 1;
                }
                let ends = ends.max(1) as f64;
                self.stats.accuracy += acc / ends;
                self.stats.relative_accuracy += rel / ends;
            }
        }
    }

    fn arrive(&mut self, index: usize, now: f64) {
        let n = self.names.len();
        let mut runs = 1u8;
        for t in 1..n {
            let p = self.parents[t];
            if runs & (1 << p) != 0 && branch_draw(self.seed, index, t) < self.branch[t] {
                runs |= 1 << t;
            }
        }
        self.queries.push(Query {
            deadline: now + self.slo_ms,
            runs,
            pending: 1,
            fail: Fail::None,
            finish: now,
            accuracy: [0.0; MAX_TASKS],
            rerouted: [NONE; MAX_TASKS],
            override_epoch: u32::MAX,
        });
        if self.admit < 1.0 && branch_draw(self.seed ^ ADMIT_SALT, index, 0) >= self.admit {
            self.queries[index].fail = Fail::Dropped;
            self.release(index);
            return;
        }
        self.forward(index, 0, None, None, now);
    }

    /// Query `q`'s request about to enter `task` (from upstream placement `up`).
    fn forward(
        &mut self,
        q: usize,
        task: usize,
        up: Option<usize>,
        previous: Option<(usize, f64, f64)>,
        now: f64,
    ) {
        if self.queries[q].fail != Fail::None {
            self.release(q);
            return;
        }
        let Some(at) = self.planned(q, task, up) else {
            self.queries[q].fail = Fail::Dropped;
            self.release(q);
            return;
        };
        let decision = {
            let mut path = Vec::new();
            self.chain(q, task, at, &mut path);
            let hops: Vec<Hop> = path
                .iter()
                .map(|&(t, p, b)| Hop {
                    task: t,
                    node: &self.names[t],
                    placement: p,
                    budget_ms: b,
                })
                .collect();
            let spent = previous.map(|(t, spent_ms, budget_ms)| Spent {
                node: &self.names[t],
                spent_ms,
                budget_ms,
            });
            on_arrival(
                self.policy.drop_policy(),
                &Arrival {
                    now_ms: now,
                    deadline_ms: self.queries[q].deadline,
                    remaining: &hops,
                    alternatives: &self.plan.alternatives,
                    previous: spent,
                },
            )
        };
        let target = match decision {
            Decision::Proceed => at,
            Decision::Reroute { task: t, placement } => {
                self.set_reroute(q, t, placement);
                if t == task {
                    placement
                } else {
                    at
                }
            }
            Decision::Drop { .. } => {
                self.queries[q].fail = Fail::Dropped;
                self.release(q);
                return;
            }
        };
        self.slots[task][target].queue.push_back((q as u32, now));
        self.dispatch(task, target, now);
    }

    /// Whether query `q`, about to run at `task` on placement `at`, should be given up now:
    /// its deadline passed (every policy), or (reroute-then-drop and last-task dropping, the
    /// policies that judge the time left) the policy drops it given the rest of its path from
    /// this task; a reroute of a later task is taken. Marks the query.
    fn give_up(&mut self, q: usize, task: usize, at: usize, now: f64) -> bool {
        let query = &self.queries[q];
        if query.fail != Fail::None {
            return true;
        }
        if now >= query.deadline {
            self.queries[q].fail = Fail::Expired;
            return true;
        }
        let policy = self.policy.drop_policy();
        if !matches!(
            policy,
            DropPolicy::RerouteThenDrop | DropPolicy::LastTaskDropping
        ) {
            return false;
        }
        let decision = {
            let mut path = Vec::new();
            self.chain(q, task, at, &mut path);
            let hops: Vec<Hop> = path
                .iter()
                .map(|&(t, p, b)| Hop {
                    task: t,
                    node: &self.names[t],
                    placement: p,
                    budget_ms: b,
                })
                .collect();
            // The request is in this task's queue already: only later tasks can be rerouted.
            let later: Vec<Alternative> = self
                .plan
                .alternatives
                .iter()
                .filter(|a| a.task != task)
                .copied()
                .collect();
            on_arrival(
                policy,
                &Arrival {
                    now_ms: now,
                    deadline_ms: self.queries[q].deadline,
                    remaining: &hops,
                    alternatives: &later,
                    previous: None,
                },
            )
        };
        match decision {
            Decision::Proceed => false,
            Decision::Reroute { task: t, placement } => {
                self.set_reroute(q, t, placement);
                false
            }
            Decision::Drop { .. } => {
                self.queries[q].fail = Fail::Dropped;
                true
            }
        }
    }

    fn set_reroute(&mut self, q: usize, task: usize, placement: usize) {
        self.stats.rerouted += 1;
        let epoch = self.epoch;
        let query = &mut self.queries[q];
        if query.override_epoch != epoch {
            query.rerouted = [NONE; MAX_TASKS];
            query.override_epoch = epoch;
        }
        query.rerouted[task] = placement.min(NONE as usize - 1) as u8;
    }

    fn dispatch(&mut self, task: usize, at: usize, now: f64) {
        loop {
            let slot = &self.slots[task][at];
            if slot.free == 0 || slot.queue.is_empty() {
                return;
            }
            let batch = slot.batch;
            let mut items = Vec::with_capacity(batch);
            while items.len() < batch {
                let Some((q, enq)) = self.slots[task][at].queue.pop_front() else {
                    break;
                };
                if self.give_up(q as usize, task, at, now) {
                    self.release(q as usize);
                } else {
                    items.push((q, enq));
                }
            }
            let slot = &mut self.slots[task][at];
            let service = items
                .len()
                .checked_sub(1)
                .map(|b| slot.service[b.min(slot.service.len() - 1)]);
            let (accuracy, budget_ms) = (slot.accuracy as f32, slot.budget_ms);
            if service.is_some() {
                slot.free -= 1;
            }
            let Some(service) = service else {
                continue;
            };
            self.seq += 1;
            self.events.push(Event {
                at: now + service,
                seq: self.seq,
                epoch: self.epoch,
                task: task as u8,
                placement: at as u16,
                accuracy,
                budget_ms,
                items,
            });
        }
    }

    fn done(&mut self, ev: Event) {
        let now = ev.at;
        let task = ev.task as usize;
        let current = ev.epoch == self.epoch;
        if current {
            self.slots[task][ev.placement as usize].free += 1;
        }
        for &(q, enq) in &ev.items {
            let q = q as usize;
            if self.queries[q].fail != Fail::None {
                self.release(q);
                continue;
            }
            let runs = self.queries[q].runs;
            {
                let query = &mut self.queries[q];
                query.accuracy[task] = ev.accuracy;
                query.finish = query.finish.max(now);
            }
            let kids: Vec<usize> = self.children[task]
                .iter()
                .copied()
                .filter(|&c| runs & (1 << c) != 0)
                .collect();
            if !kids.is_empty() {
                let up = if current {
                    Some(ev.placement as usize)
                } else {
                    self.virtual_placement(q, task)
                };
                self.queries[q].pending += kids.len() as u16;
                for c in kids {
                    let share = match self.policy {
                        Policy::PerStage => self.stage_slo_ms,
                        _ => 2.0 * ev.budget_ms,
                    };
                    self.forward(q, c, up, Some((task, now - enq, share)), now);
                }
            }
            self.release(q);
        }
        if current {
            self.dispatch(task, ev.placement as usize, now);
        }
    }

    /// With [`OverloadSettings::admission`], a loki plan that carries less than the estimate
    /// has the frontend admit only what it carries (at the target utilisation).
    fn set_admission(&mut self, settings: &OverloadSettings, estimate: f64) {
        self.admit = 1.0;
        if settings.admission && matches!(self.policy, Policy::Loki(_)) && estimate > 0.0 {
            let carried = self.plan.served_fraction
                * self.plan.demand_qps
                * settings.manager.utilisation_target();
            self.admit = (carried / estimate).clamp(0.0, 1.0);
        }
    }

    fn replan(&mut self, plan: Rc<Plan>, now: f64, problem: &LokiProblem) {
        if plan.accuracy_scaled {
            self.stats.accuracy_scaled_periods += 1;
        }
        if Rc::ptr_eq(&plan, &self.plan) {
            return;
        }
        self.stats.replans += 1;
        let old = std::mem::replace(&mut self.slots, slots_of(problem, &plan));
        self.plan = plan;
        self.epoch += 1;
        for (task, slots) in old.into_iter().enumerate() {
            for slot in slots {
                for (q, enq) in slot.queue {
                    let q = q as usize;
                    if self.queries[q].fail != Fail::None {
                        self.release(q);
                        continue;
                    }
                    match self.virtual_placement(q, task) {
                        Some(at) => self.slots[task][at].queue.push_back((q as u32, enq)),
                        None => {
                            self.queries[q].fail = Fail::Dropped;
                            self.release(q);
                        }
                    }
                }
            }
        }
        for task in 0..self.slots.len() {
            for at in 0..self.slots[task].len() {
                self.dispatch(task, at, now);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The evaluation

/// A named workload: arrivals at the pipeline's root (ms from 0, sorted).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub arrivals_ms: Vec<f64>,
}

/// One policy's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalRow {
    pub policy: String,
    pub capacity: Option<Capacity>,
    /// Capacity over inferline's.
    pub capacity_ratio_to_inferline: Option<f64>,
    /// The capacity where the answered queries also keep accuracy within
    /// [`OverloadSettings::max_accuracy_drop`] of the most accurate variants.
    pub bounded_capacity: Option<Capacity>,
    /// That over inferline's capacity.
    pub bounded_ratio_to_inferline: Option<f64>,
    /// Per workload, the run.
    pub runs: BTreeMap<String, RunStats>,
}

/// A workload as run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadInfo {
    pub name: String,
    pub queries: usize,
    pub duration_s: f64,
    pub mean_qps: f64,
    /// Its peak (5-s moving average) over the full-accuracy capacity.
    pub peak_ratio: f64,
}

/// The evaluation of one pipeline (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadEval {
    pub simulated: bool,
    pub pipeline: String,
    pub description: String,
    pub slo_ms: f64,
    pub workers: BTreeMap<String, usize>,
    /// What hardware scaling carries at full accuracy on the whole cluster, q/s.
    pub full_accuracy_capacity_qps: f64,
    /// What loki's plans carry (served fraction >= 99.9%) with accuracy scaling, q/s, queues
    /// aside ([`Overload::planned_accuracy_scaling_capacity`]: with loki's time-limited solves,
    /// so not a bound; see `accuracy_ceiling`).
    pub planned_accuracy_scaling_capacity_qps: Option<f64>,
    /// The catalogue's ceiling on the capacity at the accuracy bound
    /// ([`Overload::accuracy_ceiling`] at 1 - [`OverloadSettings::max_accuracy_drop`]): the
    /// most any plan on these variants and workers carries, in the plans' own terms.
    pub accuracy_ceiling: Option<AccuracyCeiling>,
    /// Its demand over inferline's simulated capacity (the denominator of
    /// [`EvalRow::bounded_ratio_to_inferline`]).
    pub accuracy_ceiling_ratio_to_inferline: Option<f64>,
    pub workloads: Vec<WorkloadInfo>,
    pub rows: Vec<EvalRow>,
    /// Plans made (MILP-backed, cache misses) and the wall time they took.
    pub plans_made: usize,
    pub planning_s: f64,
    pub wall_s: f64,
}

/// Peak of the 5-s moving average of a workload's rate, q/s.
pub fn peak_rate(arrivals_ms: &[f64]) -> f64 {
    let Some(&last) = arrivals_ms.last() else {
        return 0.0;
    };
    let seconds = (last / 1e3).floor() as usize + 1;
    let mut counts = vec![0.0f64; seconds];
    for &t in arrivals_ms {
        counts[((t.max(0.0) / 1e3) as usize).min(seconds - 1)] += 1.0;
    }
    counts
        .windows(5.min(seconds))
        .map(|w| w.iter().sum::<f64>() / w.len() as f64)
        .fold(0.0, f64::max)
}

/// Runs every policy on every workload (the resource manager's estimates), and the capacity
/// search when `capacity` is set.
pub fn evaluate(
    o: &mut Overload,
    spec: &PipelineSpec,
    policies: &[Policy],
    workloads: &[Workload],
    capacity: bool,
) -> Result<OverloadEval, OverloadError> {
    let started = Instant::now();
    let mut rows = Vec::new();
    for &policy in policies {
        let mut runs = BTreeMap::new();
        for w in workloads {
            let initial = initial_rate(&w.arrivals_ms, o.settings.manager.period_s);
            let r = o.run(
                policy,
                &w.arrivals_ms,
                Estimate::Ewma {
                    initial_qps: initial,
                },
            )?;
            runs.insert(w.name.clone(), r);
        }
        let (cap, bounded) = if capacity {
            let c = o.capacity(policy)?;
            let floor = 1.0 - o.settings.max_accuracy_drop;
            let holds = c
                .at_capacity
                .as_ref()
                .is_some_and(|r| r.relative_accuracy >= floor);
            let b = if holds {
                c.clone()
            } else {
                o.capacity_with(policy, Some(floor))?
            };
            (Some(c), Some(b))
        } else {
            (None, None)
        };
        rows.push(EvalRow {
            policy: policy.name().to_owned(),
            capacity: cap,
            capacity_ratio_to_inferline: None,
            bounded_capacity: bounded,
            bounded_ratio_to_inferline: None,
            runs,
        });
    }
    let base = rows
        .iter()
        .find(|r| r.policy == Policy::InferLine.name())
        .and_then(|r| r.capacity.as_ref())
        .map(|c| c.qps)
        .filter(|q| *q > 0.0);
    for r in &mut rows {
        r.capacity_ratio_to_inferline = base.zip(r.capacity.as_ref()).map(|(b, c)| c.qps / b);
        r.bounded_ratio_to_inferline = base
            .zip(r.bounded_capacity.as_ref())
            .map(|(b, c)| c.qps / b);
    }
    let planned = if capacity && policies.iter().any(|p| matches!(p, Policy::Loki(_))) {
        Some(o.planned_accuracy_scaling_capacity()?)
    } else {
        None
    };
    let ceiling = if capacity {
        Some(o.accuracy_ceiling(1.0 - o.settings.max_accuracy_drop)?)
    } else {
        None
    };
    let ceiling_ratio = base.zip(ceiling.as_ref()).map(|(b, c)| c.qps / b);
    let full = o.full_capacity_qps;
    Ok(OverloadEval {
        simulated: true,
        pipeline: spec.name.to_owned(),
        description: spec.description.to_owned(),
        slo_ms: o.settings.slo_ms,
        workers: o.settings.workers.clone(),
        full_accuracy_capacity_qps: full,
        planned_accuracy_scaling_capacity_qps: planned,
        accuracy_ceiling: ceiling,
        accuracy_ceiling_ratio_to_inferline: ceiling_ratio,
        workloads: workloads
            .iter()
            .map(|w| {
                let d = w.arrivals_ms.last().copied().unwrap_or(0.0) / 1e3;
                WorkloadInfo {
                    name: w.name.clone(),
                    queries: w.arrivals_ms.len(),
                    duration_s: d,
                    mean_qps: w.arrivals_ms.len() as f64 / d.max(1e-9),
                    peak_ratio: peak_rate(&w.arrivals_ms) / full,
                }
            })
            .collect(),
        rows,
        plans_made: o.plans_made,
        planning_s: o.planning_ms / 1e3,
        wall_s: started.elapsed().as_secs_f64(),
    })
}

// ---------------------------------------------------------------------------------------------
// Workloads

fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Poisson arrivals (ms, sorted) over consecutive pieces of `(seconds, rate q/s)`, seeded.
pub fn poisson(pieces: &[(f64, f64)], seed: u64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut start = 0.0f64;
    let mut i = 0u64;
    for &(len, rate) in pieces {
        let end = start + len;
        if rate > 0.0 {
            let mut t = start;
            loop {
                i += 1;
                let u = ((mix(seed ^ mix(i)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                t += -u.ln() / rate;
                if t >= end {
                    break;
                }
                out.push(t * 1e3);
            }
        }
        start = end;
    }
    out
}

/// The step overload: `low` x `capacity` q/s for `s[0]` seconds, `high` x for `s[1]`, `low` x
/// for `s[2]` (Poisson, seeded).
pub fn step_arrivals(capacity: f64, low: f64, high: f64, s: [f64; 3], seed: u64) -> Vec<f64> {
    poisson(
        &[
            (s[0], low * capacity),
            (s[1], high * capacity),
            (s[2], low * capacity),
        ],
        seed,
    )
}

/// A trace's shape at another scale: its per-second arrival counts, multiplied so that their
/// 5-s moving average peaks at `peak_qps`, drive Poisson arrivals second by second (seeded).
pub fn trace_arrivals(trace_ms: &[f64], peak_qps: f64, seed: u64) -> Vec<f64> {
    let Some(&last) = trace_ms.last() else {
        return Vec::new();
    };
    let start = trace_ms[0].min(0.0);
    let seconds = ((last - start) / 1e3).floor() as usize + 1;
    let mut counts = vec![0.0f64; seconds];
    for &t in trace_ms {
        counts[(((t - start) / 1e3) as usize).min(seconds - 1)] += 1.0;
    }
    let peak = counts
        .windows(5.min(seconds))
        .map(|w| w.iter().sum::<f64>() / w.len() as f64)
        .fold(0.0, f64::max);
    if peak <= 0.0 {
        return Vec::new();
    }
    let k = peak_qps / peak;
    let pieces: Vec<(f64, f64)> = counts.iter().map(|c| (1.0, c * k)).collect();
    poisson(&pieces, seed)
}

/// The arrival rate of the first `seconds` of a workload, q/s.
pub fn initial_rate(arrivals_ms: &[f64], seconds: f64) -> f64 {
    arrivals_ms
        .iter()
        .take_while(|&&t| t < seconds * 1e3)
        .count() as f64
        / seconds
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::catalogue::Accelerator;
    use infaas_core::LatencyPoint;

    /// A small catalogue: per family, three models (fast and inaccurate to slow and accurate)
    /// on the CPU and a GPU.
    fn catalogue() -> Vec<Profile> {
        let mut out = Vec::new();
        for (family, base) in [("yolo", 6.0), ("resnet", 3.0), ("efficientnet", 4.0)] {
            for (m, (acc, scale)) in [(0.6, 1.0), (0.75, 2.0), (0.9, 4.0)].iter().enumerate() {
                for (accel, speed) in [(Accelerator::Cpu, 4.0), (Accelerator::GpuPascal, 1.0)] {
                    out.push(Profile {
                        model: format!("{family}{m}"),
                        family: family.into(),
                        accelerator: accel,
                        accuracy: *acc,
                        latency: [1usize, 2, 4, 8]
                            .iter()
                            .map(|&b| {
                                let ms = base * scale * speed * (1.0 + 0.4 * (b - 1) as f64);
                                LatencyPoint {
                                    batch: b,
                                    p50_ms: ms,
                                    p99_ms: ms * 1.1,
                                    mean_ms: ms,
                                    throughput_per_s: b as f64 * 1e3 / ms,
                                }
                            })
                            .collect(),
                    });
                }
            }
        }
        out
    }

    fn setup() -> Overload {
        let workers: BTreeMap<String, usize> =
            [("cpu".to_owned(), 2), ("gpu_pascal".to_owned(), 3)].into();
        let settings = OverloadSettings {
            workers: workers.clone(),
            slo_ms: 300.0,
            step_s: [10.0, 30.0, 10.0],
            manager: ManagerSettings {
                period_s: 5.0,
                ..ManagerSettings::default()
            },
            capacity_s: 10.0,
            // Plans must not depend on how fast a loaded test machine solves: a limit the
            // small problems here never reach.
            loki: LokiSettings {
                time_limit: std::time::Duration::from_secs(10),
                ..LokiSettings::default()
            },
            ..OverloadSettings::default()
        };
        let spec = overload_pipeline("detect-classify").unwrap();
        let p = loki_problem(&spec, &catalogue(), settings.slo_ms, &workers).unwrap();
        Overload::new(p, settings).unwrap()
    }

    fn step(o: &Overload) -> Vec<f64> {
        let s = &o.settings;
        step_arrivals(
            o.full_capacity_qps,
            s.step_low,
            s.step_high,
            s.step_s,
            s.seed,
        )
    }

    fn run(o: &mut Overload, policy: Policy, arrivals: &[f64]) -> RunStats {
        let initial = initial_rate(arrivals, o.settings.manager.period_s);
        o.run(
            policy,
            arrivals,
            Estimate::Ewma {
                initial_qps: initial,
            },
        )
        .unwrap()
    }

    #[test]
    fn every_query_is_answered_late_or_dropped_exactly_once() {
        let mut o = setup();
        assert!(o.full_capacity_qps > 0.0);
        let arrivals = step(&o);
        for policy in Policy::ALL {
            let r = run(&mut o, policy, &arrivals);
            assert_eq!(r.arrivals, arrivals.len(), "{policy:?}");
            assert_eq!(
                r.answered + r.late + r.dropped,
                r.arrivals,
                "{policy:?}: {r:?}"
            );
            assert!(r.expired <= r.late);
            assert!(r.answered > 0, "{policy:?}: {r:?}");
            assert!(
                r.relative_accuracy > 0.0 && r.relative_accuracy <= 1.0 + 1e-9,
                "{r:?}"
            );
        }
    }

    #[test]
    fn a_branching_tree_accounts_for_every_query_and_loki_carries_its_overload() {
        let base = setup();
        let p = loki_problem(
            &traffic(),
            &catalogue(),
            base.settings.slo_ms,
            &base.settings.workers,
        )
        .unwrap();
        let mut o = Overload::new(p, base.settings.clone()).unwrap();
        assert_eq!(o.reach, vec![1.0, 0.6, 0.4]);
        let arrivals = step(&o);
        let mut by = BTreeMap::new();
        for policy in Policy::MAIN {
            let r = run(&mut o, policy, &arrivals);
            assert_eq!(
                r.answered + r.late + r.dropped,
                r.arrivals,
                "{policy:?}: {r:?}"
            );
            by.insert(policy.name(), r);
        }
        assert!(
            by["loki"].violation_ratio * 2.0 < by["inferline"].violation_ratio,
            "{by:#?}"
        );
    }

    #[test]
    fn below_capacity_every_policy_answers_at_full_accuracy() {
        let mut o = setup();
        let arrivals = poisson(&[(20.0, 0.5 * o.full_capacity_qps)], 3);
        for policy in Policy::MAIN {
            let r = run(&mut o, policy, &arrivals);
            assert!(r.violation_ratio < 0.01, "{policy:?}: {r:?}");
            if policy != Policy::PerStage {
                assert!(
                    (r.relative_accuracy - 1.0).abs() < 1e-6,
                    "{policy:?}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn loki_violates_less_than_inferline_on_a_step_overload_at_bounded_accuracy() {
        let mut o = setup();
        let arrivals = step(&o);
        let inferline = run(&mut o, Policy::InferLine, &arrivals);
        let loki = run(&mut o, Policy::Loki(DropPolicy::RerouteThenDrop), &arrivals);
        assert!(
            loki.violation_ratio * 2.0 < inferline.violation_ratio,
            "loki {loki:?}\ninferline {inferline:?}"
        );
        // The test catalogue's least accurate path keeps 0.36 / 0.81 = 0.44 of the best.
        assert!(loki.relative_accuracy > 0.5, "{loki:?}");
        assert!(loki.accuracy_scaled_periods > 0, "{loki:?}");
        assert_eq!(inferline.accuracy_scaled_periods, 0, "{inferline:?}");
    }

    #[test]
    fn replanning_on_a_change_of_demand_reacts_within_seconds_of_a_step() {
        // A 10-s period, the step at 10 s: without the change check the first plan for the
        // step comes at 20 s.
        let mut o = setup();
        o.settings.manager.period_s = 10.0;
        let arrivals = step(&o);
        let step_at = o.settings.step_s[0];
        let loki = Policy::Loki(DropPolicy::RerouteThenDrop);
        let mut by = BTreeMap::new();
        for on in [true, false] {
            o.settings.manager.replan_on_change = on;
            for policy in Policy::MAIN {
                by.insert((on, policy.name()), run(&mut o, policy, &arrivals));
            }
        }
        for policy in Policy::MAIN {
            let (with, without) = (&by[&(true, policy.name())], &by[&(false, policy.name())]);
            assert_eq!(without.change_replans, 0, "{without:?}");
            assert!(without.change_replans_at_s().is_empty(), "{without:?}");
            // Decided within 2.5 s of the step (the check runs every second over the last 2 s),
            // and again when the step ends.
            let first = with
                .change_replans_at_s()
                .iter()
                .find(|&&t| t > step_at)
                .copied();
            assert!(
                first.is_some_and(|t| t <= step_at + 2.5),
                "{policy:?}: {with:?}"
            );
            let back = step_at + o.settings.step_s[1];
            assert!(
                with.change_replans_at_s()
                    .iter()
                    .any(|&t| t > back && t <= back + 2.5),
                "{policy:?}: {with:?}"
            );
            assert_eq!(with.change_replans, with.change_replans_at_s().len());
            // The step's demand (3x the first) is planned for at once with the check, at the
            // end of the period (20 s) without it.
            let stepped = |r: &RunStats| {
                let first = r.decisions[0].demand_qps;
                r.decisions
                    .iter()
                    .find(|d| d.at_s > step_at && d.demand_qps > 2.0 * first)
                    .map(|d| d.at_s)
            };
            let (on, off) = (stepped(with), stepped(without));
            assert!(
                on.is_some_and(|t| t <= step_at + 2.5),
                "{policy:?}: {with:?}"
            );
            assert_eq!(off, Some(step_at + 10.0), "{policy:?}: {without:?}");
        }
        let (with, without) = (&by[&(true, loki.name())], &by[&(false, loki.name())]);
        assert!(
            with.violation_ratio < without.violation_ratio,
            "on {with:?}\noff {without:?}"
        );
    }

    #[test]
    fn reroute_then_drop_violates_less_than_no_dropping() {
        let mut o = setup();
        let arrivals = step(&o);
        let rtd = run(&mut o, Policy::Loki(DropPolicy::RerouteThenDrop), &arrivals);
        let none = run(&mut o, Policy::Loki(DropPolicy::NoDropping), &arrivals);
        assert!(
            rtd.violation_ratio < none.violation_ratio,
            "{rtd:?}\n{none:?}"
        );
        assert_eq!(none.dropped, 0, "{none:?}");
    }

    #[test]
    fn loki_carries_more_than_hardware_scaling_alone() {
        let mut o = setup();
        let inferline = o.capacity(Policy::InferLine).unwrap();
        let loki = o
            .capacity(Policy::Loki(DropPolicy::RerouteThenDrop))
            .unwrap();
        assert!(inferline.qps > 0.0, "{inferline:?}");
        assert!(loki.qps > 1.5 * inferline.qps, "{loki:?}\n{inferline:?}");
        let at = loki.at_capacity.unwrap();
        assert!(
            at.violation_ratio <= 0.01 && at.relative_accuracy < 1.0,
            "{at:?}"
        );
    }

    /// The settings [`Overload::accuracy_ceiling`] solves with.
    fn ceiling_settings(o: &Overload) -> LokiSettings {
        LokiSettings {
            time_limit: o.settings.ceiling_time_limit,
            max_paths: usize::MAX,
            max_candidates: usize::MAX,
            ..o.settings.loki
        }
    }

    #[test]
    fn the_accuracy_ceiling_lies_between_full_accuracy_and_unbounded_accuracy_scaling() {
        let mut o = setup();
        let a = 1.0 - o.settings.max_accuracy_drop;
        let c = o.accuracy_ceiling(a).unwrap();
        assert!(c.proved, "{c:?}");
        assert!(
            c.qps >= o.full_capacity_qps,
            "{c:?} {}",
            o.full_capacity_qps
        );
        let fails = c.fails_at_qps.unwrap();
        assert!(
            fails > c.qps && fails / c.qps <= CEILING_TOLERANCE + 1e-9,
            "{c:?}"
        );
        // No accuracy bound carries more (to the planned search's tolerance): the test
        // catalogue's next model keeps 0.75 / 0.9 of the accuracy, so the bound binds.
        let planned = o.planned_accuracy_scaling_capacity().unwrap();
        assert!(c.qps <= planned * PLANNED_TOLERANCE, "{c:?} {planned}");
        assert!(c.qps < planned, "{c:?} {planned}");
        // Above the ceiling no plan carries everything at the bound; at it one carries nearly
        // all of it.
        let problem = o.query_accuracy_problem().unwrap();
        let s = ceiling_settings(&o);
        let above = accuracy_scaling(&problem.with_demand(1.05 * c.qps), &s).unwrap();
        assert_eq!(above.status, SolveStatus::Optimal, "{above:?}");
        assert!(
            above.served_fraction < 0.999 || above.relative_accuracy < a,
            "{above:?}"
        );
        let at = accuracy_scaling(&problem.with_demand(c.qps), &s).unwrap();
        assert!(
            at.served_fraction >= (MILP_SERVE_WEIGHT + a) / (MILP_SERVE_WEIGHT + 1.0) - 1e-6
                && at.relative_accuracy >= a - 1e-6,
            "{at:?}"
        );
        infaas_scheduler::loki::verify(&problem.with_demand(c.qps), &at).unwrap();
    }

    /// The simulator's expected relative accuracy of a query under `a` (the problem's demand
    /// `d`), from its paths: per set of tasks a query runs, the mean over the tasks ending a
    /// path of the expected product of accuracy / reference from the root.
    fn expected_query_accuracy(o: &Overload, a: &Allocation) -> f64 {
        let nodes = &o.problem.nodes;
        let n = nodes.len();
        let parent = |t: usize| nodes[t].parents.first().copied();
        // E[R_t] over the served queries, on the first path through t.
        let mut r = vec![f64::NAN; n];
        for p in &a.paths {
            for (pos, &t) in p.tasks.iter().enumerate() {
                let first = a.paths.iter().find(|q| q.tasks.contains(&t)).unwrap();
                if first.tasks != p.tasks {
                    continue;
                }
                let prod: f64 = (0..=pos)
                    .map(|i| {
                        let u = p.tasks[i];
                        a.tasks[u][p.placements[i]].accuracy / o.reference_accuracy[u]
                    })
                    .product();
                let e = if r[t].is_nan() { 0.0 } else { r[t] };
                r[t] = e + p.ratio / a.served_fraction * prod;
            }
        }
        let mut total = 0.0;
        for set in 0u32..(1 << n) {
            let runs = |t: usize| set & (1 << t) != 0;
            if !runs(0) || (1..n).any(|t| runs(t) && !parent(t).is_some_and(runs)) {
                continue;
            }
            let prob: f64 = (1..n)
                .filter(|&t| parent(t).is_some_and(runs))
                .map(|t| {
                    let b = nodes[t].branch_probability;
                    if runs(t) {
                        b
                    } else {
                        1.0 - b
                    }
                })
                .product();
            let ends: Vec<usize> = (0..n)
                .filter(|&t| runs(t) && !(0..n).any(|c| runs(c) && parent(c) == Some(t)))
                .collect();
            total += prob * ends.iter().map(|&t| r[t]).sum::<f64>() / ends.len() as f64;
        }
        total
    }

    #[test]
    fn the_ceiling_measures_accuracy_as_the_simulator_does_on_branches_and_switches() {
        let base = setup();
        let stage = |name, family, parents: &[usize], p| StageSpec {
            name,
            family,
            parents: parents.to_vec(),
            branch_probability: p,
        };
        let switch = PipelineSpec {
            name: "switch",
            description: "yolo on every query -> resnet on 30%",
            stages: vec![
                stage("cheap", "yolo", &[], 1.0),
                stage("expensive", "resnet", &[0], 0.3),
            ],
        };
        for spec in [traffic(), switch] {
            let p = loki_problem(
                &spec,
                &catalogue(),
                base.settings.slo_ms,
                &base.settings.workers,
            )
            .unwrap();
            let o = Overload::new(p, base.settings.clone()).unwrap();
            let problem = o.query_accuracy_problem().unwrap();
            let s = ceiling_settings(&o);
            let mut differs = 0;
            for x in [1.0, 1.5, 2.0, 3.0] {
                let d = problem.with_demand(x * o.full_capacity_qps);
                let a = accuracy_scaling(&d, &s).unwrap();
                let want = expected_query_accuracy(&o, &a);
                assert!(
                    (a.relative_accuracy - want).abs() < 1e-9,
                    "{} at {x}x: the plan says {}, the simulator's measure {want}\n{a:?}",
                    spec.name,
                    a.relative_accuracy
                );
                // Loki's own measure (the product along every task path) weighs the later
                // tasks more: never above the simulator's.
                let own =
                    accuracy_scaling(&o.problem.with_demand(x * o.full_capacity_qps), &s).unwrap();
                assert!(
                    expected_query_accuracy(&o, &own) >= own.relative_accuracy - 1e-9,
                    "{}: {own:?}",
                    spec.name
                );
                // The same plan by Loki's measure: the override is what makes them agree.
                let leaves: f64 = (0..o.reach.len())
                    .filter(|&t| o.children[t].is_empty())
                    .map(|t| o.reach[t])
                    .sum();
                let loki_measure: f64 = a
                    .paths
                    .iter()
                    .map(|p| {
                        let leaf = p.tasks[p.tasks.len() - 1];
                        let prod: f64 = p
                            .tasks
                            .iter()
                            .zip(&p.placements)
                            .map(|(&u, &i)| a.tasks[u][i].accuracy / o.reference_accuracy[u])
                            .product();
                        o.reach[leaf] / leaves * p.ratio * prod
                    })
                    .sum::<f64>()
                    / a.served_fraction;
                if (loki_measure - want).abs() > 1e-6 {
                    differs += 1;
                }
            }
            assert!(differs > 0, "{}", spec.name);
        }
    }

    #[test]
    fn workloads_are_seeded_and_shaped() {
        let a = step_arrivals(100.0, 1.0, 3.0, [10.0, 10.0, 10.0], 5);
        assert_eq!(a, step_arrivals(100.0, 1.0, 3.0, [10.0, 10.0, 10.0], 5));
        let mid = a.iter().filter(|&&t| (10e3..20e3).contains(&t)).count() as f64;
        let first = a.iter().filter(|&&t| t < 10e3).count() as f64;
        assert!((mid / first - 3.0).abs() < 0.4, "{mid} {first}");
        // A trace peaking at 10 q/s for 5 s, 1 q/s elsewhere, rescaled to a 300 q/s peak.
        let mut t = Vec::new();
        for s in 0..60 {
            let n = if (20..25).contains(&s) { 10 } else { 1 };
            t.extend((0..n).map(|i| s as f64 * 1e3 + i as f64 * 1e3 / n as f64));
        }
        let r = trace_arrivals(&t, 300.0, 1);
        let burst = r.iter().filter(|&&x| (20e3..25e3).contains(&x)).count() as f64 / 5.0;
        assert!((burst - 300.0).abs() < 40.0, "{burst}");
        assert!(overload_pipeline("traffic").is_some());
        assert!(overload_pipeline("social-dag").is_none());
    }
}
