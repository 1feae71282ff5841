//! `infaas pipelines ...`: register (JSON or YAML), list, show, delete, plan, infer.

use anyhow::Context;
use clap::Subcommand;
use infaas_protocol::v1::{
    InferRequest, PipelineInferResponse, PipelineList, PipelineSpec, PipelineValidation,
    PipelineView, PlanBody, PlanReport,
};
use serde_json::Value;

use crate::infer::parse_input;
use crate::Client;

#[derive(Debug, Subcommand)]
pub enum PipelinesCommand {
    /// Registers a pipeline from a JSON or YAML document (docs/pipelines.md).
    Create {
        /// The document.
        #[arg(short = 'f', long = "file")]
        file: std::path::PathBuf,
        /// A validation set (NPZ: the pipeline's inputs `x` or `x.<input>`, labels `y`) to
        /// upload with it; plans then measure end-to-end accuracy on it.
        #[arg(long)]
        validation: Option<std::path::PathBuf>,
        /// The output the validation labels grade (needed when the pipeline has several).
        #[arg(long, requires = "validation")]
        output: Option<String>,
    },
    /// Uploads (or replaces) a pipeline's validation set; `--remove` deletes it.
    Validation {
        name: String,
        /// The NPZ file.
        #[arg(required_unless_present = "remove", conflicts_with = "remove")]
        file: Option<std::path::PathBuf>,
        /// The output the labels grade (needed when the pipeline has several).
        #[arg(long)]
        output: Option<String>,
        #[arg(long)]
        remove: bool,
    },
    /// Lists pipelines with their SLO and plan.
    List,
    /// Shows a pipeline: its document and applied plan.
    Show { name: String },
    /// Deletes a pipeline (its applications and models stay).
    Delete { name: String },
    /// Plans a pipeline on a trace with InferLine's planner (SIMULATED estimator) and prints
    /// the plan; `--apply` provisions it.
    Plan {
        name: String,
        /// A workload generator for the planning trace, e.g. `poisson:rate=100,duration=600`
        /// (default: the pipeline's recorded arrivals).
        #[arg(long, conflicts_with = "trace")]
        generate: Option<String>,
        /// A planning trace in the documented CSV format (`time_ms,app,slo_ms,min_accuracy`).
        #[arg(long)]
        trace: Option<std::path::PathBuf>,
        /// Provision the plan and pin the nodes to its variants.
        #[arg(long)]
        apply: bool,
    },
    /// One query through the pipeline.
    Infer {
        name: String,
        /// End-to-end latency SLO override in milliseconds.
        #[arg(long)]
        latency_ms: Option<f64>,
        /// End-to-end accuracy floor override, a fraction in [0, 1].
        #[arg(long)]
        min_accuracy: Option<f64>,
        /// An input tensor, repeatable, as for `infaas infer`.
        #[arg(long = "input", required = true, value_name = "NAME=@FILE|JSON")]
        inputs: Vec<String>,
        /// Send only the first N rows of NPZ arrays.
        #[arg(long)]
        rows: Option<usize>,
    },
}

/// The server's answer as its wire type (`--json` prints the answer as it is).
fn typed<T: serde::de::DeserializeOwned>(v: &Value, what: &str) -> anyhow::Result<T> {
    serde_json::from_value(v.clone()).with_context(|| format!("the server's answer is not {what}"))
}

