//! Offline (batch) jobs: which variant a job runs on and where, and whether online traffic
//! leaves room for it (INFaaS `offline_query`: jobs use spare capacity only).

use crate::instance_state::InstanceState;
use crate::select::Target;
use crate::snapshot::{variant_cost_per_query, Prices, Snapshot};

/// The variant for a job: among the target's variants that meet `min_accuracy` and that a
/// worker holds or can load, the one with the lowest cost per row at its largest batch
/// (throughput per cost), then the highest saturation throughput, then the most accurate.
/// `jobs_on` as in [`job_placement`].
pub fn job_variant(
    s: &Snapshot,
    tenant: &str,
    target: Target<'_>,
    min_accuracy: Option<f64>,
    prices: &Prices,
    jobs_on: &[&str],
) -> Option<usize> {
    let list = match target {
        Target::App(app) => s.app_variants(tenant, app),
        Target::Model(model) => s.model_variants(tenant, model),
    };
    let variants = s.variants();
    let mut best: Option<(usize, f64, f64)> = None;
    for &vi in list {
        let v = &variants[vi];
        if min_accuracy.is_some_and(|min| v.accuracy < min) {
            break; // sorted by accuracy, descending
        }
        if job_placement(s, vi, jobs_on).is_none() {
            continue;
        }
        let per_row = variant_cost_per_query(v, prices, v.max_batch);
        let peak = v.peak_qps();
        let better = best.is_none_or(|(_, c, p)| {
            per_row.total_cmp(&c).is_lt() || (per_row == c && peak > p * 1.000_001)
        });
        if better {
            best = Some((vi, per_row, peak));
        }
    }
    best.map(|(vi, _, _)| vi)
}

/// Where a job's batches go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobPlacement {
    /// A loaded instance on a live worker.
    Instance(usize),
    /// No instance: load the variant on this worker.
    Load(usize),
}

/// A loaded, non-overloaded instance of variant `vi` (the least queued), else the
/// least-utilised live worker that can host it. An instance in `jobs_on` (ids of instances
/// that ran jobs' batches lately, see [`spare_capacity`]) counts even when Overloaded: the
/// jobs' own back-to-back batches make it so, and a job runs one batch at a time, so another
/// instance would not finish it sooner.
pub fn job_placement(s: &Snapshot, vi: usize, jobs_on: &[&str]) -> Option<JobPlacement> {
    let instances = s.instances();
    let loaded = s
        .variant_instances(vi)
        .iter()
        .copied()
        .filter(|&i| match instances[i].state {
            InstanceState::Inactive => false,
            InstanceState::Overloaded => jobs_on.contains(&instances[i].id.as_str()),
            _ => true,
        })
        .min_by_key(|&i| s.queued(i));
    if let Some(i) = loaded {
        return Some(JobPlacement::Instance(i));
    }
    let v = s.variants().get(vi)?;
    let workers = s.workers();
    s.workers_with(v.hardware)
        .iter()
        .copied()
        .filter(|&w| workers[w].can_host(v) && s.cores_for(w, vi))
        .min_by(|&a, &b| workers[a].utilisation.total_cmp(&workers[b].utilisation))
        .map(JobPlacement::Load)
}

/// Online traffic over the last window, as the controller measured it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OnlineLoad {
    /// Seconds of online query latency per second, over all queries.
    pub busy_s_per_s: f64,
    /// Online queries per second.
    pub qps: f64,
    /// Fraction of online queries with an SLO that missed it.
    pub slo_miss_rate: f64,
}

/// When jobs may run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpareCapacity {
    /// Jobs run only while online work keeps the cores below this fraction (0.4).
    pub max_online_utilisation: f64,
    /// Jobs pause when more online queries than this miss their SLO (0.01).
    pub max_slo_miss_rate: f64,
    /// A paused job resumes below `resume_factor` x the limits (hysteresis, 0.75).
    pub resume_factor: f64,
}

impl Default for SpareCapacity {
    fn default() -> Self {
        SpareCapacity {
            max_online_utilisation: 0.4,
            max_slo_miss_rate: 0.01,
            resume_factor: 0.75,
        }
    }
}

/// How long an instance that ran a job's batch counts as the jobs' own in [`spare_capacity`]
/// (its state follows its load a few periods late), in milliseconds.
pub const JOB_INSTANCE_MEMORY_MS: f64 = 10_000.0;

