//! Requests recorded from the real `tritonclient.http` client and the responses it
//! accepted (see fixtures/make_golden.py): we must decode the former and produce the
//! latter byte for byte.

// clippy.toml allows unwrap inside #[test] functions only, not in these helpers.
#![allow(clippy::unwrap_used)]

use infaas_core::{Tensor, TensorData};
use infaas_protocol::{decode_v2_request, encode_v2_response, RequestedOutput};
use serde_json::{Map, Value};

struct Fixture {
    request: Vec<u8>,
    response: Vec<u8>,
    meta: Value,
}

fn fixture(name: &str) -> Fixture {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let read = |file: String| std::fs::read(format!("{dir}{file}")).unwrap();
    Fixture {
        request: read(format!("{name}_request.bin")),
        response: read(format!("{name}_response.bin")),
        meta: serde_json::from_slice(&read(format!("{name}.json"))).unwrap(),
    }
}

fn header_length(meta: &Value, key: &str) -> Option<usize> {
    meta[key].as_u64().map(|n| n as usize)
}

#[test]
fn fp32_binary_input_with_binary_output() {
    let f = fixture("fp32_binary");
    assert_eq!(
        f.meta["request_line"],
        "POST /v2/models/classifier/versions/1/infer HTTP/1.1"
    );
    let headers = &f.meta["request_headers"];
    assert_eq!(headers["Inference-Header-Content-Length"], "163");
    // tritonclient.http sends no Content-Type at all.
    assert!(headers.get("Content-Type").is_none());

    let h = header_length(&f.meta, "request_header_length");
    assert_eq!(h, Some(163));
    let req = decode_v2_request(&f.request, h).unwrap();
    assert_eq!(req.id, None);
    assert!(req.parameters.is_empty());
    assert!(!req.binary_output_default);
    assert_eq!(
        req.outputs,
        vec![RequestedOutput {
            name: "label".into(),
            binary: Some(true)
        }]
    );
    let [input] = &req.inputs[..] else {
        panic!("one input expected: {:?}", req.inputs)
    };
    assert_eq!(input.name, "input");
    assert_eq!(input.shape, vec![2, 64]);
    let expected: Vec<f32> = (0..128).map(|i| (i as f32 - 64.0) / 4.0).collect();
    assert_eq!(input.data, TensorData::Fp32(expected));

    let label = Tensor::new("label", vec![2], TensorData::Int64(vec![3, 11])).unwrap();
    let other = Tensor::new("probs", vec![2], TensorData::Fp32(vec![0.5, 0.5])).unwrap();
    let resp = encode_v2_response(
        "classifier",
        Some("1"),
        None,
        &[other, label],
        &req,
        Map::new(),
    )
    .unwrap();
    assert_eq!(
        resp.header_length,
        header_length(&f.meta, "response_header_length")
    );
    assert_eq!(resp.content_type(), "application/octet-stream");
    assert_eq!(resp.body, f.response);
}

#[test]
fn bytes_bool_int8_binary_inputs_with_all_outputs_binary() {
    let f = fixture("mixed_binary");
    let h = header_length(&f.meta, "request_header_length");
    let req = decode_v2_request(&f.request, h).unwrap();
    // No outputs listed: tritonclient asks for every output as binary.
    assert!(req.outputs.is_empty());
    assert!(req.binary_output_default);
    assert_eq!(req.parameters["binary_data_output"], Value::Bool(true));
    let words = Tensor::new(
        "words",
        vec![3],
        TensorData::Bytes(vec!["cat".into(), "日本".into(), String::new()]),
    )
    .unwrap();
    let flags = Tensor::new(
        "flags",
        vec![2, 2],
        TensorData::Bool(vec![true, false, false, true]),
    )
    .unwrap();
    let small = Tensor::new("small", vec![3], TensorData::Int8(vec![-128, 0, 127])).unwrap();
    assert_eq!(req.inputs, vec![words, flags, small]);

    let scores = Tensor::new("scores", vec![1, 2], TensorData::Fp64(vec![0.25, -1.5])).unwrap();
    let resp =
        encode_v2_response("classifier", Some("1"), None, &[scores], &req, Map::new()).unwrap();
    assert_eq!(
        resp.header_length,
        header_length(&f.meta, "response_header_length")
    );
    assert_eq!(resp.body, f.response);
}

#[test]
fn json_only_request_and_response() {
    let f = fixture("json_only");
    assert!(f.meta["request_headers"]
        .get("Inference-Header-Content-Length")
        .is_none());
    let req = decode_v2_request(&f.request, None).unwrap();
    let xs = Tensor::new("xs", vec![1, 3], TensorData::Fp32(vec![1.5, -2.0, 3.25])).unwrap();
    let ids = Tensor::new("ids", vec![2], TensorData::Int64(vec![7, -9])).unwrap();
    let text = Tensor::new(
        "text",
        vec![2],
        TensorData::Bytes(vec!["hello".into(), "world".into()]),
    )
    .unwrap();
    assert_eq!(req.inputs, vec![xs, ids, text]);
    assert_eq!(
        req.outputs,
        vec![RequestedOutput {
            name: "probs".into(),
            binary: Some(false)
        }]
    );

    let probs = Tensor::new("probs", vec![1, 2], TensorData::Fp32(vec![0.5, 0.25])).unwrap();
    let resp =
        encode_v2_response("classifier", Some("1"), None, &[probs], &req, Map::new()).unwrap();
    assert_eq!(resp.header_length, None);
    assert_eq!(resp.content_type(), "application/json");
    assert_eq!(resp.body, f.response);
}
