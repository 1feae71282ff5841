//! The resource manager's loop (Loki §4.2): WHEN a pipeline's allocation is planned again and
//! for WHAT demand. [`allocate`](super::allocate) makes an allocation for a demand; this
//! decides the demand and the moments. The controller (`control/src/pipelines/overload.rs`)
//! and the simulator (`eval/src/overload/`) both drive a [`Manager`] with the same
//! [`ManagerSettings`]: pure, no clock of its own, fed the arrivals of each tick and the time.
//!
//! **The demand estimate.** Arrivals are counted per tick ([`ManagerSettings::tick_s`], 1 s).
//! Each tick folds its rate into an exponentially weighted moving average (the newest tick
//! weighted [`ManagerSettings::ewma_weight`], 0.3: Loki estimates "with an exponentially
//! weighted moving average on the recent demand history"); the estimate is that average or,
//! when higher, the mean rate of the last period (a surge counts within seconds, a lull is
//! smoothed: the estimate never falls below the last period's mean rate).
//!
//! **Periodic re-planning.** Every [`ManagerSettings::period_s`] (10 s, Loki's invocation
//! interval) a plan is made for the estimate.
//!
//! **Re-planning on a change** (Loki: "if it detects a significant change in the demand between
//! its periodic invocations"; [`ManagerSettings::replan_on_change`]): every tick, the mean rate
//! of the last [`ManagerSettings::change_window_s`] (2 s) is compared with the plan in force by
//! [`ManagerSettings::replan`]: a rise of more than 25% over the demand planned for, or a fall
//! below half of the estimate it was made from, plans at once for that recent rate, and the
//! moving average restarts from it. The window must lie wholly after the plan it is compared
//! with (a full window since the last plan of any kind: no solve on a half-changed window, and
//! the loads of the last plan have that time), and the periodic re-planning restarts from a
//! change plan (no periodic plan a few seconds after one for the recent rate). A tick at which
//! the period ends applies the same comparison to the estimate it would plan for, so a periodic
//! plan is for the recent rate when that departs from the estimate by the rule.
//!
//! **Forecasts.** A caller with a forecast of the next period's arrival rate passes it: the
//! demand planned for is then the higher of the two ([`Replan::demand_qps`]); a fall is judged
//! against the measured estimate only ([`Replan::estimate_qps`]), so a high forecast does not
//! make every change check fire.
//!
//! **Target utilisation.** An allocation is made for the demand over
//! [`ManagerSettings::utilisation`] (0.6, [`ManagerSettings::plan_qps`]): each instance planned
//! at that share of its profiled throughput. The reasons for 0.6, on the controller and in the
//! simulator, are on [`ManagerSettings::utilisation`].

use std::collections::VecDeque;

use serde::Serialize;

/// The least demand an allocation is made for, queries/s: an idle pipeline keeps one
/// instance per node.
pub const MIN_DEMAND_QPS: f64 = 0.1;

/// Tolerance on times, s (ticks are sums of floating-point steps).
const EPS_S: f64 = 1e-6;

/// When the recent demand differs significantly from what a plan was made for (Loki §4.2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReplanRule {
    /// A rise by more than this fraction of the demand planned for re-plans (0.25: 25% above).
    pub up: f64,
    /// A fall by more than this fraction of the estimate the plan was made from re-plans
    /// (0.5: below half).
    pub down: f64,
    /// Changes of at most this many queries per second never re-plan (idle pipelines, the
    /// noise of a few queries).
    pub min_change_qps: f64,
}

impl ReplanRule {
    /// Whether `recent_qps` rose significantly above `planned_qps`.
    pub fn rose(&self, recent_qps: f64, planned_qps: f64) -> bool {
        recent_qps - planned_qps > self.min_change_qps && recent_qps > planned_qps * (1.0 + self.up)
    }

    /// Whether `recent_qps` fell significantly below `planned_qps`.
    pub fn fell(&self, recent_qps: f64, planned_qps: f64) -> bool {
        planned_qps - recent_qps > self.min_change_qps
            && recent_qps < planned_qps * (1.0 - self.down)
    }

