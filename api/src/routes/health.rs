//! Liveness, readiness and metrics.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde::Serialize;

use crate::state::AppState;

#[derive(Serialize, utoipa::ToSchema)]
pub struct Health {
    /// `ok` while the process is up.
    pub status: String,
    pub version: String,
}

/// Liveness: answers while the process is up.
#[utoipa::path(get, path = "/healthz", tag = "health",
    responses((status = 200, description = "The process is up", body = Health)))]
pub async fn healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".into(),
        version: env!("CARGO_PKG_VERSION").into(),
    })
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    pub status: String,
    /// `ok` or the error of the database check.
    pub database: String,
    /// `ok` or the error of the object-store check.
    pub object_store: String,
    /// `ok`, or why this controller cannot serve queries yet (it started moments ago and no
    /// worker that can host instances has reported to it).
    pub workers: String,
    /// This controller replica's id.
    pub replica: String,
    /// This replica holds the leader lease (runs the cluster's autoscaling, tuner and
    /// overload loops); every replica serves queries alike.
    pub leader: bool,
}

/// Readiness: the database and the object store answer, and the controller is not warming up
/// (it has heard from a worker that can host instances, or has been up for two liveness
/// timeouts).
#[utoipa::path(get, path = "/readyz", tag = "health",
    responses((status = 200, description = "Ready to serve", body = Readiness),
              (status = 503, description = "A dependency does not answer, or the controller is warming up", body = Readiness)))]
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (db, objects) = tokio::join!(state.db.ping(), state.objects.check());
    let describe = |r: Result<(), infaas_store::StoreError>| match r {
        Ok(()) => "ok".to_string(),
        Err(e) => e.to_string(),
    };
    let warming = state.cluster.warming_up();
    let ready = db.is_ok() && objects.is_ok() && warming.is_none();
    let body = Readiness {
        status: if ready { "ready" } else { "not_ready" }.into(),
        database: describe(db),
        object_store: describe(objects),
        workers: warming.unwrap_or_else(|| "ok".into()),
        replica: state.leadership.replica().to_string(),
        leader: state.leadership.is_leader(),
    };
    let code = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (code, axum::Json(body))
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format", body = String, content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let body = state
        .metrics
        .as_ref()
        .map(|h| h.render())
        .unwrap_or_default();
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        body,
    )
}

/// The landing page (HTML): connections and health at a glance.
pub async fn index(State(state): State<AppState>) -> axum::response::Response {
    let (db, objects) = tokio::join!(state.db.ping(), state.objects.check());
    let page = infaas_web::IndexPage {
        version: env!("CARGO_PKG_VERSION").into(),
        database_kind: state.db.kind().as_str().into(),
        database_ok: db.is_ok(),
        database_status: db
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "ok".into()),
        object_store: state.objects.describe(),
        object_store_ok: objects.is_ok(),
        object_store_status: objects
            .err()
            .map(|e| e.to_string())
            .unwrap_or_else(|| "ok".into()),
        runtime_ok: state.runtime.is_ok(),
        runtime: match &state.runtime {
            Ok(p) => p.display().to_string(),
            Err(e) => e.clone(),
        },
    };
    match page.render_html() {
        Ok(html) => axum::response::Html(html).into_response(),
        Err(e) => crate::error::ApiError::internal(e).into_response(),
    }
}
