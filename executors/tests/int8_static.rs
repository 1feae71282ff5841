//! The platform's INT8 files (`variants::build_int8`) of the zoo's real-architecture models,
//! checked with ONNX Runtime: the CNN gets static QDQ that ONNX Runtime fuses into integer
//! kernels and keeps its top-1 agreement with FP32; the text encoder gets dynamic INT8 and
//! keeps its own; every weight is 7-bit; what cannot be quantised, or calibrated, says so
//! without a panic.
//!
//! Needs ONNX Runtime (skipped with a notice without it, a failure under `CI=true`) and
//! `zoo/cifar-resnet.onnx`, `zoo/text-encoder.onnx` with their validation sets (written by
//! `scripts/make_real_zoo.py`; missing files fail under `CI=true`, else skip with a notice).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, HashMap};
use std::sync::OnceLock;

use infaas_core::{FileKind, Tensor, TensorData};
use infaas_executors::accuracy::{accuracy, AccuracyOptions};
use infaas_executors::calibration::{calibrate, CalibrationError, CalibrationOptions, RangeMethod};
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_executors::variants::{build_file, build_int8, Built, GenerateError, Int8Build};
use infaas_onnx::proto::{tensor_proto::DataType, NodeProto};
use infaas_onnx::{plan_static_int8, OnnxModel, StaticQuantizeOptions, StaticQuantizeReport};

/// Top-1 agreement of the CNN's INT8 file with FP32 on `cifar-val.npz` (256 rows, whose
/// labels are the FP32 model's own answers). Measured 0.934 (239/256) with ONNX Runtime
/// 1.31.1, identical on a VNNI CPU and on the AVX2-only path (`scripts/test-avx2.sh`);
/// 0.947 on 2048 other images of the same generator, so calibrating on the scored rows
/// does not flatter it. The bound leaves 9 rows for other ONNX Runtime builds and still
/// fails when quantisation degrades: per-tensor weights score 0.883, full 8-bit weights on
/// an AVX2 CPU 0.84 (27/32 rows).
const CNN_MIN_AGREEMENT: f64 = 0.90;

/// Top-1 agreement of the encoder's INT8 file (dynamic, 7-bit) on `text-val.npz`, scored in
/// one batch of 256. Measured 0.984 (252/256); the bound leaves 6 rows.
const ENCODER_MIN_AGREEMENT: f64 = 0.96;

/// Bytes of a zoo file; `None` (with a notice) when it is missing, a failure under CI=true.
fn zoo_file(name: &str) -> Option<Vec<u8>> {
    let path = common::zoo().join(name);
    match std::fs::read(&path) {
        Ok(bytes) => Some(bytes),
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{} is required when CI=true: {e}", path.display())
        }
        Err(e) => {
            eprintln!(
                "SKIPPED: {} is missing ({e}); run scripts/make_real_zoo.py",
                path.display()
            );
            None
        }
    }
}

struct Zoo {
    source: Vec<u8>,
    set: ValidationSet,
}

fn zoo_model(model: &str, val: &str) -> Option<Zoo> {
    if !common::runtime_ready() {
        return None;
    }
    let source = zoo_file(model)?;
    let npz = zoo_file(val)?;
    let arrays = infaas_protocol::npz::read_npz(&npz).expect("a readable NPZ");
    let engine = Engine::load(source.clone(), &SessionConfig::default()).expect("it loads");
    let set = match_validation(engine.signature(), arrays).expect("the set fits");
    Some(Zoo { source, set })
}

/// The CNN, its set and its INT8 file, built once for the tests of this binary.
fn cnn() -> Option<&'static (Zoo, Vec<u8>, StaticQuantizeReport)> {
    static CNN: OnceLock<Option<(Zoo, Vec<u8>, StaticQuantizeReport)>> = OnceLock::new();
    CNN.get_or_init(|| {
        let zoo = zoo_model("cifar-resnet.onnx", "cifar-val.npz")?;
        let started = std::time::Instant::now();
        match build_int8(&zoo.source, Some(&zoo.set)) {
            Ok(Int8Build::Static {
                bytes,
                report,
                dynamic,
            }) => {
                println!(
                    "cifar-resnet INT8 built in {:.1} s: {report:?}",
                    started.elapsed().as_secs_f64()
                );
                assert_eq!(dynamic.quantized_nodes, 0, "{dynamic:?}");
                Some((zoo, bytes, report))
            }
            other => panic!("expected a static INT8 file, got {other:?}"),
        }
    })
    .as_ref()
}

