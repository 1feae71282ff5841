//! An ONNX Runtime session on its own OS thread.
//!
//! `Session::run` takes `&mut self`, so one thread owns each session and callers reach it over
//! a channel carrying the inputs, a reply sender and the caller's tracing span. [`Engine`] is a
//! cheap handle; dropping the last one closes the channel and stops the thread.
//!
//! Inputs are checked against the model's [`Signature`] on the caller's side, so malformed
//! requests are answered without queueing behind other work.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use infaas_core::{DataType, Tensor, TensorData};
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{OutputSelector, RunOptions, Session};
use ort::value::{DynValue, TensorElementType, ValueType};
use serde::{Deserialize, Serialize};

use crate::denormals::FlushToZero;
use crate::runtime::{self, RuntimeError};
use crate::simulated::LatencyProfile;

/// Graph optimisation level of a session (ONNX Runtime's `GraphOptimizationLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptLevel {
    Disable,
    Basic,
    Extended,
    #[default]
    All,
}

/// Where a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hardware {
    #[default]
    Cpu,
    /// CUDA first, CPU for unsupported operators. Without feature `cuda` or without a usable
    /// GPU the session runs on CPU and one warning is logged.
    Cuda,
}

/// How to build a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionConfig {
    /// Threads used inside one operator; 0 lets ONNX Runtime choose (one per physical core).
    pub intra_threads: usize,
    pub optimization: OptLevel,
    pub hardware: Hardware,
    /// Where ONNX Runtime writes the optimised graph (for the graph-optimised variant).
    /// `Extended` is portable; `All` may produce hardware-specific operators.
    pub optimized_model_out: Option<PathBuf>,
    /// A simulated device: every run is held until this profile's latency for its batch size
    /// has passed (see [`crate::simulated`]). `None` for real hardware.
    pub simulated: Option<Arc<LatencyProfile>>,
}

impl Default for SessionConfig {
    /// One intra-op thread: several instances usually share a machine's cores.
    fn default() -> Self {
        SessionConfig {
            intra_threads: 1,
            optimization: OptLevel::All,
            hardware: Hardware::Cpu,
            optimized_model_out: None,
            simulated: None,
        }
    }
}

/// One input or output of a model as ONNX Runtime reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TensorSpec {
    pub name: String,
    pub dtype: DataType,
    /// `None` marks a dynamic dimension (usually the batch).
    pub dims: Vec<Option<usize>>,
}

impl TensorSpec {
    pub fn new(name: impl Into<String>, dtype: DataType, dims: Vec<Option<usize>>) -> TensorSpec {
        TensorSpec {
            name: name.into(),
            dtype,
            dims,
        }
    }

    /// The shape as text, `?` for dynamic dimensions: `[?, 64]`.
    pub fn dims_text(&self) -> String {
        let dims: Vec<String> = self
            .dims
            .iter()
            .map(|d| d.map_or_else(|| "?".to_string(), |d| d.to_string()))
            .collect();
        format!("[{}]", dims.join(", "))
    }
}

/// The tensor inputs and outputs of a model, in the model's order.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Signature {
    pub inputs: Vec<TensorSpec>,
    pub outputs: Vec<TensorSpec>,
}

impl Signature {
    pub fn input(&self, name: &str) -> Option<&TensorSpec> {
        self.inputs.iter().find(|s| s.name == name)
    }

    pub fn output(&self, name: &str) -> Option<&TensorSpec> {
        self.outputs.iter().find(|s| s.name == name)
    }

    /// Checks a request against the inputs: every input exactly once, with the declared
    /// element type, rank, fixed dimensions, and as many elements as its shape says.
    pub fn check_inputs(&self, inputs: &[Tensor]) -> Result<(), EngineError> {
        let mut seen = HashSet::new();
        for t in inputs {
            if self.input(&t.name).is_none() {
                return Err(bad_input(
                    &t.name,
                    format!(
                        "the model has no such input; its inputs are {}",
                        self.input_names()
                    ),
                ));
            }
            if !seen.insert(t.name.as_str()) {
                return Err(bad_input(&t.name, "given more than once"));
            }
        }
        for spec in &self.inputs {
            let Some(t) = inputs.iter().find(|t| t.name == spec.name) else {
                return Err(bad_input(
                    &spec.name,
                    format!("missing; the model needs {}", self.input_names()),
                ));
            };
            check_tensor(spec, t)?;
        }
        Ok(())
    }

