//! The control plane's background loops, which run without any request. Every replica runs
//! the registry's profiling worker, cluster liveness, offline jobs (their items are claimed
//! durably, so each runs once whichever replica claims it), forecasts of its arrival rates,
//! usage metering and the leader election ([`crate::leader`]). The replica that holds the
//! leader lease also runs the loops that must run once for the cluster: model and worker
//! autoscaling, the pipelines' tuner and their overload manager; it stops them when it loses
//! the lease. All stop when the shutdown token is cancelled; a leader stopping hands the lease
//! over at once.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::autoscaler::Autoscaler;
use crate::jobs::runner::JobRunner;
use crate::leader::Transition;
use crate::platform::ControlPlane;

/// The loops started by [`start`].
pub struct Loops {
    /// The autoscaler when `autoscale.enabled` is on (its shutdown stops the workers its
    /// process provider started); its periods run while this replica leads.
    pub autoscaler: Option<Arc<Autoscaler>>,
    /// The election, which ends after shutdown once the lease is handed over.
    pub election: tokio::task::JoinHandle<()>,
}

/// Starts every loop; `controller` is the address provisioned workers report to.
pub fn start(
    control: &ControlPlane,
    controller: SocketAddr,
    shutdown: &CancellationToken,
) -> Loops {
    crate::registry::profiling::start(control.clone(), shutdown.clone());
    tokio::spawn(control.cluster.clone().run(shutdown.clone()));
    tokio::spawn(JobRunner::new(control.clone()).run(shutdown.clone()));
    let exchanging = crate::exchange::enabled(control.db.kind());
    tokio::spawn(crate::exchange::run(control.clone(), shutdown.clone()));
    tokio::spawn(crate::forecasts::run(
        control.forecasts.clone(),
        control.traffic.clone(),
        crate::exchange::settle_s(control.db.kind()),
        shutdown.clone(),
    ));
    tokio::spawn(control.usage.clone().run(
        control.db.clone(),
        Duration::from_secs(5),
        shutdown.clone(),
    ));
    control.leadership.set_address(
        control
            .config
            .advertise_url
            .clone()
            .map(|u| u.trim_end_matches('/').to_string())
            .unwrap_or_else(|| crate::autoscaler::controller_url(controller)),
    );
    if exchanging {
        tokio::spawn(crate::cluster::embedded::announce(
            control.cluster.clone(),
            control.leadership.clone(),
            control.cluster_token.clone(),
            shutdown.clone(),
        ));
    }
    let autoscaler = Autoscaler::new(control.clone(), controller);
    let election = tokio::spawn(elect(control.clone(), autoscaler.clone(), shutdown.clone()));
    Loops {
        autoscaler,
        election,
    }
}

/// The election: every `renew_every`, renews or tries to take the lease; starts the leader's
/// loops when this replica gains it and stops them when it loses it.
async fn elect(
    control: ControlPlane,
    autoscaler: Option<Arc<Autoscaler>>,
    shutdown: CancellationToken,
) {
    let leadership = control.leadership.clone();
    let mut tick = tokio::time::interval(leadership.settings().renew_every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut leading: Option<CancellationToken> = None;
    let mut announced = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        match control
            .db
            .announce_replica(leadership.replica(), &leadership.address())
            .await
        {
            Ok(()) => announced = true,
            Err(e) => tracing::warn!(error = %e, "cannot announce this replica"),
        }
        // Every replica seen within two lease periods: the URLs workers report to.
        let within = i64::try_from(2 * leadership.settings().ttl.as_millis()).unwrap_or(i64::MAX);
        if let Err(e) = control.db.forget_replicas(within).await {
            tracing::warn!(error = %e, "cannot forget the replicas that are gone");
        }
        match control.db.live_replicas(within).await {
            Ok(rows) => leadership.set_peers(rows.into_iter().map(|r| r.address).collect()),
            Err(e) => tracing::warn!(error = %e, "cannot read the live replicas"),
        }
        match leadership.step(&control.db).await {
            Transition::Gained => {
                let stop = shutdown.child_token();
                start_leader_loops(&control, autoscaler.as_ref(), &stop);
                leading = Some(stop);
            }
            Transition::Lost => {
                if let Some(stop) = leading.take() {
                    stop.cancel();
                }
            }
            Transition::Unchanged => {}
        }
        metrics::gauge!("infaas_leader").set(if leadership.is_leader() { 1.0 } else { 0.0 });
        metrics::gauge!("infaas_leader_lease_token").set(leadership.view().token as f64);
    }
    if let Some(stop) = leading.take() {
        stop.cancel();
    }
    leadership.resign(&control.db).await;
    // The claims this replica holds (registrations it was working on) go to the others now.
    if let Err(e) = control.db.release_leases_of(leadership.replica()).await {
        tracing::warn!(error = %e, "cannot release this replica's claims; they lapse by themselves");
    }
    if announced {
        if let Err(e) = control.db.withdraw_replica(leadership.replica()).await {
            tracing::warn!(error = %e, "cannot withdraw this replica's announcement");
        }
    }
}

/// The loops that run once for the cluster, on the leader, until `stop`.
fn start_leader_loops(
    control: &ControlPlane,
    autoscaler: Option<&Arc<Autoscaler>>,
    stop: &CancellationToken,
) {
    if let Some(a) = autoscaler {
        a.spawn_periods(stop.clone());
    }
    tokio::spawn(crate::pipelines::tune::run(control.clone(), stop.clone()));
    tokio::spawn(crate::pipelines::overload::run(
        control.clone(),
        stop.clone(),
    ));
}
