//! The load a family is planned for, and the arrivals it is measured from.

use std::collections::VecDeque;

/// Queries that arrived for a variant or family over a period: their rows, the tightest
/// latency SLO and the highest minimum accuracy among them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Arrivals {
    pub rows: u64,
    /// Tightest latency SLO among the queries, ms.
    pub slo_ms: Option<f64>,
    /// Highest minimum accuracy among the queries.
    pub min_accuracy: Option<f64>,
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
    }
}

/// Weight of the newest period in the smoothed load.
pub const LOAD_EWMA_WEIGHT: f64 = 0.5;

/// A family's load as model autoscaling plans for it: the highest of the period's arrival
/// rate, its exponentially weighted mean and the highest period rate within the peak hold
/// ([`ScalingConfig::peak_hold_ms`](crate::autoscale::ScalingConfig::peak_hold_ms)). Scaling
/// up follows the first busy period at once; scaling down waits until the load has stayed
/// below the recent peak for the hold, so that capacity a burst needed is not given back
/// before the next burst of a recurring pattern (the Proteus traces burst every 20-30 s; a
/// replica taken back between two bursts is loaded again, about 2 s late, at the next one).
/// The controller and the simulator keep one per family and feed it every period.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlannedLoad {
    ewma: Option<f64>,
    /// The rates of the latest periods within the hold, oldest first.
    recent: VecDeque<f64>,
}

impl PlannedLoad {
    /// Folds in one period's arrival rate (rows/s) and returns the load to plan for, keeping
    /// the rates of the last `hold_periods` periods (at least this one).
    pub fn observe(&mut self, rate: f64, hold_periods: usize) -> f64 {
        let ewma = match self.ewma {
            None => rate,
            Some(e) => LOAD_EWMA_WEIGHT * rate + (1.0 - LOAD_EWMA_WEIGHT) * e,
        };
        self.ewma = Some(ewma);
        self.recent.push_back(rate);
        while self.recent.len() > hold_periods.max(1) {
            self.recent.pop_front();
        }
        let peak = self.recent.iter().copied().fold(rate, f64::max);
        peak.max(ewma)
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
        assert_eq!(l.observe(100.0, 1), 100.0);
        assert_eq!(l.observe(1000.0, 1), 1000.0, "a burst counts at once");
        assert_eq!(l.observe(50.0, 1), 300.0);
        assert_eq!(l.observe(50.0, 1), 175.0);
    }

    #[test]
    fn a_burst_is_planned_for_through_the_hold_then_forgotten() {
        let mut l = PlannedLoad::default();
        assert_eq!(l.observe(100.0, 3), 100.0);
        assert_eq!(l.observe(400.0, 3), 400.0);
        // Within the hold of three periods the burst's rate is planned for...
        assert_eq!(l.observe(100.0, 3), 400.0);
        assert_eq!(l.observe(100.0, 3), 400.0);
        // ...and then only the smoothed mean (100, 250, 175, 137.5, 118.75).
        assert_eq!(l.observe(100.0, 3), 118.75);
    }

    #[test]
    fn a_hold_spans_whole_periods() {
        assert_eq!(hold_periods(60_000.0, 1_000.0), 60);
        assert_eq!(hold_periods(2_500.0, 1_000.0), 3);
        assert_eq!(hold_periods(0.0, 1_000.0), 1);
        assert_eq!(hold_periods(60_000.0, 0.0), 1);
    }
}
