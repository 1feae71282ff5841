//! A variant instance: one [`Engine`] behind a dynamic batcher (after Triton's).
//!
//! [`Instance`] is a cheap handle; one task (the actor, `batcher/actor.rs`) owns the queue
//! and talks to the engine. A call checks its request on the caller's side (a bad request is
//! answered at once and never poisons a batch), reserves its rows against the queue's
//! capacity (a semaphore: overload is [`InstanceError::QueueFull`] at once, which the API
//! maps to 429), and sends the request with a oneshot reply and the caller's tracing span.
//!
//! Dispatch:
//! - when the session is idle, whatever is queued (up to `max_batch` rows) runs at once;
//!   nothing waits for company while the session is idle;
//! - while a batch runs, requests accumulate. The next batch is handed to the engine behind
//!   the running one as soon as it is complete (`max_batch` rows, or the next request cannot
//!   join it), or once its oldest request has waited `max_queue_delay` and the running batch
//!   is expected to end within `max_queue_delay` (judged by the session's latest run time);
//!   otherwise it is formed the moment the running batch finishes. So during a long run every
//!   request that arrives joins the next batch, rather than a partial one committed early. Handing the next batch over early keeps
//!   the session busy back to back under load instead of idling for a round trip through
//!   this task between batches; at most one batch waits inside the engine (behind a request
//!   that runs in chunks, only its own next chunk). Answers are sent in dispatch order.
//! - memory: at most `queue_capacity` rows wait, plus the batches handed to the engine.
//! - FIFO: a batch is the longest run of queued requests from the front that are compatible
//!   (same non-batch dimensions; names and element types are fixed by the signature) and fit
//!   in `max_batch` rows. It stops at the first request that cannot join, so no request ever
//!   overtakes an earlier one.
//! - rows are concatenated along dimension 0 and run once; every output whose first
//!   dimension equals the batch's rows is split back per request, any other output is copied
//!   to each request.
//! - a request with more than `max_batch` rows runs alone, in chunks of `max_batch` rows,
//!   and gets its outputs concatenated back. Only a request larger than the whole queue
//!   (`queue_capacity` rows) is refused, with [`InstanceError::TooManyRows`]: it could never
//!   be admitted, so "retry later" would be wrong.
//! - requests whose caller has gone (its future was dropped) are removed from the queue
//!   unrun.
//! - if a batch of several requests fails, each request is run again alone, so a failure
//!   reaches only the request that causes it, and every caller gets its own error.
//! - models whose inputs have a fixed first dimension (or none) are not batched: each
//!   request runs alone, as given.
//! - a request that arrives alone (no other call of this instance unanswered, nothing queued,
//!   no batch handed to the session), has at most `max_batch` rows and finds the session's
//!   latest run no longer than `inline_below` runs at once on the caller's thread
//!   ([`InlineRunner`]): it skips the two thread crossings that dominate a small model's
//!   latency. If the session is taken meanwhile it is queued as usual. Under load requests are
//!   never alone, so they queue and batch as above. Its figures count like any other run.
//! - likewise, a batch formed while nothing is handed to the session, whose latest run took at
//!   most `inline_below`, runs on the batcher task's own thread rather than crossing to the
//!   session's thread and back: under load a small model's batches run where they are formed,
//!   and requests that arrive meanwhile wait in the channel for the next batch. Longer runs,
//!   and batches behind a running one, go to the session's thread as above.

use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use infaas_core::Tensor;
use tokio::sync::{mpsc, oneshot, watch, OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::engine::{Engine, EngineError, Inline, InlineRunner, Signature};

mod actor;
mod costs;
mod figures;
mod queue;
mod rows;

pub use figures::InstanceFigures;

use figures::Board;
use rows::{Batching, RowShape};

/// How an instance batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatcherConfig {
    /// Rows per session run (values below 1 count as 1).
    pub max_batch: usize,
    /// How long a partial batch may wait for more rows while the session is busy before it
    /// is handed to the engine behind the running batch, and how long before the running
    /// batch's expected end that may happen at the earliest. Never waited when the session is
    /// idle.
    pub max_queue_delay: Duration,
    /// Rows waiting at most; a request that does not fit gets [`InstanceError::QueueFull`]
    /// (values below 1 count as 1).
    pub queue_capacity: usize,
    /// A request arriving at an idle instance runs on the caller's thread, and a batch formed
    /// while the session is free runs on the batcher's thread, when the session's latest run
    /// took at most this long (zero: never; see [`InlineRunner`]).
    pub inline_below: Duration,
    /// When the session is free and a partial batch is queued, let the batcher's thread run
    /// its other ready tasks once (under load, requests on their way here) before forming the
    /// batch, if a run's fixed part is worth several rows (measured on this instance's own
    /// runs, see `batcher/costs.rs`). Fewer, fuller runs for small models under load; nothing
    /// changes for a request that arrives alone, nor for a model whose rows dominate its runs.
    pub gather_rows: bool,
}

