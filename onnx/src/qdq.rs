//! Static INT8 quantisation in ONNX's QDQ format, for convolutional networks.
//!
//! [`quantize_static_int8`] inserts `QuantizeLinear` / `DequantizeLinear` pairs around the
//! nodes it quantises, the layout ONNX Runtime's own `quantize_static(quant_format=QDQ)`
//! produces. The model stays a standard ONNX model (no contrib ops); ONNX Runtime's CPU
//! optimiser (level Extended or higher) then fuses each `DQ -> op -> Q` group into an
//! integer kernel: `QLinearConv`, `QLinearMatMul` / `MatMulIntegerToFloat`, `QGemm`,
//! `QLinearAdd`, `QLinearGlobalAveragePool`, `QLinearAveragePool`, and runs `MaxPool`,
//! `Flatten`, `Reshape`, `Transpose`, `Squeeze`, `Unsqueeze` directly on the uint8 data.
//!
//! Layout:
//!
//! * activations: uint8, per tensor, asymmetric: `scale = (max - min) / 255` over the
//!   calibrated range widened to contain 0, `zero_point = round(-min / scale)`. The ranges
//!   come from the caller (the executors crate runs the model on a calibration set; this
//!   crate does not depend on ONNX Runtime). [`plan_static_int8`] says which tensors need
//!   one and [`add_graph_outputs`] exposes them as outputs for that run.
//! * weights: int8, symmetric (zero point 0), one scale per output channel: axis 0 of a
//!   `Conv` weight `[M, C/group, kh, kw]`, axis 1 of a `MatMul` weight `[K, N]`, axis 0
//!   of a `Gemm` weight with `transB=1` (`[N, K]`) and axis 1 without. 7-bit by default
//!   (`|w_q| <= 63`, [`StaticQuantizeOptions::reduce_range`]): see below.
//! * biases of `Conv` and `Gemm`: int32 with `scale = x_scale * w_scale[m]`, zero point
//!   0, through a `DequantizeLinear` (axis 0): what ONNX Runtime's QDQ selectors require
//!   to fold the bias into `QLinearConv` / `QGemm`.
//!
//! Before quantising, `BatchNormalization` nodes that follow a `Conv` (whose output
//! nothing else reads) are folded into the convolution's weight and bias, and a `Relu`
//! that is the only reader of a quantised node's output is removed: the output is then
//! quantised with the Relu output's range, whose minimum is 0, so the zero point is 0 and
//! `QuantizeLinear`'s saturation at 0 *is* the Relu (ONNX Runtime's quantiser does the
//! same). Outputs of `MatMul` / `Gemm` are quantised only when a quantised node reads
//! them; otherwise (e.g. the logits of a classifier) they stay float32, which ONNX
//! Runtime runs as `MatMulIntegerToFloat` / `QGemm` with a float output.
//!
//! # Why 7-bit weights
//!
//! ONNX Runtime's u8 x s8 integer kernels on x86 CPUs with AVX2 but without VNNI multiply
//! with `vpmaddubsw`, which adds two u8 x s8 products into a *saturating* int16. With full
//! int8 weights two products reach `2 * 255 * 127 = 64770`, past `i16::MAX`, and the sum
//! silently clips: the same file gives a different, less accurate answer on such a CPU
//! than on one with VNNI (which accumulates in int32). With `|w_q| <= 63` a pair is at
//! most `2 * 255 * 63 = 32130 < 32767`: exact on both kernel paths, so the accuracy
//! measured on one machine holds on any x86 CPU. The cost is one bit of weight precision.
//!
//! # Which INT8 for which model
//!
//! The platform (`infaas-executors`, `variants::build_int8`) uses this static rewrite
//! for models with a quantisable `Conv`: dynamic quantisation
//! ([`crate::quantize_dynamic_int8`]) has no convolution kernel, so a CNN's INT8 file
//! would otherwise be its FP32 convolutions plus a quantised classifier, no faster. With
//! this rewrite the zoo's CIFAR ResNet keeps 0.93 top-1 agreement with FP32 and runs about
//! 3x faster than its graph-optimised FP32 file.
//!
//! Models with only `MatMul` / `Gemm` weights keep the dynamic rewrite. On the zoo's
//! text encoder, static QDQ of its projections ([`MatMulMode::Always`]) and dynamic INT8
//! measured the same: top-1 agreement 0.984-0.988 both (2048 held-out rows), latency
//! within 2-7% of each other (1.75 vs 1.78 ms a row, one thread); dynamic needs no
//! calibration set. Only `Conv` nodes start quantised regions, and `Add`s and pools join
//! one only when all their inputs are already quantised: quantising the encoder's residual
//! and attention-mask `Add`s as well (a range of 10^4 in 8 bits) cost it 0.77.

use std::collections::{BTreeMap, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::graph::{self, NameGen};
use crate::proto::{
    type_proto, GraphProto, ModelProto, NodeProto, TensorProto, TypeProto, ValueInfoProto,
};
use crate::tensor::{self, FLOAT};
use crate::{OnnxError, OnnxModel};

/// The largest magnitude of a 7-bit ("reduced range") weight: `2 * 255 * 63 < i16::MAX`,
/// so ONNX Runtime's AVX2 u8 x s8 kernels cannot saturate.
pub const REDUCED_WEIGHT_QMAX: i8 = 63;

/// The lowest default-domain opset with per-axis `QuantizeLinear` / `DequantizeLinear`.
pub const MIN_QDQ_OPSET: i64 = 13;

/// The observed range of a float tensor over a calibration set.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TensorRange {
    pub min: f32,
    pub max: f32,
}

impl TensorRange {
    /// An empty range that [`TensorRange::observe`] widens.
    pub fn empty() -> TensorRange {
        TensorRange {
            min: f32::INFINITY,
            max: f32::NEG_INFINITY,
        }
    }

    pub fn new(min: f32, max: f32) -> TensorRange {
        TensorRange { min, max }
    }

    /// Widens the range to hold `values` (NaNs and infinities are ignored).
    pub fn observe(&mut self, values: &[f32]) {
        for &v in values {
            if !v.is_finite() {
                continue;
            }
            if v < self.min {
                self.min = v;
            }
            if v > self.max {
                self.max = v;
            }
        }
    }

    /// Finite and `min <= max`.
    pub fn is_valid(&self) -> bool {
        self.min.is_finite() && self.max.is_finite() && self.min <= self.max
    }

    /// `(scale, zero_point)` of the uint8 quantisation of this range, widened to contain
    /// 0 (so that 0 is exact, as padding and Relu need). A range of width 0 gets scale 1.
    pub fn uint8_params(&self) -> (f32, u8) {
        let lo = self.min.min(0.0);
        let hi = self.max.max(0.0);
        let width = hi - lo;
        if width.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) || !width.is_finite() {
            return (1.0, 0);
        }
        let scale = (width / 255.0).max(f32::MIN_POSITIVE);
        let zp = (-lo / scale).round().clamp(0.0, 255.0) as u8;
        (scale, zp)
    }
}

