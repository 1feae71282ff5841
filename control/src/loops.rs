//! The control plane's background loops, which run without any request: the registry's
//! profiling worker, cluster liveness, autoscaling, offline jobs, the pipelines' tuner,
//! forecasts of the applications' arrival rates and usage metering. All stop
//! when the shutdown token is cancelled.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::autoscaler::Autoscaler;
use crate::jobs::runner::JobRunner;
use crate::platform::ControlPlane;

/// Starts every loop; `controller` is the address provisioned workers report to. Returns the
/// autoscaler when `autoscale.enabled` is on (its shutdown waits for actions under way).
pub fn start(
    control: &ControlPlane,
    controller: SocketAddr,
    shutdown: &CancellationToken,
) -> Option<Arc<Autoscaler>> {
    crate::registry::profiling::start(control.clone(), shutdown.clone());
    tokio::spawn(control.cluster.clone().run(shutdown.clone()));
    let autoscaler = Autoscaler::start(control.clone(), controller, shutdown.clone());
    tokio::spawn(JobRunner::new(control.clone()).run(shutdown.clone()));
    tokio::spawn(crate::pipelines::tune::run(
        control.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::pipelines::overload::run(
        control.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(crate::forecasts::run(
        control.forecasts.clone(),
        control.traffic.clone(),
        shutdown.clone(),
    ));
    tokio::spawn(control.usage.clone().run(
        control.db.clone(),
        Duration::from_secs(5),
        shutdown.clone(),
    ));
    autoscaler
}
