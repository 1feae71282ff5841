//! The query path shared by `/v1/.../infer` and the v2 protocol: pick a variant and an
//! instance for the query (scheduler), run it on the worker, retry once elsewhere when the
//! worker fails, and record usage and the arrival (recorded traffic).

use std::time::Instant;

use infaas_core::Tensor;
use infaas_scheduler::{
    select, variant_cost_per_query, Decision, Query, Snapshot, Target, VariantEntry, WorkerEntry,
};
use infaas_worker::LoadRequest;

use std::path::PathBuf;
use std::sync::Arc;

use infaas_scheduler::InFlightGuard;
use infaas_store::Db;

use crate::cluster::{schema, CallError, Cluster, Served};
use crate::error::Error;
use crate::platform::{runtime_ready, ControlPlane, Parts};
use crate::traffic::TrafficRecorder;
use crate::usage::{QueryRecord, UsageRecorder};

/// What the query path uses of the control plane: the cluster view (catalog, selection index,
/// workers), the database (why a target does not serve, scaling events), recorded traffic,
/// usage, and whether ONNX Runtime loaded.
#[derive(Clone, Copy)]
pub struct QueryParts<'a> {
    pub cluster: &'a Arc<Cluster>,
    pub db: &'a Db,
    pub traffic: &'a TrafficRecorder,
    pub usage: &'a UsageRecorder,
    /// The ONNX Runtime library in use, or why it could not be loaded.
    pub runtime: &'a Result<PathBuf, String>,
}

impl<'a> QueryParts<'a> {
    /// The query path's parts of the control plane.
    pub fn of(parts: &'a Parts) -> QueryParts<'a> {
        QueryParts {
            cluster: &parts.cluster,
            db: &parts.db,
            traffic: &parts.traffic,
            usage: &parts.usage,
            runtime: &parts.runtime,
        }
    }
}

/// What a query targets.
#[derive(Debug, Clone, Copy)]
pub enum Goal<'a> {
    App(&'a str),
    Model(&'a str),
}

/// A query's requirements.
#[derive(Debug, Clone, Copy, Default)]
pub struct Requirements {
    pub latency_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
    pub max_cost: Option<f64>,
}

impl Requirements {
    pub fn check(&self) -> Result<(), Error> {
        if let Some(l) = self.latency_ms {
            if !(l.is_finite() && l > 0.0) {
                return Err(Error::Invalid(format!(
                    "latency_ms must be a positive number of milliseconds, not {l}"
                )));
            }
        }
        if let Some(a) = self.min_accuracy {
            if !(0.0..=1.0).contains(&a) {
                return Err(Error::Invalid(format!(
                    "min_accuracy must be a fraction in [0, 1], not {a}"
                )));
            }
        }
        if let Some(c) = self.max_cost {
            if !(c.is_finite() && c >= 0.0) {
                return Err(Error::Invalid(format!(
                    "max_cost must be a non-negative number, not {c}"
                )));
            }
        }
        Ok(())
    }
}

/// The answer to a query.
pub struct Outcome {
    pub outputs: Vec<Tensor>,
    pub app: String,
    pub model: String,
    pub variant: String,
    pub worker: String,
    pub hardware: String,
    pub accuracy: f64,
    pub reason: String,
    pub predicted_ms: f64,
    /// The variant's profiled mean time for the query's rows on an idle instance (model time
    /// only, as the simulator's estimator counts it), ms.
    pub service_ms: f64,
    pub latency_ms: f64,
    pub cost: f64,
}

/// Profiled mean time of `rows` rows on an idle instance of `v`: batches of its max batch.
fn service_ms(v: &infaas_scheduler::VariantEntry, rows: usize) -> f64 {
    let max_batch = v.max_batch.max(1);
    let batches = rows.div_ceil(max_batch).max(1);
    v.latency_at(rows.min(max_batch))
        .map_or(f64::NAN, |(p, k)| p.mean_ms * k * batches as f64)
}

fn batch_rows(inputs: &[Tensor]) -> Result<usize, Error> {
    let first = inputs
        .first()
        .ok_or_else(|| Error::Invalid("the request has no inputs".into()))?;
    if first.shape.is_empty() {
        return Err(Error::Invalid(format!(
            "input '{}' is a scalar; inputs need a batch dimension",
            first.name
        )));
    }
    let rows = first.shape[0];
    if rows == 0 {
        return Err(Error::Invalid(format!(
            "input '{}' has no rows",
            first.name
        )));
    }
    for t in inputs {
        if t.shape.first() != Some(&rows) {
            return Err(Error::Invalid(format!(
                "input '{}' has {} rows but input '{}' has {rows}; every input needs the same batch dimension",
                t.name,
                t.shape.first().copied().unwrap_or(0),
                first.name
            )));
        }
    }
    let mut names: Vec<&str> = inputs.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::Invalid(format!("input '{}' is given twice", w[0])));
    }
    Ok(rows)
}

