//! Small helpers over `GraphProto` / `NodeProto`.

use std::collections::HashSet;

use crate::proto::{attribute_proto::AttributeType, AttributeProto, GraphProto, NodeProto};

/// Subgraphs held in a node's attributes (If/Loop/Scan bodies).
pub(crate) fn subgraphs(n: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    n.attribute
        .iter()
        .flat_map(|a| a.g.iter().chain(a.graphs.iter()))
}

/// Calls `f` on every node of `g` and of its nested subgraphs.
pub(crate) fn for_each_node_recursive(g: &GraphProto, f: &mut dyn FnMut(&NodeProto)) {
    for n in &g.node {
        f(n);
        for sg in subgraphs(n) {
            for_each_node_recursive(sg, f);
        }
    }
}

/// Every value name read anywhere: node inputs of `g` and its subgraphs, and the
/// outputs of `g` and of its subgraphs. (Subgraphs may read outer-scope values.)
pub(crate) fn referenced_names(g: &GraphProto) -> HashSet<String> {
    let mut out = HashSet::new();
    collect_referenced(g, &mut out);
    out
}

fn collect_referenced(g: &GraphProto, out: &mut HashSet<String>) {
    for o in &g.output {
        out.insert(o.name().to_string());
    }
    for n in &g.node {
        for i in &n.input {
            if !i.is_empty() {
                out.insert(i.clone());
            }
        }
        for sg in subgraphs(n) {
            collect_referenced(sg, out);
        }
    }
}

/// Value names read inside the subgraphs of `n` (outer-scope reads included).
pub(crate) fn names_read_by_subgraphs(n: &NodeProto) -> HashSet<String> {
    let mut out = HashSet::new();
    for sg in subgraphs(n) {
        collect_referenced(sg, &mut out);
    }
    out
}

/// Every name in use in `g` and its subgraphs: values, nodes, initializers.
fn collect_all_names(g: &GraphProto, out: &mut HashSet<String>) {
    if let Some(name) = &g.name {
        out.insert(name.clone());
    }
    for vi in g.input.iter().chain(&g.output).chain(&g.value_info) {
        out.insert(vi.name().to_string());
    }
    for t in &g.initializer {
        out.insert(t.name().to_string());
    }
    for st in &g.sparse_initializer {
        if let Some(v) = &st.values {
            out.insert(v.name().to_string());
        }
    }
    for n in &g.node {
        out.insert(n.name().to_string());
        out.extend(n.input.iter().cloned());
        out.extend(n.output.iter().cloned());
        for sg in subgraphs(n) {
            collect_all_names(sg, out);
        }
    }
}

/// Makes names that clash with nothing in the graph (nor with each other).
pub(crate) struct NameGen {
    used: HashSet<String>,
}

impl NameGen {
    pub(crate) fn new(g: &GraphProto) -> NameGen {
        let mut used = HashSet::new();
        collect_all_names(g, &mut used);
        used.insert(String::new());
        NameGen { used }
    }

    /// `base` itself if unused, else `base_1`, `base_2`, ...
    pub(crate) fn fresh(&mut self, base: &str) -> String {
        let mut candidate = base.to_string();
        let mut i = 1usize;
        while self.used.contains(&candidate) {
            candidate = format!("{base}_{i}");
            i += 1;
        }
        self.used.insert(candidate.clone());
        candidate
    }
}

pub(crate) fn attr<'a>(n: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    n.attribute.iter().find(|a| a.name() == name)
}

pub(crate) fn attr_i(n: &NodeProto, name: &str, default: i64) -> i64 {
    attr(n, name).and_then(|a| a.i).unwrap_or(default)
}

pub(crate) fn attr_f(n: &NodeProto, name: &str, default: f32) -> f32 {
    attr(n, name).and_then(|a| a.f).unwrap_or(default)
}

pub(crate) fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(AttributeType::Int as i32),
        i: Some(v),
        ..Default::default()
    }
}

pub(crate) fn node(
    op_type: &str,
    domain: &str,
    name: String,
    inputs: Vec<String>,
    outputs: Vec<String>,
    attribute: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op_type.to_string()),
        domain: if domain.is_empty() {
            None
        } else {
            Some(domain.to_string())
        },
        name: Some(name),
        input: inputs,
        output: outputs,
        attribute,
        ..Default::default()
    }
}

/// True for the default ONNX operator domain.
pub(crate) fn is_default_domain(n: &NodeProto) -> bool {
    matches!(n.domain(), "" | "ai.onnx")
}

/// A label for a node in reports: its name, or `#index OpType` when unnamed.
pub(crate) fn node_label(n: &NodeProto, index: usize) -> String {
    if n.name().is_empty() {
        format!("#{index} {}", n.op_type())
    } else {
        n.name().to_string()
    }
}