    /// Whether `recent_qps` differs significantly from `planned_qps` either way.
    pub fn changed(&self, recent_qps: f64, planned_qps: f64) -> bool {
        self.rose(recent_qps, planned_qps) || self.fell(recent_qps, planned_qps)
    }
}

/// The resource manager's loop settings: one set, the controller's and the simulator's. The
/// simulator changes [`Self::period_s`] (its tests and `infaas sim-overload --replan-s`) and
/// [`Self::replan_on_change`] (`--no-replan-on-change`) to study them; the defaults are what
/// both run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ManagerSettings {
    /// The time scale of the demand estimate, s: arrivals are counted per tick, the moving
    /// average takes one step a tick and the change check runs every tick. 1 s: the
    /// controller's loop wakes once a second and the simulator ticks its event loop alike.
    /// Every window below is a whole number of ticks (rounded).
    pub tick_s: f64,
    /// Periodic re-planning, s (Loki's 10 s). Also the window of the mean rate the estimate
    /// never falls below.
    pub period_s: f64,
    /// Weight of the newest tick's rate in the moving average (0.3 a second: a surge is
    /// half-counted within 2 s, a past one forgotten within 10 s).
    pub ewma_weight: f64,
    /// Whether a significant change of demand between periods re-plans at once.
    pub replan_on_change: bool,
    /// The window of the recent rate the change check compares, s.
    pub change_window_s: f64,
    /// What counts as a significant change: +25% / -50%, and more than 1 q/s. A rise the plan
    /// does not carry costs SLO violations at once; a fall costs accuracy or idle instances
    /// until the next periodic plan, while every plan costs a solve (on the controller, on
    /// shared cores) and loads, so only a fall below half re-plans at once.
    pub replan: ReplanRule,
    /// Target utilisation of a planned instance: allocations are made for the demand over it
    /// ([`Self::plan_qps`]) and routed as if each instance carried this share of its profiled
    /// throughput.
    ///
    /// **0.6, on the controller and in the simulator.** On the controller the profiles are
    /// measured on an idle worker while the planned instances share their cores with the HTTP
    /// edge, the other tenants' queries and each other, and the arrivals are bursty within a
    /// second; at 0.6 a one-node pipeline at 3x what its allocation planned gave every answer
    /// within its SLO on shared CPUs, dropping 7.7% of the queries early (docs/benchmarks.md,
    /// Overload on the server). Loki plans dedicated
    /// GPUs at their full profiled rate; no worker here is dedicated. The simulator evaluates
    /// this manager, not another one: it plans as the controller does so that its figures
    /// describe the policy the server runs. Its own reason for a target below 1 (a batched
    /// queue fed Poisson arrivals at 100% of its full-batch throughput never drains) holds at
    /// 0.6 as at any lower target; the cost there is accuracy (accuracy scaling starts at 0.6x
    /// of what the most accurate variants carry instead of nearer 1x), the gain SLO headroom.
    pub utilisation: f64,
}

impl Default for ManagerSettings {
    /// 1-s ticks, a 10-s period, moving-average weight 0.3, re-planning on a change of the last
    /// 2 s by more than +25% / -50% (and more than 1 q/s), target utilisation 0.6.
    fn default() -> Self {
        ManagerSettings {
            tick_s: 1.0,
            period_s: 10.0,
            ewma_weight: 0.3,
            replan_on_change: true,
            change_window_s: 2.0,
            replan: ReplanRule {
                up: 0.25,
                down: 0.5,
                min_change_qps: 1.0,
            },
            utilisation: 0.6,
        }
    }
}

impl ManagerSettings {
    /// The demand an allocation is made for at `demand_qps`: at least [`MIN_DEMAND_QPS`], over
    /// the target utilisation (clamped to 0.05-1).
    pub fn plan_qps(&self, demand_qps: f64) -> f64 {
        let d = if demand_qps.is_finite() {
            demand_qps.max(MIN_DEMAND_QPS)
        } else {
            MIN_DEMAND_QPS
        };
        d / self.utilisation_target()
    }

