//! The discrete-event engine (SIMULATED: no model runs; service times come from measured
//! profiles). Workers with cores and GPUs; instances of variants, each with a queue and a
//! dynamic batcher (an idle instance takes up to its max batch of waiting queries at once);
//! load times; a monitoring window that moves every instance along the scheduler's state
//! machine ([`Snapshot::observe_instance`]); and a policy that routes each query and changes
//! the deployment once per window.
//!
//! The world a policy sees is the scheduler's own [`Snapshot`], kept up to date the way the
//! controller keeps its own: instances are added when their load completes, removed when they
//! are unloaded, and their queue lengths are set as queries come and go. A policy may call any
//! function of `infaas-scheduler` on it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};

use infaas_core::HardwareKind;
use infaas_scheduler::autoscale::{Arrivals, Step, VerticalConfig};
use infaas_scheduler::offline::{
    JobBatch, JobGate, JobPlacement, JobWait, OnlineLoad, SpareCapacity,
};
use infaas_scheduler::Target;
use infaas_scheduler::{
    self_contended, Clock, InstanceEntry, InstanceFigures, InstanceState, PendingLoad, Prices,
    Snapshot, SnapshotError, Thresholds, VariantEntry, WorkerEntry, BUSY_WITHIN_MS,
    INTERFERENCE_MEMORY_MS,
};

use crate::catalogue::{Accelerator, Profile};
use crate::report::{app_summary, report, Histogram, JobReport, PolicyReport, Second};
use crate::trace::{Arrival, Trace};

/// The tenant every simulated application belongs to.
pub const TENANT: &str = "sim";

/// The simulated cluster and how variants are made from profiles.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster {
    pub cpu_workers: usize,
    /// Cores of a CPU worker.
    pub cpu_cores: usize,
    pub gpu_workers: usize,
    /// Cores of a GPU worker, besides its one GPU.
    pub gpu_worker_cores: usize,
    pub worker_memory_bytes: u64,
    /// The GPU generation of the GPU workers; profiles of the other generation are left out.
    pub gpu: Accelerator,
    /// Intra-op threads of a CPU variant, i.e. the cores one instance holds.
    pub cpu_threads: usize,
    /// Time to load an instance, ms.
    pub load_ms_cpu: f64,
    pub load_ms_gpu: f64,
    pub variant_memory_bytes: u64,
    pub prices: Prices,
    /// Length of the monitoring window and period of the policy's periodic step, ms.
    pub tick_ms: f64,
    /// Most CPU and GPU workers the worker autoscaler may run (at most the initial ones: no
    /// worker is added). Workers it adds are stopped again once idle for the cool-down.
    pub max_cpu_workers: usize,
    pub max_gpu_workers: usize,
    /// Time from a worker's start to its first instance, ms.
    pub worker_start_ms: f64,
    /// Period of the worker autoscaler, ms (the server's `autoscale.worker_interval_ms`).
    pub worker_tick_ms: f64,
    /// The request path outside the instance (HTTP, JSON, routing, the call to the worker):
    /// an empirical distribution, ms, of which every query's latency gets one draw (seeded).
    /// Empty: none.
    pub request_overhead_ms: Vec<f64>,
    /// Core time each query takes on the worker that serves it besides its instance's run, ms:
    /// the HTTP edge (and clients) sharing that worker's cores, as on a single machine serving
    /// its own requests. While a worker's busy instance threads and this load (its recent query
    /// rate times this figure) exceed its cores, the CPU batches started there run slower in
    /// proportion (the cores shared alike). 0: none, a worker's cores are its instances' alone.
    pub request_cpu_ms: f64,
    /// The platform's policies (`infaas_greedy`, `infaas_exact`) start with no instance
    /// loaded, as a server that has just started: the first queries' selection loads what they
    /// need. Otherwise (the default) they start with what the platform holds after serving the
    /// trace's opening traffic. The baselines provision as always.
    pub cold_start: bool,
    /// SIMULATED interference: noisy neighbours that slow every batch on a worker.
    pub noise: Vec<Noise>,
    /// Offline jobs submitted during the run (part of the workload), worked through on spare
    /// capacity as the controller's job runner does.
    pub jobs: Vec<OfflineJob>,
}

/// An offline (batch) job of the workload: `rows` rows for application `app`, submitted at
/// `at_ms`.
#[derive(Debug, Clone, PartialEq)]
pub struct OfflineJob {
    pub app: String,
    pub rows: u64,
    pub at_ms: f64,
}

impl std::str::FromStr for OfflineJob {
    type Err = String;

    /// `app=NAME,rows=N[,at=S]` (seconds).
    fn from_str(spec: &str) -> Result<OfflineJob, String> {
        let mut j = OfflineJob {
            app: String::new(),
            rows: 0,
            at_ms: 0.0,
        };
        for kv in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("'{kv}': expected key=value"))?;
            match k {
                "app" => j.app = v.to_string(),
                "rows" => {
                    j.rows = v
                        .parse()
                        .map_err(|_| format!("rows='{v}' is not a whole number"))?
                }
                "at" => {
                    j.at_ms = v
                        .parse::<f64>()
                        .ok()
                        .filter(|x| x.is_finite() && *x >= 0.0)
                        .ok_or_else(|| format!("at='{v}' is not a non-negative number"))?
                        * 1e3
                }
                _ => return Err(format!("unknown key '{k}' (app, rows, at)")),
            }
        }
        if j.app.is_empty() || j.rows == 0 {
            return Err("give the application and the rows: app=NAME,rows=N".into());
        }
        Ok(j)
    }
}

/// How the job runner polls when it cannot work (the controller's `IDLE`), ms.
const JOB_IDLE_MS: f64 = 200.0;

/// A noisy neighbour (SIMULATED interference, as a co-located job causes it): from `from_ms`
/// until `until_ms`, every batch on worker `worker` (an index among the initial workers, CPU
/// workers first) takes `factor` times its profiled time. The instances' observed p99 shows
/// it, so the scheduler's state machine can find them Interfered.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    pub worker: usize,
    pub from_ms: f64,
    pub until_ms: f64,
    pub factor: f64,
}

impl std::str::FromStr for Noise {
    type Err = String;

    /// `worker=W,from=S,until=S,factor=F` (seconds; `until` may be left out: to the end).
    fn from_str(spec: &str) -> Result<Noise, String> {
        let mut n = Noise {
            worker: usize::MAX,
            from_ms: 0.0,
            until_ms: f64::INFINITY,
            factor: 0.0,
        };
        for kv in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("'{kv}': expected key=value"))?;
            let num = |v: &str| {
                v.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .ok_or_else(|| format!("{k}='{v}' is not a non-negative number"))
            };
            match k {
                "worker" => {
                    n.worker = v
                        .parse()
                        .map_err(|_| format!("worker='{v}' is not a worker index"))?
                }
                "from" => n.from_ms = num(v)? * 1e3,
                "until" => n.until_ms = num(v)? * 1e3,
                "factor" => n.factor = num(v)?,
                _ => return Err(format!("unknown key '{k}' (worker, from, until, factor)")),
            }
        }
        if n.worker == usize::MAX {
            return Err("give the worker: worker=W".into());
        }
        if n.factor < 1.0 {
            return Err(format!("factor {} must be at least 1", n.factor));
        }
        if n.until_ms <= n.from_ms {
            return Err("until must be after from".into());
        }
        Ok(n)
    }
}

impl Default for Cluster {
    fn default() -> Self {
        Cluster {
            cpu_workers: 16,
            cpu_cores: 16,
            gpu_workers: 16,
            gpu_worker_cores: 8,
            worker_memory_bytes: 64 << 30,
            gpu: Accelerator::GpuAmpere,
            cpu_threads: 4,
            load_ms_cpu: 2_000.0,
            load_ms_gpu: 5_000.0,
            variant_memory_bytes: 2 << 30,
            prices: Prices::default(),
            tick_ms: infaas_scheduler::autoscale::DEFAULT_MODEL_PERIOD_MS as f64,
            max_cpu_workers: 0,
            max_gpu_workers: 0,
            worker_start_ms: 30_000.0,
            worker_tick_ms: 2_000.0,
            request_overhead_ms: Vec::new(),
            request_cpu_ms: 0.0,
            cold_start: false,
            noise: Vec::new(),
            jobs: Vec::new(),
        }
    }
}

