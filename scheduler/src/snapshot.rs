//! The controller's in-memory index of variants, workers and instances that policies read.
//!
//! Everything is addressed by index (`usize` into the snapshot's vectors) so the hot path never
//! hashes an id; the only hashed look-ups are tenant, application and model names. Indexes kept
//! beside the vectors:
//! - (tenant, app) -> variant indices, sorted by accuracy (descending), then by p99 at batch 1;
//! - (tenant, model) -> variant indices, in the same order;
//! - variant -> its instances on live workers; worker -> its instances;
//! - hardware kind -> live workers that have it.
//!
//! Load figures and states change in place in O(1); a removed worker's instances leave the
//! indexes at once. Beside each variant's instances the snapshot keeps their reported queues
//! (Active ones only) in one compact array and counts its Active instances, so that selection
//! finds a variant's shortest Active queue ([`Snapshot::shortest_active`]) without reading every
//! instance entry. An instance can also have a live in-flight counter ([`InFlight`],
//! [`Snapshot::attach_in_flight`]) that the query path raises and lowers as it dispatches and
//! answers queries, so selection sees a queue build up at once rather than at the next
//! heartbeat (the controller attaches one to every instance; the simulator, whose reported
//! queues are exact, none). Removed instances keep their slot
//! (indices stay valid, state Inactive) until the controller rebuilds the snapshot.
//!
//! A load started on demand, before its instance exists, is a [`PendingLoad`]: where it runs,
//! when it started (on the snapshot's [`Clock`]) and the rows of the queries waiting for it, so
//! that selection predicts what a query that joins it waits for (the rest of the load, then the
//! queue that built up meanwhile) instead of a bare load time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use infaas_core::{HardwareKind, LatencyPoint};
use serde::{Deserialize, Serialize};

use crate::instance_state::{next_state, peak_qps, InstanceFigures, InstanceState, Thresholds};

/// A profiled variant, as the selector needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantEntry {
    pub id: String,
    pub name: String,
    pub model: String,
    pub app: String,
    /// Accuracy on the validation set, in [0, 1].
    pub accuracy: f64,
    pub hardware: HardwareKind,
    /// Intra-op threads, i.e. the CPU cores an instance occupies.
    pub threads: usize,
    pub max_batch: usize,
    pub load_ms: f64,
    pub memory_bytes: u64,
    /// Profiled latency per batch size, sorted by batch, p99 and mean non-decreasing in batch
    /// (the builder sorts it and lifts a point below the one before it).
    pub latency: Vec<LatencyPoint>,
}

impl VariantEntry {
    /// The profiled point for a batch of `batch` rows: the smallest profiled batch that holds it,
    /// or the largest one when none does. The second value scales that point's latencies to
    /// `batch` (1 unless extrapolating linearly past the largest profiled batch). `None` only for
    /// an entry without profile, which a [`Snapshot`] never holds.
    pub fn latency_at(&self, batch: usize) -> Option<(&LatencyPoint, f64)> {
        let batch = batch.max(1);
        match self.latency.iter().find(|p| p.batch >= batch) {
            Some(p) => Some((p, 1.0)),
            None => {
                let last = self.latency.last()?;
                Some((last, batch as f64 / last.batch.max(1) as f64))
            }
        }
    }

    /// Profiled p99 in ms of one batch of `batch` rows ([`Self::latency_at`], scaled).
    fn batch_ms(&self, batch: usize) -> f64 {
        self.latency_at(batch)
            .map_or(f64::INFINITY, |(point, scale)| point.p99_ms * scale)
    }

    /// Profiled p99 in ms of running `rows` rows from an empty queue: full batches of
    /// `max_batch`, then one batch of the rest (what a query that finds the instance idle, or
    /// joins a load under way, waits for).
    fn run_ms(&self, rows: usize) -> f64 {
        run_ms(self.max_batch.max(1), rows, |b| self.batch_ms(b))
    }

    /// Predicted p99 latency in ms of a query of `rows` rows that finds `queue_len` rows in
    /// flight at an instance, at the worst way those rows can be split into the batch under way
    /// (`r` of them, 1 to `min(queue_len, max_batch)`, counted whole since it may have just
    /// started) and the rows waiting: after the batch under way, the rows waiting and the
    /// query's own run in full batches, then the rest in one batch of at least `r` rows, since
    /// rows that arrive meanwhile join it as they joined the batch under way. On an idle
    /// instance, [`Self::run_ms`] of its rows.
    pub fn predicted_ms(&self, queue_len: usize, rows: usize) -> f64 {
        predicted_ms(self.max_batch.max(1), queue_len, rows, |b| self.batch_ms(b))
    }

    /// Profiled p99 in ms of a query of `rows` rows on an idle instance.
    pub fn latency_ms(&self, rows: usize) -> f64 {
        self.predicted_ms(0, rows)
    }

    /// Profiled mean in ms of a one-row query on an idle instance: the service time a queue of
    /// single rows sees.
    pub fn service_ms(&self) -> f64 {
        self.latency_at(1)
            .map_or(f64::INFINITY, |(point, scale)| point.mean_ms * scale)
    }

    /// Saturation throughput in rows/s: full batches of `max_batch` at the profiled mean.
    pub fn peak_qps(&self) -> f64 {
        self.peak_qps_at(self.max_batch)
    }

    /// Throughput in rows/s of full batches of `batch` rows at the profiled mean.
    fn peak_qps_at(&self, batch: usize) -> f64 {
        self.latency_at(batch)
            .map_or(0.0, |(point, scale)| peak_qps(batch, point.mean_ms * scale))
    }

    /// Saturation throughput in rows/s that still meets a latency SLO of `slo_ms`: full
    /// batches of the largest batch `b` (up to `max_batch`) at which selection still sends the
    /// instance every query. In that steady state a query finds a batch of `b` under way and
    /// fewer than `b` rows waiting, and runs in the next batch of `b`: [`Self::predicted_ms`]
    /// of that split is `2 x p99(b)`, and `b` fits when that is within the SLO. Selection sends
    /// an instance only the queries it predicts within the SLO, so its batches stay that small;
    /// a variant none of whose batches fits (its one-row run takes more than half the SLO)
    /// serves queries only while idle, one at a time: its one-row throughput. Without an SLO,
    /// [`Self::peak_qps`].
    pub fn peak_qps_within(&self, slo_ms: Option<f64>) -> f64 {
        let Some(slo) = slo_ms else {
            return self.peak_qps();
        };
        let max_batch = self.max_batch.max(1);
        // The batch under way and the query's own, both of `b` rows.
        let fits = |b: usize| 2.0 * self.batch_ms(b) <= slo;
        if fits(max_batch) {
            return self.peak_qps();
        }
        self.latency
            .iter()
            .map(|p| p.batch)
            .filter(|&b| b >= 1 && b < max_batch && fits(b))
            .map(|b| self.peak_qps_at(b))
            .fold(None, |best: Option<f64>, q| {
                Some(best.map_or(q, |b| b.max(q)))
            })
            .unwrap_or_else(|| self.peak_qps_at(1))
    }
}

/// [`VariantEntry::run_ms`] for a variant of `max_batch` (at least 1) whose batch of `b` rows
/// takes `batch_ms(b)`.
fn run_ms(max_batch: usize, rows: usize, batch_ms: impl Fn(usize) -> f64) -> f64 {
    let (full, rest) = (rows / max_batch, rows % max_batch);
    let mut ms = 0.0;
    if full > 0 {
        ms += full as f64 * batch_ms(max_batch);
    }
    if rest > 0 {
        ms += batch_ms(rest);
    }
    ms
}

