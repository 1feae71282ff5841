//! What a simulated run measured: per-second series and totals, written as JSON or CSV.

use serde::Serialize;

/// Latency histogram: logarithmic buckets from 10 µs to about 20 minutes, 5% wide, so a
/// percentile read from it is within 5% of the exact one.
#[derive(Debug, Clone)]
pub struct Histogram {
    counts: Vec<u64>,
    total: u64,
}

const H_MIN_MS: f64 = 0.01;
const H_GROWTH: f64 = 1.05;
const H_BUCKETS: usize = 400;

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; H_BUCKETS],
            total: 0,
        }
    }
}

impl Histogram {
    /// The bucket that holds `ms` (for [`Histogram::add_to`]).
    pub(crate) fn bucket(ms: f64) -> usize {
        if ms <= H_MIN_MS {
            return 0;
        }
        ((ms / H_MIN_MS).ln() / H_GROWTH.ln())
            .ceil()
            .min((H_BUCKETS - 1) as f64) as usize
    }

    pub fn add(&mut self, ms: f64) {
        self.add_to(Self::bucket(ms));
    }

    /// Counts one latency in `bucket` ([`Histogram::bucket`]): a latency added to several
    /// histograms is bucketed once.
    pub(crate) fn add_to(&mut self, bucket: usize) {
        self.counts[bucket.min(H_BUCKETS - 1)] += 1;
        self.total += 1;
    }

    pub fn merge(&mut self, other: &Histogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    pub fn count(&self) -> u64 {
        self.total
    }

    /// The `q` quantile (0..1) in ms: the upper edge of the bucket that holds it; `None` when
    /// empty.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Some(H_MIN_MS * H_GROWTH.powi(i as i32));
            }
        }
        None
    }
}

/// One simulated second.
#[derive(Debug, Clone, Default)]
pub struct Second {
    pub arrivals: u64,
    /// Queries answered (whenever they arrived), and of them within their SLO.
    pub served: u64,
    pub met_slo: u64,
    /// Queries no variant could take (counted as missing their SLO).
    pub dropped: u64,
    pub latency: Histogram,
    /// Sum of the accuracy of the variants that answered.
    pub accuracy_sum: f64,
    /// Price of the resources held, in the price unit.
    pub cost: f64,
    /// Instances loaded or loading at the end of the second, by hardware (cpu, gpu).
    pub instances: [u32; 2],
    /// Live workers (CPU only, with a GPU) at the end of the second.
    pub workers: [u32; 2],
    /// Scaling changes the policy asked for in the second.
    pub actions: u32,
}

/// Totals of a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Summary {
    pub queries: u64,
    /// Fraction of all queries answered within their SLO (dropped ones count as misses).
    pub slo_attainment: f64,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Price of every resource held over the run.
    pub cost_usd: f64,
    /// Mean accuracy of the variants that answered.
    pub mean_accuracy: Option<f64>,
    pub dropped: u64,
    /// Scaling changes over the run.
    pub actions: u64,
    /// Simulated queries per second of wall time (the simulator's own speed).
    pub sim_queries_per_s: f64,
}

/// One point of the per-second series.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Point {
    pub second: usize,
    pub arrivals: u64,
    pub slo_attainment: Option<f64>,
    pub p50_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub cost_per_s: f64,
    pub mean_accuracy: Option<f64>,
    pub cpu_instances: u32,
    pub gpu_instances: u32,
    pub cpu_workers: u32,
    pub gpu_workers: u32,
    pub actions: u32,
    pub dropped: u64,
}

/// What became of one offline job.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JobReport {
    pub app: String,
    pub rows: u64,
    pub done_rows: u64,
    pub submitted_s: f64,
    /// When its last row was done (`None`: not by the end of the run).
    pub finished_s: Option<f64>,
    /// How long the job runner waited for online traffic to leave room.
    pub paused_s: f64,
}

/// One application's totals in a run.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AppSummary {
    pub app: String,
    pub queries: u64,
    pub slo_attainment: f64,
    pub p99_ms: Option<f64>,
    pub mean_accuracy: Option<f64>,
    pub dropped: u64,
}

/// A policy's run: its totals, per application and per second.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PolicyReport {
    pub policy: String,
    pub summary: Summary,
    /// Scaling actions over the run by kind (`replicate`, `upgrade`, `downgrade`,
    /// `remove-replica`, `add-threads`, `remove-threads`, `rebalance`, `migrate`, `load-on-demand`,
    /// `add-worker`, `remove-worker`, `provision`, ...).
    pub actions_by_kind: std::collections::BTreeMap<String, u64>,
    /// Online queries that missed their SLO, by cause: `waited-for-load` (arrived before their
    /// instance was ready), `slow-batch` (their batch alone ran longer than the SLO), `queued`
    /// (waited behind other batches of a ready instance). Dropped queries are not counted here.
    pub misses_by_cause: std::collections::BTreeMap<String, u64>,
    /// The workload's offline jobs.
    pub jobs: Vec<JobReport>,
    pub apps: Vec<AppSummary>,
    pub series: Vec<Point>,
}

