//! Configuration: defaults < optional TOML file < environment (`INFAAS_*`) < command-line flags.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use infaas_core::Quotas;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// Everything the server and the admin commands need to know.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address the HTTP API listens on.
    pub listen: SocketAddr,
    /// Address the Open Inference Protocol's gRPC service listens on; `None` (`"off"` in
    /// the file, the environment and the flag) serves no gRPC.
    #[serde(with = "optional_addr")]
    pub grpc_listen: Option<SocketAddr>,
    /// Directory for the embedded defaults (SQLite file, object directory).
    pub data_dir: PathBuf,
    /// `sqlite://PATH` or `postgres://USER:PASS@HOST/DB`; default: SQLite under `data_dir`.
    pub database_url: Option<String>,
    /// A directory or `s3://bucket/prefix`; default: `data_dir/objects`.
    pub object_store: Option<String>,
    /// Endpoint of an S3-compatible server (path-style addressing is always used).
    pub s3_endpoint: Option<String>,
    /// S3 region; default from the AWS environment, then `us-east-1`.
    pub s3_region: Option<String>,
    pub log_format: LogFormat,
    /// tracing filter, e.g. `info` or `infaas=debug,tower_http=info` (RUST_LOG wins when set).
    pub log_level: String,
    /// HS256 signing secret for access tokens; generated and kept in the database when absent.
    pub jwt_secret: Option<String>,
    /// Lifetime of access tokens in seconds.
    pub jwt_ttl_secs: u64,
    /// Largest JSON request body in bytes.
    pub max_body_bytes: usize,
    /// Largest upload (model file, validation set, job input) in bytes.
    pub max_upload_bytes: u64,
    /// Quotas given to new tenants.
    pub default_quotas: Quotas,
    /// Seconds in-flight requests get to finish after SIGTERM / Ctrl-C.
    pub shutdown_grace_secs: u64,
    /// Path of the ONNX Runtime shared library (else ORT_DYLIB_PATH, else the set-up cache).
    pub ort_dylib_path: Option<PathBuf>,
    /// Shared secret of worker <-> controller traffic.
    pub cluster_token: Option<String>,
    /// CPU cores the embedded worker offers (default: all of the machine's).
    pub worker_cores: Option<usize>,
    /// Timed runs per batch size when profiling a variant.
    pub profile_runs: usize,
    /// Time budget per batch size when profiling a variant, in milliseconds.
    pub profile_max_ms_per_batch: u64,
    /// Whether a registration prunes the variants another variant of the model dominates
    /// (slower at equal or better accuracy on the same hardware, threads and max batch).
    /// Off keeps every variant, for comparing them.
    pub prune_variants: bool,
    /// Address a separate worker process (`infaas worker`) listens on (port 0: any free port).
    pub worker_listen: SocketAddr,
    /// Intra-op threads a worker's instances may reserve in total (default 4 x cores: idle
    /// sessions use no CPU).
    pub worker_thread_budget: Option<usize>,
    /// Memory a worker's instances may reserve (default: half of the available memory).
    pub worker_memory_bytes: Option<u64>,
    /// Longest wait of a partial batch for more rows while its session is busy, in microseconds.
    pub max_queue_delay_us: u64,
    /// A query arriving at an idle instance whose session's latest run took at most this many
    /// microseconds runs on the calling thread, and a batch formed while the session is free
    /// runs on the batcher's thread, each skipping two thread wake-ups (0: never).
    pub inline_max_us: u64,
    /// Under load, a partial batch waits one scheduling round for more rows before it runs,
    /// when the instance's own runs show a run's fixed part worth several rows (small models:
    /// fewer, fuller runs). A request that arrives alone never waits.
    pub gather_rows: bool,
    /// Rows an instance may queue before answering 429.
    pub queue_capacity_rows: usize,
    /// Instances idle this long may be evicted to make room for another load, in seconds.
    pub evict_idle_secs: u64,
    /// A worker whose last heartbeat is older than this is dead, in milliseconds.
    pub heartbeat_timeout_ms: u64,
    /// Hardware prices (cost of queries and of scaling decisions).
    pub prices: Prices,
    /// Mark the dashboard's session cookie `Secure` (set it when the dashboard is served
    /// over HTTPS, e.g. behind a TLS proxy; browsers drop such cookies on plain HTTP).
    pub cookie_secure: bool,
    /// Items per chunk of an offline job (the unit of progress, output and retry).
    pub job_chunk_rows: usize,
    /// Offline jobs run only while online queries keep the cores below this fraction.
    pub job_max_online_utilisation: f64,
    /// A claimed chunk whose runner stops renewing its lease for this long is taken over,
    /// in milliseconds.
    pub job_lease_ms: u64,
    /// Let job webhooks reach loopback, private and link-local addresses (off: a tenant's
    /// webhook cannot probe the platform's own network).
    pub job_webhook_allow_private: bool,
    /// URL the workers and the other controller replicas reach this controller at (default:
    /// `http://` and the address it listens on, `127.0.0.1` for an unspecified address). Workers
    /// learn every replica's URL from the heartbeat answers and report to each.
    pub advertise_url: Option<String>,
    /// Name a worker process registers under (default: `worker-` and a random suffix). The
    /// Kubernetes worker manifest sets it to the pod's name.
    pub worker_name: Option<String>,
    /// URL the controller reaches a worker process at (default: `http://` and the address it
    /// listens on; set it when that address is not reachable as is, e.g. `0.0.0.0` in a pod).
    pub worker_advertise_url: Option<String>,
    /// Latency profile of a simulated GPU the worker offers: `PATH` (a CSV of
    /// `batch_size,p50_ms,p99_ms`) or `PATH#MODEL#ACCEL` (a row set of a Proteus-format
    /// profile CSV). GPU variants on that worker run on the CPU and answer no sooner than the
    /// profile's latency. Unset: no simulated GPU.
    pub simulated_gpu_profile: Option<String>,
    /// Namespace of the Kubernetes worker Deployment (default: the controller's own).
    pub kubernetes_namespace: Option<String>,
    /// Name of the Kubernetes worker Deployment the `kubernetes` provider scales.
    pub kubernetes_worker_deployment: String,
    /// Label selector of that Deployment's pods.
    pub kubernetes_worker_selector: String,
    /// Most replicas the `kubernetes` provider scales the worker Deployment to.
    pub kubernetes_max_workers: u32,
    /// Autoscaling loops and worker provider (see docs/autoscaling.md).
    pub autoscale: AutoscaleConfig,
    /// How long the query path keeps each application's recorded arrivals (per second), in
    /// minutes: what `GET /v1/traces/recorded` and what-if runs can replay.
    pub traffic_horizon_minutes: u64,
    /// Limits of what-if runs (`[whatif]`, docs/simulator.md, "Limits").
    pub whatif: WhatIfConfig,
}

