//! A heavy model with a real accuracy, for throughput benchmarks where the model's run time
//! (not HTTP) must dominate: `zoo/digits-mlp-scores.onnx` (64-128-10) behind a stack of 3x3
//! convolutions over the 8x8 image, `channels` wide and `layers` deep.
//!
//! The extra work is real but cannot change the answer:
//! - the pixels are reshaped to [N, 1, 8, 8]; every convolution (padding 1, then `Relu`)
//!   copies channel 0 through unchanged (kernel: 1 at the centre tap of input channel 0,
//!   0 elsewhere; pixels are non-negative, so `Relu` keeps them) and fills the other channels
//!   with pseudo-random weights;
//! - the result is flattened to [N, channels x 64] and the first dense layer reads channel 0
//!   (the 64 pixels in their original order) with `digits-mlp-scores`'s weights and the other
//!   channels with zeros.
//!
//! So its logits equal `digits-mlp-scores`'s (every added term is an exact 0) and so does its
//! accuracy (0.9759 on `digits-val.npz`), while a row costs about
//! `(layers - 1) x 64 x channels^2 x 9` multiply-adds (256 channels, 5 layers: 151 M) for a few
//! MB of weights. Convolutions are not quantized by the INT8 variants, so every variant does
//! that work.

use infaas_onnx::proto::{attribute_proto::AttributeType, tensor_proto::DataType};
use infaas_onnx::proto::{AttributeProto, NodeProto, TensorProto};
use infaas_onnx::OnnxModel;

use crate::platform::zoo_bytes;

/// Hidden units of `digits-mlp-scores.onnx`.
const HIDDEN: usize = 128;
const PIXELS: usize = 64;

fn floats(t: &TensorProto) -> Vec<f32> {
    if !t.float_data.is_empty() {
        return t.float_data.clone();
    }
    t.raw_data()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn tensor(name: &str, dims: &[usize], data: &[f32]) -> TensorProto {
    TensorProto {
        name: Some(name.into()),
        dims: dims.iter().map(|&d| d as i64).collect(),
        data_type: Some(DataType::Float as i32),
        raw_data: Some(data.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

fn ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Ints as i32),
        ints: values.to_vec(),
        ..Default::default()
    }
}

fn node(op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("heavy_{output}")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

/// Deterministic weights in [-scale, scale) (a 64-bit LCG).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, scale: f32) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }
}

/// `digits-mlp-scores` behind `layers` (>= 1) convolutions of `channels` (>= 1) channels;
/// same input (`pixels` [N, 64]) and output (`logits` [N, 10]).
pub fn heavy_cnn(channels: usize, layers: usize) -> Vec<u8> {
    assert!(
        channels >= 1 && layers >= 1,
        "at least one channel and one layer"
    );
    let base = OnnxModel::parse(&zoo_bytes("digits-mlp-scores.onnx")).expect("mlp-scores");
    let mut proto = base.into_proto();
    let graph = proto.graph.as_mut().expect("a graph");
    let w1 = graph
        .initializer
        .iter()
        .find(|t| t.name() == "w1")
        .map(floats)
        .expect("initializer w1 in mlp-scores");
    assert_eq!(w1.len(), PIXELS * HIDDEN, "mlp-scores w1 is [64, 128]");
    let mut rng = Lcg(0x5eed);

    let mut nodes = vec![node("Reshape", &["pixels", "image_shape"], "image", vec![])];
    let mut inits = vec![TensorProto {
        name: Some("image_shape".into()),
        dims: vec![4],
        data_type: Some(DataType::Int64 as i32),
        int64_data: vec![-1, 1, 8, 8],
        ..Default::default()
    }];
    let mut input = "image".to_string();
    for layer in 0..layers {
        let in_ch = if layer == 0 { 1 } else { channels };
        let scale = 1.0 / ((in_ch * 9) as f32).sqrt();
        let mut w = vec![0f32; channels * in_ch * 9];
        for out in 0..channels {
            for i in 0..in_ch {
                for tap in 0..9 {
                    let at = (out * in_ch + i) * 9 + tap;
                    w[at] = match out {
                        // Channel 0 copies channel 0's centre tap.
                        0 => f32::from(u8::from(i == 0 && tap == 4)),
                        _ => rng.next(scale),
                    };
                }
            }
        }
        let (weight, conv, relu) = (
            format!("conv{layer}_w"),
            format!("conv{layer}"),
            format!("conv{layer}_relu"),
        );
        inits.push(tensor(&weight, &[channels, in_ch, 3, 3], &w));
        nodes.push(node(
            "Conv",
            &[&input, &weight],
            &conv,
            vec![ints("kernel_shape", &[3, 3]), ints("pads", &[1, 1, 1, 1])],
        ));
        nodes.push(node("Relu", &[&conv], &relu, vec![]));
        input = relu;
    }
    nodes.push(node(
        "Flatten",
        &[&input],
        "features",
        vec![AttributeProto {
            name: Some("axis".into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(1),
            ..Default::default()
        }],
    ));
    // Flattened NCHW: channel 0 is the first 64 features, in pixel order.
    let mut wide_w1 = w1;
    wide_w1.resize(channels * PIXELS * HIDDEN, 0.0);
    inits.push(tensor("w1", &[channels * PIXELS, HIDDEN], &wide_w1));

    // The base graph from its first MatMul on, reading the features instead of the pixels.
    let first = graph
        .node
        .iter()
        .position(|n| n.op_type() == "MatMul")
        .expect("mlp-scores starts with a MatMul");
    let mut rest: Vec<NodeProto> = graph.node.drain(first..).collect();
    rest[0].input[0] = "features".into();
    nodes.extend(rest);
    inits.extend(graph.initializer.drain(..).filter(|t| t.name() != "w1"));
    graph.node = nodes;
    graph.initializer = inits;
    graph.name = Some(format!("digits-cnn-{channels}x{layers}"));
    OnnxModel::from_proto(proto)
        .expect("a valid heavy model")
        .to_bytes()
}
