//! Workloads: a step overload and Proteus traces rescaled, as seeded Poisson arrivals.

use infaas_sim::generate::poisson;

/// The step overload: `low` x `capacity` q/s for `s[0]` seconds, `high` x for `s[1]`, `low` x
/// for `s[2]` (Poisson, seeded).
pub fn step_arrivals(capacity: f64, low: f64, high: f64, s: [f64; 3], seed: u64) -> Vec<f64> {
    poisson(
        &[
            (s[0], low * capacity),
            (s[1], high * capacity),
            (s[2], low * capacity),
        ],
        seed,
    )
}

/// A trace's shape at another scale: its per-second arrival counts, multiplied so that their
/// 5-s moving average peaks at `peak_qps`, drive Poisson arrivals second by second (seeded).
pub fn trace_arrivals(trace_ms: &[f64], peak_qps: f64, seed: u64) -> Vec<f64> {
    let Some(&last) = trace_ms.last() else {
        return Vec::new();
    };
    let start = trace_ms[0].min(0.0);
    let seconds = ((last - start) / 1e3).floor() as usize + 1;
    let mut counts = vec![0.0f64; seconds];
    for &t in trace_ms {
        counts[(((t - start) / 1e3) as usize).min(seconds - 1)] += 1.0;
    }
    let peak = counts
        .windows(5.min(seconds))
        .map(|w| w.iter().sum::<f64>() / w.len() as f64)
        .fold(0.0, f64::max);
    if peak <= 0.0 {
        return Vec::new();
    }
    let k = peak_qps / peak;
    let pieces: Vec<(f64, f64)> = counts.iter().map(|c| (1.0, c * k)).collect();
    poisson(&pieces, seed)
}

/// The arrival rate of the first `seconds` of a workload, q/s.
pub fn initial_rate(arrivals_ms: &[f64], seconds: f64) -> f64 {
    arrivals_ms
        .iter()
        .take_while(|&&t| t < seconds * 1e3)
        .count() as f64
        / seconds
}
