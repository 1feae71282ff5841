//! The VM-Autoscaler's decision (INFaaS §4.2.3): when to add a worker of a hardware kind and
//! which idle workers to stop.
//!
//! A worker of kind `h` is added when, over the live workers with `h`:
//! 1. every one is above [`WorkerConfig::utilisation`] busy on `h`; or
//! 2. every one has an Interfered instance of an `h` variant; or
//! 3. (over all live workers) more than [`WorkerConfig::overloaded_fraction`] have an
//!    Overloaded instance; `h` is then the kind most of those overloaded instances run on.
//!
//! When nothing is added, workers without instances that have been idle for at least
//! [`WorkerConfig::idle_cooldown_s`] are stopped, longest idle first, keeping at least
//! [`WorkerConfig::min_workers`] live workers of each kind.

use infaas_core::HardwareKind;
use serde::{Deserialize, Serialize};

use crate::autoscale::{Action, ActionKind};
use crate::instance_state::InstanceState;
use crate::snapshot::{Prices, Snapshot};

const KINDS: [HardwareKind; 2] = [HardwareKind::Cpu, HardwareKind::Gpu];

fn slot(h: HardwareKind) -> usize {
    match h {
        HardwareKind::Cpu => 0,
        HardwareKind::Gpu => 1,
    }
}

/// Thresholds of the VM-Autoscaler.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    /// Utilisation above which a kind counts as busy on a worker (0.8, INFaaS §5).
    pub utilisation: f64,
    /// Fraction of workers with Overloaded instances above which a worker is added (0.8).
    pub overloaded_fraction: f64,
    /// How long a worker must have had no instance before it is stopped, in s (300).
    pub idle_cooldown_s: f64,
    /// Live workers of each kind that are never stopped (1).
    pub min_workers: usize,
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            utilisation: 0.8,
            overloaded_fraction: 0.8,
            idle_cooldown_s: 300.0,
            min_workers: 1,
        }
    }
}

/// One worker as the VM-Autoscaler sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkerView {
    /// Index of the worker (into the snapshot's workers).
    pub worker: usize,
    pub hardware: Vec<HardwareKind>,
    pub alive: bool,
    /// Busy fraction of the worker's CPUs, in [0, 1].
    pub utilisation: f64,
    /// Busy fraction of its GPU; `None` uses `utilisation`.
    pub gpu_utilisation: Option<f64>,
    /// Loaded instances.
    pub instances: usize,
    /// Per kind (CPU, GPU): whether an instance of a variant of that kind is Overloaded.
    pub overloaded: [bool; 2],
    /// Per kind (CPU, GPU): whether an instance of a variant of that kind is Interfered.
    pub interfered: [bool; 2],
    /// How long it has had no instance, in s (0 while it has some).
    pub idle_for_s: f64,
    /// Price of the whole worker per second.
    pub price_per_s: f64,
}

impl WorkerView {
    fn busy(&self, h: HardwareKind) -> f64 {
        match h {
            HardwareKind::Cpu => self.utilisation,
            HardwareKind::Gpu => self.gpu_utilisation.unwrap_or(self.utilisation),
        }
    }

    /// Views of the snapshot's workers; `idle_for_s(worker)` tells how long a worker has had no
    /// instance.
    pub fn from_snapshot(
        s: &Snapshot,
        prices: &Prices,
        idle_for_s: impl Fn(usize) -> f64,
    ) -> Vec<WorkerView> {
        let mut views: Vec<WorkerView> = s
            .workers()
            .iter()
            .enumerate()
            .map(|(w, e)| WorkerView {
                worker: w,
                hardware: e.hardware.clone(),
                alive: e.alive,
                utilisation: e.utilisation,
                gpu_utilisation: None,
                instances: 0,
                overloaded: [false; 2],
                interfered: [false; 2],
                idle_for_s: 0.0,
                price_per_s: prices.worker_rate_per_s(e),
            })
            .collect();
        for i in s.instances() {
            if i.state == InstanceState::Inactive {
                continue;
            }
            let hw = slot(s.variants()[i.variant].hardware);
            let v = &mut views[i.worker];
            v.instances += 1;
            v.overloaded[hw] |= i.state == InstanceState::Overloaded;
            v.interfered[hw] |= i.state == InstanceState::Interfered;
        }
        for v in &mut views {
            if v.instances == 0 {
                v.idle_for_s = idle_for_s(v.worker);
            }
        }
        views
    }
}

