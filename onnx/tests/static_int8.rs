//! Tests of the static INT8 (QDQ) rewrite on hand-built graphs: the layout ONNX Runtime's
//! QDQ fusion needs (checked against ONNX Runtime itself in the executors crate's
//! `tests/int8_static.rs`), BatchNormalization folding, Relu fusion, 7-bit per-channel
//! weights, int32 biases, and errors instead of panics on what cannot be quantised.

#![allow(clippy::unwrap_used)]

mod common;
use common::value_info;

use std::collections::{BTreeMap, HashMap};

use infaas_onnx::proto::{
    self, tensor_proto::DataType, AttributeProto, GraphProto, ModelProto, NodeProto,
    OperatorSetIdProto, TensorProto, ValueInfoProto,
};
use infaas_onnx::{
    add_graph_outputs, plan_static_int8, quantize_static_int8, MatMulMode, OnnxError, OnnxModel,
    Ranges, StaticQuantizeOptions, TensorRange, REDUCED_WEIGHT_QMAX,
};

// ---------------------------------------------------------------------------
// building graphs

fn floats(name: &str, dims: &[i64], f: impl Fn(i64) -> f32) -> TensorProto {
    let n: i64 = dims.iter().product();
    TensorProto {
        name: Some(name.into()),
        dims: dims.to_vec(),
        data_type: Some(DataType::Float as i32),
        float_data: (0..n).map(f).collect(),
        ..Default::default()
    }
}

/// Deterministic weights in [-1, 1).
fn weight(name: &str, dims: &[i64]) -> TensorProto {
    floats(name, dims, |i| ((i * 37 % 101) as f32 - 50.0) / 50.0)
}

fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(name.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn with_attrs(mut n: NodeProto, attrs: Vec<AttributeProto>) -> NodeProto {
    n.attribute = attrs;
    n
}

fn ints(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Ints as i32),
        ints: v.to_vec(),
        ..Default::default()
    }
}