/// Limits of what-if runs (`[whatif]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WhatIfConfig {
    /// Most queries in a run's trace.
    pub max_queries: u64,
    /// Largest uploaded CSV trace, in bytes.
    pub max_csv_bytes: u64,
    /// Longest trace (time of its last arrival), in seconds.
    pub max_duration_s: u64,
    /// Runs a tenant may have queued or running at once; one more is refused with 429.
    pub max_unfinished_per_tenant: usize,
    /// Runs simulated at once on this controller (the others wait, queued); each holds one
    /// core while it runs.
    pub max_parallel_runs: usize,
}

impl Default for WhatIfConfig {
    fn default() -> Self {
        WhatIfConfig {
            max_queries: 250_000,
            max_csv_bytes: 8 * 1024 * 1024,
            max_duration_s: 7200,
            max_unfinished_per_tenant: 1,
            max_parallel_runs: 1,
        }
    }
}

impl WhatIfConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        if self.max_queries == 0
            || self.max_csv_bytes == 0
            || self.max_duration_s == 0
            || self.max_unfinished_per_tenant == 0
            || self.max_parallel_runs == 0
        {
            return Err(ConfigError::Invalid(
                "whatif: max_queries, max_csv_bytes, max_duration_s, max_unfinished_per_tenant and max_parallel_runs must be at least 1".into(),
            ));
        }
        Ok(())
    }
}

/// How the controller starts and stops workers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ValueEnum, Default)]
#[serde(rename_all = "lowercase")]
pub enum WorkerProviderKind {
    /// `infaas worker` child processes on the controller's machine.
    #[default]
    Process,
    /// Pods of a Kubernetes Deployment.
    Kubernetes,
    /// No worker is added or removed (the worker autoscaler only logs its decisions).
    None,
}

impl WorkerProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerProviderKind::Process => "process",
            WorkerProviderKind::Kubernetes => "kubernetes",
            WorkerProviderKind::None => "none",
        }
    }
}

/// Settings of the autoscaling loops (`[autoscale]` in the configuration file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoscaleConfig {
    /// Whether the loops run at all.
    pub enabled: bool,
    /// Period of the model autoscaler (replicate, upgrade, remove, downgrade; vertical
    /// scaling; migration), in milliseconds.
    pub model_interval_ms: u64,
    /// Period of the worker autoscaler, in milliseconds.
    pub worker_interval_ms: u64,
    /// Period of the exact (ILP) planner, in milliseconds (0: never).
    pub exact_interval_ms: u64,
    /// The exact planner's plan is carried out when greedy's objective is worse than the
    /// optimum by more than this fraction.
    pub exact_apply_gap: f64,
    /// Minimum headroom (saturation throughput / load) of a model; below it, scale up.
    pub slack: f64,
    /// Headroom above which a model considers removing replicas or downgrading.
    pub scale_down: f64,
    /// Scale-in stabilisation, in seconds: a model with enough capacity removes or downgrades
    /// only instances that have been in their state this long (scaling up is not held).
    pub scale_in_hold_secs: f64,
    /// Peak hold, in seconds: a model is planned for the highest per-period arrival rate
    /// within this long, so that capacity a burst needed stays until the load has been calm
    /// this long (0: the last period and its smoothed mean only).
    pub peak_hold_secs: f64,
    /// Weight of load time against hardware cost in the objective, per second.
    pub lambda_per_s: f64,
    /// Vertical (more intra-op threads) scaling of overloaded CPU instances first.
    pub vertical: bool,
    /// Most intra-op threads vertical scaling gives one instance.
    pub vertical_max_threads: usize,
    /// Parallel fraction `p` of a model's run time in Amdahl's law, by which vertical scaling
    /// predicts an instance's throughput at more threads (`s(t) = 1 / ((1 - p) + p / t)`)
    /// and judges a resized instance's state. 0.9 suits dense models on dedicated cores; on
    /// cores shared with other work the gain of a thread is smaller.
    pub vertical_parallel_fraction: f64,
    /// Periods of stable load after which scaled-up instances return to base threads.
    pub stable_periods: usize,
    /// Consecutive Interfered periods before an instance is migrated.
    pub migration_periods: usize,
    /// How workers are started and stopped: `process`, `kubernetes` or `none`.
    pub worker_provider: WorkerProviderKind,
    /// Utilisation above which a hardware kind counts as busy on a worker.
    pub worker_utilisation: f64,
    /// Fraction of workers with Overloaded instances above which a worker is added.
    pub overloaded_fraction: f64,
    /// Workers (besides the controller's embedded one) that are never stopped.
    pub min_workers: usize,
    /// Most workers a provider runs.
    pub max_workers: usize,
    /// A provisioned worker without instances for this long is stopped, in seconds.
    pub idle_cooldown_secs: f64,
    /// Time a stopped worker gets to finish its queued requests before it is killed, in
    /// seconds.
    pub worker_stop_grace_secs: u64,
    /// Time a started worker has to send its first heartbeat before it counts as failed, in
    /// seconds.
    pub worker_start_timeout_secs: u64,
    /// An instance whose observed p99 run time exceeds its profiled p99 by this factor is
    /// Interfered (it leaves that state below 80% of the factor).
    pub interference_factor: f64,
    /// The `infaas` binary the process provider starts (default: the running one).
    pub worker_binary: Option<PathBuf>,
    /// Cores each provisioned worker offers (default: all of the machine's).
    pub provisioned_worker_cores: Option<usize>,
}

