//! The controller's view of the cluster: workers (the embedded one and remote processes),
//! their heartbeats and liveness, the state machine of every instance, and the selection
//! index (a [`Snapshot`]) that queries read without locks held across awaits.

pub mod catalog;
pub mod demand;
pub mod embedded;
#[cfg(test)]
pub(crate) mod fake;
pub mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use infaas_core::HardwareKind;
use infaas_executors::simulated::{LatencyProfile, ProfileError};
use infaas_scheduler::{
    next_state, offline::OnlineLoad, peak_qps, self_contended, Clock, InFlight, InFlightGuard,
    InstanceEntry, InstanceFigures, InstanceState, PendingLoad, Prices, Snapshot, Thresholds,
    WorkerEntry, BUSY_WITHIN_MS, INTERFERENCE_MEMORY_MS,
};
use infaas_store::Db;
use infaas_worker::{
    Heartbeat, InstanceReport, LoadRequest, NodeConfig, RemoteWorker, Worker, WorkerNode,
};

pub use infaas_worker::CallError;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// Settings of the embedded worker or a worker process; reads the simulated GPU's latency
/// profile when one is configured.
pub fn node_config(
    config: &Config,
    id: String,
    name: String,
    address: Option<String>,
) -> Result<NodeConfig, ProfileError> {
    let simulated_gpu = match &config.simulated_gpu_profile {
        Some(spec) => {
            let profile = LatencyProfile::load(spec)?;
            tracing::info!(
                worker = %name,
                profile = %profile.source,
                batch_sizes = profile.points.len(),
                p50_ms_at_1 = profile.p50_ms(1),
                "this worker offers a SIMULATED GPU: GPU variants run on the CPU and answer after the profiled latency"
            );
            Some(Arc::new(profile))
        }
        None => None,
    };
    let cores = config.worker_cores();
    Ok(NodeConfig {
        id,
        name,
        address,
        cores,
        thread_budget: config.worker_thread_budget.unwrap_or(cores * 4),
        memory_budget_bytes: config.worker_memory_bytes.unwrap_or_else(|| {
            infaas_worker::node::available_memory_bytes()
                .map(|m| m / 2)
                .unwrap_or(4 << 30)
        }),
        gpu: infaas_executors::runtime::gpu_available(),
        simulated_gpu,
        max_queue_delay: Duration::from_micros(config.max_queue_delay_us),
        inline_below: Duration::from_micros(config.inline_max_us),
        gather_rows: config.gather_rows,
        queue_capacity_rows: config.queue_capacity_rows,
        evict_idle_after: Duration::from_secs(config.evict_idle_secs),
    })
}

/// A worker as the control plane reaches it: the embedded node or a remote process.
pub type WorkerHandle = Arc<dyn Worker>;

struct WorkerSlot {
    handle: WorkerHandle,
    beat: Heartbeat,
    last_seen: Instant,
    alive: bool,
    /// Rows per second each instance (by variant id) served between the worker's previous
    /// report and its latest, from their `rows_total`: the embedded worker's over each
    /// monitoring window, as the simulator measures them; a remote worker's over its heartbeat
    /// period.
    rates: HashMap<String, f64>,
}

impl WorkerSlot {
    /// The instance's throughput figure: its rate over the last reporting span, or the
    /// worker's own (over its last seconds) before there are two reports of it.
    fn rate(&self, i: &InstanceReport) -> f64 {
        self.rates.get(&i.variant_id).copied().unwrap_or(i.qps)
    }
}

/// Rows per second each instance of `beat` served since `prev`, `secs` earlier (instances
/// new since, or reloaded, are left out).
fn rates_between(prev: &Heartbeat, beat: &Heartbeat, secs: f64) -> HashMap<String, f64> {
    beat.instances
        .iter()
        .filter_map(|i| {
            let before = prev
                .instances
                .iter()
                .find(|p| p.variant_id == i.variant_id)?;
            let rows = i.rows_total.checked_sub(before.rows_total)?;
            Some((i.variant_id.clone(), rows as f64 / secs))
        })
        .collect()
}

/// Reports closer together than this keep the rates of the previous span (too short to
/// measure a rate over).
const MIN_RATE_SPAN: Duration = Duration::from_millis(5);

pub use catalog::{Catalog, Served};

/// Online queries measured over windows of the monitoring period: how busy they keep the
/// workers and how many miss their SLO (what offline jobs yield to).
#[derive(Debug)]
pub struct OnlineMeter {
    length: Duration,
    window: Mutex<MeterWindow>,
}

#[derive(Debug, Default)]
struct MeterWindow {
    start: Option<Instant>,
    busy_ms: f64,
    queries: u64,
    with_slo: u64,
    missed: u64,
    last: OnlineLoad,
}

impl MeterWindow {
    /// Closes the window when it is `length` old (an empty one stands for the whole idle
    /// stretch).
    fn roll(&mut self, now: Instant, length: Duration) {
        let start = *self.start.get_or_insert(now);
        let elapsed = now.duration_since(start);
        if elapsed < length {
            return;
        }
        let secs = elapsed.as_secs_f64();
        self.last = OnlineLoad {
            busy_s_per_s: self.busy_ms / 1e3 / secs,
            qps: self.queries as f64 / secs,
            slo_miss_rate: if self.with_slo == 0 {
                0.0
            } else {
                self.missed as f64 / self.with_slo as f64
            },
        };
        *self = MeterWindow {
            start: Some(now),
            last: self.last,
            ..MeterWindow::default()
        };
    }
}