/// Calibrated ranges by tensor name.
pub type Ranges = BTreeMap<String, TensorRange>;

/// Options of [`plan_static_int8`] and [`quantize_static_int8`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct StaticQuantizeOptions {
    /// 7-bit weights (`|w_q| <= 63`): exact on ONNX Runtime's AVX2 kernels as on VNNI
    /// ones (see the module docs). Default true.
    pub reduce_range: bool,
    /// One weight scale per output channel instead of one per tensor. Default true.
    pub per_channel: bool,
    /// Which `MatMul` / `Gemm` nodes (with constant weights) to quantise.
    pub matmul: MatMulMode,
    /// Names of nodes to leave float.
    pub exclude_nodes: Vec<String>,
}

impl Default for StaticQuantizeOptions {
    fn default() -> Self {
        StaticQuantizeOptions {
            reduce_range: true,
            per_channel: true,
            matmul: MatMulMode::InQuantizedRegion,
            exclude_nodes: Vec::new(),
        }
    }
}

impl StaticQuantizeOptions {
    fn weight_qmax(&self) -> f32 {
        if self.reduce_range {
            f32::from(REDUCED_WEIGHT_QMAX)
        } else {
            127.0
        }
    }
}

/// Which `MatMul` / `Gemm` nodes [`quantize_static_int8`] quantises.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MatMulMode {
    /// None.
    Off,
    /// Those whose input is already quantised, e.g. a CNN's classifier after the pooled
    /// features (default). The others are left float, for dynamic quantisation
    /// ([`crate::quantize_dynamic_int8`]), which needs no calibration and measured as
    /// accurate and as fast on the zoo's text encoder (see the module docs).
    #[default]
    InQuantizedRegion,
    /// All, their float inputs quantised from calibrated ranges (`Add`s still join only
    /// quantised regions).
    Always,
}

/// What [`plan_static_int8`] found: what would be quantised and which activation ranges
/// that needs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StaticPlan {
    /// The tensors that get a `QuantizeLinear` from a calibrated range, in graph order.
    /// All of them are values of the *original* model (graph inputs or node outputs), so
    /// calibration can run on it (see [`add_graph_outputs`]).
    pub tensors: Vec<String>,
    /// Nodes that would be quantised, by op type (`"Conv"`, `"Gemm"`, `"Add"`, ...).
    pub nodes: BTreeMap<String, usize>,
    /// Candidate nodes left float, each as `"<node> (<op>): <why>"`, or why nothing applies.
    pub skipped: Vec<String>,
}

impl StaticPlan {
    /// Quantised nodes with weights (`Conv`, `MatMul`, `Gemm`).
    pub fn weighted_nodes(&self) -> usize {
        ["Conv", "MatMul", "Gemm"]
            .iter()
            .filter_map(|k| self.nodes.get(*k))
            .sum()
    }
}

/// What [`quantize_static_int8`] did.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StaticQuantizeReport {
    /// Nodes now between `DequantizeLinear` and `QuantizeLinear` nodes, by op type.
    pub nodes: BTreeMap<String, usize>,
    /// `BatchNormalization` nodes folded into the preceding `Conv`.
    pub folded_batch_norms: usize,
    /// `Relu` nodes replaced by the saturation of the preceding `QuantizeLinear`.
    pub fused_relus: usize,
    /// Activation tensors with a `QuantizeLinear`.
    pub quantized_tensors: usize,
    /// Candidate nodes left float, each as `"<node> (<op>): <why>"`.
    pub skipped: Vec<String>,
    /// Bytes of the float32 weights and biases that were quantised.
    pub original_weight_bytes: u64,
    /// Bytes of what replaces them (int8 weights, int32 biases, scales, zero points).
    pub quantized_weight_bytes: u64,
    /// The largest `|w_q|` of any quantised weight (at most 63 with `reduce_range`).
    pub max_abs_weight: u8,
}

impl StaticQuantizeReport {
    /// Quantised nodes with weights (`Conv`, `MatMul`, `Gemm`).
    pub fn weighted_nodes(&self) -> usize {
        ["Conv", "MatMul", "Gemm"]
            .iter()
            .filter_map(|k| self.nodes.get(*k))
            .sum()
    }
}

/// Which tensors [`quantize_static_int8`] needs calibrated ranges for, and what it would
/// quantise. Nothing to quantise is not an error: the plan is then empty and says why in
/// `skipped`.
pub fn plan_static_int8(
    model: &OnnxModel,
    opts: &StaticQuantizeOptions,
) -> Result<StaticPlan, OnnxError> {
    let p = Planner::run(model, opts)?;
    Ok(StaticPlan {
        tensors: p.needs_range.clone(),
        nodes: p.node_counts(),
        skipped: p.skipped.clone(),
    })
}

/// Static INT8 quantisation in QDQ format (see the module docs). `ranges` must hold a
/// valid range for every tensor of [`plan_static_int8`]'s `tensors` (extra entries are
/// ignored); a missing or non-finite one is an error naming the tensor.
pub fn quantize_static_int8(
    model: &OnnxModel,
    ranges: &Ranges,
    opts: &StaticQuantizeOptions,
) -> Result<(OnnxModel, StaticQuantizeReport), OnnxError> {
    let plan = Planner::run(model, opts)?;
    for name in &plan.needs_range {
        match ranges.get(name) {
            None => {
                return Err(OnnxError::Invalid(format!(
                    "no calibrated range for tensor {name:?}"
                )))
            }
            Some(r) if !r.is_valid() => {
                return Err(OnnxError::Invalid(format!(
                    "the calibrated range of tensor {name:?} is not finite: [{}, {}]",
                    r.min, r.max
                )))
            }
            Some(_) => {}
        }
    }
    Emitter::run(plan, ranges, opts)
}

/// Adds the named values as graph outputs (float32, shape left to inference), for a
/// calibration run. Returns the model and, for each name, the output that carries it: the
/// name itself for node outputs and existing graph outputs, the output of a new
/// `Identity` node for graph inputs. Unknown names and initializers are errors.
pub fn add_graph_outputs(
    model: &OnnxModel,
    names: &[String],
) -> Result<(OnnxModel, Vec<String>), OnnxError> {
    let mut proto = model.proto().clone();
    let Some(g) = proto.graph.as_mut() else {
        return Err(OnnxError::MissingGraph);
    };
    let produced: HashSet<String> = g
        .node
        .iter()
        .flat_map(|n| n.output.iter().filter(|o| !o.is_empty()).cloned())
        .collect();
    let inits: HashSet<String> = g.initializer.iter().map(|t| t.name().to_string()).collect();
    let inputs: HashSet<String> = g
        .input
        .iter()
        .map(|v| v.name().to_string())
        .filter(|n| !inits.contains(n))
        .collect();
    let mut outputs: HashSet<String> = g.output.iter().map(|v| v.name().to_string()).collect();
    let mut names_gen = NameGen::new(g);
    let mut carried = Vec::with_capacity(names.len());
    for name in names {
        if outputs.contains(name) {
            carried.push(name.clone());
        } else if produced.contains(name) {
            g.output.push(float_value_info(name));
            outputs.insert(name.clone());
            carried.push(name.clone());
        } else if inputs.contains(name) {
            let out = names_gen.fresh(&format!("{name}_calibration"));
            let node_name = names_gen.fresh(&format!("{name}_calibration_identity"));
            g.node.push(graph::node(
                "Identity",
                "",
                node_name,
                vec![name.clone()],
                vec![out.clone()],
                vec![],
            ));
            g.output.push(float_value_info(&out));
            outputs.insert(out.clone());
            carried.push(out);
        } else if inits.contains(name) {
            return Err(OnnxError::Invalid(format!(
                "{name:?} is an initializer, not an activation"
            )));
        } else {
            return Err(OnnxError::Invalid(format!(
                "the graph has no value named {name:?}"
            )));
        }
    }
    Ok((OnnxModel::from_proto(proto)?, carried))
}

