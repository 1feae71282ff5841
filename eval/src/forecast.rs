//! Load prediction on the Proteus Twitter traces, and Themis against horizontal-only scaling
//! (SIMULATED: the traces' arrival patterns are real, the cluster is the simulator's).
//!
//! - [`evaluate_proteus`]: every forecaster of `infaas_scheduler::forecast` on every trace's
//!   per-second arrival rate (all applications together), `h` = 1, 5 and 10 s ahead. Each
//!   forecaster runs over the whole trace; its errors are measured on the second half, which
//!   [`pick_best`] (the `best` row) did not see when it fitted its model on the first half.
//! - [`compare_scaling`]: policies of [`infaas_sim::policy`] on one trace, with their SLO
//!   violations and cost, as [`ScalingRow`]s.
//!
//! Both render as markdown tables ([`ForecastTable`], [`ScalingTable`]).

use std::fmt;
use std::path::Path;

use infaas_scheduler::autoscale::ScalingConfig;
use infaas_scheduler::forecast::{
    candidate_seasons, forecast_errors_from, pick_best, ErrorReport, ForecastError, ForecastModel,
};

use infaas_sim::catalogue::{Accelerator, Profile};
use infaas_sim::engine::{simulate, variants_for, Cluster, SimError};
use infaas_sim::policy::by_name;
use infaas_sim::trace::{Trace, TraceError};

/// The Proteus Twitter traces, as directories under the traces' root (each holds `300/`, the
/// traces at an SLO of 300 ms).
pub const PATTERNS: [&str; 6] = [
    "low_load",
    "medium-normal_load",
    "normal-high_load",
    "zipf_exponential",
    "zipf_exponential_bursty",
    "zipf_gamma",
];

/// Horizons of the forecaster table, s.
pub const HORIZONS: [usize; 3] = [1, 5, 10];

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error(transparent)]
    Forecast(#[from] ForecastError),
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("unknown policy '{0}'")]
    UnknownPolicy(String),
}

/// Arrivals per second of the trace, all applications together.
pub fn rates_per_second(trace: &Trace) -> Vec<f64> {
    let per_app = trace.per_second();
    let seconds = per_app.first().map_or(0, Vec::len);
    (0..seconds)
        .map(|s| per_app.iter().map(|a| a[s] as f64).sum())
        .collect()
}

/// The trace of pattern `pattern` under the traces' root `root` (`root/pattern/300`).
pub fn read_pattern(root: &Path, pattern: &str) -> Result<Trace, TraceError> {
    Trace::read_proteus_dir(&root.join(pattern).join("300"))
}

/// One forecaster on one trace: its errors at each of [`HORIZONS`] on the trace's second half.
#[derive(Debug, Clone, PartialEq)]
pub struct ForecastRow {
    /// The trace (pattern) name.
    pub trace: String,
    /// The forecaster, or `best` for the model [`pick_best`] chose on the first half.
    pub model: String,
    /// Per horizon of [`HORIZONS`].
    pub errors: Vec<ErrorReport>,
    /// For `best`: the model chosen at each horizon.
    pub chosen: Vec<ForecastModel>,
}

/// The label of [`pick_best`]'s row.
pub const BEST: &str = "best";

/// The fixed forecasters of the table (standard weights, not tuned to any trace): the naive
/// forecast, a 5 s moving average, an EWMA, Holt, and Holt-Winters with the season the first
/// half's autocorrelation shows (none when it shows none).
pub fn table_models(first_half: &[f64]) -> Vec<ForecastModel> {
    let mut out = vec![
        ForecastModel::LastValue,
        ForecastModel::MovingAverage { window: 5 },
        ForecastModel::Ewma { alpha: 0.5 },
        ForecastModel::HoltLinear {
            alpha: 0.5,
            beta: 0.1,
        },
    ];
    if let Some(&season) = candidate_seasons(first_half, 1, 0.2).first() {
        out.push(ForecastModel::HoltWinters {
            alpha: 0.3,
            beta: 0.05,
            gamma: 0.3,
            season,
        });
    }
    out
}

