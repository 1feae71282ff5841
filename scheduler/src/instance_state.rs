//! Per-instance state machine (INFaaS Fig. 4): Inactive, Active, Overloaded, Interfered.
//!
//! The monitoring loop gathers [`InstanceFigures`] for every instance once per window and calls
//! [`next_state`]; the selector only reads the resulting state. Each boundary has an entry and an
//! exit threshold (hysteresis), so figures hovering around one threshold do not make an instance
//! flip between states every window, which would make the selector alternate between routing
//! traffic to it and avoiding it.

use serde::{Deserialize, Serialize};

/// Dynamic state of one loaded (or formerly loaded) variant instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Not loaded on any worker (never loaded, unloaded, or its worker is gone).
    Inactive,
    /// Loaded and serving below its peak throughput at its profiled latency.
    Active,
    /// Serving at (or queueing beyond) its peak throughput, or answering its queries after
    /// their SLOs.
    Overloaded,
    /// Not overloaded, but its observed latency is well above the profiled one while the
    /// platform's own instances leave the worker's cores to spare: work the platform did not
    /// place contends for caches, memory bandwidth or cores.
    Interfered,
}

impl InstanceState {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Inactive => "inactive",
            InstanceState::Active => "active",
            InstanceState::Overloaded => "overloaded",
            InstanceState::Interfered => "interfered",
        }
    }
}

/// What the monitoring loop measured for one instance over the last window, next to the
/// instance's profile.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InstanceFigures {
    /// Whether the instance is loaded on a live worker.
    pub loaded: bool,
    /// Rows served per second over the last window.
    pub qps: f64,
    /// Profiled saturation throughput at the instance's max batch, rows/s
    /// (`max_batch / mean_ms * 1000`; see [`peak_qps`]).
    pub peak_qps: f64,
    /// Rows waiting in the instance's queue at the end of the window.
    pub queue_len: usize,
    /// The variant's max batch (queue depths are measured in batches).
    pub max_batch: usize,
    /// p99 run latency observed over the window, in ms; `None` when nothing ran. It should be
    /// the executor's run time without queue wait, so that queueing reads as overload and not as
    /// interference.
    pub p99_ms_observed: Option<f64>,
    /// Profiled p99 at the batch the instance typically runs, in ms.
    pub p99_ms_profiled: f64,
    /// Queries with a latency SLO that the instance answered over the window.
    pub slo_answered: u64,
    /// Of those, the ones answered after their SLO (end to end, as their callers saw them).
    pub slo_late: u64,
    /// Whether the worker's contention is the platform's own ([`self_contended`]): a slow
    /// instance there is slowed by its neighbours on the platform (which placement and scaling
    /// account for), not by outside interference.
    pub self_contended: bool,
}

