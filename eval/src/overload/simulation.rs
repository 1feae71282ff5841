//! The discrete-event simulation of a policy on a workload ([`Overload::run`]).

use std::collections::{BinaryHeap, VecDeque};
use std::rc::Rc;

use infaas_scheduler::loki::manager::Cause;
use infaas_scheduler::loki::{
    on_arrival, Alternative, Arrival, Decision, DropPolicy, Hop, LokiProblem, Manager, Replan,
    Spent,
};
use infaas_sim::pipeline::branch_draw;
use serde::Serialize;

use super::plans::{
    DemandEstimate, Overload, OverloadPlan, OverloadPolicy, OverloadSettings, Routing,
};
use super::problem::{OverloadError, MAX_TASKS};

/// Salt of the routing draws (the branch draws use the seed itself).
const ROUTE_SALT: u64 = 0x10C1_0E7E_5EED;
/// Salt of the admission draws.
const ADMIT_SALT: u64 = 0xAD_0017;
const NONE: u8 = u8::MAX;

impl Overload {
    /// Simulates `policy` on the arrivals (ms from 0, sorted) at the pipeline's root.
    pub fn run(
        &mut self,
        policy: OverloadPolicy,
        arrivals_ms: &[f64],
        estimate: DemandEstimate,
    ) -> Result<RunStats, OverloadError> {
        if arrivals_ms.is_empty() {
            return Err(OverloadError::EmptyWorkload);
        }
        // The resource manager's loop (EWMA estimates only: a fixed estimate is the true
        // demand, planned once).
        let (mut manager, first) = match estimate {
            DemandEstimate::Ewma { initial_qps } => {
                let (m, r) = Manager::start_at_rate(self.settings.manager, 0.0, initial_qps);
                (Some(m), r)
            }
            DemandEstimate::Fixed(d) => (
                None,
                Replan {
                    at_s: 0.0,
                    cause: Cause::Start,
                    estimate_qps: d,
                    demand_qps: d,
                    plan_qps: self.settings.manager.plan_qps(d),
                },
            ),
        };
        let plan = self.plan(policy, first.demand_qps)?;
        let mut sim = Sim::new(self, policy, plan);
        sim.set_admission(&self.settings, first.demand_qps);
        sim.stats.decisions.push(first);
        let tick_ms = self.settings.manager.tick_s * 1e3;
        let tick_ms = if tick_ms > 0.0 && tick_ms.is_finite() {
            tick_ms
        } else {
            1e3
        };
        // Ticks so far, and the arrivals of the current one.
        let mut ticks = 0u64;
        let mut tick_arrivals = 0usize;
        let managed = manager.is_some();
        let next_tick = |ticks: u64| {
            if managed {
                (ticks + 1) as f64 * tick_ms
            } else {
                f64::INFINITY
            }
        };
        let delay_ms = self.settings.change_delay_s.max(0.0) * 1e3;
        // A change-triggered plan and when it takes effect.
        let mut pending: Option<(f64, Rc<OverloadPlan>, f64)> = None;
        let mut i = 0usize;
        let mut last_t = 0.0;
        loop {
            let t_event = sim.events.peek().map(|e| e.at);
            let t_arrival = arrivals_ms.get(i).copied();
            let t_pending = pending.as_ref().map_or(f64::INFINITY, |p| p.0);
            let t_tick = next_tick(ticks);
            let t_ctrl = t_tick.min(t_pending);
            let ctrl_due = t_arrival.is_some_and(|a| a >= t_ctrl);
            if ctrl_due && t_event.is_none_or(|e| e >= t_ctrl) {
                if t_pending <= t_ctrl {
                    let Some((at, plan, for_qps)) = pending.take() else {
                        unreachable!("t_pending is finite")
                    };
                    sim.workers_ms += sim.plan.workers as f64 * (at - last_t);
                    last_t = at;
                    sim.replan(plan, at, &self.problem);
                    sim.set_admission(&self.settings, for_qps);
                } else if let Some(m) = manager.as_mut() {
                    let now = t_tick;
                    ticks += 1;
                    let decision = m.tick(now / 1e3, tick_arrivals as f64, None);
                    tick_arrivals = 0;
                    let Some(r) = decision.replan() else {
                        continue;
                    };
                    sim.stats.decisions.push(r);
                    let plan = self.plan(policy, r.demand_qps)?;
                    if r.cause == Cause::Change {
                        sim.stats.change_replans += 1;
                        // A later decision supersedes one still pending.
                        pending = Some((now + delay_ms, plan, r.demand_qps));
                    } else {
                        pending = None;
                        sim.workers_ms += sim.plan.workers as f64 * (now - last_t);
                        last_t = now;
                        sim.replan(plan, now, &self.problem);
                        sim.set_admission(&self.settings, r.demand_qps);
                    }
                }
                continue;
            }
            match (t_event, t_arrival) {
                (None, None) => break,
                (Some(e), a) if a.is_none_or(|a| e <= a) => {
                    let Some(ev) = sim.events.pop() else { break };
                    sim.done(ev);
                }
                (_, Some(a)) => {
                    tick_arrivals += 1;
                    sim.arrive(i, a);
                    i += 1;
                }
                (Some(_), None) => unreachable!("covered above"),
            }
        }
        let end = arrivals_ms.last().copied().unwrap_or(0.0).max(last_t);
        sim.workers_ms += sim.plan.workers as f64 * (end - last_t);
        let mut stats = sim.stats;
        stats.policy = policy.name().to_owned();
        stats.arrivals = arrivals_ms.len();
        let failed = stats.late + stats.dropped;
        stats.violation_ratio = failed as f64 / stats.arrivals as f64;
        if stats.answered > 0 {
            stats.accuracy /= stats.answered as f64;
            stats.relative_accuracy /= stats.answered as f64;
        }
        stats.workers_mean = if end > 0.0 { sim.workers_ms / end } else { 0.0 };
        stats.duration_s = end / 1e3;
        stats.demand_qps = arrivals_ms.len() as f64 / (end / 1e3).max(1e-9);
        Ok(stats)
    }
}

