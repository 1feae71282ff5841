//! Tenant isolation on both backend pairs: another tenant's resources are invisible, and
//! reaching one by its id looks exactly like reaching an id that does not exist.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use std::collections::BTreeMap;

use reqwest::{Method, StatusCode};
use serde_json::Value;

use common::backends::{on_both_pairs, Backends};
use common::{json, TestServer};

on_both_pairs!(
    foreign_ids_look_missing,
    listings_and_me_show_only_the_caller
);

/// Every route that names a tenant's resource in its path: (method, path, JSON body).
/// `{placeholder}`s are filled with tenant A's resources (see `resources_of_a`) and, for
/// comparison, with ids that exist nowhere.
///
/// EVERY NEW ROUTE WITH AN ID (OR NAME) IN ITS PATH MUST BE ADDED HERE, with its resource
/// created in `resources_of_a`, so that tenant B reaching tenant A's resource is proven to
/// answer exactly like a missing one and to change nothing.
const FOREIGN_ID_ROUTES: &[(&str, &str, Option<&str>)] = &[
    ("DELETE", "/v1/api-keys/{api_key_id}", None),
    ("GET", "/v1/models/{model}", None),
    ("GET", "/v1/apps/{app}", None),
    ("GET", "/v1/apps/{app}/usage", None),
    ("GET", "/v1/apps/{app}/scaling-events", None),
    ("POST", "/v1/models/{model}/infer", Some(INFER_BODY)),
    ("POST", "/v1/apps/{app}/infer", Some(INFER_BODY)),
    ("GET", "/v2/models/{model}", None),
    ("POST", "/v2/models/{model}/infer", Some(INFER_BODY)),
    ("POST", "/v2/models/{app}/infer", Some(INFER_BODY)),
    // Deleting comes last: it must not delete tenant A's model either.
    ("DELETE", "/v1/models/{model}", None),
];

/// A valid query for the zoo's digits models (64 features).
const INFER_BODY: &str = r#"{"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": [0,0,5,13,9,1,0,0,0,0,13,15,10,15,5,0,0,3,15,2,0,11,8,0,0,4,12,0,0,8,8,0,0,5,8,0,0,9,8,0,0,4,11,0,1,12,7,0,0,2,14,5,10,12,0,0,0,0,6,13,10,0,0,0]}]}"#;

