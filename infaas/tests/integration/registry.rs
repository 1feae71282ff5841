//! The model registry end to end, against an in-process server: registering the zoo,
//! rejections that store nothing, quotas, tenant isolation, deletion, resuming after a
//! restart and progress reporting.
//!
//! `cargo test -p infaas-api --test registry` runs every test on SQLite + a local directory;
//! with `scripts/services.sh` running and `$HOME/.cache/infaas/services.env` loaded
//! (`set -a; . $HOME/.cache/infaas/services.env; set +a`) the `postgres_s3::` tests run on
//! Postgres + S3 too (otherwise they print a skip notice, or fail when `CI=true`). Every test
//! needs ONNX Runtime (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache).

use infaas_testing::platform as registry_common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use infaas_control::config::Config;
use infaas_core::{Quotas, Tensor, TensorData};
use infaas_executors::variants::BATCH_SIZES;
use registry_common::backends::Backends;
use registry_common::{
    npz, open_quotas, ort_library, readme_accuracies, zoo_arrays, zoo_bytes, Platform,
    Registration, Tenant, ZOO,
};
use reqwest::StatusCode;
use serde_json::Value;

const APP: &str = "digits";
const READY: Duration = Duration::from_secs(120);

/// Zoo models whose MatMul weights the INT8 rewrite quantises; the logistic regression
/// (`LinearClassifier`) and the forest (`TreeEnsembleClassifier`) have no MatMul or Gemm.
const WITH_INT8: [&str; 5] = [
    "digits-mlp-s",
    "digits-mlp-m",
    "digits-mlp-l",
    "digits-mlp-scores",
    "digits-two-input",
];

/// The five scikit-learn architectures (their accuracies must all differ).
const SKLEARN: [&str; 5] = [
    "digits-logreg",
    "digits-mlp-s",
    "digits-mlp-m",
    "digits-mlp-l",
    "digits-forest",
];

/// For each `async fn case(&Backends)`, the tests `sqlite_local::case` and `postgres_s3::case`.
macro_rules! on_both_pairs {
    ($($case:ident),+ $(,)?) => {
        mod sqlite_local {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    super::$case(&super::Backends::embedded()).await;
                }
            )+
        }
        mod postgres_s3 {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    if let Some(b) = super::Backends::services().await {
                        super::$case(&b).await;
                    }
                }
            )+
        }
    };
}

on_both_pairs!(
    zoo_registers_under_one_app,
    rejections_store_nothing,
    quotas_store_nothing,
    delete_removes_model_variants_and_objects,
    delete_during_generation_leaves_nothing,
    restart_resumes_unfinished_registration,
);

