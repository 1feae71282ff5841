//! `ModelInferRequest` into the control plane's tensors and requirements, and outputs into
//! a `ModelInferResponse`. Nothing here panics on what a client sends; every refusal names
//! the tensor or parameter at fault.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;
use infaas_core::{DataType, Tensor, TensorData};
use infaas_protocol::{
    decode_raw_tensor, encode_raw_tensor, tensor_shape, wire_shape, ProtocolError, Role,
    TensorProblem,
};

use super::pb::infer_parameter::ParameterChoice;
use super::pb::model_infer_request::{InferInputTensor, InferRequestedOutputTensor};
use super::pb::model_infer_response::InferOutputTensor;
use super::pb::{InferParameter, InferTensorContents};
use crate::error::{ApiError, ApiResult};

fn bad(e: ProtocolError) -> ApiError {
    ApiError::BadRequest(e.to_string())
}

fn tensor_error(role: Role, name: &str, problem: TensorProblem) -> ApiError {
    bad(ProtocolError::tensor(role, name, problem))
}

/// Refuses tensor parameters this server does not implement.
fn check_tensor_parameters(
    role: Role,
    name: &str,
    parameters: &HashMap<String, InferParameter>,
) -> ApiResult<()> {
    if parameters.contains_key("shared_memory_region") {
        return Err(tensor_error(
            role,
            name,
            TensorProblem::Unsupported("shared memory"),
        ));
    }
    if role == Role::Output && parameters.contains_key("classification") {
        return Err(tensor_error(
            role,
            name,
            TensorProblem::Unsupported("the classification extension"),
        ));
    }
    Ok(())
}

/// The request's input tensors: from `raw_input_contents` (one per input, in order; what
/// `tritonclient.grpc` sends) or from each input's typed `contents`.
pub fn decode_inputs(inputs: &[InferInputTensor], raw: &[Bytes]) -> ApiResult<Vec<Tensor>> {
    let mut seen = HashSet::with_capacity(inputs.len());
    for t in inputs {
        if !seen.insert(t.name.as_str()) {
            return Err(tensor_error(Role::Input, &t.name, TensorProblem::Duplicate));
        }
        check_tensor_parameters(Role::Input, &t.name, &t.parameters)?;
    }
    if raw.is_empty() {
        return inputs.iter().map(typed_input).collect();
    }
    if let Some(t) = inputs.iter().find(|t| t.contents.is_some()) {
        return Err(ApiError::BadRequest(format!(
            "input '{}': has typed contents but the request carries raw_input_contents; send \
             every input one way",
            t.name
        )));
    }
    if raw.len() != inputs.len() {
        let which = match inputs.get(raw.len()) {
            Some(t) => format!("input '{}' has none", t.name),
            None => "some have no input".into(),
        };
        return Err(ApiError::BadRequest(format!(
            "the request has {} inputs but {} raw_input_contents ({which}); send one raw \
             content per input, in the order of the inputs",
            inputs.len(),
            raw.len()
        )));
    }
    inputs
        .iter()
        .zip(raw)
        .map(|(t, bytes)| decode_raw_tensor(Role::Input, &t.name, &t.datatype, &t.shape, bytes))
        .collect::<Result<_, _>>()
        .map_err(bad)
}

/// The field of `InferTensorContents` that carries `dtype`.
fn contents_field(dtype: DataType) -> &'static str {
    match dtype {
        DataType::Bool => "bool_contents",
        DataType::Uint8 => "uint_contents",
        DataType::Int8 | DataType::Int16 | DataType::Int32 => "int_contents",
        DataType::Int64 => "int64_contents",
        DataType::Fp32 => "fp32_contents",
        DataType::Fp64 => "fp64_contents",
        DataType::Bytes => "bytes_contents",
    }
}

/// The non-empty fields of `c`.
fn filled_fields(c: &InferTensorContents) -> Vec<&'static str> {
    [
        ("bool_contents", c.bool_contents.is_empty()),
        ("int_contents", c.int_contents.is_empty()),
        ("int64_contents", c.int64_contents.is_empty()),
        ("uint_contents", c.uint_contents.is_empty()),
        ("uint64_contents", c.uint64_contents.is_empty()),
        ("fp32_contents", c.fp32_contents.is_empty()),
        ("fp64_contents", c.fp64_contents.is_empty()),
        ("bytes_contents", c.bytes_contents.is_empty()),
    ]
    .into_iter()
    .filter(|(_, empty)| !empty)
    .map(|(f, _)| f)
    .collect()
}

