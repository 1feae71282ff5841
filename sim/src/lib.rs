//! The cluster simulator (SIMULATED: nothing here runs a model). A discrete-event engine
//! ([`engine`]) replays a workload ([`trace`]: the documented CSV trace format and the Proteus
//! Twitter traces; [`generate`]: Poisson, Gamma, step, burst and diurnal arrivals) on a
//! cluster whose variants come from measured profiles ([`catalogue`]: the Proteus catalogue
//! read into the scheduler's variant entries), under a routing and scaling policy
//! ([`policy`]: the platform's, calling the scheduler's functions, and baselines), and
//! reports per-second series and totals ([`report`]). Pipelines of models ([`pipeline`]):
//! InferLine's trace-driven estimator (the pipeline planner's) and a runner with the tuner.
//! The control plane's what-if runs and pipeline plans call this crate; the evaluations of
//! papers built on it (Loki, InferLine, Proteus, Themis) are in `infaas-eval`.

pub mod catalogue;
pub mod engine;
pub mod generate;
pub mod pipeline;
pub mod policy;
pub mod report;
/// The trace format (it lives in `infaas-core`, shared with the load generator and the
/// platform's traffic export).
pub use infaas_core::trace;

pub use engine::{
    request_cpu_ms_accepted, simulate, simulate_recording_jobs, variants_for, Cluster, JobStep,
    Noise, OfflineJob, SimError, MAX_REQUEST_CPU_MS,
};
