//! v2 request decoding and response encoding: every datatype in both encodings,
//! output selection and the errors a client can provoke.

// clippy.toml allows unwrap inside #[test] functions only, not in these helpers.
#![allow(clippy::unwrap_used)]

use infaas_core::{Tensor, TensorData};
use infaas_protocol::{
    decode_v2_request, decode_v2_response, encode_v2_response, encode_v2_response_with,
    tensor_to_json, ProtocolError, RequestedOutput, V2Request,
};
use serde_json::{json, Map, Value};

/// A body with a JSON header followed by `binary`, and the header's length.
fn body(header: &Value, binary: &[u8]) -> (Vec<u8>, usize) {
    let mut b = serde_json::to_vec(header).unwrap();
    let h = b.len();
    b.extend_from_slice(binary);
    (b, h)
}

fn decode_err(header: &Value, binary: &[u8]) -> String {
    let (b, h) = body(header, binary);
    decode_v2_request(&b, Some(h)).unwrap_err().to_string()
}

fn all_datatypes() -> Vec<Tensor> {
    let t = |name: &str, shape: Vec<usize>, data| Tensor::new(name, shape, data).unwrap();
    vec![
        t(
            "bool",
            vec![2, 2],
            TensorData::Bool(vec![true, false, false, true]),
        ),
        t("u8", vec![3], TensorData::Uint8(vec![0, 128, 255])),
        t("i8", vec![3], TensorData::Int8(vec![-128, 0, 127])),
        t(
            "i16",
            vec![1, 3],
            TensorData::Int16(vec![i16::MIN, 0, i16::MAX]),
        ),
        t(
            "i32",
            vec![3],
            TensorData::Int32(vec![i32::MIN, -1, i32::MAX]),
        ),
        t(
            "i64",
            vec![3, 1],
            TensorData::Int64(vec![i64::MIN, -1, i64::MAX]),
        ),
        t("f32", vec![2], TensorData::Fp32(vec![0.1, -3.4e38])),
        t("f64", vec![2], TensorData::Fp64(vec![0.1, -1e300])),
        t(
            "bytes",
            vec![2, 2],
            TensorData::Bytes(vec!["a".into(), "".into(), "日本".into(), "\u{0}".into()]),
        ),
        t("empty", vec![0, 3], TensorData::Fp32(vec![])),
    ]
}

/// The request a client would send for `tensors`: each as binary or JSON.
fn request_for(tensors: &[Tensor], binary: bool) -> (Vec<u8>, Option<usize>) {
    let mut raw = Vec::new();
    let mut inputs = Vec::new();
    for t in tensors {
        let mut j = tensor_to_json(t);
        if binary {
            // Encode through the response path, which shares the binary layout.
            let req = V2Request {
                id: None,
                parameters: Map::new(),
                inputs: vec![],
                outputs: vec![],
                binary_output_default: true,
            };
            let enc =
                encode_v2_response("m", None, None, std::slice::from_ref(t), &req, Map::new())
                    .unwrap();
            let h = enc.header_length.unwrap();
            raw.extend_from_slice(&enc.body[h..]);
            j.data = None;
            j.parameters
                .insert("binary_data_size".into(), (enc.body.len() - h).into());
        }
        inputs.push(j);
    }
    let (b, h) = body(&json!({ "inputs": inputs }), &raw);
    (b, binary.then_some(h))
}

#[test]
fn every_datatype_decodes_from_json_and_binary() {
    let tensors = all_datatypes();
    for binary in [false, true] {
        let (b, h) = request_for(&tensors, binary);
        let req = decode_v2_request(&b, h).unwrap();
        assert_eq!(req.inputs, tensors, "binary={binary}");
    }
}