impl OnlineMeter {
    /// A meter whose windows last `length`.
    pub fn new(length: Duration) -> OnlineMeter {
        OnlineMeter {
            length,
            window: Mutex::new(MeterWindow::default()),
        }
    }

    pub fn record(&self, latency_ms: f64, slo_ms: Option<f64>) {
        if let Ok(mut w) = self.window.lock() {
            w.roll(Instant::now(), self.length);
            w.busy_ms += latency_ms;
            w.queries += 1;
            if let Some(slo) = slo_ms {
                w.with_slo += 1;
                if latency_ms > slo {
                    w.missed += 1;
                }
            }
        }
    }

    /// The last complete window.
    pub fn load(&self) -> OnlineLoad {
        match self.window.lock() {
            Ok(mut w) => {
                w.roll(Instant::now(), self.length);
                w.last
            }
            Err(_) => OnlineLoad::default(),
        }
    }
}

pub struct Cluster {
    /// Online query figures (offline jobs read them).
    pub online: OnlineMeter,
    db: Db,
    prices: Prices,
    thresholds: Thresholds,
    /// Amdahl parallel fraction a resized instance's peak is judged by
    /// (`autoscale.vertical_parallel_fraction`).
    parallel_fraction: f64,
    heartbeat_timeout: Duration,
    /// The monitoring window: figures and instance states are judged this often (the model
    /// autoscaler's period, at most a second), as the simulator judges them every tick.
    monitor_period: Duration,
    local: Option<Arc<WorkerNode>>,
    workers: RwLock<HashMap<String, WorkerSlot>>,
    catalog: RwLock<Arc<Catalog>>,
    /// Live in-flight rows per instance id, attached to every rebuilt snapshot.
    in_flight: Mutex<HashMap<String, InFlight>>,
    states: Mutex<HashMap<String, InstanceState>>,
    snapshot: RwLock<Arc<Snapshot>>,
    /// Refreshes run one at a time, so an older read never replaces a newer one.
    refreshing: tokio::sync::Mutex<()>,
    /// Index rebuilds and catalog installs run one at a time, so that an index built from an
    /// older catalog is never published after a newer catalog ([`Cluster::install_catalog`]).
    rebuilding: Mutex<()>,
    /// Rows that arrived per variant, read by the autoscaler.
    pub demand: demand::DemandMeter,
    /// Instances being unloaded (by id): out of the index so no new query goes there.
    draining: Mutex<HashMap<String, Instant>>,
    /// Workers being stopped (by id): out of the index so nothing new goes there.
    draining_workers: Mutex<HashMap<String, Instant>>,
    /// Loads started for queries (by variant id), until their instance is in the index.
    pending: Mutex<HashMap<String, Pending>>,
    /// The time base of the index's pending loads.
    epoch: Instant,
    /// Per worker id: when an instance on it was last found Interfered (placement avoids it
    /// for [`INTERFERENCE_MEMORY_MS`]).
    interference_at: Mutex<HashMap<String, Instant>>,
    /// Per instance id, the queries with an SLO it answered since the last monitoring period
    /// and how many of them were late (what [`next_state`] judges overload by).
    slo_outcomes: Mutex<HashMap<String, SloOutcomes>>,
}

/// Queries with an SLO answered by one instance over a monitoring period.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SloOutcomes {
    pub answered: u64,
    pub late: u64,
}

/// Whether an instance is busy: it served within [`BUSY_WITHIN_MS`], or has rows queued or
/// a batch running.
pub fn is_busy(i: &InstanceReport) -> bool {
    (i.idle_ms as f64) < BUSY_WITHIN_MS || i.queue_rows > 0 || i.in_flight
}

/// Intra-op threads of a worker's busy CPU instances (served within [`BUSY_WITHIN_MS`], or
/// with rows queued or a batch running); `is_cpu` says which
/// of its instances' variants run on the CPU.
pub fn busy_threads(beat: &Heartbeat, is_cpu: impl Fn(&str) -> bool) -> usize {
    beat.instances
        .iter()
        .filter(|i| is_busy(i) && is_cpu(&i.variant_id))
        .map(|i| i.threads)
        .sum()
}

/// A load under way that queries wait for (see [`PendingLoad`]).
struct Pending {
    worker: String,
    started: Instant,
    waiting: InFlight,
}

/// A load started for queries whose instance is not ready yet ([`Cluster::pending_loads`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LoadUnderWay {
    pub worker_id: String,
    pub variant_id: String,
    /// Since the load started.
    pub elapsed: Duration,
    /// Rows of queries waiting for it now.
    pub waiting_rows: usize,
}

/// [`INTERFERENCE_MEMORY_MS`] on the wall clock.
const INTERFERENCE_MEMORY: Duration = Duration::from_millis(INTERFERENCE_MEMORY_MS as u64);

/// How long a load is counted as under way at most (one whose query went away is forgotten).
const PENDING_TTL: Duration = Duration::from_secs(120);

