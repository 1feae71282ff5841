//! Model autoscaling: the greedy heuristic, the exact ILP, and the two compared.

use infaas_core::{HardwareKind, LatencyPoint};

use super::ilp::Level;
use super::problem::Prepared;
use super::*;
use crate::instance_state::InstanceState;
use crate::milp::Solver;
use crate::snapshot::{InstanceEntry, Prices, Snapshot, VariantEntry, WorkerEntry};

const PRICES: Prices = Prices {
    cpu_core_per_s: 1e-5,
    memory_gb_per_s: 0.0,
    gpu_per_s: 2e-4,
};

/// A variant whose saturation throughput is `peak` rows/s (max batch 8) and whose p99 at a full
/// batch is `8 / peak * 1000 * 1.2` ms.
pub(super) fn var(name: &str, hw: HardwareKind, threads: usize, peak: f64) -> VariantEntry {
    let mean_ms = 8.0 / peak * 1000.0;
    let point = |batch: usize, mean_ms: f64| LatencyPoint {
        batch,
        p50_ms: mean_ms,
        p99_ms: mean_ms * 1.2,
        mean_ms,
        throughput_per_s: batch as f64 / mean_ms * 1000.0,
    };
    VariantEntry {
        id: name.to_owned(),
        name: name.to_owned(),
        model: "m".to_owned(),
        app: "app".to_owned(),
        accuracy: 0.9,
        hardware: hw,
        threads,
        max_batch: 8,
        load_ms: 1000.0,
        memory_bytes: 1_000_000_000,
        latency: vec![point(1, mean_ms / 4.0), point(8, mean_ms)],
    }
}

pub(super) fn cpu_worker(id: &str, cores: usize) -> WorkerEntry {
    WorkerEntry {
        id: id.to_owned(),
        hardware: vec![HardwareKind::Cpu],
        cores,
        cpu_cores: cores,
        cores_used: 0,
        memory_bytes: 64_000_000_000,
        memory_used: 0,
        alive: true,
        utilisation: 0.1,
        interference_seen: false,
        busy_threads: 0,
    }
}

/// `n` CPU workers `w0`, `w1`, ... of `cores` each (a worker runs one instance of a variant).
fn cpu_workers(n: usize, cores: usize) -> Vec<WorkerEntry> {
    (0..n)
        .map(|w| cpu_worker(&format!("w{w}"), cores))
        .collect()
}

fn run(instance: usize, variant: usize, worker: usize, age_ms: f64) -> Running {
    Running {
        instance,
        variant,
        worker,
        state: InstanceState::Active,
        qps: 0.0,
        state_age_ms: age_ms,
    }
}

fn family(variants: &[usize], load: f64) -> Family {
    Family {
        name: "acme/m".to_owned(),
        variants: variants.to_vec(),
        load_qps: load,
        rate_qps: load,
        slo_ms: None,
        min_accuracy: None,
    }
}

fn input<'a>(
    variants: &'a [VariantEntry],
    workers: &'a [WorkerEntry],
    running: Vec<Running>,
    families: Vec<Family>,
) -> ScalingInput<'a> {
    ScalingInput {
        variants,
        workers,
        running,
        families,
        prices: PRICES,
        config: ScalingConfig::default(),
        releasable: Vec::new(),
    }
}

fn kinds(plan: &ScalingPlan) -> Vec<ActionKind> {
    plan.actions.iter().map(|a| a.kind).collect()
}

const OLD: f64 = 1e6;

#[test]
fn greedy_replicates_the_running_variant_when_cheapest() {
    // a: 1 core, 100 rows/s. b: 4 cores, 200 rows/s, slow to load.
    let mut b = var("b", HardwareKind::Cpu, 4, 200.0);
    b.load_ms = 5000.0;
    let variants = [var("a", HardwareKind::Cpu, 1, 100.0), b];
    let workers = cpu_workers(2, 8);
    let i = input(
        &variants,
        &workers,
        vec![run(7, 0, 0, OLD)],
        vec![family(&[0, 1], 150.0)],
    );
    let plan = greedy(&i).unwrap();
    // On the other worker: w0 runs a already.
    assert_eq!(
        kinds(&plan),
        [ActionKind::Replicate {
            variant: 0,
            worker: 1
        }]
    );
    let a = &plan.actions[0];
    assert!((a.cost_before_per_s - 1e-5).abs() < 1e-15);
    assert!((a.cost_after_per_s - 2e-5).abs() < 1e-15);
    assert!(
        a.reason.contains("headroom 0.67 < slack 1.05"),
        "{}",
        a.reason
    );
    assert_eq!(plan.score.unserved_qps, 0.0);
}

#[test]
fn greedy_upgrades_when_a_faster_variant_is_cheaper_than_replicas() {
    // Three 4-core instances of a (100 rows/s each) serve 400 rows/s; b does 500 on 2 cores.
    let variants = [
        var("a", HardwareKind::Cpu, 4, 100.0),
        var("b", HardwareKind::Cpu, 2, 500.0),
    ];
    let workers = [cpu_worker("w0", 16), cpu_worker("w1", 16)];
    let running = vec![run(0, 0, 0, OLD), run(1, 0, 0, OLD), run(2, 0, 1, OLD)];
    let i = input(&variants, &workers, running, vec![family(&[0, 1], 400.0)]);
    let plan = greedy(&i).unwrap();
    let k = kinds(&plan);
    // One instance of b replaces one of a (loaded first); the other two of a keep serving
    // while b loads, so the family never has less than it had.
    assert_eq!(k.len(), 1, "{k:?}");
    assert!(matches!(k[0], ActionKind::Upgrade { to: 1, .. }), "{k:?}");
    assert_eq!(plan.score.unserved_qps, 0.0);
    assert!(
        plan.actions[0].reason.contains("x3 to b x1"),
        "{}",
        plan.actions[0].reason
    );
    // Once b is live (700 rows/s for 400) the family scales down to the scale-down headroom:
    // one of a goes.
    let running = vec![run(0, 0, 0, OLD), run(2, 0, 1, OLD), run(3, 1, 0, OLD)];
    let i = input(&variants, &workers, running, vec![family(&[0, 1], 400.0)]);
    let plan = greedy(&i).unwrap();
    assert_eq!(kinds(&plan), [ActionKind::RemoveReplica { instance: 0 }]);
    // Within the band the last of a costs more per row/s than b, which serves the load at
    // its own headroom: a switch releases it, and the family ends at one instance of b.
    let running = vec![run(2, 0, 1, OLD), run(3, 1, 0, OLD)];
    let i = input(&variants, &workers, running, vec![family(&[0, 1], 400.0)]);
    let plan = greedy(&i).unwrap();
    assert_eq!(kinds(&plan), [ActionKind::RemoveReplica { instance: 2 }]);
    assert_eq!(plan.released, [0], "the removal is a switch's release");
    assert!((plan.actions[0].cost_after_per_s - 2e-5).abs() < 1e-15);
    // Not onto an instance of b that is Overloaded: its profile is not what it has to spare.
    let mut busy = run(3, 1, 0, OLD);
    busy.state = InstanceState::Overloaded;
    let i = input(
        &variants,
        &workers,
        vec![run(2, 0, 1, OLD), busy],
        vec![family(&[0, 1], 400.0)],
    );
    assert!(greedy(&i).unwrap().actions.is_empty());
}