    fn input_names(&self) -> String {
        let names: Vec<String> = self
            .inputs
            .iter()
            .map(|s| format!("'{}'", s.name))
            .collect();
        names.join(", ")
    }
}

fn check_tensor(spec: &TensorSpec, t: &Tensor) -> Result<(), EngineError> {
    if t.dtype() != spec.dtype {
        return Err(bad_input(
            &t.name,
            format!("expected {}, got {}", spec.dtype, t.dtype()),
        ));
    }
    if t.shape.len() != spec.dims.len() {
        return Err(bad_input(
            &t.name,
            format!(
                "expected rank {} (shape {}), got rank {} (shape {:?})",
                spec.dims.len(),
                spec.dims_text(),
                t.shape.len(),
                t.shape
            ),
        ));
    }
    for (axis, (&got, want)) in t.shape.iter().zip(&spec.dims).enumerate() {
        if let Some(want) = *want {
            if got != want {
                return Err(bad_input(
                    &t.name,
                    format!(
                        "dimension {axis} is {got} but the model expects {want} (shape {})",
                        spec.dims_text()
                    ),
                ));
            }
        }
    }
    let expected: usize = t.shape.iter().product();
    if expected != t.data.len() {
        return Err(bad_input(
            &t.name,
            format!(
                "shape {:?} holds {expected} elements but {} were given",
                t.shape,
                t.data.len()
            ),
        ));
    }
    Ok(())
}

fn bad_input(tensor: &str, reason: impl Into<String>) -> EngineError {
    EngineError::BadInput {
        tensor: tensor.to_string(),
        reason: reason.into(),
    }
}

/// What can go wrong building or running a session.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("ONNX Runtime could not load the model: {source}")]
    Load {
        #[source]
        source: ort::Error,
    },
    /// The model loads but uses something infaas tensors cannot carry (e.g. float16 inputs).
    #[error("the model cannot be served: {0}")]
    Unsupported(String),
    #[error("bad input tensor '{tensor}': {reason}")]
    BadInput { tensor: String, reason: String },
    #[error("inference failed: {source}")]
    Run {
        #[source]
        source: ort::Error,
    },
    #[error("output '{name}' could not be read: {reason}")]
    Output { name: String, reason: String },
    #[error("could not start the engine thread")]
    Spawn(#[source] std::io::Error),
    #[error("the engine thread stopped")]
    Stopped,
}

type RunResult = Result<Vec<Tensor>, EngineError>;

enum Reply {
    Blocking(mpsc::SyncSender<RunResult>),
    Async(tokio::sync::oneshot::Sender<RunResult>),
}

impl Reply {
    fn is_closed(&self) -> bool {
        match self {
            Reply::Blocking(_) => false,
            Reply::Async(tx) => tx.is_closed(),
        }
    }

    fn send(self, result: RunResult) {
        // The caller may have gone (a cancelled request); nothing else to do then.
        let _ = match self {
            Reply::Blocking(tx) => tx.send(result).map_err(drop),
            Reply::Async(tx) => tx.send(result).map_err(drop),
        };
    }
}

struct Command {
    inputs: Vec<Tensor>,
    reply: Reply,
    span: tracing::Span,
}

/// The session, owned by its thread (the only strong reference), which takes the lock for
/// each run; an [`InlineRunner`] may borrow it while the thread has nothing to run.
struct SessionSlot {
    session: Mutex<DirectSession>,
    /// Duration of the latest run, in nanoseconds.
    last_run_ns: AtomicU64,
    /// Runs carried out on the session's own thread (the others ran inline).
    thread_runs: AtomicU64,
}

impl SessionSlot {
    /// Runs on the session's thread: waits for the lock.
    fn run(&self, inputs: Vec<Tensor>) -> RunResult {
        self.thread_runs.fetch_add(1, Ordering::Relaxed);
        match self.session.lock() {
            Ok(mut session) => self.run_on(&mut session, inputs),
            Err(_) => Err(EngineError::Stopped),
        }
    }

    /// Runs on `session` (this slot's, locked by the caller) and records the run's duration.
    fn run_on(&self, session: &mut DirectSession, inputs: Vec<Tensor>) -> RunResult {
        let started = Instant::now();
        let result = session.run(inputs);
        self.record(started);
        result
    }

