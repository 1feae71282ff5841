//! Live figures of an instance. Counters and gauges are atomics; the windows (latencies,
//! throughput, batch sizes) sit behind a mutex held only to add a sample or copy the
//! windows out, so a reader never holds the actor up for longer than a copy.

use infaas_core::stats::percentile;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::costs::{RunCosts, Split};

/// Requests and session runs kept for the percentiles.
const WINDOW: usize = 1000;
/// Span of the throughput window, in buckets of [`BUCKET_MS`].
const RATE_BUCKETS: usize = 20;
const BUCKET_MS: u64 = 100;

/// A snapshot of an instance's figures.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct InstanceFigures {
    /// Rows waiting in the queue (not yet dispatched to the session).
    pub queue_rows: usize,
    /// Requests waiting in the queue.
    pub queue_requests: usize,
    /// Whether the session is running (or has been handed) a batch.
    pub in_flight: bool,
    /// Requests run on the session (answered with outputs or an engine error).
    pub requests_total: u64,
    /// Rows of those requests.
    pub rows_total: u64,
    /// Requests answered with any error, rejections included (full queue, bad input,
    /// stopped, engine failure).
    pub errors_total: u64,
    /// Requests removed from the queue unrun because their caller had gone.
    pub cancelled_total: u64,
    /// Rows per second run over the last ~2 s.
    pub qps: f64,
    /// Session runs by batch size (rows), smallest size first; sizes never seen are left out.
    pub batch_histogram: Vec<(usize, u64)>,
    /// End-to-end latency (call to answer) over the last 1,000 requests run, in ms.
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// Session run time per batch over the last 1,000 runs, in ms.
    pub exec_p50_ms: f64,
    pub exec_p99_ms: f64,
    /// Whether this instance's runs have been measured to cost enough per run, next to a row,
    /// for rows to be worth gathering; a partial batch then waits one scheduling round for
    /// more rows if [`super::BatcherConfig::gather_rows`] is on.
    pub gathering: bool,
}

/// Where the actor writes and [`super::Instance::figures`] reads.
#[derive(Debug)]
pub(crate) struct Board {
    queue_rows: AtomicUsize,
    queue_requests: AtomicUsize,
    in_flight: AtomicBool,
    requests_total: AtomicU64,
    rows_total: AtomicU64,
    errors_total: AtomicU64,
    cancelled_total: AtomicU64,
    /// Whether gathering rows into fewer runs pays, as of the latest run ([`RunCosts`]).
    gathering_pays: AtomicBool,
    windows: Mutex<Windows>,
}

impl Board {
    pub(crate) fn new() -> Board {
        Board {
            queue_rows: AtomicUsize::new(0),
            queue_requests: AtomicUsize::new(0),
            in_flight: AtomicBool::new(false),
            requests_total: AtomicU64::new(0),
            rows_total: AtomicU64::new(0),
            errors_total: AtomicU64::new(0),
            cancelled_total: AtomicU64::new(0),
            gathering_pays: AtomicBool::new(false),
            windows: Mutex::new(Windows::new(Instant::now())),
        }
    }

    pub(crate) fn set_queue(&self, rows: usize, requests: usize, in_flight: bool) {
        self.queue_rows.store(rows, Ordering::Relaxed);
        self.queue_requests.store(requests, Ordering::Relaxed);
        self.in_flight.store(in_flight, Ordering::Relaxed);
    }

    /// Nothing queued and no batch handed to the session, as of the batcher's last turn.
    pub(crate) fn idle(&self) -> bool {
        !self.in_flight.load(Ordering::Relaxed) && self.queue_requests.load(Ordering::Relaxed) == 0
    }

    /// Whether rows are worth gathering into fewer runs, as measured on this instance's runs
    /// so far (see [`super::costs`]).
    pub(crate) fn gathering_pays(&self) -> bool {
        self.gathering_pays.load(Ordering::Relaxed)
    }

