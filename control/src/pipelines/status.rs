//! A pipeline's live picture for the API and the dashboard: per node what it runs (planned
//! and last served variant), its replicas and queued rows on the cluster, its p99 over the
//! last minute, how often its switch lets queries through and what its instances cost; and
//! the pipeline's end-to-end p99, SLO attainment, accuracy served, drops and cost per second.
//!
//! The cost per second is sampled on the running controller ([`record_costs`], once a second
//! from the pipelines' overload loop), not when the status is read, so its history has no gaps
//! between reads.

use std::collections::BTreeSet;

use infaas_core::pipeline::NodeKind;
use infaas_scheduler::{Prices, Snapshot};
use serde::{Deserialize, Serialize};

use super::activity::forecast_key;
use super::installed::OverloadStatus;
use super::prepared::Prepared;
use super::registered::prepared;
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
    /// Per second: (ms since the Unix epoch, what the pipeline's loaded instances cost, $/h),
    /// oldest first; sampled once a second on this controller while the pipeline is active
    /// here (the last 30 minutes).
    pub cost: Vec<(i64, f64)>,
    /// What the pipeline's loaded instances cost now, in dollars per hour: every instance of
    /// a model some node may run, once (nodes sharing a model share its instances).
    pub cost_per_hour: f64,
    /// The accuracy-scaling allocation queries are routed by (`overload.accuracy_scaling`).
    pub overload: Option<OverloadStatus>,
    /// The forecast of the pipeline's arrival rate against the observed one, and its error.
    pub forecast: Option<crate::forecasts::ForecastView>,
}

/// What the loaded instances of some models hold on the cluster.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Loaded {
    replicas: usize,
    queued_rows: usize,
    cost_per_hour: f64,
}

/// The instances of `models` of `tenant` in `snapshot`, priced by `prices`.
fn loaded<'a>(
    snapshot: &Snapshot,
    prices: &Prices,
    tenant: &str,
    models: impl IntoIterator<Item = &'a String>,
) -> Loaded {
    let mut l = Loaded::default();
    let mut rate_per_s = 0.0;
    for model in models {
        for &v in snapshot.model_variants(tenant, model) {
            for &i in snapshot.variant_instances(v) {
                l.replicas += 1;
                l.queued_rows += snapshot.queued(i);
                if let Some(ve) = snapshot.variants().get(v) {
                    rate_per_s += prices.rate_per_s(ve);
                }
            }
        }
    }
    l.cost_per_hour = rate_per_s * 3600.0;
    l
}

/// What pipeline `p`'s loaded instances cost per hour in `snapshot`: every instance of a model
/// some node may run, once.
fn pipeline_cost(snapshot: &Snapshot, prices: &Prices, tenant: &str, p: &Prepared) -> f64 {
    let models: BTreeSet<&String> = p.shapes.iter().flat_map(|s| &s.models).collect();
    loaded(snapshot, prices, tenant, models).cost_per_hour
}

/// What pipeline `p` of `tenant` costs per hour now, in dollars (what
/// [`PipelineStatus::cost_per_hour`] shows).
pub fn cost_per_hour(state: &ControlPlane, tenant: &str, p: &Prepared) -> f64 {
    pipeline_cost(&state.cluster.snapshot(), state.cluster.prices(), tenant, p)
}

