//! What the pipelines did recently on this controller (arrivals, how often each switch branch
//! ran, latencies, drops, cost, accuracy measured on validation sets), the allocation queries
//! are routed by, the tuners, and the checked copies queries reuse: in memory, for the
//! planner, the loops and the dashboard. State only: the operations that feed and read it sit
//! above.

use infaas_core::stats::select_percentile;
use infaas_scheduler::pipeline::tuner::in_window;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::installed::Installed;
use super::prepared::Prepared;
use super::tuners::Tuners;

/// Arrivals kept per pipeline for planning (the last hour at most).
const ARRIVALS_KEPT_MS: f64 = 3_600_000.0;
/// How long a checked pipeline is reused by queries before it is read and checked again
/// (changes made through this controller take effect at once).
const PREPARED_TTL: Duration = Duration::from_secs(2);

/// One measured combination: its accuracy, and per model the accuracy of the variant that
/// ran it.
#[derive(Debug, Clone, PartialEq)]
pub struct Measured {
    pub accuracy: f64,
    pub variants: Vec<(String, f64)>,
}

/// The forecasts' key of a pipeline (not an application's name: those have no `/`).
pub fn forecast_key(name: &str) -> String {
    format!("pipeline/{name}")
}

/// Recent activity of one pipeline.
#[derive(Debug, Default)]
struct Activity {
    /// Arrival times (ms since the Unix epoch), oldest first, the last hour.
    arrivals: VecDeque<f64>,
    /// Per node: (queries that reached its parents, queries it ran for).
    branches: HashMap<String, (u64, u64)>,
    /// Per node: (when, latency ms) of its runs in the last minute, and the last variant.
    node_runs: HashMap<String, NodeRuns>,
    /// End-to-end (when, latency ms) of the last minute.
    answers: VecDeque<(f64, f64)>,
    /// Per second (ms since the Unix epoch / 1000): queries answered, and within the SLO.
    seconds: VecDeque<(i64, u64, u64)>,
    /// Per answered query, its latency beyond the profiled model time of its longest path
    /// (dispatch, transfers, combiners, queueing), ms; the last [`OVERHEAD_KEPT`].
    overhead: VecDeque<f64>,
    /// End-to-end accuracies measured on a validation set, by (set's key, models per node).
    measured: HashMap<(String, Vec<String>), Measured>,
    /// Per second: (second, queries answered, sum of their accuracies, queries dropped).
    quality: VecDeque<(i64, u64, f64, u64)>,
    /// Queries dropped early, per node, since the controller started.
    drops: HashMap<String, u64>,
    /// Per second: (second, what the pipeline's loaded instances cost per hour), the last
    /// sample of the second; [`super::status::record_costs`] samples it once a second.
    cost: VecDeque<(i64, f64)>,
    /// The accuracy-scaling allocation queries are routed by, if any.
    loki: Option<Arc<Installed>>,
}

impl Activity {
    /// Adds to the current second's quality figures.
    fn quality(&mut self, sec: i64, answered: u64, accuracy: f64, dropped: u64) {
        match self.quality.back_mut() {
            Some(last) if last.0 == sec => {
                last.1 += answered;
                last.2 += accuracy;
                last.3 += dropped;
            }
            _ => self.quality.push_back((sec, answered, accuracy, dropped)),
        }
        while self
            .quality
            .front()
            .is_some_and(|s| sec - s.0 > SECONDS_KEPT)
        {
            self.quality.pop_front();
        }
    }
}

/// Overhead samples kept per pipeline.
const OVERHEAD_KEPT: usize = 10_000;

/// A node's (when, latency ms) runs of the last minute and the variant of its last run.
type NodeRuns = (VecDeque<(f64, f64)>, Option<String>);
/// Checked pipelines by (tenant, name), with when they were checked.
type PreparedCache = HashMap<(String, String), (Instant, Arc<Prepared>)>;

/// Seconds of attainment, quality and cost history kept per pipeline.
pub(crate) const SECONDS_KEPT: i64 = 1800;
/// Window of the per-node and end-to-end latency figures.
const RECENT_MS: f64 = 60_000.0;

fn prune(q: &mut VecDeque<(f64, f64)>, now: f64) {
    while q.front().is_some_and(|(t, _)| now - t > RECENT_MS) {
        q.pop_front();
    }
}

