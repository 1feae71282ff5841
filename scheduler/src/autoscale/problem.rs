//! The model-scaling problem both the greedy heuristic and the ILP solve: its input, the figures
//! derived from it, the room left on workers, and how a plan is scored.

use std::collections::HashSet;
use std::fmt::Write;
use std::sync::Arc;

use crate::autoscale::{Action, ActionKind, ScalingConfig, ScalingError};
use crate::instance_state::{short_of_profile, InstanceState};
use crate::snapshot::{
    has_cpu_only_worker, keeps_gpu_host, Prices, Snapshot, VariantEntry, WorkerEntry,
};

/// One model architecture of an application: the variants that serve its load and the
/// requirements a newly loaded variant must meet.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// For reasons, e.g. `tenant/model`.
    pub name: String,
    /// Indices of its variants; a variant belongs to at most one family.
    pub variants: Vec<usize>,
    /// Load to serve, rows/s.
    pub load_qps: f64,
    /// Of that, the rows/s arriving now (the rest is the peak hold's): the queueing headroom
    /// is kept over this ([`ScalingConfig::headroom`]).
    pub rate_qps: f64,
    /// Latency SLO in ms that a newly loaded variant must meet at a full batch.
    pub slo_ms: Option<f64>,
    /// Minimum accuracy a newly loaded variant must have.
    pub min_accuracy: Option<f64>,
}

/// Share of its family's SLO within which a [`Prepared::preferred`] variant answers a full
/// batch: a query that waits behind one batch still meets the SLO (the fixed-variant
/// baselines of the simulator choose their variant by the same bound).
pub const QUEUE_ROOM: f64 = 0.5;

/// A loaded instance the planner may count on or remove.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Running {
    /// Index of the instance (into the snapshot's instances).
    pub instance: usize,
    pub variant: usize,
    pub worker: usize,
    pub state: InstanceState,
    /// Rows/s it served over the last window ([`short_of_profile`] reads it with `state`).
    pub qps: f64,
    /// How long the instance has been in `state`, in ms. It may be removed (scale-down, or
    /// replaced by an upgrade) only once this reaches its variant's load time.
    pub state_age_ms: f64,
}

/// What the controller knows of one family when it builds a [`ScalingInput`] from a snapshot.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FamilyDemand<'s> {
    pub tenant: &'s str,
    pub model: &'s str,
    /// Load to serve in rows/s; `None` takes the rows/s its instances served in the last window.
    pub load_qps: Option<f64>,
    /// Of that, the rows/s arriving now; `None`: all of it.
    pub rate_qps: Option<f64>,
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
}

/// Everything model autoscaling reads. Variants and workers are borrowed (from a [`Snapshot`]
/// or from plain slices in tests and simulations).
#[derive(Debug, Clone)]
pub struct ScalingInput<'a> {
    pub variants: &'a [VariantEntry],
    pub workers: &'a [WorkerEntry],
    /// Loaded instances; Inactive ones and those on dead workers are ignored.
    pub running: Vec<Running>,
    pub families: Vec<Family>,
    pub prices: Prices,
    pub config: ScalingConfig,
    /// Per worker: whether it is stopped once it has no instance (a worker the provider
    /// started). Scaling in empties these first: removing the last instance on one also saves
    /// the worker's price. Missing entries are `false`.
    pub releasable: Vec<bool>,
}

