//! Pruning dominated variants at registration, end to end: a model built here so that its
//! INT8 file is clearly dominated (far less accurate than the FP32 files and slower than
//! them at every batch size) is registered; its INT8 variants are not kept, not served, its
//! INT8 file leaves the object store, and the registration report, `GET /v1/models/{name}`,
//! the dashboard's model page and `infaas models show` say which were pruned and why.
//!
//! The model: `pixels` [N, 64] -> MatMul [64, 16] -> 500 x MatMul [16, 16] (identities) ->
//! MatMul [16, 10] -> `scores`. Class `c` lights pixels `1 + 6c .. 7 + 6c`, and column `c` of
//! the first weight sums them: the FP32 files score 1.0. Pixel 0 is always 0 and its weight
//! row is 1e4 in the ten class columns: it changes nothing in FP32, but per-channel INT8
//! scales those columns by 1e4 / 63, which rounds every other weight of them to 0, so the
//! INT8 file's scores are all 0 (argmax: class 0, accuracy 0.1). The chain of small MatMuls
//! makes the INT8 file slower too: each `DynamicQuantizeMatMul` quantises its 16-wide input
//! at run time, several times the cost of a 16 x 16 float MatMul; the chain is long enough
//! (0.2 ms a run in FP32) that the profiler's fixed cost per run does not hide it (measured
//! 2-5x the FP32 file's median at every batch size, 1 and 2 threads, on a machine busy with
//! other builds).

use infaas_testing::platform as common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::backends::Backends;
use common::{fast_config, npz, open_quotas, ort_library, Platform, Registration};
use infaas_core::{Role, Tensor, TensorData};
use infaas_onnx::proto::{
    self, tensor_proto::DataType, type_proto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, TypeProto, ValueInfoProto,
};
use reqwest::StatusCode;
use serde_json::{json, Value};

const NAME: &str = "outlier-chain";
const APP: &str = "pruning";
const CLASSES: usize = 10;
const WIDTH: usize = 16;
const CHAIN: usize = 500;
const ROWS_PER_CLASS: usize = 20;
const READY: Duration = Duration::from_secs(240);

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

on_both_pairs!(dominated_int8_is_pruned_at_registration);

fn value_info(name: &str, cols: usize) -> ValueInfoProto {
    let dim = |v| proto::TensorShapeProto {
        dim: vec![
            proto::tensor_shape_proto::Dimension {
                value: Some(proto::tensor_shape_proto::dimension::Value::DimParam(
                    "N".into(),
                )),
                ..Default::default()
            },
            proto::tensor_shape_proto::Dimension {
                value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)),
                ..Default::default()
            },
        ],
    };
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float as i32),
                shape: Some(dim(cols as i64)),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn weight(name: &str, rows: usize, cols: usize, at: impl Fn(usize, usize) -> f32) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: vec![rows as i64, cols as i64],
        data_type: Some(DataType::Float as i32),
        float_data: (0..rows * cols).map(|i| at(i / cols, i % cols)).collect(),
        ..Default::default()
    }
}

fn matmul(i: usize, input: &str, w: &str, output: &str) -> NodeProto {
    NodeProto {
        op_type: Some("MatMul".into()),
        name: Some(format!("matmul{i}")),
        input: vec![input.into(), w.into()],
        output: vec![output.into()],
        ..Default::default()
    }
}

/// Pixels of class `c`.
fn lit(pixel: usize, c: usize) -> bool {
    (1 + 6 * c..7 + 6 * c).contains(&pixel)
}

/// The model described in the module documentation.
fn model() -> Vec<u8> {
    let first = weight("w_in", 64, WIDTH, |r, c| {
        if c < CLASSES {
            if r == 0 {
                1e4
            } else if lit(r, c) {
                1.0
            } else {
                0.0
            }
        } else {
            // Columns past the classes keep the activations non-zero for the INT8 chain.
            0.5
        }
    });
    let identity = weight("w_eye", WIDTH, WIDTH, |r, c| if r == c { 1.0 } else { 0.0 });
    let out = weight(
        "w_out",
        WIDTH,
        CLASSES,
        |r, c| if r == c { 1.0 } else { 0.0 },
    );
    let mut nodes = vec![matmul(0, "pixels", "w_in", "h0")];
    for i in 0..CHAIN {
        nodes.push(matmul(
            i + 1,
            &format!("h{i}"),
            "w_eye",
            &format!("h{}", i + 1),
        ));
    }
    nodes.push(matmul(CHAIN + 1, &format!("h{CHAIN}"), "w_out", "scores"));
    let proto = ModelProto {
        ir_version: Some(9),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("outlier-chain".into()),
            node: nodes,
            initializer: vec![first, identity, out],
            input: vec![value_info("pixels", 64)],
            output: vec![value_info("scores", CLASSES)],
            ..Default::default()
        }),
        ..Default::default()
    };
    infaas_onnx::OnnxModel::from_proto(proto)
        .expect("a well-formed ONNX model")
        .to_bytes()
}