fn float_value_info(name: &str) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(FLOAT),
                shape: None,
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

// ---------------------------------------------------------------------------
// Planning

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Conv,
    MatMul,
    Gemm,
    /// Two quantised activations in, one out (`Add`).
    Binary,
    /// One quantised activation in, one out, new range (`GlobalAveragePool`, `AveragePool`).
    Unary,
    /// Data movement on the uint8 values: the output shares the input's parameters.
    Pass,
}

#[derive(Debug, Clone)]
struct Target {
    kind: Kind,
    /// Input slots quantised as uint8 activations.
    acts: Vec<usize>,
    /// The weight input (slot 1) and its channel axis.
    weight_axis: Option<usize>,
    /// Whether input 2 is a bias to quantise to int32.
    bias: bool,
    /// Whether the output gets a QuantizeLinear.
    quant_out: bool,
    /// The Relu (node index) whose work the output's QuantizeLinear takes over.
    relu: Option<usize>,
    /// The value the quantised output stands for (the Relu's output when fused).
    out: String,
}

struct Planner {
    proto: ModelProto,
    targets: BTreeMap<usize, Target>,
    removed: HashSet<usize>,
    needs_range: Vec<String>,
    /// Pass-node outputs -> the tensor whose parameters they share.
    shared: HashMap<String, String>,
    skipped: Vec<String>,
    folded: usize,
    /// Float initializers that may be unused after the rewrite.
    replaced_inits: HashSet<String>,
}

/// Read-only indexes of a graph.
struct Index {
    /// initializer name -> index, only those not overridable by a graph input.
    constants: HashMap<String, usize>,
    /// value -> main-graph nodes reading it (one entry per reading slot)
    readers: HashMap<String, Vec<usize>>,
    /// values read by subgraphs or listed as graph outputs
    pinned: HashSet<String>,
    graph_outputs: HashSet<String>,
    float: HashSet<String>,
}

impl Index {
    fn new(g: &GraphProto) -> Index {
        let graph_inputs: HashSet<&str> = g.input.iter().map(|v| v.name()).collect();
        let mut constants = HashMap::new();
        for (i, t) in g.initializer.iter().enumerate() {
            if !graph_inputs.contains(t.name()) {
                constants.entry(t.name().to_string()).or_insert(i);
            }
        }
        let mut readers: HashMap<String, Vec<usize>> = HashMap::new();
        let mut pinned: HashSet<String> = HashSet::new();
        for (i, n) in g.node.iter().enumerate() {
            for name in n.input.iter().filter(|s| !s.is_empty()) {
                readers.entry(name.clone()).or_default().push(i);
            }
            pinned.extend(graph::names_read_by_subgraphs(n));
        }
        let graph_outputs: HashSet<String> =
            g.output.iter().map(|o| o.name().to_string()).collect();
        pinned.extend(graph_outputs.iter().cloned());
        Index {
            constants,
            readers,
            pinned,
            graph_outputs,
            float: float_values(g),
        }
    }

    fn constant<'g>(&self, g: &'g GraphProto, name: &str) -> Option<&'g TensorProto> {
        self.constants.get(name).and_then(|&i| g.initializer.get(i))
    }

    fn float_constant<'g>(&self, g: &'g GraphProto, name: &str) -> Result<&'g TensorProto, String> {
        let t = self
            .constant(g, name)
            .ok_or_else(|| format!("{name:?} is not a constant initializer"))?;
        if t.data_type() != FLOAT {
            return Err(format!(
                "{name:?} has element type {:?}, not float32",
                crate::ElemType::from_code(t.data_type())
            ));
        }
        Ok(t)
    }

    fn readers(&self, name: &str) -> &[usize] {
        self.readers.get(name).map_or(&[], Vec::as_slice)
    }

    /// The only reader of `name` is node `i` (once), and nothing else sees it.
    fn read_only_by(&self, name: &str, i: usize) -> bool {
        self.readers(name) == [i] && !self.pinned.contains(name)
    }
}

/// Values known to be float32: typed so in the graph, or computed from float32 values by
/// ops that keep the element type.
fn float_values(g: &GraphProto) -> HashSet<String> {
    let mut float = HashSet::new();
    for t in &g.initializer {
        if t.data_type() == FLOAT {
            float.insert(t.name().to_string());
        }
    }
    for vi in g.input.iter().chain(&g.value_info).chain(&g.output) {
        if let Some(type_proto::Value::TensorType(t)) =
            vi.r#type.as_ref().and_then(|t| t.value.as_ref())
        {
            if t.elem_type() == FLOAT {
                float.insert(vi.name().to_string());
            }
        }
    }
    for n in &g.node {
        if !graph::is_default_domain(n) {
            continue;
        }
        let keeps_type = matches!(
            n.op_type(),
            "Relu"
                | "LeakyRelu"
                | "Sigmoid"
                | "Tanh"
                | "Clip"
                | "Add"
                | "Sub"
                | "Mul"
                | "Div"
                | "Conv"
                | "ConvTranspose"
                | "BatchNormalization"
                | "MatMul"
                | "Gemm"
                | "GlobalAveragePool"
                | "AveragePool"
                | "MaxPool"
                | "GlobalMaxPool"
                | "Flatten"
                | "Reshape"
                | "Transpose"
                | "Squeeze"
                | "Unsqueeze"
                | "Identity"
                | "Softmax"
                | "LayerNormalization"
                | "Dropout"
                | "Pad"
                | "Resize"
                | "Erf"
                | "Sqrt"
                | "Pow"
                | "ReduceMean"
                | "Gather"
                | "Slice"
                | "Split"
                | "Concat"
        );
        let input_float = n.input.first().is_some_and(|i| float.contains(i));
        if keeps_type && input_float {
            match n.op_type() {
                // Only the first output has the input's type.
                "MaxPool" | "Dropout" | "LayerNormalization" | "BatchNormalization" => {
                    if let Some(o) = n.output.first() {
                        float.insert(o.clone());
                    }
                }
                _ => float.extend(n.output.iter().filter(|o| !o.is_empty()).cloned()),
            }
        } else if n.op_type() == "Cast"
            && graph::attr(n, "to").and_then(|a| a.i) == Some(i64::from(FLOAT))
        {
            float.extend(n.output.first().cloned());
        }
    }
    float
}

