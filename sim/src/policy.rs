//! Policies the simulator compares: the platform's own (per-query selection and model
//! autoscaling, the scheduler's functions called as they are) and baselines.
//!
//! | name | routing | scaling |
//! |---|---|---|
//! | `static_peak` | least expected wait among the application's instances | none: the most accurate variant whose p99 at a full batch is within half the SLO, replicas for the trace's peak second, loaded before the first query (Clipper-like) |
//! | `horizontal` | least expected wait | one fixed variant (as `static_peak`'s), replicas for the last window's rate at 70% utilisation; out at once, in one at a time after 30 s (SageMaker-like) |
//! | `infaas_greedy` | [`select`](infaas_scheduler::select::select) | [`greedy`] over the window's demand |
//! | `infaas_exact` | [`select`](infaas_scheduler::select::select) | [`exact`] (the ILP) over the window's demand |
//! | `themis` ([`EXTRA`]) | least expected wait | one fixed variant (as `horizontal`'s); [`Themis`]' transition policy on a forecast of each application's rate: threads first on a surge, replicas once the forecast says it stays, back to base threads, scale-in after a calm spell ([`ThemisPolicy`]) |
//!
//! `infaas_*` run the controller's model loop as it is ([`ModelLoop`]: each family's planned
//! load, stability and forecast, Interfered periods, then [`model_period`]), fed what the
//! controller feeds it: each family's arrivals, instance ages and threads, and which families
//! have a change under way.

use std::cmp::Reverse;

use infaas_core::HardwareKind;
use infaas_scheduler::autoscale::{
    exact, greedy, model_period, releasable_view, resolve, worker_period, ActionKind, ClaimedRoom,
    FamilyState, LiveFamily, LoopConfig, LoopInput, ModelLoop, PeriodConfig, PeriodInput,
    PeriodPlan, Resolution, ScalingConfig, StageInstance, Step, Themis, ThemisAction, ThemisConfig,
    ThemisInput, ThreadProfile, VerticalConfig, WorkerConfig, WorkerPeriod, WorkerView,
};
use infaas_scheduler::forecast::{AutoForecaster, ForecastModel};
use infaas_scheduler::select::select_with;
use infaas_scheduler::{Decision, InstanceState, Query, Snapshot, Target, VariantEntry};

use crate::engine::{
    tightest_slos, Change, Fleet, Policy, Route, Window, WorkerChange, World, TENANT,
};
use crate::trace::Arrival;
use crate::trace::Trace;

/// The names [`by_name`] knows and the what-if API offers.
pub const NAMES: [&str; 4] = ["static_peak", "horizontal", "infaas_greedy", "infaas_exact"];

/// Further names [`by_name`] knows (evaluations, not offered by the what-if API, whose
/// schema lists [`NAMES`]).
pub const EXTRA: [&str; 1] = ["themis"];

/// The policy called `name`; the platform's policies plan with `scaling` (the server's
/// `autoscale.slack` and `autoscale.scale_down`).
pub fn by_name(name: &str, scaling: ScalingConfig) -> Option<Box<dyn Policy>> {
    Some(match name {
        "static_peak" => Box::new(StaticPeak),
        "horizontal" => Box::new(Horizontal::default()),
        "themis" => Box::new(ThemisPolicy::default()),
        "infaas_greedy" | "infaas_exact" => Box::new(Infaas::new(name == "infaas_exact", scaling)),
        _ => return None,
    })
}

/// The variant a fixed-variant policy runs for `app`: of those whose p99 at a full batch is
/// within half of `slo_ms` (a query may wait for the batch under way, then run in the next),
/// the most accurate, then the highest throughput; else the fastest at batch 1.
fn fixed_variant(s: &Snapshot, app: &str, slo_ms: Option<f64>) -> Option<usize> {
    let list = s.app_variants(TENANT, app);
    let v = s.variants();
    list.iter()
        .copied()
        .filter(|&i| slo_ms.is_none_or(|slo| 2.0 * v[i].latency_ms(v[i].max_batch) <= slo))
        .max_by(|&a, &b| {
            v[a].accuracy
                .total_cmp(&v[b].accuracy)
                .then(v[a].peak_qps().total_cmp(&v[b].peak_qps()))
                .then(b.cmp(&a))
        })
        .or_else(|| {
            list.iter()
                .copied()
                .min_by(|&a, &b| v[a].latency_ms(1).total_cmp(&v[b].latency_ms(1)))
        })
}

/// Per application of `trace`: the accuracy of the variant the fixed-variant baselines
/// (`static_peak`, `horizontal`, `themis`) serve it with (the most accurate variant whose p99
/// at a full batch is within half of the tightest SLO of its queries), so that the platform's
/// policy can be compared with them at equal accuracy (every query asking for at least that
/// much). `None` for an application without variants.
pub fn baseline_accuracy(trace: &Trace, variants: &[VariantEntry]) -> Vec<Option<f64>> {
    let mut b = Snapshot::builder();
    for v in variants {
        if b.add_variant(TENANT, v.clone()).is_err() {
            return vec![None; trace.apps.len()];
        }
    }
    let s = b.build();
    trace
        .apps
        .iter()
        .zip(tightest_slos(trace))
        .map(|(app, slo)| fixed_variant(&s, app, slo).map(|vi| s.variants()[vi].accuracy))
        .collect()
}

/// Free cores and memory per worker.
fn room(s: &Snapshot) -> Vec<(usize, u64)> {
    s.workers()
        .iter()
        .map(|w| (w.free_cores(), w.free_memory()))
        .collect()
}

/// Workers for `n` new instances of `v`, first fit, taking what they use from `room`.
fn place(s: &Snapshot, room: &mut [(usize, u64)], v: &VariantEntry, n: usize) -> Vec<usize> {
    let mut out = Vec::new();
    for (wi, w) in s.workers().iter().enumerate() {
        if !w.alive || !w.hardware.contains(&v.hardware) {
            continue;
        }
        while out.len() < n && room[wi].0 >= v.threads && room[wi].1 >= v.memory_bytes {
            room[wi].0 -= v.threads;
            room[wi].1 -= v.memory_bytes;
            out.push(wi);
        }
    }
    out
}

/// The live instance of `app` with the least expected wait (queued rows / saturation
/// throughput).
fn least_wait(s: &Snapshot, app: &str) -> Option<usize> {
    let v = s.variants();
    let mut best: Option<(f64, usize)> = None;
    for &vi in s.app_variants(TENANT, app) {
        let peak = v[vi].peak_qps().max(1e-9);
        for &i in s.variant_instances(vi) {
            if s.instances()[i].state == InstanceState::Inactive {
                continue;
            }
            let wait = s.queued(i) as f64 / peak;
            if best.is_none_or(|(w, _)| wait < w) {
                best = Some((wait, i));
            }
        }
    }
    best.map(|(_, i)| i)
}

fn app_slo(world: &World, app: usize) -> Option<f64> {
    world.app_slo.get(app).copied().flatten()
}

/// Provisioned for the peak, never changed.
pub struct StaticPeak;

impl Policy for StaticPeak {
    fn name(&self) -> String {
        "static_peak".into()
    }

    fn provision(&mut self, world: &World) -> Vec<Change> {
        let s = world.snapshot;
        let mut changes = Vec::new();
        let mut free = room(s);
        for (a, app) in world.apps.iter().enumerate() {
            let Some(vi) = fixed_variant(s, app, app_slo(world, a)) else {
                continue;
            };
            let v = &s.variants()[vi];
            let n = (world.peak_rate[a] / v.peak_qps().max(1e-9))
                .ceil()
                .max(1.0) as usize;
            for w in place(s, &mut free, v, n) {
                changes.push(Change::Load {
                    variant: vi,
                    worker: w,
                    warm: true,
                });
            }
        }
        changes
    }

