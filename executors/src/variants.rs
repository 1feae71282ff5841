//! Variant generation: which model files a registered model gets (ORT-optimised, INT8,
//! FP16) and which execution settings (hardware, intra-op threads, max batch) each file
//! is offered with.
//!
//! # INT8
//!
//! [`build_int8`] picks the scheme per model:
//!
//! * a model with a quantisable `Conv` gets **static** INT8 in QDQ format
//!   ([`infaas_onnx::quantize_static_int8`]): activation ranges calibrated on (up to 512
//!   rows of) the model's validation set ([`crate::calibration`]), int8 per-channel
//!   weights, int32 biases; ONNX Runtime turns it into `QLinearConv`, `QLinearAdd`,
//!   `QLinearGlobalAveragePool`, `QGemm`. Dynamic quantisation has no convolution kernel:
//!   on a CNN it quantises the classifier only (1 of the zoo ResNet's 22 weighted nodes)
//!   and the file is no faster. MatMul/Gemm nodes whose input is not quantised by then
//!   (outside the convolutions' integer region) get dynamic quantisation on top.
//! * a model with only `MatMul` / `Gemm` weights keeps **dynamic** INT8
//!   (`DynamicQuantizeMatMul`, [`infaas_onnx::quantize_dynamic_int8`]): no calibration,
//!   activation ranges taken per run. On the zoo's text encoder static QDQ of every
//!   projection (`MatMulMode::Always`) measured the same top-1 agreement (0.984-0.988 on
//!   2048 held-out rows, both) and latency within a few percent, so the simpler scheme
//!   stays. (Dynamic scales follow each run's whole input, so a row's answer can depend
//!   on the rows batched with it: the encoder's agreement on its 256 validation rows is
//!   0.973-0.988 over batch sizes 1 to 256.)
//!
//! Both use 7-bit weights (`|w_q| <= 63`) so that a file's accuracy does not depend on
//! the CPU: ONNX Runtime's u8 x s8 kernels on AVX2 CPUs without VNNI add pairs of
//! products in a saturating int16, which full int8 weights overflow (see
//! `scripts/test-avx2.sh`, which runs the INT8 tests under an AVX2-only CPU model).

use std::path::Path;

use infaas_core::{FileKind, HardwareKind};
use infaas_onnx::{
    plan_static_int8, quantize_dynamic_int8, quantize_static_int8, OnnxModel, QuantizeOptions,
    QuantizeReport, StaticQuantizeOptions, StaticQuantizeReport,
};

use crate::calibration::{calibrate, CalibrationError, CalibrationOptions};
use crate::engine::{Engine, EngineError, Hardware, OptLevel, SessionConfig};
use crate::validation::ValidationSet;

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

/// Whether a file kind runs on a hardware kind: INT8 (DynamicQuantizeMatMul, and the
/// integer kernels ONNX Runtime fuses QDQ into) runs on CPUs only; FP16 is for GPUs.
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
    #[error("INT8 calibration failed: {0}")]
    Calibration(#[source] CalibrationError),
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
/// `calibration` is the model's validation set (already matched to its signature): the
/// INT8 file of a convolutional model is calibrated on it, and is not applicable without
/// it (see [`build_int8`]). Other kinds ignore it.
pub fn build_file(
    kind: FileKind,
    source: &[u8],
    workdir: &Path,
    calibration: Option<&ValidationSet>,
) -> Result<Built, GenerateError> {
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
        FileKind::Int8 => Ok(match build_int8(source, calibration)? {
            Int8Build::Static { bytes, .. } | Int8Build::Dynamic { bytes, .. } => {
                Built::File(bytes)
            }
            Int8Build::NotApplicable(why) => Built::NotApplicable(why),
        }),
        FileKind::Fp16 => {
            let model = OnnxModel::parse(source).map_err(GenerateError::Parse)?;
            let f = infaas_onnx::convert_fp16(&model).map_err(GenerateError::Fp16)?;
            Ok(Built::File(f.to_bytes()))
        }
    }
}

