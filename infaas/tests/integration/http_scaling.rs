//! `GET /v1/apps/{app}/scaling-events` on both backend pairs: a tenant sees its application's
//! scaling decisions newest first, filtered by time and count; another tenant's application of
//! the same name and unknown applications answer 404; bad query parameters answer 400 naming
//! the parameter. The dashboard's Scaling page lists the same events.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use infaas_core::DeclaredMetadata;
use infaas_store::{NewModel, NewScalingEvent};
use reqwest::{Method, StatusCode};

use common::backends::{on_both_pairs, Backends};
use common::{expect_error, json, TestServer, TestTenant};

on_both_pairs!(
    events_are_per_application_and_tenant,
    bad_parameters_are_400
);

/// A model row (and so an application) of `t`, made directly in the database.
async fn app_of(s: &TestServer, t: &TestTenant, app: &str) {
    s.db()
        .create_model(
            &t.id,
            &NewModel {
                id: uuid::Uuid::new_v4().to_string(),
                name: format!("{app}-model"),
                app: app.into(),
                task: "classification".into(),
                source_key: format!("tenants/{}/models/{app}/source.onnx", t.id),
                validation_key: format!("tenants/{}/models/{app}/validation.npz", t.id),
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

/// An event as the autoscaler stores it.
async fn event(s: &TestServer, t: &TestTenant, app: &str, action: &str, at: i64) {
    s.db()
        .add_scaling_event(&NewScalingEvent {
            tenant_id: Some(t.id.clone()),
            app: Some(app.into()),
            variant_id: Some("v-1".into()),
            worker: Some("worker-1".into()),
            action: action.into(),
            reason: format!("{action}: headroom 0.9 < slack 1.05"),
            cost_before_per_s: 1e-5,
            cost_after_per_s: 2e-5,
            created_at_ms: at,
            fenced: true,
        })
        .await
        .unwrap();
}

async fn events_are_per_application_and_tenant(b: &Backends) {
    let s = TestServer::start_with(b, |c| c.autoscale.enabled = false).await;
    let a = s.tenant("a").await;
    let other = s.tenant("other").await;
    app_of(&s, &a, "digits").await;
    app_of(&s, &a, "quiet").await;
    app_of(&s, &other, "digits").await;
    event(&s, &a, "digits", "replicate", 1_000).await;
    event(&s, &a, "digits", "upgrade", 2_000).await;
    event(&s, &a, "digits", "add-worker", 3_000).await;
    event(&s, &other, "digits", "downgrade", 2_500).await;
    let token = s.token(&a.admin_key).await;

    let (status, body) = s.get("/v1/apps/digits/scaling-events", &token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["app"], "digits");
    let events = body["events"].as_array().unwrap();
    let actions: Vec<&str> = events
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["add-worker", "upgrade", "replicate"],
        "newest first, own only"
    );
    let e = &events[1];
    assert_eq!(e["at_ms"], 2_000);
    assert_eq!(e["worker"], "worker-1");
    assert_eq!(e["variant"], "v-1");
    assert_eq!(e["cost_before_per_s"], 1e-5);
    assert_eq!(e["cost_after_per_s"], 2e-5);
    assert!(e["reason"].as_str().unwrap().contains("slack"), "{e}");

    let (_, body) = s
        .get(
            "/v1/apps/digits/scaling-events?since_ms=1500&limit=1",
            &token,
        )
        .await;
    let events = body["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["action"], "add-worker");
    // An application without events.
    let (status, body) = s.get("/v1/apps/quiet/scaling-events", &token).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body["events"].as_array().unwrap().is_empty());

    // The other tenant sees its own application of the same name only.
    let token_other = s.token(&other.admin_key).await;
    let (_, body) = s.get("/v1/apps/digits/scaling-events", &token_other).await;
    let events = body["events"].as_array().unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["action"], "downgrade");
    // ... and not tenant A's other application: 404, like one that does not exist.
    for app in ["quiet", "missing"] {
        let resp = s
            .send(s.authed(
                Method::GET,
                &format!("/v1/apps/{app}/scaling-events"),
                &token_other,
            ))
            .await;
        let message = expect_error(resp, StatusCode::NOT_FOUND, "not_found").await;
        assert!(message.contains(app), "{message}");
    }
    // Without a token: 401.
    let resp = s
        .send(s.http.get(s.url("/v1/apps/digits/scaling-events")))
        .await;
    expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;
    s.stop().await;
}

async fn bad_parameters_are_400(b: &Backends) {
    let s = TestServer::start_with(b, |c| c.autoscale.enabled = false).await;
    let a = s.tenant("a").await;
    app_of(&s, &a, "digits").await;
    let token = s.token(&a.admin_key).await;
    for (query, names) in [
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("limit=ten", "limit"),
        ("since_ms=-5", "since_ms"),
        ("since_ms=yesterday", "since_ms"),
    ] {
        let resp = s
            .send(s.authed(
                Method::GET,
                &format!("/v1/apps/digits/scaling-events?{query}"),
                &token,
            ))
            .await;
        let (status, body) = json(resp).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert!(
            body["error"].as_str().unwrap().contains(names),
            "{query}: {body}"
        );
    }
    s.stop().await;
}
