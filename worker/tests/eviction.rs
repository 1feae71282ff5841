//! Idle instances make room: a load that does not fit the worker's thread budget evicts the
//! least recently used instance idle for `evict_idle_after`, never one used more recently, and
//! is refused with the budget named when none is idle that long.
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

fn row() -> Vec<Tensor> {
    let data: Vec<f32> = (0..64).map(|i| (i % 17) as f32 / 16.0).collect();
    vec![Tensor::new("input", vec![1, 64], infaas_core::TensorData::Fp32(data)).unwrap()]
}

/// A worker with room for two one-thread instances that evicts after `idle`.
async fn node(idle: Duration) -> (tempfile::TempDir, Arc<WorkerNode>) {
    let dir = tempfile::tempdir().unwrap();
    let store = LocalDirStore::open(dir.path()).await.unwrap();
    let model =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo/digits-mlp-s.onnx"))
            .unwrap();
    store.put_bytes("m.onnx", model.into()).await.unwrap();
    let cfg = NodeConfig {
        id: "w".into(),
        name: "w".into(),
        address: None,
        cores: 2,
        thread_budget: 2,
        memory_budget_bytes: 1 << 30,
        gpu: false,
        simulated_gpu: None,
        max_queue_delay: Duration::from_micros(500),
        inline_below: Duration::ZERO,
        gather_rows: true,
        queue_capacity_rows: 1024,
        evict_idle_after: idle,
    };
    (dir, Arc::new(WorkerNode::new(cfg, Arc::new(store))))
}

fn request(id: &str) -> LoadRequest {
    LoadRequest {
        variant_id: id.into(),
        variant_name: format!("mlp-s.{id}"),
        object_key: "m.onnx".into(),
        hardware: HardwareKind::Cpu,
        threads: 1,
        max_batch: 8,
        memory_bytes: 1 << 20,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_evicts_the_least_recently_used_idle_instance() {
    if !runtime_ready() {
        return;
    }
    let (_dir, node) = node(Duration::from_millis(300)).await;
    node.load(request("a")).await.unwrap();
    node.load(request("b")).await.unwrap();
    // Both were just used (loaded): nothing is idle long enough, so a third does not fit.
    match node.load(request("c")).await {
        Err(WorkerError::BudgetExceeded { thread_budget, .. }) => assert_eq!(thread_budget, 2),
        other => panic!("expected the budget to refuse the load, got {other:?}"),
    }
    assert!(node.is_loaded("a") && node.is_loaded("b") && !node.is_loaded("c"));
    // Past the idle time, "a" is used again: "b" is now the least recently used idle one.
    tokio::time::sleep(Duration::from_millis(400)).await;
    node.infer("a", row()).await.unwrap();
    node.load(request("c")).await.unwrap();
    assert!(node.is_loaded("a"), "the instance used last stays");
    assert!(!node.is_loaded("b"), "the idle instance was evicted");
    assert!(node.is_loaded("c"));
    let beat = node.heartbeat();
    let mut ids: Vec<&str> = beat
        .instances
        .iter()
        .map(|i| i.variant_id.as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["a", "c"]);
    assert_eq!(beat.threads_used, 2);
    // A load of what is already there evicts nothing.
    node.load(request("a")).await.unwrap();
    assert!(node.is_loaded("a") && node.is_loaded("c"));
}
