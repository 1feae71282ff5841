//! Storing scaling decisions (`scaling_events`), which `GET /v1/apps/{app}/scaling-events`
//! and the dashboard's Scaling page read.

use infaas_core::time::now_ms;
use infaas_store::{Db, NewScalingEvent};

use super::book::AppKey;

/// Who decided an action: a leader loop (its record is fenced by the leader lease) or the
/// query path of any replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecidedBy {
    Leader,
    QueryPath,
}

/// Stores one event; a store failure is logged (scaling goes on without its record).
#[allow(clippy::too_many_arguments)]
pub async fn record(
    by: DecidedBy,
    db: &Db,
    app: Option<&AppKey>,
    variant_id: Option<&str>,
    worker: Option<&str>,
    action: &str,
    reason: &str,
    cost_before_per_s: f64,
    cost_after_per_s: f64,
) {
    let event = NewScalingEvent {
        tenant_id: app.map(|a| a.0.clone()),
        app: app.map(|a| a.1.clone()),
        variant_id: variant_id.map(str::to_string),
        worker: worker.map(str::to_string),
        action: action.to_string(),
        reason: reason.to_string(),
        cost_before_per_s: finite(cost_before_per_s),
        cost_after_per_s: finite(cost_after_per_s),
        created_at_ms: now_ms(),
        fenced: by == DecidedBy::Leader,
    };
    if let Err(e) = db.add_scaling_event(&event).await {
        tracing::error!(error = %e, %action, "cannot store a scaling event");
    }
}

fn finite(x: f64) -> f64 {
    if x.is_finite() {
        x
    } else {
        0.0
    }
}
