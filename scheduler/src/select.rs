//! INFaaS `getVariant` for one arriving query (paper §4.1, Case I), as a pure function of a
//! [`Snapshot`].
//!
//! A variant is *eligible* when it meets the query's minimum accuracy, its cost ceiling and, on an
//! idle instance, its latency SLO. Then, in order:
//! 1. **Serve** on an Active instance of an eligible variant whose predicted latency (profiled
//!    p99 of the batch under way, counted whole, and of the batches the rows waiting and the
//!    query's own then run in, at the worst split, see [`VariantEntry::predicted_ms`]) fits
//!    the SLO. Ranking:
//!    - app target without SLO and without minimum accuracy (a cost ceiling alone still filters):
//!      the most accurate variant that has such an instance, then the least-loaded instance;
//!    - model target without SLO: the lowest predicted latency;
//!    - otherwise: the least-loaded instance (the wait its queue predicts, in ms: the predicted
//!      latency less an idle run), then the lowest predicted latency.
//!
//!    Instances predicted alike go by the fewer rows queued, then by order. Since a variant's
//!    predicted latency never falls as its queue grows (the snapshot keeps profiles
//!    non-decreasing in batch), the rule looks at one instance per variant, its Active instance
//!    with the fewest rows queued ([`Snapshot::shortest_active`]): the time per query does not
//!    grow with the replicas.
//! 2. **Load** the eligible variant with the lowest load time plus idle latency that some live
//!    worker can host (totals within [`LOAD_TIE`] of the lowest count as equal: then, among
//!    those that run about as fast as the fastest of them, the fewest threads, then for a query
//!    without an SLO the largest max batch; under an SLO, every variant whose run takes at most
//!    [`SLO_RUN_SHARE`] of it and whose load fits it counts as fast enough): the
//!    least-utilised worker with the variant's hardware, enough free cores for its threads and
//!    enough free memory. This is a new variant or a new replica of one whose
//!    instances are all busy, overloaded or interfered (a replica of a CPU variant only on a
//!    worker with idle CPU cores for its threads). A variant already being loaded for waiting
//!    queries ([`crate::snapshot::PendingLoad`]) is joined instead, and its total is what a
//!    query waits for there: the rest of the load, then the rows queued for it meanwhile run in
//!    batches ([`Snapshot::pending_ms`]), so a load that more queries wait for than it can
//!    answer in time makes the next ones load another. `wait` says whether that total still
//!    fits the SLO; when it does not, an overloaded or interfered instance that still answers
//!    within the SLO, and sooner, serves the query meanwhile. A query that no instance answers
//!    in time waits for the load: on a busy instance it would only lengthen the queue of
//!    queries that are still answered in time there.
//! 3. **Serve** on an Overloaded or Interfered instance (or an Active one that misses the SLO)
//!    of an eligible variant, only when nothing can be loaded: those that fit the SLO first, then
//!    the lowest predicted latency, then the fewer rows queued.
//! 4. **Unsatisfiable**, with the variant closest to the requirements (see [`distance`]).
//!
//! The hot path allocates nothing but the chosen decision's reason ([`select_with`] without
//! one allocates nothing).

use std::fmt::Write;

use crate::instance_state::InstanceState;
use crate::snapshot::{
    has_cpu_only_worker, keeps_gpu_host, variant_cost_per_query, Prices, Snapshot, VariantEntry,
    VariantHot, WorkerEntry,
};
use infaas_core::HardwareKind;

/// What a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// Any variant of any model of the application.
    App(&'a str),
    /// Any variant of this model.
    Model(&'a str),
}

/// One query's requirements.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Query<'a> {
    pub tenant: &'a str,
    pub target: Target<'a>,
    /// Latency the query must be answered within, in ms; any latency fits when `None`.
    pub latency_slo_ms: Option<f64>,
    /// Smallest acceptable accuracy in [0, 1]; any accuracy fits when `None`.
    pub min_accuracy: Option<f64>,
    /// Largest acceptable cost of the query (rows × [`variant_cost_per_query`]).
    pub max_cost: Option<f64>,
    /// Rows in the query (its batch dimension); 0 counts as 1.
    pub rows: usize,
}

/// The variant closest to requirements that none can meet.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Closest {
    pub variant: usize,
    pub accuracy: f64,
    /// p99 at batch = the query's rows on an idle instance, in ms.
    pub latency_ms: f64,
}

/// What to do with a query. Indices point into the snapshot it was taken on.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Send the query to this loaded instance.
    Serve {
        instance: usize,
        variant: usize,
        predicted_ms: f64,
        reason: String,
    },
    /// Load `variant` on `worker` (or join its load under way there); `predicted_ms` is what
    /// the query waits for: the load (or the rest of it, and the rows already waiting for it)
    /// plus its run.
    Load {
        variant: usize,
        worker: usize,
        predicted_ms: f64,
        /// Whether the query can wait for the load within its SLO (always with no SLO).
        wait: bool,
        /// When the query cannot wait: a loaded instance, overloaded or interfered, that still
        /// answers it within its SLO and sooner than the load would. The query goes there and
        /// the load goes on for the queries after it; without this, every query of a burst
        /// that finds the instances busy would queue at the one instance being loaded. A query
        /// that no instance answers in time waits for the load.
        meanwhile: Option<usize>,
        reason: String,
    },
    /// No variant meets the requirements (or none can be served or loaded anywhere).
    Unsatisfiable {
        closest: Option<Closest>,
        reason: String,
    },
    /// The tenant has no variant for the application or model.
    NotFound,
}

/// How rule 1 ranks the Active instances that fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rank {
    LeastLoaded,
    MostAccurate,
    Fastest,
}

impl Rank {
    fn of(q: &Query) -> Rank {
        match (q.target, q.latency_slo_ms, q.min_accuracy) {
            (Target::App(_), None, None) => Rank::MostAccurate,
            (Target::Model(_), None, _) => Rank::Fastest,
            _ => Rank::LeastLoaded,
        }
    }

    fn phrase(self) -> &'static str {
        match self {
            Rank::LeastLoaded => "least loaded",
            Rank::MostAccurate => "most accurate variant with an active instance, least loaded",
            Rank::Fastest => "lowest predicted latency",
        }
    }
}

/// A loaded instance considered by rule 1 or 3.
#[derive(Debug, Clone, Copy)]
struct Pick {
    instance: usize,
    variant: usize,
    predicted_ms: f64,
    /// The wait its queue predicts, in ms: the predicted latency less the query's own run on
    /// an idle instance. Counted in time, not in batches: for a model whose rows do not batch
    /// (a CNN on CPU), three rows queued at max batch 4 wait three runs, not "0.75 batch".
    load: f64,
    accuracy: f64,
    fits: bool,
    /// Rows queued ahead: of instances predicted alike, the one with the shorter queue.
    queued: usize,
}

impl Pick {
    fn beats(&self, other: &Pick, rank: Rank) -> bool {
        let by_load = || {
            self.load
                .total_cmp(&other.load)
                .then(self.predicted_ms.total_cmp(&other.predicted_ms))
        };
        let order = match rank {
            Rank::LeastLoaded => by_load(),
            Rank::MostAccurate => other.accuracy.total_cmp(&self.accuracy).then_with(by_load),
            Rank::Fastest => self
                .predicted_ms
                .total_cmp(&other.predicted_ms)
                .then(self.load.total_cmp(&other.load)),
        };
        order.then(self.queued.cmp(&other.queued)).is_lt()
    }

    /// Rule 3's order: fitting the SLO first, then the lowest predicted latency, then the
    /// shorter queue.
    fn beats_as_fallback(&self, other: &Pick) -> bool {
        other
            .fits
            .cmp(&self.fits)
            .then(self.predicted_ms.total_cmp(&other.predicted_ms))
            .then(self.queued.cmp(&other.queued))
            .is_lt()
    }

    fn at(s: &Snapshot, q: &Query, instance: usize, variant: usize, idle_ms: f64) -> Pick {
        Pick::queued(s, q, instance, variant, idle_ms, s.queued(instance))
    }

    /// [`Pick::at`] for an instance with `queued` rows queued ([`Snapshot::queued`]). A
    /// one-row query's prediction comes from the snapshot's compact arrays
    /// ([`Snapshot::predicted_one_row_ms`], the same figure), not the variant's entry.
    fn queued(
        s: &Snapshot,
        q: &Query,
        instance: usize,
        variant: usize,
        idle_ms: f64,
        queued: usize,
    ) -> Pick {
        let predicted_ms = match q.rows.max(1) {
            1 => s.predicted_one_row_ms(variant, queued),
            rows => s.variants()[variant].predicted_ms(queued, rows),
        };
        Pick {
            instance,
            variant,
            predicted_ms,
            load: (predicted_ms - idle_ms).max(0.0),
            accuracy: s.hot()[variant].accuracy,
            fits: fits_slo(predicted_ms, q.latency_slo_ms),
            queued,
        }
    }
}

fn keep_best(best: &mut Option<Pick>, candidate: Pick, better: impl Fn(&Pick, &Pick) -> bool) {
    if best.as_ref().is_none_or(|b| better(&candidate, b)) {
        *best = Some(candidate);
    }
}

/// Cost of the whole query on `v` (its rows in batches of up to `max_batch`).
fn query_cost(v: &VariantEntry, prices: &Prices, rows: usize) -> f64 {
    variant_cost_per_query(v, prices, rows) * rows as f64
}

fn fits_slo(latency_ms: f64, slo: Option<f64>) -> bool {
    slo.is_none_or(|slo| latency_ms <= slo)
}

