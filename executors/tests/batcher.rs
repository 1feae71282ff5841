//! The dynamic batcher (`Instance`) against real zoo models.
//!
//! Needs the ONNX Runtime library (`ORT_DYLIB_PATH` or the location `scripts/setup.sh`
//! fills): without it these tests print a skip notice, or fail when `CI=true`.
//! Where a test needs the session busy it gives it one long request (run in chunks of
//! `max_batch` rows) and watches the instance's figures, rather than relying on timing.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use futures::future::join_all;
use futures::FutureExt;
use infaas_core::{Tensor, TensorData};
use infaas_executors::batcher::{BatcherConfig, Instance, InstanceError, InstanceFigures};
use infaas_executors::engine::{Engine, EngineError, SessionConfig};
use infaas_onnx::proto::{
    self, tensor_proto::DataType, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TypeProto, ValueInfoProto,
};
use infaas_onnx::OnnxModel;
use tokio::task::JoinHandle;

type Answer = Result<Vec<Tensor>, InstanceError>;

/// A partial batch is never handed over early, only when the session is idle.
const NEVER: Duration = Duration::MAX;

/// These tests pin down how batches form; gathering rows under load (which changes when a
/// partial batch is taken) is tested on its own.
fn config(max_batch: usize) -> BatcherConfig {
    BatcherConfig {
        max_batch,
        gather_rows: false,
        ..BatcherConfig::default()
    }
}

/// The digits validation images (540 x 64), as the zoo models' input `input`.
fn digits() -> Tensor {
    let x = npz(&zoo().join("digits-val.npz"))
        .into_iter()
        .find(|t| t.name == "x")
        .unwrap();
    Tensor {
        name: "input".into(),
        ..x
    }
}

/// Rows `start..start + n` of `x` (wrapping around), as one request.
fn rows(x: &Tensor, start: usize, n: usize) -> Vec<Tensor> {
    let TensorData::Fp32(all) = &x.data else {
        panic!("digits are FP32");
    };
    let (width, total) = (x.row_len(), x.batch_len());
    let data = (start..start + n)
        .flat_map(|r| &all[(r % total) * width..(r % total + 1) * width])
        .copied()
        .collect();
    vec![Tensor::new("input", vec![n, width], TensorData::Fp32(data)).unwrap()]
}

/// Labels equal, probabilities (and any other float output) within 1e-5.
fn assert_same_outputs(got: &[Tensor], want: &[Tensor], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: output count");
    for (g, w) in got.iter().zip(want) {
        assert_eq!((&g.name, &g.shape), (&w.name, &w.shape), "{what}");
        match (&g.data, &w.data) {
            (TensorData::Fp32(a), TensorData::Fp32(b)) => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    assert!((x - y).abs() <= 1e-5, "{what}: {} [{i}] {x} vs {y}", g.name);
                }
            }
            (a, b) => assert_eq!(a, b, "{what}: {}", g.name),
        }
    }
}

fn label(outputs: &[Tensor]) -> &[i64] {
    match &outputs.iter().find(|t| t.name == "label").unwrap().data {
        TensorData::Int64(v) => v,
        other => panic!("label is {other:?}"),
    }
}

