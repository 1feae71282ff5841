//! Reading and making `TensorProto`s.

use crate::proto::{tensor_proto::DataType, TensorProto};

pub(crate) const FLOAT: i32 = DataType::Float as i32;
pub(crate) const FLOAT16: i32 = DataType::Float16 as i32;
pub(crate) const INT8: i32 = DataType::Int8 as i32;
pub(crate) const UINT8: i32 = DataType::Uint8 as i32;
pub(crate) const INT32: i32 = DataType::Int32 as i32;
pub(crate) const INT64: i32 = DataType::Int64 as i32;
use crate::proto::tensor_proto::DataLocation;

/// Number of elements of a tensor of these dims; `None` for negative dims or overflow.
pub(crate) fn numel(dims: &[i64]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| {
        usize::try_from(d).ok().and_then(|d| acc.checked_mul(d))
    })
}

/// The values of a float32 tensor stored in the model (raw_data or float_data).
pub(crate) fn float_values(t: &TensorProto) -> Result<Vec<f32>, String> {
    if t.data_type() != FLOAT {
        return Err(format!("tensor {:?} is not float32", t.name()));
    }
    if t.data_location() == DataLocation::External || !t.external_data.is_empty() {
        return Err(format!("tensor {:?} uses external data", t.name()));
    }
    if t.segment.is_some() {
        return Err(format!("tensor {:?} is segmented", t.name()));
    }
    let n = numel(&t.dims).ok_or_else(|| format!("tensor {:?} has invalid dims", t.name()))?;
    match &t.raw_data {
        Some(raw) if !raw.is_empty() || t.float_data.is_empty() => {
            if n.checked_mul(4) != Some(raw.len()) {
                return Err(format!(
                    "tensor {:?}: raw_data has {} bytes for {n} float32 elements",
                    t.name(),
                    raw.len()
                ));
            }
            Ok(raw
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        }
        _ => {
            if t.float_data.len() != n {
                return Err(format!(
                    "tensor {:?}: float_data has {} values for {n} elements",
                    t.name(),
                    t.float_data.len()
                ));
            }
            Ok(t.float_data.clone())
        }
    }
}

fn raw_tensor(name: String, dims: Vec<i64>, data_type: i32, raw: Vec<u8>) -> TensorProto {
    TensorProto {
        name: Some(name),
        dims,
        data_type: Some(data_type),
        raw_data: Some(raw),
        ..Default::default()
    }
}

pub(crate) fn tensor_f32(name: String, dims: Vec<i64>, data: &[f32]) -> TensorProto {
    let raw = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    raw_tensor(name, dims, FLOAT, raw)
}

pub(crate) fn tensor_i8(name: String, dims: Vec<i64>, data: &[i8]) -> TensorProto {
    let raw = data.iter().map(|v| v.to_le_bytes()[0]).collect();
    raw_tensor(name, dims, INT8, raw)
}

pub(crate) fn tensor_u8(name: String, dims: Vec<i64>, data: &[u8]) -> TensorProto {
    raw_tensor(name, dims, UINT8, data.to_vec())
}

pub(crate) fn tensor_i32(name: String, dims: Vec<i64>, data: &[i32]) -> TensorProto {
    let raw = data.iter().flat_map(|v| v.to_le_bytes()).collect();
    raw_tensor(name, dims, INT32, raw)
}

/// float32 -> float16 bits, round to nearest even; finite values beyond the float16
/// range saturate to +-65504 instead of becoming infinities. NaN and inf are kept.
pub(crate) fn f32_to_f16_bits(v: f32) -> u16 {
    const MAX: f32 = 65504.0;
    let v = if v.is_finite() { v.clamp(-MAX, MAX) } else { v };
    half::f16::from_f32(v).to_bits()
}

pub(crate) fn tensor_f16(name: String, dims: Vec<i64>, data: &[f32]) -> TensorProto {
    let raw = data
        .iter()
        .flat_map(|&v| f32_to_f16_bits(v).to_le_bytes())
        .collect();
    raw_tensor(name, dims, FLOAT16, raw)
}

/// Bytes taken by the tensor's payload (raw_data or typed fields).
pub(crate) fn payload_bytes(t: &TensorProto) -> u64 {
    let raw = t.raw_data.as_ref().map_or(0, |r| r.len());
    let typed = t.float_data.len() * 4
        + t.int32_data.len() * 4
        + t.int64_data.len() * 8
        + t.uint64_data.len() * 8
        + t.double_data.len() * 8
        + t.string_data.iter().map(Vec::len).sum::<usize>();
    (raw + typed) as u64
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_raw_and_typed_floats() {
        let t = tensor_f32("w".into(), vec![2, 2], &[1.0, -2.0, 3.5, 0.0]);
        assert_eq!(float_values(&t).unwrap(), vec![1.0, -2.0, 3.5, 0.0]);
        let typed = TensorProto {
            name: Some("w".into()),
            dims: vec![3],
            data_type: Some(FLOAT),
            float_data: vec![1.0, 2.0, 3.0],
            ..Default::default()
        };
        assert_eq!(float_values(&typed).unwrap(), vec![1.0, 2.0, 3.0]);
        let mut short = typed.clone();
        short.dims = vec![4];
        assert!(float_values(&short).is_err());
        let mut neg = typed;
        neg.dims = vec![-3];
        assert!(float_values(&neg).is_err());
    }

    #[test]
    fn f16_saturates_and_rounds() {
        assert_eq!(f32_to_f16_bits(1.0), 0x3c00);
        assert_eq!(f32_to_f16_bits(1e6), 0x7bff); // 65504
        assert_eq!(f32_to_f16_bits(-1e6), 0xfbff);
        assert_eq!(f32_to_f16_bits(f32::INFINITY), 0x7c00);
        assert!(half::f16::from_bits(f32_to_f16_bits(f32::NAN)).is_nan());
        assert_eq!(numel(&[i64::MAX, i64::MAX]), None);
        assert_eq!(numel(&[]), Some(1));
    }
}