/// Samples what every pipeline active on this controller costs now into its activity record
/// ([`super::activity::PipelineActivity::record_cost`], one sample per second). A pipeline that can no
/// longer be read or checked (deleted, or no longer fitting the registry) is not sampled: its
/// chart has a gap rather than a made-up figure.
pub async fn record_costs(state: &ControlPlane) {
    for (tenant, name) in state.pipelines.active() {
        let p = match prepared(state, &tenant, &name).await {
            Ok(p) => p,
            Err(e) => {
                // Every second while it lasts: the status and the queries report it.
                tracing::debug!(pipeline = %name, error = %e, "the pipeline's cost is not sampled");
                continue;
            }
        };
        let cost = cost_per_hour(state, &tenant, &p);
        state
            .pipelines
            .record_cost(&tenant, &name, infaas_core::time::now_ms(), cost);
    }
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
        let l = loaded(&snapshot, prices, tenant, &p.shapes[k].models);
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
            replicas: l.replicas,
            queued_rows: l.queued_rows,
            runs_last_minute: figures.map_or(0, |f| f.1),
            p99_ms: figures.and_then(|f| f.2),
            branch_probability: n.when.as_ref().and_then(|_| {
                state
                    .pipelines
                    .branch_probability(tenant, &spec.name, &n.name)
                    .map(|(p, _)| p)
            }),
            cost_per_hour: l.cost_per_hour,
            dropped: recent
                .drops
                .iter()
                .find(|(node, _)| *node == n.name)
                .map_or(0, |d| d.1),
        });
    }
    let cost_per_hour = pipeline_cost(&snapshot, prices, tenant, p);
    PipelineStatus {
        nodes,
        queries_last_minute: recent.queries_last_minute,
        p99_ms: recent.p99_ms,
        slo_ms: spec.slo.latency_ms,
        attainment: recent.seconds,
        quality: recent.quality,
        cost: recent.cost,
        cost_per_hour,
        overload: state
            .pipelines
            .installed(tenant, &spec.name)
            .map(|i| i.status(p)),
        forecast: state.forecasts.view(tenant, &forecast_key(&spec.name)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;

    use infaas_core::{HardwareKind, LatencyPoint};
    use infaas_scheduler::{InstanceEntry, InstanceState, VariantEntry, WorkerEntry};

    use super::super::activity::{PipelineActivity, SECONDS_KEPT};
    use super::super::{prepared::Pipeline, validate::NodeShape};
    use super::*;

    const T0_MS: i64 = 1_700_000_000_000;

    #[test]
    fn the_cost_series_holds_one_sample_per_second_and_is_bounded() {
        let a = PipelineActivity::default();
        // A pipeline not known here (never active, or forgotten) is not recorded.
        a.record_cost("t", "p", T0_MS, 1.0);
        assert!(a.active().is_empty());
        assert!(a.recent("t", "p").cost.is_empty());

        // Two samples in one second: one point, the later value.
        a.record_cost("t", "p", T0_MS + 100, 1.0);
        a.record_cost("t", "p", T0_MS + 900, 2.0);
        assert_eq!(a.recent("t", "p").cost, vec![(T0_MS, 2.0)]);
        // An older sample than the newest, or a value that is no number, is not recorded.
        a.record_cost("t", "p", T0_MS - 1000, 5.0);
        a.record_cost("t", "p", T0_MS + 1000, f64::NAN);
        assert_eq!(a.recent("t", "p").cost, vec![(T0_MS, 2.0)]);

        // Every second for longer than the window, sampled twice each: one point per second,
        // the window's seconds only, oldest first.
        let seconds = SECONDS_KEPT + 300;
        for s in 1..=seconds {
            a.record_cost("t", "p", T0_MS + s * 1000, s as f64);
            a.record_cost("t", "p", T0_MS + s * 1000 + 500, s as f64 + 0.5);
        }
        let cost = a.recent("t", "p").cost;
        assert_eq!(cost.len() as i64, SECONDS_KEPT + 1);
        assert_eq!(
            cost.last(),
            Some(&(T0_MS + seconds * 1000, seconds as f64 + 0.5))
        );
        assert_eq!(
            cost.first(),
            Some(&(
                T0_MS + (seconds - SECONDS_KEPT) * 1000,
                (seconds - SECONDS_KEPT) as f64 + 0.5
            ))
        );
        assert!(cost.windows(2).all(|w| w[1].0 - w[0].0 == 1000), "{cost:?}");

        // A deleted pipeline stays forgotten.
        a.forget("t", "p");
        a.record_cost("t", "p", T0_MS + (seconds + 1) * 1000, 1.0);
        assert!(a.active().is_empty());
    }

    fn variant(id: &str, model: &str, threads: usize) -> VariantEntry {
        VariantEntry {
            id: id.into(),
            name: id.into(),
            model: model.into(),
            app: "a".into(),
            accuracy: 0.9,
            hardware: HardwareKind::Cpu,
            threads,
            max_batch: 1,
            load_ms: 10.0,
            memory_bytes: 2_000_000_000,
            latency: vec![LatencyPoint {
                batch: 1,
                p50_ms: 1.0,
                p99_ms: 1.0,
                mean_ms: 1.0,
                throughput_per_s: 1000.0,
            }],
        }
    }

    /// `shared` with two instances of one thread, `other` with one of two threads.
    fn snapshot() -> Snapshot {
        let mut b = Snapshot::builder();
        let shared = b.add_variant("t", variant("v1", "shared", 1)).unwrap();
        let other = b.add_variant("t", variant("v2", "other", 2)).unwrap();
        b.add_worker(WorkerEntry {
            id: "w".into(),
            hardware: vec![HardwareKind::Cpu],
            cores: 8,
            cpu_cores: 8,
            cores_used: 0,
            memory_bytes: 1 << 40,
            memory_used: 0,
            alive: true,
            utilisation: 0.0,
            interference_seen: false,
            busy_threads: 0,
        })
        .unwrap();
        let mut s = b.build();
        for (id, v) in [("i1", shared), ("i2", shared), ("i3", other)] {
            s.add_instance(InstanceEntry {
                id: id.into(),
                variant: v,
                worker: 0,
                state: InstanceState::Active,
                queue_len: 0,
                qps: 0.0,
            })
            .unwrap();
        }
        s
    }

    /// Nodes `a` and `b` may both run model `shared`, `c` runs `other`, `d` is a combiner.
    fn prepared() -> Prepared {
        let shape = |models: &[&str]| NodeShape {
            inputs: Vec::new(),
            outputs: BTreeMap::new(),
            models: models.iter().map(|m| m.to_string()).collect(),
        };
        Prepared {
            pipeline: Pipeline {
                id: "id".into(),
                spec: serde_json::from_value(serde_json::json!({
                    "name": "p", "inputs": [], "nodes": [], "outputs": {}
                }))
                .unwrap(),
                plan: None,
                validation: None,
                created_at_ms: 0,
                updated_at_ms: 0,
            },
            order: vec![0, 1, 2, 3],
            shapes: vec![
                shape(&["shared"]),
                shape(&["shared"]),
                shape(&["other"]),
                shape(&[]),
            ],
            parents: vec![Vec::new(); 4],
            depth: vec![1; 4],
            fastest_rest_ms: vec![0.0; 4],
        }
    }

    #[test]
    fn the_pipeline_cost_counts_every_loaded_instance_once() {
        let prices = Prices {
            cpu_core_per_s: 1.0 / 3600.0,
            memory_gb_per_s: 0.5 / 3600.0,
            gpu_per_s: 0.0,
        };
        let s = snapshot();
        let p = prepared();
        // One thread and 2 GB: $2/h per instance of `shared`; two threads and 2 GB: $3/h.
        let node = loaded(&s, &prices, "t", &p.shapes[0].models);
        assert_eq!(node.replicas, 2);
        assert!((node.cost_per_hour - 4.0).abs() < 1e-9, "{node:?}");
        let combiner = loaded(&s, &prices, "t", &p.shapes[3].models);
        assert_eq!(combiner, Loaded::default());
        // Nodes a and b share the instances of `shared`: counted once.
        let total = pipeline_cost(&s, &prices, "t", &p);
        assert!((total - 7.0).abs() < 1e-9, "{total}");
        // Another tenant's pipeline has none of them.
        assert_eq!(pipeline_cost(&s, &prices, "u", &p), 0.0);
    }
}
