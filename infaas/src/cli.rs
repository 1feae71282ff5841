//! The command line of `infaas`. Each command takes the flags it reads and no others: the
//! server's configuration flags (`--database-url`, `--grpc-listen`, ...) belong to `serve` and
//! `worker`, the database's to `admin`, the client's (`--server`, `--api-key`, `--json`) to
//! the commands that talk to a server; `sim`, `sim-pipelines`, `sim-overload` and `openapi`
//! take none of them. As when those flags were global, they may also stand before the
//! command's name (`infaas --data-dir D admin list-tenants`): [`args`] moves them after it.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use infaas_cli::{ClientOpts, Connection};
use infaas_control::config::Overrides;

use crate::{admin, sim, sim_overload, sim_pipelines};

#[derive(Parser)]
#[command(
    name = "infaas",
    version,
    about = "Model-less inference serving",
    after_help = "Each command lists its own flags: `infaas <command> --help`."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// The server's configuration (file, environment, flags): what `serve` and `worker` read.
#[derive(Args)]
pub struct ServerArgs {
    #[command(flatten)]
    pub overrides: Overrides,
}

#[derive(Subcommand)]
pub enum Command {
    /// Runs the controller (HTTP API) with an embedded worker.
    Serve(ServerArgs),
    /// Runs a worker process that serves variants for a controller.
    Worker {
        /// URL of the controller, e.g. http://10.0.0.1:8080.
        #[arg(long, env = "INFAAS_CONTROLLER")]
        controller: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Operator commands on the configured database (no server needed).
    Admin {
        #[command(flatten)]
        config: admin::AdminArgs,
        #[command(subcommand)]
        command: admin::AdminCommand,
    },
    /// Prints the OpenAPI document of the HTTP API.
    Openapi,
    /// Checks an API key against a server and saves it for the other commands.
    Login(Connection),
    /// Registers, lists, shows and deletes models (talks to a server).
    Models {
        #[command(flatten)]
        client: ClientOpts,
        #[command(subcommand)]
        command: infaas_cli::ModelsCommand,
    },
    /// Open-loop load generator: Poisson arrivals at a rate; reports p50/p99, throughput and
    /// SLO attainment (talks to a server).
    Loadgen {
        #[command(flatten)]
        client: ClientOpts,
        #[command(flatten)]
        args: infaas_cli::loadgen::LoadgenArgs,
    },
    /// Pipelines of models under an end-to-end SLO: create, list, show, delete, plan, infer
    /// (talks to a server).
    Pipelines {
        #[command(flatten)]
        client: ClientOpts,
        #[command(subcommand)]
        command: infaas_cli::PipelinesCommand,
    },
    /// Lists and shows applications (talks to a server).
    Apps {
        #[command(flatten)]
        client: ClientOpts,
        #[command(subcommand)]
        command: infaas_cli::AppsCommand,
    },
    /// Sends one query (model-less with --app, or to --model) and shows the outputs, the
    /// variant chosen and why (talks to a server).
    Infer {
        #[command(flatten)]
        client: ClientOpts,
        #[command(flatten)]
        args: infaas_cli::infer::InferArgs,
    },
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
        #[command(flatten)]
        client: ClientOpts,
        #[command(subcommand)]
        command: infaas_cli::JobsCommand,
    },
    /// The tenant's recorded traffic as a CSV trace for `sim --trace` (talks to a server).
    Traces {
        #[command(flatten)]
        connection: Connection,
        #[command(subcommand)]
        command: infaas_cli::TracesCommand,
    },
}

/// Parses the process's arguments (exits with clap's message on an error or for `--help`).
pub fn parse() -> Cli {
    parse_from(std::env::args_os())
}

pub fn parse_from(args: impl IntoIterator<Item = OsString>) -> Cli {
    match try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    }
}

pub fn try_parse_from(args: impl IntoIterator<Item = OsString>) -> Result<Cli, clap::Error> {
    let args = hoist(args.into_iter().collect());
    let mut matches = Cli::command().try_get_matches_from(args)?;
    Cli::from_arg_matches_mut(&mut matches)
}

