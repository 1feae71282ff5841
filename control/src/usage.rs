//! Usage of online queries: recorded in memory per (tenant, app, variant, minute) on the
//! query path and flushed to the database every few seconds.

use std::collections::HashMap;
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

#[derive(Default)]
pub struct UsageRecorder {
    pending: Mutex<HashMap<(String, String, String, i64), UsageRow>>,
}

impl UsageRecorder {
    pub fn record(&self, q: &QueryRecord<'_>) {
        let minute = now_ms() / 60_000 * 60_000;
        let met = q.slo_ms.is_none_or(|slo| q.latency_ms <= slo);
        let Ok(mut pending) = self.pending.lock() else {
            return;
        };
        let row = pending
            .entry((
                q.tenant_id.to_string(),
                q.app.to_string(),
                q.variant.to_string(),
                minute,
            ))
            .or_insert_with(|| UsageRow {
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

    /// Writes what was recorded since the last flush.
    pub async fn flush(&self, db: &Db) {
        let rows: Vec<UsageRow> = match self.pending.lock() {
            Ok(mut p) => p.drain().map(|(_, v)| v).collect(),
            Err(_) => return,
        };
        if rows.is_empty() {
            return;
        }
        if let Err(e) = db.add_usage(&rows).await {
            tracing::error!(error = %e, rows = rows.len(), "cannot store usage records; keeping them for the next flush");
            if let Ok(mut p) = self.pending.lock() {
                for r in rows {
                    let key = (
                        r.tenant_id.clone(),
                        r.app.clone(),
                        r.variant.clone(),
                        r.minute,
                    );
                    match p.get_mut(&key) {
                        Some(cur) => {
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
                        None => {
                            p.insert(key, r);
                        }
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