impl<'a> ScalingInput<'a> {
    /// One family per `(tenant, model)` of `demands`, with the snapshot's live instances of
    /// those families; `state_age_ms(instance)` tells how long an instance has been in its state.
    pub fn from_snapshot(
        s: &'a Snapshot,
        demands: &[FamilyDemand],
        state_age_ms: impl Fn(usize) -> f64,
        prices: Prices,
        config: ScalingConfig,
    ) -> Self {
        let instances = s.instances();
        let mut running = Vec::new();
        let mut families = Vec::with_capacity(demands.len());
        for d in demands {
            // The snapshot's order (accuracy, then latency at batch 1), then the smallest max
            // batch: among equally good options the policies take the first, and a variant
            // for small batches is the natural floor to scale up from.
            let mut variants = s.model_variants(d.tenant, d.model).to_vec();
            let all = s.variants();
            variants.sort_by(|&a, &b| {
                let (va, vb) = (&all[a], &all[b]);
                vb.accuracy
                    .total_cmp(&va.accuracy)
                    .then(va.latency_ms(1).total_cmp(&vb.latency_ms(1)))
                    .then(va.max_batch.cmp(&vb.max_batch))
                    .then(a.cmp(&b))
            });
            let mut served = 0.0;
            for &v in &variants {
                for &i in s.variant_instances(v) {
                    let inst = &instances[i];
                    if inst.state == InstanceState::Inactive {
                        continue;
                    }
                    served += inst.qps;
                    running.push(Running {
                        instance: i,
                        variant: v,
                        worker: inst.worker,
                        state: inst.state,
                        qps: inst.qps,
                        state_age_ms: state_age_ms(i),
                    });
                }
            }
            let load_qps = d.load_qps.unwrap_or(served);
            families.push(Family {
                name: format!("{}/{}", d.tenant, d.model),
                variants,
                load_qps,
                rate_qps: d.rate_qps.unwrap_or(load_qps).min(load_qps),
                slo_ms: d.slo_ms,
                min_accuracy: d.min_accuracy,
            });
        }
        ScalingInput {
            variants: s.variants(),
            workers: s.workers(),
            running,
            families,
            prices,
            config,
            releasable: Vec::new(),
        }
    }

    /// The same input with `releasable` workers (see the field).
    pub fn with_releasable(mut self, releasable: Vec<bool>) -> Self {
        self.releasable = releasable;
        self
    }

    /// Whether worker `w` is stopped once empty.
    pub fn is_releasable(&self, w: usize) -> bool {
        self.releasable.get(w).copied().unwrap_or(false)
    }
}

/// How a plan scores; the ILP minimises `objective`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Objective {
    /// Price per second of the families' instances before the plan.
    pub cost_before_per_s: f64,
    /// Price per second of the families' instances after the plan.
    pub cost_after_per_s: f64,
    /// `lambda * sum C_j T_j` over the plan's loads.
    pub load_term_per_s: f64,
    /// Load (rows/s, with slack) left without capacity, summed over families.
    pub unserved_qps: f64,
    /// `cost_after + load_term + penalty * unserved`.
    pub objective: f64,
}

/// A model-scaling plan: actions and their score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingPlan {
    pub actions: Vec<Action>,
    pub score: Objective,
    /// Indices into `actions` of removals that a switch makes once the variant it moved to
    /// serves the family's load at its own headroom: the instances of a slower variant that
    /// costs more per row/s. A family under the overload hold gives these back too (the hold
    /// keeps capacity; these leave the capacity the load needs, and their slow variant is
    /// what kept the family Overloaded).
    pub released: Vec<usize>,
}

/// Figures derived once from a [`ScalingInput`], shared by the greedy heuristic and the ILP.
#[derive(Debug)]
pub(crate) struct Prepared<'i, 'a> {
    pub input: &'i ScalingInput<'a>,
    /// Per variant: its family.
    pub family_of: Vec<Option<usize>>,
    /// Per variant: saturation throughput, rows/s.
    pub peak: Vec<f64>,
    /// Per variant: price per second of one instance.
    pub rate: Vec<f64>,
    /// Per variant: whether it may be newly loaded for its family.
    pub loadable: Vec<bool>,
    /// Per variant: loadable, and answers a full batch within [`QUEUE_ROOM`] of its family's
    /// SLO, or its family has no such variant. A query can wait behind a batch of a preferred
    /// variant and still meet its SLO; one that takes most of the SLO misses whenever a query
    /// waits, whatever headroom is kept. The family grows, switches and downgrades onto
    /// preferred variants; onto the others only when no preferred one serves.
    pub preferred: Vec<bool>,
    /// Per variant: indices into `input.running` of its live instances.
    pub running: Vec<Vec<usize>>,
    /// Per variant: how many of those may be removed.
    pub removable: Vec<usize>,
    /// Per family: the headroom it keeps ([`ScalingConfig::slack_for`]).
    pub slack: Vec<f64>,
    /// Per family: whether its live instances fall short of its demand (it scales up).
    pub short: Vec<bool>,
    /// Per variant: how long an instance must have been in its state to be removable (its
    /// load time; at least the scale-in hold when its family is not short of capacity).
    pub min_age_ms: Vec<f64>,
    /// Per family: whether one of its instances serves less than its profile
    /// ([`short_of_profile`]: Interfered, or Overloaded below its peak); then none of them is
    /// removable.
    pub overloaded: Vec<bool>,
    /// Objective weight of one unserved row/s.
    pub penalty: f64,
}

