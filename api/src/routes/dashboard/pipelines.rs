//! The dashboard's pipeline pages: the tenant's pipelines with the registration form (a JSON
//! or YAML document, through the code of `POST /v1/pipelines`), one pipeline's page (its DAG
//! drawn as SVG with the nodes' live figures, the end-to-end p99 against the SLO, attainment
//! per second and the applied plan), and deletion. Everything is read for the session's
//! tenant only.

use axum::extract::rejection::FormRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use infaas_control::pipelines::status::{NodeStatus, PipelineStatus};
use infaas_control::pipelines::{self, Pipeline};
use infaas_core::pipeline::{NodeKind, PipelineSpec};
use infaas_web::format;
use infaas_web::pipelines::{
    attainment_chart, condition_label, example_document, graph_svg, quality_charts, GraphNode,
    NodeRow, PipelinePage, PipelineRow, PipelinesPage, PlanNodeRow, PlanView, Switch,
};
use serde::Deserialize;

use super::forms::error_text;
use super::{render, PageResult, Session};
use crate::error::ApiError;
use crate::state::AppState;

/// Window of the "last minute" figures, ms.
const MINUTE_MS: f64 = 60_000.0;

fn opt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), format::millis)
}

fn per_hour(c: f64) -> String {
    format!("{}/h", format::dollars(c))
}