fn slo_text(spec: &PipelineSpec) -> String {
    let slo = &spec.slo;
    let mut parts = Vec::new();
    if let Some(l) = slo.latency_ms {
        parts.push(format!("p{} <= {l} ms", slo.percentile()));
    }
    if let Some(a) = slo.min_accuracy {
        parts.push(format!("accuracy >= {a}"));
    }
    if let Some(c) = slo.max_cost_per_hour {
        parts.push(format!("<= ${c}/h"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn print_plan(plan: &PlanReport) {
    println!(
        "{:<16} {:<36} {:>6} {:>9} {:>9}",
        "NODE", "VARIANT", "BATCH", "REPLICAS", "$/h"
    );
    for n in &plan.nodes {
        println!(
            "{:<16} {:<36} {:>6} {:>9} {:>9.4}",
            n.name, n.variant, n.max_batch, n.replicas, n.cost_per_hour,
        );
    }
    println!(
        "predicted p{} {:.2} ms (p99 {:.2} ms), attainment {:.2}%, accuracy {:.4} ({}), cost ${:.4}/h; planned in {:.0} ms over {} estimates",
        plan.percentile,
        plan.predicted_latency_ms,
        plan.predicted_p99_ms,
        plan.attainment * 100.0,
        plan.accuracy,
        plan.accuracy_source,
        plan.cost_per_hour,
        plan.planner_ms,
        plan.estimates,
    );
    for note in &plan.notes {
        println!("note: {note}");
    }
}

async fn upload_validation(
    client: &Client,
    json: bool,
    name: &str,
    file: &std::path::Path,
    output: Option<&str>,
) -> anyhow::Result<()> {
    let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
    let mut req = client
        .request(
            reqwest::Method::PUT,
            &format!("/v1/pipelines/{name}/validation"),
        )
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(bytes);
    if let Some(o) = output {
        req = req.query(&[("output", o)]);
    }
    let v: Value = client.send_json(req).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        let set: PipelineValidation = typed(&v, "a validation set")?;
        println!(
            "validation set of pipeline {name}: {} rows graded on output '{}'; plans measure end-to-end accuracy on it",
            set.rows, set.output
        );
    }
    Ok(())
}

pub async fn run(client: &Client, json: bool, cmd: PipelinesCommand) -> anyhow::Result<()> {
    let out: Value = match cmd {
        PipelinesCommand::Create {
            file,
            validation,
            output,
        } => {
            let body =
                std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
            let is_json = body.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
            let ct = if is_json {
                "application/json"
            } else {
                "application/yaml"
            };
            let v: Value = client
                .send_json(
                    client
                        .request(reqwest::Method::POST, "/v1/pipelines")
                        .header(reqwest::header::CONTENT_TYPE, ct)
                        .body(body),
                )
                .await?;
            let view: PipelineView = typed(&v, "a pipeline")?;
            if !json {
                println!(
                    "pipeline {} registered ({} nodes; SLO {})",
                    view.name,
                    view.spec.nodes.len(),
                    slo_text(&view.spec)
                );
            }
            match validation {
                Some(file) => {
                    upload_validation(client, json, &view.name, &file, output.as_deref()).await?;
                    return Ok(());
                }
                None if !json => return Ok(()),
                None => v,
            }
        }
        PipelinesCommand::Validation {
            name,
            file,
            output,
            remove,
        } => match file {
            Some(file) if !remove => {
                upload_validation(client, json, &name, &file, output.as_deref()).await?;
                return Ok(());
            }
            _ => {
                client
                    .delete(&format!("/v1/pipelines/{name}/validation"))
                    .await?;
                if !json {
                    println!("validation set of pipeline {name} removed");
                }
                return Ok(());
            }
        },
        PipelinesCommand::List => {
            let v: Value = client.get_json("/v1/pipelines").await?;
            if !json {
                let list: PipelineList = typed(&v, "a pipeline list")?;
                println!(
                    "{:<24} {:>6} {:<36} {:>9} {:>10}",
                    "PIPELINE", "NODES", "SLO", "PLANNED", "QUERIES/m"
                );
                for p in &list.pipelines {
                    println!(
                        "{:<24} {:>6} {:<36} {:>9} {:>10}",
                        p.name,
                        p.spec.nodes.len(),
                        slo_text(&p.spec),
                        if p.plan.is_none() { "no" } else { "yes" },
                        p.queries_last_minute
                    );
                }
                return Ok(());
            }
            v
        }
        PipelinesCommand::Show { name } => {
            let v: Value = client.get_json(&format!("/v1/pipelines/{name}")).await?;
            if !json {
                let view: PipelineView = typed(&v, "a pipeline")?;
                println!("pipeline  {}  (SLO {})", name, slo_text(&view.spec));
                println!("{}", serde_json::to_string_pretty(&view.spec.nodes)?);
                if let Some(set) = &view.validation {
                    println!(
                        "validation set: {} rows graded on output '{}'",
                        set.rows, set.output
                    );
                }
                if let Some(plan) = &view.plan {
                    println!();
                    print_plan(plan);
                }
                return Ok(());
            }
            v
        }
        PipelinesCommand::Delete { name } => {
            client.delete(&format!("/v1/pipelines/{name}")).await?;
            if !json {
                println!("pipeline {name} deleted");
            }
            return Ok(());
        }
        PipelinesCommand::Plan {
            name,
            generate,
            trace,
            apply,
        } => {
            let trace_csv = match trace {
                Some(t) => Some(
                    std::fs::read_to_string(&t)
                        .with_context(|| format!("cannot read {}", t.display()))?,
                ),
                None => None,
            };
            let body = PlanBody {
                generate,
                trace_csv,
                apply,
            };
            let v: Value = client
                .send_json(
                    client
                        .request(reqwest::Method::POST, &format!("/v1/pipelines/{name}/plan"))
                        .json(&body),
                )
                .await?;
            if !json {
                print_plan(&typed(&v, "a plan")?);
                if apply {
                    println!("applied");
                }
                return Ok(());
            }
            v
        }
        PipelinesCommand::Infer {
            name,
            latency_ms,
            min_accuracy,
            inputs,
            rows,
        } => {
            let inputs = inputs
                .iter()
                .map(|a| parse_input(a, rows))
                .collect::<Result<Vec<_>, _>>()?;
            let body = InferRequest {
                inputs,
                latency_ms,
                min_accuracy,
                max_cost: None,
            };
            let v: Value = client
                .send_json(
                    client
                        .request(
                            reqwest::Method::POST,
                            &format!("/v1/pipelines/{name}/infer"),
                        )
                        .json(&body),
                )
                .await?;
            if !json {
                let answer: PipelineInferResponse = typed(&v, "a pipeline's answer")?;
                for o in &answer.outputs {
                    let mut data = o["data"].to_string();
                    if data.len() > 80 {
                        data.truncate(77);
                        data.push_str("...");
                    }
                    println!(
                        "{:<16} {:<8} {:<12} {}",
                        o["name"].as_str().unwrap_or("?"),
                        o["datatype"].as_str().unwrap_or("?"),
                        o["shape"].to_string(),
                        data
                    );
                }
                println!(
                    "latency {:.3} ms (SLO {}), accuracy {:.4}",
                    answer.latency_ms,
                    answer
                        .slo_ms
                        .map_or("none".to_string(), |s| format!("{s} ms")),
                    answer.accuracy
                );
                println!(
                    "{:<16} {:>5} {:<36} {:>10} {:>10}  REASON",
                    "NODE", "ROWS", "VARIANT", "ms", "BUDGET ms"
                );
                for n in &answer.nodes {
                    println!(
                        "{:<16} {:>5} {:<36} {:>10.3} {:>10}  {}",
                        n.node,
                        n.rows,
                        n.variant.as_deref().unwrap_or(&n.kind),
                        n.latency_ms,
                        n.budget_ms.map_or("-".to_string(), |b| format!("{b:.2}")),
                        n.reason
                    );
                }
                return Ok(());
            }
            v
        }
    };
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
