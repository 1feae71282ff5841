//! Evaluations of papers on the cluster simulator (`infaas-sim`), SIMULATED: nothing here runs
//! a model. The simulator holds the engines the control plane also calls (the cluster engine,
//! the pipeline estimator and runner); this crate holds what compares policies on them:
//!
//! - [`overload`]: Loki's pipeline-aware accuracy scaling and early dropping against hardware
//!   scaling (InferLine) and per-task accuracy scaling (Proteus) on a fixed cluster under
//!   overload, with capacity and accuracy-ceiling searches (`infaas sim-overload`);
//! - [`pipeline`]: pipelines of the Proteus catalogue planned by InferLine's planner against
//!   the per-stage and CG-Peak baselines (`infaas sim-pipelines`);
//! - [`forecast`]: the forecasters on the Proteus traces, and Themis against horizontal-only
//!   scaling.
//!
//! Nothing in the control plane depends on this crate.

pub mod forecast;
pub mod overload;
pub mod pipeline;
