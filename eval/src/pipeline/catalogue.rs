//! The pipelines of the Proteus catalogue: stages by family, every profiled option of a
//! family, the planner's problem of a pipeline, and which arrivals of a trace feed it.

use infaas_scheduler::pipeline::{
    reach_probabilities, PlanError, PlanNode, PlanOption, PlanProblem,
};
use infaas_sim::catalogue::{Accelerator, Profile};
use infaas_sim::trace::Trace;
use serde::Serialize;

/// A stage of a catalogue pipeline: a node serving an application (a Proteus family).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatalogueStage {
    pub name: &'static str,
    pub family: &'static str,
    pub parents: Vec<usize>,
    pub branch_probability: f64,
}

/// A pipeline of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CataloguePipeline {
    pub name: &'static str,
    pub description: &'static str,
    pub stages: Vec<CatalogueStage>,
}

fn stage(
    name: &'static str,
    family: &'static str,
    parents: &[usize],
    branch_probability: f64,
) -> CatalogueStage {
    CatalogueStage {
        name,
        family,
        parents: parents.to_vec(),
        branch_probability,
    }
}

/// The pipelines [`pipelines`] defines, by name.
pub const PIPELINES: &[&str] = &["detect-classify", "three-stage", "cascade", "social-dag"];

/// The catalogue's pipelines:
/// - `detect-classify`: object detection (yolov5) then classification (resnet);
/// - `three-stage`: detection (yolov5), classification (efficientnet), then a text model on
///   the result (bert family);
/// - `cascade`: a cheap classifier (mobilenet) on every query, an expensive one (resnest) on
///   the 30% it is unsure of (a switch);
/// - `social-dag`: five nodes with a fan-out, a switch and a join: detection (yolov5) feeds
///   classification (resnet) and, for half the queries, a scene model (efficientnet);
///   classification feeds a fine-grained model (densenet) for 30% of them; a text model (bert)
///   joins the scene and fine-grained branches.
pub fn pipelines() -> Vec<CataloguePipeline> {
    vec![
        CataloguePipeline {
            name: "detect-classify",
            description: "yolov5 detection -> resnet classification",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "resnet", &[0], 1.0),
            ],
        },
        CataloguePipeline {
            name: "three-stage",
            description: "yolov5 detection -> efficientnet classification -> bert text",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "efficientnet", &[0], 1.0),
                stage("text", "bert", &[1], 1.0),
            ],
        },
        CataloguePipeline {
            name: "cascade",
            description: "mobilenet on every query -> resnest on 30% (switch)",
            stages: vec![
                stage("cheap", "mobilenet", &[], 1.0),
                stage("expensive", "resnest", &[0], 0.3),
            ],
        },
        CataloguePipeline {
            name: "social-dag",
            description: "yolov5 -> {resnet -> densenet (30%), efficientnet (50%)} -> bert (join)",
            stages: vec![
                stage("detect", "yolo", &[], 1.0),
                stage("classify", "resnet", &[0], 1.0),
                stage("scene", "efficientnet", &[0], 0.5),
                stage("fine", "densenet", &[1], 0.3),
                stage("text", "bert", &[2, 3], 1.0),
            ],
        },
    ]
}

/// A pipeline of [`pipelines`] by name.
pub fn pipeline(name: &str) -> Option<CataloguePipeline> {
    pipelines().into_iter().find(|p| p.name == name)
}

/// How the catalogue's profiles become options.
#[derive(Debug, Clone, PartialEq)]
pub struct OptionSettings {
    /// Hardware a node may run on.
    pub accelerators: Vec<Accelerator>,
    /// Cores a CPU replica holds.
    pub cpu_threads: usize,
    pub load_ms_cpu: f64,
    pub load_ms_gpu: f64,
    pub memory_bytes: u64,
}

impl Default for OptionSettings {
    /// CPU (4 cores a replica) and both GPU generations, the simulator's load times (2 s on
    /// CPU, 5 s on GPU, the activation time of InferLine's serving systems) and 2 GB of memory.
    fn default() -> Self {
        OptionSettings {
            accelerators: vec![
                Accelerator::Cpu,
                Accelerator::GpuPascal,
                Accelerator::GpuAmpere,
            ],
            cpu_threads: 4,
            load_ms_cpu: 2_000.0,
            load_ms_gpu: 5_000.0,
            memory_bytes: 2 << 30,
        }
    }
}

