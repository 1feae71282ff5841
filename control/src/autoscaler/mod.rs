//! The autoscaling loops (INFaaS §4.2, §5; Themis §4-5): they read the cluster's snapshot,
//! call the pure policies of [`infaas_scheduler::autoscale`] and carry out the decisions
//! through the workers, off the query path.
//!
//! - **Model autoscaler** (every `autoscale.model_interval_ms`, 1 s): per model (family) of
//!   every tenant with running instances, the load to plan for (rows that arrived per second,
//!   [`demand`]), then Themis' vertical step for overloaded CPU instances (threads first;
//!   base-thread replicas once a forecast of the family's next ten seconds needs as many of
//!   them as the load now), then the greedy
//!   replicate / upgrade / remove / downgrade decision, then migration of instances that stay
//!   Interfered.
//! - **Worker autoscaler** (every `autoscale.worker_interval_ms`, 2 s): adds a worker when a
//!   hardware kind is busy on all workers, Interfered on all, when most workers have
//!   Overloaded instances, or when the model autoscaler found no room for an instance it
//!   needs; stops provisioned workers idle for the cool-down.
//! - **Exact planner** (every `autoscale.exact_interval_ms`, 30 s): solves the ILP to
//!   optimality on the last period's input, records greedy's gap to the optimum and carries
//!   out the optimal plan when the gap exceeds `autoscale.exact_apply_gap`.
//!
//! Every action runs in its own task: new instances are loaded first, the ones they replace
//! are taken out of the index and unloaded only once the new ones serve. A family (tenant,
//! model) with actions under way is left alone until the last of them ends. The period itself
//! ([`model_period`]) is the scheduler's, which the simulator runs too. Each decision is stored as a
//! scaling event with its reason and the cost per second before and after.

pub mod book;

pub(crate) mod events;
#[cfg(feature = "kubernetes")]
mod kubernetes;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_core::HardwareKind;
use infaas_provision::process::{ProcessConfig, ProcessProvider};
use infaas_provision::{ProvisionedWorker, WorkerProvider};
use infaas_scheduler::autoscale::{
    self, greedy, plan_demands, releasable_view, resolve, worker_period, Action, ActionKind,
    ActionPlan, Arrivals, ClaimedRoom, Demand, LiveFamily, LoopInput, LoopPeriod, ModelLoop,
    Resolution, Step, WorkerConfig, WorkerPeriod, WorkerView,
};
use infaas_scheduler::{InstanceState, Prices, Snapshot};
use tokio_util::sync::CancellationToken;

use crate::config::{AutoscaleConfig, WorkerProviderKind};
use crate::platform::ControlPlane;
use book::{AppKey, Book, FamilyKey, Provisioned};

/// How long an instance stays out of the index before it is unloaded, so that queries already
/// sent to it finish there.
const DRAIN_WAIT: Duration = Duration::from_millis(500);

/// The last model period's input, for the exact planner.
struct LastInput {
    snapshot: Arc<Snapshot>,
    demands: Vec<Demand>,
    ages: Vec<f64>,
    releasable: Vec<bool>,
}

/// See the module documentation.
pub struct Autoscaler {
    state: ControlPlane,
    cfg: AutoscaleConfig,
    prices: Prices,
    provider: Option<Arc<dyn WorkerProvider>>,
    process: Option<Arc<ProcessProvider>>,
    book: Mutex<Book>,
    /// What the model periods decide on, kept between them (the scheduler's loop, which the
    /// simulator runs too).
    model_loop: Mutex<ModelLoop<FamilyKey>>,
    /// The model loop's clock: ms are counted from here.
    started: Instant,
    last_take: Mutex<Instant>,
    last_input: Mutex<Option<LastInput>>,
}

/// A family's live instances and arrivals in one model period, as the controller gathers
/// them from its registry and demand meter.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Gathered {
    /// The application its variants serve.
    pub app: AppKey,
    /// Its live instances on live workers (snapshot indices).
    pub instances: Vec<usize>,
    /// Rows that arrived for it since the last period.
    pub arrivals: Arrivals,
}