/// What a pipeline did in the last minute and its SLO attainment per second.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RecentFigures {
    /// Per node: (node, runs in the last minute, p99 latency ms, last variant).
    pub nodes: Vec<(String, usize, Option<f64>, Option<String>)>,
    pub queries_last_minute: usize,
    pub p99_ms: Option<f64>,
    /// Per second: (ms since the Unix epoch, queries answered, within the SLO), oldest first.
    pub seconds: Vec<(i64, u64, u64)>,
    /// Per second: (ms since the Unix epoch, queries answered, their mean accuracy, queries
    /// dropped early), oldest first.
    pub quality: Vec<(i64, u64, Option<f64>, u64)>,
    /// Per second: (ms since the Unix epoch, what the pipeline's loaded instances cost, $/h),
    /// oldest first.
    pub cost: Vec<(i64, f64)>,
    /// Queries dropped early per node (since the controller started).
    pub drops: Vec<(String, u64)>,
}

/// Arrival times (ms since the Unix epoch) by (tenant, pipeline).
type UnsharedArrivals = HashMap<(String, String), Vec<i64>>;

/// What the pipelines did recently, per tenant and pipeline (in memory, this controller).
#[derive(Debug, Default)]
pub struct PipelineActivity {
    inner: Mutex<HashMap<(String, String), Activity>>,
    prepared: Mutex<PreparedCache>,
    /// The tuners of the pipelines whose plan was applied on this controller.
    pub tuners: Tuners,
    /// This replica's arrivals not yet published to the other replicas (ms since the Unix
    /// epoch); `None` while nothing publishes them ([`crate::exchange`]).
    unshared: Mutex<Option<UnsharedArrivals>>,
}

impl PipelineActivity {
    fn with<R>(&self, tenant: &str, name: &str, f: impl FnOnce(&mut Activity) -> R) -> R {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        f(map
            .entry((tenant.to_string(), name.to_string()))
            .or_default())
    }

    /// Records a query's arrival.
    pub fn arrival(&self, tenant: &str, name: &str, at_ms: f64) {
        if let Some(unshared) = self
            .unshared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
        {
            unshared
                .entry((tenant.to_string(), name.to_string()))
                .or_default()
                .push(at_ms as i64);
        }
        self.insert_arrivals(tenant, name, &[at_ms]);
    }

