//! The model autoscaler's loop as one component: what it remembers between periods and how it
//! turns one period's arrivals into a [`model_period`]. The controller's model autoscaler
//! (`control/src/autoscaler`) and the simulator's platform policy (`infaas_sim::policy::Infaas`)
//! both keep one [`ModelLoop`] and call [`ModelLoop::period`] once a period with the same
//! [`LoopConfig`]; `infaas/tests/model_loop_parity.rs` feeds both the same arrivals and
//! cluster and asserts the same decisions in the same order.
//!
//! Per family it keeps:
//! - the load to plan for ([`PlannedLoad`]: the last period's rate, the period rates' moving
//!   average and the busiest one-second rate of the peak hold);
//! - how many periods that load has been stable ([`Stability`], 10 %);
//! - a forecaster of the family's arrivals ([`AutoForecaster`], Themis §3.2): the highest rate
//!   it forecasts over the next ten seconds judges when threads added to an instance become
//!   base-thread replicas (the vertical-to-horizontal switch, Themis §5.1.3), once it has seen
//!   ten seconds of arrivals;
//! - when one of its instances was last Overloaded, or the query path last loaded one of its
//!   variants because no live instance would answer in time: for the peak hold after that, it
//!   gives nothing back (the profile overstates what its instances serve on this machine, or
//!   the load the queries needed would be undone and redone, a load's time late each time);
//!
//! and per instance, by id, its consecutive Interfered periods ([`InterferenceCounter`]) and
//! since when it has been in its state (the first period that saw the state: scale-in waits
//! for an instance's load time and the scale-in hold in its state). A family that has no live
//! instance in a period is forgotten, as is an instance that has left the cluster.

use std::collections::BTreeMap;

use crate::autoscale::by_id::ById;
use crate::autoscale::{
    hold_periods, model_period, FamilyState, InterferenceCounter, PeriodConfig, PeriodInput,
    PeriodPlan, PlannedLoad, Planner, Stability,
};
use crate::forecast::{AutoForecaster, ForecastModel};
use crate::instance_state::{short_of_profile, InstanceState};
use crate::snapshot::{Prices, Snapshot};

/// How far ahead each family's arrivals are forecast, ms (Themis §3.2: ten seconds).
pub const FORECAST_HORIZON_MS: f64 = 10_000.0;
/// Periods of arrivals the forecaster keeps and refits on.
pub const FORECAST_HISTORY: usize = 600;
/// Time between the forecaster's refits, ms: thirty seconds whatever the period (a refit
/// searches the candidate models over the kept history, so it is not done every period).
pub const FORECAST_REFIT_MS: f64 = 30_000.0;
/// The model a family's forecaster starts with, before its first refit.
pub const FORECAST_INITIAL: ForecastModel = ForecastModel::Ewma { alpha: 0.5 };
/// A forecaster whose error (MAPE on the newest quarter of its history, see
/// [`AutoForecaster::error`]) is below this is trusted to end the peak hold early
/// ([`hold_within_forecast`]).
pub const FORECAST_TRUSTED_ERROR: f64 = 0.3;
/// How many of its errors of margin a trusted forecast's maximum is given when it caps the
/// peak hold ([`hold_within_forecast`]).
pub const FORECAST_HOLD_MARGIN: f64 = 4.0;

/// The load to plan for, `load_qps` (the peak hold's), capped by a trusted forecast: when the
/// family's forecaster errs by less than [`FORECAST_TRUSTED_ERROR`], the held peak counts only
/// up to the highest rate it forecasts over the horizon, with [`FORECAST_HOLD_MARGIN`] times
/// its error of margin, and never below the rate now (`current_qps`). The peak hold keeps the
/// capacity a burst needed because bursts recur; a load that falls as its forecaster expects
/// (a diurnal decline) is not one the held peak will come back to. A forecaster that errs more
/// (bursts it does not predict) leaves the hold as it is.
pub fn hold_within_forecast(
    load_qps: f64,
    current_qps: f64,
    forecast_max_qps: Option<f64>,
    forecast_error: Option<f64>,
) -> f64 {
    match (forecast_max_qps, forecast_error) {
        (Some(max), Some(error))
            if max.is_finite() && error.is_finite() && error < FORECAST_TRUSTED_ERROR =>
        {
            let cap = max * (1.0 + FORECAST_HOLD_MARGIN * error.max(0.0));
            load_qps.min(cap.max(current_qps))
        }
        _ => load_qps,
    }
}

