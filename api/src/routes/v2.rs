//! The Open Inference Protocol (v2, KServe / Triton REST) with the binary tensor extension.
//! A v2 model name is an application (model-less: `latency_ms`, `min_accuracy` and
//! `max_cost` go in the request's `parameters`) or a registered model.
//!
//! What the REST and the gRPC edge ([`crate::grpc`]) share lives here: which target a
//! name means ([`goal`]), readiness, a target's signature ([`signature`]), the
//! requirements read from request parameters ([`requirements`]) and what a response says
//! about how it was served ([`outcome_parameters`]).

use std::io::Read;

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use infaas_core::DataType;
use infaas_protocol::{
    decode_v2_request, encode_v2_response, encode_v2_response_with, model_metadata,
    parse_header_length, server_metadata, BINARY_TENSOR_DATA, INFERENCE_HEADER_CONTENT_LENGTH,
};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::routes::infer::outcome_headers;
use crate::state::AppState;
use infaas_control::cluster::schema;
use infaas_control::serving::{serve, Goal, Outcome, Requirements};

/// The server name both v2 edges report.
pub const SERVER_NAME: &str = "infaas";
/// The extension both v2 edges report besides their transport's own: a model name may be
/// an application, served model-less.
pub const MODEL_LESS: &str = "model_less";
/// The platform a v2 model reports.
pub const PLATFORM: &str = "onnxruntime_onnx";
/// The versions a v2 model reports (variants are chosen per query, not by version).
pub const VERSIONS: [&str; 1] = ["1"];

/// One tensor of a signature: name, datatype and shape (`-1` for a variable dimension).
pub type TensorSpec = (String, DataType, Vec<i64>);

/// The inputs and outputs of a model or of an application's models.
#[derive(Debug, Clone, Default)]
pub struct Signature {
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
}

/// `GET /v2/health/live`.
pub async fn live() -> StatusCode {
    StatusCode::OK
}

/// Whether the server is ready: the database and object store answer and the runtime
/// loaded.
pub async fn server_is_ready(state: &AppState) -> bool {
    let (db, objects) = tokio::join!(state.db.ping(), state.objects.check());
    db.is_ok() && objects.is_ok() && state.runtime.is_ok()
}

/// `GET /v2/health/ready`: the database and object store answer.
pub async fn ready(State(state): State<AppState>) -> StatusCode {
    if server_is_ready(&state).await {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

/// `GET /v2`: server metadata.
pub async fn server(_p: Principal) -> Response {
    axum::Json(server_metadata(
        SERVER_NAME,
        env!("CARGO_PKG_VERSION"),
        &[BINARY_TENSOR_DATA, MODEL_LESS],
    ))
    .into_response()
}

/// Whether `name` means a model or an application: a served model wins, then a served
/// application, then whatever the database knows.
pub async fn goal<'a>(state: &AppState, tenant: &str, name: &'a str) -> Goal<'a> {
    let catalog = state.cluster.catalog();
    if catalog.model(tenant, name).is_some() {
        return Goal::Model(name);
    }
    if catalog.app(tenant, name).is_some() {
        return Goal::App(name);
    }
    match state.db.get_model(tenant, name).await {
        Ok(_) => Goal::Model(name),
        Err(_) => Goal::App(name),
    }
}

fn dtype(s: &str) -> DataType {
    DataType::parse(s).unwrap_or(DataType::Fp32)
}

