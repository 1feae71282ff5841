//! Recorded traffic: the arrivals of online queries per tenant, application and second, kept
//! for a horizon in memory and exported in the simulator's CSV trace format
//! (`time_ms,app,slo_ms,min_accuracy`, `infaas_core::trace`), so that a tenant can replay its
//! own traffic in a what-if run.
//!
//! Per (tenant, application) a ring of buckets, one per second in which queries arrived:
//! their count, the strictest latency SLO and the highest minimum accuracy among them.
//! Buckets older than the horizon are dropped as new ones come, so memory is bounded by
//! [`BUCKET_BYTES`] x the horizon in seconds per application that receives queries every
//! second (about 170 KB per application for the default 60 minutes), and only applications
//! that exist get queries. A query to a model counts under the model's application.
//!
//! Export spreads a second's arrivals evenly inside it (arrival `i` of `n` at
//! `(i + 0.5) / n` of the second) and gives every one the second's strictest requirements;
//! times start at the first exported second, so the same record exports the same CSV.
//!
//! With several controller replicas, each publishes the seconds it recorded and merges the
//! others' ([`crate::exchange`]): a second reported late goes into its place in the ring, so
//! exports and forecasts count the queries that arrived at any replica.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;

use infaas_core::trace::{Arrival, Trace};

/// Arrivals of one application in one second.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    /// Seconds since the Unix epoch.
    second: i64,
    count: u32,
    slo_ms: Option<f64>,
    min_accuracy: Option<f64>,
}

impl Bucket {
    fn add(&mut self, count: u32, slo_ms: Option<f64>, min_accuracy: Option<f64>) {
        self.count = self.count.saturating_add(count);
        self.slo_ms = strictest(self.slo_ms, slo_ms, f64::min);
        self.min_accuracy = strictest(self.min_accuracy, min_accuracy, f64::max);
    }
}

/// Memory of one recorded second of one application (the bound the documentation states).
pub const BUCKET_BYTES: usize = std::mem::size_of::<Bucket>();
const _: () = assert!(BUCKET_BYTES <= 48);

/// Buckets by (tenant, application, second).
type UnsharedSeconds = BTreeMap<(String, String, i64), Bucket>;

/// See the module documentation. The lock is held for a hash look-up and a push, never
/// across an await.
#[derive(Debug)]
pub struct TrafficRecorder {
    horizon_s: i64,
    by_tenant: Mutex<HashMap<String, HashMap<String, VecDeque<Bucket>>>>,
    /// This replica's arrivals not yet published to the other replicas, by (tenant,
    /// application, second); `None` while nothing publishes them (one controller).
    unshared: Mutex<Option<UnsharedSeconds>>,
}

/// The arrivals of one application in one second, as replicas exchange them.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SecondArrivals {
    pub tenant: String,
    pub app: String,
    /// Seconds since the Unix epoch.
    pub second: i64,
    pub count: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_accuracy: Option<f64>,
}

impl TrafficRecorder {
    /// A recorder that keeps `horizon_minutes` of arrivals.
    pub fn new(horizon_minutes: u64) -> TrafficRecorder {
        TrafficRecorder {
            horizon_s: i64::try_from(horizon_minutes.max(1).saturating_mul(60)).unwrap_or(60),
            by_tenant: Mutex::new(HashMap::new()),
            unshared: Mutex::new(None),
        }
    }

    /// Minutes of arrivals kept.
    pub fn horizon_minutes(&self) -> u64 {
        (self.horizon_s / 60) as u64
    }

    /// Records one query of `tenant` to `app` arriving now.
    pub fn record(&self, tenant: &str, app: &str, slo_ms: Option<f64>, min_accuracy: Option<f64>) {
        self.record_at(
            infaas_core::time::now_ms(),
            tenant,
            app,
            slo_ms,
            min_accuracy,
        );
    }

    /// Records one query arriving at `now_ms` (milliseconds since the Unix epoch).
    pub fn record_at(
        &self,
        now_ms: i64,
        tenant: &str,
        app: &str,
        slo_ms: Option<f64>,
        min_accuracy: Option<f64>,
    ) {
        let second = now_ms.div_euclid(1000);
        if let Ok(mut unshared) = self.unshared.lock() {
            if let Some(unshared) = unshared.as_mut() {
                let b = unshared
                    .entry((tenant.to_string(), app.to_string(), second))
                    .or_insert(Bucket {
                        second,
                        count: 0,
                        slo_ms: None,
                        min_accuracy: None,
                    });
                b.add(1, slo_ms, min_accuracy);
            }
        }
        self.add(tenant, app, second, 1, slo_ms, min_accuracy);
    }

