//! Overload on the real server (Loki's accuracy scaling and early dropping): a pipeline whose
//! most accurate model (a slow copy of `digits-mlp-l`, same answers, ~10 ms a row, made by
//! `tests/python/make_heavy_model.py`) cannot carry the offered load on this machine's cores
//! moves to faster variants instead of missing its SLO, reports the accuracy it served, and
//! comes back to the most accurate model when the load falls.
//!
//! `cargo test -p infaas --test integration overload`. Needs ONNX Runtime and `python3` with
//! `onnx` and `numpy` (to build the slow model).

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infaas_testing::platform::{
    self as registry_common, fast_config, open_quotas, ort_library, zoo_arrays, Platform,
    Registration, Tenant,
};
use registry_common::backends::Backends;
use reqwest::StatusCode;
use serde_json::{json, Value};

const READY: Duration = Duration::from_secs(300);
const SLO_MS: f64 = 250.0;

/// What a phase of load saw.
#[derive(Default)]
struct Seen {
    sent: AtomicU64,
    answered: AtomicU64,
    /// Answers within the SLO by the platform's own measure (the answer's `latency_ms`, from
    /// the query's arrival at the pipeline to its answer).
    within: AtomicU64,
    /// Answers within the SLO as this client measured them (HTTP and this process's
    /// scheduling included: the client shares the machine's cores with the server).
    within_client: AtomicU64,
    dropped: AtomicU64,
    other: AtomicU64,
    /// Sum of the answers' reported accuracies, in millionths.
    accuracy_micros: AtomicU64,
}

impl Seen {
    fn get(&self, f: fn(&Seen) -> &AtomicU64) -> u64 {
        f(self).load(Ordering::Relaxed)
    }

    fn mean_accuracy(&self) -> f64 {
        let n = self.get(|s| &s.answered).max(1);
        self.get(|s| &s.accuracy_micros) as f64 / 1e6 / n as f64
    }
}

