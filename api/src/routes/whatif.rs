//! What-if planning (`/v1/whatif`): SIMULATED runs of a trace on the tenant's applications
//! under the simulator's policies, and the tenant's recorded traffic as a trace
//! (`/v1/traces/recorded`). Thin handlers over `infaas_control::whatif`.

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use infaas_protocol::v1::{WhatIfPolicyResult, WhatIfRequest, WhatIfRun, WhatIfRunList};
use infaas_web::whatif::{plot_svg, PolicyLines};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::Principal;
use crate::error::{ApiResult, ErrorBody, Json, Query};
use crate::state::AppState;
use infaas_control::whatif;

#[derive(Deserialize, IntoParams)]
pub struct RecordedParams {
    /// One application (default: every application of the tenant).
    #[param(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    pub app: Option<String>,
    /// How many past minutes (default 60, at most 10,080; the platform keeps
    /// `traffic_horizon_minutes`, default 60).
    #[param(minimum = 1, maximum = 10080)]
    pub minutes: Option<u64>,
}

/// The tenant's recorded traffic as a trace in the simulator's CSV format
/// (`time_ms,app,slo_ms,min_accuracy`): per second, the queries that arrived, spread evenly
/// inside the second, with the second's strictest SLO and highest minimum accuracy; times
/// from the first second exported. A header only when nothing was recorded.
#[utoipa::path(get, path = "/v1/traces/recorded", tag = "whatif", operation_id = "recorded_trace",
    security(("bearer" = [])),
    params(RecordedParams),
    responses((status = 200, description = "The trace", content_type = "text/csv", body = String),
              (status = 400, description = "`minutes` outside 1-10080 or a malformed parameter", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "Unknown application", body = ErrorBody)))]
pub async fn recorded(
    State(state): State<AppState>,
    p: Principal,
    Query(q): Query<RecordedParams>,
) -> ApiResult<Response> {
    let csv = whatif::recorded_csv(
        &state,
        &p.tenant_id,
        q.app.as_deref(),
        q.minutes.unwrap_or(60),
    )
    .await?;
    Ok(([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], csv).into_response())
}

/// Starts a SIMULATED what-if run: the trace (recorded traffic, a CSV trace or a
/// generator) replayed on the tenant's applications, with the profiles the platform
/// measured for their variants, under each policy. Limits: `whatif.max_csv_bytes` (8 MiB)
/// of CSV, `whatif.max_queries` (250,000) queries, `whatif.max_duration_s` (7,200 s) of
/// trace, 1 to 4 distinct policies, `whatif.max_unfinished_per_tenant` (1) run queued or
/// running per tenant.
#[utoipa::path(post, path = "/v1/whatif", tag = "whatif", operation_id = "start_whatif",
    security(("bearer" = [])),
    request_body = WhatIfRequest,
    responses((status = 202, description = "Queued; follow it with GET /v1/whatif/{id}", body = WhatIfRun),
              (status = 400, description = "A malformed body, an unknown or repeated policy, a bad generator spec, a CSV line that does not parse (the message names the line), an empty CSV trace, cluster sizes out of range (the message names the field)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 413, description = "The body is over the route's limit, or the CSV trace over `whatif.max_csv_bytes` (default 8 MiB)", body = ErrorBody),
              (status = 422, description = "A simulated cluster without a worker (`cpu_workers` 0 and `gpu_workers` 0, given or the live GPU workers; the message names both); the trace names an application the tenant does not have or one without profiled variants; no traffic recorded; a generator that makes no query; a trace over `whatif.max_queries` (default 250,000) queries or `whatif.max_duration_s` (default 7,200 s)", body = ErrorBody),
              (status = 429, description = "The tenant already has `whatif.max_unfinished_per_tenant` (default 1) runs queued or running, or its rate limit is exceeded; retry after `Retry-After` seconds", body = ErrorBody)))]
pub async fn start(
    State(state): State<AppState>,
    p: Principal,
    Json(req): Json<WhatIfRequest>,
) -> ApiResult<(StatusCode, Json<WhatIfRun>)> {
    let run = whatif::submit(&state, &p.tenant_id, req).await?;
    Ok((StatusCode::ACCEPTED, Json(run)))
}

/// The tenant's what-if runs, newest first (the last 100), without results.
#[utoipa::path(get, path = "/v1/whatif", tag = "whatif", operation_id = "list_whatif",
    security(("bearer" = [])),
    responses((status = 200, body = WhatIfRunList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, p: Principal) -> ApiResult<Json<WhatIfRunList>> {
    Ok(Json(WhatIfRunList {
        runs: whatif::list(&state, &p.tenant_id).await?,
    }))
}

/// A what-if run: status, progress per policy, and once it has succeeded every policy's
/// SIMULATED totals, per-application totals and per-second series.
#[utoipa::path(get, path = "/v1/whatif/{id}", tag = "whatif", operation_id = "show_whatif",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, body = WhatIfRun), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<WhatIfRun>> {
    Ok(Json(whatif::get(&state, &p.tenant_id, &id).await?))
}

/// A succeeded run's SIMULATED cost per second, SLO attainment and accuracy over time, one
/// line per policy, as an SVG document (what `infaas sim --plot` draws).
#[utoipa::path(get, path = "/v1/whatif/{id}/plot.svg", tag = "whatif", operation_id = "plot_whatif",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Run id")),
    responses((status = 200, description = "The plot", content_type = "image/svg+xml", body = String),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "The run has not succeeded (queued, running or failed)", body = ErrorBody)))]
pub async fn plot(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let results = whatif::results(&state, &p.tenant_id, &id).await?;
    Ok((
        [(header::CONTENT_TYPE, "image/svg+xml")],
        plot_svg(&plot_lines(&results)),
    )
        .into_response())
}

/// Deletes a run; one under way stops after the policy it is simulating.
#[utoipa::path(delete, path = "/v1/whatif/{id}", tag = "whatif", operation_id = "delete_whatif",
    security(("bearer" = [])),
    params(("id" = String, Path, description = "Run id")),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    whatif::delete(&state, &p.tenant_id, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The per-second lines of a run's results, for its plot.
pub(crate) fn plot_lines(results: &[WhatIfPolicyResult]) -> Vec<PolicyLines> {
    results
        .iter()
        .map(|r| PolicyLines {
            policy: r.policy.clone(),
            cost_per_s: r.series.iter().map(|p| p.cost_per_s).collect(),
            slo_attainment: r.series.iter().map(|p| p.slo_attainment).collect(),
            mean_accuracy: r.series.iter().map(|p| p.mean_accuracy).collect(),
        })
        .collect()
}
