//! The model registry: accepting registrations (validation, storage: [`upload`]) and the
//! background work that turns a registered model into profiled variants ([`profiling`]).

pub mod profiling;
pub mod upload;

use tokio::sync::mpsc;

/// The queue of models waiting for their background work; [`profiling::start`] takes them.
pub struct Registry {
    tx: mpsc::UnboundedSender<String>,
    rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<String>>>,
    /// Models queued or being worked on here (so a scan does not queue one twice).
    queued: std::sync::Mutex<std::collections::HashSet<String>>,
}

impl Default for Registry {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Registry {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
            queued: Default::default(),
        }
    }
}

impl Registry {
    /// Queues a model for generation and profiling.
    pub fn submit(&self, model_id: &str) {
        self.queued_set().insert(model_id.to_string());
        if self.tx.send(model_id.to_string()).is_err() {
            tracing::warn!(
                model_id,
                "the registry worker has stopped; the model resumes at the next start"
            );
        }
    }

    /// Queues a model unless it is queued or worked on here already; says whether it did.
    pub fn submit_once(&self, model_id: &str) -> bool {
        if self.queued_set().contains(model_id) {
            return false;
        }
        self.submit(model_id);
        true
    }

    /// The worker is done with a model (finished, paused, or left to another replica).
    pub fn done(&self, model_id: &str) {
        self.queued_set().remove(model_id);
    }

    fn queued_set(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<String>> {
        self.queued.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The receiving end of the queue, for the one worker that takes it (`None` afterwards).
    pub fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.rx.lock().ok().and_then(|mut g| g.take())
    }
}
