//! The read-only pages: applications, one application, models, one model, workers,
//! scaling events and offline jobs. Everything is read for the session's tenant only.

use std::collections::HashMap;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use infaas_core::time::now_ms;
use infaas_core::{Model, Variant};
use infaas_protocol::v1::PrunedVariantView;
use infaas_web::dashboard::{
    percent_of, AppPage, AppsPage, InstanceRef, InstanceRow, JobForm, JobRow, JobsPage,
    LatencyCell, LoadingRow, ModelPage, ModelRow, ModelsPage, ReplicaRow, ScalingPage, ScalingRow,
    TryForm, TryResult, VariantRow, WorkerRow, WorkersPage,
};
use infaas_web::format;

use super::report::{self, WINDOW_MINUTES};
use super::{render, PageResult, Session};
use crate::error::ApiError;
use crate::state::AppState;

/// How many scaling events and jobs the pages list.
const LIST_LIMIT: i64 = 200;

/// A model with its variants.
struct ModelWithVariants {
    model: Model,
    variants: Vec<Variant>,
}

async fn models_of(
    state: &AppState,
    tenant_id: &str,
    app: Option<&str>,
) -> PageResult<Vec<ModelWithVariants>> {
    let mut out = Vec::new();
    for model in state.db.list_models(tenant_id, app).await? {
        let variants = state.db.list_variants(&model.id).await?;
        out.push(ModelWithVariants { model, variants });
    }
    Ok(out)
}

fn model_row(m: &ModelWithVariants) -> ModelRow {
    let best = m
        .variants
        .iter()
        .filter_map(|v| v.accuracy)
        .reduce(f64::max);
    ModelRow {
        name: m.model.name.clone(),
        app: m.model.app.clone(),
        status: m.model.status.as_str().into(),
        progress_pct: (m.model.progress.clamp(0.0, 1.0) * 100.0).round() as u32,
        detail: m.model.progress_detail.clone().unwrap_or_default(),
        error: m.model.error.clone(),
        variants: m.variants.len(),
        accuracy: best.map_or_else(|| "–".into(), format::accuracy),
    }
}

fn accuracy_by_variant(models: &[ModelWithVariants]) -> HashMap<String, f64> {
    models
        .iter()
        .flat_map(|m| &m.variants)
        .filter_map(|v| v.accuracy.map(|a| (v.name.clone(), a)))
        .collect()
}

/// Current usage rows are in the database before a page reads them.
async fn flushed(state: &AppState) {
    state.usage.flush(&state.db).await;
}

/// `GET /ui/apps`: applications with their figures, and the tenant's cost over time.
pub async fn apps(State(state): State<AppState>, session: Session) -> PageResult {
    let tenant = session.tenant_id();
    flushed(&state).await;
    let now = now_ms();
    let minutes = report::window(now, WINDOW_MINUTES);
    let since = minutes.first().copied().unwrap_or(now);
    let apps = state.db.list_apps(tenant).await?;
    let usage = state.db.tenant_usage(tenant, since).await?;
    let models = models_of(&state, tenant, None).await?;
    let accuracy = accuracy_by_variant(&models);
    let rows = apps
        .iter()
        .map(|(app, model_names)| {
            let app_rows: Vec<_> = usage
                .iter()
                .filter(|r| r.app == app.name)
                .cloned()
                .collect();
            report::summary(
                &app.name,
                model_names.len(),
                &app_rows,
                &accuracy,
                WINDOW_MINUTES,
            )
        })
        .collect();
    render(
        StatusCode::OK,
        &AppsPage {
            layout: session.layout(&state, "apps").await?,
            window_minutes: WINDOW_MINUTES,
            apps: rows,
            cost_chart: report::cost_chart(&usage, &minutes).to_svg(),
        },
    )
}

/// The example inputs of the "try it" form: a zero tensor of one row for each input of
/// the application's first ready model (empty when there is none or its shape is unknown).
fn example_inputs(models: &[ModelWithVariants]) -> String {
    let Some(m) = models
        .iter()
        .find(|m| m.model.status == infaas_core::ModelStatus::Ready)
        .or_else(|| models.first())
    else {
        return String::new();
    };
    let inputs = infaas_control::cluster::schema::inputs_of(m.model.signature.as_ref());
    // Written by hand to keep the fields in the order people read them (data last).
    let tensors: Option<Vec<String>> = inputs
        .iter()
        .map(|i| {
            let features: usize = i
                .features
                .iter()
                .map(|&d| usize::try_from(d).ok().filter(|&d| d > 0))
                .product::<Option<usize>>()?;
            if features > 4096 {
                return None;
            }
            let zero = if i.datatype.starts_with("FP") {
                "0.0"
            } else {
                "0"
            };
            let shape: Vec<String> = std::iter::once(1)
                .chain(i.features.iter().copied())
                .map(|d| d.to_string())
                .collect();
            Some(format!(
                r#"{{"name": {}, "shape": [{}], "datatype": {}, "data": [{}]}}"#,
                serde_json::Value::from(i.name.as_str()),
                shape.join(", "),
                serde_json::Value::from(i.datatype.as_str()),
                vec![zero; features].join(", ")
            ))
        })
        .collect();
    match tensors {
        Some(t) if !t.is_empty() => format!("[{}]", t.join(",\n ")),
        _ => String::new(),
    }
}

