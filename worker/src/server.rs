//! A worker in its own process (`infaas worker --controller URL`): it serves load, unload,
//! resize and infer commands from the controller over HTTP and sends a heartbeat about
//! every second. Both directions carry the cluster token. Errors travel as the statuses of
//! [`CallError`]'s table.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio_util::sync::CancellationToken;

use crate::call::CallError;
use crate::node::{WorkerError, WorkerNode};
use crate::wire::{HeartbeatAnswer, LoadRequest};

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

fn unauthorised_answer() -> Response {
    let e = CallError::Unauthorized("missing or wrong cluster token".into());
    error(StatusCode::UNAUTHORIZED, e)
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
    let e = CallError::from(e);
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    error(status, e)
}

async fn load(
    State(s): State<WorkerState>,
    headers: HeaderMap,
    axum::Json(req): axum::Json<LoadRequest>,
) -> Response {
    if !authorised(&headers, &s.token) {
        return unauthorised_answer();
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
        return unauthorised_answer();
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
        return unauthorised_answer();
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
        return unauthorised_answer();
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
        return unauthorised_answer();
    }
    axum::Json(s.node.heartbeat()).into_response()
}

/// How a worker process serves.
pub struct ServeOptions {
    /// The controller's URL its heartbeats go to.
    pub controller: String,
    /// The cluster token both directions carry.
    pub token: String,
    /// Largest request body (an infer request's tensors).
    pub max_body_bytes: usize,
    /// How long in-flight requests may take to finish at shutdown.
    pub shutdown_grace: Duration,
}

/// The worker protocol's routes over `node`.
pub fn router(node: Arc<WorkerNode>, token: String, max_body_bytes: usize) -> Router {
    let state = WorkerState {
        node,
        token: Arc::new(token),
    };
    Router::new()
        .route("/cluster/load", post(load))
        .route("/cluster/unload", post(unload))
        .route("/cluster/resize", post(resize))
        .route("/cluster/infer/{variant_id}", post(infer))
        .route("/cluster/heartbeat", get(heartbeat_now))
        .route("/healthz", get(|| async { "ok" }))
        .layer(axum::extract::DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

/// Serves `node` on `listener` and sends heartbeats to the controller until SIGTERM /
/// Ctrl-C.
pub async fn run(
    node: Arc<WorkerNode>,
    listener: tokio::net::TcpListener,
    options: ServeOptions,
) -> std::io::Result<()> {
    let addr = listener.local_addr()?;
    let app = router(node.clone(), options.token.clone(), options.max_body_bytes);
    let shutdown = CancellationToken::new();
    let server_token = shutdown.clone();
    let server = tokio::spawn(async move {
        axum::serve(no_delay(listener), app)
            .with_graceful_shutdown(async move { server_token.cancelled().await })
            .await
    });
    tracing::info!(%addr, controller = %options.controller, "infaas worker listening on http://{addr}");
    let beats = tokio::spawn(heartbeat_loop(
        node.clone(),
        options.controller,
        options.token,
        shutdown.clone(),
    ));
    shutdown_signal().await;
    tracing::info!("worker shutting down");
    shutdown.cancel();
    node.shutdown();
    let _ = beats.await;
    let _ = tokio::time::timeout(options.shutdown_grace, server).await;
    Ok(())
}

/// `listener`'s connections without Nagle's algorithm: an answer's last segment is sent at
/// once instead of waiting for the peer's acknowledgement of the previous one (up to the
/// peer's delayed-ACK timer, tens of milliseconds, on a streamed or multi-segment answer).
pub fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
    })
}

/// Waits for SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

/// Rounds a learned controller may miss before the worker stops reporting to it.
const FORGET_AFTER_MISSES: u32 = 10;

/// The controllers a worker reports to: the one it was started with (always kept) and the
/// replicas the answers name (forgotten after [`FORGET_AFTER_MISSES`] failed rounds in a row
/// unless an answer names them again).
#[derive(Debug, Default)]
struct Controllers {
    configured: String,
    /// URL -> failed rounds in a row.
    learned: std::collections::BTreeMap<String, u32>,
    /// URLs whose failure was already logged.
    warned: std::collections::BTreeSet<String>,
}

impl Controllers {
    fn new(configured: &str) -> Controllers {
        Controllers {
            configured: configured.trim_end_matches('/').to_string(),
            ..Controllers::default()
        }
    }

    fn all(&self) -> Vec<String> {
        let mut all = vec![self.configured.clone()];
        all.extend(
            self.learned
                .keys()
                .filter(|u| **u != self.configured)
                .cloned(),
        );
        all
    }

