//! Per-minute aggregates of online queries.

use sqlx::{AssertSqlSafe, Row};

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
    /// Tightest latency SLO of the aggregated queries (`None` when none had one).
    pub slo_min_ms: Option<f64>,
    /// Loosest latency SLO of the aggregated queries (`None` when none had one).
    pub slo_max_ms: Option<f64>,
}

/// Merges two optional SLO bounds, keeping the smaller (`pick_min`) or the larger.
pub fn merge_slo(a: Option<f64>, b: Option<f64>, pick_min: bool) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if pick_min { x.min(y) } else { x.max(y) }),
        (x, y) => x.or(y),
    }
}

/// Stands for "no SLO" in the bind parameters of `add_usage` (the statement turns it into
/// NULL): sqlx's `Any` driver sends a NULL double to Postgres as a `float4`, which the
/// prepared statement's `float8` parameter rejects. SLOs are positive, so -1 is free.
const NO_SLO: f64 = -1.0;

impl Db {
    /// Adds `rows` to the stored aggregates (creating them when new).
    pub async fn add_usage(&self, rows: &[UsageRow]) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        for u in rows {
            sqlx::query(
                "INSERT INTO usage_minutely (tenant_id, app, model, variant, hardware, minute, requests, \
                 rows_served, slo_met, slo_missed, latency_sum_ms, latency_max_ms, cost, slo_min_ms, slo_max_ms) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, \
                 NULLIF(CAST($14 AS DOUBLE PRECISION), -1), NULLIF(CAST($15 AS DOUBLE PRECISION), -1)) \
                 ON CONFLICT (tenant_id, app, variant, minute) DO UPDATE SET \
                 requests = usage_minutely.requests + excluded.requests, \
                 rows_served = usage_minutely.rows_served + excluded.rows_served, \
                 slo_met = usage_minutely.slo_met + excluded.slo_met, \
                 slo_missed = usage_minutely.slo_missed + excluded.slo_missed, \
                 latency_sum_ms = usage_minutely.latency_sum_ms + excluded.latency_sum_ms, \
                 latency_max_ms = CASE WHEN excluded.latency_max_ms > usage_minutely.latency_max_ms \
                     THEN excluded.latency_max_ms ELSE usage_minutely.latency_max_ms END, \
                 cost = usage_minutely.cost + excluded.cost, \
                 slo_min_ms = CASE WHEN excluded.slo_min_ms IS NULL THEN usage_minutely.slo_min_ms \
                     WHEN usage_minutely.slo_min_ms IS NULL OR excluded.slo_min_ms < usage_minutely.slo_min_ms \
                     THEN excluded.slo_min_ms ELSE usage_minutely.slo_min_ms END, \
                 slo_max_ms = CASE WHEN excluded.slo_max_ms IS NULL THEN usage_minutely.slo_max_ms \
                     WHEN usage_minutely.slo_max_ms IS NULL OR excluded.slo_max_ms > usage_minutely.slo_max_ms \
                     THEN excluded.slo_max_ms ELSE usage_minutely.slo_max_ms END",
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
            .bind(u.slo_min_ms.unwrap_or(NO_SLO))
            .bind(u.slo_max_ms.unwrap_or(NO_SLO))
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
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {USAGE_COLS} FROM usage_minutely \
             WHERE tenant_id = $1 AND app = $2 AND minute >= $3 ORDER BY minute, variant"
        )))
        .bind(tenant_id)
        .bind(app)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(usage_from_row).collect()
    }
}

/// The columns `usage_from_row` reads.
pub(crate) const USAGE_COLS: &str = "tenant_id, app, model, variant, hardware, minute, requests, \
     rows_served, slo_met, slo_missed, latency_sum_ms, latency_max_ms, cost, slo_min_ms, slo_max_ms";

pub(crate) fn usage_from_row(r: &sqlx::any::AnyRow) -> Result<UsageRow, StoreError> {
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
        slo_min_ms: r.try_get("slo_min_ms")?,
        slo_max_ms: r.try_get("slo_max_ms")?,
    })
}