/// The signature of the model or application `name` of `tenant`: a served one's, else a
/// registered model's inputs (a model that is not ready yet still has a signature).
pub async fn signature(state: &AppState, tenant: &str, name: &str) -> ApiResult<Signature> {
    if let Some(p) = pipeline_named(state, tenant, name).await {
        let (inputs, outputs) = p.signature();
        let conv = |ts: Vec<infaas_control::pipelines::SignatureTensor>| -> Vec<TensorSpec> {
            ts.into_iter().map(|(n, d, s)| (n, dtype(&d), s)).collect()
        };
        return Ok(Signature {
            inputs: conv(inputs),
            outputs: conv(outputs),
        });
    }
    let catalog = state.cluster.catalog();
    let served = catalog
        .model(tenant, name)
        .or_else(|| catalog.app(tenant, name).map(|a| &a.example));
    let first = match served {
        Some(s) => s.clone(),
        None => {
            let m = state.db.get_model(tenant, name).await.map_err(|_| {
                ApiError::NotFound(format!("no model or application named '{name}'"))
            })?;
            let inputs = schema::inputs_of(m.signature.as_ref())
                .iter()
                .map(|i| {
                    (
                        i.name.clone(),
                        dtype(&i.datatype),
                        std::iter::once(-1)
                            .chain(i.features.iter().copied())
                            .collect(),
                    )
                })
                .collect();
            return Ok(Signature {
                inputs,
                outputs: Vec::new(),
            });
        }
    };
    let sig = first.entry.signature.clone().unwrap_or_default();
    let io = |key: &str| -> Vec<TensorSpec> {
        sig[key]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|t| {
                        Some((
                            t["name"].as_str()?.to_string(),
                            dtype(t["datatype"].as_str()?),
                            t["shape"]
                                .as_array()?
                                .iter()
                                .filter_map(|d| d.as_i64())
                                .collect(),
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    Ok(Signature {
        inputs: io("inputs"),
        outputs: io("outputs"),
    })
}

async fn metadata_for(state: &AppState, tenant: &str, name: &str) -> ApiResult<Response> {
    let sig = signature(state, tenant, name).await?;
    fn refs(ts: &[TensorSpec]) -> Vec<(&str, DataType, &[i64])> {
        ts.iter()
            .map(|(n, d, s)| (n.as_str(), *d, s.as_slice()))
            .collect()
    }
    let (i, o) = (refs(&sig.inputs), refs(&sig.outputs));
    Ok(axum::Json(model_metadata(name, &VERSIONS, PLATFORM, &i, &o)).into_response())
}

/// `GET /v2/models/{name}`: inputs and outputs of a model or of an application's models.
pub async fn model(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    metadata_for(&state, &p.tenant_id, &name).await
}

/// `GET /v2/models/{name}/versions/{version}`.
pub async fn model_version(
    State(state): State<AppState>,
    p: Principal,
    Path((name, _version)): Path<(String, String)>,
) -> ApiResult<Response> {
    metadata_for(&state, &p.tenant_id, &name).await
}

/// Whether `tenant` has a model or application `name` that serves.
pub fn model_is_ready(state: &AppState, tenant: &str, name: &str) -> bool {
    let catalog = state.cluster.catalog();
    catalog.model(tenant, name).is_some() || catalog.app(tenant, name).is_some()
}

/// The pipeline `name` of `tenant`, when the name means no served model or application (a
/// pipeline is a model on the Open Inference Protocol, as a Triton ensemble is).
pub async fn pipeline_named(
    state: &AppState,
    tenant: &str,
    name: &str,
) -> Option<std::sync::Arc<infaas_control::pipelines::Prepared>> {
    if model_is_ready(state, tenant, name) {
        return None;
    }
    infaas_control::pipelines::prepared(state, tenant, name)
        .await
        .ok()
}

/// Whether a model, application or pipeline (every node's target serving) is ready.
pub async fn target_is_ready(state: &AppState, tenant: &str, name: &str) -> bool {
    if model_is_ready(state, tenant, name) {
        return true;
    }
    let Some(p) = pipeline_named(state, tenant, name).await else {
        return false;
    };
    let catalog = state.cluster.catalog();
    p.targets().iter().all(|t| match t {
        (Some(app), _) => catalog.app(tenant, app).is_some(),
        (None, Some(model)) => catalog.model(tenant, model).is_some(),
        (None, None) => true,
    })
}

async fn is_ready(state: &AppState, tenant: &str, name: &str) -> StatusCode {
    if target_is_ready(state, tenant, name).await {
        StatusCode::OK
    } else {
        StatusCode::BAD_REQUEST
    }
}

/// `GET /v2/models/{name}/ready`.
pub async fn model_ready(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> StatusCode {
    is_ready(&state, &p.tenant_id, &name).await
}

/// `GET /v2/models/{name}/versions/{version}/ready`.
pub async fn model_version_ready(
    State(state): State<AppState>,
    p: Principal,
    Path((name, _v)): Path<(String, String)>,
) -> StatusCode {
    is_ready(&state, &p.tenant_id, &name).await
}

/// The request body, decompressed per its `Content-Encoding` (an identity body is passed on
/// as it came, not copied).
fn decompress(headers: &HeaderMap, body: Bytes, limit: usize) -> ApiResult<Bytes> {
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_ascii_lowercase());
    let mut out = Vec::new();
    let read = match encoding.as_deref() {
        None | Some("identity") => return Ok(body),
        Some("gzip") => flate2::read::GzDecoder::new(&body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        Some("deflate") => flate2::read::ZlibDecoder::new(&body[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out),
        Some(other) => {
            return Err(ApiError::Status {
                status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                message: format!(
                    "Content-Encoding '{other}' is not supported; use gzip or deflate"
                ),
            })
        }
    };
    read.map_err(|e| ApiError::BadRequest(format!("cannot decompress the request body: {e}")))?;
    if out.len() > limit {
        return Err(ApiError::PayloadTooLarge(format!(
            "the decompressed request body is larger than {limit} bytes"
        )));
    }
    Ok(Bytes::from(out))
}

/// The model-less requirements of a request, each read by `number` from the request's
/// parameter of that name (`None` when absent).
pub fn requirements(
    mut number: impl FnMut(&str) -> ApiResult<Option<f64>>,
) -> ApiResult<Requirements> {
    Ok(Requirements {
        latency_ms: number("latency_ms")?,
        min_accuracy: number("min_accuracy")?,
        max_cost: number("max_cost")?,
    })
}

fn number(
    params: &serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> ApiResult<Option<f64>> {
    match params.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .map(Some)
            .ok_or_else(|| ApiError::BadRequest(format!("parameter '{key}' must be a number"))),
    }
}

/// How a query was served, as a v2 response's `parameters`: `app`, `model`, `variant`,
/// `worker`, `hardware`, `reason` (strings), `accuracy`, `predicted_ms`, `latency_ms`,
/// `cost` (numbers).
pub fn outcome_parameters(o: &Outcome) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(OutcomeParameters::from(o)) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// [`outcome_parameters`] borrowed from the outcome, for writing a response without building
/// a map. Fields in key order, as a map writes them.
#[derive(serde::Serialize)]
struct OutcomeParameters<'a> {
    accuracy: f64,
    app: &'a str,
    cost: f64,
    hardware: &'a str,
    latency_ms: f64,
    model: &'a str,
    predicted_ms: f64,
    reason: &'a str,
    variant: &'a str,
    worker: &'a str,
}

impl<'a> From<&'a Outcome> for OutcomeParameters<'a> {
    fn from(o: &'a Outcome) -> Self {
        OutcomeParameters {
            accuracy: o.accuracy,
            app: &o.app,
            cost: o.cost,
            hardware: &o.hardware,
            latency_ms: o.latency_ms,
            model: &o.model,
            predicted_ms: o.predicted_ms,
            reason: &o.reason,
            variant: &o.variant,
            worker: &o.worker,
        }
    }
}

async fn infer_named(
    state: AppState,
    p: Principal,
    name: String,
    version: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let body = decompress(&headers, body, state.config.max_body_bytes)?;
    let header_length = headers
        .get(INFERENCE_HEADER_CONTENT_LENGTH)
        .map(|v| parse_header_length(v.as_bytes()))
        .transpose()
        .map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let mut req =
        decode_v2_request(&body, header_length).map_err(|e| ApiError::BadRequest(e.to_string()))?;
    let want = requirements(|key| number(&req.parameters, key))?;
    if let Some(pipeline) = pipeline_named(&state, &p.tenant_id, &name).await {
        let out = infaas_control::pipelines::run::infer(
            &state,
            &p.tenant_id,
            &pipeline,
            want,
            std::mem::take(&mut req.inputs),
        )
        .await?;
        let params = pipeline_parameters(&name, &out)?;
        let encoded = encode_v2_response(
            &name,
            version.as_deref(),
            req.id.as_deref(),
            &out.outputs,
            &req,
            params,
        )
        .map_err(encode_error)?;
        return Ok(encoded_response(encoded, HeaderMap::new()));
    }
    let outcome = serve(
        &state,
        &p.tenant_id,
        goal(&state, &p.tenant_id, &name).await,
        want,
        std::mem::take(&mut req.inputs),
    )
    .await?;
    let encoded = encode_v2_response_with(
        &name,
        version.as_deref(),
        req.id.as_deref(),
        &outcome.outputs,
        &req,
        Some(&OutcomeParameters::from(&outcome)),
    )
    .map_err(encode_error)?;
    Ok(encoded_response(encoded, outcome_headers(&outcome)))
}

/// A response that cannot be encoded: the request's fault (e.g. an unknown output asked
/// for) is a 400, anything else a 500.
fn encode_error(e: infaas_protocol::ProtocolError) -> ApiError {
    if e.is_client_error() {
        ApiError::BadRequest(e.to_string())
    } else {
        ApiError::internal(e)
    }
}

fn encoded_response(encoded: infaas_protocol::EncodedResponse, mut headers: HeaderMap) -> Response {
    if let Ok(v) = HeaderValue::from_str(encoded.content_type()) {
        headers.insert(header::CONTENT_TYPE, v);
    }
    if let Some(n) = encoded.header_length {
        if let Ok(v) = HeaderValue::from_str(&n.to_string()) {
            headers.insert(INFERENCE_HEADER_CONTENT_LENGTH, v);
        }
    }
    (headers, encoded.body).into_response()
}

/// How a pipeline query was served, as a v2 response's `parameters`: `pipeline`, `variant`
/// (`node=variant, ...` for the nodes that ran), `latency_ms`, `accuracy` (numbers) and
/// `nodes` (a JSON string: what each node did).
pub fn pipeline_parameters(
    name: &str,
    out: &infaas_control::pipelines::run::PipelineOutcome,
) -> ApiResult<serde_json::Map<String, serde_json::Value>> {
    let mut params = serde_json::Map::new();
    params.insert("pipeline".into(), name.into());
    params.insert("latency_ms".into(), out.latency_ms.into());
    params.insert("accuracy".into(), out.accuracy.into());
    // The variants that served, node by node (a client reading `variant` as for a model).
    let variants: Vec<String> = out
        .nodes
        .iter()
        .filter_map(|n| Some(format!("{}={}", n.node, n.variant.as_deref()?)))
        .collect();
    params.insert("variant".into(), variants.join(", ").into());
    let nodes = serde_json::to_string(&out.nodes).map_err(ApiError::internal)?;
    params.insert("nodes".into(), nodes.into());
    Ok(params)
}

/// `POST /v2/models/{name}/infer`.
pub async fn infer(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    infer_named(state, p, name, None, headers, body).await
}

/// `POST /v2/models/{name}/versions/{version}/infer`.
pub async fn infer_version(
    State(state): State<AppState>,
    p: Principal,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    infer_named(state, p, name, Some(version), headers, body).await
}
