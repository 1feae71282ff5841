//! The policies compared, their plans at a demand, and the pipeline on its cluster with its
//! plans cached.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

use infaas_scheduler::loki::{
    allocate, alternatives, hardware_scaling, most_accurate_first, Allocation, Alternative,
    DropPolicy, LokiProblem, LokiSettings, ManagerSettings, Placement, RoutingTables,
};

use infaas_scheduler::pipeline::PlanNode;

use super::problem::{default_workers, full_accuracy_capacity, OverloadError, MAX_TASKS, SLO_MS};

/// Plans are cached per demand bucket of this ratio (planned at the bucket's top).
const BUCKET: f64 = 1.02;

/// A serving policy (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OverloadPolicy {
    InferLine,
    PerStage,
    /// Loki's resource manager and load balancer with this early-dropping policy.
    Loki(DropPolicy),
}

impl OverloadPolicy {
    /// The three systems compared (Loki §6.2).
    pub const MAIN: [OverloadPolicy; 3] = [
        OverloadPolicy::InferLine,
        OverloadPolicy::PerStage,
        OverloadPolicy::Loki(DropPolicy::RerouteThenDrop),
    ];
    /// The systems and Loki's ablations (Fig. 7).
    pub const ALL: [OverloadPolicy; 6] = [
        OverloadPolicy::InferLine,
        OverloadPolicy::PerStage,
        OverloadPolicy::Loki(DropPolicy::RerouteThenDrop),
        OverloadPolicy::Loki(DropPolicy::NoDropping),
        OverloadPolicy::Loki(DropPolicy::LastTaskDropping),
        OverloadPolicy::Loki(DropPolicy::PerTaskDropping),
    ];

    pub fn name(self) -> &'static str {
        match self {
            OverloadPolicy::InferLine => "inferline",
            OverloadPolicy::PerStage => "per_stage",
            OverloadPolicy::Loki(DropPolicy::RerouteThenDrop) => "loki",
            OverloadPolicy::Loki(DropPolicy::NoDropping) => "loki/no-dropping",
            OverloadPolicy::Loki(DropPolicy::LastTaskDropping) => "loki/last-task",
            OverloadPolicy::Loki(DropPolicy::PerTaskDropping) => "loki/per-task",
        }
    }

    pub fn parse(s: &str) -> Option<OverloadPolicy> {
        OverloadPolicy::ALL.into_iter().find(|p| p.name() == s)
    }

    /// The early-dropping policy it runs with.
    pub fn drop_policy(self) -> DropPolicy {
        match self {
            OverloadPolicy::InferLine => DropPolicy::NoDropping,
            OverloadPolicy::PerStage => DropPolicy::PerTaskDropping,
            OverloadPolicy::Loki(d) => d,
        }
    }

    /// Policies with the same plans (Loki's ablations share Loki's).
    fn class(self) -> u8 {
        match self {
            OverloadPolicy::InferLine => 0,
            OverloadPolicy::PerStage => 1,
            OverloadPolicy::Loki(_) => 2,
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
pub struct OverloadPlan {
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
pub enum DemandEstimate {
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
    /// relative accuracy (the target: 13%).
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
    pub(super) children: Vec<Vec<usize>>,
    full_allocation: Allocation,
    stage_workers: Option<Vec<BTreeMap<String, usize>>>,
    cache: HashMap<(u8, i64), Rc<OverloadPlan>>,
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

fn joint_plan(
    problem: &LokiProblem,
    a: &Allocation,
    demand: f64,
    utilisation: f64,
) -> OverloadPlan {
    let tables = derated_tables(problem, a, demand * utilisation, utilisation);
    let alts = (0..a.tasks.len())
        .flat_map(|t| alternatives(a, &tables, t))
        .collect();
    OverloadPlan {
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
    pub fn plan(
        &mut self,
        policy: OverloadPolicy,
        estimate_qps: f64,
    ) -> Result<Rc<OverloadPlan>, OverloadError> {
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
            OverloadPolicy::InferLine => {
                match hardware_scaling(&self.problem.with_demand(demand), &s)? {
                    Some(a) => joint_plan(&self.problem, &a, demand, u),
                    None => {
                        let mut p = joint_plan(&self.problem, &self.full_allocation, demand, u);
                        p.served_fraction = self.full_capacity_qps / demand;
                        p
                    }
                }
            }
            OverloadPolicy::Loki(_) => {
                let a = allocate(&self.problem.with_demand(demand), &s)?;
                joint_plan(&self.problem, &a, demand, u)
            }
            OverloadPolicy::PerStage => {
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
                OverloadPlan {
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
}
