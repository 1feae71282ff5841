//! Themis-style two-stage scaling of CPU instances (Themis §4-5).
//!
//! Vertical first (Themis §4, §5.1.3: when the configuration for the load needs more resources,
//! scale in place when the hardware allows): an Overloaded CPU instance whose worker has spare
//! cores gets more intra-op threads in place ([`ActionKind::AddThreads`]), settled load or
//! not: it takes effect at once, where a new replica would first have to load. While the load
//! is changing, threads the load no longer needs are given back as fast
//! ([`ActionKind::Rebalance`] without replicas). Once the load has settled, an instance running
//! above its variant's base threads is split back into instances at base threads
//! ([`ActionKind::Rebalance`]) when that needs fewer cores, or as many: by Amdahl's law, `k`
//! instances of `t` cores serve at least as much as one of `k * t` cores (Themis §5.1.1). An
//! instance that could be split is not given threads in the same period.
//!
//! When the load has settled ([`Settling`]): without a forecast, once it has been stable for
//! [`VerticalConfig::stable_periods`] periods ([`Stability`]); with one (Themis §5.1.3), when
//! the highest load forecast over the next horizon needs as many base-thread instances as the
//! load now, instance by instance (each with its share of the family's load): the surge stays
//! and the configuration for it will not change. While the forecast is above (the load still
//! rises) or below (it falls) that, threads are added or given back in place, so a surge that
//! ends returns to the cheapest configuration without replicas that would soon be removed.
//!
//! Throughput at `t` threads follows Amdahl's law with parallel fraction `p`:
//! `peak(t) = peak(base) * s(t) / s(base)`, `s(t) = 1 / ((1 - p) + p / t)`.

use serde::{Deserialize, Serialize};

use crate::autoscale::{Action, ActionKind};
use crate::instance_state::InstanceState;
use crate::snapshot::{Prices, Snapshot};

/// Thresholds of vertical scaling.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VerticalConfig {
    /// Amdahl parallel fraction of a model's run time (0.9).
    pub parallel_fraction: f64,
    /// Most threads one instance may get (16).
    pub max_threads: usize,
    /// Capacity to aim for, as a multiple of the demand (1.05, INFaaS' slack).
    pub headroom: f64,
    /// Periods of stable load after which instances return to base threads (20: 5 s at the
    /// default 250-ms period).
    pub stable_periods: usize,
}

impl Default for VerticalConfig {
    fn default() -> Self {
        VerticalConfig {
            parallel_fraction: 0.9,
            max_threads: 16,
            headroom: 1.05,
            stable_periods: 20,
        }
    }
}

/// A loaded CPU instance as vertical scaling sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuInstance {
    /// Index of the instance (into the snapshot's instances).
    pub instance: usize,
    pub worker: usize,
    pub state: InstanceState,
    /// Intra-op threads now.
    pub threads: usize,
    /// The variant's profiled threads, at which replicas are loaded.
    pub base_threads: usize,
    /// Saturation throughput at `base_threads`, rows/s.
    pub base_peak_qps: f64,
    /// Load the instance must serve, rows/s (arrivals, not only what it served).
    pub demand_qps: f64,
    /// Rows waiting for it now, and its variant's largest batch.
    pub queued_rows: usize,
    pub max_batch: usize,
}

impl CpuInstance {
    /// Instance `instance` of `s` running `threads` threads with `demand_qps` to serve.
    pub fn from_snapshot(
        s: &Snapshot,
        instance: usize,
        threads: usize,
        demand_qps: f64,
    ) -> Option<CpuInstance> {
        let i = s.instances().get(instance)?;
        let v = s.variants().get(i.variant)?;
        Some(CpuInstance {
            instance,
            worker: i.worker,
            state: i.state,
            threads,
            base_threads: v.threads,
            base_peak_qps: v.peak_qps(),
            demand_qps,
            queued_rows: s.queued(instance),
            max_batch: v.max_batch,
        })
    }
}

/// Counts consecutive periods whose load stays within `tolerance` (relative) of the previous one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stability {
    pub tolerance: f64,
    last: Option<f64>,
    periods: usize,
}

impl Stability {
    pub fn new(tolerance: f64) -> Self {
        Stability {
            tolerance,
            last: None,
            periods: 0,
        }
    }

