//! Replicas of a tenant's variants, named as plans and tuners name them: how many are loaded,
//! loading more on distinct workers and unloading the least loaded. On the cluster alone.

use std::sync::Arc;

use crate::cluster::{Cluster, Served};
use crate::serving::load_request;

/// The tenant's served variant named `variant` (plans and tuners name variants).
pub fn served_named(cluster: &Cluster, tenant: &str, variant: &str) -> Option<Arc<Served>> {
    cluster
        .catalog()
        .variants()
        .find(|s| s.entry.tenant_id == tenant && s.entry.variant.name == variant)
        .cloned()
}

/// Loaded instances of the tenant's variant `name`.
pub fn replicas_of(cluster: &Cluster, tenant: &str, variant: &str) -> usize {
    let Some(id) = served_named(cluster, tenant, variant).map(|s| s.entry.variant.id.clone())
    else {
        return 0;
    };
    let snapshot = cluster.snapshot();
    snapshot
        .variant_index(&id)
        .map_or(0, |v| snapshot.variant_instances(v).len())
}

/// Unloads instances of variant `name` until `replicas` are left (the least loaded first).
pub async fn shrink(cluster: &Cluster, tenant: &str, variant: &str, replicas: usize) {
    let Some(id) = served_named(cluster, tenant, variant).map(|s| s.entry.variant.id.clone())
    else {
        return;
    };
    let snapshot = cluster.snapshot();
    let Some(vi) = snapshot.variant_index(&id) else {
        return;
    };
    let mut held: Vec<(usize, String)> = snapshot
        .variant_instances(vi)
        .iter()
        .filter_map(|&i| {
            let inst = snapshot.instances().get(i)?;
            let w = snapshot.workers().get(inst.worker)?;
            Some((snapshot.queued(i), w.id.clone()))
        })
        .collect();
    held.sort();
    let extra = held.len().saturating_sub(replicas.max(1));
    for (_, worker) in held.into_iter().take(extra) {
        cluster.drain_instance(&worker, &id);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        if let Some(handle) = cluster.handle(&worker) {
            if let Err(e) = handle.unload(&id).await {
                tracing::warn!(worker, variant, error = %e, "cannot unload a tuned-in replica");
                continue;
            }
        }
        cluster.unloaded(&worker, &id);
    }
}

/// Loads instances of variant `name` until `replicas` workers hold one (as many as can host
/// it); failures are logged, the autoscaler carries on from there.
pub async fn provision(cluster: &Cluster, tenant: &str, variant: &str, replicas: usize) {
    let Some(served) = served_named(cluster, tenant, variant) else {
        tracing::warn!(
            variant,
            "a planned variant is no longer served; not provisioned"
        );
        return;
    };
    let snapshot = cluster.snapshot();
    let Some(vi) = snapshot.variant_index(&served.entry.variant.id) else {
        return;
    };
    let have = snapshot.variant_instances(vi).len();
    let entry = &snapshot.variants()[vi];
    let holders: Vec<usize> = snapshot
        .variant_instances(vi)
        .iter()
        .filter_map(|&i| snapshot.instances().get(i).map(|x| x.worker))
        .collect();
    let candidates: Vec<String> = snapshot
        .workers()
        .iter()
        .enumerate()
        // A replica needs cores the worker's busy instances leave; the first instance loads
        // wherever it fits, since nothing else can serve the stage.
        .filter(|(wi, w)| {
            !holders.contains(wi) && w.can_host(entry) && (have == 0 || snapshot.cores_for(*wi, vi))
        })
        .map(|(_, w)| w.id.clone())
        .take(replicas.saturating_sub(have))
        .collect();
    let lr = load_request(&served);
    for worker in candidates {
        let Some(handle) = cluster.handle(&worker) else {
            continue;
        };
        match handle.load(&lr).await {
            Ok(_) => cluster.loaded(&worker, &lr),
            Err(e) => tracing::warn!(worker, variant, error = %e, "cannot load a planned replica"),
        }
    }
}
