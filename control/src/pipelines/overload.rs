//! Overload without collapse (Loki, Ahmad et al., HPDC'24) on the running controller.
//!
//! - **Accuracy scaling** (pipelines with `overload.accuracy_scaling`): every
//!   [`PERIOD`], the controller estimates the pipeline's demand (an exponentially weighted
//!   moving average of its per-second arrivals, Loki §4.2, or the mean of the last 10 s or the
//!   forecast of the next 10 s ([`crate::forecasts`]) when higher) and asks the resource manager
//!   ([`infaas_scheduler::loki::allocate`]): hardware scaling first (the most accurate variant
//!   of every node, the fewest instances that carry the demand), accuracy scaling when the
//!   cluster cannot (the most accurate mix of variants and paths that does). The chosen
//!   instances are loaded, MostAccurateFirst routing tables are built
//!   ([`infaas_scheduler::loki::most_accurate_first`]) and installed: every query then runs
//!   each node on the variant its table draws. Between periods, a demand over the last 2 s
//!   more than 1.25x (or under half) what the allocation planned for re-plans at once (Loki
//!   §4.2: "if it detects a significant change in the demand between its periodic
//!   invocations"). A change between hardware and accuracy scaling
//!   is a scaling event of the nodes' applications (`pipeline-accuracy-scaling`,
//!   `pipeline-hardware-scaling`).
//! - **Early dropping** (every pipeline with a latency SLO, unless
//!   `overload.early_dropping: false`): before a node starts, the query's remaining path must
//!   still fit before its deadline ([`infaas_scheduler::loki::on_arrival`], reroute-then-drop):
//!   with an allocation installed, the remaining nodes' latency budgets (rerouted first to a
//!   faster variant with spare capacity when one makes the deadline); without one, the fastest
//!   time the remaining nodes could take. A query that cannot make it is dropped at once,
//!   before it spends downstream capacity, with a 503 (`error_type: dropped`) naming the node
//!   and the missing time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use infaas_core::HardwareKind;
use infaas_scheduler::loki::{
    self, Allocation, Alternative, LokiProblem, LokiSettings, ReplanRule, RoutingTables,
};
use infaas_store::db::NewScalingEvent;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;

use super::Prepared;
use crate::error::Error;
use crate::platform::ControlPlane;

/// How often the resource manager runs (Loki §4.2).
pub const PERIOD: Duration = Duration::from_secs(10);
/// Weight of the newest second in the demand's moving average.
const EWMA_ALPHA: f64 = 0.3;
/// Window of the demand compared with the installed allocation's between periods, seconds.
pub const CHANGE_WINDOW_S: f64 = 2.0;
/// A rise beyond 1.25x or a fall below half of what the allocation planned for re-plans at
/// once; within a query per second of it never does.
pub const REPLAN: ReplanRule = ReplanRule {
    up: 0.25,
    down: 0.5,
    min_change_qps: 1.0,
};
/// Share of the profiled throughput an allocation plans to use: profiles are measured on an
/// idle worker, and the cores also serve the HTTP edge and the other tenants' queries (Loki
/// plans dedicated GPUs at their profiled rate; shared CPUs need the margin).
pub const UTILISATION_TARGET: f64 = 0.6;

/// An allocation installed for a pipeline: what queries are routed by.
#[derive(Debug)]
pub struct Installed {
    pub problem: LokiProblem,
    pub allocation: Allocation,
    pub tables: RoutingTables,
    /// Per task (the problem's node), the pipeline node it is.
    pub nodes: Vec<usize>,
    /// Per pipeline node, its task.
    pub task_of: HashMap<usize, usize>,
    /// Per task, its children tasks.
    pub children: Vec<Vec<usize>>,
    /// Backup placements with spare capacity, every task's, fastest first.
    pub alternatives: Vec<Alternative>,
    pub at_ms: i64,
}

impl Installed {
    /// The model placement `p` of task `t` runs.
    pub fn model(&self, t: usize, p: usize) -> Option<&str> {
        let placement = self.allocation.tasks.get(t)?.get(p)?;
        let node = self.problem.nodes.get(t)?;
        Some(node.options.get(placement.option)?.variant.model.as_str())
    }

