//! The `infaas` CLI against a live in-process server, run as the real binary: models
//! register / list / show, apps, infer (table and `--json`), jobs submit --wait / status /
//! list / results / wait / cancel, and exit codes: a bad query, a failed job and a cancelled
//! job exit non-zero with the reason on stderr.
//!
//! `cargo nextest run -p infaas-api --test cli`. Needs ONNX Runtime (`ORT_DYLIB_PATH` or the
//! `scripts/setup.sh` cache).
#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use registry_common::backends::Backends;
use registry_common::{fast_config, open_quotas, ort_library, zoo_dir, Platform};
use serde_json::Value;

const APP: &str = "digits";
const MODEL: &str = "digits-logreg";

/// A tenant's admin API key, made as `infaas admin create-tenant` makes it.
async fn api_key(p: &Platform, tenant: &str) -> String {
    let t = p.db().create_tenant(tenant, open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&t.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    key.secret
}

/// Runs `infaas ARGS` against the server with the key in the environment and a home of
/// its own (no saved login is read).
struct Cli {
    server: String,
    key: String,
    home: PathBuf,
}

impl Cli {
    async fn run(&self, args: &[&str]) -> Output {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_infaas"));
        cmd.args(args)
            .env("INFAAS_SERVER", &self.server)
            .env("INFAAS_API_KEY", &self.key)
            .env("HOME", &self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".config"))
            .env_remove("INFAAS_CONFIG")
            .kill_on_drop(true);
        tokio::time::timeout(Duration::from_secs(300), cmd.output())
            .await
            .unwrap_or_else(|_| panic!("infaas {args:?} did not finish in 300 s"))
            .unwrap()
    }

    /// Runs and asserts success; stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        let (stdout, stderr) = texts(&out);
        assert!(
            out.status.success(),
            "infaas {args:?} failed ({}):\n{stdout}\n{stderr}",
            out.status
        );
        stdout
    }

    /// Runs with `--json` and asserts success; stdout parsed as JSON.
    async fn json(&self, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let stdout = self.ok(&all).await;
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("infaas {all:?} printed invalid JSON ({e}):\n{stdout}"))
    }

    /// Runs and asserts failure; stderr.
    async fn fails(&self, args: &[&str]) -> (String, String) {
        let out = self.run(args).await;
        let (stdout, stderr) = texts(&out);
        assert!(
            !out.status.success(),
            "infaas {args:?} should have failed:\n{stdout}\n{stderr}"
        );
        (stdout, stderr)
    }
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn zoo(file: &str) -> String {
    zoo_dir().join(file).display().to_string()
}

async fn cli_for(p: &Platform, b: &Backends, tenant: &str) -> Cli {
    let home = b.dir.path().join(format!("home-{tenant}"));
    std::fs::create_dir_all(&home).unwrap();
    Cli {
        server: p.base.clone(),
        key: api_key(p, tenant).await,
        home,
    }
}

