//! Building the application (state + router) and serving it until shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post};
use axum::Router;
use infaas_store::{open_object_store, Db, ObjectStoreConfig};
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use crate::auth::{KeyCache, TokenIssuer};
use crate::config::Config;
use crate::error::ApiError;
use crate::quota::RateLimiter;
use crate::routes;
use crate::state::{AppState, Inner};

const JWT_SECRET_SETTING: &str = "jwt_hs256_secret";
const CLUSTER_TOKEN_SETTING: &str = "cluster_token";

/// The cluster token in force: configured, or generated once and kept in the database.
pub async fn cluster_token(config: &Config, db: &Db) -> anyhow::Result<String> {
    Ok(match &config.cluster_token {
        Some(t) => t.clone(),
        None => {
            let fresh = hex::encode(rand::random::<[u8; 24]>());
            db.setting_or_insert(CLUSTER_TOKEN_SETTING, &fresh).await?
        }
    })
}

/// Connects to the database and object store and prepares the shared state.
pub async fn build_state(config: Config) -> anyhow::Result<AppState> {
    let db_url = config.database_url();
    let db = Db::connect(&db_url)
        .await
        .with_context(|| format!("connecting to {}", infaas_store::db::redact(&db_url)))?;
    let store_cfg = ObjectStoreConfig::parse(
        &config.object_store(),
        config.s3_endpoint.clone(),
        config.s3_region.clone(),
    )?;
    let objects = open_object_store(&store_cfg)
        .await
        .with_context(|| format!("opening object store {}", config.object_store()))?;
    let secret = match &config.jwt_secret {
        Some(s) => s.clone(),
        None => {
            // Generated on first run and kept in the database, so every controller that
            // shares the database accepts the others' tokens and restarts keep sessions.
            let fresh = hex::encode(rand::random::<[u8; 32]>());
            db.setting_or_insert(JWT_SECRET_SETTING, &fresh).await?
        }
    };
    let tokens = TokenIssuer::new(secret.as_bytes(), Duration::from_secs(config.jwt_ttl_secs));
    let runtime = infaas_executors::runtime::init_runtime(config.ort_dylib_path.as_deref())
        .map_err(|e| e.to_string());
    match &runtime {
        Ok(path) => tracing::info!(library = %path.display(), "ONNX Runtime loaded"),
        Err(e) => {
            tracing::error!(error = %e, "ONNX Runtime is not available: models cannot be registered or served")
        }
    }
    let cluster_token = cluster_token(&config, &db).await?;
    let node = Arc::new(infaas_worker::WorkerNode::new(
        crate::cluster::node_config(
            &config,
            format!("embedded-{}", uuid::Uuid::new_v4()),
            "embedded".into(),
            None,
        )
        .context("the simulated GPU's latency profile")?,
        objects.clone(),
    ));
    let cluster = crate::cluster::Cluster::new(db.clone(), &config, Some(node));
    if let Err(e) = cluster.refresh_catalog().await {
        tracing::error!(error = %e, "cannot load the serving catalog");
    }
    Ok(AppState::new(Inner {
        cluster,
        usage: Arc::new(crate::usage::UsageRecorder::default()),
        cluster_token,
        db,
        objects,
        tokens,
        key_cache: KeyCache::default(),
        limiter: RateLimiter::default(),
        metrics: crate::metrics::install(),
        registry: crate::registry::Registry::default(),
        runtime,
        config,
    }))
}

/// All routes with their layers.
pub fn router(state: AppState) -> Router {
    let v1 = Router::new()
        .route("/auth/token", post(routes::auth::token))
        .route("/me", get(routes::auth::me))
        .route(
            "/api-keys",
            post(routes::api_keys::create).get(routes::api_keys::list),
        )
        .route("/api-keys/{id}", delete(routes::api_keys::revoke))
        .route(
            "/models",
            get(routes::models::list)
                .post(routes::models::register)
                .layer(
                    // Uploads stream to disk; the per-file limit is checked while streaming.
                    DefaultBodyLimit::max(upload_body_limit(&state.config)),
                ),
        )
        .route(
            "/models/{name}",
            get(routes::models::show).delete(routes::models::delete),
        )
        .route("/apps", get(routes::models::list_apps))
        .route("/apps/{app}", get(routes::models::show_app))
        .route("/apps/{app}/usage", get(routes::cluster::usage))
        .route(
            "/apps/{app}/scaling-events",
            get(routes::scaling::scaling_events),
        )
        .route("/apps/{app}/infer", post(routes::infer::infer_app))
        .route("/models/{name}/infer", post(routes::infer::infer_model))
        .route("/workers", get(routes::cluster::workers))
        .route(
            "/jobs",
            get(routes::jobs::list)
                .post(routes::jobs::submit)
                .layer(DefaultBodyLimit::max(upload_body_limit(&state.config))),
        )
        .route("/jobs/{id}", get(routes::jobs::show))
        .route("/jobs/{id}/cancel", post(routes::jobs::cancel))
        .route("/jobs/{id}/results", get(routes::jobs::results))
        .route("/files", get(routes::jobs::list_files))
        .route(
            "/files/{*path}",
            get(routes::jobs::get_file)
                .put(routes::jobs::put_file)
                .layer(DefaultBodyLimit::max(upload_body_limit(&state.config))),
        );
    let v2 = Router::new()
        .route("/", get(routes::v2::server))
        .route("/health/live", get(routes::v2::live))
        .route("/health/ready", get(routes::v2::ready))
        .route("/models/{name}", get(routes::v2::model))
        .route("/models/{name}/ready", get(routes::v2::model_ready))
        .route("/models/{name}/infer", post(routes::v2::infer))
        .route(
            "/models/{name}/versions/{version}",
            get(routes::v2::model_version),
        )
        .route(
            "/models/{name}/versions/{version}/ready",
            get(routes::v2::model_version_ready),
        )
        .route(
            "/models/{name}/versions/{version}/infer",
            post(routes::v2::infer_version),
        );
    Router::new()
        .route("/", get(routes::health::index))
        .route("/openapi.json", get(routes::health::openapi))
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(routes::health::readyz))
        .route("/metrics", get(routes::health::metrics))
        .nest("/v1", v1)
        .nest("/v2", v2)
        .route("/cluster/heartbeat", post(routes::cluster::heartbeat))
        .nest(
            "/ui",
            routes::dashboard::routes(upload_body_limit(&state.config)),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(axum::middleware::from_fn(crate::metrics::track))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(|_| {
            axum::response::IntoResponse::into_response(ApiError::Internal(anyhow::anyhow!(
                "a request handler panicked"
            )))
        }))
        .with_state(state)
}

