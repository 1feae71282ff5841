//! Inference response bodies: encoding (server) and decoding (clients, tests).

use infaas_core::Tensor;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::body::{decode_tensors, split};
use super::request::V2Request;
use crate::binary;
use crate::error::{ProtocolError, Role, TensorProblem};
use crate::json_tensor::{JsonTensor, JsonTensorOut};

/// An encoded response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedResponse {
    pub body: Vec<u8>,
    /// Set when any output is binary: the response must then carry
    /// `Inference-Header-Content-Length: {header_length}` and
    /// `Content-Type: application/octet-stream`.
    pub header_length: Option<usize>,
}

impl EncodedResponse {
    /// `application/octet-stream` when binary data follows the JSON, else
    /// `application/json`.
    pub fn content_type(&self) -> &'static str {
        if self.header_length.is_some() {
            "application/octet-stream"
        } else {
            "application/json"
        }
    }
}

/// A decoded v2 inference response.
#[derive(Debug, Clone, PartialEq)]
pub struct V2Response {
    pub model_name: String,
    pub model_version: Option<String>,
    pub id: Option<String>,
    pub parameters: Map<String, Value>,
    pub outputs: Vec<Tensor>,
}

/// A response's JSON header as read back.
#[derive(Deserialize)]
struct WireResponse {
    model_name: String,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    parameters: Option<Map<String, Value>>,
    outputs: Vec<JsonTensor>,
}

/// A response's JSON header as written, borrowed from the outputs. Field order is the
/// order on the wire.
#[derive(Serialize)]
struct WireResponseOut<'a, P: Serialize> {
    model_name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    model_version: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<&'a P>,
    outputs: Vec<JsonTensorOut<'a>>,
}

/// Encodes the model's `outputs` as the request asked: every output (in model order)
/// when the request lists none, else the listed ones in request order; binary per
/// output's `binary_data`, else per the request's `binary_data_output`, else JSON.
pub fn encode_v2_response(
    model_name: &str,
    model_version: Option<&str>,
    id: Option<&str>,
    outputs: &[Tensor],
    req: &V2Request,
    parameters: Map<String, Value>,
) -> Result<EncodedResponse, ProtocolError> {
    let parameters = (!parameters.is_empty()).then_some(&parameters);
    encode_v2_response_with(model_name, model_version, id, outputs, req, parameters)
}

/// [`encode_v2_response`] with the response's `parameters` written from any serializable
/// object (an object whose fields borrow from the caller: nothing is built per response),
/// or none.
pub fn encode_v2_response_with<P: Serialize>(
    model_name: &str,
    model_version: Option<&str>,
    id: Option<&str>,
    outputs: &[Tensor],
    req: &V2Request,
    parameters: Option<&P>,
) -> Result<EncodedResponse, ProtocolError> {
    let selected = select(outputs, req)?;
    let mut binary = Vec::new();
    let mut any_binary = false;
    let mut wire_outputs = Vec::with_capacity(selected.len());
    for (t, as_binary) in selected {
        if as_binary {
            any_binary = true;
            let start = binary.len();
            binary::encode(&t.data, &mut binary)
                .map_err(|p| ProtocolError::tensor(Role::Output, &t.name, p))?;
            let mut j = JsonTensorOut::header(t);
            j.parameters
                .insert("binary_data_size".into(), (binary.len() - start).into());
            wire_outputs.push(j);
        } else {
            wire_outputs.push(JsonTensorOut::new(t));
        }
    }
    let wire = WireResponseOut {
        model_name,
        model_version,
        id,
        parameters,
        outputs: wire_outputs,
    };
    // Room for the document at once (a JSON number takes up to about 24 bytes), rather than
    // growing the buffer through several copies.
    let elements: usize = outputs
        .iter()
        .map(|t| t.shape.iter().product::<usize>())
        .sum();
    let mut body = Vec::with_capacity(512 + 24 * elements + binary.len());
    serde_json::to_writer(&mut body, &wire)?;
    let header_length = any_binary.then_some(body.len());
    body.extend_from_slice(&binary);
    Ok(EncodedResponse {
        body,
        header_length,
    })
}

fn select<'a>(
    outputs: &'a [Tensor],
    req: &V2Request,
) -> Result<Vec<(&'a Tensor, bool)>, ProtocolError> {
    if req.outputs.is_empty() {
        return Ok(outputs
            .iter()
            .map(|t| (t, req.binary_output_default))
            .collect());
    }
    req.outputs
        .iter()
        .map(|r| {
            let t = outputs.iter().find(|t| t.name == r.name).ok_or_else(|| {
                ProtocolError::tensor(
                    Role::Output,
                    &r.name,
                    TensorProblem::NotProduced {
                        available: outputs.iter().map(|t| t.name.clone()).collect(),
                    },
                )
            })?;
            Ok((t, r.binary.unwrap_or(req.binary_output_default)))
        })
        .collect()
}

/// Decodes a response body (`header_length` from the response's
/// `Inference-Header-Content-Length`). Never panics, whatever the bytes.
pub fn decode_v2_response(
    body: &[u8],
    header_length: Option<usize>,
) -> Result<V2Response, ProtocolError> {
    let (header, binary) = split(body, header_length)?;
    let wire: WireResponse = serde_json::from_slice(header)?;
    let outputs = decode_tensors(Role::Output, &wire.outputs, binary, header_length.is_some())?;
    Ok(V2Response {
        model_name: wire.model_name,
        model_version: wire.model_version,
        id: wire.id,
        parameters: wire.parameters.unwrap_or_default(),
        outputs,
    })
}
