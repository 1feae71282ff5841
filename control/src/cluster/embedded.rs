//! The embedded worker as the other controller replicas reach it. A replica on a database
//! that holds several ([`crate::exchange::enabled`]) serves the worker protocol of its embedded
//! worker under [`PATH`] on its own address, and sends the worker's heartbeat to every other
//! live replica about once a second, as a worker process does. So every replica knows every
//! embedded worker and serves queries on it; the cluster token guards those routes as it
//! guards a worker process's. An embedded worker with no thread budget hosts nothing and is not
//! announced.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::Cluster;
use crate::leader::Leadership;

/// Where a replica serves its embedded worker's protocol (`{replica}/worker/cluster/...`).
pub const PATH: &str = "/worker";

/// The URL the other replicas reach the embedded worker of the replica at `replica`.
pub fn url(replica: &str) -> String {
    format!("{}{PATH}", replica.trim_end_matches('/'))
}

/// Sends the embedded worker's heartbeat to every other live replica, every second, until
/// `shutdown`.
pub async fn announce(
    cluster: Arc<Cluster>,
    leadership: Arc<Leadership>,
    token: String,
    shutdown: CancellationToken,
) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap_or_default();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut failing: std::collections::BTreeSet<String> = Default::default();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let Some(mut beat) = cluster.embedded_beat() else {
            break;
        };
        if beat.worker.thread_budget == 0 {
            continue;
        }
        let me = leadership.address();
        beat.worker.address = Some(url(&me));
        let peers: Vec<String> = leadership
            .peers()
            .into_iter()
            .filter(|p| p.trim_end_matches('/') != me.trim_end_matches('/'))
            .collect();
        let outcomes = futures::future::join_all(
            peers
                .iter()
                .map(|p| infaas_worker::server::beat_once(&http, p, &token, &beat)),
        )
        .await;
        for (peer, outcome) in peers.iter().zip(outcomes) {
            match outcome {
                Ok(_) => {
                    failing.remove(peer);
                }
                Err(e) => {
                    if failing.insert(peer.clone()) {
                        tracing::warn!(replica = %peer, error = %e, "another replica did not take the embedded worker's heartbeat");
                    }
                }
            }
        }
        failing.retain(|f| peers.contains(f));
    }
}
