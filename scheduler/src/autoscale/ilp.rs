//! The INFaaS model-scaling ILP (§4.2.1), solved to optimality by the build's MILP solver
//! ([`crate::milp`]); see the parent module for the formulation.
//!
//! Up to three solves, each a relaxation of the next, stopping at the first whose optimum can be
//! placed. A relaxation's optimum bounds the per-worker model's from below; once its counts are
//! packed onto workers (first-fit decreasing) the plan is feasible there and reaches the bound,
//! so it is optimal.
//! 1. **Each family alone, fleet level.** Families share nothing but resources, so without the
//!    resource rows coupling them the problem splits into one small ILP per family. Loads are
//!    counted per variant (`X_j`), resources per hardware kind (below).
//! 2. **All families, fleet level**, when step 1 does not pack: `sum threads X_j` over GPU
//!    variants within the free cores of GPU workers, over CPU variants within those of CPU
//!    workers, over all variants within the whole fleet's (the same for memory). Any per-worker
//!    solution satisfies these sums.
//! 3. **Worker level**, when step 2 does not pack either: the per-worker model of the parent
//!    module (`x_jw` per worker, two resource rows per worker; among equal plans, loads on
//!    permanent workers, see `RELEASABLE_TIE`).
//!
//! Both bound a variant's loads by `ceil((slack * L - kept) / Q_j)`, where `kept` is the
//! capacity of instances that may not be removed, and by the workers that can host it (a worker
//! runs one instance of a variant; so a variant that another of its family beats on every count
//! still serves where that one already runs, and keeps its variables). The objective is divided by the smallest
//! instance price so that its coefficients are near 1 and the solver's absolute tolerances stay
//! far below one instance's price.

use good_lp::{variable, Expression, Variable};

use infaas_core::HardwareKind;

use crate::autoscale::problem::{family_actions, Loads, Objective, Prepared, Room};
use crate::autoscale::{ScalingError, ScalingInput, ScalingPlan};
use crate::milp::{self, Problem, Settings, Solver, Status};
use crate::snapshot::VariantEntry;

/// The optimal plan for `input`: least objective over every feasible set of loads and removals.
pub fn exact(input: &ScalingInput) -> Result<ScalingPlan, ScalingError> {
    exact_with(input, Solver::DEFAULT)
}

/// [`exact`] solved by `solver` (to compare solvers on the same inputs).
pub fn exact_with(input: &ScalingInput, solver: Solver) -> Result<ScalingPlan, ScalingError> {
    let p = Prepared::new(input)?;
    let (loads, removals) = optimal_changes(&p, solver)?;
    let score = p.score(&loads, &removals);
    let mut actions = Vec::new();
    for f in 0..input.families.len() {
        let mut fl: Vec<(usize, usize)> = loads
            .iter()
            .copied()
            .filter(|&(j, _)| p.family_of[j] == Some(f))
            .collect();
        let fr: Vec<usize> = removals
            .iter()
            .copied()
            .filter(|&k| p.family_of[input.running[k].variant] == Some(f))
            .collect();
        if fl.is_empty() && fr.is_empty() {
            continue;
        }
        // Pair the fastest new instances with removals first.
        fl.sort_by(|a, b| p.peak[b.0].total_cmp(&p.peak[a.0]));
        let capacity_after = p.capacity(f) + fl.iter().map(|&(j, _)| p.peak[j]).sum::<f64>()
            - fr.iter()
                .map(|&k| p.peak[input.running[k].variant])
                .sum::<f64>();
        let why = format!(
            "optimal plan (objective {:.4e}/s): {:.0} rows/s to serve with slack, capacity {:.0} -> {capacity_after:.0} rows/s",
            score.objective,
            p.demand(f),
            p.capacity(f),
        );
        actions.extend(family_actions(&p, f, &fl, &fr, &why));
    }
    Ok(ScalingPlan {
        actions,
        score,
        released: Vec::new(),
    })
}

/// Where the resource constraints are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    /// Per hardware kind, over the free room of all its workers: a relaxation of `Worker`.
    Fleet,
    /// Per worker: the exact model.
    Worker,
}

/// An ILP solution: loads as `(variant, worker at worker level, count)`, and removals
/// (indices into `input.running`).
pub(super) struct Counts {
    pub loads: Vec<(usize, Option<usize>, usize)>,
    pub removals: Vec<usize>,
}

/// The optimal loads `(variant, worker)` and removals; see the module documentation.
pub(super) fn optimal_changes(
    p: &Prepared,
    solver: Solver,
) -> Result<(Loads, Vec<usize>), ScalingError> {
    // Each family alone: their optima together bound the coupled optimum from below.
    let mut each = Counts {
        loads: Vec::new(),
        removals: Vec::new(),
    };
    for f in 0..p.input.families.len() {
        let c = solve(p, Level::Fleet, Some(f), solver)?;
        each.loads.extend(c.loads);
        each.removals.extend(c.removals);
    }
    if let Some(loads) = pack(p, &each.loads) {
        return Ok((loads, each.removals));
    }
    let fleet = solve(p, Level::Fleet, None, solver)?;
    if let Some(loads) = pack(p, &fleet.loads) {
        return Ok((loads, fleet.removals));
    }
    let c = solve(p, Level::Worker, None, solver)?;
    let loads = c
        .loads
        .iter()
        .flat_map(|&(j, w, n)| w.map(|w| std::iter::repeat_n((j, w), n)))
        .flatten()
        .collect();
    Ok((loads, c.removals))
}

