//! Pipelines of models on a SIMULATED cluster, evaluated: pipelines built from the Proteus
//! catalogue ([`catalogue`]), the per-stage and coarse-grained (CG-Peak) baselines
//! ([`baselines`]), and the evaluation that compares them with InferLine's plan and tuner
//! ([`evaluation`]). The estimator and the runner they use are the simulator's
//! (`infaas_sim::pipeline`). Nothing here runs a model: every figure is SIMULATED from
//! measured profiles.
//!
//! **The evaluation** ([`evaluate`]): [`pipelines`] built from the catalogue ([`problem_for`]:
//! every profiled (model, accelerator, batch) of a stage's family is an option, grouped by
//! (model, accelerator)), planned on a prefix of a Proteus trace pattern and replayed on the
//! whole pattern under InferLine (plan + tuner) and the baselines ([`per_stage`],
//! [`cg_peak`]).

pub mod baselines;
pub mod catalogue;
pub mod evaluation;
#[cfg(test)]
mod tests;

pub use baselines::{cg_peak, per_stage, Baseline};
pub use catalogue::{
    best_accuracy, find_option, input_arrivals, options_for, pipeline, pipelines, plan_nodes,
    problem_for, CataloguePipeline, CatalogueStage, Input, OptionSettings, PipelineError,
    PIPELINES,
};
pub use evaluation::{evaluate, EvalSettings, PipelineEval, PipelineRow};
