//! Shared helpers of the executors integration tests.
#![allow(dead_code)] // each test binary uses a different subset

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Once;

use infaas_core::Tensor;
use infaas_executors::engine::{Engine, SessionConfig};
use infaas_executors::runtime::init_runtime;

/// Whether ONNX Runtime could be loaded (`ORT_DYLIB_PATH` or the default location).
/// Missing library: a failure when `CI=true`, otherwise a skip notice.
pub fn runtime_ready() -> bool {
    match init_runtime(None) {
        Ok(_) => true,
        Err(e) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("ONNX Runtime is required when CI=true: {e}")
        }
        Err(e) => {
            // Straight to stderr: the test harness captures eprintln! of passing tests.
            static NOTICE: Once = Once::new();
            NOTICE.call_once(|| {
                let _ = writeln!(std::io::stderr(), "SKIPPED (no ONNX Runtime): {e}");
            });
            false
        }
    }
}

pub fn zoo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join("zoo")
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
        .join(name)
}

pub fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

pub fn load(path: &Path) -> Engine {
    Engine::load(read(path), &SessionConfig::default())
        .unwrap_or_else(|e| panic!("loading {}: {e}", path.display()))
}

pub fn npz(path: &Path) -> Vec<Tensor> {
    infaas_protocol::npz::read_npz(&read(path))
        .unwrap_or_else(|e| panic!("reading {}: {e:?}", path.display()))
}

/// Every `.onnx` file of the zoo, sorted.
pub fn zoo_models() -> Vec<PathBuf> {
    let mut models: Vec<PathBuf> = std::fs::read_dir(zoo())
        .expect("zoo/ exists")
        .map(|e| e.expect("zoo entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .collect();
    models.sort();
    assert!(!models.is_empty(), "no models in {}", zoo().display());
    models
}

/// The zoo's digits models (they all take rows of `digits-val.npz`, split in two for the
/// two-input one), sorted.
pub fn digits_models() -> Vec<PathBuf> {
    let models: Vec<PathBuf> = zoo_models()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("digits-"))
        })
        .collect();
    assert!(
        !models.is_empty(),
        "no digits models in {}",
        zoo().display()
    );
    models
}

/// The validation set made for a zoo model.
pub fn validation_file(model: &Path) -> PathBuf {
    let stem = model
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or_default();
    match stem {
        "digits-two-input" => zoo().join("digits-two-input-val.npz"),
        "cifar-resnet" => zoo().join("cifar-val.npz"),
        "text-encoder" => zoo().join("text-val.npz"),
        _ => zoo().join("digits-val.npz"),
    }
}
