//! Tensors as raw bytes, the form the Open Inference Protocol's gRPC messages carry them
//! in (`raw_input_contents`, `raw_output_contents`; the layout of the binary tensor
//! extension: little-endian, row-major, BYTES elements as a 4-byte length and the bytes).
//! Typed gRPC `contents` are checked with [`tensor_shape`] and [`Tensor::new`].

use infaas_core::{DataType, Tensor};

use crate::binary;
use crate::error::{ProtocolError, Role, TensorProblem};
use crate::shape;

/// Decodes the tensor `name` of `datatype` and wire `shape` from its raw bytes: the
/// datatype must be known, the shape non-negative, and `bytes` exactly what the shape
/// needs (every BYTES element complete and UTF-8). Never panics, whatever the bytes.
pub fn decode_raw_tensor(
    role: Role,
    name: &str,
    datatype: &str,
    shape: &[i64],
    bytes: &[u8],
) -> Result<Tensor, ProtocolError> {
    let err = |p| ProtocolError::tensor(role, name, p);
    let (dtype, dims, count) = tensor_shape(datatype, shape).map_err(err)?;
    let data = binary::decode(dtype, &dims, count, bytes).map_err(|p| match p {
        TensorProblem::BinarySize {
            shape,
            datatype,
            declared,
            needed,
        } => err(TensorProblem::RawSize {
            shape,
            datatype,
            actual: declared,
            needed,
        }),
        other => err(other),
    })?;
    Tensor::new(name, dims, data).map_err(|e| err(e.into()))
}

/// Appends the raw bytes of `tensor`'s data to `out`.
pub fn encode_raw_tensor(
    role: Role,
    tensor: &Tensor,
    out: &mut Vec<u8>,
) -> Result<(), ProtocolError> {
    binary::encode(&tensor.data, out).map_err(|p| ProtocolError::tensor(role, &tensor.name, p))
}

/// The datatype named `datatype`, the dimensions of wire `shape` and their product; an
/// unknown datatype, a negative dimension or an element count that overflows is refused.
pub fn tensor_shape(
    datatype: &str,
    shape: &[i64],
) -> Result<(DataType, Vec<usize>, usize), TensorProblem> {
    let dtype = shape::datatype(datatype)?;
    let (dims, count) = shape::dims(shape)?;
    Ok((dtype, dims, count))
}

/// A tensor's dimensions as wire `int64` dimensions.
pub fn wire_shape(shape: &[usize]) -> Vec<i64> {
    shape::wire_dims(shape)
}

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::TensorData;

    #[test]
    fn raw_tensors_round_trip_and_name_the_tensor_at_fault() {
        let t = Tensor::new("x", vec![2, 2], TensorData::Fp32(vec![1.0, -2.0, 3.5, 0.0])).unwrap();
        let mut bytes = Vec::new();
        encode_raw_tensor(Role::Output, &t, &mut bytes).unwrap();
        assert_eq!(bytes.len(), 16);
        let back = decode_raw_tensor(Role::Input, "x", "FP32", &[2, 2], &bytes).unwrap();
        assert_eq!(back, t);
        assert_eq!(wire_shape(&back.shape), [2, 2]);

        let e = decode_raw_tensor(Role::Input, "x", "FP32", &[2, 3], &bytes).unwrap_err();
        assert_eq!(
            e.to_string(),
            "input 'x': the raw contents hold 16 bytes but shape [2,3] of FP32 needs 24 bytes"
        );
        let e = decode_raw_tensor(Role::Input, "x", "FP16", &[2, 2], &bytes).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("input 'x': datatype 'FP16' is not supported"),
            "{e}"
        );
        let e = decode_raw_tensor(Role::Input, "x", "FP32", &[-1, 4], &bytes).unwrap_err();
        assert_eq!(
            e.to_string(),
            "input 'x': shape [-1,4] has a negative dimension"
        );

        let words = Tensor::new(
            "w",
            vec![2],
            TensorData::Bytes(vec!["ab".into(), "".into()]),
        )
        .unwrap();
        let mut bytes = Vec::new();
        encode_raw_tensor(Role::Output, &words, &mut bytes).unwrap();
        assert_eq!(
            decode_raw_tensor(Role::Input, "w", "BYTES", &[2], &bytes).unwrap(),
            words
        );
        let e = decode_raw_tensor(Role::Input, "w", "BYTES", &[3], &bytes).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("input 'w': shape [3] holds 3 elements"),
            "{e}"
        );
    }
}
