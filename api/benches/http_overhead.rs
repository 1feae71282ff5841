//! What serving over HTTP costs against calling ONNX Runtime directly on the same variant file
//! with the same settings (`DirectSession`: one session, the caller's thread, no queue).
//!
//! (a) Latency at batch 1: one request at a time through `POST /v1/apps/{app}/infer` (JSON,
//!     Bearer token, model-less selection, dynamic batcher, session thread) against
//!     `DirectSession::run` on one row. The added p50 is the difference (target <= 100 us).
//!     `GET /healthz` over the same connection shows the floor of the HTTP client and server.
//! (b) Saturation throughput: `CLIENTS` closed-loop clients sending 1-row queries, against
//!     raw ONNX Runtime running batches of the variant family's largest max batch back to
//!     back (and one row at a time), as ratios (target >= 0.95 of raw at the same batch).
//!
//! The server runs in this process on the embedded defaults (SQLite, local directory) in a
//! temporary directory; the clients share the machine's cores with it, as raw ONNX Runtime
//! does not have to. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache).
//!
//! Run: `cargo bench -p infaas-api --bench http_overhead`
//! (`INFAAS_BENCH_MODEL=digits-logreg` for another zoo model; default `digits-mlp-l`).

#[path = "../tests/registry_common/mod.rs"]
mod registry_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infaas_core::{Tensor, TensorData};
use infaas_executors::engine::{DirectSession, SessionConfig};
use infaas_executors::stats::percentile;
use registry_common::backends::Backends;
use registry_common::{fast_config, open_quotas, ort_library, zoo_arrays, Platform, Registration};
use serde_json::{json, Value};

const RUNS: usize = 3000;
const WARMUP: usize = 300;
const CLIENTS: usize = 64;
const WINDOW: Duration = Duration::from_secs(3);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p(sorted: &[f64], q: f64) -> f64 {
    percentile(sorted, q)
}

fn rows(x: &Tensor, n: usize) -> Tensor {
    let width: usize = x.shape[1..].iter().product();
    let TensorData::Fp32(data) = &x.data else {
        panic!("digits x is FP32")
    };
    let take: Vec<f32> = data.iter().cycle().take(n * width).copied().collect();
    Tensor::new("input", vec![n, width], TensorData::Fp32(take)).expect("a tensor")
}