/// Checks that the target exists and has served variants that take `inputs`; returns the
/// target's name in the selection index.
async fn resolve(
    state: &QueryParts<'_>,
    tenant: &str,
    goal: Goal<'_>,
    inputs: &[Tensor],
) -> Result<String, Error> {
    let cluster = &state.cluster;
    match goal {
        Goal::App(app) => {
            let key_of = |c: &crate::cluster::Catalog| {
                c.app(tenant, app)
                    .map(|a| a.schema_for(inputs).map(|s| schema::app_key(app, &s.key)))
            };
            let mut catalog = cluster.catalog();
            if !matches!(key_of(&catalog), Some(Some(_))) {
                // A model of the application, or one taking these inputs, may have become
                // ready since the last refresh (or on another controller).
                if let Err(e) = cluster.refresh_catalog().await {
                    tracing::warn!(error = %e, "cannot refresh the serving catalog");
                }
                catalog = cluster.catalog();
            }
            match catalog.app(tenant, app) {
                Some(serving) => match serving.schema_for(inputs) {
                    Some(s) => Ok(schema::app_key(app, &s.key)),
                    None => {
                        let takes: Vec<String> = serving
                            .schemas
                            .iter()
                            .map(|s| schema::describe(&s.inputs))
                            .collect();
                        let given: Vec<String> = inputs
                            .iter()
                            .map(|t| format!("{} {} {:?}", t.name, t.dtype(), t.shape))
                            .collect();
                        Err(Error::Invalid(format!(
                            "no model of application '{app}' takes inputs {}; its models take: {}",
                            given.join(", "),
                            takes.join(" | ")
                        )))
                    }
                },
                None => Err(not_serving(state.db, tenant, Some(app), None).await),
            }
        }
        Goal::Model(model) => {
            if cluster.catalog().model(tenant, model).is_none() {
                if let Err(e) = cluster.refresh_catalog().await {
                    tracing::warn!(error = %e, "cannot refresh the serving catalog");
                }
                if cluster.catalog().model(tenant, model).is_none() {
                    return Err(not_serving(state.db, tenant, None, Some(model)).await);
                }
            }
            Ok(model.to_string())
        }
    }
}

/// Why an application or model that serves no variant cannot take a query or a job:
/// - it does not exist, or the application has no model left: 404;
/// - a model of it is still being generated or profiled: 503 (temporary, retry later);
/// - every model of it failed registration: 409 (permanent until a model is registered again).
pub async fn not_serving(db: &Db, tenant: &str, app: Option<&str>, model: Option<&str>) -> Error {
    not_serving_why(db, tenant, app, model)
        .await
        .unwrap_or_else(|e| e)
}