    pub(crate) fn error(&self) {
        self.errors_total.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn cancelled(&self, requests: usize) {
        self.cancelled_total
            .fetch_add(requests as u64, Ordering::Relaxed);
    }

    /// Requests answered from the session: `(rows, latency since the call)` each.
    pub(crate) fn answered(&self, answered: &[(usize, Duration)]) {
        let rows: usize = answered.iter().map(|&(rows, _)| rows).sum();
        self.requests_total
            .fetch_add(answered.len() as u64, Ordering::Relaxed);
        self.rows_total.fetch_add(rows as u64, Ordering::Relaxed);
        let mut w = self.windows();
        for &(_, latency) in answered {
            w.latency.add(ms(latency));
        }
    }

    /// One session run of `rows` rows, handed to the engine at `sent` and answered at `done`.
    /// The engine runs in order, so a run handed over while the previous one was still
    /// running started when that one finished: the run time counts from the later of the two.
    pub(crate) fn ran(&self, rows: usize, sent: Instant, done: Instant) {
        let mut w = self.windows();
        let started = w.last_done.map_or(sent, |last| last.max(sent));
        w.last_done = Some(done);
        let took = done.saturating_duration_since(started);
        w.exec.add(ms(took));
        if w.costs.record(rows, took) {
            self.judge_gathering(w.costs.split());
        }
        *w.histogram.entry(rows).or_insert(0) += 1;
        w.rate.add(done, rows as u64);
    }

    /// Whether gathering rows pays now, by the instance's latest split of its run costs.
    fn judge_gathering(&self, split: Option<Split>) {
        let did = self.gathering_pays();
        let Some(s) = split else { return };
        let pays = s.gathering_pays(did);
        if did != pays {
            self.gathering_pays.store(pays, Ordering::Relaxed);
            tracing::debug!(
                gathering = pays,
                fixed_us = s.fixed_ns / 1e3,
                per_row_us = s.per_row_ns / 1e3,
                "gathering rows switched"
            );
        }
    }

    pub(crate) fn snapshot(&self) -> InstanceFigures {
        let now = Instant::now();
        let (mut latency, mut exec, batch_histogram, qps) = {
            let w = self.windows();
            (
                w.latency.values.clone(),
                w.exec.values.clone(),
                w.histogram.iter().map(|(&k, &v)| (k, v)).collect(),
                w.rate.per_second(now),
            )
        };
        latency.sort_by(f64::total_cmp);
        exec.sort_by(f64::total_cmp);
        InstanceFigures {
            queue_rows: self.queue_rows.load(Ordering::Relaxed),
            queue_requests: self.queue_requests.load(Ordering::Relaxed),
            in_flight: self.in_flight.load(Ordering::Relaxed),
            requests_total: self.requests_total.load(Ordering::Relaxed),
            rows_total: self.rows_total.load(Ordering::Relaxed),
            errors_total: self.errors_total.load(Ordering::Relaxed),
            cancelled_total: self.cancelled_total.load(Ordering::Relaxed),
            qps,
            batch_histogram,
            latency_p50_ms: percentile(&latency, 0.50),
            latency_p99_ms: percentile(&latency, 0.99),
            exec_p50_ms: percentile(&exec, 0.50),
            exec_p99_ms: percentile(&exec, 0.99),
            gathering: self.gathering_pays(),
        }
    }

    fn windows(&self) -> MutexGuard<'_, Windows> {
        // Every update leaves the windows consistent, so a panic elsewhere cannot poison them.
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[derive(Debug)]
struct Windows {
    latency: Recent,
    exec: Recent,
    histogram: BTreeMap<usize, u64>,
    rate: Rate,
    last_done: Option<Instant>,
    costs: RunCosts,
}

impl Windows {
    fn new(start: Instant) -> Windows {
        Windows {
            latency: Recent::default(),
            exec: Recent::default(),
            histogram: BTreeMap::new(),
            rate: Rate::new(start),
            last_done: None,
            costs: RunCosts::default(),
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Nearest-rank percentile of sorted values; 0 when there are none.
/// The last [`WINDOW`] samples (a ring).
#[derive(Debug, Default)]
struct Recent {
    values: Vec<f64>,
    next: usize,
}

impl Recent {
    fn add(&mut self, v: f64) {
        if self.values.len() < WINDOW {
            self.values.push(v);
        } else {
            self.values[self.next] = v;
        }
        self.next = (self.next + 1) % WINDOW;
    }
}

/// Rows per second over the last [`RATE_BUCKETS`] buckets of [`BUCKET_MS`].
#[derive(Debug)]
struct Rate {
    start: Instant,
    /// `(bucket number since start, rows)` per slot.
    slots: [(u64, u64); RATE_BUCKETS],
}

impl Rate {
    fn new(start: Instant) -> Rate {
        Rate {
            start,
            slots: [(u64::MAX, 0); RATE_BUCKETS],
        }
    }

    fn bucket(&self, t: Instant) -> u64 {
        (t.saturating_duration_since(self.start).as_millis() / u128::from(BUCKET_MS)) as u64
    }

    fn add(&mut self, t: Instant, rows: u64) {
        let b = self.bucket(t);
        let slot = &mut self.slots[(b % RATE_BUCKETS as u64) as usize];
        if slot.0 != b {
            *slot = (b, 0);
        }
        slot.1 += rows;
    }

    fn per_second(&self, now: Instant) -> f64 {
        let current = self.bucket(now);
        let oldest = current.saturating_sub(RATE_BUCKETS as u64 - 1);
        let rows: u64 = self
            .slots
            .iter()
            .filter(|(b, _)| *b != u64::MAX && *b >= oldest && *b <= current)
            .map(|(_, rows)| rows)
            .sum();
        // The window runs from the start of the oldest bucket (or the start) to now.
        let from = self.start + Duration::from_millis(BUCKET_MS * oldest);
        let span = now.saturating_duration_since(from).as_secs_f64();
        if span <= 0.0 {
            0.0
        } else {
            rows as f64 / span
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn recent_keeps_the_last_thousand() {
        let mut r = Recent::default();
        for i in 0..1500 {
            r.add(f64::from(i));
        }
        assert_eq!(r.values.len(), WINDOW);
        assert_eq!(r.values.iter().copied().fold(f64::MAX, f64::min), 500.0);
    }

    #[test]
    fn rate_counts_the_last_two_seconds() {
        let t0 = Instant::now();
        let mut rate = Rate::new(t0);
        let ms = Duration::from_millis;
        rate.add(t0 + ms(50), 100);
        rate.add(t0 + ms(950), 300);
        assert!((rate.per_second(t0 + ms(1000)) - 400.0).abs() < 1e-6);
        // At 2.55 s the window starts at 0.6 s (buckets 6..=25): only the second sample.
        let expected = 300.0 / 1.95;
        assert!((rate.per_second(t0 + ms(2550)) - expected).abs() < 1e-6);
        assert_eq!(rate.per_second(t0 + ms(10_000)), 0.0);
    }

    #[test]
    fn run_time_counts_from_the_previous_run_when_queued_behind_it() {
        let board = Board::new();
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        board.ran(4, t0, t0 + ms(10));
        // Handed over at 2 ms, behind the first run: it ran from 10 ms to 15 ms.
        board.ran(2, t0 + ms(2), t0 + ms(15));
        let f = board.snapshot();
        assert_eq!(f.batch_histogram, vec![(2, 1), (4, 1)]);
        assert!((f.exec_p50_ms - 5.0).abs() < 1e-9, "{f:?}");
        assert!((f.exec_p99_ms - 10.0).abs() < 1e-9, "{f:?}");
    }
}
