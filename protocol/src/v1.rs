//! The documents of the infaas v1 API (`/v1/...`) that clients read and send: requests and
//! answers of queries, models and applications. The server serialises them, the CLI and any
//! Rust client deserialise them; their OpenAPI schemas come with them.

use infaas_core::{Model, Variant};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::WireData;

mod whatif;
pub use whatif::*;

/// A tensor in JSON: `data` is flat (row-major) or nested to match `shape`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct TensorJson {
    pub name: String,
    /// Dimensions, the batch (rows) first; every dimension at least 1.
    #[schema(schema_with = shape_schema)]
    pub shape: Vec<i64>,
    /// `BOOL`, `UINT8`, `INT8`, `INT16`, `INT32`, `INT64`, `FP32`, `FP64` or `BYTES`.
    #[schema(value_type = Datatype)]
    pub datatype: String,
    /// The elements, flat (row-major) or nested by the shape.
    #[schema(value_type = Vec<serde_json::Value>)]
    pub data: WireData,
}

#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferRequest {
    /// The model's inputs, each with the same number of rows and a distinct name.
    #[schema(min_items = 1)]
    pub inputs: Vec<TensorJson>,
    /// Latency SLO in milliseconds (application queries).
    #[schema(exclusive_minimum = 0.0)]
    pub latency_ms: Option<f64>,
    /// Smallest acceptable accuracy, a fraction in [0, 1] (application queries).
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub min_accuracy: Option<f64>,
    /// Largest acceptable cost of the query, in the configured price unit.
    #[schema(minimum = 0.0)]
    pub max_cost: Option<f64>,
}

/// The datatypes of tensors in JSON (documentation of `datatype`).
#[derive(ToSchema)]
#[allow(dead_code, clippy::upper_case_acronyms)]
pub enum Datatype {
    BOOL,
    UINT8,
    INT8,
    INT16,
    INT32,
    INT64,
    FP32,
    FP64,
    BYTES,
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

/// `shape`: at least one dimension, each at least 1.
pub(crate) fn shape_schema() -> utoipa::openapi::schema::Array {
    utoipa::openapi::schema::ArrayBuilder::new()
        .items(
            utoipa::openapi::ObjectBuilder::new()
                .schema_type(utoipa::openapi::Type::Integer)
                .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(
                    utoipa::openapi::KnownFormat::Int64,
                )))
                .minimum(Some(1)),
        )
        .min_items(Some(1))
        .build()
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct LatencyView {
    pub batch: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Rows per second at this batch size.
    pub throughput_per_s: f64,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct VariantView {
    /// `{model}.{fp32|opt|int8|fp16}.{cpu|gpu}.t{threads}.b{max_batch}`.
    pub name: String,
    /// `fp32`, `int8` or `fp16`.
    pub precision: String,
    /// Which file: `source`, `optimized` (ONNX Runtime graph optimisations), `int8`, `fp16`.
    pub file: String,
    /// `cpu` or `gpu`.
    pub hardware: String,
    /// Intra-op threads.
    pub threads: usize,
    pub max_batch: usize,
    /// `pending`, `profiled` or `failed`.
    pub status: String,
    /// Top-1 accuracy on the validation set, in [0, 1].
    pub accuracy: Option<f64>,
    pub load_ms: Option<f64>,
    pub memory_bytes: Option<i64>,
    pub latency: Vec<LatencyView>,
}

impl From<Variant> for VariantView {
    fn from(v: Variant) -> Self {
        VariantView {
            precision: v.file_kind.precision().into(),
            file: v.file_kind.as_str().into(),
            hardware: v.hardware.as_str().into(),
            name: v.name,
            threads: v.threads,
            max_batch: v.max_batch,
            status: v.status,
            accuracy: v.accuracy,
            load_ms: v.load_ms,
            memory_bytes: v.memory_bytes,
            latency: v
                .latency
                .into_iter()
                .map(|l| LatencyView {
                    batch: l.batch,
                    p50_ms: l.p50_ms,
                    p99_ms: l.p99_ms,
                    mean_ms: l.mean_ms,
                    throughput_per_s: l.throughput_per_s,
                })
                .collect(),
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ModelView {
    pub name: String,
    pub app: String,
    pub task: String,
    /// `pending`, `generating`, `profiling`, `ready` or `failed`.
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Fraction of the background work done, in [0, 1].
    pub progress: f64,
    /// The current step of the background work.
    pub progress_detail: Option<String>,
    pub size_bytes: i64,
    pub sha256: String,
    /// Inputs and outputs: `{"inputs": [{"name", "datatype", "shape"}], "outputs": [...]}`.
    #[schema(value_type = Object)]
    pub signature: Option<serde_json::Value>,
    /// Declared output holding the prediction, if any.
    pub output: Option<String>,
    pub label_names: Option<Vec<String>>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
    pub variants: Vec<VariantView>,
}

impl ModelView {
    /// The view of model `m` with its `variants`.
    pub fn new(m: Model, variants: Vec<Variant>) -> ModelView {
        ModelView {
            name: m.name,
            app: m.app,
            task: m.task,
            status: m.status.as_str().into(),
            error: m.error,
            progress: m.progress,
            progress_detail: m.progress_detail,
            size_bytes: m.size_bytes,
            sha256: m.sha256,
            signature: m.signature,
            output: m.declared.output,
            label_names: m.declared.label_names,
            created_at_ms: m.created_at_ms,
            updated_at_ms: m.updated_at_ms,
            variants: variants.into_iter().map(Into::into).collect(),
        }
    }
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct ModelList {
    pub models: Vec<ModelView>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AppSummary {
    pub name: String,
    pub created_at_ms: i64,
    pub models: Vec<String>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AppList {
    pub apps: Vec<AppSummary>,
}

#[derive(Serialize, Deserialize, ToSchema)]
pub struct AppDetail {
    pub name: String,
    pub models: Vec<ModelView>,
}

/// A job as the API shows it.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobView {
    pub id: String,
    /// `queued`, `running`, `paused`, `succeeded`, `failed` or `cancelled`.
    pub state: String,
    pub app: Option<String>,
    pub model: Option<String>,
    /// The pipeline the job runs its items through.
    #[serde(default)]
    pub pipeline: Option<String>,
    pub min_accuracy: Option<f64>,
    /// The variant the job runs on (chosen for throughput per cost).
    pub variant: Option<String>,
    pub items_done: i64,
    pub items_total: i64,
    /// `items_done / items_total`.
    pub progress: f64,
    /// Items per second since the job started.
    pub items_per_s: Option<f64>,
    /// Seconds left at that rate.
    pub eta_s: Option<f64>,
    /// Why the job is paused (online load).
    pub paused_reason: Option<String>,
    pub error: Option<String>,
    /// The input prefix in the tenant's file area.
    pub input_path: String,
    /// Where the outputs go in the tenant's file area (`part-NNNNNN.jsonl`, one per chunk).
    pub output_path: String,
    pub webhook_url: Option<String>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
}