fn load(bytes: &[u8], optimization: OptLevel, out: Option<std::path::PathBuf>) -> Engine {
    let cfg = SessionConfig {
        intra_threads: 1,
        optimization,
        hardware: Hardware::Cpu,
        optimized_model_out: out,
        simulated: None,
    };
    Engine::load(bytes.to_vec(), &cfg).expect("the file loads")
}

fn count(counts: &BTreeMap<String, usize>, op: &str) -> usize {
    counts.get(op).copied().unwrap_or(0)
}

fn int8_values(t: &infaas_onnx::proto::TensorProto) -> Vec<i8> {
    t.raw_data
        .as_ref()
        .expect("raw data")
        .iter()
        .map(|&b| b as i8)
        .collect()
}

/// Every int8 initializer is within 7 bits (|w| <= 63), and some weight uses the range.
fn assert_7_bit_weights(m: &OnnxModel) {
    let g = m.proto().graph.as_ref().unwrap();
    let mut max = 0u8;
    let mut int8s = 0;
    for t in &g.initializer {
        if t.data_type() == DataType::Int8 as i32 {
            int8s += 1;
            let m = int8_values(t)
                .iter()
                .map(|v| v.unsigned_abs())
                .max()
                .unwrap_or(0);
            assert!(m <= 63, "{} has |w| = {m} > 63", t.name());
            max = max.max(m);
        }
    }
    assert!(int8s > 0, "no int8 initializers");
    assert_eq!(max, 63);
}

#[test]
fn cnn_int8_is_qdq_around_every_conv_and_fuses_into_integer_kernels() {
    let Some((zoo, bytes, report)) = cnn() else {
        return;
    };
    let source = OnnxModel::parse(&zoo.source).unwrap();
    let src_ops = source.op_counts();
    let convs = count(&src_ops, "Conv");
    assert!(convs >= 20, "{src_ops:?}");
    assert_eq!(report.nodes.get("Conv"), Some(&convs), "{report:?}");
    assert_eq!(
        report.folded_batch_norms,
        count(&src_ops, "BatchNormalization")
    );
    assert_eq!(report.nodes.get("Add"), Some(&count(&src_ops, "Add")));
    assert!(report.skipped.is_empty(), "{report:?}");

    // QDQ around every Conv: DequantizeLinear on data, weight and bias, QuantizeLinear alone
    // after it; no BatchNormalization left.
    let q = OnnxModel::parse(bytes).unwrap();
    let g = q.proto().graph.as_ref().unwrap();
    let producer: HashMap<&str, &NodeProto> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(move |o| (o.as_str(), n)))
        .collect();
    let mut readers: HashMap<&str, Vec<&NodeProto>> = HashMap::new();
    for n in &g.node {
        for i in &n.input {
            readers.entry(i.as_str()).or_default().push(n);
        }
    }
    let q_convs: Vec<&NodeProto> = g.node.iter().filter(|n| n.op_type() == "Conv").collect();
    assert_eq!(q_convs.len(), convs);
    for c in q_convs {
        assert_eq!(c.input.len(), 3, "{}", c.name());
        for i in &c.input {
            assert_eq!(
                producer.get(i.as_str()).map(|p| p.op_type()),
                Some("DequantizeLinear"),
                "input {i} of {}",
                c.name()
            );
        }
        let after: Vec<&str> = readers[c.output[0].as_str()]
            .iter()
            .map(|n| n.op_type())
            .collect();
        assert_eq!(after, ["QuantizeLinear"], "{}", c.name());
    }
    assert_eq!(count(&q.op_counts(), "BatchNormalization"), 0);
    assert_7_bit_weights(&q);
    assert_eq!(report.max_abs_weight, 63);
    assert!(
        bytes.len() * 10 < zoo.source.len() * 3,
        "INT8 {} bytes vs FP32 {}",
        bytes.len(),
        zoo.source.len()
    );

    // ONNX Runtime's CPU optimiser (Extended, the portable level) turns every group into an
    // integer kernel: its saved graph has QLinearConv for each Conv and no float Conv.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("int8-optimized.onnx");
    drop(load(bytes, OptLevel::Extended, Some(out.clone())));
    let optimized = OnnxModel::parse(&std::fs::read(&out).unwrap()).unwrap();
    let ops = optimized.op_counts();
    println!("ONNX Runtime's optimised INT8 graph: {ops:?}");
    assert_eq!(count(&ops, "QLinearConv"), convs, "{ops:?}");
    assert_eq!(count(&ops, "Conv"), 0, "{ops:?}");
    assert_eq!(
        count(&ops, "com.microsoft::QLinearAdd"),
        count(&src_ops, "Add"),
        "{ops:?}"
    );
    assert_eq!(
        count(&ops, "com.microsoft::QLinearGlobalAveragePool"),
        1,
        "{ops:?}"
    );
    assert_eq!(count(&ops, "com.microsoft::QGemm"), 1, "{ops:?}");
    // Only the image is quantised at run time, and nothing is dequantised mid-graph.
    assert_eq!(count(&ops, "QuantizeLinear"), 1, "{ops:?}");
    assert_eq!(count(&ops, "DequantizeLinear"), 0, "{ops:?}");
}