impl Default for AutoscaleConfig {
    fn default() -> Self {
        AutoscaleConfig {
            enabled: true,
            model_interval_ms: infaas_scheduler::autoscale::DEFAULT_MODEL_PERIOD_MS,
            worker_interval_ms: 2000,
            exact_interval_ms: 30_000,
            exact_apply_gap: 0.05,
            slack: 1.05,
            scale_down: 1.5,
            scale_in_hold_secs: 10.0,
            peak_hold_secs: 60.0,
            lambda_per_s: 0.1,
            vertical: true,
            vertical_max_threads: 16,
            vertical_parallel_fraction: 0.9,
            stable_periods: 20,
            migration_periods: 12,
            worker_provider: WorkerProviderKind::Process,
            worker_utilisation: 0.8,
            overloaded_fraction: 0.8,
            min_workers: 0,
            max_workers: 4,
            idle_cooldown_secs: 300.0,
            worker_stop_grace_secs: 30,
            worker_start_timeout_secs: 60,
            interference_factor: 1.5,
            worker_binary: None,
            provisioned_worker_cores: None,
        }
    }
}

impl AutoscaleConfig {
    /// The model policies' thresholds and weights, as the controller and what-if runs use
    /// them.
    pub fn scaling(&self) -> infaas_scheduler::autoscale::ScalingConfig {
        infaas_scheduler::autoscale::ScalingConfig {
            slack: self.slack,
            scale_down: self.scale_down,
            lambda_per_s: self.lambda_per_s,
            scale_in_hold_ms: self.scale_in_hold_secs * 1000.0,
            peak_hold_ms: self.peak_hold_secs * 1000.0,
        }
    }

    /// The model loop's settings: these thresholds, vertical scaling and migration as
    /// configured, the model interval as its period, forecasts on. The simulator's platform
    /// policy runs the same loop with [`PeriodConfig::platform`] of the same scaling settings,
    /// which these defaults equal.
    ///
    /// [`PeriodConfig::platform`]: infaas_scheduler::autoscale::PeriodConfig::platform
    pub fn loop_config(&self) -> infaas_scheduler::autoscale::LoopConfig {
        use infaas_scheduler::autoscale::{LoopConfig, PeriodConfig};
        let mut period = PeriodConfig::platform(self.scaling());
        period.vertical_enabled = self.vertical;
        period.vertical.max_threads = self.vertical_max_threads;
        period.vertical.parallel_fraction = self.vertical_parallel_fraction;
        period.vertical.stable_periods = self.stable_periods;
        period.migration.periods = self.migration_periods;
        LoopConfig {
            period,
            period_ms: self.model_interval_ms as f64,
            forecast: true,
        }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: &str| Err(ConfigError::Invalid(format!("autoscale: {m}")));
        if self.model_interval_ms < 10 || self.worker_interval_ms < 10 {
            return bad("model_interval_ms and worker_interval_ms must be at least 10");
        }
        if !(self.slack.is_finite() && self.slack >= 1.0) {
            return bad("slack must be a number of at least 1");
        }
        if !(self.scale_down.is_finite() && self.scale_down > self.slack) {
            return bad("scale_down must be above slack");
        }
        if !(self.lambda_per_s.is_finite() && self.lambda_per_s >= 0.0) {
            return bad("lambda_per_s must not be negative");
        }
        if !(self.exact_apply_gap.is_finite() && self.exact_apply_gap >= 0.0) {
            return bad("exact_apply_gap must not be negative");
        }
        for (name, v) in [
            ("worker_utilisation", self.worker_utilisation),
            ("overloaded_fraction", self.overloaded_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return bad(&format!("{name} must be a fraction in [0, 1]"));
            }
        }
        if !(self.scale_in_hold_secs.is_finite() && self.scale_in_hold_secs >= 0.0) {
            return bad("scale_in_hold_secs must not be negative");
        }
        if !(self.peak_hold_secs.is_finite() && self.peak_hold_secs >= 0.0) {
            return bad("peak_hold_secs must not be negative");
        }
        if !(self.idle_cooldown_secs.is_finite() && self.idle_cooldown_secs >= 0.0) {
            return bad("idle_cooldown_secs must not be negative");
        }
        if self.min_workers > self.max_workers {
            return bad("min_workers must not be above max_workers");
        }
        if !(self.interference_factor.is_finite() && self.interference_factor > 1.0) {
            return bad("interference_factor must be above 1");
        }
        if !(self.vertical_parallel_fraction > 0.0 && self.vertical_parallel_fraction <= 1.0) {
            return bad("vertical_parallel_fraction must be a fraction in (0, 1]");
        }
        if self.vertical_max_threads == 0 || self.migration_periods == 0 {
            return bad("vertical_max_threads and migration_periods must be at least 1");
        }
        if self.provisioned_worker_cores == Some(0) {
            return bad("provisioned_worker_cores must be at least 1");
        }
        Ok(())
    }
}