    /// [`Self::utilisation`], clamped to 0.05-1 (1 when not a number).
    pub fn utilisation_target(&self) -> f64 {
        if self.utilisation.is_nan() {
            1.0
        } else {
            self.utilisation.clamp(0.05, 1.0)
        }
    }

    /// The tick, s (1 s when not positive).
    fn tick(&self) -> f64 {
        if self.tick_s > 0.0 && self.tick_s.is_finite() {
            self.tick_s
        } else {
            1.0
        }
    }

    /// Ticks in a window of `s` seconds (at least one).
    fn ticks(&self, s: f64) -> usize {
        let n = (s / self.tick()).round();
        if n.is_finite() && n >= 1.0 {
            n as usize
        } else {
            1
        }
    }

    /// The moving average's weight, clamped to 0-1.
    fn weight(&self) -> f64 {
        if self.ewma_weight.is_nan() {
            1.0
        } else {
            self.ewma_weight.clamp(0.0, 1.0)
        }
    }
}

/// Why a plan is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Cause {
    /// The first plan of a pipeline.
    Start,
    /// The period ended.
    Periodic,
    /// The recent demand changed significantly.
    Change,
}

/// A decision to plan now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Replan {
    /// When, s (the tick's time).
    pub at_s: f64,
    pub cause: Cause,
    /// The measured demand, queries/s: the estimate (periodic, start) or the recent rate
    /// (change).
    pub estimate_qps: f64,
    /// The demand to plan for: the measured one or, when higher, the forecast.
    pub demand_qps: f64,
    /// What to allocate for: [`ManagerSettings::plan_qps`] of the demand.
    pub plan_qps: f64,
}

/// What a tick decided.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum Decision {
    /// The plan in force stays.
    Keep,
    /// Plan now.
    Replan(Replan),
}

impl Decision {
    /// The plan to make, if any.
    pub fn replan(self) -> Option<Replan> {
        match self {
            Decision::Keep => None,
            Decision::Replan(r) => Some(r),
        }
    }
}

/// One pipeline's resource-manager loop (see the module documentation).
#[derive(Debug, Clone)]
pub struct Manager {
    settings: ManagerSettings,
    /// Arrivals per tick, oldest first, at most a period's or a change window's ticks.
    ticks: VecDeque<f64>,
    /// The moving average, queries/s.
    ewma: f64,
    /// The plan in force (the last decided), if any.
    plan: Option<Replan>,
    /// When the next periodic plan is due, s.
    next_periodic_s: f64,
}

impl Manager {
    /// A manager that starts at `at_s` after `history` (arrivals per tick, oldest first, the
    /// last ending at `at_s`; empty when nothing is known), with its first plan: for the
    /// estimate after that history.
    pub fn start(
        settings: ManagerSettings,
        at_s: f64,
        history: &[f64],
        forecast_qps: Option<f64>,
    ) -> (Manager, Replan) {
        let mut m = Manager {
            settings,
            ticks: VecDeque::new(),
            ewma: 0.0,
            plan: None,
            next_periodic_s: at_s + settings.period_s,
        };
        for (i, &n) in history.iter().enumerate() {
            m.observe(n, i == 0);
        }
        let estimate = m.estimate_qps();
        let r = m.decide(at_s, Cause::Start, estimate, forecast_qps);
        (m, r)
    }

    /// A manager that starts at `at_s` as if the demand had been `qps` for a period (the
    /// simulator's runs, which start from a known rate), with its first plan, for `qps`.
    pub fn start_at_rate(settings: ManagerSettings, at_s: f64, qps: f64) -> (Manager, Replan) {
        let qps = if qps.is_finite() { qps.max(0.0) } else { 0.0 };
        let history = vec![qps * settings.tick(); settings.ticks(settings.period_s)];
        Manager::start(settings, at_s, &history, None)
    }

