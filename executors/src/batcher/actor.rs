//! The batcher task: owns the queue, decides when a batch is formed, hands batches to the
//! engine and answers the callers. Nothing in here blocks: engine runs are futures this task
//! polls alongside its commands.
//!
//! Jobs (one per batch) return their answers instead of sending them, and the task sends
//! them in dispatch order: a job handed over behind another may be polled first once both
//! runs are done, and callers must still be answered first come, first served.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::{FuturesOrdered, StreamExt};
use infaas_core::Tensor;
use tokio::sync::{mpsc, oneshot, watch, Semaphore};
use tracing::Instrument;

use super::figures::Board;
use super::queue::{Policy, Queue};
use super::rows;
use super::{Answer, Command, Entry, InstanceError};
use crate::engine::{Engine, EngineError, Inline, InlineRunner};

/// Batches handed to the engine at once: the running one and the next one waiting behind it
/// inside the engine. More would only fix batches earlier than needed. Nothing is handed
/// over behind a request that runs in chunks (its later chunks would queue behind it).
const HANDED_OVER: usize = 2;

/// How often a nearly full queue is swept for callers that have gone (dispatch removes them
/// from the front anyway; the sweep frees the capacity held deeper in the queue).
const SWEEP_EVERY: Duration = Duration::from_millis(1);

/// Commands taken in one go before the next dispatch (bounded so that completions, which
/// free the session, are never held up for long).
const DRAIN: usize = 256;

type Run = Pin<Box<dyn Future<Output = Result<Vec<Tensor>, EngineError>> + Send>>;

pub(super) struct Actor {
    engine: Engine,
    /// Runs a batch on this task's thread when the session is free and its runs are short
    /// (see [`Actor::start`]).
    inline: InlineRunner,
    inline_below: Duration,
    /// Whether a partial batch may wait a scheduling round for more rows when that pays
    /// (see [`Actor::gathers`]).
    gather: bool,
    policy: Policy,
    max_queue_delay: Duration,
    capacity: Arc<Semaphore>,
    board: Arc<Board>,
    queue: Queue<Entry>,
    running: FuturesOrdered<BoxFuture<'static, Finished>>,
    /// Jobs in `running` that run one request in chunks.
    chunked: usize,
    /// When the session started the front job of `running` (as seen from here).
    running_since: Option<Instant>,
    closing: bool,
    last_sweep: Instant,
}

impl Actor {
    pub(super) fn new(
        engine: Engine,
        policy: Policy,
        max_queue_delay: Duration,
        inline_below: Duration,
        gather: bool,
        capacity: Arc<Semaphore>,
        board: Arc<Board>,
    ) -> Actor {
        Actor {
            inline: engine.inline_runner(),
            inline_below,
            gather,
            engine,
            policy,
            max_queue_delay,
            capacity,
            board,
            queue: Queue::default(),
            running: FuturesOrdered::new(),
            chunked: 0,
            running_since: None,
            closing: false,
            last_sweep: Instant::now(),
        }
    }

    pub(super) async fn run(
        mut self,
        mut commands: mpsc::UnboundedReceiver<Command>,
        stopped: watch::Sender<bool>,
    ) {
        let mut open = true;
        // One timer, moved only when the due time changes (not re-registered every turn).
        let mut timer = Box::pin(tokio::time::sleep(Duration::ZERO));
        let mut armed: Option<Instant> = None;
        loop {
            if open && self.gathers() {
                // The session is free but the batch is partial, and rows are worth gathering:
                // let this thread's other ready tasks run first (under load, HTTP requests
                // on their way here), then take what they sent. One scheduling round; with
                // nothing else ready it is back at once.
                tokio::task::yield_now().await;
                self.drain(&mut commands);
            }
            self.dispatch().await;
            self.publish();
            if self.closing && self.queue.is_empty() && self.running.is_empty() {
                break;
            }
            let next_due = self.next_due();
            if let Some(due) = next_due.filter(|&due| armed != Some(due)) {
                timer.as_mut().reset(due.into());
                armed = Some(due);
            }
            tokio::select! {
                // Completions first: they free the session for the next batch.
                biased;
                Some(finished) = self.running.next(), if !self.running.is_empty() => {
                    self.finish(finished);
                }
                command = commands.recv(), if open => match command {
                    Some(command) => {
                        self.handle(command);
                        // Take whatever else has arrived before forming a batch, so that
                        // requests sent together are batched together.
                        self.drain(&mut commands);
                    }
                    None => {
                        open = false;
                        self.closing = true;
                    }
                },
                () = &mut timer, if next_due.is_some() => armed = None,
                else => break,
            }
        }
        // Requests still in the channel are dropped with it: their callers get `Stopped`.
        drop(commands);
        self.publish();
        stopped.send_replace(true);
        tracing::debug!("batcher stopped");
    }

