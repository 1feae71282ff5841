//! Pipelines end to end, against an in-process server with real zoo models: registration
//! (JSON and YAML) and every rejection naming the node and tensor, a cascade (a switch on the
//! cheap model's confidence closed by `first`) whose answers are checked row by row and whose
//! accuracy on the whole validation set beats its cheap stage alone, an ensemble, the pipeline
//! as a model on the Open Inference Protocol (REST and the unmodified `tritonclient.http`),
//! tenant isolation and deletion.
//!
//! `cargo test -p infaas --test integration pipelines`. Needs ONNX Runtime; the tritonclient
//! test needs `python3` with `tritonclient[http]`, `onnxruntime` and `numpy`.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use infaas_testing::platform::{
    self as registry_common, fast_config, open_quotas, ort_library, zoo_arrays, Platform,
    Registration, Tenant,
};
use registry_common::backends::Backends;
use reqwest::StatusCode;
use serde_json::{json, Value};

const READY: Duration = Duration::from_secs(180);

async fn send(
    p: &Platform,
    t: &Tenant,
    method: reqwest::Method,
    path: &str,
    body: Option<(&str, Vec<u8>)>,
) -> (StatusCode, Value) {
    let mut req = p
        .http
        .request(method, format!("{}{path}", p.base))
        .bearer_auth(&t.token);
    if let Some((ct, bytes)) = body {
        req = req.header("content-type", ct).body(bytes);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn post_json(p: &Platform, t: &Tenant, path: &str, body: &Value) -> (StatusCode, Value) {
    send(
        p,
        t,
        reqwest::Method::POST,
        path,
        Some(("application/json", serde_json::to_vec(body).unwrap())),
    )
    .await
}

/// The cheap model answers every row; the large one re-answers the rows the cheap one is
/// unsure of (top probability below 0.9); `first` takes the large one's answer where it ran.
fn cascade() -> Value {
    json!({
        "name": "cascade",
        "description": "cheap MLP, large MLP when unsure",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
        "nodes": [
            {"name": "cheap", "app": "small", "inputs": {"input": "image"}},
            {"name": "expert", "model": "digits-mlp-l", "inputs": {"input": "image"},
             "when": {"source": "cheap.probabilities", "top_probability_below": 0.9}},
            {"name": "answer", "combine": "first", "from": ["expert.probabilities", "cheap.probabilities"]}
        ],
        "outputs": {"probabilities": "answer.output", "cheap_probabilities": "cheap.probabilities"},
        "slo": {"latency_ms": 2000, "percentile": 99}
    })
}

/// The validation set: rows of `x` as a JSON tensor named `name`, and labels `y`.
fn validation(name: &str, rows: usize) -> (Value, Vec<i64>) {
    let arrays = zoo_arrays("digits-val.npz");
    let x = arrays.iter().find(|t| t.name == "x").unwrap();
    let y = arrays.iter().find(|t| t.name == "y").unwrap();
    let x = x.slice_batch(0, rows);
    let data: Vec<f64> = (0..x.data.len())
        .filter_map(|k| x.data.get_f64(k))
        .collect();
    let labels: Vec<i64> = (0..rows)
        .map(|k| y.data.get_f64(k).unwrap() as i64)
        .collect();
    (
        json!({"name": name, "shape": [rows, 64], "datatype": "FP32", "data": data}),
        labels,
    )
}

fn rows_of(t: &Value) -> Vec<Vec<f64>> {
    let width = t["shape"][1].as_u64().unwrap() as usize;
    let flat: Vec<f64> = t["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    flat.chunks(width).map(<[f64]>::to_vec).collect()
}

fn argmax(row: &[f64]) -> i64 {
    row.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(k, _)| k as i64)
        .unwrap()
}

fn output<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["name"] == name)
        .unwrap_or_else(|| panic!("no output {name}: {answer}"))
}

fn node<'a>(answer: &'a Value, name: &str) -> &'a Value {
    answer["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == name)
        .unwrap_or_else(|| panic!("no node {name}: {answer}"))
}