/// SQLite + local directory only: HTTP behaviour that does not depend on the backends.
mod sqlite_only {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn duplicate_name_conflicts_in_the_tenant_only() {
        super::duplicate_name_conflicts_in_the_tenant_only(&Backends::embedded()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn upload_over_the_limit_is_413() {
        super::upload_over_the_limit_is_413(&Backends::embedded()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn body_that_is_not_multipart_is_a_json_error() {
        super::body_that_is_not_multipart_is_a_json_error(&Backends::embedded()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn tenants_cannot_see_each_others_models() {
        super::tenants_cannot_see_each_others_models(&Backends::embedded()).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn progress_is_reported_while_registering() {
        super::progress_is_reported_while_registering(&Backends::embedded()).await;
    }
}

/// A server on `b` with the fast profiling settings changed by `tweak`; `None` (after a
/// skip notice) without ONNX Runtime.
async fn start(b: &Backends, tweak: impl FnOnce(&mut Config)) -> Option<Platform> {
    let ort = ort_library()?;
    let mut config = registry_common::fast_config(b, &ort);
    tweak(&mut config);
    Some(Platform::start(config).await)
}

fn slow_profiling(c: &mut Config) {
    c.profile_runs = 200;
    c.profile_max_ms_per_batch = 300;
}

fn variants(m: &Value) -> &Vec<Value> {
    m["variants"].as_array().expect("a variant list")
}

/// The variants the registration pruned (dominated by a kept one).
fn pruned(m: &Value) -> &Vec<Value> {
    m["pruned"].as_array().expect("a list of pruned variants")
}

/// Names of the kept and the pruned variants: disjoint, and every pruned variant names a
/// kept one of the same hardware, threads and max batch that dominates it, with a reason.
fn kept_and_pruned(m: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let kept: BTreeSet<String> = names(&m["variants"]).into_iter().collect();
    let gone: BTreeSet<String> = names(&m["pruned"]).into_iter().collect();
    assert_eq!(kept.len(), variants(m).len(), "duplicate variants: {m}");
    assert_eq!(
        gone.len(),
        pruned(m).len(),
        "duplicate pruned variants: {m}"
    );
    assert!(kept.is_disjoint(&gone), "{m}");
    let setting = |name: &str| name.split('.').skip(2).collect::<Vec<_>>().join(".");
    for v in pruned(m) {
        let name = v["name"].as_str().unwrap_or_default();
        let by = v["dominated_by"].as_str().unwrap_or_default();
        assert!(
            kept.contains(by),
            "{name} is dominated by {by}, not kept: {m}"
        );
        assert_eq!(setting(name), setting(by), "{name} vs {by}");
        let reason = v["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("not faster at any batch"),
            "{name}: {reason}"
        );
    }
    if !gone.is_empty() {
        let detail = m["progress_detail"].as_str().unwrap_or_default();
        assert!(detail.contains("; pruned "), "{detail}");
    }
    (kept, gone)
}

/// The files (`source`, `optimized`, `int8`) some kept variant uses.
fn kept_files(m: &Value) -> BTreeSet<String> {
    variants(m)
        .iter()
        .map(|v| v["file"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other["name"].as_str().expect("a name").to_string(),
        })
        .collect()
}

/// Checks one profiled variant of `model`: its name spells its fields, accuracy, load time
/// and memory are measured, and it has a latency point per batch size up to its max batch.
fn check_variant(model: &str, v: &Value) {
    let name = v["name"].as_str().expect("a variant name");
    let token = match v["file"].as_str() {
        Some("source") => "fp32",
        Some("optimized") => "opt",
        Some("int8") => "int8",
        other => panic!("{name}: unexpected file {other:?}"),
    };
    let max_batch = v["max_batch"].as_u64().expect("max_batch") as usize;
    assert_eq!(
        name,
        format!(
            "{model}.{token}.{}.t{}.b{max_batch}",
            v["hardware"].as_str().unwrap_or_default(),
            v["threads"]
        )
    );
    assert_eq!(v["status"], "profiled", "{name}");
    assert_eq!(v["hardware"], "cpu", "{name}");
    let precision = if token == "int8" { "int8" } else { "fp32" };
    assert_eq!(v["precision"], precision, "{name}");
    let acc = v["accuracy"].as_f64().expect("an accuracy");
    assert!((0.0..=1.0).contains(&acc), "{name}: accuracy {acc}");
    assert!(v["load_ms"].as_f64().expect("load_ms") > 0.0, "{name}");
    assert!(
        v["memory_bytes"].as_i64().expect("memory_bytes") > 0,
        "{name}"
    );
    let latency = v["latency"].as_array().expect("latency points");
    let batches: Vec<usize> = latency
        .iter()
        .map(|l| l["batch"].as_u64().expect("a batch") as usize)
        .collect();
    let expected: Vec<usize> = BATCH_SIZES
        .iter()
        .copied()
        .filter(|&b| b <= max_batch)
        .collect();
    assert_eq!(batches, expected, "{name}: latency batch sizes");
    for l in latency {
        let (p50, p99) = (l["p50_ms"].as_f64(), l["p99_ms"].as_f64());
        let (Some(p50), Some(p99)) = (p50, p99) else {
            panic!("{name}: latency point without percentiles: {l}");
        };
        assert!(
            p50 > 0.0 && p50 <= p99,
            "{name}: p50 {p50} ms, p99 {p99} ms"
        );
        assert!(l["throughput_per_s"].as_f64().unwrap_or_default() > 0.0);
    }
}

/// The accuracy the variants of `file` share (kept or pruned).
fn file_accuracy(m: &Value, file: &str) -> f64 {
    let accs: BTreeSet<u64> = variants(m)
        .iter()
        .chain(pruned(m))
        .filter(|v| v["file"] == file)
        .map(|v| v["accuracy"].as_f64().expect("an accuracy").to_bits())
        .collect();
    assert_eq!(accs.len(), 1, "{}: {file} variants disagree", m["name"]);
    f64::from_bits(accs.into_iter().next().unwrap_or_default())
}

/// The accounted objects of a model by file name (`source.onnx`, `int8.onnx`, ...), checked
/// against the object store.
async fn model_objects(p: &Platform, t: &Tenant, name: &str) -> BTreeMap<String, i64> {
    let model = p.db().get_model(&t.id, name).await.expect("the model row");
    let prefix = format!("tenants/{}/models/{}/", t.id, model.id);
    let accounted: BTreeMap<String, i64> = p
        .db()
        .objects_of("model", &model.id)
        .await
        .expect("objects of the model")
        .into_iter()
        .map(|o| (o.key, o.size_bytes))
        .collect();
    let in_store: BTreeMap<String, i64> = p
        .server
        .state
        .objects
        .list(&prefix)
        .await
        .expect("listing objects")
        .into_iter()
        .map(|o| (o.key, o.size as i64))
        .collect();
    assert_eq!(accounted, in_store, "{name}: accounting vs object store");
    accounted
        .into_iter()
        .map(|(k, v)| (k.trim_start_matches(&prefix).to_string(), v))
        .collect()
}

async fn zoo_registers_under_one_app(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let t = p.tenant("zoo", open_quotas()).await;
    let started = std::time::Instant::now();
    for (name, _, _) in ZOO {
        let m = p.register_ok(&t, &Registration::zoo(name, APP)).await;
        // The profiling worker may take it up before the answer is written.
        assert!(
            m["status"] == "pending" || m["status"] == "profiling",
            "{m}"
        );
        assert_eq!(m["app"], APP);
        assert!(m["signature"]["inputs"].is_array(), "{m}");
    }
    let mut ready = BTreeMap::new();
    for (name, _, _) in ZOO {
        ready.insert(name, p.wait_ready(&t, name, READY).await);
    }
    eprintln!(
        "{}: 7 zoo models ready in {:.1} s",
        b.name,
        started.elapsed().as_secs_f64()
    );

    let readme = readme_accuracies();
    let mut fp32 = BTreeMap::new();
    for (name, file, _) in ZOO {
        let m = &ready[name];
        assert_eq!(m["status"], "ready");
        assert_eq!(m["progress"].as_f64(), Some(1.0), "{name}");
        assert!(m.get("error").is_none(), "{name}: {m}");
        let ops = infaas_onnx::OnnxModel::parse(&zoo_bytes(file))
            .expect("a zoo model")
            .op_counts();
        let has_int8 = WITH_INT8.contains(&name);
        assert_eq!(
            has_int8,
            ops.contains_key("MatMul") || ops.contains_key("Gemm"),
            "{name}: the test's INT8 expectation does not match the model's operators {ops:?}"
        );
        let mut tokens = vec!["fp32", "opt"];
        if has_int8 {
            tokens.push("int8");
        } else {
            let detail = m["progress_detail"].as_str().unwrap_or_default();
            assert!(detail.contains("skipped int8"), "{name}: {detail}");
        }
        let expected: BTreeSet<String> = tokens
            .iter()
            .flat_map(|tok| {
                [1, 2].into_iter().flat_map(move |t| {
                    BATCH_SIZES
                        .iter()
                        .map(move |b| format!("{name}.{tok}.cpu.t{t}.b{b}"))
                })
            })
            .collect();
        assert_eq!(expected.len(), 14 * tokens.len());
        // Every variant was made; the dominated ones are pruned, and each setting keeps one.
        eprintln!("{name}: {}", m["progress_detail"]);
        let (kept, gone) = kept_and_pruned(m);
        assert_eq!(
            kept.union(&gone).cloned().collect::<BTreeSet<_>>(),
            expected,
            "{name}"
        );
        for t in [1, 2] {
            for b in BATCH_SIZES {
                let setting = format!(".cpu.t{t}.b{b}");
                assert!(
                    kept.iter().any(|v| v.ends_with(&setting)),
                    "{name}: nothing kept at {setting}"
                );
            }
        }
        for v in variants(m) {
            check_variant(name, v);
        }

        let acc = file_accuracy(m, "source");
        let documented = readme[file];
        assert!(
            (acc - documented).abs() <= 0.01,
            "{name}: accuracy {acc}, zoo/README.md says {documented}"
        );
        let opt = file_accuracy(m, "optimized");
        assert!(
            (opt - acc).abs() <= 0.005,
            "{name}: optimized {opt} vs {acc}"
        );
        if has_int8 {
            let int8 = file_accuracy(m, "int8");
            assert!((int8 - acc).abs() <= 0.02, "{name}: int8 {int8} vs {acc}");
        }
        fp32.insert(name, acc);

        // Every file a kept variant uses is accounted and present in the object store; the
        // files of pruned variants only are gone.
        let objects = model_objects(&p, &t, name).await;
        let files: BTreeSet<String> = objects.keys().cloned().collect();
        let mut want: BTreeSet<String> =
            kept_files(m).iter().map(|f| format!("{f}.onnx")).collect();
        want.insert("validation.npz".into());
        assert_eq!(files, want, "{name}");
    }
    for (i, a) in SKLEARN.iter().enumerate() {
        for b in &SKLEARN[i + 1..] {
            assert_ne!(fp32[a], fp32[b], "{a} and {b} have the same accuracy");
        }
    }

    // File sizes as recorded (the object of a file without kept variants is gone).
    let mlp_l = p
        .db()
        .get_model(&t.id, "digits-mlp-l")
        .await
        .expect("the model");
    let sizes: BTreeMap<&str, i64> = p
        .db()
        .list_model_files(&mlp_l.id)
        .await
        .expect("the files")
        .into_iter()
        .map(|f| (f.kind.as_str(), f.size_bytes))
        .collect();
    let ratio = sizes["int8"] as f64 / sizes["source"] as f64;
    assert!(
        ratio < 0.5,
        "INT8 file of mlp-l is {ratio:.2} of the source"
    );
    let stored = p.db().stored_bytes(&t.id).await.expect("stored bytes");
    let keys = p
        .server
        .state
        .objects
        .list(&format!("tenants/{}/", t.id))
        .await
        .expect("listing objects");
    assert_eq!(
        stored,
        keys.iter().map(|o| o.size as i64).sum::<i64>(),
        "accounted bytes vs object store"
    );

    let apps = p.get(&t, "/v1/apps").await;
    assert_eq!(apps.status, StatusCode::OK, "{}", apps.text);
    assert_eq!(names(&apps.body["apps"]), vec![APP.to_string()]);
    let mut zoo_names: Vec<String> = ZOO.iter().map(|(n, _, _)| n.to_string()).collect();
    zoo_names.sort();
    assert_eq!(names(&apps.body["apps"][0]["models"]), zoo_names);
    let app = p.get(&t, "/v1/apps/digits").await;
    assert_eq!(app.status, StatusCode::OK, "{}", app.text);
    assert_eq!(app.body["name"], APP);
    assert_eq!(names(&app.body["models"]), zoo_names);
    for m in app.body["models"].as_array().expect("models") {
        assert_eq!(m["status"], "ready");
        assert!(!variants(m).is_empty());
    }
    let missing = p.get(&t, "/v1/apps/nope").await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.error_type(), "not_found");
    p.stop().await;
}

// ------------------------------------------------------------------------------------------
// Rejections
// ------------------------------------------------------------------------------------------

/// The digits validation set with array `name` replaced (or removed when `None`).
fn digits_with(name: &str, replacement: Option<Tensor>) -> Vec<u8> {
    let mut arrays = zoo_arrays("digits-val.npz");
    arrays.retain(|a| a.name != name);
    arrays.extend(replacement);
    npz(&arrays)
}

fn array(name: &str, file: &str) -> Tensor {
    zoo_arrays(file)
        .into_iter()
        .find(|a| a.name == name)
        .unwrap_or_else(|| panic!("zoo/{file} has no array '{name}'"))
}

fn labels_with(f: impl FnOnce(&mut Vec<i64>)) -> Tensor {
    let y = array("y", "digits-val.npz");
    let TensorData::Int64(mut v) = y.data else {
        panic!("the zoo labels are not INT64");
    };
    f(&mut v);
    Tensor::new("y", vec![v.len()], TensorData::Int64(v)).expect("labels")
}

fn x_f32() -> (Vec<usize>, Vec<f32>) {
    let x = array("x", "digits-val.npz");
    let TensorData::Fp32(v) = x.data else {
        panic!("the zoo inputs are not FP32");
    };
    (x.shape, v)
}

/// Deterministic bytes that are not a protobuf message.
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// mlp-s with its first operator renamed to one ONNX Runtime does not know.
fn unknown_op_model() -> Vec<u8> {
    let model = infaas_onnx::OnnxModel::parse(&zoo_bytes("digits-mlp-s.onnx")).expect("mlp-s");
    let mut proto = model.into_proto();
    let graph = proto.graph.as_mut().expect("a graph");
    graph.node[0].op_type = Some("NoSuchOp".into());
    infaas_onnx::OnnxModel::from_proto(proto)
        .expect("still a well-formed ONNX model")
        .to_bytes()
}

struct Case {
    what: &'static str,
    form: Registration,
    status: StatusCode,
    /// Fragments the error message must contain.
    says: Vec<&'static str>,
}

fn rejection_cases() -> Vec<Case> {
    let base = || Registration::zoo("digits-mlp-s", APP);
    let val = |bytes: Vec<u8>| base().file("validation", bytes, "val.npz");
    let bad = |what, form, says| Case {
        what,
        form,
        status: StatusCode::BAD_REQUEST,
        says,
    };
    let (shape, x) = x_f32();
    let (rows, cols) = (shape[0], shape[1]);
    let x63: Vec<f32> = x
        .chunks(cols)
        .flat_map(|r| r[..cols - 1].iter().copied())
        .collect();
    let x_int: Vec<i32> = x.iter().map(|&v| (v * 16.0) as i32).collect();
    let two_input = Registration::zoo("digits-two-input", APP);
    let mut two_arrays = zoo_arrays("digits-two-input-val.npz");
    two_arrays.retain(|a| a.name != "x.right");
    vec![
        bad(
            "a model file that is not ONNX",
            base().file("model", noise(4096), "noise.onnx"),
            vec!["field 'model'", "not a valid ONNX model"],
        ),
        bad(
            "an ONNX model ONNX Runtime cannot load",
            base().file("model", unknown_op_model(), "bad-op.onnx"),
            vec!["ONNX Runtime cannot load", "NoSuchOp"],
        ),
        bad(
            "an empty model file",
            base().file("model", Vec::new(), "empty.onnx"),
            vec!["field 'model' is empty"],
        ),
        bad(
            "a validation set that is not a zip archive",
            val(b"x,y\n0.1,3\n".to_vec()),
            vec!["field 'validation'", "not a valid NPZ file"],
        ),
        bad(
            "a validation set without labels",
            val(digits_with("y", None)),
            vec!["'y'"],
        ),
        bad(
            "inputs with 63 features",
            val(digits_with(
                "x",
                Some(Tensor::new("x", vec![rows, cols - 1], TensorData::Fp32(x63)).expect("x")),
            )),
            vec!["input 'input'", "63", "64"],
        ),
        bad(
            "integer inputs",
            val(digits_with(
                "x",
                Some(Tensor::new("x", shape.clone(), TensorData::Int32(x_int)).expect("x")),
            )),
            vec!["'x'", "INT32", "FP32"],
        ),
        bad(
            "inputs of the wrong rank",
            val(digits_with(
                "x",
                Some(Tensor::new("x", vec![rows, 8, 8], TensorData::Fp32(x.clone())).expect("x")),
            )),
            vec!["rank 3", "input 'input'"],
        ),
        bad(
            "a two-input model without the array of its second input",
            two_input.file("validation", npz(&two_arrays), "val.npz"),
            vec!["input 'right'", "x.right"],
        ),
        bad(
            "a label past the model's classes",
            val(digits_with("y", Some(labels_with(|y| y[7] = 10)))),
            vec!["label 10", "out of range", "10 classes"],
        ),
        bad(
            "a negative label",
            val(digits_with("y", Some(labels_with(|y| y[3] = -1)))),
            vec!["negative label -1"],
        ),
        bad(
            "fewer labels than input rows",
            val(digits_with(
                "y",
                Some(labels_with(|y| y.truncate(rows - 1))),
            )),
            vec!["540 rows", "539 labels"],
        ),
        bad(
            "no name",
            base().without("name"),
            vec!["missing field 'name'"],
        ),
        bad("no app", base().without("app"), vec!["missing field 'app'"]),
        bad(
            "no model",
            base().without("model"),
            vec!["missing field 'model'"],
        ),
        bad(
            "no validation set",
            base().without("validation"),
            vec!["missing field 'validation'"],
        ),
        bad(
            "a name with a slash",
            base().text("name", "a/b"),
            vec!["model name 'a/b' is invalid"],
        ),
        bad(
            "an unknown task",
            base().text("task", "regression"),
            vec!["task 'regression' is not supported", "classification"],
        ),
        bad(
            "an unknown field",
            base().text("colour", "blue"),
            vec!["unknown field 'colour'"],
        ),
        bad(
            "a declared output the model does not have",
            base().text("output", "nope"),
            vec!["'nope'", "'probabilities'"],
        ),
        bad(
            "max_batch 0",
            base().text("max_batch", "0"),
            vec!["max_batch", "between 1 and 4096"],
        ),
        bad(
            "label names that are not a JSON array of strings",
            base().text("label_names", "[1, 2]"),
            vec!["label_names"],
        ),
    ]
}

async fn rejections_store_nothing(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let t = p.tenant("rejections", open_quotas()).await;
    let before = p.stored(&t).await;
    assert!(before.models.is_empty() && before.object_keys.is_empty());
    let mut failures = Vec::new();
    for case in rejection_cases() {
        let a = p.register(&t, &case.form).await;
        let missing: Vec<&&str> = case
            .says
            .iter()
            .filter(|s| !a.error().contains(**s))
            .collect();
        if a.status != case.status || a.error_type().is_empty() || !missing.is_empty() {
            failures.push(format!(
                "{}: want {} naming {:?}, got {} {}",
                case.what, case.status, case.says, a.status, a.text
            ));
        }
        let after = p.stored(&t).await;
        if after != before {
            failures.push(format!("{}: something was stored: {after:?}", case.what));
        }
    }
    assert!(
        failures.is_empty(),
        "{} rejection(s) wrong on {}:\n{}",
        failures.len(),
        b.name,
        failures.join("\n")
    );
    p.stop().await;
}

async fn duplicate_name_conflicts_in_the_tenant_only(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let a = p.tenant("a", open_quotas()).await;
    let other = p.tenant("b", open_quotas()).await;
    let form = Registration::zoo("digits-logreg", APP);
    p.register_ok(&a, &form).await;
    p.wait_ready(&a, "digits-logreg", READY).await;
    let before = p.stored(&a).await;
    let dup = p.register(&a, &form).await;
    assert_eq!(dup.status, StatusCode::CONFLICT, "{}", dup.text);
    assert_eq!(dup.error_type(), "conflict");
    assert!(
        dup.error().contains("'digits-logreg' already exists"),
        "{}",
        dup.text
    );
    assert_eq!(p.stored(&a).await, before);
    // The name is only taken in tenant a.
    p.register_ok(&other, &form).await;
    p.wait_ready(&other, "digits-logreg", READY).await;
    p.stop().await;
}

async fn upload_over_the_limit_is_413(b: &Backends) {
    let Some(p) = start(b, |c| c.max_upload_bytes = 200_000).await else {
        return;
    };
    let t = p.tenant("big", open_quotas()).await;
    let before = p.stored(&t).await;
    let a = p
        .register(&t, &Registration::zoo("digits-mlp-l", APP))
        .await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", a.text);
    assert_eq!(a.error_type(), "payload_too_large");
    assert!(
        a.error().contains("upload limit") && a.error().contains("200000"),
        "{}",
        a.text
    );
    assert_eq!(p.stored(&t).await, before);
    // Under the limit still works.
    p.register_ok(&t, &Registration::zoo("digits-mlp-m", APP))
        .await;
    p.stop().await;
}

async fn body_that_is_not_multipart_is_a_json_error(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let t = p.tenant("json", open_quotas()).await;
    let before = p.stored(&t).await;
    let resp = p
        .http
        .post(format!("{}/v1/models", p.base))
        .bearer_auth(&t.token)
        .json(&serde_json::json!({ "name": "m", "app": APP }))
        .send()
        .await
        .expect("an answer");
    let status = resp.status();
    let text = resp.text().await.expect("a body");
    assert!(status.is_client_error(), "{status} {text}");
    let body: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("not a JSON error body ({e}): {status} {text}"));
    assert!(
        body["error"]
            .as_str()
            .unwrap_or_default()
            .contains("multipart"),
        "{text}"
    );
    assert!(body["error_type"].is_string(), "{text}");
    assert_eq!(p.stored(&t).await, before);
    p.stop().await;
}

async fn quotas_store_nothing(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let one = p
        .tenant(
            "one-model",
            Quotas {
                max_models: 1,
                ..open_quotas()
            },
        )
        .await;
    p.register_ok(&one, &Registration::zoo("digits-logreg", APP))
        .await;
    p.wait_ready(&one, "digits-logreg", READY).await;
    let before = p.stored(&one).await;
    let a = p
        .register(&one, &Registration::zoo("digits-mlp-s", APP))
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert_eq!(a.error_type(), "quota_exceeded");
    assert!(a.error().contains("model quota"), "{}", a.text);
    assert_eq!(p.stored(&one).await, before);

    let small = p
        .tenant(
            "small",
            Quotas {
                max_stored_bytes: 100_000,
                ..open_quotas()
            },
        )
        .await;
    let before = p.stored(&small).await;
    let a = p
        .register(&small, &Registration::zoo("digits-mlp-m", APP))
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.text);
    assert_eq!(a.error_type(), "quota_exceeded");
    assert!(
        a.error().contains("storage quota") && a.error().contains("100000 bytes"),
        "{}",
        a.text
    );
    assert_eq!(p.stored(&small).await, before);
    p.stop().await;
}

async fn tenants_cannot_see_each_others_models(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let a = p.tenant("alice", open_quotas()).await;
    let bob = p.tenant("bob", open_quotas()).await;
    p.register_ok(&a, &Registration::zoo("digits-logreg", APP))
        .await;
    p.wait_ready(&a, "digits-logreg", READY).await;

    // Bob gets exactly what a missing model gives.
    let same_shape = |x: &registry_common::Answer, y: &registry_common::Answer| {
        assert_eq!(x.status, StatusCode::NOT_FOUND, "{}", x.text);
        assert_eq!(x.status, y.status);
        assert_eq!(x.error_type(), y.error_type());
        assert_eq!(
            x.error().replace("digits-logreg", "NAME"),
            y.error().replace("no-such-model", "NAME")
        );
    };
    let theirs = p.get(&bob, "/v1/models/digits-logreg").await;
    let missing = p.get(&bob, "/v1/models/no-such-model").await;
    same_shape(&theirs, &missing);
    let theirs = p.delete(&bob, "/v1/models/digits-logreg").await;
    let missing = p.delete(&bob, "/v1/models/no-such-model").await;
    same_shape(&theirs, &missing);
    let list = p.get(&bob, "/v1/models").await;
    assert_eq!(list.body["models"], serde_json::json!([]), "{}", list.text);
    let apps = p.get(&bob, "/v1/apps").await;
    assert_eq!(apps.body["apps"], serde_json::json!([]), "{}", apps.text);
    let app = p.get(&bob, "/v1/apps/digits").await;
    assert_eq!(app.status, StatusCode::NOT_FOUND, "{}", app.text);

    let m = p.model(&a, "digits-logreg").await;
    assert_eq!(m["status"], "ready");
    let (kept, gone) = kept_and_pruned(&m);
    assert_eq!(kept.len() + gone.len(), 28);
    assert_eq!(
        names(&p.get(&a, "/v1/models").await.body["models"]).len(),
        1
    );
    p.stop().await;
}

async fn delete_removes_model_variants_and_objects(b: &Backends) {
    let Some(p) = start(b, |_| {}).await else {
        return;
    };
    let t = p.tenant("deleter", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-mlp-s", APP))
        .await;
    p.wait_ready(&t, "digits-mlp-s", READY).await;
    let id = p
        .db()
        .get_model(&t.id, "digits-mlp-s")
        .await
        .expect("the model")
        .id;
    let prefix = format!("tenants/{}/models/{id}/", t.id);
    let objects = &p.server.state.objects;
    // The validation set and each file a kept variant uses.
    let files = kept_files(&p.model(&t, "digits-mlp-s").await).len();
    assert_eq!(objects.list(&prefix).await.expect("list").len(), 1 + files);
    assert!(p.db().stored_bytes(&t.id).await.expect("bytes") > 0);

    let d = p.delete(&t, "/v1/models/digits-mlp-s").await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{}", d.text);
    assert_eq!(objects.list(&prefix).await.expect("list"), Vec::new());
    assert_eq!(p.db().stored_bytes(&t.id).await.expect("bytes"), 0);
    assert!(p
        .db()
        .list_variants(&id)
        .await
        .expect("variants")
        .is_empty());
    assert!(p
        .db()
        .list_model_files(&id)
        .await
        .expect("files")
        .is_empty());
    let gone = p.get(&t, "/v1/models/digits-mlp-s").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.text);
    assert_eq!(gone.error_type(), "not_found");
    assert!(p.stored(&t).await.models.is_empty());
    let again = p.delete(&t, "/v1/models/digits-mlp-s").await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    // The name is free again.
    p.register_ok(&t, &Registration::zoo("digits-mlp-s", APP))
        .await;
    p.wait_ready(&t, "digits-mlp-s", READY).await;
    p.stop().await;
}

/// A model deleted while its files are being built: whatever the background work stores
/// afterwards is removed too.
async fn delete_during_generation_leaves_nothing(b: &Backends) {
    let Some(p) = start(b, slow_profiling).await else {
        return;
    };
    let t = p.tenant("racer", open_quotas()).await;
    let name = "digits-mlp-l";
    p.register_ok(&t, &Registration::zoo(name, APP)).await;
    let id = p.db().get_model(&t.id, name).await.expect("the model").id;
    // Delete while a derived file is being built (the widest window of the pipeline).
    loop {
        let m = p.db().get_model_by_id(&id).await.expect("the model");
        let detail = m.progress_detail.unwrap_or_default();
        if detail.starts_with("building the") {
            break;
        }
        assert!(
            m.status.in_progress(),
            "{name} finished before it was deleted"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let d = p.delete(&t, &format!("/v1/models/{name}")).await;
    assert_eq!(d.status, StatusCode::NO_CONTENT, "{}", d.text);
    // The worker takes models in turn: once a later one is ready, the deleted one is done.
    p.register_ok(&t, &Registration::zoo("digits-logreg", APP))
        .await;
    p.wait_ready(&t, "digits-logreg", READY).await;
    let prefix = format!("tenants/{}/models/{id}/", t.id);
    let left = p.server.state.objects.list(&prefix).await.expect("list");
    assert_eq!(left, Vec::new(), "objects of the deleted model remain");
    assert!(p
        .db()
        .objects_of("model", &id)
        .await
        .expect("objects")
        .is_empty());
    let logreg: i64 = model_objects(&p, &t, "digits-logreg").await.values().sum();
    assert_eq!(p.db().stored_bytes(&t.id).await.expect("bytes"), logreg);
    p.stop().await;
}

async fn restart_resumes_unfinished_registration(b: &Backends) {
    let Some(p) = start(b, slow_profiling).await else {
        return;
    };
    let t = p.tenant("restarter", open_quotas()).await;
    let name = "digits-mlp-l";
    p.register_ok(&t, &Registration::zoo(name, APP)).await;
    // Stop once some variants are profiled and others are not.
    let m = p
        .wait_for(&t, name, READY, |m| {
            m["status"] == "profiling" && variants(m).iter().any(|v| v["status"] == "profiled")
        })
        .await;
    let profiled_before: BTreeMap<String, Value> = variants(&m)
        .iter()
        .filter(|v| v["status"] == "profiled")
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v.clone(),
            )
        })
        .collect();
    assert!(
        profiled_before.len() < 42,
        "{name} profiled too fast to stop midway"
    );
    let config = p.config.clone();
    let id = p.db().get_model(&t.id, name).await.expect("the model").id;
    p.stop().await;

    let db = infaas_store::Db::connect(&config.database_url())
        .await
        .expect("the database");
    let stopped = db.get_model_by_id(&id).await.expect("the model");
    assert!(
        stopped.status.in_progress() && stopped.error.is_none(),
        "after a stop the model is {:?} ({:?})",
        stopped.status,
        stopped.error
    );
    db.close().await;

    // A new server on the same data directory and database (fast profiling this time).
    let q = Platform::start(Config {
        profile_runs: 3,
        profile_max_ms_per_batch: 50,
        ..config
    })
    .await;
    let m = q.wait_ready(&t, name, READY).await;
    let all = variants(&m);
    let (kept, gone) = kept_and_pruned(&m);
    assert_eq!(
        kept.len() + gone.len(),
        42,
        "{name}: 3 files x 2 thread counts x 7 batch sizes, kept or pruned"
    );
    for v in all {
        check_variant(name, v);
    }
    // What was profiled before the stop was kept, not measured again.
    for v in all {
        if let Some(before) = profiled_before.get(v["name"].as_str().unwrap_or_default()) {
            assert_eq!(v["load_ms"], before["load_ms"], "{}", v["name"]);
            assert_eq!(v["latency"], before["latency"], "{}", v["name"]);
        }
    }
    assert_eq!(
        q.db().list_variants(&id).await.expect("variants").len(),
        kept.len()
    );
    q.stop().await;
}

async fn progress_is_reported_while_registering(b: &Backends) {
    let Some(p) = start(b, |c| {
        c.profile_runs = 50;
        c.profile_max_ms_per_batch = 100;
    })
    .await
    else {
        return;
    };
    let t = p.tenant("watcher", open_quotas()).await;
    let name = "digits-mlp-m";
    p.register_ok(&t, &Registration::zoo(name, APP)).await;
    let order = ["pending", "generating", "profiling", "ready"];
    let mut seen: Vec<(String, f64, String)> = Vec::new();
    let start = std::time::Instant::now();
    loop {
        let m = p.model(&t, name).await;
        let status = m["status"].as_str().unwrap_or_default().to_string();
        assert_ne!(status, "failed", "{m}");
        let progress = m["progress"].as_f64().expect("progress");
        assert!((0.0..=1.0).contains(&progress), "{progress}");
        let detail = m["progress_detail"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if let Some((last_status, last_progress, _)) = seen.last() {
            let rank = |s: &str| order.iter().position(|o| *o == s);
            assert!(
                rank(&status) >= rank(last_status),
                "{last_status} -> {status}"
            );
            assert!(progress >= *last_progress, "progress went back: {seen:?}");
        }
        seen.push((status.clone(), progress, detail));
        if status == "ready" {
            break;
        }
        assert!(start.elapsed() < READY, "{name} not ready: {seen:?}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let midway = seen.iter().filter(|(s, p, d)| {
        (s == "generating" || s == "profiling") && *p > 0.0 && *p < 1.0 && !d.is_empty()
    });
    let details: BTreeSet<&str> = midway.map(|(_, _, d)| d.as_str()).collect();
    assert!(
        !details.is_empty(),
        "no observation midway with progress in (0, 1) and a detail: {seen:?}"
    );
    assert!(
        details.iter().any(|d| d.starts_with("profiling")),
        "{details:?}"
    );
    p.stop().await;
}