/// Why a simulation could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("no profile of the catalogue serves application '{0}' (a profile serves the application named after its family, e.g. 'resnet' for resnet50_v1)")]
    NoProfile(String),
    #[error("the simulated cluster has no worker")]
    NoWorkers,
    #[error("invalid simulated cluster: {0}")]
    Snapshot(#[from] SnapshotError),
}

/// The variants of every application of `trace`: each profile of the application's family on
/// the CPU or on the cluster's GPU generation, one variant per profiled batch size.
pub fn variants_for(
    trace: &Trace,
    catalogue: &[Profile],
    c: &Cluster,
) -> Result<Vec<VariantEntry>, SimError> {
    let mut out = Vec::new();
    for app in &trace.apps {
        let before = out.len();
        for p in catalogue.iter().filter(|p| &p.family == app) {
            let (threads, load_ms) = match p.accelerator {
                Accelerator::Cpu => (c.cpu_threads, c.load_ms_cpu),
                a if a == c.gpu => (1, c.load_ms_gpu),
                _ => continue,
            };
            out.extend(p.variants(app, threads, load_ms, c.variant_memory_bytes));
        }
        if out.len() == before {
            return Err(SimError::NoProfile(app.clone()));
        }
    }
    Ok(out)
}

/// What a policy does with one query.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Route {
    /// Queue it at this instance (an index into the snapshot's instances).
    Instance(usize),
    /// Load `variant` on `worker` (unless a load of it is under way) and queue the query
    /// there, or at the instance `meanwhile` when given.
    Load {
        variant: usize,
        worker: usize,
        meanwhile: Option<usize>,
    },
    /// Nothing can serve it: dropped, counted as an SLO miss.
    Drop,
}

/// A change to the deployment. Indices point into the snapshot the policy was given.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// Load an instance of `variant` on `worker` (at once, without load time, when `warm`:
    /// only honoured before the first query, for provisioning ahead of the trace).
    Load {
        variant: usize,
        worker: usize,
        warm: bool,
    },
    /// Load `variant` on `worker`, then unload `from` once it serves.
    Replace {
        from: usize,
        variant: usize,
        worker: usize,
    },
    /// Stop sending queries to `instance`; it finishes its queue and its resources are freed.
    Unload { instance: usize },
    /// The steps of one resolved action of `model` ([`infaas_scheduler::autoscale::resolve()`]),
    /// carried out in order as the controller carries them out: a load is done once the
    /// instance serves, a resize at once, an unload after the controller's drain wait. A step
    /// that cannot be carried out ends the job; the model is busy until the job ends.
    Steps {
        model: String,
        /// What the action is (`replicate`, `migrate`, ...; [`ActionPlan::action`]).
        ///
        /// [`ActionPlan::action`]: infaas_scheduler::autoscale::ActionPlan
        action: &'static str,
        steps: Vec<Step>,
    },
}

/// How long the controller waits between taking an instance out of the index and unloading
/// it (its `DRAIN_WAIT`), ms.
const DRAIN_WAIT_MS: f64 = 500.0;

/// Seconds at the start of a trace whose mean rate is the traffic a policy is provisioned
/// for before the trace starts ([`World::opening_rate`]).
pub const OPENING_S: f64 = 10.0;

/// What a policy sees.
pub struct World<'a> {
    pub snapshot: &'a Snapshot,
    pub now_ms: f64,
    pub apps: &'a [String],
    pub prices: &'a Prices,
    /// Per application: the highest arrivals in one second of the trace (what provisioning
    /// for the peak plans for).
    pub peak_rate: &'a [f64],
    /// Per application: its mean arrivals per second over the trace's first
    /// [`OPENING_S`] seconds (what a policy that has been serving the traffic before the
    /// trace starts is provisioned for).
    pub opening_rate: &'a [f64],
    /// Per application: its busiest second among those [`OPENING_S`] seconds (the burst
    /// a policy provisioned for the opening traffic has already seen).
    pub opening_peak_rate: &'a [f64],
    /// Per application: the highest minimum accuracy its queries asked for in those seconds
    /// (what the variants it was served with before the trace met).
    pub opening_min_accuracy: &'a [Option<f64>],
    /// Per application: the tightest SLO of its queries in the trace, ms.
    pub app_slo: &'a [Option<f64>],
    /// Per snapshot instance: how long it has been in its state, ms (empty when routing).
    pub state_age_ms: &'a [f64],
    /// Models with a change under way (empty when routing).
    pub busy: &'a [String],
    /// Per snapshot instance: its intra-op threads now (empty when routing).
    pub threads: &'a [usize],
    /// Per snapshot worker: whether the worker autoscaler started it (it may stop it again).
    pub provisioned: &'a [bool],
    /// The platform's policy starts with nothing loaded ([`Cluster::cold_start`]).
    pub cold_start: bool,
}

/// The workers as the worker autoscaler sees them.
#[derive(Debug, Clone, Copy)]
pub struct Fleet<'a> {
    /// A worker is starting.
    pub starting: bool,
    /// Per snapshot worker: how long it has had no instance, s (0 while it has some).
    pub idle_for_s: &'a [f64],
}

/// A change to the workers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum WorkerChange {
    /// Start a worker with this hardware (ignored at the cluster's maximum).
    Add(HardwareKind),
    /// Stop this worker (a snapshot index; only a started one without instances).
    Remove(usize),
}

/// Demand of one model (a family of variants) over the last window.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelDemand {
    /// Queries routed to the model's variants, per second of the window.
    pub rows_per_s: f64,
    /// Tightest SLO among them, ms.
    pub slo_ms: Option<f64>,
    /// Highest minimum accuracy among them.
    pub min_accuracy: Option<f64>,
    /// Loads started for its queries in the window (`Route::Load`).
    pub loads_for_queries: u32,
}

/// The last monitoring window, for the policy's periodic step.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    pub seconds: f64,
    /// Per model name.
    pub models: HashMap<String, ModelDemand>,
    /// Per application: arrivals per second of the window.
    pub app_rate: Vec<f64>,
}

/// A routing and scaling policy.
pub trait Policy {
    fn name(&self) -> String;
    /// Changes before the first query (instances loaded warm).
    fn provision(&mut self, _world: &World) -> Vec<Change> {
        Vec::new()
    }
    /// Where one arriving query goes.
    fn route(&mut self, world: &World, query: &Arrival) -> Route;
    /// Changes at the end of a monitoring window.
    fn tick(&mut self, _world: &World, _window: &Window) -> Vec<Change> {
        Vec::new()
    }
    /// Workers to start or stop, once per worker period (only when the cluster may grow).
    fn workers(&mut self, _world: &World, _fleet: &Fleet) -> Vec<WorkerChange> {
        Vec::new()
    }
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    at_ms: f64,
    slo_ms: f64,
    app: usize,
    /// A row of an offline job (not an online query).
    job: bool,
}

#[derive(Debug)]
struct Inst {
    variant: usize,
    worker: usize,
    snapshot: Option<usize>,
    queue: VecDeque<Pending>,
    running: Vec<Pending>,
    ready: bool,
    draining: bool,
    gone: bool,
    rate_per_s: f64,
    /// Intra-op threads (cores held); service times follow Amdahl's law from the variant's.
    threads: usize,
    /// Service time per batch relative to the profile at the variant's threads.
    slowdown: f64,
    /// The job waiting for this instance's load.
    job: Option<usize>,
    served_window: u64,
    /// Online queries with an SLO it answered in the window, and how many of them late.
    slo_answered_window: u64,
    slo_late_window: u64,
    /// When it last finished a batch (busy within [`BUSY_WITHIN_MS`] of it).
    last_served_ms: f64,
    /// When it became ready: queries that arrived before waited for its load, and their
    /// lateness says nothing of how it serves (the controller counts them alike).
    ready_ms: f64,
    /// Core-milliseconds its batches ran in the window.
    busy_window_ms: f64,
    /// The running batch's service time, ms.
    batch_ms: f64,
    state_since_ms: f64,
}

