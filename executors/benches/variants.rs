//! INT8 against FP32 on the zoo models with MatMul weights: latency (p50/p99 at batch 1 and
//! 32, one intra-op thread, all graph optimisations), file size and validation accuracy.
//! FP32 and INT8 runs alternate (the order flips every iteration) so that machine noise
//! hits both alike. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache);
//! no server.
//!
//! The process pins itself to one CPU (Linux) before loading the engines: a timed run is one
//! `Engine::run_blocking` call, a hop to the engine's thread, and waking a thread on another
//! CPU costs tens of microseconds in a VM (more than these models compute) and sticks to
//! whichever engine the scheduler happened to place there.
//!
//! Run: `cargo bench -p infaas-executors --bench variants`

use std::path::{Path, PathBuf};
use std::time::Instant;

use infaas_core::{FileKind, Tensor};
use infaas_executors::accuracy::{accuracy, AccuracyOptions};
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_executors::variants::{build_file, Built};

const MODELS: [&str; 3] = ["digits-mlp-m", "digits-mlp-l", "digits-mlp-scores"];
const BATCHES: [usize; 2] = [1, 32];
const WARMUP: usize = 300;
const RUNS: usize = 3000;

fn zoo(file: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../zoo")
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

/// Latency (ms) of one `run_blocking` call, the inputs cloned outside the timed region.
fn timed(engine: &Engine, inputs: &[Tensor]) -> f64 {
    let inputs = inputs.to_vec();
    let start = Instant::now();
    engine.run_blocking(inputs).expect("a run");
    start.elapsed().as_secs_f64() * 1e3
}

struct Pair {
    fp32: (f64, f64),
    int8: (f64, f64),
}

/// p50/p99 of both engines at `batch`, runs interleaved.
fn measure(fp32: &Engine, int8: &Engine, set: &ValidationSet, batch: usize) -> Pair {
    let inputs = set.rows_cyclic(0, batch);
    for _ in 0..WARMUP {
        timed(fp32, &inputs);
        timed(int8, &inputs);
    }
    let (mut f, mut q) = (Vec::with_capacity(RUNS), Vec::with_capacity(RUNS));
    for i in 0..RUNS {
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

fn main() {
    let Some(lib) = library() else {
        return;
    };
    let pinned = pin_to_one_cpu();
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization: OptLevel::All,
        hardware: Hardware::Cpu,
        optimized_model_out: None,
        simulated: None,
    };
    let arrays = infaas_protocol::npz::read_npz(&zoo("digits-val.npz")).expect("digits-val.npz");
    let workdir = tempfile::tempdir().expect("a temporary directory");
    println!(
        "variants bench: ONNX Runtime {}, 1 intra-op thread, {WARMUP} warm-up + {RUNS} timed runs per engine and batch, interleaved, {}\n",
        lib.display(),
        match pinned {
            Some(cpu) => format!("pinned to CPU {cpu}"),
            None => "not pinned to a CPU".to_string(),
        }
    );
    println!(
        "{:<18} {:>5} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}",
        "model", "batch", "fp32 p50", "fp32 p99", "int8 p50", "int8 p99", "p50 x", "p99 x"
    );
    let mut summary = Vec::new();
    for model in MODELS {
        let source = zoo(&format!("{model}.onnx"));
        let int8 = match build_file(FileKind::Int8, &source, workdir.path()) {
            Ok(Built::File(bytes)) => bytes,
            Ok(Built::NotApplicable(why)) => panic!("{model}: no INT8 file: {why}"),
            Err(e) => panic!("{model}: building the INT8 file: {e}"),
        };
        let fp32_engine = Engine::load(source.clone(), &cfg).expect("the FP32 model loads");
        let int8_engine = Engine::load(int8.clone(), &cfg).expect("the INT8 model loads");
        let set = match_validation(fp32_engine.signature(), arrays.clone()).expect("a fit");
        let opts = AccuracyOptions::default();
        let acc = |e: &Engine| accuracy(e, &set, &opts).expect("an accuracy").accuracy;
        let (acc_fp32, acc_int8) = (acc(&fp32_engine), acc(&int8_engine));
        for batch in BATCHES {
            let m = measure(&fp32_engine, &int8_engine, &set, batch);
            println!(
                "{:<18} {:>5} {:>10.4} {:>10.4} {:>10.4} {:>10.4} {:>9.2} {:>9.2}",
                model,
                batch,
                m.fp32.0,
                m.fp32.1,
                m.int8.0,
                m.int8.1,
                m.int8.0 / m.fp32.0,
                m.int8.1 / m.fp32.1
            );
        }
        summary.push((model, source.len(), int8.len(), acc_fp32, acc_int8));
    }
    println!("\nlatency in ms; 'x' columns are INT8 / FP32\n");
    println!(
        "{:<18} {:>12} {:>12} {:>7} {:>9} {:>9}",
        "model", "fp32 bytes", "int8 bytes", "size x", "fp32 acc", "int8 acc"
    );
    for (model, fp32_len, int8_len, acc_fp32, acc_int8) in summary {
        println!(
            "{:<18} {:>12} {:>12} {:>7.3} {:>9.4} {:>9.4}",
            model,
            fp32_len,
            int8_len,
            int8_len as f64 / fp32_len as f64,
            acc_fp32,
            acc_int8
        );
    }
}
