//! Domain types shared by every infaas crate. Depends on no framework.

pub mod tenant;
pub mod tensor;
pub mod time;

pub use tenant::{validate_name, ApiKey, Quotas, Role, Tenant};
pub use tensor::{DataType, Tensor, TensorData, TensorError};