/// Every profiled (model, accelerator, batch) of `family` as options, one group per (model,
/// accelerator) ([`Profile::variants`]).
pub fn options_for(catalogue: &[Profile], family: &str, s: &OptionSettings) -> Vec<PlanOption> {
    let mut out = Vec::new();
    for (group, p) in catalogue
        .iter()
        .filter(|p| p.family == family && s.accelerators.contains(&p.accelerator))
        .enumerate()
    {
        let (threads, load_ms) = match p.accelerator {
            Accelerator::Cpu => (s.cpu_threads.max(1), s.load_ms_cpu),
            _ => (1, s.load_ms_gpu),
        };
        out.extend(
            p.variants(family, threads, load_ms, s.memory_bytes)
                .into_iter()
                .map(|variant| PlanOption {
                    variant,
                    group: group as u32,
                }),
        );
    }
    out
}

/// Why a pipeline evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("unknown pipeline '{name}'; expected one of {}", PIPELINES.join(", "))]
    Unknown { name: String },
    #[error(
        "pipeline '{pipeline}', stage '{stage}': the catalogue has no profile of family '{family}'"
    )]
    NoProfile {
        pipeline: String,
        stage: String,
        family: String,
    },
    #[error("the input trace holds no arrivals")]
    EmptyTrace,
    #[error("planning pipeline '{pipeline}' ({policy}): {source}")]
    Plan {
        pipeline: String,
        policy: String,
        #[source]
        source: PlanError,
    },
}

/// The planning problem of a catalogue pipeline: its stages with every option of their
/// families, P`percentile` SLO `slo_ms`, the default prices.
pub fn problem_for(
    spec: &CataloguePipeline,
    catalogue: &[Profile],
    slo_ms: f64,
    settings: &OptionSettings,
) -> Result<PlanProblem, PipelineError> {
    Ok(PlanProblem::new(
        plan_nodes(spec, catalogue, settings)?,
        slo_ms,
    ))
}

/// A catalogue pipeline's stages as planning nodes, each with every option of its family.
pub fn plan_nodes(
    spec: &CataloguePipeline,
    catalogue: &[Profile],
    settings: &OptionSettings,
) -> Result<Vec<PlanNode>, PipelineError> {
    let mut nodes = Vec::new();
    for s in &spec.stages {
        let options = options_for(catalogue, s.family, settings);
        if options.is_empty() {
            return Err(PipelineError::NoProfile {
                pipeline: spec.name.into(),
                stage: s.name.into(),
                family: s.family.into(),
            });
        }
        nodes.push(PlanNode {
            name: s.name.into(),
            parents: s.parents.clone(),
            branch_probability: s.branch_probability,
            options,
        });
    }
    Ok(nodes)
}

/// The best estimated end-to-end accuracy of a problem (every node on its most accurate
/// option, latency aside).
pub fn best_accuracy(problem: &PlanProblem) -> f64 {
    let reach = reach_probabilities(problem);
    problem
        .nodes
        .iter()
        .zip(&reach)
        .map(|(n, r)| {
            n.options
                .iter()
                .map(|o| o.variant.accuracy)
                .fold(0.0, f64::max)
                .powf(*r)
        })
        .product()
}

/// Which arrivals of a Proteus pattern enter a pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Input {
    /// Every query of the pattern (all families' files): the whole stream feeds the pipeline.
    All,
    /// The queries of the family of the pipeline's first stage only.
    Root,
}

/// The pipeline-entry arrivals (ms, sorted) of `trace` for `spec`.
pub fn input_arrivals(trace: &Trace, spec: &CataloguePipeline, input: Input) -> Vec<f64> {
    let root = spec.stages.first().map(|s| s.family);
    let mut v: Vec<f64> = trace
        .arrivals
        .iter()
        .filter(|a| match input {
            Input::All => true,
            Input::Root => root.is_some_and(|r| trace.apps.get(a.app).is_some_and(|x| x == r)),
        })
        .map(|a| a.at_ms)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Index of a pipeline's options by (model, accelerator) for tests and reports: the option
/// of `model` on the accelerator named `accel` (as in variant names) with max batch `batch`.
pub fn find_option(node: &PlanNode, model: &str, accel: &str, batch: usize) -> Option<usize> {
    let name = format!("{model}@{accel}#b{batch}");
    node.options.iter().position(|o| o.variant.name == name)
}