fn default_opset(proto: &ModelProto) -> Option<i64> {
    proto
        .opset_import
        .iter()
        .find(|o| matches!(o.domain(), "" | "ai.onnx"))
        .map(|o| o.version())
}

impl Planner {
    fn run(model: &OnnxModel, opts: &StaticQuantizeOptions) -> Result<Planner, OnnxError> {
        let proto = model.proto().clone();
        if proto.graph.is_none() {
            return Err(OnnxError::MissingGraph);
        }
        let mut p = Planner {
            proto,
            targets: BTreeMap::new(),
            removed: HashSet::new(),
            needs_range: Vec::new(),
            shared: HashMap::new(),
            skipped: Vec::new(),
            folded: 0,
            replaced_inits: HashSet::new(),
        };
        match default_opset(&p.proto) {
            Some(v) if v >= MIN_QDQ_OPSET => {}
            Some(v) => {
                p.skipped.push(format!(
                    "the model imports ONNX opset {v}; per-channel QDQ needs opset {MIN_QDQ_OPSET} or later"
                ));
                return Ok(p);
            }
            None => {
                p.skipped
                    .push("the model imports no default-domain ONNX opset".to_string());
                return Ok(p);
            }
        }
        p.fold_batch_norms();
        p.choose(opts);
        Ok(p)
    }

    fn graph(&self) -> &GraphProto {
        // `run` checked that there is a graph.
        static EMPTY: std::sync::OnceLock<GraphProto> = std::sync::OnceLock::new();
        self.proto
            .graph
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(GraphProto::default))
    }

    fn node_counts(&self) -> BTreeMap<String, usize> {
        let g = self.graph();
        let mut counts = BTreeMap::new();
        for &i in self.targets.keys() {
            if let Some(n) = g.node.get(i) {
                *counts.entry(n.op_type().to_string()).or_insert(0) += 1;
            }
        }
        counts
    }

    /// Whether each node's output gets a QuantizeLinear (Conv, Add, pools always;
    /// MatMul/Gemm when a quantised node reads it), with the lone Relu after it folded in.
    fn decide_outputs(
        &self,
        idx: &Index,
        primary: &BTreeMap<usize, Target>,
        opts: &StaticQuantizeOptions,
    ) -> (BTreeMap<usize, Target>, HashSet<usize>) {
        let g = self.graph();
        let mut decided = BTreeMap::new();
        let mut removed = HashSet::new();
        for (&i, t) in primary {
            let n = &g.node[i];
            let own = n.output[0].clone();
            let relu = match idx.readers(&own) {
                [r] if idx.read_only_by(&own, *r) => {
                    let rn = &g.node[*r];
                    (graph::is_default_domain(rn)
                        && rn.op_type() == "Relu"
                        && rn.output.len() == 1
                        && !rn.output[0].is_empty()
                        && !opts.exclude_nodes.iter().any(|e| e == rn.name()))
                    .then_some(*r)
                }
                _ => None,
            };
            let after = relu.map_or_else(|| own.clone(), |r| g.node[r].output[0].clone());
            let quant_out = match t.kind {
                Kind::MatMul | Kind::Gemm => {
                    !idx.graph_outputs.contains(&after)
                        && idx.readers(&after).iter().any(|r| primary.contains_key(r))
                }
                _ => true,
            };
            let relu = relu.filter(|_| quant_out);
            if let Some(r) = relu {
                removed.insert(r);
            }
            let mut t = t.clone();
            t.quant_out = quant_out;
            t.relu = relu;
            t.out = if relu.is_some() { after } else { own };
            decided.insert(i, t);
        }
        (decided, removed)
    }

    /// Folds `Conv -> BatchNormalization` pairs into the Conv (new weight and bias); the
    /// Conv then produces the BatchNormalization's output, so every value that remains
    /// keeps its name and its value.
    fn fold_batch_norms(&mut self) {
        let Some(g) = self.proto.graph.as_mut() else {
            return;
        };
        let idx = Index::new(g);
        let mut producer: HashMap<String, usize> = HashMap::new();
        for (i, n) in g.node.iter().enumerate() {
            for o in n.output.iter().filter(|o| !o.is_empty()) {
                producer.insert(o.clone(), i);
            }
        }
        let mut names = NameGen::new(g);
        let mut folds: Vec<(usize, usize, TensorProto, TensorProto)> = Vec::new();
        for (b, n) in g.node.iter().enumerate() {
            if !(graph::is_default_domain(n) && n.op_type() == "BatchNormalization") {
                continue;
            }
            let Some(&c) = n.input.first().and_then(|x| producer.get(x)) else {
                continue;
            };
            let conv = &g.node[c];
            if !(graph::is_default_domain(conv) && conv.op_type() == "Conv")
                || conv.output.len() != 1
                || !idx.read_only_by(&n.input[0], b)
            {
                continue;
            }
            if let Ok((w, bias)) = fold_one(g, &idx, conv, n, &mut names) {
                folds.push((c, b, w, bias));
            }
        }
        let mut removed = HashSet::new();
        for (c, b, w, bias) in folds {
            let (out, old) = {
                let bn = &g.node[b];
                let conv = &g.node[c];
                (
                    bn.output[0].clone(),
                    conv.input.iter().skip(1).cloned().collect::<Vec<_>>(),
                )
            };
            self.replaced_inits.extend(old);
            for name in [
                &g.node[b].input[1],
                &g.node[b].input[2],
                &g.node[b].input[3],
                &g.node[b].input[4],
            ] {
                self.replaced_inits.insert(name.clone());
            }
            let conv = &mut g.node[c];
            conv.input.truncate(1);
            conv.input.push(w.name().to_string());
            conv.input.push(bias.name().to_string());
            conv.output[0] = out;
            g.initializer.push(w);
            g.initializer.push(bias);
            removed.insert(b);
            self.folded += 1;
        }
        if !removed.is_empty() {
            let nodes = std::mem::take(&mut g.node);
            g.node = nodes
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !removed.contains(i))
                .map(|(_, n)| n)
                .collect();
        }
    }

    /// Chooses the nodes to quantise and the tensors that need ranges.
    fn choose(&mut self, opts: &StaticQuantizeOptions) {
        let g = self.graph();
        let idx = Index::new(g);
        // 1. Nodes with their own quantised kernels.
        let mut primary: BTreeMap<usize, Target> = BTreeMap::new();
        let mut skipped = Vec::new();
        for (i, n) in g.node.iter().enumerate() {
            if !graph::is_default_domain(n) {
                continue;
            }
            let kind = match n.op_type() {
                "Conv" => Kind::Conv,
                "MatMul" | "Gemm" if opts.matmul == MatMulMode::Off => continue,
                "MatMul" => Kind::MatMul,
                "Gemm" => Kind::Gemm,
                "Add" => Kind::Binary,
                "GlobalAveragePool" | "AveragePool" => Kind::Unary,
                _ => continue,
            };
            let checked = if opts.exclude_nodes.iter().any(|e| e == n.name()) {
                Err("excluded by options".to_string())
            } else {
                check_node(g, &idx, n, kind)
            };
            match checked {
                Ok(t) => {
                    primary.insert(i, t);
                }
                // Adds and pools of other types (shape arithmetic, int tensors) are not
                // candidates worth a line.
                Err(_) if matches!(kind, Kind::Binary | Kind::Unary) => {}
                Err(why) => skipped.push(format!(
                    "{} ({}): {why}",
                    graph::node_label(n, i),
                    n.op_type()
                )),
            }
        }
        // 2. Conv nodes start quantised regions (their float input gets a QuantizeLinear);
        //    the other kinds join one only where all their activation inputs are already
        //    quantised, so that no float Add (an attention mask, a bias) or float MatMul
        //    input is squeezed into 8 bits. Dropping a node can change what its producers
        //    decide (a MatMul's output is quantised only for quantised readers): repeat
        //    until nothing more is dropped.
        let starts_region = |kind: Kind| {
            kind == Kind::Conv
                || (opts.matmul == MatMulMode::Always && matches!(kind, Kind::MatMul | Kind::Gemm))
        };
        loop {
            let (decided, removed) = self.decide_outputs(&idx, &primary, opts);
            let mut quantized: HashSet<String> = HashSet::new();
            let mut targets = BTreeMap::new();
            let mut needs_range = Vec::new();
            let mut shared = HashMap::new();
            let mut dropped = Vec::new();
            let g = self.graph();
            for (i, n) in g.node.iter().enumerate() {
                if let Some(t) = decided.get(&i) {
                    let joins = starts_region(t.kind)
                        || t.acts
                            .iter()
                            .all(|&slot| quantized.contains(&n.input[slot]));
                    if !joins {
                        dropped.push(i);
                        continue;
                    }
                    for &slot in &t.acts {
                        let x = &n.input[slot];
                        if quantized.insert(x.clone()) {
                            needs_range.push(x.clone());
                        }
                    }
                    if t.quant_out && quantized.insert(t.out.clone()) {
                        needs_range.push(t.out.clone());
                    }
                    targets.insert(i, t.clone());
                    continue;
                }
                let pass = graph::is_default_domain(n)
                    && matches!(
                        n.op_type(),
                        "MaxPool" | "Flatten" | "Reshape" | "Transpose" | "Squeeze" | "Unsqueeze"
                    )
                    && n.output.len() == 1
                    && !n.output[0].is_empty()
                    && n.input.first().is_some_and(|x| quantized.contains(x))
                    && !opts.exclude_nodes.iter().any(|e| e == n.name());
                if pass && quantized.insert(n.output[0].clone()) {
                    shared.insert(n.output[0].clone(), n.input[0].clone());
                    targets.insert(
                        i,
                        Target {
                            kind: Kind::Pass,
                            acts: vec![0],
                            weight_axis: None,
                            bias: false,
                            quant_out: true,
                            relu: None,
                            out: n.output[0].clone(),
                        },
                    );
                }
            }
            if dropped.is_empty() {
                self.targets = targets;
                self.removed = removed;
                self.needs_range = needs_range;
                self.shared = shared;
                break;
            }
            for i in dropped {
                if let Some(t) = primary.remove(&i) {
                    if matches!(t.kind, Kind::MatMul | Kind::Gemm) {
                        let n = &g.node[i];
                        skipped.push(format!(
                            "{} ({}): its input is not quantised (outside the convolutions' integer region)",
                            graph::node_label(n, i),
                            n.op_type()
                        ));
                    }
                }
            }
        }
        self.skipped.extend(skipped);
        if self.targets.is_empty() && self.skipped.is_empty() {
            self.skipped
                .push("the model has no Conv, MatMul or Gemm with constant float32 weights".into());
        }
    }
}

