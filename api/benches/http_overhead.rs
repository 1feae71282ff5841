//! What serving over HTTP costs against calling ONNX Runtime directly on the same variant file
//! with the same settings (`DirectSession`: one session, the caller's thread, no queue).
//!
//! (a) Latency at batch 1 on a zoo model (`INFAAS_BENCH_MODEL`, default `digits-mlp-l`): one
//!     request at a time through `POST /v1/apps/{app}/infer` (JSON, Bearer token, model-less
//!     selection, dynamic batcher, session thread) against `DirectSession::run` on one row of
//!     the variant the lone query got. The added p50 is the difference (target <= 100 us).
//!     `GET /healthz` over the same connection shows the floor of the HTTP client and server.
//!     Both are measured twice: with reqwest on the server's own runtime, and with a plain
//!     blocking socket on its own thread (HTTP/1.1 written and parsed by hand). Beside them:
//!     the machine's own loopback round trip for the same bytes (a blocking thread that
//!     answers with the server's last answer, no HTTP), and the router called in-process with
//!     no socket (whole middleware stack, then the handler alone).
//! (b) Saturation throughput on a model whose run time dominates (`registry_common::heavy`:
//!     `INFAAS_BENCH_CHANNELS` x `INFAAS_BENCH_LAYERS` 3x3 convolutions in front of
//!     `digits-mlp-scores`, default 384 x 5, with that model's accuracy): `CLIENTS` closed-loop
//!     clients send 1-row queries; once one variant answers them all, one window is measured,
//!     then raw ONNX Runtime runs that variant's file and threads at its max batch (and at
//!     batch 1) back to back. Ratios against raw (target >= 0.95 at the same batch). On the
//!     zoo's microsecond models HTTP itself is the bottleneck, not the serving path.
//!
//! The server runs in this process on the embedded defaults (SQLite, local directory) in a
//! temporary directory; the clients share the machine's cores with it, as raw ONNX Runtime
//! does not have to. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache).
//!
//! Run: `cargo bench -p infaas-api --bench http_overhead`
//! (`INFAAS_BENCH_ONLY=latency` skips (b); `INFAAS_BENCH_RUNS`, default 5000, queries per
//! latency series; `INFAAS_BENCH_WORKERS` sets the runtime's worker threads).

use infaas_testing::platform as registry_common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_core::stats::percentile;
use infaas_core::{Tensor, TensorData};
use infaas_executors::engine::{DirectSession, SessionConfig};
use registry_common::backends::Backends;
use registry_common::heavy::heavy_cnn;
use registry_common::{
    fast_config, open_quotas, ort_library, zoo_arrays, zoo_bytes, Platform, Registration, Tenant,
};
use serde_json::{json, Value};

const WARMUP: usize = 300;
const CLIENTS: usize = 128;
const WINDOW: Duration = Duration::from_secs(5);

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn p(sorted: &[f64], q: f64) -> f64 {
    percentile(sorted, q)
}

fn rows(x: &Tensor, n: usize) -> Tensor {
    named_rows(x, n, "input")
}

fn named_rows(x: &Tensor, n: usize, name: &str) -> Tensor {
    let width: usize = x.shape[1..].iter().product();
    let TensorData::Fp32(data) = &x.data else {
        panic!("digits x is FP32")
    };
    let take: Vec<f32> = data.iter().cycle().take(n * width).copied().collect();
    Tensor::new(name, vec![n, width], TensorData::Fp32(take)).expect("a tensor")
}

fn main() {
    // The server's runtime, as `infaas serve` builds it (`INFAAS_BENCH_WORKERS` sets its
    // worker threads; default one per core).
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Ok(n) = std::env::var("INFAAS_BENCH_WORKERS") {
        runtime.worker_threads(n.parse().expect("INFAAS_BENCH_WORKERS: a thread count"));
    }
    runtime
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(run());
}

