//! `POST /v1/models`: the multipart upload, its validation, and storing what passed.
//! Nothing is stored unless every check passes.

use std::path::{Path, PathBuf};

use axum::extract::multipart::{Field, Multipart, MultipartError};
use bytes::Bytes;
use infaas_core::{validate_name, DataType, DeclaredMetadata};
use infaas_executors::accuracy::prediction_output;
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig, Signature};
use infaas_executors::validation;
use infaas_protocol::npz;
use infaas_store::{NewModel, ObjectRecord};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::error::ApiError;
use crate::quota::check_storage;
use crate::state::AppState;

/// Tasks the platform knows how to measure accuracy for.
pub const TASKS: &[&str] = &["classification"];

/// A file field written to a temporary file while streaming in.
pub struct UploadedFile {
    pub path: PathBuf,
    pub size: u64,
    pub sha256: String,
}

/// The fields of a registration.
#[derive(Default)]
pub struct RegistrationForm {
    pub name: Option<String>,
    pub app: Option<String>,
    pub task: Option<String>,
    pub model: Option<UploadedFile>,
    pub validation: Option<UploadedFile>,
    pub declared: DeclaredMetadata,
}

pub(crate) fn multipart_error(e: MultipartError) -> ApiError {
    let status = e.status();
    let message = if status == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        "the request body is larger than the configured upload limit".to_string()
    } else {
        format!("invalid multipart body: {}", e.body_text())
    };
    ApiError::Status { status, message }
}

pub(crate) async fn save_file(
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

pub(crate) async fn text(field: Field<'_>, name: &str) -> Result<String, ApiError> {
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

/// A whole registration: reads the form (streaming files to a scratch directory), checks
/// it, the name and the tenant's quotas, stores it and queues the background work. The
/// `POST /v1/models` route and the dashboard's form both register through here.
pub async fn register(
    state: &AppState,
    tenant_id: &str,
    multipart: Multipart,
) -> Result<infaas_core::Model, ApiError> {
    let tmp_root = state.config.tmp_dir();
    tokio::fs::create_dir_all(&tmp_root)
        .await
        .map_err(ApiError::internal)?;
    let dir = tempfile::Builder::new()
        .prefix("upload-")
        .tempdir_in(&tmp_root)
        .map_err(ApiError::internal)?;
    let form = read_form(multipart, dir.path(), state.config.max_upload_bytes).await?;
    if let Some(name) = &form.name {
        if state.db.get_model(tenant_id, name).await.is_ok() {
            return Err(ApiError::Conflict(format!("model '{name}' already exists")));
        }
    }
    let checked = check(form, state).await?;
    let bytes = (checked.model.size + checked.validation.size) as i64;
    check_storage(&state.db, tenant_id, 1, bytes).await?;
    let model = store(state, tenant_id, checked).await?;
    state.registry.submit(&model.id);
    tracing::info!(model = %model.name, app = %model.app, "model registered");
    Ok(model)
}

/// A registration that passed every check, ready to store.
pub struct Checked {
    pub name: String,
    pub app: String,
    pub task: String,
    pub model: UploadedFile,
    pub validation: UploadedFile,
    pub declared: DeclaredMetadata,
    pub signature: serde_json::Value,
}

fn required<T>(v: Option<T>, field: &str) -> Result<T, ApiError> {
    v.ok_or_else(|| ApiError::BadRequest(format!("missing field '{field}'")))
}

/// Validates the form: names, task, that ONNX Runtime loads the model, and that the
/// validation set fits the model's inputs and outputs.
pub async fn check(form: RegistrationForm, state: &AppState) -> Result<Checked, ApiError> {
    let name = required(form.name, "name")?;
    validate_name("model", &name).map_err(ApiError::BadRequest)?;
    let app = required(form.app, "app")?;
    validate_name("application", &app).map_err(ApiError::BadRequest)?;
    let task = form.task.unwrap_or_else(|| "classification".into());
    if !TASKS.contains(&task.as_str()) {
        return Err(ApiError::BadRequest(format!(
            "task '{task}' is not supported; supported tasks: {}",
            TASKS.join(", ")
        )));
    }
    let model = required(form.model, "model")?;
    let validation = required(form.validation, "validation")?;
    state.runtime_ready()?;
    let declared = form.declared;
    let (model_path, val_path, declared_c) = (
        model.path.clone(),
        validation.path.clone(),
        declared.clone(),
    );
    let signature =
        tokio::task::spawn_blocking(move || check_files(&model_path, &val_path, &declared_c))
            .await
            .map_err(ApiError::internal)??;
    Ok(Checked {
        name,
        app,
        task,
        model,
        validation,
        declared,
        signature: signature_json(&signature),
    })
}

fn check_files(
    model: &Path,
    val: &Path,
    declared: &DeclaredMetadata,
) -> Result<Signature, ApiError> {
    let bytes = std::fs::read(model).map_err(ApiError::internal)?;
    infaas_onnx::OnnxModel::parse(&bytes).map_err(|e| {
        ApiError::BadRequest(format!("field 'model' is not a valid ONNX model: {e}"))
    })?;
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization: OptLevel::Disable,
        hardware: Hardware::Cpu,
        optimized_model_out: None,
        simulated: None,
    };
    let engine = Engine::load(bytes, &cfg).map_err(|e| {
        ApiError::BadRequest(format!(
            "field 'model': ONNX Runtime cannot load the model: {e}"
        ))
    })?;
    let sig = engine.signature().clone();
    drop(engine);
    let (output, _) = prediction_output(&sig, declared.output.as_deref()).map_err(|e| {
        ApiError::BadRequest(format!(
            "the model's outputs do not fit task 'classification': {e}"
        ))
    })?;
    let val_bytes = std::fs::read(val).map_err(ApiError::internal)?;
    let arrays = npz::read_npz_with_limit(&val_bytes, 2 * 1024 * 1024 * 1024).map_err(|e| {
        ApiError::BadRequest(format!("field 'validation' is not a valid NPZ file: {e}"))
    })?;
    let set = validation::match_validation(&sig, arrays).map_err(|e| {
        ApiError::BadRequest(format!("field 'validation' does not fit the model: {e}"))
    })?;
    let classes = declared
        .label_names
        .as_ref()
        .map(Vec::len)
        .or_else(|| class_count(&sig, &output));
    if let Some(c) = classes {
        if let Some((row, label)) = set
            .labels
            .iter()
            .enumerate()
            .find(|(_, &l)| l as usize >= c)
        {
            return Err(ApiError::BadRequest(format!(
                "field 'validation': label {label} at row {row} is out of range; the model has {c} classes (labels 0..{})",
                c - 1
            )));
        }
    }
    Ok(sig)
}

/// Number of classes when the prediction output (or another float output) is `[N, C]`.
fn class_count(sig: &Signature, prediction: &str) -> Option<usize> {
    let scores = |o: &&infaas_executors::engine::TensorSpec| {
        matches!(o.dtype, DataType::Fp32 | DataType::Fp64) && o.dims.len() == 2
    };
    sig.output(prediction)
        .filter(scores)
        .or_else(|| sig.outputs.iter().find(scores))
        .and_then(|o| o.dims.get(1).copied().flatten())
}

pub fn signature_json(sig: &Signature) -> serde_json::Value {
    let io = |specs: &[infaas_executors::engine::TensorSpec]| {
        specs
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "datatype": s.dtype.as_str(),
                    "shape": s.dims.iter().map(|d| d.map(|v| v as i64).unwrap_or(-1)).collect::<Vec<_>>(),
                })
            })
            .collect::<Vec<_>>()
    };
    serde_json::json!({ "inputs": io(&sig.inputs), "outputs": io(&sig.outputs) })
}