/// [`VariantEntry::predicted_ms`] for a variant of `max_batch` (at least 1) whose batch of `b`
/// rows takes `batch_ms(b)`.
fn predicted_ms(
    max_batch: usize,
    queue_len: usize,
    rows: usize,
    batch_ms: impl Fn(usize) -> f64,
) -> f64 {
    let rows = rows.max(1);
    if queue_len == 0 {
        return run_ms(max_batch, rows, batch_ms);
    }
    (1..=queue_len.min(max_batch))
        .map(|r| {
            let after = queue_len - r + rows;
            let (full, rest) = (after / max_batch, after % max_batch);
            let last = if rest > 0 { batch_ms(rest.max(r)) } else { 0.0 };
            batch_ms(r) + full as f64 * batch_ms(max_batch) + last
        })
        .fold(0.0, f64::max)
}

/// A worker machine and what is in use on it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerEntry {
    pub id: String,
    pub hardware: Vec<HardwareKind>,
    /// Intra-op threads the worker's instances may reserve in total (its thread budget; idle
    /// sessions use no CPU, so this may exceed `cpu_cores`).
    pub cores: usize,
    pub cores_used: usize,
    /// Cores of the worker's CPU: what its instances' threads actually run on.
    pub cpu_cores: usize,
    pub memory_bytes: u64,
    pub memory_used: u64,
    pub alive: bool,
    /// Busy fraction of the worker, in [0, 1].
    pub utilisation: f64,
    /// An instance on this worker was Interfered within the last
    /// [`INTERFERENCE_MEMORY_MS`]: a co-located workload slowed it, and may still.
    pub interference_seen: bool,
    /// Intra-op threads of the worker's busy CPU instances: those that ran in the last window
    /// or have rows queued or a batch in flight. These threads compete for `cpu_cores`; idle
    /// sessions hold memory but no CPU.
    pub busy_threads: usize,
}

/// Whether a live worker without a GPU is among `workers`: then CPU instances are kept off
/// the GPU workers ([`keeps_gpu_host`]).
pub fn has_cpu_only_worker(workers: &[WorkerEntry]) -> bool {
    workers
        .iter()
        .any(|w| w.alive && !w.hardware.contains(&HardwareKind::Gpu))
}

/// Whether worker `w` is kept from an instance of `v`: a GPU worker is kept for GPU instances
/// (each holds one of its cores) while the cluster has a live worker without a GPU
/// (`cpu_only_worker`, [`has_cpu_only_worker`]), as a Kubernetes taint keeps GPU nodes for
/// GPU pods. A CPU variant that fills a GPU worker's cores leaves no room for the GPU
/// instances the worker is there for; with CPU workers full, the planner then turns to GPU
/// variants, or reports the shortage to the worker autoscaler. A cluster of GPU workers only
/// runs CPU variants on them.
pub fn keeps_gpu_host(w: &WorkerEntry, v: &VariantEntry, cpu_only_worker: bool) -> bool {
    cpu_only_worker && v.hardware == HardwareKind::Cpu && w.hardware.contains(&HardwareKind::Gpu)
}

/// An instance that finished a batch within this many milliseconds, or has rows queued or a
/// batch running, is busy: its threads count in [`WorkerEntry::busy_threads`] (the controller
/// and the simulator alike).
pub const BUSY_WITHIN_MS: f64 = 5_000.0;

/// How long a worker counts as noisy after an instance on it was last Interfered
/// ([`WorkerEntry::interference_seen`]), in milliseconds: long enough that an instance moved
/// away is not placed back while the neighbour may still run (the state machine would find it
/// Interfered again only after its queries suffered).
pub const INTERFERENCE_MEMORY_MS: f64 = 60_000.0;

impl WorkerEntry {
    /// How loaded the worker is for placing a new instance: its busy fraction, or the
    /// fraction of its cores instances hold when that is higher (reserved cores that are idle
    /// now are still taken: by their instances' next batches, or by the threads vertical
    /// scaling gives them). A worker where interference was seen lately counts one more
    /// (above any quiet worker, so it is chosen only when no quiet one has room).
    pub fn load(&self) -> f64 {
        let reserved = self.cores_used as f64 / self.cores.max(1) as f64;
        let load = self.utilisation.max(reserved);
        if self.interference_seen {
            1.0 + load
        } else {
            load
        }
    }

    pub fn free_cores(&self) -> usize {
        self.cores.saturating_sub(self.cores_used)
    }

    /// Cores of the worker's CPU that are idle now (`cpu_cores` less its busy fraction, to the
    /// nearest core): what more threads on this worker can use. Threads given beyond these add
    /// no capacity. To the nearest, not down: a worker whose one busy instance thread takes a
    /// core and whose serving takes a little of the other still has most of a core for one
    /// more thread.
    pub fn idle_cpu_cores(&self) -> usize {
        let idle = (1.0 - self.utilisation.clamp(0.0, 1.0)) * self.cpu_cores as f64;
        idle.round() as usize
    }

    /// Cores of the worker's CPU that its busy instances' threads leave ([`Self::busy_threads`]):
    /// what another busy instance may take without running more threads than cores.
    pub fn spare_cpu_threads(&self) -> usize {
        self.cpu_cores.saturating_sub(self.busy_threads)
    }

    pub fn free_memory(&self) -> u64 {
        self.memory_bytes.saturating_sub(self.memory_used)
    }

    /// Whether an instance of `v` fits here now: alive, with `v`'s hardware, enough free cores
    /// for its threads and enough free memory.
    pub fn can_host(&self, v: &VariantEntry) -> bool {
        self.alive
            && self.hardware.contains(&v.hardware)
            && self.free_cores() >= v.threads
            && self.free_memory() >= v.memory_bytes
    }
}

/// A loaded variant instance on a worker.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceEntry {
    pub id: String,
    /// Index into [`Snapshot::variants`].
    pub variant: usize,
    /// Index into [`Snapshot::workers`].
    pub worker: usize,
    pub state: InstanceState,
    /// Rows waiting in the instance's queue.
    pub queue_len: usize,
    /// Rows served per second over the last window.
    pub qps: f64,
}

/// Rows of queries dispatched to an instance and not yet answered, shared between
/// snapshots (the controller keeps one per instance id and attaches it to every rebuild).
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

impl InFlight {
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts `rows` in flight until the guard drops.
    pub fn enter(&self, rows: usize) -> InFlightGuard {
        self.0.fetch_add(rows, Ordering::Relaxed);
        InFlightGuard {
            counter: self.clone(),
            rows,
        }
    }
}

/// See [`InFlight::enter`].
#[derive(Debug)]
pub struct InFlightGuard {
    counter: InFlight,
    rows: usize,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        self.counter.0.fetch_sub(self.rows, Ordering::Relaxed);
    }
}

/// A load started for queries that wait for it, whose instance does not exist yet (at most one
/// per variant: queries routed to a variant being loaded wait for that load).
#[derive(Debug, Clone)]
pub struct PendingLoad {
    /// Index into [`Snapshot::variants`].
    pub variant: usize,
    /// Index into [`Snapshot::workers`].
    pub worker: usize,
    /// When the load started, in ms on the snapshot's [`Clock`].
    pub started_ms: f64,
    /// Rows waiting for it, as last reported (the simulator sets it).
    pub waiting: usize,
    /// Rows waiting for it, live (the controller's query path enters it while it waits).
    pub live: InFlight,
}

impl PendingLoad {
    /// Rows of the queries waiting for the load.
    pub fn waiting(&self) -> usize {
        self.waiting.max(self.live.get())
    }
}

/// The time base of [`PendingLoad::started_ms`].
#[derive(Debug, Clone, Copy)]
pub enum Clock {
    /// Milliseconds since this instant (the controller).
    Wall(Instant),
    /// A time set by the owner of the snapshot (the simulator's clock).
    Fixed(f64),
}

impl Default for Clock {
    fn default() -> Clock {
        Clock::Fixed(0.0)
    }
}

impl Clock {
    pub fn now_ms(&self) -> f64 {
        match *self {
            Clock::Wall(epoch) => epoch.elapsed().as_secs_f64() * 1e3,
            Clock::Fixed(t) => t,
        }
    }
}

