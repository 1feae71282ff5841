//! The offline-job gate decides alike on the controller and in the simulator. An offline job
//! runs in the simulator beside online traffic that is quiet, then surges past what the
//! gate leaves to jobs, then falls back; every decision of the simulator's job runner is
//! recorded with what it saw (the cluster, the last window's online load, the time). The
//! controller's job runner decides each batch with one call, `JobGate::next_batch`, on a gate
//! made from its configuration (`Config::job_gate`); such a gate, kept across the steps on a
//! test clock, is fed the same inputs and must decide the same thing at every step: paused
//! (and why), or which variant and where (an instance, or a worker to load it on). Where a
//! batch ran is told to both gates alike (the instance ids are the simulator's).
//!
//! The run makes the gate use its rules: batches on a loaded instance, a load for the job,
//! a pause for the surge, hysteresis before resuming, and batches on the job's own instance
//! while its back-to-back batches make it Overloaded.
#![allow(clippy::unwrap_used)]

use infaas_control::config::Config;
use infaas_core::trace::Trace;
use infaas_scheduler::autoscale::ScalingConfig;
use infaas_scheduler::offline::{JobGate, JobPlacement, JobWait, SpareCapacity};
use infaas_scheduler::{InstanceState, Target};
use infaas_sim::catalogue::{Accelerator, Profile};
use infaas_sim::engine::TENANT;
use infaas_sim::policy::Infaas;
use infaas_sim::{simulate_recording_jobs, variants_for, Cluster, OfflineJob};

/// (from s, to s, queries per second).
const PHASES: [(u32, u32, u32); 3] = [(0, 15, 20), (15, 35, 1_500), (35, 120, 20)];
const JOB_ROWS: u64 = 20_000;
const SLO_MS: f64 = 100.0;

fn trace() -> Trace {
    Trace::evenly_spaced("m", Some(SLO_MS), &PHASES)
}

fn profile(model: &str, accuracy: f64, base_ms: f64) -> Profile {
    Profile::linear(model, "m", Accelerator::Cpu, accuracy, base_ms, 0.25)
}

#[test]
fn the_controllers_job_gate_decides_as_the_simulators() {
    // One setting type, the same values: the controller's defaults are the simulator's.
    let config = Config::default();
    assert_eq!(config.job_gate(), SpareCapacity::default());

    let trace = trace();
    let cluster = Cluster {
        cpu_workers: 1,
        cpu_cores: 8,
        gpu_workers: 0,
        load_ms_cpu: 1_000.0,
        jobs: vec![OfflineJob {
            app: "m".into(),
            rows: JOB_ROWS,
            at_ms: 5_000.0,
        }],
        ..Cluster::default()
    };
    assert_eq!(cluster.prices, config.prices);
    let catalogue = [profile("m-small", 0.7, 4.0), profile("m-large", 0.9, 40.0)];
    let variants = variants_for(&trace, &catalogue, &cluster).unwrap();
    let mut policy = Infaas::new(false, ScalingConfig::default());
    let (report, steps) = simulate_recording_jobs(&trace, variants, &cluster, &mut policy).unwrap();
    assert_eq!(report.jobs[0].done_rows, JOB_ROWS, "{:?}", report.jobs);

    let mut controller = JobGate::new(config.job_gate());
    for (k, step) in steps.iter().enumerate() {
        let decided = controller.next_batch(
            &step.snapshot,
            &step.online,
            TENANT,
            Target::App(&step.app),
            None,
            &config.prices,
            step.now_ms,
        );
        assert_eq!(
            decided, step.decision,
            "step {k} at {:.0} ms: the controller decides {decided:?}, the simulator {:?}",
            step.now_ms, step.decision
        );
        if let Some(id) = &step.ran_on {
            controller.ran_on(id, step.now_ms);
        }
    }

    // The run used every rule.
    let count = |f: &dyn Fn(&infaas_sim::JobStep) -> bool| steps.iter().filter(|s| f(s)).count();
    let paused = count(&|s| matches!(s.decision, Err(JobWait::Paused(_))));
    let loads =
        count(&|s| matches!(s.decision, Ok(b) if matches!(b.placement, JobPlacement::Load(_))));
    let on_own_overloaded = count(&|s| match s.decision {
        Ok(b) => match b.placement {
            JobPlacement::Instance(i) => {
                s.snapshot.instances()[i].state == InstanceState::Overloaded
            }
            JobPlacement::Load(_) => false,
        },
        Err(_) => false,
    });
    let resumed = steps
        .windows(2)
        .filter(|w| matches!(w[0].decision, Err(JobWait::Paused(_))) && w[1].decision.is_ok())
        .count();
    assert!(steps.len() > 1_000, "{} steps", steps.len());
    assert!(loads >= 1, "no load for the job");
    assert!(
        paused >= 10 && resumed >= 1,
        "paused {paused}, resumed {resumed}"
    );
    assert!(
        on_own_overloaded >= 1,
        "no batch on the job's own Overloaded instance"
    );
    // Paused for the surge, not before it.
    let first_pause = steps
        .iter()
        .find(|s| matches!(s.decision, Err(JobWait::Paused(_))))
        .map(|s| s.now_ms)
        .unwrap();
    assert!(first_pause >= 15_000.0, "first pause at {first_pause} ms");
}
