//! `infaas jobs ...`: offline jobs (submit, list, status, wait with a progress bar, cancel,
//! results).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{ArgGroup, Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};
use infaas_protocol::v1::{JobList, JobRequest, JobView};
use reqwest::multipart::{Form, Part};
use serde_json::Value;

use crate::Client;

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Submits a job over files uploaded with it (--file) or already in the tenant's file
    /// area (--input-path).
    Submit(SubmitArgs),
    /// Lists the tenant's jobs, newest first.
    List,
    /// Shows a job: state, items done, variant, ETA.
    Status { id: String },
    /// Follows a job with a progress bar until it ends; exits non-zero unless it succeeded.
    Wait { id: String },
    /// Cancels a job that has not ended.
    Cancel { id: String },
    /// Writes the job's outputs so far (JSON lines, in item order) to stdout or a file.
    Results {
        id: String,
        /// Write to this file instead of stdout.
        #[arg(short = 'o', long)]
        output: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("target").required(true).args(["app", "model", "pipeline"])))]
#[command(group(ArgGroup::new("inputs").required(true).args(["input_path", "file"])))]
pub struct SubmitArgs {
    /// Application whose variants may run the job (model-less).
    #[arg(long)]
    pub app: Option<String>,
    /// Smallest acceptable accuracy (application jobs).
    #[arg(long, requires = "app")]
    pub min_accuracy: Option<f64>,
    /// One registered model.
    #[arg(long)]
    pub model: Option<String>,
    /// A pipeline: every item goes through it.
    #[arg(long)]
    pub pipeline: Option<String>,
    /// A folder of `.npz` / `.jsonl` objects, or one object, in the tenant's file area.
    #[arg(long)]
    pub input_path: Option<String>,
    /// Input files (`.npz`, `.jsonl`) uploaded with the job; repeatable.
    #[arg(long)]
    pub file: Vec<PathBuf>,
    /// Where outputs go in the file area (default `job-outputs/<uuid>`).
    #[arg(long)]
    pub output_path: Option<String>,
    /// URL called (POST, JSON) when the job ends.
    #[arg(long)]
    pub webhook_url: Option<String>,
    /// Follow the job with a progress bar until it ends.
    #[arg(long)]
    pub wait: bool,
}

/// A job as the server answers it (`--json` prints the server's JSON as it is).
fn parse_job(v: &Value) -> anyhow::Result<JobView> {
    serde_json::from_value(v.clone()).context("the server's answer is not a job")
}

/// What the job runs on.
fn target(j: &JobView) -> String {
    match (&j.app, &j.model, &j.pipeline) {
        (Some(app), _, _) => format!("app {app}"),
        (None, Some(m), _) => format!("model {m}"),
        (None, None, Some(p)) => format!("pipeline {p}"),
        (None, None, None) => "-".into(),
    }
}

fn ended(j: &JobView) -> bool {
    matches!(j.state.as_str(), "succeeded" | "failed" | "cancelled")
}

fn opt<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref().map_or_else(|| "-".into(), |v| v.to_string())
}

fn print_job(j: &JobView) {
    println!("job        {}", j.id);
    println!("state      {}", j.state);
    println!("target     {}", target(j));
    println!("variant    {}", opt(&j.variant));
    println!(
        "progress   {}/{} items ({:.1}%)",
        j.items_done,
        j.items_total,
        j.progress * 100.0
    );
    println!(
        "rate       {} items/s, ETA {} s",
        j.items_per_s
            .map_or_else(|| "-".into(), |r| format!("{r:.1}")),
        j.eta_s.map_or_else(|| "-".into(), |e| format!("{e:.1}"))
    );
    println!("input      {}", j.input_path);
    println!("output     {}", j.output_path);
    if let Some(why) = &j.paused_reason {
        println!("paused     {why}");
    }
    if let Some(e) = &j.error {
        println!("error      {e}");
    }
}

