//! The body layout shared by requests and responses: a JSON header of
//! `Inference-Header-Content-Length` bytes, then the binary data of each tensor
//! whose `parameters.binary_data_size` is set, in tensor order.

use std::collections::HashSet;

use infaas_core::Tensor;

use crate::binary;
use crate::error::{ProtocolError, Role, TensorProblem};
use crate::json_tensor::{decode_json, JsonTensor};
use crate::shape;

/// The HTTP header giving the length of the JSON part of a body that carries binary
/// tensor data (requests and responses).
pub const INFERENCE_HEADER_CONTENT_LENGTH: &str = "Inference-Header-Content-Length";

/// Parses the value of the `Inference-Header-Content-Length` header (a decimal
/// byte count).
pub fn parse_header_length(value: &[u8]) -> Result<usize, ProtocolError> {
    std::str::from_utf8(value)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| ProtocolError::BadHeaderLength(String::from_utf8_lossy(value).into_owned()))
}

/// The JSON header and the binary data after it.
pub(crate) fn split(
    body: &[u8],
    header_length: Option<usize>,
) -> Result<(&[u8], &[u8]), ProtocolError> {
    match header_length {
        None => Ok((body, &[])),
        Some(h) => body.split_at_checked(h).ok_or(ProtocolError::HeaderLength {
            header_length: h,
            body_length: body.len(),
        }),
    }
}

/// Decodes wire tensors, taking each binary one's data from `binary` in order.
/// `binary` must hold exactly the declared sizes.
pub(crate) fn decode_tensors(
    role: Role,
    tensors: &[JsonTensor],
    binary: &[u8],
    has_header_length: bool,
) -> Result<Vec<Tensor>, ProtocolError> {
    let mut seen = HashSet::new();
    let mut sizes = Vec::with_capacity(tensors.len());
    for t in tensors {
        let err = |p| ProtocolError::tensor(role, &t.name, p);
        if !seen.insert(t.name.as_str()) {
            return Err(err(TensorProblem::Duplicate));
        }
        let size = binary_data_size(t).map_err(err)?;
        if size.is_some() && !has_header_length {
            return Err(err(TensorProblem::BinaryWithoutHeaderLength));
        }
        sizes.push(size);
    }
    let declared = sizes
        .iter()
        .flatten()
        .fold(0u64, |a, &s| a.saturating_add(s));
    let length_error = || ProtocolError::BinaryLength {
        role,
        declared,
        actual: binary.len(),
    };
    if declared != binary.len() as u64 {
        return Err(length_error());
    }
    let mut rest = binary;
    let mut out = Vec::with_capacity(tensors.len());
    for (t, size) in tensors.iter().zip(sizes) {
        let tensor = match size {
            None => decode_json(role, t)?,
            Some(size) => {
                let size = usize::try_from(size).map_err(|_| length_error())?;
                let (bytes, tail) = rest.split_at_checked(size).ok_or_else(length_error)?;
                rest = tail;
                decode_binary(t, bytes).map_err(|p| ProtocolError::tensor(role, &t.name, p))?
            }
        };
        out.push(tensor);
    }
    Ok(out)
}

/// `parameters.binary_data_size`, rejecting parameters we do not implement.
fn binary_data_size(t: &JsonTensor) -> Result<Option<u64>, TensorProblem> {
    if t.parameters.contains_key("shared_memory_region") {
        return Err(TensorProblem::Unsupported("shared memory"));
    }
    let Some(size) = t.parameters.get("binary_data_size") else {
        return Ok(None);
    };
    let size = size.as_u64().ok_or(TensorProblem::BadParameter {
        parameter: "binary_data_size",
        expected: "a non-negative integer",
    })?;
    if t.data.is_some() {
        return Err(TensorProblem::DataAndBinary);
    }
    Ok(Some(size))
}

fn decode_binary(t: &JsonTensor, bytes: &[u8]) -> Result<Tensor, TensorProblem> {
    let dtype = shape::datatype(&t.datatype)?;
    let (dims, count) = shape::dims(&t.shape)?;
    let data = binary::decode(dtype, &dims, count, bytes)?;
    Ok(Tensor::new(t.name.clone(), dims, data)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_length_values() {
        assert_eq!(parse_header_length(b"163").unwrap(), 163);
        assert_eq!(parse_header_length(b" 7 ").unwrap(), 7);
        for bad in [&b"-1"[..], b"", b"1e3", b"\xff"] {
            assert!(parse_header_length(bad)
                .unwrap_err()
                .to_string()
                .contains("Inference-Header-Content-Length"));
        }
    }

    #[test]
    fn split_checks_the_header_length() {
        assert_eq!(split(b"abc", None).unwrap(), (&b"abc"[..], &b""[..]));
        assert_eq!(split(b"abc", Some(1)).unwrap(), (&b"a"[..], &b"bc"[..]));
        assert_eq!(
            split(b"abc", Some(4)).unwrap_err().to_string(),
            "Inference-Header-Content-Length is 4 but the body holds only 3 bytes"
        );
    }
}
