//! Workload generators: synthetic arrivals from a one-line spec, seeded so that a run can be
//! repeated exactly.
//!
//! `KIND:key=value,...`, where KIND and its keys are
//!
//! | kind | keys | arrivals |
//! |---|---|---|
//! | `poisson` | `rate` | exponential gaps at `rate` queries/s |
//! | `gamma` | `rate`, `cv` | gamma gaps with mean `1/rate` and coefficient of variation `cv` (bursty above 1) |
//! | `step` | `from`, `to`, `at` | Poisson at `from` queries/s, then `to` from second `at` |
//! | `burst` | `base`, `peak`, `every`, `length` | Poisson at `base`, at `peak` for `length` s every `every` s |
//! | `diurnal` | `mean`, `amplitude`, `period` | Poisson at `mean * (1 + amplitude * sin(2 pi t / period))` |
//!
//! and every kind takes `duration` (seconds, required), `app` (default `app`), `slo` (ms),
//! `min_accuracy` and `seed` (default 1). Example: `gamma:rate=200,cv=4,duration=60,slo=300`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::trace::{Arrival, Trace, TraceError};

/// A parsed generator spec.
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    pub shape: Shape,
    pub duration_s: f64,
    pub app: String,
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
    pub seed: u64,
}

/// How arrivals are spread over time.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    Poisson {
        rate: f64,
    },
    Gamma {
        rate: f64,
        cv: f64,
    },
    Step {
        from: f64,
        to: f64,
        at_s: f64,
    },
    Burst {
        base: f64,
        peak: f64,
        every_s: f64,
        length_s: f64,
    },
    Diurnal {
        mean: f64,
        amplitude: f64,
        period_s: f64,
    },
}

impl Shape {
    /// Arrival rate at second `t`, queries/s (for the shapes that are Poisson in time).
    fn rate_at(&self, t: f64) -> f64 {
        match *self {
            Shape::Poisson { rate } | Shape::Gamma { rate, .. } => rate,
            Shape::Step { from, to, at_s } => {
                if t < at_s {
                    from
                } else {
                    to
                }
            }
            Shape::Burst {
                base,
                peak,
                every_s,
                length_s,
            } => {
                if t % every_s < length_s {
                    peak
                } else {
                    base
                }
            }
            Shape::Diurnal {
                mean,
                amplitude,
                period_s,
            } => (mean * (1.0 + amplitude * (std::f64::consts::TAU * t / period_s).sin())).max(0.0),
        }
    }

    /// The highest rate the shape reaches (the envelope of thinning).
    fn max_rate(&self) -> f64 {
        match *self {
            Shape::Poisson { rate } | Shape::Gamma { rate, .. } => rate,
            Shape::Step { from, to, .. } => from.max(to),
            Shape::Burst { base, peak, .. } => base.max(peak),
            Shape::Diurnal {
                mean, amplitude, ..
            } => mean * (1.0 + amplitude.abs()),
        }
    }
}

impl std::str::FromStr for Generator {
    type Err = TraceError;

