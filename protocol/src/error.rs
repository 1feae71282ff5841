//! Why a request or response could not be decoded or encoded. Every message names the
//! tensor (or header, or parameter) at fault and the limit it broke.

use std::fmt;

use infaas_core::TensorError;

/// Whether a tensor travels into the model or out of it; errors say which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Input,
    Output,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Input => "input",
            Role::Output => "output",
        })
    }
}

/// Errors of this crate. All but [`TensorProblem::StringTooLong`] on an output are the
/// client's fault (HTTP 400); see [`ProtocolError::is_client_error`].
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    #[error("invalid inference JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error(
        "Inference-Header-Content-Length is {header_length} but the body holds only {body_length} bytes"
    )]
    HeaderLength {
        header_length: usize,
        body_length: usize,
    },
    #[error(
        "the {role}s declare {declared} bytes of binary data but {actual} bytes follow the JSON header"
    )]
    BinaryLength {
        role: Role,
        declared: u64,
        actual: usize,
    },
    #[error("Inference-Header-Content-Length '{0}' is not a byte count")]
    BadHeaderLength(String),
    #[error("parameter '{name}' must be {expected}")]
    Parameter {
        name: &'static str,
        expected: &'static str,
    },
    #[error("{role} '{name}': {problem}")]
    Tensor {
        role: Role,
        name: String,
        problem: TensorProblem,
    },
}

impl ProtocolError {
    /// What is wrong with the tensor `name`.
    pub fn tensor(role: Role, name: &str, problem: TensorProblem) -> ProtocolError {
        ProtocolError::Tensor {
            role,
            name: name.to_owned(),
            problem,
        }
    }

    /// True when the request is at fault (HTTP 400); false for the rare output that
    /// cannot be encoded (HTTP 500).
    pub fn is_client_error(&self) -> bool {
        !matches!(
            self,
            ProtocolError::Tensor {
                role: Role::Output,
                problem: TensorProblem::StringTooLong { .. },
                ..
            }
        )
    }
}

/// What is wrong with one tensor.
#[derive(Debug, Clone, PartialEq)]
pub enum TensorProblem {
    UnsupportedDatatype(String),
    NegativeDimension(Vec<i64>),
    TooManyElements(Vec<i64>),
    ElementCount {
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    /// Nested `data` whose structure differs from the shape at `depth`.
    NestedShape {
        shape: Vec<usize>,
        depth: usize,
        expected: usize,
        actual: usize,
    },
    /// Nested `data` that mixes arrays and scalars, or nests deeper than the shape.
    RaggedData {
        shape: Vec<usize>,
    },
    NotAnArray,
    WrongElementType {
        index: usize,
        expected: &'static str,
    },
    NotAnInteger {
        index: usize,
        value: f64,
    },
    OutOfRange {
        index: usize,
        value: String,
        datatype: &'static str,
    },
    MissingData,
    DataAndBinary,
    BinaryWithoutHeaderLength,
    BinarySize {
        shape: Vec<usize>,
        datatype: &'static str,
        declared: u64,
        needed: usize,
    },
    /// Raw contents (gRPC `raw_input_contents`) whose length the shape does not take.
    RawSize {
        shape: Vec<usize>,
        datatype: &'static str,
        actual: u64,
        needed: usize,
    },
    BinaryTruncated {
        index: usize,
    },
    BinaryElementCount {
        shape: Vec<usize>,
        expected: usize,
        actual: usize,
    },
    BinaryBool {
        index: usize,
        byte: u8,
    },
    NotUtf8 {
        index: usize,
    },
    StringTooLong {
        index: usize,
        length: usize,
    },
    BadParameter {
        parameter: &'static str,
        expected: &'static str,
    },
    Unsupported(&'static str),
    Duplicate,
    NotProduced {
        available: Vec<String>,
    },
}

impl fmt::Display for TensorProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use TensorProblem::*;
        match self {
            UnsupportedDatatype(d) => write!(
                f,
                "datatype '{d}' is not supported (supported: BOOL, UINT8, INT8, INT16, INT32, \
                 INT64, FP32, FP64, BYTES)"
            ),
            NegativeDimension(s) => write!(f, "shape {} has a negative dimension", Dims(s)),
            TooManyElements(s) => write!(f, "shape {} holds too many elements", Dims(s)),
            ElementCount {
                shape,
                expected,
                actual,
            } => write!(
                f,
                "shape {} holds {expected} elements but {actual} were given",
                Dims(shape)
            ),
            NestedShape {
                shape,
                depth,
                expected,
                actual,
            } => write!(
                f,
                "nested data does not match shape {}: an array at depth {depth} has {actual} \
                 elements, expected {expected}",
                Dims(shape)
            ),
            RaggedData { shape } => write!(
                f,
                "nested data does not match shape {}: arrays and values are mixed or nested \
                 too deep",
                Dims(shape)
            ),
            NotAnArray => f.write_str("'data' must be an array (flat or nested by the shape)"),
            WrongElementType { index, expected } => {
                write!(f, "element {index} is not {expected}")
            }
            NotAnInteger { index, value } => {
                write!(f, "element {index} ({value}) is not an integer")
            }
            OutOfRange {
                index,
                value,
                datatype,
            } => write!(
                f,
                "element {index} ({value}) is out of range for {datatype}"
            ),
            MissingData => f.write_str("has neither 'data' nor parameters.binary_data_size"),
            DataAndBinary => f.write_str("has both 'data' and parameters.binary_data_size"),
            BinaryWithoutHeaderLength => f.write_str(
                "has parameters.binary_data_size but the request has no \
                 Inference-Header-Content-Length header",
            ),
            BinarySize {
                shape,
                datatype,
                declared,
                needed,
            } => write!(
                f,
                "binary_data_size is {declared} but shape {} of {datatype} needs {needed} bytes",
                Dims(shape)
            ),
            RawSize {
                shape,
                datatype,
                actual,
                needed,
            } => write!(
                f,
                "the raw contents hold {actual} bytes but shape {} of {datatype} needs {needed} \
                 bytes",
                Dims(shape)
            ),
            BinaryTruncated { index } => {
                write!(f, "binary BYTES data ends inside element {index}")
            }
            BinaryElementCount {
                shape,
                expected,
                actual,
            } => write!(
                f,
                "shape {} holds {expected} elements but the binary BYTES data holds {actual}",
                Dims(shape)
            ),
            BinaryBool { index, byte } => {
                write!(f, "element {index} is byte {byte}; BOOL must be 0 or 1")
            }
            NotUtf8 { index } => write!(f, "element {index} is not valid UTF-8"),
            StringTooLong { index, length } => write!(
                f,
                "element {index} is {length} bytes long; binary BYTES elements are limited to \
                 4 GiB"
            ),
            BadParameter {
                parameter,
                expected,
            } => write!(f, "parameter '{parameter}' must be {expected}"),
            Unsupported(what) => write!(f, "{what} is not supported"),
            Duplicate => f.write_str("is given more than once"),
            NotProduced { available } => write!(
                f,
                "the model has no such output (outputs: {})",
                available.join(", ")
            ),
        }
    }
}

impl From<TensorError> for TensorProblem {
    fn from(e: TensorError) -> TensorProblem {
        match e {
            TensorError::ElementCount {
                shape,
                expected,
                actual,
                ..
            } => TensorProblem::ElementCount {
                shape,
                expected,
                actual,
            },
        }
    }
}

/// A shape written as `[2,64]`.
struct Dims<'a, T>(&'a [T]);

impl<T: fmt::Display> fmt::Display for Dims<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}
