//! The worker node: instances within a thread and memory budget.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_core::{HardwareKind, Tensor};
use infaas_executors::batcher::{BatcherConfig, Instance, InstanceError};
use infaas_executors::engine::{Engine, EngineError, Hardware, OptLevel, SessionConfig};
use infaas_executors::simulated::LatencyProfile;
use infaas_store::ObjectStore;

use crate::wire::{Heartbeat, InstanceReport, LoadRequest, LoadedReport, WorkerInfo};

#[derive(Debug, Clone)]
pub struct NodeConfig {
    pub id: String,
    pub name: String,
    pub address: Option<String>,
    pub cores: usize,
    /// Intra-op threads instances may reserve in total. Idle sessions use no CPU, so the
    /// default oversubscribes the cores; the autoscaler watches real utilisation.
    pub thread_budget: usize,
    pub memory_budget_bytes: u64,
    pub gpu: bool,
    /// A simulated GPU (see `infaas_executors::simulated`): the worker offers GPU variants,
    /// runs them on the CPU and answers after the profile's latency. It takes the place of a
    /// real GPU, if there is one.
    pub simulated_gpu: Option<Arc<LatencyProfile>>,
    pub max_queue_delay: Duration,
    /// A query arriving at an idle instance whose latest run took at most this long runs on
    /// the calling thread instead of the session's (zero: never); see
    /// `infaas_executors::engine::InlineRunner`.
    pub inline_below: Duration,
    /// Under load, a partial batch waits one scheduling round for rows on their way when the
    /// instance's runs show a fixed part worth several rows (`BatcherConfig::gather_rows`).
    pub gather_rows: bool,
    /// Rows an instance may queue before answering "queue full".
    pub queue_capacity_rows: usize,
    /// Instances idle for longer than this may be evicted to make room for a load.
    pub evict_idle_after: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("variant '{0}' is not loaded on this worker")]
    NotLoaded(String),
    #[error("loading '{variant}' needs {threads} threads and {memory} bytes; the worker has {free_threads} threads and {free_memory} bytes free (budget {thread_budget} threads, {memory_budget} bytes)")]
    BudgetExceeded {
        variant: String,
        threads: usize,
        memory: u64,
        free_threads: usize,
        free_memory: u64,
        thread_budget: usize,
        memory_budget: u64,
    },
    #[error("this worker has no {0} hardware")]
    NoHardware(&'static str),
    #[error("cannot fetch the model file '{key}': {source}")]
    Fetch {
        key: String,
        #[source]
        source: infaas_store::StoreError,
    },
    #[error("cannot load '{variant}': {source}")]
    Load {
        variant: String,
        #[source]
        source: EngineError,
    },
    #[error(transparent)]
    Instance(#[from] InstanceError),
}

struct Slot {
    instance: Instance,
    req: LoadRequest,
    last_used: Arc<AtomicU64>,
}

pub struct WorkerNode {
    cfg: NodeConfig,
    objects: Arc<dyn ObjectStore>,
    slots: Mutex<HashMap<String, Arc<Slot>>>,
    /// Loads run one at a time so budget checks and evictions do not race.
    load_lock: tokio::sync::Mutex<()>,
    started: Instant,
    cpu_sample: Mutex<Option<CpuSample>>,
}

/// CPU time read at one heartbeat: this process's, and the machine's (busy, all) in ticks.
#[derive(Debug, Clone, Copy)]
struct CpuSample {
    at: Instant,
    process_s: f64,
    host: Option<HostTicks>,
}

/// How long a replaced instance keeps accepting requests after a resize.
const RETIRE_AFTER: Duration = Duration::from_millis(200);

fn millis_since(start: Instant) -> u64 {
    start.elapsed().as_millis() as u64
}

impl WorkerNode {
    pub fn new(cfg: NodeConfig, objects: Arc<dyn ObjectStore>) -> WorkerNode {
        WorkerNode {
            cfg,
            objects,
            slots: Mutex::new(HashMap::new()),
            load_lock: tokio::sync::Mutex::new(()),
            started: Instant::now(),
            cpu_sample: Mutex::new(None),
        }
    }

    pub fn info(&self) -> WorkerInfo {
        let mut hardware = vec![HardwareKind::Cpu];
        if self.cfg.gpu || self.cfg.simulated_gpu.is_some() {
            hardware.push(HardwareKind::Gpu);
        }
        WorkerInfo {
            id: self.cfg.id.clone(),
            name: self.cfg.name.clone(),
            address: self.cfg.address.clone(),
            hardware,
            cores: self.cfg.cores,
            thread_budget: self.cfg.thread_budget,
            memory_budget_bytes: self.cfg.memory_budget_bytes,
            simulated_gpu: self.cfg.simulated_gpu.as_deref().cloned(),
        }
    }

    pub fn id(&self) -> &str {
        &self.cfg.id
    }

    fn slot(&self, variant_id: &str) -> Option<Arc<Slot>> {
        self.slots.lock().ok()?.get(variant_id).cloned()
    }

    pub fn is_loaded(&self, variant_id: &str) -> bool {
        self.slot(variant_id).is_some()
    }

    fn used(&self) -> (usize, u64) {
        self.slots
            .lock()
            .map(|s| {
                s.values().fold((0, 0), |(t, m), slot| {
                    (t + slot.req.threads, m + slot.req.memory_bytes)
                })
            })
            .unwrap_or((0, 0))
    }

    /// Loads a variant (a no-op when already loaded), evicting idle instances when the
    /// budget requires it; refuses a load that would exceed the budget.
    pub async fn load(&self, req: LoadRequest) -> Result<LoadedReport, WorkerError> {
        let _guard = self.load_lock.lock().await;
        if self.is_loaded(&req.variant_id) {
            return Ok(LoadedReport {
                variant_id: req.variant_id,
                load_ms: 0.0,
            });
        }
        if req.hardware == HardwareKind::Gpu && !self.cfg.gpu && self.cfg.simulated_gpu.is_none() {
            return Err(WorkerError::NoHardware("gpu"));
        }
        self.make_room(&req).await?;
        let (instance, load_ms) = self.start_instance(&req).await?;
        tracing::info!(worker = %self.cfg.name, variant = %req.variant_name, load_ms, "variant loaded");
        let slot = Arc::new(Slot {
            instance,
            last_used: Arc::new(AtomicU64::new(millis_since(self.started))),
            req: req.clone(),
        });
        if let Ok(mut slots) = self.slots.lock() {
            slots.insert(req.variant_id.clone(), slot);
        }
        Ok(LoadedReport {
            variant_id: req.variant_id,
            load_ms,
        })
    }

    /// Fetches the model file and starts an instance of it with `req`'s settings; returns it
    /// with the load time in ms.
    async fn start_instance(&self, req: &LoadRequest) -> Result<(Instance, f64), WorkerError> {
        let bytes = self
            .objects
            .get_bytes(&req.object_key)
            .await
            .map_err(|source| WorkerError::Fetch {
                key: req.object_key.clone(),
                source,
            })?;
        let cfg = self.session_config(req);
        let started = Instant::now();
        let name = req.variant_name.clone();
        let engine = tokio::task::spawn_blocking(move || Engine::load(bytes.to_vec(), &cfg))
            .await
            .map_err(|e| WorkerError::Load {
                variant: name.clone(),
                source: EngineError::Spawn(std::io::Error::other(e.to_string())),
            })?
            .map_err(|source| WorkerError::Load {
                variant: name,
                source,
            })?;
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let instance = Instance::start(
            engine,
            BatcherConfig {
                max_batch: req.max_batch.max(1),
                max_queue_delay: self.cfg.max_queue_delay,
                queue_capacity: self.cfg.queue_capacity_rows.max(req.max_batch),
                inline_below: self.cfg.inline_below,
                gather_rows: self.cfg.gather_rows,
            },
        );
        Ok((instance, load_ms))
    }

    /// Runs a loaded variant with `threads` intra-op threads from now on (vertical scaling): a
    /// new session with `threads` threads is loaded while the old one keeps serving, then takes
    /// its place; the old one finishes its queued requests and stops. A no-op when the
    /// instance already has `threads`. Refuses a change the thread budget cannot hold.
    pub async fn resize(
        &self,
        variant_id: &str,
        threads: usize,
    ) -> Result<LoadedReport, WorkerError> {
        let _guard = self.load_lock.lock().await;
        let old = self
            .slot(variant_id)
            .ok_or_else(|| WorkerError::NotLoaded(variant_id.to_string()))?;
        let threads = threads.max(1);
        if old.req.threads == threads {
            return Ok(LoadedReport {
                variant_id: variant_id.to_string(),
                load_ms: 0.0,
            });
        }
        let (used_threads, used_memory) = self.used();
        let after = used_threads - old.req.threads + threads;
        if old.req.hardware == HardwareKind::Cpu && after > self.cfg.thread_budget {
            return Err(WorkerError::BudgetExceeded {
                variant: old.req.variant_name.clone(),
                threads: threads - old.req.threads.min(threads),
                memory: 0,
                free_threads: self.cfg.thread_budget.saturating_sub(used_threads),
                free_memory: self.cfg.memory_budget_bytes.saturating_sub(used_memory),
                thread_budget: self.cfg.thread_budget,
                memory_budget: self.cfg.memory_budget_bytes,
            });
        }
        let req = LoadRequest {
            threads,
            ..old.req.clone()
        };
        let (instance, load_ms) = self.start_instance(&req).await?;
        let fresh = Arc::new(Slot {
            instance,
            req,
            last_used: old.last_used.clone(),
        });
        let swapped = self.slots.lock().ok().and_then(|mut slots| {
            // Unloaded meanwhile: keep it unloaded.
            let current = slots.get_mut(variant_id)?;
            Some(std::mem::replace(current, fresh.clone()))
        });
        match swapped {
            Some(previous) => {
                // Requests that took the old slot just before the swap still get in.
                tokio::spawn(async move {
                    tokio::time::sleep(RETIRE_AFTER).await;
                    previous.instance.shutdown();
                });
                tracing::info!(worker = %self.cfg.name, variant = %old.req.variant_name, from = old.req.threads, to = threads, load_ms, "instance resized");
                Ok(LoadedReport {
                    variant_id: variant_id.to_string(),
                    load_ms,
                })
            }
            None => {
                fresh.instance.shutdown();
                Err(WorkerError::NotLoaded(variant_id.to_string()))
            }
        }
    }

    /// Intra-op threads of a loaded variant's instance.
    pub fn threads_of(&self, variant_id: &str) -> Option<usize> {
        self.slot(variant_id).map(|s| s.req.threads)
    }

    /// How to run a variant here: GPU variants on the simulated GPU when there is one.
    fn session_config(&self, req: &LoadRequest) -> SessionConfig {
        let simulated = match req.hardware {
            HardwareKind::Gpu => self.cfg.simulated_gpu.clone(),
            HardwareKind::Cpu => None,
        };
        SessionConfig {
            intra_threads: req.threads,
            optimization: OptLevel::All,
            hardware: match req.hardware {
                HardwareKind::Gpu if simulated.is_none() => Hardware::Cuda,
                _ => Hardware::Cpu,
            },
            optimized_model_out: None,
            simulated,
        }
    }

    async fn make_room(&self, req: &LoadRequest) -> Result<(), WorkerError> {
        loop {
            let (threads, memory) = self.used();
            let fits = threads + req.threads <= self.cfg.thread_budget
                && memory + req.memory_bytes <= self.cfg.memory_budget_bytes;
            if fits {
                return Ok(());
            }
            // Evict the least recently used idle instance, if any.
            let now = millis_since(self.started);
            let idle_ms = self.cfg.evict_idle_after.as_millis() as u64;
            let victim = self.slots.lock().ok().and_then(|slots| {
                slots
                    .iter()
                    .filter(|(_, s)| {
                        let figures = s.instance.figures();
                        now.saturating_sub(s.last_used.load(Ordering::Relaxed)) >= idle_ms
                            && figures.queue_rows == 0
                            && !figures.in_flight
                    })
                    .min_by_key(|(_, s)| s.last_used.load(Ordering::Relaxed))
                    .map(|(id, _)| id.clone())
            });
            match victim {
                Some(id) => {
                    tracing::info!(worker = %self.cfg.name, variant = %id, "evicting an idle instance to make room");
                    self.unload(&id);
                }
                None => {
                    return Err(WorkerError::BudgetExceeded {
                        variant: req.variant_name.clone(),
                        threads: req.threads,
                        memory: req.memory_bytes,
                        free_threads: self.cfg.thread_budget.saturating_sub(threads),
                        free_memory: self.cfg.memory_budget_bytes.saturating_sub(memory),
                        thread_budget: self.cfg.thread_budget,
                        memory_budget: self.cfg.memory_budget_bytes,
                    })
                }
            }
        }
    }

    /// Unloads a variant; queued requests finish first. Returns whether it was loaded.
    pub fn unload(&self, variant_id: &str) -> bool {
        let slot = self
            .slots
            .lock()
            .ok()
            .and_then(|mut s| s.remove(variant_id));
        match slot {
            Some(slot) => {
                slot.instance.shutdown();
                tracing::info!(worker = %self.cfg.name, variant = %slot.req.variant_name, "variant unloaded");
                true
            }
            None => false,
        }
    }

    /// Runs a request on a loaded variant.
    pub async fn infer(
        &self,
        variant_id: &str,
        inputs: Vec<Tensor>,
    ) -> Result<Vec<Tensor>, WorkerError> {
        let slot = self
            .slot(variant_id)
            .ok_or_else(|| WorkerError::NotLoaded(variant_id.to_string()))?;
        slot.last_used
            .store(millis_since(self.started), Ordering::Relaxed);
        // A request that took the slot just before an unload finds its instance stopped:
        // report the variant as gone (the caller loads it again or goes elsewhere).
        match slot.instance.infer(inputs).await {
            Err(InstanceError::Stopped)
                if self
                    .slot(variant_id)
                    .is_none_or(|now| !Arc::ptr_eq(&now, &slot)) =>
            {
                Err(WorkerError::NotLoaded(variant_id.to_string()))
            }
            other => Ok(other?),
        }
    }

    /// Busy fraction of the worker's cores since the last call, and its process's own share
    /// of it. The first is the process's CPU time, or more when the machine has fewer idle
    /// cores than that leaves (other processes on the same cores, such as a controller, a
    /// client or another worker, use them too); the second is the process's CPU time alone
    /// (its instances and, for the embedded worker, the controller's serving edge).
    fn utilisation(&self) -> (f64, f64) {
        let Some(process_s) = process_cpu_seconds() else {
            return (0.0, 0.0);
        };
        let now = CpuSample {
            at: Instant::now(),
            process_s,
            host: host_ticks(),
        };
        let Ok(mut last) = self.cpu_sample.lock() else {
            return (0.0, 0.0);
        };
        let cores = self.cfg.cores.max(1) as f64;
        let u = last.map_or((0.0, 0.0), |before| {
            (
                busy_fraction(&before, &now, cores),
                own_fraction(&before, &now, cores),
            )
        });
        *last = Some(now);
        u
    }

    pub fn heartbeat(&self) -> Heartbeat {
        let now = millis_since(self.started);
        let slots: Vec<Arc<Slot>> = self
            .slots
            .lock()
            .map(|s| s.values().cloned().collect())
            .unwrap_or_default();
        let instances = slots
            .iter()
            .map(|s| {
                let f = s.instance.figures();
                InstanceReport {
                    variant_id: s.req.variant_id.clone(),
                    variant_name: s.req.variant_name.clone(),
                    threads: s.req.threads,
                    max_batch: s.req.max_batch,
                    memory_bytes: s.req.memory_bytes,
                    queue_rows: f.queue_rows,
                    in_flight: f.in_flight,
                    requests_total: f.requests_total,
                    rows_total: f.rows_total,
                    errors_total: f.errors_total,
                    qps: f.qps,
                    latency_p50_ms: f.latency_p50_ms,
                    latency_p99_ms: f.latency_p99_ms,
                    exec_p50_ms: f.exec_p50_ms,
                    exec_p99_ms: f.exec_p99_ms,
                    batch_histogram: f.batch_histogram.clone(),
                    idle_ms: now.saturating_sub(s.last_used.load(Ordering::Relaxed)),
                }
            })
            .collect();
        let (threads_used, memory_used_bytes) = self.used();
        let (utilisation, own_utilisation) = self.utilisation();
        Heartbeat {
            worker: self.info(),
            threads_used,
            memory_used_bytes,
            utilisation,
            own_utilisation,
            instances,
        }
    }

    /// Stops every instance (queued requests finish first).
    pub fn shutdown(&self) {
        let ids: Vec<String> = self
            .slots
            .lock()
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        for id in ids {
            self.unload(&id);
        }
    }
}

/// User + system CPU seconds of this process (Linux `/proc/self/stat`).
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may contain spaces).
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The machine's CPU time in clock ticks (Linux `/proc/stat`): busy and in all, and how
/// many CPUs it counts.
#[derive(Debug, Clone, Copy, PartialEq)]
struct HostTicks {
    busy: u64,
    total: u64,
    cpus: usize,
}

