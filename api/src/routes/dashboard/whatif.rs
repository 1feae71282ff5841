//! The dashboard's what-if pages: the tenant's runs with their progress and the form that
//! starts one (recorded traffic, a generator or a CSV trace pasted or uploaded; policies;
//! the simulated cluster), a run's page (progress per policy, then a table per policy and the
//! plot), and deletion. The form goes through the code of `POST /v1/whatif`.

use axum::extract::multipart::{Field, MultipartRejection};
use axum::extract::rejection::FormRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use infaas_control::whatif;
use infaas_protocol::v1::{RecordedTrace, TraceSource, WhatIfRequest, WhatIfRun};
use infaas_web::format;
use infaas_web::whatif::{
    charts, AppRow, Figure, PolicyChoice, PolicyRow, ProgressRow, WhatIfForm, WhatIfPage,
    WhatIfRow, WhatIfRunPage,
};
use serde::Deserialize;

use super::forms::{checked_multipart, error_text};
use super::{render, PageResult, Session};
use crate::error::ApiError;
use crate::routes::whatif::plot_lines;
use crate::state::AppState;
use crate::uploads::{multipart_error, text};

fn row(r: &WhatIfRun) -> WhatIfRow {
    let (done, total) = r
        .progress
        .iter()
        .fold((0, 0), |(d, t), p| (d + p.done, t + p.total));
    WhatIfRow {
        id: r.id.clone(),
        status: r.status.clone(),
        trace: r.trace.description.clone(),
        queries: r.trace.queries,
        policies: r.policies.join(", "),
        progress_pct: infaas_web::dashboard::percent_of(
            i64::try_from(done).unwrap_or(i64::MAX),
            i64::try_from(total).unwrap_or(i64::MAX),
        ),
        error: r.error.clone(),
        created: format::datetime(r.created_at_ms),
    }
}

/// The runs page with `form` filled in and the submission's `error`, if any.
async fn runs_page(
    state: &AppState,
    session: &Session,
    form: WhatIfForm,
    checked: &[String],
    error: Option<String>,
) -> PageResult<WhatIfPage> {
    let tenant = session.tenant_id();
    let runs = whatif::list(state, tenant).await?;
    let apps = state.db.list_apps(tenant).await?;
    Ok(WhatIfPage {
        layout: session.layout(state, "whatif").await?,
        runs: runs.iter().map(row).collect(),
        form,
        policies: whatif::POLICIES
            .iter()
            .map(|p| PolicyChoice {
                name: p.to_string(),
                checked: checked.iter().any(|c| c == p),
            })
            .collect(),
        apps: apps.into_iter().map(|(a, _)| a.name).collect(),
        horizon_minutes: state.traffic.horizon_minutes(),
        error,
    })
}

/// `GET /ui/whatif`: the tenant's runs, newest first, and the form.
pub async fn runs(State(state): State<AppState>, session: Session) -> PageResult {
    let form = WhatIfForm {
        source: "recorded".into(),
        minutes: "10".into(),
        ..WhatIfForm::default()
    };
    let checked = ["static_peak".to_string(), "infaas_greedy".to_string()];
    let page = runs_page(&state, &session, form, &checked, None).await?;
    render(StatusCode::OK, &page)
}

