//! The runner: a live trace replayed on a configuration, the tuner driving replicas.

use infaas_core::stats::select_percentile;
use infaas_scheduler::pipeline::tuner::{window, TunerAction, TUNER_PERIOD_MS};
use infaas_scheduler::pipeline::{NodeConfig, PlanProblem, Tuner, TunerConfig};
use serde::Serialize;

use super::branches::{reach, service_table};
use crate::report::Histogram;

/// How [`replay`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayOptions {
    /// The report's name for the policy.
    pub policy: String,
    /// The tuner driving replicas (`None`: the configuration's replicas throughout).
    pub tuner: Option<TunerConfig>,
    /// Period of the tuner's decisions, ms: [`TUNER_PERIOD_MS`], the controller's, by default
    /// (another period makes the replay decide unlike the controller).
    pub tick_ms: f64,
    /// Seed of the branch draws.
    pub seed: u64,
}

impl Default for ReplayOptions {
    /// No tuner, the controller's tuner period, seed 0.
    fn default() -> ReplayOptions {
        ReplayOptions {
            policy: String::new(),
            tuner: None,
            tick_ms: TUNER_PERIOD_MS,
            seed: 0,
        }
    }
}

/// One second of a replay (queries counted in the second they arrived).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplaySecond {
    pub second: usize,
    pub arrivals: u64,
    pub slo_attainment: Option<f64>,
    pub p99_ms: Option<f64>,
    /// Replicas held per node at the end of the second (loading ones included).
    pub replicas: Vec<usize>,
    pub cost_per_s: f64,
}

/// What a replay measured (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReplayReport {
    pub policy: String,
    pub simulated: bool,
    pub queries: usize,
    pub duration_s: f64,
    /// Fraction of the queries within the SLO.
    pub slo_attainment: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Latency at the planned percentile, ms.
    pub percentile_ms: f64,
    /// Every replica's held time at its price.
    pub cost: f64,
    /// `cost` per hour of the trace.
    pub cost_per_hour: f64,
    pub scale_outs: usize,
    pub scale_ins: usize,
    /// When the tuner first reported drift (re-plan), s.
    pub drift_at_s: Option<f64>,
    pub max_replicas: Vec<usize>,
    pub mean_replicas: Vec<f64>,
    pub series: Vec<ReplaySecond>,
    /// The tuner's decisions, in order (empty without a tuner): one a tick, as
    /// [`tuner_decisions`] makes them. Not serialized (one entry a second).
    #[serde(skip)]
    pub tuner_decisions: Vec<TunerDecision>,
}

/// A replica position of a node over time: intervals of (billed from, serving from, until).
#[derive(Debug, Clone, Default)]
struct Slot {
    intervals: Vec<(f64, f64, f64)>,
    next: usize,
    free: f64,
}

impl Slot {
    /// Earliest time at or after `t` at which the slot can start a batch.
    fn start_at(&mut self, t: f64) -> f64 {
        let t = t.max(self.free);
        while let Some(&(_, from, until)) = self.intervals.get(self.next) {
            if until > t.max(from) {
                return t.max(from);
            }
            self.next += 1;
        }
        f64::INFINITY
    }
}

/// Replicas of each node over time: the tuner's decisions turned into slots.
struct Schedule {
    slots: Vec<Vec<Slot>>,
    scale_outs: usize,
    scale_ins: usize,
    drift_at_s: Option<f64>,
    decisions: Vec<TunerDecision>,
}

/// The tuner's decisions over the replay and the replicas they hold.
fn schedule(
    problem: &PlanProblem,
    configs: &[NodeConfig],
    arrivals: &[f64],
    end_ms: f64,
    opts: &ReplayOptions,
) -> Schedule {
    let mut slots: Vec<Vec<Slot>> = configs
        .iter()
        .map(|c| {
            (0..c.replicas)
                .map(|_| Slot {
                    intervals: vec![(0.0, 0.0, f64::INFINITY)],
                    ..Slot::default()
                })
                .collect()
        })
        .collect();
    let (mut outs, mut ins, mut drift_at) = (0, 0, None);
    let decisions = opts.tuner.as_ref().map_or_else(Vec::new, |config| {
        tuner_decisions(config, arrivals, end_ms, opts.tick_ms)
    });
    if opts.tuner.is_some() {
        let mut current: Vec<usize> = configs.iter().map(|c| c.replicas).collect();
        let load_ms: Vec<f64> = problem
            .nodes
            .iter()
            .zip(configs)
            .map(|(n, c)| n.options.get(c.option).map_or(0.0, |o| o.variant.load_ms))
            .collect();
        for d in &decisions {
            let (now, target) = (d.at_ms, &d.targets);
            if d.drift && drift_at.is_none() {
                drift_at = Some(now / 1e3);
            }
            let mut changed = (false, false);
            for m in 0..current.len() {
                let (k, want) = (current[m], target[m]);
                if want > k {
                    changed.0 = true;
                    for s in k..want {
                        if s >= slots[m].len() {
                            slots[m].push(Slot::default());
                        }
                        slots[m][s]
                            .intervals
                            .push((now, now + load_ms[m], f64::INFINITY));
                    }
                } else if want < k {
                    changed.1 = true;
                    for slot in &mut slots[m][want..k] {
                        if let Some(last) = slot.intervals.last_mut() {
                            last.2 = now;
                        }
                    }
                }
                current[m] = want;
            }
            outs += usize::from(changed.0);
            ins += usize::from(changed.1);
        }
    }
    Schedule {
        slots,
        scale_outs: outs,
        scale_ins: ins,
        drift_at_s: drift_at,
        decisions,
    }
}