#[tokio::main]
async fn main() {
    let Some(ort) = ort_library() else {
        return;
    };
    let model = std::env::var("INFAAS_BENCH_MODEL").unwrap_or_else(|_| "digits-mlp-l".into());
    let b = Backends::embedded();
    let p_ = Platform::start(fast_config(&b, &ort)).await;
    let t = p_.tenant("bench", open_quotas()).await;
    p_.register_ok(&t, &Registration::zoo(&model, "bench"))
        .await;
    p_.wait_ready(&t, &model, Duration::from_secs(600)).await;
    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|a| a.name == "x")
        .expect("x in digits-val.npz");
    let one = rows(&x, 1);
    let TensorData::Fp32(row) = &one.data else {
        unreachable!()
    };
    let body = json!({"inputs": [{"name": "input", "shape": [1, row.len()], "datatype": "FP32", "data": row}]})
        .to_string();
    let url = format!("{}/v1/apps/bench/infer", p_.base);
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .tcp_nodelay(true)
        .build()
        .expect("an HTTP client");
    let query = || {
        http.post(&url)
            .bearer_auth(&t.token)
            .header("content-type", "application/json")
            .body(body.clone())
    };

    // The variant a lone 1-row query gets, and its file.
    let first: Value = query()
        .send()
        .await
        .expect("a query")
        .json()
        .await
        .expect("JSON");
    let name = first["variant"].as_str().expect("a variant").to_string();
    let db = p_.db();
    let record = db.get_model(&t.id, &model).await.expect("the model");
    let model_id = record.id.as_str();
    let variants = db.list_variants(model_id).await.expect("variants");
    let v = variants
        .iter()
        .find(|v| v.name == name)
        .expect("the variant");
    let widest = variants
        .iter()
        .filter(|o| o.file_id == v.file_id && o.threads == v.threads)
        .map(|o| o.max_batch)
        .max()
        .unwrap_or(v.max_batch);
    let files = db.list_model_files(model_id).await.expect("files");
    let file = files.iter().find(|f| f.id == v.file_id).expect("its file");
    let bytes = p_
        .server
        .state
        .objects
        .get_bytes(&file.object_key)
        .await
        .expect("the variant's file");
    let cfg = SessionConfig {
        intra_threads: v.threads,
        ..SessionConfig::default()
    };

    // (a) latency at batch 1.
    let raw = {
        let (bytes, one) = (bytes.clone(), one.clone());
        let cfg = cfg.clone();
        tokio::task::spawn_blocking(move || {
            let mut s = DirectSession::load(&bytes, &cfg).expect("a session");
            let mut lat = Vec::with_capacity(RUNS);
            for i in 0..WARMUP + RUNS {
                let t0 = Instant::now();
                s.run(vec![one.clone()]).expect("a run");
                if i >= WARMUP {
                    lat.push(ms(t0.elapsed()));
                }
            }
            lat.sort_by(f64::total_cmp);
            lat
        })
        .await
        .expect("the raw loop")
    };
    let mut over_http = Vec::with_capacity(RUNS);
    let mut server_side = Vec::with_capacity(RUNS);
    for i in 0..WARMUP + RUNS {
        let t0 = Instant::now();
        let r = query().send().await.expect("a query");
        let server_ms: f64 = r
            .headers()
            .get("x-infaas-latency-ms")
            .and_then(|h| h.to_str().ok()?.parse().ok())
            .unwrap_or(f64::NAN);
        assert!(r.status().is_success(), "status {}", r.status());
        r.bytes().await.expect("a body");
        if i >= WARMUP {
            over_http.push(ms(t0.elapsed()));
            server_side.push(server_ms);
        }
    }
    over_http.sort_by(f64::total_cmp);
    server_side.sort_by(f64::total_cmp);
    let healthz_url = format!("{}/healthz", p_.base);
    let mut floor = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        let t0 = Instant::now();
        let r = http.get(&healthz_url).send().await.expect("healthz");
        r.bytes().await.expect("a body");
        floor.push(ms(t0.elapsed()));
    }
    floor.sort_by(f64::total_cmp);

    // (b) saturation throughput.
    let raw_rate = |batch: usize| {
        let (bytes, x, cfg) = (bytes.clone(), x.clone(), cfg.clone());
        tokio::task::spawn_blocking(move || {
            let mut s = DirectSession::load(&bytes, &cfg).expect("a session");
            let input = rows(&x, batch);
            for _ in 0..20 {
                s.run(vec![input.clone()]).expect("a run");
            }
            let t0 = Instant::now();
            let mut done = 0usize;
            while t0.elapsed() < WINDOW {
                s.run(vec![input.clone()]).expect("a run");
                done += batch;
            }
            done as f64 / t0.elapsed().as_secs_f64()
        })
    };
    let raw_wide = raw_rate(widest).await.expect("raw throughput");
    let raw_one = raw_rate(1).await.expect("raw throughput");

    let stop = Arc::new(AtomicBool::new(false));
    let ok = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (stop, ok) = (stop.clone(), ok.clone());
        let req = query();
        tasks.push(tokio::spawn(async move {
            let mut seen: BTreeMap<String, u64> = BTreeMap::new();
            let mut errors: BTreeMap<u16, u64> = BTreeMap::new();
            while !stop.load(Ordering::Relaxed) {
                let Some(r) = req.try_clone() else { break };
                match r.send().await {
                    Ok(resp) if resp.status().is_success() => {
                        let v = resp
                            .headers()
                            .get("x-infaas-variant")
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("?")
                            .to_string();
                        let _ = resp.bytes().await;
                        ok.fetch_add(1, Ordering::Relaxed);
                        *seen.entry(v).or_default() += 1;
                    }
                    Ok(resp) => *errors.entry(resp.status().as_u16()).or_default() += 1,
                    Err(_) => *errors.entry(0).or_default() += 1,
                }
            }
            (seen, errors)
        }));
    }
    // Warm up (the selector may load a batching variant), then measure one window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (n0, t0) = (ok.load(Ordering::Relaxed), Instant::now());
    tokio::time::sleep(WINDOW).await;
    let served = (ok.load(Ordering::Relaxed) - n0) as f64 / t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    let mut seen: BTreeMap<String, u64> = BTreeMap::new();
    let mut errors: BTreeMap<u16, u64> = BTreeMap::new();
    for task in tasks {
        let (s, e) = task.await.expect("a client");
        for (k, n) in s {
            *seen.entry(k).or_default() += n;
        }
        for (k, n) in e {
            *errors.entry(k).or_default() += n;
        }
    }

    let raw_p50 = p(&raw, 0.5);
    println!(
        "http_overhead: model {model}, variant {name} ({} threads), {RUNS} runs",
        v.threads
    );
    println!("\n(a) latency at batch 1            p50 ms    p99 ms");
    println!(
        "raw ONNX Runtime (DirectSession) {raw_p50:>8.4} {:>9.4}",
        p(&raw, 0.99)
    );
    println!(
        "HTTP/JSON, client to client       {:>8.4} {:>9.4}",
        p(&over_http, 0.5),
        p(&over_http, 0.99)
    );
    println!(
        "  server-measured (x-infaas-latency-ms) {:>6.4} {:>9.4}",
        p(&server_side, 0.5),
        p(&server_side, 0.99)
    );
    println!(
        "GET /healthz (HTTP floor)         {:>8.4} {:>9.4}",
        p(&floor, 0.5),
        p(&floor, 0.99)
    );
    println!(
        "added p50 over HTTP: {:.1} us (target <= 100 us); of which the HTTP floor {:.1} us",
        (p(&over_http, 0.5) - raw_p50) * 1e3,
        p(&floor, 0.5) * 1e3
    );
    println!("\n(b) saturation, rows/s");
    println!("raw ONNX Runtime, batch {widest:<3}      {raw_wide:>10.0}");
    println!("raw ONNX Runtime, batch 1        {raw_one:>10.0}");
    println!("HTTP, {CLIENTS} clients x 1 row        {served:>10.0}");
    println!(
        "ratio HTTP / raw batch {widest}: {:.3} (target >= 0.95); HTTP / raw batch 1: {:.3}",
        served / raw_wide,
        served / raw_one
    );
    println!("variants that answered: {seen:?}; errors: {errors:?}");
    p_.stop().await;
}
