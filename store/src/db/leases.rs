//! Leases and replica announcements: how the controller replicas on one database elect the one
//! that runs the cluster's loops, and fence the writes of a replica that has lost the lease.
//!
//! A lease is one row (`leases`, migration 0010). [`Db::acquire_lease`] is one atomic upsert:
//! it takes the row when it is free or expired, renews it when the caller already holds it,
//! and otherwise leaves it alone. Every change of holder raises the row's `token`. The holder
//! stores its token with [`Db::set_fence`]; writes that only the leader makes (scaling events)
//! then commit only while the row still carries that token, so a deposed leader's late writes
//! are refused ([`StoreError::Fenced`]). Expiry is judged on the database's clock.

use std::sync::atomic::Ordering;

use sqlx::Row;

use super::{Db, DbKind};
use crate::StoreError;

/// The lease of the replica that runs the cluster's loops.
pub const LEADER_LEASE: &str = "leader";

/// A fence of 0: this process never took part in an election (one process, or a tool); its
/// writes are not fenced.
pub const UNFENCED: i64 = 0;
/// A fence no lease ever carries: the process has lost the lease; its leader writes fail.
pub const DEPOSED: i64 = -1;

/// A lease as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub name: String,
    /// The replica that holds (or last held) it.
    pub holder: String,
    /// Where that replica listens.
    pub address: String,
    /// Raised by one at every change of holder.
    pub token: i64,
    /// When the holder took it (database clock, ms since the epoch).
    pub acquired_ms: i64,
    /// When it lapses unless renewed.
    pub expires_ms: i64,
    /// The database's clock when this was read.
    pub now_ms: i64,
}

impl Lease {
    /// Held by `replica` and not yet expired.
    pub fn held_by(&self, replica: &str) -> bool {
        self.holder == replica && self.now_ms < self.expires_ms
    }

    /// Expired: any replica may take it.
    pub fn expired(&self) -> bool {
        self.now_ms >= self.expires_ms
    }
}

/// A replica's announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRow {
    pub id: String,
    pub address: String,
    pub started_ms: i64,
    pub seen_ms: i64,
}

impl DbKind {
    /// The database's clock in ms since the epoch, as an SQL expression.
    pub(crate) fn now_ms_sql(self) -> &'static str {
        match self {
            DbKind::Postgres => "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
            DbKind::Sqlite => "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
        }
    }
}

fn lease_from_row(r: &sqlx::any::AnyRow) -> Result<Lease, StoreError> {
    Ok(Lease {
        name: r.try_get("name")?,
        holder: r.try_get("holder")?,
        address: r.try_get("address")?,
        token: r.try_get("token")?,
        acquired_ms: r.try_get("acquired_ms")?,
        expires_ms: r.try_get("expires_ms")?,
        now_ms: r.try_get("now_ms")?,
    })
}

