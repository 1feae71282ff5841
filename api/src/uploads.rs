//! Multipart uploads read into the control plane's framework-free forms: files stream to a
//! scratch directory within the upload limit, text fields are bounded.

use std::path::Path;

use axum::extract::multipart::{Field, Multipart, MultipartError};
use infaas_control::registry::upload::{RegistrationForm, UploadedFile};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::error::ApiError;

pub fn multipart_error(e: MultipartError) -> ApiError {
    let status = e.status();
    let message = if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        "the request body is larger than the configured upload limit".to_string()
    } else {
        format!("invalid multipart body: {}", e.body_text())
    };
    ApiError::Status { status, message }
}

pub async fn save_file(
    mut field: Field<'_>,
    dir: &Path,
    name: &str,
    limit: u64,
) -> Result<UploadedFile, ApiError> {
    let path = dir.join(name);
    let mut file = tokio::fs::File::create(&path)
        .await
        .map_err(ApiError::internal)?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        size += chunk.len() as u64;
        if size > limit {
            return Err(ApiError::PayloadTooLarge(format!(
                "field '{name}' is larger than the upload limit of {limit} bytes"
            )));
        }
        hasher.update(&chunk);
        file.write_all(&chunk).await.map_err(ApiError::internal)?;
    }
    file.flush().await.map_err(ApiError::internal)?;
    if size == 0 {
        return Err(ApiError::BadRequest(format!("field '{name}' is empty")));
    }
    Ok(UploadedFile {
        path,
        size,
        sha256: hex::encode(hasher.finalize()),
    })
}

pub async fn text(field: Field<'_>, name: &str) -> Result<String, ApiError> {
    let value = field.text().await.map_err(multipart_error)?;
    if value.len() > 64 * 1024 {
        return Err(ApiError::BadRequest(format!("field '{name}' is too long")));
    }
    Ok(value.trim().to_string())
}

/// Reads the multipart form, streaming files to `dir`.
pub async fn read_form(
    mut multipart: Multipart,
    dir: &Path,
    limit: u64,
) -> Result<RegistrationForm, ApiError> {
    let form = read_fields(&mut multipart, dir, limit).await;
    if form.is_err() {
        // Read what the client is still sending (the route's body limit bounds it): answering
        // before the body is read makes clients see a broken pipe instead of the error.
        while let Ok(Some(mut field)) = multipart.next_field().await {
            while let Ok(Some(_)) = field.chunk().await {}
        }
    }
    form
}

async fn read_fields(
    multipart: &mut Multipart,
    dir: &Path,
    limit: u64,
) -> Result<RegistrationForm, ApiError> {
    let mut form = RegistrationForm::default();
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "model" => form.model = Some(save_file(field, dir, "model", limit).await?),
            "validation" => form.validation = Some(save_file(field, dir, "validation", limit).await?),
            "name" => form.name = Some(text(field, &name).await?),
            "app" => form.app = Some(text(field, &name).await?),
            "task" => form.task = Some(text(field, &name).await?),
            "output" => form.declared.output = Some(text(field, &name).await?).filter(|s| !s.is_empty()),
            "description" => form.declared.description = Some(text(field, &name).await?),
            "max_batch" => {
                let v = text(field, &name).await?;
                let n: usize = v.parse().map_err(|_| {
                    ApiError::BadRequest(format!("field 'max_batch' must be a positive integer, not '{v}'"))
                })?;
                if n == 0 || n > 4096 {
                    return Err(ApiError::BadRequest(
                        "field 'max_batch' must be between 1 and 4096".into(),
                    ));
                }
                form.declared.max_batch = Some(n);
            }
            "label_names" => {
                let v = text(field, &name).await?;
                let names: Vec<String> = if v.starts_with('[') {
                    serde_json::from_str(&v).map_err(|e| {
                        ApiError::BadRequest(format!("field 'label_names' is not a JSON array of strings: {e}"))
                    })?
                } else {
                    v.split(',').map(|s| s.trim().to_string()).collect()
                };
                if names.is_empty() || names.iter().any(String::is_empty) {
                    return Err(ApiError::BadRequest(
                        "field 'label_names' must list non-empty names".into(),
                    ));
                }
                form.declared.label_names = Some(names);
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown field '{other}'; expected name, app, task, model, validation, output, max_batch, label_names, description"
                )))
            }
        }
    }
    Ok(form)
}

/// A model registration from its multipart form (the `POST /v1/models` route and the
/// dashboard's form): the files stream to a scratch directory that lives until the control
/// plane has checked and stored them.
pub async fn register(
    state: &crate::state::AppState,
    tenant_id: &str,
    multipart: Multipart,
) -> Result<infaas_core::Model, ApiError> {
    use infaas_control::registry::upload;
    let dir = upload::scratch_dir(state).await?;
    let form = read_form(multipart, dir.path(), state.config.max_upload_bytes).await?;
    Ok(upload::register(state, tenant_id, form).await?)
}