/// One model period on what the controller gathered, apart from I/O so that tests drive it on
/// a test clock: each family's rows per second over `elapsed_s`, whether an action of it is
/// under way (the book), and the scheduler's [`ModelLoop`] on them at `now_ms`. Returns the
/// families' keys in order (the plan's family indices are into them) and the period.
#[allow(clippy::too_many_arguments)]
pub fn decide_period(
    model_loop: &mut ModelLoop<FamilyKey>,
    book: &Book,
    snapshot: &Snapshot,
    families: &BTreeMap<FamilyKey, Gathered>,
    elapsed_s: f64,
    threads: &[usize],
    releasable: &[bool],
    prices: Prices,
    now_ms: f64,
) -> (Vec<FamilyKey>, LoopPeriod) {
    let elapsed_s = elapsed_s.max(1e-3);
    let live: Vec<LiveFamily<FamilyKey>> = families
        .iter()
        .map(|(key, g)| LiveFamily {
            key: key.clone(),
            tenant: &key.0,
            model: &key.1,
            instances: g.instances.clone(),
            rows_per_s: g.arrivals.rows as f64 / elapsed_s,
            slo_ms: g.arrivals.slo_ms,
            min_accuracy: g.arrivals.min_accuracy,
            busy: book.is_busy(key),
            loaded_for_queries: g.arrivals.loads_for_queries > 0,
        })
        .collect();
    let period = model_loop.period(
        &LoopInput {
            snapshot,
            threads,
            releasable,
            prices,
            now_ms,
        },
        &live,
        greedy,
    );
    (families.keys().cloned().collect(), period)
}

/// Marks a family busy until dropped (also when its task fails or panics).
struct Busy {
    scaler: Arc<Autoscaler>,
    family: FamilyKey,
}

