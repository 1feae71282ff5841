//! Pipelines: a DAG of nodes under one end-to-end SLO, as a user registers it.
//!
//! A node runs an application (model-less: the platform picks the variant), a registered
//! model, or a built-in combiner over earlier nodes' outputs. Each node says where its inputs
//! come from: a tensor of the request (`"image"`) or a named output of an earlier node
//! (`"detect.boxes"`). Routing, in the spirit of KServe's InferenceGraph:
//! - **sequence**: a node reading another node's output runs after it;
//! - **switch**: a node with `when` runs only on the rows for which a condition on an earlier
//!   node's output holds (its label is in a set, or its top probability is below a threshold);
//! - **ensemble**: several nodes read the same source (fan-out) and a `combine` node merges
//!   them (`mean` of probabilities, majority `vote`, `concat`, or `first`: per row, the first
//!   source that ran, which closes a cascade).
//!
//! [`PipelineSpec::check`] does the structural checks that need no registry (names, references,
//! cycles, conditions, outputs that every row gets); the control plane then checks tensors
//! against the registered models' signatures.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::tenant::validate_name;

/// Percentile at which a pipeline's SLO holds when none is given.
pub const DEFAULT_PERCENTILE: f64 = 99.0;
/// Most nodes a pipeline may have.
pub const MAX_NODES: usize = 32;

/// A pipeline document as registered (`POST /v1/pipelines`, JSON or YAML). Beyond what the
/// fields say, the server checks (400, naming the node and the tensor): names unique among
/// inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
/// cycle; outputs that every row gets; tensors that connect to the nodes' models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    /// The pipeline's name, unique in the tenant among pipelines, applications and models:
    /// 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    )]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Tensors a request brings, by name (referenced by nodes as bare names).
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub inputs: Vec<PipelineInput>,
    /// In any order; they run in dependency order.
    #[cfg_attr(feature = "openapi", schema(min_items = 1, max_items = 32))]
    pub nodes: Vec<NodeSpec>,
    /// Tensors the answer carries, at least one: output name -> source (`"node.output"`; a
    /// combine node's only output is `"node.output"` too).
    pub outputs: BTreeMap<String, String>,
    #[serde(default)]
    pub slo: PipelineSlo,
    /// What the platform does when the demand outgrows the hardware (docs/overload.md).
    #[serde(default, skip_serializing_if = "Overload::is_default")]
    pub overload: Overload,
}

/// A pipeline's behaviour under overload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = PipelineOverload))]
#[serde(deny_unknown_fields)]
pub struct Overload {
    /// Loki's accuracy scaling: every 10 s the controller allocates the most accurate mix of
    /// the nodes' variants that carries the demand (hardware scaling first), and every query is
    /// routed along it most-accurate-first (off by default).
    #[serde(default)]
    pub accuracy_scaling: bool,
    /// A query that can no longer meet its end-to-end deadline is dropped at once, before it
    /// spends downstream capacity, with an answer that says so (on by default; with
    /// `accuracy_scaling`, it is first rerouted to a faster variant when one makes it).
    #[serde(default = "enabled")]
    pub early_dropping: bool,
}

fn enabled() -> bool {
    true
}

impl Default for Overload {
    fn default() -> Self {
        Overload {
            accuracy_scaling: false,
            early_dropping: true,
        }
    }
}

impl Overload {
    pub fn is_default(&self) -> bool {
        *self == Overload::default()
    }
}

/// A tensor of the request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PipelineInput {
    /// Non-empty, without '.' (sources `"node.output"` hold one).
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[^.]+$"))]
    pub name: String,
    /// Open Inference Protocol datatype, e.g. `FP32` (case-insensitive).
    #[cfg_attr(feature = "openapi", schema(schema_with = datatype_schema))]
    pub datatype: String,
    /// Dimensions after the batch dimension; -1 for a dynamic one.
    #[serde(default)]
    pub shape: Vec<i64>,
}

