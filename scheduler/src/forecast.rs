//! Load prediction: forecasters fed one arrival rate per interval that predict the rate `h`
//! intervals ahead (Themis §3.2, §5.1.3: the optimizer predicts the highest load of the next
//! ten seconds to decide when the load has settled enough to trade vertical for horizontal
//! scaling; Themis uses an LSTM with a 5.8% mean absolute percentage error).
//!
//! Here the models are the classic exponential-smoothing family, which needs no training run
//! and costs a few floating-point operations per interval:
//!
//! | model | prediction `h` ahead |
//! |---|---|
//! | [`ForecastModel::LastValue`] | the last rate |
//! | [`ForecastModel::MovingAverage`] | the mean of the last `window` rates |
//! | [`ForecastModel::Ewma`] | the exponentially weighted mean `l = a x + (1 - a) l` |
//! | [`ForecastModel::HoltLinear`] | level and trend: `l + h b` |
//! | [`ForecastModel::HoltWinters`] | level, trend and an additive season: `l + h b + s[t + h]` |
//!
//! A [`Forecaster`] holds one model's state in buffers allocated once (the moving average's
//! window, the season's components): [`Forecaster::update`] and [`Forecaster::predict`] are
//! O(1) and allocate nothing. [`forecast_errors`] replays a series through a model and measures
//! its errors; [`pick_best`] fits a model and its smoothing weights by a small grid search on
//! the first half of a series and reports its error on the second half, which it did not see.
//! [`AutoForecaster`] re-runs that search now and then over the history it keeps, for a
//! platform that cannot know in advance which model suits its load.
//!
//! All rates are non-negative: predictions are clamped at 0.

use std::fmt;

/// A forecasting model and its parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ForecastModel {
    /// The naive forecast: the last observed rate.
    LastValue,
    /// The mean of the last `window` rates.
    MovingAverage {
        /// Rates averaged (at least 1).
        window: usize,
    },
    /// Exponentially weighted moving average with weight `alpha` on the newest rate.
    Ewma {
        /// In (0, 1].
        alpha: f64,
    },
    /// Holt's linear trend: level weight `alpha`, trend weight `beta`.
    HoltLinear {
        /// In (0, 1].
        alpha: f64,
        /// In [0, 1].
        beta: f64,
    },
    /// Holt-Winters with an additive season of `season` intervals: level, trend and season
    /// weights `alpha`, `beta`, `gamma`.
    HoltWinters {
        /// In (0, 1].
        alpha: f64,
        /// In [0, 1].
        beta: f64,
        /// In [0, 1].
        gamma: f64,
        /// Intervals in one season (at least 2).
        season: usize,
    },
}

impl fmt::Display for ForecastModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ForecastModel::LastValue => write!(f, "last-value"),
            ForecastModel::MovingAverage { window } => write!(f, "moving-average(w={window})"),
            ForecastModel::Ewma { alpha } => write!(f, "ewma(a={alpha})"),
            ForecastModel::HoltLinear { alpha, beta } => write!(f, "holt(a={alpha},b={beta})"),
            ForecastModel::HoltWinters {
                alpha,
                beta,
                gamma,
                season,
            } => write!(
                f,
                "holt-winters(a={alpha},b={beta},g={gamma},season={season})"
            ),
        }
    }
}

/// Why a forecast could not be made or measured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ForecastError {
    /// A parameter out of its range.
    #[error("{model}: {problem}")]
    InvalidModel {
        /// The model as [`ForecastModel`]'s `Display` writes it.
        model: String,
        /// What is wrong.
        problem: &'static str,
    },
    /// A horizon of 0 intervals.
    #[error("the horizon must be at least one interval")]
    ZeroHorizon,
    /// Too few values to measure anything.
    #[error("a series of {len} values is too short: at least {need} are needed")]
    TooShort {
        /// Values given.
        len: usize,
        /// Values needed.
        need: usize,
    },
    /// A rate that is negative, infinite or NaN.
    #[error("value {index} of the series ({value}) is not a finite non-negative rate")]
    InvalidValue {
        /// Its index.
        index: usize,
        /// The value.
        value: f64,
    },
}

