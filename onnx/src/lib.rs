//! ONNX model files as data: parsing, input/output signatures, op statistics, and
//! the graph rewrites used by the platform's variant generator:
//!
//! * [`quantize_dynamic_int8`]: INT8 dynamic quantisation of the weights of `MatMul`
//!   and `Gemm` nodes, rewritten to ONNX Runtime's `com.microsoft.DynamicQuantizeMatMul`
//!   contrib op (runs on ONNX Runtime's CPU execution provider);
//! * [`quantize_static_int8`]: static INT8 quantisation in ONNX's QDQ format (uint8
//!   activations from calibrated ranges, int8 per-channel weights, int32 biases) for
//!   convolutional networks, which ONNX Runtime fuses into `QLinearConv` & co.; with
//!   [`plan_static_int8`] and [`add_graph_outputs`] for the calibration run;
//! * [`convert_fp16`]: float16 conversion of float initializers and float tensors,
//!   keeping float32 graph inputs and outputs (Cast nodes at the boundary).
//!
//! The protobuf types are in [`proto`]: prost code generated once from the vendored
//! `proto/onnx-ml.proto` (ONNX 1.23.2) and committed as `src/onnx_pb.rs`; see
//! `proto/README.md` and `build.rs` for how to regenerate it (feature `regen-proto`).
//!
//! Nothing here panics on untrusted bytes: [`OnnxModel::parse`] returns an
//! [`OnnxError`] for anything that is not a usable ONNX model.

use std::collections::BTreeMap;

use prost::Message;
use serde::{Deserialize, Serialize};

mod fp16;
mod graph;
mod qdq;
mod quantize;
mod tensor;

pub use fp16::convert_fp16;
pub use qdq::{
    add_graph_outputs, plan_static_int8, quantize_static_int8, MatMulMode, Ranges, StaticPlan,
    StaticQuantizeOptions, StaticQuantizeReport, TensorRange, MIN_QDQ_OPSET, REDUCED_WEIGHT_QMAX,
};
pub use quantize::{quantize_dynamic_int8, QuantizeOptions, QuantizeReport};

/// The ONNX protobuf messages (`ModelProto`, `GraphProto`, `NodeProto`, ...), generated
/// by prost-build from the vendored `proto/onnx-ml.proto`.
#[allow(clippy::all, clippy::pedantic, missing_docs, rustdoc::all)]
#[path = "onnx_pb.rs"]
pub mod proto;

use proto::ModelProto;

/// The highest ONNX IR version that ONNX Runtime 1.31 loads.
pub const MAX_ORT_IR_VERSION: i64 = 13;

/// Errors of this crate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OnnxError {
    /// The input was empty.
    #[error("not an ONNX model: the input is empty")]
    Empty,
    /// The bytes are not a protobuf `ModelProto`.
    #[error("not an ONNX model: protobuf decoding failed: {0}")]
    Decode(String),
    /// The `ir_version` field is missing, zero or negative.
    #[error("not an ONNX model: ir_version is {0} (a model has ir_version >= 1)")]
    BadIrVersion(i64),
    /// The model has no graph.
    #[error("not an ONNX model: the ModelProto has no graph")]
    MissingGraph,
    /// The model is ONNX but something in it is inconsistent or unsupported.
    #[error("invalid ONNX model: {0}")]
    Invalid(String),
}

/// A parsed ONNX model (a prost `ModelProto` that has a graph and an IR version).
#[derive(Clone, PartialEq)]
pub struct OnnxModel {
    proto: ModelProto,
}

impl std::fmt::Debug for OnnxModel {
    /// A summary: the weights are not printed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = self.graph();
        f.debug_struct("OnnxModel")
            .field("ir_version", &self.ir_version())
            .field("opsets", &self.opsets())
            .field("producer", &self.proto.producer_name())
            .field("graph", &g.name())
            .field("nodes", &g.node.len())
            .field("initializers", &g.initializer.len())
            .field("encoded_len", &self.proto.encoded_len())
            .finish()
    }
}

