//! One period of the model autoscaler, as the controller's loop and the simulator both run it
//! (INFaaS §4.2; Themis §4-5):
//!
//! 1. per family without an action under way, **vertical first**: its Overloaded CPU
//!    instances get more intra-op threads while the load changes, and return to base threads
//!    once it has settled: stable for some periods, or, with a forecast of the family's load,
//!    once the forecast needs the same base-thread instances as the load now
//!    ([`vertical_settling`], Themis §5.1.3). A family being rebalanced is left out of the next
//!    step this period; one that got threads goes on to it, for what the threads do not cover
//!    (only to add: a replica or a faster variant, never to remove);
//! 2. **horizontal** over the families: the load each must serve at base threads (its
//!    planned load less what added threads serve, including this period's) solved by the
//!    planner ([`greedy`] or
//!    [`exact`](crate::autoscale::exact)); families the plan leaves short of capacity are
//!    reported, so the worker autoscaler can add a worker;
//! 3. **migration** of instances Interfered for several periods ([`migrations`]).
//!
//! What persists from period to period (each family's planned load, how long its load has been
//! stable, how long each instance has been Interfered, which families are busy) is kept by the
//! caller and handed in; nothing here remembers anything.
//!
//! [`greedy`]: crate::autoscale::greedy

use infaas_core::HardwareKind;

use crate::autoscale::{
    migrations, peak_at, vertical_threads, Action, ActionKind, CpuInstance, FamilyDemand,
    MigrationConfig, ScalingConfig, ScalingError, ScalingInput, ScalingPlan, Settling,
    VerticalConfig,
};
use crate::instance_state::InstanceState;
use crate::snapshot::{Prices, Snapshot};

/// A horizontal planner: [`crate::autoscale::greedy`] or [`crate::autoscale::exact`].
pub type Planner = fn(&ScalingInput) -> Result<ScalingPlan, ScalingError>;

/// One family (a model of a tenant) with live instances, as the period sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct FamilyState<'a> {
    pub tenant: &'a str,
    pub model: &'a str,
    /// Its live instances on live workers (indices into the snapshot).
    pub instances: Vec<usize>,
    /// Rows/s to plan for ([`crate::autoscale::PlannedLoad`]).
    pub load_qps: f64,
    /// Rows/s now, without the peak hold ([`crate::autoscale::PlannedLoad::current`]): the
    /// queueing headroom is kept over this rate, the held peak only needs the base slack
    /// ([`crate::autoscale::ScalingConfig::headroom`]).
    pub rate_qps: f64,
    /// Consecutive periods its load has been stable ([`crate::autoscale::Stability`]).
    pub stable_periods: usize,
    /// The highest load (rows/s) forecast over the next horizon (Themis §5.1.3: ten
    /// seconds), when a forecaster has seen enough of the family's arrivals. When given, it
    /// judges when the load has settled enough to trade added threads for base-thread
    /// instances, instead of `stable_periods` ([`Settling::Forecast`]).
    pub forecast_max_qps: Option<f64>,
    /// Tightest SLO and highest minimum accuracy of its queries in the period.
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
    /// An action of this family is under way: it is left alone.
    pub busy: bool,
    /// One of its instances was Overloaded within the peak hold: it gives nothing back this
    /// period (only actions that add capacity). Its instances' profiled capacity is more than
    /// they served then, so a headroom computed from the profile would remove what the next
    /// busy second needs (on the real server, a replica the query path then loads again).
    pub overloaded_lately: bool,
}

/// The load one family's instances at base threads must serve, as handed to the planner (and
/// kept by the controller to solve again exactly).
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub tenant: String,
    pub model: String,
    pub load_qps: f64,
    /// Rows/s now, at most `load_qps` ([`FamilyState::rate_qps`]).
    pub rate_qps: f64,
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
}

/// Thresholds of one period.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PeriodConfig {
    pub scaling: ScalingConfig,
    /// Whether vertical scaling runs (step 1).
    pub vertical_enabled: bool,
    pub vertical: VerticalConfig,
    pub migration: MigrationConfig,
}

