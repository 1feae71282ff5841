//! The tuner: InferLine's high-frequency reactive scaling of a planned pipeline
//! (Algorithms 3 and 4), replicas only (options stay as planned).
//!
//! **Traffic envelopes.** For window sizes from the pipeline's service time `Ts`, doubling up
//! to 60 s ([`envelope_windows_ms`]), the envelope is the highest arrival rate seen in any
//! window of each size ([`envelope`]). The planner's sample trace gives the *planned*
//! envelope: the configuration is known to meet the SLO under it.
//!
//! **Scaling out** (every decision): when the observed envelope of the recent arrivals
//! exceeds the planned one at any window, every node gets
//! `k_m = ceil(r * reach_m / (throughput_m * rho_m))` replicas, never fewer than planned, where
//! the max-provisioning ratio `rho_m` and the rate `r` follow [`Provisioning`]:
//! - `Timescale` (the default): `rho_m` is the ratio the plan accepted *at the same
//!   timescale*, `planned(W) * reach_m / (planned_m * throughput_m)`, so
//!   `k_m = ceil(planned_m * observed(W) / planned(W))`, the largest over the exceeding windows
//!   `W`: a burst scales the pipeline by how much it exceeds the bursts the plan absorbed;
//! - `Mean` (the paper's): `rho_m` is the plan's ratio at the sample's mean rate, applied to
//!   `r_max`, the highest exceeding rate: a short burst is provisioned as if it were the new
//!   mean (in the simulator's evaluation this costs about twice as much for the same
//!   attainment);
//! - `Fixed(rho)`: one configured ratio, applied to `r_max`.
//!
//! Scale-out rates are multiplied by a headroom factor ([`TunerConfig::headroom`], 1.2 by
//! default): the load keeps rising while new replicas load (5 s in InferLine's systems), and
//! without it a ramp outruns the tuner.
//!
//! **Scaling in**: the target is recomputed from `lambda_new`, the highest rate over 5-s
//! windows in the last 30 s, with each node's ratio at the 5-s timescale (the paper takes the
//! pipeline's smallest ratio, `rho_p = min rho_m`, which keeps the nodes with more slack above
//! their plan even when the load is back to the planned one), never below what the current
//! envelope needs nor below the plan. It is applied only once it has stayed below the current
//! replicas for the stabilisation period (15 s by default) and that long after the last
//! change, so a burst does not make replicas oscillate.
//!
//! **Drift**: when the observed envelope has exceeded the planned one continuously for longer
//! than the re-plan period (300 s by default), [`Tuner::drift`] says so, and the caller should
//! plan again (in the background) on recent arrivals.
//!
//! **Cadence and window**: the controller's tuner loop and the simulator's replay both call
//! [`Tuner::decide`] every [`TUNER_PERIOD_MS`] (1 s) with the arrivals of the last
//! [`TUNER_WINDOW_MS`] (60 s), both ends included ([`in_window`], [`window`]); one can also
//! feed arrivals with [`Tuner::observe`] and call [`Tuner::decide_observed`].

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::{
    option_throughput_per_s, reach_probabilities, service_time_ms, NodeConfig, PlanProblem,
};

/// The largest envelope window, ms.
pub const MAX_WINDOW_MS: f64 = 60_000.0;

/// How often the tuner decides, ms: the controller's tuner loop (`TUNER_PERIOD`) and the
/// simulator's replay (`ReplayOptions::tick_ms`, by default) both call [`Tuner::decide`] at
/// this period.
pub const TUNER_PERIOD_MS: f64 = 1_000.0;

/// How far back a decision reads arrivals, ms: the largest envelope window.
pub const TUNER_WINDOW_MS: f64 = MAX_WINDOW_MS;

/// Whether an arrival at `t_ms` is in the window of `window_ms` that ends at `now_ms`: the one
/// boundary convention of the tuner's callers, **both ends included**, `now_ms - window_ms <=
/// t_ms <= now_ms` (an arrival exactly `window_ms` old still counts).
pub fn in_window(t_ms: f64, now_ms: f64, window_ms: f64) -> bool {
    t_ms >= now_ms - window_ms && t_ms <= now_ms
}

