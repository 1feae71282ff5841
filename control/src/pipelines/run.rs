//! Serving one query through a pipeline. Nodes start as soon as every node they read has
//! finished, so independent branches run in parallel; each model node sends the rows it runs
//! on as one batch through the platform's query path ([`crate::serving::serve`]), model-less
//! for application nodes. A node's latency budget is what is left of the end-to-end SLO
//! shared evenly over the model nodes still ahead on the longest path; its accuracy floor is
//! the end-to-end floor's k-th root over the k model nodes of the longest path (so that the
//! product of the nodes' accuracies, the end-to-end estimate, meets it). With a plan applied,
//! a node runs the model the plan chose.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use futures::stream::{FuturesUnordered, StreamExt};
use infaas_core::pipeline::{parse_source, NodeKind, Source};
use infaas_core::Tensor;
use serde::Serialize;

use infaas_scheduler::loki::{on_arrival, Alternative, Arrival, Decision, DropPolicy, Hop};

use super::activity::PipelineActivity;
use super::installed::Installed;
use super::prepared::Prepared;
use super::rows::{self, NodeRows};
use super::validate::NodeShape;
use crate::error::Error;
use crate::platform::{ControlPlane, Parts};
use crate::serving::{serve_with, Goal, QueryParts, Requirements};

/// What a pipeline run uses of the control plane: the query path its model nodes are served
/// through, and the pipelines' activity (arrivals, branches, routing, answers, drops).
#[derive(Clone, Copy)]
pub struct RunParts<'a> {
    pub query: QueryParts<'a>,
    pub pipelines: &'a PipelineActivity,
}

impl<'a> RunParts<'a> {
    /// The pipeline run's parts of the control plane.
    pub fn of(parts: &'a Parts) -> RunParts<'a> {
        RunParts {
            query: QueryParts::of(parts),
            pipelines: &parts.pipelines,
        }
    }
}

/// What one node did for a query.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRun {
    pub node: String,
    /// `app`, `model` or the combiner's name.
    pub kind: String,
    /// Rows of the request the node ran on (0 when a switch skipped it).
    pub rows: usize,
    pub model: Option<String>,
    pub variant: Option<String>,
    pub worker: Option<String>,
    pub hardware: Option<String>,
    pub accuracy: Option<f64>,
    /// The node's latency budget when it started (ms), for model nodes under an SLO.
    pub budget_ms: Option<f64>,
    pub latency_ms: f64,
    /// The variant's profiled time for the node's rows (model time only), ms.
    #[serde(skip)]
    pub service_ms: f64,
    pub reason: String,
}

/// The answer to a pipeline query.
pub struct PipelineOutcome {
    pub outputs: Vec<Tensor>,
    pub latency_ms: f64,
    pub slo_ms: Option<f64>,
    /// Estimated end-to-end accuracy of this answer: the product of the accuracies of the
    /// model nodes that ran (each weighted by the share of rows it ran on).
    pub accuracy: f64,
    pub nodes: Vec<NodeRun>,
}

/// The model node's run for its rows.
struct Ran {
    rows: NodeRows,
    run: NodeRun,
}

/// The model a plan pinned node `name` to, if any.
fn planned_model<'a>(plan: Option<&'a serde_json::Value>, name: &str) -> Option<&'a str> {
    plan?["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["name"].as_str() == Some(name))?["model"]
        .as_str()
}

/// Serves one query through pipeline `p`.
pub async fn infer(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    req: Requirements,
    inputs: Vec<Tensor>,
) -> Result<PipelineOutcome, Error> {
    let parts = RunParts::of(state);
    infer_as(&parts, tenant, prepared, req, inputs, Mode::ONLINE).await
}

/// Runs rows of an offline job through pipeline `p`: as [`infer`], but not counted as the
/// pipeline's online traffic (arrivals for the tuner and the planner, SLO attainment,
/// latency metrics).
pub async fn infer_offline(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    req: Requirements,
    inputs: Vec<Tensor>,
) -> Result<PipelineOutcome, Error> {
    let parts = RunParts::of(state);
    infer_as(&parts, tenant, prepared, req, inputs, Mode::OFFLINE).await
}

