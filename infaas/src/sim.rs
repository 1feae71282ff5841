//! `infaas sim`: replays a trace on a SIMULATED cluster under one or more policies and writes
//! what each one cost and attained (see the `infaas-sim` crate).

use std::path::PathBuf;

use anyhow::Context;
use clap::Args;
use infaas_scheduler::autoscale::ScalingConfig;
use infaas_sim::catalogue::{read_proteus, Accelerator};
use infaas_sim::generate::Generator;
use infaas_sim::policy::{baseline_accuracy, by_name, NAMES};
use infaas_sim::report::{series_csv, PolicyReport};
use infaas_sim::trace::Trace;
use infaas_sim::{request_cpu_ms_accepted, simulate, variants_for, Cluster, MAX_REQUEST_CPU_MS};
use infaas_web::whatif::{plot_svg, PolicyLines};

#[derive(Debug, Args)]
pub struct SimArgs {
    /// A trace in the CSV format `time_ms,app,slo_ms,min_accuracy` (docs/simulator.md, "Workloads").
    #[arg(long, conflicts_with_all = ["proteus", "generate"])]
    trace: Option<PathBuf>,
    /// A directory of Proteus traces (`<family>.txt`, one application per family).
    #[arg(long, conflicts_with = "generate")]
    proteus: Option<PathBuf>,
    /// A workload generator, e.g. `gamma:rate=200,cv=4,duration=60,app=resnet,slo=300`.
    #[arg(long)]
    generate: Option<String>,
    /// The profile catalogue (Proteus format: `Model,Accel,Trials,batchsize,50th_pct,...`).
    #[arg(long)]
    profiles: PathBuf,
    /// Policies to compare, comma-separated: static_peak, horizontal, infaas_greedy,
    /// infaas_exact.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "static_peak,infaas_greedy"
    )]
    policy: Vec<String>,
    /// Where the JSON report goes (every policy's summary and per-second series).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Where the per-second series go as CSV.
    #[arg(long)]
    series: Option<PathBuf>,
    /// Where an SVG of cost, SLO attainment and accuracy over time goes (a line per policy).
    #[arg(long)]
    plot: Option<PathBuf>,
    #[arg(long, default_value_t = 16)]
    cpu_workers: usize,
    #[arg(long, default_value_t = 16)]
    cpu_cores: usize,
    #[arg(long, default_value_t = 16)]
    gpu_workers: usize,
    /// Most CPU workers the platform's worker autoscaler may run (default: --cpu-workers, no
    /// worker is added); workers start in --worker-start-s.
    #[arg(long)]
    max_cpu_workers: Option<usize>,
    /// Most GPU workers the platform's worker autoscaler may run (default: --gpu-workers).
    #[arg(long)]
    max_gpu_workers: Option<usize>,
    /// Seconds from a worker's start until it can take instances.
    #[arg(long, default_value_t = 30.0)]
    worker_start_s: f64,
    /// SIMULATED interference: a noisy neighbour slowing every batch on a worker,
    /// `worker=W,from=S[,until=S],factor=F` (W: an index among the initial workers, CPU
    /// workers first; seconds). Repeat for more.
    #[arg(long, value_name = "SPEC")]
    noise: Vec<infaas_sim::Noise>,
    /// An offline job worked through on spare capacity by the platform's job runner,
    /// `app=NAME,rows=N[,at=S]` (submitted at second S, default 0). Repeat for more.
    #[arg(long, value_name = "SPEC")]
    job: Vec<infaas_sim::OfflineJob>,
    /// Core time each query takes on the worker serving it besides its instance's run, in ms
    /// (the HTTP edge and clients sharing that worker's cores): batches slow down while busy
    /// instance threads and this load exceed the worker's cores. Default 0: none.
    #[arg(long, default_value_t = 0.0)]
    request_cpu_ms: f64,
    /// The platform's policies start with no instance loaded, as a server that has just
    /// started (the first queries' selection loads what they need); the baselines provision as
    /// always. Default: they start with what the platform holds after the opening traffic.
    #[arg(long)]
    cold_start: bool,
    /// GPU generation of the GPU workers: gpu_ampere or gpu_pascal.
    #[arg(long, default_value = "gpu_ampere")]
    gpu: String,
    /// Cores one CPU instance holds.
    #[arg(long, default_value_t = 4)]
    cpu_threads: usize,
    /// Headroom the platform's autoscaler keeps (`autoscale.slack`: saturation throughput /
    /// load below which a family scales up).
    #[arg(long, default_value_t = 1.05)]
    slack: f64,
    /// Headroom above which it scales down (`autoscale.scale_down`; default 1.5 x slack / 1.05).
    #[arg(long)]
    scale_down: Option<f64>,
    /// Scale-in stabilisation (`autoscale.scale_in_hold_secs`): a model with enough capacity
    /// gives back only instances that have been in their state this long, in seconds.
    #[arg(long)]
    scale_in_hold_secs: Option<f64>,
    /// Peak hold (`autoscale.peak_hold_secs`): a model is planned for the highest per-second
    /// arrival rate within this long, in seconds.
    #[arg(long)]
    peak_hold_secs: Option<f64>,
    /// Period of the platform's model autoscaler (`autoscale.model_interval_ms`) and of every
    /// policy's periodic step, in ms (at least 10).
    #[arg(long, default_value_t = infaas_scheduler::autoscale::DEFAULT_MODEL_PERIOD_MS)]
    model_interval_ms: u64,
    /// Every query asks for at least this accuracy: a fraction, or `baseline` for, per
    /// application, the accuracy of the variant the fixed-variant baselines serve it with
    /// (the platform's policy compared with them at equal accuracy)
    #[arg(long)]
    min_accuracy: Option<String>,
}

