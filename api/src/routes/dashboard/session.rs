//! Signing in and out of the dashboard, and the session of a request.
//!
//! Signing in exchanges an API key for an access token exactly as `POST /v1/auth/token`
//! does, and keeps the token in an `HttpOnly`, `SameSite=Strict` cookie (`Secure` when
//! configured). A session's anti-forgery token is an HMAC of its access token; the sign-in
//! form, which has no session yet, uses a random token submitted both as a cookie and as a
//! field.

use axum::extract::rejection::FormRejection;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect};
use axum::Form;
use infaas_web::dashboard::{Layout, LoginPage};
use serde::Deserialize;

use super::{render, PageError, PageResult};
use crate::auth::Principal;
use crate::error::ApiError;
use crate::state::AppState;
use infaas_control::tenancy::hash_key;
use infaas_worker::server::constant_time_eq;

/// Cookie holding the access token of a dashboard session.
pub const SESSION_COOKIE: &str = "infaas_session";
/// Cookie holding the anti-forgery token of the sign-in form.
pub const LOGIN_CSRF_COOKIE: &str = "infaas_login_csrf";

/// The signed-in tenant of a dashboard request.
pub struct Session {
    pub principal: Principal,
    /// The access token from the cookie.
    token: String,
    /// Anti-forgery token of the session.
    pub csrf: String,
}

impl Session {
    /// The page frame of this session: tenant name, anti-forgery token, active entry.
    pub async fn layout(&self, state: &AppState, active: &'static str) -> PageResult<Layout> {
        let tenant = state.db.get_tenant(&self.principal.tenant_id).await?;
        Ok(Layout {
            tenant: tenant.name,
            csrf: self.csrf.clone(),
            active,
        })
    }

    /// Rejects a form that does not carry this session's anti-forgery token.
    pub fn check_csrf(&self, state: &AppState, given: &str) -> Result<(), PageError> {
        if state.tokens.csrf_matches(&self.token, given) {
            Ok(())
        } else {
            Err(PageError::Forgery(
                "the form's anti-forgery token is missing or wrong; reload the page and try again"
                    .into(),
            ))
        }
    }

    pub fn tenant_id(&self) -> &str {
        &self.principal.tenant_id
    }
}

/// The value of cookie `name` in the request's `Cookie` headers.
pub fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.trim())
        .filter(|v| !v.is_empty())
}

impl FromRequestParts<AppState> for Session {
    type Rejection = PageError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, PageError> {
        let token = cookie(&parts.headers, SESSION_COOKIE).ok_or(PageError::SignIn)?;
        let principal = Principal::from_token(state, token).await?;
        Ok(Session {
            csrf: state.tokens.csrf_token(token),
            token: token.to_string(),
            principal,
        })
    }
}

/// A `Set-Cookie` value: `HttpOnly`, `SameSite=Strict`, scoped to `path`, `Secure` when
/// configured; `max_age` 0 deletes the cookie.
fn set_cookie(
    state: &AppState,
    name: &str,
    value: &str,
    path: &str,
    max_age: u64,
) -> PageResult<HeaderValue> {
    let secure = if state.config.cookie_secure {
        "; Secure"
    } else {
        ""
    };
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={path}; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
    ))
    .map_err(|e| PageError::Api(ApiError::internal(e)))
}

/// The sign-in page with a fresh anti-forgery token (cookie and field).
fn login_page(state: &AppState, status: StatusCode, error: Option<String>) -> PageResult {
    let csrf = hex::encode(rand::random::<[u8; 24]>());
    let mut resp = render(
        status,
        &LoginPage {
            error,
            csrf: csrf.clone(),
        },
    )?;
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(state, LOGIN_CSRF_COOKIE, &csrf, super::LOGIN_PATH, 3600)?,
    );
    Ok(resp)
}

/// `GET /ui/login`: the sign-in form (the applications page when already signed in).
pub async fn login_form(State(state): State<AppState>, headers: HeaderMap) -> PageResult {
    if let Some(token) = cookie(&headers, SESSION_COOKIE) {
        if Principal::from_token(&state, token).await.is_ok() {
            return Ok(Redirect::to("/ui/apps").into_response());
        }
    }
    login_page(&state, StatusCode::OK, None)
}

/// Fields of the sign-in form.
#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    api_key: String,
}

/// `POST /ui/login`: checks the API key as `POST /v1/auth/token` does and starts a session.
pub async fn login(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Result<Form<LoginForm>, FormRejection>,
) -> PageResult {
    let Form(form) = form.map_err(|r| ApiError::BadRequest(r.body_text()))?;
    let expected = cookie(&headers, LOGIN_CSRF_COOKIE).unwrap_or_default();
    if expected.is_empty() || !constant_time_eq(expected.as_bytes(), form.csrf.as_bytes()) {
        return Err(PageError::Forgery(
            "the sign-in form's anti-forgery token is missing or wrong; reload the sign-in page"
                .into(),
        ));
    }
    let key = state
        .db
        .find_active_api_key(&hash_key(form.api_key.trim()))
        .await?;
    let Some(key) = key else {
        return login_page(
            &state,
            StatusCode::UNAUTHORIZED,
            Some("unknown or revoked API key".into()),
        );
    };
    let token = state.tokens.issue(&key.id, &key.tenant_id, key.role)?;
    tracing::info!(tenant_id = %key.tenant_id, key_id = %key.id, "dashboard sign-in");
    let mut resp = Redirect::to("/ui/apps").into_response();
    let h = resp.headers_mut();
    h.append(
        header::SET_COOKIE,
        set_cookie(
            &state,
            SESSION_COOKIE,
            &token,
            "/ui",
            state.tokens.ttl.as_secs(),
        )?,
    );
    h.append(
        header::SET_COOKIE,
        set_cookie(&state, LOGIN_CSRF_COOKIE, "", super::LOGIN_PATH, 0)?,
    );
    Ok(resp)
}

/// A form that carries only the anti-forgery token.
#[derive(Deserialize)]
pub struct TokenOnly {
    #[serde(default)]
    csrf: String,
}

/// `POST /ui/logout`: ends the session (deletes the cookie).
pub async fn logout(
    State(state): State<AppState>,
    session: Session,
    form: Result<Form<TokenOnly>, FormRejection>,
) -> PageResult {
    let given = form.map(|Form(f)| f.csrf).unwrap_or_default();
    session.check_csrf(&state, &given)?;
    let mut resp = Redirect::to(super::LOGIN_PATH).into_response();
    resp.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(&state, SESSION_COOKIE, "", "/ui", 0)?,
    );
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_by_exact_name() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; infaas_session_old=x; infaas_session=tok"),
        );
        h.append(header::COOKIE, HeaderValue::from_static("b=2"));
        assert_eq!(cookie(&h, SESSION_COOKIE), Some("tok"));
        assert_eq!(cookie(&h, "b"), Some("2"));
        assert_eq!(cookie(&h, "infaas"), None);
        let mut empty = HeaderMap::new();
        empty.append(header::COOKIE, HeaderValue::from_static("infaas_session="));
        assert_eq!(cookie(&empty, SESSION_COOKIE), None);
    }
}
