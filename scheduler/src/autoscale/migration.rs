//! Moving instances away from interference: an instance Interfered for at least
//! [`MigrationConfig::periods`] consecutive periods is loaded on another worker, then unloaded
//! from its own ([`ActionKind::Migrate`]).
//!
//! The destination is the least-utilised other live worker with the variant's hardware, room
//! for its threads and memory, and no Interfered instance of its own. An instance with no such
//! worker stays where it is; when that holds on every worker of a kind, the VM-Autoscaler adds
//! one ([`crate::autoscale::workers`]).

use serde::{Deserialize, Serialize};

use crate::autoscale::problem::Room;
use crate::autoscale::{Action, ActionKind};
use crate::snapshot::{Prices, Snapshot};
use crate::state::InstanceState;

/// Threshold of migration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MigrationConfig {
    /// Consecutive Interfered periods before an instance moves (3).
    pub periods: usize,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig { periods: 3 }
    }
}

/// Consecutive Interfered periods per instance, fed once per period with every instance's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterferenceCounter {
    periods: Vec<usize>,
}

impl InterferenceCounter {
    /// Records one period: `states[i]` is instance `i`'s state.
    pub fn observe(&mut self, states: impl IntoIterator<Item = InstanceState>) {
        let mut n = 0;
        for (i, state) in states.into_iter().enumerate() {
            if i == self.periods.len() {
                self.periods.push(0);
            }
            self.periods[i] = if state == InstanceState::Interfered {
                self.periods[i] + 1
            } else {
                0
            };
            n = i + 1;
        }
        self.periods.truncate(n);
    }

    /// Records one period from the snapshot's instance states.
    pub fn observe_snapshot(&mut self, s: &Snapshot) {
        self.observe(s.instances().iter().map(|i| i.state));
    }

    /// Consecutive Interfered periods of every instance, by index.
    pub fn periods(&self) -> &[usize] {
        &self.periods
    }
}

/// Migrations for this period. `interfered_periods[i]` is instance `i`'s count of consecutive
/// Interfered periods ([`InterferenceCounter::periods`]); missing entries count as 0.
pub fn migrations(
    s: &Snapshot,
    interfered_periods: &[usize],
    prices: &Prices,
    cfg: &MigrationConfig,
) -> Vec<Action> {
    let workers = s.workers();
    let mut noisy = vec![false; workers.len()];
    for i in s.instances() {
        if i.state == InstanceState::Interfered {
            noisy[i.worker] = true;
        }
    }
    let mut room = Room::new(workers);
    // Longest interfered first.
    let mut due: Vec<usize> = (0..s.instances().len())
        .filter(|&i| {
            s.instances()[i].state == InstanceState::Interfered
                && interfered_periods.get(i).is_some_and(|&p| p >= cfg.periods)
        })
        .collect();
    due.sort_by_key(|&i| std::cmp::Reverse(interfered_periods[i]));
    let mut actions = Vec::new();
    for i in due {
        let inst = &s.instances()[i];
        let v = &s.variants()[inst.variant];
        let mut best: Option<usize> = None;
        for w in 0..workers.len() {
            if w == inst.worker || noisy[w] || !room.fits(workers, w, v) {
                continue;
            }
            if best.is_none_or(|b| workers[w].utilisation < workers[b].utilisation) {
                best = Some(w);
            }
        }
        let Some(to) = best else {
            continue;
        };
        room.take(to, v);
        let rate = prices.rate_per_s(v);
        actions.push(Action {
            kind: ActionKind::Migrate {
                instance: i,
                from_worker: inst.worker,
                to_worker: to,
            },
            reason: format!(
                "instance {} of {} Interfered for {} periods (>= {}) on worker {}; \
                 worker {} is the least utilised ({:.2}) without interference that has room",
                inst.id,
                v.name,
                interfered_periods[i],
                cfg.periods,
                workers[inst.worker].id,
                workers[to].id,
                workers[to].utilisation,
            ),
            cost_before_per_s: rate,
            cost_after_per_s: rate,
        });
    }
    actions
}