/// Runs rows through pipeline `p` with each node in `pins` (node name -> model) on that model,
/// whatever the plan says; offline, as [`infer_offline`]. For measuring the end-to-end
/// accuracy of a configuration on the pipeline's validation set.
pub async fn infer_pinned(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    inputs: Vec<Tensor>,
    pins: &HashMap<String, String>,
) -> Result<PipelineOutcome, Error> {
    let mode = Mode {
        online: false,
        pins: Some(pins),
    };
    infer_as(
        &RunParts::of(state),
        tenant,
        prepared,
        Requirements::default(),
        inputs,
        mode,
    )
    .await
}

/// How a query goes through: counted as online traffic or not, and nodes pinned to models.
#[derive(Clone, Copy)]
struct Mode<'a> {
    online: bool,
    pins: Option<&'a HashMap<String, String>>,
}

impl Mode<'_> {
    const ONLINE: Mode<'static> = Mode {
        online: true,
        pins: None,
    };
    const OFFLINE: Mode<'static> = Mode {
        online: false,
        pins: None,
    };
}

async fn infer_as(
    state: &RunParts<'_>,
    tenant: &str,
    prepared: &Prepared,
    req: Requirements,
    inputs: Vec<Tensor>,
    mode: Mode<'_>,
) -> Result<PipelineOutcome, Error> {
    let online = mode.online;
    req.check()?;
    let started = Instant::now();
    let p = &prepared.pipeline;
    let spec = &p.spec;
    let (order, shapes) = (&prepared.order, &prepared.shapes);
    let n_rows = check_inputs(spec, &inputs)?;
    if online {
        state
            .pipelines
            .arrival(tenant, &spec.name, infaas_core::time::now_ms() as f64);
    }
    let slo_ms = req.latency_ms.or(spec.slo.latency_ms);
    let min_accuracy = req.min_accuracy.or(spec.slo.min_accuracy);
    let (parents, depth) = (&prepared.parents, &prepared.depth);
    let longest = depth.iter().copied().max().unwrap_or(1).max(1);
    let node_accuracy = min_accuracy.map(|a| a.powf(1.0 / longest as f64));

    // Accuracy scaling routes every online query along the installed allocation; early
    // dropping holds every online query with a latency SLO to its deadline.
    let route = if online && spec.overload.accuracy_scaling {
        state.pipelines.installed(tenant, &spec.name)
    } else {
        None
    };
    let mut picks = route.as_ref().map(|r| r.draw(uniform)).unwrap_or_default();
    let deadline_ms = slo_ms.filter(|_| online && spec.overload.early_dropping);

    let all_rows: Vec<usize> = (0..n_rows).collect();
    let request: BTreeMap<&str, &Tensor> = inputs.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut done: Vec<Option<NodeRows>> = vec![None; spec.nodes.len()];
    let mut runs: Vec<Option<NodeRun>> = vec![None; spec.nodes.len()];
    let mut started_nodes = vec![false; spec.nodes.len()];
    let mut pending = FuturesUnordered::new();
    loop {
        // Start every node whose sources have all finished.
        for &k in order {
            if started_nodes[k] || !parents[k].iter().all(|&q| done[q].is_some()) {
                continue;
            }
            started_nodes[k] = true;
            let node = &spec.nodes[k];
            // The rows the node runs on: those every node it reads ran on, then its condition.
            let mut active = all_rows.clone();
            for s in node.inputs.values() {
                if let Source::Node { node: from, .. } = parse_source(s) {
                    if let Some(d) = spec.node_index(from).and_then(|i| done[i].as_ref()) {
                        active = rows::intersect(&active, &d.rows);
                    }
                }
            }
            if let Some(c) = &node.when {
                let (from, t) = source_tensor(spec, &done, &c.source)?;
                let reached = active.len();
                active = rows::intersect(&active, &rows::condition_rows(c, &from.rows, t));
                state
                    .pipelines
                    .branch(tenant, &spec.name, &node.name, reached, active.len());
            }
            let budget = slo_ms.map(|slo| {
                let left = slo - started.elapsed().as_secs_f64() * 1e3;
                (left / depth[k].max(1) as f64).max(0.1)
            });
            match node.kind() {
                NodeKind::Combine(c) => {
                    let at = Instant::now();
                    let mut sources = Vec::new();
                    for s in &node.from {
                        let (from, t) = source_tensor(spec, &done, s)?;
                        sources.push((from.rows.as_slice(), t));
                    }
                    let out = rows::combine(c, &sources, "output");
                    runs[k] = Some(NodeRun {
                        node: node.name.clone(),
                        kind: c.as_str().to_string(),
                        rows: out.rows.len(),
                        model: None,
                        variant: None,
                        worker: None,
                        hardware: None,
                        accuracy: None,
                        budget_ms: None,
                        latency_ms: at.elapsed().as_secs_f64() * 1e3,
                        service_ms: 0.0,
                        reason: format!("combined {} sources", node.from.len()),
                    });
                    done[k] = Some(out);
                }
                _ if active.is_empty() => {
                    runs[k] = Some(skipped(node));
                    done[k] = Some(NodeRows::default());
                }
                kind => {
                    let task = route.as_ref().and_then(|r| r.task_of.get(&k).copied());
                    if let Some(deadline) = deadline_ms {
                        let now = started.elapsed().as_secs_f64() * 1e3;
                        match hold_deadline(
                            prepared,
                            route.as_deref(),
                            task,
                            &picks,
                            k,
                            now,
                            deadline,
                        ) {
                            Decision::Proceed => {}
                            Decision::Reroute { task, placement } => {
                                if let Some(x) = picks.get_mut(task) {
                                    *x = Some(placement);
                                }
                                metrics::counter!("infaas_pipeline_reroutes_total",
                                    "pipeline" => spec.name.clone(), "node" => node.name.clone())
                                .increment(1);
                            }
                            Decision::Drop { reason } => {
                                return Err(drop_query(
                                    state, tenant, spec, node, deadline, &reason,
                                ));
                            }
                        }
                    }
                    let routed = match (&route, task) {
                        (Some(r), Some(t)) => picks
                            .get(t)
                            .copied()
                            .flatten()
                            .and_then(|p| r.model(t, p))
                            .map(str::to_string),
                        _ => None,
                    };
                    let batch = node_inputs(spec, &shapes[k], &done, &request, &active)?;
                    let pinned = mode
                        .pins
                        .and_then(|pins| pins.get(&node.name))
                        .cloned()
                        .or_else(|| routed.clone())
                        .or_else(|| planned_model(p.plan.as_ref(), &node.name).map(str::to_string));
                    // A routed node may take half of what the deadline leaves after the
                    // budgets of the nodes after it on its chain: the prediction it is held to
                    // is the profiled time on an idle worker, and the answer still has to get
                    // back (Loki plans processing within half the SLO for the same reason).
                    let routed_budget = match (&route, task, deadline_ms) {
                        (Some(r), Some(t), Some(deadline)) if routed.is_some() => {
                            let chain = r.chain(t, &picks);
                            let after: f64 = chain
                                .iter()
                                .skip(1)
                                .map(|&(t2, p)| r.budget_ms(t2, p))
                                .sum();
                            let now = started.elapsed().as_secs_f64() * 1e3;
                            Some(((deadline - now - after) * DEADLINE_SHARE).max(0.1))
                        }
                        _ => None,
                    };
                    let node_req = Requirements {
                        latency_ms: if routed.is_some() {
                            routed_budget
                        } else {
                            budget
                        },
                        min_accuracy: if routed.is_some() {
                            None
                        } else {
                            node_accuracy
                        },
                        max_cost: None,
                    };
                    let reroute = routed.is_some();
                    let slo_for_drop = deadline_ms.unwrap_or(0.0);
                    let name = node.name.clone();
                    let kind_name = match kind {
                        NodeKind::App(_) => "app",
                        _ => "model",
                    };
                    let target = match kind {
                        NodeKind::App(a) => a.to_string(),
                        NodeKind::Model(m) => m.to_string(),
                        NodeKind::Combine(_) => String::new(),
                    };
                    let is_app = matches!(kind, NodeKind::App(_));
                    pending.push(async move {
                        let at = Instant::now();
                        let goal = match (&pinned, is_app) {
                            (Some(m), _) => Goal::Model(m),
                            (None, true) => Goal::App(&target),
                            (None, false) => Goal::Model(&target),
                        };
                        // A routed node is held to its deadline.
                        let by_deadline = reroute;
                        let first = serve_with(
                            &state.query,
                            tenant,
                            goal,
                            node_req,
                            batch.clone(),
                            by_deadline,
                        )
                        .await;
                        let out = match first {
                            Ok(out) => out,
                            // Loki's opportunistic rerouting: the routed variant cannot make
                            // the deadline now; the application's variant that can, if any,
                            // else the query is dropped here.
                            Err(e) if reroute && is_app && late(&e) => {
                                metrics::counter!("infaas_pipeline_reroutes_total",
                                    "pipeline" => spec.name.clone(), "node" => name.clone())
                                .increment(1);
                                let app = Goal::App(&target);
                                match serve_with(&state.query, tenant, app, node_req, batch, true)
                                    .await
                                {
                                    Ok(out) => out,
                                    Err(e) if late(&e) => {
                                        return Err(drop_query(
                                            state,
                                            tenant,
                                            spec,
                                            node,
                                            slo_for_drop,
                                            &format!(
                                            "no variant of '{target}' makes the deadline now ({e})"
                                        ),
                                        ))
                                    }
                                    Err(e) => return Err(node_error(&name, e)),
                                }
                            }
                            Err(e) => return Err(node_error(&name, e)),
                        };
                        let outputs = out.outputs;
                        let run = NodeRun {
                            node: name,
                            kind: kind_name.into(),
                            rows: active.len(),
                            model: Some(out.model),
                            variant: Some(out.variant),
                            worker: Some(out.worker),
                            hardware: Some(out.hardware),
                            accuracy: Some(out.accuracy),
                            budget_ms: budget,
                            latency_ms: at.elapsed().as_secs_f64() * 1e3,
                            service_ms: out.service_ms,
                            reason: out.reason,
                        };
                        Ok::<_, Error>((
                            k,
                            Ran {
                                rows: NodeRows {
                                    rows: active,
                                    outputs,
                                },
                                run,
                            },
                        ))
                    });
                }
            }
        }
        if done.iter().all(Option::is_some) {
            break;
        }
        // Combine and skipped nodes finished in the pass above (their children, later in
        // the order, started in it too): what is left waits for a model node.
        match pending.next().await {
            Some(result) => {
                let (k, ran) = result?;
                runs[k] = Some(ran.run);
                done[k] = Some(ran.rows);
            }
            None => {
                return Err(Error::internal(anyhow::anyhow!(
                    "pipeline '{}' stopped with nodes that never became ready",
                    spec.name
                )))
            }
        }
    }
    drop(pending);

    let mut outputs = Vec::with_capacity(spec.outputs.len());
    for (name, source) in &spec.outputs {
        let (_, t) = source_tensor(spec, &done, source)?;
        let mut t = t.clone();
        t.name = name.clone();
        outputs.push(t);
    }
    // Model time on the longest path (by the profiles), for the planner's overhead samples.
    let mut path_ms = vec![0.0f64; spec.nodes.len()];
    for &k in order {
        let own = runs[k].as_ref().map_or(0.0, |r| r.service_ms);
        let before = parents[k].iter().map(|&q| path_ms[q]).fold(0.0, f64::max);
        path_ms[k] = before + if own.is_finite() { own } else { 0.0 };
    }
    let model_ms = path_ms.iter().copied().fold(0.0, f64::max);
    let nodes: Vec<NodeRun> = order.iter().filter_map(|&k| runs[k].take()).collect();
    let accuracy = nodes
        .iter()
        .filter_map(|r| r.accuracy.map(|a| a.powf(r.rows as f64 / n_rows as f64)))
        .product();
    let latency_ms = started.elapsed().as_secs_f64() * 1e3;
    if !online {
        return Ok(PipelineOutcome {
            outputs,
            latency_ms,
            slo_ms,
            accuracy,
            nodes,
        });
    }
    let within = slo_ms.is_none_or(|s| latency_ms <= s);
    state.pipelines.answered(
        tenant,
        &spec.name,
        latency_ms,
        within,
        latency_ms - model_ms,
        accuracy,
    );
    metrics::histogram!("infaas_pipeline_latency_seconds", "pipeline" => spec.name.clone())
        .record(latency_ms / 1e3);
    metrics::counter!("infaas_pipeline_queries_total", "pipeline" => spec.name.clone(),
        "within_slo" => if within { "true" } else { "false" })
    .increment(1);
    for r in &nodes {
        if r.rows > 0 && r.model.is_some() {
            state.pipelines.node_run(
                tenant,
                &spec.name,
                &r.node,
                r.latency_ms,
                r.variant.as_deref(),
            );
        }
        if r.rows > 0 {
            metrics::histogram!("infaas_pipeline_node_latency_seconds",
                "pipeline" => spec.name.clone(), "node" => r.node.clone())
            .record(r.latency_ms / 1e3);
        }
    }
    Ok(PipelineOutcome {
        outputs,
        latency_ms,
        slo_ms,
        accuracy,
        nodes,
    })
}

