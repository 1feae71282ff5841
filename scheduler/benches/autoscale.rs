//! Model autoscaling at controller scale: 50 model architectures x 8 variants (6 CPU at 1, 2 or
//! 4 threads, 2 GPU) over 10 workers (32 cores each, 3 with a GPU), ~100 running instances in a
//! seeded random mix of ages, loads between 20 and 800 rows/s.
//!
//! Times the exact ILP (the build's MILP solver, solved to proven optimality; target <= 100 ms)
//! and one greedy decision (target <= 1 ms), prints both plans' objectives and the greedy gap,
//! then solves 10 seeded cases with every solver of the build (same optimum asserted; median
//! and max time each), then runs the criterion benchmarks.
//!
//! Run: `cargo bench -p infaas-scheduler --bench autoscale`
//! (add `--features highs` to compare HiGHS with CBC in the same run).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::Criterion;
use infaas_core::stats::median;
use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::autoscale::{
    exact, exact_with, gap, greedy, Family, Running, ScalingConfig, ScalingInput,
};
use infaas_scheduler::milp::Solver;
use infaas_scheduler::{InstanceState, Prices, VariantEntry, WorkerEntry};

const FAMILIES: usize = 50;
const VARIANTS_PER_FAMILY: usize = 8;
const WORKERS: usize = 10;

const PRICES: Prices = Prices {
    cpu_core_per_s: 1.2e-5,
    memory_gb_per_s: 1.5e-6,
    gpu_per_s: 2.5e-4,
};

/// SplitMix64: a seeded generator without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn variant(
    name: String,
    hw: HardwareKind,
    threads: usize,
    max_batch: usize,
    mean_ms: f64,
    rng: &mut Rng,
) -> VariantEntry {
    let point = |batch: usize, mean_ms: f64| LatencyPoint {
        batch,
        p50_ms: mean_ms * 0.95,
        p99_ms: mean_ms * 1.3,
        mean_ms,
        throughput_per_s: batch as f64 / mean_ms * 1000.0,
    };
    VariantEntry {
        id: name.clone(),
        name,
        model: "m".to_owned(),
        app: "app".to_owned(),
        accuracy: 0.8 + 0.15 * rng.unit(),
        hardware: hw,
        threads,
        max_batch,
        load_ms: 200.0 + 3000.0 * rng.unit(),
        memory_bytes: 200_000_000 + (rng.unit() * 2e9) as u64,
        latency: vec![
            point(1, mean_ms / (max_batch as f64).powf(0.7)),
            point(max_batch, mean_ms),
        ],
    }
}

struct Case {
    variants: Vec<VariantEntry>,
    workers: Vec<WorkerEntry>,
    running: Vec<Running>,
    families: Vec<Family>,
}

fn case(rng: &mut Rng) -> Case {
    let mut variants = Vec::new();
    let mut families = Vec::new();
    let mut running = Vec::new();
    let workers: Vec<WorkerEntry> = (0..WORKERS)
        .map(|w| WorkerEntry {
            id: format!("worker-{w}"),
            hardware: if w < 3 {
                vec![HardwareKind::Cpu, HardwareKind::Gpu]
            } else {
                vec![HardwareKind::Cpu]
            },
            cores: 32,
            cpu_cores: 32,
            cores_used: 0,
            memory_bytes: 128_000_000_000,
            memory_used: 0,
            alive: true,
            utilisation: rng.unit(),
            interference_seen: false,
            busy_threads: 0,
        })
        .collect();
    let mut used = [0usize; WORKERS];
    for f in 0..FAMILIES {
        let first = variants.len();
        // Base run time of a batch of 8 on one core.
        let base_ms = 20.0 + 80.0 * rng.unit();
        for k in 0..VARIANTS_PER_FAMILY {
            let gpu = k >= 6;
            let threads = if gpu { 1 } else { [1, 2, 4][k % 3] };
            let max_batch = [4, 8, 16][rng.below(3)];
            let speed = if gpu {
                15.0 + 10.0 * rng.unit()
            } else {
                1.0 / (0.1 + 0.9 / threads as f64)
            };
            let mean_ms =
                base_ms * (max_batch as f64 / 8.0).powf(0.8) / speed * (0.9 + 0.2 * rng.unit());
            let hw = if gpu {
                HardwareKind::Gpu
            } else {
                HardwareKind::Cpu
            };
            variants.push(variant(
                format!("f{f}.v{k}"),
                hw,
                threads,
                max_batch,
                mean_ms,
                rng,
            ));
        }
        for _ in 0..rng.below(4) {
            let j = first + rng.below(VARIANTS_PER_FAMILY);
            let v = &variants[j];
            let w = match v.hardware {
                HardwareKind::Gpu => rng.below(3),
                HardwareKind::Cpu => rng.below(WORKERS),
            };
            if used[w] + v.threads > 24 {
                continue;
            }
            used[w] += v.threads;
            running.push(Running {
                instance: running.len(),
                variant: j,
                worker: w,
                state: InstanceState::Active,
                qps: 0.0,
                state_age_ms: if rng.below(4) == 0 { 0.0 } else { 1e6 },
            });
        }
        let load = 20.0 + 780.0 * rng.unit();
        families.push(Family {
            name: format!("tenant/f{f}"),
            variants: (first..first + VARIANTS_PER_FAMILY).collect(),
            load_qps: load,
            rate_qps: load,
            slo_ms: if rng.below(2) == 0 { Some(400.0) } else { None },
            min_accuracy: None,
        });
    }
    let mut workers = workers;
    for (w, e) in workers.iter_mut().enumerate() {
        e.cores_used = used[w];
        e.memory_used = running
            .iter()
            .filter(|r| r.worker == w)
            .map(|r| variants[r.variant].memory_bytes)
            .sum();
    }
    Case {
        variants,
        workers,
        running,
        families,
    }
}