    fn route(&mut self, world: &World, q: &Arrival) -> Route {
        least_wait(world.snapshot, &world.apps[q.app]).map_or(Route::Drop, Route::Instance)
    }
}

/// One fixed variant per application, replicas for the last window's rate.
#[derive(Default)]
pub struct Horizontal {
    /// Per application: the window when it last scaled in.
    last_in_ms: Vec<f64>,
}

/// Utilisation the replicas are sized for.
const TARGET_UTILISATION: f64 = 0.7;
/// Replicas of `v` that serve `rate` queries/s at [`TARGET_UTILISATION`] (at least one).
fn replicas_for(rate: f64, v: &VariantEntry) -> usize {
    (rate / (TARGET_UTILISATION * v.peak_qps().max(1e-9)))
        .ceil()
        .max(1.0) as usize
}

/// Time between two scale-ins of one application, ms.
const SCALE_IN_COOLDOWN_MS: f64 = 30_000.0;

impl Policy for Horizontal {
    fn name(&self) -> String {
        "horizontal".into()
    }

    fn provision(&mut self, world: &World) -> Vec<Change> {
        self.last_in_ms = vec![f64::NEG_INFINITY; world.apps.len()];
        let s = world.snapshot;
        let mut changes = Vec::new();
        let mut free = room(s);
        for (a, app) in world.apps.iter().enumerate() {
            if let Some(vi) = fixed_variant(s, app, app_slo(world, a)) {
                let v = &s.variants()[vi];
                let rate = world.opening_rate.get(a).copied().unwrap_or(0.0);
                for w in place(s, &mut free, v, replicas_for(rate, v)) {
                    changes.push(Change::Load {
                        variant: vi,
                        worker: w,
                        warm: true,
                    });
                }
            }
        }
        changes
    }

    fn route(&mut self, world: &World, q: &Arrival) -> Route {
        least_wait(world.snapshot, &world.apps[q.app]).map_or(Route::Drop, Route::Instance)
    }

    fn tick(&mut self, world: &World, window: &Window) -> Vec<Change> {
        let s = world.snapshot;
        let mut changes = Vec::new();
        let mut free = room(s);
        for (a, app) in world.apps.iter().enumerate() {
            let Some(vi) = fixed_variant(s, app, app_slo(world, a)) else {
                continue;
            };
            let v = &s.variants()[vi];
            let live: Vec<usize> = s
                .variant_instances(vi)
                .iter()
                .copied()
                .filter(|&i| s.instances()[i].state != InstanceState::Inactive)
                .collect();
            if world.busy.contains(&v.model) {
                continue;
            }
            let rate = window.app_rate.get(a).copied().unwrap_or(0.0);
            let want = replicas_for(rate, v);
            if want > live.len() {
                for w in place(s, &mut free, v, want - live.len()) {
                    changes.push(Change::Load {
                        variant: vi,
                        worker: w,
                        warm: false,
                    });
                }
            } else if want < live.len() && world.now_ms - self.last_in_ms[a] >= SCALE_IN_COOLDOWN_MS
            {
                if let Some(&i) = live.iter().min_by_key(|&&i| s.queued(i)) {
                    changes.push(Change::Unload { instance: i });
                    self.last_in_ms[a] = world.now_ms;
                }
            }
        }
        changes
    }
}

/// Themis (forecast-driven vertical-then-horizontal scaling): as `horizontal`, one fixed
/// variant per application routed by the least expected wait, but scaled once per window by
/// the transition policy [`Themis`] (threads first on a surge, replicas once the forecast
/// says it stays, then back to base threads, scale-in after a calm spell) fed each
/// application's arrival rate and an [`AutoForecaster`]'s forecast of the next
/// [`ThemisPolicy::horizon_s`] seconds. Threads follow Amdahl's law (the engine's parallel
/// fraction) up to [`VerticalConfig::max_threads`], within each worker's free and idle cores;
/// a GPU variant gets no threads (forecast-driven horizontal scaling only). Replicas are
/// placed before threads, each on the worker with the most free cores that does not run the
/// variant yet, so that hosts keep room to scale in place.
///
/// Durations are in seconds and turned into windows of the engine's monitoring period. By
/// default at most one replica goes per 30 calm seconds, near `horizontal`'s pace (one per 30
/// s), so that comparing the two shows mostly what threads and the forecast add; the
/// `vertical` and `forecast` switches take either away (ablations).
pub struct ThemisPolicy {
    /// The transition policy's thresholds (its interval counts are set from the durations
    /// below).
    pub config: ThemisConfig,
    /// Forecast ahead, s (Themis predicts the next ten seconds).
    pub horizon_s: f64,
    /// How long the forecast must stay above what the replicas serve before replicas are
    /// added, s.
    pub hold_s: f64,
    /// Calm time before a scale-in, s.
    pub scale_in_s: f64,
    /// Time a lower thread level must suffice before threads are given back, s.
    pub release_s: f64,
    /// The forecaster each application starts with (it refits itself as rates come in).
    pub initial_model: ForecastModel,
    /// Whether instances may get threads (false: forecast-driven horizontal scaling only, an
    /// ablation).
    pub vertical: bool,
    /// Whether rates are forecast (false: the naive forecast, the last window's rate, stands
    /// for every window ahead; an ablation).
    pub forecast: bool,
    apps: Vec<ThemisApp>,
    path: Vec<f64>,
}

/// One application's state under [`ThemisPolicy`].
struct ThemisApp {
    variant: Option<usize>,
    profile: Option<ThreadProfile>,
    /// Made at the first window, when its length is known.
    themis: Option<Themis>,
    forecaster: Option<AutoForecaster>,
    /// When each requested replica should serve, ms.
    pending: Vec<f64>,
    /// Live instances at the last window.
    live: usize,
}

/// Windows an application's forecaster keeps to refit on, and how often it refits.
const THEMIS_HISTORY: usize = 240;
const THEMIS_REFIT_EVERY: usize = 30;

impl Default for ThemisPolicy {
    fn default() -> Self {
        ThemisPolicy {
            config: ThemisConfig {
                scale_in_step: 1,
                ..ThemisConfig::default()
            },
            horizon_s: 10.0,
            hold_s: 5.0,
            scale_in_s: 30.0,
            release_s: 3.0,
            initial_model: ForecastModel::Ewma { alpha: 0.5 },
            vertical: true,
            forecast: true,
            apps: Vec::new(),
            path: Vec::new(),
        }
    }
}

impl ThemisPolicy {
    /// Windows of `window_s` seconds in `d` seconds (at least one).
    fn windows(d: f64, window_s: f64) -> usize {
        ((d / window_s.max(1e-3)).round() as usize).max(1)
    }

    /// The thresholds in windows of `window_s` seconds.
    fn config_for(&self, window_s: f64) -> ThemisConfig {
        ThemisConfig {
            hold_intervals: Self::windows(self.hold_s, window_s),
            scale_in_intervals: Self::windows(self.scale_in_s, window_s),
            release_intervals: Self::windows(self.release_s, window_s),
            ..self.config
        }
    }
}

/// Cores each worker can give to more threads: free within its budget and idle.
fn spare_cores(s: &Snapshot) -> Vec<usize> {
    s.workers()
        .iter()
        .map(|w| {
            if w.alive {
                w.free_cores().min(w.idle_cpu_cores())
            } else {
                0
            }
        })
        .collect()
}

