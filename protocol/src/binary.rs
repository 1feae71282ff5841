//! Raw tensor data of the binary tensor extension: little-endian, row-major, no
//! padding; BOOL one byte (0 or 1) per element; BYTES elements as a 4-byte
//! little-endian length followed by the bytes.

use infaas_core::{DataType, TensorData};

use crate::error::TensorProblem;

/// Decodes `bytes` (exactly the tensor's `binary_data_size` bytes) as `count`
/// elements of `dtype`.
pub(crate) fn decode(
    dtype: DataType,
    shape: &[usize],
    count: usize,
    bytes: &[u8],
) -> Result<TensorData, TensorProblem> {
    if let Some(size) = dtype.element_size() {
        let needed = count.checked_mul(size);
        if needed != Some(bytes.len()) {
            return Err(TensorProblem::BinarySize {
                shape: shape.to_vec(),
                datatype: dtype.as_str(),
                declared: bytes.len() as u64,
                needed: needed.unwrap_or(usize::MAX),
            });
        }
    }
    Ok(match dtype {
        DataType::Bool => TensorData::Bool(
            bytes
                .iter()
                .enumerate()
                .map(|(index, &byte)| match byte {
                    0 => Ok(false),
                    1 => Ok(true),
                    _ => Err(TensorProblem::BinaryBool { index, byte }),
                })
                .collect::<Result<_, _>>()?,
        ),
        DataType::Uint8 => TensorData::Uint8(bytes.to_vec()),
        DataType::Int8 => TensorData::Int8(le(bytes, i8::from_le_bytes)),
        DataType::Int16 => TensorData::Int16(le(bytes, i16::from_le_bytes)),
        DataType::Int32 => TensorData::Int32(le(bytes, i32::from_le_bytes)),
        DataType::Int64 => TensorData::Int64(le(bytes, i64::from_le_bytes)),
        DataType::Fp32 => TensorData::Fp32(le(bytes, f32::from_le_bytes)),
        DataType::Fp64 => TensorData::Fp64(le(bytes, f64::from_le_bytes)),
        DataType::Bytes => TensorData::Bytes(strings(shape, count, bytes)?),
    })
}

fn le<const N: usize, T>(bytes: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(N)
        .map(|c| {
            let mut a = [0u8; N];
            a.copy_from_slice(c);
            f(a)
        })
        .collect()
}

fn strings(shape: &[usize], count: usize, bytes: &[u8]) -> Result<Vec<String>, TensorProblem> {
    // Every element takes at least 4 bytes, which bounds the allocation.
    let mut out = Vec::with_capacity(count.min(bytes.len() / 4));
    let mut rest = bytes;
    while !rest.is_empty() {
        let index = out.len();
        let truncated = TensorProblem::BinaryTruncated { index };
        let (len, tail) = rest.split_first_chunk::<4>().ok_or(truncated.clone())?;
        let len = usize::try_from(u32::from_le_bytes(*len)).map_err(|_| truncated.clone())?;
        let (s, tail) = tail.split_at_checked(len).ok_or(truncated)?;
        let s = std::str::from_utf8(s).map_err(|_| TensorProblem::NotUtf8 { index })?;
        out.push(s.to_owned());
        rest = tail;
    }
    if out.len() != count {
        return Err(TensorProblem::BinaryElementCount {
            shape: shape.to_vec(),
            expected: count,
            actual: out.len(),
        });
    }
    Ok(out)
}

/// Appends the raw data of `data` to `out`.
pub(crate) fn encode(data: &TensorData, out: &mut Vec<u8>) -> Result<(), TensorProblem> {
    match data {
        TensorData::Bool(v) => out.extend(v.iter().map(|&b| u8::from(b))),
        TensorData::Uint8(v) => out.extend_from_slice(v),
        TensorData::Int8(v) => put(out, v, i8::to_le_bytes),
        TensorData::Int16(v) => put(out, v, i16::to_le_bytes),
        TensorData::Int32(v) => put(out, v, i32::to_le_bytes),
        TensorData::Int64(v) => put(out, v, i64::to_le_bytes),
        TensorData::Fp32(v) => put(out, v, f32::to_le_bytes),
        TensorData::Fp64(v) => put(out, v, f64::to_le_bytes),
        TensorData::Bytes(v) => {
            for (index, s) in v.iter().enumerate() {
                let len = u32::try_from(s.len()).map_err(|_| TensorProblem::StringTooLong {
                    index,
                    length: s.len(),
                })?;
                out.extend_from_slice(&len.to_le_bytes());
                out.extend_from_slice(s.as_bytes());
            }
        }
    }
    Ok(())
}

