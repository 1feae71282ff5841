//! `infaas sim-overload`: Loki's accuracy scaling and early dropping against hardware scaling
//! alone (InferLine) and per-task accuracy scaling (Proteus) on a SIMULATED fixed cluster
//! under overload (see `infaas_eval::overload`): capacity at ≤ 1% SLO violations, and SLO
//! violations and accuracy on a step overload and on rescaled Proteus traces.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use infaas_eval::overload::{
    evaluate, loki_problem, overload_pipeline, overload_pipelines, step_arrivals, trace_arrivals,
    AccuracyCeiling, Overload, OverloadEval, OverloadPolicy, OverloadSettings, Workload,
    OVERLOAD_PIPELINES,
};
use infaas_eval::pipeline::{input_arrivals, Input};
use infaas_scheduler::loki::{LokiSettings, ManagerSettings};
use infaas_sim::catalogue::read_proteus;
use infaas_sim::trace::Trace;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WorkloadArg {
    /// 0.8x, then 3x, then 0.8x the full-accuracy capacity (Poisson).
    Step,
    /// The Proteus `zipf_exponential_bursty` trace, rescaled.
    Bursty,
    /// The Proteus `normal-high_load` trace, rescaled.
    NormalHigh,
    /// No workload: the capacity search alone.
    None,
    All,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum PoliciesArg {
    /// inferline, per_stage, loki.
    Main,
    /// The main three and loki's ablations (no-dropping, last-task, per-task dropping).
    All,
}

#[derive(Debug, Args)]
pub struct SimOverloadArgs {
    /// The pipeline (detect-classify, three-stage, cascade, traffic) or `all`.
    #[arg(long, default_value = "all")]
    pipeline: String,
    /// The workload(s) besides the capacity search.
    #[arg(long, value_enum, default_value = "all")]
    workload: WorkloadArg,
    #[arg(long, value_enum, default_value = "all")]
    policies: PoliciesArg,
    /// Seed of the arrivals, branches and routing draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the evaluation as JSON instead of the tables.
    #[arg(long)]
    json: bool,
    /// The Proteus data directory: `aggregate_profiled.csv` and `twitter/<pattern>/300/`.
    #[arg(long, default_value = "../shared/data/proteus")]
    data: PathBuf,
    /// The profile catalogue (default: `<data>/aggregate_profiled.csv`).
    #[arg(long)]
    profiles: Option<PathBuf>,
    /// End-to-end SLO, ms.
    #[arg(long, default_value_t = infaas_eval::overload::SLO_MS)]
    slo_ms: f64,
    /// Workers per pool, e.g. `cpu=8,gpu_pascal=6,gpu_ampere=6`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cpu=8,gpu_pascal=6,gpu_ampere=6"
    )]
    workers: Vec<String>,
    /// Seconds of the step's three phases (low, high, low).
    #[arg(long, value_delimiter = ',', default_value = "60,120,60")]
    step_s: Vec<f64>,
    /// The step's high demand and the traces' peak, as multiples of the full-accuracy capacity.
    #[arg(long, default_value_t = 3.0)]
    peak: f64,
    /// Seconds of each steady run of the capacity search (0: no capacity search).
    #[arg(long, default_value_t = 30.0)]
    capacity_s: f64,
    /// Re-planning period, s (default: the controller's, 10).
    #[arg(long)]
    replan_s: Option<f64>,
    /// Re-plan only every --replan-s: no re-plan on a significant change of demand between
    /// periods (by default every policy checks every second whether the last 2 s of arrivals
    /// exceed the demand planned for by 25% or fall below half of it, and re-plans at once,
    /// the plan taking effect 0.5 s later; the controller's resource manager, ManagerSettings).
    #[arg(long)]
    no_replan_on_change: bool,
    /// An experiment beyond Loki: the frontend drops what a loki plan does not carry (its
    /// served fraction) on arrival, instead of spreading it over every placement.
    #[arg(long)]
    admission: bool,
    /// Time limit of each of Loki's MILP allocations, ms.
    #[arg(long, default_value_t = 400)]
    time_limit_ms: u64,
    /// Time limit of each MILP solve of the catalogue's accuracy ceiling (with the capacity
    /// search), ms: a solve stopped by it leaves the ceiling NOT PROVED.
    #[arg(long, default_value_t = 10_000)]
    ceiling_time_limit_ms: u64,
}

fn workers(specs: &[String]) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut out = BTreeMap::new();
    for s in specs {
        let (pool, n) = s
            .split_once('=')
            .with_context(|| format!("--workers: '{s}' is not POOL=N"))?;
        let n: usize = n
            .trim()
            .parse()
            .with_context(|| format!("--workers: '{n}' is not a count"))?;
        out.insert(pool.trim().to_owned(), n);
    }
    if out.values().all(|&n| n == 0) {
        anyhow::bail!("--workers: no workers");
    }
    Ok(out)
}

