//! Pipelines of models on a SIMULATED cluster: InferLine's trace-driven Estimator, which the
//! pipeline planner (`infaas_scheduler::pipeline`) asks of its candidates, and a runner that
//! replays a live trace on a plan with the tuner driving replicas. Nothing here runs a model:
//! every figure is SIMULATED from measured profiles. The pipelines of the Proteus catalogue,
//! the baselines and their evaluation are in `infaas-eval`.
//!
//! **The estimator** ([`TraceEstimator`]) simulates the pipeline stage by stage in
//! topological order: a stage's arrivals are its parents' completions (the latest of the
//! parents a query reached), and each stage is a centralised FIFO batched queue (InferLine's
//! serving model): a free replica takes up to `max_batch` queued queries at once, and a batch
//! of `b` takes the profile's **mean** at `b` (`VariantEntry::latency_at(b)`, the profiled
//! batch that holds `b`), deterministically. Which queries run a branch of a switch is drawn
//! once per (query, node) from the seed ([`branch_draw`]), so every estimate sees the same
//! branches. Per-node completion times are cached by the configurations of the node and its
//! ancestors, so a change at node `m` recomputes only `m` and its descendants. A feasibility
//! check ([`Estimator::feasible`], what the planner asks of every candidate) gives up as soon
//! as more queries have missed the SLO than the percentile allows (their latency can only grow
//! downstream), which the planner's many infeasible candidates make worth it; a full
//! [`Estimator::estimate`] always runs to the end.
//!
//! **The runner** ([`replay`]) replays a (longer) live trace on a configuration with the same
//! stage model, replicas changing over time as the tuner decides once a second from the
//! arrivals of the last 60 s; an added replica serves after its variant's load time, a removed
//! one stops taking batches at once; cost is every replica's held time (loading included) at
//! its price. Service times are the same deterministic means as the estimator's, so what
//! differs from the estimate is the workload (live versus planning trace) and the tuner's
//! reaction (decision period, activation delay).
//!
//! [`Estimator::feasible`]: infaas_scheduler::pipeline::Estimator::feasible
//! [`Estimator::estimate`]: infaas_scheduler::pipeline::Estimator::estimate

mod branches;
mod estimator;
mod runner;
#[cfg(test)]
mod tests;

pub use branches::branch_draw;
pub use estimator::{EstimatorStats, TraceEstimator};
pub use runner::{
    replay, tuner_decisions, ReplayOptions, ReplayReport, ReplaySecond, TunerDecision,
};