/// Consolidation: when every instance on a releasable worker (one the provider started) is
/// Active and all of them fit on the permanent workers, they move there ([`ActionKind::Migrate`],
/// loaded on the destination first), so the worker empties and the VM-Autoscaler can stop it.
/// Scaling in already removes instances from releasable workers first; this handles what it
/// cannot: the last instances of a family, and instances of families without spare capacity.
///
/// A destination is alive, not releasable, has the variant's hardware, room for its threads
/// and memory, no instance of the same variant, and stays at or below `max_utilisation` once
/// the moved load (each instance's rows/s as a share of its saturation throughput, over its
/// threads) is added; the least-utilised such worker is taken. One worker is emptied per call,
/// the one with the fewest instances; a worker some of whose instances cannot move stays.
pub fn consolidations(
    s: &Snapshot,
    releasable: &[bool],
    prices: &Prices,
    max_utilisation: f64,
) -> Vec<Action> {
    let workers = s.workers();
    let instances = s.instances();
    let is_releasable = |w: usize| releasable.get(w).copied().unwrap_or(false);
    let mut on: Vec<Vec<usize>> = vec![Vec::new(); workers.len()];
    for (i, inst) in instances.iter().enumerate() {
        if inst.state != InstanceState::Inactive {
            on[inst.worker].push(i);
        }
    }
    let mut candidates: Vec<usize> = (0..workers.len())
        .filter(|&w| is_releasable(w) && workers[w].alive && !on[w].is_empty())
        .filter(|&w| {
            on[w]
                .iter()
                .all(|&i| instances[i].state == InstanceState::Active)
        })
        .collect();
    candidates.sort_by_key(|&w| on[w].len());
    for w in candidates {
        let mut room = Room::new(workers);
        let mut busy: Vec<f64> = workers.iter().map(|x| x.utilisation).collect();
        let mut twins: Vec<(usize, usize)> = Vec::new();
        let mut moves = Vec::with_capacity(on[w].len());
        for &i in &on[w] {
            let inst = &instances[i];
            let v = &s.variants()[inst.variant];
            let peak = v.peak_qps();
            let mut best: Option<(usize, f64)> = None;
            for to in 0..workers.len() {
                if to == w || is_releasable(to) || !room.fits(workers, to, v) {
                    continue;
                }
                let twin = s
                    .variant_instances(inst.variant)
                    .iter()
                    .any(|&j| instances[j].worker == to)
                    || twins.contains(&(inst.variant, to));
                let share = if peak > 0.0 {
                    inst.qps / peak * v.threads as f64 / workers[to].cores.max(1) as f64
                } else {
                    1.0
                };
                let after = busy[to] + share;
                if twin || after > max_utilisation {
                    continue;
                }
                if best.is_none_or(|(b, _)| busy[to] < busy[b]) {
                    best = Some((to, after));
                }
            }
            let Some((to, after)) = best else {
                break;
            };
            room.take(to, v);
            busy[to] = after;
            twins.push((inst.variant, to));
            moves.push((i, to));
        }
        if moves.len() < on[w].len() {
            continue;
        }
        let price = prices.worker_rate_per_s(&workers[w]);
        return moves
            .into_iter()
            .map(|(i, to)| {
                let inst = &instances[i];
                let v = &s.variants()[inst.variant];
                let rate = prices.rate_per_s(v);
                Action {
                    kind: ActionKind::Migrate {
                        instance: i,
                        from_worker: w,
                        to_worker: to,
                    },
                    reason: format!(
                        "consolidate: the {} instance(s) on worker {} (started by the provider, \
                         {price:.3e}/s) fit on the permanent workers; instance {} of {} moves to \
                         worker {} ({:.2} utilised after, at most {max_utilisation:.2}) so that \
                         worker {} empties and can be stopped",
                        on[w].len(),
                        workers[w].id,
                        inst.id,
                        v.name,
                        workers[to].id,
                        busy[to],
                        workers[w].id,
                    ),
                    cost_before_per_s: rate,
                    cost_after_per_s: rate,
                }
            })
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::tests::{instance, variant, worker};
    use infaas_core::HardwareKind::Cpu;

    const PRICES: Prices = Prices {
        cpu_core_per_s: 1.0,
        memory_gb_per_s: 0.0,
        gpu_per_s: 0.0,
    };

    /// Instance 0 Interfered on w0; w1 (busy), w2 (idle but interfered), w3 (full), w4.
    fn snapshot() -> Snapshot {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.5)).unwrap();
        b.add_worker(worker("w1", &[Cpu], 0.6)).unwrap();
        let w2 = b.add_worker(worker("w2", &[Cpu], 0.0)).unwrap();
        let mut full = worker("w3", &[Cpu], 0.0);
        full.cores_used = full.cores;
        b.add_worker(full).unwrap();
        b.add_worker(worker("w4", &[Cpu], 0.3)).unwrap();
        let i0 = b.add_instance(instance("i0", v, w0)).unwrap();
        let i1 = b.add_instance(instance("i1", v, w2)).unwrap();
        let mut s = b.build();
        s.set_instance_state(i0, InstanceState::Interfered).unwrap();
        s.set_instance_state(i1, InstanceState::Interfered).unwrap();
        s
    }

    #[test]
    fn counter_counts_consecutive_interfered_periods() {
        let mut c = InterferenceCounter::default();
        use InstanceState::*;
        c.observe([Interfered, Active]);
        c.observe([Interfered, Interfered]);
        assert_eq!(c.periods(), [2, 1]);
        c.observe([Active, Interfered, Interfered]);
        assert_eq!(c.periods(), [0, 2, 1]);
        c.observe([Interfered]);
        assert_eq!(c.periods(), [1]);
    }

    #[test]
    fn migrates_after_k_periods_to_the_least_utilised_clean_worker_with_room() {
        let s = snapshot();
        let cfg = MigrationConfig::default();
        let mut c = InterferenceCounter::default();
        c.observe_snapshot(&s);
        c.observe_snapshot(&s);
        assert!(migrations(&s, c.periods(), &PRICES, &cfg).is_empty());
        c.observe_snapshot(&s);
        let a = migrations(&s, c.periods(), &PRICES, &cfg);
        // Both are due; neither goes to w2 (interfered) or w3 (full): w4 is the least utilised
        // clean worker with room, for both.
        assert_eq!(a.len(), 2);
        assert_eq!(
            a[0].kind,
            ActionKind::Migrate {
                instance: 0,
                from_worker: 0,
                to_worker: 4
            }
        );
        assert_eq!(
            a[1].kind,
            ActionKind::Migrate {
                instance: 1,
                from_worker: 2,
                to_worker: 4
            }
        );
        assert_eq!(a[0].cost_before_per_s, a[0].cost_after_per_s);
        assert!(
            a[0].reason.contains("Interfered for 3 periods"),
            "{}",
            a[0].reason
        );
    }

    /// Releasable w1 holds one Active instance of `v` and one of `u`; w0 and w2 are permanent.
    fn peak_worker(qps: f64) -> (Snapshot, usize, usize) {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let u = b.add_variant("t", variant("u", "n", 0.9, 1.0)).unwrap();
        b.add_worker(worker("w0", &[Cpu], 0.2)).unwrap();
        let w1 = b.add_worker(worker("w1", &[Cpu], 0.3)).unwrap();
        b.add_worker(worker("w2", &[Cpu], 0.4)).unwrap();
        let mut i = instance("i0", v, w1);
        i.qps = qps;
        b.add_instance(i).unwrap();
        b.add_instance(instance("i1", u, w1)).unwrap();
        (b.build(), v, u)
    }

    fn moved(a: &[Action]) -> Vec<(usize, usize, usize)> {
        a.iter()
            .map(|a| match a.kind {
                ActionKind::Migrate {
                    instance,
                    from_worker,
                    to_worker,
                } => (instance, from_worker, to_worker),
                k => panic!("{k:?}"),
            })
            .collect()
    }

    #[test]
    fn consolidation_empties_a_releasable_worker_onto_permanent_ones() {
        let releasable = [false, true, false];
        let (s, _, _) = peak_worker(10.0);
        let a = consolidations(&s, &releasable, &PRICES, 0.7);
        // Both go to the least-utilised permanent worker, w0 (never back to w1).
        assert_eq!(moved(&a), [(0, 1, 0), (1, 1, 0)]);
        assert!(a[0].reason.contains("consolidate"), "{}", a[0].reason);
        assert_eq!(a[0].cost_before_per_s, a[0].cost_after_per_s);
        // Nothing is releasable: nothing moves.
        assert!(consolidations(&s, &[false; 3], &PRICES, 0.7).is_empty());
    }

    #[test]
    fn consolidation_keeps_a_worker_whose_instances_cannot_all_move() {
        let releasable = [false, true, false];
        // An instance that is not Active stays, and so does its worker.
        let (mut s, _, _) = peak_worker(10.0);
        s.set_instance_state(1, InstanceState::Overloaded).unwrap();
        assert!(consolidations(&s, &releasable, &PRICES, 0.7).is_empty());
        // Its load would push every permanent worker above the limit: the peak of `v` is
        // 8 rows / 4 ms = 2000 rows/s on one of 8 cores, so 1000 rows/s is 0.0625 of a worker.
        let (s, _, _) = peak_worker(1000.0);
        assert_eq!(consolidations(&s, &releasable, &PRICES, 0.7).len(), 2);
        assert!(consolidations(&s, &releasable, &PRICES, 0.25).is_empty());
        // No permanent worker has room.
        let (s, _, _) = peak_worker(10.0);
        let mut full = s.clone();
        for w in [0, 2] {
            let cores = full.workers()[w].cores;
            full.set_worker_usage(w, cores, 0, 0.1).unwrap();
        }
        assert!(consolidations(&full, &releasable, &PRICES, 0.7).is_empty());
    }

    #[test]
    fn consolidation_does_not_put_an_instance_beside_its_twin() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.1)).unwrap();
        let w1 = b.add_worker(worker("w1", &[Cpu], 0.3)).unwrap();
        let w2 = b.add_worker(worker("w2", &[Cpu], 0.5)).unwrap();
        b.add_instance(instance("i0", v, w0)).unwrap();
        b.add_instance(instance("i1", v, w1)).unwrap();
        let s = b.build();
        let a = consolidations(&s, &[false, true, false], &PRICES, 0.9);
        assert_eq!(moved(&a), [(1, w1, w2)]);
    }

    #[test]
    fn no_destination_means_no_migration() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.5)).unwrap();
        let mut full = worker("w1", &[Cpu], 0.0);
        full.memory_used = full.memory_bytes;
        b.add_worker(full).unwrap();
        let i0 = b.add_instance(instance("i0", v, w0)).unwrap();
        let mut s = b.build();
        s.set_instance_state(i0, InstanceState::Interfered).unwrap();
        assert!(migrations(&s, &[10], &PRICES, &MigrationConfig::default()).is_empty());
    }
}
