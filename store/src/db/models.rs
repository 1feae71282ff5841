//! Applications, models, model files, variants and variant profiles.

use std::collections::HashMap;

use infaas_core::time::now_ms;
use infaas_core::{
    Application, DeclaredMetadata, FileKind, HardwareKind, LatencyPoint, Model, ModelFile,
    ModelStatus, Variant,
};
use sqlx::any::AnyRow;
use sqlx::{AssertSqlSafe, Row};

use super::{conflict, new_id, Db};
use crate::StoreError;

/// What a registration stores before background work starts.
#[derive(Debug, Clone)]
pub struct NewModel {
    pub id: String,
    pub name: String,
    pub app: String,
    pub task: String,
    pub source_key: String,
    pub validation_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub declared: DeclaredMetadata,
    pub signature: serde_json::Value,
}

/// A variant to create (profile filled in later).
#[derive(Debug, Clone)]
pub struct NewVariant {
    pub name: String,
    pub file_id: String,
    pub kind: FileKind,
    pub hardware: HardwareKind,
    pub threads: usize,
    pub max_batch: usize,
}

/// A variant a registration did not keep: another variant of the model on the same
/// hardware, threads and max batch dominates it (status `pruned`; never served, not in
/// [`Db::list_variants`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PrunedVariant {
    pub name: String,
    pub file_kind: FileKind,
    pub hardware: HardwareKind,
    pub threads: usize,
    pub max_batch: usize,
    pub accuracy: Option<f64>,
    /// The name of the kept variant that dominates it.
    pub dominated_by: String,
    /// Why, e.g. `accuracy 0.379 <= 1.000 of opt, not faster at any batch`.
    pub reason: String,
}

/// A variant to prune at the end of a registration ([`Db::finish_registration`]).
#[derive(Debug, Clone)]
pub struct PruneMark {
    pub variant_id: String,
    /// The name of the kept variant that dominates it.
    pub dominated_by: String,
    pub reason: String,
}

const MODEL_COLS: &str = "m.id, m.tenant_id, m.app_id, a.name AS app_name, m.name, m.task, m.status, \
    m.error, m.progress, m.progress_detail, m.source_key, m.validation_key, m.size_bytes, m.sha256, \
    m.declared, m.signature, m.created_at, m.updated_at";

fn corrupt(what: &str, detail: impl ToString) -> StoreError {
    StoreError::Corrupt {
        what: what.to_string(),
        detail: detail.to_string(),
    }
}

fn model_from_row(r: &AnyRow) -> Result<Model, StoreError> {
    let status: String = r.try_get("status")?;
    let declared: String = r.try_get("declared")?;
    let signature: Option<String> = r.try_get("signature")?;
    Ok(Model {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        app_id: r.try_get("app_id")?,
        app: r.try_get("app_name")?,
        name: r.try_get("name")?,
        task: r.try_get("task")?,
        status: ModelStatus::parse(&status).ok_or_else(|| corrupt("models.status", &status))?,
        error: r.try_get("error")?,
        progress: r.try_get("progress")?,
        progress_detail: r.try_get("progress_detail")?,
        source_key: r.try_get("source_key")?,
        validation_key: r.try_get("validation_key")?,
        size_bytes: r.try_get("size_bytes")?,
        sha256: r.try_get("sha256")?,
        declared: serde_json::from_str(&declared).map_err(|e| corrupt("models.declared", e))?,
        signature: signature
            .map(|s| serde_json::from_str(&s))
            .transpose()
            .map_err(|e| corrupt("models.signature", e))?,
        created_at_ms: r.try_get("created_at")?,
        updated_at_ms: r.try_get("updated_at")?,
    })
}

fn file_from_row(r: &AnyRow) -> Result<ModelFile, StoreError> {
    let kind: String = r.try_get("kind")?;
    Ok(ModelFile {
        id: r.try_get("id")?,
        model_id: r.try_get("model_id")?,
        kind: FileKind::parse(&kind).ok_or_else(|| corrupt("model_files.kind", &kind))?,
        object_key: r.try_get("object_key")?,
        size_bytes: r.try_get("size_bytes")?,
        accuracy: r.try_get("accuracy")?,
    })
}

