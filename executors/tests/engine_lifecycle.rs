//! The engine thread's lifetime. A test binary of its own: it counts this process's
//! threads, which other tests' engines would disturb.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use infaas_executors::runtime::{gpu_available, init_runtime};

/// Threads of this process named like engine threads (`/proc/self/task/*/comm`).
fn engine_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim() == "infaas-engine")
        .count()
}

#[test]
fn dropping_the_last_handle_stops_the_thread() {
    if !runtime_ready() {
        return;
    }
    // Later calls return the library chosen first, whatever they pass.
    let first = init_runtime(None).unwrap();
    assert_eq!(
        init_runtime(Some("/elsewhere/lib.so".as_ref())).unwrap(),
        first
    );
    if !cfg!(feature = "cuda") {
        assert!(!gpu_available());
    }

    assert_eq!(engine_threads(), 0);
    let engine = load(&zoo().join("digits-logreg.onnx"));
    let clone = engine.clone();
    assert_eq!(engine_threads(), 1);
    drop(engine);
    assert_eq!(engine_threads(), 1, "a clone still holds the session");
    drop(clone);
    assert_eq!(engine_threads(), 0, "the thread ends with the last handle");

    // A failed load leaves no thread behind either.
    assert!(infaas_executors::engine::Engine::load(vec![1, 2, 3], &Default::default()).is_err());
    assert_eq!(engine_threads(), 0);
}