/// A worker for a new instance of `v`: one that can host it (by `room`) and does not run it
/// yet (nor was given one this window, `taken`), the most free cores first, then the least
/// loaded; else any that can host it (the engine resizes an instance by worker and variant,
/// as the platform does, so a second instance of a variant on a worker is a last resort).
/// Takes the room.
fn place_spread(
    s: &Snapshot,
    room: &mut [(usize, u64)],
    taken: &[(usize, usize)],
    vi: usize,
) -> Option<usize> {
    let v = &s.variants()[vi];
    let fits = |w: usize| {
        let e = &s.workers()[w];
        e.alive
            && e.hardware.contains(&v.hardware)
            && room[w].0 >= v.threads
            && room[w].1 >= v.memory_bytes
    };
    let runs = |w: usize| {
        taken.contains(&(vi, w))
            || s.variant_instances(vi).iter().any(|&i| {
                let inst = &s.instances()[i];
                inst.worker == w && inst.state != InstanceState::Inactive
            })
    };
    let best = |exclusive: bool| {
        (0..s.workers().len())
            .filter(|&w| fits(w) && !(exclusive && runs(w)))
            .max_by(|&a, &b| {
                room[a]
                    .0
                    .cmp(&room[b].0)
                    .then(s.workers()[b].load().total_cmp(&s.workers()[a].load()))
                    .then(b.cmp(&a))
            })
    };
    let w = best(true).or_else(|| best(false))?;
    room[w].0 -= v.threads;
    room[w].1 -= v.memory_bytes;
    Some(w)
}

/// The thread profile of variant `vi`: Amdahl's law at the engine's parallel fraction up to
/// [`VerticalConfig::max_threads`] on a CPU (when `grow`), base threads only on a GPU.
fn thread_profile(s: &Snapshot, vi: usize, grow: bool) -> Option<ThreadProfile> {
    let vertical = VerticalConfig::default();
    let v = s.variants().get(vi)?;
    let max = if grow && v.hardware == HardwareKind::Cpu {
        vertical.max_threads.max(v.threads)
    } else {
        v.threads
    };
    ThreadProfile::amdahl(v.threads, v.peak_qps(), vertical.parallel_fraction, max).ok()
}

impl Policy for ThemisPolicy {
    fn name(&self) -> String {
        "themis".into()
    }

    fn provision(&mut self, world: &World) -> Vec<Change> {
        let s = world.snapshot;
        self.apps = (0..world.apps.len())
            .map(|a| {
                let variant = fixed_variant(s, &world.apps[a], app_slo(world, a));
                ThemisApp {
                    variant,
                    profile: variant.and_then(|vi| thread_profile(s, vi, self.vertical)),
                    themis: None,
                    forecaster: None,
                    pending: Vec::new(),
                    live: 0,
                }
            })
            .collect();
        let mut room = room(s);
        let mut taken = Vec::new();
        let mut changes = Vec::new();
        // As `horizontal`: replicas for the trace's opening rate.
        for (a, app) in self.apps.iter().enumerate() {
            let Some(vi) = app.variant else { continue };
            let rate = world.opening_rate.get(a).copied().unwrap_or(0.0);
            for _ in 0..replicas_for(rate, &s.variants()[vi]) {
                let Some(w) = place_spread(s, &mut room, &taken, vi) else {
                    break;
                };
                taken.push((vi, w));
                changes.push(Change::Load {
                    variant: vi,
                    worker: w,
                    warm: true,
                });
            }
        }
        changes
    }

    fn route(&mut self, world: &World, q: &Arrival) -> Route {
        least_wait(world.snapshot, &world.apps[q.app]).map_or(Route::Drop, Route::Instance)
    }

    fn tick(&mut self, world: &World, window: &Window) -> Vec<Change> {
        let s = world.snapshot;
        let mut spare = spare_cores(s);
        let mut room = room(s);
        let mut taken: Vec<(usize, usize)> = Vec::new();
        let mut changes = Vec::new();
        let mut decisions: Vec<(usize, Vec<ThemisAction>)> = Vec::new();
        let window_s = window.seconds;
        self.path
            .resize(Self::windows(self.horizon_s, window_s), 0.0);
        let config = self.config_for(window_s);
        for app in &mut self.apps {
            if app.themis.is_none() {
                app.themis = Themis::new(config).ok();
                let (model, refit) = if self.forecast {
                    (self.initial_model, THEMIS_REFIT_EVERY)
                } else {
                    (ForecastModel::LastValue, usize::MAX)
                };
                app.forecaster =
                    AutoForecaster::new(model, config.hold_intervals, THEMIS_HISTORY, refit).ok();
            }
        }
        let threads_of = |i: usize| {
            world
                .threads
                .get(i)
                .copied()
                .unwrap_or_else(|| s.variants()[s.instances()[i].variant].threads)
        };
        for (a, app) in self.apps.iter_mut().enumerate() {
            let (Some(vi), Some(profile), Some(themis), Some(forecaster)) = (
                app.variant,
                app.profile.as_ref(),
                app.themis.as_mut(),
                app.forecaster.as_mut(),
            ) else {
                continue;
            };
            let v = &s.variants()[vi];
            let rate = window.app_rate.get(a).copied().unwrap_or(0.0);
            forecaster.update(rate);
            forecaster.predict_path(&mut self.path);
            // Serving instances, the most queued first (the least queued are removed first).
            let mut live: Vec<usize> = s
                .variant_instances(vi)
                .iter()
                .copied()
                .filter(|&i| {
                    let inst = &s.instances()[i];
                    inst.state != InstanceState::Inactive && s.workers()[inst.worker].alive
                })
                .collect();
            live.sort_by_key(|&i| (Reverse(s.queued(i)), i));
            // Requested replicas that serve now, or should have long ago, are no longer
            // loading.
            let joined = live.len().saturating_sub(app.live);
            app.pending.drain(..joined.min(app.pending.len()));
            let late = world.now_ms - 2.0 * v.load_ms - 1_000.0;
            app.pending.retain(|&due| due > late);
            app.live = live.len();
            let instances: Vec<StageInstance> = live
                .iter()
                .map(|&i| StageInstance {
                    instance: i,
                    worker: s.instances()[i].worker,
                    threads: threads_of(i),
                })
                .collect();
            let backlog: usize = live.iter().map(|&i| s.queued(i)).sum();
            let Ok(decision) = themis.step(&ThemisInput {
                observed_qps: rate,
                backlog_rows: backlog as f64,
                forecast_qps: &self.path,
                instances: &instances,
                loading: app.pending.len(),
                free_cores: &spare,
                profile,
            }) else {
                continue;
            };
            decisions.push((a, decision.actions));
        }
        // Replicas first, for every application: cores are better spent on replicas than on
        // threads (Amdahl), so threads get what the new replicas leave.
        for (a, actions) in &decisions {
            let app = &mut self.apps[*a];
            let Some(vi) = app.variant else { continue };
            let v = &s.variants()[vi];
            for act in actions {
                let ThemisAction::AddReplicas { count, .. } = *act else {
                    continue;
                };
                for _ in 0..count {
                    let Some(w) = place_spread(s, &mut room, &taken, vi) else {
                        break;
                    };
                    taken.push((vi, w));
                    spare[w] = spare[w].saturating_sub(v.threads);
                    app.pending.push(world.now_ms + v.load_ms);
                    changes.push(Change::Load {
                        variant: vi,
                        worker: w,
                        warm: false,
                    });
                }
            }
        }
        for (a, actions) in decisions {
            let Some(vi) = self.apps[a].variant else {
                continue;
            };
            let v = &s.variants()[vi];
            for act in actions {
                let (instance, from, to) = match act {
                    ThemisAction::AddThreads { instance, from, to }
                    | ThemisAction::RemoveThreads { instance, from, to } => (instance, from, to),
                    ThemisAction::RemoveReplica { instance } => {
                        changes.push(Change::Unload { instance });
                        continue;
                    }
                    ThemisAction::AddReplicas { .. } => continue,
                };
                let w = s.instances()[instance].worker;
                // What the replicas left of the worker's cores.
                let to = if to > from {
                    let to = to.min(from + spare[w].min(room[w].0));
                    spare[w] -= to - from;
                    room[w].0 -= to - from;
                    to
                } else {
                    to
                };
                if to == from {
                    continue;
                }
                changes.push(Change::Steps {
                    model: v.model.clone(),
                    action: if to > from {
                        "add-threads"
                    } else {
                        "remove-threads"
                    },
                    steps: vec![Step::Resize {
                        worker: s.workers()[w].id.clone(),
                        variant: v.id.clone(),
                        threads: to,
                    }],
                });
            }
        }
        changes
    }
}

