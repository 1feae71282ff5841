//! The model registry: accepting registrations (upload, validation, storage) and the
//! background work that turns a registered model into profiled variants.

pub mod pipeline;
pub mod upload;

pub use pipeline::Registry;
