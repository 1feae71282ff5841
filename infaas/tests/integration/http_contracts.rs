//! Requests that the OpenAPI document once called valid and the server refused: each is now
//! outside the schema, or (a what-if cluster without a worker, which no schema can state) a
//! documented 422; every refusal names the field. openapi.rs checks the schema's side.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use common::backends::Backends;
use common::{expect_error, TestServer};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

/// A pipeline document the schema accepts (the registry then decides on `small`).
fn pipeline() -> Value {
    json!({
        "name": "contract",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [64]}],
        "nodes": [
            {"name": "a", "app": "small"},
            {"name": "b", "app": "small"},
            {"name": "both", "combine": "mean", "from": ["a.output", "b.output"]}
        ],
        "outputs": {"y": "both.output"}
    })
}

async fn post(s: &TestServer, token: &str, path: &str, body: &Value) -> reqwest::Response {
    s.send(s.authed(Method::POST, path, token).json(body)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_document_without_a_name_is_refused_naming_it() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    let t = s.tenant("acme").await;
    let token = s.token(&t.admin_key).await;
    let mut doc = pipeline();
    doc.as_object_mut().unwrap().remove("name");
    let m = expect_error(
        post(&s, &token, "/v1/pipelines", &doc).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert!(m.contains("missing field `name`"), "{m}");
    // The same document with its name gets past the document's checks to the registry's.
    let m = expect_error(
        post(&s, &token, "/v1/pipelines", &pipeline()).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
    assert!(m.contains("small"), "{m}");
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_outside_the_documented_sets_are_refused_naming_the_field() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    let t = s.tenant("acme").await;
    let token = s.token(&t.admin_key).await;

    // A node's combiner outside `mean`, `vote`, `concat`, `first`.
    let mut doc = pipeline();
    doc["nodes"][2]["combine"] = json!("median");
    let m = expect_error(
        post(&s, &token, "/v1/pipelines", &doc).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert!(
        m.contains("nodes[2].combine") && m.contains("median"),
        "{m}"
    );
    assert!(m.contains("vote"), "{m}");

    // An input datatype outside the Open Inference Protocol's.
    let mut doc = pipeline();
    doc["inputs"][0]["datatype"] = json!("FP16");
    let m = expect_error(
        post(&s, &token, "/v1/pipelines", &doc).await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert!(m.contains("datatype") && m.contains("FP16"), "{m}");

    // A model's task outside the supported ones (the form's other fields are fine).
    let form = reqwest::multipart::Form::new()
        .text("name", "m")
        .text("app", "a")
        .text("task", "detection");
    let m = expect_error(
        s.send(s.authed(Method::POST, "/v1/models", &token).multipart(form))
            .await,
        StatusCode::BAD_REQUEST,
        "bad_request",
    )
    .await;
    assert!(
        m.contains("task 'detection'") && m.contains("classification"),
        "{m}"
    );
    s.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whatif_cluster_without_a_worker_is_unprocessable() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    let t = s.tenant("acme").await;
    let token = s.token(&t.admin_key).await;
    let trace = json!({"generate": "poisson:rate=5,duration=10,app=digits,slo=100"});
    for sizes in [
        json!({"cpu_workers": 0, "gpu_workers": 0}),
        // gpu_workers not given: the live GPU workers, none here.
        json!({"cpu_workers": 0}),
    ] {
        let mut body = json!({"trace": trace, "policies": ["horizontal"]});
        body.as_object_mut()
            .unwrap()
            .extend(sizes.as_object().unwrap().clone());
        let m = expect_error(
            post(&s, &token, "/v1/whatif", &body).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "unprocessable",
        )
        .await;
        assert!(m.contains("needs a worker"), "{sizes}: {m}");
        assert!(
            m.contains("cpu_workers") && m.contains("gpu_workers"),
            "{sizes}: {m}"
        );
    }
    s.stop().await;
}
