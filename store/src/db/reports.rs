//! Read-only views for reports and the dashboard: a tenant's usage across applications,
//! its scaling events and the progress of its offline jobs. Every query is scoped to one
//! tenant.

use sqlx::{AssertSqlSafe, Row};

use super::usage::{usage_from_row, USAGE_COLS};
use super::{Db, UsageRow};
use crate::StoreError;

/// One row of `scaling_events`, with names in place of ids where they are known.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingEventRow {
    pub id: String,
    /// Application name (`None` when the event concerns no application or it was deleted).
    pub app: Option<String>,
    /// Variant name, else the stored variant id.
    pub variant: Option<String>,
    pub worker_id: Option<String>,
    pub action: String,
    pub reason: String,
    pub cost_before_per_s: Option<f64>,
    pub cost_after_per_s: Option<f64>,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
}

/// A scaling decision to store. `app` is the application's name (its id is looked up; an
/// unknown name stores none).
#[derive(Debug, Clone, PartialEq)]
pub struct NewScalingEvent {
    pub tenant_id: Option<String>,
    pub app: Option<String>,
    pub variant_id: Option<String>,
    /// The worker's name (or id) the action ran on.
    pub worker: Option<String>,
    pub action: String,
    pub reason: String,
    pub cost_before_per_s: f64,
    pub cost_after_per_s: f64,
    /// Milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// A decision of a leader loop (autoscaler, tuner, overload manager): refused with
    /// [`StoreError::Fenced`] once this process has lost the leader lease. A load started by
    /// the query path of any replica is not fenced.
    pub fenced: bool,
}

/// An offline job's state and progress.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSummary {
    pub id: String,
    pub app: Option<String>,
    pub model: Option<String>,
    pub state: String,
    pub items_total: i64,
    pub items_done: i64,
    pub error: Option<String>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
}

impl Db {
    /// Usage aggregates of every application of a tenant since `since_ms`, oldest first.
    pub async fn tenant_usage(
        &self,
        tenant_id: &str,
        since_ms: i64,
    ) -> Result<Vec<UsageRow>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {USAGE_COLS} FROM usage_minutely WHERE tenant_id = $1 AND minute >= $2 \
             ORDER BY minute, app, variant"
        )))
        .bind(tenant_id)
        .bind(since_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(usage_from_row).collect()
    }

    /// The tenant's most recent scaling events (at most `limit`), newest first.
    pub async fn scaling_events(
        &self,
        tenant_id: &str,
        limit: i64,
    ) -> Result<Vec<ScalingEventRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT e.id, a.name AS app, COALESCE(v.name, e.variant_id) AS variant, e.worker_id, \
             e.action, e.reason, e.cost_before_per_s, e.cost_after_per_s, e.created_at \
             FROM scaling_events e \
             LEFT JOIN applications a ON a.id = e.app_id AND a.tenant_id = e.tenant_id \
             LEFT JOIN variants v ON v.id = e.variant_id AND v.tenant_id = e.tenant_id \
             WHERE e.tenant_id = $1 ORDER BY e.created_at DESC, e.id LIMIT $2",
        )
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// Stores a scaling decision; returns its id. A fenced one (`e.fenced`) is refused with
    /// [`StoreError::Fenced`] once this process has lost the leader lease.
    pub async fn add_scaling_event(&self, e: &NewScalingEvent) -> Result<String, StoreError> {
        let id = uuid::Uuid::new_v4().to_string();
        let fence = if e.fenced {
            self.fence()
        } else {
            super::leases::UNFENCED
        };
        let sql = format!(
            "INSERT INTO scaling_events (id, tenant_id, app_id, variant_id, worker_id, action, reason, \
             cost_before_per_s, cost_after_per_s, created_at) \
             SELECT $1, $2, (SELECT id FROM applications WHERE tenant_id = $3 AND name = $4), \
             $5, $6, $7, $8, $9, $10, $11 WHERE {}",
            Db::fence_condition(12)
        );
        let done = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(&id)
            .bind(e.tenant_id.as_deref())
            .bind(e.tenant_id.as_deref())
            .bind(e.app.as_deref())
            .bind(e.variant_id.as_deref())
            .bind(e.worker.as_deref())
            .bind(&e.action)
            .bind(&e.reason)
            .bind(e.cost_before_per_s)
            .bind(e.cost_after_per_s)
            .bind(e.created_at_ms)
            .bind(fence)
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::Fenced { token: fence });
        }
        Ok(id)
    }

    /// Scaling events of one of the tenant's applications (by name) since `since_ms`, newest
    /// first, at most `limit`.
    pub async fn app_scaling_events(
        &self,
        tenant_id: &str,
        app: &str,
        since_ms: i64,
        limit: i64,
    ) -> Result<Vec<ScalingEventRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT e.id, a.name AS app, COALESCE(v.name, e.variant_id) AS variant, e.worker_id, \
             e.action, e.reason, e.cost_before_per_s, e.cost_after_per_s, e.created_at \
             FROM scaling_events e \
             JOIN applications a ON a.id = e.app_id AND a.tenant_id = e.tenant_id \
             LEFT JOIN variants v ON v.id = e.variant_id AND v.tenant_id = e.tenant_id \
             WHERE e.tenant_id = $1 AND a.name = $2 AND e.created_at >= $3 \
             ORDER BY e.created_at DESC, e.id LIMIT $4",
        )
        .bind(tenant_id)
        .bind(app)
        .bind(since_ms)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(event_from_row).collect()
    }

    /// The tenant's most recent offline jobs (at most `limit`), newest first.
    pub async fn job_summaries(
        &self,
        tenant_id: &str,
        limit: i64,
    ) -> Result<Vec<JobSummary>, StoreError> {
        let rows = sqlx::query(
            "SELECT j.id, j.app_name AS app, j.model_name AS model, j.state, j.items_total, \
             j.items_done, j.error, j.created_at, j.started_at, j.finished_at \
             FROM offline_jobs j \
             WHERE j.tenant_id = $1 ORDER BY j.created_at DESC, j.id LIMIT $2",
        )
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(JobSummary {
                    id: r.try_get("id")?,
                    app: r.try_get("app")?,
                    model: r.try_get("model")?,
                    state: r.try_get("state")?,
                    items_total: r.try_get("items_total")?,
                    items_done: r.try_get("items_done")?,
                    error: r.try_get("error")?,
                    created_at_ms: r.try_get("created_at")?,
                    started_at_ms: r.try_get("started_at")?,
                    finished_at_ms: r.try_get("finished_at")?,
                })
            })
            .collect()
    }
}

fn event_from_row(r: &sqlx::any::AnyRow) -> Result<ScalingEventRow, StoreError> {
    Ok(ScalingEventRow {
        id: r.try_get("id")?,
        app: r.try_get("app")?,
        variant: r.try_get("variant")?,
        worker_id: r.try_get("worker_id")?,
        action: r.try_get("action")?,
        reason: r.try_get("reason")?,
        cost_before_per_s: r.try_get("cost_before_per_s")?,
        cost_after_per_s: r.try_get("cost_after_per_s")?,
        created_at_ms: r.try_get("created_at")?,
    })
}
