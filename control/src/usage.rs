//! Usage of online queries: recorded in memory per (tenant, app, variant, minute) on the
//! query path and flushed to the database every few seconds.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Mutex;
use std::time::Duration;

use infaas_core::time::now_ms;
use infaas_store::db::merge_slo;
use infaas_store::{Db, UsageRow};
use tokio_util::sync::CancellationToken;

/// One served query.
pub struct QueryRecord<'a> {
    pub tenant_id: &'a str,
    pub app: &'a str,
    pub model: &'a str,
    pub variant: &'a str,
    pub hardware: &'a str,
    pub rows: usize,
    pub latency_ms: f64,
    /// `None` when the query had no latency SLO (counted as met).
    pub slo_ms: Option<f64>,
    pub cost: f64,
}

/// Rows not yet flushed, by a hash of their `(tenant, app, variant, minute)`: a query finds
/// its row without building an owned key (the query path allocates nothing here once the
/// minute's row exists).
#[derive(Default)]
pub struct UsageRecorder {
    pending: Mutex<HashMap<u64, Vec<UsageRow>>>,
}

fn key_hash(tenant: &str, app: &str, variant: &str, minute: i64) -> u64 {
    static KEYS: std::sync::OnceLock<std::collections::hash_map::RandomState> =
        std::sync::OnceLock::new();
    KEYS.get_or_init(Default::default)
        .hash_one((tenant, app, variant, minute))
}

/// The pending row of `(tenant, app, variant, minute)` in `pending`, if any.
fn row_of<'a>(
    pending: &'a mut HashMap<u64, Vec<UsageRow>>,
    tenant: &str,
    app: &str,
    variant: &str,
    minute: i64,
) -> (u64, Option<&'a mut UsageRow>) {
    let hash = key_hash(tenant, app, variant, minute);
    let row = pending.get_mut(&hash).and_then(|rows| {
        rows.iter_mut().find(|r| {
            r.minute == minute && r.variant == variant && r.app == app && r.tenant_id == tenant
        })
    });
    (hash, row)
}

impl UsageRecorder {
    pub fn record(&self, q: &QueryRecord<'_>) {
        let minute = now_ms() / 60_000 * 60_000;
        let met = q.slo_ms.is_none_or(|slo| q.latency_ms <= slo);
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        let row = match row_of(&mut pending, q.tenant_id, q.app, q.variant, minute) {
            (_, Some(row)) => row,
            (hash, None) => {
                let rows = pending.entry(hash).or_default();
                rows.push(UsageRow {
                    tenant_id: q.tenant_id.to_string(),
                    app: q.app.to_string(),
                    model: q.model.to_string(),
                    variant: q.variant.to_string(),
                    hardware: q.hardware.to_string(),
                    minute,
                    requests: 0,
                    rows: 0,
                    slo_met: 0,
                    slo_missed: 0,
                    latency_sum_ms: 0.0,
                    latency_max_ms: 0.0,
                    cost: 0.0,
                    slo_min_ms: None,
                    slo_max_ms: None,
                });
                let Some(row) = rows.last_mut() else {
                    return;
                };
                row
            }
        };
        row.requests += 1;
        row.rows += q.rows as i64;
        if met {
            row.slo_met += 1;
        } else {
            row.slo_missed += 1;
        }
        row.latency_sum_ms += q.latency_ms;
        row.latency_max_ms = row.latency_max_ms.max(q.latency_ms);
        row.cost += q.cost;
        row.slo_min_ms = merge_slo(row.slo_min_ms, q.slo_ms, true);
        row.slo_max_ms = merge_slo(row.slo_max_ms, q.slo_ms, false);
    }

    /// The rows not flushed yet (for tests).
    #[cfg(test)]
    pub(crate) fn pending_rows(&self) -> Vec<UsageRow> {
        self.pending
            .lock()
            .map(|p| p.values().flatten().cloned().collect())
            .unwrap_or_default()
    }

    /// Writes what was recorded since the last flush.
    pub async fn flush(&self, db: &Db) {
        let rows: Vec<UsageRow> = match self.pending.lock() {
            Ok(mut p) => p.drain().flat_map(|(_, v)| v).collect(),
            Err(_) => return,
        };
        if rows.is_empty() {
            return;
        }
        if let Err(e) = db.add_usage(&rows).await {
            tracing::error!(error = %e, rows = rows.len(), "cannot store usage records; keeping them for the next flush");
            if let Ok(mut p) = self.pending.lock() {
                for r in rows {
                    match row_of(&mut p, &r.tenant_id, &r.app, &r.variant, r.minute) {
                        (_, Some(cur)) => {
                            cur.requests += r.requests;
                            cur.rows += r.rows;
                            cur.slo_met += r.slo_met;
                            cur.slo_missed += r.slo_missed;
                            cur.latency_sum_ms += r.latency_sum_ms;
                            cur.latency_max_ms = cur.latency_max_ms.max(r.latency_max_ms);
                            cur.cost += r.cost;
                            cur.slo_min_ms = merge_slo(cur.slo_min_ms, r.slo_min_ms, true);
                            cur.slo_max_ms = merge_slo(cur.slo_max_ms, r.slo_max_ms, false);
                        }
                        (hash, None) => p.entry(hash).or_default().push(r),
                    }
                }
            }
        }
    }

    /// Flushes every `period` until shutdown, then once more.
    pub async fn run(
        self: std::sync::Arc<Self>,
        db: Db,
        period: Duration,
        shutdown: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(period) => self.flush(&db).await,
            }
        }
        self.flush(&db).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query<'a>(variant: &'a str, latency_ms: f64, slo_ms: Option<f64>) -> QueryRecord<'a> {
        QueryRecord {
            tenant_id: "t",
            app: "a",
            model: "m",
            variant,
            hardware: "cpu",
            rows: 2,
            latency_ms,
            slo_ms,
            cost: 0.5,
        }
    }

    /// Queries to one variant in one minute add up in one row; another variant gets its own.
    #[test]
    fn queries_add_up_per_tenant_app_variant_and_minute() {
        let u = UsageRecorder::default();
        u.record(&query("v1", 3.0, Some(5.0)));
        u.record(&query("v1", 9.0, Some(5.0)));
        u.record(&query("v1", 1.0, None));
        u.record(&query("v2", 2.0, Some(4.0)));
        let pending = u.pending.lock().unwrap();
        let mut rows: Vec<&UsageRow> = pending.values().flatten().collect();
        rows.sort_by(|a, b| a.variant.cmp(&b.variant));
        // Two rows unless the minute turned between the calls.
        let v1: Vec<&&UsageRow> = rows.iter().filter(|r| r.variant == "v1").collect();
        let requests: i64 = v1.iter().map(|r| r.requests).sum();
        assert_eq!(requests, 3);
        assert!(v1.len() <= 2, "{rows:?}");
        let r = v1[v1.len() - 1];
        if v1.len() == 1 {
            assert_eq!((r.rows, r.slo_met, r.slo_missed), (6, 2, 1));
            assert_eq!(r.latency_max_ms, 9.0);
            assert_eq!(r.latency_sum_ms, 13.0);
            assert!((r.cost - 1.5).abs() < 1e-12);
            assert_eq!((r.slo_min_ms, r.slo_max_ms), (Some(5.0), Some(5.0)));
        }
        let v2: Vec<&&UsageRow> = rows.iter().filter(|r| r.variant == "v2").collect();
        assert_eq!(v2.len(), 1);
        assert_eq!((v2[0].requests, v2[0].slo_met), (1, 1));
    }
}