    /// From now on, keeps this replica's arrivals for [`TrafficRecorder::take_unshared`] too.
    pub fn share(&self) {
        if let Ok(mut unshared) = self.unshared.lock() {
            unshared.get_or_insert_with(BTreeMap::new);
        }
    }

    /// This replica's arrivals since the last call (nothing before
    /// [`TrafficRecorder::share`]).
    pub fn take_unshared(&self) -> Vec<SecondArrivals> {
        let taken = match self.unshared.lock() {
            Ok(mut u) => u.as_mut().map(std::mem::take).unwrap_or_default(),
            Err(_) => return Vec::new(),
        };
        taken
            .into_iter()
            .map(|((tenant, app, second), b)| SecondArrivals {
                tenant,
                app,
                second,
                count: b.count,
                slo_ms: b.slo_ms,
                min_accuracy: b.min_accuracy,
            })
            .collect()
    }

    /// Adds arrivals that another replica received (they are not published again).
    pub fn merge(&self, a: &SecondArrivals) {
        self.add(
            &a.tenant,
            &a.app,
            a.second,
            a.count,
            a.slo_ms,
            a.min_accuracy,
        );
    }

    /// Adds `count` arrivals in `second` to the application's ring, in time order.
    fn add(
        &self,
        tenant: &str,
        app: &str,
        second: i64,
        count: u32,
        slo_ms: Option<f64>,
        min_accuracy: Option<f64>,
    ) {
        let Ok(mut by_tenant) = self.by_tenant.lock() else {
            return;
        };
        let apps = match by_tenant.get_mut(tenant) {
            Some(apps) => apps,
            None => by_tenant.entry(tenant.to_string()).or_default(),
        };
        let ring = match apps.get_mut(app) {
            Some(ring) => ring,
            None => apps.entry(app.to_string()).or_default(),
        };
        let oldest = ring.back().map_or(second, |b| b.second.max(second)) - self.horizon_s;
        if second <= oldest {
            return;
        }
        // Buckets after `second` (an earlier second reported late by another replica).
        let after = ring.iter().rev().take_while(|b| b.second > second).count();
        let at = ring.len() - after;
        match ring.get_mut(at.wrapping_sub(1)) {
            Some(b) if b.second == second => b.add(count, slo_ms, min_accuracy),
            _ => ring.insert(
                at,
                Bucket {
                    second,
                    count,
                    slo_ms,
                    min_accuracy,
                },
            ),
        }
        while ring.front().is_some_and(|b| b.second <= oldest) {
            ring.pop_front();
        }
    }

    /// Queries that arrived in `second` (seconds since the Unix epoch), per tenant and
    /// application that received any: `(tenant, app, count)`.
    pub fn counts_at(&self, second: i64) -> Vec<(String, String, u32)> {
        let Ok(by_tenant) = self.by_tenant.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (tenant, apps) in by_tenant.iter() {
            for (app, ring) in apps {
                // The newest buckets are at the back.
                let found = ring
                    .iter()
                    .rev()
                    .take_while(|b| b.second >= second)
                    .find(|b| b.second == second);
                if let Some(b) = found {
                    out.push((tenant.clone(), app.clone(), b.count));
                }
            }
        }
        out
    }

    /// The arrivals of `tenant` over the last `minutes` (at most the horizon), of one
    /// application or of all, as a trace (see the module documentation). Applications are
    /// in name order; an empty trace when nothing was recorded.
    pub fn export(&self, tenant: &str, app: Option<&str>, minutes: u64) -> Trace {
        self.export_at(infaas_core::time::now_ms(), tenant, app, minutes)
    }

