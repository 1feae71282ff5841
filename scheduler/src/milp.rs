//! One door to the mixed-integer solvers that good_lp links: every MILP of the policies is
//! written once as a [`Problem`] and solved by [`solve`] with the build's solver, so that a
//! solver is chosen in one place (the crate's features) and compared on the same problems
//! (`cargo bench -p infaas-scheduler --bench milp --features highs`).
//!
//! - `cbc` (the default): COIN-OR CBC through the system's `libCbcSolver` (Debian:
//!   `coinor-libcbc-dev` to build, `coinor-libcbc3` to run; `scripts/setup.sh` installs it).
//!   Debian's build is not thread-safe, so solves are serialised behind a lock.
//! - `highs`: HiGHS, built from source into the binary (static; needs `cmake` and libclang to
//!   build, about 4 minutes more), thread-safe.
//!
//! CBC is the default because it is 4-8x faster on the policies' problems; HiGHS proves more
//! of the symmetric per-worker placements within a time limit. The measurements are in
//! docs/benchmarks.md, "MILP solvers: CBC and HiGHS".

use std::collections::HashMap;
use std::time::Duration;

use good_lp::{
    Constraint, Expression, ProblemVariables, ResolutionError, Solution, SolutionStatus,
    SolverModel, Variable,
};

#[cfg(not(any(feature = "cbc", feature = "highs")))]
compile_error!("infaas-scheduler needs a MILP solver: enable the `highs` or the `cbc` feature");

/// A MILP solver linked into this build.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Solver {
    #[cfg(feature = "cbc")]
    Cbc,
    #[cfg(feature = "highs")]
    Highs,
}

impl Solver {
    /// The solver the policies use: CBC when it is built in, else HiGHS.
    pub const DEFAULT: Solver = {
        #[cfg(feature = "cbc")]
        {
            Solver::Cbc
        }
        #[cfg(not(feature = "cbc"))]
        {
            Solver::Highs
        }
    };

    /// Every solver of this build, the default (CBC when built in) first.
    pub fn available() -> Vec<Solver> {
        vec![
            #[cfg(feature = "cbc")]
            Solver::Cbc,
            #[cfg(feature = "highs")]
            Solver::Highs,
        ]
    }

    pub fn name(self) -> &'static str {
        match self {
            #[cfg(feature = "cbc")]
            Solver::Cbc => "cbc",
            #[cfg(feature = "highs")]
            Solver::Highs => "highs",
        }
    }
}

impl std::fmt::Display for Solver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A MILP as the policies write it.
#[derive(Default)]
pub struct Problem {
    pub vars: ProblemVariables,
    pub objective: Expression,
    /// Maximise the objective (else minimise it).
    pub maximise: bool,
    pub constraints: Vec<Constraint>,
}

impl Problem {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_constraint(&mut self, c: Constraint) {
        self.constraints.push(c);
    }
}

/// How hard the solver works.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Settings {
    /// Prove optimality: no relative gap allowed (else the solver's default gap).
    pub optimal: bool,
    /// A problem of a handful of columns: skip presolve, heuristics and cuts, which take longer
    /// to run than branch and bound takes to settle it (they only affect speed).
    pub small: bool,
    /// Stop after this long and return the best solution found, if any.
    pub time_limit: Option<Duration>,
}

/// Why a solve gave no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MilpError {
    #[error("the {solver} solver failed: {source}")]
    Failed {
        solver: Solver,
        #[source]
        source: ResolutionError,
    },
}

/// How a solve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Optimal,
    /// Stopped by the time limit with a feasible solution.
    TimeLimit,
    /// Stopped within the allowed gap.
    GapLimit,
}

/// The values of a solved problem's variables.
#[derive(Debug, Clone)]
pub struct Solved {
    pub status: Status,
    pub solver: Solver,
    values: HashMap<Variable, f64>,
}

impl Solved {
    pub fn value(&self, v: Variable) -> f64 {
        self.values.get(&v).copied().unwrap_or(0.0)
    }

    /// `value(v)` rounded to the nearest non-negative integer (an integer variable's count).
    pub fn count(&self, v: Variable) -> usize {
        self.value(v).round().max(0.0) as usize
    }
}

