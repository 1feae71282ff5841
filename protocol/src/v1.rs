//! The documents of the infaas v1 API (`/v1/...`) that clients read and send: requests and
//! answers of queries, models and applications. The server serialises them, the CLI and any
//! Rust client deserialise them; their OpenAPI schemas come with them.

use infaas_core::{Model, Variant};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::WireData;

mod pipelines;
mod replicas;
mod whatif;
pub use pipelines::*;
pub use replicas::*;
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

/// A variant the registration did not keep: another variant of the model on the same
/// hardware, intra-op threads and max batch is at least as accurate and at least as fast at
/// every batch size (not more than 5% slower on mean and p50 at any). It is never served; a
/// file none of whose variants is kept is deleted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct PrunedVariantView {
    /// `{model}.{fp32|opt|int8|fp16}.{cpu|gpu}.t{threads}.b{max_batch}`.
    pub name: String,
    /// Which file: `source`, `optimized`, `int8`, `fp16`.
    pub file: String,
    /// `cpu` or `gpu`.
    pub hardware: String,
    pub threads: usize,
    pub max_batch: usize,
    /// Top-1 accuracy of its file on the validation set, in [0, 1].
    pub accuracy: Option<f64>,
    /// The kept variant that dominates it.
    pub dominated_by: String,
    /// Why, e.g. `accuracy 0.379 <= 1.000 of opt, not faster at any batch`.
    pub reason: String,
}

impl PrunedVariantView {
    /// One line per file, e.g. `int8: 14 variants, file removed: accuracy 0.379 <= 1.000 of
    /// opt, not faster at any batch`; a file pruned for several reasons gives each with its
    /// count: `...: REASON (10); REASON2 (4)`. `kept_files`: the files of the variants kept,
    /// to tell whether a file keeps any.
    pub fn summary(pruned: &[PrunedVariantView], kept_files: &[&str]) -> Vec<String> {
        let mut files: Vec<(&str, Vec<(&str, usize)>)> = Vec::new();
        for p in pruned {
            let i = match files.iter().position(|(f, _)| *f == p.file) {
                Some(i) => i,
                None => {
                    files.push((&p.file, Vec::new()));
                    files.len() - 1
                }
            };
            let reasons = &mut files[i].1;
            match reasons.iter_mut().find(|(r, _)| *r == p.reason) {
                Some(r) => r.1 += 1,
                None => reasons.push((&p.reason, 1)),
            }
        }
        files
            .into_iter()
            .map(|(file, mut reasons)| {
                reasons.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
                let n: usize = reasons.iter().map(|(_, n)| n).sum();
                let s = if n == 1 { "" } else { "s" };
                let removed = if kept_files.contains(&file) {
                    ""
                } else {
                    ", file removed"
                };
                let why = match reasons.as_slice() {
                    [(r, _)] => r.to_string(),
                    _ => reasons
                        .iter()
                        .map(|(r, n)| format!("{r} ({n})"))
                        .collect::<Vec<_>>()
                        .join("; "),
                };
                format!("{file}: {n} variant{s}{removed}: {why}")
            })
            .collect()
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
    /// The variants kept (pruned ones are in `pruned`).
    pub variants: Vec<VariantView>,
    /// The variants the registration did not keep, with the variant that dominates each and
    /// why (also summed up in the final `progress_detail`).
    #[serde(default)]
    pub pruned: Vec<PrunedVariantView>,
}

impl ModelView {
    /// The view of model `m` with its `variants` (and no pruned ones: [`ModelView::with_pruned`]).
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
            pruned: Vec::new(),
        }
    }

    /// The view with the variants the registration pruned.
    pub fn with_pruned(mut self, pruned: Vec<PrunedVariantView>) -> ModelView {
        self.pruned = pruned;
        self
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

/// A job over inputs already in the tenant's file area (`POST /v1/jobs` as JSON; files
/// uploaded with the job go as a multipart form).
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobRequest {
    /// A prefix (folder) of `.npz` / `.jsonl` objects, or one object, in the file area.
    #[schema(
        pattern = r"^/?(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253})(?:/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253}))*/?$",
        max_length = 512
    )]
    pub input_path: String,
    /// Where outputs go in the file area (default `job-outputs/<uuid>`).
    #[schema(
        pattern = r"^/?(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253})(?:/(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}|\.[A-Za-z0-9_-][A-Za-z0-9._-]{0,253}|\.\.[A-Za-z0-9._-]{1,253}))*/?$",
        max_length = 512
    )]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_path: Option<String>,
    /// Model-less: the application whose variants may run the job (give `app` or `model`).
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app: Option<String>,
    /// Smallest acceptable accuracy, a fraction in [0, 1] (application jobs only).
    #[schema(minimum = 0.0, maximum = 1.0)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_accuracy: Option<f64>,
    /// Or one registered model.
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Or a pipeline: every item goes through it (give one of `app`, `model`, `pipeline`).
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pipeline: Option<String>,
    /// Called with the job (POST, JSON) when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
}

/// The tenant's jobs, newest first.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobView>,
}

/// The tasks a model may be registered for (documentation of the registration's `task`):
/// the platform measures accuracy for these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModelTask {
    Classification,
}

impl ModelTask {
    pub const ALL: [ModelTask; 1] = [ModelTask::Classification];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelTask::Classification => "classification",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pruned(file: &str, threads: usize, reason: &str) -> PrunedVariantView {
        PrunedVariantView {
            name: format!("m.{file}.cpu.t{threads}.b1"),
            file: file.into(),
            hardware: "cpu".into(),
            threads,
            max_batch: 1,
            accuracy: Some(0.5),
            dominated_by: format!("m.opt.cpu.t{threads}.b1"),
            reason: reason.into(),
        }
    }

    #[test]
    fn pruned_variants_sum_up_per_file_and_reason() {
        let list = vec![
            pruned("int8", 1, "worse than opt"),
            pruned("int8", 2, "worse than fp32"),
            pruned("source", 1, "tie"),
            pruned("int8", 3, "worse than fp32"),
        ];
        assert_eq!(
            PrunedVariantView::summary(&list, &["optimized", "source"]),
            vec![
                "int8: 3 variants, file removed: worse than fp32 (2); worse than opt (1)"
                    .to_string(),
                "source: 1 variant: tie".to_string(),
            ]
        );
        assert!(PrunedVariantView::summary(&[], &[]).is_empty());
    }

    #[test]
    fn a_model_view_without_pruned_variants_still_reads() {
        // Answers of servers older than pruning have no `pruned` field.
        let json = serde_json::json!({
            "name": "m", "app": "a", "task": "classification", "status": "ready",
            "progress": 1.0, "progress_detail": "ready", "size_bytes": 1, "sha256": "00",
            "signature": null, "output": null, "label_names": null, "created_at_ms": 0,
            "updated_at_ms": 0, "variants": []
        });
        let m: ModelView = serde_json::from_value(json).expect("a model view");
        assert!(m.pruned.is_empty());
    }
}