/// The platform's policies: [`select`](infaas_scheduler::select::select) for every query, and
/// once per window the controller's model loop ([`ModelLoop`]: each family's planned load,
/// stability and forecast, Interfered periods, then [`model_period`]: vertical first, then the
/// horizontal plan, then migration), its actions resolved into steps ([`resolve()`]) as the
/// controller resolves them.
pub struct Infaas {
    /// The ILP instead of the greedy heuristic.
    pub exact: bool,
    pub scaling: ScalingConfig,
    /// Themis' vertical scaling (the server's `autoscale.vertical`, on by default).
    pub vertical: bool,
    /// Whether each family's rate is forecast (as the controller does) to judge when added
    /// threads become base-thread replicas (Themis §5.1.3); false: stable periods only.
    pub forecast: bool,
    /// Made at the first window, with the window's length as its period.
    model_loop: Option<ModelLoop<String>>,
    /// The last window's plan, with its families' models in the plan's order.
    last_period: Option<(Vec<String>, PeriodPlan)>,
    /// The last model period found no room for an instance it needs: of this hardware, why
    /// (the worker period takes it, as the controller's book hands it over).
    shortage: Option<(HardwareKind, String)>,
}

impl Infaas {
    pub fn new(exact: bool, scaling: ScalingConfig) -> Self {
        Infaas {
            exact,
            scaling,
            vertical: true,
            forecast: true,
            model_loop: None,
            last_period: None,
            shortage: None,
        }
    }

    /// The settings of the model loop for windows of `window_s` seconds: the controller's
    /// defaults ([`PeriodConfig::platform`]) with this policy's scaling and switches.
    pub fn loop_config(&self, window_s: f64) -> LoopConfig {
        let mut period = PeriodConfig::platform(self.scaling);
        period.vertical_enabled = self.vertical;
        LoopConfig {
            period,
            period_ms: window_s * 1e3,
            forecast: self.forecast,
        }
    }

    /// The model period of the last window: its families' models (the plan's family indices
    /// are into them) and the plan, before its actions were resolved.
    pub fn last_period(&self) -> Option<&(Vec<String>, PeriodPlan)> {
        self.last_period.as_ref()
    }
}

/// One model's opening traffic, summed over the applications whose first query selection
/// loads it ([`Infaas`]'s warm start).
struct Opening {
    model: String,
    /// Mean rows/s over the opening seconds.
    rate: f64,
    /// Rows in the busiest opening second.
    peak: f64,
    /// The tightest SLO of those applications.
    slo_ms: Option<f64>,
    /// The highest minimum accuracy they asked for.
    min_accuracy: Option<f64>,
}

impl Policy for Infaas {
    fn name(&self) -> String {
        if self.exact {
            "infaas_exact"
        } else {
            "infaas_greedy"
        }
        .into()
    }

    /// What the platform holds after serving the trace's opening traffic: per application,
    /// the model selection loads for its first query (its SLO, no minimum accuracy), and the
    /// instances the model period plans for that model at the application's opening traffic
    /// (the larger of [`World::opening_rate`] and [`World::opening_peak_rate`], as the model
    /// period's planned load holds a recent busy second,
    /// [`PlannedLoad`](infaas_scheduler::autoscale::PlannedLoad)), loaded before the trace
    /// starts.
    /// Nothing on a cold start.
    fn provision(&mut self, world: &World) -> Vec<Change> {
        if world.cold_start {
            return Vec::new();
        }
        let s = world.snapshot;
        let mut opening: Vec<Opening> = Vec::new();
        for (a, app) in world.apps.iter().enumerate() {
            let slo = app_slo(world, a);
            let accuracy = world.opening_min_accuracy.get(a).copied().flatten();
            let query = Query {
                tenant: TENANT,
                target: Target::App(app),
                latency_slo_ms: slo,
                min_accuracy: accuracy,
                max_cost: None,
                rows: 1,
            };
            let Decision::Load { variant, .. } = select_with(s, &query, world.prices, false) else {
                continue;
            };
            let model = &s.variants()[variant].model;
            let rate = world.opening_rate.get(a).copied().unwrap_or(0.0);
            let peak = world.opening_peak_rate.get(a).copied().unwrap_or(0.0);
            match opening.iter_mut().find(|o| o.model == *model) {
                Some(o) => {
                    o.rate += rate;
                    o.peak += peak;
                    o.slo_ms = match (o.slo_ms, slo) {
                        (Some(x), Some(y)) => Some(x.min(y)),
                        (x, y) => x.or(y),
                    };
                    o.min_accuracy = match (o.min_accuracy, accuracy) {
                        (Some(x), Some(y)) => Some(x.max(y)),
                        (x, y) => x.or(y),
                    };
                }
                None => opening.push(Opening {
                    model: model.clone(),
                    rate,
                    peak,
                    slo_ms: slo,
                    min_accuracy: accuracy,
                }),
            }
        }
        let states: Vec<FamilyState> = opening
            .iter()
            .map(|o| FamilyState {
                tenant: TENANT,
                model: &o.model,
                instances: Vec::new(),
                load_qps: o.rate.max(o.peak).max(f64::MIN_POSITIVE),
                rate_qps: o.rate.max(f64::MIN_POSITIVE),
                stable_periods: 0,
                forecast_max_qps: None,
                slo_ms: o.slo_ms,
                min_accuracy: o.min_accuracy,
                busy: false,
                overloaded_lately: false,
            })
            .collect();
        let period = model_period(
            &PeriodInput {
                snapshot: s,
                families: &states,
                threads: &[],
                ages_ms: &[],
                releasable: world.provisioned,
                interfered_periods: &[],
                prices: *world.prices,
                config: self.loop_config(1.0).period,
            },
            if self.exact { exact } else { greedy },
        );
        period
            .actions
            .iter()
            .filter_map(|(_, a)| match a.kind {
                ActionKind::Replicate { variant, worker } => Some(Change::Load {
                    variant,
                    worker,
                    warm: true,
                }),
                _ => None,
            })
            .collect()
    }

    fn route(&mut self, world: &World, q: &Arrival) -> Route {
        let query = Query {
            tenant: TENANT,
            target: Target::App(&world.apps[q.app]),
            latency_slo_ms: q.slo_ms,
            min_accuracy: q.min_accuracy,
            max_cost: None,
            rows: 1,
        };
        match select_with(world.snapshot, &query, world.prices, false) {
            Decision::Serve { instance, .. } => Route::Instance(instance),
            Decision::Load {
                variant,
                worker,
                meanwhile,
                ..
            } => Route::Load {
                variant,
                worker,
                meanwhile,
            },
            Decision::Unsatisfiable { .. } | Decision::NotFound => Route::Drop,
        }
    }

