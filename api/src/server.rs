//! Building the application (state + router) and serving it until shutdown.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::extract::DefaultBodyLimit;
use axum::routing::{delete, get, post, put};
use axum::Router;
use tokio_util::sync::CancellationToken;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;

use infaas_control::config::Config;
use infaas_control::ControlPlane;

use crate::error::ApiError;
use crate::routes;
use crate::state::AppState;

/// Opens the control plane and prepares the HTTP edge's state.
pub async fn build_state(config: Config) -> anyhow::Result<AppState> {
    Ok(AppState::new(ControlPlane::open(config).await?))
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
        .route("/apps/{app}/forecast", get(routes::cluster::forecast))
        .route(
            "/apps/{app}/scaling-events",
            get(routes::scaling::scaling_events),
        )
        .route("/apps/{app}/infer", post(routes::infer::infer_app))
        .route("/models/{name}/infer", post(routes::infer::infer_model))
        .route(
            "/pipelines",
            post(routes::pipelines::create).get(routes::pipelines::list),
        )
        .route(
            "/pipelines/{name}",
            get(routes::pipelines::show).delete(routes::pipelines::delete),
        )
        .route("/pipelines/{name}/infer", post(routes::pipelines::infer))
        .route("/pipelines/{name}/plan", post(routes::pipelines::plan))
        .route(
            "/pipelines/{name}/validation",
            put(routes::pipelines::put_validation).delete(routes::pipelines::delete_validation),
        )
        .route("/workers", get(routes::cluster::workers))
        .route("/cluster", get(routes::cluster::cluster))
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
        .route("/traces/recorded", get(routes::whatif::recorded))
        .route(
            "/whatif",
            get(routes::whatif::list)
                .post(routes::whatif::start)
                .layer(DefaultBodyLimit::max(whatif_body_limit(&state.config))),
        )
        .route(
            "/whatif/{id}",
            get(routes::whatif::show).delete(routes::whatif::delete),
        )
        .route("/whatif/{id}/plot.svg", get(routes::whatif::plot))
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
        .route("/openapi.json", get(crate::openapi::serve))
        .route("/healthz", get(routes::health::healthz))
        .route("/readyz", get(routes::health::readyz))
        .route("/metrics", get(routes::health::metrics))
        .nest("/v1", v1)
        .nest("/v2", v2)
        .route("/cluster/heartbeat", post(routes::cluster::heartbeat))
        .merge(embedded_worker(&state))
        .nest(
            "/ui",
            routes::dashboard::routes(upload_body_limit(&state.config)),
        )
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::limits::rate_limit,
        ))
        .layer(axum::middleware::from_fn(crate::metrics::track))
        .layer(TraceLayer::new_for_http())
        .layer(CatchPanicLayer::custom(|_| {
            axum::response::IntoResponse::into_response(ApiError::Internal(anyhow::anyhow!(
                "a request handler panicked"
            )))
        }))
        .with_state(state)
}