    fn from_str(spec: &str) -> Result<Generator, TraceError> {
        let bad = |message: String| TraceError::Spec {
            spec: spec.to_string(),
            message,
        };
        let (kind, rest) = spec
            .split_once(':')
            .ok_or_else(|| bad("expected KIND:key=value,... (see the generator table)".into()))?;
        let mut keys: Vec<(String, String)> = Vec::new();
        for pair in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| bad(format!("'{pair}' is not key=value")))?;
            keys.push((k.trim().to_string(), v.trim().to_string()));
        }
        let mut used: Vec<&str> = Vec::new();
        let mut get = |key: &'static str| -> Option<String> {
            used.push(key);
            keys.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone())
        };
        let mut num = |key: &'static str, required: bool| -> Result<Option<f64>, TraceError> {
            match get(key) {
                None if required => Err(bad(format!("'{key}' is required"))),
                None => Ok(None),
                Some(v) => v
                    .parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(Some)
                    .ok_or_else(|| bad(format!("'{key}={v}' is not a non-negative number"))),
            }
        };
        let req = |x: Option<f64>| x.unwrap_or_default();
        let shape = match kind.trim() {
            "poisson" => Shape::Poisson {
                rate: req(num("rate", true)?),
            },
            "gamma" => Shape::Gamma {
                rate: req(num("rate", true)?),
                cv: req(num("cv", true)?),
            },
            "step" => Shape::Step {
                from: req(num("from", true)?),
                to: req(num("to", true)?),
                at_s: req(num("at", true)?),
            },
            "burst" => Shape::Burst {
                base: req(num("base", true)?),
                peak: req(num("peak", true)?),
                every_s: req(num("every", true)?),
                length_s: req(num("length", true)?),
            },
            "diurnal" => Shape::Diurnal {
                mean: req(num("mean", true)?),
                amplitude: req(num("amplitude", true)?),
                period_s: req(num("period", true)?),
            },
            other => {
                return Err(bad(format!(
                    "unknown kind '{other}'; expected poisson, gamma, step, burst or diurnal"
                )))
            }
        };
        let duration_s = req(num("duration", true)?);
        let slo_ms = num("slo", false)?;
        let min_accuracy = num("min_accuracy", false)?;
        let seed = num("seed", false)?.map_or(1, |s| s as u64);
        let app = get("app").unwrap_or_else(|| "app".to_string());
        if let Some((k, _)) = keys.iter().find(|(k, _)| !used.contains(&k.as_str())) {
            return Err(bad(format!("unknown key '{k}' for kind '{}'", kind.trim())));
        }
        match shape {
            Shape::Gamma { cv, .. } if cv <= 0.0 => {
                return Err(bad("'cv' must be positive".into()))
            }
            Shape::Burst { every_s, .. } if every_s <= 0.0 => {
                return Err(bad("'every' must be positive".into()))
            }
            Shape::Diurnal { period_s, .. } if period_s <= 0.0 => {
                return Err(bad("'period' must be positive".into()))
            }
            _ => {}
        }
        if duration_s <= 0.0 {
            return Err(bad("'duration' must be positive".into()));
        }
        if slo_ms == Some(0.0) {
            return Err(bad("'slo' must be positive".into()));
        }
        if min_accuracy.is_some_and(|a| a > 1.0) {
            return Err(bad("'min_accuracy' must be in [0, 1]".into()));
        }
        Ok(Generator {
            shape,
            duration_s,
            app,
            slo_ms,
            min_accuracy,
            seed,
        })
    }
}

impl Generator {
    /// The arrivals, sorted by time.
    pub fn generate(&self) -> Trace {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let end = self.duration_s;
        let mut times = Vec::new();
        match self.shape {
            Shape::Gamma { rate, cv } if rate > 0.0 => {
                // A renewal process: gaps ~ Gamma(k, theta) with k = 1/cv^2, mean k*theta = 1/rate.
                let k = 1.0 / (cv * cv);
                let theta = 1.0 / (rate * k);
                let mut t = 0.0;
                loop {
                    t += gamma(&mut rng, k) * theta;
                    if t >= end {
                        break;
                    }
                    times.push(t);
                }
            }
            _ => {
                // A Poisson process of rate r(t), by thinning one of the envelope's rate.
                let envelope = self.shape.max_rate();
                if envelope > 0.0 {
                    poisson_process(
                        &mut rng,
                        envelope,
                        (0.0, end),
                        |rng| 1.0 - rng.random::<f64>(),
                        |rng, t| rng.random::<f64>() * envelope < self.shape.rate_at(t),
                        &mut times,
                    );
                }
            }
        }
        Trace {
            apps: vec![self.app.clone()],
            arrivals: times
                .into_iter()
                .map(|t| Arrival {
                    at_ms: t * 1e3,
                    app: 0,
                    slo_ms: self.slo_ms,
                    min_accuracy: self.min_accuracy,
                })
                .collect(),
        }
    }
}