/// The arrivals a decision at `now_ms` reads out of `arrivals_ms` (ascending): those
/// [`in_window`] of [`TUNER_WINDOW_MS`] ending at `now_ms`. [`Tuner::decide`] applies it to
/// what it is given, so a caller may pass more, never less.
pub fn window(arrivals_ms: &[f64], now_ms: f64) -> &[f64] {
    let from = arrivals_ms.partition_point(|&t| t < now_ms - TUNER_WINDOW_MS);
    let to = arrivals_ms.partition_point(|&t| t <= now_ms);
    &arrivals_ms[from..to.max(from)]
}

/// Window sizes of a traffic envelope: the service time, doubled until 60 s, and 60 s.
pub fn envelope_windows_ms(service_time_ms: f64) -> Vec<f64> {
    let mut w = service_time_ms.clamp(1.0, MAX_WINDOW_MS);
    let mut out = Vec::new();
    while w < MAX_WINDOW_MS {
        out.push(w);
        w *= 2.0;
    }
    out.push(MAX_WINDOW_MS);
    out
}

/// The traffic envelope of `arrivals_ms` (sorted): for each window size, the highest rate
/// (queries/s) in any window of that size, `max count in [t, t + w)` over `w`.
pub fn envelope(arrivals_ms: &[f64], windows_ms: &[f64]) -> Vec<f64> {
    windows_ms
        .iter()
        .map(|&w| max_count(arrivals_ms, w) as f64 / (w / 1e3))
        .collect()
}

/// Most arrivals in any window `[t, t + w)` (two pointers; windows start at an arrival).
fn max_count(arrivals_ms: &[f64], w: f64) -> usize {
    let mut best = 0;
    let mut j = 0;
    for i in 0..arrivals_ms.len() {
        if j < i {
            j = i;
        }
        while j < arrivals_ms.len() && arrivals_ms[j] < arrivals_ms[i] + w {
            j += 1;
        }
        best = best.max(j - i);
    }
    best
}

/// How the tuner turns an observed rate into replicas (the max-provisioning ratio `rho_m`
/// of `k_m = ceil(r * reach_m / (throughput_m * rho_m))`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Provisioning {
    /// The plan's ratio at each timescale: `rho_m(W) = planned(W) * reach_m / (planned_m *
    /// throughput_m)`, so `k_m = ceil(planned_m * observed(W) / planned(W))`, the largest over
    /// the exceeding windows.
    Timescale,
    /// InferLine's: the plan's ratio at the sample's mean rate, `rho_m = mean * reach_m /
    /// (planned_m * throughput_m)`, applied to `r_max`, the highest exceeding observed rate
    /// (`k_m = ceil(planned_m * r_max / mean)`): a short burst is provisioned as if it were the
    /// new mean, which over-provisions bursts but leaves room for the load still rising while
    /// new replicas load. Scaling in uses the same ratio, so at the planned load the targets
    /// stay above the plan (the 5-s peaks are above the mean).
    Mean,
    /// A fixed ratio for every node, applied to `r_max`.
    Fixed(f64),
}

/// The envelope of a planning sample: as [`envelope`], except that a window longer than the
/// sample takes the rate of the longest window the sample holds (a 20-s sample says nothing of
/// 60-s windows; counting its queries over 60 s would understate the planned rate threefold
/// and make every longer live window look like a surge).
pub fn sample_envelope(arrivals_ms: &[f64], windows_ms: &[f64]) -> Vec<f64> {
    let span = match (arrivals_ms.first(), arrivals_ms.last()) {
        (Some(a), Some(b)) => b - a,
        _ => 0.0,
    };
    let rates = envelope(arrivals_ms, windows_ms);
    let mut fitted: Option<f64> = None;
    windows_ms
        .iter()
        .zip(&rates)
        .map(|(&w, &r)| {
            if w <= span || fitted.is_none() {
                fitted = Some(r);
                r
            } else {
                fitted.unwrap_or(r)
            }
        })
        .collect()
}

