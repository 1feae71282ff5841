//! Forecasts of arrival rates on the controller (Themis §3.2, §5.1.3): per (tenant, target),
//! an [`AutoForecaster`] fed one rate per second, with the last [`ForecastConfig::window_s`]
//! seconds of observed rates and of the predictions made for them one and ten seconds ahead,
//! so that the error of each horizon can be measured and shown.
//!
//! A target is an application (fed by [`run`] from the recorded traffic: queries that arrived
//! per second) or anything a caller feeds through [`Forecasts::observe`] (a pipeline; its key
//! should not be a possible application name, e.g. `pipeline/NAME`). The model autoscaler keeps
//! a registry of its own for its families (models), fed with the rows that arrived per second.
//!
//! Memory per target: the forecaster's history and three rings of `window_s` points (about
//! 40 KB for the default ten minutes). An update is O(1) but for the forecaster's periodic
//! refit (a small grid search over its history, every [`ForecastConfig::refit_every`] s).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infaas_scheduler::forecast::{AutoForecaster, ForecastModel};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::traffic::TrafficRecorder;

/// Sizes and horizons of the forecasts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForecastConfig {
    /// Seconds ahead of the "long" forecast and of [`ForecastView::max_next_10s`] (Themis: 10).
    pub horizon_s: usize,
    /// Seconds of observations and predictions kept (and over which the errors are measured).
    pub window_s: usize,
    /// Rates the forecaster refits on.
    pub history: usize,
    /// Updates between refits.
    pub refit_every: usize,
    /// The model each target starts with.
    pub initial: ForecastModel,
}

impl Default for ForecastConfig {
    fn default() -> Self {
        ForecastConfig {
            horizon_s: 10,
            window_s: 600,
            history: 600,
            refit_every: 30,
            initial: ForecastModel::Ewma { alpha: 0.5 },
        }
    }
}

/// What [`Forecasts::view`] reports of one target. Rates are per second; seconds since the
/// Unix epoch; errors are fractions (0.058 is 5.8%).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ForecastView {
    /// The model in use (as [`ForecastModel`]'s `Display` writes it).
    pub model: String,
    /// Seconds ahead of `predicted_10s` and `max_next_10s`.
    pub horizon_s: usize,
    /// Observed rates, oldest first.
    pub observed: Vec<(i64, f64)>,
    /// The rate predicted for each second one second before it.
    pub predicted_1s: Vec<(i64, f64)>,
    /// The rate predicted for each second `horizon_s` seconds before it (including the
    /// seconds still to come).
    pub predicted_10s: Vec<(i64, f64)>,
    /// The highest rate forecast over the next `horizon_s` seconds.
    pub max_next_10s: f64,
    /// Mean absolute percentage error of `predicted_1s` against `observed` over the seconds
    /// both hold whose observed rate is not 0; `None` before there is one.
    pub mape_1s: Option<f64>,
    /// The same for `predicted_10s`.
    pub mape_10s: Option<f64>,
}

impl ForecastView {
    /// The view of a target nothing was observed for.
    pub fn empty(cfg: &ForecastConfig) -> ForecastView {
        ForecastView {
            model: cfg.initial.to_string(),
            horizon_s: cfg.horizon_s,
            observed: Vec::new(),
            predicted_1s: Vec::new(),
            predicted_10s: Vec::new(),
            max_next_10s: 0.0,
            mape_1s: None,
            mape_10s: None,
        }
    }
}

/// One target's forecaster and record.
struct Target {
    forecaster: AutoForecaster,
    /// Seconds fed so far.
    seen: usize,
    last_second: i64,
    observed: VecDeque<(i64, f64)>,
    predicted_1s: VecDeque<(i64, f64)>,
    /// Predictions `horizon_s` ahead, including those for seconds not observed yet.
    predicted_long: VecDeque<(i64, f64)>,
    /// Consecutive seconds at rate 0 (for [`Forecasts::prune_idle`]).
    idle_s: usize,
}