fn host_ticks() -> Option<HostTicks> {
    parse_host_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

fn parse_host_ticks(stat: &str) -> Option<HostTicks> {
    let mut lines = stat.lines();
    let all = lines.next()?.strip_prefix("cpu ")?;
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let ticks: Vec<u64> = all
        .split_whitespace()
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = ticks.iter().sum();
    let idle = ticks.get(3)? + ticks.get(4).copied().unwrap_or(0);
    let cpus = lines
        .take_while(|l| l.starts_with("cpu"))
        .filter(|l| l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .count();
    Some(HostTicks {
        busy: total.saturating_sub(idle),
        total,
        cpus: cpus.max(1),
    })
}

/// Busy fraction of `cores` between two samples: the process's own CPU time over them, or,
/// when the machine's idle cores over the interval are fewer than those the process left
/// idle, what that leaves (`1 - idle cores of the machine / cores`).
/// The process's own CPU time between two samples, as a fraction of `cores`, in [0, 1].
fn own_fraction(before: &CpuSample, now: &CpuSample, cores: f64) -> f64 {
    let wall = now.at.duration_since(before.at).as_secs_f64();
    if wall <= 0.0 {
        return 0.0;
    }
    ((now.process_s - before.process_s) / (wall * cores)).clamp(0.0, 1.0)
}

fn busy_fraction(before: &CpuSample, now: &CpuSample, cores: f64) -> f64 {
    let wall = now.at.duration_since(before.at).as_secs_f64();
    if wall <= 0.0 {
        return 0.0;
    }
    let own = (now.process_s - before.process_s) / (wall * cores);
    let host = match (before.host, now.host) {
        (Some(b), Some(n)) if n.total > b.total => {
            let busy = n.busy.saturating_sub(b.busy) as f64 / (n.total - b.total) as f64;
            let idle_cores = (1.0 - busy) * n.cpus as f64;
            1.0 - idle_cores / cores
        }
        _ => 0.0,
    };
    own.max(host).clamp(0.0, 1.0)
}

/// Memory the machine has available now (Linux `/proc/meminfo`), for default budgets.
pub fn available_memory_bytes() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &str = "cpu  100 5 50 800 20 3 2 0 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\ncpu1 50 3 25 400 10 2 1 0 0 0\nintr 12345\n";

    #[test]
    fn host_ticks_are_read_from_proc_stat() {
        assert_eq!(
            parse_host_ticks(STAT),
            Some(HostTicks {
                busy: 160,
                total: 980,
                cpus: 2
            })
        );
        assert_eq!(parse_host_ticks("intr 1\n"), None);
        assert_eq!(parse_host_ticks("cpu  1 x 3\n"), None);
    }

    fn sample(at: Instant, process_s: f64, busy: u64, total: u64, cpus: usize) -> CpuSample {
        CpuSample {
            at,
            process_s,
            host: Some(HostTicks { busy, total, cpus }),
        }
    }

    /// A worker whose own process uses 1.5 of its 2 cores while a client on the same machine
    /// uses the rest has no idle core: its utilisation is the machine's, not its own 0.75.
    #[test]
    fn a_busy_machine_leaves_the_worker_no_idle_cores() {
        let t0 = Instant::now();
        let t1 = t0 + Duration::from_secs(1);
        let u = busy_fraction(
            &sample(t0, 10.0, 0, 0, 2),
            &sample(t1, 11.5, 200, 200, 2),
            2.0,
        );
        assert!((u - 1.0).abs() < 1e-9, "{u}");
        // Its own share stays its own: what self-contention is judged on.
        let own = own_fraction(
            &sample(t0, 10.0, 0, 0, 2),
            &sample(t1, 11.5, 200, 200, 2),
            2.0,
        );
        assert!((own - 0.75).abs() < 1e-9, "{own}");
        // Half the machine idle: its own figure stands.
        let u = busy_fraction(
            &sample(t0, 10.0, 0, 0, 2),
            &sample(t1, 10.5, 100, 200, 2),
            2.0,
        );
        assert!((u - 0.5).abs() < 1e-9, "{u}");
        // A one-core worker on a two-core machine whose other core is saturated by someone
        // else: its own core is idle, and it says so.
        let u = busy_fraction(
            &sample(t0, 10.0, 0, 0, 2),
            &sample(t1, 10.0, 100, 200, 2),
            1.0,
        );
        assert!(u.abs() < 1e-9, "{u}");
        // Without the machine's figures, the process's.
        let mut now = sample(t1, 10.6, 0, 0, 2);
        now.host = None;
        let u = busy_fraction(&sample(t0, 10.0, 0, 0, 2), &now, 2.0);
        assert!((u - 0.3).abs() < 1e-9, "{u}");
    }
}