    /// The latency budget of placement `p` of task `t`, ms.
    pub fn budget_ms(&self, t: usize, p: usize) -> f64 {
        self.allocation
            .tasks
            .get(t)
            .and_then(|ps| ps.get(p))
            .map_or(0.0, |x| x.budget_ms)
    }

    /// One draw of a query's placements, task by task (each after its parent's), from the
    /// routing tables; `u` gives a uniform draw per task.
    pub fn draw(&self, mut u: impl FnMut() -> f64) -> Vec<Option<usize>> {
        let mut picks: Vec<Option<usize>> = vec![None; self.problem.nodes.len()];
        for t in 0..self.problem.nodes.len() {
            let upstream = self.problem.nodes[t]
                .parents
                .first()
                .and_then(|&p| picks.get(p).copied().flatten());
            picks[t] = self.tables.pick(t, upstream, u()).map(|p| p.placement);
        }
        picks
    }

    /// The tasks from `t` to a sink along the children with the largest budgets (the chain a
    /// query's deadline must still hold), with their drawn placements.
    pub fn chain(&self, t: usize, picks: &[Option<usize>]) -> Vec<(usize, usize)> {
        fn rest(i: &Installed, t: usize, picks: &[Option<usize>]) -> f64 {
            let own = picks
                .get(t)
                .copied()
                .flatten()
                .map_or(0.0, |p| i.budget_ms(t, p));
            own + i.children[t]
                .iter()
                .map(|&c| rest(i, c, picks))
                .fold(0.0, f64::max)
        }
        let mut out = Vec::new();
        let mut at = Some(t);
        while let Some(k) = at {
            if let Some(p) = picks.get(k).copied().flatten() {
                out.push((k, p));
            }
            at = self.children[k]
                .iter()
                .copied()
                .max_by(|&a, &b| rest(self, a, picks).total_cmp(&rest(self, b, picks)));
        }
        out
    }
}

/// What `GET /v1/pipelines/{name}` shows of the installed allocation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadStatus {
    /// `hardware_scaling` or `accuracy_scaling`.
    pub mode: String,
    /// The demand planned for: the estimate over the utilisation target
    /// ([`UTILISATION_TARGET`]).
    pub demand_qps: f64,
    /// Expected end-to-end accuracy of the allocation, and relative to the most accurate one.
    pub accuracy: f64,
    pub relative_accuracy: f64,
    pub served_fraction: f64,
    pub solve_ms: f64,
    pub status: String,
    /// Per node: its placements (model, instances, batch, latency budget, share of the load).
    pub nodes: Vec<OverloadNode>,
    pub at_ms: i64,
}

/// One node of [`OverloadStatus`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadNode {
    pub name: String,
    pub placements: Vec<OverloadPlacement>,
}

/// One placement of [`OverloadNode`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadPlacement {
    pub model: String,
    pub variant: String,
    pub instances: usize,
    pub batch: usize,
    pub budget_ms: f64,
    pub accuracy: f64,
    pub load_qps: f64,
    pub capacity_qps: f64,
}

impl Installed {
    pub fn status(&self, prepared: &Prepared) -> OverloadStatus {
        let a = &self.allocation;
        OverloadStatus {
            mode: match a.mode {
                loki::Mode::HardwareScaling => "hardware_scaling",
                loki::Mode::AccuracyScaling => "accuracy_scaling",
            }
            .to_string(),
            demand_qps: a.demand_qps,
            accuracy: a.accuracy,
            relative_accuracy: a.relative_accuracy,
            served_fraction: a.served_fraction,
            solve_ms: a.solve_ms,
            status: format!("{:?}", a.status),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(t, &k)| OverloadNode {
                    name: prepared.pipeline.spec.nodes[k].name.clone(),
                    placements: a.tasks[t]
                        .iter()
                        .map(|p| {
                            let v = &self.problem.nodes[t].options[p.option].variant;
                            OverloadPlacement {
                                model: v.model.clone(),
                                variant: v.name.clone(),
                                instances: p.instances,
                                batch: p.batch,
                                budget_ms: p.budget_ms,
                                accuracy: p.accuracy,
                                load_qps: p.load_qps,
                                capacity_qps: p.capacity_qps,
                            }
                        })
                        .collect(),
                })
                .collect(),
            at_ms: self.at_ms,
        }
    }
}

