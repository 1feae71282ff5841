//! The other v2 documents: server metadata (`GET /v2`), model metadata
//! (`GET /v2/models/{name}[/versions/{v}]`) and error bodies.

use infaas_core::DataType;
use serde_json::{json, Value};

/// The extension name a server supporting binary tensor data must report.
pub const BINARY_TENSOR_DATA: &str = "binary_tensor_data";

/// `{"name", "version", "extensions"}`; `binary_tensor_data` is always listed
/// because this crate implements it.
pub fn server_metadata(name: &str, version: &str, extensions: &[&str]) -> Value {
    let mut all: Vec<&str> = Vec::with_capacity(extensions.len() + 1);
    for &e in extensions.iter().chain(&[BINARY_TENSOR_DATA]) {
        if !all.contains(&e) {
            all.push(e);
        }
    }
    json!({ "name": name, "version": version, "extensions": all })
}

/// `{"name", "versions", "platform", "inputs", "outputs"}`; each tensor is
/// `(name, datatype, shape)` with `-1` for a variable dimension.
pub fn model_metadata(
    name: &str,
    versions: &[&str],
    platform: &str,
    inputs: &[(&str, DataType, &[i64])],
    outputs: &[(&str, DataType, &[i64])],
) -> Value {
    let tensors = |ts: &[(&str, DataType, &[i64])]| -> Vec<Value> {
        ts.iter()
            .map(|(n, dt, shape)| json!({ "name": n, "datatype": dt.as_str(), "shape": shape }))
            .collect()
    };
    json!({
        "name": name,
        "versions": versions,
        "platform": platform,
        "inputs": tensors(inputs),
        "outputs": tensors(outputs),
    })
}

/// The v2 error body `{"error": "..."}` (what `tritonclient` reads on any non-200).
pub fn error_body(message: &str) -> Value {
    json!({ "error": message })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_metadata_always_lists_binary_tensor_data() {
        assert_eq!(
            server_metadata("infaas", "0.1.0", &[]),
            json!({"name": "infaas", "version": "0.1.0", "extensions": ["binary_tensor_data"]})
        );
        assert_eq!(
            server_metadata(
                "infaas",
                "0.1.0",
                &["model_repository", "binary_tensor_data"]
            )["extensions"],
            json!(["model_repository", "binary_tensor_data"])
        );
    }

    #[test]
    fn model_metadata_document() {
        let m = model_metadata(
            "resnet",
            &["1", "2"],
            "onnxruntime_onnx",
            &[("input", DataType::Fp32, &[-1, 3, 224, 224])],
            &[("label", DataType::Int64, &[-1])],
        );
        assert_eq!(
            m,
            json!({
                "name": "resnet",
                "versions": ["1", "2"],
                "platform": "onnxruntime_onnx",
                "inputs": [{"name": "input", "datatype": "FP32", "shape": [-1, 3, 224, 224]}],
                "outputs": [{"name": "label", "datatype": "INT64", "shape": [-1]}],
            })
        );
    }

    #[test]
    fn error_document() {
        assert_eq!(
            error_body("no such model"),
            json!({"error": "no such model"})
        );
    }
}
