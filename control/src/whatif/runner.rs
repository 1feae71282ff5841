//! Runs in the background: a run waits for one of `whatif.max_parallel_runs` slots, then
//! simulates its policies one after the other on a blocking thread (the simulation is
//! CPU-bound), while its progress is written to the database every half second; it ends
//! `succeeded` with the reports or `failed` with the reason. A deleted run stops after the
//! policy under way and writes nothing more.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use infaas_protocol::v1::{
    WhatIfAppSummary, WhatIfPoint, WhatIfPolicyResult, WhatIfProgress, WhatIfSummary,
};
use infaas_sim::policy::by_name;
use infaas_sim::report::PolicyReport;
use infaas_sim::simulate;
use infaas_store::db::whatif::status;
use serde::Serialize;
use tracing::Instrument;

use super::plan::WhatIfSetup;
pub use super::runs::{Reservation, WhatIfRuns};
use crate::error::Error;
use crate::platform::ControlPlane;

/// How often the progress of a running run is written.
const PROGRESS_PERIOD: Duration = Duration::from_millis(500);

/// `v` as stored JSON.
pub(super) fn to_json<T: Serialize>(v: &T) -> Result<String, Error> {
    serde_json::to_string(v).map_err(Error::internal)
}

/// Starts run `id` in the background.
pub(super) fn start(state: ControlPlane, id: String, plan: WhatIfSetup, reservation: Reservation) {
    let cancel = state.whatif.flag(&id);
    let span = tracing::info_span!("whatif", run = %id);
    tokio::spawn(
        async move {
            let _place = reservation;
            run(&state, &id, plan, &cancel).await;
            state.whatif.forget(&id);
        }
        .instrument(span),
    );
}

async fn run(state: &ControlPlane, id: &str, plan: WhatIfSetup, cancel: &Arc<AtomicBool>) {
    let Some(_slot) = state.whatif.slot().await else {
        return;
    };
    match state.db.start_whatif_run(id).await {
        Ok(true) => {}
        Ok(false) => return, // deleted while it waited
        Err(e) => {
            tracing::error!(error = %e, "cannot start a what-if run");
            return;
        }
    }
    let total = plan.trace.arrivals.len() as u64;
    let progress = Arc::new(Mutex::new(
        plan.policies
            .iter()
            .map(|p| WhatIfProgress {
                policy: p.clone(),
                done: 0,
                total,
            })
            .collect::<Vec<_>>(),
    ));
    tracing::info!(
        queries = total,
        policies = plan.policies.len(),
        variants = plan.variants.len(),
        "SIMULATED what-if run started"
    );
    let sim = {
        let (progress, cancel) = (progress.clone(), cancel.clone());
        tokio::task::spawn_blocking(move || simulate_all(&plan, &progress, &cancel))
    };
    tokio::pin!(sim);
    let read = |p: &Mutex<Vec<WhatIfProgress>>| p.lock().map(|p| p.clone()).unwrap_or_default();
    let mut written = read(&progress);
    let outcome = loop {
        tokio::select! {
            outcome = &mut sim => break outcome,
            _ = tokio::time::sleep(PROGRESS_PERIOD) => {
                let now = read(&progress);
                if now != written {
                    match write_progress(state, id, &now).await {
                        Ok(true) => written = now,
                        // Gone: deleted (or failed by another controller's start).
                        Ok(false) => cancel.store(true, Ordering::Relaxed),
                        Err(e) => tracing::warn!(error = %e, "cannot record a what-if run's progress"),
                    }
                }
            }
        }
    };
    if cancel.load(Ordering::Relaxed) {
        tracing::info!("what-if run deleted while it ran");
        return;
    }
    let progress = to_json(&read(&progress)).unwrap_or_else(|_| "[]".into());
    let (end, error, result) = match outcome.map(|r| {
        r.and_then(|results| {
            to_json(&results).map_err(|e| format!("the results cannot be stored: {e:#}"))
        })
    }) {
        Ok(Ok(results)) => (status::SUCCEEDED, None, Some(results)),
        Ok(Err(e)) => (status::FAILED, Some(e), None),
        Err(e) => (
            status::FAILED,
            Some(format!("the simulation stopped unexpectedly: {e}")),
            None,
        ),
    };
    match &error {
        None => tracing::info!("SIMULATED what-if run succeeded"),
        Some(e) => tracing::warn!(error = %e, "what-if run failed"),
    }
    metrics::counter!("infaas_whatif_runs_total", "status" => end).increment(1);
    if let Err(e) = state
        .db
        .finish_whatif_run(id, end, &progress, error.as_deref(), result.as_deref())
        .await
    {
        tracing::error!(error = %e, "cannot record the end of a what-if run");
    }
}

