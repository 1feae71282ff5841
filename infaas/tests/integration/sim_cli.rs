//! `infaas sim` as a user runs it: a generated workload on a catalogue of their own, two
//! policies, the JSON report, the CSV series and the SVG plot; and bad input named.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

const CATALOGUE: &str = "Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,Normalized_Accuracy
resnet18_v1,onnxruntime_cpu,100,1,8,9,8.5,7,12,69.8,80
resnet18_v1,onnxruntime_cpu,100,4,20,24,21,18,30,69.8,80
resnet50_v1,onnxruntime_cpu,100,1,30,34,31,28,40,76.1,90
resnet50_v1,onnxruntime_gpu_ampere,100,1,3,3.5,3.2,2.8,5,76.1,90
resnet50_v1,onnxruntime_gpu_ampere,100,8,9,10,9.5,8,14,76.1,90
";

fn sim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_infaas"))
        .arg("sim")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn a_generated_workload_is_simulated_under_two_policies_with_report_series_and_plot() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(p("profiles.csv"), CATALOGUE).unwrap();
    let out = sim(&[
        "--generate",
        "poisson:rate=200,duration=20,app=resnet,slo=100",
        "--profiles",
        &p("profiles.csv"),
        "--policy",
        "static_peak,infaas_greedy",
        "--out",
        &p("out.json"),
        "--series",
        &p("series.csv"),
        "--plot",
        &p("plot.svg"),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("static_peak") && stdout.contains("infaas_greedy"),
        "{stdout}"
    );

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p("out.json")).unwrap()).unwrap();
    assert_eq!(report["simulated"], true);
    let queries = report["trace"]["queries"].as_u64().unwrap();
    assert!((3_500..4_500).contains(&queries), "{queries}");
    let policies = report["policies"].as_array().unwrap();
    assert_eq!(policies.len(), 2);
    for policy in policies {
        let s = &policy["summary"];
        assert_eq!(s["queries"].as_u64(), Some(queries));
        for key in [
            "slo_attainment",
            "p99_ms",
            "cost_usd",
            "mean_accuracy",
            "dropped",
            "sim_queries_per_s",
        ] {
            assert!(!s[key].is_null(), "{key} missing: {s}");
        }
        assert!(s["cost_usd"].as_f64().unwrap() > 0.0);
        assert_eq!(policy["apps"][0]["app"], "resnet");
        assert!(policy["series"].as_array().unwrap().len() >= 20);
    }
    // Provisioned for the peak on the accurate GPU variant: everything within the SLO.
    assert!(policies[0]["summary"]["slo_attainment"].as_f64().unwrap() > 0.99);
    assert!((policies[0]["summary"]["mean_accuracy"].as_f64().unwrap() - 0.761).abs() < 1e-9);

    let series = std::fs::read_to_string(p("series.csv")).unwrap();
    assert!(
        series.starts_with("policy,second,arrivals,slo_attainment,"),
        "{series}"
    );
    assert!(
        series
            .lines()
            .filter(|l| l.starts_with("infaas_greedy,"))
            .count()
            >= 20
    );

    let svg = std::fs::read_to_string(p("plot.svg")).unwrap();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    // Three charts, each placed below the last.
    assert_eq!(svg.matches(r#"class="chart""#).count(), 3);
    for y in ["y=\"0\"", "y=\"210\"", "y=\"420\""] {
        assert!(svg.contains(y), "{y}");
    }
    assert!(svg.matches("SIMULATED").count() >= 3);
    assert!(svg.contains("static_peak") && svg.contains("infaas_greedy"));
    // Actions by kind: static provisioning only provisions.
    let kinds = policies[0]["actions_by_kind"].as_object().unwrap();
    assert_eq!(kinds.keys().collect::<Vec<_>>(), ["provision"], "{kinds:?}");
}

/// Worker autoscaling and a noisy neighbour from the command line: the worker series and the
/// actions by kind say what the platform did.
#[test]
fn workers_grow_and_noise_shows_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(p("profiles.csv"), CATALOGUE).unwrap();
    let out = sim(&[
        "--generate",
        "step:from=20,to=600,at=10,duration=90,app=resnet,slo=150",
        "--profiles",
        &p("profiles.csv"),
        "--policy",
        "infaas_greedy",
        "--cpu-workers",
        "1",
        "--cpu-cores",
        "8",
        "--gpu-workers",
        "0",
        "--max-cpu-workers",
        "4",
        "--worker-start-s",
        "5",
        "--noise",
        "worker=0,from=60,factor=1.5",
        "--job",
        "app=resnet,rows=2000,at=2",
        "--out",
        &p("out.json"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(p("out.json")).unwrap()).unwrap();
    let r = &report["policies"][0];
    let workers: Vec<u64> = r["series"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cpu_workers"].as_u64().unwrap())
        .collect();
    assert_eq!(workers[0], 1, "{workers:?}");
    assert!(workers.iter().any(|&w| w > 1), "{workers:?}");
    assert!(workers.iter().all(|&w| w <= 4), "{workers:?}");
    assert!(
        r["actions_by_kind"]["add-worker"].as_u64().unwrap_or(0) >= 1,
        "{}",
        r["actions_by_kind"]
    ); // The offline job was worked through.
    assert_eq!(r["jobs"][0]["done_rows"], 2000, "{}", r["jobs"]);
    assert!(r["jobs"][0]["finished_s"].as_f64().unwrap() > 2.0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("job of 2000 rows for resnet: 2000 done"),
        "{stdout}"
    );
}

#[test]
fn bad_input_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let profiles = dir.path().join("profiles.csv");
    std::fs::write(&profiles, CATALOGUE).unwrap();
    let profiles = profiles.display().to_string();
    for (args, says) in [
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--policy",
                "clipper",
            ],
            "unknown policy 'clipper'",
        ),
        (
            vec!["--generate", "poisson:rate=10", "--policy", "static_peak"],
            "'duration' is required",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=bert",
                "--policy",
                "static_peak",
            ],
            "no profile of the catalogue serves application 'bert'",
        ),
        (
            vec!["--trace", "/nonexistent/trace.csv"],
            "cannot read /nonexistent/trace.csv",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--noise",
                "worker=99,from=1,factor=2",
            ],
            "--noise worker=99: the cluster starts with 32 workers",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--request-cpu-ms",
                "2000",
            ],
            "--request-cpu-ms 2000 must be from 0 to 1000",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--noise",
                "worker=0,factor=0.5",
            ],
            "factor 0.5 must be at least 1",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--job",
                "app=bert,rows=10",
            ],
            "--job app=bert: the trace has no such application (resnet)",
        ),
        (
            vec![
                "--generate",
                "poisson:rate=10,duration=5,app=resnet",
                "--model-interval-ms",
                "5",
            ],
            "--model-interval-ms 5 must be at least 10",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--profiles", &profiles]);
        let out = sim(&all);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert!(Path::new(&profiles).exists());
}