/// `Ok(())` when jobs may run now; otherwise why not. `paused` says whether jobs are paused
/// (they then need to fall below the resume thresholds). `jobs_on` holds the ids of the
/// instances that ran jobs' batches within [`JOB_INSTANCE_MEMORY_MS`]: back-to-back batches
/// make an instance Overloaded by themselves, so for those the online figures decide (the
/// share of the cores online queries take and their SLO misses), not the state.
pub fn spare_capacity(
    s: &Snapshot,
    online: &OnlineLoad,
    cfg: &SpareCapacity,
    paused: bool,
    jobs_on: &[&str],
) -> Result<(), String> {
    let factor = if paused { cfg.resume_factor } else { 1.0 };
    let cores: usize = s
        .workers()
        .iter()
        .filter(|w| w.alive)
        .map(|w| w.cores)
        .sum();
    let utilisation = online.busy_s_per_s / cores.max(1) as f64;
    if utilisation > cfg.max_online_utilisation * factor {
        return Err(format!(
            "online load uses {:.0}% of the cores (limit {:.0}%)",
            utilisation * 100.0,
            cfg.max_online_utilisation * factor * 100.0
        ));
    }
    if online.slo_miss_rate > cfg.max_slo_miss_rate * factor {
        return Err(format!(
            "{:.1}% of online queries miss their SLO",
            online.slo_miss_rate * 100.0
        ));
    }
    // An instance that serves at its peak needs every cycle (an idle one's state speaks of
    // the past). Interfered instances do not pause jobs by themselves: their latency above
    // the profile may come from anything sharing the machine, and what jobs must protect is
    // the online SLOs, which the miss rate above measures; the autoscaler migrates them.
    let instances = s.instances();
    if let Some(i) = instances.iter().find(|i| {
        i.qps > 0.0 && i.state == InstanceState::Overloaded && !jobs_on.contains(&i.id.as_str())
    }) {
        return Err(format!(
            "instance {} is {}",
            i.id,
            i.state.as_str().to_lowercase()
        ));
    }
    Ok(())
}

/// The job gate as one component: [`spare_capacity`] with its memory, whether jobs are
/// paused (a paused job resumes only below the resume thresholds) and which instance ran the
/// latest batch (its state is the jobs' doing for [`JOB_INSTANCE_MEMORY_MS`]). The
/// controller's job runner and the simulator's engine each keep one, with the same
/// [`SpareCapacity`] (the controller's `job_max_online_utilisation` and the defaults).
#[derive(Debug, Clone, PartialEq)]
pub struct JobGate {
    config: SpareCapacity,
    paused: bool,
    /// The instance of the latest batch and when it ran, ms.
    own: Option<(String, f64)>,
}

impl JobGate {
    pub fn new(config: SpareCapacity) -> Self {
        JobGate {
            config,
            paused: false,
            own: None,
        }
    }

    pub fn config(&self) -> &SpareCapacity {
        &self.config
    }

    /// Whether jobs are paused.
    pub fn paused(&self) -> bool {
        self.paused
    }

    /// The instance that ran a job's latest batch, while its state may still be that batch's
    /// doing at `now_ms`.
    pub fn own_instance(&self, now_ms: f64) -> Option<&str> {
        self.own
            .as_ref()
            .filter(|(_, at)| now_ms - at <= JOB_INSTANCE_MEMORY_MS)
            .map(|(id, _)| id.as_str())
    }

    /// Records that a job's batch runs on instance `id` at `now_ms`.
    pub fn ran_on(&mut self, id: &str, now_ms: f64) {
        self.own = Some((id.to_string(), now_ms));
    }

    /// Whether a job's batch may run at `now_ms`, with the cluster `s` and the online load of
    /// the last window: `Ok` resumes paused jobs, `Err` (why) pauses them.
    pub fn check(&mut self, s: &Snapshot, online: &OnlineLoad, now_ms: f64) -> Result<(), String> {
        let own = self.own_instance(now_ms).map(str::to_owned);
        let jobs_on: Vec<&str> = own.iter().map(String::as_str).collect();
        let verdict = spare_capacity(s, online, &self.config, self.paused, &jobs_on);
        self.paused = verdict.is_err();
        verdict
    }

    /// Pauses jobs for what a batch found (an instance that refused it); returns whether they
    /// were running.
    pub fn pause(&mut self) -> bool {
        !std::mem::replace(&mut self.paused, true)
    }

    /// The decision for a job's next batch at `now_ms`: [`JobGate::check`] on the cluster and
    /// the online load, then the variant ([`job_variant`]) and where it runs
    /// ([`job_placement`]), the instance of the latest batch counted as the jobs' own. The
    /// controller's job runner and the simulator's engine call this for every batch; the
    /// caller then records where the batch ran ([`JobGate::ran_on`]).
    #[allow(clippy::too_many_arguments)]
    pub fn next_batch(
        &mut self,
        s: &Snapshot,
        online: &OnlineLoad,
        tenant: &str,
        target: Target<'_>,
        min_accuracy: Option<f64>,
        prices: &Prices,
        now_ms: f64,
    ) -> Result<JobBatch, JobWait> {
        self.check(s, online, now_ms).map_err(JobWait::Paused)?;
        let own = self.own_instance(now_ms);
        let jobs_on: Vec<&str> = own.into_iter().collect();
        let variant = job_variant(s, tenant, target, min_accuracy, prices, &jobs_on)
            .ok_or(JobWait::NoVariant)?;
        let placement = job_placement(s, variant, &jobs_on).ok_or(JobWait::NoRoom)?;
        Ok(JobBatch { variant, placement })
    }
}