async fn run() {
    let Some(ort) = ort_library() else {
        return;
    };
    let model = std::env::var("INFAAS_BENCH_MODEL").unwrap_or_else(|_| "digits-mlp-l".into());
    let runs = env_usize("INFAAS_BENCH_RUNS", 5000);
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
    let body = infer_body(&one);
    let url = format!("{}/v1/apps/bench/infer", p_.base);
    let http = http_client();
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
    let reason = first["reason"].as_str().unwrap_or_default().to_string();
    let f = variant_file(&p_, &t, &model, &name).await;
    let threads = f.cfg.intra_threads;

    // (a) latency at batch 1.
    // Back to back, and paced: one run every 0.15 ms or so, the thread idle in between, as
    // a caller that runs each query when it arrives would see it.
    let raw_loop = |pause: Duration| {
        let (bytes, one, cfg) = (f.bytes.clone(), one.clone(), f.cfg.clone());
        async move {
            tokio::task::spawn_blocking(move || {
                let mut s = DirectSession::load(&bytes, &cfg).expect("a session");
                let mut lat = Vec::with_capacity(runs);
                for i in 0..WARMUP + runs {
                    if !pause.is_zero() {
                        std::thread::sleep(pause);
                    }
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
        }
    };
    let raw = raw_loop(Duration::ZERO).await;
    let raw_paced = raw_loop(Duration::from_micros(100)).await;
    // The server's own code, no socket: the router called in this task.
    let router = infaas_api::server::router(p_.server.state.clone());
    let in_process =
        |router: axum::Router, req: fn(&str, &str) -> axum::http::Request<axum::body::Body>| {
            let (token, body) = (t.token.clone(), body.clone());
            async move {
                let (mut lat, mut served) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
                for i in 0..WARMUP + runs {
                    let t0 = Instant::now();
                    let r = tower::ServiceExt::oneshot(router.clone(), req(&token, &body))
                        .await
                        .expect("an answer");
                    assert!(r.status().is_success(), "status {}", r.status());
                    let server_ms = server_measured(r.headers());
                    axum::body::to_bytes(r.into_body(), usize::MAX)
                        .await
                        .expect("a body");
                    if i >= WARMUP {
                        lat.push(ms(t0.elapsed()));
                        served.push(server_ms);
                    }
                }
                lat.sort_by(f64::total_cmp);
                served.sort_by(f64::total_cmp);
                (lat, served)
            }
        };
    let infer_request = |token: &str, body: &str| {
        axum::http::Request::post("/v1/apps/bench/infer")
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from(body.to_string()))
            .expect("a request")
    };
    let (router_infer, router_served) = in_process(router.clone(), infer_request).await;
    // The handler alone: the same route without the middleware stack and nesting.
    let bare = axum::Router::new()
        .route(
            "/v1/apps/{app}/infer",
            axum::routing::post(infaas_api::routes::infer::infer_app),
        )
        .with_state(p_.server.state.clone());
    let (bare_infer, _) = in_process(bare, infer_request).await;
    let (router_healthz, _) = in_process(router, |_, _| {
        axum::http::Request::get("/healthz")
            .body(axum::body::Body::empty())
            .expect("a request")
    })
    .await;
    let mut over_http = Vec::with_capacity(runs);
    let mut server_side = Vec::with_capacity(runs);
    for i in 0..WARMUP + runs {
        let t0 = Instant::now();
        let r = query().send().await.expect("a query");
        let server_ms = server_measured(r.headers());
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
    let mut floor = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t0 = Instant::now();
        let r = http.get(&healthz_url).send().await.expect("healthz");
        r.bytes().await.expect("a body");
        floor.push(ms(t0.elapsed()));
    }
    floor.sort_by(f64::total_cmp);

    // The same two requests from a minimal client: one blocking socket on its own thread,
    // HTTP/1.1 written and parsed by hand (what the server costs without reqwest's and the
    // shared runtime's share of the round trip).
    let addr = p_.server.addr;
    let infer_req = format!(
        "POST /v1/apps/bench/infer HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        t.token,
        body.len()
    );
    let health_req = format!("GET /healthz HTTP/1.1\r\nhost: {addr}\r\n\r\n");
    let metrics_url = format!("{}/metrics", p_.base);
    let before = handler_time(&http, &metrics_url).await;
    let (plain_infer, plain_floor, socket_floor) = tokio::task::spawn_blocking(move || {
        let time = |c: &mut PlainClient, req: &str| {
            let mut lat = Vec::with_capacity(runs);
            for i in 0..WARMUP + runs {
                let t0 = Instant::now();
                let status = c.round_trip(req.as_bytes());
                assert_eq!(status, 200, "plain client status");
                if i >= WARMUP {
                    lat.push(ms(t0.elapsed()));
                }
            }
            lat.sort_by(f64::total_cmp);
            lat
        };
        let mut c = PlainClient::connect(addr);
        let infer = time(&mut c, &infer_req);
        let answer = c.buf.clone();
        let health = time(&mut c, &health_req);
        // The machine's own loopback round trip for the same bytes: a blocking thread that
        // reads the request and writes the server's last answer back, no HTTP, no runtime.
        let canned = canned_server(infer_req.len(), answer);
        let socket = time(&mut PlainClient::connect(canned), &infer_req);
        (infer, health, socket)
    })
    .await
    .expect("the plain client");
    let after = handler_time(&http, &metrics_url).await;
    let plain_handler_us = (after.0 - before.0) / (after.1 - before.1).max(1.0) * 1e6;

    // (b) saturation throughput, on a model whose run time dominates (see
    // `registry_common::heavy`): on the zoo's microsecond models HTTP itself is the bottleneck.
    let (channels, layers) = (
        env_usize("INFAAS_BENCH_CHANNELS", 384),
        env_usize("INFAAS_BENCH_LAYERS", 5),
    );
    let heavy_name = format!("digits-cnn-{channels}x{layers}");
    let sat = if std::env::var("INFAAS_BENCH_ONLY").as_deref() == Ok("latency") {
        None
    } else {
        Some(saturation(&p_, &t, &heavy_name, heavy_cnn(channels, layers), &x).await)
    };
    let raw_p50 = p(&raw, 0.5);
    println!("http_overhead: model {model}, variant {name} ({threads} threads), {runs} runs");
    println!("  chosen because: {reason}");
    println!("\n(a) latency at batch 1            p50 ms    p99 ms");
    println!(
        "raw ONNX Runtime (DirectSession) {raw_p50:>8.4} {:>9.4}",
        p(&raw, 0.99)
    );
    println!(
        "  paced (idle ~0.15 ms between runs) {:>6.4} {:>9.4}",
        p(&raw_paced, 0.5),
        p(&raw_paced, 0.99)
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
        "  in-process router, no socket    {:>8.4} {:>9.4}; /healthz {:.4}; the handler alone {:.4}; server-measured {:.4}",
        p(&router_infer, 0.5),
        p(&router_infer, 0.99),
        p(&router_healthz, 0.5),
        p(&bare_infer, 0.5),
        p(&router_served, 0.5)
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
    println!(
        "plain blocking client: infer {:>8.4} {:>9.4}; /healthz {:.4} {:.4}",
        p(&plain_infer, 0.5),
        p(&plain_infer, 0.99),
        p(&plain_floor, 0.5),
        p(&plain_floor, 0.99)
    );
    println!(
        "added p50 over HTTP, plain client: {:.1} us (target <= 100 us); of which the HTTP floor {:.1} us",
        (p(&plain_infer, 0.5) - raw_p50) * 1e3,
        p(&plain_floor, 0.5) * 1e3
    );
    println!(
        "  the server's handler for those queries (from its route middleware on): mean {plain_handler_us:.1} us"
    );
    println!(
        "loopback TCP round trip of the same bytes (no HTTP): p50 {:.1} us, p99 {:.1} us; \
         added p50 beyond it: {:.1} us",
        p(&socket_floor, 0.5) * 1e3,
        p(&socket_floor, 0.99) * 1e3,
        (p(&plain_infer, 0.5) - raw_p50 - p(&socket_floor, 0.5)) * 1e3
    );
    if let Some(sat) = sat {
        sat.print();
    }
    p_.stop().await;
}

/// Seconds spent in, and count of, `POST /v1/apps/{app}/infer` requests from the server's
/// route middleware on (`infaas_http_request_duration_seconds` on `/metrics`).
async fn handler_time(http: &reqwest::Client, url: &str) -> (f64, f64) {
    let text = http
        .get(url)
        .send()
        .await
        .expect("/metrics")
        .text()
        .await
        .expect("its text");
    let value = |name: &str| {
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains("route=\"/v1/apps/{app}/infer\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    (
        value("infaas_http_request_duration_seconds_sum"),
        value("infaas_http_request_duration_seconds_count"),
    )
}

/// `x-infaas-latency-ms`, the server's own measure of a query (NaN when absent).
fn server_measured(headers: &axum::http::HeaderMap) -> f64 {
    headers
        .get("x-infaas-latency-ms")
        .and_then(|h| h.to_str().ok()?.parse().ok())
        .unwrap_or(f64::NAN)
}

fn env_usize(key: &str, default: usize) -> usize {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The JSON body of a query with one FP32 input.
fn infer_body(input: &Tensor) -> String {
    let TensorData::Fp32(data) = &input.data else {
        panic!("the bench sends FP32 inputs")
    };
    json!({"inputs": [{"name": input.name, "shape": input.shape, "datatype": "FP32", "data": data}]})
        .to_string()
}

/// Keep-alive connections for every client, no Nagle delay.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(CLIENTS)
        .tcp_nodelay(true)
        .build()
        .expect("an HTTP client")
}

/// A variant's file and session settings, as the platform stored them.
struct VariantFile {
    bytes: Vec<u8>,
    cfg: SessionConfig,
    max_batch: usize,
}

async fn variant_file(p_: &Platform, t: &Tenant, model: &str, variant: &str) -> VariantFile {
    let db = p_.db();
    let record = db.get_model(&t.id, model).await.expect("the model");
    let variants = db.list_variants(&record.id).await.expect("variants");
    let v = variants
        .iter()
        .find(|v| v.name == variant)
        .unwrap_or_else(|| panic!("variant {variant} of {model}"));
    let files = db.list_model_files(&record.id).await.expect("files");
    let file = files.iter().find(|f| f.id == v.file_id).expect("its file");
    let bytes = p_
        .server
        .state
        .objects
        .get_bytes(&file.object_key)
        .await
        .expect("the variant's file");
    VariantFile {
        bytes: bytes.to_vec(),
        cfg: SessionConfig {
            intra_threads: v.threads,
            ..SessionConfig::default()
        },
        max_batch: v.max_batch.max(1),
    }
}

/// Rows per second of one raw session running `batch`-row inputs back to back for `WINDOW`.
async fn raw_rate(f: &VariantFile, input: Tensor) -> f64 {
    let (bytes, cfg) = (f.bytes.clone(), f.cfg.clone());
    tokio::task::spawn_blocking(move || {
        let batch = input.shape[0];
        let mut s = DirectSession::load(&bytes, &cfg).expect("a session");
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
    .await
    .expect("the raw loop")
}

/// Answers per variant, and failures per status (0: no answer), since the last look.
type Tally = (BTreeMap<String, u64>, BTreeMap<u16, u64>);

/// What the saturation run measured.
struct Saturation {
    model: String,
    variant: String,
    max_batch: usize,
    threads: usize,
    served: f64,
    raw_wide: f64,
    raw_one: f64,
    seen: BTreeMap<String, u64>,
    errors: BTreeMap<u16, u64>,
    settled_after: Duration,
}

impl Saturation {
    fn print(&self) {
        let Saturation {
            model,
            variant,
            max_batch,
            threads,
            served,
            raw_wide,
            raw_one,
            ..
        } = self;
        println!("\n(b) saturation on {model}, rows/s (variant {variant}, {threads} threads, max batch {max_batch})");
        println!("raw ONNX Runtime, batch {max_batch:<3}      {raw_wide:>10.0}");
        println!("raw ONNX Runtime, batch 1        {raw_one:>10.0}");
        println!("HTTP, {CLIENTS} clients x 1 row        {served:>10.0}");
        println!(
            "ratio HTTP / raw batch {max_batch}: {:.3} (target >= 0.95); HTTP / raw batch 1: {:.3}",
            served / raw_wide,
            served / raw_one
        );
        println!(
            "variants that answered in the window: {:?}; errors: {:?}; load settled after {:.1} s",
            self.seen,
            self.errors,
            self.settled_after.as_secs_f64()
        );
    }
}

/// `CLIENTS` closed-loop clients sending 1-row queries to an application holding only
/// `model`; once the variant serving them has settled, one `WINDOW` is measured, then raw
/// ONNX Runtime runs the variant that served the window on the same file and settings.
async fn saturation(
    p_: &Platform,
    t: &Tenant,
    model: &str,
    onnx: Vec<u8>,
    x: &Tensor,
) -> Saturation {
    let app = "saturation";
    let reg = Registration::default()
        .text("name", model)
        .text("app", app)
        .file("model", onnx, &format!("{model}.onnx"))
        .file("validation", zoo_bytes("digits-val.npz"), "digits-val.npz");
    p_.register_ok(t, &reg).await;
    p_.wait_ready(t, model, Duration::from_secs(1800)).await;
    let body = infer_body(&named_rows(x, 1, "pixels"));
    let url = format!("{}/v1/apps/{app}/infer", p_.base);
    let http = http_client();
    let stop = Arc::new(AtomicBool::new(false));
    let counts: Arc<Mutex<Tally>> = Arc::default();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (stop, counts) = (stop.clone(), counts.clone());
        let req = http
            .post(&url)
            .bearer_auth(&t.token)
            .header("content-type", "application/json")
            .body(body.clone());
        tasks.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let Some(r) = req.try_clone() else { break };
                let outcome = match r.send().await {
                    Ok(resp) if resp.status().is_success() => {
                        let v = resp
                            .headers()
                            .get("x-infaas-variant")
                            .and_then(|h| h.to_str().ok())
                            .unwrap_or("?")
                            .to_string();
                        resp.bytes().await.map(|_| v).map_err(|_| 0)
                    }
                    Ok(resp) => Err(resp.status().as_u16()),
                    Err(_) => Err(0),
                };
                let mut c = counts.lock().expect("counts");
                match outcome {
                    Ok(v) => *c.0.entry(v).or_default() += 1,
                    Err(code) => *c.1.entry(code).or_default() += 1,
                }
            }
        }));
    }
    let take = || std::mem::take(&mut *counts.lock().expect("counts"));
    // Settle: until one variant answers (nearly) everything for two seconds running.
    let started = Instant::now();
    let mut last: Option<String> = None;
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (seen, _) = take();
        let total: u64 = seen.values().sum();
        let top = seen
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(v, n)| (v.clone(), *n));
        let settled = top
            .as_ref()
            .is_some_and(|(v, n)| *n as f64 >= 0.95 * total as f64 && last.as_ref() == Some(v));
        if settled || started.elapsed() > Duration::from_secs(60) {
            break;
        }
        last = top.map(|(v, _)| v);
    }
    let settled_after = started.elapsed();
    take();
    let t0 = Instant::now();
    tokio::time::sleep(WINDOW).await;
    let (seen, errors) = take();
    let elapsed = t0.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("a client");
    }
    let served = seen.values().sum::<u64>() as f64 / elapsed;
    let variant = seen
        .iter()
        .max_by_key(|(_, n)| **n)
        .map(|(v, _)| v.clone())
        .expect("queries answered in the window");
    let f = variant_file(p_, t, model, &variant).await;
    let raw_wide = raw_rate(&f, named_rows(x, f.max_batch, "pixels")).await;
    let raw_one = raw_rate(&f, named_rows(x, 1, "pixels")).await;
    Saturation {
        model: model.to_string(),
        variant,
        max_batch: f.max_batch,
        threads: f.cfg.intra_threads,
        served,
        raw_wide,
        raw_one,
        seen,
        errors,
        settled_after,
    }
}

