//! What-if planning (`/v1/whatif`, `/v1/traces/recorded`): a trace and policies in, a
//! SIMULATED run out. Nothing in a run is measured on the platform: the simulator replays the
//! trace over the profiles the platform measured for the tenant's variants.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Where a run's trace comes from: exactly one of `recorded`, `csv` or `generate`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TraceSource {
    /// The tenant's own traffic as the platform recorded it (`GET /v1/traces/recorded`).
    Recorded(RecordedTrace),
    /// A trace in the simulator's CSV format: header `time_ms,app,slo_ms,min_accuracy`, one
    /// query per line. At most `whatif.max_csv_bytes` bytes (default 8 MiB).
    Csv(String),
    /// A workload generator, `KIND:key=value,...`, e.g.
    /// `poisson:rate=50,duration=60,app=digits,slo=100` (kinds `poisson`, `gamma`, `step`,
    /// `burst`, `diurnal`; docs/simulator.md, "Workloads"); at most 1,000 characters.
    Generate(String),
}

/// The tenant's recorded traffic over the last `minutes`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RecordedTrace {
    /// One application (default: every application of the tenant).
    #[schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")]
    pub app: Option<String>,
    /// How far back, in minutes (the platform keeps `traffic_horizon_minutes`, default 60).
    #[schema(minimum = 1, maximum = 10080)]
    pub minutes: u32,
}

/// The policies a run may compare (documentation of `policies`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WhatIfPolicyName {
    StaticPeak,
    Horizontal,
    InfaasGreedy,
    InfaasExact,
}

/// `POST /v1/whatif`: simulate a trace on the tenant's applications under some policies.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WhatIfRequest {
    pub trace: TraceSource,
    /// Policies to compare, each at most once, in the order given.
    #[schema(value_type = Vec<WhatIfPolicyName>, min_items = 1, max_items = 4)]
    pub policies: Vec<String>,
    /// CPU workers of the simulated cluster (default: the live CPU workers, or 1 when the
    /// cluster would otherwise have no worker). The cluster needs at least one worker:
    /// `cpu_workers` 0 with `gpu_workers` 0 (given, or the live GPU workers when not given)
    /// is refused with 422, naming both.
    #[schema(minimum = 0, maximum = 256)]
    pub cpu_workers: Option<u32>,
    /// Cores (intra-op threads) a simulated worker offers (default: the most cores of a live
    /// worker).
    #[schema(minimum = 1, maximum = 1024)]
    pub cpu_cores: Option<u32>,
    /// GPU workers of the simulated cluster (default: the live GPU workers). At least one
    /// worker, CPU or GPU: with `cpu_workers` also 0 the run is refused with 422.
    #[schema(minimum = 0, maximum = 256)]
    pub gpu_workers: Option<u32>,
    /// Headroom the platform's autoscaler keeps in the run (default: the server's
    /// `autoscale.slack`).
    #[schema(minimum = 1.0, maximum = 100.0)]
    pub slack: Option<f64>,
    /// Most CPU workers the platform's worker autoscaler may run in the simulation (default:
    /// `cpu_workers`, none is added); workers it adds take `worker_start_s` to join.
    #[schema(minimum = 0, maximum = 256)]
    #[serde(default)]
    pub max_cpu_workers: Option<u32>,
    /// Most GPU workers, likewise (default: `gpu_workers`).
    #[schema(minimum = 0, maximum = 256)]
    #[serde(default)]
    pub max_gpu_workers: Option<u32>,
    /// Seconds from a worker's start until it takes instances (default 30).
    #[schema(minimum = 0.0, maximum = 3600.0)]
    #[serde(default)]
    pub worker_start_s: Option<f64>,
    /// The request path outside the instance (HTTP, JSON, routing, the worker call) as an
    /// empirical distribution in ms: every simulated query's latency gets one draw. For
    /// instance latencies measured on the real server with one query at a time
    /// (`infaas loadgen --rate 0 --json`, `percentiles_ms`). Default: none.
    #[schema(max_items = 10000)]
    #[serde(default)]
    pub request_overhead_ms: Option<Vec<f64>>,
    /// Core time, in ms, each query takes on the cores of the worker serving it besides its
    /// instance's run: the HTTP edge (and clients) sharing that worker's cores, as on one
    /// machine serving its own requests. While the threads of the instances running a batch
    /// there and this load (the worker's recent query rate times this figure) exceed its
    /// cores, CPU batches run slower in proportion. Measure it as the CPU time the server and
    /// its clients spend per request of a model that does no work (same inputs and outputs).
    /// Default 0: a worker's cores are its instances' alone.
    #[schema(minimum = 0.0, maximum = 1000.0)]
    #[serde(default)]
    pub request_cpu_ms: Option<f64>,
    /// The platform's policies (`infaas_greedy`, `infaas_exact`) start with no instance
    /// loaded, as a server that has just started, and the first queries' selection loads what
    /// they need: the replay of a trace sent to a fresh server. Default false: they start with
    /// what the platform holds after serving the trace's opening traffic. The baselines
    /// provision as always.
    #[serde(default)]
    pub cold_start: Option<bool>,
}