    /// Takes the commands already sent (at most [`DRAIN`]) without waiting.
    fn drain(&mut self, commands: &mut mpsc::UnboundedReceiver<Command>) {
        for _ in 0..DRAIN {
            let Ok(command) = commands.try_recv() else {
                break;
            };
            self.handle(command);
        }
    }

    /// Whether to wait one scheduling round for more rows before the next dispatch: the
    /// session is free, a partial batch is queued, and this instance's runs cost enough per
    /// run, next to a row, for rows to be worth gathering ([`Board::gathering_pays`]).
    fn gathers(&self) -> bool {
        self.gather
            && self.running.is_empty()
            && !self.closing
            && !self.queue.is_empty()
            && self.queue.rows() < self.policy.max_rows
            && self.board.gathering_pays()
    }

    fn finish(&mut self, finished: Finished) {
        if finished.chunked {
            self.chunked -= 1;
        }
        // The job handed over behind it (if any) starts now.
        self.running_since = (!self.running.is_empty()).then(Instant::now);
        // Counted before anyone is answered: a caller holding its answer sees it counted.
        let now = Instant::now();
        let answered: Vec<(usize, Duration)> = finished
            .answers
            .iter()
            .map(|(c, _)| (c.rows, now.saturating_duration_since(c.arrived)))
            .collect();
        self.board.answered(&answered);
        for (caller, answer) in finished.answers {
            // The caller may have gone meanwhile; nothing to do then.
            let _ = caller.reply.send(answer);
        }
    }

    fn handle(&mut self, command: Command) {
        match command {
            Command::Push(entry) => self.push(entry),
            Command::Shutdown => self.closing = true,
        }
    }

    fn push(&mut self, entry: Entry) {
        if self.closing {
            let _ = entry.reply.send(Err(InstanceError::Stopped));
            return;
        }
        self.queue.push(entry);
        let nearly_full = self.capacity.available_permits() < self.policy.max_rows;
        if nearly_full && self.last_sweep.elapsed() >= SWEEP_EVERY {
            self.last_sweep = Instant::now();
            let gone = self.queue.remove_cancelled();
            self.drop_cancelled(gone);
        }
    }

    /// When the queued partial batch may be handed over behind the running one: once its
    /// oldest request has waited `max_queue_delay`, and no earlier than `max_queue_delay`
    /// before the running batch is expected to end (its latest run's duration after it
    /// started). A short run is followed at once; during a long one, requests keep joining
    /// the next batch until it is nearly time to run it.
    fn next_due(&self) -> Option<Instant> {
        if self.running.len() != 1 || self.chunked != 0 {
            return None;
        }
        // No due time when it would overflow (a delay meaning "never").
        let waited = self
            .queue
            .oldest()
            .and_then(|t| t.checked_add(self.max_queue_delay))?;
        let ending = self.running_since.and_then(|since| {
            since.checked_add(self.engine.last_run().saturating_sub(self.max_queue_delay))
        });
        Some(ending.map_or(waited, |e| e.max(waited)))
    }

    async fn dispatch(&mut self) {
        while self.running.len() < HANDED_OVER && self.chunked == 0 {
            let take_partial =
                self.running.is_empty() || self.next_due().is_some_and(|due| Instant::now() >= due);
            let mut gone = Vec::new();
            let batch = self.queue.next_batch(self.policy, take_partial, &mut gone);
            self.drop_cancelled(gone);
            let Some(batch) = batch else {
                break;
            };
            if self.running.is_empty() {
                self.running_since = Some(Instant::now());
            }
            let (job, ran) = self.start(batch).await;
            self.running.push_back(job);
            if ran {
                // Done already: answered on the next turn, before anything else is formed.
                break;
            }
        }
    }

    fn drop_cancelled(&self, gone: Vec<Entry>) {
        if gone.is_empty() {
            return;
        }
        self.board.cancelled(gone.len());
        for entry in gone {
            entry
                .span
                .in_scope(|| tracing::debug!("caller gone; request removed unrun"));
        }
    }