/// What the tuner knows of a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunerNode {
    /// Fraction of the pipeline's queries that reach the node (InferLine's scale factor).
    pub reach: f64,
    /// Saturation throughput of one replica of the node's planned option, queries/s.
    pub throughput_per_s: f64,
    /// The plan's replicas: the floor of every target.
    pub planned_replicas: usize,
}

/// The tuner's configuration (see the module documentation).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunerConfig {
    /// Envelope window sizes, ms, ascending.
    pub windows_ms: Vec<f64>,
    /// The planned envelope: the planning sample's highest rate per window, queries/s.
    pub planned_rates: Vec<f64>,
    /// The planning sample's highest rate over `scale_down_window_ms` windows, queries/s.
    pub planned_scale_down_rate: f64,
    /// The planning sample's mean rate, queries/s.
    pub planned_mean_rate: f64,
    pub nodes: Vec<TunerNode>,
    /// The max-provisioning ratio.
    pub provisioning: Provisioning,
    /// Scale-out targets are multiplied by this (at least 1): room for the load that keeps
    /// rising while new replicas load.
    pub headroom: f64,
    /// How long a lower target must hold, and a change must be past, before scaling in, ms.
    pub stabilisation_ms: f64,
    /// Window and horizon of `lambda_new` when scaling in, ms (5 s and 30 s).
    pub scale_down_window_ms: f64,
    pub scale_down_horizon_ms: f64,
    /// How long the envelope must exceed the plan before [`Tuner::drift`], ms.
    pub replan_after_ms: f64,
    /// Most replicas of a node.
    pub max_replicas: usize,
}

impl TunerConfig {
    /// The tuner of a planned configuration: the planned envelope of `planning_arrivals_ms`
    /// (sorted, the sample the plan was made on), windows from the problem's service time,
    /// the planned options' throughputs and the defaults: [`Provisioning::Timescale`], headroom
    /// 1.2, 15 s stabilisation, 5-s windows over 30 s for scaling in, 300 s before drift, the
    /// problem's replica cap.
    pub fn from_plan(
        problem: &PlanProblem,
        configs: &[NodeConfig],
        planning_arrivals_ms: &[f64],
    ) -> TunerConfig {
        let windows_ms = envelope_windows_ms(service_time_ms(problem));
        let planned_rates = sample_envelope(planning_arrivals_ms, &windows_ms);
        let scale_down_window_ms = 5_000.0;
        let planned_scale_down_rate =
            sample_envelope(planning_arrivals_ms, &[scale_down_window_ms])[0];
        let planned_mean_rate = match (planning_arrivals_ms.first(), planning_arrivals_ms.last()) {
            (Some(a), Some(b)) if b > a => planning_arrivals_ms.len() as f64 / ((b - a) / 1e3),
            _ => 0.0,
        };
        let reach = reach_probabilities(problem);
        let nodes = problem
            .nodes
            .iter()
            .zip(configs)
            .enumerate()
            .map(|(m, (n, c))| TunerNode {
                reach: reach[m],
                throughput_per_s: n.options.get(c.option).map_or(0.0, option_throughput_per_s),
                planned_replicas: c.replicas,
            })
            .collect();
        TunerConfig {
            windows_ms,
            planned_rates,
            planned_scale_down_rate,
            planned_mean_rate,
            nodes,
            provisioning: Provisioning::Timescale,
            headroom: 1.2,
            stabilisation_ms: 15_000.0,
            scale_down_window_ms,
            scale_down_horizon_ms: 30_000.0,
            replan_after_ms: 300_000.0,
            max_replicas: problem.max_replicas,
        }
    }

