//! Per-minute aggregates of online queries.

use sqlx::Row;

use super::Db;
use crate::StoreError;

/// One (tenant, application, variant, minute) aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct UsageRow {
    pub tenant_id: String,
    pub app: String,
    pub model: String,
    pub variant: String,
    pub hardware: String,
    /// Start of the minute, in milliseconds since the Unix epoch.
    pub minute: i64,
    pub requests: i64,
    pub rows: i64,
    pub slo_met: i64,
    pub slo_missed: i64,
    pub latency_sum_ms: f64,
    pub latency_max_ms: f64,
    pub cost: f64,
}

impl Db {
    /// Adds `rows` to the stored aggregates (creating them when new).
    pub async fn add_usage(&self, rows: &[UsageRow]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        for u in rows {
            sqlx::query(
                "INSERT INTO usage_minutely (tenant_id, app, model, variant, hardware, minute, requests, \
                 rows_served, slo_met, slo_missed, latency_sum_ms, latency_max_ms, cost) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) \
                 ON CONFLICT (tenant_id, app, variant, minute) DO UPDATE SET \
                 requests = usage_minutely.requests + excluded.requests, \
                 rows_served = usage_minutely.rows_served + excluded.rows_served, \
                 slo_met = usage_minutely.slo_met + excluded.slo_met, \
                 slo_missed = usage_minutely.slo_missed + excluded.slo_missed, \
                 latency_sum_ms = usage_minutely.latency_sum_ms + excluded.latency_sum_ms, \
                 latency_max_ms = CASE WHEN excluded.latency_max_ms > usage_minutely.latency_max_ms \
                     THEN excluded.latency_max_ms ELSE usage_minutely.latency_max_ms END, \
                 cost = usage_minutely.cost + excluded.cost",
            )
            .bind(&u.tenant_id)
            .bind(&u.app)
            .bind(&u.model)
            .bind(&u.variant)
            .bind(&u.hardware)
            .bind(u.minute)
            .bind(u.requests)
            .bind(u.rows)
            .bind(u.slo_met)
            .bind(u.slo_missed)
            .bind(u.latency_sum_ms)
            .bind(u.latency_max_ms)
            .bind(u.cost)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Aggregates of an application since `since_ms`, oldest first.
    pub async fn usage(
        &self,
        tenant_id: &str,
        app: &str,
        since_ms: i64,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT tenant_id, app, model, variant, hardware, minute, requests, rows_served, slo_met, \
             slo_missed, latency_sum_ms, latency_max_ms, cost FROM usage_minutely \
             WHERE tenant_id = $1 AND app = $2 AND minute >= $3 ORDER BY minute, variant",
        )
        .bind(tenant_id)
        .bind(app)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(UsageRow {
                    tenant_id: r.try_get("tenant_id")?,
                    app: r.try_get("app")?,
                    model: r.try_get("model")?,
                    variant: r.try_get("variant")?,
                    hardware: r.try_get("hardware")?,
                    minute: r.try_get("minute")?,
                    requests: r.try_get("requests")?,
                    rows: r.try_get("rows_served")?,
                    slo_met: r.try_get("slo_met")?,
                    slo_missed: r.try_get("slo_missed")?,
                    latency_sum_ms: r.try_get("latency_sum_ms")?,
                    latency_max_ms: r.try_get("latency_max_ms")?,
                    cost: r.try_get("cost")?,
                })
            })
            .collect()
    }
}
