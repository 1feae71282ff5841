//! Registering, listing, showing and deleting models; applications.

use axum::extract::multipart::MultipartRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use infaas_core::Model;
use infaas_protocol::v1::{
    AppDetail, AppList, AppSummary, ModelList, ModelTask, ModelView, PrunedVariantView,
};
use infaas_store::PrunedVariant;
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;
use infaas_control::registry::upload;

pub(crate) async fn model_view(state: &AppState, m: Model) -> ApiResult<ModelView> {
    let variants = state.db.list_variants(&m.id).await?;
    let pruned = state.db.list_pruned_variants(&m.id).await?;
    Ok(ModelView::new(m, variants).with_pruned(pruned.into_iter().map(pruned_view).collect()))
}

/// The wire form of a variant the registration pruned.
pub(crate) fn pruned_view(p: PrunedVariant) -> PrunedVariantView {
    PrunedVariantView {
        name: p.name,
        file: p.file_kind.as_str().into(),
        hardware: p.hardware.as_str().into(),
        threads: p.threads,
        max_batch: p.max_batch,
        accuracy: p.accuracy,
        dominated_by: p.dominated_by,
        reason: p.reason,
    }
}

/// Multipart form of a registration (documentation only).
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RegisterForm {
    /// Model name, unique in the tenant: 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    name: String,
    /// Application (created when new); the same rule as `name`.
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    app: String,
    /// What the model does: `classification` (default), the one task the platform measures
    /// accuracy for; any other is refused (400, naming `task`).
    #[schema(value_type = Option<ModelTask>)]
    task: Option<String>,
    /// The ONNX file.
    #[schema(value_type = String, format = Binary)]
    model: Vec<u8>,
    /// NPZ with `x` (or `x.<input>` per input) and integer labels `y`.
    #[schema(value_type = String, format = Binary)]
    validation: Vec<u8>,
    /// Output holding class scores or labels (automatic when absent).
    #[schema(max_length = 65536)]
    output: Option<String>,
    /// Largest batch the model may be given.
    #[schema(minimum = 1, maximum = 4096)]
    max_batch: Option<usize>,
    /// Class names by label, as a JSON array of strings or comma-separated, none empty.
    #[schema(
        pattern = r#"^(\s*\[[ \t\n\r]*"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-cA-CeEfF][0-9a-fA-F]{3}|u[dD][0-7][0-9a-fA-F]{2}))+"(?:[ \t\n\r]*,[ \t\n\r]*"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-cA-CeEfF][0-9a-fA-F]{3}|u[dD][0-7][0-9a-fA-F]{2}))+")*[ \t\n\r]*\]\s*|\s*[^,\s\[][^,]*(,\s*[^,\s][^,]*)*)$"#,
        max_length = 65536
    )]
    label_names: Option<String>,
    #[schema(max_length = 65536)]
    description: Option<String>,
}

/// Registers a model: checks it, stores it and starts variant generation and profiling
/// in the background. Poll `GET /v1/models/{name}` for progress.
#[utoipa::path(post, path = "/v1/models", tag = "models", security(("bearer" = [])),
    request_body(content = RegisterForm, content_type = "multipart/form-data"),
    responses((status = 202, description = "Accepted; variants are being generated", body = ModelView),
              (status = 400, description = "Invalid model, validation set or field", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 403, description = "Model or storage quota exceeded", body = ErrorBody),
              (status = 409, description = "The name is taken", body = ErrorBody),
              (status = 413, description = "Upload over the limit", body = ErrorBody)))]
pub async fn register(
    State(state): State<AppState>,
    p: Principal,
    multipart: Result<Multipart, MultipartRejection>,
) -> ApiResult<(StatusCode, Json<ModelView>)> {
    let multipart = multipart.map_err(|r| ApiError::Status {
        status: r.status(),
        message: format!(
            "the body must be multipart/form-data with fields name, app, model and validation: {}",
            r.body_text()
        ),
    })?;
    let model = crate::uploads::register(&state, &p.tenant_id, multipart).await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(ModelView::new(model, Vec::new())),
    ))
}

/// Lists the tenant's models with their variants.
#[utoipa::path(get, path = "/v1/models", tag = "models", operation_id = "list_models", security(("bearer" = [])),
    responses((status = 200, body = ModelList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, p: Principal) -> ApiResult<Json<ModelList>> {
    let mut models = Vec::new();
    for m in state.db.list_models(&p.tenant_id, None).await? {
        models.push(model_view(&state, m).await?);
    }
    Ok(Json(ModelList { models }))
}

/// A model with its status, progress and variants (accuracy, load time, memory,
/// latency per batch size), and the variants its registration pruned with why.
#[utoipa::path(get, path = "/v1/models/{name}", tag = "models", operation_id = "show_model", security(("bearer" = [])),
    params(("name" = String, Path, description = "Model name")),
    responses((status = 200, body = ModelView), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<ModelView>> {
    let m = state.db.get_model(&p.tenant_id, &name).await?;
    Ok(Json(model_view(&state, m).await?))
}

/// Deletes a model, its variants and every stored file.
#[utoipa::path(delete, path = "/v1/models/{name}", tag = "models", security(("bearer" = [])),
    params(("name" = String, Path, description = "Model name")),
    responses((status = 204, description = "Deleted"), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    let m = state.db.delete_model(&p.tenant_id, &name).await?;
    upload::remove_model_objects(&state, &m.id).await;
    if let Err(e) = state.cluster.refresh_catalog().await {
        tracing::warn!(error = %e, "cannot refresh the serving catalog");
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Lists the tenant's applications and their models.
#[utoipa::path(get, path = "/v1/apps", tag = "apps", security(("bearer" = [])),
    responses((status = 200, body = AppList), (status = 401, body = ErrorBody)))]
pub async fn list_apps(State(state): State<AppState>, p: Principal) -> ApiResult<Json<AppList>> {
    let apps = state.db.list_apps(&p.tenant_id).await?;
    Ok(Json(AppList {
        apps: apps
            .into_iter()
            .map(|(a, models)| AppSummary {
                name: a.name,
                created_at_ms: a.created_at_ms,
                models,
            })
            .collect(),
    }))
}

/// An application with its models and their variants.
#[utoipa::path(get, path = "/v1/apps/{app}", tag = "apps", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name")),
    responses((status = 200, body = AppDetail), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn show_app(
    State(state): State<AppState>,
    p: Principal,
    Path(app): Path<String>,
) -> ApiResult<Json<AppDetail>> {
    let known = state.db.list_apps(&p.tenant_id).await?;
    if !known.iter().any(|(a, _)| a.name == app) {
        return Err(ApiError::NotFound(format!("application '{app}' not found")));
    }
    let mut models = Vec::new();
    for m in state.db.list_models(&p.tenant_id, Some(&app)).await? {
        models.push(model_view(&state, m).await?);
    }
    Ok(Json(AppDetail { name: app, models }))
}
