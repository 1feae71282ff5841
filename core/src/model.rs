//! Applications, registered models, their files and variants, and variant profiles.

use serde::{Deserialize, Serialize};

/// Lifecycle of a registered model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ModelStatus {
    /// Accepted; waiting for a worker to generate variants.
    Pending,
    /// Building variant files (graph optimisation, INT8, FP16).
    Generating,
    /// Measuring accuracy and latency of every variant.
    Profiling,
    /// Every variant is profiled; the model serves queries.
    Ready,
    /// Generation or profiling failed; `error` says why.
    Failed,
}

impl ModelStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelStatus::Pending => "pending",
            ModelStatus::Generating => "generating",
            ModelStatus::Profiling => "profiling",
            ModelStatus::Ready => "ready",
            ModelStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<ModelStatus> {
        Some(match s {
            "pending" => ModelStatus::Pending,
            "generating" => ModelStatus::Generating,
            "profiling" => ModelStatus::Profiling,
            "ready" => ModelStatus::Ready,
            "failed" => ModelStatus::Failed,
            _ => return None,
        })
    }

    /// Whether background work is still to be done.
    pub fn in_progress(self) -> bool {
        matches!(
            self,
            ModelStatus::Pending | ModelStatus::Generating | ModelStatus::Profiling
        )
    }
}

/// Metadata the developer may declare at registration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeclaredMetadata {
    /// Output holding the class scores or labels (chosen automatically when absent).
    pub output: Option<String>,
    /// Largest batch the model may be given (caps generated max-batch settings).
    pub max_batch: Option<usize>,
    /// Class names indexed by label (needed when the model outputs string labels).
    pub label_names: Option<Vec<String>>,
    pub description: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Application {
    pub id: String,
    pub tenant_id: String,
    pub name: String,
    pub created_at_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub id: String,
    pub tenant_id: String,
    pub app_id: String,
    pub app: String,
    pub name: String,
    pub task: String,
    pub status: ModelStatus,
    pub error: Option<String>,
    /// Fraction of background work done, in [0, 1].
    pub progress: f64,
    pub progress_detail: Option<String>,
    pub source_key: String,
    pub validation_key: String,
    pub size_bytes: i64,
    pub sha256: String,
    pub declared: DeclaredMetadata,
    /// Input/output signature as JSON (from the model file).
    pub signature: Option<serde_json::Value>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

/// Kinds of model file a model gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// The registered file, unchanged (FP32).
    Source,
    /// ONNX Runtime's graph optimisations applied offline (FP32, shorter load).
    Optimized,
    /// MatMul/Gemm weights quantised to INT8 (dynamic quantisation).
    Int8,
    /// Float tensors converted to FP16 (GPU targets).
    Fp16,
}

impl FileKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::Source => "source",
            FileKind::Optimized => "optimized",
            FileKind::Int8 => "int8",
            FileKind::Fp16 => "fp16",
        }
    }

    pub fn parse(s: &str) -> Option<FileKind> {
        Some(match s {
            "source" => FileKind::Source,
            "optimized" => FileKind::Optimized,
            "int8" => FileKind::Int8,
            "fp16" => FileKind::Fp16,
            _ => return None,
        })
    }

    /// Numeric precision of the file's weights.
    pub fn precision(self) -> &'static str {
        match self {
            FileKind::Source | FileKind::Optimized => "fp32",
            FileKind::Int8 => "int8",
            FileKind::Fp16 => "fp16",
        }
    }

    /// The token used in variant names: `fp32`, `opt`, `int8`, `fp16`.
    pub fn name_token(self) -> &'static str {
        match self {
            FileKind::Source => "fp32",
            FileKind::Optimized => "opt",
            FileKind::Int8 => "int8",
            FileKind::Fp16 => "fp16",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelFile {
    pub id: String,
    pub model_id: String,
    pub kind: FileKind,
    pub object_key: String,
    pub size_bytes: i64,
    /// Top-1 accuracy on the validation set, in [0, 1]; `None` until measured.
    pub accuracy: Option<f64>,
}

/// Hardware a variant runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HardwareKind {
    Cpu,
    Gpu,
}

impl HardwareKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HardwareKind::Cpu => "cpu",
            HardwareKind::Gpu => "gpu",
        }
    }

    pub fn parse(s: &str) -> Option<HardwareKind> {
        match s {
            "cpu" => Some(HardwareKind::Cpu),
            "gpu" => Some(HardwareKind::Gpu),
            _ => None,
        }
    }
}

/// Measured latency of a variant at one batch size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    pub batch: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    pub throughput_per_s: f64,
}

/// A model variant: (model file, hardware, intra-op threads, max batch), with its profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variant {
    pub id: String,
    pub model_id: String,
    pub file_id: String,
    pub name: String,
    pub file_kind: FileKind,
    pub hardware: HardwareKind,
    pub threads: usize,
    pub max_batch: usize,
    /// `pending`, `profiled` or `failed`.
    pub status: String,
    pub accuracy: Option<f64>,
    pub load_ms: Option<f64>,
    pub memory_bytes: Option<i64>,
    pub latency: Vec<LatencyPoint>,
}

impl Variant {
    /// `{model}.{fp32|opt|int8|fp16}.{cpu|gpu}.t{threads}.b{max_batch}`.
    pub fn make_name(
        model: &str,
        kind: FileKind,
        hw: HardwareKind,
        threads: usize,
        max_batch: usize,
    ) -> String {
        format!(
            "{model}.{}.{}.t{threads}.b{max_batch}",
            kind.name_token(),
            hw.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_are_predictable() {
        assert_eq!(
            Variant::make_name("digits-mlp-l", FileKind::Int8, HardwareKind::Cpu, 2, 16),
            "digits-mlp-l.int8.cpu.t2.b16"
        );
    }

    #[test]
    fn enums_round_trip() {
        for s in [
            ModelStatus::Pending,
            ModelStatus::Generating,
            ModelStatus::Profiling,
            ModelStatus::Ready,
            ModelStatus::Failed,
        ] {
            assert_eq!(ModelStatus::parse(s.as_str()), Some(s));
        }
        for k in [
            FileKind::Source,
            FileKind::Optimized,
            FileKind::Int8,
            FileKind::Fp16,
        ] {
            assert_eq!(FileKind::parse(k.as_str()), Some(k));
        }
    }
}
