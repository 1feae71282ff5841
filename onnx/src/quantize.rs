//! INT8 dynamic quantisation of MatMul / Gemm weights.
//!
//! Each `MatMul(A, W)` and `Gemm(A, W, C)` whose weight `W` is a float32 rank-2
//! initializer becomes ONNX Runtime's contrib op
//! `com.microsoft.DynamicQuantizeMatMul(A, W_int8, W_scale, W_zero_point, bias?)`:
//! the weight is quantised here, once, to symmetric int8 (zero point 0, per output
//! column by default, as ONNX Runtime's own `quantize_dynamic(per_channel=True,
//! weight_type=QInt8)` lays it out); the activation `A` is quantised to uint8 at run
//! time by the op itself. This is the node ONNX Runtime's optimizer fuses its own
//! `DynamicQuantizeLinear + MatMulInteger + Cast + Mul` pattern into, so the result is
//! the same kernel without the fusion step. It runs on ONNX Runtime's CPU execution
//! provider (the op has CPU kernels only).
//!
//! Weights are 7-bit by default (`|w_q| <= 63`, [`QuantizeOptions::reduce_range`]): the
//! op's u8 x s8 kernel on x86 CPUs with AVX2 but no VNNI adds pairs of products in a
//! saturating int16 (`vpmaddubsw`), and full int8 weights overflow it (`2 * 255 * 127 >
//! 32767`): measured on this crate's fixtures under an AVX2-only CPU model, max abs errors
//! of 0.26-0.30 where a VNNI CPU gives 0.03-0.05. With 7-bit weights every pair sum is
//! at most `2 * 255 * 63 = 32130`, exact on both kernel paths, so an INT8 file's accuracy
//! does not depend on the CPU it runs on (see `scripts/test-avx2.sh`).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::graph::{self, NameGen};
use crate::proto::{GraphProto, NodeProto, OperatorSetIdProto, TensorProto};
use crate::tensor::{self, FLOAT};
use crate::{OnnxError, OnnxModel};

/// The contrib operator domain of ONNX Runtime.
pub const MS_DOMAIN: &str = "com.microsoft";

/// Options of [`quantize_dynamic_int8`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct QuantizeOptions {
    /// Weights with fewer elements stay float (the int8 kernel's overhead is not worth it
    /// and tiny layers are often the accuracy-sensitive ones). Default 256.
    pub min_weight_elements: usize,
    /// One scale per output column (`[N]`) instead of one per tensor. Default true:
    /// clearly more accurate, same size and speed.
    pub per_channel: bool,
    /// Quantise weights to 7 bits ([-63, 63]) so that ONNX Runtime's u8 x s8 kernels
    /// cannot saturate on x86 CPUs without VNNI (see the module docs). Default true;
    /// false gives full 8-bit weights, exact only on CPUs with VNNI (or non-x86).
    pub reduce_range: bool,
    /// Names of nodes to leave as they are.
    pub exclude_nodes: Vec<String>,
}

impl Default for QuantizeOptions {
    fn default() -> Self {
        QuantizeOptions {
            min_weight_elements: 256,
            per_channel: true,
            reduce_range: true,
            exclude_nodes: Vec::new(),
        }
    }
}

/// What [`quantize_dynamic_int8`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuantizeReport {
    /// MatMul / Gemm nodes rewritten to `com.microsoft::DynamicQuantizeMatMul`.
    pub quantized_nodes: usize,
    /// MatMul / Gemm nodes left float, each as `"<node> (<op>): <why>"`.
    pub skipped: Vec<String>,
    /// Bytes of the float32 weights that were quantised (each weight counted once).
    pub original_weight_bytes: u64,
    /// Bytes of what replaces them: int8 weights, float scales and int8 zero points.
    pub quantized_weight_bytes: u64,
}