/// Folds BatchNormalization `bn` into `conv`: `(weight, bias)` initializers.
fn fold_one(
    g: &GraphProto,
    idx: &Index,
    conv: &NodeProto,
    bn: &NodeProto,
    names: &mut NameGen,
) -> Result<(TensorProto, TensorProto), String> {
    if bn.input.len() != 5 || bn.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err("training-mode BatchNormalization".into());
    }
    if bn.output.first().is_none_or(String::is_empty) {
        return Err("no output".into());
    }
    if graph::attr_i(bn, "training_mode", 0) != 0 || graph::attr_i(bn, "spatial", 1) != 1 {
        return Err("training mode or non-spatial".into());
    }
    let w = idx.float_constant(g, conv.input.get(1).map_or("", String::as_str))?;
    if w.dims.len() < 3 {
        return Err("weight rank < 3".into());
    }
    let m = usize::try_from(w.dims[0]).map_err(|_| "bad dims".to_string())?;
    let wv = tensor::float_values(w)?;
    let params: Vec<Vec<f32>> = bn.input[1..5]
        .iter()
        .map(|name| {
            let t = idx.float_constant(g, name)?;
            let v = tensor::float_values(t)?;
            if v.len() != m {
                return Err(format!("{name:?} has {} values for {m} channels", v.len()));
            }
            Ok(v)
        })
        .collect::<Result<_, String>>()?;
    let bias = match conv.input.get(2).filter(|b| !b.is_empty()) {
        Some(b) => {
            let v = tensor::float_values(idx.float_constant(g, b)?)?;
            if v.len() != m {
                return Err("bias length".into());
            }
            v
        }
        None => vec![0.0; m],
    };
    let eps = f64::from(graph::attr_f(bn, "epsilon", 1e-5));
    let (gamma, beta, mean, var) = (&params[0], &params[1], &params[2], &params[3]);
    let inner = wv.len() / m.max(1);
    let mut new_w = wv;
    let mut new_b = vec![0f32; m];
    for c in 0..m {
        let s = f64::from(gamma[c]) / (f64::from(var[c]) + eps).sqrt();
        if !s.is_finite() {
            return Err("non-finite BatchNormalization scale".into());
        }
        for v in &mut new_w[c * inner..(c + 1) * inner] {
            *v = (f64::from(*v) * s) as f32;
        }
        new_b[c] = ((f64::from(bias[c]) - f64::from(mean[c])) * s + f64::from(beta[c])) as f32;
    }
    let base = if conv.name().is_empty() {
        "conv"
    } else {
        conv.name()
    };
    Ok((
        tensor::tensor_f32(
            names.fresh(&format!("{base}.weight_bn_folded")),
            w.dims.clone(),
            &new_w,
        ),
        tensor::tensor_f32(
            names.fresh(&format!("{base}.bias_bn_folded")),
            vec![w.dims[0]],
            &new_b,
        ),
    ))
}