/// Whether `v` meets the query's accuracy, cost and (idle) latency requirements.
fn eligible(v: &VariantEntry, q: &Query, prices: &Prices, rows: usize) -> bool {
    q.min_accuracy.is_none_or(|min| v.accuracy >= min)
        && q.max_cost
            .is_none_or(|max| query_cost(v, prices, rows) <= max)
        && fits_slo(v.latency_ms(rows), q.latency_slo_ms)
}

/// How far `v` is from the query's requirements: the sum of its relative shortfalls,
///
/// `max(0, (min_accuracy - accuracy) / min_accuracy) + max(0, (latency - slo) / slo)
///  + max(0, (cost - max_cost) / max_cost)`,
///
/// each term 0 when the requirement is absent, so that missing the accuracy by 10% weighs as
/// much as exceeding the SLO (or the cost ceiling) by 10%. Latency and cost are taken at
/// batch = the query's rows on an idle instance. 0 means the variant meets every requirement.
pub fn distance(v: &VariantEntry, q: &Query, prices: &Prices) -> f64 {
    let rows = q.rows.max(1);
    // How far `over` exceeds `under`, relative to `limit`.
    let relative = |over: f64, under: f64, limit: f64| {
        ((over - under) / limit.max(f64::MIN_POSITIVE)).max(0.0)
    };
    let accuracy = q
        .min_accuracy
        .map_or(0.0, |min| relative(min, v.accuracy, min));
    let latency = q
        .latency_slo_ms
        .map_or(0.0, |slo| relative(v.latency_ms(rows), slo, slo));
    let cost = q
        .max_cost
        .map_or(0.0, |max| relative(query_cost(v, prices, rows), max, max));
    accuracy + latency + cost
}

/// Chooses what to do with query `q`; see the module documentation for the rules.
pub fn select(s: &Snapshot, q: &Query, prices: &Prices) -> Decision {
    select_with(s, q, prices, true)
}

/// [`select`], with the decision's reason written only when `explain` (a caller that drops
/// it, such as the simulator, saves formatting it for every query). The decision is the same.
pub fn select_with(s: &Snapshot, q: &Query, prices: &Prices, explain: bool) -> Decision {
    let lists = match q.target {
        Target::App(app) => s.app_list(q.tenant, app),
        Target::Model(model) => s.model_list(q.tenant, model),
    };
    let Some(lists) = lists.filter(|l| !l.all().is_empty()) else {
        return Decision::NotFound;
    };
    let list = lists.all();
    let rows = q.rows.max(1);
    let rank = Rank::of(q);
    let (variants, instances) = (s.variants(), s.instances());

    // Rule 1 looks at one instance per variant: the Active one with the fewest rows queued
    // (the first of equals). A variant's predicted latency never falls as its queue grows (the
    // snapshot keeps profiles non-decreasing in batch), so no other Active instance of it ranks
    // higher, and when that one misses the SLO they all do.
    let hot = s.hot();
    let mut active: Option<Pick> = None;
    // Most variants of an application have no Active instance: they matter to rules 2-4 only.
    for &vi in lists.live() {
        // What every query reads comes from the compact `hot` array; the variant's entry
        // only for a query of several rows, a cost ceiling or a queue to predict.
        let VariantHot {
            accuracy,
            one_row_ms,
            ..
        } = hot[vi];
        if q.min_accuracy.is_some_and(|min| accuracy < min) {
            break; // `list` is sorted by accuracy, descending
        }
        let idle_ms = if rows == 1 {
            one_row_ms
        } else {
            variants[vi].latency_ms(rows)
        };
        if !fits_slo(idle_ms, q.latency_slo_ms)
            || q.max_cost
                .is_some_and(|max| query_cost(&variants[vi], prices, rows) > max)
        {
            continue;
        }
        // Ranked by wait or latency, an idle instance already found (no wait) is beaten only
        // by a variant that runs faster idle: any queue adds a wait, and equals keep the first.
        if rank != Rank::MostAccurate
            && active.is_some_and(|b| b.load == 0.0 && idle_ms >= b.predicted_ms)
        {
            continue;
        }
        let Some((ii, queued)) = s.shortest_active_queued(vi) else {
            continue;
        };
        let pick = Pick::queued(s, q, ii, vi, idle_ms, queued);
        if pick.fits {
            keep_best(&mut active, pick, |a, b| a.beats(b, rank));
        }
    }

    if let Some(p) = active {
        return serve(s, q, prices, p, rank.phrase(), explain);
    }
    // Rule 3's candidates, needed only now: every live instance of an eligible variant.
    let fallback = fallback_pick(s, q, prices, list, rows);
    let any_eligible = list
        .iter()
        .map(|&vi| &variants[vi])
        .take_while(|v| q.min_accuracy.is_none_or(|min| v.accuracy >= min))
        .any(|v| eligible(v, q, prices, rows));
    if any_eligible {
        // With instances already live (busy, overloaded or interfered), or a load under way
        // for the target, a load is a replica: worth it only on a CPU that has idle cores for
        // it, beside the threads its busy instances and loads run.
        let replica = fallback.is_some() || list.iter().any(|&vi| s.pending_load(vi).is_some());
        if let Some(mut load) = best_load(s, q, prices, list, rows, replica, explain) {
            if let Decision::Load {
                wait: false,
                predicted_ms,
                meanwhile,
                reason,
                ..
            } = &mut load
            {
                // Only one that still answers within the SLO: a query late anywhere waits for
                // the load rather than lengthen the queue of an instance answering others in
                // time (the load's queue counts it, so later queries see it).
                if let Some(p) = fallback.filter(|p| p.fits && p.predicted_ms < *predicted_ms) {
                    *meanwhile = Some(p.instance);
                    if !explain {
                        return load;
                    }
                    _ = write!(
                        reason,
                        "; meanwhile served by {} instance {} of {} (p99 {} ms), within the SLO and sooner than the load",
                        instances[p.instance].state.as_str(),
                        instances[p.instance].id,
                        variants[p.variant].name,
                        Ms(p.predicted_ms)
                    );
                }
            }
            return load;
        }
    }
    if let Some(p) = fallback {
        let why = "no active instance fits and no worker can load a variant";
        return serve(s, q, prices, p, why, explain);
    }
    unsatisfiable(s, q, prices, list, any_eligible)
}

/// Rule 3's pick among the live (not Inactive) instances of the eligible variants: fitting the
/// SLO first, then the lowest predicted latency, then the shorter queue.
fn fallback_pick(
    s: &Snapshot,
    q: &Query,
    prices: &Prices,
    list: &[usize],
    rows: usize,
) -> Option<Pick> {
    let (variants, instances) = (s.variants(), s.instances());
    let mut best: Option<Pick> = None;
    for &vi in list {
        let v = &variants[vi];
        if q.min_accuracy.is_some_and(|min| v.accuracy < min) {
            break;
        }
        if s.variant_instances(vi).is_empty() || !eligible(v, q, prices, rows) {
            continue;
        }
        let idle_ms = v.latency_ms(rows);
        for &ii in s.variant_instances(vi) {
            if instances[ii].state != InstanceState::Inactive {
                keep_best(
                    &mut best,
                    Pick::at(s, q, ii, vi, idle_ms),
                    Pick::beats_as_fallback,
                );
            }
        }
    }
    best
}

/// Totals (load + run time) within this fraction of the lowest count as equal in rule 2: a
/// variant's load time is one measurement, noisy by 10-20% on a busy machine, and variants of
/// one file load alike, so small differences in it say nothing. Among equals, those whose run
/// is within the same fraction of the fastest of them are kept (the load is paid once, the run
/// by every query after), and of those the one with the fewest intra-op threads is loaded (it
/// holds fewer cores, and a small model gains nothing from a second thread that has to be woken
/// for it), then the fastest.
pub const LOAD_TIE: f64 = 0.25;

/// Share of a query's SLO that a variant's profiled run may take for rule 2 to count it as
/// good as the fastest (the rest is left to queueing and the request path).
pub const SLO_RUN_SHARE: f64 = 0.5;

