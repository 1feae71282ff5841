//! Moving instances away from interference: an instance Interfered for at least
//! [`MigrationConfig::periods`] periods (counted by [`interfered_periods_after`]) is loaded on
//! another worker, then unloaded from its own ([`ActionKind::Migrate`]).
//!
//! The destination is the least-utilised other live worker with the variant's hardware, room
//! for its threads and memory, no Interfered instance of its own and none lately
//! ([`WorkerEntry::interference_seen`](crate::snapshot::WorkerEntry::interference_seen)). An instance with no such
//! worker stays where it is; when that holds on every worker of a kind, the VM-Autoscaler adds
//! one ([`crate::autoscale::workers`]).

use serde::{Deserialize, Serialize};

use crate::autoscale::by_id::ById;
use crate::autoscale::problem::Room;
use crate::autoscale::{Action, ActionKind};
use crate::instance_state::InstanceState;
use crate::snapshot::{Prices, Snapshot};

/// Threshold of migration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MigrationConfig {
    /// Interfered periods before an instance moves (12: 3 s at the default 250-ms period;
    /// see [`interfered_periods_after`]).
    pub periods: usize,
}

impl Default for MigrationConfig {
    fn default() -> Self {
        MigrationConfig { periods: 12 }
    }
}

/// An instance's count of Interfered periods after one more period in `state`, in which it
/// served queries (`served`) or not. Only a period with evidence of health (Active while
/// serving) or an unloaded instance resets it. A period without evidence either way holds it:
/// an idle window (no latency measured, so the state machine returns an Interfered instance
/// to Active, to be probed again) and an Overloaded one (overload is judged first). Selection
/// avoids an Interfered instance, so one that a neighbour slows goes Interfered, idle, and
/// Interfered again (or Overloaded under the load it carried before); resetting on those
/// periods never let it move (seen in the simulator at 60 queries/s).
pub fn interfered_periods_after(prev: usize, state: InstanceState, served: bool) -> usize {
    match state {
        InstanceState::Interfered => prev + 1,
        InstanceState::Overloaded => prev,
        InstanceState::Active if !served => prev,
        InstanceState::Active | InstanceState::Inactive => 0,
    }
}

/// Interfered periods per instance ([`interfered_periods_after`]), by instance id, fed once
/// per period with every instance's state. An instance that is not in a period's states is
/// forgotten. Keyed by id, not by snapshot index: instances come and go between periods.
#[derive(Debug, Clone, Default)]
pub struct InterferenceCounter {
    periods: ById<usize>,
}

impl InterferenceCounter {
    /// Records one period: each instance `(id, state, served)` was in `state` and served
    /// queries in it when `served`.
    pub fn observe<'a>(
        &mut self,
        states: impl IntoIterator<Item = (&'a str, InstanceState, bool)>,
    ) {
        for (id, state, served) in states {
            let prev = self.periods.get(id).copied().unwrap_or(0);
            self.periods
                .set(id, interfered_periods_after(prev, state, served));
        }
        self.periods.end_period();
    }

    /// Records one period from the snapshot's instance states and rates.
    pub fn observe_snapshot(&mut self, s: &Snapshot) {
        self.observe(
            s.instances()
                .iter()
                .map(|i| (i.id.as_str(), i.state, i.qps > 0.0)),
        );
    }

    /// Interfered periods of instance `id` since its last healthy period (0 if unknown).
    pub fn periods(&self, id: &str) -> usize {
        self.periods.get(id).copied().unwrap_or(0)
    }

    /// [`Self::periods`] of every instance of `s`, by index (as [`migrations`] takes them).
    pub fn periods_of(&self, s: &Snapshot) -> Vec<usize> {
        s.instances().iter().map(|i| self.periods(&i.id)).collect()
    }
}