fn int(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(proto::attribute_proto::AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

fn model_with_opset(
    opset: i64,
    nodes: Vec<NodeProto>,
    inputs: Vec<ValueInfoProto>,
    outputs: Vec<ValueInfoProto>,
    inits: Vec<TensorProto>,
) -> OnnxModel {
    OnnxModel::from_proto(ModelProto {
        ir_version: Some(9),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(opset),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs,
            output: outputs,
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    })
    .unwrap()
}

/// A residual block of a CNN, as PyTorch exports one:
/// x[1,3,8,8] -> conv1(3->8) -> bn1 -> relu1 -> conv2(8->8) -> bn2 -> add(+ shortcut conv3(3->8))
/// -> relu2 -> GlobalAveragePool -> Flatten -> Gemm(transB=1, W[4,8], C[4]) -> logits[1,4]
fn small_resnet(opset: i64) -> OnnxModel {
    let conv = |name: &str, x: &str, w: &str, y: &str, k: i64| {
        with_attrs(
            node("Conv", name, &[x, w], &[y]),
            vec![
                ints("kernel_shape", &[k, k]),
                ints("pads", &[k / 2, k / 2, k / 2, k / 2]),
            ],
        )
    };
    let bn = |name: &str, x: &str, p: &str, y: &str| {
        let (g, b, m, v) = (
            format!("{p}.gamma"),
            format!("{p}.beta"),
            format!("{p}.mean"),
            format!("{p}.var"),
        );
        node("BatchNormalization", name, &[x, &g, &b, &m, &v], &[y])
    };
    let bn_params = |p: &str| {
        vec![
            floats(&format!("{p}.gamma"), &[8], |i| 0.5 + i as f32 * 0.1),
            floats(&format!("{p}.beta"), &[8], |i| i as f32 * 0.05 - 0.2),
            floats(&format!("{p}.mean"), &[8], |i| i as f32 * 0.01),
            floats(&format!("{p}.var"), &[8], |i| 1.0 + i as f32 * 0.2),
        ]
    };
    let mut inits = vec![
        weight("conv1.w", &[8, 3, 3, 3]),
        weight("conv2.w", &[8, 8, 3, 3]),
        weight("conv3.w", &[8, 3, 1, 1]),
        floats("conv3.b", &[8], |i| i as f32 * 0.1),
        weight("fc.w", &[4, 8]),
        floats("fc.b", &[4], |i| i as f32 - 1.5),
    ];
    inits.extend(bn_params("bn1"));
    inits.extend(bn_params("bn2"));
    let mut conv3 = conv("conv3", "x", "conv3.w", "short", 1);
    conv3.input.push("conv3.b".into());
    model_with_opset(
        opset,
        vec![
            conv("conv1", "x", "conv1.w", "c1", 3),
            bn("bn1", "c1", "bn1", "b1"),
            node("Relu", "relu1", &["b1"], &["r1"]),
            conv("conv2", "r1", "conv2.w", "c2", 3),
            bn("bn2", "c2", "bn2", "b2"),
            conv3,
            node("Add", "add", &["b2", "short"], &["sum"]),
            node("Relu", "relu2", &["sum"], &["r2"]),
            node("GlobalAveragePool", "gap", &["r2"], &["pooled"]),
            with_attrs(
                node("Flatten", "flatten", &["pooled"], &["flat"]),
                vec![int("axis", 1)],
            ),
            with_attrs(
                node("Gemm", "fc", &["flat", "fc.w", "fc.b"], &["logits"]),
                vec![int("transB", 1)],
            ),
        ],
        vec![value_info("x", DataType::Float, &[1, 3, 8, 8])],
        vec![value_info("logits", DataType::Float, &[1, 4])],
        inits,
    )
}

/// Made-up but plausible ranges for every tensor the plan asks for.
fn ranges_for(tensors: &[String]) -> Ranges {
    tensors
        .iter()
        .map(|t| {
            let r = if t.starts_with('r') {
                TensorRange::new(0.0, 4.0) // Relu outputs
            } else {
                TensorRange::new(-3.0, 5.0)
            };
            (t.clone(), r)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// reading the result

fn graph(m: &OnnxModel) -> &GraphProto {
    m.proto().graph.as_ref().unwrap()
}

fn init<'a>(m: &'a OnnxModel, name: &str) -> &'a TensorProto {
    graph(m)
        .initializer
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no initializer {name:?}"))
}

fn producer<'a>(m: &'a OnnxModel, value: &str) -> Option<&'a NodeProto> {
    graph(m)
        .node
        .iter()
        .find(|n| n.output.iter().any(|o| o == value))
}

fn readers<'a>(m: &'a OnnxModel, value: &str) -> Vec<&'a NodeProto> {
    graph(m)
        .node
        .iter()
        .filter(|n| n.input.iter().any(|i| i == value))
        .collect()
}

fn f32s(t: &TensorProto) -> Vec<f32> {
    if !t.float_data.is_empty() {
        return t.float_data.clone();
    }
    t.raw_data
        .as_ref()
        .unwrap()
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn i32s(t: &TensorProto) -> Vec<i32> {
    t.raw_data
        .as_ref()
        .unwrap()
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

fn i8s(t: &TensorProto) -> Vec<i8> {
    t.raw_data
        .as_ref()
        .unwrap()
        .iter()
        .map(|&b| b as i8)
        .collect()
}

fn attr_int(n: &NodeProto, name: &str) -> Option<i64> {
    n.attribute
        .iter()
        .find(|a| a.name() == name)
        .and_then(|a| a.i)
}

/// The DequantizeLinear feeding input `slot` of `n`.
fn dq_of<'a>(m: &'a OnnxModel, n: &NodeProto, slot: usize) -> &'a NodeProto {
    let dq = producer(m, &n.input[slot])
        .unwrap_or_else(|| panic!("input {slot} of {:?} has no producer", n.name()));
    assert_eq!(
        dq.op_type(),
        "DequantizeLinear",
        "input {slot} of {:?}",
        n.name()
    );
    // One reader per DequantizeLinear, as ONNX Runtime's node groups need.
    assert_eq!(readers(m, &dq.output[0]).len(), 1, "{dq:?}");
    dq
}

