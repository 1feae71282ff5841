//! Rows that arrive per variant, counted on the query path and read once per model-autoscaler
//! period. Arrivals, not rows served: an overloaded instance serves at most its peak, while
//! the load to plan for is what queries ask.

use std::collections::HashMap;
use std::sync::Mutex;

/// Arrivals of one variant since the last [`DemandMeter::take`].
pub use infaas_scheduler::autoscale::Arrivals;

/// See the module documentation. The lock is held for a hash look-up, never across an await.
#[derive(Debug, Default)]
pub struct DemandMeter {
    by_variant: Mutex<HashMap<String, Arrivals>>,
}

impl DemandMeter {
    /// Counts a query of `rows` rows sent to `variant_id`.
    pub fn record(
        &self,
        variant_id: &str,
        rows: usize,
        slo_ms: Option<f64>,
        min_accuracy: Option<f64>,
    ) {
        let Ok(mut m) = self.by_variant.lock() else {
            return;
        };
        match m.get_mut(variant_id) {
            Some(a) => a.add(rows, slo_ms, min_accuracy),
            None => {
                let mut a = Arrivals::default();
                a.add(rows, slo_ms, min_accuracy);
                m.insert(variant_id.to_string(), a);
            }
        }
    }

    /// The arrivals since the last call, by variant id; starts a new count.
    pub fn take(&self) -> HashMap<String, Arrivals> {
        self.by_variant
            .lock()
            .map(|mut m| std::mem::take(&mut *m))
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rows_and_keeps_the_strictest_requirements() {
        let m = DemandMeter::default();
        m.record("a", 3, Some(50.0), None);
        m.record("a", 2, Some(20.0), Some(0.9));
        m.record("a", 1, None, Some(0.95));
        m.record("b", 7, None, None);
        let t = m.take();
        assert_eq!(
            t["a"],
            Arrivals {
                rows: 6,
                slo_ms: Some(20.0),
                min_accuracy: Some(0.95)
            }
        );
        assert_eq!(t["b"].rows, 7);
        assert!(m.take().is_empty(), "take starts a new count");
        let mut a = t["a"];
        a.merge(&t["b"]);
        assert_eq!(a.rows, 13);
        assert_eq!(a.slo_ms, Some(20.0));
    }
}