/// Migrations for this period. `interfered_periods[i]` is instance `i`'s count of consecutive
/// Interfered periods ([`InterferenceCounter::periods_of`]); missing entries count as 0.
pub fn migrations(
    s: &Snapshot,
    interfered_periods: &[usize],
    prices: &Prices,
    cfg: &MigrationConfig,
) -> Vec<Action> {
    let workers = s.workers();
    // Workers with an Interfered instance now, or lately (where one has moved away from).
    let mut noisy: Vec<bool> = workers.iter().map(|w| w.interference_seen).collect();
    for i in s.instances() {
        if i.state == InstanceState::Interfered {
            noisy[i.worker] = true;
        }
    }
    // Longest interfered first.
    let mut due: Vec<usize> = (0..s.instances().len())
        .filter(|&i| {
            s.instances()[i].state == InstanceState::Interfered
                && interfered_periods.get(i).is_some_and(|&p| p >= cfg.periods)
        })
        .collect();
    if due.is_empty() {
        return Vec::new();
    }
    due.sort_by_key(|&i| std::cmp::Reverse(interfered_periods[i]));
    let mut room = Room::new(
        workers,
        s.instances()
            .iter()
            .filter(|i| i.state != InstanceState::Inactive)
            .map(|i| (i.variant, i.worker)),
    );
    let mut actions = Vec::new();
    for i in due {
        let inst = &s.instances()[i];
        let v = &s.variants()[inst.variant];
        let mut best: Option<usize> = None;
        for w in 0..workers.len() {
            if w == inst.worker || noisy[w] || !room.fits(workers, w, inst.variant, v) {
                continue;
            }
            if best.is_none_or(|b| workers[w].utilisation < workers[b].utilisation) {
                best = Some(w);
            }
        }
        let Some(to) = best else {
            continue;
        };
        room.take(to, inst.variant, v);
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
        let u = b.add_variant("t", variant("u", "n", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.5)).unwrap();
        b.add_worker(worker("w1", &[Cpu], 0.6)).unwrap();
        let w2 = b.add_worker(worker("w2", &[Cpu], 0.0)).unwrap();
        let mut full = worker("w3", &[Cpu], 0.0);
        full.cores_used = full.cores;
        b.add_worker(full).unwrap();
        b.add_worker(worker("w4", &[Cpu], 0.3)).unwrap();
        let i0 = b.add_instance(instance("i0", v, w0)).unwrap();
        let i1 = b.add_instance(instance("i1", u, w2)).unwrap();
        let mut s = b.build();
        s.set_instance_state(i0, InstanceState::Interfered).unwrap();
        s.set_instance_state(i1, InstanceState::Interfered).unwrap();
        s
    }

    /// Every instance served in the period.
    fn serving<const N: usize>(
        states: [InstanceState; N],
    ) -> impl Iterator<Item = (&'static str, InstanceState, bool)> {
        const IDS: [&str; 4] = ["a", "b", "c", "d"];
        states.into_iter().zip(IDS).map(|(s, id)| (id, s, true))
    }

    fn counts(c: &InterferenceCounter, ids: &[&str]) -> Vec<usize> {
        ids.iter().map(|id| c.periods(id)).collect()
    }

    #[test]
    fn counter_counts_consecutive_interfered_periods() {
        let mut c = InterferenceCounter::default();
        use InstanceState::*;
        c.observe(serving([Interfered, Active]));
        c.observe(serving([Interfered, Interfered]));
        assert_eq!(counts(&c, &["a", "b"]), [2, 1]);
        c.observe(serving([Active, Interfered, Interfered]));
        assert_eq!(counts(&c, &["a", "b", "c"]), [0, 2, 1]);
        // "b" and "c" left: forgotten; "a" counts again from its last healthy period.
        c.observe(serving([Interfered]));
        assert_eq!(counts(&c, &["a", "b", "c"]), [1, 0, 0]);
    }

    #[test]
    fn counts_follow_the_instance_not_its_position() {
        use InstanceState::*;
        let mut c = InterferenceCounter::default();
        c.observe([("x", Active, true), ("y", Interfered, true)]);
        c.observe([("x", Active, true), ("y", Interfered, true)]);
        // "x" unloaded: "y" is now first, and keeps its count.
        c.observe([("y", Interfered, true)]);
        assert_eq!(counts(&c, &["y", "x"]), [3, 0]);
    }

    #[test]
    fn periods_without_evidence_hold_the_count() {
        let mut c = InterferenceCounter::default();
        use InstanceState::*;
        // Slowed by a neighbour: avoided while Interfered, the instance idles (and returns to
        // Active), or overloads under the load it carried before.
        for (state, served, count) in [
            (Interfered, true, 1),
            (Active, false, 1),
            (Interfered, true, 2),
            (Overloaded, true, 2),
            (Interfered, true, 3),
        ] {
            c.observe([("a", state, served), ("b", Overloaded, true)]);
            assert_eq!(counts(&c, &["a", "b"]), [count, 0], "after {state:?}");
        }
        c.observe([("a", Active, true), ("b", Interfered, true)]);
        assert_eq!(counts(&c, &["a", "b"]), [0, 1]);
        c.observe([("a", Inactive, false), ("b", Interfered, true)]);
        assert_eq!(counts(&c, &["a", "b"]), [0, 2]);
    }

    #[test]
    fn migrates_after_k_periods_to_the_least_utilised_clean_worker_with_room() {
        let s = snapshot();
        let cfg = MigrationConfig::default();
        let mut c = InterferenceCounter::default();
        for _ in 1..cfg.periods {
            c.observe_snapshot(&s);
        }
        assert!(migrations(&s, &c.periods_of(&s), &PRICES, &cfg).is_empty());
        c.observe_snapshot(&s);
        let a = migrations(&s, &c.periods_of(&s), &PRICES, &cfg);
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
            a[0].reason
                .contains(&format!("Interfered for {} periods", cfg.periods)),
            "{}",
            a[0].reason
        );
    }

    #[test]
    fn two_instances_of_one_variant_do_not_move_to_the_same_worker() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("t", variant("v", "m", 0.9, 1.0)).unwrap();
        let w0 = b.add_worker(worker("w0", &[Cpu], 0.5)).unwrap();
        let w1 = b.add_worker(worker("w1", &[Cpu], 0.5)).unwrap();
        b.add_worker(worker("w2", &[Cpu], 0.1)).unwrap();
        b.add_worker(worker("w3", &[Cpu], 0.2)).unwrap();
        let i0 = b.add_instance(instance("i0", v, w0)).unwrap();
        let i1 = b.add_instance(instance("i1", v, w1)).unwrap();
        let mut s = b.build();
        s.set_instance_state(i0, InstanceState::Interfered).unwrap();
        s.set_instance_state(i1, InstanceState::Interfered).unwrap();
        let cfg = MigrationConfig::default();
        let a = migrations(&s, &[cfg.periods; 2], &PRICES, &cfg);
        // A worker runs at most one instance of a variant: w2, the least utilised, takes the
        // first, and the second goes to w3.
        let to: Vec<usize> = a
            .iter()
            .filter_map(|m| match m.kind {
                ActionKind::Migrate { to_worker, .. } => Some(to_worker),
                _ => None,
            })
            .collect();
        assert_eq!(to, [2, 3], "{a:?}");
    }

    #[test]
    fn no_migration_to_a_worker_where_interference_was_seen_lately() {
        let mut s = snapshot();
        s.set_worker_interference(4, true).unwrap();
        let cfg = MigrationConfig::default();
        let a = migrations(&s, &[cfg.periods; 2], &PRICES, &cfg);
        // w4 was noisy a while ago: w1, busier but quiet, takes both.
        assert_eq!(a.len(), 2, "{a:?}");
        for m in &a {
            assert!(
                matches!(m.kind, ActionKind::Migrate { to_worker: 1, .. }),
                "{m:?}"
            );
        }
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
        let cfg = MigrationConfig::default();
        assert!(migrations(&s, &[cfg.periods], &PRICES, &cfg).is_empty());
    }
}
