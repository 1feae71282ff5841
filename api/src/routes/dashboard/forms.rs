//! The dashboard's forms: a query from the application page ("try it"), the registration
//! of a model and the submission of an offline job. All go through the code paths of the
//! JSON API.

use axum::extract::multipart::MultipartRejection;
use axum::extract::rejection::FormRejection;
use axum::extract::{Multipart, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use infaas_protocol::{tensor_from_json, tensor_to_json, JsonTensor};
use infaas_web::dashboard::{JobForm, RegisterPage, TryForm, TryResult};
use infaas_web::format;
use serde::Deserialize;

use super::pages::{app_page, jobs_page};
use super::{render, PageError, PageResult, Session};
use crate::error::ApiError;
use crate::state::AppState;
use infaas_control::serving::{serve, Goal, Outcome, Requirements};

/// Fields of the "try it" form.
#[derive(Deserialize)]
pub struct TryFields {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    inputs: String,
    #[serde(default)]
    latency_ms: String,
    #[serde(default)]
    min_accuracy: String,
}

/// An optional number field: empty is `None`.
fn optional_number(field: &str, text: &str) -> Result<Option<f64>, ApiError> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<f64>()
        .map(Some)
        .map_err(|_| ApiError::BadRequest(format!("{field} must be a number, not '{text}'")))
}

/// The inputs box: a JSON array of tensors, or an object with `inputs` (a whole v1 request
/// body pasted in).
fn parse_inputs(text: &str) -> Result<Vec<infaas_core::Tensor>, ApiError> {
    let value: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| ApiError::BadRequest(format!("the inputs are not valid JSON: {e}")))?;
    let list = match value {
        serde_json::Value::Object(mut o) => o.remove("inputs").unwrap_or_default(),
        other => other,
    };
    let tensors: Vec<JsonTensor> = serde_json::from_value(list).map_err(|e| {
        ApiError::BadRequest(format!(
            "the inputs must be a JSON array of {{\"name\", \"shape\", \"datatype\", \"data\"}} tensors: {e}"
        ))
    })?;
    tensors
        .iter()
        .map(|t| tensor_from_json(t).map_err(|e| ApiError::BadRequest(e.to_string())))
        .collect()
}

