//! Overload without collapse (Loki, Ahmad et al., HPDC'24) on the running controller.
//!
//! - **Accuracy scaling** (pipelines with `overload.accuracy_scaling`): the resource manager's
//!   loop is [`infaas_scheduler::loki::Manager`] with [`ManagerSettings::default`], the
//!   simulator's too: [`Managers`] feeds it each pipeline's arrivals per tick (and the forecast
//!   of the next 10 s, [`crate::forecasts`]) and it says when to plan and for what demand
//!   (every period, and at once on a significant change of demand, Loki §4.2). A plan asks the
//!   resource manager ([`infaas_scheduler::loki::allocate`]) for that demand over the target
//!   utilisation: hardware scaling first (the most accurate variant of every node, the fewest
//!   instances that carry the demand), accuracy scaling when the cluster cannot (the most
//!   accurate mix of variants and paths that does). The chosen instances are loaded,
//!   MostAccurateFirst routing tables are built
//!   ([`infaas_scheduler::loki::most_accurate_first`]) and installed: every query then runs
//!   each node on the variant its table draws. A change between hardware and accuracy scaling
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
use infaas_scheduler::loki::manager::Cause;
use infaas_scheduler::loki::{self, LokiProblem, LokiSettings, Manager, ManagerSettings, Replan};
use infaas_store::db::NewScalingEvent;
use tokio_util::sync::CancellationToken;

pub use super::activity::forecast_key;
pub use super::installed::{Installed, OverloadNode, OverloadPlacement, OverloadStatus};
use super::prepared::Prepared;
use super::registered::prepared;
use super::replicas::{provision, replicas_of};
pub use super::validate::check_tree;
use crate::error::Error;
use crate::platform::ControlPlane;

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

/// Builds the resource manager's problem for a pipeline at `plan_qps` (the demand over the
/// target utilisation, [`Replan::plan_qps`]): its model nodes with their profiled variants
/// (one-thread ones where a node has them: an instance takes one core), the live workers'
/// cores per hardware pool.
fn loki_problem(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    plan_qps: f64,
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
    let p = LokiProblem::new(plan_nodes, plan_qps, problem.slo_ms, workers);
    Ok((p, nodes))
}