/// Resource prices, in the same currency unit throughout (dollars in the configuration's
/// `[prices]` table, whose missing fields take the defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Prices {
    /// Price of one CPU core for one second.
    pub cpu_core_per_s: f64,
    /// Price of one GB (10^9 bytes) of memory for one second.
    pub memory_gb_per_s: f64,
    /// Price of one GPU for one second.
    pub gpu_per_s: f64,
}

impl Default for Prices {
    fn default() -> Self {
        // About the on-demand price of a general-purpose cloud vCPU, GB of memory and GPU, in
        // dollars per second.
        Prices {
            cpu_core_per_s: 0.0000117,
            memory_gb_per_s: 0.0000015,
            gpu_per_s: 0.000147,
        }
    }
}

impl Prices {
    /// Price per second of the resources one instance of `v` holds: its threads' cores, its
    /// memory and, for a GPU variant, one GPU.
    pub fn rate_per_s(&self, v: &VariantEntry) -> f64 {
        let gpu = match v.hardware {
            HardwareKind::Gpu => self.gpu_per_s,
            HardwareKind::Cpu => 0.0,
        };
        v.threads as f64 * self.cpu_core_per_s
            + v.memory_bytes as f64 / 1e9 * self.memory_gb_per_s
            + gpu
    }

    /// Price per second of a whole worker: all its cores, all its memory and, when it has
    /// one, a GPU.
    pub fn worker_rate_per_s(&self, w: &WorkerEntry) -> f64 {
        let gpu = if w.hardware.contains(&HardwareKind::Gpu) {
            self.gpu_per_s
        } else {
            0.0
        };
        w.cores as f64 * self.cpu_core_per_s
            + w.memory_bytes as f64 / 1e9 * self.memory_gb_per_s
            + gpu
    }
}

/// Cost of one single-row query that runs in a batch of `batch` rows (clamped to
/// `1..=max_batch`): the price of the instance's resources for the batch's mean run time, shared
/// evenly by its rows:
///
/// `cost = (threads * cpu_core_per_s + memory_bytes / 1e9 * memory_gb_per_s + gpu_per_s [GPU])
///         * mean_ms(batch) / 1000 / batch`
///
/// `mean_ms(batch)` is the profile's mean at the smallest profiled batch holding `batch` (an
/// upper bound of the actual run time). A query of `rows` rows costs `rows` times this at
/// `batch = min(rows, max_batch)`.
pub fn variant_cost_per_query(v: &VariantEntry, prices: &Prices, batch: usize) -> f64 {
    let batch = batch.clamp(1, v.max_batch.max(1));
    let Some((point, scale)) = v.latency_at(batch) else {
        return f64::INFINITY;
    };
    prices.rate_per_s(v) * point.mean_ms * scale / 1000.0 / batch as f64
}

/// Why a snapshot refused an entry or an update.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SnapshotError {
    #[error("duplicate {kind} id {id:?}")]
    Duplicate { kind: &'static str, id: String },
    #[error("variant {id:?}: {problem}")]
    InvalidVariant { id: String, problem: &'static str },
    #[error("no variant at index {0}")]
    UnknownVariant(usize),
    #[error("no worker at index {0}")]
    UnknownWorker(usize),
    #[error("no worker with id {0:?}")]
    UnknownWorkerId(String),
    #[error("no instance at index {0}")]
    UnknownInstance(usize),
    #[error("worker {worker:?} is not alive")]
    DeadWorker { worker: String },
    #[error("worker {worker:?} has no {hardware} for variant {variant:?}")]
    MissingHardware {
        worker: String,
        variant: String,
        hardware: &'static str,
    },
}

/// Name look-ups run for every query: a fast keyed hash (foldhash, seeded per process) rather
/// than SipHash.
type NameMap<V> = foldhash::HashMap<String, V>;

/// A tenant's lists of variants per application and per model, as indices into
/// `Snapshot::lists`.
#[derive(Debug, Clone, Default)]
struct TenantIndex {
    apps: NameMap<usize>,
    models: NameMap<usize>,
}

/// A tenant's variants of one application or of one model, most accurate first (then fastest
/// at batch 1).
#[derive(Debug, Clone, Default)]
pub struct VariantList {
    all: Vec<usize>,
    live: Vec<usize>,
}

impl VariantList {
    /// Every variant.
    pub fn all(&self) -> &[usize] {
        &self.all
    }

    /// The variants with an Active instance, in the same order: what selection's rule 1
    /// looks at, kept as instances change state rather than found by every query.
    pub fn live(&self) -> &[usize] {
        &self.live
    }
}

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    variants: Vec<VariantEntry>,
    /// Parallel to `variants`: what selection reads of every variant a query could use.
    hot: Vec<VariantHot>,
    /// Each tabulated variant's [`VariantEntry::predicted_ms`] of a one-row query for every
    /// queue of 0 to [`JOIN_TABLE_BATCHES`] max batches, where [`VariantHot`] points.
    join_ms: Vec<f64>,
    workers: Vec<WorkerEntry>,
    instances: Vec<InstanceEntry>,
    /// Live in-flight counters, parallel to `instances` (`None` until one is attached).
    in_flight: Vec<Option<InFlight>>,
    /// How many instances have an attached in-flight counter.
    attached: usize,
    /// Loads under way that queries wait for (a handful at most).
    pending: Vec<PendingLoad>,
    clock: Clock,
    variant_ids: HashMap<String, usize>,
    worker_ids: HashMap<String, usize>,
    instance_ids: HashMap<String, usize>,
    tenants: NameMap<TenantIndex>,
    lists: Vec<VariantList>,
    /// Per variant: its application's list and its model's list in `lists`, each with the
    /// variant's position in that list's `all`.
    member: Vec<[(usize, usize); 2]>,
    by_variant: Vec<Vec<usize>>,
    /// Parallel to `by_variant`: each instance's rank for [`Snapshot::shortest_active`], its
    /// reported queue when Active ([`NOT_ACTIVE`] otherwise), so that finding a variant's
    /// shortest Active queue reads one compact array.
    ranks: Vec<Vec<u32>>,
    /// Active instances per variant (one compact array, read for every variant a query could
    /// use).
    active: Vec<u32>,
    /// Each instance's position in its variant's `by_variant` list (`usize::MAX` once removed).
    slot: Vec<usize>,
    by_worker: Vec<Vec<usize>>,
    /// Live workers per hardware kind, indexed by [`hw_slot`].
    by_hardware: [Vec<usize>; 2],
}

/// What selection's rule 1 reads of a variant for every query, in one compact array parallel
/// to [`Snapshot::variants`] ([`Snapshot::hot`]): a [`VariantEntry`] is large and its profile
/// sits behind a pointer, and a query looks at every variant of its application that has an
/// Active instance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VariantHot {
    /// [`VariantEntry::accuracy`].
    pub accuracy: f64,
    /// [`VariantEntry::latency_ms`] of a one-row query.
    pub one_row_ms: f64,
    max_batch: u32,
    /// Where the variant's one-row predictions for queues 0..=`JOIN_TABLE_BATCHES * max_batch`
    /// start in `Snapshot::join_ms` ([`NOT_TABULATED`] for a max batch above
    /// [`TABULATED_BATCH`]).
    table: u32,
}

/// Largest max batch whose one-row predictions [`Snapshot::predicted_one_row_ms`] tabulates.
const TABULATED_BATCH: usize = 256;
/// Queues up to this many max batches are tabulated; a longer one (past any SLO a variant
/// is chosen for) is computed.
const JOIN_TABLE_BATCHES: usize = 4;
const NOT_TABULATED: u32 = u32::MAX;

/// Rank of an instance that is not Active (see `Snapshot::ranks`).
const NOT_ACTIVE: u32 = u32::MAX;

fn rank_of(i: &InstanceEntry) -> u32 {
    if i.state == InstanceState::Active {
        u32::try_from(i.queue_len).map_or(NOT_ACTIVE - 1, |q| q.min(NOT_ACTIVE - 1))
    } else {
        NOT_ACTIVE
    }
}

