//! The Model-Autoscaler's greedy heuristic (INFaaS §4.2.2), family by family.
//!
//! - Headroom below `slack`: the deficit `slack * L - capacity` is covered by the cheapest (by
//!   the ILP's objective) of: *replicating* a loadable variant of the family (`ceil(deficit /
//!   Q_j)` instances; for a family with nothing running this loads its first variant), or
//!   *upgrading*: replacing the removable instances of a running variant with enough instances
//!   of a loadable variant of higher saturation throughput. Instances go to the least-utilised
//!   worker that has the variant's hardware and room for its threads and memory. When no
//!   option can be fully placed, the one that leaves the least load unserved is taken (the
//!   VM-Autoscaler sees the resulting overload and adds a worker).
//! - Headroom above `scale_down`: repeatedly the step that lowers the objective most, of
//!   *removing* one removable instance or *downgrading* one: replacing it with as many
//!   instances of a cheaper loadable variant (of at least the same max batch) as keep the
//!   headroom, when their price and load
//!   term are below the removed instance's price. Each step keeps headroom at least `slack`;
//!   steps go on while headroom is above `scale_down`. A step that takes the last instance off
//!   a releasable worker (one the provider started) also saves that worker's price, so scaling
//!   in empties those workers first and the VM-Autoscaler can stop them. For the same reason
//!   the last instance on such a worker may be *moved* (its variant loaded on a permanent
//!   worker with room, then it is unloaded) when the worker's price outweighs the load.
//!
//! Families are handled in order; each one's loads take room from those after it.

use crate::autoscale::problem::{family_actions, Loads, Prepared, Room};
use crate::autoscale::{ScalingError, ScalingInput, ScalingPlan};

/// A candidate set of changes for one family.
struct Candidate {
    loads: Vec<(usize, usize)>,
    removals: Vec<usize>,
    room: Room,
    /// Change of the objective.
    value: f64,
    label: String,
}

