//! INT8 files answer the same on every x86 CPU. Run by `scripts/test-avx2.sh`, in two steps:
//!
//! 1. `prepare`, on this machine: builds the platform's INT8 files of the zoo's CNN (static
//!    QDQ) and text encoder (dynamic), and for contrast the same with full 8-bit weights;
//!    runs the first rows of each model's validation set through every file and writes
//!    the files and their outputs to `$INFAAS_AVX2_DIR`.
//! 2. `check`, under `qemu-x86_64 -cpu EPYC-Rome` (AVX2, no VNNI): runs the same files on
//!    the same rows. ONNX Runtime picks its kernels by CPUID, so there it takes the AVX2
//!    u8 x s8 path, whose int16 pair sums saturate with full 8-bit weights. The
//!    platform's files (7-bit weights) must give the same answers as on the machine that
//!    built them; with `INFAAS_AVX2_EXPECT_SATURATION=1` the 8-bit CNN file must not
//!    (proof that the emulated CPU really takes the saturating path).
//!
//! Both are `#[ignore]`d: they need the directory, and `check` proves something only on
//! another CPU model than `prepare`'s.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::PathBuf;

use infaas_core::TensorData;
use infaas_executors::calibration::{calibrate, CalibrationOptions};
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_executors::variants::{build_int8, int8_options, Int8Build};
use infaas_onnx::{
    plan_static_int8, quantize_dynamic_int8, quantize_static_int8, OnnxModel, QuantizeOptions,
    StaticQuantizeOptions,
};
use serde::{Deserialize, Serialize};

/// (model, validation set, rows run). Emulation is slow (about 0.25 s a row for the CNN).
const MODELS: [(&str, &str, usize); 2] = [
    ("cifar-resnet", "cifar-val", 32),
    ("text-encoder", "text-val", 64),
];
/// Rows per run, the same on both sides (dynamic quantisation scales each run's input).
const BATCH: usize = 8;

#[derive(Serialize, Deserialize)]
struct Outputs {
    model: String,
    file: String,
    /// The platform's file (7-bit weights), not the 8-bit contrast.
    platform: bool,
    rows: usize,
    classes: usize,
    logits: Vec<f32>,
    labels: Vec<i64>,
}

fn dir() -> PathBuf {
    PathBuf::from(
        std::env::var("INFAAS_AVX2_DIR")
            .expect("INFAAS_AVX2_DIR: run through scripts/test-avx2.sh"),
    )
}

fn zoo_set(model: &str, val: &str) -> (Vec<u8>, ValidationSet) {
    let source = common::read(&common::zoo().join(format!("{model}.onnx")));
    let arrays = common::npz(&common::zoo().join(format!("{val}.npz")));
    let engine = Engine::load(source.clone(), &SessionConfig::default()).expect("it loads");
    let set = match_validation(engine.signature(), arrays).expect("the set fits");
    (source, set)
}

/// Logits of the first `rows` rows, `BATCH` at a time, one thread, all optimisations (as
/// the platform serves).
fn run(bytes: &[u8], set: &ValidationSet, rows: usize) -> (Vec<f32>, usize) {
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization: OptLevel::All,
        hardware: Hardware::Cpu,
        optimized_model_out: None,
        simulated: None,
    };
    let engine = Engine::load(bytes.to_vec(), &cfg).expect("the INT8 file loads");
    let mut logits = Vec::new();
    let mut classes = 0;
    for start in (0..rows).step_by(BATCH) {
        let out = engine
            .run_blocking(set.rows_cyclic(start, BATCH))
            .expect("a run");
        let t = &out[0];
        classes = t.shape.last().copied().unwrap_or(1);
        let TensorData::Fp32(v) = &t.data else {
            panic!("float logits")
        };
        logits.extend_from_slice(v);
    }
    (logits, classes)
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv {
                (i, v)
            } else {
                (bi, bv)
            }
        })
        .0
}

