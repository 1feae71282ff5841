//! Accounting of stored objects per tenant (stored-bytes quota, clean-up of owned objects).

use infaas_core::time::now_ms;
use sqlx::Row;

use super::Db;
use crate::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRecord {
    pub key: String,
    pub tenant_id: String,
    pub size_bytes: i64,
    pub owner_kind: String,
    pub owner_id: String,
}

impl Db {
    pub async fn record_object(&self, rec: &ObjectRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO objects (key, tenant_id, size_bytes, owner_kind, owner_id, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (key) DO UPDATE SET size_bytes = excluded.size_bytes",
        )
        .bind(&rec.key)
        .bind(&rec.tenant_id)
        .bind(rec.size_bytes)
        .bind(&rec.owner_kind)
        .bind(&rec.owner_id)
        .bind(now_ms())
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// Bytes the tenant keeps in the object store.
    pub async fn stored_bytes(&self, tenant_id: &str) -> Result<i64, StoreError> {
        // Postgres sums BIGINT into NUMERIC, which the Any driver cannot decode (the row
        // fails as a whole), so the sum is cast back to BIGINT on both databases.
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(size_bytes), 0) AS BIGINT) FROM objects WHERE tenant_id = $1",
        )
        .bind(tenant_id)
        .fetch_one(self.pool())
        .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    pub async fn objects_of(
        &self,
        owner_kind: &str,
        owner_id: &str,
    ) -> Result<Vec<ObjectRecord>, StoreError> {
        let rows = sqlx::query(
            "SELECT key, tenant_id, size_bytes, owner_kind, owner_id FROM objects \
             WHERE owner_kind = $1 AND owner_id = $2 ORDER BY key",
        )
        .bind(owner_kind)
        .bind(owner_id)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ObjectRecord {
                    key: r.try_get("key")?,
                    tenant_id: r.try_get("tenant_id")?,
                    size_bytes: r.try_get("size_bytes")?,
                    owner_kind: r.try_get("owner_kind")?,
                    owner_id: r.try_get("owner_id")?,
                })
            })
            .collect()
    }

    pub async fn forget_object(&self, key: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM objects WHERE key = $1")
            .bind(key)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
