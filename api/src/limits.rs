//! Per-tenant request-rate limiting as its own layer. A request that carries a valid access
//! token (bearer header or dashboard session) spends one unit of its tenant's budget before
//! any handler runs; 429 with `Retry-After` when the budget is spent. Requests without a
//! valid token pass through: authentication answers them. The bucket itself is the control
//! plane's ([`infaas_control::tenancy::RateLimiter`]).

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::routes::dashboard::session::{cookie, SESSION_COOKIE};
use crate::state::AppState;

/// The access token of a request: `Authorization: Bearer ...`, else the dashboard session.
pub fn access_token(headers: &HeaderMap) -> Option<&str> {
    let bearer = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| {
            h.strip_prefix("Bearer ")
                .or_else(|| h.strip_prefix("bearer "))
        })
        .map(str::trim)
        .filter(|t| !t.is_empty());
    bearer.or_else(|| cookie(headers, SESSION_COOKIE))
}

/// The layer: `axum::middleware::from_fn_with_state(state, limits::rate_limit)`.
pub async fn rate_limit(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let tenant = access_token(req.headers())
        .and_then(|token| state.tokens.verify(token).ok())
        .map(|claims| claims.tid);
    if let Some(tenant) = tenant {
        if let Err(e) = state.limiter.check(&state.db, &tenant).await {
            return ApiError::from(e).into_response();
        }
    }
    next.run(req).await
}
