//! The engine, validation sets, accuracy and the profiler against the real zoo models.
//!
//! Needs the ONNX Runtime library (`ORT_DYLIB_PATH` or the location `scripts/setup.sh`
//! fills): without it these tests print a skip notice, or fail when `CI=true`.
//! Expected outputs come from python onnxruntime (tests/fixtures/zoo-expected.json) and the
//! accuracy figures of zoo/README.md, both written by scripts, never computed here.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use infaas_core::{DataType, Tensor, TensorData};
use infaas_executors::accuracy::{accuracy, AccuracyError, AccuracyOptions, PredictionKind};
use infaas_executors::engine::{Engine, EngineError, Hardware, OptLevel, SessionConfig};
use infaas_executors::profiler::{profile, profile_with_progress, ProfileOptions};
use infaas_executors::validation::{match_validation, ValidationError};

fn digits_rows(n: usize) -> Tensor {
    let set = npz(&zoo().join("digits-val.npz"));
    let x = set.into_iter().find(|t| t.name == "x").unwrap();
    let mut rows = x.slice_batch(0, n);
    rows.name = "input".into();
    rows
}

fn bad_input(err: EngineError) -> (String, String) {
    match err {
        EngineError::BadInput { tensor, reason } => (tensor, reason),
        other => panic!("expected BadInput, got {other:?}"),
    }
}

#[test]
fn every_zoo_model_matches_python_onnxruntime() {
    if !runtime_ready() {
        return;
    }
    let path = fixture("zoo-expected.json");
    let expected: serde_json::Value = serde_json::from_slice(&read(&path)).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; regenerate with python3 executors/tests/fixtures/make_fixtures.py",
            path.display()
        )
    });
    let rows = expected["rows"].as_u64().unwrap() as usize;
    let x: Vec<f32> = expected["x"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap() as f32)
        .collect();
    let x = Tensor::new("x", vec![rows, 64], TensorData::Fp32(x)).unwrap();

    for model in digits_models() {
        let file = model.file_name().unwrap().to_str().unwrap();
        let want = &expected["models"][file];
        assert!(
            want.is_object(),
            "{file} is not in zoo-expected.json; regenerate it with make_fixtures.py"
        );
        let engine = load(&model);
        let inputs: Vec<Tensor> = match engine.signature().inputs.as_slice() {
            [one] => vec![Tensor {
                name: one.name.clone(),
                ..x.clone()
            }],
            [left, right] => {
                let half = |name: &str, from: usize| {
                    let TensorData::Fp32(v) = &x.data else {
                        unreachable!()
                    };
                    let data = v
                        .chunks(64)
                        .flat_map(|r| r[from..from + 32].to_vec())
                        .collect();
                    Tensor::new(name, vec![rows, 32], TensorData::Fp32(data)).unwrap()
                };
                vec![half(&left.name, 0), half(&right.name, 32)]
            }
            other => panic!("{file}: unexpected inputs {other:?}"),
        };
        let outputs = engine.run_blocking(inputs).unwrap();
        let names: Vec<&str> = outputs.iter().map(|t| t.name.as_str()).collect();
        let want_names: Vec<&str> = want
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(sorted, want_names, "{file}: output names");
        for out in &outputs {
            let w = &want[&out.name];
            let shape: Vec<usize> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap() as usize)
                .collect();
            assert_eq!(out.shape, shape, "{file}/{}: shape", out.name);
            let values = w["values"].as_array().unwrap();
            for (i, v) in values.iter().enumerate() {
                let got = out.data.get_f64(i).unwrap();
                let want = v.as_f64().unwrap();
                assert!(
                    (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                    "{file}/{}[{i}]: got {got}, python onnxruntime {want}",
                    out.name
                );
            }
        }
    }
}

/// `| \`file\` | ... | accuracy |` rows of zoo/README.md.
fn readme_accuracies() -> BTreeMap<String, f64> {
    let text = String::from_utf8(read(&zoo().join("README.md"))).unwrap();
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let file = cells[0].trim_matches('`').to_string();
            let acc = cells.last().unwrap().parse::<f64>().unwrap();
            (file, acc)
        })
        .collect()
}