/// Rule 2: the eligible variant with the lowest load + run time that a worker can host (near
/// ties, see [`LOAD_TIE`]: the fewest threads among the fastest).
fn best_load(
    s: &Snapshot,
    q: &Query,
    prices: &Prices,
    list: &[usize],
    rows: usize,
    replica: bool,
    explain: bool,
) -> Option<Decision> {
    let variants = s.variants();
    // A variant already being loaded for waiting queries is joined, not loaded again: what a
    // query waits for there is the rest of the load and the rows that queued for it meanwhile.
    let candidates = || {
        list.iter()
            .map(|&vi| (vi, &variants[vi]))
            .take_while(|(_, v)| q.min_accuracy.is_none_or(|min| v.accuracy >= min))
            .map(|(vi, v)| {
                let total = s
                    .pending_ms(vi, rows)
                    .unwrap_or_else(|| v.load_ms + v.latency_ms(rows));
                (vi, v, total)
            })
    };
    let at = |vi: usize, v: &VariantEntry| match s.pending_load(vi) {
        Some(p) => Some(p.worker),
        None => place(s, vi, v, replica),
    };
    let slo_run = q.latency_slo_ms.map(|slo| slo * SLO_RUN_SHARE);
    // What a load is for: 0, the query waits for it within its SLO; 1, it cannot, and the load
    // is for the queries after it, which a variant leaving room to queue (its run within
    // `SLO_RUN_SHARE` of the SLO) serves several at a time; 2, neither. A lower tier wins
    // before a lower total: a variant that loads fast but runs near the SLO answers one query
    // at a time, so a burst that waits for no load anyway is better served by the slower load
    // that then keeps up (and the planner, which prefers such variants, need not replace it).
    let tier = |v: &VariantEntry, total: f64| {
        if fits_slo(total, q.latency_slo_ms) {
            0
        } else if slo_run.is_none_or(|run| v.latency_ms(rows) <= run) {
            1
        } else {
            2
        }
    };
    let mut lowest: Option<(usize, usize, f64, u8)> = None;
    for (vi, v, total) in candidates() {
        // Placement is looked for only for a variant that would improve on the best so far.
        let rank = tier(v, total);
        if lowest.is_some_and(|(_, _, t, r)| (rank, total) >= (r, t))
            || !eligible(v, q, prices, rows)
        {
            continue;
        }
        if let Some(w) = at(vi, v) {
            lowest = Some((vi, w, total, rank));
        }
    }
    let (lowest_vi, lowest_w, lowest_total, lowest_tier) = lowest?;
    let lowest = (lowest_vi, lowest_w, lowest_total);
    // Near ties: among them, those whose run is close to the fastest; of those, the fewest
    // threads, then the fastest run (what every later query pays). Under an SLO, every variant
    // that waits for its load within the SLO and runs within `SLO_RUN_SHARE` of it is as good
    // as the fastest (INFaaS: the cheapest variant that meets the SLO): the fewest threads
    // cost less and leave the worker's other cores to replicas.
    let within = lowest.2 * (1.0 + LOAD_TIE);
    let near = || {
        candidates().filter(|&(_, v, t)| {
            let meets = slo_run
                .is_some_and(|run| v.latency_ms(rows) <= run && fits_slo(t, q.latency_slo_ms));
            (t <= within || meets) && tier(v, t) <= lowest_tier && eligible(v, q, prices, rows)
        })
    };
    let fastest = near()
        .map(|(_, v, _)| v.latency_ms(rows))
        .fold(f64::INFINITY, f64::min);
    let run_limit = |run: f64| match slo_run {
        Some(limit) => run <= limit.max(fastest * (1.0 + LOAD_TIE)),
        None => run <= fastest * (1.0 + LOAD_TIE),
    };
    // A query without an SLO: of variants alike so far (of one file, differing only in max
    // batch: a lone query runs alike on them, since an idle instance never waits for company),
    // the one that batches most keeps up with the most load. Under an SLO a larger batch also
    // makes every query in it wait longer, so the fastest run decides as before.
    let batch = |v: &VariantEntry| {
        if q.latency_slo_ms.is_none() {
            v.max_batch
        } else {
            0
        }
    };
    let mut chosen: Option<(usize, usize, f64)> = None;
    for (vj, v, t) in near() {
        let run = v.latency_ms(rows);
        let better = chosen.is_none_or(|(c, _, _)| {
            let c = &variants[c];
            (v.threads, run, std::cmp::Reverse(batch(v)))
                < (c.threads, c.latency_ms(rows), std::cmp::Reverse(batch(c)))
        });
        if !run_limit(run) || !better {
            continue;
        }
        if let Some(w) = at(vj, v) {
            chosen = Some((vj, w, t));
        }
    }
    let (vi, wi, total) = chosen.unwrap_or(lowest);
    let (v, w) = (&variants[vi], &s.workers()[wi]);
    let wait = fits_slo(total, q.latency_slo_ms);
    if !explain {
        return Some(Decision::Load {
            variant: vi,
            worker: wi,
            predicted_ms: total,
            wait,
            meanwhile: None,
            reason: String::new(),
        });
    }
    let instances = s.instances();
    let pending = s.pending_load(vi);
    let mut reason = match pending {
        Some(p) => format!(
            "join the load of {} under way on worker {}: {} waiting for it, {} ms with the rest of the load",
            v.name,
            w.id,
            rows_text(p.waiting()),
            Ms(total)
        ),
        None => {
            let loaded = if s
                .variant_instances(vi)
                .iter()
                .all(|&i| instances[i].state == InstanceState::Inactive)
            {
                "not loaded"
            } else {
                "a new replica (its instances are busy, overloaded or interfered)"
            };
            format!(
                "load {} ({loaded}) on worker {}: load {} ms + p99 {} ms at batch {rows} = {} ms",
                v.name,
                w.id,
                Ms(v.load_ms),
                Ms(v.latency_ms(rows)),
                Ms(total)
            )
        }
    };
    match q.latency_slo_ms {
        Some(slo) if wait => _ = write!(reason, " fits SLO {} ms", Ms(slo)),
        Some(slo) => {
            _ = write!(
                reason,
                " exceeds SLO {} ms (the query cannot wait)",
                Ms(slo)
            )
        }
        None => reason.push_str(" (no SLO)"),
    }
    requirements(&mut reason, v, q, prices, rows);
    reason.push_str("; lowest load + latency among eligible variants (a load under way: the rest of it and the rows waiting; near ties, or under an SLO every variant that runs within half of it: the fewest threads among the fastest, then without an SLO the largest batch)");
    if pending.is_none() {
        _ = write!(
            reason,
            "; least-utilised {} worker with room ({:.2} utilised, {} free cores)",
            v.hardware.as_str(),
            w.utilisation,
            w.free_cores()
        );
    }
    Some(Decision::Load {
        variant: vi,
        worker: wi,
        predicted_ms: total,
        wait,
        meanwhile: None,
        reason,
    })
}

/// The least-loaded ([`WorkerEntry::load`]) live worker with `v`'s hardware, free cores for
/// its threads and free memory for it, that holds no instance of `v` yet. A `replica` of a CPU variant (its family already has
/// live instances, all busy: another replica of the variant, or another variant of the same
/// target) also needs idle CPU cores for its threads, and cores its worker's busy instances
/// and loads under way leave ([`Snapshot::busy_threads`]): on a CPU that is busy anyway another
/// instance adds no capacity, only a second queue and threads that contend for the same cores.
fn place(s: &Snapshot, vi: usize, v: &VariantEntry, replica: bool) -> Option<usize> {
    let workers = s.workers();
    // A worker holds at most one instance of a variant: one already there is busy, not room.
    let hosts = |wi: usize| {
        s.variant_instances(vi).iter().any(|&i| {
            s.instances()[i].worker == wi && s.instances()[i].state != InstanceState::Inactive
        })
    };
    let adds_capacity = |wi: usize, w: &WorkerEntry| {
        !replica
            || v.hardware != HardwareKind::Cpu
            || (w.idle_cpu_cores() >= v.threads && s.cores_for(wi, vi))
    };
    // The least loaded; among equally loaded ones the one with the most free cores (the most
    // room left), then the lowest id, so that the choice does not depend on the index order.
    let better = |a: &WorkerEntry, b: &WorkerEntry| {
        a.load()
            .total_cmp(&b.load())
            .then(b.free_cores().cmp(&a.free_cores()))
            .then(a.id.cmp(&b.id))
            .is_lt()
    };
    let cpu_only_worker = has_cpu_only_worker(workers);
    let mut best: Option<usize> = None;
    for &wi in s.workers_with(v.hardware) {
        let w = &workers[wi];
        if w.can_host(v)
            && !keeps_gpu_host(w, v, cpu_only_worker)
            && !hosts(wi)
            && adds_capacity(wi, w)
            && best.is_none_or(|b| better(w, &workers[b]))
        {
            best = Some(wi);
        }
    }
    best
}

fn serve(s: &Snapshot, q: &Query, prices: &Prices, p: Pick, why: &str, explain: bool) -> Decision {
    if !explain {
        return Decision::Serve {
            instance: p.instance,
            variant: p.variant,
            predicted_ms: p.predicted_ms,
            reason: String::new(),
        };
    }
    let rows = q.rows.max(1);
    let v = &s.variants()[p.variant];
    let inst = &s.instances()[p.instance];
    let queued = s.queued(p.instance);
    let join = (queued + rows).min(v.max_batch);
    let batch = v.latency_at(join).map_or(join, |(point, _)| point.batch);
    let mut reason = format!(
        "{} instance {} of {}: p99 {} ms at batch {batch} with {} row(s) queued",
        inst.state.as_str(),
        inst.id,
        v.name,
        Ms(p.predicted_ms),
        queued,
    );
    match q.latency_slo_ms {
        Some(slo) if p.fits => _ = write!(reason, " fits SLO {} ms", Ms(slo)),
        Some(slo) => _ = write!(reason, " exceeds SLO {} ms", Ms(slo)),
        None => reason.push_str(" (no SLO)"),
    }
    requirements(&mut reason, v, q, prices, rows);
    _ = write!(reason, "; {why}");
    Decision::Serve {
        instance: p.instance,
        variant: p.variant,
        predicted_ms: p.predicted_ms,
        reason,
    }
}

/// Appends ", accuracy A >= M" and, with a cost ceiling, ", cost C <= X".
fn requirements(reason: &mut String, v: &VariantEntry, q: &Query, prices: &Prices, rows: usize) {
    match q.min_accuracy {
        Some(min) => _ = write!(reason, ", accuracy {} >= {}", Acc(v.accuracy), Acc(min)),
        None => _ = write!(reason, ", accuracy {}", Acc(v.accuracy)),
    }
    if let Some(max) = q.max_cost {
        _ = write!(
            reason,
            ", cost {:.3e} <= {max:.3e}",
            query_cost(v, prices, rows)
        );
    }
}