/// Workers to add or stop this period; see the module documentation.
pub fn scale_workers(views: &[WorkerView], cfg: &WorkerConfig) -> Vec<Action> {
    let live: Vec<&WorkerView> = views.iter().filter(|v| v.alive).collect();
    let fleet: f64 = live.iter().map(|v| v.price_per_s).sum();
    let mut actions = Vec::new();
    let add = |h: HardwareKind, why: String, actions: &mut Vec<Action>| {
        if actions
            .iter()
            .any(|a: &Action| a.kind == ActionKind::AddWorker { hardware: h })
        {
            return;
        }
        let price = live
            .iter()
            .rev()
            .find(|v| v.hardware.contains(&h))
            .map_or(0.0, |v| v.price_per_s);
        actions.push(Action {
            kind: ActionKind::AddWorker { hardware: h },
            reason: why,
            cost_before_per_s: fleet,
            cost_after_per_s: fleet + price,
        });
    };
    for h in KINDS {
        let with: Vec<&&WorkerView> = live.iter().filter(|v| v.hardware.contains(&h)).collect();
        if with.is_empty() {
            continue;
        }
        if with.iter().all(|v| v.busy(h) > cfg.utilisation) {
            let lowest = with.iter().map(|v| v.busy(h)).fold(f64::INFINITY, f64::min);
            let why = format!(
                "all {} {} workers are above {:.0}% utilisation (lowest {:.0}%)",
                with.len(),
                h.as_str(),
                cfg.utilisation * 100.0,
                lowest * 100.0
            );
            add(h, why, &mut actions);
        } else if with.iter().all(|v| v.interfered[slot(h)]) {
            let why = format!(
                "all {} {} workers have Interfered {} instances",
                with.len(),
                h.as_str(),
                h.as_str()
            );
            add(h, why, &mut actions);
        }
    }
    let overloaded: Vec<&&WorkerView> = live
        .iter()
        .filter(|v| v.overloaded.iter().any(|&o| o))
        .collect();
    if !live.is_empty() && overloaded.len() as f64 > cfg.overloaded_fraction * live.len() as f64 {
        let gpu = overloaded.iter().filter(|v| v.overloaded[1]).count();
        let cpu = overloaded.iter().filter(|v| v.overloaded[0]).count();
        let h = if gpu > cpu {
            HardwareKind::Gpu
        } else {
            HardwareKind::Cpu
        };
        let why = format!(
            "{} of {} workers have Overloaded instances (more than {:.0}%), mostly {}",
            overloaded.len(),
            live.len(),
            cfg.overloaded_fraction * 100.0,
            h.as_str()
        );
        add(h, why, &mut actions);
    }
    if !actions.is_empty() {
        return actions;
    }
    let mut count = [0usize; 2];
    for v in &live {
        for &h in &v.hardware {
            count[slot(h)] += 1;
        }
    }
    let mut idle: Vec<&&WorkerView> = live
        .iter()
        .filter(|v| v.instances == 0 && v.idle_for_s >= cfg.idle_cooldown_s)
        .collect();
    idle.sort_by(|a, b| b.idle_for_s.total_cmp(&a.idle_for_s));
    let mut cost = fleet;
    for v in idle {
        if v.hardware
            .iter()
            .any(|&h| count[slot(h)] <= cfg.min_workers)
        {
            continue;
        }
        for &h in &v.hardware {
            count[slot(h)] -= 1;
        }
        actions.push(Action {
            kind: ActionKind::RemoveWorker { worker: v.worker },
            reason: format!(
                "worker {} has had no instance for {:.0} s (cool-down {:.0} s)",
                v.worker, v.idle_for_s, cfg.idle_cooldown_s
            ),
            cost_before_per_s: cost,
            cost_after_per_s: cost - v.price_per_s,
        });
        cost -= v.price_per_s;
    }
    actions
}

