//! Arrival reports: how the controller replicas on one database share the queries each one
//! received (`arrival_reports`, migration 0011). A replica publishes what arrived since its
//! last report under a sequence number of its own; the others read the reports of the last
//! window and take each `(replica, seq)` once. The body is the publisher's own encoding; the
//! store keeps it as text. Times are the database's clock.

use sqlx::Row;

use super::Db;
use crate::StoreError;

/// One published report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArrivalReport {
    /// The replica that published it.
    pub replica: String,
    /// Its number among that replica's reports, from 1.
    pub seq: i64,
    /// When it was published (database clock, ms since the epoch).
    pub at_ms: i64,
    pub body: String,
}

impl Db {
    /// Publishes report `seq` of `replica`.
    pub async fn publish_arrivals(
        &self,
        replica: &str,
        seq: i64,
        body: &str,
    ) -> Result<(), StoreError> {
        let now = self.kind().now_ms_sql();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO arrival_reports (replica, seq, at_ms, body) VALUES ($1, $2, {now}, $3)"
        )))
        .bind(replica)
        .bind(seq)
        .bind(body)
        .execute(self.pool())
        .await?;
        Ok(())
    }

    /// The reports of every replica but `except` published within `within_ms`, in each
    /// replica's order.
    pub async fn arrivals_since(
        &self,
        except: &str,
        within_ms: i64,
    ) -> Result<Vec<ArrivalReport>, StoreError> {
        let now = self.kind().now_ms_sql();
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT replica, seq, at_ms, body FROM arrival_reports \
             WHERE replica <> $1 AND at_ms >= {now} - $2 ORDER BY replica, seq"
        )))
        .bind(except)
        .bind(within_ms)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ArrivalReport {
                    replica: r.try_get("replica")?,
                    seq: r.try_get("seq")?,
                    at_ms: r.try_get("at_ms")?,
                    body: r.try_get("body")?,
                })
            })
            .collect()
    }

    /// Removes the reports older than `older_than_ms`; how many.
    pub async fn prune_arrivals(&self, older_than_ms: i64) -> Result<u64, StoreError> {
        let now = self.kind().now_ms_sql();
        let done = sqlx::query(sqlx::AssertSqlSafe(format!(
            "DELETE FROM arrival_reports WHERE at_ms < {now} - $1"
        )))
        .bind(older_than_ms)
        .execute(self.pool())
        .await?;
        Ok(done.rows_affected())
    }
}