fn percent(x: f64) -> String {
    format!("{:.2}%", x * 100.0)
}

/// The catalogue's ceiling at the accuracy bound, for the table's header line.
fn ceiling_text(c: &AccuracyCeiling, ratio_to_inferline: Option<f64>) -> String {
    format!(
        "; the catalogue's ceiling at >= {:.0}% relative accuracy (any plan, p99 budgets): {:.1} q/s ({} inferline's capacity; not carried at {}; {} MILP solves in {:.1} s{})",
        c.min_relative_accuracy * 100.0,
        c.qps,
        ratio_to_inferline.map_or("-".into(), |x| format!("{x:.2}x")),
        c.fails_at_qps
            .map_or("256x the full-accuracy capacity".into(), |q| format!("{q:.1} q/s")),
        c.probes.len(),
        c.solve_s,
        if c.proved {
            ""
        } else {
            "; NOT PROVED: a solve stopped at its time limit"
        }
    )
}

fn print_table(e: &OverloadEval, settings: &OverloadSettings) {
    let workers: Vec<String> = e.workers.iter().map(|(k, n)| format!("{k}={n}")).collect();
    println!(
        "SIMULATED. {} ({}), SLO {:.0} ms, workers {}: full-accuracy capacity {:.1} q/s (hardware scaling){}{}",
        e.pipeline,
        e.description,
        e.slo_ms,
        workers.join(","),
        e.full_accuracy_capacity_qps,
        e.planned_accuracy_scaling_capacity_qps
            .map(|p| format!(
                "; loki's plans (p99 budgets) say they carry up to {p:.1} q/s ({:.2}x)",
                p / e.full_accuracy_capacity_qps
            ))
            .unwrap_or_default(),
        e.accuracy_ceiling
            .as_ref()
            .map(|c| ceiling_text(c, e.accuracy_ceiling_ratio_to_inferline))
            .unwrap_or_default()
    );
    for w in &e.workloads {
        println!(
            "  workload {}: {} queries over {:.0} s, mean {:.1} q/s, peak {:.2}x",
            w.name, w.queries, w.duration_s, w.mean_qps, w.peak_ratio
        );
    }
    let mut header = format!(
        "{:<17} {:>9} {:>7} {:>8} {:>8} {:>10} {:>7}",
        "policy", "cap_q/s", "x_infl", "acc@cap", "acc_drop", "cap13_q/s", "x_infl"
    );
    for w in &e.workloads {
        let n = &w.name;
        header.push_str(&format!(
            " | {:>9} {:>7} {:>8} {:>7} {:>6}",
            format!("{n}:viol"),
            "acc",
            "dropped",
            "workers",
            "chg"
        ));
    }
    println!("{header}");
    for r in &e.rows {
        let (cap, ratio, acc, drop) = match &r.capacity {
            Some(c) => {
                let acc = c.at_capacity.as_ref().map(|a| a.relative_accuracy);
                (
                    format!("{:.1}", c.qps),
                    r.capacity_ratio_to_inferline
                        .map_or("-".into(), |x| format!("{x:.2}")),
                    acc.map_or("-".into(), |a| format!("{a:.3}")),
                    acc.map_or("-".into(), |a| percent(1.0 - a)),
                )
            }
            None => ("-".into(), "-".into(), "-".into(), "-".into()),
        };
        let (bounded, bratio) = match &r.bounded_capacity {
            Some(c) => (
                format!("{:.1}", c.qps),
                r.bounded_ratio_to_inferline
                    .map_or("-".into(), |x| format!("{x:.2}")),
            ),
            None => ("-".into(), "-".into()),
        };
        let mut line = format!(
            "{:<17} {cap:>9} {ratio:>7} {acc:>8} {drop:>8} {bounded:>10} {bratio:>7}",
            r.policy
        );
        for w in &e.workloads {
            match r.runs.get(&w.name) {
                Some(s) => line.push_str(&format!(
                    " | {:>9} {:>7.3} {:>8} {:>7.1} {:>6}",
                    percent(s.violation_ratio),
                    s.relative_accuracy,
                    percent(s.dropped as f64 / s.arrivals.max(1) as f64),
                    s.workers_mean,
                    s.change_replans
                )),
                None => line.push_str(" | -"),
            }
        }
        println!("{line}");
    }
    println!(
        "  (capacity: largest steady Poisson demand with <= 1% SLO violations; cap13: the same keeping >= 87% relative accuracy; acc: mean accuracy of the queries answered within the SLO, relative to the most accurate variants; viol: (late + dropped) / queries; chg: re-plans on a change of demand; re-planning every {} s{}; {} plans in {:.1} s, {:.1} s in all)",
        settings.manager.period_s,
        if settings.manager.replan_on_change {
            " and on a change of demand"
        } else {
            " only"
        },
        e.plans_made,
        e.planning_s,
        e.wall_s
    );
}

