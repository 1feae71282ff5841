//! Per-tenant quotas on both backend pairs: the request rate (429 with `Retry-After`, other
//! tenants unaffected) and the storage limits checked before anything new is stored.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use std::time::Duration;

use axum::response::IntoResponse;
use infaas_api::error::ApiError;
use infaas_control::tenancy::check_storage;
use infaas_core::Quotas;
use infaas_store::ObjectRecord;
use reqwest::StatusCode;

use common::backends::{on_both_pairs, Backends};
use common::{expect_error, TestServer};

on_both_pairs!(
    request_rate_is_limited_per_tenant,
    storage_quotas_name_the_limit
);

/// Sends `n` GET /v1/me at once; returns the answers.
async fn burst(s: &TestServer, token: &str, n: usize) -> Vec<reqwest::Response> {
    let sends = (0..n).map(|_| s.send(s.authed(reqwest::Method::GET, "/v1/me", token)));
    futures::future::join_all(sends).await
}

async fn request_rate_is_limited_per_tenant(b: &Backends) {
    let s = TestServer::start(b).await;
    let slow = s.tenant("slow").await;
    let other = s.tenant("other").await;
    // Before the tenant's first request, so the limiter reads these quotas.
    s.db()
        .set_tenant_quotas(
            &slow.id,
            Quotas {
                requests_per_second: 2.0,
                ..Quotas::default()
            },
        )
        .await
        .unwrap();
    let slow_token = s.token(&slow.admin_key).await;
    let other_token = s.token(&other.admin_key).await;

    let answers = burst(&s, &slow_token, 10).await;
    let mut ok = 0;
    let mut retry_after = Vec::new();
    for resp in answers {
        if resp.status() == StatusCode::OK {
            ok += 1;
            continue;
        }
        let header = resp
            .headers()
            .get("retry-after")
            .expect("a 429 without Retry-After")
            .to_str()
            .unwrap()
            .parse::<u64>()
            .expect("Retry-After in seconds");
        retry_after.push(header);
        let msg = expect_error(resp, StatusCode::TOO_MANY_REQUESTS, "rate_limited").await;
        assert!(msg.contains("2 requests per second"), "{msg}");
    }
    // A burst of two seconds' worth (4) passes, the rest is refused.
    assert!((1..=6).contains(&ok), "{ok} of 10 passed");
    assert!(retry_after.len() >= 4, "only {} refused", retry_after.len());
    assert!(
        retry_after.iter().all(|&s| (1..=2).contains(&s)),
        "{retry_after:?}"
    );

    // Another tenant is not affected, even while the first one is limited.
    for resp in burst(&s, &other_token, 10).await {
        assert_eq!(resp.status(), StatusCode::OK);
    }
    // After the advertised wait the limited tenant is served again.
    let wait = retry_after.iter().max().copied().unwrap_or(1);
    tokio::time::sleep(Duration::from_secs(wait)).await;
    assert_eq!(s.get("/v1/me", &slow_token).await.0, StatusCode::OK);
    s.stop().await;
}

/// The answer a quota error gives a client: status and JSON body.
async fn as_http(e: impl Into<ApiError>) -> (StatusCode, serde_json::Value) {
    let resp = e.into().into_response();
    let status = resp.status();
    let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, serde_json::from_slice(&bytes).unwrap())
}

async fn storage_quotas_name_the_limit(b: &Backends) {
    let s = TestServer::start(b).await;
    let state = &s.server.state;
    let small = s.tenant("small").await;
    let other = s.tenant("other").await;
    s.db()
        .set_tenant_quotas(
            &small.id,
            Quotas {
                requests_per_second: 100.0,
                max_models: 0,
                max_stored_bytes: 1000,
            },
        )
        .await
        .unwrap();

    check_storage(&state.db, &small.id, 0, 0).await.unwrap();
    let err = check_storage(&state.db, &small.id, 1, 0).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("model quota") && msg.contains("at most 0 models"),
        "{msg}"
    );
    let (status, body) = as_http(err).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(body["error_type"], "quota_exceeded");

    s.db()
        .record_object(&ObjectRecord {
            key: format!("tenants/{}/models/m/source.onnx", small.id),
            tenant_id: small.id.clone(),
            size_bytes: 600,
            owner_kind: "model".into(),
            owner_id: "m".into(),
        })
        .await
        .unwrap();
    // Up to the limit is allowed; one byte more is not.
    check_storage(&state.db, &small.id, 0, 400).await.unwrap();
    let err = check_storage(&state.db, &small.id, 0, 401)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("storage quota") && msg.contains("600") && msg.contains("1000"),
        "{msg}"
    );
    let (status, body) = as_http(err).await;
    assert_eq!(
        (status, body["error_type"].as_str()),
        (StatusCode::FORBIDDEN, Some("quota_exceeded"))
    );

    // The other tenant's usage and limits are its own.
    check_storage(&state.db, &other.id, 1, 401).await.unwrap();
    let (_, me_small) = s.get("/v1/me", &s.token(&small.admin_key).await).await;
    let (_, me_other) = s.get("/v1/me", &s.token(&other.admin_key).await).await;
    assert_eq!(me_small["stored_bytes"], 600, "{me_small}");
    assert_eq!(me_small["quotas"]["max_stored_bytes"], 1000);
    assert_eq!(me_other["stored_bytes"], 0, "{me_other}");
    s.stop().await;
}
