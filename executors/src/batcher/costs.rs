//! What a session run costs by batch size, learned from the instance's own runs, and whether
//! rows are worth gathering into fewer runs.
//!
//! A run costs about `F + r * rows`: a fixed part (ONNX Runtime's per-run work, kernel
//! dispatch, reloading the weights into caches the HTTP path has just used) and a part per
//! row. When `F` outweighs a row's own cost, every row that joins a batch instead of running
//! alone saves more than it adds: a small MLP served beside an HTTP edge costs about 48 µs a
//! run and 1 µs a row, so at 16 closed-loop clients, where runs took 1.8 rows on average,
//! most of the machine's time went to fixed costs. When a row's own cost dominates (a
//! convolutional model: about 20 µs a run and 22 µs a row), gathering rows saves little and
//! only delays the ones waiting, so nothing is gathered (see [`Split::gathering_pays`] for
//! where the line is drawn).
//!
//! The figures are the instance's own, measured where it serves (on the batcher's thread or
//! the caller's, with whatever else the machine runs), not its profile's, which was measured
//! back to back on an idle machine. Each size keeps the median of its latest runs, not a
//! moving mean: a session's first runs can take a hundred times its usual run. Single-row runs
//! are left out: under load they are the odd ones (a row that found nothing to batch with,
//! often on a thread just woken), 100-130 µs for the convolutional model whose single rows take
//! 30 µs back to back, and fewer and odder the more rows are gathered; judged on them, the
//! decision came and went with the noise.

use std::time::Duration;

/// Batch sizes tracked one by one; larger runs count with this size's figure.
const SIZES: usize = 64;
/// Latest runs kept per size; their median is the size's figure.
const WINDOW: usize = 15;
/// Runs of a size before its figure is trusted.
const MIN_RUNS: usize = 8;
/// The smallest batch size compared (see the module's doc on single-row runs).
const SMALLEST: usize = 2;
/// Rows between the two sizes compared, at least: a difference between sizes close together
/// is mostly noise.
const MIN_SPAN: usize = 3;

/// The latest run times of one batch size, in ns.
#[derive(Debug, Clone, Default)]
struct Runs {
    latest: [u32; WINDOW],
    seen: usize,
}

impl Runs {
    fn add(&mut self, ns: u32) {
        self.latest[self.seen % WINDOW] = ns;
        self.seen += 1;
    }

    /// The median of the latest runs, once there are [`MIN_RUNS`] of them.
    fn median(&self) -> Option<f64> {
        if self.seen < MIN_RUNS {
            return None;
        }
        let mut v = self.latest;
        let v = &mut v[..self.seen.min(WINDOW)];
        let mid = v.len() / 2;
        let (_, m, _) = v.select_nth_unstable(mid);
        Some(f64::from(*m))
    }
}

/// Latest run times by batch size.
#[derive(Debug, Clone)]
pub(crate) struct RunCosts {
    /// Runs of `index + 1` rows.
    by_size: Vec<Runs>,
}

impl Default for RunCosts {
    fn default() -> Self {
        RunCosts {
            by_size: vec![Runs::default(); SIZES],
        }
    }
}

/// A run's cost split into its fixed and per-row parts, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Split {
    pub fixed_ns: f64,
    pub per_row_ns: f64,
}

impl Split {
    /// Whether gathering rows into fewer runs pays, given whether it did so far: it starts
    /// when a run's fixed part costs at least [`START`] rows, and stops when it costs less than
    /// [`STOP`] rows. The margin keeps an instance near the line from flipping with every run.
    /// Where the line is was measured on the HTTP server: the convolutional model above, whose
    /// fixed part under load is about one row and at times up to 3, served 1-12% fewer queries
    /// when it gathered at a line of 1 or 2 rows; the MLP, whose fixed part is 6 rows and more,
    /// 12-20% more.
    pub(crate) fn gathering_pays(&self, did: bool) -> bool {
        let rows = if did { STOP } else { START };
        self.fixed_ns >= rows * self.per_row_ns
    }
}

/// A run's fixed part, in rows, from which gathering starts.
const START: f64 = 4.0;
/// A run's fixed part, in rows, below which gathering stops.
const STOP: f64 = 2.0;

impl RunCosts {
    /// One run of `rows` rows that took `took`; whether it counts (runs of fewer than
    /// [`SMALLEST`] rows do not).
    pub(crate) fn record(&mut self, rows: usize, took: Duration) -> bool {
        if rows < SMALLEST {
            return false;
        }
        let ns = u32::try_from(took.as_nanos()).unwrap_or(u32::MAX);
        self.by_size[rows.min(SIZES) - 1].add(ns);
        true
    }