impl ForecastModel {
    /// Checks the parameters' ranges.
    pub fn validate(&self) -> Result<(), ForecastError> {
        let bad = |problem| {
            Err(ForecastError::InvalidModel {
                model: self.to_string(),
                problem,
            })
        };
        let weight = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        let level = |x: f64| weight(x) && x > 0.0;
        match *self {
            ForecastModel::LastValue => Ok(()),
            ForecastModel::MovingAverage { window: 0 } => {
                bad("the window must hold at least one rate")
            }
            ForecastModel::MovingAverage { .. } => Ok(()),
            ForecastModel::Ewma { alpha } if !level(alpha) => bad("alpha must be in (0, 1]"),
            ForecastModel::Ewma { .. } => Ok(()),
            ForecastModel::HoltLinear { alpha, beta } if !level(alpha) || !weight(beta) => {
                bad("alpha must be in (0, 1] and beta in [0, 1]")
            }
            ForecastModel::HoltLinear { .. } => Ok(()),
            ForecastModel::HoltWinters {
                alpha,
                beta,
                gamma,
                season,
            } => {
                if !level(alpha) || !weight(beta) || !weight(gamma) {
                    bad("alpha must be in (0, 1], beta and gamma in [0, 1]")
                } else if season < 2 {
                    bad("a season spans at least two intervals")
                } else {
                    Ok(())
                }
            }
        }
    }

    /// Observations the model needs before its state is fully formed (its window, or one
    /// season; two for a trend).
    pub fn warmup(&self) -> usize {
        match *self {
            ForecastModel::LastValue | ForecastModel::Ewma { .. } => 1,
            ForecastModel::MovingAverage { window } => window,
            ForecastModel::HoltLinear { .. } => 2,
            ForecastModel::HoltWinters { season, .. } => season + 1,
        }
    }
}

/// One model's state, fed one rate per interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Forecaster {
    model: ForecastModel,
    /// Observations so far.
    seen: u64,
    last: f64,
    level: f64,
    trend: f64,
    /// The moving average's window or the season's components (Holt-Winters: the first
    /// season's rates until it is complete).
    ring: Vec<f64>,
    /// Where the next observation goes in `ring` (observations so far modulo its length),
    /// kept so that an update divides nothing.
    slot: usize,
    /// Sum of the moving average's window.
    sum: f64,
}

impl Forecaster {
    /// A forecaster of `model` that has seen nothing (it predicts 0 until fed).
    pub fn new(model: ForecastModel) -> Result<Forecaster, ForecastError> {
        model.validate()?;
        let ring = match model {
            ForecastModel::MovingAverage { window } => vec![0.0; window],
            ForecastModel::HoltWinters { season, .. } => vec![0.0; season],
            _ => Vec::new(),
        };
        Ok(Forecaster {
            model,
            seen: 0,
            last: 0.0,
            level: 0.0,
            trend: 0.0,
            ring,
            slot: 0,
            sum: 0.0,
        })
    }

    /// The model.
    pub fn model(&self) -> ForecastModel {
        self.model
    }