/// One decision of the tuner in a replay.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TunerDecision {
    /// When, ms from the trace's start.
    pub at_ms: f64,
    /// Target replicas per node.
    pub targets: Vec<usize>,
    /// What the decision did.
    pub action: TunerAction,
    /// The tuner reported drift (a re-plan is due).
    pub drift: bool,
}

/// The tuner's decisions over `arrivals_ms` (ascending) as a replay makes them: every
/// `tick_ms` ([`TUNER_PERIOD_MS`], the controller's period, unless a run asks otherwise) from
/// one tick until one tick past `end_ms`, each on the arrivals of the tuner's [`window`] (the
/// last 60 s, both ends included, as the controller's `PipelineActivity::arrivals_at`).
/// [`replay`] records them in [`ReplayReport::tuner_decisions`].
pub fn tuner_decisions(
    config: &TunerConfig,
    arrivals_ms: &[f64],
    end_ms: f64,
    tick_ms: f64,
) -> Vec<TunerDecision> {
    let mut tuner = Tuner::new(config.clone());
    let tick = tick_ms.max(1.0);
    let mut out = Vec::new();
    let mut now = tick;
    while now <= end_ms + tick {
        let targets = tuner.decide(now, window(arrivals_ms, now));
        out.push(TunerDecision {
            at_ms: now,
            targets,
            action: tuner.action(),
            drift: tuner.drift(),
        });
        now += tick;
    }
    out
}

/// One stage with replicas changing over time (see [`stage_fixed`]); queries no replica will
/// ever take complete at infinity.
fn stage_slots(queue: &[(f64, u32)], svc: &[f64], slots: &mut [Slot], comp: &mut [f64]) {
    let max_batch = svc.len().saturating_sub(1).max(1);
    let len = queue.len();
    let mut i = 0;
    while i < len {
        let head = queue[i].0;
        let mut best = (f64::INFINITY, usize::MAX);
        for (k, s) in slots.iter_mut().enumerate() {
            let t = s.start_at(head);
            if t < best.0 {
                best = (t, k);
            }
        }
        let (start, k) = best;
        if !start.is_finite() {
            for &(_, q) in &queue[i..] {
                comp[q as usize] = f64::INFINITY;
            }
            return;
        }
        let limit = (i + max_batch).min(len);
        let mut j = i + 1;
        while j < limit && queue[j].0 <= start {
            j += 1;
        }
        let done = start + svc[j - i];
        slots[k].free = done;
        for &(_, q) in &queue[i..j] {
            comp[q as usize] = done;
        }
        i = j;
    }
}

