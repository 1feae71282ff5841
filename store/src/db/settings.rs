//! Process-wide settings kept in the database (e.g. the generated JWT signing secret).

use sqlx::Row;

use super::Db;
use crate::StoreError;

impl Db {
    pub async fn get_setting(&self, key: &str) -> Result<Option<String>, StoreError> {
        let row = sqlx::query("SELECT value FROM settings WHERE key = $1")
            .bind(key)
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.try_get::<String, _>(0)).transpose()?)
    }

    /// Stores `value` unless the key already has one; returns the value in force. Safe when
    /// several controllers start at once: the first writer wins and all read its value.
    pub async fn setting_or_insert(&self, key: &str, value: &str) -> Result<String, StoreError> {
        sqlx::query(
            "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
        )
        .bind(key)
        .bind(value)
        .execute(self.pool())
        .await?;
        self.get_setting(key)
            .await?
            .ok_or_else(|| StoreError::Corrupt {
                what: "settings".into(),
                detail: format!("setting '{key}' vanished after insert"),
            })
    }
}