async fn register(cli: &Cli) {
    let stdout = cli
        .ok(&[
            "models",
            "register",
            "--name",
            MODEL,
            "--app",
            APP,
            "--model",
            &zoo("digits-logreg.onnx"),
            "--validation",
            &zoo("digits-val.npz"),
        ])
        .await;
    assert!(
        stdout.contains(MODEL) && stdout.contains("VARIANT"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_infer_and_jobs_from_the_cli() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let cli = cli_for(&p, &b, "acme").await;

    // Models and applications.
    register(&cli).await;
    let list = cli.json(&["models", "list"]).await;
    let m = &list["models"][0];
    assert_eq!(
        (m["name"].as_str(), m["status"].as_str()),
        (Some(MODEL), Some("ready")),
        "{list}"
    );
    let shown = cli.json(&["models", "show", MODEL]).await;
    assert!(!shown["variants"].as_array().unwrap().is_empty(), "{shown}");
    let table = cli.ok(&["apps", "list"]).await;
    assert!(table.contains(APP) && table.contains(MODEL), "{table}");

    // A query: four rows of the validation set, answered with labels and the variant.
    let npz = format!("input=@{}", zoo("digits-val.npz"));
    let answer = cli
        .json(&[
            "infer",
            "--app",
            APP,
            "--latency-ms",
            "1000",
            "--input",
            &npz,
            "--rows",
            "4",
        ])
        .await;
    assert_eq!(answer["app"], APP, "{answer}");
    assert!(
        answer["variant"].as_str().unwrap().starts_with(MODEL),
        "{answer}"
    );
    assert!(!answer["reason"].as_str().unwrap().is_empty(), "{answer}");
    let labels = answer["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["datatype"] == "INT64")
        .unwrap_or_else(|| panic!("no label output: {answer}"));
    assert_eq!(labels["shape"], serde_json::json!([4]), "{answer}");
    let table = cli
        .ok(&["infer", "--model", MODEL, "--input", &npz, "--rows", "1"])
        .await;
    for field in ["OUTPUT", "variant", "reason", "latency"] {
        assert!(table.contains(field), "no {field} in:\n{table}");
    }
    // Bad queries exit non-zero and say why: the server's 400, and a local parse error.
    let (_, err) = cli
        .fails(&["infer", "--app", APP, "--input", "input=[[1, 2, 3]]"])
        .await;
    assert!(err.contains("400"), "{err}");
    let (_, err) = cli
        .fails(&["infer", "--app", APP, "--input", "input"])
        .await;
    assert!(err.contains("NAME=@FILE"), "{err}");
    let (_, err) = cli
        .fails(&[
            "infer",
            "--app",
            APP,
            "--latency-ms",
            "1000",
            "--input",
            &npz,
            "--min-accuracy",
            "1.5",
        ])
        .await;
    assert!(err.contains("server answered"), "{err}");

    // A job over an uploaded file, followed to the end.
    let job = cli
        .json(&[
            "jobs",
            "submit",
            "--app",
            APP,
            "--min-accuracy",
            "0.5",
            "--file",
            &zoo("digits-val.npz"),
            "--output-path",
            "cli/out",
            "--wait",
        ])
        .await;
    assert_eq!(job["state"], "succeeded", "{job}");
    let items = job["items_total"].as_i64().unwrap();
    assert!(items > 0 && job["items_done"] == items, "{job}");
    assert_eq!(job["output_path"], "cli/out", "{job}");
    let id = job["id"].as_str().unwrap().to_string();
    let status = cli.json(&["jobs", "status", &id]).await;
    assert_eq!(status["state"], "succeeded", "{status}");
    let table = cli.ok(&["jobs", "list"]).await;
    assert!(
        table.contains(&id) && table.contains("succeeded"),
        "{table}"
    );
    let listed = cli.json(&["jobs", "list"]).await;
    assert_eq!(listed["jobs"][0]["id"], id.as_str(), "{listed}");
    let results = b.dir.path().join("results.jsonl");
    cli.ok(&["jobs", "results", &id, "-o", results.to_str().unwrap()])
        .await;
    let lines: Vec<Value> = std::fs::read_to_string(&results)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len() as i64, items);
    assert_eq!(lines[0]["item"], 0, "{}", lines[0]);
    let waited = cli.ok(&["jobs", "wait", &id]).await;
    assert!(waited.contains("succeeded"), "{waited}");

    // A job over a path of the file area, without --wait, then cancelled: waiting on it
    // exits non-zero.
    let (_, err) = cli
        .fails(&[
            "jobs",
            "submit",
            "--model",
            MODEL,
            "--input-path",
            "nothing/here",
        ])
        .await;
    assert!(err.contains("holds no objects"), "{err}");
    // Neither target nor inputs: refused before anything is sent.
    let (_, err) = cli.fails(&["jobs", "submit", "--input-path", "x"]).await;
    assert!(
        err.contains("--app") || err.contains("<--app|--model>"),
        "{err}"
    );
    p.stop().await;
}

/// Polls the job's state through the CLI until `want`.
async fn wait_state(cli: &Cli, id: &str, want: &str) -> Value {
    let start = Instant::now();
    loop {
        let j = cli.json(&["jobs", "status", id]).await;
        if j["state"] == want {
            return j;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "job {id} not {want}: {j}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Jobs that do not succeed: with online load said to be over any limit, jobs stay paused;
/// one is cancelled, the other fails (marked as the runner marks a job whose input is gone).
/// `jobs wait` shows the reason and exits non-zero for both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_that_fail_or_are_cancelled_exit_non_zero() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let mut cfg = fast_config(&b, &ort);
    cfg.job_max_online_utilisation = -1.0;
    let p = Platform::start(cfg).await;
    let cli = cli_for(&p, &b, "acme").await;
    register(&cli).await;

    let file = zoo("digits-val.npz");
    let submit = ["jobs", "submit", "--model", MODEL, "--file", &file];
    let doomed = cli.json(&submit).await;
    let doomed = doomed["id"].as_str().unwrap().to_string();
    let paused = wait_state(&cli, &doomed, "paused").await;
    assert!(paused["paused_reason"].is_string(), "{paused}");
    let shown = cli.ok(&["jobs", "status", &doomed]).await;
    assert!(shown.contains("paused"), "{shown}");
    assert!(p
        .db()
        .set_job_state(
            &doomed,
            "failed",
            None,
            Some("input object 'x.npz' is gone")
        )
        .await
        .unwrap());
    let out = cli.run(&["jobs", "wait", &doomed]).await;
    let (stdout, stderr) = texts(&out);
    assert!(!out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("failed: input object 'x.npz' is gone"),
        "{stderr}"
    );
    // --json still prints the job, for scripts.
    let out = cli.run(&["--json", "jobs", "wait", &doomed]).await;
    let (stdout, _) = texts(&out);
    assert!(!out.status.success());
    let j: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(j["state"], "failed", "{j}");

    let other = cli.json(&submit).await;
    let other = other["id"].as_str().unwrap().to_string();
    let cancelled = cli.json(&["jobs", "cancel", &other]).await;
    assert_eq!(cancelled["state"], "cancelled", "{cancelled}");
    let (_, err) = cli.fails(&["jobs", "wait", &other]).await;
    assert!(err.contains("cancelled"), "{err}");
    let (_, err) = cli.fails(&["jobs", "status", "no-such-job"]).await;
    assert!(err.contains("404"), "{err}");
    p.stop().await;
}

/// `infaas loadgen --trace` replays a trace in the simulator's format: every line is one
/// query to its application with its own SLO (one no variant can meet is refused as
/// unsatisfiable, 422, and counts as a miss), and the percentiles come with `--json`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loadgen_replays_a_trace_with_each_querys_slo() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let cli = cli_for(&p, &b, "acme").await;
    register(&cli).await;
    // 40 queries over 2 s: 30 with a loose SLO, 10 with an SLO of 1 microsecond.
    let mut csv = String::from("time_ms,app,slo_ms,min_accuracy\n");
    for i in 0..40 {
        let slo = if i % 4 == 0 { "0.001" } else { "5000" };
        csv.push_str(&format!("{},{APP},{slo},\n", i * 50));
    }
    let trace = b.dir.path().join("trace.csv");
    std::fs::write(&trace, csv).unwrap();
    let npz = zoo("digits-val.npz");
    let started = Instant::now();
    let r = cli
        .json(&["loadgen", "--trace", trace.to_str().unwrap(), "--npz", &npz])
        .await;
    assert_eq!(r["sent"], 40, "{r}");
    assert_eq!(
        (r["ok"].as_u64(), r["errors"]["422"].as_u64()),
        (Some(30), Some(10)),
        "{r}"
    );
    assert!(
        (r["slo_attainment"].as_f64().unwrap() - 0.75).abs() < 1e-9,
        "{r}"
    );
    assert_eq!(r["percentiles_ms"].as_array().unwrap().len(), 99, "{r}");
    // Open loop at the trace's times: the last query leaves at 1.95 s.
    assert!(started.elapsed() >= Duration::from_millis(1950));
    // A trace naming an application the tenant lacks: its queries fail with 404.
    let other = b.dir.path().join("other.csv");
    std::fs::write(&other, "time_ms,app,slo_ms,min_accuracy\n0,nowhere,,\n").unwrap();
    let r = cli
        .json(&["loadgen", "--trace", other.to_str().unwrap(), "--npz", &npz])
        .await;
    assert_eq!(
        (r["ok"].as_u64(), r["errors"]["404"].as_u64()),
        (Some(0), Some(1)),
        "{r}"
    );
    // A malformed trace is refused before anything is sent, naming the line.
    std::fs::write(&other, "time_ms,app,slo_ms,min_accuracy\nsoon,digits,,\n").unwrap();
    let (_, stderr) = cli
        .fails(&["loadgen", "--trace", other.to_str().unwrap(), "--npz", &npz])
        .await;
    assert!(stderr.contains("line 2"), "{stderr}");
}

/// Pipelines from the CLI: created from YAML with a validation set, shown with it, planned on
/// it (measured accuracy), the set removed; a set that does not fit fails naming the array.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_with_a_validation_set_from_the_cli() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let cli = cli_for(&p, &b, "acme").await;
    register(&cli).await;
    let doc = b.dir.path().join("chain.yaml");
    std::fs::write(
        &doc,
        format!(
            "name: chain\ninputs:\n  - {{name: image, datatype: FP32, shape: [64]}}\nnodes:\n  - {{name: classify, app: {APP}, inputs: {{input: image}}}}\noutputs: {{probabilities: classify.probabilities}}\nslo: {{latency_ms: 1000}}\n"
        ),
    )
    .unwrap();
    let out = cli
        .ok(&[
            "pipelines",
            "create",
            "-f",
            doc.to_str().unwrap(),
            "--validation",
            &zoo("digits-val.npz"),
        ])
        .await;
    assert!(out.contains("pipeline chain registered"), "{out}");
    assert!(
        out.contains("540 rows graded on output 'probabilities'"),
        "{out}"
    );
    let shown = cli.ok(&["pipelines", "show", "chain"]).await;
    assert!(shown.contains("validation set: 540 rows"), "{shown}");
    let plan = cli
        .json(&[
            "pipelines",
            "plan",
            "chain",
            "--generate",
            "poisson:rate=20,duration=20",
        ])
        .await;
    assert_eq!(
        plan["accuracy_source"], "measured on the pipeline's validation set",
        "{plan}"
    );
    // One node: the measured end-to-end accuracy is the model's own on the same set.
    let model = cli.json(&["models", "show", MODEL]).await;
    let own = model["variants"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["accuracy"].as_f64())
        .fold(f64::NAN, f64::max);
    let got = plan["accuracy"].as_f64().unwrap();
    assert!(
        (got - own).abs() < 0.03,
        "plan {got} vs model {own}: {model}"
    );
    let (_, err) = cli
        .fails(&[
            "pipelines",
            "validation",
            "chain",
            &zoo("digits-logreg.onnx"),
        ])
        .await;
    assert!(err.contains("not a valid NPZ"), "{err}");
    let out = cli
        .ok(&["pipelines", "validation", "chain", "--remove"])
        .await;
    assert!(out.contains("removed"), "{out}");
    let shown = cli.ok(&["pipelines", "show", "chain"]).await;
    assert!(!shown.contains("validation set:"), "{shown}");
    p.stop().await;
}
