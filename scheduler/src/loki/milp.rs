//! Loki's resource manager (§4.1-4.2): the hardware-scaling and accuracy-scaling MILPs.
//!
//! **Variables.** Per candidate variant `(i, k)` and allowed batch `b`: a binary `z(i,k,b)`
//! (the batch chosen, `Σ_b z ≤ 1`: `y(i,k) = Σ_b b z`, Constraint 4) and an integer
//! `x(i,k,b) ≤ U z(i,k,b)` (instances at that batch; `x(i,k) = Σ_b x(i,k,b)`), which makes
//! `x(i,k) q(i,k,y(i,k))` linear: `Σ_b q(i,k,b) x(i,k,b)`. Per augmented path `p` (a variant per
//! task of a root-to-leaf task path) a continuous `c(p) ∈ [0, 1]`, and, on paths of three tasks
//! or more whose latency depends on the batches chosen, a binary `I(p)`.
//!
//! **Constraints.** Per task path, `Σ_p c(p) = s`, the served fraction (1 in step 1, a variable
//! in [0, 1] in step 2). Capacity (Eq 1-2): `Σ_{p ∋ (i,k)} D c(p) m(p,i,k) ≤ Σ_b q x` with
//! `m` the branch probabilities to task `i` times the multiplicative factors of the variants
//! before it on `p`. Workers (Eq 3) per pool. Latency (Eq 5-7), with `L' = SLO/2 - comm * |p|`
//! and `l(i,k) = Σ_b z(i,k,b) latency(i,k,b)` (the p99 of a batch of `b`, which is `y / q(y)`):
//! - a path that fits `L'` at its largest batches needs nothing; one that does not fit at its
//!   smallest is not enumerated (no variable);
//! - for every two variants `a`, `b` of different tasks and every batch `β` of `a`, the paths
//!   through both carry traffic only if `b` runs at a batch that fits with `β` (and the fastest
//!   candidates of the path's other tasks): `Σ c(p) ≤ 1 - z(a,β) + Σ_{fitting β'} z(b,β')`.
//!   This is Eq 7 exactly on two-task paths, without Loki's big-M (whose LP relaxation lets a
//!   fractional `I(p)` ignore latency, and made the solves several times slower);
//! - paths of three tasks or more also get Eq 7 itself: `Σ_{(i,k) ∈ p} l(i,k) ≤ L' + M (1 -
//!   I(p))`, `c(p) ≤ I(p)`, `M` the path's largest latency less `L'`.
//!
//! Branching trees: task paths through a branching task agree on the split of the traffic up
//! to it (one row per variant prefix), so the capacity of a task is counted on its first path.
//! Batches no faster and of no higher throughput than another batch of the same variant are
//! dropped beforehand (they never help).
//!
//! **Objectives.** Step 1 (Eq 8-11): only the most accurate variants of each task (all those
//! of the top accuracy, e.g. one model on several pools), minimise `Σ x`. Step 2 (Eq 12):
//! maximise `100 s + Σ_p w c(p) Â(p) / Â*` (less `1e-6` per instance): serving a larger
//! fraction first (within 1% of the demand, the accuracy term being at most 1), then the most
//! accurate mix; `Â*` is the path's best, `w` the share of the queries reaching the path's
//! leaf. When `s = 1` is feasible this is Loki's objective.
//!
//! **Size.** Step 2 enumerates `Π_i |cand_i|` paths per task path, so candidates are pruned
//! first ([`super::accuracy_scaling`]); a step-2 model of a 2-task pipeline with 16 candidates
//! per task and 5 batches holds 256 paths, 160 binaries `z` and 160 integers `x`.
//!
//! **Bounded time.** Each solve has the time left of [`LokiSettings::time_limit`], of which
//! the solver is given [`SOLVER_SHARE`]: CBC reads its clock only between search nodes and
//! passes, and overshot its limit by up to about 45% on the bench's problems. A solve stopped
//! by the limit gives its incumbent when the incumbent passes the feasibility check (CBC may
//! return an LP point instead when it found none), the better of it and the greedy plan
//! ([`super::greedy`]) by the step's objective; a failed solve gives the greedy plan.
//! Optimality is hard to prove near saturation (packing 20 workers among many variants and
//! batches): on the bench's Proteus pipelines (`eval/benches/loki.rs`, 1.5-3x the full-accuracy
//! capacity) the 400 ms incumbent is within 1.5% of the optimum's accuracy at the same served
//! fraction, or serves up to 1.6% less of the demand, where proving the optimum takes 0.6-11 s.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use good_lp::{variable, Expression, ResolutionError, Variable};

