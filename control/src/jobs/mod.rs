//! Offline (batch) jobs: submission (inputs checked and cut into chunks up front), the
//! runner that works through chunks on spare capacity, and the tenant's file area that jobs
//! read from and write to.
//!
//! Durability: a job and its chunks live in the database; a chunk is claimed with a lease,
//! its output object is written under a key fixed by the chunk's index, and only then is the
//! chunk marked done (counting its items once). A runner or worker that dies mid-chunk leaves
//! the chunk to be claimed again when its lease runs out; rewriting the same key means no
//! output is doubled, and a chunk is done only once its output exists, so none is skipped.

pub mod input;
pub mod runner;

use infaas_protocol::v1::JobView;
use infaas_store::db::jobs::state;
use infaas_store::{Job, NewChunk, NewJob, ObjectRecord};

use crate::cluster::schema::InputSpec;
use crate::error::Error;
use crate::platform::ControlPlane;
use input::Format;

/// Most input objects one job may read.
const MAX_INPUT_OBJECTS: usize = 10_000;

/// The object key of a path in the tenant's file area.
pub fn file_key(tenant_id: &str, path: &str) -> String {
    format!("tenants/{tenant_id}/files/{path}")
}

/// Checks a path of the tenant's file area: `/`-separated segments of letters, digits, `.`,
/// `_` and `-`, none of them `.` or `..`.
pub fn check_path(what: &str, path: &str, allow_trailing_slash: bool) -> Result<String, Error> {
    // One leading '/' (and one trailing, where allowed) may be given; the OpenAPI document's
    // patterns say exactly this.
    let trimmed = path.strip_prefix('/').unwrap_or(path);
    let body = if allow_trailing_slash {
        trimmed.strip_suffix('/').unwrap_or(trimmed)
    } else {
        trimmed
    };
    let ok = !body.is_empty()
        && path.len() <= 512
        && body.split('/').all(|seg| {
            !seg.is_empty()
                && seg.len() <= 255
                && seg != "."
                && seg != ".."
                && seg
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        });
    if !ok {
        return Err(Error::Invalid(format!(
            "{what} '{path}' is not a valid path: use '/'-separated names of letters, digits, '.', '_' and '-' (at most 255 characters each, 512 in all)"
        )));
    }
    Ok(body.to_string())
}

/// A job as the API shows it: progress, rate and time left worked out from its counts.
pub fn view(j: &Job) -> JobView {
    let now = infaas_core::time::now_ms();
    let progress = if j.items_total > 0 {
        j.items_done as f64 / j.items_total as f64
    } else {
        0.0
    };
    let rate = j.started_at.and_then(|s| {
        let end = j.finished_at.unwrap_or(now);
        let secs = (end - s) as f64 / 1e3;
        (secs > 0.0 && j.items_done > 0).then(|| j.items_done as f64 / secs)
    });
    let eta_s = match (rate, state::is_final(&j.state)) {
        (_, true) => Some(0.0),
        (Some(r), false) => Some((j.items_total - j.items_done) as f64 / r),
        (None, false) => None,
    };
    JobView {
        id: j.id.clone(),
        state: j.state.clone(),
        app: j.app.clone(),
        model: j.model.clone(),
        pipeline: j.pipeline.clone(),
        min_accuracy: j.min_accuracy,
        variant: j.variant_name.clone(),
        items_done: j.items_done,
        items_total: j.items_total,
        progress,
        items_per_s: rate,
        eta_s,
        paused_reason: j.paused_reason.clone(),
        error: j.error.clone(),
        input_path: j.input_path.clone(),
        output_path: j.output_path.clone(),
        webhook_url: j.webhook_url.clone(),
        created_at_ms: j.created_at,
        started_at_ms: j.started_at,
        finished_at_ms: j.finished_at,
    }
}

