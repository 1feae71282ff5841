//! `POST /v1/apps/{app}/infer` (model-less) and `POST /v1/models/{model}/infer`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use infaas_protocol::{tensor_from_json, tensor_to_json, JsonTensor};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::serving::{serve, Goal, Outcome, Requirements};
use crate::state::AppState;

/// A tensor in JSON: `data` is flat (row-major) or nested to match `shape`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TensorJson {
    pub name: String,
    pub shape: Vec<i64>,
    /// `BOOL`, `UINT8`, `INT8`, `INT16`, `INT32`, `INT64`, `FP32`, `FP64` or `BYTES`.
    pub datatype: String,
    /// The elements, flat (row-major) or nested by the shape.
    #[schema(value_type = Vec<serde_json::Value>)]
    pub data: serde_json::Value,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferRequest {
    pub inputs: Vec<TensorJson>,
    /// Latency SLO in milliseconds (application queries).
    pub latency_ms: Option<f64>,
    /// Smallest acceptable accuracy, a fraction in [0, 1] (application queries).
    pub min_accuracy: Option<f64>,
    /// Largest acceptable cost of the query, in the configured price unit.
    pub max_cost: Option<f64>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct InferResponse {
    pub outputs: Vec<TensorJson>,
    pub app: String,
    pub model: String,
    /// The variant that served the query.
    pub variant: String,
    pub worker: String,
    pub hardware: String,
    /// Validation accuracy of the variant, in [0, 1].
    pub accuracy: f64,
    /// Why this variant was chosen.
    pub reason: String,
    /// Latency the selector predicted, in milliseconds.
    pub predicted_ms: f64,
    /// Latency measured on the server, in milliseconds.
    pub latency_ms: f64,
    /// Cost of the query in the configured price unit.
    pub cost: f64,
}

fn decode_inputs(inputs: Vec<TensorJson>) -> ApiResult<Vec<infaas_core::Tensor>> {
    inputs
        .into_iter()
        .map(|t| {
            tensor_from_json(&JsonTensor {
                name: t.name,
                datatype: t.datatype,
                shape: t.shape,
                parameters: Default::default(),
                data: Some(t.data),
            })
            .map_err(|e| ApiError::BadRequest(e.to_string()))
        })
        .collect()
}

/// Response headers that repeat the selection, for clients that only read headers.
pub fn outcome_headers(o: &Outcome) -> HeaderMap {
    let mut h = HeaderMap::new();
    let mut put = |k: &'static str, v: String| {
        if let Ok(v) = HeaderValue::from_str(&v) {
            h.insert(k, v);
        }
    };
    put("x-infaas-variant", o.variant.clone());
    put("x-infaas-worker", o.worker.clone());
    put("x-infaas-predicted-ms", format!("{:.3}", o.predicted_ms));
    put("x-infaas-latency-ms", format!("{:.3}", o.latency_ms));
    h
}

fn respond(o: Outcome) -> Response {
    let headers = outcome_headers(&o);
    let body = InferResponse {
        outputs: o
            .outputs
            .iter()
            .map(|t| {
                let j = tensor_to_json(t);
                TensorJson {
                    name: j.name,
                    shape: j.shape,
                    datatype: j.datatype,
                    data: j.data.unwrap_or(serde_json::Value::Null),
                }
            })
            .collect(),
        app: o.app,
        model: o.model,
        variant: o.variant,
        worker: o.worker,
        hardware: o.hardware,
        accuracy: o.accuracy,
        reason: o.reason,
        predicted_ms: o.predicted_ms,
        latency_ms: o.latency_ms,
        cost: o.cost,
    };
    (headers, Json(body)).into_response()
}

async fn infer(
    state: &AppState,
    p: &Principal,
    goal: Goal<'_>,
    req: InferRequest,
) -> ApiResult<Response> {
    let inputs = decode_inputs(req.inputs)?;
    let want = Requirements {
        latency_ms: req.latency_ms,
        min_accuracy: req.min_accuracy,
        max_cost: req.max_cost,
    };
    Ok(respond(
        serve(state, &p.tenant_id, goal, want, inputs).await?,
    ))
}

/// Model-less query: the platform picks a variant of the application's models that meets
/// the latency SLO, the minimum accuracy and the cost ceiling.
#[utoipa::path(post, path = "/v1/apps/{app}/infer", tag = "inference", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name")),
    request_body = InferRequest,
    responses((status = 200, body = InferResponse),
              (status = 400, description = "Inputs that fit no model (the message names the tensor)", body = ErrorBody),
              (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 422, description = "No variant meets the requirements; `suggestion` names the closest", body = ErrorBody),
              (status = 429, description = "Overloaded", body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn infer_app(
    State(state): State<AppState>,
    p: Principal,
    Path(app): Path<String>,
    Json(req): Json<InferRequest>,
) -> ApiResult<Response> {
    infer(&state, &p, Goal::App(&app), req).await
}

/// Query a registered model: the platform picks its best variant for the current load.
#[utoipa::path(post, path = "/v1/models/{model}/infer", tag = "inference", security(("bearer" = [])),
    params(("model" = String, Path, description = "Model name")),
    request_body = InferRequest,
    responses((status = 200, body = InferResponse),
              (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody), (status = 429, body = ErrorBody),
              (status = 503, body = ErrorBody)))]
pub async fn infer_model(
    State(state): State<AppState>,
    p: Principal,
    Path(model): Path<String>,
    Json(req): Json<InferRequest>,
) -> ApiResult<Response> {
    infer(&state, &p, Goal::Model(&model), req).await
}
