//! Loki's early dropping with opportunistic rerouting (§5.2), and the ablations the simulator
//! compares it with, as one pure decision per request hop ([`on_arrival`]).
//!
//! The caller asks when a request is about to be forwarded to its next task (or has just
//! arrived at it), with the planned rest of its path (each task's variant and latency budget,
//! [`Hop`]), its deadline, and the backup table of faster variants with spare capacity for the
//! remaining tasks ([`Alternative`]; [`alternatives`] builds it from the routing tables).
//!
//! - [`DropPolicy::RerouteThenDrop`] (Loki): proceed when `now + Σ budgets ≤ deadline`; else,
//!   with `x` the missing time, reroute the next task (or, failing that, a later one) to an
//!   alternative with spare capacity whose latency is at most its planned budget `y` less `x`
//!   (`y - x`), the most accurate such (ties: the fastest, then the lowest placement); else
//!   drop at once. One reroute per decision: a deficit only two reroutes would cover drops.
//! - [`DropPolicy::PerTaskDropping`]: drop when the previous task took longer than its budget.
//! - [`DropPolicy::LastTaskDropping`]: drop only at the last task, when its budget no longer
//!   fits before the deadline.
//! - [`DropPolicy::NoDropping`]: always proceed.

use serde::Serialize;

use super::route::RoutingTables;
use super::Allocation;

/// An early-dropping policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
pub enum DropPolicy {
    NoDropping,
    LastTaskDropping,
    PerTaskDropping,
    /// Loki's opportunistic rerouting, dropping only when no reroute saves the request.
    RerouteThenDrop,
}

impl DropPolicy {
    /// Every policy, Loki's last.
    pub const ALL: [DropPolicy; 4] = [
        DropPolicy::NoDropping,
        DropPolicy::LastTaskDropping,
        DropPolicy::PerTaskDropping,
        DropPolicy::RerouteThenDrop,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropPolicy::NoDropping => "no-dropping",
            DropPolicy::LastTaskDropping => "last-task",
            DropPolicy::PerTaskDropping => "per-task",
            DropPolicy::RerouteThenDrop => "reroute-then-drop",
        }
    }
}

/// One planned task of a request's remaining path.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hop<'a> {
    pub task: usize,
    /// The node's name, for drop reasons.
    pub node: &'a str,
    /// Index into the allocation's placements of the task.
    pub placement: usize,
    /// The task's latency budget on that placement, ms.
    pub budget_ms: f64,
}

/// A variant a remaining task could be rerouted to.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Alternative {
    pub task: usize,
    pub placement: usize,
    /// Its profiled latency at its batch (its budget), ms.
    pub latency_ms: f64,
    pub accuracy: f64,
    /// Capacity left, queries/s; only alternatives with some are used.
    pub spare_qps: f64,
}

/// Time a request spent at its previous task (for per-task dropping).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spent<'a> {
    pub node: &'a str,
    /// Queueing and processing, ms.
    pub spent_ms: f64,
    pub budget_ms: f64,
}

/// What [`on_arrival`] is told.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival<'a> {
    pub now_ms: f64,
    pub deadline_ms: f64,
    /// The remaining tasks, the next one first; not empty.
    pub remaining: &'a [Hop<'a>],
    /// Alternatives for the remaining tasks.
    pub alternatives: &'a [Alternative],
    /// The task just finished, if any.
    pub previous: Option<Spent<'a>>,
}

/// What to do with the request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Decision {
    Proceed,
    /// Send the request's `task` to `placement` instead of the planned one.
    Reroute {
        task: usize,
        placement: usize,
    },
    Drop {
        reason: String,
    },
}

/// The policy's decision for a request hop (see the module documentation). O(remaining tasks
/// × alternatives); allocates only the reason of a drop.
pub fn on_arrival(policy: DropPolicy, a: &Arrival) -> Decision {
    let Some(next) = a.remaining.first() else {
        return Decision::Proceed;
    };
    match policy {
        DropPolicy::NoDropping => Decision::Proceed,
        DropPolicy::LastTaskDropping => {
            let missing = a.now_ms + next.budget_ms - a.deadline_ms;
            if a.remaining.len() == 1 && missing > 0.0 {
                Decision::Drop {
                    reason: format!(
                        "last task '{}': its {:.2} ms budget misses the deadline by {missing:.2} ms",
                        next.node, next.budget_ms
                    ),
                }
            } else {
                Decision::Proceed
            }
        }
        DropPolicy::PerTaskDropping => match a.previous {
            Some(p) if p.spent_ms > p.budget_ms => Decision::Drop {
                reason: format!(
                    "task '{}' took {:.2} ms, {:.2} ms over its {:.2} ms budget",
                    p.node,
                    p.spent_ms,
                    p.spent_ms - p.budget_ms,
                    p.budget_ms
                ),
            },
            _ => Decision::Proceed,
        },
        DropPolicy::RerouteThenDrop => {
            let planned: f64 = a.remaining.iter().map(|h| h.budget_ms).sum();
            let missing = a.now_ms + planned - a.deadline_ms;
            if missing <= 0.0 {
                return Decision::Proceed;
            }
            for hop in a.remaining {
                let limit = hop.budget_ms - missing;
                let best = a
                    .alternatives
                    .iter()
                    .filter(|x| {
                        x.task == hop.task
                            && x.placement != hop.placement
                            && x.spare_qps > 0.0
                            && x.latency_ms <= limit
                    })
                    .min_by(|x, y| {
                        y.accuracy
                            .total_cmp(&x.accuracy)
                            .then(x.latency_ms.total_cmp(&y.latency_ms))
                            .then(x.placement.cmp(&y.placement))
                    });
                if let Some(x) = best {
                    return Decision::Reroute {
                        task: x.task,
                        placement: x.placement,
                    };
                }
            }
            Decision::Drop {
                reason: format!(
                    "node '{}': {missing:.2} ms short of the deadline ({planned:.2} ms of budgets left, {:.2} ms to go) and no alternative with spare capacity makes it up",
                    next.node,
                    a.deadline_ms - a.now_ms
                ),
            }
        }
    }
}