fn narrow<S: Copy + std::fmt::Display, T: TryFrom<S>>(
    values: &[S],
    datatype: &'static str,
) -> Result<Vec<T>, TensorProblem> {
    values
        .iter()
        .enumerate()
        .map(|(index, &v)| {
            T::try_from(v).map_err(|_| TensorProblem::OutOfRange {
                index,
                value: v.to_string(),
                datatype,
            })
        })
        .collect()
}

fn typed_input(t: &InferInputTensor) -> ApiResult<Tensor> {
    let err = |p| tensor_error(Role::Input, &t.name, p);
    let (dtype, dims, _count) = tensor_shape(&t.datatype, &t.shape).map_err(err)?;
    let Some(c) = &t.contents else {
        return Err(ApiError::BadRequest(format!(
            "input '{}': has no contents and the request has no raw_input_contents",
            t.name
        )));
    };
    let field = contents_field(dtype);
    if let Some(other) = filled_fields(c).into_iter().find(|f| *f != field) {
        return Err(ApiError::BadRequest(format!(
            "input '{}': {} data goes in contents.{field}, not contents.{other}",
            t.name,
            dtype.as_str()
        )));
    }
    let name = dtype.as_str();
    let data = match dtype {
        DataType::Bool => TensorData::Bool(c.bool_contents.clone()),
        DataType::Uint8 => TensorData::Uint8(narrow(&c.uint_contents, name).map_err(err)?),
        DataType::Int8 => TensorData::Int8(narrow(&c.int_contents, name).map_err(err)?),
        DataType::Int16 => TensorData::Int16(narrow(&c.int_contents, name).map_err(err)?),
        DataType::Int32 => TensorData::Int32(c.int_contents.clone()),
        DataType::Int64 => TensorData::Int64(c.int64_contents.clone()),
        DataType::Fp32 => TensorData::Fp32(c.fp32_contents.clone()),
        DataType::Fp64 => TensorData::Fp64(c.fp64_contents.clone()),
        DataType::Bytes => TensorData::Bytes(
            c.bytes_contents
                .iter()
                .enumerate()
                .map(|(index, b)| {
                    std::str::from_utf8(b)
                        .map(str::to_owned)
                        .map_err(|_| err(TensorProblem::NotUtf8 { index }))
                })
                .collect::<ApiResult<_>>()?,
        ),
    };
    Tensor::new(t.name.clone(), dims, data).map_err(|e| err(e.into()))
}

/// The names of the requested outputs, in request order (empty: every output).
pub fn requested_outputs(outputs: &[InferRequestedOutputTensor]) -> ApiResult<Vec<&str>> {
    let mut seen = HashSet::with_capacity(outputs.len());
    outputs
        .iter()
        .map(|o| {
            if !seen.insert(o.name.as_str()) {
                return Err(tensor_error(
                    Role::Output,
                    &o.name,
                    TensorProblem::Duplicate,
                ));
            }
            check_tensor_parameters(Role::Output, &o.name, &o.parameters)?;
            Ok(o.name.as_str())
        })
        .collect()
}

/// The request parameter `key` as a number: `double_param`, `int64_param`, `uint64_param`
/// or a `string_param` holding a number; `None` when absent.
pub fn number(parameters: &HashMap<String, InferParameter>, key: &str) -> ApiResult<Option<f64>> {
    let not_a_number = || {
        ApiError::BadRequest(format!(
            "parameter '{key}' must be a number (double_param, int64_param or a string_param \
             holding a number)"
        ))
    };
    let Some(choice) = parameters
        .get(key)
        .and_then(|p| p.parameter_choice.as_ref())
    else {
        return Ok(None);
    };
    match choice {
        ParameterChoice::DoubleParam(v) => Ok(Some(*v)),
        ParameterChoice::Int64Param(v) => Ok(Some(*v as f64)),
        ParameterChoice::Uint64Param(v) => Ok(Some(*v as f64)),
        ParameterChoice::StringParam(s) => s
            .trim()
            .parse::<f64>()
            .map(Some)
            .map_err(|_| not_a_number()),
        ParameterChoice::BoolParam(_) => Err(not_a_number()),
    }
}

/// A JSON value (of the shared v2 response parameters) as a gRPC parameter.
pub fn parameter(v: &serde_json::Value) -> Option<InferParameter> {
    use serde_json::Value;
    let choice = match v {
        Value::Null => return None,
        Value::Bool(b) => ParameterChoice::BoolParam(*b),
        Value::String(s) => ParameterChoice::StringParam(s.clone()),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            _ if n.is_f64() => ParameterChoice::DoubleParam(n.as_f64()?),
            (Some(i), _) => ParameterChoice::Int64Param(i),
            (None, Some(u)) => ParameterChoice::Uint64Param(u),
            (None, None) => ParameterChoice::DoubleParam(n.as_f64()?),
        },
        other => ParameterChoice::StringParam(other.to_string()),
    };
    Some(InferParameter {
        parameter_choice: Some(choice),
    })
}

