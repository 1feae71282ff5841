//! The MILP solvers on a problem the size of the pipeline planners: accuracy scaling over a
//! heterogeneous cluster (Loki's formulation), on the Proteus catalogue when it is beside the
//! project (46 models in 11 families x CPU and two GPU generations x batch sizes 1-16), else on
//! a seeded catalogue of the same shape.
//!
//! Each family is a task with a demand and a latency budget; a configuration is (model,
//! hardware, batch) whose 90th-percentile latency fits half the budget, serving
//! `batch / latency` rows/s. Variables: how many workers run each configuration (integer) and the
//! rate each serves (continuous); every task's demand is served or counted unserved at a
//! penalty; the objective maximises served accuracy, less a small price per worker used.
//! - **fleet**: counts per hardware kind (at most the workers of that kind), the form the
//!   planners use;
//! - **worker**: one binary per (configuration, worker), at most one configuration a worker:
//!   the same optimum, written per worker (symmetric, much harder).
//!
//! 20 workers (8 CPU, 6 Pascal, 6 Ampere), 10 demand levels from a quarter of the cluster's
//! most-accurate capacity to three times it. Every solver of the build solves every case
//! (10 s limit each); the bench prints median and max solve time, how many were proven optimal,
//! and asserts that solvers that prove optimality agree on the objective.
//!
//! Run: `cargo bench -p infaas-scheduler --bench milp --features highs`
//! (`INFAAS_PROTEUS_CSV` points at the catalogue; default `../shared/data/proteus/...`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use good_lp::{variable, Expression, Variable};
use infaas_core::stats::median;
use infaas_scheduler::milp::{self, Problem, Settings, Solver, Status};

const BATCHES: [usize; 5] = [1, 2, 4, 8, 16];
const HARDWARE: [(&str, usize); 3] = [
    ("onnxruntime_cpu", 8),
    ("onnxruntime_gpu_pascal", 6),
    ("onnxruntime_gpu_ampere", 6),
];
/// Price of one worker of each kind, per second, in units of one served accuracy point.
const PRICE: [f64; 3] = [0.05, 0.2, 0.3];

/// One profiled (model, hardware, batch).
#[derive(Debug, Clone)]
struct Profile {
    model: String,
    hw: usize,
    batch: usize,
    p90_ms: f64,
    accuracy: f64,
}

fn family(model: &str) -> String {
    let name = model.rsplit('/').next().unwrap_or(model);
    let key: String = name
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    if key.is_empty() {
        name.to_owned()
    } else {
        key
    }
}

fn proteus_path() -> PathBuf {
    std::env::var_os("INFAAS_PROTEUS_CSV")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/proteus/aggregate_profiled.csv")
        })
}

fn read_proteus() -> Option<Vec<Profile>> {
    let text = std::fs::read_to_string(proteus_path()).ok()?;
    let mut out = Vec::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        if f.len() < 11 {
            continue;
        }
        let Some(hw) = HARDWARE.iter().position(|(name, _)| *name == f[1]) else {
            continue;
        };
        let (Ok(batch), Ok(p90_ms), Ok(accuracy)) = (
            f[3].parse::<usize>(),
            f[5].parse::<f64>(),
            f[9].parse::<f64>(),
        ) else {
            continue;
        };
        if BATCHES.contains(&batch) {
            out.push(Profile {
                model: f[0].to_owned(),
                hw,
                batch,
                p90_ms,
                accuracy,
            });
        }
    }
    (!out.is_empty()).then_some(out)
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// 46 models in 11 families, like the Proteus catalogue, with seeded figures.
fn generated() -> Vec<Profile> {
    let mut rng = Rng(0x9B0F);
    let mut out = Vec::new();
    for m in 0..46 {
        let base = 2.0 + 60.0 * rng.unit();
        let accuracy = 60.0 + 30.0 * rng.unit();
        for (hw, speed) in [(0, 1.0), (1, 6.0), (2, 12.0)] {
            for &batch in &BATCHES {
                out.push(Profile {
                    model: format!("fam{}-m{m}", m % 11),
                    hw,
                    batch,
                    p90_ms: base / speed * (batch as f64).powf(0.6),
                    accuracy,
                });
            }
        }
    }
    out
}

struct Task {
    configs: Vec<Profile>,
}

fn tasks(catalogue: &[Profile]) -> Vec<Task> {
    let mut by_family: BTreeMap<String, Vec<Profile>> = BTreeMap::new();
    for p in catalogue {
        by_family
            .entry(family(&p.model))
            .or_default()
            .push(p.clone());
    }
    by_family
        .into_values()
        .map(|profiles| {
            // A budget the family's fastest configuration meets three times over, at least 100 ms.
            let fastest = profiles
                .iter()
                .map(|p| p.p90_ms)
                .fold(f64::INFINITY, f64::min);
            let budget_ms = (6.0 * fastest).max(100.0);
            let configs = profiles
                .into_iter()
                .filter(|p| p.p90_ms <= budget_ms / 2.0)
                .collect();
            Task { configs }
        })
        .filter(|t: &Task| !t.configs.is_empty())
        .collect()
}

fn rate(p: &Profile) -> f64 {
    p.batch as f64 / p.p90_ms * 1000.0
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    Fleet,
    Worker,
}