/// Element type of a tensor, as in `TensorProto.DataType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElemType {
    Float,
    Double,
    Int64,
    Int32,
    Int8,
    Uint8,
    Int16,
    Bool,
    String,
    Float16,
    /// Any other `TensorProto.DataType` code. `Other(0)` (UNDEFINED) is also used for
    /// values that are not tensors (sequences, maps, optionals, opaque).
    Other(i32),
}

impl ElemType {
    /// From a `TensorProto.DataType` code.
    pub fn from_code(code: i32) -> ElemType {
        match code {
            1 => ElemType::Float,
            2 => ElemType::Uint8,
            3 => ElemType::Int8,
            5 => ElemType::Int16,
            6 => ElemType::Int32,
            7 => ElemType::Int64,
            8 => ElemType::String,
            9 => ElemType::Bool,
            10 => ElemType::Float16,
            11 => ElemType::Double,
            other => ElemType::Other(other),
        }
    }

    /// The `TensorProto.DataType` code.
    pub fn code(self) -> i32 {
        match self {
            ElemType::Float => 1,
            ElemType::Uint8 => 2,
            ElemType::Int8 => 3,
            ElemType::Int16 => 5,
            ElemType::Int32 => 6,
            ElemType::Int64 => 7,
            ElemType::String => 8,
            ElemType::Bool => 9,
            ElemType::Float16 => 10,
            ElemType::Double => 11,
            ElemType::Other(c) => c,
        }
    }
}

/// One dimension of a graph input or output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dim {
    /// `dim_value`.
    Fixed(i64),
    /// `dim_param`, e.g. a symbolic batch size `"N"`.
    Symbolic(String),
    /// Neither is set.
    Unknown,
}

/// A graph input or output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IoInfo {
    pub name: String,
    pub elem_type: ElemType,
    /// `None` when the rank is unknown (no shape in the type, or not a tensor).
    pub shape: Option<Vec<Dim>>,
}

/// The inputs a caller must feed (graph inputs that are not initializers) and the outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signature {
    pub inputs: Vec<IoInfo>,
    pub outputs: Vec<IoInfo>,
}

impl OnnxModel {
    /// Decode and sanity-check a serialized `ModelProto`.
    ///
    /// Rejects (with an error, never a panic) empty input, bytes that are not a protobuf
    /// `ModelProto`, a model with no graph, a model whose `ir_version` is not >= 1, and
    /// a model of IR version >= 3 without any `opset_import`.
    pub fn parse(bytes: &[u8]) -> Result<OnnxModel, OnnxError> {
        if bytes.is_empty() {
            return Err(OnnxError::Empty);
        }
        let proto = ModelProto::decode(bytes).map_err(|e| OnnxError::Decode(e.to_string()))?;
        OnnxModel::from_proto(proto)
    }

    /// Wrap a `ModelProto`, with the same checks as [`OnnxModel::parse`].
    pub fn from_proto(proto: ModelProto) -> Result<OnnxModel, OnnxError> {
        let ir = proto.ir_version.unwrap_or(0);
        if ir < 1 {
            return Err(OnnxError::BadIrVersion(ir));
        }
        if proto.graph.is_none() {
            return Err(OnnxError::MissingGraph);
        }
        if ir >= 3 && proto.opset_import.is_empty() {
            return Err(OnnxError::Invalid(format!(
                "ir_version {ir} requires opset_import, and there is none"
            )));
        }
        Ok(OnnxModel { proto })
    }

    /// Serialize to the protobuf bytes of an `.onnx` file.
    pub fn to_bytes(&self) -> Vec<u8> {
        self.proto.encode_to_vec()
    }

    /// The underlying `ModelProto`.
    pub fn proto(&self) -> &ModelProto {
        &self.proto
    }

    /// The underlying `ModelProto`, by value.
    pub fn into_proto(self) -> ModelProto {
        self.proto
    }

    pub(crate) fn graph(&self) -> &proto::GraphProto {
        // `from_proto` guarantees a graph; an empty one stands in defensively.
        static EMPTY: std::sync::OnceLock<proto::GraphProto> = std::sync::OnceLock::new();
        match &self.proto.graph {
            Some(g) => g,
            None => EMPTY.get_or_init(proto::GraphProto::default),
        }
    }