#[test]
fn accuracy_matches_the_zoo_readme() {
    if !runtime_ready() {
        return;
    }
    let figures = readme_accuracies();
    assert!(!figures.is_empty(), "no accuracy table in zoo/README.md");
    for model in zoo_models() {
        let file = model.file_name().unwrap().to_str().unwrap().to_string();
        let Some(&want) = figures.get(&file) else {
            panic!("{file} has no accuracy in zoo/README.md")
        };
        let engine = load(&model);
        let set = match_validation(engine.signature(), npz(&validation_file(&model))).unwrap();
        let report = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap();
        println!(
            "{file}: accuracy {:.4} (README {want:.4}) via '{}' ({:?})",
            report.accuracy, report.output_used, report.kind
        );
        assert!(
            (report.accuracy - want).abs() <= 0.01,
            "{file}: {} vs README {want}",
            report.accuracy
        );
        assert_eq!(report.total, set.len);
        assert_eq!(report.correct as f64 / report.total as f64, report.accuracy);
    }
}

#[test]
fn mlp_l_is_accurate_by_label_and_by_argmax() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&zoo().join("digits-mlp-l.onnx"));
    let set = match_validation(engine.signature(), npz(&zoo().join("digits-val.npz"))).unwrap();
    let by_label = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap();
    assert_eq!(by_label.output_used, "label");
    assert_eq!(by_label.kind, PredictionKind::Label);
    assert!(by_label.accuracy > 0.8, "{by_label:?}");

    let opts = AccuracyOptions {
        output: Some("probabilities".into()),
        batch_size: 7, // uneven batches
        ..Default::default()
    };
    let by_argmax = accuracy(&engine, &set, &opts).unwrap();
    assert_eq!(by_argmax.kind, PredictionKind::Argmax);
    assert!((by_argmax.accuracy - by_label.accuracy).abs() <= 0.01);
}

#[test]
fn scores_model_is_judged_by_argmax() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&zoo().join("digits-mlp-scores.onnx"));
    assert_eq!(engine.signature().inputs[0].name, "pixels");
    let set = match_validation(engine.signature(), npz(&zoo().join("digits-val.npz"))).unwrap();
    assert_eq!(set.inputs[0].name, "pixels");
    let report = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap();
    assert_eq!(
        (report.output_used.as_str(), report.kind),
        ("logits", PredictionKind::Argmax)
    );
    assert!(report.accuracy > 0.8);

    // A label beyond the 10 scored classes is named, not silently counted wrong.
    let mut bad = set.clone();
    bad.labels[5] = 12;
    let err = accuracy(&engine, &bad, &AccuracyOptions::default()).unwrap_err();
    assert!(matches!(
        err,
        AccuracyError::LabelOutOfRange {
            label: 12,
            row: 5,
            ..
        }
    ));
}

#[test]
fn two_input_model_runs_with_its_validation_set() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&zoo().join("digits-two-input.onnx"));
    let set = match_validation(
        engine.signature(),
        npz(&zoo().join("digits-two-input-val.npz")),
    )
    .unwrap();
    let names: Vec<&str> = set.inputs.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["left", "right"]);
    let outputs = engine.run_blocking(set.rows_cyclic(0, 3)).unwrap();
    assert_eq!(outputs[0].name, "scores");
    assert_eq!(outputs[0].shape, vec![3, 10]);
    let report = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap();
    assert!(report.accuracy > 0.8, "{report:?}");
}

#[test]
fn bad_inputs_are_rejected_naming_the_tensor() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&zoo().join("digits-mlp-s.onnx"));
    let good = digits_rows(2);

    let mut wrong_name = good.clone();
    wrong_name.name = "pixels".into();
    let (tensor, reason) = bad_input(engine.run_blocking(vec![wrong_name]).unwrap_err());
    assert_eq!(tensor, "pixels");
    assert!(
        reason.contains("no such input; its inputs are 'input'"),
        "{reason}"
    );

    let TensorData::Fp32(v) = &good.data else {
        unreachable!()
    };
    let as_f64 = Tensor::new(
        "input",
        vec![2, 64],
        TensorData::Fp64(v.iter().map(|&x| f64::from(x)).collect()),
    )
    .unwrap();
    let (tensor, reason) = bad_input(engine.run_blocking(vec![as_f64]).unwrap_err());
    assert_eq!(
        (tensor.as_str(), reason.as_str()),
        ("input", "expected FP32, got FP64")
    );

    let narrow = Tensor::new("input", vec![2, 63], TensorData::Fp32(vec![0.0; 126])).unwrap();
    let (tensor, reason) = bad_input(engine.run_blocking(vec![narrow]).unwrap_err());
    assert_eq!(tensor, "input");
    assert!(
        reason.contains("dimension 1 is 63 but the model expects 64"),
        "{reason}"
    );

    let flat = Tensor::new("input", vec![64], TensorData::Fp32(vec![0.0; 64])).unwrap();
    let (_, reason) = bad_input(engine.run_blocking(vec![flat]).unwrap_err());
    assert!(reason.contains("expected rank 2"), "{reason}");

    let (tensor, reason) = bad_input(engine.run_blocking(vec![]).unwrap_err());
    assert_eq!(tensor, "input");
    assert!(reason.starts_with("missing"), "{reason}");

    // The async path checks the same way, and the engine still works afterwards.
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let err = rt
        .block_on(engine.run(vec![
            Tensor::new("input", vec![1, 2], TensorData::Fp32(vec![0.0; 2])).unwrap(),
        ]))
        .unwrap_err();
    assert_eq!(bad_input(err).0, "input");
    assert_eq!(engine.run_blocking(vec![good]).unwrap()[0].shape, vec![2]);
}

