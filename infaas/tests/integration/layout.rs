//! The workspace's dependency arrows follow the layout (README, "Repository layout"): a crate
//! that gains an arrow the layout forbids fails here, with the rule it breaks. Read from
//! `cargo metadata`, normal (non-dev) dependencies, optional ones included.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Web framework, HTTP server and OpenAPI crates: the HTTP edge's (and the worker's own
/// small server).
const HTTP: &[&str] = &["axum", "hyper", "tower", "tower-http", "utoipa"];
/// Storage drivers.
const STORAGE: &[&str] = &["sqlx", "aws-sdk-s3", "aws-config"];
/// The inference runtime.
const RUNTIME: &[&str] = &["ort"];
/// An async runtime and an HTTP client.
const ASYNC: &[&str] = &["tokio", "reqwest"];
/// The composed binary and the test fixtures: nothing depends on them (tests and benches
/// may, as dev-dependencies).
const BINARY: &[&str] = &["infaas", "infaas-testing"];
/// The crates of the server side, which a client never links.
const SERVER: &[&str] = &[
    "infaas-store",
    "infaas-executors",
    "infaas-scheduler",
    "infaas-sim",
    "infaas-eval",
    "infaas-worker",
    "infaas-onnx",
    "infaas-provision",
    "infaas-web",
    "infaas-control",
    "infaas-api",
];

/// (crate, what it must not depend on, why).
fn rules() -> Vec<(&'static str, Vec<&'static str>, &'static str)> {
    let all = |groups: &[&[&'static str]]| groups.concat();
    vec![
        (
            "infaas-core",
            all(&[HTTP, STORAGE, RUNTIME, ASYNC, BINARY, &["infaas-store", "infaas-executors"]]),
            "domain types depend on no framework",
        ),
        (
            "infaas-scheduler",
            all(&[HTTP, STORAGE, RUNTIME, ASYNC, BINARY, &["infaas-store", "infaas-executors", "infaas-worker"]]),
            "policies are pure functions over snapshots, called alike by the controller and a simulator",
        ),
        (
            "infaas-protocol",
            all(&[
                &["axum", "hyper", "tower", "tower-http"],
                STORAGE,
                RUNTIME,
                ASYNC,
                BINARY,
                &["infaas-store", "infaas-executors"],
            ]),
            "wire formats are plain data (with their OpenAPI schemas), usable by any client",
        ),
        (
            "infaas-onnx",
            all(&[HTTP, STORAGE, RUNTIME, ASYNC, BINARY]),
            "ONNX files as data, without running them",
        ),
        (
            "infaas-web",
            all(&[HTTP, STORAGE, RUNTIME, ASYNC, BINARY, &["infaas-store", "infaas-executors", "infaas-sim", "infaas-eval"]]),
            "pages are templates over view structs",
        ),
        (
            "infaas-store",
            all(&[HTTP, RUNTIME, BINARY, &["infaas-executors", "infaas-scheduler", "infaas-worker"]]),
            "storage knows nothing of serving",
        ),
        (
            "infaas-executors",
            all(&[HTTP, STORAGE, BINARY, &["infaas-store", "infaas-scheduler"]]),
            "executors run models; they neither store nor decide",
        ),
        (
            "infaas-worker",
            all(&[
                &["utoipa", "tower-http"],
                STORAGE,
                BINARY,
                &["infaas-scheduler", "infaas-control", "infaas-api", "infaas-web"],
            ]),
            "a worker runs instances and serves the worker protocol; the controller decides",
        ),
        (
            "infaas-sim",
            all(&[
                HTTP,
                STORAGE,
                RUNTIME,
                ASYNC,
                BINARY,
                &["infaas-store", "infaas-executors", "infaas-worker", "infaas-control", "infaas-api", "infaas-eval"],
            ]),
            "the simulator calls the scheduler's policies on simulated time: no I/O runtime, no server; the evaluations built on it are not its",
        ),
        (
            "infaas-eval",
            all(&[
                HTTP,
                STORAGE,
                RUNTIME,
                ASYNC,
                BINARY,
                &["infaas-store", "infaas-executors", "infaas-worker", "infaas-control", "infaas-api"],
            ]),
            "evaluations of papers run on the simulator: simulated time, no I/O runtime, no server",
        ),
        (
            "infaas-control",
            all(&[
                HTTP,
                RUNTIME,
                BINARY,
                &["infaas-api", "infaas-web", "infaas-cli", "infaas-eval"],
            ]),
            "the control plane runs without a web framework; the HTTP edge calls it; it calls the simulator's engines, never the evaluations",
        ),
        (
            "infaas-api",
            all(&[
                STORAGE,
                RUNTIME,
                BINARY,
                &["infaas-cli", "infaas-scheduler", "infaas-sim", "infaas-eval", "infaas-provision", "infaas-onnx"],
            ]),
            "the HTTP edge turns requests into control-plane calls; it holds no policy or driver",
        ),
        (
            "infaas-cli",
            all(&[HTTP, STORAGE, RUNTIME, BINARY, SERVER]),
            "the client talks HTTP with the wire types of infaas-protocol; it links no server code",
        ),
        (
            "infaas-provision",
            all(&[HTTP, STORAGE, RUNTIME, BINARY, &["infaas-store", "infaas-executors"]]),
            "providers start and stop workers, nothing more",
        ),
    ]
}

/// Each workspace crate's normal dependencies, by name.
/// The workspace's packages as `cargo metadata` describes them.
fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("metadata is JSON")
}

fn workspace_dependencies() -> BTreeMap<String, Vec<String>> {
    let meta = metadata();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .expect("dependencies")
                .iter()
                .filter(|d| d["kind"].is_null())
                .map(|d| d["name"].as_str().expect("a name").to_string())
                .collect();
            (p["name"].as_str().expect("a name").to_string(), deps)
        })
        .collect()
}

