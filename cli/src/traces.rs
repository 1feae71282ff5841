//! `infaas traces recorded`: the tenant's recorded traffic as a trace in the simulator's CSV
//! format, for `infaas sim --trace FILE` or a what-if run's `csv` trace.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand};

use crate::http::Client;

#[derive(Debug, Subcommand)]
pub enum TracesCommand {
    /// Downloads the queries the platform recorded (per second, spread evenly inside it) as
    /// a CSV trace `time_ms,app,slo_ms,min_accuracy`.
    Recorded(RecordedArgs),
}

#[derive(Debug, Args)]
pub struct RecordedArgs {
    /// One application (default: every application of the tenant).
    #[arg(long)]
    pub app: Option<String>,
    /// How many past minutes (the server keeps `traffic_horizon_minutes`, default 60).
    #[arg(long, default_value_t = 60)]
    pub minutes: u64,
    /// Where the CSV goes (default: standard output).
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

pub async fn run(client: &Client, cmd: TracesCommand) -> anyhow::Result<()> {
    match cmd {
        TracesCommand::Recorded(a) => {
            let mut query = vec![("minutes", a.minutes.to_string())];
            if let Some(app) = &a.app {
                query.push(("app", app.clone()));
            }
            let req = client
                .request(reqwest::Method::GET, "/v1/traces/recorded")
                .query(&query);
            let csv = client.send(req).await?.text().await?;
            let queries = csv.lines().count().saturating_sub(1);
            match &a.out {
                Some(path) => {
                    std::fs::write(path, &csv)
                        .with_context(|| format!("writing {}", path.display()))?;
                    eprintln!("{queries} queries written to {}", path.display());
                }
                None => print!("{csv}"),
            }
            Ok(())
        }
    }
}
