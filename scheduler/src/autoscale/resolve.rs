//! Turning a policy's [`Action`] (indices into the snapshot it was taken on) into steps on
//! named workers, and choosing where each new instance goes. Pure: the loops run the steps.
//!
//! A worker holds at most one instance of a variant (instances are keyed by worker and
//! variant), while the policies count room only. A load the policy placed on a worker that
//! already runs the variant goes to the least-utilised other live worker that can host it;
//! when there is none, the action waits and the worker autoscaler hears of the shortage.

use std::collections::{HashMap, HashSet};

use crate::autoscale::{Action, ActionKind};
use crate::instance_state::InstanceState;
use crate::snapshot::{has_cpu_only_worker, keeps_gpu_host, Snapshot};
use infaas_core::HardwareKind;

/// One thing to do on a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Load a variant (ids) on a worker.
    Load { worker: String, variant: String },
    /// Give a loaded instance `threads` intra-op threads.
    Resize {
        worker: String,
        variant: String,
        threads: usize,
    },
    /// Take an instance out of the index, then unload it.
    Unload { worker: String, variant: String },
}

/// An action ready to run: its steps in order (every load and resize before any unload).
#[derive(Debug, Clone, PartialEq)]
pub struct ActionPlan {
    /// Name in scaling events: `replicate`, `upgrade`, `downgrade`, `remove-replica`,
    /// `add-threads`, `remove-threads` (given back in place), `rebalance` (split into
    /// base-thread replicas), `migrate`.
    pub action: &'static str,
    /// Index of the variant the event names (the new one for loads, else the removed one).
    pub variant: usize,
    /// Index of the worker the event names.
    pub worker: usize,
    pub steps: Vec<Step>,
    pub reason: String,
    pub cost_before_per_s: f64,
    pub cost_after_per_s: f64,
}

/// What to do with an action.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolution {
    Run(ActionPlan),
    /// No live worker can take a new instance of `variant`: more workers are needed.
    Short {
        variant: usize,
        hardware: HardwareKind,
        reason: String,
    },
    /// Not for this executor (worker actions) or pointing at something gone.
    Skip(String),
}

/// Room and placements claimed by the actions resolved so far in one period, so that two
/// loads of one period do not count on the same free cores or the same worker.
#[derive(Debug, Default)]
pub struct ClaimedRoom {
    cores: HashMap<usize, usize>,
    memory: HashMap<usize, u64>,
    placed: HashSet<(usize, usize)>,
}

impl ClaimedRoom {
    /// Whether worker `w` holds (or was given this period) an instance of `v`.
    fn hosts(&self, s: &Snapshot, v: usize, w: usize) -> bool {
        self.placed.contains(&(v, w))
            || s.variant_instances(v).iter().any(|&i| {
                let inst = &s.instances()[i];
                inst.worker == w && inst.state != InstanceState::Inactive
            })
    }

    /// Whether worker `w` can take an instance of `v` with the room claimed so far. An
    /// instance that `adds` CPU demand (a replica, not a replacement of an instance that frees
    /// its threads) also needs cores that the worker's busy instances, its loads under way and
    /// this period's claims leave ([`Snapshot::busy_threads`]): capacity is counted in cores.
    /// A GPU worker takes a CPU variant only in a cluster without CPU workers (`cpu_only`,
    /// [`keeps_gpu_host`]), as the planner and the query path place.
    fn fits(&self, s: &Snapshot, v: usize, w: usize, adds: bool, cpu_only: bool) -> bool {
        let (Some(var), Some(wk)) = (s.variants().get(v), s.workers().get(w)) else {
            return false;
        };
        let cores = self.cores.get(&w).copied().unwrap_or(0);
        let memory = self.memory.get(&w).copied().unwrap_or(0);
        let cpu_room = !adds
            || var.hardware != HardwareKind::Cpu
            || s.busy_threads(w) + cores + var.threads <= wk.cpu_cores;
        wk.alive
            && wk.hardware.contains(&var.hardware)
            && !keeps_gpu_host(wk, var, cpu_only)
            && wk.free_cores() >= cores + var.threads
            && wk.free_memory() >= memory + var.memory_bytes
            && cpu_room
            && !self.hosts(s, v, w)
    }