#[test]
fn unloadable_models_are_load_errors() {
    if !runtime_ready() {
        return;
    }
    let real = read(&zoo().join("digits-mlp-m.onnx"));
    for bytes in [
        b"not an onnx model".to_vec(),
        Vec::new(),
        real[..real.len() / 2].to_vec(),
    ] {
        let err = Engine::load(bytes, &SessionConfig::default()).unwrap_err();
        assert!(matches!(err, EngineError::Load { .. }), "{err:?}");
        assert!(err
            .to_string()
            .starts_with("ONNX Runtime could not load the model: "));
        assert!(std::error::Error::source(&err).is_some(), "cause kept");
    }
}

#[test]
fn validation_mismatches_explain_themselves() {
    if !runtime_ready() {
        return;
    }
    let single = load(&zoo().join("digits-logreg.onnx"));
    let two = load(&zoo().join("digits-two-input.onnx"));
    let arrays = npz(&zoo().join("digits-val.npz"));

    let err = match_validation(two.signature(), arrays.clone()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "no validation array for input 'left' of the model: expected 'x.left', 'left'; \
         the set holds 'x', 'y'"
    );

    let narrow: Vec<Tensor> = arrays
        .iter()
        .map(|t| {
            if t.name != "x" {
                return t.clone();
            }
            let TensorData::Fp32(v) = &t.data else {
                unreachable!()
            };
            let data = v.chunks(64).flat_map(|r| r[..63].to_vec()).collect();
            Tensor::new("x", vec![t.shape[0], 63], TensorData::Fp32(data)).unwrap()
        })
        .collect();
    let err = match_validation(single.signature(), narrow).unwrap_err();
    assert_eq!(
        err.to_string(),
        "validation array 'x' has 63 features per row; input 'input' of the model expects 64"
    );

    let no_labels: Vec<Tensor> = arrays.iter().filter(|t| t.name != "y").cloned().collect();
    let err = match_validation(single.signature(), no_labels).unwrap_err();
    assert!(
        matches!(err, ValidationError::MissingLabels { .. }),
        "{err}"
    );

    let two_arrays = npz(&zoo().join("digits-two-input-val.npz"));
    let err = match_validation(single.signature(), two_arrays).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no validation array for input 'input'"),
        "{err}"
    );
}