/// Whether node `n` can be quantised as `kind`, and how.
fn check_node(g: &GraphProto, idx: &Index, n: &NodeProto, kind: Kind) -> Result<Target, String> {
    if n.output.len() != 1 || n.output[0].is_empty() {
        return Err("expected one output".into());
    }
    let activation = |slot: usize| -> Result<(), String> {
        let name = n.input.get(slot).map_or("", String::as_str);
        if name.is_empty() {
            return Err(format!("input {slot} is missing"));
        }
        if idx.constants.contains_key(name) {
            return Err(format!(
                "input {slot} ({name:?}) is a constant, not an activation"
            ));
        }
        Ok(())
    };
    let target = |acts: Vec<usize>, weight_axis: Option<usize>, bias: bool| Target {
        kind,
        acts,
        weight_axis,
        bias,
        quant_out: true,
        relu: None,
        out: n.output[0].clone(),
    };
    let finite_weight = |t: &TensorProto| -> Result<(), String> {
        let v = tensor::float_values(t)?;
        if v.iter().any(|x| !x.is_finite()) {
            return Err(format!("weight {:?} has NaN or infinite values", t.name()));
        }
        Ok(())
    };
    match kind {
        Kind::Conv => {
            activation(0)?;
            let w = idx.float_constant(g, n.input.get(1).map_or("", String::as_str))?;
            if w.dims.len() < 3 {
                return Err(format!("weight has rank {}, not 3 or more", w.dims.len()));
            }
            tensor::numel(&w.dims).ok_or("weight has invalid dims")?;
            finite_weight(w)?;
            let bias = match n.input.get(2).filter(|b| !b.is_empty()) {
                Some(b) => {
                    let t = idx.float_constant(g, b).map_err(|e| format!("bias: {e}"))?;
                    if t.dims != [w.dims[0]] {
                        return Err(format!("bias has shape {:?}, not [{}]", t.dims, w.dims[0]));
                    }
                    finite_weight(t)?;
                    true
                }
                None => false,
            };
            Ok(target(vec![0], Some(0), bias))
        }
        Kind::MatMul => {
            if n.input.len() != 2 {
                return Err("expected 2 inputs".into());
            }
            activation(0)?;
            let w = idx.float_constant(g, &n.input[1])?;
            if w.dims.len() != 2 {
                return Err(format!("weight has rank {}, not 2", w.dims.len()));
            }
            finite_weight(w)?;
            Ok(target(vec![0], Some(1), false))
        }
        Kind::Gemm => {
            if !(2..=3).contains(&n.input.len()) {
                return Err("expected 2 or 3 inputs".into());
            }
            activation(0)?;
            if graph::attr_i(n, "transA", 0) != 0 {
                return Err("transA=1 is not supported".into());
            }
            let alpha = graph::attr_f(n, "alpha", 1.0);
            let beta = graph::attr_f(n, "beta", 1.0);
            if alpha != 1.0 {
                return Err(format!("alpha={alpha} (only 1.0 is supported)"));
            }
            let w = idx.float_constant(g, &n.input[1])?;
            if w.dims.len() != 2 {
                return Err(format!("weight has rank {}, not 2", w.dims.len()));
            }
            finite_weight(w)?;
            let axis = if graph::attr_i(n, "transB", 0) != 0 {
                0
            } else {
                1
            };
            let bias = match n.input.get(2).filter(|c| !c.is_empty()) {
                Some(c) => {
                    if beta != 1.0 {
                        return Err(format!("beta={beta} (only 1.0 is supported)"));
                    }
                    let t = idx.float_constant(g, c).map_err(|e| format!("C: {e}"))?;
                    if t.dims != [w.dims[axis]] {
                        return Err(format!("C has shape {:?}, not [{}]", t.dims, w.dims[axis]));
                    }
                    finite_weight(t)?;
                    true
                }
                None => false,
            };
            Ok(target(vec![0], Some(axis), bias))
        }
        Kind::Binary => {
            if n.input.len() != 2 {
                return Err("expected 2 inputs".into());
            }
            activation(0)?;
            activation(1)?;
            if !(idx.float.contains(&n.input[0]) && idx.float.contains(&n.input[1])) {
                return Err("inputs not known to be float32".into());
            }
            Ok(target(vec![0, 1], None, false))
        }
        Kind::Unary => {
            activation(0)?;
            if !idx.float.contains(&n.input[0]) {
                return Err("input not known to be float32".into());
            }
            Ok(target(vec![0], None, false))
        }
        Kind::Pass => Err("not a primary kind".into()),
    }
}

// ---------------------------------------------------------------------------
// Rewriting

/// The uint8 version of a float tensor.
#[derive(Clone)]
struct QParams {
    quantized: String,
    scale: String,
    zero_point: String,
    scale_value: f32,
}

/// A quantised weight's initializers.
#[derive(Clone)]
struct QWeight {
    data: String,
    scale: String,
    zero_point: String,
    scales: Vec<f32>,
    axis: usize,
}

struct Emitter<'r> {
    ranges: &'r Ranges,
    opts: StaticQuantizeOptions,
    names: NameGen,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    qparams: HashMap<String, QParams>,
    weights: HashMap<(String, usize, Vec<u32>), QWeight>,
    /// Names of the Q/DQ nodes this rewrite adds (pruned when unused).
    created: HashSet<String>,
    report: StaticQuantizeReport,
    counted_sources: HashSet<String>,
}

impl<'r> Emitter<'r> {
    fn run(
        plan: Planner,
        ranges: &'r Ranges,
        opts: &StaticQuantizeOptions,
    ) -> Result<(OnnxModel, StaticQuantizeReport), OnnxError> {
        let Planner {
            mut proto,
            targets,
            removed,
            shared,
            skipped,
            folded,
            mut replaced_inits,
            ..
        } = plan;
        let Some(g) = proto.graph.as_mut() else {
            return Err(OnnxError::MissingGraph);
        };
        let idx = Index::new(g);
        let mut e = Emitter {
            ranges,
            opts: opts.clone(),
            names: NameGen::new(g),
            nodes: Vec::with_capacity(g.node.len() * 3),
            inits: Vec::new(),
            qparams: HashMap::new(),
            weights: HashMap::new(),
            created: HashSet::new(),
            report: StaticQuantizeReport {
                folded_batch_norms: folded,
                fused_relus: removed.len(),
                skipped,
                ..Default::default()
            },
            counted_sources: HashSet::new(),
        };
        let old_nodes = std::mem::take(&mut g.node);
        for (i, n) in old_nodes.into_iter().enumerate() {
            if removed.contains(&i) {
                continue;
            }
            let Some(t) = targets.get(&i) else {
                e.nodes.push(n);
                continue;
            };
            let op = n.op_type().to_string();
            let replaced = e.target(g, &idx, n, t, &shared)?;
            replaced_inits.extend(replaced);
            *e.report.nodes.entry(op).or_insert(0) += 1;
        }
        e.prune(g);
        g.node = std::mem::take(&mut e.nodes);
        g.initializer.append(&mut e.inits);

        // Drop float weights nothing reads any more, and value infos of values that are gone.
        let referenced = graph::referenced_names(g);
        g.initializer
            .retain(|t| !replaced_inits.contains(t.name()) || referenced.contains(t.name()));
        let produced: HashSet<String> = g
            .node
            .iter()
            .flat_map(|n| n.output.iter().cloned())
            .chain(g.input.iter().map(|v| v.name().to_string()))
            .chain(g.initializer.iter().map(|t| t.name().to_string()))
            .collect();
        g.value_info.retain(|vi| produced.contains(vi.name()));
        e.report.quantized_tensors = e.qparams.len();
        let report = e.report;
        Ok((OnnxModel::from_proto(proto)?, report))
    }