    fn record(&self, started: Instant) {
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_run_ns.store(ns, Ordering::Relaxed);
    }
}

struct Inner {
    // Only ever None during drop.
    tx: Option<mpsc::Sender<Command>>,
    thread: Option<JoinHandle<()>>,
    signature: Signature,
    load_time: Duration,
    slot: Weak<SessionSlot>,
    simulated: bool,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Closing the channel ends the thread's loop; joining frees the session before we return
        // (what the profiler's memory figure and tests rely on).
        drop(self.tx.take());
        if let Some(thread) = self.thread.take() {
            if thread.join().is_err() {
                tracing::error!("engine thread panicked");
            }
        }
    }
}

/// A loaded model: a cheap, cloneable handle to the thread that owns the session.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("signature", &self.inner.signature)
            .field("load_time", &self.inner.load_time)
            .finish_non_exhaustive()
    }
}

impl Engine {
    /// Builds a session from model bytes on a new thread; blocks until it is ready.
    /// Initialises ONNX Runtime from the default locations if that has not happened yet.
    pub fn load(model: Vec<u8>, cfg: &SessionConfig) -> Result<Engine, EngineError> {
        let env = runtime::environment()?;
        let span = tracing::info_span!("engine", model_bytes = model.len());
        let simulated = cfg.simulated.is_some();
        let cfg = cfg.clone();
        let (ready_tx, ready_rx) = mpsc::sync_channel(1);
        let (tx, rx) = mpsc::channel::<Command>();
        let thread = std::thread::Builder::new()
            .name("infaas-engine".to_string())
            .spawn(move || {
                let started = Instant::now();
                let built = span.in_scope(|| DirectSession::build(env, &cfg, &model));
                drop(model);
                let session = match built {
                    Ok(ok) => ok,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                let load_time = started.elapsed();
                let signature = session.signature().clone();
                let slot = Arc::new(SessionSlot {
                    session: Mutex::new(session),
                    last_run_ns: AtomicU64::new(0),
                    thread_runs: AtomicU64::new(0),
                });
                let ready = (signature, load_time, Arc::downgrade(&slot));
                if ready_tx.send(Ok(ready)).is_err() {
                    return;
                }
                serve(&slot, rx, cfg.simulated.as_deref());
            })
            .map_err(EngineError::Spawn)?;

        let (signature, load_time, slot) = match ready_rx.recv() {
            Ok(Ok(ready)) => ready,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(e);
            }
            Err(_) => {
                let _ = thread.join();
                return Err(EngineError::Stopped);
            }
        };
        tracing::debug!(
            load_ms = load_time.as_secs_f64() * 1e3,
            inputs = signature.inputs.len(),
            outputs = signature.outputs.len(),
            "session ready"
        );
        Ok(Engine {
            inner: Arc::new(Inner {
                tx: Some(tx),
                thread: Some(thread),
                signature,
                load_time,
                slot,
                simulated,
            }),
        })
    }

    /// How long the session's latest run took (zero before the first, or once stopped).
    pub fn last_run(&self) -> Duration {
        self.inner.slot.upgrade().map_or(Duration::ZERO, |s| {
            Duration::from_nanos(s.last_run_ns.load(Ordering::Relaxed))
        })
    }

    /// How many runs the session's own thread has carried out; runs on callers' threads
    /// ([`InlineRunner`]) are not counted.
    pub fn thread_runs(&self) -> u64 {
        self.inner
            .slot
            .upgrade()
            .map_or(0, |s| s.thread_runs.load(Ordering::Relaxed))
    }

    /// A handle that can run requests on the caller's thread while this session is idle
    /// (see [`InlineRunner`]). It does not keep the engine alive.
    pub fn inline_runner(&self) -> InlineRunner {
        InlineRunner {
            slot: self.inner.slot.clone(),
            simulated: self.inner.simulated,
            signature: self.inner.signature.clone(),
        }
    }

    /// Time to build the session (parse, optimise, initialise kernels).
    pub fn load_time(&self) -> Duration {
        self.inner.load_time
    }

    pub fn signature(&self) -> &Signature {
        &self.inner.signature
    }

