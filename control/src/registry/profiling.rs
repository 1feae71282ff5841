//! Background work of a registration: build the derived files, create the variants,
//! measure each file's accuracy and each variant's profile, prune the dominated variants.
//! Every step is recorded in the database as it completes, so a restart resumes where the
//! work stopped.

use std::time::Duration;

use infaas_core::{FileKind, HardwareKind, LatencyPoint, Model, ModelFile, ModelStatus, Variant};
use infaas_executors::accuracy::{accuracy, AccuracyOptions};
use infaas_executors::engine::{Engine, Hardware, OptLevel, SessionConfig};
use infaas_executors::profiler::{profile, ProfileOptions};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_executors::variants::{build_file, plan, runs_on, Built, Inventory, VariantPlan};
use infaas_scheduler::prune;
use infaas_store::{NewVariant, ObjectRecord, PruneMark, StoreError};
use tokio_util::sync::CancellationToken;

use super::upload::{model_key, remove_model_objects};

use crate::platform::ControlPlane;

/// How long a replica's claim on a registration lasts unless renewed (it renews every third
/// of it while it works): a registration whose replica died is taken over after this.
const CLAIM_TTL: Duration = Duration::from_secs(15);
/// How often every replica looks for unfinished registrations that nobody works on.
const RESUME_EVERY: Duration = Duration::from_secs(5);

fn claim_name(model_id: &str) -> String {
    format!("registration:{model_id}")
}

/// Starts the registry's worker (once): it takes new models from the queue
/// ([`super::Registry::submit`]) and, every [`RESUME_EVERY`], unfinished ones that no replica
/// works on (a restart, or a replica that died mid-registration). A registration is worked on
/// by the one replica that holds its claim (a lease, [`CLAIM_TTL`]), so each step runs once
/// however many replicas share the database.
pub fn start(state: ControlPlane, shutdown: CancellationToken) {
    let Some(mut rx) = state.registry.take_receiver() else {
        return;
    };
    let scan = state.clone();
    let scan_stop = shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RESUME_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = scan_stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            resume_unclaimed(&scan).await;
        }
    });
    tokio::spawn(async move {
        loop {
            let id = tokio::select! {
                _ = shutdown.cancelled() => break,
                id = rx.recv() => match id { Some(id) => id, None => break },
            };
            process_claimed(&state, &id, &shutdown).await;
        }
    });
}

/// Queues the unfinished registrations whose claim is absent or has lapsed.
async fn resume_unclaimed(state: &ControlPlane) {
    let models = match state.db.models_in_progress().await {
        Ok(models) => models,
        Err(e) => {
            tracing::error!(error = %e, "cannot list unfinished registrations");
            return;
        }
    };
    for m in models {
        match state.db.lease(&claim_name(&m.id)).await {
            Ok(Some(claim)) if !claim.expired() => {}
            Ok(_) => {
                if state.registry.submit_once(&m.id) {
                    tracing::info!(model = %m.name, status = m.status.as_str(), "resuming an unfinished registration");
                }
            }
            Err(e) => {
                tracing::warn!(model = %m.name, error = %e, "cannot read a registration's claim")
            }
        }
    }
}

/// Claims `model_id`'s registration and works on it while renewing the claim; leaves it to
/// the replica that holds the claim otherwise.
async fn process_claimed(state: &ControlPlane, model_id: &str, shutdown: &CancellationToken) {
    let name = claim_name(model_id);
    let me = state.leadership.replica().to_string();
    let address = state.leadership.address();
    let ttl_ms = i64::try_from(CLAIM_TTL.as_millis()).unwrap_or(i64::MAX);
    match state.db.acquire_lease(&name, &me, &address, ttl_ms).await {
        Ok(claim) if claim.held_by(&me) => {}
        Ok(claim) => {
            tracing::debug!(model_id, holder = %claim.holder, "another replica works on this registration");
            state.registry.done(model_id);
            return;
        }
        Err(e) => {
            tracing::warn!(model_id, error = %e, "cannot claim a registration; it is retried later");
            state.registry.done(model_id);
            return;
        }
    }
    let renewing = CancellationToken::new();
    let renew = {
        let (db, name, me, address, stop) = (
            state.db.clone(),
            name.clone(),
            me.clone(),
            address.clone(),
            renewing.clone(),
        );
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tokio::time::sleep(CLAIM_TTL / 3) => {}
                }
                if let Err(e) = db.acquire_lease(&name, &me, &address, ttl_ms).await {
                    tracing::warn!(error = %e, "cannot renew a registration's claim");
                }
            }
        })
    };
    process(state, model_id, shutdown).await;
    renewing.cancel();
    let _ = renew.await;
    if let Err(e) = state.db.drop_lease(&name, &me).await {
        tracing::warn!(model_id, error = %e, "cannot drop a registration's claim; it lapses by itself");
    }
    state.registry.done(model_id);
}

