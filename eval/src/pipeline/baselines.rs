//! The baselines InferLine is compared with: per-stage planning and CG-Peak.

use std::time::Instant;

use infaas_scheduler::pipeline::{
    cost_per_hour, option_throughput_per_s, plan, reach_probabilities, NodeConfig, PlanError,
    PlanNode, PlanOption, PlanProblem,
};
use infaas_sim::pipeline::TraceEstimator;

/// A baseline's configuration and what making it took.
#[derive(Debug, Clone, PartialEq)]
pub struct Baseline {
    pub configs: Vec<NodeConfig>,
    pub planner_ms: f64,
    pub estimates: usize,
    /// What the baseline is, in words (e.g. CG-Peak's hardware, batch and units).
    pub note: String,
}

/// The per-stage baseline: every node planned alone by the same planner (on the same
/// planning arrivals, thinned to its reach) with an equal share `slo / depth` of the SLO and,
/// as its accuracy floor, the accuracy `reference` chose for it (so the end-to-end accuracy
/// is the same), then combined.
pub fn per_stage(
    problem: &PlanProblem,
    reference: &[NodeConfig],
    planning_ms: &[f64],
    seed: u64,
) -> Result<Baseline, PlanError> {
    let started = Instant::now();
    let reach = reach_probabilities(problem);
    let share = problem.slo_ms / problem.depth().max(1) as f64;
    let mut configs = Vec::new();
    let mut estimates = 0;
    for (m, node) in problem.nodes.iter().enumerate() {
        let floor = reference
            .get(m)
            .and_then(|c| node.options.get(c.option))
            .map(|o| o.variant.accuracy.powf(reach[m]));
        let single = PlanProblem {
            nodes: vec![PlanNode {
                name: node.name.clone(),
                parents: Vec::new(),
                branch_probability: reach[m],
                options: node.options.clone(),
            }],
            slo_ms: share,
            min_accuracy: floor.map(|f| f - 1e-12),
            max_cost_per_hour: None,
            measured_accuracy: None,
            ..problem.clone()
        };
        let mut e = TraceEstimator::new(planning_ms.to_vec(), seed);
        let p = plan(&single, &mut e)?;
        estimates += p.estimates;
        configs.push(p.configs[0]);
    }
    Ok(Baseline {
        configs,
        planner_ms: started.elapsed().as_secs_f64() * 1e3,
        estimates,
        note: format!("each node alone with {share:.0} ms"),
    })
}

/// InferLine's coarse-grained baseline provisioned for the peak (CG-Peak): the pipeline as
/// one unit on one kind of hardware (every node on the model `reference` chose for it, so the
/// accuracy is the same), with the largest batch size common to all nodes whose batch
/// latency along the longest path (profiled p99) fits the SLO, replicated as a whole for the
/// peak rate of `peak_ms` (the highest rate in a sliding window as long as the SLO). The
/// cheapest hardware that can do it wins.
pub fn cg_peak(
    problem: &PlanProblem,
    reference: &[NodeConfig],
    peak_ms: &[f64],
) -> Option<Baseline> {
    let started = Instant::now();
    let reach = reach_probabilities(problem);
    let peak = infaas_scheduler::pipeline::envelope(peak_ms, &[problem.slo_ms])[0];
    let models: Vec<&str> = problem
        .nodes
        .iter()
        .zip(reference)
        .map(|(n, c)| {
            n.options
                .get(c.option)
                .map_or("", |o| o.variant.model.as_str())
        })
        .collect();
    // Hardware kinds are told apart by the options' groups' names (model@accelerator).
    let accel_of = |o: &PlanOption| -> String {
        o.variant
            .name
            .split('@')
            .nth(1)
            .and_then(|s| s.split('#').next())
            .unwrap_or(o.variant.hardware.as_str())
            .to_string()
    };
    let mut kinds: Vec<String> = problem
        .nodes
        .iter()
        .flat_map(|n| n.options.iter().map(accel_of))
        .collect();
    kinds.sort();
    kinds.dedup();
    let mut best: Option<(f64, Vec<NodeConfig>, String)> = None;
    for kind in &kinds {
        // Per node: its model's options on this hardware, by max batch.
        let per_node: Vec<Vec<(usize, usize)>> = problem
            .nodes
            .iter()
            .enumerate()
            .map(|(m, n)| {
                let mut v: Vec<(usize, usize)> = n
                    .options
                    .iter()
                    .enumerate()
                    .filter(|(_, o)| o.variant.model == models[m] && &accel_of(o) == kind)
                    .map(|(i, o)| (o.variant.max_batch, i))
                    .collect();
                v.sort_unstable();
                v
            })
            .collect();
        if per_node.iter().any(Vec::is_empty) {
            continue;
        }
        let mut batches: Vec<usize> = per_node[0].iter().map(|x| x.0).collect();
        batches.retain(|b| per_node.iter().all(|v| v.iter().any(|x| x.0 == *b)));
        let pick = |b: usize| -> Vec<usize> {
            per_node
                .iter()
                .map(|v| v.iter().find(|x| x.0 == b).map_or(0, |x| x.1))
                .collect()
        };
        let fits = |b: usize| {
            let o = pick(b);
            let w: Vec<f64> = (0..problem.nodes.len())
                .map(|m| problem.nodes[m].options[o[m]].variant.latency_ms(b))
                .collect();
            infaas_scheduler::pipeline::longest_path(problem, &w) <= problem.slo_ms
        };
        let Some(&b) = batches.iter().rev().find(|&&b| fits(b)) else {
            continue;
        };
        let options = pick(b);
        let unit = (0..problem.nodes.len())
            .filter(|&m| reach[m] > 0.0)
            .map(|m| option_throughput_per_s(&problem.nodes[m].options[options[m]]) / reach[m])
            .fold(f64::INFINITY, f64::min);
        if unit.is_nan() || unit <= 0.0 {
            continue;
        }
        let units = ((peak / unit - 1e-9).ceil() as usize).max(1);
        let configs: Vec<NodeConfig> = options
            .iter()
            .map(|&option| NodeConfig {
                option,
                replicas: units,
            })
            .collect();
        let cost = cost_per_hour(problem, &configs);
        if best.as_ref().is_none_or(|b| cost < b.0) {
            best = Some((
                cost,
                configs,
                format!("{kind}, batch {b}, {units} units for {peak:.0} queries/s"),
            ));
        }
    }
    best.map(|(_, configs, note)| Baseline {
        configs,
        planner_ms: started.elapsed().as_secs_f64() * 1e3,
        estimates: 0,
        note,
    })
}
