//! Liveness, readiness, metrics, and the answers every route shares: body limit, unknown
//! route, wrong method. Readiness runs on both backend pairs (see common/backends.rs).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use std::time::Duration;

use common::backends::{on_both_pairs, Backends};
use common::{expect_error, json, TestServer};
use reqwest::StatusCode;

on_both_pairs!(health_and_readiness);

async fn health_and_readiness(b: &Backends) {
    let s = TestServer::start(b).await;
    let (status, body) = json(s.http.get(s.url("/healthz")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["status"], "ok");
    assert_eq!(body["version"], env!("CARGO_PKG_VERSION"));

    let (status, body) = json(s.http.get(s.url("/readyz")).send().await.unwrap()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ready");
    assert_eq!(body["database"], "ok");
    assert_eq!(body["object_store"], "ok");
    s.stop().await;
}

async fn readiness(s: &TestServer) -> (StatusCode, serde_json::Value) {
    json(s.http.get(s.url("/readyz")).send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_while_the_object_directory_is_unusable() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    let dir = std::path::PathBuf::from(&b.object_store);
    assert_eq!(readiness(&s).await.0, StatusCode::OK);

    // Removed: works as root too (permission bits would not stop root from writing).
    std::fs::remove_dir_all(&dir).unwrap();
    let (status, body) = readiness(&s).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["database"], "ok");
    assert_ne!(body["object_store"], "ok");

    // Replaced by a plain file: still no place to keep objects.
    std::fs::write(&dir, b"not a directory").unwrap();
    let (status, body) = readiness(&s).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_ne!(body["object_store"], "ok");

    // Back again: ready.
    std::fs::remove_file(&dir).unwrap();
    std::fs::create_dir(&dir).unwrap();
    let (status, body) = readiness(&s).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_is_503_when_s3_does_not_answer() {
    let b = Backends::embedded();
    // A port that was free a moment ago: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let s = TestServer::start_with(&b, |c| {
        c.object_store = Some("s3://infaas-test/readyz".into());
        c.s3_endpoint = Some(format!("http://{closed}"));
        c.s3_region = Some("us-east-1".into());
    })
    .await;
    let started = std::time::Instant::now();
    let (status, body) = readiness(&s).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    assert_eq!(body["database"], "ok");
    assert!(
        body["object_store"]
            .as_str()
            .unwrap_or_default()
            .contains("S3"),
        "{body}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "readiness took {:?}",
        started.elapsed()
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_by_route_and_status() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    for _ in 0..3 {
        s.http.get(s.url("/healthz")).send().await.unwrap();
    }
    s.exchange("infaas_unknown").await;
    s.http.get(s.url("/no/such/route")).send().await.unwrap();

    let resp = s.http.get(s.url("/metrics")).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = resp.text().await.unwrap();
    let line_with = |metric: &str, labels: &[&str]| {
        text.lines().find(|l| {
            l.starts_with(&format!("{metric}{{")) && labels.iter().all(|lab| l.contains(lab))
        })
    };
    let healthz = line_with(
        "infaas_http_requests_total",
        &["method=\"GET\"", "route=\"/healthz\"", "status=\"200\""],
    )
    .unwrap_or_else(|| panic!("no healthz counter in:\n{text}"));
    let count: f64 = healthz.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(count >= 3.0, "{healthz}");
    assert!(
        line_with(
            "infaas_http_requests_total",
            &["route=\"/v1/auth/token\"", "status=\"401\""]
        )
        .is_some(),
        "{text}"
    );
    assert!(
        line_with("infaas_http_requests_total", &["status=\"404\""]).is_some(),
        "{text}"
    );
    // Unmatched paths must not become labels (one series per probe URL would explode).
    assert!(!text.contains("/no/such/route"), "{text}");
    for part in ["_bucket", "_sum", "_count"] {
        assert!(
            line_with(
                &format!("infaas_http_request_duration_seconds{part}"),
                &["route=\"/healthz\""]
            )
            .is_some(),
            "no latency histogram {part} in:\n{text}"
        );
    }
    assert!(text.contains("le=\"0.005\""), "histogram buckets: {text}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_bodies_unknown_routes_and_wrong_methods_answer_json() {
    let b = Backends::embedded();
    let s = TestServer::start_with(&b, |c| c.max_body_bytes = 4096).await;
    let token_url = s.url("/v1/auth/token");
    let body_of = |key_len: usize| format!(r#"{{"api_key":"{}"}}"#, "k".repeat(key_len));

    // Just under the limit: read, and refused as an unknown key.
    let resp = s
        .http
        .post(&token_url)
        .header("content-type", "application/json")
        .body(body_of(4000))
        .send()
        .await
        .unwrap();
    expect_error(resp, StatusCode::UNAUTHORIZED, "unauthorized").await;

    let resp = s
        .http
        .post(&token_url)
        .header("content-type", "application/json")
        .body(body_of(5000))
        .send()
        .await
        .unwrap();
    let msg = expect_error(resp, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;
    assert!(msg.contains("JSON body"), "{msg}");

    // Chunked, without Content-Length: the limit holds while reading.
    let chunks: Vec<Result<String, std::io::Error>> = vec![
        Ok(r#"{"api_key":""#.into()),
        Ok("k".repeat(8000)),
        Ok(r#""}"#.into()),
    ];
    let resp = s
        .http
        .post(&token_url)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(chunks)))
        .send()
        .await
        .unwrap();
    // The unread rest of the body makes the connection unusable: the answer says so, so the
    // client does not send the next request on it.
    assert_eq!(
        resp.headers().get("connection").map(|v| v.as_bytes()),
        Some(&b"close"[..])
    );
    expect_error(resp, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large").await;

    let resp = s.http.get(s.url("/v1/no-such-thing")).send().await.unwrap();
    let msg = expect_error(resp, StatusCode::NOT_FOUND, "not_found").await;
    assert!(msg.contains("/v1/no-such-thing"), "{msg}");

    let resp = s.http.get(&token_url).send().await.unwrap();
    let msg = expect_error(resp, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    assert!(msg.contains("GET"), "{msg}");
    let resp = s.http.delete(s.url("/healthz")).send().await.unwrap();
    expect_error(resp, StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed").await;
    s.stop().await;
}
