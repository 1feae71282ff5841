//! Autoscaling end to end: a load ramp (low, mid, high, low) at one application served by a
//! real zoo model, with the model autoscaler, the worker autoscaler and the process provider
//! starting a real `infaas worker` process. The scaling events served at
//! `GET /v1/apps/{app}/scaling-events` show a downgrade at low load, an upgrade to a faster
//! variant, replicas added, a worker started and later stopped, and replicas removed; no
//! query gets a 5xx; the run costs less than holding its peak configuration throughout.
//!
//! Scale of the test: the zoo models saturate at tens of thousands of rows per second, far
//! more than a 2-core CI machine can send over HTTP. Instead of the load, the test scales the
//! thresholds: `slack` is set so that `slack x arrivals` crosses the measured saturation
//! throughputs of the variants, and the arrival rates of the phases are chosen from the
//! profiles the registration measured. Prices put a large weight on memory so that the
//! variants of the model differ in price (the INT8 file is the smallest).
//!
//! The application starts on its dearest slow variant (loaded by the test, as a previous
//! deployment would have left it), which the autoscaler downgrades at low load.
//!
//! The registration prunes a file whose variants are no faster than another file's at equal
//! or better accuracy; the zoo MLP's INT8 file is as accurate as its FP32 files and faster,
//! which would leave it alone. The tests that need an FP32 and an INT8 file register a copy
//! whose INT8 file is faster but less accurate ([`int8_loses_accuracy`]), so both stay.
//!
//! `cargo nextest run -p infaas-api --test autoscaling`. Needs ONNX Runtime (`ORT_DYLIB_PATH`
//! or the `scripts/setup.sh` cache).

#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_control::config::{AutoscaleConfig, Prices, WorkerProviderKind};
use registry_common::backends::Backends;
use registry_common::{
    fast_config, open_quotas, ort_library, zoo_arrays, Platform, Registration, Tenant,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

const APP: &str = "digits";
const MODEL: &str = "digits-mlp-l";
const SLACK: f64 = 2000.0;
const PRICES: Prices = Prices {
    cpu_core_per_s: 1e-5,
    memory_gb_per_s: 1e-3,
    gpu_per_s: 1e-4,
};
/// Registration and profiling of the slow model.
const READY_HEAVY: Duration = Duration::from_secs(300);
/// Memory budget of every worker (it is priced too).
const WORKER_MEMORY: u64 = 256 << 20;

/// One profiled variant as the test prices it.
#[derive(Debug, Clone)]
struct Variant {
    name: String,
    file: String,
    max_batch: usize,
    peak: f64,
    rate: f64,
}

fn variants(model: &Value) -> Vec<Variant> {
    model["variants"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["status"] == "profiled")
        .map(|v| {
            let max_batch = v["max_batch"].as_u64().unwrap() as usize;
            let last = v["latency"].as_array().unwrap().last().unwrap().clone();
            let threads = v["threads"].as_f64().unwrap();
            let memory = v["memory_bytes"].as_f64().unwrap();
            Variant {
                name: v["name"].as_str().unwrap().to_string(),
                file: v["file"].as_str().unwrap().to_string(),
                max_batch,
                peak: max_batch as f64 / last["mean_ms"].as_f64().unwrap() * 1000.0,
                rate: threads * PRICES.cpu_core_per_s + memory / 1e9 * PRICES.memory_gb_per_s,
            }
        })
        .collect()
}

/// A copy of `digits-mlp-l` (or of a slow copy of it) whose FP32 answers are the same and
/// whose INT8 file is far less accurate: row 0 of its first weight (`coefficient`, read by
/// pixel 0, which is 0 in every digit) becomes 1e4, so per-channel INT8 scales every column
/// by 1e4 / 63 and rounds the other weights to 0. Its INT8 file is still faster, so the
/// registration keeps both files (FP32 more accurate, INT8 faster and smaller).
fn int8_loses_accuracy(onnx: &[u8]) -> Vec<u8> {
    let mut proto = infaas_onnx::OnnxModel::parse(onnx).unwrap().into_proto();
    let graph = proto.graph.as_mut().unwrap();
    let w = graph
        .initializer
        .iter_mut()
        .find(|t| t.name() == "coefficient")
        .unwrap();
    if w.float_data.is_empty() {
        w.float_data = w
            .raw_data()
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        w.raw_data = None;
    }
    let cols = w.dims[1] as usize;
    w.float_data[..cols].fill(1e4);
    infaas_onnx::OnnxModel::from_proto(proto)
        .unwrap()
        .to_bytes()
}

/// Price per second of a worker the provider starts (1 core, its memory budget).
fn worker_price() -> f64 {
    PRICES.cpu_core_per_s + WORKER_MEMORY as f64 / 1e9 * PRICES.memory_gb_per_s
}

/// Statuses of the queries sent, by code.
type Statuses = BTreeMap<u16, usize>;

/// Instantaneous cost of the configuration, sampled: `(seconds since start, $/s)`.
#[derive(Default)]
struct Meter {
    samples: Vec<(f64, f64)>,
}

impl Meter {
    /// The run's cost (trapezoids) and the cost of holding the most expensive sampled
    /// configuration for the whole run.
    fn costs(&self) -> (f64, f64) {
        let run: f64 = self
            .samples
            .windows(2)
            .map(|w| (w[1].0 - w[0].0) * (w[0].1 + w[1].1) / 2.0)
            .sum();
        let span =
            self.samples.last().map_or(0.0, |l| l.0) - self.samples.first().map_or(0.0, |f| f.0);
        let peak = self.samples.iter().map(|s| s.1).fold(0.0, f64::max);
        (run, peak * span)
    }
}

struct Ramp<'a> {
    p: &'a Platform,
    t: &'a Tenant,
    by_name: BTreeMap<String, Variant>,
    rows: Vec<Value>,
    statuses: Arc<Mutex<Statuses>>,
    meter: Meter,
    began: Instant,
    seen: usize,
    /// Queries in flight; a phase does not wait for them (the next one starts at once, as a
    /// client's load would), [`Ramp::finish`] does.
    tasks: tokio::task::JoinSet<()>,
}

