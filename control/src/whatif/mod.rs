//! What-if planning (SIMULATED): a tenant replays a trace (its recorded traffic, an uploaded
//! CSV trace or a generated workload) on its own applications, with the profiles the
//! platform measured for its variants, under one or more policies of the simulator
//! (`infaas_sim`), and compares what each would have cost and attained.
//!
//! A run is checked in full before it is stored ([`plan`]), then simulated in the background
//! ([`runner`]); the database keeps its request, progress, result or error, so runs outlive
//! the process. A run that a restart interrupted is marked failed when the controller starts.

pub mod plan;
pub mod runner;
pub mod runs;

use infaas_protocol::v1::{
    WhatIfCluster, WhatIfPolicyResult, WhatIfProgress, WhatIfRequest, WhatIfRun, WhatIfTrace,
};
use infaas_store::db::whatif::status;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::platform::ControlPlane;
use plan::{LiveCluster, WhatIfSetup};
use runner::to_json;
pub use runs::{fail_interrupted, WhatIfRuns};

/// The policies a run may compare.
pub use infaas_sim::policy::NAMES as POLICIES;

/// How many runs `GET /v1/whatif` lists (the newest).
pub const LIST_LIMIT: i64 = 100;

/// What a run replays, on what: the stored `request`.
#[derive(Debug, Serialize, Deserialize)]
struct StoredRequest {
    trace: WhatIfTrace,
    policies: Vec<String>,
    cluster: WhatIfCluster,
}

/// Checks a request, stores the run (queued) and starts it in the background.
pub async fn submit(
    state: &ControlPlane,
    tenant: &str,
    req: WhatIfRequest,
) -> Result<WhatIfRun, Error> {
    let policies = plan::policies(&req.policies)?;
    let (cluster, scaling, mut sizing) = plan::cluster(
        &req,
        &live_cluster(state),
        &state.config.autoscale,
        *state.cluster.prices(),
    )?;
    let apps: Vec<String> = state
        .db
        .list_apps(tenant)
        .await?
        .into_iter()
        .map(|(a, _)| a.name)
        .collect();
    let (trace, info) = {
        // Parsing a large CSV or drawing a large workload takes a while: not on the runtime.
        let (state, tenant, apps, source) =
            (state.clone(), tenant.to_string(), apps.clone(), req.trace);
        tokio::task::spawn_blocking(move || {
            plan::trace(&source, &state.config.whatif, &apps, |app, minutes| {
                (
                    state.traffic.export(&tenant, app, minutes),
                    state.traffic.horizon_minutes(),
                )
            })
        })
        .await
        .map_err(Error::internal)??
    };
    if let Err(e) = state.cluster.refresh_catalog().await {
        tracing::warn!(error = %e, "cannot refresh the serving catalog");
    }
    let variants = plan::tenant_variants(&state.cluster.catalog(), tenant);
    plan::check_apps(&trace, &variants, &apps)?;
    sizing.variants = variants.len() as u64;

    let max = state.config.whatif.max_unfinished_per_tenant;
    let too_many = || {
        Error::RateLimited {
        message: format!(
            "the tenant has {max} what-if run(s) queued or running, the most it may (whatif.max_unfinished_per_tenant): wait for one to finish, or delete it"
        ),
        retry_after_secs: 5,
    }
    };
    let reservation = state.whatif.reserve(tenant, max).ok_or_else(too_many)?;
    if state.db.unfinished_whatif_runs(tenant).await? >= max as i64 {
        return Err(too_many());
    }
    let progress: Vec<WhatIfProgress> = policies
        .iter()
        .map(|p| WhatIfProgress {
            policy: p.clone(),
            done: 0,
            total: info.queries,
        })
        .collect();
    let stored = StoredRequest {
        trace: info,
        policies: policies.clone(),
        cluster: sizing,
    };
    let row = state
        .db
        .create_whatif_run(tenant, &to_json(&stored)?, &to_json(&progress)?)
        .await?;
    runner::start(
        state.clone(),
        row.id.clone(),
        WhatIfSetup {
            trace,
            policies,
            cluster,
            scaling,
            variants,
        },
        reservation,
    );
    view(&row)
}

/// A run of the tenant, with its results once it has succeeded.
pub async fn get(state: &ControlPlane, tenant: &str, id: &str) -> Result<WhatIfRun, Error> {
    view(&state.db.get_whatif_run(tenant, id, true).await?)
}