/// Solves `problem` with `solver`.
pub fn solve(solver: Solver, problem: Problem, settings: &Settings) -> Result<Solved, MilpError> {
    let Problem {
        vars,
        objective,
        maximise,
        constraints,
    } = problem;
    let all: Vec<Variable> = vars.iter_variables_with_def().map(|(v, _)| v).collect();
    let unsolved = if maximise {
        vars.maximise(objective)
    } else {
        vars.minimise(objective)
    };
    let fail = |source| MilpError::Failed { solver, source };
    let (status, values) = match solver {
        #[cfg(feature = "cbc")]
        Solver::Cbc => {
            let mut model = unsolved.using(good_lp::coin_cbc);
            model.set_log_level(0);
            model.set_parameter("log", "0");
            model.set_parameter("slogLevel", "0");
            if settings.optimal {
                model.set_parameter("ratioGap", "0");
            }
            if settings.small {
                for key in ["preprocess", "heuristics", "cuts"] {
                    model.set_parameter(key, "off");
                }
            }
            if let Some(t) = settings.time_limit {
                model.set_parameter("seconds", &format!("{:.3}", t.as_secs_f64()));
            }
            let s = model.with_all(constraints).solve().map_err(fail)?;
            (s.status(), read(&s, &all))
        }
        #[cfg(feature = "highs")]
        Solver::Highs => {
            let mut model = unsolved.using(good_lp::highs);
            model.set_verbose(false);
            // One thread: the policies run beside the query path on the controller's cores.
            let mut model = model
                .set_threads(1)
                .set_parallel(good_lp::solvers::highs::HighsParallelType::Off);
            if settings.optimal {
                // No relative gap; HiGHS's absolute gap (1e-6) stays, far below one instance's
                // weight in the policies' objectives (scaled to about 1 per instance).
                model = model.set_option("mip_rel_gap", 0.0);
            }
            if settings.small {
                model = model.set_presolve(good_lp::solvers::highs::HighsPresolveType::Off);
            }
            if let Some(t) = settings.time_limit {
                model = model.set_time_limit(t.as_secs_f64());
            }
            let s = model.with_all(constraints).solve().map_err(fail)?;
            // good_lp reports any HiGHS optimum with a gap above zero as `GapLimit`; asked for
            // no relative gap, that gap is within HiGHS's absolute tolerance: optimal.
            let status = match s.status() {
                SolutionStatus::GapLimit if settings.optimal => SolutionStatus::Optimal,
                other => other,
            };
            (status, read(&s, &all))
        }
    };
    let status = match status {
        SolutionStatus::Optimal => Status::Optimal,
        SolutionStatus::TimeLimit => Status::TimeLimit,
        SolutionStatus::GapLimit => Status::GapLimit,
    };
    Ok(Solved {
        status,
        solver,
        values,
    })
}

/// So that `expression.eval_with(&solved)` reads an expression's value.
impl Solution for Solved {
    fn status(&self) -> SolutionStatus {
        match self.status {
            Status::Optimal => SolutionStatus::Optimal,
            Status::TimeLimit => SolutionStatus::TimeLimit,
            Status::GapLimit => SolutionStatus::GapLimit,
        }
    }

    fn value(&self, v: Variable) -> f64 {
        Solved::value(self, v)
    }
}

fn read(s: &impl Solution, all: &[Variable]) -> HashMap<Variable, f64> {
    all.iter().map(|&v| (v, s.value(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use good_lp::{constraint, variable};

    /// A knapsack whose optimum differs from its LP relaxation's rounding.
    fn knapsack() -> (Problem, Vec<Variable>) {
        let mut p = Problem::new();
        let weights = [12.0, 7.0, 11.0, 8.0, 9.0];
        let values = [24.0, 13.0, 23.0, 15.0, 16.0];
        let x: Vec<Variable> = (0..5).map(|_| p.vars.add(variable().binary())).collect();
        let mut w = Expression::default();
        for (i, &v) in x.iter().enumerate() {
            p.objective.add_mul(values[i], v);
            w.add_mul(weights[i], v);
        }
        p.maximise = true;
        p.add_constraint(constraint!(w <= 26.0));
        (p, x)
    }

    #[test]
    fn every_solver_finds_the_knapsack_optimum() {
        for solver in Solver::available() {
            let (p, x) = knapsack();
            let settings = Settings {
                optimal: true,
                ..Settings::default()
            };
            let s = solve(solver, p, &settings).expect("solves");
            assert_eq!(s.status, Status::Optimal, "{solver}");
            let picked: Vec<usize> = x.iter().map(|&v| s.count(v)).collect();
            // Items 1, 2 and 3 fill the sack (weight 26, value 51); rounding the LP relaxation,
            // which takes the two best ratios first, gives items 0 and 2 (value 47).
            assert_eq!(picked, vec![0, 1, 1, 1, 0], "{solver}");
        }
    }

    #[test]
    fn an_infeasible_problem_is_an_error_naming_the_solver() {
        for solver in Solver::available() {
            let mut p = Problem::new();
            let v = p.vars.add(variable().integer().min(0).max(3));
            p.objective = v.into();
            p.add_constraint(constraint!(v >= 5));
            let err = solve(solver, p, &Settings::default()).expect_err("infeasible");
            assert!(err.to_string().contains(solver.name()), "{err}");
        }
    }
}
