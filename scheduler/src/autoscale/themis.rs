//! Themis' transition policy between vertical and horizontal scaling, for one stage (one
//! model's replicas of one variant), as a deterministic state machine fed once per interval:
//! the observed arrival rate, a forecast of the next intervals' rates
//! ([`crate::forecast`]), the stage's instances with their intra-op threads, the throughput
//! per thread count from the profile ([`ThreadProfile`]) and the cores free on each host. It
//! returns [`ThemisAction`]s; carrying them out (and placing new replicas) is the caller's.
//!
//! # The rule (Themis §3.2, §5, Figure 4)
//!
//! Every interval, in this order:
//!
//! 1. **Vertical first** (§5.2.1 why and when, §5.2.2 how). In-place vertical scaling takes
//!    effect at once (under 100 ms in Themis, §3.2) where a replica must first load (5-6 s
//!    there). The serving instances get the fewest threads that serve
//!    `headroom * (max(observed, next forecast) + backlog / drain_s)`, spread **evenly**:
//!    every instance gets the same thread count, capped by its host (§5.2.2 shows even
//!    allocations give the most throughput under Amdahl's law). Threads never go below the
//!    variant's base threads, never above [`ThreadProfile::max_threads`], and never beyond
//!    the cores free on the instance's worker (threads count against idle cores: the caller
//!    passes, per worker, the smaller of its free thread budget and its idle CPU cores, as
//!    [`crate::autoscale::model_period`] does). The same step gives back threads the load no
//!    longer needs, once a lower level has sufficed for [`ThemisConfig::release_intervals`]
//!    intervals (noisy rates would otherwise resize every interval).
//! 2. **Horizontal when the surge stays** (§5.1.3 when). The replicas at base threads
//!    (serving and loading) are sized for the lowest rate the forecast gives over the next
//!    [`ThemisConfig::hold_intervals`] intervals: a surge the forecast says will pass gets no
//!    replica. In the first [`ThemisConfig::confirm_intervals`] intervals of a surge (the
//!    present load above what the replicas serve at base threads) this step waits: vertical
//!    scaling absorbs the surge while the forecaster sees it.
//! 3. **Hardware limit** (§5.1.2 (ii)): when even the most threads the hosts allow cannot
//!    serve the present load, the instances go to their limit (step 1) and replicas for the
//!    rest are added at once, without waiting for the forecast.
//! 4. **Switch back** (§5.1.1 why, §5.1.2 (i) how): once the replicas serve, step 1 finds
//!    that base threads suffice and returns every instance to them: `k` instances at base
//!    threads serve at least what one instance of `k` times the threads serves (Amdahl), so
//!    this is the cheapest configuration for the load (Themis measures 40% lower cost after
//!    switching back).
//! 5. **Scale in, stabilised**: when nothing is loading, no instance runs above base threads
//!    and fewer replicas would serve the highest rate of the observed and forecast window
//!    (Themis feeds the predicted maximum of the next ten seconds to its horizontal
//!    autoscaler, §3.2), for [`ThemisConfig::scale_in_intervals`] consecutive intervals, the
//!    surplus replicas are removed (the last ones of [`ThemisInput::instances`]; at most
//!    [`ThemisConfig::scale_in_step`] per calm spell when it is not 0).
//!
//! The state kept between intervals is three counters: consecutive surge intervals,
//! consecutive calm intervals and consecutive intervals a lower thread level sufficed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why the policy could not decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ThemisError {
    /// A profile that does not describe a usable instance.
    #[error("invalid thread profile: {0}")]
    Profile(&'static str),
    /// A configuration value out of its range.
    #[error("invalid Themis configuration: {0}")]
    Config(&'static str),
    /// A rate that is negative, infinite or NaN.
    #[error("{what} is {value}: rates must be finite and not negative")]
    Rate {
        /// Which input.
        what: &'static str,
        /// Its value.
        value: f64,
    },
    /// An instance on a worker `free_cores` does not cover.
    #[error("instance {instance} runs on worker {worker}, but free cores are given for {workers} workers")]
    UnknownWorker {
        /// The instance.
        instance: usize,
        /// Its worker.
        worker: usize,
        /// Workers `free_cores` covers.
        workers: usize,
    },
}

/// Saturation throughput of one instance of a variant by intra-op threads (from its
/// profiles), and the threads it is loaded with.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadProfile {
    base_threads: usize,
    /// `qps[t - 1]`: rows/s at `t` threads.
    qps: Vec<f64>,
}