    fn publish(&self) {
        self.board.set_queue(
            self.queue.rows(),
            self.queue.len(),
            !self.running.is_empty(),
        );
    }

    /// Hands the batch's (first) run to the engine now and returns the job that completes
    /// with the callers' answers, and whether it ran here already.
    async fn start(&mut self, batch: Vec<Entry>) -> (BoxFuture<'static, Finished>, bool) {
        let requests = batch.len();
        let rows: usize = batch.iter().map(|e| e.rows).sum();
        let span = tracing::debug_span!("batch", requests, rows);
        let mut inputs = Vec::with_capacity(requests);
        let mut callers = Vec::with_capacity(requests);
        for entry in batch {
            span.follows_from(entry.span.id());
            entry.span.in_scope(|| {
                tracing::trace!(
                    batch_requests = requests,
                    batch_rows = rows,
                    waited_ms = entry.arrived.elapsed().as_secs_f64() * 1e3,
                    "dispatched"
                )
            });
            inputs.push(entry.inputs);
            // The entry's permit goes with it: its rows no longer wait.
            callers.push(Caller {
                rows: entry.rows,
                arrived: entry.arrived,
                reply: entry.reply,
            });
        }
        let engine = self.engine.clone();
        let board = self.board.clone();
        let max_rows = self.policy.max_rows;

        if requests == 1 && self.policy.combine && rows > max_rows {
            let request = inputs.pop().unwrap_or_default();
            let parts = rows::chunks(&request, rows, max_rows);
            drop(request);
            let chunk_rows: Vec<usize> = parts
                .iter()
                .map(|p| p.first().map_or(0, Tensor::batch_len))
                .collect();
            let mut parts = parts.into_iter();
            let first = parts.next().unwrap_or_default();
            let sent = Instant::now();
            let first = submit(&engine, first).await;
            let caller = callers.remove(0);
            self.chunked += 1;
            let job = run_chunked(engine, board, caller, first, sent, parts, chunk_rows);
            return (Box::pin(job.instrument(span)), false);
        }

        let batch_inputs = if requests == 1 {
            inputs.pop().unwrap_or_default()
        } else {
            match rows::concat(inputs) {
                Ok(batch) => batch,
                Err(e) => {
                    // Unreachable after the shape checks; answered rather than panicking.
                    let answers = callers
                        .into_iter()
                        .map(|c| (c, Err(InstanceError::Engine(same_error(&e)))))
                        .collect();
                    return (Box::pin(std::future::ready(Finished::batch(answers))), true);
                }
            }
        };
        // Kept only to run the requests alone should the batch fail.
        let kept = (requests > 1).then(|| batch_inputs.clone());
        let sent = Instant::now();
        // Nothing handed over and short runs: run it here, without the two thread crossings
        // to the session's thread and back, which cost a small model more than its run. The
        // batch still forms as above (requests that arrive meanwhile wait in the channel and
        // make the next one); runs longer than the bound keep going to the session's thread.
        let (run, ran): (Run, bool) = if self.running.is_empty() {
            match span.in_scope(|| self.inline.try_run(batch_inputs, self.inline_below)) {
                Inline::Ran(result) => (Box::pin(std::future::ready(result)), true),
                Inline::Declined(inputs) => (submit(&engine, inputs).await, false),
            }
        } else {
            (submit(&engine, batch_inputs).await, false)
        };
        let job = finish_batch(engine, board, callers, run, sent, rows, kept).instrument(span);
        (Box::pin(job), ran)
    }
}

/// What a job leaves for the task to send.
struct Finished {
    answers: Vec<(Caller, Answer)>,
    chunked: bool,
}

impl Finished {
    fn batch(answers: Vec<(Caller, Answer)>) -> Finished {
        Finished {
            answers,
            chunked: false,
        }
    }
}

/// Whom to answer for one request of a batch.
struct Caller {
    rows: usize,
    arrived: Instant,
    reply: oneshot::Sender<Answer>,
}

