//! The evaluation: a catalogue pipeline planned on a prefix of a trace and replayed on all of
//! it under InferLine (plan + tuner) and the baselines.

use std::time::Instant;

use infaas_scheduler::pipeline::{
    estimated_accuracy, node_plans, plan, NodeConfig, NodePlan, PipelinePlan, PlanError,
    Provisioning, TunerConfig,
};
use infaas_scheduler::Prices;
use infaas_sim::catalogue::Profile;
use infaas_sim::pipeline::{replay, ReplayOptions, ReplayReport, TraceEstimator};
use serde::Serialize;

use super::baselines::{cg_peak, per_stage};
use super::catalogue::{
    best_accuracy, problem_for, CataloguePipeline, OptionSettings, PipelineError,
};

/// How [`evaluate`] runs.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalSettings {
    pub slo_ms: f64,
    pub percentile: f64,
    /// An absolute floor of the estimated end-to-end accuracy; `None`: `accuracy_fraction` of
    /// the best reachable.
    pub min_accuracy: Option<f64>,
    pub accuracy_fraction: f64,
    /// The planning trace: the first `plan_s` seconds of the live arrivals.
    pub plan_s: f64,
    /// The plan is made for the planning trace at `1 + load_margin` times its rate (its
    /// arrival times divided by that), and the tuner's planned envelope is that trace's: room
    /// for a burst that lasts longer than in the sample while new replicas load.
    pub load_margin: f64,
    pub max_replicas: usize,
    pub seed: u64,
    /// The tuner's max-provisioning ratio and scale-out headroom.
    pub provisioning: Provisioning,
    pub headroom: f64,
    pub prices: Prices,
    pub options: OptionSettings,
}

impl Default for EvalSettings {
    /// SLO 300 ms (the Proteus traces') at P99.5, accuracy floor 90% of the best reachable,
    /// planning on the first 60 s with a 10% load margin, the tuner's timescale provisioning
    /// with headroom 1.2, at most 256 replicas a node, the default prices and options.
    fn default() -> Self {
        EvalSettings {
            slo_ms: 300.0,
            percentile: 99.5,
            min_accuracy: None,
            accuracy_fraction: 0.9,
            plan_s: 60.0,
            load_margin: 0.1,
            max_replicas: 256,
            seed: 1,
            provisioning: Provisioning::Timescale,
            headroom: 1.2,
            prices: Prices::default(),
            options: OptionSettings::default(),
        }
    }
}

/// One policy's row of the evaluation (SIMULATED).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineRow {
    pub pipeline: String,
    pub policy: String,
    pub slo_attainment: f64,
    pub p99_ms: f64,
    /// Mean price per hour over the replay.
    pub cost_per_hour: f64,
    /// `cost_per_hour` over InferLine's.
    pub cost_ratio: f64,
    pub planner_ms: f64,
    pub estimates: usize,
    pub accuracy: f64,
    pub note: String,
    /// The configuration replayed (as planned, before the tuner).
    pub nodes: Vec<NodePlan>,
    pub replay: ReplayReport,
}

/// One pipeline's evaluation.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PipelineEval {
    pub pipeline: String,
    pub description: String,
    pub slo_ms: f64,
    pub percentile: f64,
    pub min_accuracy: f64,
    pub planning_queries: usize,
    pub planning_s: f64,
    pub live_queries: usize,
    pub live_s: f64,
    /// InferLine's plan on the planning trace.
    pub plan: PipelinePlan,
    pub rows: Vec<PipelineRow>,
    /// Policies that could not be configured, and why.
    pub failed: Vec<(String, String)>,
}