#[test]
fn every_datatype_round_trips_through_a_response() {
    let tensors = all_datatypes();
    for binary in [false, true] {
        let req = V2Request {
            id: Some("r1".into()),
            parameters: Map::new(),
            inputs: vec![],
            outputs: vec![],
            binary_output_default: binary,
        };
        let mut params = Map::new();
        params.insert("sequence_id".into(), json!(4));
        let enc =
            encode_v2_response("m", Some("2"), Some("r1"), &tensors, &req, params.clone()).unwrap();
        assert_eq!(enc.header_length.is_some(), binary);
        let resp = decode_v2_response(&enc.body, enc.header_length).unwrap();
        assert_eq!(resp.outputs, tensors, "binary={binary}");
        assert_eq!(resp.model_name, "m");
        assert_eq!(resp.model_version.as_deref(), Some("2"));
        assert_eq!(resp.id.as_deref(), Some("r1"));
        assert_eq!(resp.parameters, params);
    }
}

/// Parameters written from a borrowed object come out byte for byte as the same map would,
/// and none means no `parameters` member.
#[test]
fn parameters_from_an_object_are_written_as_the_map() {
    #[derive(serde::Serialize)]
    struct Params<'a> {
        accuracy: f64,
        reason: &'a str,
    }
    let tensors = all_datatypes();
    let req = V2Request {
        id: None,
        parameters: Map::new(),
        inputs: vec![],
        outputs: vec![],
        binary_output_default: false,
    };
    let object = Params {
        accuracy: 0.5,
        reason: "a \"quoted\" reason",
    };
    let map = match serde_json::to_value(&object).unwrap() {
        Value::Object(m) => m,
        other => panic!("{other}"),
    };
    let a = encode_v2_response_with("m", None, None, &tensors, &req, Some(&object)).unwrap();
    let b = encode_v2_response("m", None, None, &tensors, &req, map.clone()).unwrap();
    assert_eq!(a, b);
    assert_eq!(
        decode_v2_response(&a.body, a.header_length)
            .unwrap()
            .parameters,
        map
    );
    let none = encode_v2_response_with::<Params>("m", None, None, &tensors, &req, None).unwrap();
    let doc: Value = serde_json::from_slice(&none.body).unwrap();
    assert!(doc.get("parameters").is_none(), "{doc}");
}

#[test]
fn binary_outputs_carry_their_size_and_no_data() {
    let req = decode_v2_request(
        br#"{"inputs":[],"outputs":[{"name":"b","parameters":{"binary_data":true}}]}"#,
        None,
    )
    .unwrap();
    let b = Tensor::new("b", vec![2], TensorData::Int16(vec![1, 2])).unwrap();
    let enc = encode_v2_response("m", None, None, &[b], &req, Map::new()).unwrap();
    let h = enc.header_length.unwrap();
    let header: Value = serde_json::from_slice(&enc.body[..h]).unwrap();
    assert_eq!(
        header,
        json!({"model_name": "m", "outputs": [{"name": "b", "datatype": "INT16", "shape": [2],
            "parameters": {"binary_data_size": 4}}]})
    );
    assert_eq!(&enc.body[h..], &[1, 0, 2, 0]);
}

#[test]
fn an_empty_binary_output_still_sets_the_header_length() {
    let req = decode_v2_request(
        br#"{"inputs":[],"parameters":{"binary_data_output":true}}"#,
        None,
    )
    .unwrap();
    let e = Tensor::new("e", vec![0], TensorData::Fp32(vec![])).unwrap();
    let enc = encode_v2_response("m", None, None, &[e], &req, Map::new()).unwrap();
    assert_eq!(enc.header_length, Some(enc.body.len()));
    let resp = decode_v2_response(&enc.body, enc.header_length).unwrap();
    assert_eq!(resp.outputs[0].data, TensorData::Fp32(vec![]));
}

