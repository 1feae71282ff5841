//! Rows that arrive per variant, counted on the query path and read once per model-autoscaler
//! period. Arrivals, not rows served: an overloaded instance serves at most its peak, while
//! the load to plan for is what queries ask. With several controller replicas, each publishes
//! its own arrivals and merges the others' ([`crate::exchange`]), so the leader's autoscaler
//! plans for the cluster's demand.

use std::collections::HashMap;
use std::sync::Mutex;

/// Arrivals of one variant since the last [`DemandMeter::take`].
pub use infaas_scheduler::autoscale::Arrivals;

/// See the module documentation. The lock is held for a hash look-up, never across an await.
#[derive(Debug, Default)]
pub struct DemandMeter {
    inner: Mutex<Meter>,
}

#[derive(Debug, Default)]
struct Meter {
    /// Arrivals since the last [`DemandMeter::take`]: this replica's and the others'.
    by_variant: HashMap<String, Arrivals>,
    /// This replica's arrivals not yet published to the others; `None` while nothing
    /// publishes them (one controller).
    unshared: Option<HashMap<String, Arrivals>>,
}

fn add_to(map: &mut HashMap<String, Arrivals>, variant_id: &str, a: &Arrivals) {
    match map.get_mut(variant_id) {
        Some(have) => have.merge(a),
        None => {
            map.insert(variant_id.to_string(), *a);
        }
    }
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
        let mut a = Arrivals::default();
        a.add(rows, slo_ms, min_accuracy);
        self.count(variant_id, &a);
    }

    /// Counts a load of `variant_id` that the query path started (no live instance would
    /// have answered in time): the model autoscaler holds it as overload.
    pub fn record_query_load(&self, variant_id: &str) {
        let a = Arrivals {
            loads_for_queries: 1,
            ..Arrivals::default()
        };
        self.count(variant_id, &a);
    }

    /// Adds this replica's `a` to the count (and to what it publishes, once shared).
    fn count(&self, variant_id: &str, a: &Arrivals) {
        let Ok(mut m) = self.inner.lock() else {
            return;
        };
        add_to(&mut m.by_variant, variant_id, a);
        if let Some(unshared) = m.unshared.as_mut() {
            add_to(unshared, variant_id, a);
        }
    }

    /// The arrivals since the last call, by variant id; starts a new count.
    pub fn take(&self) -> HashMap<String, Arrivals> {
        self.inner
            .lock()
            .map(|mut m| std::mem::take(&mut m.by_variant))
            .unwrap_or_default()
    }

    /// From now on, keeps this replica's arrivals for [`DemandMeter::take_unshared`] too.
    pub fn share(&self) {
        if let Ok(mut m) = self.inner.lock() {
            m.unshared.get_or_insert_with(HashMap::new);
        }
    }

    /// This replica's arrivals since the last call (nothing before [`DemandMeter::share`]).
    pub fn take_unshared(&self) -> HashMap<String, Arrivals> {
        self.inner
            .lock()
            .ok()
            .and_then(|mut m| m.unshared.as_mut().map(std::mem::take))
            .unwrap_or_default()
    }

    /// Adds arrivals that another replica received (they are not published again).
    pub fn merge(&self, variant_id: &str, a: &Arrivals) {
        if let Ok(mut m) = self.inner.lock() {
            add_to(&mut m.by_variant, variant_id, a);
        }
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
                min_accuracy: Some(0.95),
                loads_for_queries: 0,
            }
        );
        assert_eq!(t["b"].rows, 7);
        assert!(m.take().is_empty(), "take starts a new count");
        let mut a = t["a"];
        a.merge(&t["b"]);
        assert_eq!(a.rows, 13);
        assert_eq!(a.slo_ms, Some(20.0));
    }

    #[test]
    fn loads_for_queries_are_counted_beside_the_rows_and_merged() {
        let m = DemandMeter::default();
        m.share();
        m.record("a", 2, None, None);
        m.record_query_load("a");
        m.record_query_load("a");
        m.record_query_load("b");
        let mine = m.take_unshared();
        assert_eq!(
            mine["a"].loads_for_queries, 2,
            "published to the other replicas"
        );
        let t = m.take();
        assert_eq!((t["a"].rows, t["a"].loads_for_queries), (2, 2));
        assert_eq!((t["b"].rows, t["b"].loads_for_queries), (0, 1));
        let mut a = t["a"];
        a.merge(&t["b"]);
        assert_eq!(
            a.loads_for_queries, 3,
            "a family counts its variants' loads"
        );
    }

    #[test]
    fn shared_arrivals_are_published_once_and_merged_ones_are_not_published_again() {
        let m = DemandMeter::default();
        m.record("a", 1, None, None);
        assert!(m.take_unshared().is_empty(), "nothing kept before share");
        m.share();
        m.record("a", 2, Some(30.0), None);
        m.merge(
            "a",
            &Arrivals {
                rows: 5,
                slo_ms: Some(10.0),
                min_accuracy: Some(0.8),
                loads_for_queries: 1,
            },
        );
        let mine = m.take_unshared();
        assert_eq!(
            mine["a"],
            Arrivals {
                rows: 2,
                slo_ms: Some(30.0),
                min_accuracy: None,
                loads_for_queries: 0,
            }
        );
        assert!(m.take_unshared().is_empty());
        let all = m.take();
        assert_eq!(
            all["a"],
            Arrivals {
                rows: 8,
                slo_ms: Some(10.0),
                min_accuracy: Some(0.8),
                loads_for_queries: 1,
            }
        );
    }
}