/// The results of a run that has succeeded (for its plot); [`Error::Conflict`] while it is
/// queued or running, or when it failed.
pub async fn results(
    state: &ControlPlane,
    tenant: &str,
    id: &str,
) -> Result<Vec<WhatIfPolicyResult>, Error> {
    let run = get(state, tenant, id).await?;
    run.results.ok_or_else(|| {
        Error::Conflict(format!(
            "what-if run '{id}' is {}: its plot is drawn once it has succeeded",
            run.status
        ))
    })
}

/// The tenant's newest runs, newest first, without results.
pub async fn list(state: &ControlPlane, tenant: &str) -> Result<Vec<WhatIfRun>, Error> {
    state
        .db
        .list_whatif_runs(tenant, LIST_LIMIT)
        .await?
        .iter()
        .map(view)
        .collect()
}

/// Deletes a run of the tenant; one under way stops after the policy it is simulating.
pub async fn delete(state: &ControlPlane, tenant: &str, id: &str) -> Result<(), Error> {
    state.db.delete_whatif_run(tenant, id).await?;
    state.whatif.cancel(id);
    Ok(())
}

/// The tenant's recorded traffic over the last `minutes` (at most the recorder's horizon),
/// of one application or of all, in the simulator's CSV trace format (a header only when
/// nothing was recorded).
pub async fn recorded_csv(
    state: &ControlPlane,
    tenant: &str,
    app: Option<&str>,
    minutes: u64,
) -> Result<String, Error> {
    if !(1..=10_080).contains(&minutes) {
        return Err(Error::Invalid(format!(
            "minutes must be between 1 and 10080, not {minutes}"
        )));
    }
    if let Some(app) = app {
        let apps = state.db.list_apps(tenant).await?;
        if !apps.iter().any(|(a, _)| a.name == app) {
            return Err(Error::NotFound(format!("application '{app}' not found")));
        }
    }
    let mut out = Vec::new();
    state
        .traffic
        .export(tenant, app, minutes)
        .write_csv(&mut out)
        .map_err(Error::internal)?;
    String::from_utf8(out).map_err(Error::internal)
}

/// The live workers, for the defaults of the simulated cluster.
fn live_cluster(state: &ControlPlane) -> LiveCluster {
    let mut live = LiveCluster {
        cpu_workers: 0,
        gpu_workers: 0,
        cores: 0,
        memory_bytes: 0,
    };
    for (beat, alive, _) in state.cluster.workers_view() {
        if !alive {
            continue;
        }
        let w = &beat.worker;
        if w.hardware.contains(&infaas_core::HardwareKind::Gpu) {
            live.gpu_workers += 1;
        } else {
            live.cpu_workers += 1;
        }
        // The cores the instances' threads run on, not the thread budget (idle instances may
        // reserve more threads than cores; busy ones never run more).
        live.cores = live.cores.max(u32::try_from(w.cores).unwrap_or(u32::MAX));
        live.memory_bytes = live.memory_bytes.max(w.memory_budget_bytes);
    }
    live
}

/// A stored run as the API shows it.
fn view(r: &infaas_store::WhatIfRun) -> Result<WhatIfRun, Error> {
    let corrupt = |what: &str, e: serde_json::Error| {
        Error::internal(anyhow::anyhow!(
            "what-if run {}: its stored {what} does not read back: {e}",
            r.id
        ))
    };
    let request: StoredRequest =
        serde_json::from_str(&r.request).map_err(|e| corrupt("request", e))?;
    let progress: Vec<WhatIfProgress> =
        serde_json::from_str(&r.progress).map_err(|e| corrupt("progress", e))?;
    let results = match (&r.result, r.status.as_str()) {
        (Some(json), status::SUCCEEDED) => Some(
            serde_json::from_str::<Vec<WhatIfPolicyResult>>(json)
                .map_err(|e| corrupt("result", e))?,
        ),
        _ => None,
    };
    Ok(WhatIfRun {
        id: r.id.clone(),
        status: r.status.clone(),
        simulated: true,
        trace: request.trace,
        policies: request.policies,
        cluster: request.cluster,
        progress,
        error: r.error.clone(),
        created_at_ms: r.created_at,
        started_at_ms: r.started_at,
        finished_at_ms: r.finished_at,
        results,
    })
}