/// A submission, after the wire format.
#[derive(Debug, Clone)]
pub struct Submission {
    pub app: Option<String>,
    pub model: Option<String>,
    /// A pipeline: every item goes through it (its nodes model-less as online).
    pub pipeline: Option<String>,
    pub min_accuracy: Option<f64>,
    /// Prefix (or one object) in the tenant's file area.
    pub input_path: String,
    pub output_path: Option<String>,
    pub webhook_url: Option<String>,
}

/// Addresses a tenant's webhook may not reach unless `job_webhook_allow_private` is set:
/// loopback, private, link-local, unspecified, shared (CGNAT) and unique-local ranges.
pub fn is_internal(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (b & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| is_internal(IpAddr::V4(v4)))
        }
    }
}

/// Submits a job over files uploaded with it (under `submission.input_path`); when the job is
/// refused, the uploaded files are removed again.
pub async fn submit_uploaded(
    state: &ControlPlane,
    tenant: &str,
    submission: Submission,
) -> Result<Job, Error> {
    let dir = submission.input_path.clone();
    let submitted = submit(state, tenant, submission).await;
    if submitted.is_err() {
        discard_files(state, tenant, &dir).await;
    }
    submitted
}

/// Deletes the files under `dir` in the tenant's file area, objects and records (best effort:
/// failures are logged, the caller's own error is what the client needs to see).
pub async fn discard_files(state: &ControlPlane, tenant: &str, dir: &str) {
    let prefix = file_key(tenant, &format!("{}/", dir.trim_end_matches('/')));
    let listed = match state.objects.list(&prefix).await {
        Ok(listed) => listed,
        Err(e) => {
            tracing::warn!(prefix = %prefix, error = %e, "cannot list refused job inputs");
            return;
        }
    };
    for o in listed {
        if let Err(e) = state.objects.delete(&o.key).await {
            tracing::warn!(key = %o.key, error = %e, "cannot delete a refused job input");
            continue;
        }
        if let Err(e) = state.db.forget_object(&o.key).await {
            tracing::warn!(key = %o.key, error = %e, "cannot forget a refused job input");
        }
    }
}

/// Rows of a pipeline job sent through the pipeline at once.
pub const PIPELINE_JOB_BATCH: usize = 64;

/// The input schema of a pipeline: its declared inputs.
pub(crate) fn pipeline_schema(p: &crate::pipelines::Prepared) -> Vec<(String, Vec<InputSpec>)> {
    let inputs = p
        .pipeline
        .spec
        .inputs
        .iter()
        .map(|i| InputSpec {
            name: i.name.clone(),
            datatype: infaas_core::DataType::parse(&i.datatype)
                .map_or_else(|| i.datatype.clone(), |d| d.as_str().to_string()),
            features: i.shape.clone(),
        })
        .collect();
    vec![(format!("pipeline:{}", p.pipeline.spec.name), inputs)]
}

/// The input schemas a job's target serves: one per distinct schema of its models.
pub(crate) fn target_schemas(
    state: &ControlPlane,
    tenant: &str,
    app: Option<&str>,
    model: Option<&str>,
) -> Vec<(String, Vec<InputSpec>)> {
    let catalog = state.cluster.catalog();
    match (app, model) {
        (Some(app), _) => catalog
            .app(tenant, app)
            .map(|a| {
                a.schemas
                    .iter()
                    .map(|s| (s.key.clone(), s.inputs.clone()))
                    .collect()
            })
            .unwrap_or_default(),
        (None, Some(model)) => catalog
            .model(tenant, model)
            .map(|s| vec![(s.schema_key.clone(), s.inputs.clone())])
            .unwrap_or_default(),
        (None, None) => Vec::new(),
    }
}