    /// Observations fed so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// Feeds the rate of the interval that just ended. Non-finite values are ignored and
    /// negative ones count as 0. O(1).
    pub fn update(&mut self, rate: f64) {
        if !rate.is_finite() {
            return;
        }
        let x = rate.max(0.0);
        let t = self.seen;
        match self.model {
            ForecastModel::LastValue => {}
            ForecastModel::MovingAverage { window } => {
                let slot = self.slot;
                self.sum += x - self.ring[slot];
                self.ring[slot] = x;
                // Re-add the window now and then so rounding cannot drift.
                if slot == window - 1 {
                    self.sum = self.ring.iter().sum();
                }
            }
            ForecastModel::Ewma { alpha } => {
                self.level = if t == 0 {
                    x
                } else {
                    alpha * x + (1.0 - alpha) * self.level
                };
            }
            ForecastModel::HoltLinear { alpha, beta } => {
                if t == 0 {
                    self.level = x;
                    self.trend = 0.0;
                } else if t == 1 {
                    self.trend = x - self.level;
                    self.level = x;
                } else {
                    let prev = self.level;
                    self.level = alpha * x + (1.0 - alpha) * (self.level + self.trend);
                    self.trend = beta * (self.level - prev) + (1.0 - beta) * self.trend;
                }
            }
            ForecastModel::HoltWinters {
                alpha,
                beta,
                gamma,
                season,
            } => {
                let slot = self.slot;
                if t < season as u64 {
                    // The first season: kept as it is, then turned into the initial state.
                    self.ring[slot] = x;
                    self.sum += x;
                    if slot == season - 1 {
                        let mean = self.sum / season as f64;
                        self.level = mean;
                        self.trend = 0.0;
                        for s in &mut self.ring {
                            *s -= mean;
                        }
                    }
                } else {
                    let prev = self.level;
                    let s = self.ring[slot];
                    self.level = alpha * (x - s) + (1.0 - alpha) * (self.level + self.trend);
                    self.trend = beta * (self.level - prev) + (1.0 - beta) * self.trend;
                    self.ring[slot] = gamma * (x - self.level) + (1.0 - gamma) * s;
                }
            }
        }
        self.last = x;
        self.seen += 1;
        if !self.ring.is_empty() {
            self.slot += 1;
            if self.slot == self.ring.len() {
                self.slot = 0;
            }
        }
    }

    /// The rate predicted `h` intervals after the last one fed (`h` 0 counts as 1). O(1).
    pub fn predict(&self, h: usize) -> f64 {
        let h = h.max(1);
        if self.seen == 0 {
            return 0.0;
        }
        let p = match self.model {
            ForecastModel::LastValue => self.last,
            ForecastModel::MovingAverage { window } => {
                self.sum / (self.seen.min(window as u64)) as f64
            }
            ForecastModel::Ewma { .. } => self.level,
            ForecastModel::HoltLinear { .. } => self.level + h as f64 * self.trend,
            ForecastModel::HoltWinters { season, .. } => {
                if self.seen < season as u64 {
                    // Not a whole season yet: the mean so far.
                    self.sum / self.seen as f64
                } else {
                    // `self.slot` is `seen % season`: the slot of the last observation + h.
                    let mut slot = self.slot + season - 1 + h % season;
                    while slot >= season {
                        slot -= season;
                    }
                    self.level + h as f64 * self.trend + self.ring[slot]
                }
            }
        };
        p.max(0.0)
    }

    /// The highest rate predicted over the next `horizon` intervals (Themis' "highest load in
    /// the next window"). O(horizon).
    pub fn predict_max(&self, horizon: usize) -> f64 {
        (1..=horizon.max(1))
            .map(|h| self.predict(h))
            .fold(0.0, f64::max)
    }

    /// The rates predicted for the next `out.len()` intervals, into `out`. O(`out.len()`).
    pub fn predict_path(&self, out: &mut [f64]) {
        for (h, o) in out.iter_mut().enumerate() {
            *o = self.predict(h + 1);
        }
    }
}

/// Errors of forecasts over a series. Percentages are fractions (0.058 is 5.8%).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ErrorReport {
    /// Forecasts measured.
    pub n: usize,
    /// Mean absolute percentage error, over the forecasts whose actual rate is not 0.
    pub mape: f64,
    /// Symmetric MAPE: `2 |f - a| / (|f| + |a|)`, 0 when both are 0.
    pub smape: f64,
    /// Root mean squared error, in the series' unit.
    pub rmse: f64,
    /// Mean absolute error, in the series' unit.
    pub mae: f64,
}

impl fmt::Display for ErrorReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "MAPE {:.1}%, sMAPE {:.1}%, RMSE {:.2}, MAE {:.2} over {} forecasts",
            self.mape * 100.0,
            self.smape * 100.0,
            self.rmse,
            self.mae,
            self.n
        )
    }
}

fn check_series(series: &[f64]) -> Result<(), ForecastError> {
    match series
        .iter()
        .enumerate()
        .find(|(_, x)| !(x.is_finite() && **x >= 0.0))
    {
        Some((index, &value)) => Err(ForecastError::InvalidValue { index, value }),
        None => Ok(()),
    }
}