/// A uniform draw in [0, 1) for routing (a per-thread xorshift: routing needs spread, not
/// cryptographic quality).
fn uniform() -> f64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = Cell::new(
            0x9E37_79B9_7F4A_7C15 ^ (infaas_core::time::now_ms() as u64).rotate_left(17)
                ^ (&STATE as *const _ as u64),
        );
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        s.set(x);
        (x >> 11) as f64 / (1u64 << 53) as f64
    })
}

/// Share of the time a deadline leaves that a routed node's predicted latency may take.
const DEADLINE_SHARE: f64 = 0.5;

/// Whether a node's error says it cannot serve in time now (no variant meets the budget, or
/// overloaded), rather than that the query is wrong.
fn late(e: &Error) -> bool {
    matches!(
        e,
        Error::Unsatisfiable { .. } | Error::RateLimited { .. } | Error::Unavailable(_)
    )
}

/// Loki's reroute-then-drop decision before model node `k` starts, `now_ms` into a query whose
/// deadline is `deadline_ms` (both from its arrival): with an allocation installed, the drawn
/// placements' latency budgets on the longest remaining chain (rerouted first to a faster
/// placement with spare capacity); without one, the fastest time the rest of the pipeline
/// could take from `k`.
fn hold_deadline(
    prepared: &Prepared,
    route: Option<&Installed>,
    task: Option<usize>,
    picks: &[Option<usize>],
    k: usize,
    now_ms: f64,
    deadline_ms: f64,
) -> Decision {
    let spec = &prepared.pipeline.spec;
    let (hops, alternatives): (Vec<Hop>, &[Alternative]) = match (route, task) {
        (Some(r), Some(t)) => (
            r.chain(t, picks)
                .into_iter()
                .map(|(t2, p)| Hop {
                    task: t2,
                    node: spec.nodes[r.nodes[t2]].name.as_str(),
                    placement: p,
                    budget_ms: r.budget_ms(t2, p),
                })
                .collect(),
            &r.alternatives,
        ),
        _ => (
            vec![Hop {
                task: 0,
                node: spec.nodes[k].name.as_str(),
                placement: 0,
                budget_ms: prepared.fastest_rest_ms.get(k).copied().unwrap_or(0.0),
            }],
            &[],
        ),
    };
    on_arrival(
        DropPolicy::RerouteThenDrop,
        &Arrival {
            now_ms,
            deadline_ms,
            remaining: &hops,
            alternatives,
            previous: None,
        },
    )
}