/// Allocates and routes pipeline `name` for `plan_qps` (the demand over the target
/// utilisation, [`Replan::plan_qps`]; pure work in a blocking task).
pub async fn allocate(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    plan_qps: f64,
) -> Result<Installed, Error> {
    let (problem, nodes) = loki_problem(state, tenant, prepared, plan_qps)?;
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

/// A pipeline, by (tenant, name).
pub type PipelineKey = (String, String);

/// The resource manager's loop for every pipeline with accuracy scaling: one
/// [`Manager`] a pipeline, fed its arrivals tick by tick (no I/O: [`run`] feeds it from the
/// registry's arrivals and the forecasts; a test feeds it on a clock of its own). Times are ms
/// since the Unix epoch; tick `j` holds the arrivals of `[j, j + 1)` ticks of
/// [`ManagerSettings::tick_s`] and is fed once it is over, at its end.
#[derive(Debug)]
pub struct Managers {
    settings: ManagerSettings,
    by: BTreeMap<PipelineKey, Fed>,
}

#[derive(Debug)]
struct Fed {
    manager: Manager,
    /// The next tick to feed.
    next: i64,
}

impl Managers {
    pub fn new(settings: ManagerSettings) -> Managers {
        Managers {
            settings,
            by: BTreeMap::new(),
        }
    }

    pub fn settings(&self) -> &ManagerSettings {
        &self.settings
    }

    /// The pipelines managed.
    pub fn pipelines(&self) -> Vec<PipelineKey> {
        self.by.keys().cloned().collect()
    }

    /// The tick's length, ms (at least 1).
    fn tick_ms(&self) -> i64 {
        ((self.settings.tick_s * 1e3).round() as i64).max(1)
    }

    /// Manages exactly `pipelines` from `now_ms` on (the ones with accuracy scaling): one not
    /// managed yet starts from its arrivals over the last period (`arrivals(pipeline, from_ms,
    /// to_ms)`) and the forecast (`forecast(pipeline)`), and is planned at once; one no longer
    /// listed is forgotten. Returns the new ones' first plans.
    pub fn track(
        &mut self,
        now_ms: i64,
        pipelines: &[PipelineKey],
        arrivals: impl Fn(&PipelineKey, i64, i64) -> usize,
        forecast: impl Fn(&PipelineKey) -> Option<f64>,
    ) -> Vec<(PipelineKey, Replan)> {
        self.by.retain(|k, _| pipelines.contains(k));
        let tick_ms = self.tick_ms();
        let now = now_ms.div_euclid(tick_ms);
        let period = ((self.settings.period_s * 1e3) as i64 / tick_ms).max(1);
        let mut out = Vec::new();
        for key in pipelines {
            if self.by.contains_key(key) {
                continue;
            }
            let history: Vec<f64> = (now - period..now)
                .map(|j| arrivals(key, j * tick_ms, (j + 1) * tick_ms) as f64)
                .collect();
            let at_s = (now * tick_ms) as f64 / 1e3;
            let (manager, first) = Manager::start(self.settings, at_s, &history, forecast(key));
            self.by.insert(key.clone(), Fed { manager, next: now });
            out.push((key.clone(), first));
        }
        out
    }

    /// Feeds every pipeline the ticks over by `now_ms` that it has not been fed yet (after a
    /// stall of the loop, those of the last period only), and returns the plans decided (a
    /// pipeline's last when it decided several: the earlier ones are superseded).
    pub fn tick(
        &mut self,
        now_ms: i64,
        arrivals: impl Fn(&PipelineKey, i64, i64) -> usize,
        forecast: impl Fn(&PipelineKey) -> Option<f64>,
    ) -> Vec<(PipelineKey, Replan)> {
        let tick_ms = self.tick_ms();
        let now = now_ms.div_euclid(tick_ms);
        let period = ((self.settings.period_s * 1e3) as i64 / tick_ms).max(1);
        let mut out = Vec::new();
        for (key, fed) in &mut self.by {
            let f = forecast(key);
            let mut last = None;
            for j in fed.next.max(now - period)..now {
                let n = arrivals(key, j * tick_ms, (j + 1) * tick_ms) as f64;
                let at_s = ((j + 1) * tick_ms) as f64 / 1e3;
                if let Some(r) = fed.manager.tick(at_s, n, f).replan() {
                    last = Some(r);
                }
            }
            fed.next = fed.next.max(now);
            if let Some(r) = last {
                out.push((key.clone(), r));
            }
        }
        out
    }

    /// The plan last decided for `key` could not be made ([`Manager::unplanned`]).
    pub fn unplanned(&mut self, key: &PipelineKey) {
        if let Some(fed) = self.by.get_mut(key) {
            fed.manager.unplanned();
        }
    }
}

/// The pipelines with accuracy scaling, from the store (`None` when it cannot be read).
async fn accuracy_scaling_pipelines(state: &ControlPlane) -> Option<Vec<PipelineKey>> {
    let rows = match state.db.all_pipelines().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "accuracy scaling cannot list the pipelines");
            return None;
        }
    };
    let mut out = Vec::new();
    for row in rows {
        let Ok(prepared) = prepared(state, &row.tenant_id, &row.name).await else {
            continue;
        };
        if prepared.pipeline.spec.overload.accuracy_scaling {
            out.push((row.tenant_id, row.name));
        }
    }
    Some(out)
}

/// Plans pipeline `name` as `replan` says; whether an allocation was installed.
async fn replan(state: &ControlPlane, tenant: &str, name: &str, replan: Replan) -> bool {
    let Ok(prepared) = prepared(state, tenant, name).await else {
        return false;
    };
    if !prepared.pipeline.spec.overload.accuracy_scaling {
        return false;
    }
    match allocate(state, tenant, &prepared, replan.plan_qps).await {
        Ok(installed) => {
            carry_out(state, tenant, name, &prepared, installed).await;
            true
        }
        Err(e) => {
            tracing::warn!(pipeline = %name, error = %e, "accuracy scaling could not plan");
            false
        }
    }
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
            if replicas_of(&state.cluster, tenant, &v.name) < p.instances {
                provision(&state.cluster, tenant, &v.name, p.instances).await;
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
                fenced: true,
            };
            if let Err(e) = state.db.add_scaling_event(&event).await {
                tracing::warn!(error = %e, "cannot record an accuracy-scaling event");
            }
        }
    }
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