/// Relative change within which a family's load counts as stable.
pub const STABILITY_TOLERANCE: f64 = 0.1;

/// The model autoscaler's default period, ms (the controller's `autoscale.model_interval_ms`,
/// the simulator's `Cluster::tick_ms`): a quarter of a second, so that a step in load is seen
/// and answered within a quarter of a second rather than a whole one.
pub const DEFAULT_MODEL_PERIOD_MS: u64 = 250;

/// The settings of one [`ModelLoop`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopConfig {
    /// The thresholds of each period.
    pub period: PeriodConfig,
    /// How often the loop runs, ms: the controller's `autoscale.model_interval_ms`; the
    /// simulator's monitoring window. The peak hold and the forecast horizon are counted in
    /// periods of this length.
    pub period_ms: f64,
    /// Whether each family's arrivals are forecast (Themis); false: added threads become
    /// replicas after `period.vertical.stable_periods` stable periods.
    pub forecast: bool,
}

impl LoopConfig {
    /// Periods the peak hold spans.
    pub fn hold_periods(&self) -> usize {
        hold_periods(self.period.scaling.peak_hold_ms, self.period_ms)
    }

    /// Periods in a second (at least one): the span of the rates the peak hold keeps.
    pub fn second_periods(&self) -> usize {
        ((1_000.0 / self.period_ms.max(10.0)).ceil() as usize).max(1)
    }

    /// Periods in the forecast's horizon (at least one).
    pub fn horizon_periods(&self) -> usize {
        (FORECAST_HORIZON_MS / self.period_ms.max(10.0))
            .round()
            .max(1.0) as usize
    }

    /// Periods between the forecaster's refits (at least one).
    pub fn refit_periods(&self) -> usize {
        (FORECAST_REFIT_MS / self.period_ms.max(10.0))
            .round()
            .max(1.0) as usize
    }
}

/// One family with live instances in a period, as the caller found it.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveFamily<'a, K> {
    /// The caller's key for the family (the controller's `(tenant, model)`, the simulator's
    /// model name).
    pub key: K,
    pub tenant: &'a str,
    pub model: &'a str,
    /// Its live instances on live workers (indices into the snapshot).
    pub instances: Vec<usize>,
    /// Rows that arrived for it in the period, per second.
    pub rows_per_s: f64,
    /// Tightest SLO and highest minimum accuracy of those rows.
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
    /// An action of it is under way.
    pub busy: bool,
    /// The query path started a load of it in the period (no live instance would have
    /// answered in time): held as overload, so the replica is not given back within the peak
    /// hold.
    pub loaded_for_queries: bool,
}

/// The cluster in one period.
#[derive(Debug, Clone, Copy)]
pub struct LoopInput<'a> {
    /// The cluster as the policies see it (the controller's and the simulator's view in which
    /// started workers count as fully busy: [`crate::autoscale::releasable_view`]).
    pub snapshot: &'a Snapshot,
    /// Per instance: its intra-op threads now (missing: its variant's).
    pub threads: &'a [usize],
    /// Per worker: whether the planner should empty it first (missing: no).
    pub releasable: &'a [bool],
    pub prices: Prices,
    /// The period's time, ms on the caller's clock (ages are differences of it).
    pub now_ms: f64,
}

/// What one period decided and saw.
#[derive(Debug, Clone, PartialEq)]
pub struct LoopPeriod {
    pub plan: PeriodPlan,
    /// Each family's signals, in the order of the families given.
    pub signals: Vec<Signal>,
    /// Per snapshot instance: how long it has been in its state, ms.
    pub ages_ms: Vec<f64>,
}

/// What the loop knows of one family.
#[derive(Debug, Clone)]
struct FamilySignals {
    load: PlannedLoad,
    stability: Stability,
    /// Its forecaster and the periods it has seen.
    forecaster: Option<(AutoForecaster, usize)>,
    /// When one of its instances was last Overloaded, ms.
    overloaded_at_ms: Option<f64>,
    /// The tightest SLO and the highest minimum accuracy its rows asked for within the peak
    /// hold.
    slo_ms: Held,
    min_accuracy: Held,
}

/// The strictest value seen within a time span, and when it was seen (ms): a family's
/// requirements outlive a period without rows. Planned without them, its variants' capacity
/// reads as their throughput at a full batch, far above what they serve under the SLO the
/// next rows bring, and the family is scaled down to be scaled up again.
#[derive(Debug, Clone, Copy, Default)]
struct Held(Option<(f64, f64)>);

