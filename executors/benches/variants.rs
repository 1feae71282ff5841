//! INT8 against FP32 on the zoo: latency (p50/p99 at batch 1 and 8, one intra-op thread,
//! all graph optimisations), file size, validation accuracy and the INT8 build time.
//!
//! Both files are the platform's own, built by `variants::build_file` as at registration:
//! FP32 is the graph-optimised file (`FileKind::Optimized`), INT8 the file
//! `variants::build_int8` makes (static QDQ calibrated on the validation set for models
//! with convolutions, dynamic MatMul quantisation otherwise; the scheme is printed). FP32
//! and INT8 runs alternate (the order flips every iteration) so that machine noise hits
//! both alike; each (model, batch) gets about `INFAAS_BENCH_SECONDS` (default 8) of timed
//! runs, at least 100 and at most 3000 per engine. Needs ONNX Runtime (`ORT_DYLIB_PATH` or
//! the `scripts/setup.sh` cache); no server.
//!
//! The process pins itself to one CPU (Linux) before loading the engines: a timed run is one
//! `Engine::run_blocking` call, a hop to the engine's thread, and waking a thread on another
//! CPU costs tens of microseconds in a VM (more than these models compute) and sticks to
//! whichever engine the scheduler happened to place there.
//!
//! Run: `cargo bench -p infaas-executors --bench variants`
//! (`INFAAS_BENCH_MODELS=cifar-resnet,text-encoder` for a subset).

use std::path::{Path, PathBuf};
use std::time::Instant;

use infaas_core::stats::percentile;
use infaas_core::{FileKind, Tensor};
use infaas_executors::accuracy::{accuracy, AccuracyOptions};
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_executors::variants::{build_file, build_int8, Built, Int8Build};

/// (model, validation set) of the zoo.
const MODELS: [(&str, &str); 5] = [
    ("cifar-resnet", "cifar-val"),
    ("text-encoder", "text-val"),
    ("digits-mlp-m", "digits-val"),
    ("digits-mlp-l", "digits-val"),
    ("digits-mlp-scores", "digits-val"),
];
const BATCHES: [usize; 2] = [1, 8];
const MIN_RUNS: usize = 100;
const MAX_RUNS: usize = 3000;

fn zoo(file: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../zoo")
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Latency (ms) of one `run_blocking` call, the inputs cloned outside the timed region.
fn timed(engine: &Engine, inputs: &[Tensor]) -> f64 {
    let inputs = inputs.to_vec();
    let start = Instant::now();
    engine.run_blocking(inputs).expect("a run");
    start.elapsed().as_secs_f64() * 1e3
}

struct Pair {
    runs: usize,
    fp32: (f64, f64),
    int8: (f64, f64),
}

/// p50/p99 of both engines at `batch`, runs interleaved, about `seconds` of runs.
fn measure(fp32: &Engine, int8: &Engine, set: &ValidationSet, batch: usize, seconds: f64) -> Pair {
    let inputs = set.rows_cyclic(0, batch);
    // Warm-up, which also sizes the timed part.
    let started = Instant::now();
    let mut warm = 0;
    while warm < 20 || (started.elapsed().as_secs_f64() < seconds / 10.0 && warm < 300) {
        timed(fp32, &inputs);
        timed(int8, &inputs);
        warm += 1;
    }
    let per_iter = started.elapsed().as_secs_f64() / warm as f64;
    let runs = ((seconds / per_iter) as usize).clamp(MIN_RUNS, MAX_RUNS);
    let (mut f, mut q) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
    for i in 0..runs {
        if i % 2 == 0 {
            f.push(timed(fp32, &inputs));
            q.push(timed(int8, &inputs));
        } else {
            q.push(timed(int8, &inputs));
            f.push(timed(fp32, &inputs));
        }
    }
    f.sort_by(f64::total_cmp);
    q.sort_by(f64::total_cmp);
    Pair {
        runs,
        fp32: (percentile(&f, 0.5), percentile(&f, 0.99)),
        int8: (percentile(&q, 0.5), percentile(&q, 0.99)),
    }
}

fn library() -> Option<PathBuf> {
    match infaas_executors::runtime::init_runtime(None) {
        Ok(path) => Some(path),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("the variants bench needs ONNX Runtime when CI=true: {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED the variants bench: {e}");
            None
        }
    }
}

/// Pins the calling thread (and the engine threads it spawns later) to its current CPU.
#[cfg(target_os = "linux")]
fn pin_to_one_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions; the cpu_set_t is zeroed and then filled by
    // CPU_SET within its bounds before sched_setaffinity reads it.
    unsafe {
        let cpu = usize::try_from(libc::sched_getcpu()).ok()?;
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        (libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0)
            .then_some(cpu)
    }
}

#[cfg(not(target_os = "linux"))]
fn pin_to_one_cpu() -> Option<usize> {
    None
}

