//! Pipelines: DAGs of applications, models and combiners under one end-to-end SLO.
//!
//! - [`validate`]: the document checked against the registry (tensors connect, targets serve);
//! - [`rows`]: which rows each node runs on (switch conditions) and the combiners;
//! - [`run`]: serving a query through the DAG, independent branches in parallel, each model
//!   node through the platform's query path (model-less for application nodes);
//! - [`plan`]: InferLine's planner over the nodes' profiled variants, judged by the simulator;
//! - [`tune`]: InferLine's tuner, once a second, on the pipelines planned here;
//! - [`status`]: the live picture of a pipeline for the API and the dashboard.
//!
//! What the pipelines did recently (arrivals, how often each switch branch ran) is kept here
//! in memory for the planner and the dashboard.

pub mod accuracy;
pub mod overload;
pub mod plan;
pub mod rows;
pub mod run;
pub mod status;
pub mod tune;
pub mod validate;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_core::pipeline::PipelineSpec;
use infaas_store::db::PipelineRow;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::platform::ControlPlane;

/// Largest pipeline document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;
/// Arrivals kept per pipeline for planning (the last hour at most).
const ARRIVALS_KEPT_MS: f64 = 3_600_000.0;
/// How long a checked pipeline is reused by queries before it is read and checked again
/// (changes made through this controller take effect at once).
const PREPARED_TTL: Duration = Duration::from_secs(2);

/// A pipeline checked against the registry, ready to serve.
#[derive(Debug)]
pub struct Prepared {
    pub pipeline: Pipeline,
    /// Node indices in an order where every node follows those it reads.
    pub order: Vec<usize>,
    pub shapes: Vec<validate::NodeShape>,
    /// Per node, the nodes it reads from.
    pub parents: Vec<Vec<usize>>,
    /// Per node, the model nodes on the longest chain from it to a sink, itself included
    /// (how many shares of the SLO's remainder a node's budget is).
    pub depth: Vec<usize>,
    /// Per node, the fastest time (ms, batch-1 profiles) the pipeline could still take from
    /// its start to a sink: the floor early dropping holds a query's deadline to.
    pub fastest_rest_ms: Vec<f64>,
}

/// One tensor of a signature: name, datatype, shape with `-1` for the batch dimension.
pub type SignatureTensor = (String, String, Vec<i64>);

impl Prepared {
    /// The pipeline's inputs and outputs, as a model's signature.
    pub fn signature(&self) -> (Vec<SignatureTensor>, Vec<SignatureTensor>) {
        let spec = &self.pipeline.spec;
        let inputs = spec
            .inputs
            .iter()
            .map(|i| {
                let dt = infaas_core::DataType::parse(&i.datatype)
                    .map_or_else(|| i.datatype.clone(), |d| d.as_str().to_string());
                let shape = std::iter::once(-1).chain(i.shape.iter().copied()).collect();
                (i.name.clone(), dt, shape)
            })
            .collect();
        let outputs = spec
            .outputs
            .iter()
            .filter_map(|(name, source)| {
                let infaas_core::pipeline::Source::Node { node, output } =
                    infaas_core::pipeline::parse_source(source)
                else {
                    return None;
                };
                let t = self
                    .shapes
                    .get(spec.node_index(node)?)?
                    .outputs
                    .get(output)?;
                let shape = std::iter::once(-1)
                    .chain(t.features.iter().copied())
                    .collect();
                Some((name.clone(), t.datatype.clone(), shape))
            })
            .collect();
        (inputs, outputs)
    }

    /// The applications and models the pipeline's nodes run.
    pub fn targets(&self) -> Vec<(Option<&str>, Option<&str>)> {
        self.pipeline
            .spec
            .nodes
            .iter()
            .filter(|n| n.combine.is_none())
            .map(|n| (n.app.as_deref(), n.model.as_deref()))
            .collect()
    }
}

/// The pipeline `name` of `tenant`, checked (cached for a moment).
pub async fn prepared(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
) -> Result<Arc<Prepared>, Error> {
    if let Some(p) = state.pipelines.cached(tenant, name) {
        return Ok(p);
    }
    let pipeline = get(state, tenant, name).await?;
    let models = state.db.list_models(tenant, None).await?;
    let (order, shapes) = validate::check(&pipeline.spec, &validate::Registry { models: &models })
        .map_err(|e| match e {
            Error::NotFound(m) | Error::Conflict(m) | Error::Invalid(m) => Error::Conflict(
                format!("pipeline '{name}' no longer fits the registry: {m}"),
            ),
            other => other,
        })?;
    let parents = pipeline.spec.parents();
    let depth = run::depth_to_sink(&pipeline, &parents, &order);
    let fastest_rest_ms = fastest_rest(state, tenant, &pipeline.spec, &order, &parents, &shapes);
    let p = Arc::new(Prepared {
        pipeline,
        order,
        shapes,
        parents,
        depth,
        fastest_rest_ms,
    });
    state.pipelines.cache(tenant, name, p.clone());
    Ok(p)
}

