//! Planner speed: `plan()` on a 5-node pipeline (`social-dag`: detection, classification, a
//! 50% scene branch, a 30% fine-grained branch and a joining text model; every profiled
//! (model, accelerator, batch) of the Proteus catalogue as options) over a 1-hour Poisson
//! trace at 100 queries/s (360,000 queries), SLO 300 ms at P99, accuracy floor 90% of the
//! best. The target is at most 1 s on the development machine (2 shared cores).
//!
//! ```sh
//! cargo bench -p infaas-eval --bench pipeline_plan        # the Proteus catalogue in ../shared/data
//! INFAAS_PROTEUS_PROFILES=path/to/aggregate_profiled.csv cargo bench -p infaas-eval --bench pipeline_plan
//! ```
//!
//! SIMULATED: the estimator replays the trace through the pipeline's queues (no model runs).

use std::path::PathBuf;
use std::time::Instant;

use infaas_core::stats::median_of;
use infaas_eval::pipeline::{best_accuracy, pipeline, problem_for, OptionSettings};
use infaas_scheduler::pipeline::plan;
use infaas_sim::catalogue::read_proteus;
use infaas_sim::generate::poisson;
use infaas_sim::pipeline::TraceEstimator;

const TARGET_S: f64 = 1.0;
const RUNS: usize = 5;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let profiles = std::env::var_os("INFAAS_PROTEUS_PROFILES")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/data/proteus/aggregate_profiled.csv")
        });
    let catalogue = read_proteus(&profiles)
        .map_err(|e| format!("{}: {e} (set INFAAS_PROTEUS_PROFILES)", profiles.display()))?;
    let spec = pipeline("social-dag").ok_or("no social-dag pipeline")?;
    let mut problem = problem_for(&spec, &catalogue, 300.0, &OptionSettings::default())?;
    problem.percentile = 99.0;
    problem.max_replicas = 256;
    problem.min_accuracy = Some(0.9 * best_accuracy(&problem));
    let arrivals = poisson(&[(3600.0, 100.0)], 1);
    let options: usize = problem.nodes.iter().map(|n| n.options.len()).sum();
    println!(
        "SIMULATED: {} nodes, {options} options, {} queries over 1 h; target {TARGET_S} s",
        problem.nodes.len(),
        arrivals.len()
    );
    println!(
        "{:>4} {:>9} {:>10} {:>8} {:>8} {:>8} {:>9} {:>10}",
        "run", "wall_s", "estimates", "stages", "hits", "aborted", "cost_h", "p99_ms"
    );
    let mut walls = Vec::new();
    for run in 0..RUNS {
        let mut estimator = TraceEstimator::new(arrivals.clone(), 1);
        let started = Instant::now();
        let p = plan(&problem, &mut estimator)?;
        let wall = started.elapsed().as_secs_f64();
        let s = estimator.stats();
        println!(
            "{run:>4} {wall:>9.3} {:>10} {:>8} {:>8} {:>8} {:>9.3} {:>10.1}",
            p.estimates, s.stages, s.hits, s.aborted, p.cost_per_hour, p.estimate.p99_ms
        );
        if run == 0 {
            for n in &p.nodes {
                println!("       {:>9}: {} x {}", n.name, n.replicas, n.variant);
            }
        }
        walls.push(wall);
    }
    walls.sort_by(f64::total_cmp);
    let median = median_of(&walls).unwrap_or_default();
    println!(
        "plan() median {median:.3} s, best {:.3} s over {RUNS} runs ({})",
        walls[0],
        if median <= TARGET_S {
            "within the target"
        } else {
            "ABOVE the target"
        }
    );
    Ok(())
}