/// Everything the application page shows besides the "try it" answer.
pub async fn app_page(
    state: &AppState,
    session: &Session,
    app: &str,
    form: Option<TryForm>,
    result: Option<TryResult>,
    error: Option<String>,
) -> PageResult<AppPage> {
    let tenant = session.tenant_id();
    let known = state.db.list_apps(tenant).await?;
    if !known.iter().any(|(a, _)| a.name == app) {
        return Err(ApiError::NotFound(format!("application '{app}' not found")).into());
    }
    flushed(state).await;
    let now = now_ms();
    let minutes = report::window(now, WINDOW_MINUTES);
    let since = minutes.first().copied().unwrap_or(now);
    let rows = state.db.usage(tenant, app, since).await?;
    let models = models_of(state, tenant, Some(app)).await?;
    let accuracy = accuracy_by_variant(&models);
    let (latency, throughput, cost) = report::charts(&rows, &minutes);
    let form = form.unwrap_or_else(|| TryForm {
        inputs: example_inputs(&models),
        latency_ms: String::new(),
        min_accuracy: String::new(),
    });
    Ok(AppPage {
        layout: session.layout(state, "apps").await?,
        window_minutes: WINDOW_MINUTES,
        summary: report::summary(app, models.len(), &rows, &accuracy, WINDOW_MINUTES),
        latency_chart: latency.to_svg(),
        throughput_chart: throughput.to_svg(),
        cost_chart: cost.to_svg(),
        forecast: forecast_panel(&crate::routes::cluster::forecast_view(state, tenant, app)),
        variants: report::by_variant(&rows),
        models: models.iter().map(model_row).collect(),
        form,
        result,
        error,
    })
}

/// `GET /ui/apps/{app}`: an application's figures, charts, variants, models and the
/// "try it" form.
pub async fn app(
    State(state): State<AppState>,
    session: Session,
    Path(app): Path<String>,
) -> PageResult {
    let page = app_page(&state, &session, &app, None, None, None).await?;
    render(StatusCode::OK, &page)
}

/// `GET /ui/models`: the tenant's models with their registration progress.
pub async fn models(State(state): State<AppState>, session: Session) -> PageResult {
    let models = models_of(&state, session.tenant_id(), None).await?;
    render(
        StatusCode::OK,
        &ModelsPage {
            layout: session.layout(&state, "models").await?,
            models: models.iter().map(model_row).collect(),
        },
    )
}

/// Where each variant of the set is loaded: variant id → (worker name, state).
fn instances_of(state: &AppState, variants: &[Variant]) -> HashMap<String, Vec<InstanceRef>> {
    let ids: std::collections::HashSet<&str> = variants.iter().map(|v| v.id.as_str()).collect();
    let mut out: HashMap<String, Vec<InstanceRef>> = HashMap::new();
    let mut workers = state.cluster.workers_view();
    workers.sort_by(|a, b| a.0.worker.name.cmp(&b.0.worker.name));
    for (beat, alive, _) in workers {
        for i in beat
            .instances
            .iter()
            .filter(|i| ids.contains(i.variant_id.as_str()))
        {
            let s = if alive {
                state
                    .cluster
                    .instance_state(&beat.worker.id, &i.variant_id)
                    .as_str()
                    .to_string()
            } else {
                "inactive".to_string()
            };
            out.entry(i.variant_id.clone())
                .or_default()
                .push(InstanceRef {
                    worker: beat.worker.name.clone(),
                    state: s,
                });
        }
    }
    out
}

fn signature_lines(signature: Option<&serde_json::Value>) -> Vec<String> {
    let Some(sig) = signature else {
        return Vec::new();
    };
    let mut lines = Vec::new();
    for (kind, key) in [("input", "inputs"), ("output", "outputs")] {
        for t in sig[key].as_array().into_iter().flatten() {
            lines.push(format!(
                "{kind} {} {} {}",
                t["name"].as_str().unwrap_or("?"),
                t["datatype"].as_str().unwrap_or("?"),
                t["shape"]
            ));
        }
    }
    lines
}