/// How long a drained instance or worker stays out of the index at most (a worker that still
/// reports it after this is shown again).
const DRAIN_TTL: Duration = Duration::from_secs(60);
/// How long a drained instance stays out of the index at least.
const DRAIN_MIN: Duration = Duration::from_secs(5);

/// How often the serving catalog is read again from the store.
const CATALOG_REFRESH: Duration = Duration::from_secs(2);

/// The monitoring window: the model autoscaler's period (`autoscale.model_interval_ms`), so
/// that each of its periods sees states judged over its own window as the simulator's tick
/// does, at most a second (what the monitoring loop ran at before the period was a setting).
pub fn monitor_period(config: &Config) -> Duration {
    Duration::from_millis(config.autoscale.model_interval_ms.clamp(10, 1_000))
}

/// Instance ids in the index: `{worker id}/{variant id}`.
pub fn instance_id(worker: &str, variant: &str) -> String {
    format!("{worker}/{variant}")
}

impl Cluster {
    pub fn new(db: Db, config: &Config, local: Option<Arc<WorkerNode>>) -> Arc<Cluster> {
        let cluster = Arc::new(Cluster {
            db,
            prices: config.prices,
            thresholds: Thresholds {
                enter_interference: config.autoscale.interference_factor,
                exit_interference: 0.8 * config.autoscale.interference_factor,
                window_ms: monitor_period(config).as_secs_f64() * 1e3,
                ..Thresholds::default()
            },
            parallel_fraction: config.autoscale.vertical_parallel_fraction,
            heartbeat_timeout: Duration::from_millis(config.heartbeat_timeout_ms),
            monitor_period: monitor_period(config),
            local: local.clone(),
            workers: RwLock::new(HashMap::new()),
            catalog: RwLock::new(Arc::new(Catalog::default())),
            in_flight: Mutex::new(HashMap::new()),
            states: Mutex::new(HashMap::new()),
            snapshot: RwLock::new(Arc::new(Snapshot::builder().build())),
            refreshing: tokio::sync::Mutex::new(()),
            rebuilding: Mutex::new(()),
            online: OnlineMeter::new(monitor_period(config)),
            demand: Default::default(),
            draining: Mutex::new(HashMap::new()),
            draining_workers: Mutex::new(HashMap::new()),
            pending: Mutex::new(HashMap::new()),
            epoch: Instant::now(),
            interference_at: Mutex::new(HashMap::new()),
            slo_outcomes: Mutex::new(HashMap::new()),
        });
        if let Some(node) = local {
            cluster.upsert_worker(node.clone() as WorkerHandle, node.heartbeat());
        }
        cluster
    }

    pub fn prices(&self) -> &Prices {
        &self.prices
    }