/// `infaas sim-pipelines` as a user runs it, on a catalogue and a Proteus-format trace of their
/// own (a detector and two classifiers, a minute of bursty arrivals): the table has InferLine's
/// plan with and without the tuner and both baselines, InferLine meets the SLO at the planned
/// percentile and costs no more than the per-stage plan, and the JSON report says SIMULATED.
#[test]
fn sim_pipelines_plans_tunes_and_compares_with_the_baselines() {
    let dir = tempfile::tempdir().unwrap();
    let mut csv = String::from(
        "Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,Normalized_Accuracy\n",
    );
    for (model, acc, base, per_row) in [
        ("yolov5n", 45.0, 6.0, 2.0),
        ("yolov5s", 56.0, 9.0, 3.0),
        ("resnet18_v1", 69.8, 4.0, 1.5),
        ("resnet50_v1", 76.1, 8.0, 3.0),
    ] {
        for accel in ["onnxruntime_cpu", "onnxruntime_gpu_pascal"] {
            let k = if accel == "onnxruntime_cpu" { 4.0 } else { 1.0 };
            for b in [1, 2, 4, 8, 16] {
                let ms = k * (base + per_row * b as f64);
                csv.push_str(&format!(
                    "{model},{accel},100,{b},{ms},{},{ms},{ms},{},{acc},{acc}\n",
                    ms * 1.1,
                    ms * 1.3
                ));
            }
        }
    }
    std::fs::write(dir.path().join("profiles.csv"), csv).unwrap();
    let traces = dir.path().join("trace");
    std::fs::create_dir(&traces).unwrap();
    // 60 s: 40 q/s, with 120 q/s bursts for 2 s every 10 s.
    let mut lines = String::new();
    let mut t = 0.0f64;
    while t < 60_000.0 {
        lines.push_str(&format!("{t:.1},1,300\n"));
        let bursting = (t / 1000.0) as u64 % 10 < 2;
        t += if bursting { 1000.0 / 120.0 } else { 25.0 };
    }
    std::fs::write(traces.join("yolo.txt"), lines).unwrap();
    let out_json = dir.path().join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args([
            "sim-pipelines",
            "--pipeline",
            "detect-classify",
            "--plan-s",
            "20",
        ])
        .arg("--profiles")
        .arg(dir.path().join("profiles.csv"))
        .arg("--proteus")
        .arg(&traces)
        .arg("--out")
        .arg(&out_json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with("SIMULATED"), "{stdout}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out_json).unwrap()).unwrap();
    assert_eq!(report["simulated"], true);
    let rows = report["pipelines"][0]["rows"].as_array().unwrap();
    let row = |policy: &str| {
        rows.iter()
            .find(|r| r["policy"] == policy)
            .unwrap_or_else(|| panic!("no {policy} row: {stdout}"))
    };
    for policy in ["inferline", "inferline-plan", "per-stage", "cg-peak"] {
        assert!(stdout.contains(policy), "{policy}: {stdout}");
    }
    let inferline = row("inferline");
    assert!(
        inferline["slo_attainment"].as_f64().unwrap() >= 0.995,
        "{stdout}"
    );
    assert!(
        inferline["cost_per_hour"].as_f64().unwrap()
            <= row("per-stage")["cost_per_hour"].as_f64().unwrap() + 1e-9,
        "{stdout}"
    );
    assert!(inferline["estimates"].as_u64().unwrap() > 0);
    // An unknown pipeline is named, with the known ones.
    let bad = Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args(["sim-pipelines", "--pipeline", "nope"])
        .arg("--profiles")
        .arg(dir.path().join("profiles.csv"))
        .arg("--proteus")
        .arg(&traces)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("unknown pipeline 'nope'") && err.contains("detect-classify"),
        "{err}"
    );
}
