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
use crate::instance_state::InstanceState;

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
    let mut room = Room::new(
        input.workers,
        input.running.iter().map(|r| (r.variant, r.worker)),
    );
    let (mut loads, mut removals, mut actions) = (Vec::new(), Vec::new(), Vec::new());
    let mut released = Vec::new();
    for f in 0..input.families.len() {
        let Some((fl, fr, why, release)) = decide(&p, f, &mut room) else {
            continue;
        };
        let from = actions.len();
        actions.extend(family_actions(&p, f, &fl, &fr, &why));
        if release {
            released.extend(from..actions.len());
        }
        loads.extend(fl);
        removals.extend(fr);
    }
    Ok(ScalingPlan {
        actions,
        score: p.score(&loads, &removals),
        released,
    })
}

/// A family's loads, removals, the reason, and whether the removals are a switch's release
/// ([`ScalingPlan::released`]).
type Changes = (Loads, Vec<usize>, String, bool);

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
        return scale_up(p, f, room, capacity, headroom);
    }
    // Above the scale-down headroom, scaling down first; a switch when nothing can be given
    // back that way (its instances are young, or the family is under the overload hold).
    if headroom > p.scale_down(f) {
        if let Some(changes) = scale_down(p, f, room, capacity) {
            return Some(changes);
        }
    }
    if let Some(o) = switch(p, f, room, capacity) {
        *room = o.room;
        let why = format!(
            "headroom {} >= slack {:.2} at {load:.0} rows/s (capacity {capacity:.0} rows/s); \
             {}, objective {:+.3e}/s",
            if headroom.is_finite() {
                format!("{headroom:.2}")
            } else {
                "unbounded (no load)".to_owned()
            },
            p.slack[f],
            o.label,
            o.value
        );
        let released = o.loads.is_empty();
        return Some((o.loads, o.removals, why, released));
    }
    None
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
            room.place_where(workers, j, v, |w| !p.input.is_releasable(w))
                .or_else(|| room.place(workers, j, v))
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
    // The family grows on preferred variants (`Prepared::preferred`) that serve its whole
    // load within SWITCH_GAIN of the cheapest of them (a variant's price for the demand on its
    // own, in whole instances); on the others only when none of those can be placed. One
    // more CPU replica is the cheapest answer to a deficit of a few rows/s, again and again,
    // while the load grows past what one GPU instance serves for less.
    let whole = |j: usize| count_for(demand, p.peak[j]).max(1) as f64 * p.rate[j];
    let cheapest = fam
        .variants
        .iter()
        .filter(|&&j| p.preferred[j])
        .map(|&j| whole(j))
        .fold(f64::INFINITY, f64::min);
    let mut best: Option<Candidate> = None;
    let mut other: Option<Candidate> = None;
    let mut consider = |o: Candidate| {
        let grows_on_the_cheap_row = o
            .loads
            .iter()
            .all(|&(j, _)| p.preferred[j] && whole(j) <= (1.0 + SWITCH_GAIN) * cheapest);
        let slot = if grows_on_the_cheap_row {
            &mut best
        } else {
            &mut other
        };
        if slot.as_ref().is_none_or(|b| o.value < b.value) {
            *slot = Some(o);
        }
    };
    let live = p.live(f);
    for &j in fam.variants.iter().filter(|&&j| p.loadable[j]) {
        // Replicate (or load) j, for the load at the headroom the family keeps once j is
        // live: a replica of a variant that runs near the SLO raises the headroom every
        // instance of the family must keep.
        let servers = live + count_for(deficit, p.peak[j]).max(1);
        let deficit = p.slack_after(f, j, servers, |_| true) * fam.load_qps - capacity;
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
            consider_upgrade(p, j, removals, need, room, &mut consider, || {
                format!("upgrade {}", variants[i].name)
            });
        }
        consider_switch(p, f, j, capacity, room, false, &mut consider);
    }
    // Fill: a worker runs at most one instance of a variant, so a deficit beyond what one
    // variant can place grows on the family's next variants too (most often the same weights
    // at another max batch): preferred ones first, each by its price per row/s.
    let mut order: Vec<usize> = fam
        .variants
        .iter()
        .copied()
        .filter(|&j| p.loadable[j])
        .collect();
    order.sort_by(|&a, &b| {
        (!p.preferred[a])
            .cmp(&!p.preferred[b])
            .then(p.price_per_row(a).total_cmp(&p.price_per_row(b)))
    });
    let mut r = room.clone();
    let mut loads: Loads = Vec::new();
    let mut added = 0.0;
    let mut unserved = 0.0;
    let mut used = 0;
    for &j in &order {
        let servers = live + loads.len() + count_for(deficit - added, p.peak[j]).max(1);
        let need = p.slack_after(f, j, servers, |_| true) * fam.load_qps - capacity - added;
        unserved = need.max(0.0);
        if need <= 0.0 {
            break;
        }
        let placed = place_n(p, j, count_for(need, p.peak[j]), &mut r);
        if placed.is_empty() {
            continue;
        }
        used += 1;
        added += placed.len() as f64 * p.peak[j];
        loads.extend(placed);
        unserved = (need - added).max(0.0);
    }
    if used > 1 {
        consider(Candidate {
            value: loads.iter().map(|&(j, _)| p.load_weight(j)).sum::<f64>() + p.penalty * unserved,
            label: format!(
                "replicate {} ({unserved:.0} rows/s short after)",
                loads
                    .iter()
                    .map(|&(j, _)| variants[j].name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            loads,
            removals: Vec::new(),
            room: r,
        });
    }
    // ... unless the cheap row leaves rows/s unserved that another serves.
    let o = match (best, other) {
        (Some(b), Some(o)) if o.value + p.penalty < b.value => o,
        (b, o) => b.or(o)?,
    };
    *room = o.room;
    let why = format!(
        "headroom {headroom:.2} < slack {:.2} at {:.0} rows/s (capacity {capacity:.0} rows/s); \
         cheapest option: {}, objective {:+.3e}/s",
        p.slack[f], fam.load_qps, o.label, o.value
    );
    Some((o.loads, o.removals, why, false))
}

/// Switch: serve family `f` on `j`, replacing every replaceable instance of a slower variant
/// that costs more per row/s, with as many instances of `j` as the load needs at the headroom
/// `j`'s own service time asks for. A family grown replica by replica on a slow variant for
/// small deficits (one more CPU instance is the cheapest answer to a deficit of a few rows/s)
/// moves to the variant that serves its whole load cheapest. When `j`'s live instances and
/// the variants kept serve the load at their own headroom already and `only_removals`, the
/// switch is the removals alone.
fn consider_switch(
    p: &Prepared,
    f: usize,
    j: usize,
    capacity: f64,
    room: &Room,
    only_removals: bool,
    consider: &mut impl FnMut(Candidate),
) {
    let fam = p.family(f);
    let removals: Vec<usize> = fam
        .variants
        .iter()
        .filter(|&&i| p.peak[i] < p.peak[j] && p.price_per_row(i) > p.price_per_row(j))
        .flat_map(|&i| p.replaceable_of(i))
        .collect();
    if removals.is_empty() {
        return;
    }
    let gone: f64 = removals
        .iter()
        .map(|&k| p.peak[p.input.running[k].variant])
        .sum();
    let live = p.live(f);
    let servers = live - removals.len() + count_for(fam.load_qps, p.peak[j]).max(1);
    let need = p.slack_with(f, j, servers) * fam.load_qps - (capacity - gone);
    if need <= 0.0 {
        // Released only when the load is served without counting j's Overloaded or
        // Interfered instances (an instance busy with an offline job's batches is Overloaded:
        // its profile is not what it has to spare).
        let unsound = p.running[j]
            .iter()
            .filter(|&&k| {
                matches!(
                    p.input.running[k].state,
                    InstanceState::Overloaded | InstanceState::Interfered
                )
            })
            .count();
        let sound = need + unsound as f64 * p.peak[j] <= 0.0;
        if only_removals && sound && unsound < p.running[j].len() {
            consider(Candidate {
                value: -p.rate_of(&removals),
                label: format!(
                    "remove the slower variants x{} ({} serves the load)",
                    removals.len(),
                    p.input.variants[j].name
                ),
                loads: Vec::new(),
                removals,
                room: room.clone(),
            });
        }
        return;
    }
    consider_upgrade(p, j, removals, need, room, consider, || {
        "switch the slower variants".to_owned()
    });
}

/// A family with headroom enough: the best switch ([`consider_switch`]) that lowers the
/// objective by at least [`SWITCH_GAIN`] of the family's price, if any.
fn switch(p: &Prepared, f: usize, room: &Room, capacity: f64) -> Option<Candidate> {
    let mut best: Option<Candidate> = None;
    let floor = -SWITCH_GAIN * p.cost(f);
    for &j in p.family(f).variants.iter().filter(|&&j| p.preferred[j]) {
        consider_switch(p, f, j, capacity, room, true, &mut |o: Candidate| {
            if o.value < floor && best.as_ref().is_none_or(|b| o.value < b.value) {
                best = Some(o);
            }
        });
    }
    best
}

/// The least share of a family's price a switch must save when the family has the headroom
/// it needs (so that a family does not move between variants for a few per cent).
const SWITCH_GAIN: f64 = 0.1;

/// Considers replacing the running instances `removals` of a family with instances of `j`
/// enough for `need` rows/s: its value counts every removal (what the family costs once `j`'s
/// instances are live), but only as many removals as loads are planned now, each paired with a
/// load (an upgrade: the load comes first). The others stay until scale-down finds them
/// surplus, so the family keeps its capacity while `j` loads.
#[allow(clippy::too_many_arguments)]
fn consider_upgrade(
    p: &Prepared,
    j: usize,
    mut removals: Vec<usize>,
    need: f64,
    room: &Room,
    consider: &mut impl FnMut(Candidate),
    label: impl FnOnce() -> String,
) {
    let n = count_for(need, p.peak[j]);
    let mut r = room.clone();
    let loads = place_n(p, j, n, &mut r);
    if loads.len() < n || n == 0 {
        return;
    }
    let saved = p.rate_of(&removals);
    let label = format!(
        "{} x{} to {} x{n}",
        label(),
        removals.len(),
        p.input.variants[j].name
    );
    removals.truncate(n);
    consider(Candidate {
        value: n as f64 * p.load_weight(j) - saved,
        label,
        loads,
        removals,
        room: r,
    });
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
                    || (!moving && p.preferred[i] && !p.preferred[j])
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
                    .filter(|&w| r.fits(p.input.workers, w, j, &variants[j]))
                    .map(|w| {
                        r.take(w, j, &variants[j]);
                        (j, w)
                    });
                let mut placed: Vec<(usize, usize)> = first.into_iter().collect();
                if moving {
                    // Only to a permanent worker that does not run the variant already (a
                    // worker runs one instance of a variant: the controller would look for
                    // another worker, and finding none, ask for one).
                    let hosts =
                        |w: usize| p.running[i].iter().any(|&k| p.input.running[k].worker == w);
                    let to = r.place_where(p.input.workers, j, &variants[j], |w| {
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
    Some((paired_loads, paired, why, false))
}