/// Entry and exit thresholds of the state machine. Each `exit_*` must not be above its
/// `enter_*` counterpart; the gap between them is the hysteresis band, in which the instance
/// keeps the state it had.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Enter Overloaded when `qps >= enter_overload * peak_qps` (default 0.95: serving at peak,
    /// less the measurement noise of one window).
    pub enter_overload: f64,
    /// Leave Overloaded only when `qps < exit_overload * peak_qps` (default 0.80: well clear of
    /// peak, so the next burst does not re-enter at once) and the queue is short.
    pub exit_overload: f64,
    /// Also enter Overloaded when more than `enter_queue_batches * max_batch` rows wait
    /// (default 2.0: the last row waits for more than two full batches ahead of it).
    pub enter_queue_batches: f64,
    /// "Short queue" for leaving Overloaded: at most `exit_queue_batches * max_batch` rows
    /// (default 1.0: at most one batch ahead).
    pub exit_queue_batches: f64,
    /// Enter Interfered when `observed p99 > enter_interference * profiled p99` (default 1.5:
    /// window p99s of a healthy instance stay well within 50% of the profile).
    pub enter_interference: f64,
    /// Leave Interfered when `observed p99 <= exit_interference * profiled p99` (default 1.2).
    pub exit_interference: f64,
    /// Latency above the profile by less than this many ms is never interference (default
    /// 1.0): for variants that run in microseconds, scheduling jitter of a shared core is many
    /// times the profile without any co-located model slowing them. Leaving Interfered uses
    /// the same floor scaled by `exit_interference / enter_interference`.
    pub interference_floor_ms: f64,
    /// Enter Overloaded when at least `late_min_queries` queries and at least this fraction of
    /// the window's queries with an SLO were answered late (default 0.02: an instance that
    /// misses more than 2% of its deadlines misses the platform's 99% target whatever its
    /// profile says).
    pub enter_late_fraction: f64,
    /// Stay Overloaded while more than this fraction of the window's queries with an SLO
    /// are late (default 0.005).
    pub exit_late_fraction: f64,
    /// Fewest late queries in a window that can make an instance Overloaded (default 3: one
    /// or two late queries among a handful are noise, not overload).
    pub late_min_queries: u64,
    /// Interference needs a neighbour: a worker is self-contended ([`self_contended`]) unless
    /// work other than the platform's uses at least this fraction of its cores (default 0.2).
    pub neighbour_share: f64,
    /// The monitoring window, ms (the model autoscaler's period; default 1,000). A queue
    /// counts towards Overloaded only when it would take the instance longer than this to
    /// drain at its profiled peak (half of it to stay Overloaded): a few rows queued behind
    /// each other by a random burst, drained long before the next window, are not overload
    /// (at a quarter-second window, a one-row variant at a fifth of its peak shows three rows
    /// queued at some window within a minute, and would be scaled for it).
    pub window_ms: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            enter_overload: 0.95,
            exit_overload: 0.80,
            enter_queue_batches: 2.0,
            exit_queue_batches: 1.0,
            enter_interference: 1.5,
            exit_interference: 1.2,
            interference_floor_ms: 1.0,
            enter_late_fraction: 0.02,
            exit_late_fraction: 0.005,
            late_min_queries: 3,
            neighbour_share: 0.2,
            window_ms: 1_000.0,
        }
    }
}

/// Whether a worker's contention is the platform's own: the threads of its busy instances
/// exceed its `cores`, or what other work uses of them (`utilisation`, the busy fraction of the
/// worker's cores whoever uses them, less `own_utilisation`, the worker process's own share:
/// its instances and, for the embedded worker, the serving edge) is under
/// [`Thresholds::neighbour_share`]. Only on a worker that is not self-contended can a slow
/// instance be Interfered. The controller reads the figures from the worker's heartbeat; the
/// simulator from its batches and its SIMULATED noisy neighbours.
pub fn self_contended(
    busy_threads: usize,
    cores: usize,
    own_utilisation: f64,
    utilisation: f64,
    t: &Thresholds,
) -> bool {
    busy_threads > cores || utilisation - own_utilisation < t.neighbour_share
}

/// Share of the capacity the autoscaler counts for an instance that it must serve for its
/// Overloaded state to say only that it is full ([`short_of_profile`]): the default
/// [`Thresholds::exit_overload`], below which an instance is clear of its peak.
pub const AT_PROFILE: f64 = 0.8;

/// Whether an instance in `state`, serving `qps` rows/s where the autoscaler counts
/// `peak_qps`, serves less than its profile says: Interfered, or Overloaded (queued or late)
/// below [`AT_PROFILE`] of its peak (or without a usable peak). Its family's headroom, computed
/// from the profiles, is then not what the family has, so the family gives nothing back. An
/// instance Overloaded at its peak serves what its profile says: the router fills the
/// instances it prefers, so one of them sits at its peak while the others have room.
pub fn short_of_profile(state: InstanceState, qps: f64, peak_qps: f64) -> bool {
    match state {
        InstanceState::Interfered => true,
        InstanceState::Overloaded => peak_qps <= 0.0 || qps < AT_PROFILE * peak_qps,
        InstanceState::Active | InstanceState::Inactive => false,
    }
}

/// Saturation throughput in rows/s of a variant running full batches of `max_batch` rows that
/// take `mean_ms` each. Zero when the profile is unusable (`mean_ms` not positive).
pub fn peak_qps(max_batch: usize, mean_ms: f64) -> f64 {
    if mean_ms > 0.0 {
        max_batch as f64 / mean_ms * 1000.0
    } else {
        0.0
    }
}