fn result_view(o: &Outcome) -> TryResult {
    let outputs: Vec<JsonTensor> = o.outputs.iter().map(tensor_to_json).collect();
    TryResult {
        model: o.model.clone(),
        variant: o.variant.clone(),
        worker: o.worker.clone(),
        hardware: o.hardware.clone(),
        accuracy: format::accuracy(o.accuracy),
        reason: o.reason.clone(),
        predicted: format::millis(o.predicted_ms),
        measured: format::millis(o.latency_ms),
        cost: format::dollars(o.cost),
        // One line per tensor.
        outputs: outputs
            .iter()
            .map(|t| serde_json::to_string(t).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n"),
    }
}

/// What a failed query shows: the error, and the closest variant when none qualified.
pub(super) fn error_text(e: &ApiError) -> String {
    match e {
        ApiError::Unsatisfiable {
            message,
            suggestion: Some(s),
        } => format!(
            "{message}; closest: variant {} (accuracy {}, latency {} ms)",
            s["variant"].as_str().unwrap_or("?"),
            s["accuracy"],
            s["latency_ms"]
        ),
        ApiError::Internal(cause) => {
            tracing::error!(error = ?cause, "internal error on a dashboard query");
            "internal error; see the server log".into()
        }
        other => other.to_string(),
    }
}

/// `POST /ui/apps/{app}/try`: sends the form's query through the serving path of
/// `POST /v1/apps/{app}/infer` and shows the answer (or why there is none) on the
/// application page.
pub async fn try_query(
    State(state): State<AppState>,
    session: Session,
    Path(app): Path<String>,
    form: Result<Form<TryFields>, FormRejection>,
) -> PageResult {
    let Form(fields) = form.map_err(|r| ApiError::BadRequest(r.body_text()))?;
    session.check_csrf(&state, &fields.csrf)?;
    let answer = async {
        let want = Requirements {
            latency_ms: optional_number("the latency SLO", &fields.latency_ms)?,
            min_accuracy: optional_number("the minimum accuracy", &fields.min_accuracy)?,
            max_cost: None,
        };
        let inputs = parse_inputs(&fields.inputs)?;
        Ok::<_, ApiError>(serve(&state, session.tenant_id(), Goal::App(&app), want, inputs).await?)
    }
    .await;
    let form = TryForm {
        inputs: fields.inputs,
        latency_ms: fields.latency_ms,
        min_accuracy: fields.min_accuracy,
    };
    let (status, result, error) = match answer {
        Ok(o) => (StatusCode::OK, Some(result_view(&o)), None),
        // An unknown application is a missing page, not a failed query.
        Err(ApiError::NotFound(m)) => return Err(ApiError::NotFound(m).into()),
        Err(e) => (e.status(), None, Some(error_text(&e))),
    };
    let page = app_page(&state, &session, &app, Some(form), result, error).await?;
    render(status, &page)
}

/// `GET /ui/models/new`: the registration form.
pub async fn register_form(State(state): State<AppState>, session: Session) -> PageResult {
    render(
        StatusCode::OK,
        &RegisterPage {
            layout: session.layout(&state, "models").await?,
            error: None,
            name: String::new(),
            app: String::new(),
        },
    )
}

/// Reads the first field of the form, which must be the session's anti-forgery token: a
/// forged request is refused before any file is read.
async fn check_first_field(
    state: &AppState,
    session: &Session,
    multipart: &mut Multipart,
) -> Result<(), PageError> {
    let field = multipart.next_field().await.ok().flatten();
    let token = match field {
        Some(f) if f.name() == Some("csrf") => f.text().await.unwrap_or_default(),
        _ => String::new(),
    };
    session.check_csrf(state, &token)
}

/// The multipart body of a form whose anti-forgery token checks out; a refused one is
/// drained first.
pub(super) async fn checked_multipart(
    state: &AppState,
    session: &Session,
    multipart: Result<Multipart, MultipartRejection>,
) -> Result<Multipart, PageError> {
    let mut multipart = multipart_form(multipart)?;
    if let Err(e) = check_first_field(state, session, &mut multipart).await {
        drain(&mut multipart).await;
        return Err(e);
    }
    Ok(multipart)
}

/// Reads what the browser is still sending after a refused form, so that it sees the
/// answer rather than a reset connection (the route's body limit bounds this).
async fn drain(multipart: &mut Multipart) {
    while let Ok(Some(mut field)) = multipart.next_field().await {
        while let Ok(Some(_)) = field.chunk().await {}
    }
}

fn multipart_form(multipart: Result<Multipart, MultipartRejection>) -> Result<Multipart, ApiError> {
    multipart.map_err(|r| ApiError::Status {
        status: r.status(),
        message: format!(
            "the form must be sent as multipart/form-data: {}",
            r.body_text()
        ),
    })
}

/// `POST /ui/jobs`: submits an offline job with its input files through the same code as
/// the multipart `POST /v1/jobs`, then shows the jobs page (which follows the progress);
/// errors show on the form.
pub async fn submit_job(
    State(state): State<AppState>,
    session: Session,
    multipart: Result<Multipart, MultipartRejection>,
) -> PageResult {
    let multipart = checked_multipart(&state, &session, multipart).await?;
    let tenant = session.tenant_id();
    let mut form = JobForm::default();
    let submitted = async {
        let s = crate::routes::jobs::from_multipart(&state, tenant, multipart).await?;
        form = JobForm {
            app: s.app.clone().unwrap_or_default(),
            model: s.model.clone().unwrap_or_default(),
            min_accuracy: s.min_accuracy.map(|a| a.to_string()).unwrap_or_default(),
            output_path: s.output_path.clone().unwrap_or_default(),
        };
        Ok::<_, ApiError>(infaas_control::jobs::submit_uploaded(&state, tenant, s).await?)
    }
    .await;
    match submitted {
        Ok(job) => Ok(Redirect::to(&format!("/ui/jobs#job-{}", job.id)).into_response()),
        Err(e) => {
            let status = e.status();
            let page = jobs_page(&state, &session, form, Some(error_text(&e))).await?;
            render(status, &page)
        }
    }
}

/// `POST /ui/models`: registers a model through the same code as `POST /v1/models`, then
/// shows its page (which follows the progress); errors show on the form.
pub async fn register(
    State(state): State<AppState>,
    session: Session,
    multipart: Result<Multipart, MultipartRejection>,
) -> PageResult {
    let multipart = checked_multipart(&state, &session, multipart).await?;
    match crate::uploads::register(&state, session.tenant_id(), multipart).await {
        Ok(model) => Ok(Redirect::to(&format!("/ui/models/{}", model.name)).into_response()),
        Err(e) => {
            let status = e.status();
            let page = RegisterPage {
                layout: session.layout(&state, "models").await?,
                error: Some(error_text(&e)),
                name: String::new(),
                app: String::new(),
            };
            render(status, &page)
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn inputs_are_an_array_or_a_request_body() {
        let one = r#"[{"name": "input", "shape": [1, 2], "datatype": "FP32", "data": [0.5, 1]}]"#;
        let t = parse_inputs(one).unwrap();
        assert_eq!(
            (t.len(), t[0].name.as_str(), t[0].shape.clone()),
            (1, "input", vec![1, 2])
        );
        let body = format!(r#"{{"inputs": {one}, "latency_ms": 5}}"#);
        assert_eq!(parse_inputs(&body).unwrap()[0].name, "input");
        let bad = parse_inputs("[{").unwrap_err().to_string();
        assert!(bad.contains("not valid JSON"), "{bad}");
        let wrong = parse_inputs(r#"[{"name": "x"}]"#).unwrap_err().to_string();
        assert!(wrong.contains("JSON array"), "{wrong}");
    }

    #[test]
    fn number_fields() {
        assert_eq!(optional_number("x", " ").unwrap(), None);
        assert_eq!(optional_number("x", "2.5").unwrap(), Some(2.5));
        assert!(optional_number("the latency SLO", "fast")
            .unwrap_err()
            .to_string()
            .contains("the latency SLO must be a number"));
    }
}
