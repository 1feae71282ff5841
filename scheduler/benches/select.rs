//! `select` on a controller-sized snapshot: 1,000 variants over 50 applications (5 tenants × 10
//! apps × 4 models × 5 variants), 40 workers and ~300 instances in seeded random states, queried
//! with a seeded mix of targets, SLOs, accuracies, cost ceilings and row counts.
//!
//! Prints a percentile summary of 100,000 individually timed calls (criterion reports means and
//! medians only), then runs the criterion benchmarks.
//!
//! Run: `cargo bench -p infaas-scheduler --bench select`

use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use infaas_core::stats::percentile_of;
use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::{
    select, Decision, InstanceEntry, InstanceState, Prices, Query, Snapshot, Target, VariantEntry,
    WorkerEntry,
};

const TENANTS: usize = 5;
const APPS_PER_TENANT: usize = 10;
const MODELS_PER_APP: usize = 4;
const VARIANTS_PER_MODEL: usize = 5;
const WORKERS: usize = 40;
const INSTANCES: usize = 300;
const QUERIES: usize = 1024;
const TIMED_CALLS: usize = 100_000;

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

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

struct Names {
    tenants: Vec<String>,
    apps: Vec<String>,
    /// Model names per app (same list in every tenant).
    models: Vec<Vec<String>>,
}

fn names() -> Names {
    Names {
        tenants: (0..TENANTS).map(|t| format!("tenant-{t}")).collect(),
        apps: (0..APPS_PER_TENANT).map(|a| format!("app-{a}")).collect(),
        models: (0..APPS_PER_TENANT)
            .map(|a| {
                (0..MODELS_PER_APP)
                    .map(|m| format!("model-{a}-{m}"))
                    .collect()
            })
            .collect(),
    }
}

fn profile(rng: &mut Rng, max_batch: usize, base_ms: f64) -> Vec<LatencyPoint> {
    [1, 2, 4, 8, 16, 32]
        .into_iter()
        .filter(|&b| b <= max_batch)
        .map(|batch| {
            // Sub-linear growth with batch, with some noise.
            let mean_ms = base_ms * (batch as f64).powf(0.7) * (0.9 + 0.2 * rng.unit());
            LatencyPoint {
                batch,
                p50_ms: mean_ms * 0.95,
                p99_ms: mean_ms * 1.3,
                mean_ms,
                throughput_per_s: batch as f64 / mean_ms * 1000.0,
            }
        })
        .collect()
}

fn snapshot(n: &Names, rng: &mut Rng) -> Snapshot {
    let mut b = Snapshot::builder();
    let mut variant_hw = Vec::new();
    for tenant in &n.tenants {
        for (a, app) in n.apps.iter().enumerate() {
            for model in &n.models[a] {
                let accuracy = 0.70 + 0.28 * rng.unit();
                let base_ms = 0.2 + 20.0 * rng.unit();
                for k in 0..VARIANTS_PER_MODEL {
                    let hardware = if rng.below(5) == 0 {
                        HardwareKind::Gpu
                    } else {
                        HardwareKind::Cpu
                    };
                    let max_batch = rng.pick(&[1, 4, 8, 16, 32]);
                    let threads = rng.pick(&[1, 2, 4]);
                    let speed = match hardware {
                        HardwareKind::Gpu => 0.2,
                        HardwareKind::Cpu => 1.0 / threads as f64,
                    };
                    let v = VariantEntry {
                        id: format!("{tenant}/{model}/v{k}"),
                        name: format!("{model}.v{k}.{}", hardware.as_str()),
                        model: model.clone(),
                        app: app.clone(),
                        // INT8-like variants lose a little accuracy.
                        accuracy: accuracy - 0.02 * rng.unit() * (k % 2) as f64,
                        hardware,
                        threads,
                        max_batch,
                        load_ms: 50.0 + 2000.0 * rng.unit(),
                        memory_bytes: 10_000_000 + (rng.unit() * 1e9) as u64,
                        latency: profile(rng, max_batch, base_ms * speed),
                    };
                    variant_hw.push(hardware);
                    b.add_variant(tenant, v).expect("valid variant");
                }
            }
        }
    }
    for w in 0..WORKERS {
        let gpu = w % 4 == 0;
        let cores = 16;
        b.add_worker(WorkerEntry {
            id: format!("worker-{w}"),
            hardware: if gpu {
                vec![HardwareKind::Cpu, HardwareKind::Gpu]
            } else {
                vec![HardwareKind::Cpu]
            },
            cores,
            cpu_cores: cores,
            cores_used: rng.below(cores + 1),
            memory_bytes: 64_000_000_000,
            memory_used: (rng.unit() * 64e9) as u64,
            alive: true,
            utilisation: rng.unit(),
            interference_seen: false,
            busy_threads: 0,
        })
        .expect("unique worker");
    }
    let mut added = 0;
    while added < INSTANCES {
        let variant = rng.below(variant_hw.len());
        let worker = match variant_hw[variant] {
            HardwareKind::Gpu => 4 * rng.below(WORKERS / 4),
            HardwareKind::Cpu => rng.below(WORKERS),
        };
        let state = match rng.below(20) {
            0..=12 => InstanceState::Active,
            13..=15 => InstanceState::Overloaded,
            16..=17 => InstanceState::Interfered,
            _ => InstanceState::Inactive,
        };
        b.add_instance(InstanceEntry {
            id: format!("instance-{added}"),
            variant,
            worker,
            state,
            queue_len: rng.below(24),
            qps: 1000.0 * rng.unit(),
        })
        .expect("valid instance");
        added += 1;
    }
    b.build()
}