/// The trace a run replays.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfTrace {
    /// `recorded`, `csv` or `generate`.
    pub source: String,
    /// The generator spec, `recorded traffic of ... over N minutes`, or `uploaded CSV`.
    pub description: String,
    pub queries: u64,
    pub apps: Vec<String>,
    /// Time of the last arrival, seconds.
    pub duration_s: f64,
}

/// The simulated cluster.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfCluster {
    pub cpu_workers: u32,
    pub cpu_cores: u32,
    pub gpu_workers: u32,
    pub slack: f64,
    /// The tenant's profiled variants the run could use.
    pub variants: u64,
}

/// How far a policy's simulation has got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfProgress {
    pub policy: String,
    /// Queries simulated so far.
    pub done: u64,
    /// Queries of the trace.
    pub total: u64,
}

/// A run's totals under one policy (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfSummary {
    pub queries: u64,
    /// Fraction of all queries answered within their SLO (dropped ones count as misses).
    pub slo_attainment: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Price of every resource held over the run, at the server's `[prices]`.
    pub cost_usd: f64,
    /// Mean accuracy of the variants that answered.
    pub mean_accuracy: Option<f64>,
    /// Queries no variant could take.
    pub dropped: u64,
    /// Scaling changes over the run.
    pub actions: u64,
    /// Simulated queries per second of wall time.
    pub sim_queries_per_s: f64,
}

/// One application's totals under one policy (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfAppSummary {
    pub app: String,
    pub queries: u64,
    pub slo_attainment: f64,
    pub p99_ms: Option<f64>,
    pub mean_accuracy: Option<f64>,
    pub dropped: u64,
}

/// One simulated second under one policy.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfPoint {
    pub second: u64,
    pub arrivals: u64,
    pub slo_attainment: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub cost_per_s: f64,
    pub mean_accuracy: Option<f64>,
    pub cpu_instances: u32,
    pub gpu_instances: u32,
    /// Live simulated workers without and with a GPU at the end of the second.
    #[serde(default)]
    pub cpu_workers: u32,
    #[serde(default)]
    pub gpu_workers: u32,
    pub actions: u32,
    pub dropped: u64,
}

/// What one policy did with the trace (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfPolicyResult {
    pub policy: String,
    pub summary: WhatIfSummary,
    /// Scaling actions over the run by kind (`replicate`, `upgrade`, `migrate`, ...).
    #[serde(default)]
    pub actions_by_kind: std::collections::BTreeMap<String, u64>,
    pub apps: Vec<WhatIfAppSummary>,
    /// Per simulated second.
    pub series: Vec<WhatIfPoint>,
}

/// A what-if run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct WhatIfRun {
    pub id: String,
    /// `queued`, `running`, `succeeded` or `failed` (with `error`).
    pub status: String,
    /// Always true: the results are simulated over measured profiles, not measured.
    pub simulated: bool,
    pub trace: WhatIfTrace,
    pub policies: Vec<String>,
    pub cluster: WhatIfCluster,
    /// Per policy, in the order simulated.
    pub progress: Vec<WhatIfProgress>,
    pub error: Option<String>,
    pub created_at_ms: i64,
    pub started_at_ms: Option<i64>,
    pub finished_at_ms: Option<i64>,
    /// Per policy, once the run has succeeded (`GET /v1/whatif/{id}` only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub results: Option<Vec<WhatIfPolicyResult>>,
}

/// The tenant's runs, newest first (without results).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct WhatIfRunList {
    pub runs: Vec<WhatIfRun>,
}
