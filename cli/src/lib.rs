//! `infaas` commands that talk to a running server: login, models, apps, pipelines, infer,
//! jobs, traces.

mod http;
pub mod infer;
pub mod jobs;
pub mod loadgen;
mod models;
pub mod pipelines;
pub mod traces;

use clap::{Args, Subcommand};

pub use http::Client;
pub use jobs::JobsCommand;
pub use pipelines::PipelinesCommand;
pub use traces::TracesCommand;

/// Where the server is and how to authenticate; flags win over the environment, which
/// wins over the file written by `infaas login`. The flags of the commands that talk to a
/// server (and of their subcommands: `global` within the command).
#[derive(Debug, Clone, Default, Args)]
pub struct Connection {
    /// URL of the infaas server.
    #[arg(long, env = "INFAAS_SERVER", global = true)]
    pub server: Option<String>,
    /// API key (else the one saved by `infaas login`).
    #[arg(long, env = "INFAAS_API_KEY", global = true, hide_env_values = true)]
    pub api_key: Option<String>,
}

/// The flags of the commands that talk to a server and print what it answers.
#[derive(Debug, Clone, Default, Args)]
pub struct ClientOpts {
    #[command(flatten)]
    pub connection: Connection,
    /// Print JSON instead of tables.
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// Registers a model with its validation set and waits (with a progress bar) until its
    /// variants are generated and profiled.
    Register {
        /// Model name, unique in the tenant.
        #[arg(long)]
        name: String,
        /// Application the model serves (created when new).
        #[arg(long)]
        app: String,
        /// The ONNX file.
        #[arg(long)]
        model: std::path::PathBuf,
        /// NPZ validation set: `x` (or `x.<input>` per input) and integer labels `y`.
        #[arg(long)]
        validation: std::path::PathBuf,
        #[arg(long, default_value = "classification")]
        task: String,
        /// Output holding class scores or labels (automatic when absent).
        #[arg(long)]
        output: Option<String>,
        /// Largest batch the model may be given.
        #[arg(long)]
        max_batch: Option<usize>,
        /// Class names by label, comma-separated.
        #[arg(long)]
        label_names: Option<String>,
        /// Return once accepted instead of waiting until ready.
        #[arg(long)]
        no_wait: bool,
    },
    /// Lists models with their status and best accuracy.
    List,
    /// Shows a model with its variants and profiles.
    Show { name: String },
    /// Deletes a model, its variants and files.
    Delete { name: String },
}

#[derive(Debug, Subcommand)]
pub enum AppsCommand {
    /// Lists applications and their models.
    List,
    /// Shows an application's models.
    Show { app: String },
}

/// Saved credentials of `infaas login`.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    pub server: String,
    pub api_key: String,
}

pub fn credentials_path() -> Option<std::path::PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".config"))
        })?;
    Some(base.join("infaas").join("credentials.json"))
}

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:8080";

/// `infaas login`: checks the key against the server and saves it (mode 0600).
pub async fn login(opts: &Connection) -> anyhow::Result<()> {
    let server = opts
        .server
        .clone()
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    let api_key = match &opts.api_key {
        Some(k) => k.clone(),
        None => {
            eprint!("API key: ");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim().to_string()
        }
    };
    let client = Client::connect(&server, &api_key).await?;
    let me: serde_json::Value = client.get_json("/v1/me").await?;
    let path = credentials_path()
        .ok_or_else(|| anyhow::anyhow!("cannot find a home directory to save credentials in"))?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let saved = serde_json::to_vec_pretty(&Saved {
        server: server.clone(),
        api_key,
    })?;
    write_private(&path, &saved)?;
    eprintln!(
        "logged in to {server} as tenant '{}' ({}); credentials saved in {}",
        me["tenant"].as_str().unwrap_or("?"),
        me["role"].as_str().unwrap_or("?"),
        path.display()
    );
    Ok(())
}

fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    opts.open(path)?.write_all(bytes)
}

/// Connects with flags / environment / saved credentials.
pub async fn connect(opts: &Connection) -> anyhow::Result<Client> {
    let saved: Option<Saved> = credentials_path()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice(&b).ok());
    let server = opts
        .server
        .clone()
        .or_else(|| saved.as_ref().map(|s| s.server.clone()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    let key = opts
        .api_key
        .clone()
        .or_else(|| saved.map(|s| s.api_key))
        .ok_or_else(|| {
            anyhow::anyhow!("no API key: pass --api-key, set INFAAS_API_KEY or run `infaas login`")
        })?;
    Client::connect(&server, &key).await
}

pub async fn run_models(opts: &ClientOpts, cmd: ModelsCommand) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    models::run(&client, opts.json, cmd).await
}

pub async fn run_apps(opts: &ClientOpts, cmd: AppsCommand) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    models::run_apps(&client, opts.json, cmd).await
}

/// `infaas loadgen`: open-loop Poisson load against a running server.
pub async fn run_loadgen(opts: &ClientOpts, args: loadgen::LoadgenArgs) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    let r = loadgen::run(&client, &args).await?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        println!(
            "sent {} in {:.1} s ({} ok, errors {:?})",
            r.sent, r.seconds, r.ok, r.errors
        );
        println!(
            "throughput {:.1}/s  p50 {:.3} ms  p99 {:.3} ms  max {:.3} ms",
            r.throughput_per_s, r.p50_ms, r.p99_ms, r.max_ms
        );
        if let (Some(p50), Some(p99)) = (r.server_p50_ms, r.server_p99_ms) {
            println!("measured by the server: p50 {p50:.3} ms  p99 {p99:.3} ms");
        }
        if let Some(a) = r.slo_attainment {
            println!("SLO attainment {:.2}%", a * 100.0);
        }
        for (v, n) in &r.variants {
            println!("  {n:>7}  {v}");
        }
    }
    Ok(())
}

/// `infaas infer`: one query; prints the outputs and how it was served.
pub async fn run_infer(opts: &ClientOpts, args: infer::InferArgs) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    let (raw, answer) = infer::run(&client, &args).await?;
    if opts.json {
        println!("{}", serde_json::to_string_pretty(&raw)?);
    } else {
        infer::print(&answer);
    }
    Ok(())
}

pub async fn run_jobs(opts: &ClientOpts, cmd: JobsCommand) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    jobs::run(&client, opts.json, cmd).await
}

pub async fn run_pipelines(opts: &ClientOpts, cmd: PipelinesCommand) -> anyhow::Result<()> {
    let client = connect(&opts.connection).await?;
    pipelines::run(&client, opts.json, cmd).await
}

pub async fn run_traces(opts: &Connection, cmd: TracesCommand) -> anyhow::Result<()> {
    let client = connect(opts).await?;
    traces::run(&client, cmd).await
}