/// INT8 dynamic quantisation of MatMul / Gemm weights (weights = constant float32
/// initializers of rank 2). See the module docs for the layout.
///
/// * `MatMul(A, W[K,N])` -> `DynamicQuantizeMatMul(A, Wq, scale, zp)`.
/// * `Gemm(A, W, C)` with `transA=0`, `alpha=1`, `beta=1` (or no `C`): `W` is transposed
///   here when `transB=1`; a constant `C` of shape `[N]`, `[1,N]` or a scalar becomes the
///   op's `bias` input (reshaped/broadcast to `[N]`); any other `C` is added by an `Add`
///   node after the op. Other Gemms are skipped with a reason.
/// * Weights below `opts.min_weight_elements`, non-constant weights (graph inputs or
///   computed values), external-data weights, weights with NaN/inf, and nodes listed in
///   `opts.exclude_nodes` are skipped with a reason. Nodes of other domains (e.g.
///   `ai.onnx.ml` classifiers) and of subgraphs are left as they are.
/// * The `com.microsoft` opset (version 1) is imported when needed, and float weights no
///   longer read by any node are removed (that is what makes the file smaller).
pub fn quantize_dynamic_int8(
    model: &OnnxModel,
    opts: &QuantizeOptions,
) -> Result<(OnnxModel, QuantizeReport), OnnxError> {
    let mut proto = model.proto().clone();
    let Some(graph) = proto.graph.as_mut() else {
        return Err(OnnxError::MissingGraph);
    };
    let mut q = Quantizer::new(graph, opts);
    let old_nodes = std::mem::take(&mut graph.node);
    let mut new_nodes = Vec::with_capacity(old_nodes.len());
    for (index, n) in old_nodes.into_iter().enumerate() {
        let candidate = graph::is_default_domain(&n) && matches!(n.op_type(), "MatMul" | "Gemm");
        if !candidate {
            new_nodes.push(n);
            continue;
        }
        let label = graph::node_label(&n, index);
        let result = if opts.exclude_nodes.iter().any(|e| e == n.name()) {
            Err("excluded by options".to_string())
        } else if n.op_type() == "MatMul" {
            q.rewrite_matmul(&n, graph)
        } else {
            q.rewrite_gemm(&n, graph)
        };
        match result {
            Ok(nodes) => {
                q.report.quantized_nodes += 1;
                new_nodes.extend(nodes);
            }
            Err(why) => {
                q.report
                    .skipped
                    .push(format!("{label} ({}): {why}", n.op_type()));
                new_nodes.push(n);
            }
        }
    }
    graph.node = new_nodes;
    graph.initializer.append(&mut q.new_initializers);

    // Drop the float weights that nothing reads any more.
    let referenced = graph::referenced_names(graph);
    let dropped: HashSet<String> = q
        .quantized_sources
        .iter()
        .filter(|name| !referenced.contains(*name))
        .cloned()
        .collect();
    graph.initializer.retain(|t| !dropped.contains(t.name()));
    graph.value_info.retain(|vi| !dropped.contains(vi.name()));

    let report = q.report;
    if report.quantized_nodes > 0 && !proto.opset_import.iter().any(|o| o.domain() == MS_DOMAIN) {
        proto.opset_import.push(OperatorSetIdProto {
            domain: Some(MS_DOMAIN.to_string()),
            version: Some(1),
        });
    }
    Ok((OnnxModel::from_proto(proto)?, report))
}

/// Names of the initializers holding one quantised weight.
#[derive(Clone)]
struct QuantWeight {
    data: String,
    scale: String,
    zero_point: String,
}

struct Quantizer<'o> {
    opts: &'o QuantizeOptions,
    names: NameGen,
    /// initializer name -> index in `graph.initializer`
    inits: HashMap<String, usize>,
    graph_inputs: HashSet<String>,
    /// (weight name, transposed) -> quantised initializers
    cache: HashMap<(String, bool), QuantWeight>,
    /// (bias source name, N) -> `[N]` bias initializer
    bias_cache: HashMap<(String, usize), String>,
    new_initializers: Vec<TensorProto>,
    quantized_sources: HashSet<String>,
    report: QuantizeReport,
}

/// Where a Gemm's C goes.
enum Bias {
    None,
    /// A `[N]` float initializer: the op's bias input.
    Input(String),
    /// Anything else: `Add(matmul_out, C)` after the op.
    Add(String),
}

