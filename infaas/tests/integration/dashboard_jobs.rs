//! The dashboard's job form over plain HTTP (no browser), against a real zoo model: the
//! anti-forgery token comes first or nothing is read, a refused submission shows its reason
//! on the form with the fields kept, and an accepted one redirects to the jobs page, which
//! follows its progress (live refresh) until it has succeeded. On both backend pairs.
//!
//! `cargo nextest run -p infaas-api --test dashboard_jobs`. Needs ONNX Runtime.
#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::time::{Duration, Instant};

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use registry_common::backends::{on_both_pairs, Backends};
use registry_common::{fast_config, open_quotas, ort_library, zoo_bytes, Platform, Registration};
use reqwest::header::{COOKIE, LOCATION, SET_COOKIE};
use reqwest::multipart::{Form, Part};
use reqwest::StatusCode;

const APP: &str = "digits";
const MODEL: &str = "digits-logreg";

/// The `value` of the hidden field `name` in a page.
pub(crate) fn hidden(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

fn cookie(resp: &reqwest::Response, name: &str) -> String {
    resp.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| v.split(';').next().unwrap().to_string())
        .unwrap_or_else(|| panic!("no cookie {name}"))
}

/// A signed-in browser: session cookie and anti-forgery token.
pub(crate) struct Browser {
    http: reqwest::Client,
    base: String,
    cookie: String,
    pub(crate) csrf: String,
}

impl Browser {
    pub(crate) async fn sign_in(base: &str, key: &str) -> Browser {
        let http = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let form = http.get(format!("{base}/ui/login")).send().await.unwrap();
        let login_cookie = cookie(&form, "infaas_login_csrf");
        let csrf = hidden(&form.text().await.unwrap(), "csrf");
        let resp = http
            .post(format!("{base}/ui/login"))
            .header(COOKIE, &login_cookie)
            .form(&[("csrf", csrf.as_str()), ("api_key", key)])
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER);
        let mut b = Browser {
            http,
            base: base.to_string(),
            cookie: cookie(&resp, "infaas_session"),
            csrf: String::new(),
        };
        let (status, html) = b.get("/ui/jobs").await;
        assert_eq!(status, StatusCode::OK, "{html}");
        b.csrf = hidden(&html, "csrf");
        b
    }

    pub(crate) async fn get(&self, path: &str) -> (StatusCode, String) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap();
        (resp.status(), resp.text().await.unwrap())
    }

    async fn post(&self, form: Form) -> reqwest::Response {
        self.post_to("/ui/jobs", form).await
    }

    /// Posts a URL-encoded form to `path`.
    pub(crate) async fn post_fields(
        &self,
        path: &str,
        fields: &[(&str, &str)],
    ) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .form(fields)
            .send()
            .await
            .unwrap()
    }

    /// Posts a multipart form to `path`.
    pub(crate) async fn post_to(&self, path: &str, form: Form) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .multipart(form)
            .send()
            .await
            .unwrap()
    }
}

/// The job form as a browser sends it: every field, empty ones included.
fn job_form(csrf: Option<&str>, app: &str, model: &str, min_accuracy: &str) -> Form {
    let mut f = Form::new();
    if let Some(c) = csrf {
        f = f.text("csrf", c.to_string());
    }
    f.text("app", app.to_string())
        .text("min_accuracy", min_accuracy.to_string())
        .text("model", model.to_string())
        .part(
            "input",
            Part::bytes(zoo_bytes("digits-val.npz")).file_name("digits-val.npz"),
        )
        .text("output_path", "")
}

