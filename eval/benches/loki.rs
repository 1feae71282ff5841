//! Loki's resource manager and load balancer on the Proteus catalogue: every profiled
//! (model, hardware, batch) of a family is an option of its task, built by the simulator's
//! overload evaluation ([`infaas_eval::overload::loki_problem`]: 46 models x CPU, GPU Pascal and
//! GPU Ampere x batches).
//!
//! Pipelines: `detect-classify` (YOLOv5 -> ResNet) and `three-stage` (YOLOv5 -> EfficientNet ->
//! BERT family), SLO 600 ms, on 20 workers (8 CPU, 6 Pascal, 6 Ampere). Demands are multiples
//! of the largest the cluster carries at full accuracy (bisection on step 1), so `allocate`
//! runs both steps and scales accuracy.
//!
//! Prints, per pipeline and at 1.5, 2 and 3 times that demand, `allocate`'s time over 10 runs
//! with the default 400 ms limit (target <= 500 ms), its status and accuracy (and, with
//! `LOKI_BENCH_OPTIMUM` set, the optimum with a 30 s limit for comparison); then the
//! per-query decisions (routing pick and drop decision, target <= 0.15 ms) over 100,000 timed
//! calls on the 3-task allocation.
//!
//! ```sh
//! cargo bench -p infaas-eval --bench loki        # the Proteus catalogue in ../shared/data
//! INFAAS_PROTEUS_PROFILES=path/to/aggregate_profiled.csv cargo bench -p infaas-eval --bench loki
//! ```

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use infaas_core::stats::percentile_of;
use infaas_eval::overload::{
    default_workers, full_accuracy_capacity, loki_problem, overload_pipeline, SLO_MS,
};
use infaas_scheduler::loki::{
    allocate, alternatives, most_accurate_first, on_arrival, verify, Allocation, Arrival,
    DropPolicy, Hop, LokiSettings,
};
use infaas_sim::catalogue::read_proteus;

const TIMED_CALLS: usize = 100_000;

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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profiles = std::env::var_os("INFAAS_PROTEUS_PROFILES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/proteus/aggregate_profiled.csv")
        });
    let catalogue = read_proteus(&profiles)
        .map_err(|e| format!("{}: {e} (set INFAAS_PROTEUS_PROFILES)", profiles.display()))?;
    let workers = default_workers();
    println!(
        "catalogue: {}: {} profiles; workers {workers:?}; SLO {SLO_MS} ms",
        profiles.display(),
        catalogue.len()
    );
    let settings = LokiSettings::default();
    let long = LokiSettings {
        time_limit: Duration::from_secs(30),
        ..settings
    };
    let optimum = std::env::var_os("LOKI_BENCH_OPTIMUM").is_some();
    let mut last = None;
    for name in ["detect-classify", "three-stage"] {
        let spec = overload_pipeline(name).ok_or("no such pipeline")?;
        let base = loki_problem(&spec, &catalogue, SLO_MS, &workers)?;
        let options: Vec<usize> = base.nodes.iter().map(|n| n.options.len()).collect();
        let full = full_accuracy_capacity(&base, &settings)?;
        println!(
            "{name}: options per task {options:?}; full accuracy carries {full:.0} q/s (step 1)"
        );
        for factor in [1.5, 2.0, 3.0] {
            let p = base.with_demand(factor * full);
            let mut times = Vec::new();
            let mut first = None;
            for _ in 0..10 {
                let t = Instant::now();
                let a = allocate(&p, &settings)?;
                times.push(t.elapsed());
                first.get_or_insert(a);
            }
            times.sort_unstable();
            let a = first.ok_or("no run")?;
            verify(&p, &a)?;
            println!(
                "  demand {factor}x = {:.0} q/s\n    allocate (limit {:?}) x10: median {:?}, max {:?}; {}",
                p.demand_qps,
                settings.time_limit,
                percentile_of(&times, 0.5).unwrap_or_default(),
                times[times.len() - 1],
                describe(&a),
            );
            if optimum {
                let best = allocate(&p, &long)?;
                println!(
                    "    allocate (limit 30 s): {:.0} ms; {}",
                    best.solve_ms,
                    describe(&best)
                );
            }
            if factor == 2.0 {
                last = Some((p, a));
            }
        }
    }

    // Per-query decisions on the 3-task allocation at 2x.
    let (p, a) = last.ok_or("no allocation")?;
    let tables = most_accurate_first(&p, &a, p.demand_qps);
    let leaf = p.nodes.len() - 1;
    let upstream = a.tasks[leaf - 1].len().max(1);
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
    let mut pick_times = Vec::with_capacity(TIMED_CALLS);
    let mut drop_times = Vec::with_capacity(TIMED_CALLS);
    for i in 0..TIMED_CALLS {
        let u = (i as f64 * 0.618_033_988_75).fract();
        let t = Instant::now();
        black_box(tables.pick(leaf, Some(i % upstream), black_box(u)));
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
            percentile_of(times, 0.5).unwrap_or_default(),
            percentile_of(times, 0.99).unwrap_or_default(),
            times[times.len() - 1]
        );
    }
    Ok(())
}