#[test]
fn requested_outputs_select_order_and_encoding() {
    let outputs = [
        Tensor::new("a", vec![1], TensorData::Int32(vec![1])).unwrap(),
        Tensor::new("b", vec![1], TensorData::Int32(vec![2])).unwrap(),
        Tensor::new("c", vec![1], TensorData::Int32(vec![3])).unwrap(),
    ];
    let req = decode_v2_request(
        br#"{"inputs":[],"parameters":{"binary_data_output":true},"outputs":[
            {"name":"c"},{"name":"a","parameters":{"binary_data":false}}]}"#,
        None,
    )
    .unwrap();
    assert_eq!(
        req.outputs,
        vec![
            RequestedOutput {
                name: "c".into(),
                binary: None
            },
            RequestedOutput {
                name: "a".into(),
                binary: Some(false)
            },
        ]
    );
    let enc = encode_v2_response("m", None, None, &outputs, &req, Map::new()).unwrap();
    let h = enc.header_length.unwrap();
    let header: Value = serde_json::from_slice(&enc.body[..h]).unwrap();
    // c: binary by the request default; a: JSON by its own parameter; b: not asked.
    assert_eq!(header["outputs"][0]["name"], "c");
    assert_eq!(header["outputs"][0]["parameters"]["binary_data_size"], 4);
    assert_eq!(
        header["outputs"][1],
        json!({"name": "a", "datatype": "INT32", "shape": [1], "data": [1]})
    );
    assert_eq!(header["outputs"].as_array().unwrap().len(), 2);
    let resp = decode_v2_response(&enc.body, enc.header_length).unwrap();
    assert_eq!(resp.outputs, vec![outputs[2].clone(), outputs[0].clone()]);

    // Without `outputs`, all of them, as JSON unless binary_data_output.
    let req = decode_v2_request(br#"{"inputs":[]}"#, None).unwrap();
    let enc = encode_v2_response("m", None, None, &outputs, &req, Map::new()).unwrap();
    assert_eq!(enc.header_length, None);
    let resp = decode_v2_response(&enc.body, None).unwrap();
    assert_eq!(resp.outputs, outputs.to_vec());
}