/// Polls the figures until `ready` holds (the actor publishes after every step).
async fn wait_for(instance: &Instance, ready: impl Fn(&InstanceFigures) -> bool) {
    for _ in 0..10_000 {
        if ready(&instance.figures()) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    panic!("figures never got there: {:?}", instance.figures());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_results_equal_solo_results() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    // Off, and with requests that find the instance idle run on their callers' threads.
    let inline = [Duration::ZERO, Duration::from_secs(1)];
    for (model, inline_below) in ["digits-logreg", "digits-mlp-l", "digits-forest"]
        .into_iter()
        .flat_map(|m| inline.map(|i| (m, i)))
    {
        let engine = load(&zoo().join(format!("{model}.onnx")));
        // Sizes chosen to mix: several requests per batch, one oversized (chunked) request.
        let sizes = [1, 3, 2, 1, 5, 8, 1, 2, 19, 1, 4, 1, 1, 7];
        let mut starts = Vec::new();
        let mut solo = Vec::new();
        let mut at = 0;
        for &n in &sizes {
            starts.push(at);
            solo.push(engine.run(rows(&x, at, n)).await.unwrap());
            at += n;
        }
        let cfg = BatcherConfig {
            inline_below,
            ..config(8)
        };
        let instance = Instance::start(engine, cfg);
        let calls = sizes.iter().zip(&starts).map(|(&n, &start)| {
            let instance = instance.clone();
            let request = rows(&x, start, n);
            tokio::spawn(async move { instance.infer(request).await })
        });
        let batched = join_all(calls).await;
        for (i, (got, want)) in batched.into_iter().zip(&solo).enumerate() {
            let got = got.unwrap().unwrap();
            assert_same_outputs(&got, want, &format!("{model} request {i}"));
        }
        let f = instance.figures();
        assert_eq!(f.requests_total, sizes.len() as u64);
        assert_eq!(f.rows_total, sizes.iter().sum::<usize>() as u64);
        assert!(
            f.batch_histogram.iter().all(|&(rows, _)| rows <= 8),
            "{f:?}"
        );
        assert_eq!(f.errors_total, 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_callers_are_batched_and_get_their_own_rows() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let engine = load(&zoo().join("digits-mlp-l.onnx"));
    let mut solo = Vec::new();
    for row in 0..200 {
        solo.push(label(&engine.run(rows(&x, row, 1)).await.unwrap())[0]);
    }
    let instance = Instance::start(engine, config(16));

    // 50 tasks x 4 one-row requests; request (task, k) carries validation row task * 4 + k.
    let tasks = (0..50).map(|task| {
        let instance = instance.clone();
        let x = x.clone();
        tokio::spawn(async move {
            let mut labels = Vec::new();
            for k in 0..4 {
                let row = task * 4 + k;
                let out = instance.infer(rows(&x, row, 1)).await.unwrap();
                labels.push((row, label(&out)[0]));
            }
            labels
        })
    });
    for labels in join_all(tasks).await {
        for (row, got) in labels.unwrap() {
            assert_eq!(got, solo[row], "row {row}");
        }
    }
    let f = instance.figures();
    assert_eq!((f.requests_total, f.rows_total), (200, 200), "{f:?}");
    assert!(
        f.batch_histogram.iter().any(|&(rows, _)| rows > 1),
        "no batch larger than one row: {f:?}"
    );
    assert!(
        f.batch_histogram.iter().all(|&(rows, _)| rows <= 16),
        "{f:?}"
    );
    let runs: u64 = f.batch_histogram.iter().map(|&(_, n)| n).sum();
    assert!(runs < 200, "{f:?}");
    assert!(f.qps > 0.0 && f.latency_p50_ms > 0.0 && f.exec_p50_ms > 0.0);
    assert!(f.latency_p99_ms >= f.latency_p50_ms && f.exec_p99_ms >= f.exec_p50_ms);
    // The task publishes its gauges just after sending the last answers.
    wait_for(&instance, |f| {
        (f.queue_rows, f.queue_requests, f.in_flight) == (0, 0, false)
    })
    .await;
}

/// A small MLP's runs cost mostly their fixed part (about the same at 8 rows as at 2), so the
/// batcher learns that rows are worth gathering; under closed-loop load a partial batch then
/// waits one scheduling round for the callers just answered, and the same load runs in fewer,
/// fuller batches than with gathering off. Every caller still gets its own rows.
///
/// Run counts depend on how the callers interleave, and the test suite runs other tests beside
/// this one on two cores. So each round measures both settings back to back, under the same
/// outside load, and the test passes when one of up to three rounds shows the cut. With
/// gathering broken the two settings run within a few runs of each other in every round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_models_under_load_gather_rows_into_fewer_runs() {
    if !runtime_ready() {
        return;
    }
    const ROUNDS: usize = 3;
    let x = digits();
    let mut rounds = Vec::new();
    for _ in 0..ROUNDS {
        let plain = closed_loop_runs(&x, false).await;
        let gathered = closed_loop_runs(&x, true).await;
        rounds.push((plain, gathered));
        // Measured here: about 305 runs without gathering (within a few runs), 170-280 with
        // it, as the callers fall into one or two cohorts.
        if (gathered as f64) < 0.95 * plain as f64 {
            return;
        }
    }
    panic!("gathering should cut the runs below 0.95x in some round; (plain, gathered) runs: {rounds:?}");
}

/// Runs of a fresh `digits-mlp-l` instance (max batch 32) while 16 closed-loop callers send 150
/// one-row calls each, after teaching it the model's costs; checks every caller's answers.
async fn closed_loop_runs(x: &Tensor, gather_rows: bool) -> u64 {
    const CALLERS: usize = 16;
    const CALLS: usize = 150;
    let engine = load(&zoo().join("digits-mlp-l.onnx"));
    let mut solo = Vec::new();
    for row in 0..CALLERS {
        solo.push(label(&engine.run(rows(x, row, 1)).await.unwrap())[0]);
    }
    let instance = Instance::start(
        engine,
        BatcherConfig {
            max_batch: 32,
            gather_rows,
            ..BatcherConfig::default()
        },
    );
    // Teach it the model's costs: batches of 2 rows, then of 8.
    for n in [2, 8] {
        for row in 0..30 {
            instance.infer(rows(x, row, n)).await.unwrap();
        }
    }
    assert!(
        instance.figures().gathering,
        "an MLP's fixed cost per run should outweigh its rows: {:?}",
        instance.figures()
    );
    let before: u64 = instance
        .figures()
        .batch_histogram
        .iter()
        .map(|&(_, n)| n)
        .sum();
    let callers = (0..CALLERS).map(|caller| {
        let instance = instance.clone();
        let x = x.clone();
        let want = solo[caller];
        tokio::spawn(async move {
            for _ in 0..CALLS {
                let out = instance.infer(rows(&x, caller, 1)).await.unwrap();
                assert_eq!(label(&out), [want], "caller {caller}");
            }
        })
    });
    for caller in join_all(callers).await {
        caller.unwrap();
    }
    let f = instance.figures();
    let runs = f.batch_histogram.iter().map(|&(_, n)| n).sum::<u64>() - before;
    eprintln!("gather_rows {gather_rows}: {runs} runs; {f:?}");
    runs
}

/// Under load, batches of a model whose runs are short run on the batcher's own thread
/// rather than crossing to the session's thread and back. They still batch, and every caller
/// gets its own rows. With inline runs off, every batch goes to the session's thread.
/// (40 one-row calls queue behind a long request that runs in chunks on the session's
/// thread, then form batches of at most 16 rows.)
#[tokio::test(flavor = "current_thread")]
async fn batches_of_short_runs_run_on_the_batchers_thread() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let chunks = (BIG_ROWS / 16) as u64;
    for inline_below in [Duration::from_secs(1), Duration::ZERO] {
        let engine = load(&zoo().join("digits-mlp-l.onnx"));
        let mut solo = Vec::new();
        for row in 0..40 {
            solo.push(label(&engine.run(rows(&x, row, 1)).await.unwrap())[0]);
        }
        let before = engine.thread_runs();
        let (instance, big) = busy_with(engine.clone(), &x, inline_below).await;
        let calls = join_all((0..40).map(|row| instance.infer(rows(&x, row, 1))));
        let (outs, big) = tokio::join!(calls, big);
        assert_eq!(big.unwrap().unwrap()[0].shape[0], BIG_ROWS);
        for (row, out) in outs.into_iter().enumerate() {
            assert_eq!(label(&out.unwrap())[0], solo[row], "row {row}");
        }
        let f = instance.figures();
        let runs: u64 = f.batch_histogram.iter().map(|&(_, n)| n).sum();
        let batches = runs - chunks;
        assert!(
            (3..40).contains(&batches),
            "the 40 calls ran in {batches} batches: {f:?}"
        );
        let on_thread = engine.thread_runs() - before;
        match inline_below.is_zero() {
            true => assert_eq!(on_thread, chunks + batches, "{f:?}"),
            false => assert_eq!(on_thread, chunks, "{f:?}"),
        }
    }
}

/// On a single-threaded runtime the callers below enqueue in spawn order; they must be
/// answered in that order too, whatever batches they land in.
#[tokio::test(flavor = "current_thread")]
async fn requests_are_answered_in_fifo_order() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let instance = Instance::start(load(&zoo().join("digits-mlp-l.onnx")), config(4));
    let order = Arc::new(Mutex::new(Vec::new()));
    let calls: Vec<_> = (0..40)
        .map(|i| {
            let instance = instance.clone();
            let order = order.clone();
            let request = rows(&x, i, 1 + i % 3);
            tokio::spawn(async move {
                instance.infer(request).await.unwrap();
                order.lock().unwrap().push(i);
            })
        })
        .collect();
    for call in calls {
        call.await.unwrap();
    }
    let order = order.lock().unwrap().clone();
    assert_eq!(order, (0..40).collect::<Vec<_>>());
    let f = instance.figures();
    assert!(f.batch_histogram.iter().any(|&(rows, _)| rows > 1), "{f:?}");
}