    /// The selection index as of the last change.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The served variants as of the last refresh.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog
            .read()
            .map(|c| c.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    pub fn served(&self, variant_id: &str) -> Option<Arc<Served>> {
        self.catalog().variant(variant_id).cloned()
    }

    pub fn handle(&self, worker_id: &str) -> Option<WorkerHandle> {
        let workers = self.workers.read().ok()?;
        workers
            .get(worker_id)
            .filter(|w| w.alive)
            .map(|w| w.handle.clone())
    }

    /// A worker's heartbeat through `handle`: registers it when new (the index is rebuilt by
    /// the next change or [`Cluster::rebuild`]).
    pub(crate) fn upsert_worker(&self, handle: WorkerHandle, beat: Heartbeat) {
        if let Ok(mut workers) = self.workers.write() {
            let id = beat.worker.id.clone();
            match workers.get_mut(&id) {
                Some(slot) => {
                    let span = slot.last_seen.elapsed();
                    if span >= MIN_RATE_SPAN {
                        slot.rates = rates_between(&slot.beat, &beat, span.as_secs_f64());
                        slot.last_seen = Instant::now();
                    }
                    slot.beat = beat;
                    slot.alive = true;
                }
                None => {
                    tracing::info!(worker = %beat.worker.name, address = ?beat.worker.address, "worker joined");
                    workers.insert(
                        id,
                        WorkerSlot {
                            handle,
                            beat,
                            last_seen: Instant::now(),
                            alive: true,
                            rates: HashMap::new(),
                        },
                    );
                }
            }
        }
    }

    /// A heartbeat of a remote worker: registers it when new.
    pub fn on_heartbeat(&self, beat: Heartbeat, token: &str) {
        if self
            .local
            .as_ref()
            .is_some_and(|node| node.info().id == beat.worker.id)
        {
            // This replica's own embedded worker, announced back to it: it is already here.
            return;
        }
        let handle = beat
            .worker
            .address
            .as_deref()
            .map(|a| Arc::new(RemoteWorker::new(a, token)) as WorkerHandle);
        if let Some(handle) = handle {
            self.upsert_worker(handle, beat);
            self.rebuild();
        }
    }

    /// Why this controller cannot serve yet, while it is warming up: for up to two liveness
    /// timeouts (at least 5 s: a worker hears of a new replica within three heartbeats) after
    /// it started, as long as it has heard from no live worker
    /// that can host an instance. A replica that just started behind a load balancer is in this
    /// state until the workers, told of it by the other replicas' heartbeat answers, report to
    /// it; its queries that find no room answer 503 meanwhile, and `/readyz` says not ready.
    pub fn warming_up(&self) -> Option<String> {
        let window = (2 * self.heartbeat_timeout).max(Duration::from_secs(5));
        let age = self.epoch.elapsed();
        if age >= window {
            return None;
        }
        let hosts = self.workers.read().map_or(true, |workers| {
            workers
                .values()
                .any(|w| w.alive && w.beat.worker.thread_budget > 0)
        });
        (!hosts).then(|| {
            format!(
                "this controller started {:.1} s ago and has not yet heard from a worker that can host instances; retry in a moment",
                age.as_secs_f64()
            )
        })
    }

    /// Marks a worker dead at once (it failed a call); its next heartbeat revives it.
    pub fn suspect(&self, worker_id: &str) {
        if let Ok(mut workers) = self.workers.write() {
            if let Some(w) = workers.get_mut(worker_id) {
                if !w.handle.is_embedded() && w.alive {
                    tracing::warn!(worker = %w.beat.worker.name, "worker failed a call; taken out of the index");
                    w.alive = false;
                }
            }
        }
        self.rebuild();
    }

    /// A load of `variant_id` on `worker_id` started for queries: selection counts what a
    /// query that joins it waits for (the rest of the load and the rows already waiting) from
    /// now on. Returns the counter of the rows waiting for it, which a waiting query enters.
    /// One load per variant: a second start of one under way joins it.
    pub fn load_started(&self, worker_id: &str, variant_id: &str) -> InFlight {
        self.start_load(worker_id, variant_id).0
    }

    /// [`Cluster::load_started`], also saying whether this call started the load (`true`) or
    /// joined one under way (`false`).
    pub fn start_load(&self, worker_id: &str, variant_id: &str) -> (InFlight, bool) {
        let (counter, new) = match self.pending.lock() {
            Ok(mut pending) => {
                let new = !pending.contains_key(variant_id);
                let p = pending
                    .entry(variant_id.to_owned())
                    .or_insert_with(|| Pending {
                        worker: worker_id.to_owned(),
                        started: Instant::now(),
                        waiting: InFlight::default(),
                    });
                (p.waiting.clone(), new)
            }
            Err(_) => (InFlight::default(), false),
        };
        if new {
            self.rebuild();
        }
        (counter, new)
    }

    /// The loads under way for queries, for operators: where each runs, how long ago it
    /// started and how many rows wait for it (loads older than the index keeps are left out).
    pub fn pending_loads(&self) -> Vec<LoadUnderWay> {
        let Ok(pending) = self.pending.lock() else {
            return Vec::new();
        };
        let mut loads: Vec<LoadUnderWay> = pending
            .iter()
            .filter(|(_, p)| p.started.elapsed() < PENDING_TTL)
            .map(|(variant_id, p)| LoadUnderWay {
                worker_id: p.worker.clone(),
                variant_id: variant_id.clone(),
                elapsed: p.started.elapsed(),
                waiting_rows: p.waiting.get(),
            })
            .collect();
        loads.sort_by_key(|l| std::cmp::Reverse(l.elapsed));
        loads
    }

    /// Counts `rows` in flight on the instance of `variant_id` on `worker_id` until the guard
    /// drops (`None` when the index does not have it).
    pub fn enter(&self, worker_id: &str, variant_id: &str, rows: usize) -> Option<InFlightGuard> {
        let counter = self
            .in_flight
            .lock()
            .ok()?
            .get(&instance_id(worker_id, variant_id))?
            .clone();
        Some(counter.enter(rows))
    }

    /// Records a query with an SLO answered by the instance of `variant_id` on `worker_id`,
    /// late or in time (the instance's state is judged on these every monitoring period).
    pub fn record_answer(&self, worker_id: &str, variant_id: &str, latency_ms: f64, slo_ms: f64) {
        if let Ok(mut o) = self.slo_outcomes.lock() {
            let e = o.entry(instance_id(worker_id, variant_id)).or_default();
            e.answered += 1;
            if latency_ms > slo_ms {
                e.late += 1;
            }
        }
    }

    /// A load started with [`Cluster::load_started`] failed: selection no longer counts it.
    pub fn load_failed(&self, variant_id: &str) {
        let removed = self
            .pending
            .lock()
            .is_ok_and(|mut p| p.remove(variant_id).is_some());
        if removed {
            self.rebuild();
        }
    }

    /// Records a load that just completed so the next query sees the instance.
    pub fn loaded(&self, worker_id: &str, req: &LoadRequest) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&req.variant_id);
        }
        // A load that completes after a drain is a new instance: the drain that kept the old
        // one out of the index must not hide it (the query path would load it again and
        // again, each load answered "already loaded").
        if let Ok(mut d) = self.draining.lock() {
            d.remove(&instance_id(worker_id, &req.variant_id));
        }
        if let Ok(mut workers) = self.workers.write() {
            if let Some(w) = workers.get_mut(worker_id) {
                if !w
                    .beat
                    .instances
                    .iter()
                    .any(|i| i.variant_id == req.variant_id)
                {
                    w.beat.threads_used += req.threads;
                    w.beat.memory_used_bytes += req.memory_bytes;
                    w.beat.instances.push(InstanceReport {
                        variant_id: req.variant_id.clone(),
                        variant_name: req.variant_name.clone(),
                        threads: req.threads,
                        max_batch: req.max_batch,
                        memory_bytes: req.memory_bytes,
                        queue_rows: 0,
                        in_flight: false,
                        requests_total: 0,
                        rows_total: 0,
                        errors_total: 0,
                        qps: 0.0,
                        latency_p50_ms: 0.0,
                        latency_p99_ms: 0.0,
                        exec_p50_ms: 0.0,
                        exec_p99_ms: 0.0,
                        batch_histogram: Vec::new(),
                        idle_ms: 0,
                    });
                }
            }
        }
        self.rebuild();
    }

    /// Takes an instance out of the index before it is unloaded: new queries go elsewhere
    /// while those already sent finish.
    pub fn drain_instance(&self, worker_id: &str, variant_id: &str) {
        if let Ok(mut d) = self.draining.lock() {
            d.insert(instance_id(worker_id, variant_id), Instant::now());
        }
        self.rebuild();
    }

    /// Whether an instance is being unloaded.
    pub fn is_draining(&self, worker_id: &str, variant_id: &str) -> bool {
        self.draining
            .lock()
            .is_ok_and(|d| d.contains_key(&instance_id(worker_id, variant_id)))
    }

    /// Records an unload that completed so the index forgets the instance at once.
    pub fn unloaded(&self, worker_id: &str, variant_id: &str) {
        if let Ok(mut workers) = self.workers.write() {
            if let Some(w) = workers.get_mut(worker_id) {
                if let Some(pos) = w
                    .beat
                    .instances
                    .iter()
                    .position(|i| i.variant_id == variant_id)
                {
                    let i = w.beat.instances.remove(pos);
                    w.beat.threads_used = w.beat.threads_used.saturating_sub(i.threads);
                    w.beat.memory_used_bytes =
                        w.beat.memory_used_bytes.saturating_sub(i.memory_bytes);
                }
            }
        }
        self.rebuild();
    }

    /// Records a resize that completed (the instance's threads in the index).
    pub fn resized(&self, worker_id: &str, variant_id: &str, threads: usize) {
        if let Ok(mut workers) = self.workers.write() {
            if let Some(w) = workers.get_mut(worker_id) {
                if let Some(i) = w
                    .beat
                    .instances
                    .iter_mut()
                    .find(|i| i.variant_id == variant_id)
                {
                    w.beat.threads_used =
                        w.beat.threads_used - i.threads.min(w.beat.threads_used) + threads;
                    i.threads = threads;
                }
            }
        }
        self.rebuild();
    }

    /// Takes a worker out of the index before it is stopped.
    pub fn drain_worker(&self, worker_id: &str) {
        if let Ok(mut d) = self.draining_workers.lock() {
            d.insert(worker_id.to_string(), Instant::now());
        }
        self.rebuild();
    }

    /// Intra-op threads of every instance as the workers last reported them, by instance id.
    pub fn instance_threads(&self) -> HashMap<String, usize> {
        self.workers
            .read()
            .map(|w| {
                w.values()
                    .flat_map(|s| {
                        s.beat
                            .instances
                            .iter()
                            .map(|i| (instance_id(&s.beat.worker.id, &i.variant_id), i.threads))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Live workers by name: `name -> id`.
    pub fn worker_ids_by_name(&self) -> HashMap<String, String> {
        self.workers
            .read()
            .map(|w| {
                w.values()
                    .filter(|s| s.alive)
                    .map(|s| (s.beat.worker.name.clone(), s.beat.worker.id.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Names of workers by id (live or not).
    pub fn worker_name(&self, worker_id: &str) -> Option<String> {
        self.workers
            .read()
            .ok()?
            .get(worker_id)
            .map(|s| s.beat.worker.name.clone())
    }

    /// Forgets drains that are over: the worker no longer reports the instance, or the
    /// worker is gone.
    fn expire_drains(&self) {
        let Ok(workers) = self.workers.read() else {
            return;
        };
        if let Ok(mut d) = self.draining.lock() {
            d.retain(|id, since| {
                let reported = id.split_once('/').is_some_and(|(w, v)| {
                    workers.get(w).is_some_and(|s| {
                        s.alive && s.beat.instances.iter().any(|i| i.variant_id == v)
                    })
                });
                // Kept a little past the unload: a heartbeat sent just before it must not
                // bring the instance back.
                since.elapsed() < DRAIN_MIN || (reported && since.elapsed() < DRAIN_TTL)
            });
        }
        if let Ok(mut d) = self.draining_workers.lock() {
            d.retain(|id, since| {
                workers.get(id).is_some_and(|s| s.alive) && since.elapsed() < DRAIN_TTL
            });
        }
    }

    /// Reloads the served variants from the database.
    pub async fn refresh_catalog(&self) -> Result<(), infaas_store::StoreError> {
        let _one_at_a_time = self.refreshing.lock().await;
        self.install_catalog(Catalog::build(self.db.serving_catalog().await?));
        Ok(())
    }

    /// Serves `fresh` from now on, and rebuilds the index, unless it holds the same variants.
    /// The index built from `fresh` is published before `fresh` itself, and no rebuild runs in
    /// between: a query that finds a model in the catalog finds its variants in the index (it
    /// read the catalog first), never an index of the catalog before.
    pub fn install_catalog(&self, fresh: Catalog) {
        if self.catalog().same_variants(&fresh) {
            return;
        }
        let fresh = Arc::new(fresh);
        let _one_at_a_time = self.rebuilding.lock();
        self.rebuild_from(&fresh);
        if let Ok(mut c) = self.catalog.write() {
            *c = fresh;
        }
    }

    /// The embedded worker, when this controller has one.
    pub fn embedded(&self) -> Option<&Arc<WorkerNode>> {
        self.local.as_ref()
    }

    /// The embedded worker's latest heartbeat (from the last monitoring period), as the
    /// other controller replicas are told of it.
    pub fn embedded_beat(&self) -> Option<Heartbeat> {
        let id = self.local.as_ref()?.info().id;
        let workers = self.workers.read().ok()?;
        workers.get(&id).map(|w| w.beat.clone())
    }

    /// One monitoring period: the embedded worker's figures, liveness, instance states.
    pub fn tick(&self) {
        if let Some(node) = &self.local {
            self.upsert_worker(node.clone() as WorkerHandle, node.heartbeat());
        }
        if let Ok(mut workers) = self.workers.write() {
            for w in workers.values_mut() {
                let stale = w.last_seen.elapsed() > self.heartbeat_timeout;
                if w.alive && stale && !w.handle.is_embedded() {
                    tracing::warn!(worker = %w.beat.worker.name, "no heartbeat: worker marked dead");
                    w.alive = false;
                }
            }
            // Forget workers that have been dead for a long time.
            workers.retain(|_, w| w.alive || w.last_seen.elapsed() < self.heartbeat_timeout * 20);
        }
        self.update_states();
        self.expire_drains();
        self.rebuild();
    }

    fn update_states(&self) {
        let catalog = self.catalog();
        let Ok(workers) = self.workers.read() else {
            return;
        };
        let Ok(mut states) = self.states.lock() else {
            return;
        };
        let mut seen = std::collections::HashSet::new();
        let outcomes = self
            .slo_outcomes
            .lock()
            .map(|mut o| std::mem::take(&mut *o))
            .unwrap_or_default();
        let is_cpu = |variant_id: &str| cpu_variant(&catalog, variant_id);
        for w in workers.values().filter(|w| w.alive) {
            let contended = self_contended(
                busy_threads(&w.beat, is_cpu),
                w.beat.worker.cores,
                w.beat.own_utilisation,
                w.beat.utilisation,
                &self.thresholds,
            );
            for i in &w.beat.instances {
                let id = instance_id(&w.beat.worker.id, &i.variant_id);
                let Some(served) = catalog.variant(&i.variant_id) else {
                    continue;
                };
                let v = &served.entry.variant;
                let typical = v
                    .latency
                    .iter()
                    .find(|p| p.batch >= typical_batch(i))
                    .or(v.latency.last());
                let (peak, p99_profiled) = match (
                    v.latency
                        .iter()
                        .find(|p| p.batch >= v.max_batch)
                        .or(v.latency.last()),
                    typical,
                ) {
                    // An instance resized in place serves at its threads' peak (Amdahl),
                    // not its variant's: judged against the profile, it would stay
                    // Overloaded after the threads that relieve it.
                    (Some(max), Some(t)) => (
                        infaas_scheduler::autoscale::vertical::amdahl_peak(
                            peak_qps(max.batch, max.mean_ms),
                            v.threads.max(1),
                            i.threads.max(1),
                            self.parallel_fraction,
                        ),
                        t.p99_ms,
                    ),
                    _ => continue,
                };
                let figures = InstanceFigures {
                    loaded: true,
                    qps: w.rate(i),
                    peak_qps: peak,
                    queue_len: i.queue_rows,
                    max_batch: i.max_batch,
                    // An instance that served nothing in the window has no current latency
                    // (its percentiles are stale), so it cannot stay Interfered on them.
                    p99_ms_observed: (i.requests_total > 0 && i.qps > 0.0 && i.exec_p99_ms > 0.0)
                        .then_some(i.exec_p99_ms),
                    p99_ms_profiled: p99_profiled,
                    slo_answered: outcomes.get(&id).map_or(0, |o| o.answered),
                    slo_late: outcomes.get(&id).map_or(0, |o| o.late),
                    self_contended: contended,
                };
                let prev = states.get(&id).copied().unwrap_or(InstanceState::Inactive);
                let next = next_state(prev, &figures, &self.thresholds);
                if next != prev {
                    tracing::info!(instance = %id, variant = %i.variant_name, from = prev.as_str(), to = next.as_str(), "instance state changed");
                }
                if next == InstanceState::Interfered {
                    if let Ok(mut at) = self.interference_at.lock() {
                        at.insert(w.beat.worker.id.clone(), Instant::now());
                    }
                }
                states.insert(id.clone(), next);
                seen.insert(id);
            }
        }
        states.retain(|id, _| seen.contains(id));
        if let Ok(mut at) = self.interference_at.lock() {
            at.retain(|_, t| t.elapsed() <= INTERFERENCE_MEMORY);
        }
    }

    /// Rebuilds the selection index from the catalog, live workers and their instances.
    pub fn rebuild(&self) {
        let _one_at_a_time = self.rebuilding.lock();
        self.rebuild_from(&self.catalog());
    }

    /// [`Self::rebuild`] from `catalog`; the caller holds `rebuilding`.
    fn rebuild_from(&self, catalog: &Catalog) {
        let Ok(workers) = self.workers.read() else {
            return;
        };
        let states = self.states.lock().map(|s| s.clone()).unwrap_or_default();
        let noisy: std::collections::HashSet<String> = self
            .interference_at
            .lock()
            .map(|at| {
                at.iter()
                    .filter(|(_, t)| t.elapsed() <= INTERFERENCE_MEMORY)
                    .map(|(w, _)| w.clone())
                    .collect()
            })
            .unwrap_or_default();
        let draining = self.draining.lock().map(|d| d.clone()).unwrap_or_default();
        let draining_workers = self
            .draining_workers
            .lock()
            .map(|d| d.clone())
            .unwrap_or_default();
        let mut b = Snapshot::builder();
        let mut served: Vec<&Arc<Served>> = catalog.variants().collect();
        served.sort_by(|a, b| a.entry.variant.id.cmp(&b.entry.variant.id));
        for s in served {
            let entry = s.selector_entry(schema::app_key(&s.entry.app, &s.schema_key));
            if let Err(e) = b.add_variant(&s.entry.tenant_id, entry) {
                tracing::debug!(variant = %s.entry.variant.name, error = %e, "variant left out of the index");
            }
        }
        let mut worker_idx = HashMap::new();
        for w in workers.values() {
            // Instances idle long enough to be evicted do not count against the budget.
            let evictable: (usize, u64) = w
                .beat
                .instances
                .iter()
                .filter(|i| i.idle_ms > 30_000 && i.queue_rows == 0 && !i.in_flight)
                .fold((0, 0), |(t, m), i| (t + i.threads, m + i.memory_bytes));
            let entry = WorkerEntry {
                id: w.beat.worker.id.clone(),
                hardware: w.beat.worker.hardware.clone(),
                cores: w.beat.worker.thread_budget,
                cpu_cores: w.beat.worker.cores,
                cores_used: w.beat.threads_used.saturating_sub(evictable.0),
                memory_bytes: w.beat.worker.memory_budget_bytes,
                memory_used: w.beat.memory_used_bytes.saturating_sub(evictable.1),
                alive: w.alive && !draining_workers.contains_key(&w.beat.worker.id),
                utilisation: w.beat.utilisation,
                interference_seen: noisy.contains(&w.beat.worker.id),
                busy_threads: busy_threads(&w.beat, |v| cpu_variant(catalog, v)),
            };
            if let Ok(idx) = b.add_worker(entry) {
                worker_idx.insert(w.beat.worker.id.clone(), idx);
            }
        }
        let mut snapshot = b.build();
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return;
        };
        let mut live = HashMap::with_capacity(in_flight.len());
        for w in workers.values().filter(|w| w.alive) {
            let Some(&widx) = worker_idx.get(&w.beat.worker.id) else {
                continue;
            };
            for i in &w.beat.instances {
                let Some(vidx) = snapshot.variant_index(&i.variant_id) else {
                    continue;
                };
                let id = instance_id(&w.beat.worker.id, &i.variant_id);
                if draining.contains_key(&id) {
                    continue;
                }
                let state = states.get(&id).copied().unwrap_or(InstanceState::Active);
                let counter = in_flight.remove(&id).unwrap_or_default();
                if let Ok(idx) = snapshot.add_instance(InstanceEntry {
                    id: id.clone(),
                    variant: vidx,
                    worker: widx,
                    state,
                    queue_len: i.queue_rows,
                    qps: w.rate(i),
                }) {
                    let _ = snapshot.attach_in_flight(idx, counter.clone());
                    live.insert(id, counter);
                }
            }
        }
        // Counters of instances that left the index are dropped with the old map.
        *in_flight = live;
        drop(in_flight);
        snapshot.set_clock(Clock::Wall(self.epoch));
        if let Ok(mut pending) = self.pending.lock() {
            pending.retain(|variant_id, p| {
                let loaded = workers
                    .get(&p.worker)
                    .is_some_and(|w| w.beat.instances.iter().any(|i| &i.variant_id == variant_id));
                !loaded && p.started.elapsed() < PENDING_TTL
            });
            for (variant_id, p) in pending.iter() {
                let (Some(variant), Some(&worker)) = (
                    snapshot.variant_index(variant_id),
                    worker_idx.get(&p.worker),
                ) else {
                    continue;
                };
                let _ = snapshot.add_pending_load(PendingLoad {
                    variant,
                    worker,
                    started_ms: p
                        .started
                        .saturating_duration_since(self.epoch)
                        .as_secs_f64()
                        * 1e3,
                    waiting: 0,
                    live: p.waiting.clone(),
                });
            }
        }
        if let Ok(mut s) = self.snapshot.write() {
            *s = Arc::new(snapshot);
        }
    }

    /// Monitoring loop: figures and states every monitoring window ([`monitor_period`]),
    /// the catalog every two seconds.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut refreshed: Option<Instant> = None;
        loop {
            if refreshed.is_none_or(|t| t.elapsed() >= CATALOG_REFRESH) {
                refreshed = Some(Instant::now());
                if let Err(e) = self.refresh_catalog().await {
                    tracing::error!(error = %e, "cannot refresh the serving catalog");
                }
            }
            self.tick();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(self.monitor_period) => {}
            }
        }
    }

    /// Workers as the API shows them.
    pub fn workers_view(&self) -> Vec<(Heartbeat, bool, u64)> {
        self.workers
            .read()
            .map(|w| {
                w.values()
                    .map(|s| {
                        (
                            s.beat.clone(),
                            s.alive,
                            s.last_seen.elapsed().as_millis() as u64,
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn instance_state(&self, worker: &str, variant: &str) -> InstanceState {
        self.states
            .lock()
            .ok()
            .and_then(|s| s.get(&instance_id(worker, variant)).copied())
            .unwrap_or(InstanceState::Active)
    }

    /// Whether some live worker offers a GPU, real or simulated (GPU variants are generated
    /// only then).
    pub fn gpu_offered(&self) -> bool {
        self.workers.read().is_ok_and(|w| {
            w.values()
                .any(|s| s.alive && s.beat.worker.hardware.contains(&HardwareKind::Gpu))
        })
    }

    /// The latency profile of a live worker's simulated GPU (the first by worker name), which
    /// GPU variants are profiled with when the controller has no GPU of its own.
    pub fn simulated_gpu(&self) -> Option<LatencyProfile> {
        let workers = self.workers.read().ok()?;
        let mut live: Vec<&WorkerSlot> = workers
            .values()
            .filter(|s| s.alive && s.beat.worker.simulated_gpu.is_some())
            .collect();
        live.sort_by(|a, b| a.beat.worker.name.cmp(&b.beat.worker.name));
        live.first()
            .and_then(|s| s.beat.worker.simulated_gpu.clone())
    }

    pub fn hardware_of(&self, variant_id: &str) -> HardwareKind {
        self.served(variant_id)
            .map(|s| s.entry.variant.hardware)
            .unwrap_or(HardwareKind::Cpu)
    }
}

/// Whether a variant of the catalog runs on the CPU (an unknown one counts as CPU).
fn cpu_variant(catalog: &Catalog, variant_id: &str) -> bool {
    catalog
        .variant(variant_id)
        .is_none_or(|s| s.entry.variant.hardware == HardwareKind::Cpu)
}

fn typical_batch(i: &InstanceReport) -> usize {
    i.batch_histogram
        .iter()
        .max_by_key(|(_, n)| *n)
        .map(|(b, _)| *b)
        .unwrap_or(1)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod window_tests {
    use infaas_worker::WorkerInfo;

    use super::*;

    fn report(variant: &str, rows_total: u64, qps: f64) -> InstanceReport {
        InstanceReport {
            variant_id: variant.into(),
            variant_name: variant.into(),
            threads: 1,
            max_batch: 8,
            memory_bytes: 0,
            queue_rows: 0,
            in_flight: false,
            requests_total: rows_total,
            rows_total,
            errors_total: 0,
            qps,
            latency_p50_ms: 1.0,
            latency_p99_ms: 1.0,
            exec_p50_ms: 1.0,
            exec_p99_ms: 1.0,
            batch_histogram: Vec::new(),
            idle_ms: 0,
        }
    }

    fn beat(instances: Vec<InstanceReport>) -> Heartbeat {
        Heartbeat {
            worker: WorkerInfo {
                id: "w".into(),
                name: "w".into(),
                address: None,
                hardware: vec![HardwareKind::Cpu],
                cores: 2,
                thread_budget: 8,
                memory_budget_bytes: 1 << 30,
                simulated_gpu: None,
            },
            threads_used: 0,
            memory_used_bytes: 0,
            utilisation: 0.0,
            own_utilisation: 0.0,
            instances,
        }
    }

    /// An instance's rate is what it served between two reports (the window), not the
    /// worker's figure over its last seconds; instances new since, or reloaded, have none.
    #[test]
    fn rates_are_measured_over_the_span_between_two_reports() {
        let before = beat(vec![report("a", 1_000, 0.0), report("b", 500, 0.0)]);
        let after = beat(vec![
            report("a", 1_100, 900.0),
            report("b", 20, 7.0),
            report("c", 30, 60.0),
        ]);
        let rates = rates_between(&before, &after, 0.25);
        assert_eq!(rates.len(), 1, "{rates:?}");
        assert!((rates["a"] - 400.0).abs() < 1e-9);
        let slot = WorkerSlot {
            handle: Arc::new(fake::FakeWorker::default()),
            beat: after.clone(),
            last_seen: Instant::now(),
            alive: true,
            rates,
        };
        // Measured where there are two reports, the worker's own figure otherwise.
        let by = |v: &str| slot.rate(after.instances.iter().find(|i| i.variant_id == v).unwrap());
        assert_eq!((by("a"), by("b"), by("c")), (400.0, 7.0, 60.0));
    }

    #[test]
    fn the_monitoring_window_is_the_model_period_up_to_a_second() {
        let mut c = Config::default();
        assert_eq!(monitor_period(&c), Duration::from_millis(250));
        c.autoscale.model_interval_ms = 5_000;
        assert_eq!(monitor_period(&c), Duration::from_secs(1));
        let meter = OnlineMeter::new(monitor_period(&c));
        assert_eq!(meter.length, Duration::from_secs(1));
    }
}
