//! The control plane's error: what went wrong, in the platform's terms. The HTTP edge maps
//! each kind to a status in one place (`infaas_api::error`).

use infaas_store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request or document is invalid (names the field and the rule).
    #[error("{0}")]
    Invalid(String),
    /// The caller could not be authenticated (bad, expired or revoked token).
    #[error("{0}")]
    Unauthenticated(String),
    /// The caller is known but may not do this.
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// An upload or document is over a size limit.
    #[error("{0}")]
    TooLarge(String),
    /// Valid, but cannot be carried out as asked.
    #[error("{0}")]
    Unprocessable(String),
    /// The tenant's request rate is spent.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    /// A stored-models or stored-bytes quota would be passed.
    #[error("{0}")]
    QuotaExceeded(String),
    /// The platform cannot serve this now (no capacity, runtime missing, overloaded).
    #[error("{0}")]
    Unavailable(String),
    /// The query was dropped early: it could no longer meet its deadline (overload).
    #[error("{0}")]
    Dropped(String),
    /// No variant meets the query's requirements; `suggestion` is the closest one.
    #[error("{message}")]
    Unsatisfiable {
        message: String,
        suggestion: Option<serde_json::Value>,
    },
    #[error("internal error: {0}")]
    Internal(#[source] anyhow::Error),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn internal(e: impl Into<anyhow::Error>) -> Error {
        Error::Internal(e.into())
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => Error::NotFound(format!("{what} not found")),
            StoreError::Conflict(what) => Error::Conflict(format!("{what} already exists")),
            StoreError::ObjectNotFound(key) => Error::NotFound(format!("object '{key}' not found")),
            StoreError::InvalidKey { .. } => Error::Invalid(e.to_string()),
            other => Error::Internal(other.into()),
        }
    }
}