fn hw_slot(hw: HardwareKind) -> usize {
    match hw {
        HardwareKind::Cpu => 0,
        HardwareKind::Gpu => 1,
    }
}

/// Collects entries; [`SnapshotBuilder::build`] sorts the indexes.
#[derive(Debug, Default)]
pub struct SnapshotBuilder {
    snapshot: Snapshot,
}

impl SnapshotBuilder {
    /// Adds `tenant`'s variant; returns its index. Sorts its latency points by batch and refuses
    /// a variant without profile or with out-of-range figures.
    pub fn add_variant(
        &mut self,
        tenant: &str,
        mut v: VariantEntry,
    ) -> Result<usize, SnapshotError> {
        let s = &mut self.snapshot;
        if s.variant_ids.contains_key(&v.id) {
            return Err(SnapshotError::Duplicate {
                kind: "variant",
                id: v.id,
            });
        }
        v.latency.sort_by_key(|p| p.batch);
        if let Some(problem) = variant_problem(&v) {
            return Err(SnapshotError::InvalidVariant { id: v.id, problem });
        }
        monotone_in_batch(&mut v.latency);
        let idx = s.variants.len();
        let t = s.tenants.entry(tenant.to_owned()).or_default();
        let mut member = [(0, 0); 2];
        for (k, list) in [t.apps.entry(v.app.clone()), t.models.entry(v.model.clone())]
            .into_iter()
            .enumerate()
        {
            let id = *list.or_insert_with(|| {
                s.lists.push(VariantList::default());
                s.lists.len() - 1
            });
            member[k] = (id, s.lists[id].all.len());
            s.lists[id].all.push(idx);
        }
        s.member.push(member);
        s.variant_ids.insert(v.id.clone(), idx);
        let max_batch = v.max_batch.max(1);
        let table = if max_batch <= TABULATED_BATCH {
            let at = u32::try_from(s.join_ms.len()).unwrap_or(NOT_TABULATED);
            // Each batch's p99 once, so that the table costs O(queues x max batch) lookups.
            let batch: Vec<f64> = (0..=max_batch).map(|b| v.batch_ms(b)).collect();
            s.join_ms.extend(
                (0..=JOIN_TABLE_BATCHES * max_batch)
                    .map(|q| predicted_ms(max_batch, q, 1, |b| batch[b])),
            );
            at
        } else {
            NOT_TABULATED
        };
        s.hot.push(VariantHot {
            accuracy: v.accuracy,
            one_row_ms: v.latency_ms(1),
            max_batch: u32::try_from(max_batch).unwrap_or(u32::MAX),
            table,
        });
        s.variants.push(v);
        s.by_variant.push(Vec::new());
        s.ranks.push(Vec::new());
        s.active.push(0);
        Ok(idx)
    }

    /// Adds a worker; returns its index.
    pub fn add_worker(&mut self, w: WorkerEntry) -> Result<usize, SnapshotError> {
        self.snapshot.add_worker(w)
    }

    /// Adds an instance of an added variant on an added worker; see [`Snapshot::add_instance`].
    pub fn add_instance(&mut self, i: InstanceEntry) -> Result<usize, SnapshotError> {
        self.snapshot.add_instance(i)
    }

    pub fn build(mut self) -> Snapshot {
        let s = &mut self.snapshot;
        let variants = &s.variants;
        let order = |a: &usize, b: &usize| {
            let (va, vb) = (&variants[*a], &variants[*b]);
            vb.accuracy
                .total_cmp(&va.accuracy)
                .then(va.latency_ms(1).total_cmp(&vb.latency_ms(1)))
                .then(a.cmp(b))
        };
        for list in &mut s.lists {
            list.all.sort_by(order);
        }
        // Positions in the sorted lists, and the live lists from the instances added so far.
        for (id, list) in s.lists.iter_mut().enumerate() {
            for (pos, &v) in list.all.iter().enumerate() {
                let k = usize::from(s.member[v][0].0 != id);
                s.member[v][k].1 = pos;
            }
            list.live = list
                .all
                .iter()
                .copied()
                .filter(|&v| s.active[v] > 0)
                .collect();
        }
        self.snapshot
    }
}

/// Makes a sorted profile's p99 and mean non-decreasing in batch (each point at least the one
/// before it). A larger batch does not run faster than a smaller one; a profile that says so
/// measured noise, and taking it at its word would make a fuller queue predict a shorter wait.
/// With this, [`VariantEntry::predicted_ms`] never decreases as the queue grows, which lets
/// selection look at one instance per variant (the one with the fewest rows queued).
fn monotone_in_batch(latency: &mut [LatencyPoint]) {
    let (mut p99, mut mean) = (0.0_f64, 0.0_f64);
    for p in latency {
        p99 = p99.max(p.p99_ms);
        mean = mean.max(p.mean_ms);
        p.p99_ms = p99;
        p.mean_ms = mean;
    }
}

fn variant_problem(v: &VariantEntry) -> Option<&'static str> {
    let positive = |x: f64| x.is_finite() && x > 0.0;
    if !(0.0..=1.0).contains(&v.accuracy) {
        Some("accuracy must be in [0, 1]")
    } else if v.max_batch == 0 || v.threads == 0 {
        Some("max_batch and threads must be at least 1")
    } else if !(v.load_ms.is_finite() && v.load_ms >= 0.0) {
        Some("load_ms must be finite and not negative")
    } else if v.latency.is_empty() {
        Some("no latency profile")
    } else if v
        .latency
        .iter()
        .any(|p| p.batch == 0 || !positive(p.p99_ms) || !positive(p.mean_ms))
    {
        Some("latency points need batch >= 1 and positive finite p99_ms and mean_ms")
    } else {
        None
    }
}

impl Snapshot {
    pub fn builder() -> SnapshotBuilder {
        SnapshotBuilder::default()
    }

    pub fn variants(&self) -> &[VariantEntry] {
        &self.variants
    }

    /// Parallel to [`Self::variants`]: the figures selection reads for every query.
    #[inline]
    pub fn hot(&self) -> &[VariantHot] {
        &self.hot
    }

    /// [`VariantEntry::predicted_ms`] of a one-row query joining `queued` rows at an instance
    /// of `variant`, the same figure read from the compact tables.
    #[inline]
    pub fn predicted_one_row_ms(&self, variant: usize, queued: usize) -> f64 {
        let h = &self.hot[variant];
        if queued == 0 {
            return h.one_row_ms;
        }
        let tabulated = (h.table != NOT_TABULATED
            && queued <= JOIN_TABLE_BATCHES * h.max_batch as usize)
            .then(|| self.join_ms.get(h.table as usize + queued))
            .flatten();
        match tabulated {
            Some(&ms) => ms,
            None => self.variants[variant].predicted_ms(queued, 1),
        }
    }

    pub fn workers(&self) -> &[WorkerEntry] {
        &self.workers
    }

    /// Every instance slot, including removed ones (state Inactive, in no index).
    pub fn instances(&self) -> &[InstanceEntry] {
        &self.instances
    }

    /// The live in-flight counter attached to an instance ([`Self::attach_in_flight`]); `None`
    /// without one (selection then sees only the instance's reported queue).
    pub fn in_flight(&self, instance: usize) -> Option<&InFlight> {
        self.in_flight.get(instance)?.as_ref()
    }

    /// Shares `counter` as the in-flight counter of an instance (O(1)).
    pub fn attach_in_flight(
        &mut self,
        instance: usize,
        counter: InFlight,
    ) -> Result<(), SnapshotError> {
        let slot = self
            .in_flight
            .get_mut(instance)
            .ok_or(SnapshotError::UnknownInstance(instance))?;
        if slot.replace(counter).is_none() {
            self.attached += 1;
        }
        Ok(())
    }