/// A job's next batch ([`JobGate::next_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobBatch {
    /// Index into [`Snapshot::variants`].
    pub variant: usize,
    pub placement: JobPlacement,
}

/// Why a job's next batch does not run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JobWait {
    /// Online traffic needs the capacity (why); jobs pause.
    Paused(String),
    /// No variant of the target meets the accuracy on a worker that holds or can load it.
    NoVariant,
    /// The variant's instances are overloaded and no worker has room to load it.
    NoRoom,
}

impl std::fmt::Display for JobWait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JobWait::Paused(why) => f.write_str(why),
            JobWait::NoVariant => {
                f.write_str("no worker can run a variant of the job's target now")
            }
            JobWait::NoRoom => f.write_str("no worker has room for the job"),
        }
    }
}

#[cfg(test)]
mod tests {
    use infaas_core::HardwareKind::Cpu;

    use super::*;
    use crate::snapshot::tests::{instance, variant, worker};
    use crate::snapshot::VariantEntry;

    const PRICES: Prices = Prices {
        cpu_core_per_s: 1.0,
        memory_gb_per_s: 0.0,
        gpu_per_s: 0.0,
    };

    fn batching(id: &str, accuracy: f64, p99_b1: f64, max_batch: usize) -> VariantEntry {
        let mut v = variant(id, "m", accuracy, p99_b1);
        v.max_batch = max_batch;
        v
    }

    #[test]
    fn jobs_take_the_cheapest_rows_that_meet_the_accuracy() {
        let mut b = Snapshot::builder();
        let accurate = b
            .add_variant("acme", batching("accurate", 0.98, 8.0, 1))
            .unwrap();
        let batched = b
            .add_variant("acme", batching("batched", 0.93, 2.0, 32))
            .unwrap();
        let _weak = b
            .add_variant("acme", batching("weak", 0.80, 0.5, 64))
            .unwrap();
        b.add_worker(worker("w", &[Cpu], 0.1)).unwrap();
        let s = b.build();
        let app = Target::App("app");
        // A batch of 32 shares its run: the batching variant is cheaper per row.
        assert_eq!(
            job_variant(&s, "acme", app, Some(0.9), &PRICES, &[]),
            Some(batched)
        );
        assert_eq!(
            job_variant(&s, "acme", app, Some(0.95), &PRICES, &[]),
            Some(accurate)
        );
        assert_eq!(job_variant(&s, "acme", app, Some(0.99), &PRICES, &[]), None);
        assert_eq!(job_variant(&s, "other", app, None, &PRICES, &[]), None);
    }

