//! Tenants and their API keys.

use infaas_core::{time::now_ms, ApiKey, Quotas, Role, Tenant};
use sqlx::any::AnyRow;
use sqlx::Row;

use super::{conflict, new_id, Db};
use crate::StoreError;

fn tenant_from_row(r: &AnyRow) -> Result<Tenant, StoreError> {
    Ok(Tenant {
        id: r.try_get("id")?,
        name: r.try_get("name")?,
        created_at_ms: r.try_get("created_at")?,
        quotas: Quotas {
            requests_per_second: r.try_get("quota_rps")?,
            max_models: r.try_get("quota_max_models")?,
            max_stored_bytes: r.try_get("quota_max_bytes")?,
        },
    })
}

fn key_from_row(r: &AnyRow) -> Result<ApiKey, StoreError> {
    let role: String = r.try_get("role")?;
    Ok(ApiKey {
        id: r.try_get("id")?,
        tenant_id: r.try_get("tenant_id")?,
        name: r.try_get("name")?,
        role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt {
            what: "api_keys.role".into(),
            detail: role.clone(),
        })?,
        prefix: r.try_get("prefix")?,
        created_at_ms: r.try_get("created_at")?,
        last_used_at_ms: r.try_get("last_used_at")?,
        revoked_at_ms: r.try_get("revoked_at")?,
    })
}

const TENANT_COLS: &str = "id, name, created_at, quota_rps, quota_max_models, quota_max_bytes";
const KEY_COLS: &str = "id, tenant_id, name, role, prefix, created_at, last_used_at, revoked_at";

impl Db {
    pub async fn create_tenant(&self, name: &str, quotas: Quotas) -> Result<Tenant, StoreError> {
        let t = Tenant {
            id: new_id(),
            name: name.to_string(),
            created_at_ms: now_ms(),
            quotas,
        };
        sqlx::query(
            "INSERT INTO tenants (id, name, created_at, quota_rps, quota_max_models, quota_max_bytes) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&t.id)
        .bind(&t.name)
        .bind(t.created_at_ms)
        .bind(t.quotas.requests_per_second)
        .bind(t.quotas.max_models)
        .bind(t.quotas.max_stored_bytes)
        .execute(self.pool())
        .await
        .map_err(conflict(|| format!("tenant '{name}'")))?;
        Ok(t)
    }

    pub async fn get_tenant(&self, id: &str) -> Result<Tenant, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TENANT_COLS} FROM tenants WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("tenant '{id}'")))?;
        tenant_from_row(&row)
    }

    pub async fn get_tenant_by_name(&self, name: &str) -> Result<Tenant, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TENANT_COLS} FROM tenants WHERE name = $1"
        )))
        .bind(name)
        .fetch_optional(self.pool())
        .await?
        .ok_or_else(|| StoreError::NotFound(format!("tenant '{name}'")))?;
        tenant_from_row(&row)
    }

    pub async fn list_tenants(&self) -> Result<Vec<Tenant>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {TENANT_COLS} FROM tenants ORDER BY name"
        )))
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(tenant_from_row).collect()
    }

    pub async fn set_tenant_quotas(&self, tenant_id: &str, q: Quotas) -> Result<(), StoreError> {
        let done = sqlx::query(
            "UPDATE tenants SET quota_rps = $1, quota_max_models = $2, quota_max_bytes = $3 WHERE id = $4",
        )
        .bind(q.requests_per_second)
        .bind(q.max_models)
        .bind(q.max_stored_bytes)
        .bind(tenant_id)
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("tenant '{tenant_id}'")));
        }
        Ok(())
    }

    /// Stores a new key. `secret_hash` is the hex SHA-256 of the whole key string.
    pub async fn create_api_key(
        &self,
        tenant_id: &str,
        name: &str,
        role: Role,
        prefix: &str,
        secret_hash: &str,
    ) -> Result<ApiKey, StoreError> {
        let k = ApiKey {
            id: new_id(),
            tenant_id: tenant_id.to_string(),
            name: name.to_string(),
            role,
            prefix: prefix.to_string(),
            created_at_ms: now_ms(),
            last_used_at_ms: None,
            revoked_at_ms: None,
        };
        sqlx::query(
            "INSERT INTO api_keys (id, tenant_id, name, role, prefix, secret_hash, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&k.id)
        .bind(&k.tenant_id)
        .bind(&k.name)
        .bind(role.as_str())
        .bind(&k.prefix)
        .bind(secret_hash)
        .bind(k.created_at_ms)
        .execute(self.pool())
        .await
        .map_err(conflict(|| "an API key with this secret".to_string()))?;
        Ok(k)
    }

    /// The active (not revoked) key with this hash, and marks it used.
    pub async fn find_active_api_key(
        &self,
        secret_hash: &str,
    ) -> Result<Option<ApiKey>, StoreError> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {KEY_COLS} FROM api_keys WHERE secret_hash = $1 AND revoked_at IS NULL"
        )))
        .bind(secret_hash)
        .fetch_optional(self.pool())
        .await?;
        let Some(row) = row else { return Ok(None) };
        let key = key_from_row(&row)?;
        sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
            .bind(now_ms())
            .bind(&key.id)
            .execute(self.pool())
            .await?;
        Ok(Some(key))
    }

    /// Whether the key exists, belongs to the tenant and is not revoked (checked on each
    /// authenticated request so that revocation takes effect before the token expires).
    pub async fn api_key_active(&self, tenant_id: &str, key_id: &str) -> Result<bool, StoreError> {
        let row = sqlx::query(
            "SELECT 1 FROM api_keys WHERE id = $1 AND tenant_id = $2 AND revoked_at IS NULL",
        )
        .bind(key_id)
        .bind(tenant_id)
        .fetch_optional(self.pool())
        .await?;
        Ok(row.is_some())
    }

    pub async fn list_api_keys(&self, tenant_id: &str) -> Result<Vec<ApiKey>, StoreError> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {KEY_COLS} FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id"
        )))
        .bind(tenant_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter().map(key_from_row).collect()
    }

    /// Revokes a key of the tenant; another tenant's key is "not found".
    pub async fn revoke_api_key(
        &self,
        tenant_id: &str,
        key_id: &str,
    ) -> Result<ApiKey, StoreError> {
        let done = sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND tenant_id = $3 AND revoked_at IS NULL",
        )
        .bind(now_ms())
        .bind(key_id)
        .bind(tenant_id)
        .execute(self.pool())
        .await?;
        if done.rows_affected() == 0 {
            return Err(StoreError::NotFound(format!("API key '{key_id}'")));
        }
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {KEY_COLS} FROM api_keys WHERE id = $1 AND tenant_id = $2"
        )))
        .bind(key_id)
        .bind(tenant_id)
        .fetch_one(self.pool())
        .await?;
        key_from_row(&row)
    }

    /// Active admin keys of a tenant (the last one cannot be revoked).
    pub async fn count_active_admin_keys(&self, tenant_id: &str) -> Result<i64, StoreError> {
        let row = sqlx::query(
            "SELECT COUNT(*) FROM api_keys WHERE tenant_id = $1 AND role = 'admin' AND revoked_at IS NULL",
        )
        .bind(tenant_id)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}

impl Db {
    /// Registered models of the tenant (model quota).
    pub async fn count_models(&self, tenant_id: &str) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT COUNT(*) FROM models WHERE tenant_id = $1")
            .bind(tenant_id)
            .fetch_one(self.pool())
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }
}