#[test]
fn profile_reports_sane_latencies() {
    if !runtime_ready() {
        return;
    }
    let model = read(&zoo().join("digits-mlp-l.onnx"));
    let engine = Engine::load(model.clone(), &SessionConfig::default()).unwrap();
    let set = match_validation(engine.signature(), npz(&zoo().join("digits-val.npz"))).unwrap();
    drop(engine);
    let opts = ProfileOptions {
        warmup: 3,
        runs: 40,
        max_duration: Duration::from_secs(1),
    };
    let mut calls = Vec::new();
    let p = profile_with_progress(
        &model,
        &SessionConfig::default(),
        &set,
        &[1, 2, 4, 8],
        &opts,
        &mut |done, total| calls.push((done, total)),
    )
    .unwrap();
    println!("{p:#?}");
    assert_eq!(calls, vec![(1, 4), (2, 4), (3, 4), (4, 4)]);
    assert!(p.load_ms > 0.0);
    let batches: Vec<usize> = p.latency.iter().map(|l| l.batch).collect();
    assert_eq!(batches, vec![1, 2, 4, 8]);
    for l in &p.latency {
        assert!(l.p50_ms > 0.0 && l.p50_ms <= l.p99_ms, "{l:?}");
        assert!(l.mean_ms > 0.0 && l.throughput_per_s > 0.0, "{l:?}");
        assert!(l.runs >= 1 && l.runs <= 40, "{l:?}");
    }
    // Monotonic-ish, judged on medians (means carry the noise of a busy machine): eight rows
    // cost more than one, but less than eight single-row calls (per-call overhead is shared).
    let (one, eight) = (&p.latency[0], &p.latency[3]);
    assert!(eight.p50_ms >= one.p50_ms * 0.5, "{p:?}");
    assert!(eight.p50_ms < one.p50_ms * 8.0, "{p:?}");

    // A sample smaller than the batch is repeated.
    let mut tiny = set.clone();
    tiny.inputs = tiny.rows_cyclic(0, 3);
    tiny.labels.truncate(3);
    tiny.len = 3;
    let p = profile(&model, &SessionConfig::default(), &tiny, &[8], &opts).unwrap();
    assert_eq!(p.latency[0].batch, 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_runs_from_eight_tasks_all_succeed() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&zoo().join("digits-mlp-m.onnx"));
    let rows = digits_rows(8);
    let expected = engine.run_blocking(vec![rows.clone()]).unwrap();
    let mut tasks = Vec::new();
    for task in 0..8 {
        let engine = engine.clone();
        let rows = rows.clone();
        tasks.push(tokio::spawn(async move {
            let mut labels = Vec::new();
            for _ in 0..10 {
                let out = engine.run(vec![rows.slice_batch(task, task + 1)]).await?;
                labels.push(out[0].data.get_f64(0));
            }
            Ok::<_, EngineError>(labels)
        }));
    }
    for (task, handle) in tasks.into_iter().enumerate() {
        let labels = handle.await.unwrap().unwrap();
        let want = expected[0].data.get_f64(task);
        assert!(labels.iter().all(|&l| l == want), "task {task}: {labels:?}");
    }
}

#[test]
fn every_element_type_round_trips() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&fixture("all-types.onnx"));
    let inputs = vec![
        Tensor::new("in_f32", vec![2], TensorData::Fp32(vec![1.5, -2.0])).unwrap(),
        Tensor::new("in_f64", vec![2], TensorData::Fp64(vec![1e300, -0.25])).unwrap(),
        Tensor::new("in_i64", vec![2], TensorData::Int64(vec![i64::MAX, -1])).unwrap(),
        Tensor::new("in_i32", vec![2], TensorData::Int32(vec![i32::MIN, 7])).unwrap(),
        Tensor::new("in_i16", vec![2], TensorData::Int16(vec![-300, 300])).unwrap(),
        Tensor::new("in_i8", vec![2], TensorData::Int8(vec![-128, 127])).unwrap(),
        Tensor::new("in_u8", vec![2], TensorData::Uint8(vec![0, 255])).unwrap(),
        Tensor::new("in_b", vec![2], TensorData::Bool(vec![true, false])).unwrap(),
        Tensor::new(
            "in_s",
            vec![2],
            TensorData::Bytes(vec!["".into(), "héllo".into()]),
        )
        .unwrap(),
    ];
    // Inputs may come in any order; outputs come in the model's order.
    let mut shuffled = inputs.clone();
    shuffled.reverse();
    let outputs = engine.run_blocking(shuffled).unwrap();
    assert_eq!(outputs.len(), inputs.len());
    for (input, output) in inputs.iter().zip(&outputs) {
        assert_eq!(output.name, input.name.replace("in_", "out_"));
        assert_eq!((&output.shape, &output.data), (&input.shape, &input.data));
    }
}