    /// One tick at `at_s` with the `arrivals` counted since the last one (over
    /// [`ManagerSettings::tick_s`]) and, if known, the forecast arrival rate of the next
    /// period.
    pub fn tick(&mut self, at_s: f64, arrivals: f64, forecast_qps: Option<f64>) -> Decision {
        self.observe(arrivals, false);
        let s = self.settings;
        let periodic = at_s >= self.next_periodic_s - EPS_S;
        let window = s.ticks(s.change_window_s);
        // The plan the recent rate is judged against: the one in force, or at the end of a
        // period the one it would make.
        let against = if periodic {
            let estimate = self.estimate_qps();
            Some((estimate, with_forecast(estimate, forecast_qps)))
        } else {
            self.plan
                .filter(|p| at_s - p.at_s >= s.change_window_s - EPS_S)
                .map(|p| (p.estimate_qps, p.demand_qps))
        };
        if let Some((estimate, demand)) = against.filter(|_| s.replan_on_change) {
            if self.ticks.len() >= window {
                let recent = self.mean_qps(window);
                if s.replan.rose(recent, demand) || s.replan.fell(recent, estimate) {
                    self.ewma = recent;
                    return Decision::Replan(self.decide(
                        at_s,
                        Cause::Change,
                        recent,
                        forecast_qps,
                    ));
                }
            }
        }
        if periodic {
            let estimate = self.estimate_qps();
            return Decision::Replan(self.decide(at_s, Cause::Periodic, estimate, forecast_qps));
        }
        Decision::Keep
    }

    /// The plan last decided could not be made: no change check until the next periodic plan
    /// (which stays due when it was).
    pub fn unplanned(&mut self) {
        self.plan = None;
    }

    /// The demand estimate now, queries/s: the moving average, or the mean rate of the last
    /// period when higher.
    pub fn estimate_qps(&self) -> f64 {
        let s = self.settings;
        self.ewma.max(self.mean_qps(s.ticks(s.period_s)))
    }

    /// The plan in force (the last decided), if any.
    pub fn planned(&self) -> Option<Replan> {
        self.plan
    }

    /// When the next periodic plan is due, s.
    pub fn next_periodic_s(&self) -> f64 {
        self.next_periodic_s
    }

    pub fn settings(&self) -> &ManagerSettings {
        &self.settings
    }

    /// Counts a tick's arrivals: the moving average's step and the kept ticks.
    fn observe(&mut self, arrivals: f64, first: bool) {
        let s = self.settings;
        let n = if arrivals.is_finite() {
            arrivals.max(0.0)
        } else {
            0.0
        };
        let rate = n / s.tick();
        self.ewma = if first {
            rate
        } else {
            let w = s.weight();
            w * rate + (1.0 - w) * self.ewma
        };
        self.ticks.push_back(n);
        let kept = s.ticks(s.period_s).max(s.ticks(s.change_window_s));
        while self.ticks.len() > kept {
            self.ticks.pop_front();
        }
    }

    /// The mean rate of the last `n` ticks (of those kept), queries/s.
    fn mean_qps(&self, n: usize) -> f64 {
        let k = n.min(self.ticks.len());
        if k == 0 {
            return 0.0;
        }
        self.ticks.iter().rev().take(k).sum::<f64>() / (k as f64 * self.settings.tick())
    }

    /// Records a plan decided at `at_s` for `estimate` and restarts the period from it.
    fn decide(
        &mut self,
        at_s: f64,
        cause: Cause,
        estimate: f64,
        forecast_qps: Option<f64>,
    ) -> Replan {
        let demand = with_forecast(estimate, forecast_qps);
        let r = Replan {
            at_s,
            cause,
            estimate_qps: estimate,
            demand_qps: demand,
            plan_qps: self.settings.plan_qps(demand),
        };
        self.plan = Some(r);
        self.next_periodic_s = at_s + self.settings.period_s;
        r
    }
}