/// Why an online query missed its SLO.
#[derive(Debug, Clone, Copy)]
enum MissCause {
    /// It arrived before its instance was ready and waited for the load.
    Load = 0,
    /// Its batch alone ran longer than its SLO.
    Service = 1,
    /// It waited behind other batches of a ready instance.
    Queue = 2,
}

impl MissCause {
    const ALL: [MissCause; 3] = [MissCause::Load, MissCause::Service, MissCause::Queue];

    fn name(self) -> &'static str {
        match self {
            MissCause::Load => "waited-for-load",
            MissCause::Service => "slow-batch",
            MissCause::Queue => "queued",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Done(usize),
    Ready(usize),
    /// A job's drain wait is over.
    Resume(usize),
    Tick,
    WorkerTick,
    /// A started worker joins (true: with a GPU).
    WorkerUp(bool),
    /// The job runner looks for work.
    JobStep,
}

/// Online queries answered in the current window, as the controller's online meter counts
/// them for the job runner.
#[derive(Debug, Default)]
struct OnlineTally {
    latency_ms: f64,
    queries: u64,
    with_slo: u64,
    missed: u64,
}

impl OnlineTally {
    fn add(&mut self, latency_ms: f64, slo_ms: f64) {
        self.latency_ms += latency_ms;
        self.queries += 1;
        if slo_ms.is_finite() {
            self.with_slo += 1;
            self.missed += u64::from(latency_ms > slo_ms);
        }
    }

    fn load(self, secs: f64) -> OnlineLoad {
        OnlineLoad {
            busy_s_per_s: self.latency_ms / 1e3 / secs.max(1e-9),
            qps: self.queries as f64 / secs.max(1e-9),
            slo_miss_rate: if self.with_slo > 0 {
                self.missed as f64 / self.with_slo as f64
            } else {
                0.0
            },
        }
    }
}

/// A resolved action under way.
#[derive(Debug)]
struct Job {
    model: String,
    steps: VecDeque<Step>,
    done: bool,
}

/// Event time as the bits of a non-negative f64 (which order like the numbers), then the
/// order of scheduling.
type Event = Reverse<(u64, u64, Kind)>;

struct Engine<'t> {
    trace: &'t Trace,
    cluster: Cluster,
    snapshot: Snapshot,
    insts: Vec<Inst>,
    /// Snapshot instance index -> engine instance index.
    by_snapshot: Vec<usize>,
    /// Variant -> engine instance loading it.
    loading: HashMap<usize, usize>,
    jobs: Vec<Job>,
    vertical: VerticalConfig,
    /// Per snapshot worker: started by the worker autoscaler; its instances; since when idle.
    provisioned: Vec<bool>,
    worker_insts: Vec<usize>,
    idle_since: Vec<f64>,
    /// Workers starting, by kind (CPU, GPU).
    starting: [usize; 2],
    workers_started: usize,
    /// The last second whose instances and workers were recorded.
    fleet_recorded: Option<usize>,
    /// Scaling actions over the run, by kind.
    actions_by_kind: BTreeMap<&'static str, u64>,
    /// Online queries that missed their SLO, by [`MissCause`].
    misses: [u64; 3],
    /// The job runner: progress of every job, the batch in flight, whether it is paused, and
    /// the online load it reads (the last window's, as the controller measures it).
    offline: Vec<JobReport>,
    /// The job whose batch is in flight, and its rows not done yet.
    job_in_flight: Option<(usize, u64)>,
    /// The scheduler's job gate (paused or not, the instance of the latest batch), as the
    /// controller's job runner keeps it.
    job_gate: JobGate,
    /// Every job decision with its inputs, when recorded ([`simulate_recording_jobs`]).
    job_steps: Option<Vec<JobStep>>,
    job_paused_since: Option<f64>,
    /// Per worker: when an instance on it was last Interfered.
    interference_at_ms: HashMap<usize, f64>,
    job_polling: bool,
    online_window: OnlineTally,
    online: OnlineLoad,
    /// State of the generator that draws request overheads.
    overhead_rng: u64,
    /// Per worker: the queries it was sent, a rate per ms decayed over `EDGE_RATE_MS`, and when
    /// it was last updated (read only when `Cluster::request_cpu_ms` is set).
    edge_rate: Vec<(f64, f64)>,
    events: BinaryHeap<Event>,
    seq: u64,
    now: f64,
    seconds: Vec<Second>,
    /// The same tallies per application, over the whole run.
    per_app: Vec<Second>,
    cost_rate: f64,
    cost_since: f64,
    window: Window,
    /// Per model: what was routed to its variants in the window.
    /// Per model (index into `models`): what was routed to its variants in the window.
    window_arrivals: Vec<Arrivals>,
    /// Model names, and each variant's index into them.
    models: Vec<String>,
    variant_model: Vec<usize>,
    app_window: Vec<u64>,
    peak_rate: Vec<f64>,
    opening_rate: Vec<f64>,
    opening_peak_rate: Vec<f64>,
    opening_min_accuracy: Vec<Option<f64>>,
    app_slo: Vec<Option<f64>>,
    thresholds: Thresholds,
    started: bool,
}

/// Per application of `trace`: the tightest SLO of its queries, ms.
pub(crate) fn tightest_slos(trace: &Trace) -> Vec<Option<f64>> {
    let mut slo: Vec<Option<f64>> = vec![None; trace.apps.len()];
    for a in &trace.arrivals {
        if let (Some(q), Some(t)) = (a.slo_ms, slo.get_mut(a.app)) {
            *t = Some(t.map_or(q, |x| x.min(q)));
        }
    }
    slo
}

fn second(ms: f64) -> usize {
    (ms.max(0.0) / 1e3) as usize
}

impl<'t> Engine<'t> {
    fn new(
        trace: &'t Trace,
        variants: Vec<VariantEntry>,
        cluster: Cluster,
    ) -> Result<Self, SimError> {
        if cluster.cpu_workers + cluster.gpu_workers == 0 {
            return Err(SimError::NoWorkers);
        }
        let mut b = Snapshot::builder();
        for v in variants {
            b.add_variant(TENANT, v)?;
        }
        for i in 0..cluster.cpu_workers {
            b.add_worker(worker(
                format!("cpu-{i}"),
                vec![HardwareKind::Cpu],
                cluster.cpu_cores,
                &cluster,
            ))?;
        }
        for i in 0..cluster.gpu_workers {
            b.add_worker(worker(
                format!("gpu-{i}"),
                vec![HardwareKind::Cpu, HardwareKind::Gpu],
                cluster.gpu_worker_cores,
                &cluster,
            ))?;
        }
        let per_second = trace.per_second();
        let peak_rate = per_second
            .iter()
            .map(|s| s.iter().copied().max().unwrap_or(0) as f64)
            .collect();
        let opening_peak_rate = per_second
            .iter()
            .map(|s| {
                s.iter()
                    .take(OPENING_S as usize)
                    .copied()
                    .max()
                    .unwrap_or(0) as f64
            })
            .collect();
        let mut opening_rate = vec![0.0; trace.apps.len()];
        let mut opening_min_accuracy: Vec<Option<f64>> = vec![None; trace.apps.len()];
        for a in trace
            .arrivals
            .iter()
            .take_while(|a| a.at_ms < OPENING_S * 1e3)
        {
            opening_rate[a.app] += 1.0 / OPENING_S;
            if let Some(m) = a.min_accuracy {
                let o = &mut opening_min_accuracy[a.app];
                *o = Some(o.map_or(m, |x| x.max(m)));
            }
        }
        let app_slo = tightest_slos(trace);
        let snapshot = b.build();
        let workers = snapshot.workers().len();
        let mut models: Vec<String> = Vec::new();
        let variant_model = snapshot
            .variants()
            .iter()
            .map(|v| match models.iter().position(|m| *m == v.model) {
                Some(i) => i,
                None => {
                    models.push(v.model.clone());
                    models.len() - 1
                }
            })
            .collect();
        Ok(Engine {
            trace,
            app_slo,
            snapshot,
            insts: Vec::new(),
            by_snapshot: Vec::new(),
            loading: HashMap::new(),
            jobs: Vec::new(),
            vertical: VerticalConfig::default(),
            provisioned: vec![false; workers],
            worker_insts: vec![0; workers],
            idle_since: vec![0.0; workers],
            starting: [0; 2],
            workers_started: 0,
            fleet_recorded: None,
            actions_by_kind: BTreeMap::new(),
            misses: [0; 3],
            offline: cluster
                .jobs
                .iter()
                .map(|j| JobReport {
                    app: j.app.clone(),
                    rows: j.rows,
                    submitted_s: j.at_ms / 1e3,
                    ..JobReport::default()
                })
                .collect(),
            job_in_flight: None,
            job_gate: JobGate::new(SpareCapacity::default()),
            job_steps: None,
            job_paused_since: None,
            interference_at_ms: HashMap::new(),
            job_polling: false,
            online_window: OnlineTally::default(),
            online: OnlineLoad::default(),
            overhead_rng: 0x9E37_79B9_7F4A_7C15,
            edge_rate: Vec::new(),
            events: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            seconds: Vec::new(),
            per_app: vec![Second::default(); trace.apps.len()],
            cost_rate: 0.0,
            cost_since: 0.0,
            window: Window::default(),
            window_arrivals: vec![Arrivals::default(); models.len()],
            models,
            variant_model,
            app_window: vec![0; trace.apps.len()],
            peak_rate,
            opening_rate,
            opening_peak_rate,
            opening_min_accuracy,
            thresholds: Thresholds {
                window_ms: cluster.tick_ms,
                ..Thresholds::default()
            },
            started: false,
            cluster,
        })
    }

