//! Recorded traffic and what-if planning end to end, through HTTP on an in-process server
//! with a registered zoo model: queries are recorded and exported as a trace that counts
//! them; SIMULATED runs (a generated trace, the recorded one) complete with their progress,
//! per-policy totals, series and plot; the per-tenant limit, deletion under way, isolation
//! between tenants and refused requests; the dashboard's pages and form; and a restart that
//! keeps finished runs and fails the one it interrupted; `infaas traces recorded`. On both
//! backend pairs.
//!
//! `cargo nextest run -p infaas --test integration whatif::`. Needs ONNX Runtime.
#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::time::{Duration, Instant};

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use registry_common::backends::{on_both_pairs, Backends};
use registry_common::{
    digit_row, fast_config, open_quotas, ort_library, Answer, Platform, Registration, Tenant,
};
use reqwest::multipart::Form;
use reqwest::StatusCode;
use serde_json::{json, Value};

use super::dashboard_jobs::{unescape, Browser};

const APP: &str = "digits";
const MODEL: &str = "digits-logreg";
const READY: Duration = Duration::from_secs(180);
/// A small generated trace: about 3,000 queries over a minute.
const SPEC: &str = "poisson:rate=50,duration=60,app=digits,slo=100";
/// A large one (about 200,000 queries), that takes a while to simulate.
const BIG_SPEC: &str = "poisson:rate=2000,duration=100,app=digits,slo=100";

on_both_pairs!(
    recorded_traffic_and_whatif_runs,
    whatif_dashboard_and_restart
);

