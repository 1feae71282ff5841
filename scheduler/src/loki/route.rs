//! Loki's load balancer (§5.1): MostAccurateFirst (Algorithm 1) over an [`Allocation`].
//!
//! Loki routes per worker; here a placement (a variant's instances, [`Placement`]) stands for
//! its workers, which share its load evenly. From the root, the frontend fills the root's
//! placements in non-increasing order of accuracy up to their capacities; then, task by task
//! in topological order and placement by placement in non-increasing order of accuracy, the
//! placement's outgoing requests to each child (`incoming * r * branch probability`) fill the
//! child's placements the same way, and the shares routed become the placement's routing
//! probabilities. So the most accurate upstream variants get the most accurate downstream
//! capacity first.
//!
//! Two cases Algorithm 1 leaves open: requests beyond the child's whole capacity (demand above
//! the plan's) are spread over the child's placements in proportion to their capacities
//! ([`Table::overflow_qps`] counts them) so that every table's probabilities sum to 1; and a
//! placement expected to receive nothing gets a table in proportion to the child's spare
//! capacity (or its capacity, when none is spare), for the queries that reach it anyway.
//! The capacity left after the fill ([`RoutingTables::spare_qps`]) is Loki's backup table for
//! opportunistic rerouting ([`super::drop`]).

use serde::Serialize;

use super::{Allocation, LokiProblem, Placement};

/// One destination of a routing table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pick {
    /// Index into [`Allocation::tasks`]`[task]`.
    pub placement: usize,
    /// The node's option of that placement.
    pub option: usize,
    pub probability: f64,
}

/// Where one sender's requests to one task go.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Table {
    pub entries: Vec<Pick>,
    /// Cumulative probabilities of `entries` (the last is 1).
    cumulative: Vec<f64>,
    /// Requests per second the table splits (at the estimated demand).
    pub outgoing_qps: f64,
    /// Of which beyond the task's capacity.
    pub overflow_qps: f64,
}

impl Table {
    fn new(shares: Vec<(usize, f64)>, placements: &[Placement], outgoing_qps: f64) -> Table {
        let total: f64 = shares.iter().map(|s| s.1).sum();
        let mut entries = Vec::with_capacity(shares.len());
        let mut cumulative = Vec::with_capacity(shares.len());
        if total > 0.0 {
            let mut acc = 0.0;
            for (placement, share) in shares.into_iter().filter(|s| s.1 > 0.0) {
                let probability = share / total;
                acc += probability;
                entries.push(Pick {
                    placement,
                    option: placements.get(placement).map_or(usize::MAX, |p| p.option),
                    probability,
                });
                cumulative.push(acc);
            }
            if let Some(last) = cumulative.last_mut() {
                *last = 1.0;
            }
        }
        Table {
            entries,
            cumulative,
            outgoing_qps,
            overflow_qps: 0.0,
        }
    }

    /// The destination of a request given a uniform draw `u` in [0, 1) (binary search over
    /// the cumulative probabilities); `None` for an empty table.
    pub fn pick(&self, u: f64) -> Option<&Pick> {
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        let i = self.cumulative.partition_point(|&c| c <= u);
        self.entries
            .get(i.min(self.entries.len().saturating_sub(1)))
    }

    /// Sum of the probabilities (1 unless the table is empty).
    pub fn total_probability(&self) -> f64 {
        self.entries.iter().map(|e| e.probability).sum()
    }
}

/// The routing tables of an allocation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoutingTables {
    /// The frontend's table into the root's placements.
    pub frontend: Table,
    /// Per task, per placement of the task's parent, the table into the task's placements
    /// (empty for the root).
    pub tables: Vec<Vec<Table>>,
    /// Per task, per placement, the requests per second it is expected to receive.
    pub incoming_qps: Vec<Vec<f64>>,
    /// Per task, per placement, capacity left after the fill (Loki's backup table).
    pub spare_qps: Vec<Vec<f64>>,
}

impl RoutingTables {
    /// The table a sender uses for `task`: the frontend's for the root (`upstream` ignored),
    /// else that of placement `upstream` of the task's parent.
    pub fn table(&self, task: usize, upstream: Option<usize>) -> Option<&Table> {
        if task == 0 {
            return Some(&self.frontend);
        }
        self.tables.get(task)?.get(upstream?)
    }

    /// The placement of `task` a request from `upstream` goes to, for the uniform draw `u`
    /// (O(log n) in the task's placements).
    pub fn pick(&self, task: usize, upstream: Option<usize>, u: f64) -> Option<&Pick> {
        self.table(task, upstream)?.pick(u)
    }
}