impl<'i, 'a> Prepared<'i, 'a> {
    pub fn new(input: &'i ScalingInput<'a>) -> Result<Self, ScalingError> {
        let nv = input.variants.len();
        let mut family_of = vec![None; nv];
        for (f, fam) in input.families.iter().enumerate() {
            if !(fam.load_qps.is_finite() && fam.load_qps >= 0.0) {
                return Err(ScalingError::InvalidFamily {
                    family: fam.name.clone(),
                    problem: "load must be finite and not negative",
                });
            }
            for &v in &fam.variants {
                let slot = family_of.get_mut(v).ok_or(ScalingError::OutOfRange {
                    what: "variant",
                    index: v,
                })?;
                match *slot {
                    Some(first) if first != f => {
                        return Err(ScalingError::SharedVariant {
                            variant: v,
                            first,
                            second: f,
                        })
                    }
                    _ => *slot = Some(f),
                }
            }
        }
        // A variant's capacity under its family's SLO: the batches selection lets it run.
        let peak: Vec<f64> = input
            .variants
            .iter()
            .enumerate()
            .map(|(j, v)| v.peak_qps_within(family_of[j].and_then(|f| input.families[f].slo_ms)))
            .collect();
        let rate: Vec<f64> = input
            .variants
            .iter()
            .map(|v| input.prices.rate_per_s(v))
            .collect();
        let loadable = (0..nv)
            .map(|j| {
                let Some(f) = family_of[j] else {
                    return false;
                };
                let (v, fam) = (&input.variants[j], &input.families[f]);
                peak[j] > 0.0
                    && fam.min_accuracy.is_none_or(|min| v.accuracy >= min)
                    && fam
                        .slo_ms
                        .is_none_or(|slo| v.latency_ms(v.max_batch) <= slo)
            })
            .collect::<Vec<bool>>();
        let roomy = |j: usize| {
            let v = &input.variants[j];
            family_of[j]
                .and_then(|f| input.families[f].slo_ms)
                .is_none_or(|slo| v.latency_ms(v.max_batch) <= QUEUE_ROOM * slo)
        };
        let mut has_roomy = vec![false; input.families.len()];
        for j in (0..nv).filter(|&j| loadable[j] && roomy(j)) {
            if let Some(f) = family_of[j] {
                has_roomy[f] = true;
            }
        }
        let preferred = (0..nv)
            .map(|j| loadable[j] && (roomy(j) || family_of[j].is_some_and(|f| !has_roomy[f])))
            .collect();
        // A family with an instance that serves less than its profile (Interfered, or
        // Overloaded below its peak) gives nothing back: its profiled capacity is not what it
        // serves now (its queue, or its latency against the profile, says so), so a headroom
        // computed from the profile would remove or downgrade the instances that are short.
        let mut overloaded = vec![false; input.families.len()];
        for r in &input.running {
            if r.variant < nv && short_of_profile(r.state, r.qps, peak[r.variant]) {
                if let Some(Some(f)) = family_of.get(r.variant) {
                    overloaded[*f] = true;
                }
            }
        }
        let mut running = vec![Vec::new(); nv];
        for (k, r) in input.running.iter().enumerate() {
            if r.variant >= nv {
                return Err(ScalingError::OutOfRange {
                    what: "variant",
                    index: r.variant,
                });
            }
            let w = input
                .workers
                .get(r.worker)
                .ok_or(ScalingError::OutOfRange {
                    what: "worker",
                    index: r.worker,
                })?;
            if r.state == InstanceState::Inactive || !w.alive || family_of[r.variant].is_none() {
                continue;
            }
            running[r.variant].push(k);
        }
        // Scale-in stabilisation: a family with the capacity its demand asks for gives back
        // only instances older than the hold; one short of it may replace any that loaded.
        let slack: Vec<f64> = input
            .families
            .iter()
            .map(|fam| {
                let service =
                    family_service_ms(input.variants, &fam.variants, |j| !running[j].is_empty());
                let servers = fam.variants.iter().map(|&j| running[j].len()).sum();
                input
                    .config
                    .headroom(fam.slo_ms, service, servers, fam.load_qps, fam.rate_qps)
            })
            .collect();
        let short: Vec<bool> = input
            .families
            .iter()
            .zip(&slack)
            .map(|(fam, slack)| capacity_of(fam, &running, &peak) < slack * fam.load_qps)
            .collect();
        let min_age_ms: Vec<f64> = (0..nv)
            .map(|j| {
                let load_ms = input.variants[j].load_ms;
                match family_of[j] {
                    Some(f) if !short[f] => load_ms.max(input.config.scale_in_hold_ms),
                    _ => load_ms,
                }
            })
            .collect();
        let removable = (0..nv)
            .map(|j| {
                let held = family_of[j].is_some_and(|f| overloaded[f]);
                if held {
                    return 0;
                }
                running[j]
                    .iter()
                    .filter(|&&k| input.running[k].state_age_ms >= min_age_ms[j])
                    .count()
            })
            .collect();
        let lambda = input.config.lambda_per_s;
        let dearest = (0..nv)
            .map(|j| rate[j] * (1.0 + lambda * input.variants[j].load_ms / 1000.0))
            .fold(0.0, f64::max);
        Ok(Prepared {
            input,
            family_of,
            peak,
            rate,
            loadable,
            preferred,
            running,
            removable,
            slack,
            short,
            min_age_ms,
            overloaded,
            // Leaving 1/1000 of a row/s unserved weighs as much as loading the dearest variant.
            penalty: 1000.0 * dearest.max(f64::MIN_POSITIVE),
        })
    }