    /// Emits target node `n` with its Q/DQ nodes; returns the float initializers it
    /// replaced.
    fn target(
        &mut self,
        g: &GraphProto,
        idx: &Index,
        mut n: NodeProto,
        t: &Target,
        shared: &HashMap<String, String>,
    ) -> Result<Vec<String>, OnnxError> {
        let mut replaced = Vec::new();
        let first_act = t.acts.first().and_then(|&s| n.input.get(s)).cloned();
        for &slot in &t.acts {
            let x = n.input[slot].clone();
            self.ensure_quantized(&x)?;
            n.input[slot] = self.dequantize(&x);
        }
        let x_scale = first_act
            .and_then(|x| self.qparams.get(&x))
            .map(|q| q.scale_value);
        if let Some(axis) = t.weight_axis {
            let w_name = n.input[1].clone();
            let w = idx
                .float_constant(g, &w_name)
                .map_err(|e| OnnxError::Invalid(format!("weight of {:?}: {e}", n.name())))?;
            let bias = if t.bias {
                let b_name = n.input[2].clone();
                let b = idx
                    .float_constant(g, &b_name)
                    .map_err(|e| OnnxError::Invalid(format!("bias of {:?}: {e}", n.name())))?;
                Some((b_name, tensor::float_values(b).map_err(OnnxError::Invalid)?))
            } else {
                None
            };
            let x_scale = x_scale.ok_or_else(|| {
                OnnxError::Invalid(format!("node {:?}: input has no quantisation", n.name()))
            })?;
            let qw = self.weight(w, axis, x_scale, bias.as_ref().map(|b| b.1.as_slice()))?;
            n.input[1] = self.dequantize_weight(&qw, &w_name);
            replaced.push(w_name);
            if let Some((b_name, values)) = bias {
                n.input[2] = self.bias(&b_name, &values, x_scale, &qw);
                replaced.push(b_name);
            }
        }
        if !t.quant_out {
            self.nodes.push(n);
            return Ok(replaced);
        }
        let pre = self.names.fresh(&format!("{}_prequant", t.out));
        n.output[0] = pre.clone();
        self.nodes.push(n);
        let params = match shared.get(&t.out) {
            Some(src) => {
                let p = self.qparams.get(src).cloned().ok_or_else(|| {
                    OnnxError::Invalid(format!("{src:?} should have been quantised"))
                })?;
                let q = self.names.fresh(&format!("{}_quantized", t.out));
                QParams { quantized: q, ..p }
            }
            None => self.new_params(&t.out)?,
        };
        self.push_q(&pre, &params);
        // The float value under its own name, for readers that stay float and graph
        // outputs (pruned when nothing reads it).
        let dq = self.dq_node(&params, t.out.clone());
        self.nodes.push(dq);
        self.qparams.insert(t.out.clone(), params);
        Ok(replaced)
    }

    /// Activation parameters from the calibrated range of `name`.
    fn new_params(&mut self, name: &str) -> Result<QParams, OnnxError> {
        let r = self.ranges.get(name).ok_or_else(|| {
            OnnxError::Invalid(format!("no calibrated range for tensor {name:?}"))
        })?;
        let (scale, zp) = r.uint8_params();
        let p = QParams {
            quantized: self.names.fresh(&format!("{name}_quantized")),
            scale: self.names.fresh(&format!("{name}_scale")),
            zero_point: self.names.fresh(&format!("{name}_zero_point")),
            scale_value: scale,
        };
        self.inits
            .push(tensor::tensor_f32(p.scale.clone(), vec![], &[scale]));
        self.inits
            .push(tensor::tensor_u8(p.zero_point.clone(), vec![], &[zp]));
        Ok(p)
    }

    /// A QuantizeLinear of the float value `x` (once per value).
    fn ensure_quantized(&mut self, x: &str) -> Result<(), OnnxError> {
        if self.qparams.contains_key(x) {
            return Ok(());
        }
        let p = self.new_params(x)?;
        self.push_q(x, &p);
        self.qparams.insert(x.to_string(), p);
        Ok(())
    }

    fn push_q(&mut self, input: &str, p: &QParams) {
        let name = self.names.fresh(&format!("{}_QuantizeLinear", p.quantized));
        self.created.insert(name.clone());
        self.nodes.push(graph::node(
            "QuantizeLinear",
            "",
            name,
            vec![input.to_string(), p.scale.clone(), p.zero_point.clone()],
            vec![p.quantized.clone()],
            vec![],
        ));
    }

    fn dq_node(&mut self, p: &QParams, out: String) -> NodeProto {
        let name = self.names.fresh(&format!("{out}_DequantizeLinear"));
        self.created.insert(name.clone());
        graph::node(
            "DequantizeLinear",
            "",
            name,
            vec![p.quantized.clone(), p.scale.clone(), p.zero_point.clone()],
            vec![out],
            vec![],
        )
    }

    /// A DequantizeLinear of the quantised `x` for one reader (one per reader, as ONNX
    /// Runtime's node groups require).
    fn dequantize(&mut self, x: &str) -> String {
        let Some(p) = self.qparams.get(x).cloned() else {
            return x.to_string();
        };
        let out = self.names.fresh(&format!("{x}_dequantized"));
        let dq = self.dq_node(&p, out.clone());
        self.nodes.push(dq);
        out
    }

    fn dequantize_weight(&mut self, qw: &QWeight, w_name: &str) -> String {
        let out = self.names.fresh(&format!("{w_name}_dequantized"));
        let name = self.names.fresh(&format!("{w_name}_DequantizeLinear"));
        self.created.insert(name.clone());
        let mut attrs = Vec::new();
        if qw.scales.len() > 1 {
            attrs.push(graph::int_attr("axis", qw.axis as i64));
        }
        self.nodes.push(graph::node(
            "DequantizeLinear",
            "",
            name,
            vec![qw.data.clone(), qw.scale.clone(), qw.zero_point.clone()],
            vec![out.clone()],
            attrs,
        ));
        out
    }