/// What a load on a worker the provider started adds to the per-worker model's objective, in
/// its unit (the cheapest instance's price per second): among plans equal but for placement,
/// the one with instances on permanent workers wins, as in [`pack`], so that scale-in can empty
/// the started ones. A thousandth of an instance's price: far above the solver's absolute gap
/// (1e-6), far below any real difference between plans.
const RELEASABLE_TIE: f64 = 1e-3;

/// Solves the ILP at `level`, over family `only` (alone, without the others' loads in the
/// resource rows) or over all families.
pub(super) fn solve(
    p: &Prepared,
    level: Level,
    only: Option<usize>,
    solver: Solver,
) -> Result<Counts, ScalingError> {
    let input = p.input;
    let workers = input.workers;
    let variants = input.variants;
    let room = Room::new(workers, input.running.iter().map(|r| (r.variant, r.worker)));
    let unit = p
        .rate
        .iter()
        .copied()
        .filter(|&r| r > 0.0)
        .fold(f64::INFINITY, f64::min);
    let unit = if unit.is_finite() { unit } else { 1.0 };
    // Resource groups: one per worker, or one per hardware kind plus the whole fleet.
    let groups: Vec<Vec<usize>> = match level {
        Level::Worker => (0..workers.len()).map(|w| vec![w]).collect(),
        Level::Fleet => {
            let with = |h| {
                (0..workers.len())
                    .filter(|&w| workers[w].alive && workers[w].hardware.contains(&h))
                    .collect()
            };
            let all = (0..workers.len()).filter(|&w| workers[w].alive).collect();
            vec![with(HardwareKind::Cpu), with(HardwareKind::Gpu), all]
        }
    };
    // Groups a load of `v` on `w` (or anywhere, at fleet level) counts against.
    let member = |g: usize, v: &VariantEntry, w: Option<usize>| match (level, w) {
        (Level::Worker, Some(w)) => g == w,
        (Level::Fleet, _) => g == 2 || g == slot(v.hardware),
        (Level::Worker, None) => false,
    };

    let mut problem = Problem::new();
    let vars = &mut problem.vars;
    let mut objective = Expression::with_capacity(variants.len() * 2);
    // (variant, worker at worker level, variable)
    let mut x: Vec<(usize, Option<usize>, Variable)> = Vec::new();
    let mut r: Vec<(usize, Variable)> = Vec::new();
    // (row, right-hand side, whether the row has a variable)
    let mut load_rows: Vec<(Expression, f64, bool)> = Vec::with_capacity(input.families.len());
    let mut cores: Vec<Expression> = vec![Expression::default(); groups.len()];
    let mut memory: Vec<Expression> = vec![Expression::default(); groups.len()];
    let mut used = vec![false; groups.len()];

    for (f, fam) in input.families.iter().enumerate() {
        if only.is_some_and(|o| o != f) {
            continue;
        }
        let demand = p.demand(f);
        // Capacity that stays whatever the plan: instances that may not be removed.
        let kept: f64 = fam
            .variants
            .iter()
            .map(|&j| (p.running[j].len() - p.removable[j]) as f64 * p.peak[j])
            .sum();
        let mut row = Expression::default();
        let mut any = false;
        for &j in &fam.variants {
            let v = &variants[j];
            if p.loadable[j] && demand > kept {
                let useful = ((demand - kept) / p.peak[j]).ceil();
                let fit = |w: usize| {
                    if !room.fits(workers, w, j, v) {
                        return 0.0;
                    }
                    let by_cores = (room.cores(w) / v.threads.max(1)) as f64;
                    let by_memory = match v.memory_bytes {
                        0 => f64::INFINITY,
                        m => (room.memory(w) / m) as f64,
                    };
                    // A worker runs at most one instance of a variant.
                    by_cores.min(by_memory).min(1.0)
                };
                let columns: Vec<(Option<usize>, f64)> = match level {
                    Level::Worker => (0..workers.len()).map(|w| (Some(w), fit(w))).collect(),
                    Level::Fleet => vec![(None, (0..workers.len()).map(fit).sum())],
                };
                for (w, fits) in columns {
                    let ub = useful.min(fits);
                    if ub < 1.0 {
                        continue;
                    }
                    let var = vars.add(variable().integer().min(0).max(ub));
                    // Among equal plans, instances on permanent workers (see RELEASABLE_TIE).
                    let tie = match w {
                        Some(w) if input.is_releasable(w) => RELEASABLE_TIE,
                        _ => 0.0,
                    };
                    objective.add_mul(p.load_weight(j) / unit + tie, var);
                    row.add_mul(p.peak[j], var);
                    for g in 0..groups.len() {
                        if member(g, v, w) {
                            cores[g].add_mul(v.threads as f64, var);
                            memory[g].add_mul(v.memory_bytes as f64 / 1e9, var);
                            used[g] = true;
                        }
                    }
                    x.push((j, w, var));
                    any = true;
                }
            }
            if p.removable[j] > 0 {
                let var = vars.add(variable().integer().min(0).max(p.removable[j] as f64));
                objective.add_mul(-p.rate[j] / unit, var);
                row.add_mul(-p.peak[j], var);
                r.push((j, var));
                any = true;
            }
        }
        if demand > 0.0 {
            let u = vars.add(variable().min(0).max(demand));
            objective.add_mul(p.penalty / unit, u);
            row.add_mul(1.0, u);
            any = true;
        }
        load_rows.push((row, demand - p.capacity(f), any));
    }
    if x.is_empty() && r.is_empty() {
        // Nothing to decide: unserved load, if any, is what it is.
        return Ok(Counts {
            loads: Vec::new(),
            removals: Vec::new(),
        });
    }

    problem.objective = objective;
    for (row, rhs, any) in load_rows {
        if any {
            problem.add_constraint(row.geq(rhs));
        }
    }
    for (g, (c, m)) in cores.into_iter().zip(memory).enumerate() {
        if used[g] {
            let free_cores: usize = groups[g].iter().map(|&w| room.cores(w)).sum();
            let free_memory: u64 = groups[g].iter().map(|&w| room.memory(w)).sum();
            problem.add_constraint(c.leq(free_cores as f64));
            problem.add_constraint(m.leq(free_memory as f64 / 1e9));
        }
    }
    let settings = Settings {
        // Prove optimality: no relative gap allowed.
        optimal: true,
        // A family alone has a handful of columns.
        small: only.is_some(),
        time_limit: None,
    };
    let solution = milp::solve(solver, problem, &settings)?;
    match solution.status {
        Status::Optimal => {}
        Status::TimeLimit => return Err(ScalingError::NotOptimal("time limit")),
        Status::GapLimit => return Err(ScalingError::NotOptimal("gap limit")),
    }
    let count = |v: Variable| solution.count(v);
    let mut removals = Vec::new();
    for &(j, var) in &r {
        removals.extend(p.removable_of(j).into_iter().take(count(var)));
    }
    let loads = x
        .iter()
        .map(|&(j, w, var)| (j, w, count(var)))
        .filter(|&(_, _, n)| n > 0)
        .collect();
    Ok(Counts { loads, removals })
}