impl PeriodConfig {
    /// The platform's defaults (those of the controller's `autoscale` settings) with
    /// `scaling`: vertical scaling on, its headroom the scaling slack, migration after
    /// [`MigrationConfig::default`]'s periods.
    pub fn platform(scaling: ScalingConfig) -> Self {
        PeriodConfig {
            scaling,
            vertical_enabled: true,
            vertical: VerticalConfig {
                headroom: scaling.slack,
                ..VerticalConfig::default()
            },
            migration: MigrationConfig::default(),
        }
    }
}

/// Everything one period decides on.
#[derive(Debug, Clone, Copy)]
pub struct PeriodInput<'a> {
    pub snapshot: &'a Snapshot,
    pub families: &'a [FamilyState<'a>],
    /// Per instance: its intra-op threads now (missing: its variant's).
    pub threads: &'a [usize],
    /// Per instance: how long it has been in its state, ms (missing: 0).
    pub ages_ms: &'a [f64],
    /// Per worker: whether the planner should empty it first (missing: no).
    pub releasable: &'a [bool],
    /// Per instance: consecutive Interfered periods (missing: 0).
    pub interfered_periods: &'a [usize],
    pub prices: Prices,
    pub config: PeriodConfig,
}

/// A family whose capacity after the plan stays below `slack` times its load.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shortage {
    /// Index into [`PeriodInput::families`].
    pub family: usize,
    /// Hardware of its variants.
    pub hardware: HardwareKind,
    pub missing_qps: f64,
}

/// What one period decided.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PeriodPlan {
    /// In the order to carry them out, each with the index of its family.
    pub actions: Vec<(usize, Action)>,
    /// What the horizontal planner was given.
    pub demands: Vec<Demand>,
    pub shortages: Vec<Shortage>,
    /// The horizontal planner could not decide (vertical and migration actions still stand).
    pub error: Option<ScalingError>,
}

