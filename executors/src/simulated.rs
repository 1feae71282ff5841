//! A **simulated** GPU: latency profiles measured on real GPUs, and the hold that makes a
//! session answer no sooner than the profile says.
//!
//! A machine without a GPU can still exercise scheduling across CPU and GPU kinds: a worker
//! configured with a profile advertises one GPU marked simulated; GPU variants loaded there run
//! on ONNX Runtime's CPU provider (so their outputs are real) and each batch is held until the
//! profiled latency of its size has passed. The hold sits on the engine thread, so the
//! simulated device is busy for that long, as a real one would be, and the dynamic batcher
//! queues behind it.
//!
//! Profile files:
//! - the project's own CSV, with the header `batch_size,p50_ms,p99_ms` and one row per batch
//!   size;
//! - a Proteus-format CSV (`Model,Accel,Trials,batchsize,50th_pct,90th_pct,...`), chosen as
//!   `PATH#MODEL#ACCEL`, e.g. `aggregate_profiled.csv#resnet50_v1#onnxruntime_gpu_ampere`. That
//!   format has no p99: its 90th percentile stands in for the tail (the median where it is
//!   missing), and repeated rows of one batch size are averaged.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Latency of one batch size on the simulated device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfilePoint {
    pub batch: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// A measured latency profile: latency by batch size, sorted by batch size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyProfile {
    /// Where it came from (the configured `PATH` or `PATH#MODEL#ACCEL`), for logs and views.
    pub source: String,
    pub points: Vec<ProfilePoint>,
}

// Parsing admits finite, non-negative latencies only, so no NaN makes equality partial.
impl Eq for LatencyProfile {}

/// Why a profile could not be read. Every parse error names the file, the line and the field.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read the latency profile {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}, field '{field}': {problem}")]
    Parse {
        path: String,
        line: usize,
        field: String,
        problem: String,
    },
    #[error("{path}: {problem}")]
    Invalid { path: String, problem: String },
}

impl LatencyProfile {
    /// Reads `PATH` (own format) or `PATH#MODEL#ACCEL` (Proteus format).
    pub fn load(spec: &str) -> Result<LatencyProfile, ProfileError> {
        let mut parts = spec.split('#');
        let path = parts.next().unwrap_or_default();
        let selector = match (parts.next(), parts.next(), parts.next()) {
            (None, _, _) => None,
            (Some(model), Some(accel), None) if !model.is_empty() && !accel.is_empty() => {
                Some((model, accel))
            }
            _ => return Err(ProfileError::Invalid {
                path: spec.to_string(),
                problem:
                    "expected PATH (batch_size,p50_ms,p99_ms) or PATH#MODEL#ACCEL (Proteus format)"
                        .into(),
            }),
        };
        let text =
            std::fs::read_to_string(Path::new(path)).map_err(|source| ProfileError::Read {
                path: path.to_string(),
                source,
            })?;
        let mut profile = match selector {
            None => parse_own(&text, path)?,
            Some((model, accel)) => parse_proteus(&text, path, model, accel)?,
        };
        profile.source = spec.to_string();
        Ok(profile)
    }

    /// Median latency of a batch of `batch` rows: linear between profiled batch sizes, the
    /// smallest size's below it, and beyond the largest the last segment's slope (latency
    /// grows with the batch; never below the largest size's).
    pub fn p50_ms(&self, batch: usize) -> f64 {
        self.interpolate(batch, |p| p.p50_ms)
    }

    /// Tail latency at `batch`, interpolated like [`LatencyProfile::p50_ms`].
    pub fn p99_ms(&self, batch: usize) -> f64 {
        self.interpolate(batch, |p| p.p99_ms)
    }

    fn interpolate(&self, batch: usize, f: impl Fn(&ProfilePoint) -> f64) -> f64 {
        let b = batch.max(1) as f64;
        let pts = &self.points;
        let Some(first) = pts.first() else {
            return 0.0;
        };
        if b <= first.batch as f64 {
            return f(first);
        }
        let line = |lo: &ProfilePoint, hi: &ProfilePoint| {
            let (x0, x1) = (lo.batch as f64, hi.batch as f64);
            f(lo) + (f(hi) - f(lo)) * (b - x0) / (x1 - x0)
        };
        for w in pts.windows(2) {
            if b <= w[1].batch as f64 {
                return line(&w[0], &w[1]);
            }
        }
        let last = &pts[pts.len() - 1];
        match pts.len() {
            1 => f(last),
            n => line(&pts[n - 2], last).max(f(last)),
        }
    }