/// Hardware prices in dollars per second (the `[prices]` table; the policies' own type).
pub use infaas_scheduler::Prices;

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            grpc_listen: Some(SocketAddr::from(([127, 0, 0, 1], 8001))),
            data_dir: PathBuf::from("data"),
            database_url: None,
            object_store: None,
            s3_endpoint: None,
            s3_region: None,
            log_format: LogFormat::Text,
            log_level: "info".into(),
            jwt_secret: None,
            jwt_ttl_secs: 3600,
            max_body_bytes: 8 * 1024 * 1024,
            max_upload_bytes: 512 * 1024 * 1024,
            default_quotas: Quotas::default(),
            shutdown_grace_secs: 30,
            ort_dylib_path: None,
            cluster_token: None,
            worker_cores: None,
            profile_runs: 30,
            profile_max_ms_per_batch: 500,
            prune_variants: true,
            worker_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            worker_thread_budget: None,
            worker_memory_bytes: None,
            max_queue_delay_us: 2000,
            inline_max_us: 200,
            gather_rows: true,
            queue_capacity_rows: 2048,
            evict_idle_secs: 30,
            heartbeat_timeout_ms: 3000,
            prices: Prices::default(),
            cookie_secure: false,
            job_chunk_rows: 1024,
            job_max_online_utilisation: 0.4,
            job_lease_ms: 10_000,
            job_webhook_allow_private: false,
            worker_name: None,
            advertise_url: None,
            worker_advertise_url: None,
            simulated_gpu_profile: None,
            kubernetes_namespace: None,
            kubernetes_worker_deployment: "infaas-worker".into(),
            kubernetes_worker_selector: "app.kubernetes.io/name=infaas-worker".into(),
            kubernetes_max_workers: 8,
            autoscale: AutoscaleConfig::default(),
            traffic_horizon_minutes: 60,
            whatif: WhatIfConfig::default(),
        }
    }
}