    fn tick(&mut self, world: &World, window: &Window) -> Vec<Change> {
        // As the controller: workers the worker autoscaler started count as fully busy, so new
        // instances go to the permanent workers while they have room, and scale-in empties the
        // started ones first.
        let view = releasable_view(world.snapshot, world.provisioned);
        let s = view.as_ref().unwrap_or(world.snapshot);
        // Families (models) with live instances on live workers.
        let mut families: Vec<(&str, Vec<usize>)> = Vec::new();
        for (i, inst) in s.instances().iter().enumerate() {
            if inst.state == InstanceState::Inactive || !s.workers()[inst.worker].alive {
                continue;
            }
            let model = s.variants()[inst.variant].model.as_str();
            match families.iter_mut().find(|(m, _)| *m == model) {
                Some((_, list)) => list.push(i),
                None => families.push((model, vec![i])),
            }
        }
        families.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let live: Vec<LiveFamily<String>> = families
            .into_iter()
            .map(|(model, instances)| {
                let d = window.models.get(model).copied().unwrap_or_default();
                LiveFamily {
                    key: model.to_string(),
                    tenant: TENANT,
                    model,
                    instances,
                    rows_per_s: d.rows_per_s,
                    slo_ms: d.slo_ms,
                    min_accuracy: d.min_accuracy,
                    busy: world.busy.iter().any(|b| b == model),
                    loaded_for_queries: d.loads_for_queries > 0,
                }
            })
            .collect();
        let config = self.loop_config(window.seconds);
        let model_loop = self
            .model_loop
            .get_or_insert_with(|| ModelLoop::new(config));
        let period = model_loop
            .period(
                &LoopInput {
                    snapshot: s,
                    threads: world.threads,
                    releasable: world.provisioned,
                    prices: *world.prices,
                    now_ms: world.now_ms,
                },
                &live,
                if self.exact { exact } else { greedy },
            )
            .plan;
        let threads_of = |i: usize| {
            world
                .threads
                .get(i)
                .copied()
                .unwrap_or_else(|| s.variants()[s.instances()[i].variant].threads)
        };
        for short in &period.shortages {
            let why = format!(
                "{}: the model autoscaler's plan leaves {:.0} rows/s without capacity",
                live[short.family].model, short.missing_qps
            );
            self.shortage = Some((short.hardware, why));
        }
        let mut claims = ClaimedRoom::default();
        let mut changes = Vec::new();
        for (f, a) in &period.actions {
            match resolve(s, a, &mut claims, threads_of) {
                Resolution::Run(job) => changes.push(Change::Steps {
                    model: live[*f].model.to_string(),
                    action: job.action,
                    steps: job.steps,
                }),
                Resolution::Short {
                    hardware, reason, ..
                } => self.shortage = Some((hardware, reason)),
                Resolution::Skip(_) => {}
            }
        }
        self.last_period = Some((live.iter().map(|f| f.key.clone()).collect(), period));
        changes
    }