    fn finish(mut points: Vec<ProfilePoint>, path: &str) -> Result<LatencyProfile, ProfileError> {
        if points.is_empty() {
            return Err(ProfileError::Invalid {
                path: path.to_string(),
                problem: "the profile has no rows".into(),
            });
        }
        points.sort_by_key(|p| p.batch);
        Ok(LatencyProfile {
            source: path.to_string(),
            points,
        })
    }
}

struct Csv<'a> {
    path: &'a str,
    header: Vec<&'a str>,
}

impl<'a> Csv<'a> {
    fn parse_err(&self, line: usize, field: &str, problem: impl Into<String>) -> ProfileError {
        ProfileError::Parse {
            path: self.path.to_string(),
            line,
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn column(&self, name: &str) -> Result<usize, ProfileError> {
        self.header.iter().position(|h| *h == name).ok_or_else(|| {
            self.parse_err(
                1,
                name,
                format!("missing from the header ({})", self.header.join(",")),
            )
        })
    }

    fn cell<'r>(&self, row: &[&'r str], line: usize, col: usize) -> Result<&'r str, ProfileError> {
        row.get(col).copied().ok_or_else(|| {
            self.parse_err(
                line,
                self.header[col],
                format!(
                    "the row has {} fields, the header {}",
                    row.len(),
                    self.header.len()
                ),
            )
        })
    }

    fn batch(&self, row: &[&str], line: usize, col: usize) -> Result<usize, ProfileError> {
        let text = self.cell(row, line, col)?;
        match text.trim().parse::<usize>() {
            Ok(b) if b > 0 => Ok(b),
            _ => Err(self.parse_err(
                line,
                self.header[col],
                format!("'{text}' is not a batch size (a whole number of at least 1)"),
            )),
        }
    }

    fn ms(&self, row: &[&str], line: usize, col: usize) -> Result<f64, ProfileError> {
        let text = self.cell(row, line, col)?;
        match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
            _ => Err(self.parse_err(
                line,
                self.header[col],
                format!("'{text}' is not a latency in milliseconds (a non-negative number)"),
            )),
        }
    }
}

/// Data rows with their 1-based line numbers (blank lines skipped), and the header.
fn rows(text: &str) -> (Option<&str>, Vec<(usize, Vec<&str>)>) {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_end_matches('\r')))
        .filter(|(_, l)| !l.trim().is_empty());
    let header = lines.next().map(|(_, l)| l);
    let rows = lines.map(|(n, l)| (n, l.split(',').collect())).collect();
    (header, rows)
}

/// The project's own format: `batch_size,p50_ms,p99_ms`, one row per batch size.
pub fn parse_own(text: &str, path: &str) -> Result<LatencyProfile, ProfileError> {
    let (header, data) = rows(text);
    let csv = Csv {
        path,
        header: header
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .collect(),
    };
    let (cb, c50, c99) = (
        csv.column("batch_size")?,
        csv.column("p50_ms")?,
        csv.column("p99_ms")?,
    );
    let mut points: Vec<ProfilePoint> = Vec::with_capacity(data.len());
    for (line, row) in data {
        let batch = csv.batch(&row, line, cb)?;
        let p50_ms = csv.ms(&row, line, c50)?;
        let p99_ms = csv.ms(&row, line, c99)?;
        if p99_ms < p50_ms {
            return Err(csv.parse_err(
                line,
                "p99_ms",
                format!("{p99_ms} is below p50_ms {p50_ms}"),
            ));
        }
        if points.iter().any(|p| p.batch == batch) {
            return Err(csv.parse_err(
                line,
                "batch_size",
                format!("batch size {batch} is given twice"),
            ));
        }
        points.push(ProfilePoint {
            batch,
            p50_ms,
            p99_ms,
        });
    }
    LatencyProfile::finish(points, path)
}