async fn not_serving_why(
    db: &Db,
    tenant: &str,
    app: Option<&str>,
    model: Option<&str>,
) -> Result<Error, Error> {
    use infaas_core::ModelStatus;
    let failed = |statuses: &[ModelStatus]| statuses.iter().all(|s| *s == ModelStatus::Failed);
    Ok(match (app, model) {
        (Some(app), _) => {
            let apps = db.list_apps(tenant).await?;
            if !apps.iter().any(|(a, _)| a.name == app) {
                return Ok(Error::NotFound(format!("application '{app}' not found")));
            }
            let statuses: Vec<ModelStatus> = db
                .list_models(tenant, Some(app))
                .await?
                .iter()
                .map(|m| m.status)
                .collect();
            if statuses.is_empty() {
                Error::NotFound(format!(
                    "application '{app}' has no models; register one with POST /v1/models"
                ))
            } else if failed(&statuses) {
                Error::Conflict(format!(
                    "no model of application '{app}' can serve: every one failed registration (see GET /v1/apps/{app}); register one again"
                ))
            } else {
                Error::Unavailable(format!(
                    "no model of application '{app}' is ready yet: variants are being generated and profiled (see GET /v1/apps/{app}); retry later"
                ))
            }
        }
        (None, Some(model)) => {
            let m = db.get_model(tenant, model).await?;
            if failed(&[m.status]) {
                Error::Conflict(format!(
                    "model '{model}' cannot serve: its registration failed (see GET /v1/models/{model}); register it again"
                ))
            } else {
                Error::Unavailable(format!(
                    "model '{model}' is not ready yet (status {}; see GET /v1/models/{model}); retry later",
                    m.status.as_str()
                ))
            }
        }
        (None, None) => Error::Invalid("give an application or a model".into()),
    })
}

/// The scaling-event action of a load the query path starts ([`record_query_load`]).
pub const QUERY_LOAD_ACTION: &str = "load-for-queries";

/// Records a load that the query path starts as a scaling event of the variant's application
/// (action [`QUERY_LOAD_ACTION`], the selection's reason), so that every instance's origin is in
/// `GET /v1/apps/{app}/scaling-events` beside the autoscaler's actions. The costs are the
/// application's live instances' price per second before and after the load. The demand meter
/// counts it too: the model autoscaler holds such a load as overload for its peak hold.
fn record_query_load(
    state: &QueryParts<'_>,
    snapshot: &Snapshot,
    served: &Served,
    v: &VariantEntry,
    w: &WorkerEntry,
    reason: &str,
) {
    state.cluster.demand.record_query_load(&v.id);
    let prices = *state.cluster.prices();
    let before: f64 = snapshot
        .instances()
        .iter()
        .filter(|i| i.state != infaas_scheduler::InstanceState::Inactive)
        .filter_map(|i| snapshot.variants().get(i.variant))
        .filter(|iv| iv.app == v.app)
        .map(|iv| prices.rate_per_s(iv))
        .sum();
    let after = before + prices.rate_per_s(v);
    let app = (served.entry.tenant_id.clone(), served.entry.app.clone());
    let worker_name = state
        .cluster
        .worker_name(&w.id)
        .unwrap_or_else(|| w.id.clone());
    let (db, variant_id, reason) = (state.db.clone(), v.id.clone(), reason.to_string());
    metrics::counter!("infaas_autoscaler_actions_total", "action" => QUERY_LOAD_ACTION)
        .increment(1);
    tracing::info!(tenant = %app.0, app = %app.1, variant = %v.name, worker = %worker_name, %reason, "load for queries");
    tokio::spawn(async move {
        crate::autoscaler::events::record(
            crate::autoscaler::events::DecidedBy::QueryPath,
            &db,
            Some(&app),
            Some(&variant_id),
            Some(&worker_name),
            QUERY_LOAD_ACTION,
            &reason,
            before,
            after,
        )
        .await;
    });
}