/// Flags that override the file; each also reads its `INFAAS_*` variable (flags win).
#[derive(Debug, Clone, Default, Args)]
pub struct Overrides {
    /// TOML configuration file.
    #[arg(long, env = "INFAAS_CONFIG", global = true)]
    pub config: Option<PathBuf>,
    #[arg(long, env = "INFAAS_LISTEN", global = true)]
    pub listen: Option<SocketAddr>,
    /// Address of the gRPC service (Open Inference Protocol), or `off`.
    #[arg(long, env = "INFAAS_GRPC_LISTEN", global = true)]
    pub grpc_listen: Option<OptionalAddr>,
    #[arg(long, env = "INFAAS_DATA_DIR", global = true)]
    pub data_dir: Option<PathBuf>,
    #[arg(long, env = "INFAAS_DATABASE_URL", global = true)]
    pub database_url: Option<String>,
    #[arg(long, env = "INFAAS_OBJECT_STORE", global = true)]
    pub object_store: Option<String>,
    #[arg(long, env = "INFAAS_S3_ENDPOINT", global = true)]
    pub s3_endpoint: Option<String>,
    #[arg(long, env = "INFAAS_S3_REGION", global = true)]
    pub s3_region: Option<String>,
    #[arg(long, env = "INFAAS_LOG_FORMAT", global = true, value_enum)]
    pub log_format: Option<LogFormat>,
    #[arg(long, env = "INFAAS_LOG_LEVEL", global = true)]
    pub log_level: Option<String>,
    #[arg(long, env = "INFAAS_JWT_SECRET", global = true, hide_env_values = true)]
    pub jwt_secret: Option<String>,
    #[arg(long, env = "INFAAS_JWT_TTL_SECS", global = true)]
    pub jwt_ttl_secs: Option<u64>,
    #[arg(long, env = "INFAAS_MAX_BODY_BYTES", global = true)]
    pub max_body_bytes: Option<usize>,
    #[arg(long, env = "INFAAS_MAX_UPLOAD_BYTES", global = true)]
    pub max_upload_bytes: Option<u64>,
    #[arg(long, env = "INFAAS_SHUTDOWN_GRACE_SECS", global = true)]
    pub shutdown_grace_secs: Option<u64>,
    #[arg(long, env = "INFAAS_ORT_DYLIB_PATH", global = true)]
    pub ort_dylib_path: Option<PathBuf>,
    #[arg(
        long,
        env = "INFAAS_CLUSTER_TOKEN",
        global = true,
        hide_env_values = true
    )]
    pub cluster_token: Option<String>,
    #[arg(long, env = "INFAAS_WORKER_CORES", global = true)]
    pub worker_cores: Option<usize>,
    #[arg(long, env = "INFAAS_PROFILE_RUNS", global = true)]
    pub profile_runs: Option<usize>,
    #[arg(long, env = "INFAAS_PROFILE_MAX_MS_PER_BATCH", global = true)]
    pub profile_max_ms_per_batch: Option<u64>,
    #[arg(long, env = "INFAAS_PRUNE_VARIANTS", global = true)]
    pub prune_variants: Option<bool>,
    #[arg(long, env = "INFAAS_WORKER_LISTEN", global = true)]
    pub worker_listen: Option<SocketAddr>,
    #[arg(long, env = "INFAAS_WORKER_THREAD_BUDGET", global = true)]
    pub worker_thread_budget: Option<usize>,
    #[arg(long, env = "INFAAS_WORKER_MEMORY_BYTES", global = true)]
    pub worker_memory_bytes: Option<u64>,
    #[arg(long, env = "INFAAS_MAX_QUEUE_DELAY_US", global = true)]
    pub max_queue_delay_us: Option<u64>,
    #[arg(long, env = "INFAAS_INLINE_MAX_US", global = true)]
    pub inline_max_us: Option<u64>,
    #[arg(long, env = "INFAAS_GATHER_ROWS", global = true)]
    pub gather_rows: Option<bool>,
    #[arg(long, env = "INFAAS_QUEUE_CAPACITY_ROWS", global = true)]
    pub queue_capacity_rows: Option<usize>,
    #[arg(long, env = "INFAAS_HEARTBEAT_TIMEOUT_MS", global = true)]
    pub heartbeat_timeout_ms: Option<u64>,
    #[arg(long, env = "INFAAS_COOKIE_SECURE", global = true)]
    pub cookie_secure: Option<bool>,
    #[arg(long, env = "INFAAS_JOB_CHUNK_ROWS", global = true)]
    pub job_chunk_rows: Option<usize>,
    #[arg(long, env = "INFAAS_JOB_MAX_ONLINE_UTILISATION", global = true)]
    pub job_max_online_utilisation: Option<f64>,
    #[arg(long, env = "INFAAS_JOB_LEASE_MS", global = true)]
    pub job_lease_ms: Option<u64>,
    #[arg(long, env = "INFAAS_JOB_WEBHOOK_ALLOW_PRIVATE", global = true)]
    pub job_webhook_allow_private: Option<bool>,
    #[arg(long, env = "INFAAS_ADVERTISE_URL", global = true)]
    pub advertise_url: Option<String>,
    #[arg(long, env = "INFAAS_WORKER_NAME", global = true)]
    pub worker_name: Option<String>,
    #[arg(long, env = "INFAAS_WORKER_ADVERTISE_URL", global = true)]
    pub worker_advertise_url: Option<String>,
    #[arg(long, env = "INFAAS_SIMULATED_GPU_PROFILE", global = true)]
    pub simulated_gpu_profile: Option<String>,
    #[arg(long, env = "INFAAS_KUBERNETES_NAMESPACE", global = true)]
    pub kubernetes_namespace: Option<String>,
    #[arg(long, env = "INFAAS_KUBERNETES_WORKER_DEPLOYMENT", global = true)]
    pub kubernetes_worker_deployment: Option<String>,
    #[arg(long, env = "INFAAS_KUBERNETES_WORKER_SELECTOR", global = true)]
    pub kubernetes_worker_selector: Option<String>,
    #[arg(long, env = "INFAAS_KUBERNETES_MAX_WORKERS", global = true)]
    pub kubernetes_max_workers: Option<u32>,
    /// Run the autoscaling loops (`autoscale.enabled`).
    #[arg(long, env = "INFAAS_AUTOSCALE", global = true)]
    pub autoscale: Option<bool>,
    /// `autoscale.worker_provider`.
    #[arg(long, env = "INFAAS_WORKER_PROVIDER", global = true, value_enum)]
    pub worker_provider: Option<WorkerProviderKind>,
    /// `autoscale.min_workers`.
    #[arg(long, env = "INFAAS_MIN_WORKERS", global = true)]
    pub min_workers: Option<usize>,
    /// `autoscale.max_workers`.
    #[arg(long, env = "INFAAS_MAX_WORKERS", global = true)]
    pub max_workers: Option<usize>,
    /// `autoscale.idle_cooldown_secs`.
    #[arg(long, env = "INFAAS_WORKER_COOLDOWN_SECS", global = true)]
    pub worker_cooldown_secs: Option<f64>,
    /// `autoscale.scale_in_hold_secs`.
    #[arg(long, env = "INFAAS_SCALE_IN_HOLD_SECS", global = true)]
    pub scale_in_hold_secs: Option<f64>,
    /// `autoscale.peak_hold_secs`.
    #[arg(long, env = "INFAAS_PEAK_HOLD_SECS", global = true)]
    pub peak_hold_secs: Option<f64>,
    #[arg(long, env = "INFAAS_TRAFFIC_HORIZON_MINUTES", global = true)]
    pub traffic_horizon_minutes: Option<u64>,
}

/// A listen address that may be turned off: `HOST:PORT`, or `off` (also `none`, `false`,
/// or empty) for none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OptionalAddr(pub Option<SocketAddr>);

impl std::str::FromStr for OptionalAddr {
    type Err = String;

    fn from_str(s: &str) -> Result<OptionalAddr, String> {
        let s = s.trim();
        if s.is_empty()
            || ["off", "none", "false"]
                .iter()
                .any(|w| s.eq_ignore_ascii_case(w))
        {
            return Ok(OptionalAddr(None));
        }
        s.parse()
            .map(|a| OptionalAddr(Some(a)))
            .map_err(|_| format!("'{s}' is neither an address like 127.0.0.1:8001 nor 'off'"))
    }
}

/// `Option<SocketAddr>` in the file as an address string or `"off"`.
mod optional_addr {
    use std::net::SocketAddr;

    use serde::{Deserialize, Deserializer, Serializer};

    use super::OptionalAddr;

