//! What the dynamic batcher costs, on zoo/digits-mlp-l.onnx with one intra-op thread:
//!
//! (a) latency at batch 1: `Engine::run` directly against `Instance::infer` (one request at a
//!     time, so the batcher never batches: this is its pure overhead per request);
//! (b) saturation throughput: 64 closed-loop clients sending 1-row requests through an
//!     `Instance` with `max_batch` 32, against raw ONNX Runtime running 32-row batches back
//!     to back (`run_blocking`), as a ratio (target >= 0.95).
//!
//! Rounds alternate between the two sides of each comparison so that machine noise hits both
//! alike; the table shows medians over the rounds. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the
//! `scripts/setup.sh` cache); no server.
//!
//! Run: `cargo bench -p infaas-executors --bench overhead`

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infaas_core::stats::{median_of, percentile};
use infaas_core::Tensor;
use infaas_executors::batcher::{BatcherConfig, Instance, InstanceFigures};
use infaas_executors::engine::{Engine, SessionConfig};

const MODEL: &str = "digits-mlp-l.onnx";
const ROUNDS: usize = 5;
/// Requests per latency round (after `WARMUP`).
const LATENCY_RUNS: usize = 2000;
const WARMUP: usize = 200;
const CLIENTS: usize = 64;
const MAX_BATCH: usize = 32;
/// Length of one throughput round.
const WINDOW: Duration = Duration::from_secs(2);

fn main() {
    let zoo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo");
    let model = std::fs::read(zoo.join(MODEL)).expect("reading the model");
    let set = infaas_protocol::npz::read_npz(
        &std::fs::read(zoo.join("digits-val.npz")).expect("reading digits-val.npz"),
    )
    .expect("parsing digits-val.npz");
    let x = set
        .into_iter()
        .find(|t| t.name == "x")
        .expect("x in the set");
    let x = Tensor {
        name: "input".into(),
        ..x
    };
    let engine = match Engine::load(model, &SessionConfig::default()) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("SKIPPED (no ONNX Runtime?): {e}");
            return;
        }
    };
    // One tokio worker: on a small machine the session thread keeps a core to itself.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a tokio runtime");

    println!(
        "model {MODEL}, 1 intra-op thread, {} CPUs, {ROUNDS} rounds (medians)\n",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let latency = rt.block_on(latency(&engine, &x));
    let throughput = throughput(&rt, &engine, &x);
    print_table(&latency, &throughput);
}

struct Latency {
    engine: (f64, f64),
    instance: (f64, f64),
}

/// p50 and p99 (µs) of one request at a time, engine and instance alternating by round.
async fn latency(engine: &Engine, x: &Tensor) -> Latency {
    let instance = Instance::start(engine.clone(), config());
    let request = vec![x.slice_batch(0, 1)];
    let mut direct = Vec::new();
    let mut batched = Vec::new();
    for round in 0..ROUNDS {
        for side in [round % 2, 1 - round % 2] {
            let mut samples = Vec::with_capacity(LATENCY_RUNS);
            for i in 0..WARMUP + LATENCY_RUNS {
                let inputs = request.clone();
                let start = Instant::now();
                if side == 0 {
                    engine.run(inputs).await.expect("engine run");
                } else {
                    instance.infer(inputs).await.expect("instance run");
                }
                if i >= WARMUP {
                    samples.push(start.elapsed().as_secs_f64() * 1e6);
                }
            }
            samples.sort_by(f64::total_cmp);
            let p = (percentile(&samples, 0.5), percentile(&samples, 0.99));
            if side == 0 {
                direct.push(p);
            } else {
                batched.push(p);
            }
        }
    }
    instance.shutdown();
    instance.stopped().await;
    Latency {
        engine: medians(&direct),
        instance: medians(&batched),
    }
}

struct Throughput {
    raw: f64,
    instance: f64,
    figures: InstanceFigures,
}

/// Rows per second: raw 32-row batches back to back against 64 clients through an instance.
fn throughput(rt: &tokio::runtime::Runtime, engine: &Engine, x: &Tensor) -> Throughput {
    let batch = vec![x.slice_batch(0, MAX_BATCH)];
    // Warm both paths up once.
    raw_rows_per_s(engine, &batch, Duration::from_millis(500));
    rt.block_on(instance_rows_per_s(engine, x, Duration::from_millis(500)));
    let mut raw = Vec::new();
    let mut through = Vec::new();
    let mut figures = InstanceFigures::default();
    for round in 0..ROUNDS {
        for side in [round % 2, 1 - round % 2] {
            if side == 0 {
                raw.push(raw_rows_per_s(engine, &batch, WINDOW));
            } else {
                let (rate, f) = rt.block_on(instance_rows_per_s(engine, x, WINDOW));
                through.push(rate);
                figures = f;
            }
        }
    }
    Throughput {
        raw: median(&mut raw),
        instance: median(&mut through),
        figures,
    }
}

