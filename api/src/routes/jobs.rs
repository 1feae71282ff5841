//! Offline jobs (`/v1/jobs`) and the tenant's file area (`/v1/files`) that jobs read and
//! write.

use axum::body::{Body, Bytes};
use axum::extract::{FromRequest, Multipart, Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;
use crate::uploads::{multipart_error, text};
use infaas_control::jobs::{self, check_path, file_key, Submission};
use infaas_protocol::v1::{JobList, JobRequest, JobView};

/// Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded with the job.
#[allow(dead_code)]
#[derive(ToSchema)]
pub struct JobForm {
    /// One or more `.npz` / `.jsonl` files (repeat the field).
    #[schema(value_type = Vec<String>, format = Binary, min_items = 1)]
    input: Vec<Vec<u8>>,
    app: Option<String>,
    min_accuracy: Option<f64>,
    model: Option<String>,
    pipeline: Option<String>,
    output_path: Option<String>,
    webhook_url: Option<String>,
}

/// Reads a multipart submission, saving its input files under a fresh `job-inputs/<uuid>`
/// folder of the file area; a refused form leaves none of them behind.
pub(crate) async fn from_multipart(
    state: &AppState,
    tenant: &str,
    multipart: Multipart,
) -> ApiResult<Submission> {
    let upload_dir = format!("job-inputs/{}", uuid::Uuid::new_v4());
    let read = read_multipart(state, tenant, multipart, &upload_dir).await;
    if read.is_err() {
        jobs::discard_files(state, tenant, &upload_dir).await;
    }
    read
}

async fn read_multipart(
    state: &AppState,
    tenant: &str,
    mut multipart: Multipart,
    upload_dir: &str,
) -> ApiResult<Submission> {
    let limit = state.config.max_upload_bytes;
    let mut s = Submission {
        app: None,
        model: None,
        pipeline: None,
        min_accuracy: None,
        input_path: upload_dir.to_string(),
        output_path: None,
        webhook_url: None,
    };
    let mut files = 0;
    while let Some(mut field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "input" => {
                let file_name = field.file_name().unwrap_or_default().to_string();
                let file_name = check_path("input file name", &file_name, false)?;
                if file_name.contains('/') || jobs::input::Format::of(&file_name).is_none() {
                    return Err(ApiError::BadRequest(format!(
                        "input file '{file_name}' must be a plain name ending in .npz, .jsonl or .ndjson"
                    )));
                }
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
                    if (bytes.len() + chunk.len()) as u64 > limit {
                        return Err(ApiError::PayloadTooLarge(format!(
                            "input file '{file_name}' is larger than the upload limit of {limit} bytes"
                        )));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                jobs::put_file(
                    state,
                    tenant,
                    &format!("{upload_dir}/{file_name}"),
                    Bytes::from(bytes),
                )
                .await?;
                files += 1;
            }
            "app" => s.app = Some(text(field, &name).await?).filter(|v| !v.is_empty()),
            "model" => s.model = Some(text(field, &name).await?).filter(|v| !v.is_empty()),
            "pipeline" => {
                s.pipeline = Some(text(field, &name).await?).filter(|v| !v.is_empty())
            }
            "output_path" => {
                s.output_path = Some(text(field, &name).await?).filter(|v| !v.is_empty())
            }
            "webhook_url" => {
                s.webhook_url = Some(text(field, &name).await?).filter(|v| !v.is_empty())
            }
            "min_accuracy" => {
                let v = text(field, &name).await?;
                if !v.is_empty() {
                    s.min_accuracy = Some(v.parse().map_err(|_| {
                        ApiError::BadRequest(format!(
                            "field 'min_accuracy' must be a number in [0, 1], not '{v}'"
                        ))
                    })?);
                }
            }
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown field '{other}'; expected input, app, min_accuracy, model, pipeline, output_path, webhook_url"
                )))
            }
        }
    }
    if files == 0 {
        return Err(ApiError::BadRequest(
            "no 'input' file: upload .npz or .jsonl files as field 'input', or send JSON with 'input_path'".into(),
        ));
    }
    Ok(s)
}

