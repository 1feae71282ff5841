//! The tuners of the pipelines whose plan was applied on this controller: InferLine's reactive
//! scaler per pipeline with its planned variants. State only: the loop that acts on their
//! decisions is [`super::tune`].

use std::collections::HashMap;
use std::sync::Mutex;

use infaas_scheduler::pipeline::tuner::TunerAction;
use infaas_scheduler::pipeline::Tuner;

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

    /// One decision for every tuned pipeline at `now_ms`, from its arrivals over the last
    /// 60 s (`arrivals(tenant, name)`); a pipeline that drifted is marked re-planning.
    pub fn decide(&self, now_ms: f64, arrivals: impl Fn(&str, &str) -> Vec<f64>) -> Vec<Decision> {
        let keys: Vec<(String, String)> = {
            let map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            map.keys().cloned().collect()
        };
        let mut out = Vec::new();
        for (tenant, name) in keys {
            let arrivals = arrivals(&tenant, &name);
            let mut map = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let Some(t) = map.get_mut(&(tenant.clone(), name.clone())) else {
                continue;
            };
            let targets = t.tuner.decide(now_ms, &arrivals);
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
}

/// One decision for every tuned pipeline: the replicas to load or unload, and re-plans.
pub struct Decision {
    pub tenant: String,
    pub name: String,
    pub action: TunerAction,
    pub targets: Vec<(String, usize)>,
    pub replan: bool,
}
