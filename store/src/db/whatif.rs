//! What-if runs (SIMULATED replays of a trace under some policies). The request, progress and
//! result are JSON documents that the control plane writes and reads; this module only keeps
//! them, with the run's status and times. Every read is scoped to one tenant.

use infaas_core::time::now_ms;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::{new_id, Db};
use crate::StoreError;

/// Run statuses, as stored.
pub mod status {
    pub const QUEUED: &str = "queued";
    pub const RUNNING: &str = "running";
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";

    /// Whether a run in this status will not change any more.
    pub fn is_final(s: &str) -> bool {
        matches!(s, SUCCEEDED | FAILED)
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct WhatIfRun {
    pub id: String,
    pub tenant_id: String,
    pub status: String,
    /// JSON: what the run replays, on what.
    pub request: String,
    /// JSON: queries simulated per policy.
    pub progress: String,
    pub error: Option<String>,
    /// JSON: the reports per policy (read only by [`Db::get_whatif_run`] with the result).
    pub result: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

const COLS: &str =
    "id, tenant_id, status, request, progress, error, created_at, started_at, finished_at";

fn from_row(r: &AnyRow, with_result: bool) -> Result<WhatIfRun, StoreError> {
    Ok(WhatIfRun {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        status: r.try_get("status")?,
        request: r.try_get("request")?,
        progress: r.try_get("progress")?,
        error: r.try_get("error")?,
        result: if with_result {
            r.try_get("result")?
        } else {
            None
        },
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
    })
}

impl Db {
    /// Stores a queued run.
    pub async fn create_whatif_run(
        &self,
        tenant_id: &str,
        request: &str,
        progress: &str,
    ) -> Result<WhatIfRun, StoreError> {
        let id = new_id();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO whatif_runs (id, tenant_id, status, request, progress, created_at, updated_at) \
             VALUES ($1, $2, 'queued', $3, $4, $5, $5)",
        )
        .bind(&id)
        .bind(tenant_id)
        .bind(request)
        .bind(progress)
        .bind(now)
        .execute(self.pool())
        .await?;
        self.get_whatif_run(tenant_id, &id, false).await
    }

    /// A run of the tenant (with its result when `with_result`); `NotFound` for another
    /// tenant's id.
    pub async fn get_whatif_run(
        &self,
        tenant_id: &str,
        id: &str,
        with_result: bool,
    ) -> Result<WhatIfRun, StoreError> {
        let cols = if with_result {
            format!("{COLS}, result")
        } else {
            COLS.to_string()
        };
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {cols} FROM whatif_runs WHERE tenant_id = $1 AND id = $2"
        )))
        .bind(tenant_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("what-if run '{id}'")))?;
        from_row(&row, with_result)
    }

    /// The tenant's most recent runs (at most `limit`), newest first, without results.
    pub async fn list_whatif_runs(
        &self,
        tenant_id: &str,
        limit: i64,
    ) -> Result<Vec<WhatIfRun>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {COLS} FROM whatif_runs WHERE tenant_id = $1 \
             ORDER BY created_at DESC, id LIMIT $2"
        )))
        .bind(tenant_id)
        .bind(limit)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(|r| from_row(r, false)).collect()
    }

    /// Runs of the tenant that are queued or running.
    pub async fn unfinished_whatif_runs(&self, tenant_id: &str) -> Result<i64, StoreError> {
        let n: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM whatif_runs WHERE tenant_id = $1 \
             AND status IN ('queued', 'running')",
        )
        .bind(tenant_id)
        .fetch_one(self.pool())
        .await?;
        Ok(n)
    }

    /// Moves a queued run to running; false when it is gone (deleted) or not queued.
    pub async fn start_whatif_run(&self, id: &str) -> Result<bool, StoreError> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE whatif_runs SET status = 'running', started_at = $1, updated_at = $1 \
             WHERE id = $2 AND status = 'queued'",
        )
        .bind(now)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the progress of a running run; false when it is gone or no longer running.
    pub async fn set_whatif_progress(&self, id: &str, progress: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE whatif_runs SET progress = $1, updated_at = $2 \
             WHERE id = $3 AND status = 'running'",
        )
        .bind(progress)
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Ends a run that has not ended: `succeeded` with its result or `failed` with an
    /// error; false when it is gone or already final.
    pub async fn finish_whatif_run(
        &self,
        id: &str,
        new_status: &str,
        progress: &str,
        error: Option<&str>,
        result: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE whatif_runs SET status = $1, progress = $2, error = $3, result = $4, \
             finished_at = $5, updated_at = $5 \
             WHERE id = $6 AND status IN ('queued', 'running')",
        )
        .bind(new_status)
        .bind(progress)
        .bind(error)
        .bind(result)
        .bind(now)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Marks every queued or running run (all tenants) failed with `error`: at start, no
    /// run of an earlier process can still be under way. Returns how many were.
    pub async fn fail_unfinished_whatif_runs(&self, error: &str) -> Result<u64, StoreError> {
        let now = now_ms();
        let done = sqlx::query(
            "UPDATE whatif_runs SET status = 'failed', error = $1, finished_at = $2, \
             updated_at = $2 WHERE status IN ('queued', 'running')",
        )
        .bind(error)
        .bind(now)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Deletes a run of the tenant; `NotFound` for another tenant's id.
    pub async fn delete_whatif_run(&self, tenant_id: &str, id: &str) -> Result<(), StoreError> {
        let done = sqlx::query("DELETE FROM whatif_runs WHERE tenant_id = $1 AND id = $2")
            .bind(tenant_id)
            .bind(id)
            .execute(self.pool())
            .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("what-if run '{id}'")));
        }
        Ok(())
    }
}
