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
    /// Serving at (or queueing beyond) its peak throughput.
    Overloaded,
    /// Not overloaded, but its observed latency is well above the profiled one: co-located work
    /// contends for caches, memory bandwidth or cores.
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
        }
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
/// autoscaler handles), then interference. A zero `peak_qps` or `p99_ms_profiled` (no usable
/// profile) disables the criterion that needs it. A window without observed latency carries no
/// evidence of interference, so an idle Interfered instance returns to Active and is probed again.
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
    let overloaded = if prev == InstanceState::Overloaded {
        // Stay unless both throughput and queue are clearly down.
        busy(t.exit_overload) || queue > t.exit_queue_batches * batch
    } else {
        busy(t.enter_overload) || queue > t.enter_queue_batches * batch
    };
    if overloaded {
        return InstanceState::Overloaded;
    }
    let slow = |factor: f64, floor_ms: f64| match f.p99_ms_observed {
        Some(observed) => {
            let p = f.p99_ms_profiled;
            p > 0.0 && observed > (factor * p).max(p + floor_ms)
        }
        None => false,
    };
    let interfered = if prev == InstanceState::Interfered {
        let scale = if t.enter_interference > 0.0 {
            t.exit_interference / t.enter_interference
        } else {
            1.0
        };
        slow(t.exit_interference, t.interference_floor_ms * scale)
    } else {
        slow(t.enter_interference, t.interference_floor_ms)
    };
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
        }
    }

    fn step(prev: InstanceState, f: InstanceFigures) -> InstanceState {
        next_state(prev, &f, &Thresholds::default())
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
}