    /// The int8 weight (cached per weight, axis and scales). With a bias, a channel's scale
    /// is raised when the int32 bias would overflow (weights all but zero after folding a
    /// dead BatchNormalization channel).
    fn weight(
        &mut self,
        w: &TensorProto,
        axis: usize,
        x_scale: f32,
        bias: Option<&[f32]>,
    ) -> Result<QWeight, OnnxError> {
        let name = w.name().to_string();
        let values = tensor::float_values(w).map_err(OnnxError::Invalid)?;
        let dims = w.dims.clone();
        let channels = usize::try_from(dims[axis])
            .map_err(|_| OnnxError::Invalid(format!("weight {name:?} has bad dims")))?;
        let qmax = self.opts.weight_qmax();
        let mut scales = channel_scales(&values, &dims, axis, self.opts.per_channel, qmax);
        if let Some(bias) = bias {
            // |b / (x_scale * w_scale)| <= 2^30 keeps well inside int32.
            let floor = |b: f32| b.abs() / (x_scale * 1_073_741_824.0);
            if scales.len() == 1 {
                let need = bias.iter().fold(0f32, |m, &b| m.max(floor(b)));
                scales[0] = scales[0].max(need);
            } else {
                for (s, &b) in scales.iter_mut().zip(bias) {
                    *s = s.max(floor(b));
                }
            }
        }
        let key = (
            name.clone(),
            axis,
            scales.iter().map(|s| s.to_bits()).collect(),
        );
        if let Some(qw) = self.weights.get(&key) {
            return Ok(qw.clone());
        }
        let data = quantize_with_scales(&values, &dims, axis, &scales, qmax);
        let max_abs = data.iter().map(|v| v.unsigned_abs()).max().unwrap_or(0);
        self.report.max_abs_weight = self.report.max_abs_weight.max(max_abs);
        let qw = QWeight {
            data: self.names.fresh(&format!("{name}_quantized")),
            scale: self.names.fresh(&format!("{name}_scale")),
            zero_point: self.names.fresh(&format!("{name}_zero_point")),
            scales: scales.clone(),
            axis,
        };
        let param_dims = if scales.len() > 1 {
            vec![channels as i64]
        } else {
            vec![]
        };
        let new = [
            tensor::tensor_i8(qw.data.clone(), dims, &data),
            tensor::tensor_f32(qw.scale.clone(), param_dims.clone(), &scales),
            tensor::tensor_i8(qw.zero_point.clone(), param_dims, &vec![0i8; scales.len()]),
        ];
        self.report.quantized_weight_bytes += new.iter().map(tensor::payload_bytes).sum::<u64>();
        if self.counted_sources.insert(name) {
            self.report.original_weight_bytes += 4 * values.len() as u64;
        }
        self.inits.extend(new);
        self.weights.insert(key, qw.clone());
        Ok(qw)
    }

    /// The int32 bias with scale `x_scale * w_scale[c]`, through a DequantizeLinear.
    fn bias(&mut self, b_name: &str, values: &[f32], x_scale: f32, qw: &QWeight) -> String {
        let scales: Vec<f32> = (0..values.len())
            .map(|c| {
                x_scale
                    * qw.scales
                        .get(c)
                        .or(qw.scales.first())
                        .copied()
                        .unwrap_or(1.0)
            })
            .collect();
        let data: Vec<i32> = values
            .iter()
            .zip(&scales)
            .map(|(&b, &s)| {
                (f64::from(b) / f64::from(s))
                    .round()
                    .clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
            })
            .collect();
        let n = values.len() as i64;
        let data_name = self.names.fresh(&format!("{b_name}_quantized"));
        let scale_name = self.names.fresh(&format!("{b_name}_scale"));
        let zp_name = self.names.fresh(&format!("{b_name}_zero_point"));
        let new = [
            tensor::tensor_i32(data_name.clone(), vec![n], &data),
            tensor::tensor_f32(scale_name.clone(), vec![n], &scales),
            tensor::tensor_i32(zp_name.clone(), vec![n], &vec![0; values.len()]),
        ];
        self.report.quantized_weight_bytes += new.iter().map(tensor::payload_bytes).sum::<u64>();
        if self.counted_sources.insert(b_name.to_string()) {
            self.report.original_weight_bytes += 4 * values.len() as u64;
        }
        self.inits.extend(new);
        let out = self.names.fresh(&format!("{b_name}_dequantized"));
        let name = self.names.fresh(&format!("{b_name}_DequantizeLinear"));
        self.created.insert(name.clone());
        self.nodes.push(graph::node(
            "DequantizeLinear",
            "",
            name,
            vec![data_name, scale_name, zp_name],
            vec![out.clone()],
            vec![graph::int_attr("axis", 0)],
        ));
        out
    }

    /// Removes the Q/DQ nodes this rewrite added whose outputs nothing reads.
    fn prune(&mut self, g: &GraphProto) {
        loop {
            let mut read: HashSet<&str> = g.output.iter().map(|o| o.name()).collect();
            for n in &self.nodes {
                read.extend(n.input.iter().map(String::as_str));
            }
            let outer: HashSet<String> = self
                .nodes
                .iter()
                .flat_map(graph::names_read_by_subgraphs)
                .collect();
            let before = self.nodes.len();
            let created = &self.created;
            let keep: Vec<bool> = self
                .nodes
                .iter()
                .map(|n| {
                    !created.contains(n.name())
                        || n.output
                            .iter()
                            .any(|o| read.contains(o.as_str()) || outer.contains(o))
                })
                .collect();
            let mut k = keep.into_iter();
            self.nodes.retain(|_| k.next().unwrap_or(true));
            if self.nodes.len() == before {
                break;
            }
        }
    }
}

/// Per-channel (or per-tensor) symmetric scales: `max|w| / qmax`, 1.0 for an all-zero
/// channel.
fn channel_scales(
    values: &[f32],
    dims: &[i64],
    axis: usize,
    per_channel: bool,
    qmax: f32,
) -> Vec<f32> {
    let scale_of = |m: f32| if m > 0.0 { m / qmax } else { 1.0 };
    if !per_channel {
        return vec![scale_of(values.iter().fold(0f32, |m, v| m.max(v.abs())))];
    }
    let (channels, inner) = axis_layout(dims, axis);
    let mut max_abs = vec![0f32; channels];
    for (i, v) in values.iter().enumerate() {
        let c = (i / inner) % channels;
        max_abs[c] = max_abs[c].max(v.abs());
    }
    max_abs.into_iter().map(scale_of).collect()
}

/// `(size of axis, product of the dims after it)`.
fn axis_layout(dims: &[i64], axis: usize) -> (usize, usize) {
    let d = |x: i64| usize::try_from(x).unwrap_or(0);
    let channels = dims.get(axis).copied().map_or(1, d).max(1);
    let inner = dims
        .iter()
        .skip(axis + 1)
        .map(|&x| d(x))
        .product::<usize>()
        .max(1);
    (channels, inner)
}

/// `round_half_even(w / s)` clamped to `[-qmax, qmax]`.
fn quantize_with_scales(
    values: &[f32],
    dims: &[i64],
    axis: usize,
    scales: &[f32],
    qmax: f32,
) -> Vec<i8> {
    let (channels, inner) = axis_layout(dims, axis);
    values
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = if scales.len() == 1 {
                scales[0]
            } else {
                scales[(i / inner) % channels]
            };
            (v / s).round_ties_even().clamp(-qmax, qmax) as i8
        })
        .collect()
}