/// One model-autoscaler period; see the module documentation.
pub fn model_period(input: &PeriodInput, planner: Planner) -> PeriodPlan {
    let s = input.snapshot;
    let cfg = &input.config;
    let threads_of = |i: usize| {
        input
            .threads
            .get(i)
            .copied()
            .unwrap_or_else(|| s.variants()[s.instances()[i].variant].threads)
    };
    let mut out = PeriodPlan::default();
    // Threads count against the cores they run on: a worker's spare threads for vertical
    // scaling are its idle CPU cores, and the cores its busy instances' threads leave (within
    // its thread budget). Threads on a busy CPU add no capacity, only contention.
    let free: Vec<usize> = (0..s.workers().len())
        .map(|wi| {
            let w = &s.workers()[wi];
            w.free_cores()
                .min(w.idle_cpu_cores())
                .min(w.cpu_cores.saturating_sub(s.busy_threads(wi)))
        })
        .collect();
    // Families that got threads this period: the plan may only add to them.
    let mut grown: Vec<usize> = Vec::new();
    for (f, fam) in input.families.iter().enumerate() {
        if fam.busy {
            continue;
        }
        // The family's CPU instances, each with its share of the load.
        let served: f64 = fam.instances.iter().map(|&i| s.instances()[i].qps).sum();
        let cpu: Vec<CpuInstance> = fam
            .instances
            .iter()
            .filter(|&&i| s.variants()[s.instances()[i].variant].hardware == HardwareKind::Cpu)
            .filter_map(|&i| {
                let share = if served > 0.0 {
                    s.instances()[i].qps / served
                } else {
                    1.0 / fam.instances.len() as f64
                };
                CpuInstance::from_snapshot(s, i, threads_of(i), fam.load_qps * share)
            })
            .collect();
        let vcfg = &cfg.vertical;
        let extra: f64 = cpu
            .iter()
            .filter(|c| c.threads > c.base_threads)
            .map(|c| peak_at(c, c.threads, vcfg) - peak_at(c, c.base_threads, vcfg))
            .sum();
        let mut extra = extra;
        if cfg.vertical_enabled {
            let settling = match fam.forecast_max_qps {
                Some(max_qps) if max_qps.is_finite() && max_qps >= 0.0 => Settling::Forecast {
                    load_qps: fam.load_qps,
                    max_qps,
                },
                _ => Settling::Periods(fam.stable_periods),
            };
            // What the family's instances serve at their present threads. When that covers
            // the load with the headroom, an Overloaded instance is one that selection filled
            // (it sends further queries to the others), not a shortage: no threads are added.
            // (Adding them there made the fullest instance take threads and the next period
            // give them back, again and again, while spare replicas idled.)
            let capacity: f64 = cpu.iter().map(|c| peak_at(c, c.threads, vcfg)).sum::<f64>()
                + fam
                    .instances
                    .iter()
                    .map(|&i| &s.variants()[s.instances()[i].variant])
                    .filter(|v| v.hardware != HardwareKind::Cpu)
                    .map(|v| v.peak_qps())
                    .sum::<f64>();
            let covered = capacity >= vcfg.headroom * fam.load_qps;
            let acts = vertical_threads(&cpu, &free, settling, &input.prices, vcfg, !covered);
            let mut rebalance = false;
            for a in acts {
                match a.kind {
                    ActionKind::AddThreads { instance, from, to } => {
                        if let Some(c) = cpu.iter().find(|c| c.instance == instance) {
                            extra += peak_at(c, to, vcfg) - peak_at(c, from, vcfg);
                        }
                    }
                    _ => rebalance = true,
                }
                out.actions.push((f, a));
            }
            if rebalance {
                continue;
            }
            if out.actions.last().is_some_and(|(g, _)| *g == f) {
                grown.push(f);
            }
        }
        out.demands.push(Demand {
            tenant: fam.tenant.to_string(),
            model: fam.model.to_string(),
            load_qps: (fam.load_qps - extra).max(0.0),
            rate_qps: (fam.rate_qps.min(fam.load_qps) - extra).max(0.0),
            slo_ms: fam.slo_ms,
            min_accuracy: fam.min_accuracy,
        });
    }
    // Which family each variant belongs to.
    let mut family_of: Vec<Option<usize>> = vec![None; s.variants().len()];
    for (f, fam) in input.families.iter().enumerate() {
        for &v in s.model_variants(fam.tenant, fam.model) {
            family_of[v] = Some(f);
        }
    }
    let of_action = |a: &Action| family_of.get(a.kind.variant(s)?).copied().flatten();
    if !out.demands.is_empty() {
        match plan_demands(
            s,
            input.releasable,
            &out.demands,
            input.ages_ms,
            input.prices,
            cfg.scaling,
            planner,
        ) {
            Ok(plan) => {
                for (k, a) in plan.actions.iter().enumerate() {
                    let adds = matches!(
                        a.kind,
                        ActionKind::Replicate { .. } | ActionKind::Upgrade { .. }
                    ) || plan.released.contains(&k);
                    let holds =
                        |f: &usize| grown.contains(f) || input.families[*f].overloaded_lately;
                    if let Some(f) = of_action(a).filter(|f| adds || !holds(f)) {
                        out.actions.push((f, a.clone()));
                    }
                }
                for (d, hardware, missing_qps) in
                    short_demands(s, &out.demands, &plan, &cfg.scaling)
                {
                    let d = &out.demands[d];
                    if let Some(family) = input
                        .families
                        .iter()
                        .position(|f| f.tenant == d.tenant && f.model == d.model)
                    {
                        out.shortages.push(Shortage {
                            family,
                            hardware,
                            missing_qps,
                        });
                    }
                }
            }
            Err(e) => out.error = Some(e),
        }
    }
    for a in migrations(s, input.interfered_periods, &input.prices, &cfg.migration) {
        if let Some(f) = of_action(&a).filter(|&f| !input.families[f].busy) {
            out.actions.push((f, a));
        }
    }
    out
}

/// The snapshot as the model period sees it: workers the worker autoscaler started
/// (`releasable`) count as fully busy, so new instances go to the permanent workers while
/// they have room, and scale-in empties the started ones first. `None` when no worker is
/// releasable (use `s` as it is).
pub fn releasable_view(s: &Snapshot, releasable: &[bool]) -> Option<Snapshot> {
    if !releasable.iter().any(|&r| r) {
        return None;
    }
    let mut view = s.clone();
    for (w, _) in releasable.iter().enumerate().filter(|(_, &r)| r) {
        let Some(e) = view.workers().get(w) else {
            continue;
        };
        let (cores, memory) = (e.cores_used, e.memory_used);
        let _ = view.set_worker_usage(w, cores, memory, 1.0);
    }
    Some(view)
}

