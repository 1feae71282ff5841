//! Autoscaling policies (INFaaS §4.2, §5; Themis §4-5) as pure functions of their inputs.
//!
//! The control loops that gather the inputs and carry out the [`Action`]s live elsewhere; here
//! nothing does I/O or waits.
//!
//! - [`mod@model`]: the Model-Autoscaler's greedy heuristic (replicate, upgrade, remove a
//!   replica, downgrade), one decision in well under a millisecond.
//! - [`mod@ilp`]: the same problem solved exactly as an integer linear program (CBC), and
//!   [`ilp::gap`], which measures how far a greedy plan is from the optimum.
//! - [`mod@vertical`]: Themis' vertical-first scaling: more intra-op threads for an overloaded
//!   CPU instance now, smaller instances once the load has been stable.
//! - [`mod@themis`]: Themis' transition policy for one stage as a state machine: threads first
//!   on a surge, replicas once the forecast says it stays, then back to base threads.
//! - [`mod@workers`]: the VM-Autoscaler's decision to add or remove workers.
//! - [`mod@migration`]: moving instances that stay Interfered.
//! - [`mod@load`]: the load a family is planned for (bursts at once, lulls smoothed).
//! - [`mod@period`]: one model-autoscaler period (vertical first, then the plan, then
//!   migration), as the controller and the simulator run it.
//! - [`mod@resolve`]: an action turned into steps on named workers, with the room it takes.
//!
//! # The model-scaling problem
//!
//! A [`Family`] is one model architecture of an application: the variants that can serve its
//! queries, the load it must serve `L` (rows/s), its latency SLO `S` and minimum accuracy. For
//! variant `j`: `Q_j` its saturation throughput ([`VariantEntry::peak_qps`]), `C_j` the price per
//! second of the resources an instance holds ([`Prices::rate_per_s`]), `T_j` its load time in
//! seconds, `N_j` its running instances, of which `R_j` may be removed.
//!
//! Variables (all non-negative integers, except `u`):
//! - `x_jw`: new instances of `j` loaded on worker `w`, only for `j` that may be loaded for its
//!   family (p99 at a full batch within the SLO, accuracy at least the minimum, `Q_j > 0`) and
//!   `w` alive with `j`'s hardware; bounded by what fits on `w` and by `ceil(slack * L / Q_j)`;
//! - `r_j <= R_j`: running instances of `j` unloaded;
//! - `u_f >= 0` (continuous): load of family `f` left without capacity, rows/s.
//!
//! Constraints:
//! 1. load with slack, per family: `sum_j Q_j (N_j - r_j + sum_w x_jw) + u_f >= slack * L_f`;
//! 2. SLO and accuracy of newly loaded variants: by construction of the `x` variables;
//! 3. resources, per worker: `sum_j threads_j x_jw <= free cores of w` and the same for memory.
//!    Loads must fit in the room there is now: the controller loads first and unloads the
//!    replaced instances once the new ones serve, so a plan never counts on freed room;
//! 4. counts stay non-negative: `r_j <= R_j`.
//!
//! Objective (INFaaS' `sum Cost(delta)` plus the running cost, which differs by a constant):
//!
//! `min  sum_j C_j (N_j - r_j + X_j)  +  lambda * sum_j C_j T_j X_j  +  M * sum_f u_f`
//!
//! with `X_j = sum_w x_jw`. `lambda` (1/s) weighs load time against hardware cost; `M` is large
//! enough that leaving load unserved is only chosen when nothing can be loaded ([`Objective`]).
//!
//! # Thresholds ([`ScalingConfig`])
//!
//! - `slack` (1.05, INFaaS §5): headroom = saturation throughput of a family's running
//!   instances / its load. Below `slack`, the family scales up.
//! - `scale_down` (1.5): above it, the family considers removing a replica or downgrading,
//!   each only when headroom stays at least `slack` afterwards, and only for instances that have
//!   been in their state for at least their variant's load time (INFaaS' `T_v`) and, unless
//!   the family is short of capacity, for `scale_in_hold_ms` (10 s).
//! - `lambda_per_s` (0.1): weight of load time in the objective.
//!
//! Worker thresholds (80% utilisation, 80% of workers overloaded, cool-down) are in
//! [`WorkerConfig`]; vertical scaling's in [`VerticalConfig`]; migration's in
//! [`MigrationConfig`].