#[test]
fn string_labels_and_zipmap_outputs() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&fixture("string-labels.onnx"));
    let label = engine.signature().output("label").unwrap();
    assert_eq!(label.dtype, DataType::Bytes);
    let mut arrays = npz(&zoo().join("digits-val.npz"));
    // skl2onnx names the input `X` here; the validation set's `x` is matched to it anyway.
    assert_eq!(engine.signature().inputs[0].name, "X");
    let set = match_validation(engine.signature(), std::mem::take(&mut arrays)).unwrap();
    let names = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    ];
    let opts = AccuracyOptions {
        label_names: Some(names.iter().map(|s| s.to_string()).collect()),
        ..Default::default()
    };
    let report = accuracy(&engine, &set, &opts).unwrap();
    assert_eq!(report.output_used, "label");
    assert!(report.accuracy > 0.9, "{report:?}");
    let err = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap_err();
    assert!(
        matches!(err, AccuracyError::UnparsableLabel { .. }),
        "{err}"
    );

    // ZipMap's sequence-of-maps output is left out; the label tensor still comes back.
    let engine = load(&fixture("zipmap.onnx"));
    let outputs: Vec<&str> = engine
        .signature()
        .outputs
        .iter()
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(outputs, ["output_label"]);
    let mut rows = digits_rows(3);
    rows.name = "X".into();
    let out = engine.run_blocking(vec![rows]).unwrap();
    assert_eq!(
        (out.len(), out[0].dtype(), &out[0].shape),
        (1, DataType::Int64, &vec![3])
    );
}

#[test]
fn fixed_dimensions_and_unsupported_types() {
    if !runtime_ready() {
        return;
    }
    let engine = load(&fixture("fixed-2x3.onnx"));
    assert_eq!(engine.signature().inputs[0].dims, vec![Some(2), Some(3)]);
    let x = Tensor::new(
        "x",
        vec![2, 3],
        TensorData::Fp32(vec![-1.0, 2.0, -3.0, 4.0, 0.0, 1.0]),
    )
    .unwrap();
    let out = engine.run_blocking(vec![x]).unwrap();
    assert_eq!(
        out[0].data,
        TensorData::Fp32(vec![0.0, 2.0, 0.0, 4.0, 0.0, 1.0])
    );
    let one_row = Tensor::new("x", vec![1, 3], TensorData::Fp32(vec![0.0; 3])).unwrap();
    let (tensor, reason) = bad_input(engine.run_blocking(vec![one_row]).unwrap_err());
    assert_eq!(tensor, "x");
    assert!(
        reason.contains("dimension 0 is 1 but the model expects 2"),
        "{reason}"
    );

    // Accuracy fills the fixed batch of 2 by wrapping around (5 rows: 3 runs); the profiler
    // keeps only the batch sizes the model takes.
    let rows = vec![
        1.0, 0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 3.0, 5.0, 1.0, 1.0, 0.0, 0.0, 9.0,
    ];
    let arrays = vec![
        Tensor::new("x", vec![5, 3], TensorData::Fp32(rows)).unwrap(),
        Tensor::new("y", vec![5], TensorData::Int64(vec![0, 1, 2, 0, 1])).unwrap(),
    ];
    let set = match_validation(engine.signature(), arrays).unwrap();
    let report = accuracy(&engine, &set, &AccuracyOptions::default()).unwrap();
    assert_eq!(
        (report.correct, report.total, report.kind),
        (4, 5, PredictionKind::Argmax)
    );
    let opts = ProfileOptions {
        runs: 3,
        ..ProfileOptions::default()
    };
    let model = read(&fixture("fixed-2x3.onnx"));
    let p = profile(&model, &SessionConfig::default(), &set, &[1, 2, 4], &opts).unwrap();
    let batches: Vec<usize> = p.latency.iter().map(|l| l.batch).collect();
    assert_eq!(batches, vec![2]);
    let err = profile(&model, &SessionConfig::default(), &set, &[1, 4], &opts).unwrap_err();
    assert!(
        err.to_string().contains("none of the batch sizes [1, 4]"),
        "{err}"
    );

    let err = Engine::load(read(&fixture("float16.onnx")), &SessionConfig::default()).unwrap_err();
    assert!(matches!(err, EngineError::Unsupported(_)), "{err:?}");
    assert!(err.to_string().contains("'x'"), "{err}");
}

#[test]
fn cuda_request_without_gpu_runs_on_cpu() {
    if !runtime_ready() {
        return;
    }
    let cfg = SessionConfig {
        hardware: Hardware::Cuda,
        ..SessionConfig::default()
    };
    let engine = Engine::load(read(&zoo().join("digits-logreg.onnx")), &cfg).unwrap();
    assert_eq!(engine.run_blocking(vec![digits_rows(2)]).unwrap().len(), 2);
}