/// The embedded worker's protocol under `/worker`, for the other controller replicas
/// (`infaas_control::cluster::embedded`); none on a database that holds one replica.
fn embedded_worker(state: &AppState) -> Router<AppState> {
    let node = state
        .cluster
        .embedded()
        .filter(|_| infaas_control::exchange::enabled(state.db.kind()));
    match node {
        Some(node) => Router::new().nest_service(
            infaas_control::cluster::embedded::PATH,
            infaas_worker::server::router(
                node.clone(),
                state.cluster_token.clone(),
                state.config.max_body_bytes.max(64 << 20),
            ),
        ),
        None => Router::new(),
    }
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

/// A what-if request may carry a CSV trace of up to `whatif.max_csv_bytes`, escaped in JSON
/// (each line break takes two bytes).
fn whatif_body_limit(config: &Config) -> usize {
    let csv = config
        .whatif
        .max_csv_bytes
        .saturating_mul(2)
        .saturating_add(64 << 10);
    usize::try_from(csv)
        .unwrap_or(usize::MAX)
        .max(config.max_body_bytes)
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
    /// Where the Open Inference Protocol's gRPC service listens (`None`: `grpc_listen` off).
    pub grpc_addr: Option<std::net::SocketAddr>,
    pub state: AppState,
    pub shutdown: CancellationToken,
    /// The autoscaling loops (`None` when `autoscale.enabled` is off).
    pub autoscaler: Option<Arc<infaas_control::autoscaler::Autoscaler>>,
    /// The leader election, which hands the lease over when the server stops.
    election: tokio::task::JoinHandle<()>,
    handle: tokio::task::JoinHandle<std::io::Result<()>>,
    grpc_handle: Option<tokio::task::JoinHandle<Result<(), tonic::transport::Error>>>,
}

impl Server {
    /// Binds `config.listen` and `config.grpc_listen` (port 0 picks a free port) and starts
    /// serving.
    pub async fn start(config: Config) -> anyhow::Result<Server> {
        let (listen, grpc_listen) = (config.listen, config.grpc_listen);
        let state = build_state(config).await?;
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding {listen}"))?;
        let addr = listener.local_addr()?;
        let grpc_listener = match grpc_listen {
            Some(a) => Some(
                tokio::net::TcpListener::bind(a)
                    .await
                    .with_context(|| format!("binding {a} (grpc_listen; 'off' turns it off)"))?,
            ),
            None => None,
        };
        let grpc_addr = grpc_listener.as_ref().map(|l| l.local_addr()).transpose()?;
        state
            .leadership
            .check_single_replica(&state.db)
            .await
            .context("starting a controller replica")?;
        let shutdown = CancellationToken::new();
        let infaas_control::loops::Loops {
            autoscaler,
            election,
        } = infaas_control::loops::start(&state, addr, &shutdown);
        let app = router(state.clone());
        let token = shutdown.clone();
        let handle = tokio::spawn(async move {
            axum::serve(infaas_worker::server::no_delay(listener), app)
                .with_graceful_shutdown(async move { token.cancelled().await })
                .await
        });
        let grpc_handle = grpc_listener
            .map(|l| tokio::spawn(crate::grpc::serve(l, state.clone(), shutdown.clone())));
        Ok(Server {
            addr,
            grpc_addr,
            state,
            shutdown,
            autoscaler,
            election,
            handle,
            grpc_handle,
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
        let deadline = tokio::time::Instant::now() + grace;
        let http = match tokio::time::timeout_at(deadline, &mut handle).await {
            Ok(joined) => joined.map_err(anyhow::Error::from).and_then(|r| Ok(r?)),
            Err(_) => {
                tracing::warn!(
                    "in-flight requests did not finish within {} s; closing them",
                    grace.as_secs()
                );
                handle.abort();
                Ok(())
            }
        };
        let grpc = match self.grpc_handle {
            None => Ok(()),
            Some(mut grpc) => match tokio::time::timeout_at(deadline, &mut grpc).await {
                Ok(joined) => joined.map_err(anyhow::Error::from).and_then(|r| Ok(r?)),
                Err(_) => {
                    tracing::warn!(
                        "in-flight gRPC calls did not finish within {} s; closing them",
                        grace.as_secs()
                    );
                    grpc.abort();
                    Ok(())
                }
            },
        };
        // The election hands the lease over (the next replica leads at once) before the
        // database closes.
        if tokio::time::timeout_at(deadline, self.election)
            .await
            .is_err()
        {
            tracing::warn!("the leader election did not end within the grace period");
        }
        db.close().await;
        http.and(grpc)
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
    match server.grpc_addr {
        Some(addr) => tracing::info!(
            addr = %addr,
            "Open Inference Protocol over gRPC listening on {addr}"
        ),
        None => tracing::info!("gRPC is off (grpc_listen = \"off\")"),
    }
    infaas_worker::server::shutdown_signal().await;
    tracing::info!("shutting down: draining in-flight requests");
    server.stop(grace).await?;
    tracing::info!("stopped");
    Ok(())
}

/// Shared by tests: the objects an `Arc<dyn ObjectStore>` can be built from.
pub type SharedObjects = Arc<dyn infaas_store::ObjectStore>;