/// The rows of one trace's per-second rates `series`: every model of [`table_models`] and
/// [`BEST`], measured on `series[len / 2..]`.
pub fn evaluate_series(trace: &str, series: &[f64]) -> Result<Vec<ForecastRow>, ForecastError> {
    let split = series.len() / 2;
    let mut rows = Vec::new();
    for m in table_models(&series[..split]) {
        let errors = HORIZONS
            .iter()
            .map(|&h| forecast_errors_from(series, m, h, split))
            .collect::<Result<Vec<_>, _>>()?;
        rows.push(ForecastRow {
            trace: trace.to_string(),
            model: m.to_string(),
            errors,
            chosen: Vec::new(),
        });
    }
    let picks = HORIZONS
        .iter()
        .map(|&h| pick_best(series, h))
        .collect::<Result<Vec<_>, _>>()?;
    rows.push(ForecastRow {
        trace: trace.to_string(),
        model: BEST.to_string(),
        errors: picks.iter().map(|p| p.holdout).collect(),
        chosen: picks.iter().map(|p| p.model).collect(),
    });
    Ok(rows)
}

/// Forecaster errors on traces, as a markdown table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ForecastTable {
    /// Grouped by trace, in [`PATTERNS`]' order.
    pub rows: Vec<ForecastRow>,
}

impl ForecastTable {
    /// The row of `model` on `trace`.
    pub fn row(&self, trace: &str, model: &str) -> Option<&ForecastRow> {
        self.rows
            .iter()
            .find(|r| r.trace == trace && r.model == model)
    }
}

impl fmt::Display for ForecastTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "| trace | forecaster |")?;
        for h in HORIZONS {
            write!(f, " MAPE {h} s |")?;
        }
        writeln!(f, " chosen (best) |")?;
        write!(f, "|---|---|")?;
        for _ in HORIZONS {
            write!(f, "---|")?;
        }
        writeln!(f, "---|")?;
        for r in &self.rows {
            write!(f, "| `{}` | {} |", r.trace, r.model)?;
            for e in &r.errors {
                write!(f, " {:.1} % |", e.mape * 100.0)?;
            }
            let chosen: Vec<String> = r.chosen.iter().map(|m| m.to_string()).collect();
            writeln!(f, " {} |", chosen.join("; "))?;
        }
        Ok(())
    }
}

/// Every forecaster on every trace of [`PATTERNS`] under `root` (the `twitter` directory of
/// the Proteus data).
pub fn evaluate_proteus(root: &Path) -> Result<ForecastTable, EvalError> {
    let mut table = ForecastTable::default();
    for p in PATTERNS {
        let trace = read_pattern(root, p)?;
        table
            .rows
            .extend(evaluate_series(p, &rates_per_second(&trace))?);
    }
    Ok(table)
}

/// One policy on one trace.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingRow {
    /// The trace (pattern) name.
    pub trace: String,
    pub policy: String,
    pub queries: u64,
    /// Queries that missed their SLO or were dropped.
    pub violations: u64,
    pub slo_attainment: f64,
    pub p99_ms: Option<f64>,
    /// Price of the resources held over the run, dollars.
    pub cost_usd: f64,
    /// Scaling actions by kind (`replicate`, `add-threads`, ...), as `kind n` pairs.
    pub actions: String,
}

/// Policies compared on traces, as a markdown table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScalingTable {
    pub rows: Vec<ScalingRow>,
}

impl ScalingTable {
    /// The row of `policy` on `trace`.
    pub fn row(&self, trace: &str, policy: &str) -> Option<&ScalingRow> {
        self.rows
            .iter()
            .find(|r| r.trace == trace && r.policy == policy)
    }
}

impl fmt::Display for ScalingTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "| trace | policy | queries | SLO violations | SLO attained | p99 ms | cost $ | actions |"
        )?;
        writeln!(f, "|---|---|---|---|---|---|---|---|")?;
        for r in &self.rows {
            writeln!(
                f,
                "| `{}` | {} | {} | {} | {:.2} % | {} | {:.3} | {} |",
                r.trace,
                r.policy,
                r.queries,
                r.violations,
                r.slo_attainment * 100.0,
                r.p99_ms.map_or("-".to_string(), |p| format!("{p:.0}")),
                r.cost_usd,
                r.actions
            )?;
        }
        Ok(())
    }
}

