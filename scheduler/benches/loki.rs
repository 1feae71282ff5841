//! Loki's resource manager and load balancer on the Proteus catalogue (when it is beside the
//! project, else a seeded catalogue of the same shape): every profiled (model, hardware, batch)
//! of a family is an option of its task, as in the simulator (46 models x CPU, GPU Pascal and
//! GPU Ampere x batches 1-16).
//!
//! Pipelines: detection -> classification (YOLOv5 -> ResNet) and detection -> classification
//! -> text (YOLOv5 -> EfficientNet -> BERT family), SLO 600 ms, on 20 workers (8 CPU, 6 Pascal,
//! 6 Ampere). Demands are multiples of the largest the cluster carries at full accuracy (found
//! by bisection on step 1), so `allocate` runs both steps and scales accuracy.
//!
//! Prints, per pipeline and at 1.5, 2 and 3 times that demand, `allocate`'s time over 10 runs
//! with the default 400 ms limit (target <= 500 ms), its status and accuracy, and the optimum
//! with a 30 s limit for comparison (criterion times the 2x case); then the per-query decisions
//! (routing pick and drop decision, target <= 0.15 ms) over 100,000 timed calls on the 3-task
//! allocation; then runs the criterion benchmarks. `LOKI_BENCH_QUICK` skips criterion's
//! `allocate` runs.
//!
//! Run: `cargo bench -p infaas-scheduler --bench loki`
//! (`INFAAS_PROTEUS_CSV` points at the catalogue; default `../shared/data/proteus/...`).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::loki::{
    allocate, alternatives, hardware_scaling, most_accurate_first, on_arrival, verify, Allocation,
    Arrival, DropPolicy, Hop, LokiProblem, LokiSettings,
};
use infaas_scheduler::pipeline::{PlanNode, PlanOption};
use infaas_scheduler::VariantEntry;

const ACCELERATORS: [(&str, &str, HardwareKind); 3] = [
    ("onnxruntime_cpu", "cpu", HardwareKind::Cpu),
    ("onnxruntime_gpu_pascal", "gpu_pascal", HardwareKind::Gpu),
    ("onnxruntime_gpu_ampere", "gpu_ampere", HardwareKind::Gpu),
];
const WORKERS: [(&str, usize); 3] = [("cpu", 8), ("gpu_pascal", 6), ("gpu_ampere", 6)];
const SLO_MS: f64 = 600.0;
const TIMED_CALLS: usize = 100_000;

/// One profiled (model, accelerator): accuracy in [0, 1] and latency per batch.
#[derive(Debug, Clone)]
struct Profile {
    model: String,
    pool: &'static str,
    hardware: HardwareKind,
    accuracy: f64,
    latency: Vec<LatencyPoint>,
}