/// An INT8 file and how it was made.
#[derive(Debug)]
pub enum Int8Build {
    /// Static QDQ quantisation, calibrated on the validation set; MatMul/Gemm nodes
    /// outside the convolutions' integer region then quantised dynamically (`dynamic`).
    Static {
        bytes: Vec<u8>,
        report: StaticQuantizeReport,
        dynamic: QuantizeReport,
    },
    /// Dynamic quantisation of MatMul/Gemm weights (`DynamicQuantizeMatMul`).
    Dynamic {
        bytes: Vec<u8>,
        report: QuantizeReport,
    },
    /// Nothing to quantise, with the reason.
    NotApplicable(String),
}

/// Options of the platform's INT8 files: 7-bit weights, per channel.
pub fn int8_options() -> (StaticQuantizeOptions, QuantizeOptions) {
    (
        StaticQuantizeOptions {
            reduce_range: true,
            ..StaticQuantizeOptions::default()
        },
        QuantizeOptions {
            reduce_range: true,
            ..QuantizeOptions::default()
        },
    )
}

/// Builds the INT8 file of a model: static QDQ calibrated on `calibration` when it has a
/// quantisable `Conv` (not applicable without a calibration set), else dynamic MatMul/Gemm
/// quantisation (see the module docs). A calibration set that does not fit the model is a
/// [`GenerateError::Calibration`] naming the input.
pub fn build_int8(
    source: &[u8],
    calibration: Option<&ValidationSet>,
) -> Result<Int8Build, GenerateError> {
    let model = OnnxModel::parse(source).map_err(GenerateError::Parse)?;
    let (static_opts, dynamic_opts) = int8_options();
    let plan = plan_static_int8(&model, &static_opts).map_err(GenerateError::Quantize)?;
    let has_conv = plan.nodes.get("Conv").copied().unwrap_or(0) > 0;
    if has_conv {
        let Some(set) = calibration else {
            // Dynamic quantisation would only touch the classifier: no faster, less accurate.
            return Ok(Int8Build::NotApplicable(
                "static INT8 of the model's convolutions needs a calibration set".to_string(),
            ));
        };
        let ranges = calibrate(&model, &plan.tensors, set, &CalibrationOptions::default())
            .map_err(GenerateError::Calibration)?;
        let (q, report) =
            quantize_static_int8(&model, &ranges, &static_opts).map_err(GenerateError::Quantize)?;
        // MatMul/Gemm weights the static pass left float (inputs outside the integer
        // region, e.g. attention projections next to a conv stem).
        let (q, dynamic) =
            quantize_dynamic_int8(&q, &dynamic_opts).map_err(GenerateError::Quantize)?;
        return Ok(Int8Build::Static {
            bytes: q.to_bytes(),
            report,
            dynamic,
        });
    }
    let (q, report) =
        quantize_dynamic_int8(&model, &dynamic_opts).map_err(GenerateError::Quantize)?;
    if report.quantized_nodes > 0 {
        return Ok(Int8Build::Dynamic {
            bytes: q.to_bytes(),
            report,
        });
    }
    // Why the static rewrite found nothing (e.g. an old opset, Conv weights that are not
    // constants), then why the dynamic one did not.
    let mut why: Vec<String> = plan
        .skipped
        .into_iter()
        .filter(|w| !w.contains("not quantised") && !w.contains("no Conv, MatMul or Gemm"))
        .collect();
    if report.skipped.is_empty() {
        if why.is_empty() {
            why.push("the model has no Conv, MatMul or Gemm with constant float32 weights".into());
        }
    } else {
        why.push(format!(
            "no MatMul/Gemm weight could be quantised ({})",
            report.skipped.join("; ")
        ));
    }
    Ok(Int8Build::NotApplicable(why.join("; ")))
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
