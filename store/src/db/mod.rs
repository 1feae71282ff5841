//! Metadata in SQLite (the embedded default) or Postgres, through sqlx's `Any` driver so
//! that one set of queries serves both. Queries use `$N` placeholders, which both accept.

mod arrivals;
pub mod jobs;
pub mod leases;
mod models;
mod objects;
mod pipelines;
mod reports;
mod settings;
mod tenants;
mod usage;
pub mod whatif;

use std::str::FromStr;

use sqlx::any::{AnyConnectOptions, AnyPoolOptions};
use sqlx::AnyPool;

use crate::StoreError;

pub use arrivals::ArrivalReport;
pub use jobs::{Chunk, ChunkCounts, Job, NewChunk, NewJob};
pub use leases::{Lease, ReplicaRow, LEADER_LEASE};
pub use models::{CatalogEntry, NewModel, NewVariant, PruneMark, PrunedVariant};
pub use objects::ObjectRecord;
pub use pipelines::PipelineRow;
pub use reports::{JobSummary, NewScalingEvent, ScalingEventRow};
pub use usage::{merge_slo, UsageRow};
pub use whatif::WhatIfRun;

/// One source for both dialects: the schema is written in the SQL they share
/// (`migrations/README.md`).
static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("../migrations");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    Sqlite,
    Postgres,
}

impl DbKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
        }
    }
}

/// Handle to the metadata database (cheap to clone).
#[derive(Clone)]
pub struct Db {
    pool: AnyPool,
    kind: DbKind,
    /// The fencing token of this process's leader writes ([`leases`]); shared by its clones.
    fence: std::sync::Arc<std::sync::atomic::AtomicI64>,
}

impl Db {
    /// Connects, creating an SQLite file when absent, and applies the migrations.
    pub async fn connect(url: &str) -> Result<Db, StoreError> {
        sqlx::any::install_default_drivers();
        let (kind, url) = if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            (DbKind::Postgres, url.to_string())
        } else if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.trim_start_matches("//");
            if path != ":memory:" && !path.is_empty() {
                let file = path.split('?').next().unwrap_or(path);
                if let Some(dir) = std::path::Path::new(file).parent() {
                    if !dir.as_os_str().is_empty() {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            StoreError::Database(sqlx::Error::Configuration(
                                format!("cannot create directory {}: {e}", dir.display()).into(),
                            ))
                        })?;
                    }
                }
            }
            let sep = if url.contains('?') { '&' } else { '?' };
            let url = if url.contains("mode=") {
                url.to_string()
            } else {
                format!("{url}{sep}mode=rwc")
            };
            (DbKind::Sqlite, url)
        } else {
            return Err(StoreError::UnsupportedDatabase(redact(url)));
        };
        let opts = AnyConnectOptions::from_str(&url)?;
        let max = match kind {
            DbKind::Sqlite => 4,
            DbKind::Postgres => 16,
        };
        let pool = AnyPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(std::time::Duration::from_secs(10))
            .connect_with(opts)
            .await?;
        if kind == DbKind::Sqlite {
            // WAL lets readers proceed while one writer commits; the mode persists in the file.
            sqlx::query("PRAGMA journal_mode=WAL")
                .execute(&pool)
                .await?;
        }
        let db = Db {
            pool,
            kind,
            fence: std::sync::Arc::new(std::sync::atomic::AtomicI64::new(leases::UNFENCED)),
        };
        db.migrate().await?;
        Ok(db)
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        MIGRATIONS.run(&self.pool).await?;
        Ok(())
    }

    pub fn kind(&self) -> DbKind {
        self.kind
    }

    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// Readiness: the database answers a query.
    pub async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Names of the applied migrations, oldest first.
    pub async fn applied_migrations(&self) -> Result<Vec<i64>, StoreError> {
        use sqlx::Row;
        let rows = sqlx::query("SELECT version FROM _sqlx_migrations ORDER BY version")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| r.try_get::<i64, _>(0).map_err(StoreError::from))
            .collect()
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// A database URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Maps a unique-constraint violation to `Conflict(what)`.
pub(crate) fn conflict(what: impl FnOnce() -> String) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |e| match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict(what()),
        _ => StoreError::Database(e),
    }
}

pub(crate) fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}
