//! Worker-facing routes of the controller (cluster token), and the tenant views of
//! workers and usage.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use infaas_core::time::now_ms;
use infaas_protocol::v1::{ClusterStatus, LeaderStatus, ReplicaStatus};
use infaas_worker::{Heartbeat, HeartbeatAnswer};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json, Query};
use crate::state::AppState;
use infaas_worker::server::constant_time_eq;

/// `POST /cluster/heartbeat`: a worker process reports itself (and registers when new); the
/// answer lists every controller replica, which the worker reports to as well.
pub async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(beat): Json<Heartbeat>,
) -> ApiResult<Json<HeartbeatAnswer>> {
    let given = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if !constant_time_eq(given.as_bytes(), state.cluster_token.as_bytes()) {
        return Err(ApiError::Unauthorized(
            "missing or wrong cluster token".into(),
        ));
    }
    if beat.worker.address.is_none() {
        return Err(ApiError::BadRequest(
            "a worker heartbeat needs the worker's address".into(),
        ));
    }
    state.cluster.on_heartbeat(beat, &state.cluster_token);
    Ok(Json(HeartbeatAnswer {
        controllers: state.leadership.peers(),
    }))
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct InstanceView {
    pub variant: String,
    /// `active`, `overloaded`, `interfered` or `inactive`.
    pub state: String,
    pub threads: usize,
    pub max_batch: usize,
    pub queue_rows: usize,
    /// Rows served per second over the last window.
    pub qps: f64,
    /// Whether its threads count in the worker's `busy_threads`.
    pub busy: bool,
    pub requests_total: u64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// Session run time per batch over the last 1,000 runs (the service time; the rest of
    /// `latency_*` is waiting in the queue and on the way there), in ms.
    pub exec_p50_ms: f64,
    pub exec_p99_ms: f64,
    /// Batch sizes served: `[batch rows, count]`.
    // Described as arrays of integers: SDK generators do not read tuple schemas.
    #[schema(value_type = Vec<Vec<u64>>)]
    pub batch_histogram: Vec<(usize, u64)>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct WorkerView {
    pub id: String,
    pub name: String,
    pub address: Option<String>,
    pub alive: bool,
    pub hardware: Vec<String>,
    /// The worker's GPUs (at most one for now); a simulated one runs GPU variants on the CPU
    /// and answers after the latency of a measured profile.
    pub gpus: Vec<GpuView>,
    pub cores: usize,
    pub thread_budget: usize,
    pub threads_used: usize,
    pub memory_budget_bytes: u64,
    pub memory_used_bytes: u64,
    /// Busy fraction of the cores, in [0, 1].
    pub utilisation: f64,
    /// The worker process's own CPU time as a fraction of its cores, in [0, 1] (its instances
    /// and, for the embedded worker, the controller's serving edge): at
    /// `autoscale`'s self-contention mark (0.85) a slow instance there is not interference.
    pub own_utilisation: f64,
    /// Intra-op threads of the worker's busy CPU instances, every tenant's (served within the
    /// last 5 s, or with rows queued or a batch running): capacity is counted in cores, and
    /// no load for queries nor added threads take this above `cores`.
    pub busy_threads: usize,
    pub last_heartbeat_ms_ago: u64,
    /// The caller's instances on this worker (other tenants' are not shown).
    pub instances: Vec<InstanceView>,
    /// The caller's variants being loaded on this worker for queries that wait for them, the
    /// oldest first (other tenants' are not shown). A load leaves this list when its instance
    /// appears in `instances`, or when it fails.
    #[serde(default)]
    pub loading: Vec<LoadingView>,
}

/// A load under way for queries (selection sends further queries for the variant to it, and
/// counts the rows already waiting when it predicts their latency).
#[derive(Serialize, Deserialize, ToSchema)]
pub struct LoadingView {
    pub variant: String,
    /// Milliseconds since the load started.
    pub started_ms_ago: u64,
    /// Rows of queries waiting for the load now.
    pub waiting_rows: usize,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct GpuView {
    /// `true`: not a real GPU (see docs/operations.md, "Simulated GPU workers").
    pub simulated: bool,
    /// The latency profile a simulated GPU follows (`PATH` or `PATH#MODEL#ACCEL`).
    pub profile: Option<String>,
    /// The profile's median latency at batch 1, in milliseconds.
    pub profile_p50_ms_batch_1: Option<f64>,
}

fn gpus(worker: &infaas_worker::WorkerInfo) -> Vec<GpuView> {
    match &worker.simulated_gpu {
        Some(p) => vec![GpuView {
            simulated: true,
            profile: Some(p.source.clone()),
            profile_p50_ms_batch_1: Some(p.p50_ms(1)),
        }],
        None if worker.hardware.contains(&infaas_core::HardwareKind::Gpu) => vec![GpuView {
            simulated: false,
            profile: None,
            profile_p50_ms_batch_1: None,
        }],
        None => Vec::new(),
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct WorkerList {
    pub workers: Vec<WorkerView>,
}

/// Workers with their hardware, utilisation and the caller's instances.
#[utoipa::path(get, path = "/v1/workers", tag = "cluster", security(("bearer" = [])),
    responses((status = 200, body = WorkerList), (status = 401, body = ErrorBody)))]
pub async fn workers(State(state): State<AppState>, p: Principal) -> ApiResult<Json<WorkerList>> {
    Ok(Json(WorkerList {
        workers: worker_views(&state, &p.tenant_id),
    }))
}

/// Every worker, by name, with the instances of `tenant_id`'s variants only.
pub fn worker_views(state: &AppState, tenant_id: &str) -> Vec<WorkerView> {
    let tenants_variant = |variant_id: &str| {
        state
            .cluster
            .served(variant_id)
            .filter(|s| s.entry.tenant_id == tenant_id)
    };
    let loads = state.cluster.pending_loads();
    let mut workers: Vec<WorkerView> = state
        .cluster
        .workers_view()
        .into_iter()
        .map(|(beat, alive, ago)| WorkerView {
            instances: beat
                .instances
                .iter()
                .filter(|i| tenants_variant(&i.variant_id).is_some())
                .map(|i| InstanceView {
                    variant: i.variant_name.clone(),
                    state: state
                        .cluster
                        .instance_state(&beat.worker.id, &i.variant_id)
                        .as_str()
                        .into(),
                    threads: i.threads,
                    max_batch: i.max_batch,
                    queue_rows: i.queue_rows,
                    qps: i.qps,
                    busy: infaas_control::cluster::is_busy(i),
                    requests_total: i.requests_total,
                    latency_p50_ms: i.latency_p50_ms,
                    latency_p99_ms: i.latency_p99_ms,
                    exec_p50_ms: i.exec_p50_ms,
                    exec_p99_ms: i.exec_p99_ms,
                    batch_histogram: i.batch_histogram.clone(),
                })
                .collect(),
            loading: loads
                .iter()
                .filter(|l| l.worker_id == beat.worker.id)
                .filter_map(|l| {
                    Some(LoadingView {
                        variant: tenants_variant(&l.variant_id)?.entry.variant.name.clone(),
                        started_ms_ago: l.elapsed.as_millis().try_into().unwrap_or(u64::MAX),
                        waiting_rows: l.waiting_rows,
                    })
                })
                .collect(),
            id: beat.worker.id.clone(),
            name: beat.worker.name.clone(),
            address: beat.worker.address.clone(),
            alive,
            hardware: beat
                .worker
                .hardware
                .iter()
                .map(|h| h.as_str().to_string())
                .collect(),
            gpus: gpus(&beat.worker),
            cores: beat.worker.cores,
            thread_budget: beat.worker.thread_budget,
            threads_used: beat.threads_used,
            memory_budget_bytes: beat.worker.memory_budget_bytes,
            memory_used_bytes: beat.memory_used_bytes,
            utilisation: beat.utilisation,
            own_utilisation: beat.own_utilisation,
            busy_threads: infaas_control::cluster::busy_threads(&beat, |v| {
                state.cluster.hardware_of(v) == infaas_core::HardwareKind::Cpu
            }),
            last_heartbeat_ms_ago: ago,
        })
        .collect();
    workers.sort_by(|a, b| a.name.cmp(&b.name));
    workers
}

#[derive(Deserialize, utoipa::IntoParams)]
pub struct UsageParams {
    /// How many past minutes to report (default 60, at most 10,080).
    #[param(minimum = 1, maximum = 10080)]
    pub minutes: Option<i64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct UsageMinute {
    /// Start of the minute, milliseconds since the Unix epoch.
    pub minute: i64,
    pub model: String,
    pub variant: String,
    pub hardware: String,
    pub requests: i64,
    pub rows: i64,
    pub slo_met: i64,
    pub slo_missed: i64,
    pub mean_latency_ms: f64,
    pub max_latency_ms: f64,
    pub cost: f64,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct UsageReport {
    pub app: String,
    pub requests: i64,
    /// Fraction of queries that met their SLO (queries without an SLO count as met).
    pub slo_attainment: Option<f64>,
    pub cost: f64,
    pub minutes: Vec<UsageMinute>,
}

/// Per-minute usage of an application: queries, SLO attainment, latency, cost by variant.
#[utoipa::path(get, path = "/v1/apps/{app}/usage", tag = "apps", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name"), UsageParams),
    responses((status = 200, body = UsageReport), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn usage(
    State(state): State<AppState>,
    p: Principal,
    Path(app): Path<String>,
    Query(q): Query<UsageParams>,
) -> ApiResult<Json<UsageReport>> {
    let minutes = q.minutes.unwrap_or(60);
    if !(1..=10_080).contains(&minutes) {
        return Err(ApiError::BadRequest(format!(
            "minutes must be between 1 and 10080, not {minutes}"
        )));
    }
    let apps = state.db.list_apps(&p.tenant_id).await?;
    if !apps.iter().any(|(a, _)| a.name == app) {
        return Err(ApiError::NotFound(format!("application '{app}' not found")));
    }
    state.usage.flush(&state.db).await;
    let since = (now_ms() / 60_000 - minutes) * 60_000;
    let rows = state.db.usage(&p.tenant_id, &app, since).await?;
    let requests: i64 = rows.iter().map(|r| r.requests).sum();
    let met: i64 = rows.iter().map(|r| r.slo_met).sum();
    Ok(Json(UsageReport {
        app,
        requests,
        slo_attainment: (requests > 0).then(|| met as f64 / requests as f64),
        cost: rows.iter().map(|r| r.cost).sum(),
        minutes: rows
            .into_iter()
            .map(|r| UsageMinute {
                minute: r.minute,
                mean_latency_ms: if r.requests > 0 {
                    r.latency_sum_ms / r.requests as f64
                } else {
                    0.0
                },
                max_latency_ms: r.latency_max_ms,
                model: r.model,
                variant: r.variant,
                hardware: r.hardware,
                requests: r.requests,
                rows: r.rows,
                slo_met: r.slo_met,
                slo_missed: r.slo_missed,
                cost: r.cost,
            })
            .collect(),
    }))
}

/// Forecast of an application's arrival rate (Themis §5.1.3): the queries that arrived per
/// second over the last ten minutes, the rates predicted for them one and ten seconds ahead,
/// the highest rate forecast over the next ten seconds and the errors of both horizons.
/// Points are `[second since the Unix epoch, queries/s]`; errors are fractions.
#[derive(Serialize, Deserialize, ToSchema)]
pub struct AppForecast {
    pub app: String,
    /// The forecasting model in use (it is re-fitted on the application's history).
    pub model: String,
    /// Seconds ahead of `predicted_10s` and `max_next_10s`.
    pub horizon_s: usize,
    #[schema(value_type = Vec<Vec<f64>>)]
    pub observed: Vec<(i64, f64)>,
    /// The rate predicted for each second one second before it.
    #[schema(value_type = Vec<Vec<f64>>)]
    pub predicted_1s: Vec<(i64, f64)>,
    /// The rate predicted for each second ten seconds before it (including seconds to come).
    #[schema(value_type = Vec<Vec<f64>>)]
    pub predicted_10s: Vec<(i64, f64)>,
    pub max_next_10s: f64,
    /// Mean absolute percentage error of the 1-second predictions (null before there is one).
    pub mape_1s: Option<f64>,
    pub mape_10s: Option<f64>,
}

/// The forecast of `app` of `tenant_id` (an empty one before any query arrived).
pub fn forecast_view(
    state: &AppState,
    tenant_id: &str,
    app: &str,
) -> infaas_control::forecasts::ForecastView {
    state
        .forecasts
        .view(tenant_id, app)
        .unwrap_or_else(|| infaas_control::forecasts::ForecastView::empty(state.forecasts.config()))
}

/// [`forecast_view`] as the API answers it.
pub fn app_forecast(state: &AppState, tenant_id: &str, app: &str) -> AppForecast {
    let v = forecast_view(state, tenant_id, app);
    AppForecast {
        app: app.to_string(),
        model: v.model,
        horizon_s: v.horizon_s,
        observed: v.observed,
        predicted_1s: v.predicted_1s,
        predicted_10s: v.predicted_10s,
        max_next_10s: v.max_next_10s,
        mape_1s: v.mape_1s,
        mape_10s: v.mape_10s,
    }
}

/// Observed and forecast arrival rates of an application, with the forecasts' errors.
#[utoipa::path(get, path = "/v1/apps/{app}/forecast", tag = "apps", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name")),
    responses((status = 200, body = AppForecast), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn forecast(
    State(state): State<AppState>,
    p: Principal,
    Path(app): Path<String>,
) -> ApiResult<Json<AppForecast>> {
    let apps = state.db.list_apps(&p.tenant_id).await?;
    if !apps.iter().any(|(a, _)| a.name == app) {
        return Err(ApiError::NotFound(format!("application '{app}' not found")));
    }
    Ok(Json(app_forecast(&state, &p.tenant_id, &app)))
}

/// The controller replicas on this database and the one that leads the cluster's loops.
#[utoipa::path(get, path = "/v1/cluster", tag = "cluster", security(("bearer" = [])),
    responses((status = 200, body = ClusterStatus), (status = 401, body = ErrorBody)))]
pub async fn cluster(
    State(state): State<AppState>,
    _p: Principal,
) -> ApiResult<Json<ClusterStatus>> {
    Ok(Json(cluster_status(&state).await?))
}

/// What `GET /v1/cluster` and the dashboard show.
pub async fn cluster_status(state: &AppState) -> Result<ClusterStatus, infaas_control::Error> {
    let leadership = &state.leadership;
    let settings = leadership.settings();
    let view = leadership.view();
    // An announcement older than two lease periods belongs to a replica that is gone.
    let within = i64::try_from(2 * settings.ttl.as_millis()).unwrap_or(i64::MAX);
    let rows = state
        .db
        .live_replicas(within)
        .await
        .map_err(infaas_control::Error::from)?;
    let replicas = rows
        .into_iter()
        .map(|r| ReplicaStatus {
            leader: view.leader.as_deref() == Some(r.id.as_str()),
            id: r.id,
            address: r.address,
            started_ms: r.started_ms,
            seen_ms: r.seen_ms,
        })
        .collect();
    Ok(ClusterStatus {
        replica: view.replica.clone(),
        is_leader: view.is_leader,
        leader: LeaderStatus {
            replica: view.leader.clone(),
            address: view.leader_address.clone(),
            token: view.token,
        },
        leadership_changes: view.changes,
        lease_ttl_ms: u64::try_from(settings.ttl.as_millis()).unwrap_or(u64::MAX),
        lease_renew_ms: u64::try_from(settings.renew_every.as_millis()).unwrap_or(u64::MAX),
        replicas,
    })
}