impl Db {
    /// Takes lease `name` for `holder` (listening at `address`) for `ttl_ms`, or renews it when
    /// `holder` has it; leaves it alone while another holder's lease runs. Returns the lease as
    /// it stands after the attempt: `held_by(holder)` says whether the caller holds it.
    pub async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        address: &str,
        ttl_ms: i64,
    ) -> Result<Lease, StoreError> {
        let now = self.kind().now_ms_sql();
        // One statement, atomic on both dialects: the conflict branch runs only when the row
        // is the caller's or has expired; SET sees the row as it was.
        let sql = format!(
            "INSERT INTO leases (name, holder, address, token, acquired_ms, expires_ms) \
             VALUES ($1, $2, $3, 1, {now}, {now} + $4) \
             ON CONFLICT (name) DO UPDATE SET \
               token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE leases.token + 1 END, \
               acquired_ms = CASE WHEN leases.holder = excluded.holder THEN leases.acquired_ms ELSE excluded.acquired_ms END, \
               holder = excluded.holder, address = excluded.address, expires_ms = excluded.expires_ms \
             WHERE leases.holder = excluded.holder OR leases.expires_ms <= excluded.acquired_ms"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .bind(holder)
            .bind(address)
            .bind(ttl_ms)
            .execute(self.pool())
            .await?;
        self.lease(name).await?.ok_or_else(|| StoreError::Corrupt {
            what: "leases".into(),
            detail: format!("lease '{name}' vanished after an upsert"),
        })
    }

    /// Lease `name` as it stands, with the database's clock.
    pub async fn lease(&self, name: &str) -> Result<Option<Lease>, StoreError> {
        let sql = format!(
            "SELECT name, holder, address, token, acquired_ms, expires_ms, {} AS now_ms \
             FROM leases WHERE name = $1",
            self.kind().now_ms_sql()
        );
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(name)
            .fetch_optional(self.pool())
            .await?;
        row.as_ref().map(lease_from_row).transpose()
    }

    /// Lets lease `name` lapse now if `holder` has it (a replica stopping hands over at once).
    pub async fn release_lease(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        let done = sqlx::query("UPDATE leases SET expires_ms = 0 WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected() > 0)
    }

    /// Lets every lease of `holder` lapse now (a replica stopping: its claims go to the others
    /// at once).
    pub async fn release_leases_of(&self, holder: &str) -> Result<u64, StoreError> {
        let done = sqlx::query("UPDATE leases SET expires_ms = 0 WHERE holder = $1")
            .bind(holder)
            .execute(self.pool())
            .await?;
        Ok(done.rows_affected())
    }

    /// Removes lease `name` if `holder` has it (the work it guarded is done).
    pub async fn drop_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
            .bind(name)
            .bind(holder)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// The fencing token this process's leader writes carry: the token of the leader lease it
    /// holds, [`DEPOSED`] after it lost it, [`UNFENCED`] when it never took part.
    pub fn set_fence(&self, token: i64) {
        self.fence.store(token, Ordering::SeqCst);
    }

    pub fn fence(&self) -> i64 {
        self.fence.load(Ordering::SeqCst)
    }

    /// The SQL condition that a fenced write adds (with the fence bound at `$param`): true
    /// when the process is unfenced or its token is still the leader lease's.
    pub(crate) fn fence_condition(param: usize) -> String {
        format!(
            "(${param} = 0 OR EXISTS (SELECT 1 FROM leases WHERE name = '{LEADER_LEASE}' AND token = ${param}))"
        )
    }

    /// Announces replica `id` (or renews its announcement).
    pub async fn announce_replica(&self, id: &str, address: &str) -> Result<(), StoreError> {
        let now = self.kind().now_ms_sql();
        let sql = format!(
            "INSERT INTO replicas (id, address, started_ms, seen_ms) VALUES ($1, $2, {now}, {now}) \
             ON CONFLICT (id) DO UPDATE SET address = excluded.address, seen_ms = excluded.seen_ms"
        );
        sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(address)
            .execute(self.pool())
            .await?;
        Ok(())
    }

    /// Replicas seen within `within_ms` (database clock), oldest first. A read only: the
    /// announcements of replicas gone longer are removed by [`Db::forget_replicas`].
    pub async fn live_replicas(&self, within_ms: i64) -> Result<Vec<ReplicaRow>, StoreError> {
        let now = self.kind().now_ms_sql();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT id, address, started_ms, seen_ms FROM replicas \
             WHERE seen_ms >= {now} - $1 ORDER BY started_ms, id"
        )))
        .bind(within_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ReplicaRow {
                    id: r.try_get("id")?,
                    address: r.try_get("address")?,
                    started_ms: r.try_get("started_ms")?,
                    seen_ms: r.try_get("seen_ms")?,
                })
            })
            .collect()
    }

    /// Removes the announcements not renewed within `within_ms` (replicas that died).
    pub async fn forget_replicas(&self, within_ms: i64) -> Result<u64, StoreError> {
        let now = self.kind().now_ms_sql();
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM replicas WHERE seen_ms < {now} - $1"
        )))
        .bind(within_ms)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }

    /// Removes replica `id`'s announcement (it is stopping).
    pub async fn withdraw_replica(&self, id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM replicas WHERE id = $1")
            .bind(id)
            .execute(self.pool())
            .await?;
        Ok(())
    }
}