    /// Graph inputs that are not initializers (what a caller feeds), and graph outputs.
    pub fn signature(&self) -> Signature {
        let g = self.graph();
        let inits: std::collections::HashSet<&str> =
            g.initializer.iter().map(|t| t.name()).collect();
        Signature {
            inputs: g
                .input
                .iter()
                .filter(|vi| !inits.contains(vi.name()))
                .map(io_info)
                .collect(),
            outputs: g.output.iter().map(io_info).collect(),
        }
    }

    /// Number of nodes per operator, keyed `"OpType"` for the default ONNX domain
    /// (`""` or `"ai.onnx"`) and `"domain::OpType"` otherwise (e.g.
    /// `"com.microsoft::DynamicQuantizeMatMul"`, `"ai.onnx.ml::LinearClassifier"`).
    /// Nodes of nested subgraphs (If/Loop/Scan bodies) are counted too.
    pub fn op_counts(&self) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        graph::for_each_node_recursive(self.graph(), &mut |n| {
            *counts.entry(op_key(n)).or_insert(0) += 1;
        });
        counts
    }

    /// The model's `ir_version`.
    pub fn ir_version(&self) -> i64 {
        self.proto.ir_version.unwrap_or(0)
    }

    /// The operator set imports as `(domain, version)`; the default domain is `""`.
    pub fn opsets(&self) -> Vec<(String, i64)> {
        self.proto
            .opset_import
            .iter()
            .map(|o| (o.domain().to_string(), o.version()))
            .collect()
    }
}

pub(crate) fn op_key(n: &proto::NodeProto) -> String {
    match n.domain() {
        "" | "ai.onnx" => n.op_type().to_string(),
        d => format!("{d}::{}", n.op_type()),
    }
}

fn io_info(vi: &proto::ValueInfoProto) -> IoInfo {
    use proto::type_proto::Value;
    let (elem_type, shape) = match vi.r#type.as_ref().and_then(|t| t.value.as_ref()) {
        Some(Value::TensorType(t)) => (t.elem_type(), t.shape.as_ref()),
        Some(Value::SparseTensorType(t)) => (t.elem_type(), t.shape.as_ref()),
        _ => (0, None),
    };
    IoInfo {
        name: vi.name().to_string(),
        elem_type: ElemType::from_code(elem_type),
        shape: shape.map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(proto::tensor_shape_proto::dimension::Value::DimValue(v)) => {
                        Dim::Fixed(*v)
                    }
                    Some(proto::tensor_shape_proto::dimension::Value::DimParam(p)) => {
                        Dim::Symbolic(p.clone())
                    }
                    None => Dim::Unknown,
                })
                .collect()
        }),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn elem_type_codes_round_trip() {
        for code in 0..=25 {
            assert_eq!(ElemType::from_code(code).code(), code);
        }
        assert_eq!(ElemType::from_code(1), ElemType::Float);
        assert_eq!(ElemType::from_code(16), ElemType::Other(16));
    }

    #[test]
    fn parse_rejects_non_models() {
        assert_eq!(OnnxModel::parse(&[]), Err(OnnxError::Empty));
        // A valid protobuf (field 1 = ir_version 0) that is not a usable model.
        assert_eq!(
            OnnxModel::parse(&[0x08, 0x00]),
            Err(OnnxError::BadIrVersion(0))
        );
        // ir_version 9 but no graph.
        assert_eq!(
            OnnxModel::parse(&[0x08, 0x09]),
            Err(OnnxError::MissingGraph)
        );
        assert!(matches!(
            OnnxModel::parse(b"\xff\xff\xff\xff"),
            Err(OnnxError::Decode(_))
        ));
    }

    #[test]
    fn op_key_domains() {
        let mut n = proto::NodeProto {
            op_type: Some("MatMul".into()),
            ..Default::default()
        };
        assert_eq!(op_key(&n), "MatMul");
        n.domain = Some("ai.onnx".into());
        assert_eq!(op_key(&n), "MatMul");
        n.domain = Some("com.microsoft".into());
        assert_eq!(op_key(&n), "com.microsoft::MatMul");
    }
}