/// Counts a query dropped at `node` (activity, metrics, usage) and the error that answers it.
fn drop_query(
    state: &RunParts<'_>,
    tenant: &str,
    spec: &infaas_core::pipeline::PipelineSpec,
    node: &infaas_core::pipeline::NodeSpec,
    slo_ms: f64,
    reason: &str,
) -> Error {
    state.pipelines.dropped(tenant, &spec.name, &node.name);
    metrics::counter!("infaas_pipeline_drops_total",
        "pipeline" => spec.name.clone(), "node" => node.name.clone())
    .increment(1);
    let app = node.app.as_deref().or(node.model.as_deref()).unwrap_or("");
    // In usage, a drop is a query of the node's application under variant
    // `dropped@{pipeline}.{node}` that missed its SLO.
    let variant = format!("dropped@{}.{}", spec.name, node.name);
    state.query.usage.record(&crate::usage::QueryRecord {
        tenant_id: tenant,
        app,
        model: "-",
        variant: &variant,
        hardware: "-",
        rows: 0,
        latency_ms: slo_ms + 1e-3,
        slo_ms: Some(slo_ms),
        cost: 0.0,
    });
    Error::Dropped(format!(
        "pipeline '{}' dropped the query early at node '{}': {reason}",
        spec.name, node.name
    ))
}