fn slot(h: HardwareKind) -> usize {
    match h {
        HardwareKind::Cpu => 0,
        HardwareKind::Gpu => 1,
    }
}

/// Places `count` instances of each variant on workers, or `None` when this first-fit
/// decreasing packing fails (GPU variants first, then by threads and memory; each on a
/// permanent worker while one fits, as the greedy planner places, so that scale-in can empty
/// the workers the provider started; among those, on the one it leaves with the fewest free
/// cores).
pub(super) fn pack(
    p: &Prepared,
    counts: &[(usize, Option<usize>, usize)],
) -> Option<Vec<(usize, usize)>> {
    let workers = p.input.workers;
    let variants = p.input.variants;
    let mut order: Vec<(usize, usize)> = counts.iter().map(|&(j, _, n)| (j, n)).collect();
    order.sort_by_key(|&(j, _)| {
        let v = &variants[j];
        (
            std::cmp::Reverse(slot(v.hardware)),
            std::cmp::Reverse(v.threads),
            std::cmp::Reverse(v.memory_bytes),
        )
    });
    let mut room = Room::new(
        workers,
        p.input.running.iter().map(|r| (r.variant, r.worker)),
    );
    let mut loads = Vec::new();
    for (j, n) in order {
        let v = &variants[j];
        for _ in 0..n {
            let w = (0..workers.len())
                .filter(|&w| room.fits(workers, w, j, v))
                .min_by_key(|&w| (p.input.is_releasable(w), room.cores(w) - v.threads, w))?;
            room.take(w, j, v);
            loads.push((j, w));
        }
    }
    Some(loads)
}

/// How far a plan's objective is above the optimum.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gap {
    pub plan: Objective,
    pub optimal: Objective,
    /// `(plan - optimal) / optimal` of the objectives; 0 when both are 0.
    pub relative: f64,
}

/// Solves `input` exactly and compares `plan` (e.g. [`crate::autoscale::greedy`]'s) with the
/// optimum.
pub fn gap(input: &ScalingInput, plan: &ScalingPlan) -> Result<Gap, ScalingError> {
    let optimal = exact(input)?.score;
    let diff = plan.score.objective - optimal.objective;
    let relative = if optimal.objective.abs() > f64::MIN_POSITIVE {
        diff / optimal.objective.abs()
    } else if diff.abs() <= f64::MIN_POSITIVE {
        0.0
    } else {
        f64::INFINITY
    };
    Ok(Gap {
        plan: plan.score,
        optimal,
        relative,
    })
}