/// What a run measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RunStats {
    pub policy: String,
    pub arrivals: usize,
    pub duration_s: f64,
    /// Mean arrival rate, q/s.
    pub demand_qps: f64,
    /// Answered within the SLO.
    pub answered: usize,
    /// Finished after the deadline, or given up at it while queued.
    pub late: usize,
    /// Of the late: given up at the deadline while queued.
    pub expired: usize,
    /// Dropped early by the policy (or with no placement for a task).
    pub dropped: usize,
    /// Requests rerouted to a faster alternative.
    pub rerouted: usize,
    /// (late + dropped) / arrivals.
    pub violation_ratio: f64,
    /// Mean end-to-end accuracy of the queries answered within the SLO.
    pub accuracy: f64,
    /// The same relative to the most accurate variants (1.0).
    pub relative_accuracy: f64,
    /// Workers the plans used, time-weighted mean.
    pub workers_mean: f64,
    /// Plans that changed during the run.
    pub replans: usize,
    /// Re-plans triggered by a significant change of demand
    /// ([`ManagerSettings::replan_on_change`]).
    pub change_replans: usize,
    /// The resource manager's decisions, in order: the first plan's, then every re-plan
    /// (periodic or on a change), when decided and for what demand.
    #[serde(skip)]
    pub decisions: Vec<Replan>,
    /// Plans taking effect after the first (periodic or on a change) that scaled accuracy.
    pub accuracy_scaled_periods: usize,
}

impl RunStats {
    /// When each re-plan on a change of demand was decided, s.
    pub fn change_replans_at_s(&self) -> Vec<f64> {
        self.decisions
            .iter()
            .filter(|d| d.cause == Cause::Change)
            .map(|d| d.at_s)
            .collect()
    }
}

#[derive(Debug)]
struct Event {
    at: f64,
    seq: u64,
    epoch: u32,
    task: u8,
    placement: u16,
    accuracy: f32,
    budget_ms: f64,
    /// (query, when it entered the task).
    items: Vec<(u32, f64)>,
}