/// Checks a submission (target, accuracy, inputs: every object is read and must fit the
/// model) and stores the job with its chunks.
pub async fn submit(state: &ControlPlane, tenant: &str, s: Submission) -> Result<Job, Error> {
    state.runtime_ready()?;
    let targets = [s.app.is_some(), s.model.is_some(), s.pipeline.is_some()]
        .iter()
        .filter(|t| **t)
        .count();
    if targets > 1 {
        return Err(Error::Invalid(
            "give one of 'app' (model-less), 'model' or 'pipeline', not several".into(),
        ));
    }
    if targets == 0 {
        return Err(Error::Invalid(
            "give 'app' (with an optional 'min_accuracy'), 'model' or 'pipeline'".into(),
        ));
    }
    if s.pipeline.is_some() && s.min_accuracy.is_some() {
        return Err(Error::Invalid(
            "'min_accuracy' applies to application jobs; a pipeline job runs under the pipeline's own requirements".into(),
        ));
    }
    let (app, model) = (s.app.as_deref(), s.model.as_deref());
    if let Some(a) = s.min_accuracy {
        if !(0.0..=1.0).contains(&a) {
            return Err(Error::Invalid(format!(
                "min_accuracy must be a fraction in [0, 1], not {a}"
            )));
        }
    }
    if model.is_some() && s.min_accuracy.is_some() {
        return Err(Error::Invalid(
            "'min_accuracy' applies to application jobs; a model job runs that model".into(),
        ));
    }
    if let Some(url) = &s.webhook_url {
        let parsed = reqwest::Url::parse(url)
            .map_err(|e| Error::Invalid(format!("webhook_url '{url}' is not a URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Invalid(format!(
                "webhook_url '{url}' must be http or https"
            )));
        }
        let internal = match parsed.host_str() {
            Some(host) => match host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
            {
                Ok(ip) => is_internal(ip),
                Err(_) => host.eq_ignore_ascii_case("localhost"),
            },
            None => true,
        };
        if internal && !state.config.job_webhook_allow_private {
            return Err(Error::Invalid(format!(
                "webhook_url '{url}' points to a loopback, private or link-local address; the server's job_webhook_allow_private setting allows that"
            )));
        }
    }
    let input_path = check_path("input_path", &s.input_path, true)?;
    let output_path = match &s.output_path {
        Some(p) => check_path("output_path", p, true)?,
        None => format!("job-outputs/{}", uuid::Uuid::new_v4()),
    };

    // The target: it must exist and serve variants.
    let mut schemas = match &s.pipeline {
        Some(name) => pipeline_schema(&*crate::pipelines::prepared(state, tenant, name).await?),
        None => target_schemas(state, tenant, app, model),
    };
    if schemas.is_empty() {
        if let Err(e) = state.cluster.refresh_catalog().await {
            tracing::warn!(error = %e, "cannot refresh the serving catalog");
        }
        schemas = target_schemas(state, tenant, app, model);
    }
    if schemas.is_empty() {
        return Err(crate::serving::not_serving(&state.db, tenant, app, model).await);
    }
    if let (Some(app), Some(min)) = (app, s.min_accuracy) {
        let snapshot = state.cluster.snapshot();
        let best = schemas
            .iter()
            .flat_map(|(key, _)| {
                snapshot
                    .app_variants(tenant, &crate::cluster::schema::app_key(app, key))
                    .iter()
                    .map(|&v| snapshot.variants()[v].accuracy)
            })
            .fold(0.0f64, f64::max);
        if best < min {
            return Err(Error::Unsatisfiable {
                message: format!(
                    "no variant of application '{app}' reaches accuracy {min}; the best has {best:.4}"
                ),
                suggestion: Some(serde_json::json!({ "accuracy": best })),
            });
        }
    }

    // The inputs: every object under the prefix (or the one object).
    let prefix = file_key(tenant, &input_path);
    let mut objects: Vec<(String, u64)> = match state.objects.head(&prefix).await? {
        Some(size) => vec![(prefix.clone(), size)],
        None => state
            .objects
            .list(&format!("{prefix}/"))
            .await?
            .into_iter()
            .map(|o| (o.key, o.size))
            .collect(),
    };
    objects.sort();
    if objects.is_empty() {
        return Err(Error::Invalid(format!(
            "input_path '{input_path}' holds no objects; upload inputs with PUT /v1/files/{input_path}/NAME.npz or as multipart field 'input'"
        )));
    }
    let unreadable: Vec<&str> = objects
        .iter()
        .filter(|(k, _)| Format::of(k).is_none())
        .map(|(k, _)| k.as_str())
        .collect();
    if let Some(first) = unreadable.first() {
        return Err(Error::Invalid(format!(
            "input object '{}' is neither .npz nor .jsonl/.ndjson",
            first.rsplit('/').next().unwrap_or(first)
        )));
    }
    if objects.len() > MAX_INPUT_OBJECTS {
        return Err(Error::Invalid(format!(
            "input_path '{input_path}' holds {} objects; a job reads at most {MAX_INPUT_OBJECTS}",
            objects.len()
        )));
    }
    let chunk_rows = state.config.job_chunk_rows as i64;
    let mut chunks = Vec::new();
    for (key, _) in &objects {
        let format = Format::of(key).unwrap_or(Format::Npz);
        let bytes = state.objects.get_bytes(key).await?;
        let short = key.strip_prefix(&file_key(tenant, "")).unwrap_or(key);
        let rows = parse_blocking(format, short, bytes, &schemas)
            .await
            .map_err(Error::Invalid)?
            .1
            .rows as i64;
        let mut start = 0;
        while start < rows {
            let n = chunk_rows.min(rows - start);
            chunks.push(NewChunk {
                input_key: key.clone(),
                format: format.as_str().into(),
                row_start: start,
                items: n,
            });
            start += n;
        }
    }
    let job = state
        .db
        .create_job(
            tenant,
            &NewJob {
                app: app.map(str::to_string),
                model: model.map(str::to_string),
                pipeline: s.pipeline.clone(),
                min_accuracy: s.min_accuracy,
                input_path,
                output_path,
                webhook_url: s.webhook_url,
            },
            &chunks,
        )
        .await?;
    tracing::info!(job = %job.id, items = job.items_total, chunks = chunks.len(), "offline job queued");
    Ok(job)
}