/// The accuracy-scaling MILP at `shape` for the given demands (rows/s per task).
fn build(tasks: &[Task], demand: &[f64], shape: Shape) -> Problem {
    let mut p = Problem::new();
    p.maximise = true;
    let mut per_hw: Vec<Expression> = vec![Expression::default(); HARDWARE.len()];
    let mut per_worker: Vec<Expression> = Vec::new();
    let workers: Vec<usize> = HARDWARE
        .iter()
        .enumerate()
        .flat_map(|(h, &(_, n))| std::iter::repeat_n(h, n))
        .collect();
    if shape == Shape::Worker {
        per_worker = vec![Expression::default(); workers.len()];
    }
    let penalty = 1000.0;
    for (t, task) in tasks.iter().enumerate() {
        let mut served = Expression::default();
        for c in &task.configs {
            let cap = rate(c);
            let r = p.vars.add(variable().min(0).max(demand[t]));
            p.objective.add_mul(c.accuracy, r);
            served.add_mul(1.0, r);
            let mut capacity = Expression::default();
            match shape {
                Shape::Fleet => {
                    let n = p
                        .vars
                        .add(variable().integer().min(0).max(HARDWARE[c.hw].1 as f64));
                    p.objective.add_mul(-PRICE[c.hw], n);
                    capacity.add_mul(cap, n);
                    per_hw[c.hw].add_mul(1.0, n);
                }
                Shape::Worker => {
                    for (w, &h) in workers.iter().enumerate() {
                        if h != c.hw {
                            continue;
                        }
                        let y = p.vars.add(variable().binary());
                        p.objective.add_mul(-PRICE[c.hw], y);
                        capacity.add_mul(cap, y);
                        per_worker[w].add_mul(1.0, y);
                    }
                }
            }
            p.add_constraint(Expression::from(r).leq(capacity));
        }
        let unserved = p.vars.add(variable().min(0).max(demand[t]));
        p.objective.add_mul(-penalty, unserved);
        served.add_mul(1.0, unserved);
        p.add_constraint(served.eq(demand[t]));
    }
    for (h, e) in per_hw.into_iter().enumerate() {
        if shape == Shape::Fleet {
            p.add_constraint(e.leq(HARDWARE[h].1 as f64));
        }
    }
    for e in per_worker {
        p.add_constraint(e.leq(1.0));
    }
    p
}

fn count_vars(p: &Problem) -> (usize, usize) {
    let all: Vec<(Variable, bool)> = p
        .vars
        .iter_variables_with_def()
        .map(|(v, d)| (v, d.is_integer()))
        .collect();
    (all.len(), all.iter().filter(|(_, i)| *i).count())
}

fn main() {
    let (catalogue, source) = match read_proteus() {
        Some(c) => (c, proteus_path().display().to_string()),
        None => (
            generated(),
            "a seeded catalogue (Proteus CSV not found)".to_owned(),
        ),
    };
    let tasks = tasks(&catalogue);
    let configs: usize = tasks.iter().map(|t| t.configs.len()).sum();
    let models: std::collections::BTreeSet<&str> = tasks
        .iter()
        .flat_map(|t| t.configs.iter().map(|c| c.model.as_str()))
        .collect();
    // The cluster's capacity per task with the most accurate configurations alone.
    let full: Vec<f64> = tasks
        .iter()
        .map(|t| {
            let best = t
                .configs
                .iter()
                .map(|c| c.accuracy)
                .fold(f64::NEG_INFINITY, f64::max);
            t.configs
                .iter()
                .filter(|c| c.accuracy >= best)
                .map(rate)
                .fold(0.0, f64::max)
        })
        .collect();
    let workers: usize = HARDWARE.iter().map(|h| h.1).sum();
    println!(
        "catalogue: {source}\n{} tasks, {} models, {configs} (model, hardware, batch) configurations, {workers} workers",
        tasks.len(),
        models.len()
    );
    let limit = Duration::from_secs(10);
    for shape in [Shape::Fleet, Shape::Worker] {
        let name = match shape {
            Shape::Fleet => "fleet ",
            Shape::Worker => "worker",
        };
        let mut objectives: Vec<Vec<Option<f64>>> = Vec::new();
        for solver in Solver::available() {
            let mut times = Vec::new();
            let mut objs = Vec::new();
            let mut optimal = 0;
            let mut size = (0, 0);
            for level in 0..10 {
                // From a quarter of the most-accurate capacity (shared by all tasks) to 3x it.
                let scale = 0.25 * (12.0f64).powf(level as f64 / 9.0);
                let demand: Vec<f64> = full
                    .iter()
                    .map(|&c| scale * c * workers as f64 / tasks.len() as f64)
                    .collect();
                let problem = build(&tasks, &demand, shape);
                size = count_vars(&problem);
                let objective = problem.objective.clone();
                let settings = Settings {
                    optimal: true,
                    small: false,
                    time_limit: Some(limit),
                };
                let t = Instant::now();
                let solved = milp::solve(solver, problem, &settings);
                times.push(t.elapsed());
                match solved {
                    Ok(s) if s.status == Status::Optimal => {
                        optimal += 1;
                        objs.push(Some(objective.eval_with(&s)));
                    }
                    Ok(_) => objs.push(None),
                    Err(e) => {
                        println!("  {solver} failed at demand level {level}: {e}");
                        objs.push(None);
                    }
                }
            }
            println!(
                "{name} ({} variables, {} integer) {solver:<5}: median {:?}, max {:?}, proven optimal {optimal}/10 (limit {limit:?})",
                size.0,
                size.1,
                median(times.clone()).unwrap_or_default(),
                times.iter().max().expect("runs"),
            );
            objectives.push(objs);
        }
        for pair in objectives.windows(2) {
            for (a, b) in pair[0].iter().zip(&pair[1]) {
                if let (Some(a), Some(b)) = (a, b) {
                    assert!(
                        (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0),
                        "solvers disagree on an optimum: {a} against {b}"
                    );
                }
            }
        }
    }
}