/// Errors of `model`'s forecasts `horizon` intervals ahead over `series`: every value from
/// the one predicted once the model had seen [`ForecastModel::warmup`] values.
pub fn forecast_errors(
    series: &[f64],
    model: ForecastModel,
    horizon: usize,
) -> Result<ErrorReport, ForecastError> {
    forecast_errors_from(series, model, horizon, model.warmup())
}

/// Errors of `model`'s forecasts `horizon` intervals ahead of the values `series[start..]`
/// (the model runs over the whole series; a value counts once the model had seen at least its
/// [`ForecastModel::warmup`] values when predicting it). O(`series.len()`), one allocation of
/// `horizon` values.
pub fn forecast_errors_from(
    series: &[f64],
    model: ForecastModel,
    horizon: usize,
    start: usize,
) -> Result<ErrorReport, ForecastError> {
    errors_within(series, model, horizon, start, f64::INFINITY)
        .map(|e| e.map_or_else(ErrorReport::default, |(report, _)| report))
}

/// [`forecast_errors_from`], given up (`Ok(None)`) as soon as the sum of the absolute
/// percentage errors exceeds `ape_bound`: a search comparing models by MAPE over the same
/// values (the same count) stops a model once it cannot beat the best so far. With the
/// report, that sum.
fn errors_within(
    series: &[f64],
    model: ForecastModel,
    horizon: usize,
    start: usize,
    ape_bound: f64,
) -> Result<Option<(ErrorReport, f64)>, ForecastError> {
    if horizon == 0 {
        return Err(ForecastError::ZeroHorizon);
    }
    check_series(series)?;
    let mut f = Forecaster::new(model)?;
    // The prediction made `horizon` intervals before each value, in a ring.
    let mut pending = vec![f64::NAN; horizon];
    let first = start.max(model.warmup() + horizon - 1);
    let (mut n, mut n_pct) = (0usize, 0usize);
    let (mut ape, mut sape, mut se, mut ae) = (0.0, 0.0, 0.0, 0.0);
    let mut slot = 0; // t % horizon
    for (t, &x) in series.iter().enumerate() {
        let p = pending[slot];
        if t >= first && p.is_finite() {
            let e = (p - x).abs();
            n += 1;
            ae += e;
            se += e * e;
            if x > 0.0 {
                n_pct += 1;
                ape += e / x;
                if ape > ape_bound {
                    return Ok(None);
                }
            }
            if p + x > 0.0 {
                sape += 2.0 * e / (p + x);
            }
        }
        f.update(x);
        pending[slot] = f.predict(horizon);
        slot += 1;
        if slot == horizon {
            slot = 0;
        }
    }
    if n == 0 {
        return Err(ForecastError::TooShort {
            len: series.len(),
            need: first + 1,
        });
    }
    let report = ErrorReport {
        n,
        mape: if n_pct > 0 { ape / n_pct as f64 } else { 0.0 },
        smape: sape / n as f64,
        rmse: (se / n as f64).sqrt(),
        mae: ae / n as f64,
    };
    Ok(Some((report, ape)))
}

/// The periods (in intervals) whose autocorrelation of the series' first differences is
/// highest, at least `min_corr` and a local peak, best first; at most `k`, each at most a
/// third of the series long (so at least three seasons are seen). Differencing removes the
/// trend that would otherwise make every short lag look periodic.
pub fn candidate_seasons(series: &[f64], k: usize, min_corr: f64) -> Vec<usize> {
    if series.len() < 8 || k == 0 {
        return Vec::new();
    }
    let d: Vec<f64> = series.windows(2).map(|w| w[1] - w[0]).collect();
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let var: f64 = d.iter().map(|x| (x - mean) * (x - mean)).sum();
    if var <= 0.0 {
        return Vec::new();
    }
    let max_lag = series.len() / 3;
    let acf: Vec<f64> = (0..=max_lag + 1)
        .map(|lag| {
            if lag >= d.len() {
                return 0.0;
            }
            d.iter()
                .zip(&d[lag..])
                .map(|(a, b)| (a - mean) * (b - mean))
                .sum::<f64>()
                / var
        })
        .collect();
    let mut peaks: Vec<(usize, f64)> = (2..=max_lag)
        .filter(|&l| acf[l] >= min_corr && acf[l] >= acf[l - 1] && acf[l] >= acf[l + 1])
        .map(|l| (l, acf[l]))
        .collect();
    peaks.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    peaks.into_iter().take(k).map(|(l, _)| l).collect()
}