fn unsatisfiable(
    s: &Snapshot,
    q: &Query,
    prices: &Prices,
    list: &[usize],
    any_eligible: bool,
) -> Decision {
    let variants = s.variants();
    let rows = q.rows.max(1);
    let mut best: Option<(usize, f64)> = None;
    for &vi in list {
        let d = distance(&variants[vi], q, prices);
        // Strictly smaller only: `list` is sorted by accuracy then latency, which breaks ties.
        if best.is_none_or(|(_, bd)| d < bd) {
            best = Some((vi, d));
        }
    }
    let closest = best.map(|(vi, _)| Closest {
        variant: vi,
        accuracy: variants[vi].accuracy,
        latency_ms: variants[vi].latency_ms(rows),
    });
    let mut reason = if any_eligible {
        String::from("variants meet the requirements but none is loaded and no live worker has room to load one")
    } else {
        String::from("no variant meets")
    };
    if !any_eligible {
        let mut sep = " ";
        if let Some(min) = q.min_accuracy {
            _ = write!(reason, "{sep}accuracy >= {}", Acc(min));
            sep = " and ";
        }
        if let Some(slo) = q.latency_slo_ms {
            _ = write!(reason, "{sep}SLO {} ms at batch {rows}", Ms(slo));
            sep = " and ";
        }
        if let Some(max) = q.max_cost {
            _ = write!(reason, "{sep}cost <= {max:.3e}");
        }
    }
    if let (Some(c), Some((_, d))) = (closest, best) {
        _ = write!(
            reason,
            "; closest: {} (accuracy {}, p99 {} ms, distance {d:.3})",
            variants[c.variant].name,
            Acc(c.accuracy),
            Ms(c.latency_ms)
        );
    }
    Decision::Unsatisfiable { closest, reason }
}

/// Milliseconds with as many decimals as small values need.
/// `1 row`, `N rows`.
fn rows_text(n: usize) -> String {
    if n == 1 {
        "1 row".into()
    } else {
        format!("{n} rows")
    }
}

struct Ms(f64);

impl std::fmt::Display for Ms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let x = self.0;
        if x >= 100.0 {
            write!(f, "{x:.0}")
        } else if x >= 1.0 {
            write!(f, "{x:.2}")
        } else {
            write!(f, "{x:.3}")
        }
    }
}

/// An accuracy with three decimals.
struct Acc(f64);