/// Sends one-row queries at `rate` per second for `secs`, each its own task.
async fn load(p: &Platform, t: &Tenant, rate: f64, secs: f64, rows: &Arc<Vec<Value>>) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let url = format!("{}/v1/pipelines/guarded/infer", p.base);
    let start = Instant::now();
    let mut k = 0u64;
    let mut tasks = Vec::new();
    while start.elapsed().as_secs_f64() < secs {
        let due = Duration::from_secs_f64(k as f64 / rate);
        if let Some(wait) = due.checked_sub(start.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let (http, url, token, seen) = (p.http.clone(), url.clone(), t.token.clone(), seen.clone());
        let body = json!({"inputs": [rows[k as usize % rows.len()].clone()]});
        tasks.push(tokio::spawn(async move {
            seen.sent.fetch_add(1, Ordering::Relaxed);
            let at = Instant::now();
            let resp = http.post(url).bearer_auth(token).json(&body).send().await;
            let Ok(resp) = resp else {
                seen.other.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let status = resp.status();
            let v: Value = resp.json().await.unwrap_or(Value::Null);
            let ms = at.elapsed().as_secs_f64() * 1e3;
            if status == StatusCode::OK {
                seen.answered.fetch_add(1, Ordering::Relaxed);
                if v["latency_ms"].as_f64().is_some_and(|l| l <= SLO_MS) {
                    seen.within.fetch_add(1, Ordering::Relaxed);
                }
                if ms <= SLO_MS {
                    seen.within_client.fetch_add(1, Ordering::Relaxed);
                }
                let acc = v["accuracy"].as_f64().unwrap_or(0.0);
                seen.accuracy_micros
                    .fetch_add((acc * 1e6) as u64, Ordering::Relaxed);
            } else if v["error_type"] == "dropped" {
                assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{v}");
                seen.dropped.fetch_add(1, Ordering::Relaxed);
            } else {
                seen.other.fetch_add(1, Ordering::Relaxed);
            }
        }));
        k += 1;
    }
    for t in tasks {
        t.await.unwrap();
    }
    seen
}

async fn status(p: &Platform, t: &Tenant) -> Value {
    p.get(t, "/v1/pipelines/guarded").await.body["status"].clone()
}

/// The model the installed allocation gives most of node `cheap`'s load.
fn main_model(status: &Value) -> String {
    let node = status["overload"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["name"] == "cheap")
        .unwrap();
    node["placements"]
        .as_array()
        .unwrap()
        .iter()
        .max_by(|a, b| {
            a["load_qps"]
                .as_f64()
                .unwrap()
                .total_cmp(&b["load_qps"].as_f64().unwrap())
        })
        .unwrap()["model"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits until the installed allocation is in `mode`, at most `secs`.
async fn wait_mode(p: &Platform, t: &Tenant, mode: &str, secs: u64) -> Value {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let s = status(p, t).await;
        if s["overload"]["mode"] == mode {
            return s;
        }
        assert!(Instant::now() < until, "no {mode} within {secs} s: {s}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_pipeline_trades_accuracy_not_its_slo_and_recovers() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let Some(heavy) = registry_common::heavy_mlp(b.dir.path(), &[]) else {
        return;
    };

    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    let val = registry_common::zoo_bytes("digits-val.npz");
    p.register_ok(
        &t,
        &Registration::default()
            .text("name", "digits-mlp-heavy")
            .text("app", "digits")
            .file(
                "model",
                std::fs::read(&heavy).unwrap(),
                "digits-mlp-heavy.onnx",
            )
            .file("validation", val, "digits-val.npz"),
    )
    .await;
    for model in ["digits-logreg", "digits-mlp-s"] {
        p.register_ok(&t, &Registration::zoo(model, "digits")).await;
    }
    for model in ["digits-mlp-heavy", "digits-logreg", "digits-mlp-s"] {
        p.wait_ready(&t, model, READY).await;
    }
    let doc = json!({
        "name": "guarded",
        "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
        "nodes": [{"name": "cheap", "app": "digits", "inputs": {"input": "image"}}],
        "outputs": {"probabilities": "cheap.probabilities"},
        "slo": {"latency_ms": SLO_MS},
        "overload": {"accuracy_scaling": true}
    });
    let a = p
        .send(
            p.http
                .post(format!("{}/v1/pipelines", p.base))
                .bearer_auth(&t.token)
                .json(&doc),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{}", a.body);

    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|a| a.name == "x")
        .unwrap();
    let rows: Arc<Vec<Value>> = Arc::new(
        (0..540)
            .map(|i| {
                let r = x.slice_batch(i, i + 1);
                let data: Vec<f64> = (0..64).filter_map(|k| r.data.get_f64(k)).collect();
                json!({"name": "image", "shape": [1, 64], "datatype": "FP32", "data": data})
            })
            .collect(),
    );

    // Light load: the most accurate model carries it (hardware scaling).
    load(&p, &t, 20.0, 12.0, &rows).await;
    let calm = wait_mode(&p, &t, "hardware_scaling", 30).await;
    assert_eq!(main_model(&calm), "digits-mlp-heavy", "{calm}");
    // Served by the allocation: every answer from the most accurate model.
    let light = load(&p, &t, 20.0, 5.0, &rows).await;
    assert_eq!(light.get(|s| &s.answered), light.get(|s| &s.sent));
    let calm_accuracy = light.mean_accuracy();
    assert!(calm_accuracy > 0.98, "{calm_accuracy}");

    // Overload: far more than the slow model can serve on these cores. The controller turns
    // to accuracy scaling; meanwhile rerouting and early dropping keep the answers in time.
    let heavy_rows_per_s: f64 = calm["overload"]["nodes"][0]["placements"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["model"] == "digits-mlp-heavy")
        .map(|p| p["capacity_qps"].as_f64().unwrap())
        .sum();
    // Three times what the allocation plans the slow model to carry (its profiled throughput
    // at the resource manager's target utilisation), within what the HTTP edge sends here.
    let utilisation = infaas_scheduler::loki::ManagerSettings::default().utilisation;
    let rate = (heavy_rows_per_s * utilisation * 3.0).clamp(300.0, 900.0);
    let surge = load(&p, &t, rate, 25.0, &rows).await;
    let hot = wait_mode(&p, &t, "accuracy_scaling", 20).await;
    let (answered, within) = (surge.get(|s| &s.answered), surge.get(|s| &s.within));
    eprintln!(
        "overload at {rate:.0} q/s (the slow model carries {heavy_rows_per_s:.0}): sent {}, answered {answered}, within {SLO_MS} ms {within} (as the client saw them {}), dropped {}, other {}, accuracy {:.4} (calm {calm_accuracy:.4})",
        surge.get(|s| &s.sent),
        surge.get(|s| &s.within_client),
        surge.get(|s| &s.dropped),
        surge.get(|s| &s.other),
        surge.mean_accuracy()
    );
    assert!(
        answered as f64 >= 0.4 * surge.get(|s| &s.sent) as f64,
        "most queries are answered"
    );
    assert!(
        within as f64 >= 0.99 * answered as f64,
        "{within} of {answered} answers within the SLO"
    );
    assert_eq!(
        surge.get(|s| &s.other),
        0,
        "only answers and documented drops"
    );
    assert!(
        surge.mean_accuracy() < calm_accuracy,
        "accuracy traded: {} vs {calm_accuracy}",
        surge.mean_accuracy()
    );
    assert_ne!(main_model(&hot), "digits-mlp-heavy", "{hot}");
    assert!(
        hot["overload"]["relative_accuracy"].as_f64().unwrap() < 1.0,
        "{hot}"
    );
    // The pipeline's arrival rate is forecast (the resource manager plans for the higher of
    // its moving average and the forecast).
    let observed = hot["forecast"]["observed"].as_array().unwrap();
    assert!(
        observed.iter().any(|o| o[1].as_f64().unwrap() > 100.0),
        "{hot}"
    );
    assert!(hot["forecast"]["max_next_10s"]
        .as_f64()
        .unwrap()
        .is_finite());
    // The served accuracy per second is in the status (the dashboard draws it).
    let quality = hot["quality"].as_array().unwrap();
    assert!(
        quality
            .iter()
            .any(|q| q[2].as_f64().is_some_and(|a| a < calm_accuracy)),
        "{hot}"
    );

    // The load falls: back to the most accurate model.
    load(&p, &t, 20.0, 15.0, &rows).await;
    let back = wait_mode(&p, &t, "hardware_scaling", 30).await;
    assert_eq!(main_model(&back), "digits-mlp-heavy", "{back}");
    let after = load(&p, &t, 20.0, 5.0, &rows).await;
    assert!(
        (after.mean_accuracy() - calm_accuracy).abs() < 1e-9,
        "recovered: {} vs {calm_accuracy}",
        after.mean_accuracy()
    );
    let events = p.get(&t, "/v1/apps/digits/scaling-events").await.body;
    let actions: Vec<&str> = events["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .filter(|a| a.starts_with("pipeline-") && a.ends_with("-scaling"))
        .collect();
    assert!(
        actions.contains(&"pipeline-accuracy-scaling")
            && actions.contains(&"pipeline-hardware-scaling"),
        "{events}"
    );
    p.stop().await;
}