/// Submits an offline job: JSON naming inputs in the file area, or multipart with the input
/// files. Inputs are read and checked against the target's models before the job is queued.
#[utoipa::path(post, path = "/v1/jobs", tag = "jobs", security(("bearer" = [])),
    request_body(content((JobRequest = "application/json"), (JobForm = "multipart/form-data"))),
    responses((status = 202, description = "Queued", body = JobView),
              (status = 400, description = "Invalid request or inputs that do not fit the model (the message names the object and array or line)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "Unknown application, model or pipeline, an application without models, or no input at input_path", body = ErrorBody),
              (status = 409, description = "Every model of the target failed registration", body = ErrorBody),
              (status = 413, body = ErrorBody),
              (status = 422, description = "No variant reaches min_accuracy", body = ErrorBody),
              (status = 503, description = "No model of the target is ready yet; retry", body = ErrorBody)))]
pub async fn submit(
    State(state): State<AppState>,
    p: Principal,
    req: Request,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    let submission = if content_type.starts_with("multipart/form-data") {
        let multipart =
            Multipart::from_request(req, &state)
                .await
                .map_err(|r| ApiError::Status {
                    status: r.status(),
                    message: format!("invalid multipart body: {}", r.body_text()),
                })?;
        let s = from_multipart(&state, &p.tenant_id, multipart).await?;
        let job = jobs::submit_uploaded(&state, &p.tenant_id, s).await?;
        return Ok((StatusCode::ACCEPTED, Json(infaas_control::jobs::view(&job))));
    } else {
        let Json(r) = Json::<JobRequest>::from_request(req, &state).await?;
        Submission {
            app: r.app,
            model: r.model,
            pipeline: r.pipeline,
            min_accuracy: r.min_accuracy,
            input_path: r.input_path,
            output_path: r.output_path,
            webhook_url: r.webhook_url,
        }
    };
    let job = jobs::submit(&state, &p.tenant_id, submission).await?;
    Ok((StatusCode::ACCEPTED, Json(infaas_control::jobs::view(&job))))
}

/// The tenant's jobs, newest first.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", operation_id = "list_jobs", security(("bearer" = [])),
    responses((status = 200, body = JobList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, p: Principal) -> ApiResult<Json<JobList>> {
    let jobs = state.db.list_jobs(&p.tenant_id).await?;
    Ok(Json(JobList {
        jobs: jobs.iter().map(infaas_control::jobs::view).collect(),
    }))
}

/// A job: state, items done / total, variant, ETA.
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", operation_id = "show_job", security(("bearer" = [])),
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, body = JobView), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    let job = state.db.get_job(&p.tenant_id, &id).await?;
    Ok(Json(infaas_control::jobs::view(&job)))
}

/// Cancels a job that has not ended (chunks already written stay).
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", security(("bearer" = [])),
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "The job as it is now", body = JobView),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    let job = state.db.cancel_job(&p.tenant_id, &id).await?;
    Ok(Json(infaas_control::jobs::view(&job)))
}

/// The job's outputs so far, as JSON lines in item order (`{"item": N, "outputs": [...]}`);
/// header `x-infaas-complete` says whether every chunk is in.
#[utoipa::path(get, path = "/v1/jobs/{id}/results", tag = "jobs", security(("bearer" = [])),
    params(("id" = String, Path, description = "Job id")),
    responses((status = 200, description = "JSON lines", content_type = "application/x-ndjson", body = String),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn results(
    State(state): State<AppState>,
    p: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let job = state.db.get_job(&p.tenant_id, &id).await?;
    let chunks = state.db.list_chunks(&job.id).await?;
    let complete = chunks.iter().all(|c| c.state == "done");
    let keys: Vec<String> = chunks
        .into_iter()
        .filter(|c| c.state == "done")
        .filter_map(|c| c.output_key)
        .collect();
    let objects = state.objects.clone();
    let body = futures::stream::iter(keys)
        .then(move |key| {
            let objects = objects.clone();
            async move { objects.get_bytes(&key).await }
        })
        .map(|r| r.map_err(std::io::Error::other));
    let mut resp = Body::from_stream(body).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    h.insert(
        "x-infaas-complete",
        HeaderValue::from_static(if complete { "true" } else { "false" }),
    );
    Ok(resp)
}

/// Stores a file in the tenant's file area (job inputs), replacing any file at that path.
#[utoipa::path(put, path = "/v1/files/{path}", tag = "files", security(("bearer" = [])),
    params(("path" = String, Path, description = "Path in the file area, e.g. `batches/day1/part-1.npz`: '/'-separated names of letters, digits, '.', '_' and '-' (not '.' or '..', at most 255 each), at most 512 characters",
        pattern = r"^/?(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253})(?:/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253}))*$", max_length = 512)),
    request_body(content = inline(FileBytes), content_type = "application/octet-stream", description = "The file's bytes (at least one)"),
    responses((status = 201, description = "Stored", body = FileView),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 403, description = "Storage quota exceeded", body = ErrorBody),
              (status = 409, description = "A folder is at the path, or a file at one of its folders (local file store)", body = ErrorBody),
              (status = 413, body = ErrorBody)))]