impl<'a> Ramp<'a> {
    /// A ramp of single-row queries (the first 200 rows of `digits-val.npz`) to [`APP`],
    /// pricing the configuration by `by_name`.
    fn new(p: &'a Platform, t: &'a Tenant, by_name: BTreeMap<String, Variant>) -> Self {
        let x = zoo_arrays("digits-val.npz")
            .into_iter()
            .find(|t| t.name == "x")
            .unwrap();
        let rows = (0..200)
            .map(|i| {
                let row = x.slice_batch(i, i + 1);
                let data: Vec<f64> = (0..row.data.len())
                    .map(|k| row.data.get_f64(k).unwrap())
                    .collect();
                json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": data}]})
            })
            .collect();
        Ramp {
            p,
            t,
            by_name,
            rows,
            statuses: Arc::default(),
            meter: Meter::default(),
            began: Instant::now(),
            seen: 0,
            tasks: tokio::task::JoinSet::new(),
        }
    }

    /// Waits for every query sent so far.
    async fn finish(&mut self) {
        while self.tasks.join_next().await.is_some() {}
    }

    /// Sends single-row queries at `rate` per second (constant gaps) for at least `min`,
    /// until every action of `wanted` shows among the events that came after the previous
    /// phase (an entry `a|b` is met by either); fails after `max`. Samples the
    /// configuration's cost meanwhile.
    async fn phase(
        &mut self,
        rate: f64,
        min: Duration,
        max: Duration,
        wanted: &[&str],
    ) -> Vec<Value> {
        let gap = Duration::from_secs_f64(1.0 / rate);
        let start = Instant::now();
        let mut next_check = start;
        let mut i = 0u32;
        let list = loop {
            let now = Instant::now();
            if now >= next_check {
                next_check = now + Duration::from_millis(250);
                let cost = configuration_cost(self.p, self.t, &self.by_name).await;
                self.meter
                    .samples
                    .push((self.began.elapsed().as_secs_f64(), cost));
                let list = events(self.p, self.t).await;
                let done = wanted.iter().all(|w| {
                    w.split('|')
                        .any(|a| list.iter().skip(self.seen).any(|e| e["action"] == a))
                });
                if done && start.elapsed() >= min {
                    break list;
                }
                assert!(
                    start.elapsed() < max,
                    "not all of {wanted:?} within {max:?} at {rate:.1} queries/s; events: {:#?}",
                    list.iter()
                        .map(|e| format!("{} {}", e["action"], e["reason"]))
                        .collect::<Vec<_>>()
                );
            }
            let body = self.rows[i as usize % self.rows.len()].clone();
            let req = self
                .p
                .http
                .post(format!("{}/v1/apps/{APP}/infer", self.p.base))
                .bearer_auth(&self.t.token)
                .json(&body);
            let statuses = self.statuses.clone();
            while self.tasks.try_join_next().is_some() {}
            self.tasks.spawn(async move {
                let code = match req.send().await {
                    Ok(r) => r.status().as_u16(),
                    Err(_) => 0,
                };
                *statuses.lock().unwrap().entry(code).or_default() += 1;
            });
            i += 1;
            tokio::time::sleep_until(tokio::time::Instant::from_std(start + gap * i)).await;
        };
        self.seen = list.len();
        // Shown when the test fails: how long each phase took to see its actions.
        println!(
            "phase at {rate:.1} queries/s: {wanted:?} after {:.1} s",
            start.elapsed().as_secs_f64()
        );
        list
    }
}

/// Names of the workers the process provider runs.
async fn provisioned(p: &Platform) -> Vec<String> {
    p.server
        .autoscaler
        .as_ref()
        .unwrap()
        .provisioned_workers()
        .await
}

async fn events(p: &Platform, t: &Tenant) -> Vec<Value> {
    let a = p
        .get(t, &format!("/v1/apps/{APP}/scaling-events?limit=1000"))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let mut list = a.body["events"].as_array().unwrap().clone();
    list.reverse();
    list
}

fn actions(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect()
}