    /// Node `m`'s max-provisioning ratio when the plan gives it `planned_rate`: the share of
    /// its planned capacity that rate takes.
    fn ratio(&self, m: usize, planned_rate: f64) -> f64 {
        let n = &self.nodes[m];
        let capacity = n.planned_replicas as f64 * n.throughput_per_s;
        if capacity > 0.0 {
            planned_rate * n.reach / capacity
        } else {
            0.0
        }
    }

    /// Replicas node `m` needs for `rate` at ratio `rho` (at least the plan, at most the cap).
    fn replicas_for(&self, m: usize, rate: f64, rho: f64) -> usize {
        let n = &self.nodes[m];
        let k = if rho > 0.0 && n.throughput_per_s > 0.0 {
            (rate * n.reach / (n.throughput_per_s * rho) - 1e-9)
                .ceil()
                .max(0.0) as usize
        } else {
            n.planned_replicas
        };
        k.max(n.planned_replicas)
            .min(self.max_replicas.max(n.planned_replicas))
    }

    /// Replicas each node needs for the observed envelope `observed` (Algorithm 3), the plan
    /// when it exceeds the planned envelope nowhere; and whether it exceeds it.
    fn scale_out(&self, observed: &[f64]) -> (Vec<usize>, bool) {
        let exceeding: Vec<usize> = (0..self.windows_ms.len())
            .filter(|&i| observed[i] > self.planned_rates[i] * (1.0 + 1e-9))
            .collect();
        let plan = || self.nodes.iter().map(|n| n.planned_replicas).collect();
        if exceeding.is_empty() {
            return (plan(), false);
        }
        let r_max =
            exceeding.iter().map(|&i| observed[i]).fold(0.0, f64::max) * self.headroom.max(1.0);
        let need = (0..self.nodes.len())
            .map(|m| match self.provisioning {
                Provisioning::Timescale => exceeding
                    .iter()
                    .map(|&i| {
                        let rho = self.ratio(m, self.planned_rates[i]);
                        self.replicas_for(m, observed[i] * self.headroom.max(1.0), rho)
                    })
                    .max()
                    .unwrap_or(self.nodes[m].planned_replicas),
                Provisioning::Mean => {
                    self.replicas_for(m, r_max, self.ratio(m, self.planned_mean_rate))
                }
                Provisioning::Fixed(rho) => self.replicas_for(m, r_max, rho),
            })
            .collect();
        (need, true)
    }

    /// Replicas each node needs for `lambda_new` when scaling in (Algorithm 4).
    fn scale_in(&self, lambda_new: f64) -> Vec<usize> {
        (0..self.nodes.len())
            .map(|m| {
                let rho = match self.provisioning {
                    Provisioning::Timescale => self.ratio(m, self.planned_scale_down_rate),
                    Provisioning::Mean => self.ratio(m, self.planned_mean_rate),
                    Provisioning::Fixed(rho) => rho,
                };
                if rho > 0.0 {
                    self.replicas_for(m, lambda_new, rho)
                } else {
                    self.nodes[m].planned_replicas
                }
            })
            .collect()
    }
}

/// Why the last decision set its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum TunerAction {
    /// Nothing changed.
    Hold,
    /// The observed envelope exceeded the planned one: replicas were added.
    ScaleOut,
    /// The load stayed low for the stabilisation period: replicas were removed.
    ScaleIn,
}

/// The reactive scaler's state (see the module documentation).
#[derive(Debug, Clone)]
pub struct Tuner {
    config: TunerConfig,
    current: Vec<usize>,
    last_change_ms: Option<f64>,
    low_since_ms: Option<f64>,
    exceed_since_ms: Option<f64>,
    drift: bool,
    observed: Vec<f64>,
    action: TunerAction,
    buffer: VecDeque<f64>,
}

impl Tuner {
    /// Starts at the planned replicas.
    pub fn new(config: TunerConfig) -> Tuner {
        let current = config.nodes.iter().map(|n| n.planned_replicas).collect();
        Tuner {
            config,
            current,
            last_change_ms: None,
            low_since_ms: None,
            exceed_since_ms: None,
            drift: false,
            observed: Vec::new(),
            action: TunerAction::Hold,
            buffer: VecDeque::new(),
        }
    }