/// `GET /ui/whatif/{id}`: a run, refreshed while it runs.
pub async fn run(
    State(state): State<AppState>,
    session: Session,
    Path(id): Path<String>,
) -> PageResult {
    let run = whatif::get(&state, session.tenant_id(), &id).await?;
    let results = run.results.as_deref().unwrap_or_default();
    let opt_ms = |v: Option<f64>| v.map_or_else(|| "–".into(), format::millis);
    let opt_acc = |v: Option<f64>| v.map_or_else(|| "–".into(), format::accuracy);
    let c = &run.cluster;
    let page = WhatIfRunPage {
        layout: session.layout(&state, "whatif").await?,
        run: row(&run),
        apps: run.trace.apps.join(", "),
        duration: format!("{:.1} s", run.trace.duration_s),
        cluster: format!(
            "{} CPU + {} GPU workers, {} cores each, slack {}, {} variants",
            c.cpu_workers, c.gpu_workers, c.cpu_cores, c.slack, c.variants
        ),
        progress: run
            .progress
            .iter()
            .map(|p| ProgressRow {
                policy: p.policy.clone(),
                done: p.done,
                total: p.total,
                pct: infaas_web::dashboard::percent_of(p.done as i64, p.total as i64),
            })
            .collect(),
        results: results
            .iter()
            .map(|r| {
                let s = &r.summary;
                PolicyRow {
                    policy: r.policy.clone(),
                    queries: s.queries,
                    cost: format::dollars(s.cost_usd),
                    attainment: format::percent(s.slo_attainment),
                    p99: opt_ms(s.p99_ms),
                    accuracy: opt_acc(s.mean_accuracy),
                    dropped: s.dropped,
                    actions: s.actions,
                    apps: r
                        .apps
                        .iter()
                        .map(|a| AppRow {
                            app: a.app.clone(),
                            queries: a.queries,
                            attainment: format::percent(a.slo_attainment),
                            p99: opt_ms(a.p99_ms),
                            accuracy: opt_acc(a.mean_accuracy),
                            dropped: a.dropped,
                        })
                        .collect(),
                }
            })
            .collect(),
        charts: if results.is_empty() {
            Vec::new()
        } else {
            charts(&plot_lines(results))
                .iter()
                .map(|c| Figure {
                    caption: c.title.clone(),
                    svg: c.to_svg(),
                })
                .collect()
        },
    };
    render(StatusCode::OK, &page)
}

/// An optional count field: empty is `None`.
fn count(field: &str, text: &str) -> Result<Option<u32>, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse()
        .map(Some)
        .map_err(|_| ApiError::BadRequest(format!("{field} must be a whole number, not '{text}'")))
}

/// A CSV trace field (pasted or uploaded), read up to the CSV limit.
async fn csv_field(mut field: Field<'_>, limit: u64) -> Result<String, ApiError> {
    let mut bytes = Vec::new();
    while let Some(chunk) = field.chunk().await.map_err(multipart_error)? {
        if (bytes.len() + chunk.len()) as u64 > limit {
            return Err(ApiError::PayloadTooLarge(format!(
                "the CSV trace is over the limit of {limit} bytes (whatif.max_csv_bytes)"
            )));
        }
        bytes.extend_from_slice(&chunk);
    }
    String::from_utf8(bytes)
        .map_err(|_| ApiError::BadRequest("the CSV trace is not UTF-8 text".into()))
}

/// The form's fields as the browser sent them (after the anti-forgery token).
async fn read_form(
    state: &AppState,
    mut multipart: Multipart,
    form: &mut WhatIfForm,
    checked: &mut Vec<String>,
) -> Result<(), ApiError> {
    let limit = state.config.whatif.max_csv_bytes;
    while let Some(field) = multipart.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "source" => form.source = text(field, &name).await?,
            "app" => form.app = text(field, &name).await?,
            "minutes" => form.minutes = text(field, &name).await?,
            "spec" => form.spec = text(field, &name).await?,
            "csv" => form.csv = csv_field(field, limit).await?,
            "csv_file" => {
                let file = csv_field(field, limit).await?;
                // A file wins over the box; an empty file input sends no bytes.
                if !file.trim().is_empty() {
                    form.csv = file;
                }
            }
            "policy" => checked.push(text(field, &name).await?),
            "cpu_workers" => form.cpu_workers = text(field, &name).await?,
            "cpu_cores" => form.cpu_cores = text(field, &name).await?,
            "gpu_workers" => form.gpu_workers = text(field, &name).await?,
            "max_cpu_workers" => form.max_cpu_workers = text(field, &name).await?,
            other => {
                return Err(ApiError::BadRequest(format!(
                    "unknown field '{other}' in the what-if form"
                )))
            }
        }
    }
    Ok(())
}