/// Parses an object with the first schema it fits; the error of the first schema otherwise.
/// [`parse_any`] on a blocking thread: a large input object takes milliseconds to parse,
/// which must not stall the tasks serving online queries.
pub(crate) async fn parse_blocking(
    format: Format,
    name: &str,
    bytes: bytes::Bytes,
    schemas: &[(String, Vec<InputSpec>)],
) -> Result<(String, input::Items), String> {
    let (name, schemas) = (name.to_string(), schemas.to_vec());
    tokio::task::spawn_blocking(move || parse_any(format, &name, &bytes, &schemas))
        .await
        .map_err(|e| format!("parsing the input object stopped: {e}"))?
}

pub(crate) fn parse_any(
    format: Format,
    name: &str,
    bytes: &[u8],
    schemas: &[(String, Vec<InputSpec>)],
) -> Result<(String, input::Items), String> {
    let mut first_error = None;
    for (key, specs) in schemas {
        match input::parse(format, name, bytes, specs) {
            Ok(items) => return Ok((key.clone(), items)),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| "the target has no input schema".into()))
}

/// Stores bytes in the tenant's file area, accounted to the tenant's stored bytes.
pub async fn put_file(
    state: &ControlPlane,
    tenant: &str,
    path: &str,
    bytes: bytes::Bytes,
) -> Result<u64, Error> {
    let key = file_key(tenant, path);
    let size = state.objects.put_bytes(&key, bytes).await?;
    state
        .db
        .record_object(&ObjectRecord {
            key,
            tenant_id: tenant.to_string(),
            size_bytes: size as i64,
            owner_kind: "file".into(),
            owner_id: path.to_string(),
        })
        .await?;
    Ok(size)
}

#[cfg(test)]
mod tests {
    use super::is_internal;

    #[test]
    fn internal_addresses_are_recognised() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:192.168.0.1",
        ] {
            assert!(
                is_internal(ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"))),
                "{ip}"
            );
        }
        for ip in ["8.8.8.8", "100.128.0.1", "172.32.0.1", "2001:db8::1"] {
            assert!(
                !is_internal(ip.parse().unwrap_or_else(|e| panic!("{ip}: {e}"))),
                "{ip}"
            );
        }
    }
}