impl<'o> Quantizer<'o> {
    fn new(graph: &GraphProto, opts: &'o QuantizeOptions) -> Self {
        let mut inits = HashMap::new();
        for (i, t) in graph.initializer.iter().enumerate() {
            inits.entry(t.name().to_string()).or_insert(i);
        }
        Quantizer {
            opts,
            names: NameGen::new(graph),
            inits,
            graph_inputs: graph.input.iter().map(|v| v.name().to_string()).collect(),
            cache: HashMap::new(),
            bias_cache: HashMap::new(),
            new_initializers: Vec::new(),
            quantized_sources: HashSet::new(),
            report: QuantizeReport::default(),
        }
    }

    /// A constant float32 initializer (not overridable by a graph input).
    fn constant<'g>(&self, name: &str, graph: &'g GraphProto) -> Result<&'g TensorProto, String> {
        if name.is_empty() {
            return Err("input is missing".into());
        }
        if self.graph_inputs.contains(name) {
            return Err(format!("{name:?} is a graph input, not a constant"));
        }
        let t = self
            .inits
            .get(name)
            .and_then(|&i| graph.initializer.get(i))
            .ok_or_else(|| format!("{name:?} is not an initializer (not a constant weight)"))?;
        if t.data_type() != FLOAT {
            return Err(format!(
                "{name:?} has element type {:?}, not float32",
                crate::ElemType::from_code(t.data_type())
            ));
        }
        Ok(t)
    }

    /// Checks the weight and returns the quantised version (cached per weight).
    /// `transposed`: the initializer is `[N,K]` and is used as its transpose.
    fn weight(
        &mut self,
        name: &str,
        transposed: bool,
        graph: &GraphProto,
    ) -> Result<(QuantWeight, usize), String> {
        let t = self.constant(name, graph)?;
        if t.dims.len() != 2 {
            return Err(format!("weight {name:?} has rank {}, not 2", t.dims.len()));
        }
        let (rows, cols) = (t.dims[0], t.dims[1]);
        let n_out = if transposed { rows } else { cols };
        let n_out = usize::try_from(n_out).map_err(|_| format!("weight {name:?} has bad dims"))?;
        let numel =
            tensor::numel(&t.dims).ok_or_else(|| format!("weight {name:?} has bad dims"))?;
        if numel < self.opts.min_weight_elements {
            return Err(format!(
                "weight {name:?} has {numel} elements, below min_weight_elements {}",
                self.opts.min_weight_elements
            ));
        }
        if let Some(qw) = self.cache.get(&(name.to_string(), transposed)) {
            return Ok((qw.clone(), n_out));
        }
        let values = tensor::float_values(t)?;
        if values.iter().any(|v| !v.is_finite()) {
            return Err(format!("weight {name:?} has NaN or infinite values"));
        }
        let (k, n) = if transposed {
            (cols, rows)
        } else {
            (rows, cols)
        };
        let (ku, nu) = (k as usize, n as usize); // non-negative: numel() succeeded
        let kn: Vec<f32> = if transposed {
            // [N,K] row-major -> [K,N] row-major
            let mut out = vec![0f32; values.len()];
            for j in 0..nu {
                for i in 0..ku {
                    out[i * nu + j] = values[j * ku + i];
                }
            }
            out
        } else {
            values
        };
        let qmax = if self.opts.reduce_range { 63.0 } else { 127.0 };
        let (data, scales) = quantize_symmetric(&kn, nu, self.opts.per_channel, qmax);

        let base = if transposed {
            format!("{name}_T")
        } else {
            name.to_string()
        };
        let qw = QuantWeight {
            data: self.names.fresh(&format!("{base}_quantized")),
            scale: self.names.fresh(&format!("{base}_scale")),
            zero_point: self.names.fresh(&format!("{base}_zero_point")),
        };
        let param_dims = if self.opts.per_channel {
            vec![n]
        } else {
            vec![]
        };
        let zeros = vec![0i8; scales.len()];
        let new = [
            tensor::tensor_i8(qw.data.clone(), vec![k, n], &data),
            tensor::tensor_f32(qw.scale.clone(), param_dims.clone(), &scales),
            tensor::tensor_i8(qw.zero_point.clone(), param_dims, &zeros),
        ];
        self.report.quantized_weight_bytes += new.iter().map(tensor::payload_bytes).sum::<u64>();
        if self.quantized_sources.insert(name.to_string()) {
            self.report.original_weight_bytes += 4 * numel as u64;
        }
        self.new_initializers.extend(new);
        self.cache
            .insert((name.to_string(), transposed), qw.clone());
        Ok((qw, n_out))
    }

    fn rewrite_matmul(
        &mut self,
        n: &NodeProto,
        graph: &GraphProto,
    ) -> Result<Vec<NodeProto>, String> {
        if n.input.len() != 2 || n.output.len() != 1 {
            return Err("expected 2 inputs and 1 output".into());
        }
        let (qw, _) = self.weight(&n.input[1], false, graph)?;
        Ok(vec![self.dqmm(
            n,
            n.input[0].clone(),
            &qw,
            None,
            n.output[0].clone(),
        )])
    }

    fn rewrite_gemm(
        &mut self,
        n: &NodeProto,
        graph: &GraphProto,
    ) -> Result<Vec<NodeProto>, String> {
        if n.input.len() < 2 || n.input.len() > 3 || n.output.len() != 1 {
            return Err("expected 2 or 3 inputs and 1 output".into());
        }
        let c = n.input.get(2).filter(|c| !c.is_empty()).cloned();
        if graph::attr_i(n, "transA", 0) != 0 {
            return Err("transA=1 is not supported".into());
        }
        let alpha = graph::attr_f(n, "alpha", 1.0);
        if alpha != 1.0 {
            return Err(format!("alpha={alpha} (only 1.0 is supported)"));
        }
        let beta = graph::attr_f(n, "beta", 1.0);
        if c.is_some() && beta != 1.0 {
            return Err(format!("beta={beta} (only 1.0 is supported)"));
        }
        let trans_b = graph::attr_i(n, "transB", 0) != 0;
        // Check everything before creating initializers for the weight.
        let bias = match &c {
            None => Bias::None,
            Some(c) => self.bias_for(c, graph)?,
        };
        let (qw, n_out) = self.weight(&n.input[1], trans_b, graph)?;
        let bias = match bias {
            Bias::Input(name) => self.bias_initializer(&name, n_out, graph),
            other => other,
        };
        let out = n.output[0].clone();
        Ok(match bias {
            Bias::None => vec![self.dqmm(n, n.input[0].clone(), &qw, None, out)],
            Bias::Input(b) => vec![self.dqmm(n, n.input[0].clone(), &qw, Some(b), out)],
            Bias::Add(c) => {
                let mid = self.names.fresh(&format!("{out}_matmul"));
                let add_name = self.names.fresh(&format!("{}_bias", base_name(n)));
                vec![
                    self.dqmm(n, n.input[0].clone(), &qw, None, mid.clone()),
                    graph::node("Add", "", add_name, vec![mid, c], vec![out], vec![]),
                ]
            }
        })
    }

    /// Classifies a Gemm's C: a constant float initializer may become the bias input.
    fn bias_for(&self, c: &str, graph: &GraphProto) -> Result<Bias, String> {
        match self.constant(c, graph) {
            Ok(t) if t.dims.len() <= 2 => Ok(Bias::Input(c.to_string())),
            Ok(_) => Err(format!("C {c:?} has rank > 2")),
            // Not a constant: added at run time.
            Err(_) if !self.inits.contains_key(c) || self.graph_inputs.contains(c) => {
                Ok(Bias::Add(c.to_string()))
            }
            Err(why) => Err(format!("C: {why}")),
        }
    }

    /// A `[N]` bias initializer for a constant C, or `Bias::Add` if C's shape does not
    /// reduce to `[N]` (e.g. `[M,N]`).
    fn bias_initializer(&mut self, c: &str, n_out: usize, graph: &GraphProto) -> Bias {
        let Ok(t) = self.constant(c, graph) else {
            return Bias::Add(c.to_string());
        };
        let dims = t.dims.clone();
        let n = n_out as i64;
        if dims == [n] {
            return Bias::Input(c.to_string());
        }
        let broadcastable = dims.iter().all(|&d| d == 1) // scalar, [1], [1,1]
            || dims == [1, n];
        if !broadcastable {
            return Bias::Add(c.to_string());
        }
        if let Some(b) = self.bias_cache.get(&(c.to_string(), n_out)) {
            return Bias::Input(b.clone());
        }
        let Ok(values) = tensor::float_values(t) else {
            return Bias::Add(c.to_string());
        };
        let bias: Vec<f32> = if values.len() == n_out {
            values
        } else {
            vec![values.first().copied().unwrap_or(0.0); n_out]
        };
        let name = self.names.fresh(&format!("{c}_bias"));
        self.new_initializers
            .push(tensor::tensor_f32(name.clone(), vec![n], &bias));
        // The original C is dropped later if nothing else reads it.
        self.quantized_sources.insert(c.to_string());
        self.bias_cache.insert((c.to_string(), n_out), name.clone());
        Bias::Input(name)
    }

    fn dqmm(
        &mut self,
        orig: &NodeProto,
        a: String,
        qw: &QuantWeight,
        bias: Option<String>,
        out: String,
    ) -> NodeProto {
        let name = self.names.fresh(&format!("{}_quant", base_name(orig)));
        let mut inputs = vec![a, qw.data.clone(), qw.scale.clone(), qw.zero_point.clone()];
        inputs.extend(bias);
        let mut node = graph::node(
            "DynamicQuantizeMatMul",
            MS_DOMAIN,
            name,
            inputs,
            vec![out],
            vec![],
        );
        node.doc_string = Some(format!(
            "int8 dynamic quantisation of {} {:?} by infaas-onnx",
            orig.op_type(),
            orig.name()
        ));
        node
    }
}