/// A registration carries a model and a validation set, each up to the upload limit.
fn upload_body_limit(config: &Config) -> usize {
    usize::try_from(
        config
            .max_upload_bytes
            .saturating_mul(2)
            .saturating_add(1 << 20),
    )
    .unwrap_or(usize::MAX)
}

async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NotFound(format!("no route for {}", uri.path()))
}

async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::Status {
        status: axum::http::StatusCode::METHOD_NOT_ALLOWED,
        message: format!("method {method} is not allowed on {}", uri.path()),
    }
}

/// A running server, for tests and the `serve` command.
pub struct Server {
    pub addr: std::net::SocketAddr,
    pub state: AppState,
    pub shutdown: CancellationToken,
    /// The autoscaling loops (`None` when `autoscale.enabled` is off).
    pub autoscaler: Option<Arc<crate::autoscaler::Autoscaler>>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
}

/// `listener`'s connections without Nagle's algorithm: an answer's last segment is sent at
/// once instead of waiting for the peer's acknowledgement of the previous one (up to the
/// peer's delayed-ACK timer, tens of milliseconds, on a streamed or multi-segment answer).
pub(crate) fn no_delay(
    listener: tokio::net::TcpListener,
) -> impl axum::serve::Listener<Io = tokio::net::TcpStream, Addr = std::net::SocketAddr> {
    use axum::serve::ListenerExt;
    listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a connection");
        }
    })
}

impl Server {
    /// Binds `config.listen` (port 0 picks a free port) and starts serving.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        let listen = config.listen;
        let state = build_state(config).await?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let addr = listener.local_addr()?;
        let shutdown = CancellationToken::new();
        crate::registry::Registry::start(state.clone(), shutdown.clone());
        tokio::spawn(state.cluster.clone().run(shutdown.clone()));
        let autoscaler =
            crate::autoscaler::Autoscaler::start(state.clone(), addr, shutdown.clone());
        tokio::spawn(crate::jobs::runner::JobRunner::new(state.clone()).run(shutdown.clone()));
        tokio::spawn(state.usage.clone().run(
            state.db.clone(),
            Duration::from_secs(5),
            shutdown.clone(),
        ));
        let app = router(state.clone());
        let token = shutdown.clone();
        let handle = tokio::spawn(async move {
            axum::serve(no_delay(listener), app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await
        });
        Ok(Server {
            addr,
            state,
            shutdown,
            autoscaler,
            handle,
        })
    }

    /// Stops accepting, lets in-flight requests finish (up to `grace`), closes the database.
    pub async fn stop(self, grace: Duration) -> anyhow::Result<()> {
        self.shutdown.cancel();
        if let Some(a) = &self.autoscaler {
            a.shutdown().await;
        }
        let db = self.state.db.clone();
        let mut handle = self.handle;
        match tokio::time::timeout(grace, &mut handle).await {
            Ok(joined) => joined??,
            Err(_) => {
                tracing::warn!(
                    "in-flight requests did not finish within {} s; closing them",
                    grace.as_secs()
                );
                handle.abort();
            }
        }
        db.close().await;
        Ok(())
    }
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

/// `infaas serve`: runs until SIGTERM / Ctrl-C, then drains.
pub async fn serve(config: Config) -> anyhow::Result<()> {
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let server = Server::start(config).await?;
    tracing::info!(
        addr = %server.addr,
        database = server.state.db.kind().as_str(),
        objects = %server.state.objects.describe(),
        "infaas listening on http://{}",
        server.addr
    );
    shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    server.stop(grace).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Shared by tests: the objects an `Arc<dyn ObjectStore>` can be built from.
pub type SharedObjects = Arc<dyn infaas_store::ObjectStore>;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use axum::serve::Listener;

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