    pub fn family(&self, f: usize) -> &Family {
        &self.input.families[f]
    }

    /// Load a family must be able to serve: its slack times its load.
    pub fn demand(&self, f: usize) -> f64 {
        self.slack[f] * self.family(f).load_qps
    }

    /// Headroom above which family `f` considers scaling down.
    pub fn scale_down(&self, f: usize) -> f64 {
        self.input.config.scale_down_for(self.slack[f])
    }

    /// Saturation throughput of the family's live instances.
    pub fn capacity(&self, f: usize) -> f64 {
        capacity_of(self.family(f), &self.running, &self.peak)
    }

    /// Price per second of the family's live instances.
    pub fn cost(&self, f: usize) -> f64 {
        self.family(f)
            .variants
            .iter()
            .map(|&j| self.running[j].len() as f64 * self.rate[j])
            .sum()
    }

    /// Live instances of family `f`.
    pub fn live(&self, f: usize) -> usize {
        self.family(f)
            .variants
            .iter()
            .map(|&j| self.running[j].len())
            .sum()
    }

    /// Price per second of the running instances `ks` (indices into `input.running`).
    pub fn rate_of(&self, ks: &[usize]) -> f64 {
        ks.iter()
            .map(|&k| self.rate[self.input.running[k].variant])
            .sum()
    }

    /// Price per second of one row/s of `j`'s saturation throughput.
    pub fn price_per_row(&self, j: usize) -> f64 {
        self.rate[j] / self.peak[j].max(f64::MIN_POSITIVE)
    }

    /// The headroom family `f` keeps once it is switched to `j` (the instances of slower
    /// variants that cost more per row/s replaced by `j`'s), with `servers` instances in all:
    /// as [`Self::slack`], from the slowest service time among `j` and the variants kept.
    pub fn slack_with(&self, f: usize, j: usize, servers: usize) -> f64 {
        self.slack_after(f, j, servers, |i| {
            !(self.peak[i] < self.peak[j] && self.price_per_row(i) > self.price_per_row(j))
        })
    }