#[test]
fn cnn_int8_keeps_top1_agreement_with_fp32() {
    let Some((zoo, bytes, _)) = cnn() else {
        return;
    };
    let opts = AccuracyOptions::default();
    let fp32 = accuracy(&load(&zoo.source, OptLevel::All, None), &zoo.set, &opts).unwrap();
    assert_eq!(
        fp32.accuracy, 1.0,
        "the labels are the FP32 model's answers"
    );
    let int8 = accuracy(&load(bytes, OptLevel::All, None), &zoo.set, &opts).unwrap();
    println!(
        "cifar-resnet INT8 top-1 agreement with FP32: {:.4} ({}/{})",
        int8.accuracy, int8.correct, int8.total
    );
    assert!(
        int8.accuracy >= CNN_MIN_AGREEMENT,
        "agreement {} < {CNN_MIN_AGREEMENT}",
        int8.accuracy
    );
    // As the platform builds it.
    let dir = tempfile::tempdir().unwrap();
    match build_file(FileKind::Int8, &zoo.source, dir.path(), Some(&zoo.set)).unwrap() {
        Built::File(file) => assert_eq!(&file, bytes, "INT8 builds are deterministic"),
        Built::NotApplicable(why) => panic!("not applicable: {why}"),
    }
}

#[test]
fn cnn_integer_kernels_compute_what_the_qdq_graph_says() {
    // ONNX Runtime without graph optimisations runs the QDQ graph as written (float Conv
    // on dequantised values, then QuantizeLinear): the reference for the fused integer
    // kernels. A bias scale other than x_scale * w_scale, a wrong weight axis or zero point
    // would be read differently by the two.
    let Some((zoo, bytes, _)) = cnn() else {
        return;
    };
    let rows = zoo.set.rows_cyclic(0, 32);
    let logits = |level| {
        let out = load(bytes, level, None).run_blocking(rows.clone()).unwrap();
        let TensorData::Fp32(v) = &out[0].data else {
            panic!("float logits")
        };
        v.clone()
    };
    let (reference, fused) = (logits(OptLevel::Disable), logits(OptLevel::All));
    let range = reference.iter().fold(0f32, |m, v| m.max(v.abs()));
    let max_diff = reference
        .iter()
        .zip(&fused)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    println!("QDQ reference vs fused kernels: max |diff| {max_diff} (|logits| <= {range})");
    assert!(max_diff <= 0.05 * range, "{max_diff} vs {range}");
}

#[test]
fn encoder_int8_is_dynamic_with_7_bit_weights_and_keeps_its_accuracy() {
    let Some(zoo) = zoo_model("text-encoder.onnx", "text-val.npz") else {
        return;
    };
    let (bytes, report) = match build_int8(&zoo.source, Some(&zoo.set)).unwrap() {
        Int8Build::Dynamic { bytes, report } => (bytes, report),
        other => panic!("expected dynamic INT8, got {other:?}"),
    };
    // Every projection and FFN weight (the attention's activation x activation MatMuls stay
    // float).
    assert!(report.quantized_nodes >= 12, "{report:?}");
    let q = OnnxModel::parse(&bytes).unwrap();
    assert_eq!(
        count(&q.op_counts(), "com.microsoft::DynamicQuantizeMatMul"),
        report.quantized_nodes
    );
    assert_7_bit_weights(&q);
    let acc = accuracy(
        &load(&bytes, OptLevel::All, None),
        &zoo.set,
        &AccuracyOptions::default(),
    )
    .unwrap();
    println!(
        "text-encoder INT8 top-1 agreement with FP32: {:.4} ({}/{})",
        acc.accuracy, acc.correct, acc.total
    );
    assert!(
        acc.accuracy >= ENCODER_MIN_AGREEMENT,
        "agreement {} < {ENCODER_MIN_AGREEMENT}",
        acc.accuracy
    );
}

