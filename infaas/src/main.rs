//! `infaas`: the controller, workers, operator commands and the OpenAPI document.

use cli::Command;
use infaas_control::config::Config;

mod admin;
mod cli;
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

fn main() -> std::process::ExitCode {
    let cli = cli::parse();
    // The server's configuration, for the commands that read it.
    let overrides = match &cli.command {
        Command::Serve(s) | Command::Worker { server: s, .. } => Some(s.overrides.clone()),
        Command::Admin { config, .. } => Some(config.overrides()),
        _ => None,
    };
    let config = match overrides.as_ref().map(Config::load).transpose() {
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
    if let Some(config) = &config {
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
        match (cli.command, config) {
            (Command::Serve(_), Some(config)) => infaas_api::server::serve(config).await,
            (Command::Admin { command, .. }, Some(config)) => admin::run(&config, command).await,
            (Command::Worker { controller, .. }, Some(config)) => {
                worker::run(config, controller).await
            }
            (Command::Serve(_) | Command::Admin { .. } | Command::Worker { .. }, None) => {
                unreachable!("the server's configuration is loaded for these commands")
            }
            (Command::Openapi, _) => Ok(()),
            // CPU-bound and single-threaded: it never awaits.
            (Command::Sim(args), _) => sim::run(args),
            (Command::SimPipelines(args), _) => sim_pipelines::run(args),
            (Command::SimOverload(args), _) => sim_overload::run(args),
            (Command::Login(connection), _) => infaas_cli::login(&connection).await,
            (Command::Models { client, command }, _) => {
                infaas_cli::run_models(&client, command).await
            }
            (Command::Loadgen { client, args }, _) => infaas_cli::run_loadgen(&client, args).await,
            (Command::Apps { client, command }, _) => infaas_cli::run_apps(&client, command).await,
            (Command::Pipelines { client, command }, _) => {
                infaas_cli::run_pipelines(&client, command).await
            }
            (Command::Infer { client, args }, _) => infaas_cli::run_infer(&client, args).await,
            (Command::Jobs { client, command }, _) => infaas_cli::run_jobs(&client, command).await,
            (
                Command::Traces {
                    connection,
                    command,
                },
                _,
            ) => infaas_cli::run_traces(&connection, command).await,
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
