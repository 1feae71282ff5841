//! Planning a registered pipeline: InferLine's planner ([`infaas_scheduler::pipeline::plan`])
//! over the profiled variants of every node's models, judged by the simulator's trace-driven
//! estimator (SIMULATED: a discrete-event replay of the planning trace through a centralised
//! batched queue per node, `infaas_sim::pipeline::TraceEstimator`). Applying a plan stores it
//! (queries then run each node on the plan's model) and loads the planned replicas.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use infaas_scheduler::pipeline::{self as planner, PlanNode, PlanOption, PlanProblem};
use serde::Deserialize;

use super::accuracy::{measure, Measurement};
use super::prepared::Prepared;
use super::registered::prepared;
use super::replicas::provision;
use super::validate::model_nodes;
use crate::error::Error;
use crate::platform::ControlPlane;
use infaas_core::stats::select_percentile;

/// Queries a switch must have seen before its measured branch probability is used.
const MIN_BRANCH_SAMPLES: u64 = 20;
/// Fewest arrivals a planning trace needs.
const MIN_TRACE_QUERIES: usize = 20;
/// Largest planning trace accepted, in queries.
const MAX_TRACE_QUERIES: usize = 2_000_000;

/// What to plan on.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PlanRequest {
    /// A workload generator (`infaas sim --generate` syntax), e.g.
    /// `poisson:rate=100,duration=600`.
    pub generate: Option<String>,
    /// A trace in the documented CSV format; every arrival counts as a pipeline query.
    pub trace_csv: Option<String>,
    /// Store the plan and load its replicas.
    #[serde(default)]
    pub apply: bool,
}

/// The planner's answer, as stored when applied and returned by the API: wire types.
pub use infaas_protocol::v1::{PlanReport, PlanTrace, PlannedNode};

/// The planning problem of a prepared pipeline, with the notes on what was assumed.
pub fn problem(
    state: &ControlPlane,
    tenant: &str,
    p: &Prepared,
) -> Result<(PlanProblem, Vec<usize>, Vec<String>), Error> {
    let spec = &p.pipeline.spec;
    let slo_ms = spec.slo.latency_ms.ok_or_else(|| {
        Error::Unprocessable(format!(
            "pipeline '{}' has no slo.latency_ms; a plan meets an end-to-end SLO",
            spec.name
        ))
    })?;
    let (nodes, parents) = model_nodes(spec, &p.order);
    let catalog = state.cluster.catalog();
    let mut notes = Vec::new();
    let mut plan_nodes = Vec::with_capacity(nodes.len());
    for (i, &k) in nodes.iter().enumerate() {
        let node = &spec.nodes[k];
        let models = &p.shapes[k].models;
        let mut groups: HashMap<(String, String), u32> = HashMap::new();
        let mut options = Vec::new();
        for served in catalog.variants() {
            let e = &served.entry;
            if e.tenant_id != tenant || !models.contains(&e.model) {
                continue;
            }
            let v = served.selector_entry(e.app.clone());
            if v.latency.is_empty() {
                continue;
            }
            // Variants of one file, hardware and threads differ only in max batch.
            let stem = v
                .name
                .rsplit_once(".b")
                .map_or(v.name.as_str(), |(s, _)| s)
                .to_string();
            let next = groups.len() as u32;
            let group = *groups.entry((v.model.clone(), stem)).or_insert(next);
            options.push(PlanOption { variant: v, group });
        }
        if options.is_empty() {
            return Err(Error::Unavailable(format!(
                "node '{}': no model it may run ({}) has profiled variants yet; retry when they are ready",
                node.name,
                models.join(", ")
            )));
        }
        options.sort_by(|a, b| a.variant.name.cmp(&b.variant.name));
        let branch_probability = match &node.when {
            None => 1.0,
            Some(_) => match state
                .pipelines
                .branch_probability(tenant, &spec.name, &node.name)
            {
                Some((prob, n)) if n >= MIN_BRANCH_SAMPLES => {
                    notes.push(format!(
                        "node '{}' runs for {:.1}% of the queries reaching it (measured on {n})",
                        node.name,
                        prob * 100.0
                    ));
                    prob
                }
                other => {
                    notes.push(format!(
                        "node '{}': its branch probability is not measured yet ({} queries seen, {MIN_BRANCH_SAMPLES} needed); planned as if it always ran",
                        node.name,
                        other.map_or(0, |(_, n)| n)
                    ));
                    1.0
                }
            },
        };
        plan_nodes.push(PlanNode {
            name: node.name.clone(),
            parents: parents[i].clone(),
            branch_probability,
            options,
        });
    }
    let mut problem = PlanProblem::new(plan_nodes, slo_ms);
    problem.percentile = spec.slo.percentile();
    problem.min_accuracy = spec.slo.min_accuracy;
    problem.max_cost_per_hour = spec.slo.max_cost_per_hour;
    problem.prices = *state.cluster.prices();
    Ok((problem, nodes, notes))
}