/// The end-to-end requirements.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct PipelineSlo {
    /// End-to-end latency the `percentile` of queries must be answered within, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0.0))]
    pub latency_ms: Option<f64>,
    /// Percentile of queries the latency holds for, in (0, 100] (default 99).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0.0, maximum = 100.0))]
    pub percentile: Option<f64>,
    /// Minimum end-to-end accuracy, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0.0, maximum = 1.0))]
    pub min_accuracy: Option<f64>,
    /// Most the pipeline's resources may cost per hour, in dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0.0))]
    pub max_cost_per_hour: Option<f64>,
}

impl PipelineSlo {
    pub fn percentile(&self) -> f64 {
        self.percentile.unwrap_or(DEFAULT_PERCENTILE)
    }
}

/// One node of the DAG: exactly one of `app`, `model` or `combine`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// 1-64 of `[A-Za-z0-9_-]`, starting with a letter or digit (no '.': sources are written
    /// `"node.output"`).
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    )]
    pub name: String,
    /// An application: the platform picks the variant (model-less).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    )]
    pub app: Option<String>,
    /// A registered model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    )]
    pub model: Option<String>,
    /// A built-in combiner over `from`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combine: Option<Combiner>,
    /// The combiner's sources, `"node.output"`, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub from: Vec<String>,
    /// The model's input name -> source (a request input's name or `"node.output"`). A model
    /// with one input may omit the map when the request has one input.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// Switch: the node runs only on the rows for which this holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
}

/// How a combine node merges its sources, row by row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "lowercase")]
pub enum Combiner {
    /// Element-wise mean of the sources that ran for the row (same shape, float).
    Mean,
    /// Majority vote of the sources' labels (argmax of scores, or integer labels); ties go to
    /// the earliest source. Output: INT64 labels.
    Vote,
    /// The sources side by side along the last axis (rows where all ran).
    Concat,
    /// The first source, in order, that ran for the row (closes a cascade).
    First,
}

impl Combiner {
    pub fn as_str(self) -> &'static str {
        match self {
            Combiner::Mean => "mean",
            Combiner::Vote => "vote",
            Combiner::Concat => "concat",
            Combiner::First => "first",
        }
    }
}

/// A condition on an earlier node's output, per row: exactly one of `label_in` or
/// `top_probability_below`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema), schema(as = NodeCondition))]
#[serde(deny_unknown_fields)]
pub struct Condition {
    /// `"node.output"` of an earlier node.
    #[cfg_attr(feature = "openapi", schema(pattern = r"^[^.]+\..+$"))]
    pub source: String,
    /// Holds when the row's label (argmax of scores, or the integer label) is one of these.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(min_items = 1))]
    pub label_in: Option<Vec<i64>>,
    /// Holds when the row's top probability is below this, in (0, 1] (scores that are not
    /// probabilities go through a softmax first).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0.0, maximum = 1.0))]
    pub top_probability_below: Option<f64>,
}

/// The schema of a datatype's name: one of the Open Inference Protocol's.
#[cfg(feature = "openapi")]
fn datatype_schema() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(crate::DataType::ALL.iter().map(|d| d.as_str())))
        .description(Some(
            "Open Inference Protocol datatype, e.g. `FP32` (case-insensitive).",
        ))
        .build()
}

/// What a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind<'a> {
    App(&'a str),
    Model(&'a str),
    Combine(Combiner),
}

impl NodeSpec {
    /// What the node runs (after [`PipelineSpec::check`], exactly one of app, model, combine).
    pub fn kind(&self) -> NodeKind<'_> {
        match (&self.app, &self.model, self.combine) {
            (Some(a), _, _) => NodeKind::App(a),
            (None, Some(m), _) => NodeKind::Model(m),
            (None, None, Some(c)) => NodeKind::Combine(c),
            (None, None, None) => NodeKind::Combine(Combiner::First),
        }
    }

    /// Every source the node reads: its inputs, its combiner's sources and its condition's.
    pub fn sources(&self) -> impl Iterator<Item = &str> {
        self.inputs
            .values()
            .chain(self.from.iter())
            .chain(self.when.iter().map(|c| &c.source))
            .map(String::as_str)
    }
}