/// A tenant with an admin key (for the dashboard) and a token (for the API).
async fn tenant_with_key(p: &Platform, name: &str) -> (Tenant, String) {
    let tenant = p.db().create_tenant(name, open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    let a = p
        .send(
            p.http
                .post(format!("{}/v1/auth/token", p.base))
                .json(&json!({ "api_key": key.secret })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let t = Tenant {
        id: tenant.id,
        name: name.into(),
        token: a.body["access_token"].as_str().unwrap().to_string(),
    };
    (t, key.secret)
}

async fn post(p: &Platform, t: &Tenant, path: &str, body: Value) -> Answer {
    p.send(
        p.http
            .post(format!("{}{path}", p.base))
            .bearer_auth(&t.token)
            .json(&body),
    )
    .await
}

async fn start_run(p: &Platform, t: &Tenant, body: Value) -> Answer {
    post(p, t, "/v1/whatif", body).await
}

/// Polls a run until it has ended; panics after `timeout` with the run.
async fn wait_run(p: &Platform, t: &Tenant, id: &str, timeout: Duration) -> Value {
    let start = Instant::now();
    loop {
        let a = p.get(t, &format!("/v1/whatif/{id}")).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        let status = a.body["status"].as_str().unwrap().to_string();
        // Progress per policy never passes the trace.
        for pr in a.body["progress"].as_array().unwrap() {
            assert!(pr["done"].as_u64() <= pr["total"].as_u64(), "{pr}");
            assert_eq!(pr["total"], a.body["trace"]["queries"], "{pr}");
        }
        if status == "succeeded" || status == "failed" {
            return a.body;
        }
        assert!(
            start.elapsed() < timeout,
            "run {id} not done after {timeout:?}: {}",
            a.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts a run, retrying while the tenant's earlier run still holds its place (429).
async fn start_when_free(p: &Platform, t: &Tenant, body: Value) -> Value {
    let start = Instant::now();
    loop {
        let a = start_run(p, t, body.clone()).await;
        if a.status == StatusCode::ACCEPTED {
            return a.body;
        }
        assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS, "{}", a.text);
        assert!(start.elapsed() < Duration::from_secs(120), "{}", a.text);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The data lines of a CSV trace: (time_ms, app, slo_ms, min_accuracy).
fn trace_lines(csv: &str) -> Vec<(f64, String, String, String)> {
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("time_ms,app,slo_ms,min_accuracy"),
        "{csv}"
    );
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            assert_eq!(f.len(), 4, "{l}");
            (
                f[0].parse().unwrap(),
                f[1].to_string(),
                f[2].to_string(),
                f[3].to_string(),
            )
        })
        .collect()
}

/// Checks a succeeded run's results against its trace and returns them by policy.
fn check_results(run: &Value, policies: &[&str]) -> Vec<Value> {
    assert_eq!(run["status"], "succeeded", "{run}");
    assert_eq!(run["simulated"], true);
    let queries = run["trace"]["queries"].as_u64().unwrap();
    assert!(queries > 0);
    for pr in run["progress"].as_array().unwrap() {
        assert_eq!(pr["done"].as_u64(), Some(queries), "{pr}");
    }
    let results = run["results"].as_array().unwrap().clone();
    let names: Vec<&str> = results
        .iter()
        .map(|r| r["policy"].as_str().unwrap())
        .collect();
    assert_eq!(names, policies);
    for r in &results {
        let s = &r["summary"];
        assert_eq!(s["queries"].as_u64(), Some(queries), "{}", r["policy"]);
        assert_eq!(r["apps"][0]["app"], APP);
        assert_eq!(r["apps"][0]["queries"].as_u64(), Some(queries));
        let arrivals: u64 = r["series"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["arrivals"].as_u64().unwrap())
            .sum();
        assert_eq!(arrivals, queries, "the series counts every query once");
    }
    results
}

async fn recorded_traffic_and_whatif_runs(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let mut config = fast_config(b, &ort);
    config.whatif.max_csv_bytes = 64 << 10;
    let p = Platform::start(config).await;
    let (t, key) = tenant_with_key(&p, "acme").await;
    let (other, _) = tenant_with_key(&p, "globex").await;
    p.register_ok(&t, &Registration::zoo(MODEL, APP)).await;
    p.wait_ready(&t, MODEL, READY).await;

    // Queries: 30 to the application (SLO 100 ms, accuracy 0.5), 5 to the model; one to an
    // unknown application, which is not recorded.
    for i in 0..30 {
        let body =
            json!({"inputs": [digit_row("input", i)], "latency_ms": 100, "min_accuracy": 0.5});
        let a = post(&p, &t, &format!("/v1/apps/{APP}/infer"), body).await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    }
    for i in 0..5 {
        let a = post(
            &p,
            &t,
            &format!("/v1/models/{MODEL}/infer"),
            json!({"inputs": [digit_row("input", i)]}),
        )
        .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    }
    let a = post(
        &p,
        &t,
        "/v1/apps/nope/infer",
        json!({"inputs": [digit_row("input", 0)]}),
    )
    .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);

    // The recorded trace counts them, under the application, in time order.
    let export = p.get(&t, "/v1/traces/recorded?minutes=5").await;
    assert_eq!(export.status, StatusCode::OK, "{}", export.text);
    let lines = trace_lines(&export.text);
    assert_eq!(lines.len(), 35, "{}", export.text);
    assert!(lines.iter().all(|l| l.1 == APP), "{}", export.text);
    assert!(lines.windows(2).all(|w| w[0].0 <= w[1].0));
    assert!(lines[0].0 < 1000.0, "times start at the first second");
    assert!(lines.iter().any(|l| l.2 == "100" && l.3 == "0.5"));
    let again = p
        .get(&t, &format!("/v1/traces/recorded?app={APP}&minutes=5"))
        .await;
    assert_eq!(
        again.text, export.text,
        "the same record exports the same trace"
    );
    let resp = p
        .http
        .get(format!("{}/v1/traces/recorded", p.base))
        .bearer_auth(&t.token)
        .send()
        .await
        .unwrap();
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    // The CLI downloads the same trace.
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("recorded.csv");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args(["traces", "recorded", "--app", APP, "--minutes", "5", "-o"])
        .arg(&file)
        .env("INFAAS_SERVER", &p.base)
        .env("INFAAS_API_KEY", &key)
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env_remove("INFAAS_CONFIG")
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), export.text);
    assert!(String::from_utf8_lossy(&out.stderr).contains("35 queries written"));
    // Another tenant sees none of it.
    let theirs = p.get(&other, "/v1/traces/recorded").await;
    assert_eq!(theirs.status, StatusCode::OK);
    assert_eq!(theirs.text, "time_ms,app,slo_ms,min_accuracy\n");
    let a = p
        .get(&other, &format!("/v1/traces/recorded?app={APP}"))
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND, "{}", a.text);
    for bad in ["minutes=0", "minutes=10081", "minutes=x"] {
        let a = p.get(&t, &format!("/v1/traces/recorded?{bad}")).await;
        assert_eq!(a.status, StatusCode::BAD_REQUEST, "{bad}: {}", a.text);
    }

    // A large run holds the tenant's one place: a second is refused with 429 until it ends;
    // deleting it under way frees the place once the policy it simulates is done.
    let big = start_run(
        &p,
        &t,
        json!({"trace": {"generate": BIG_SPEC}, "policies": ["infaas_greedy", "static_peak"]}),
    )
    .await;
    assert_eq!(big.status, StatusCode::ACCEPTED, "{}", big.text);
    let big_id = big.body["id"].as_str().unwrap().to_string();
    assert!(
        ["queued", "running"].contains(&big.body["status"].as_str().unwrap()),
        "{}",
        big.text
    );
    assert_eq!(
        big.body["cluster"]["cpu_workers"], 1,
        "the live cluster by default"
    );
    let resp = p
        .http
        .post(format!("{}/v1/whatif", p.base))
        .bearer_auth(&t.token)
        .json(&json!({"trace": {"generate": SPEC}, "policies": ["static_peak"]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().contains_key("retry-after"));
    let body: Value = resp.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("whatif.max_unfinished_per_tenant"),
        "{body}"
    );
    // Its progress is visible while it runs.
    let start = Instant::now();
    loop {
        let a = p.get(&t, &format!("/v1/whatif/{big_id}")).await;
        assert_eq!(a.status, StatusCode::OK);
        let progress = a.body["progress"].as_array().unwrap();
        assert_eq!(progress.len(), 2);
        assert_eq!(progress[0]["policy"], "infaas_greedy");
        assert!(a.body["results"].is_null());
        if a.body["status"] == "running" {
            break;
        }
        assert_eq!(a.body["status"], "queued", "{}", a.text);
        assert!(start.elapsed() < Duration::from_secs(30), "{}", a.text);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // No plot before it has succeeded.
    let a = p.get(&t, &format!("/v1/whatif/{big_id}/plot.svg")).await;
    assert_eq!(a.status, StatusCode::CONFLICT, "{}", a.text);
    assert!(a
        .error()
        .contains("its plot is drawn once it has succeeded"));
    let a = p.delete(&t, &format!("/v1/whatif/{big_id}")).await;
    assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text);
    let a = p.get(&t, &format!("/v1/whatif/{big_id}")).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);

    // A run on a generated trace for the application: static_peak against infaas_greedy.
    let run = start_when_free(
        &p,
        &t,
        json!({"trace": {"generate": SPEC}, "policies": ["static_peak", "infaas_greedy"]}),
    )
    .await;
    let id = run["id"].as_str().unwrap().to_string();
    assert_eq!(run["trace"]["source"], "generate");
    assert_eq!(run["trace"]["apps"], json!([APP]));
    let queries = run["trace"]["queries"].as_u64().unwrap();
    assert!((2500..3500).contains(&queries), "{queries}");
    let run = wait_run(&p, &t, &id, Duration::from_secs(120)).await;
    let results = check_results(&run, &["static_peak", "infaas_greedy"]);
    for r in &results {
        let s = &r["summary"];
        // Every query of the trace is simulated, none dropped on this light trace.
        assert_eq!(
            s["queries"].as_u64().unwrap(),
            queries,
            "{}: {s}",
            r["policy"]
        );
        assert!(
            s["slo_attainment"].as_f64().unwrap() > 0.9,
            "{}: {s}",
            r["policy"]
        );
        assert!(
            s["cost_usd"].as_f64().unwrap() > 0.0,
            "{}: {s}",
            r["policy"]
        );
        assert!(s["mean_accuracy"].as_f64().unwrap() > 0.5, "{s}");
    }
    // Peak provisioning holds the peak's capacity throughout: it misses (almost) nothing, and
    // the platform's autoscaler serves the same trace for no more (both start with what the
    // trace's opening rate needs: on this light trace one instance, which is also its peak).
    // A run is billed until it falls idle after its last answer, which moves with the variant each
    // policy picked for the last query (profiles measured on this machine): a thousandth of the
    // bill is 60 ms of the one instance, far below what a second instance would cost.
    let summary = |policy: &str| {
        results
            .iter()
            .find(|r| r["policy"] == policy)
            .map(|r| r["summary"].clone())
            .unwrap()
    };
    let (peak, greedy) = (summary("static_peak"), summary("infaas_greedy"));
    assert!(
        peak["slo_attainment"].as_f64().unwrap() >= 0.99,
        "static_peak: {peak}"
    );
    assert!(
        greedy["cost_usd"].as_f64().unwrap() <= peak["cost_usd"].as_f64().unwrap() * (1.0 + 1e-3),
        "infaas_greedy {greedy} against static_peak {peak}"
    );
    // The plot: one line per policy in each of the three charts.
    let resp = p
        .http
        .get(format!("{}/v1/whatif/{id}/plot.svg", p.base))
        .bearer_auth(&t.token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.headers()["content-type"], "image/svg+xml");
    let svg = resp.text().await.unwrap();
    assert!(svg.starts_with("<svg xmlns="), "{svg}");
    assert_eq!(svg.matches(r#"<g class="series s1">"#).count(), 3);
    assert_eq!(svg.matches(r#"<g class="series s2">"#).count(), 3);
    assert!(svg.contains("infaas_greedy") && svg.contains("SIMULATED"));

    // The request path's core time (`request_cpu_ms`): on one worker with the live workers'
    // cores (any variant fits), 50 queries/s of 1,000 core-ms each ask for 50 cores beside the
    // instance, whose runs then take (threads + 50) / cores times their profile (25x on two
    // cores); without it the same trace runs at the profile's speed.
    let mut p50 = Vec::new();
    for cpu_ms in [0.0, 1000.0] {
        let body = json!({"trace": {"generate": SPEC}, "policies": ["static_peak"],
            "cpu_workers": 1, "gpu_workers": 0, "request_cpu_ms": cpu_ms});
        let run = start_when_free(&p, &t, body).await;
        let id = run["id"].as_str().unwrap().to_string();
        let run = wait_run(&p, &t, &id, Duration::from_secs(120)).await;
        let results = check_results(&run, &["static_peak"]);
        p50.push(results[0]["summary"]["p50_ms"].as_f64().unwrap());
        let a = p.delete(&t, &format!("/v1/whatif/{id}")).await;
        assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text);
    }
    assert!(
        p50[1] > 1.3 * p50[0],
        "p50 without and with the request path's core time: {p50:?}"
    );

    // A cold start (`cold_start`): the platform's policy starts with nothing loaded, and the
    // first query's selection loads what it needs, as on a server that has just started.
    let mut kinds = Vec::new();
    for cold in [false, true] {
        let body = json!({"trace": {"generate": SPEC}, "policies": ["infaas_greedy"],
            "cold_start": cold});
        let run = start_when_free(&p, &t, body).await;
        let id = run["id"].as_str().unwrap().to_string();
        let run = wait_run(&p, &t, &id, Duration::from_secs(120)).await;
        kinds.push(check_results(&run, &["infaas_greedy"])[0]["actions_by_kind"].clone());
        let a = p.delete(&t, &format!("/v1/whatif/{id}")).await;
        assert_eq!(a.status, StatusCode::NO_CONTENT, "{}", a.text);
    }
    assert!(kinds[0]["provision"].as_u64() > Some(0), "{kinds:?}");
    assert!(kinds[1].get("provision").is_none(), "{kinds:?}");
    assert!(kinds[1]["load-on-demand"].as_u64() > Some(0), "{kinds:?}");

    // A run of the recorded traffic replays the 35 queries.
    let recorded = start_when_free(
        &p,
        &t,
        json!({"trace": {"recorded": {"app": APP, "minutes": 10}}, "policies": ["static_peak"],
               "cpu_workers": 2, "cpu_cores": 4}),
    )
    .await;
    assert_eq!(recorded["trace"]["queries"], 35, "{recorded}");
    assert_eq!(recorded["cluster"]["cpu_workers"], 2);
    let rec_id = recorded["id"].as_str().unwrap().to_string();
    let done = wait_run(&p, &t, &rec_id, Duration::from_secs(60)).await;
    check_results(&done, &["static_peak"]);

    // Listed newest first, without results; another tenant sees none of them.
    let list = p.get(&t, "/v1/whatif").await;
    assert_eq!(list.status, StatusCode::OK);
    let runs = list.body["runs"].as_array().unwrap();
    let ids: Vec<&str> = runs.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(
        ids,
        [rec_id.as_str(), id.as_str()],
        "the deleted run is gone"
    );
    assert!(runs.iter().all(|r| r.get("results").is_none()));
    assert_eq!(p.get(&other, "/v1/whatif").await.body["runs"], json!([]));
    for path in [
        format!("/v1/whatif/{id}"),
        format!("/v1/whatif/{id}/plot.svg"),
    ] {
        let a = p.get(&other, &path).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}: {}", a.text);
    }
    let a = p.delete(&other, &format!("/v1/whatif/{id}")).await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(
        p.get(&t, &format!("/v1/whatif/{id}")).await.status,
        StatusCode::OK
    );

    // Refused requests name the problem and leave no run behind.
    let csv_header = "time_ms,app,slo_ms,min_accuracy\n";
    let policy = || json!(["static_peak"]);
    let oversized = format!("{csv_header}{}", "0,digits,100,\n".repeat(5000));
    for (body, status, says) in [
        (
            json!({"trace": {"generate": SPEC}, "policies": ["fastest"]}),
            StatusCode::BAD_REQUEST,
            "unknown policy 'fastest'",
        ),
        (
            json!({"trace": {"generate": SPEC}, "policies": []}),
            StatusCode::BAD_REQUEST,
            "policies is empty",
        ),
        (
            json!({"trace": {"generate": SPEC}, "policies": ["static_peak", "static_peak"]}),
            StatusCode::BAD_REQUEST,
            "named twice",
        ),
        (
            json!({"trace": {"generate": "poisson:rate=5"}, "policies": policy()}),
            StatusCode::BAD_REQUEST,
            "'duration' is required",
        ),
        (
            json!({"trace": {"csv": format!("{csv_header}0,digits,100,\nsoon,digits,,\n")}, "policies": policy()}),
            StatusCode::BAD_REQUEST,
            "the CSV trace, line 3: time_ms 'soon'",
        ),
        (
            json!({"trace": {"csv": csv_header}, "policies": policy()}),
            StatusCode::BAD_REQUEST,
            "holds no arrivals",
        ),
        (
            json!({"trace": {"csv": format!("{csv_header}0,cats,100,\n")}, "policies": policy()}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "the trace names application 'cats'",
        ),
        (
            json!({"trace": {"generate": "poisson:rate=5,duration=10,app=cats"}, "policies": policy()}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "application 'cats'",
        ),
        (
            json!({"trace": {"recorded": {"app": "cats", "minutes": 5}}, "policies": policy()}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "application 'cats' is not an application of the tenant",
        ),
        (
            json!({"trace": {"generate": "poisson:rate=1e6,duration=60,app=digits"}, "policies": policy()}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "whatif.max_queries",
        ),
        (
            json!({"trace": {"generate": "poisson:rate=1,duration=9000,app=digits"}, "policies": policy()}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "whatif.max_duration_s",
        ),
        (
            json!({"trace": {"csv": oversized}, "policies": policy()}),
            StatusCode::PAYLOAD_TOO_LARGE,
            "whatif.max_csv_bytes",
        ),
        (
            json!({"trace": {"generate": SPEC}, "policies": policy(), "cpu_workers": 0, "gpu_workers": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "needs a worker: cpu_workers and gpu_workers are both 0",
        ),
        (
            json!({"trace": {"generate": SPEC}, "policies": policy(), "colour": "blue"}),
            StatusCode::BAD_REQUEST,
            "colour",
        ),
        (
            json!({"trace": {"generate": SPEC, "csv": "x"}, "policies": policy()}),
            StatusCode::BAD_REQUEST,
            "invalid JSON body",
        ),
    ] {
        let a = start_run(&p, &t, body.clone()).await;
        assert_eq!(a.status, status, "{body}: {}", a.text);
        assert!(a.error().contains(says), "{body}: {}", a.text);
    }
    // The other tenant has no application and no traffic.
    let a = start_run(
        &p,
        &other,
        json!({"trace": {"recorded": {"minutes": 5}}, "policies": policy()}),
    )
    .await;
    assert_eq!(a.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", a.text);
    assert!(a
        .error()
        .contains("no query to the tenant's applications was recorded"));
    let list = p.get(&t, "/v1/whatif").await;
    assert_eq!(list.body["runs"].as_array().unwrap().len(), 2);
    p.stop().await;
}

async fn whatif_dashboard_and_restart(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let config = fast_config(b, &ort);
    let p = Platform::start(config.clone()).await;
    let (t, key) = tenant_with_key(&p, "acme").await;
    p.register_ok(&t, &Registration::zoo(MODEL, APP)).await;
    p.wait_ready(&t, MODEL, READY).await;
    let browser = Browser::sign_in(&p.base, &key).await;

    // The page offers the form: recorded traffic of the tenant's applications, policies.
    let (status, html) = browser.get("/ui/whatif").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(html.contains(r#"id="whatif-form""#), "{html}");
    assert!(
        html.contains(&format!(r#"<option value="{APP}">"#)),
        "{html}"
    );
    assert!(html.contains(r#"id="policy-infaas_exact""#), "{html}");
    assert!(html.contains("No what-if run yet."));

    let form = |csrf: Option<&str>, source: &str, spec: &str| {
        let mut f = Form::new();
        if let Some(c) = csrf {
            f = f.text("csrf", c.to_string());
        }
        f.text("source", source.to_string())
            .text("app", "")
            .text("minutes", "10")
            .text("spec", spec.to_string())
            .text("csv", "")
            .part(
                "csv_file",
                reqwest::multipart::Part::bytes(Vec::new()).file_name(""),
            )
            .text("policy", "static_peak")
            .text("policy", "infaas_greedy")
            .text("cpu_workers", "")
            .text("cpu_cores", "")
            .text("gpu_workers", "")
    };
    // Without the session's token first, nothing is read.
    let resp = browser
        .post_to("/ui/whatif", form(None, "generate", SPEC))
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    // A refused form says why and keeps its fields.
    let resp = browser
        .post_to(
            "/ui/whatif",
            form(Some(&browser.csrf), "generate", "poisson:rate=5"),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    let html = unescape(&resp.text().await.unwrap());
    assert!(
        html.contains(r#"id="whatif-error">invalid workload generator 'poisson:rate=5': 'duration' is required"#),
        "{html}"
    );
    assert!(html.contains(r#"value="poisson:rate=5""#), "{html}");
    assert!(
        html.contains(r#"id="policy-infaas_greedy" checked"#),
        "{html}"
    );
    // An accepted one redirects to the run's page, which follows it to the end.
    let resp = browser
        .post_to("/ui/whatif", form(Some(&browser.csrf), "generate", SPEC))
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let location = resp.headers()["location"].to_str().unwrap().to_string();
    let id = location.strip_prefix("/ui/whatif/").unwrap().to_string();
    let start = Instant::now();
    let html = loop {
        let (status, html) = browser.get(&location).await;
        assert_eq!(status, StatusCode::OK, "{html}");
        if html.contains(r#"id="run-status" class="status succeeded""#) {
            assert!(
                !html.contains("data-live="),
                "a finished run still refreshes"
            );
            break html;
        }
        assert!(!html.contains("class=\"status failed\""), "{html}");
        assert!(
            html.contains(&format!(r#"data-live-src="/ui/whatif/{id}""#)),
            "{html}"
        );
        assert!(start.elapsed() < Duration::from_secs(120), "{html}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(html.contains("SIMULATED"));
    for policy in ["static_peak", "infaas_greedy"] {
        assert!(
            html.contains(&format!(r#"<tr id="result-{policy}">"#)),
            "{html}"
        );
        assert!(
            html.contains(&format!(r#"<table id="apps-{policy}">"#)),
            "{html}"
        );
    }
    assert_eq!(html.matches(r#"<svg class="chart""#).count(), 3, "{html}");
    let (_, list) = browser.get("/ui/whatif").await;
    assert!(list.contains(&format!(r#"<tr id="run-{id}">"#)), "{list}");
    assert!(!list.contains("data-live="), "{list}");
    // Another tenant's run is a missing page.
    let (other, other_key) = tenant_with_key(&p, "globex").await;
    let intruder = Browser::sign_in(&p.base, &other_key).await;
    let (status, _) = intruder.get(&location).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(
        p.get(&other, &format!("/v1/whatif/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    let finished = p.get(&t, &format!("/v1/whatif/{id}")).await.body;
    check_results(&finished, &["static_peak", "infaas_greedy"]);

    // A deleted run leaves the list (the form carries the token).
    let doomed = start_when_free(
        &p,
        &t,
        json!({"trace": {"generate": SPEC}, "policies": ["static_peak"]}),
    )
    .await;
    let doomed_id = doomed["id"].as_str().unwrap().to_string();
    wait_run(&p, &t, &doomed_id, Duration::from_secs(60)).await;
    let resp = browser
        .post_fields(
            &format!("/ui/whatif/{doomed_id}/delete"),
            &[("csrf", "bad")],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let resp = browser
        .post_fields(
            &format!("/ui/whatif/{doomed_id}/delete"),
            &[("csrf", &browser.csrf)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(
        p.get(&t, &format!("/v1/whatif/{doomed_id}")).await.status,
        StatusCode::NOT_FOUND
    );

    // A large run is under way when the server stops: after a restart it is failed, and the
    // finished run is kept with its results.
    let big = start_when_free(
        &p,
        &t,
        json!({"trace": {"generate": BIG_SPEC}, "policies": ["infaas_greedy"]}),
    )
    .await;
    let big_id = big["id"].as_str().unwrap().to_string();
    let start = Instant::now();
    while p.get(&t, &format!("/v1/whatif/{big_id}")).await.body["status"] != "running" {
        assert!(start.elapsed() < Duration::from_secs(30));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    p.stop().await;
    let p = Platform::start(config).await;
    let a = p.get(&t, &format!("/v1/whatif/{big_id}")).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    assert_eq!(a.body["status"], "failed", "{}", a.text);
    assert!(
        a.body["error"].as_str().unwrap().contains("interrupted"),
        "{}",
        a.text
    );
    assert!(a.body["finished_at_ms"].is_i64());
    let kept = p.get(&t, &format!("/v1/whatif/{id}")).await;
    assert_eq!(kept.status, StatusCode::OK);
    assert_eq!(kept.body, finished, "a finished run survives the restart");
    p.stop().await;
}