/// Starts loading `variant` on `worker` without waiting for it (the worker loads a variant
/// once however many ask); the cluster view learns of the instance when it is ready.
fn load_in_background(
    state: &QueryParts<'_>,
    snapshot: &Snapshot,
    variant: usize,
    worker: usize,
    reason: &str,
) {
    let (Some(v), Some(w)) = (
        snapshot.variants().get(variant),
        snapshot.workers().get(worker),
    ) else {
        return;
    };
    let (Some(served), Some(handle)) = (state.cluster.served(&v.id), state.cluster.handle(&w.id))
    else {
        return;
    };
    let lr = load_request(&served);
    if !state.cluster.start_load(&w.id, &lr.variant_id).1 {
        return; // under way already: the query that started it recorded it
    }
    record_query_load(state, snapshot, &served, v, w, reason);
    let (cluster, worker_id) = (state.cluster.clone(), w.id.clone());
    tokio::spawn(async move {
        match handle.load(&lr).await {
            Ok(_) => cluster.loaded(&worker_id, &lr),
            Err(e) => {
                cluster.load_failed(&lr.variant_id);
                tracing::warn!(worker = %worker_id, variant = %lr.variant_name, error = %e, "a load started for later queries failed")
            }
        }
    });
}

/// What a worker needs to load an instance of a served variant.
pub fn load_request(s: &Served) -> LoadRequest {
    let v = &s.entry.variant;
    LoadRequest {
        variant_id: v.id.clone(),
        variant_name: v.name.clone(),
        object_key: s.entry.object_key.clone(),
        hardware: v.hardware,
        threads: v.threads,
        max_batch: v.max_batch,
        memory_bytes: v.memory_bytes.unwrap_or(0).max(0) as u64,
    }
}

/// Records an accepted query in the tenant's recorded traffic (a query to a model under the
/// model's application).
fn record_arrival(state: &QueryParts<'_>, tenant: &str, goal: Goal<'_>, req: &Requirements) {
    match goal {
        Goal::App(app) => state
            .traffic
            .record(tenant, app, req.latency_ms, req.min_accuracy),
        Goal::Model(model) => {
            if let Some(served) = state.cluster.catalog().model(tenant, model) {
                state
                    .traffic
                    .record(tenant, &served.entry.app, req.latency_ms, req.min_accuracy);
            }
        }
    }
}

/// Serves one query.
pub async fn serve(
    state: &ControlPlane,
    tenant: &str,
    goal: Goal<'_>,
    req: Requirements,
    inputs: Vec<Tensor>,
) -> Result<Outcome, Error> {
    serve_with(&QueryParts::of(state), tenant, goal, req, inputs, false).await
}

/// As [`serve`], but `req.latency_ms` is a deadline: when no loaded instance is predicted to
/// answer within it, the query fails at once with [`Error::Unsatisfiable`] instead of waiting
/// (or starting a load). For queries that can be rerouted or dropped early (pipelines under
/// overload).
pub async fn serve_by_deadline(
    state: &ControlPlane,
    tenant: &str,
    goal: Goal<'_>,
    req: Requirements,
    inputs: Vec<Tensor>,
) -> Result<Outcome, Error> {
    serve_with(&QueryParts::of(state), tenant, goal, req, inputs, true).await
}