use super::greedy::greedy_solution;
use super::prep::Prepared;
use super::solution::Solution;
use super::{Allocation, LokiError, LokiProblem, LokiSettings, Mode, SolveStatus};
use crate::milp::{self, MilpError, Problem, Settings, Status};

pub use super::solution::verify;

/// Share of the time left that the solver is given (the rest absorbs its overshoot).
pub const SOLVER_SHARE: f64 = 0.75;

/// Weight of the served fraction in step 2's objective.
const SERVE_WEIGHT: f64 = 100.0;
/// Cost of one instance in step 2's objective (a tie-break).
const INSTANCE_COST: f64 = 1e-6;

/// Loki's resource manager: step 1 ([`hardware_scaling`]), then step 2
/// ([`accuracy_scaling`]) when step 1 is infeasible, within `settings.time_limit` overall
/// (step 2 gets what step 1 left, at least a quarter of the limit).
pub fn allocate(problem: &LokiProblem, settings: &LokiSettings) -> Result<Allocation, LokiError> {
    let started = Instant::now();
    let prep = Prepared::new(problem)?;
    if let Some(a) = step1(&prep, settings, settings.time_limit, started) {
        return Ok(a);
    }
    let left = settings
        .time_limit
        .saturating_sub(started.elapsed())
        .max(settings.time_limit / 4);
    Ok(step2(&prep, settings, left, started))
}

/// Step 1: the most accurate variant(s) of every task and the fewest instances that carry the
/// whole demand within the latency SLO; `None` when the cluster cannot (Eq 8-11).
pub fn hardware_scaling(
    problem: &LokiProblem,
    settings: &LokiSettings,
) -> Result<Option<Allocation>, LokiError> {
    let started = Instant::now();
    let prep = Prepared::new(problem)?;
    Ok(step1(&prep, settings, settings.time_limit, started))
}

/// Step 2: the most accurate mix of variants and paths that carries the demand (or the
/// largest fraction of it that the cluster can carry), Eq 1-7 and 12.
///
/// Candidates per task are pruned before the paths are enumerated: a variant is dropped when
/// another of the same task and pool is at least as accurate, has no larger multiplicative
/// factor and is no slower at any of its batches (it can replace it at no loss, assuming, as
/// Loki does, that path accuracy grows with the variants' accuracies). If the tasks still
/// have more than `max_candidates` each, or more than `max_paths` augmented paths would be
/// enumerated, each pool keeps its accuracy/peak-throughput Pareto front, and beyond that each
/// pool's most accurate and fastest variants plus others spread evenly over accuracy.
pub fn accuracy_scaling(
    problem: &LokiProblem,
    settings: &LokiSettings,
) -> Result<Allocation, LokiError> {
    let started = Instant::now();
    let prep = Prepared::new(problem)?;
    Ok(step2(&prep, settings, settings.time_limit, started))
}

fn step1(
    prep: &Prepared,
    settings: &LokiSettings,
    limit: Duration,
    started: Instant,
) -> Option<Allocation> {
    let cand = prep.most_accurate();
    let greedy = || {
        greedy_solution(prep, &cand)
            .filter(|g| g.served >= 1.0 - 1e-9 && g.check(prep).is_ok())
            .map(|g| g.finish(prep, Mode::HardwareScaling, SolveStatus::Fallback, started))
    };
    if prep.problem.demand_qps <= 0.0 {
        let empty = Solution {
            served: 1.0,
            ..Solution::default()
        };
        return Some(empty.finish(prep, Mode::HardwareScaling, SolveStatus::Optimal, started));
    }
    let model = Model::build(prep, &cand, Mode::HardwareScaling);
    match solve(model, prep, settings, limit) {
        Outcome::Solved(sol, Status::Optimal | Status::GapLimit) => {
            Some(sol.finish(prep, Mode::HardwareScaling, SolveStatus::Optimal, started))
        }
        Outcome::Solved(sol, Status::TimeLimit) => {
            let instances = |s: &Solution| s.pool_use(prep).iter().sum::<usize>();
            match greedy_solution(prep, &cand).filter(|g| g.served >= 1.0 - 1e-9) {
                Some(g) if g.check(prep).is_ok() && instances(&g) < instances(&sol) => {
                    Some(g.finish(prep, Mode::HardwareScaling, SolveStatus::Fallback, started))
                }
                _ => Some(sol.finish(
                    prep,
                    Mode::HardwareScaling,
                    SolveStatus::TimeLimited,
                    started,
                )),
            }
        }
        Outcome::Infeasible => None,
        Outcome::Unusable => greedy(),
    }
}