impl ThreadProfile {
    /// A profile from measured throughputs: `qps_by_threads[t - 1]` rows/s at `t` threads, for
    /// `t` up to the most threads an instance may get; it must not fall as threads grow, and
    /// be positive at `base_threads`.
    pub fn new(base_threads: usize, qps_by_threads: Vec<f64>) -> Result<Self, ThemisError> {
        if base_threads == 0 || qps_by_threads.len() < base_threads {
            return Err(ThemisError::Profile(
                "base threads must be at least 1 and within the profiled thread counts",
            ));
        }
        if qps_by_threads.iter().any(|q| !(q.is_finite() && *q >= 0.0)) {
            return Err(ThemisError::Profile(
                "throughputs must be finite and not negative",
            ));
        }
        if qps_by_threads.windows(2).any(|w| w[1] < w[0]) {
            return Err(ThemisError::Profile(
                "throughput must not fall as threads grow",
            ));
        }
        if qps_by_threads[base_threads - 1] <= 0.0 {
            return Err(ThemisError::Profile(
                "throughput at base threads must be positive",
            ));
        }
        Ok(ThreadProfile {
            base_threads,
            qps: qps_by_threads,
        })
    }

    /// A profile following Amdahl's law with parallel fraction `p` (as
    /// [`crate::autoscale::peak_at`]): `base_qps * s(t) / s(base)`, `s(t) = 1 / ((1 - p) + p /
    /// t)`, up to `max_threads`.
    pub fn amdahl(
        base_threads: usize,
        base_qps: f64,
        parallel_fraction: f64,
        max_threads: usize,
    ) -> Result<Self, ThemisError> {
        if !(0.0..=1.0).contains(&parallel_fraction) {
            return Err(ThemisError::Profile(
                "the parallel fraction must be in [0, 1]",
            ));
        }
        let s = |t: usize| 1.0 / ((1.0 - parallel_fraction) + parallel_fraction / t as f64);
        let base = s(base_threads.max(1));
        let qps = (1..=max_threads).map(|t| base_qps * s(t) / base).collect();
        ThreadProfile::new(base_threads, qps)
    }

    /// The threads an instance is loaded with.
    pub fn base_threads(&self) -> usize {
        self.base_threads
    }

    /// The most threads an instance may get.
    pub fn max_threads(&self) -> usize {
        self.qps.len()
    }

    /// Rows/s at base threads.
    pub fn base_qps(&self) -> f64 {
        self.qps[self.base_threads - 1]
    }

    /// Rows/s at `threads` threads (clamped to the profiled range).
    pub fn qps(&self, threads: usize) -> f64 {
        self.qps[threads.clamp(1, self.qps.len()) - 1]
    }
}

/// Thresholds of the transition policy; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ThemisConfig {
    /// Capacity to provision as a multiple of the load (1 / 0.7: replicas at 70% utilisation,
    /// as the simulator's horizontal baseline sizes them).
    pub headroom: f64,
    /// Intervals the forecast must stay above what the replicas serve before replicas are
    /// added (5).
    pub hold_intervals: usize,
    /// Intervals of a surge absorbed by threads alone before the forecast may add replicas
    /// (1: no replica in a surge's first interval, unless threads cannot serve it).
    pub confirm_intervals: usize,
    /// Consecutive calm intervals before surplus replicas are removed (5).
    pub scale_in_intervals: usize,
    /// Consecutive intervals a lower thread level must suffice before threads are given back
    /// (3; 1 gives them back at once). Keeps noisy rates from resizing every interval.
    pub release_intervals: usize,
    /// Most replicas removed after one calm spell (0: all the surplus at once).
    pub scale_in_step: usize,
    /// Replicas never removed (1).
    pub min_replicas: usize,
    /// Time in which threads should drain the queued rows, s (1).
    pub drain_s: f64,
}

