//! Online queries end to end, against an in-process server: model-less selection by SLO and
//! accuracy, queries by model, bad input, the Open Inference Protocol with the unmodified
//! `tritonclient.http` client, and queries that survive a worker process being killed.
//!
//! `cargo test -p infaas-api --test serving`. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the
//! `scripts/setup.sh` cache); the tritonclient test needs `python3` with `tritonclient[http]`,
//! `onnxruntime` and `numpy` (installed by `scripts/test.sh`).

#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::path::Path;
use std::time::{Duration, Instant};

use registry_common::backends::Backends;
use registry_common::workers::spawn_worker;
use registry_common::{
    digit_row, fast_config, open_quotas, ort_library, zoo_arrays, Platform, Registration, Tenant,
    ZOO,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

const APP: &str = "digits";
const READY: Duration = Duration::from_secs(180);

async fn post(p: &Platform, t: &Tenant, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = p
        .http
        .post(format!("{}{path}", p.base))
        .bearer_auth(&t.token)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn register_zoo(p: &Platform, t: &Tenant) {
    for (name, _, _) in ZOO {
        p.register_ok(t, &Registration::zoo(name, APP)).await;
    }
    for (name, _, _) in ZOO {
        p.wait_ready(t, name, READY).await;
    }
}

/// Smallest p99 at batch 1 over a model's variants, from its profile.
async fn best_p99(p: &Platform, t: &Tenant, model: &str) -> f64 {
    let m = p.model(t, model).await;
    m["variants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["latency"][0]["p99_ms"].as_f64())
        .fold(f64::INFINITY, f64::min)
}

async fn selection_follows_slo_and_accuracy(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let mut cfg = fast_config(b, &ort);
    cfg.profile_runs = 20;
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    register_zoo(&p, &t).await;

    // Only the large MLP reaches 0.98 (zoo/README.md): an accuracy floor picks it.
    let (s, accurate) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("input", 0)], "min_accuracy": 0.98}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{accurate}");
    assert_eq!(accurate["model"], "digits-mlp-l", "{accurate}");
    assert!(accurate["accuracy"].as_f64().unwrap() >= 0.98);
    assert!(accurate["reason"].as_str().unwrap().len() > 10);
    assert_eq!(accurate["outputs"][0]["name"], "label");

    // A latency SLO below the best measured p99 of one model S (the large MLP unless the
    // profiles measured it fastest) and above another's picks a model other than S that
    // meets a lower accuracy floor. Profiles are measured, so S is chosen from them.
    let mut best = Vec::new();
    for m in [
        "digits-logreg",
        "digits-mlp-m",
        "digits-mlp-l",
        "digits-forest",
        "digits-mlp-scores",
    ] {
        best.push((best_p99(&p, &t, m).await, m));
    }
    best.sort_by(|a, b| a.0.total_cmp(&b.0));
    let fastest = best[0];
    let slow = if fastest.1 != "digits-mlp-l" {
        *best.iter().find(|b| b.1 == "digits-mlp-l").unwrap()
    } else {
        *best.last().unwrap()
    };
    assert!(fastest.0 < slow.0, "profiles: {best:?}");
    let slo = (fastest.0 + slow.0) / 2.0;
    let (s, fast) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("input", 1)], "min_accuracy": 0.95, "latency_ms": slo}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{fast}");
    assert_ne!(
        fast["model"], slow.1,
        "SLO {slo} ms, profiles {best:?}: {fast}"
    );
    assert!(fast["accuracy"].as_f64().unwrap() >= 0.95, "{fast}");
    if slow.1 == "digits-mlp-l" {
        assert_ne!(fast["variant"], accurate["variant"]);
    }
    // The first such query may wait for a load; once loaded, the instance serves within the SLO.
    let (s, again) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("input", 5)], "min_accuracy": 0.95, "latency_ms": slo}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert_ne!(again["model"], slow.1, "{again}");
    assert!(
        again["predicted_ms"].as_f64().unwrap() <= slo + 1e-9,
        "{again}"
    );
    assert!(
        again["reason"].as_str().unwrap().contains("active"),
        "{again}"
    );

    // Requirements nothing meets: 422 with the closest variant.
    let (s, none) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("input", 2)], "min_accuracy": 0.999}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{none}");
    assert_eq!(none["error_type"], "unsatisfiable");
    assert!(
        none["suggestion"]["accuracy"].as_f64().unwrap() > 0.97,
        "{none}"
    );
    assert!(
        none["suggestion"]["variant"]
            .as_str()
            .unwrap()
            .starts_with("digits-mlp-l."),
        "{none}"
    );

    // Any input name works for single-input models; the two-input model is chosen by names.
    let (s, renamed) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("whatever", 3)]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{renamed}");
    let x = digit_row("x", 4);
    let data = x["data"].as_array().unwrap();
    let left = json!({"name": "left", "shape": [1, 32], "datatype": "FP32", "data": data[..32]});
    let right = json!({"name": "right", "shape": [1, 32], "datatype": "FP32", "data": data[32..]});
    let (s, two) = post(
        &p,
        &t,
        "/v1/apps/digits/infer",
        json!({"inputs": [left, right]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{two}");
    assert_eq!(two["model"], "digits-two-input");

    // Usage is recorded per minute with SLO attainment and cost.
    let usage = p.get(&t, "/v1/apps/digits/usage?minutes=5").await;
    assert_eq!(usage.status, StatusCode::OK, "{}", usage.text);
    assert!(
        usage.body["requests"].as_i64().unwrap() >= 4,
        "{}",
        usage.text
    );
    assert!(usage.body["cost"].as_f64().unwrap() > 0.0, "{}", usage.text);
    // Outside its documented range, `minutes` is refused, not clamped.
    for minutes in ["0", "10081"] {
        let r = p
            .get(&t, &format!("/v1/apps/digits/usage?minutes={minutes}"))
            .await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.text);
        assert!(r.text.contains("between 1 and 10080"), "{}", r.text);
    }
    p.stop().await;
}

async fn bad_queries_name_the_problem(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let p = Platform::start(fast_config(b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-mlp-m", APP))
        .await;
    p.wait_ready(&t, "digits-mlp-m", READY).await;

    let (s, ok) = post(
        &p,
        &t,
        "/v1/models/digits-mlp-m/infer",
        json!({"inputs": [digit_row("input", 0)]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{ok}");
    assert!(ok["variant"].as_str().unwrap().starts_with("digits-mlp-m."));

    let cases = [
        (
            "/v1/apps/nope/infer",
            json!({"inputs": [digit_row("input", 0)]}),
            StatusCode::NOT_FOUND,
            "nope",
        ),
        (
            "/v1/models/nope/infer",
            json!({"inputs": [digit_row("input", 0)]}),
            StatusCode::NOT_FOUND,
            "nope",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 63], "datatype": "FP32", "data": vec![0.0; 63]}]}),
            StatusCode::BAD_REQUEST,
            "63",
        ),
        (
            "/v1/models/digits-mlp-m/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 63], "datatype": "FP32", "data": vec![0.0; 63]}]}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
        (
            "/v1/models/digits-mlp-m/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "INT64", "data": vec![0; 64]}]}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
        (
            "/v1/models/digits-mlp-m/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": vec![0.0; 60]}]}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
        (
            "/v1/models/digits-mlp-m/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP99", "data": vec![0.0; 64]}]}),
            StatusCode::BAD_REQUEST,
            "FP99",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": [digit_row("input", 0)], "min_accuracy": 1.5}),
            StatusCode::BAD_REQUEST,
            "min_accuracy",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": [digit_row("input", 0)], "latency_ms": -1}),
            StatusCode::BAD_REQUEST,
            "latency_ms",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": []}),
            StatusCode::BAD_REQUEST,
            "no inputs",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"input": []}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": [{"name": "input", "shape": [0, 64], "datatype": "FP32", "data": []}]}),
            StatusCode::BAD_REQUEST,
            "each at least 1",
        ),
        (
            "/v1/apps/digits/infer",
            json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": vec!["a"; 64]}]}),
            StatusCode::BAD_REQUEST,
            "input",
        ),
    ];
    for (path, body, status, needle) in cases {
        let (s, answer) = post(&p, &t, path, body.clone()).await;
        assert_eq!(s, status, "{path} {body}: {answer}");
        let msg = answer["error"].as_str().unwrap_or_default();
        assert!(
            msg.contains(needle),
            "{path}: '{msg}' does not mention '{needle}'"
        );
    }
    // Another tenant's model looks missing.
    let other = p.tenant("other", open_quotas()).await;
    let (s, _) = post(
        &p,
        &other,
        "/v1/models/digits-mlp-m/infer",
        json!({"inputs": [digit_row("input", 0)]}),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = post(
        &p,
        &other,
        "/v1/apps/digits/infer",
        json!({"inputs": [digit_row("input", 0)]}),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    compressed_v2_bodies(&p, &t).await;
    // The server still serves.
    let (s, _) = post(
        &p,
        &t,
        "/v1/models/digits-mlp-m/infer",
        json!({"inputs": [digit_row("input", 1)]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    p.stop().await;
}

/// Open Inference Protocol bodies with a `Content-Encoding`: gzip and deflate answer as the
/// plain body does; another encoding is a 415, a corrupt stream a 400, and a stream that
/// inflates past the body limit (8 MiB of zeros in a few KB) a 413, each naming the problem.
async fn compressed_v2_bodies(p: &Platform, t: &Tenant) {
    use std::io::Write;
    let body = serde_json::to_vec(&json!({"inputs": [digit_row("input", 3)]})).unwrap();
    let send = |bytes: Vec<u8>, encoding: &'static str| {
        p.http
            .post(format!("{}/v2/models/digits-mlp-m/infer", p.base))
            .bearer_auth(&t.token)
            .header("content-type", "application/json")
            .header("content-encoding", encoding)
            .body(bytes)
            .send()
    };
    let answer = |r: reqwest::Response| async move {
        let status = r.status();
        let text = r.text().await.unwrap();
        (status, text)
    };
    let (s, plain) = answer(send(body.clone(), "identity").await.unwrap()).await;
    assert_eq!(s, StatusCode::OK, "{plain}");
    let outputs =
        |text: &str| -> Value { serde_json::from_str::<Value>(text).unwrap()["outputs"].clone() };
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&body).unwrap();
    let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    zlib.write_all(&body).unwrap();
    for (bytes, encoding) in [
        (gz.finish().unwrap(), "gzip"),
        (zlib.finish().unwrap(), "deflate"),
    ] {
        let (s, text) = answer(send(bytes, encoding).await.unwrap()).await;
        assert_eq!(s, StatusCode::OK, "{encoding}: {text}");
        assert_eq!(outputs(&text), outputs(&plain), "{encoding}");
    }
    let (s, text) = answer(send(body.clone(), "br").await.unwrap()).await;
    assert_eq!(s, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{text}");
    assert!(text.contains("'br'"), "{text}");
    let (s, text) = answer(send(b"not gzip".to_vec(), "gzip").await.unwrap()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("decompress"), "{text}");
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    bomb.write_all(&vec![0u8; 8 * 1024 * 1024 + 1]).unwrap();
    let bomb = bomb.finish().unwrap();
    assert!(bomb.len() < 64 * 1024, "{}", bomb.len());
    let (s, text) = answer(send(bomb, "gzip").await.unwrap()).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{text}");
    assert!(text.contains("decompressed"), "{text}");
}

registry_common::backends::on_both_pairs!(
    selection_follows_slo_and_accuracy,
    bad_queries_name_the_problem
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_infers_in_json_and_binary() {
    let Some(ort) = ort_library() else { return };
    if !registry_common::python_has(
        "tritonclient.http, onnxruntime, numpy",
        "tritonclient[http], onnxruntime and numpy",
    ) {
        return;
    }
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    // Logistic regression has no INT8 variant, so every variant computes what ONNX Runtime
    // computes on the source file.
    p.register_ok(&t, &Registration::zoo("digits-logreg", APP))
        .await;
    p.wait_ready(&t, "digits-logreg", READY).await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/triton_client.py");
    for name in ["digits-logreg", APP] {
        let stdout =
            registry_common::run_client_script(script, p.base.clone(), t.token.clone(), name).await;
        assert!(stdout.contains("binary=True"), "{stdout}");
    }
    p.stop().await;
}

/// A server on embedded defaults without autoscaling, and a tenant with `digits-forest`
/// registered and ready (`None` without ONNX Runtime). The backends' directories live as long
/// as the returned [`Backends`].
async fn forest_without_autoscaling() -> Option<(Backends, Platform, Tenant)> {
    let ort = ort_library()?;
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    cfg.autoscale.enabled = false;
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-forest", APP))
        .await;
    p.wait_ready(&t, "digits-forest", READY).await;
    Some((b, p, t))
}

/// Queries that arrive while a variant loads for an earlier one join that load, and
/// selection counts them: the first query starts the load, the ones during it are told what
/// they wait for (the rest of the load and the rows already waiting), and all are answered by
/// the one variant loaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_join_a_load_under_way() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    // A load of this small model can finish before the other queries arrive (they then find
    // the instance active): up to five rounds, the variant unloaded before each.
    let state = &p.server.state;
    for round in 0..5 {
        let queries = (0..24).map(|i| {
            post(
                &p,
                &t,
                "/v1/models/digits-forest/infer",
                json!({"inputs": [digit_row("input", i % 10)]}),
            )
        });
        let answers = futures::future::join_all(queries).await;
        let reasons: Vec<&str> = answers
            .iter()
            .map(|(s, a)| {
                assert_eq!(*s, StatusCode::OK, "{a}");
                a["reason"].as_str().unwrap()
            })
            .collect();
        let started = reasons.iter().filter(|r| r.starts_with("load ")).count();
        let joined: Vec<&&str> = reasons
            .iter()
            .filter(|r| r.starts_with("join the load of"))
            .collect();
        // Two queries may both start it (each took its snapshot before the other's load was
        // recorded); the worker loads it once either way.
        assert!(started >= 1, "{reasons:#?}");
        assert!(
            joined.iter().all(|r| r.contains(" waiting for it, ")),
            "{joined:#?}"
        );
        let variants: std::collections::BTreeSet<&str> = answers
            .iter()
            .map(|(_, a)| a["variant"].as_str().unwrap())
            .collect();
        assert_eq!(variants.len(), 1, "{variants:?}");
        if !joined.is_empty() {
            println!("round {round}: {started} started, {} joined", joined.len());
            p.stop().await;
            return;
        }
        let worker = answers[0].1["worker"].as_str().unwrap().to_string();
        let name = *variants.iter().next().unwrap();
        let id = state
            .cluster
            .catalog()
            .variants()
            .find(|s| s.entry.variant.name == name)
            .unwrap()
            .entry
            .variant
            .id
            .clone();
        state
            .cluster
            .handle(&worker)
            .unwrap()
            .unload(&id)
            .await
            .unwrap();
        state.cluster.unloaded(&worker, &id);
    }
    panic!("in five rounds no query joined a load under way");
}

/// Scaling events of `app` with the query path's action, oldest first.
async fn query_loads(p: &Platform, t: &Tenant, app: &str) -> Vec<Value> {
    let a = p
        .get(t, &format!("/v1/apps/{app}/scaling-events?limit=1000"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let mut events: Vec<Value> = a.body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "load-for-queries")
        .cloned()
        .collect();
    events.reverse();
    events
}

/// Every load the query path starts is a scaling event of the application, with the
/// selection's reason, the variant and the worker: the dashboard and the API say why each
/// instance exists. Queries that join a load under way record nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_load_for_queries_is_a_scaling_event() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    assert!(query_loads(&p, &t, APP).await.is_empty());
    let (s, a) = post(
        &p,
        &t,
        "/v1/models/digits-forest/infer",
        json!({"inputs": [digit_row("input", 3)], "latency_ms": 500.0}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let reason = a["reason"].as_str().unwrap();
    assert!(reason.starts_with("load "), "{reason}");
    // Stored in the background: wait for it a little.
    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let events = query_loads(&p, &t, APP).await;
        if !events.is_empty() || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(events.len(), 1, "{events:#?}");
    let e = &events[0];
    assert_eq!(e["variant"], a["variant"], "{e}");
    assert_eq!(e["reason"].as_str().unwrap(), reason, "{e}");
    assert!(e["worker"].as_str().is_some_and(|w| !w.is_empty()), "{e}");
    let (before, after) = (
        e["cost_before_per_s"].as_f64().unwrap(),
        e["cost_after_per_s"].as_f64().unwrap(),
    );
    assert!(before == 0.0 && after > 0.0, "{e}");
    // Served by the loaded instance from now on, but for a further load when that instance is
    // judged busy or interfered (as it can be on a machine busy with other tests): whatever the
    // query path loads, every load has its event and no event is without its load.
    let mut loads = 1;
    for i in 0..5 {
        let (s, a) = post(
            &p,
            &t,
            "/v1/models/digits-forest/infer",
            json!({"inputs": [digit_row("input", i)], "latency_ms": 500.0}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{a}");
        loads += usize::from(a["reason"].as_str().is_some_and(|r| r.starts_with("load ")));
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let events = loop {
        let events = query_loads(&p, &t, APP).await;
        if events.len() >= loads || Instant::now() > deadline {
            break events;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(events.len(), loads, "{events:#?}");
    assert_eq!(query_loads(&p, &t, APP).await.len(), loads);
    p.stop().await;
}

/// An instance the autoscaler drained and unloaded, then loaded again for queries at once, is
/// a new instance: it serves the next queries rather than being loaded once more for each of
/// them (the drain used to hide it from selection for up to a minute, and every query started
/// a load the worker answered with "already loaded").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_variant_loaded_again_after_a_drain_serves_the_next_queries() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    let query = |i: usize| {
        post(
            &p,
            &t,
            "/v1/models/digits-forest/infer",
            json!({"inputs": [digit_row("input", i % 10)], "latency_ms": 500.0}),
        )
    };
    let (s, a) = query(0).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let (worker, name) = (
        a["worker"].as_str().unwrap().to_string(),
        a["variant"].as_str().unwrap().to_string(),
    );
    let state = &p.server.state;
    let id = state
        .cluster
        .catalog()
        .variants()
        .find(|s| s.entry.variant.name == name)
        .unwrap()
        .entry
        .variant
        .id
        .clone();
    // What the autoscaler's scale-in does: drain, unload, forget.
    state.cluster.drain_instance(&worker, &id);
    let handle = state.cluster.handle(&worker).unwrap();
    handle.unload(&id).await.unwrap();
    state.cluster.unloaded(&worker, &id);
    // The next query loads it again, within the drain's minimum time.
    let (s, a) = query(1).await;
    assert_eq!(s, StatusCode::OK, "{a}");
    assert!(a["reason"].as_str().unwrap().starts_with("load "), "{a}");
    assert_eq!(a["variant"], name.as_str(), "{a}");
    // From then on the instance serves: no query starts another load.
    for i in 2..12 {
        let (s, a) = query(i).await;
        assert_eq!(s, StatusCode::OK, "{a}");
        let reason = a["reason"].as_str().unwrap();
        assert!(
            !reason.starts_with("load "),
            "query {i} loaded again: {reason}"
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while query_loads(&p, &t, APP).await.len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(query_loads(&p, &t, APP).await.len(), 2);
    assert!(state
        .cluster
        .snapshot()
        .instances()
        .iter()
        .any(|i| i.id.ends_with(&id)));
    p.stop().await;
}

/// The caller's instances on the live workers, as `GET /v1/workers` shows them.
async fn alive_instances(p: &Platform, t: &Tenant) -> Vec<Value> {
    alive_workers(p, t)
        .await
        .iter()
        .flat_map(|w| w["instances"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// The state of the one instance of `variant` as `GET /v1/workers` shows it.
async fn instance_state(p: &Platform, t: &Tenant, variant: &str) -> Option<String> {
    alive_instances(p, t)
        .await
        .into_iter()
        .find(|i| i["variant"] == variant)
        .map(|i| i["state"].as_str().unwrap().to_string())
}

/// Waits up to `secs` for the monitoring loop to put the instance of `variant` in `want`.
async fn wait_state(p: &Platform, t: &Tenant, variant: &str, want: &str, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if instance_state(p, t, variant).await.as_deref() == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// Overload is judged by the SLO: an instance far below its profiled peak, with an empty
/// queue and runs at its profiled speed, is Overloaded by the monitoring loop as soon as more
/// than 2% of its queries (and at least 3) are answered after their SLO, and Active again once
/// they are answered in time. The lateness is recorded as the query path records it
/// (`Cluster::record_answer`, with the answer's end-to-end latency and the query's SLO).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_whose_queries_are_late_is_overloaded() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    let (s, a) = post(
        &p,
        &t,
        "/v1/models/digits-forest/infer",
        json!({"inputs": [digit_row("input", 1)]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{a}");
    let (variant, worker) = (
        a["variant"].as_str().unwrap().to_string(),
        a["worker"].as_str().unwrap().to_string(),
    );
    let cluster = &p.server.state.cluster;
    let variant_id = cluster
        .catalog()
        .variants()
        .find(|s| s.entry.variant.name == variant)
        .unwrap()
        .entry
        .variant
        .id
        .clone();
    assert!(wait_state(&p, &t, &variant, "active", 5).await);
    // A window of 100 answers in time and 5 late ones (5%), nothing queued, a trickle of load.
    let window = |late: usize| {
        for i in 0..100 + late {
            let ms = if i < late { 80.0 } else { 2.0 };
            cluster.record_answer(&worker, &variant_id, ms, 50.0);
        }
    };
    // Each monitoring period (1 s) takes the answers recorded since the one before.
    let overloaded = async {
        for _ in 0..4 {
            window(5);
            if wait_state(&p, &t, &variant, "overloaded", 1).await {
                return true;
            }
        }
        false
    }
    .await;
    assert!(overloaded, "{:?}", instance_state(&p, &t, &variant).await);
    let active = async {
        for _ in 0..4 {
            window(0);
            if wait_state(&p, &t, &variant, "active", 1).await {
                return true;
            }
        }
        false
    }
    .await;
    assert!(active, "{:?}", instance_state(&p, &t, &variant).await);
    // Two late answers in a hundred are under the bar.
    for _ in 0..3 {
        window(2);
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(
            instance_state(&p, &t, &variant).await.as_deref(),
            Some("active")
        );
    }
    p.stop().await;
}

/// `GET /v1/workers` lists the caller's loads under way on each worker with the rows that wait
/// for them, and only the caller's; a load leaves the list when its instance is ready or the
/// load fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_list_the_loads_queries_wait_for() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    let other = p.tenant("other", open_quotas()).await;
    let cluster = &p.server.state.cluster;
    let variant = cluster
        .catalog()
        .variants()
        .find(|s| s.entry.model == "digits-forest")
        .unwrap()
        .entry
        .variant
        .clone();
    let worker = alive_workers(&p, &t).await[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let loading = |w: &[Value]| -> Vec<Value> {
        w.iter().find(|x| x["id"] == worker.as_str()).unwrap()["loading"]
            .as_array()
            .unwrap()
            .clone()
    };
    assert_eq!(loading(&alive_workers(&p, &t).await), Vec::<Value>::new());

    // A query path starts the load; three rows, then two more, wait for it.
    let waiting = cluster.load_started(&worker, &variant.id);
    let first = waiting.enter(3);
    let second = waiting.enter(2);
    let shown = loading(&alive_workers(&p, &t).await);
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert_eq!(shown[0]["variant"], variant.name.as_str());
    assert_eq!(shown[0]["waiting_rows"], 5);
    assert!(
        shown[0]["started_ms_ago"].as_u64().unwrap() < 60_000,
        "{shown:?}"
    );
    drop(first);
    assert_eq!(loading(&alive_workers(&p, &t).await)[0]["waiting_rows"], 2);
    // Another tenant sees the worker, not the load.
    assert_eq!(
        loading(&alive_workers(&p, &other).await),
        Vec::<Value>::new()
    );

    // A failed load leaves the list; so does one whose instance is ready.
    cluster.load_failed(&variant.id);
    assert_eq!(loading(&alive_workers(&p, &t).await), Vec::<Value>::new());
    drop(second);
    let _again = cluster.load_started(&worker, &variant.id).enter(1);
    assert_eq!(loading(&alive_workers(&p, &t).await).len(), 1);
    let (status, answer) = post(
        &p,
        &t,
        "/v1/models/digits-forest/infer",
        json!({"inputs": [digit_row("input", 3)]}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // The query joined that load (and finished it), or went elsewhere and left it listed.
    let after = loading(&alive_workers(&p, &t).await);
    println!("the query: {}", answer["reason"]);
    if answer["variant"] == variant.name.as_str() && answer["worker"] == worker.as_str() {
        assert_eq!(after, Vec::<Value>::new(), "{answer}");
    } else {
        assert_eq!(after.len(), 1, "{answer} {after:?}");
    }
    p.stop().await;
}

/// `GET /v1/workers` shows each instance's service time (its session runs) beside its latency
/// (call to answer, the queue included), from the figures the worker reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_show_an_instance_s_run_time_beside_its_latency() {
    let Some((_backends, p, t)) = forest_without_autoscaling().await else {
        return;
    };
    for i in 0..20 {
        let (status, answer) = post(
            &p,
            &t,
            "/v1/models/digits-forest/infer",
            json!({"inputs": [digit_row("input", i)]}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
    }
    // Figures arrive with the next heartbeat (about a second).
    let deadline = Instant::now() + Duration::from_secs(20);
    let instance = loop {
        let served = alive_instances(&p, &t)
            .await
            .into_iter()
            .find(|i| i["requests_total"].as_u64().unwrap_or(0) >= 20);
        if let Some(i) = served {
            break i;
        }
        assert!(
            Instant::now() < deadline,
            "no instance reported 20 requests"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let f = |k: &str| {
        instance[k]
            .as_f64()
            .unwrap_or_else(|| panic!("{k}: {instance}"))
    };
    assert!(f("exec_p50_ms") > 0.0, "{instance}");
    assert!(f("exec_p99_ms") >= f("exec_p50_ms"), "{instance}");
    assert!(
        f("latency_p50_ms") >= f("exec_p50_ms"),
        "a call waits at least its run: {instance}"
    );
    p.stop().await;
}

async fn alive_workers(p: &Platform, t: &Tenant) -> Vec<Value> {
    let w = p.get(t, "/v1/workers").await;
    assert_eq!(w.status, StatusCode::OK, "{}", w.text);
    w.body["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["alive"] == true)
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_survive_a_killed_worker_process() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    // The embedded worker holds one single-thread instance at most, so the remote worker
    // takes the first loads; after the kill the embedded one takes over.
    cfg.worker_thread_budget = Some(1);
    cfg.heartbeat_timeout_ms = 1500;
    let objects = cfg.object_store.clone().unwrap();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-mlp-m", APP))
        .await;
    p.wait_ready(&t, "digits-mlp-m", READY).await;

    let mut worker = spawn_worker(
        Path::new(env!("CARGO_BIN_EXE_infaas")),
        &p,
        &ort,
        &objects,
        16,
    );
    let start = Instant::now();
    while alive_workers(&p, &t).await.len() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the worker process did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let remote_id = alive_workers(&p, &t)
        .await
        .into_iter()
        .find(|w| w["address"].is_string())
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();

    let before = alive_workers(&p, &t).await;
    let mut served_remote = 0;
    let mut statuses = Vec::new();
    let mut killed = false;
    let begin = Instant::now();
    let mut i = 0;
    while begin.elapsed() < Duration::from_secs(6) {
        if !killed && begin.elapsed() > Duration::from_secs(2) {
            worker.kill();
            killed = true;
        }
        let (s, a) = post(
            &p,
            &t,
            "/v1/apps/digits/infer",
            json!({"inputs": [digit_row("input", i % 100)]}),
        )
        .await;
        if s == StatusCode::OK && a["worker"] == remote_id.as_str() {
            served_remote += 1;
        }
        statuses.push((s, a));
        i += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(killed);
    let failed: Vec<_> = statuses
        .iter()
        .filter(|(s, _)| *s != StatusCode::OK)
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} queries failed around the kill: {:?}",
        failed.len(),
        statuses.len(),
        failed.first()
    );
    assert!(
        served_remote > 0,
        "no query was served by the worker process before it was killed; workers before the queries: {before:?}; first answer: {:?}",
        statuses.first()
    );
    // The dead worker left the index.
    assert_eq!(alive_workers(&p, &t).await.len(), 1);
    p.stop().await;
}

/// The benchmark's heavy model (`registry_common::heavy`) does its extra work but answers
/// as `digits-mlp-scores` does, so its throughput figures come with a real accuracy.
#[test]
fn heavy_model_answers_like_its_base() {
    use infaas_executors::engine::{DirectSession, SessionConfig};
    if ort_library().is_none() {
        return;
    }
    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|t| t.name == "x")
        .unwrap();
    let mut input = x.slice_batch(0, 64);
    input.name = "pixels".into();
    let cfg = SessionConfig::default();
    let run = |bytes: &[u8]| {
        let mut s = DirectSession::load(bytes, &cfg).unwrap();
        s.run(vec![input.clone()]).unwrap().remove(0)
    };
    let base = run(&registry_common::zoo_bytes("digits-mlp-scores.onnx"));
    let heavy_bytes = registry_common::heavy::heavy_cnn(16, 3);
    assert!(
        heavy_bytes.len() > 2 * 16 * 16 * 9 * 4,
        "the convolutions are there"
    );
    let wide = run(&heavy_bytes);
    assert_eq!(wide.shape, base.shape);
    let (n, mut worst) = (base.data.len(), 0f64);
    for k in 0..n {
        let (a, b) = (wide.data.get_f64(k).unwrap(), base.data.get_f64(k).unwrap());
        worst = worst.max((a - b).abs() / b.abs().max(1.0));
    }
    assert!(worst < 1e-5, "logits differ by {worst} (relative)");
}