    /// The headroom family `f` keeps once `j` is live beside its live variants that `kept`
    /// keeps, with `servers` instances in all: from the slowest service time among them.
    pub fn slack_after(
        &self,
        f: usize,
        j: usize,
        servers: usize,
        kept: impl Fn(usize) -> bool,
    ) -> f64 {
        let fam = self.family(f);
        let service = fam
            .variants
            .iter()
            .filter(|&&i| !self.running[i].is_empty() && kept(i))
            .chain(std::iter::once(&j))
            .map(|&i| self.input.variants[i].service_ms())
            .fold(0.0, f64::max);
        self.input
            .config
            .headroom(fam.slo_ms, service, servers, fam.load_qps, fam.rate_qps)
    }

    /// Objective weight of loading one instance of `j`: `C_j (1 + lambda T_j)`.
    pub fn load_weight(&self, j: usize) -> f64 {
        self.rate[j] * self.load_factor(j)
    }

    /// `lambda * T_j`.
    pub fn load_factor(&self, j: usize) -> f64 {
        1.0 + self.input.config.lambda_per_s * self.input.variants[j].load_ms / 1000.0
    }

    /// Running instances of `j` that may be removed, as indices into `input.running`, in the
    /// order to remove them: first those on releasable workers (scale-in empties the workers
    /// the provider started, which can then be stopped), then those on the workers with the
    /// fewest cores in use (removing them can empty a worker), then on the busiest workers.
    pub fn removable_of(&self, j: usize) -> Vec<usize> {
        if self.family_of[j].is_some_and(|f| self.overloaded[f]) {
            return Vec::new();
        }
        self.replaceable_of(j)
    }

    /// Running instances of `j` that an upgrade may replace, in [`Self::removable_of`]'s
    /// order: those in their state for their variant's load time (and the scale-in hold
    /// unless the family is short), whatever state the family's instances are in. An upgrade
    /// loads the faster instances before it unloads these, so a family that is short because
    /// its instances are Overloaded still trades them for faster ones (a family that has
    /// grown replica by replica on a slow variant moves to a faster one that costs less for
    /// its whole load).
    pub fn replaceable_of(&self, j: usize) -> Vec<usize> {
        let mut list: Vec<usize> = self.running[j]
            .iter()
            .copied()
            .filter(|&k| self.input.running[k].state_age_ms >= self.min_age_ms[j])
            .collect();
        let workers = self.input.workers;
        list.sort_by(|&a, &b| {
            let (wa, wb) = (self.input.running[a].worker, self.input.running[b].worker);
            self.input
                .is_releasable(wb)
                .cmp(&self.input.is_releasable(wa))
                .then(workers[wa].cores_used.cmp(&workers[wb].cores_used))
                .then(workers[wb].utilisation.total_cmp(&workers[wa].utilisation))
                .then(a.cmp(&b))
        });
        list
    }

    /// Scores a set of changes: loads `(variant, worker)` and removals (indices into
    /// `input.running`).
    pub fn score(&self, loads: &[(usize, usize)], removals: &[usize]) -> Objective {
        let nv = self.input.variants.len();
        let mut delta = vec![0i64; nv];
        let mut load_term = 0.0;
        for &(j, _) in loads {
            delta[j] += 1;
            load_term += self.rate[j] * (self.load_factor(j) - 1.0);
        }
        for &k in removals {
            delta[self.input.running[k].variant] -= 1;
        }
        let (mut before, mut after, mut unserved) = (0.0, 0.0, 0.0);
        for (f, fam) in self.input.families.iter().enumerate() {
            let mut capacity = 0.0;
            for &j in &fam.variants {
                let now = self.running[j].len() as f64;
                let then = now + delta[j] as f64;
                before += now * self.rate[j];
                after += then * self.rate[j];
                capacity += then * self.peak[j];
            }
            unserved += (self.demand(f) - capacity).max(0.0);
        }
        Objective {
            cost_before_per_s: before,
            cost_after_per_s: after,
            load_term_per_s: load_term,
            unserved_qps: unserved,
            objective: after + load_term + self.penalty * unserved,
        }
    }
}

/// Loads as `(variant, worker)`.
pub(crate) type Loads = Vec<(usize, usize)>;

