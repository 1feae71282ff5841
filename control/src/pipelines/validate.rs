//! Checks a pipeline document against the registry: every application and model exists and
//! can serve, and tensors connect (names, datatypes and feature shapes) from the request
//! through every node to the outputs. Messages name the node and the tensor.

use std::collections::{BTreeMap, HashMap};

use infaas_core::pipeline::{parse_source, Combiner, NodeKind, PipelineSpec, Source};
use infaas_core::{Model, ModelStatus};

use crate::cluster::schema::{inputs_of, InputSpec};
use crate::error::Error;

/// A tensor's type: datatype and dimensions after the batch one (-1 dynamic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TensorType {
    pub datatype: String,
    pub features: Vec<i64>,
}

impl std::fmt::Display for TensorType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let dims: Vec<String> = std::iter::once("-1".to_string())
            .chain(self.features.iter().map(i64::to_string))
            .collect();
        write!(f, "{} [{}]", self.datatype, dims.join(", "))
    }
}

impl TensorType {
    /// Whether a tensor of this type fits where `want` is expected (-1 matches any size).
    pub fn fits(&self, want: &TensorType) -> bool {
        self.datatype == want.datatype
            && self.features.len() == want.features.len()
            && self
                .features
                .iter()
                .zip(&want.features)
                .all(|(a, b)| *a < 0 || *b < 0 || a == b)
    }

    fn of_spec(i: &InputSpec) -> TensorType {
        TensorType {
            datatype: i.datatype.clone(),
            features: i.features.clone(),
        }
    }

    fn is_float(&self) -> bool {
        matches!(self.datatype.as_str(), "FP32" | "FP64" | "FP16")
    }

    fn is_numeric(&self) -> bool {
        self.datatype != "BYTES" && self.datatype != "BOOL"
    }
}

/// A model's outputs from its stored signature.
fn outputs_of(m: &Model) -> BTreeMap<String, TensorType> {
    let Some(outs) = m.signature.as_ref().and_then(|s| s["outputs"].as_array()) else {
        return BTreeMap::new();
    };
    outs.iter()
        .filter_map(|o| {
            let features = o["shape"]
                .as_array()?
                .iter()
                .skip(1)
                .filter_map(|d| d.as_i64())
                .collect();
            Some((
                o["name"].as_str()?.to_string(),
                TensorType {
                    datatype: o["datatype"].as_str()?.to_string(),
                    features,
                },
            ))
        })
        .collect()
}

/// What the validation learnt about each node (by index).
#[derive(Debug, Clone, Default)]
pub struct NodeShape {
    /// The node's input tensors as sent to the model: model input name -> source.
    pub inputs: Vec<(String, String)>,
    /// The node's outputs and their types (a combine node's only output is `output`).
    pub outputs: BTreeMap<String, TensorType>,
    /// Models the node may run (its model, or the application's models that take its inputs).
    pub models: Vec<String>,
}

/// The registry as the validation sees it: a tenant's models by application and by name.
pub struct Registry<'a> {
    pub models: &'a [Model],
}

impl Registry<'_> {
    fn app_models(&self, app: &str) -> Vec<&Model> {
        self.models.iter().filter(|m| m.app == app).collect()
    }

    fn model(&self, name: &str) -> Option<&Model> {
        self.models.iter().find(|m| m.name == name)
    }
}

