//! The authenticated principal of a request (bearer header or dashboard session). Tokens,
//! keys and limits are the control plane's (`infaas_control::tenancy`); the request-rate
//! check is its own layer (`crate::limits`).

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
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

impl FromRequestParts<AppState> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let header = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .ok_or_else(|| {
                ApiError::Unauthorized(
                    "missing Authorization header; send 'Authorization: Bearer <token>'".into(),
                )
            })?;
        let header = header
            .to_str()
            .map_err(|_| ApiError::Unauthorized("the Authorization header is not ASCII".into()))?;
        let token = header
            .strip_prefix("Bearer ")
            .or_else(|| header.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                ApiError::Unauthorized("the Authorization header must be 'Bearer <token>'".into())
            })?;
        Principal::from_token(state, token).await
    }
}

impl Principal {
    /// The caller behind an access token: signature and expiry checked, key not revoked.
    /// Bearer headers and dashboard cookies both go here; the request rate is checked
    /// before, by its own layer ([`crate::limits`]).
    pub async fn from_token(state: &AppState, token: &str) -> Result<Principal, ApiError> {
        let claims = state.tokens.verify(token)?;
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