fn node_error(node: &str, e: Error) -> Error {
    let m = |msg: String| format!("node '{node}': {msg}");
    match e {
        Error::Invalid(s) => Error::Invalid(m(s)),
        Error::NotFound(s) => Error::NotFound(m(s)),
        Error::Conflict(s) => Error::Conflict(m(s)),
        Error::Unavailable(s) => Error::Unavailable(m(s)),
        Error::Unprocessable(s) => Error::Unprocessable(m(s)),
        Error::RateLimited {
            message,
            retry_after_secs,
        } => Error::RateLimited {
            message: m(message),
            retry_after_secs,
        },
        Error::Unsatisfiable {
            message,
            suggestion,
        } => Error::Unsatisfiable {
            message: m(message),
            suggestion,
        },
        other => other,
    }
}

fn skipped(node: &infaas_core::pipeline::NodeSpec) -> NodeRun {
    NodeRun {
        node: node.name.clone(),
        kind: match node.kind() {
            NodeKind::App(_) => "app".into(),
            _ => "model".into(),
        },
        rows: 0,
        model: None,
        variant: None,
        worker: None,
        hardware: None,
        accuracy: None,
        budget_ms: None,
        latency_ms: 0.0,
        service_ms: 0.0,
        reason: if node.when.is_some() {
            "skipped: its condition held for no row".into()
        } else {
            "skipped: the nodes it reads ran on no row".into()
        },
    }
}