/// The backup table of `task`: its placements with spare capacity after MostAccurateFirst,
/// fastest first.
pub fn alternatives(
    allocation: &Allocation,
    tables: &RoutingTables,
    task: usize,
) -> Vec<Alternative> {
    let (Some(ps), Some(spare)) = (allocation.tasks.get(task), tables.spare_qps.get(task)) else {
        return Vec::new();
    };
    let mut out: Vec<Alternative> = ps
        .iter()
        .zip(spare)
        .enumerate()
        .filter(|(_, (_, &s))| s > 0.0)
        .map(|(i, (p, &s))| Alternative {
            task,
            placement: i,
            latency_ms: p.budget_ms,
            accuracy: p.accuracy,
            spare_qps: s,
        })
        .collect();
    out.sort_by(|a, b| a.latency_ms.total_cmp(&b.latency_ms));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REMAINING: [Hop<'static>; 2] = [
        Hop {
            task: 1,
            node: "classify",
            placement: 0,
            budget_ms: 40.0,
        },
        Hop {
            task: 2,
            node: "text",
            placement: 0,
            budget_ms: 30.0,
        },
    ];

    fn alt(task: usize, placement: usize, latency_ms: f64, accuracy: f64) -> Alternative {
        Alternative {
            task,
            placement,
            latency_ms,
            accuracy,
            spare_qps: 10.0,
        }
    }

    fn arrival<'a>(now_ms: f64, alternatives: &'a [Alternative]) -> Arrival<'a> {
        Arrival {
            now_ms,
            deadline_ms: 100.0,
            remaining: &REMAINING,
            alternatives,
            previous: None,
        }
    }

    #[test]
    fn on_time_requests_proceed() {
        for policy in DropPolicy::ALL {
            assert_eq!(on_arrival(policy, &arrival(30.0, &[])), Decision::Proceed);
        }
    }

    #[test]
    fn a_late_request_is_rerouted_to_the_most_accurate_fast_enough_alternative() {
        // 45 + 40 + 30 = 115: 15 ms late, so task 1 needs <= 25 ms.
        let alts = [
            alt(1, 1, 20.0, 0.70),
            alt(1, 2, 24.0, 0.80),
            alt(1, 3, 26.0, 0.90), // too slow
            alt(1, 4, 5.0, 0.60),
            Alternative {
                spare_qps: 0.0, // full
                ..alt(1, 5, 10.0, 0.95)
            },
            alt(2, 1, 5.0, 0.99), // a later task: only if the next has none
        ];
        let d = on_arrival(DropPolicy::RerouteThenDrop, &arrival(45.0, &alts));
        assert_eq!(
            d,
            Decision::Reroute {
                task: 1,
                placement: 2
            }
        );
        // Nothing fast enough for task 1: task 2 (needs <= 15 ms) is rerouted instead.
        let slow = [alts[2], alts[4], alts[5]];
        let d = on_arrival(DropPolicy::RerouteThenDrop, &arrival(45.0, &slow));
        assert_eq!(
            d,
            Decision::Reroute {
                task: 2,
                placement: 1
            }
        );
    }

    #[test]
    fn a_request_no_reroute_saves_is_dropped_with_the_node_and_missing_time() {
        let alts = [alt(1, 1, 30.0, 0.9)];
        let d = on_arrival(DropPolicy::RerouteThenDrop, &arrival(60.0, &alts));
        let Decision::Drop { reason } = d else {
            panic!("expected a drop, got {d:?}");
        };
        assert!(reason.contains("classify"), "{reason}");
        assert!(reason.contains("30.00 ms short"), "{reason}");
    }

    #[test]
    fn the_ablations_drop_where_they_should() {
        // Late, but not at the last task: last-task dropping waits, no-dropping never drops.
        let late = arrival(60.0, &[]);
        assert_eq!(
            on_arrival(DropPolicy::LastTaskDropping, &late),
            Decision::Proceed
        );
        assert_eq!(on_arrival(DropPolicy::NoDropping, &late), Decision::Proceed);
        let last = Arrival {
            remaining: &REMAINING[1..],
            now_ms: 75.0,
            ..late
        };
        assert!(matches!(
            on_arrival(DropPolicy::LastTaskDropping, &last),
            Decision::Drop { reason } if reason.contains("text") && reason.contains("5.00 ms")
        ));
        assert_eq!(on_arrival(DropPolicy::NoDropping, &last), Decision::Proceed);
        // Per-task dropping looks at the previous task's own budget only.
        let over = Arrival {
            previous: Some(Spent {
                node: "detect",
                spent_ms: 35.0,
                budget_ms: 30.0,
            }),
            ..arrival(10.0, &[])
        };
        assert!(matches!(
            on_arrival(DropPolicy::PerTaskDropping, &over),
            Decision::Drop { reason } if reason.contains("detect")
        ));
        // ... which Loki would let through: the request is still on time overall.
        assert_eq!(
            on_arrival(DropPolicy::RerouteThenDrop, &over),
            Decision::Proceed
        );
        assert_eq!(
            on_arrival(DropPolicy::PerTaskDropping, &arrival(60.0, &[])),
            Decision::Proceed
        );
    }
}