    /// The split between the smallest batch size seen often enough (from [`SMALLEST`] rows)
    /// and the largest, at least [`MIN_SPAN`] rows larger; `None` until two such sizes have
    /// been seen [`MIN_RUNS`] times each.
    pub(crate) fn split(&self) -> Option<Split> {
        let seen = |k: usize| self.by_size[k].median().map(|t| (k + 1, t));
        let (small, ts) = (0..SIZES).find_map(seen)?;
        let (large, tl) = (small + MIN_SPAN - 1..SIZES).rev().find_map(seen)?;
        let per_row_ns = ((tl - ts) / (large - small) as f64).max(0.0);
        Some(Split {
            fixed_ns: (ts - small as f64 * per_row_ns).max(0.0),
            per_row_ns,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(costs: &mut RunCosts, rows: usize, us: u64, n: usize) {
        for _ in 0..n {
            costs.record(rows, Duration::from_micros(us));
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1.0
    }

    #[test]
    fn a_large_fixed_cost_makes_gathering_pay() {
        // A small MLP beside the HTTP edge: 47 µs a run, 1 µs a row.
        let mut c = RunCosts::default();
        runs(&mut c, 2, 49, 20);
        runs(&mut c, 8, 55, 20);
        let s = c.split().unwrap();
        assert!(close(s.per_row_ns, 1_000.0), "{s:?}");
        assert!(close(s.fixed_ns, 47_000.0), "{s:?}");
        assert!(s.gathering_pays(false));
    }

    #[test]
    fn a_per_row_cost_that_dominates_gathers_nothing() {
        // A convolutional model: 7 µs a run, 23 µs a row.
        let mut c = RunCosts::default();
        runs(&mut c, 2, 7 + 2 * 23, 20);
        runs(&mut c, 16, 7 + 16 * 23, 20);
        let s = c.split().unwrap();
        assert!(close(s.per_row_ns, 23_000.0), "{s:?}");
        assert!(close(s.fixed_ns, 7_000.0), "{s:?}");
        assert!(!s.gathering_pays(false));
    }

    #[test]
    fn nothing_is_decided_without_two_sizes_apart() {
        let mut c = RunCosts::default();
        runs(&mut c, 2, 49, 100);
        assert_eq!(c.split(), None);
        // Batches of four rows are too close to two to tell the parts apart.
        runs(&mut c, 4, 51, 100);
        let s = c.split();
        assert_eq!(s, None);
        runs(&mut c, 5, 52, MIN_RUNS - 1);
        assert_eq!(c.split(), None);
        runs(&mut c, 5, 52, 1);
        assert!(c.split().unwrap().gathering_pays(false));
    }

    #[test]
    fn single_row_runs_do_not_count() {
        // Under load the few single-row runs are the slow ones.
        let mut c = RunCosts::default();
        runs(&mut c, 1, 120, 100);
        runs(&mut c, 8, 7 + 8 * 23, 20);
        assert_eq!(c.split(), None);
        runs(&mut c, 2, 7 + 2 * 23, 20);
        let s = c.split().unwrap();
        assert!(close(s.fixed_ns, 7_000.0), "{s:?}");
        assert!(!s.gathering_pays(false));
    }

    #[test]
    fn the_sizes_seen_often_enough_are_compared() {
        let mut c = RunCosts::default();
        runs(&mut c, 3, 44, 20);
        runs(&mut c, 6, 50, 20);
        // Seen once: not trusted, so 3 and 6 rows are the comparison.
        runs(&mut c, 2, 1, 1);
        runs(&mut c, 32, 4_000, 1);
        let s = c.split().unwrap();
        assert!(close(s.per_row_ns, 2_000.0), "{s:?}");
        assert!(close(s.fixed_ns, 38_000.0), "{s:?}");
        // Batches beyond the tracked sizes count with the largest.
        runs(&mut c, 500, 44 + 61 * 3, 20);
        let s = c.split().unwrap();
        assert!(close(s.per_row_ns, 3_000.0), "{s:?}");
    }

    #[test]
    fn the_figures_follow_a_change() {
        let mut c = RunCosts::default();
        runs(&mut c, 2, 49, 20);
        runs(&mut c, 8, 55, 20);
        assert!(c.split().unwrap().gathering_pays(false));
        // The machine or the model changes: a run now costs little more than its rows.
        runs(&mut c, 2, 20, WINDOW);
        runs(&mut c, 8, 80, WINDOW);
        assert!(!c.split().unwrap().gathering_pays(true));
    }

    #[test]
    fn a_cold_first_run_does_not_count() {
        // A convolutional model whose session's first run took 5 ms.
        let mut c = RunCosts::default();
        runs(&mut c, 2, 5_000, 1);
        runs(&mut c, 2, 7 + 2 * 23, MIN_RUNS - 1);
        runs(&mut c, 16, 7 + 16 * 23, 100);
        let s = c.split().unwrap();
        assert!(close(s.per_row_ns, 23_000.0), "{s:?}");
        assert!(!s.gathering_pays(false));
    }

    #[test]
    fn gathering_starts_at_four_rows_and_stops_below_two() {
        let split = |fixed_us: f64, per_row_us: f64| Split {
            fixed_ns: fixed_us * 1e3,
            per_row_ns: per_row_us * 1e3,
        };
        // A fixed part of 3 rows: not enough to start, enough to go on.
        assert!(!split(60.0, 20.0).gathering_pays(false));
        assert!(split(60.0, 20.0).gathering_pays(true));
        assert!(split(80.0, 20.0).gathering_pays(false));
        assert!(!split(39.0, 20.0).gathering_pays(true));
    }
}