/// `GET /ui/models/{name}`: a model's registration progress, signature and variants with
/// their profiles and instances.
pub async fn model(
    State(state): State<AppState>,
    session: Session,
    Path(name): Path<String>,
) -> PageResult {
    let model = state.db.get_model(session.tenant_id(), &name).await?;
    let variants = state.db.list_variants(&model.id).await?;
    let pruned: Vec<PrunedVariantView> = state
        .db
        .list_pruned_variants(&model.id)
        .await?
        .into_iter()
        .map(crate::routes::models::pruned_view)
        .collect();
    let kept_files: Vec<&str> = variants.iter().map(|v| v.file_kind.as_str()).collect();
    let pruned = PrunedVariantView::summary(&pruned, &kept_files);
    let mut instances = instances_of(&state, &variants);
    let m = ModelWithVariants { model, variants };
    let rows = m
        .variants
        .iter()
        .map(|v| VariantRow {
            name: v.name.clone(),
            precision: format!("{} ({})", v.file_kind.precision(), v.file_kind.as_str()),
            hardware: v.hardware.as_str().into(),
            threads: v.threads,
            max_batch: v.max_batch,
            status: v.status.clone(),
            accuracy: v.accuracy.map_or_else(|| "–".into(), format::accuracy),
            load: v.load_ms.map_or_else(|| "–".into(), format::millis),
            memory: v.memory_bytes.map_or_else(|| "–".into(), format::bytes),
            latency: v
                .latency
                .iter()
                .map(|l| LatencyCell {
                    batch: l.batch,
                    mean: format::millis(l.mean_ms),
                    p99: format::millis(l.p99_ms),
                })
                .collect(),
            instances: instances.remove(&v.id).unwrap_or_default(),
        })
        .collect();
    render(
        StatusCode::OK,
        &ModelPage {
            layout: session.layout(&state, "models").await?,
            model: model_row(&m),
            size: format::bytes(m.model.size_bytes),
            sha256: m.model.sha256.clone(),
            signature: signature_lines(m.model.signature.as_ref()),
            created: format::datetime(m.model.created_at_ms),
            variants: rows,
            pruned,
        },
    )
}

/// `GET /ui/workers`: workers with hardware, utilisation and the tenant's instances.
pub async fn workers(State(state): State<AppState>, session: Session) -> PageResult {
    let workers = crate::routes::cluster::worker_views(&state, session.tenant_id())
        .into_iter()
        .map(|w| WorkerRow {
            name: w.name,
            id: w.id,
            alive: w.alive,
            hardware: w
                .hardware
                .iter()
                .map(|h| match w.gpus.first() {
                    Some(g) if h == "gpu" && g.simulated => "gpu (simulated)".to_string(),
                    _ => h.clone(),
                })
                .collect::<Vec<_>>()
                .join(", "),
            cores: w.cores,
            threads: format!("{} / {}", w.threads_used, w.thread_budget),
            busy_threads: format!("{} / {}", w.busy_threads, w.cores),
            memory: format!(
                "{} / {}",
                format::bytes(w.memory_used_bytes as i64),
                format::bytes(w.memory_budget_bytes as i64)
            ),
            utilisation: format::percent(w.utilisation),
            heartbeat: format!("{:.1} s ago", w.last_heartbeat_ms_ago as f64 / 1000.0),
            instances: w
                .instances
                .into_iter()
                .map(|i| InstanceRow {
                    variant: i.variant,
                    state: i.state,
                    threads: i.threads,
                    max_batch: i.max_batch,
                    queue_rows: i.queue_rows,
                    qps: format!("{:.1}", i.qps),
                    requests: i.requests_total,
                    p50: format::millis(i.latency_p50_ms),
                    p99: format::millis(i.latency_p99_ms),
                    run_p50: format::millis(i.exec_p50_ms),
                    run_p99: format::millis(i.exec_p99_ms),
                })
                .collect(),
            loading: w
                .loading
                .into_iter()
                .map(|l| LoadingRow {
                    variant: l.variant,
                    since: format!("{:.1} s", l.started_ms_ago as f64 / 1000.0),
                    waiting_rows: l.waiting_rows,
                })
                .collect(),
        })
        .collect();
    let cluster = crate::routes::cluster::cluster_status(&state).await?;
    render(
        StatusCode::OK,
        &WorkersPage {
            layout: session.layout(&state, "workers").await?,
            workers,
            replicas: cluster
                .replicas
                .into_iter()
                .map(|r| ReplicaRow {
                    this: r.id == cluster.replica,
                    up: format::elapsed(r.seen_ms - r.started_ms),
                    id: r.id,
                    address: r.address,
                    leader: r.leader,
                })
                .collect(),
            lease_token: cluster.leader.token,
        },
    )
}

fn per_second(cost: Option<f64>) -> String {
    cost.map_or_else(|| "–".into(), |c| format!("{}/s", format::dollars(c)))
}