impl Db {
    /// Stores a new model, creating its application when new.
    pub async fn create_model(&self, tenant_id: &str, m: &NewModel) -> Result<Model, StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO applications (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tenant_id, name) DO NOTHING",
        )
        .bind(new_id())
        .bind(tenant_id)
        .bind(&m.app)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let app_id: String =
            sqlx::query("SELECT id FROM applications WHERE tenant_id = $1 AND name = $2")
                .bind(tenant_id)
                .bind(&m.app)
                .fetch_one(&mut *tx)
                .await?
                .try_get(0)?;
        let declared = serde_json::to_string(&m.declared).map_err(|e| corrupt("declared", e))?;
        let signature = serde_json::to_string(&m.signature).map_err(|e| corrupt("signature", e))?;
        sqlx::query(
            "INSERT INTO models (id, tenant_id, app_id, name, task, status, progress, source_key, \
             validation_key, size_bytes, sha256, declared, signature, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', 0, $6, $7, $8, $9, $10, $11, $12, $12)",
        )
        .bind(&m.id)
        .bind(tenant_id)
        .bind(&app_id)
        .bind(&m.name)
        .bind(&m.task)
        .bind(&m.source_key)
        .bind(&m.validation_key)
        .bind(m.size_bytes)
        .bind(&m.sha256)
        .bind(declared)
        .bind(signature)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(conflict(|| format!("model '{}'", m.name)))?;
        tx.commit().await?;
        self.get_model(tenant_id, &m.name).await
    }

    pub async fn get_model(&self, tenant_id: &str, name: &str) -> Result<Model, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {MODEL_COLS} FROM models m JOIN applications a ON a.id = m.app_id \
             WHERE m.tenant_id = $1 AND m.name = $2"
        )))
        .bind(tenant_id)
        .bind(name)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("model '{name}'")))?;
        model_from_row(&row)
    }

    pub async fn get_model_by_id(&self, id: &str) -> Result<Model, StoreError> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {MODEL_COLS} FROM models m JOIN applications a ON a.id = m.app_id WHERE m.id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("model '{id}'")))?;
        model_from_row(&row)
    }

    /// The tenant's models, optionally of one application, by name.
    pub async fn list_models(
        &self,
        tenant_id: &str,
        app: Option<&str>,
    ) -> Result<Vec<Model>, StoreError> {
        let rows = match app {
            Some(app) => {
                sqlx::query(AssertSqlSafe(format!(
                    "SELECT {MODEL_COLS} FROM models m JOIN applications a ON a.id = m.app_id \
                     WHERE m.tenant_id = $1 AND a.name = $2 ORDER BY m.name"
                )))
                .bind(tenant_id)
                .bind(app)
                .fetch_all(self.pool())
                .await?
            }
            None => {
                sqlx::query(AssertSqlSafe(format!(
                    "SELECT {MODEL_COLS} FROM models m JOIN applications a ON a.id = m.app_id \
                     WHERE m.tenant_id = $1 ORDER BY m.name"
                )))
                .bind(tenant_id)
                .fetch_all(self.pool())
                .await?
            }
        };
        rows.iter().map(model_from_row).collect()
    }

    /// Models of every tenant whose background work is unfinished (resumed at start).
    pub async fn models_in_progress(&self) -> Result<Vec<Model>, StoreError> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {MODEL_COLS} FROM models m JOIN applications a ON a.id = m.app_id \
             WHERE m.status IN ('pending', 'generating', 'profiling') ORDER BY m.created_at"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(model_from_row).collect()
    }

    pub async fn set_model_progress(
        &self,
        model_id: &str,
        status: ModelStatus,
        progress: f64,
        detail: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        sqlx::query(
            "UPDATE models SET status = $1, progress = $2, progress_detail = $3, error = $4, updated_at = $5 \
             WHERE id = $6",
        )
        .bind(status.as_str())
        .bind(progress.clamp(0.0, 1.0))
        .bind(detail)
        .bind(error)
        .bind(now_ms())
        .bind(model_id)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Ends a registration: marks the `pruned` variants of the model pruned (with the kept
    /// variant that dominates each and why) and the model ready with `detail`, in one
    /// transaction, so that a registration stopped before it resumes with every variant and
    /// prunes again, and one stopped after it is done.
    pub async fn finish_registration(
        &self,
        model_id: &str,
        pruned: &[PruneMark],
        detail: &str,
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        for p in pruned {
            sqlx::query(
                "UPDATE variants SET status = 'pruned', pruned_by = $1, pruned_reason = $2, \
                 updated_at = $3 WHERE id = $4 AND model_id = $5",
            )
            .bind(&p.dominated_by)
            .bind(&p.reason)
            .bind(now)
            .bind(&p.variant_id)
            .bind(model_id)
            .execute(&mut *tx)
            .await?;
        }
        sqlx::query(
            "UPDATE models SET status = 'ready', progress = 1, progress_detail = $1, error = NULL, \
             updated_at = $2 WHERE id = $3",
        )
        .bind(detail)
        .bind(now)
        .bind(model_id)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// The variants of a model its registration pruned, with why.
    pub async fn list_pruned_variants(
        &self,
        model_id: &str,
    ) -> Result<Vec<PrunedVariant>, StoreError> {
        let rows = sqlx::query(
            "SELECT name, optimization, hardware, threads, max_batch, accuracy, pruned_by, \
             pruned_reason FROM variants WHERE model_id = $1 AND status = 'pruned' \
             ORDER BY optimization, hardware, threads, max_batch",
        )
        .bind(model_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                let kind: String = r.try_get("optimization")?;
                let hw: String = r.try_get("hardware")?;
                let threads: i64 = r.try_get("threads")?;
                let max_batch: i64 = r.try_get("max_batch")?;
                let by: Option<String> = r.try_get("pruned_by")?;
                let reason: Option<String> = r.try_get("pruned_reason")?;
                Ok(PrunedVariant {
                    name: r.try_get("name")?,
                    file_kind: FileKind::parse(&kind)
                        .ok_or_else(|| corrupt("variants.optimization", &kind))?,
                    hardware: HardwareKind::parse(&hw)
                        .ok_or_else(|| corrupt("variants.hardware", &hw))?,
                    threads: threads.max(0) as usize,
                    max_batch: max_batch.max(0) as usize,
                    accuracy: r.try_get("accuracy")?,
                    dominated_by: by.unwrap_or_default(),
                    reason: reason.unwrap_or_default(),
                })
            })
            .collect()
    }

    /// Deletes a model with its files, variants and profiles; returns it.
    pub async fn delete_model(&self, tenant_id: &str, name: &str) -> Result<Model, StoreError> {
        let model = self.get_model(tenant_id, name).await?;
        sqlx::query("DELETE FROM models WHERE id = $1 AND tenant_id = $2")
            .bind(&model.id)
            .bind(tenant_id)
            .execute(self.pool())
            .await?;
        Ok(model)
    }

    /// The tenant's applications with their model names.
    pub async fn list_apps(
        &self,
        tenant_id: &str,
    ) -> Result<Vec<(Application, Vec<String>)>, StoreError> {
        let apps = sqlx::query(
            "SELECT id, tenant_id, name, created_at FROM applications WHERE tenant_id = $1 ORDER BY name",
        )
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        let models =
            sqlx::query("SELECT app_id, name FROM models WHERE tenant_id = $1 ORDER BY name")
                .bind(tenant_id)
                .fetch_all(self.pool())
                .await?;
        let mut by_app: HashMap<String, Vec<String>> = HashMap::new();
        for r in &models {
            by_app
                .entry(r.try_get("app_id")?)
                .or_default()
                .push(r.try_get("name")?);
        }
        apps.iter()
            .map(|r| {
                let app = Application {
                    id: r.try_get("id")?,
                    tenant_id: r.try_get("tenant_id")?,
                    name: r.try_get("name")?,
                    created_at_ms: r.try_get("created_at")?,
                };
                let names = by_app.remove(&app.id).unwrap_or_default();
                Ok((app, names))
            })
            .collect()
    }

    /// Records a model file once per (model, kind); returns the stored row.
    pub async fn upsert_model_file(
        &self,
        tenant_id: &str,
        model_id: &str,
        kind: FileKind,
        object_key: &str,
        size_bytes: i64,
    ) -> Result<ModelFile, StoreError> {
        sqlx::query(
            "INSERT INTO model_files (id, tenant_id, model_id, kind, object_key, size_bytes, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (model_id, kind) DO NOTHING",
        )
        .bind(new_id())
        .bind(tenant_id)
        .bind(model_id)
        .bind(kind.as_str())
        .bind(object_key)
        .bind(size_bytes)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        let row = sqlx::query(
            "SELECT id, model_id, kind, object_key, size_bytes, accuracy FROM model_files \
             WHERE model_id = $1 AND kind = $2",
        )
        .bind(model_id)
        .bind(kind.as_str())
        .fetch_one(self.pool())
        .await?;
        file_from_row(&row)
    }

    pub async fn list_model_files(&self, model_id: &str) -> Result<Vec<ModelFile>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, model_id, kind, object_key, size_bytes, accuracy FROM model_files \
             WHERE model_id = $1 ORDER BY created_at, kind",
        )
        .bind(model_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(file_from_row).collect()
    }

    /// Sets a file's measured accuracy and copies it to the file's variants.
    pub async fn set_file_accuracy(&self, file_id: &str, accuracy: f64) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("UPDATE model_files SET accuracy = $1 WHERE id = $2")
            .bind(accuracy)
            .bind(file_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE variants SET accuracy = $1 WHERE file_id = $2")
            .bind(accuracy)
            .bind(file_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Creates the variants that do not exist yet (names are unique per tenant).
    pub async fn ensure_variants(
        &self,
        tenant_id: &str,
        model_id: &str,
        variants: &[NewVariant],
    ) -> Result<(), StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        for v in variants {
            sqlx::query(
                "INSERT INTO variants (id, tenant_id, model_id, file_id, name, precision, optimization, \
                 hardware, threads, max_batch, status, accuracy, created_at, updated_at) \
                 SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', f.accuracy, $11, $11 \
                 FROM model_files f WHERE f.id = $4 \
                 ON CONFLICT (tenant_id, name) DO NOTHING",
            )
            .bind(new_id())
            .bind(tenant_id)
            .bind(model_id)
            .bind(&v.file_id)
            .bind(&v.name)
            .bind(v.kind.precision())
            .bind(v.kind.as_str())
            .bind(v.hardware.as_str())
            .bind(v.threads as i64)
            .bind(v.max_batch as i64)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Stores the profile of every variant of `file_id` with `threads` on `hardware`: each
    /// gets the latency points up to its own max batch.
    pub async fn record_profile(
        &self,
        file_id: &str,
        hardware: HardwareKind,
        threads: usize,
        load_ms: f64,
        memory_bytes: i64,
        points: &[LatencyPoint],
    ) -> Result<usize, StoreError> {
        let now = now_ms();
        let mut tx = self.pool().begin().await?;
        // Write first: an SQLite transaction that has read cannot wait for the write lock
        // (it fails at once with "database is locked" while another connection writes).
        sqlx::query(
            "UPDATE variants SET status = 'profiled', load_ms = $1, memory_bytes = $2, updated_at = $3 \
             WHERE file_id = $4 AND hardware = $5 AND threads = $6",
        )
        .bind(load_ms)
        .bind(memory_bytes)
        .bind(now)
        .bind(file_id)
        .bind(hardware.as_str())
        .bind(threads as i64)
        .execute(&mut *tx)
        .await?;
        let rows = sqlx::query(
            "SELECT id, max_batch FROM variants WHERE file_id = $1 AND hardware = $2 AND threads = $3",
        )
        .bind(file_id)
        .bind(hardware.as_str())
        .bind(threads as i64)
        .fetch_all(&mut *tx)
        .await?;
        for r in &rows {
            let id: String = r.try_get("id")?;
            let max_batch: i64 = r.try_get("max_batch")?;
            sqlx::query("DELETE FROM variant_profiles WHERE variant_id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await?;
            for p in points.iter().filter(|p| p.batch as i64 <= max_batch) {
                sqlx::query(
                    "INSERT INTO variant_profiles (variant_id, batch_size, p50_ms, p99_ms, mean_ms, throughput_per_s) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(&id)
                .bind(p.batch as i64)
                .bind(p.p50_ms)
                .bind(p.p99_ms)
                .bind(p.mean_ms)
                .bind(p.throughput_per_s)
                .execute(&mut *tx)
                .await?;
            }
        }
        tx.commit().await?;
        Ok(rows.len())
    }

    /// Variants of a model with their latency profiles, by name; not the pruned ones
    /// ([`Db::list_pruned_variants`]).
    pub async fn list_variants(&self, model_id: &str) -> Result<Vec<Variant>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, model_id, file_id, name, optimization, hardware, threads, max_batch, status, \
             accuracy, load_ms, memory_bytes FROM variants WHERE model_id = $1 AND status <> 'pruned' \
             ORDER BY optimization, hardware, threads, max_batch",
        )
        .bind(model_id)
        .fetch_all(self.pool())
        .await?;
        let points = sqlx::query(
            "SELECT p.variant_id, p.batch_size, p.p50_ms, p.p99_ms, p.mean_ms, p.throughput_per_s \
             FROM variant_profiles p JOIN variants v ON v.id = p.variant_id \
             WHERE v.model_id = $1 AND v.status <> 'pruned' ORDER BY p.batch_size",
        )
        .bind(model_id)
        .fetch_all(self.pool())
        .await?;
        let mut by_variant: HashMap<String, Vec<LatencyPoint>> = HashMap::new();
        for p in &points {
            let batch: i64 = p.try_get("batch_size")?;
            by_variant
                .entry(p.try_get("variant_id")?)
                .or_default()
                .push(LatencyPoint {
                    batch: batch.max(0) as usize,
                    p50_ms: p.try_get("p50_ms")?,
                    p99_ms: p.try_get("p99_ms")?,
                    mean_ms: p.try_get("mean_ms")?,
                    throughput_per_s: p.try_get("throughput_per_s")?,
                });
        }
        rows.iter()
            .map(|r| {
                let id: String = r.try_get("id")?;
                let kind: String = r.try_get("optimization")?;
                let hw: String = r.try_get("hardware")?;
                let threads: i64 = r.try_get("threads")?;
                let max_batch: i64 = r.try_get("max_batch")?;
                Ok(Variant {
                    latency: by_variant.remove(&id).unwrap_or_default(),
                    model_id: r.try_get("model_id")?,
                    file_id: r.try_get("file_id")?,
                    name: r.try_get("name")?,
                    file_kind: FileKind::parse(&kind)
                        .ok_or_else(|| corrupt("variants.optimization", &kind))?,
                    hardware: HardwareKind::parse(&hw)
                        .ok_or_else(|| corrupt("variants.hardware", &hw))?,
                    threads: threads.max(0) as usize,
                    max_batch: max_batch.max(0) as usize,
                    status: r.try_get("status")?,
                    accuracy: r.try_get("accuracy")?,
                    load_ms: r.try_get("load_ms")?,
                    memory_bytes: r.try_get("memory_bytes")?,
                    id,
                })
            })
            .collect()
    }
}

/// A profiled variant of a ready model, with what serving needs to find and load it.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogEntry {
    pub tenant_id: String,
    pub app: String,
    pub model: String,
    pub model_id: String,
    pub object_key: String,
    pub declared_output: Option<String>,
    /// The model's input/output signature (JSON, as stored at registration).
    pub signature: Option<serde_json::Value>,
    pub variant: Variant,
}

impl Db {
    /// Every profiled variant of every ready model (all tenants), for the serving index.
    pub async fn serving_catalog(&self) -> Result<Vec<CatalogEntry>, StoreError> {
        let rows = sqlx::query(
            "SELECT m.id AS model_id, m.tenant_id, a.name AS app_name, m.name AS model_name, m.declared, \
             m.signature FROM models m JOIN applications a ON a.id = m.app_id WHERE m.status = 'ready'",
        )
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::new();
        for r in &rows {
            let model_id: String = r.try_get("model_id")?;
            let declared: String = r.try_get("declared")?;
            let declared: DeclaredMetadata =
                serde_json::from_str(&declared).map_err(|e| corrupt("models.declared", e))?;
            let signature: Option<String> = r.try_get("signature")?;
            let signature: Option<serde_json::Value> = signature
                .map(|s| serde_json::from_str(&s))
                .transpose()
                .map_err(|e| corrupt("models.signature", e))?;
            let files = self.list_model_files(&model_id).await?;
            for v in self.list_variants(&model_id).await? {
                if v.status != "profiled" {
                    continue;
                }
                let Some(file) = files.iter().find(|f| f.id == v.file_id) else {
                    continue;
                };
                out.push(CatalogEntry {
                    tenant_id: r.try_get("tenant_id")?,
                    app: r.try_get("app_name")?,
                    model: r.try_get("model_name")?,
                    model_id: model_id.clone(),
                    object_key: file.object_key.clone(),
                    declared_output: declared.output.clone(),
                    signature: signature.clone(),
                    variant: v,
                });
            }
        }
        Ok(out)
    }
}
