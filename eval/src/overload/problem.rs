//! The pipelines of the overload evaluation, their Loki problem on the cluster, and what the
//! cluster carries at full accuracy.

use std::collections::BTreeMap;

use infaas_scheduler::loki::{hardware_scaling, LokiError, LokiProblem, LokiSettings};
use infaas_sim::catalogue::Profile;

use crate::pipeline::{
    pipelines, plan_nodes, CataloguePipeline, CatalogueStage, OptionSettings, PipelineError,
};

/// The cluster of Loki's bench (`eval/benches/loki.rs`): workers per pool.
pub const WORKERS: [(&str, usize); 3] = [("cpu", 8), ("gpu_pascal", 6), ("gpu_ampere", 6)];
/// The default end-to-end SLO, ms (processing along a path gets half of it, Loki §4.1).
pub const SLO_MS: f64 = 600.0;
/// The pipelines [`overload_pipelines`] defines, by name.
pub const OVERLOAD_PIPELINES: &[&str] = &["detect-classify", "three-stage", "cascade", "traffic"];
/// Most tasks of a pipeline the simulator handles.
pub const MAX_TASKS: usize = 8;

/// Loki's traffic-analysis pipeline (§6.1) from Proteus families: object detection (yolov5),
/// then car classification (efficientnet) for 60% of the queries and face recognition (resnet,
/// standing in for Loki's VGG, which the catalogue lacks) for 40%, drawn independently.
pub fn traffic() -> CataloguePipeline {
    let stage = |name, family, parents: &[usize], p| CatalogueStage {
        name,
        family,
        parents: parents.to_vec(),
        branch_probability: p,
    };
    CataloguePipeline {
        name: "traffic",
        description: "yolov5 detection -> {efficientnet cars (60%), resnet faces (40%)}",
        stages: vec![
            stage("detect", "yolo", &[], 1.0),
            stage("car", "efficientnet", &[0], 0.6),
            stage("face", "resnet", &[0], 0.4),
        ],
    }
}

/// The pipelines of the overload evaluation: the catalogue's trees ([`pipelines`] without the
/// `social-dag`, whose join Loki's trees exclude) and [`traffic`].
pub fn overload_pipelines() -> Vec<CataloguePipeline> {
    let mut v: Vec<CataloguePipeline> = pipelines()
        .into_iter()
        .filter(|p| OVERLOAD_PIPELINES.contains(&p.name))
        .collect();
    v.push(traffic());
    v
}

/// A pipeline of [`overload_pipelines`] by name.
pub fn overload_pipeline(name: &str) -> Option<CataloguePipeline> {
    overload_pipelines().into_iter().find(|p| p.name == name)
}

/// Why an overload evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum OverloadError {
    #[error("unknown pipeline '{name}'; expected one of {}", OVERLOAD_PIPELINES.join(", "))]
    Unknown { name: String },
    /// A stage's family has no profile in the catalogue.
    #[error(transparent)]
    Catalogue(#[from] PipelineError),
    #[error(
        "pipeline '{0}' is not a rooted tree of at most {MAX_TASKS} tasks in topological order"
    )]
    NotATree(String),
    #[error("the cluster cannot carry any demand with the most accurate variants")]
    NoCapacity,
    #[error("the workload holds no arrivals")]
    EmptyWorkload,
    /// [`Overload::accuracy_ceiling`] cannot express the simulator's accuracy measure.
    #[error("no accuracy ceiling: {0}")]
    Ceiling(String),
    #[error(transparent)]
    Loki(#[from] LokiError),
}

/// The Loki problem of a pipeline on a cluster: every option of each stage's family (the
/// simulator's [`crate::pipeline::options_for`] with its default settings: CPU with 4 cores
/// an instance, GPU Pascal and Ampere), the bench's cluster shape, SLO `slo_ms`; the demand
/// is set per plan.
pub fn loki_problem(
    spec: &CataloguePipeline,
    catalogue: &[Profile],
    slo_ms: f64,
    workers: &BTreeMap<String, usize>,
) -> Result<LokiProblem, OverloadError> {
    if spec.stages.is_empty() || spec.stages.len() > MAX_TASKS {
        return Err(OverloadError::NotATree(spec.name.into()));
    }
    for (i, s) in spec.stages.iter().enumerate() {
        let tree = if i == 0 {
            s.parents.is_empty()
        } else {
            s.parents.len() == 1 && s.parents[0] < i
        };
        if !tree {
            return Err(OverloadError::NotATree(spec.name.into()));
        }
    }
    let nodes = plan_nodes(spec, catalogue, &OptionSettings::default())?;
    Ok(LokiProblem::new(
        nodes,
        0.0,
        slo_ms,
        workers.iter().map(|(k, v)| (k.clone(), *v)),
    ))
}

/// The cluster of [`WORKERS`].
pub fn default_workers() -> BTreeMap<String, usize> {
    WORKERS.iter().map(|(k, n)| ((*k).to_owned(), *n)).collect()
}

/// The largest demand (to 1%) that [`hardware_scaling`] carries with the most accurate
/// variants on the whole cluster (0 when it carries none).
pub fn full_accuracy_capacity(p: &LokiProblem, s: &LokiSettings) -> Result<f64, LokiError> {
    let carried = |d: f64| hardware_scaling(&p.with_demand(d), s).map(|a| a.is_some());
    let (mut lo, mut hi) = (0.1f64, 1.0f64);
    if !carried(lo)? {
        return Ok(0.0);
    }
    while carried(hi)? {
        lo = hi;
        hi *= 2.0;
        if hi > 1e7 {
            return Ok(lo);
        }
    }
    while hi / lo > 1.01 {
        let mid = (lo * hi).sqrt();
        if carried(mid)? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}
