//! Worker providers: how the worker autoscaler adds and removes worker nodes.
//!
//! A provider starts a worker under a name of its choosing; the worker registers with the
//! controller by heartbeat under that name (`INFAAS_WORKER_NAME`), which is how the controller
//! matches the workers it sees to the ones a provider started. Removing a worker stops it; the
//! controller drains it first (no new instances) and marks it dead when its heartbeats stop.

#[cfg(feature = "kubernetes")]
pub mod kubernetes;
pub mod process;

use async_trait::async_trait;
use infaas_core::HardwareKind;
use serde::{Deserialize, Serialize};

/// A worker a provider started and can stop.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProvisionedWorker {
    /// The name the worker registers under (its heartbeat's `name`): unique per provider.
    pub name: String,
    pub hardware: HardwareKind,
    /// When the provider started it, in milliseconds since the Unix epoch.
    pub started_at_ms: i64,
}

/// Why a provider could not do what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The provider has no capacity left (its configured maximum, or the cluster's).
    #[error("no capacity to add a worker: {0}")]
    Exhausted(String),
    /// The provider cannot offer this hardware kind.
    #[error("this provider cannot start a worker with {0} hardware")]
    Unsupported(&'static str),
    /// The worker is not one this provider started (or it is already gone).
    #[error("worker '{0}' is not one this provider runs")]
    Unknown(String),
    /// This controller no longer leads the cluster (its fencing token is stale or it was
    /// deposed), so it may not change the workers.
    #[error("refused: this controller's leader token {ours} is stale{}", holder.map_or(String::new(), |h| format!(" (the worker Deployment was last changed by the leader with token {h})")))]
    Fenced { ours: i64, holder: Option<i64> },
    /// Starting or stopping failed (a process could not be spawned, the Kubernetes API
    /// refused or could not be reached).
    #[error("{context}: {source}")]
    Backend {
        context: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// Starts and stops worker nodes for the worker autoscaler.
#[async_trait]
pub trait WorkerProvider: Send + Sync {
    /// Short name for logs and scaling events: `process`, `kubernetes`.
    fn kind(&self) -> &'static str;

    /// Starts one worker with `hardware`; it registers with the controller by itself.
    async fn add(&self, hardware: HardwareKind) -> Result<ProvisionedWorker, ProvisionError>;

    /// Stops a worker this provider started.
    async fn remove(&self, worker: &ProvisionedWorker) -> Result<(), ProvisionError>;

    /// The workers this provider runs now.
    async fn list(&self) -> Result<Vec<ProvisionedWorker>, ProvisionError>;
}