    /// The time base of pending loads.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Sets the time base of pending loads.
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// Records a load that queries will wait for, replacing one of the same variant. The
    /// worker must be alive.
    pub fn add_pending_load(&mut self, p: PendingLoad) -> Result<(), SnapshotError> {
        self.variants
            .get(p.variant)
            .ok_or(SnapshotError::UnknownVariant(p.variant))?;
        let w = self
            .workers
            .get(p.worker)
            .ok_or(SnapshotError::UnknownWorker(p.worker))?;
        if !w.alive {
            return Err(SnapshotError::DeadWorker {
                worker: w.id.clone(),
            });
        }
        self.pending.retain(|q| q.variant != p.variant);
        self.pending.push(p);
        Ok(())
    }

    /// Forgets the pending load of `variant` (its instance is ready, or the load failed).
    pub fn remove_pending_load(&mut self, variant: usize) {
        self.pending.retain(|p| p.variant != variant);
    }

    /// The load of `variant` under way, if any.
    pub fn pending_load(&self, variant: usize) -> Option<&PendingLoad> {
        self.pending.iter().find(|p| p.variant == variant)
    }

    /// Sets the rows reported waiting for the pending load of `variant`.
    pub fn set_pending_waiting(&mut self, variant: usize, rows: usize) {
        if let Some(p) = self.pending.iter_mut().find(|p| p.variant == variant) {
            p.waiting = rows;
        }
    }

    /// Predicted p99 in ms of a query of `rows` rows that joins the pending load of `variant`:
    /// the rest of the load (by the variant's load time; 0 once overdue), then the rows waiting
    /// ahead of it and its own run from an empty queue, in full batches and then the rest, on
    /// the new instance. `None` without a pending load.
    pub fn pending_ms(&self, variant: usize, rows: usize) -> Option<f64> {
        let p = self.pending_load(variant)?;
        let v = self.variants.get(variant)?;
        let left = (p.started_ms + v.load_ms - self.clock.now_ms()).max(0.0);
        Some(left + v.run_ms(p.waiting() + rows.max(1)))
    }

    /// Rows ahead of a new query at an instance: the larger of the queue its worker last
    /// reported and the rows this controller has in flight there (which include the batch
    /// being run, so it errs on the side of a longer queue).
    pub fn queued(&self, instance: usize) -> usize {
        let reported = self.instances.get(instance).map_or(0, |i| i.queue_len);
        let live = self.in_flight(instance).map_or(0, InFlight::get);
        reported.max(live)
    }

    /// The Active instance of `variant` with the fewest rows queued ([`Self::queued`]), the
    /// first of equals in [`Self::variant_instances`] order; `None` without an Active one.
    /// Without attached in-flight counters it reads one compact array of reported queues.
    #[inline]
    pub fn shortest_active(&self, variant: usize) -> Option<usize> {
        self.shortest_active_queued(variant)
            .map(|(instance, _)| instance)
    }

    /// [`Self::shortest_active`] with the rows it has queued ([`Self::queued`]).
    #[inline]
    pub fn shortest_active_queued(&self, variant: usize) -> Option<(usize, usize)> {
        if self.active.get(variant).is_none_or(|&n| n == 0) {
            return None;
        }
        let live = self.by_variant.get(variant)?;
        let ranks = self.ranks.get(variant)?;
        if self.attached == 0 {
            // Without in-flight counters an Active instance's rank is its reported queue.
            let (mut least, mut at) = (NOT_ACTIVE, 0);
            for (k, &rank) in ranks.iter().enumerate() {
                if rank < least {
                    (least, at) = (rank, k);
                }
            }
            return (least != NOT_ACTIVE).then(|| {
                let queued = if least == NOT_ACTIVE - 1 {
                    self.queued(live[at])
                } else {
                    least as usize
                };
                (live[at], queued)
            });
        }
        let mut best: Option<(usize, usize)> = None;
        for (&instance, &rank) in live.iter().zip(ranks) {
            if rank == NOT_ACTIVE {
                continue;
            }
            let queued = self.queued(instance);
            if best.is_none_or(|(least, _)| queued < least) {
                best = Some((queued, instance));
            }
        }
        best.map(|(queued, instance)| (instance, queued))
    }

    /// Keeps an instance's rank in step with its state and reported queue.
    fn rerank(&mut self, instance: usize) {
        let i = &self.instances[instance];
        if let Some(rank) = self
            .ranks
            .get_mut(i.variant)
            .and_then(|r| r.get_mut(self.slot[instance]))
        {
            let was = *rank != NOT_ACTIVE;
            *rank = rank_of(i);
            let is = *rank != NOT_ACTIVE;
            self.count_active(i.variant, was, is);
        }
    }

    /// Counts a change of one instance of `variant` from Active (`was`) or not to Active
    /// (`is`) or not; a variant that gains its first Active instance joins its lists' `live`,
    /// one that loses its last leaves them.
    fn count_active(&mut self, variant: usize, was: bool, is: bool) {
        if was == is {
            return;
        }
        let n = &mut self.active[variant];
        let before = *n > 0;
        *n = *n + u32::from(is) - u32::from(was);
        let live = *n > 0;
        if live == before {
            return;
        }
        for k in 0..2 {
            let (id, pos) = self.member[variant][k];
            let member = &self.member;
            let list = &mut self.lists[id].live;
            let at = list.partition_point(|&x| member[x][k].1 < pos);
            if live {
                list.insert(at, variant);
            } else if list.get(at) == Some(&variant) {
                list.remove(at);
            }
        }
    }

    pub fn variant_index(&self, id: &str) -> Option<usize> {
        self.variant_ids.get(id).copied()
    }

    /// Index of a worker that has not been removed.
    pub fn worker_index(&self, id: &str) -> Option<usize> {
        self.worker_ids.get(id).copied()
    }

    /// Index of an instance that has not been removed.
    pub fn instance_index(&self, id: &str) -> Option<usize> {
        self.instance_ids.get(id).copied()
    }

    /// `tenant`'s variants of application `app`, most accurate first (then fastest at batch 1);
    /// empty when there are none.
    pub fn app_variants(&self, tenant: &str, app: &str) -> &[usize] {
        self.app_list(tenant, app).map_or(&[], VariantList::all)
    }

    /// `tenant`'s variants of model `model`, in the same order as [`Snapshot::app_variants`].
    pub fn model_variants(&self, tenant: &str, model: &str) -> &[usize] {
        self.model_list(tenant, model).map_or(&[], VariantList::all)
    }

    /// [`Self::app_variants`], with those that have an Active instance.
    pub fn app_list(&self, tenant: &str, app: &str) -> Option<&VariantList> {
        let id = *self.tenants.get(tenant)?.apps.get(app)?;
        self.lists.get(id)
    }

    /// [`Self::model_variants`], with those that have an Active instance.
    pub fn model_list(&self, tenant: &str, model: &str) -> Option<&VariantList> {
        let id = *self.tenants.get(tenant)?.models.get(model)?;
        self.lists.get(id)
    }

    /// Instances of variant `variant` on live workers.
    pub fn variant_instances(&self, variant: usize) -> &[usize] {
        self.by_variant.get(variant).map_or(&[], Vec::as_slice)
    }

    /// Live workers that have hardware `hw`.
    pub fn workers_with(&self, hw: HardwareKind) -> &[usize] {
        &self.by_hardware[hw_slot(hw)]
    }

    /// Adds a worker (one that joined, e.g. started by the worker autoscaler); returns its
    /// index.
    pub fn add_worker(&mut self, w: WorkerEntry) -> Result<usize, SnapshotError> {
        let s = self;
        if s.worker_ids.contains_key(&w.id) {
            return Err(SnapshotError::Duplicate {
                kind: "worker",
                id: w.id,
            });
        }
        let idx = s.workers.len();
        if w.alive {
            for &hw in &w.hardware {
                s.by_hardware[hw_slot(hw)].push(idx);
            }
        }
        s.worker_ids.insert(w.id.clone(), idx);
        s.workers.push(w);
        s.by_worker.push(Vec::new());
        Ok(idx)
    }

