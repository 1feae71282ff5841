//! Cost of load prediction and of the Themis decision per interval, against Themis' LSTM,
//! which takes under 30 ms per prediction (Themis §5.1.3).
//!
//! ```sh
//! cargo bench -p infaas-sim --bench forecast
//! ```
//!
//! Measured: one `Forecaster::update` plus `predict` (and the 10-interval path Themis reads)
//! for each model, one `AutoForecaster::update` averaged over its periodic refits, and one
//! `Themis::step` for a stage of 16 instances. Timed with `std::time::Instant` over many
//! calls (best of 5 runs), without a benchmarking framework, as the simulator's other
//! benches.

use std::hint::black_box;
use std::time::Instant;

use infaas_scheduler::autoscale::{
    StageInstance, Themis, ThemisConfig, ThemisInput, ThreadProfile,
};
use infaas_scheduler::forecast::{AutoForecaster, ForecastModel, Forecaster};

/// Themis' reference: its LSTM predicts in under 30 ms.
const REFERENCE_NS: f64 = 30e6;

/// A Twitter-like rate: 400 rows/s, a spike every 12 s, some noise.
fn rate(i: usize) -> f64 {
    let x = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    let noise = (x % 100) as f64 / 100.0 - 0.5;
    let spike = if i % 12 == 9 { 600.0 } else { 0.0 };
    400.0 + spike + 80.0 * noise
}

/// Best of 5 runs of `iters` calls of `f`, ns per call.
fn time(iters: usize, mut f: impl FnMut(usize)) -> f64 {
    (0..5)
        .map(|_| {
            let started = Instant::now();
            for i in 0..iters {
                f(i);
            }
            started.elapsed().as_nanos() as f64 / iters as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn report(what: &str, ns: f64) {
    println!(
        "{what:<60} {ns:>12.1} ns {:>14.0}x under 30 ms",
        REFERENCE_NS / ns.max(1e-3)
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let rates: Vec<f64> = (0..4096).map(rate).collect();
    let models = [
        ForecastModel::LastValue,
        ForecastModel::MovingAverage { window: 5 },
        ForecastModel::Ewma { alpha: 0.5 },
        ForecastModel::HoltLinear {
            alpha: 0.5,
            beta: 0.1,
        },
        ForecastModel::HoltWinters {
            alpha: 0.3,
            beta: 0.05,
            gamma: 0.6,
            season: 12,
        },
    ];
    println!(
        "{:<60} {:>15} {:>24}",
        "per interval", "time", "vs Themis' LSTM"
    );
    for m in models {
        let mut f = Forecaster::new(m)?;
        let ns = time(2_000_000, |i| {
            f.update(black_box(rates[i % rates.len()]));
            black_box(f.predict(1));
        });
        report(&format!("{m}: update + predict"), ns);
    }
    let mut f = Forecaster::new(models[4])?;
    let mut path = [0.0; 10];
    let ns = time(1_000_000, |i| {
        f.update(black_box(rates[i % rates.len()]));
        f.predict_path(&mut path);
        black_box(&path);
    });
    report("holt-winters: update + 10-interval path", ns);
    let mut auto = AutoForecaster::new(ForecastModel::Ewma { alpha: 0.5 }, 5, 240, 30)?;
    let ns = time(20_000, |i| {
        auto.update(black_box(rates[i % rates.len()]));
        auto.predict_path(&mut path);
        black_box(&path);
    });
    report(
        "auto (refit on 240 rates every 30): update + path, mean",
        ns,
    );
    // One stage of 16 one-thread instances on 16 workers, in a surge.
    let profile = ThreadProfile::amdahl(1, 25.0, 0.9, 16)?;
    let instances: Vec<StageInstance> = (0..16)
        .map(|i| StageInstance {
            instance: i,
            worker: i,
            threads: 1,
        })
        .collect();
    let free = vec![15; 16];
    let mut themis = Themis::new(ThemisConfig::default())?;
    let ns = time(200_000, |i| {
        let observed = black_box(if i % 2 == 0 { 300.0 } else { 900.0 });
        let d = themis.step(&ThemisInput {
            observed_qps: observed,
            backlog_rows: 0.0,
            forecast_qps: &path,
            instances: &instances,
            loading: 0,
            free_cores: &free,
            profile: &profile,
        });
        black_box(d.is_ok());
    });
    report("themis step (16 instances, 16 workers)", ns);
    Ok(())
}