/// `join_all` polls every call once before the batcher task runs (one thread), so all of
/// them try to reserve queue space at the same moment.
#[tokio::test(flavor = "current_thread")]
async fn a_full_queue_refuses_at_once() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let cfg = BatcherConfig {
        max_batch: 4,
        max_queue_delay: Duration::from_millis(1),
        queue_capacity: 4,
        inline_below: Duration::ZERO,
        gather_rows: false,
    };
    let instance = Instance::start(load(&zoo().join("digits-mlp-l.onnx")), cfg);
    let answers = join_all((0..10).map(|i| instance.infer(rows(&x, i, 1)))).await;
    let ok = answers.iter().filter(|a| a.is_ok()).count();
    let full = answers
        .iter()
        .filter(|a| matches!(a, Err(InstanceError::QueueFull { capacity: 4 })))
        .count();
    assert_eq!((ok, full), (4, 6), "{answers:?}");
    assert_eq!(instance.figures().errors_total, 6);

    // Larger than the whole queue: never admissible, so not "retry later".
    let err = instance.infer(rows(&x, 0, 5)).await.unwrap_err();
    assert!(
        matches!(err, InstanceError::TooManyRows { rows: 5, max: 4 }),
        "{err:?}"
    );
    // The space is back once the queue drained.
    instance.infer(rows(&x, 0, 4)).await.unwrap();
}

