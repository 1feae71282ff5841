//! Overload on a fixed cluster, SIMULATED: Loki's pipeline-aware accuracy scaling and early
//! dropping (Ahmad et al., HPDC'24) against hardware scaling alone (InferLine) and
//! pipeline-unaware, per-task accuracy scaling (Proteus). Nothing here runs a model: service
//! times are the Proteus catalogue's profiled means, decisions are the scheduler's own
//! functions ([`infaas_scheduler::loki`]), called, never copied.
//!
//! **The pipeline** is a rooted tree of tasks ([`overload_pipelines`]: the catalogue's
//! `detect-classify`, `three-stage` and `cascade`, and a Loki-like `traffic` tree), each task
//! with every profiled (model, accelerator, batch) of its family as an option
//! ([`loki_problem`], grouped per (model, accelerator) as Loki's variants), on a fixed cluster
//! ([`WORKERS`]: 8 CPU, 6 GPU Pascal, 6 GPU Ampere workers; an instance takes one worker of its
//! variant's pool).
//!
//! **The simulator** ([`Overload::run`]) is a discrete-event simulation. The resource
//! manager's loop is the controller's: [`Manager`] with [`OverloadSettings::manager`]
//! ([`ManagerSettings::default`], the controller's settings), fed the arrivals of every
//! 1-s tick of simulated time. It decides when to plan and for what demand: every period
//! (10 s, Loki §4.2) for its demand estimate (an exponentially weighted moving average of the
//! per-tick rate, or the last period's mean rate when higher), and at once on a significant
//! change of demand (Loki §4.2, every policy alike): the rate of the last 2 s more than 25%
//! above the demand the plan in force was made for or below half of it (a full window after
//! that plan), for that recent rate, the period restarting from it. A periodic plan takes
//! effect at once; a change-triggered one [`OverloadSettings::change_delay_s`] (0.5 s) later (a
//! fixed stand-in for the solve; a later decision supersedes one still pending). Plans are made
//! for the demand over the manager's target utilisation ([`ManagerSettings::utilisation`],
//! 0.6) and the routing tables are MostAccurateFirst over the placements with their
//! capacities derated to it (Algorithm 1 fills the most accurate placements to 100% of their
//! full-batch throughput, where a batched queue fed by Poisson arrivals never drains); every
//! policy gets the same treatment. A query arriving at the root draws which branches of the
//! tree it takes (each child with its branch probability) and, per task, a placement from the
//! routing tables (per upstream placement). The policy's [`DropPolicy`] decides ([`on_arrival`]: proceed, reroute to an alternative
//! with spare capacity, or drop) when a request is about to be forwarded to a task, and, for
//! reroute-then-drop and last-task dropping (the policies that judge the time left against the
//! budgets ahead), again when an instance takes it from the queue (the request is then in
//! the task's queue: only later tasks can be rerouted). Without that second check a FIFO queue
//! under sustained overload serves only requests that have already waited most of their SLO.
//! Per-task dropping compares a task's time (queueing and processing) with twice its
//! placement's budget (the plan gives processing half of the SLO and queueing the other half;
//! the budget alone is exceeded by any wait), and, for the per-stage policy, with the stage's
//! SLO share. Each placement is a FIFO queue served by its instances: a free instance takes up
//! to the placement's batch of queued requests at once, and a batch of `b` takes the variant's
//! profiled **mean** at `b` (the plans budget the profiled p99, the catalogue's 90th
//! percentile). A request still queued at its deadline is given up (every policy: nobody
//! serves a query that already missed its SLO). On a new plan, queued requests move to the new
//! plan's placements of their task and the new instances start idle (no load time: variant
//! swaps are free here, which favours the policies that change plans; batches already running
//! finish on the old instances). Plans are cached per 2% demand bucket; the MILP's time limit
//! makes a plan depend on the machine's speed, so runs with the same seed can differ slightly.
//!
//! **A query** is answered within its SLO when every request of it finished by its deadline
//! (arrival + SLO), late when one finished after it or was given up at it, dropped when the
//! policy dropped one of its requests early (or the plan had no placement for a task). Its
//! accuracy is the mean, over the root-to-end paths it ran, of the product of the accuracies
//! of the variants that served it (Loki's default path accuracy); its relative accuracy divides
//! that by the same paths on the most accurate variants hardware scaling uses. As in Loki §6.1:
//! the SLO violation ratio is (late + dropped) / all queries, the system accuracy the mean over
//! the queries answered within the SLO.
//!
//! **Policies** ([`OverloadPolicy`]), each a plan (placements and routing) from the estimated demand:
//! - `inferline`: hardware scaling only ([`hardware_scaling`]: the most accurate variants,
//!   fewest instances); beyond what the whole cluster carries with them, the plan at that
//!   capacity, the excess queued; no early dropping ([`DropPolicy::NoDropping`]).
//! - `per_stage` (Proteus-like): each task planned alone by [`allocate`] as a one-node problem
//!   with an equal share of the SLO (`SLO / depth`), its own incoming demand, and the workers
//!   split per pool in proportion to the tasks' needs at full accuracy; routed most accurate
//!   first per task, independently of the upstream variant; [`DropPolicy::PerTaskDropping`].
//! - `loki`: [`allocate`] on the whole pipeline, [`most_accurate_first`], and
//!   [`DropPolicy::RerouteThenDrop`]; its ablations `loki/no-dropping`, `loki/last-task` and
//!   `loki/per-task` change only the drop policy (Loki Fig. 7).
//!
//! **Workloads**: a step overload ([`step_arrivals`]), Proteus traces rescaled
//! ([`trace_arrivals`]), and the capacity search ([`Overload::capacity`]: the largest steady
//! Poisson demand a policy serves with at most 1% SLO violations).
//!
//! [`DropPolicy`]: infaas_scheduler::loki::DropPolicy
//! [`DropPolicy::NoDropping`]: infaas_scheduler::loki::DropPolicy::NoDropping
//! [`DropPolicy::PerTaskDropping`]: infaas_scheduler::loki::DropPolicy::PerTaskDropping
//! [`DropPolicy::RerouteThenDrop`]: infaas_scheduler::loki::DropPolicy::RerouteThenDrop
//! [`Manager`]: infaas_scheduler::loki::Manager
//! [`ManagerSettings::default`]: infaas_scheduler::loki::ManagerSettings::default
//! [`ManagerSettings::utilisation`]: infaas_scheduler::loki::ManagerSettings::utilisation
//! [`allocate`]: infaas_scheduler::loki::allocate
//! [`hardware_scaling`]: infaas_scheduler::loki::hardware_scaling
//! [`most_accurate_first`]: infaas_scheduler::loki::most_accurate_first
//! [`on_arrival`]: infaas_scheduler::loki::on_arrival

mod capacity;
mod ceiling;
mod evaluation;
mod plans;
mod problem;
mod simulation;
#[cfg(test)]
mod tests;
mod workloads;

pub use capacity::Capacity;
pub use ceiling::{AccuracyCeiling, CeilingProbe};
pub use evaluation::{evaluate, peak_rate, OverloadEval, OverloadRow, Workload, WorkloadInfo};
/// The Poisson pieces of the workloads (the simulator's one Poisson generator).
pub use infaas_sim::generate::poisson;
pub use plans::{
    DemandEstimate, Overload, OverloadPlan, OverloadPolicy, OverloadSettings, Routing,
};
pub use problem::{
    default_workers, full_accuracy_capacity, loki_problem, overload_pipeline, overload_pipelines,
    traffic, OverloadError, MAX_TASKS, OVERLOAD_PIPELINES, SLO_MS, WORKERS,
};
pub use simulation::RunStats;
pub use workloads::{initial_rate, step_arrivals, trace_arrivals};