/// The tenant's instances and the live provisioned workers, priced: `$/s` now.
async fn configuration_cost(p: &Platform, t: &Tenant, by_name: &BTreeMap<String, Variant>) -> f64 {
    let a = p.get(t, "/v1/workers").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let mut cost = 0.0;
    for w in a.body["workers"].as_array().unwrap() {
        if w["alive"] != true {
            continue;
        }
        if w["name"]
            .as_str()
            .unwrap_or_default()
            .starts_with("worker-")
        {
            cost += worker_price();
        }
        for i in w["instances"].as_array().unwrap() {
            if let Some(v) = by_name.get(i["variant"].as_str().unwrap()) {
                cost += v.rate;
            }
        }
    }
    cost
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_ramp_scales_up_out_and_back_down() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    // One core per worker (variants run one intra-op thread); room for two instances each.
    cfg.worker_cores = Some(1);
    cfg.worker_thread_budget = Some(2);
    cfg.worker_memory_bytes = Some(WORKER_MEMORY);
    cfg.evict_idle_secs = 3600;
    cfg.heartbeat_timeout_ms = 3000;
    cfg.prices = PRICES;
    cfg.log_level = "warn".into();
    // Profiles steady enough to choose the phases' rates from.
    cfg.profile_runs = 20;
    cfg.profile_max_ms_per_batch = 200;
    // Every file's variants stay: the phases need files of different prices, and pruning
    // keeps only the files whose variants are faster somewhere (within noise, one FP32 file
    // and no INT8 file, seen on an idle CI machine).
    cfg.prune_variants = false;
    cfg.autoscale = AutoscaleConfig {
        enabled: true,
        model_interval_ms: 1000,
        worker_interval_ms: 1000,
        exact_interval_ms: 5000,
        slack: SLACK,
        scale_down: 3.0 * SLACK,
        // No scale-in hold: greedy makes the first downgrade in its first period, to the
        // smallest batch the phases' rates are computed from. With a hold the exact planner
        // (every 5 s) can make it first, to a larger batch of the same price (seen in CI with
        // 3 s), and the mid phase then needs no upgrade. The surge test keeps the default.
        scale_in_hold_secs: 0.0,
        // No peak hold either: each phase's rate is planned for as soon as it runs (the
        // surge test runs the loop with a hold).
        peak_hold_secs: 0.0,
        vertical: false,
        worker_provider: WorkerProviderKind::Process,
        worker_utilisation: 0.95,
        min_workers: 0,
        max_workers: 1,
        idle_cooldown_secs: 3.0,
        worker_stop_grace_secs: 5,
        worker_start_timeout_secs: 60,
        worker_binary: Some(env!("CARGO_BIN_EXE_infaas").into()),
        provisioned_worker_cores: Some(1),
        // The zoo models run in tens of microseconds, where the scheduling noise of a shared
        // 2-core machine reads as interference: this test is about load.
        interference_factor: 1000.0,
        ..AutoscaleConfig::default()
    };
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    let model = int8_loses_accuracy(&registry_common::zoo_bytes("digits-mlp-l.onnx"));
    p.register_ok(
        &t,
        &Registration::zoo(MODEL, APP).text("max_batch", "8").file(
            "model",
            model,
            "digits-mlp-l.onnx",
        ),
    )
    .await;
    let model = p.wait_ready(&t, MODEL, Duration::from_secs(180)).await;
    let all = variants(&model);
    let by_name: BTreeMap<String, Variant> =
        all.iter().map(|v| (v.name.clone(), v.clone())).collect();
    let cheapest = all.iter().map(|v| v.rate).fold(f64::INFINITY, f64::min);
    let p_max = all.iter().map(|v| v.peak).fold(0.0, f64::max);
    // The dearest file's smallest-batch variant whose profile is not an outlier of a busy
    // machine: where the application starts.
    let dear_rate = all.iter().map(|v| v.rate).fold(0.0, f64::max);
    let mut dear_file: Vec<&Variant> = all.iter().filter(|v| v.rate == dear_rate).collect();
    dear_file.sort_by_key(|v| v.max_batch);
    let dear = dear_file
        .iter()
        .find(|v| v.peak >= 4000.0)
        .map(|v| (*v).clone())
        .unwrap_or_else(|| panic!("no usable profile: {all:#?}"));
    // Prices differ by the files' memory (about 1% on this model, as profiled); the scaler
    // downgrades for any saving above a load's weight (1 + lambda * load time, ~1e-5 here).
    assert!(
        dear.rate > cheapest * 1.001,
        "the files do not differ in price: {all:#?}"
    );
    // Where the downgrade lands: the cheapest file's smallest batch among equal prices, but
    // never a smaller batch than the start's (a downgrade never batches less). The start is
    // not always batch 1: its batch-1 profile can be an outlier of a busy machine.
    let cheap_file = all
        .iter()
        .min_by(|a, b| a.rate.total_cmp(&b.rate))
        .unwrap()
        .file
        .clone();
    let cheap_landing = all
        .iter()
        .filter(|v| v.file == cheap_file && v.max_batch >= dear.max_batch)
        .min_by_key(|v| v.max_batch)
        .unwrap()
        .clone();
    println!(
        "start on {} ({:.0} rows/s), cheapest {} ({:.0} rows/s), fastest {p_max:.0} rows/s",
        dear.name, dear.peak, cheap_landing.name, cheap_landing.peak
    );

    // Start on the dear variant, as a previous deployment left it.
    let state = &p.server.state;
    state.cluster.refresh_catalog().await.unwrap();
    let served = state
        .cluster
        .catalog()
        .variants()
        .find(|s| s.entry.variant.name == dear.name)
        .unwrap()
        .clone();
    let embedded = state
        .cluster
        .workers_view()
        .into_iter()
        .find(|(b, _, _)| b.worker.address.is_none())
        .unwrap()
        .0
        .worker
        .id;
    let req = infaas_control::serving::load_request(&served);
    state
        .cluster
        .handle(&embedded)
        .unwrap()
        .load(&req)
        .await
        .unwrap();
    state.cluster.loaded(&embedded, &req);

    let mut ramp = Ramp::new(&p, &t, by_name.clone());
    let s = Duration::from_secs;

    // Low: the dear variant has far more headroom than needed: downgraded.
    let low = (dear.peak.min(cheap_landing.peak) / (4.0 * SLACK)).max(0.5);
    ramp.phase(low, s(3), s(20), &["downgrade"]).await;
    // Mid: 1.3 x the saturation throughput of the variant the downgrade landed on: an upgrade
    // to a faster variant of the cheapest file.
    let after_low = ramp.seen;
    let mid = 1.3 * cheap_landing.peak / SLACK;
    // When the downgrade landed on its file's fastest variant (the INT8 file's b8, 67,171
    // rows/s, in one CI run), no faster variant of the file exists and the capacity comes
    // from a replica instead.
    ramp.phase(mid, s(3), s(20), &["upgrade|replicate"]).await;
    // High: 2.2 x the fastest variant: three instances, more than one worker holds. The mid
    // phase may already have replicated and added the worker: the upgrade is chosen for the
    // load measured while the rate still rises, and on a busy machine the next batch size's
    // profile can be barely faster (21,119 against 18,037 rows/s in one CI run), so the full
    // mid rate needed a replica, then a worker. Those count here.
    ramp.seen = after_low;
    let high = 2.2 * p_max / SLACK;
    ramp.phase(high, s(4), s(60), &["add-worker", "replicate"])
        .await;
    // Low again: replicas removed, the provisioned worker idles and is stopped.
    let list = ramp
        .phase(low, s(3), s(90), &["remove-replica", "remove-worker"])
        .await;
    let took = ramp.began.elapsed();
    println!("rates: low {low:.1}, mid {mid:.1}, high {high:.1} queries/s");
    let names = actions(&list);
    println!("events: {names:?}");
    for e in &list {
        println!("  {} {}: {}", e["action"], e["worker"], e["reason"]);
    }
    ramp.finish().await;
    let statuses = ramp.statuses.lock().unwrap().clone();
    println!("statuses: {statuses:?} in {took:?}");
    let (run, peak) = ramp.meter.costs();
    println!(
        "cost of the run {run:.3e} $, of the peak configuration held throughout {peak:.3e} $: ratio {:.3}",
        run / peak
    );
    assert!(run < peak, "run {run} peak {peak}");
    // Scaled back down is cheaper: once the stopped worker has left (its heartbeats end), the
    // configuration (one instance on the embedded worker) costs at most three quarters of the
    // most expensive one sampled (three instances and a provisioned worker).
    let highest = ramp.meter.samples.iter().map(|s| s.1).fold(0.0, f64::max);
    let deadline = Instant::now() + Duration::from_secs(30);
    let last = loop {
        let cost = configuration_cost(&p, &t, &by_name).await;
        if cost <= 0.75 * highest || Instant::now() > deadline {
            break cost;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(
        last > 0.0 && last <= 0.75 * highest,
        "the configuration at the end costs {last:.3e} $/s, the most expensive {highest:.3e} $/s"
    );
    let failed: usize = statuses
        .iter()
        .filter(|(c, _)| **c >= 500 || **c == 0)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(failed, 0, "queries failed: {statuses:?}");
    assert!(
        statuses.get(&200).copied().unwrap_or(0) > 100,
        "{statuses:?}"
    );
    // Every action completed (none failed), each with a reason and its prices.
    assert!(names.iter().all(|a| !a.ends_with("-failed")), "{names:?}");
    for e in &list {
        assert!(e["reason"].as_str().unwrap().len() > 20, "{e}");
        assert!(e["cost_before_per_s"].is_number(), "{e}");
        assert!(e["cost_after_per_s"].is_number(), "{e}");
    }
    // The downgrade went to a cheaper variant, the upgrade to a faster one.
    let downgrade = list.iter().find(|e| e["action"] == "downgrade").unwrap();
    assert!(
        downgrade["cost_after_per_s"].as_f64().unwrap()
            < downgrade["cost_before_per_s"].as_f64().unwrap(),
        "{downgrade}"
    );
    let upgrade = list.iter().find(|e| e["action"] == "upgrade").unwrap();
    let to = &by_name[upgrade["variant"].as_str().unwrap()];
    assert!(to.peak > cheap_landing.peak, "{upgrade}");
    // Every worker added was stopped after it (the mid phase may already have added one and
    // stopped it again once it emptied, before the high phase added another); no worker
    // process is left (below).
    let mut added = 0;
    for (i, e) in list.iter().enumerate() {
        if e["action"] == "add-worker" {
            added += 1;
            assert!(
                list[i + 1..]
                    .iter()
                    .any(|r| r["action"] == "remove-worker" && r["worker"] == e["worker"]),
                "{} never stopped: {names:?}",
                e["worker"]
            );
        }
    }
    assert!(added >= 1, "{names:?}");
    // The exact planner solved the ILP on the way and recorded greedy's gap.
    let metrics = p
        .http
        .get(format!("{}/metrics", p.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let gap = metrics
        .lines()
        .find(|l| l.starts_with("infaas_autoscaler_greedy_gap_ratio"))
        .unwrap_or_else(|| panic!("no gap recorded: {metrics}"));
    println!("exact planner: {gap}");
    let provider_workers = provisioned(&p).await;
    assert!(provider_workers.is_empty(), "{provider_workers:?}");
    p.stop().await;
}

/// Forecasts on the running controller: queries sent to an application at a constant rate are
/// counted per second by the forecasts' loop, and `GET /v1/apps/{app}/forecast` reports the
/// observed rates, the rates predicted for them one and ten seconds ahead (the latter also for
/// the seconds to come), the highest rate forecast over the next ten seconds and a finite
/// error for both horizons; an unknown application and another tenant's are a 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_applications_arrival_rate_is_forecast_on_the_running_loop() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    cfg.log_level = "warn".into();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    let other = p.tenant("globex", open_quotas()).await;
    p.register_ok(
        &t,
        &Registration::zoo("digits-mlp-s", APP).text("max_batch", "1"),
    )
    .await;
    p.wait_ready(&t, "digits-mlp-s", Duration::from_secs(180))
        .await;
    // Before any query: an empty forecast, not an error.
    let a = p.get(&t, &format!("/v1/apps/{APP}/forecast")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.body["app"], APP);
    // Unknown, and another tenant's: 404.
    let a = p.get(&t, "/v1/apps/nope/forecast").await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);
    let a = p.get(&other, &format!("/v1/apps/{APP}/forecast")).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);

    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|t| t.name == "x")
        .unwrap();
    let row = x.slice_batch(0, 1);
    let data: Vec<f64> = (0..row.data.len())
        .map(|k| row.data.get_f64(k).unwrap())
        .collect();
    let body =
        json!({"inputs": [{"name": "input", "shape": [1, 64], "datatype": "FP32", "data": data}]});
    // 20 queries/s until the forecast has judged 10-second predictions on a few seconds.
    const RATE: f64 = 20.0;
    let gap = Duration::from_secs_f64(1.0 / RATE);
    let start = Instant::now();
    let mut next_check = start + Duration::from_secs(5);
    let mut tasks = tokio::task::JoinSet::new();
    let mut i = 0u32;
    let view = loop {
        if Instant::now() >= next_check {
            next_check = Instant::now() + Duration::from_secs(1);
            let a = p.get(&t, &format!("/v1/apps/{APP}/forecast")).await;
            assert_eq!(a.status, StatusCode::OK, "{}", a.text);
            let busy = a.body["observed"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|o| o[1].as_f64().unwrap() > 0.0)
                .count();
            if busy >= 15 && a.body["mape_10s"].is_number() {
                break a.body;
            }
            assert!(
                start.elapsed() < Duration::from_secs(45),
                "no forecast judged within 45 s: {}",
                a.text
            );
        }
        let req = p
            .http
            .post(format!("{}/v1/apps/{APP}/infer", p.base))
            .bearer_auth(&t.token)
            .json(&body);
        tasks.spawn(async move { req.send().await.map(|r| r.status().as_u16()) });
        i += 1;
        tokio::time::sleep_until(tokio::time::Instant::from_std(start + gap * i)).await;
    };
    while tasks.join_next().await.is_some() {}
    let points = |k: &str| -> Vec<(i64, f64)> {
        view[k]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
            .collect()
    };
    let (observed, p1, p10) = (
        points("observed"),
        points("predicted_1s"),
        points("predicted_10s"),
    );
    let (m1, m10) = (
        view["mape_1s"].as_f64().unwrap(),
        view["mape_10s"].as_f64().unwrap(),
    );
    let max = view["max_next_10s"].as_f64().unwrap();
    println!(
        "forecast ({}): {} seconds observed, MAPE 1 s {:.1}%, 10 s {:.1}%, max next 10 s {max:.1} queries/s",
        view["model"],
        observed.len(),
        m1 * 100.0,
        m10 * 100.0
    );
    println!("observed: {observed:?}");
    assert!(!view["model"].as_str().unwrap().is_empty());
    assert_eq!(view["horizon_s"], 10);
    // The observed seconds in the middle of the run carry about the rate sent (the first and
    // the last are partial; a loaded machine sends in bursts).
    let busy: Vec<f64> = observed.iter().map(|o| o.1).filter(|&r| r > 0.0).collect();
    let mean = busy.iter().sum::<f64>() / busy.len() as f64;
    assert!(
        (0.5 * RATE..=1.5 * RATE).contains(&mean),
        "mean observed {mean}"
    );
    // Seconds ascend; predictions exist for the observed seconds, and 10 s ahead beyond them.
    assert!(observed.windows(2).all(|w| w[0].0 < w[1].0));
    let last = observed.last().unwrap().0;
    assert!(p1.iter().any(|p| p.0 <= last) && p1.last().unwrap().0 == last + 1);
    assert_eq!(p10.last().unwrap().0, last + 10);
    // Finite errors, and a forecast of about the rate sent.
    assert!(m1.is_finite() && m10.is_finite() && m1 >= 0.0 && m10 >= 0.0);
    assert!(m10 < 2.0, "MAPE 10 s {m10}");
    assert!(max > 0.25 * RATE && max < 3.0 * RATE, "max next 10 s {max}");
    p.stop().await;
}