/// Accuracy scaling plans rooted trees of model nodes (Loki's assumption): one model node
/// reads the request, every other reads exactly one model node (through combiners or not).
pub fn check_tree(
    spec: &infaas_core::pipeline::PipelineSpec,
    order: &[usize],
) -> Result<(), Error> {
    let (nodes, parents) = super::plan::model_nodes(spec, order);
    let name = |i: usize| spec.nodes[nodes[i]].name.as_str();
    let roots: Vec<&str> = (0..nodes.len())
        .filter(|&i| parents[i].is_empty())
        .map(name)
        .collect();
    if roots.len() != 1 {
        return Err(Error::Invalid(format!(
            "overload.accuracy_scaling needs a tree of model nodes with one root; nodes {} all read only the request",
            roots.join(", ")
        )));
    }
    if let Some(i) = (0..nodes.len()).find(|&i| parents[i].len() > 1) {
        let from: Vec<&str> = parents[i].iter().map(|&q| name(q)).collect();
        return Err(Error::Invalid(format!(
            "overload.accuracy_scaling needs a tree of model nodes; node '{}' joins {}",
            name(i),
            from.join(", ")
        )));
    }
    Ok(())
}

/// The CPU cores of the live workers (each instance of a one-thread variant takes one).
fn cpu_cores(state: &ControlPlane) -> usize {
    let snapshot = state.cluster.snapshot();
    snapshot
        .workers()
        .iter()
        .filter(|w| w.alive && w.hardware.contains(&HardwareKind::Cpu))
        .map(|w| w.cpu_cores.max(1))
        .sum::<usize>()
        .max(1)
}

/// Builds the resource manager's problem for a pipeline at `demand_qps`: its model nodes with
/// their profiled variants (one-thread ones where a node has them: an instance takes one core),
/// the live workers' cores per hardware pool.
fn loki_problem(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    demand_qps: f64,
) -> Result<(LokiProblem, Vec<usize>), Error> {
    let (problem, nodes, _) = super::plan::problem(state, tenant, prepared)?;
    let mut plan_nodes = problem.nodes;
    for n in &mut plan_nodes {
        if n.options.iter().any(|o| o.variant.threads == 1) {
            n.options.retain(|o| o.variant.threads == 1);
        }
    }
    let mut workers: BTreeMap<String, usize> = BTreeMap::new();
    workers.insert("cpu".to_string(), cpu_cores(state));
    let gpus = state
        .cluster
        .snapshot()
        .workers()
        .iter()
        .filter(|w| w.alive && w.hardware.contains(&HardwareKind::Gpu))
        .count();
    if gpus > 0 {
        workers.insert("gpu".to_string(), gpus);
    }
    // Planning for demand / target utilisation is planning each instance at that share of its
    // profiled throughput.
    let planned = demand_qps.max(0.1) / UTILISATION_TARGET;
    let p = LokiProblem::new(plan_nodes, planned, problem.slo_ms, workers);
    Ok((p, nodes))
}

/// Allocates and routes pipeline `name` for `demand_qps` (pure work in a blocking task).
pub async fn allocate(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    demand_qps: f64,
) -> Result<Installed, Error> {
    let (problem, nodes) = loki_problem(state, tenant, prepared, demand_qps)?;
    let task_of: HashMap<usize, usize> = nodes.iter().enumerate().map(|(t, &k)| (k, t)).collect();
    let mut children = vec![Vec::new(); problem.nodes.len()];
    for (t, n) in problem.nodes.iter().enumerate() {
        for &p in &n.parents {
            if let Some(c) = children.get_mut(p) {
                c.push(t);
            }
        }
    }
    let (problem, allocation, tables) = tokio::task::spawn_blocking(move || {
        let settings = LokiSettings::default();
        let a = loki::allocate(&problem, &settings);
        a.map(|a| {
            let tables = loki::most_accurate_first(&problem, &a, problem.demand_qps);
            (problem, a, tables)
        })
    })
    .await
    .map_err(Error::internal)?
    .map_err(|e| {
        Error::Unprocessable(format!(
            "accuracy scaling cannot plan pipeline '{}': {e}",
            prepared.pipeline.spec.name
        ))
    })?;
    let alternatives = (0..problem.nodes.len())
        .flat_map(|t| loki::alternatives(&allocation, &tables, t))
        .collect();
    Ok(Installed {
        problem,
        allocation,
        tables,
        nodes,
        task_of,
        children,
        alternatives,
        at_ms: infaas_core::time::now_ms(),
    })
}

