//! The two backend pairs that integration tests touching storage run on:
//!
//! - `sqlite_local`: an SQLite file and an object directory in a temporary directory (always);
//! - `postgres_s3`: Postgres and S3 named by `INFAAS_TEST_DATABASE_URL`, `INFAAS_TEST_S3_URL`
//!   and `INFAAS_TEST_S3_ENDPOINT` (scripts/services.sh writes them to
//!   `$HOME/.cache/infaas/services.env`; the AWS_* variables there hold the S3 credentials).
//!
//! Every Postgres/S3 test gets a schema and an S3 key prefix of its own, so tests run in
//! parallel and never see each other's rows or objects; both are removed when the test ends.
//! When the variables are missing such a test fails if `CI=true`, otherwise it prints a
//! one-line skip notice to stderr and passes.
//!

use std::io::Write;

use infaas_store::{open_object_store, ObjectStoreConfig};
use sqlx::Connection;

pub const DATABASE_URL_VAR: &str = "INFAAS_TEST_DATABASE_URL";
pub const S3_URL_VAR: &str = "INFAAS_TEST_S3_URL";
pub const S3_ENDPOINT_VAR: &str = "INFAAS_TEST_S3_ENDPOINT";

/// Where one test keeps its metadata and objects (private to that test).
pub struct Backends {
    /// `sqlite_local` or `postgres_s3`.
    pub name: &'static str,
    pub database_url: String,
    /// A directory or `s3://bucket/prefix`.
    pub object_store: String,
    pub s3_endpoint: Option<String>,
    /// The test's Postgres schema (None on SQLite).
    pub schema: Option<String>,
    /// Scratch directory of the test (holds the SQLite file and objects of `sqlite_local`).
    pub dir: tempfile::TempDir,
    cleanup: Option<Cleanup>,
}

impl Backends {
    /// SQLite file + local object directory under a fresh temporary directory.
    pub fn embedded() -> Backends {
        let dir = tempfile::tempdir().expect("a temporary directory");
        Backends {
            name: "sqlite_local",
            database_url: format!("sqlite://{}", dir.path().join("infaas.db").display()),
            object_store: dir.path().join("objects").display().to_string(),
            s3_endpoint: None,
            schema: None,
            dir,
            cleanup: None,
        }
    }

    /// Postgres (a fresh schema) + S3 (a fresh key prefix), or `None` after a skip notice
    /// when the variables are not set (a panic instead when `CI=true`).
    pub async fn services() -> Option<Backends> {
        let var = |name| std::env::var(name).ok().filter(|v: &String| !v.is_empty());
        let (db_url, s3_url) = match (var(DATABASE_URL_VAR), var(S3_URL_VAR)) {
            (Some(d), Some(s)) => (d, s),
            (d, s) => {
                let missing: Vec<&str> =
                    [(DATABASE_URL_VAR, d.is_none()), (S3_URL_VAR, s.is_none())]
                        .into_iter()
                        .filter_map(|(n, m)| m.then_some(n))
                        .collect();
                skip_or_fail(&format!("{} not set", missing.join(" and ")));
                return None;
            }
        };
        let tag = uuid::Uuid::new_v4().simple().to_string();
        let schema = format!("t_{tag}");
        let mut conn = sqlx::PgConnection::connect(&db_url)
            .await
            .unwrap_or_else(|e| panic!("connecting to {DATABASE_URL_VAR}: {e}"));
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
            .execute(&mut conn)
            .await
            .unwrap_or_else(|e| panic!("creating schema {schema}: {e}"));
        let _ = conn.close().await;
        // libpq's `options` (which sqlx reads from the URL) sets the schema of every connection.
        let sep = if db_url.contains('?') { '&' } else { '?' };
        let database_url = format!("{db_url}{sep}options=-c%20search_path%3D{schema}");
        let object_store = format!("{}/{tag}", s3_url.trim_end_matches('/'));
        let s3_endpoint = var(S3_ENDPOINT_VAR);
        Some(Backends {
            name: "postgres_s3",
            database_url,
            object_store: object_store.clone(),
            s3_endpoint: s3_endpoint.clone(),
            schema: Some(schema.clone()),
            dir: tempfile::tempdir().expect("a temporary directory"),
            cleanup: Some(Cleanup {
                admin_url: db_url,
                schema,
                object_store,
                s3_endpoint,
            }),
        })
    }

    pub fn is_embedded(&self) -> bool {
        self.schema.is_none()
    }
}

/// Fails under `CI=true`; otherwise one line on stderr naming the skipped test.
pub fn skip_or_fail(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a Postgres/S3 test")
        .to_string();
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "{test} needs Postgres and S3 when CI=true: {why}; run scripts/services.sh and load $HOME/.cache/infaas/services.env"
        );
    }
    // Straight to stderr: the harness captures eprintln! of passing tests.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED {test}: {why} (run scripts/services.sh and load $HOME/.cache/infaas/services.env)"
    );
}

/// What a Postgres/S3 test leaves behind: its schema and its objects.
struct Cleanup {
    admin_url: String,
    schema: String,
    object_store: String,
    s3_endpoint: Option<String>,
}

impl Cleanup {
    async fn run(self) -> Result<(), String> {
        let mut conn = sqlx::PgConnection::connect(&self.admin_url)
            .await
            .map_err(|e| e.to_string())?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP SCHEMA IF EXISTS {} CASCADE",
            self.schema
        )))
        .execute(&mut conn)
        .await
        .map_err(|e| format!("dropping schema {}: {e}", self.schema))?;
        let _ = conn.close().await;
        let cfg = ObjectStoreConfig::parse(&self.object_store, self.s3_endpoint, None)
            .map_err(|e| e.to_string())?;
        let objects = open_object_store(&cfg).await.map_err(|e| e.to_string())?;
        objects
            .delete_prefix("")
            .await
            .map_err(|e| format!("deleting {}: {e}", self.object_store))?;
        Ok(())
    }
}

impl Drop for Backends {
    fn drop(&mut self) {
        let Some(cleanup) = self.cleanup.take() else {
            return;
        };
        // Runs on a thread of its own: the test's runtime cannot block on async work here,
        // and this also cleans up after a failed (panicking) test.
        let done = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(cleanup.run())
        })
        .join();
        if let Ok(Err(e)) | Err(e) = done.map_err(|_| "the clean-up thread panicked".to_string()) {
            let _ = writeln!(std::io::stderr(), "warning: test clean-up failed: {e}");
        }
    }
}

/// For each `async fn case(&Backends)` listed, declares the tests `sqlite_local::case` and
/// `postgres_s3::case`, so one suite is written once and runs on both pairs. The invoking
/// module must have `Backends` in scope.
#[allow(unused_macros)]
#[macro_export]
macro_rules! on_both_pairs {
    ($($case:ident),+ $(,)?) => {
        mod sqlite_local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let b = super::Backends::embedded();
                    super::$case(&b).await;
                }
            )+
        }
        mod postgres_s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(b) = super::Backends::services().await else {
                        return;
                    };
                    super::$case(&b).await;
                }
            )+
        }
    };
}
pub use crate::on_both_pairs;