mod by_id;
pub mod ilp;
pub mod load;
pub mod migration;
pub mod model;
pub mod model_loop;
pub mod period;
mod problem;
pub mod resolve;
pub mod themis;
pub mod vertical;
pub mod workers;

use infaas_core::HardwareKind;
use serde::{Deserialize, Serialize};

#[cfg(doc)]
use crate::snapshot::{Prices, VariantEntry};

pub use ilp::{exact, exact_with, gap, Gap};
pub use load::{hold_periods, Arrivals, PlannedLoad};
pub use migration::{interfered_periods_after, migrations, InterferenceCounter, MigrationConfig};
pub use model::greedy;
pub use model_loop::{
    hold_within_forecast, LiveFamily, LoopConfig, LoopInput, LoopPeriod, ModelLoop, Signal,
    DEFAULT_MODEL_PERIOD_MS, FORECAST_HOLD_MARGIN, FORECAST_TRUSTED_ERROR,
};
pub use period::{
    model_period, plan_demands, releasable_view, Demand, FamilyState, PeriodConfig, PeriodInput,
    PeriodPlan, Planner, Shortage,
};
pub use problem::{Family, FamilyDemand, Objective, Running, ScalingInput, ScalingPlan};
pub use resolve::{resolve, ActionPlan, ClaimedRoom, Resolution, Step};
pub use themis::{
    StageInstance, Themis, ThemisAction, ThemisConfig, ThemisDecision, ThemisError, ThemisInput,
    ThemisPhase, ThreadProfile,
};
pub use vertical::{
    peak_at, vertical, vertical_settling, vertical_threads, CpuInstance, Settling, SettlingWhy,
    Stability, VerticalConfig,
};
pub use workers::{scale_workers, worker_period, WorkerConfig, WorkerPeriod, WorkerView};

/// Thresholds and weights of model autoscaling; see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScalingConfig {
    /// Minimum headroom (saturation throughput / load); below it a family scales up.
    pub slack: f64,
    /// Headroom above which a family considers scaling down.
    pub scale_down: f64,
    /// Weight of load time in the objective, per second.
    pub lambda_per_s: f64,
    /// Scale-in stabilisation, in ms: a family that is not short of capacity removes or
    /// downgrades only instances that have been in their state at least this long (and at
    /// least their variant's load time). A replica just loaded or split off is not taken
    /// back on a dip of the measured load while instances change. Scaling up is not held.
    #[serde(default = "default_scale_in_hold_ms")]
    pub scale_in_hold_ms: f64,
    /// Peak hold, in ms: a family plans for the highest rate of its periods within this long
    /// ([`PlannedLoad`]), so that capacity a burst needed is kept until the pattern has
    /// stayed calm this long. 0: the period's rate and its smoothed mean only.
    #[serde(default = "default_peak_hold_ms")]
    pub peak_hold_ms: f64,
}

fn default_peak_hold_ms() -> f64 {
    ScalingConfig::default().peak_hold_ms
}

fn default_scale_in_hold_ms() -> f64 {
    ScalingConfig::default().scale_in_hold_ms
}

/// The share of an SLO family's queries that the headroom it keeps may let miss by queueing
/// ([`queueing_slack`]).
pub const SLO_MISS_TARGET: f64 = 0.01;
/// The most headroom queueing asks for (an SLO within a few service times of the model's own
/// run is met by batching and replicas rather than by idle capacity).
pub const MAX_QUEUEING_SLACK: f64 = 2.0;

