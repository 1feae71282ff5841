//! Capacity searches: the largest steady demand a policy serves (simulated), and the largest
//! loki's plans say they carry.

use infaas_scheduler::loki::allocate;
use serde::Serialize;

use super::plans::{DemandEstimate, Overload, OverloadPolicy};
use super::problem::OverloadError;
use super::simulation::RunStats;
use infaas_sim::generate::poisson;

impl Overload {
    /// The largest steady Poisson demand `policy` serves with at most
    /// [`OverloadSettings::max_violation`] SLO violations over [`OverloadSettings::capacity_s`]
    /// (the plan made for the true demand from the start), found by doubling or halving from
    /// the full-accuracy capacity, then bisection; and the run at it.
    pub fn capacity(&mut self, policy: OverloadPolicy) -> Result<Capacity, OverloadError> {
        self.capacity_with(policy, None)
    }

    /// [`Overload::capacity`] where a demand also counts as carried only if the queries
    /// answered keep at least `min_relative_accuracy` of the most accurate variants' accuracy.
    pub fn capacity_with(
        &mut self,
        policy: OverloadPolicy,
        min_relative_accuracy: Option<f64>,
    ) -> Result<Capacity, OverloadError> {
        let s = self.settings.clone();
        let probe = |o: &mut Overload, d: f64| -> Result<RunStats, OverloadError> {
            let arrivals = poisson(&[(s.capacity_s, d)], s.seed ^ 0xCA9A);
            o.run(policy, &arrivals, DemandEstimate::Fixed(d))
        };
        let ok = |r: &RunStats| {
            r.violation_ratio <= s.max_violation
                && min_relative_accuracy.is_none_or(|m| r.relative_accuracy >= m)
        };
        let mut runs = 0;
        let start = self.full_capacity_qps;
        let r = probe(self, start)?;
        runs += 1;
        let (mut lo, mut hi, mut best);
        if ok(&r) {
            (lo, best) = (start, Some(r));
            hi = start * 2.0;
            loop {
                let r = probe(self, hi)?;
                runs += 1;
                if !ok(&r) || hi > start * 64.0 {
                    if ok(&r) {
                        (lo, best) = (hi, Some(r));
                    }
                    break;
                }
                (lo, best) = (hi, Some(r));
                hi *= 2.0;
            }
        } else {
            hi = start;
            lo = start / 2.0;
            best = None;
            loop {
                let r = probe(self, lo)?;
                runs += 1;
                if ok(&r) {
                    best = Some(r);
                    break;
                }
                hi = lo;
                lo /= 2.0;
                if lo < start / 256.0 {
                    break;
                }
            }
        }
        while best.is_some() && hi / lo > s.capacity_tolerance {
            let mid = (lo * hi).sqrt();
            let r = probe(self, mid)?;
            runs += 1;
            if ok(&r) {
                (lo, best) = (mid, Some(r));
            } else {
                hi = mid;
            }
        }
        Ok(Capacity {
            policy: policy.name().to_owned(),
            qps: if best.is_some() { lo } else { 0.0 },
            ratio_to_full_accuracy: if best.is_some() {
                lo / self.full_capacity_qps
            } else {
                0.0
            },
            runs,
            at_capacity: best,
        })
    }

    /// The largest demand loki's plans say they carry (served fraction ≥ 99.9%), by bisection
    /// on [`allocate`]: what the catalogue's variants allow at their profiled p99, queues
    /// aside. Not a bound on the simulated capacity, whose batches take their mean, and only
    /// as good as the time-limited solves (a solve stopped early may serve less).
    pub fn planned_accuracy_scaling_capacity(&mut self) -> Result<f64, OverloadError> {
        let s = self.settings.loki;
        let problem = &self.problem;
        let (carried, _) = demand_search(self.full_capacity_qps, PLANNED_TOLERANCE, |d| {
            Ok(allocate(&problem.with_demand(d), &s)?.served_fraction >= 0.999)
        })?;
        Ok(carried)
    }
}

/// Bisection tolerance of [`Overload::planned_accuracy_scaling_capacity`].
pub(super) const PLANNED_TOLERANCE: f64 = 1.02;

/// The demand search of the planned capacities: from `full` (the full-accuracy capacity),
/// doubling while `carried` holds (up to 256x) or halving until it does (down to 1/256),
/// then bisection until the bounds are within `tolerance`. Returns the largest demand found
/// carried (0 when none) and the smallest found not carried (infinite when 256x still is).
pub(super) fn demand_search(
    full: f64,
    tolerance: f64,
    mut carried: impl FnMut(f64) -> Result<bool, OverloadError>,
) -> Result<(f64, f64), OverloadError> {
    let (mut lo, mut hi);
    if carried(full)? {
        (lo, hi) = (full, full * 2.0);
        while carried(hi)? {
            lo = hi;
            if hi >= full * 256.0 {
                return Ok((lo, f64::INFINITY));
            }
            hi *= 2.0;
        }
    } else {
        (lo, hi) = (full / 2.0, full);
        while !carried(lo)? {
            hi = lo;
            lo /= 2.0;
            if lo < full / 256.0 {
                return Ok((0.0, hi));
            }
        }
    }
    while hi / lo > tolerance {
        let mid = (lo * hi).sqrt();
        if carried(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((lo, hi))
}

/// A policy's capacity.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Capacity {
    pub policy: String,
    /// The largest steady demand carried with at most 1% violations, q/s (0: none found).
    pub qps: f64,
    /// `qps` over the full-accuracy capacity of hardware scaling's plan.
    pub ratio_to_full_accuracy: f64,
    /// Simulations the search ran.
    pub runs: usize,
    /// The run at `qps`.
    pub at_capacity: Option<RunStats>,
}
