//! The Open Inference Protocol over gRPC (`inference.GRPCInferenceService`), against an
//! in-process server, with the committed tonic client (`infaas_api::grpc::Client`) and the
//! unmodified Python `tritonclient.grpc` client: health and metadata, tokens and the
//! request rate as HTTP has them, queries by model whose outputs equal ONNX Runtime's,
//! model-less queries by application with their requirements in the request parameters,
//! tenancy, and bad requests refused with INVALID_ARGUMENT naming the tensor while the
//! server keeps serving.
//!
//! `cargo nextest run -p infaas --test integration grpc`. The queries need ONNX Runtime
//! (`ORT_DYLIB_PATH` or the `scripts/setup.sh` cache); the Python test needs `python3` with
//! `tritonclient[grpc]`, `onnxruntime` and `numpy` (installed by `scripts/test.sh`).

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use infaas_api::grpc::pb::infer_parameter::ParameterChoice;
use infaas_api::grpc::pb::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use infaas_api::grpc::pb::{
    InferParameter, InferTensorContents, ModelInferRequest, ModelInferResponse,
    ModelMetadataRequest, ModelReadyRequest, ServerLiveRequest, ServerMetadataRequest,
    ServerReadyRequest,
};
use infaas_api::grpc::Client;
use infaas_core::{Quotas, Tensor, TensorData};
use infaas_testing::platform::{
    fast_config, open_quotas, ort_library, zoo_arrays, zoo_bytes, Platform, Registration,
};
use infaas_testing::server::backends::Backends;
use infaas_testing::server::TestServer;
use reqwest::Method;
use tonic::{Code, Request, Status};

const READY: Duration = Duration::from_secs(180);

async fn client(url: &str) -> Client {
    Client::connect(url.to_string()).await.unwrap()
}

/// `msg` with `authorization: Bearer <token>` metadata.
fn authed<T>(msg: T, token: &str) -> Request<T> {
    let mut r = Request::new(msg);
    r.metadata_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    r
}

/// Asserts `result` failed with `code` and a message containing each of `needles`.
#[track_caller]
fn expect_code<T: std::fmt::Debug>(result: Result<T, Status>, code: Code, needles: &[&str]) {
    let status = result.expect_err("the call should fail");
    assert_eq!(status.code(), code, "{}", status.message());
    for n in needles {
        assert!(
            status.message().contains(n),
            "{code:?} message {:?} does not name {n:?}",
            status.message()
        );
    }
}

/// The first `rows` rows of the digits validation set, named `name`.
fn digits(name: &str, rows: usize) -> Tensor {
    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|t| t.name == "x")
        .unwrap();
    let mut t = x.slice_batch(0, rows);
    t.name = name.into();
    t
}

fn f32s(t: &Tensor) -> &[f32] {
    match &t.data {
        TensorData::Fp32(v) => v,
        other => panic!("{} is not FP32: {other:?}", t.name),
    }
}