fn step2(
    prep: &Prepared,
    settings: &LokiSettings,
    limit: Duration,
    started: Instant,
) -> Allocation {
    let cand = prep.candidates(settings);
    let fallback = || {
        let g = greedy_solution(prep, &cand).unwrap_or_default();
        g.finish(prep, Mode::AccuracyScaling, SolveStatus::Fallback, started)
    };
    if prep.problem.demand_qps <= 0.0 {
        let empty = Solution {
            served: 1.0,
            ..Solution::default()
        };
        return empty.finish(prep, Mode::AccuracyScaling, SolveStatus::Optimal, started);
    }
    let model = Model::build(prep, &cand, Mode::AccuracyScaling);
    match solve(model, prep, settings, limit) {
        Outcome::Solved(sol, Status::Optimal | Status::GapLimit) => {
            sol.finish(prep, Mode::AccuracyScaling, SolveStatus::Optimal, started)
        }
        Outcome::Solved(sol, Status::TimeLimit) => {
            let score = |s: &Solution| {
                SERVE_WEIGHT * s.served + s.accuracy_terms(prep).0
                    - INSTANCE_COST * s.pool_use(prep).iter().sum::<usize>() as f64
            };
            match greedy_solution(prep, &cand) {
                Some(g) if g.check(prep).is_ok() && score(&g) > score(&sol) + 1e-9 => {
                    g.finish(prep, Mode::AccuracyScaling, SolveStatus::Fallback, started)
                }
                _ => sol.finish(
                    prep,
                    Mode::AccuracyScaling,
                    SolveStatus::TimeLimited,
                    started,
                ),
            }
        }
        Outcome::Infeasible | Outcome::Unusable => fallback(),
    }
}

enum Outcome {
    /// A plan that passed the feasibility check.
    Solved(Solution, Status),
    Infeasible,
    /// The solver failed, or stopped without a feasible incumbent.
    Unusable,
}

fn solve(model: Model, prep: &Prepared, settings: &LokiSettings, limit: Duration) -> Outcome {
    let Model {
        problem,
        batches,
        paths,
        served,
    } = model;
    if paths.is_empty() {
        return Outcome::Infeasible;
    }
    let s = Settings {
        optimal: true,
        small: false,
        time_limit: Some(limit.mul_f64(SOLVER_SHARE).max(Duration::from_millis(1))),
    };
    let solved = match milp::solve(settings.solver, problem, &s) {
        Ok(s) => s,
        Err(MilpError::Failed {
            source: ResolutionError::Infeasible,
            ..
        }) => return Outcome::Infeasible,
        Err(_) => return Outcome::Unusable,
    };
    let near_int = |x: f64| (x - x.round()).abs() <= 1e-4;
    let mut sol = Solution {
        served: served.map_or(1.0, |v| solved.value(v)),
        ..Solution::default()
    };
    for ((v, b), (z, x)) in &batches {
        let (zv, xv) = (solved.value(*z), solved.value(*x));
        if !near_int(zv) || !near_int(xv) {
            return Outcome::Unusable;
        }
        let n = solved.count(*x);
        if zv > 0.5 && n > 0 && sol.placements.insert(*v, (*b, n)).is_some() {
            return Outcome::Unusable;
        }
    }
    for (k, combo, c, i) in &paths {
        let mut ratio = solved.value(*c).max(0.0);
        if ratio < 1e-9 {
            ratio = 0.0;
        }
        if let Some(i) = i {
            if !near_int(solved.value(*i)) {
                return Outcome::Unusable;
            }
        }
        sol.paths.push((*k, combo.clone(), ratio));
    }
    sol.served = sol.served.clamp(0.0, 1.0);
    if sol.served < 1e-9 {
        sol.served = 0.0;
    }
    match sol.check(prep) {
        Ok(()) => Outcome::Solved(sol, solved.status),
        Err(_) => Outcome::Unusable,
    }
}