/// Headroom (capacity / load) at which single-row queries with a latency SLO of `slo_ms`
/// queue past it at most [`SLO_MISS_TARGET`] of the time, on `servers` instances whose one-row
/// run takes `service_ms` and among which selection sends each query to the shortest queue (so
/// that they wait as one pooled queue): the largest utilisation `rho` with
/// `C(c, c rho) * exp(-2 c k (1 - rho) / rho) <= target`, `k = (slo - service) / service`,
/// where `C` is Erlang's C (the chance that a query waits at all; `rho` for one server) and the
/// exponential the tail of its wait (Poisson arrivals and a fixed service time, in Kingman's
/// heavy-traffic form, c-fold faster for c servers); as `1 / rho`, at most
/// [`MAX_QUEUEING_SLACK`]. 1 when there is nothing to reserve (no SLO, an SLO the run itself
/// misses, or no profile).
/// Zoo CNN, 3.6 ms a row against a 36 ms SLO on one instance: utilisation 0.80, headroom 1.25;
/// a 0.05 ms model against 50 ms: about 1.00. A model whose run takes 250 ms against a 300-ms
/// SLO keeps the cap, 2, on up to five instances, 1.62 on ten and 1.19 on forty.
///
/// Memoised per thread (the planner asks for the same few SLOs, service times and instance
/// counts every period, and the bisection is most of a period's work in the simulator).
pub fn queueing_slack(slo_ms: f64, service_ms: f64, servers: usize) -> f64 {
    if !(slo_ms.is_finite() && service_ms.is_finite() && service_ms > 0.0 && slo_ms > service_ms) {
        return 1.0;
    }
    /// Entries kept before the memo starts afresh.
    const MEMO_ENTRIES: usize = 4096;
    thread_local! {
        static MEMO: std::cell::RefCell<std::collections::HashMap<(u64, u64, usize), f64>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    let key = (slo_ms.to_bits(), service_ms.to_bits(), servers);
    if let Some(v) = MEMO.with(|m| m.borrow().get(&key).copied()) {
        return v;
    }
    let v = queueing_slack_uncached(slo_ms, service_ms, servers);
    MEMO.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= MEMO_ENTRIES {
            m.clear();
        }
        m.insert(key, v);
    });
    v
}

fn queueing_slack_uncached(slo_ms: f64, service_ms: f64, servers: usize) -> f64 {
    let k = (slo_ms - service_ms) / service_ms;
    let c = servers.max(1);
    let tail =
        |rho: f64| erlang_c(c, c as f64 * rho) * (-2.0 * c as f64 * k * (1.0 - rho) / rho).exp();
    let (mut lo, mut hi) = (1.0 / MAX_QUEUEING_SLACK, 1.0);
    if tail(lo) > SLO_MISS_TARGET {
        return MAX_QUEUEING_SLACK;
    }
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if tail(mid) <= SLO_MISS_TARGET {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    1.0 / lo
}

/// Erlang's C: the chance that a query waits, at `servers` servers offered `load` (in servers,
/// below `servers`), by Erlang B's recursion; 1 at or above saturation.
pub fn erlang_c(servers: usize, load: f64) -> f64 {
    let c = servers as f64;
    if load.is_nan() || load >= c {
        return 1.0;
    }
    let mut b = 1.0;
    for n in 1..=servers {
        b = load * b / (n as f64 + load * b);
    }
    c * b / (c - load * (1.0 - b))
}

impl ScalingConfig {
    /// Headroom a family keeps: `slack`, or more when its SLO against its instances' one-row
    /// service time asks for it, on `servers` instances ([`queueing_slack`]).
    pub fn slack_for(&self, slo_ms: Option<f64>, service_ms: f64, servers: usize) -> f64 {
        slo_ms.map_or(self.slack, |slo| {
            self.slack.max(queueing_slack(slo, service_ms, servers))
        })
    }

    /// The headroom a family keeps over its planned load `load_qps` of which `rate_qps`
    /// arrives now (the rest is the peak hold's): the queueing headroom
    /// ([`Self::slack_for`]) over the rate now, the base slack over the held peak. A held
    /// peak is a one-second rate the family saw: it asks for the capacity to serve that second
    /// again, not for queueing headroom on top, which the load now asks for when the burst
    /// comes back (keeping both held 1.3-1.6x the capacity of provisioning for the trace's
    /// busiest second, at the baselines' accuracy).
    pub fn headroom(
        &self,
        slo_ms: Option<f64>,
        service_ms: f64,
        servers: usize,
        load_qps: f64,
        rate_qps: f64,
    ) -> f64 {
        let queueing = self.slack_for(slo_ms, service_ms, servers);
        if load_qps > 0.0 && rate_qps.is_finite() && rate_qps >= 0.0 {
            self.slack.max(queueing * rate_qps.min(load_qps) / load_qps)
        } else {
            queueing
        }
    }

    /// `scale_down` raised in proportion when [`Self::slack_for`] raises the slack.
    pub fn scale_down_for(&self, slack: f64) -> f64 {
        self.scale_down * (slack / self.slack).max(1.0)
    }

    /// The defaults with headroom `slack`, scaling down above the same ratio to it as the
    /// defaults keep (1.5 / 1.05).
    pub fn with_slack(slack: f64) -> ScalingConfig {
        let d = ScalingConfig::default();
        ScalingConfig {
            slack,
            scale_down: d.scale_down * slack / d.slack,
            ..d
        }
    }
}

impl Default for ScalingConfig {
    fn default() -> Self {
        ScalingConfig {
            slack: 1.05,
            scale_down: 1.5,
            lambda_per_s: 0.1,
            scale_in_hold_ms: 10_000.0,
            peak_hold_ms: 60_000.0,
        }
    }
}

/// What to change. Instance, variant and worker numbers are indices into the snapshot (or the
/// slices) the decision was taken on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionKind {
    /// Load one more instance of `variant` on `worker` (a new variant of the family when none
    /// of it runs).
    Replicate { variant: usize, worker: usize },
    /// Load `to`, a variant with a higher saturation throughput, on `worker`, then unload
    /// instance `from`.
    Upgrade {
        from: usize,
        to: usize,
        worker: usize,
    },
    /// Load `to`, a variant with no higher saturation throughput (chosen for its lower
    /// price), on `worker`, then unload instance `from`.
    Downgrade {
        from: usize,
        to: usize,
        worker: usize,
    },
    /// Unload `instance`.
    RemoveReplica { instance: usize },
    /// Raise `instance`'s intra-op threads from `from` to `to` in place.
    AddThreads {
        instance: usize,
        from: usize,
        to: usize,
    },
    /// Load `replicas` new instances at `threads` threads beside `instance`, then shrink
    /// `instance` to `threads`.
    Rebalance {
        instance: usize,
        threads: usize,
        replicas: usize,
    },
    /// Load `instance`'s variant on `to_worker`, then unload `instance` from `from_worker`.
    Migrate {
        instance: usize,
        from_worker: usize,
        to_worker: usize,
    },
    /// Start a worker with `hardware`.
    AddWorker { hardware: HardwareKind },
    /// Stop `worker`.
    RemoveWorker { worker: usize },
}

