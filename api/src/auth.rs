//! The authenticated principal of a request (bearer header or dashboard session). Tokens,
//! keys and limits are the control plane's (`infaas_control::tenancy`); the request-rate
//! check is its own layer (`crate::limits`).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap};
use infaas_control::tenancy::Claims;
use infaas_core::Role;

use crate::error::ApiError;
use crate::state::AppState;

/// The authenticated caller of a request.
#[derive(Debug, Clone)]
pub struct Principal {
    pub tenant_id: String,
    pub key_id: String,
    pub role: Role,
}

impl Principal {
    pub fn require_admin(&self) -> Result<(), ApiError> {
        match self.role {
            Role::Admin => Ok(()),
            Role::Member => Err(ApiError::Forbidden(
                "this operation needs an admin API key of the tenant".into(),
            )),
        }
    }
}

/// The token of `Authorization: Bearer <token>`, or why the header does not carry one.
pub fn bearer_token(headers: &HeaderMap) -> Result<&str, ApiError> {
    parse_bearer(
        headers.get(header::AUTHORIZATION).map(|v| v.to_str().ok()),
        "the Authorization header",
        "Authorization",
    )
}

/// The token of a `Bearer <token>` value (`None`: absent; `Some(None)`: not ASCII), or why it
/// carries none; `what` names where it came from, `key` the header or metadata key to send.
pub(crate) fn parse_bearer<'a>(
    value: Option<Option<&'a str>>,
    what: &str,
    key: &str,
) -> Result<&'a str, ApiError> {
    let value = value.ok_or_else(|| {
        ApiError::Unauthorized(format!(
            "missing {}; send '{key}: Bearer <token>'",
            what.trim_start_matches("the ")
        ))
    })?;
    let value = value.ok_or_else(|| ApiError::Unauthorized(format!("{what} is not ASCII")))?;
    value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::Unauthorized(format!("{what} must be 'Bearer <token>'")))
}

/// The claims of the request's bearer token as the rate-limit layer verified them, so that
/// the extractor does not verify the same token again.
#[derive(Debug, Clone)]
pub struct VerifiedBearer(pub Claims);

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let claims = match parts.extensions.remove::<VerifiedBearer>() {
            Some(VerifiedBearer(claims)) => claims,
            None => state.tokens.verify(bearer_token(&parts.headers)?)?,
        };
        Principal::from_claims(state, claims).await
    }
}

impl Principal {
    /// The caller behind an access token: signature and expiry checked, key not revoked.
    /// Bearer headers and dashboard cookies both go here; the request rate is checked
    /// before, by its own layer ([`crate::limits`]).
    pub async fn from_token(state: &AppState, token: &str) -> Result<Principal, ApiError> {
        Principal::from_claims(state, state.tokens.verify(token)?).await
    }

    /// The caller behind verified claims, unless their key was revoked.
    pub(crate) async fn from_claims(
        state: &AppState,
        claims: Claims,
    ) -> Result<Principal, ApiError> {
        if !state
            .key_cache
            .is_active(&state.db, &claims.tid, &claims.sub)
            .await?
        {
            return Err(ApiError::Unauthorized(
                "the API key behind this token was revoked".into(),
            ));
        }
        Ok(Principal {
            tenant_id: claims.tid,
            key_id: claims.sub,
            role: claims.role,
        })
    }
}
