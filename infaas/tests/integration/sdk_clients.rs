//! The generated SDK clients (`openapi/clients`) against a live in-process server: the
//! Python client's test (`openapi/clients/python-test/sdk_test.py`) and the TypeScript
//! client's test (`openapi/clients/typescript/test/sdk.test.ts`, compiled with tsc and run
//! with `node --test`) each get a token, register a zoo model, query it and run jobs; and
//! `scripts/gen-clients.sh --check` passes on the committed clients and fails when a
//! generated file or the OpenAPI document is edited.
//!
//! Needs ONNX Runtime, python3 with httpx and attrs, Node.js with the TypeScript package's
//! node_modules and the generator tools: `scripts/test.sh` installs them all.
#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use registry_common::backends::Backends;
use registry_common::{fast_config, open_quotas, ort_library, zoo_arrays, zoo_dir, Platform};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .canonicalize()
        .unwrap()
}

const SETUP: &str = "run scripts/test.sh (or scripts/gen-clients.sh) to install it";

/// A server with a zoo-model-ready configuration, a tenant's API key, and the data file
/// the client tests read: the first rows of the digits validation set and their labels.
async fn live(b: &Backends) -> Option<(Platform, String, PathBuf)> {
    let ort = ort_library()?;
    let p = Platform::start(fast_config(b, &ort)).await;
    let t = p.db().create_tenant("sdk", open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&t.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    let arrays = zoo_arrays("digits-val.npz");
    let get = |name: &str| arrays.iter().find(|a| a.name == name).unwrap();
    let (x, y) = (get("x"), get("y"));
    let rows = 8;
    let xs: Vec<Vec<f64>> = (0..rows)
        .map(|r| {
            let row = x.slice_batch(r, r + 1);
            (0..row.data.len())
                .map(|k| row.data.get_f64(k).unwrap())
                .collect()
        })
        .collect();
    let ys: Vec<f64> = (0..rows).map(|r| y.data.get_f64(r).unwrap()).collect();
    let data = b.dir.path().join("sdk-data.json");
    std::fs::write(&data, serde_json::json!({ "x": xs, "y": ys }).to_string()).unwrap();
    Some((p, key.secret, data))
}

/// Runs a client test with the server's address, key and data in its environment.
async fn run(mut cmd: Command, p: &Platform, key: &str, data: &Path) -> Output {
    cmd.env("INFAAS_URL", &p.base)
        .env("INFAAS_API_KEY", key)
        .env("INFAAS_ZOO", zoo_dir())
        .env("INFAAS_SDK_DATA", data);
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn texts(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Asserts the client test passed and printed a `checked: ` line with each of `checks`.
fn assert_checked(what: &str, out: &Output, checks: &[&str]) {
    let (stdout, stderr) = texts(out);
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    for c in checks {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains("checked: ") && l.contains(c)),
            "{what} did not check '{c}':\n{stdout}\n{stderr}"
        );
    }
    println!("{what}:\n{stdout}");
}

const CHECKS: [&str; 7] = [
    "token for tenant sdk",
    "refused registration: ",
    "registered digits-logreg with ",
    "infer on digits-logreg",
    "refused query (",
    "job ",
    "(JSON): ",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_client_against_a_live_server() {
    let ok = Command::new("python3")
        .args(["-c", "import httpx, attrs"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "the Python client needs python3 with httpx and attrs: {SETUP}"
    );
    let b = Backends::embedded();
    let Some((p, key, data)) = live(&b).await else {
        return;
    };
    let root = repo();
    let mut cmd = Command::new("python3");
    cmd.arg(root.join("openapi/clients/python-test/sdk_test.py"))
        .env("PYTHONPATH", root.join("openapi/clients/python"))
        // No __pycache__ in the committed client (the drift check compares the directory).
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let out = run(cmd, &p, &key, &data).await;
    assert_checked("the Python client's test", &out, &CHECKS);
    p.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typescript_client_against_a_live_server() {
    let ts = repo().join("openapi/clients/typescript");
    let tsc = ts.join("node_modules/.bin/tsc");
    assert!(
        tsc.exists(),
        "the TypeScript client's packages are not installed ({} is missing): {SETUP}",
        tsc.display()
    );
    // Type-checks the client and its test against the generated schema, then compiles
    // into the package's dist/ (ignored by git), where imports find its node_modules.
    let compiled = Command::new("node")
        .arg(&tsc)
        .arg("-p")
        .arg(&ts)
        .output()
        .unwrap();
    let (stdout, stderr) = texts(&compiled);
    assert!(compiled.status.success(), "tsc failed:\n{stdout}\n{stderr}");
    let b = Backends::embedded();
    let Some((p, key, data)) = live(&b).await else {
        return;
    };
    let mut cmd = Command::new("node");
    cmd.arg("--test").arg(ts.join("dist/test/sdk.test.js"));
    let out = run(cmd, &p, &key, &data).await;
    assert_checked("the TypeScript client's test", &out, &CHECKS);
    // node's test runner reports what ran.
    let (stdout, _) = texts(&out);
    assert!(
        stdout.contains("# pass 1") && stdout.contains("# fail 0"),
        "{stdout}"
    );
    p.stop().await;
}

/// Copies what the generator reads and writes (the document and the clients, without
/// installed packages) into `to`.
fn copy_openapi(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if ["node_modules", "dist", "__pycache__"].contains(&name.to_str().unwrap()) {
            continue;
        }
        let target = to.join(&name);
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_openapi(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn gen_check(root: &Path) -> Output {
    Command::new("bash")
        .arg(repo().join("scripts/gen-clients.sh"))
        .arg("--check")
        .arg("--root")
        .arg(root)
        // Never install here: the tools must already be there.
        .env("INFAAS_GEN_OFFLINE", "1")
        .output()
        .unwrap()
}

#[test]
fn the_generated_clients_are_current_and_drift_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let copy = dir.path().join("openapi");
    std::fs::create_dir_all(&copy).unwrap();
    copy_openapi(&repo().join("openapi"), &copy);

    let out = gen_check(dir.path());
    let (stdout, stderr) = texts(&out);
    assert!(
        out.status.success(),
        "the committed clients are not current:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("SDK clients are current"), "{stdout}");

    // An edited generated Python file is drift.
    let model = copy.join("clients/python/infaas_client/models/job_view.py");
    let original = std::fs::read_to_string(&model).unwrap();
    std::fs::write(&model, format!("{original}\n# edited\n")).unwrap();
    let out = gen_check(dir.path());
    let (_, stderr) = texts(&out);
    assert!(!out.status.success(), "an edited client passed the check");
    assert!(stderr.contains("job_view.py"), "{stderr}");
    assert!(stderr.contains("out of date"), "{stderr}");
    std::fs::write(&model, original).unwrap();

    // So is a changed document the committed clients were not regenerated from.
    let doc = copy.join("openapi.json");
    let text = std::fs::read_to_string(&doc).unwrap();
    let changed = text.replacen(
        "\"description\": \"Job id\"",
        "\"description\": \"The job's id\"",
        1,
    );
    assert_ne!(changed, text, "no job id description to change");
    std::fs::write(&doc, changed).unwrap();
    let out = gen_check(dir.path());
    let (_, stderr) = texts(&out);
    assert!(!out.status.success(), "a changed document passed the check");
    assert!(stderr.contains("schema.d.ts"), "{stderr}");
}