async fn file_part(path: &std::path::Path) -> anyhow::Result<Part> {
    let bytes = tokio::fs::read(path)
        .await
        .with_context(|| format!("cannot read {}", path.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .with_context(|| format!("{} has no file name", path.display()))?;
    Ok(Part::bytes(bytes).file_name(name))
}

async fn submit(client: &Client, a: &SubmitArgs) -> anyhow::Result<Value> {
    let req = client.request(reqwest::Method::POST, "/v1/jobs");
    let req = if a.file.is_empty() {
        req.json(&JobRequest {
            input_path: a.input_path.clone().unwrap_or_default(),
            output_path: a.output_path.clone(),
            app: a.app.clone(),
            model: a.model.clone(),
            pipeline: a.pipeline.clone(),
            min_accuracy: a.min_accuracy,
            webhook_url: a.webhook_url.clone(),
        })
    } else {
        let mut form = Form::new();
        let fields = [
            ("app", a.app.clone()),
            ("model", a.model.clone()),
            ("pipeline", a.pipeline.clone()),
            ("min_accuracy", a.min_accuracy.map(|m| m.to_string())),
            ("output_path", a.output_path.clone()),
            ("webhook_url", a.webhook_url.clone()),
        ];
        for (k, v) in fields {
            if let Some(v) = v {
                form = form.text(k, v);
            }
        }
        for f in &a.file {
            form = form.part("input", file_part(f).await?);
        }
        req.multipart(form)
    };
    client.send_json(req).await
}

/// Polls the job with a progress bar (on stderr) until it ends; the last answer.
async fn wait(client: &Client, id: &str) -> anyhow::Result<Value> {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{spinner} {prefix:<9} [{bar:40}] {pos}/{len} items {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let path = format!("/v1/jobs/{id}");
    let last = loop {
        let raw: Value = client.get_json(&path).await?;
        let j = parse_job(&raw)?;
        bar.set_length(j.items_total.max(0) as u64);
        bar.set_position(j.items_done.max(0) as u64);
        bar.set_prefix(j.state.clone());
        bar.set_message(match (&j.paused_reason, j.eta_s) {
            (Some(why), _) => format!("paused: {why}"),
            (None, Some(eta)) if !ended(&j) => format!("ETA {eta:.0} s"),
            _ => String::new(),
        });
        if ended(&j) {
            break raw;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    bar.finish_and_clear();
    Ok(last)
}

/// Prints the job and fails unless it succeeded.
fn conclude(json: bool, raw: &Value) -> anyhow::Result<()> {
    let j = parse_job(raw)?;
    emit(json, raw, &j)?;
    match j.state.as_str() {
        "succeeded" => Ok(()),
        other => anyhow::bail!(
            "job {} {other}{}",
            j.id,
            j.error.map(|e| format!(": {e}")).unwrap_or_default()
        ),
    }
}

fn emit(json: bool, raw: &Value, j: &JobView) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(raw)?);
    } else {
        print_job(j);
    }
    Ok(())
}

pub async fn run(client: &Client, json: bool, cmd: JobsCommand) -> anyhow::Result<()> {
    match cmd {
        JobsCommand::Submit(a) => {
            let raw = submit(client, &a).await?;
            let j = parse_job(&raw)?;
            eprintln!(
                "submitted job {} ({} items, {})",
                j.id,
                j.items_total,
                target(&j)
            );
            if !a.wait {
                return emit(json, &raw, &j);
            }
            let last = wait(client, &j.id).await?;
            conclude(json, &last)
        }
        JobsCommand::List => {
            let raw: Value = client.get_json("/v1/jobs").await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&raw)?);
                return Ok(());
            }
            let JobList { jobs } =
                serde_json::from_value(raw).context("the server's answer is not a job list")?;
            println!(
                "{:<36} {:<10} {:<24} {:>16} {:>7}  VARIANT",
                "ID", "STATE", "TARGET", "ITEMS", "DONE"
            );
            for j in &jobs {
                println!(
                    "{:<36} {:<10} {:<24} {:>16} {:>6.1}%  {}",
                    j.id,
                    j.state,
                    target(j),
                    format!("{}/{}", j.items_done, j.items_total),
                    j.progress * 100.0,
                    opt(&j.variant)
                );
            }
            Ok(())
        }
        JobsCommand::Status { id } => {
            let raw: Value = client.get_json(&format!("/v1/jobs/{id}")).await?;
            emit(json, &raw, &parse_job(&raw)?)
        }
        JobsCommand::Wait { id } => {
            let last = wait(client, &id).await?;
            conclude(json, &last)
        }
        JobsCommand::Cancel { id } => {
            let raw: Value = client
                .send_json(client.request(reqwest::Method::POST, &format!("/v1/jobs/{id}/cancel")))
                .await?;
            emit(json, &raw, &parse_job(&raw)?)
        }
        JobsCommand::Results { id, output } => {
            let resp = client
                .send(client.request(reqwest::Method::GET, &format!("/v1/jobs/{id}/results")))
                .await?;
            let complete = resp
                .headers()
                .get("x-infaas-complete")
                .is_some_and(|v| v == "true");
            let mut resp = resp;
            let mut out: Box<dyn std::io::Write> = match &output {
                Some(path) => Box::new(std::io::BufWriter::new(
                    std::fs::File::create(path)
                        .with_context(|| format!("creating {}", path.display()))?,
                )),
                None => Box::new(std::io::stdout().lock()),
            };
            let mut lines = 0usize;
            let mut written = Ok(());
            while let Some(chunk) = resp.chunk().await.context("reading the job's results")? {
                lines += chunk.iter().filter(|&&b| b == b'\n').count();
                written = out.write_all(&chunk);
                if written.is_err() {
                    break;
                }
            }
            match written.and_then(|()| out.flush()) {
                // A reader that stopped early (`| head`) is not an error.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
                other => other.context("writing the results")?,
            }
            drop(out);
            if let Some(path) = &output {
                eprintln!("wrote {lines} result lines to {}", path.display());
            }
            if !complete {
                eprintln!("note: job {id} has not finished; these are the results so far");
            }
            Ok(())
        }
    }
}