    /// Records one period's load; returns how many consecutive periods it has been stable.
    pub fn observe(&mut self, load: f64) -> usize {
        let stable = self.last.is_some_and(|last| {
            (load - last).abs() <= self.tolerance * last.abs().max(f64::MIN_POSITIVE)
        });
        self.periods = if stable { self.periods + 1 } else { 0 };
        self.last = Some(load);
        self.periods
    }
}

fn speedup(threads: usize, p: f64) -> f64 {
    1.0 / ((1.0 - p) + p / threads.max(1) as f64)
}

/// Saturation throughput of `i` at `threads` threads (Amdahl).
pub fn peak_at(i: &CpuInstance, threads: usize, cfg: &VerticalConfig) -> f64 {
    amdahl_peak(
        i.base_peak_qps,
        i.base_threads,
        threads,
        cfg.parallel_fraction,
    )
}

/// Saturation throughput at `threads` threads of an instance that saturates at `base_peak`
/// with `base_threads` (Amdahl, parallel fraction `p`): what an instance resized in place is
/// judged against (its state, [`crate::instance_state`]).
pub fn amdahl_peak(base_peak: f64, base_threads: usize, threads: usize, p: f64) -> f64 {
    base_peak * speedup(threads, p) / speedup(base_threads, p)
}

/// How a family's load is judged settled enough to trade added threads for base-thread
/// instances; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Settling {
    /// Consecutive periods the load has been stable ([`Stability`]): settled from
    /// [`VerticalConfig::stable_periods`] on.
    Periods(usize),
    /// Themis §5.1.3: the family's load now and the highest load forecast over the next
    /// horizon, rows/s.
    Forecast {
        /// The family's load now (what the instances' `demand_qps` are shares of).
        load_qps: f64,
        /// The highest load forecast over the horizon.
        max_qps: f64,
    },
}

/// Base-thread instances of `i`'s variant that serve `demand` rows/s with `cfg.headroom`.
fn base_instances(i: &CpuInstance, demand: f64, cfg: &VerticalConfig) -> usize {
    if i.base_peak_qps <= 0.0 {
        return 1;
    }
    ((cfg.headroom * demand.max(0.0) / i.base_peak_qps).ceil() as usize).max(1)
}

impl Settling {
    /// Whether the load of the family of `instances` has settled, and why (for the reasons
    /// of the actions, written only when a period acts).
    pub fn judge(&self, instances: &[CpuInstance], cfg: &VerticalConfig) -> (bool, SettlingWhy) {
        match *self {
            Settling::Periods(periods) => (
                periods >= cfg.stable_periods,
                SettlingWhy::Periods {
                    periods,
                    needed: cfg.stable_periods,
                },
            ),
            Settling::Forecast { load_qps, max_qps } => {
                let n = instances.len().max(1) as f64;
                // Each instance's share of the forecast, as of the load now.
                let forecast = |i: &CpuInstance| {
                    if load_qps > 0.0 {
                        i.demand_qps * max_qps / load_qps
                    } else {
                        max_qps / n
                    }
                };
                let (now, then): (usize, usize) = instances
                    .iter()
                    .map(|i| {
                        (
                            base_instances(i, i.demand_qps, cfg),
                            base_instances(i, forecast(i), cfg),
                        )
                    })
                    .fold((0, 0), |(a, b), (x, y)| (a + x, b + y));
                let settled = !instances.is_empty()
                    && max_qps.is_finite()
                    && instances.iter().all(|i| {
                        base_instances(i, i.demand_qps, cfg) == base_instances(i, forecast(i), cfg)
                    });
                (
                    settled,
                    SettlingWhy::Forecast {
                        settled,
                        load_qps,
                        max_qps,
                        now,
                        then,
                    },
                )
            }
        }
    }
}

/// Why [`Settling::judge`] judged as it did; displayed in the actions' reasons.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SettlingWhy {
    Periods {
        periods: usize,
        needed: usize,
    },
    Forecast {
        settled: bool,
        load_qps: f64,
        max_qps: f64,
        /// Base-thread instances the load now needs, and the forecast's maximum.
        now: usize,
        then: usize,
    },
}

impl std::fmt::Display for SettlingWhy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            SettlingWhy::Periods { periods, needed } if periods >= needed => {
                write!(f, "load stable for {periods} periods")
            }
            SettlingWhy::Periods { periods, needed } => {
                write!(f, "load not stable: {periods} < {needed} periods")
            }
            SettlingWhy::Forecast {
                settled,
                load_qps,
                max_qps,
                now,
                then,
            } => write!(
                f,
                "load {}settled (forecast max {max_qps:.0} rows/s over the horizon against \
                 {load_qps:.0} now: {then} base-thread instance(s) against {now})",
                if settled { "" } else { "not " }
            ),
        }
    }
}