fn put<const N: usize, T: Copy>(out: &mut Vec<u8>, v: &[T], f: fn(T) -> [u8; N]) {
    out.reserve(v.len().saturating_mul(N));
    for &x in v {
        out.extend_from_slice(&f(x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(data: TensorData) {
        let mut bytes = Vec::new();
        encode(&data, &mut bytes).unwrap();
        if let Some(size) = data.dtype().element_size() {
            assert_eq!(bytes.len(), data.len() * size);
        }
        let back = decode(data.dtype(), &[data.len()], data.len(), &bytes).unwrap();
        assert_eq!(back, data);
    }

    #[test]
    fn every_datatype_round_trips() {
        round_trip(TensorData::Bool(vec![true, false, true]));
        round_trip(TensorData::Uint8(vec![0, 7, 255]));
        round_trip(TensorData::Int8(vec![-128, 0, 127]));
        round_trip(TensorData::Int16(vec![i16::MIN, 1, i16::MAX]));
        round_trip(TensorData::Int32(vec![i32::MIN, 1, i32::MAX]));
        round_trip(TensorData::Int64(vec![i64::MIN, 1, i64::MAX]));
        round_trip(TensorData::Fp32(vec![f32::MIN, 0.1, f32::INFINITY]));
        round_trip(TensorData::Fp64(vec![f64::MIN, 0.1, f64::NEG_INFINITY]));
        round_trip(TensorData::Bytes(vec![
            "cat".into(),
            String::new(),
            "日本".into(),
        ]));
    }

    #[test]
    fn little_endian_layout() {
        let mut bytes = Vec::new();
        encode(&TensorData::Int32(vec![1, -2]), &mut bytes).unwrap();
        assert_eq!(bytes, [1, 0, 0, 0, 0xfe, 0xff, 0xff, 0xff]);
        bytes.clear();
        encode(&TensorData::Bytes(vec!["ab".into()]), &mut bytes).unwrap();
        assert_eq!(bytes, [2, 0, 0, 0, b'a', b'b']);
    }

    #[test]
    fn sizes_are_checked() {
        let e = decode(DataType::Fp32, &[2, 3], 6, &[0; 20]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "binary_data_size is 20 but shape [2,3] of FP32 needs 24 bytes"
        );
        let e = decode(DataType::Bool, &[2], 2, &[1, 2]).unwrap_err();
        assert_eq!(e.to_string(), "element 1 is byte 2; BOOL must be 0 or 1");
    }

    #[test]
    fn bytes_elements_are_checked() {
        let one = [1, 0, 0, 0, b'a'];
        assert_eq!(
            decode(DataType::Bytes, &[2], 2, &one).unwrap_err(),
            TensorProblem::BinaryElementCount {
                shape: vec![2],
                expected: 2,
                actual: 1
            }
        );
        assert_eq!(
            decode(DataType::Bytes, &[1], 1, &[5, 0, 0, 0, b'a']).unwrap_err(),
            TensorProblem::BinaryTruncated { index: 0 }
        );
        assert_eq!(
            decode(DataType::Bytes, &[2], 2, &[1, 0, 0, 0, b'a', 0, 0]).unwrap_err(),
            TensorProblem::BinaryTruncated { index: 1 }
        );
        assert_eq!(
            decode(DataType::Bytes, &[1], 1, &[1, 0, 0, 0, 0xff]).unwrap_err(),
            TensorProblem::NotUtf8 { index: 0 }
        );
        assert_eq!(
            decode(DataType::Bytes, &[0], 0, &[]).unwrap(),
            TensorData::Bytes(vec![])
        );
    }
}
