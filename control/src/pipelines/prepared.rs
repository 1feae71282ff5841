//! The shapes of a registered pipeline: its stored form ([`Pipeline`]) and its form checked
//! against the registry, ready to serve ([`Prepared`]). State only: the operations that make
//! and use them ([`super::registered`], [`super::run`]) sit above.

use infaas_core::pipeline::{NodeKind, PipelineSpec};
use infaas_store::db::PipelineRow;
use serde::{Deserialize, Serialize};

use super::validate::NodeShape;
use crate::error::Error;

/// A pipeline checked against the registry, ready to serve.
#[derive(Debug)]
pub struct Prepared {
    pub pipeline: Pipeline,
    /// Node indices in an order where every node follows those it reads.
    pub order: Vec<usize>,
    pub shapes: Vec<NodeShape>,
    /// Per node, the nodes it reads from.
    pub parents: Vec<Vec<usize>>,
    /// Per node, the model nodes on the longest chain from it to a sink, itself included
    /// (how many shares of the SLO's remainder a node's budget is).
    pub depth: Vec<usize>,
    /// Per node, the fastest time (ms, batch-1 profiles) the pipeline could still take from
    /// its start to a sink: the floor early dropping holds a query's deadline to.
    pub fastest_rest_ms: Vec<f64>,
}

/// One tensor of a signature: name, datatype, shape with `-1` for the batch dimension.
pub type SignatureTensor = (String, String, Vec<i64>);

impl Prepared {
    /// The pipeline's inputs and outputs, as a model's signature.
    pub fn signature(&self) -> (Vec<SignatureTensor>, Vec<SignatureTensor>) {
        let spec = &self.pipeline.spec;
        let inputs = spec
            .inputs
            .iter()
            .map(|i| {
                let dt = infaas_core::DataType::parse(&i.datatype)
                    .map_or_else(|| i.datatype.clone(), |d| d.as_str().to_string());
                let shape = std::iter::once(-1).chain(i.shape.iter().copied()).collect();
                (i.name.clone(), dt, shape)
            })
            .collect();
        let outputs = spec
            .outputs
            .iter()
            .filter_map(|(name, source)| {
                let infaas_core::pipeline::Source::Node { node, output } =
                    infaas_core::pipeline::parse_source(source)
                else {
                    return None;
                };
                let t = self
                    .shapes
                    .get(spec.node_index(node)?)?
                    .outputs
                    .get(output)?;
                let shape = std::iter::once(-1)
                    .chain(t.features.iter().copied())
                    .collect();
                Some((name.clone(), t.datatype.clone(), shape))
            })
            .collect();
        (inputs, outputs)
    }

    /// The applications and models the pipeline's nodes run.
    pub fn targets(&self) -> Vec<(Option<&str>, Option<&str>)> {
        self.pipeline
            .spec
            .nodes
            .iter()
            .filter(|n| n.combine.is_none())
            .map(|n| (n.app.as_deref(), n.model.as_deref()))
            .collect()
    }
}

/// A registered pipeline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pipeline {
    pub id: String,
    pub spec: PipelineSpec,
    /// The applied plan, if any.
    pub plan: Option<serde_json::Value>,
    /// The validation set the planner measures end-to-end accuracy on, if any.
    pub validation: Option<ValidationInfo>,
    pub created_at_ms: i64,
    pub updated_at_ms: i64,
}

impl Pipeline {
    pub(crate) fn from_row(row: PipelineRow) -> Result<Pipeline, Error> {
        let spec = serde_json::from_str(&row.spec).map_err(|e| {
            Error::internal(anyhow::anyhow!(
                "stored pipeline '{}' does not parse: {e}",
                row.name
            ))
        })?;
        let plan = match row.plan.as_deref() {
            Some(p) => Some(serde_json::from_str(p).map_err(|e| {
                Error::internal(anyhow::anyhow!(
                    "stored plan of pipeline '{}' does not parse: {e}",
                    row.name
                ))
            })?),
            None => None,
        };
        let validation = match (row.validation_key, row.validation_output) {
            (Some(key), Some(output)) => Some(ValidationInfo {
                output,
                rows: row.validation_rows.unwrap_or(0).max(0) as usize,
                key,
            }),
            _ => None,
        };
        Ok(Pipeline {
            id: row.id,
            spec,
            plan,
            validation,
            created_at_ms: row.created_at,
            updated_at_ms: row.updated_at,
        })
    }
}

/// A pipeline's validation set as registered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ValidationInfo {
    /// The output the labels grade.
    pub output: String,
    pub rows: usize,
    #[serde(skip)]
    pub(crate) key: String,
}

/// Longest chain of model nodes from each node to a sink, the node included.
pub fn depth_to_sink(p: &Pipeline, parents: &[Vec<usize>], order: &[usize]) -> Vec<usize> {
    let n = p.spec.nodes.len();
    let is_model = |k: usize| !matches!(p.spec.nodes[k].kind(), NodeKind::Combine(_));
    let mut depth = vec![0usize; n];
    for &k in order.iter().rev() {
        let below = (0..n)
            .filter(|c| parents[*c].contains(&k))
            .map(|c| depth[c])
            .max()
            .unwrap_or(0);
        depth[k] = below + usize::from(is_model(k));
    }
    depth
}
