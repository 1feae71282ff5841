//! `infaas worker --controller URL`: a worker in its own process. It serves load, unload
//! and infer commands from the controller over HTTP and sends a heartbeat about every
//! second. Both directions carry the cluster token.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use infaas_store::{open_object_store, ObjectStoreConfig};
use infaas_worker::{LoadRequest, WorkerError, WorkerNode};
use tokio_util::sync::CancellationToken;

use crate::config::Config;

#[derive(Clone)]
struct WorkerState {
    node: Arc<WorkerNode>,
    token: Arc<String>,
}

fn error(status: StatusCode, message: impl ToString) -> Response {
    (
        status,
        axum::Json(serde_json::json!({ "error": message.to_string(), "error_type": "worker" })),
    )
        .into_response()
}

fn authorised(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| constant_time_eq(t.as_bytes(), token.as_bytes()))
}

/// Compares secrets without an early exit that would leak their common prefix length.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn worker_error(e: WorkerError) -> Response {
    let status = match &e {
        WorkerError::NotLoaded(_) => StatusCode::NOT_FOUND,
        WorkerError::BudgetExceeded { .. } | WorkerError::NoHardware(_) => StatusCode::CONFLICT,
        WorkerError::Instance(infaas_executors::batcher::InstanceError::QueueFull { .. }) => {
            StatusCode::TOO_MANY_REQUESTS
        }
        WorkerError::Instance(infaas_executors::batcher::InstanceError::BadInput(_)) => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, e)
}

async fn load(
    State(s): State<WorkerState>,
    headers: HeaderMap,
    axum::Json(req): axum::Json<LoadRequest>,
) -> Response {
    if !authorised(&headers, &s.token) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong cluster token");
    }
    match s.node.load(req).await {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => worker_error(e),
    }
}

#[derive(serde::Deserialize)]
struct UnloadRequest {
    variant_id: String,
}

async fn unload(
    State(s): State<WorkerState>,
    headers: HeaderMap,
    axum::Json(req): axum::Json<UnloadRequest>,
) -> Response {
    if !authorised(&headers, &s.token) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong cluster token");
    }
    let was = s.node.unload(&req.variant_id);
    axum::Json(serde_json::json!({ "unloaded": was })).into_response()
}

#[derive(serde::Deserialize)]
struct ResizeRequest {
    variant_id: String,
    threads: usize,
}

async fn resize(
    State(s): State<WorkerState>,
    headers: HeaderMap,
    axum::Json(req): axum::Json<ResizeRequest>,
) -> Response {
    if !authorised(&headers, &s.token) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong cluster token");
    }
    match s.node.resize(&req.variant_id, req.threads).await {
        Ok(report) => axum::Json(report).into_response(),
        Err(e) => worker_error(e),
    }
}

async fn infer(
    State(s): State<WorkerState>,
    Path(variant_id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorised(&headers, &s.token) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong cluster token");
    }
    let header_len = headers
        .get("Inference-Header-Content-Length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let Some(header_len) = header_len else {
        return error(
            StatusCode::BAD_REQUEST,
            "missing Inference-Header-Content-Length",
        );
    };
    let inputs = match infaas_protocol::decode_tensors(&body, header_len) {
        Ok(t) => t,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    match s.node.infer(&variant_id, inputs).await {
        Ok(outputs) => match infaas_protocol::encode_tensors(&outputs) {
            Ok((body, header_len)) => (
                [
                    ("Inference-Header-Content-Length", header_len.to_string()),
                    ("Content-Type", "application/octet-stream".to_string()),
                ],
                body,
            )
                .into_response(),
            Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e),
        },
        Err(e) => worker_error(e),
    }
}

async fn heartbeat_now(State(s): State<WorkerState>, headers: HeaderMap) -> Response {
    if !authorised(&headers, &s.token) {
        return error(StatusCode::UNAUTHORIZED, "missing or wrong cluster token");
    }
    axum::Json(s.node.heartbeat()).into_response()
}

/// Runs the worker process until SIGTERM / Ctrl-C.
pub async fn run(config: Config, controller: String) -> anyhow::Result<()> {
    let token = config.cluster_token.clone().context(
        "a worker needs the cluster token: pass --cluster-token or INFAAS_CLUSTER_TOKEN (print it on the controller with `infaas admin cluster-token`)",
    )?;
    if let Err(e) = infaas_executors::runtime::init_runtime(config.ort_dylib_path.as_deref()) {
        anyhow::bail!("ONNX Runtime is not available: {e}");
    }
    let store_cfg = ObjectStoreConfig::parse(
        &config.object_store(),
        config.s3_endpoint.clone(),
        config.s3_region.clone(),
    )?;
    let objects = open_object_store(&store_cfg).await?;
    let listener = tokio::net::TcpListener::bind(config.worker_listen)
        .await
        .with_context(|| format!("binding {}", config.worker_listen))?;
    let addr = listener.local_addr()?;
    let id = uuid::Uuid::new_v4().to_string();
    let name = config
        .worker_name
        .clone()
        .unwrap_or_else(|| format!("worker-{}", &id[..8]));
    let node = Arc::new(WorkerNode::new(
        super::node_config(
            &config,
            id.clone(),
            name,
            Some(
                config
                    .worker_advertise_url
                    .clone()
                    .unwrap_or_else(|| format!("http://{addr}")),
            ),
        )
        .context("the simulated GPU's latency profile")?,
        objects,
    ));
    let state = WorkerState {
        node: node.clone(),
        token: Arc::new(token.clone()),
    };
    let app = Router::new()
        .route("/cluster/load", post(load))
        .route("/cluster/unload", post(unload))
        .route("/cluster/resize", post(resize))
        .route("/cluster/infer/{variant_id}", post(infer))
        .route("/cluster/heartbeat", get(heartbeat_now))
        .route("/healthz", get(|| async { "ok" }))
        .layer(axum::extract::DefaultBodyLimit::max(
            config.max_body_bytes.max(64 << 20),
        ))
        .with_state(state);
    let shutdown = CancellationToken::new();
    let server_token = shutdown.clone();
    let server = tokio::spawn(async move {
        axum::serve(crate::server::no_delay(listener), app)
            .with_graceful_shutdown(async move { server_token.cancelled().await })
            .await
    });
    tracing::info!(%addr, controller = %controller, "infaas worker listening on http://{addr}");
    let beats = tokio::spawn(heartbeat_loop(
        node.clone(),
        controller,
        token,
        shutdown.clone(),
    ));
    crate::server::shutdown_signal().await;
    tracing::info!("worker shutting down");
    shutdown.cancel();
    node.shutdown();
    let _ = beats.await;
    let _ = tokio::time::timeout(Duration::from_secs(config.shutdown_grace_secs), server).await;
    Ok(())
}

async fn heartbeat_loop(
    node: Arc<WorkerNode>,
    controller: String,
    token: String,
    shutdown: CancellationToken,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_default();
    let url = format!("{}/cluster/heartbeat", controller.trim_end_matches('/'));
    let mut warned = false;
    loop {
        let beat = node.heartbeat();
        match http.post(&url).bearer_auth(&token).json(&beat).send().await {
            Ok(r) if r.status().is_success() => warned = false,
            Ok(r) => {
                if !warned {
                    tracing::warn!(status = %r.status(), "the controller refused a heartbeat");
                    warned = true;
                }
            }
            Err(e) => {
                if !warned {
                    tracing::warn!(error = %e, "cannot reach the controller");
                    warned = true;
                }
            }
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}
