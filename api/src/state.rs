//! Shared state of the HTTP server: the control plane, and what only the HTTP edge needs.

use infaas_control::ControlPlane;

/// Cheap to clone. Dereferences to the [`ControlPlane`] (and on to its parts: `state.db`,
/// `state.cluster`, ...).
#[derive(Clone)]
pub struct AppState {
    pub control: ControlPlane,
    pub metrics: Option<metrics_exporter_prometheus::PrometheusHandle>,
}

impl std::ops::Deref for AppState {
    type Target = ControlPlane;
    fn deref(&self) -> &ControlPlane {
        &self.control
    }
}

impl AppState {
    pub fn new(control: ControlPlane) -> AppState {
        AppState {
            control,
            metrics: crate::metrics::install(),
        }
    }
}