    fn sec(&mut self, ms: f64) -> &mut Second {
        let s = second(ms);
        if self.seconds.len() <= s {
            self.seconds.resize_with(s + 1, Second::default);
        }
        &mut self.seconds[s]
    }

    fn schedule(&mut self, at: f64, kind: Kind) {
        self.seq += 1;
        self.events
            .push(Reverse((at.max(0.0).to_bits(), self.seq, kind)));
    }

    /// Books the price of what was held from `cost_since` to `t`, second by second.
    fn advance_cost(&mut self, t: f64) {
        while self.cost_since < t {
            let boundary = (second(self.cost_since) as f64 + 1.0) * 1e3;
            let end = t.min(boundary);
            let cost = self.cost_rate * (end - self.cost_since) / 1e3;
            let from = self.cost_since;
            self.sec(from).cost += cost;
            self.cost_since = end;
        }
    }

    fn world<'w>(&'w self, ages: &'w [f64], busy: &'w [String], threads: &'w [usize]) -> World<'w> {
        World {
            snapshot: &self.snapshot,
            now_ms: self.now,
            apps: &self.trace.apps,
            prices: &self.cluster.prices,
            peak_rate: &self.peak_rate,
            opening_rate: &self.opening_rate,
            opening_peak_rate: &self.opening_peak_rate,
            opening_min_accuracy: &self.opening_min_accuracy,
            app_slo: &self.app_slo,
            state_age_ms: ages,
            busy,
            threads,
            provisioned: &self.provisioned,
            cold_start: self.cluster.cold_start,
        }
    }

    /// Per snapshot instance its age in its state and its threads; the models with a job
    /// under way.
    fn period_view(&self) -> (Vec<f64>, Vec<String>, Vec<usize>) {
        let ages = self
            .by_snapshot
            .iter()
            .map(|&e| self.now - self.insts[e].state_since_ms)
            .collect();
        let threads = self
            .by_snapshot
            .iter()
            .map(|&e| self.insts[e].threads)
            .collect();
        let mut busy: Vec<String> = Vec::new();
        for j in self.jobs.iter().filter(|j| !j.done) {
            if !busy.contains(&j.model) {
                busy.push(j.model.clone());
            }
        }
        (ages, busy, threads)
    }

    /// Starts loading `variant` on `worker`; `None` when it does not fit there.
    fn load(&mut self, variant: usize, worker: usize, warm: bool) -> Option<usize> {
        self.start_load(variant, worker, warm, true)
    }

    /// Starts loading `variant` on `worker`; queries routed to the variant wait for it when
    /// `on_demand`. `None` when it does not fit there.
    fn start_load(
        &mut self,
        variant: usize,
        worker: usize,
        warm: bool,
        on_demand: bool,
    ) -> Option<usize> {
        let v = self.snapshot.variants().get(variant)?;
        if !self.snapshot.workers().get(worker)?.can_host(v) {
            return None;
        }
        let (load_ms, rate, threads) = (v.load_ms, self.cluster.prices.rate_per_s(v), v.threads);
        self.hold(worker, threads, v.memory_bytes, true);
        self.worker_insts[worker] += 1;
        self.advance_cost(self.now);
        self.cost_rate += rate;
        let e = self.insts.len();
        self.insts.push(Inst {
            variant,
            worker,
            snapshot: None,
            queue: VecDeque::new(),
            running: Vec::new(),
            ready: false,
            draining: false,
            gone: false,
            rate_per_s: rate,
            threads,
            slowdown: 1.0,
            job: None,
            served_window: 0,
            slo_answered_window: 0,
            slo_late_window: 0,
            last_served_ms: f64::NEG_INFINITY,
            ready_ms: f64::INFINITY,
            busy_window_ms: 0.0,
            batch_ms: 0.0,
            state_since_ms: self.now,
        });
        if warm && !self.started {
            self.ready(e);
        } else {
            if on_demand {
                self.loading.insert(variant, e);
                // Selection sees the load and the rows that queue for it.
                let _ = self.snapshot.add_pending_load(PendingLoad {
                    variant,
                    worker,
                    started_ms: self.now,
                    waiting: 0,
                    live: Default::default(),
                });
            }
            self.schedule(self.now + load_ms, Kind::Ready(e));
        }
        Some(e)
    }

    fn ready(&mut self, e: usize) {
        self.insts[e].ready_ms = self.now;
        let (variant, worker) = (self.insts[e].variant, self.insts[e].worker);
        if self.loading.get(&variant) == Some(&e) {
            self.loading.remove(&variant);
            self.snapshot.remove_pending_load(variant);
        }
        let entry = InstanceEntry {
            id: format!("i{e}"),
            variant,
            worker,
            state: InstanceState::Active,
            queue_len: self.insts[e].queue.len(),
            qps: 0.0,
        };
        // An instance unloaded while it loaded never serves new queries: it finishes the
        // ones that waited for it.
        if !self.insts[e].draining {
            match self.snapshot.add_instance(entry) {
                Ok(s) => {
                    debug_assert_eq!(s, self.by_snapshot.len());
                    self.by_snapshot.push(e);
                    self.insts[e].snapshot = Some(s);
                }
                Err(_) => {
                    // Cannot happen on a worker the engine placed it on; drain what waits.
                    self.insts[e].draining = true;
                }
            }
        }
        self.insts[e].ready = true;
        self.insts[e].state_since_ms = self.now;
        self.start_batch(e);
        if self.insts[e].draining
            && self.insts[e].queue.is_empty()
            && self.insts[e].running.is_empty()
        {
            self.free(e);
        }
        if let Some(j) = self.insts[e].job.take() {
            self.advance(j);
        }
    }

    fn unload(&mut self, e: usize) {
        let inst = &mut self.insts[e];
        if inst.draining || inst.gone {
            return;
        }
        inst.draining = true;
        if let Some(s) = inst.snapshot {
            let _ = self.snapshot.remove_instance(s);
        }
        if self.loading.get(&inst.variant) == Some(&e) {
            self.loading.remove(&inst.variant);
            self.snapshot.remove_pending_load(inst.variant);
        }
        if inst.ready && inst.queue.is_empty() && inst.running.is_empty() {
            self.free(e);
        }
    }

    fn free(&mut self, e: usize) {
        if self.insts[e].gone {
            return;
        }
        self.advance_cost(self.now);
        let inst = &mut self.insts[e];
        inst.gone = true;
        self.cost_rate = (self.cost_rate - inst.rate_per_s).max(0.0);
        let (worker, threads) = (inst.worker, inst.threads);
        let memory = self.snapshot.variants()[inst.variant].memory_bytes;
        self.hold(worker, threads, memory, false);
        self.worker_insts[worker] -= 1;
        if self.worker_insts[worker] == 0 {
            self.idle_since[worker] = self.now;
        }
        if let Some(j) = self.insts[e].job.take() {
            // A load that never served: its job ends.
            self.jobs[j].done = true;
        }
    }