    fn workers(&mut self, world: &World, fleet: &Fleet) -> Vec<WorkerChange> {
        let s = world.snapshot;
        let views = WorkerView::from_snapshot(s, world.prices, |w| {
            fleet.idle_for_s.get(w).copied().unwrap_or(0.0)
        });
        let price = |gpu: bool| {
            views
                .iter()
                .filter(|v| v.hardware.contains(&HardwareKind::Gpu) == gpu)
                .map(|v| v.price_per_s)
                .next()
                .unwrap_or(0.0)
        };
        let provisioned_live = s
            .workers()
            .iter()
            .zip(world.provisioned)
            .filter(|(w, &p)| p && w.alive)
            .count();
        let shortage = self.shortage.take();
        worker_period(
            &views,
            &WorkerPeriod {
                config: WorkerConfig::default(),
                shortage: shortage.as_ref().map(|(h, why)| (*h, why.as_str())),
                starting: fleet.starting,
                provisioned: world.provisioned,
                provisioned_live,
                min_provisioned: 0,
                new_worker_price: [price(false), price(true)],
            },
        )
        .into_iter()
        .filter_map(|a| match a.kind {
            ActionKind::AddWorker { hardware } => Some(WorkerChange::Add(hardware)),
            ActionKind::RemoveWorker { worker } => Some(WorkerChange::Remove(worker)),
            _ => None,
        })
        .collect()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {

    use super::*;
    use crate::catalogue::{Accelerator, Profile};
    use crate::engine::{simulate, variants_for, Cluster};
    use crate::generate::Generator;
    use crate::report::PolicyReport;
    use crate::trace::Trace;

    /// A profile whose batch of `b` rows takes `base_ms * (1 + 0.25 (b - 1))`.
    fn profile(model: &str, acc: Accelerator, accuracy: f64, base_ms: f64) -> Profile {
        Profile::linear(model, "m", acc, accuracy, base_ms, 0.25)
    }

    /// Two models of one family: a small fast one and a large accurate one, on CPU and GPU.
    fn catalogue() -> Vec<Profile> {
        vec![
            profile("m-small", Accelerator::Cpu, 0.70, 4.0),
            profile("m-large", Accelerator::Cpu, 0.90, 40.0),
            profile("m-large", Accelerator::GpuAmpere, 0.90, 4.0),
        ]
    }

    fn cluster() -> Cluster {
        Cluster {
            cpu_workers: 4,
            cpu_cores: 16,
            gpu_workers: 4,
            load_ms_cpu: 1_000.0,
            load_ms_gpu: 2_000.0,
            ..Cluster::default()
        }
    }

    fn run(policy: &str, trace: &Trace) -> PolicyReport {
        let variants = variants_for(trace, &catalogue(), &cluster()).unwrap();
        let mut p = by_name(policy, ScalingConfig::default()).unwrap();
        simulate(trace, variants, &cluster(), p.as_mut(), &mut |_, _| {}).unwrap()
    }

    fn trace(spec: &str) -> Trace {
        spec.parse::<Generator>().unwrap().generate()
    }

    #[test]
    fn static_peak_meets_the_slo_and_pays_for_the_peak_throughout() {
        // m-large on the GPU: 8 rows in 11 ms, p99 at a full batch 12.1 ms: ~727 rows/s.
        let t = trace("poisson:rate=1000,duration=30,app=m,slo=100");
        let r = run("static_peak", &t);
        assert_eq!(r.summary.queries as usize, t.arrivals.len());
        assert!(r.summary.slo_attainment > 0.99, "{:?}", r.summary);
        assert_eq!(r.apps.len(), 1);
        assert_eq!(
            (r.apps[0].app.as_str(), r.apps[0].queries),
            ("m", r.summary.queries)
        );
        assert_eq!(r.apps[0].slo_attainment, r.summary.slo_attainment);
        assert!((r.summary.mean_accuracy.unwrap() - 0.90).abs() < 1e-9);
        // Replicas for the busiest second, each holding one GPU and one core the whole run.
        let peak = t.per_second()[0].iter().copied().max().unwrap() as f64;
        let replicas = (peak / (8.0 * 1e3 / 11.0)).ceil();
        let prices = cluster().prices;
        let rate = prices.gpu_per_s
            + prices.cpu_core_per_s
            + 2.0 * prices.memory_gb_per_s * (1u64 << 30) as f64 / 1e9;
        let expected = replicas * rate * t.duration_ms() / 1e3;
        assert!(
            (r.summary.cost_usd / expected - 1.0).abs() < 0.05,
            "{} vs {expected}",
            r.summary.cost_usd
        );
        assert_eq!(r.summary.actions, replicas as u64);
    }

    #[test]
    fn the_platform_costs_less_than_static_peak_at_low_load_with_equal_attainment() {
        // A low, steady load with a loose SLO: the platform's cheapest variant that meets it.
        let t = trace("poisson:rate=50,duration=60,app=m,slo=200");
        let platform = run("infaas_greedy", &t);
        let fixed = run("static_peak", &t);
        assert!(
            platform.summary.cost_usd < 0.5 * fixed.summary.cost_usd,
            "{} vs {}",
            platform.summary.cost_usd,
            fixed.summary.cost_usd
        );
        // Only the first queries wait for the first load.
        assert!(
            platform.summary.slo_attainment > 0.97,
            "{:?}",
            platform.summary
        );
        assert!(fixed.summary.slo_attainment > 0.99, "{:?}", fixed.summary);
    }

    #[test]
    fn the_platform_starts_provisioned_for_the_opening_rate_and_counts_its_misses_by_cause() {
        let t = trace("poisson:rate=50,duration=30,app=m,slo=200");
        let r = run("infaas_greedy", &t);
        // Loaded before the first query: nothing waits for a load in the first second.
        assert!(
            r.actions_by_kind.get("provision").copied().unwrap_or(0) >= 1,
            "{:?}",
            r.actions_by_kind
        );
        assert!(
            r.series[0].slo_attainment.unwrap() > 0.9,
            "{:?} {:?}",
            r.series[0],
            r.actions_by_kind
        );
        // Every miss has one cause.
        let late = r.summary.queries
            - r.summary.dropped
            - (r.summary.slo_attainment * r.summary.queries as f64).round() as u64;
        assert_eq!(
            r.misses_by_cause.values().sum::<u64>(),
            late,
            "{:?}",
            r.misses_by_cause
        );
    }

    /// The opening traffic's busiest second counts, not only its mean: a platform that served
    /// those seconds holds capacity for their peak (the planned load's peak hold), so a step
    /// inside them finds it loaded.
    #[test]
    fn the_warm_start_holds_the_opening_seconds_busiest_one() {
        // A mean of 1,575 rows/s over the first ten seconds, 3,000 from second 5: about two
        // m-small CPU instances' worth against four.
        let t = trace("step:from=150,to=3000,at=5,duration=20,app=m,slo=50");
        let r = run("infaas_greedy", &t);
        let step = &r.series[5..8];
        assert!(
            step.iter()
                .all(|p| p.slo_attainment.is_some_and(|a| a > 0.99)),
            "{:?} {:?}",
            step.iter()
                .map(|p| (p.slo_attainment, p.cpu_instances))
                .collect::<Vec<_>>(),
            r.misses_by_cause
        );
    }

    /// Before a query that cannot wait for a load was served meanwhile by a busy instance
    /// (`Decision::Load::meanwhile`), every query of the step queued at the one instance being
    /// loaded and the platform's attainment alternated between 0.1 and 0.97 from window to
    /// window for as long as the load lasted.
    #[test]
    fn after_a_step_past_one_instance_the_slo_is_met_again_within_seconds() {
        // From 10x below one m-small CPU instance's capacity (~1,455 rows/s at batch 8) to 2x
        // above it, at second 20.
        let t = trace("step:from=150,to=3000,at=20,duration=60,app=m,slo=50");
        for policy in ["infaas_greedy", "horizontal"] {
            let r = run(policy, &t);
            let recovered = r
                .series
                .iter()
                .skip(20)
                .position(|p| p.slo_attainment.is_some_and(|a| a > 0.99))
                .map(|s| s as f64);
            let after = r.series[35..55]
                .iter()
                .all(|p| p.slo_attainment.is_some_and(|a| a > 0.99));
            assert!(
                recovered.is_some_and(|s| s <= 10.0) && after,
                "{policy}: {:?}",
                r.series[18..40]
                    .iter()
                    .map(|p| (p.slo_attainment, p.cpu_instances, p.gpu_instances))
                    .collect::<Vec<_>>()
            );
        }
    }

    /// The controller's vertical step runs in the simulator: on a surge an Overloaded CPU
    /// instance gets threads at once (its batches run faster from that second) while replicas
    /// load, so the second of the step, before any replica can answer (CPU loads take 1 s
    /// here), is served better than without it. After that the replicas decide: the threads
    /// are split back into replicas on other workers (a worker runs one instance of a
    /// variant), so the run as a whole ends within half a point of the one without threads.
    #[test]
    fn vertical_scaling_serves_a_surge_while_replicas_load() {
        let t = trace("step:from=150,to=3000,at=20,duration=40,app=m,slo=50");
        let run_with = |vertical: bool| {
            let variants = variants_for(&t, &catalogue(), &cluster()).unwrap();
            let mut p = Infaas::new(false, ScalingConfig::default());
            p.vertical = vertical;
            simulate(&t, variants, &cluster(), &mut p, &mut |_, _| {}).unwrap()
        };
        let (with, without) = (run_with(true), run_with(false));
        assert!(with.actions_by_kind.contains_key("add-threads"));
        assert!(!without.actions_by_kind.contains_key("add-threads"));
        let step = |r: &PolicyReport| r.series[20].slo_attainment.unwrap_or(0.0);
        assert!(
            step(&with) > step(&without) + 0.03,
            "{} vs {}",
            step(&with),
            step(&without)
        );
        assert!(
            (with.summary.slo_attainment - without.summary.slo_attainment).abs() < 0.005,
            "{} vs {}",
            with.summary.slo_attainment,
            without.summary.slo_attainment
        );
    }

    /// The controller's worker period runs in the simulator: a load that outgrows the one
    /// worker leaves the model autoscaler short of room, the worker autoscaler starts
    /// workers, and the SLO is met again once they join.
    #[test]
    fn the_worker_autoscaler_adds_workers_when_the_model_autoscaler_has_no_room() {
        let t = trace("step:from=200,to=2500,at=10,duration=120,app=m,slo=100");
        let run_on = |max: usize| {
            let c = Cluster {
                cpu_workers: 1,
                cpu_cores: 8,
                gpu_workers: 0,
                max_cpu_workers: max,
                worker_start_ms: 5_000.0,
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name("infaas_greedy", ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let (fixed, grown) = (run_on(1), run_on(4));
        let tail = |r: &PolicyReport| -> f64 {
            let (met, n) = r.series[100..120].iter().fold((0.0, 0.0), |(m, n), p| {
                let a = p.arrivals as f64;
                (m + p.slo_attainment.unwrap_or(0.0) * a, n + a)
            });
            met / n
        };
        let workers: Vec<u32> = grown.series.iter().map(|p| p.cpu_workers).collect();
        assert!(
            fixed.series.iter().all(|p| p.cpu_workers == 1)
                && workers[0] == 1
                && workers[60..120].iter().all(|&w| w >= 2),
            "{workers:?}"
        );
        assert!(
            tail(&grown) > 0.95 && tail(&fixed) < 0.5,
            "{} vs {}",
            tail(&grown),
            tail(&fixed)
        );
    }

    /// Every query's latency gets one draw of the request path's overhead: a constant one
    /// shifts every latency by itself, and a query whose run fits the SLO with no room for it
    /// then misses.
    #[test]
    fn the_request_path_adds_its_overhead_to_every_query() {
        let t = trace("poisson:rate=200,duration=20,app=m,slo=100");
        let run_with = |overhead: Vec<f64>| {
            let c = Cluster {
                request_overhead_ms: overhead,
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name("static_peak", ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let (bare, five, slow) = (
            run_with(Vec::new()),
            run_with(vec![5.0]),
            run_with(vec![1.0, 200.0]),
        );
        let p50 = |r: &PolicyReport| r.summary.p50_ms.unwrap();
        assert!(
            (p50(&five) - p50(&bare) - 5.0).abs() < 0.5,
            "{} vs {}",
            p50(&five),
            p50(&bare)
        );
        assert_eq!(five.summary.slo_attainment, bare.summary.slo_attainment);
        // Half the draws are over the SLO.
        assert!(
            (slow.summary.slo_attainment - 0.5).abs() < 0.05,
            "{:?}",
            slow.summary
        );
    }

    /// The request path's core time shares the worker's cores with its instances: on a one-core
    /// worker a 1-thread instance busy 60 % of the time serves slower by the edge's share (150
    /// queries/s x 2 core-ms: 0.3 of the core), on a 16-core worker the edge takes spare cores
    /// and nothing changes.
    #[test]
    fn the_request_path_takes_its_core_time_from_the_instances_when_the_cores_are_full() {
        let t = trace("poisson:rate=150,duration=30,app=m,slo=1000");
        // One CPU model whose batches cost their rows (batching adds no throughput).
        let catalogue = vec![Profile::linear(
            "m-small",
            "m",
            Accelerator::Cpu,
            0.7,
            4.0,
            1.0,
        )];
        let run_with = |cores: usize, request_cpu_ms: f64| {
            let c = Cluster {
                cpu_workers: 1,
                cpu_cores: cores,
                cpu_threads: 1,
                gpu_workers: 0,
                request_cpu_ms,
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue, &c).unwrap();
            let mut p = by_name("static_peak", ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let p50 = |r: &PolicyReport| r.summary.p50_ms.unwrap();
        let (bare, shared) = (run_with(1, 0.0), run_with(1, 2.0));
        // Service alone goes from 4 ms to about 5.2 ms, and the queue in front of it grows.
        assert!(
            p50(&shared) > 1.25 * p50(&bare),
            "{} vs {}",
            p50(&shared),
            p50(&bare)
        );
        let (wide, wide_shared) = (run_with(16, 0.0), run_with(16, 2.0));
        assert_eq!(p50(&wide_shared), p50(&wide));
        assert_eq!(wide.summary.p99_ms, wide_shared.summary.p99_ms);
    }

    /// A cold start: the platform's policy provisions nothing and its first query loads what
    /// it needs (the first queries wait for the load, 1 s on the CPU); the baselines provision
    /// as always.
    #[test]
    fn on_a_cold_start_the_first_queries_load_what_they_need() {
        let t = trace("poisson:rate=100,duration=20,app=m,slo=100");
        let run_with = |policy: &str, cold_start: bool| {
            let c = Cluster {
                cold_start,
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name(policy, ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let (warm, cold) = (
            run_with("infaas_greedy", false),
            run_with("infaas_greedy", true),
        );
        let count = |r: &PolicyReport, kind: &str| r.actions_by_kind.get(kind).copied();
        assert!(
            count(&warm, "provision") > Some(0),
            "{:?}",
            warm.actions_by_kind
        );
        assert_eq!(
            count(&cold, "provision"),
            None,
            "{:?}",
            cold.actions_by_kind
        );
        assert!(
            count(&cold, "load-on-demand") > Some(0),
            "{:?}",
            cold.actions_by_kind
        );
        // The queries of the first second waited for the load; later ones are served.
        assert!(warm.series[0].slo_attainment.unwrap() > 0.99);
        assert!(
            cold.series[0].slo_attainment.unwrap() < 0.5,
            "{:?}",
            cold.series[0]
        );
        assert!(cold.series[10..20]
            .iter()
            .all(|p| p.slo_attainment.is_some_and(|a| a > 0.95)));
        let fixed = |cold_start| run_with("static_peak", cold_start).actions_by_kind;
        assert_eq!(fixed(true), fixed(false));
    }

    /// The test cluster with worker 1 three times slower from second 15 on (SIMULATED noise).
    fn noisy_worker_1() -> Cluster {
        Cluster {
            noise: vec![crate::engine::Noise {
                worker: 1,
                from_ms: 15_000.0,
                until_ms: f64::INFINITY,
                factor: 3.0,
            }],
            ..cluster()
        }
    }

    /// SIMULATED interference: a noisy neighbour slows every batch on the worker that holds
    /// the platform's instance; the state machine finds it Interfered and the controller's
    /// model period migrates it after `MigrationConfig::periods` windows, so the SLO is met
    /// again, where a policy without migration keeps missing it.
    #[test]
    fn an_interfered_instance_is_migrated_off_a_noisy_worker() {
        let t = trace("poisson:rate=20,duration=60,app=m,slo=10");
        // Worker 1 holds one of the instances at second 15 (the run is deterministic).
        let c = noisy_worker_1();
        let run_on = |policy: &str, c: &Cluster| {
            let variants = variants_for(&t, &catalogue(), c).unwrap();
            let mut p = by_name(policy, ScalingConfig::default()).unwrap();
            simulate(&t, variants, c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let quiet = run_on("infaas_greedy", &cluster());
        let noisy = run_on("infaas_greedy", &c);
        let window = |r: &PolicyReport, from: usize, to: usize| -> f64 {
            let (met, n) = r.series[from..to].iter().fold((0.0, 0.0), |(m, n), p| {
                let a = p.arrivals as f64;
                (m + p.slo_attainment.unwrap_or(0.0) * a, n + a)
            });
            met / n
        };
        // The replica the first second's queries loaded on demand is kept (a load for
        // queries holds the family's capacity through the peak hold), so the noise slows one
        // of two instances: it costs misses at once, and after three Interfered windows the
        // slowed instance moves.
        assert!(
            window(&noisy, 15, 35) < window(&quiet, 15, 35) - 0.02,
            "{:?}",
            noisy.series[15..35]
                .iter()
                .map(|p| p.slo_attainment)
                .collect::<Vec<_>>()
        );
        assert!(
            noisy.actions_by_kind.get("migrate").copied().unwrap_or(0) >= 1,
            "{:?}",
            noisy.actions_by_kind
        );
        assert!(
            !quiet.actions_by_kind.contains_key("migrate"),
            "{:?}",
            quiet.actions_by_kind
        );
        assert_eq!(
            quiet.series[30].cpu_instances, 2,
            "the replica loaded for queries is held past the scale-in hold"
        );
        // Placement then avoids the noisy worker for a minute (`interference_seen`).
        assert!(
            window(&noisy, 35, 60) > 0.99,
            "{:?}",
            noisy.series[15..60]
                .iter()
                .map(|p| p.slo_attainment)
                .collect::<Vec<_>>()
        );
        assert!(window(&quiet, 15, 60) > 0.99);
    }

    /// The platform's warm start serves what the opening queries ask for: with a minimum
    /// accuracy only the large model meets, it is the one loaded before the first query, so
    /// the first second's queries do not wait for its load (they all did before).
    #[test]
    fn the_warm_start_meets_the_opening_queries_minimum_accuracy() {
        let t = trace("poisson:rate=20,duration=30,app=m,slo=100,min_accuracy=0.9");
        let c = cluster();
        let variants = variants_for(&t, &catalogue(), &c).unwrap();
        let mut p = by_name("infaas_greedy", ScalingConfig::default()).unwrap();
        let r = simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap();
        assert!(
            r.series[0].slo_attainment.unwrap() > 0.9,
            "{:?} {:?}",
            r.series[0],
            r.actions_by_kind
        );
        assert!(r.summary.mean_accuracy.unwrap() >= 0.9, "{:?}", r.summary);
    }

    /// SIMULATED interference under moderate load: the instance that a noisy neighbour slows
    /// is avoided while Interfered, so it idles (and returns to Active, to be probed) or
    /// overloads under the load it carried before, then is Interfered again. Those periods
    /// hold its count of Interfered periods (`interfered_periods_after`) instead of resetting
    /// it, so it still moves; and the worker it left is avoided by placement for a minute
    /// (`WorkerEntry::interference_seen`), so it moves once. Before both, it never reached
    /// three Interfered periods in a row at 40 and 60 queries/s (SLO attainment 87.8 % and
    /// 88.0 %); with the first alone, 93.3 % and 95.3 % with 3 and 2 moves, as new instances
    /// were placed on the noisy worker again; with both, 95.9 % and 96.6 %, one move each.
    #[test]
    fn an_instance_slowed_under_moderate_load_is_migrated() {
        for rate in [40, 60] {
            let t = trace(&format!("poisson:rate={rate},duration=60,app=m,slo=10"));
            let c = noisy_worker_1();
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name("infaas_greedy", ScalingConfig::default()).unwrap();
            let r = simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap();
            assert!(
                r.summary.slo_attainment > 0.95,
                "{rate} queries/s: {:?} {:?}",
                r.summary,
                r.actions_by_kind
            );
            assert_eq!(
                r.actions_by_kind.get("migrate"),
                Some(&1),
                "{rate} queries/s: {:?}",
                r.actions_by_kind
            );
        }
    }

    /// The controller's job runner works an offline job through on spare capacity: with
    /// little online traffic it finishes without hurting the online SLO; when online traffic
    /// takes the cores it pauses far longer, and finishes later.
    #[test]
    fn an_offline_job_runs_on_spare_capacity_and_pauses_for_online_load() {
        use crate::engine::OfflineJob;
        let run_with = |spec: &str| {
            let t = trace(spec);
            let c = Cluster {
                cpu_workers: 1,
                cpu_cores: 8,
                gpu_workers: 0,
                jobs: vec![OfflineJob {
                    app: "m".into(),
                    rows: 20_000,
                    at_ms: 5_000.0,
                }],
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name("infaas_greedy", ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let quiet = run_with("poisson:rate=20,duration=60,app=m,slo=100");
        let busy = run_with("step:from=20,to=1500,at=4,duration=60,app=m,slo=100");
        let (q, b) = (&quiet.jobs[0], &busy.jobs[0]);
        assert_eq!((q.done_rows, b.done_rows), (20_000, 20_000), "{q:?} {b:?}");
        // Alone it does not pause, and its batches stay on its instance: its own back-to-back
        // batches make that instance Overloaded, which the gate and the placement leave to
        // the online figures. (Before: 25 s of pauses, done at 59 s instead of 33.5 s, and
        // five loads where two do.)
        assert!(q.paused_s < 1.0, "{q:?}");
        let loads = |r: &PolicyReport| -> u64 {
            ["load-for-job", "load-on-demand"]
                .iter()
                .filter_map(|k| r.actions_by_kind.get(*k))
                .sum()
        };
        assert!(loads(&quiet) <= 2, "{:?}", quiet.actions_by_kind);
        assert!(b.paused_s > 10.0, "{b:?}");
        assert!(
            b.finished_s.unwrap() > q.finished_s.unwrap() + 5.0,
            "{q:?} {b:?}"
        );
        // Online queries queue behind the job's batches; the gate (pause above 1 % of SLO
        // misses) keeps the harm near that limit.
        assert!(quiet.summary.slo_attainment > 0.98, "{:?}", quiet.summary);
    }

    /// The model period (`autoscale.model_interval_ms`): a window sees a step only once it
    /// ends, so a shorter period starts the step's loads sooner and fewer queries wait for them.
    #[test]
    fn a_shorter_model_period_misses_less_of_a_step() {
        let t = trace("step:from=100,to=1500,at=20,duration=60,app=m,slo=100,seed=2");
        let missed = |tick_ms: f64| {
            let c = Cluster {
                tick_ms,
                ..cluster()
            };
            let variants = variants_for(&t, &catalogue(), &c).unwrap();
            let mut p = by_name("infaas_greedy", ScalingConfig::default()).unwrap();
            let r = simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap();
            r.misses_by_cause.values().sum::<u64>()
        };
        let (second, quarter) = (missed(1_000.0), missed(250.0));
        eprintln!("misses: 1 s period {second}, 250 ms {quarter}");
        assert!(
            second > 50,
            "the step must cost misses at a 1-s period: {second}"
        );
        assert!(
            (quarter as f64) < 0.7 * second as f64,
            "1 s: {second}, 250 ms: {quarter}"
        );
    }

    #[test]
    fn a_run_is_repeatable() {
        let t = trace("gamma:rate=300,cv=3,duration=20,app=m,slo=100,seed=3");
        let (mut a, mut b) = (run("infaas_greedy", &t), run("infaas_greedy", &t));
        a.summary.sim_queries_per_s = 0.0;
        b.summary.sim_queries_per_s = 0.0;
        assert_eq!(a, b);
    }

    /// Themis on a CPU cluster of 1-thread instances: a step to 6x the load gets threads at
    /// the first window and replicas for what stays, so the seconds after the step are served
    /// far better than by horizontal scaling, which waits for its replicas to load; once they
    /// serve, the threads go back.
    #[test]
    fn themis_absorbs_a_step_with_threads_then_returns_them() {
        let t = trace("step:from=100,to=600,at=20,duration=60,app=m,slo=100");
        let c = Cluster {
            cpu_workers: 8,
            cpu_cores: 16,
            gpu_workers: 0,
            cpu_threads: 1,
            load_ms_cpu: 2_000.0,
            ..Cluster::default()
        };
        let cpu: Vec<Profile> = catalogue()
            .into_iter()
            .filter(|p| p.accelerator == Accelerator::Cpu)
            .collect();
        let run_on = |policy: &str| {
            let variants = variants_for(&t, &cpu, &c).unwrap();
            let mut p = by_name(policy, ScalingConfig::default()).unwrap();
            simulate(&t, variants, &c, p.as_mut(), &mut |_, _| {}).unwrap()
        };
        let (themis, horizontal) = (run_on("themis"), run_on("horizontal"));
        let missed = |r: &PolicyReport, from: usize, to: usize| -> f64 {
            r.series[from..to]
                .iter()
                .map(|p| (1.0 - p.slo_attainment.unwrap_or(0.0)) * p.arrivals as f64)
                .sum()
        };
        // The first quarter-second window after the step sees it: threads act at once, where
        // replicas take 2 s to load, from the step's own second on.
        let (th, ho) = (missed(&themis, 20, 30), missed(&horizontal, 20, 30));
        assert!(
            missed(&themis, 20, 21) * 3.0 < missed(&horizontal, 20, 21),
            "the step's own second"
        );
        assert!(th * 3.0 < ho, "themis {th} vs horizontal {ho} missed");
        let kinds = &themis.actions_by_kind;
        assert!(
            kinds.get("add-threads").is_some_and(|&n| n >= 1)
                && kinds.get("remove-threads").is_some_and(|&n| n >= 1)
                && kinds.get("replicate").is_some_and(|&n| n >= 1),
            "{kinds:?}"
        );
        assert!(
            themis.summary.slo_attainment > horizontal.summary.slo_attainment,
            "{:?} vs {:?}",
            themis.summary,
            horizontal.summary
        );
    }

    #[test]
    fn every_name_is_a_policy() {
        for n in NAMES.iter().chain(&EXTRA) {
            assert_eq!(by_name(n, ScalingConfig::default()).unwrap().name(), *n);
        }
        assert!(by_name("clipper", ScalingConfig::default()).is_none());
    }
}