impl Drop for Busy {
    fn drop(&mut self) {
        if let Ok(mut b) = self.scaler.book.lock() {
            b.finish(&self.family);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The URL workers reach the controller at, from the address it listens on.
pub fn controller_url(addr: SocketAddr) -> String {
    let host = if addr.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        addr.ip()
    };
    format!("http://{}", SocketAddr::new(host, addr.port()))
}

/// The configured worker provider (`kubernetes` needs the feature of that name, on by
/// default; without it the decisions are only logged).
fn make_provider(
    state: &ControlPlane,
    controller: &str,
) -> (
    Option<Arc<dyn WorkerProvider>>,
    Option<Arc<ProcessProvider>>,
) {
    let cfg = &state.config;
    let a = &cfg.autoscale;
    match a.worker_provider {
        WorkerProviderKind::None => (None, None),
        #[cfg(feature = "kubernetes")]
        WorkerProviderKind::Kubernetes => {
            let k = cfg.kubernetes();
            tracing::info!(deployment = %k.deployment, namespace = ?k.namespace, max_workers = k.max_workers, "workers are pods of a Kubernetes Deployment");
            (
                Some(Arc::new(kubernetes::LazyKubernetes::new(k, {
                    // Every change of the worker Deployment carries the leader token.
                    let db = state.db.clone();
                    Arc::new(move || db.fence())
                })) as Arc<dyn WorkerProvider>),
                None,
            )
        }
        #[cfg(not(feature = "kubernetes"))]
        WorkerProviderKind::Kubernetes => {
            tracing::error!("worker_provider = \"kubernetes\" needs the `kubernetes` feature, which this build lacks; workers are not added or removed");
            (None, None)
        }
        WorkerProviderKind::Process => {
            // The running binary is `infaas` itself unless embedded elsewhere (a test
            // harness): then the binary must be configured.
            let running = std::env::current_exe()
                .ok()
                .filter(|p| p.file_stem().is_some_and(|s| s == "infaas"));
            let Some(binary) = a.worker_binary.clone().or(running) else {
                tracing::error!("the running program is not the infaas binary: set autoscale.worker_binary to start worker processes");
                return (None, None);
            };
            let mut p = ProcessConfig::new(
                binary,
                controller.to_string(),
                state.cluster_token.clone(),
                cfg.object_store(),
                a.max_workers,
            );
            p.ort_dylib_path = cfg.ort_dylib_path.clone();
            p.s3_endpoint = cfg.s3_endpoint.clone();
            p.s3_region = cfg.s3_region.clone();
            p.stop_grace = Duration::from_secs(a.worker_stop_grace_secs);
            let mut env = vec![
                ("INFAAS_LOG_LEVEL".to_string(), cfg.log_level.clone()),
                (
                    "INFAAS_MAX_QUEUE_DELAY_US".into(),
                    cfg.max_queue_delay_us.to_string(),
                ),
                ("INFAAS_INLINE_MAX_US".into(), cfg.inline_max_us.to_string()),
                ("INFAAS_GATHER_ROWS".into(), cfg.gather_rows.to_string()),
                (
                    "INFAAS_QUEUE_CAPACITY_ROWS".into(),
                    cfg.queue_capacity_rows.to_string(),
                ),
            ];
            // Children share this machine's cores with the embedded worker; the provider
            // starts one only on cores nobody offers yet.
            p.offered_cores = cfg.worker_cores();
            p.cores_per_worker = a.provisioned_worker_cores.or(cfg.worker_cores);
            if let Some(t) = cfg.worker_thread_budget {
                env.push(("INFAAS_WORKER_THREAD_BUDGET".into(), t.to_string()));
            }
            if let Some(m) = cfg.worker_memory_bytes {
                env.push(("INFAAS_WORKER_MEMORY_BYTES".into(), m.to_string()));
            }
            p.env = env;
            let process = Arc::new(ProcessProvider::new(p));
            (
                Some(process.clone() as Arc<dyn WorkerProvider>),
                Some(process),
            )
        }
    }
}

impl Autoscaler {
    /// The autoscaler (when `autoscale.enabled`), its periods not started: the replica that
    /// leads the cluster starts them ([`Autoscaler::spawn_periods`]).
    pub fn new(state: ControlPlane, addr: SocketAddr) -> Option<Arc<Autoscaler>> {
        let cfg = state.config.autoscale.clone();
        if !cfg.enabled {
            tracing::info!("autoscaling is off");
            return None;
        }
        let (provider, process) = make_provider(&state, &controller_url(addr));
        let scaler = Arc::new(Autoscaler {
            model_loop: Mutex::new(ModelLoop::new(cfg.loop_config())),
            started: Instant::now(),
            prices: *state.cluster.prices(),
            cfg,
            provider,
            process,
            state,
            book: Mutex::new(Book::default()),
            last_take: Mutex::new(Instant::now()),
            last_input: Mutex::new(None),
        });
        tracing::info!(
            provider = scaler.provider.as_ref().map_or("none", |p| p.kind()),
            model_interval_ms = scaler.cfg.model_interval_ms,
            worker_interval_ms = scaler.cfg.worker_interval_ms,
            "autoscaling on"
        );
        Some(scaler)
    }

    /// Runs the model, worker and exact periods until `stop` is cancelled.
    pub fn spawn_periods(self: &Arc<Self>, stop: CancellationToken) {
        let (scaler, shutdown) = (self, stop);
        let every = |ms: u64| Duration::from_millis(ms.max(10));
        tokio::spawn(periodic(
            scaler.clone(),
            every(scaler.cfg.model_interval_ms),
            shutdown.clone(),
            |s| async move { s.run_model_period() },
        ));
        tokio::spawn(periodic(
            scaler.clone(),
            every(scaler.cfg.worker_interval_ms),
            shutdown.clone(),
            |s| async move { s.worker_period().await },
        ));
        if scaler.cfg.exact_interval_ms > 0 {
            let s = scaler.clone();
            let period = every(scaler.cfg.exact_interval_ms);
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        _ = shutdown.cancelled() => break,
                        _ = tokio::time::sleep(period) => {}
                    }
                    s.clone().exact_period().await;
                }
            });
        }
    }

    /// Stops the workers the process provider started (the others are left running).
    pub async fn shutdown(&self) {
        if let Some(p) = &self.process {
            p.shutdown().await;
        }
    }

    /// Names of the workers the provider runs now.
    pub async fn provisioned_workers(&self) -> Vec<String> {
        match &self.provider {
            Some(p) => p
                .list()
                .await
                .map(|l| l.into_iter().map(|w| w.name).collect())
                .unwrap_or_default(),
            None => Vec::new(),
        }
    }

    /// `(tenant, model)` and `(tenant, app)` of a variant of the snapshot.
    fn owner(&self, s: &Snapshot, v: usize) -> Option<(FamilyKey, AppKey)> {
        let served = self.state.cluster.served(&s.variants().get(v)?.id)?;
        let e = &served.entry;
        Some((
            (e.tenant_id.clone(), e.model.clone()),
            (e.tenant_id.clone(), e.app.clone()),
        ))
    }

    /// The snapshot as the model policies see it, and which of its workers are releasable:
    /// workers the provider started count as fully busy, so new instances go to the permanent
    /// workers while they have room, and scale-in empties them first (it saves their price;
    /// the worker autoscaler then stops them).
    fn policy_snapshot(&self) -> (Arc<Snapshot>, Vec<bool>) {
        let snapshot = self.state.cluster.snapshot();
        let provisioned: Vec<String> = lock(&self.book).provisioned.keys().cloned().collect();
        if provisioned.is_empty() {
            return (snapshot, Vec::new());
        }
        let ids = self.state.cluster.worker_ids_by_name();
        let mut releasable = vec![false; snapshot.workers().len()];
        for name in &provisioned {
            if let Some(w) = ids.get(name).and_then(|id| snapshot.worker_index(id)) {
                releasable[w] = true;
            }
        }
        match releasable_view(&snapshot, &releasable) {
            Some(view) => (Arc::new(view), releasable),
            None => (snapshot, releasable),
        }
    }

    /// One model-autoscaler period: the families' state gathered from the cluster and the
    /// book, [`model_period`] on it, and its actions resolved into jobs.
    fn run_model_period(self: &Arc<Self>) {
        let now = Instant::now();
        let (snapshot, releasable) = self.policy_snapshot();
        let arrivals = self.state.cluster.demand.take();
        let elapsed = {
            let mut last = lock(&self.last_take);
            let e = now.duration_since(*last).as_secs_f64().max(1e-3);
            *last = now;
            e
        };
        let threads = self.instance_threads(&snapshot);
        // Families with live instances, their instances, and their arrivals.
        let mut families: BTreeMap<FamilyKey, Gathered> = BTreeMap::new();
        for (i, inst) in snapshot.instances().iter().enumerate() {
            if inst.state == InstanceState::Inactive || !snapshot.workers()[inst.worker].alive {
                continue;
            }
            if let Some((family, app)) = self.owner(&snapshot, inst.variant) {
                families
                    .entry(family)
                    .or_insert_with(|| Gathered {
                        app,
                        ..Gathered::default()
                    })
                    .instances
                    .push(i);
            }
        }
        for (variant_id, a) in &arrivals {
            if let Some(s) = self.state.cluster.served(variant_id) {
                if let Some(g) =
                    families.get_mut(&(s.entry.tenant_id.clone(), s.entry.model.clone()))
                {
                    g.arrivals.merge(a);
                }
            }
        }
        let mut book = lock(&self.book);
        let (
            keys,
            LoopPeriod {
                plan: period,
                ages_ms: ages,
                ..
            },
        ) = decide_period(
            &mut lock(&self.model_loop),
            &book,
            &snapshot,
            &families,
            elapsed,
            &threads,
            &releasable,
            self.prices,
            now.duration_since(self.started).as_secs_f64() * 1e3,
        );
        if let Some(e) = &period.error {
            tracing::warn!(error = %e, "model autoscaling could not decide");
        }
        let mut claims = ClaimedRoom::default();
        let mut jobs: Vec<(FamilyKey, AppKey, ActionPlan)> = Vec::new();
        for (f, act) in &period.actions {
            let family = &keys[*f];
            let app = &families[family].app;
            self.resolve_into(
                &snapshot,
                act,
                &mut claims,
                &threads,
                family,
                app,
                &mut jobs,
                &mut book,
                now,
            );
        }
        for short in &period.shortages {
            let family = &keys[short.family];
            book.short_of(
                short.hardware,
                families[family].app.clone(),
                format!(
                    "{}/{}: the model autoscaler's plan leaves {:.0} rows/s without capacity",
                    family.0, family.1, short.missing_qps
                ),
                now,
            );
        }
        *lock(&self.last_input) = Some(LastInput {
            snapshot: snapshot.clone(),
            demands: period.demands,
            ages,
            releasable,
        });
        drop(book);
        self.spawn_jobs(&snapshot, jobs);
    }

    /// Every instance's intra-op threads now, by snapshot index.
    fn instance_threads(&self, s: &Snapshot) -> Vec<usize> {
        let threads = self.state.cluster.instance_threads();
        s.instances()
            .iter()
            .map(|inst| {
                threads
                    .get(&inst.id)
                    .copied()
                    .unwrap_or(s.variants()[inst.variant].threads)
            })
            .collect()
    }

    /// The family and application an action concerns.
    fn action_owner(&self, s: &Snapshot, a: &Action) -> Option<(FamilyKey, AppKey)> {
        self.owner(s, a.kind.variant(s)?)
    }

    /// Resolves one action of `family` into a job (or a shortage), unless the family already
    /// has a job this period from an earlier action (kept together in one job list entry).
    #[allow(clippy::too_many_arguments)]
    fn resolve_into(
        &self,
        s: &Snapshot,
        act: &Action,
        claims: &mut ClaimedRoom,
        threads: &[usize],
        family: &FamilyKey,
        app: &AppKey,
        jobs: &mut Vec<(FamilyKey, AppKey, ActionPlan)>,
        book: &mut Book,
        now: Instant,
    ) {
        let threads_of = |i: usize| {
            threads
                .get(i)
                .copied()
                .unwrap_or_else(|| s.variants()[s.instances()[i].variant].threads)
        };
        match resolve(s, act, claims, threads_of) {
            Resolution::Run(job) => jobs.push((family.clone(), app.clone(), job)),
            Resolution::Short {
                hardware, reason, ..
            } => {
                tracing::info!(tenant = %family.0, model = %family.1, %reason, "scaling waits for a worker");
                book.short_of(hardware, app.clone(), reason, now);
            }
            Resolution::Skip(why) => tracing::debug!(%why, "action skipped"),
        }
    }

    /// Runs jobs, one task per job (a family's jobs side by side: they touch different
    /// instances and their room was claimed apart), marking each family busy until the last of
    /// its jobs ends.
    fn spawn_jobs(self: &Arc<Self>, s: &Snapshot, jobs: Vec<(FamilyKey, AppKey, ActionPlan)>) {
        let now = Instant::now();
        let mut busy: HashMap<FamilyKey, Option<Arc<Busy>>> = HashMap::new();
        for (family, app, job) in jobs {
            let guard = busy.entry(family.clone()).or_insert_with(|| {
                lock(&self.book).begin(&family, now).then(|| {
                    Arc::new(Busy {
                        scaler: self.clone(),
                        family,
                    })
                })
            });
            let Some(guard) = guard.clone() else {
                continue;
            };
            let variant = s.variants()[job.variant].id.clone();
            let worker = s.workers()[job.worker].id.clone();
            let scaler = self.clone();
            tokio::spawn(async move {
                let result = scaler.run_steps(&job.steps).await;
                scaler
                    .record_job(&app, &job, &variant, &worker, result)
                    .await;
                drop(guard);
            });
        }
    }

    /// Carries out steps in order; stops at the first failure (what was loaded stays).
    async fn run_steps(&self, steps: &[Step]) -> Result<(), String> {
        let cluster = &self.state.cluster;
        for step in steps {
            // Once another replica could lead, it plans from what the workers report; a step
            // started here as well could be carried out twice.
            if !self.state.leadership.leads_now() {
                return Err(
                    "this replica no longer leads the cluster; the new leader plans again".into(),
                );
            }
            match step {
                Step::Load { worker, variant } => {
                    let handle = cluster
                        .handle(worker)
                        .ok_or_else(|| format!("worker {worker} has left"))?;
                    let served = cluster
                        .served(variant)
                        .ok_or_else(|| format!("variant {variant} is no longer served"))?;
                    let req = crate::serving::load_request(&served);
                    handle
                        .load(&req)
                        .await
                        .map_err(|e| format!("loading {} failed: {e}", req.variant_name))?;
                    cluster.loaded(worker, &req);
                }
                Step::Resize {
                    worker,
                    variant,
                    threads,
                } => {
                    let handle = cluster
                        .handle(worker)
                        .ok_or_else(|| format!("worker {worker} has left"))?;
                    handle
                        .resize(variant, *threads)
                        .await
                        .map_err(|e| format!("resizing to {threads} threads failed: {e}"))?;
                    cluster.resized(worker, variant, *threads);
                }
                Step::Unload { worker, variant } => {
                    cluster.drain_instance(worker, variant);
                    tokio::time::sleep(DRAIN_WAIT).await;
                    if let Some(handle) = cluster.handle(worker) {
                        handle
                            .unload(variant)
                            .await
                            .map_err(|e| format!("unloading failed: {e}"))?;
                    }
                    cluster.unloaded(worker, variant);
                }
            }
        }
        Ok(())
    }

    async fn record_job(
        &self,
        app: &AppKey,
        job: &ActionPlan,
        variant: &str,
        worker: &str,
        result: Result<(), String>,
    ) {
        let (action, reason) = match &result {
            Ok(()) => (job.action.to_string(), job.reason.clone()),
            Err(e) => {
                tracing::warn!(action = job.action, error = %e, "scaling action failed");
                (
                    format!("{}-failed", job.action),
                    format!("{}; failed: {e}", job.reason),
                )
            }
        };
        metrics::counter!("infaas_autoscaler_actions_total", "action" => action.clone())
            .increment(1);
        tracing::info!(tenant = %app.0, app = %app.1, %action, %reason, "scaling action");
        let worker_name = self
            .state
            .cluster
            .worker_name(worker)
            .unwrap_or_else(|| worker.to_string());
        events::record(
            events::DecidedBy::Leader,
            &self.state.db,
            Some(app),
            Some(variant),
            Some(&worker_name),
            &action,
            &reason,
            job.cost_before_per_s,
            job.cost_after_per_s,
        )
        .await;
    }

    /// One worker-autoscaler period.
    async fn worker_period(self: &Arc<Self>) {
        let now = Instant::now();
        let snapshot = self.state.cluster.snapshot();
        let by_name = self.state.cluster.worker_ids_by_name();
        let (waiting, failed, shortage) = {
            let mut book = lock(&self.book);
            book.observe_workers(&snapshot, now);
            for p in book.provisioned.values_mut() {
                if by_name.contains_key(&p.worker.name) {
                    p.registered = true;
                }
            }
            // Applications served by provisioned workers (their removal concerns them).
            for inst in snapshot.instances() {
                if inst.state == InstanceState::Inactive {
                    continue;
                }
                let worker = &snapshot.workers()[inst.worker];
                let name = self.state.cluster.worker_name(&worker.id);
                if let (Some(name), Some((_, app))) = (name, self.owner(&snapshot, inst.variant)) {
                    if let Some(p) = book.provisioned.get_mut(&name) {
                        p.apps.insert(app);
                    }
                }
            }
            let timeout = Duration::from_secs(self.cfg.worker_start_timeout_secs);
            let (waiting, failed) = book.starting(now, timeout);
            (waiting, failed, book.take_shortage(now))
        };
        for w in failed {
            self.stop_worker(
                w,
                None,
                "it did not register within the start timeout".into(),
            )
            .await;
        }
        let Some(provider) = self.provider.clone() else {
            return;
        };
        let views = {
            let book = lock(&self.book);
            WorkerView::from_snapshot(&snapshot, &self.prices, |w| {
                book.idle_for_s(&snapshot.workers()[w].id, now)
            })
        };
        let wcfg = WorkerConfig {
            utilisation: self.cfg.worker_utilisation,
            overloaded_fraction: self.cfg.overloaded_fraction,
            idle_cooldown_s: self.cfg.idle_cooldown_secs,
            min_workers: 1,
        };
        let mut apps: BTreeSet<AppKey> = BTreeSet::new();
        if let Some(short) = &shortage {
            apps.extend(short.apps.iter().cloned());
        }
        // Applications with Overloaded or Interfered instances also asked for the worker.
        for inst in snapshot.instances() {
            if matches!(
                inst.state,
                InstanceState::Overloaded | InstanceState::Interfered
            ) {
                if let Some((_, app)) = self.owner(&snapshot, inst.variant) {
                    apps.insert(app);
                }
            }
        }
        let (provisioned, provisioned_live) = {
            let book = lock(&self.book);
            let names: BTreeSet<&str> = book
                .provisioned
                .values()
                .filter(|p| !p.stopping)
                .map(|p| p.worker.name.as_str())
                .collect();
            let flags: Vec<bool> = snapshot
                .workers()
                .iter()
                .map(|w| {
                    self.state
                        .cluster
                        .worker_name(&w.id)
                        .is_some_and(|n| names.contains(n.as_str()))
                })
                .collect();
            (flags, names.len())
        };
        let decided = worker_period(
            &views,
            &WorkerPeriod {
                config: wcfg,
                shortage: shortage.as_ref().map(|s| (s.hardware, s.reason.as_str())),
                starting: waiting,
                provisioned: &provisioned,
                provisioned_live,
                min_provisioned: self.cfg.min_workers,
                new_worker_price: [
                    self.worker_price(HardwareKind::Cpu),
                    self.worker_price(HardwareKind::Gpu),
                ],
            },
        );
        for act in decided {
            match act.kind {
                ActionKind::AddWorker { hardware } => {
                    lock(&self.book).adding = true;
                    let result = provider.add(hardware).await;
                    let added_worker = {
                        let mut book = lock(&self.book);
                        book.adding = false;
                        if let Ok(w) = &result {
                            book.provisioned.insert(
                                w.name.clone(),
                                Provisioned {
                                    worker: w.clone(),
                                    apps: apps.clone(),
                                    started: Instant::now(),
                                    registered: false,
                                    stopping: false,
                                },
                            );
                        }
                        result
                    };
                    match added_worker {
                        Ok(w) => {
                            let reason = format!("{} ({} provider)", act.reason, provider.kind());
                            self.worker_event(&apps, &w.name, "add-worker", &reason, &act)
                                .await;
                        }
                        Err(infaas_provision::ProvisionError::Exhausted(why)) => {
                            tracing::debug!(%why, "no worker added");
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot add a worker");
                            let reason = format!("{}; failed: {e}", act.reason);
                            self.worker_event(&apps, "", "add-worker-failed", &reason, &act)
                                .await;
                        }
                    }
                }
                ActionKind::RemoveWorker { worker } => {
                    let Some(entry) = snapshot.workers().get(worker) else {
                        continue;
                    };
                    let Some(name) = self.state.cluster.worker_name(&entry.id) else {
                        continue;
                    };
                    let target = {
                        let mut book = lock(&self.book);
                        match book.provisioned.get_mut(&name) {
                            Some(p) if !p.stopping => {
                                p.stopping = true;
                                Some(p.worker.clone())
                            }
                            _ => None,
                        }
                    };
                    if let Some(w) = target {
                        self.state.cluster.drain_worker(&entry.id);
                        self.stop_worker(w, Some(&act), act.reason.clone()).await;
                    }
                }
                _ => {}
            }
        }
    }

    /// Price per second of one more worker of `hardware` like the provider starts.
    fn worker_price(&self, hardware: HardwareKind) -> f64 {
        let cfg = &self.state.config;
        let cores = self
            .cfg
            .provisioned_worker_cores
            .unwrap_or_else(|| cfg.worker_cores()) as f64;
        cores * self.prices.cpu_core_per_s
            + match hardware {
                HardwareKind::Gpu => self.prices.gpu_per_s,
                HardwareKind::Cpu => 0.0,
            }
    }

    /// Stops a provisioned worker and records it.
    async fn stop_worker(
        self: &Arc<Self>,
        w: ProvisionedWorker,
        act: Option<&Action>,
        reason: String,
    ) {
        let Some(provider) = self.provider.clone() else {
            return;
        };
        let apps = lock(&self.book)
            .provisioned
            .get(&w.name)
            .map(|p| p.apps.clone())
            .unwrap_or_default();
        let result = provider.remove(&w).await;
        lock(&self.book).provisioned.remove(&w.name);
        let (action, reason) = match result {
            Ok(()) => (
                "remove-worker",
                format!("{reason} ({} provider)", provider.kind()),
            ),
            Err(e) => {
                tracing::warn!(worker = %w.name, error = %e, "cannot stop a worker");
                ("remove-worker-failed", format!("{reason}; failed: {e}"))
            }
        };
        let price = self.worker_price(w.hardware);
        let fallback = Action {
            kind: ActionKind::AddWorker {
                hardware: w.hardware,
            },
            reason: String::new(),
            cost_before_per_s: price,
            cost_after_per_s: 0.0,
        };
        self.worker_event(&apps, &w.name, action, &reason, act.unwrap_or(&fallback))
            .await;
    }

    /// A worker event, once per application it concerns (once without one when none does).
    async fn worker_event(
        &self,
        apps: &BTreeSet<AppKey>,
        worker: &str,
        action: &str,
        reason: &str,
        act: &Action,
    ) {
        metrics::counter!("infaas_autoscaler_actions_total", "action" => action.to_string())
            .increment(1);
        tracing::info!(%worker, %action, %reason, "worker scaling");
        let worker = (!worker.is_empty()).then_some(worker);
        if apps.is_empty() {
            events::record(
                events::DecidedBy::Leader,
                &self.state.db,
                None,
                None,
                worker,
                action,
                reason,
                act.cost_before_per_s,
                act.cost_after_per_s,
            )
            .await;
        }
        for app in apps {
            events::record(
                events::DecidedBy::Leader,
                &self.state.db,
                Some(app),
                None,
                worker,
                action,
                reason,
                act.cost_before_per_s,
                act.cost_after_per_s,
            )
            .await;
        }
    }

    /// One exact-planner period: the ILP on the last model period's input.
    async fn exact_period(self: Arc<Self>) {
        let Some(input) = lock(&self.last_input).take() else {
            return;
        };
        if input.demands.is_empty() {
            return;
        }
        let prices = self.prices;
        let cfg = self.cfg.scaling();
        let snapshot = input.snapshot.clone();
        let solved = tokio::task::spawn_blocking(move || {
            let started = Instant::now();
            let greedy_plan = plan_demands(
                &input.snapshot,
                &input.releasable,
                &input.demands,
                &input.ages,
                prices,
                cfg,
                greedy,
            )?;
            let exact_plan = plan_demands(
                &input.snapshot,
                &input.releasable,
                &input.demands,
                &input.ages,
                prices,
                cfg,
                autoscale::exact,
            )?;
            Ok::<_, autoscale::ScalingError>((greedy_plan, exact_plan, started.elapsed()))
        })
        .await;
        let (greedy_plan, exact_plan, took) = match solved {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "the exact planner failed");
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "the exact planner task failed");
                return;
            }
        };
        let optimum = exact_plan.score.objective;
        let diff = greedy_plan.score.objective - optimum;
        let relative = if optimum.abs() > f64::MIN_POSITIVE {
            diff / optimum.abs()
        } else {
            0.0
        };
        metrics::gauge!("infaas_autoscaler_greedy_gap_ratio").set(relative);
        metrics::histogram!("infaas_autoscaler_exact_seconds").record(took.as_secs_f64());
        tracing::info!(
            greedy = greedy_plan.score.objective,
            optimum,
            gap = relative,
            ms = took.as_secs_f64() * 1e3,
            "exact planner: greedy's objective against the optimum"
        );
        if relative <= self.cfg.exact_apply_gap || lock(&self.book).any_busy() {
            return;
        }
        let threads = self.instance_threads(&snapshot);
        let mut claims = ClaimedRoom::default();
        let mut jobs = Vec::new();
        let now = Instant::now();
        {
            let mut book = lock(&self.book);
            for act in &exact_plan.actions {
                let Some((family, app)) = self.action_owner(&snapshot, act) else {
                    continue;
                };
                let mut act = act.clone();
                act.reason = format!(
                    "{}; exact planner: greedy's objective is {:.1}% above the optimum",
                    act.reason,
                    relative * 100.0
                );
                self.resolve_into(
                    &snapshot,
                    &act,
                    &mut claims,
                    &threads,
                    &family,
                    &app,
                    &mut jobs,
                    &mut book,
                    now,
                );
            }
        }
        self.spawn_jobs(&snapshot, jobs);
    }
}

/// Runs `period` every `every` until `shutdown`.
async fn periodic<F, Fut>(
    scaler: Arc<Autoscaler>,
    every: Duration,
    shutdown: CancellationToken,
    period: F,
) where
    F: Fn(Arc<Autoscaler>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            _ = tick.tick() => {}
        }
        period(scaler.clone()).await;
    }
}
