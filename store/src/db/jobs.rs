//! Offline (batch) jobs and their chunks. A chunk is a row range of one input object; it is
//! claimed with a lease, and finishing it (output written first) moves `items_done` in the
//! same transaction, so a chunk counts once however many times it was attempted.

use infaas_core::time::now_ms;
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::{new_id, Db};
use crate::StoreError;

/// Job states, as stored.
pub mod state {
    pub const QUEUED: &str = "queued";
    pub const RUNNING: &str = "running";
    pub const PAUSED: &str = "paused";
    pub const SUCCEEDED: &str = "succeeded";
    pub const FAILED: &str = "failed";
    pub const CANCELLED: &str = "cancelled";

    /// Whether a job in this state will not change any more.
    pub fn is_final(s: &str) -> bool {
        matches!(s, SUCCEEDED | FAILED | CANCELLED)
    }
}

/// A job as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    pub id: String,
    pub tenant_id: String,
    pub app: Option<String>,
    pub model: Option<String>,
    /// A pipeline the job runs (then `app` and `model` are `None`).
    pub pipeline: Option<String>,
    pub min_accuracy: Option<f64>,
    pub variant_id: Option<String>,
    pub variant_name: Option<String>,
    pub state: String,
    pub paused_reason: Option<String>,
    pub input_path: String,
    pub output_path: String,
    pub webhook_url: Option<String>,
    pub items_total: i64,
    pub items_done: i64,
    pub error: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
    pub updated_at: i64,
}

/// What a new job needs.
#[derive(Debug, Clone)]
pub struct NewJob {
    pub app: Option<String>,
    pub model: Option<String>,
    pub pipeline: Option<String>,
    pub min_accuracy: Option<f64>,
    pub input_path: String,
    pub output_path: String,
    pub webhook_url: Option<String>,
}

/// A row range of one input object.
#[derive(Debug, Clone, PartialEq)]
pub struct NewChunk {
    pub input_key: String,
    /// `npz` or `jsonl`.
    pub format: String,
    pub row_start: i64,
    pub items: i64,
}

/// A chunk as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub job_id: String,
    pub index: i64,
    pub tenant_id: String,
    pub input_key: String,
    pub format: String,
    pub row_start: i64,
    pub items: i64,
    /// Index of the chunk's first item in the whole job.
    pub item_start: i64,
    pub output_key: Option<String>,
    pub state: String,
    pub attempts: i64,
    pub worker_id: Option<String>,
}

/// Chunk counts of a job by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChunkCounts {
    pub pending: i64,
    pub running: i64,
    pub done: i64,
}

const JOB_COLS: &str =
    "id, tenant_id, app_name, model_name, pipeline_name, min_accuracy, variant_id, variant_name, \
    state, paused_reason, input_path, output_path, webhook_url, items_total, items_done, error, \
    created_at, started_at, finished_at, updated_at";

const CHUNK_COLS: &str = "job_id, chunk_index, tenant_id, input_key, format, row_start, items, \
    item_start, output_key, state, attempts, worker_id";

