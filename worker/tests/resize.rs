//! Vertical scaling on a worker node: an instance is resized to more intra-op threads while
//! queries keep arriving; none fails, and the heartbeat reports the new thread count.
//!
//! Needs ONNX Runtime (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache): without it the test
//! fails when `CI=true` and otherwise passes after a skip notice.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use infaas_core::{HardwareKind, Tensor};
use infaas_store::objects::LocalDirStore;
use infaas_store::ObjectStore;
use infaas_worker::{LoadRequest, NodeConfig, WorkerError, WorkerNode};

fn runtime_ready() -> bool {
    match infaas_executors::runtime::init_runtime(None) {
        Ok(_) => true,
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("ONNX Runtime is required when CI=true: {e}")
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED (no ONNX Runtime): {e}");
            false
        }
    }
}

fn rows(n: usize) -> Vec<Tensor> {
    let data: Vec<f32> = (0..n * 64).map(|i| (i % 17) as f32 / 16.0).collect();
    vec![Tensor::new("input", vec![n, 64], infaas_core::TensorData::Fp32(data)).unwrap()]
}

async fn node(budget: usize) -> (tempfile::TempDir, Arc<WorkerNode>) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalDirStore::open(dir.path()).await.unwrap();
    let model =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo/digits-mlp-m.onnx"))
            .unwrap();
    store.put_bytes("m.onnx", model.into()).await.unwrap();
    let cfg = NodeConfig {
        id: "w".into(),
        name: "w".into(),
        address: None,
        cores: 2,
        thread_budget: budget,
        memory_budget_bytes: 1 << 30,
        gpu: false,
        simulated_gpu: None,
        max_queue_delay: Duration::from_micros(500),
        inline_below: Duration::from_micros(200),
        gather_rows: true,
        queue_capacity_rows: 4096,
        evict_idle_after: Duration::from_secs(30),
    };
    (dir, Arc::new(WorkerNode::new(cfg, Arc::new(store))))
}

fn request() -> LoadRequest {
    LoadRequest {
        variant_id: "v".into(),
        variant_name: "mlp-m".into(),
        object_key: "m.onnx".into(),
        hardware: HardwareKind::Cpu,
        threads: 1,
        max_batch: 8,
        memory_bytes: 1 << 20,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_swaps_sessions_while_queries_keep_being_served() {
    if !runtime_ready() {
        return;
    }
    let (_dir, node) = node(3).await;
    node.load(request()).await.unwrap();
    assert_eq!(node.threads_of("v"), Some(1));

    // Queries in a loop while the instance is resized twice.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (node, stop) = (node.clone(), stop.clone());
            tokio::spawn(async move {
                let mut served = 0usize;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let out = node.infer("v", rows(3)).await.unwrap();
                    assert_eq!(out[0].shape[0], 3);
                    served += 1;
                }
                served
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = node.resize("v", 2).await.unwrap();
    assert!(r.load_ms > 0.0);
    assert_eq!(node.threads_of("v"), Some(2));
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Back to one thread (Themis' return to base threads).
    node.resize("v", 1).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for c in clients {
        total += c.await.unwrap();
    }
    assert!(total > 0);
    let beat = node.heartbeat();
    assert_eq!(beat.instances.len(), 1);
    assert_eq!(beat.instances[0].threads, 1);
    assert_eq!(beat.threads_used, 1);

    // Same thread count: nothing to do.
    assert_eq!(node.resize("v", 1).await.unwrap().load_ms, 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_respects_the_budget_and_needs_a_loaded_variant() {
    if !runtime_ready() {
        return;
    }
    let (_dir, node) = node(2).await;
    assert!(matches!(
        node.resize("v", 2).await,
        Err(WorkerError::NotLoaded(_))
    ));
    node.load(request()).await.unwrap();
    let err = node.resize("v", 3).await.unwrap_err();
    assert!(matches!(err, WorkerError::BudgetExceeded { .. }), "{err}");
    // The instance still serves at its old size.
    assert_eq!(node.threads_of("v"), Some(1));
    node.infer("v", rows(1)).await.unwrap();
    node.resize("v", 2).await.unwrap();
    assert_eq!(node.heartbeat().threads_used, 2);
}
