//! The evaluation: every policy on named workloads, and the capacities.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;

use super::capacity::Capacity;
use super::ceiling::AccuracyCeiling;
use super::plans::{DemandEstimate, Overload, OverloadPolicy};
use super::problem::OverloadError;
use super::simulation::RunStats;
use super::workloads::initial_rate;
use crate::pipeline::CataloguePipeline;

/// A named workload: arrivals at the pipeline's root (ms from 0, sorted).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub arrivals_ms: Vec<f64>,
}

/// One policy's figures.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadRow {
    pub policy: String,
    pub capacity: Option<Capacity>,
    /// Capacity over inferline's.
    pub capacity_ratio_to_inferline: Option<f64>,
    /// The capacity where the answered queries also keep accuracy within
    /// [`OverloadSettings::max_accuracy_drop`] of the most accurate variants.
    pub bounded_capacity: Option<Capacity>,
    /// That over inferline's capacity.
    pub bounded_ratio_to_inferline: Option<f64>,
    /// Per workload, the run.
    pub runs: BTreeMap<String, RunStats>,
}

/// A workload as run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadInfo {
    pub name: String,
    pub queries: usize,
    pub duration_s: f64,
    pub mean_qps: f64,
    /// Its peak (5-s moving average) over the full-accuracy capacity.
    pub peak_ratio: f64,
}

/// The evaluation of one pipeline (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverloadEval {
    pub simulated: bool,
    pub pipeline: String,
    pub description: String,
    pub slo_ms: f64,
    pub workers: BTreeMap<String, usize>,
    /// What hardware scaling carries at full accuracy on the whole cluster, q/s.
    pub full_accuracy_capacity_qps: f64,
    /// What loki's plans carry (served fraction >= 99.9%) with accuracy scaling, q/s, queues
    /// aside ([`Overload::planned_accuracy_scaling_capacity`]: with loki's time-limited solves,
    /// so not a bound; see `accuracy_ceiling`).
    pub planned_accuracy_scaling_capacity_qps: Option<f64>,
    /// The catalogue's ceiling on the capacity at the accuracy bound
    /// ([`Overload::accuracy_ceiling`] at 1 - [`OverloadSettings::max_accuracy_drop`]): the
    /// most any plan on these variants and workers carries, in the plans' own terms.
    pub accuracy_ceiling: Option<AccuracyCeiling>,
    /// Its demand over inferline's simulated capacity (the denominator of
    /// [`OverloadRow::bounded_ratio_to_inferline`]).
    pub accuracy_ceiling_ratio_to_inferline: Option<f64>,
    pub workloads: Vec<WorkloadInfo>,
    pub rows: Vec<OverloadRow>,
    /// Plans made (MILP-backed, cache misses) and the wall time they took.
    pub plans_made: usize,
    pub planning_s: f64,
    pub wall_s: f64,
}

/// Peak of the 5-s moving average of a workload's rate, q/s.
pub fn peak_rate(arrivals_ms: &[f64]) -> f64 {
    let Some(&last) = arrivals_ms.last() else {
        return 0.0;
    };
    let seconds = (last / 1e3).floor() as usize + 1;
    let mut counts = vec![0.0f64; seconds];
    for &t in arrivals_ms {
        counts[((t.max(0.0) / 1e3) as usize).min(seconds - 1)] += 1.0;
    }
    counts
        .windows(5.min(seconds))
        .map(|w| w.iter().sum::<f64>() / w.len() as f64)
        .fold(0.0, f64::max)
}

/// Runs every policy on every workload (the resource manager's estimates), and the capacity
/// search when `capacity` is set.
pub fn evaluate(
    o: &mut Overload,
    spec: &CataloguePipeline,
    policies: &[OverloadPolicy],
    workloads: &[Workload],
    capacity: bool,
) -> Result<OverloadEval, OverloadError> {
    let started = Instant::now();
    let mut rows = Vec::new();
    for &policy in policies {
        let mut runs = BTreeMap::new();
        for w in workloads {
            let initial = initial_rate(&w.arrivals_ms, o.settings.manager.period_s);
            let r = o.run(
                policy,
                &w.arrivals_ms,
                DemandEstimate::Ewma {
                    initial_qps: initial,
                },
            )?;
            runs.insert(w.name.clone(), r);
        }
        let (cap, bounded) = if capacity {
            let c = o.capacity(policy)?;
            let floor = 1.0 - o.settings.max_accuracy_drop;
            let holds = c
                .at_capacity
                .as_ref()
                .is_some_and(|r| r.relative_accuracy >= floor);
            let b = if holds {
                c.clone()
            } else {
                o.capacity_with(policy, Some(floor))?
            };
            (Some(c), Some(b))
        } else {
            (None, None)
        };
        rows.push(OverloadRow {
            policy: policy.name().to_owned(),
            capacity: cap,
            capacity_ratio_to_inferline: None,
            bounded_capacity: bounded,
            bounded_ratio_to_inferline: None,
            runs,
        });
    }
    let base = rows
        .iter()
        .find(|r| r.policy == OverloadPolicy::InferLine.name())
        .and_then(|r| r.capacity.as_ref())
        .map(|c| c.qps)
        .filter(|q| *q > 0.0);
    for r in &mut rows {
        r.capacity_ratio_to_inferline = base.zip(r.capacity.as_ref()).map(|(b, c)| c.qps / b);
        r.bounded_ratio_to_inferline = base
            .zip(r.bounded_capacity.as_ref())
            .map(|(b, c)| c.qps / b);
    }
    let planned = if capacity
        && policies
            .iter()
            .any(|p| matches!(p, OverloadPolicy::Loki(_)))
    {
        Some(o.planned_accuracy_scaling_capacity()?)
    } else {
        None
    };
    let ceiling = if capacity {
        Some(o.accuracy_ceiling(1.0 - o.settings.max_accuracy_drop)?)
    } else {
        None
    };
    let ceiling_ratio = base.zip(ceiling.as_ref()).map(|(b, c)| c.qps / b);
    let full = o.full_capacity_qps;
    Ok(OverloadEval {
        simulated: true,
        pipeline: spec.name.to_owned(),
        description: spec.description.to_owned(),
        slo_ms: o.settings.slo_ms,
        workers: o.settings.workers.clone(),
        full_accuracy_capacity_qps: full,
        planned_accuracy_scaling_capacity_qps: planned,
        accuracy_ceiling: ceiling,
        accuracy_ceiling_ratio_to_inferline: ceiling_ratio,
        workloads: workloads
            .iter()
            .map(|w| {
                let d = w.arrivals_ms.last().copied().unwrap_or(0.0) / 1e3;
                WorkloadInfo {
                    name: w.name.clone(),
                    queries: w.arrivals_ms.len(),
                    duration_s: d,
                    mean_qps: w.arrivals_ms.len() as f64 / d.max(1e-9),
                    peak_ratio: peak_rate(&w.arrivals_ms) / full,
                }
            })
            .collect(),
        rows,
        plans_made: o.plans_made,
        planning_s: o.planning_ms / 1e3,
        wall_s: started.elapsed().as_secs_f64(),
    })
}