impl ActionKind {
    /// The variant a model action concerns in snapshot `s` (the new one for loads, the
    /// instance's for the others); `None` for worker actions or an instance `s` lacks.
    pub fn variant(&self, s: &crate::snapshot::Snapshot) -> Option<usize> {
        match *self {
            ActionKind::Replicate { variant, .. } => Some(variant),
            ActionKind::Upgrade { to, .. } | ActionKind::Downgrade { to, .. } => Some(to),
            ActionKind::RemoveReplica { instance }
            | ActionKind::AddThreads { instance, .. }
            | ActionKind::Rebalance { instance, .. }
            | ActionKind::Migrate { instance, .. } => Some(s.instances().get(instance)?.variant),
            ActionKind::AddWorker { .. } | ActionKind::RemoveWorker { .. } => None,
        }
    }
}

/// One decision with its reason and what it does to the cost of the resources involved (the
/// family's instances for model actions, the instance for vertical ones, the fleet for worker
/// ones), per second.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub kind: ActionKind,
    pub reason: String,
    pub cost_before_per_s: f64,
    pub cost_after_per_s: f64,
}

/// Why a policy could not decide.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScalingError {
    #[error("{what} index {index} is out of range")]
    OutOfRange { what: &'static str, index: usize },
    #[error("variant {variant} belongs to families {first} and {second}")]
    SharedVariant {
        variant: usize,
        first: usize,
        second: usize,
    },
    #[error("family {family:?}: {problem}")]
    InvalidFamily {
        family: String,
        problem: &'static str,
    },
    #[error(transparent)]
    Solver(#[from] crate::milp::MilpError),
    #[error("the solver stopped before proving optimality ({0})")]
    NotOptimal(&'static str),
}

#[cfg(test)]
pub(crate) mod tests;
