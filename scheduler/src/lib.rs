//! Policies as pure functions over snapshots (variant selection, autoscaling, planning).
//!
//! - [`instance_state`]: the per-instance state machine (Inactive, Active, Overloaded, Interfered).
//! - [`snapshot`]: the controller's index of variants, workers and instances, and prices.
//! - [`mod@select`]: INFaaS `getVariant` for one arriving query.
//! - [`autoscale`]: model, vertical, worker and migration autoscaling decisions.
//! - [`forecast`]: load prediction (exponential-smoothing forecasters, their errors, model
//!   selection).
//! - [`milp`]: the one door to the MILP solvers (CBC by default, HiGHS as a feature).
//! - [`loki`]: Loki's resource manager (its loop: when to plan and for what demand, the
//!   controller's and the simulator's; hardware then accuracy scaling, MILPs with a
//!   bounded-time greedy fallback), MostAccurateFirst routing and early dropping with
//!   opportunistic rerouting, for pipelines whose tasks trade accuracy for throughput.
//! - [`offline`]: which variant and worker an offline job uses, and when it may run.
//! - [`prune`]: which generated variants a registration keeps (dominated ones are pruned).
//! - [`pipeline`]: pipelines of models: InferLine's planner (options, batch sizes and replicas
//!   per node against an end-to-end latency SLO, model-less) and its reactive tuner.

pub mod autoscale;
pub mod forecast;
pub mod instance_state;
pub mod loki;
pub mod milp;
pub mod offline;
pub mod pipeline;
pub mod prune;
pub mod select;
pub mod snapshot;

pub use instance_state::{
    next_state, peak_qps, self_contended, short_of_profile, InstanceFigures, InstanceState,
    Thresholds, AT_PROFILE,
};
pub use select::{select, Closest, Decision, Query, Target};
pub use snapshot::{
    variant_cost_per_query, Clock, InFlight, InFlightGuard, InstanceEntry, PendingLoad, Prices,
    Snapshot, SnapshotBuilder, SnapshotError, VariantEntry, WorkerEntry, BUSY_WITHIN_MS,
    INTERFERENCE_MEMORY_MS,
};