impl Default for ThemisConfig {
    fn default() -> Self {
        ThemisConfig {
            headroom: 1.0 / 0.7,
            hold_intervals: 5,
            confirm_intervals: 1,
            scale_in_intervals: 5,
            release_intervals: 3,
            scale_in_step: 0,
            min_replicas: 1,
            drain_s: 1.0,
        }
    }
}

/// One serving instance of the stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StageInstance {
    /// The caller's index of the instance (actions name it).
    pub instance: usize,
    /// Its worker, an index into [`ThemisInput::free_cores`].
    pub worker: usize,
    /// Its intra-op threads now.
    pub threads: usize,
}

/// What one interval decides on.
#[derive(Debug, Clone, Copy)]
pub struct ThemisInput<'a> {
    /// Arrival rate over the interval that just ended, rows/s.
    pub observed_qps: f64,
    /// Rows queued at the stage's instances now.
    pub backlog_rows: f64,
    /// Forecast rates of the next intervals, rows/s (`[0]` the next one; Themis predicts
    /// ten seconds). Empty: the observed rate stands for the forecast.
    pub forecast_qps: &'a [f64],
    /// The serving instances (order: the last ones are removed first on scale-in).
    pub instances: &'a [StageInstance],
    /// Replicas requested that do not serve yet.
    pub loading: usize,
    /// Per worker: cores more threads may take there (its free thread budget and idle CPU
    /// cores, whichever is smaller).
    pub free_cores: &'a [usize],
    /// Throughput per thread count.
    pub profile: &'a ThreadProfile,
}

/// A change to the stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThemisAction {
    /// Raise `instance`'s intra-op threads from `from` to `to` in place.
    AddThreads {
        /// The instance.
        instance: usize,
        /// Threads now.
        from: usize,
        /// Threads after.
        to: usize,
    },
    /// Lower `instance`'s intra-op threads from `from` to `to` in place.
    RemoveThreads {
        /// The instance.
        instance: usize,
        /// Threads now.
        from: usize,
        /// Threads after.
        to: usize,
    },
    /// Load `count` new replicas at `threads` threads (where is the caller's choice).
    AddReplicas {
        /// Replicas to load.
        count: usize,
        /// Their threads (the variant's base threads).
        threads: usize,
    },
    /// Unload `instance`.
    RemoveReplica {
        /// The instance.
        instance: usize,
    },
}

/// Where the stage stands after an interval's actions (Themis Figure 4's states).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ThemisPhase {
    /// Every instance at base threads, nothing loading: the cheapest configuration.
    Horizontal,
    /// Some instance runs above base threads and no replica is loading: a surge absorbed in
    /// place.
    Vertical,
    /// Replicas are loading; threads bridge until they serve.
    Transition,
}

impl fmt::Display for ThemisPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ThemisPhase::Horizontal => "horizontal",
            ThemisPhase::Vertical => "vertical",
            ThemisPhase::Transition => "transition",
        })
    }
}

/// What one interval decided.
#[derive(Debug, Clone, PartialEq)]
pub struct ThemisDecision {
    /// Where the stage stands after the actions.
    pub phase: ThemisPhase,
    /// In the order to carry them out.
    pub actions: Vec<ThemisAction>,
    /// Saturation throughput of the serving instances after the thread changes, rows/s.
    pub capacity_qps: f64,
    /// Why, with the figures.
    pub reason: String,
}

/// The transition policy's state for one stage; see the module documentation.
#[derive(Debug, Clone, PartialEq)]
pub struct Themis {
    cfg: ThemisConfig,
    surge_intervals: usize,
    calm_intervals: usize,
    release: usize,
}

fn check_rate(what: &'static str, value: f64) -> Result<(), ThemisError> {
    if value.is_finite() && value >= 0.0 {
        Ok(())
    } else {
        Err(ThemisError::Rate { what, value })
    }
}

