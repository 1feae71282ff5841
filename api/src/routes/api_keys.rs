//! API keys of the caller's tenant (admin only).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use infaas_core::{ApiKey, Role};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;
use infaas_control::tenancy::generate_key;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// A label for the key, e.g. `ci` or `alice`: 1-128 characters, not all blank.
    #[schema(min_length = 1, max_length = 128, pattern = r"\S")]
    pub name: String,
    /// `admin` or `member` (default `member`).
    #[serde(default)]
    #[schema(value_type = Option<KeyRole>)]
    pub role: Option<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ApiKeyView {
    pub id: String,
    pub name: String,
    pub role: String,
    /// First characters of the key.
    pub prefix: String,
    pub created_at_ms: i64,
    pub last_used_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
}

impl From<ApiKey> for ApiKeyView {
    fn from(k: ApiKey) -> Self {
        ApiKeyView {
            id: k.id,
            name: k.name,
            role: k.role.as_str().into(),
            prefix: k.prefix,
            created_at_ms: k.created_at_ms,
            last_used_at_ms: k.last_used_at_ms,
            revoked_at_ms: k.revoked_at_ms,
        }
    }
}

/// The role of an API key (documentation of `role`).
#[derive(ToSchema)]
#[schema(rename_all = "lowercase")]
#[allow(dead_code)]
pub enum KeyRole {
    Admin,
    Member,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct CreatedKey {
    pub key: ApiKeyView,
    /// The secret, shown only in this answer.
    pub api_key: String,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<ApiKeyView>,
}

/// Creates an API key in the caller's tenant.
#[utoipa::path(post, path = "/v1/api-keys", tag = "api-keys", security(("bearer" = [])),
    request_body = CreateKeyRequest,
    responses((status = 201, body = CreatedKey), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    p: Principal,
    Json(req): Json<CreateKeyRequest>,
) -> ApiResult<(StatusCode, Json<CreatedKey>)> {
    p.require_admin()?;
    let name = req.name.trim();
    if name.is_empty() || req.name.chars().count() > 128 {
        return Err(ApiError::BadRequest(
            "field 'name' must be 1-128 characters".into(),
        ));
    }
    let role = match req.role.as_deref() {
        None => Role::Member,
        Some(r) => Role::parse(r).ok_or_else(|| {
            ApiError::BadRequest(format!(
                "field 'role' must be 'admin' or 'member', not '{r}'"
            ))
        })?,
    };
    let new = generate_key();
    let key = state
        .db
        .create_api_key(&p.tenant_id, name, role, &new.prefix, &new.hash)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedKey {
            key: key.into(),
            api_key: new.secret,
        }),
    ))
}

/// Lists the API keys of the caller's tenant (secrets are never shown again).
#[utoipa::path(get, path = "/v1/api-keys", tag = "api-keys", operation_id = "list_api_keys", security(("bearer" = [])),
    responses((status = 200, body = KeyList), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, p: Principal) -> ApiResult<Json<KeyList>> {
    p.require_admin()?;
    let keys = state.db.list_api_keys(&p.tenant_id).await?;
    Ok(Json(KeyList {
        keys: keys.into_iter().map(Into::into).collect(),
    }))
}

/// Revokes an API key of the caller's tenant; tokens issued for it stop working.
#[utoipa::path(delete, path = "/v1/api-keys/{id}", tag = "api-keys", security(("bearer" = [])),
    params(("id" = String, Path, description = "API key id")),
    responses((status = 200, body = ApiKeyView), (status = 401, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, description = "The tenant's last admin key", body = ErrorBody)))]
pub async fn revoke(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<ApiKeyView>> {
    p.require_admin()?;
    let keys = state.db.list_api_keys(&p.tenant_id).await?;
    let target = keys
        .iter()
        .find(|k| k.id == id && k.revoked_at_ms.is_none())
        .ok_or_else(|| ApiError::NotFound(format!("API key '{id}' not found")))?;
    if target.role == Role::Admin && state.db.count_active_admin_keys(&p.tenant_id).await? <= 1 {
        return Err(ApiError::Conflict(
            "this is the tenant's last admin key; create another admin key first".into(),
        ));
    }
    let key = state.db.revoke_api_key(&p.tenant_id, &id).await?;
    state.key_cache.invalidate(&p.tenant_id, &id);
    Ok(Json(key.into()))
}