impl Held {
    /// Observes `value` at `now_ms` (`stricter(a, b)`: `a` is stricter than `b`) and returns
    /// the strictest value seen within `span_ms`.
    fn observe(
        &mut self,
        value: Option<f64>,
        now_ms: f64,
        span_ms: f64,
        stricter: impl Fn(f64, f64) -> bool,
    ) -> Option<f64> {
        let kept = self.0.filter(|&(_, at)| now_ms - at < span_ms);
        self.0 = match (value, kept) {
            (Some(v), Some((k, at))) if stricter(k, v) => Some((k, at)),
            (Some(v), _) => Some((v, now_ms)),
            (None, kept) => kept,
        };
        self.0.map(|(v, _)| v)
    }
}

/// What one family's signals said in a period (for the caller's records).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Signal {
    /// Rows/s to plan for.
    pub load_qps: f64,
    /// Rows/s now, without the peak hold ([`PlannedLoad::current`]).
    pub rate_qps: f64,
    /// Consecutive periods the load has been stable.
    pub stable_periods: usize,
    /// The highest rate forecast over the next horizon, once the forecaster has seen one.
    pub forecast_max_qps: Option<f64>,
    /// One of its instances was Overloaded within the peak hold.
    pub overloaded_lately: bool,
    /// The tightest SLO and the highest minimum accuracy asked within the peak hold.
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
}

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct ModelLoop<K> {
    config: LoopConfig,
    families: BTreeMap<K, FamilySignals>,
    interference: InterferenceCounter,
    /// Per instance id: its state and since when (ms).
    states: ById<(InstanceState, f64)>,
}

impl<K: Ord + Clone> ModelLoop<K> {
    pub fn new(config: LoopConfig) -> Self {
        ModelLoop {
            config,
            families: BTreeMap::new(),
            interference: InterferenceCounter::default(),
            states: ById::default(),
        }
    }

    pub fn config(&self) -> &LoopConfig {
        &self.config
    }

    /// Feeds one period's arrivals of a family (the tightest SLO and highest minimum accuracy
    /// they asked for, and whether one of its instances is Overloaded, at `now_ms`) and
    /// returns what its signals say now.
    fn observe(
        &mut self,
        key: &K,
        rows_per_s: f64,
        (slo, min_accuracy): (Option<f64>, Option<f64>),
        overloaded: bool,
        now_ms: f64,
    ) -> Signal {
        let rate = if rows_per_s.is_finite() {
            rows_per_s.max(0.0)
        } else {
            0.0
        };
        let (hold, horizon, refit, forecast) = (
            self.config.hold_periods(),
            self.config.horizon_periods(),
            self.config.refit_periods(),
            self.config.forecast,
        );
        let f = self
            .families
            .entry(key.clone())
            .or_insert_with(|| FamilySignals {
                load: PlannedLoad::default(),
                stability: Stability::new(STABILITY_TOLERANCE),
                forecaster: forecast
                    .then(|| {
                        AutoForecaster::new(
                            FORECAST_INITIAL,
                            horizon,
                            FORECAST_HISTORY.max(4 * horizon),
                            refit,
                        )
                        .ok()
                    })
                    .flatten()
                    .map(|f| (f, 0)),
                overloaded_at_ms: None,
                slo_ms: Held::default(),
                min_accuracy: Held::default(),
            });
        if overloaded {
            f.overloaded_at_ms = Some(now_ms);
        }
        let hold_ms = self.config.period.scaling.peak_hold_ms;
        let overloaded_lately = f
            .overloaded_at_ms
            .is_some_and(|t| overloaded || now_ms - t < hold_ms);
        let load_qps = f.load.observe(rate, hold, self.config.second_periods());
        let forecast_max_qps = f.forecaster.as_mut().and_then(|(fc, seen)| {
            fc.update(rate);
            *seen += 1;
            (*seen >= horizon).then(|| fc.predict_max(horizon))
        });
        let forecast_error = f.forecaster.as_ref().and_then(|(fc, _)| fc.error());
        let load_qps =
            hold_within_forecast(load_qps, f.load.current(), forecast_max_qps, forecast_error);
        let stable_periods = f.stability.observe(load_qps);
        Signal {
            load_qps,
            rate_qps: f.load.current(),
            stable_periods,
            forecast_max_qps,
            overloaded_lately,
            slo_ms: f.slo_ms.observe(slo, now_ms, hold_ms, |a, b| a < b),
            min_accuracy: f
                .min_accuracy
                .observe(min_accuracy, now_ms, hold_ms, |a, b| a > b),
        }
    }