    pub fn config(&self) -> &TunerConfig {
        &self.config
    }

    /// The current target replicas per node.
    pub fn replicas(&self) -> &[usize] {
        &self.current
    }

    /// Whether the workload has exceeded the planned envelope for longer than the re-plan
    /// period (as of the last decision): plan again on recent arrivals.
    pub fn drift(&self) -> bool {
        self.drift
    }

    /// The observed envelope of the last decision (queries/s per window).
    pub fn observed(&self) -> &[f64] {
        &self.observed
    }

    /// What the last decision did.
    pub fn action(&self) -> TunerAction {
        self.action
    }

    /// Since when the scale-in target has stayed below the current replicas, ms.
    pub fn low_since_ms(&self) -> Option<f64> {
        self.low_since_ms
    }

    /// Records arrivals (ms, ascending, after those recorded before) for
    /// [`Tuner::decide_observed`]; arrivals older than 60 s before the newest are dropped.
    pub fn observe(&mut self, arrivals_ms: &[f64]) {
        self.buffer.extend(arrivals_ms.iter().copied());
        if let Some(&newest) = self.buffer.back() {
            while self
                .buffer
                .front()
                .is_some_and(|&t| t < newest - TUNER_WINDOW_MS)
            {
                self.buffer.pop_front();
            }
        }
    }

    /// [`Tuner::decide`] on the arrivals recorded with [`Tuner::observe`].
    pub fn decide_observed(&mut self, now_ms: f64) -> Vec<usize> {
        while self
            .buffer
            .front()
            .is_some_and(|&t| t < now_ms - TUNER_WINDOW_MS)
        {
            self.buffer.pop_front();
        }
        let recent: Vec<f64> = self.buffer.iter().copied().collect();
        self.decide(now_ms, &recent)
    }