fn count(m: &OnnxModel, op: &str) -> usize {
    m.op_counts().get(op).copied().unwrap_or(0)
}

// ---------------------------------------------------------------------------

#[test]
fn residual_block_becomes_qdq_around_every_node() {
    let m = small_resnet(17);
    let opts = StaticQuantizeOptions::default();
    let plan = plan_static_int8(&m, &opts).unwrap();
    // The image, both Relu outputs (Relu fused), the BN-folded conv2 output and the
    // shortcut; the pooled features. All are values of the original model.
    assert_eq!(
        plan.tensors,
        vec!["x", "r1", "b2", "short", "r2", "pooled"],
        "{plan:?}"
    );
    let names: Vec<String> = m
        .proto()
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .flat_map(|n| n.output.clone())
        .chain(["x".to_string()])
        .collect();
    assert!(plan.tensors.iter().all(|t| names.contains(t)));
    assert_eq!(plan.nodes.get("Conv"), Some(&3));
    assert_eq!(plan.weighted_nodes(), 4, "{plan:?}");

    let ranges = ranges_for(&plan.tensors);
    let (q, report) = quantize_static_int8(&m, &ranges, &opts).unwrap();
    assert_eq!(report.folded_batch_norms, 2, "{report:?}");
    assert_eq!(report.fused_relus, 2, "{report:?}");
    assert_eq!(
        report.nodes,
        BTreeMap::from([
            ("Add".to_string(), 1),
            ("Conv".to_string(), 3),
            ("Flatten".to_string(), 1),
            ("Gemm".to_string(), 1),
            ("GlobalAveragePool".to_string(), 1),
        ])
    );
    assert!(report.skipped.is_empty(), "{report:?}");
    assert_eq!(report.quantized_tensors, 7); // the 6 above and the flattened features
    assert_eq!(report.max_abs_weight, REDUCED_WEIGHT_QMAX as u8);
    assert!(report.quantized_weight_bytes < report.original_weight_bytes / 2);
    assert_eq!(count(&q, "BatchNormalization"), 0);
    assert_eq!(count(&q, "Relu"), 0);
    assert_eq!(q.signature(), m.signature());

    // Every Conv: DQ(uint8) input, DQ(int8 per-channel axis 0) weight, DQ(int32) bias, and
    // its output read by a QuantizeLinear only.
    let convs: Vec<&NodeProto> = graph(&q)
        .node
        .iter()
        .filter(|n| n.op_type() == "Conv")
        .collect();
    assert_eq!(convs.len(), 3);
    for c in &convs {
        let x = dq_of(&q, c, 0);
        assert_eq!(init(&q, &x.input[2]).data_type(), DataType::Uint8 as i32);
        let w_dq = dq_of(&q, c, 1);
        assert_eq!(attr_int(w_dq, "axis"), Some(0));
        let w = init(&q, &w_dq.input[0]);
        assert_eq!(w.data_type(), DataType::Int8 as i32);
        let m_out = w.dims[0];
        let w_scale = f32s(init(&q, &w_dq.input[1]));
        assert_eq!(w_scale.len() as i64, m_out);
        let zp = init(&q, &w_dq.input[2]);
        assert_eq!(zp.data_type(), DataType::Int8 as i32);
        assert!(i8s(zp).iter().all(|&z| z == 0));
        // 7-bit, and each channel uses its full range.
        let wq = i8s(w);
        let per = wq.len() / m_out as usize;
        for ch in wq.chunks(per) {
            assert!(ch.iter().all(|v| v.unsigned_abs() <= 63), "{ch:?}");
            assert_eq!(ch.iter().map(|v| v.unsigned_abs()).max(), Some(63));
        }
        let b_dq = dq_of(&q, c, 2);
        assert_eq!(attr_int(b_dq, "axis"), Some(0));
        let b = init(&q, &b_dq.input[0]);
        assert_eq!(b.data_type(), DataType::Int32 as i32);
        let b_scale = f32s(init(&q, &b_dq.input[1]));
        let x_scale = f32s(init(&q, &x.input[1]))[0];
        for (bs, ws) in b_scale.iter().zip(&w_scale) {
            assert!(
                (bs - x_scale * ws).abs() <= 1e-6 * bs.abs(),
                "{bs} vs {x_scale}*{ws}"
            );
        }
        assert!(i32s(init(&q, &b_dq.input[2])).iter().all(|&z| z == 0));
        let out_readers = readers(&q, &c.output[0]);
        assert_eq!(out_readers.len(), 1);
        assert_eq!(out_readers[0].op_type(), "QuantizeLinear");
    }

    // conv1's BatchNormalization is in its weight: dequantised weight = W * gamma /
    // sqrt(var + eps) within half a quantisation step.
    let conv1 = convs.iter().find(|c| c.name() == "conv1").unwrap();
    let w_dq = dq_of(&q, conv1, 1);
    let wq = i8s(init(&q, &w_dq.input[0]));
    let scales = f32s(init(&q, &w_dq.input[1]));
    let orig = f32s(&weight("conv1.w", &[8, 3, 3, 3]));
    for (i, (&v, &w)) in wq.iter().zip(&orig).enumerate() {
        let c = i / 27;
        let s = (0.5 + c as f32 * 0.1) / (1.0 + c as f32 * 0.2 + 1e-5).sqrt();
        let deq = f32::from(v) * scales[c];
        assert!(
            (deq - w * s).abs() <= scales[c] / 2.0 + 1e-6,
            "{i}: {deq} vs {}",
            w * s
        );
    }

    // The Relus are the saturation of their QuantizeLinear: zero point 0, range [0, 4].
    // (No float "r1"/"r2" is left: every reader takes the uint8 values.)
    assert!(producer(&q, "r1").is_none() && producer(&q, "r2").is_none());
    for op in ["Conv", "Add"] {
        let n = graph(&q)
            .node
            .iter()
            .find(|n| n.op_type() == op && (op == "Add" || n.name() == "conv1"))
            .unwrap();
        let qn = readers(&q, &n.output[0])[0];
        assert_eq!(qn.op_type(), "QuantizeLinear");
        assert_eq!(init(&q, &qn.input[2]).raw_data.as_deref(), Some(&[0u8][..]));
        let scale = f32s(init(&q, &qn.input[1]))[0];
        assert!((scale - 4.0 / 255.0).abs() < 1e-7, "{scale}");
    }

    // The residual Add reads two DQs and feeds one Q; the pool likewise.
    for op in ["Add", "GlobalAveragePool"] {
        let n = graph(&q).node.iter().find(|n| n.op_type() == op).unwrap();
        for slot in 0..n.input.len() {
            dq_of(&q, n, slot);
        }
        let out = readers(&q, &n.output[0]);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].op_type(), "QuantizeLinear");
    }

    // Flatten runs on the uint8 values: same scale and zero point in and out.
    let flatten = graph(&q)
        .node
        .iter()
        .find(|n| n.op_type() == "Flatten")
        .unwrap();
    let dq_in = dq_of(&q, flatten, 0);
    let q_out = readers(&q, &flatten.output[0]);
    assert_eq!(q_out[0].op_type(), "QuantizeLinear");
    assert_eq!(dq_in.input[1], q_out[0].input[1]);
    assert_eq!(dq_in.input[2], q_out[0].input[2]);

    // The classifier: DQ weight per output row (transB=1: axis 0), int32 bias, and a float
    // output (the logits are not squeezed into 8 bits).
    let gemm = graph(&q)
        .node
        .iter()
        .find(|n| n.op_type() == "Gemm")
        .unwrap();
    assert_eq!(attr_int(dq_of(&q, gemm, 1), "axis"), Some(0));
    assert_eq!(
        init(&q, &dq_of(&q, gemm, 2).input[0]).data_type(),
        DataType::Int32 as i32
    );
    assert_eq!(gemm.output, vec!["logits".to_string()]);

    // Float weights and BatchNormalization parameters are gone.
    for gone in [
        "conv1.w",
        "conv2.w",
        "bn1.gamma",
        "bn2.var",
        "fc.w",
        "conv3.b",
    ] {
        assert!(
            graph(&q).initializer.iter().all(|t| t.name() != gone),
            "{gone} still there"
        );
    }
    // Serialises and parses back unchanged.
    assert_eq!(OnnxModel::parse(&q.to_bytes()).unwrap(), q);
}