/// The demand to plan for: the estimate, or the forecast when higher (a finite one).
fn with_forecast(estimate: f64, forecast_qps: Option<f64>) -> f64 {
    match forecast_qps.filter(|f| f.is_finite()) {
        Some(f) => estimate.max(f),
        None => estimate,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `rates` (queries/s, one a tick) from `from_s`, returning the plans decided.
    fn feed(m: &mut Manager, from_s: f64, rates: &[f64]) -> Vec<Replan> {
        let tick = m.settings().tick_s;
        rates
            .iter()
            .enumerate()
            .filter_map(|(i, &r)| {
                m.tick(from_s + (i + 1) as f64 * tick, r * tick, None)
                    .replan()
            })
            .collect()
    }

    #[test]
    fn the_rule_judges_rises_and_falls_beyond_a_query_per_second() {
        let rule = ManagerSettings::default().replan;
        assert!(!rule.changed(120.0, 100.0));
        assert!(rule.changed(126.0, 100.0));
        assert!(!rule.changed(51.0, 100.0));
        assert!(rule.changed(49.0, 100.0));
        // An idle pipeline planned at the floor does not re-plan for a query.
        assert!(!rule.changed(0.0, 0.1));
        assert!(!rule.changed(1.05, 0.1));
        assert!(rule.rose(2.5, 1.0) && !rule.fell(2.5, 1.0));
    }

    #[test]
    fn plans_are_made_for_the_demand_over_the_target_utilisation() {
        let s = ManagerSettings::default();
        assert!((s.plan_qps(60.0) - 100.0).abs() < 1e-9);
        assert!((s.plan_qps(0.0) - MIN_DEMAND_QPS / 0.6).abs() < 1e-12);
        assert!((s.plan_qps(f64::NAN) - MIN_DEMAND_QPS / 0.6).abs() < 1e-12);
        let (_, r) = Manager::start_at_rate(s, 0.0, 30.0);
        assert_eq!(r.cause, Cause::Start);
        assert!((r.plan_qps - 50.0).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn steady_demand_replans_every_period_and_nothing_else() {
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 50.0);
        let plans = feed(&mut m, 0.0, &[50.0; 35]);
        let at: Vec<f64> = plans.iter().map(|p| p.at_s).collect();
        assert_eq!(at, vec![10.0, 20.0, 30.0]);
        assert!(plans
            .iter()
            .all(|p| p.cause == Cause::Periodic && (p.demand_qps - 50.0).abs() < 1e-9));
    }

    #[test]
    fn a_surge_replans_within_the_window_and_restarts_the_period() {
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 50.0);
        // 3 s at 50, then 200.
        let mut rates = vec![50.0; 3];
        rates.extend([200.0; 20]);
        let plans = feed(&mut m, 0.0, &rates);
        // At 4 s on the half-changed window [2, 4), at 6 s on the first window wholly after
        // that plan; the periodic plans restart from it.
        assert_eq!(plans[0].at_s, 4.0, "{plans:?}");
        assert_eq!(plans[0].cause, Cause::Change);
        // The half-changed window [2, 4): (50 + 200) / 2.
        assert!((plans[0].demand_qps - 125.0).abs() < 1e-9, "{plans:?}");
        assert!((plans[0].plan_qps - 125.0 / 0.6).abs() < 1e-9, "{plans:?}");
        assert_eq!(plans[1].at_s, 6.0, "{plans:?}");
        assert!((plans[1].demand_qps - 200.0).abs() < 1e-9, "{plans:?}");
        assert_eq!(plans[2].at_s, 16.0, "{plans:?}");
        assert_eq!(plans[2].cause, Cause::Periodic);
        assert_eq!(plans.len(), 3, "{plans:?}");
    }

    #[test]
    fn a_spike_is_followed_and_a_fall_below_half_replans() {
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 100.0);
        let mut rates = vec![100.0; 12];
        rates.extend([400.0; 2]);
        rates.extend([100.0; 10]);
        rates.extend([30.0; 10]);
        let plans = feed(&mut m, 0.0, &rates);
        let changes: Vec<(f64, f64)> = plans
            .iter()
            .filter(|p| p.cause == Cause::Change)
            .map(|p| (p.at_s, p.demand_qps))
            .collect();
        // The spike (400 q/s over [12, 14)) is seen at 13 s on its first second, the end of
        // it at 16 s (a window after that plan), the fall to 30 q/s at 26 s, where the period
        // ends too: the plan is for the recent rate, not for the period's mean (86 q/s).
        assert_eq!(changes.len(), 3, "{plans:?}");
        for ((at, d), (want_at, want_d)) in
            changes
                .iter()
                .zip([(13.0, 250.0), (16.0, 100.0), (26.0, 30.0)])
        {
            assert_eq!(*at, want_at, "{plans:?}");
            assert!((d - want_d).abs() < 1e-9, "{plans:?}");
        }
        assert_eq!(plans.len(), 4, "{plans:?}");
        assert_eq!((plans[0].at_s, plans[0].cause), (10.0, Cause::Periodic));
        // A fall to 60% of the plan is not one.
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 100.0);
        let plans = feed(&mut m, 0.0, &[60.0; 9]);
        assert!(plans.is_empty(), "{plans:?}");
    }

    #[test]
    fn the_estimate_counts_a_surge_at_once_and_smooths_a_lull() {
        let s = ManagerSettings {
            replan_on_change: false,
            ..ManagerSettings::default()
        };
        let (mut m, _) = Manager::start_at_rate(s, 0.0, 10.0);
        // 100 q/s for 5 s: half the period at 100.
        feed(&mut m, 0.0, &[100.0; 5]);
        assert!(m.estimate_qps() >= 50.0, "{}", m.estimate_qps());
        // A surge that ended 30 s ago fades.
        feed(&mut m, 5.0, &[1.0; 30]);
        assert!(m.estimate_qps() < 5.0, "{}", m.estimate_qps());
        // A lull of 3 s after a period at 100 is planned at the period's mean.
        let (mut m, _) = Manager::start_at_rate(s, 0.0, 100.0);
        feed(
            &mut m,
            0.0,
            &[
                100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 100.0, 0.0, 0.0, 0.0,
            ],
        );
        assert!(
            (m.estimate_qps() - 70.0).abs() < 1e-9,
            "{}",
            m.estimate_qps()
        );
    }

    #[test]
    fn a_forecast_raises_the_plan_but_does_not_make_every_check_fire() {
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 40.0);
        let mut plans = Vec::new();
        for t in 1..=25 {
            if let Some(p) = m.tick(t as f64, 40.0, Some(100.0)).replan() {
                plans.push(p);
            }
        }
        assert_eq!(plans.len(), 2, "{plans:?}");
        assert!(plans.iter().all(|p| p.cause == Cause::Periodic
            && (p.demand_qps - 100.0).abs() < 1e-9
            && (p.estimate_qps - 40.0).abs() < 1e-9));
    }

    #[test]
    fn a_plan_that_could_not_be_made_is_not_checked_against() {
        let (mut m, _) = Manager::start_at_rate(ManagerSettings::default(), 0.0, 50.0);
        m.unplanned();
        assert!(feed(&mut m, 0.0, &[200.0; 9]).is_empty());
        let p = m.tick(10.0, 200.0, None).replan().unwrap();
        assert_eq!(p.cause, Cause::Periodic);
    }

    #[test]
    fn a_history_sets_the_first_plan() {
        let s = ManagerSettings::default();
        let (_, r) = Manager::start(s, 60.0, &[], None);
        assert_eq!(r.demand_qps, 0.0);
        assert!((r.plan_qps - MIN_DEMAND_QPS / 0.6).abs() < 1e-12);
        let (a, ra) = Manager::start(s, 0.0, &[20.0; 60], None);
        let (b, rb) = Manager::start_at_rate(s, 0.0, 20.0);
        assert!(
            (ra.demand_qps - rb.demand_qps).abs() < 1e-9,
            "{ra:?} {rb:?}"
        );
        assert!((a.estimate_qps() - b.estimate_qps()).abs() < 1e-9);
    }
}
