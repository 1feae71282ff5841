//! The one error type of the HTTP layer, mapped to a status and a JSON body
//! `{"error": "...", "error_type": "..."}`.

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use infaas_store::StoreError;
use serde::Serialize;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    PayloadTooLarge(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after_secs: u64,
    },
    #[error("{0}")]
    QuotaExceeded(String),
    #[error("{0}")]
    Unavailable(String),
    /// No variant meets the query's requirements; `suggestion` is the closest one.
    #[error("{message}")]
    Unsatisfiable {
        message: String,
        suggestion: Option<serde_json::Value>,
    },
    /// Any status with its message (rejections of axum's extractors).
    #[error("{message}")]
    Status { status: StatusCode, message: String },
    #[error("internal error: {0}")]
    Internal(#[source] anyhow::Error),
}

/// The JSON body of every error answer.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    /// What went wrong, naming the field, resource or limit involved.
    pub error: String,
    /// Stable machine-readable kind, e.g. `not_found`, `unauthorized`, `rate_limited`.
    pub error_type: String,
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) | ApiError::QuotaExceeded(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Unprocessable(_) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Unsatisfiable { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::Status { status, .. } => *status,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn error_type(&self) -> &'static str {
        match self {
            ApiError::BadRequest(_) => "bad_request",
            ApiError::Unauthorized(_) => "unauthorized",
            ApiError::Forbidden(_) => "forbidden",
            ApiError::NotFound(_) => "not_found",
            ApiError::Conflict(_) => "conflict",
            ApiError::PayloadTooLarge(_) => "payload_too_large",
            ApiError::Unprocessable(_) => "unprocessable",
            ApiError::RateLimited { .. } => "rate_limited",
            ApiError::QuotaExceeded(_) => "quota_exceeded",
            ApiError::Unavailable(_) => "unavailable",
            ApiError::Unsatisfiable { .. } => "unsatisfiable",
            ApiError::Status { status, .. } => match *status {
                StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
                StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
                StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
                StatusCode::NOT_FOUND => "not_found",
                s if s.is_server_error() => "internal",
                _ => "bad_request",
            },
            ApiError::Internal(_) => "internal",
        }
    }

    pub fn internal(e: impl Into<anyhow::Error>) -> ApiError {
        ApiError::Internal(e.into())
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound(what) => ApiError::NotFound(format!("{what} not found")),
            StoreError::Conflict(what) => ApiError::Conflict(format!("{what} already exists")),
            StoreError::ObjectNotFound(key) => {
                ApiError::NotFound(format!("object '{key}' not found"))
            }
            StoreError::InvalidKey { .. } => ApiError::BadRequest(e.to_string()),
            other => ApiError::Internal(other.into()),
        }
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        ApiError::Status {
            status: r.status(),
            message: format!("invalid JSON body: {}", r.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::Status {
            status: r.status(),
            message: format!("invalid query string: {}", r.body_text()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            ApiError::Internal(e) => {
                // The cause goes to the log; the client gets a reference-free summary.
                tracing::error!(error = ?e, "internal error");
                "internal error; see the server log".to_string()
            }
            other => other.to_string(),
        };
        let body = ErrorBody {
            error: message,
            error_type: self.error_type().to_string(),
        };
        let mut resp = match &self {
            ApiError::Unsatisfiable {
                suggestion: Some(s),
                ..
            } => (
                status,
                axum::Json(serde_json::json!({
                    "error": body.error,
                    "error_type": body.error_type,
                    "suggestion": s,
                })),
            )
                .into_response(),
            _ => (status, axum::Json(body)).into_response(),
        };
        if let ApiError::RateLimited {
            retry_after_secs, ..
        } = &self
        {
            if let Ok(v) = HeaderValue::from_str(&retry_after_secs.to_string()) {
                resp.headers_mut().insert(header::RETRY_AFTER, v);
            }
        }
        if status == StatusCode::PAYLOAD_TOO_LARGE {
            // The rest of the body is left unread, so this connection cannot carry another
            // request: say so, or a client may send its next request on it and lose it.
            resp.headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"infaas\""),
            );
        }
        resp
    }
}

/// `axum::Json` whose rejections answer with the JSON error body.
#[derive(Debug, Clone, Copy, Default, axum::extract::FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoResponse for Json<T> {
    fn into_response(self) -> Response {
        axum::Json(self.0).into_response()
    }
}

/// `axum::extract::Query` whose rejections answer with the JSON error body.
#[derive(Debug, Clone, Copy, Default, axum::extract::FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct Query<T>(pub T);

pub type ApiResult<T> = Result<T, ApiError>;