/// Rows of the request that keeps a [`busy`] instance busy (2,000 runs of 16 rows).
const BIG_ROWS: usize = 16 * 2000;

/// An instance of `engine` (max_batch 16; partial batches wait for an idle session) once it
/// runs one request of [`BIG_ROWS`] rows, and that request's task.
async fn busy(engine: Engine, x: &Tensor) -> (Instance, JoinHandle<Answer>) {
    busy_with(engine, x, Duration::ZERO).await
}

/// [`busy`], with requests that find the instance idle run inline below `inline_below`.
async fn busy_with(
    engine: Engine,
    x: &Tensor,
    inline_below: Duration,
) -> (Instance, JoinHandle<Answer>) {
    let cfg = BatcherConfig {
        max_batch: 16,
        max_queue_delay: NEVER,
        queue_capacity: 100_000,
        inline_below,
        gather_rows: false,
    };
    let instance = Instance::start(engine, cfg);
    let big = {
        let instance = instance.clone();
        let request = rows(x, 0, BIG_ROWS);
        tokio::spawn(async move { instance.infer(request).await })
    };
    wait_for(&instance, |f| f.in_flight && f.queue_requests == 0).await;
    (instance, big)
}

/// A request that finds its instance idle runs on the caller's thread: it is answered within
/// its first poll, with the session's outputs, and counted in the figures. One that finds the
/// session busy is queued as before, and so is every request when inline runs are off.
/// (On one runtime thread, a queued request cannot be answered within its first poll: the
/// batcher's task cannot run meanwhile.)
#[tokio::test(flavor = "current_thread")]
async fn idle_instances_answer_on_the_callers_thread() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let engine = load(&zoo().join("digits-mlp-l.onnx"));
    let want = engine.run(rows(&x, 3, 1)).await.unwrap();
    let (instance, big) = busy_with(engine, &x, Duration::from_secs(1)).await;
    assert!(
        instance.infer(rows(&x, 3, 1)).now_or_never().is_none(),
        "a request on a busy session waits in the queue"
    );
    big.await.unwrap().unwrap();
    wait_for(&instance, |f| !f.in_flight && f.queue_requests == 0).await;
    let before = instance.figures();
    let got = instance
        .infer(rows(&x, 3, 1))
        .now_or_never()
        .expect("answered within the first poll")
        .unwrap();
    assert_same_outputs(&got, &want, "inline run");
    let after = instance.figures();
    assert_eq!(after.requests_total, before.requests_total + 1, "{after:?}");
    assert_eq!(after.rows_total, before.rows_total + 1);
    assert_eq!(after.errors_total, 0);
    // A request with more rows than a batch never runs inline.
    assert!(instance.infer(rows(&x, 0, 17)).now_or_never().is_none());

    let off = Instance::start(load(&zoo().join("digits-mlp-l.onnx")), config(16));
    assert!(off.infer(rows(&x, 3, 1)).now_or_never().is_none());
    let got = off.infer(rows(&x, 3, 1)).await.unwrap();
    assert_same_outputs(&got, &want, "run on the session's thread");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callers_that_have_gone_are_never_run() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let (instance, big) = busy(load(&zoo().join("digits-mlp-l.onnx")), &x).await;

    let victim = {
        let instance = instance.clone();
        let request = rows(&x, 7, 1);
        tokio::spawn(async move { instance.infer(request).await })
    };
    wait_for(&instance, |f| f.queue_requests == 1).await;
    victim.abort();
    assert!(victim.await.unwrap_err().is_cancelled());
    // Still queued (the batcher has not looked since), but its caller has gone.
    let busy = instance.figures();
    assert!(busy.in_flight && busy.queue_requests == 1, "{busy:?}");

    let follower = instance.infer(rows(&x, 8, 1)).await.unwrap();
    assert_eq!(follower[0].shape, vec![1]);
    let big = big.await.unwrap().unwrap();
    assert_eq!(big[0].shape, vec![BIG_ROWS]);
    let f = instance.figures();
    assert_eq!(f.requests_total, 2, "{f:?}");
    assert_eq!(f.rows_total, BIG_ROWS as u64 + 1, "{f:?}");
    assert_eq!(f.cancelled_total, 1, "{f:?}");
    assert_eq!(f.errors_total, 0, "{f:?}");
}

