//! The job runner: a loop on the controller that works through the chunks of unfinished jobs
//! (oldest job first), one batch at a time, on the workers' spare capacity.
//!
//! Before every batch it checks that online queries leave room (`scheduler::offline::
//! spare_capacity`: online busy time, SLO misses, no Overloaded instance); when
//! they do not, it puts the chunk back and marks its jobs paused with the reason, and resumes
//! once online load falls below the resume threshold. The variant is chosen for throughput
//! per cost (largest efficient batch) and batches are as large as its max batch.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_scheduler::offline::{JobBatch, JobGate, JobPlacement, JobWait};
use infaas_scheduler::{InFlightGuard, Target};
use infaas_store::db::jobs::state;
use infaas_store::{Chunk, Job};
use tokio_util::sync::CancellationToken;

use super::input::{self, Format, Items};
use super::{file_key, target_schemas};
use crate::cluster::{instance_id, schema, CallError};
use crate::error::Error;
use crate::platform::ControlPlane;
use crate::serving::load_request;

/// Parsed input objects kept between chunks (a chunk is a slice of one object).
const CACHED_OBJECTS: usize = 2;
/// Pause between passes when there is nothing to do.
const IDLE: Duration = Duration::from_millis(200);

/// A parsed input object with the key of the input schema it fitted.
type ParsedObject = Arc<(String, Items)>;

/// Why a chunk stopped before its end.
#[derive(Debug)]
enum Stop {
    /// Online load needs the capacity: the chunk goes back, the job pauses.
    Pause(String),
    /// A worker failed or went away: the chunk goes back and is retried elsewhere.
    Retry(String),
    /// The job cannot succeed (its target is gone, inputs no longer fit).
    Fail(String),
    /// The job was cancelled meanwhile.
    Cancelled,
}

pub struct JobRunner {
    state: ControlPlane,
    /// This runner's name in chunk leases.
    id: String,
    /// The scheduler's job gate (paused or not, the instance of the latest batch), on the
    /// wall clock in ms.
    gate: Mutex<JobGate>,
    cache: Mutex<VecDeque<(String, ParsedObject)>>,
    http: reqwest::Client,
}

impl JobRunner {
    pub fn new(state: ControlPlane) -> Arc<JobRunner> {
        let gate = Mutex::new(JobGate::new(state.config.job_gate()));
        Arc::new(JobRunner {
            state,
            id: format!("controller-{}", uuid::Uuid::new_v4()),
            gate,
            cache: Mutex::new(VecDeque::new()),
            // Webhooks are not followed through redirects (a redirect could lead anywhere).
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap_or_default(),
        })
    }