/// The Proteus format, the rows of `model` on `accel`.
pub fn parse_proteus(
    text: &str,
    path: &str,
    model: &str,
    accel: &str,
) -> Result<LatencyProfile, ProfileError> {
    let (header, data) = rows(text);
    let csv = Csv {
        path,
        header: header
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .collect(),
    };
    let (cm, ca, cb, c50, c90) = (
        csv.column("Model")?,
        csv.column("Accel")?,
        csv.column("batchsize")?,
        csv.column("50th_pct")?,
        csv.column("90th_pct")?,
    );
    // (batch, sum p50, sum tail, rows)
    let mut sums: Vec<(usize, f64, f64, usize)> = Vec::new();
    let mut seen_model = false;
    for (line, row) in data {
        if csv.cell(&row, line, cm)? != model {
            continue;
        }
        seen_model = true;
        if csv.cell(&row, line, ca)? != accel {
            continue;
        }
        let batch = csv.batch(&row, line, cb)?;
        let p50 = csv.ms(&row, line, c50)?;
        let tail = if csv.cell(&row, line, c90)?.trim().is_empty() {
            p50
        } else {
            csv.ms(&row, line, c90)?.max(p50)
        };
        match sums.iter_mut().find(|s| s.0 == batch) {
            Some(s) => {
                s.1 += p50;
                s.2 += tail;
                s.3 += 1;
            }
            None => sums.push((batch, p50, tail, 1)),
        }
    }
    if sums.is_empty() {
        return Err(ProfileError::Invalid {
            path: path.to_string(),
            problem: if seen_model {
                format!("model '{model}' has no rows on accelerator '{accel}'")
            } else {
                format!("no rows of model '{model}'")
            },
        });
    }
    let points = sums
        .into_iter()
        .map(|(batch, p50, tail, n)| ProfilePoint {
            batch,
            p50_ms: p50 / n as f64,
            p99_ms: tail / n as f64,
        })
        .collect();
    LatencyProfile::finish(points, path)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const OWN: &str = "batch_size,p50_ms,p99_ms\n1,2.0,3.0\n4,5.0,8.0\n\n8,9.0,12.0\n";

    #[test]
    fn reads_the_own_format_and_interpolates() {
        let p = parse_own(OWN, "gpu.csv").unwrap();
        assert_eq!(p.points.len(), 3);
        assert_eq!(p.p50_ms(1), 2.0);
        assert_eq!(p.p50_ms(0), 2.0);
        // Between 1 and 4: 2 + 3 * (2 - 1) / 3.
        assert_eq!(p.p50_ms(2), 3.0);
        assert_eq!(p.p99_ms(4), 8.0);
        assert_eq!(p.p50_ms(6), 7.0);
        // Past the largest size: the last slope (1 ms per row).
        assert_eq!(p.p50_ms(10), 11.0);
        // Rows in any order; a single row is flat.
        let one = parse_own("p99_ms,batch_size,p50_ms\n4,1,3\n", "x.csv").unwrap();
        assert_eq!(one.p50_ms(64), 3.0);
        assert_eq!(one.p99_ms(64), 4.0);
    }

    #[test]
    fn own_format_errors_name_file_line_and_field() {
        let cases = [
            (
                "batch,p50_ms,p99_ms\n1,2,3\n",
                1,
                "batch_size",
                "missing from the header",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,2,3\nx,2,3\n",
                3,
                "batch_size",
                "'x' is not a batch size",
            ),
            (
                "batch_size,p50_ms,p99_ms\n0,2,3\n",
                2,
                "batch_size",
                "'0' is not a batch size",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,-2,3\n",
                2,
                "p50_ms",
                "not a latency",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,2,NaN\n",
                2,
                "p99_ms",
                "not a latency",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,2\n",
                2,
                "p99_ms",
                "the row has 2 fields",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,5,3\n",
                2,
                "p99_ms",
                "below p50_ms",
            ),
            (
                "batch_size,p50_ms,p99_ms\n1,2,3\n\n1,2,3\n",
                4,
                "batch_size",
                "given twice",
            ),
        ];
        for (text, line, field, needle) in cases {
            let err = parse_own(text, "gpu.csv").unwrap_err();
            match &err {
                ProfileError::Parse {
                    path,
                    line: l,
                    field: f,
                    problem,
                } => {
                    assert_eq!(
                        (path.as_str(), *l, f.as_str()),
                        ("gpu.csv", line, field),
                        "{err}"
                    );
                    assert!(problem.contains(needle), "{err}");
                }
                other => panic!("expected a parse error, got {other}"),
            }
            let text = err.to_string();
            assert!(
                text.contains(&format!("gpu.csv, line {line}, field '{field}'")),
                "{text}"
            );
        }
        assert!(parse_own("batch_size,p50_ms,p99_ms\n", "e.csv")
            .unwrap_err()
            .to_string()
            .contains("no rows"));
    }

    const PROTEUS: &str = "Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,Normalized_Accuracy
resnet,onnxruntime_cpu,100,1,90.0,95.0,91.0,80.0,99.0,77.0,97.0
resnet,onnxruntime_gpu_ampere,,1,30.0,,30.0,26.0,67.0,77.0,97.0
resnet,onnxruntime_gpu_ampere,,2,50.0,,50.0,44.0,218.0,77.0,97.0
bert,onnxruntime_gpu_ampere,1000,1,10.0,11.0,10.5,9.0,400.0,94.0,97.0
bert,onnxruntime_gpu_ampere,1000,1,12.0,14.0,12.5,9.0,400.0,94.0,97.0
";

    #[test]
    fn reads_the_proteus_format() {
        let r = parse_proteus(PROTEUS, "agg.csv", "resnet", "onnxruntime_gpu_ampere").unwrap();
        assert_eq!(
            r.points,
            vec![
                ProfilePoint {
                    batch: 1,
                    p50_ms: 30.0,
                    p99_ms: 30.0
                },
                ProfilePoint {
                    batch: 2,
                    p50_ms: 50.0,
                    p99_ms: 50.0
                },
            ]
        );
        // Repeated rows are averaged; the 90th percentile is the tail.
        let b = parse_proteus(PROTEUS, "agg.csv", "bert", "onnxruntime_gpu_ampere").unwrap();
        assert_eq!(
            b.points,
            vec![ProfilePoint {
                batch: 1,
                p50_ms: 11.0,
                p99_ms: 12.5
            }]
        );
    }

    #[test]
    fn proteus_errors_say_what_is_missing() {
        let no_model = parse_proteus(PROTEUS, "agg.csv", "gpt9", "onnxruntime_cpu").unwrap_err();
        assert!(
            no_model.to_string().contains("no rows of model 'gpt9'"),
            "{no_model}"
        );
        let no_accel = parse_proteus(PROTEUS, "agg.csv", "bert", "onnxruntime_cpu").unwrap_err();
        assert!(
            no_accel
                .to_string()
                .contains("no rows on accelerator 'onnxruntime_cpu'"),
            "{no_accel}"
        );
        let bad = PROTEUS.replace(
            "bert,onnxruntime_gpu_ampere,1000,1,12.0",
            "bert,onnxruntime_gpu_ampere,1000,1,fast",
        );
        let err = parse_proteus(&bad, "agg.csv", "bert", "onnxruntime_gpu_ampere").unwrap_err();
        assert!(
            err.to_string()
                .contains("agg.csv, line 6, field '50th_pct'"),
            "{err}"
        );
    }

    #[test]
    fn load_takes_a_path_or_a_selector() {
        let dir = tempfile::tempdir().unwrap();
        let own = dir.path().join("gpu.csv");
        std::fs::write(&own, OWN).unwrap();
        let p = LatencyProfile::load(own.to_str().unwrap()).unwrap();
        assert_eq!(p.source, own.to_str().unwrap());
        assert_eq!(p.points.len(), 3);

        let agg = dir.path().join("agg.csv");
        std::fs::write(&agg, PROTEUS).unwrap();
        let spec = format!("{}#resnet#onnxruntime_gpu_ampere", agg.display());
        let p = LatencyProfile::load(&spec).unwrap();
        assert_eq!(p.source, spec);
        assert_eq!(p.p50_ms(2), 50.0);

        let bad = format!("{}#resnet", agg.display());
        assert!(LatencyProfile::load(&bad)
            .unwrap_err()
            .to_string()
            .contains("PATH#MODEL#ACCEL"));
        let missing = dir.path().join("nope.csv");
        let err = LatencyProfile::load(missing.to_str().unwrap()).unwrap_err();
        assert!(err.to_string().contains("nope.csv"), "{err}");
    }

    /// The shared Proteus data, when it is beside the repository (it is not part of it).
    #[test]
    fn reads_the_shared_proteus_profiles_when_present() {
        // `INFAAS_PROTEUS_PROFILES` names the file; by default `shared/` beside the repository.
        let path = std::env::var_os("INFAAS_PROTEUS_PROFILES")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../../shared/data/proteus/aggregate_profiled.csv")
            });
        if !path.is_file() {
            eprintln!("skipped: {} is not present", path.display());
            return;
        }
        let spec = format!("{}#resnet50_v1#onnxruntime_gpu_ampere", path.display());
        let p = LatencyProfile::load(&spec).unwrap();
        assert!(p.points.len() >= 4, "{p:?}");
        assert!(p.points.windows(2).all(|w| w[0].batch < w[1].batch));
        assert!(p.p50_ms(1) > 1.0 && p.p50_ms(8) > p.p50_ms(1), "{p:?}");
    }
}