/// Vertical decisions for one period. `free_cores[w]` is worker `w`'s spare cores;
/// `stable_periods` how long the load has been stable ([`Stability`]). The same as
/// [`vertical_settling`] with [`Settling::Periods`].
pub fn vertical(
    instances: &[CpuInstance],
    free_cores: &[usize],
    stable_periods: usize,
    prices: &Prices,
    cfg: &VerticalConfig,
) -> Vec<Action> {
    vertical_settling(
        instances,
        free_cores,
        Settling::Periods(stable_periods),
        prices,
        cfg,
    )
}

/// Vertical decisions for one period of one family, whose load has settled or not as
/// `settling` judges. `free_cores[w]` is worker `w`'s spare cores.
pub fn vertical_settling(
    instances: &[CpuInstance],
    free_cores: &[usize],
    settling: Settling,
    prices: &Prices,
    cfg: &VerticalConfig,
) -> Vec<Action> {
    vertical_threads(instances, free_cores, settling, prices, cfg, true)
}

/// [`vertical_settling`], adding threads to Overloaded instances only when `add_threads` (a
/// family whose instances already cover its load adds none: the model period decides that
/// before, so that no such action is written only to be dropped).
pub fn vertical_threads(
    instances: &[CpuInstance],
    free_cores: &[usize],
    settling: Settling,
    prices: &Prices,
    cfg: &VerticalConfig,
    add_threads: bool,
) -> Vec<Action> {
    let core = prices.cpu_core_per_s;
    let mut free = free_cores.to_vec();
    let mut actions = Vec::new();
    let (settled, why) = settling.judge(instances, cfg);
    // Settled: split scaled-up instances into base-thread instances when that needs fewer
    // cores (before threads are added, so the replicas' cores are not given away).
    let mut split: Vec<usize> = Vec::new();
    if settled {
        let mut spare: usize = free.iter().sum();
        for i in instances {
            if i.threads <= i.base_threads || i.base_peak_qps <= 0.0 {
                continue;
            }
            let k = base_instances(i, i.demand_qps, cfg);
            let cores_after = k * i.base_threads;
            let new_cores = (k - 1) * i.base_threads;
            // Fewer cores, or as many serving more (Themis §5.1.1).
            let better = cores_after < i.threads
                || (cores_after == i.threads
                    && k as f64 * i.base_peak_qps > peak_at(i, i.threads, cfg));
            if !better || new_cores > spare {
                continue;
            }
            spare -= new_cores;
            split.push(i.instance);
            actions.push(Action {
                kind: ActionKind::Rebalance {
                    instance: i.instance,
                    threads: i.base_threads,
                    replicas: k - 1,
                },
                reason: format!(
                    "{why}: instance {} at {} threads serves {:.0} rows/s; \
                     {k} instance(s) at {} threads give {:.0} rows/s on {cores_after} cores instead of {}",
                    i.instance,
                    i.threads,
                    i.demand_qps,
                    i.base_threads,
                    k as f64 * i.base_peak_qps,
                    i.threads,
                ),
                cost_before_per_s: i.threads as f64 * core,
                cost_after_per_s: cores_after as f64 * core,
            });
        }
        // The replicas take the spare cores first (the resolver places them anywhere).
        let mut taken: usize = free.iter().sum::<usize>() - spare;
        for f in free.iter_mut() {
            let t = taken.min(*f);
            *f -= t;
            taken -= t;
        }
    }
    // Vertical first: most overloaded first.
    let mut order: Vec<&CpuInstance> = instances
        .iter()
        .filter(|i| {
            add_threads
                && i.state == InstanceState::Overloaded
                && i.worker < free.len()
                && !split.contains(&i.instance)
        })
        .collect();
    order.sort_by(|a, b| {
        let ra = a.demand_qps / peak_at(a, a.threads, cfg);
        let rb = b.demand_qps / peak_at(b, b.threads, cfg);
        rb.total_cmp(&ra)
    });
    for i in order {
        let cap = cfg.max_threads.min(i.threads + free[i.worker]);
        let target = cfg.headroom * i.demand_qps;
        // Its threads already serve its share of the load and nothing waits beyond a batch:
        // the state is a window behind (an instance just given back its threads is still
        // judged on the rate it served with them), and more threads would only be given back
        // again.
        let served = peak_at(i, i.threads, cfg) >= target && i.queued_rows <= i.max_batch;
        if cap <= i.threads || served {
            continue;
        }
        let to = (i.threads + 1..=cap)
            .find(|&t| peak_at(i, t, cfg) >= target)
            .unwrap_or(cap);
        free[i.worker] -= to - i.threads;
        actions.push(Action {
            kind: ActionKind::AddThreads {
                instance: i.instance,
                from: i.threads,
                to,
            },
            reason: format!(
                "instance {} overloaded: demand {:.0} rows/s, peak {:.0} rows/s at {} threads; \
                 {to} threads give {:.0} rows/s{} ({why})",
                i.instance,
                i.demand_qps,
                peak_at(i, i.threads, cfg),
                i.threads,
                peak_at(i, to, cfg),
                if peak_at(i, to, cfg) >= target {
                    ""
                } else {
                    ", all the worker's spare cores allow"
                },
            ),
            cost_before_per_s: i.threads as f64 * core,
            cost_after_per_s: to as f64 * core,
        });
    }
    if !settled {
        // Threads no longer needed are given back at once (as fast as they were taken).
        for i in instances {
            if i.state == InstanceState::Overloaded || i.threads <= i.base_threads {
                continue;
            }
            let target = cfg.headroom * i.demand_qps;
            let to = (i.base_threads..i.threads)
                .find(|&t| peak_at(i, t, cfg) >= target)
                .unwrap_or(i.threads);
            if to >= i.threads {
                continue;
            }
            actions.push(Action {
                kind: ActionKind::Rebalance {
                    instance: i.instance,
                    threads: to,
                    replicas: 0,
                },
                reason: format!(
                    "instance {} at {} threads serves {:.0} rows/s; {to} threads give {:.0} rows/s",
                    i.instance,
                    i.threads,
                    i.demand_qps,
                    peak_at(i, to, cfg),
                ),
                cost_before_per_s: i.threads as f64 * core,
                cost_after_per_s: to as f64 * core,
            });
        }
    }
    actions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resized_instance_is_judged_against_its_threads_peak() {
        let p = VerticalConfig::default().parallel_fraction;
        assert_eq!(amdahl_peak(100.0, 1, 1, p), 100.0);
        let two = amdahl_peak(100.0, 1, 2, p);
        assert!(two > 170.0 && two < 200.0, "{two}");
        assert!((amdahl_peak(two, 2, 1, p) - 100.0).abs() < 1e-9);
    }

    const PRICES: Prices = Prices {
        cpu_core_per_s: 1.0,
        memory_gb_per_s: 0.0,
        gpu_per_s: 0.0,
    };

    fn overloaded(demand: f64) -> CpuInstance {
        CpuInstance {
            instance: 4,
            worker: 0,
            state: InstanceState::Overloaded,
            threads: 1,
            base_threads: 1,
            base_peak_qps: 100.0,
            demand_qps: demand,
            queued_rows: 0,
            max_batch: 1,
        }
    }

    #[test]
    fn amdahl_throughput() {
        let cfg = VerticalConfig::default();
        let i = overloaded(0.0);
        assert_eq!(peak_at(&i, 1, &cfg), 100.0);
        // s(2) = 1 / (0.1 + 0.45) = 1.818...
        assert!((peak_at(&i, 2, &cfg) - 100.0 / 0.55).abs() < 1e-9);
        assert!(peak_at(&i, 16, &cfg) < 1000.0);
    }

    #[test]
    fn overloaded_instance_gets_the_fewest_threads_that_serve_it() {
        let cfg = VerticalConfig::default();
        // 250 rows/s x 1.05 = 262.5: s(3) = 2.5 -> 250 (short), s(4) = 3.08 -> 308.
        let a = vertical(&[overloaded(250.0)], &[8], 0, &PRICES, &cfg);
        assert_eq!(a.len(), 1);
        assert_eq!(
            a[0].kind,
            ActionKind::AddThreads {
                instance: 4,
                from: 1,
                to: 4
            }
        );
        assert_eq!((a[0].cost_before_per_s, a[0].cost_after_per_s), (1.0, 4.0));
        // Only 2 spare cores: as many as there are.
        let a = vertical(&[overloaded(250.0)], &[2], 0, &PRICES, &cfg);
        assert_eq!(
            a[0].kind,
            ActionKind::AddThreads {
                instance: 4,
                from: 1,
                to: 3
            }
        );
        assert!(a[0].reason.contains("spare cores allow"), "{}", a[0].reason);
        // No spare core, or not overloaded: nothing.
        assert!(vertical(&[overloaded(250.0)], &[0], 0, &PRICES, &cfg).is_empty());
        let active = CpuInstance {
            state: InstanceState::Active,
            ..overloaded(250.0)
        };
        assert!(vertical(&[active], &[8], 0, &PRICES, &cfg).is_empty());
    }

    /// An Overloaded instance whose threads serve its share of the load (its state a window
    /// behind, as right after threads were given back) gets no more.
    #[test]
    fn no_threads_for_an_instance_whose_threads_serve_its_load() {
        let cfg = VerticalConfig::default();
        for stable in [0, 9] {
            assert!(vertical(&[overloaded(90.0)], &[8], stable, &PRICES, &cfg).is_empty());
            assert!(!vertical(&[overloaded(99.0)], &[8], stable, &PRICES, &cfg).is_empty());
            // A backlog says the profile is not what it serves: threads all the same.
            let backlog = CpuInstance {
                queued_rows: 10,
                ..overloaded(90.0)
            };
            assert!(!vertical(&[backlog], &[8], stable, &PRICES, &cfg).is_empty());
        }
    }

    #[test]
    fn spare_cores_go_to_the_most_overloaded_first() {
        let cfg = VerticalConfig::default();
        let mild = CpuInstance {
            instance: 1,
            ..overloaded(120.0)
        };
        let bad = CpuInstance {
            instance: 2,
            ..overloaded(400.0)
        };
        let a = vertical(&[mild, bad], &[3], 0, &PRICES, &cfg);
        assert_eq!(
            a[0].kind,
            ActionKind::AddThreads {
                instance: 2,
                from: 1,
                to: 4
            }
        );
        assert_eq!(a.len(), 1, "{a:?}");
    }

    #[test]
    fn stable_load_returns_to_base_thread_instances() {
        let cfg = VerticalConfig::default();
        // 8 threads serving 250 rows/s: three 1-thread instances (300 rows/s) use 3 cores.
        let big = CpuInstance {
            state: InstanceState::Active,
            threads: 8,
            ..overloaded(250.0)
        };
        // Not yet stable: only the threads the load does not need are given back, in place.
        let a = vertical(&[big], &[4], cfg.stable_periods - 1, &PRICES, &cfg);
        let ActionKind::Rebalance {
            threads,
            replicas: 0,
            ..
        } = a[0].kind
        else {
            panic!("{a:?}")
        };
        assert!(threads < 8 && peak_at(&big, threads, &cfg) >= cfg.headroom * 250.0);
        assert!(peak_at(&big, threads - 1, &cfg) < cfg.headroom * 250.0);
        let a = vertical(&[big], &[4], cfg.stable_periods, &PRICES, &cfg);
        assert_eq!(
            a[0].kind,
            ActionKind::Rebalance {
                instance: 4,
                threads: 1,
                replicas: 2
            }
        );
        assert_eq!((a[0].cost_before_per_s, a[0].cost_after_per_s), (8.0, 3.0));
        // No room for the replicas anywhere: stays as it is.
        assert!(vertical(&[big], &[1], cfg.stable_periods, &PRICES, &cfg).is_empty());
        // As many cores, more throughput: 2 threads serving 150 rows/s (182 rows/s) become two
        // 1-thread instances (200 rows/s).
        let small = CpuInstance {
            state: InstanceState::Active,
            threads: 2,
            ..overloaded(150.0)
        };
        let a = vertical(&[small], &[8], cfg.stable_periods, &PRICES, &cfg);
        assert_eq!(
            a[0].kind,
            ActionKind::Rebalance {
                instance: 4,
                threads: 1,
                replicas: 1
            }
        );
        assert_eq!((a[0].cost_before_per_s, a[0].cost_after_per_s), (2.0, 2.0));
        // More cores: 2 threads serving 200 rows/s would need three 1-thread instances.
        let busy = CpuInstance {
            state: InstanceState::Active,
            threads: 2,
            ..overloaded(200.0)
        };
        assert!(vertical(&[busy], &[8], cfg.stable_periods, &PRICES, &cfg).is_empty());
    }

    /// An overloaded instance that the settled load lets split into base-thread instances is
    /// split, not given still more threads in the same period.
    #[test]
    fn a_settled_overloaded_instance_is_split_not_grown() {
        let cfg = VerticalConfig::default();
        // 8 threads (470 rows/s) serving 500 rows/s: six 1-thread instances (600 rows/s).
        let big = CpuInstance {
            threads: 8,
            ..overloaded(500.0)
        };
        let a = vertical(&[big], &[8], cfg.stable_periods, &PRICES, &cfg);
        assert_eq!(
            a.iter().map(|a| a.kind).collect::<Vec<_>>(),
            vec![ActionKind::Rebalance {
                instance: 4,
                threads: 1,
                replicas: 5
            }]
        );
        // Not settled: the same instance gets threads.
        let a = vertical(&[big], &[8], 0, &PRICES, &cfg);
        assert!(
            matches!(
                a[..],
                [Action {
                    kind: ActionKind::AddThreads { from: 8, .. },
                    ..
                }]
            ),
            "{a:?}"
        );
    }

    /// Themis §5.1.3 on the running period: with a forecast, a scaled-up instance is split into
    /// base-thread instances as soon as the forecast of the next horizon needs as many of them
    /// as the load now, without waiting for stable periods (before: only after
    /// `stable_periods`, whatever the load was going to do); when the forecast falls or rises,
    /// threads are given back or added in place instead, however long the load was stable.
    #[test]
    fn a_forecast_decides_when_threads_become_replicas() {
        let cfg = VerticalConfig::default();
        let big = CpuInstance {
            state: InstanceState::Active,
            threads: 8,
            ..overloaded(250.0)
        };
        let forecast = |max_qps| Settling::Forecast {
            load_qps: 250.0,
            max_qps,
        };
        // The surge stays (260 rows/s forecast: three base instances, as now): split at once,
        // after no stable period at all.
        let a = vertical_settling(&[big], &[4], forecast(260.0), &PRICES, &cfg);
        assert_eq!(
            a[0].kind,
            ActionKind::Rebalance {
                instance: 4,
                threads: 1,
                replicas: 2
            }
        );
        assert!(a[0].reason.contains("load settled"), "{}", a[0].reason);
        // Stable-periods judgment of the same period: threads only given back in place.
        let old = vertical(&[big], &[4], 0, &PRICES, &cfg);
        assert!(matches!(
            old[0].kind,
            ActionKind::Rebalance { replicas: 0, .. }
        ));
        // The surge ends (90 rows/s forecast: one base instance): no replicas that would
        // soon be removed; the threads the load now does not need are given back in place.
        let a = vertical_settling(&[big], &[4], forecast(90.0), &PRICES, &cfg);
        assert_eq!(a.len(), 1, "{a:?}");
        let ActionKind::Rebalance {
            threads,
            replicas: 0,
            ..
        } = a[0].kind
        else {
            panic!("{a:?}")
        };
        assert!(threads < 8 && peak_at(&big, threads, &cfg) >= cfg.headroom * 250.0);
        // Still rising (400 rows/s forecast): an overloaded instance gets threads, though
        // the stable-periods judgment would have called the load stable.
        let a = vertical_settling(&[overloaded(250.0)], &[8], forecast(400.0), &PRICES, &cfg);
        assert!(
            matches!(a[0].kind, ActionKind::AddThreads { from: 1, .. }),
            "{a:?}"
        );
        assert!(a[0].reason.contains("not settled"), "{}", a[0].reason);
        // Settled, overloaded at base threads: vertical first all the same (the load needs
        // more than the instance serves now; threads take effect at once).
        for settling in [forecast(250.0), Settling::Periods(9)] {
            let a = vertical_settling(&[overloaded(250.0)], &[8], settling, &PRICES, &cfg);
            assert!(
                matches!(
                    a[..],
                    [Action {
                        kind: ActionKind::AddThreads { from: 1, to: 4, .. },
                        ..
                    }]
                ),
                "{a:?}"
            );
        }
        // A forecast that is not a number settles nothing.
        let (settled, _) = forecast(f64::NAN).judge(&[big], &cfg);
        assert!(!settled);
    }

    #[test]
    fn stability_counts_consecutive_calm_periods() {
        let mut s = Stability::new(0.1);
        assert_eq!(s.observe(100.0), 0);
        assert_eq!(s.observe(105.0), 1);
        assert_eq!(s.observe(98.0), 2);
        assert_eq!(s.observe(150.0), 0);
        assert_eq!(s.observe(150.0), 1);
    }
}