#[test]
fn full_range_weights_when_asked() {
    let m = small_resnet(17);
    let opts = StaticQuantizeOptions {
        reduce_range: false,
        per_channel: false,
        ..Default::default()
    };
    let plan = plan_static_int8(&m, &opts).unwrap();
    let (q, report) = quantize_static_int8(&m, &ranges_for(&plan.tensors), &opts).unwrap();
    assert_eq!(report.max_abs_weight, 127);
    // Per tensor: scalar scales and no axis attribute needed.
    let conv = graph(&q)
        .node
        .iter()
        .find(|n| n.op_type() == "Conv")
        .unwrap();
    let w_dq = dq_of(&q, conv, 1);
    assert!(init(&q, &w_dq.input[1]).dims.is_empty());
}

#[test]
fn matmul_models_are_left_to_dynamic_quantisation_unless_asked() {
    // x[2,16] -> MatMul W[16,8] -> Relu -> MatMul W2[8,4] -> y
    let m = model_with_opset(
        17,
        vec![
            node("MatMul", "mm1", &["x", "w1"], &["h"]),
            node("Relu", "relu", &["h"], &["hr"]),
            node("MatMul", "mm2", &["hr", "w2"], &["y"]),
        ],
        vec![value_info("x", DataType::Float, &[2, 16])],
        vec![value_info("y", DataType::Float, &[2, 4])],
        vec![weight("w1", &[16, 8]), weight("w2", &[8, 4])],
    );
    let plan = plan_static_int8(&m, &StaticQuantizeOptions::default()).unwrap();
    assert!(plan.tensors.is_empty() && plan.nodes.is_empty(), "{plan:?}");
    assert_eq!(plan.skipped.len(), 2, "{plan:?}");
    assert!(plan.skipped[0].contains("not quantised"), "{plan:?}");

    let opts = StaticQuantizeOptions {
        matmul: MatMulMode::Always,
        ..Default::default()
    };
    let plan = plan_static_int8(&m, &opts).unwrap();
    assert_eq!(plan.tensors, vec!["x", "hr"]);
    let (q, report) = quantize_static_int8(&m, &ranges_for(&plan.tensors), &opts).unwrap();
    assert_eq!(report.nodes.get("MatMul"), Some(&2));
    assert_eq!(report.fused_relus, 1);
    for mm in graph(&q).node.iter().filter(|n| n.op_type() == "MatMul") {
        // [K, N] weights: one scale per output column.
        let w_dq = dq_of(&q, mm, 1);
        assert_eq!(attr_int(w_dq, "axis"), Some(1));
        assert_eq!(
            init(&q, &w_dq.input[1]).dims,
            vec![init(&q, &w_dq.input[0]).dims[1]]
        );
    }
    // The last MatMul's output is the graph output: left float.
    assert!(producer(&q, "y").unwrap().op_type() == "MatMul");
}

