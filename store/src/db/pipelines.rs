//! Pipelines: the registered document and the applied plan, both JSON that the control plane
//! writes and reads. Every read is scoped to one tenant.

use infaas_core::time::now_ms;
use sqlx::any::AnyRow;
use sqlx::Row;

use super::{conflict, new_id, Db};
use crate::StoreError;

/// A pipeline as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineRow {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    /// JSON: the registered document.
    pub spec: String,
    /// JSON: the plan applied, if any.
    pub plan: Option<String>,
    pub validation_key: Option<String>,
    /// The output the validation set's labels grade.
    pub validation_output: Option<String>,
    pub validation_rows: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

const COLS: &str = "id, tenant_id, name, spec, plan, validation_key, validation_output, validation_rows, created_at, updated_at";

fn from_row(r: &AnyRow) -> Result<PipelineRow, StoreError> {
    Ok(PipelineRow {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        spec: r.try_get("spec")?,
        plan: r.try_get("plan")?,
        validation_key: r.try_get("validation_key")?,
        validation_output: r.try_get("validation_output")?,
        validation_rows: r.try_get("validation_rows")?,
        created_at: r.try_get("created_at")?,
        updated_at: r.try_get("updated_at")?,
    })
}

impl Db {
    /// Stores a new pipeline (without a validation set: see
    /// [`Db::set_pipeline_validation`]); `Conflict` when the tenant has one of that name.
    pub async fn create_pipeline(
        &self,
        tenant_id: &str,
        name: &str,
        spec: &str,
        slo_ms: Option<f64>,
    ) -> Result<PipelineRow, StoreError> {
        let id = new_id();
        let now = now_ms();
        sqlx::query(
            "INSERT INTO pipelines (id, tenant_id, name, spec, slo_ms, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $6)",
        )
        .bind(&id)
        .bind(tenant_id)
        .bind(name)
        .bind(spec)
        .bind(slo_ms.unwrap_or(0.0))
        .bind(now)
        .execute(self.pool())
        .await
        .map_err(conflict(|| format!("pipeline '{name}' already exists")))?;
        self.get_pipeline(tenant_id, name).await
    }

    /// A pipeline of the tenant by name; `NotFound` for another tenant's.
    pub async fn get_pipeline(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<PipelineRow, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLS} FROM pipelines WHERE tenant_id = $1 AND name = $2"
        )))
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("pipeline '{name}'")))?;
        from_row(&row)
    }

    /// The tenant's pipelines by name.
    pub async fn list_pipelines(&self, tenant_id: &str) -> Result<Vec<PipelineRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLS} FROM pipelines WHERE tenant_id = $1 ORDER BY name"
        )))
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every tenant's pipelines (for the control loops).
    pub async fn all_pipelines(&self) -> Result<Vec<PipelineRow>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {COLS} FROM pipelines ORDER BY tenant_id, name"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Records the plan applied to a pipeline (or clears it with `None`).
    pub async fn set_pipeline_plan(
        &self,
        tenant_id: &str,
        name: &str,
        plan: Option<&str>,
    ) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE pipelines SET plan = $1, updated_at = $2 WHERE tenant_id = $3 AND name = $4",
        )
        .bind(plan)
        .bind(now_ms())
        .bind(tenant_id)
        .bind(name)
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("pipeline '{name}'")));
        }
        Ok(())
    }

    /// Records a pipeline's validation set (`None`: removes it) and returns the key of the set
    /// it replaces, if any (the caller's to delete).
    pub async fn set_pipeline_validation(
        &self,
        tenant_id: &str,
        name: &str,
        set: Option<(&str, &str, i64)>,
    ) -> Result<Option<String>, StoreError> {
        let before = self.get_pipeline(tenant_id, name).await?;
        let (key, output, rows) = match set {
            Some((k, o, r)) => (Some(k), Some(o), Some(r)),
            None => (None, None, None),
        };
        let done = sqlx::query(
            "UPDATE pipelines SET validation_key = $1, validation_output = $2, validation_rows = $3, \
             updated_at = $4 WHERE tenant_id = $5 AND name = $6",
        )
        .bind(key)
        .bind(output)
        .bind(rows)
        .bind(now_ms())
        .bind(tenant_id)
        .bind(name)
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("pipeline '{name}'")));
        }
        Ok(before
            .validation_key
            .filter(|old| Some(old.as_str()) != key))
    }

    /// Deletes a pipeline of the tenant and returns it (its validation set's key is the
    /// caller's to remove); `NotFound` for another tenant's.
    pub async fn delete_pipeline(
        &self,
        tenant_id: &str,
        name: &str,
    ) -> Result<PipelineRow, StoreError> {
        let row = self.get_pipeline(tenant_id, name).await?;
        sqlx::query("DELETE FROM pipelines WHERE tenant_id = $1 AND name = $2")
            .bind(tenant_id)
            .bind(name)
            .execute(self.pool())
            .await?;
        Ok(row)
    }
}