/// One greedy decision over every family of `input`; see the module documentation.
pub fn greedy(input: &ScalingInput) -> Result<ScalingPlan, ScalingError> {
    let p = Prepared::new(input)?;
    let mut room = Room::new(input.workers);
    let (mut loads, mut removals, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    for f in 0..input.families.len() {
        let Some((fl, fr, why)) = decide(&p, f, &mut room) else {
            continue;
        };
        actions.extend(family_actions(&p, f, &fl, &fr, &why));
        loads.extend(fl);
        removals.extend(fr);
    }
    Ok(ScalingPlan {
        actions,
        score: p.score(&loads, &removals),
    })
}

type Changes = (Loads, Vec<usize>, String);

/// A downgrade target, the room after its loads, and the loads.
type Downgrade = (usize, Room, Loads);

fn decide(p: &Prepared, f: usize, room: &mut Room) -> Option<Changes> {
    let load = p.family(f).load_qps;
    let capacity = p.capacity(f);
    let headroom = if load > 0.0 {
        capacity / load
    } else {
        f64::INFINITY
    };
    if headroom < p.slack[f] {
        scale_up(p, f, room, capacity, headroom)
    } else if headroom > p.scale_down(f) {
        scale_down(p, f, room, capacity)
    } else {
        None
    }
}

/// Places up to `n` instances of variant `j` in `room` and returns the loads: on permanent
/// workers while one has room, then on releasable ones (whatever the utilisation says: a busy
/// host makes a permanent worker read as loaded as the releasable ones, which the model period
/// sees fully busy, and the tie then went to the started worker with more free cores, which
/// never emptied).
fn place_n(p: &Prepared, j: usize, n: usize, room: &mut Room) -> Vec<(usize, usize)> {
    let v = &p.input.variants[j];
    let workers = p.input.workers;
    (0..n)
        .map_while(|_| {
            room.place_where(workers, v, |w| !p.input.is_releasable(w))
                .or_else(|| room.place(workers, v))
                .map(|w| (j, w))
        })
        .collect()
}

fn count_for(need: f64, peak: f64) -> usize {
    if need <= 0.0 {
        0
    } else {
        (need / peak).ceil() as usize
    }
}

fn scale_up(
    p: &Prepared,
    f: usize,
    room: &mut Room,
    capacity: f64,
    headroom: f64,
) -> Option<Changes> {
    let fam = p.family(f);
    let demand = p.demand(f);
    let deficit = demand - capacity;
    let variants = p.input.variants;
    let mut best: Option<Candidate> = None;
    let mut consider = |o: Candidate| {
        if best.as_ref().is_none_or(|b| o.value < b.value) {
            best = Some(o);
        }
    };
    for &j in fam.variants.iter().filter(|&&j| p.loadable[j]) {
        // Replicate (or load) j.
        let mut r = room.clone();
        let loads = place_n(p, j, count_for(deficit, p.peak[j]), &mut r);
        let unserved = (deficit - loads.len() as f64 * p.peak[j]).max(0.0);
        consider(Candidate {
            value: loads.len() as f64 * p.load_weight(j) + p.penalty * unserved,
            label: format!(
                "replicate {} x{} ({:.0} rows/s short after)",
                variants[j].name,
                loads.len(),
                unserved
            ),
            loads,
            removals: Vec::new(),
            room: r,
        });
        // Upgrade the removable instances of a slower running variant to j.
        for &i in &fam.variants {
            if p.peak[i] >= p.peak[j] {
                continue;
            }
            let removals = p.replaceable_of(i);
            if removals.is_empty() {
                continue;
            }
            let need = demand - (capacity - removals.len() as f64 * p.peak[i]);
            let n = count_for(need, p.peak[j]);
            let mut r = room.clone();
            let loads = place_n(p, j, n, &mut r);
            if loads.len() < n {
                continue;
            }
            consider(Candidate {
                value: n as f64 * p.load_weight(j) - removals.len() as f64 * p.rate[i],
                label: format!(
                    "upgrade {} x{} to {} x{n}",
                    variants[i].name,
                    removals.len(),
                    variants[j].name
                ),
                loads,
                removals,
                room: r,
            });
        }
    }
    let o = best?;
    *room = o.room;
    let why = format!(
        "headroom {headroom:.2} < slack {:.2} at {:.0} rows/s (capacity {capacity:.0} rows/s); \
         cheapest option: {}, objective {:+.3e}/s",
        p.slack[f], fam.load_qps, o.label, o.value
    );
    Some((o.loads, o.removals, why))
}

fn scale_down(p: &Prepared, f: usize, room: &mut Room, mut capacity: f64) -> Option<Changes> {
    let fam = p.family(f);
    let (demand, load) = (p.demand(f), fam.load_qps);
    let headroom_before = capacity / load;
    let variants = p.input.variants;
    // Removable instances left, per family variant (busiest workers last, popped first).
    let mut left: Vec<(usize, Vec<usize>)> = fam
        .variants
        .iter()
        .map(|&i| {
            let mut list = p.removable_of(i);
            list.reverse();
            (i, list)
        })
        .collect();
    // A downgrade's first load is paired with its removal (`paired_loads[k]` with `paired[k]`);
    // its other loads and the plain removals come after.
    let (mut paired_loads, mut extra_loads, mut paired, mut plain, mut steps) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Per worker: cores freed by the removals chosen so far, and running instances left.
    let workers = p.input.workers;
    let mut freed = vec![0usize; workers.len()];
    let mut left_on = vec![0usize; workers.len()];
    for r in &p.input.running {
        left_on[r.worker] += 1;
    }
    // What removing running instance `k` saves beyond its own price: the price of its worker
    // when that worker is releasable and `k` is the last thing on it (by the instances known
    // here and by the cores the worker reports in use).
    let empties = |k: usize, freed: &[usize], left_on: &[usize]| {
        let r = &p.input.running[k];
        let w = &workers[r.worker];
        if p.input.is_releasable(r.worker)
            && left_on[r.worker] == 1
            && w.cores_used <= freed[r.worker] + variants[r.variant].threads
        {
            p.input.prices.worker_rate_per_s(w)
        } else {
            0.0
        }
    };
    const EPS: f64 = 1e-9;
    while load <= 0.0 || capacity / load > p.scale_down(f) {
        // (value, slot in `left`, downgrade target and its loads)
        let mut best: Option<(f64, usize, Option<Downgrade>)> = None;
        for (slot, (i, list)) in left.iter().enumerate() {
            let i = *i;
            if list.is_empty() {
                continue;
            }
            let better = |value: f64, best: &Option<(f64, usize, _)>| {
                value < -EPS && best.as_ref().is_none_or(|b| value < b.0)
            };
            let Some(&next) = list.last() else {
                continue;
            };
            let credit = empties(next, &freed, &left_on);
            let saved = p.rate[i] + credit;
            if capacity - p.peak[i] >= demand - EPS && better(-saved, &best) {
                best = Some((-saved, slot, None));
            }
            // Downgrade: replace it with as many instances of a cheaper variant as needed. Or
            // move it (the same variant) off a releasable worker it is the last thing on, to a
            // permanent worker with room: that saves the worker's price, which is how a worker
            // started for a peak empties when the plans left its last instance there.
            for &j in &fam.variants {
                let moving = j == i;
                // Never to a variant that batches less: under load the instance's batches are
                // what keeps it ahead of its queue.
                if (moving && credit <= 0.0)
                    || (!moving && p.rate[j] >= p.rate[i])
                    || !p.loadable[j]
                    || variants[j].max_batch < variants[i].max_batch
                {
                    continue;
                }
                let n = count_for(demand - (capacity - p.peak[i]), p.peak[j]).max(1);
                let value = n as f64 * p.load_weight(j) - p.rate[i];
                if !better(value - credit, &best) {
                    continue;
                }
                let mut r = room.clone();
                // In place when it fits: the replaced instance's worker keeps its work, and a
                // worker added for a peak is not handed new instances while load falls. A
                // releasable worker is left to empty when another has room.
                let at = p.input.running[next].worker;
                let first = Some(at)
                    .filter(|&w| !p.input.is_releasable(w))
                    .filter(|&w| r.fits(p.input.workers, w, &variants[j]))
                    .map(|w| {
                        r.take(w, &variants[j]);
                        (j, w)
                    });
                let mut placed: Vec<(usize, usize)> = first.into_iter().collect();
                if moving {
                    // Only to a permanent worker that does not run the variant already (a
                    // worker runs one instance of a variant: the controller would look for
                    // another worker, and finding none, ask for one).
                    let hosts =
                        |w: usize| p.running[i].iter().any(|&k| p.input.running[k].worker == w);
                    let to = r.place_where(p.input.workers, &variants[j], |w| {
                        !p.input.is_releasable(w) && !hosts(w)
                    });
                    placed.extend(to.map(|w| (j, w)));
                } else {
                    placed.extend(place_n(p, j, n - placed.len(), &mut r));
                }
                let value = if placed.iter().any(|&(_, w)| w == at) {
                    value
                } else {
                    value - credit
                };
                if placed.len() == n && better(value, &best) {
                    best = Some((value, slot, Some((j, r, placed))));
                }
            }
        }
        let Some((value, slot, to)) = best else {
            break;
        };
        let (i, list) = &mut left[slot];
        let Some(k) = list.pop() else {
            break;
        };
        let at = p.input.running[k].worker;
        freed[at] += variants[*i].threads;
        left_on[at] -= 1;
        capacity -= p.peak[*i];
        match to {
            Some((j, r, placed)) => {
                *room = r;
                for &(_, w) in &placed {
                    left_on[w] += 1;
                }
                capacity += placed.len() as f64 * p.peak[j];
                steps.push(if j == *i {
                    format!(
                        "move {} off a worker the provider started ({value:+.3e}/s)",
                        variants[j].name
                    )
                } else {
                    format!(
                        "downgrade {} to {} x{} ({value:+.3e}/s)",
                        variants[*i].name,
                        variants[j].name,
                        placed.len()
                    )
                });
                let mut placed = placed.into_iter();
                paired_loads.extend(placed.next());
                extra_loads.extend(placed);
                paired.push(k);
            }
            None => {
                plain.push(k);
                steps.push(format!("remove {} ({value:+.3e}/s)", variants[*i].name));
            }
        }
    }
    if paired.is_empty() && plain.is_empty() {
        return None;
    }
    let why = format!(
        "headroom {} > scale-down {:.2} at {load:.0} rows/s; {} keeping headroom >= slack {:.2} \
         (capacity {capacity:.0} rows/s after)",
        if headroom_before.is_finite() {
            format!("{headroom_before:.2}")
        } else {
            "unbounded (no load)".to_owned()
        },
        p.scale_down(f),
        steps.join(", "),
        p.slack[f],
    );
    paired.extend(plain);
    paired_loads.extend(extra_loads);
    Some((paired_loads, paired, why))
}