fn base_name(n: &NodeProto) -> String {
    if n.name().is_empty() {
        n.op_type().to_string()
    } else {
        n.name().to_string()
    }
}

/// Symmetric int8 quantisation of a row-major `[K, N]` matrix: per column
/// (`per_channel`, N scales) or per tensor (1 scale). `q = round_half_even(w / s)`
/// clamped to `[-qmax, qmax]`, `s = max|w| / qmax` (1.0 for an all-zero column).
pub(crate) fn quantize_symmetric(
    kn: &[f32],
    n: usize,
    per_channel: bool,
    qmax: f32,
) -> (Vec<i8>, Vec<f32>) {
    let n = n.max(1);
    let scale_of = |max_abs: f32| if max_abs > 0.0 { max_abs / qmax } else { 1.0 };
    let scales: Vec<f32> = if per_channel {
        let mut max_abs = vec![0f32; n];
        for row in kn.chunks(n) {
            for (m, v) in max_abs.iter_mut().zip(row) {
                *m = m.max(v.abs());
            }
        }
        max_abs.into_iter().map(scale_of).collect()
    } else {
        vec![scale_of(kn.iter().fold(0f32, |m, v| m.max(v.abs())))]
    };
    let data = kn
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let s = if per_channel {
                scales[i % n]
            } else {
                scales[0]
            };
            (v / s).round_ties_even().clamp(-qmax, qmax) as i8
        })
        .collect();
    (data, scales)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn symmetric_per_column_error_is_within_half_a_step() {
        // [K=3, N=2]
        let w = [0.5f32, -4.0, -1.0, 2.0, 0.25, 1.0];
        let (q, s) = quantize_symmetric(&w, 2, true, 127.0);
        assert_eq!(s, vec![1.0 / 127.0, 4.0 / 127.0]);
        assert_eq!(q[2], -127); // -1.0 is column 0's max
        assert_eq!(q[1], -127);
        for (i, (&qv, &wv)) in q.iter().zip(&w).enumerate() {
            let deq = f32::from(qv) * s[i % 2];
            assert!(
                (deq - wv).abs() <= s[i % 2] / 2.0 + 1e-7,
                "{i}: {deq} vs {wv}"
            );
        }
    }

    #[test]
    fn per_tensor_and_zero_columns() {
        let w = [0.0f32, 0.0, 0.0, 0.0];
        let (q, s) = quantize_symmetric(&w, 2, true, 127.0);
        assert_eq!(q, vec![0; 4]);
        assert_eq!(s, vec![1.0, 1.0]);
        let w = [1.0f32, -2.0, 0.5, 2.0];
        let (q, s) = quantize_symmetric(&w, 2, false, 63.0);
        assert_eq!(s, vec![2.0 / 63.0]);
        // 1.0 / (2/63) is 31.5 up to float rounding: 31 or 32; 0.5 / (2/63) = 15.75 -> 16
        assert!(q[0] == 31 || q[0] == 32, "{q:?}");
        assert_eq!(&q[1..], &[-63, 16, 63]);
    }
}
