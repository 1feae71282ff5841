//! A worker node: it holds variant instances (an ONNX Runtime engine plus a dynamic
//! batcher each) within a thread and memory budget, loads variant files from the object
//! store on command, and reports per-instance figures for heartbeats.
//!
//! The same node runs embedded in `infaas serve` and in a separate `infaas worker` process
//! ([`server`]); the controller reaches either through the [`Worker`] trait ([`client`] for
//! the remote one).

pub mod call;
pub mod client;
pub mod node;
pub mod server;
pub mod wire;

pub use call::{CallError, Worker};
pub use client::RemoteWorker;
pub use node::{NodeConfig, WorkerError, WorkerNode};
pub use wire::{Heartbeat, HeartbeatAnswer, InstanceReport, LoadRequest, LoadedReport, WorkerInfo};