/// The demand to plan for: the moving average of the last minute's per-second arrivals
/// (newest weighted [`EWMA_ALPHA`]), or the last 10 s's mean when higher (a surge counts at
/// once; a lull is smoothed).
fn demand(arrivals_ms: &[f64], now_ms: f64) -> f64 {
    let mut per_second = [0usize; 60];
    for &a in arrivals_ms {
        let age = ((now_ms - a) / 1000.0).floor();
        if (0.0..60.0).contains(&age) {
            per_second[59 - age as usize] += 1;
        }
    }
    let mut ewma = per_second[0] as f64;
    for &c in &per_second[1..] {
        ewma = EWMA_ALPHA * c as f64 + (1.0 - EWMA_ALPHA) * ewma;
    }
    let recent = per_second[50..].iter().sum::<usize>() as f64 / 10.0;
    ewma.max(recent)
}

/// One resource-manager period for every pipeline with accuracy scaling.
async fn period(state: &ControlPlane) {
    let rows = match state.db.all_pipelines().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "accuracy scaling cannot list the pipelines");
            return;
        }
    };
    for row in rows {
        replan(state, &row.tenant_id, &row.name).await;
    }
}

/// Plans pipeline `name` again now, if it has accuracy scaling: the demand is its moving
/// average, or the forecast of the next 10 s when higher.
async fn replan(state: &ControlPlane, tenant: &str, name: &str) {
    let Ok(prepared) = super::prepared(state, tenant, name).await else {
        return;
    };
    if !prepared.pipeline.spec.overload.accuracy_scaling {
        return;
    }
    let now = infaas_core::time::now_ms() as f64;
    let arrivals = state.pipelines.arrivals(tenant, name, 60_000.0);
    let forecast = state
        .forecasts
        .max_next(tenant, &forecast_key(name))
        .filter(|f| f.is_finite());
    let d = demand(&arrivals, now).max(forecast.unwrap_or(0.0));
    match allocate(state, tenant, &prepared, d).await {
        Ok(installed) => carry_out(state, tenant, name, &prepared, installed).await,
        Err(e) => tracing::warn!(pipeline = %name, error = %e, "accuracy scaling skipped a period"),
    }
}

/// Loki §4.2: between periods, the demand of the last [`CHANGE_WINDOW_S`] seconds against
/// the demand the installed allocation was planned for (`planned_qps` is over the utilisation
/// target), by [`REPLAN`].
pub fn changed(recent_qps: f64, planned_qps: f64) -> bool {
    REPLAN.changed(recent_qps, planned_qps * UTILISATION_TARGET)
}

/// The pipelines whose demand changed significantly since their allocation (see [`changed`]).
fn changed_pipelines(state: &ControlPlane, now_ms: f64) -> Vec<(String, String)> {
    state
        .pipelines
        .active()
        .into_iter()
        .filter(|(tenant, name)| {
            let Some(installed) = state.pipelines.installed(tenant, name) else {
                return false;
            };
            // Not twice within a window: the new allocation's loads need the time.
            if now_ms - (installed.at_ms as f64) < CHANGE_WINDOW_S * 1000.0 {
                return false;
            }
            let recent = state
                .pipelines
                .arrivals(tenant, name, CHANGE_WINDOW_S * 1000.0)
                .len() as f64
                / CHANGE_WINDOW_S;
            changed(recent, installed.allocation.demand_qps)
        })
        .collect()
}

