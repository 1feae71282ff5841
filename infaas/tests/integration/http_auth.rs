//! Authentication over HTTP on both backend pairs: exchanging API keys for tokens, and every
//! way a request to an authenticated route can fail (each a 401 with the JSON error body and
//! a `WWW-Authenticate` challenge).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use infaas_control::tenancy::{Claims, TokenIssuer};
use infaas_core::{time::now_ms, Role};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};
use reqwest::{Method, StatusCode};

use common::backends::{on_both_pairs, Backends};
use common::{expect_error, json, TestServer};

on_both_pairs!(
    token_exchange,
    token_exchange_rejects_bad_requests,
    authenticated_routes_reject_bad_credentials,
);

/// Where the server keeps its generated signing secret (`jwt_secret` unset).
const JWT_SECRET_SETTING: &str = "jwt_hs256_secret";

async fn token_exchange(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;

    let (status, body) = json(s.exchange(&t.admin_key).await).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["token_type"], "Bearer");
    assert_eq!(body["expires_in"], 900, "expires_in is the configured ttl");
    let token = body["access_token"].as_str().expect("a token");
    assert_eq!(token.split('.').count(), 3, "a JWT: {token}");

    let (status, me) = s.get("/v1/me", token).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["tenant"], "acme");
    assert_eq!(me["tenant_id"], t.id.as_str());
    assert_eq!(me["api_key_id"], t.admin_key_id.as_str());
    assert_eq!(me["role"], "admin");

    let msg = expect_error(
        s.exchange("infaas_notakeyatall").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    assert!(msg.contains("unknown or revoked"), "{msg}");
    expect_error(
        s.exchange("").await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;

    // A key revoked through the API can no longer be exchanged.
    let created = s
        .send(
            s.authed(Method::POST, "/v1/api-keys", token)
                .json(&serde_json::json!({ "name": "ci" })),
        )
        .await;
    let (status, created) = json(created).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let key = created["api_key"].as_str().unwrap().to_string();
    let key_id = created["key"]["id"].as_str().unwrap().to_string();
    s.token(&key).await;
    let revoked = s
        .send(s.authed(Method::DELETE, &format!("/v1/api-keys/{key_id}"), token))
        .await;
    assert_eq!(revoked.status(), StatusCode::OK);
    expect_error(
        s.exchange(&key).await,
        StatusCode::UNAUTHORIZED,
        "unauthorized",
    )
    .await;
    s.stop().await;
}

async fn token_exchange_rejects_bad_requests(b: &Backends) {
    let s = TestServer::start(b).await;
    let url = s.url("/v1/auth/token");
    let post = |content_type: &'static str, body: &'static str| {
        s.http
            .post(&url)
            .header(CONTENT_TYPE, content_type)
            .body(body)
            .send()
    };

    let resp = post("application/json", r#"{"api_key": "#).await.unwrap();
    let msg = expect_error(resp, StatusCode::BAD_REQUEST, "bad_request").await;
    assert!(msg.contains("invalid JSON body"), "{msg}");

    let resp = post("text/plain", r#"{"api_key": "infaas_x"}"#)
        .await
        .unwrap();
    let msg = expect_error(
        resp,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;
    assert!(msg.to_lowercase().contains("content-type"), "{msg}");
    let resp = s
        .http
        .post(&url)
        .body(r#"{"api_key": "x"}"#)
        .send()
        .await
        .unwrap();
    expect_error(
        resp,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    )
    .await;

    // Well-formed JSON of the wrong shape: a 4xx that names the field.
    for (body, field) in [
        ("{}", "api_key"),
        (r#"{"api_key": 5}"#, "api_key"),
        (r#"{"api_key": "x", "admin": true}"#, "admin"),
        ("[]", ""),
    ] {
        let resp = s
            .http
            .post(&url)
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        let status = resp.status();
        assert!(status.is_client_error(), "{body}: {status}");
        let msg = expect_error(resp, status, "bad_request").await;
        assert!(msg.contains(field), "{body}: {msg}");
    }
    s.stop().await;
}

fn b64(json: &serde_json::Value) -> String {
    URL_SAFE_NO_PAD.encode(serde_json::to_vec(json).unwrap())
}

async fn authenticated_routes_reject_bad_credentials(b: &Backends) {
    let s = TestServer::start(b).await;
    let t = s.tenant("acme").await;
    let admin = s.token(&t.admin_key).await;

    // The server's own secret, as any controller sharing the database reads it.
    let secret = s
        .db()
        .get_setting(JWT_SECRET_SETTING)
        .await
        .unwrap()
        .expect("the server generated and stored a signing secret");
    let issuer = TokenIssuer::new(secret.as_bytes(), Duration::from_secs(60));
    let now = now_ms() / 1000;
    let claims = |exp: i64, iss: &str| Claims {
        sub: t.admin_key_id.clone(),
        tid: t.id.clone(),
        role: Role::Admin,
        iss: iss.into(),
        iat: now - 7200,
        exp,
    };
    let sign = |alg: Algorithm, claims: &Claims, key: &[u8]| {
        jsonwebtoken::encode(&Header::new(alg), claims, &EncodingKey::from_secret(key)).unwrap()
    };

    // Controls: tokens made with that secret work, so the failures below have the stated cause.
    let minted = issuer.issue(&t.admin_key_id, &t.id, Role::Admin).unwrap();
    for token in [&admin, &minted] {
        let (status, body) = s.get("/v1/me", token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let fresh = sign(
        Algorithm::HS256,
        &claims(now + 600, "infaas"),
        secret.as_bytes(),
    );
    assert_eq!(s.get("/v1/me", &fresh).await.0, StatusCode::OK);

    let expired = sign(
        Algorithm::HS256,
        &claims(now - 3600, "infaas"),
        secret.as_bytes(),
    );
    assert!(issuer.verify(&expired).is_err());
    let wrong_key = TokenIssuer::new(&[7u8; 32], Duration::from_secs(60))
        .issue(&t.admin_key_id, &t.id, Role::Admin)
        .unwrap();
    let wrong_issuer = sign(
        Algorithm::HS256,
        &claims(now + 600, "evil"),
        secret.as_bytes(),
    );
    let hs512 = sign(
        Algorithm::HS512,
        &claims(now + 600, "infaas"),
        secret.as_bytes(),
    );
    let claims_json = serde_json::to_value(claims(now + 600, "infaas")).unwrap();
    let alg_none = format!(
        "{}.{}.",
        b64(&serde_json::json!({ "alg": "none", "typ": "JWT" })),
        b64(&claims_json)
    );
    // A valid signature over other claims: the payload is swapped for one naming a member.
    let mut member_claims = claims_json.clone();
    member_claims["role"] = "member".into();
    let parts: Vec<&str> = admin.split('.').collect();
    let tampered = format!("{}.{}.{}", parts[0], b64(&member_claims), parts[2]);

    // A key revoked through the API: its earlier token (already used, so cached) stops working.
    let (status, created) = json(
        s.send(
            s.authed(Method::POST, "/v1/api-keys", &admin)
                .json(&serde_json::json!({ "name": "soon-revoked" })),
        )
        .await,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let revoked_token = s.token(created["api_key"].as_str().unwrap()).await;
    assert_eq!(s.get("/v1/me", &revoked_token).await.0, StatusCode::OK);
    let key_id = created["key"]["id"].as_str().unwrap();
    let resp = s
        .send(s.authed(Method::DELETE, &format!("/v1/api-keys/{key_id}"), &admin))
        .await;
    assert_eq!(resp.status(), StatusCode::OK);

    // A tenant deleted (with its keys) after its token was issued.
    let doomed = s.tenant("doomed").await;
    let orphan_token = s.token(&doomed.admin_key).await;
    sqlx::query("DELETE FROM tenants WHERE id = $1")
        .bind(&doomed.id)
        .execute(s.db().pool())
        .await
        .unwrap();

    let bearer = |t: &str| Some(format!("Bearer {t}"));
    let cases: Vec<(&str, Option<String>, &str)> = vec![
        ("no Authorization header", None, "missing Authorization"),
        ("Basic scheme", Some("Basic dXNlcjpwYXNz".into()), "Bearer"),
        ("token without scheme", Some(admin.clone()), "Bearer"),
        ("empty token", Some("Bearer ".into()), ""),
        ("blank token", Some("Bearer    ".into()), ""),
        ("malformed token", bearer("not-a-jwt"), "malformed"),
        ("three garbage parts", bearer("abc.def.ghi"), ""),
        ("expired token", bearer(&expired), "expired"),
        ("wrongly signed token", bearer(&wrong_key), "signature"),
        ("tampered claims", bearer(&tampered), "signature"),
        ("foreign issuer", bearer(&wrong_issuer), "issued"),
        ("HS512 token", bearer(&hs512), "algorithm"),
        ("alg none token", bearer(&alg_none), ""),
        ("token of a revoked key", bearer(&revoked_token), "revoked"),
        ("token of a deleted tenant", bearer(&orphan_token), ""),
    ];
    // Every authenticated route refuses the same way.
    let routes = [
        (Method::GET, "/v1/me"),
        (Method::GET, "/v1/api-keys"),
        (Method::POST, "/v1/api-keys"),
        (Method::DELETE, "/v1/api-keys/some-id"),
    ];
    for (what, header, says) in cases {
        for (method, path) in &routes {
            let mut req = s.http.request(method.clone(), s.url(path));
            if let Some(h) = &header {
                req = req.header(AUTHORIZATION, h);
            }
            if *method == Method::POST {
                req = req.json(&serde_json::json!({ "name": "x" }));
            }
            let resp = req.send().await.unwrap();
            assert_eq!(
                resp.status(),
                StatusCode::UNAUTHORIZED,
                "{what}: {method} {path}"
            );
            let msg = expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;
            assert!(msg.contains(says), "{what}: {method} {path}: {msg}");
        }
    }
    // The good tokens still work afterwards.
    assert_eq!(s.get("/v1/me", &admin).await.0, StatusCode::OK);
    s.stop().await;
}
