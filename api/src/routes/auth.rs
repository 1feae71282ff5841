//! Exchanging an API key for an access token; who am I.

use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;
use infaas_control::tenancy::hash_key;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// An API key of the tenant (`infaas_...`).
    pub api_key: String,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct TokenResponse {
    /// JWT to send as `Authorization: Bearer <token>`.
    pub access_token: String,
    /// Always `Bearer`.
    pub token_type: String,
    /// Seconds until the token expires.
    pub expires_in: u64,
}

/// Exchanges an API key for a short-lived access token.
#[utoipa::path(post, path = "/v1/auth/token", tag = "auth", request_body = TokenRequest,
    responses((status = 200, body = TokenResponse),
              (status = 400, description = "Malformed body", body = ErrorBody),
              (status = 401, description = "Unknown or revoked key", body = ErrorBody)))]
pub async fn token(
    State(state): State<AppState>,
    Json(req): Json<TokenRequest>,
) -> ApiResult<Json<TokenResponse>> {
    let key = state
        .db
        .find_active_api_key(&hash_key(req.api_key.trim()))
        .await?
        .ok_or_else(|| ApiError::Unauthorized("unknown or revoked API key".into()))?;
    let access_token = state.tokens.issue(&key.id, &key.tenant_id, key.role)?;
    Ok(Json(TokenResponse {
        access_token,
        token_type: "Bearer".into(),
        expires_in: state.tokens.ttl.as_secs(),
    }))
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct QuotaView {
    pub requests_per_second: f64,
    pub max_models: i64,
    pub max_stored_bytes: i64,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct Me {
    pub tenant_id: String,
    pub tenant: String,
    pub api_key_id: String,
    /// `admin` or `member`.
    pub role: String,
    pub quotas: QuotaView,
    pub models: i64,
    pub stored_bytes: i64,
}

/// The caller's tenant, role, quotas and usage.
#[utoipa::path(get, path = "/v1/me", tag = "auth", security(("bearer" = [])),
    responses((status = 200, body = Me), (status = 401, body = ErrorBody)))]
pub async fn me(State(state): State<AppState>, p: Principal) -> ApiResult<Json<Me>> {
    let tenant = state.db.get_tenant(&p.tenant_id).await?;
    let (models, stored_bytes) = tokio::try_join!(
        state.db.count_models(&p.tenant_id),
        state.db.stored_bytes(&p.tenant_id)
    )?;
    Ok(Json(Me {
        tenant_id: tenant.id,
        tenant: tenant.name,
        api_key_id: p.key_id,
        role: p.role.as_str().into(),
        quotas: QuotaView {
            requests_per_second: tenant.quotas.requests_per_second,
            max_models: tenant.quotas.max_models,
            max_stored_bytes: tenant.quotas.max_stored_bytes,
        },
        models,
        stored_bytes,
    }))
}