    /// Runs until `shutdown`.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        loop {
            let worked = match self.step().await {
                Ok(worked) => worked,
                Err(e) => {
                    tracing::warn!(error = %e, "job runner pass failed");
                    false
                }
            };
            let pause = if worked { Duration::ZERO } else { IDLE };
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }

    fn lock_gate(&self) -> std::sync::MutexGuard<'_, JobGate> {
        self.gate.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether jobs may run now ([`JobGate::check`] on the cluster and the online load).
    fn gate(&self) -> Result<(), String> {
        let snapshot = self.state.cluster.snapshot();
        let online = self.state.cluster.online.load();
        let now = infaas_core::time::now_ms() as f64;
        self.lock_gate().check(&snapshot, &online, now)
    }

    /// One pass: returns whether a chunk was completed.
    async fn step(&self) -> Result<bool, crate::Error> {
        let jobs = self.state.db.unfinished_jobs().await?;
        if jobs.is_empty() {
            return Ok(false);
        }
        let was_paused = self.lock_gate().paused();
        if let Err(why) = self.gate() {
            self.pause_all(&jobs, &why, !was_paused).await;
            return Ok(false);
        }
        for job in &jobs {
            if self.advance(job).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Marks `jobs` paused for `why` (`newly`: they were running until now).
    async fn pause_all(&self, jobs: &[Job], why: &str, newly: bool) {
        if newly {
            tracing::info!(reason = %why, "offline jobs paused for online load");
        }
        let now = infaas_core::time::now_ms();
        // A paused job's reason is refreshed every few seconds, not on every pass.
        let stale = |j: &&Job| {
            j.state != state::PAUSED
                || (j.paused_reason.as_deref() != Some(why) && now - j.updated_at > 2_000)
        };
        for job in jobs.iter().filter(stale) {
            if let Err(e) = self
                .state
                .db
                .set_job_state(&job.id, state::PAUSED, Some(why), None)
                .await
            {
                tracing::warn!(job = %job.id, error = %e, "cannot pause a job");
            }
        }
    }

    /// Runs one chunk of `job`; returns whether it completed one.
    async fn advance(&self, job: &Job) -> Result<bool, crate::Error> {
        let db = &self.state.db;
        if job.state != state::RUNNING
            && !db
                .set_job_state(&job.id, state::RUNNING, None, None)
                .await?
        {
            return Ok(false); // cancelled meanwhile
        }
        let lease = self.state.config.job_lease_ms as i64;
        let Some(chunk) = db.claim_chunk(&job.id, &self.id, lease).await? else {
            let counts = db.chunk_counts(&job.id).await?;
            if counts.pending == 0 && counts.running == 0 {
                self.finish(job, state::SUCCEEDED, None).await;
            }
            return Ok(false);
        };
        let started = Instant::now();
        match self.run_chunk(job, &chunk).await {
            Ok(()) => {
                tracing::debug!(job = %job.id, chunk = chunk.index, items = chunk.items, ms = started.elapsed().as_millis() as u64, "chunk done");
                Ok(true)
            }
            Err(stop) => {
                db.release_chunk(&job.id, chunk.index).await?;
                match stop {
                    Stop::Pause(why) => {
                        let newly = self.lock_gate().pause();
                        if let Ok(jobs) = db.unfinished_jobs().await {
                            self.pause_all(&jobs, &why, newly).await;
                        }
                    }
                    Stop::Retry(why) => {
                        tracing::warn!(job = %job.id, chunk = chunk.index, reason = %why, "chunk interrupted; it will be retried");
                    }
                    Stop::Fail(why) => self.finish(job, state::FAILED, Some(&why)).await,
                    Stop::Cancelled => {}
                }
                Ok(false)
            }
        }
    }

    /// The chunk's object, parsed (cached); with the input schema key it fitted.
    async fn items(&self, job: &Job, chunk: &Chunk) -> Result<ParsedObject, Stop> {
        if let Ok(cache) = self.cache.lock() {
            if let Some((_, items)) = cache.iter().find(|(k, _)| *k == chunk.input_key) {
                return Ok(items.clone());
            }
        }
        let schemas = match &job.pipeline {
            Some(name) => {
                let p = crate::pipelines::prepared(&self.state, &job.tenant_id, name)
                    .await
                    .map_err(|e| match e {
                        Error::NotFound(m) => Stop::Fail(m),
                        other => Stop::Retry(other.to_string()),
                    })?;
                super::pipeline_schema(&p)
            }
            None => target_schemas(
                &self.state,
                &job.tenant_id,
                job.app.as_deref(),
                job.model.as_deref(),
            ),
        };
        if schemas.is_empty() {
            return Err(Stop::Retry(
                "the job's target serves no variant right now".into(),
            ));
        }
        let bytes = self
            .state
            .objects
            .get_bytes(&chunk.input_key)
            .await
            .map_err(|e| match e {
                infaas_store::StoreError::ObjectNotFound(_) => {
                    Stop::Fail(format!("input object '{}' is gone", chunk.input_key))
                }
                other => Stop::Retry(other.to_string()),
            })?;
        let format = Format::parse(&chunk.format).unwrap_or(Format::Npz);
        let name = chunk
            .input_key
            .strip_prefix(&file_key(&job.tenant_id, ""))
            .unwrap_or(&chunk.input_key);
        let parsed = Arc::new(
            super::parse_blocking(format, name, bytes, &schemas)
                .await
                .map_err(Stop::Fail)?,
        );
        if let Ok(mut cache) = self.cache.lock() {
            cache.push_front((chunk.input_key.clone(), parsed.clone()));
            cache.truncate(CACHED_OBJECTS);
        }
        Ok(parsed)
    }

    /// A chunk of a pipeline job: its items through the pipeline, batches of
    /// [`super::PIPELINE_JOB_BATCH`] rows, each node model-less as for online queries.
    async fn run_pipeline_chunk(
        &self,
        job: &Job,
        chunk: &Chunk,
        name: &str,
    ) -> Result<Vec<u8>, Stop> {
        let parsed = self.items(job, chunk).await?;
        let items = &parsed.1;
        let tenant = job.tenant_id.as_str();
        let mut renewed = Instant::now();
        let mut out = Vec::new();
        let end = (chunk.row_start + chunk.items) as usize;
        let mut at = chunk.row_start as usize;
        while at < end {
            if let Err(why) = self.gate() {
                return Err(Stop::Pause(why));
            }
            self.check_cancelled(job).await?;
            self.renew_if_due(job, chunk, &mut renewed).await?;
            let prepared = crate::pipelines::prepared(&self.state, tenant, name)
                .await
                .map_err(|e| match e {
                    Error::NotFound(m) => Stop::Fail(m),
                    other => Stop::Retry(other.to_string()),
                })?;
            let n = super::PIPELINE_JOB_BATCH.min(end - at);
            // Offline: no latency SLO, the pipeline's accuracy floor.
            let req = crate::serving::Requirements {
                latency_ms: None,
                min_accuracy: prepared.pipeline.spec.slo.min_accuracy,
                max_cost: None,
            };
            let answer = crate::pipelines::run::infer_offline(
                &self.state,
                tenant,
                &prepared,
                req,
                items.slice(at, n),
            )
            .await
            .map_err(|e| match e {
                Error::Invalid(m) | Error::NotFound(m) | Error::Conflict(m) => Stop::Fail(m),
                Error::RateLimited { message, .. } => Stop::Pause(message),
                other => Stop::Retry(other.to_string()),
            })?;
            input::output_lines(
                chunk.item_start + (at - chunk.row_start as usize) as i64,
                &answer.outputs,
                &mut out,
            )
            .map_err(Stop::Fail)?;
            at += n;
            tokio::task::yield_now().await;
        }
        Ok(out)
    }

    /// Stops with [`Stop::Cancelled`] once the job is cancelled.
    async fn check_cancelled(&self, job: &Job) -> Result<(), Stop> {
        match self.state.db.get_job(&job.tenant_id, &job.id).await {
            Ok(j) if j.state == state::CANCELLED => Err(Stop::Cancelled),
            Ok(_) => Ok(()),
            Err(e) => Err(Stop::Retry(e.to_string())),
        }
    }

    /// Renews the chunk's lease once a third of it has passed since `renewed`.
    async fn renew_if_due(
        &self,
        job: &Job,
        chunk: &Chunk,
        renewed: &mut Instant,
    ) -> Result<(), Stop> {
        let lease = self.state.config.job_lease_ms as i64;
        if renewed.elapsed().as_millis() as i64 > lease / 3 {
            self.state
                .db
                .renew_chunk(&job.id, chunk.index, lease)
                .await
                .map_err(|e| Stop::Retry(e.to_string()))?;
            *renewed = Instant::now();
        }
        Ok(())
    }

    async fn run_chunk(&self, job: &Job, chunk: &Chunk) -> Result<(), Stop> {
        let out = match &job.pipeline {
            Some(name) => self.run_pipeline_chunk(job, chunk, name).await?,
            None => self.run_model_chunk(job, chunk).await?,
        };
        self.write_chunk(job, chunk, out).await
    }

    async fn run_model_chunk(&self, job: &Job, chunk: &Chunk) -> Result<Vec<u8>, Stop> {
        let parsed = self.items(job, chunk).await?;
        let (schema_key, items) = (&parsed.0, &parsed.1);
        let cluster = &self.state.cluster;
        let tenant = job.tenant_id.as_str();
        let index_name = match (&job.app, &job.model) {
            (Some(app), _) => schema::app_key(app, schema_key),
            (None, Some(model)) => model.clone(),
            (None, None) => return Err(Stop::Fail("the job has no target".into())),
        };
        let mut renewed = Instant::now();
        let mut out = Vec::new();
        let end = (chunk.row_start + chunk.items) as usize;
        let mut at = chunk.row_start as usize;
        let mut batches = 0u64;
        while at < end {
            if batches.is_multiple_of(8) {
                self.check_cancelled(job).await?;
            }
            self.renew_if_due(job, chunk, &mut renewed).await?;
            let snapshot = cluster.snapshot();
            let prices = cluster.prices();
            let online = cluster.online.load();
            let target = if job.app.is_some() {
                Target::App(&index_name)
            } else {
                Target::Model(&index_name)
            };
            let now = infaas_core::time::now_ms() as f64;
            let JobBatch {
                variant: vi,
                placement,
            } = self
                .lock_gate()
                .next_batch(
                    &snapshot,
                    &online,
                    tenant,
                    target,
                    job.min_accuracy,
                    prices,
                    now,
                )
                .map_err(|wait| match wait {
                    JobWait::Paused(why) => Stop::Pause(why),
                    other => Stop::Retry(other.to_string()),
                })?;
            let v = &snapshot.variants()[vi];
            if job.variant_id.as_deref() != Some(v.id.as_str()) && batches == 0 {
                if let Err(e) = self.state.db.set_job_variant(&job.id, &v.id, &v.name).await {
                    tracing::warn!(job = %job.id, error = %e, "cannot record the job's variant");
                }
            }
            let served = cluster
                .served(&v.id)
                .ok_or_else(|| Stop::Retry(format!("variant '{}' left the catalog", v.name)))?;
            let (worker_idx, _guard): (usize, Option<InFlightGuard>) = match placement {
                JobPlacement::Instance(i) => {
                    let n = v.max_batch.min(end - at);
                    (
                        snapshot.instances()[i].worker,
                        snapshot.in_flight(i).map(|c| c.enter(n)),
                    )
                }
                JobPlacement::Load(w) => (w, None),
            };
            let worker = &snapshot.workers()[worker_idx];
            let handle = cluster
                .handle(&worker.id)
                .ok_or_else(|| Stop::Retry(format!("worker {} left", worker.id)))?;
            self.lock_gate().ran_on(
                &instance_id(&worker.id, &v.id),
                infaas_core::time::now_ms() as f64,
            );
            let n = v.max_batch.max(1).min(end - at);
            let inputs = schema::adapt(items.slice(at, n), &served.inputs);
            let lr = load_request(&served);
            let mut outputs = handle.infer(&v.id, inputs.clone()).await;
            if matches!(outputs, Err(CallError::NotLoaded)) {
                handle
                    .load(&lr)
                    .await
                    .map_err(|e| self.call_failed(&worker.id, e))?;
                cluster.loaded(&worker.id, &lr);
                outputs = handle.infer(&v.id, inputs).await;
            }
            let outputs = outputs.map_err(|e| self.call_failed(&worker.id, e))?;
            input::output_lines(
                chunk.item_start + (at - chunk.row_start as usize) as i64,
                &outputs,
                &mut out,
            )
            .map_err(Stop::Fail)?;
            at += n;
            batches += 1;
            // A batch may run on this task's thread (an idle instance answers inline) and
            // return without waiting: give online queries queued behind this task their turn.
            tokio::task::yield_now().await;
        }
        Ok(out)
    }

    /// Writes a chunk's output lines to its fixed key and marks it done.
    async fn write_chunk(&self, job: &Job, chunk: &Chunk, out: Vec<u8>) -> Result<(), Stop> {
        let tenant = job.tenant_id.as_str();
        let key = file_key(
            tenant,
            &format!("{}/part-{:06}.jsonl", job.output_path, chunk.index),
        );
        let size = self
            .state
            .objects
            .put_bytes(&key, bytes::Bytes::from(out))
            .await
            .map_err(|e| Stop::Retry(e.to_string()))?;
        self.state
            .db
            .record_object(&infaas_store::ObjectRecord {
                key: key.clone(),
                tenant_id: tenant.to_string(),
                size_bytes: size as i64,
                owner_kind: "job".into(),
                owner_id: job.id.clone(),
            })
            .await
            .map_err(|e| Stop::Retry(e.to_string()))?;
        if !self
            .state
            .db
            .complete_chunk(&job.id, chunk.index, &key)
            .await
            .map_err(|e| Stop::Retry(e.to_string()))?
        {
            // Another runner took the chunk over (our lease ran out): it writes the same key.
            tracing::warn!(job = %job.id, chunk = chunk.index, "chunk was taken over; its output stands as written by the last runner");
        }
        Ok(())
    }

    fn call_failed(&self, worker_id: &str, e: CallError) -> Stop {
        match e {
            CallError::Overloaded(msg) => {
                Stop::Pause(format!("the job's instance is overloaded: {msg}"))
            }
            CallError::BadInput(msg) => Stop::Fail(msg),
            CallError::NotLoaded => Stop::Retry("the variant was unloaded".into()),
            e @ (CallError::Worker(_) | CallError::NoRoom(_) | CallError::Unauthorized(_)) => {
                self.state.cluster.suspect(worker_id);
                Stop::Retry(format!("worker {worker_id} failed: {e}"))
            }
        }
    }

    async fn finish(&self, job: &Job, final_state: &str, error: Option<&str>) {
        match self
            .state
            .db
            .set_job_state(&job.id, final_state, None, error)
            .await
        {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                tracing::warn!(job = %job.id, error = %e, "cannot finish a job");
                return;
            }
        }
        tracing::info!(job = %job.id, state = final_state, error = error.unwrap_or(""), "offline job finished");
        if let Some(url) = &job.webhook_url {
            let view = match self.state.db.get_job(&job.tenant_id, &job.id).await {
                Ok(j) => super::view(&j),
                Err(_) => return,
            };
            let (http, url) = (self.http.clone(), url.clone());
            let allow_private = self.state.config.job_webhook_allow_private;
            tokio::spawn(async move {
                if !allow_private {
                    if let Err(why) = resolves_to_public(&url).await {
                        tracing::warn!(url = %url, reason = %why, "job webhook not called");
                        return;
                    }
                }
                for attempt in 0..3u32 {
                    match http.post(&url).json(&view).send().await {
                        Ok(r) if r.status().is_success() => return,
                        Ok(r) => {
                            tracing::warn!(url = %url, status = %r.status(), attempt, "job webhook refused")
                        }
                        Err(e) => {
                            tracing::warn!(url = %url, error = %e, attempt, "job webhook failed")
                        }
                    }
                    tokio::time::sleep(Duration::from_millis(500 << attempt)).await;
                }
            });
        }
    }
}

/// Checks that a webhook's host resolves only to public addresses (submission already refuses
/// internal address literals; this catches names that resolve to internal addresses).
async fn resolves_to_public(url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| "the URL has no host".to_string())?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);
    let addrs = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve '{host}': {e}"))?;
    for a in addrs {
        if super::is_internal(a.ip()) {
            return Err(format!(
                "'{host}' resolves to {}, a loopback, private or link-local address",
                a.ip()
            ));
        }
    }
    Ok(())
}
