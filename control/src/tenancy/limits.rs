//! Per-tenant request-rate limiting (token bucket; burst of two seconds' worth).
//!
//! The buckets live in this process's memory. With several controller replicas each one
//! enforces its share of the tenant's rate: the rate divided by the live replicas, so behind a
//! balancer that spreads requests evenly the cluster admits the tenant's rate (a balancer that
//! sends all of a tenant's requests to one replica admits only that replica's share). Not
//! replaced by `governor` (issue 33): its state is
//! in-process too (its state store's update is synchronous, so it cannot be a database
//! round trip), its quotas are whole requests per period with a whole-number burst while
//! tenants' rates are fractional, and a rate shared by replicas needs the state in
//! Postgres (one theoretical-arrival time per tenant, GCRA, advanced by one `UPDATE ...
//! RETURNING`), which would replace this bucket and `governor` alike.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use infaas_core::Quotas;

use infaas_store::Db;

use crate::error::Error;

struct Bucket {
    tokens: f64,
    last: Instant,
    quotas: Quotas,
    quotas_at: Instant,
}

/// Quotas are re-read from the database at most this often, so a change applies quickly
/// without a database round trip per request.
const QUOTA_REFRESH: Duration = Duration::from_secs(10);

#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    /// Admits one request of `tenant_id` or refuses it with [`Error::RateLimited`]; this
    /// replica admits `1 / replicas` of the tenant's rate and burst.
    pub async fn check(&self, db: &Db, tenant_id: &str, replicas: usize) -> Result<(), Error> {
        let stale = match self.buckets.lock() {
            Ok(map) => map
                .get(tenant_id)
                .is_none_or(|b| b.quotas_at.elapsed() > QUOTA_REFRESH),
            Err(_) => true,
        };
        if stale {
            let tenant = db.get_tenant(tenant_id).await.map_err(|e| match e {
                infaas_store::StoreError::NotFound(_) => {
                    Error::Unauthenticated("the tenant of this token no longer exists".into())
                }
                other => other.into(),
            })?;
            if let Ok(mut map) = self.buckets.lock() {
                let now = Instant::now();
                let b = map.entry(tenant_id.to_string()).or_insert(Bucket {
                    tokens: tenant.quotas.requests_per_second * 2.0,
                    last: now,
                    quotas: tenant.quotas,
                    quotas_at: now,
                });
                b.quotas = tenant.quotas;
                b.quotas_at = now;
            }
        }
        let Ok(mut map) = self.buckets.lock() else {
            return Ok(());
        };
        let Some(b) = map.get_mut(tenant_id) else {
            return Ok(());
        };
        let replicas = replicas.max(1);
        let cluster_rate = b.quotas.requests_per_second.max(0.001);
        let rate = cluster_rate / replicas as f64;
        let burst = (rate * 2.0).max(1.0);
        let now = Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * rate).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            let wait = ((1.0 - b.tokens) / rate).ceil().max(1.0) as u64;
            Err(Error::RateLimited {
                message: if replicas == 1 {
                    format!(
                        "rate limit exceeded: this tenant may send {rate} requests per second (burst {burst}); retry after {wait} s"
                    )
                } else {
                    format!(
                        "rate limit exceeded: this tenant may send {cluster_rate} requests per second to the cluster, {rate:.3} (burst {burst:.1}) to each of its {replicas} controller replicas; retry after {wait} s"
                    )
                },
                retry_after_secs: wait,
            })
        }
    }
}

/// Checks the model-count and stored-bytes quotas before something new is stored.
pub async fn check_storage(
    db: &Db,
    tenant_id: &str,
    new_models: i64,
    new_bytes: i64,
) -> Result<(), Error> {
    let tenant = db.get_tenant(tenant_id).await?;
    let q = tenant.quotas;
    if new_models > 0 {
        let models = db.count_models(tenant_id).await?;
        if models + new_models > q.max_models {
            return Err(Error::QuotaExceeded(format!(
                "model quota exceeded: the tenant has {models} of at most {} models",
                q.max_models
            )));
        }
    }
    if new_bytes > 0 {
        let stored = db.stored_bytes(tenant_id).await?;
        if stored + new_bytes > q.max_stored_bytes {
            return Err(Error::QuotaExceeded(format!(
                "storage quota exceeded: the tenant stores {stored} bytes; {new_bytes} more would pass its limit of {} bytes",
                q.max_stored_bytes
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A tenant of 10 requests/s: one replica admits its 2-s burst of 20; with 4 replicas each
    /// admits a quarter (burst 5) and says so.
    #[tokio::test]
    async fn each_replica_admits_its_share_of_the_rate() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
            .await
            .unwrap();
        let quotas = Quotas {
            requests_per_second: 10.0,
            ..Quotas::default()
        };
        let t = db.create_tenant("acme", quotas).await.unwrap();
        for (replicas, admitted) in [(1, 20), (4, 5)] {
            let limiter = RateLimiter::default();
            let mut ok = 0;
            let mut refusal = None;
            for _ in 0..40 {
                match limiter.check(&db, &t.id, replicas).await {
                    Ok(()) => ok += 1,
                    Err(e) => refusal = Some(e.to_string()),
                }
            }
            // A request or so may be refilled while the loop runs.
            assert!(
                (admitted..=admitted + 1).contains(&ok),
                "{replicas} replicas: {ok} admitted"
            );
            let refusal = refusal.unwrap();
            if replicas > 1 {
                assert!(
                    refusal.contains("10 requests per second to the cluster, 2.500"),
                    "{refusal}"
                );
            }
        }
    }
}
