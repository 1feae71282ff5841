//! Float16 conversion for GPU targets.
//!
//! Nodes of a fixed allow-list of default-domain operators whose float inputs and
//! outputs share one type `T` (MatMul, Gemm, Conv, Add, Relu, Softmax, Reshape, ...)
//! are switched to float16 when all their `T` inputs are known to be float32. Their
//! float32 constant inputs become float16 initializers; float32 values computed at run
//! time (graph inputs, outputs of nodes that stay float32) get a `Cast(to=FLOAT16)`;
//! where a float32 consumer (a node that stays float32, a subgraph, a graph output)
//! reads a converted value, a `Cast(to=FLOAT)` restores it under its original name.
//! So graph inputs and outputs keep their float32 types and names, every original
//! value keeps its original type, and the float16 values get new names (`<name>_fp16`).
//! Everything else (ai.onnx.ml operators, Cast, shape arithmetic, contrib ops, ...)
//! stays float32.

use std::collections::{HashMap, HashSet};

use crate::graph::{self, NameGen};
use crate::proto::{
    attribute_proto::AttributeType, type_proto, NodeProto, TensorProto, TypeProto, ValueInfoProto,
};
use crate::tensor::{self, FLOAT, FLOAT16, INT64};
use crate::{OnnxError, OnnxModel};

/// Which inputs / outputs of an operator carry its float type `T`.
#[derive(Clone, Copy)]
enum Sel {
    All,
    Only(&'static [usize]),
}

impl Sel {
    fn contains(self, i: usize) -> bool {
        match self {
            Sel::All => true,
            Sel::Only(list) => list.contains(&i),
        }
    }
}

/// The allow-list: operators (default domain) that are converted, with their `T`
/// inputs and outputs. For each, the ONNX spec allows float16 for `T` and the output
/// `T` has the type of the input `T`. ONNX Runtime's CUDA execution provider has
/// float16 kernels for the common ones; where an execution provider lacks one, ONNX
/// Runtime runs the node elsewhere (its CPU provider inserts casts around float16
/// nodes it has no float16 kernel for).
fn spec(op: &str) -> Option<(Sel, Sel)> {
    const FIRST: Sel = Sel::Only(&[0]);
    Some(match op {
        "Add"
        | "Sub"
        | "Mul"
        | "Div"
        | "MatMul"
        | "Gemm"
        | "Max"
        | "Min"
        | "Sum"
        | "Mean"
        | "Relu"
        | "Tanh"
        | "Sigmoid"
        | "Exp"
        | "Log"
        | "Sqrt"
        | "Abs"
        | "Neg"
        | "Erf"
        | "Reciprocal"
        | "Floor"
        | "Ceil"
        | "Round"
        | "Sign"
        | "Sin"
        | "Cos"
        | "Softplus"
        | "Softsign"
        | "HardSigmoid"
        | "HardSwish"
        | "LeakyRelu"
        | "Elu"
        | "Selu"
        | "Celu"
        | "Gelu"
        | "Mish"
        | "PRelu"
        | "Identity"
        | "Softmax"
        | "LogSoftmax"
        | "Transpose"
        | "Flatten"
        | "Concat"
        | "Conv"
        | "ConvTranspose"
        | "Einsum"
        | "GlobalAveragePool"
        | "GlobalMaxPool"
        | "AveragePool"
        | "InstanceNormalization"
        | "Clip" => (Sel::All, Sel::All),
        "Where" => (Sel::Only(&[1, 2]), Sel::All),
        "Split" => (FIRST, Sel::All),
        "LayerNormalization" | "BatchNormalization" => (Sel::All, FIRST),
        "Pad" => (Sel::Only(&[0, 2]), FIRST),
        "Reshape" | "Squeeze" | "Unsqueeze" | "Slice" | "Gather" | "GatherElements" | "Expand"
        | "Tile" | "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceL2"
        | "DepthToSpace" | "SpaceToDepth" | "MaxPool" | "Dropout" => (FIRST, FIRST),
        _ => return None,
    })
}

fn tensor_elem_type(vi: &ValueInfoProto) -> Option<i32> {
    match vi.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) => t.elem_type,
        _ => None,
    }
}

/// The float16 replacement of the float32 `value` tensor of a `Constant` node, if that
/// is what the node is (and its value is readable).
fn fp16_constant_value(n: &NodeProto) -> Option<TensorProto> {
    if !graph::is_default_domain(n) || n.op_type() != "Constant" || n.output.len() != 1 {
        return None;
    }
    let t = graph::attr(n, "value")
        .and_then(|a| a.t.as_ref())
        .filter(|t| t.data_type() == FLOAT)?;
    let values = tensor::float_values(t).ok()?;
    Some(tensor::tensor_f16(
        t.name().to_string(),
        t.dims.clone(),
        &values,
    ))
}

