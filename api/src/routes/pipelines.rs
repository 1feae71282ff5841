//! Pipelines: register (JSON or YAML), list, show, delete, query, plan.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use infaas_control::pipelines::{self, run, Pipeline};
use infaas_protocol::v1::{
    InferRequest, PipelineInferResponse, PipelineList, PipelineSpec, PipelineValidation,
    PipelineView, PlanBody, PlanReport,
};
use infaas_protocol::JsonTensorOut;
use serde::{Deserialize, Serialize};

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult, ErrorBody, Json};
use crate::state::AppState;

fn view(state: &AppState, tenant: &str, p: Pipeline) -> ApiResult<PipelineView> {
    // A stored plan is a PlanReport as this server wrote it; one that no longer reads is
    // left out of the view (and logged) rather than failing it.
    let plan = p
        .plan
        .and_then(|v| match serde_json::from_value::<PlanReport>(v) {
            Ok(plan) => Some(plan),
            Err(e) => {
                tracing::warn!(pipeline = %p.spec.name, error = %e, "cannot read the stored plan");
                None
            }
        });
    Ok(PipelineView {
        queries_last_minute: state
            .pipelines
            .arrivals(tenant, &p.spec.name, 60_000.0)
            .len(),
        name: p.spec.name.clone(),
        description: p.spec.description.clone(),
        spec: p.spec,
        status: None,
        validation: p.validation.map(|v| PipelineValidation {
            output: v.output,
            rows: v.rows,
        }),
        plan,
        created_at_ms: p.created_at_ms,
        updated_at_ms: p.updated_at_ms,
    })
}

/// Registers a pipeline (a JSON or YAML document). Every node, tensor and condition is checked
/// against the registry; an error names the node and the tensor.
#[utoipa::path(post, path = "/v1/pipelines", operation_id = "create_pipeline", tag = "pipelines", security(("bearer" = [])),
    request_body(content = PipelineSpec, description = "The pipeline document, JSON (this schema) or the same in YAML, at most 256 KiB (docs/pipelines.md)",
        content_type = "application/json"),
    responses((status = 201, body = PipelineView),
              (status = 400, description = "Invalid document: outside the schema (a missing `name`, an unknown `combine`, ...: the message names the field), or what the schema cannot say: a cycle, an unknown source, tensors that do not connect, a bad condition or SLO (the message names the node and the tensor)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "A node names an application or model that does not exist", body = ErrorBody),
              (status = 409, description = "The name is taken (by a pipeline, application or model), or a node's model failed registration", body = ErrorBody),
              (status = 413, description = "Document over 256 KiB", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    p: Principal,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<PipelineView>)> {
    let spec = pipelines::parse_document(&body)?;
    let created = pipelines::create(&state, &p.tenant_id, spec).await?;
    Ok((
        StatusCode::CREATED,
        Json(view(&state, &p.tenant_id, created)?),
    ))
}

/// The tenant's pipelines.
#[utoipa::path(get, path = "/v1/pipelines", operation_id = "list_pipelines", tag = "pipelines", security(("bearer" = [])),
    responses((status = 200, body = PipelineList), (status = 401, body = ErrorBody)))]
pub async fn list(State(state): State<AppState>, p: Principal) -> ApiResult<Json<PipelineList>> {
    let all = pipelines::list(&state, &p.tenant_id).await?;
    let pipelines = all
        .into_iter()
        .map(|x| view(&state, &p.tenant_id, x))
        .collect::<ApiResult<_>>()?;
    Ok(Json(PipelineList { pipelines }))
}

/// One pipeline.
#[utoipa::path(get, path = "/v1/pipelines/{name}", operation_id = "show_pipeline", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name")),
    responses((status = 200, body = PipelineView), (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody)))]
pub async fn show(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<Json<PipelineView>> {
    let got = pipelines::get(&state, &p.tenant_id, &name).await?;
    let mut v = view(&state, &p.tenant_id, got)?;
    // The live figures need the pipeline to still fit the registry; without them the
    // document and plan are still shown.
    if let Ok(prepared) = pipelines::prepared(&state, &p.tenant_id, &name).await {
        let status = pipelines::status::status(&state, &p.tenant_id, &prepared);
        v.status = Some(serde_json::to_value(status).map_err(ApiError::internal)?);
    }
    Ok(Json(v))
}

/// Deletes a pipeline (its applications and models stay).
#[utoipa::path(delete, path = "/v1/pipelines/{name}", operation_id = "delete_pipeline", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name")),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    pipelines::delete(&state, &p.tenant_id, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Which output a validation set grades.
#[derive(Deserialize, utoipa::IntoParams)]
pub struct ValidationParams {
    /// The pipeline output the labels grade; needed when the pipeline has several.
    pub output: Option<String>,
}

/// Uploads (or replaces) the pipeline's validation set: an NPZ file like a model's, with the
/// pipeline's inputs (`x`, or `x.<input>` for several) and integer labels `y` graded against
/// one output (its argmax per row). Plans then measure the end-to-end accuracy of the
/// combinations of models they consider on it, instead of estimating it.
#[utoipa::path(put, path = "/v1/pipelines/{name}/validation", operation_id = "put_pipeline_validation", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name"), ValidationParams),
    request_body(content = Vec<u8>, description = "The NPZ file, at most 64 MiB", content_type = "application/octet-stream"),
    responses((status = 200, body = PipelineValidation),
              (status = 400, description = "Not an NPZ file, or one that does not fit the pipeline (the message names the array and the problem), a label out of the output's range, or an unknown or missing `output`", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 409, description = "The pipeline no longer fits the registry", body = ErrorBody),
              (status = 413, description = "Over 64 MiB", body = ErrorBody)))]
