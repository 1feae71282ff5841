//! Execution of ONNX models: validation sets (NPZ), ONNX Runtime engines, accuracy and profiling.

pub mod accuracy;
pub mod batcher;
pub mod calibration;
mod denormals;
pub mod engine;
pub mod profiler;
pub mod runtime;
pub mod simulated;
pub mod validation;
pub mod variants;