async fn finish_batch(
    engine: Engine,
    board: Arc<Board>,
    callers: Vec<Caller>,
    run: Run,
    sent: Instant,
    rows: usize,
    kept: Option<Vec<Tensor>>,
) -> Finished {
    let result = run.await;
    board.ran(rows, sent, Instant::now());
    let error = match result {
        Ok(outputs) => {
            let counts: Vec<usize> = callers.iter().map(|c| c.rows).collect();
            let answers = callers
                .into_iter()
                .zip(rows::split(outputs, &counts))
                .map(|(caller, outputs)| (caller, Ok(outputs)))
                .collect();
            return Finished::batch(answers);
        }
        Err(error) => error,
    };
    let Some(inputs) = kept else {
        // A batch of one request: its caller gets the error itself.
        let answers = callers
            .into_iter()
            .next()
            .map(|c| (c, Err(instance_error(error))));
        return Finished::batch(answers.into_iter().collect());
    };
    tracing::warn!(%error, requests = callers.len(), "batch failed; running its requests alone");
    let mut answers = Vec::with_capacity(callers.len());
    let mut start = 0;
    for caller in callers {
        let own: Vec<Tensor> = inputs
            .iter()
            .map(|t| t.slice_batch(start, start + caller.rows))
            .collect();
        start += caller.rows;
        if caller.reply.is_closed() {
            board.cancelled(1);
            continue;
        }
        let sent = Instant::now();
        let result = engine.run(own).await;
        board.ran(caller.rows, sent, Instant::now());
        answers.push((caller, result.map_err(instance_error)));
    }
    Finished::batch(answers)
}

async fn run_chunked(
    engine: Engine,
    board: Arc<Board>,
    caller: Caller,
    first: Run,
    sent: Instant,
    rest: impl Iterator<Item = Vec<Tensor>>,
    chunk_rows: Vec<usize>,
) -> Finished {
    let answer = run_chunks(&engine, &board, &caller, first, sent, rest, &chunk_rows).await;
    let answers = match answer {
        Some(answer) => vec![(caller, answer)],
        None => {
            board.cancelled(1);
            tracing::debug!("caller gone; remaining chunks not run");
            Vec::new()
        }
    };
    Finished {
        answers,
        chunked: true,
    }
}

/// The joined outputs, or `None` when the caller left before the last chunk.
/// Each chunk is handed to the engine before the previous one is awaited, so the session
/// runs them back to back.
async fn run_chunks(
    engine: &Engine,
    board: &Board,
    caller: &Caller,
    first: Run,
    sent: Instant,
    mut rest: impl Iterator<Item = Vec<Tensor>>,
    chunk_rows: &[usize],
) -> Option<Answer> {
    let mut outputs = Vec::with_capacity(chunk_rows.len());
    let (mut sent, mut run) = (sent, first);
    for &n in chunk_rows {
        let next = match rest.next() {
            Some(_) if caller.reply.is_closed() => return None,
            Some(part) => Some((Instant::now(), submit(engine, part).await)),
            None => None,
        };
        let result = run.await;
        board.ran(n, sent, Instant::now());
        match result {
            Ok(part) => outputs.push(part),
            Err(e) => return Some(Err(instance_error(e))),
        }
        match next {
            Some(next) => (sent, run) = next,
            None => break,
        }
    }
    Some(rows::join(outputs, chunk_rows).map_err(InstanceError::Engine))
}

fn engine_run(engine: Engine, inputs: Vec<Tensor>) -> Run {
    Box::pin(async move { engine.run(inputs).await })
}

/// Hands `inputs` to the engine now rather than when the returned future is first polled.
///
/// `Engine::run` enqueues its command on first poll, and the engine runs commands in order;
/// polling once here fixes the engine's order to the dispatch order, so the next batch can
/// wait inside the engine while the current one runs.
async fn submit(engine: &Engine, inputs: Vec<Tensor>) -> Run {
    let mut run = engine_run(engine.clone(), inputs);
    match std::future::poll_fn(|cx| Poll::Ready(run.as_mut().poll(cx))).await {
        Poll::Ready(result) => Box::pin(std::future::ready(result)),
        Poll::Pending => run,
    }
}

/// Bad input found by the engine is the caller's fault (400), anything else the server's.
pub(super) fn instance_error(e: EngineError) -> InstanceError {
    match e {
        EngineError::BadInput { .. } => InstanceError::BadInput(e),
        other => InstanceError::Engine(other),
    }
}

/// An error for one more caller (`EngineError` holds `ort::Error`, which is not `Clone`).
fn same_error(e: &EngineError) -> EngineError {
    match e {
        EngineError::BadInput { tensor, reason } => EngineError::BadInput {
            tensor: tensor.clone(),
            reason: reason.clone(),
        },
        EngineError::Output { name, reason } => EngineError::Output {
            name: name.clone(),
            reason: reason.clone(),
        },
        EngineError::Stopped => EngineError::Stopped,
        other => EngineError::Unsupported(other.to_string()),
    }
}
