//! The browser dashboard over plain HTTP (no browser), on both backend pairs: signing in
//! and out, the session cookie, anti-forgery tokens on every form, redirects without a
//! session, and pages scoped to the session's tenant (another tenant's application or
//! model is a 404, its usage, scaling events and jobs never show).
#![allow(clippy::unwrap_used)]

use infaas_testing::server as common;

use infaas_control::usage::QueryRecord;
use infaas_core::{DeclaredMetadata, Role};
use infaas_store::NewModel;
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{Method, StatusCode};

use common::backends::{on_both_pairs, Backends};
use common::{TestServer, TestTenant};

on_both_pairs!(
    signing_in_and_out,
    the_cookie_is_secure_when_configured,
    forms_need_the_session_token,
    pages_show_only_the_session_tenant,
    assets_and_headers
);

/// A client that shows redirects instead of following them.
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
}

/// The `value` of the hidden field `name` in a page.
fn hidden(html: &str, name: &str) -> String {
    let marker = format!(r#"name="{name}" value=""#);
    let start = html
        .find(&marker)
        .unwrap_or_else(|| panic!("no field {name} in {html}"))
        + marker.len();
    html[start..].split('"').next().unwrap().to_string()
}

/// The `name=value` part of the `Set-Cookie` header setting `name`, and the whole header.
fn set_cookie(resp: &reqwest::Response, name: &str) -> Option<(String, String)> {
    resp.headers()
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(|v| (v.split(';').next().unwrap().to_string(), v.to_string()))
}

fn location(resp: &reqwest::Response) -> String {
    resp.headers()
        .get(LOCATION)
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

/// A signed-in browser: its session cookie and the session's anti-forgery token.
struct Browser {
    http: reqwest::Client,
    base: String,
    cookie: String,
    csrf: String,
}

impl Browser {
    async fn get(&self, path: &str) -> (StatusCode, String) {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.text().await.unwrap())
    }

    async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> (StatusCode, String) {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .header(COOKIE, &self.cookie)
            .form(fields)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        (status, resp.text().await.unwrap())
    }
}

/// The sign-in form: its anti-forgery cookie and field.
async fn login_form(s: &TestServer) -> (String, String) {
    let resp = client().get(s.url("/ui/login")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let (cookie, header) = set_cookie(&resp, "infaas_login_csrf").expect("a sign-in cookie");
    assert!(
        header.contains("HttpOnly") && header.contains("SameSite=Strict"),
        "{header}"
    );
    let html = resp.text().await.unwrap();
    (cookie, hidden(&html, "csrf"))
}

async fn post_login(
    s: &TestServer,
    cookie: Option<&str>,
    csrf: &str,
    key: &str,
) -> reqwest::Response {
    let mut req = client()
        .post(s.url("/ui/login"))
        .form(&[("csrf", csrf), ("api_key", key)]);
    if let Some(c) = cookie {
        req = req.header(COOKIE, c);
    }
    req.send().await.unwrap()
}

async fn sign_in(s: &TestServer, key: &str) -> Browser {
    let (cookie, csrf) = login_form(s).await;
    let resp = post_login(s, Some(&cookie), &csrf, key).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/ui/apps");
    let (session, _) = set_cookie(&resp, "infaas_session").expect("a session cookie");
    let mut b = Browser {
        http: client(),
        base: s.base.clone(),
        cookie: session,
        csrf: String::new(),
    };
    let (status, html) = b.get("/ui/apps").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    b.csrf = hidden(&html, "csrf");
    b
}

async fn signing_in_and_out(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;

    // No session, or a forged one: to the sign-in page.
    for cookie in [None, Some("infaas_session=not-a-token")] {
        let mut req = client().get(s.url("/ui/apps"));
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::SEE_OTHER, "{cookie:?}");
        assert_eq!(location(&resp), "/ui/login");
    }

    // A wrong key: the form again, with the reason, and no session.
    let (cookie, csrf) = login_form(&s).await;
    let resp = post_login(&s, Some(&cookie), &csrf, "infaas_wrong").await;
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(set_cookie(&resp, "infaas_session").is_none());
    let html = resp.text().await.unwrap();
    assert!(
        html.contains(r#"id="login-error">unknown or revoked API key<"#),
        "{html}"
    );

    // A sign-in without the form's token (a cross-site post) or with another token: 403.
    let resp = post_login(&s, None, &csrf, &t.admin_key).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(set_cookie(&resp, "infaas_session").is_none());
    let resp = post_login(&s, Some(&cookie), "0000", &t.admin_key).await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);

    // The right key: an HttpOnly, SameSite=Strict session cookie (not Secure on plain HTTP).
    let resp = post_login(&s, Some(&cookie), &csrf, &t.admin_key).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, header) = set_cookie(&resp, "infaas_session").unwrap();
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/ui", "Max-Age=900"] {
        assert!(header.contains(attr), "{attr} missing: {header}");
    }
    assert!(!header.contains("Secure"), "{header}");
    // The cookie holds a token the API accepts for the same tenant.
    let token = header
        .split(';')
        .next()
        .unwrap()
        .trim_start_matches("infaas_session=");
    let (status, me) = s.get("/v1/me", token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["tenant_id"], t.id.as_str());

    let browser = sign_in(&s, &t.admin_key).await;
    let (status, html) = browser.get("/ui/apps").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"<span id="tenant">acme</span>"#), "{html}");
    // Signed in already: the sign-in page sends to the applications.
    let resp = client()
        .get(s.url("/ui/login"))
        .header(COOKIE, &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(location(&resp), "/ui/apps");

    // Signing out needs the token too, then deletes the cookie.
    let (status, _) = browser.post_form("/ui/logout", &[]).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let resp = client()
        .post(s.url("/ui/logout"))
        .header(COOKIE, &browser.cookie)
        .form(&[("csrf", browser.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/ui/login");
    let (cleared, header) = set_cookie(&resp, "infaas_session").unwrap();
    assert_eq!(cleared, "infaas_session=");
    assert!(header.contains("Max-Age=0"), "{header}");

    // A session of a key revoked since: back to the sign-in page.
    let member = infaas_control::tenancy::generate_key();
    let stored = s
        .db()
        .create_api_key(&t.id, "member", Role::Member, &member.prefix, &member.hash)
        .await
        .unwrap();
    let browser = sign_in(&s, &member.secret).await;
    let admin = s.token(&t.admin_key).await;
    let resp = s
        .send(s.authed(
            Method::DELETE,
            &format!("/v1/api-keys/{}", stored.id),
            &admin,
        ))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let resp = client()
        .get(s.url("/ui/apps"))
        .header(COOKIE, &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/ui/login");
    s.stop().await;
}

async fn the_cookie_is_secure_when_configured(b: &Backends) {
    let s = TestServer::start_with(b, |c| c.cookie_secure = true).await;
    let t = s.tenant("acme").await;
    let (cookie, csrf) = login_form(&s).await;
    let resp = post_login(&s, Some(&cookie), &csrf, &t.admin_key).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, header) = set_cookie(&resp, "infaas_session").unwrap();
    assert!(header.ends_with("; Secure"), "{header}");
    s.stop().await;
}

/// A model row (and so an application) of `t`, made directly in the database: enough for
/// the pages, which never read the files.
async fn model_of(s: &TestServer, t: &TestTenant, name: &str, app: &str) {
    s.db()
        .create_model(
            &t.id,
            &NewModel {
                id: uuid::Uuid::new_v4().to_string(),
                name: name.into(),
                app: app.into(),
                task: "classification".into(),
                source_key: format!("tenants/{}/models/{name}/source.onnx", t.id),
                validation_key: format!("tenants/{}/models/{name}/validation.npz", t.id),
                size_bytes: 1234,
                sha256: "ab".repeat(32),
                declared: DeclaredMetadata::default(),
                signature: serde_json::json!({
                    "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 4]}],
                    "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
                }),
            },
        )
        .await
        .unwrap();
}

async fn forms_need_the_session_token(b: &Backends) {
    let s = TestServer::start(b).await;
    let a = s.tenant("a").await;
    let other = s.tenant("other").await;
    model_of(&s, &a, "taken", "app-a").await;
    let browser = sign_in(&s, &a.admin_key).await;
    let foreign = sign_in(&s, &other.admin_key).await;
    assert_ne!(browser.csrf, foreign.csrf);

    // The query form: no token, another session's token, a made-up token: 403, no query.
    let inputs =
        r#"[{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [0, 0, 0, 0]}]"#;
    for token in [None, Some(foreign.csrf.as_str()), Some("00ff")] {
        let mut fields = vec![("inputs", inputs), ("latency_ms", "5")];
        if let Some(t) = token {
            fields.push(("csrf", t));
        }
        let (status, html) = browser.post_form("/ui/apps/app-a/try", &fields).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{token:?}: {html}");
        assert!(html.contains("anti-forgery"), "{html}");
    }
    // With the token the query reaches the serving path, which finds nothing to serve: the
    // model row has no files, so it is either still waiting (503) or, when the registry's
    // worker took it up at start, failed (409). Either answer comes from the serving path.
    let (status, html) = browser
        .post_form(
            "/ui/apps/app-a/try",
            &[("csrf", browser.csrf.as_str()), ("inputs", inputs)],
        )
        .await;
    let said = |what: &str| {
        html.contains(&format!(
            r#"id="try-error">no model of application &#39;app-a&#39; {what}"#
        )) || html.contains(&format!(
            r#"id="try-error">no model of application &#x27;app-a&#x27; {what}"#
        ))
    };
    match status {
        StatusCode::SERVICE_UNAVAILABLE => assert!(said("is ready yet"), "{html}"),
        StatusCode::CONFLICT => assert!(said("can serve: every one failed registration"), "{html}"),
        other => panic!("{other}: {html}"),
    }

    // The registration form: the token must come first; without it nothing is read.
    let zoo = concat!(env!("CARGO_MANIFEST_DIR"), "/../zoo/");
    let form = |csrf: Option<&str>, name: &str| {
        let mut f = reqwest::multipart::Form::new();
        if let Some(c) = csrf {
            f = f.text("csrf", c.to_string());
        }
        f.text("name", name.to_string())
            .text("app", "app-a")
            .part(
                "model",
                reqwest::multipart::Part::bytes(
                    std::fs::read(format!("{zoo}digits-logreg.onnx")).unwrap(),
                )
                .file_name("digits-logreg.onnx"),
            )
            .part(
                "validation",
                reqwest::multipart::Part::bytes(
                    std::fs::read(format!("{zoo}digits-val.npz")).unwrap(),
                )
                .file_name("digits-val.npz"),
            )
    };
    let post = |f: reqwest::multipart::Form| {
        browser
            .http
            .post(format!("{}/ui/models", browser.base))
            .header(COOKIE, &browser.cookie)
            .multipart(f)
            .send()
    };
    for f in [form(None, "fresh"), form(Some(&foreign.csrf), "fresh")] {
        let resp = post(f).await.unwrap();
        assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    }
    // The token after the other fields does not count either.
    let late = reqwest::multipart::Form::new()
        .text("name", "fresh")
        .text("csrf", browser.csrf.clone());
    assert_eq!(post(late).await.unwrap().status(), StatusCode::FORBIDDEN);
    assert_eq!(s.db().count_models(&a.id).await.unwrap(), 1);
    // With the token the form goes through the registry's checks: a taken name is refused
    // on the form (409), exactly as `POST /v1/models` refuses it.
    let resp = post(form(Some(&browser.csrf), "taken")).await.unwrap();
    assert_eq!(resp.status(), StatusCode::CONFLICT);
    let html = resp.text().await.unwrap();
    assert!(
        html.contains("model &#39;taken&#39; already exists")
            || html.contains("model &#x27;taken&#x27; already exists"),
        "{html}"
    );
    assert_eq!(s.db().count_models(&a.id).await.unwrap(), 1);
    s.stop().await;
}

/// Rows the autoscaler and the offline-job runner would write, for `t`.
async fn activity_of(s: &TestServer, t: &TestTenant, app: &str, tag: &str) {
    let pool = s.db().pool();
    let app_id: String = sqlx::query_scalar::<_, String>(
        "SELECT id FROM applications WHERE tenant_id = $1 AND name = $2",
    )
    .bind(&t.id)
    .bind(app)
    .fetch_one(pool)
    .await
    .unwrap();
    sqlx::query(
        "INSERT INTO scaling_events (id, tenant_id, app_id, variant_id, worker_id, action, reason, \
         cost_before_per_s, cost_after_per_s, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(uuid::Uuid::new_v4().to_string())
    .bind(&t.id)
    .bind(&app_id)
    .bind("variant-id")
    .bind("worker-1")
    .bind("scale_up")
    .bind(format!("reason-{tag}"))
    .bind(0.001_f64)
    .bind(0.002_f64)
    .bind(infaas_core::time::now_ms())
    .execute(pool)
    .await
    .unwrap();
    let now = infaas_core::time::now_ms();
    sqlx::query(
        "INSERT INTO offline_jobs (id, tenant_id, app_name, state, input_path, output_path, \
         items_total, items_done, created_at, updated_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
    )
    .bind(format!("job-{tag}"))
    .bind(&t.id)
    .bind(app)
    .bind("running")
    .bind("in/")
    .bind("out/")
    .bind(10_i64)
    .bind(7_i64)
    .bind(now)
    .bind(now)
    .execute(pool)
    .await
    .unwrap();
}

async fn pages_show_only_the_session_tenant(b: &Backends) {
    let s = TestServer::start(b).await;
    let a = s.tenant("a").await;
    let other = s.tenant("other").await;
    model_of(&s, &a, "secret-model", "secret-app").await;
    model_of(&s, &other, "own-model", "own-app").await;
    activity_of(&s, &a, "secret-app", "of-a").await;
    activity_of(&s, &other, "own-app", "of-other").await;
    // Two queries of A's application, one under a 5 ms SLO, one under 20 ms (missed).
    for (latency_ms, slo) in [(2.0, 5.0), (30.0, 20.0)] {
        s.server.state.usage.record(&QueryRecord {
            tenant_id: &a.id,
            app: "secret-app",
            model: "secret-model",
            variant: "secret-model.fp32.cpu.t1.b1",
            hardware: "cpu",
            rows: 1,
            latency_ms,
            slo_ms: Some(slo),
            cost: 0.25,
        });
    }
    let browser = sign_in(&s, &a.admin_key).await;
    let foreign = sign_in(&s, &other.admin_key).await;

    // A sees its application with the recorded usage (flushed when the page is read).
    let (status, html) = browser.get("/ui/apps/secret-app").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(r#"<dd id="app-requests">2</dd>"#), "{html}");
    assert!(
        html.contains(r#"<dd id="app-slos">5.00 ms – 20.00 ms</dd>"#),
        "{html}"
    );
    assert!(
        html.contains(r#"<dd id="app-attainment">50.0 %</dd>"#),
        "{html}"
    );
    // 0.5 in the 60-minute window.
    assert!(html.contains(r#"<dd id="app-cost">$0.5000</dd>"#), "{html}");
    // The latency chart has mean, max and the SLO line for the minute of the queries.
    assert!(html.contains("<title>Latency per minute</title>"), "{html}");
    assert!(html.contains(r#"<g class="series slo">"#), "{html}");
    assert!(
        html.contains(r#"data-value="16""#) || html.contains(r#"data-value="30""#),
        "{html}"
    );
    // The example inputs follow the model's signature (4 features).
    assert!(
        html.contains("&#34;shape&#34;: [1, 4]") || html.contains("&quot;shape&quot;: [1, 4]"),
        "{html}"
    );
    let (status, html) = browser.get("/ui/apps").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"<a href="/ui/apps/secret-app">"#), "{html}");
    assert!(!html.contains("own-app"), "{html}");
    let (status, html) = browser.get("/ui/models/secret-model").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        html.contains(r#"<code>input input FP32 [-1,4]</code>"#),
        "{html}"
    );
    let (_, html) = browser.get("/ui/scaling").await;
    assert!(
        html.contains("reason-of-a") && !html.contains("reason-of-other"),
        "{html}"
    );
    assert!(html.contains("secret-app"), "{html}");
    let (_, html) = browser.get("/ui/jobs").await;
    assert!(
        html.contains("job-of-a") && !html.contains("job-of-other"),
        "{html}"
    );
    assert!(
        html.contains("7 / 10") && html.contains(r#"value="70""#),
        "{html}"
    );

    // The other tenant: A's names are 404s, exactly like names that exist nowhere.
    for path in ["/ui/apps/secret-app", "/ui/models/secret-model"] {
        let (status, foreign_html) = foreign.get(path).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}: {foreign_html}");
        let missing = path.replace("secret", "nowhere");
        let (status, missing_html) = foreign.get(&missing).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(
            foreign_html.replace("secret", "X"),
            missing_html.replace("nowhere", "X"),
        );
    }
    let (status, _) = foreign
        .post_form(
            "/ui/apps/secret-app/try",
            &[("csrf", foreign.csrf.as_str()), ("inputs", "[]")],
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for path in [
        "/ui/apps",
        "/ui/models",
        "/ui/scaling",
        "/ui/jobs",
        "/ui/workers",
    ] {
        let (status, html) = foreign.get(path).await;
        assert_eq!(status, StatusCode::OK, "{path}");
        for secret in ["secret-app", "secret-model", "reason-of-a", "job-of-a"] {
            assert!(!html.contains(secret), "{path} shows {secret}: {html}");
        }
    }
    s.stop().await;
}

async fn assets_and_headers(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;
    for (path, kind, needle) in [
        ("/ui/assets/dashboard.css", "text/css", "svg.chart"),
        ("/ui/assets/dashboard.js", "text/javascript", "data-live"),
    ] {
        let resp = client().get(s.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{path}");
        let ct = resp.headers()[CONTENT_TYPE].to_str().unwrap().to_string();
        assert!(ct.starts_with(kind), "{path}: {ct}");
        assert!(resp.text().await.unwrap().contains(needle), "{path}");
    }
    let browser = sign_in(&s, &t.admin_key).await;
    let resp = client()
        .get(s.url("/ui"))
        .header(COOKIE, &browser.cookie)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(location(&resp), "/ui/apps");
    let resp = browser
        .http
        .get(s.url("/ui/workers"))
        .header(COOKIE, &browser.cookie)
        .send()
        .await
        .unwrap();
    let h = resp.headers();
    let csp = h["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(h["x-frame-options"], "DENY");
    assert_eq!(h["cache-control"], "no-store");
    // The embedded worker is listed with its hardware.
    let html = resp.text().await.unwrap();
    assert!(html.contains("<dt>Hardware</dt><dd>cpu"), "{html}");
    // Instances show their latency (queue included) beside their run time.
    assert!(
        html.contains(">Latency p50</th>") && html.contains(">Run p50</th>"),
        "{html}"
    );
    s.stop().await;
}