#[test]
fn young_instances_are_not_replaced_or_removed() {
    let variants = [
        var("a", HardwareKind::Cpu, 4, 100.0),
        var("b", HardwareKind::Cpu, 2, 500.0),
    ];
    let workers = [cpu_worker("w0", 32)];
    // In their state for less than a's load time (1 s).
    let running = vec![run(0, 0, 0, 10.0), run(1, 0, 0, 10.0), run(2, 0, 0, 10.0)];
    let plan = greedy(&input(
        &variants,
        &workers,
        running.clone(),
        vec![family(&[0, 1], 400.0)],
    ))
    .unwrap();
    assert!(kinds(&plan)
        .iter()
        .all(|k| matches!(k, ActionKind::Replicate { .. })));
    // Far more capacity than load, but too young to remove.
    let plan = greedy(&input(
        &variants,
        &workers,
        running,
        vec![family(&[0, 1], 10.0)],
    ))
    .unwrap();
    assert!(plan.actions.is_empty(), "{:?}", plan.actions);
}

/// Scale-in stabilisation: a family with more capacity than it needs gives back only
/// instances older than `scale_in_hold_ms` (a replica just loaded or split off stays through
/// a dip of the measured load); a family short of capacity still replaces instances younger
/// than the hold by an upgrade. Both planners.
#[test]
fn scale_in_waits_for_the_hold_scale_up_does_not() {
    let variants = [
        var("a", HardwareKind::Cpu, 4, 100.0),
        var("b", HardwareKind::Cpu, 2, 500.0),
    ];
    let workers = [cpu_worker("w0", 32)];
    // Past a's load time (1 s), within the default hold (10 s).
    let young = |age: f64| vec![run(0, 0, 0, age), run(1, 0, 0, age), run(2, 0, 0, age)];
    let planners: [super::period::Planner; 2] = [greedy, exact];
    for plan_with in planners {
        let calm = |age: f64| {
            plan_with(&input(
                &variants,
                &workers,
                young(age),
                vec![family(&[0, 1], 10.0)],
            ))
            .unwrap()
        };
        assert!(calm(5_000.0).actions.is_empty(), "{:?}", calm(5_000.0));
        let later = calm(10_000.0);
        assert!(
            kinds(&later)
                .iter()
                .any(|k| matches!(k, ActionKind::RemoveReplica { .. })),
            "{later:?}"
        );
        // Without a hold only the load time counts.
        let mut i = input(
            &variants,
            &workers,
            young(5_000.0),
            vec![family(&[0, 1], 10.0)],
        );
        i.config.scale_in_hold_ms = 0.0;
        assert!(!plan_with(&i).unwrap().actions.is_empty());
        // Short of capacity (300 rows/s of a for 400): the young instances are upgraded.
        let surge = plan_with(&input(
            &variants,
            &workers,
            young(5_000.0),
            vec![family(&[0, 1], 400.0)],
        ))
        .unwrap();
        assert!(
            kinds(&surge)
                .iter()
                .any(|k| matches!(k, ActionKind::Upgrade { to: 1, .. })),
            "{surge:?}"
        );
    }
}

#[test]
fn new_loads_meet_the_slo_and_the_accuracy() {
    // fast misses the SLO at a full batch; accurate-enough only slow does.
    let mut fast = var("fast", HardwareKind::Cpu, 1, 1000.0);
    fast.latency.iter_mut().for_each(|p| p.p99_ms *= 100.0);
    let mut sloppy = var("sloppy", HardwareKind::Cpu, 1, 1000.0);
    sloppy.accuracy = 0.5;
    let slow = var("slow", HardwareKind::Cpu, 1, 100.0);
    let variants = [fast, sloppy, slow];
    let workers = cpu_workers(4, 16);
    let mut fam = family(&[0, 1, 2], 250.0);
    fam.slo_ms = Some(200.0);
    fam.min_accuracy = Some(0.8);
    let i = input(&variants, &workers, vec![], vec![fam]);
    for plan in [greedy(&i).unwrap(), exact(&i).unwrap()] {
        let k = kinds(&plan);
        assert_eq!(k.len(), 3, "{k:?}");
        assert!(
            k.iter()
                .all(|k| matches!(k, ActionKind::Replicate { variant: 2, .. })),
            "{k:?}"
        );
    }
}

#[test]
fn loads_respect_cores_memory_and_hardware() {
    let mut big = var("big", HardwareKind::Cpu, 4, 100.0);
    big.memory_bytes = 10_000_000_000;
    let variants = [big, var("gpu", HardwareKind::Gpu, 1, 10_000.0)];
    let mut low_mem = cpu_worker("low-mem", 16);
    low_mem.memory_bytes = 5_000_000_000;
    let mut busy = cpu_worker("busy", 16);
    busy.cores_used = 14;
    let roomy = cpu_worker("roomy", 8);
    let workers = [low_mem, busy, roomy];
    // 350 rows/s needs 4 instances of big (16 cores): only one fits, on "roomy" (it has
    // the cores for two, but a worker runs one instance of a variant).
    let i = input(&variants, &workers, vec![], vec![family(&[0, 1], 350.0)]);
    for plan in [greedy(&i).unwrap(), exact(&i).unwrap()] {
        assert_eq!(
            kinds(&plan),
            [ActionKind::Replicate {
                variant: 0,
                worker: 2
            }]
        );
        assert!((plan.score.unserved_qps - (350.0 * 1.05 - 100.0)).abs() < 1e-6);
    }
}

#[test]
fn scale_down_removes_replicas_down_to_the_threshold() {
    let variants = [var("a", HardwareKind::Cpu, 1, 100.0)];
    let workers = [cpu_worker("w0", 16)];
    let running = (0..6).map(|k| run(k, 0, 0, OLD)).collect();
    // 600 rows/s of capacity for 120: headroom 5.
    let plan = greedy(&input(
        &variants,
        &workers,
        running,
        vec![family(&[0], 120.0)],
    ))
    .unwrap();
    // 5 -> 4 -> 3 -> 2 -> 1.67 -> 1.33 (stops: below 1.5, and 1 instance would be < slack).
    let k = kinds(&plan);
    assert_eq!(k.len(), 4, "{k:?}");
    assert!(k
        .iter()
        .all(|k| matches!(k, ActionKind::RemoveReplica { .. })));
    assert!(plan.actions[0]
        .reason
        .contains("headroom 5.00 > scale-down 1.50"));
    assert!((plan.score.cost_after_per_s - 2e-5).abs() < 1e-15);
    assert_eq!(plan.score.unserved_qps, 0.0);
}