/// The model-scaling input of `demands` on `s` (with its `releasable` workers), solved by
/// `planner`.
pub fn plan_demands(
    s: &Snapshot,
    releasable: &[bool],
    demands: &[Demand],
    ages_ms: &[f64],
    prices: Prices,
    cfg: ScalingConfig,
    planner: Planner,
) -> Result<ScalingPlan, ScalingError> {
    let fd: Vec<FamilyDemand> = demands
        .iter()
        .map(|d| FamilyDemand {
            tenant: &d.tenant,
            model: &d.model,
            load_qps: Some(d.load_qps),
            rate_qps: Some(d.rate_qps),
            slo_ms: d.slo_ms,
            min_accuracy: d.min_accuracy,
        })
        .collect();
    let mut input = ScalingInput::from_snapshot(
        s,
        &fd,
        |i| ages_ms.get(i).copied().unwrap_or(0.0),
        prices,
        cfg,
    );
    if !releasable.is_empty() {
        input = input.with_releasable(releasable.to_vec());
    }
    planner(&input)
}

/// Demands whose capacity after `plan` stays below their slack ([`ScalingConfig::slack_for`])
/// times their load (the plan could not place what they need): index into `demands`, hardware
/// of their variants, rows/s missing.
fn short_demands(
    s: &Snapshot,
    demands: &[Demand],
    plan: &ScalingPlan,
    scaling: &ScalingConfig,
) -> Vec<(usize, HardwareKind, f64)> {
    if plan.score.unserved_qps <= 0.0 {
        return Vec::new();
    }
    let inst_variant = |i: usize| s.instances().get(i).map(|i| i.variant);
    let mut out = Vec::new();
    for (di, d) in demands.iter().enumerate() {
        // Capacity under the demand's SLO, as the planner counts it.
        let peak = |v: usize| {
            s.variants()
                .get(v)
                .map_or(0.0, |v| v.peak_qps_within(d.slo_ms))
        };
        let variants = s.model_variants(&d.tenant, &d.model);
        // Its instances that serve (or load), per variant.
        let live_count = |v: usize| {
            s.variant_instances(v)
                .iter()
                .filter(|&&i| s.instances()[i].state != InstanceState::Inactive)
                .count()
        };
        let mut capacity: f64 = variants
            .iter()
            .map(|&v| live_count(v) as f64 * peak(v))
            .sum();
        for a in &plan.actions {
            let (add, remove) = match a.kind {
                ActionKind::Replicate { variant, .. } => (Some(variant), None),
                ActionKind::Upgrade { from, to, .. } | ActionKind::Downgrade { from, to, .. } => {
                    (Some(to), inst_variant(from))
                }
                ActionKind::RemoveReplica { instance } => (None, inst_variant(instance)),
                _ => (None, None),
            };
            if let Some(v) = add.filter(|v| variants.contains(v)) {
                capacity += peak(v);
            }
            if let Some(v) = remove.filter(|v| variants.contains(v)) {
                capacity -= peak(v);
            }
        }
        let service =
            super::problem::family_service_ms(s.variants(), variants, |v| live_count(v) > 0);
        let servers = variants.iter().map(|&v| live_count(v)).sum();
        let missing = scaling.headroom(d.slo_ms, service, servers, d.load_qps, d.rate_qps)
            * d.load_qps
            - capacity;
        if missing > 0.0 {
            let hardware = variants
                .first()
                .map_or(HardwareKind::Cpu, |&v| s.variants()[v].hardware);
            out.push((di, hardware, missing));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::autoscale::greedy;
    use crate::snapshot::tests::{instance, point, variant, worker};
    use crate::snapshot::InstanceEntry;

    /// One Overloaded CPU instance at 1 thread (peak 1,000 rows/s) asked for 1,500 rows/s, on a
    /// worker with a budget of 8 threads and 2 CPU cores busy by the fraction `utilisation`:
    /// the threads vertical scaling gives it (0: none).
    fn threads_given(utilisation: f64) -> usize {
        let mut b = Snapshot::builder();
        let mut v = variant("v", "m", 0.9, 1.0);
        v.latency = vec![point(1, 1.0), point(8, 8.0)];
        let v = b.add_variant("acme", v).unwrap();
        let mut w = worker("w", &[HardwareKind::Cpu], utilisation);
        w.cpu_cores = 2;
        w.cores_used = 1;
        b.add_worker(w).unwrap();
        let i = b
            .add_instance(InstanceEntry {
                state: InstanceState::Overloaded,
                qps: 1000.0,
                queue_len: 40,
                ..instance("i", v, 0)
            })
            .unwrap();
        let s = b.build();
        let families = [FamilyState {
            tenant: "acme",
            model: "m",
            instances: vec![i],
            load_qps: 1500.0,
            rate_qps: 1500.0,
            stable_periods: 0,
            forecast_max_qps: None,
            slo_ms: None,
            min_accuracy: None,
            busy: false,
            overloaded_lately: false,
        }];
        let input = PeriodInput {
            snapshot: &s,
            families: &families,
            threads: &[],
            ages_ms: &[],
            releasable: &[],
            interfered_periods: &[],
            prices: Prices::default(),
            config: PeriodConfig {
                vertical_enabled: true,
                ..PeriodConfig::default()
            },
        };
        model_period(&input, greedy)
            .actions
            .iter()
            .find_map(|(_, a)| match a.kind {
                ActionKind::AddThreads { to, .. } => Some(to),
                _ => None,
            })
            .unwrap_or(0)
    }

    /// A CPU instance raised to 4 threads (peak 1,000 rows/s at its 1 base thread) asked for
    /// 1,500 rows/s after no stable period, with `forecast` as the family's forecast: the
    /// replicas and threads of the vertical step's rebalance, if any.
    fn rebalance_with(forecast: Option<f64>) -> Option<(usize, usize)> {
        let mut b = Snapshot::builder();
        let mut v = variant("v", "m", 0.9, 1.0);
        v.latency = vec![point(1, 1.0), point(8, 8.0)];
        let v = b.add_variant("acme", v).unwrap();
        let mut w = worker("w", &[HardwareKind::Cpu], 0.1);
        w.cores_used = 4;
        b.add_worker(w).unwrap();
        let i = b
            .add_instance(InstanceEntry {
                qps: 1500.0,
                ..instance("i", v, 0)
            })
            .unwrap();
        let s = b.build();
        let families = [FamilyState {
            tenant: "acme",
            model: "m",
            instances: vec![i],
            load_qps: 1500.0,
            rate_qps: 1500.0,
            stable_periods: 0,
            forecast_max_qps: forecast,
            slo_ms: None,
            min_accuracy: None,
            busy: false,
            overloaded_lately: false,
        }];
        let input = PeriodInput {
            snapshot: &s,
            families: &families,
            threads: &[4],
            ages_ms: &[],
            releasable: &[],
            interfered_periods: &[],
            prices: Prices::default(),
            config: PeriodConfig {
                vertical_enabled: true,
                ..PeriodConfig::default()
            },
        };
        model_period(&input, greedy)
            .actions
            .iter()
            .find_map(|(_, a)| match a.kind {
                ActionKind::Rebalance {
                    threads, replicas, ..
                } => Some((replicas, threads)),
                _ => None,
            })
    }

    /// The family's forecast reaches the vertical step: a forecast that the load stays turns
    /// the threads into a base-thread replica at once (before: only after `stable_periods`);
    /// without one, the stable-periods judgment gives unneeded threads back in place.
    #[test]
    fn the_forecast_of_the_family_settles_the_transition() {
        assert_eq!(rebalance_with(Some(1550.0)), Some((1, 1)));
        assert_eq!(rebalance_with(None), Some((0, 2)));
        // Forecast to fall to one instance's worth: in place too.
        assert_eq!(rebalance_with(Some(500.0)), Some((0, 2)));
    }

    /// Threads count against the cores they run on: within its budget of 8 threads, the
    /// instance gets only the worker's idle CPU cores, and none when the CPU is busy (before,
    /// it got up to the budget: 8 threads on 2 cores).
    #[test]
    fn vertical_scaling_gives_only_idle_cores() {
        assert_eq!(threads_given(0.3), 2, "one idle core of two");
        assert_eq!(threads_given(0.6), 2, "most of a core idle (0.8)");
        assert_eq!(
            threads_given(0.8),
            0,
            "less than half a core idle: threads would add little"
        );
        assert_eq!(threads_given(0.95), 0);
    }
}