/// `ROWS_PER_CLASS` rows of each class: its pixels lit at 1, the others a little noise
/// (below 0.1; pixel 0 always 0), and the labels.
fn validation() -> Vec<u8> {
    let rows = CLASSES * ROWS_PER_CLASS;
    let mut x = Vec::with_capacity(rows * 64);
    let mut y = Vec::with_capacity(rows);
    let mut state: u32 = 0x9e37_79b9;
    for r in 0..rows {
        let c = r % CLASSES;
        for pixel in 0..64 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let noise = (state % 1000) as f32 / 10_000.0;
            x.push(match pixel {
                0 => 0.0,
                p if lit(p, c) => 1.0,
                _ => noise,
            });
        }
        y.push(c as i64);
    }
    npz(&[
        Tensor::new("x", vec![rows, 64], TensorData::Fp32(x)).expect("x"),
        Tensor::new("y", vec![rows], TensorData::Int64(y)).expect("y"),
    ])
}

fn strs(v: &Value, key: &str) -> BTreeSet<String> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|e| e[key].as_str().expect("a string").to_string())
        .collect()
}

async fn dominated_int8_is_pruned_at_registration(b: &Backends) {
    let Some(ort) = ort_library() else { return };
    let mut config = fast_config(b, &ort);
    // Medians of 10 runs per batch size.
    config.profile_runs = 10;
    config.profile_max_ms_per_batch = 200;
    let p = Platform::start(config).await;
    let t = p.tenant("pruner", open_quotas()).await;
    let form = Registration::default()
        .text("name", NAME)
        .text("app", APP)
        .file("model", model(), "outlier-chain.onnx")
        .file("validation", validation(), "outlier-chain-val.npz");
    p.register_ok(&t, &form).await;
    let m = p.wait_ready(&t, NAME, READY).await;
    let variants = m["variants"].as_array().expect("variants");
    let pruned = m["pruned"].as_array().expect("a list of pruned variants");

    // Every INT8 variant is pruned, and only the INT8 file's variants can be (the FP32 files
    // may prune each other when they tie, but each setting keeps one of them).
    let int8: BTreeSet<String> = [1, 2]
        .into_iter()
        .flat_map(|threads| {
            [1, 2, 4, 8, 16, 32, 64].map(|batch| format!("{NAME}.int8.cpu.t{threads}.b{batch}"))
        })
        .collect();
    let pruned_names = strs(&m["pruned"], "name");
    assert!(pruned_names.is_superset(&int8), "{m:#}");
    let kept_names = strs(&m["variants"], "name");
    assert!(kept_names.iter().all(|n| !n.contains(".int8.")), "{m:#}");
    assert_eq!(kept_names.len() + pruned_names.len(), 42, "{m:#}");
    for threads in [1, 2] {
        for batch in [1, 2, 4, 8, 16, 32, 64] {
            let setting = format!(".cpu.t{threads}.b{batch}");
            assert!(
                kept_names.iter().any(|n| n.ends_with(&setting)),
                "nothing kept at {setting}: {m:#}"
            );
        }
    }
    for v in variants {
        assert_eq!(v["accuracy"].as_f64(), Some(1.0), "{v}");
        assert_eq!(v["status"], "profiled", "{v}");
    }
    // Each pruned INT8 variant: its accuracy, the kept FP32 variant of the same setting that
    // dominates it, and why.
    for v in pruned.iter().filter(|v| v["file"] == "int8") {
        let name = v["name"].as_str().unwrap_or_default();
        assert_eq!(v["accuracy"].as_f64(), Some(0.1), "{v}");
        assert_eq!(v["hardware"], "cpu", "{v}");
        let by = v["dominated_by"].as_str().unwrap_or_default();
        assert!(
            kept_names.contains(by),
            "{name} dominated by {by}, not kept"
        );
        let token = if by.contains(".opt.") { "opt" } else { "fp32" };
        assert_eq!(by, name.replace(".int8.", &format!(".{token}.")), "{v}");
        assert_eq!(
            v["reason"],
            format!("accuracy 0.100 <= 1.000 of {token}, not faster at any batch"),
            "{v}"
        );
    }
    // The registration report names the pruned file and why (the kept FP32 file that
    // dominates most of its variants first).
    let detail = m["progress_detail"].as_str().unwrap_or_default();
    let int8_part = detail
        .split("; pruned ")
        .find(|p| p.starts_with("int8 ("))
        .unwrap_or_else(|| panic!("the report does not name the INT8 file: {detail}"));
    assert!(detail.starts_with("ready; pruned "), "{detail}");
    assert!(
        int8_part.starts_with("int8 (accuracy 0.100 <= 1.000 of opt, not faster at any batch")
            || int8_part
                .starts_with("int8 (accuracy 0.100 <= 1.000 of fp32, not faster at any batch"),
        "{detail}"
    );

    // Not served: the serving catalog has exactly the kept variants, and a query is answered
    // by one of them.
    let cluster = &p.server.state.cluster;
    cluster
        .refresh_catalog()
        .await
        .expect("the serving catalog");
    let served: BTreeSet<String> = cluster
        .catalog()
        .variants()
        .filter(|s| s.entry.model == NAME)
        .map(|s| s.entry.variant.name.clone())
        .collect();
    assert_eq!(served, kept_names);
    let row: Vec<f32> = (0..64)
        .map(|px| if lit(px, 3) { 1.0 } else { 0.0 })
        .collect();
    let answer = p
        .send(
            p.http
                .post(format!("{}/v1/models/{NAME}/infer", p.base))
                .bearer_auth(&t.token)
                .json(&json!({
                    "inputs": [{"name": "pixels", "shape": [1, 64], "datatype": "FP32", "data": row}],
                })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    let served_by = answer.body["variant"].as_str().unwrap_or_default();
    assert!(kept_names.contains(served_by), "{}", answer.text);

    // The INT8 file left the object store and the tenant's accounting; the others stay.
    let id = p.db().get_model(&t.id, NAME).await.expect("the model").id;
    let prefix = format!("tenants/{}/models/{id}/", t.id);
    let in_store: BTreeSet<String> = p
        .server
        .state
        .objects
        .list(&prefix)
        .await
        .expect("listing objects")
        .into_iter()
        .map(|o| o.key.trim_start_matches(&prefix).to_string())
        .collect();
    let accounted: BTreeSet<String> = p
        .db()
        .objects_of("model", &id)
        .await
        .expect("objects of the model")
        .into_iter()
        .map(|o| o.key.trim_start_matches(&prefix).to_string())
        .collect();
    assert_eq!(in_store, accounted);
    assert!(!in_store.contains("int8.onnx"), "{in_store:?}");
    assert!(in_store.contains("validation.npz"), "{in_store:?}");
    let kept_files: BTreeSet<String> = strs(&m["variants"], "file")
        .into_iter()
        .map(|f| format!("{f}.onnx"))
        .collect();
    assert!(in_store.is_superset(&kept_files), "{in_store:?}");

    // The dashboard's model page (its session cookie holds an access token): the kept
    // variants in the table, the pruned ones in a line.
    let page = p
        .send(p.http.get(format!("{}/ui/models/{NAME}", p.base)).header(
            reqwest::header::COOKIE,
            format!("infaas_session={}", t.token),
        ))
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.text);
    check_page(&page.text, &kept_names);

    // `infaas models show`.
    let shown = cli_show(&p, b, &t.id).await;
    assert!(
        shown.contains("pruned at registration (not served):")
            && shown.contains("int8: 14 variants, file removed: accuracy 0.100 <= 1.000 of "),
        "{shown}"
    );
    assert!(!shown.contains(&format!("{NAME}.int8.")), "{shown}");
    p.stop().await;
}

fn check_page(html: &str, kept: &BTreeSet<String>) {
    let table = &html[html
        .find(r#"<table id="variants">"#)
        .expect("the variant table")..];
    let table = &table[..table.find("</table>").expect("the end of the table")];
    for name in kept {
        assert!(
            table.contains(&format!("<td>{name}</td>")),
            "{name}: {table}"
        );
    }
    assert!(!table.contains(".int8."), "{table}");
    assert!(
        html.contains(
            "<p id=\"pruned\">Pruned at registration (not served): <span>int8: 14 variants, \
             file removed: accuracy 0.100 &#60;= 1.000 of "
        ),
        "{html}"
    );
}

async fn admin_key(p: &Platform, tenant_id: &str) -> String {
    let key = infaas_control::tenancy::generate_key();
    p.db()
        .create_api_key(tenant_id, "cli", Role::Admin, &key.prefix, &key.hash)
        .await
        .expect("an API key");
    key.secret
}

/// `infaas models show NAME` as the real binary prints it.
async fn cli_show(p: &Platform, b: &Backends, tenant_id: &str) -> String {
    let home = b.dir.path().join("home-pruner");
    std::fs::create_dir_all(&home).expect("a home directory");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_infaas"))
        .args(["models", "show", NAME])
        .env("INFAAS_SERVER", &p.base)
        .env("INFAAS_API_KEY", admin_key(p, tenant_id).await)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env_remove("INFAAS_CONFIG")
        .kill_on_drop(true)
        .output()
        .await
        .expect("running infaas");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
