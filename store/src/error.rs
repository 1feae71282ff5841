use thiserror::Error;

/// Errors of the persistence layer; the cause is always kept.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("unsupported database URL '{0}': use sqlite://PATH or postgres://...")]
    UnsupportedDatabase(String),
    #[error("{0} not found")]
    NotFound(String),
    #[error("{0} already exists")]
    Conflict(String),
    #[error("invalid object key '{key}': {reason}")]
    InvalidKey { key: String, reason: &'static str },
    #[error("object '{0}' not found")]
    ObjectNotFound(String),
    #[error("object store I/O error on '{key}': {source}")]
    Io {
        key: String,
        #[source]
        source: std::io::Error,
    },
    #[error("S3 error on '{key}': {message}")]
    S3 {
        key: String,
        message: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    #[error("invalid object store location '{0}': use a directory path or s3://bucket/prefix")]
    InvalidLocation(String),
    #[error("refused: this replica no longer holds the leader lease (its token {token} is stale)")]
    Fenced { token: i64 },
    #[error("the database did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    #[error("corrupt stored value in {what}: {detail}")]
    Corrupt { what: String, detail: String },
}

impl StoreError {
    pub fn s3<E>(key: &str, err: E) -> StoreError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        // The SDK's Display is terse ("service error"); its Debug chain names the S3 code.
        let message = match err.source() {
            Some(src) => format!("{err}: {src:?}"),
            None => err.to_string(),
        };
        StoreError::S3 {
            key: key.to_string(),
            message,
            source: Some(Box::new(err)),
        }
    }
}