/// Loads the allocation's instances, installs its routing, and records a change of mode.
pub async fn carry_out(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
    prepared: &Prepared,
    installed: Installed,
) {
    for (t, ps) in installed.allocation.tasks.iter().enumerate() {
        for p in ps.iter().filter(|p| p.instances > 0) {
            let v = &installed.problem.nodes[t].options[p.option].variant;
            if super::plan::replicas_of(state, tenant, &v.name) < p.instances {
                super::plan::provision(state, tenant, &v.name, p.instances).await;
            }
        }
    }
    let mode = installed.allocation.mode;
    let before = state
        .pipelines
        .install_allocation(tenant, name, Arc::new(installed));
    if before != Some(mode) {
        let (action, what) = match mode {
            loki::Mode::AccuracyScaling => (
                "pipeline-accuracy-scaling",
                "the cluster cannot carry the demand with the most accurate variants: accuracy scaling",
            ),
            loki::Mode::HardwareScaling => (
                "pipeline-hardware-scaling",
                "the most accurate variants carry the demand again: hardware scaling",
            ),
        };
        metrics::counter!("infaas_pipeline_overload_mode_changes_total",
            "pipeline" => name.to_string(), "mode" => action)
        .increment(1);
        let apps: Vec<String> = prepared
            .pipeline
            .spec
            .nodes
            .iter()
            .filter_map(|n| n.app.clone())
            .collect();
        for app in apps {
            let event = NewScalingEvent {
                tenant_id: Some(tenant.to_string()),
                app: Some(app),
                variant_id: None,
                worker: None,
                action: action.to_string(),
                reason: format!("pipeline '{name}': {what}"),
                cost_before_per_s: 0.0,
                cost_after_per_s: 0.0,
                created_at_ms: infaas_core::time::now_ms(),
            };
            if let Err(e) = state.db.add_scaling_event(&event).await {
                tracing::warn!(error = %e, "cannot record an accuracy-scaling event");
            }
        }
    }
}

/// The forecasts' key of a pipeline (not an application's name: those have no `/`).
pub fn forecast_key(name: &str) -> String {
    format!("pipeline/{name}")
}

/// Feeds every pipeline's arrivals of second `sec` to its forecaster.
fn feed_forecasts(state: &ControlPlane, sec: i64) {
    for (tenant, name) in state.pipelines.active() {
        let n = state.pipelines.arrivals_in_second(&tenant, &name, sec);
        state
            .forecasts
            .observe(&tenant, &forecast_key(&name), sec, n as f64);
    }
}

/// Feeds the pipelines' forecasters once a second and runs the resource manager every
/// [`PERIOD`], until `shutdown`; samples their cost too ([`super::status::record_costs`]).
pub async fn run(state: ControlPlane, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let every = PERIOD.as_secs().max(1);
    let mut n: u64 = 0;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        feed_forecasts(&state, infaas_core::time::now_ms().div_euclid(1000) - 1);
        super::status::record_costs(&state).await;
        if n.is_multiple_of(every) {
            period(&state).await;
        } else {
            let now = infaas_core::time::now_ms() as f64;
            for (tenant, name) in changed_pipelines(&state, now) {
                metrics::counter!("infaas_pipeline_overload_replans_total", "pipeline" => name.clone())
                    .increment(1);
                replan(&state, &tenant, &name).await;
            }
        }
        n += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_significant_change_of_demand_replans() {
        // Planned for 100 q/s (166.7 at the utilisation target).
        let planned = 100.0 / UTILISATION_TARGET;
        assert!(!changed(100.0, planned));
        assert!(!changed(120.0, planned));
        assert!(changed(130.0, planned));
        assert!(!changed(55.0, planned));
        assert!(changed(45.0, planned));
        assert!(!changed(0.0, 0.5 / UTILISATION_TARGET));
    }

    #[test]
    fn demand_follows_a_surge_at_once_and_smooths_a_lull() {
        let now = 100_000.0;
        // 10 q/s for a minute.
        let steady: Vec<f64> = (0..600)
            .map(|i| now - 60_000.0 + i as f64 * 100.0)
            .collect();
        assert!((demand(&steady, now) - 10.0).abs() < 1.0);
        // Then 100 q/s over the last 5 s: the recent mean counts at once.
        let mut surge = steady.clone();
        surge.extend((0..500).map(|i| now - 5_000.0 + i as f64 * 10.0));
        assert!(demand(&surge, now) >= 50.0);
        // A surge that ended 30 s ago fades.
        let old: Vec<f64> = (0..2000).map(|i| now - 40_000.0 + i as f64 * 5.0).collect();
        assert!(demand(&old, now) < 5.0, "{}", demand(&old, now));
    }
}