/// The state of an instance after a window with `f`, given its state `prev` before it.
///
/// Overload is judged first (an overloaded instance's latency is high for a reason the
/// autoscaler handles): throughput at the profiled peak or a queue of more than a few batches.
/// Then interference, only on a worker that is not self-contended: a slow instance on cores
/// the platform's own instances fill is slowed by them, not by a neighbour. Queries answered
/// after their SLOs (measured, whatever the profile says) make the instance Overloaded, unless
/// they are late because it is Interfered (its runs slowed on a worker with room: moving it is
/// the remedy, not more of it). A zero `peak_qps` or `p99_ms_profiled` (no
/// usable profile) disables the criterion that needs it. A window without observed latency
/// carries no evidence of interference, so an idle Interfered instance returns to Active and is
/// probed again.
pub fn next_state(prev: InstanceState, f: &InstanceFigures, t: &Thresholds) -> InstanceState {
    debug_assert!(t.exit_overload <= t.enter_overload);
    debug_assert!(t.exit_queue_batches <= t.enter_queue_batches);
    debug_assert!(t.exit_interference <= t.enter_interference);
    if !f.loaded {
        return InstanceState::Inactive;
    }
    let batch = f.max_batch.max(1) as f64;
    let queue = f.queue_len as f64;
    let busy = |factor: f64| f.peak_qps > 0.0 && f.qps >= factor * f.peak_qps;
    // A queue of more than `batches` max-batches that takes longer than `window_ms` to drain.
    let queued = |batches: f64, window_ms: f64| {
        queue > batches * batch && (f.peak_qps <= 0.0 || queue / f.peak_qps * 1e3 > window_ms)
    };
    let late = |fraction: f64, min: u64| {
        f.slo_late >= min.max(1) && f.slo_late as f64 > fraction * f.slo_answered as f64
    };
    let (saturated, late) = if prev == InstanceState::Overloaded {
        // Stay unless throughput, queue and lateness are all clearly down.
        (
            busy(t.exit_overload) || queued(t.exit_queue_batches, t.window_ms / 2.0),
            late(t.exit_late_fraction, 1),
        )
    } else {
        (
            busy(t.enter_overload) || queued(t.enter_queue_batches, t.window_ms),
            late(t.enter_late_fraction, t.late_min_queries),
        )
    };
    if saturated {
        return InstanceState::Overloaded;
    }
    let slow = |factor: f64, floor_ms: f64| match f.p99_ms_observed {
        Some(observed) => {
            let p = f.p99_ms_profiled;
            p > 0.0 && observed > (factor * p).max(p + floor_ms)
        }
        None => false,
    };
    let interfered = !f.self_contended
        && if prev == InstanceState::Interfered {
            let scale = if t.enter_interference > 0.0 {
                t.exit_interference / t.enter_interference
            } else {
                1.0
            };
            slow(t.exit_interference, t.interference_floor_ms * scale)
        } else {
            slow(t.enter_interference, t.interference_floor_ms)
        };
    // Late queries from runs slowed on a worker the platform's own instances leave room on
    // are interference (moving the instance helps); otherwise lateness is overload.
    if late && !interfered {
        return InstanceState::Overloaded;
    }
    if interfered {
        InstanceState::Interfered
    } else {
        InstanceState::Active
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use InstanceState::*;

    /// A healthy loaded instance: peak 1,000 rows/s, max batch 8, profiled p99 10 ms.
    fn figures() -> InstanceFigures {
        InstanceFigures {
            loaded: true,
            qps: 100.0,
            peak_qps: 1000.0,
            queue_len: 0,
            max_batch: 8,
            p99_ms_observed: Some(10.0),
            p99_ms_profiled: 10.0,
            slo_answered: 100,
            slo_late: 0,
            self_contended: false,
        }
    }

    /// A 10-ms monitoring window: any queue of more than two batches (more than 16 ms at
    /// 1,000 rows/s) takes longer than it to drain, so the queue rules are the batch counts.
    fn step(prev: InstanceState, f: InstanceFigures) -> InstanceState {
        let t = Thresholds {
            window_ms: 10.0,
            ..Thresholds::default()
        };
        next_state(prev, &f, &t)
    }

    const ALL: [InstanceState; 4] = [Inactive, Active, Overloaded, Interfered];

    #[test]
    fn unloaded_is_inactive_from_any_state() {
        for prev in ALL {
            let f = InstanceFigures {
                loaded: false,
                qps: 5000.0,
                ..figures()
            };
            assert_eq!(step(prev, f), Inactive, "from {prev:?}");
        }
    }

    #[test]
    fn loading_makes_an_instance_active() {
        let f = InstanceFigures {
            qps: 0.0,
            p99_ms_observed: None,
            ..figures()
        };
        assert_eq!(step(Inactive, f), Active);
        assert_eq!(step(Active, figures()), Active);
    }

    #[test]
    fn peak_throughput_enters_overload() {
        let f = InstanceFigures {
            qps: 950.0,
            ..figures()
        };
        assert_eq!(step(Active, f), Overloaded);
        assert_eq!(step(Inactive, f), Overloaded);
        assert_eq!(step(Interfered, f), Overloaded);
        let f = InstanceFigures {
            qps: 940.0,
            ..figures()
        };
        assert_eq!(step(Active, f), Active);
    }

    #[test]
    fn deep_queue_enters_overload() {
        let f = InstanceFigures {
            queue_len: 17, // > 2 x 8
            ..figures()
        };
        assert_eq!(step(Active, f), Overloaded);
        let f = InstanceFigures {
            queue_len: 16,
            ..figures()
        };
        assert_eq!(step(Active, f), Active);
    }

    #[test]
    fn a_queue_drained_within_the_window_is_not_overload() {
        // A one-row variant at a fifth of its peak (250 rows/s): three rows queued by a burst
        // drain in 12 ms, long before the next quarter-second window.
        let small = InstanceFigures {
            qps: 50.0,
            peak_qps: 250.0,
            max_batch: 1,
            queue_len: 3,
            ..figures()
        };
        let t = Thresholds {
            window_ms: 250.0,
            ..Thresholds::default()
        };
        assert_eq!(next_state(Active, &small, &t), Active);
        // More than the window's worth (62.5 rows) is.
        let deep = InstanceFigures {
            queue_len: 63,
            ..small
        };
        assert_eq!(next_state(Active, &deep, &t), Overloaded);
        assert_eq!(
            next_state(
                Active,
                &InstanceFigures {
                    queue_len: 62,
                    ..small
                },
                &t
            ),
            Active
        );
        // Staying needs half of it: 32 rows stay, 31 leave.
        assert_eq!(
            next_state(
                Overloaded,
                &InstanceFigures {
                    queue_len: 32,
                    ..small
                },
                &t
            ),
            Overloaded
        );
        assert_eq!(
            next_state(
                Overloaded,
                &InstanceFigures {
                    queue_len: 31,
                    ..small
                },
                &t
            ),
            Active
        );
        // Without a profile (no peak), the batch count alone decides.
        let unprofiled = InstanceFigures {
            peak_qps: 0.0,
            ..small
        };
        assert_eq!(next_state(Active, &unprofiled, &t), Overloaded);
    }

    #[test]
    fn overload_exits_only_below_exit_throughput_with_short_queue() {
        // Between exit (800) and enter (950): stays overloaded.
        let f = InstanceFigures {
            qps: 850.0,
            ..figures()
        };
        assert_eq!(step(Overloaded, f), Overloaded);
        // Low throughput but a queue of more than one batch: stays overloaded.
        let f = InstanceFigures {
            qps: 100.0,
            queue_len: 9,
            ..figures()
        };
        assert_eq!(step(Overloaded, f), Overloaded);
        // Both down: back to Active.
        let f = InstanceFigures {
            qps: 790.0,
            queue_len: 8,
            ..figures()
        };
        assert_eq!(step(Overloaded, f), Active);
    }

    #[test]
    fn overload_exit_can_land_in_interfered() {
        let f = InstanceFigures {
            qps: 100.0,
            p99_ms_observed: Some(16.0),
            ..figures()
        };
        assert_eq!(step(Overloaded, f), Interfered);
    }

    #[test]
    fn slow_p99_enters_interference_only_when_not_overloaded() {
        let f = InstanceFigures {
            p99_ms_observed: Some(15.1),
            ..figures()
        };
        assert_eq!(step(Active, f), Interfered);
        let f = InstanceFigures {
            p99_ms_observed: Some(14.9),
            ..figures()
        };
        assert_eq!(step(Active, f), Active);
        let f = InstanceFigures {
            qps: 990.0,
            p99_ms_observed: Some(30.0),
            ..figures()
        };
        assert_eq!(step(Active, f), Overloaded);
    }

    #[test]
    fn jitter_under_the_floor_is_not_interference() {
        // A 0.05 ms variant seen at 0.9 ms: 18x its profile, but under the 1 ms floor.
        let fast = |observed: f64| InstanceFigures {
            p99_ms_profiled: 0.05,
            p99_ms_observed: Some(observed),
            ..figures()
        };
        assert_eq!(step(Active, fast(0.9)), Active);
        assert_eq!(step(Active, fast(1.2)), Interfered);
        // Leaving uses the floor scaled by exit / enter (0.8 ms here).
        assert_eq!(step(Interfered, fast(0.9)), Interfered);
        assert_eq!(step(Interfered, fast(0.8)), Active);
    }

    #[test]
    fn interference_exits_below_exit_factor() {
        let f = InstanceFigures {
            p99_ms_observed: Some(13.0),
            ..figures()
        };
        assert_eq!(step(Interfered, f), Interfered);
        let f = InstanceFigures {
            p99_ms_observed: Some(12.0),
            ..figures()
        };
        assert_eq!(step(Interfered, f), Active);
        let f = InstanceFigures {
            qps: 0.0,
            p99_ms_observed: None,
            ..figures()
        };
        assert_eq!(step(Interfered, f), Active);
    }

    #[test]
    fn queries_answered_late_enter_overload_whatever_the_profile_says() {
        // Far below the profiled peak, a short queue, the profile's latency: but 3 of 100
        // queries missed their SLO.
        let late = |answered: u64, late: u64| InstanceFigures {
            slo_answered: answered,
            slo_late: late,
            ..figures()
        };
        assert_eq!(step(Active, late(100, 3)), Overloaded);
        assert_eq!(step(Interfered, late(100, 3)), Overloaded);
        // 2% of 100 is not more than 2%; 2 late queries are under the minimum count.
        assert_eq!(step(Active, late(100, 2)), Active);
        assert_eq!(step(Active, late(10, 2)), Active);
        assert_eq!(step(Active, late(20, 3)), Overloaded);
        // Stays while more than 0.5% are late, leaves below.
        assert_eq!(step(Overloaded, late(100, 1)), Overloaded);
        assert_eq!(step(Overloaded, late(1000, 5)), Active);
        assert_eq!(step(Overloaded, late(1000, 6)), Overloaded);
        assert_eq!(step(Overloaded, late(0, 0)), Active);
    }

    #[test]
    fn contention_is_the_platforms_own_unless_a_neighbour_takes_a_share() {
        let t = Thresholds::default();
        // The platform's process takes 0.9 of the cores, the machine 0.95: its own.
        assert!(self_contended(2, 2, 0.9, 0.95, &t));
        // Half the cores busy with another process's work: a neighbour.
        assert!(!self_contended(1, 2, 0.45, 0.95, &t));
        assert!(!self_contended(1, 2, 0.3, 0.5, &t));
        // More busy threads than cores: the platform's doing, whoever else runs.
        assert!(self_contended(3, 2, 0.3, 1.0, &t));
        // A quiet machine: nothing to blame on a neighbour.
        assert!(self_contended(1, 2, 0.1, 0.15, &t));
    }

    #[test]
    fn a_self_contended_worker_is_not_interference() {
        // Twice the profiled p99 while the platform's own instances fill the cores.
        let f = InstanceFigures {
            p99_ms_observed: Some(20.0),
            self_contended: true,
            ..figures()
        };
        assert_eq!(step(Active, f), Active);
        assert_eq!(step(Interfered, f), Active);
        assert_eq!(
            step(
                Active,
                InstanceFigures {
                    self_contended: false,
                    ..f
                }
            ),
            Interfered
        );
        // Late queries on a self-contended worker: Overloaded.
        let f = InstanceFigures { slo_late: 10, ..f };
        assert_eq!(step(Active, f), Overloaded);
        // The same late queries from runs slowed on a worker with room: Interfered (a
        // neighbour slows it; moving it helps, more of it does not).
        let quiet = InstanceFigures {
            self_contended: false,
            ..f
        };
        assert_eq!(step(Active, quiet), Interfered);
        // Late at the profiled speed: queueing, so Overloaded.
        let queueing = InstanceFigures {
            p99_ms_observed: Some(10.0),
            ..quiet
        };
        assert_eq!(step(Active, queueing), Overloaded);
    }

    #[test]
    fn missing_profile_disables_its_criterion() {
        let f = InstanceFigures {
            peak_qps: 0.0,
            p99_ms_profiled: 0.0,
            qps: 1e6,
            p99_ms_observed: Some(1e6),
            ..figures()
        };
        assert_eq!(step(Active, f), Active);
    }

    fn transitions(start: InstanceState, seq: impl Iterator<Item = InstanceFigures>) -> usize {
        let mut state = start;
        let mut changes = 0;
        for f in seq {
            let next = step(state, f);
            if next != state {
                changes += 1;
            }
            state = next;
        }
        changes
    }

    fn oscillating(centre: f64, amplitude: f64, n: usize) -> impl Iterator<Item = f64> {
        (0..n).map(move |i| {
            if i % 2 == 0 {
                centre + amplitude
            } else {
                centre - amplitude
            }
        })
    }

    #[test]
    fn hysteresis_prevents_flapping() {
        // Throughput around the entry threshold: enters once, never leaves.
        let seq = oscillating(950.0, 20.0, 50).map(|qps| InstanceFigures { qps, ..figures() });
        assert_eq!(transitions(Active, seq), 1);
        // Throughput around the exit threshold while overloaded: leaves once, never re-enters.
        let seq = oscillating(800.0, 20.0, 50).map(|qps| InstanceFigures { qps, ..figures() });
        assert_eq!(transitions(Overloaded, seq), 1);
        // Queue depth around the entry threshold (16 rows).
        let seq = (0..50).map(|i| InstanceFigures {
            queue_len: if i % 2 == 0 { 17 } else { 15 },
            ..figures()
        });
        assert_eq!(transitions(Active, seq), 1);
        // p99 around the interference entry (15 ms) and exit (12 ms) thresholds.
        let seq = oscillating(15.0, 0.5, 50).map(|p| InstanceFigures {
            p99_ms_observed: Some(p),
            ..figures()
        });
        assert_eq!(transitions(Active, seq), 1);
        let seq = oscillating(12.0, 0.5, 50).map(|p| InstanceFigures {
            p99_ms_observed: Some(p),
            ..figures()
        });
        assert_eq!(transitions(Interfered, seq), 1);
    }

    #[test]
    fn peak_qps_from_profile() {
        assert_eq!(peak_qps(8, 4.0), 2000.0);
        assert_eq!(peak_qps(8, 0.0), 0.0);
    }

    #[test]
    fn only_an_instance_below_its_profile_is_short_of_it() {
        // Full at its peak (or near it): its profile holds.
        assert!(!short_of_profile(Overloaded, 100.0, 100.0));
        assert!(!short_of_profile(Overloaded, AT_PROFILE * 100.0, 100.0));
        // Queued or late below its peak, slowed by a neighbour, or without a usable peak.
        assert!(short_of_profile(Overloaded, 50.0, 100.0));
        assert!(short_of_profile(Interfered, 100.0, 100.0));
        assert!(short_of_profile(Overloaded, 10.0, 0.0));
        assert!(!short_of_profile(Active, 0.0, 100.0));
        assert!(!short_of_profile(Inactive, 0.0, 100.0));
    }
}