    #[test]
    fn placement_prefers_a_loaded_instance_then_the_idlest_worker() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
        let busy = b.add_worker(worker("busy", &[Cpu], 0.9)).unwrap();
        let idle = b.add_worker(worker("idle", &[Cpu], 0.1)).unwrap();
        let mut s = b.build();
        assert_eq!(job_placement(&s, v, &[]), Some(JobPlacement::Load(idle)));
        let i = s.add_instance(instance("i", v, busy)).unwrap();
        assert_eq!(job_placement(&s, v, &[]), Some(JobPlacement::Instance(i)));
        s.set_instance_state(i, InstanceState::Overloaded).unwrap();
        assert_eq!(job_placement(&s, v, &[]), Some(JobPlacement::Load(idle)));
        // Overloaded by the jobs' own batches: they stay there.
        assert_eq!(
            job_placement(&s, v, &["i"]),
            Some(JobPlacement::Instance(i))
        );
        for w in [busy, idle] {
            s.set_worker_usage(w, 64, 0, 1.0).unwrap();
        }
        assert_eq!(job_placement(&s, v, &[]), None);
        assert_eq!(
            job_placement(&s, v, &["i"]),
            Some(JobPlacement::Instance(i))
        );
    }

    #[test]
    fn a_job_never_loads_where_busy_threads_fill_the_cores() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
        let full = b.add_worker(worker("full", &[Cpu], 0.1)).unwrap();
        let roomy = b.add_worker(worker("roomy", &[Cpu], 0.5)).unwrap();
        let mut s = b.build();
        let cores = s.workers()[full].cpu_cores;
        // The idlest worker's cores are all taken by busy instances: the job loads elsewhere.
        s.set_worker_busy_threads(full, cores).unwrap();
        assert!(!s.cores_for(full, v));
        assert_eq!(job_placement(&s, v, &[]), Some(JobPlacement::Load(roomy)));
        // With one thread left, the one-thread variant fits there again.
        s.set_worker_busy_threads(full, cores - 1).unwrap();
        assert_eq!(job_placement(&s, v, &[]), Some(JobPlacement::Load(full)));
        s.set_worker_busy_threads(full, cores).unwrap();
        s.set_worker_busy_threads(roomy, cores).unwrap();
        assert_eq!(job_placement(&s, v, &[]), None);
    }

    #[test]
    fn online_pressure_pauses_jobs_with_hysteresis() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
        let w = b.add_worker(worker("w", &[Cpu], 0.1)).unwrap();
        let mut s = b.build();
        let cores = s.workers()[w].cores as f64;
        let cfg = SpareCapacity::default();
        let load = |busy_fraction: f64, miss: f64| OnlineLoad {
            busy_s_per_s: busy_fraction * cores,
            qps: 100.0,
            slo_miss_rate: miss,
        };
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &[]).is_ok());
        let why = spare_capacity(&s, &load(0.5, 0.0), &cfg, false, &[]).unwrap_err();
        assert!(why.contains("50%"), "{why}");
        // Between the resume and the pause thresholds: running jobs go on, paused ones wait.
        assert!(spare_capacity(&s, &load(0.35, 0.0), &cfg, false, &[]).is_ok());
        assert!(spare_capacity(&s, &load(0.35, 0.0), &cfg, true, &[]).is_err());
        assert!(spare_capacity(&s, &load(0.1, 0.05), &cfg, false, &[])
            .unwrap_err()
            .contains("SLO"));
        let i = s.add_instance(instance("i", v, w)).unwrap();
        s.set_instance_state(i, InstanceState::Interfered).unwrap();
        // Idle: its state is history.
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &[]).is_ok());
        s.set_instance_load(i, 0, 50.0).unwrap();
        // Serving while Interfered: the SLO miss rate decides, not the state.
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &[]).is_ok());
        s.set_instance_state(i, InstanceState::Overloaded).unwrap();
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &[])
            .unwrap_err()
            .contains("overloaded"));
        // Overloaded by the jobs' own batches: the online figures decide.
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &["i"]).is_ok());
        assert!(spare_capacity(&s, &load(0.1, 0.05), &cfg, false, &["i"]).is_err());
        assert!(spare_capacity(&s, &load(0.5, 0.0), &cfg, false, &["i"]).is_err());
        assert!(spare_capacity(&s, &load(0.1, 0.0), &cfg, false, &["other"]).is_err());
    }

    #[test]
    fn the_gate_pauses_resumes_below_the_lower_threshold_and_remembers_its_instance() {
        let mut b = Snapshot::builder();
        let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
        let w = b.add_worker(worker("w", &[Cpu], 0.1)).unwrap();
        let mut s = b.build();
        let cores = s.workers()[w].cores as f64;
        let load = |busy_fraction: f64, miss: f64| OnlineLoad {
            busy_s_per_s: busy_fraction * cores,
            qps: 100.0,
            slo_miss_rate: miss,
        };
        let i = s.add_instance(instance("i", v, w)).unwrap();
        s.set_instance_load(i, 0, 50.0).unwrap();
        let mut busy = s.clone();
        busy.set_instance_state(i, InstanceState::Overloaded)
            .unwrap();
        let mut g = JobGate::new(SpareCapacity::default());
        assert!(g.check(&s, &load(0.1, 0.0), 0.0).is_ok() && !g.paused());
        // Above 40 % of the cores: paused; at 35 % (above 0.75 x 40 %) still paused.
        assert!(g.check(&s, &load(0.5, 0.0), 1.0).is_err() && g.paused());
        assert!(g.check(&s, &load(0.35, 0.0), 2.0).is_err());
        assert!(g.check(&s, &load(0.25, 0.0), 3.0).is_ok() && !g.paused());
        // An Overloaded instance pauses jobs unless it ran their latest batch lately.
        assert!(g.check(&busy, &load(0.1, 0.0), 4.0).is_err());
        assert!(g.check(&s, &load(0.1, 0.0), 5.0).is_ok());
        g.ran_on("i", 5.0);
        assert_eq!(g.own_instance(5.0 + JOB_INSTANCE_MEMORY_MS), Some("i"));
        assert!(g.check(&busy, &load(0.1, 0.0), 6.0).is_ok());
        let later = 5.0 + JOB_INSTANCE_MEMORY_MS + 1.0;
        assert_eq!(g.own_instance(later), None);
        assert!(g.check(&busy, &load(0.1, 0.0), later).is_err());
        assert!(!g.pause(), "already paused");
    }
}