/// The outputs to answer with, as raw contents: every output in model order when none is
/// requested, else the requested ones in request order.
pub fn encode_outputs(
    outputs: &[Tensor],
    requested: &[&str],
) -> ApiResult<(Vec<InferOutputTensor>, Vec<Bytes>)> {
    let selected: Vec<&Tensor> = if requested.is_empty() {
        outputs.iter().collect()
    } else {
        requested
            .iter()
            .map(|name| {
                outputs.iter().find(|t| t.name == *name).ok_or_else(|| {
                    tensor_error(
                        Role::Output,
                        name,
                        TensorProblem::NotProduced {
                            available: outputs.iter().map(|t| t.name.clone()).collect(),
                        },
                    )
                })
            })
            .collect::<ApiResult<_>>()?
    };
    let mut headers = Vec::with_capacity(selected.len());
    let mut raw = Vec::with_capacity(selected.len());
    for t in selected {
        let size = t.dtype().element_size().unwrap_or(8);
        let mut bytes = Vec::with_capacity(t.data.len().saturating_mul(size));
        encode_raw_tensor(Role::Output, t, &mut bytes).map_err(ApiError::internal)?;
        headers.push(InferOutputTensor {
            name: t.name.clone(),
            datatype: t.dtype().as_str().to_string(),
            shape: wire_shape(&t.shape),
            parameters: HashMap::new(),
            contents: None,
        });
        raw.push(Bytes::from(bytes));
    }
    Ok((headers, raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(name: &str, datatype: &str, shape: &[i64]) -> InferInputTensor {
        InferInputTensor {
            name: name.into(),
            datatype: datatype.into(),
            shape: shape.to_vec(),
            ..Default::default()
        }
    }

    fn raw_f32(v: &[f32]) -> Bytes {
        Bytes::from(v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
    }

    #[test]
    fn raw_inputs_decode_and_failures_name_the_tensor() {
        let inputs = [input("a", "FP32", &[1, 2]), input("b", "INT64", &[1])];
        let raw = [
            raw_f32(&[1.0, 2.0]),
            Bytes::from(7i64.to_le_bytes().to_vec()),
        ];
        let t = decode_inputs(&inputs, &raw).unwrap();
        assert_eq!(t[0].data, TensorData::Fp32(vec![1.0, 2.0]));
        assert_eq!(
            (t[1].shape.as_slice(), &t[1].data),
            (&[1][..], &TensorData::Int64(vec![7]))
        );

        let e = decode_inputs(&inputs, &raw[..1]).unwrap_err().to_string();
        assert!(
            e.contains("2 inputs but 1 raw_input_contents") && e.contains("'b'"),
            "{e}"
        );
        let e = decode_inputs(&inputs[..1], &raw).unwrap_err().to_string();
        assert!(e.contains("1 inputs but 2 raw_input_contents"), "{e}");
        let short = [raw_f32(&[1.0]), raw[1].clone()];
        let e = decode_inputs(&inputs, &short).unwrap_err().to_string();
        assert_eq!(
            e,
            "input 'a': the raw contents hold 4 bytes but shape [1,2] of FP32 needs 8 bytes"
        );
        let e = decode_inputs(&[input("a", "FP8", &[1])], &raw[..1])
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("input 'a': datatype 'FP8' is not supported"),
            "{e}"
        );
        let twice = [input("a", "FP32", &[1, 2]), input("a", "FP32", &[1, 2])];
        let e = decode_inputs(&twice, &[raw[0].clone(), raw[0].clone()]).unwrap_err();
        assert_eq!(e.to_string(), "input 'a': is given more than once");
    }

    #[test]
    fn typed_contents_decode_with_their_own_checks() {
        let mut a = input("a", "INT8", &[3]);
        a.contents = Some(InferTensorContents {
            int_contents: vec![1, -2, 3],
            ..Default::default()
        });
        let t = decode_inputs(std::slice::from_ref(&a), &[]).unwrap();
        assert_eq!(t[0].data, TensorData::Int8(vec![1, -2, 3]));
        a.contents = Some(InferTensorContents {
            int_contents: vec![1, 300, 3],
            ..Default::default()
        });
        let e = decode_inputs(std::slice::from_ref(&a), &[])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "input 'a': element 1 (300) is out of range for INT8");
        a.contents = Some(InferTensorContents {
            fp32_contents: vec![1.0, 2.0, 3.0],
            ..Default::default()
        });
        let e = decode_inputs(std::slice::from_ref(&a), &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("int_contents, not contents.fp32_contents"),
            "{e}"
        );
        a.contents = Some(InferTensorContents {
            int_contents: vec![1, 2],
            ..Default::default()
        });
        let e = decode_inputs(std::slice::from_ref(&a), &[])
            .unwrap_err()
            .to_string();
        assert_eq!(e, "input 'a': shape [3] holds 3 elements but 2 were given");
        a.contents = None;
        let e = decode_inputs(std::slice::from_ref(&a), &[])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("input 'a': has no contents"), "{e}");
        let mut s = input("s", "BYTES", &[1]);
        s.contents = Some(InferTensorContents {
            bytes_contents: vec![Bytes::from_static(b"\xff")],
            ..Default::default()
        });
        let e = decode_inputs(&[s], &[]).unwrap_err().to_string();
        assert_eq!(e, "input 's': element 0 is not valid UTF-8");
        // Typed and raw contents together are refused.
        let mut f = input("f", "FP32", &[1]);
        f.contents = Some(InferTensorContents::default());
        let e = decode_inputs(&[f], &[raw_f32(&[1.0])])
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("input 'f': has typed contents"), "{e}");
    }

    #[test]
    fn parameters_are_numbers_of_any_kind() {
        let p = |c| InferParameter {
            parameter_choice: Some(c),
        };
        let params: HashMap<String, InferParameter> = [
            ("a".to_string(), p(ParameterChoice::DoubleParam(2.5))),
            ("b".to_string(), p(ParameterChoice::Int64Param(5))),
            (
                "c".to_string(),
                p(ParameterChoice::StringParam(" 0.9 ".into())),
            ),
            ("d".to_string(), p(ParameterChoice::BoolParam(true))),
            (
                "e".to_string(),
                p(ParameterChoice::StringParam("fast".into())),
            ),
            ("f".to_string(), p(ParameterChoice::Uint64Param(7))),
        ]
        .into_iter()
        .collect();
        assert_eq!(number(&params, "a").unwrap(), Some(2.5));
        assert_eq!(number(&params, "b").unwrap(), Some(5.0));
        assert_eq!(number(&params, "c").unwrap(), Some(0.9));
        assert_eq!(number(&params, "f").unwrap(), Some(7.0));
        assert_eq!(number(&params, "z").unwrap(), None);
        for key in ["d", "e"] {
            let e = number(&params, key).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("parameter '{key}' must be a number")),
                "{e}"
            );
        }
        assert_eq!(
            parameter(&serde_json::json!(1.5)).and_then(|p| p.parameter_choice),
            Some(ParameterChoice::DoubleParam(1.5))
        );
        assert_eq!(
            parameter(&serde_json::json!("v")).and_then(|p| p.parameter_choice),
            Some(ParameterChoice::StringParam("v".into()))
        );
        assert!(parameter(&serde_json::Value::Null).is_none());
    }

    #[test]
    fn outputs_follow_the_request() {
        let outs = [
            Tensor::new("label", vec![2], TensorData::Int64(vec![3, 4])).unwrap(),
            Tensor::new("p", vec![2, 1], TensorData::Fp32(vec![0.5, 0.25])).unwrap(),
        ];
        let (h, raw) = encode_outputs(&outs, &[]).unwrap();
        assert_eq!(
            h.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
            ["label", "p"]
        );
        assert_eq!(raw[0].len(), 16);
        let (h, raw) = encode_outputs(&outs, &["p"]).unwrap();
        assert_eq!(
            (h.len(), h[0].shape.as_slice(), h[0].datatype.as_str()),
            (1, &[2, 1][..], "FP32")
        );
        assert_eq!(raw[0], raw_f32(&[0.5, 0.25]));
        let e = encode_outputs(&outs, &["q"]).unwrap_err().to_string();
        assert_eq!(
            e,
            "output 'q': the model has no such output (outputs: label, p)"
        );
        let dup = [
            InferRequestedOutputTensor {
                name: "p".into(),
                ..Default::default()
            },
            InferRequestedOutputTensor {
                name: "p".into(),
                ..Default::default()
            },
        ];
        let e = requested_outputs(&dup).unwrap_err().to_string();
        assert_eq!(e, "output 'p': is given more than once");
    }
}