/// Everything one worker-autoscaler period decides on, besides the workers' views.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkerPeriod<'a> {
    pub config: WorkerConfig,
    /// The model autoscaler found no room for an instance it needs: of this hardware, why.
    pub shortage: Option<(HardwareKind, &'a str)>,
    /// A worker is starting (added, not registered yet): no other is added.
    pub starting: bool,
    /// Per worker (by index): whether the provider started it. Only those are stopped.
    pub provisioned: &'a [bool],
    /// Provisioned workers running (not stopping), and the fewest of them to keep.
    pub provisioned_live: usize,
    pub min_provisioned: usize,
    /// Price per second of one more worker of each kind (CPU, GPU).
    pub new_worker_price: [f64; 2],
}

/// One worker-autoscaler period as the controller runs it, and the simulator with it:
/// [`scale_workers`]; an added worker for the model autoscaler's shortage when that adds none;
/// one for `min_provisioned` first; then at most one added worker (none while one starts), and
/// only provisioned workers stopped, never below `min_provisioned`.
pub fn worker_period(views: &[WorkerView], p: &WorkerPeriod) -> Vec<Action> {
    let mut decided = scale_workers(views, &p.config);
    let fleet: f64 = views
        .iter()
        .filter(|v| v.alive)
        .map(|v| v.price_per_s)
        .sum();
    let adds = decided
        .iter()
        .any(|a| matches!(a.kind, ActionKind::AddWorker { .. }));
    if let Some((hardware, why)) = p.shortage {
        if !adds {
            decided.insert(
                0,
                Action {
                    kind: ActionKind::AddWorker { hardware },
                    reason: format!("no worker has room: {why}"),
                    cost_before_per_s: fleet,
                    cost_after_per_s: fleet + p.new_worker_price[slot(hardware)],
                },
            );
        }
    }
    if p.provisioned_live < p.min_provisioned && !p.starting {
        decided.insert(
            0,
            Action {
                kind: ActionKind::AddWorker {
                    hardware: HardwareKind::Cpu,
                },
                reason: format!(
                    "{} provisioned workers run, min_workers is {}",
                    p.provisioned_live, p.min_provisioned
                ),
                cost_before_per_s: fleet,
                cost_after_per_s: fleet + p.new_worker_price[0],
            },
        );
    }
    let mut out = Vec::new();
    let mut added = p.starting;
    let mut live = p.provisioned_live;
    for a in decided {
        match a.kind {
            ActionKind::AddWorker { .. } if !added => {
                added = true;
                out.push(a);
            }
            ActionKind::RemoveWorker { worker }
                if p.provisioned.get(worker).copied().unwrap_or(false)
                    && live > p.min_provisioned =>
            {
                live -= 1;
                out.push(a);
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use HardwareKind::{Cpu, Gpu};

    fn view(worker: usize, hw: &[HardwareKind], utilisation: f64) -> WorkerView {
        WorkerView {
            worker,
            hardware: hw.to_vec(),
            alive: true,
            utilisation,
            gpu_utilisation: None,
            instances: 1,
            overloaded: [false; 2],
            interfered: [false; 2],
            idle_for_s: 0.0,
            price_per_s: 1.0,
        }
    }

    fn added(actions: &[Action]) -> Vec<HardwareKind> {
        actions
            .iter()
            .filter_map(|a| match a.kind {
                ActionKind::AddWorker { hardware } => Some(hardware),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn adds_a_worker_when_every_one_of_a_kind_is_busy() {
        let cfg = WorkerConfig::default();
        let views = [view(0, &[Cpu], 0.85), view(1, &[Cpu], 0.9)];
        let a = scale_workers(&views, &cfg);
        assert_eq!(added(&a), [Cpu]);
        assert_eq!((a[0].cost_before_per_s, a[0].cost_after_per_s), (2.0, 3.0));
        let views = [view(0, &[Cpu], 0.85), view(1, &[Cpu], 0.79)];
        assert!(scale_workers(&views, &cfg).is_empty());
        // GPU busy on its only worker (CPU side idle).
        let mut g = view(1, &[Cpu, Gpu], 0.1);
        g.gpu_utilisation = Some(0.95);
        let a = scale_workers(&[view(0, &[Cpu], 0.1), g], &cfg);
        assert_eq!(added(&a), [Gpu]);
    }

    #[test]
    fn adds_a_worker_when_every_one_of_a_kind_is_interfered() {
        let cfg = WorkerConfig::default();
        let mut a = view(0, &[Cpu, Gpu], 0.2);
        let mut b = view(1, &[Cpu, Gpu], 0.2);
        a.interfered[1] = true;
        assert!(scale_workers(&[a.clone(), b.clone()], &cfg).is_empty());
        b.interfered[1] = true;
        let acts = scale_workers(&[a, b], &cfg);
        assert_eq!(added(&acts), [Gpu]);
        assert!(acts[0].reason.contains("Interfered"), "{}", acts[0].reason);
    }

    #[test]
    fn adds_a_worker_when_most_workers_are_overloaded() {
        let cfg = WorkerConfig::default();
        let mut views: Vec<WorkerView> = (0..5).map(|w| view(w, &[Cpu], 0.5)).collect();
        for v in &mut views[..4] {
            v.overloaded[0] = true;
        }
        // 4 of 5 is 80%, not more.
        assert!(scale_workers(&views, &cfg).is_empty());
        views[4].overloaded[0] = true;
        assert_eq!(added(&scale_workers(&views, &cfg)), [Cpu]);
    }

    #[test]
    fn removes_idle_workers_after_the_cool_down_keeping_the_minimum() {
        let cfg = WorkerConfig::default();
        let idle = |w, s| WorkerView {
            instances: 0,
            idle_for_s: s,
            ..view(w, &[Cpu], 0.0)
        };
        let views = [view(0, &[Cpu], 0.3), idle(1, 400.0), idle(2, 100.0)];
        let a = scale_workers(&views, &cfg);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].kind, ActionKind::RemoveWorker { worker: 1 });
        assert_eq!((a[0].cost_before_per_s, a[0].cost_after_per_s), (3.0, 2.0));
        // Both idle long enough, but one CPU worker must stay.
        let a = scale_workers(&[idle(0, 900.0), idle(1, 400.0)], &cfg);
        assert_eq!(
            a.iter().map(|a| a.kind).collect::<Vec<_>>(),
            [ActionKind::RemoveWorker { worker: 0 }]
        );
        // Nothing is stopped while the fleet grows.
        let busy = [view(0, &[Cpu], 0.9), idle(1, 900.0), idle(2, 900.0)];
        let mut busy = busy.to_vec();
        busy[1].utilisation = 0.95;
        busy[2].utilisation = 0.95;
        assert_eq!(added(&scale_workers(&busy, &cfg)), [Cpu]);
        assert_eq!(scale_workers(&busy, &cfg).len(), 1);
    }

    #[test]
    fn views_from_a_snapshot() {
        use crate::snapshot::tests::{variant, worker};
        use crate::snapshot::{InstanceEntry, Snapshot};
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.5)).unwrap();
        b.add_worker(worker("w1", &[Cpu], 0.0)).unwrap();
        b.add_instance(InstanceEntry {
            id: "i".to_owned(),
            variant: v,
            worker: w0,
            state: InstanceState::Overloaded,
            queue_len: 0,
            qps: 0.0,
        })
        .unwrap();
        let s = b.build();
        let prices = Prices {
            cpu_core_per_s: 1.0,
            memory_gb_per_s: 0.0,
            gpu_per_s: 0.0,
        };
        let views = WorkerView::from_snapshot(&s, &prices, |w| 10.0 * w as f64 + 5.0);
        assert_eq!(views[0].instances, 1);
        assert_eq!(views[0].overloaded, [true, false]);
        assert_eq!(views[0].idle_for_s, 0.0);
        assert_eq!(views[1].instances, 0);
        assert_eq!(views[1].idle_for_s, 15.0);
        assert_eq!(views[0].price_per_s, 8.0);
    }
}
