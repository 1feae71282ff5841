//! A worker node: it holds variant instances (an ONNX Runtime engine plus a dynamic
//! batcher each) within a thread and memory budget, loads variant files from the object
//! store on command, and reports per-instance figures for heartbeats.
//!
//! The same node runs embedded in `infaas serve` and in a separate `infaas worker` process.

pub mod node;
pub mod wire;

pub use node::{NodeConfig, WorkerError, WorkerNode};
pub use wire::{Heartbeat, InstanceReport, LoadRequest, LoadedReport, WorkerInfo};
