//! The model autoscaler decides alike on the controller and in the simulator. One arrival
//! sequence (low, a surge that stays long enough to settle, a long fall) runs in the
//! simulator with the platform's policy (`infaas_sim::policy::Infaas`, recording the cluster,
//! the window and the plan at every window); the controller's period logic
//! (`infaas_control::autoscaler::decide_period`, with the controller's default settings
//! `AutoscaleConfig::loop_config` and one model loop kept across periods, on a test clock)
//! is fed the same cluster and arrivals at the same times. Every period decides the same
//! actions, for the same reasons, in the same order, and the same demands and shortages.
//!
//! The sequence makes the loop use each of its rules: vertical scaling on the surge (threads
//! first), the forecast-driven switch to base-thread replicas once the surge settles, and
//! scale-in after the fall, once a trusted forecast of the lower rate caps the peak hold.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Instant;

use infaas_control::autoscaler::book::Book;
use infaas_control::autoscaler::{decide_period, Gathered};
use infaas_control::config::AutoscaleConfig;
use infaas_core::trace::{Arrival, Trace};
use infaas_scheduler::autoscale::{
    releasable_view, ActionKind, Arrivals, PeriodPlan, ScalingConfig,
};
use infaas_scheduler::{InstanceState, Snapshot};
use infaas_sim::catalogue::{Accelerator, Profile};
use infaas_sim::engine::{
    Change, Fleet, ModelDemand, Policy, Route, Window, WorkerChange, World, TENANT,
};
use infaas_sim::policy::Infaas;
use infaas_sim::{simulate, variants_for, Cluster};

/// (from s, to s, queries per second).
const PHASES: [(u32, u32, u32); 3] = [(0, 20, 150), (20, 70, 2_000), (70, 200, 150)];
const SLO_MS: f64 = 50.0;

/// Evenly spaced arrivals of one application.
fn trace() -> Trace {
    Trace::evenly_spaced("m", Some(SLO_MS), &PHASES)
}

fn profile(model: &str, accuracy: f64, base_ms: f64) -> Profile {
    Profile::linear(model, "m", Accelerator::Cpu, accuracy, base_ms, 0.25)
}

fn cluster() -> Cluster {
    Cluster {
        cpu_workers: 4,
        cpu_cores: 16,
        gpu_workers: 0,
        load_ms_cpu: 1_000.0,
        ..Cluster::default()
    }
}

/// What the simulator's platform policy saw and decided at one window.
struct Recorded {
    now_ms: f64,
    seconds: f64,
    snapshot: Snapshot,
    provisioned: Vec<bool>,
    threads: Vec<usize>,
    busy: Vec<String>,
    models: BTreeMap<String, ModelDemand>,
    plan: Option<(Vec<String>, PeriodPlan)>,
}

/// The platform's policy, its windows recorded.
struct Recording {
    inner: Infaas,
    windows: Vec<Recorded>,
}

impl Policy for Recording {
    fn name(&self) -> String {
        self.inner.name()
    }
    fn provision(&mut self, world: &World) -> Vec<Change> {
        self.inner.provision(world)
    }
    fn route(&mut self, world: &World, query: &Arrival) -> Route {
        self.inner.route(world, query)
    }
    fn tick(&mut self, world: &World, window: &Window) -> Vec<Change> {
        let changes = self.inner.tick(world, window);
        self.windows.push(Recorded {
            now_ms: world.now_ms,
            seconds: window.seconds,
            snapshot: world.snapshot.clone(),
            provisioned: world.provisioned.to_vec(),
            threads: world.threads.to_vec(),
            busy: world.busy.to_vec(),
            models: window.models.iter().map(|(m, d)| (m.clone(), *d)).collect(),
            plan: self.inner.last_period().cloned(),
        });
        changes
    }
    fn workers(&mut self, world: &World, fleet: &Fleet) -> Vec<WorkerChange> {
        self.inner.workers(world, fleet)
    }
}

/// One decided action as both sides name it: the family's model and the action.
type Decided = (String, infaas_scheduler::autoscale::Action);

fn decided(models: &[String], plan: &PeriodPlan) -> Vec<Decided> {
    plan.actions
        .iter()
        .map(|(f, a)| (models[*f].clone(), a.clone()))
        .collect()
}