#[test]
#[ignore = "run by scripts/test-avx2.sh"]
fn prepare() {
    assert!(common::runtime_ready());
    let dir = dir();
    std::fs::create_dir_all(&dir).unwrap();
    let (static_opts, dynamic_opts) = int8_options();
    let full_static = StaticQuantizeOptions {
        reduce_range: false,
        ..static_opts
    };
    let full_dynamic = QuantizeOptions {
        reduce_range: false,
        ..dynamic_opts
    };
    for (model, val, rows) in MODELS {
        let (source, set) = zoo_set(model, val);
        let platform = match build_int8(&source, Some(&set)).unwrap() {
            Int8Build::Static { bytes, .. } | Int8Build::Dynamic { bytes, .. } => bytes,
            Int8Build::NotApplicable(why) => panic!("{model}: {why}"),
        };
        let m = OnnxModel::parse(&source).unwrap();
        let plan = plan_static_int8(&m, &full_static).unwrap();
        let full = if plan.nodes.contains_key("Conv") {
            let ranges =
                calibrate(&m, &plan.tensors, &set, &CalibrationOptions::default()).unwrap();
            let (q, _) = quantize_static_int8(&m, &ranges, &full_static).unwrap();
            quantize_dynamic_int8(&q, &full_dynamic).unwrap().0
        } else {
            quantize_dynamic_int8(&m, &full_dynamic).unwrap().0
        };
        for (file, bytes, is_platform) in [
            (format!("{model}.int8"), platform, true),
            (format!("{model}.int8-full-range"), full.to_bytes(), false),
        ] {
            let (logits, classes) = run(&bytes, &set, rows);
            std::fs::write(dir.join(format!("{file}.onnx")), &bytes).unwrap();
            let out = Outputs {
                model: model.to_string(),
                file: file.clone(),
                platform: is_platform,
                rows,
                classes,
                logits,
                labels: set.labels[..rows].to_vec(),
            };
            std::fs::write(
                dir.join(format!("{file}.json")),
                serde_json::to_vec(&out).unwrap(),
            )
            .unwrap();
            println!("prepared {file} ({} bytes, {rows} rows)", bytes.len());
        }
    }
}

#[test]
#[ignore = "run by scripts/test-avx2.sh"]
fn check() {
    assert!(common::runtime_ready());
    let dir = dir();
    let expect_saturation = std::env::var("INFAAS_AVX2_EXPECT_SATURATION").as_deref() == Ok("1");
    println!(
        "{:<32} {:>5} {:>14} {:>14} {:>11} {:>11}",
        "file", "rows", "max |diff|", "logit range", "same top-1", "agreement"
    );
    let mut failures = Vec::new();
    let mut saturated = false;
    let mut files = 0;
    for (model, val, _) in MODELS {
        let (_, set) = zoo_set(model, val);
        for suffix in ["int8", "int8-full-range"] {
            let file = format!("{model}.{suffix}");
            let native: Outputs =
                serde_json::from_slice(&std::fs::read(dir.join(format!("{file}.json"))).unwrap())
                    .unwrap();
            let bytes = std::fs::read(dir.join(format!("{file}.onnx"))).unwrap();
            let (logits, classes) = run(&bytes, &set, native.rows);
            assert_eq!(classes, native.classes);
            assert_eq!(logits.len(), native.logits.len());
            files += 1;
            let max_diff = logits
                .iter()
                .zip(&native.logits)
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            let (lo, hi) = native
                .logits
                .iter()
                .fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| {
                    (l.min(v), h.max(v))
                });
            let rows = native.rows;
            let here: Vec<usize> = logits.chunks(classes).map(argmax).collect();
            let there: Vec<usize> = native.logits.chunks(classes).map(argmax).collect();
            let same = here.iter().zip(&there).filter(|(a, b)| a == b).count();
            let agree = here
                .iter()
                .zip(&native.labels)
                .filter(|(&p, &y)| p as i64 == y)
                .count();
            println!(
                "{:<32} {:>5} {:>14.6} {:>14.3} {:>7}/{:<3} {:>7}/{:<3}",
                file,
                rows,
                max_diff,
                hi - lo,
                same,
                rows,
                agree,
                rows
            );
            if native.platform {
                // Exact integer sums on both paths: the same top-1 on every row, logits
                // equal up to float differences of the layers around the integer kernels
                // (dynamic quantisation turns those into at most a step of its input grid).
                if same != rows {
                    failures.push(format!("{file}: top-1 differs on {} rows", rows - same));
                }
                if max_diff > 0.02 * (hi - lo) {
                    failures.push(format!(
                        "{file}: logits differ by {max_diff} (range {})",
                        hi - lo
                    ));
                }
            } else if native.model == "cifar-resnet" && max_diff > 0.05 * (hi - lo) {
                saturated = true;
            }
        }
    }
    assert_eq!(files, 4);
    assert!(failures.is_empty(), "{failures:#?}");
    if expect_saturation {
        assert!(
            saturated,
            "the 8-bit CNN file gave the same logits as where it was built: this CPU does not \
             take ONNX Runtime's saturating AVX2 u8 x s8 path, so the check proved nothing"
        );
    }
}