    /// Records every instance's state at `now_ms` and returns how long each has been in it.
    fn observe_states(&mut self, s: &Snapshot, now_ms: f64) -> Vec<f64> {
        let ages = s
            .instances()
            .iter()
            .map(|i| {
                let since = match self.states.get(&i.id) {
                    Some(&(state, since)) if state == i.state => since,
                    _ => now_ms,
                };
                self.states.set(&i.id, (i.state, since));
                (now_ms - since).max(0.0)
            })
            .collect();
        self.states.end_period();
        ages
    }

    /// One period: every instance's state into the ages and the interference count, every
    /// family's arrivals into its signals (families not in `families` are forgotten), then
    /// [`model_period`] on them with `planner`. The plan's family indices are into
    /// `families`.
    pub fn period(
        &mut self,
        input: &LoopInput,
        families: &[LiveFamily<K>],
        planner: Planner,
    ) -> LoopPeriod {
        self.families
            .retain(|k, _| families.iter().any(|f| &f.key == k));
        let ages_ms = self.observe_states(input.snapshot, input.now_ms);
        self.interference.observe_snapshot(input.snapshot);
        let s = input.snapshot;
        let signals: Vec<Signal> = families
            .iter()
            .map(|f| {
                // Overloaded below its profile (an instance Overloaded at its peak is only
                // full: the router fills the instances it prefers).
                let overloaded = f.loaded_for_queries
                    || f.instances.iter().any(|&i| {
                        s.instances().get(i).is_some_and(|i| {
                            i.state == InstanceState::Overloaded
                                && short_of_profile(
                                    i.state,
                                    i.qps,
                                    s.variants()[i.variant].peak_qps_within(f.slo_ms),
                                )
                        })
                    });
                self.observe(
                    &f.key,
                    f.rows_per_s,
                    (f.slo_ms, f.min_accuracy),
                    overloaded,
                    input.now_ms,
                )
            })
            .collect();
        let states: Vec<FamilyState> = families
            .iter()
            .zip(&signals)
            .map(|(f, s)| FamilyState {
                tenant: f.tenant,
                model: f.model,
                instances: f.instances.clone(),
                load_qps: s.load_qps,
                rate_qps: s.rate_qps,
                stable_periods: s.stable_periods,
                forecast_max_qps: s.forecast_max_qps,
                slo_ms: s.slo_ms,
                min_accuracy: s.min_accuracy,
                busy: f.busy,
                overloaded_lately: s.overloaded_lately,
            })
            .collect();
        let interfered = self.interference.periods_of(input.snapshot);
        let plan = model_period(
            &PeriodInput {
                snapshot: input.snapshot,
                families: &states,
                threads: input.threads,
                ages_ms: &ages_ms,
                releasable: input.releasable,
                interfered_periods: &interfered,
                prices: input.prices,
                config: self.config.period,
            },
            planner,
        );
        LoopPeriod {
            plan,
            signals,
            ages_ms,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::autoscale::{greedy, ScalingConfig};

    /// A period whose rows asked for no SLO and no minimum accuracy.
    const NO_ASKS: (Option<f64>, Option<f64>) = (None, None);

    /// The period input of `s` at `now_ms`, with the variants' threads and no releasable worker.
    fn at(s: &Snapshot, now_ms: f64) -> LoopInput<'_> {
        LoopInput {
            snapshot: s,
            threads: &[],
            releasable: &[],
            prices: Prices::default(),
            now_ms,
        }
    }

    /// Family `key` of tenant `t` with `instances`, `rows_per_s` arriving, asking for nothing.
    fn live(
        key: &'static str,
        instances: Vec<usize>,
        rows_per_s: f64,
    ) -> LiveFamily<'static, &'static str> {
        LiveFamily {
            key,
            tenant: "t",
            model: key,
            instances,
            rows_per_s,
            slo_ms: None,
            min_accuracy: None,
            busy: false,
            loaded_for_queries: false,
        }
    }

    fn config(forecast: bool) -> LoopConfig {
        config_holding(forecast, 3_000.0)
    }

    /// One-second periods and a peak hold of `peak_hold_ms`.
    fn config_holding(forecast: bool, peak_hold_ms: f64) -> LoopConfig {
        LoopConfig {
            period: PeriodConfig {
                scaling: ScalingConfig {
                    peak_hold_ms,
                    ..ScalingConfig::default()
                },
                ..PeriodConfig::default()
            },
            period_ms: 1_000.0,
            forecast,
        }
    }

    #[test]
    fn periods_follow_the_period_length() {
        let c = config(true);
        assert_eq!((c.hold_periods(), c.horizon_periods()), (3, 10));
        let half = LoopConfig {
            period_ms: 500.0,
            ..c
        };
        assert_eq!((half.hold_periods(), half.horizon_periods()), (6, 20));
    }

    #[test]
    fn a_family_holds_its_peak_counts_stable_periods_and_forecasts_after_a_horizon() {
        let mut l: ModelLoop<&str> = ModelLoop::new(config(true));
        let mut seen = Vec::new();
        for rate in [10.0, 100.0, 10.0, 10.0, 10.0, 10.0] {
            seen.push(l.observe(&"m", rate, NO_ASKS, false, 0.0));
        }
        // The peak of 100 is held for three periods (this one and the two before), then the
        // moving average of the falling rate is planned for.
        assert_eq!(seen[1].load_qps, 100.0);
        assert_eq!(seen[3].load_qps, 100.0);
        assert!(seen[4].load_qps < 100.0 && seen[4].load_qps > 10.0);
        assert_eq!(seen[0].stable_periods, 0);
        assert!(seen.iter().all(|s| s.forecast_max_qps.is_none()));
        // The horizon is ten periods: the seventh to ninth still give none, the tenth one.
        for _ in 6..9 {
            assert!(l
                .observe(&"m", 10.0, NO_ASKS, false, 0.0)
                .forecast_max_qps
                .is_none());
        }
        let tenth = l
            .observe(&"m", 10.0, NO_ASKS, false, 0.0)
            .forecast_max_qps
            .unwrap();
        assert!(tenth > 0.0 && tenth <= 100.0, "{tenth}");
        // Without forecasts, never one.
        let mut off: ModelLoop<&str> = ModelLoop::new(config(false));
        assert!((0..20).all(|_| off
            .observe(&"m", 10.0, NO_ASKS, false, 0.0)
            .forecast_max_qps
            .is_none()));
    }

    #[test]
    fn a_trusted_forecast_caps_the_held_peak_and_never_below_the_rate_now() {
        // Trusted (error 0.1): the held 900 counts up to 300 x (1 + 4 x 0.1) = 420.
        assert_eq!(
            hold_within_forecast(900.0, 200.0, Some(300.0), Some(0.1)),
            420.0
        );
        // Never below the rate now, never above the held load.
        assert_eq!(
            hold_within_forecast(900.0, 600.0, Some(300.0), Some(0.1)),
            600.0
        );
        assert_eq!(
            hold_within_forecast(400.0, 200.0, Some(300.0), Some(0.1)),
            400.0
        );
        // Untrusted (error at the bound), or no forecast or error yet: the hold stands.
        for (max, error) in [
            (Some(300.0), Some(FORECAST_TRUSTED_ERROR)),
            (Some(300.0), None),
            (None, Some(0.1)),
            (Some(f64::NAN), Some(0.1)),
        ] {
            assert_eq!(hold_within_forecast(900.0, 200.0, max, error), 900.0);
        }
    }

    /// The loop with a one-minute peak hold at one-second periods: a smooth diurnal load
    /// (400 +- 300 rows/s over five minutes) is planned near its declining rate once its
    /// forecaster is trusted, where without forecasts the hold keeps the minute's peak; a load
    /// of unannounced bursts keeps its hold with forecasts too.
    #[test]
    fn a_declining_load_its_forecaster_predicts_ends_its_hold_and_unforeseen_bursts_keep_it() {
        let config = |forecast| config_holding(forecast, 60_000.0);
        let diurnal =
            |t: usize| 400.0 + 300.0 * (2.0 * std::f64::consts::PI * t as f64 / 300.0).sin();
        let planned = |forecast: bool, rate: &dyn Fn(usize) -> f64, at: usize| {
            let mut l: ModelLoop<&str> = ModelLoop::new(config(forecast));
            let mut last = None;
            for t in 0..=at {
                last = Some(l.observe(&"m", rate(t), NO_ASKS, false, t as f64 * 1_000.0));
            }
            last.map_or(f64::NAN, |s| s.load_qps)
        };
        // Second 500 of the second cycle falls from the peak at 375 s (700 rows/s) to 160;
        // the minute's peak held is the rate at 441 s (the hold spans 441-500).
        let held = planned(false, &diurnal, 500);
        let forecast = planned(true, &diurnal, 500);
        assert!((held - diurnal(441)).abs() < 1.0, "{held}");
        assert!(
            forecast < 0.6 * held && forecast >= diurnal(500),
            "held {held}, with a trusted forecast {forecast}"
        );
        // Bursts at pseudo-random seconds (10x the base rate): the forecaster is not trusted
        // and the hold stands.
        let bursts = |t: usize| {
            let x = (t as u64).wrapping_mul(6_364_136_223_846_793_005) >> 59;
            if x < 3 {
                1_000.0
            } else {
                100.0
            }
        };
        let last_burst = (441..=500).filter(|&t| bursts(t) > 500.0).count();
        assert!(
            last_burst > 0,
            "the test needs a burst within the last minute"
        );
        assert_eq!(planned(true, &bursts, 500), planned(false, &bursts, 500));
    }

    #[test]
    fn a_family_overloaded_within_the_peak_hold_gives_nothing_back() {
        // The peak hold is 3 s here.
        let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
        assert!(!l.observe(&"m", 10.0, NO_ASKS, false, 0.0).overloaded_lately);
        assert!(
            l.observe(&"m", 10.0, NO_ASKS, true, 1_000.0)
                .overloaded_lately
        );
        assert!(
            l.observe(&"m", 10.0, NO_ASKS, false, 3_999.0)
                .overloaded_lately
        );
        assert!(
            !l.observe(&"m", 10.0, NO_ASKS, false, 4_000.0)
                .overloaded_lately
        );
        assert!(
            l.observe(&"m", 10.0, NO_ASKS, true, 5_000.0)
                .overloaded_lately
        );
    }

    /// A load the query path started (no live instance would have answered in time) is
    /// overload the state machine did not see: the family gives nothing back for the peak
    /// hold, so the replica the queries needed is not removed and loaded again.
    #[test]
    fn a_load_for_queries_holds_the_family_like_overload() {
        let s = Snapshot::builder().build();
        let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
        let fam = |loaded: bool| LiveFamily {
            loaded_for_queries: loaded,
            ..live("m", Vec::new(), 10.0)
        };
        let held = |l: &mut ModelLoop<&str>, now_ms: f64, loaded: bool| {
            l.period(&at(&s, now_ms), &[fam(loaded)], greedy).signals[0].overloaded_lately
        };
        assert!(!held(&mut l, 0.0, false));
        assert!(held(&mut l, 1_000.0, true));
        // Through the hold (3 s here), then released.
        assert!(held(&mut l, 3_999.0, false));
        assert!(!held(&mut l, 4_000.0, false));
    }

    /// A period without rows asks for nothing: the family keeps the tightest SLO and the
    /// highest minimum accuracy of the peak hold (3 s here), so its variants' capacity stays
    /// what they serve under that SLO.
    #[test]
    fn a_family_keeps_its_rows_requirements_through_the_peak_hold() {
        let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
        let asks = |l: &mut ModelLoop<&str>, asked, now_ms| {
            let s = l.observe(&"m", 10.0, asked, false, now_ms);
            (s.slo_ms, s.min_accuracy)
        };
        let strict = (Some(300.0), Some(0.8));
        assert_eq!(asks(&mut l, strict, 0.0), strict);
        assert_eq!(asks(&mut l, NO_ASKS, 1_000.0), strict);
        // Looser asks within the hold: the stricter ones still stand.
        assert_eq!(asks(&mut l, (Some(500.0), Some(0.5)), 2_000.0), strict);
        // Past the hold of the strict ones: what was asked since.
        let loose = (Some(500.0), Some(0.5));
        assert_eq!(asks(&mut l, loose, 3_000.0), loose);
        assert_eq!(asks(&mut l, NO_ASKS, 5_999.0), loose);
        assert_eq!(asks(&mut l, NO_ASKS, 6_000.0), NO_ASKS);
    }

    /// An instance Overloaded at its peak is full, not short of its profile (the router fills
    /// the instances it prefers): it does not hold its family. One Overloaded below its peak
    /// (queued or late) does.
    #[test]
    fn only_an_instance_overloaded_below_its_profile_holds_its_family() {
        use crate::autoscale::tests::{cpu_worker, var};
        use crate::snapshot::InstanceEntry;
        use infaas_core::HardwareKind;
        let held = |qps: f64| {
            let mut b = Snapshot::builder();
            let v = b
                .add_variant("t", var("m-cpu", HardwareKind::Cpu, 4, 100.0))
                .unwrap();
            let w = b.add_worker(cpu_worker("w", 8)).unwrap();
            let i = b
                .add_instance(InstanceEntry {
                    id: "i".into(),
                    variant: v,
                    worker: w,
                    state: InstanceState::Overloaded,
                    queue_len: 0,
                    qps,
                })
                .unwrap();
            let s = b.build();
            let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
            l.period(&at(&s, 0.0), &[live("m", vec![i], qps)], greedy)
                .signals[0]
                .overloaded_lately
        };
        assert!(!held(100.0), "Overloaded at its peak of 100 rows/s");
        assert!(held(50.0), "Overloaded at half its peak");
    }

    #[test]
    fn a_family_without_live_instances_is_forgotten() {
        let s = Snapshot::builder().build();
        let input = at(&s, 0.0);
        let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
        let fam = |key: &'static str, rate: f64| live(key, Vec::new(), rate);
        let sig = l
            .period(&input, &[fam("a", 100.0), fam("b", 5.0)], greedy)
            .signals;
        assert_eq!(sig[0].load_qps, 100.0);
        l.period(&input, &[fam("b", 5.0)], greedy);
        assert!(!l.families.contains_key("a"));
        // Back again: no memory of its peak.
        let sig = l
            .period(&input, &[fam("a", 1.0), fam("b", 5.0)], greedy)
            .signals;
        assert_eq!(sig[0].load_qps, 1.0);
        assert_eq!(sig[1].stable_periods, 2);
    }

    fn snapshot(states: &[(&str, InstanceState)]) -> Snapshot {
        use crate::snapshot::{InstanceEntry, VariantEntry, WorkerEntry};
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
                    hardware: infaas_core::HardwareKind::Cpu,
                    threads: 1,
                    max_batch: 1,
                    load_ms: 10.0,
                    memory_bytes: 1,
                    latency: vec![infaas_core::LatencyPoint {
                        batch: 1,
                        p50_ms: 1.0,
                        p99_ms: 1.0,
                        mean_ms: 1.0,
                        throughput_per_s: 1000.0,
                    }],
                },
            )
            .unwrap();
        b.add_worker(WorkerEntry {
            id: "w".into(),
            hardware: vec![infaas_core::HardwareKind::Cpu],
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
        let mut s = b.build();
        for (id, state) in states {
            let i = s
                .add_instance(InstanceEntry {
                    id: id.to_string(),
                    variant: v,
                    worker: 0,
                    state: InstanceState::Active,
                    queue_len: 0,
                    qps: 1.0,
                })
                .unwrap();
            s.set_instance_state(i, *state).unwrap();
        }
        s
    }

    #[test]
    fn state_ages_restart_on_a_change_and_interference_counts_periods_by_instance() {
        use InstanceState::*;
        let mut l: ModelLoop<&str> = ModelLoop::new(config(false));
        let mut seen_at = |s: &Snapshot, now_ms: f64| {
            let ages = l.period(&at(s, now_ms), &[], greedy).ages_ms;
            (ages, l.interference.periods_of(s))
        };
        let both = snapshot(&[("i", Active), ("j", Interfered)]);
        seen_at(&both, 0.0);
        assert_eq!(
            seen_at(&both, 2_000.0),
            (vec![2_000.0, 2_000.0], vec![0, 2])
        );
        let changed = snapshot(&[("i", Overloaded), ("j", Interfered)]);
        assert_eq!(
            seen_at(&changed, 5_000.0),
            (vec![0.0, 5_000.0], vec![0, 3]),
            "a new state starts a new age"
        );
        // "i" leaves: "j" is now first and keeps its age and count.
        let j = snapshot(&[("j", Interfered)]);
        assert_eq!(seen_at(&j, 6_000.0), (vec![6_000.0], vec![4]));
        // "i" is back: a new instance.
        let back = snapshot(&[("j", Interfered), ("i", Overloaded)]);
        assert_eq!(seen_at(&back, 7_000.0), (vec![7_000.0, 0.0], vec![5, 0]));
    }
}