fn raw_rows_per_s(engine: &Engine, batch: &[Tensor], window: Duration) -> f64 {
    let start = Instant::now();
    let mut rows = 0;
    while start.elapsed() < window {
        engine.run_blocking(batch.to_vec()).expect("raw run");
        rows += MAX_BATCH;
    }
    rows as f64 / start.elapsed().as_secs_f64()
}

/// Closed loop: every client sends its next request as soon as the previous one is answered.
async fn instance_rows_per_s(
    engine: &Engine,
    x: &Tensor,
    window: Duration,
) -> (f64, InstanceFigures) {
    let instance = Instance::start(engine.clone(), config());
    let stop = Arc::new(AtomicBool::new(false));
    let start = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let instance = instance.clone();
            let stop = stop.clone();
            let request = vec![x.slice_batch(c, c + 1)];
            tokio::spawn(async move {
                let mut rows = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    instance.infer(request.clone()).await.expect("instance run");
                    rows += 1;
                }
                rows
            })
        })
        .collect();
    tokio::time::sleep(window).await;
    stop.store(true, Ordering::Relaxed);
    let mut rows = 0;
    for client in clients {
        rows += client.await.expect("client task");
    }
    let elapsed = start.elapsed().as_secs_f64();
    let figures = instance.figures();
    instance.shutdown();
    instance.stopped().await;
    (rows as f64 / elapsed, figures)
}

fn config() -> BatcherConfig {
    BatcherConfig {
        max_batch: MAX_BATCH,
        max_queue_delay: Duration::from_millis(1),
        queue_capacity: 4096,
        // What the worker configures by default (`inline_max_us`).
        inline_below: Duration::from_micros(200),
        gather_rows: true,
    }
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    median_of(values).unwrap_or_default()
}

fn medians(pairs: &[(f64, f64)]) -> (f64, f64) {
    let mut a: Vec<f64> = pairs.iter().map(|p| p.0).collect();
    let mut b: Vec<f64> = pairs.iter().map(|p| p.1).collect();
    (median(&mut a), median(&mut b))
}

fn print_table(latency: &Latency, throughput: &Throughput) {
    let f = &throughput.figures;
    let runs: u64 = f.batch_histogram.iter().map(|&(_, n)| n).sum();
    let rows: u64 = f
        .batch_histogram
        .iter()
        .map(|&(size, n)| size as u64 * n)
        .sum();
    let mean_batch = rows as f64 / runs.max(1) as f64;
    // What the session alone could do: full batches back to back, no gaps at all.
    let ceiling = MAX_BATCH as f64 / (f.exec_p50_ms / 1e3);

    println!("(a) latency, batch 1, one request at a time");
    println!("| path             | p50 (µs) | p99 (µs) |");
    println!("|------------------|---------:|---------:|");
    let (e, i) = (latency.engine, latency.instance);
    for (name, (p50, p99)) in [
        ("Engine::run", e),
        ("Instance::infer", i),
        ("added by batcher", (i.0 - e.0, i.1 - e.1)),
    ] {
        println!("| {name:<16} | {p50:8.1} | {p99:8.1} |");
    }
    println!();
    println!(
        "(b) saturation throughput ({CLIENTS} closed-loop clients x 1 row, max_batch {MAX_BATCH})"
    );
    println!("| path                                   |    rows/s |");
    println!("|----------------------------------------|----------:|");
    let rows = [
        (
            format!("raw ORT, run_blocking, {MAX_BATCH}-row batches"),
            format!("{:9.0}", throughput.raw),
        ),
        (
            format!("Instance, {CLIENTS} clients x 1 row"),
            format!("{:9.0}", throughput.instance),
        ),
        (
            "ratio Instance / raw (target >= 0.95)".to_string(),
            format!("{:9.3}", throughput.instance / throughput.raw),
        ),
        (
            format!("session ceiling ({MAX_BATCH} rows / exec p50)"),
            format!("{ceiling:9.0}"),
        ),
        (
            "ratio Instance / ceiling".to_string(),
            format!("{:9.3}", throughput.instance / ceiling),
        ),
    ];
    for (name, value) in rows {
        println!("| {name:<38} | {value} |");
    }
    println!();
    println!(
        "last Instance round: mean batch {mean_batch:.1} rows, exec p50 {:.3} ms / p99 {:.3} ms, \
         latency p50 {:.3} ms / p99 {:.3} ms",
        f.exec_p50_ms, f.exec_p99_ms, f.latency_p50_ms, f.latency_p99_ms
    );
}