impl PartialEq for Event {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    /// Earliest first in a max-heap.
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        o.at.total_cmp(&self.at).then(o.seq.cmp(&self.seq))
    }
}

/// A planned hop: (task, placement, budget ms).
type PathHop = (usize, usize, f64);

#[derive(Debug)]
struct Slot {
    queue: VecDeque<(u32, f64)>,
    free: usize,
    batch: usize,
    /// Service time of a batch of `b` at `b - 1`, ms.
    service: Vec<f64>,
    budget_ms: f64,
    accuracy: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fail {
    None,
    Dropped,
    Expired,
}

#[derive(Debug, Clone)]
struct Query {
    deadline: f64,
    /// Tasks the query runs (bit per task).
    runs: u8,
    pending: u16,
    fail: Fail,
    finish: f64,
    accuracy: [f32; MAX_TASKS],
    /// Rerouted placements, valid in `override_epoch`.
    rerouted: [u8; MAX_TASKS],
    override_epoch: u32,
}

struct Sim {
    policy: OverloadPolicy,
    seed: u64,
    slo_ms: f64,
    /// The per-stage policy's SLO share of a task (`SLO / depth`).
    stage_slo_ms: f64,
    names: Vec<String>,
    parents: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Per task, its branch probability.
    branch: Vec<f64>,
    reference: Vec<f64>,
    plan: Rc<OverloadPlan>,
    epoch: u32,
    slots: Vec<Vec<Slot>>,
    events: BinaryHeap<Event>,
    seq: u64,
    queries: Vec<Query>,
    stats: RunStats,
    workers_ms: f64,
    /// Share of the arrivals the frontend admits ([`OverloadSettings::admission`]).
    admit: f64,
}

fn slots_of(problem: &LokiProblem, plan: &OverloadPlan) -> Vec<Vec<Slot>> {
    plan.tasks
        .iter()
        .enumerate()
        .map(|(t, ps)| {
            ps.iter()
                .map(|p| {
                    let o = &problem.nodes[t].options[p.option].variant;
                    let batch = p.batch.max(1);
                    let service = (1..=batch)
                        .map(|b| o.latency_at(b).map_or(p.budget_ms, |(l, k)| l.mean_ms * k))
                        .collect();
                    Slot {
                        queue: VecDeque::new(),
                        free: p.instances,
                        batch,
                        service,
                        budget_ms: p.budget_ms,
                        accuracy: p.accuracy,
                    }
                })
                .collect()
        })
        .collect()
}

impl Sim {
    fn new(o: &Overload, policy: OverloadPolicy, plan: Rc<OverloadPlan>) -> Sim {
        Sim {
            policy,
            seed: o.settings.seed,
            slo_ms: o.settings.slo_ms,
            stage_slo_ms: o.settings.slo_ms / o.depth() as f64,
            names: o.problem.nodes.iter().map(|n| n.name.clone()).collect(),
            parents: o
                .problem
                .nodes
                .iter()
                .map(|n| n.parents.first().copied().unwrap_or(usize::MAX))
                .collect(),
            children: o.children.clone(),
            reference: o.reference_accuracy.clone(),
            branch: o
                .problem
                .nodes
                .iter()
                .map(|n| n.branch_probability)
                .collect(),
            slots: slots_of(&o.problem, &plan),
            plan,
            epoch: 0,
            events: BinaryHeap::new(),
            seq: 0,
            queries: Vec::new(),
            stats: RunStats::default(),
            workers_ms: 0.0,
            admit: 1.0,
        }
    }

    /// The placement of `task` for query `q` in the current plan, from upstream placement
    /// `up` (the parent's, in the current plan).
    fn planned(&self, q: usize, task: usize, up: Option<usize>) -> Option<usize> {
        let query = &self.queries[q];
        if query.override_epoch == self.epoch && query.rerouted[task] != NONE {
            return Some(query.rerouted[task] as usize);
        }
        if self.plan.tasks.get(task).is_none_or(|ps| ps.is_empty()) {
            return None;
        }
        let u = branch_draw(self.seed ^ ROUTE_SALT, q, task);
        let pick = match &self.plan.routing {
            Routing::Joint(r) => r.pick(task, if task == 0 { None } else { up }, u),
            Routing::PerTask(v) => v
                .get(task)
                .and_then(Option::as_ref)
                .and_then(|r| r.pick(0, None, u)),
        };
        pick.map(|p| p.placement)
    }