/// Why the background work of a model stopped early.
#[derive(Debug, thiserror::Error)]
enum ProfilingError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Failed(String),
    #[error("shutting down")]
    Shutdown,
    #[error("the model was deleted")]
    Deleted,
}

async fn process(state: &ControlPlane, model_id: &str, shutdown: &CancellationToken) {
    let model = match state.db.get_model_by_id(model_id).await {
        Ok(m) if m.status.in_progress() => m,
        Ok(_) | Err(StoreError::NotFound(_)) => return,
        Err(e) => {
            tracing::error!(model_id, error = %e, "cannot read a model to process");
            return;
        }
    };
    tracing::info!(model = %model.name, "generating and profiling variants");
    let started = std::time::Instant::now();
    match run(state, &model, shutdown).await {
        Ok(n) => {
            if let Err(e) = state.cluster.refresh_catalog().await {
                tracing::warn!(error = %e, "cannot refresh the serving catalog");
            }
            tracing::info!(model = %model.name, variants = n, secs = started.elapsed().as_secs_f64(), "model ready");
        }
        Err(ProfilingError::Shutdown) => {
            tracing::info!(model = %model.name, "registration paused for shutdown; it resumes at the next start");
        }
        Err(ProfilingError::Deleted) => remove_model_objects(state, &model.id).await,
        // Deleted while a step ran: a file the step stored after the delete had removed the
        // model's objects must go too (the step then failed on the missing row).
        Err(_) if model_gone(state, &model.id).await => {
            remove_model_objects(state, &model.id).await
        }
        Err(e) => {
            tracing::warn!(model = %model.name, error = %e, "registration failed");
            let _ = state
                .db
                .set_model_progress(
                    &model.id,
                    ModelStatus::Failed,
                    model.progress,
                    None,
                    Some(&e.to_string()),
                )
                .await;
        }
    }
}

async fn model_gone(state: &ControlPlane, model_id: &str) -> bool {
    matches!(
        state.db.get_model_by_id(model_id).await,
        Err(StoreError::NotFound(_))
    )
}

struct Progress<'a> {
    state: &'a ControlPlane,
    model_id: &'a str,
    done: usize,
    total: usize,
}

impl Progress<'_> {
    async fn step(&mut self, status: ModelStatus, detail: &str) -> Result<(), ProfilingError> {
        // Each step first checks that the model still exists (it may be deleted meanwhile).
        match self.state.db.get_model_by_id(self.model_id).await {
            Err(StoreError::NotFound(_)) => return Err(ProfilingError::Deleted),
            Err(e) => return Err(e.into()),
            Ok(_) => {}
        }
        let p = if self.total == 0 {
            0.0
        } else {
            self.done as f64 / self.total as f64
        };
        self.state
            .db
            .set_model_progress(self.model_id, status, p, Some(detail), None)
            .await?;
        Ok(())
    }
}

/// FP16 and GPU variants exist where a GPU does: the controller's own, or one a live worker
/// offers (real or simulated).
fn inventory(state: &ControlPlane) -> Inventory {
    Inventory {
        cpu_cores: state.config.worker_cores(),
        gpu: infaas_executors::runtime::gpu_available() || state.cluster.gpu_offered(),
    }
}