/// Feeds the pipelines' forecasters once a second, samples their cost
/// ([`super::status::record_costs`]) and runs the resource manager's loop ([`Managers`], the
/// pipelines with accuracy scaling read from the store every period), until `shutdown`.
pub async fn run(state: ControlPlane, shutdown: CancellationToken) {
    let mut managers = Managers::new(ManagerSettings::default());
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let period_ms = (managers.settings().period_s * 1e3) as i64;
    let mut listed_at: Option<i64> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now_ms = infaas_core::time::now_ms();
        // The last complete second in which every replica's arrivals are in.
        let settled = crate::exchange::settle_s(state.db.kind());
        feed_forecasts(&state, now_ms.div_euclid(1000) - 1 - settled);
        super::status::record_costs(&state).await;
        let pipelines = &state.pipelines;
        let arrivals =
            |k: &PipelineKey, from: i64, to: i64| pipelines.arrivals_between(&k.0, &k.1, from, to);
        let forecast = |k: &PipelineKey| {
            state
                .forecasts
                .max_next(&k.0, &forecast_key(&k.1))
                .filter(|f| f.is_finite())
        };
        let mut plans = Vec::new();
        if listed_at.is_none_or(|t| now_ms - t >= period_ms) {
            if let Some(list) = accuracy_scaling_pipelines(&state).await {
                listed_at = Some(now_ms);
                plans.extend(managers.track(now_ms, &list, arrivals, forecast));
            }
        }
        plans.extend(managers.tick(now_ms, arrivals, forecast));
        for ((tenant, name), r) in plans {
            if !state.leadership.leads_now() {
                // Another replica may lead by now; it plans again from its own view.
                break;
            }
            if r.cause == Cause::Change {
                metrics::counter!("infaas_pipeline_overload_replans_total", "pipeline" => name.clone())
                    .increment(1);
            }
            if !replan(&state, &tenant, &name, r).await {
                managers.unplanned(&(tenant, name));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> PipelineKey {
        ("acme".to_string(), name.to_string())
    }

    /// `rate` queries a second, every second.
    fn steady(rate: usize) -> impl Fn(&PipelineKey, i64, i64) -> usize {
        move |_, from, to| rate * ((to - from) / 1000) as usize
    }

    #[test]
    fn a_new_pipeline_is_planned_at_once_from_its_last_period_and_a_deleted_one_forgotten() {
        let mut m = Managers::new(ManagerSettings::default());
        let t0 = 1_000_000;
        let first = m.track(t0, &[key("a")], steady(30), |_| None);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].1.cause, Cause::Start);
        assert!((first[0].1.demand_qps - 30.0).abs() < 1e-9, "{first:?}");
        assert!((first[0].1.plan_qps - 50.0).abs() < 1e-9, "{first:?}");
        // Known already: no new plan.
        assert!(m
            .track(t0 + 500, &[key("a")], steady(30), |_| None)
            .is_empty());
        // Nine ticks keep the plan; the tenth is the period's.
        for s in 1..10 {
            assert!(m.tick(t0 + s * 1000, steady(30), |_| None).is_empty());
        }
        let p = m.tick(t0 + 10_000, steady(30), |_| None);
        assert_eq!(p.len(), 1);
        assert_eq!((p[0].1.cause, p[0].1.at_s), (Cause::Periodic, 1010.0));
        m.track(t0 + 10_000, &[], steady(30), |_| None);
        assert!(m.pipelines().is_empty());
    }

    #[test]
    fn a_surge_replans_and_a_stall_is_caught_up() {
        let mut m = Managers::new(ManagerSettings::default());
        m.track(0, &[key("a")], steady(30), |_| None);
        // From 3 s on, 300 q/s.
        let surge = |_: &PipelineKey, from: i64, _: i64| if from >= 3_000 { 300 } else { 30 };
        let mut plans = Vec::new();
        for s in 1..=4 {
            plans.extend(m.tick(s * 1000, surge, |_| None));
        }
        assert_eq!(plans.len(), 1, "{plans:?}");
        assert_eq!((plans[0].1.cause, plans[0].1.at_s), (Cause::Change, 4.0));
        // A stall of 3 s: the ticks missed are fed at once, the last plan returned.
        let p = m.tick(8_000, surge, |_| None);
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].1.at_s, 6.0, "{p:?}");
        assert!((p[0].1.demand_qps - 300.0).abs() < 1e-9, "{p:?}");
    }

    #[test]
    fn the_forecast_raises_the_demand_planned_for() {
        let mut m = Managers::new(ManagerSettings::default());
        let first = m.track(0, &[key("a")], steady(10), |_| Some(60.0));
        assert!((first[0].1.demand_qps - 60.0).abs() < 1e-9, "{first:?}");
        assert!((first[0].1.estimate_qps - 10.0).abs() < 1e-9, "{first:?}");
        assert!((first[0].1.plan_qps - 100.0).abs() < 1e-9, "{first:?}");
    }
}