    /// Adds an instance (e.g. once a load decision is carried out); returns its index. The worker
    /// must be alive and have the variant's hardware. The worker's usage figures are left as they
    /// are: the controller reports them with [`Snapshot::set_worker_usage`].
    pub fn add_instance(&mut self, i: InstanceEntry) -> Result<usize, SnapshotError> {
        let v = self
            .variants
            .get(i.variant)
            .ok_or(SnapshotError::UnknownVariant(i.variant))?;
        let w = self
            .workers
            .get(i.worker)
            .ok_or(SnapshotError::UnknownWorker(i.worker))?;
        if self.instance_ids.contains_key(&i.id) {
            return Err(SnapshotError::Duplicate {
                kind: "instance",
                id: i.id,
            });
        }
        if !w.alive {
            return Err(SnapshotError::DeadWorker {
                worker: w.id.clone(),
            });
        }
        if !w.hardware.contains(&v.hardware) {
            return Err(SnapshotError::MissingHardware {
                worker: w.id.clone(),
                variant: v.id.clone(),
                hardware: v.hardware.as_str(),
            });
        }
        // The load that queries waited for is over.
        self.pending
            .retain(|p| (p.variant, p.worker) != (i.variant, i.worker));
        let idx = self.instances.len();
        self.slot.push(self.by_variant[i.variant].len());
        self.by_variant[i.variant].push(idx);
        self.ranks[i.variant].push(rank_of(&i));
        self.count_active(i.variant, false, i.state == InstanceState::Active);
        self.by_worker[i.worker].push(idx);
        self.instance_ids.insert(i.id.clone(), idx);
        self.instances.push(i);
        self.in_flight.push(None);
        Ok(idx)
    }

    fn instance_mut(&mut self, instance: usize) -> Result<&mut InstanceEntry, SnapshotError> {
        self.instances
            .get_mut(instance)
            .ok_or(SnapshotError::UnknownInstance(instance))
    }

    /// Sets an instance's state (O(1)).
    pub fn set_instance_state(
        &mut self,
        instance: usize,
        state: InstanceState,
    ) -> Result<(), SnapshotError> {
        self.instance_mut(instance)?.state = state;
        self.rerank(instance);
        Ok(())
    }

    /// Sets an instance's queue length and served rows/s (O(1)).
    pub fn set_instance_load(
        &mut self,
        instance: usize,
        queue_len: usize,
        qps: f64,
    ) -> Result<(), SnapshotError> {
        let i = self.instance_mut(instance)?;
        i.queue_len = queue_len;
        i.qps = qps;
        self.rerank(instance);
        Ok(())
    }

    /// Applies one monitoring window to an instance (O(1)): records its queue length and
    /// throughput and moves it along the state machine. Returns the new state.
    pub fn observe_instance(
        &mut self,
        instance: usize,
        figures: &InstanceFigures,
        thresholds: &Thresholds,
    ) -> Result<InstanceState, SnapshotError> {
        let i = self.instance_mut(instance)?;
        i.queue_len = figures.queue_len;
        i.qps = figures.qps;
        i.state = next_state(i.state, figures, thresholds);
        let state = i.state;
        self.rerank(instance);
        Ok(state)
    }

    /// Sets a worker's usage figures (O(1)).
    pub fn set_worker_usage(
        &mut self,
        worker: usize,
        cores_used: usize,
        memory_used: u64,
        utilisation: f64,
    ) -> Result<(), SnapshotError> {
        let w = self
            .workers
            .get_mut(worker)
            .ok_or(SnapshotError::UnknownWorker(worker))?;
        w.cores_used = cores_used;
        w.memory_used = memory_used;
        w.utilisation = utilisation;
        Ok(())
    }

    /// Sets the intra-op threads of a worker's busy instances (O(1); see
    /// [`WorkerEntry::busy_threads`]).
    pub fn set_worker_busy_threads(
        &mut self,
        worker: usize,
        busy_threads: usize,
    ) -> Result<(), SnapshotError> {
        self.workers
            .get_mut(worker)
            .ok_or(SnapshotError::UnknownWorker(worker))?
            .busy_threads = busy_threads;
        Ok(())
    }

    /// Intra-op threads that compete for worker `worker`'s CPU cores: its busy instances'
    /// ([`WorkerEntry::busy_threads`]) and those of the CPU variants being loaded there for
    /// waiting queries (busy as soon as they are ready). O(pending loads).
    pub fn busy_threads(&self, worker: usize) -> usize {
        let Some(w) = self.workers.get(worker) else {
            return 0;
        };
        let loading: usize = self
            .pending
            .iter()
            .filter(|p| p.worker == worker)
            .filter_map(|p| self.variants.get(p.variant))
            .filter(|v| v.hardware == HardwareKind::Cpu)
            .map(|v| v.threads)
            .sum();
        w.busy_threads + loading
    }

    /// Whether another busy instance of `variant` on worker `worker` keeps the threads of busy
    /// instances within the worker's cores ([`Self::busy_threads`]); always true for
    /// accelerator variants. Every placement that adds CPU demand checks it: capacity is
    /// counted in cores.
    pub fn cores_for(&self, worker: usize, variant: usize) -> bool {
        match (self.workers.get(worker), self.variants.get(variant)) {
            (Some(w), Some(v)) => {
                v.hardware != HardwareKind::Cpu
                    || self.busy_threads(worker) + v.threads <= w.cpu_cores
            }
            _ => false,
        }
    }

    /// Marks whether interference was seen on a worker lately (O(1); see
    /// [`WorkerEntry::interference_seen`]).
    pub fn set_worker_interference(
        &mut self,
        worker: usize,
        seen: bool,
    ) -> Result<(), SnapshotError> {
        self.workers
            .get_mut(worker)
            .ok_or(SnapshotError::UnknownWorker(worker))?
            .interference_seen = seen;
        Ok(())
    }

    /// Removes an instance (unloaded): it leaves every index and becomes Inactive (O(k) in the
    /// instances of its variant and worker). Removing it twice is a no-op.
    pub fn remove_instance(&mut self, instance: usize) -> Result<(), SnapshotError> {
        let i = self.instance_mut(instance)?;
        i.state = InstanceState::Inactive;
        i.queue_len = 0;
        i.qps = 0.0;
        let (variant, worker) = (i.variant, i.worker);
        if self.instance_ids.get(&self.instances[instance].id) == Some(&instance) {
            self.instance_ids.remove(&self.instances[instance].id);
        }
        if let Some(k) = self.by_variant[variant].iter().position(|&x| x == instance) {
            self.by_variant[variant].remove(k);
            if self.ranks[variant].remove(k) != NOT_ACTIVE {
                self.count_active(variant, true, false);
            }
            self.slot[instance] = usize::MAX;
            for &later in &self.by_variant[variant][k..] {
                self.slot[later] -= 1;
            }
        }
        self.by_worker[worker].retain(|&x| x != instance);
        Ok(())
    }