/// Replays `arrivals_ms` (the pipeline's entry, sorted) on `configs`, the tuner (if any)
/// driving replicas; SIMULATED (see the module documentation).
pub fn replay(
    problem: &PlanProblem,
    configs: &[NodeConfig],
    arrivals_ms: &[f64],
    opts: &ReplayOptions,
) -> ReplayReport {
    let n = arrivals_ms.len();
    let end_ms = arrivals_ms.last().copied().unwrap_or(0.0);
    let routing = reach(problem, n, opts.seed);
    let Schedule {
        mut slots,
        scale_outs,
        scale_ins,
        drift_at_s,
        decisions: tuner_decisions,
    } = schedule(problem, configs, arrivals_ms, end_ms, opts);
    let mut comp: Vec<Vec<f64>> = vec![vec![f64::NEG_INFINITY; n]; problem.nodes.len()];
    let mut done: Vec<f64> = arrivals_ms.to_vec();
    let mut queue: Vec<(f64, u32)> = Vec::new();
    for (m, node) in problem.nodes.iter().enumerate() {
        queue.clear();
        for &q in &routing.reached[m] {
            let qi = q as usize;
            let t = if node.parents.is_empty() {
                arrivals_ms[qi]
            } else {
                node.parents
                    .iter()
                    .filter(|&&p| routing.member[p][qi])
                    .map(|&p| comp[p][qi])
                    .fold(f64::NEG_INFINITY, f64::max)
            };
            queue.push((t, q));
        }
        queue.sort_by(|a, b| a.0.total_cmp(&b.0));
        let Some(option) = node.options.get(configs[m].option) else {
            continue;
        };
        let svc = service_table(option);
        stage_slots(&queue, &svc, &mut slots[m], &mut comp[m]);
        for &q in &routing.reached[m] {
            let qi = q as usize;
            done[qi] = done[qi].max(comp[m][qi]);
        }
    }
    let slo = problem.slo_ms;
    let mut latencies: Vec<f64> = done.iter().zip(arrivals_ms).map(|(d, a)| d - a).collect();
    let seconds = (end_ms / 1e3).floor() as usize + 1;
    let mut per_second: Vec<(u64, u64, Histogram)> =
        (0..seconds).map(|_| (0, 0, Histogram::default())).collect();
    let mut met = 0usize;
    for (l, a) in latencies.iter().zip(arrivals_ms) {
        let s = ((a / 1e3) as usize).min(seconds - 1);
        let e = &mut per_second[s];
        e.0 += 1;
        if *l <= slo {
            e.1 += 1;
            met += 1;
        }
        e.2.add(if l.is_finite() { *l } else { 1e12 });
    }
    // Cost and replicas per second.
    let prices: Vec<f64> = problem
        .nodes
        .iter()
        .zip(configs)
        .map(|(nd, c)| {
            nd.options
                .get(c.option)
                .map_or(0.0, |o| problem.prices.rate_per_s(&o.variant))
        })
        .collect();
    let mut cost = 0.0;
    let mut cost_s = vec![0.0; seconds];
    let mut held = vec![vec![0usize; problem.nodes.len()]; seconds];
    let mut mean_replicas = vec![0.0; problem.nodes.len()];
    for (m, node_slots) in slots.iter().enumerate() {
        for s in node_slots {
            for &(bill, _, until) in &s.intervals {
                let until = until.min(end_ms);
                if until <= bill {
                    continue;
                }
                let held_s = (until - bill) / 1e3;
                cost += held_s * prices[m];
                mean_replicas[m] += held_s;
                let (a, b) = (
                    (bill / 1e3) as usize,
                    ((until / 1e3).ceil() as usize).min(seconds),
                );
                for (sec, c) in cost_s.iter_mut().enumerate().take(b).skip(a) {
                    let lo = bill.max(sec as f64 * 1e3);
                    let hi = until.min((sec + 1) as f64 * 1e3);
                    if hi > lo {
                        *c += (hi - lo) / 1e3 * prices[m];
                    }
                    if until >= (sec + 1) as f64 * 1e3 || until >= end_ms {
                        held[sec][m] += 1;
                    }
                }
            }
        }
    }
    let duration_s = (end_ms / 1e3).max(1e-9);
    for r in &mut mean_replicas {
        *r /= duration_s;
    }
    let max_replicas: Vec<usize> = (0..problem.nodes.len())
        .map(|m| held.iter().map(|h| h[m]).max().unwrap_or(0))
        .collect();
    let series = per_second
        .into_iter()
        .enumerate()
        .map(|(s, (arr, ok, h))| ReplaySecond {
            second: s,
            arrivals: arr,
            slo_attainment: (arr > 0).then(|| ok as f64 / arr as f64),
            p99_ms: h.quantile(0.99),
            replicas: held[s].clone(),
            cost_per_s: cost_s[s],
        })
        .collect();
    let nq = latencies.len();
    let (p50, p99, pct) = if nq > 0 {
        (
            select_percentile(&mut latencies, 0.5).unwrap_or(f64::NAN),
            select_percentile(&mut latencies, 0.99).unwrap_or(f64::NAN),
            select_percentile(&mut latencies, problem.percentile / 100.0).unwrap_or(f64::NAN),
        )
    } else {
        (0.0, 0.0, 0.0)
    };
    ReplayReport {
        policy: opts.policy.clone(),
        simulated: true,
        queries: n,
        duration_s: end_ms / 1e3,
        slo_attainment: if n > 0 { met as f64 / n as f64 } else { 1.0 },
        p50_ms: p50,
        p99_ms: p99,
        percentile_ms: pct,
        cost,
        cost_per_hour: cost / duration_s * 3600.0,
        scale_outs,
        scale_ins,
        drift_at_s,
        max_replicas,
        mean_replicas,
        series,
        tuner_decisions,
    }
}