/// A step's MILP and where its variables are.
struct Model {
    problem: Problem,
    /// (variant, batch index) -> (z, x).
    batches: BTreeMap<(usize, usize), (Variable, Variable)>,
    /// (task path, combination, c, I).
    paths: Vec<(usize, Vec<usize>, Variable, Option<Variable>)>,
    served: Option<Variable>,
}

impl Model {
    fn build(prep: &Prepared, cand: &[Vec<usize>], mode: Mode) -> Model {
        let d = prep.problem.demand_qps;
        let mut p = Problem::new();
        p.maximise = mode == Mode::AccuracyScaling;
        let served = match mode {
            Mode::HardwareScaling => None,
            Mode::AccuracyScaling => Some(p.vars.add(variable().min(0).max(1))),
        };
        if let Some(s) = served {
            p.objective.add_mul(SERVE_WEIGHT, s);
        }
        // Batches and instances.
        let mut batches = BTreeMap::new();
        let mut capacity: HashMap<usize, Expression> = HashMap::new();
        let mut latency: HashMap<usize, Expression> = HashMap::new();
        let mut pool_rows = vec![Expression::default(); prep.pools.len()];
        for (t, vs) in cand.iter().enumerate() {
            let most = prep.max_multiplier(cand, t) * d;
            for &v in vs {
                let var = &prep.variants[v];
                let workers = prep.pools[var.pool].1 as f64;
                let mut one = Expression::default();
                let mut cap = Expression::default();
                let mut lat = Expression::default();
                for (b, batch) in var.batches.iter().enumerate() {
                    let ub = workers.min((most / batch.qps - 1e-9).ceil().max(1.0));
                    let z = p.vars.add(variable().binary());
                    let x = p.vars.add(variable().integer().min(0).max(ub));
                    p.add_constraint((Expression::from(x) - ub * z).leq(0.0));
                    one.add_mul(1.0, z);
                    cap.add_mul(batch.qps / d, x);
                    lat.add_mul(batch.latency_ms, z);
                    pool_rows[var.pool].add_mul(1.0, x);
                    p.objective.add_mul(
                        match mode {
                            Mode::HardwareScaling => 1.0,
                            Mode::AccuracyScaling => -INSTANCE_COST,
                        },
                        x,
                    );
                    batches.insert((v, b), (z, x));
                }
                p.add_constraint(one.leq(1.0));
                capacity.insert(v, cap);
                latency.insert(v, lat);
            }
        }
        for (row, (_, workers)) in pool_rows.into_iter().zip(&prep.pools) {
            p.add_constraint(row.leq(*workers as f64));
        }
        // Paths.
        let mut paths = Vec::new();
        let mut load: HashMap<usize, Expression> = HashMap::new();
        let mut split: BTreeMap<(usize, usize, Vec<usize>), Expression> = BTreeMap::new();
        let mut pairs: BTreeMap<(usize, usize, usize, usize, usize), Expression> = BTreeMap::new();
        for (k, tp) in prep.paths.iter().enumerate() {
            let mut sum = Expression::default();
            for combo in prep.combos(k, cand) {
                let lo: f64 = combo
                    .iter()
                    .map(|&v| {
                        prep.variants[v]
                            .batches
                            .first()
                            .map_or(0.0, |b| b.latency_ms)
                    })
                    .sum();
                let hi: f64 = combo
                    .iter()
                    .map(|&v| {
                        prep.variants[v]
                            .batches
                            .last()
                            .map_or(0.0, |b| b.latency_ms)
                    })
                    .sum();
                if lo > tp.budget_ms + 1e-9 {
                    continue;
                }
                let c = p.vars.add(variable().min(0).max(1));
                sum.add_mul(1.0, c);
                let needs = hi > tp.budget_ms + 1e-9;
                if needs {
                    for j in 0..combo.len() {
                        for l in (0..combo.len()).filter(|&l| l != j) {
                            pairs
                                .entry((k, j, l, combo[j], combo[l]))
                                .or_default()
                                .add_mul(1.0, c);
                        }
                    }
                }
                // Pairwise rows settle two-task paths; longer ones also need Eq 7 itself.
                let indicator = (needs && combo.len() >= 3).then(|| {
                    let i = p.vars.add(variable().binary());
                    p.add_constraint((Expression::from(c) - i).leq(0.0));
                    let mut row = Expression::default();
                    for v in &combo {
                        if let Some(l) = latency.get(v) {
                            row += l.clone();
                        }
                    }
                    let m = hi - tp.budget_ms;
                    row.add_mul(m, i);
                    p.add_constraint(row.leq(tp.budget_ms + m));
                    i
                });
                if mode == Mode::AccuracyScaling {
                    p.objective
                        .add_mul(tp.weight * prep.relative_accuracy(k, &combo), c);
                }
                for (pos, &t) in tp.tasks.iter().enumerate() {
                    if prep.first_path[t] == k {
                        load.entry(combo[pos])
                            .or_default()
                            .add_mul(prep.multiplier(k, &combo, pos), c);
                    }
                    if prep.children[t].len() >= 2 {
                        split
                            .entry((t, k, combo[..=pos].to_vec()))
                            .or_default()
                            .add_mul(1.0, c);
                    }
                }
                paths.push((k, combo, c, indicator));
            }
            match served {
                Some(s) => p.add_constraint((sum - s).eq(0.0)),
                None => p.add_constraint(sum.eq(1.0)),
            }
        }
        // Latency (Eq 5-7) pairwise: the paths through `a` (task j at batch b) and `b` (task
        // l) carry traffic only if `b` runs at a batch that fits with `a`'s and the fastest
        // candidates of the path's other tasks: `Σ c ≤ 1 - z(a, b) + Σ_{fitting b'} z(b, b')`.
        let fastest: Vec<f64> = cand
            .iter()
            .map(|vs| {
                vs.iter()
                    .filter_map(|&v| prep.variants[v].batches.first())
                    .map(|b| b.latency_ms)
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        for ((k, j, l, va, vb), sum) in pairs {
            let tp = &prep.paths[k];
            let rest: f64 = tp
                .tasks
                .iter()
                .enumerate()
                .filter(|&(pos, _)| pos != j && pos != l)
                .map(|(_, &t)| fastest[t])
                .sum();
            let (a, b) = (&prep.variants[va], &prep.variants[vb]);
            for (ba, batch_a) in a.batches.iter().enumerate() {
                let room = tp.budget_ms - rest - batch_a.latency_ms + 1e-9;
                let fit: Vec<usize> = (0..b.batches.len())
                    .filter(|&bb| b.batches[bb].latency_ms <= room)
                    .collect();
                if fit.len() == b.batches.len() {
                    continue;
                }
                let mut row = sum.clone();
                if let Some(&(z, _)) = batches.get(&(va, ba)) {
                    row.add_mul(1.0, z);
                }
                for bb in fit {
                    if let Some(&(z, _)) = batches.get(&(vb, bb)) {
                        row.add_mul(-1.0, z);
                    }
                }
                p.add_constraint(row.leq(1.0));
            }
        }
        for (v, l) in load {
            if let Some(cap) = capacity.remove(&v) {
                p.add_constraint((l - cap).leq(0.0));
            }
        }
        // Task paths through a branching task split the traffic up to it alike.
        type PerPath = Vec<(usize, Expression)>;
        let mut prefixes: BTreeMap<(usize, Vec<usize>), PerPath> = BTreeMap::new();
        for ((t, k, prefix), e) in split {
            prefixes.entry((t, prefix)).or_default().push((k, e));
        }
        for ((t, _), mut per_path) in prefixes {
            let through: Vec<usize> = (0..prep.paths.len())
                .filter(|&k| prep.paths[k].tasks.contains(&t))
                .collect();
            let first = through.first().copied().unwrap_or(0);
            let base = per_path
                .iter()
                .position(|(k, _)| *k == first)
                .map(|i| per_path.swap_remove(i).1)
                .unwrap_or_default();
            for &k in through.iter().skip(1) {
                let e = per_path
                    .iter()
                    .find(|(j, _)| *j == k)
                    .map(|(_, e)| e.clone())
                    .unwrap_or_default();
                p.add_constraint((e - base.clone()).eq(0.0));
            }
        }
        Model {
            problem: p,
            batches,
            paths,
            served,
        }
    }
}