#[test]
fn calibration_measures_the_values_it_is_asked_for() {
    let Some((zoo, _, _)) = cnn() else {
        return;
    };
    let model = OnnxModel::parse(&zoo.source).unwrap();
    let plan = plan_static_int8(&model, &StaticQuantizeOptions::default()).unwrap();
    let opts = CalibrationOptions {
        max_rows: 64,
        method: RangeMethod::MinMax,
        ..Default::default()
    };
    // A set small enough to run whole: its image range is exact.
    let small = ValidationSet {
        inputs: zoo.set.rows_cyclic(0, 64),
        labels: zoo.set.labels[..64].to_vec(),
        len: 64,
    };
    let ranges = calibrate(&model, &plan.tensors, &small, &opts).unwrap();
    assert_eq!(ranges.len(), plan.tensors.len());
    let TensorData::Fp32(pixels) = &small.inputs[0].data else {
        panic!("float images")
    };
    let lo = pixels.iter().copied().fold(f32::INFINITY, f32::min);
    let hi = pixels.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert_eq!((ranges["image"].min, ranges["image"].max), (lo, hi));
    // Relu outputs (the plan asks for them in place of the conv outputs) are >= 0.
    let relus: Vec<String> = model
        .proto()
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .filter(|n| n.op_type() == "Relu")
        .map(|n| n.output[0].clone())
        .collect();
    let relu_ranges: Vec<_> = plan.tensors.iter().filter(|t| relus.contains(t)).collect();
    assert!(relu_ranges.len() >= 19, "{:?}", plan.tensors);
    for t in relu_ranges {
        assert_eq!(ranges[t].min, 0.0, "{t}");
        assert!(ranges[t].max > 0.0, "{t}");
    }
    // Percentiles only ever narrow the range.
    let pct = calibrate(
        &model,
        &plan.tensors,
        &small,
        &CalibrationOptions {
            method: RangeMethod::Percentile(99.9),
            ..opts
        },
    )
    .unwrap();
    let mut narrower = 0;
    for (t, r) in &ranges {
        assert!(pct[t].min >= r.min && pct[t].max <= r.max, "{t}");
        narrower += usize::from(pct[t].max < r.max);
    }
    assert!(narrower > 0);
}

#[test]
fn what_cannot_be_quantised_or_calibrated_says_why() {
    if !common::runtime_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // No Conv, MatMul or Gemm: a random forest.
    let forest = common::read(&common::zoo().join("digits-forest.onnx"));
    match build_int8(&forest, None).unwrap() {
        Int8Build::NotApplicable(why) => {
            assert!(why.contains("no Conv, MatMul or Gemm"), "{why}")
        }
        other => panic!("expected NotApplicable, got {other:?}"),
    }
    match build_file(FileKind::Int8, &forest, dir.path(), None).unwrap() {
        Built::NotApplicable(why) => assert!(why.contains("no Conv"), "{why}"),
        Built::File(_) => panic!("a forest has nothing to quantise"),
    }
    // Not a model at all.
    assert!(matches!(
        build_int8(b"not an onnx file", None),
        Err(GenerateError::Parse(_))
    ));

    let Some(zoo) = zoo_model("cifar-resnet.onnx", "cifar-val.npz") else {
        return;
    };
    // A CNN without a calibration set.
    match build_int8(&zoo.source, None).unwrap() {
        Int8Build::NotApplicable(why) => assert!(why.contains("calibration set"), "{why}"),
        other => panic!("expected NotApplicable, got {other:?}"),
    }
    // Calibration sets that do not fit: wrong image size, wrong input name, no rows.
    let images = |name: &str, side: usize| ValidationSet {
        inputs: vec![Tensor::new(
            name,
            vec![2, 3, side, side],
            TensorData::Fp32(vec![0.5; 2 * 3 * side * side]),
        )
        .unwrap()],
        labels: vec![0, 1],
        len: 2,
    };
    let err = build_int8(&zoo.source, Some(&images("image", 16))).unwrap_err();
    assert!(
        matches!(
            err,
            GenerateError::Calibration(CalibrationError::Mismatch(_))
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("does not fit") && msg.contains("'image'") && msg.contains("16"),
        "{msg}"
    );
    let err = build_int8(&zoo.source, Some(&images("pixels", 32))).unwrap_err();
    assert!(err.to_string().contains("'pixels'"), "{err}");
    let empty = ValidationSet {
        inputs: vec![],
        labels: vec![],
        len: 0,
    };
    let err = build_int8(&zoo.source, Some(&empty)).unwrap_err();
    assert!(
        matches!(err, GenerateError::Calibration(CalibrationError::Empty)),
        "{err:?}"
    );
    // The error keeps its cause.
    let err = build_int8(&zoo.source, Some(&images("image", 16))).unwrap_err();
    let cause = std::error::Error::source(&err).expect("a cause");
    assert!(std::error::Error::source(cause).is_some(), "{cause}");
}