impl Default for BatcherConfig {
    fn default() -> Self {
        BatcherConfig {
            max_batch: 32,
            max_queue_delay: Duration::from_millis(1),
            queue_capacity: 1024,
            inline_below: Duration::ZERO,
            gather_rows: true,
        }
    }
}

/// Why a request got no outputs.
#[derive(Debug, thiserror::Error)]
pub enum InstanceError {
    #[error("the queue is full ({capacity} rows waiting); retry later")]
    QueueFull { capacity: usize },
    #[error("bad request: {0}")]
    BadInput(#[source] EngineError),
    #[error("inference failed: {0}")]
    Engine(#[source] EngineError),
    #[error("the instance is stopped")]
    Stopped,
    #[error("the request has {rows} rows; this instance queues at most {max}")]
    TooManyRows { rows: usize, max: usize },
}

type Answer = Result<Vec<Tensor>, InstanceError>;

/// A queued request: its rows, whom to answer and the capacity it holds until dispatch.
struct Entry {
    inputs: Vec<Tensor>,
    rows: usize,
    shape: RowShape,
    arrived: Instant,
    reply: oneshot::Sender<Answer>,
    span: tracing::Span,
    _permit: OwnedSemaphorePermit,
}

impl queue::Queued for Entry {
    fn rows(&self) -> usize {
        self.rows
    }

    fn shape(&self) -> &RowShape {
        &self.shape
    }

    fn arrived(&self) -> Instant {
        self.arrived
    }

    fn is_cancelled(&self) -> bool {
        self.reply.is_closed()
    }
}

enum Command {
    Push(Entry),
    Shutdown,
}

struct Shared {
    tx: mpsc::UnboundedSender<Command>,
    signature: Signature,
    batching: Batching,
    config: BatcherConfig,
    /// One permit per row that may wait; closed by [`Instance::shutdown`].
    capacity: Arc<Semaphore>,
    board: Arc<Board>,
    stopped: watch::Receiver<bool>,
    inline: InlineRunner,
    /// Calls of [`Instance::infer`] not yet answered.
    pending: AtomicUsize,
}

/// One unanswered call, counted in [`Shared::pending`] until dropped (also when the caller
/// goes away).
struct Pending<'a> {
    count: &'a AtomicUsize,
    /// No other call was pending when this one arrived.
    alone: bool,
}

impl<'a> Pending<'a> {
    fn enter(count: &'a AtomicUsize) -> Pending<'a> {
        let alone = count.fetch_add(1, Ordering::AcqRel) == 0;
        Pending { count, alone }
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        self.count.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A running instance: a cheap, cloneable handle to its batcher task.
#[derive(Clone)]
pub struct Instance {
    shared: Arc<Shared>,
}

impl fmt::Debug for Instance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Instance")
            .field("config", &self.shared.config)
            .field("batching", &self.shared.batching)
            .finish_non_exhaustive()
    }
}

impl Instance {
    /// Starts the batcher task for `engine` on the current tokio runtime.
    ///
    /// # Panics
    /// Outside a tokio runtime (like `tokio::spawn`).
    pub fn start(engine: Engine, cfg: BatcherConfig) -> Instance {
        let config = BatcherConfig {
            max_batch: cfg.max_batch.max(1),
            queue_capacity: cfg
                .queue_capacity
                .clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize)),
            ..cfg
        };
        let signature = engine.signature().clone();
        let inline = engine.inline_runner();
        let batching = Batching::of(&signature);
        let capacity = Arc::new(Semaphore::new(config.queue_capacity));
        let board = Arc::new(Board::new());
        let (tx, rx) = mpsc::unbounded_channel();
        let (stopped_tx, stopped) = watch::channel(false);
        let policy = queue::Policy {
            max_rows: config.max_batch,
            combine: batching == Batching::Rows,
        };
        let actor = actor::Actor::new(
            engine,
            policy,
            config.max_queue_delay,
            config.inline_below,
            config.gather_rows,
            capacity.clone(),
            board.clone(),
        );
        tokio::spawn(actor.run(rx, stopped_tx));
        Instance {
            shared: Arc::new(Shared {
                tx,
                signature,
                batching,
                config,
                capacity,
                board,
                stopped,
                inline,
                pending: AtomicUsize::new(0),
            }),
        }
    }

