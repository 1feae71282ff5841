//! Roles inside a tenant, on both backend pairs: only admin keys manage API keys, and a
//! tenant always keeps one active admin key.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use reqwest::{Method, StatusCode};
use serde_json::{json as body, Value};

use common::backends::{on_both_pairs, Backends};
use common::{expect_error, json, TestServer};

on_both_pairs!(
    members_cannot_manage_keys,
    admins_manage_keys,
    last_admin_key_stays
);

/// POST /v1/api-keys as `token`; the status and body.
async fn create_key(s: &TestServer, token: &str, request: Value) -> (StatusCode, Value) {
    json(
        s.send(s.authed(Method::POST, "/v1/api-keys", token).json(&request))
            .await,
    )
    .await
}

async fn revoke(s: &TestServer, token: &str, id: &str) -> reqwest::Response {
    s.send(s.authed(Method::DELETE, &format!("/v1/api-keys/{id}"), token))
        .await
}

async fn members_cannot_manage_keys(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;
    let admin = s.token(&t.admin_key).await;
    let (status, created) = create_key(&s, &admin, body!({ "name": "alice" })).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(
        created["key"]["role"], "member",
        "member is the default role"
    );
    let member = s.token(created["api_key"].as_str().unwrap()).await;
    let (status, me) = s.get("/v1/me", &member).await;
    assert_eq!(
        (status, me["role"].as_str()),
        (StatusCode::OK, Some("member"))
    );

    let forbidden = [
        s.authed(Method::POST, "/v1/api-keys", &member)
            .json(&body!({ "name": "sneaky", "role": "admin" })),
        s.authed(Method::GET, "/v1/api-keys", &member),
        s.authed(
            Method::DELETE,
            &format!("/v1/api-keys/{}", t.admin_key_id),
            &member,
        ),
    ];
    for req in forbidden {
        let msg = expect_error(s.send(req).await, StatusCode::FORBIDDEN, "forbidden").await;
        assert!(msg.contains("admin"), "{msg}");
    }
    // Nothing changed: still two keys, the admin key active.
    let (status, list) = s.get("/v1/api-keys", &admin).await;
    assert_eq!(status, StatusCode::OK);
    let keys = list["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2, "{list}");
    assert!(keys.iter().all(|k| k["revoked_at_ms"].is_null()), "{list}");
    s.stop().await;
}

async fn admins_manage_keys(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;
    let admin = s.token(&t.admin_key).await;

    let (status, created) = create_key(&s, &admin, body!({ "name": "ops", "role": "admin" })).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let secret = created["api_key"].as_str().unwrap().to_string();
    assert!(secret.starts_with("infaas_"), "{secret}");
    let view = &created["key"];
    assert_eq!(view["name"], "ops");
    assert_eq!(view["role"], "admin");
    assert!(secret.starts_with(view["prefix"].as_str().unwrap()));
    assert!(view["revoked_at_ms"].is_null());

    // The new key works: exchanged for a token that acts as that key.
    let ops = s.token(&secret).await;
    let (status, me) = s.get("/v1/me", &ops).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["api_key_id"], view["id"]);
    assert_eq!(me["role"], "admin");

    let (status, list) = s.get("/v1/api-keys", &ops).await;
    assert_eq!(status, StatusCode::OK);
    let names: Vec<&str> = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "ops"]);
    let listing = list.to_string();
    assert!(!listing.contains(&secret) && !listing.contains(&t.admin_key));
    assert!(!listing.contains("secret_hash"), "{listing}");

    for (request, field) in [
        (body!({ "name": "x", "role": "root" }), "role"),
        (body!({ "name": "  " }), "name"),
        (body!({ "name": "n".repeat(129) }), "name"),
        (body!({ "role": "member" }), "name"),
    ] {
        let resp = s
            .send(
                s.authed(Method::POST, "/v1/api-keys", &admin)
                    .json(&request),
            )
            .await;
        let status = resp.status();
        assert!(status.is_client_error(), "{request}: {status}");
        let msg = expect_error(resp, status, "bad_request").await;
        assert!(msg.contains(field), "{request}: {msg}");
    }

    // Revoking: the answer shows the revocation; a second time the key is gone.
    let (status, revoked) = json(revoke(&s, &admin, view["id"].as_str().unwrap()).await).await;
    assert_eq!(status, StatusCode::OK, "{revoked}");
    assert!(revoked["revoked_at_ms"].is_i64(), "{revoked}");
    let again = revoke(&s, &admin, view["id"].as_str().unwrap()).await;
    expect_error(again, StatusCode::NOT_FOUND, "not_found").await;
    s.stop().await;
}

async fn last_admin_key_stays(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;
    let first = s.token(&t.admin_key).await;

    let msg = expect_error(
        revoke(&s, &first, &t.admin_key_id).await,
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    assert!(msg.contains("last admin key"), "{msg}");

    // With a second admin key the first can go; then the second is the last one.
    let (status, created) =
        create_key(&s, &first, body!({ "name": "next", "role": "admin" })).await;
    assert_eq!(status, StatusCode::CREATED);
    let second_id = created["key"]["id"].as_str().unwrap().to_string();
    let second = s.token(created["api_key"].as_str().unwrap()).await;
    // Member keys do not count as admins.
    let (status, _) = create_key(&s, &second, body!({ "name": "m" })).await;
    assert_eq!(status, StatusCode::CREATED);

    assert_eq!(
        revoke(&s, &second, &t.admin_key_id).await.status(),
        StatusCode::OK
    );
    expect_error(
        revoke(&s, &second, &second_id).await,
        StatusCode::CONFLICT,
        "conflict",
    )
    .await;
    let (status, me) = s.get("/v1/me", &second).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    s.stop().await;
}