    /// Takes (or gives back) `threads` cores and `memory` bytes on `worker`, in the snapshot's
    /// worker entry, which the policies read.
    fn hold(&mut self, worker: usize, threads: usize, memory: u64, take: bool) {
        let w = &self.snapshot.workers()[worker];
        let (cores, mem) = if take {
            (w.cores_used + threads, w.memory_used + memory)
        } else {
            (
                w.cores_used.saturating_sub(threads),
                w.memory_used.saturating_sub(memory),
            )
        };
        let util = w.utilisation;
        let _ = self.snapshot.set_worker_usage(worker, cores, mem, util);
    }

    fn report_queue(&mut self, e: usize) {
        let inst = &self.insts[e];
        if let (Some(s), false) = (inst.snapshot, inst.draining) {
            let queued = inst.queue.len() + inst.running.len();
            let qps = self.snapshot.instances()[s].qps;
            let _ = self.snapshot.set_instance_load(s, queued, qps);
        }
    }

    fn start_batch(&mut self, e: usize) {
        let inst = &mut self.insts[e];
        if !inst.ready || inst.gone || !inst.running.is_empty() || inst.queue.is_empty() {
            return;
        }
        let v = &self.snapshot.variants()[inst.variant];
        let n = inst.queue.len().min(v.max_batch.max(1));
        inst.running.extend(inst.queue.drain(..n));
        let mut noise = noise_at(&self.cluster.noise, inst.worker, self.now);
        if self.cluster.request_cpu_ms > 0.0 && v.hardware == HardwareKind::Cpu {
            let worker = inst.worker;
            noise *= self.shared_cores(worker);
        }
        let inst = &mut self.insts[e];
        let v = &self.snapshot.variants()[inst.variant];
        let service = v.latency_at(n).map_or(f64::INFINITY, |(p, scale)| {
            p.mean_ms * scale * inst.slowdown * noise
        });
        inst.busy_window_ms += service * inst.threads as f64;
        inst.batch_ms = service;
        self.schedule(self.now + service, Kind::Done(e));
    }

    fn done(&mut self, e: usize) {
        let accuracy = self.snapshot.variants()[self.insts[e].variant].accuracy;
        let batch = std::mem::take(&mut self.insts[e].running);
        self.insts[e].served_window += batch.len() as u64;
        self.insts[e].last_served_ms = self.now;
        let now = self.now;
        let job_rows = batch.iter().filter(|p| p.job).count() as u64;
        if job_rows > 0 {
            self.job_rows_done(job_rows);
        }
        for p in batch.iter().filter(|p| !p.job) {
            let latency = now - p.at_ms + self.overhead();
            self.online_window.add(latency, p.slo_ms);
            let met = latency <= p.slo_ms;
            let waited_for_load = p.at_ms < self.insts[e].ready_ms;
            if p.slo_ms.is_finite() && !waited_for_load {
                self.insts[e].slo_answered_window += 1;
                self.insts[e].slo_late_window += u64::from(!met);
            }
            if !met {
                let cause = if waited_for_load {
                    MissCause::Load
                } else if self.insts[e].batch_ms > p.slo_ms {
                    MissCause::Service
                } else {
                    MissCause::Queue
                };
                self.misses[cause as usize] += 1;
            }
            self.sec(p.at_ms);
            let at = second(p.at_ms);
            let bucket = Histogram::bucket(latency);
            for s in [&mut self.seconds[at], &mut self.per_app[p.app]] {
                s.served += 1;
                s.latency.add_to(bucket);
                s.accuracy_sum += accuracy;
                s.met_slo += u64::from(met);
            }
        }
        // The emptied buffer goes back for the next batch (unless a job's next batch, started
        // above, already took the instance).
        if self.insts[e].running.is_empty() {
            let mut batch = batch;
            batch.clear();
            self.insts[e].running = batch;
        }
        self.start_batch(e);
        self.report_queue(e);
        let inst = &self.insts[e];
        if inst.draining && inst.queue.is_empty() && inst.running.is_empty() {
            self.free(e);
        }
    }

    /// Counts one scaling action of kind `kind` now.
    fn act(&mut self, kind: &'static str) {
        self.sec(self.now).actions += 1;
        *self.actions_by_kind.entry(kind).or_default() += 1;
    }

    /// How much slower a CPU batch starting now on `worker` runs because its cores are shared:
    /// the threads of the instances running a batch there (this one included) and the request
    /// path's load, against the worker's cores (1 while they fit).
    fn shared_cores(&mut self, worker: usize) -> f64 {
        let cores = self
            .snapshot
            .workers()
            .get(worker)
            .map_or(1, |w| w.cores)
            .max(1) as f64;
        let busy: usize = self
            .insts
            .iter()
            .filter(|i| i.worker == worker && !i.gone && !i.running.is_empty())
            .map(|i| i.threads)
            .sum();
        let edge = self.edge_rate_at(worker, false) * self.cluster.request_cpu_ms;
        ((busy as f64 + edge) / cores).max(1.0)
    }

    /// The decayed rate of queries sent to `worker`, per ms, counting one more when `arrival`.
    fn edge_rate_at(&mut self, worker: usize, arrival: bool) -> f64 {
        if self.edge_rate.len() <= worker {
            self.edge_rate.resize(worker + 1, (0.0, self.now));
        }
        let (rate, at) = &mut self.edge_rate[worker];
        *rate *= (-(self.now - *at).max(0.0) / EDGE_RATE_MS).exp();
        *at = self.now;
        if arrival {
            *rate += 1.0 / EDGE_RATE_MS;
        }
        *rate
    }