/// Every declared input is given once, with its datatype and feature shape, and one batch
/// dimension; returns the number of rows.
fn check_inputs(
    spec: &infaas_core::pipeline::PipelineSpec,
    inputs: &[Tensor],
) -> Result<usize, Error> {
    let mut rows = None;
    for want in &spec.inputs {
        let got: Vec<&Tensor> = inputs.iter().filter(|t| t.name == want.name).collect();
        let t = match got.as_slice() {
            [t] => *t,
            [] => {
                return Err(Error::Invalid(format!(
                    "pipeline '{}' needs input '{}' ({} [-1{}])",
                    spec.name,
                    want.name,
                    want.datatype,
                    want.shape
                        .iter()
                        .map(|d| format!(", {d}"))
                        .collect::<String>()
                )))
            }
            _ => {
                return Err(Error::Invalid(format!(
                    "input '{}' is given twice",
                    want.name
                )))
            }
        };
        let dt = infaas_core::DataType::parse(&want.datatype);
        if Some(t.dtype()) != dt {
            return Err(Error::Invalid(format!(
                "input '{}' is {} but pipeline '{}' takes {}",
                want.name,
                t.dtype().as_str(),
                spec.name,
                want.datatype
            )));
        }
        let features: Vec<usize> = t.shape.iter().skip(1).copied().collect();
        let fits = t.shape.len() == want.shape.len() + 1
            && features
                .iter()
                .zip(&want.shape)
                .all(|(g, w)| *w < 0 || *g as i64 == *w);
        if !fits {
            return Err(Error::Invalid(format!(
                "input '{}' has shape {:?} but pipeline '{}' takes [-1{}]",
                want.name,
                t.shape,
                spec.name,
                want.shape
                    .iter()
                    .map(|d| format!(", {d}"))
                    .collect::<String>()
            )));
        }
        let n = t.shape.first().copied().unwrap_or(0);
        if n == 0 {
            return Err(Error::Invalid(format!("input '{}' has no rows", want.name)));
        }
        match rows {
            Some(r) if r != n => {
                return Err(Error::Invalid(format!(
                    "input '{}' has {n} rows but the other inputs have {r}",
                    want.name
                )))
            }
            _ => rows = Some(n),
        }
    }
    if let Some(extra) = inputs
        .iter()
        .find(|t| !spec.inputs.iter().any(|i| i.name == t.name))
    {
        return Err(Error::Invalid(format!(
            "pipeline '{}' has no input '{}' (it takes {})",
            spec.name,
            extra.name,
            spec.inputs
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    rows.ok_or_else(|| Error::Invalid("the request has no inputs".into()))
}

/// A node output (or a combine node's `output`) with the rows it holds.
fn source_tensor<'a>(
    spec: &infaas_core::pipeline::PipelineSpec,
    done: &'a [Option<NodeRows>],
    source: &str,
) -> Result<(&'a NodeRows, &'a Tensor), Error> {
    let Source::Node { node, output } = parse_source(source) else {
        return Err(Error::internal(anyhow::anyhow!(
            "'{source}' is not a node output"
        )));
    };
    let d = spec
        .node_index(node)
        .and_then(|i| done.get(i))
        .and_then(Option::as_ref)
        .ok_or_else(|| Error::internal(anyhow::anyhow!("node '{node}' has not run")))?;
    match d.output(output) {
        Some(t) => Ok((d, t)),
        // A node that ran on no row has no tensors: an empty stand-in of its rows.
        None if d.rows.is_empty() => Ok((d, empty())),
        None => Err(Error::Unprocessable(format!(
            "node '{node}' answered without output '{output}'"
        ))),
    }
}

fn empty() -> &'static Tensor {
    static EMPTY: std::sync::OnceLock<Tensor> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Tensor {
        name: String::new(),
        shape: vec![0],
        data: infaas_core::TensorData::Fp32(Vec::new()),
    })
}

/// The tensors a model node sends: each bound input's rows `active`, named as the model's input.
fn node_inputs(
    spec: &infaas_core::pipeline::PipelineSpec,
    shape: &NodeShape,
    done: &[Option<NodeRows>],
    request: &BTreeMap<&str, &Tensor>,
    active: &[usize],
) -> Result<Vec<Tensor>, Error> {
    let mut out = Vec::with_capacity(shape.inputs.len());
    for (input, source) in &shape.inputs {
        let mut t = match parse_source(source) {
            Source::Request(r) => {
                let t = request
                    .get(r)
                    .ok_or_else(|| Error::Invalid(format!("the request has no input '{r}'")))?;
                rows::take(t, active)
            }
            Source::Node { .. } => {
                let (from, t) = source_tensor(spec, done, source)?;
                rows::take(t, &rows::positions(&from.rows, active))
            }
        };
        t.name = input.clone();
        out.push(t);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::super::prepared::{depth_to_sink, Pipeline};
    use super::super::validate::TensorType;
    use super::*;
    use crate::cluster::fake::{values, x, FakeVariant, TENANT};
    use crate::serving::tests::QueryPlane;

    const DOUBLE: FakeVariant = FakeVariant {
        app: "double",
        model: "double",
        id: "double-1",
        p50_ms: 4.0,
        load_ms: 1.0,
    };
    const INC: FakeVariant = FakeVariant {
        app: "inc",
        model: "inc",
        id: "inc-1",
        p50_ms: 6.0,
        load_ms: 1.0,
    };

    /// Pipeline `p`: `a` (application `double`) on the request's `x`, then `b` (application
    /// `inc`) on `a`'s `y`; answers `b`'s `y` as `out`. `slo` is its `slo` section.
    fn chain(slo: serde_json::Value) -> Prepared {
        let doc = serde_json::json!({
            "name": "p",
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [4]}],
            "nodes": [
                {"name": "a", "app": "double", "inputs": {"x": "x"}},
                {"name": "b", "app": "inc", "inputs": {"x": "a.y"}},
            ],
            "outputs": {"out": "b.y"},
            "slo": slo,
        });
        let spec = super::super::registered::parse_document(doc.to_string().as_bytes())
            .expect("a pipeline document");
        let y = || {
            [(
                "y".to_string(),
                TensorType {
                    datatype: "FP32".into(),
                    features: vec![4],
                },
            )]
            .into_iter()
            .collect()
        };
        let shape = |source: &str, model: &str| NodeShape {
            inputs: vec![("x".into(), source.into())],
            outputs: y(),
            models: vec![model.into()],
        };
        let pipeline = Pipeline {
            id: "p-1".into(),
            spec,
            plan: None,
            validation: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        };
        let parents = pipeline.spec.parents();
        let order = vec![0, 1];
        let depth = depth_to_sink(&pipeline, &parents, &order);
        Prepared {
            pipeline,
            order,
            shapes: vec![shape("x", "double"), shape("a.y", "inc")],
            parents,
            depth,
            fastest_rest_ms: vec![DOUBLE.p50_ms + INC.p50_ms, INC.p50_ms],
        }
    }

    /// `double` and `inc` loaded on one worker, and the pipelines' activity.
    async fn plane() -> (QueryPlane, PipelineActivity) {
        (
            QueryPlane::start(&[DOUBLE, INC], &[&[0, 1]]).await,
            PipelineActivity::default(),
        )
    }

    /// Each node runs on what the node before it answered, and the pipeline answers the last
    /// node's output under its own name; an online query is the pipeline's activity (arrival,
    /// answer, node runs), an offline one is not.
    #[tokio::test]
    async fn a_chain_feeds_each_node_the_answer_of_the_one_before() {
        let (plane, activity) = plane().await;
        let parts = RunParts {
            query: plane.parts(),
            pipelines: &activity,
        };
        let p = chain(serde_json::json!({}));
        let input = || vec![x(&[[1.0, 2.0, 3.0, 4.0], [0.0, -1.0, 0.5, 10.0]])];
        let run = |req, mode| infer_as(&parts, TENANT, &p, req, input(), mode);
        let out = run(Requirements::default(), Mode::ONLINE)
            .await
            .expect("answered");
        assert_eq!(out.outputs.len(), 1);
        assert_eq!(out.outputs[0].name, "out");
        assert_eq!(
            values(&out.outputs[0]),
            vec![3.0, 5.0, 7.0, 9.0, 1.0, -1.0, 2.0, 21.0]
        );
        let ran: Vec<(&str, Option<&str>, usize)> = out
            .nodes
            .iter()
            .map(|n| (n.node.as_str(), n.model.as_deref(), n.rows))
            .collect();
        assert_eq!(ran, vec![("a", Some("double"), 2), ("b", Some("inc"), 2)]);
        assert!((out.accuracy - 0.81).abs() < 1e-9, "{}", out.accuracy);
        let worker = &plane.fake.workers[0];
        assert_eq!(
            worker.queries(),
            vec![DOUBLE.id.to_string(), INC.id.to_string()]
        );
        let recent = activity.recent(TENANT, "p");
        assert_eq!(recent.queries_last_minute, 1);
        assert_eq!(
            recent.nodes.iter().map(|n| n.1).collect::<Vec<_>>(),
            vec![1, 1]
        );
        assert_eq!(activity.arrivals(TENANT, "p", 60_000.0).len(), 1);

        run(Requirements::default(), Mode::OFFLINE)
            .await
            .expect("answered offline");
        assert_eq!(activity.recent(TENANT, "p").queries_last_minute, 1);
        assert_eq!(activity.arrivals(TENANT, "p", 60_000.0).len(), 1);
        assert_eq!(worker.queries().len(), 4);
    }

    /// Early dropping: an online query whose deadline the rest of the pipeline cannot make
    /// (by its fastest profiles) is dropped before its first node runs, counted as a drop of
    /// that node and as a missed query in usage; under a deadline it can make, it runs.
    #[tokio::test]
    async fn a_query_that_cannot_make_its_deadline_is_dropped_before_it_runs() {
        let (plane, activity) = plane().await;
        let parts = RunParts {
            query: plane.parts(),
            pipelines: &activity,
        };
        let p = chain(serde_json::json!({"latency_ms": 5.0}));
        let input = || vec![x(&[[1.0, 1.0, 1.0, 1.0]])];
        let run = |req, mode| infer_as(&parts, TENANT, &p, req, input(), mode);
        let err = run(Requirements::default(), Mode::ONLINE)
            .await
            .err()
            .expect("dropped");
        assert!(
            matches!(&err, Error::Dropped(m) if m.contains("node 'a'")),
            "{err:?}"
        );
        assert!(plane.fake.workers[0].queries().is_empty());
        assert_eq!(
            activity.recent(TENANT, "p").drops,
            vec![("a".to_string(), 1)]
        );
        let usage = plane.usage.pending_rows();
        assert_eq!(usage.len(), 1, "{usage:?}");
        assert_eq!(
            (usage[0].variant.as_str(), usage[0].slo_missed),
            ("dropped@p.a", 1)
        );

        // A deadline it can make (the request's SLO over the pipeline's): it runs.
        let generous = Requirements {
            latency_ms: Some(1_000.0),
            ..Requirements::default()
        };
        let out = run(generous, Mode::ONLINE).await.expect("answered");
        assert_eq!(values(&out.outputs[0]), vec![3.0; 4]);
        assert_eq!(
            activity.recent(TENANT, "p").drops,
            vec![("a".to_string(), 1)]
        );
    }
}