/// Vertical scaling through a worker process: a worker started with `INFAAS_WORKER_NAME`
/// registers under that name; an instance loaded there is resized to more intra-op threads
/// over `POST /cluster/resize` while queries keep being answered, and the worker's heartbeat
/// reports the new thread count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_process_resizes_an_instance_while_serving() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    cfg.worker_cores = Some(2);
    // The embedded worker holds nothing: queries go to the worker process.
    cfg.worker_thread_budget = Some(0);
    let objects = cfg.object_store.clone().unwrap();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(
        &t,
        &Registration::zoo("digits-mlp-m", APP).text("max_batch", "1"),
    )
    .await;
    p.wait_ready(&t, "digits-mlp-m", Duration::from_secs(180))
        .await;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args([
            "--object-store",
            &objects,
            "--worker-thread-budget",
            "4",
            "--log-level",
            "warn",
        ])
        .arg("--ort-dylib-path")
        .arg(&ort)
        .args(["worker", "--controller", &p.base])
        .env("INFAAS_CLUSTER_TOKEN", &p.server.state.cluster_token)
        .env("INFAAS_WORKER_NAME", "resize-me")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Reap<'a>(&'a mut std::process::Child);
    impl Drop for Reap<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _reap = Reap(&mut child);
    let cluster = p.server.state.cluster.clone();
    let start = Instant::now();
    let worker = loop {
        if let Some(id) = cluster.worker_ids_by_name().get("resize-me") {
            break id.clone();
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the worker did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Load the one-thread variant of the optimised file there.
    let served = cluster
        .catalog()
        .variants()
        .find(|s| s.entry.model == "digits-mlp-m" && s.entry.variant.threads == 1)
        .unwrap()
        .clone();
    let v = &served.entry.variant;
    let req = infaas_control::serving::load_request(&served);
    let handle = cluster.handle(&worker).unwrap();
    handle.load(&req).await.unwrap();
    cluster.loaded(&worker, &req);
    // Until the worker's own heartbeat reports it (one sent before the load may still come).
    let start = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let w = p.get(&t, "/v1/workers").await;
        let reported = w.body["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "resize-me")
            .is_some_and(|w| w["instances"][0]["variant"] == v.name.as_str());
        if reported && start.elapsed() > Duration::from_millis(1500) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{}", w.text);
    }
    // Queries straight to the worker's instance (the query path might pick another variant).
    let input = infaas_core::Tensor::new(
        "input",
        vec![1, 64],
        infaas_core::TensorData::Fp32(vec![0.5; 64]),
    )
    .unwrap();
    let infer = || async {
        let out = handle.infer(&v.id, vec![input.clone()]).await.unwrap();
        assert_eq!(out[0].shape[0], 1);
    };
    infer().await;
    // Resize while queries keep coming.
    let (resized, _) = tokio::join!(handle.resize(&v.id, 2), async {
        for _ in 0..20 {
            infer().await;
        }
    });
    assert!(resized.unwrap().load_ms > 0.0, "a new session was loaded");
    cluster.resized(&worker, &v.id, 2);
    infer().await;
    // The worker's own heartbeat reports two threads.
    let start = Instant::now();
    loop {
        let w = p.get(&t, "/v1/workers").await;
        let threads = w.body["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["name"] == "resize-me")
            .and_then(|w| w["instances"][0]["threads"].as_u64());
        if threads == Some(2) && start.elapsed() > Duration::from_millis(1500) {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(10), "{}", w.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // More threads than the worker's budget: refused, and the instance keeps serving.
    assert!(handle.resize(&v.id, 8).await.is_err());
    infer().await;
    p.stop().await;
}

/// The process provider starts workers only on cores no other worker of the machine offers.
/// With `min_workers = 1` the worker autoscaler asks for a worker every period:
/// - when the embedded worker offers all of the machine's cores (the default), none starts
///   (another worker on the same cores would add no capacity, only a network hop); before,
///   one started and offered the same cores again;
/// - when the embedded worker offers fewer, one starts and offers exactly the cores left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_workers_only_start_on_cores_nobody_offers() {
    let Some(ort) = ort_library() else { return };
    let host = std::thread::available_parallelism().map_or(1, |n| n.get());
    let b = Backends::embedded();
    let start = |embedded_cores: Option<usize>| {
        let mut cfg = fast_config(&b, &ort);
        cfg.worker_cores = embedded_cores;
        cfg.autoscale = AutoscaleConfig {
            enabled: true,
            worker_interval_ms: 200,
            worker_provider: WorkerProviderKind::Process,
            min_workers: 1,
            max_workers: 4,
            worker_binary: Some(env!("CARGO_BIN_EXE_infaas").into()),
            ..AutoscaleConfig::default()
        };
        Platform::start(cfg)
    };
    // All cores offered by the embedded worker: several periods pass, no worker starts.
    let p = start(None).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let started = provisioned(&p).await;
    assert!(started.is_empty(), "{started:?}");
    p.stop().await;
    if host < 2 {
        return;
    }
    // One core left: a worker starts with that core and registers.
    let p = start(Some(host - 1)).await;
    let t = p.tenant("acme", open_quotas()).await;
    let deadline = Instant::now() + Duration::from_secs(60);
    let cores = loop {
        let w = p.get(&t, "/v1/workers").await;
        let provisioned = w.body["workers"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|w| w["address"].is_string())
            .and_then(|w| w["cores"].as_u64());
        if let Some(c) = provisioned {
            break c;
        }
        assert!(
            Instant::now() < deadline,
            "no worker registered: {}",
            w.text
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(cores, 1, "the worker offers the one core left");
    let started = provisioned(&p).await;
    assert_eq!(started.len(), 1, "{started:?}");
    p.stop().await;
}

/// A worker process of the test, killed when dropped.
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `infaas worker` named `name` with `cores` cores, a budget of `threads` threads and
/// `memory` bytes, and waits until it has registered.
async fn spawn_worker(
    p: &Platform,
    objects: &str,
    ort: &std::path::Path,
    name: &str,
    (cores, threads, memory): (usize, usize, u64),
) -> (Spawned, String) {
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args(["--object-store", objects, "--log-level", "warn"])
        .args(["--worker-cores", &cores.to_string()])
        .args(["--worker-thread-budget", &threads.to_string()])
        .args(["--worker-memory-bytes", &memory.to_string()])
        .arg("--ort-dylib-path")
        .arg(ort)
        .args(["worker", "--controller", &p.base])
        .env("INFAAS_CLUSTER_TOKEN", &p.server.state.cluster_token)
        .env("INFAAS_WORKER_NAME", name)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child = Spawned(child);
    let start = Instant::now();
    loop {
        if let Some(id) = p.server.state.cluster.worker_ids_by_name().get(name) {
            return (child, id.clone());
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "worker {name} did not register"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `(worker name, variant, threads, state)` of every live instance of the tenant.
async fn placements(p: &Platform, t: &Tenant) -> Vec<(String, String, u64, String)> {
    let a = p.get(t, "/v1/workers").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let mut out = Vec::new();
    for w in a.body["workers"].as_array().unwrap() {
        if w["alive"] != true {
            continue;
        }
        for i in w["instances"].as_array().unwrap() {
            out.push((
                w["name"].as_str().unwrap_or_default().to_string(),
                i["variant"].as_str().unwrap_or_default().to_string(),
                i["threads"].as_u64().unwrap_or(0),
                i["state"].as_str().unwrap_or_default().to_string(),
            ));
        }
    }
    out
}

/// Themis' vertical-then-horizontal transition on the running controller (Themis §4-5, §5.1.3),
/// driven by real load on a slow model (`tests/python/make_heavy_model.py`): a surge on a CPU
/// instance first gets it more intra-op threads (`add-threads`), then, with the surge held and
/// the forecast of the next ten seconds saying it stays, base-thread instances take over and
/// the threads are given back (`rebalance`), and after the load falls the configuration
/// returns to one base-thread instance (`remove-replica`), no sooner than the peak hold
/// (`autoscale.peak_hold_secs`) lets the surge's rate go. The application's forecast shows
/// the surge.
///
/// Workers: the model's instance runs on a worker process of 2 cores whose memory holds only
/// one instance (so the query path cannot load a second one next to it: threads are the only
/// way up there); a second worker, with room for one base-thread instance, joins once the
/// threads serve the surge (before, the query path would load a replica there for the
/// Overloaded instance, which is not what this test is about).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_surge_gets_threads_first_then_base_thread_replicas_then_scales_back() {
    const PEAK_HOLD_S: f64 = 15.0;
    let Some(ort) = ort_library() else { return };
    const HEAVY: &str = "digits-mlp-heavy";
    let b = Backends::embedded();
    // Twelve pairs of 256-row MatMuls: about 30 ms a query at one thread, in operations large
    // enough for more intra-op threads to speed up.
    let Some(heavy) = registry_common::heavy_mlp(b.dir.path(), &["12", "256"]) else {
        return;
    };
    let mut cfg = fast_config(&b, &ort);
    // Variants at one thread (the base threads); the embedded worker holds no instance.
    cfg.worker_cores = Some(1);
    cfg.worker_thread_budget = Some(0);
    cfg.evict_idle_secs = 3600;
    cfg.log_level = "warn".into();
    cfg.profile_runs = 20;
    cfg.autoscale = AutoscaleConfig {
        enabled: true,
        model_interval_ms: 1000,
        worker_interval_ms: 1000,
        exact_interval_ms: 0,
        vertical: true,
        // The gain of a thread as measured here on this model: 1.5x at two threads.
        vertical_parallel_fraction: 0.67,
        // Only the forecast settles the load (Themis §5.1.3), never a count of calm periods.
        stable_periods: 1000,
        // The surge's rate is planned for until the calm has lasted this long.
        peak_hold_secs: PEAK_HOLD_S,
        worker_provider: WorkerProviderKind::None,
        interference_factor: 1000.0,
        ..AutoscaleConfig::default()
    };
    let objects = cfg.object_store.clone().unwrap();
    let p = Platform::start(cfg).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(
        &t,
        &Registration::default()
            .text("name", HEAVY)
            .text("app", APP)
            .text("max_batch", "1")
            .file(
                "model",
                int8_loses_accuracy(&std::fs::read(&heavy).unwrap()),
                "digits-mlp-heavy.onnx",
            )
            .file(
                "validation",
                registry_common::zoo_bytes("digits-val.npz"),
                "digits-val.npz",
            ),
    )
    .await;
    let model = p.wait_ready(&t, HEAVY, READY_HEAVY).await;
    let all = variants(&model);
    let memory = |name: &str| -> u64 {
        model["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == name)
            .unwrap()["memory_bytes"]
            .as_u64()
            .unwrap()
    };
    // The instance: an FP32 file's variant (the source's, or the ORT-optimised one's when the
    // registration pruned the source's), whose profile holds under serving (the int8 file's
    // MatMuls profile faster than they serve beside the HTTP edge); the worker's memory has no
    // room for any other variant beside it.
    let base = ["source", "optimized"]
        .iter()
        .find_map(|f| all.iter().find(|v| v.file == *f))
        .unwrap()
        .clone();
    let base_memory = memory(&base.name);
    let smallest = all.iter().map(|v| memory(&v.name)).min().unwrap();
    println!(
        "variants: {all:#?}; instance of {} ({base_memory} bytes)",
        base.name
    );

    let (_a, a_id) = spawn_worker(
        &p,
        &objects,
        &ort,
        "threads",
        (2, 2, base_memory + smallest / 2),
    )
    .await;
    let cluster = p.server.state.cluster.clone();
    cluster.refresh_catalog().await.unwrap();
    let served = cluster
        .catalog()
        .variants()
        .find(|s| s.entry.variant.name == base.name)
        .unwrap()
        .clone();
    let req = infaas_control::serving::load_request(&served);
    cluster.handle(&a_id).unwrap().load(&req).await.unwrap();
    cluster.loaded(&a_id, &req);

    let mut ramp = Ramp::new(&p, &t, BTreeMap::new());
    let s = Duration::from_secs;
    // 1.1 base instances' worth of demand: two threads on one instance (1.5x by the parallel
    // fraction above), or two instances at one thread on as many cores, serving more (2x).
    // Not more: beside a busy test run two threads served 1.3x, and the backlog queued before
    // they came then drains only at the difference.
    let surge = 1.1 * base.peak;
    let calm = 0.25 * base.peak;
    println!(
        "base peak {:.0} rows/s: surge {surge:.0}, calm {calm:.0} queries/s",
        base.peak
    );
    let monitor = {
        let (http, base, token) = (p.http.clone(), p.base.clone(), t.token.clone());
        tokio::spawn(async move {
            let began = Instant::now();
            loop {
                tokio::time::sleep(Duration::from_secs(1)).await;
                let Ok(w) = http
                    .get(format!("{base}/v1/workers"))
                    .bearer_auth(&token)
                    .send()
                    .await
                else {
                    break;
                };
                let w: Value = w.json().await.unwrap_or(Value::Null);
                let inst: Vec<String> = w["workers"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|w| {
                        let n = w["name"].clone();
                        let list = w["instances"].as_array().cloned().unwrap_or_default();
                        list.into_iter().map(move |i| {
                            format!(
                                "{n} {} {}t {} {:.0}/s q{}",
                                i["variant"], i["threads"], i["state"], i["qps"], i["queue_rows"]
                            )
                        })
                    })
                    .collect();
                println!("[{:.0}s] {inst:?}", began.elapsed().as_secs_f64());
            }
        })
    };
    // Calm: the model autoscaler's forecaster sees the family's arrivals for ten periods.
    ramp.phase(calm, s(11), s(11), &[]).await;
    // Surge: threads first.
    ramp.phase(surge, s(1), s(30), &["add-threads"]).await;
    // Held, the forecast says it stays: base-thread instances. A second worker joins once the
    // threads serve the surge (the instance is no longer Overloaded, so the query path does
    // not load a replica there first).
    let join_when_relieved = async {
        let start = Instant::now();
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = placements(&p, &t).await;
            if now
                .iter()
                .any(|(_, _, threads, state)| *threads > 1 && state == "active")
            {
                return spawn_worker(&p, &objects, &ort, "replicas", (1, 1, 1 << 30)).await;
            }
            assert!(
                start.elapsed() < s(45),
                "the threads did not relieve the instance: {now:?}"
            );
        }
    };
    let (held_events, (_b, _)) = tokio::join!(
        ramp.phase(surge, s(1), s(75), &["rebalance"]),
        join_when_relieved
    );
    let held = placements(&p, &t).await;
    // The load falls: back to one instance at base threads, once the surge's rate has left
    // the peak hold (a period's alignment early at most).
    let calm_began = Instant::now();
    let list = ramp
        .phase(calm, s(1), s(60 + PEAK_HOLD_S as u64), &["remove-replica"])
        .await;
    let calm_took = calm_began.elapsed();
    assert!(
        calm_took.as_secs_f64() >= PEAK_HOLD_S - 1.0,
        "scaled in {calm_took:?} into the calm, within the peak hold of {PEAK_HOLD_S} s"
    );
    let end = placements(&p, &t).await;
    monitor.abort();
    for e in &list {
        println!("  {} {}: {}", e["action"], e["worker"], e["reason"]);
    }
    println!("held: {held:?}; end: {end:?}");
    ramp.finish().await;
    let statuses = ramp.statuses.lock().unwrap().clone();
    println!("statuses: {statuses:?}");
    let failed: usize = statuses
        .iter()
        .filter(|(c, _)| **c >= 500 || **c == 0)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(failed, 0, "queries failed: {statuses:?}");
    // In order: threads, then the split, then the scale-in; nothing else loaded the replica.
    let names = actions(&list);
    let first = |a: &str| names.iter().position(|n| n == a).unwrap();
    assert!(first("add-threads") < first("rebalance"), "{names:?}");
    assert!(first("rebalance") < first("remove-replica"), "{names:?}");
    assert!(
        !names[..first("rebalance")]
            .iter()
            .any(|n| n == "replicate" || n == "load-on-demand" || n.ends_with("-failed")),
        "{names:?}"
    );
    // No threads come back after the split (an instance just given back its threads is judged
    // a window behind; before, it got them again at once).
    assert!(
        !names[first("rebalance")..]
            .iter()
            .any(|n| n == "add-threads"),
        "{names:?}"
    );
    let add = &list[first("add-threads")];
    assert_eq!(add["worker"], "threads", "{add}");
    // The split was the forecast's call, on no more cores: 2 threads -> 2 instances x 1.
    let split = &held_events[held_events
        .iter()
        .position(|e| e["action"] == "rebalance")
        .unwrap()];
    let reason = split["reason"].as_str().unwrap();
    assert!(reason.contains("load settled (forecast max"), "{reason}");
    assert!(
        split["cost_after_per_s"].as_f64().unwrap() <= split["cost_before_per_s"].as_f64().unwrap(),
        "{split}"
    );
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(
        held.iter().all(|(_, _, threads, _)| *threads == 1),
        "{held:?}"
    );
    // Back to the cheapest configuration: one instance at base threads.
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0].2, 1, "{end:?}");
    // The application's forecast saw the surge.
    let view = p.get(&t, &format!("/v1/apps/{APP}/forecast")).await;
    assert_eq!(view.status, StatusCode::OK, "{}", view.text);
    let observed_max = view.body["observed"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o[1].as_f64())
        .fold(0.0, f64::max);
    assert!(observed_max >= 0.8 * surge, "{observed_max} {surge}");
    p.stop().await;
}
