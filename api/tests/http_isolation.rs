//! Tenant isolation on both backend pairs: another tenant's resources are invisible, and
//! reaching one by its id looks exactly like reaching an id that does not exist.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

mod common;

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
const FOREIGN_ID_ROUTES: &[(&str, &str, Option<&str>)] =
    &[("DELETE", "/v1/api-keys/{api_key_id}", None)];

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
    // A member key: if isolation failed, revoking it would succeed (no last-admin rule).
    let mut r = BTreeMap::new();
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