/// Per node, the fastest time from its start to a sink: its own fastest profiled variant
/// (batch 1, p50) of the models it may run (0 for a combiner, or before any is profiled) plus
/// the slowest of its children's.
fn fastest_rest(
    state: &ControlPlane,
    tenant: &str,
    spec: &PipelineSpec,
    order: &[usize],
    parents: &[Vec<usize>],
    shapes: &[validate::NodeShape],
) -> Vec<f64> {
    let catalog = state.cluster.catalog();
    let own: Vec<f64> = shapes
        .iter()
        .map(|s| {
            catalog
                .variants()
                .filter(|v| v.entry.tenant_id == tenant && s.models.contains(&v.entry.model))
                .filter_map(|v| v.entry.variant.latency.first().map(|p| p.p50_ms))
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .fold(f64::INFINITY, f64::min)
        })
        .map(|ms| if ms.is_finite() { ms } else { 0.0 })
        .collect();
    let mut rest = own.clone();
    for &k in order.iter().rev() {
        let after = (0..spec.nodes.len())
            .filter(|&c| parents.get(c).is_some_and(|ps| ps.contains(&k)))
            .map(|c| rest[c])
            .fold(0.0, f64::max);
        rest[k] = own[k] + after;
    }
    rest
}

/// A registered pipeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pipeline {
    pub id: String,
    pub spec: PipelineSpec,
    /// The applied plan, if any.
    pub plan: Option<serde_json::Value>,
    /// The validation set the planner measures end-to-end accuracy on, if any.
    pub validation: Option<accuracy::ValidationInfo>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Pipeline {
    fn from_row(row: PipelineRow) -> Result<Pipeline, Error> {
        let spec = serde_json::from_str(&row.spec).map_err(|e| {
            Error::internal(anyhow::anyhow!(
                "stored pipeline '{}' does not parse: {e}",
                row.name
            ))
        })?;
        let plan = match row.plan.as_deref() {
            Some(p) => Some(serde_json::from_str(p).map_err(|e| {
                Error::internal(anyhow::anyhow!(
                    "stored plan of pipeline '{}' does not parse: {e}",
                    row.name
                ))
            })?),
            None => None,
        };
        let validation = match (row.validation_key, row.validation_output) {
            (Some(key), Some(output)) => Some(accuracy::ValidationInfo {
                output,
                rows: row.validation_rows.unwrap_or(0).max(0) as usize,
                key,
            }),
            _ => None,
        };
        Ok(Pipeline {
            id: row.id,
            spec,
            plan,
            validation,
            created_at_ms: row.created_at,
            updated_at_ms: row.updated_at,
        })
    }
}

/// Reads a pipeline document, JSON or YAML (JSON is tried first).
pub fn parse_document(bytes: &[u8]) -> Result<PipelineSpec, Error> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::TooLarge(format!(
            "a pipeline document is at most {MAX_DOCUMENT_BYTES} bytes; this one is {}",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::Invalid(format!("the pipeline document is not UTF-8: {e}")))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        // The error names the field where it is (`nodes[1].combine: unknown variant ...`), as
        // serde_yaml's do.
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                Error::Invalid(format!("the pipeline document is not valid JSON: {inner}"))
            } else {
                Error::Invalid(format!(
                    "the pipeline document is not valid JSON: {path}: {inner}"
                ))
            }
        })
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            Error::Invalid(format!(
                "the pipeline document is neither JSON nor valid YAML: {e}"
            ))
        })
    }
}