// ---------------------------------------------------------------------------
// a model whose rows may differ in width: y[n] = sum of row n of x [N, F]

fn dim(d: proto::tensor_shape_proto::dimension::Value) -> proto::tensor_shape_proto::Dimension {
    proto::tensor_shape_proto::Dimension {
        value: Some(d),
        ..Default::default()
    }
}

fn float_io(name: &str, dims: &[&str]) -> ValueInfoProto {
    use proto::tensor_shape_proto::dimension::Value::DimParam;
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(proto::TensorShapeProto {
                    dim: dims.iter().map(|d| dim(DimParam(d.to_string()))).collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An engine for `graph` (ONNX IR 9, opset 17), one intra-op thread.
fn engine_of(graph: GraphProto) -> Engine {
    let model = OnnxModel::from_proto(ModelProto {
        ir_version: Some(9),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    })
    .unwrap();
    Engine::load(model.to_bytes(), &SessionConfig::default()).unwrap()
}

fn row_sum_model() -> Engine {
    engine_of(GraphProto {
        name: Some("row_sum".into()),
        node: vec![NodeProto {
            op_type: Some("ReduceSum".into()),
            input: vec!["x".into(), "axes".into()],
            output: vec!["y".into()],
            attribute: vec![proto::AttributeProto {
                name: Some("keepdims".into()),
                r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
                i: Some(0),
                ..Default::default()
            }],
            ..Default::default()
        }],
        input: vec![float_io("x", &["N", "F"])],
        output: vec![float_io("y", &["N"])],
        initializer: vec![TensorProto {
            name: Some("axes".into()),
            dims: vec![1],
            data_type: Some(DataType::Int64 as i32),
            int64_data: vec![1],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// One row of `width` small integers (sums are exact).
fn wide_row(width: usize, seed: usize) -> (Vec<Tensor>, f32) {
    let data: Vec<f32> = (0..width).map(|i| ((i + seed) % 7) as f32).collect();
    let sum = data.iter().sum();
    let x = Tensor::new("x", vec![1, width], TensorData::Fp32(data)).unwrap();
    (vec![x], sum)
}

/// Four 3-wide rows then four 5-wide rows, sent together: they form exactly two batches of
/// four (the second waits for the first: `max_queue_delay` is long), never a mixed one.
#[tokio::test(flavor = "current_thread")]
async fn incompatible_requests_are_never_combined() {
    if !runtime_ready() {
        return;
    }
    let engine = row_sum_model();
    assert_eq!(engine.signature().inputs[0].dims, vec![None, None]);
    let cfg = BatcherConfig {
        max_batch: 16,
        max_queue_delay: NEVER,
        queue_capacity: 64,
        inline_below: Duration::ZERO,
        gather_rows: false,
    };
    let instance = Instance::start(engine, cfg);
    let requests: Vec<(Vec<Tensor>, f32)> = (0..8)
        .map(|i| wide_row(if i < 4 { 3 } else { 5 }, i))
        .collect();
    let expected: Vec<f32> = requests.iter().map(|(_, s)| *s).collect();
    let answers = join_all(requests.into_iter().map(|(r, _)| instance.infer(r))).await;
    for (i, (answer, want)) in answers.into_iter().zip(expected).enumerate() {
        let out = answer.unwrap();
        assert_eq!(out[0].shape, vec![1], "request {i}");
        let TensorData::Fp32(got) = &out[0].data else {
            panic!("request {i}: {:?}", out[0]);
        };
        assert_eq!(got[0], want, "request {i}");
    }
    let f = instance.figures();
    assert_eq!(f.batch_histogram, vec![(4, 2)], "{f:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_queued_work_then_refuses() {
    if !runtime_ready() {
        return;
    }
    let x = digits();
    let engine = load(&zoo().join("digits-mlp-l.onnx"));
    let mut solo = Vec::new();
    for row in 0..10 {
        solo.push(label(&engine.run(rows(&x, row, 1)).await.unwrap())[0]);
    }
    let (instance, big) = busy(engine, &x).await;
    let queued: Vec<_> = (0..10)
        .map(|i| {
            let instance = instance.clone();
            let request = rows(&x, i, 1);
            tokio::spawn(async move { instance.infer(request).await })
        })
        .collect();
    wait_for(&instance, |f| f.queue_requests == 10).await;

    instance.shutdown();
    let late = instance.infer(rows(&x, 0, 1)).await.unwrap_err();
    assert!(matches!(late, InstanceError::Stopped), "{late:?}");

    assert_eq!(big.await.unwrap().unwrap()[0].shape, vec![BIG_ROWS]);
    for (i, call) in queued.into_iter().enumerate() {
        let out = call.await.unwrap().unwrap();
        assert_eq!(label(&out)[0], solo[i], "queued request {i}");
    }
    tokio::time::timeout(Duration::from_secs(10), instance.stopped())
        .await
        .expect("the batcher task ends once its queue is empty");
    let f = instance.figures();
    assert_eq!(f.rows_total, BIG_ROWS as u64 + 10, "{f:?}");
    assert_eq!(f.errors_total, 1, "{f:?}");
    assert!(matches!(
        instance.infer(rows(&x, 0, 1)).await,
        Err(InstanceError::Stopped)
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_before_queueing() {
    if !runtime_ready() {
        return;
    }
    let instance = Instance::start(load(&zoo().join("digits-two-input.onnx")), config(8));
    let t = |name: &str, n: usize, w: usize| {
        Tensor::new(name, vec![n, w], TensorData::Fp32(vec![0.5; n * w])).unwrap()
    };
    let reason = |err: InstanceError| match err {
        InstanceError::BadInput(EngineError::BadInput { tensor, reason }) => {
            format!("{tensor}: {reason}")
        }
        other => panic!("expected BadInput, got {other:?}"),
    };
    let err = instance
        .infer(vec![t("left", 2, 32), t("right", 3, 32)])
        .await
        .unwrap_err();
    assert!(reason(err).contains("has 3 rows but 'left' has 2"));
    let err = instance
        .infer(vec![t("left", 0, 32), t("right", 0, 32)])
        .await
        .unwrap_err();
    assert!(reason(err).contains("0 rows"));
    let err = instance
        .infer(vec![t("left", 1, 31), t("right", 1, 32)])
        .await
        .unwrap_err();
    assert!(reason(err).contains("dimension 1 is 31"));
    // A good request in between is unaffected; inputs may come in any order.
    let out = instance
        .infer(vec![t("right", 2, 32), t("left", 2, 32)])
        .await
        .unwrap();
    assert_eq!(out[0].shape, vec![2, 10]);
    let f = instance.figures();
    assert_eq!((f.errors_total, f.requests_total), (3, 1), "{f:?}");
}

/// A model with a fixed first dimension cannot be batched: each request runs as given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_batch_models_run_each_request_alone() {
    if !runtime_ready() {
        return;
    }
    let instance = Instance::start(load(&fixture("fixed-2x3.onnx")), config(8));
    let calls = (0..20).map(|i| {
        let instance = instance.clone();
        let v = i as f32 - 10.0;
        let x = Tensor::new("x", vec![2, 3], TensorData::Fp32(vec![v; 6])).unwrap();
        tokio::spawn(async move { (v, instance.infer(vec![x]).await.unwrap()) })
    });
    for call in join_all(calls).await {
        let (v, out) = call.unwrap();
        assert_eq!(out[0].data, TensorData::Fp32(vec![v.max(0.0); 6]));
    }
    let f = instance.figures();
    assert_eq!(f.batch_histogram, vec![(2, 20)], "{f:?}");
}

// ---------------------------------------------------------------------------
// a model that takes a while: y = x [N, 1024] times the identity, SLOW_LAYERS times

const SLOW_WIDTH: usize = 1024;
const SLOW_LAYERS: usize = 96;

fn slow_model() -> Engine {
    let mut identity = vec![0f32; SLOW_WIDTH * SLOW_WIDTH];
    for i in 0..SLOW_WIDTH {
        identity[i * SLOW_WIDTH + i] = 1.0;
    }
    let node = |i: usize| NodeProto {
        op_type: Some("MatMul".into()),
        input: vec![
            if i == 0 { "x".into() } else { format!("h{i}") },
            "w".into(),
        ],
        output: vec![if i + 1 == SLOW_LAYERS {
            "y".into()
        } else {
            format!("h{}", i + 1)
        }],
        ..Default::default()
    };
    let width = SLOW_WIDTH.to_string();
    engine_of(GraphProto {
        name: Some("slow".into()),
        node: (0..SLOW_LAYERS).map(node).collect(),
        input: vec![float_io("x", &["N", &width])],
        output: vec![float_io("y", &["N", &width])],
        initializer: vec![TensorProto {
            name: Some("w".into()),
            dims: vec![SLOW_WIDTH as i64, SLOW_WIDTH as i64],
            data_type: Some(DataType::Float as i32),
            raw_data: Some(identity.iter().flat_map(|v| v.to_le_bytes()).collect()),
            ..Default::default()
        }],
        ..Default::default()
    })
}

fn slow_rows(n: usize) -> Vec<Tensor> {
    let data = (0..n * SLOW_WIDTH).map(|i| (i % 13) as f32).collect();
    vec![Tensor::new("x", vec![n, SLOW_WIDTH], TensorData::Fp32(data)).unwrap()]
}

/// While a long batch runs, the requests that arrive meanwhile join one next batch, handed
/// to the session near the end of the running one, rather than a partial batch handed over
/// behind it as soon as its first request has waited `max_queue_delay`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_arriving_during_a_long_run_join_one_batch() {
    if !runtime_ready() {
        return;
    }
    let engine = slow_model();
    // The session learns how long a 16-row run takes.
    let t0 = std::time::Instant::now();
    engine.run(slow_rows(16)).await.unwrap();
    let run = t0.elapsed();
    let cfg = BatcherConfig {
        max_batch: 16,
        max_queue_delay: Duration::from_millis(1),
        queue_capacity: 1024,
        inline_below: Duration::ZERO,
        gather_rows: false,
    };
    let instance = Instance::start(engine, cfg);
    let first = {
        let instance = instance.clone();
        tokio::spawn(async move { instance.infer(slow_rows(16)).await })
    };
    wait_for(&instance, |f| f.in_flight).await;
    // Six 1-row requests within a fraction of the run.
    let gap = (run / 30).max(Duration::from_micros(200));
    let mut later = Vec::new();
    for _ in 0..6 {
        let instance = instance.clone();
        later.push(tokio::spawn(
            async move { instance.infer(slow_rows(1)).await },
        ));
        tokio::time::sleep(gap).await;
    }
    assert_eq!(first.await.unwrap().unwrap()[0].shape, vec![16, SLOW_WIDTH]);
    for l in later {
        let out = l.await.unwrap().unwrap();
        assert_eq!(out[0].shape, vec![1, SLOW_WIDTH]);
    }
    let f = instance.figures();
    assert_eq!(
        f.batch_histogram,
        vec![(6, 1), (16, 1)],
        "a 16-row run took {run:?}; {f:?}"
    );
}