fn queries<'a>(n: &'a Names, rng: &mut Rng) -> Vec<Query<'a>> {
    (0..QUERIES)
        .map(|_| {
            let a = rng.below(APPS_PER_TENANT);
            let target = if rng.below(5) == 0 {
                Target::Model(&n.models[a][rng.below(MODELS_PER_APP)])
            } else {
                Target::App(&n.apps[a])
            };
            Query {
                tenant: &n.tenants[rng.below(TENANTS)],
                target,
                latency_slo_ms: rng.pick(&[
                    None,
                    Some(1.0),
                    Some(5.0),
                    Some(20.0),
                    Some(100.0),
                    Some(1000.0),
                ]),
                min_accuracy: rng.pick(&[None, Some(0.7), Some(0.8), Some(0.85), Some(0.9)]),
                max_cost: rng.pick(&[None, None, None, Some(1e-6), Some(1e-5)]),
                rows: rng.pick(&[1, 1, 1, 4, 16]),
            }
        })
        .collect()
}

fn kind(d: &Decision) -> usize {
    match d {
        Decision::Serve { .. } => 0,
        Decision::Load { .. } => 1,
        Decision::Unsatisfiable { .. } => 2,
        Decision::NotFound => 3,
    }
}

fn percentile_summary(s: &Snapshot, qs: &[Query]) {
    let mut mix = [0usize; 4];
    for q in qs {
        mix[kind(&select(s, q, &PRICES))] += 1;
    }
    println!(
        "query mix ({} queries): serve {}, load {}, unsatisfiable {}, not found {}",
        qs.len(),
        mix[0],
        mix[1],
        mix[2],
        mix[3]
    );
    // Warm up, then time each call.
    for q in qs.iter().cycle().take(20_000) {
        black_box(select(s, black_box(q), &PRICES));
    }
    let mut times = Vec::with_capacity(TIMED_CALLS);
    let whole = Instant::now();
    for q in qs.iter().cycle().take(TIMED_CALLS) {
        let t = Instant::now();
        let d = select(s, black_box(q), &PRICES);
        let dt = t.elapsed();
        black_box(d);
        times.push(dt);
    }
    let whole = whole.elapsed();
    let mut empty = Vec::with_capacity(TIMED_CALLS);
    for _ in 0..TIMED_CALLS {
        let t = Instant::now();
        empty.push(black_box(t).elapsed());
    }
    times.sort_unstable();
    empty.sort_unstable();
    println!(
        "select over {TIMED_CALLS} timed calls: median {:?}, p90 {:?}, p99 {:?}, p99.9 {:?}, max {:?} \
         (timer overhead median {:?}); loop mean {:?}/call",
        percentile_of(&times, 0.5).unwrap_or_default(),
        percentile_of(&times, 0.9).unwrap_or_default(),
        percentile_of(&times, 0.99).unwrap_or_default(),
        percentile_of(&times, 0.999).unwrap_or_default(),
        times[times.len() - 1],
        percentile_of(&empty, 0.5).unwrap_or_default(),
        whole / TIMED_CALLS as u32,
    );
}

fn main() {
    let n = names();
    let mut rng = Rng(0x001A_FAA5);
    let s = snapshot(&n, &mut rng);
    let qs = queries(&n, &mut rng);
    println!(
        "snapshot: {} variants, {} workers, {} instances",
        s.variants().len(),
        s.workers().len(),
        s.instances().len()
    );
    percentile_summary(&s, &qs);
    if std::env::var_os("SELECT_SHOW").is_some() {
        for q in qs.iter().take(8) {
            println!("{q:?}\n  -> {:?}", select(&s, q, &PRICES));
        }
    }

    let mut c = Criterion::default().configure_from_args();
    let mut i = 0;
    c.bench_function("select/mix", |b| {
        b.iter(|| {
            i = (i + 1) % qs.len();
            select(&s, black_box(&qs[i]), &PRICES)
        })
    });
    let app_slo = Query {
        tenant: &n.tenants[0],
        target: Target::App(&n.apps[0]),
        latency_slo_ms: Some(10.0),
        min_accuracy: Some(0.8),
        max_cost: None,
        rows: 1,
    };
    c.bench_function("select/app_slo_accuracy", |b| {
        b.iter(|| select(&s, black_box(&app_slo), &PRICES))
    });
    let impossible = Query {
        latency_slo_ms: Some(0.01),
        min_accuracy: Some(0.999),
        ..app_slo
    };
    c.bench_function("select/unsatisfiable", |b| {
        b.iter(|| select(&s, black_box(&impossible), &PRICES))
    });
    c.final_summary();
}