/// Where a tensor comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// A request input.
    Request(&'a str),
    /// An output of an earlier node.
    Node { node: &'a str, output: &'a str },
}

/// Reads `"node.output"` or a request input's name. Node names hold no '.', so the first '.'
/// separates them.
pub fn parse_source(s: &str) -> Source<'_> {
    match s.split_once('.') {
        Some((node, output)) => Source::Node { node, output },
        None => Source::Request(s),
    }
}

/// A structural problem of a pipeline document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(msg.into()))
}

impl PipelineSpec {
    /// Structural checks; returns the nodes' indices in an order where every node comes after
    /// the nodes it reads from. Every output must come from a node that runs for every row,
    /// proved from the document alone ([`Self::check_outputs_total`] without label counts).
    pub fn check(&self) -> Result<Vec<usize>, SpecError> {
        let order = self.check_structure()?;
        self.check_outputs_total(&order, &|_| None)?;
        Ok(order)
    }

    /// [`Self::check`] without the check that every output runs for every row (which may need
    /// the label counts of the router outputs, known once the models are: see
    /// [`Self::check_outputs_total`]).
    pub fn check_structure(&self) -> Result<Vec<usize>, SpecError> {
        validate_name("pipeline", &self.name).map_err(SpecError)?;
        if self.nodes.is_empty() {
            return err("a pipeline needs at least one node");
        }
        if self.nodes.len() > MAX_NODES {
            return err(format!(
                "a pipeline has at most {MAX_NODES} nodes; this one has {}",
                self.nodes.len()
            ));
        }
        if self.inputs.is_empty() {
            return err("a pipeline needs at least one input (`inputs`)");
        }
        self.check_slo()?;
        let mut inputs = BTreeSet::new();
        for i in &self.inputs {
            if i.name.is_empty() || i.name.contains('.') {
                return err(format!(
                    "input name '{}' is invalid: it must be non-empty and hold no '.'",
                    i.name
                ));
            }
            if crate::DataType::parse(&i.datatype).is_none() {
                return err(format!(
                    "input '{}': unknown datatype '{}'",
                    i.name, i.datatype
                ));
            }
            if !inputs.insert(i.name.as_str()) {
                return err(format!("input '{}' is declared twice", i.name));
            }
        }
        let mut index = BTreeMap::new();
        for (k, n) in self.nodes.iter().enumerate() {
            validate_name("node", &n.name).map_err(SpecError)?;
            if n.name.contains('.') {
                return err(format!(
                    "node name '{}' is invalid: node names hold no '.' (sources are written 'node.output')",
                    n.name
                ));
            }
            if inputs.contains(n.name.as_str()) {
                return err(format!(
                    "node '{}' has the name of a pipeline input; use another",
                    n.name
                ));
            }
            if index.insert(n.name.as_str(), k).is_some() {
                return err(format!("node '{}' is declared twice", n.name));
            }
        }
        for n in &self.nodes {
            self.check_node(n, &inputs, &index)?;
        }
        let order = self.topological_order(&index)?;
        if self.outputs.is_empty() {
            return err("a pipeline needs at least one output (`outputs`)");
        }
        for (name, source) in &self.outputs {
            match parse_source(source) {
                Source::Request(_) => {
                    return err(format!(
                        "output '{name}': '{source}' is not a node output; write 'node.output'"
                    ))
                }
                Source::Node { node, .. } => {
                    if !index.contains_key(node) {
                        return err(format!("output '{name}': unknown node '{node}'"));
                    }
                }
            }
        }
        Ok(order)
    }