/// A thread answering every `request_len` bytes it reads with `answer`, on one connection.
fn canned_server(request_len: usize, answer: Vec<u8>) -> std::net::SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    std::thread::spawn(move || {
        let Ok((mut s, _)) = listener.accept() else {
            return;
        };
        let _ = s.set_nodelay(true);
        let mut chunk = [0u8; 8192];
        let mut got = 0;
        while let Ok(n) = s.read(&mut chunk) {
            if n == 0 {
                return;
            }
            got += n;
            while got >= request_len {
                got -= request_len;
                if s.write_all(&answer).is_err() {
                    return;
                }
            }
        }
    });
    addr
}

/// One keep-alive HTTP/1.1 connection on a blocking socket; answers must carry a
/// `content-length` (the server's JSON and health answers do).
struct PlainClient {
    stream: std::net::TcpStream,
    buf: Vec<u8>,
}

impl PlainClient {
    fn connect(addr: std::net::SocketAddr) -> PlainClient {
        let stream = std::net::TcpStream::connect(addr).expect("a connection");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        PlainClient {
            stream,
            buf: Vec::with_capacity(1 << 16),
        }
    }

    /// Sends `req` and reads the whole answer; returns its status code.
    fn round_trip(&mut self, req: &[u8]) -> u16 {
        use std::io::{Read, Write};
        self.stream.write_all(req).expect("a write");
        self.buf.clear();
        let mut chunk = [0u8; 8192];
        let (head_end, length) = loop {
            let n = self.stream.read(&mut chunk).expect("a read");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
            if let Some(at) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.buf[..at]).to_ascii_lowercase();
                let length: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .expect("a content-length");
                break (at + 4, length);
            }
        };
        while self.buf.len() < head_end + length {
            let n = self.stream.read(&mut chunk).expect("a read");
            assert!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
        self.buf
            .get(9..12)
            .and_then(|s| std::str::from_utf8(s).ok()?.parse().ok())
            .expect("a status line")
    }
}