/// Checks `spec` against the registry; returns the order to run the nodes in and each node's
/// shape. Every error is [`Error::Invalid`] (or [`Error::NotFound`] for a missing application
/// or model, [`Error::Conflict`] for one whose every model failed), naming the node.
pub fn check(
    spec: &PipelineSpec,
    registry: &Registry<'_>,
) -> Result<(Vec<usize>, Vec<NodeShape>), Error> {
    let order = spec.check_structure().map_err(|e| Error::Invalid(e.0))?;
    let request: BTreeMap<&str, TensorType> = spec
        .inputs
        .iter()
        .map(|i| {
            (
                i.name.as_str(),
                TensorType {
                    datatype: infaas_core::DataType::parse(&i.datatype)
                        .map_or_else(|| i.datatype.clone(), |d| d.as_str().to_string()),
                    features: i.shape.clone(),
                },
            )
        })
        .collect();
    let mut shapes: Vec<NodeShape> = vec![NodeShape::default(); spec.nodes.len()];
    for &k in &order {
        let node = &spec.nodes[k];
        let name = &node.name;
        // The type of a source, from the request or an earlier node (already checked).
        let type_of = |source: &str| -> Result<TensorType, Error> {
            match parse_source(source) {
                Source::Request(r) => request
                    .get(r)
                    .cloned()
                    .ok_or_else(|| Error::Invalid(format!("node '{name}': unknown input '{r}'"))),
                Source::Node { node: from, output } => {
                    let idx = spec.node_index(from).ok_or_else(|| {
                        Error::Invalid(format!("node '{name}': unknown node '{from}'"))
                    })?;
                    let outs = &shapes[idx].outputs;
                    outs.get(output).cloned().ok_or_else(|| {
                        Error::Invalid(format!(
                            "node '{name}' reads '{source}', but node '{from}' has no output '{output}' (it has: {})",
                            outs.keys().cloned().collect::<Vec<_>>().join(", ")
                        ))
                    })
                }
            }
        };
        if let Some(c) = &node.when {
            let t = type_of(&c.source)?;
            if !t.is_numeric() {
                return Err(Error::Invalid(format!(
                    "node '{name}', `when`: '{}' is {t}; a condition needs numeric scores or labels",
                    c.source
                )));
            }
        }
        let shape = match node.kind() {
            NodeKind::Combine(c) => combine_shape(name, c, &node.from, &type_of)?,
            NodeKind::Model(model) => {
                let m = registry.model(model).ok_or_else(|| {
                    Error::NotFound(format!("node '{name}': model '{model}' not found"))
                })?;
                if m.status == ModelStatus::Failed {
                    return Err(Error::Conflict(format!(
                        "node '{name}': model '{model}' failed registration and cannot serve"
                    )));
                }
                let inputs = bind_inputs(spec, k, m, &type_of)?;
                NodeShape {
                    inputs,
                    outputs: outputs_of(m),
                    models: vec![m.name.clone()],
                }
            }
            NodeKind::App(app) => {
                let models: Vec<&Model> = registry
                    .app_models(app)
                    .into_iter()
                    .filter(|m| m.status != ModelStatus::Failed)
                    .collect();
                if models.is_empty() {
                    return Err(if registry.app_models(app).is_empty() {
                        Error::NotFound(format!(
                            "node '{name}': application '{app}' not found (or it has no models)"
                        ))
                    } else {
                        Error::Conflict(format!(
                            "node '{name}': every model of application '{app}' failed registration"
                        ))
                    });
                }
                let mut fitting = Vec::new();
                let mut why = Vec::new();
                for m in models {
                    match bind_inputs(spec, k, m, &type_of) {
                        Ok(inputs) => fitting.push((m, inputs)),
                        Err(e) => why.push(format!("{}: {e}", m.name)),
                    }
                }
                let Some((first, inputs)) = fitting.first().cloned() else {
                    return Err(Error::Invalid(format!(
                        "node '{name}': no model of application '{app}' takes the node's inputs ({})",
                        why.join("; ")
                    )));
                };
                // Model-less: any fitting model may serve, so an output is one every such
                // model has, with one type.
                let mut outputs = outputs_of(first);
                for (m, _) in &fitting[1..] {
                    let theirs = outputs_of(m);
                    outputs.retain(|o, t| theirs.get(o).is_some_and(|u| u.datatype == t.datatype));
                }
                NodeShape {
                    inputs,
                    outputs,
                    models: fitting.iter().map(|(m, _)| m.name.clone()).collect(),
                }
            }
        };
        shapes[k] = shape;
    }
    // Outputs run for every row; branches of a router count when their `label_in` sets take
    // every label of its scores (their width: scores of shape [C] have C labels).
    let labels = |source: &str| -> Option<usize> {
        let Source::Node { node, output } = parse_source(source) else {
            return None;
        };
        let t = shapes.get(spec.node_index(node)?)?.outputs.get(output)?;
        match t.features.as_slice() {
            [c] if t.is_float() && *c > 0 => usize::try_from(*c).ok(),
            _ => None,
        }
    };
    spec.check_outputs_total(&order, &labels)
        .map_err(|e| Error::Invalid(e.0))?;
    for (out, source) in &spec.outputs {
        if let Source::Node { node, output } = parse_source(source) {
            let idx = spec.node_index(node).unwrap_or(usize::MAX);
            if let Some(s) = shapes.get(idx) {
                if !s.outputs.contains_key(output) {
                    return Err(Error::Invalid(format!(
                        "output '{out}': node '{node}' has no output '{output}' (it has: {})",
                        s.outputs.keys().cloned().collect::<Vec<_>>().join(", ")
                    )));
                }
            }
        }
    }
    Ok((order, shapes))
}