/// Registers a pipeline after checking it against the registry.
pub async fn create(
    state: &ControlPlane,
    tenant: &str,
    spec: PipelineSpec,
) -> Result<Pipeline, Error> {
    let models = state.db.list_models(tenant, None).await?;
    let (order, _) = validate::check(&spec, &validate::Registry { models: &models })?;
    if spec.overload.accuracy_scaling {
        overload::check_tree(&spec, &order)?;
    }
    // A pipeline is also a model on the Open Inference Protocol: its name must not hide an
    // application or model of the tenant.
    if models
        .iter()
        .any(|m| m.name == spec.name || m.app == spec.name)
    {
        return Err(Error::Conflict(format!(
            "'{}' already names an application or model of this tenant; a pipeline needs a name of its own (it is served as /v2/models/{{name}})",
            spec.name
        )));
    }
    let text = serde_json::to_string(&spec).map_err(Error::internal)?;
    let row = state
        .db
        .create_pipeline(tenant, &spec.name, &text, spec.slo.latency_ms)
        .await?;
    Pipeline::from_row(row)
}

pub async fn get(state: &ControlPlane, tenant: &str, name: &str) -> Result<Pipeline, Error> {
    Pipeline::from_row(state.db.get_pipeline(tenant, name).await?)
}

pub async fn list(state: &ControlPlane, tenant: &str) -> Result<Vec<Pipeline>, Error> {
    state
        .db
        .list_pipelines(tenant)
        .await?
        .into_iter()
        .map(Pipeline::from_row)
        .collect()
}

pub async fn delete(state: &ControlPlane, tenant: &str, name: &str) -> Result<(), Error> {
    let row = state.db.delete_pipeline(tenant, name).await?;
    if let Some(key) = row.validation_key {
        if let Err(e) = state.objects.delete(&key).await {
            tracing::warn!(key = %key, error = %e, "cannot delete a deleted pipeline's validation set");
        }
    }
    state.pipelines.forget(tenant, name);
    state.pipelines.tuners.remove(tenant, name);
    Ok(())
}

/// Recent activity of one pipeline.
#[derive(Debug, Default)]
struct Activity {
    /// Arrival times (ms since the Unix epoch), oldest first, the last hour.
    arrivals: VecDeque<f64>,
    /// Per node: (queries that reached its parents, queries it ran for).
    branches: HashMap<String, (u64, u64)>,
    /// Per node: (when, latency ms) of its runs in the last minute, and the last variant.
    node_runs: HashMap<String, NodeRuns>,
    /// End-to-end (when, latency ms) of the last minute.
    answers: VecDeque<(f64, f64)>,
    /// Per second (ms since the Unix epoch / 1000): queries answered, and within the SLO.
    seconds: VecDeque<(i64, u64, u64)>,
    /// Per answered query, its latency beyond the profiled model time of its longest path
    /// (dispatch, transfers, combiners, queueing), ms; the last [`OVERHEAD_KEPT`].
    overhead: VecDeque<f64>,
    /// End-to-end accuracies measured on a validation set, by (set's key, models per node).
    measured: HashMap<(String, Vec<String>), accuracy::Measured>,
    /// Per second: (second, queries answered, sum of their accuracies, queries dropped).
    quality: VecDeque<(i64, u64, f64, u64)>,
    /// Queries dropped early, per node, since the controller started.
    drops: HashMap<String, u64>,
    /// Per second: (second, what the pipeline's loaded instances cost per hour), the last
    /// sample of the second; [`status::record_costs`] samples it once a second.
    cost: VecDeque<(i64, f64)>,
    /// The accuracy-scaling allocation queries are routed by, if any.
    loki: Option<Arc<overload::Installed>>,
}

impl Activity {
    /// Adds to the current second's quality figures.
    fn quality(&mut self, sec: i64, answered: u64, accuracy: f64, dropped: u64) {
        match self.quality.back_mut() {
            Some(last) if last.0 == sec => {
                last.1 += answered;
                last.2 += accuracy;
                last.3 += dropped;
            }
            _ => self.quality.push_back((sec, answered, accuracy, dropped)),
        }
        while self
            .quality
            .front()
            .is_some_and(|s| sec - s.0 > SECONDS_KEPT)
        {
            self.quality.pop_front();
        }
    }
}

/// Overhead samples kept per pipeline.
const OVERHEAD_KEPT: usize = 10_000;

/// A node's (when, latency ms) runs of the last minute and the variant of its last run.
type NodeRuns = (VecDeque<(f64, f64)>, Option<String>);
/// Checked pipelines by (tenant, name), with when they were checked.
type PreparedCache = HashMap<(String, String), (Instant, Arc<Prepared>)>;

/// Seconds of attainment, quality and cost history kept per pipeline.
const SECONDS_KEPT: i64 = 1800;
/// Window of the per-node and end-to-end latency figures.
const RECENT_MS: f64 = 60_000.0;