#[test]
fn the_controllers_model_loop_decides_as_the_simulator_does() {
    let scaling = ScalingConfig::default();
    let controller_config = AutoscaleConfig::default();
    // One set of settings: the controller's defaults are the simulator's.
    assert_eq!(controller_config.scaling(), scaling);
    let mut sim_policy = Infaas::new(false, scaling);
    assert_eq!(
        controller_config.loop_config(),
        sim_policy.loop_config(controller_config.model_interval_ms as f64 / 1e3)
    );
    sim_policy.scaling = scaling;

    let t = trace();
    let c = cluster();
    let variants = variants_for(
        &t,
        &[profile("m-small", 0.7, 4.0), profile("m-large", 0.9, 40.0)],
        &c,
    )
    .unwrap();
    let mut recording = Recording {
        inner: sim_policy,
        windows: Vec::new(),
    };
    let report = simulate(&t, variants, &c, &mut recording, &mut |_, _| {}).unwrap();
    assert!(report.summary.queries as usize == t.arrivals.len());

    // The controller's loop, on the same cluster and arrivals at the same times.
    let mut model_loop =
        infaas_scheduler::autoscale::ModelLoop::new(controller_config.loop_config());
    // (s, the family's planned load, action)
    let mut kinds: Vec<(f64, f64, &'static str)> = Vec::new();
    let mut compared = 0;
    for w in &recording.windows {
        assert_eq!(w.seconds * 1e3, controller_config.model_interval_ms as f64);
        let view = releasable_view(&w.snapshot, &w.provisioned);
        let s = view.as_ref().unwrap_or(&w.snapshot);
        let mut families: BTreeMap<(String, String), Gathered> = BTreeMap::new();
        for (i, inst) in s.instances().iter().enumerate() {
            if inst.state == InstanceState::Inactive || !s.workers()[inst.worker].alive {
                continue;
            }
            let model = s.variants()[inst.variant].model.clone();
            let g = families
                .entry((TENANT.to_string(), model.clone()))
                .or_insert_with(|| Gathered {
                    app: (TENANT.to_string(), "m".into()),
                    ..Gathered::default()
                });
            g.instances.push(i);
            if let Some(d) = w.models.get(&model) {
                g.arrivals = Arrivals {
                    rows: (d.rows_per_s * w.seconds).round() as u64,
                    slo_ms: d.slo_ms,
                    min_accuracy: d.min_accuracy,
                    loads_for_queries: d.loads_for_queries,
                };
            }
        }
        let mut book = Book::default();
        for m in &w.busy {
            book.begin(&(TENANT.to_string(), m.clone()), Instant::now());
        }
        let (keys, period) = decide_period(
            &mut model_loop,
            &book,
            s,
            &families,
            w.seconds,
            &w.threads,
            &w.provisioned,
            c.prices,
            w.now_ms,
        );
        let models: Vec<String> = keys.iter().map(|k| k.1.clone()).collect();
        let (sim_models, sim_plan) = w.plan.clone().unwrap();
        assert_eq!(models, sim_models, "families at {} ms", w.now_ms);
        assert_eq!(
            decided(&models, &period.plan),
            decided(&sim_models, &sim_plan),
            "actions at {} ms",
            w.now_ms
        );
        assert_eq!(period.plan.demands, sim_plan.demands, "at {} ms", w.now_ms);
        assert_eq!(
            period.plan.shortages, sim_plan.shortages,
            "at {} ms",
            w.now_ms
        );
        // The family's planned load (the peak hold keeps the surge's rate until a trusted forecast caps it).
        let load = period.signals.first().map_or(0.0, |sig| sig.load_qps);
        for (_, a) in &period.plan.actions {
            if std::env::var("PARITY_DEBUG").is_ok() {
                eprintln!("{:>6.1} s {:?}: {}", w.now_ms / 1e3, a.kind, a.reason);
            }
            kinds.push((
                w.now_ms / 1e3,
                load,
                match a.kind {
                    ActionKind::AddThreads { .. } => "add-threads",
                    ActionKind::Rebalance { .. } => "rebalance",
                    ActionKind::Replicate { .. } => "replicate",
                    ActionKind::RemoveReplica { .. } => "remove-replica",
                    ActionKind::Upgrade { .. } => "upgrade",
                    ActionKind::Downgrade { .. } => "downgrade",
                    _ => "other",
                },
            ));
        }
        compared += 1;
    }
    // Every window of the run was compared.
    assert!(compared >= 199, "{compared} windows");
    // The sequence exercised the rules: threads on the surge, base-thread replicas once it
    // settled (on the forecast), and scale-in after the fall.
    let first = |k: &str| kinds.iter().find(|(_, _, n)| *n == k).map(|(s, _, _)| *s);
    let threads = first("add-threads").unwrap_or_else(|| panic!("no added threads: {kinds:?}"));
    assert!((20.0..30.0).contains(&threads), "{kinds:?}");
    let switch = first("rebalance").unwrap_or_else(|| panic!("no rebalance: {kinds:?}"));
    assert!(switch > threads, "{kinds:?}");
    // Threads go where the family is short, not back and forth between its instances.
    let count = |k: &str| kinds.iter().filter(|(_, _, n)| *n == k).count();
    assert!(count("add-threads") + count("rebalance") <= 6, "{kinds:?}");
    let surge = PHASES[1].2 as f64;
    let fall_ends_at = PHASES[1].1 as f64;
    let scale_in = kinds
        .iter()
        .find(|(s, load, n)| *s > fall_ends_at && *load < surge && *n == "remove-replica")
        .map(|(s, _, _)| *s)
        .unwrap_or_else(|| panic!("no scale-in after the fall: {kinds:?}"));
    // The planned load stays at the surge's through the fall's first seconds; its flat phases
    // make the family's forecaster trusted (`hold_within_forecast`), so the forecast of the
    // lower rate, not the end of the peak hold (60 s), lets it scale in.
    let hold_s = controller_config.peak_hold_secs;
    assert!(
        (fall_ends_at + 5.0..fall_ends_at + hold_s - 10.0).contains(&scale_in),
        "{scale_in}: {kinds:?}"
    );
}