/// The one framework a domain crate may name: `utoipa`, as an optional dependency behind
/// `infaas-core`'s `openapi` feature (its derives give the pipeline document the schema the
/// server enforces; only the wire crate, `infaas-protocol`, turns the feature on, so core's own
/// build has no framework). Anything else, or a required `utoipa`, stays forbidden.
fn optional_schema(krate: &str, dep: &str, optional: &BTreeSet<(String, String)>) -> bool {
    krate == "infaas-core" && dep == "utoipa" && optional.contains(&(krate.into(), dep.into()))
}

/// `(crate, dependency)` pairs of the workspace's optional normal dependencies.
fn optional_dependencies() -> BTreeSet<(String, String)> {
    let meta = metadata();
    let mut pairs = BTreeSet::new();
    for p in meta["packages"].as_array().expect("packages") {
        for d in p["dependencies"].as_array().expect("dependencies") {
            if d["kind"].is_null() && d["optional"] == true {
                pairs.insert((
                    p["name"].as_str().expect("a name").to_string(),
                    d["name"].as_str().expect("a name").to_string(),
                ));
            }
        }
    }
    pairs
}

#[test]
fn dependency_arrows_follow_the_layout() {
    let deps = workspace_dependencies();
    let optional = optional_dependencies();
    let mut broken = Vec::new();
    for (krate, forbidden, why) in rules() {
        let Some(has) = deps.get(krate) else {
            broken.push(format!("{krate}: not in the workspace (update the rules)"));
            continue;
        };
        for dep in has {
            if forbidden.contains(&dep.as_str()) && !optional_schema(krate, dep, &optional) {
                broken.push(format!("{krate} -> {dep}: forbidden ({why})"));
            }
        }
    }
    // Nothing depends on the composed binary or the fixtures.
    for (krate, has) in &deps {
        for dep in has {
            if BINARY.contains(&dep.as_str()) {
                broken.push(format!(
                    "{krate} -> {dep}: nothing depends on the binary or the test fixtures"
                ));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "layout broken:\n  {}",
        broken.join("\n  ")
    );
}

/// The rules are read from real metadata: a crate that exists has dependencies, and the
/// scheduler's solver is seen (so a rename of a crate cannot make the check vacuous).
#[test]
fn the_metadata_is_read() {
    let deps = workspace_dependencies();
    for (krate, _, _) in rules() {
        assert!(
            deps.contains_key(krate),
            "{krate} missing from cargo metadata"
        );
    }
    assert!(deps["infaas-scheduler"].contains(&"good_lp".to_string()));
    assert!(deps["infaas-api"].contains(&"axum".to_string()));
    assert!(deps["infaas"].contains(&"infaas-control".to_string()));
    // What-if runs: the control plane calls the simulator, never the other way round.
    assert!(deps["infaas-control"].contains(&"infaas-sim".to_string()));
    // The evaluations run on the simulator, never the other way round.
    assert!(deps["infaas-eval"].contains(&"infaas-sim".to_string()));
}