/// MostAccurateFirst (Algorithm 1) of `allocation` at the estimated demand `demand_qps`
/// (queries/s at the root); see the module documentation.
pub fn most_accurate_first(
    problem: &LokiProblem,
    allocation: &Allocation,
    demand_qps: f64,
) -> RoutingTables {
    let n = problem.nodes.len().min(allocation.tasks.len());
    let placements = &allocation.tasks[..n];
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (t, node) in problem.nodes.iter().enumerate().take(n).skip(1) {
        if let Some(&p) = node.parents.first().filter(|&&p| p < t) {
            children[p].push(t);
        }
    }
    let order: Vec<Vec<usize>> = placements
        .iter()
        .map(|ps| {
            let mut o: Vec<usize> = (0..ps.len()).collect();
            o.sort_by(|&a, &b| ps[b].accuracy.total_cmp(&ps[a].accuracy).then(a.cmp(&b)));
            o
        })
        .collect();
    let mut spare: Vec<Vec<f64>> = placements
        .iter()
        .map(|ps| ps.iter().map(|p| p.capacity_qps.max(0.0)).collect())
        .collect();
    let mut incoming: Vec<Vec<f64>> = placements.iter().map(|ps| vec![0.0; ps.len()]).collect();
    let branch = |t: usize| problem.nodes.get(t).map_or(1.0, |n| n.branch_probability);

    // Fills `outgoing` requests into task `t`'s placements, most accurate first.
    let fill = |t: usize,
                outgoing: f64,
                spare: &mut Vec<Vec<f64>>,
                incoming: &mut Vec<Vec<f64>>|
     -> Table {
        let mut left = outgoing.max(0.0);
        let mut shares: Vec<(usize, f64)> = Vec::new();
        for &i in &order[t] {
            if left <= 0.0 {
                break;
            }
            let routed = left.min(spare[t][i]);
            if routed > 0.0 {
                spare[t][i] -= routed;
                incoming[t][i] += routed;
                shares.push((i, routed));
                left -= routed;
            }
        }
        let mut overflow = 0.0;
        if left > 1e-9 {
            overflow = left;
            let total: f64 = placements[t].iter().map(|p| p.capacity_qps.max(0.0)).sum();
            for (i, p) in placements[t].iter().enumerate() {
                let extra = if total > 0.0 {
                    left * p.capacity_qps.max(0.0) / total
                } else {
                    left / placements[t].len().max(1) as f64
                };
                incoming[t][i] += extra;
                match shares.iter_mut().find(|s| s.0 == i) {
                    Some(s) => s.1 += extra,
                    None => shares.push((i, extra)),
                }
            }
        }
        let mut table = Table::new(shares, &placements[t], outgoing);
        table.overflow_qps = overflow;
        table
    };

    let frontend = if n > 0 {
        fill(0, demand_qps * branch(0), &mut spare, &mut incoming)
    } else {
        Table::default()
    };
    let mut tables: Vec<Vec<Table>> = (0..n)
        .map(
            |t| match problem.nodes.get(t).and_then(|nd| nd.parents.first()) {
                Some(&p) if t > 0 && p < n => vec![Table::default(); placements[p].len()],
                _ => Vec::new(),
            },
        )
        .collect();
    let mut idle: Vec<(usize, usize)> = Vec::new();
    for t in 0..n {
        for &i in &order[t] {
            let out = incoming[t][i] * placements[t][i].factor;
            for &c in &children[t] {
                if out * branch(c) <= 0.0 {
                    idle.push((c, i));
                    continue;
                }
                let table = fill(c, out * branch(c), &mut spare, &mut incoming);
                tables[c][i] = table;
            }
        }
    }
    for (c, i) in idle {
        let by_spare: Vec<(usize, f64)> = spare[c].iter().copied().enumerate().collect();
        let shares = if by_spare.iter().any(|s| s.1 > 0.0) {
            by_spare
        } else {
            placements[c]
                .iter()
                .enumerate()
                .map(|(j, p)| (j, p.capacity_qps.max(0.0)))
                .collect()
        };
        tables[c][i] = Table::new(shares, &placements[c], 0.0);
    }
    RoutingTables {
        frontend,
        tables,
        incoming_qps: incoming,
        spare_qps: spare,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use infaas_core::HardwareKind;

    use super::*;
    use crate::loki::{Mode, SolveStatus};
    use crate::pipeline::tests::{batch_options, node};

    fn placement(option: usize, accuracy: f64, capacity_qps: f64) -> Placement {
        Placement {
            option,
            group: option as u32,
            pool: "gpu".into(),
            instances: 1,
            batch: 1,
            budget_ms: 10.0,
            capacity_qps,
            load_qps: 0.0,
            accuracy,
            factor: 1.0,
        }
    }

    /// Root: A (0.8, 100 q/s) listed before B (0.9, 60 q/s); child: D (0.7, 100), C (0.95, 50).
    fn fixture() -> (LokiProblem, Allocation) {
        let o = batch_options("m", HardwareKind::Gpu, 0.9, 1, 10.0, 0.0, 0);
        let nodes = vec![
            node("root", &[], 1.0, o.clone()),
            node("child", &[0], 1.0, o),
        ];
        let p = LokiProblem::new(nodes, 100.0, 100.0, [("gpu", 4)]);
        let a = Allocation {
            mode: Mode::AccuracyScaling,
            status: SolveStatus::Optimal,
            tasks: vec![
                vec![placement(0, 0.8, 100.0), placement(1, 0.9, 60.0)],
                vec![placement(2, 0.7, 100.0), placement(3, 0.95, 50.0)],
            ],
            paths: Vec::new(),
            accuracy: 0.0,
            relative_accuracy: 0.0,
            served_fraction: 1.0,
            demand_qps: 100.0,
            workers_used: BTreeMap::new(),
            solve_ms: 0.0,
        };
        (p, a)
    }

    fn probabilities(t: &Table) -> Vec<(usize, f64)> {
        t.entries
            .iter()
            .map(|e| (e.placement, (e.probability * 1e9).round() / 1e9))
            .collect()
    }

    #[test]
    fn most_accurate_first_fills_the_most_accurate_variants_first() {
        let (p, a) = fixture();
        let r = most_accurate_first(&p, &a, 100.0);
        // Frontend: B (0.9) is filled to its 60 q/s, then A takes the other 40.
        assert_eq!(probabilities(&r.frontend), vec![(1, 0.6), (0, 0.4)]);
        // B's 60 go to C (0.95) up to its 50, then 10 to D; A's 40 all go to D.
        let b = probabilities(&r.tables[1][1]);
        assert_eq!(b.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 0]);
        assert!((b[0].1 - 50.0 / 60.0).abs() < 1e-8 && (b[1].1 - 10.0 / 60.0).abs() < 1e-8);
        assert_eq!(probabilities(&r.tables[1][0]), vec![(0, 1.0)]);
        assert_eq!(r.incoming_qps[1], vec![50.0, 50.0]);
        assert_eq!(r.spare_qps[1], vec![50.0, 0.0]);
        for t in [&r.frontend, &r.tables[1][0], &r.tables[1][1]] {
            assert!((t.total_probability() - 1.0).abs() < 1e-12);
            assert_eq!(t.overflow_qps, 0.0);
        }
        // The per-query pick follows the cumulative probabilities.
        assert_eq!(r.pick(0, None, 0.59).map(|e| e.placement), Some(1));
        assert_eq!(r.pick(0, None, 0.61).map(|e| e.placement), Some(0));
        assert_eq!(r.pick(1, Some(1), 0.5).map(|e| e.option), Some(3));
        assert_eq!(r.pick(1, Some(1), 0.9).map(|e| e.option), Some(2));
        assert_eq!(r.pick(1, Some(0), 0.999).map(|e| e.placement), Some(0));
        assert!(r.pick(1, None, 0.5).is_none());
        assert!(r.pick(7, Some(0), 0.5).is_none());
    }

    #[test]
    fn demand_beyond_capacity_still_routes_every_request() {
        let (p, a) = fixture();
        let r = most_accurate_first(&p, &a, 400.0);
        assert!((r.frontend.overflow_qps - 240.0).abs() < 1e-9);
        for t in std::iter::once(&r.frontend).chain(r.tables[1].iter()) {
            assert!((t.total_probability() - 1.0).abs() < 1e-12);
        }
        // With no traffic at all every table still sums to 1 (by spare capacity).
        let r = most_accurate_first(&p, &a, 0.0);
        for t in &r.tables[1] {
            assert!((t.total_probability() - 1.0).abs() < 1e-12);
            assert_eq!(t.entries[0].placement, 0);
        }
    }

    #[test]
    fn tables_of_an_allocation_sum_to_one_and_honour_accuracy_order() {
        use crate::loki::{allocate, LokiSettings};
        let fam = |accs: &[f64]| -> Vec<crate::pipeline::PlanOption> {
            accs.iter()
                .enumerate()
                .flat_map(|(m, &acc)| {
                    let base = 4.0 + 12.0 * m as f64;
                    batch_options(
                        &format!("m{m}"),
                        HardwareKind::Gpu,
                        acc,
                        8,
                        base,
                        base / 4.0,
                        m as u32,
                    )
                })
                .collect()
        };
        let nodes = vec![
            node("a", &[], 1.0, fam(&[0.6, 0.7, 0.8])),
            node("b", &[0], 1.0, fam(&[0.5, 0.75, 0.9])),
        ];
        let p = LokiProblem::new(nodes, 900.0, 200.0, [("gpu", 8)]);
        let a = allocate(&p, &LokiSettings::default()).expect("allocates");
        assert_eq!(a.mode, Mode::AccuracyScaling);
        let r = most_accurate_first(&p, &a, p.demand_qps * a.served_fraction);
        for t in std::iter::once(&r.frontend).chain(r.tables[1].iter()) {
            assert!((t.total_probability() - 1.0).abs() < 1e-9);
        }
        // A less accurate placement only gets traffic once every more accurate one is full.
        for (t, ps) in a.tasks.iter().enumerate() {
            for (i, pi) in ps.iter().enumerate() {
                if r.incoming_qps[t][i] <= 1e-9 {
                    continue;
                }
                for (j, pj) in ps.iter().enumerate() {
                    if pj.accuracy > pi.accuracy {
                        assert!(r.spare_qps[t][j] < 1e-6, "task {t}: {j} before {i}");
                    }
                }
            }
        }
    }
}
