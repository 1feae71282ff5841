//! `infaas pipelines ...`: register (JSON or YAML), list, show, delete, plan, infer.

use anyhow::Context;
use clap::Subcommand;
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

fn slo_text(spec: &Value) -> String {
    let slo = &spec["slo"];
    let mut parts = Vec::new();
    if let Some(l) = slo["latency_ms"].as_f64() {
        let p = slo["percentile"].as_f64().unwrap_or(99.0);
        parts.push(format!("p{p} <= {l} ms"));
    }
    if let Some(a) = slo["min_accuracy"].as_f64() {
        parts.push(format!("accuracy >= {a}"));
    }
    if let Some(c) = slo["max_cost_per_hour"].as_f64() {
        parts.push(format!("<= ${c}/h"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

fn print_plan(plan: &Value) {
    println!(
        "{:<16} {:<36} {:>6} {:>9} {:>9}",
        "NODE", "VARIANT", "BATCH", "REPLICAS", "$/h"
    );
    for n in plan["nodes"].as_array().into_iter().flatten() {
        println!(
            "{:<16} {:<36} {:>6} {:>9} {:>9.4}",
            n["name"].as_str().unwrap_or("?"),
            n["variant"].as_str().unwrap_or("?"),
            n["max_batch"].as_u64().unwrap_or(0),
            n["replicas"].as_u64().unwrap_or(0),
            n["cost_per_hour"].as_f64().unwrap_or(0.0),
        );
    }
    println!(
        "predicted p{} {:.2} ms (p99 {:.2} ms), attainment {:.2}%, accuracy {:.4} ({}), cost ${:.4}/h; planned in {:.0} ms over {} estimates",
        plan["percentile"].as_f64().unwrap_or(99.0),
        plan["predicted_latency_ms"].as_f64().unwrap_or(f64::NAN),
        plan["predicted_p99_ms"].as_f64().unwrap_or(f64::NAN),
        plan["attainment"].as_f64().unwrap_or(0.0) * 100.0,
        plan["accuracy"].as_f64().unwrap_or(f64::NAN),
        plan["accuracy_source"].as_str().unwrap_or("estimated"),
        plan["cost_per_hour"].as_f64().unwrap_or(f64::NAN),
        plan["planner_ms"].as_f64().unwrap_or(f64::NAN),
        plan["estimates"].as_u64().unwrap_or(0),
    );
    for note in plan["notes"].as_array().into_iter().flatten() {
        println!("note: {}", note.as_str().unwrap_or(""));
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
        println!(
            "validation set of pipeline {name}: {} rows graded on output '{}'; plans measure end-to-end accuracy on it",
            v["rows"].as_u64().unwrap_or(0),
            v["output"].as_str().unwrap_or("?")
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
            if !json {
                println!(
                    "pipeline {} registered ({} nodes; SLO {})",
                    v["name"].as_str().unwrap_or("?"),
                    v["spec"]["nodes"].as_array().map_or(0, Vec::len),
                    slo_text(&v["spec"])
                );
            }
            match validation {
                Some(file) => {
                    let name = v["name"].as_str().unwrap_or_default().to_string();
                    upload_validation(client, json, &name, &file, output.as_deref()).await?;
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
                println!(
                    "{:<24} {:>6} {:<36} {:>9} {:>10}",
                    "PIPELINE", "NODES", "SLO", "PLANNED", "QUERIES/m"
                );
                for p in v["pipelines"].as_array().into_iter().flatten() {
                    println!(
                        "{:<24} {:>6} {:<36} {:>9} {:>10}",
                        p["name"].as_str().unwrap_or("?"),
                        p["spec"]["nodes"].as_array().map_or(0, Vec::len),
                        slo_text(&p["spec"]),
                        if p["plan"].is_null() { "no" } else { "yes" },
                        p["queries_last_minute"].as_u64().unwrap_or(0)
                    );
                }
                return Ok(());
            }
            v
        }
        PipelinesCommand::Show { name } => {
            let v: Value = client.get_json(&format!("/v1/pipelines/{name}")).await?;
            if !json {
                println!("pipeline  {}  (SLO {})", name, slo_text(&v["spec"]));
                println!("{}", serde_json::to_string_pretty(&v["spec"]["nodes"])?);
                if let Some(rows) = v["validation"]["rows"].as_u64() {
                    println!(
                        "validation set: {rows} rows graded on output '{}'",
                        v["validation"]["output"].as_str().unwrap_or("?")
                    );
                }
                if !v["plan"].is_null() {
                    println!();
                    print_plan(&v["plan"]);
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
            let mut body = serde_json::json!({ "apply": apply });
            if let Some(g) = generate {
                body["generate"] = g.into();
            }
            if let Some(t) = trace {
                let text = std::fs::read_to_string(&t)
                    .with_context(|| format!("cannot read {}", t.display()))?;
                body["trace_csv"] = text.into();
            }
            let v: Value = client
                .send_json(
                    client
                        .request(reqwest::Method::POST, &format!("/v1/pipelines/{name}/plan"))
                        .json(&body),
                )
                .await?;
            if !json {
                print_plan(&v);
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
            let mut body = serde_json::json!({ "inputs": inputs });
            if let Some(l) = latency_ms {
                body["latency_ms"] = l.into();
            }
            if let Some(a) = min_accuracy {
                body["min_accuracy"] = a.into();
            }
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
                for o in v["outputs"].as_array().into_iter().flatten() {
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
                    v["latency_ms"].as_f64().unwrap_or(f64::NAN),
                    v["slo_ms"]
                        .as_f64()
                        .map_or("none".to_string(), |s| format!("{s} ms")),
                    v["accuracy"].as_f64().unwrap_or(f64::NAN)
                );
                println!(
                    "{:<16} {:>5} {:<36} {:>10} {:>10}  REASON",
                    "NODE", "ROWS", "VARIANT", "ms", "BUDGET ms"
                );
                for n in v["nodes"].as_array().into_iter().flatten() {
                    println!(
                        "{:<16} {:>5} {:<36} {:>10.3} {:>10}  {}",
                        n["node"].as_str().unwrap_or("?"),
                        n["rows"].as_u64().unwrap_or(0),
                        n["variant"]
                            .as_str()
                            .unwrap_or(n["kind"].as_str().unwrap_or("-")),
                        n["latency_ms"].as_f64().unwrap_or(0.0),
                        n["budget_ms"]
                            .as_f64()
                            .map_or("-".to_string(), |b| format!("{b:.2}")),
                        n["reason"].as_str().unwrap_or("")
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