fn prune(q: &mut VecDeque<(f64, f64)>, now: f64) {
    while q.front().is_some_and(|(t, _)| now - t > RECENT_MS) {
        q.pop_front();
    }
}

/// The `p`-th percentile of `values` (nearest rank), `None` when empty.
pub fn percentile(values: &mut [f64], p: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = ((p / 100.0) * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// What a pipeline did in the last minute and its SLO attainment per second.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecentFigures {
    /// Per node: (node, runs in the last minute, p99 latency ms, last variant).
    pub nodes: Vec<(String, usize, Option<f64>, Option<String>)>,
    pub queries_last_minute: usize,
    pub p99_ms: Option<f64>,
    /// Per second: (ms since the Unix epoch, queries answered, within the SLO), oldest first.
    pub seconds: Vec<(i64, u64, u64)>,
    /// Per second: (ms since the Unix epoch, queries answered, their mean accuracy, queries
    /// dropped early), oldest first.
    pub quality: Vec<(i64, u64, Option<f64>, u64)>,
    /// Per second: (ms since the Unix epoch, what the pipeline's loaded instances cost, $/h),
    /// oldest first.
    pub cost: Vec<(i64, f64)>,
    /// Queries dropped early per node (since the controller started).
    pub drops: Vec<(String, u64)>,
}

/// What the pipelines did recently, per tenant and pipeline (in memory, this controller).
#[derive(Debug, Default)]
pub struct PipelineActivity {
    inner: Mutex<HashMap<(String, String), Activity>>,
    prepared: Mutex<PreparedCache>,
    /// The tuners of the pipelines whose plan was applied on this controller.
    pub tuners: tune::Tuners,
}

impl PipelineActivity {
    fn with<R>(&self, tenant: &str, name: &str, f: impl FnOnce(&mut Activity) -> R) -> R {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(map
            .entry((tenant.to_string(), name.to_string()))
            .or_default())
    }

    /// Records a query's arrival.
    pub fn arrival(&self, tenant: &str, name: &str, at_ms: f64) {
        self.with(tenant, name, |a| {
            a.arrivals.push_back(at_ms);
            while a
                .arrivals
                .front()
                .is_some_and(|t| at_ms - t > ARRIVALS_KEPT_MS)
            {
                a.arrivals.pop_front();
            }
        });
    }

    /// Records how many of the rows that reached a switch node it ran on (every row of a
    /// request is a query of the pipeline).
    pub fn branch(&self, tenant: &str, name: &str, node: &str, reached: usize, ran: usize) {
        self.with(tenant, name, |a| {
            let e = a.branches.entry(node.to_string()).or_default();
            e.0 += reached as u64;
            e.1 += ran as u64;
        });
    }

    /// Records a node's run: its latency and variant.
    pub fn node_run(
        &self,
        tenant: &str,
        name: &str,
        node: &str,
        latency_ms: f64,
        variant: Option<&str>,
    ) {
        let now = infaas_core::time::now_ms() as f64;
        self.with(tenant, name, |a| {
            let e = a.node_runs.entry(node.to_string()).or_default();
            e.0.push_back((now, latency_ms));
            prune(&mut e.0, now);
            if let Some(v) = variant {
                e.1 = Some(v.to_string());
            }
        });
    }

    /// Records an answered query: its end-to-end latency, whether it met the SLO, and its
    /// latency beyond the profiled model time of its longest path.
    pub fn answered(
        &self,
        tenant: &str,
        name: &str,
        latency_ms: f64,
        within: bool,
        overhead_ms: f64,
        accuracy: f64,
    ) {
        let now = infaas_core::time::now_ms() as f64;
        let sec = (now / 1000.0) as i64;
        self.with(tenant, name, |a| {
            a.quality(sec, 1, if accuracy.is_finite() { accuracy } else { 0.0 }, 0);
            if overhead_ms.is_finite() {
                a.overhead.push_back(overhead_ms.max(0.0));
                if a.overhead.len() > OVERHEAD_KEPT {
                    a.overhead.pop_front();
                }
            }
            a.answers.push_back((now, latency_ms));
            prune(&mut a.answers, now);
            match a.seconds.back_mut() {
                Some(last) if last.0 == sec => {
                    last.1 += 1;
                    last.2 += u64::from(within);
                }
                _ => a.seconds.push_back((sec, 1, u64::from(within))),
            }
            while a.seconds.front().is_some_and(|s| sec - s.0 > SECONDS_KEPT) {
                a.seconds.pop_front();
            }
        });
    }

    /// The last minute's figures and the attainment history of a pipeline.
    pub fn recent(&self, tenant: &str, name: &str) -> RecentFigures {
        let now = infaas_core::time::now_ms() as f64;
        self.with(tenant, name, |a| {
            prune(&mut a.answers, now);
            let mut e2e: Vec<f64> = a.answers.iter().map(|(_, l)| *l).collect();
            let mut nodes: Vec<_> = a
                .node_runs
                .iter_mut()
                .map(|(node, (runs, variant))| {
                    prune(runs, now);
                    let mut l: Vec<f64> = runs.iter().map(|(_, l)| *l).collect();
                    (
                        node.clone(),
                        l.len(),
                        percentile(&mut l, 99.0),
                        variant.clone(),
                    )
                })
                .collect();
            nodes.sort_by(|x, y| x.0.cmp(&y.0));
            let mut drops: Vec<(String, u64)> =
                a.drops.iter().map(|(n, d)| (n.clone(), *d)).collect();
            drops.sort();
            RecentFigures {
                nodes,
                queries_last_minute: e2e.len(),
                p99_ms: percentile(&mut e2e, 99.0),
                seconds: a
                    .seconds
                    .iter()
                    .map(|(s, n, ok)| (s * 1000, *n, *ok))
                    .collect(),
                quality: a
                    .quality
                    .iter()
                    .map(|&(s, n, acc, d)| {
                        let mean = (n > 0).then(|| acc / n as f64);
                        (s * 1000, n, mean, d)
                    })
                    .collect(),
                cost: a.cost.iter().map(|&(s, c)| (s * 1000, c)).collect(),
                drops,
            }
        })
    }

    /// The pipelines with recorded activity, by (tenant, name).
    pub fn active(&self) -> Vec<(String, String)> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    /// Arrivals of a pipeline in second `sec` (seconds since the Unix epoch).
    pub fn arrivals_in_second(&self, tenant: &str, name: &str, sec: i64) -> usize {
        self.arrivals_between(tenant, name, sec * 1000, (sec + 1) * 1000)
    }

    /// Arrivals of a pipeline from `from_ms` (included) to `to_ms` (excluded), ms since the
    /// Unix epoch.
    pub fn arrivals_between(&self, tenant: &str, name: &str, from_ms: i64, to_ms: i64) -> usize {
        let (from, to) = (from_ms as f64, to_ms as f64);
        self.with(tenant, name, |a| {
            a.arrivals
                .iter()
                .rev()
                .take_while(|&&t| t >= from)
                .filter(|&&t| t < to)
                .count()
        })
    }

    /// Records what pipeline `name` costs per hour at `at_ms` (ms since the Unix epoch): one
    /// sample per second (a later one in the same second replaces it), the last
    /// [`SECONDS_KEPT`] seconds. Only a pipeline already known here is recorded: one forgotten
    /// meanwhile (deleted) stays forgotten. A sample older than the newest is ignored.
    pub fn record_cost(&self, tenant: &str, name: &str, at_ms: i64, cost_per_hour: f64) {
        if !cost_per_hour.is_finite() {
            return;
        }
        let sec = at_ms.div_euclid(1000);
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = map.get_mut(&(tenant.to_string(), name.to_string())) else {
            return;
        };
        match a.cost.back_mut() {
            Some(last) if last.0 == sec => last.1 = cost_per_hour,
            Some(last) if last.0 > sec => return,
            _ => a.cost.push_back((sec, cost_per_hour)),
        }
        while a.cost.front().is_some_and(|s| sec - s.0 > SECONDS_KEPT) {
            a.cost.pop_front();
        }
    }

    /// Records a query dropped early at `node`.
    pub fn dropped(&self, tenant: &str, name: &str, node: &str) {
        let sec = infaas_core::time::now_ms() / 1000;
        self.with(tenant, name, |a| {
            a.quality(sec, 0, 0.0, 1);
            *a.drops.entry(node.to_string()).or_default() += 1;
        });
    }

    /// Installs the allocation queries of a pipeline are routed by; the mode of the one it
    /// replaces, if any.
    pub fn install_allocation(
        &self,
        tenant: &str,
        name: &str,
        installed: Arc<overload::Installed>,
    ) -> Option<infaas_scheduler::loki::Mode> {
        self.with(tenant, name, |a| {
            a.loki.replace(installed).map(|old| old.allocation.mode)
        })
    }

    /// The allocation queries of a pipeline are routed by, if accuracy scaling installed one.
    pub fn installed(&self, tenant: &str, name: &str) -> Option<Arc<overload::Installed>> {
        self.with(tenant, name, |a| a.loki.clone())
    }

    /// The recorded overhead samples (ms), oldest first.
    pub fn overhead_samples(&self, tenant: &str, name: &str) -> Vec<f64> {
        self.with(tenant, name, |a| a.overhead.iter().copied().collect())
    }

    /// Arrivals of the last `window_ms` (ms since the Unix epoch), oldest first.
    pub fn arrivals(&self, tenant: &str, name: &str, window_ms: f64) -> Vec<f64> {
        self.with(tenant, name, |a| {
            let last = a.arrivals.back().copied().unwrap_or(0.0);
            let now = (infaas_core::time::now_ms() as f64).max(last);
            // Newest first, stopping at the window's start: the deque holds an hour of
            // arrivals and the control loops ask for the last seconds every second.
            let mut recent: Vec<f64> = a
                .arrivals
                .iter()
                .rev()
                .copied()
                .take_while(|t| now - t <= window_ms)
                .collect();
            recent.reverse();
            recent
        })
    }

    /// The measured fraction of rows a node ran on among those that reached it, with the
    /// number of rows it is measured on.
    pub fn branch_probability(&self, tenant: &str, name: &str, node: &str) -> Option<(f64, u64)> {
        self.with(tenant, name, |a| {
            a.branches
                .get(node)
                .filter(|(n, _)| *n > 0)
                .map(|(n, ran)| (*ran as f64 / *n as f64, *n))
        })
    }

    /// Drops what is known of a pipeline (deleted) and its checked copy.
    pub fn forget(&self, tenant: &str, name: &str) {
        let key = (tenant.to_string(), name.to_string());
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.invalidate(tenant, name);
    }

    /// A combination's accuracy measured on the validation set stored at `key`, if measured.
    pub fn measured(
        &self,
        tenant: &str,
        name: &str,
        key: &str,
        combo: &[String],
    ) -> Option<accuracy::Measured> {
        self.with(tenant, name, |a| {
            a.measured.get(&(key.to_string(), combo.to_vec())).cloned()
        })
    }

    /// Keeps a combination's measured accuracy (see [`PipelineActivity::measured`]); the
    /// figures of any other set of the pipeline go.
    pub fn remember_measured(
        &self,
        tenant: &str,
        name: &str,
        key: &str,
        combo: &[String],
        m: accuracy::Measured,
    ) {
        self.with(tenant, name, |a| {
            a.measured.retain(|(k, _), _| k == key);
            a.measured.insert((key.to_string(), combo.to_vec()), m);
        })
    }

    /// Drops the checked copy of a pipeline (its document or plan changed).
    pub fn invalidate(&self, tenant: &str, name: &str) {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.to_string(), name.to_string()));
    }

    fn cached(&self, tenant: &str, name: &str) -> Option<Arc<Prepared>> {
        let map = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(tenant.to_string(), name.to_string()))
            .filter(|(at, _)| at.elapsed() < PREPARED_TTL)
            .map(|(_, p)| p.clone())
    }

    fn cache(&self, tenant: &str, name: &str, p: Arc<Prepared>) {
        let mut map = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        map.insert((tenant.to_string(), name.to_string()), (Instant::now(), p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(doc: &str) -> String {
        match parse_document(doc.as_bytes()) {
            Err(Error::Invalid(m)) => m,
            other => panic!("{doc}: {other:?}"),
        }
    }

    /// Errors name the field: a missing one, and where an unknown value is, in JSON and YAML.
    #[test]
    fn document_errors_name_the_field() {
        let m = refused(r#"{"inputs": [], "nodes": [], "outputs": {}}"#);
        assert!(m.contains("missing field `name`"), "{m}");
        let m = refused(
            r#"{"name": "p", "inputs": [{"name": "x", "datatype": "FP32"}],
                "nodes": [{"name": "a", "app": "a"}, {"name": "m", "combine": "median", "from": ["a.y"]}],
                "outputs": {"y": "m.output"}}"#,
        );
        assert!(
            m.contains("nodes[1].combine") && m.contains("median"),
            "{m}"
        );
        assert!(m.contains("mean") && m.contains("first"), "{m}");
        let m =
            refused("name: p\ninputs: []\nnodes:\n  - name: m\n    combine: median\noutputs: {}\n");
        assert!(
            m.contains("nodes[0].combine") && m.contains("median"),
            "{m}"
        );
    }
}