/// Threads for each instance at the even level `level` (each capped by its host's free
/// cores, claimed in order, never below base), and the capacity they give.
fn allocate(
    instances: &[StageInstance],
    level: usize,
    free: &mut [usize],
    p: &ThreadProfile,
    out: &mut Vec<usize>,
) -> f64 {
    out.clear();
    let mut cap = 0.0;
    for i in instances {
        let want = level.max(p.base_threads()).min(p.max_threads());
        let got = if want > i.threads {
            let take = (want - i.threads).min(free[i.worker]);
            free[i.worker] -= take;
            i.threads + take
        } else {
            want
        };
        cap += p.qps(got);
        out.push(got);
    }
    cap
}

impl Themis {
    /// A stage's policy with thresholds `cfg`.
    pub fn new(cfg: ThemisConfig) -> Result<Themis, ThemisError> {
        if !(cfg.headroom.is_finite() && cfg.headroom >= 1.0) {
            return Err(ThemisError::Config("headroom must be at least 1"));
        }
        if !(cfg.drain_s.is_finite() && cfg.drain_s > 0.0) {
            return Err(ThemisError::Config("drain_s must be positive"));
        }
        if cfg.min_replicas == 0 {
            return Err(ThemisError::Config("min_replicas must be at least 1"));
        }
        Ok(Themis {
            cfg,
            surge_intervals: 0,
            calm_intervals: 0,
            release: 0,
        })
    }

    /// The thresholds.
    pub fn config(&self) -> &ThemisConfig {
        &self.cfg
    }

    /// Consecutive intervals, up to the last one decided, whose load the replicas at base
    /// threads could not serve.
    pub fn surge_intervals(&self) -> usize {
        self.surge_intervals
    }

