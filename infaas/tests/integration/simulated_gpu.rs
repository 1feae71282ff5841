//! A worker process with a simulated GPU, end to end: it advertises a GPU marked simulated,
//! the registry then generates GPU variants and profiles them with that GPU's latency profile,
//! and a GPU variant loaded there serves a query with the CPU variant's outputs, no sooner than
//! the profiled latency.
//!
//! `cargo nextest run -p infaas-api --test simulated_gpu`. Needs ONNX Runtime (`ORT_DYLIB_PATH`
//! or the `scripts/setup.sh` cache).

#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infaas_executors::engine::{Engine, SessionConfig};
use registry_common::backends::Backends;
use registry_common::{
    fast_config, open_quotas, ort_library, zoo_arrays, zoo_bytes, Platform, Registration, Tenant,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

const MODEL: &str = "digits-mlp-m";
const WORKER: &str = "sim-gpu-0";
/// The simulated GPU's profile: far slower than the CPU runs of a digits MLP, so the measured
/// latencies can only come from the hold.
const PROFILE: &str = "batch_size,p50_ms,p99_ms\n1,6,8\n8,12,15\n64,40,50\n";

/// A worker process, killed and reaped when dropped (also when a test fails).
struct WorkerProcess(std::process::Child);

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn workers(p: &Platform, t: &Tenant) -> Vec<Value> {
    let w = p.get(t, "/v1/workers").await;
    assert_eq!(w.status, StatusCode::OK, "{}", w.text);
    w.body["workers"].as_array().unwrap().clone()
}

async fn wait_until(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !done().await {
        assert!(start.elapsed() < timeout, "{what} within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// [`PROFILE`]'s median at `batch`, interpolated between its batch sizes.
fn profile_p50(batch: u64) -> f64 {
    let b = batch as f64;
    match batch {
        0..=1 => 6.0,
        2..=8 => 6.0 + 6.0 * (b - 1.0) / 7.0,
        _ => 12.0 + 28.0 * (b - 8.0) / 56.0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simulated_gpu_variants_are_profiled_and_served() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let profile_path = b.dir.path().join("simulated-gpu.csv");
    std::fs::write(&profile_path, PROFILE).unwrap();
    let cfg = fast_config(&b, &ort);
    let objects = cfg.object_store.clone().unwrap();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;

    // Without a GPU anywhere, no GPU variants: the embedded worker offers a CPU only.
    assert!(workers(&p, &t).await.iter().all(|w| w["gpus"] == json!([])));

    let _worker = WorkerProcess(
        Command::new(env!("CARGO_BIN_EXE_infaas"))
            .args([
                "--object-store",
                &objects,
                "--log-level",
                "warn",
                "--worker-thread-budget",
                "8",
            ])
            .arg("--ort-dylib-path")
            .arg(&ort)
            .arg("--simulated-gpu-profile")
            .arg(&profile_path)
            .args(["worker", "--controller", &p.base])
            .env("INFAAS_CLUSTER_TOKEN", &p.server.state.cluster_token)
            .env("INFAAS_WORKER_NAME", WORKER)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    );
    wait_until(
        "the simulated-GPU worker registers",
        Duration::from_secs(30),
        async || {
            workers(&p, &t)
                .await
                .iter()
                .any(|w| w["name"] == WORKER && w["alive"] == true)
        },
    )
    .await;
    let sim = workers(&p, &t)
        .await
        .into_iter()
        .find(|w| w["name"] == WORKER)
        .unwrap();
    assert_eq!(sim["hardware"], json!(["cpu", "gpu"]));
    assert_eq!(sim["gpus"][0]["simulated"], true);
    assert_eq!(sim["gpus"][0]["profile"], profile_path.to_str().unwrap());
    assert_eq!(sim["gpus"][0]["profile_p50_ms_batch_1"], 6.0);

    // The registry now plans GPU variants, profiled with the simulated GPU's latencies.
    p.register_ok(&t, &Registration::zoo(MODEL, "digits")).await;
    let model = p.wait_ready(&t, MODEL, Duration::from_secs(240)).await;
    let variants = model["variants"].as_array().unwrap();
    let gpu: Vec<&Value> = variants.iter().filter(|v| v["hardware"] == "gpu").collect();
    assert!(!gpu.is_empty(), "no GPU variants: {model}");
    // Made, then kept or pruned (the simulated GPU holds every file for the same time, so
    // files of equal accuracy tie there and the ORT-optimised one is kept).
    let pruned_gpu: Vec<&Value> = model["pruned"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["hardware"] == "gpu")
        .collect();
    assert!(
        gpu.iter().chain(&pruned_gpu).any(|v| v["file"] == "fp16"),
        "no FP16 variant on the GPU"
    );
    assert!(gpu.iter().chain(&pruned_gpu).all(|v| v["file"] != "int8"));
    assert!(gpu.iter().any(|v| v["max_batch"] == 64));
    for v in &gpu {
        assert_eq!(v["status"], "profiled", "{v}");
        let profiled = v["latency"].as_array().unwrap();
        assert!(!profiled.is_empty(), "{v}");
        // The hold is a lower bound: every run lasts at least the profile's median.
        for l in profiled {
            let batch = l["batch"].as_u64().unwrap();
            let floor = profile_p50(batch);
            assert!(
                l["p50_ms"].as_f64().unwrap() >= floor,
                "batch {batch} under {floor} ms: {v}"
            );
        }
    }

    // Load an FP32 GPU variant (the source file's if kept, else the ORT-optimised one's) on
    // the simulated worker (as a scaling decision would), then query the model: its only
    // instance is that one.
    let fp32 = |token: &str| format!("{MODEL}.{token}.gpu.t1.b8");
    let gpu_name = ["fp32", "opt"]
        .map(fp32)
        .into_iter()
        .find(|n| gpu.iter().any(|v| v["name"] == n.as_str()))
        .unwrap_or_else(|| panic!("no FP32 GPU variant at max batch 8 kept: {model}"));
    // The model reads as ready a moment before the registry refreshes the serving catalog
    // (a query in between refreshes it itself); this test reads the catalog directly.
    p.server
        .state
        .cluster
        .refresh_catalog()
        .await
        .expect("the serving catalog");
    let catalog = p.server.state.cluster.catalog();
    let served = catalog
        .variants()
        .find(|s| s.entry.variant.name == gpu_name)
        .unwrap_or_else(|| panic!("{gpu_name} is not in the serving catalog"));
    let req = infaas_control::serving::load_request(served);
    let sim_id = sim["id"].as_str().unwrap();
    let handle = p.server.state.cluster.handle(sim_id).unwrap();
    handle.load(&req).await.unwrap();
    wait_until(
        "the GPU instance shows in the worker's heartbeat",
        Duration::from_secs(10),
        async || {
            workers(&p, &t).await.iter().any(|w| {
                w["name"] == WORKER
                    && w["instances"]
                        .as_array()
                        .is_some_and(|i| i.iter().any(|i| i["variant"] == gpu_name.as_str()))
            })
        },
    )
    .await;

    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|t| t.name == "x")
        .unwrap();
    let rows = x.slice_batch(0, 1);
    let data: Vec<f64> = (0..rows.data.len())
        .map(|k| rows.data.get_f64(k).unwrap())
        .collect();
    let body =
        json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": data}]});
    let mut answer = Value::Null;
    wait_until(
        "a query served by the GPU instance",
        Duration::from_secs(10),
        async || {
            let a = p
                .send(
                    p.http
                        .post(format!("{}/v1/models/{MODEL}/infer", p.base))
                        .bearer_auth(&t.token)
                        .json(&body),
                )
                .await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.text);
            answer = a.body;
            answer["variant"] == gpu_name.as_str()
        },
    )
    .await;
    assert_eq!(answer["hardware"], "gpu");
    assert_eq!(answer["worker"], sim_id);
    assert!(answer["latency_ms"].as_f64().unwrap() >= 6.0, "{answer}");

    // The outputs are ONNX Runtime's on the CPU for the same file.
    let engine = Engine::load(zoo_bytes("digits-mlp-m.onnx"), &SessionConfig::default()).unwrap();
    let mut input = rows.clone();
    input.name = "input".into();
    let expected = engine.run_blocking(vec![input]).unwrap();
    let outputs = answer["outputs"].as_array().unwrap();
    assert_eq!(outputs.len(), expected.len());
    for e in &expected {
        let got = outputs
            .iter()
            .find(|o| o["name"] == e.name.as_str())
            .unwrap();
        let got: Vec<f64> = flatten(&got["data"]);
        let want: Vec<f64> = (0..e.data.len())
            .map(|k| e.data.get_f64(k).unwrap())
            .collect();
        assert_eq!(got.len(), want.len(), "output {}", e.name);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-6,
                "output {}: {got:?} vs {want:?}",
                e.name
            );
        }
    }
    p.stop().await;
}

fn flatten(v: &Value) -> Vec<f64> {
    match v {
        Value::Array(items) => items.iter().flat_map(flatten).collect(),
        other => vec![other.as_f64().unwrap()],
    }
}
