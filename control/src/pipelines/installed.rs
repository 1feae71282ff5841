//! The accuracy-scaling allocation installed for a pipeline ([`Installed`]): what its online
//! queries are routed by, and what the API shows of it. State only: [`super::overload`] makes
//! and installs it, [`super::run`] routes by it.

use std::collections::HashMap;

use infaas_scheduler::loki::{self, Allocation, Alternative, LokiProblem, RoutingTables};
use serde::{Deserialize, Serialize};

use super::prepared::Prepared;

/// An allocation installed for a pipeline: what queries are routed by.
#[derive(Debug)]
pub struct Installed {
    pub problem: LokiProblem,
    pub allocation: Allocation,
    pub tables: RoutingTables,
    /// Per task (the problem's node), the pipeline node it is.
    pub nodes: Vec<usize>,
    /// Per pipeline node, its task.
    pub task_of: HashMap<usize, usize>,
    /// Per task, its children tasks.
    pub children: Vec<Vec<usize>>,
    /// Backup placements with spare capacity, every task's, fastest first.
    pub alternatives: Vec<Alternative>,
    pub at_ms: i64,
}

impl Installed {
    /// The model placement `p` of task `t` runs.
    pub fn model(&self, t: usize, p: usize) -> Option<&str> {
        let placement = self.allocation.tasks.get(t)?.get(p)?;
        let node = self.problem.nodes.get(t)?;
        Some(node.options.get(placement.option)?.variant.model.as_str())
    }

    /// The latency budget of placement `p` of task `t`, ms.
    pub fn budget_ms(&self, t: usize, p: usize) -> f64 {
        self.allocation
            .tasks
            .get(t)
            .and_then(|ps| ps.get(p))
            .map_or(0.0, |x| x.budget_ms)
    }

    /// One draw of a query's placements, task by task (each after its parent's), from the
    /// routing tables; `u` gives a uniform draw per task.
    pub fn draw(&self, mut u: impl FnMut() -> f64) -> Vec<Option<usize>> {
        let mut picks: Vec<Option<usize>> = vec![None; self.problem.nodes.len()];
        for t in 0..self.problem.nodes.len() {
            let upstream = self.problem.nodes[t]
                .parents
                .first()
                .and_then(|&p| picks.get(p).copied().flatten());
            picks[t] = self.tables.pick(t, upstream, u()).map(|p| p.placement);
        }
        picks
    }

    /// The tasks from `t` to a sink along the children with the largest budgets (the chain a
    /// query's deadline must still hold), with their drawn placements.
    pub fn chain(&self, t: usize, picks: &[Option<usize>]) -> Vec<(usize, usize)> {
        fn rest(i: &Installed, t: usize, picks: &[Option<usize>]) -> f64 {
            let own = picks
                .get(t)
                .copied()
                .flatten()
                .map_or(0.0, |p| i.budget_ms(t, p));
            own + i.children[t]
                .iter()
                .map(|&c| rest(i, c, picks))
                .fold(0.0, f64::max)
        }
        let mut out = Vec::new();
        let mut at = Some(t);
        while let Some(k) = at {
            if let Some(p) = picks.get(k).copied().flatten() {
                out.push((k, p));
            }
            at = self.children[k]
                .iter()
                .copied()
                .max_by(|&a, &b| rest(self, a, picks).total_cmp(&rest(self, b, picks)));
        }
        out
    }
}

/// What `GET /v1/pipelines/{name}` shows of the installed allocation.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadStatus {
    /// `hardware_scaling` or `accuracy_scaling`.
    pub mode: String,
    /// The demand planned for: the manager's demand over its target utilisation
    /// ([`ManagerSettings::utilisation`]).
    pub demand_qps: f64,
    /// Expected end-to-end accuracy of the allocation, and relative to the most accurate one.
    pub accuracy: f64,
    pub relative_accuracy: f64,
    pub served_fraction: f64,
    pub solve_ms: f64,
    pub status: String,
    /// Per node: its placements (model, instances, batch, latency budget, share of the load).
    pub nodes: Vec<OverloadNode>,
    pub at_ms: i64,
}

/// One node of [`OverloadStatus`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadNode {
    pub name: String,
    pub placements: Vec<OverloadPlacement>,
}

/// One placement of [`OverloadNode`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OverloadPlacement {
    pub model: String,
    pub variant: String,
    pub instances: usize,
    pub batch: usize,
    pub budget_ms: f64,
    pub accuracy: f64,
    pub load_qps: f64,
    pub capacity_qps: f64,
}

impl Installed {
    pub fn status(&self, prepared: &Prepared) -> OverloadStatus {
        let a = &self.allocation;
        OverloadStatus {
            mode: match a.mode {
                loki::Mode::HardwareScaling => "hardware_scaling",
                loki::Mode::AccuracyScaling => "accuracy_scaling",
            }
            .to_string(),
            demand_qps: a.demand_qps,
            accuracy: a.accuracy,
            relative_accuracy: a.relative_accuracy,
            served_fraction: a.served_fraction,
            solve_ms: a.solve_ms,
            status: format!("{:?}", a.status),
            nodes: self
                .nodes
                .iter()
                .enumerate()
                .map(|(t, &k)| OverloadNode {
                    name: prepared.pipeline.spec.nodes[k].name.clone(),
                    placements: a.tasks[t]
                        .iter()
                        .map(|p| {
                            let v = &self.problem.nodes[t].options[p.option].variant;
                            OverloadPlacement {
                                model: v.model.clone(),
                                variant: v.name.clone(),
                                instances: p.instances,
                                batch: p.batch,
                                budget_ms: p.budget_ms,
                                accuracy: p.accuracy,
                                load_qps: p.load_qps,
                                capacity_qps: p.capacity_qps,
                            }
                        })
                        .collect(),
                })
                .collect(),
            at_ms: self.at_ms,
        }
    }
}