/// Free cores and memory per worker, and which workers hold which variant, as loads are planned.
#[derive(Debug, Clone)]
pub(crate) struct Room {
    cores: Vec<usize>,
    memory: Vec<u64>,
    /// The cluster has a live worker without a GPU ([`keeps_gpu_host`]).
    cpu_only_worker: bool,
    /// `(variant, worker)` of every live instance when planning began: a worker runs at most
    /// one instance of a variant (the controller and the query path look for another worker,
    /// and the resolver skips a load where one runs). Shared by the clones a plan tries.
    hosted: Arc<HashSet<(usize, usize)>>,
    /// `(variant, worker)` of the loads planned since.
    placed: Vec<(usize, usize)>,
}

impl Room {
    /// The room of `workers`, whose live instances are `hosted` as `(variant, worker)`.
    pub fn new(workers: &[WorkerEntry], hosted: impl IntoIterator<Item = (usize, usize)>) -> Room {
        Room {
            cores: workers.iter().map(WorkerEntry::free_cores).collect(),
            memory: workers.iter().map(WorkerEntry::free_memory).collect(),
            cpu_only_worker: has_cpu_only_worker(workers),
            hosted: Arc::new(hosted.into_iter().collect()),
            placed: Vec::new(),
        }
    }

    pub fn cores(&self, w: usize) -> usize {
        self.cores[w]
    }

    pub fn memory(&self, w: usize) -> u64 {
        self.memory[w]
    }

    /// Whether worker `w` runs, or was given in this plan, an instance of variant `j`.
    pub fn hosts(&self, j: usize, w: usize) -> bool {
        self.hosted.contains(&(j, w)) || self.placed.contains(&(j, w))
    }

    /// Whether variant `j` (`v`) can be loaded on worker `w` (alive, with its hardware, not
    /// running `j` already) with the room left.
    pub fn fits(&self, workers: &[WorkerEntry], w: usize, j: usize, v: &VariantEntry) -> bool {
        let worker = &workers[w];
        worker.alive
            && worker.hardware.contains(&v.hardware)
            && !keeps_gpu_host(worker, v, self.cpu_only_worker)
            && self.cores[w] >= v.threads
            && self.memory[w] >= v.memory_bytes
            && !self.hosts(j, w)
    }

    /// The least-utilised worker that fits variant `j` (`v`; INFaaS' placement), then the one
    /// with most free cores; takes the room.
    pub fn place(&mut self, workers: &[WorkerEntry], j: usize, v: &VariantEntry) -> Option<usize> {
        self.place_where(workers, j, v, |_| true)
    }

    /// [`Room::place`] among the workers `allowed` accepts.
    pub fn place_where(
        &mut self,
        workers: &[WorkerEntry],
        j: usize,
        v: &VariantEntry,
        allowed: impl Fn(usize) -> bool,
    ) -> Option<usize> {
        let mut best: Option<usize> = None;
        for w in 0..workers.len() {
            if !allowed(w) || !self.fits(workers, w, j, v) {
                continue;
            }
            let better = best.is_none_or(|b| {
                workers[w]
                    .load()
                    .total_cmp(&workers[b].load())
                    .then(self.cores[b].cmp(&self.cores[w]))
                    .is_lt()
            });
            if better {
                best = Some(w);
            }
        }
        let w = best?;
        self.take(w, j, v);
        Some(w)
    }

    /// Takes the room of one instance of variant `j` (`v`) on worker `w` (which must fit it).
    pub fn take(&mut self, w: usize, j: usize, v: &VariantEntry) {
        self.cores[w] = self.cores[w].saturating_sub(v.threads);
        self.memory[w] = self.memory[w].saturating_sub(v.memory_bytes);
        self.placed.push((j, w));
    }
}

/// Saturation throughput of `fam`'s live instances (`running` and `peak` per variant).
/// The one-row service time that sets a family's queueing headroom: the slowest of its
/// variants for which `live` holds (its instances serve now), else the fastest of them all.
pub(crate) fn family_service_ms(
    variants: &[VariantEntry],
    family: &[usize],
    live: impl Fn(usize) -> bool,
) -> f64 {
    let service = |j: &usize| {
        variants
            .get(*j)
            .map_or(f64::INFINITY, VariantEntry::service_ms)
    };
    let serving = family
        .iter()
        .filter(|&&j| live(j))
        .map(service)
        .fold(f64::NEG_INFINITY, f64::max);
    if serving.is_finite() {
        serving
    } else {
        family.iter().map(service).fold(f64::INFINITY, f64::min)
    }
}

