//! The load a family is planned for, and the arrivals it is measured from.

use std::collections::VecDeque;

/// Queries that arrived for a variant or family over a period: their rows, the tightest
/// latency SLO and the highest minimum accuracy among them, and the loads the query path
/// started for them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Arrivals {
    pub rows: u64,
    /// Tightest latency SLO among the queries, ms.
    pub slo_ms: Option<f64>,
    /// Highest minimum accuracy among the queries.
    pub min_accuracy: Option<f64>,
    /// Loads the query path started because no live instance would answer in time (each one
    /// is overload the model autoscaler did not see as an Overloaded instance).
    pub loads_for_queries: u32,
}

impl Arrivals {
    /// Counts a query of `rows` rows with its requirements.
    pub fn add(&mut self, rows: usize, slo_ms: Option<f64>, min_accuracy: Option<f64>) {
        self.rows += rows as u64;
        self.slo_ms = match (self.slo_ms, slo_ms) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.min_accuracy = match (self.min_accuracy, min_accuracy) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
    }

    /// Merges another variant's arrivals (same family).
    pub fn merge(&mut self, other: &Arrivals) {
        self.add(other.rows as usize, other.slo_ms, other.min_accuracy);
        self.loads_for_queries += other.loads_for_queries;
    }
}

/// Weight of the newest period in the smoothed load.
pub const LOAD_EWMA_WEIGHT: f64 = 0.5;

/// A family's load as model autoscaling plans for it: the highest of the period's arrival
/// rate, the period rates' exponentially weighted mean and the highest one-second rate within
/// the peak hold ([`ScalingConfig::peak_hold_ms`](crate::autoscale::ScalingConfig::peak_hold_ms)).
/// Scaling up follows the first busy period at once; scaling down waits until the load has
/// stayed below the recent peak for the hold, so that capacity a burst needed is not given
/// back before the next burst of a recurring pattern (the Proteus traces burst every 20-30 s; a
/// replica taken back between two bursts is loaded again, about 2 s late, at the next one).
/// The hold keeps one-second rates, not period rates: at a quarter-second period a Poisson
/// stream's busiest quarter-second within a minute is well above its rate, and holding it paid
/// for capacity no second needed (on the Proteus patterns 1.1-1.2x the cost, for attainment
/// above 99.5 % either way). At a one-second period the two are the same.
/// The controller and the simulator keep one per family and feed it every period.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlannedLoad {
    ewma: Option<f64>,
    /// The latest period's rate or the smoothed one, whichever is higher.
    current: f64,
    /// The rates of the periods of the latest second, oldest first.
    second: VecDeque<f64>,
    /// The one-second rates at the latest periods within the hold, oldest first.
    recent: VecDeque<f64>,
}

impl PlannedLoad {
    /// Folds in one period's arrival rate (rows/s) and returns the load to plan for, keeping
    /// the one-second rates (the mean of the last `second_periods` periods' rates) of the last
    /// `hold_periods` periods (at least this one).
    pub fn observe(&mut self, rate: f64, hold_periods: usize, second_periods: usize) -> f64 {
        let ewma = match self.ewma {
            None => rate,
            Some(e) => LOAD_EWMA_WEIGHT * rate + (1.0 - LOAD_EWMA_WEIGHT) * e,
        };
        self.ewma = Some(ewma);
        self.current = rate.max(ewma);
        self.second.push_back(rate);
        while self.second.len() > second_periods.max(1) {
            self.second.pop_front();
        }
        let second = self.second.iter().sum::<f64>() / self.second.len() as f64;
        self.recent.push_back(second);
        while self.recent.len() > hold_periods.max(1) {
            self.recent.pop_front();
        }
        self.recent.iter().copied().fold(rate.max(ewma), f64::max)
    }

    /// The load as of the latest [`Self::observe`] without the peak hold: the latest period's
    /// rate or the smoothed one, whichever is higher (at most what `observe` returned).
    pub fn current(&self) -> f64 {
        self.current
    }
}

/// Periods of `period_ms` that a peak hold of `hold_ms` spans (at least one).
pub fn hold_periods(hold_ms: f64, period_ms: f64) -> usize {
    if !(hold_ms.is_finite() && period_ms.is_finite() && period_ms > 0.0 && hold_ms > 0.0) {
        return 1;
    }
    ((hold_ms / period_ms).ceil() as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_count_at_once_and_lulls_slowly() {
        let mut l = PlannedLoad::default();
        assert_eq!(l.observe(100.0, 1, 1), 100.0);
        assert_eq!(l.observe(1000.0, 1, 1), 1000.0, "a burst counts at once");
        assert_eq!(l.observe(50.0, 1, 1), 300.0);
        assert_eq!(l.observe(50.0, 1, 1), 175.0);
    }

    #[test]
    fn a_burst_is_planned_for_through_the_hold_then_forgotten() {
        let mut l = PlannedLoad::default();
        assert_eq!(l.observe(100.0, 3, 1), 100.0);
        assert_eq!(l.observe(400.0, 3, 1), 400.0);
        // Within the hold of three periods the burst's rate is planned for...
        assert_eq!(l.observe(100.0, 3, 1), 400.0);
        assert_eq!(l.observe(100.0, 3, 1), 400.0);
        // ...and then only the smoothed mean (100, 250, 175, 137.5, 118.75).
        assert_eq!(l.observe(100.0, 3, 1), 118.75);
    }

    #[test]
    fn the_hold_keeps_one_second_rates_not_a_periods_noise() {
        // Quarter-second periods (four a second) of a steady 100 rows/s with one noisy period
        // at 300: the hold keeps the second's mean (150), not the period's 300.
        let mut l = PlannedLoad::default();
        for _ in 0..8 {
            assert_eq!(l.observe(100.0, 240, 4), 100.0);
        }
        assert_eq!(
            l.observe(300.0, 240, 4),
            300.0,
            "a busy period counts at once"
        );
        for _ in 0..3 {
            l.observe(100.0, 240, 4);
        }
        // After the noisy second has passed, it is still held, at its one-second rate.
        assert_eq!(l.observe(100.0, 240, 4), 150.0);
        // A step is planned for in full from its first period, and held from its first
        // second.
        let mut l = PlannedLoad::default();
        for _ in 0..4 {
            l.observe(100.0, 240, 4);
        }
        let planned: Vec<f64> = (0..4).map(|_| l.observe(900.0, 240, 4)).collect();
        assert_eq!(planned, [900.0; 4]);
        let after: Vec<f64> = (0..2).map(|_| l.observe(100.0, 240, 4)).collect();
        assert_eq!(after, [900.0; 2]);
    }

    #[test]
    fn a_hold_spans_whole_periods() {
        assert_eq!(hold_periods(60_000.0, 1_000.0), 60);
        assert_eq!(hold_periods(2_500.0, 1_000.0), 3);
        assert_eq!(hold_periods(0.0, 1_000.0), 1);
        assert_eq!(hold_periods(60_000.0, 0.0), 1);
    }
}
