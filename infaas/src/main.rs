//! `infaas`: the controller, workers, operator commands and the OpenAPI document.

use clap::{Parser, Subcommand};
use infaas_control::config::{Config, Overrides};

mod admin;
mod sim;
mod sim_overload;
mod sim_pipelines;
mod telemetry;
mod worker;

/// jemalloc rather than the system allocator: under load, buffers allocated by one runtime
/// thread and freed by another made glibc's allocator take its arena locks (about 0.8 futex
/// calls per query at 16 connections); see docs/benchmarks.md, "The allocator".
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(name = "infaas", version, about = "Model-less inference serving")]
struct Cli {
    #[command(flatten)]
    overrides: Overrides,
    #[command(flatten)]
    client: infaas_cli::ClientOpts,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs the controller (HTTP API) with an embedded worker.
    Serve,
    /// Runs a worker process that serves variants for a controller.
    Worker {
        /// URL of the controller, e.g. http://10.0.0.1:8080.
        #[arg(long, env = "INFAAS_CONTROLLER")]
        controller: String,
    },
    /// Operator commands on the configured database (no server needed).
    Admin {
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Prints the OpenAPI document of the HTTP API.
    Openapi,
    /// Checks an API key against a server and saves it for the other commands.
    Login,
    /// Registers, lists, shows and deletes models (talks to a server).
    Models {
        #[command(subcommand)]
        command: infaas_cli::ModelsCommand,
    },
    /// Open-loop load generator: Poisson arrivals at a rate; reports p50/p99, throughput and
    /// SLO attainment (talks to a server).
    Loadgen(infaas_cli::loadgen::LoadgenArgs),
    /// Pipelines of models under an end-to-end SLO: create, list, show, delete, plan, infer
    /// (talks to a server).
    Pipelines {
        #[command(subcommand)]
        command: infaas_cli::PipelinesCommand,
    },
    /// Lists and shows applications (talks to a server).
    Apps {
        #[command(subcommand)]
        command: infaas_cli::AppsCommand,
    },
    /// Sends one query (model-less with --app, or to --model) and shows the outputs, the
    /// variant chosen and why (talks to a server).
    Infer(infaas_cli::infer::InferArgs),
    /// Replays a trace on a SIMULATED cluster under one or more policies and reports cost,
    /// SLO attainment and accuracy (no server, no model runs).
    Sim(sim::SimArgs),
    /// Plans pipelines of models (InferLine's planner, model-less) on a SIMULATED cluster and
    /// replays a trace on them with the tuner and on baselines; reports cost and SLO attainment.
    SimPipelines(sim_pipelines::SimPipelinesArgs),
    /// Loki's accuracy scaling and early dropping against InferLine and per-task accuracy
    /// scaling on a SIMULATED fixed cluster under overload: capacity, SLO violations, accuracy.
    SimOverload(sim_overload::SimOverloadArgs),
    /// Offline jobs: submit, list, status, wait, cancel, results (talks to a server).
    Jobs {
        #[command(subcommand)]
        command: infaas_cli::JobsCommand,
    },
    /// The tenant's recorded traffic as a CSV trace for `sim --trace` (talks to a server).
    Traces {
        #[command(subcommand)]
        command: infaas_cli::TracesCommand,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let config = match Config::load(&cli.overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    if let Command::Openapi = cli.command {
        print!("{}", infaas_api::openapi::document());
        return std::process::ExitCode::SUCCESS;
    }
    let server_side = matches!(
        cli.command,
        Command::Serve | Command::Worker { .. } | Command::Admin { .. }
    );
    if server_side {
        telemetry::init(config.log_format, &config.log_level);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve => infaas_api::server::serve(config).await,
            Command::Admin { command } => admin::run(&config, command).await,
            Command::Worker { controller } => worker::run(config, controller).await,
            Command::Openapi => Ok(()),
            // CPU-bound and single-threaded: it never awaits.
            Command::Sim(args) => sim::run(args),
            Command::SimPipelines(args) => sim_pipelines::run(args),
            Command::SimOverload(args) => sim_overload::run(args),
            Command::Login => infaas_cli::login(&cli.client).await,
            Command::Models { command } => infaas_cli::run_models(&cli.client, command).await,
            Command::Loadgen(args) => infaas_cli::run_loadgen(&cli.client, args).await,
            Command::Apps { command } => infaas_cli::run_apps(&cli.client, command).await,
            Command::Pipelines { command } => infaas_cli::run_pipelines(&cli.client, command).await,
            Command::Infer(args) => infaas_cli::run_infer(&cli.client, args).await,
            Command::Jobs { command } => infaas_cli::run_jobs(&cli.client, command).await,
            Command::Traces { command } => infaas_cli::run_traces(&cli.client, command).await,
        }
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