    /// Takes one round's outcome for `url`: the answer's controllers, or a failure.
    fn record(&mut self, url: &str, outcome: Result<HeartbeatAnswer, String>) {
        match outcome {
            Ok(answer) => {
                if self.warned.remove(url) {
                    tracing::info!(controller = %url, "the controller answers heartbeats again");
                }
                if let Some(misses) = self.learned.get_mut(url) {
                    *misses = 0;
                }
                for c in answer.controllers {
                    let c = c.trim_end_matches('/').to_string();
                    if c != self.configured && !self.learned.contains_key(&c) {
                        tracing::info!(controller = %c, "reporting to another controller replica");
                        self.learned.insert(c, 0);
                    }
                }
            }
            Err(e) => {
                if self.warned.insert(url.to_string()) {
                    tracing::warn!(controller = %url, error = %e, "a controller did not take a heartbeat");
                }
                if let Some(misses) = self.learned.get_mut(url) {
                    *misses += 1;
                    if *misses >= FORGET_AFTER_MISSES {
                        tracing::info!(controller = %url, "forgetting a controller replica that stopped answering");
                        self.learned.remove(url);
                        self.warned.remove(url);
                    }
                }
            }
        }
    }
}

/// Sends one heartbeat to the controller at `url`; the answer (an empty one from a
/// controller that lists no replicas).
pub async fn beat_once(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    beat: &crate::Heartbeat,
) -> Result<HeartbeatAnswer, String> {
    let r = http
        .post(format!("{url}/cluster/heartbeat"))
        .bearer_auth(token)
        .json(beat)
        .send()
        .await
        .map_err(|e| format!("cannot reach the controller: {e}"))?;
    if !r.status().is_success() {
        return Err(format!(
            "the controller refused a heartbeat: {}",
            r.status()
        ));
    }
    if r.status() == reqwest::StatusCode::NO_CONTENT {
        return Ok(HeartbeatAnswer::default());
    }
    r.json::<HeartbeatAnswer>()
        .await
        .map_err(|e| format!("an unreadable heartbeat answer: {e}"))
}

/// Every second, a heartbeat to every controller the worker knows, all at once.
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
    let mut controllers = Controllers::new(&controller);
    loop {
        let beat = node.heartbeat();
        let urls = controllers.all();
        let outcomes =
            futures::future::join_all(urls.iter().map(|u| beat_once(&http, u, &token, &beat)))
                .await;
        for (url, outcome) in urls.iter().zip(outcomes) {
            controllers.record(url, outcome);
        }
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::serve::Listener;

    use super::{Controllers, FORGET_AFTER_MISSES};
    use crate::HeartbeatAnswer;

    fn answer(urls: &[&str]) -> Result<HeartbeatAnswer, String> {
        Ok(HeartbeatAnswer {
            controllers: urls.iter().map(|u| u.to_string()).collect(),
        })
    }

    #[test]
    fn a_worker_reports_to_every_replica_it_learns_and_forgets_the_dead_ones() {
        let mut c = Controllers::new("http://lb:8080/");
        assert_eq!(c.all(), ["http://lb:8080"]);
        c.record(
            "http://lb:8080",
            answer(&["http://a:8080", "http://b:8080/"]),
        );
        assert_eq!(
            c.all(),
            ["http://lb:8080", "http://a:8080", "http://b:8080"]
        );
        // b dies: its misses count; a answer in between resets nothing of b's.
        for _ in 0..FORGET_AFTER_MISSES - 1 {
            c.record("http://b:8080", Err("refused".into()));
            c.record("http://a:8080", answer(&["http://a:8080"]));
        }
        assert_eq!(
            c.all().len(),
            3,
            "not forgotten before {FORGET_AFTER_MISSES} misses"
        );
        c.record("http://b:8080", Err("refused".into()));
        assert_eq!(c.all(), ["http://lb:8080", "http://a:8080"]);
        // The configured controller is never forgotten, however long it is down.
        for _ in 0..2 * FORGET_AFTER_MISSES {
            c.record("http://lb:8080", Err("down".into()));
        }
        assert_eq!(c.all(), ["http://lb:8080", "http://a:8080"]);
        // b comes back and an answer names it again.
        c.record("http://a:8080", answer(&["http://a:8080", "http://b:8080"]));
        assert_eq!(
            c.all(),
            ["http://lb:8080", "http://a:8080", "http://b:8080"]
        );
    }

    #[tokio::test]
    async fn accepted_connections_do_not_wait_to_send() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mut listener = super::no_delay(listener);
        let client = tokio::net::TcpStream::connect(addr);
        let ((io, _), _client) = tokio::join!(listener.accept(), client);
        assert!(io.nodelay().unwrap());
    }
}