    /// Marks a worker dead: it leaves the hardware index and its instances leave every index
    /// (state Inactive) at once. Returns how many instances were removed.
    pub fn remove_worker(&mut self, id: &str) -> Result<usize, SnapshotError> {
        let worker = self
            .worker_ids
            .remove(id)
            .ok_or_else(|| SnapshotError::UnknownWorkerId(id.to_owned()))?;
        self.workers[worker].alive = false;
        for list in &mut self.by_hardware {
            list.retain(|&w| w != worker);
        }
        self.pending.retain(|p| p.worker != worker);
        let gone = std::mem::take(&mut self.by_worker[worker]);
        for &instance in &gone {
            self.remove_instance(instance)?;
        }
        Ok(gone.len())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn point(batch: usize, p99_ms: f64) -> LatencyPoint {
        LatencyPoint {
            batch,
            p50_ms: p99_ms * 0.8,
            p99_ms,
            mean_ms: p99_ms * 0.9,
            throughput_per_s: batch as f64 / (p99_ms * 0.9) * 1000.0,
        }
    }

    pub(crate) fn variant(id: &str, model: &str, accuracy: f64, p99_b1: f64) -> VariantEntry {
        VariantEntry {
            id: id.to_owned(),
            name: format!("{model}.{id}"),
            model: model.to_owned(),
            app: "app".to_owned(),
            accuracy,
            hardware: HardwareKind::Cpu,
            threads: 1,
            max_batch: 8,
            load_ms: 100.0,
            memory_bytes: 1 << 20,
            latency: vec![
                point(8, p99_b1 * 4.0),
                point(1, p99_b1),
                point(4, p99_b1 * 2.0),
            ],
        }
    }

    pub(crate) fn worker(id: &str, hw: &[HardwareKind], utilisation: f64) -> WorkerEntry {
        WorkerEntry {
            id: id.to_owned(),
            hardware: hw.to_vec(),
            cores: 8,
            cpu_cores: 8,
            cores_used: 0,
            memory_bytes: 16 << 30,
            memory_used: 0,
            alive: true,
            utilisation,
            interference_seen: false,
            busy_threads: 0,
        }
    }

    pub(crate) fn instance(id: &str, variant: usize, worker: usize) -> InstanceEntry {
        InstanceEntry {
            id: id.to_owned(),
            variant,
            worker,
            state: InstanceState::Active,
            queue_len: 0,
            qps: 0.0,
        }
    }

    #[test]
    fn a_larger_batch_never_predicts_a_shorter_run() {
        let mut b = Snapshot::builder();
        let mut noisy = variant("v", "m", 0.9, 2.0);
        // Batch 8 measured faster than batch 4 (3.0 ms against 4.0 ms).
        noisy.latency[0].p99_ms = 3.0;
        noisy.latency[0].mean_ms = 2.5;
        let v = b.add_variant("t", noisy).unwrap();
        let s = b.build();
        let v = &s.variants()[v];
        let p99: Vec<f64> = v.latency.iter().map(|p| p.p99_ms).collect();
        assert_eq!(p99, [2.0, 4.0, 4.0]);
        assert_eq!(v.latency[2].mean_ms, v.latency[1].mean_ms);
        let predicted: Vec<f64> = (0..40).map(|q| v.predicted_ms(q, 1)).collect();
        assert!(predicted.windows(2).all(|w| w[0] <= w[1]), "{predicted:?}");
    }

    #[test]
    fn latency_points_are_sorted_and_looked_up() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let s = b.build();
        let v = &s.variants()[v];
        assert_eq!(
            v.latency.iter().map(|p| p.batch).collect::<Vec<_>>(),
            [1, 4, 8]
        );
        assert_eq!(v.latency_at(1).unwrap().0.batch, 1);
        assert_eq!(v.latency_at(3).unwrap().0.batch, 4);
        let (last, scale) = v.latency_at(16).unwrap();
        assert_eq!((last.batch, scale), (8, 2.0));
    }

    #[test]
    fn predicted_latency_counts_batches_ahead() {
        let v = {
            let mut b = Snapshot::builder();
            b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
            b.build().variants()[0].clone()
        };
        assert_eq!(v.predicted_ms(0, 1), 1.0);
        assert_eq!(v.predicted_ms(0, 3), 2.0);
        // Joins a batch of 4 behind 2 rows: p99(4) = 2 ms x (1 + the batch under way).
        assert_eq!(v.predicted_ms(2, 2), 4.0);
        // However few rows are ahead, the batch under way may have just started: one row
        // under way (1 ms), then its own.
        assert_eq!(v.predicted_ms(1, 1), 2.0 * v.latency_ms(1));
        // 16 rows ahead: the worst split is a batch of 5-8 under way (4 ms), then a batch of 8
        // (4 ms) and the query's own, which rows arriving meanwhile fill as they filled the
        // batch under way (4 ms): 12 ms. A single row under way (1 ms) leaves two full
        // batches (8 ms): 9 ms.
        assert_eq!(v.predicted_ms(16, 1), 12.0);
        // 20 rows on an idle instance: two batches of 8 (4 ms each), then one of 4 (2 ms).
        assert_eq!(v.predicted_ms(0, 20), 10.0);
        // Eight rows ahead, at worst 5-8 of them under way: two batches of 5-8 (8 ms). With
        // four under way, the other four and its own run in a batch of 5 (2 + 4 = 6 ms).
        assert_eq!(v.predicted_ms(8, 1), 8.0);
        assert_eq!(v.predicted_ms(7, 1), 8.0);
        assert_eq!(v.predicted_ms(3, 1), 4.0);
    }

    /// GPU variants whose batches barely grow with their size (ResNet-152 on an Ampere GPU:
    /// 48, 82, 119 and 173 ms at 1, 2, 4 and 8 rows) under a 300-ms SLO. Counted as
    /// p99(rows ahead + 1) x (1 + the batches ahead) the batch-4 file stopped taking queries
    /// at five rows in flight and the batch-8 one at four, below what their batches allow.
    #[test]
    fn a_batching_gpu_variant_takes_queries_while_the_worst_split_fits() {
        let gpu = |max_batch: usize| {
            let mut v = variant("gpu", "m", 0.9, 47.6);
            v.max_batch = max_batch;
            v.latency = vec![
                point(1, 47.6),
                point(2, 82.3),
                point(4, 119.2),
                point(8, 173.0),
            ];
            v
        };
        let taken = |v: &VariantEntry| {
            (0..40)
                .take_while(|&q| v.predicted_ms(q, 1) <= 300.0)
                .count()
        };
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        // Batch 4: six ahead, at worst two under way (82.3 ms), then a batch of 4 and the
        // query's own, which later rows fill to two (119.2 + 82.3 ms).
        let b4 = gpu(4);
        assert!(close(b4.predicted_ms(6, 1), 82.3 + 119.2 + 82.3));
        // Seven ahead: three under way, four waiting, then its own batch of three.
        assert!(close(b4.predicted_ms(7, 1), 3.0 * 119.2));
        assert_eq!(taken(&b4), 7, "queries taken with 0..=6 rows in flight");
        // Batch 8: four ahead in a batch under way, then its own (2 x 119.2 ms); with five,
        // two batches of 5-8 (2 x 173 ms).
        let b8 = gpu(8);
        assert!(close(b8.predicted_ms(4, 1), 2.0 * 119.2));
        assert!(close(b8.predicted_ms(5, 1), 2.0 * 173.0));
        assert_eq!(taken(&b8), 5, "queries taken with 0..=4 rows in flight");
        // The planner's capacity under the SLO counts batches of 4 for both (2 x 119.2 ms
        // fits, 2 x 173 does not): in that steady state a query waits out one batch and runs
        // in the next.
        let at_4 = b8
            .latency_at(4)
            .map_or(0.0, |(p, _)| peak_qps(4, p.mean_ms));
        assert_eq!(b8.peak_qps_within(Some(300.0)), at_4);
        assert_eq!(b4.peak_qps_within(Some(300.0)), at_4);
    }

    #[test]
    fn the_compact_one_row_prediction_equals_the_profile_s() {
        let mut b = Snapshot::builder();
        let mut wide = variant("w", "m", 0.9, 1.5);
        wide.max_batch = 32; // past the largest profiled batch: extrapolated
        let mut huge = variant("h", "m", 0.8, 1.0);
        huge.max_batch = TABULATED_BATCH + 1; // not tabulated: read from the entry
        let ids = [
            b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap(),
            b.add_variant("t", wide).unwrap(),
            b.add_variant("t", huge).unwrap(),
        ];
        let s = b.build();
        for v in ids {
            for queued in 0..600 {
                assert_eq!(
                    s.predicted_one_row_ms(v, queued),
                    s.variants()[v].predicted_ms(queued, 1),
                    "variant {v}, {queued} queued"
                );
            }
            assert_eq!(s.hot()[v].accuracy, s.variants()[v].accuracy);
        }
    }

