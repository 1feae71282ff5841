//! The tuner loop: every [`TUNER_PERIOD`] (1 s), for every pipeline whose plan was applied on
//! this controller, InferLine's reactive scaler ([`infaas_scheduler::pipeline::Tuner`])
//! compares the traffic envelope of the pipeline's last 60 s of arrivals ([`TUNER_WINDOW_MS`],
//! both ends included) with the planned one and sets each node's replicas: out at once when the
//! observed envelope exceeds the plan, in only after the load has stayed low for the
//! stabilisation period (15 s), never below the plan. Replicas are instances of the node's
//! planned variant on distinct workers (as many as can host it). When the envelope has exceeded
//! the plan for longer than the re-plan period (300 s), the pipeline is planned again in the
//! background on its recorded arrivals, and applied. An applied plan keeps its tuner's
//! configuration, so a restarted controller tunes again.

use std::time::Duration;

use infaas_scheduler::pipeline::tuner::{TunerAction, TUNER_PERIOD_MS, TUNER_WINDOW_MS};
use infaas_store::db::NewScalingEvent;
use tokio_util::sync::CancellationToken;

use super::plan::{plan, resume_tuners, PlanRequest};
use super::replicas::{provision, replicas_of, served_named, shrink};
pub use super::tuners::{Decision, Tuners};
use crate::platform::ControlPlane;

/// How often the tuner decides: [`TUNER_PERIOD_MS`], at which the simulator's replay decides
/// too.
pub const TUNER_PERIOD: Duration = Duration::from_millis(TUNER_PERIOD_MS as u64);

/// Runs the tuner loop until `shutdown`.
pub async fn run(state: ControlPlane, shutdown: CancellationToken) {
    resume_tuners(&state).await;
    let mut tick = tokio::time::interval(TUNER_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = infaas_core::time::now_ms() as f64;
        let decisions = state.pipelines.tuners.decide(now, |tenant, name| {
            state
                .pipelines
                .arrivals_at(tenant, name, now, TUNER_WINDOW_MS)
        });
        for d in decisions {
            for (variant, target) in &d.targets {
                if !state.leadership.leads_now() {
                    // Another replica may lead by now; it tunes from what the workers report.
                    break;
                }
                let have = replicas_of(&state.cluster, &d.tenant, variant);
                if *target > have {
                    provision(&state.cluster, &d.tenant, variant, *target).await;
                    let after = replicas_of(&state.cluster, &d.tenant, variant);
                    record(
                        &state,
                        &d,
                        variant,
                        "pipeline-scale-out",
                        have,
                        after,
                        *target,
                    )
                    .await;
                } else if *target < have && d.action == TunerAction::ScaleIn {
                    shrink(&state.cluster, &d.tenant, variant, *target).await;
                    let after = replicas_of(&state.cluster, &d.tenant, variant);
                    record(
                        &state,
                        &d,
                        variant,
                        "pipeline-scale-in",
                        have,
                        after,
                        *target,
                    )
                    .await;
                }
            }
            if d.replan {
                let (state, tenant, name) = (state.clone(), d.tenant.clone(), d.name.clone());
                tokio::spawn(async move {
                    let req = PlanRequest {
                        apply: true,
                        ..Default::default()
                    };
                    match plan(&state, &tenant, &name, req).await {
                        Ok(r) => {
                            tracing::info!(pipeline = %name, cost_per_hour = r.cost_per_hour, "re-planned after the load drifted from the plan")
                        }
                        Err(e) => {
                            tracing::warn!(pipeline = %name, error = %e, "re-planning after drift failed")
                        }
                    }
                });
            }
        }
    }
}

async fn record(
    state: &ControlPlane,
    d: &Decision,
    variant: &str,
    action: &str,
    before: usize,
    after: usize,
    target: usize,
) {
    if before == after {
        return;
    }
    metrics::counter!("infaas_pipeline_tuner_actions_total", "pipeline" => d.name.clone(), "action" => action.to_string())
        .increment(1);
    let served = served_named(&state.cluster, &d.tenant, variant);
    let event = NewScalingEvent {
        tenant_id: Some(d.tenant.clone()),
        app: served.as_ref().map(|s| s.entry.app.clone()),
        variant_id: served.as_ref().map(|s| s.entry.variant.id.clone()),
        worker: None,
        action: action.to_string(),
        reason: format!(
            "pipeline '{}': the tuner set {target} replicas of {variant} ({before} -> {after}) from the traffic envelope of the last 60 s",
            d.name
        ),
        cost_before_per_s: 0.0,
        cost_after_per_s: 0.0,
        created_at_ms: infaas_core::time::now_ms(),
        fenced: true,
    };
    if let Err(e) = state.db.add_scaling_event(&event).await {
        tracing::warn!(error = %e, "cannot record a tuner action");
    }
}
