//! `GET /v1/apps/{app}/scaling-events`: the autoscaler's decisions for one application.

use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json, Query};
use crate::state::AppState;

#[derive(Deserialize, utoipa::IntoParams)]
pub struct ScalingParams {
    /// Most events to return, newest first (1 to 1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<i64>,
    /// Only events at or after this time, milliseconds since the Unix epoch (default 0).
    #[param(minimum = 0)]
    pub since_ms: Option<i64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ScalingEvent {
    pub id: String,
    /// When the action completed (or failed), milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// `replicate`, `upgrade`, `downgrade`, `remove-replica`, `add-threads`, `remove-threads`, `rebalance`,
    /// `migrate`, `add-worker`, `remove-worker`, and `load-for-queries` (a load the query path
    /// started for queries no loaded instance could answer in time); a failed action ends in
    /// `-failed`.
    pub action: String,
    /// Why, with the figures the decision was taken on.
    pub reason: String,
    /// The variant loaded (or removed).
    pub variant: Option<String>,
    /// The worker the action ran on (or the worker added or removed).
    pub worker: Option<String>,
    /// Price per second of the resources concerned before the action (the model's instances
    /// for model actions, the instance for vertical ones, the fleet for worker ones).
    pub cost_before_per_s: Option<f64>,
    pub cost_after_per_s: Option<f64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ScalingEvents {
    pub app: String,
    pub events: Vec<ScalingEvent>,
}

/// Scaling decisions concerning an application, newest first: replicas added or removed,
/// upgrades and downgrades, vertical scaling, migrations, workers added or removed for it.
#[utoipa::path(get, path = "/v1/apps/{app}/scaling-events", tag = "apps", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name"), ScalingParams),
    responses((status = 200, body = ScalingEvents), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn scaling_events(
    State(state): State<AppState>,
    p: Principal,
    Path(app): Path<String>,
    Query(q): Query<ScalingParams>,
) -> ApiResult<Json<ScalingEvents>> {
    let limit = q.limit.unwrap_or(100);
    if !(1..=1000).contains(&limit) {
        return Err(ApiError::BadRequest(format!(
            "limit must be between 1 and 1000, not {limit}"
        )));
    }
    let since = q.since_ms.unwrap_or(0);
    if since < 0 {
        return Err(ApiError::BadRequest(format!(
            "since_ms must be a time in milliseconds since the Unix epoch, not {since}"
        )));
    }
    let apps = state.db.list_apps(&p.tenant_id).await?;
    if !apps.iter().any(|(a, _)| a.name == app) {
        return Err(ApiError::NotFound(format!("application '{app}' not found")));
    }
    let rows = state
        .db
        .app_scaling_events(&p.tenant_id, &app, since, limit)
        .await?;
    Ok(Json(ScalingEvents {
        app,
        events: rows
            .into_iter()
            .map(|e| ScalingEvent {
                id: e.id,
                at_ms: e.created_at_ms,
                action: e.action,
                reason: e.reason,
                variant: e.variant,
                worker: e.worker_id,
                cost_before_per_s: e.cost_before_per_s,
                cost_after_per_s: e.cost_after_per_s,
            })
            .collect(),
    }))
}