/// The candidate models [`pick_best`] searches: the naive forecast, moving averages,
/// EWMAs and Holt over small grids of their weights, and Holt-Winters for each season in
/// `seasons`.
pub fn candidate_models(seasons: &[usize]) -> Vec<ForecastModel> {
    let mut out = vec![ForecastModel::LastValue];
    for window in [2, 3, 5, 10, 20] {
        out.push(ForecastModel::MovingAverage { window });
    }
    for alpha in [0.1, 0.2, 0.3, 0.5, 0.7, 0.9] {
        out.push(ForecastModel::Ewma { alpha });
    }
    for alpha in [0.1, 0.3, 0.5, 0.8] {
        for beta in [0.01, 0.05, 0.2] {
            out.push(ForecastModel::HoltLinear { alpha, beta });
        }
    }
    for &season in seasons {
        for alpha in [0.1, 0.3, 0.5, 0.8] {
            for beta in [0.0, 0.05] {
                for gamma in [0.1, 0.3, 0.6, 0.9] {
                    out.push(ForecastModel::HoltWinters {
                        alpha,
                        beta,
                        gamma,
                        season,
                    });
                }
            }
        }
    }
    out
}

/// A model chosen by [`pick_best`], with its error on the values it was fitted on and on
/// the values it was not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Selection {
    /// The chosen model.
    pub model: ForecastModel,
    /// Where the fitting prefix ends (the held-out values are `series[split..]`).
    pub split: usize,
    /// Its errors on the prefix (what it was chosen by).
    pub fit: ErrorReport,
    /// Its errors on the rest, which the search did not see (the model runs on through the
    /// prefix, as it would online).
    pub holdout: ErrorReport,
}

/// Fewest values [`pick_best`] fits on.
pub const MIN_FIT: usize = 16;

/// Fits a model to `series` for forecasts `horizon` intervals ahead: a grid search over
/// [`candidate_models`] (seasons from [`candidate_seasons`] of the prefix) for the lowest
/// MAPE on the first half (`series[..split]`, `split = len / 2`), then measured on the second
/// half. Ties go to the earlier (simpler) candidate.
pub fn pick_best(series: &[f64], horizon: usize) -> Result<Selection, ForecastError> {
    pick_best_split(series, horizon, series.len() / 2)
}

/// [`pick_best`] with the fitting prefix `series[..split]`.
pub fn pick_best_split(
    series: &[f64],
    horizon: usize,
    split: usize,
) -> Result<Selection, ForecastError> {
    if horizon == 0 {
        return Err(ForecastError::ZeroHorizon);
    }
    check_series(series)?;
    let split = split.min(series.len());
    if split < MIN_FIT || split + horizon > series.len() {
        return Err(ForecastError::TooShort {
            len: series.len(),
            need: (MIN_FIT.max(split) + horizon).max(2 * MIN_FIT),
        });
    }
    let prefix = &series[..split];
    let seasons = candidate_seasons(prefix, 2, 0.2);
    let models = candidate_models(&seasons);
    // Every candidate is scored on the same values: those after the longest warm-up, but
    // no later than the last quarter of the prefix.
    let longest = models.iter().map(|m| m.warmup()).max().unwrap_or(1);
    let start = (longest + horizon - 1).min(split - split / 4);
    // Every candidate's MAPE divides by the same count, so one whose sum of percentage
    // errors passes the best's sum cannot win (ties keep the earlier): it is stopped there.
    let mut best: Option<(ForecastModel, ErrorReport, f64)> = None;
    for m in models {
        let bound = best.map_or(f64::INFINITY, |(_, _, ape)| ape);
        let Ok(Some((e, ape))) = errors_within(prefix, m, horizon, start, bound) else {
            continue;
        };
        if best.is_none_or(|(_, b, _)| e.mape < b.mape) {
            best = Some((m, e, ape));
        }
    }
    let best = best.map(|(m, e, _)| (m, e));
    let (model, fit) = best.ok_or(ForecastError::TooShort {
        len: series.len(),
        need: 2 * MIN_FIT,
    })?;
    let holdout = forecast_errors_from(series, model, horizon, split)?;
    Ok(Selection {
        model,
        split,
        fit,
        holdout,
    })
}

