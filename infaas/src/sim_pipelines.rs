//! `infaas sim-pipelines`: plans pipelines of models with InferLine's planner on a SIMULATED
//! cluster (the Proteus catalogue), replays a Proteus trace pattern on the plans with the tuner
//! and on the baselines (per-stage, CG-Peak), and prints what each cost and attained (see
//! `infaas_eval::pipeline`).

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use infaas_eval::pipeline::{
    evaluate, input_arrivals, pipeline, pipelines, EvalSettings, Input, OptionSettings,
    PipelineEval, PIPELINES,
};
use infaas_scheduler::pipeline::Provisioning;
use infaas_sim::catalogue::{read_proteus, Accelerator};
use infaas_sim::trace::Trace;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum InputArg {
    /// Every query of the pattern (all families' files) enters the pipeline.
    All,
    /// Only the queries of the first stage's family.
    Root,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ProvisioningArg {
    Mean,
    Timescale,
}

#[derive(Debug, Args)]
pub struct SimPipelinesArgs {
    /// The profile catalogue (Proteus format: `Model,Accel,Trials,batchsize,50th_pct,...`).
    #[arg(long)]
    profiles: PathBuf,
    /// A directory of Proteus traces (`<family>.txt`), e.g. `.../twitter/zipf_exponential/300`:
    /// the live trace replayed.
    #[arg(long)]
    proteus: PathBuf,
    /// The pipeline to evaluate (detect-classify, three-stage, cascade, social-dag) or `all`.
    #[arg(long, default_value = "all")]
    pipeline: String,
    /// End-to-end latency SLO, ms.
    #[arg(long, default_value_t = 300.0)]
    slo_ms: f64,
    /// The percentile of queries the SLO holds for.
    #[arg(long, default_value_t = 99.5)]
    percentile: f64,
    /// Floor of the estimated end-to-end accuracy (default: --accuracy-fraction of the best).
    #[arg(long)]
    min_accuracy: Option<f64>,
    /// The accuracy floor as a fraction of the best reachable, when --min-accuracy is not given.
    #[arg(long, default_value_t = 0.9)]
    accuracy_fraction: f64,
    /// The planning trace: the first this many seconds of the live trace.
    #[arg(long, default_value_t = 60.0)]
    plan_s: f64,
    /// Plan for the planning trace at 1 + this times its rate (e.g. 0.1: 10% more load).
    #[arg(long, default_value_t = 0.1)]
    load_margin: f64,
    /// Which queries of the pattern enter the pipelines.
    #[arg(long, value_enum, default_value = "all")]
    input: InputArg,
    /// Hardware the nodes may run on, comma-separated: cpu, gpu_pascal, gpu_ampere.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "cpu,gpu_pascal,gpu_ampere"
    )]
    accelerators: Vec<String>,
    /// How the tuner sizes a scale-out: timescale (the plan's ratio at each window size) or
    /// mean (InferLine's: the plan's ratio at the sample's mean rate, applied to the highest
    /// exceeding rate).
    #[arg(long, value_enum, default_value = "timescale")]
    provisioning: ProvisioningArg,
    /// A fixed max-provisioning ratio for every node (overrides --provisioning).
    #[arg(long)]
    rho: Option<f64>,
    /// Scale-out targets are multiplied by this (at least 1).
    #[arg(long, default_value_t = 1.2)]
    headroom: f64,
    /// Most replicas of a node.
    #[arg(long, default_value_t = 256)]
    max_replicas: usize,
    /// Seed of the branch draws.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Where the JSON report goes (plans, rows and every replay's per-second series).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs the command.