    pub fn serialize<S: Serializer>(v: &Option<SocketAddr>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(a) => s.collect_str(a),
            None => s.serialize_str("off"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
        let text = String::deserialize(d)?;
        text.parse::<OptionalAddr>()
            .map(|OptionalAddr(a)| a)
            .map_err(serde::de::Error::custom)
    }
}

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read configuration file {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid configuration file {path}: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: Box<toml::de::Error>,
    },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

impl Config {
    /// The offline-job gate's thresholds: `job_max_online_utilisation` and the scheduler's
    /// defaults (which the simulator uses too).
    pub fn job_gate(&self) -> infaas_scheduler::offline::SpareCapacity {
        infaas_scheduler::offline::SpareCapacity {
            max_online_utilisation: self.job_max_online_utilisation,
            ..infaas_scheduler::offline::SpareCapacity::default()
        }
    }

    /// Builds the configuration from the layers.
    pub fn load(o: &Overrides) -> Result<Config, ConfigError> {
        let mut cfg = match &o.config {
            Some(path) => Config::from_file(path)?,
            None => Config::default(),
        };
        macro_rules! set {
            ($($f:ident),*) => {$(
                if let Some(v) = &o.$f { cfg.$f = v.clone(); }
            )*};
        }
        macro_rules! set_opt {
            ($($f:ident),*) => {$(
                if let Some(v) = &o.$f { cfg.$f = Some(v.clone()); }
            )*};
        }
        set!(
            listen,
            data_dir,
            log_format,
            log_level,
            jwt_ttl_secs,
            max_body_bytes,
            max_upload_bytes,
            shutdown_grace_secs,
            profile_runs,
            profile_max_ms_per_batch,
            prune_variants,
            worker_listen,
            max_queue_delay_us,
            inline_max_us,
            gather_rows,
            queue_capacity_rows,
            heartbeat_timeout_ms,
            cookie_secure,
            job_chunk_rows,
            job_max_online_utilisation,
            job_lease_ms,
            job_webhook_allow_private,
            kubernetes_worker_deployment,
            kubernetes_worker_selector,
            kubernetes_max_workers,
            traffic_horizon_minutes
        );
        set_opt!(
            database_url,
            object_store,
            s3_endpoint,
            s3_region,
            jwt_secret,
            ort_dylib_path,
            cluster_token,
            worker_cores,
            worker_thread_budget,
            worker_memory_bytes,
            worker_name,
            advertise_url,
            worker_advertise_url,
            simulated_gpu_profile,
            kubernetes_namespace
        );
        if let Some(OptionalAddr(v)) = o.grpc_listen {
            cfg.grpc_listen = v;
        }
        let a = &mut cfg.autoscale;
        if let Some(v) = o.autoscale {
            a.enabled = v;
        }
        if let Some(v) = o.worker_provider {
            a.worker_provider = v;
        }
        if let Some(v) = o.min_workers {
            a.min_workers = v;
        }
        if let Some(v) = o.max_workers {
            a.max_workers = v;
        }
        if let Some(v) = o.worker_cooldown_secs {
            a.idle_cooldown_secs = v;
        }
        if let Some(v) = o.scale_in_hold_secs {
            a.scale_in_hold_secs = v;
        }
        if let Some(v) = o.peak_hold_secs {
            a.peak_hold_secs = v;
        }
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn from_file(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        toml::from_str(&text).map_err(|source| ConfigError::Parse {
            path: path.to_path_buf(),
            source: Box::new(source),
        })
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.jwt_ttl_secs == 0 {
            return Err(ConfigError::Invalid(
                "jwt_ttl_secs must be at least 1".into(),
            ));
        }
        if let Some(s) = &self.jwt_secret {
            if s.len() < 32 {
                return Err(ConfigError::Invalid(
                    "jwt_secret must be at least 32 characters".into(),
                ));
            }
        }
        if self.job_chunk_rows == 0 {
            return Err(ConfigError::Invalid(
                "job_chunk_rows must be at least 1".into(),
            ));
        }
        if !(0.0..=1.0).contains(&self.job_max_online_utilisation) {
            return Err(ConfigError::Invalid(
                "job_max_online_utilisation must be a fraction in [0, 1]".into(),
            ));
        }
        if self.job_lease_ms < 1000 {
            return Err(ConfigError::Invalid(
                "job_lease_ms must be at least 1000".into(),
            ));
        }
        if self.profile_runs == 0 {
            return Err(ConfigError::Invalid(
                "profile_runs must be at least 1".into(),
            ));
        }
        if self.worker_cores == Some(0) {
            return Err(ConfigError::Invalid(
                "worker_cores must be at least 1".into(),
            ));
        }
        if let Some(name) = &self.worker_name {
            if name.is_empty() || name.len() > 253 {
                return Err(ConfigError::Invalid(
                    "worker_name must have 1 to 253 characters".into(),
                ));
            }
        }
        if self.kubernetes_worker_deployment.is_empty() {
            return Err(ConfigError::Invalid(
                "kubernetes_worker_deployment must not be empty".into(),
            ));
        }
        if self.kubernetes_worker_selector.is_empty() {
            return Err(ConfigError::Invalid(
                "kubernetes_worker_selector must not be empty (the provider would count every pod of the namespace)".into(),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(ConfigError::Invalid(
                "max_body_bytes must be at least 1024".into(),
            ));
        }
        if self
            .worker_name
            .as_deref()
            .is_some_and(|n| n.trim().is_empty())
        {
            return Err(ConfigError::Invalid("worker_name must not be empty".into()));
        }
        if !(1..=10_080).contains(&self.traffic_horizon_minutes) {
            return Err(ConfigError::Invalid(
                "traffic_horizon_minutes must be from 1 to 10080 (a week)".into(),
            ));
        }
        self.whatif.validate()?;
        self.autoscale.validate()
    }

    /// CPU cores the embedded worker offers.
    pub fn worker_cores(&self) -> usize {
        self.worker_cores
            .or_else(|| std::thread::available_parallelism().ok().map(|n| n.get()))
            .unwrap_or(1)
            .max(1)
    }

    /// Settings of the `kubernetes` worker provider (its Deployment holds CPU workers).
    #[cfg(feature = "kubernetes")]
    pub fn kubernetes(&self) -> infaas_provision::kubernetes::KubernetesConfig {
        infaas_provision::kubernetes::KubernetesConfig {
            namespace: self.kubernetes_namespace.clone(),
            deployment: self.kubernetes_worker_deployment.clone(),
            selector: self.kubernetes_worker_selector.clone(),
            max_workers: self.kubernetes_max_workers,
            ..Default::default()
        }
    }

    /// Scratch space for uploads and generated files.
    pub fn tmp_dir(&self) -> PathBuf {
        self.data_dir.join("tmp")
    }

    /// The database URL in force (the SQLite file under `data_dir` by default).
    pub fn database_url(&self) -> String {
        self.database_url
            .clone()
            .unwrap_or_else(|| format!("sqlite://{}", self.data_dir.join("infaas.db").display()))
    }

    /// The object-store location in force (`data_dir/objects` by default).
    pub fn object_store(&self) -> String {
        self.object_store
            .clone()
            .unwrap_or_else(|| self.data_dir.join("objects").display().to_string())
    }
}

/// Names of the environment variables the configuration reads (checked against
/// deployment files in tests).
pub fn env_names() -> Vec<String> {
    use clap::CommandFactory;
    #[derive(clap::Parser)]
    struct Probe {
        #[command(flatten)]
        o: Overrides,
    }
    Probe::command()
        .get_arguments()
        .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        o: Overrides,
    }

    #[test]
    fn defaults_are_the_embedded_platform() {
        let c = Config::load(&Overrides::default()).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database_url(), "sqlite://data/infaas.db");
        assert_eq!(c.object_store(), "data/objects");
    }

    #[test]
    fn layers_apply_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("infaas.toml");
        std::fs::write(
            &file,
            "listen = \"0.0.0.0:9000\"\njwt_ttl_secs = 60\nlog_level = \"debug\"\n[default_quotas]\nrequests_per_second = 5.0\nmax_models = 3\nmax_stored_bytes = 1000\n",
        )
        .unwrap();
        // The file overrides defaults; a flag overrides the file.
        let t = T::try_parse_from([
            "t",
            "--config",
            file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:7000",
        ])
        .unwrap();
        let c = Config::load(&t.o).unwrap();
        assert_eq!(c.listen.to_string(), "127.0.0.1:7000");
        assert_eq!(
            c.grpc_listen,
            Some(SocketAddr::from(([127, 0, 0, 1], 8001)))
        );
        assert_eq!(c.jwt_ttl_secs, 60);
        assert_eq!(c.log_level, "debug");
        assert_eq!(c.default_quotas.max_models, 3);
    }