    /// Runs one request (`n >= 1` rows along the first dimension of every input) and returns
    /// its outputs, batched with other requests when the session is busy.
    /// Dropping the future before it resolves withdraws the request if it has not run yet.
    pub async fn infer(&self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, InstanceError> {
        let arrived = Instant::now();
        let pending = Pending::enter(&self.shared.pending);
        let answer = self.enqueue(inputs, arrived, pending.alone).await;
        drop(pending);
        if answer.is_err() {
            self.shared.board.error();
        }
        answer
    }

    async fn enqueue(&self, inputs: Vec<Tensor>, arrived: Instant, alone: bool) -> Answer {
        let shared = &*self.shared;
        let mut request = rows::parse_request(&shared.signature, shared.batching, inputs)
            .map_err(InstanceError::BadInput)?;
        if alone && request.rows <= shared.config.max_batch && shared.board.idle() {
            let started = Instant::now();
            match shared
                .inline
                .try_run(request.inputs, shared.config.inline_below)
            {
                Inline::Ran(result) => {
                    let done = Instant::now();
                    shared.board.ran(request.rows, started, done);
                    shared.board.answered(&[(request.rows, done - arrived)]);
                    // Answered without waiting: count it against the task's cooperative
                    // budget, as waiting for a queued answer would, so that a loop of
                    // inline calls still lets its thread's other tasks run.
                    tokio::task::coop::consume_budget().await;
                    return result.map_err(actor::instance_error);
                }
                Inline::Declined(inputs) => request.inputs = inputs,
            }
        }
        let capacity = shared.config.queue_capacity;
        if request.rows > capacity {
            return Err(InstanceError::TooManyRows {
                rows: request.rows,
                max: capacity,
            });
        }
        // `rows <= capacity <= u32::MAX` (clamped in `start`).
        let permit = shared
            .capacity
            .clone()
            .try_acquire_many_owned(request.rows as u32)
            .map_err(|e| match e {
                TryAcquireError::NoPermits => InstanceError::QueueFull { capacity },
                TryAcquireError::Closed => InstanceError::Stopped,
            })?;
        let (reply, answer) = oneshot::channel();
        let entry = Entry {
            inputs: request.inputs,
            rows: request.rows,
            shape: request.shape,
            arrived,
            reply,
            span: tracing::Span::current(),
            _permit: permit,
        };
        shared
            .tx
            .send(Command::Push(entry))
            .map_err(|_| InstanceError::Stopped)?;
        answer.await.map_err(|_| InstanceError::Stopped)?
    }

    /// The current figures (atomics plus a copy of the windows under a short lock).
    pub fn figures(&self) -> InstanceFigures {
        self.shared.board.snapshot()
    }

    /// Stops accepting requests (later calls get [`InstanceError::Stopped`]); requests
    /// already queued are run and answered, then the task ends and releases the engine.
    pub fn shutdown(&self) {
        self.shared.capacity.close();
        // The task may already have ended; then there is nothing left to stop.
        let _ = self.shared.tx.send(Command::Shutdown);
    }

    /// Resolves once the batcher task has ended (after [`Instance::shutdown`], or when every
    /// handle is dropped), i.e. every accepted request has been answered.
    pub async fn stopped(&self) {
        let mut stopped = self.shared.stopped.clone();
        // An error means the task is gone, which is what we wait for.
        let _ = stopped.wait_for(|s| *s).await;
    }

    pub fn signature(&self) -> &Signature {
        &self.shared.signature
    }

    /// The configuration in effect (after clamping).
    pub fn config(&self) -> &BatcherConfig {
        &self.shared.config
    }
}