/// See the module documentation. Cheap to share: the lock is held for one update or one copy
/// of a target's record, never across an await.
pub struct Forecasts {
    cfg: ForecastConfig,
    targets: Mutex<HashMap<(String, String), Target>>,
}

/// Seconds of silence filled with zeros when a target's next rate comes late; a longer gap
/// is fed as one second.
const MAX_GAP_FILL: i64 = 60;

impl Default for Forecasts {
    fn default() -> Self {
        Forecasts::new(ForecastConfig::default())
    }
}

impl Forecasts {
    /// An empty registry. Horizons and sizes below their minimums are raised to them.
    pub fn new(cfg: ForecastConfig) -> Forecasts {
        let horizon_s = cfg.horizon_s.max(1);
        let cfg = ForecastConfig {
            horizon_s,
            window_s: cfg.window_s.max(horizon_s + 1),
            history: cfg
                .history
                .max(2 * infaas_scheduler::forecast::MIN_FIT + horizon_s),
            refit_every: cfg.refit_every.max(1),
            initial: if cfg.initial.validate().is_ok() {
                cfg.initial
            } else {
                ForecastConfig::default().initial
            },
        };
        Forecasts {
            cfg,
            targets: Mutex::new(HashMap::new()),
        }
    }

    /// The configuration in force.
    pub fn config(&self) -> &ForecastConfig {
        &self.cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), Target>> {
        self.targets.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Feeds `rate` (per second, non-negative; anything else counts as 0) observed in
    /// `second` (seconds since the Unix epoch) for `key` of `tenant`. A second at or before
    /// the last one fed is ignored; seconds skipped since then count as rate 0 (up to a
    /// minute of them).
    pub fn observe(&self, tenant: &str, key: &str, second: i64, rate: f64) {
        let rate = if rate.is_finite() { rate.max(0.0) } else { 0.0 };
        let mut targets = self.lock();
        let id = (tenant.to_string(), key.to_string());
        if !targets.contains_key(&id) {
            let Ok(forecaster) = AutoForecaster::new(
                self.cfg.initial,
                self.cfg.horizon_s,
                self.cfg.history,
                self.cfg.refit_every,
            ) else {
                return;
            };
            targets.insert(
                id.clone(),
                Target {
                    forecaster,
                    seen: 0,
                    last_second: second - 1,
                    observed: VecDeque::new(),
                    predicted_1s: VecDeque::new(),
                    predicted_long: VecDeque::new(),
                    idle_s: 0,
                },
            );
        }
        let Some(t) = targets.get_mut(&id) else {
            return;
        };
        if second <= t.last_second {
            return;
        }
        let gap = second - t.last_second - 1;
        if gap > MAX_GAP_FILL {
            t.last_second = second - 1;
        }
        while t.last_second + 1 < second {
            let s = t.last_second + 1;
            self.feed(t, s, 0.0);
        }
        self.feed(t, second, rate);
    }

    /// One second into a target: recorded, fed to the forecaster, predictions made for the
    /// seconds ahead; rings trimmed to the window.
    fn feed(&self, t: &mut Target, second: i64, rate: f64) {
        let h = self.cfg.horizon_s;
        t.observed.push_back((second, rate));
        t.forecaster.update(rate);
        t.seen += 1;
        t.last_second = second;
        t.idle_s = if rate > 0.0 { 0 } else { t.idle_s + 1 };
        t.predicted_1s
            .push_back((second + 1, t.forecaster.predict(1)));
        t.predicted_long
            .push_back((second + h as i64, t.forecaster.predict(h)));
        let oldest = second - self.cfg.window_s as i64;
        for ring in [&mut t.observed, &mut t.predicted_1s, &mut t.predicted_long] {
            while ring.front().is_some_and(|&(s, _)| s <= oldest) {
                ring.pop_front();
            }
        }
    }

    /// The record and forecast of `key` of `tenant`; `None` when nothing was observed for it.
    pub fn view(&self, tenant: &str, key: &str) -> Option<ForecastView> {
        let targets = self.lock();
        let t = targets.get(&(tenant.to_string(), key.to_string()))?;
        let observed: Vec<(i64, f64)> = t.observed.iter().copied().collect();
        let predicted_1s: Vec<(i64, f64)> = t.predicted_1s.iter().copied().collect();
        let predicted_10s: Vec<(i64, f64)> = t.predicted_long.iter().copied().collect();
        Some(ForecastView {
            model: t.forecaster.current().model().to_string(),
            horizon_s: self.cfg.horizon_s,
            mape_1s: mape(&observed, &predicted_1s),
            mape_10s: mape(&observed, &predicted_10s),
            max_next_10s: t.forecaster.predict_max(self.cfg.horizon_s),
            observed,
            predicted_1s,
            predicted_10s,
        })
    }

    /// The highest rate forecast over the next horizon for `key` of `tenant`, once its
    /// forecaster has seen at least a horizon of seconds (before that, `None`: too little to
    /// judge by).
    pub fn max_next(&self, tenant: &str, key: &str) -> Option<f64> {
        let targets = self.lock();
        let t = targets.get(&(tenant.to_string(), key.to_string()))?;
        (t.seen >= self.cfg.horizon_s).then(|| t.forecaster.predict_max(self.cfg.horizon_s))
    }

    /// The keys of `tenant` with a record, in name order.
    pub fn keys(&self, tenant: &str) -> Vec<String> {
        let mut keys: Vec<String> = self
            .lock()
            .keys()
            .filter(|(t, _)| t == tenant)
            .map(|(_, k)| k.clone())
            .collect();
        keys.sort();
        keys
    }

    /// Forgets `key` of `tenant`.
    pub fn remove(&self, tenant: &str, key: &str) {
        self.lock().remove(&(tenant.to_string(), key.to_string()));
    }

    /// Forgets the targets for which `keep` is false.
    pub fn retain(&self, mut keep: impl FnMut(&str, &str) -> bool) {
        self.lock().retain(|(t, k), _| keep(t, k));
    }

    /// Targets among `candidates` that have seen nothing but rate 0 for a whole window.
    fn idle(&self, candidates: &HashSet<(String, String)>) -> Vec<(String, String)> {
        let window = self.cfg.window_s;
        self.lock()
            .iter()
            .filter(|(id, t)| candidates.contains(*id) && t.idle_s >= window)
            .map(|(id, _)| id.clone())
            .collect()
    }
}

/// MAPE of `predicted` against `observed` (both in ascending seconds) over the seconds both
/// hold with an observed rate above 0.
fn mape(observed: &[(i64, f64)], predicted: &[(i64, f64)]) -> Option<f64> {
    let mut j = 0;
    let (mut sum, mut n) = (0.0, 0usize);
    for &(s, a) in observed {
        while j < predicted.len() && predicted[j].0 < s {
            j += 1;
        }
        if let Some(&(ps, p)) = predicted.get(j) {
            if ps == s && a > 0.0 {
                sum += (p - a).abs() / a;
                n += 1;
            }
        }
    }
    (n > 0).then(|| sum / n as f64)
}

/// Feeds `forecasts` once a second, until `shutdown`, with every application's arrivals
/// (queries per second) of the last complete second `settle_s` seconds ago from the recorded
/// traffic (the other replicas' arrivals come in that much later, [`crate::exchange`]); an
/// application without queries in a second is fed 0, and forgotten once it has had none for
/// a whole window.
pub async fn run(
    forecasts: Arc<Forecasts>,
    traffic: Arc<TrafficRecorder>,
    settle_s: i64,
    shutdown: CancellationToken,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    // The applications this loop feeds (pipelines are fed by their own code).
    let mut apps: HashSet<(String, String)> = HashSet::new();
    let mut last: Option<i64> = None;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        let second = infaas_core::time::now_ms().div_euclid(1000) - 1 - settle_s.max(0);
        // Every complete second since the last tick (a late tick catches up, up to a minute).
        let from = last.map_or(second, |l| (l + 1).max(second - MAX_GAP_FILL));
        for s in from..=second {
            let counts = traffic.counts_at(s);
            let mut fed: HashSet<(String, String)> = HashSet::new();
            for (tenant, app, count) in counts {
                forecasts.observe(&tenant, &app, s, f64::from(count));
                fed.insert((tenant.clone(), app.clone()));
                apps.insert((tenant, app));
            }
            for (tenant, app) in &apps {
                if !fed.contains(&(tenant.clone(), app.clone())) {
                    forecasts.observe(tenant, app, s, 0.0);
                }
            }
        }
        last = Some(second);
        for (tenant, app) in forecasts.idle(&apps) {
            forecasts.remove(&tenant, &app);
            apps.remove(&(tenant, app));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const T0: i64 = 1_700_000_000;

    #[test]
    fn records_observations_predictions_and_their_errors() {
        let f = Forecasts::new(ForecastConfig {
            window_s: 60,
            ..ForecastConfig::default()
        });
        assert!(f.view("t", "a").is_none());
        for s in 0..100 {
            f.observe("t", "a", T0 + s, 20.0);
        }
        let v = f.view("t", "a").unwrap();
        // The window: the last 60 seconds observed, predictions for them (and 10 s ahead).
        assert_eq!(v.observed.len(), 60);
        assert_eq!(v.observed.last(), Some(&(T0 + 99, 20.0)));
        assert_eq!(v.predicted_1s.last().unwrap().0, T0 + 100);
        assert_eq!(v.predicted_10s.last().unwrap().0, T0 + 109);
        // A constant rate is predicted exactly.
        assert!(
            v.mape_1s.unwrap() < 1e-9 && v.mape_10s.unwrap() < 1e-9,
            "{v:?}"
        );
        assert!((v.max_next_10s - 20.0).abs() < 1e-9);
        assert_eq!(f.max_next("t", "a"), Some(v.max_next_10s));
        // Another tenant's key is another target.
        assert!(f.view("u", "a").is_none());
        assert_eq!(f.keys("t"), ["a"]);
    }

    #[test]
    fn a_step_is_forecast_with_finite_errors_larger_further_ahead() {
        let f = Forecasts::default();
        for s in 0..60 {
            f.observe("t", "a", T0 + s, if s < 30 { 10.0 } else { 40.0 });
        }
        let v = f.view("t", "a").unwrap();
        let (m1, m10) = (v.mape_1s.unwrap(), v.mape_10s.unwrap());
        assert!(m1.is_finite() && m10.is_finite());
        assert!(m1 > 0.0 && m10 >= m1, "1 s: {m1}, 10 s: {m10}");
        assert!((v.max_next_10s - 40.0).abs() < 1.0, "{}", v.max_next_10s);
    }

    #[test]
    fn skipped_seconds_count_as_zero_and_late_seconds_are_ignored() {
        let f = Forecasts::default();
        f.observe("t", "a", T0, 5.0);
        f.observe("t", "a", T0 + 3, 5.0);
        f.observe("t", "a", T0 + 2, 7.0);
        let v = f.view("t", "a").unwrap();
        let rates: Vec<f64> = v.observed.iter().map(|o| o.1).collect();
        assert_eq!(rates, [5.0, 0.0, 0.0, 5.0]);
        // Not enough seen to judge by yet.
        assert_eq!(f.max_next("t", "a"), None);
        // Bad rates count as 0.
        f.observe("t", "a", T0 + 4, f64::NAN);
        assert_eq!(
            f.view("t", "a").unwrap().observed.last(),
            Some(&(T0 + 4, 0.0))
        );
        f.remove("t", "a");
        assert!(f.view("t", "a").is_none());
    }

    #[test]
    fn mape_pairs_seconds_and_skips_zero_rates() {
        let obs = [(1, 10.0), (2, 0.0), (3, 20.0)];
        let pred = [(2, 5.0), (3, 25.0), (4, 1.0)];
        assert_eq!(mape(&obs, &pred), Some(0.25));
        assert_eq!(mape(&obs, &[]), None);
    }
}