    /// One interval's decision; see the module documentation.
    pub fn step(&mut self, input: &ThemisInput) -> Result<ThemisDecision, ThemisError> {
        check_rate("the observed rate", input.observed_qps)?;
        check_rate("the backlog", input.backlog_rows)?;
        for &f in input.forecast_qps {
            check_rate("a forecast rate", f)?;
        }
        for i in input.instances {
            if i.worker >= input.free_cores.len() {
                return Err(ThemisError::UnknownWorker {
                    instance: i.instance,
                    worker: i.worker,
                    workers: input.free_cores.len(),
                });
            }
        }
        let cfg = &self.cfg;
        let p = input.profile;
        let (base, cb) = (p.base_threads(), p.base_qps());
        let observed = input.observed_qps;
        let n = input.instances.len();
        let forecast = input.forecast_qps;
        let next = forecast.first().copied().unwrap_or(observed);
        let window_max = forecast.iter().copied().fold(observed, f64::max);
        let hold = &forecast[..cfg.hold_intervals.min(forecast.len())];
        let hold_min = if hold.is_empty() {
            observed
        } else {
            hold.iter().copied().fold(f64::INFINITY, f64::min)
        };
        let replicas_for = |rate: f64| -> usize {
            ((cfg.headroom * rate / cb - 1e-9).ceil().max(0.0) as usize).max(cfg.min_replicas)
        };

        // Surge: the replicas at base threads cannot serve the present load.
        let surging_before = self.surge_intervals;
        let surge = cfg.headroom * observed > n as f64 * cb;
        self.surge_intervals = if surge { surging_before + 1 } else { 0 };

        // 1. Threads: the lowest even level that serves the immediate need.
        let need = cfg.headroom * (observed.max(next) + input.backlog_rows / cfg.drain_s);
        let mut scratch = input.free_cores.to_vec();
        let mut threads = Vec::with_capacity(n);
        let mut chosen = None;
        for level in base..=p.max_threads() {
            scratch.copy_from_slice(input.free_cores);
            let cap = allocate(input.instances, level, &mut scratch, p, &mut threads);
            if cap >= need {
                chosen = Some(level);
                break;
            }
        }
        let limited = chosen.is_none();
        let level = chosen.unwrap_or(p.max_threads());
        scratch.copy_from_slice(input.free_cores);
        let mut capacity = allocate(input.instances, level, &mut scratch, p, &mut threads);
        // Threads go back only once a lower level has sufficed for a while: until then every
        // instance keeps at least the threads it has.
        if input
            .instances
            .iter()
            .zip(&threads)
            .any(|(i, &t)| t < i.threads)
        {
            self.release += 1;
            if self.release < cfg.release_intervals {
                capacity = 0.0;
                for (i, t) in input.instances.iter().zip(threads.iter_mut()) {
                    *t = (*t).max(i.threads);
                    capacity += p.qps(*t);
                }
            } else {
                self.release = 0;
            }
        } else {
            self.release = 0;
        }
        let mut actions = Vec::new();
        for (i, &to) in input.instances.iter().zip(&threads) {
            let (instance, from) = (i.instance, i.threads);
            if to > from {
                actions.push(ThemisAction::AddThreads { instance, from, to });
            } else if to < from {
                actions.push(ThemisAction::RemoveThreads { instance, from, to });
            }
        }
        let above_base = threads.iter().any(|&t| t > base);

        // 2-3. Replicas: for the load the forecast says stays, once a surge is confirmed; for
        // what threads cannot serve, at once.
        let have = n + input.loading;
        let mut why = Vec::new();
        let stays = replicas_for(hold_min);
        let confirmed = !surge || surging_before >= cfg.confirm_intervals;
        let sustained = if confirmed {
            stays.saturating_sub(have)
        } else {
            0
        };
        if sustained > 0 {
            why.push(format!(
                "the forecast stays at or above {hold_min:.1} rows/s for {} intervals: {stays} replicas at {base} threads (§5.1.3)",
                hold.len()
            ));
        }
        let short = cfg.headroom * observed - capacity;
        let urgent = if limited && short > 0.0 {
            ((short / cb - 1e-9).ceil().max(0.0) as usize).saturating_sub(input.loading)
        } else {
            0
        };
        if urgent > 0 {
            why.push(format!(
                "threads at their limit serve {capacity:.1} of {:.1} rows/s: {urgent} more replicas at once (§5.1.2 (ii))",
                cfg.headroom * observed
            ));
        }
        let add = sustained.max(urgent);
        if add > 0 {
            actions.push(ThemisAction::AddReplicas {
                count: add,
                threads: base,
            });
        }

        // 5. Scale in, after a calm spell, to what the window's highest rate needs.
        let keep = replicas_for(window_max);
        let calm = add == 0 && input.loading == 0 && !above_base && !surge && keep < n;
        self.calm_intervals = if calm { self.calm_intervals + 1 } else { 0 };
        if calm && self.calm_intervals >= cfg.scale_in_intervals {
            self.calm_intervals = 0;
            let surplus = n - keep;
            let remove = if cfg.scale_in_step == 0 {
                surplus
            } else {
                surplus.min(cfg.scale_in_step)
            };
            for i in input.instances[n - remove..].iter().rev() {
                actions.push(ThemisAction::RemoveReplica {
                    instance: i.instance,
                });
            }
            why.push(format!(
                "{} calm intervals: the highest rate of the window, {window_max:.1} rows/s, needs {keep} of {n} replicas: {remove} removed",
                cfg.scale_in_intervals
            ));
        }

        let phase = if input.loading + add > 0 {
            ThemisPhase::Transition
        } else if above_base {
            ThemisPhase::Vertical
        } else {
            ThemisPhase::Horizontal
        };
        let level = threads.iter().copied().max().unwrap_or(base);
        let reason = format!(
            "{phase}: observed {observed:.1} rows/s, next {next:.1}, window max {window_max:.1}; \
             {n} serving + {} loading; threads up to {level} give {capacity:.1} rows/s for a need of {need:.1}{}{}",
            input.loading,
            if why.is_empty() { "" } else { "; " },
            why.join("; ")
        );
        Ok(ThemisDecision {
            phase,
            actions,
            capacity_qps: capacity,
            reason,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One thread per instance at 100 rows/s, Amdahl p = 0.9 up to 8 threads:
    /// 100, 182, 250, 308, 357, 400, 438, 471.
    fn profile() -> ThreadProfile {
        ThreadProfile::amdahl(1, 100.0, 0.9, 8).unwrap()
    }

    fn cfg() -> ThemisConfig {
        ThemisConfig {
            headroom: 1.0,
            hold_intervals: 3,
            confirm_intervals: 1,
            scale_in_intervals: 3,
            release_intervals: 1,
            scale_in_step: 0,
            min_replicas: 1,
            drain_s: 1.0,
        }
    }

    fn inst(instance: usize, worker: usize, threads: usize) -> StageInstance {
        StageInstance {
            instance,
            worker,
            threads,
        }
    }

    struct Stage {
        themis: Themis,
        profile: ThreadProfile,
        free: Vec<usize>,
    }

    impl Stage {
        fn new() -> Stage {
            Stage {
                themis: Themis::new(cfg()).unwrap(),
                profile: profile(),
                free: vec![8, 8, 8, 8],
            }
        }

        fn step(
            &mut self,
            observed: f64,
            forecast: &[f64],
            instances: &[StageInstance],
            loading: usize,
        ) -> ThemisDecision {
            self.themis
                .step(&ThemisInput {
                    observed_qps: observed,
                    backlog_rows: 0.0,
                    forecast_qps: forecast,
                    instances,
                    loading,
                    free_cores: &self.free,
                    profile: &self.profile,
                })
                .unwrap()
        }
    }

    fn replicas_added(d: &ThemisDecision) -> usize {
        d.actions
            .iter()
            .map(|a| match a {
                ThemisAction::AddReplicas { count, .. } => *count,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn a_surge_gets_threads_first_and_no_replica_in_its_first_interval() {
        let mut s = Stage::new();
        let one = [inst(7, 0, 1)];
        let d = s.step(80.0, &[80.0; 10], &one, 0);
        assert!(d.actions.is_empty(), "{d:?}");
        assert_eq!(d.phase, ThemisPhase::Horizontal);
        // 80 -> 240 rows/s, and even a forecast that says it stays: threads only, 3 of them
        // (250 rows/s), the fewest that serve it.
        let d = s.step(240.0, &[240.0; 10], &one, 0);
        assert_eq!(
            d.actions,
            vec![ThemisAction::AddThreads {
                instance: 7,
                from: 1,
                to: 3
            }],
            "{}",
            d.reason
        );
        assert_eq!(d.phase, ThemisPhase::Vertical);
        assert!(d.capacity_qps >= 240.0);
    }

    #[test]
    fn a_sustained_surge_adds_replicas_then_returns_the_threads() {
        let mut s = Stage::new();
        s.step(80.0, &[80.0; 10], &[inst(7, 0, 1)], 0);
        let d = s.step(240.0, &[240.0; 10], &[inst(7, 0, 1)], 0);
        assert_eq!(replicas_added(&d), 0);
        // Second interval of the surge, the forecast says it stays: replicas for it at base
        // threads (240 rows/s: 3 x 100), the threads kept while they load.
        let scaled = [inst(7, 0, 3)];
        let d = s.step(240.0, &[240.0; 10], &scaled, 0);
        assert_eq!(
            d.actions,
            vec![ThemisAction::AddReplicas {
                count: 2,
                threads: 1
            }],
            "{}",
            d.reason
        );
        assert_eq!(d.phase, ThemisPhase::Transition);
        let d = s.step(240.0, &[240.0; 10], &scaled, 2);
        assert!(d.actions.is_empty(), "{d:?}");
        // The replicas serve: switch back, the scaled instance returns to base threads.
        let three = [inst(7, 0, 3), inst(8, 1, 1), inst(9, 2, 1)];
        let d = s.step(240.0, &[240.0; 10], &three, 0);
        assert_eq!(
            d.actions,
            vec![ThemisAction::RemoveThreads {
                instance: 7,
                from: 3,
                to: 1
            }],
            "{}",
            d.reason
        );
        assert_eq!(d.phase, ThemisPhase::Horizontal);
        // 3 cores serve 300 rows/s where the vertical configuration's 5 served 450 for the
        // same load: cheaper, as Themis §5.1.1 argues.
        assert_eq!(d.capacity_qps, 300.0);
    }

    #[test]
    fn a_transient_spike_gets_no_replica() {
        let mut s = Stage::new();
        let one = [inst(7, 0, 1)];
        s.step(80.0, &[80.0; 10], &one, 0);
        // A spike the forecast says passes (a seasonal model knows the next seconds are
        // quiet): threads only, and for two intervals no replica.
        let d = s.step(300.0, &[80.0; 10], &one, 0);
        assert_eq!(replicas_added(&d), 0, "{d:?}");
        assert!(matches!(
            d.actions[..],
            [ThemisAction::AddThreads { to: 4, .. }]
        ));
        let scaled = [inst(7, 0, 4)];
        let d = s.step(300.0, &[80.0; 10], &scaled, 0);
        assert_eq!(replicas_added(&d), 0, "{d:?}");
        // It passes: the threads go back at once.
        let d = s.step(80.0, &[80.0; 10], &scaled, 0);
        assert_eq!(
            d.actions,
            vec![ThemisAction::RemoveThreads {
                instance: 7,
                from: 4,
                to: 1
            }]
        );
        assert_eq!(d.phase, ThemisPhase::Horizontal);
    }

    #[test]
    fn threads_go_back_after_the_release_intervals() {
        let mut s = Stage::new();
        s.themis = Themis::new(ThemisConfig {
            release_intervals: 2,
            ..cfg()
        })
        .unwrap();
        let scaled = [inst(7, 0, 4)];
        // One quiet interval: the threads stay; the second: they go.
        let d = s.step(80.0, &[80.0; 10], &scaled, 0);
        assert!(d.actions.is_empty(), "{d:?}");
        assert_eq!(d.capacity_qps, profile().qps(4));
        let d = s.step(80.0, &[80.0; 10], &scaled, 0);
        assert_eq!(
            d.actions,
            vec![ThemisAction::RemoveThreads {
                instance: 7,
                from: 4,
                to: 1
            }]
        );
        // A busy interval in between restarts the count.
        let mut s = Stage::new();
        s.themis = Themis::new(ThemisConfig {
            release_intervals: 2,
            ..cfg()
        })
        .unwrap();
        assert!(s.step(80.0, &[80.0; 10], &scaled, 0).actions.is_empty());
        assert!(s.step(300.0, &[80.0; 10], &scaled, 0).actions.is_empty());
        assert!(s.step(80.0, &[80.0; 10], &scaled, 0).actions.is_empty());
    }

    #[test]
    fn a_fall_returns_to_the_cheapest_configuration_after_a_calm_spell() {
        let mut s = Stage::new();
        let four = [inst(1, 0, 1), inst(2, 1, 1), inst(3, 2, 1), inst(4, 3, 1)];
        assert!(s.step(380.0, &[380.0; 10], &four, 0).actions.is_empty());
        // The load falls to 90 rows/s and stays: nothing for two calm intervals (the
        // stabilisation), then the three surplus replicas go, the last ones first.
        for _ in 0..2 {
            let d = s.step(90.0, &[90.0; 10], &four, 0);
            assert!(d.actions.is_empty(), "{d:?}");
        }
        let d = s.step(90.0, &[90.0; 10], &four, 0);
        assert_eq!(
            d.actions,
            vec![
                ThemisAction::RemoveReplica { instance: 4 },
                ThemisAction::RemoveReplica { instance: 3 },
                ThemisAction::RemoveReplica { instance: 2 },
            ],
            "{}",
            d.reason
        );
        // At most one per calm spell when asked: one now, the next after another spell.
        let mut s = Stage::new();
        s.themis = Themis::new(ThemisConfig {
            scale_in_step: 1,
            ..cfg()
        })
        .unwrap();
        let mut removed = Vec::new();
        for _ in 0..6 {
            removed.push(s.step(90.0, &[90.0; 10], &four, 0).actions);
        }
        let one = |i| vec![ThemisAction::RemoveReplica { instance: i }];
        assert_eq!(
            removed,
            vec![vec![], vec![], one(4), vec![], vec![], one(4)],
            "{removed:?}"
        );
        // A forecast that says the load returns within the window keeps the replicas.
        let mut s = Stage::new();
        for _ in 0..6 {
            let d = s.step(90.0, &[90.0, 90.0, 90.0, 90.0, 370.0], &four, 0);
            assert!(d.actions.is_empty(), "{d:?}");
        }
        // A noisy interval restarts the calm spell.
        let mut s = Stage::new();
        s.step(90.0, &[90.0; 10], &four, 0);
        s.step(90.0, &[90.0; 10], &four, 0);
        s.step(350.0, &[90.0; 10], &four, 0);
        assert!(s.step(90.0, &[90.0; 10], &four, 0).actions.is_empty());
    }

    #[test]
    fn beyond_what_threads_can_serve_replicas_come_at_once() {
        let mut s = Stage::new();
        s.free = vec![2];
        let one = [inst(7, 0, 1)];
        // 600 rows/s; the host has 2 free cores: 3 threads serve 250, so 4 replicas for the
        // missing 350, in the surge's first interval.
        let d = s.step(600.0, &[600.0; 10], &one, 0);
        assert_eq!(
            d.actions,
            vec![
                ThemisAction::AddThreads {
                    instance: 7,
                    from: 1,
                    to: 3
                },
                ThemisAction::AddReplicas {
                    count: 4,
                    threads: 1
                }
            ],
            "{}",
            d.reason
        );
        // Replicas already loading count.
        let d = s.step(600.0, &[600.0; 10], &[inst(7, 0, 3)], 4);
        assert_eq!(replicas_added(&d), 1, "{}", d.reason);
    }

    #[test]
    fn threads_never_exceed_the_free_cores_and_are_spread_evenly() {
        let mut s = Stage::new();
        // Two instances on one worker with 2 free cores: one more thread each (2 x 182), not
        // both to one of them.
        s.free = vec![2, 0];
        let two = [inst(1, 0, 1), inst(2, 0, 1)];
        let d = s.step(350.0, &[350.0; 3], &two, 0);
        assert_eq!(
            &d.actions[..2],
            &[
                ThemisAction::AddThreads {
                    instance: 1,
                    from: 1,
                    to: 2
                },
                ThemisAction::AddThreads {
                    instance: 2,
                    from: 1,
                    to: 2
                },
            ],
            "{}",
            d.reason
        );
        // No free core: no thread at all.
        s.free = vec![0, 0];
        let d = s.step(350.0, &[350.0; 3], &two, 0);
        assert!(
            d.actions
                .iter()
                .all(|a| matches!(a, ThemisAction::AddReplicas { .. })),
            "{d:?}"
        );
    }

    #[test]
    fn invalid_inputs_are_refused() {
        assert!(ThreadProfile::new(2, vec![100.0]).is_err());
        assert!(ThreadProfile::new(1, vec![100.0, 90.0]).is_err());
        assert!(ThreadProfile::new(1, vec![0.0, 90.0]).is_err());
        assert!(Themis::new(ThemisConfig {
            headroom: 0.5,
            ..cfg()
        })
        .is_err());
        let mut s = Stage::new();
        let p = profile();
        let bad = s.themis.step(&ThemisInput {
            observed_qps: f64::NAN,
            backlog_rows: 0.0,
            forecast_qps: &[],
            instances: &[],
            loading: 0,
            free_cores: &[],
            profile: &p,
        });
        assert!(matches!(bad, Err(ThemisError::Rate { .. })));
        let bad = s.themis.step(&ThemisInput {
            observed_qps: 1.0,
            backlog_rows: 0.0,
            forecast_qps: &[],
            instances: &[inst(0, 3, 1)],
            loading: 0,
            free_cores: &[1],
            profile: &p,
        });
        assert!(matches!(bad, Err(ThemisError::UnknownWorker { .. })));
        // A backlog is drained by threads.
        let d = s
            .step(50.0, &[50.0], &[inst(0, 0, 1)], 0)
            .actions
            .is_empty();
        assert!(d);
        let d = s
            .themis
            .step(&ThemisInput {
                observed_qps: 50.0,
                backlog_rows: 150.0,
                forecast_qps: &[50.0],
                instances: &[inst(0, 0, 1)],
                loading: 0,
                free_cores: &[8],
                profile: &p,
            })
            .unwrap();
        assert_eq!(
            d.actions,
            vec![ThemisAction::AddThreads {
                instance: 0,
                from: 1,
                to: 3
            }]
        );
    }
}