    /// [`TrafficRecorder::export`] as of `now_ms`.
    pub fn export_at(&self, now_ms: i64, tenant: &str, app: Option<&str>, minutes: u64) -> Trace {
        let window_s = i64::try_from(minutes.saturating_mul(60))
            .unwrap_or(i64::MAX)
            .min(self.horizon_s);
        let oldest = now_ms.div_euclid(1000) - window_s;
        let mut selected: Vec<(String, Vec<Bucket>)> = match self.by_tenant.lock() {
            Ok(by_tenant) => by_tenant
                .get(tenant)
                .into_iter()
                .flat_map(|apps| apps.iter())
                .filter(|(name, _)| app.is_none_or(|a| a == name.as_str()))
                .map(|(name, ring)| {
                    let kept: Vec<Bucket> =
                        ring.iter().filter(|b| b.second > oldest).copied().collect();
                    (name.clone(), kept)
                })
                .filter(|(_, kept)| !kept.is_empty())
                .collect(),
            Err(_) => Vec::new(),
        };
        selected.sort_by(|a, b| a.0.cmp(&b.0));
        let Some(first) = selected
            .iter()
            .filter_map(|(_, kept)| kept.first().map(|b| b.second))
            .min()
        else {
            return Trace::default();
        };
        let mut trace = Trace::default();
        for (name, kept) in selected {
            let index = trace.app_index(&name);
            for b in kept {
                let start_ms = (b.second - first) as f64 * 1e3;
                let n = f64::from(b.count);
                trace.arrivals.extend((0..b.count).map(|i| Arrival {
                    // Whole microseconds, so the CSV reads back exactly.
                    at_ms: ((start_ms + (f64::from(i) + 0.5) * 1e3 / n) * 1e3).round() / 1e3,
                    app: index,
                    slo_ms: b.slo_ms,
                    min_accuracy: b.min_accuracy,
                }));
            }
        }
        // Stable: equal times keep the applications' name order.
        trace.sort();
        trace
    }
}

