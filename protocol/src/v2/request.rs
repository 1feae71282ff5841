//! `POST /v2/models/{name}[/versions/{v}]/infer` request bodies.

use std::collections::HashSet;

use infaas_core::Tensor;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::body::{decode_tensors, split};
use crate::error::{ProtocolError, Role, TensorProblem};
use crate::json_tensor::JsonTensor;

/// A decoded v2 inference request.
#[derive(Debug, Clone, PartialEq)]
pub struct V2Request {
    pub id: Option<String>,
    /// Request parameters as sent (`binary_data_output`, `priority`, `timeout`, ...).
    pub parameters: Map<String, Value>,
    pub inputs: Vec<Tensor>,
    /// Outputs to return, in this order; empty means every output of the model.
    pub outputs: Vec<RequestedOutput>,
    /// `parameters.binary_data_output`: outputs without their own `binary_data`
    /// are returned as binary.
    pub binary_output_default: bool,
}

/// One entry of the request's `outputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestedOutput {
    pub name: String,
    /// `parameters.binary_data`; `None` falls back to the request's
    /// `binary_data_output`.
    pub binary: Option<bool>,
}

#[derive(Deserialize)]
struct WireRequest {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    inputs: Vec<JsonTensor>,
    #[serde(default)]
    outputs: Option<Vec<WireRequestedOutput>>,
}

#[derive(Deserialize)]
struct WireRequestedOutput {
    name: String,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
}

/// Decodes a request body. `header_length` is the `Inference-Header-Content-Length`
/// header: the JSON part's length when binary tensor data follows it. Never panics,
/// whatever the bytes.
pub fn decode_v2_request(
    body: &[u8],
    header_length: Option<usize>,
) -> Result<V2Request, ProtocolError> {
    let (header, binary) = split(body, header_length)?;
    let wire: WireRequest = serde_json::from_slice(header)?;
    let parameters = wire.parameters.unwrap_or_default();
    let binary_output_default = match parameters.get("binary_data_output") {
        None => false,
        Some(v) => v.as_bool().ok_or(ProtocolError::Parameter {
            name: "binary_data_output",
            expected: "a boolean",
        })?,
    };
    let inputs = decode_tensors(Role::Input, &wire.inputs, binary, header_length.is_some())?;
    let outputs = requested_outputs(wire.outputs.unwrap_or_default())?;
    Ok(V2Request {
        id: wire.id,
        parameters,
        inputs,
        outputs,
        binary_output_default,
    })
}

fn requested_outputs(
    wire: Vec<WireRequestedOutput>,
) -> Result<Vec<RequestedOutput>, ProtocolError> {
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(wire.len());
    for o in wire {
        let err = |p| ProtocolError::tensor(Role::Output, &o.name, p);
        if !seen.insert(o.name.clone()) {
            return Err(err(TensorProblem::Duplicate));
        }
        let parameters = o.parameters.unwrap_or_default();
        if parameters.contains_key("shared_memory_region") {
            return Err(err(TensorProblem::Unsupported("shared memory")));
        }
        if parameters.contains_key("classification") {
            return Err(err(TensorProblem::Unsupported(
                "the classification extension",
            )));
        }
        let binary = match parameters.get("binary_data") {
            None => None,
            Some(v) => Some(v.as_bool().ok_or_else(|| {
                err(TensorProblem::BadParameter {
                    parameter: "binary_data",
                    expected: "a boolean",
                })
            })?),
        };
        out.push(RequestedOutput {
            name: o.name,
            binary,
        });
    }
    Ok(out)
}