    /// Every output comes from a node that runs for every row: one without a `when` whose
    /// sources all do, or a `combine` (other than `concat`) with such a source, or whose
    /// sources are branches of one router that together take every label: nodes whose `when`
    /// has `label_in` sets on the same `source` whose union holds every label that source has
    /// (`labels(source)`: how many, e.g. 2 for scores of shape `[2]`; `None` when unknown, and
    /// then only an unconditional source proves it). `order` is [`Self::check_structure`]'s.
    pub fn check_outputs_total(
        &self,
        order: &[usize],
        labels: &dyn Fn(&str) -> Option<usize>,
    ) -> Result<(), SpecError> {
        let index: BTreeMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| (n.name.as_str(), k))
            .collect();
        let total = self.total_nodes(order, &index, labels);
        for (name, source) in &self.outputs {
            match parse_source(source) {
                Source::Request(_) => {
                    return err(format!(
                        "output '{name}': '{source}' is not a node output; write 'node.output'"
                    ))
                }
                Source::Node { node, .. } => {
                    let Some(&k) = index.get(node) else {
                        return err(format!("output '{name}': unknown node '{node}'"));
                    };
                    if !total[k] {
                        return err(format!(
                            "output '{name}' comes from node '{node}', which does not run for every row (it is behind a `when`); merge it with an unconditional node, or with branches whose `label_in` sets together take every label of their router, in a `combine: first` node"
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    fn check_slo(&self) -> Result<(), SpecError> {
        let s = &self.slo;
        if let Some(l) = s.latency_ms {
            if !(l.is_finite() && l > 0.0) {
                return err(format!(
                    "slo.latency_ms must be a positive number of milliseconds, not {l}"
                ));
            }
        }
        if let Some(p) = s.percentile {
            if !(p > 0.0 && p <= 100.0) {
                return err(format!("slo.percentile must be in (0, 100], not {p}"));
            }
        }
        if let Some(a) = s.min_accuracy {
            if !(0.0..=1.0).contains(&a) {
                return err(format!(
                    "slo.min_accuracy must be a fraction in [0, 1], not {a}"
                ));
            }
        }
        if let Some(c) = s.max_cost_per_hour {
            if !(c.is_finite() && c > 0.0) {
                return err(format!(
                    "slo.max_cost_per_hour must be a positive number of dollars, not {c}"
                ));
            }
        }
        Ok(())
    }

    fn check_node(
        &self,
        n: &NodeSpec,
        inputs: &BTreeSet<&str>,
        index: &BTreeMap<&str, usize>,
    ) -> Result<(), SpecError> {
        let name = &n.name;
        let targets = [n.app.is_some(), n.model.is_some(), n.combine.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if targets != 1 {
            return err(format!(
                "node '{name}' needs exactly one of `app`, `model` or `combine`"
            ));
        }
        match n.combine {
            Some(c) => {
                if !n.inputs.is_empty() {
                    return err(format!(
                        "node '{name}' combines; it takes its sources in `from`, not `inputs`"
                    ));
                }
                if n.from.len() < 2 && c != Combiner::First {
                    return err(format!(
                        "node '{name}': `{}` needs at least two sources in `from`",
                        c.as_str()
                    ));
                }
                if n.from.is_empty() {
                    return err(format!("node '{name}': `from` is empty"));
                }
            }
            None => {
                if !n.from.is_empty() {
                    return err(format!(
                        "node '{name}' runs a model; `from` is for combine nodes (use `inputs`)"
                    ));
                }
                if n.inputs.is_empty() && self.inputs.len() != 1 {
                    return err(format!(
                        "node '{name}' has no `inputs` map; it may omit it only when the pipeline has one input"
                    ));
                }
            }
        }
        let check_source = |what: String, s: &str| -> Result<(), SpecError> {
            match parse_source(s) {
                Source::Request(r) => {
                    if !inputs.contains(r) {
                        return err(format!(
                            "{what}: '{s}' is neither a pipeline input nor 'node.output'"
                        ));
                    }
                }
                Source::Node { node, output } => {
                    if node == name {
                        return err(format!("{what}: node '{name}' reads its own output"));
                    }
                    if !index.contains_key(node) {
                        return err(format!("{what}: unknown node '{node}'"));
                    }
                    if output.is_empty() {
                        return err(format!("{what}: '{s}' names no output"));
                    }
                }
            }
            Ok(())
        };
        for (input, s) in &n.inputs {
            check_source(format!("node '{name}', input '{input}'"), s)?;
        }
        for s in &n.from {
            check_source(format!("node '{name}', `from`"), s)?;
            if matches!(parse_source(s), Source::Request(_)) {
                return err(format!(
                    "node '{name}', `from`: combine nodes merge node outputs, not request input '{s}'"
                ));
            }
        }
        if let Some(c) = &n.when {
            check_source(format!("node '{name}', `when`"), &c.source)?;
            if matches!(parse_source(&c.source), Source::Request(_)) {
                return err(format!(
                    "node '{name}', `when`: a condition reads an earlier node's output ('node.output'), not request input '{}'",
                    c.source
                ));
            }
            match (&c.label_in, c.top_probability_below) {
                (Some(labels), None) if !labels.is_empty() => {}
                (None, Some(t)) if t > 0.0 && t <= 1.0 => {}
                (None, Some(t)) => {
                    return err(format!(
                        "node '{name}', `when`: top_probability_below must be in (0, 1], not {t}"
                    ))
                }
                _ => {
                    return err(format!(
                        "node '{name}', `when` needs exactly one of `label_in` (a non-empty list) or `top_probability_below`"
                    ))
                }
            }
        }
        Ok(())
    }

    /// Kahn's algorithm; a cycle is an error naming the nodes on it.
    fn topological_order(&self, index: &BTreeMap<&str, usize>) -> Result<Vec<usize>, SpecError> {
        let n = self.nodes.len();
        let parents = self.parents_with(index);
        let mut remaining: Vec<usize> = parents.iter().map(Vec::len).collect();
        let mut children = vec![Vec::new(); n];
        for (k, ps) in parents.iter().enumerate() {
            for &p in ps {
                children[p].push(k);
            }
        }
        let mut ready: Vec<usize> = (0..n).filter(|&k| remaining[k] == 0).collect();
        ready.reverse();
        let mut order = Vec::with_capacity(n);
        while let Some(k) = ready.pop() {
            order.push(k);
            for &c in children[k].iter().rev() {
                remaining[c] -= 1;
                if remaining[c] == 0 {
                    ready.push(c);
                }
            }
        }
        if order.len() < n {
            let mut on_cycle: Vec<&str> = (0..n)
                .filter(|&k| remaining[k] > 0)
                .map(|k| self.nodes[k].name.as_str())
                .collect();
            on_cycle.sort_unstable();
            return err(format!(
                "the pipeline has a cycle through nodes {}",
                on_cycle.join(", ")
            ));
        }
        Ok(order)
    }

    fn parents_with(&self, index: &BTreeMap<&str, usize>) -> Vec<Vec<usize>> {
        self.nodes
            .iter()
            .map(|n| {
                let mut ps: Vec<usize> = n
                    .sources()
                    .filter_map(|s| match parse_source(s) {
                        Source::Node { node, .. } => index.get(node).copied(),
                        Source::Request(_) => None,
                    })
                    .collect();
                ps.sort_unstable();
                ps.dedup();
                ps
            })
            .collect()
    }

    /// For every node (by index), the nodes it reads from (inputs, combiner sources and
    /// condition), sorted.
    pub fn parents(&self) -> Vec<Vec<usize>> {
        let index: BTreeMap<&str, usize> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(k, n)| (n.name.as_str(), k))
            .collect();
        self.parents_with(&index)
    }

    /// The index of node `name`.
    pub fn node_index(&self, name: &str) -> Option<usize> {
        self.nodes.iter().position(|n| n.name == name)
    }

    /// Which nodes run for every row: no `when`, every node they read unconditional; a `first`,
    /// `mean` or `vote` combiner when any source does, `concat` when all do.
    /// Per node: whether it runs for every row (see [`Self::check_outputs_total`]).
    fn total_nodes(
        &self,
        order: &[usize],
        index: &BTreeMap<&str, usize>,
        labels: &dyn Fn(&str) -> Option<usize>,
    ) -> Vec<bool> {
        let mut total = vec![false; self.nodes.len()];
        // Per node: its inputs run for every row (it may still be behind a `when`).
        let mut fed = vec![false; self.nodes.len()];
        for &k in order {
            let n = &self.nodes[k];
            let src_total = |s: &str| match parse_source(s) {
                Source::Request(_) => true,
                Source::Node { node, .. } => index.get(node).is_some_and(|&p| total[p]),
            };
            fed[k] = n.inputs.values().all(|s| src_total(s));
            total[k] = match n.combine {
                Some(Combiner::Concat) => n.from.iter().all(|s| src_total(s)),
                Some(_) => {
                    n.from.iter().any(|s| src_total(s))
                        || self.branches_cover(&n.from, index, &fed, labels)
                }
                None => n.when.is_none() && fed[k],
            };
        }
        total
    }

    /// Whether some of `sources` are branches of one router (nodes fed on every row, behind a
    /// `when` with `label_in` on the same source) whose label sets together hold all of that
    /// source's `labels`.
    fn branches_cover(
        &self,
        sources: &[String],
        index: &BTreeMap<&str, usize>,
        fed: &[bool],
        labels: &dyn Fn(&str) -> Option<usize>,
    ) -> bool {
        let mut by_router: BTreeMap<&str, BTreeSet<i64>> = BTreeMap::new();
        for s in sources {
            let Source::Node { node, .. } = parse_source(s) else {
                continue;
            };
            let Some(&p) = index.get(node) else { continue };
            let branch = &self.nodes[p];
            if let (true, Some(c)) = (fed[p], &branch.when) {
                if let Some(set) = &c.label_in {
                    by_router
                        .entry(c.source.as_str())
                        .or_default()
                        .extend(set.iter().copied());
                }
            }
        }
        by_router.iter().any(|(router, taken)| {
            labels(router)
                .is_some_and(|n| n > 0 && (0..n as i64).all(|label| taken.contains(&label)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cascade() -> PipelineSpec {
        serde_json::from_value(serde_json::json!({
            "name": "digits-cascade",
            "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
            "nodes": [
                {"name": "answer", "combine": "first", "from": ["slow.probabilities", "fast.probabilities"]},
                {"name": "slow", "model": "digits-big", "inputs": {"input": "image"},
                 "when": {"source": "fast.probabilities", "top_probability_below": 0.9}},
                {"name": "fast", "app": "digits", "inputs": {"input": "image"}}
            ],
            "outputs": {"probabilities": "answer.output"},
            "slo": {"latency_ms": 50}
        }))
        .unwrap()
    }

    /// Two branches of one router merged by `first`: total when their `label_in` sets take
    /// every label of the router's scores, which only the label count can prove.
    #[test]
    fn complementary_branches_are_total_when_their_labels_cover_the_router() {
        let routed = |high: &[i64]| -> PipelineSpec {
            serde_json::from_value(serde_json::json!({
                "name": "routed",
                "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
                "nodes": [
                    {"name": "router", "app": "small", "inputs": {"input": "image"}},
                    {"name": "a", "model": "m-a", "inputs": {"input": "image"},
                     "when": {"source": "router.probabilities", "label_in": [0]}},
                    {"name": "b", "model": "m-b", "inputs": {"input": "image"},
                     "when": {"source": "router.probabilities", "label_in": high}},
                    {"name": "answer", "combine": "first", "from": ["a.probabilities", "b.probabilities"]}
                ],
                "outputs": {"probabilities": "answer.output"}
            }))
            .unwrap()
        };
        let two = |s: &str| (s == "router.probabilities").then_some(2);
        let p = routed(&[1]);
        let order = p.check_structure().unwrap();
        // The document alone cannot tell how many labels the router has.
        assert!(p.check().unwrap_err().0.contains("label_in"));
        assert!(p.check_outputs_total(&order, &|_| None).is_err());
        assert_eq!(p.check_outputs_total(&order, &two), Ok(()));
        // Three labels: label 2 has no branch.
        let three = |s: &str| (s == "router.probabilities").then_some(3);
        assert!(p.check_outputs_total(&order, &three).is_err());
        assert_eq!(routed(&[1, 2]).check_outputs_total(&order, &three), Ok(()));
        // A branch whose own input does not run for every row proves nothing.
        let mut p = routed(&[1]);
        p.nodes[2]
            .inputs
            .insert("input".into(), "a.probabilities".into());
        let order = p.check_structure().unwrap();
        assert!(p.check_outputs_total(&order, &two).is_err());
    }

    #[test]
    fn a_cascade_checks_and_orders_nodes_after_their_sources() {
        let p = cascade();
        let order = p.check().unwrap();
        let names: Vec<&str> = order.iter().map(|&k| p.nodes[k].name.as_str()).collect();
        assert_eq!(names, vec!["fast", "slow", "answer"]);
        assert_eq!(p.slo.percentile(), 99.0);
        assert_eq!(p.parents()[0], vec![1, 2]);
    }

    #[test]
    fn cycles_are_named() {
        let mut p = cascade();
        p.nodes[2]
            .inputs
            .insert("input".into(), "answer.output".into());
        let e = p.check().unwrap_err().0;
        assert!(e.contains("cycle"), "{e}");
        assert!(
            e.contains("answer") && e.contains("fast") && e.contains("slow"),
            "{e}"
        );
    }

    #[test]
    fn unknown_nodes_inputs_and_bad_conditions_are_named() {
        let mut p = cascade();
        p.nodes[1].inputs.insert("input".into(), "picture".into());
        let e = p.check().unwrap_err().0;
        assert!(
            e.contains("node 'slow', input 'input'") && e.contains("'picture'"),
            "{e}"
        );

        let mut p = cascade();
        p.nodes[0].from[0] = "slower.probabilities".into();
        assert!(p.check().unwrap_err().0.contains("unknown node 'slower'"));

        let mut p = cascade();
        p.nodes[1].when.as_mut().unwrap().top_probability_below = Some(1.5);
        assert!(p.check().unwrap_err().0.contains("top_probability_below"));

        let mut p = cascade();
        p.nodes[1].app = Some("x".into());
        assert!(p.check().unwrap_err().0.contains("exactly one of"));
    }

    #[test]
    fn an_output_behind_a_switch_must_go_through_a_combiner() {
        let mut p = cascade();
        p.outputs
            .insert("slow_only".into(), "slow.probabilities".into());
        let e = p.check().unwrap_err().0;
        assert!(
            e.contains("output 'slow_only'") && e.contains("combine: first"),
            "{e}"
        );
    }

    #[test]
    fn bad_slo_is_named() {
        let mut p = cascade();
        p.slo.percentile = Some(120.0);
        assert!(p.check().unwrap_err().0.contains("slo.percentile"));
        let mut p = cascade();
        p.slo.min_accuracy = Some(2.0);
        assert!(p.check().unwrap_err().0.contains("slo.min_accuracy"));
    }

    #[test]
    fn unknown_fields_are_rejected() {
        let e = serde_json::from_value::<PipelineSpec>(serde_json::json!({
            "name": "p", "inputs": [], "nodes": [], "outputs": {}, "sla": {}
        }))
        .unwrap_err();
        assert!(e.to_string().contains("sla"), "{e}");
    }
}