/// How a (file, hardware, threads) group is profiled: on the controller's own hardware, or,
/// for GPU variants when the controller has no GPU, with the latency profile of a live
/// worker's simulated GPU (the same hold that worker applies when it serves them).
fn profiling_session(
    state: &ControlPlane,
    threads: usize,
    hw: HardwareKind,
) -> Result<SessionConfig, ProfilingError> {
    if hw == HardwareKind::Cpu || infaas_executors::runtime::gpu_available() {
        return Ok(session(threads, hw));
    }
    let profile = state.cluster.simulated_gpu().ok_or_else(|| {
        ProfilingError::Failed(
            "GPU variants were planned but no live worker offers a GPU to profile them on any more"
                .into(),
        )
    })?;
    Ok(SessionConfig {
        hardware: Hardware::Cpu,
        simulated: Some(std::sync::Arc::new(profile)),
        ..session(threads, HardwareKind::Cpu)
    })
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, ProfilingError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ProfilingError::Failed(format!("background task failed: {e}")))?
        .map_err(ProfilingError::Failed)
}

async fn run(
    state: &ControlPlane,
    model: &Model,
    shutdown: &CancellationToken,
) -> Result<usize, ProfilingError> {
    let p: VariantPlan = plan(&inventory(state), model.declared.max_batch);
    let groups = p.hardware.len() * p.threads.len();
    let files_total = 1 + p.derived.len();
    let mut progress = Progress {
        state,
        model_id: &model.id,
        done: 0,
        total: p.derived.len() + files_total + files_total * groups,
    };
    let tenant = &model.tenant_id;

    // 1. Files: the source plus each derived kind that applies.
    progress
        .step(ModelStatus::Generating, "reading the source model")
        .await?;
    let source = state.objects.get_bytes(&model.source_key).await?.to_vec();
    state
        .db
        .upsert_model_file(
            tenant,
            &model.id,
            FileKind::Source,
            &model.source_key,
            model.size_bytes,
        )
        .await?;
    let existing: Vec<FileKind> = state
        .db
        .list_model_files(&model.id)
        .await?
        .iter()
        .map(|f| f.kind)
        .collect();
    // The validation set, matched to the source's signature: the INT8 file of a
    // convolutional model is calibrated on it, and every file's accuracy measured on it.
    let val_bytes = state.objects.get_bytes(&model.validation_key).await?;
    let val_set = {
        let (sig_bytes, vb) = (source.clone(), val_bytes.clone());
        std::sync::Arc::new(blocking(move || load_validation(sig_bytes, &vb)).await?)
    };
    let mut skipped = Vec::new();
    for kind in &p.derived {
        if shutdown.is_cancelled() {
            return Err(ProfilingError::Shutdown);
        }
        progress
            .step(
                ModelStatus::Generating,
                &format!("building the {} file", kind.as_str()),
            )
            .await?;
        if !existing.contains(kind) {
            let (src, kind_c, dir) = (source.clone(), *kind, state.config.tmp_dir());
            let set = val_set.clone();
            let built = blocking(move || {
                std::fs::create_dir_all(&dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
                build_file(kind_c, &src, &dir, Some(&set)).map_err(|e| e.to_string())
            })
            .await?;
            match built {
                Built::File(bytes) => {
                    let key = model_key(tenant, &model.id, &format!("{}.onnx", kind.as_str()));
                    let size = state.objects.put_bytes(&key, bytes.into()).await?;
                    state
                        .db
                        .record_object(&ObjectRecord {
                            key: key.clone(),
                            tenant_id: tenant.clone(),
                            size_bytes: size as i64,
                            owner_kind: "model".into(),
                            owner_id: model.id.clone(),
                        })
                        .await?;
                    state
                        .db
                        .upsert_model_file(tenant, &model.id, *kind, &key, size as i64)
                        .await?;
                }
                Built::NotApplicable(why) => {
                    tracing::info!(model = %model.name, kind = kind.as_str(), why, "variant kind skipped");
                    skipped.push(format!("{}: {why}", kind.as_str()));
                }
            }
        }
        progress.done += 1;
    }
    let files = state.db.list_model_files(&model.id).await?;

    // 2. Variants: every file on every hardware it runs on, every thread count and max batch.
    let mut new = Vec::new();
    for f in &files {
        for hw in p.hardware.iter().copied().filter(|&hw| runs_on(f.kind, hw)) {
            let threads: &[usize] = if hw == HardwareKind::Gpu {
                &[1]
            } else {
                &p.threads
            };
            for &t in threads {
                for &b in &p.batches {
                    new.push(NewVariant {
                        name: Variant::make_name(&model.name, f.kind, hw, t, b),
                        file_id: f.id.clone(),
                        kind: f.kind,
                        hardware: hw,
                        threads: t,
                        max_batch: b,
                    });
                }
            }
        }
    }
    state.db.ensure_variants(tenant, &model.id, &new).await?;
    progress.total = files.len() * (1 + groups) + p.derived.len();

    // 3. Accuracy once per file, then a latency profile per (file, hardware, threads).
    let variants = state.db.list_variants(&model.id).await?;
    for f in &files {
        if shutdown.is_cancelled() {
            return Err(ProfilingError::Shutdown);
        }
        let bytes = if f.kind == FileKind::Source {
            source.clone()
        } else {
            state.objects.get_bytes(&f.object_key).await?.to_vec()
        };
        let set = val_set.clone();
        progress
            .step(
                ModelStatus::Profiling,
                &format!("measuring the accuracy of the {} file", f.kind.as_str()),
            )
            .await?;
        if f.accuracy.is_none() {
            let acc = measure_accuracy(
                model,
                f,
                bytes.clone(),
                set.clone(),
                state.config.worker_cores(),
            )
            .await?;
            state.db.set_file_accuracy(&f.id, acc).await?;
        }
        progress.done += 1;
        for hw in p.hardware.iter().copied() {
            let threads: &[usize] = if hw == HardwareKind::Gpu {
                &[1]
            } else {
                &p.threads
            };
            for &t in threads {
                if shutdown.is_cancelled() {
                    return Err(ProfilingError::Shutdown);
                }
                let group: Vec<&Variant> = variants
                    .iter()
                    .filter(|v| v.file_id == f.id && v.hardware == hw && v.threads == t)
                    .collect();
                let done = group.is_empty() || group.iter().all(|v| v.status == "profiled");
                if !done {
                    progress
                        .step(
                            ModelStatus::Profiling,
                            &format!(
                                "profiling {}.{}.{}.t{t}",
                                model.name,
                                f.kind.name_token(),
                                hw.as_str()
                            ),
                        )
                        .await?;
                    profile_group(state, f, hw, t, &p.batches, bytes.clone(), set.clone()).await?;
                }
                progress.done += 1;
            }
        }
    }
    // 4. Prune: a variant slower than another of the model at equal or better accuracy on
    // the same hardware, threads and max batch is not kept (`infaas_scheduler::prune`).
    // Pruning and readiness are one transaction: a registration stopped before it resumes
    // with every variant and prunes again from the same profiles; one stopped after it is
    // done. Then the files no kept variant uses leave the object store.
    progress.done = progress.total;
    progress
        .step(ModelStatus::Profiling, "pruning dominated variants")
        .await?;
    let profiled = state.db.list_variants(&model.id).await?;
    let pruned = if state.config.prune_variants {
        prune::dominated(&profiled)
    } else {
        Vec::new()
    };
    let mut detail = "ready".to_string();
    if !skipped.is_empty() {
        detail.push_str(&format!("; skipped {}", skipped.join("; ")));
    }
    if let Some(report) = prune::report(&profiled, &pruned) {
        detail.push_str(&format!("; {report}"));
    }
    let marks: Vec<PruneMark> = pruned
        .iter()
        .map(|p| PruneMark {
            variant_id: p.variant_id.clone(),
            dominated_by: p.dominated_by.clone(),
            reason: p.reason.clone(),
        })
        .collect();
    state
        .db
        .finish_registration(&model.id, &marks, &detail)
        .await?;
    for p in &pruned {
        tracing::info!(model = %model.name, variant = %p.name, by = %p.dominated_by, reason = %p.reason, "variant pruned");
    }
    let unused = prune::files_without_variants(&profiled, &pruned);
    for f in files.iter().filter(|f| unused.contains(&f.id)) {
        remove_file_object(state, &f.object_key).await;
    }
    Ok(profiled.len() - pruned.len())
}

/// Deletes the stored file of a model file none of whose variants is kept. Its object
/// record goes only once the object is gone: a failure leaves it accounted to the model,
/// whose deletion removes it.
async fn remove_file_object(state: &ControlPlane, key: &str) {
    match state.objects.delete(key).await {
        Ok(()) => {
            if let Err(e) = state.db.forget_object(key).await {
                tracing::error!(key, error = %e, "cannot forget the object of a pruned file");
            }
        }
        Err(e) => tracing::warn!(key, error = %e, "cannot delete the object of a pruned file"),
    }
}

fn load_validation(model: Vec<u8>, npz_bytes: &[u8]) -> Result<ValidationSet, String> {
    let engine = Engine::load(model, &session(1, HardwareKind::Cpu)).map_err(|e| e.to_string())?;
    let arrays =
        infaas_protocol::npz::read_npz(npz_bytes).map_err(|e| format!("validation set: {e}"))?;
    match_validation(engine.signature(), arrays).map_err(|e| format!("validation set: {e}"))
}

fn session(threads: usize, hw: HardwareKind) -> SessionConfig {
    SessionConfig {
        intra_threads: threads,
        optimization: OptLevel::All,
        hardware: match hw {
            HardwareKind::Cpu => Hardware::Cpu,
            HardwareKind::Gpu => Hardware::Cuda,
        },
        optimized_model_out: None,
        simulated: None,
    }
}

async fn measure_accuracy(
    model: &Model,
    f: &ModelFile,
    bytes: Vec<u8>,
    set: std::sync::Arc<ValidationSet>,
    cores: usize,
) -> Result<f64, ProfilingError> {
    let opts = AccuracyOptions {
        output: model.declared.output.clone(),
        label_names: model.declared.label_names.clone(),
        batch_size: 0,
    };
    let kind = f.kind.as_str();
    blocking(move || {
        let engine = Engine::load(bytes, &session(cores, HardwareKind::Cpu))
            .map_err(|e| format!("ONNX Runtime cannot load the {kind} file: {e}"))?;
        accuracy(&engine, &set, &opts)
            .map(|r| r.accuracy)
            .map_err(|e| format!("measuring the accuracy of the {kind} file: {e}"))
    })
    .await
}

async fn profile_group(
    state: &ControlPlane,
    f: &ModelFile,
    hw: HardwareKind,
    threads: usize,
    batches: &[usize],
    bytes: Vec<u8>,
    set: std::sync::Arc<ValidationSet>,
) -> Result<(), ProfilingError> {
    let opts = ProfileOptions {
        warmup: 3,
        runs: state.config.profile_runs,
        max_duration: Duration::from_millis(state.config.profile_max_ms_per_batch),
    };
    let batches = batches.to_vec();
    let kind = f.kind.as_str();
    let cfg = profiling_session(state, threads, hw)?;
    let prof = blocking(move || {
        profile(&bytes, &cfg, &set, &batches, &opts)
            .map_err(|e| format!("profiling the {kind} file with {threads} threads: {e}"))
    })
    .await?;
    let points: Vec<LatencyPoint> = prof
        .latency
        .iter()
        .map(|l| LatencyPoint {
            batch: l.batch,
            p50_ms: l.p50_ms,
            p99_ms: l.p99_ms,
            mean_ms: l.mean_ms,
            throughput_per_s: l.throughput_per_s,
        })
        .collect();
    // Resident-memory growth is noisy inside a long-running process (freed memory is
    // reused); a loaded session holds at least its weights, so the file size is a floor.
    let memory = prof.memory_bytes.max(f.size_bytes.max(0) as u64) as i64;
    state
        .db
        .record_profile(&f.id, hw, threads, prof.load_ms, memory, &points)
        .await?;
    Ok(())
}