#[test]
fn nothing_to_quantise_is_an_empty_plan_with_the_reason() {
    let m = model_with_opset(
        17,
        vec![
            node("Relu", "relu", &["x"], &["h"]),
            node("Add", "add", &["h", "x"], &["y"]),
        ],
        vec![value_info("x", DataType::Float, &[2, 4])],
        vec![value_info("y", DataType::Float, &[2, 4])],
        vec![],
    );
    let plan = plan_static_int8(&m, &StaticQuantizeOptions::default()).unwrap();
    assert!(plan.tensors.is_empty() && plan.nodes.is_empty());
    assert_eq!(plan.weighted_nodes(), 0);
    assert!(
        plan.skipped[0].contains("no Conv, MatMul or Gemm"),
        "{plan:?}"
    );
    let (q, report) =
        quantize_static_int8(&m, &Ranges::new(), &StaticQuantizeOptions::default()).unwrap();
    assert_eq!(q, m);
    assert!(report.nodes.is_empty());

    // Per-axis QuantizeLinear needs opset 13.
    let old = small_resnet(12);
    let plan = plan_static_int8(&old, &StaticQuantizeOptions::default()).unwrap();
    assert!(plan.nodes.is_empty());
    assert!(plan.skipped[0].contains("opset 12"), "{plan:?}");

    // A Conv whose weight is a graph input is not a constant: skipped with the reason.
    let m = model_with_opset(
        17,
        vec![node("Conv", "c", &["x", "w"], &["y"])],
        vec![
            value_info("x", DataType::Float, &[1, 3, 4, 4]),
            value_info("w", DataType::Float, &[2, 3, 1, 1]),
        ],
        vec![value_info("y", DataType::Float, &[1, 2, 4, 4])],
        vec![],
    );
    let plan = plan_static_int8(&m, &StaticQuantizeOptions::default()).unwrap();
    assert!(plan.nodes.is_empty());
    assert!(plan.skipped[0].starts_with("c (Conv):"), "{plan:?}");
    assert!(plan.skipped[0].contains("not a constant"), "{plan:?}");

    // Excluded nodes stay float.
    let opts = StaticQuantizeOptions {
        exclude_nodes: vec!["conv2".into()],
        ..Default::default()
    };
    let plan = plan_static_int8(&small_resnet(17), &opts).unwrap();
    assert_eq!(plan.nodes.get("Conv"), Some(&2));
    assert!(
        plan.skipped.iter().any(|s| s.contains("excluded")),
        "{plan:?}"
    );
}