    #[test]
    fn the_grpc_address_layers_and_turns_off() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("infaas.toml");
        std::fs::write(&file, "grpc_listen = \"0.0.0.0:9001\"\n").unwrap();
        let path = file.to_str().unwrap();
        let t = T::try_parse_from(["t", "--config", path]).unwrap();
        let c = Config::load(&t.o).unwrap();
        assert_eq!(c.grpc_listen, Some("0.0.0.0:9001".parse().unwrap()));
        // The flag wins, and `off` turns the service off.
        let t = T::try_parse_from(["t", "--config", path, "--grpc-listen", "off"]).unwrap();
        assert_eq!(Config::load(&t.o).unwrap().grpc_listen, None);
        let t = T::try_parse_from(["t", "--grpc-listen", "127.0.0.1:0"]).unwrap();
        assert_eq!(
            Config::load(&t.o).unwrap().grpc_listen,
            Some("127.0.0.1:0".parse().unwrap())
        );
        std::fs::write(&file, "grpc_listen = \"off\"\n").unwrap();
        let t = T::try_parse_from(["t", "--config", path]).unwrap();
        assert_eq!(Config::load(&t.o).unwrap().grpc_listen, None);
        // Written back as the file takes it.
        let off = toml::to_string(&Config::load(&t.o).unwrap()).unwrap();
        assert!(off.contains("grpc_listen = \"off\""), "{off}");
        // A bad value names itself.
        let err = T::try_parse_from(["t", "--grpc-listen", "8001"])
            .err()
            .unwrap()
            .to_string();
        assert!(err.contains("'8001'"), "{err}");
        std::fs::write(&file, "grpc_listen = \"nowhere\"\n").unwrap();
        let err = Config::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("nowhere"), "{err}");
        assert!(env_names().contains(&"INFAAS_GRPC_LISTEN".to_string()));
    }

    #[test]
    fn unknown_file_keys_and_bad_values_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.toml");
        std::fs::write(&file, "listn = \"x\"\n").unwrap();
        let err = Config::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("listn"), "{err}");
        let o = Overrides {
            jwt_secret: Some("short".into()),
            ..Default::default()
        };
        assert!(Config::load(&o)
            .unwrap_err()
            .to_string()
            .contains("jwt_secret"));
    }

    #[test]
    fn worker_and_kubernetes_settings_layer_like_the_others() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("infaas.toml");
        std::fs::write(
            &file,
            "kubernetes_max_workers = 3\nkubernetes_worker_deployment = \"gpu-workers\"\nsimulated_gpu_profile = \"a.csv\"\n",
        )
        .unwrap();
        let t = T::try_parse_from([
            "t",
            "--config",
            file.to_str().unwrap(),
            "--kubernetes-max-workers",
            "5",
            "--simulated-gpu-profile",
            "b.csv#resnet50_v1#onnxruntime_gpu_ampere",
            "--worker-name",
            "infaas-worker-7d9c-x2",
        ])
        .unwrap();
        let c = Config::load(&t.o).unwrap();
        assert_eq!(c.kubernetes_max_workers, 5);
        assert_eq!(c.kubernetes_worker_deployment, "gpu-workers");
        assert_eq!(
            c.simulated_gpu_profile.as_deref(),
            Some("b.csv#resnet50_v1#onnxruntime_gpu_ampere")
        );
        assert_eq!(c.worker_name.as_deref(), Some("infaas-worker-7d9c-x2"));
        #[cfg(feature = "kubernetes")]
        {
            let k = c.kubernetes();
            assert_eq!((k.deployment.as_str(), k.max_workers), ("gpu-workers", 5));
            assert_eq!(k.selector, "app.kubernetes.io/name=infaas-worker");
        }
        let o = Overrides {
            kubernetes_worker_selector: Some(String::new()),
            ..Default::default()
        };
        assert!(Config::load(&o)
            .unwrap_err()
            .to_string()
            .contains("kubernetes_worker_selector"));
    }

    #[test]
    fn autoscale_settings_layer_and_are_checked() {
        let c = Config::load(&Overrides::default()).unwrap();
        assert!(c.autoscale.enabled, "on by default");
        assert_eq!(c.autoscale.worker_provider, WorkerProviderKind::Process);
        assert_eq!(
            (c.autoscale.slack, c.autoscale.model_interval_ms),
            (1.05, 250)
        );
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("infaas.toml");
        std::fs::write(
            &file,
            "worker_name = \"w-7\"\n[autoscale]\nslack = 1.2\nscale_down = 2.0\nworker_provider = \"none\"\nmax_workers = 6\n",
        )
        .unwrap();
        let t = T::try_parse_from([
            "t",
            "--config",
            file.to_str().unwrap(),
            "--worker-provider",
            "kubernetes",
            "--autoscale",
            "false",
            "--max-workers",
            "3",
        ])
        .unwrap();
        let c = Config::load(&t.o).unwrap();
        assert_eq!(c.worker_name.as_deref(), Some("w-7"));
        assert_eq!((c.autoscale.slack, c.autoscale.scale_down), (1.2, 2.0));
        assert_eq!(c.autoscale.worker_provider, WorkerProviderKind::Kubernetes);
        assert!(!c.autoscale.enabled);
        assert_eq!(c.autoscale.max_workers, 3);
        // Inconsistent thresholds name the key.
        std::fs::write(&file, "[autoscale]\nslack = 2.0\nscale_down = 1.5\n").unwrap();
        let t = T::try_parse_from(["t", "--config", file.to_str().unwrap()]).unwrap();
        let err = Config::load(&t.o).unwrap_err().to_string();
        assert!(err.contains("scale_down"), "{err}");
        let t = T::try_parse_from(["t", "--min-workers", "5", "--max-workers", "2"]).unwrap();
        let err = Config::load(&t.o).unwrap_err().to_string();
        assert!(err.contains("min_workers"), "{err}");
        std::fs::write(&file, "[autoscale]\nslak = 2.0\n").unwrap();
        let err = Config::from_file(&file).unwrap_err().to_string();
        assert!(err.contains("slak"), "{err}");
    }

    #[test]
    fn whatif_limits_and_the_traffic_horizon_layer_and_are_checked() {
        let c = Config::load(&Overrides::default()).unwrap();
        assert_eq!(c.traffic_horizon_minutes, 60);
        assert_eq!(c.whatif, WhatIfConfig::default());
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("infaas.toml");
        std::fs::write(
            &file,
            "traffic_horizon_minutes = 30\n[whatif]\nmax_queries = 1000\nmax_parallel_runs = 2\n",
        )
        .unwrap();
        let path = file.to_str().unwrap();
        let t =
            T::try_parse_from(["t", "--config", path, "--traffic-horizon-minutes", "90"]).unwrap();
        let c = Config::load(&t.o).unwrap();
        assert_eq!(c.traffic_horizon_minutes, 90);
        assert_eq!(
            (c.whatif.max_queries, c.whatif.max_parallel_runs),
            (1000, 2)
        );
        assert_eq!(c.whatif.max_unfinished_per_tenant, 1);
        let t = T::try_parse_from(["t", "--traffic-horizon-minutes", "0"]).unwrap();
        let err = Config::load(&t.o).unwrap_err().to_string();
        assert!(err.contains("traffic_horizon_minutes"), "{err}");
        std::fs::write(&file, "[whatif]\nmax_parallel_runs = 0\n").unwrap();
        let t = T::try_parse_from(["t", "--config", path]).unwrap();
        let err = Config::load(&t.o).unwrap_err().to_string();
        assert!(err.contains("whatif: "), "{err}");
    }

    #[test]
    fn every_override_reads_an_infaas_variable() {
        let names = env_names();
        assert!(names.contains(&"INFAAS_DATABASE_URL".to_string()));
        assert!(names.contains(&"INFAAS_OBJECT_STORE".to_string()));
        assert!(names.iter().all(|n| n.starts_with("INFAAS_")));
    }
}
