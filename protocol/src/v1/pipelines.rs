//! Pipelines (`/v1/pipelines`): the registered document ([`PipelineSpec`], from
//! `infaas_core::pipeline`), views, queries' answers and plans. The server serialises them,
//! the CLI and any Rust client deserialise them.

pub use infaas_core::pipeline::{
    Combiner, Condition, NodeSpec, Overload, PipelineInput, PipelineSlo, PipelineSpec,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A registered pipeline.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PipelineView {
    pub name: String,
    pub description: Option<String>,
    /// The registered document (docs/pipelines.md).
    pub spec: PipelineSpec,
    /// The applied plan, if any (see `POST /v1/pipelines/{name}/plan`).
    pub plan: Option<PlanReport>,
    /// Queries of the last minute on this controller.
    pub queries_last_minute: usize,
    /// Live figures (`GET /v1/pipelines/{name}` only): per node its planned and last variant,
    /// replicas, queued rows, p99 over the last minute, measured branch probability and cost
    /// per hour; the end-to-end p99 and SLO attainment per second (this controller).
    #[schema(value_type = Object, nullable)]
    pub status: Option<serde_json::Value>,
    /// The validation set plans measure end-to-end accuracy on, if one was uploaded.
    pub validation: Option<PipelineValidation>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// A pipeline's validation set.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PipelineValidation {
    /// The output its labels grade.
    pub output: String,
    pub rows: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PipelineList {
    pub pipelines: Vec<PipelineView>,
}

/// What one node did for the query.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct NodeRunView {
    pub node: String,
    /// `app`, `model`, or the combiner (`mean`, `vote`, `concat`, `first`).
    pub kind: String,
    /// Rows of the request the node ran on; 0 when a switch skipped it.
    pub rows: usize,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub worker: Option<String>,
    pub hardware: Option<String>,
    pub accuracy: Option<f64>,
    /// The node's latency budget (ms) when it started: what was left of the SLO, shared over
    /// the model nodes still ahead.
    pub budget_ms: Option<f64>,
    pub latency_ms: f64,
    /// Why this variant (or why the node was skipped).
    pub reason: String,
}

/// The answer to a pipeline query.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PipelineInferResponse {
    #[schema(value_type = Vec<Object>)]
    pub outputs: Vec<serde_json::Value>,
    pub pipeline: String,
    pub latency_ms: f64,
    /// The end-to-end SLO the query ran under (the pipeline's or the query's override).
    pub slo_ms: Option<f64>,
    /// Estimated accuracy of this answer: the product of the accuracies of the model nodes
    /// that ran, each weighted by the share of rows it ran on.
    pub accuracy: f64,
    pub nodes: Vec<NodeRunView>,
}

/// What to plan a pipeline on.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct PlanBody {
    /// A workload generator for the planning trace (the `infaas sim --generate` syntax), e.g.
    /// `poisson:rate=100,duration=600`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generate: Option<String>,
    /// A planning trace in the documented CSV format (`time_ms,app,slo_ms,min_accuracy`);
    /// every arrival counts as a pipeline query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace_csv: Option<String>,
    /// Store the plan (queries then run each node on the plan's model) and load its replicas.
    #[serde(default)]
    pub apply: bool,
}

/// InferLine's plan of a pipeline (SIMULATED estimates), as `POST /v1/pipelines/{name}/plan`
/// answers it and as an applied plan is stored.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PlanReport {
    pub nodes: Vec<PlannedNode>,
    /// The percentile the SLO holds for.
    pub percentile: f64,
    pub slo_ms: f64,
    /// Estimated end-to-end latency at `percentile` on the planning trace (SIMULATED).
    pub predicted_latency_ms: f64,
    pub predicted_p99_ms: f64,
    /// Estimated share of the trace's queries within the SLO.
    pub attainment: f64,
    /// Estimated end-to-end accuracy.
    pub accuracy: f64,
    /// How `accuracy` was obtained.
    pub accuracy_source: String,
    pub cost_per_hour: f64,
    /// Algorithm 1's feasible start and its cost, for comparison.
    pub initial_cost_per_hour: f64,
    pub service_time_ms: f64,
    /// Time the planner took, ms.
    pub planner_ms: f64,
    /// Configurations the planner judged on the estimator.
    pub estimates: usize,
    pub trace: PlanTrace,
    /// What the planner assumed (unmeasured branches, ...).
    pub notes: Vec<String>,
    /// Whether the plan was stored and its replicas loaded.
    pub applied: bool,
    pub planned_at_ms: i64,
    /// The tuner's configuration for this plan (the planned traffic envelope, each node's
    /// reach and throughput): kept with an applied plan so that a restarted controller tunes
    /// the pipeline again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub tuner: Option<serde_json::Value>,
}

/// One node of a plan.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PlannedNode {
    pub name: String,
    pub variant: String,
    pub model: String,
    /// `cpu` or `gpu`.
    pub hardware: String,
    pub max_batch: usize,
    pub replicas: usize,
    pub accuracy: f64,
    pub cost_per_hour: f64,
    pub throughput_per_s: f64,
    /// Share of the pipeline's queries reaching the node.
    pub reach: f64,
    pub branch_probability: f64,
    /// Estimated p99 of the node's own latency (queueing and processing), ms; null when the
    /// estimator has none for the node.
    #[serde(default)]
    pub predicted_p99_ms: Option<f64>,
}

/// The planning trace.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PlanTrace {
    /// `recorded`, `generated: SPEC` or `uploaded`.
    pub source: String,
    pub queries: usize,
    pub duration_s: f64,
    pub mean_rate_per_s: f64,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A plan stored before node estimates could be missing reads back.
    #[test]
    fn a_stored_plan_reads_back() {
        let text = r#"{"nodes":[{"name":"a","variant":"v","model":"m","hardware":"cpu",
            "max_batch":4,"replicas":1,"accuracy":0.9,"cost_per_hour":0.1,
            "throughput_per_s":100.0,"reach":1.0,"branch_probability":1.0,
            "predicted_p99_ms":null}],
            "percentile":99.0,"slo_ms":100.0,"predicted_latency_ms":20.0,"predicted_p99_ms":20.0,
            "attainment":1.0,"accuracy":0.9,"accuracy_source":"estimated","cost_per_hour":0.1,
            "initial_cost_per_hour":0.2,"service_time_ms":5.0,"planner_ms":3.0,"estimates":7,
            "trace":{"source":"uploaded","queries":100,"duration_s":10.0,"mean_rate_per_s":10.0},
            "notes":[],"applied":true,"planned_at_ms":1,"tuner":{"anything":1}}"#;
        let plan: PlanReport = serde_json::from_str(text).unwrap();
        assert_eq!(plan.nodes[0].predicted_p99_ms, None);
        assert!(plan.tuner.is_some());
        let again = serde_json::to_value(&plan).unwrap();
        assert_eq!(again["tuner"]["anything"], 1);
    }
}