/// Serves one query on the query path's parts: as [`serve_by_deadline`] when `by_deadline`,
/// else as [`serve`].
pub async fn serve_with(
    state: &QueryParts<'_>,
    tenant: &str,
    goal: Goal<'_>,
    req: Requirements,
    inputs: Vec<Tensor>,
    by_deadline: bool,
) -> Result<Outcome, Error> {
    req.check()?;
    let rows = batch_rows(&inputs)?;
    let started = Instant::now();
    let name = resolve(state, tenant, goal, &inputs).await?;
    record_arrival(state, tenant, goal, &req);
    runtime_ready(state.runtime)?;
    let target = match goal {
        Goal::App(_) => Target::App(&name),
        Goal::Model(_) => Target::Model(&name),
    };
    let query = Query {
        tenant,
        target,
        latency_slo_ms: req.latency_ms,
        min_accuracy: req.min_accuracy,
        max_cost: req.max_cost,
        rows,
    };
    let mut last_failure = None;
    for attempt in 0..2 {
        let snapshot = state.cluster.snapshot();
        let decision = select(&snapshot, &query, state.cluster.prices());
        if let (true, Some(budget)) = (by_deadline, req.latency_ms) {
            match &decision {
                Decision::Serve { predicted_ms, .. } if *predicted_ms > budget => {
                    return Err(Error::Unsatisfiable {
                        message: format!(
                            "the best loaded instance is predicted to take {predicted_ms:.1} ms, over the {budget:.1} ms left"
                        ),
                        suggestion: None,
                    })
                }
                // A busy loaded instance that answers sooner than the load would: served
                // there (below) when in time, without starting the load.
                Decision::Load {
                    meanwhile: Some(instance),
                    wait: false,
                    ..
                } => {
                    let predicted = snapshot
                        .instances()
                        .get(*instance)
                        .and_then(|i| snapshot.variants().get(i.variant))
                        .map_or(f64::INFINITY, |v| {
                            v.predicted_ms(snapshot.queued(*instance), rows)
                        });
                    if predicted > budget {
                        return Err(Error::Unsatisfiable {
                            message: format!(
                                "the best loaded instance is predicted to take {predicted:.1} ms, over the {budget:.1} ms left"
                            ),
                            suggestion: None,
                        });
                    }
                }
                Decision::Load { .. } => {
                    return Err(Error::Unsatisfiable {
                        message: format!(
                            "no loaded instance is predicted to answer within the {budget:.1} ms left"
                        ),
                        suggestion: None,
                    })
                }
                _ => {}
            }
        }
        let mut in_flight: Option<InFlightGuard> = None;
        let (variant_idx, worker_idx, predicted_ms, reason, load) = match decision {
            Decision::Serve {
                instance,
                variant,
                predicted_ms,
                reason,
            } => {
                let worker = snapshot.instances().get(instance).map(|i| i.worker);
                in_flight = snapshot.in_flight(instance).map(|c| c.enter(rows));
                (variant, worker, predicted_ms, reason, false)
            }
            Decision::Load {
                wait: false,
                meanwhile: Some(instance),
                variant,
                worker,
                reason,
                ..
            } => {
                // The query goes to a busy instance that answers it sooner than the load would;
                // the load goes on for the queries after it (not for a query held to a
                // deadline: its pipeline's allocation provisions).
                if !by_deadline {
                    load_in_background(state, &snapshot, variant, worker, &reason);
                }
                let inst = snapshot.instances().get(instance);
                let served_by = inst.map_or(variant, |i| i.variant);
                let predicted_ms = snapshot.variants().get(served_by).map_or(f64::NAN, |v| {
                    v.predicted_ms(snapshot.queued(instance), rows)
                });
                in_flight = snapshot.in_flight(instance).map(|c| c.enter(rows));
                (
                    served_by,
                    inst.map(|i| i.worker),
                    predicted_ms,
                    reason,
                    false,
                )
            }
            Decision::Load {
                variant,
                worker,
                predicted_ms,
                wait,
                reason,
                ..
            } => {
                let reason = if wait {
                    reason
                } else {
                    format!("{reason}; no loaded variant meets the SLO, so this query waits for the load and may miss it")
                };
                (variant, Some(worker), predicted_ms, reason, true)
            }
            Decision::Unsatisfiable { closest, reason } => {
                if let Some(why) = state.cluster.warming_up() {
                    return Err(Error::Unavailable(why));
                }
                let suggestion = closest.and_then(|c| {
                    let v = snapshot.variants().get(c.variant)?;
                    Some(serde_json::json!({
                        "variant": v.name,
                        "model": v.model,
                        "accuracy": c.accuracy,
                        "latency_ms": c.latency_ms,
                    }))
                });
                return Err(Error::Unsatisfiable {
                    message: format!("no variant meets the requirements: {reason}"),
                    suggestion,
                });
            }
            Decision::NotFound => {
                return Err(match goal {
                    Goal::App(app) => Error::NotFound(format!("application '{app}' not found")),
                    Goal::Model(m) => Error::NotFound(format!("model '{m}' not found")),
                })
            }
        };
        let (Some(v), Some(w)) = (
            snapshot.variants().get(variant_idx),
            worker_idx.and_then(|i| snapshot.workers().get(i)),
        ) else {
            return Err(Error::internal(anyhow::anyhow!(
                "the selection pointed outside its snapshot"
            )));
        };
        if attempt == 0 {
            state
                .cluster
                .demand
                .record(&v.id, rows, req.latency_ms, req.min_accuracy);
        }
        let served = state.cluster.served(&v.id).ok_or_else(|| {
            Error::Unavailable(format!("variant '{}' was just removed; retry", v.name))
        })?;
        let handle = state
            .cluster
            .handle(&w.id)
            .ok_or_else(|| Error::Unavailable("the chosen worker has just left; retry".into()))?;
        let result = async {
            if load {
                // Counted as waiting for the load until it is over, so that later queries
                // weigh the queue building up here against the running instances.
                let (waiting, started) = state.cluster.start_load(&w.id, &v.id);
                let _waiting = waiting.enter(rows);
                if started {
                    record_query_load(state, &snapshot, &served, v, w, &reason);
                }
                let lr = load_request(&served);
                if let Err(e) = handle.load(&lr).await {
                    state.cluster.load_failed(&v.id);
                    return Err(e);
                }
                state.cluster.loaded(&w.id, &lr);
            }
            // A query that waited for the load counts on the new instance from here, as the
            // others that waited with it do.
            let _running = load
                .then(|| state.cluster.enter(&w.id, &v.id, rows))
                .flatten();
            match handle
                .infer(&v.id, schema::adapt(inputs.clone(), &served.inputs))
                .await
            {
                // Unloaded on purpose (scaled down or replaced): go elsewhere.
                Err(CallError::NotLoaded) if state.cluster.is_draining(&w.id, &v.id) => {
                    Err(CallError::NotLoaded)
                }
                // Evicted since the snapshot was taken: load it again.
                Err(CallError::NotLoaded) => {
                    let lr = load_request(&served);
                    handle.load(&lr).await?;
                    state.cluster.loaded(&w.id, &lr);
                    handle
                        .infer(&v.id, schema::adapt(inputs.clone(), &served.inputs))
                        .await
                }
                other => other,
            }
        }
        .await;
        drop(in_flight);
        match result {
            Ok(outputs) => {
                let latency_ms = started.elapsed().as_secs_f64() * 1e3;
                state.cluster.online.record(latency_ms, req.latency_ms);
                // A query that waited for the load says nothing of how the instance serves.
                if let (Some(slo), false) = (req.latency_ms, load) {
                    state.cluster.record_answer(&w.id, &v.id, latency_ms, slo);
                }
                let cost = rows as f64
                    * variant_cost_per_query(v, state.cluster.prices(), rows.min(v.max_batch));
                state.usage.record(&QueryRecord {
                    tenant_id: tenant,
                    app: &served.entry.app,
                    model: &served.entry.model,
                    variant: &v.name,
                    hardware: v.hardware.as_str(),
                    rows,
                    latency_ms,
                    slo_ms: req.latency_ms,
                    cost,
                });
                metrics::histogram!("infaas_query_latency_seconds", "hardware" => v.hardware.as_str())
                    .record(latency_ms / 1e3);
                return Ok(Outcome {
                    outputs,
                    app: served.entry.app.clone(),
                    model: served.entry.model.clone(),
                    variant: v.name.clone(),
                    worker: w.id.clone(),
                    hardware: v.hardware.as_str().to_string(),
                    accuracy: v.accuracy,
                    reason,
                    predicted_ms,
                    service_ms: service_ms(v, rows),
                    latency_ms,
                    cost,
                });
            }
            Err(CallError::Overloaded(msg)) => {
                return Err(Error::RateLimited {
                    message: format!("variant '{}' is overloaded: {msg}", v.name),
                    retry_after_secs: 1,
                })
            }
            Err(CallError::BadInput(msg)) => return Err(Error::Invalid(msg)),
            Err(CallError::NotLoaded) => {
                last_failure = Some(format!(
                    "variant '{}' was unloaded during the query",
                    v.name
                ));
            }
            Err(e @ (CallError::Worker(_) | CallError::NoRoom(_) | CallError::Unauthorized(_))) => {
                let msg = e.to_string();
                tracing::warn!(worker = %w.id, variant = %v.name, attempt, error = %msg, "worker failed a query; retrying elsewhere");
                state.cluster.suspect(&w.id);
                last_failure = Some(msg);
            }
        }
    }
    Err(Error::Unavailable(format!(
        "the query failed on two workers: {}",
        last_failure.unwrap_or_default()
    )))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::cluster::fake::{values, x, FakeCluster, FakeVariant, TENANT};

    const DOUBLE: FakeVariant = FakeVariant {
        app: "double",
        model: "double",
        id: "double-slow",
        p50_ms: 50.0,
        load_ms: 1.0,
    };
    const DOUBLE_FAST: FakeVariant = FakeVariant {
        app: "double",
        model: "double-fast",
        id: "double-fast",
        p50_ms: 2.0,
        load_ms: 1.0,
    };

    /// The query path's parts over a [`FakeCluster`], with records of their own.
    pub(crate) struct QueryPlane {
        pub fake: FakeCluster,
        pub traffic: TrafficRecorder,
        pub usage: UsageRecorder,
        pub runtime: Result<PathBuf, String>,
    }

    impl QueryPlane {
        /// See [`FakeCluster::start`]; ONNX Runtime loaded.
        pub async fn start(variants: &[FakeVariant], workers: &[&[usize]]) -> QueryPlane {
            QueryPlane {
                fake: FakeCluster::start(variants, workers).await,
                traffic: TrafficRecorder::new(60),
                usage: UsageRecorder::default(),
                runtime: Ok(PathBuf::new()),
            }
        }

        pub fn parts(&self) -> QueryParts<'_> {
            QueryParts {
                cluster: &self.fake.cluster,
                db: &self.fake.db,
                traffic: &self.traffic,
                usage: &self.usage,
                runtime: &self.runtime,
            }
        }
    }

    fn slo(latency_ms: f64) -> Requirements {
        Requirements {
            latency_ms: Some(latency_ms),
            ..Requirements::default()
        }
    }

    /// A query to an application runs on the instance loaded for it and answers what the
    /// worker computed; it is recorded as the application's traffic, its variant's demand and
    /// the tenant's usage.
    #[tokio::test]
    async fn a_query_runs_on_the_loaded_instance_and_is_recorded() {
        let plane = QueryPlane::start(&[DOUBLE], &[&[0]]).await;
        let (fake, q) = (&plane.fake, plane.parts());
        let out = serve_with(
            &q,
            TENANT,
            Goal::App("double"),
            Requirements::default(),
            vec![x(&[[1.0, 2.0, 3.0, 4.0], [0.5, 0.0, -1.0, 8.0]])],
            false,
        )
        .await
        .expect("served");
        assert_eq!(
            values(&out.outputs[0]),
            vec![2.0, 4.0, 6.0, 8.0, 1.0, 0.0, -2.0, 16.0]
        );
        assert_eq!((out.app.as_str(), out.model.as_str()), ("double", "double"));
        assert_eq!((out.variant, out.worker), (DOUBLE.name(), "w0".to_string()));
        assert_eq!(out.service_ms, 50.0);
        assert_eq!(fake.workers[0].queries(), vec![DOUBLE.id.to_string()]);
        assert!(fake.workers[0].loads().is_empty());
        assert_eq!(
            plane
                .traffic
                .export(TENANT, Some("double"), 1)
                .arrivals
                .len(),
            1
        );
        let rows = plane.usage.pending_rows();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(
            (
                rows[0].app.as_str(),
                rows[0].variant.clone(),
                rows[0].requests,
                rows[0].rows
            ),
            ("double", DOUBLE.name(), 1, 2)
        );
    }

    /// Without ONNX Runtime the query path refuses queries (503) before it selects anything.
    #[tokio::test]
    async fn no_query_runs_without_onnx_runtime() {
        let mut plane = QueryPlane::start(&[DOUBLE], &[&[0]]).await;
        plane.runtime = Err("libonnxruntime.so: not found".to_string());
        let (fake, q) = (&plane.fake, plane.parts());
        let err = serve_with(
            &q,
            TENANT,
            Goal::Model("double"),
            Requirements::default(),
            vec![x(&[[1.0; 4]])],
            false,
        )
        .await
        .err()
        .expect("refused");
        assert!(
            matches!(&err, Error::Unavailable(m) if m.contains("not found")),
            "{err:?}"
        );
        assert!(fake.workers[0].queries().is_empty());
    }

    /// A worker that fails a query is taken out of the index and the query goes elsewhere:
    /// the variant is loaded on the other worker and answers there.
    #[tokio::test]
    async fn a_failed_worker_is_left_and_the_query_retried_on_another() {
        let plane = QueryPlane::start(&[DOUBLE], &[&[0], &[]]).await;
        let (fake, q) = (&plane.fake, plane.parts());
        fake.workers[0]
            .failing
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let out = serve_with(
            &q,
            TENANT,
            Goal::App("double"),
            Requirements::default(),
            vec![x(&[[1.0, 1.0, 1.0, 1.0]])],
            false,
        )
        .await
        .expect("served on the second worker");
        assert_eq!(out.worker, "w1");
        assert_eq!(values(&out.outputs[0]), vec![2.0; 4]);
        assert_eq!(fake.workers[0].queries(), vec![DOUBLE.id.to_string()]);
        assert_eq!(fake.workers[1].loads(), vec![DOUBLE.id.to_string()]);
        assert_eq!(fake.workers[1].queries(), vec![DOUBLE.id.to_string()]);
        assert!(
            fake.cluster.handle("w0").is_none(),
            "the failed worker is out"
        );
    }

    /// Under an SLO that only an unloaded variant meets, a query loads it and waits; held to
    /// a deadline instead, it fails at once and nothing is loaded or run.
    #[tokio::test]
    async fn a_deadline_fails_at_once_where_a_query_would_wait_for_a_load() {
        let plane = QueryPlane::start(&[DOUBLE, DOUBLE_FAST], &[&[0]]).await;
        let (fake, q) = (&plane.fake, plane.parts());
        let input = || vec![x(&[[3.0, 0.0, 0.0, 1.0]])];

        let err = serve_with(&q, TENANT, Goal::App("double"), slo(20.0), input(), true)
            .await
            .err()
            .expect("no loaded instance makes the deadline");
        assert!(
            matches!(&err, Error::Unsatisfiable { message, .. } if message.contains("20.0 ms")),
            "{err:?}"
        );
        assert!(fake.workers[0].loads().is_empty());
        assert!(fake.workers[0].queries().is_empty());

        let out = serve_with(&q, TENANT, Goal::App("double"), slo(20.0), input(), false)
            .await
            .expect("served after the load");
        assert_eq!(out.variant, DOUBLE_FAST.name());
        assert_eq!(fake.workers[0].loads(), vec![DOUBLE_FAST.id.to_string()]);
        assert_eq!(values(&out.outputs[0]), vec![6.0, 0.0, 0.0, 2.0]);
    }
}
