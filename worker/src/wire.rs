//! Messages between the controller and workers (JSON over HTTP for remote workers).

use infaas_core::HardwareKind;
use infaas_executors::simulated::LatencyProfile;
use serde::{Deserialize, Serialize};

/// What a worker offers, sent when it registers and with every heartbeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerInfo {
    pub id: String,
    pub name: String,
    /// Base URL the controller reaches the worker at (`None` for the embedded worker).
    pub address: Option<String>,
    pub hardware: Vec<HardwareKind>,
    pub cores: usize,
    /// Intra-op threads the worker lets its instances reserve in total.
    pub thread_budget: usize,
    pub memory_budget_bytes: u64,
    /// The latency profile of the worker's simulated GPU, when its GPU is simulated (GPU
    /// variants run on its CPU and answer after the profiled latency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulated_gpu: Option<LatencyProfile>,
}

/// Command to load a variant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadRequest {
    pub variant_id: String,
    pub variant_name: String,
    /// Object-store key of the variant's model file.
    pub object_key: String,
    pub hardware: HardwareKind,
    pub threads: usize,
    pub max_batch: usize,
    /// Profiled memory of the variant (what the budget reserves).
    pub memory_bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadedReport {
    pub variant_id: String,
    pub load_ms: f64,
}

/// Figures of one instance, as the batcher measures them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceReport {
    pub variant_id: String,
    pub variant_name: String,
    pub threads: usize,
    pub max_batch: usize,
    pub memory_bytes: u64,
    pub queue_rows: usize,
    pub in_flight: bool,
    pub requests_total: u64,
    pub rows_total: u64,
    pub errors_total: u64,
    /// Rows served per second over the last window.
    pub qps: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    pub exec_p50_ms: f64,
    pub exec_p99_ms: f64,
    pub batch_histogram: Vec<(usize, u64)>,
    /// Milliseconds since the instance last served a request.
    pub idle_ms: u64,
}

/// Sent by a worker about every second.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub worker: WorkerInfo,
    pub threads_used: usize,
    pub memory_used_bytes: u64,
    /// Busy fraction of the worker's cores over the last interval, in [0, 1] (other
    /// processes' use of the same cores included).
    pub utilisation: f64,
    /// The worker process's own CPU time over the last interval as a fraction of its cores,
    /// in [0, 1]: its instances and, for the embedded worker, the controller's serving edge.
    #[serde(default)]
    pub own_utilisation: f64,
    pub instances: Vec<InstanceReport>,
}

/// A controller's answer to a heartbeat: the URLs of every controller replica of the cluster
/// (the answering one first). The worker reports to each, so every replica sees it.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct HeartbeatAnswer {
    #[serde(default)]
    pub controllers: Vec<String>,
}