#[test]
fn optimised_graph_is_saved_and_loads_again() {
    if !runtime_ready() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mlp-m.opt.onnx");
    let cfg = SessionConfig {
        optimization: OptLevel::Extended,
        optimized_model_out: Some(out.clone()),
        simulated: None,
        ..SessionConfig::default()
    };
    let original = Engine::load(read(&zoo().join("digits-mlp-m.onnx")), &cfg).unwrap();
    assert!(out.is_file(), "ONNX Runtime wrote no optimised model");
    let optimised = load(&out);
    assert_eq!(optimised.signature(), original.signature());
    let a = original.run_blocking(vec![digits_rows(4)]).unwrap();
    let b = optimised.run_blocking(vec![digits_rows(4)]).unwrap();
    assert_eq!(a[0], b[0], "same labels");
}

/// A simulated device: each run answers no sooner than the profile's median for its batch
/// size (a lower bound, which is what the simulation promises), with ONNX Runtime's outputs.
#[test]
fn simulated_device_holds_each_run_for_the_profiled_latency() {
    use infaas_executors::simulated::parse_own;
    use std::sync::Arc;
    use std::time::Instant;

    if !runtime_ready() {
        return;
    }
    let profile = parse_own("batch_size,p50_ms,p99_ms\n1,40,45\n8,80,90\n", "gpu.csv").unwrap();
    let model = read(&zoo().join("digits-logreg.onnx"));
    let plain = Engine::load(model.clone(), &SessionConfig::default()).unwrap();
    let simulated = Engine::load(
        model,
        &SessionConfig {
            simulated: Some(Arc::new(profile)),
            ..SessionConfig::default()
        },
    )
    .unwrap();
    for (rows, floor_ms) in [
        (1, 40.0),
        (4, 40.0 + 40.0 * 3.0 / 7.0),
        (8, 80.0),
        (16, 80.0),
    ] {
        let started = Instant::now();
        let got = simulated.run_blocking(vec![digits_rows(rows)]).unwrap();
        let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
        assert!(
            elapsed_ms >= floor_ms,
            "batch {rows} answered after {elapsed_ms} ms, before the profile's {floor_ms} ms"
        );
        assert_eq!(got, plain.run_blocking(vec![digits_rows(rows)]).unwrap());
    }
}

/// Subnormal floats are flushed to zero in every run, whichever thread runs it: the engine's
/// own (for every engine, not only the process's first session, which is all ONNX Runtime's own
/// setting reaches) and a caller's through [`InlineRunner`], whose flags are left as they were.
/// 1e-20 squared (1e-40) is subnormal; 2e-19 squared (4e-38) is not.
#[test]
fn subnormal_results_are_zero_on_every_thread_that_runs_a_session() {
    if !runtime_ready() {
        return;
    }
    let model = read(&fixture("square.onnx"));
    let x = || {
        Tensor::new(
            "x",
            vec![1, 4],
            TensorData::Fp32(vec![1e-20, 2e-19, 3.0, -1e-20]),
        )
        .unwrap()
    };
    let normal = std::hint::black_box(2e-19_f32);
    let want = [0.0_f32, normal * normal, 9.0, 0.0];
    let values = |out: Vec<Tensor>| match &out[0].data {
        TensorData::Fp32(v) => v.clone(),
        other => panic!("expected fp32, got {other:?}"),
    };
    let engines: Vec<Engine> = (0..2)
        .map(|_| Engine::load(model.clone(), &SessionConfig::default()).unwrap())
        .collect();
    for engine in &engines {
        let y = values(engine.run_blocking(vec![x()]).unwrap());
        assert_eq!(y.len(), 4);
        for (got, want) in y.iter().zip(want) {
            assert_eq!(*got, want, "engine thread: {y:?}");
        }
    }
    let tiny = std::hint::black_box(1e-20_f32);
    match engines[1]
        .inline_runner()
        .try_run(vec![x()], Duration::from_secs(1))
    {
        infaas_executors::engine::Inline::Ran(out) => {
            let y = values(out.unwrap());
            assert_eq!(y[0], 0.0, "inline: {y:?}");
            assert_eq!(y[1], want[1], "inline: {y:?}");
        }
        infaas_executors::engine::Inline::Declined(_) => panic!("an idle session runs inline"),
    }
    assert!(
        (tiny * tiny).is_subnormal(),
        "the caller's thread keeps its own float flags after an inline run"
    );
}
