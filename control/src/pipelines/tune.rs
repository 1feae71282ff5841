//! The tuner loop: once a second, for every pipeline whose plan was applied on this
//! controller, InferLine's reactive scaler ([`infaas_scheduler::pipeline::Tuner`]) compares
//! the traffic envelope of the pipeline's last 60 s of arrivals with the planned one and sets
//! each node's replicas: out at once when the observed envelope exceeds the plan, in only after
//! the load has stayed low for the stabilisation period (15 s), never below the plan. Replicas
//! are instances of the node's planned variant on distinct workers (as many as can host it).
//! When the envelope has exceeded the plan for longer than the re-plan period (300 s), the
//! pipeline is planned again in the background on its recorded arrivals, and applied. An
//! applied plan keeps its tuner's configuration, so a restarted controller tunes again.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use infaas_scheduler::pipeline::tuner::TunerAction;
use infaas_scheduler::pipeline::Tuner;
use infaas_store::db::NewScalingEvent;
use tokio_util::sync::CancellationToken;

use crate::platform::ControlPlane;

/// How often the tuner decides.
pub const TUNER_PERIOD: Duration = Duration::from_secs(1);

/// A tuned pipeline: its tuner and the planned variant of each plan node.
struct Tuned {
    tuner: Tuner,
    variants: Vec<String>,
    replanning: bool,
}

/// The tuners of the pipelines planned on this controller.
#[derive(Default)]
pub struct Tuners {
    inner: Mutex<HashMap<(String, String), Tuned>>,
}

impl std::fmt::Debug for Tuners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tuners").finish_non_exhaustive()
    }
}

impl Tuners {
    /// Starts (or restarts) tuning a pipeline from its applied plan.
    pub fn install(&self, tenant: &str, name: &str, tuner: Tuner, variants: Vec<String>) {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.insert(
            (tenant.to_string(), name.to_string()),
            Tuned {
                tuner,
                variants,
                replanning: false,
            },
        );
    }

    pub fn remove(&self, tenant: &str, name: &str) {
        let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.remove(&(tenant.to_string(), name.to_string()));
    }

    /// The current target replicas per plan node, if the pipeline is tuned here.
    pub fn targets(&self, tenant: &str, name: &str) -> Option<Vec<usize>> {
        let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        map.get(&(tenant.to_string(), name.to_string()))
            .map(|t| t.tuner.replicas().to_vec())
    }
}

/// One decision for every tuned pipeline: the replicas to load or unload, and re-plans.
struct Decision {
    tenant: String,
    name: String,
    action: TunerAction,
    targets: Vec<(String, usize)>,
    replan: bool,
}

fn decide(state: &ControlPlane) -> Vec<Decision> {
    let now = infaas_core::time::now_ms() as f64;
    let keys: Vec<(String, String)> = {
        let map = state
            .pipelines
            .tuners
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        map.keys().cloned().collect()
    };
    let mut out = Vec::new();
    for (tenant, name) in keys {
        let arrivals = state.pipelines.arrivals(&tenant, &name, 60_000.0);
        let mut map = state
            .pipelines
            .tuners
            .inner
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let Some(t) = map.get_mut(&(tenant.clone(), name.clone())) else {
            continue;
        };
        let targets = t.tuner.decide(now, &arrivals);
        let replan = t.tuner.drift() && !t.replanning;
        if replan {
            t.replanning = true;
        }
        out.push(Decision {
            tenant,
            name,
            action: t.tuner.action(),
            targets: t.variants.iter().cloned().zip(targets).collect(),
            replan,
        });
    }
    out
}

/// Runs the tuner loop until `shutdown`.
pub async fn run(state: ControlPlane, shutdown: CancellationToken) {
    super::plan::resume_tuners(&state).await;
    let mut tick = tokio::time::interval(TUNER_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        for d in decide(&state) {
            for (variant, target) in &d.targets {
                let have = super::plan::replicas_of(&state, &d.tenant, variant);
                if *target > have {
                    super::plan::provision(&state, &d.tenant, variant, *target).await;
                    let after = super::plan::replicas_of(&state, &d.tenant, variant);
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
                    super::plan::shrink(&state, &d.tenant, variant, *target).await;
                    let after = super::plan::replicas_of(&state, &d.tenant, variant);
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
                    let req = super::plan::PlanRequest {
                        apply: true,
                        ..Default::default()
                    };
                    match super::plan::plan(&state, &tenant, &name, req).await {
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
    let served = super::plan::served_named(state, &d.tenant, variant);
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