/// `GET /ui/scaling`: the tenant's scaling events, newest first.
pub async fn scaling(State(state): State<AppState>, session: Session) -> PageResult {
    let events = state
        .db
        .scaling_events(session.tenant_id(), LIST_LIMIT)
        .await?
        .into_iter()
        .map(|e| ScalingRow {
            at: format::datetime(e.created_at_ms),
            app: e.app.unwrap_or_default(),
            variant: e.variant.unwrap_or_default(),
            worker: e.worker_id.unwrap_or_default(),
            action: e.action,
            reason: e.reason,
            cost_before: per_second(e.cost_before_per_s),
            cost_after: per_second(e.cost_after_per_s),
        })
        .collect();
    render(
        StatusCode::OK,
        &ScalingPage {
            layout: session.layout(&state, "scaling").await?,
            events,
        },
    )
}

/// `GET /ui/jobs`: the tenant's offline jobs with their progress, newest first, and the
/// form that submits one.
pub async fn jobs(State(state): State<AppState>, session: Session) -> PageResult {
    let page = jobs_page(&state, &session, JobForm::default(), None).await?;
    render(StatusCode::OK, &page)
}

/// The jobs page with `form` filled in and the submission's `error`, if any.
pub(super) async fn jobs_page(
    state: &AppState,
    session: &Session,
    form: JobForm,
    error: Option<String>,
) -> PageResult<JobsPage> {
    let tenant = session.tenant_id();
    let jobs = state
        .db
        .job_summaries(tenant, LIST_LIMIT)
        .await?
        .into_iter()
        .map(|j| JobRow {
            progress_pct: percent_of(j.items_done, j.items_total),
            target: match (j.app, j.model) {
                (_, Some(m)) => format!("model {m}"),
                (Some(a), None) => format!("application {a}"),
                (None, None) => "–".into(),
            },
            id: j.id,
            state: j.state,
            items_done: j.items_done,
            items_total: j.items_total,
            error: j.error,
            created: format::datetime(j.created_at_ms),
        })
        .collect();
    let apps = state.db.list_apps(tenant).await?;
    let models = apps.iter().flat_map(|(_, m)| m.iter().cloned()).collect();
    Ok(JobsPage {
        layout: session.layout(state, "jobs").await?,
        jobs,
        form,
        error,
        apps: apps.into_iter().map(|(a, _)| a.name).collect(),
        models,
    })
}

/// The dashboard's forecast panel of an application's or a pipeline's arrival rate.
pub(crate) fn forecast_panel(
    f: &infaas_control::forecasts::ForecastView,
) -> infaas_web::dashboard::ForecastPanel {
    infaas_web::dashboard::forecast_panel(
        &f.model,
        &f.observed,
        &f.predicted_1s,
        &f.predicted_10s,
        f.max_next_10s,
        f.mape_1s,
        f.mape_10s,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn example_inputs_parse_and_fit_the_signature() {
        let model = |signature: serde_json::Value| ModelWithVariants {
            model: Model {
                id: "id".into(),
                tenant_id: "t".into(),
                app_id: "a".into(),
                app: "app".into(),
                name: "m".into(),
                task: "classification".into(),
                status: infaas_core::ModelStatus::Ready,
                error: None,
                progress: 1.0,
                progress_detail: None,
                source_key: String::new(),
                validation_key: String::new(),
                size_bytes: 0,
                sha256: String::new(),
                declared: Default::default(),
                signature: Some(signature),
                created_at_ms: 0,
                updated_at_ms: 0,
            },
            variants: vec![],
        };
        let two = model(serde_json::json!({"inputs": [
            {"name": "left", "datatype": "FP32", "shape": [-1, 3]},
            {"name": "ids", "datatype": "INT64", "shape": [-1, 2]},
        ]}));
        let text = example_inputs(&[two]);
        assert!(
            text.starts_with(r#"[{"name": "left", "shape": [1, 3]"#),
            "{text}"
        );
        let parsed: Vec<infaas_protocol::JsonTensor> = serde_json::from_str(&text).unwrap();
        let tensors: Vec<_> = parsed
            .iter()
            .map(|t| infaas_protocol::tensor_from_json(t).unwrap())
            .collect();
        assert_eq!(tensors[0].shape, vec![1, 3]);
        assert_eq!(tensors[1].shape, vec![1, 2]);
        assert_eq!(tensors[1].dtype().as_str(), "INT64");
        // An input of unknown size gets no example.
        let open = model(serde_json::json!({"inputs": [
            {"name": "x", "datatype": "FP32", "shape": [-1, -1]},
        ]}));
        assert_eq!(example_inputs(&[open]), "");
    }

    #[test]
    fn signatures_read_one_line_per_tensor() {
        let sig = serde_json::json!({
            "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 64]}],
            "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
        });
        assert_eq!(
            signature_lines(Some(&sig)),
            vec!["input input FP32 [-1,64]", "output label INT64 [-1]"]
        );
        assert!(signature_lines(None).is_empty());
    }
}