/// Measures, on the pipeline's validation set if it has one, the end-to-end accuracy of the
/// combinations of models the planner may choose, and gives them to `problem`.
async fn measure_accuracy(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    problem: &mut PlanProblem,
    nodes: &[usize],
) -> Result<Option<Measurement>, Error> {
    if prepared.pipeline.validation.is_none() {
        return Ok(None);
    }
    // Per node, its models and the best accuracy of their variants.
    let models: Vec<Vec<(String, f64)>> = problem
        .nodes
        .iter()
        .map(|n| {
            let mut best: BTreeMap<&str, f64> = BTreeMap::new();
            for o in &n.options {
                let a = best.entry(o.variant.model.as_str()).or_insert(0.0);
                *a = a.max(o.variant.accuracy);
            }
            best.into_iter().map(|(m, a)| (m.to_string(), a)).collect()
        })
        .collect();
    let m = measure(state, tenant, prepared, nodes, &models).await?;
    if let Some(m) = &m {
        problem.measured_accuracy = Some(m.accuracy.clone());
    }
    Ok(m)
}

/// The arrivals (ms from the first) of the planning trace, and its summary.
fn planning_trace(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
    req: &PlanRequest,
) -> Result<(Vec<f64>, String), Error> {
    let (mut arrivals, source) = match (&req.generate, &req.trace_csv) {
        (Some(_), Some(_)) => {
            return Err(Error::Invalid(
                "give a generator or a trace, not both".into(),
            ))
        }
        (Some(g), None) => {
            let gen: infaas_sim::generate::Generator = g
                .parse()
                .map_err(|e: infaas_sim::trace::TraceError| Error::Invalid(e.to_string()))?;
            let t = gen.generate();
            (
                t.arrivals.iter().map(|a| a.at_ms).collect::<Vec<f64>>(),
                format!("generated: {g}"),
            )
        }
        (None, Some(csv)) => {
            let t = infaas_sim::trace::Trace::parse_csv(csv, "the uploaded trace")
                .map_err(|e| Error::Invalid(e.to_string()))?;
            (
                t.arrivals.iter().map(|a| a.at_ms).collect(),
                "uploaded".to_string(),
            )
        }
        (None, None) => (
            state.pipelines.arrivals(tenant, name, 3_600_000.0),
            "recorded".to_string(),
        ),
    };
    if arrivals.len() < MIN_TRACE_QUERIES {
        return Err(Error::Unprocessable(format!(
            "the planning trace ({source}) has {} queries; at least {MIN_TRACE_QUERIES} are needed (query the pipeline first, or pass `generate` or `trace_csv`)",
            arrivals.len()
        )));
    }
    if arrivals.len() > MAX_TRACE_QUERIES {
        return Err(Error::TooLarge(format!(
            "the planning trace has {} queries; at most {MAX_TRACE_QUERIES}",
            arrivals.len()
        )));
    }
    arrivals.sort_by(f64::total_cmp);
    let first = arrivals[0];
    for a in &mut arrivals {
        *a -= first;
    }
    Ok((arrivals, source))
}