/// The totals of one application from its tally (a [`Second`] over the whole run).
pub fn app_summary(app: &str, t: &Second) -> AppSummary {
    AppSummary {
        app: app.to_string(),
        queries: t.arrivals,
        slo_attainment: if t.arrivals > 0 {
            t.met_slo as f64 / t.arrivals as f64
        } else {
            1.0
        },
        p99_ms: t.latency.quantile(0.99),
        mean_accuracy: (t.served > 0).then(|| t.accuracy_sum / t.served as f64),
        dropped: t.dropped,
    }
}

/// Builds the report of a run from its seconds.
pub fn report(policy: &str, seconds: &[Second], wall_s: f64) -> PolicyReport {
    let mut all = Histogram::default();
    let (mut queries, mut served, mut met, mut dropped, mut acc, mut cost, mut actions) =
        (0, 0, 0, 0, 0.0, 0.0, 0);
    let mut series = Vec::with_capacity(seconds.len());
    for (i, s) in seconds.iter().enumerate() {
        all.merge(&s.latency);
        queries += s.arrivals;
        served += s.served;
        met += s.met_slo;
        dropped += s.dropped;
        acc += s.accuracy_sum;
        cost += s.cost;
        actions += u64::from(s.actions);
        let answered = s.served + s.dropped;
        series.push(Point {
            second: i,
            arrivals: s.arrivals,
            slo_attainment: (answered > 0).then(|| s.met_slo as f64 / answered as f64),
            p50_ms: s.latency.quantile(0.5),
            p99_ms: s.latency.quantile(0.99),
            cost_per_s: s.cost,
            mean_accuracy: (s.served > 0).then(|| s.accuracy_sum / s.served as f64),
            cpu_instances: s.instances[0],
            gpu_instances: s.instances[1],
            cpu_workers: s.workers[0],
            gpu_workers: s.workers[1],
            actions: s.actions,
            dropped: s.dropped,
        });
    }
    PolicyReport {
        policy: policy.to_string(),
        summary: Summary {
            queries,
            slo_attainment: if queries > 0 {
                met as f64 / queries as f64
            } else {
                1.0
            },
            p50_ms: all.quantile(0.5),
            p99_ms: all.quantile(0.99),
            cost_usd: cost,
            mean_accuracy: (served > 0).then(|| acc / served as f64),
            dropped,
            actions,
            sim_queries_per_s: if wall_s > 0.0 {
                queries as f64 / wall_s
            } else {
                0.0
            },
        },
        actions_by_kind: Default::default(),
        misses_by_cause: Default::default(),
        jobs: Vec::new(),
        apps: Vec::new(),
        series,
    }
}

/// The per-second series of several policies as CSV, one row per (policy, second).
pub fn series_csv(reports: &[PolicyReport], out: &mut impl std::io::Write) -> std::io::Result<()> {
    writeln!(
        out,
        "policy,second,arrivals,slo_attainment,p50_ms,p99_ms,cost_per_s,mean_accuracy,cpu_instances,gpu_instances,cpu_workers,gpu_workers,actions,dropped"
    )?;
    let opt = |x: Option<f64>| x.map(|v| format!("{v:.6}")).unwrap_or_default();
    for r in reports {
        for p in &r.series {
            writeln!(
                out,
                "{},{},{},{},{},{},{:.9},{},{},{},{},{},{},{}",
                r.policy,
                p.second,
                p.arrivals,
                opt(p.slo_attainment),
                opt(p.p50_ms),
                opt(p.p99_ms),
                p.cost_per_s,
                opt(p.mean_accuracy),
                p.cpu_instances,
                p.gpu_instances,
                p.cpu_workers,
                p.gpu_workers,
                p.actions,
                p.dropped
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_their_bucket() {
        let mut h = Histogram::default();
        for i in 1..=1000 {
            h.add(i as f64);
        }
        let p50 = h.quantile(0.5).unwrap();
        let p99 = h.quantile(0.99).unwrap();
        assert!((p50 / 500.0 - 1.0).abs() <= 0.05, "{p50}");
        assert!((p99 / 990.0 - 1.0).abs() <= 0.05, "{p99}");
        assert_eq!(Histogram::default().quantile(0.5), None);
    }

    #[test]
    fn totals_count_drops_as_misses() {
        let mut s = Second {
            arrivals: 10,
            served: 8,
            met_slo: 6,
            dropped: 2,
            accuracy_sum: 8.0 * 0.75,
            cost: 0.5,
            ..Second::default()
        };
        s.latency.add(10.0);
        let r = report("p", &[s.clone(), s], 2.0);
        assert_eq!(r.summary.queries, 20);
        assert!((r.summary.slo_attainment - 0.6).abs() < 1e-12);
        assert!((r.summary.cost_usd - 1.0).abs() < 1e-12);
        assert_eq!(r.summary.mean_accuracy, Some(0.75));
        assert!((r.summary.sim_queries_per_s - 10.0).abs() < 1e-12);
        assert_eq!(r.series[1].slo_attainment, Some(0.6));
    }
}
