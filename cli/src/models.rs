//! `infaas models ...` and `infaas apps ...`.

use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use reqwest::multipart::{Form, Part};

use crate::{AppsCommand, Client, ModelsCommand};
use infaas_protocol::v1::{AppDetail, AppList, ModelList, ModelView, PrunedVariantView};

async fn file_part(path: &std::path::Path, bar: &ProgressBar) -> anyhow::Result<Part> {
    let file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("cannot open {}", path.display()))?;
    let len = file.metadata().await?.len();
    let bar = bar.clone();
    bar.inc_length(len);
    let stream = futures::StreamExt::inspect(tokio_util::io::ReaderStream::new(file), move |c| {
        if let Ok(c) = c {
            bar.inc(c.len() as u64);
        }
    });
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    Ok(Part::stream_with_length(reqwest::Body::wrap_stream(stream), len).file_name(name))
}

fn best_accuracy(m: &ModelView) -> String {
    m.variants
        .iter()
        .filter_map(|v| v.accuracy)
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))))
        .map(|a| format!("{a:.4}"))
        .unwrap_or_else(|| "-".into())
}

fn print_model(m: &ModelView) {
    println!("model     {} (app {}, task {})", m.name, m.app, m.task);
    println!(
        "status    {} ({:.0}%){}",
        m.status,
        m.progress * 100.0,
        m.error
            .as_ref()
            .map(|e| format!(": {e}"))
            .unwrap_or_default()
    );
    println!("size      {} bytes, sha256 {}", m.size_bytes, m.sha256);
    println!();
    println!(
        "{:<40} {:>8} {:>5} {:>9} {:>9} {:>11} {:>11}",
        "VARIANT", "ACCURACY", "B", "LOAD ms", "MEM KiB", "p50@1 ms", "p50@max ms"
    );
    for v in &m.variants {
        let at = |b: Option<usize>| {
            b.and_then(|b| v.latency.iter().find(|l| l.batch == b))
                .map(|l| format!("{:.4}", l.p50_ms))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "{:<40} {:>8} {:>5} {:>9} {:>9} {:>11} {:>11}",
            v.name,
            v.accuracy
                .map(|a| format!("{a:.4}"))
                .unwrap_or_else(|| "-".into()),
            v.max_batch,
            v.load_ms
                .map(|l| format!("{l:.2}"))
                .unwrap_or_else(|| "-".into()),
            v.memory_bytes
                .map(|m| (m / 1024).to_string())
                .unwrap_or_else(|| "-".into()),
            at(Some(1)),
            at(v.latency.last().map(|l| l.batch)),
        );
    }
    if !m.pruned.is_empty() {
        let kept: Vec<&str> = m.variants.iter().map(|v| v.file.as_str()).collect();
        println!();
        println!("pruned at registration (not served):");
        for line in PrunedVariantView::summary(&m.pruned, &kept) {
            println!("  {line}");
        }
    }
}

pub async fn run(client: &Client, json: bool, cmd: ModelsCommand) -> anyhow::Result<()> {
    match cmd {
        ModelsCommand::Register {
            name,
            app,
            model,
            validation,
            task,
            output,
            max_batch,
            label_names,
            no_wait,
        } => {
            let upload = ProgressBar::new(0).with_style(
                ProgressStyle::with_template("uploading  [{bar:40}] {bytes}/{total_bytes}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let mut form = Form::new()
                .text("name", name.clone())
                .text("app", app)
                .text("task", task);
            if let Some(o) = output {
                form = form.text("output", o);
            }
            if let Some(b) = max_batch {
                form = form.text("max_batch", b.to_string());
            }
            if let Some(l) = label_names {
                form = form.text("label_names", l);
            }
            form = form
                .part("model", file_part(&model, &upload).await?)
                .part("validation", file_part(&validation, &upload).await?);
            let accepted: ModelView = client
                .send_json(
                    client
                        .request(reqwest::Method::POST, "/v1/models")
                        .multipart(form),
                )
                .await?;
            upload.finish_and_clear();
            eprintln!("registered '{}': {}", accepted.name, accepted.status);
            if no_wait {
                return emit(json, &accepted, print_model);
            }
            let bar = ProgressBar::new(1000).with_style(
                ProgressStyle::with_template(
                    "{spinner} {prefix:<10} [{bar:40}] {percent:>3}% {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            let path = format!("/v1/models/{name}");
            let done = loop {
                let m: ModelView = client.get_json(&path).await?;
                bar.set_prefix(m.status.clone());
                bar.set_position((m.progress * 1000.0) as u64);
                bar.set_message(m.progress_detail.clone().unwrap_or_default());
                if m.status == "ready" || m.status == "failed" {
                    break m;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            };
            bar.finish_and_clear();
            if done.status == "failed" {
                anyhow::bail!(
                    "registration of '{name}' failed: {}",
                    done.error.unwrap_or_else(|| "no reason given".into())
                );
            }
            let pruned = match done.pruned.len() {
                0 => String::new(),
                n => format!(" ({n} pruned)"),
            };
            eprintln!(
                "'{name}' is ready with {} variants{pruned}",
                done.variants.len()
            );
            emit(json, &done, print_model)
        }
        ModelsCommand::List => {
            let list: ModelList = client.get_json("/v1/models").await?;
            emit(json, &list, |l| {
                println!(
                    "{:<28} {:<16} {:<11} {:>8} {:>9}",
                    "NAME", "APP", "STATUS", "VARIANTS", "BEST ACC"
                );
                for m in &l.models {
                    println!(
                        "{:<28} {:<16} {:<11} {:>8} {:>9}",
                        m.name,
                        m.app,
                        m.status,
                        m.variants.len(),
                        best_accuracy(m)
                    );
                }
            })
        }
        ModelsCommand::Show { name } => {
            let m: ModelView = client.get_json(&format!("/v1/models/{name}")).await?;
            emit(json, &m, print_model)
        }
        ModelsCommand::Delete { name } => {
            client.delete(&format!("/v1/models/{name}")).await?;
            eprintln!("deleted '{name}'");
            Ok(())
        }
    }
}

pub async fn run_apps(client: &Client, json: bool, cmd: AppsCommand) -> anyhow::Result<()> {
    match cmd {
        AppsCommand::List => {
            let list: AppList = client.get_json("/v1/apps").await?;
            emit(json, &list, |l| {
                println!("{:<24} MODELS", "APP");
                for a in &l.apps {
                    println!("{:<24} {}", a.name, a.models.join(", "));
                }
            })
        }
        AppsCommand::Show { app } => {
            let d: AppDetail = client.get_json(&format!("/v1/apps/{app}")).await?;
            emit(json, &d, |d| {
                println!(
                    "{:<28} {:<11} {:>8} {:>9}",
                    "MODEL", "STATUS", "VARIANTS", "BEST ACC"
                );
                for m in &d.models {
                    println!(
                        "{:<28} {:<11} {:>8} {:>9}",
                        m.name,
                        m.status,
                        m.variants.len(),
                        best_accuracy(m)
                    );
                }
            })
        }
    }
}

fn emit<T: serde::Serialize>(json: bool, v: &T, table: impl FnOnce(&T)) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(v)?);
    } else {
        table(v);
    }
    Ok(())
}