/// Writes a running run's progress; false when the run is no longer running.
async fn write_progress(
    state: &ControlPlane,
    id: &str,
    progress: &[WhatIfProgress],
) -> Result<bool, Error> {
    Ok(state
        .db
        .set_whatif_progress(id, &to_json(&progress)?)
        .await?)
}

/// Simulates every policy of the plan in turn (on a blocking thread).
fn simulate_all(
    plan: &WhatIfSetup,
    progress: &Mutex<Vec<WhatIfProgress>>,
    cancel: &AtomicBool,
) -> Result<Vec<WhatIfPolicyResult>, String> {
    let mut out = Vec::with_capacity(plan.policies.len());
    for (i, name) in plan.policies.iter().enumerate() {
        if cancel.load(Ordering::Relaxed) {
            return Err("deleted".into());
        }
        let mut policy =
            by_name(name, plan.scaling).ok_or_else(|| format!("unknown policy '{name}'"))?;
        let report = simulate(
            &plan.trace,
            plan.variants.clone(),
            &plan.cluster,
            policy.as_mut(),
            &mut |done, total| {
                if let Ok(mut p) = progress.lock() {
                    if let Some(p) = p.get_mut(i) {
                        (p.done, p.total) = (done as u64, total as u64);
                    }
                }
            },
        )
        .map_err(|e| format!("policy {name}: {e}"))?;
        out.push(result_of(&report));
    }
    Ok(out)
}

/// A policy's report as the API shows it.
pub fn result_of(r: &PolicyReport) -> WhatIfPolicyResult {
    let s = &r.summary;
    WhatIfPolicyResult {
        policy: r.policy.clone(),
        actions_by_kind: r.actions_by_kind.clone(),
        summary: WhatIfSummary {
            queries: s.queries,
            slo_attainment: s.slo_attainment,
            p50_ms: s.p50_ms,
            p99_ms: s.p99_ms,
            cost_usd: s.cost_usd,
            mean_accuracy: s.mean_accuracy,
            dropped: s.dropped,
            actions: s.actions,
            sim_queries_per_s: s.sim_queries_per_s,
        },
        apps: r
            .apps
            .iter()
            .map(|a| WhatIfAppSummary {
                app: a.app.clone(),
                queries: a.queries,
                slo_attainment: a.slo_attainment,
                p99_ms: a.p99_ms,
                mean_accuracy: a.mean_accuracy,
                dropped: a.dropped,
            })
            .collect(),
        series: r
            .series
            .iter()
            .map(|p| WhatIfPoint {
                second: p.second as u64,
                arrivals: p.arrivals,
                slo_attainment: p.slo_attainment,
                p50_ms: p.p50_ms,
                p99_ms: p.p99_ms,
                cost_per_s: p.cost_per_s,
                mean_accuracy: p.mean_accuracy,
                cpu_instances: p.cpu_instances,
                gpu_instances: p.gpu_instances,
                cpu_workers: p.cpu_workers,
                gpu_workers: p.gpu_workers,
                actions: p.actions,
                dropped: p.dropped,
            })
            .collect(),
    }
}