    fn take(&mut self, s: &Snapshot, v: usize, w: usize) {
        let var = &s.variants()[v];
        *self.cores.entry(w).or_default() += var.threads;
        *self.memory.entry(w).or_default() += var.memory_bytes;
        self.placed.insert((v, w));
    }

    /// Where a new instance of `v` that replaces another goes: `preferred` when it can take
    /// it, else the least-utilised live worker that can (never one in `avoid`). Takes the room.
    pub fn place(
        &mut self,
        s: &Snapshot,
        v: usize,
        preferred: Option<usize>,
        avoid: Option<usize>,
    ) -> Option<usize> {
        self.place_with(s, v, preferred, avoid, false)
    }

    /// [`ClaimedRoom::place`] for an instance that adds CPU demand (a replica): only where
    /// busy threads leave cores for it.
    pub fn place_new(
        &mut self,
        s: &Snapshot,
        v: usize,
        preferred: Option<usize>,
        avoid: Option<usize>,
    ) -> Option<usize> {
        self.place_with(s, v, preferred, avoid, true)
    }

    fn place_with(
        &mut self,
        s: &Snapshot,
        v: usize,
        preferred: Option<usize>,
        avoid: Option<usize>,
        adds: bool,
    ) -> Option<usize> {
        let cpu_only = has_cpu_only_worker(s.workers());
        let ok = |w: usize| Some(w) != avoid && self.fits(s, v, w, adds, cpu_only);
        let chosen = preferred.filter(|&w| ok(w)).or_else(|| {
            (0..s.workers().len()).filter(|&w| ok(w)).min_by(|&a, &b| {
                let (wa, wb) = (&s.workers()[a], &s.workers()[b]);
                wa.load()
                    .total_cmp(&wb.load())
                    .then(wb.free_cores().cmp(&wa.free_cores()))
                    .then(a.cmp(&b))
            })
        })?;
        self.take(s, v, chosen);
        Some(chosen)
    }
}

fn ids(s: &Snapshot, v: usize, w: usize) -> (String, String) {
    (s.workers()[w].id.clone(), s.variants()[v].id.clone())
}