/// Plans `spec` on the first `plan_s` seconds of `live_ms` (at `1 + load_margin` times their
/// rate) and replays the whole of `live_ms` under four policies (SIMULATED):
/// - `inferline`: the joint plan, the tuner driving replicas;
/// - `inferline-plan`: the joint plan alone (no tuner), to show what the tuner adds;
/// - `per-stage`: [`per_stage`] (each node alone with an equal share of the SLO and the joint
///   plan's accuracies as floors), the same tuner;
/// - `cg-peak`: [`cg_peak`], static, provisioned for the peak of the *live* trace (an oracle:
///   it knows the whole trace, which InferLine's planner does not; the paper's CG baselines
///   size on the sample and tune as a unit, which is not simulated here).
///
/// The cost ratios are each policy's mean price per hour over InferLine's.
pub fn evaluate(
    spec: &CataloguePipeline,
    catalogue: &[Profile],
    live_ms: &[f64],
    s: &EvalSettings,
) -> Result<PipelineEval, PipelineError> {
    if live_ms.is_empty() {
        return Err(PipelineError::EmptyTrace);
    }
    let mut problem = problem_for(spec, catalogue, s.slo_ms, &s.options)?;
    problem.percentile = s.percentile;
    problem.prices = s.prices;
    problem.max_replicas = s.max_replicas;
    let min_accuracy = s
        .min_accuracy
        .unwrap_or_else(|| s.accuracy_fraction * best_accuracy(&problem));
    problem.min_accuracy = Some(min_accuracy);
    let start = live_ms[0];
    let factor = 1.0 + s.load_margin.max(0.0);
    let planning: Vec<f64> = live_ms
        .iter()
        .copied()
        .take_while(|&t| t < start + s.plan_s * 1e3)
        .map(|t| start + (t - start) / factor)
        .collect();
    let fail = |policy: &str, source: PlanError| PipelineError::Plan {
        pipeline: spec.name.into(),
        policy: policy.into(),
        source,
    };
    let started = Instant::now();
    let mut estimator = TraceEstimator::new(planning.clone(), s.seed);
    let joint = plan(&problem, &mut estimator).map_err(|e| fail("inferline", e))?;
    let planner_ms = started.elapsed().as_secs_f64() * 1e3;

    let tuner_for = |configs: &[NodeConfig]| {
        let mut t = TunerConfig::from_plan(&problem, configs, &planning);
        t.provisioning = s.provisioning;
        t.headroom = s.headroom;
        t
    };
    let run = |policy: &str, configs: &[NodeConfig], tuner: Option<TunerConfig>| {
        replay(
            &problem,
            configs,
            live_ms,
            &ReplayOptions {
                policy: policy.into(),
                tuner,
                tick_ms: infaas_scheduler::pipeline::tuner::TUNER_PERIOD_MS,
                seed: s.seed,
            },
        )
    };
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    let mut push = |policy: &str,
                    configs: &[NodeConfig],
                    replay: ReplayReport,
                    planner_ms: f64,
                    estimates: usize,
                    note: String| {
        rows.push(PipelineRow {
            pipeline: spec.name.into(),
            policy: policy.into(),
            slo_attainment: replay.slo_attainment,
            p99_ms: replay.p99_ms,
            cost_per_hour: replay.cost_per_hour,
            cost_ratio: f64::NAN,
            planner_ms,
            estimates,
            accuracy: estimated_accuracy(&problem, configs),
            note,
            nodes: node_plans(&problem, configs),
            replay,
        });
    };
    let describe = |configs: &[NodeConfig]| {
        node_plans(&problem, configs)
            .iter()
            .map(|n| format!("{}x{}", n.replicas, n.variant))
            .collect::<Vec<_>>()
            .join(" -> ")
    };
    push(
        "inferline",
        &joint.configs,
        run("inferline", &joint.configs, Some(tuner_for(&joint.configs))),
        planner_ms,
        joint.estimates,
        describe(&joint.configs),
    );
    push(
        "inferline-plan",
        &joint.configs,
        run("inferline-plan", &joint.configs, None),
        planner_ms,
        joint.estimates,
        "the plan, no tuner".into(),
    );
    match per_stage(&problem, &joint.configs, &planning, s.seed) {
        Ok(b) => push(
            "per-stage",
            &b.configs,
            run("per-stage", &b.configs, Some(tuner_for(&b.configs))),
            b.planner_ms,
            b.estimates,
            format!("{}: {}", b.note, describe(&b.configs)),
        ),
        Err(e) => failed.push(("per-stage".to_string(), e.to_string())),
    }
    match cg_peak(&problem, &joint.configs, live_ms) {
        Some(b) => push(
            "cg-peak",
            &b.configs,
            run("cg-peak", &b.configs, None),
            b.planner_ms,
            b.estimates,
            b.note,
        ),
        None => failed.push((
            "cg-peak".to_string(),
            "no hardware kind runs every node's model within the SLO".to_string(),
        )),
    }
    let base = rows
        .first()
        .map_or(f64::NAN, |r: &PipelineRow| r.cost_per_hour);
    for r in &mut rows {
        r.cost_ratio = r.cost_per_hour / base;
    }
    Ok(PipelineEval {
        pipeline: spec.name.into(),
        description: spec.description.into(),
        slo_ms: s.slo_ms,
        percentile: s.percentile,
        min_accuracy,
        planning_queries: planning.len(),
        planning_s: s.plan_s,
        live_queries: live_ms.len(),
        live_s: (live_ms[live_ms.len() - 1] - start) / 1e3,
        plan: joint,
        rows,
        failed,
    })
}