#[test]
fn unknown_requested_output_is_named() {
    let req = decode_v2_request(br#"{"inputs":[],"outputs":[{"name":"nope"}]}"#, None).unwrap();
    let a = Tensor::new("label", vec![1], TensorData::Int32(vec![1])).unwrap();
    let e = encode_v2_response("m", None, None, &[a], &req, Map::new()).unwrap_err();
    assert!(e.is_client_error());
    assert_eq!(
        e.to_string(),
        "output 'nope': the model has no such output (outputs: label)"
    );
}

#[test]
fn requested_output_errors() {
    let err = |s: &str| {
        decode_v2_request(s.as_bytes(), None)
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        err(r#"{"inputs":[],"outputs":[{"name":"a"},{"name":"a"}]}"#),
        "output 'a': is given more than once"
    );
    assert_eq!(
        err(r#"{"inputs":[],"outputs":[{"name":"a","parameters":{"binary_data":1}}]}"#),
        "output 'a': parameter 'binary_data' must be a boolean"
    );
    assert_eq!(
        err(r#"{"inputs":[],"outputs":[{"name":"a","parameters":{"classification":3}}]}"#),
        "output 'a': the classification extension is not supported"
    );
    assert_eq!(
        err(r#"{"inputs":[],"outputs":[{"name":"a","parameters":{"shared_memory_region":"r"}}]}"#),
        "output 'a': shared memory is not supported"
    );
    assert_eq!(
        err(r#"{"inputs":[],"parameters":{"binary_data_output":"yes"}}"#),
        "parameter 'binary_data_output' must be a boolean"
    );
}

#[test]
fn request_id_and_parameters_are_kept() {
    let req = decode_v2_request(
        br#"{"id":"abc","model_name":"ignored","parameters":{"priority":2,"timeout":100},"inputs":[]}"#,
        None,
    )
    .unwrap();
    assert_eq!(req.id.as_deref(), Some("abc"));
    assert_eq!(req.parameters["priority"], 2);
    assert!(!req.binary_output_default);
}

#[test]
fn header_length_larger_than_body() {
    let e = decode_v2_request(br#"{"inputs":[]}"#, Some(100)).unwrap_err();
    assert!(matches!(
        e,
        ProtocolError::HeaderLength {
            header_length: 100,
            body_length: 13
        }
    ));
    assert_eq!(
        e.to_string(),
        "Inference-Header-Content-Length is 100 but the body holds only 13 bytes"
    );
}

#[test]
fn header_length_cutting_the_json_is_a_json_error() {
    let e = decode_v2_request(br#"{"inputs":[]}"#, Some(5)).unwrap_err();
    assert!(e.to_string().starts_with("invalid inference JSON"), "{e}");
}

fn binary_input(name: &str, datatype: &str, shape: Value, size: Value) -> Value {
    json!({"name": name, "datatype": datatype, "shape": shape,
        "parameters": {"binary_data_size": size}})
}

#[test]
fn binary_data_size_must_match_the_shape() {
    let h = json!({"inputs": [binary_input("x", "FP32", json!([2, 3]), json!(20))]});
    assert_eq!(
        decode_err(&h, &[0; 20]),
        "input 'x': binary_data_size is 20 but shape [2,3] of FP32 needs 24 bytes"
    );
}

#[test]
fn binary_sizes_must_add_up_to_the_body() {
    let h = json!({"inputs": [
        binary_input("a", "UINT8", json!([4]), json!(4)),
        binary_input("b", "INT16", json!([2]), json!(4)),
    ]});
    assert_eq!(
        decode_err(&h, &[0; 7]),
        "the inputs declare 8 bytes of binary data but 7 bytes follow the JSON header"
    );
    assert_eq!(
        decode_err(&h, &[0; 9]),
        "the inputs declare 8 bytes of binary data but 9 bytes follow the JSON header"
    );
    // Trailing bytes without any binary input are rejected too.
    let plain = json!({"inputs": []});
    assert!(decode_err(&plain, &[1]).contains("declare 0 bytes"));
    // Enormous declared sizes do not overflow.
    let huge = json!({"inputs": [
        binary_input("a", "UINT8", json!([1]), json!(u64::MAX)),
        binary_input("b", "UINT8", json!([1]), json!(u64::MAX)),
    ]});
    assert!(decode_err(&huge, &[0; 2]).contains(&format!("declare {} bytes", u64::MAX)));
}

#[test]
fn binary_data_size_must_be_a_count() {
    let h = json!({"inputs": [binary_input("x", "UINT8", json!([1]), json!(-1))]});
    assert_eq!(
        decode_err(&h, &[0]),
        "input 'x': parameter 'binary_data_size' must be a non-negative integer"
    );
}

#[test]
fn binary_without_header_length_or_with_data() {
    let h = json!({"inputs": [binary_input("x", "UINT8", json!([1]), json!(1))]});
    let b = serde_json::to_vec(&h).unwrap();
    assert_eq!(
        decode_v2_request(&b, None).unwrap_err().to_string(),
        "input 'x': has parameters.binary_data_size but the request has no \
         Inference-Header-Content-Length header"
    );
    let mut both = binary_input("x", "UINT8", json!([1]), json!(1));
    both["data"] = json!([1]);
    assert_eq!(
        decode_err(&json!({ "inputs": [both] }), &[1]),
        "input 'x': has both 'data' and parameters.binary_data_size"
    );
}

#[test]
fn missing_data_and_duplicate_inputs() {
    let missing = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]});
    assert_eq!(
        decode_err(&missing, &[]),
        "input 'x': has neither 'data' nor parameters.binary_data_size"
    );
    let t = json!({"name": "x", "datatype": "FP32", "shape": [1], "data": [1]});
    assert_eq!(
        decode_err(&json!({"inputs": [t.clone(), t]}), &[]),
        "input 'x': is given more than once"
    );
}

#[test]
fn json_input_errors_name_the_input() {
    let h = json!({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [2], "data": [1, 300]}]});
    assert_eq!(
        decode_err(&h, &[]),
        "input 'x': element 1 (300) is out of range for UINT8"
    );
    let h = json!({"inputs": [{"name": "x", "datatype": "FP8", "shape": [1], "data": [1]}]});
    assert!(decode_err(&h, &[]).starts_with("input 'x': datatype 'FP8' is not supported"));
    let h = json!({"inputs": [binary_input("x", "FP16", json!([1]), json!(2))]});
    assert!(decode_err(&h, &[0, 0]).starts_with("input 'x': datatype 'FP16' is not supported"));
}

#[test]
fn bytes_in_both_encodings() {
    let words = Tensor::new(
        "w",
        vec![3],
        TensorData::Bytes(vec!["hi".into(), "".into(), "ünï".into()]),
    )
    .unwrap();
    let json = json!({"inputs": [{"name": "w", "datatype": "BYTES", "shape": [3],
        "data": ["hi", "", "ünï"]}]});
    let (b, _) = body(&json, &[]);
    assert_eq!(
        decode_v2_request(&b, None).unwrap().inputs,
        vec![words.clone()]
    );

    let mut raw = Vec::new();
    for s in ["hi", "", "ünï"] {
        raw.extend_from_slice(&(s.len() as u32).to_le_bytes());
        raw.extend_from_slice(s.as_bytes());
    }
    let h = json!({"inputs": [binary_input("w", "BYTES", json!([3]), json!(raw.len()))]});
    let (b, hl) = body(&h, &raw);
    assert_eq!(decode_v2_request(&b, Some(hl)).unwrap().inputs, vec![words]);

    // Element count and UTF-8 are checked.
    let h = json!({"inputs": [binary_input("w", "BYTES", json!([4]), json!(raw.len()))]});
    assert_eq!(
        decode_err(&h, &raw),
        "input 'w': shape [4] holds 4 elements but the binary BYTES data holds 3"
    );
    let bad = [1, 0, 0, 0, 0xff];
    let h = json!({"inputs": [binary_input("w", "BYTES", json!([1]), json!(5))]});
    assert_eq!(
        decode_err(&h, &bad),
        "input 'w': element 0 is not valid UTF-8"
    );
    let cut = [9, 0, 0, 0, b'a'];
    assert_eq!(
        decode_err(&h, &cut),
        "input 'w': binary BYTES data ends inside element 0"
    );
}

#[test]
fn binary_bool_must_be_zero_or_one() {
    let h = json!({"inputs": [binary_input("b", "BOOL", json!([2]), json!(2))]});
    assert_eq!(
        decode_err(&h, &[1, 7]),
        "input 'b': element 1 is byte 7; BOOL must be 0 or 1"
    );
}

#[test]
fn shared_memory_inputs_are_rejected() {
    let h = json!({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
        "parameters": {"shared_memory_region": "r", "shared_memory_byte_size": 4}}]});
    assert_eq!(
        decode_err(&h, &[]),
        "input 'x': shared memory is not supported"
    );
}

#[test]
fn huge_shapes_fail_without_allocating() {
    let h = json!({"inputs": [binary_input("x", "UINT8", json!([1u64 << 62]), json!(4))]});
    assert_eq!(
        decode_err(&h, &[0; 4]),
        format!(
            "input 'x': binary_data_size is 4 but shape [{}] of UINT8 needs {} bytes",
            1u64 << 62,
            1u64 << 62
        )
    );
    let h = json!({"inputs": [binary_input("x", "FP64", json!([1u64 << 62, 4]), json!(8))]});
    assert_eq!(
        decode_err(&h, &[0; 8]),
        format!(
            "input 'x': shape [{},4] holds too many elements",
            1u64 << 62
        )
    );
    let h = json!({"inputs": [{"name": "x", "datatype": "BYTES", "shape": [1u64 << 40],
        "data": ["a"]}]});
    assert_eq!(
        decode_err(&h, &[]),
        format!(
            "input 'x': shape [{}] holds {} elements but 1 were given",
            1u64 << 40,
            1u64 << 40
        )
    );
}