    /// From now on, keeps this replica's arrivals for [`PipelineActivity::take_unshared`]
    /// too.
    pub fn share(&self) {
        self.unshared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new);
    }

    /// This replica's arrivals since the last call, by (tenant, pipeline) (nothing before
    /// [`PipelineActivity::share`]).
    pub fn take_unshared(&self) -> HashMap<(String, String), Vec<i64>> {
        self.unshared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Adds arrivals that another replica received, each into its place in time (they are
    /// not published again).
    pub fn merge_arrivals(&self, tenant: &str, name: &str, at_ms: &[i64]) {
        let times: Vec<f64> = at_ms.iter().map(|&t| t as f64).collect();
        self.insert_arrivals(tenant, name, &times);
    }

    fn insert_arrivals(&self, tenant: &str, name: &str, times: &[f64]) {
        self.with(tenant, name, |a| {
            for &at_ms in times {
                // Usually the newest; a late one from another replica goes into its place.
                let after = a.arrivals.iter().rev().take_while(|&&t| t > at_ms).count();
                let at = a.arrivals.len() - after;
                a.arrivals.insert(at, at_ms);
            }
            let Some(&newest) = a.arrivals.back() else {
                return;
            };
            while a
                .arrivals
                .front()
                .is_some_and(|t| newest - t > ARRIVALS_KEPT_MS)
            {
                a.arrivals.pop_front();
            }
        });
    }

    /// Records how many of the rows that reached a switch node it ran on (every row of a
    /// request is a query of the pipeline).
    pub fn branch(&self, tenant: &str, name: &str, node: &str, reached: usize, ran: usize) {
        self.with(tenant, name, |a| {
            let e = a.branches.entry(node.to_string()).or_default();
            e.0 += reached as u64;
            e.1 += ran as u64;
        });
    }

    /// Records a node's run: its latency and variant.
    pub fn node_run(
        &self,
        tenant: &str,
        name: &str,
        node: &str,
        latency_ms: f64,
        variant: Option<&str>,
    ) {
        let now = infaas_core::time::now_ms() as f64;
        self.with(tenant, name, |a| {
            let e = a.node_runs.entry(node.to_string()).or_default();
            e.0.push_back((now, latency_ms));
            prune(&mut e.0, now);
            if let Some(v) = variant {
                e.1 = Some(v.to_string());
            }
        });
    }

    /// Records an answered query: its end-to-end latency, whether it met the SLO, and its
    /// latency beyond the profiled model time of its longest path.
    pub fn answered(
        &self,
        tenant: &str,
        name: &str,
        latency_ms: f64,
        within: bool,
        overhead_ms: f64,
        accuracy: f64,
    ) {
        let now = infaas_core::time::now_ms() as f64;
        let sec = (now / 1000.0) as i64;
        self.with(tenant, name, |a| {
            a.quality(sec, 1, if accuracy.is_finite() { accuracy } else { 0.0 }, 0);
            if overhead_ms.is_finite() {
                a.overhead.push_back(overhead_ms.max(0.0));
                if a.overhead.len() > OVERHEAD_KEPT {
                    a.overhead.pop_front();
                }
            }
            a.answers.push_back((now, latency_ms));
            prune(&mut a.answers, now);
            match a.seconds.back_mut() {
                Some(last) if last.0 == sec => {
                    last.1 += 1;
                    last.2 += u64::from(within);
                }
                _ => a.seconds.push_back((sec, 1, u64::from(within))),
            }
            while a.seconds.front().is_some_and(|s| sec - s.0 > SECONDS_KEPT) {
                a.seconds.pop_front();
            }
        });
    }

    /// The last minute's figures and the attainment history of a pipeline.
    pub fn recent(&self, tenant: &str, name: &str) -> RecentFigures {
        let now = infaas_core::time::now_ms() as f64;
        self.with(tenant, name, |a| {
            prune(&mut a.answers, now);
            let mut e2e: Vec<f64> = a.answers.iter().map(|(_, l)| *l).collect();
            let mut nodes: Vec<_> = a
                .node_runs
                .iter_mut()
                .map(|(node, (runs, variant))| {
                    prune(runs, now);
                    let mut l: Vec<f64> = runs.iter().map(|(_, l)| *l).collect();
                    (
                        node.clone(),
                        l.len(),
                        select_percentile(&mut l, 0.99),
                        variant.clone(),
                    )
                })
                .collect();
            nodes.sort_by(|x, y| x.0.cmp(&y.0));
            let mut drops: Vec<(String, u64)> =
                a.drops.iter().map(|(n, d)| (n.clone(), *d)).collect();
            drops.sort();
            RecentFigures {
                nodes,
                queries_last_minute: e2e.len(),
                p99_ms: select_percentile(&mut e2e, 0.99),
                seconds: a
                    .seconds
                    .iter()
                    .map(|(s, n, ok)| (s * 1000, *n, *ok))
                    .collect(),
                quality: a
                    .quality
                    .iter()
                    .map(|&(s, n, acc, d)| {
                        let mean = (n > 0).then(|| acc / n as f64);
                        (s * 1000, n, mean, d)
                    })
                    .collect(),
                cost: a.cost.iter().map(|&(s, c)| (s * 1000, c)).collect(),
                drops,
            }
        })
    }

    /// The pipelines with recorded activity, by (tenant, name).
    pub fn active(&self) -> Vec<(String, String)> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    }

    /// Arrivals of a pipeline in second `sec` (seconds since the Unix epoch).
    pub fn arrivals_in_second(&self, tenant: &str, name: &str, sec: i64) -> usize {
        self.arrivals_between(tenant, name, sec * 1000, (sec + 1) * 1000)
    }

    /// Arrivals of a pipeline from `from_ms` (included) to `to_ms` (excluded), ms since the
    /// Unix epoch.
    pub fn arrivals_between(&self, tenant: &str, name: &str, from_ms: i64, to_ms: i64) -> usize {
        let (from, to) = (from_ms as f64, to_ms as f64);
        self.with(tenant, name, |a| {
            a.arrivals
                .iter()
                .rev()
                .take_while(|&&t| t >= from)
                .filter(|&&t| t < to)
                .count()
        })
    }

    /// Records what pipeline `name` costs per hour at `at_ms` (ms since the Unix epoch): one
    /// sample per second (a later one in the same second replaces it), the last
    /// [`SECONDS_KEPT`] seconds. Only a pipeline already known here is recorded: one forgotten
    /// meanwhile (deleted) stays forgotten. A sample older than the newest is ignored.
    pub fn record_cost(&self, tenant: &str, name: &str, at_ms: i64, cost_per_hour: f64) {
        if !cost_per_hour.is_finite() {
            return;
        }
        let sec = at_ms.div_euclid(1000);
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(a) = map.get_mut(&(tenant.to_string(), name.to_string())) else {
            return;
        };
        match a.cost.back_mut() {
            Some(last) if last.0 == sec => last.1 = cost_per_hour,
            Some(last) if last.0 > sec => return,
            _ => a.cost.push_back((sec, cost_per_hour)),
        }
        while a.cost.front().is_some_and(|s| sec - s.0 > SECONDS_KEPT) {
            a.cost.pop_front();
        }
    }

    /// Records a query dropped early at `node`.
    pub fn dropped(&self, tenant: &str, name: &str, node: &str) {
        let sec = infaas_core::time::now_ms() / 1000;
        self.with(tenant, name, |a| {
            a.quality(sec, 0, 0.0, 1);
            *a.drops.entry(node.to_string()).or_default() += 1;
        });
    }

    /// Installs the allocation queries of a pipeline are routed by; the mode of the one it
    /// replaces, if any.
    pub fn install_allocation(
        &self,
        tenant: &str,
        name: &str,
        installed: Arc<Installed>,
    ) -> Option<infaas_scheduler::loki::Mode> {
        self.with(tenant, name, |a| {
            a.loki.replace(installed).map(|old| old.allocation.mode)
        })
    }

    /// The allocation queries of a pipeline are routed by, if accuracy scaling installed one.
    pub fn installed(&self, tenant: &str, name: &str) -> Option<Arc<Installed>> {
        self.with(tenant, name, |a| a.loki.clone())
    }

    /// The recorded overhead samples (ms), oldest first.
    pub fn overhead_samples(&self, tenant: &str, name: &str) -> Vec<f64> {
        self.with(tenant, name, |a| a.overhead.iter().copied().collect())
    }

    /// Arrivals of the last `window_ms` (ms since the Unix epoch), oldest first: [`Self::arrivals_at`]
    /// at the wall clock's now (or the newest arrival, if later).
    pub fn arrivals(&self, tenant: &str, name: &str, window_ms: f64) -> Vec<f64> {
        let now = infaas_core::time::now_ms() as f64;
        let last = self.with(tenant, name, |a| a.arrivals.back().copied().unwrap_or(0.0));
        self.arrivals_at(tenant, name, now.max(last), window_ms)
    }

    /// Arrivals from `now_ms - window_ms` (included) to `now_ms` (included), oldest first: the
    /// tuner's boundary convention ([`infaas_scheduler::pipeline::tuner::in_window`]), so the
    /// tuner loop and the simulator's replay read the same window.
    pub fn arrivals_at(&self, tenant: &str, name: &str, now_ms: f64, window_ms: f64) -> Vec<f64> {
        self.with(tenant, name, |a| {
            // Newest first, stopping at the window's start: the deque holds an hour of
            // arrivals and the control loops ask for the last seconds every second.
            let mut recent: Vec<f64> = a
                .arrivals
                .iter()
                .rev()
                .copied()
                .skip_while(|t| *t > now_ms)
                .take_while(|&t| in_window(t, now_ms, window_ms))
                .collect();
            recent.reverse();
            recent
        })
    }

    /// The measured fraction of rows a node ran on among those that reached it, with the
    /// number of rows it is measured on.
    pub fn branch_probability(&self, tenant: &str, name: &str, node: &str) -> Option<(f64, u64)> {
        self.with(tenant, name, |a| {
            a.branches
                .get(node)
                .filter(|(n, _)| *n > 0)
                .map(|(n, ran)| (*ran as f64 / *n as f64, *n))
        })
    }

    /// Drops what is known of a pipeline (deleted) and its checked copy.
    pub fn forget(&self, tenant: &str, name: &str) {
        let key = (tenant.to_string(), name.to_string());
        self.inner
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key);
        self.invalidate(tenant, name);
    }

    /// A combination's accuracy measured on the validation set stored at `key`, if measured.
    pub fn measured(
        &self,
        tenant: &str,
        name: &str,
        key: &str,
        combo: &[String],
    ) -> Option<Measured> {
        self.with(tenant, name, |a| {
            a.measured.get(&(key.to_string(), combo.to_vec())).cloned()
        })
    }

    /// Keeps a combination's measured accuracy (see [`PipelineActivity::measured`]); the
    /// figures of any other set of the pipeline go.
    pub fn remember_measured(
        &self,
        tenant: &str,
        name: &str,
        key: &str,
        combo: &[String],
        m: Measured,
    ) {
        self.with(tenant, name, |a| {
            a.measured.retain(|(k, _), _| k == key);
            a.measured.insert((key.to_string(), combo.to_vec()), m);
        })
    }

    /// Drops the checked copy of a pipeline (its document or plan changed).
    pub fn invalidate(&self, tenant: &str, name: &str) {
        self.prepared
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(tenant.to_string(), name.to_string()));
    }

    pub(crate) fn cached(&self, tenant: &str, name: &str) -> Option<Arc<Prepared>> {
        let map = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(tenant.to_string(), name.to_string()))
            .filter(|(at, _)| at.elapsed() < PREPARED_TTL)
            .map(|(_, p)| p.clone())
    }

    pub(crate) fn cache(&self, tenant: &str, name: &str, p: Arc<Prepared>) {
        let mut map = self.prepared.lock().unwrap_or_else(|e| e.into_inner());
        map.insert((tenant.to_string(), name.to_string()), (Instant::now(), p));
    }
}