/// A forecaster that chooses its own model: it starts as `initial`, keeps the last
/// `history` rates in a ring and every `refit_every` updates (once it has at least
/// [`2 * MIN_FIT`](MIN_FIT) of them) re-runs [`pick_best`]'s search over them, replaying the
/// kept rates through the new model. An update is O(1) except on a refit, which costs the
/// search over the history (about 10^5 operations for 300 rates).
#[derive(Debug, Clone)]
pub struct AutoForecaster {
    current: Forecaster,
    horizon: usize,
    refit_every: usize,
    ring: Vec<f64>,
    seen: usize,
    since_refit: usize,
    scratch: Vec<f64>,
    /// The model in use's MAPE on the newest quarter of the history at the last refit.
    error: Option<f64>,
}

impl AutoForecaster {
    /// Starts with `initial`, fits for forecasts `horizon` ahead on the last `history` rates
    /// every `refit_every` updates.
    pub fn new(
        initial: ForecastModel,
        horizon: usize,
        history: usize,
        refit_every: usize,
    ) -> Result<AutoForecaster, ForecastError> {
        if horizon == 0 {
            return Err(ForecastError::ZeroHorizon);
        }
        if history < 2 * MIN_FIT {
            return Err(ForecastError::TooShort {
                len: history,
                need: 2 * MIN_FIT,
            });
        }
        Ok(AutoForecaster {
            current: Forecaster::new(initial)?,
            horizon,
            refit_every: refit_every.max(1),
            ring: vec![0.0; history],
            seen: 0,
            since_refit: 0,
            scratch: Vec::with_capacity(history),
            error: None,
        })
    }

    /// The forecaster in use.
    pub fn current(&self) -> &Forecaster {
        &self.current
    }

    /// Feeds one rate (as [`Forecaster::update`]); refits when due.
    pub fn update(&mut self, rate: f64) {
        if !rate.is_finite() {
            return;
        }
        let x = rate.max(0.0);
        let cap = self.ring.len();
        self.ring[self.seen % cap] = x;
        self.seen += 1;
        self.current.update(x);
        self.since_refit += 1;
        if self.since_refit >= self.refit_every && self.seen >= 2 * MIN_FIT {
            self.since_refit = 0;
            self.refit();
        }
    }

    fn refit(&mut self) {
        let cap = self.ring.len();
        let kept = self.seen.min(cap);
        self.scratch.clear();
        for i in self.seen - kept..self.seen {
            self.scratch.push(self.ring[i % cap]);
        }
        // Fit on the older three quarters, keep the model only if it also does well on the
        // newest quarter against the one in use.
        let split = kept - kept / 4;
        let Ok(sel) = pick_best_split(&self.scratch, self.horizon, split) else {
            return;
        };
        let incumbent =
            forecast_errors_from(&self.scratch, self.current.model(), self.horizon, split);
        if let Some(inc) = incumbent.ok().filter(|inc| inc.mape <= sel.holdout.mape) {
            self.error = Some(inc.mape);
            return;
        }
        self.error = Some(sel.holdout.mape);
        let Ok(mut f) = Forecaster::new(sel.model) else {
            return;
        };
        for &x in &self.scratch {
            f.update(x);
        }
        self.current = f;
    }

    /// As [`Forecaster::predict`].
    pub fn predict(&self, h: usize) -> f64 {
        self.current.predict(h)
    }

    /// The mean absolute percentage error of the model in use, `horizon` ahead, on the newest
    /// quarter of the history at the last refit (a fraction; `None` before the first refit).
    pub fn error(&self) -> Option<f64> {
        self.error
    }

