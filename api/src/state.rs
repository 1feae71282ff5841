//! Shared state of the HTTP server.

use std::sync::Arc;

use infaas_store::{Db, ObjectStore};

use crate::auth::{KeyCache, TokenIssuer};
use crate::config::Config;
use crate::quota::RateLimiter;

/// Cheap to clone: everything lives behind `Arc`s.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

pub struct Inner {
    pub config: Config,
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    pub tokens: TokenIssuer,
    pub key_cache: KeyCache,
    pub limiter: RateLimiter,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
    pub registry: crate::registry::Registry,
    pub cluster: Arc<crate::cluster::Cluster>,
    pub usage: Arc<crate::usage::UsageRecorder>,
    /// Shared secret of worker <-> controller traffic.
    pub cluster_token: String,
    /// The ONNX Runtime library in use, or why it could not be loaded.
    pub runtime: Result<std::path::PathBuf, String>,
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl AppState {
    /// Fails with 503 when ONNX Runtime could not be loaded at start.
    pub fn runtime_ready(&self) -> Result<(), crate::error::ApiError> {
        match &self.runtime {
            Ok(_) => Ok(()),
            Err(e) => Err(crate::error::ApiError::Unavailable(format!(
                "ONNX Runtime is not available on this server: {e}"
            ))),
        }
    }

    pub fn new(inner: Inner) -> AppState {
        AppState {
            inner: Arc::new(inner),
        }
    }
}