struct Summary {
    model: &'static str,
    scheme: String,
    fp32_len: usize,
    int8_len: usize,
    acc_fp32: f64,
    acc_int8: f64,
    build_s: f64,
}

fn main() {
    let Some(lib) = library() else {
        return;
    };
    let only: Option<Vec<String>> = std::env::var("INFAAS_BENCH_MODELS")
        .ok()
        .map(|v| v.split(',').map(|s| s.trim().to_string()).collect());
    let seconds: f64 = std::env::var("INFAAS_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8.0);
    let pinned = pin_to_one_cpu();
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization: OptLevel::All,
        hardware: Hardware::Cpu,
        optimized_model_out: None,
        simulated: None,
    };
    let workdir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "variants bench: ONNX Runtime {}, 1 intra-op thread, about {seconds} s of timed runs per model and batch ({MIN_RUNS}..{MAX_RUNS} per engine), interleaved, {}\n",
        lib.display(),
        match pinned {
            Some(cpu) => format!("pinned to CPU {cpu}"),
            None => "not pinned to a CPU".to_string(),
        }
    );
    println!(
        "{:<18} {:>7} {:>5} {:>5} {:>10} {:>10} {:>10} {:>10} {:>7} {:>7} {:>8}",
        "model",
        "int8",
        "batch",
        "runs",
        "fp32 p50",
        "fp32 p99",
        "int8 p50",
        "int8 p99",
        "p50 x",
        "p99 x",
        "speed-up"
    );
    let mut summary = Vec::new();
    for (model, val) in MODELS {
        if only.as_ref().is_some_and(|o| !o.iter().any(|m| m == model)) {
            continue;
        }
        let source = zoo(&format!("{model}.onnx"));
        let arrays =
            infaas_protocol::npz::read_npz(&zoo(&format!("{val}.npz"))).expect("a validation set");
        let source_engine = Engine::load(source.clone(), &cfg).expect("the source model loads");
        let set = match_validation(source_engine.signature(), arrays).expect("a fit");
        drop(source_engine);
        let fp32 = match build_file(FileKind::Optimized, &source, workdir.path(), Some(&set)) {
            Ok(Built::File(bytes)) => bytes,
            Ok(Built::NotApplicable(why)) => panic!("{model}: no optimised file: {why}"),
            Err(e) => panic!("{model}: building the optimised file: {e}"),
        };
        let started = Instant::now();
        let (int8, scheme) = match build_int8(&source, Some(&set)) {
            Ok(Int8Build::Static { bytes, .. }) => (bytes, "static"),
            Ok(Int8Build::Dynamic { bytes, .. }) => (bytes, "dynamic"),
            Ok(Int8Build::NotApplicable(why)) => panic!("{model}: no INT8 file: {why}"),
            Err(e) => panic!("{model}: building the INT8 file: {e}"),
        };
        let build_s = started.elapsed().as_secs_f64();
        let fp32_engine = Engine::load(fp32.clone(), &cfg).expect("the FP32 file loads");
        let int8_engine = Engine::load(int8.clone(), &cfg).expect("the INT8 file loads");
        let opts = AccuracyOptions::default();
        let acc = |e: &Engine| accuracy(e, &set, &opts).expect("an accuracy").accuracy;
        let (acc_fp32, acc_int8) = (acc(&fp32_engine), acc(&int8_engine));
        for batch in BATCHES {
            let m = measure(&fp32_engine, &int8_engine, &set, batch, seconds);
            println!(
                "{:<18} {:>7} {:>5} {:>5} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>7.3} {:>7.3} {:>7.2}x",
                model,
                scheme,
                batch,
                m.runs,
                m.fp32.0,
                m.fp32.1,
                m.int8.0,
                m.int8.1,
                m.int8.0 / m.fp32.0,
                m.int8.1 / m.fp32.1,
                m.fp32.0 / m.int8.0
            );
        }
        summary.push(Summary {
            model,
            scheme: scheme.to_string(),
            fp32_len: fp32.len(),
            int8_len: int8.len(),
            acc_fp32,
            acc_int8,
            build_s,
        });
    }
    println!("\nlatency in ms; 'x' columns are INT8 / FP32 (graph-optimised file), speed-up FP32 / INT8 at p50\n");
    println!(
        "{:<18} {:>7} {:>12} {:>12} {:>7} {:>9} {:>9} {:>9}",
        "model", "int8", "fp32 bytes", "int8 bytes", "size x", "fp32 acc", "int8 acc", "build s"
    );
    for s in summary {
        println!(
            "{:<18} {:>7} {:>12} {:>12} {:>7.3} {:>9.4} {:>9.4} {:>9.2}",
            s.model,
            s.scheme,
            s.fp32_len,
            s.int8_len,
            s.int8_len as f64 / s.fp32_len as f64,
            s.acc_fp32,
            s.acc_int8,
            s.build_s
        );
    }
}