fn family(model: &str) -> &str {
    let m = model.rsplit('/').next().unwrap_or(model);
    const FAMILIES: &[(&str, &[&str])] = &[
        ("yolo", &["yolov5"]),
        ("resnest", &["resnest"]),
        ("resnet", &["resnet"]),
        ("efficientnet", &["efficientnet"]),
        ("bert", &["bert", "albert", "roberta"]),
    ];
    FAMILIES
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| m.starts_with(p)))
        .map_or(m, |(f, _)| *f)
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
    let mut by_key: BTreeMap<(String, usize), Profile> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < 10 {
            continue;
        }
        let Some(a) = ACCELERATORS.iter().position(|(name, _, _)| *name == f[1]) else {
            continue;
        };
        let num = |k: usize| f[k].parse::<f64>().ok().filter(|x| *x > 0.0);
        let (Ok(batch), Some(p50), Some(accuracy)) = (f[3].parse::<usize>(), num(4), num(9)) else {
            continue;
        };
        let p90 = num(5).unwrap_or(p50);
        let mean = num(6).unwrap_or(p50);
        let (_, pool, hardware) = ACCELERATORS[a];
        let p = by_key
            .entry((f[0].to_owned(), a))
            .or_insert_with(|| Profile {
                model: f[0].to_owned(),
                pool,
                hardware,
                accuracy: accuracy / 100.0,
                latency: Vec::new(),
            });
        if p.latency.iter().all(|l| l.batch != batch) {
            p.latency.push(LatencyPoint {
                batch,
                p50_ms: p50,
                p99_ms: p90,
                mean_ms: mean,
                throughput_per_s: batch as f64 / mean * 1000.0,
            });
        }
    }
    let mut out: Vec<Profile> = by_key.into_values().collect();
    for p in &mut out {
        p.latency.sort_by_key(|l| l.batch);
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

/// The same families' shapes with seeded figures (5 YOLO, 5 ResNet, 5 EfficientNet, 12 BERT).
fn generated() -> Vec<Profile> {
    let mut rng = Rng(0x10C1);
    let mut out = Vec::new();
    for (fam, n) in [
        ("yolov5", 5),
        ("resnet", 5),
        ("efficientnet", 5),
        ("bert", 12),
    ] {
        for m in 0..n {
            let size = (m + 1) as f64 / n as f64;
            let base = 5.0 + 60.0 * size * (0.8 + 0.4 * rng.unit());
            let accuracy = 0.5 + 0.4 * size * (0.9 + 0.1 * rng.unit());
            for (a, speed) in [(0usize, 1.0), (1, 5.0), (2, 8.0)] {
                let (_, pool, hardware) = ACCELERATORS[a];
                let latency = [1usize, 2, 4, 8, 16]
                    .iter()
                    .map(|&b| {
                        let ms = base / speed * (b as f64).powf(0.7);
                        LatencyPoint {
                            batch: b,
                            p50_ms: ms,
                            p99_ms: ms * 1.1,
                            mean_ms: ms,
                            throughput_per_s: b as f64 / ms * 1000.0,
                        }
                    })
                    .collect();
                out.push(Profile {
                    model: format!("{fam}-{m}"),
                    pool,
                    hardware,
                    accuracy,
                    latency,
                });
            }
        }
    }
    out
}

/// Every (model, accelerator, batch) of `fam` as an option, grouped by (model, accelerator).
fn options(catalogue: &[Profile], fam: &str) -> Vec<PlanOption> {
    let mut out = Vec::new();
    for (group, p) in catalogue
        .iter()
        .filter(|p| family(&p.model) == fam)
        .enumerate()
    {
        for top in &p.latency {
            let name = format!("{}@{}#b{}", p.model, p.pool, top.batch);
            out.push(PlanOption {
                variant: VariantEntry {
                    id: name.clone(),
                    name,
                    model: p.model.clone(),
                    app: fam.to_owned(),
                    accuracy: p.accuracy,
                    hardware: p.hardware,
                    threads: if p.hardware == HardwareKind::Cpu {
                        4
                    } else {
                        1
                    },
                    max_batch: top.batch,
                    load_ms: 1000.0,
                    memory_bytes: 1 << 30,
                    latency: p
                        .latency
                        .iter()
                        .filter(|l| l.batch <= top.batch)
                        .copied()
                        .collect(),
                },
                group: group as u32,
            });
        }
    }
    out
}

fn pipeline(catalogue: &[Profile], families: &[&str]) -> LokiProblem {
    let nodes = families
        .iter()
        .enumerate()
        .map(|(i, fam)| PlanNode {
            name: (*fam).to_owned(),
            parents: if i == 0 { vec![] } else { vec![i - 1] },
            branch_probability: 1.0,
            options: options(catalogue, fam),
        })
        .collect();
    LokiProblem::new(nodes, 1.0, SLO_MS, WORKERS)
}

/// The largest demand (to 2%) step 1 carries at full accuracy.
fn full_accuracy_capacity(p: &LokiProblem, s: &LokiSettings) -> f64 {
    let carried = |d: f64| matches!(hardware_scaling(&p.with_demand(d), s), Ok(Some(_)));
    let (mut lo, mut hi) = (1.0f64, 1e5f64);
    while hi / lo > 1.02 {
        let mid = (lo * hi).sqrt();
        if carried(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    sorted[((sorted.len() as f64 * q) as usize).min(sorted.len() - 1)]
}

fn describe(a: &Allocation) -> String {
    format!(
        "{:?}/{:?}: relative accuracy {:.4} (accuracy {:.4}), served {:.3}, {} instances {:?}",
        a.mode,
        a.status,
        a.relative_accuracy,
        a.accuracy,
        a.served_fraction,
        a.instances(),
        a.workers_used
    )
}

fn main() {
    let (catalogue, source) = match read_proteus() {
        Some(c) => (c, proteus_path().display().to_string()),
        None => (
            generated(),
            "a seeded catalogue (Proteus CSV not found)".to_owned(),
        ),
    };
    println!(
        "catalogue: {source}: {} (model, accelerator) profiles; workers {WORKERS:?}; SLO {SLO_MS} ms",
        catalogue.len()
    );
    let settings = LokiSettings::default();
    let long = LokiSettings {
        time_limit: Duration::from_secs(30),
        ..settings
    };
    let mut c = Criterion::default().configure_from_args();
    let mut last = None;
    for families in [
        &["yolo", "resnet"][..],
        &["yolo", "efficientnet", "bert"][..],
    ] {
        let name = families.join("->");
        let base = pipeline(&catalogue, families);
        let options: Vec<usize> = base.nodes.iter().map(|n| n.options.len()).collect();
        let full = full_accuracy_capacity(&base, &settings);
        println!(
            "{name}: options per task {options:?}; full accuracy carries {full:.0} q/s (step 1)"
        );
        let mut at_2x = None;
        for factor in [1.5, 2.0, 3.0] {
            let p = base.with_demand(factor * full);
            let mut times = Vec::new();
            let mut first = None;
            for _ in 0..10 {
                let t = Instant::now();
                let a = allocate(&p, &settings).expect("allocates");
                times.push(t.elapsed());
                first.get_or_insert(a);
            }
            times.sort_unstable();
            let a = first.expect("ran");
            verify(&p, &a).expect("the allocation holds");
            let best = allocate(&p, &long).expect("allocates");
            println!(
                "  demand {factor}x = {:.0} q/s\n    allocate (limit {:?}) x10: median {:?}, max {:?}; {}\n    allocate (limit 30 s): {:.0} ms; {}",
                p.demand_qps,
                settings.time_limit,
                percentile(&times, 0.5),
                times[times.len() - 1],
                describe(&a),
                best.solve_ms,
                describe(&best),
            );
            if factor == 2.0 {
                at_2x = Some((p, a));
            }
        }
        let Some((p, a)) = at_2x else { return };
        if std::env::var_os("LOKI_BENCH_QUICK").is_none() {
            let mut g = c.benchmark_group("loki/allocate");
            g.sample_size(10);
            g.bench_function(&name, |b| b.iter(|| allocate(black_box(&p), &settings)));
            g.finish();
        }
        last = Some((p, a));
    }

    // Per-query decisions on the 3-task allocation.
    let Some((p, a)) = last else { return };
    let tables = most_accurate_first(&p, &a, p.demand_qps);
    let leaf = p.nodes.len() - 1;
    let upstream = a.tasks[leaf - 1].len();
    let alts = alternatives(&a, &tables, leaf);
    let names: Vec<String> = p.nodes.iter().map(|n| n.name.clone()).collect();
    let remaining: Vec<Hop> = (1..p.nodes.len())
        .map(|t| Hop {
            task: t,
            node: &names[t],
            placement: 0,
            budget_ms: a.tasks[t].first().map_or(10.0, |pl| pl.budget_ms),
        })
        .collect();
    let planned: f64 = remaining.iter().map(|h| h.budget_ms).sum();
    let mut rng = Rng(7);
    let mut pick_times = Vec::with_capacity(TIMED_CALLS);
    let mut drop_times = Vec::with_capacity(TIMED_CALLS);
    for i in 0..TIMED_CALLS {
        let u = rng.unit();
        let up = i % upstream.max(1);
        let t = Instant::now();
        black_box(tables.pick(leaf, Some(up), black_box(u)));
        pick_times.push(t.elapsed());
        // Late by 0-40% of the planned budgets: some proceed, some reroute, some drop.
        let arrival = Arrival {
            now_ms: 0.0,
            deadline_ms: planned * (1.0 - 0.4 * u) + 0.01,
            remaining: &remaining,
            alternatives: &alts,
            previous: None,
        };
        let t = Instant::now();
        black_box(on_arrival(DropPolicy::RerouteThenDrop, black_box(&arrival)));
        drop_times.push(t.elapsed());
    }
    pick_times.sort_unstable();
    drop_times.sort_unstable();
    for (what, times) in [("pick", &pick_times), ("on_arrival", &drop_times)] {
        println!(
            "{what} over {TIMED_CALLS} timed calls: median {:?}, p99 {:?}, max {:?} (target <= 150 µs)",
            percentile(times, 0.5),
            percentile(times, 0.99),
            times[times.len() - 1]
        );
    }
    c.bench_function("loki/pick", |b| {
        let mut i = 0usize;
        b.iter(|| {
            i = (i + 1) % 1024;
            tables.pick(
                leaf,
                Some(i % upstream.max(1)),
                black_box(i as f64 / 1024.0),
            )
        })
    });
    let late = Arrival {
        now_ms: 0.0,
        deadline_ms: planned * 0.8,
        remaining: &remaining,
        alternatives: &alts,
        previous: None,
    };
    c.bench_function("loki/on_arrival/late", |b| {
        b.iter(|| on_arrival(DropPolicy::RerouteThenDrop, black_box(&late)))
    });
    c.final_summary();
}