/// The node's inputs bound to the model's: every model input gets a source of a fitting type.
fn bind_inputs(
    spec: &PipelineSpec,
    k: usize,
    m: &Model,
    type_of: &dyn Fn(&str) -> Result<TensorType, Error>,
) -> Result<Vec<(String, String)>, Error> {
    let node = &spec.nodes[k];
    let name = &node.name;
    let wanted = inputs_of(m.signature.as_ref());
    if wanted.is_empty() {
        return Err(Error::Invalid(format!(
            "node '{name}': model '{}' has no recorded input signature",
            m.name
        )));
    }
    let bound: Vec<(String, String)> = if node.inputs.is_empty() {
        // Only allowed with one pipeline input (checked structurally).
        let only = spec
            .inputs
            .first()
            .map(|i| i.name.clone())
            .unwrap_or_default();
        match wanted.as_slice() {
            [one] => vec![(one.name.clone(), only)],
            many => {
                return Err(Error::Invalid(format!(
                    "node '{name}': model '{}' takes {} inputs ({}); map them in `inputs`",
                    m.name,
                    many.len(),
                    many.iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
        }
    } else if let ([one], [source]) = (
        wanted.as_slice(),
        node.inputs.values().collect::<Vec<_>>().as_slice(),
    ) {
        // A single-input model takes its one tensor whatever the map calls it.
        vec![(one.name.clone(), (*source).clone())]
    } else {
        for input in node.inputs.keys() {
            if !wanted.iter().any(|w| &w.name == input) {
                return Err(Error::Invalid(format!(
                    "node '{name}', input '{input}': model '{}' has no input of that name (it takes {})",
                    m.name,
                    wanted.iter().map(|i| i.name.as_str()).collect::<Vec<_>>().join(", ")
                )));
            }
        }
        let mut bound = Vec::new();
        for w in &wanted {
            let source = node.inputs.get(&w.name).ok_or_else(|| {
                Error::Invalid(format!(
                    "node '{name}': model '{}' needs input '{}', which `inputs` does not map",
                    m.name, w.name
                ))
            })?;
            bound.push((w.name.clone(), source.clone()));
        }
        bound
    };
    for (input, source) in &bound {
        let want = wanted
            .iter()
            .find(|w| &w.name == input)
            .map(TensorType::of_spec)
            .unwrap_or(TensorType {
                datatype: String::new(),
                features: Vec::new(),
            });
        let got = type_of(source)?;
        if !got.fits(&want) {
            return Err(Error::Invalid(format!(
                "node '{name}', input '{input}': '{source}' is {got} but model '{}' takes {want}",
                m.name
            )));
        }
    }
    Ok(bound)
}

/// The output of a combine node, checking that its sources can be combined.
fn combine_shape(
    name: &str,
    c: Combiner,
    from: &[String],
    type_of: &dyn Fn(&str) -> Result<TensorType, Error>,
) -> Result<NodeShape, Error> {
    let types: Vec<TensorType> = from.iter().map(|s| type_of(s)).collect::<Result<_, _>>()?;
    let first = types[0].clone();
    let out = match c {
        Combiner::Mean | Combiner::First => {
            for (s, t) in from.iter().zip(&types).skip(1) {
                if !t.fits(&first) {
                    return Err(Error::Invalid(format!(
                        "node '{name}' ({}): '{s}' is {t} but '{}' is {first}; the sources need one type",
                        c.as_str(),
                        from[0]
                    )));
                }
            }
            if c == Combiner::Mean && !first.is_float() {
                return Err(Error::Invalid(format!(
                    "node '{name}' (mean): '{}' is {first}; mean combines float scores",
                    from[0]
                )));
            }
            first
        }
        Combiner::Vote => {
            for (s, t) in from.iter().zip(&types) {
                if !t.is_numeric() {
                    return Err(Error::Invalid(format!(
                        "node '{name}' (vote): '{s}' is {t}; vote needs scores or integer labels"
                    )));
                }
            }
            TensorType {
                datatype: "INT64".into(),
                features: Vec::new(),
            }
        }
        Combiner::Concat => {
            let mut last = 0i64;
            for (s, t) in from.iter().zip(&types) {
                let same_prefix = t.datatype == first.datatype
                    && t.features.len() == first.features.len()
                    && !t.features.is_empty();
                if !same_prefix {
                    return Err(Error::Invalid(format!(
                        "node '{name}' (concat): '{s}' is {t}; concat needs sources of one datatype and rank, at least 2-D"
                    )));
                }
                let d = t.features.last().copied().unwrap_or(-1);
                last = if last < 0 || d < 0 { -1 } else { last + d };
            }
            let mut features = first.features.clone();
            if let Some(l) = features.last_mut() {
                *l = last;
            }
            TensorType {
                datatype: first.datatype,
                features,
            }
        }
    };
    Ok(NodeShape {
        inputs: Vec::new(),
        outputs: BTreeMap::from([("output".to_string(), out)]),
        models: Vec::new(),
    })
}

/// The model nodes of a pipeline, in run order, with their nearest model-node ancestors
/// (combine nodes are free and transparent).
pub fn model_nodes(spec: &PipelineSpec, order: &[usize]) -> (Vec<usize>, Vec<Vec<usize>>) {
    let parents = spec.parents();
    let is_model = |k: usize| !matches!(spec.nodes[k].kind(), NodeKind::Combine(_));
    let nodes: Vec<usize> = order.iter().copied().filter(|&k| is_model(k)).collect();
    let position: HashMap<usize, usize> = nodes.iter().enumerate().map(|(i, &k)| (k, i)).collect();
    let mut model_parents = Vec::with_capacity(nodes.len());
    for &k in &nodes {
        let mut found = Vec::new();
        let mut stack: Vec<usize> = parents[k].clone();
        let mut seen = vec![false; spec.nodes.len()];
        while let Some(q) = stack.pop() {
            if std::mem::replace(&mut seen[q], true) {
                continue;
            }
            match position.get(&q) {
                Some(&i) => found.push(i),
                None => stack.extend(parents[q].iter().copied()),
            }
        }
        found.sort_unstable();
        found.dedup();
        model_parents.push(found);
    }
    (nodes, model_parents)
}

/// Accuracy scaling plans rooted trees of model nodes (Loki's assumption): one model node
/// reads the request, every other reads exactly one model node (through combiners or not).
pub fn check_tree(
    spec: &infaas_core::pipeline::PipelineSpec,
    order: &[usize],
) -> Result<(), Error> {
    let (nodes, parents) = model_nodes(spec, order);
    let name = |i: usize| spec.nodes[nodes[i]].name.as_str();
    let roots: Vec<&str> = (0..nodes.len())
        .filter(|&i| parents[i].is_empty())
        .map(name)
        .collect();
    if roots.len() != 1 {
        return Err(Error::Invalid(format!(
            "overload.accuracy_scaling needs a tree of model nodes with one root; nodes {} all read only the request",
            roots.join(", ")
        )));
    }
    if let Some(i) = (0..nodes.len()).find(|&i| parents[i].len() > 1) {
        let from: Vec<&str> = parents[i].iter().map(|&q| name(q)).collect();
        return Err(Error::Invalid(format!(
            "overload.accuracy_scaling needs a tree of model nodes; node '{}' joins {}",
            name(i),
            from.join(", ")
        )));
    }
    Ok(())
}
