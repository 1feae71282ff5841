//! Domain types shared by every infaas crate. Depends on no framework.

pub mod model;
pub mod pipeline;
pub mod stats;
pub mod tenant;
pub mod tensor;
pub mod time;
pub mod trace;

pub use model::{
    Application, DeclaredMetadata, FileKind, HardwareKind, LatencyPoint, Model, ModelFile,
    ModelStatus, Variant,
};
pub use tenant::{validate_name, ApiKey, Quotas, Role, Tenant};
pub use tensor::{DataType, Tensor, TensorData, TensorError};