fn raw_f32(v: &[f32]) -> Bytes {
    Bytes::from(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

fn input(t: &Tensor) -> InferInputTensor {
    InferInputTensor {
        name: t.name.clone(),
        datatype: "FP32".into(),
        shape: t.shape.iter().map(|&d| d as i64).collect(),
        ..Default::default()
    }
}

/// A query of FP32 `inputs` as raw contents (what `tritonclient.grpc` sends).
fn raw_query(model: &str, inputs: &[&Tensor]) -> ModelInferRequest {
    ModelInferRequest {
        model_name: model.into(),
        inputs: inputs.iter().map(|t| input(t)).collect(),
        raw_input_contents: inputs.iter().map(|t| raw_f32(f32s(t))).collect(),
        ..Default::default()
    }
}

fn param(choice: ParameterChoice) -> InferParameter {
    InferParameter {
        parameter_choice: Some(choice),
    }
}

fn string_param(resp: &ModelInferResponse, key: &str) -> String {
    match resp
        .parameters
        .get(key)
        .and_then(|p| p.parameter_choice.as_ref())
    {
        Some(ParameterChoice::StringParam(s)) => s.clone(),
        other => panic!("response parameter {key} is {other:?}"),
    }
}

fn number_param(resp: &ModelInferResponse, key: &str) -> f64 {
    match resp
        .parameters
        .get(key)
        .and_then(|p| p.parameter_choice.as_ref())
    {
        Some(ParameterChoice::DoubleParam(v)) => *v,
        other => panic!("response parameter {key} is {other:?}"),
    }
}

/// The outputs of a response, decoded from its raw contents.
fn outputs(resp: &ModelInferResponse) -> Vec<Tensor> {
    assert_eq!(resp.outputs.len(), resp.raw_output_contents.len());
    resp.outputs
        .iter()
        .zip(&resp.raw_output_contents)
        .map(|(o, raw)| {
            infaas_protocol::decode_raw_tensor(
                infaas_protocol::Role::Output,
                &o.name,
                &o.datatype,
                &o.shape,
                raw,
            )
            .unwrap()
        })
        .collect()
}

/// What ONNX Runtime computes on the zoo file itself.
fn onnx_runtime(file: &str, inputs: Vec<Tensor>) -> Vec<Tensor> {
    use infaas_executors::engine::{DirectSession, SessionConfig};
    let mut s = DirectSession::load(&zoo_bytes(file), &SessionConfig::default()).unwrap();
    s.run(inputs).unwrap()
}

fn assert_close(got: &Tensor, want: &Tensor) {
    assert_eq!(got.name, want.name);
    assert_eq!(got.shape, want.shape, "{}", got.name);
    assert_eq!(got.dtype(), want.dtype(), "{}", got.name);
    for k in 0..want.data.len() {
        let (a, b) = (got.data.get_f64(k).unwrap(), want.data.get_f64(k).unwrap());
        assert!(
            (a - b).abs() <= 1e-5,
            "{}[{k}]: {a} differs from ONNX Runtime's {b}",
            got.name
        );
    }
}

/// Health needs no token; everything else takes the token as HTTP does (signature, expiry,
/// revocation) and spends the tenant's request rate; unknown names are NOT_FOUND, Triton's
/// other methods UNIMPLEMENTED, oversized messages refused, and the server keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_metadata_tokens_and_limits() {
    let b = Backends::embedded();
    let s = TestServer::start_with(&b, |c| c.max_body_bytes = 4096).await;
    let acme = s.tenant("acme").await;
    let token = s.token(&acme.admin_key).await;
    let mut c = client(&s.grpc_url()).await;

    // Health: no token.
    assert!(
        c.server_live(ServerLiveRequest {})
            .await
            .unwrap()
            .get_ref()
            .live
    );
    assert!(
        c.server_ready(ServerReadyRequest {})
            .await
            .unwrap()
            .get_ref()
            .ready
    );

    // Everything else: a valid token.
    expect_code(
        c.server_metadata(ServerMetadataRequest {}).await,
        Code::Unauthenticated,
        &["authorization"],
    );
    expect_code(
        c.server_metadata(authed(ServerMetadataRequest {}, "not-a-token"))
            .await,
        Code::Unauthenticated,
        &["access token"],
    );
    let mut basic = Request::new(ServerMetadataRequest {});
    basic
        .metadata_mut()
        .insert("authorization", "Basic abc".parse().unwrap());
    expect_code(
        c.server_metadata(basic).await,
        Code::Unauthenticated,
        &["Bearer"],
    );
    for missing in [
        c.model_ready(ModelReadyRequest {
            name: "digits".into(),
            ..Default::default()
        })
        .await
        .map(|_| ()),
        c.model_metadata(ModelMetadataRequest {
            name: "digits".into(),
            ..Default::default()
        })
        .await
        .map(|_| ()),
        c.model_infer(ModelInferRequest {
            model_name: "digits".into(),
            ..Default::default()
        })
        .await
        .map(|_| ()),
    ] {
        expect_code(missing, Code::Unauthenticated, &["authorization"]);
    }
    let meta = c
        .server_metadata(authed(ServerMetadataRequest {}, &token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(meta.name, "infaas");
    assert_eq!(meta.version, env!("CARGO_PKG_VERSION"));
    assert!(meta.extensions.contains(&"model_less".to_string()));

    // Names the tenant does not have.
    let ready = c
        .model_ready(authed(
            ModelReadyRequest {
                name: "nope".into(),
                ..Default::default()
            },
            &token,
        ))
        .await
        .unwrap();
    assert!(!ready.get_ref().ready);
    expect_code(
        c.model_metadata(authed(
            ModelMetadataRequest {
                name: "nope".into(),
                ..Default::default()
            },
            &token,
        ))
        .await,
        Code::NotFound,
        &["nope"],
    );
    let x = Tensor::new("input", vec![1, 2], TensorData::Fp32(vec![0.0, 1.0])).unwrap();
    expect_code(
        c.model_infer(authed(raw_query("nope", &[&x]), &token))
            .await,
        Code::NotFound,
        &["nope"],
    );
    // Bad input is refused before any lookup, naming the tensor.
    let mut short = raw_query("nope", &[&x]);
    short.raw_input_contents[0] = Bytes::from_static(&[0; 5]);
    expect_code(
        c.model_infer(authed(short, &token)).await,
        Code::InvalidArgument,
        &["input 'input'", "5 bytes"],
    );

    // A message over max_body_bytes is refused; the connection and server go on.
    let big = Tensor::new("input", vec![1, 2048], TensorData::Fp32(vec![0.5; 2048])).unwrap();
    let refused = c
        .model_infer(authed(raw_query("nope", &[&big]), &token))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");
    assert!(refused.message().contains("4096"), "{}", refused.message());
    assert!(
        c.server_live(ServerLiveRequest {})
            .await
            .unwrap()
            .get_ref()
            .live
    );

    // A method of Triton's service that infaas does not implement.
    let mut grpc = tonic::client::Grpc::new(
        tonic::transport::Channel::from_shared(s.grpc_url())
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    grpc.ready().await.unwrap();
    let path = tonic::codegen::http::uri::PathAndQuery::from_static(
        "/inference.GRPCInferenceService/ModelConfig",
    );
    let codec = tonic_prost::ProstCodec::<ModelReadyRequest, ServerLiveRequest>::default();
    let unimplemented = grpc
        .unary(
            authed(
                ModelReadyRequest {
                    name: "digits".into(),
                    ..Default::default()
                },
                &token,
            ),
            path,
            codec,
        )
        .await;
    expect_code(unimplemented, Code::Unimplemented, &[]);

    // A revoked key's token stops working at once.
    let created = s
        .send(
            s.authed(Method::POST, "/v1/api-keys", &token)
                .json(&serde_json::json!({ "name": "soon-revoked" })),
        )
        .await;
    let (_, created) = infaas_testing::server::json(created).await;
    let revoked_token = s.token(created["api_key"].as_str().unwrap()).await;
    c.server_metadata(authed(ServerMetadataRequest {}, &revoked_token))
        .await
        .unwrap();
    let key_id = created["key"]["id"].as_str().unwrap();
    let resp = s
        .send(s.authed(Method::DELETE, &format!("/v1/api-keys/{key_id}"), &token))
        .await;
    assert!(resp.status().is_success());
    expect_code(
        c.server_metadata(authed(ServerMetadataRequest {}, &revoked_token))
            .await,
        Code::Unauthenticated,
        &["revoked"],
    );

    // The tenant's request rate, as for HTTP: 1 per second with a burst of 2. Health is
    // not charged.
    let slow = s
        .tenant_with(
            "slow",
            Quotas {
                requests_per_second: 1.0,
                ..Quotas::default()
            },
        )
        .await;
    let slow_token = s.token(&slow.admin_key).await;
    let mut limited = None;
    for _ in 0..5 {
        if let Err(st) = c
            .server_metadata(authed(ServerMetadataRequest {}, &slow_token))
            .await
        {
            limited = Some(st);
            break;
        }
    }
    let limited = limited.expect("the request rate is enforced");
    assert_eq!(limited.code(), Code::ResourceExhausted, "{limited:?}");
    assert!(
        limited.message().contains("rate limit"),
        "{}",
        limited.message()
    );
    assert!(limited.metadata().get("retry-after").is_some());
    assert_eq!(
        limited
            .metadata()
            .get("infaas-error-type")
            .and_then(|v| v.to_str().ok()),
        Some("rate_limited")
    );
    for _ in 0..5 {
        assert!(
            c.server_live(ServerLiveRequest {})
                .await
                .unwrap()
                .get_ref()
                .live
        );
    }
    // Another tenant is not affected.
    c.server_metadata(authed(ServerMetadataRequest {}, &token))
        .await
        .unwrap();
    drop(c);
    s.stop().await;
}

/// Queries by model equal ONNX Runtime's answer (raw and typed contents, the outputs
/// asked for); model-less queries by application follow `latency_ms` and `min_accuracy`
/// parameters; another tenant's model is NOT_FOUND; bad tensors are INVALID_ARGUMENT
/// naming the tensor; the server serves on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn infers_like_onnx_runtime_and_model_less() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    let other = p.tenant("globex", open_quotas()).await;
    // Logistic regression has no INT8 variant, so every variant computes what ONNX Runtime
    // computes on the source file; only the large MLP reaches 0.98 (zoo/README.md).
    for (name, app) in [
        ("digits-logreg", "digits"),
        ("digits-mlp-l", "digits"),
        ("digits-two-input", "pairs"),
    ] {
        p.register_ok(&t, &Registration::zoo(name, app)).await;
    }
    for name in ["digits-logreg", "digits-mlp-l", "digits-two-input"] {
        p.wait_ready(&t, name, READY).await;
    }
    let mut c = client(&p.grpc_url()).await;
    let token = t.token.as_str();

    // Metadata and readiness of a model and of an application.
    for name in ["digits-logreg", "digits"] {
        let ready = c
            .model_ready(authed(
                ModelReadyRequest {
                    name: name.into(),
                    ..Default::default()
                },
                token,
            ))
            .await
            .unwrap();
        assert!(ready.get_ref().ready, "{name}");
        let meta = c
            .model_metadata(authed(
                ModelMetadataRequest {
                    name: name.into(),
                    ..Default::default()
                },
                token,
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(meta.name, name);
        assert_eq!(meta.platform, "onnxruntime_onnx");
        assert_eq!(meta.inputs.len(), 1, "{meta:?}");
        assert_eq!(
            (
                meta.inputs[0].name.as_str(),
                meta.inputs[0].datatype.as_str()
            ),
            ("input", "FP32")
        );
        assert_eq!(meta.inputs[0].shape.last(), Some(&64));
        let outs: Vec<&str> = meta.outputs.iter().map(|o| o.name.as_str()).collect();
        assert_eq!(outs, ["label", "probabilities"], "{name}");
    }

    // By model, raw contents: every output, equal to ONNX Runtime's.
    let x = digits("input", 8);
    let want = onnx_runtime("digits-logreg.onnx", vec![x.clone()]);
    let mut q = raw_query("digits-logreg", &[&x]);
    q.id = "q-1".into();
    let resp = c.model_infer(authed(q, token)).await.unwrap().into_inner();
    assert_eq!(
        (resp.model_name.as_str(), resp.id.as_str()),
        ("digits-logreg", "q-1")
    );
    let got = outputs(&resp);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_close(g, w);
    }
    assert!(string_param(&resp, "variant").starts_with("digits-logreg."));
    assert_eq!(string_param(&resp, "model"), "digits-logreg");
    assert_eq!(string_param(&resp, "app"), "digits");
    assert!(!string_param(&resp, "worker").is_empty());
    assert!(number_param(&resp, "latency_ms") > 0.0);
    assert!(number_param(&resp, "predicted_ms") > 0.0);

    // Typed contents, one output asked for: only that one comes back.
    let mut q = ModelInferRequest {
        model_name: "digits-logreg".into(),
        inputs: vec![input(&x)],
        outputs: vec![InferRequestedOutputTensor {
            name: "probabilities".into(),
            ..Default::default()
        }],
        ..Default::default()
    };
    q.inputs[0].contents = Some(InferTensorContents {
        fp32_contents: f32s(&x).to_vec(),
        ..Default::default()
    });
    let resp = c.model_infer(authed(q, token)).await.unwrap().into_inner();
    let got = outputs(&resp);
    assert_eq!(got.len(), 1);
    assert_close(&got[0], &want[1]);
    // Outputs in the order asked.
    let mut q = raw_query("digits-logreg", &[&x]);
    q.outputs = ["probabilities", "label"]
        .into_iter()
        .map(|n| InferRequestedOutputTensor {
            name: n.into(),
            ..Default::default()
        })
        .collect();
    let resp = c.model_infer(authed(q, token)).await.unwrap().into_inner();
    let got = outputs(&resp);
    assert_close(&got[0], &want[1]);
    assert_close(&got[1], &want[0]);

    // Model-less by application: an accuracy floor only the large MLP reaches, an SLO as an
    // int64, a string or a double parameter.
    for latency in [
        ParameterChoice::Int64Param(1000),
        ParameterChoice::StringParam("1000".into()),
        ParameterChoice::DoubleParam(1000.0),
    ] {
        let mut q = raw_query("digits", &[&x]);
        q.parameters = HashMap::from([
            ("latency_ms".to_string(), param(latency.clone())),
            (
                "min_accuracy".to_string(),
                param(ParameterChoice::DoubleParam(0.98)),
            ),
        ]);
        let resp = c.model_infer(authed(q, token)).await.unwrap().into_inner();
        assert_eq!(string_param(&resp, "model"), "digits-mlp-l", "{latency:?}");
        assert_eq!(string_param(&resp, "app"), "digits");
        assert!(number_param(&resp, "accuracy") >= 0.98);
        let got = outputs(&resp);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].shape, [8]);
    }
    // Any model of the application, without requirements.
    let resp = c
        .model_infer(authed(raw_query("digits", &[&x]), token))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(string_param(&resp, "app"), "digits");
    // Requirements no variant meets, and requirements that are not numbers.
    let mut q = raw_query("digits", &[&x]);
    q.parameters = HashMap::from([(
        "min_accuracy".to_string(),
        param(ParameterChoice::DoubleParam(0.999)),
    )]);
    expect_code(
        c.model_infer(authed(q, token)).await,
        Code::FailedPrecondition,
        &["no variant meets", "closest variant"],
    );
    for (key, value) in [
        ("latency_ms", ParameterChoice::StringParam("fast".into())),
        ("latency_ms", ParameterChoice::BoolParam(true)),
        ("latency_ms", ParameterChoice::Int64Param(-1)),
        ("min_accuracy", ParameterChoice::DoubleParam(1.5)),
        ("max_cost", ParameterChoice::DoubleParam(-1.0)),
    ] {
        let mut q = raw_query("digits", &[&x]);
        q.parameters = HashMap::from([(key.to_string(), param(value))]);
        expect_code(
            c.model_infer(authed(q, token)).await,
            Code::InvalidArgument,
            &[key],
        );
    }

    // Another tenant sees none of it.
    let theirs = other.token.as_str();
    expect_code(
        c.model_infer(authed(raw_query("digits-logreg", &[&x]), theirs))
            .await,
        Code::NotFound,
        &["digits-logreg"],
    );
    expect_code(
        c.model_infer(authed(raw_query("digits", &[&x]), theirs))
            .await,
        Code::NotFound,
        &["digits"],
    );
    expect_code(
        c.model_metadata(authed(
            ModelMetadataRequest {
                name: "digits-logreg".into(),
                ..Default::default()
            },
            theirs,
        ))
        .await,
        Code::NotFound,
        &["digits-logreg"],
    );
    let ready = c
        .model_ready(authed(
            ModelReadyRequest {
                name: "digits-logreg".into(),
                ..Default::default()
            },
            theirs,
        ))
        .await
        .unwrap();
    assert!(!ready.get_ref().ready);

    // Bad tensors: INVALID_ARGUMENT naming the tensor.
    let narrow = Tensor::new("input", vec![1, 63], TensorData::Fp32(vec![0.0; 63])).unwrap();
    let (left, right) = (digits("left", 1), digits("right", 1));
    let left = Tensor::new(
        "left",
        vec![1, 32],
        TensorData::Fp32(f32s(&left)[..32].to_vec()),
    )
    .unwrap();
    let right = Tensor::new(
        "right",
        vec![1, 32],
        TensorData::Fp32(f32s(&right)[32..].to_vec()),
    )
    .unwrap();
    let wrong_name = Tensor {
        name: "bogus".into(),
        ..right.clone()
    };
    let mut short = raw_query("digits-logreg", &[&x]);
    short.raw_input_contents[0] = short.raw_input_contents[0].slice(..100);
    let mut two_inputs_one_raw = raw_query("digits-two-input", &[&left, &right]);
    two_inputs_one_raw.raw_input_contents.pop();
    let mut unknown_dtype = raw_query("digits-logreg", &[&x]);
    unknown_dtype.inputs[0].datatype = "FP8".into();
    let cases: Vec<(&str, ModelInferRequest, Vec<&str>)> = vec![
        (
            "wrong shape, by model",
            raw_query("digits-logreg", &[&narrow]),
            vec!["input", "63"],
        ),
        (
            "wrong shape, by application",
            raw_query("digits", &[&narrow]),
            vec!["input", "63"],
        ),
        (
            "raw bytes short of the shape",
            short,
            vec!["input 'input'", "100 bytes"],
        ),
        (
            "unknown datatype",
            unknown_dtype,
            vec!["input 'input'", "FP8"],
        ),
        (
            "fewer raw contents than inputs",
            two_inputs_one_raw,
            vec!["'right'", "raw_input_contents"],
        ),
        (
            "unknown input name",
            raw_query("digits-two-input", &[&left, &wrong_name]),
            vec!["bogus"],
        ),
        (
            "unknown output",
            ModelInferRequest {
                outputs: vec![InferRequestedOutputTensor {
                    name: "nope".into(),
                    ..Default::default()
                }],
                ..raw_query("digits-logreg", &[&x])
            },
            vec!["output 'nope'", "label, probabilities"],
        ),
        (
            "no inputs",
            raw_query("digits-logreg", &[]),
            vec!["no inputs"],
        ),
    ];
    for (what, q, needles) in cases {
        let status = c.model_infer(authed(q, token)).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{what}: {status:?}");
        for n in needles {
            assert!(
                status.message().contains(n),
                "{what}: {:?} does not name {n:?}",
                status.message()
            );
        }
    }
    // The right names on the two-input model answer.
    let resp = c
        .model_infer(authed(
            raw_query("digits-two-input", &[&left, &right]),
            token,
        ))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(outputs(&resp)[0].shape, [1, 10]);

    // The server still serves, over gRPC and HTTP.
    let resp = c
        .model_infer(authed(raw_query("digits-logreg", &[&x]), token))
        .await
        .unwrap()
        .into_inner();
    assert_close(&outputs(&resp)[0], &want[0]);
    assert!(p
        .get(&t, "/v1/models/digits-logreg")
        .await
        .status
        .is_success());
    drop(c);
    p.stop().await;
}

/// The unmodified `tritonclient.grpc` client: health, metadata, queries by model and by
/// application equal to ONNX Runtime's answers, errors as `InferenceServerException`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tritonclient_grpc_infers() {
    let Some(ort) = ort_library() else { return };
    if !infaas_testing::platform::python_has(
        "tritonclient.grpc, onnxruntime, numpy",
        "tritonclient[grpc], onnxruntime and numpy",
    ) {
        return;
    }
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let t = p.tenant("acme", open_quotas()).await;
    p.register_ok(&t, &Registration::zoo("digits-logreg", "digits"))
        .await;
    p.wait_ready(&t, "digits-logreg", READY).await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/python/triton_grpc_client.py"
    );
    let addr = p.server.grpc_addr.unwrap().to_string();
    for name in ["digits-logreg", "digits"] {
        let stdout = infaas_testing::platform::run_client_script(
            script,
            addr.clone(),
            t.token.clone(),
            name,
        )
        .await;
        assert!(stdout.contains("outputs equal ONNX Runtime's"), "{stdout}");
    }
    p.stop().await;
}