/// Runs the command.
pub fn run(args: SimArgs) -> anyhow::Result<()> {
    let mut trace = match (&args.trace, &args.proteus, &args.generate) {
        (Some(p), _, _) => Trace::read_csv(p)?,
        (_, Some(dir), _) => Trace::read_proteus_dir(dir)?,
        (_, _, Some(spec)) => spec.parse::<Generator>()?.generate(),
        _ => anyhow::bail!("give a workload: --trace FILE, --proteus DIR or --generate SPEC"),
    };
    let catalogue = read_proteus(&args.profiles)?;
    let gpu = Accelerator::parse(&args.gpu)
        .filter(|a| *a != Accelerator::Cpu)
        .with_context(|| format!("--gpu '{}': expected gpu_ampere or gpu_pascal", args.gpu))?;
    let cluster = Cluster {
        cpu_workers: args.cpu_workers,
        cpu_cores: args.cpu_cores,
        gpu_workers: args.gpu_workers,
        max_cpu_workers: args.max_cpu_workers.unwrap_or(args.cpu_workers),
        max_gpu_workers: args.max_gpu_workers.unwrap_or(args.gpu_workers),
        worker_start_ms: args.worker_start_s.max(0.0) * 1e3,
        noise: args.noise.clone(),
        jobs: args.job.clone(),
        gpu,
        cpu_threads: args.cpu_threads.max(1),
        tick_ms: args.model_interval_ms as f64,
        request_cpu_ms: args.request_cpu_ms,
        cold_start: args.cold_start,
        ..Cluster::default()
    };
    if !request_cpu_ms_accepted(args.request_cpu_ms) {
        anyhow::bail!(
            "--request-cpu-ms {} must be from 0 to {MAX_REQUEST_CPU_MS}",
            args.request_cpu_ms
        );
    }
    if args.model_interval_ms < 10 {
        anyhow::bail!(
            "--model-interval-ms {} must be at least 10",
            args.model_interval_ms
        );
    }
    if let Some(n) = args
        .noise
        .iter()
        .find(|n| n.worker >= args.cpu_workers + args.gpu_workers)
    {
        anyhow::bail!(
            "--noise worker={}: the cluster starts with {} workers (0 to {})",
            n.worker,
            args.cpu_workers + args.gpu_workers,
            (args.cpu_workers + args.gpu_workers).saturating_sub(1)
        );
    }
    if let Some(j) = args.job.iter().find(|j| !trace.apps.contains(&j.app)) {
        anyhow::bail!(
            "--job app={}: the trace has no such application ({})",
            j.app,
            trace.apps.join(", ")
        );
    }
    let variants = variants_for(&trace, &catalogue, &cluster)?;
    if let Some(min) = &args.min_accuracy {
        let per_app = match min.as_str() {
            "baseline" => baseline_accuracy(&trace, &variants),
            v => {
                let a: f64 = v
                    .parse()
                    .ok()
                    .filter(|a| (0.0..=1.0).contains(a))
                    .with_context(|| {
                        format!("--min-accuracy '{v}': expected `baseline` or a fraction in [0, 1]")
                    })?;
                vec![Some(a); trace.apps.len()]
            }
        };
        for q in &mut trace.arrivals {
            if let Some(Some(a)) = per_app.get(q.app) {
                q.min_accuracy = Some(q.min_accuracy.map_or(*a, |m| m.max(*a)));
            }
        }
    }
    if !(args.slack >= 1.0 && args.slack.is_finite()) {
        anyhow::bail!("--slack {} must be at least 1", args.slack);
    }
    let mut scaling = ScalingConfig::with_slack(args.slack);
    if let Some(d) = args.scale_down {
        scaling.scale_down = d;
    }
    if let Some(h) = args.scale_in_hold_secs {
        if !(h >= 0.0 && h.is_finite()) {
            anyhow::bail!("--scale-in-hold-secs {h} must be a number of seconds, at least 0");
        }
        scaling.scale_in_hold_ms = h * 1000.0;
    }
    if let Some(h) = args.peak_hold_secs {
        if !(h >= 0.0 && h.is_finite()) {
            anyhow::bail!("--peak-hold-secs {h} must be a number of seconds, at least 0");
        }
        scaling.peak_hold_ms = h * 1000.0;
    }
    if scaling.scale_down <= scaling.slack {
        anyhow::bail!(
            "--scale-down {} must be above --slack {}",
            scaling.scale_down,
            scaling.slack
        );
    }
    let mut policies = Vec::new();
    for name in &args.policy {
        let p = by_name(name, scaling).with_context(|| {
            format!(
                "unknown policy '{name}'; expected one of {}",
                NAMES.join(", ")
            )
        })?;
        policies.push(p);
    }
    eprintln!(
        "SIMULATED: {} queries of {} application(s) over {:.0} s (mean {:.1} queries/s), {} variants, {} CPU + {} GPU workers",
        trace.arrivals.len(),
        trace.apps.len(),
        trace.duration_ms() / 1e3,
        trace.mean_rate(),
        variants.len(),
        cluster.cpu_workers,
        cluster.gpu_workers
    );
    let mut reports: Vec<PolicyReport> = Vec::new();
    for p in &mut policies {
        let bar = indicatif::ProgressBar::new(trace.arrivals.len() as u64).with_style(
            indicatif::ProgressStyle::with_template(
                "{msg:>14} [{bar:30}] {pos}/{len} queries ({per_sec}, {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(p.name());
        let r = simulate(
            &trace,
            variants.clone(),
            &cluster,
            p.as_mut(),
            &mut |done, _| bar.set_position(done as u64),
        )?;
        bar.finish_and_clear();
        reports.push(r);
    }
    println!(
        "{:<14} {:>9} {:>10} {:>9} {:>12} {:>9} {:>8} {:>8}",
        "policy", "queries", "attained", "p99_ms", "cost_usd", "accuracy", "dropped", "actions"
    );
    for r in &reports {
        let s = &r.summary;
        println!(
            "{:<14} {:>9} {:>9.2}% {:>9} {:>12.4} {:>9} {:>8} {:>8}",
            r.policy,
            s.queries,
            s.slo_attainment * 100.0,
            s.p99_ms.map_or("-".into(), |v| format!("{v:.1}")),
            s.cost_usd,
            s.mean_accuracy.map_or("-".into(), |v| format!("{v:.4}")),
            s.dropped,
            s.actions
        );
        let missed: u64 = r.misses_by_cause.values().sum();
        if missed > 0 {
            let causes: Vec<String> = r
                .misses_by_cause
                .iter()
                .map(|(cause, n)| format!("{cause} {n}"))
                .collect();
            println!("{:<14}   {missed} misses: {}", "", causes.join(", "));
        }
        for j in &r.jobs {
            println!(
                "{:<14}   job of {} rows for {}: {} done, {}, paused {:.1} s",
                "",
                j.rows,
                j.app,
                j.done_rows,
                j.finished_s
                    .map_or("not finished".into(), |f| format!("finished at {f:.1} s")),
                j.paused_s
            );
        }
    }
    if let Some(path) = &args.out {
        let doc = serde_json::json!({
            "simulated": true,
            "trace": {
                "queries": trace.arrivals.len(),
                "apps": trace.apps,
                "duration_s": trace.duration_ms() / 1e3,
            },
            "policies": reports,
        });
        std::fs::write(path, serde_json::to_vec_pretty(&doc)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        std::fs::write(path, plot(&reports))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.series {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        );
        series_csv(&reports, &mut f)?;
    }
    Ok(())
}

/// Cost, SLO attainment and accuracy over time, one line per policy, as one standalone SVG
/// document (drawn by the dashboard's what-if plot).
fn plot(reports: &[PolicyReport]) -> String {
    let lines: Vec<PolicyLines> = reports
        .iter()
        .map(|r| PolicyLines {
            policy: r.policy.clone(),
            cost_per_s: r.series.iter().map(|p| p.cost_per_s).collect(),
            slo_attainment: r.series.iter().map(|p| p.slo_attainment).collect(),
            mean_accuracy: r.series.iter().map(|p| p.mean_accuracy).collect(),
        })
        .collect();
    plot_svg(&lines)
}