#[test]
fn missing_or_bad_ranges_are_errors_naming_the_tensor() {
    let m = small_resnet(17);
    let opts = StaticQuantizeOptions::default();
    let plan = plan_static_int8(&m, &opts).unwrap();
    let mut ranges = ranges_for(&plan.tensors);
    ranges.remove("short");
    let err = quantize_static_int8(&m, &ranges, &opts).unwrap_err();
    assert!(matches!(err, OnnxError::Invalid(_)));
    assert!(err.to_string().contains("\"short\""), "{err}");

    let mut ranges = ranges_for(&plan.tensors);
    ranges.insert("r1".into(), TensorRange::new(f32::NAN, 1.0));
    let err = quantize_static_int8(&m, &ranges, &opts).unwrap_err();
    assert!(err.to_string().contains("\"r1\""), "{err}");
    let mut ranges = ranges_for(&plan.tensors);
    ranges.insert("r1".into(), TensorRange::empty());
    assert!(quantize_static_int8(&m, &ranges, &opts).is_err());
}

#[test]
fn bias_never_overflows_int32() {
    // A dead channel after BatchNormalization folding: weights ~1e-12, bias 1.0. The bias
    // scale x_scale * w_scale would put it at ~1e11 in int32; the weight scale is raised.
    let mut w = floats("w", &[2, 3, 1, 1], |_| 1e-12);
    w.float_data[3..].iter_mut().for_each(|v| *v = 0.5);
    let mut c = node("Conv", "c", &["x", "w", "b"], &["y"]);
    c.attribute = vec![ints("kernel_shape", &[1, 1])];
    let m = model_with_opset(
        17,
        vec![c],
        vec![value_info("x", DataType::Float, &[1, 3, 4, 4])],
        vec![value_info("y", DataType::Float, &[1, 2, 4, 4])],
        vec![w, floats("b", &[2], |_| 1.0)],
    );
    let opts = StaticQuantizeOptions::default();
    let plan = plan_static_int8(&m, &opts).unwrap();
    let ranges: Ranges = plan
        .tensors
        .iter()
        .map(|t| (t.clone(), TensorRange::new(-1.0, 1.0)))
        .collect();
    let (q, _) = quantize_static_int8(&m, &ranges, &opts).unwrap();
    let conv = graph(&q)
        .node
        .iter()
        .find(|n| n.op_type() == "Conv")
        .unwrap();
    let b_dq = dq_of(&q, conv, 2);
    let b = i32s(init(&q, &b_dq.input[0]));
    let b_scale = f32s(init(&q, &b_dq.input[1]));
    for (bq, s) in b.iter().zip(&b_scale) {
        assert!(bq.unsigned_abs() <= 1 << 30, "{bq}");
        // ... and still represents 1.0.
        assert!((*bq as f32 * s - 1.0).abs() < 1e-3, "{bq} * {s}");
    }
}

