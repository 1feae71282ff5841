//! Per-tenant request-rate limiting as its own layer. A request that carries a valid access
//! token (bearer header or dashboard session) spends one unit of its tenant's budget before
//! any handler runs; 429 with `Retry-After` when the budget is spent. Requests without a
//! valid token pass through: authentication answers them. The bucket itself is the control
//! plane's ([`infaas_control::tenancy::RateLimiter`]).

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::auth::{bearer_token, VerifiedBearer};
use crate::error::ApiError;
use crate::routes::dashboard::session::{cookie, SESSION_COOKIE};
use crate::state::AppState;

/// The layer: `axum::middleware::from_fn_with_state(state, limits::rate_limit)`. The claims
/// of a verified bearer token go on to the request for the
/// [`Principal`](crate::auth::Principal) extractor.
pub async fn rate_limit(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let (claims, bearer) = {
        let bearer = bearer_token(req.headers()).ok();
        let token = bearer.or_else(|| cookie(req.headers(), SESSION_COOKIE));
        (
            token.and_then(|t| state.tokens.verify(t).ok()),
            bearer.is_some(),
        )
    };
    if let Some(claims) = claims {
        if let Err(e) = state
            .limiter
            .check(&state.db, &claims.tid, state.leadership.replicas())
            .await
        {
            return ApiError::from(e).into_response();
        }
        if bearer {
            req.extensions_mut().insert(VerifiedBearer(claims));
        }
    }
    next.run(req).await
}
