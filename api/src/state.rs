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
}

impl std::ops::Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl AppState {
    pub fn new(inner: Inner) -> AppState {
        AppState {
            inner: Arc::new(inner),
        }
    }
}