pub fn run(args: SimPipelinesArgs) -> anyhow::Result<()> {
    let specs = if args.pipeline == "all" {
        pipelines()
    } else {
        vec![pipeline(&args.pipeline).with_context(|| {
            format!(
                "unknown pipeline '{}'; expected all or one of {}",
                args.pipeline,
                PIPELINES.join(", ")
            )
        })?]
    };
    if !(args.slo_ms.is_finite() && args.slo_ms > 0.0) {
        anyhow::bail!("--slo-ms {} must be positive", args.slo_ms);
    }
    if !(args.percentile > 0.0 && args.percentile <= 100.0) {
        anyhow::bail!("--percentile {} must be in (0, 100]", args.percentile);
    }
    if let Some(r) = args.rho {
        if !(r > 0.0 && r.is_finite()) {
            anyhow::bail!("--rho {r} must be positive");
        }
    }
    let mut accelerators = Vec::new();
    for a in &args.accelerators {
        accelerators.push(Accelerator::parse(a).with_context(|| {
            format!("--accelerators: unknown '{a}'; expected cpu, gpu_pascal or gpu_ampere")
        })?);
    }
    let catalogue = read_proteus(&args.profiles)?;
    let trace = Trace::read_proteus_dir(&args.proteus)?;
    let settings = EvalSettings {
        slo_ms: args.slo_ms,
        percentile: args.percentile,
        min_accuracy: args.min_accuracy,
        accuracy_fraction: args.accuracy_fraction,
        plan_s: args.plan_s,
        load_margin: args.load_margin.max(0.0),
        max_replicas: args.max_replicas.max(1),
        seed: args.seed,
        provisioning: match (args.rho, args.provisioning) {
            (Some(r), _) => Provisioning::Fixed(r),
            (None, ProvisioningArg::Mean) => Provisioning::Mean,
            (None, ProvisioningArg::Timescale) => Provisioning::Timescale,
        },
        headroom: args.headroom.max(1.0),
        options: OptionSettings {
            accelerators,
            ..OptionSettings::default()
        },
        ..EvalSettings::default()
    };
    let input = match args.input {
        InputArg::All => Input::All,
        InputArg::Root => Input::Root,
    };
    let mut evals: Vec<PipelineEval> = Vec::new();
    for spec in &specs {
        let live = input_arrivals(&trace, spec, input);
        eprintln!(
            "SIMULATED: {} ({}): {} queries over {:.0} s, planning on the first {:.0} s",
            spec.name,
            spec.description,
            live.len(),
            live.last().copied().unwrap_or(0.0) / 1e3,
            args.plan_s
        );
        let e = evaluate(spec, &catalogue, &live, &settings)
            .with_context(|| format!("evaluating pipeline '{}'", spec.name))?;
        evals.push(e);
    }
    println!(
        "SIMULATED. SLO {:.0} ms at P{}, planning trace: the first {:.0} s of {}",
        args.slo_ms,
        args.percentile,
        args.plan_s,
        args.proteus.display()
    );
    println!(
        "{:<16} {:<15} {:>9} {:>9} {:>10} {:>7} {:>11} {:>9}",
        "pipeline", "policy", "attained", "p99_ms", "cost_$/h", "ratio", "planner_ms", "estimates"
    );
    for e in &evals {
        for r in &e.rows {
            println!(
                "{:<16} {:<15} {:>8.2}% {:>9.1} {:>10.3} {:>7.2} {:>11.1} {:>9}",
                r.pipeline,
                r.policy,
                r.slo_attainment * 100.0,
                r.p99_ms,
                r.cost_per_hour,
                r.cost_ratio,
                r.planner_ms,
                r.estimates
            );
        }
        for (policy, why) in &e.failed {
            println!("{:<16} {:<15} not configured: {why}", e.pipeline, policy);
        }
    }
    println!();
    for e in &evals {
        println!(
            "{}: accuracy floor {:.4}, {} planning queries, {} live queries over {:.0} s",
            e.pipeline, e.min_accuracy, e.planning_queries, e.live_queries, e.live_s
        );
        for r in &e.rows {
            let tuner = if r.replay.scale_outs + r.replay.scale_ins > 0 {
                format!(
                    "; tuner: {} scale-outs, {} scale-ins, peak replicas {:?}",
                    r.replay.scale_outs, r.replay.scale_ins, r.replay.max_replicas
                )
            } else {
                String::new()
            };
            println!(
                "  {:<15} accuracy {:.4}: {}{tuner}",
                r.policy, r.accuracy, r.note
            );
        }
    }
    if let Some(path) = &args.out {
        let doc = serde_json::json!({
            "simulated": true,
            "profiles": args.profiles,
            "proteus": args.proteus,
            "slo_ms": args.slo_ms,
            "percentile": args.percentile,
            "plan_s": args.plan_s,
            "pipelines": evals,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}