/// Every solver of the build on the same 10 seeded cases: the same optimum, and how long.
fn compare_solvers() {
    let cases: Vec<Case> = (0..10u64)
        .map(|seed| case(&mut Rng(0x5EED_0000 + seed)))
        .collect();
    let mut objectives: Vec<Vec<f64>> = Vec::new();
    for solver in Solver::available() {
        let mut times = Vec::new();
        let mut objs = Vec::new();
        for c in &cases {
            let input = ScalingInput {
                variants: &c.variants,
                workers: &c.workers,
                running: c.running.clone(),
                families: c.families.clone(),
                prices: PRICES,
                config: ScalingConfig::default(),
                releasable: Vec::new(),
            };
            for _ in 0..3 {
                let t = Instant::now();
                let plan = exact_with(black_box(&input), solver).expect("exact");
                times.push(t.elapsed());
                objs.push(plan.score.objective);
            }
        }
        println!(
            "exact ILP with {solver:<5}: median {:?}, max {:?} over {} solves of 10 cases",
            median(times.clone()).unwrap_or_default(),
            times.iter().max().expect("runs"),
            times.len()
        );
        objectives.push(objs);
    }
    for pair in objectives.windows(2) {
        for (a, b) in pair[0].iter().zip(&pair[1]) {
            assert!(
                (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-12),
                "solvers disagree on an optimum: {a:e} against {b:e}"
            );
        }
    }
}

fn main() {
    let mut rng = Rng(0x0A57_0CA1);
    let c = case(&mut rng);
    let input = ScalingInput {
        variants: &c.variants,
        workers: &c.workers,
        running: c.running.clone(),
        families: c.families.clone(),
        prices: PRICES,
        config: ScalingConfig::default(),
        releasable: Vec::new(),
    };
    println!(
        "problem: {} families x {} variants, {} workers, {} running instances",
        c.families.len(),
        VARIANTS_PER_FAMILY,
        c.workers.len(),
        c.running.len()
    );
    let g = greedy(&input).expect("greedy");
    let e = exact(&input).expect("exact");
    let gap = gap(&input, &g).expect("gap");
    println!(
        "greedy: {} actions, cost {:.4e} -> {:.4e}/s, objective {:.4e}, unserved {:.1} rows/s",
        g.actions.len(),
        g.score.cost_before_per_s,
        g.score.cost_after_per_s,
        g.score.objective,
        g.score.unserved_qps
    );
    println!(
        "exact:  {} actions, cost {:.4e} -> {:.4e}/s, objective {:.4e}, unserved {:.1} rows/s; greedy gap {:.1}%",
        e.actions.len(),
        e.score.cost_before_per_s,
        e.score.cost_after_per_s,
        e.score.objective,
        e.score.unserved_qps,
        gap.relative * 100.0
    );

    let runs = 20;
    let exact_times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(exact(black_box(&input)).expect("exact"));
            t.elapsed()
        })
        .collect();
    let greedy_times: Vec<Duration> = (0..1000)
        .map(|_| {
            let t = Instant::now();
            black_box(greedy(black_box(&input)).expect("greedy"));
            t.elapsed()
        })
        .collect();
    println!(
        "exact ILP: median {:?}, max {:?} over {runs} solves (target <= 100 ms)",
        median(exact_times.clone()).unwrap_or_default(),
        exact_times.iter().max().expect("runs")
    );
    println!(
        "greedy:    median {:?}, max {:?} over 1000 decisions (target <= 1 ms)",
        median(greedy_times.clone()).unwrap_or_default(),
        greedy_times.iter().max().expect("runs")
    );

    compare_solvers();

    let mut cr = Criterion::default().configure_from_args();
    cr.bench_function("autoscale/greedy_50x8x10", |b| {
        b.iter(|| greedy(black_box(&input)))
    });
    let mut group = cr.benchmark_group("autoscale");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("exact_ilp_50x8x10", |b| b.iter(|| exact(black_box(&input))));
    group.finish();
    cr.final_summary();
}