#[test]
fn uint8_parameters_contain_zero() {
    assert_eq!(TensorRange::new(0.0, 2.55).uint8_params(), (0.01, 0));
    let (s, zp) = TensorRange::new(-1.0, 1.0).uint8_params();
    assert!((s - 2.0 / 255.0).abs() < 1e-9);
    assert!(zp == 127 || zp == 128, "{zp}"); // 127.5 up to float rounding
                                             // All-positive ranges still start at 0 (so Relu and padding stay exact).
    assert_eq!(TensorRange::new(1.0, 2.55).uint8_params().1, 0);
    assert_eq!(TensorRange::new(-2.55, -1.0).uint8_params(), (0.01, 255));
    assert_eq!(TensorRange::new(0.0, 0.0).uint8_params(), (1.0, 0));
    let mut r = TensorRange::empty();
    assert!(!r.is_valid());
    r.observe(&[1.0, f32::NAN, -2.0]);
    assert_eq!(r, TensorRange::new(-2.0, 1.0));
}

#[test]
fn add_graph_outputs_exposes_values_for_calibration() {
    let m = small_resnet(17);
    let names: Vec<String> = ["x", "r1", "logits", "b2"].map(String::from).to_vec();
    let (with, carried) = add_graph_outputs(&m, &names).unwrap();
    // Graph inputs come out through an Identity; node outputs and outputs as themselves.
    assert_eq!(carried[1..], ["r1", "logits", "b2"]);
    assert_ne!(carried[0], "x");
    let id = producer(&with, &carried[0]).unwrap();
    assert_eq!(id.op_type(), "Identity");
    assert_eq!(id.input, vec!["x".to_string()]);
    let outs: Vec<&str> = graph(&with).output.iter().map(|o| o.name()).collect();
    assert_eq!(outs.len(), 4);
    for c in &carried {
        assert!(outs.contains(&c.as_str()));
    }
    // The original graph is untouched otherwise.
    assert_eq!(graph(&with).node.len(), graph(&m).node.len() + 1);

    let err = add_graph_outputs(&m, &["nope".to_string()]).unwrap_err();
    assert!(err.to_string().contains("\"nope\""), "{err}");
    let err = add_graph_outputs(&m, &["conv1.w".to_string()]).unwrap_err();
    assert!(err.to_string().contains("initializer"), "{err}");
}

#[test]
fn corrupted_models_never_panic() {
    // Flip bytes of the residual block; whatever still parses goes through every step.
    let original = small_resnet(17).to_bytes();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    let mut parsed = 0;
    for _ in 0..400 {
        let mut bytes = original.clone();
        for _ in 0..1 + next() % 4 {
            let i = (next() % bytes.len() as u64) as usize;
            bytes[i] = next() as u8;
        }
        let Ok(m) = OnnxModel::parse(&bytes) else {
            continue;
        };
        parsed += 1;
        let opts = StaticQuantizeOptions::default();
        if let Ok(plan) = plan_static_int8(&m, &opts) {
            let ranges = ranges_for(&plan.tensors);
            let _ = add_graph_outputs(&m, &plan.tensors);
            let _ = quantize_static_int8(&m, &ranges, &opts);
            let _ = quantize_static_int8(
                &m,
                &HashMap::<String, TensorRange>::new().into_iter().collect(),
                &opts,
            );
        }
    }
    assert!(parsed > 50, "only {parsed} corrupted models parsed");
}
