//! `POST /v1/apps/{app}/infer` (model-less) and `POST /v1/models/{model}/infer`.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderName, HeaderValue};
use axum::response::{IntoResponse, Response};
use infaas_protocol::v1::{InferRequest, InferResponse, TensorJson};
use infaas_protocol::{tensor_from_json, JsonTensor, JsonTensorOut};
use serde::Serialize;

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;
use infaas_control::serving::{serve, Goal, Outcome, Requirements};

pub(crate) fn decode_inputs(inputs: Vec<TensorJson>) -> ApiResult<Vec<infaas_core::Tensor>> {
    inputs
        .into_iter()
        .map(|t| {
            if t.shape.is_empty() || t.shape.iter().any(|&d| d < 1) {
                return Err(ApiError::BadRequest(format!(
                    "input '{}': shape {:?} needs at least one dimension, each at least 1 (the first is the rows)",
                    t.name, t.shape
                )));
            }
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
    // Room for these and the content type the caller adds; names are static (no copy each).
    let mut h = HeaderMap::with_capacity(6);
    let mut put = |k: &'static str, v: &str| {
        if let Ok(v) = HeaderValue::from_str(v) {
            h.insert(HeaderName::from_static(k), v);
        }
    };
    put("x-infaas-variant", &o.variant);
    put("x-infaas-worker", &o.worker);
    put("x-infaas-predicted-ms", &format!("{:.3}", o.predicted_ms));
    put("x-infaas-latency-ms", &format!("{:.3}", o.latency_ms));
    h
}

/// [`InferResponse`] borrowed from the outcome, for writing: outputs go from their typed
/// buffers to the body without a JSON value per element.
#[derive(Serialize)]
struct InferAnswer<'a> {
    outputs: Vec<JsonTensorOut<'a>>,
    app: &'a str,
    model: &'a str,
    variant: &'a str,
    worker: &'a str,
    hardware: &'a str,
    accuracy: f64,
    reason: &'a str,
    predicted_ms: f64,
    latency_ms: f64,
    cost: f64,
}

impl<'a> From<&'a Outcome> for InferAnswer<'a> {
    fn from(o: &'a Outcome) -> InferAnswer<'a> {
        InferAnswer {
            outputs: o.outputs.iter().map(JsonTensorOut::new).collect(),
            app: &o.app,
            model: &o.model,
            variant: &o.variant,
            worker: &o.worker,
            hardware: &o.hardware,
            accuracy: o.accuracy,
            reason: &o.reason,
            predicted_ms: o.predicted_ms,
            latency_ms: o.latency_ms,
            cost: o.cost,
        }
    }
}

fn respond(o: Outcome) -> ApiResult<Response> {
    let mut body =
        Vec::with_capacity(512 + 12 * o.outputs.iter().map(|t| t.data.len()).sum::<usize>());
    serde_json::to_writer(&mut body, &InferAnswer::from(&o)).map_err(ApiError::internal)?;
    let mut headers = outcome_headers(&o);
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok((headers, body).into_response())
}

async fn infer(
    state: &AppState,
    p: &Principal,
    goal: Goal<'_>,
    req: InferRequest,
) -> ApiResult<Response> {
    let want = requirements_of(&req);
    let inputs = decode_inputs(req.inputs)?;
    respond(serve(state, &p.tenant_id, goal, want, inputs).await?)
}

/// A `/v1` request's requirements.
pub(crate) fn requirements_of(req: &InferRequest) -> Requirements {
    Requirements {
        latency_ms: req.latency_ms,
        min_accuracy: req.min_accuracy,
        max_cost: req.max_cost,
    }
}

/// Model-less query: the platform picks a variant of the application's models that meets
/// the latency SLO, the minimum accuracy and the cost ceiling.
#[utoipa::path(post, path = "/v1/apps/{app}/infer", tag = "inference", security(("bearer" = [])),
    params(("app" = String, Path, description = "Application name")),
    request_body = InferRequest,
    responses((status = 200, body = InferResponse),
              (status = 400, description = "Inputs that fit no model (the message names the tensor)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "No such application, or it has no models", body = ErrorBody),
              (status = 409, description = "Every model of the application failed registration", body = ErrorBody),
              (status = 422, description = "No variant meets the requirements; `suggestion` names the closest", body = ErrorBody),
              (status = 429, description = "Overloaded, or the tenant's rate limit", body = ErrorBody),
              (status = 503, description = "No model of the application is ready yet; retry", body = ErrorBody)))]
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
              (status = 400, description = "Inputs that do not fit the model (the message names the tensor)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "No such model", body = ErrorBody),
              (status = 409, description = "The model's registration failed", body = ErrorBody),
              (status = 429, description = "Overloaded, or the tenant's rate limit", body = ErrorBody),
              (status = 503, description = "The model is not ready yet; retry", body = ErrorBody)))]
pub async fn infer_model(
    State(state): State<AppState>,
    p: Principal,
    Path(model): Path<String>,
    Json(req): Json<InferRequest>,
) -> ApiResult<Response> {
    infer(&state, &p, Goal::Model(&model), req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::{Tensor, TensorData};
    use infaas_protocol::{tensor_to_json, WireData};
    use serde_json::Value;

    fn outcome() -> Outcome {
        let tensor = |name: &str, shape: Vec<usize>, data| Tensor::new(name, shape, data).unwrap();
        Outcome {
            outputs: vec![
                tensor("label", vec![2], TensorData::Int64(vec![3, i64::MAX])),
                tensor(
                    "probabilities",
                    vec![2, 3],
                    TensorData::Fp32(vec![0.1, 0.7, 0.2, f32::NAN, 1e-7, 0.333_333_34]),
                ),
                tensor("tag", vec![1], TensorData::Bytes(vec!["\"cat\"\n".into()])),
            ],
            app: "shop".into(),
            model: "m".into(),
            variant: "m.int8.cpu.t1.b8".into(),
            worker: "w-1".into(),
            hardware: "cpu".into(),
            accuracy: 0.97,
            reason: "fastest \"active\" variant".into(),
            predicted_ms: 0.042,
            service_ms: 0.03,
            latency_ms: 0.051,
            cost: 1.5e-9,
        }
    }

    /// The answer as `InferResponse` builds it, every element a JSON value.
    fn as_values(o: Outcome) -> Value {
        serde_json::to_value(InferResponse {
            outputs: o
                .outputs
                .iter()
                .map(|t| {
                    let j = tensor_to_json(t);
                    TensorJson {
                        name: j.name,
                        shape: j.shape,
                        datatype: j.datatype,
                        data: j.data.unwrap_or(Value::Null.into()),
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
        })
        .unwrap()
    }

    #[tokio::test]
    async fn answers_are_written_as_the_documented_response() {
        let r = respond(outcome()).unwrap();
        let h = r.headers();
        assert_eq!(h[header::CONTENT_TYPE], "application/json");
        assert_eq!(h["x-infaas-variant"], "m.int8.cpu.t1.b8");
        assert_eq!(h["x-infaas-latency-ms"], "0.051");
        let body = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        let written: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(written, as_values(outcome()));
        // And clients read it as the documented type.
        let typed: InferResponse = serde_json::from_slice(&body).unwrap();
        // Numbers read back as numbers; the NaN written as null makes that array a value.
        assert!(matches!(typed.outputs[0].data, WireData::Numbers(_)));
        assert_eq!(typed.outputs[1].data.clone().into_value()[3], Value::Null);
        assert_eq!(typed.outputs[0].data.clone().into_value()[1], i64::MAX);
    }
}
