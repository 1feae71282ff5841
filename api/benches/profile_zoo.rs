//! How long registering the whole zoo takes with the DEFAULT profiling settings
//! (`profile_runs` 30, `profile_max_ms_per_batch` 500, every core of the machine), from the
//! first upload until every model is `ready`, and per model. In-process server on SQLite and
//! a local directory in a temporary directory; needs ONNX Runtime.
//!
//! Run: `cargo bench -p infaas-api --bench profile_zoo`

use infaas_testing::platform as registry_common;

use std::time::{Duration, Instant};

use infaas_control::config::Config;
use registry_common::backends::Backends;
use registry_common::{open_quotas, ort_library, Platform, Registration, ZOO};

#[tokio::main]
async fn main() {
    let Some(ort) = ort_library() else {
        return;
    };
    let b = Backends::embedded();
    let defaults = Config::default();
    let config = Config {
        worker_cores: defaults.worker_cores,
        profile_runs: defaults.profile_runs,
        profile_max_ms_per_batch: defaults.profile_max_ms_per_batch,
        ..registry_common::fast_config(&b, &ort)
    };
    println!(
        "profile_zoo: profile_runs {}, profile_max_ms_per_batch {}, worker cores {}",
        config.profile_runs,
        config.profile_max_ms_per_batch,
        config.worker_cores()
    );
    let p = Platform::start(config).await;
    let t = p.tenant("bench", open_quotas()).await;
    let started = Instant::now();
    for (name, _, _) in ZOO {
        p.register_ok(&t, &Registration::zoo(name, "digits")).await;
    }
    let uploaded = started.elapsed();
    let mut models = Vec::new();
    for (name, _, _) in ZOO {
        models.push(p.wait_ready(&t, name, Duration::from_secs(1800)).await);
    }
    let wall = started.elapsed();

    // The worker takes models one at a time in order of registration, so a model's own time
    // runs from the previous model's end (or its own registration) to its `ready` update.
    println!(
        "\n{:<18} {:>8} {:>10} {:>12} {:>10}",
        "model", "variants", "own (s)", "ready at (s)", "fp32 acc"
    );
    let first = models
        .iter()
        .filter_map(|m| m["created_at_ms"].as_i64())
        .min()
        .unwrap_or_default();
    let mut previous_end = first;
    for m in &models {
        let created = m["created_at_ms"].as_i64().unwrap_or_default();
        let end = m["updated_at_ms"].as_i64().unwrap_or_default();
        let own = end - previous_end.max(created);
        previous_end = end;
        let variants = m["variants"].as_array().map(Vec::len).unwrap_or_default();
        let fp32 = m["variants"]
            .as_array()
            .and_then(|vs| vs.iter().find(|v| v["file"] == "source"))
            .and_then(|v| v["accuracy"].as_f64())
            .unwrap_or_default();
        println!(
            "{:<18} {:>8} {:>10.2} {:>12.2} {:>10.4}",
            m["name"].as_str().unwrap_or_default(),
            variants,
            own as f64 / 1e3,
            (end - first) as f64 / 1e3,
            fp32
        );
    }
    println!(
        "\nuploads took {:.2} s; whole zoo ready after {:.2} s (wall clock)",
        uploaded.as_secs_f64(),
        wall.as_secs_f64()
    );
    p.stop().await;
}