    /// One draw of the request path's overhead, ms (xorshift64*: cheap and repeatable).
    fn overhead(&mut self) -> f64 {
        let d = &self.cluster.request_overhead_ms;
        if d.is_empty() {
            return 0.0;
        }
        let mut x = self.overhead_rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.overhead_rng = x;
        d[(x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % d.len()]
    }

    fn enqueue(&mut self, e: usize, q: &Arrival) {
        if self.cluster.request_cpu_ms > 0.0 {
            self.edge_rate_at(self.insts[e].worker, true);
        }
        let inst = &mut self.insts[e];
        inst.queue.push_back(Pending {
            at_ms: q.at_ms,
            slo_ms: q.slo_ms.unwrap_or(f64::INFINITY),
            app: q.app,
            job: false,
        });
        self.window_arrivals[self.variant_model[inst.variant]].add(1, q.slo_ms, q.min_accuracy);
        let variant = inst.variant;
        if self.loading.get(&variant) == Some(&e) {
            let waiting = self.insts[e].queue.len();
            self.snapshot.set_pending_waiting(variant, waiting);
        }
        self.start_batch(e);
        self.report_queue(e);
    }

    fn arrive(&mut self, q: &Arrival, policy: &mut dyn Policy) {
        self.sec(q.at_ms).arrivals += 1;
        self.per_app[q.app].arrivals += 1;
        self.app_window[q.app] += 1;
        self.snapshot.set_clock(Clock::Fixed(self.now));
        let route = {
            let world = self.world(&[], &[], &[]);
            policy.route(&world, q)
        };
        let target = match route {
            Route::Instance(s) => self
                .by_snapshot
                .get(s)
                .copied()
                .filter(|&e| !self.insts[e].draining && !self.insts[e].gone),
            Route::Load {
                variant,
                worker,
                meanwhile,
            } => {
                let loading = match self.loading.get(&variant).copied() {
                    Some(e) => Some(e),
                    None => {
                        let e = self.load(variant, worker, false);
                        if e.is_some() {
                            self.act("load-on-demand");
                            self.window_arrivals[self.variant_model[variant]].loads_for_queries +=
                                1;
                        }
                        e
                    }
                };
                let now = meanwhile
                    .and_then(|s| self.by_snapshot.get(s).copied())
                    .filter(|&e| !self.insts[e].draining && !self.insts[e].gone);
                now.or(loading)
            }
            Route::Drop => None,
        };
        match target {
            Some(e) => self.enqueue(e, q),
            None => {
                self.sec(q.at_ms).dropped += 1;
                self.per_app[q.app].dropped += 1;
            }
        }
    }

    fn apply(&mut self, changes: Vec<Change>) {
        for c in changes {
            let id = |s: &Snapshot, v: usize, w: usize| {
                (s.workers()[w].id.clone(), s.variants()[v].id.clone())
            };
            let (model, action, steps) = match c {
                Change::Load {
                    variant,
                    worker,
                    warm,
                } if warm && !self.started => {
                    if self.load(variant, worker, true).is_some() {
                        self.act("provision");
                    }
                    continue;
                }
                Change::Load {
                    variant, worker, ..
                } => {
                    let Some(v) = self.snapshot.variants().get(variant) else {
                        continue;
                    };
                    if worker >= self.snapshot.workers().len() {
                        continue;
                    }
                    let (w, vid) = id(&self.snapshot, variant, worker);
                    (
                        v.model.clone(),
                        "replicate",
                        vec![Step::Load {
                            worker: w,
                            variant: vid,
                        }],
                    )
                }
                Change::Replace {
                    from,
                    variant,
                    worker,
                } => {
                    let s = &self.snapshot;
                    let (Some(old), Some(v)) = (s.instances().get(from), s.variants().get(variant))
                    else {
                        continue;
                    };
                    if worker >= s.workers().len() {
                        continue;
                    }
                    let (w, vid) = id(s, variant, worker);
                    let (ow, ovid) = id(s, old.variant, old.worker);
                    (
                        v.model.clone(),
                        "replace",
                        vec![
                            Step::Load {
                                worker: w,
                                variant: vid,
                            },
                            Step::Unload {
                                worker: ow,
                                variant: ovid,
                            },
                        ],
                    )
                }
                Change::Unload { instance } => {
                    let s = &self.snapshot;
                    let Some(i) = s.instances().get(instance) else {
                        continue;
                    };
                    let (w, vid) = id(s, i.variant, i.worker);
                    (
                        s.variants()[i.variant].model.clone(),
                        "remove-replica",
                        vec![Step::Unload {
                            worker: w,
                            variant: vid,
                        }],
                    )
                }
                Change::Steps {
                    model,
                    action,
                    steps,
                } => (model, action, steps),
            };
            if steps.is_empty() {
                continue;
            }
            self.act(action);
            let j = self.jobs.len();
            self.jobs.push(Job {
                model,
                steps: steps.into(),
                done: false,
            });
            self.advance(j);
        }
    }

    /// The serving engine instance of `variant` on `worker` (ids).
    fn instance_on(&self, worker: &str, variant: &str) -> Option<usize> {
        let (w, v) = (
            self.snapshot.worker_index(worker)?,
            self.snapshot.variant_index(variant)?,
        );
        self.snapshot
            .variant_instances(v)
            .iter()
            .filter(|&&i| self.snapshot.instances()[i].worker == w)
            .map(|&i| self.by_snapshot[i])
            .find(|&e| !self.insts[e].draining && !self.insts[e].gone)
    }

    /// Carries out job `j`'s steps until one has to wait (a load, a drain) or they end.
    fn advance(&mut self, j: usize) {
        while let Some(step) = self.jobs[j].steps.pop_front() {
            match step {
                Step::Load { worker, variant } => {
                    let started = match (
                        self.snapshot.worker_index(&worker),
                        self.snapshot.variant_index(&variant),
                    ) {
                        (Some(w), Some(v)) => self.start_load(v, w, false, false),
                        _ => None,
                    };
                    match started {
                        Some(e) => {
                            self.insts[e].job = Some(j);
                            return;
                        }
                        None => break,
                    }
                }
                Step::Resize {
                    worker,
                    variant,
                    threads,
                } => match self.instance_on(&worker, &variant) {
                    Some(e) if self.resize(e, threads) => {}
                    _ => break,
                },
                Step::Unload { worker, variant } => {
                    let Some(e) = self.instance_on(&worker, &variant) else {
                        break;
                    };
                    self.unload(e);
                    self.schedule(self.now + DRAIN_WAIT_MS, Kind::Resume(j));
                    return;
                }
            }
        }
        self.jobs[j].steps.clear();
        self.jobs[j].done = true;
    }

    /// Gives engine instance `e` `threads` intra-op threads in place; false when its worker
    /// lacks the cores.
    fn resize(&mut self, e: usize, threads: usize) -> bool {
        let (worker, old) = (self.insts[e].worker, self.insts[e].threads);
        let threads = threads.max(1);
        let w = &self.snapshot.workers()[worker];
        if threads > old && w.free_cores() < threads - old {
            return false;
        }
        self.advance_cost(self.now);
        if threads > old {
            self.hold(worker, threads - old, 0, true);
        } else {
            self.hold(worker, old - threads, 0, false);
        }
        let core = self.cluster.prices.cpu_core_per_s;
        let delta = (threads as f64 - old as f64) * core;
        self.cost_rate = (self.cost_rate + delta).max(0.0);
        let inst = &mut self.insts[e];
        inst.rate_per_s += delta;
        inst.threads = threads;
        let base = self.snapshot.variants()[inst.variant].threads;
        inst.slowdown = amdahl(base, self.vertical.parallel_fraction)
            / amdahl(threads, self.vertical.parallel_fraction);
        true
    }

    fn tick(&mut self, policy: &mut dyn Policy) {
        let secs = self.cluster.tick_ms / 1e3;
        // Each worker's busy fraction of its cores over the window, from the batches its
        // instances ran (what the controller reads from its workers), and the threads of its
        // busy instances (what capacity is counted in).
        let workers = self.snapshot.workers().len();
        let (mut busy, mut busy_threads) = (vec![0.0; workers], vec![0usize; workers]);
        for inst in self.insts.iter_mut().filter(|i| !i.gone) {
            busy[inst.worker] += std::mem::take(&mut inst.busy_window_ms);
            let cpu = self.snapshot.variants()[inst.variant].hardware == HardwareKind::Cpu;
            let active = self.now - inst.last_served_ms < BUSY_WITHIN_MS
                || !inst.queue.is_empty()
                || !inst.running.is_empty();
            if inst.ready && cpu && active {
                busy_threads[inst.worker] += inst.threads;
            }
        }
        let util: Vec<f64> = busy
            .iter()
            .enumerate()
            .map(|(w, b)| {
                let e = &self.snapshot.workers()[w];
                (b / (e.cores.max(1) as f64 * self.cluster.tick_ms)).min(1.0)
            })
            .collect();
        // The monitoring window: every serving instance along the state machine.
        for s in 0..self.by_snapshot.len() {
            let e = self.by_snapshot[s];
            let inst = &self.insts[e];
            if inst.draining || inst.gone {
                continue;
            }
            let v = &self.snapshot.variants()[inst.variant];
            let qps = inst.served_window as f64 / secs;
            let batch = inst.running.len().max(1);
            let profiled = v
                .latency_at(batch)
                .map_or(0.0, |(p, k)| p.p99_ms * k * inst.slowdown);
            let observed = profiled * noise_at(&self.cluster.noise, inst.worker, self.now);
            let figures = InstanceFigures {
                loaded: true,
                qps,
                peak_qps: v.peak_qps() / inst.slowdown,
                queue_len: inst.queue.len() + inst.running.len(),
                max_batch: v.max_batch,
                p99_ms_observed: (inst.served_window > 0).then_some(observed),
                p99_ms_profiled: profiled,
                slo_answered: inst.slo_answered_window,
                slo_late: inst.slo_late_window,
                // A SIMULATED noisy neighbour that slows batches by `f` takes `1 - 1/f` of
                // the worker's cores beside the instances' own busy fraction.
                self_contended: self_contended(
                    busy_threads[inst.worker],
                    self.snapshot.workers()[inst.worker].cpu_cores,
                    util[inst.worker],
                    (util[inst.worker]
                        + (1.0 - 1.0 / noise_at(&self.cluster.noise, inst.worker, self.now)))
                    .min(1.0),
                    &self.thresholds,
                ),
            };
            let before = self.snapshot.instances()[s].state;
            if let Ok(after) = self
                .snapshot
                .observe_instance(s, &figures, &self.thresholds)
            {
                if after != before {
                    self.insts[e].state_since_ms = self.now;
                }
                if after == InstanceState::Interfered {
                    self.interference_at_ms
                        .insert(self.insts[e].worker, self.now);
                }
            }
            let inst = &mut self.insts[e];
            inst.served_window = 0;
            inst.slo_answered_window = 0;
            inst.slo_late_window = 0;
        }
        // Workers where an instance was Interfered lately (placement avoids them).
        for w in 0..self.snapshot.workers().len() {
            let seen = self
                .interference_at_ms
                .get(&w)
                .is_some_and(|&at| self.now - at <= INTERFERENCE_MEMORY_MS);
            let _ = self.snapshot.set_worker_interference(w, seen);
        }
        for (w, (u, threads)) in util.into_iter().zip(busy_threads).enumerate() {
            let e = &self.snapshot.workers()[w];
            if !e.alive {
                continue;
            }
            let (cores, memory) = (e.cores_used, e.memory_used);
            let _ = self.snapshot.set_worker_usage(w, cores, memory, u);
            let _ = self.snapshot.set_worker_busy_threads(w, threads);
        }
        self.online = std::mem::take(&mut self.online_window).load(secs);
        let mut window = std::mem::take(&mut self.window);
        window.seconds = secs;
        window.models = self
            .window_arrivals
            .iter_mut()
            .zip(&self.models)
            .filter(|(a, _)| a.rows > 0)
            .map(|(a, m)| {
                let a = std::mem::take(a);
                (
                    m.clone(),
                    ModelDemand {
                        rows_per_s: a.rows as f64 / secs,
                        slo_ms: a.slo_ms,
                        min_accuracy: a.min_accuracy,
                        loads_for_queries: a.loads_for_queries,
                    },
                )
            })
            .collect();
        window.app_rate = self.app_window.iter().map(|&n| n as f64 / secs).collect();
        self.app_window.iter_mut().for_each(|n| *n = 0);
        let changes = {
            let (ages, busy, threads) = self.period_view();
            let world = self.world(&ages, &busy, &threads);
            policy.tick(&world, &window)
        };
        self.apply(changes);
        self.record_fleet(self.now - 1e-6);
    }

    /// Instances held and workers live now, as the figures of the second of `at`.
    fn record_fleet(&mut self, at: f64) {
        let mut held = [0u32; 2];
        for inst in self.insts.iter().filter(|i| !i.gone) {
            let hw = self.snapshot.variants()[inst.variant].hardware;
            held[usize::from(hw == HardwareKind::Gpu)] += 1;
        }
        let mut live = [0u32; 2];
        for w in self.snapshot.workers().iter().filter(|w| w.alive) {
            live[usize::from(w.hardware.contains(&HardwareKind::Gpu))] += 1;
        }
        // Seconds without a window of their own (after the trace) keep the figures.
        let from = self
            .fleet_recorded
            .map_or(second(at), |last| (last + 1).min(second(at)));
        self.sec(at);
        for s in &mut self.seconds[from..=second(at)] {
            s.instances = held;
            s.workers = live;
        }
        self.fleet_recorded = Some(second(at));
    }

    /// The job runner (the controller's): when no batch of a job is in flight, checks that
    /// online traffic leaves room ([`spare_capacity`]), picks the variant ([`job_variant`])
    /// and where its batch goes ([`job_placement`]), and queues one batch of the oldest
    /// submitted job there; when it cannot, it pauses and looks again after its idle time.
    fn job_step(&mut self) {
        if self.job_in_flight.is_some() {
            return;
        }
        let now = self.now;
        let Some(j) = self
            .offline
            .iter()
            .position(|j| j.submitted_s * 1e3 <= now && j.done_rows < j.rows)
        else {
            return;
        };
        let was_paused = self.job_gate.paused();
        let app = self.offline[j].app.clone();
        let decision = self.job_gate.next_batch(
            &self.snapshot,
            &self.online,
            TENANT,
            Target::App(&app),
            None,
            &self.cluster.prices,
            now,
        );
        if let Some(steps) = &mut self.job_steps {
            steps.push(JobStep {
                now_ms: now,
                app: app.clone(),
                snapshot: self.snapshot.clone(),
                online: self.online,
                decision: decision.clone(),
                ran_on: None,
            });
        }
        let (variant, placement) = match decision {
            Ok(JobBatch { variant, placement }) => (variant, placement),
            Err(JobWait::Paused(_)) => {
                if !was_paused {
                    self.job_paused_since = Some(now);
                }
                self.poll_jobs();
                return;
            }
            Err(JobWait::NoVariant | JobWait::NoRoom) => {
                self.poll_jobs();
                return;
            }
        };
        if let Some(since) = self.job_paused_since.take() {
            self.offline[j].paused_s += (now - since) / 1e3;
        }
        let e = match placement {
            JobPlacement::Instance(i) => self
                .by_snapshot
                .get(i)
                .copied()
                .filter(|&e| !self.insts[e].draining && !self.insts[e].gone),
            JobPlacement::Load(w) => {
                let e = self.load(variant, w, false);
                if e.is_some() {
                    self.act("load-for-job");
                }
                e
            }
        };
        let Some(e) = e else {
            self.poll_jobs();
            return;
        };
        let max_batch = self.snapshot.variants()[self.insts[e].variant]
            .max_batch
            .max(1) as u64;
        let n = max_batch.min(self.offline[j].rows - self.offline[j].done_rows);
        let app_index = self.trace.apps.iter().position(|a| *a == app).unwrap_or(0);
        for _ in 0..n {
            self.insts[e].queue.push_back(Pending {
                at_ms: now,
                slo_ms: f64::INFINITY,
                app: app_index,
                job: true,
            });
        }
        self.job_in_flight = Some((j, n));
        let id = format!("i{e}");
        if let Some(step) = self.job_steps.as_mut().and_then(|steps| steps.last_mut()) {
            step.ran_on = Some(id.clone());
        }
        self.job_gate.ran_on(&id, now);
        self.start_batch(e);
        self.report_queue(e);
    }

    fn poll_jobs(&mut self) {
        if !self.job_polling {
            self.job_polling = true;
            self.schedule(self.now + JOB_IDLE_MS, Kind::JobStep);
        }
    }

    /// `n` rows of the job batch in flight are done.
    fn job_rows_done(&mut self, n: u64) {
        let Some((j, left)) = self.job_in_flight else {
            return;
        };
        let job = &mut self.offline[j];
        job.done_rows = (job.done_rows + n).min(job.rows);
        if job.done_rows == job.rows {
            job.finished_s = Some(self.now / 1e3);
        }
        self.job_in_flight = (left > n).then(|| (j, left - n));
        if self.job_in_flight.is_none() {
            self.job_step();
        }
    }

    /// Live and starting workers of a kind, and the most the cluster may run.
    fn may_grow(&self, gpu: bool) -> bool {
        let live = self
            .snapshot
            .workers()
            .iter()
            .filter(|w| w.alive && w.hardware.contains(&HardwareKind::Gpu) == gpu)
            .count();
        let max = if gpu {
            self.cluster.max_gpu_workers
        } else {
            self.cluster.max_cpu_workers
        };
        live + self.starting[usize::from(gpu)] < max
    }

    fn worker_tick(&mut self, policy: &mut dyn Policy) {
        let idle: Vec<f64> = (0..self.snapshot.workers().len())
            .map(|w| {
                if self.worker_insts[w] == 0 {
                    (self.now - self.idle_since[w]) / 1e3
                } else {
                    0.0
                }
            })
            .collect();
        let changes = {
            let (ages, busy, threads) = self.period_view();
            let world = self.world(&ages, &busy, &threads);
            let fleet = Fleet {
                starting: self.starting.iter().sum::<usize>() > 0,
                idle_for_s: &idle,
            };
            policy.workers(&world, &fleet)
        };
        for c in changes {
            match c {
                WorkerChange::Add(h) => {
                    let gpu = h == HardwareKind::Gpu;
                    if self.may_grow(gpu) {
                        self.starting[usize::from(gpu)] += 1;
                        self.schedule(self.now + self.cluster.worker_start_ms, Kind::WorkerUp(gpu));
                        self.act("add-worker");
                    }
                }
                WorkerChange::Remove(w) => {
                    let removable = self.provisioned.get(w).copied().unwrap_or(false)
                        && self.worker_insts[w] == 0
                        && self.snapshot.workers()[w].alive;
                    if removable {
                        let id = self.snapshot.workers()[w].id.clone();
                        let _ = self.snapshot.remove_worker(&id);
                        self.act("remove-worker");
                    }
                }
            }
        }
    }

    fn worker_up(&mut self, gpu: bool) {
        self.starting[usize::from(gpu)] -= 1;
        self.workers_started += 1;
        let c = &self.cluster;
        let entry = if gpu {
            worker(
                format!("gpu-started-{}", self.workers_started),
                vec![HardwareKind::Cpu, HardwareKind::Gpu],
                c.gpu_worker_cores,
                c,
            )
        } else {
            worker(
                format!("cpu-started-{}", self.workers_started),
                vec![HardwareKind::Cpu],
                c.cpu_cores,
                c,
            )
        };
        if self.snapshot.add_worker(entry).is_ok() {
            self.provisioned.push(true);
            self.worker_insts.push(0);
            self.idle_since.push(self.now);
        }
    }

    fn busy(&self) -> bool {
        self.offline.iter().any(|j| j.done_rows < j.rows)
            || self
                .insts
                .iter()
                .any(|i| !i.gone && (!i.queue.is_empty() || !i.running.is_empty()))
    }

    fn run(&mut self, policy: &mut dyn Policy, progress: &mut dyn FnMut(usize, usize)) {
        let provision = {
            let world = self.world(&[], &[], &[]);
            policy.provision(&world)
        };
        self.apply(provision);
        self.started = true;
        self.schedule(self.cluster.tick_ms, Kind::Tick);
        if self.may_grow(false) || self.may_grow(true) {
            self.schedule(self.cluster.worker_tick_ms, Kind::WorkerTick);
        }
        for at in self
            .cluster
            .jobs
            .iter()
            .map(|j| j.at_ms)
            .collect::<Vec<_>>()
        {
            self.schedule(at, Kind::JobStep);
        }
        let trace = self.trace;
        let arrivals = &trace.arrivals;
        let total = arrivals.len();
        let mut next = 0;
        loop {
            let event_at = self
                .events
                .peek()
                .map(|Reverse((t, _, _))| f64::from_bits(*t));
            let arrival_at = arrivals.get(next).map(|a| a.at_ms);
            match (event_at, arrival_at) {
                (Some(t), a) if a.is_none_or(|a| t <= a) => {
                    let Some(Reverse((_, _, kind))) = self.events.pop() else {
                        break;
                    };
                    self.now = t;
                    match kind {
                        Kind::Done(e) => self.done(e),
                        Kind::Ready(e) => self.ready(e),
                        Kind::Resume(j) => self.advance(j),
                        Kind::WorkerUp(gpu) => self.worker_up(gpu),
                        Kind::JobStep => {
                            self.job_polling = false;
                            self.job_step();
                        }
                        Kind::WorkerTick => {
                            self.worker_tick(policy);
                            if next < total || self.busy() {
                                self.schedule(
                                    self.now + self.cluster.worker_tick_ms,
                                    Kind::WorkerTick,
                                );
                            }
                        }
                        Kind::Tick => {
                            self.tick(policy);
                            if next < total || self.busy() {
                                self.schedule(self.now + self.cluster.tick_ms, Kind::Tick);
                            }
                        }
                    }
                }
                (_, Some(a)) => {
                    self.now = a;
                    let q = arrivals[next];
                    next += 1;
                    self.arrive(&q, policy);
                    if next % 8_192 == 0 {
                        progress(next, total);
                    }
                }
                (None, None) => break,
                // Unreachable: an event without arrivals matches the first arm.
                (Some(_), None) => break,
            }
        }
        self.advance_cost(self.now);
        self.record_fleet(self.now);
        progress(total, total);
    }
}

/// Largest `Cluster::request_cpu_ms` the interfaces accept, ms.
pub const MAX_REQUEST_CPU_MS: f64 = 1_000.0;

/// Whether `ms` is a `Cluster::request_cpu_ms` the interfaces accept: 0 to
/// [`MAX_REQUEST_CPU_MS`].
pub fn request_cpu_ms_accepted(ms: f64) -> bool {
    ms.is_finite() && (0.0..=MAX_REQUEST_CPU_MS).contains(&ms)
}

/// The span over which a worker's query rate is averaged for the request path's share of its
/// cores, ms.
const EDGE_RATE_MS: f64 = 100.0;

/// How much slower batches on `worker` run at `now` (1: no noise).
fn noise_at(noise: &[Noise], worker: usize, now: f64) -> f64 {
    noise
        .iter()
        .filter(|n| n.worker == worker && n.from_ms <= now && now < n.until_ms)
        .map(|n| n.factor)
        .fold(1.0, f64::max)
}

/// Amdahl speed-up of `threads` threads with parallel fraction `p`.
fn amdahl(threads: usize, p: f64) -> f64 {
    1.0 / ((1.0 - p) + p / threads.max(1) as f64)
}

fn worker(id: String, hardware: Vec<HardwareKind>, cores: usize, c: &Cluster) -> WorkerEntry {
    WorkerEntry {
        id,
        hardware,
        cores,
        cpu_cores: cores,
        cores_used: 0,
        memory_bytes: c.worker_memory_bytes,
        memory_used: 0,
        alive: true,
        utilisation: 0.0,
        interference_seen: false,
        busy_threads: 0,
    }
}

/// Runs `policy` over `trace` on `cluster` with the variants `variants_for` made; `progress`
/// hears (queries done, queries in all) now and then.
pub fn simulate(
    trace: &Trace,
    variants: Vec<VariantEntry>,
    cluster: &Cluster,
    policy: &mut dyn Policy,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<PolicyReport, SimError> {
    run_engine(trace, variants, cluster, policy, progress, false).map(|(r, _)| r)
}

/// One decision of the simulator's job runner, with what it was decided on (recorded by
/// [`simulate_recording_jobs`]).
#[derive(Debug, Clone)]
pub struct JobStep {
    pub now_ms: f64,
    /// The job's application.
    pub app: String,
    /// The cluster as the decision saw it.
    pub snapshot: Snapshot,
    /// The online load of the last window.
    pub online: OnlineLoad,
    pub decision: Result<JobBatch, JobWait>,
    /// The id of the instance the batch ran on, when it ran.
    pub ran_on: Option<String>,
}

/// [`simulate`], recording every decision of the job runner with its inputs (a copy of the
/// cluster each): for comparing them with the controller's job runner.
pub fn simulate_recording_jobs(
    trace: &Trace,
    variants: Vec<VariantEntry>,
    cluster: &Cluster,
    policy: &mut dyn Policy,
) -> Result<(PolicyReport, Vec<JobStep>), SimError> {
    run_engine(trace, variants, cluster, policy, &mut |_, _| {}, true)
}

fn run_engine(
    trace: &Trace,
    variants: Vec<VariantEntry>,
    cluster: &Cluster,
    policy: &mut dyn Policy,
    progress: &mut dyn FnMut(usize, usize),
    record_jobs: bool,
) -> Result<(PolicyReport, Vec<JobStep>), SimError> {
    let started = std::time::Instant::now();
    let mut engine = Engine::new(trace, variants, cluster.clone())?;
    if record_jobs {
        engine.job_steps = Some(Vec::new());
    }
    engine.run(policy, progress);
    let mut r = report(
        &policy.name(),
        &engine.seconds,
        started.elapsed().as_secs_f64(),
    );
    r.jobs = engine.offline.clone();
    r.actions_by_kind = engine
        .actions_by_kind
        .iter()
        .map(|(k, n)| (k.to_string(), *n))
        .collect();
    r.misses_by_cause = MissCause::ALL
        .iter()
        .map(|c| (c.name().to_string(), engine.misses[*c as usize]))
        .collect();
    r.apps = trace
        .apps
        .iter()
        .zip(&engine.per_app)
        .map(|(name, tally)| app_summary(name, tally))
        .collect();
    Ok((r, engine.job_steps.take().unwrap_or_default()))
}