/// `100 ms at p99`, or `none`.
fn slo_text(spec: &PipelineSpec) -> String {
    let s = &spec.slo;
    let mut parts = Vec::new();
    if let Some(l) = s.latency_ms {
        parts.push(format!("{} at p{}", format::millis(l), s.percentile()));
    }
    if let Some(a) = s.min_accuracy {
        parts.push(format!("accuracy ≥ {}", format::accuracy(a)));
    }
    if let Some(c) = s.max_cost_per_hour {
        parts.push(format!("≤ {}", per_hour(c)));
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

fn list_row(state: &AppState, tenant: &str, p: &Pipeline) -> PipelineRow {
    let spec = &p.spec;
    let recent = state.pipelines.recent(tenant, &spec.name);
    PipelineRow {
        name: spec.name.clone(),
        description: spec.description.clone().unwrap_or_default(),
        nodes: spec
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        node_count: spec.nodes.len(),
        slo: slo_text(spec),
        planned: p.plan.is_some(),
        queries_last_minute: state
            .pipelines
            .arrivals(tenant, &spec.name, MINUTE_MS)
            .len()
            .max(recent.queries_last_minute),
        p99: opt_ms(recent.p99_ms),
    }
}

/// The list page with the form holding `document` and the submission's `error`, if any.
async fn list_page(
    state: &AppState,
    session: &Session,
    document: String,
    error: Option<String>,
) -> PageResult<PipelinesPage> {
    let tenant = session.tenant_id();
    let all = pipelines::list(state, tenant).await?;
    let apps: Vec<String> = state
        .db
        .list_apps(tenant)
        .await?
        .into_iter()
        .map(|(a, _)| a.name)
        .collect();
    Ok(PipelinesPage {
        layout: session.layout(state, "pipelines").await?,
        pipelines: all.iter().map(|p| list_row(state, tenant, p)).collect(),
        document,
        example: example_document(&apps),
        error,
    })
}

/// `GET /ui/pipelines`: the tenant's pipelines and the registration form.
pub async fn list(State(state): State<AppState>, session: Session) -> PageResult {
    let page = list_page(&state, &session, String::new(), None).await?;
    render(StatusCode::OK, &page)
}

/// Fields of the registration form.
#[derive(Deserialize)]
pub struct RegisterFields {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    document: String,
}

/// `POST /ui/pipelines`: registers a pipeline through the same code as `POST /v1/pipelines`,
/// then shows its page; a refused document shows the server's reason on the form (with the
/// status the API would answer), the document kept.
pub async fn register(
    State(state): State<AppState>,
    session: Session,
    form: Result<Form<RegisterFields>, FormRejection>,
) -> PageResult {
    let Form(fields) = form.map_err(|r| ApiError::BadRequest(r.body_text()))?;
    session.check_csrf(&state, &fields.csrf)?;
    let created = async {
        if fields.document.trim().is_empty() {
            return Err(ApiError::BadRequest(
                "paste a pipeline document (JSON or YAML)".into(),
            ));
        }
        let spec = pipelines::parse_document(fields.document.as_bytes())?;
        Ok::<_, ApiError>(pipelines::create(&state, session.tenant_id(), spec).await?)
    }
    .await;
    match created {
        Ok(p) => Ok(Redirect::to(&format!("/ui/pipelines/{}", p.spec.name)).into_response()),
        Err(e) => {
            let status = e.status();
            let page = list_page(&state, &session, fields.document, Some(error_text(&e))).await?;
            render(status, &page)
        }
    }
}

/// The variant the applied plan chose for `node`.
fn planned_variant(plan: Option<&serde_json::Value>, node: &str) -> Option<String> {
    plan?["nodes"]
        .as_array()?
        .iter()
        .find(|n| n["name"].as_str() == Some(node))?["variant"]
        .as_str()
        .map(str::to_string)
}

/// The nodes as the graph draws them, in dependency order: what the document says, with the
/// live figures when there are some.
fn graph_nodes(p: &Pipeline, status: Option<&PipelineStatus>) -> Vec<GraphNode> {
    let spec = &p.spec;
    let order = spec
        .check_structure()
        .unwrap_or_else(|_| (0..spec.nodes.len()).collect());
    let parents = spec.parents();
    order
        .iter()
        .map(|&k| {
            let n = &spec.nodes[k];
            let live = status.and_then(|s| s.nodes.iter().find(|x| x.name == n.name));
            let (kind, target) = match n.kind() {
                NodeKind::App(a) => ("app".to_string(), a.to_string()),
                NodeKind::Model(m) => ("model".to_string(), m.to_string()),
                NodeKind::Combine(c) => (c.as_str().to_string(), n.from.join(", ")),
            };
            let planned = live
                .and_then(|s| s.planned_variant.clone())
                .or_else(|| planned_variant(p.plan.as_ref(), &n.name));
            let last = live.and_then(|s| s.last_variant.clone());
            GraphNode {
                name: n.name.clone(),
                kind,
                target,
                parents: parents[k]
                    .iter()
                    .map(|&q| spec.nodes[q].name.clone())
                    .collect(),
                switch: n.when.as_ref().map(|c| Switch {
                    source: c.source.clone(),
                    condition: condition_label(c),
                    probability: live.and_then(|s| s.branch_probability),
                }),
                planned: planned.is_some(),
                variant: planned.or(last),
                replicas: live.map_or(0, |s| s.replicas),
                queued_rows: live.map_or(0, |s| s.queued_rows),
                p99_ms: live.and_then(|s| s.p99_ms),
                cost_per_hour: live.map_or(0.0, |s| s.cost_per_hour),
            }
        })
        .collect()
}

fn node_row(g: &GraphNode, spec: &PipelineSpec, live: Option<&NodeStatus>) -> NodeRow {
    let dash = || "–".to_string();
    let condition = spec
        .nodes
        .iter()
        .find(|n| n.name == g.name)
        .and_then(|n| n.when.as_ref())
        .map(|c| format!("when {}: {}", c.source, condition_label(c)))
        .unwrap_or_default();
    NodeRow {
        name: g.name.clone(),
        kind: g.kind.clone(),
        target: g.target.clone(),
        parents: if g.parents.is_empty() {
            "the request".into()
        } else {
            g.parents.join(", ")
        },
        condition,
        planned_variant: live
            .and_then(|s| s.planned_variant.clone())
            .or_else(|| g.planned.then(|| g.variant.clone()).flatten())
            .unwrap_or_else(dash),
        last_variant: live
            .and_then(|s| s.last_variant.clone())
            .unwrap_or_else(dash),
        replicas: g.replicas,
        queued_rows: g.queued_rows,
        runs_last_minute: live.map_or(0, |s| s.runs_last_minute),
        p99: opt_ms(g.p99_ms),
        branch: match (&g.switch, live.and_then(|s| s.branch_probability)) {
            (None, _) => dash(),
            (Some(_), None) => "no data yet".into(),
            (Some(_), Some(b)) => format::percent(b),
        },
        cost: if g.is_combiner() {
            dash()
        } else {
            per_hour(g.cost_per_hour)
        },
    }
}

/// The applied plan, read leniently (a field it lacks shows as a dash).
fn plan_view(plan: &serde_json::Value) -> PlanView {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::Null => "–".to_string(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    PlanView {
        predicted_p99: opt_ms(plan["predicted_p99_ms"].as_f64()),
        attainment: plan["attainment"]
            .as_f64()
            .map_or_else(|| "–".into(), format::percent),
        cost: plan["cost_per_hour"]
            .as_f64()
            .map_or_else(|| "–".into(), per_hour),
        accuracy: plan["accuracy"].as_f64().map_or_else(
            || "–".into(),
            |a| {
                let source = plan["accuracy_source"].as_str().unwrap_or("estimated");
                format!("{a:.4} ({source})")
            },
        ),
        nodes: plan["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| PlanNodeRow {
                name: text(&n["name"]),
                variant: text(&n["variant"]),
                max_batch: text(&n["max_batch"]),
                replicas: text(&n["replicas"]),
                cost: n["cost_per_hour"]
                    .as_f64()
                    .map_or_else(|| "–".into(), per_hour),
            })
            .collect(),
    }
}

/// `GET /ui/pipelines/{name}`: a pipeline's DAG with its live figures, SLO attainment over
/// time and applied plan (refreshed every few seconds).
pub async fn show(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
) -> PageResult {
    let tenant = session.tenant_id();
    let pipeline = pipelines::get(&state, tenant, &name).await?;
    // The live figures need the pipeline to still fit the registry; without them the graph,
    // document and plan still show.
    let (status, warning) = match pipelines::prepared(&state, tenant, &name).await {
        Ok(p) => (Some(pipelines::status::status(&state, tenant, &p)), None),
        Err(e) => (None, Some(ApiError::from(e).to_string())),
    };
    let graph = graph_nodes(&pipeline, status.as_ref());
    let spec = &pipeline.spec;
    let rows = graph
        .iter()
        .map(|g| {
            let live = status
                .as_ref()
                .and_then(|s| s.nodes.iter().find(|x| x.name == g.name));
            node_row(g, spec, live)
        })
        .collect();
    let recent = state.pipelines.recent(tenant, &name);
    let (p99_ms, queries, seconds, cost) = match &status {
        Some(s) => (
            s.p99_ms,
            s.queries_last_minute,
            s.attainment.clone(),
            Some(s.cost_per_hour),
        ),
        None => (
            recent.p99_ms,
            recent.queries_last_minute,
            recent.seconds.clone(),
            None,
        ),
    };
    let target = spec.slo.latency_ms.map(|_| spec.slo.percentile() / 100.0);
    let chart = attainment_chart(&seconds, target);
    let (quality, cost_series) = status.as_ref().map_or_else(
        || (recent.quality.clone(), recent.cost.clone()),
        |s| (s.quality.clone(), s.cost.clone()),
    );
    let charts = quality_charts(&quality, &cost_series);
    let charted: Vec<&(i64, u64, u64)> = match chart.minutes.first() {
        Some(&from) => seconds.iter().filter(|s| s.0 >= from).collect(),
        None => Vec::new(),
    };
    let (answered, within) = charted
        .iter()
        .fold((0u64, 0u64), |(n, ok), s| (n + s.1, ok + s.2));
    let page = PipelinePage {
        layout: session.layout(&state, "pipelines").await?,
        name: spec.name.clone(),
        description: spec.description.clone().unwrap_or_default(),
        graph: graph_svg(&graph),
        nodes: rows,
        queries_last_minute: queries,
        p99: opt_ms(p99_ms),
        slo: slo_text(spec),
        within_slo: match (p99_ms, spec.slo.latency_ms) {
            (Some(p), Some(l)) => Some(p <= l),
            _ => None,
        },
        attainment: if answered == 0 {
            "–".into()
        } else {
            format::percent(within as f64 / answered as f64)
        },
        cost: cost.map_or_else(|| "–".into(), per_hour),
        attainment_chart: chart.to_svg(),
        accuracy_chart: charts.accuracy.to_svg(),
        load_chart: charts.load.to_svg(),
        cost_chart: charts.cost.to_svg(),
        forecast: status
            .as_ref()
            .and_then(|s| s.forecast.as_ref())
            .map(super::pages::forecast_panel),
        overload: status.as_ref().and_then(|s| s.overload.as_ref()).map(|o| {
            format!(
                "{}: relative accuracy {:.3}, planned for {:.1} q/s, {} of the demand served",
                o.mode.replace('_', " "),
                o.relative_accuracy,
                o.demand_qps,
                format::percent(o.served_fraction)
            )
        }),
        plan: pipeline.plan.as_ref().map(plan_view),
        validation: pipeline
            .validation
            .as_ref()
            .map(|v| format!("{} rows graded on output '{}'", v.rows, v.output)),
        warning,
        document: serde_json::to_string_pretty(spec).map_err(ApiError::internal)?,
    };
    render(StatusCode::OK, &page)
}

#[derive(Deserialize)]
pub struct DeleteFields {
    #[serde(default)]
    csrf: String,
}

/// `POST /ui/pipelines/{name}/delete`: deletes a pipeline (its applications and models
/// stay), back to the list.
pub async fn delete(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
    form: Result<Form<DeleteFields>, FormRejection>,
) -> PageResult {
    let Form(fields) = form.map_err(|r| ApiError::BadRequest(r.body_text()))?;
    session.check_csrf(&state, &fields.csrf)?;
    pipelines::delete(&state, session.tenant_id(), &name).await?;
    Ok(Redirect::to("/ui/pipelines").into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn cascade(plan: Option<serde_json::Value>) -> Pipeline {
        Pipeline {
            id: "id".into(),
            spec: serde_json::from_value(serde_json::json!({
                "name": "cascade",
                "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
                "nodes": [
                    {"name": "answer", "combine": "first", "from": ["expert.probabilities", "cheap.probabilities"]},
                    {"name": "expert", "model": "big", "inputs": {"input": "image"},
                     "when": {"source": "cheap.probabilities", "top_probability_below": 0.9}},
                    {"name": "cheap", "app": "small", "inputs": {"input": "image"}}
                ],
                "outputs": {"probabilities": "answer.output"},
                "slo": {"latency_ms": 50}
            }))
            .unwrap(),
            plan,
            validation: None,
            created_at_ms: 0,
            updated_at_ms: 0,
        }
    }

    #[test]
    fn the_graph_follows_the_document_in_dependency_order() {
        let plan = serde_json::json!({
            "nodes": [{"name": "expert", "variant": "big.fp32.cpu.t1", "max_batch": 8, "replicas": 2, "cost_per_hour": 0.5}],
            "predicted_p99_ms": 30.0, "attainment": 0.995, "cost_per_hour": 0.5
        });
        let p = cascade(Some(plan.clone()));
        let g = graph_nodes(&p, None);
        let names: Vec<&str> = g.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["cheap", "expert", "answer"]);
        assert_eq!(g[1].parents, vec!["cheap"]);
        assert_eq!(g[1].kind, "model");
        assert_eq!(g[1].variant.as_deref(), Some("big.fp32.cpu.t1"));
        assert!(g[1].planned);
        let s = g[1].switch.as_ref().unwrap();
        assert_eq!(
            (s.source.as_str(), s.condition.as_str()),
            ("cheap.probabilities", "top p < 0.9")
        );
        assert_eq!(g[2].kind, "first");
        assert_eq!(g[2].parents, vec!["expert", "cheap"]);
        assert!(g[0].variant.is_none() && !g[0].planned);

        let row = node_row(&g[1], &p.spec, None);
        assert_eq!(row.condition, "when cheap.probabilities: top p < 0.9");
        assert_eq!(row.planned_variant, "big.fp32.cpu.t1");
        assert_eq!(row.branch, "no data yet");
        assert_eq!(node_row(&g[0], &p.spec, None).parents, "the request");

        let v = plan_view(&plan);
        assert_eq!(v.predicted_p99, "30.00 ms");
        assert_eq!(v.attainment, "99.5 %");
        assert_eq!(v.nodes[0].max_batch, "8");
        assert_eq!(v.nodes[0].cost, "$0.5000/h");
        assert_eq!(slo_text(&p.spec), "50.00 ms at p99");
        let lenient = plan_view(&serde_json::json!({"nodes": [{}]}));
        assert_eq!(
            (lenient.cost.as_str(), lenient.nodes[0].variant.as_str()),
            ("–", "–")
        );
    }
}