impl std::fmt::Display for Acc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use infaas_core::HardwareKind::{Cpu, Gpu};

    use super::*;
    use crate::snapshot::tests::{instance, variant, worker};
    use crate::snapshot::{Clock, InFlight, InstanceEntry, PendingLoad, SnapshotBuilder};

    const PRICES: Prices = Prices {
        cpu_core_per_s: 1.0,
        memory_gb_per_s: 0.0,
        gpu_per_s: 10.0,
    };

    /// Tenant "acme", app "app": big (0.98, 8 ms), mid (0.93, 2 ms), small (0.85, 0.5 ms), each
    /// with one idle Active instance on its own CPU worker.
    struct Fixture {
        b: SnapshotBuilder,
        big: usize,
        mid: usize,
        small: usize,
        workers: Vec<usize>,
    }

    fn fixture() -> Fixture {
        let mut b = Snapshot::builder();
        let big = b
            .add_variant("acme", variant("big", "big", 0.98, 8.0))
            .unwrap();
        let mid = b
            .add_variant("acme", variant("mid", "mid", 0.93, 2.0))
            .unwrap();
        let small = b
            .add_variant("acme", variant("small", "small", 0.85, 0.5))
            .unwrap();
        Fixture {
            b,
            big,
            mid,
            small,
            workers: Vec::new(),
        }
    }

    impl Fixture {
        fn worker(&mut self, id: &str, utilisation: f64) -> usize {
            let w = self.b.add_worker(worker(id, &[Cpu], utilisation)).unwrap();
            self.workers.push(w);
            w
        }

        fn instance(&mut self, id: &str, variant: usize, worker: usize) -> usize {
            self.b.add_instance(instance(id, variant, worker)).unwrap()
        }

        /// Every variant with one Active instance on its own worker.
        fn all_active(mut self) -> (Snapshot, [usize; 3]) {
            let mut insts = [0; 3];
            for (n, v) in [self.big, self.mid, self.small].into_iter().enumerate() {
                let w = self.worker(&format!("w{n}"), 0.5);
                insts[n] = self.instance(&format!("i{n}"), v, w);
            }
            (self.b.build(), insts)
        }
    }

    fn app(slo: Option<f64>, min_accuracy: Option<f64>) -> Query<'static> {
        Query {
            tenant: "acme",
            target: Target::App("app"),
            latency_slo_ms: slo,
            min_accuracy,
            max_cost: None,
            rows: 1,
        }
    }

    fn served_variant(d: &Decision) -> usize {
        match d {
            Decision::Serve { variant, .. } => *variant,
            other => panic!("expected Serve, got {other:?}"),
        }
    }

    #[test]
    fn slo_and_accuracy_steer_the_variant() {
        let f = fixture();
        let (big, mid, small) = (f.big, f.mid, f.small);
        let (s, _) = f.all_active();
        let pick = |q: Query| served_variant(&select(&s, &q, &PRICES));
        assert_eq!(pick(app(Some(1.0), None)), small);
        assert_eq!(pick(app(None, Some(0.95))), big);
        assert_eq!(pick(app(Some(5.0), Some(0.9))), mid);
        assert_eq!(pick(app(Some(100.0), Some(0.9))), mid); // ties on load: faster wins
        assert_eq!(pick(app(None, None)), big); // no requirements: most accurate
    }

    /// A model whose rows do not batch (a CNN on CPU: a run of `b` rows takes `b` times one):
    /// an instance at max batch 4 with three rows queued waits three runs, one at max batch 1
    /// with one row queued one run. The query goes to the shorter wait, though the first
    /// queue is the shorter in batches (0.75 against 1).
    #[test]
    fn the_least_loaded_instance_is_the_one_with_the_shortest_wait() {
        let mut b = Snapshot::builder();
        let mut ids = Vec::new();
        for (id, max_batch) in [("b4", 4), ("b1", 1)] {
            let mut v = variant(id, "m", 0.9, 3.6);
            v.max_batch = max_batch;
            v.latency = (1..=max_batch)
                .map(|batch| crate::snapshot::tests::point(batch, 3.6 * batch as f64))
                .collect();
            ids.push(b.add_variant("acme", v).unwrap());
        }
        let w = b.add_worker(worker("w", &[Cpu], 0.5)).unwrap();
        let mut s = b.build();
        let (b4, b1) = (
            s.add_instance(instance("i4", ids[0], w)).unwrap(),
            s.add_instance(instance("i1", ids[1], w)).unwrap(),
        );
        let (q4, q1) = (InFlight::default(), InFlight::default());
        s.attach_in_flight(b4, q4.clone()).unwrap();
        s.attach_in_flight(b1, q1.clone()).unwrap();
        let (_a, _b) = (q4.enter(3), q1.enter(1));
        match select(&s, &app(Some(36.0), Some(0.5)), &PRICES) {
            Decision::Serve { instance, .. } => assert_eq!(instance, b1),
            d => panic!("{d:?}"),
        }
        // With the queues the other way round, the other instance.
        let (_c, _d) = (q1.enter(3), q4.enter(0));
        drop((_a, _b));
        let _e = q4.enter(1);
        match select(&s, &app(Some(36.0), Some(0.5)), &PRICES) {
            Decision::Serve { instance, .. } => assert_eq!(instance, b4),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn impossible_requirements_report_the_closest_variant() {
        let f = fixture();
        let small = f.small;
        let (s, _) = f.all_active();
        // Tight SLO and high accuracy: nothing has both. small misses accuracy by 10.5%; mid
        // misses it by 2% and the SLO by 100%; big misses the SLO by 700%.
        match select(&s, &app(Some(1.0), Some(0.95)), &PRICES) {
            Decision::Unsatisfiable {
                closest: Some(c),
                reason,
            } => {
                assert_eq!(c.variant, small);
                assert_eq!(c.accuracy, 0.85);
                assert_eq!(c.latency_ms, 0.5);
                assert!(reason.contains("no variant meets accuracy >= 0.950 and SLO 1.00 ms"));
                assert!(reason.contains("closest: small.small"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            distance(&s.variants()[small], &app(Some(1.0), Some(0.95)), &PRICES),
            (0.95 - 0.85) / 0.95
        );
    }

    #[test]
    fn reasons_name_the_rule() {
        let (s, _) = fixture().all_active();
        let Decision::Serve { reason, .. } = select(&s, &app(Some(10.0), Some(0.95)), &PRICES)
        else {
            panic!()
        };
        assert_eq!(
            reason,
            "active instance i0 of big.big: p99 8.00 ms at batch 1 with 0 row(s) queued fits \
             SLO 10.00 ms, accuracy 0.980 >= 0.950; least loaded"
        );
    }

    #[test]
    fn cost_ceiling_excludes_expensive_variants() {
        let mut f = fixture();
        let (big, mid) = (f.big, f.mid);
        let mut fast = variant("gpu-big", "big", 0.99, 0.2);
        fast.hardware = Gpu;
        let gpu_big = f.b.add_variant("acme", fast).unwrap();
        let g = f.b.add_worker(worker("g", &[Gpu], 0.0)).unwrap();
        f.instance("ig", gpu_big, g);
        let (s, _) = f.all_active();
        // Cost of one row = rate x mean: gpu-big (1 + 100) x 0.18 ms = 0.0182,
        // big 1 x 7.2 ms = 0.0072, mid 1 x 1.8 ms = 0.0018.
        let prices = Prices {
            gpu_per_s: 100.0,
            ..PRICES
        };
        let q = |min_accuracy, max_cost| Query {
            max_cost,
            ..app(None, Some(min_accuracy))
        };
        let pick = |q: Query| select(&s, &q, &prices);
        assert_eq!(served_variant(&pick(q(0.95, None))), gpu_big);
        assert_eq!(served_variant(&pick(q(0.95, Some(0.01)))), big);
        assert_eq!(served_variant(&pick(q(0.9, Some(0.005)))), mid);
        // Nothing accurate enough is cheap enough: mid is closest (2% short of the accuracy,
        // against big's 44% over the ceiling).
        match pick(q(0.95, Some(0.005))) {
            Decision::Unsatisfiable {
                closest: Some(c),
                reason,
            } => {
                assert_eq!(c.variant, mid);
                assert!(reason.contains("cost <= 5.000e-3"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
        let Decision::Serve { reason, .. } = pick(q(0.95, Some(0.01))) else {
            panic!()
        };
        assert!(reason.contains("cost 7.200e-3 <= 1.000e-2"), "{reason}");
    }

    #[test]
    fn least_loaded_active_instance_wins() {
        let mut f = fixture();
        let mid = f.mid;
        let (w1, w2) = (f.worker("w1", 0.1), f.worker("w2", 0.9));
        let busy = f.instance("busy", mid, w1);
        let idle = f.instance("idle", mid, w2);
        let mut s = f.b.build();
        s.set_instance_load(busy, 4, 100.0).unwrap();
        match select(&s, &app(Some(50.0), Some(0.9)), &PRICES) {
            Decision::Serve {
                instance,
                predicted_ms,
                ..
            } => {
                assert_eq!(instance, idle);
                assert_eq!(predicted_ms, 2.0);
            }
            other => panic!("{other:?}"),
        }
        // Queueing counts against the SLO: of 4 rows ahead, at worst 2-4 are in a batch under
        // way (p99 of a batch of 4: 4 ms), and the rest run with its own in the next, which
        // rows arriving meanwhile fill as they filled that one (4 ms): 8 ms.
        s.set_instance_load(idle, 4, 100.0).unwrap();
        s.set_instance_load(busy, 12, 100.0).unwrap();
        let Decision::Serve { predicted_ms, .. } = select(&s, &app(Some(50.0), Some(0.9)), &PRICES)
        else {
            panic!()
        };
        assert_eq!(predicted_ms, 8.0);
    }

    #[test]
    fn live_in_flight_rows_count_before_the_next_heartbeat() {
        let mut f = fixture();
        let mid = f.mid;
        let (w1, w2) = (f.worker("w1", 0.1), f.worker("w2", 0.9));
        let first = f.instance("first", mid, w1);
        let second = f.instance("second", mid, w2);
        let mut s = f.b.build();
        // Shared counters survive a rebuild: attach the same one to a second snapshot.
        let counter = InFlight::default();
        s.attach_in_flight(first, counter.clone()).unwrap();
        let q = app(Some(50.0), Some(0.9));
        let guard = counter.enter(12);
        assert_eq!(s.queued(first), 12);
        assert!(matches!(select(&s, &q, &PRICES),
            Decision::Serve { instance, .. } if instance == second));
        // A reported queue longer than the live count wins.
        s.set_instance_load(first, 20, 0.0).unwrap();
        assert_eq!(s.queued(first), 20);
        s.set_instance_load(first, 0, 0.0).unwrap();
        // Answered: the rows leave the count and the instance is idle again.
        drop(guard);
        assert_eq!(s.queued(first), 0);
        let Decision::Serve { predicted_ms, .. } = select(&s, &q, &PRICES) else {
            panic!()
        };
        assert_eq!(predicted_ms, 2.0);
        // Past the SLO on every instance: the selector loads a replica instead of queueing.
        let _a = counter.enter(400);
        let other = InFlight::default();
        s.attach_in_flight(second, other.clone()).unwrap();
        let _b = other.enter(400);
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { .. }));
    }

    #[test]
    fn loads_avoid_a_worker_where_interference_was_seen_while_another_has_room() {
        let mut f = fixture();
        let (busy, noisy) = (f.worker("busy", 0.6), f.worker("noisy", 0.1));
        let mut s = f.b.build();
        let load_on = |s: &Snapshot| match select(s, &app(Some(500.0), None), &PRICES) {
            Decision::Load { worker, .. } => worker,
            d => panic!("{d:?}"),
        };
        assert_eq!(load_on(&s), noisy, "the least utilised");
        s.set_worker_interference(noisy, true).unwrap();
        assert_eq!(load_on(&s), busy, "a quiet worker first");
        s.set_worker_usage(busy, 8, 0, 1.0).unwrap();
        assert_eq!(load_on(&s), noisy, "still used when no quiet one has room");
    }

    #[test]
    fn overloaded_instance_is_skipped_for_another_active_one_or_a_load() {
        let mut f = fixture();
        let (mid, small) = (f.mid, f.small);
        let (w1, w2) = (f.worker("w1", 0.1), f.worker("w2", 0.2));
        let hot = f.instance("hot", small, w1);
        let other = f.instance("other", mid, w2);
        let mut s = f.b.build();
        s.set_instance_state(hot, InstanceState::Overloaded)
            .unwrap();
        let q = app(Some(5.0), None);
        match select(&s, &q, &PRICES) {
            Decision::Serve { instance, .. } => assert_eq!(instance, other),
            d => panic!("{d:?}"),
        }
        // Only the overloaded instance fits a 1 ms SLO: load a replica of small instead.
        match select(&s, &app(Some(1.0), None), &PRICES) {
            Decision::Load {
                variant,
                wait,
                reason,
                ..
            } => {
                assert_eq!(variant, small);
                assert!(!wait, "a 100 ms load cannot fit 1 ms");
                assert!(reason.contains("new replica"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
        // Interfered instances are treated alike.
        s.set_instance_state(other, InstanceState::Interfered)
            .unwrap();
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { .. }));
        // With no room anywhere, the overloaded instance still serves.
        for w in 0..s.workers().len() {
            s.set_worker_usage(w, 8, 0, 1.0).unwrap();
        }
        match select(&s, &app(Some(1.0), None), &PRICES) {
            Decision::Serve {
                instance, reason, ..
            } => {
                assert_eq!(instance, hot);
                assert!(reason.starts_with("overloaded instance hot"), "{reason}");
                assert!(reason.contains("no worker can load"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
    }

    /// A replica for a busy instance goes only to a CPU with idle cores: on a CPU that is
    /// busy anyway (one worker, the request path's own threads taking the cores) it would add a
    /// second queue, not capacity, so the busy instance serves. A first instance of a variant
    /// is loaded wherever it fits, busy or not.
    #[test]
    fn no_replica_on_a_cpu_without_idle_cores() {
        let mut f = fixture();
        let small = f.small;
        let home = f.worker("home", 0.97);
        let w = f.worker("only", 0.1);
        let hot = f.instance("hot", small, home);
        let mut s = f.b.build();
        s.set_instance_state(hot, InstanceState::Overloaded)
            .unwrap();
        let q = app(Some(1.0), None);
        // Another worker's 8 cores at 10% busy: a replica there.
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { worker, .. } if worker == w));
        // The same cores, all busy (budget still free): the overloaded instance serves.
        s.set_worker_usage(w, 1, 0, 0.97).unwrap();
        match select_with(&s, &q, &PRICES, true) {
            Decision::Serve {
                instance, reason, ..
            } => {
                assert_eq!(instance, hot);
                assert!(reason.contains("no worker can load"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
        // With nothing loaded, a busy CPU still gets the first instance.
        let mut f = fixture();
        f.worker("only", 0.97);
        let s = f.b.build();
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { .. }));
    }

    /// A replica goes to another worker: a worker holds one instance of a variant, so loading
    /// the variant again where it runs would only restart a load of what is there.
    #[test]
    fn a_replica_never_goes_where_the_variant_already_runs() {
        let mut f = fixture();
        let small = f.small;
        let w1 = f.worker("w1", 0.1);
        let hot = f.instance("hot", small, w1);
        let mut s = f.b.build();
        s.set_instance_state(hot, InstanceState::Overloaded)
            .unwrap();
        // A 1 ms SLO: only `small` is eligible, and its one worker holds it.
        let q = app(Some(1.0), None);
        match select(&s, &q, &PRICES) {
            Decision::Serve { instance, .. } => assert_eq!(instance, hot),
            d => panic!("{d:?}"),
        }
        // With a second worker, the replica goes there.
        let mut f = fixture();
        let small = f.small;
        let w1 = f.worker("w1", 0.1);
        let w2 = f.worker("w2", 0.5);
        let hot = f.instance("hot", small, w1);
        let mut s = f.b.build();
        s.set_instance_state(hot, InstanceState::Overloaded)
            .unwrap();
        match select(&s, &q, &PRICES) {
            Decision::Load {
                variant, worker, ..
            } => {
                assert_eq!((variant, worker), (small, w2));
            }
            d => panic!("{d:?}"),
        }
    }

    /// Capacity is counted in cores: a replica (or another variant of a busy target) is placed
    /// only where the threads of the worker's busy instances, and of loads under way there,
    /// leave cores for its threads, whatever the worker's thread budget says.
    #[test]
    fn no_replica_beyond_the_cores_that_busy_instances_leave() {
        let mut f = fixture();
        let small = f.small;
        let home = f.worker("home", 0.1);
        let w = f.worker("only", 0.1);
        let hot = f.instance("hot", small, home);
        let mut s = f.b.build();
        // The replica's only candidate is `w` (`home` holds the variant; a busy one).
        s.set_worker_busy_threads(home, 64).unwrap();
        s.set_instance_state(hot, InstanceState::Overloaded)
            .unwrap();
        let q = app(Some(1.0), None);
        let cores = s.workers()[w].cpu_cores;
        // One core left by the busy instances: a one-thread replica.
        s.set_worker_busy_threads(w, cores - 1).unwrap();
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { .. }));
        // Every core taken by busy threads (utilisation reads low, budget is free): no load.
        s.set_worker_busy_threads(w, cores).unwrap();
        assert!(s.workers()[w].can_host(&s.variants()[small]));
        assert_eq!(served_variant(&select(&s, &q, &PRICES)), small);
        // A load under way on the worker takes the last core as well.
        s.set_worker_busy_threads(w, cores - 1).unwrap();
        // (`big` is too slow for the query's 1 ms SLO: the query cannot join its load.)
        let big = s.variant_index("big").unwrap();
        s.add_pending_load(PendingLoad {
            variant: big,
            worker: w,
            started_ms: 0.0,
            waiting: 0,
            live: InFlight::default(),
        })
        .unwrap();
        assert_eq!(s.busy_threads(w), cores);
        match select(&s, &q, &PRICES) {
            Decision::Serve { instance, .. } => assert_eq!(instance, hot),
            d => panic!("{d:?}"),
        }
        // The first instance of a target still loads on a busy CPU (nothing else serves it).
        let mut f = fixture();
        let w = f.worker("only", 0.1);
        let mut s = f.b.build();
        let cores = s.workers()[w].cpu_cores;
        s.set_worker_busy_threads(w, 64).unwrap();
        assert!(matches!(select(&s, &q, &PRICES), Decision::Load { .. }));
        // But once a load for the target is under way, loading another variant of it is a
        // replica: a query that cannot wait for the load does not start a second one on cores
        // the first takes.
        s.set_worker_busy_threads(w, cores - 1).unwrap();
        let small = s.variant_index("small").unwrap();
        s.add_pending_load(PendingLoad {
            variant: small,
            worker: w,
            started_ms: 0.0,
            waiting: 10_000,
            live: InFlight::default(),
        })
        .unwrap();
        let q = app(Some(10.0), None);
        match select(&s, &q, &PRICES) {
            Decision::Load { variant, wait, .. } => {
                assert_eq!(variant, small, "joins the load under way");
                assert!(!wait, "the load is too far behind for the SLO");
            }
            d => panic!("{d:?}"),
        }
        s.set_worker_busy_threads(w, 0).unwrap();
        match select(&s, &q, &PRICES) {
            Decision::Load { variant, .. } => assert_ne!(variant, small, "a second variant"),
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn dead_workers_instances_are_ignored() {
        let mut f = fixture();
        let small = f.small;
        let (w1, _w2) = (f.worker("w1", 0.1), f.worker("w2", 0.7));
        f.instance("gone", small, w1);
        let mut s = f.b.build();
        let q = app(Some(1.0), None);
        assert!(matches!(select(&s, &q, &PRICES), Decision::Serve { .. }));
        s.remove_worker("w1").unwrap();
        match select(&s, &q, &PRICES) {
            Decision::Load {
                variant,
                worker,
                reason,
                ..
            } => {
                assert_eq!(variant, small);
                assert_eq!(s.workers()[worker].id, "w2");
                assert!(reason.contains("(not loaded)"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn equally_loaded_workers_take_a_load_where_most_cores_are_free() {
        // Two idle workers: one offers 1 core, the other 16. Whatever their order in the
        // index, a load goes to the one with room left.
        for small_first in [true, false] {
            let mut b = Snapshot::builder();
            let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
            let mut add = |id: &str, cores: usize| {
                let mut w = worker(id, &[Cpu], 0.0);
                w.cores = cores;
                b.add_worker(w).unwrap()
            };
            let (_, roomy) = if small_first {
                let s = add("a-small", 1);
                (s, add("z-roomy", 16))
            } else {
                let r = add("z-roomy", 16);
                (add("a-small", 1), r)
            };
            let s = b.build();
            match select(&s, &app(None, None), &PRICES) {
                Decision::Load {
                    variant, worker, ..
                } => assert_eq!((variant, worker), (v, roomy)),
                d => panic!("{d:?}"),
            }
        }
    }

    #[test]
    fn a_gpu_worker_is_kept_for_gpu_instances_while_a_cpu_worker_exists() {
        let build = |with_cpu_worker: bool| {
            let mut b = Snapshot::builder();
            let v = b.add_variant("acme", variant("v", "m", 0.9, 1.0)).unwrap();
            // The GPU worker is the less utilised: INFaaS' rule alone would load there.
            let gpu = b.add_worker(worker("gpu", &[Cpu, Gpu], 0.0)).unwrap();
            let cpu = with_cpu_worker.then(|| b.add_worker(worker("cpu", &[Cpu], 0.5)).unwrap());
            (b.build(), v, gpu, cpu)
        };
        let loads_on = |s: &Snapshot| match select(s, &app(None, None), &PRICES) {
            Decision::Load {
                variant, worker, ..
            } => (variant, worker),
            d => panic!("{d:?}"),
        };
        let (s, v, _, cpu) = build(true);
        assert_eq!(loads_on(&s), (v, cpu.unwrap()));
        // A cluster of GPU workers only runs CPU variants on them.
        let (s, v, gpu, _) = build(false);
        assert_eq!(loads_on(&s), (v, gpu));
    }

    #[test]
    fn load_goes_to_the_least_utilised_worker_with_room_and_hardware() {
        let mut b = Snapshot::builder();
        let mut v = variant("v", "m", 0.9, 1.0);
        v.threads = 4;
        v.memory_bytes = 4 << 30;
        let v = b.add_variant("acme", v).unwrap();
        let mut add =
            |id: &str, hw: &[infaas_core::HardwareKind], util: f64, cores: usize, mem: u64| {
                let mut w = worker(id, hw, util);
                w.cores_used = cores;
                w.memory_used = mem;
                b.add_worker(w).unwrap()
            };
        add("gpu-only", &[Gpu], 0.0, 0, 0);
        add("no-cores", &[Cpu], 0.05, 5, 0);
        add("no-memory", &[Cpu], 0.1, 0, 13 << 30);
        add("busy", &[Cpu], 0.6, 0, 0);
        let ok = add("ok", &[Cpu], 0.3, 4, 12 << 30);
        let s = b.build();
        let q = Query {
            latency_slo_ms: Some(200.0),
            ..app(None, None)
        };
        match select(&s, &q, &PRICES) {
            Decision::Load {
                variant,
                worker,
                predicted_ms,
                wait,
                ..
            } => {
                assert_eq!((variant, worker), (v, ok));
                assert_eq!(predicted_ms, 101.0);
                assert!(wait);
            }
            d => panic!("{d:?}"),
        }
        // No worker with the hardware and room: nothing to serve or load.
        let mut b = Snapshot::builder();
        let mut g = variant("g", "m", 0.9, 1.0);
        g.hardware = Gpu;
        b.add_variant("acme", g).unwrap();
        b.add_worker(worker("cpu", &[Cpu], 0.0)).unwrap();
        let s = b.build();
        match select(&s, &app(None, None), &PRICES) {
            Decision::Unsatisfiable {
                closest: Some(c),
                reason,
            } => {
                assert_eq!(c.variant, 0);
                assert!(reason.contains("no live worker has room"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
    }

    #[test]
    fn load_prefers_lowest_load_plus_latency_and_waits_only_within_the_slo() {
        let mut f = fixture();
        let (mid, small) = (f.mid, f.small);
        f.worker("w", 0.0);
        let s = f.b.build();
        // No instances: without requirements the fastest to load and run (all load in 100 ms).
        let d = select(&s, &app(None, None), &PRICES);
        assert!(matches!(d, Decision::Load { variant, wait: true, .. } if variant == small));
        let d = select(&s, &app(Some(50.0), Some(0.9)), &PRICES);
        assert!(matches!(d, Decision::Load { variant, wait: false, .. } if variant == mid));
        let d = select(&s, &app(Some(150.0), Some(0.9)), &PRICES);
        assert!(
            matches!(d, Decision::Load { variant, wait: true, predicted_ms, .. } if variant == mid && predicted_ms == 102.0)
        );
    }

    /// A query that can wait for no load still starts one, for the queries after it: then a
    /// variant that runs within half the SLO (it serves several queries in turn while each
    /// meets the SLO) is loaded before one that loads sooner but runs near the SLO and answers
    /// one query at a time. A query that can wait for the quick load still gets it.
    #[test]
    fn a_load_no_query_waits_for_goes_to_a_variant_that_leaves_room_to_queue() {
        let mut b = Snapshot::builder();
        let mut near = variant("near", "near", 0.9, 80.0);
        near.load_ms = 100.0;
        let mut roomy = variant("roomy", "roomy", 0.9, 10.0);
        roomy.load_ms = 2_000.0;
        let near = b.add_variant("acme", near).unwrap();
        let roomy = b.add_variant("acme", roomy).unwrap();
        b.add_worker(worker("w", &[Cpu], 0.0)).unwrap();
        let s = b.build();
        let loaded = |slo: f64| match select(&s, &app(Some(slo), None), &PRICES) {
            Decision::Load { variant, wait, .. } => (variant, wait),
            d => panic!("{d:?}"),
        };
        // 100 ms: near's load and run take 180 ms, roomy's 2,010: neither is waited for, and
        // near runs 80 of the 100 ms.
        assert_eq!(loaded(100.0), (roomy, false));
        // 300 ms: the query waits for near (180 ms).
        assert_eq!(loaded(300.0), (near, true));
    }

    #[test]
    fn a_query_that_cannot_wait_for_a_load_is_served_meanwhile_by_a_busy_instance() {
        let mut f = fixture();
        let mid = f.mid;
        f.worker("w", 0.0);
        let mut s = f.b.build();
        // One overloaded instance of mid: it does not count as fitting, so rule 2 loads.
        let i = s
            .add_instance(InstanceEntry {
                id: "busy".into(),
                variant: mid,
                worker: 0,
                state: InstanceState::Overloaded,
                queue_len: 4,
                qps: 0.0,
            })
            .unwrap();
        // SLO 50 ms: the load (100 ms) cannot be waited for; the busy instance answers sooner.
        match select(&s, &app(Some(50.0), Some(0.9)), &PRICES) {
            Decision::Load {
                wait: false,
                meanwhile,
                reason,
                ..
            } => {
                assert_eq!(meanwhile, Some(i));
                assert!(
                    reason.contains("meanwhile served by overloaded instance busy"),
                    "{reason}"
                );
            }
            d => panic!("{d:?}"),
        }
        // SLO 150 ms: the query waits for the load; nothing meanwhile.
        assert!(matches!(
            select(&s, &app(Some(150.0), Some(0.9)), &PRICES),
            Decision::Load {
                wait: true,
                meanwhile: None,
                ..
            }
        ));
    }

    /// Before a query waited for a load only by its bare load time, every query of a burst
    /// that could not be served queued at the one instance being loaded (2,000 rows in the
    /// simulator's step test, against about 230 on each running instance).
    #[test]
    fn a_load_under_way_is_joined_with_the_rows_waiting_for_it() {
        let mut f = fixture();
        let (big, mid) = (f.big, f.mid);
        let (w0, w1) = (f.worker("w0", 0.0), f.worker("w1", 0.0));
        let mut s = f.b.build();
        let q = app(Some(150.0), Some(0.9));
        // Nothing under way: mid loads (100 ms + 2 ms) on the first of two equal workers.
        assert!(matches!(
            select(&s, &q, &PRICES),
            Decision::Load { variant, worker, predicted_ms, .. }
                if variant == mid && worker == w0 && predicted_ms == 102.0
        ));
        // Its load started on w1 60 ms ago: the query joins it there for the rest of the load.
        let live = InFlight::default();
        s.add_pending_load(PendingLoad {
            variant: mid,
            worker: w1,
            started_ms: 0.0,
            waiting: 0,
            live: live.clone(),
        })
        .unwrap();
        s.set_clock(Clock::Fixed(60.0));
        match select(&s, &q, &PRICES) {
            Decision::Load {
                variant,
                worker,
                predicted_ms,
                wait: true,
                reason,
                ..
            } => {
                assert_eq!((variant, worker, predicted_ms), (mid, w1, 42.0));
                assert!(reason.contains("join the load of mid.mid"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
        // 80 rows wait for it (10 batches of 8 at 8 ms, then its own at 2 ms): 40 + 82 ms, still
        // within the SLO.
        let guard = live.enter(80);
        assert!(matches!(
            select(&s, &q, &PRICES),
            Decision::Load { variant, predicted_ms, wait: true, .. }
                if variant == mid && predicted_ms == 122.0
        ));
        // 160 (reported): 202 ms there, so the next query loads big afresh (108 ms).
        drop(guard);
        s.set_pending_waiting(mid, 160);
        assert!(matches!(
            select(&s, &q, &PRICES),
            Decision::Load { variant, worker, predicted_ms, wait: true, .. }
                if variant == big && worker == w0 && predicted_ms == 108.0
        ));
        // Once its instance is in the index the load is over.
        s.add_instance(instance("m1", mid, w1)).unwrap();
        assert!(s.pending_load(mid).is_none());
        assert!(
            matches!(select(&s, &q, &PRICES), Decision::Serve { variant, .. } if variant == mid)
        );
    }

    #[test]
    fn a_query_late_everywhere_waits_for_the_load() {
        let mut f = fixture();
        let mid = f.mid;
        f.worker("w", 0.0);
        // The replica of mid goes to another worker (one instance of a variant per worker).
        f.worker("w2", 0.0);
        let mut s = f.b.build();
        // An overloaded instance of mid with 64 rows queued: 72 ms, sooner than the load
        // (102 ms) but over the SLO. It is left to the queries it still answers in time.
        s.add_instance(InstanceEntry {
            id: "busy".into(),
            variant: mid,
            worker: 0,
            state: InstanceState::Overloaded,
            queue_len: 64,
            qps: 0.0,
        })
        .unwrap();
        assert!(matches!(
            select(&s, &app(Some(50.0), Some(0.9)), &PRICES),
            Decision::Load {
                variant,
                wait: false,
                meanwhile: None,
                ..
            } if variant == mid
        ));
        // Within an SLO of 80 ms it serves the query meanwhile.
        assert!(matches!(
            select(&s, &app(Some(80.0), Some(0.9)), &PRICES),
            Decision::Load {
                wait: false,
                meanwhile: Some(0),
                ..
            }
        ));
    }

    /// Rule 2 near ties (see [`LOAD_TIE`]): the variant with fewer threads, unless the other's
    /// load + run is clearly lower; among equal threads, the faster run.
    #[test]
    fn load_takes_fewer_threads_on_a_near_tie() {
        // 1.43 ms against 1.225 ms: within 25%, one thread wins.
        assert_eq!(
            loaded(&[("t1", 0.03, 1, 1.40), ("t2", 0.025, 2, 1.2)]),
            "t1"
        );
        // 1.43 ms against 0.925 ms: the faster one.
        assert_eq!(
            loaded(&[("t1", 0.03, 1, 1.40), ("t2", 0.025, 2, 0.9)]),
            "t2"
        );
        // A model whose run a second thread halves: loads alike, so the totals are near, but
        // the two-thread variant runs much faster and is taken.
        assert_eq!(loaded(&[("t1", 8.0, 1, 50.0), ("t2", 4.5, 2, 50.0)]), "t2");
        // Equal threads: the faster run, though it loads a little slower.
        assert_eq!(
            loaded(&[("slow", 0.04, 1, 1.3), ("fast", 0.01, 1, 1.5)]),
            "fast"
        );
    }

    /// Under an SLO, every variant that runs within half of it is as good as the fastest: the
    /// one with the fewest threads is loaded (the zoo CNN: 3.6 ms on one thread, 2.4 ms on
    /// two, against 36 ms). Without an SLO, or with one the one-thread run takes more than
    /// half of, the faster two-thread variant.
    #[test]
    fn under_an_slo_load_takes_the_fewest_threads_that_meet_it() {
        let cnn = [("t1", 3.6, 1, 3.5), ("t2", 2.4, 2, 6.0)];
        assert_eq!(loaded_under(&cnn, None), "t2");
        assert_eq!(loaded_under(&cnn, Some(36.0)), "t1");
        assert_eq!(loaded_under(&cnn, Some(7.0)), "t2");
        // The load counts too: a one-thread variant whose load does not fit the SLO is not
        // taken.
        assert_eq!(
            loaded_under(&[("t1", 3.6, 1, 40.0), ("t2", 2.4, 2, 6.0)], Some(36.0)),
            "t2"
        );
    }

    /// Variants of one file that differ only in max batch run a lone query alike; for a query
    /// without an SLO rule 2 loads the one that batches most (under load it keeps up with the
    /// most). Before, the first listed was loaded (here max batch 2).
    #[test]
    fn load_takes_the_largest_batch_among_equals() {
        let load_with = |slo: Option<f64>| {
            let mut b = Snapshot::builder();
            for (id, max_batch) in [("b2", 2), ("b64", 64), ("b8", 8), ("b1", 1)] {
                let mut v = variant(id, "m", 0.9, 0.05);
                v.max_batch = max_batch;
                v.latency = (0..7)
                    .map(|k| 1usize << k)
                    .map(|batch| crate::snapshot::tests::point(batch, 0.05 * batch as f64))
                    .collect();
                b.add_variant("acme", v).unwrap();
            }
            b.add_worker(worker("w", &[Cpu], 0.0)).unwrap();
            let s = b.build();
            match select(&s, &app(slo, Some(0.5)), &PRICES) {
                Decision::Load { variant, .. } => s.variants()[variant].id.clone(),
                d => panic!("{d:?}"),
            }
        };
        assert_eq!(load_with(None), "b64");
    }

    /// [`loaded`] for a query with latency SLO `slo`.
    fn loaded_under(specs: &[(&str, f64, usize, f64)], slo: Option<f64>) -> String {
        let mut b = Snapshot::builder();
        for &(id, p99, threads, load_ms) in specs {
            let mut v = variant(id, "m", 0.9, p99);
            v.threads = threads;
            v.load_ms = load_ms;
            b.add_variant("acme", v).unwrap();
        }
        b.add_worker(worker("w", &[Cpu], 0.0)).unwrap();
        let s = b.build();
        match select(&s, &app(slo, Some(0.5)), &PRICES) {
            Decision::Load {
                variant, reason, ..
            } => {
                assert!(reason.contains("fewest threads"), "{reason}");
                s.variants()[variant].id.clone()
            }
            d => panic!("{d:?}"),
        }
    }

    /// The variant rule 2 loads for an application query without an SLO, on one idle worker,
    /// among variants `(id, p99 at batch 1, threads, load ms)`: its id.
    fn loaded(specs: &[(&str, f64, usize, f64)]) -> String {
        loaded_under(specs, None)
    }

    #[test]
    fn model_target_without_slo_takes_the_fastest_instance() {
        let mut b = Snapshot::builder();
        let slow = b
            .add_variant("acme", variant("slow", "m", 0.9, 5.0))
            .unwrap();
        let fast = b
            .add_variant("acme", variant("fast", "m", 0.9, 1.0))
            .unwrap();
        b.add_variant("acme", variant("other", "n", 0.99, 0.1))
            .unwrap();
        let w = b.add_worker(worker("w", &[Cpu], 0.0)).unwrap();
        b.add_instance(instance("is", slow, w)).unwrap();
        let i_fast = b.add_instance(instance("if", fast, w)).unwrap();
        let mut s = b.build();
        // fast has a queue but is still quicker: 2 ms x (1 + the batch under way) = 4 ms < 5 ms.
        s.set_instance_load(i_fast, 2, 10.0).unwrap();
        let q = Query {
            target: Target::Model("m"),
            ..app(None, None)
        };
        let Decision::Serve {
            variant,
            predicted_ms,
            reason,
            ..
        } = select(&s, &q, &PRICES)
        else {
            panic!()
        };
        assert_eq!((variant, predicted_ms), (fast, 4.0));
        assert!(reason.ends_with("lowest predicted latency"), "{reason}");
    }

    #[test]
    fn tenants_never_see_each_others_variants() {
        let mut b = Snapshot::builder();
        let mine = b
            .add_variant("acme", variant("mine", "m", 0.7, 5.0))
            .unwrap();
        let theirs = b
            .add_variant("evil", variant("theirs", "m", 0.99, 0.1))
            .unwrap();
        let w = b.add_worker(worker("w", &[Cpu], 0.0)).unwrap();
        b.add_instance(instance("i-mine", mine, w)).unwrap();
        b.add_instance(instance("i-theirs", theirs, w)).unwrap();
        let s = b.build();
        for q in [
            app(None, None),
            app(Some(1.0), None),
            app(None, Some(0.9)),
            Query {
                target: Target::Model("m"),
                ..app(None, None)
            },
        ] {
            match select(&s, &q, &PRICES) {
                Decision::Serve { variant, .. } => assert_eq!(variant, mine),
                Decision::Unsatisfiable { closest, .. } => {
                    assert_eq!(closest.map(|c| c.variant), Some(mine))
                }
                d => panic!("{d:?}"),
            }
        }
        let q = Query {
            tenant: "nobody",
            ..app(None, None)
        };
        assert_eq!(select(&s, &q, &PRICES), Decision::NotFound);
        let q = Query {
            target: Target::App("other-app"),
            ..app(None, None)
        };
        assert_eq!(select(&s, &q, &PRICES), Decision::NotFound);
    }

    #[test]
    fn inactive_instances_are_not_served() {
        let mut f = fixture();
        let small = f.small;
        let w = f.worker("w", 0.0);
        let i = f.instance("i", small, w);
        let mut s = f.b.build();
        s.set_instance_state(i, InstanceState::Inactive).unwrap();
        match select(&s, &app(Some(1.0), None), &PRICES) {
            Decision::Load {
                variant, reason, ..
            } => {
                assert_eq!(variant, small);
                assert!(reason.contains("(not loaded)"), "{reason}");
            }
            d => panic!("{d:?}"),
        }
    }

    /// xorshift64: a deterministic generator for the randomised comparison below.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n as u64) as usize
        }
    }

    /// Rules 1 and 3 by definition: every live instance of every eligible variant scanned,
    /// ranked by [`Pick::beats`] (rule 1, Active instances within the SLO) or
    /// [`Pick::beats_as_fallback`] (rule 3, the rest).
    fn scan_every_instance(s: &Snapshot, q: &Query) -> (Option<usize>, Option<usize>) {
        let rows = q.rows.max(1);
        let rank = Rank::of(q);
        let (mut active, mut fallback): (Option<Pick>, Option<Pick>) = (None, None);
        let list = match q.target {
            Target::App(app) => s.app_variants(q.tenant, app),
            Target::Model(model) => s.model_variants(q.tenant, model),
        };
        for &vi in list {
            let v = &s.variants()[vi];
            if q.min_accuracy.is_some_and(|min| v.accuracy < min) {
                break;
            }
            if !eligible(v, q, &PRICES, rows) {
                continue;
            }
            for &ii in s.variant_instances(vi) {
                let state = s.instances()[ii].state;
                if state == InstanceState::Inactive {
                    continue;
                }
                let pick = Pick::at(s, q, ii, vi, v.latency_ms(rows));
                if state == InstanceState::Active && pick.fits {
                    keep_best(&mut active, pick, |a, b| a.beats(b, rank));
                } else {
                    keep_best(&mut fallback, pick, Pick::beats_as_fallback);
                }
            }
        }
        (active.map(|p| p.instance), fallback.map(|p| p.instance))
    }

    #[test]
    fn one_instance_per_variant_decides_as_a_scan_of_every_instance() {
        use InstanceState::{Active, Interfered, Overloaded};
        let (mut by_rule1, mut by_rule3, mut meanwhile_seen, mut ties) = (0, 0, 0, 0);
        for seed in 1..=400_u64 {
            let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
            let mut b = Snapshot::builder();
            let variants: Vec<usize> = (0..2 + rng.below(4))
                .map(|n| {
                    let mut v = variant(
                        &format!("v{n}"),
                        &format!("m{n}"),
                        [0.8, 0.9, 0.95][rng.below(3)],
                        1.0 + rng.below(8) as f64,
                    );
                    v.max_batch = [1, 4, 8][rng.below(3)];
                    // A noisy profile: a larger batch measured faster than a smaller one.
                    // (`variant` lists batches 8, 1, 4.)
                    if rng.below(2) == 0 {
                        v.latency[0].p99_ms = v.latency[2].p99_ms * 0.5;
                    }
                    b.add_variant("acme", v).unwrap()
                })
                .collect();
            let workers: Vec<usize> = (0..3)
                .map(|n| b.add_worker(worker(&format!("w{n}"), &[Cpu], 0.9)).unwrap())
                .collect();
            let mut insts = Vec::new();
            for &v in &variants {
                for k in 0..rng.below(6) {
                    let mut i = instance(&format!("i{v}.{k}"), v, workers[rng.below(3)]);
                    i.state = [Active, Active, Active, Overloaded, Interfered][rng.below(5)];
                    i.queue_len = [0, 0, 1, 2, 3, 7, 8, 20][rng.below(8)];
                    insts.push(b.add_instance(i).unwrap());
                }
            }
            let mut s = b.build();
            // Changes after the build: loads, states, removals, live in-flight rows.
            let mut guards = Vec::new();
            for &i in &insts {
                match rng.below(8) {
                    0 => s.set_instance_load(i, rng.below(12), 1.0).unwrap(),
                    1 => s
                        .set_instance_state(i, [Active, Overloaded][rng.below(2)])
                        .unwrap(),
                    2 => s.remove_instance(i).unwrap(),
                    3 if seed % 2 == 0 => {
                        let counter = InFlight::default();
                        guards.push(counter.enter(rng.below(10)));
                        s.attach_in_flight(i, counter).unwrap();
                    }
                    _ => {}
                }
            }
            for _ in 0..6 {
                let q = Query {
                    tenant: "acme",
                    target: Target::App("app"),
                    latency_slo_ms: [None, Some(6.0), Some(20.0), Some(60.0)][rng.below(4)],
                    min_accuracy: [None, Some(0.9)][rng.below(2)],
                    max_cost: None,
                    rows: 1 + rng.below(3),
                };
                let (active, fallback) = scan_every_instance(&s, &q);
                if let Some(a) = active {
                    let queued = s.queued(a);
                    let v = s.instances()[a].variant;
                    ties += s
                        .variant_instances(v)
                        .iter()
                        .filter(|&&o| o != a && s.instances()[o].state == Active)
                        .filter(|&&o| {
                            s.variants()[v].predicted_ms(s.queued(o), q.rows)
                                == s.variants()[v].predicted_ms(queued, q.rows)
                        })
                        .count();
                }
                match (select(&s, &q, &PRICES), active) {
                    (Decision::Serve { instance, .. }, Some(a)) => {
                        assert_eq!(instance, a, "seed {seed}, {q:?}");
                        by_rule1 += 1;
                    }
                    (d, Some(a)) => panic!("seed {seed}, {q:?}: {d:?}, the scan serves {a}"),
                    (Decision::Serve { instance, .. }, None) => {
                        assert_eq!(Some(instance), fallback, "seed {seed}, {q:?}");
                        by_rule3 += 1;
                    }
                    (
                        Decision::Load {
                            meanwhile: Some(m), ..
                        },
                        None,
                    ) => {
                        assert_eq!(Some(m), fallback, "seed {seed}, {q:?}");
                        meanwhile_seen += 1;
                    }
                    (_, None) => {}
                }
            }
            drop(guards);
        }
        // Every branch was exercised, including instances predicted alike (the queue decides).
        assert!(by_rule1 > 300, "rule 1 served {by_rule1}");
        assert!(
            by_rule3 > 0 && meanwhile_seen > 0,
            "{by_rule3} {meanwhile_seen}"
        );
        assert!(ties > 50, "ties {ties}");
    }
}