    /// As [`Forecaster::predict_max`].
    pub fn predict_max(&self, horizon: usize) -> f64 {
        self.current.predict_max(horizon)
    }

    /// As [`Forecaster::predict_path`].
    pub fn predict_path(&self, out: &mut [f64]) {
        self.current.predict_path(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mape(series: &[f64], m: ForecastModel, h: usize, start: usize) -> f64 {
        forecast_errors_from(series, m, h, start).unwrap().mape
    }

    /// A deterministic pseudo-random noise in [-1, 1).
    fn noise(i: usize) -> f64 {
        let x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let x = (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
    }

    #[test]
    fn errors_are_zero_on_a_constant_series() {
        let s = vec![250.0; 120];
        for m in candidate_models(&[12]) {
            let e = forecast_errors(&s, m, 5).unwrap();
            assert!(
                e.mape < 1e-12 && e.rmse < 1e-9 && e.mae < 1e-9 && e.smape < 1e-12,
                "{m}: {e}"
            );
            assert!(e.n > 90, "{m}: {e}");
        }
    }

    #[test]
    fn holt_beats_the_moving_average_on_a_ramp() {
        // 100 rows/s rising by 5 each interval, with +-2% noise.
        let s: Vec<f64> = (0..200)
            .map(|i| (100.0 + 5.0 * i as f64) * (1.0 + 0.02 * noise(i)))
            .collect();
        let holt = ForecastModel::HoltLinear {
            alpha: 0.5,
            beta: 0.1,
        };
        let ma = ForecastModel::MovingAverage { window: 5 };
        for h in [1, 5, 10] {
            let (eh, em) = (mape(&s, holt, h, 20), mape(&s, ma, h, 20));
            // The moving average lags a ramp by (window - 1) / 2 + h intervals.
            assert!(eh < 0.5 * em, "h={h}: holt {eh} vs moving average {em}");
        }
        // The trend is what it learns: 10 ahead of the last rate is about 50 more.
        let mut f = Forecaster::new(holt).unwrap();
        for &x in &s {
            f.update(x);
        }
        let gain = f.predict(10) - f.predict(0);
        assert!((gain - 45.0).abs() < 10.0, "{gain}");
    }

    #[test]
    fn holt_winters_beats_holt_on_a_seasonal_series() {
        // Twitter-like: a level of 300 rows/s with a spike of +600 every 12 intervals and a
        // smaller bump after it, with +-5% noise.
        let s: Vec<f64> = (0..240)
            .map(|i| {
                let season = match i % 12 {
                    0 => 600.0,
                    1 => 150.0,
                    _ => 0.0,
                };
                (300.0 + season) * (1.0 + 0.05 * noise(i))
            })
            .collect();
        let hw = ForecastModel::HoltWinters {
            alpha: 0.3,
            beta: 0.0,
            gamma: 0.5,
            season: 12,
        };
        let holt = ForecastModel::HoltLinear {
            alpha: 0.5,
            beta: 0.1,
        };
        for h in [1, 5, 10] {
            let (ew, eh) = (mape(&s, hw, h, 48), mape(&s, holt, h, 48));
            assert!(ew < 0.1, "h={h}: holt-winters {ew}");
            assert!(ew < 0.3 * eh, "h={h}: holt-winters {ew} vs holt {eh}");
        }
        // The season is found from the data.
        assert_eq!(candidate_seasons(&s[..120], 2, 0.2).first(), Some(&12));
    }

    #[test]
    fn predictions_follow_each_model() {
        let mut last = Forecaster::new(ForecastModel::LastValue).unwrap();
        let mut ma = Forecaster::new(ForecastModel::MovingAverage { window: 3 }).unwrap();
        let mut ew = Forecaster::new(ForecastModel::Ewma { alpha: 0.5 }).unwrap();
        assert_eq!(
            (last.predict(1), ma.predict(1), ew.predict(1)),
            (0.0, 0.0, 0.0)
        );
        for x in [10.0, 20.0, 30.0, 40.0] {
            last.update(x);
            ma.update(x);
            ew.update(x);
        }
        assert_eq!(last.predict(7), 40.0);
        assert_eq!(ma.predict(1), 30.0);
        // 10 -> 15 -> 22.5 -> 31.25
        assert_eq!(ew.predict(3), 31.25);
        assert_eq!(ew.predict_max(4), 31.25);
        // Holt on an exact line extrapolates it.
        let mut h = Forecaster::new(ForecastModel::HoltLinear {
            alpha: 0.5,
            beta: 0.5,
        })
        .unwrap();
        for i in 0..10 {
            h.update(100.0 + 10.0 * i as f64);
        }
        assert!((h.predict(3) - 220.0).abs() < 1e-9, "{}", h.predict(3));
        let mut path = [0.0; 3];
        h.predict_path(&mut path);
        assert!((path[0] - 200.0).abs() < 1e-9 && (path[2] - 220.0).abs() < 1e-9);
        // A falling line is clamped at 0.
        let mut down = Forecaster::new(ForecastModel::HoltLinear {
            alpha: 1.0,
            beta: 1.0,
        })
        .unwrap();
        down.update(20.0);
        down.update(10.0);
        assert_eq!(down.predict(5), 0.0);
    }

    #[test]
    fn invalid_models_and_series_are_refused() {
        assert!(Forecaster::new(ForecastModel::Ewma { alpha: 0.0 }).is_err());
        assert!(Forecaster::new(ForecastModel::MovingAverage { window: 0 }).is_err());
        assert!(Forecaster::new(ForecastModel::HoltWinters {
            alpha: 0.5,
            beta: 0.1,
            gamma: 1.5,
            season: 12
        })
        .is_err());
        assert!(Forecaster::new(ForecastModel::HoltWinters {
            alpha: 0.5,
            beta: 0.1,
            gamma: 0.5,
            season: 1
        })
        .is_err());
        let s = [1.0, 2.0, f64::NAN, 3.0];
        assert!(matches!(
            forecast_errors(&s, ForecastModel::LastValue, 1),
            Err(ForecastError::InvalidValue { index: 2, .. })
        ));
        assert_eq!(
            forecast_errors(&[1.0, 2.0], ForecastModel::LastValue, 0),
            Err(ForecastError::ZeroHorizon)
        );
        assert!(matches!(
            forecast_errors(&[1.0, 2.0], ForecastModel::LastValue, 5),
            Err(ForecastError::TooShort { .. })
        ));
        assert!(matches!(
            pick_best(&[1.0; 10], 1),
            Err(ForecastError::TooShort { .. })
        ));
    }

    #[test]
    fn pick_best_finds_the_season_and_is_measured_on_unseen_values() {
        let s: Vec<f64> = (0..288)
            .map(|i| {
                let season = if i % 12 == 0 { 500.0 } else { 0.0 };
                (400.0 + season) * (1.0 + 0.03 * noise(i + 7))
            })
            .collect();
        let sel = pick_best(&s, 1).unwrap();
        assert!(
            matches!(sel.model, ForecastModel::HoltWinters { season: 12, .. }),
            "{}",
            sel.model
        );
        assert_eq!(sel.split, 144);
        assert_eq!(sel.holdout.n, 144);
        let naive = forecast_errors_from(&s, ForecastModel::LastValue, 1, 144).unwrap();
        assert!(sel.holdout.mape < 0.5 * naive.mape, "{sel:?} vs {naive}");
    }

    #[test]
    fn the_auto_forecaster_switches_to_a_seasonal_model() {
        let mut f = AutoForecaster::new(ForecastModel::LastValue, 1, 120, 24).unwrap();
        let rate = |i: usize| if i % 10 == 3 { 900.0 } else { 300.0 };
        for i in 0..120 {
            f.update(rate(i));
        }
        assert!(
            matches!(
                f.current().model(),
                ForecastModel::HoltWinters { season: 10, .. }
            ),
            "{}",
            f.current().model()
        );
        // The next spike (i = 123) is predicted; the naive forecast would say 300.
        assert!(f.predict(4) > 700.0, "{}", f.predict(4));
        assert!(f.predict(1) < 400.0, "{}", f.predict(1));
    }
}