/// Registers the zoo's logistic regression as tenant A's model and waits until it serves.
async fn register_model_of_a(s: &TestServer, admin_a: &str) {
    let zoo = concat!(env!("CARGO_MANIFEST_DIR"), "/../zoo/");
    let file = |name: &str| {
        reqwest::multipart::Part::bytes(std::fs::read(format!("{zoo}{name}")).unwrap())
            .file_name(name.to_string())
    };
    let form = reqwest::multipart::Form::new()
        .text("name", "secret-model")
        .text("app", "secret-app")
        .part("model", file("digits-logreg.onnx"))
        .part("validation", file("digits-val.npz"));
    let (status, body) = json(
        s.send(
            s.authed(Method::POST, "/v1/models", admin_a)
                .multipart(form),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let start = std::time::Instant::now();
    loop {
        let (status, m) = s.get("/v1/models/secret-model", admin_a).await;
        assert_eq!(status, StatusCode::OK, "{m}");
        if m["status"] == "ready" {
            break;
        }
        assert_ne!(m["status"], "failed", "{m}");
        assert!(start.elapsed().as_secs() < 120, "model not ready: {m}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // Tenant A can query it (so B's 404 below is isolation, not a broken model).
    let (status, answer) = json(
        s.send(
            s.authed(Method::POST, "/v1/apps/secret-app/infer", admin_a)
                .header("content-type", "application/json")
                .body(INFER_BODY),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
}

/// Resources of tenant A by placeholder name, made through the API as A's admin.
async fn resources_of_a(s: &TestServer, admin_a: &str) -> BTreeMap<&'static str, String> {
    let (status, created) = json(
        s.send(
            s.authed(Method::POST, "/v1/api-keys", admin_a)
                .json(&serde_json::json!({ "name": "a-member" })),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    register_model_of_a(s, admin_a).await;
    // A member key: if isolation failed, revoking it would succeed (no last-admin rule).
    let mut r = BTreeMap::new();
    r.insert("model", "secret-model".to_string());
    r.insert("app", "secret-app".to_string());
    r.insert(
        "api_key_id",
        created["key"]["id"].as_str().unwrap().to_string(),
    );
    r
}

fn fill(path: &str, values: &BTreeMap<&'static str, String>) -> String {
    let filled = values.iter().fold(path.to_string(), |p, (name, value)| {
        p.replace(&format!("{{{name}}}"), value)
    });
    assert!(
        !filled.contains('{'),
        "{path}: a placeholder has no resource in resources_of_a"
    );
    filled
}

/// The answer with every filled-in value replaced by its placeholder, to compare answers.
async fn normalized(
    resp: reqwest::Response,
    values: &BTreeMap<&'static str, String>,
) -> (StatusCode, String) {
    let (status, body) = json(resp).await;
    let text = values.iter().fold(body.to_string(), |t, (name, value)| {
        t.replace(value.as_str(), &format!("{{{name}}}"))
    });
    (status, text)
}

async fn foreign_ids_look_missing(b: &Backends) {
    let s = TestServer::start(b).await;
    let a = s.tenant("tenant-a").await;
    let b_tenant = s.tenant("tenant-b").await;
    let admin_a = s.token(&a.admin_key).await;
    let admin_b = s.token(&b_tenant.admin_key).await;
    let of_a = resources_of_a(&s, &admin_a).await;
    let nowhere: BTreeMap<&'static str, String> = of_a
        .keys()
        .map(|k| (*k, uuid::Uuid::new_v4().to_string()))
        .collect();

    for (method, path, body) in FOREIGN_ID_ROUTES {
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let request = |values: &BTreeMap<&'static str, String>| {
            let req = s.authed(method.clone(), &fill(path, values), &admin_b);
            match body {
                Some(b) => req
                    .header("content-type", "application/json")
                    .body(b.to_string()),
                None => req,
            }
        };
        let foreign = normalized(s.send(request(&of_a)).await, &of_a).await;
        let missing = normalized(s.send(request(&nowhere)).await, &nowhere).await;
        assert_eq!(
            foreign.0,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            foreign.1
        );
        assert_eq!(
            foreign, missing,
            "{method} {path}: tenant A's resource answers differently from a missing one"
        );
        assert!(
            foreign.1.contains("\"error_type\":\"not_found\""),
            "{}",
            foreign.1
        );
        assert!(
            !foreign.1.contains(&a.id) && !foreign.1.contains("tenant-a"),
            "{method} {path} leaks tenant A: {}",
            foreign.1
        );
    }

    // Tenant A's resources are untouched.
    let (status, m) = s.get("/v1/models/secret-model", &admin_a).await;
    assert_eq!(
        (status, m["status"].as_str()),
        (StatusCode::OK, Some("ready")),
        "{m}"
    );
    let (status, list) = s.get("/v1/api-keys", &admin_a).await;
    assert_eq!(status, StatusCode::OK);
    let keys = list["keys"].as_array().unwrap();
    let member = keys
        .iter()
        .find(|k| k["id"] == of_a["api_key_id"].as_str())
        .expect("A's key is still listed");
    assert!(member["revoked_at_ms"].is_null(), "{member}");
    s.stop().await;
}

fn ids(list: &Value) -> Vec<String> {
    list["keys"]
        .as_array()
        .expect("a key list")
        .iter()
        .map(|k| k["id"].as_str().unwrap().to_string())
        .collect()
}

async fn listings_and_me_show_only_the_caller(b: &Backends) {
    let s = TestServer::start(b).await;
    let a = s.tenant("tenant-a").await;
    let b_tenant = s.tenant("tenant-b").await;
    let admin_a = s.token(&a.admin_key).await;
    let admin_b = s.token(&b_tenant.admin_key).await;
    resources_of_a(&s, &admin_a).await;

    let (_, list_a) = s.get("/v1/api-keys", &admin_a).await;
    let (_, list_b) = s.get("/v1/api-keys", &admin_b).await;
    let (ids_a, ids_b) = (ids(&list_a), ids(&list_b));
    assert_eq!(ids_a.len(), 2, "{list_a}");
    assert_eq!(
        ids_b,
        std::slice::from_ref(&b_tenant.admin_key_id),
        "{list_b}"
    );
    let text_b = list_b.to_string();
    for id in &ids_a {
        assert!(
            !text_b.contains(id.as_str()),
            "B's listing shows A's key {id}"
        );
    }

    for (tenant, token, other) in [(&a, &admin_a, &b_tenant), (&b_tenant, &admin_b, &a)] {
        let (status, me) = s.get("/v1/me", token).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(me["tenant_id"], tenant.id.as_str());
        assert_eq!(me["tenant"], tenant.name.as_str());
        let text = me.to_string();
        assert!(
            !text.contains(&other.id) && !text.contains(&other.name),
            "{}'s /v1/me mentions {}: {text}",
            tenant.name,
            other.name
        );
    }
    s.stop().await;
}