/// The stricter of two optional requirements (`pick`: `min` for SLOs, `max` for accuracy).
fn strictest(a: Option<f64>, b: Option<f64>, pick: fn(f64, f64) -> f64) -> Option<f64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(pick(x, y)),
        (x, y) => x.or(y),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const T0: i64 = 1_700_000_000_000;

    #[test]
    fn seconds_spread_evenly_with_their_strictest_requirements() {
        let r = TrafficRecorder::new(60);
        // Second 0: four queries to a; second 2: one to b and two to a.
        r.record_at(T0 + 10, "t1", "a", Some(100.0), None);
        r.record_at(T0 + 200, "t1", "a", Some(50.0), Some(0.9));
        r.record_at(T0 + 300, "t1", "a", None, Some(0.95));
        r.record_at(T0 + 999, "t1", "a", None, None);
        r.record_at(T0 + 2_000, "t1", "b", None, None);
        r.record_at(T0 + 2_500, "t1", "a", Some(80.0), None);
        r.record_at(T0 + 2_600, "t1", "a", None, None);
        let t = r.export_at(T0 + 3_000, "t1", None, 5);
        assert_eq!(t.apps, ["a", "b"]);
        let rows: Vec<(f64, &str, Option<f64>, Option<f64>)> = t
            .arrivals
            .iter()
            .map(|a| (a.at_ms, t.apps[a.app].as_str(), a.slo_ms, a.min_accuracy))
            .collect();
        assert_eq!(
            rows,
            [
                (125.0, "a", Some(50.0), Some(0.95)),
                (375.0, "a", Some(50.0), Some(0.95)),
                (625.0, "a", Some(50.0), Some(0.95)),
                (875.0, "a", Some(50.0), Some(0.95)),
                (2250.0, "a", Some(80.0), None),
                (2500.0, "b", None, None),
                (2750.0, "a", Some(80.0), None),
            ]
        );
        // One application; times start at its own first second.
        let b = r.export_at(T0 + 3_000, "t1", Some("b"), 5);
        assert_eq!(b.apps, ["b"]);
        assert_eq!(b.arrivals.len(), 1);
        assert_eq!(b.arrivals[0].at_ms, 500.0);
        // The same record exports the same trace.
        assert_eq!(r.export_at(T0 + 3_000, "t1", None, 5), t);
        // The CSV reads back as the same trace.
        let mut csv = Vec::new();
        t.write_csv(&mut csv).unwrap();
        let back = Trace::parse_csv(std::str::from_utf8(&csv).unwrap(), "export").unwrap();
        assert_eq!(back, t);
    }

    #[test]
    fn tenants_are_apart_and_the_window_and_horizon_bound_the_record() {
        let r = TrafficRecorder::new(2);
        r.record_at(T0, "t1", "a", None, None);
        r.record_at(T0 + 61_000, "t1", "a", None, None);
        r.record_at(T0 + 61_500, "t2", "a", None, None);
        assert!(r.export_at(T0 + 62_000, "t3", None, 5).arrivals.is_empty());
        assert_eq!(r.export_at(T0 + 62_000, "t2", None, 5).arrivals.len(), 1);
        assert_eq!(r.export_at(T0 + 62_000, "t1", None, 5).arrivals.len(), 2);
        // The last minute only.
        assert_eq!(r.export_at(T0 + 62_000, "t1", None, 1).arrivals.len(), 1);
        assert!(r
            .export_at(T0 + 62_000, "t1", Some("b"), 5)
            .arrivals
            .is_empty());
        // Past the two-minute horizon, the first second is gone from memory.
        r.record_at(T0 + 121_000, "t1", "a", None, None);
        let kept = r.by_tenant.lock().unwrap()["t1"]["a"].len();
        assert_eq!(kept, 2);
        assert_eq!(r.export_at(T0 + 121_000, "t1", None, 60).arrivals.len(), 2);
        assert_eq!(r.horizon_minutes(), 2);
    }

    #[test]
    fn counts_of_one_second() {
        let r = TrafficRecorder::new(5);
        r.record_at(T0, "t1", "a", None, None);
        r.record_at(T0 + 1_100, "t1", "a", None, None);
        r.record_at(T0 + 1_200, "t1", "a", None, None);
        r.record_at(T0 + 1_300, "t2", "b", None, None);
        let mut c = r.counts_at(T0 / 1000 + 1);
        c.sort();
        assert_eq!(
            c,
            [("t1".into(), "a".into(), 2), ("t2".into(), "b".into(), 1)]
        );
        assert_eq!(r.counts_at(T0 / 1000), [("t1".into(), "a".into(), 1)]);
        assert!(r.counts_at(T0 / 1000 + 2).is_empty());
    }

    #[test]
    fn a_ring_holds_at_most_the_horizon_in_seconds() {
        let r = TrafficRecorder::new(1);
        for s in 0..1000 {
            r.record_at(T0 + s * 1000, "t", "a", None, None);
        }
        assert_eq!(r.by_tenant.lock().unwrap()["t"]["a"].len(), 60);
    }

    #[test]
    fn seconds_from_other_replicas_go_into_their_place_and_are_not_published_again() {
        let r = TrafficRecorder::new(60);
        r.record_at(T0, "t1", "a", None, None);
        assert!(r.take_unshared().is_empty(), "nothing kept before share");
        r.share();
        r.record_at(T0 + 3_000, "t1", "a", Some(40.0), None);
        r.record_at(T0 + 3_100, "t1", "a", None, None);
        // Another replica's seconds 1 and 3, reported after this replica recorded second 3.
        let s = T0 / 1000;
        for (second, count) in [(s + 3, 2), (s + 1, 5)] {
            r.merge(&SecondArrivals {
                tenant: "t1".into(),
                app: "a".into(),
                second,
                count,
                slo_ms: Some(20.0),
                min_accuracy: None,
            });
        }
        assert_eq!(r.counts_at(s), [("t1".into(), "a".into(), 1)]);
        assert_eq!(r.counts_at(s + 1), [("t1".into(), "a".into(), 5)]);
        assert_eq!(r.counts_at(s + 3), [("t1".into(), "a".into(), 4)]);
        let t = r.export_at(T0 + 4_000, "t1", None, 5);
        assert_eq!(t.arrivals.len(), 10);
        assert!(t.arrivals.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
        // Only this replica's own arrivals since share are published.
        assert_eq!(
            r.take_unshared(),
            [SecondArrivals {
                tenant: "t1".into(),
                app: "a".into(),
                second: s + 3,
                count: 2,
                slo_ms: Some(40.0),
                min_accuracy: None,
            }]
        );
        assert!(r.take_unshared().is_empty());
        // A second older than the horizon is dropped, not inserted.
        r.merge(&SecondArrivals {
            tenant: "t1".into(),
            app: "a".into(),
            second: s - 3_600,
            count: 9,
            slo_ms: None,
            min_accuracy: None,
        });
        assert!(r.counts_at(s - 3_600).is_empty());
    }
}