/// The platform with three models in three applications; the backends (temporary
/// directories) live as long as the platform.
async fn platform_with_models() -> Option<(Platform, Tenant, Backends)> {
    let ort = ort_library()?;
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    for (model, app) in [
        ("digits-mlp-s", "small"),
        ("digits-mlp-l", "large"),
        ("digits-logreg", "linear"),
    ] {
        p.register_ok(&t, &Registration::zoo(model, app)).await;
    }
    for model in ["digits-mlp-s", "digits-mlp-l", "digits-logreg"] {
        p.wait_ready(&t, model, READY).await;
    }
    Some((p, t, b))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cascade_answers_row_by_row_and_beats_its_cheap_stage() {
    let Some((p, t, _b)) = platform_with_models().await else {
        return;
    };
    // YAML is accepted as well as JSON.
    let yaml = serde_yaml::to_string(&cascade()).unwrap();
    let (s, created) = send(
        &p,
        &t,
        reqwest::Method::POST,
        "/v1/pipelines",
        Some(("application/yaml", yaml.into_bytes())),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{created}");
    assert_eq!(created["spec"]["nodes"].as_array().unwrap().len(), 3);

    let (x, y) = validation("image", 540);
    let (s, answer) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/infer",
        &json!({"inputs": [x]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    let probs = rows_of(output(&answer, "probabilities"));
    let cheap = rows_of(output(&answer, "cheap_probabilities"));
    assert_eq!((probs.len(), cheap.len()), (540, 540));

    // The expert ran exactly on the rows the cheap model was unsure of, and those rows carry
    // its answer; the others carry the cheap model's.
    let unsure: Vec<usize> = (0..540)
        .filter(|&r| cheap[r].iter().copied().fold(f64::MIN, f64::max) < 0.9)
        .collect();
    let expert = node(&answer, "expert");
    assert_eq!(
        expert["rows"].as_u64().unwrap() as usize,
        unsure.len(),
        "{expert}"
    );
    assert!(
        !unsure.is_empty() && unsure.len() < 540,
        "{} unsure rows",
        unsure.len()
    );
    assert_eq!(expert["model"], "digits-mlp-l");
    assert!(expert["variant"]
        .as_str()
        .unwrap()
        .starts_with("digits-mlp-l."));
    assert_eq!(node(&answer, "cheap")["rows"], 540);
    assert_eq!(node(&answer, "cheap")["model"], "digits-mlp-s");
    for r in 0..540 {
        if unsure.binary_search(&r).is_err() {
            assert_eq!(
                probs[r], cheap[r],
                "row {r} was sure: the cheap answer stands"
            );
        }
    }
    assert!(unsure.iter().any(|&r| probs[r] != cheap[r]));

    // Real accuracy on the whole validation set: the cascade beats its cheap stage alone.
    let correct = |rows: &[Vec<f64>]| {
        rows.iter()
            .zip(&y)
            .filter(|(row, label)| argmax(row) == **label)
            .count() as f64
            / 540.0
    };
    let (cascade_acc, cheap_acc) = (correct(&probs), correct(&cheap));
    assert!(
        cascade_acc > cheap_acc,
        "cascade {cascade_acc:.4} vs cheap stage {cheap_acc:.4}"
    );
    let estimated = answer["accuracy"].as_f64().unwrap();
    assert!(estimated > 0.8 && estimated <= 1.0, "{answer}");
    assert_eq!(answer["slo_ms"], 2000.0);
    assert!(answer["latency_ms"].as_f64().unwrap() > 0.0);

    // A per-query SLO override reaches the nodes' budgets.
    let (x1, _) = validation("image", 1);
    let (s, one) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/infer",
        &json!({"inputs": [x1], "latency_ms": 500}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{one}");
    assert_eq!(one["slo_ms"], 500.0);
    let budget = node(&one, "cheap")["budget_ms"].as_f64().unwrap();
    assert!(
        budget > 0.0 && budget <= 250.0,
        "two model nodes share 500 ms: {budget}"
    );

    // Planning: InferLine's planner on a generated trace, judged by the simulator.
    let (s, plan) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/plan",
        &json!({"generate": "poisson:rate=200,duration=60"}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    assert_eq!(plan["nodes"].as_array().unwrap().len(), 2, "{plan}");
    assert!(
        plan["predicted_latency_ms"].as_f64().unwrap() <= 2000.0,
        "{plan}"
    );
    assert!(plan["attainment"].as_f64().unwrap() >= 0.99, "{plan}");
    assert!(plan["cost_per_hour"].as_f64().unwrap() > 0.0);
    assert!(
        plan["cost_per_hour"].as_f64().unwrap() <= plan["initial_cost_per_hour"].as_f64().unwrap()
    );
    assert!(plan["estimates"].as_u64().unwrap() > 0);
    assert_eq!(
        plan["trace"]["source"],
        "generated: poisson:rate=200,duration=60"
    );
    // The switch's branch probability was measured on the 541 queries above.
    let expert_plan = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "expert")
        .unwrap();
    // 540 rows in one query, then one row with its own answer: the planner's probability is
    // the share of the rows the expert ran on, within that one row.
    let measured = unsure.len() as f64 / 540.0;
    let planned = expert_plan["branch_probability"].as_f64().unwrap();
    assert!(
        planned > 0.0 && (planned - measured).abs() <= 1.0 / 541.0 + 1e-9,
        "{plan} (measured {measured})"
    );
    assert!(expert_plan["variant"]
        .as_str()
        .unwrap()
        .starts_with("digits-mlp-l."));
    assert!(plan["applied"] == false);
    // No configuration meets a 1 µs SLO: the closest (the service time) is named.
    let mut tight = cascade();
    tight["name"] = json!("tight");
    tight["slo"]["latency_ms"] = json!(0.001);
    let (s, _) = post_json(&p, &t, "/v1/pipelines", &tight).await;
    assert_eq!(s, StatusCode::CREATED);
    let (s, body) = post_json(
        &p,
        &t,
        "/v1/pipelines/tight/plan",
        &json!({"generate": "poisson:rate=10,duration=10"}),
    )
    .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("service time"),
        "{body}"
    );
    // A bad generator is a 400.
    let (s, _) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/plan",
        &json!({"generate": "poisson:duration=10"}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
    // Applied, the plan is stored and the nodes run its models.
    let (s, applied) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/plan",
        &json!({"generate": "poisson:rate=50,duration=30", "apply": true}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{applied}");
    let (s, shown) = send(&p, &t, reqwest::Method::GET, "/v1/pipelines/cascade", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(shown["plan"]["nodes"], applied["nodes"]);
    let status = &shown["status"];
    let expert_status = status["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "expert")
        .unwrap();
    let applied_expert = applied["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "expert")
        .unwrap();
    assert_eq!(expert_status["planned_variant"], applied_expert["variant"]);
    assert!(expert_status["replicas"].as_u64().unwrap() >= 1, "{status}");
    assert!(
        status["queries_last_minute"].as_u64().unwrap() >= 2,
        "{status}"
    );

    // Prometheus has the pipeline's and its nodes' latency histograms.
    let metrics = p
        .http
        .get(format!("{}/metrics", p.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("infaas_pipeline_latency_seconds"),
        "{metrics}"
    );
    assert!(metrics.contains(r#"node="expert""#));
    assert!(metrics.contains("infaas_pipeline_queries_total"));
    p.stop().await;
}

/// A router sends every row to exactly one of two experts: labels 0-4 to the large MLP,
/// 5-9 to the logistic regression, merged by `first`. The validator proves from the router's
/// scores (shape [10]) that the two `label_in` sets take every label, so the merged output runs
/// for every row and the pipeline is accepted; each row carries the answer of the expert its
/// router label chose. Sets that leave a label out are refused, naming the output.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn complementary_branches_of_a_router_are_accepted_and_answer_every_row() {
    let Some((p, t, _b)) = platform_with_models().await else {
        return;
    };
    let doc = |high: Value| {
        json!({
            "name": "routed",
            "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
            "nodes": [
                {"name": "router", "app": "small", "inputs": {"input": "image"}},
                {"name": "low", "model": "digits-mlp-l", "inputs": {"input": "image"},
                 "when": {"source": "router.probabilities", "label_in": [0, 1, 2, 3, 4]}},
                {"name": "high", "model": "digits-logreg", "inputs": {"input": "image"},
                 "when": {"source": "router.probabilities", "label_in": high}},
                {"name": "answer", "combine": "first", "from": ["low.probabilities", "high.probabilities"]}
            ],
            "outputs": {"probabilities": "answer.output", "router": "router.probabilities"}
        })
    };
    // Label 9 taken by no branch: some rows would have no answer.
    let (s, refused) = post_json(&p, &t, "/v1/pipelines", &doc(json!([5, 6, 7, 8]))).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{refused}");
    let message = refused["error"].as_str().unwrap_or_default().to_string();
    assert!(
        message.contains("output 'probabilities'") && message.contains("label_in"),
        "{refused}"
    );
    let (s, created) = post_json(&p, &t, "/v1/pipelines", &doc(json!([5, 6, 7, 8, 9]))).await;
    assert_eq!(s, StatusCode::CREATED, "{created}");

    let rows = 200;
    let (x, _) = validation("image", rows);
    let (s, answer) = post_json(
        &p,
        &t,
        "/v1/pipelines/routed/infer",
        &json!({"inputs": [x.clone()]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    let merged = rows_of(output(&answer, "probabilities"));
    let router = rows_of(output(&answer, "router"));
    assert_eq!(merged.len(), rows);
    // Each expert on its own, for the same rows.
    let mut expert = std::collections::BTreeMap::new();
    for model in ["digits-mlp-l", "digits-logreg"] {
        let (s, a) = post_json(
            &p,
            &t,
            &format!("/v1/models/{model}/infer"),
            &json!({"inputs": [x.clone()]}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{a}");
        expert.insert(model, rows_of(output(&a, "probabilities")));
    }
    let low_rows = (0..rows).filter(|&r| argmax(&router[r]) < 5).count();
    assert!(
        low_rows > 0 && low_rows < rows,
        "{low_rows} of {rows} rows routed low"
    );
    assert_eq!(
        node(&answer, "low")["rows"].as_u64().unwrap() as usize,
        low_rows
    );
    assert_eq!(
        node(&answer, "high")["rows"].as_u64().unwrap() as usize,
        rows - low_rows
    );
    // The experts may serve other variants of their models here (an INT8 file answers a
    // little differently): a row carries the chosen expert's answer when it is far closer to
    // it than to the other expert's.
    let distance =
        |a: &[f64], b: &[f64]| -> f64 { a.iter().zip(b).map(|(x, y)| (x - y).abs()).sum() };
    for r in 0..rows {
        let (want, other) = if argmax(&router[r]) < 5 {
            ("digits-mlp-l", "digits-logreg")
        } else {
            ("digits-logreg", "digits-mlp-l")
        };
        let (near, far) = (
            distance(&merged[r], &expert[want][r]),
            distance(&merged[r], &expert[other][r]),
        );
        assert!(
            near < 0.05 && near < far,
            "row {r}: the merged answer is {near} from {want}'s and {far} from {other}'s"
        );
    }
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pipelines_are_rejected_naming_the_node_and_tensor() {
    let Some((p, t, _b)) = platform_with_models().await else {
        return;
    };
    type Change = Box<dyn Fn(&mut Value)>;
    let cases: Vec<(&str, Change, StatusCode, Vec<&str>)> = vec![
        (
            "cycle",
            Box::new(|d| d["nodes"][0]["inputs"]["input"] = json!("answer.output")),
            StatusCode::BAD_REQUEST,
            vec!["cycle", "cheap", "answer"],
        ),
        (
            "unknown application",
            Box::new(|d| d["nodes"][0]["app"] = json!("nowhere")),
            StatusCode::NOT_FOUND,
            vec!["node 'cheap'", "nowhere"],
        ),
        (
            "unknown model",
            Box::new(|d| d["nodes"][1]["model"] = json!("digits-missing")),
            StatusCode::NOT_FOUND,
            vec!["node 'expert'", "digits-missing"],
        ),
        (
            "shape that does not connect",
            Box::new(|d| d["inputs"][0]["shape"] = json!([32])),
            StatusCode::BAD_REQUEST,
            vec!["node 'cheap'", "input", "FP32 [-1, 32]", "[-1, 64]"],
        ),
        (
            "dtype that does not connect",
            Box::new(|d| d["inputs"][0]["datatype"] = json!("INT64")),
            StatusCode::BAD_REQUEST,
            vec!["node 'cheap'", "INT64"],
        ),
        (
            "accuracy scaling over two roots",
            Box::new(|d| {
                d["overload"] = json!({"accuracy_scaling": true});
                d["nodes"][1].as_object_mut().unwrap().remove("when");
            }),
            StatusCode::BAD_REQUEST,
            vec!["accuracy_scaling", "tree", "cheap", "expert"],
        ),
        (
            "unknown overload setting",
            Box::new(|d| d["overload"] = json!({"accuracy_scale": true})),
            StatusCode::BAD_REQUEST,
            vec!["accuracy_scale"],
        ),
        (
            "condition on a missing output",
            Box::new(|d| d["nodes"][1]["when"]["source"] = json!("cheap.scores")),
            StatusCode::BAD_REQUEST,
            vec!["node 'expert'", "'cheap.scores'", "no output 'scores'"],
        ),
        (
            "output behind a switch",
            Box::new(|d| d["outputs"]["expert_only"] = json!("expert.probabilities")),
            StatusCode::BAD_REQUEST,
            vec!["output 'expert_only'", "combine: first"],
        ),
        (
            "a name taken by an application",
            Box::new(|d| d["name"] = json!("small")),
            StatusCode::CONFLICT,
            vec!["'small'", "application or model"],
        ),
        (
            "bad SLO",
            Box::new(|d| d["slo"]["latency_ms"] = json!(-5)),
            StatusCode::BAD_REQUEST,
            vec!["slo.latency_ms"],
        ),
    ];
    for (what, change, status, words) in cases {
        let mut doc = cascade();
        change(&mut doc);
        let (s, body) = post_json(&p, &t, "/v1/pipelines", &doc).await;
        assert_eq!(s, status, "{what}: {body}");
        let msg = body["error"].as_str().unwrap_or_default().to_string();
        for w in words {
            assert!(msg.contains(w), "{what}: '{w}' not in '{msg}'");
        }
    }
    // Not a document at all, and one over the size limit.
    let (s, body) = send(
        &p,
        &t,
        reqwest::Method::POST,
        "/v1/pipelines",
        Some(("application/json", b"{\"name\": ".to_vec())),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    let big = format!("{{\"description\": \"{}\"}}", "x".repeat(300 * 1024));
    let (s, _) = send(
        &p,
        &t,
        reqwest::Method::POST,
        "/v1/pipelines",
        Some(("application/json", big.into_bytes())),
    )
    .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE);
    // Nothing was stored, and the server still serves.
    let (s, list) = send(&p, &t, reqwest::Method::GET, "/v1/pipelines", None).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(list["pipelines"], json!([]));
    let (s, _) = post_json(&p, &t, "/v1/pipelines", &cascade()).await;
    assert_eq!(s, StatusCode::CREATED);

    // Bad queries: a missing input, a wrong shape.
    let (s, body) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/infer",
        &json!({"inputs": [validation("picture", 1).0]}),
    )
    .await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("'image'"),
        "{body}"
    );
    let (s, body) = post_json(&p, &t, "/v1/pipelines/cascade/infer",
        &json!({"inputs": [{"name": "image", "shape": [1, 3], "datatype": "FP32", "data": [1, 2, 3]}]})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{body}");
    assert!(body["error"].as_str().unwrap().contains("shape"), "{body}");
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ensemble_and_the_open_inference_protocol() {
    let Some((p, t, _b)) = platform_with_models().await else {
        return;
    };
    let ensemble = json!({
        "name": "committee",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [64]}],
        "nodes": [
            {"name": "a", "app": "small"},
            {"name": "b", "app": "large"},
            {"name": "c", "app": "linear"},
            {"name": "mean", "combine": "mean", "from": ["a.probabilities", "b.probabilities", "c.probabilities"]},
            {"name": "vote", "combine": "vote", "from": ["a.label", "b.label", "c.label"]}
        ],
        "outputs": {"probabilities": "mean.output", "label": "vote.output", "a": "a.probabilities", "b": "b.probabilities", "c": "c.probabilities"}
    });
    let (s, body) = post_json(&p, &t, "/v1/pipelines", &ensemble).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (x, _) = validation("input", 16);
    let (s, answer) = post_json(
        &p,
        &t,
        "/v1/pipelines/committee/infer",
        &json!({"inputs": [x.clone()]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    let (a, b, c) = (
        rows_of(output(&answer, "a")),
        rows_of(output(&answer, "b")),
        rows_of(output(&answer, "c")),
    );
    let mean = rows_of(output(&answer, "probabilities"));
    let votes: Vec<i64> = output(&answer, "label")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    for r in 0..16 {
        for k in 0..10 {
            let want = (a[r][k] + b[r][k] + c[r][k]) / 3.0;
            assert!((mean[r][k] - want).abs() < 1e-5, "row {r} class {k}");
        }
        let labels = [argmax(&a[r]), argmax(&b[r]), argmax(&c[r])];
        let majority = labels
            .iter()
            .find(|l| labels.iter().filter(|m| m == l).count() >= 2)
            .copied()
            .unwrap_or(labels[0]);
        assert_eq!(votes[r], majority, "row {r}: {labels:?}");
    }

    // The same pipeline as a model on the Open Inference Protocol (REST, JSON).
    let (s, ready) = send(
        &p,
        &t,
        reqwest::Method::GET,
        "/v2/models/committee/ready",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{ready}");
    let (s, meta) = send(&p, &t, reqwest::Method::GET, "/v2/models/committee", None).await;
    assert_eq!(s, StatusCode::OK, "{meta}");
    assert_eq!(meta["inputs"][0]["name"], "input");
    let outs: Vec<&str> = meta["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert!(
        outs.contains(&"label") && outs.contains(&"probabilities"),
        "{meta}"
    );
    let (s, v2) = post_json(
        &p,
        &t,
        "/v2/models/committee/infer",
        &json!({"inputs": [x]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{v2}");
    let v2_votes: Vec<i64> = output(&v2, "label")["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(v2_votes, votes);
    assert_eq!(v2["parameters"]["pipeline"], "committee");

    // Another tenant sees none of it.
    let other = p.tenant("beta", open_quotas()).await;
    for path in ["/v1/pipelines/committee", "/v2/models/committee"] {
        let (s, _) = send(&p, &other, reqwest::Method::GET, path, None).await;
        assert_eq!(s, StatusCode::NOT_FOUND, "{path}");
    }
    let (s, _) = post_json(
        &p,
        &other,
        "/v1/pipelines/committee/infer",
        &json!({"inputs": [validation("input", 1).0]}),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);

    // A single-node pipeline over the logistic regression answers the unmodified
    // tritonclient.http exactly as ONNX Runtime does on the model file.
    let single = json!({
        "name": "linear-pipe",
        "inputs": [{"name": "input", "datatype": "FP32", "shape": [64]}],
        "nodes": [{"name": "classify", "app": "linear"}],
        "outputs": {"label": "classify.label", "probabilities": "classify.probabilities"}
    });
    let (s, body) = post_json(&p, &t, "/v1/pipelines", &single).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    if registry_common::python_has(
        "tritonclient.http, onnxruntime, numpy",
        "tritonclient[http], onnxruntime and numpy",
    ) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/python/triton_client.py");
        let stdout = registry_common::run_client_script(
            script,
            p.base.clone(),
            t.token.clone(),
            "linear-pipe",
        )
        .await;
        assert!(stdout.contains("binary=True"), "{stdout}");
    }
    // And the unmodified tritonclient.grpc, over the gRPC port.
    if registry_common::python_has(
        "tritonclient.grpc, onnxruntime, numpy",
        "tritonclient[grpc], onnxruntime and numpy",
    ) {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/python/triton_grpc_client.py"
        );
        let addr = p.server.grpc_addr.unwrap().to_string();
        let stdout =
            registry_common::run_client_script(script, addr, t.token.clone(), "linear-pipe").await;
        assert!(stdout.contains("outputs equal ONNX Runtime's"), "{stdout}");
    }

    // Deleting a pipeline leaves its applications serving.
    let (s, _) = send(
        &p,
        &t,
        reqwest::Method::DELETE,
        "/v1/pipelines/committee",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = send(
        &p,
        &t,
        reqwest::Method::GET,
        "/v1/pipelines/committee",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, _) = post_json(
        &p,
        &t,
        "/v1/apps/small/infer",
        &json!({"inputs": [validation("input", 1).0]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    p.stop().await;
}

/// The pipeline's scaling events (the tuner's) for application `app`, oldest first.
async fn tuner_events(p: &Platform, t: &Tenant, app: &str) -> Vec<Value> {
    let (s, body) = send(
        p,
        t,
        reqwest::Method::GET,
        &format!("/v1/apps/{app}/scaling-events"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let mut events: Vec<Value> = body["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"].as_str().unwrap_or("").starts_with("pipeline-"))
        .cloned()
        .collect();
    events.reverse();
    events
}

/// InferLine's tuner through the running loop: a plan made for 5 queries/s, then a burst far
/// above the planned envelope. The tuner loads a second replica of each node's planned variant
/// (on the second worker) within seconds, and removes it only after the load has stayed low
/// for the stabilisation period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_tuner_scales_out_on_a_burst_and_back_in_after_it() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let cfg = fast_config(&b, &ort);
    let objects = cfg.object_store.clone().unwrap();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-mlp-s", "small"))
        .await;
    p.wait_ready(&t, "digits-mlp-s", READY).await;
    let _worker = registry_common::workers::spawn_worker(
        std::path::Path::new(env!("CARGO_BIN_EXE_infaas")),
        &p,
        &ort,
        &objects,
        4,
    );
    let started = std::time::Instant::now();
    loop {
        let (_, w) = send(&p, &t, reqwest::Method::GET, "/v1/workers", None).await;
        let alive = w["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["alive"] == true)
            .count();
        if alive >= 2 {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the worker process did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let doc = json!({
        "name": "single",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
        "nodes": [{"name": "classify", "app": "small"}],
        "outputs": {"probabilities": "classify.probabilities"},
        "slo": {"latency_ms": 200}
    });
    let (s, body) = post_json(&p, &t, "/v1/pipelines", &doc).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (s, plan) = post_json(
        &p,
        &t,
        "/v1/pipelines/single/plan",
        &json!({"generate": "poisson:rate=5,duration=120", "apply": true}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    assert_eq!(plan["nodes"][0]["replicas"], 1, "{plan}");
    // A few queries at the planned rate: no tuner action.
    let (x, _) = validation("image", 1);
    for _ in 0..5 {
        let (s, a) = post_json(
            &p,
            &t,
            "/v1/pipelines/single/infer",
            &json!({"inputs": [x.clone()]}),
        )
        .await;
        assert_eq!(s, StatusCode::OK, "{a}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(tuner_events(&p, &t, "small").await.is_empty());

    // A burst of about 150 queries/s for 3 s.
    let burst = std::time::Instant::now();
    let mut tasks = Vec::new();
    for k in 0..450u64 {
        let (http, base, token, x) = (p.http.clone(), p.base.clone(), t.token.clone(), x.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_micros(k * 6_667)).await;
            http.post(format!("{base}/v1/pipelines/single/infer"))
                .bearer_auth(token)
                .json(&json!({"inputs": [x]}))
                .send()
                .await
                .map(|r| r.status())
        }));
    }
    let mut out_at = None;
    while burst.elapsed() < Duration::from_secs(6) {
        if tuner_events(&p, &t, "small")
            .await
            .iter()
            .any(|e| e["action"] == "pipeline-scale-out")
        {
            out_at = Some(burst.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for task in tasks {
        assert_eq!(task.await.unwrap().unwrap(), StatusCode::OK);
    }
    let out_at = out_at.expect("the tuner scaled out during the burst");
    assert!(
        out_at < Duration::from_secs(4),
        "scaled out after {out_at:?}"
    );
    let events = tuner_events(&p, &t, "small").await;
    assert!(
        events[0]["reason"].as_str().unwrap().contains("1 -> 2"),
        "{events:?}"
    );

    // After the burst the load is low; the replica stays for the stabilisation period. The
    // envelope spans the last 60 s, so the burst leaves it after 60 s, and the load must then
    // stay low for the 15-s stabilisation period: 75 s at the earliest, plus tuner periods (a
    // 75-s wait was at the edge: one CI run missed it).
    let quiet = std::time::Instant::now();
    let mut in_at = None;
    while quiet.elapsed() < Duration::from_secs(120) {
        if tuner_events(&p, &t, "small")
            .await
            .iter()
            .any(|e| e["action"] == "pipeline-scale-in")
        {
            in_at = Some(quiet.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let in_at = in_at.expect("the tuner scaled back in after the burst");
    assert!(
        in_at >= Duration::from_secs(15),
        "scaled in {in_at:?} after the burst: before the stabilisation period"
    );
    let events = tuner_events(&p, &t, "small").await;
    let back = events
        .iter()
        .find(|e| e["action"] == "pipeline-scale-in")
        .unwrap();
    assert!(
        back["reason"].as_str().unwrap().contains("2 -> 1"),
        "{events:?}"
    );
    p.stop().await;
}

/// An offline job over a pipeline: every item of the validation set goes through the cascade,
/// once, in item order, with the answers the pipeline gives online; bad submissions are named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipeline_runs_as_an_offline_job() {
    let Some((p, t, _b)) = platform_with_models().await else {
        return;
    };
    let (s, body) = post_json(&p, &t, "/v1/pipelines", &cascade()).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let submit = |fields: Vec<(&'static str, &'static str)>| {
        let form = fields.into_iter().fold(
            reqwest::multipart::Form::new().part(
                "input",
                reqwest::multipart::Part::bytes(registry_common::zoo_bytes("digits-val.npz"))
                    .file_name("digits-val.npz"),
            ),
            |f, (k, v)| f.text(k, v),
        );
        p.http
            .post(format!("{}/v1/jobs", p.base))
            .bearer_auth(&t.token)
            .multipart(form)
            .send()
    };
    // Bad submissions: an unknown pipeline, two targets, an accuracy floor on a pipeline.
    for (fields, status, words) in [
        (
            vec![("pipeline", "nope")],
            StatusCode::NOT_FOUND,
            "pipeline 'nope'",
        ),
        (
            vec![("pipeline", "cascade"), ("app", "small")],
            StatusCode::BAD_REQUEST,
            "not several",
        ),
        (
            vec![("pipeline", "cascade"), ("min_accuracy", "0.9")],
            StatusCode::BAD_REQUEST,
            "min_accuracy",
        ),
    ] {
        let resp = submit(fields).await.unwrap();
        assert_eq!(resp.status(), status);
        let text = resp.text().await.unwrap();
        assert!(text.contains(words), "{text}");
    }
    let resp = submit(vec![("pipeline", "cascade")]).await.unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    let job: Value = resp.json().await.unwrap();
    assert_eq!(job["pipeline"], "cascade");
    assert_eq!(job["items_total"], 540);
    let id = job["id"].as_str().unwrap().to_string();
    let started = std::time::Instant::now();
    let done = loop {
        let (s, j) = send(
            &p,
            &t,
            reqwest::Method::GET,
            &format!("/v1/jobs/{id}"),
            None,
        )
        .await;
        assert_eq!(s, StatusCode::OK);
        if j["state"] == "succeeded" {
            break j;
        }
        assert!(j["state"] != "failed", "{j}");
        assert!(started.elapsed() < Duration::from_secs(120), "{j}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(done["items_done"], 540);
    let text = p
        .http
        .get(format!("{}/v1/jobs/{id}/results", p.base))
        .bearer_auth(&t.token)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 540);
    let (x, y) = validation("image", 540);
    let mut correct = 0;
    for (k, line) in lines.iter().enumerate() {
        assert_eq!(line["item"], k as i64);
        let out = line["outputs"].as_array().unwrap();
        let probs = out.iter().find(|o| o["name"] == "probabilities").unwrap();
        let row: Vec<f64> = probs["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(row.len(), 10, "{line}");
        correct += usize::from(argmax(&row) == y[k]);
    }
    // The same accuracy as the cascade online on the same rows (its nodes pick variants of the
    // same models; the outputs are those of real models).
    let (s, online) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/infer",
        &json!({"inputs": [x]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK);
    let online_correct = rows_of(output(&online, "probabilities"))
        .iter()
        .zip(&y)
        .filter(|(r, l)| argmax(r) == **l)
        .count();
    assert!(
        correct.abs_diff(online_correct) <= 5,
        "job {correct} vs online {online_correct} of 540"
    );
    assert!(correct as f64 / 540.0 > 0.9, "{correct}");
    // Offline items are not the pipeline's online traffic.
    let (_, shown) = send(&p, &t, reqwest::Method::GET, "/v1/pipelines/cascade", None).await;
    assert_eq!(
        shown["status"]["queries_last_minute"], 1,
        "{}",
        shown["status"]
    );
    p.stop().await;
}

/// A pipeline's validation set: rejected with the array or label named when it does not fit,
/// and once stored, plans judge configurations by the end-to-end accuracy measured on it
/// (every combination of the models the nodes may run), which the applied plan then serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_set_measures_the_plans_end_to_end_accuracy() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    // The cheap node is model-less over two models: two combinations to measure.
    for (model, app) in [
        ("digits-mlp-s", "digits"),
        ("digits-logreg", "digits"),
        ("digits-mlp-l", "large"),
    ] {
        p.register_ok(&t, &Registration::zoo(model, app)).await;
    }
    for model in ["digits-mlp-s", "digits-logreg", "digits-mlp-l"] {
        p.wait_ready(&t, model, READY).await;
    }
    let mut doc = cascade();
    doc["nodes"][0]["app"] = json!("digits");
    let (s, body) = post_json(&p, &t, "/v1/pipelines", &doc).await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let put = |path: &'static str, bytes: Vec<u8>| {
        send(
            &p,
            &t,
            reqwest::Method::PUT,
            path,
            Some(("application/octet-stream", bytes)),
        )
    };
    const PATH: &str = "/v1/pipelines/cascade/validation?output=probabilities";
    let path = PATH;
    let good = registry_common::zoo_bytes("digits-val.npz");
    let arrays = zoo_arrays("digits-val.npz");
    let x = arrays.iter().find(|a| a.name == "x").unwrap().clone();
    let y = arrays.iter().find(|a| a.name == "y").unwrap().clone();
    let npz = |arrays: &[infaas_core::Tensor]| infaas_protocol::npz::write_npz(arrays).unwrap();

    // Sets that do not fit: each a 4xx naming the problem, nothing stored.
    let (s, e) = put(path, b"not a zip".to_vec()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("not a valid NPZ"),
        "{e}"
    );
    let (s, e) = put("/v1/pipelines/cascade/validation", good.clone()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let msg = e["error"].as_str().unwrap();
    assert!(
        msg.contains("cheap_probabilities") && msg.contains("output="),
        "{e}"
    );
    let (s, e) = put("/v1/pipelines/cascade/validation?output=nope", good.clone()).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("no output 'nope'"),
        "{e}"
    );
    let narrow = infaas_core::Tensor {
        name: "x".into(),
        shape: vec![4, 32],
        data: infaas_core::TensorData::Fp32(vec![0.0; 128]),
    };
    let (s, e) = put(path, npz(&[narrow, y.slice_batch(0, 4)])).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    let msg = e["error"].as_str().unwrap();
    assert!(
        msg.contains("'x'") && msg.contains("64") && msg.contains("pipeline"),
        "{e}"
    );
    let mut labels = y.slice_batch(0, 4);
    labels.data = infaas_core::TensorData::Int64(vec![10, 1, 2, 3]);
    let (s, e) = put(path, npz(&[x.slice_batch(0, 4), labels])).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{e}");
    assert!(
        e["error"].as_str().unwrap().contains("label 10 at row 0"),
        "{e}"
    );
    let (s, e) = put(path, vec![0u8; 64 * 1024 * 1024 + 1]).await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{e}");
    assert!(e["error"].as_str().unwrap().contains("at most"), "{e}");
    let other = p.tenant("beta", open_quotas()).await;
    let (s, _) = send(
        &p,
        &other,
        reqwest::Method::PUT,
        path,
        Some(("application/octet-stream", good.clone())),
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (_, shown) = send(&p, &t, reqwest::Method::GET, "/v1/pipelines/cascade", None).await;
    assert!(shown["validation"].is_null(), "{shown}");

    // Without a set, the plan's accuracy is an estimate.
    let plan_body = json!({"generate": "poisson:rate=50,duration=30"});
    let (s, estimated) = post_json(&p, &t, "/v1/pipelines/cascade/plan", &plan_body).await;
    assert_eq!(s, StatusCode::OK, "{estimated}");
    assert!(
        estimated["accuracy_source"]
            .as_str()
            .unwrap()
            .starts_with("estimated"),
        "{estimated}"
    );

    let (s, stored) = put(path, good.clone()).await;
    assert_eq!(s, StatusCode::OK, "{stored}");
    assert_eq!(stored, json!({"output": "probabilities", "rows": 540}));
    let (_, shown) = send(&p, &t, reqwest::Method::GET, "/v1/pipelines/cascade", None).await;
    assert_eq!(shown["validation"], stored);

    let applied_body = json!({"generate": "poisson:rate=50,duration=30", "apply": true});
    let (s, plan) = post_json(&p, &t, "/v1/pipelines/cascade/plan", &applied_body).await;
    assert_eq!(s, StatusCode::OK, "{plan}");
    assert_eq!(
        plan["accuracy_source"], "measured on the pipeline's validation set",
        "{plan}"
    );
    let notes = plan["notes"].to_string();
    assert!(
        notes.contains("540 rows") && notes.contains("2 combinations"),
        "{notes}"
    );
    let planned = plan["accuracy"].as_f64().unwrap();

    // The applied plan serves the set at the accuracy it was planned with.
    let (xs, ys) = validation("image", 540);
    let (s, answer) = post_json(
        &p,
        &t,
        "/v1/pipelines/cascade/infer",
        &json!({"inputs": [xs]}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{answer}");
    let cheap = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "cheap")
        .unwrap()["model"]
        .clone();
    assert_eq!(node(&answer, "cheap")["model"], cheap, "{answer}");
    let rows = rows_of(output(&answer, "probabilities"));
    let served = rows
        .iter()
        .zip(&ys)
        .filter(|(r, y)| argmax(r) == **y)
        .count() as f64
        / 540.0;
    assert!(
        (served - planned).abs() <= 0.02,
        "planned {planned:.4} (measured), served {served:.4}"
    );

    // Removed, plans estimate again; a second removal is a 404.
    let (s, _) = send(
        &p,
        &t,
        reqwest::Method::DELETE,
        "/v1/pipelines/cascade/validation",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NO_CONTENT);
    let (s, _) = send(
        &p,
        &t,
        reqwest::Method::DELETE,
        "/v1/pipelines/cascade/validation",
        None,
    )
    .await;
    assert_eq!(s, StatusCode::NOT_FOUND);
    let (s, again) = post_json(&p, &t, "/v1/pipelines/cascade/plan", &plan_body).await;
    assert_eq!(s, StatusCode::OK, "{again}");
    assert!(again["accuracy_source"]
        .as_str()
        .unwrap()
        .starts_with("estimated"));
    p.stop().await;
}