#[test]
fn scale_down_downgrades_to_a_cheaper_variant() {
    let variants = [
        var("gpu", HardwareKind::Gpu, 1, 2000.0),
        var("cpu", HardwareKind::Cpu, 2, 200.0),
    ];
    let mut w = cpu_worker("w0", 16);
    w.hardware.push(HardwareKind::Gpu);
    let workers = [w];
    let i = input(
        &variants,
        &workers,
        vec![run(3, 0, 0, OLD)],
        vec![family(&[0, 1], 100.0)],
    );
    let plan = greedy(&i).unwrap();
    assert_eq!(
        kinds(&plan),
        [ActionKind::Downgrade {
            from: 3,
            to: 1,
            worker: 0
        }]
    );
    assert!(plan.actions[0].cost_after_per_s < plan.actions[0].cost_before_per_s);
    assert_eq!(plan.score.unserved_qps, 0.0);
}

/// A downgrade never goes to a variant that batches less: an instance under load keeps ahead
/// of its queue by its batches, and the profile's peak of the smaller batch says nothing of the
/// requests' own cost around it.
#[test]
fn scale_down_never_downgrades_to_a_smaller_batch() {
    // "b2" is the cheaper variant (less memory) and its peak would still cover the load.
    let mut big = var("b64", HardwareKind::Cpu, 1, 2000.0);
    big.max_batch = 64;
    let mut small = var("b2", HardwareKind::Cpu, 1, 1000.0);
    small.max_batch = 2;
    small.memory_bytes /= 2;
    let prices = Prices {
        memory_gb_per_s: 1e-5,
        ..PRICES
    };
    let variants = [big, small];
    let workers = [cpu_worker("w0", 8)];
    let mut i = input(
        &variants,
        &workers,
        vec![run(3, 0, 0, OLD)],
        vec![family(&[0, 1], 100.0)],
    );
    i.prices = prices;
    let plan = greedy(&i).unwrap();
    assert!(
        !kinds(&plan)
            .iter()
            .any(|k| matches!(k, ActionKind::Downgrade { .. })),
        "{:?}",
        plan.actions
    );
    // The other way round (a larger batch that is cheaper) is a downgrade as before.
    let (mut big, mut small) = (variants[0].clone(), variants[1].clone());
    small.max_batch = 64;
    big.max_batch = 2;
    let variants = [big, small];
    let mut i = input(
        &variants,
        &workers,
        vec![run(3, 0, 0, OLD)],
        vec![family(&[0, 1], 100.0)],
    );
    i.prices = prices;
    assert!(kinds(&greedy(&i).unwrap())
        .iter()
        .any(|k| matches!(k, ActionKind::Downgrade { to: 1, .. })));
}

/// A family with an instance that serves less than its profile (Overloaded below its peak,
/// or Interfered) gives nothing back, whatever its profiled headroom: the queue or the
/// latency shows the profile overstates what the instances serve now. One Overloaded at its
/// peak is only full.
#[test]
fn an_overloaded_family_is_not_scaled_down() {
    let variants = [var("a", HardwareKind::Cpu, 1, 1000.0)];
    let workers = [cpu_worker("w0", 8)];
    let running = |state| {
        (0..3)
            .map(|k| Running {
                state,
                ..run(k, 0, 0, OLD)
            })
            .collect::<Vec<_>>()
    };
    // Profiled headroom 30: two of the three replicas go when all are Active ...
    let i = input(
        &variants,
        &workers,
        running(InstanceState::Active),
        vec![family(&[0], 100.0)],
    );
    assert!(!greedy(&i).unwrap().actions.is_empty());
    // ... and none when one of them is Overloaded, by either planner.
    let mut r = running(InstanceState::Active);
    r[1].state = InstanceState::Overloaded;
    let i = input(&variants, &workers, r.clone(), vec![family(&[0], 100.0)]);
    assert!(greedy(&i).unwrap().actions.is_empty());
    assert!(exact(&i).unwrap().actions.is_empty());
    // Nor when one runs slower than its profile (Interfered: on a shared host, the request
    // path's own threads take the cores the profile had to itself).
    r[1].state = InstanceState::Interfered;
    let i = input(&variants, &workers, r.clone(), vec![family(&[0], 100.0)]);
    assert!(greedy(&i).unwrap().actions.is_empty());
    // Overloaded while serving its profiled 1,000 rows/s: full, not short of its profile.
    r[1].state = InstanceState::Overloaded;
    r[1].qps = 1000.0;
    let i = input(&variants, &workers, r, vec![family(&[0], 100.0)]);
    assert!(!greedy(&i).unwrap().actions.is_empty());
}

/// Scaling in empties workers: replicas go first from the worker with the fewest cores in
/// use (it can then be released), and a downgrade's replacement stays on the replaced
/// instance's worker rather than moving to a less-utilised one.
#[test]
fn scale_down_empties_workers_and_replaces_in_place() {
    let variants = [var("a", HardwareKind::Cpu, 1, 100.0)];
    // w0 holds three instances, w1 (busier, fewer cores in use) one.
    let (mut w0, mut w1) = (cpu_worker("w0", 16), cpu_worker("w1", 16));
    w0.cores_used = 3;
    w1.cores_used = 1;
    w1.utilisation = 0.9;
    let workers = [w0, w1];
    let running = vec![
        run(0, 0, 0, OLD),
        run(1, 0, 0, OLD),
        run(2, 0, 0, OLD),
        run(3, 0, 1, OLD),
    ];
    // 400 rows/s of capacity for 120: one removal is enough to drop below 3.
    let plan = greedy(&input(
        &variants,
        &workers,
        running,
        vec![family(&[0], 120.0)],
    ))
    .unwrap();
    assert_eq!(
        kinds(&plan).first(),
        Some(&ActionKind::RemoveReplica { instance: 3 }),
        "{:?}",
        kinds(&plan)
    );

    let variants = [
        var("dear", HardwareKind::Cpu, 2, 2000.0),
        var("cheap", HardwareKind::Cpu, 1, 400.0),
    ];
    // The replaced instance is on w1, the busier worker: its replacement still goes there.
    let (w0, mut w1) = (cpu_worker("w0", 16), cpu_worker("w1", 16));
    w1.utilisation = 0.9;
    let workers = [w0, w1];
    let plan = greedy(&input(
        &variants,
        &workers,
        vec![run(5, 0, 1, OLD)],
        vec![family(&[0, 1], 100.0)],
    ))
    .unwrap();
    assert_eq!(
        kinds(&plan),
        [ActionKind::Downgrade {
            from: 5,
            to: 1,
            worker: 1
        }]
    );
}

