//! Graph-building helpers shared by the onnx crate's test binaries.

use infaas_onnx::proto::{self, tensor_proto::DataType, type_proto, TypeProto, ValueInfoProto};

/// A tensor value of `elem` with fixed dimensions `dims`.
pub fn value_info(name: &str, elem: DataType, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem as i32),
                shape: Some(proto::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| proto::tensor_shape_proto::Dimension {
                            value: Some(proto::tensor_shape_proto::dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}