    /// The placement of `task` for `q` in the current plan, its ancestors' drawn from the
    /// root (for a request whose parent ran under an older plan).
    fn virtual_placement(&self, q: usize, task: usize) -> Option<usize> {
        let up = match self.parents[task] {
            usize::MAX => None,
            p => Some(self.virtual_placement(q, p)?),
        };
        self.planned(q, task, up)
    }

    /// The planned rest of `q`'s path from `task` at placement `at`: the task, then the chain
    /// of its running descendants with the largest budgets.
    fn chain(&self, q: usize, task: usize, at: usize, out: &mut Vec<PathHop>) {
        let budget = self.plan.tasks[task][at].budget_ms;
        out.push((task, at, budget));
        let runs = self.queries[q].runs;
        let mut best: Option<(f64, Vec<PathHop>)> = None;
        for &c in &self.children[task] {
            if runs & (1 << c) == 0 {
                continue;
            }
            let Some(pc) = self.planned(q, c, Some(at)) else {
                continue;
            };
            let mut sub = Vec::new();
            self.chain(q, c, pc, &mut sub);
            let total: f64 = sub.iter().map(|h| h.2).sum();
            if best.as_ref().is_none_or(|(b, _)| total > *b) {
                best = Some((total, sub));
            }
        }
        if let Some((_, sub)) = best {
            out.extend(sub);
        }
    }

    fn release(&mut self, q: usize) {
        let query = &mut self.queries[q];
        query.pending = query.pending.saturating_sub(1);
        if query.pending > 0 {
            return;
        }
        match query.fail {
            Fail::Dropped => self.stats.dropped += 1,
            Fail::Expired => {
                self.stats.late += 1;
                self.stats.expired += 1;
            }
            Fail::None if query.finish > query.deadline => self.stats.late += 1,
            Fail::None => {
                self.stats.answered += 1;
                let (mut acc, mut rel, mut ends) = (0.0, 0.0, 0usize);
                for t in 0..self.names.len() {
                    if query.runs & (1 << t) == 0
                        || self.children[t].iter().any(|&c| query.runs & (1 << c) != 0)
                    {
                        continue;
                    }
                    let (mut a, mut r, mut k) = (1.0f64, 1.0f64, t);
                    loop {
                        a *= query.accuracy[k] as f64;
                        r *= self.reference[k].max(1e-9);
                        match self.parents[k] {
                            usize::MAX => break,
                            p => k = p,
                        }
                    }
                    acc += a;
                    rel += a / r;
                    ends += 1;
                }
                let ends = ends.max(1) as f64;
                self.stats.accuracy += acc / ends;
                self.stats.relative_accuracy += rel / ends;
            }
        }
    }

    fn arrive(&mut self, index: usize, now: f64) {
        let n = self.names.len();
        let mut runs = 1u8;
        for t in 1..n {
            let p = self.parents[t];
            if runs & (1 << p) != 0 && branch_draw(self.seed, index, t) < self.branch[t] {
                runs |= 1 << t;
            }
        }
        self.queries.push(Query {
            deadline: now + self.slo_ms,
            runs,
            pending: 1,
            fail: Fail::None,
            finish: now,
            accuracy: [0.0; MAX_TASKS],
            rerouted: [NONE; MAX_TASKS],
            override_epoch: u32::MAX,
        });
        if self.admit < 1.0 && branch_draw(self.seed ^ ADMIT_SALT, index, 0) >= self.admit {
            self.queries[index].fail = Fail::Dropped;
            self.release(index);
            return;
        }
        self.forward(index, 0, None, None, now);
    }