/// The one Poisson process of the generators: arrivals (s, ascending) at `rate` queries/s
/// from `from` to `to`, with exponential gaps `-ln(u) / rate` where `open_unit` draws `u` in
/// (0, 1] from `draws` (so the logarithm is finite), each candidate at `t` kept when
/// `keep(draws, t)` (thinning; always, for a constant rate).
fn poisson_process<D>(
    draws: &mut D,
    rate: f64,
    (from, to): (f64, f64),
    open_unit: impl Fn(&mut D) -> f64,
    mut keep: impl FnMut(&mut D, f64) -> bool,
    out: &mut Vec<f64>,
) {
    let mut t = from;
    loop {
        t += -open_unit(draws).ln() / rate;
        if t >= to {
            return;
        }
        if keep(draws, t) {
            out.push(t);
        }
    }
}

/// SplitMix64's finaliser: the hash behind every counter-based draw of the simulators (the
/// Poisson pieces here, the branch draws of pipelines).
pub fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Seeded Poisson arrivals (ms from 0, sorted) over consecutive pieces of `(seconds, rate
/// q/s)` (a piece at rate 0 holds none): the process of [`Generator`], its uniform draws
/// counted rather than from a generator's state (draw `i` hashes the seed and `i`), so a piece
/// needs nothing but the seed.
pub fn poisson(pieces: &[(f64, f64)], seed: u64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut start = 0.0f64;
    let mut i = 0u64;
    for &(len, rate) in pieces {
        let end = start + len;
        if rate > 0.0 {
            poisson_process(
                &mut i,
                rate,
                (start, end),
                |i| {
                    *i += 1;
                    ((mix(seed ^ mix(*i)) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
                },
                |_, _| true,
                &mut out,
            );
        }
        start = end;
    }
    out.iter_mut().for_each(|t| *t *= 1e3);
    out
}

/// A sample of N(0, 1) (Box-Muller).
fn normal(rng: &mut StdRng) -> f64 {
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A sample of Gamma(k, 1) (Marsaglia and Tsang; shapes below 1 boosted by U^(1/k)).
fn gamma(rng: &mut StdRng, k: f64) -> f64 {
    if k < 1.0 {
        let u = 1.0 - rng.random::<f64>();
        return gamma(rng, k + 1.0) * u.powf(1.0 / k);
    }
    let d = k - 1.0 / 3.0;
    let c = 1.0 / (9.0 * d).sqrt();
    loop {
        let x = normal(rng);
        let v = (1.0 + c * x).powi(3);
        if v <= 0.0 {
            continue;
        }
        let u = 1.0 - rng.random::<f64>();
        if u.ln() < 0.5 * x * x + d - d * v + d * v.ln() {
            return d * v;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn gaps(t: &Trace) -> Vec<f64> {
        t.arrivals
            .windows(2)
            .map(|w| w[1].at_ms - w[0].at_ms)
            .collect()
    }

    fn mean_cv(x: &[f64]) -> (f64, f64) {
        let n = x.len() as f64;
        let mean = x.iter().sum::<f64>() / n;
        let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt() / mean)
    }

    #[test]
    fn poisson_has_its_rate_and_exponential_gaps() {
        let g: Generator = "poisson:rate=500,duration=60,app=a,slo=300"
            .parse()
            .unwrap();
        let t = g.generate();
        let rate = t.arrivals.len() as f64 / 60.0;
        assert!((rate - 500.0).abs() < 15.0, "{rate}");
        let (mean, cv) = mean_cv(&gaps(&t));
        assert!((mean - 2.0).abs() < 0.06, "{mean}");
        assert!((cv - 1.0).abs() < 0.05, "{cv}");
        assert!(t.arrivals.iter().all(|a| a.slo_ms == Some(300.0)));
        assert_eq!(t.apps, vec!["a".to_string()]);
    }

    #[test]
    fn poisson_pieces_are_seeded_and_follow_their_rates() {
        let a = poisson(&[(10.0, 100.0), (5.0, 0.0), (10.0, 400.0)], 7);
        assert_eq!(a, poisson(&[(10.0, 100.0), (5.0, 0.0), (10.0, 400.0)], 7));
        assert_ne!(a, poisson(&[(10.0, 100.0), (5.0, 0.0), (10.0, 400.0)], 8));
        assert!(a.windows(2).all(|w| w[0] < w[1]));
        let count = |from: f64, to: f64| a.iter().filter(|&&t| (from..to).contains(&t)).count();
        assert!((count(0.0, 10e3) as f64 - 1_000.0).abs() < 100.0);
        assert_eq!(count(10e3, 15e3), 0);
        assert!((count(15e3, 25e3) as f64 - 4_000.0).abs() < 200.0);
        assert!(a.last().is_some_and(|&t| t < 25e3));
    }

    #[test]
    fn gamma_gaps_have_the_asked_cv() {
        for cv in [0.5, 2.0, 4.0] {
            let g: Generator = format!("gamma:rate=400,cv={cv},duration=120")
                .parse()
                .unwrap();
            let t = g.generate();
            let (mean, got) = mean_cv(&gaps(&t));
            assert!((mean - 2.5).abs() / 2.5 < 0.1, "cv {cv}: mean gap {mean}");
            assert!((got - cv).abs() / cv < 0.1, "cv {cv}: got {got}");
        }
    }

    #[test]
    fn steps_bursts_and_days_follow_their_rate() {
        let t: Trace = "step:from=50,to=400,at=30,duration=60"
            .parse::<Generator>()
            .unwrap()
            .generate();
        let per_s = &t.per_second()[0];
        let before: u64 = per_s[..30].iter().sum();
        let after: u64 = per_s[30..60].iter().sum();
        assert!((before as f64 / 30.0 - 50.0).abs() < 6.0, "{before}");
        assert!((after as f64 / 30.0 - 400.0).abs() < 20.0, "{after}");

        let t = "burst:base=20,peak=600,every=10,length=2,duration=60"
            .parse::<Generator>()
            .unwrap()
            .generate();
        let per_s = &t.per_second()[0];
        let burst: u64 = (0..60).filter(|s| s % 10 < 2).map(|s| per_s[s]).sum();
        let calm: u64 = (0..60).filter(|s| s % 10 >= 2).map(|s| per_s[s]).sum();
        assert!((burst as f64 / 12.0 - 600.0).abs() < 40.0, "{burst}");
        assert!((calm as f64 / 48.0 - 20.0).abs() < 4.0, "{calm}");

        let t = "diurnal:mean=200,amplitude=0.9,period=40,duration=40"
            .parse::<Generator>()
            .unwrap()
            .generate();
        let per_s = &t.per_second()[0];
        let high: u64 = per_s[5..15].iter().sum(); // around the peak at t = 10
        let low: u64 = per_s[25..35].iter().sum(); // around the trough at t = 30
        assert!(high > 5 * low, "{high} vs {low}");
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        let a = "gamma:rate=100,cv=3,duration=10,seed=7"
            .parse::<Generator>()
            .unwrap();
        let b = "gamma:rate=100,cv=3,duration=10,seed=8"
            .parse::<Generator>()
            .unwrap();
        assert_eq!(a.generate(), a.generate());
        assert_ne!(a.generate(), b.generate());
    }

    #[test]
    fn bad_specs_name_the_problem() {
        for (spec, says) in [
            ("poisson", "KIND:key=value"),
            ("poisson:duration=10", "'rate' is required"),
            ("poisson:rate=-3,duration=10", "'rate=-3'"),
            ("poisson:rate=1,duration=10,burst=2", "unknown key 'burst'"),
            ("zipf:rate=1,duration=10", "unknown kind 'zipf'"),
            ("gamma:rate=1,cv=0,duration=10", "'cv' must be positive"),
            ("poisson:rate=1,duration=0", "'duration' must be positive"),
            ("poisson:rate=1,duration=5,min_accuracy=2", "[0, 1]"),
        ] {
            let e = spec.parse::<Generator>().unwrap_err().to_string();
            assert!(e.contains(says), "{spec}: {e}");
        }
    }
}