    /// The live list as rule 1 needs it: the variants with an Active instance, in list order.
    fn expected_live(s: &Snapshot, list: &[usize]) -> Vec<usize> {
        list.iter()
            .copied()
            .filter(|&v| s.shortest_active(v).is_some())
            .collect()
    }

    #[test]
    fn live_lists_follow_instances_through_state_changes_removals_and_dead_workers() {
        let mut b = Snapshot::builder();
        let v: Vec<usize> = (0..5)
            .map(|k| {
                let model = if k % 2 == 0 { "even" } else { "odd" };
                b.add_variant(
                    "t",
                    variant(&format!("v{k}"), model, 0.5 + 0.1 * k as f64, 1.0),
                )
                .unwrap()
            })
            .collect();
        let w0 = b
            .add_worker(worker("w0", &[HardwareKind::Cpu], 0.0))
            .unwrap();
        let w1 = b
            .add_worker(worker("w1", &[HardwareKind::Cpu], 0.0))
            .unwrap();
        // Added before the lists are sorted.
        b.add_instance(instance("a", v[1], w0)).unwrap();
        let mut s = b.build();
        let check = |s: &Snapshot| {
            for list in [
                s.app_list("t", "app").unwrap(),
                s.model_list("t", "even").unwrap(),
                s.model_list("t", "odd").unwrap(),
            ] {
                assert_eq!(list.live(), expected_live(s, list.all()));
            }
        };
        check(&s);
        assert_eq!(s.app_list("t", "app").unwrap().live(), [v[1]]);
        let b2 = s.add_instance(instance("b", v[3], w1)).unwrap();
        let c = s.add_instance(instance("c", v[1], w1)).unwrap();
        let d = s.add_instance(instance("d", v[4], w0)).unwrap();
        check(&s);
        // Most accurate first.
        assert_eq!(s.app_list("t", "app").unwrap().live(), [v[4], v[3], v[1]]);
        s.set_instance_state(d, InstanceState::Overloaded).unwrap();
        check(&s);
        s.set_instance_state(d, InstanceState::Active).unwrap();
        s.remove_instance(c).unwrap();
        check(&s);
        assert_eq!(s.app_list("t", "app").unwrap().live(), [v[4], v[3], v[1]]);
        s.remove_worker("w0").unwrap();
        check(&s);
        assert_eq!(s.app_list("t", "app").unwrap().live(), [v[3]]);
        s.set_instance_state(b2, InstanceState::Inactive).unwrap();
        check(&s);
        assert!(s.app_list("t", "app").unwrap().live().is_empty());
    }

    #[test]
    fn cost_per_query_shares_the_batch() {
        let mut v = variant("v", "m", 0.9, 1.0);
        v.latency.sort_by_key(|p| p.batch);
        v.threads = 2;
        v.memory_bytes = 2_000_000_000;
        let prices = Prices {
            cpu_core_per_s: 1.0,
            memory_gb_per_s: 0.5,
            gpu_per_s: 10.0,
        };
        // rate 2 x 1 + 2 GB x 0.5 = 3 per s; mean at batch 1 = 0.9 ms.
        let c1 = variant_cost_per_query(&v, &prices, 1);
        assert!((c1 - 3.0 * 0.0009).abs() < 1e-12);
        // batch 8: mean 3.6 ms shared by 8 rows.
        let c8 = variant_cost_per_query(&v, &prices, 8);
        assert!((c8 - 3.0 * 0.0036 / 8.0).abs() < 1e-12);
        // Batches beyond max_batch are clamped.
        assert_eq!(variant_cost_per_query(&v, &prices, 64), c8);
        v.hardware = HardwareKind::Gpu;
        assert!((variant_cost_per_query(&v, &prices, 1) - 13.0 * 0.0009).abs() < 1e-12);
    }

    #[test]
    fn indexes_are_tenant_scoped_and_sorted() {
        let mut b = Snapshot::builder();
        let slow = b.add_variant("a", variant("slow", "m1", 0.9, 5.0)).unwrap();
        let fast = b.add_variant("a", variant("fast", "m1", 0.9, 1.0)).unwrap();
        let best = b
            .add_variant("a", variant("best", "m2", 0.99, 9.0))
            .unwrap();
        let other = b
            .add_variant("b", variant("other", "m1", 0.5, 1.0))
            .unwrap();
        let s = b.build();
        assert_eq!(s.app_variants("a", "app"), [best, fast, slow]);
        assert_eq!(s.model_variants("a", "m1"), [fast, slow]);
        assert_eq!(s.app_variants("b", "app"), [other]);
        assert!(s.app_variants("c", "app").is_empty());
        assert!(s.model_variants("a", "nope").is_empty());
        assert_eq!(s.variant_index("fast"), Some(fast));
    }

    #[test]
    fn invalid_entries_are_refused() {
        let mut b = Snapshot::builder();
        let mut v = variant("v", "m", 0.9, 1.0);
        v.latency.clear();
        assert!(matches!(
            b.add_variant("t", v),
            Err(SnapshotError::InvalidVariant { .. })
        ));
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        assert!(matches!(
            b.add_variant("t", variant("v", "m", 0.9, 1.0)),
            Err(SnapshotError::Duplicate { .. })
        ));
        let gpu = b
            .add_worker(worker("g", &[HardwareKind::Gpu], 0.0))
            .unwrap();
        assert!(matches!(
            b.add_instance(instance("i", v, gpu)),
            Err(SnapshotError::MissingHardware { .. })
        ));
        assert!(matches!(
            b.add_instance(instance("i", 7, gpu)),
            Err(SnapshotError::UnknownVariant(7))
        ));
    }

    #[test]
    fn updates_are_in_place_and_removed_workers_drop_their_instances() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w1 = b
            .add_worker(worker("w1", &[HardwareKind::Cpu], 0.1))
            .unwrap();
        let w2 = b
            .add_worker(worker("w2", &[HardwareKind::Cpu], 0.2))
            .unwrap();
        let i1 = b.add_instance(instance("i1", v, w1)).unwrap();
        let i2 = b.add_instance(instance("i2", v, w2)).unwrap();
        let mut s = b.build();

        s.set_instance_load(i1, 5, 42.0).unwrap();
        s.set_instance_state(i1, InstanceState::Overloaded).unwrap();
        assert_eq!(s.instances()[i1].queue_len, 5);
        assert_eq!(s.instances()[i1].state, InstanceState::Overloaded);
        assert!(s.set_instance_load(99, 0, 0.0).is_err());

        assert_eq!(s.remove_worker("w1").unwrap(), 1);
        assert_eq!(s.variant_instances(v), [i2]);
        assert_eq!(s.workers_with(HardwareKind::Cpu), [w2]);
        assert!(!s.workers()[w1].alive);
        assert_eq!(s.instances()[i1].state, InstanceState::Inactive);
        assert_eq!(s.worker_index("w1"), None);
        assert_eq!(s.instance_index("i1"), None);
        assert!(s.remove_worker("w1").is_err());
        assert!(matches!(
            s.add_instance(instance("i3", v, w1)),
            Err(SnapshotError::DeadWorker { .. })
        ));

        let peak = s.variants()[v].peak_qps();
        assert_eq!(peak, 8.0 / 3.6 * 1000.0);
        let f = InstanceFigures {
            loaded: true,
            qps: peak,
            peak_qps: peak,
            queue_len: 3,
            max_batch: 8,
            p99_ms_observed: Some(4.0),
            p99_ms_profiled: 4.0,
            slo_answered: 0,
            slo_late: 0,
            self_contended: false,
        };
        let t = Thresholds::default();
        assert_eq!(
            s.observe_instance(i2, &f, &t),
            Ok(InstanceState::Overloaded)
        );
        assert_eq!(s.instances()[i2].queue_len, 3);

        s.remove_instance(i2).unwrap();
        s.remove_instance(i2).unwrap();
        assert!(s.variant_instances(v).is_empty());
        let i3 = s.add_instance(instance("i3", v, w2)).unwrap();
        assert_eq!(s.variant_instances(v), [i3]);
    }
}