fn cast(name: String, input: String, output: String, to: i32) -> NodeProto {
    graph::node(
        "Cast",
        "",
        name,
        vec![input],
        vec![output],
        vec![graph::int_attr("to", i64::from(to))],
    )
}

/// FP16 conversion of float initializers and float tensors (see the module docs),
/// keeping float32 graph inputs/outputs by inserting Cast nodes at the boundary.
/// Only the main graph is rewritten; subgraphs keep reading float32 values.
pub fn convert_fp16(model: &OnnxModel) -> Result<OnnxModel, OnnxError> {
    let mut proto = model.proto().clone();
    let Some(graph) = proto.graph.as_mut() else {
        return Err(OnnxError::MissingGraph);
    };
    let graph_inputs: HashSet<String> = graph.input.iter().map(|v| v.name().to_string()).collect();
    let mut inits: HashMap<String, usize> = HashMap::new();
    for (i, t) in graph.initializer.iter().enumerate() {
        inits.entry(t.name().to_string()).or_insert(i);
    }

    // Known element types of values.
    let mut types: HashMap<String, i32> = HashMap::new();
    for t in &graph.initializer {
        types.insert(t.name().to_string(), t.data_type());
    }
    for vi in graph
        .value_info
        .iter()
        .chain(&graph.output)
        .chain(&graph.input)
    {
        if let Some(et) = tensor_elem_type(vi) {
            types.insert(vi.name().to_string(), et);
        }
    }

    // Pass 1: decide which nodes become float16, propagating types in graph order.
    let mut converted = vec![false; graph.node.len()];
    for (i, n) in graph.node.iter().enumerate() {
        if fp16_constant_value(n).is_some() {
            converted[i] = true;
            types.insert(n.output[0].clone(), FLOAT);
            continue;
        }
        let spec = if graph::is_default_domain(n) && graph::subgraphs(n).next().is_none() {
            spec(n.op_type())
        } else {
            None
        };
        match spec {
            Some((t_in, t_out)) => {
                let t_inputs: Vec<&String> = n
                    .input
                    .iter()
                    .enumerate()
                    .filter(|(j, name)| t_in.contains(*j) && !name.is_empty())
                    .map(|(_, name)| name)
                    .collect();
                let in_type = t_inputs.first().and_then(|v| types.get(*v).copied());
                // BatchNormalization in training mode also outputs running statistics
                // typed like its mean input: leave such nodes alone.
                let extra_typed_outputs = n.op_type() == "BatchNormalization"
                    && n.output.iter().skip(1).any(|o| !o.is_empty());
                converted[i] = !t_inputs.is_empty()
                    && !extra_typed_outputs
                    && t_inputs.iter().all(|v| types.get(*v) == Some(&FLOAT));
                if let Some(et) = in_type {
                    for (j, o) in n.output.iter().enumerate() {
                        if t_out.contains(j) && !o.is_empty() {
                            types.insert(o.clone(), et);
                        }
                    }
                }
            }
            None => {
                let out_type = match (graph::is_default_domain(n), n.op_type()) {
                    (true, "Cast") => graph::attr(n, "to").and_then(|a| a.i).map(|v| v as i32),
                    (true, "Shape" | "Size" | "ArgMax" | "ArgMin" | "NonZero") => Some(INT64),
                    (false, "DynamicQuantizeMatMul" | "MatMulIntegerToFloat")
                        if n.domain() == crate::quantize::MS_DOMAIN =>
                    {
                        Some(FLOAT)
                    }
                    (true, "Constant") => graph::attr(n, "value")
                        .and_then(|a| a.t.as_ref())
                        .map(|t| t.data_type()),
                    (true, "ConstantOfShape") => Some(
                        graph::attr(n, "value")
                            .and_then(|a| a.t.as_ref())
                            .map_or(FLOAT, |t| t.data_type()),
                    ),
                    _ => None,
                };
                if let (Some(et), Some(o)) = (out_type, n.output.first()) {
                    types.insert(o.clone(), et);
                }
            }
        }
    }

    // Values that must also exist as float32 after the rewrite.
    let mut fp32_reads: HashSet<String> =
        graph.output.iter().map(|o| o.name().to_string()).collect();
    for (i, n) in graph.node.iter().enumerate() {
        let t_in = if converted[i] {
            spec(n.op_type()).map_or(Sel::Only(&[]), |s| s.0)
        } else {
            Sel::Only(&[])
        };
        for (j, name) in n.input.iter().enumerate() {
            if !t_in.contains(j) && !name.is_empty() {
                fp32_reads.insert(name.clone());
            }
        }
        fp32_reads.extend(graph::names_read_by_subgraphs(n));
    }

    // Pass 2: rewrite.
    let mut names = NameGen::new(graph);
    let mut fp16_of: HashMap<String, String> = HashMap::new();
    let mut new_inits: Vec<TensorProto> = Vec::new();
    let mut converted_inits: HashSet<String> = HashSet::new();
    let mut renamed: Vec<(String, String)> = Vec::new(); // (fp32 name, fp16 name)
    let old_nodes = std::mem::take(&mut graph.node);
    let mut nodes = Vec::with_capacity(old_nodes.len() * 2);
    for (i, mut n) in old_nodes.into_iter().enumerate() {
        if !converted[i] {
            nodes.push(n);
            continue;
        }
        let t_out = if let Some(t16) = fp16_constant_value(&n) {
            for a in n.attribute.iter_mut().filter(|a| a.name() == "value") {
                a.t = Some(t16.clone());
                a.r#type = Some(AttributeType::Tensor as i32);
            }
            Sel::All
        } else {
            let Some((t_in, t_out)) = spec(n.op_type()) else {
                nodes.push(n);
                continue;
            };
            for j in 0..n.input.len() {
                let v = n.input[j].clone();
                if !t_in.contains(j) || v.is_empty() {
                    continue;
                }
                if let Some(v16) = fp16_of.get(&v) {
                    n.input[j] = v16.clone();
                    continue;
                }
                let v16 = names.fresh(&format!("{v}_fp16"));
                let constant = inits
                    .get(&v)
                    .filter(|_| !graph_inputs.contains(&v))
                    .and_then(|&k| graph.initializer.get(k))
                    .and_then(|t| tensor::float_values(t).ok().map(|vals| (t, vals)));
                match constant {
                    Some((t, vals)) => {
                        new_inits.push(tensor::tensor_f16(v16.clone(), t.dims.clone(), &vals));
                        converted_inits.insert(v.clone());
                    }
                    None => {
                        let cast_name = names.fresh(&format!("{v}_to_fp16"));
                        nodes.push(cast(cast_name, v.clone(), v16.clone(), FLOAT16));
                    }
                }
                fp16_of.insert(v, v16.clone());
                n.input[j] = v16;
            }
            t_out
        };
        let mut back_casts = Vec::new();
        for j in 0..n.output.len() {
            let o = n.output[j].clone();
            if !t_out.contains(j) || o.is_empty() {
                continue;
            }
            let o16 = names.fresh(&format!("{o}_fp16"));
            n.output[j] = o16.clone();
            fp16_of.insert(o.clone(), o16.clone());
            renamed.push((o.clone(), o16.clone()));
            if fp32_reads.contains(&o) {
                let cast_name = names.fresh(&format!("{o}_to_fp32"));
                back_casts.push(cast(cast_name, o16, o, FLOAT));
            }
        }
        nodes.push(n);
        nodes.extend(back_casts);
    }
    graph.node = nodes;
    graph.initializer.append(&mut new_inits);

    // Drop float32 initializers that nothing reads any more.
    let referenced = graph::referenced_names(graph);
    graph
        .initializer
        .retain(|t| !converted_inits.contains(t.name()) || referenced.contains(t.name()));

    // value_info: float16 entries for renamed values; drop entries of values that no
    // longer exist (converted values nobody reads as float32).
    let produced: HashSet<&String> = graph.node.iter().flat_map(|n| n.output.iter()).collect();
    let gone: HashSet<String> = renamed
        .iter()
        .filter(|(o, _)| !produced.contains(o))
        .map(|(o, _)| o.clone())
        .collect();
    let mut added = Vec::new();
    for (o, o16) in &renamed {
        let shape = graph
            .value_info
            .iter()
            .chain(&graph.output)
            .find(|vi| vi.name() == o)
            .and_then(|vi| match vi.r#type.as_ref()?.value.as_ref()? {
                type_proto::Value::TensorType(t) => t.shape.clone(),
                _ => None,
            });
        added.push(ValueInfoProto {
            name: Some(o16.clone()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(FLOAT16),
                    shape,
                })),
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    graph.value_info.retain(|vi| !gone.contains(vi.name()));
    graph.value_info.extend(added);

    OnnxModel::from_proto(proto)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sel_contains() {
        assert!(Sel::All.contains(7));
        assert!(Sel::Only(&[0, 2]).contains(2));
        assert!(!Sel::Only(&[0, 2]).contains(1));
        assert!(spec("MatMul").is_some());
        assert!(spec("ArgMax").is_none());
        assert!(spec("Cast").is_none());
    }
}