/// Scaling in takes the last instance off a releasable worker (one the provider started)
/// before an equally priced, even slightly cheaper, one on a permanent worker: that also saves
/// the worker. A downgrade of an instance on a releasable worker puts the replacement on a
/// permanent worker with room, so the releasable one empties.
#[test]
fn scale_down_empties_releasable_workers_first() {
    // `b8` (higher peak) is on the releasable worker w1 and is a little cheaper (less memory):
    // by the instances' prices alone, the plan removes `b4` and keeps w1 busy.
    let mut b8 = var("b8", HardwareKind::Cpu, 1, 400.0);
    b8.memory_bytes = 900_000_000;
    let variants = [var("b4", HardwareKind::Cpu, 1, 200.0), b8];
    let (mut w0, mut w1) = (cpu_worker("w0", 2), cpu_worker("w1", 1));
    w0.cores_used = 1;
    w1.cores_used = 1;
    let workers = [w0, w1];
    let running = vec![run(0, 0, 0, OLD), run(1, 1, 1, OLD)];
    let priced = |workers: &[WorkerEntry], releasable: Vec<bool>| {
        let mut i = input(
            &variants,
            workers,
            running.clone(),
            vec![family(&[0, 1], 1.0)],
        );
        i.prices.memory_gb_per_s = 1e-6;
        kinds(&greedy(&i.with_releasable(releasable)).unwrap())
    };
    assert_eq!(
        priced(&workers, vec![]),
        [ActionKind::RemoveReplica { instance: 0 }]
    );
    assert_eq!(
        priced(&workers, vec![false, true]),
        [ActionKind::RemoveReplica { instance: 1 }]
    );
    // A worker with more on it than the instance is not emptied by removing it.
    let mut busy = workers.clone();
    busy[1].cores_used = 2;
    assert_eq!(
        priced(&busy, vec![false, true]),
        [ActionKind::RemoveReplica { instance: 0 }]
    );

    // Nor is one where another known instance runs, whatever cores it reports (a heartbeat
    // may not count a load yet).
    let mut i = input(
        &variants,
        &workers,
        vec![run(0, 0, 0, OLD), run(1, 1, 1, OLD), run(2, 0, 1, OLD)],
        vec![family(&[0, 1], 1.0)],
    )
    .with_releasable(vec![false, true]);
    i.prices.memory_gb_per_s = 1e-6;
    let first = kinds(&greedy(&i).unwrap()).first().copied();
    assert!(
        matches!(first, Some(ActionKind::RemoveReplica { instance }) if instance != 1),
        "{first:?}"
    );

    // Downgrade off a releasable worker: the replacement goes to w0, which has room.
    let variants = [
        var("dear", HardwareKind::Cpu, 2, 2000.0),
        var("cheap", HardwareKind::Cpu, 1, 400.0),
    ];
    let (w0, mut w1) = (cpu_worker("w0", 16), cpu_worker("w1", 16));
    w1.cores_used = 2;
    let workers = [w0, w1];
    let downgrade = |workers: &[WorkerEntry]| {
        let i = input(
            &variants,
            workers,
            vec![run(5, 0, 1, OLD)],
            vec![family(&[0, 1], 100.0)],
        )
        .with_releasable(vec![false, true]);
        kinds(&greedy(&i).unwrap())
    };
    let to_w0 = [ActionKind::Downgrade {
        from: 5,
        to: 1,
        worker: 0,
    }];
    assert_eq!(downgrade(&workers), to_w0);
    // Also when the permanent worker reads as loaded as the releasable one (a busy host; the
    // model period sees releasable workers fully busy) and has fewer free cores. (Seen on the
    // real server: the replacement went to the started worker, which then never emptied.)
    let mut busy = workers.clone();
    busy[0].cores_used = 8;
    for w in &mut busy {
        w.utilisation = 1.0;
    }
    assert_eq!(downgrade(&busy), to_w0);
    // The exact planner too, where the started worker is the tighter fit (its packing took
    // the worker with the fewest free cores; seen on the real server with the same outcome).
    let mut tight = workers.clone();
    tight[0].cores_used = 8;
    tight[1].cores_used = 12;
    let i = input(
        &variants,
        &tight,
        vec![run(5, 0, 1, OLD)],
        vec![family(&[0, 1], 100.0)],
    )
    .with_releasable(vec![false, true]);
    assert_eq!(kinds(&exact(&i).unwrap()), to_w0);
    assert_eq!(kinds(&greedy(&i).unwrap()), to_w0);
}

/// Scale-in moves a family's last instance off a releasable worker, to a permanent worker with
/// room: the move costs a load, stopping the worker saves its price. Never to another
/// releasable worker, nor when no permanent one has room. (Seen on the real server: the exact
/// planner's downgrade had put the only instance on the started worker while the permanent
/// one was full; once that emptied, nothing brought the instance back and the started worker
/// never stopped.)
#[test]
fn scale_in_moves_the_last_instance_off_a_releasable_worker() {
    let variants = [var("a", HardwareKind::Cpu, 1, 400.0)];
    let (w0, mut w1, mut w2) = (
        cpu_worker("w0", 2),
        cpu_worker("w1", 2),
        cpu_worker("w2", 2),
    );
    w1.cores_used = 1;
    w2.cores_used = 2;
    let plan = |workers: &[WorkerEntry], releasable: Vec<bool>| {
        let i = input(
            &variants,
            workers,
            vec![run(4, 0, 1, OLD)],
            vec![family(&[0], 10.0)],
        )
        .with_releasable(releasable);
        kinds(&greedy(&i).unwrap())
    };
    let workers = [w0.clone(), w1.clone()];
    assert_eq!(
        plan(&workers, vec![false, true]),
        [ActionKind::Migrate {
            instance: 4,
            from_worker: 1,
            to_worker: 0
        }]
    );
    // On a permanent worker it stays.
    assert_eq!(plan(&workers, vec![false, false]), []);
    // Not onto a permanent worker that runs the variant already (the controller would look
    // for a third worker, and ask for one): 500 rows/s needs both instances, so it stays.
    let mut hosting = w0.clone();
    hosting.cores_used = 1;
    let both = [hosting, w1.clone()];
    let i = input(
        &variants,
        &both,
        vec![run(3, 0, 0, OLD), run(4, 0, 1, OLD)],
        vec![family(&[0], 500.0)],
    )
    .with_releasable(vec![false, true]);
    assert_eq!(kinds(&greedy(&i).unwrap()), []);
    // No permanent worker with room: it stays.
    assert_eq!(plan(&[w2.clone(), w1.clone()], vec![false, true]), []);
    // Only another releasable worker has room: it stays.
    assert_eq!(
        plan(&[w2, w1.clone(), w0.clone()], vec![false, true, true])
            .iter()
            .filter(|k| matches!(k, ActionKind::Migrate { .. }))
            .count(),
        0
    );
}

/// Scale-in takes a variant's instances off releasable workers before permanent ones, even
/// where the permanent worker has fewer cores in use: both planners leave the started worker
/// empty so the worker period can stop it. (Seen on the real server: the exact planner had
/// moved a replacement onto the started worker, then scale-in removed the permanent worker's
/// copy of the same variant and the started one never idled.)
#[test]
fn scale_in_takes_a_variants_instances_off_releasable_workers_first() {
    let variants = [
        var("b2", HardwareKind::Cpu, 1, 200.0),
        var("b8", HardwareKind::Cpu, 1, 400.0),
    ];
    let (mut w0, mut w1) = (cpu_worker("w0", 2), cpu_worker("w1", 2));
    w0.cores_used = 1;
    w1.cores_used = 2;
    let workers = [w0, w1];
    // b8 on both workers, b2 beside it on the started worker w1.
    let running = vec![run(0, 1, 0, OLD), run(1, 0, 1, OLD), run(2, 1, 1, OLD)];
    let i = input(&variants, &workers, running, vec![family(&[0, 1], 1.0)])
        .with_releasable(vec![false, true]);
    for (name, plan) in [
        ("greedy", greedy(&i).unwrap()),
        ("exact", exact(&i).unwrap()),
    ] {
        let mut removed: Vec<usize> = kinds(&plan)
            .into_iter()
            .filter_map(|k| match k {
                ActionKind::RemoveReplica { instance } => Some(instance),
                _ => None,
            })
            .collect();
        removed.sort_unstable();
        assert_eq!(removed, [1, 2], "{name}: {:?}", kinds(&plan));
    }
}

