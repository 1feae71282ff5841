//! One interface to a worker, embedded in the controller's process or remote over HTTP,
//! and the one table between the errors of a call and the statuses of the worker protocol.

use async_trait::async_trait;
use infaas_core::Tensor;
use infaas_executors::batcher::InstanceError;

use crate::node::{WorkerError, WorkerNode};
use crate::wire::{LoadRequest, LoadedReport};

/// Why a call to a worker failed, as its caller sees it (the same for both kinds of worker).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// The instance's queue is full: the caller answers 429 or tries another instance.
    #[error("{0}")]
    Overloaded(String),
    /// The request does not fit the model: the caller answers 400.
    #[error("{0}")]
    BadInput(String),
    /// The variant is not (or no longer) loaded on the worker.
    #[error("the variant is not loaded on the worker")]
    NotLoaded,
    /// The worker has no room (threads, memory) or no hardware of the kind asked for.
    #[error("{0}")]
    NoRoom(String),
    /// The worker refused the cluster token.
    #[error("{0}")]
    Unauthorized(String),
    /// The worker failed or could not be reached: retry elsewhere.
    #[error("{0}")]
    Worker(String),
}

/// Each kind of [`CallError`] and the HTTP status that carries it on the worker protocol.
/// The worker's server answers with these; the remote client reads them back.
const STATUS_TABLE: [(CallErrorKind, u16); 6] = [
    (CallErrorKind::Overloaded, 429),
    (CallErrorKind::BadInput, 400),
    (CallErrorKind::NotLoaded, 404),
    (CallErrorKind::NoRoom, 409),
    (CallErrorKind::Unauthorized, 401),
    (CallErrorKind::Worker, 500),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CallErrorKind {
    Overloaded,
    BadInput,
    NotLoaded,
    NoRoom,
    Unauthorized,
    Worker,
}

impl CallError {
    fn kind(&self) -> CallErrorKind {
        match self {
            CallError::Overloaded(_) => CallErrorKind::Overloaded,
            CallError::BadInput(_) => CallErrorKind::BadInput,
            CallError::NotLoaded => CallErrorKind::NotLoaded,
            CallError::NoRoom(_) => CallErrorKind::NoRoom,
            CallError::Unauthorized(_) => CallErrorKind::Unauthorized,
            CallError::Worker(_) => CallErrorKind::Worker,
        }
    }

    /// The status that carries this error on the worker protocol.
    pub fn status(&self) -> u16 {
        let kind = self.kind();
        STATUS_TABLE
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(500, |(_, s)| *s)
    }

    /// The error a worker's answer with `status` and `message` stands for (a status outside
    /// the table is a failure of the worker).
    pub fn from_status(status: u16, message: String) -> CallError {
        let kind = STATUS_TABLE
            .iter()
            .find(|(_, s)| *s == status)
            .map_or(CallErrorKind::Worker, |(k, _)| *k);
        match kind {
            CallErrorKind::Overloaded => CallError::Overloaded(message),
            CallErrorKind::BadInput => CallError::BadInput(message),
            CallErrorKind::NotLoaded => CallError::NotLoaded,
            CallErrorKind::NoRoom => CallError::NoRoom(message),
            CallErrorKind::Unauthorized => CallError::Unauthorized(message),
            CallErrorKind::Worker => {
                CallError::Worker(format!("worker answered {status}: {message}"))
            }
        }
    }
}

impl From<WorkerError> for CallError {
    fn from(e: WorkerError) -> Self {
        match e {
            WorkerError::Instance(InstanceError::QueueFull { .. }) => {
                CallError::Overloaded(e.to_string())
            }
            WorkerError::Instance(InstanceError::BadInput(_)) => CallError::BadInput(e.to_string()),
            WorkerError::NotLoaded(_) => CallError::NotLoaded,
            WorkerError::BudgetExceeded { .. } | WorkerError::NoHardware(_) => {
                CallError::NoRoom(e.to_string())
            }
            other => CallError::Worker(other.to_string()),
        }
    }
}

/// What the control plane asks of a worker; the embedded [`WorkerNode`] and the
/// [`RemoteWorker`](crate::client::RemoteWorker) client both answer it.
#[async_trait]
pub trait Worker: Send + Sync {
    /// Starts an instance of the variant (fetching its file from the object store).
    async fn load(&self, req: &LoadRequest) -> Result<LoadedReport, CallError>;
    /// Runs `variant_id` with `threads` intra-op threads (the old session serves until the
    /// new one is ready).
    async fn resize(&self, variant_id: &str, threads: usize) -> Result<LoadedReport, CallError>;
    /// Stops the variant's instance; not loaded is not an error.
    async fn unload(&self, variant_id: &str) -> Result<(), CallError>;
    /// Runs one request on the variant's instance.
    async fn infer(&self, variant_id: &str, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CallError>;
    /// Whether the worker runs inside the controller's process (it never leaves).
    fn is_embedded(&self) -> bool;
}

#[async_trait]
impl Worker for WorkerNode {
    async fn load(&self, req: &LoadRequest) -> Result<LoadedReport, CallError> {
        Ok(WorkerNode::load(self, req.clone()).await?)
    }

    async fn resize(&self, variant_id: &str, threads: usize) -> Result<LoadedReport, CallError> {
        Ok(WorkerNode::resize(self, variant_id, threads).await?)
    }

    async fn unload(&self, variant_id: &str) -> Result<(), CallError> {
        WorkerNode::unload(self, variant_id);
        Ok(())
    }

    async fn infer(&self, variant_id: &str, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CallError> {
        Ok(WorkerNode::infer(self, variant_id, inputs).await?)
    }

    fn is_embedded(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_survives_the_trip_through_its_status() {
        let errors = [
            CallError::Overloaded("queue full".into()),
            CallError::BadInput("wrong shape".into()),
            CallError::NotLoaded,
            CallError::NoRoom("no threads".into()),
            CallError::Unauthorized("wrong cluster token".into()),
        ];
        for e in errors {
            let back = CallError::from_status(e.status(), e.to_string());
            assert_eq!(back, e, "status {}", e.status());
        }
        let failed = CallError::from_status(502, "bad gateway".into());
        assert!(matches!(failed, CallError::Worker(m) if m.contains("502")));
        assert_eq!(CallError::Worker("x".into()).status(), 500);
    }

    #[test]
    fn worker_errors_map_to_their_kind() {
        let e = CallError::from(WorkerError::NotLoaded("v".into()));
        assert_eq!(e, CallError::NotLoaded);
        let e = CallError::from(WorkerError::NoHardware("gpu"));
        assert!(matches!(e, CallError::NoRoom(m) if m.contains("gpu")));
    }
}