fn job_from_row(r: &AnyRow) -> Result<Job, StoreError> {
    Ok(Job {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        app: r.try_get("app_name")?,
        model: r.try_get("model_name")?,
        pipeline: r.try_get("pipeline_name")?,
        min_accuracy: r.try_get("min_accuracy")?,
        variant_id: r.try_get("variant_id")?,
        variant_name: r.try_get("variant_name")?,
        state: r.try_get("state")?,
        paused_reason: r.try_get("paused_reason")?,
        input_path: r.try_get("input_path")?,
        output_path: r.try_get("output_path")?,
        webhook_url: r.try_get("webhook_url")?,
        items_total: r.try_get("items_total")?,
        items_done: r.try_get("items_done")?,
        error: r.try_get("error")?,
        created_at: r.try_get("created_at")?,
        started_at: r.try_get("started_at")?,
        finished_at: r.try_get("finished_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

fn chunk_from_row(r: &AnyRow) -> Result<Chunk, StoreError> {
    Ok(Chunk {
        job_id: r.try_get("job_id")?,
        index: r.try_get("chunk_index")?,
        tenant_id: r.try_get("tenant_id")?,
        input_key: r.try_get("input_key")?,
        format: r.try_get("format")?,
        row_start: r.try_get("row_start")?,
        items: r.try_get("items")?,
        item_start: r.try_get("item_start")?,
        output_key: r.try_get("output_key")?,
        state: r.try_get("state")?,
        attempts: r.try_get("attempts")?,
        worker_id: r.try_get("worker_id")?,
    })
}

impl Db {
    /// Stores a queued job with its chunks (in order) in one transaction.
    pub async fn create_job(
        &self,
        tenant_id: &str,
        job: &NewJob,
        chunks: &[NewChunk],
    ) -> Result<Job, StoreError> {
        let id = new_id();
        let now = now_ms();
        let total: i64 = chunks.iter().map(|c| c.items).sum();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO offline_jobs (id, tenant_id, app_name, model_name, pipeline_name, min_accuracy, state, \
             input_path, output_path, webhook_url, items_total, items_done, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $11, $5, 'queued', $6, $7, $8, $9, 0, $10, $10)",
        )
        .bind(&id)
        .bind(tenant_id)
        .bind(&job.app)
        .bind(&job.model)
        .bind(job.min_accuracy)
        .bind(&job.input_path)
        .bind(&job.output_path)
        .bind(&job.webhook_url)
        .bind(total)
        .bind(now)
        .bind(&job.pipeline)
        .execute(&mut *tx)
        .await?;
        let mut item_start = 0i64;
        for (i, c) in chunks.iter().enumerate() {
            sqlx::query(
                "INSERT INTO job_chunks (job_id, chunk_index, tenant_id, input_key, format, row_start, \
                 items, item_start, state, attempts, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending', 0, $9)",
            )
            .bind(&id)
            .bind(i as i64)
            .bind(tenant_id)
            .bind(&c.input_key)
            .bind(&c.format)
            .bind(c.row_start)
            .bind(c.items)
            .bind(item_start)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            item_start += c.items;
        }
        tx.commit().await?;
        self.get_job(tenant_id, &id).await
    }

    /// A job of the tenant; `NotFound` for another tenant's id.
    pub async fn get_job(&self, tenant_id: &str, id: &str) -> Result<Job, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLS} FROM offline_jobs WHERE tenant_id = $1 AND id = $2"
        )))
        .bind(tenant_id)
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("job '{id}'")))?;
        job_from_row(&row)
    }

    /// The tenant's jobs, newest first.
    pub async fn list_jobs(&self, tenant_id: &str) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLS} FROM offline_jobs WHERE tenant_id = $1 ORDER BY created_at DESC, id"
        )))
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Every job that is not final (all tenants), oldest first: what the job runner works on.
    pub async fn unfinished_jobs(&self) -> Result<Vec<Job>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLS} FROM offline_jobs WHERE state IN ('queued', 'running', 'paused') \
             ORDER BY created_at, id"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Moves a job that is not final to `state` (with a pause reason or an error); returns
    /// false when the job was already final (e.g. cancelled meanwhile).
    pub async fn set_job_state(
        &self,
        id: &str,
        new_state: &str,
        paused_reason: Option<&str>,
        error: Option<&str>,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let finished = state::is_final(new_state).then_some(now);
        let started = (new_state == state::RUNNING).then_some(now);
        let done = sqlx::query(
            "UPDATE offline_jobs SET state = $1, paused_reason = $2, error = $3, updated_at = $4, \
             started_at = COALESCE(started_at, $5), finished_at = COALESCE($6, finished_at) \
             WHERE id = $7 AND state IN ('queued', 'running', 'paused')",
        )
        .bind(new_state)
        .bind(paused_reason)
        .bind(error)
        .bind(now)
        .bind(started)
        .bind(finished)
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Records the variant a job runs on.
    pub async fn set_job_variant(
        &self,
        id: &str,
        variant_id: &str,
        variant_name: &str,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE offline_jobs SET variant_id = $1, variant_name = $2, updated_at = $3 WHERE id = $4",
        )
        .bind(variant_id)
        .bind(variant_name)
        .bind(now_ms())
        .bind(id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Cancels a job of the tenant unless it is final; returns the job as it is now.
    pub async fn cancel_job(&self, tenant_id: &str, id: &str) -> Result<Job, StoreError> {
        let job = self.get_job(tenant_id, id).await?;
        self.set_job_state(&job.id, state::CANCELLED, None, None)
            .await?;
        self.get_job(tenant_id, id).await
    }

    /// Claims the first chunk that is pending or whose lease ran out, for `lease_ms`.
    pub async fn claim_chunk(
        &self,
        job_id: &str,
        worker_id: &str,
        lease_ms: i64,
    ) -> Result<Option<Chunk>, StoreError> {
        let now = now_ms();
        // A few tries: another runner may claim the same chunk between the read and the write.
        for _ in 0..4 {
            let Some(row) = sqlx::query(AssertSqlSafe(format!(
                "SELECT {CHUNK_COLS} FROM job_chunks WHERE job_id = $1 AND \
                 (state = 'pending' OR (state = 'running' AND lease_until < $2)) \
                 ORDER BY chunk_index LIMIT 1"
            )))
            .bind(job_id)
            .bind(now)
            .fetch_optional(self.pool())
            .await?
            else {
                return Ok(None);
            };
            let mut chunk = chunk_from_row(&row)?;
            let claimed = sqlx::query(
                "UPDATE job_chunks SET state = 'running', worker_id = $1, lease_until = $2, \
                 attempts = attempts + 1, updated_at = $3 \
                 WHERE job_id = $4 AND chunk_index = $5 AND \
                 (state = 'pending' OR (state = 'running' AND lease_until < $3))",
            )
            .bind(worker_id)
            .bind(now + lease_ms)
            .bind(now)
            .bind(job_id)
            .bind(chunk.index)
            .execute(self.pool())
            .await?;
            if claimed.rows_affected() == 1 {
                chunk.state = "running".into();
                chunk.attempts += 1;
                chunk.worker_id = Some(worker_id.to_string());
                return Ok(Some(chunk));
            }
        }
        Ok(None)
    }

    /// Extends a claimed chunk's lease.
    pub async fn renew_chunk(
        &self,
        job_id: &str,
        index: i64,
        lease_ms: i64,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE job_chunks SET lease_until = $1 WHERE job_id = $2 AND chunk_index = $3 \
             AND state = 'running'",
        )
        .bind(now_ms() + lease_ms)
        .bind(job_id)
        .bind(index)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Puts a claimed chunk back (its attempt failed or the job paused).
    pub async fn release_chunk(&self, job_id: &str, index: i64) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE job_chunks SET state = 'pending', lease_until = NULL, updated_at = $1 \
             WHERE job_id = $2 AND chunk_index = $3 AND state = 'running'",
        )
        .bind(now_ms())
        .bind(job_id)
        .bind(index)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Marks a running chunk done with its output (already written) and counts its items;
    /// returns false (and counts nothing) when the chunk was not running.
    pub async fn complete_chunk(
        &self,
        job_id: &str,
        index: i64,
        output_key: &str,
    ) -> Result<bool, StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        let done = sqlx::query(
            "UPDATE job_chunks SET state = 'done', output_key = $1, lease_until = NULL, updated_at = $2 \
             WHERE job_id = $3 AND chunk_index = $4 AND state = 'running'",
        )
        .bind(output_key)
        .bind(now)
        .bind(job_id)
        .bind(index)
        .execute(&mut *tx)
        .await?;
        if done.rows_affected() != 1 {
            tx.rollback().await?;
            return Ok(false);
        }
        sqlx::query(
            "UPDATE offline_jobs SET items_done = items_done + \
             (SELECT items FROM job_chunks WHERE job_id = $1 AND chunk_index = $2), updated_at = $3 \
             WHERE id = $1",
        )
        .bind(job_id)
        .bind(index)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(true)
    }

    pub async fn chunk_counts(&self, job_id: &str) -> Result<ChunkCounts, StoreError> {
        let rows = sqlx::query(
            "SELECT state, COUNT(*) AS n FROM job_chunks WHERE job_id = $1 GROUP BY state",
        )
        .bind(job_id)
        .fetch_all(self.pool())
        .await?;
        let mut c = ChunkCounts::default();
        for r in rows {
            let state: String = r.try_get("state")?;
            let n: i64 = r.try_get("n")?;
            match state.as_str() {
                "pending" => c.pending = n,
                "running" => c.running = n,
                "done" => c.done = n,
                _ => {}
            }
        }
        Ok(c)
    }

    /// A job's chunks in order.
    pub async fn list_chunks(&self, job_id: &str) -> Result<Vec<Chunk>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {CHUNK_COLS} FROM job_chunks WHERE job_id = $1 ORDER BY chunk_index"
        )))
        .bind(job_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(chunk_from_row).collect()
    }
}
