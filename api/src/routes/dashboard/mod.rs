//! The browser dashboard under `/ui`: server-rendered pages (askama, `infaas-web`) over the
//! same state and code paths as the JSON API. Sessions are the API's access tokens in an
//! `HttpOnly`, `SameSite=Strict` cookie; every form carries an anti-forgery token; every
//! page is scoped to the session's tenant.

mod forms;
mod pages;
mod pipelines;
mod report;
pub mod session;
mod whatif;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use infaas_web::dashboard::ErrorPage;
use infaas_web::Template;

use crate::error::ApiError;
use crate::state::AppState;

pub use session::Session;

/// Where a visitor without a valid session is sent.
pub const LOGIN_PATH: &str = "/ui/login";

/// The dashboard's routes, to nest under `/ui`. `upload_limit` bounds the registration form.
pub fn routes(upload_limit: usize) -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui/apps") }))
        .route("/assets/dashboard.css", get(css))
        .route("/assets/dashboard.js", get(js))
        .route("/login", get(session::login_form).post(session::login))
        .route("/logout", post(session::logout))
        .route("/apps", get(pages::apps))
        .route("/apps/{app}", get(pages::app))
        .route("/apps/{app}/try", post(forms::try_query))
        .route(
            "/models",
            get(pages::models)
                .post(forms::register)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/models/new", get(forms::register_form))
        .route("/models/{name}", get(pages::model))
        .route("/pipelines", get(pipelines::list).post(pipelines::register))
        .route("/pipelines/{name}", get(pipelines::show))
        .route("/pipelines/{name}/delete", post(pipelines::delete))
        .route("/workers", get(pages::workers))
        .route("/scaling", get(pages::scaling))
        .route(
            "/jobs",
            get(pages::jobs)
                .post(forms::submit_job)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route(
            "/whatif",
            get(whatif::runs)
                .post(whatif::start)
                .layer(DefaultBodyLimit::max(upload_limit)),
        )
        .route("/whatif/{id}", get(whatif::run))
        .route("/whatif/{id}/delete", post(whatif::delete))
        .layer(axum::middleware::map_response(security_headers))
}

/// Pages may load only this server's styles and scripts, may not be framed, and are not
/// cached (they show tenant data).
async fn security_headers(mut resp: Response) -> Response {
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    resp
}

async fn css() -> Response {
    asset("text/css; charset=utf-8", infaas_web::DASHBOARD_CSS)
}

async fn js() -> Response {
    asset("text/javascript; charset=utf-8", infaas_web::DASHBOARD_JS)
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Why a dashboard request did not produce its page.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    /// No session, or one that is no longer valid: sign in again.
    #[error("sign in")]
    SignIn,
    /// A form without this session's anti-forgery token.
    #[error("{0}")]
    Forgery(String),
    #[error(transparent)]
    Api(#[from] ApiError),
}

impl From<infaas_store::StoreError> for PageError {
    fn from(e: infaas_store::StoreError) -> Self {
        PageError::Api(e.into())
    }
}

impl From<infaas_control::Error> for PageError {
    fn from(e: infaas_control::Error) -> Self {
        PageError::Api(e.into())
    }
}

/// A dashboard answer or the page that says why not.
pub type PageResult<T = Response> = Result<T, PageError>;

/// Renders a page as `status` with its HTML.
pub fn render(status: StatusCode, page: &impl Template) -> PageResult {
    let html = page.render().map_err(ApiError::internal)?;
    Ok((status, Html(html)).into_response())
}

fn error_page(status: StatusCode, title: &str, message: String) -> Response {
    let page = ErrorPage {
        status: status.as_u16(),
        title: title.to_string(),
        message,
    };
    match Template::render(&page) {
        Ok(html) => (status, Html(html)).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot render the error page");
            (status, page.message).into_response()
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        match self {
            PageError::SignIn | PageError::Api(ApiError::Unauthorized(_)) => {
                Redirect::to(LOGIN_PATH).into_response()
            }
            PageError::Forgery(message) => error_page(StatusCode::FORBIDDEN, "Forbidden", message),
            PageError::Api(e) => {
                let status = e.status();
                let message = match &e {
                    ApiError::Internal(cause) => {
                        tracing::error!(error = ?cause, "internal error on a dashboard page");
                        "internal error; see the server log".to_string()
                    }
                    other => other.to_string(),
                };
                let title = status.canonical_reason().unwrap_or("Error");
                error_page(status, title, message)
            }
        }
    }
}
