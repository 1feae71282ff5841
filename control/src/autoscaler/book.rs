//! The autoscaler's memory between periods, kept apart from I/O so that tests drive it with
//! explicit times: which families and workers have an action under way, how long every worker
//! has been idle, and the workers the provider started. (What the model period decides on,
//! each family's load, stability and forecast, instance ages and Interfered periods, is the
//! scheduler's [`ModelLoop`](infaas_scheduler::autoscale::ModelLoop).)

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use infaas_core::HardwareKind;
use infaas_provision::ProvisionedWorker;
use infaas_scheduler::{InstanceState, Snapshot};

/// A family: `(tenant id, model name)`.
pub type FamilyKey = (String, String);

/// An application: `(tenant id, application name)`.
pub type AppKey = (String, String);

/// Capacity the model autoscaler wanted and could not place on any live worker.
#[derive(Debug, Clone, PartialEq)]
pub struct Shortage {
    pub hardware: HardwareKind,
    pub apps: BTreeSet<AppKey>,
    pub reason: String,
    pub at: Instant,
}

/// A worker the provider started, with the applications it was started for or served.
#[derive(Debug, Clone, PartialEq)]
pub struct Provisioned {
    pub worker: ProvisionedWorker,
    pub apps: BTreeSet<AppKey>,
    pub started: Instant,
    /// Whether it has sent a heartbeat yet.
    pub registered: bool,
    /// Whether it is being stopped.
    pub stopping: bool,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Book {
    busy: HashMap<FamilyKey, Instant>,
    last_busy: HashMap<String, Instant>,
    pub shortage: Option<Shortage>,
    pub provisioned: HashMap<String, Provisioned>,
    /// An add under way (the provider call has not returned).
    pub adding: bool,
}

impl Book {
    /// Marks a family busy; `false` when an action of it is already under way.
    pub fn begin(&mut self, family: &FamilyKey, now: Instant) -> bool {
        if self.busy.contains_key(family) {
            return false;
        }
        self.busy.insert(family.clone(), now);
        true
    }

    /// Ends a family's action.
    pub fn finish(&mut self, family: &FamilyKey) {
        self.busy.remove(family);
    }

    pub fn is_busy(&self, family: &FamilyKey) -> bool {
        self.busy.contains_key(family)
    }

    pub fn any_busy(&self) -> bool {
        !self.busy.is_empty()
    }

    /// Records which workers have instances this period.
    pub fn observe_workers(&mut self, s: &Snapshot, now: Instant) {
        let mut with = vec![false; s.workers().len()];
        for i in s.instances() {
            if i.state != InstanceState::Inactive {
                with[i.worker] = true;
            }
        }
        let mut seen = HashMap::with_capacity(with.len());
        for (w, e) in s.workers().iter().enumerate() {
            let last = if with[w] {
                now
            } else {
                self.last_busy.get(&e.id).copied().unwrap_or(now)
            };
            seen.insert(e.id.clone(), last);
        }
        self.last_busy = seen;
    }

    /// How long worker `id` has had no instance, in s.
    pub fn idle_for_s(&self, id: &str, now: Instant) -> f64 {
        self.last_busy
            .get(id)
            .map_or(0.0, |t| now.duration_since(*t).as_secs_f64())
    }

    /// Records a shortage of room (the latest one wins).
    pub fn short_of(&mut self, hardware: HardwareKind, app: AppKey, reason: String, now: Instant) {
        match &mut self.shortage {
            Some(s) if s.hardware == hardware && now.duration_since(s.at) < SHORTAGE_TTL => {
                s.apps.insert(app);
                s.reason = reason;
                s.at = now;
            }
            _ => {
                self.shortage = Some(Shortage {
                    hardware,
                    apps: BTreeSet::from([app]),
                    reason,
                    at: now,
                })
            }
        }
    }

    /// The shortage reported in the last [`SHORTAGE_TTL`], taken.
    pub fn take_shortage(&mut self, now: Instant) -> Option<Shortage> {
        self.shortage
            .take()
            .filter(|s| now.duration_since(s.at) < SHORTAGE_TTL)
    }

    /// Whether a started worker has not registered yet (within `timeout`): no other worker is
    /// added meanwhile. Workers past the timeout are given up on (returned, to be stopped).
    pub fn starting(&mut self, now: Instant, timeout: Duration) -> (bool, Vec<ProvisionedWorker>) {
        let mut waiting = self.adding;
        let mut failed = Vec::new();
        for p in self.provisioned.values_mut() {
            if p.registered || p.stopping {
                continue;
            }
            if now.duration_since(p.started) < timeout {
                waiting = true;
            } else {
                p.stopping = true;
                failed.push(p.worker.clone());
            }
        }
        (waiting, failed)
    }
}

/// A shortage older than this is stale (the model autoscaler reports it every period while
/// it lasts).
pub const SHORTAGE_TTL: Duration = Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::LatencyPoint;
    use infaas_scheduler::{InstanceEntry, VariantEntry, WorkerEntry};

