//! The model registry: accepting registrations (validation, storage: [`upload`]) and the
//! background work that turns a registered model into profiled variants ([`profiling`]).

pub mod profiling;
pub mod upload;

use tokio::sync::mpsc;

/// The queue of models waiting for their background work; [`profiling::start`] takes them.
pub struct Registry {
    tx: mpsc::UnboundedSender<String>,
    rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Default for Registry {
    fn default() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Registry {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
        }
    }
}

impl Registry {
    /// Queues a model for generation and profiling.
    pub fn submit(&self, model_id: &str) {
        if self.tx.send(model_id.to_string()).is_err() {
            tracing::warn!(
                model_id,
                "the registry worker has stopped; the model resumes at the next start"
            );
        }
    }

    /// The receiving end of the queue, for the one worker that takes it (`None` afterwards).
    pub fn take_receiver(&self) -> Option<mpsc::UnboundedReceiver<String>> {
        self.rx.lock().ok().and_then(|mut g| g.take())
    }
}
