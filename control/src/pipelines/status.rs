//! A pipeline's live picture for the API and the dashboard: per node what it runs (planned
//! and last served variant), its replicas and queued rows on the cluster, its p99 over the
//! last minute, how often its switch lets queries through and what its instances cost; and
//! the pipeline's end-to-end p99 and SLO attainment per second.

use infaas_core::pipeline::NodeKind;
use serde::{Deserialize, Serialize};

use super::Prepared;
use crate::platform::ControlPlane;

/// One node's live figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeStatus {
    pub name: String,
    /// `app`, `model` or the combiner's name.
    pub kind: String,
    /// The application, model or combiner it runs.
    pub target: String,
    /// Nodes it reads from.
    pub parents: Vec<String>,
    /// The variant the applied plan chose, if any.
    pub planned_variant: Option<String>,
    /// The variant that served its last query.
    pub last_variant: Option<String>,
    /// Loaded instances of the models the node may run.
    pub replicas: usize,
    /// Rows queued on those instances.
    pub queued_rows: usize,
    pub runs_last_minute: usize,
    pub p99_ms: Option<f64>,
    /// Measured share of queries reaching it that it ran for (switch nodes).
    pub branch_probability: Option<f64>,
    /// What its instances cost per hour, in dollars.
    pub cost_per_hour: f64,
    /// Queries dropped early before this node (since the controller started).
    pub dropped: u64,
}

/// A pipeline's live figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PipelineStatus {
    pub nodes: Vec<NodeStatus>,
    pub queries_last_minute: usize,
    pub p99_ms: Option<f64>,
    pub slo_ms: Option<f64>,
    /// Per second: (ms since the Unix epoch, queries answered, within the SLO), oldest first.
    pub attainment: Vec<(i64, u64, u64)>,
    /// Per second: (ms since the Unix epoch, queries answered, their mean accuracy, queries
    /// dropped early), oldest first.
    pub quality: Vec<(i64, u64, Option<f64>, u64)>,
    pub cost_per_hour: f64,
    /// The accuracy-scaling allocation queries are routed by (`overload.accuracy_scaling`).
    pub overload: Option<super::overload::OverloadStatus>,
    /// The forecast of the pipeline's arrival rate against the observed one, and its error.
    pub forecast: Option<crate::forecasts::ForecastView>,
}

/// The live picture of pipeline `p` of `tenant`.
pub fn status(state: &ControlPlane, tenant: &str, p: &Prepared) -> PipelineStatus {
    let spec = &p.pipeline.spec;
    let recent = state.pipelines.recent(tenant, &spec.name);
    let snapshot = state.cluster.snapshot();
    let prices = state.cluster.prices();
    let parents = &p.parents;
    let planned = |node: &str| -> Option<String> {
        p.pipeline.plan.as_ref()?["nodes"]
            .as_array()?
            .iter()
            .find(|n| n["name"].as_str() == Some(node))?["variant"]
            .as_str()
            .map(str::to_string)
    };
    let mut nodes = Vec::with_capacity(spec.nodes.len());
    for &k in &p.order {
        let n = &spec.nodes[k];
        let (kind, target) = match n.kind() {
            NodeKind::App(a) => ("app".to_string(), a.to_string()),
            NodeKind::Model(m) => ("model".to_string(), m.to_string()),
            NodeKind::Combine(c) => (c.as_str().to_string(), n.from.join(", ")),
        };
        let (mut replicas, mut queued, mut rate) = (0, 0, 0.0);
        for model in &p.shapes[k].models {
            for &v in snapshot.model_variants(tenant, model) {
                for &i in snapshot.variant_instances(v) {
                    replicas += 1;
                    queued += snapshot.queued(i);
                    if let Some(ve) = snapshot.variants().get(v) {
                        rate += prices.rate_per_s(ve);
                    }
                }
            }
        }
        let figures = recent.nodes.iter().find(|f| f.0 == n.name);
        nodes.push(NodeStatus {
            name: n.name.clone(),
            kind,
            target,
            parents: parents[k]
                .iter()
                .map(|&q| spec.nodes[q].name.clone())
                .collect(),
            planned_variant: planned(&n.name),
            last_variant: figures.and_then(|f| f.3.clone()),
            replicas,
            queued_rows: queued,
            runs_last_minute: figures.map_or(0, |f| f.1),
            p99_ms: figures.and_then(|f| f.2),
            branch_probability: n.when.as_ref().and_then(|_| {
                state
                    .pipelines
                    .branch_probability(tenant, &spec.name, &n.name)
                    .map(|(p, _)| p)
            }),
            cost_per_hour: rate * 3600.0,
            dropped: recent
                .drops
                .iter()
                .find(|(node, _)| *node == n.name)
                .map_or(0, |d| d.1),
        });
    }
    let cost_per_hour = nodes.iter().map(|n| n.cost_per_hour).sum();
    PipelineStatus {
        nodes,
        queries_last_minute: recent.queries_last_minute,
        p99_ms: recent.p99_ms,
        slo_ms: spec.slo.latency_ms,
        attainment: recent.seconds,
        quality: recent.quality,
        cost_per_hour,
        overload: state
            .pipelines
            .installed(tenant, &spec.name)
            .map(|i| i.status(p)),
        forecast: state
            .forecasts
            .view(tenant, &super::overload::forecast_key(&spec.name)),
    }
}
