//! Registering a model: the form's validation (names, ONNX model, validation set) and
//! storing what passed. Nothing is stored unless every check passes. The HTTP edge streams
//! the multipart upload into a [`RegistrationForm`].

use std::path::{Path, PathBuf};

use bytes::Bytes;
use infaas_core::{validate_name, DataType, DeclaredMetadata};
use infaas_executors::accuracy::prediction_output;
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig, Signature};
use infaas_executors::validation;
use infaas_protocol::npz;
use infaas_store::{NewModel, ObjectRecord};

use crate::error::Error;
use crate::platform::ControlPlane;
use crate::tenancy::check_storage;

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

/// A scratch directory under the data directory for an upload's files; removed when
/// dropped, so keep it until [`register`] returns.
pub async fn scratch_dir(state: &ControlPlane) -> Result<tempfile::TempDir, Error> {
    let tmp_root = state.config.tmp_dir();
    tokio::fs::create_dir_all(&tmp_root)
        .await
        .map_err(Error::internal)?;
    tempfile::Builder::new()
        .prefix("upload-")
        .tempdir_in(&tmp_root)
        .map_err(Error::internal)
}

/// A whole registration: checks the form (files already streamed to a scratch directory),
/// the name and the tenant's quotas, stores it and queues the background work. The
/// `POST /v1/models` route and the dashboard's form both register through here.
pub async fn register(
    state: &ControlPlane,
    tenant_id: &str,
    form: RegistrationForm,
) -> Result<infaas_core::Model, Error> {
    if let Some(name) = &form.name {
        if state.db.get_model(tenant_id, name).await.is_ok() {
            return Err(Error::Conflict(format!("model '{name}' already exists")));
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

fn required<T>(v: Option<T>, field: &str) -> Result<T, Error> {
    v.ok_or_else(|| Error::Invalid(format!("missing field '{field}'")))
}

/// Validates the form: names, task, that ONNX Runtime loads the model, and that the
/// validation set fits the model's inputs and outputs.
pub async fn check(form: RegistrationForm, state: &ControlPlane) -> Result<Checked, Error> {
    let name = required(form.name, "name")?;
    validate_name("model", &name).map_err(Error::Invalid)?;
    let app = required(form.app, "app")?;
    validate_name("application", &app).map_err(Error::Invalid)?;
    let task = form.task.unwrap_or_else(|| "classification".into());
    if !TASKS.contains(&task.as_str()) {
        return Err(Error::Invalid(format!(
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
            .map_err(Error::internal)??;
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

fn check_files(model: &Path, val: &Path, declared: &DeclaredMetadata) -> Result<Signature, Error> {
    let bytes = std::fs::read(model).map_err(Error::internal)?;
    infaas_onnx::OnnxModel::parse(&bytes)
        .map_err(|e| Error::Invalid(format!("field 'model' is not a valid ONNX model: {e}")))?;
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization: OptLevel::Disable,
        hardware: Hardware::Cpu,
        optimized_model_out: None,
        simulated: None,
    };
    let engine = Engine::load(bytes, &cfg).map_err(|e| {
        Error::Invalid(format!(
            "field 'model': ONNX Runtime cannot load the model: {e}"
        ))
    })?;
    let sig = engine.signature().clone();
    drop(engine);
    let (output, _) = prediction_output(&sig, declared.output.as_deref()).map_err(|e| {
        Error::Invalid(format!(
            "the model's outputs do not fit task 'classification': {e}"
        ))
    })?;
    let val_bytes = std::fs::read(val).map_err(Error::internal)?;
    let arrays = npz::read_npz_with_limit(&val_bytes, 2 * 1024 * 1024 * 1024)
        .map_err(|e| Error::Invalid(format!("field 'validation' is not a valid NPZ file: {e}")))?;
    let set = validation::match_validation(&sig, arrays)
        .map_err(|e| Error::Invalid(format!("field 'validation' does not fit the model: {e}")))?;
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
            return Err(Error::Invalid(format!(
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
    state: &ControlPlane,
    tenant_id: &str,
    model_id: &str,
    file: &UploadedFile,
    key: &str,
) -> Result<(), Error> {
    let f = tokio::fs::File::open(&file.path)
        .await
        .map_err(Error::internal)?;
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
    state: &ControlPlane,
    tenant_id: &str,
    c: Checked,
) -> Result<infaas_core::Model, Error> {
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
        Ok::<_, Error>(model)
    }
    .await;
    if result.is_err() {
        remove_model_objects(state, &model_id).await;
    }
    result
}

/// Deletes every object accounted to a model (best effort; failures are logged).
pub async fn remove_model_objects(state: &ControlPlane, model_id: &str) {
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
pub async fn fetch(state: &ControlPlane, key: &str) -> Result<Bytes, Error> {
    Ok(state.objects.get_bytes(key).await?)
}