/// Plans pipeline `name` of `tenant` (and applies the plan when asked).
pub async fn plan(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
    req: PlanRequest,
) -> Result<PlanReport, Error> {
    let prepared = prepared(state, tenant, name).await?;
    let (mut problem, nodes, mut notes) = problem(state, tenant, &prepared)?;
    let measurement = measure_accuracy(state, tenant, &prepared, &mut problem, &nodes).await?;
    let (arrivals, source) = planning_trace(state, tenant, name, &req)?;
    let queries = arrivals.len();
    let duration_s = arrivals.last().copied().unwrap_or(0.0) / 1e3;
    let started = Instant::now();
    // What queries spend outside the models on this server (dispatch, transfers, combiners),
    // measured on the pipeline's recent answers, goes into every simulated latency.
    let overhead = state.pipelines.overhead_samples(tenant, name);
    if overhead.is_empty() {
        notes.push("no query of the pipeline has been answered here yet: the estimate counts the models' time only (no dispatch overhead)".into());
    } else {
        let mut values = overhead.clone();
        let p50 = select_percentile(&mut values, 0.5).unwrap_or(0.0);
        let p99 = select_percentile(&mut values, 0.99).unwrap_or(0.0);
        notes.push(format!(
            "the estimate adds the overhead measured on {} answered queries beyond their models' time (p50 {p50:.3} ms, p99 {p99:.3} ms)",
            overhead.len()
        ));
    }
    let (problem, result, tuner) = tokio::task::spawn_blocking(move || {
        let mut estimator =
            infaas_sim::pipeline::TraceEstimator::new(arrivals.clone(), 1).with_overhead(&overhead);
        let result = planner::plan(&problem, &mut estimator);
        // The tuner's planned envelope is the planning trace's.
        let tuner = result
            .as_ref()
            .ok()
            .map(|p| planner::TunerConfig::from_plan(&problem, &p.configs, &arrivals));
        (problem, result, tuner)
    })
    .await
    .map_err(Error::internal)?;
    let planner_ms = started.elapsed().as_secs_f64() * 1e3;
    let plan = result.map_err(|e| {
        Error::Unprocessable(format!("no plan meets the pipeline's requirements: {e}"))
    })?;
    let reach = planner::reach_probabilities(&problem);
    let spec = &prepared.pipeline.spec;
    let measured_plan = problem.measured_accuracy.as_ref().is_some_and(|m| {
        let key: Vec<String> = plan.nodes.iter().map(|n| n.model.clone()).collect();
        m.table.contains_key(&key)
    });
    let accuracy_source = match &measurement {
        Some(m) if measured_plan => {
            notes.push(format!(
                "accuracy is measured on the pipeline's validation set ({} rows, output '{}'): {} combinations of models measured{}",
                m.rows,
                prepared.pipeline.validation.as_ref().map_or("", |v| v.output.as_str()),
                m.measured,
                if m.estimated > 0 {
                    format!(", {} left to the estimate", m.estimated)
                } else {
                    String::new()
                }
            ));
            notes.extend(m.failures.iter().map(|f| format!("not measured: {f}")));
            "measured on the pipeline's validation set"
        }
        _ => {
            if spec.nodes.iter().any(|n| n.when.is_some()) || nodes.len() > 1 {
                notes.push("accuracy is estimated: the product of the nodes' validation accuracies, each weighted by the share of queries reaching it (register a validation set for the pipeline to measure it)".into());
            }
            "estimated from the nodes' accuracies and branch probabilities"
        }
    };
    let report = PlanReport {
        nodes: plan
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| PlannedNode {
                name: n.name.clone(),
                variant: n.variant.clone(),
                model: n.model.clone(),
                hardware: n.hardware.as_str().to_string(),
                max_batch: n.max_batch,
                replicas: n.replicas,
                accuracy: n.accuracy,
                cost_per_hour: n.cost_per_hour,
                throughput_per_s: n.throughput_per_s,
                reach: reach.get(i).copied().unwrap_or(1.0),
                branch_probability: problem.nodes[i].branch_probability,
                predicted_p99_ms: plan
                    .estimate
                    .per_node_p99_ms
                    .get(i)
                    .copied()
                    .filter(|v| v.is_finite()),
            })
            .collect(),
        percentile: problem.percentile,
        slo_ms: problem.slo_ms,
        predicted_latency_ms: plan.estimate.latency_ms,
        predicted_p99_ms: plan.estimate.p99_ms,
        attainment: plan.estimate.attainment,
        accuracy: plan.accuracy,
        accuracy_source: accuracy_source.into(),
        cost_per_hour: plan.cost_per_hour,
        initial_cost_per_hour: plan.initial_cost_per_hour,
        service_time_ms: plan.service_time_ms,
        planner_ms,
        estimates: plan.estimates,
        trace: PlanTrace {
            source,
            queries,
            duration_s,
            mean_rate_per_s: if duration_s > 0.0 {
                queries as f64 / duration_s
            } else {
                0.0
            },
        },
        notes,
        applied: req.apply,
        planned_at_ms: infaas_core::time::now_ms(),
        tuner: tuner
            .map(|t| serde_json::to_value(t).map_err(Error::internal))
            .transpose()?,
    };
    if req.apply {
        apply(state, tenant, name, &report).await?;
        install_tuner(state, tenant, name, &report);
    }
    Ok(report)
}

/// Starts tuning a pipeline from its applied plan (no-op for a plan without a tuner).
pub fn install_tuner(state: &ControlPlane, tenant: &str, name: &str, report: &PlanReport) {
    let Some(stored) = &report.tuner else {
        return;
    };
    match serde_json::from_value::<planner::TunerConfig>(stored.clone()) {
        Ok(config) => {
            let variants = report.nodes.iter().map(|n| n.variant.clone()).collect();
            state
                .pipelines
                .tuners
                .install(tenant, name, planner::Tuner::new(config), variants);
        }
        Err(e) => {
            tracing::warn!(pipeline = %name, error = %e, "cannot read a plan's tuner configuration; the pipeline is not tuned")
        }
    }
}

/// Tunes again every pipeline with an applied plan (at the controller's start).
pub async fn resume_tuners(state: &ControlPlane) {
    let rows = match state.db.all_pipelines().await {
        Ok(rows) => rows,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the pipelines to resume their tuners");
            return;
        }
    };
    for row in rows {
        let Some(plan) = row.plan.as_deref() else {
            continue;
        };
        match serde_json::from_str::<PlanReport>(plan) {
            Ok(report) => install_tuner(state, &row.tenant_id, &row.name, &report),
            Err(e) => {
                tracing::warn!(pipeline = %row.name, error = %e, "cannot read a stored plan; its pipeline is not tuned")
            }
        }
    }
}

/// Stores a plan (queries then run each node on its model) and loads its replicas.
async fn apply(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
    report: &PlanReport,
) -> Result<(), Error> {
    let text = serde_json::to_string(report).map_err(Error::internal)?;
    state
        .db
        .set_pipeline_plan(tenant, name, Some(&text))
        .await?;
    state.pipelines.invalidate(tenant, name);
    for n in &report.nodes {
        provision(&state.cluster, tenant, &n.variant, n.replicas).await;
    }
    Ok(())
}