pub async fn put_validation(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
    axum::extract::Query(q): axum::extract::Query<ValidationParams>,
    body: axum::body::Body,
) -> ApiResult<Json<PipelineValidation>> {
    // Read here (not by `Bytes`, whose limit is the JSON bodies') up to the set's own limit.
    let max = pipelines::accuracy::MAX_VALIDATION_BYTES;
    let body = axum::body::to_bytes(body, max).await.map_err(|e| {
        ApiError::PayloadTooLarge(format!(
            "a pipeline's validation set is at most {max} bytes; the body could not be read within it ({e})"
        ))
    })?;
    let v =
        pipelines::accuracy::upload(&state, &p.tenant_id, &name, body, q.output.as_deref()).await?;
    Ok(Json(PipelineValidation {
        output: v.output,
        rows: v.rows,
    }))
}

/// Removes the pipeline's validation set (plans estimate end-to-end accuracy again).
#[utoipa::path(delete, path = "/v1/pipelines/{name}/validation", operation_id = "delete_pipeline_validation", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name")),
    responses((status = 204), (status = 401, body = ErrorBody),
              (status = 404, description = "No such pipeline, or it has no validation set", body = ErrorBody)))]
pub async fn delete_validation(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    pipelines::accuracy::remove(&state, &p.tenant_id, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Serialize)]
struct Answer<'a> {
    outputs: Vec<JsonTensorOut<'a>>,
    pipeline: &'a str,
    latency_ms: f64,
    slo_ms: Option<f64>,
    accuracy: f64,
    nodes: &'a [run::NodeRun],
}

/// Runs a query through the pipeline: independent branches in parallel, the rows of the
/// request batched per node, `latency_ms` and `min_accuracy` overriding the pipeline's SLO.
#[utoipa::path(post, path = "/v1/pipelines/{name}/infer", operation_id = "infer_pipeline", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name")),
    request_body = InferRequest,
    responses((status = 200, body = PipelineInferResponse),
              (status = 400, description = "Inputs that do not fit the pipeline (the message names the tensor)", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, description = "No such pipeline", body = ErrorBody),
              (status = 409, description = "The pipeline no longer fits the registry (a model was deleted or failed)", body = ErrorBody),
              (status = 422, description = "No variant of a node meets its share of the requirements (the message names the node)", body = ErrorBody),
              (status = 429, description = "A node is overloaded, or the tenant's rate limit", body = ErrorBody),
              (status = 503, description = "A node's model is not ready yet (retry), or the query was dropped early under overload (`error_type: dropped`: it could no longer meet its deadline on any variant; the message names the node and the missing time; see the pipeline's `overload` settings)", body = ErrorBody)))]
pub async fn infer(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
    Json(req): Json<InferRequest>,
) -> ApiResult<axum::response::Response> {
    let want = crate::routes::infer::requirements_of(&req);
    let inputs = crate::routes::infer::decode_inputs(req.inputs)?;
    let prepared = pipelines::prepared(&state, &p.tenant_id, &name).await?;
    let out = run::infer(&state, &p.tenant_id, &prepared, want, inputs).await?;
    let answer = Answer {
        outputs: out.outputs.iter().map(JsonTensorOut::new).collect(),
        pipeline: &name,
        latency_ms: out.latency_ms,
        slo_ms: out.slo_ms,
        accuracy: out.accuracy,
        nodes: &out.nodes,
    };
    let body = serde_json::to_vec(&answer).map_err(ApiError::internal)?;
    Ok((
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response())
}

/// Plans the pipeline with InferLine's planner: per node the variant, max batch and replicas
/// that meet the end-to-end SLO percentile on the planning trace at least cost, judged by
/// the simulator (SIMULATED estimator). Without `generate` or `trace_csv`, the trace is the
/// pipeline's recorded arrivals of the last hour.
#[utoipa::path(post, path = "/v1/pipelines/{name}/plan", operation_id = "plan_pipeline", tag = "pipelines", security(("bearer" = [])),
    params(("name" = String, Path, description = "Pipeline name")),
    request_body = PlanBody,
    responses((status = 200, description = "The plan: per node variant, max batch, replicas, cost; predicted latency at the SLO's percentile, p99, attainment, accuracy, cost, planner time", body = PlanReport),
              (status = 400, description = "A bad generator or trace", body = ErrorBody),
              (status = 401, body = ErrorBody),
              (status = 404, body = ErrorBody),
              (status = 413, description = "A planning trace over 2,000,000 queries", body = ErrorBody),
              (status = 422, description = "No SLO, too few queries to plan on, or no configuration meets the requirements (the message gives the closest: service time, best accuracy, cheapest cost)", body = ErrorBody),
              (status = 503, description = "A node's models have no profiled variants yet", body = ErrorBody)))]
pub async fn plan(
    State(state): State<AppState>,
    p: Principal,
    Path(name): Path<String>,
    Json(body): Json<PlanBody>,
) -> ApiResult<Json<PlanReport>> {
    let req = pipelines::plan::PlanRequest {
        generate: body.generate,
        trace_csv: body.trace_csv,
        apply: body.apply,
    };
    Ok(Json(
        pipelines::plan::plan(&state, &p.tenant_id, &name, req).await?,
    ))
}