/// Object-store key of a model's file.
pub fn model_key(tenant_id: &str, model_id: &str, file: &str) -> String {
    format!("tenants/{tenant_id}/models/{model_id}/{file}")
}

/// Streams an uploaded file into the object store and accounts it to the model.
async fn store_file(
    state: &AppState,
    tenant_id: &str,
    model_id: &str,
    file: &UploadedFile,
    key: &str,
) -> Result<(), ApiError> {
    let f = tokio::fs::File::open(&file.path)
        .await
        .map_err(ApiError::internal)?;
    let body: infaas_store::ByteStream =
        Box::pin(tokio_util::io::ReaderStream::with_capacity(f, 256 * 1024));
    let size = state.objects.put_stream(key, body).await?;
    state
        .db
        .record_object(&ObjectRecord {
            key: key.to_string(),
            tenant_id: tenant_id.to_string(),
            size_bytes: size as i64,
            owner_kind: "model".into(),
            owner_id: model_id.to_string(),
        })
        .await?;
    Ok(())
}

/// Stores the files and the model row; on any failure removes what was stored.
pub async fn store(
    state: &AppState,
    tenant_id: &str,
    c: Checked,
) -> Result<infaas_core::Model, ApiError> {
    let model_id = uuid::Uuid::new_v4().to_string();
    let source_key = model_key(tenant_id, &model_id, "source.onnx");
    let validation_key = model_key(tenant_id, &model_id, "validation.npz");
    let result = async {
        store_file(state, tenant_id, &model_id, &c.model, &source_key).await?;
        store_file(state, tenant_id, &model_id, &c.validation, &validation_key).await?;
        let model = state
            .db
            .create_model(
                tenant_id,
                &NewModel {
                    id: model_id.clone(),
                    name: c.name.clone(),
                    app: c.app.clone(),
                    task: c.task.clone(),
                    source_key: source_key.clone(),
                    validation_key: validation_key.clone(),
                    size_bytes: c.model.size as i64,
                    sha256: c.model.sha256.clone(),
                    declared: c.declared.clone(),
                    signature: c.signature.clone(),
                },
            )
            .await?;
        Ok::<_, ApiError>(model)
    }
    .await;
    if result.is_err() {
        remove_model_objects(state, &model_id).await;
    }
    result
}

/// Deletes every object accounted to a model (best effort; failures are logged).
pub async fn remove_model_objects(state: &AppState, model_id: &str) {
    let records = match state.db.objects_of("model", model_id).await {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(model_id, error = %e, "cannot list the objects of a model");
            return;
        }
    };
    for r in records {
        match state.objects.delete(&r.key).await {
            Ok(()) => {
                if let Err(e) = state.db.forget_object(&r.key).await {
                    tracing::error!(key = %r.key, error = %e, "cannot forget a deleted object");
                }
            }
            Err(e) => tracing::error!(key = %r.key, error = %e, "cannot delete an object"),
        }
    }
}

/// Bytes of a small stored object (validation sets and model files are bounded by the
/// upload limit).
pub async fn fetch(state: &AppState, key: &str) -> Result<Bytes, ApiError> {
    Ok(state.objects.get_bytes(key).await?)
}
