//! Variant generation: which model files a registered model gets (ORT-optimised, INT8,
//! FP16) and which execution settings (hardware, intra-op threads, max batch) each file
//! is offered with.

use std::path::Path;

use infaas_core::{FileKind, HardwareKind};
use infaas_onnx::{quantize_dynamic_int8, OnnxModel, QuantizeOptions};

use crate::engine::{Engine, EngineError, Hardware, OptLevel, SessionConfig};

/// Batch sizes offered and profiled: powers of two from 1 to 64.
pub const BATCH_SIZES: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// The hardware a cluster offers to new variants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Inventory {
    /// CPU cores of the largest worker (caps intra-op threads).
    pub cpu_cores: usize,
    /// Whether any worker has a usable GPU.
    pub gpu: bool,
}

/// What to generate for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VariantPlan {
    /// Derived files to build, beside the source file.
    pub derived: Vec<FileKind>,
    pub hardware: Vec<HardwareKind>,
    /// Intra-op thread counts for CPU variants (GPU variants use one).
    pub threads: Vec<usize>,
    pub batches: Vec<usize>,
}

/// Plans the variants: CPU thread counts 1, 2, 4, ... up to the cores (and the core count
/// itself), batch sizes up to `max_batch`, FP16 and GPU variants only where a GPU exists.
pub fn plan(inv: &Inventory, max_batch: Option<usize>) -> VariantPlan {
    let cores = inv.cpu_cores.max(1);
    let mut threads: Vec<usize> = std::iter::successors(Some(1usize), |t| t.checked_mul(2))
        .take_while(|&t| t <= cores)
        .collect();
    if threads.last() != Some(&cores) {
        threads.push(cores);
    }
    let cap = max_batch.unwrap_or(usize::MAX).max(1);
    let batches: Vec<usize> = BATCH_SIZES.iter().copied().filter(|&b| b <= cap).collect();
    let mut derived = vec![FileKind::Optimized, FileKind::Int8];
    let mut hardware = vec![HardwareKind::Cpu];
    if inv.gpu {
        derived.push(FileKind::Fp16);
        hardware.push(HardwareKind::Gpu);
    }
    VariantPlan {
        derived,
        hardware,
        threads,
        batches,
    }
}

/// Whether a file kind runs on a hardware kind: INT8 (DynamicQuantizeMatMul) has CPU
/// kernels only; FP16 is for GPUs.
pub fn runs_on(kind: FileKind, hw: HardwareKind) -> bool {
    !matches!(
        (kind, hw),
        (FileKind::Int8, HardwareKind::Gpu) | (FileKind::Fp16, HardwareKind::Cpu)
    )
}

/// Why a derived file could not be built.
#[derive(Debug, thiserror::Error)]
pub enum GenerateError {
    #[error("cannot parse the model: {0}")]
    Parse(#[source] infaas_onnx::OnnxError),
    #[error("INT8 quantisation failed: {0}")]
    Quantize(#[source] infaas_onnx::OnnxError),
    #[error("FP16 conversion failed: {0}")]
    Fp16(#[source] infaas_onnx::OnnxError),
    #[error("ONNX Runtime could not optimise the model: {0}")]
    Optimize(#[source] EngineError),
    #[error("I/O error while building the {kind} file: {source}")]
    Io {
        kind: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The outcome of building one derived file.
#[derive(Debug)]
pub enum Built {
    File(Vec<u8>),
    /// The transformation does not apply to this model (e.g. no MatMul weights to quantise).
    NotApplicable(String),
}

/// Builds the derived file of `kind` from the source model. `workdir` holds temporary files.
pub fn build_file(kind: FileKind, source: &[u8], workdir: &Path) -> Result<Built, GenerateError> {
    match kind {
        FileKind::Source => Ok(Built::File(source.to_vec())),
        FileKind::Optimized => {
            // Extended (level 2) optimisations are portable across CPUs; `All` may bake in
            // hardware-specific layouts.
            let out = workdir.join(format!("optimized-{}.onnx", std::process::id()));
            let cfg = SessionConfig {
                intra_threads: 1,
                optimization: OptLevel::Extended,
                hardware: Hardware::Cpu,
                optimized_model_out: Some(out.clone()),
                simulated: None,
            };
            let engine = Engine::load(source.to_vec(), &cfg).map_err(GenerateError::Optimize)?;
            drop(engine);
            let bytes = std::fs::read(&out).map_err(|source| GenerateError::Io {
                kind: "optimized",
                source,
            })?;
            let _ = std::fs::remove_file(&out);
            Ok(Built::File(bytes))
        }
        FileKind::Int8 => {
            let model = OnnxModel::parse(source).map_err(GenerateError::Parse)?;
            let (q, report) = quantize_dynamic_int8(&model, &QuantizeOptions::default())
                .map_err(GenerateError::Quantize)?;
            if report.quantized_nodes == 0 {
                let why = if report.skipped.is_empty() {
                    "the model has no MatMul or Gemm with constant weights".to_string()
                } else {
                    format!(
                        "no weight could be quantised ({})",
                        report.skipped.join("; ")
                    )
                };
                return Ok(Built::NotApplicable(why));
            }
            Ok(Built::File(q.to_bytes()))
        }
        FileKind::Fp16 => {
            let model = OnnxModel::parse(source).map_err(GenerateError::Parse)?;
            let f = infaas_onnx::convert_fp16(&model).map_err(GenerateError::Fp16)?;
            Ok(Built::File(f.to_bytes()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_on_two_cores_without_gpu() {
        let p = plan(
            &Inventory {
                cpu_cores: 2,
                gpu: false,
            },
            None,
        );
        assert_eq!(p.threads, vec![1, 2]);
        assert_eq!(p.batches, BATCH_SIZES.to_vec());
        assert_eq!(p.derived, vec![FileKind::Optimized, FileKind::Int8]);
        assert_eq!(p.hardware, vec![HardwareKind::Cpu]);
    }

    #[test]
    fn plan_caps_batches_and_adds_gpu_kinds() {
        let p = plan(
            &Inventory {
                cpu_cores: 6,
                gpu: true,
            },
            Some(10),
        );
        assert_eq!(p.threads, vec![1, 2, 4, 6]);
        assert_eq!(p.batches, vec![1, 2, 4, 8]);
        assert!(p.derived.contains(&FileKind::Fp16));
        assert!(p.hardware.contains(&HardwareKind::Gpu));
        assert!(!runs_on(FileKind::Int8, HardwareKind::Gpu));
        assert!(!runs_on(FileKind::Fp16, HardwareKind::Cpu));
    }
}