#[test]
fn exact_finds_the_mix_the_greedy_misses() {
    // 238 rows/s with slack: 249.9. Greedy takes one variant: c x5 (5 cores) beats b x2 (6);
    // the optimum mixes them: b + c = 255 rows/s on 4 cores.
    let variants = [
        var("b", HardwareKind::Cpu, 3, 200.0),
        var("c", HardwareKind::Cpu, 1, 55.0),
    ];
    let workers = cpu_workers(5, 16);
    let i = input(&variants, &workers, vec![], vec![family(&[0, 1], 238.0)]);
    let g = greedy(&i).unwrap();
    let e = exact(&i).unwrap();
    let loaded = |plan: &ScalingPlan| {
        let mut v: Vec<usize> = kinds(plan)
            .iter()
            .map(|k| match *k {
                ActionKind::Replicate { variant, .. } => variant,
                k => panic!("{k:?}"),
            })
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(loaded(&g), [1; 5]);
    assert_eq!(loaded(&e), [0, 1]);
    assert_eq!((g.score.unserved_qps, e.score.unserved_qps), (0.0, 0.0));
    assert!((e.score.cost_after_per_s - 4e-5).abs() < 1e-15);
    let gap = gap(&i, &g).unwrap();
    assert_eq!(gap.optimal, e.score);
    assert!((gap.relative - 0.25).abs() < 1e-9, "{gap:?}");
    assert_eq!(super::gap(&i, &e).unwrap().relative, 0.0);
}

#[test]
fn exact_places_per_worker() {
    // Two 3-core instances needed; each worker has 4 free cores.
    let variants = [var("a", HardwareKind::Cpu, 3, 100.0)];
    let workers = [cpu_worker("w0", 4), cpu_worker("w1", 4)];
    let i = input(&variants, &workers, vec![], vec![family(&[0], 150.0)]);
    let plan = exact(&i).unwrap();
    let mut placed: Vec<usize> = plan
        .actions
        .iter()
        .map(|a| match a.kind {
            ActionKind::Replicate { worker, .. } => worker,
            k => panic!("{k:?}"),
        })
        .collect();
    placed.sort();
    assert_eq!(placed, [0, 1]);
}

#[test]
fn exact_falls_back_to_per_worker_placement_when_counts_do_not_pack() {
    // 1090 rows/s on two workers of 6 free cores. Counted over the fleet, two a's and a c
    // (11 cores, all instant to load) are cheapest, but after an a on each worker no 3-core
    // room is left. Per worker (one instance of a variant each), the best is {a, b, b2} +
    // {a, b} or {a, b} + {a, b, b2}: 11 cores, three 1-core loads (10 cores serve at most
    // 1000 rows/s).
    let mut a = var("a", HardwareKind::Cpu, 4, 400.0);
    a.load_ms = 0.0;
    let mut c = var("c", HardwareKind::Cpu, 3, 290.0);
    c.load_ms = 0.0;
    let variants = [
        a,
        var("b", HardwareKind::Cpu, 1, 100.0),
        c,
        var("b2", HardwareKind::Cpu, 1, 100.0),
    ];
    let workers = cpu_workers(2, 6);
    let i = input(
        &variants,
        &workers,
        vec![],
        vec![family(&[0, 1, 2, 3], 1090.0 / 1.05)],
    );
    let p = Prepared::new(&i).unwrap();
    for only in [Some(0), None] {
        let counts = ilp::solve(&p, Level::Fleet, only, Solver::DEFAULT).unwrap();
        assert_eq!(counts.loads, [(0, None, 2), (2, None, 1)]);
        assert!(ilp::pack(&p, &counts.loads).is_none());
    }
    let plan = exact(&i).unwrap();
    assert_eq!(plan.score.unserved_qps, 0.0);
    let mut cores = [0usize; 2];
    let mut count = [0usize; 4];
    for a in &plan.actions {
        let ActionKind::Replicate { variant, worker } = a.kind else {
            panic!("{a:?}");
        };
        cores[worker] += variants[variant].threads;
        count[variant] += 1;
    }
    assert!(cores[0] <= 6 && cores[1] <= 6, "{cores:?}");
    assert_eq!(
        (count[0], count[1] + count[3], count[2]),
        (2, 3, 0),
        "{count:?}"
    );
    assert!((plan.score.objective - (8.0 + 3.0 * 1.1) * 1e-5).abs() < 1e-12);
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random small problem: `families` x 4 variants over 3 roomy workers (one with a GPU).
fn random_case(
    rng: &mut Rng,
    families: usize,
) -> (
    Vec<VariantEntry>,
    Vec<WorkerEntry>,
    Vec<Running>,
    Vec<Family>,
) {
    let mut variants = Vec::new();
    let mut fams = Vec::new();
    let mut running = Vec::new();
    for f in 0..families {
        let first = variants.len();
        for k in 0..4 {
            let gpu = k == 3;
            let threads = [1, 2, 4][rng.below(3)];
            let peak = if gpu {
                1000.0 + 2000.0 * rng.unit()
            } else {
                (50.0 + 150.0 * rng.unit()) * threads as f64
            };
            let hw = if gpu {
                HardwareKind::Gpu
            } else {
                HardwareKind::Cpu
            };
            let mut v = var(&format!("f{f}v{k}"), hw, threads, peak);
            v.load_ms = 200.0 + 3000.0 * rng.unit();
            variants.push(v);
        }
        for _ in 0..rng.below(4) {
            let variant = first + rng.below(4);
            running.push(Running {
                instance: running.len(),
                variant,
                worker: if variant - first == 3 {
                    0
                } else {
                    rng.below(3)
                },
                state: InstanceState::Active,
                qps: 0.0,
                state_age_ms: if rng.below(3) == 0 { 0.0 } else { OLD },
            });
        }
        let load = 1500.0 * rng.unit();
        fams.push(Family {
            name: format!("f{f}"),
            variants: (first..first + 4).collect(),
            load_qps: load,
            rate_qps: load,
            slo_ms: None,
            min_accuracy: None,
        });
    }
    // Roomy: a worker runs one instance of a variant, so as many workers as any plan needs.
    let mut workers = cpu_workers(24, 16);
    for w in &mut workers[..8] {
        w.hardware.push(HardwareKind::Gpu);
    }
    (variants, workers, running, fams)
}

/// The per-worker model (when fleet-level counts do not pack) puts new instances on permanent
/// workers while they have room, as the packing does: scale-in can then empty the workers the
/// provider started.
#[test]
fn the_per_worker_model_loads_on_permanent_workers_first() {
    let variants = [var("a", HardwareKind::Cpu, 1, 100.0)];
    let on = |permanent: usize| {
        // The started worker first in the index, where equal columns would otherwise land.
        let mut workers = vec![cpu_worker("started", 8)];
        workers.extend(cpu_workers(permanent, 8));
        let mut releasable = vec![false; workers.len()];
        releasable[0] = true;
        let i = input(&variants, &workers, Vec::new(), vec![family(&[0], 250.0)])
            .with_releasable(releasable);
        let p = Prepared::new(&i).unwrap();
        let c = ilp::solve(&p, Level::Worker, None, Solver::DEFAULT).unwrap();
        // [on the started worker, on permanent ones]
        let mut per_worker = [0; 2];
        for &(j, w, n) in &c.loads {
            assert_eq!(j, 0);
            per_worker[usize::from(w.unwrap() > 0)] += n;
        }
        per_worker
    };
    // 250 rows/s with slack at 100 rows/s an instance: three instances, one per worker.
    assert_eq!(on(3), [0, 3]);
    assert_eq!(on(2), [1, 2]);
}

#[test]
fn exact_is_never_worse_than_greedy_and_greedy_stays_close() {
    let mut rng = Rng(7);
    let mut worst: f64 = 0.0;
    let mut gaps = Vec::new();
    for case in 0..40 {
        let (variants, workers, running, families) = random_case(&mut rng, 3);
        let i = input(&variants, &workers, running, families);
        let g = greedy(&i).unwrap();
        let e = exact(&i).unwrap();
        assert!(
            e.score.objective <= g.score.objective * (1.0 + 1e-9),
            "case {case}: exact {:?} > greedy {:?}",
            e.score,
            g.score
        );
        // Workers are roomy: both serve the load.
        assert_eq!(e.score.unserved_qps, 0.0, "case {case}");
        assert_eq!(g.score.unserved_qps, 0.0, "case {case}");
        // The per-worker model reaches the same optimum as the fleet-level one plus packing.
        let p = Prepared::new(&i).unwrap();
        let c = ilp::solve(&p, Level::Worker, None, Solver::DEFAULT).unwrap();
        let loads: Vec<(usize, usize)> = c
            .loads
            .iter()
            .flat_map(|&(j, w, n)| std::iter::repeat_n((j, w.unwrap()), n))
            .collect();
        let per_worker = p.score(&loads, &c.removals).objective;
        assert!(
            (per_worker - e.score.objective).abs() <= 1e-9 * e.score.objective,
            "case {case}: per-worker {per_worker} vs {}",
            e.score.objective
        );
        let gap = gap(&i, &g).unwrap();
        assert!(gap.relative >= -1e-9);
        worst = worst.max(gap.relative);
        gaps.push(gap.relative);
    }
    gaps.sort_by(f64::total_cmp);
    let median = infaas_core::stats::median_of(&gaps).unwrap();
    eprintln!("greedy gaps: median {median:.3}, worst {worst:.3}");
    // Greedy keeps up to `scale_down` headroom and takes one variant per scale-up.
    assert!(worst > 0.0, "the cases should show some gap");
    assert!(worst < 0.75, "worst greedy gap {worst}");
    assert!(median < 0.1, "median greedy gap");
}

#[test]
fn invalid_inputs_are_refused() {
    let variants = [var("a", HardwareKind::Cpu, 1, 100.0)];
    let workers = [cpu_worker("w0", 4)];
    let shared = input(
        &variants,
        &workers,
        vec![],
        vec![family(&[0], 1.0), family(&[0], 1.0)],
    );
    assert!(matches!(
        greedy(&shared),
        Err(ScalingError::SharedVariant { variant: 0, .. })
    ));
    let out = input(&variants, &workers, vec![], vec![family(&[3], 1.0)]);
    assert!(matches!(exact(&out), Err(ScalingError::OutOfRange { .. })));
    let negative = input(&variants, &workers, vec![], vec![family(&[0], -1.0)]);
    assert!(matches!(
        greedy(&negative),
        Err(ScalingError::InvalidFamily { .. })
    ));
}

#[test]
fn input_from_snapshot_collects_families_and_live_instances() {
    let mut b = Snapshot::builder();
    let a = b
        .add_variant("acme", var("a", HardwareKind::Cpu, 1, 100.0))
        .unwrap();
    let mut other = var("o", HardwareKind::Cpu, 1, 100.0);
    other.model = "other".to_owned();
    let o = b.add_variant("acme", other).unwrap();
    let w = b.add_worker(cpu_worker("w0", 8)).unwrap();
    let inst = |id: &str, variant, state, qps| InstanceEntry {
        id: id.to_owned(),
        variant,
        worker: w,
        state,
        queue_len: 0,
        qps,
    };
    let i0 = b
        .add_instance(inst("i0", a, InstanceState::Active, 40.0))
        .unwrap();
    b.add_instance(inst("i1", a, InstanceState::Inactive, 0.0))
        .unwrap();
    b.add_instance(inst("i2", o, InstanceState::Active, 5.0))
        .unwrap();
    let s = b.build();
    let demands = [FamilyDemand {
        tenant: "acme",
        model: "m",
        load_qps: None,
        rate_qps: None,
        slo_ms: Some(200.0),
        min_accuracy: None,
    }];
    let i = ScalingInput::from_snapshot(&s, &demands, |_| 5.0, PRICES, ScalingConfig::default());
    assert_eq!(i.families.len(), 1);
    assert_eq!(i.families[0].variants, [a]);
    assert_eq!(i.families[0].load_qps, 40.0);
    assert_eq!(i.families[0].name, "acme/m");
    assert_eq!(i.running.len(), 1);
    assert_eq!(i.running[0].instance, i0);
    assert_eq!(i.running[0].state_age_ms, 5.0);
    // 40 rows/s on 100 rows/s of capacity (full batches of 8 take a p99 of 96 ms: a query
    // that waits out one under way still meets 200 ms): headroom 2.5, but i0 is too young to
    // remove.
    assert!(greedy(&i).unwrap().actions.is_empty());
}

#[test]
fn a_variant_counts_only_the_batches_its_slo_leaves_room_for() {
    // Full batches of 8: mean 80 ms, p99 96 ms (100 rows/s); one row: mean 20 ms, p99 24 ms.
    let v = var("a", HardwareKind::Cpu, 1, 100.0);
    assert_eq!(v.peak_qps_within(None), 100.0);
    assert_eq!(v.peak_qps_within(Some(200.0)), 100.0);
    // Under 100 ms a query cannot wait out a full batch and run in the next (2 x 96 ms): the
    // instance serves the batches that fit, here single rows (50 rows/s).
    assert_eq!(v.peak_qps_within(Some(100.0)), 50.0);
    // Under 40 ms not even one row can wait for another (2 x 24 ms): one at a time, as idle.
    assert_eq!(v.peak_qps_within(Some(40.0)), 50.0);
    // The planner counts that capacity: 40 rows/s under 100 ms on one instance is short.
    let mut b = Snapshot::builder();
    let a = b.add_variant("acme", v).unwrap();
    let w = b.add_worker(cpu_worker("w0", 8)).unwrap();
    b.add_worker(cpu_worker("w1", 8)).unwrap();
    b.add_instance(InstanceEntry {
        id: "i0".to_owned(),
        variant: a,
        worker: w,
        state: InstanceState::Active,
        queue_len: 0,
        qps: 40.0,
    })
    .unwrap();
    let s = b.build();
    let demand = |slo: f64| {
        [FamilyDemand {
            tenant: "acme",
            model: "m",
            load_qps: None,
            rate_qps: None,
            slo_ms: Some(slo),
            min_accuracy: None,
        }]
    };
    let scale = |slo: f64| {
        let d = demand(slo);
        let i = ScalingInput::from_snapshot(&s, &d, |_| 1e9, PRICES, ScalingConfig::default());
        greedy(&i).unwrap().actions.len()
    };
    assert_eq!(scale(200.0), 0, "100 rows/s of capacity for 40");
    assert!(
        scale(100.0) > 0,
        "50 rows/s under 100 ms, short of 40 x its headroom"
    );
}

#[test]
fn queueing_slack_grows_as_the_slo_nears_the_service_time() {
    // The zoo CNN: 3.6 ms a row against a 36 ms SLO keeps 80 % utilisation at most.
    let cnn = queueing_slack(36.0, 3.6, 1);
    assert!((1.2..1.3).contains(&cnn), "{cnn}");
    // A tiny model against a loose SLO: nothing beyond the configured slack.
    assert!(queueing_slack(50.0, 0.05, 1) < 1.01);
    // Tighter SLOs ask for more, up to the cap; none for an SLO the run itself misses.
    let ladder: Vec<f64> = [100.0, 36.0, 18.0, 9.0]
        .iter()
        .map(|&slo| queueing_slack(slo, 3.6, 1))
        .collect();
    assert!(ladder.windows(2).all(|w| w[0] < w[1]), "{ladder:?}");
    assert_eq!(queueing_slack(4.0, 3.6, 1), MAX_QUEUEING_SLACK);
    assert_eq!(queueing_slack(3.0, 3.6, 1), 1.0);
    assert_eq!(queueing_slack(f64::INFINITY, 3.6, 1), 1.0);
    let cfg = ScalingConfig::default();
    assert_eq!(cfg.slack_for(None, 3.6, 1), cfg.slack);
    assert_eq!(cfg.slack_for(Some(36.0), 3.6, 1), cnn);
    assert!((cfg.scale_down_for(cnn) - cfg.scale_down * cnn / cfg.slack).abs() < 1e-12);
}

/// Instances that selection fills shortest-queue-first wait as one pooled queue: the more of
/// them, the less idle capacity the same SLO needs.
#[test]
fn pooled_instances_need_less_queueing_headroom() {
    // Erlang's C: one server waits whenever busy; two at one server's load wait a third of the
    // time.
    assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
    assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!(erlang_c(3, 3.0), 1.0);
    // One server is the single-queue formula.
    let one = |rho: f64, k: f64| rho * (-2.0 * k * (1.0 - rho) / rho).exp();
    let s1 = queueing_slack(36.0, 3.6, 1);
    assert!((one(1.0 / s1, 9.0) - SLO_MISS_TARGET).abs() < 1e-6);
    // A 250-ms run against a 300-ms SLO: the cap on one instance, less on more.
    let slacks: Vec<f64> = [1, 2, 5, 10, 40]
        .iter()
        .map(|&c| queueing_slack(300.0, 250.0, c))
        .collect();
    assert_eq!(slacks[0], MAX_QUEUEING_SLACK);
    assert!(slacks.windows(2).all(|w| w[1] <= w[0]), "{slacks:?}");
    assert!((1.55..1.7).contains(&slacks[3]), "{slacks:?}");
    assert!((1.15..1.25).contains(&slacks[4]), "{slacks:?}");
    // Zero instances count as one.
    assert_eq!(queueing_slack(300.0, 250.0, 0), slacks[0]);
}

/// Two replicas of a model whose rows do not batch, at 250 rows/s: without an SLO one goes
/// (280 rows/s left, headroom 1.12 >= 1.05); with an SLO ten times its one-row run, it stays,
/// since one instance at 89 % utilisation would queue queries past the SLO.
#[test]
fn a_replica_stays_when_the_one_left_would_queue_past_the_slo() {
    let variants = [var("cnn", HardwareKind::Cpu, 1, 280.0)];
    let workers = [cpu_worker("w0", 2), cpu_worker("w1", 2)];
    let service = variants[0].service_ms();
    let running = || vec![run(0, 0, 0, OLD), run(1, 0, 1, OLD)];
    let no_slo = greedy(&input(
        &variants,
        &workers,
        running(),
        vec![family(&[0], 250.0)],
    ))
    .unwrap();
    let k = kinds(&no_slo);
    assert!(matches!(k[..], [ActionKind::RemoveReplica { .. }]), "{k:?}");
    let mut with_slo = family(&[0], 250.0);
    with_slo.slo_ms = Some(10.0 * service);
    for plan in [
        greedy(&input(
            &variants,
            &workers,
            running(),
            vec![with_slo.clone()],
        ))
        .unwrap(),
        exact(&input(
            &variants,
            &workers,
            running(),
            vec![with_slo.clone()],
        ))
        .unwrap(),
    ] {
        assert!(plan.actions.is_empty(), "{:?}", kinds(&plan));
    }
}

/// The queueing headroom is kept over the rate arriving now; the peak hold's busiest second
/// needs only the base slack (it is a rate the family served, not one to queue on).
#[test]
fn the_queueing_headroom_is_kept_over_the_rate_now_not_the_held_peak() {
    let cfg = ScalingConfig::default();
    let q = cfg.slack_for(Some(300.0), 250.0, 10);
    assert!(q > 1.5, "{q}");
    assert!((cfg.headroom(Some(300.0), 250.0, 10, 100.0, 100.0) - q).abs() < 1e-12);
    let held = cfg.headroom(Some(300.0), 250.0, 10, 200.0, 100.0);
    assert!((held * 200.0 - (q * 100.0).max(cfg.slack * 200.0)).abs() < 1e-9);
    assert_eq!(
        cfg.headroom(Some(300.0), 250.0, 10, 1000.0, 10.0),
        cfg.slack
    );
    // Through the planner: a model whose rows do not batch (20 ms each, 50 rows/s an
    // instance) against a 30-ms SLO, planned for 200 rows/s.
    let mut cnn = var("cnn", HardwareKind::Cpu, 1, 50.0);
    cnn.max_batch = 1;
    cnn.latency = vec![LatencyPoint {
        batch: 1,
        p50_ms: 20.0,
        p99_ms: 24.0,
        mean_ms: 20.0,
        throughput_per_s: 50.0,
    }];
    let variants = [cnn];
    let workers = cpu_workers(16, 2);
    let replicas = |rate: f64| {
        let mut fam = family(&[0], 200.0);
        fam.slo_ms = Some(30.0);
        fam.rate_qps = rate;
        kinds(&greedy(&input(&variants, &workers, vec![], vec![fam])).unwrap()).len()
    };
    // All of it arriving now: the queueing headroom over 200 rows/s.
    let now = replicas(200.0);
    assert!(now >= 6, "{now} {}", cfg.slack_for(Some(30.0), 20.0, 6));
    // Half of it held from a burst: the base slack over 200 rows/s, five replicas.
    assert_eq!(replicas(100.0), 5);
}

/// A family grown replica by replica on two slow variants (each replica was the cheapest
/// answer to one period's deficit) moves to the variant that serves its load cheapest per
/// row/s: the switch replaces the instances of both, where an upgrade replaces one variant's.
/// The new instance loads before an old one goes; the others stay until scale-down.
#[test]
fn a_family_grown_on_two_slow_variants_switches_to_the_cheaper_row() {
    let variants = [
        var("a1", HardwareKind::Cpu, 4, 100.0),
        var("a2", HardwareKind::Cpu, 4, 120.0),
        var("b", HardwareKind::Cpu, 2, 500.0),
    ];
    let workers = [cpu_worker("w0", 32)];
    let running = vec![
        run(0, 0, 0, OLD),
        run(1, 0, 0, OLD),
        run(2, 1, 0, OLD),
        run(3, 1, 0, OLD),
    ];
    let plan = greedy(&input(
        &variants,
        &workers,
        running,
        vec![family(&[0, 1, 2], 430.0)],
    ))
    .unwrap();
    let k = kinds(&plan);
    assert!(
        matches!(k[..], [ActionKind::Upgrade { to: 2, .. }]),
        "{k:?}"
    );
    assert!(
        plan.actions[0]
            .reason
            .contains("switch the slower variants x4 to b x1"),
        "{}",
        plan.actions[0].reason
    );
    assert_eq!(plan.score.unserved_qps, 0.0);
}

/// A replica is priced with the headroom the family keeps once it is live: one more instance
/// of a variant whose one-row run is near the SLO is the cheapest answer to a small deficit
/// per instance, but every instance of the family would then keep that variant's queueing
/// headroom.
#[test]
fn a_replica_is_priced_with_the_headroom_it_brings() {
    let variants = [
        var("fast", HardwareKind::Cpu, 2, 500.0),
        var("slow", HardwareKind::Cpu, 1, 40.0),
    ];
    let workers = cpu_workers(2, 32);
    let mut fam = family(&[0, 1], 490.0);
    fam.slo_ms = Some(60.0);
    let plan = greedy(&input(
        &variants,
        &workers,
        vec![run(0, 0, 0, OLD)],
        vec![fam],
    ))
    .unwrap();
    assert_eq!(
        kinds(&plan),
        [ActionKind::Replicate {
            variant: 0,
            worker: 1
        }]
    );
}

/// One more small replica is the cheapest answer to each small deficit, while the family's
/// whole load is served cheaper by one large instance: the family grows on the large one.
#[test]
fn a_family_grows_on_the_variant_cheapest_for_its_whole_load() {
    let variants = [
        var("small", HardwareKind::Cpu, 1, 10.0),
        var("large", HardwareKind::Cpu, 8, 200.0),
    ];
    let workers = [cpu_worker("w0", 32)];
    // Fourteen young small instances (none may be replaced yet): 140 rows/s for 150.
    let running = (0..14).map(|k| run(k, 0, 0, 0.0)).collect();
    let plan = greedy(&input(
        &variants,
        &workers,
        running,
        vec![family(&[0, 1], 150.0)],
    ))
    .unwrap();
    // Two small replicas (2 cores) cover the deficit for less than one large (8 cores), but
    // the load on small ones alone takes 16 cores, on large ones 8.
    assert_eq!(
        kinds(&plan),
        [ActionKind::Replicate {
            variant: 1,
            worker: 0
        }]
    );
    assert_eq!(plan.score.unserved_qps, 0.0);
}

/// A variant whose full batch takes most of the SLO is cheaper but misses whenever a query
/// waits: the family grows on one that leaves a query room to wait, and on the other only
/// when that one cannot be placed.
#[test]
fn a_family_grows_on_variants_that_leave_room_to_queue() {
    let variants = [
        // A full batch in 80 ms under a 100-ms SLO, on one core.
        var("near", HardwareKind::Cpu, 1, 120.0),
        // In 24 ms, on four cores.
        var("roomy", HardwareKind::Cpu, 4, 400.0),
    ];
    let plan_on = |cores: usize| {
        let workers = [cpu_worker("w0", cores)];
        let mut fam = family(&[0, 1], 20.0);
        fam.slo_ms = Some(100.0);
        greedy(&input(&variants, &workers, Vec::new(), vec![fam])).unwrap()
    };
    let eight = [cpu_worker("w0", 8)];
    let prepared = input(
        &variants,
        &eight,
        Vec::new(),
        vec![Family {
            slo_ms: Some(100.0),
            ..family(&[0, 1], 20.0)
        }],
    );
    let p = Prepared::new(&prepared).unwrap();
    assert_eq!(
        (p.loadable.clone(), p.preferred.clone()),
        (vec![true, true], vec![false, true])
    );
    assert_eq!(
        kinds(&plan_on(8)),
        [ActionKind::Replicate {
            variant: 1,
            worker: 0
        }]
    );
    // Three cores: no room for the roomy variant.
    assert!(
        kinds(&plan_on(3))
            .iter()
            .all(|k| matches!(k, ActionKind::Replicate { variant: 0, .. })),
        "{:?}",
        kinds(&plan_on(3))
    );
}

/// A worker runs one instance of a variant: a family whose cheapest variant runs on every
/// worker that can host it grows on its next variant too (most often the same weights at
/// another max batch), and no plan puts two instances of a variant on one worker.
#[test]
fn a_family_grows_on_its_next_variant_where_the_cheapest_runs_on_every_worker() {
    let variants = [
        var("b4", HardwareKind::Cpu, 1, 100.0),
        var("b8", HardwareKind::Cpu, 1, 90.0),
    ];
    let workers = cpu_workers(2, 8);
    // 350 rows/s with slack: 367.5. Two b4 (one per worker) serve 200, two b8 the rest.
    let i = input(&variants, &workers, vec![], vec![family(&[0, 1], 350.0)]);
    for (name, plan) in [
        ("greedy", greedy(&i).unwrap()),
        ("exact", exact(&i).unwrap()),
    ] {
        assert_eq!(plan.score.unserved_qps, 0.0, "{name}: {:?}", kinds(&plan));
        let mut placed: Vec<(usize, usize)> = kinds(&plan)
            .iter()
            .map(|k| match *k {
                ActionKind::Replicate { variant, worker } => (variant, worker),
                k => panic!("{name}: {k:?}"),
            })
            .collect();
        placed.sort_unstable();
        assert_eq!(placed, [(0, 0), (0, 1), (1, 0), (1, 1)], "{name}");
    }
}
