//! The infaas control plane: everything that runs without an HTTP request. The cluster view
//! and serving catalog, the query path ([`serving`]), the registry's profiling pipeline, the
//! offline-jobs runner, the autoscaling loops, usage metering, recorded traffic and what-if
//! runs on the simulator, and tenancy (tokens, keys, limits). It speaks in [`Error`]; the
//! HTTP edge (`infaas-api`) maps that to statuses.

pub mod autoscaler;
pub mod cluster;
pub mod config;
pub mod error;
pub mod exchange;
pub mod forecasts;
pub mod jobs;
pub mod leader;
pub mod loops;
pub mod pipelines;
pub mod platform;
pub mod registry;
pub mod serving;
pub mod tenancy;
pub mod traffic;
pub mod usage;
pub mod whatif;

pub use error::{Error, Result};
pub use platform::{ControlPlane, Parts};