pub async fn put_file(
    State(state): State<AppState>,
    p: Principal,
    Path(path): Path<String>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<FileView>)> {
    let path = check_path("path", &path, false)?;
    if body.is_empty() {
        return Err(ApiError::BadRequest(format!(
            "the body is empty: send the bytes of file '{path}'"
        )));
    }
    let tenant = state.db.get_tenant(&p.tenant_id).await?;
    let stored = state.db.stored_bytes(&p.tenant_id).await?;
    if stored + body.len() as i64 > tenant.quotas.max_stored_bytes {
        return Err(ApiError::QuotaExceeded(format!(
            "storing {} more bytes would exceed the tenant's quota of {} bytes ({stored} in use)",
            body.len(),
            tenant.quotas.max_stored_bytes
        )));
    }
    let size = jobs::put_file(&state, &p.tenant_id, &path, body).await?;
    Ok((StatusCode::CREATED, Json(FileView { path, size })))
}

/// Downloads a file of the tenant's file area (job inputs and outputs).
#[utoipa::path(get, path = "/v1/files/{path}", tag = "files", security(("bearer" = [])),
    params(("path" = String, Path, description = "Path in the file area", pattern = r"^/?(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253})(?:/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253}))*$", max_length = 512)),
    responses((status = 200, content_type = "application/octet-stream", body = String),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn get_file(
    State(state): State<AppState>,
    p: Principal,
    Path(path): Path<String>,
) -> ApiResult<Response> {
    let path = check_path("path", &path, false)?;
    let key = file_key(&p.tenant_id, &path);
    let stream = state.objects.get_stream(&key).await.map_err(|e| match e {
        infaas_store::StoreError::ObjectNotFound(_) => {
            ApiError::NotFound(format!("file '{path}' not found"))
        }
        other => other.into(),
    })?;
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    Ok(resp)
}

/// The bytes of a file in the file area (documentation of `PUT /v1/files/{path}`): at least
/// one.
pub struct FileBytes;

impl utoipa::PartialSchema for FileBytes {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::Type::String)
            .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                utoipa::openapi::KnownFormat::Binary,
            )))
            .min_length(Some(1))
            .into()
    }
}

impl ToSchema for FileBytes {}

#[derive(Serialize, ToSchema)]
pub struct FileView {
    pub path: String,
    pub size: u64,
}

#[derive(Serialize, ToSchema)]
pub struct FileList {
    pub files: Vec<FileView>,
}

#[derive(Deserialize, IntoParams)]
pub struct FilesQuery {
    /// Only files under this prefix (a folder or a file; empty: everything).
    #[param(
        pattern = r"^$|^/?(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253})(?:/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253}))*/?$",
        max_length = 512
    )]
    pub prefix: Option<String>,
}

/// Lists files of the tenant's file area.
#[utoipa::path(get, path = "/v1/files", tag = "files", security(("bearer" = [])),
    params(FilesQuery),
    responses((status = 200, body = FileList), (status = 400, body = ErrorBody),
              (status = 401, body = ErrorBody)))]
pub async fn list_files(
    State(state): State<AppState>,
    p: Principal,
    Query(q): Query<FilesQuery>,
) -> ApiResult<Json<FileList>> {
    let root = file_key(&p.tenant_id, "");
    let prefix = match q.prefix.as_deref().filter(|s| !s.is_empty()) {
        Some(prefix) => format!("{root}{}", check_path("prefix", prefix, true)?),
        None => root.clone(),
    };
    let files = state
        .objects
        .list(&prefix)
        .await?
        .into_iter()
        .filter_map(|o| {
            Some(FileView {
                path: o.key.strip_prefix(&root)?.to_string(),
                size: o.size,
            })
        })
        .collect();
    Ok(Json(FileList { files }))
}