fn capacity_of(fam: &Family, running: &[Vec<usize>], peak: &[f64]) -> f64 {
    fam.variants
        .iter()
        .map(|&j| running[j].len() as f64 * peak[j])
        .sum()
}

/// Turns one family's loads and removals into actions: a removal and a load are paired into an
/// upgrade or a downgrade; what is left becomes replicas added or removed. When the family
/// scales up (it is [`Prepared::short`]), a pair is an upgrade when the load's variant has the higher
/// saturation throughput; when it scales down, a pair is a downgrade (a replacement chosen for
/// its lower price, even when it also happens to be faster). Each action's costs are the
/// family's before and after it, in order.
pub(crate) fn family_actions(
    p: &Prepared,
    f: usize,
    loads: &[(usize, usize)],
    removals: &[usize],
    why: &str,
) -> Vec<Action> {
    let input = p.input;
    let variants = input.variants;
    let mut cost = p.cost(f);
    let mut actions = Vec::with_capacity(loads.len().max(removals.len()));
    let mut push = |kind: ActionKind, reason: String, delta: f64| {
        actions.push(Action {
            kind,
            reason,
            cost_before_per_s: cost,
            cost_after_per_s: cost + delta,
        });
        cost += delta;
    };
    let fam = p.family(f);
    let pairs = loads.len().min(removals.len());
    for (&(to, worker), &k) in loads.iter().zip(removals) {
        let r = &input.running[k];
        let (old, new) = (&variants[r.variant], &variants[to]);
        if to == r.variant {
            // The same variant elsewhere: a move (scale-in emptying a releasable worker).
            let reason = format!(
                "{}: move instance {} of {} from worker {} to worker {}; {why}",
                fam.name,
                r.instance,
                old.name,
                input.workers[r.worker].id,
                input.workers[worker].id,
            );
            let kind = ActionKind::Migrate {
                instance: r.instance,
                from_worker: r.worker,
                to_worker: worker,
            };
            push(kind, reason, 0.0);
            continue;
        }
        let up = p.short[f] && p.peak[to] > p.peak[r.variant];
        let kind = if up {
            ActionKind::Upgrade {
                from: r.instance,
                to,
                worker,
            }
        } else {
            ActionKind::Downgrade {
                from: r.instance,
                to,
                worker,
            }
        };
        let mut reason = format!(
            "{}: {} instance {} of {} (peak {:.0} rows/s, {:.3e}/s) to {} (peak {:.0} rows/s, {:.3e}/s) on worker {}",
            fam.name,
            if up { "upgrade" } else { "downgrade" },
            r.instance,
            old.name,
            p.peak[r.variant],
            p.rate[r.variant],
            new.name,
            p.peak[to],
            p.rate[to],
            input.workers[worker].id,
        );
        _ = write!(reason, "; {why}");
        push(kind, reason, p.rate[to] - p.rate[r.variant]);
    }
    for &(variant, worker) in &loads[pairs..] {
        let v = &variants[variant];
        let what = if p.running[variant].is_empty() {
            "load"
        } else {
            "replicate"
        };
        let reason = format!(
            "{}: {what} {} (peak {:.0} rows/s, {:.3e}/s, load {:.0} ms) on worker {}; {why}",
            fam.name, v.name, p.peak[variant], p.rate[variant], v.load_ms, input.workers[worker].id,
        );
        push(
            ActionKind::Replicate { variant, worker },
            reason,
            p.rate[variant],
        );
    }
    for &k in &removals[pairs..] {
        let r = &input.running[k];
        let reason = format!(
            "{}: remove instance {} of {} (peak {:.0} rows/s, {:.3e}/s, {} for {:.0} ms); {why}",
            fam.name,
            r.instance,
            variants[r.variant].name,
            p.peak[r.variant],
            p.rate[r.variant],
            r.state.as_str(),
            r.state_age_ms,
        );
        push(
            ActionKind::RemoveReplica {
                instance: r.instance,
            },
            reason,
            -p.rate[r.variant],
        );
    }
    actions
}