/// Undoes askama's escaping of the characters the messages hold.
pub(crate) fn unescape(html: &str) -> String {
    html.replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#60;", "<")
        .replace("&lt;", "<")
        .replace("&#62;", ">")
        .replace("&gt;", ">")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

on_both_pairs!(jobs_are_submitted_from_the_dashboard_with_progress);

async fn jobs_are_submitted_from_the_dashboard_with_progress(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let p = Platform::start(fast_config(b, &ort)).await;
    let tenant = p.db().create_tenant("acme", open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    let token = {
        let a = p
            .send(
                p.http
                    .post(format!("{}/v1/auth/token", p.base))
                    .json(&serde_json::json!({ "api_key": key.secret })),
            )
            .await;
        a.body["access_token"].as_str().unwrap().to_string()
    };
    let t = registry_common::Tenant {
        id: tenant.id.clone(),
        name: "acme".into(),
        token,
    };
    p.register_ok(&t, &Registration::zoo(MODEL, APP)).await;
    p.wait_ready(&t, MODEL, Duration::from_secs(180)).await;
    let browser = Browser::sign_in(&p.base, &key.secret).await;
    let jobs = || async { p.db().list_jobs(&tenant.id).await.unwrap() };

    // The page offers the form with the tenant's applications and models.
    let (_, html) = browser.get("/ui/jobs").await;
    assert!(html.contains(r#"id="job-form""#), "{html}");
    assert!(
        html.contains(&format!(r#"<option value="{APP}">"#)),
        "{html}"
    );
    assert!(
        html.contains(&format!(r#"<option value="{MODEL}">"#)),
        "{html}"
    );

    // Without this session's token first, nothing is read and no job is made.
    for f in [
        job_form(None, APP, "", ""),
        job_form(Some("00ff"), APP, "", ""),
    ] {
        let resp = browser.post(f).await;
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
        assert!(resp.text().await.unwrap().contains("anti-forgery"));
    }
    assert!(jobs().await.is_empty());

    // Refused submissions show the reason on the form, with the fields kept.
    let resp = browser
        .post(job_form(Some(&browser.csrf), APP, MODEL, ""))
        .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let html = unescape(&resp.text().await.unwrap());
    assert!(
        html.contains(
            r#"id="job-error">give one of 'app' (model-less), 'model' or 'pipeline', not several"#
        ),
        "{html}"
    );
    assert!(html.contains(&format!(
        r#"id="job-app" name="app" list="job-apps" value="{APP}""#
    )));
    let resp = browser
        .post(job_form(Some(&browser.csrf), "no-such-app", "", ""))
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    let html = unescape(&resp.text().await.unwrap());
    assert!(
        html.contains(r#"id="job-error">application 'no-such-app' not found"#),
        "{html}"
    );
    assert!(jobs().await.is_empty());

    // Accepted: the answer redirects to the job's row, whose progress the page follows.
    let resp = browser
        .post(job_form(Some(&browser.csrf), APP, "", "0.5"))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let all = jobs().await;
    assert_eq!(all.len(), 1);
    let id = all[0].id.clone();
    assert_eq!(all[0].app.as_deref(), Some(APP));
    assert_eq!(all[0].min_accuracy, Some(0.5));
    let location = resp.headers()[LOCATION].to_str().unwrap().to_string();
    assert_eq!(location, format!("/ui/jobs#job-{id}"));
    let start = Instant::now();
    let row = loop {
        let (status, html) = browser.get("/ui/jobs").await;
        assert_eq!(status, StatusCode::OK);
        let row = html
            .split(&format!(r#"<tr id="job-{id}">"#))
            .nth(1)
            .unwrap_or_else(|| panic!("no row for job {id}: {html}"))
            .split("</tr>")
            .next()
            .unwrap()
            .to_string();
        if row.contains("succeeded") {
            assert!(
                !html.contains("data-live="),
                "a finished list still refreshes"
            );
            break row;
        }
        // While it runs, the list refreshes itself.
        assert!(html.contains(r#"data-live-src="/ui/jobs""#), "{html}");
        assert!(start.elapsed() < Duration::from_secs(60), "job {id}: {row}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let total = all[0].items_total;
    assert!(total > 0);
    assert!(row.contains(r#"<progress max="100" value="100">"#), "{row}");
    assert!(row.contains(&format!("{total} / {total}")), "{row}");
    p.stop().await;
}