/// The request a filled-in form makes.
fn request(form: &WhatIfForm, checked: &[String]) -> Result<WhatIfRequest, ApiError> {
    let trace = match form.source.as_str() {
        "recorded" => TraceSource::Recorded(RecordedTrace {
            app: Some(form.app.clone()).filter(|a| !a.is_empty()),
            minutes: count("minutes", &form.minutes)?.unwrap_or(10),
        }),
        "generate" => TraceSource::Generate(form.spec.trim().to_string()),
        "csv" => TraceSource::Csv(form.csv.clone()),
        other => {
            return Err(ApiError::BadRequest(format!(
                "pick a trace: recorded traffic, a generator or a CSV trace (not '{other}')"
            )))
        }
    };
    Ok(WhatIfRequest {
        trace,
        policies: checked.to_vec(),
        cpu_workers: count("CPU workers", &form.cpu_workers)?,
        cpu_cores: count("cores per worker", &form.cpu_cores)?,
        gpu_workers: count("GPU workers", &form.gpu_workers)?,
        slack: None,
        max_cpu_workers: count("most CPU workers", &form.max_cpu_workers)?,
        max_gpu_workers: None,
        worker_start_s: None,
        request_overhead_ms: None,
        request_cpu_ms: None,
        cold_start: None,
    })
}

/// `POST /ui/whatif`: starts a run through the same code as `POST /v1/whatif`, then shows
/// its page; a refused form shows why, with its fields kept.
pub async fn start(
    State(state): State<AppState>,
    session: Session,
    multipart: Result<Multipart, MultipartRejection>,
) -> PageResult {
    let multipart = checked_multipart(&state, &session, multipart).await?;
    let mut form = WhatIfForm::default();
    let mut checked = Vec::new();
    let started = async {
        read_form(&state, multipart, &mut form, &mut checked).await?;
        let req = request(&form, &checked)?;
        Ok::<_, ApiError>(whatif::submit(&state, session.tenant_id(), req).await?)
    }
    .await;
    match started {
        Ok(run) => Ok(Redirect::to(&format!("/ui/whatif/{}", run.id)).into_response()),
        Err(e) => {
            let status = e.status();
            let page = runs_page(&state, &session, form, &checked, Some(error_text(&e))).await?;
            render(status, &page)
        }
    }
}

#[derive(Deserialize)]
pub struct DeleteFields {
    #[serde(default)]
    csrf: String,
}

/// `POST /ui/whatif/{id}/delete`: deletes a run, back to the list.
pub async fn delete(
    State(state): State<AppState>,
    session: Session,
    Path(id): Path<String>,
    form: Result<Form<DeleteFields>, FormRejection>,
) -> PageResult {
    let Form(fields) = form.map_err(|r| ApiError::BadRequest(r.body_text()))?;
    session.check_csrf(&state, &fields.csrf)?;
    whatif::delete(&state, session.tenant_id(), &id).await?;
    Ok(Redirect::to("/ui/whatif").into_response())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_form_makes_the_api_request() {
        let form = WhatIfForm {
            source: "generate".into(),
            spec: " poisson:rate=5,duration=10,app=a ".into(),
            cpu_workers: "2".into(),
            max_cpu_workers: "5".into(),
            ..WhatIfForm::default()
        };
        let r = request(&form, &["static_peak".into()]).unwrap();
        assert_eq!(r.max_cpu_workers, Some(5));
        assert_eq!(
            r.trace,
            TraceSource::Generate("poisson:rate=5,duration=10,app=a".into())
        );
        assert_eq!((r.cpu_workers, r.cpu_cores), (Some(2), None));
        let recorded = WhatIfForm {
            source: "recorded".into(),
            minutes: "".into(),
            ..WhatIfForm::default()
        };
        assert_eq!(
            request(&recorded, &[]).unwrap().trace,
            TraceSource::Recorded(RecordedTrace {
                app: None,
                minutes: 10
            })
        );
        let bad = WhatIfForm {
            source: "csv".into(),
            gpu_workers: "many".into(),
            ..WhatIfForm::default()
        };
        let e = request(&bad, &[]).unwrap_err().to_string();
        assert!(e.contains("GPU workers must be a whole number"), "{e}");
        let e = request(&WhatIfForm::default(), &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("pick a trace"), "{e}");
    }
}