/// The long flags that may stand before a command's name, with whether each takes a value:
/// the server's configuration flags and the client's (global flags of `infaas` until they
/// moved to the commands that read them).
fn leading_flags() -> BTreeMap<String, bool> {
    let probe = ClientOpts::augment_args(Overrides::augment_args(clap::Command::new("probe")));
    probe
        .get_arguments()
        .filter_map(|a| {
            a.get_long()
                .map(|l| (l.to_string(), a.get_action().takes_values()))
        })
        .collect()
}

/// Moves the leading flags before the command's name to just after it:
/// `infaas --data-dir D admin list-tenants` is `infaas admin --data-dir D list-tenants`.
/// Arguments without such a prefix, or whose first other word is not a command, are left as
/// they are (clap then says what is wrong). A flag the command does not take is refused by
/// clap under that command's name.
fn hoist(args: Vec<OsString>) -> Vec<OsString> {
    let flags = leading_flags();
    let mut i = 1;
    while let Some(word) = args.get(i).and_then(|a| a.to_str()) {
        let Some(flag) = word.strip_prefix("--") else {
            break;
        };
        let (name, inline_value) = match flag.split_once('=') {
            Some((name, _)) => (name, true),
            None => (flag, false),
        };
        match flags.get(name) {
            Some(&takes_value) => i += if takes_value && !inline_value { 2 } else { 1 },
            None => break,
        }
    }
    let commands: BTreeSet<String> = Cli::command()
        .get_subcommands()
        .flat_map(|c| {
            std::iter::once(c.get_name().to_string()).chain(c.get_all_aliases().map(String::from))
        })
        .collect();
    let is_command = args
        .get(i)
        .and_then(|a| a.to_str())
        .is_some_and(|w| commands.contains(w));
    if i == 1 || !is_command {
        return args;
    }
    let mut out = Vec::with_capacity(args.len());
    out.push(args[0].clone());
    out.push(args[i].clone());
    out.extend_from_slice(&args[1..i]);
    out.extend_from_slice(&args[i + 1..]);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        try_parse_from(args.iter().map(OsString::from))
    }

    /// Every command and subcommand, as the words that name it (`["admin", "create-tenant"]`).
    fn commands(cmd: &clap::Command, path: Vec<String>, out: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let mut p = path.clone();
            p.push(sub.get_name().to_string());
            out.push(p.clone());
            commands(sub, p, out);
        }
    }

    /// What `infaas <words> --help` prints.
    fn help(words: &[String]) -> String {
        let mut args = vec!["infaas".to_string()];
        args.extend(words.iter().cloned());
        args.push("--help".into());
        let err = Cli::command()
            .try_get_matches_from(&args)
            .err()
            .unwrap_or_else(|| panic!("{args:?} did not print help"));
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
        err.render().to_string()
    }

    fn env_names<T: Args>() -> Vec<String> {
        T::augment_args(clap::Command::new("probe"))
            .get_arguments()
            .filter_map(|a| a.get_env().map(|e| e.to_string_lossy().into_owned()))
            .collect()
    }

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    /// Each command's help lists only its own flags: the server's configuration flags only in
    /// `serve` and `worker` (and the database's in `admin`), the client's only in the commands
    /// that talk to a server. Flags are told apart by the variable each reads (a simulator
    /// may have a flag of the same name, e.g. `sim --scale-in-hold-secs`).
    #[test]
    fn each_command_lists_only_the_flags_it_reads() {
        let server_env = env_names::<Overrides>();
        let admin_env = env_names::<admin::AdminArgs>();
        assert!(admin_env.iter().all(|e| server_env.contains(e)));
        let client_env = env_names::<Connection>();
        let mut all = Vec::new();
        commands(&Cli::command(), Vec::new(), &mut all);
        assert!(all.len() > 30, "{all:?}");
        let talks_to_a_server = [
            "login",
            "models",
            "loadgen",
            "pipelines",
            "apps",
            "infer",
            "jobs",
            "traces",
        ];
        for words in &all {
            let text = help(words);
            let top = words[0].as_str();
            let shows = |env: &str| text.contains(&format!("[env: {env}"));
            for env in &server_env {
                let belongs = matches!(top, "serve" | "worker")
                    || (top == "admin" && admin_env.contains(env));
                assert_eq!(
                    shows(env),
                    belongs,
                    "`infaas {} --help` {} the server flag reading {env}:\n{text}",
                    words.join(" "),
                    if belongs { "misses" } else { "lists" }
                );
            }
            let database_url = text.contains("--database-url");
            assert_eq!(
                database_url,
                matches!(top, "serve" | "worker" | "admin"),
                "`infaas {} --help` and --database-url:\n{text}",
                words.join(" ")
            );
            for env in &client_env {
                assert_eq!(
                    shows(env),
                    talks_to_a_server.contains(&top),
                    "`infaas {} --help` and the client flag reading {env}:\n{text}",
                    words.join(" ")
                );
            }
            let json = text.contains("--json");
            let reads_json = matches!(
                top,
                "models" | "loadgen" | "pipelines" | "apps" | "infer" | "jobs" | "sim-overload"
            );
            assert_eq!(
                json,
                reads_json,
                "`infaas {} --help` and --json:\n{text}",
                words.join(" ")
            );
        }
        // The top level lists the commands, not their flags.
        let top = Cli::command().render_long_help().to_string();
        assert!(
            !top.contains("--database-url") && !top.contains("--server"),
            "{top}"
        );
        assert!(
            top.contains("serve") && top.contains("sim-overload"),
            "{top}"
        );
    }

    #[test]
    fn flags_before_the_command_reach_it() {
        let cli = parse(&["infaas", "--data-dir", "/d", "admin", "list-tenants"]).unwrap();
        let Command::Admin { config, .. } = cli.command else {
            panic!("not admin")
        };
        assert_eq!(
            config.overrides().data_dir.as_deref(),
            Some(std::path::Path::new("/d"))
        );

        let cli = parse(&[
            "infaas",
            "--database-url=postgres://x",
            "--listen",
            "127.0.0.1:0",
            "serve",
            "--grpc-listen",
            "off",
        ])
        .unwrap();
        let Command::Serve(s) = cli.command else {
            panic!("not serve")
        };
        assert_eq!(s.overrides.database_url.as_deref(), Some("postgres://x"));
        assert!(s.overrides.listen.is_some() && s.overrides.grpc_listen.is_some());

        let cli = parse(&[
            "infaas",
            "--simulated-gpu-profile",
            "gpu.csv",
            "worker",
            "--controller",
            "http://c:8080",
        ])
        .unwrap();
        let Command::Worker { server, controller } = cli.command else {
            panic!("not worker")
        };
        assert_eq!(controller, "http://c:8080");
        assert_eq!(
            server.overrides.simulated_gpu_profile.as_deref(),
            Some("gpu.csv")
        );

        // The client's flags, before the command or after any of its words.
        for args in [
            &[
                "infaas", "--json", "--server", "http://s", "jobs", "wait", "j",
            ][..],
            &[
                "infaas", "jobs", "wait", "j", "--json", "--server", "http://s",
            ][..],
        ] {
            let cli = parse(args).unwrap();
            let Command::Jobs { client, .. } = cli.command else {
                panic!("not jobs")
            };
            assert!(client.json, "{args:?}");
            assert_eq!(client.connection.server.as_deref(), Some("http://s"));
        }
        let cli = parse(&[
            "infaas",
            "--server",
            "http://s",
            "--api-key",
            "k",
            "loadgen",
            "--app",
            "a",
            "--npz",
            "x.npz",
            "--json",
        ])
        .unwrap();
        assert!(matches!(cli.command, Command::Loadgen { ref client, .. } if client.json));
    }

    #[test]
    fn a_flag_the_command_does_not_read_is_refused() {
        for args in [
            &[
                "infaas",
                "--database-url",
                "postgres://x",
                "sim",
                "--generate",
                "x",
            ][..],
            &["infaas", "sim-overload", "--grpc-listen", "off"][..],
            &["infaas", "openapi", "--server", "http://s"][..],
            &["infaas", "models", "list", "--data-dir", "/d"][..],
            &["infaas", "admin", "--grpc-listen", "off", "list-tenants"][..],
        ] {
            let err = parse(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} parsed"));
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{args:?}"
            );
        }
    }
}