/// Runs the command.
pub fn run(args: SimOverloadArgs) -> anyhow::Result<()> {
    let specs = if args.pipeline == "all" {
        overload_pipelines()
    } else {
        vec![overload_pipeline(&args.pipeline).with_context(|| {
            format!(
                "unknown pipeline '{}'; expected all or one of {}",
                args.pipeline,
                OVERLOAD_PIPELINES.join(", ")
            )
        })?]
    };
    if !(args.slo_ms.is_finite() && args.slo_ms > 0.0) {
        anyhow::bail!("--slo-ms {} must be positive", args.slo_ms);
    }
    let step_s: [f64; 3] = args
        .step_s
        .as_slice()
        .try_into()
        .ok()
        .filter(|s: &[f64; 3]| s.iter().all(|x| x.is_finite() && *x >= 0.0))
        .context("--step-s takes three non-negative durations, e.g. 60,120,60")?;
    let period_s = args.replan_s.unwrap_or(ManagerSettings::default().period_s);
    if !(period_s > 0.0 && args.peak > 0.0) {
        anyhow::bail!("--replan-s and --peak must be positive");
    }
    let workers = workers(&args.workers)?;
    let profiles = args
        .profiles
        .clone()
        .unwrap_or_else(|| args.data.join("aggregate_profiled.csv"));
    let catalogue = read_proteus(&profiles)?;
    let settings = OverloadSettings {
        slo_ms: args.slo_ms,
        workers: workers.clone(),
        loki: LokiSettings {
            time_limit: Duration::from_millis(args.time_limit_ms.max(1)),
            ..LokiSettings::default()
        },
        manager: ManagerSettings {
            period_s,
            replan_on_change: !args.no_replan_on_change,
            ..ManagerSettings::default()
        },
        seed: args.seed,
        step_s,
        step_high: args.peak,
        trace_peak: args.peak,
        capacity_s: args.capacity_s,
        ceiling_time_limit: Duration::from_millis(args.ceiling_time_limit_ms.max(1)),
        admission: args.admission,
        ..OverloadSettings::default()
    };
    let policies: &[OverloadPolicy] = match args.policies {
        PoliciesArg::Main => &OverloadPolicy::MAIN,
        PoliciesArg::All => &OverloadPolicy::ALL,
    };
    let want = |w: WorkloadArg| args.workload == w || args.workload == WorkloadArg::All;
    let traces: Vec<(&str, &str)> = [
        (WorkloadArg::Bursty, "bursty", "zipf_exponential_bursty"),
        (WorkloadArg::NormalHigh, "normal-high", "normal-high_load"),
    ]
    .into_iter()
    .filter(|(w, _, _)| want(*w))
    .map(|(_, name, dir)| (name, dir))
    .collect();
    let mut loaded = Vec::new();
    for (name, dir) in &traces {
        let path = args.data.join("twitter").join(dir).join("300");
        let trace = Trace::read_proteus_dir(&path)
            .with_context(|| format!("reading the {name} trace from {}", path.display()))?;
        loaded.push((*name, trace));
    }
    let mut evals = Vec::new();
    for spec in &specs {
        let problem = loki_problem(spec, &catalogue, args.slo_ms, &workers)
            .with_context(|| format!("pipeline '{}'", spec.name))?;
        let mut o = Overload::new(problem, settings.clone())
            .with_context(|| format!("pipeline '{}'", spec.name))?;
        let full = o.full_capacity_qps;
        let mut workloads = Vec::new();
        if want(WorkloadArg::Step) {
            workloads.push(Workload {
                name: "step".into(),
                arrivals_ms: step_arrivals(
                    full,
                    settings.step_low,
                    settings.step_high,
                    step_s,
                    args.seed,
                ),
            });
        }
        for (name, trace) in &loaded {
            let raw = input_arrivals(trace, spec, Input::All);
            workloads.push(Workload {
                name: (*name).into(),
                arrivals_ms: trace_arrivals(&raw, settings.trace_peak * full, args.seed),
            });
        }
        workloads.retain(|w| !w.arrivals_ms.is_empty());
        if !args.json {
            eprintln!(
                "SIMULATED: {} ({}): full-accuracy capacity {full:.1} q/s; {} workload(s), {} policies...",
                spec.name,
                spec.description,
                workloads.len(),
                policies.len()
            );
        }
        let e = evaluate(&mut o, spec, policies, &workloads, args.capacity_s > 0.0)
            .with_context(|| format!("evaluating pipeline '{}'", spec.name))?;
        if !args.json {
            print_table(&e, &settings);
            println!();
        }
        evals.push(e);
    }
    if args.json {
        let doc = serde_json::json!({
            "simulated": true,
            "profiles": profiles,
            "seed": args.seed,
            "pipelines": evals,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
    }
    Ok(())
}
