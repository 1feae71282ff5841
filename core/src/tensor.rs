//! Named, typed, shaped tensors: the one representation every layer passes around
//! (HTTP wire types, NPZ validation sets, ONNX Runtime inputs and outputs).

use serde::{Deserialize, Serialize};

/// Element type of a tensor, named as in the Open Inference Protocol (v2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DataType {
    Bool,
    Uint8,
    Int8,
    Int16,
    Int32,
    Int64,
    Fp32,
    Fp64,
    /// Variable-length strings (v2 `BYTES`), used for string class labels.
    Bytes,
}

impl DataType {
    /// Every datatype, in the Open Inference Protocol's order.
    pub const ALL: [DataType; 9] = [
        DataType::Bool,
        DataType::Uint8,
        DataType::Int8,
        DataType::Int16,
        DataType::Int32,
        DataType::Int64,
        DataType::Fp32,
        DataType::Fp64,
        DataType::Bytes,
    ];

    /// The v2 protocol name (`FP32`, `INT64`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            DataType::Bool => "BOOL",
            DataType::Uint8 => "UINT8",
            DataType::Int8 => "INT8",
            DataType::Int16 => "INT16",
            DataType::Int32 => "INT32",
            DataType::Int64 => "INT64",
            DataType::Fp32 => "FP32",
            DataType::Fp64 => "FP64",
            DataType::Bytes => "BYTES",
        }
    }

    /// Parses a v2 protocol name, case-insensitively.
    pub fn parse(s: &str) -> Option<DataType> {
        Some(match s.to_ascii_uppercase().as_str() {
            "BOOL" => DataType::Bool,
            "UINT8" => DataType::Uint8,
            "INT8" => DataType::Int8,
            "INT16" => DataType::Int16,
            "INT32" => DataType::Int32,
            "INT64" => DataType::Int64,
            "FP32" => DataType::Fp32,
            "FP64" => DataType::Fp64,
            "BYTES" => DataType::Bytes,
            _ => return None,
        })
    }

    /// Size of one element in bytes; `None` for variable-length strings.
    pub fn element_size(self) -> Option<usize> {
        match self {
            DataType::Bool | DataType::Uint8 | DataType::Int8 => Some(1),
            DataType::Int16 => Some(2),
            DataType::Int32 | DataType::Fp32 => Some(4),
            DataType::Int64 | DataType::Fp64 => Some(8),
            DataType::Bytes => None,
        }
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The elements of a tensor in row-major order.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorData {
    Bool(Vec<bool>),
    Uint8(Vec<u8>),
    Int8(Vec<i8>),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    Fp32(Vec<f32>),
    Fp64(Vec<f64>),
    Bytes(Vec<String>),
}

impl TensorData {
    pub fn dtype(&self) -> DataType {
        match self {
            TensorData::Bool(_) => DataType::Bool,
            TensorData::Uint8(_) => DataType::Uint8,
            TensorData::Int8(_) => DataType::Int8,
            TensorData::Int16(_) => DataType::Int16,
            TensorData::Int32(_) => DataType::Int32,
            TensorData::Int64(_) => DataType::Int64,
            TensorData::Fp32(_) => DataType::Fp32,
            TensorData::Fp64(_) => DataType::Fp64,
            TensorData::Bytes(_) => DataType::Bytes,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            TensorData::Bool(v) => v.len(),
            TensorData::Uint8(v) => v.len(),
            TensorData::Int8(v) => v.len(),
            TensorData::Int16(v) => v.len(),
            TensorData::Int32(v) => v.len(),
            TensorData::Int64(v) => v.len(),
            TensorData::Fp32(v) => v.len(),
            TensorData::Fp64(v) => v.len(),
            TensorData::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as f64 (strings and out-of-range indices give `None`).
    pub fn get_f64(&self, i: usize) -> Option<f64> {
        match self {
            TensorData::Bool(v) => v.get(i).map(|&b| if b { 1.0 } else { 0.0 }),
            TensorData::Uint8(v) => v.get(i).map(|&x| x as f64),
            TensorData::Int8(v) => v.get(i).map(|&x| x as f64),
            TensorData::Int16(v) => v.get(i).map(|&x| x as f64),
            TensorData::Int32(v) => v.get(i).map(|&x| x as f64),
            TensorData::Int64(v) => v.get(i).map(|&x| x as f64),
            TensorData::Fp32(v) => v.get(i).map(|&x| x as f64),
            TensorData::Fp64(v) => v.get(i).copied(),
            TensorData::Bytes(_) => None,
        }
    }

    /// Rows `[start, end)` of a tensor whose first dimension is the batch and whose
    /// rows hold `row_len` elements each.
    pub fn slice_rows(&self, row_len: usize, start: usize, end: usize) -> TensorData {
        let (a, b) = (start * row_len, end * row_len);
        match self {
            TensorData::Bool(v) => TensorData::Bool(v[a..b].to_vec()),
            TensorData::Uint8(v) => TensorData::Uint8(v[a..b].to_vec()),
            TensorData::Int8(v) => TensorData::Int8(v[a..b].to_vec()),
            TensorData::Int16(v) => TensorData::Int16(v[a..b].to_vec()),
            TensorData::Int32(v) => TensorData::Int32(v[a..b].to_vec()),
            TensorData::Int64(v) => TensorData::Int64(v[a..b].to_vec()),
            TensorData::Fp32(v) => TensorData::Fp32(v[a..b].to_vec()),
            TensorData::Fp64(v) => TensorData::Fp64(v[a..b].to_vec()),
            TensorData::Bytes(v) => TensorData::Bytes(v[a..b].to_vec()),
        }
    }
}

/// A named tensor with its shape. `data.len()` equals the product of `shape`.
#[derive(Debug, Clone, PartialEq)]
pub struct Tensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: TensorData,
}

/// Why a tensor could not be built.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TensorError {
    #[error("tensor '{name}': shape {shape:?} holds {expected} elements but {actual} were given")]
    ElementCount {
        name: String,
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
}

impl Tensor {
    /// Builds a tensor, checking that the element count matches the shape.
    pub fn new(
        name: impl Into<String>,
        shape: Vec<usize>,
        data: TensorData,
    ) -> Result<Tensor, TensorError> {
        let name = name.into();
        let expected: usize = shape.iter().product();
        if expected != data.len() {
            return Err(TensorError::ElementCount {
                name,
                shape,
                expected,
                actual: data.len(),
            });
        }
        Ok(Tensor { name, shape, data })
    }

    pub fn dtype(&self) -> DataType {
        self.data.dtype()
    }

    /// Number of rows along the first (batch) dimension; 1 for a scalar.
    pub fn batch_len(&self) -> usize {
        self.shape.first().copied().unwrap_or(1)
    }

    /// Elements in one row (product of all dimensions but the first).
    pub fn row_len(&self) -> usize {
        self.shape.iter().skip(1).product()
    }

    /// Rows `[start, end)` along the batch dimension.
    pub fn slice_batch(&self, start: usize, end: usize) -> Tensor {
        let mut shape = self.shape.clone();
        if let Some(first) = shape.first_mut() {
            *first = end - start;
        }
        Tensor {
            name: self.name.clone(),
            shape,
            data: self.data.slice_rows(self.row_len(), start, end),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_rejects_wrong_element_count() {
        let err = Tensor::new("x", vec![2, 3], TensorData::Fp32(vec![0.0; 5])).unwrap_err();
        assert!(err.to_string().contains("tensor 'x'"));
        assert!(err.to_string().contains("6 elements but 5"));
    }

    #[test]
    fn slice_batch_takes_rows() {
        let t = Tensor::new("x", vec![3, 2], TensorData::Int64(vec![1, 2, 3, 4, 5, 6])).unwrap();
        let s = t.slice_batch(1, 3);
        assert_eq!(s.shape, vec![2, 2]);
        assert_eq!(s.data, TensorData::Int64(vec![3, 4, 5, 6]));
    }

    #[test]
    fn dtype_names_round_trip() {
        for dt in [
            DataType::Bool,
            DataType::Uint8,
            DataType::Int8,
            DataType::Int16,
            DataType::Int32,
            DataType::Int64,
            DataType::Fp32,
            DataType::Fp64,
            DataType::Bytes,
        ] {
            assert_eq!(DataType::parse(dt.as_str()), Some(dt));
        }
        assert_eq!(DataType::parse("fp32"), Some(DataType::Fp32));
        assert_eq!(DataType::parse("FP128"), None);
    }
}