    fn snapshot(states: &[(&str, usize, InstanceState)], workers: usize) -> Snapshot {
        let mut b = Snapshot::builder();
        let v = b
            .add_variant(
                "t",
                VariantEntry {
                    id: "v".into(),
                    name: "v".into(),
                    model: "m".into(),
                    app: "a".into(),
                    accuracy: 0.9,
                    hardware: HardwareKind::Cpu,
                    threads: 1,
                    max_batch: 1,
                    load_ms: 10.0,
                    memory_bytes: 1,
                    latency: vec![LatencyPoint {
                        batch: 1,
                        p50_ms: 1.0,
                        p99_ms: 1.0,
                        mean_ms: 1.0,
                        throughput_per_s: 1000.0,
                    }],
                },
            )
            .unwrap();
        for w in 0..workers {
            b.add_worker(WorkerEntry {
                id: format!("w{w}"),
                hardware: vec![HardwareKind::Cpu],
                cores: 4,
                cpu_cores: 4,
                cores_used: 0,
                memory_bytes: 1 << 30,
                memory_used: 0,
                alive: true,
                utilisation: 0.0,
                interference_seen: false,
                busy_threads: 0,
            })
            .unwrap();
        }
        let mut s = b.build();
        for (id, worker, state) in states {
            let i = s
                .add_instance(InstanceEntry {
                    id: id.to_string(),
                    variant: v,
                    worker: *worker,
                    state: InstanceState::Active,
                    queue_len: 0,
                    qps: 0.0,
                })
                .unwrap();
            s.set_instance_state(i, *state).unwrap();
        }
        s
    }

    fn family() -> FamilyKey {
        ("t".into(), "m".into())
    }

    #[test]
    fn one_action_per_family_at_a_time() {
        let mut b = Book::default();
        let now = Instant::now();
        assert!(b.begin(&family(), now));
        assert!(!b.begin(&family(), now), "a pending action is not repeated");
        assert!(b.is_busy(&family()) && b.any_busy());
        assert!(b.begin(&("t".into(), "other".into()), now));
        b.finish(&family());
        assert!(b.begin(&family(), now));
    }

    #[test]
    fn idle_time_counts_from_the_last_period_with_instances() {
        let mut b = Book::default();
        let t0 = Instant::now();
        b.observe_workers(&snapshot(&[("i", 0, InstanceState::Active)], 2), t0);
        let t1 = t0 + Duration::from_secs(7);
        b.observe_workers(&snapshot(&[], 2), t1);
        assert_eq!(b.idle_for_s("w0", t1), 7.0);
        assert_eq!(
            b.idle_for_s("w1", t1),
            7.0,
            "first seen at t0 without instances"
        );
        let t2 = t1 + Duration::from_secs(1);
        b.observe_workers(&snapshot(&[("i", 1, InstanceState::Active)], 2), t2);
        assert_eq!(b.idle_for_s("w1", t2), 0.0);
        assert_eq!(b.idle_for_s("w0", t2), 8.0);
    }

    #[test]
    fn shortages_merge_and_expire() {
        let mut b = Book::default();
        let t0 = Instant::now();
        b.short_of(HardwareKind::Cpu, ("t".into(), "a".into()), "x".into(), t0);
        b.short_of(HardwareKind::Cpu, ("u".into(), "b".into()), "y".into(), t0);
        let s = b.take_shortage(t0).unwrap();
        assert_eq!(s.apps.len(), 2);
        assert_eq!(s.reason, "y");
        assert!(b.take_shortage(t0).is_none(), "taken");
        b.short_of(HardwareKind::Cpu, ("t".into(), "a".into()), "x".into(), t0);
        assert!(b.take_shortage(t0 + SHORTAGE_TTL).is_none(), "stale");
    }

    #[test]
    fn a_worker_that_never_registers_is_given_up() {
        let mut b = Book::default();
        let t0 = Instant::now();
        let w = ProvisionedWorker {
            name: "worker-1".into(),
            hardware: HardwareKind::Cpu,
            started_at_ms: 0,
        };
        b.provisioned.insert(
            w.name.clone(),
            Provisioned {
                worker: w.clone(),
                apps: BTreeSet::new(),
                started: t0,
                registered: false,
                stopping: false,
            },
        );
        let timeout = Duration::from_secs(30);
        assert_eq!(
            b.starting(t0 + Duration::from_secs(5), timeout),
            (true, vec![])
        );
        assert_eq!(
            b.starting(t0 + Duration::from_secs(31), timeout),
            (false, vec![w])
        );
        assert_eq!(
            b.starting(t0 + Duration::from_secs(32), timeout),
            (false, vec![])
        );
    }
}
