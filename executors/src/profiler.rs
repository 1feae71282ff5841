//! Measuring a model variant: load time, memory and latency per batch size.
//!
//! Each batch size is warmed up, then timed for `runs` runs or until `max_duration` has
//! passed, whichever comes first, so large models finish in bounded time. A timed run is one
//! [`Engine::run_blocking`] call: input checks, the hop to the engine thread, ONNX Runtime and
//! copying the outputs back, which is what a request pays.

use infaas_core::stats::percentile;
use std::time::{Duration, Instant};

use infaas_core::Tensor;
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineError, SessionConfig};
use crate::validation::ValidationSet;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProfileOptions {
    /// Untimed runs per batch size before timing.
    pub warmup: usize,
    /// Timed runs per batch size (at least one is always made).
    pub runs: usize,
    /// Time budget per batch size for warm-up plus timed runs.
    pub max_duration: Duration,
}

impl Default for ProfileOptions {
    fn default() -> Self {
        ProfileOptions {
            warmup: 3,
            runs: 30,
            max_duration: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchLatency {
    pub batch: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
    /// Rows per second at the mean latency: `batch / mean`.
    pub throughput_per_s: f64,
    /// Timed runs behind these figures.
    pub runs: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub load_ms: f64,
    /// Growth of the process's resident memory from before the load to the largest value seen
    /// after each batch size. An estimate: other threads of the process allocate and free
    /// memory at the same time, and freed memory is not always returned to the OS.
    pub memory_bytes: u64,
    /// One entry per requested batch size the model accepts, in the requested order.
    pub latency: Vec<BatchLatency>,
}

/// Profiles `model` on rows of `sample`; see [`profile_with_progress`].
pub fn profile(
    model: &[u8],
    cfg: &SessionConfig,
    sample: &ValidationSet,
    batches: &[usize],
    opts: &ProfileOptions,
) -> Result<Profile, EngineError> {
    profile_with_progress(model, cfg, sample, batches, opts, &mut |_, _| {})
}

/// Loads `model`, then times each batch size. The inputs for batch `b` are the first `b` rows
/// of `sample`, repeated when it has fewer. Batch sizes a fixed batch dimension rules out are
/// skipped with a warning. `progress(done, total)` is called after each batch size.
pub fn profile_with_progress(
    model: &[u8],
    cfg: &SessionConfig,
    sample: &ValidationSet,
    batches: &[usize],
    opts: &ProfileOptions,
    progress: &mut dyn FnMut(usize, usize),
) -> Result<Profile, EngineError> {
    let rss_before = resident_bytes();
    let engine = Engine::load(model.to_vec(), cfg)?;
    let load_ms = engine.load_time().as_secs_f64() * 1e3;

    let sig = engine.signature();
    let no_rows = |reason: &str| EngineError::BadInput {
        tensor: sig
            .inputs
            .first()
            .map_or_else(|| "sample".to_string(), |i| i.name.clone()),
        reason: reason.to_string(),
    };
    if sample.len == 0 {
        return Err(no_rows("the profiling sample has no rows"));
    }
    let fixed_batch = sig
        .inputs
        .iter()
        .find_map(|i| i.dims.first().copied().flatten());
    let runnable: Vec<usize> = batches
        .iter()
        .copied()
        .filter(|&b| b > 0 && fixed_batch.is_none_or(|f| f == b))
        .collect();
    if runnable.len() < batches.len() {
        tracing::warn!(
            ?batches,
            ?fixed_batch,
            "skipping batch sizes the model cannot take"
        );
    }
    if runnable.is_empty() && !batches.is_empty() {
        return Err(no_rows(&format!(
            "none of the batch sizes {batches:?} fits the model's batch dimension {fixed_batch:?}"
        )));
    }

    let mut memory_bytes = 0;
    let mut latency = Vec::with_capacity(runnable.len());
    for (i, &batch) in runnable.iter().enumerate() {
        let inputs = sample.rows_cyclic(0, batch);
        latency.push(time_batch(&engine, batch, &inputs, opts)?);
        if let (Some(before), Some(now)) = (rss_before, resident_bytes()) {
            memory_bytes = memory_bytes.max(now.saturating_sub(before));
        }
        progress(i + 1, runnable.len());
    }
    Ok(Profile {
        load_ms,
        memory_bytes,
        latency,
    })
}

fn time_batch(
    engine: &Engine,
    batch: usize,
    inputs: &[Tensor],
    opts: &ProfileOptions,
) -> Result<BatchLatency, EngineError> {
    let started = Instant::now();
    for _ in 0..opts.warmup {
        if started.elapsed() >= opts.max_duration {
            break;
        }
        engine.run_blocking(inputs.to_vec())?;
    }
    let mut samples = Vec::with_capacity(opts.runs.max(1));
    while samples.is_empty() || (samples.len() < opts.runs && started.elapsed() < opts.max_duration)
    {
        let run_inputs = inputs.to_vec();
        let t = Instant::now();
        engine.run_blocking(run_inputs)?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
    }
    samples.sort_by(f64::total_cmp);
    let mean_ms = samples.iter().sum::<f64>() / samples.len() as f64;
    Ok(BatchLatency {
        batch,
        p50_ms: percentile(&samples, 0.5),
        p99_ms: percentile(&samples, 0.99),
        mean_ms,
        throughput_per_s: if mean_ms > 0.0 {
            batch as f64 / (mean_ms / 1e3)
        } else {
            0.0
        },
        runs: samples.len(),
    })
}

/// Resident set size of this process. Reads `VmRSS` from `/proc/self/status`, which is in
/// kB, rather than `/proc/self/statm`, which counts pages of a size we would have to guess.
/// `None` off Linux.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn reads_resident_memory_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(resident_bytes().is_some_and(|b| b > 0));
        }
    }
}