/// Resolves `a` (taken on snapshot `s`); `threads_of(instance)` is the instance's current
/// intra-op threads.
pub fn resolve(
    s: &Snapshot,
    a: &Action,
    claims: &mut ClaimedRoom,
    threads_of: impl Fn(usize) -> usize,
) -> Resolution {
    let planned = match a.kind {
        ActionKind::Replicate { worker, .. }
        | ActionKind::Upgrade { worker, .. }
        | ActionKind::Downgrade { worker, .. } => Some(worker),
        ActionKind::Migrate { to_worker, .. } => Some(to_worker),
        _ => None,
    };
    let job = |action: &'static str, variant: usize, worker: usize, steps: Vec<Step>| {
        let mut reason = a.reason.clone();
        if planned.is_some_and(|p| p != worker) {
            // The policy counts room only; a worker runs one instance of a variant.
            reason.push_str(&format!(
                "; placed on worker {} (the planned one already runs {} or has no room left)",
                s.workers()[worker].id,
                s.variants()[variant].name
            ));
        }
        Resolution::Run(ActionPlan {
            action,
            variant,
            worker,
            steps,
            reason,
            cost_before_per_s: a.cost_before_per_s,
            cost_after_per_s: a.cost_after_per_s,
        })
    };
    let short = |v: usize| Resolution::Short {
        variant: v,
        hardware: s.variants()[v].hardware,
        reason: format!(
            "no live worker has room for another instance of {} ({}; {} threads, {} bytes)",
            s.variants()[v].name,
            a.reason,
            s.variants()[v].threads,
            s.variants()[v].memory_bytes
        ),
    };
    let instance = |i: usize| {
        s.instances()
            .get(i)
            .filter(|i| i.state != InstanceState::Inactive)
    };
    let load = |v: usize, w: usize| {
        let (worker, variant) = ids(s, v, w);
        Step::Load { worker, variant }
    };
    let unload = |i: &crate::snapshot::InstanceEntry| {
        let (worker, variant) = ids(s, i.variant, i.worker);
        Step::Unload { worker, variant }
    };
    match a.kind {
        ActionKind::Replicate { variant, worker } => {
            if variant >= s.variants().len() {
                return Resolution::Skip(format!("variant {variant} is not in the snapshot"));
            }
            match claims.place_new(s, variant, Some(worker), None) {
                Some(w) => job("replicate", variant, w, vec![load(variant, w)]),
                None => short(variant),
            }
        }
        ActionKind::Upgrade { from, to, worker } | ActionKind::Downgrade { from, to, worker } => {
            let name = if matches!(a.kind, ActionKind::Upgrade { .. }) {
                "upgrade"
            } else {
                "downgrade"
            };
            let Some(old) = instance(from) else {
                return Resolution::Skip(format!("instance {from} is gone"));
            };
            if to >= s.variants().len() {
                return Resolution::Skip(format!("variant {to} is not in the snapshot"));
            }
            match claims.place(s, to, Some(worker), None) {
                Some(w) => job(name, to, w, vec![load(to, w), unload(old)]),
                None => short(to),
            }
        }
        ActionKind::RemoveReplica { instance: i } => match instance(i) {
            Some(old) => job("remove-replica", old.variant, old.worker, vec![unload(old)]),
            None => Resolution::Skip(format!("instance {i} is gone")),
        },
        ActionKind::AddThreads {
            instance: i, to, ..
        } => match instance(i) {
            Some(inst) => {
                let (worker, variant) = ids(s, inst.variant, inst.worker);
                job(
                    "add-threads",
                    inst.variant,
                    inst.worker,
                    vec![Step::Resize {
                        worker,
                        variant,
                        threads: to,
                    }],
                )
            }
            None => Resolution::Skip(format!("instance {i} is gone")),
        },
        ActionKind::Rebalance {
            instance: i,
            threads,
            replicas,
        } => {
            let Some(inst) = instance(i) else {
                return Resolution::Skip(format!("instance {i} is gone"));
            };
            if threads_of(i) <= threads {
                return Resolution::Skip(format!("instance {i} already runs {threads} threads"));
            }
            let mut steps = Vec::with_capacity(replicas + 1);
            for _ in 0..replicas {
                match claims.place_new(s, inst.variant, None, Some(inst.worker)) {
                    Some(w) => steps.push(load(inst.variant, w)),
                    None => return short(inst.variant),
                }
            }
            let (worker, variant) = ids(s, inst.variant, inst.worker);
            steps.push(Step::Resize {
                worker,
                variant,
                threads,
            });
            // Threads given back in place, or the split into base-thread replicas.
            let name = if replicas == 0 {
                "remove-threads"
            } else {
                "rebalance"
            };
            job(name, inst.variant, inst.worker, steps)
        }
        ActionKind::Migrate {
            instance: i,
            from_worker,
            to_worker,
        } => {
            let Some(inst) = instance(i) else {
                return Resolution::Skip(format!("instance {i} is gone"));
            };
            match claims.place(s, inst.variant, Some(to_worker), Some(from_worker)) {
                Some(w) => job(
                    "migrate",
                    inst.variant,
                    w,
                    vec![load(inst.variant, w), unload(inst)],
                ),
                None => short(inst.variant),
            }
        }
        ActionKind::AddWorker { .. } | ActionKind::RemoveWorker { .. } => {
            Resolution::Skip("worker actions belong to the worker autoscaler".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{InstanceEntry, VariantEntry, WorkerEntry};
    use infaas_core::LatencyPoint;

    fn variant(id: &str, threads: usize) -> VariantEntry {
        VariantEntry {
            id: id.into(),
            name: id.into(),
            model: "m".into(),
            app: "a".into(),
            accuracy: 0.9,
            hardware: HardwareKind::Cpu,
            threads,
            max_batch: 1,
            load_ms: 10.0,
            memory_bytes: 100,
            latency: vec![LatencyPoint {
                batch: 1,
                p50_ms: 1.0,
                p99_ms: 1.0,
                mean_ms: 1.0,
                throughput_per_s: 1000.0,
            }],
        }
    }

    fn worker(id: &str, cores: usize, utilisation: f64) -> WorkerEntry {
        WorkerEntry {
            id: id.into(),
            hardware: vec![HardwareKind::Cpu],
            cores,
            cpu_cores: cores,
            cores_used: 0,
            memory_bytes: 1 << 20,
            memory_used: 0,
            alive: true,
            utilisation,
            interference_seen: false,
            busy_threads: 0,
        }
    }

    /// v0 (1 thread) and v1 (2 threads); w0 (busy, 4 cores), w1 (idle, 2 cores), w2 (idle,
    /// 1 core); instance 0: v0 on w0.
    fn snapshot() -> Snapshot {
        let mut b = Snapshot::builder();
        b.add_variant("t", variant("v0", 1)).unwrap();
        b.add_variant("t", variant("v1", 2)).unwrap();
        b.add_worker(worker("w0", 4, 0.9)).unwrap();
        b.add_worker(worker("w1", 2, 0.1)).unwrap();
        b.add_worker(worker("w2", 1, 0.0)).unwrap();
        let mut s = b.build();
        s.add_instance(InstanceEntry {
            id: "w0/v0".into(),
            variant: 0,
            worker: 0,
            state: InstanceState::Active,
            queue_len: 0,
            qps: 0.0,
        })
        .unwrap();
        s
    }

    fn action(kind: ActionKind) -> Action {
        Action {
            kind,
            reason: "why".into(),
            cost_before_per_s: 1.0,
            cost_after_per_s: 2.0,
        }
    }

    fn load(w: &str, v: &str) -> Step {
        Step::Load {
            worker: w.into(),
            variant: v.into(),
        }
    }

    fn unload(w: &str, v: &str) -> Step {
        Step::Unload {
            worker: w.into(),
            variant: v.into(),
        }
    }

    fn run(r: Resolution) -> ActionPlan {
        match r {
            Resolution::Run(j) => j,
            other => panic!("not a job: {other:?}"),
        }
    }

    #[test]
    fn a_replica_never_lands_beside_its_twin() {
        let s = snapshot();
        let mut c = ClaimedRoom::default();
        // The policy chose w0, which already runs v0: the least utilised other worker.
        let j = run(resolve(
            &s,
            &action(ActionKind::Replicate {
                variant: 0,
                worker: 0,
            }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(j.action, "replicate");
        assert_eq!(j.steps, [load("w2", "v0")]);
        assert_eq!((j.cost_before_per_s, j.cost_after_per_s), (1.0, 2.0));
        assert!(
            j.reason.starts_with("why; placed on worker w2"),
            "{}",
            j.reason
        );
        // A second replica in the same period goes elsewhere again.
        let j = run(resolve(
            &s,
            &action(ActionKind::Replicate {
                variant: 0,
                worker: 0,
            }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(j.steps, [load("w1", "v0")]);
        // A third has nowhere to go: a shortage of CPU workers.
        match resolve(
            &s,
            &action(ActionKind::Replicate {
                variant: 0,
                worker: 0,
            }),
            &mut c,
            |_| 1,
        ) {
            Resolution::Short {
                variant,
                hardware,
                reason,
            } => {
                assert_eq!((variant, hardware), (0, HardwareKind::Cpu));
                assert!(reason.contains("v0"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A GPU worker is kept for GPU instances while the cluster has a CPU worker, as the
    /// planner and the query path place: a CPU replica with no CPU worker left is a shortage,
    /// not a load on the GPU worker's cores. Without CPU workers it goes there.
    #[test]
    fn a_cpu_replica_does_not_go_to_a_gpu_worker_while_a_cpu_worker_exists() {
        let mut b = Snapshot::builder();
        b.add_variant("t", variant("v0", 1)).unwrap();
        let mut gpu = worker("g0", 8, 0.0);
        gpu.hardware.push(HardwareKind::Gpu);
        b.add_worker(worker("w0", 4, 0.5)).unwrap();
        b.add_worker(gpu.clone()).unwrap();
        let mut s = b.build();
        let twin = InstanceEntry {
            id: "w0/v0".into(),
            variant: 0,
            worker: 0,
            state: InstanceState::Active,
            queue_len: 0,
            qps: 0.0,
        };
        s.add_instance(twin.clone()).unwrap();
        let replicate = action(ActionKind::Replicate {
            variant: 0,
            worker: 0,
        });
        let r = resolve(&s, &replicate, &mut ClaimedRoom::default(), |_| 1);
        assert!(
            matches!(
                r,
                Resolution::Short {
                    hardware: HardwareKind::Cpu,
                    ..
                }
            ),
            "{r:?}"
        );
        // A cluster of GPU workers only runs CPU variants on them.
        let mut b = Snapshot::builder();
        b.add_variant("t", variant("v0", 1)).unwrap();
        b.add_worker(gpu.clone()).unwrap();
        gpu.id = "g1".into();
        b.add_worker(gpu).unwrap();
        let mut s = b.build();
        s.add_instance(twin).unwrap();
        let j = run(resolve(&s, &replicate, &mut ClaimedRoom::default(), |_| 1));
        assert_eq!(j.steps, [load("g1", "v0")]);
    }

    #[test]
    fn upgrades_load_first_then_unload_and_respect_claimed_room() {
        let s = snapshot();
        let mut c = ClaimedRoom::default();
        let j = run(resolve(
            &s,
            &action(ActionKind::Upgrade {
                from: 0,
                to: 1,
                worker: 0,
            }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(j.action, "upgrade");
        assert_eq!(j.reason, "why", "placed where planned");
        assert_eq!((j.variant, j.worker), (1, 0));
        assert_eq!(j.steps, [load("w0", "v1"), unload("w0", "v0")]);
        // w0 has 4 cores: 2 are claimed, a second v1 cannot go there (it hosts v1 now) and
        // goes to w1 (2 free cores), not w2 (1 core).
        let j = run(resolve(
            &s,
            &action(ActionKind::Downgrade {
                from: 0,
                to: 1,
                worker: 0,
            }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(j.action, "downgrade");
        assert_eq!(j.steps[0], load("w1", "v1"));
        // Gone instances are skipped.
        assert!(matches!(
            resolve(
                &s,
                &action(ActionKind::RemoveReplica { instance: 7 }),
                &mut c,
                |_| 1
            ),
            Resolution::Skip(_)
        ));
        let j = run(resolve(
            &s,
            &action(ActionKind::RemoveReplica { instance: 0 }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(j.steps, [unload("w0", "v0")]);
    }

    #[test]
    fn vertical_and_migration_steps() {
        let s = snapshot();
        let mut c = ClaimedRoom::default();
        let j = run(resolve(
            &s,
            &action(ActionKind::AddThreads {
                instance: 0,
                from: 1,
                to: 3,
            }),
            &mut c,
            |_| 1,
        ));
        assert_eq!(
            j.steps,
            [Step::Resize {
                worker: "w0".into(),
                variant: "v0".into(),
                threads: 3
            }]
        );
        // Rebalance: replicas elsewhere first, then the shrink.
        let j = run(resolve(
            &s,
            &action(ActionKind::Rebalance {
                instance: 0,
                threads: 1,
                replicas: 2,
            }),
            &mut c,
            |_| 3,
        ));
        assert_eq!(j.action, "rebalance");
        assert_eq!(j.steps.len(), 3);
        assert_eq!(j.steps[0], load("w2", "v0"));
        assert_eq!(j.steps[1], load("w1", "v0"));
        assert!(matches!(j.steps[2], Step::Resize { threads: 1, .. }));
        // Threads given back in place, without replicas: named as such.
        let j = run(resolve(
            &s,
            &action(ActionKind::Rebalance {
                instance: 0,
                threads: 2,
                replicas: 0,
            }),
            &mut ClaimedRoom::default(),
            |_| 3,
        ));
        assert_eq!(j.action, "remove-threads");
        assert!(matches!(j.steps[..], [Step::Resize { threads: 2, .. }]));
        // Already at base threads: nothing to do.
        assert!(matches!(
            resolve(
                &s,
                &action(ActionKind::Rebalance {
                    instance: 0,
                    threads: 1,
                    replicas: 1
                }),
                &mut ClaimedRoom::default(),
                |_| 1
            ),
            Resolution::Skip(_)
        ));
        // Migration never stays on its worker.
        let j = run(resolve(
            &s,
            &action(ActionKind::Migrate {
                instance: 0,
                from_worker: 0,
                to_worker: 0,
            }),
            &mut ClaimedRoom::default(),
            |_| 1,
        ));
        assert_eq!(j.steps, [load("w2", "v0"), unload("w0", "v0")]);
        assert!(matches!(
            resolve(
                &s,
                &action(ActionKind::AddWorker {
                    hardware: HardwareKind::Cpu
                }),
                &mut c,
                |_| 1
            ),
            Resolution::Skip(_)
        ));
    }
}