    /// Query `q`'s request about to enter `task` (from upstream placement `up`).
    fn forward(
        &mut self,
        q: usize,
        task: usize,
        up: Option<usize>,
        previous: Option<(usize, f64, f64)>,
        now: f64,
    ) {
        if self.queries[q].fail != Fail::None {
            self.release(q);
            return;
        }
        let Some(at) = self.planned(q, task, up) else {
            self.queries[q].fail = Fail::Dropped;
            self.release(q);
            return;
        };
        let decision = {
            let mut path = Vec::new();
            self.chain(q, task, at, &mut path);
            let hops: Vec<Hop> = path
                .iter()
                .map(|&(t, p, b)| Hop {
                    task: t,
                    node: &self.names[t],
                    placement: p,
                    budget_ms: b,
                })
                .collect();
            let spent = previous.map(|(t, spent_ms, budget_ms)| Spent {
                node: &self.names[t],
                spent_ms,
                budget_ms,
            });
            on_arrival(
                self.policy.drop_policy(),
                &Arrival {
                    now_ms: now,
                    deadline_ms: self.queries[q].deadline,
                    remaining: &hops,
                    alternatives: &self.plan.alternatives,
                    previous: spent,
                },
            )
        };
        let target = match decision {
            Decision::Proceed => at,
            Decision::Reroute { task: t, placement } => {
                self.set_reroute(q, t, placement);
                if t == task {
                    placement
                } else {
                    at
                }
            }
            Decision::Drop { .. } => {
                self.queries[q].fail = Fail::Dropped;
                self.release(q);
                return;
            }
        };
        self.slots[task][target].queue.push_back((q as u32, now));
        self.dispatch(task, target, now);
    }

    /// Whether query `q`, about to run at `task` on placement `at`, should be given up now:
    /// its deadline passed (every policy), or (reroute-then-drop and last-task dropping, the
    /// policies that judge the time left) the policy drops it given the rest of its path from
    /// this task; a reroute of a later task is taken. Marks the query.
    fn give_up(&mut self, q: usize, task: usize, at: usize, now: f64) -> bool {
        let query = &self.queries[q];
        if query.fail != Fail::None {
            return true;
        }
        if now >= query.deadline {
            self.queries[q].fail = Fail::Expired;
            return true;
        }
        let policy = self.policy.drop_policy();
        if !matches!(
            policy,
            DropPolicy::RerouteThenDrop | DropPolicy::LastTaskDropping
        ) {
            return false;
        }
        let decision = {
            let mut path = Vec::new();
            self.chain(q, task, at, &mut path);
            let hops: Vec<Hop> = path
                .iter()
                .map(|&(t, p, b)| Hop {
                    task: t,
                    node: &self.names[t],
                    placement: p,
                    budget_ms: b,
                })
                .collect();
            // The request is in this task's queue already: only later tasks can be rerouted.
            let later: Vec<Alternative> = self
                .plan
                .alternatives
                .iter()
                .filter(|a| a.task != task)
                .copied()
                .collect();
            on_arrival(
                policy,
                &Arrival {
                    now_ms: now,
                    deadline_ms: self.queries[q].deadline,
                    remaining: &hops,
                    alternatives: &later,
                    previous: None,
                },
            )
        };
        match decision {
            Decision::Proceed => false,
            Decision::Reroute { task: t, placement } => {
                self.set_reroute(q, t, placement);
                false
            }
            Decision::Drop { .. } => {
                self.queries[q].fail = Fail::Dropped;
                true
            }
        }
    }

    fn set_reroute(&mut self, q: usize, task: usize, placement: usize) {
        self.stats.rerouted += 1;
        let epoch = self.epoch;
        let query = &mut self.queries[q];
        if query.override_epoch != epoch {
            query.rerouted = [NONE; MAX_TASKS];
            query.override_epoch = epoch;
        }
        query.rerouted[task] = placement.min(NONE as usize - 1) as u8;
    }