    /// Runs the model, blocking the calling thread. In async code use [`Engine::run`]
    /// (this would block an executor thread).
    pub fn run_blocking(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, EngineError> {
        self.inner.signature.check_inputs(&inputs)?;
        let (tx, rx) = mpsc::sync_channel(1);
        self.send(inputs, Reply::Blocking(tx))?;
        rx.recv().map_err(|_| EngineError::Stopped)?
    }

    /// Runs the model on its thread and waits for the outputs without blocking the executor.
    pub async fn run(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, EngineError> {
        self.inner.signature.check_inputs(&inputs)?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.send(inputs, Reply::Async(tx))?;
        rx.await.map_err(|_| EngineError::Stopped)?
    }

    fn send(&self, inputs: Vec<Tensor>, reply: Reply) -> Result<(), EngineError> {
        let tx = self.inner.tx.as_ref().ok_or(EngineError::Stopped)?;
        tx.send(Command {
            inputs,
            reply,
            span: tracing::Span::current(),
        })
        .map_err(|_| EngineError::Stopped)
    }
}

/// Runs a request on the caller's thread, on an engine's session, when nothing else holds
/// it and its latest run was short.
///
/// A request sent to the session's thread crosses threads twice (there and back); on a
/// virtual machine each crossing that wakes a sleeping thread costs tens of microseconds,
/// more than a small model's whole run. The batcher calls this for a request that arrives
/// alone at an idle instance, so the lone query skips both crossings; under load, and for
/// runs longer than the bound, everything goes through the thread as before. Never used for
/// a simulated device (its runs are held, not computed).
#[derive(Clone)]
pub struct InlineRunner {
    slot: Weak<SessionSlot>,
    simulated: bool,
    signature: Signature,
}

/// What [`InlineRunner::try_run`] did.
pub enum Inline {
    /// Ran here: the outputs or the engine's error.
    Ran(Result<Vec<Tensor>, EngineError>),
    /// Not run (the session is busy or gone, or its runs take longer than the bound): the
    /// inputs, to send to the session's thread.
    Declined(Vec<Tensor>),
}

impl InlineRunner {
    /// Runs `inputs` now on this thread if the session is free and its latest run took at
    /// most `below` (zero: never). Bad inputs are answered without touching the session.
    pub fn try_run(&self, inputs: Vec<Tensor>, below: Duration) -> Inline {
        if below.is_zero() || self.simulated {
            return Inline::Declined(inputs);
        }
        let Some(slot) = self.slot.upgrade() else {
            return Inline::Declined(inputs);
        };
        if Duration::from_nanos(slot.last_run_ns.load(Ordering::Relaxed)) > below {
            return Inline::Declined(inputs);
        }
        if let Err(e) = self.signature.check_inputs(&inputs) {
            return Inline::Ran(Err(e));
        }
        let Ok(mut session) = slot.session.try_lock() else {
            return Inline::Declined(inputs);
        };
        Inline::Ran(slot.run_on(&mut session, inputs))
    }
}

/// ONNX Runtime called directly on the caller's thread, with the same session settings and
/// tensor conversions as [`Engine`] but no thread, queue or batcher: the reference that
/// benchmarks measure the serving path against.
pub struct DirectSession {
    session: Session,
    signature: Signature,
    selected: Option<RunOptions<ort::session::HasSelectedOutputs>>,
}

impl DirectSession {
    pub fn load(model: &[u8], cfg: &SessionConfig) -> Result<DirectSession, EngineError> {
        DirectSession::build(runtime::environment()?, cfg, model)
    }

    fn build(
        env: &ort::environment::Environment,
        cfg: &SessionConfig,
        model: &[u8],
    ) -> Result<DirectSession, EngineError> {
        let session = build_session(env, cfg, model)?;
        let signature = read_signature(&session)?;
        let selected = output_selection(&session, &signature);
        Ok(DirectSession {
            session,
            signature,
            selected,
        })
    }

    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    pub fn run(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, EngineError> {
        let _flush = FlushToZero::enter();
        run_session(
            &mut self.session,
            &self.signature,
            self.selected.as_ref(),
            inputs,
        )
    }
}

/// Run options that fetch only the tensor outputs, when the model also has non-tensor ones
/// (e.g. skl2onnx's ZipMap).
fn output_selection(
    session: &Session,
    signature: &Signature,
) -> Option<RunOptions<ort::session::HasSelectedOutputs>> {
    if signature.outputs.len() < session.outputs().len() {
        let selector = signature
            .outputs
            .iter()
            .fold(OutputSelector::no_default(), |s, o| s.with(o.name.clone()));
        match RunOptions::new() {
            Ok(options) => Some(options.with_outputs(selector)),
            Err(e) => {
                tracing::error!(error = %e, "could not create run options");
                None
            }
        }
    } else {
        None
    }
}

fn serve(slot: &SessionSlot, rx: mpsc::Receiver<Command>, simulated: Option<&LatencyProfile>) {
    let mut slower_than_profile = 0u64;
    while let Ok(Command {
        inputs,
        reply,
        span,
    }) = rx.recv()
    {
        if reply.is_closed() {
            continue;
        }
        let started = Instant::now();
        let rows = inputs
            .first()
            .and_then(|t| t.shape.first().copied())
            .unwrap_or(1);
        let result = span.in_scope(|| {
            let _run = tracing::trace_span!("onnx_run").entered();
            slot.run(inputs)
        });
        if let Some(profile) = simulated {
            span.in_scope(|| hold(profile, rows, started, &mut slower_than_profile));
            slot.record(started);
        }
        reply.send(result);
    }
}

/// Holds the engine thread (the simulated device) until the profile's median latency for a
/// batch of `rows` has passed since `started`.
fn hold(profile: &LatencyProfile, rows: usize, started: Instant, slower: &mut u64) {
    let target = Duration::from_secs_f64(profile.p50_ms(rows) / 1e3);
    let elapsed = started.elapsed();
    if elapsed < target {
        std::thread::sleep(target - elapsed);
        return;
    }
    *slower += 1;
    // The first time in full, then every thousandth: a slow CPU keeps it slow.
    if *slower == 1 || slower.is_multiple_of(1000) {
        tracing::warn!(
            profile = %profile.source,
            rows,
            run_ms = elapsed.as_secs_f64() * 1e3,
            profile_ms = target.as_secs_f64() * 1e3,
            times = *slower,
            "the simulated GPU is slower than its profile: the CPU run took longer than the profiled latency"
        );
    }
}

fn run_session(
    session: &mut Session,
    signature: &Signature,
    selected: Option<&RunOptions<ort::session::HasSelectedOutputs>>,
    inputs: Vec<Tensor>,
) -> RunResult {
    let mut values: Vec<(String, DynValue)> = Vec::with_capacity(inputs.len());
    for t in inputs {
        let name = t.name.clone();
        let value = to_value(t).map_err(|e| bad_input(&name, e.to_string()))?;
        values.push((name, value));
    }
    let outputs = match selected {
        Some(options) => session.run_with_options(values, options),
        None => session.run(values),
    }
    .map_err(|source| EngineError::Run { source })?;

    signature
        .outputs
        .iter()
        .map(|spec| {
            let value = outputs.get(&spec.name).ok_or_else(|| EngineError::Output {
                name: spec.name.clone(),
                reason: "ONNX Runtime returned no such output".to_string(),
            })?;
            from_value(&spec.name, value)
        })
        .collect()
}

fn build_session(
    env: &ort::environment::Environment,
    cfg: &SessionConfig,
    model: &[u8],
) -> Result<Session, EngineError> {
    let load = |source: ort::Error| EngineError::Load { source };
    let level = match cfg.optimization {
        OptLevel::Disable => GraphOptimizationLevel::Disable,
        OptLevel::Basic => GraphOptimizationLevel::Level1,
        OptLevel::Extended => GraphOptimizationLevel::Level2,
        OptLevel::All => GraphOptimizationLevel::All,
    };
    let mut builder = Session::builder(env)
        .map_err(load)?
        .with_optimization_level(level)
        .map_err(|e| load(e.into()))?
        .with_intra_threads(cfg.intra_threads)
        .map_err(|e| load(e.into()))?
        .with_inter_threads(1)
        .map_err(|e| load(e.into()))?
        // Idle intra-op threads sleep instead of spinning: instances share cores with each
        // other and with the HTTP server, and a spinning pool starves both.
        .with_intra_op_spinning(false)
        .map_err(|e| load(e.into()))?
        // Subnormals flushed on the intra-op pool's threads; the running thread's own flags
        // are set for each run (`crate::denormals`).
        .with_flush_to_zero()
        .map_err(|e| load(e.into()))?;
    if let Some(path) = &cfg.optimized_model_out {
        builder = builder
            .with_optimized_model_path(path)
            .map_err(|e| load(e.into()))?;
    }
    if cfg.hardware == Hardware::Cuda {
        builder = with_cuda(builder);
    }
    builder.commit_from_memory(model).map_err(load)
}

#[cfg(feature = "cuda")]
fn with_cuda(builder: SessionBuilder) -> SessionBuilder {
    use ort::ep::{CPU, CUDA};

    let providers = [
        CUDA::default().build().error_on_failure(),
        CPU::default().build(),
    ];
    match builder.with_execution_providers(providers) {
        Ok(builder) => builder,
        Err(e) => {
            tracing::warn!(
                error = %e,
                "CUDA requested but the CUDA execution provider is unavailable; running on CPU"
            );
            e.recover()
        }
    }
}

#[cfg(not(feature = "cuda"))]
fn with_cuda(builder: SessionBuilder) -> SessionBuilder {
    tracing::warn!(
        "CUDA requested but infaas-executors was built without feature `cuda`; running on CPU"
    );
    builder
}

fn read_signature(session: &Session) -> Result<Signature, EngineError> {
    let inputs = session
        .inputs()
        .iter()
        .map(|o| {
            tensor_spec("input", o.name(), o.dtype())?.ok_or_else(|| {
                EngineError::Unsupported(format!(
                    "input '{}' is a {}, not a tensor",
                    o.name(),
                    o.dtype()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut outputs = Vec::new();
    for o in session.outputs() {
        match tensor_spec("output", o.name(), o.dtype())? {
            Some(spec) => outputs.push(spec),
            None => {
                tracing::debug!(output = o.name(), dtype = %o.dtype(), "skipping non-tensor output")
            }
        }
    }
    if outputs.is_empty() {
        return Err(EngineError::Unsupported(
            "the model has no tensor outputs".to_string(),
        ));
    }
    Ok(Signature { inputs, outputs })
}

/// `Ok(None)` for non-tensor values (maps, sequences).
fn tensor_spec(
    role: &str,
    name: &str,
    dtype: &ValueType,
) -> Result<Option<TensorSpec>, EngineError> {
    let ValueType::Tensor { ty, shape, .. } = dtype else {
        return Ok(None);
    };
    let dtype = data_type(*ty).ok_or_else(|| {
        EngineError::Unsupported(format!(
            "{role} '{name}' has element type {ty}, which infaas tensors cannot carry"
        ))
    })?;
    let dims = shape.iter().map(|&d| usize::try_from(d).ok()).collect();
    Ok(Some(TensorSpec::new(name, dtype, dims)))
}

fn data_type(ty: TensorElementType) -> Option<DataType> {
    Some(match ty {
        TensorElementType::Bool => DataType::Bool,
        TensorElementType::Uint8 => DataType::Uint8,
        TensorElementType::Int8 => DataType::Int8,
        TensorElementType::Int16 => DataType::Int16,
        TensorElementType::Int32 => DataType::Int32,
        TensorElementType::Int64 => DataType::Int64,
        TensorElementType::Float32 => DataType::Fp32,
        TensorElementType::Float64 => DataType::Fp64,
        TensorElementType::String => DataType::Bytes,
        _ => return None,
    })
}

fn to_value(t: Tensor) -> Result<DynValue, ort::Error> {
    use ort::value::Tensor as OrtTensor;

    let shape = t.shape;
    Ok(match t.data {
        TensorData::Bool(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Uint8(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Int8(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Int16(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Int32(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Int64(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Fp32(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Fp64(v) => OrtTensor::from_array((shape, v))?.into_dyn(),
        TensorData::Bytes(v) => OrtTensor::from_string_array((shape, v.as_slice()))?.into_dyn(),
    })
}

fn from_value(name: &str, value: &DynValue) -> Result<Tensor, EngineError> {
    fn prim<T: ort::value::PrimitiveTensorElementType + Clone>(
        v: &DynValue,
    ) -> ort::Result<(Vec<usize>, Vec<T>)> {
        let (shape, data) = v.try_extract_tensor::<T>()?;
        Ok((dims(shape), data.to_vec()))
    }
    fn dims(shape: &ort::value::Shape) -> Vec<usize> {
        shape
            .iter()
            .map(|&d| usize::try_from(d).unwrap_or(0))
            .collect()
    }

    let fail = |reason: String| EngineError::Output {
        name: name.to_string(),
        reason,
    };
    let ValueType::Tensor { ty, .. } = value.dtype() else {
        return Err(fail(format!("it is a {}, not a tensor", value.dtype())));
    };
    let read = |e: ort::Error| fail(e.to_string());
    let (shape, data) = match ty {
        TensorElementType::Bool => prim::<bool>(value).map(|(s, d)| (s, TensorData::Bool(d))),
        TensorElementType::Uint8 => prim::<u8>(value).map(|(s, d)| (s, TensorData::Uint8(d))),
        TensorElementType::Int8 => prim::<i8>(value).map(|(s, d)| (s, TensorData::Int8(d))),
        TensorElementType::Int16 => prim::<i16>(value).map(|(s, d)| (s, TensorData::Int16(d))),
        TensorElementType::Int32 => prim::<i32>(value).map(|(s, d)| (s, TensorData::Int32(d))),
        TensorElementType::Int64 => prim::<i64>(value).map(|(s, d)| (s, TensorData::Int64(d))),
        TensorElementType::Float32 => prim::<f32>(value).map(|(s, d)| (s, TensorData::Fp32(d))),
        TensorElementType::Float64 => prim::<f64>(value).map(|(s, d)| (s, TensorData::Fp64(d))),
        TensorElementType::String => value
            .try_extract_strings()
            .map(|(s, d)| (dims(s), TensorData::Bytes(d))),
        other => return Err(fail(format!("element type {other} is not supported"))),
    }
    .map_err(read)?;
    Tensor::new(name, shape, data).map_err(|e| fail(e.to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sig() -> Signature {
        Signature {
            inputs: vec![
                TensorSpec::new("input", DataType::Fp32, vec![None, Some(4)]),
                TensorSpec::new("mask", DataType::Bool, vec![None]),
            ],
            outputs: vec![],
        }
    }

    fn t(name: &str, shape: Vec<usize>, data: TensorData) -> Tensor {
        Tensor {
            name: name.into(),
            shape,
            data,
        }
    }

    fn reason(err: EngineError) -> (String, String) {
        match err {
            EngineError::BadInput { tensor, reason } => (tensor, reason),
            other => panic!("expected BadInput, got {other:?}"),
        }
    }

    #[test]
    fn accepts_matching_inputs_in_any_order() {
        let inputs = vec![
            t("mask", vec![2], TensorData::Bool(vec![true, false])),
            t("input", vec![2, 4], TensorData::Fp32(vec![0.0; 8])),
        ];
        sig().check_inputs(&inputs).unwrap();
    }

    #[test]
    fn names_the_tensor_in_every_rejection() {
        let ok_mask = t("mask", vec![1], TensorData::Bool(vec![true]));
        let cases = vec![
            (vec![ok_mask.clone()], "input", "missing"),
            (
                vec![
                    ok_mask.clone(),
                    t("inptu", vec![1, 4], TensorData::Fp32(vec![0.0; 4])),
                ],
                "inptu",
                "no such input",
            ),
            (
                vec![
                    ok_mask.clone(),
                    t("input", vec![1, 4], TensorData::Fp64(vec![0.0; 4])),
                ],
                "input",
                "expected FP32, got FP64",
            ),
            (
                vec![
                    ok_mask.clone(),
                    t("input", vec![4], TensorData::Fp32(vec![0.0; 4])),
                ],
                "input",
                "expected rank 2",
            ),
            (
                vec![
                    ok_mask.clone(),
                    t("input", vec![1, 3], TensorData::Fp32(vec![0.0; 3])),
                ],
                "input",
                "dimension 1 is 3 but the model expects 4",
            ),
            (
                vec![
                    ok_mask.clone(),
                    t("input", vec![2, 4], TensorData::Fp32(vec![0.0; 4])),
                ],
                "input",
                "holds 8 elements but 4",
            ),
            (
                vec![ok_mask.clone(), ok_mask.clone()],
                "mask",
                "more than once",
            ),
        ];
        for (inputs, tensor, needle) in cases {
            let (got_tensor, got_reason) = reason(sig().check_inputs(&inputs).unwrap_err());
            assert_eq!(got_tensor, tensor, "{got_reason}");
            assert!(
                got_reason.contains(needle),
                "{got_reason:?} lacks {needle:?}"
            );
        }
    }

    #[test]
    fn dims_text_marks_dynamic_dimensions() {
        assert_eq!(sig().inputs[0].dims_text(), "[?, 4]");
    }
}