/// The CPU profiles of a catalogue: the cluster Themis scales in place (its vertical scaling
/// adds CPU cores; Themis §3.3).
pub fn cpu_only(catalogue: &[Profile]) -> Vec<Profile> {
    catalogue
        .iter()
        .filter(|p| p.accelerator == Accelerator::Cpu)
        .cloned()
        .collect()
}

/// The cluster of the Themis comparison: CPU workers only (Themis scales CPU cores in place,
/// §3.3), 64 of 16 cores, so that the traces' peaks fit; instances of 1 thread (Themis'
/// 1-core instances, §5.1.2), which vertical scaling may grow to 16; monitoring and scaling
/// every `tick_ms` ms. Use it with [`cpu_only`] profiles.
pub fn themis_cluster(tick_ms: f64) -> Cluster {
    Cluster {
        cpu_workers: 64,
        cpu_cores: 16,
        gpu_workers: 0,
        cpu_threads: 1,
        tick_ms,
        ..Cluster::default()
    }
}

/// Runs each of `policies` (names [`by_name`] knows) on `trace` (called `name`) with the
/// variants of `catalogue` on `cluster`.
pub fn compare_scaling(
    name: &str,
    trace: &Trace,
    catalogue: &[Profile],
    cluster: &Cluster,
    policies: &[&str],
) -> Result<Vec<ScalingRow>, EvalError> {
    let variants = variants_for(trace, catalogue, cluster)?;
    let mut rows = Vec::new();
    for &p in policies {
        let mut policy = by_name(p, ScalingConfig::default())
            .ok_or_else(|| EvalError::UnknownPolicy(p.to_string()))?;
        let r = simulate(
            trace,
            variants.clone(),
            cluster,
            policy.as_mut(),
            &mut |_, _| {},
        )?;
        let q = r.summary.queries;
        let actions: Vec<String> = r
            .actions_by_kind
            .iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        rows.push(ScalingRow {
            trace: name.to_string(),
            policy: r.policy.clone(),
            queries: q,
            violations: (q as f64 * (1.0 - r.summary.slo_attainment)).round() as u64,
            slo_attainment: r.summary.slo_attainment,
            p99_ms: r.summary.p99_ms,
            cost_usd: r.summary.cost_usd,
            actions: actions.join(", "),
        });
    }
    Ok(rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_table_measures_every_model_on_the_second_half() {
        // A level of 200 with a spike every 12 s: Holt-Winters is in the table, and the best
        // model beats the naive forecast.
        let series: Vec<f64> = (0..240)
            .map(|i| {
                if i % 12 == 5 {
                    800.0
                } else {
                    200.0 + (i % 3) as f64
                }
            })
            .collect();
        let rows = evaluate_series("spiky", &series).unwrap();
        assert_eq!(rows.len(), 6, "{rows:?}");
        assert!(rows.iter().all(|r| r.errors.len() == HORIZONS.len()));
        assert!(rows.iter().all(|r| r.errors[0].n == 120), "{rows:?}");
        let table = ForecastTable { rows };
        let best = table.row("spiky", BEST).unwrap();
        let naive = table.row("spiky", "last-value").unwrap();
        for h in 0..HORIZONS.len() {
            assert!(best.errors[h].mape < 0.5 * naive.errors[h].mape, "{table}");
        }
        let md = table.to_string();
        assert!(md.starts_with("| trace | forecaster | MAPE 1 s |"), "{md}");
        assert!(md.contains("holt-winters("), "{md}");
    }

    #[test]
    fn rates_add_up_the_applications() {
        let mut t = Trace::default();
        let (a, b) = (t.app_index("a"), t.app_index("b"));
        for (at_ms, app) in [(10.0, a), (20.0, b), (1500.0, a), (2100.0, b), (2200.0, b)] {
            t.arrivals.push(infaas_sim::trace::Arrival {
                at_ms,
                app,
                slo_ms: None,
                min_accuracy: None,
            });
        }
        assert_eq!(rates_per_second(&t), vec![2.0, 1.0, 2.0]);
    }
}