    /// One decision at `now_ms` from the arrivals of the last 60 s (`recent_ms`, ascending;
    /// those outside [`window`] are ignored): the target replicas per node.
    pub fn decide(&mut self, now_ms: f64, recent_ms: &[f64]) -> Vec<usize> {
        let recent = window(recent_ms, now_ms);
        let c = &self.config;
        self.observed = envelope(recent, &c.windows_ms);
        // Algorithm 3: what the observed envelope needs.
        let (need, exceeds) = c.scale_out(&self.observed);

        if !exceeds {
            self.exceed_since_ms = None;
        } else {
            self.exceed_since_ms.get_or_insert(now_ms);
        }
        self.drift = self
            .exceed_since_ms
            .is_some_and(|s| now_ms - s >= c.replan_after_ms);

        self.action = TunerAction::Hold;
        if need.iter().zip(&self.current).any(|(k, cur)| k > cur) {
            for (cur, k) in self.current.iter_mut().zip(&need) {
                *cur = (*cur).max(*k);
            }
            self.last_change_ms = Some(now_ms);
            self.low_since_ms = None;
            self.action = TunerAction::ScaleOut;
            return self.current.clone();
        }

        // Algorithm 4: scale in towards the plan after the stabilisation period.
        let start = recent.partition_point(|&t| t < now_ms - c.scale_down_horizon_ms);
        let lambda_new = envelope(&recent[start..], &[c.scale_down_window_ms])[0];
        let down: Vec<usize> = c
            .scale_in(lambda_new)
            .into_iter()
            .zip(&need)
            .map(|(d, k)| d.max(*k))
            .collect();
        if down.iter().zip(&self.current).any(|(d, cur)| d < cur) {
            let since = *self.low_since_ms.get_or_insert(now_ms);
            let settled = self
                .last_change_ms
                .is_none_or(|t| now_ms - t >= c.stabilisation_ms);
            if now_ms - since >= c.stabilisation_ms && settled {
                for (cur, d) in self.current.iter_mut().zip(&down) {
                    *cur = (*cur).min(*d);
                }
                self.last_change_ms = Some(now_ms);
                self.low_since_ms = None;
                self.action = TunerAction::ScaleIn;
            }
        } else {
            self.low_since_ms = None;
        }
        self.current.clone()
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_short_sample_plans_its_longest_window_for_longer_ones() {
        // 10 s at 10 q/s: the 20-s and 60-s windows take the 8-s window's rate, not 100/60.
        let sample: Vec<f64> = (0..100).map(|i| i as f64 * 100.0).collect();
        let windows = [1_000.0, 8_000.0, 20_000.0, 60_000.0];
        let plain = envelope(&sample, &windows);
        assert!((plain[3] - 100.0 / 60.0).abs() < 1e-9);
        let fitted = sample_envelope(&sample, &windows);
        assert_eq!(fitted[..2], plain[..2]);
        assert_eq!((fitted[2], fitted[3]), (plain[1], plain[1]));
        assert!((fitted[3] - 10.0).abs() < 1e-9, "{fitted:?}");
    }

    use super::*;

    /// Evenly spaced arrivals at `rate` queries/s over `[from_s, to_s)`, ms.
    fn steady(rate: f64, from_s: f64, to_s: f64) -> Vec<f64> {
        let n = ((to_s - from_s) * rate).round() as usize;
        (0..n)
            .map(|i| from_s * 1e3 + i as f64 * 1e3 / rate)
            .collect()
    }

    fn config() -> TunerConfig {
        let windows_ms = envelope_windows_ms(50.0);
        let planning = steady(10.0, 0.0, 120.0);
        TunerConfig {
            planned_rates: envelope(&planning, &windows_ms),
            planned_scale_down_rate: envelope(&planning, &[5_000.0])[0],
            planned_mean_rate: 10.0,
            windows_ms,
            nodes: vec![
                TunerNode {
                    reach: 1.0,
                    throughput_per_s: 10.0,
                    planned_replicas: 2,
                },
                TunerNode {
                    reach: 0.3,
                    throughput_per_s: 5.0,
                    planned_replicas: 1,
                },
            ],
            provisioning: Provisioning::Timescale,
            headroom: 1.0,
            stabilisation_ms: 15_000.0,
            scale_down_window_ms: 5_000.0,
            scale_down_horizon_ms: 30_000.0,
            replan_after_ms: 300_000.0,
            max_replicas: 100,
        }
    }

    #[test]
    fn the_window_includes_both_ends() {
        let a = [0.0, 999.0, 1_000.0, 60_999.0, 61_000.0, 61_001.0];
        // At 61 s: from 1 s (included) to 61 s (included).
        assert_eq!(window(&a, 61_000.0), &[1_000.0, 60_999.0, 61_000.0]);
        assert!(in_window(1_000.0, 61_000.0, TUNER_WINDOW_MS));
        assert!(!in_window(999.0, 61_000.0, TUNER_WINDOW_MS));
        assert!(!in_window(61_001.0, 61_000.0, TUNER_WINDOW_MS));
        // `window` is `in_window` on sorted arrivals.
        for now in [0.0, 999.0, 60_999.0, 61_000.5, 200_000.0] {
            let kept: Vec<f64> = a
                .iter()
                .copied()
                .filter(|&t| in_window(t, now, TUNER_WINDOW_MS))
                .collect();
            assert_eq!(window(&a, now), kept.as_slice(), "at {now}");
        }
    }

    #[test]
    fn envelopes_take_the_busiest_window() {
        let w = envelope_windows_ms(100.0);
        assert_eq!(w[0], 100.0);
        assert_eq!(*w.last().unwrap(), 60_000.0);
        assert!(w.windows(2).all(|p| p[0] < p[1]));
        // 3 arrivals within 100 ms, then sparse.
        let a = [0.0, 10.0, 90.0, 1000.0, 5000.0];
        let e = envelope(&a, &[100.0, 1000.0, 10_000.0]);
        assert_eq!(e, vec![30.0, 3.0, 0.5]);
    }

    #[test]
    fn scales_out_at_once_when_the_envelope_exceeds_the_plan() {
        let mut t = Tuner::new(config());
        // Load as planned: nothing to do.
        let a = steady(10.0, 0.0, 60.0);
        assert_eq!(t.decide(60_000.0, &a), vec![2, 1]);
        assert_eq!(t.action(), TunerAction::Hold);
        // Four times the planned rate for the last 10 s: more replicas in this decision.
        let mut a = steady(10.0, 10.0, 60.0);
        a.extend(steady(40.0, 60.0, 70.0));
        let timescale = t.decide(70_000.0, &a);
        assert_eq!(t.action(), TunerAction::ScaleOut);
        // The 5-s rate is 4 times the planned one: 4 times the planned replicas.
        assert_eq!(timescale, vec![8, 4]);
        assert!(!t.drift());
        // A fixed ratio: the paper's formula, ceil(r_max * reach / (mu * rho)).
        let mut c = config();
        c.provisioning = Provisioning::Fixed(0.5);
        let mut t = Tuner::new(c);
        let k = t.decide(70_000.0, &a);
        let r_max = t.observed().iter().copied().fold(0.0, f64::max);
        assert_eq!(k[0], (r_max / (10.0 * 0.5)).ceil() as usize);
        // InferLine's ratio at the mean: the plan's 2 replicas for 10 queries/s, scaled by the
        // highest exceeding rate over the mean (here, an even stream, as much as the timescale
        // rule).
        let mut c = config();
        c.provisioning = Provisioning::Mean;
        let mut t = Tuner::new(c);
        let mean = t.decide(70_000.0, &a);
        assert_eq!(mean[0], (2.0 * r_max / 10.0).ceil() as usize);
        let mut c = config();
        c.headroom = 1.5;
        let wide = Tuner::new(c).decide(70_000.0, &a);
        assert!(mean[0] >= timescale[0], "{mean:?} {timescale:?}");
        assert_eq!(wide, vec![12, 6], "headroom 1.5");
    }

    #[test]
    fn scales_in_only_after_the_stabilisation_period() {
        let mut t = Tuner::new(config());
        let mut a = steady(10.0, 0.0, 60.0);
        a.extend(steady(40.0, 60.0, 70.0));
        let high = t.decide(70_000.0, &a);
        assert!(high[0] > 2);
        // Back to the planned load from second 70, a decision every second.
        a.extend(steady(10.0, 70.0, 400.0));
        let mut first_in = None;
        let mut k = high.clone();
        for s in 71..300 {
            let now = s as f64 * 1e3;
            let low = t.low_since_ms();
            let before = k.clone();
            k = t.decide(now, &a);
            if k[0] < before[0] && first_in.is_none() {
                // Low for exactly the stabilisation period (as of the previous decision).
                let low = low.expect("low before scaling in");
                assert_eq!(now - low, 15_000.0);
                assert_eq!(t.action(), TunerAction::ScaleIn);
                first_in = Some(now);
            }
            if let Some(l) = t.low_since_ms() {
                assert!(now - l < 15_000.0, "held a lower target for 15 s at {now}");
            }
        }
        assert!(first_in.expect("scaled in") - 70_000.0 >= 15_000.0);
        assert_eq!(k, vec![2, 1], "back to the plan");
    }

    #[test]
    fn drift_after_the_replan_period() {
        let mut c = config();
        c.replan_after_ms = 10_000.0;
        let mut t = Tuner::new(c);
        let a = steady(30.0, 0.0, 100.0);
        t.observe(&a[..a.len() / 2]);
        t.decide_observed(50_000.0);
        assert!(!t.drift());
        t.observe(&a[a.len() / 2..]);
        t.decide_observed(55_000.0);
        assert!(!t.drift());
        t.decide_observed(61_000.0);
        assert!(t.drift());
    }
}
