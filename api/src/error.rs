//! The one error type of the HTTP layer, mapped to a status and a JSON body
//! `{"error": "...", "error_type": "..."}`.

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use infaas_control::Error as ControlError;
use infaas_store::StoreError;
use serde::de::DeserializeOwned;
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
    /// Dropped early under overload: the query could no longer meet its deadline.
    #[error("{0}")]
    Dropped(String),
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
            ApiError::Unavailable(_) | ApiError::Dropped(_) => StatusCode::SERVICE_UNAVAILABLE,
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
            ApiError::Dropped(_) => "dropped",
            ApiError::Unsatisfiable { .. } => "unsatisfiable",
            ApiError::Status { status, .. } => match *status {
                StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
                StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
                StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
                StatusCode::NOT_FOUND => "not_found",
                StatusCode::UNPROCESSABLE_ENTITY => "unprocessable",
                StatusCode::TOO_MANY_REQUESTS => "rate_limited",
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

/// The one place where the control plane's errors become statuses (with
/// [`ApiError::status`]).
impl From<ControlError> for ApiError {
    fn from(e: ControlError) -> Self {
        match e {
            ControlError::Invalid(m) => ApiError::BadRequest(m),
            ControlError::Unauthenticated(m) => ApiError::Unauthorized(m),
            ControlError::Forbidden(m) => ApiError::Forbidden(m),
            ControlError::NotFound(m) => ApiError::NotFound(m),
            ControlError::Conflict(m) => ApiError::Conflict(m),
            ControlError::TooLarge(m) => ApiError::PayloadTooLarge(m),
            ControlError::Unprocessable(m) => ApiError::Unprocessable(m),
            ControlError::RateLimited {
                message,
                retry_after_secs,
            } => ApiError::RateLimited {
                message,
                retry_after_secs,
            },
            ControlError::QuotaExceeded(m) => ApiError::QuotaExceeded(m),
            ControlError::Unavailable(m) => ApiError::Unavailable(m),
            ControlError::Dropped(m) => ApiError::Dropped(m),
            ControlError::Unsatisfiable {
                message,
                suggestion,
            } => ApiError::Unsatisfiable {
                message,
                suggestion,
            },
            ControlError::Internal(e) => ApiError::Internal(e),
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ControlError::from(e).into()
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        // JSON that parses but does not fit the request's schema (a missing field, a string
        // where a number goes) is a bad request like any other field error: 400, not axum's
        // 422, which the API keeps for requests that are valid but cannot be met.
        let status = match &r {
            JsonRejection::JsonDataError(_) => StatusCode::BAD_REQUEST,
            other => other.status(),
        };
        ApiError::Status {
            status,
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
///
/// A body is parsed once, without tracking where in it the parser is; only a body that
/// fails is parsed again by `axum::Json`, whose message names the path to the problem
/// (`inputs[0].shape: invalid type ...`). Path tracking costs about as much as the parse.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json<T>(pub T);

impl<T, S> FromRequest<S> for Json<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        if !json_content_type(req.headers()) {
            // `axum::Json` refuses it with its own status and message.
            return axum::Json::<T>::from_request(req, state)
                .await
                .map(|axum::Json(v)| Json(v))
                .map_err(ApiError::from);
        }
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::from(JsonRejection::from(e)))?;
        match serde_json::from_slice(&bytes) {
            Ok(v) => Ok(Json(v)),
            Err(_) => axum::Json::<T>::from_bytes(&bytes)
                .map(|axum::Json(v)| Json(v))
                .map_err(ApiError::from),
        }
    }
}

/// `application/json` or `application/<anything>+json`, as `axum::Json` accepts.
fn json_content_type(headers: &HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim();
    let Some((kind, sub)) = essence.split_once('/') else {
        return false;
    };
    kind.eq_ignore_ascii_case("application")
        && (sub.eq_ignore_ascii_case("json")
            || sub.len() > 5 && sub.as_bytes()[sub.len() - 5..].eq_ignore_ascii_case(b"+json"))
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    struct Input {
        shape: Vec<i64>,
    }

    #[derive(Debug, Deserialize)]
    struct Query {
        inputs: Vec<Input>,
    }

    async fn parse(content_type: Option<&str>, body: &str) -> Result<Query, ApiError> {
        let mut req = Request::builder().method("POST").uri("/");
        if let Some(ct) = content_type {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let req = req.body(Body::from(body.to_string())).unwrap();
        Json::<Query>::from_request(req, &()).await.map(|Json(q)| q)
    }

    #[tokio::test]
    async fn json_bodies_parse_and_failures_name_the_path() {
        let body = r#"{"inputs": [{"shape": [1, 64]}]}"#;
        for ct in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/vnd.infaas+json",
        ] {
            let q = parse(Some(ct), body).await.unwrap();
            assert_eq!(q.inputs[0].shape, [1, 64], "{ct}");
        }
        // A body of the wrong shape: the message says where.
        let e = parse(
            Some("application/json"),
            r#"{"inputs": [{"shape": [1, "a"]}]}"#,
        )
        .await
        .unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.to_string().contains("inputs[0].shape[1]"), "{e}");
        let e = parse(Some("application/json"), r#"{"inputs": [{"shape": [1,"#)
            .await
            .unwrap_err();
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.to_string().contains("invalid JSON body"), "{e}");
        // Anything but JSON is refused before the body is read.
        for ct in [
            None,
            Some("text/plain"),
            Some("application/jsonx"),
            Some("application/+json"),
        ] {
            let e = parse(ct, body).await.unwrap_err();
            assert_eq!(e.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        }
    }
}
