//! The load a family is planned for, and the arrivals it is measured from.

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

/// A family's load as model autoscaling plans for it: the higher of the period's arrival
/// rate and its exponentially weighted mean, so that scaling up follows the first busy period
/// at once and scaling down waits until the load has stayed low. The controller and the
/// simulator keep one per family and feed it every period.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct PlannedLoad {
    ewma: Option<f64>,
}

impl PlannedLoad {
    /// Folds in one period's arrival rate (rows/s) and returns the load to plan for.
    pub fn observe(&mut self, rate: f64) -> f64 {
        let ewma = match self.ewma {
            None => rate,
            Some(e) => LOAD_EWMA_WEIGHT * rate + (1.0 - LOAD_EWMA_WEIGHT) * e,
        };
        self.ewma = Some(ewma);
        rate.max(ewma)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_count_at_once_and_lulls_slowly() {
        let mut l = PlannedLoad::default();
        assert_eq!(l.observe(100.0), 100.0);
        assert_eq!(l.observe(1000.0), 1000.0, "a burst counts at once");
        assert_eq!(l.observe(50.0), 300.0);
        assert_eq!(l.observe(50.0), 175.0);
    }
}