    fn dispatch(&mut self, task: usize, at: usize, now: f64) {
        loop {
            let slot = &self.slots[task][at];
            if slot.free == 0 || slot.queue.is_empty() {
                return;
            }
            let batch = slot.batch;
            let mut items = Vec::with_capacity(batch);
            while items.len() < batch {
                let Some((q, enq)) = self.slots[task][at].queue.pop_front() else {
                    break;
                };
                if self.give_up(q as usize, task, at, now) {
                    self.release(q as usize);
                } else {
                    items.push((q, enq));
                }
            }
            let slot = &mut self.slots[task][at];
            let service = items
                .len()
                .checked_sub(1)
                .map(|b| slot.service[b.min(slot.service.len() - 1)]);
            let (accuracy, budget_ms) = (slot.accuracy as f32, slot.budget_ms);
            if service.is_some() {
                slot.free -= 1;
            }
            let Some(service) = service else {
                continue;
            };
            self.seq += 1;
            self.events.push(Event {
                at: now + service,
                seq: self.seq,
                epoch: self.epoch,
                task: task as u8,
                placement: at as u16,
                accuracy,
                budget_ms,
                items,
            });
        }
    }

    fn done(&mut self, ev: Event) {
        let now = ev.at;
        let task = ev.task as usize;
        let current = ev.epoch == self.epoch;
        if current {
            self.slots[task][ev.placement as usize].free += 1;
        }
        for &(q, enq) in &ev.items {
            let q = q as usize;
            if self.queries[q].fail != Fail::None {
                self.release(q);
                continue;
            }
            let runs = self.queries[q].runs;
            {
                let query = &mut self.queries[q];
                query.accuracy[task] = ev.accuracy;
                query.finish = query.finish.max(now);
            }
            let kids: Vec<usize> = self.children[task]
                .iter()
                .copied()
                .filter(|&c| runs & (1 << c) != 0)
                .collect();
            if !kids.is_empty() {
                let up = if current {
                    Some(ev.placement as usize)
                } else {
                    self.virtual_placement(q, task)
                };
                self.queries[q].pending += kids.len() as u16;
                for c in kids {
                    let share = match self.policy {
                        OverloadPolicy::PerStage => self.stage_slo_ms,
                        _ => 2.0 * ev.budget_ms,
                    };
                    self.forward(q, c, up, Some((task, now - enq, share)), now);
                }
            }
            self.release(q);
        }
        if current {
            self.dispatch(task, ev.placement as usize, now);
        }
    }

    /// With [`OverloadSettings::admission`], a loki plan that carries less than the estimate
    /// has the frontend admit only what it carries (at the target utilisation).
    fn set_admission(&mut self, settings: &OverloadSettings, estimate: f64) {
        self.admit = 1.0;
        if settings.admission && matches!(self.policy, OverloadPolicy::Loki(_)) && estimate > 0.0 {
            let carried = self.plan.served_fraction
                * self.plan.demand_qps
                * settings.manager.utilisation_target();
            self.admit = (carried / estimate).clamp(0.0, 1.0);
        }
    }

    fn replan(&mut self, plan: Rc<OverloadPlan>, now: f64, problem: &LokiProblem) {
        if plan.accuracy_scaled {
            self.stats.accuracy_scaled_periods += 1;
        }
        if Rc::ptr_eq(&plan, &self.plan) {
            return;
        }
        self.stats.replans += 1;
        let old = std::mem::replace(&mut self.slots, slots_of(problem, &plan));
        self.plan = plan;
        self.epoch += 1;
        for (task, slots) in old.into_iter().enumerate() {
            for slot in slots {
                for (q, enq) in slot.queue {
                    let q = q as usize;
                    if self.queries[q].fail != Fail::None {
                        self.release(q);
                        continue;
                    }
                    match self.virtual_placement(q, task) {
                        Some(at) => self.slots[task][at].queue.push_back((q as u32, enq)),
                        None => {
                            self.queries[q].fail = Fail::Dropped;
                            self.release(q);
                        }
                    }
                }
            }
        }
        for task in 0..self.slots.len() {
            for at in 0..self.slots[task].len() {
                self.dispatch(task, at, now);
            }
        }
    }
}
