//! Workloads as traces of query arrivals: the format users bring to the simulator and the load
//! generator, and the platform exports its recorded traffic in (generators are in `infaas-sim`).
//!
//! # The trace format
//!
//! A CSV file with a header line and one query per line, sorted or not (they are sorted on
//! reading):
//!
//! ```text
//! time_ms,app,slo_ms,min_accuracy
//! 0.0,digits,300,
//! 12.5,digits,300,0.9
//! 13.1,faces,150,
//! ```
//!
//! - `time_ms`: arrival time in milliseconds from the start of the trace (non-negative);
//! - `app`: the application (or model) the query names;
//! - `slo_ms`: its latency SLO in milliseconds (positive), empty for none;
//! - `min_accuracy`: its minimum accuracy in [0, 1], empty for none.
//!
//! The Proteus Twitter traces (a directory of `<family>.txt` files, one line per query:
//! `arrival_ms,qos_level,slo_ms`) read with [`Trace::read_proteus_dir`], one application per
//! file named after the family.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

/// One query arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    /// Milliseconds from the start of the trace.
    pub at_ms: f64,
    /// Index into [`Trace::apps`].
    pub app: usize,
    pub slo_ms: Option<f64>,
    pub min_accuracy: Option<f64>,
}

/// Arrivals sorted by time, and the applications they name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Trace {
    pub apps: Vec<String>,
    pub arrivals: Vec<Arrival>,
}

/// Why a trace could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}, line {line}: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("{0} holds no arrivals")]
    Empty(PathBuf),
    #[error("invalid workload generator '{spec}': {message}")]
    Spec { spec: String, message: String },
}

impl Trace {
    /// A deterministic trace of one application: for each `(from_s, to_s, rate)` phase,
    /// `rate` arrivals evenly spaced within each second from `from_s` up to `to_s` (the k-th
    /// of a second at `(k + 0.5) / rate` of it), each with the SLO `slo_ms`.
    pub fn evenly_spaced(app: &str, slo_ms: Option<f64>, phases: &[(u32, u32, u32)]) -> Trace {
        let mut arrivals = Vec::new();
        for &(from, to, rate) in phases {
            for s in from..to {
                for k in 0..rate {
                    arrivals.push(Arrival {
                        at_ms: s as f64 * 1e3 + (k as f64 + 0.5) * 1e3 / rate as f64,
                        app: 0,
                        slo_ms,
                        min_accuracy: None,
                    });
                }
            }
        }
        let mut trace = Trace {
            apps: vec![app.to_string()],
            arrivals,
        };
        trace.sort();
        trace
    }

    /// The index of application `name`, added when new.
    pub fn app_index(&mut self, name: &str) -> usize {
        match self.apps.iter().position(|a| a == name) {
            Some(i) => i,
            None => {
                self.apps.push(name.to_string());
                self.apps.len() - 1
            }
        }
    }

    /// Sorts the arrivals by time (stable: equal times keep their order).
    pub fn sort(&mut self) {
        self.arrivals.sort_by(|a, b| a.at_ms.total_cmp(&b.at_ms));
    }

    /// Time of the last arrival, ms (0 for an empty trace).
    pub fn duration_ms(&self) -> f64 {
        self.arrivals.last().map_or(0.0, |a| a.at_ms)
    }

    /// Mean arrival rate over the trace, queries per second.
    pub fn mean_rate(&self) -> f64 {
        let d = self.duration_ms();
        if d > 0.0 {
            self.arrivals.len() as f64 / (d / 1e3)
        } else {
            0.0
        }
    }

    /// Arrivals per whole second of the trace, per application (`[app][second]`).
    pub fn per_second(&self) -> Vec<Vec<u64>> {
        let seconds = (self.duration_ms() / 1e3).floor() as usize + 1;
        let mut counts = vec![vec![0u64; seconds]; self.apps.len()];
        for a in &self.arrivals {
            counts[a.app][(a.at_ms / 1e3) as usize] += 1;
        }
        counts
    }

    /// Reads a trace in the documented CSV format (see the module documentation).
    pub fn read_csv(path: &Path) -> Result<Trace, TraceError> {
        let file = std::fs::File::open(path).map_err(|source| TraceError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Trace::from_csv_reader(std::io::BufReader::new(file), path)
    }

    /// Parses a trace in the documented CSV format held in memory (an upload, say); errors
    /// name `source` in place of a path, and the line.
    pub fn parse_csv(text: &str, source: &str) -> Result<Trace, TraceError> {
        Trace::from_csv_reader(text.as_bytes(), Path::new(source))
    }

    /// Reads a trace in the documented CSV format from `reader`; errors name `path`.
    pub fn from_csv_reader(reader: impl BufRead, path: &Path) -> Result<Trace, TraceError> {
        let mut trace = Trace::default();
        let bad = |line: usize, message: String| TraceError::Line {
            path: path.to_path_buf(),
            line,
            message,
        };
        for (i, line) in reader.lines().enumerate() {
            let line = line.map_err(|source| TraceError::Io {
                path: path.to_path_buf(),
                source,
            })?;
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if i == 0 {
                if line.replace(' ', "") != "time_ms,app,slo_ms,min_accuracy" {
                    return Err(bad(
                        1,
                        format!(
                            "the header must be 'time_ms,app,slo_ms,min_accuracy', not '{line}'"
                        ),
                    ));
                }
                continue;
            }
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            let [time, app, slo, acc] = fields[..] else {
                return Err(bad(
                    i + 1,
                    format!("expected 4 fields, found {}", fields.len()),
                ));
            };
            let at_ms = number(time).filter(|t| *t >= 0.0).ok_or_else(|| {
                bad(
                    i + 1,
                    format!("time_ms '{time}' is not a non-negative number"),
                )
            })?;
            if app.is_empty() {
                return Err(bad(i + 1, "app is empty".into()));
            }
            let slo_ms =
                optional(slo).map_err(|_| bad(i + 1, format!("slo_ms '{slo}' is not a number")))?;
            if slo_ms.is_some_and(|s| s <= 0.0) {
                return Err(bad(i + 1, format!("slo_ms '{slo}' must be positive")));
            }
            let min_accuracy = optional(acc)
                .map_err(|_| bad(i + 1, format!("min_accuracy '{acc}' is not a number")))?;
            if min_accuracy.is_some_and(|a| !(0.0..=1.0).contains(&a)) {
                return Err(bad(
                    i + 1,
                    format!("min_accuracy '{acc}' must be in [0, 1]"),
                ));
            }
            let app = trace.app_index(app);
            trace.arrivals.push(Arrival {
                at_ms,
                app,
                slo_ms,
                min_accuracy,
            });
        }
        if trace.arrivals.is_empty() {
            return Err(TraceError::Empty(path.to_path_buf()));
        }
        trace.sort();
        Ok(trace)
    }

    /// Writes the trace in the documented CSV format.
    pub fn write_csv(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "time_ms,app,slo_ms,min_accuracy")?;
        for a in &self.arrivals {
            let slo = a.slo_ms.map(|s| s.to_string()).unwrap_or_default();
            let acc = a.min_accuracy.map(|s| s.to_string()).unwrap_or_default();
            writeln!(out, "{},{},{slo},{acc}", a.at_ms, self.apps[a.app])?;
        }
        Ok(())
    }

    /// Reads a directory of Proteus traces: every `<family>.txt` in it (lines
    /// `arrival_ms,qos_level,slo_ms`) is one application named after the family.
    pub fn read_proteus_dir(dir: &Path) -> Result<Trace, TraceError> {
        let io = |source| TraceError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "txt"))
            .collect();
        files.sort();
        let mut trace = Trace::default();
        for path in &files {
            let family = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let app = trace.app_index(&family);
            let text = std::fs::read_to_string(path).map_err(|source| TraceError::Io {
                path: path.clone(),
                source,
            })?;
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let mut fields = line.split(',').map(str::trim);
                let (Some(at), Some(_qos), Some(slo)) =
                    (fields.next(), fields.next(), fields.next())
                else {
                    return Err(TraceError::Line {
                        path: path.clone(),
                        line: i + 1,
                        message: "expected 'arrival_ms,qos_level,slo_ms'".into(),
                    });
                };
                let (Some(at_ms), Some(slo_ms)) = (number(at), number(slo)) else {
                    return Err(TraceError::Line {
                        path: path.clone(),
                        line: i + 1,
                        message: format!("'{line}' does not hold two numbers"),
                    });
                };
                trace.arrivals.push(Arrival {
                    at_ms,
                    app,
                    slo_ms: Some(slo_ms),
                    min_accuracy: None,
                });
            }
        }
        if trace.arrivals.is_empty() {
            return Err(TraceError::Empty(dir.to_path_buf()));
        }
        trace.sort();
        Ok(trace)
    }
}

fn number(s: &str) -> Option<f64> {
    s.parse::<f64>().ok().filter(|x| x.is_finite())
}

fn optional(s: &str) -> Result<Option<f64>, ()> {
    if s.is_empty() {
        Ok(None)
    } else {
        number(s).map(Some).ok_or(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn evenly_spaced_phases_place_each_seconds_arrivals_evenly() {
        let t = Trace::evenly_spaced("m", Some(50.0), &[(0, 2, 4), (2, 3, 2)]);
        assert_eq!(t.apps, ["m"]);
        let times: Vec<f64> = t.arrivals.iter().map(|a| a.at_ms).collect();
        assert_eq!(
            times,
            [125.0, 375.0, 625.0, 875.0, 1125.0, 1375.0, 1625.0, 1875.0, 2250.0, 2750.0]
        );
        assert!(t
            .arrivals
            .iter()
            .all(|a| a.slo_ms == Some(50.0) && a.app == 0));
        assert_eq!(t.per_second(), vec![vec![4, 4, 2]]);
    }

    #[test]
    fn csv_traces_read_sorted_and_write_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "t.csv",
            "time_ms,app,slo_ms,min_accuracy\n20,b,150,\n0,a,300,0.9\n\n10.5,a,,\n",
        );
        let t = Trace::read_csv(&p).unwrap();
        assert_eq!(t.apps, ["b", "a"]);
        let times: Vec<f64> = t.arrivals.iter().map(|a| a.at_ms).collect();
        assert_eq!(times, [0.0, 10.5, 20.0]);
        assert_eq!(t.arrivals[0].min_accuracy, Some(0.9));
        assert_eq!(t.arrivals[1].slo_ms, None);
        assert_eq!(t.per_second(), vec![vec![1], vec![2]]);
        let mut out = Vec::new();
        t.write_csv(&mut out).unwrap();
        let again = Trace::read_csv(&write(
            dir.path(),
            "u.csv",
            &String::from_utf8(out).unwrap(),
        ))
        .unwrap();
        assert_eq!(again.arrivals.len(), 3);
        assert_eq!(again.arrivals[2].slo_ms, Some(150.0));
    }

    #[test]
    fn bad_csv_lines_name_the_line_and_field() {
        let dir = tempfile::tempdir().unwrap();
        for (text, says) in [
            ("t,app\n", "the header must be"),
            (
                "time_ms,app,slo_ms,min_accuracy\n1,a,3\n",
                "line 2: expected 4 fields",
            ),
            ("time_ms,app,slo_ms,min_accuracy\n-1,a,3,\n", "time_ms '-1'"),
            ("time_ms,app,slo_ms,min_accuracy\n1,,3,\n", "app is empty"),
            (
                "time_ms,app,slo_ms,min_accuracy\n1,a,0,\n",
                "slo_ms '0' must be positive",
            ),
            (
                "time_ms,app,slo_ms,min_accuracy\n1,a,5,1.5\n",
                "min_accuracy '1.5'",
            ),
            ("time_ms,app,slo_ms,min_accuracy\n", "holds no arrivals"),
        ] {
            let e = Trace::read_csv(&write(dir.path(), "bad.csv", text))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{text:?}: {e}");
        }
    }

    #[test]
    fn csv_text_parses_like_a_file_and_errors_name_the_source() {
        let t = Trace::parse_csv(
            "time_ms,app,slo_ms,min_accuracy\r\n5,a,100,\r\n1,b,,0.5\r\n",
            "the upload",
        )
        .unwrap();
        assert_eq!(t.apps, ["a", "b"]);
        assert_eq!(t.arrivals[0].at_ms, 1.0);
        assert_eq!(t.arrivals[1].slo_ms, Some(100.0));
        let e = Trace::parse_csv("time_ms,app,slo_ms,min_accuracy\n1,a,x,\n", "the upload")
            .unwrap_err()
            .to_string();
        assert_eq!(e, "the upload, line 2: slo_ms 'x' is not a number");
    }

    #[test]
    fn a_proteus_directory_is_one_application_per_family() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "resnet.txt", "5,1,300\n100,1,300\n");
        write(dir.path(), "bert.txt", "50,1,650\n");
        write(dir.path(), "notes.md", "not a trace");
        let t = Trace::read_proteus_dir(dir.path()).unwrap();
        assert_eq!(t.apps, ["bert", "resnet"]);
        let seq: Vec<(f64, &str, Option<f64>)> = t
            .arrivals
            .iter()
            .map(|a| (a.at_ms, t.apps[a.app].as_str(), a.slo_ms))
            .collect();
        assert_eq!(
            seq,
            [
                (5.0, "resnet", Some(300.0)),
                (50.0, "bert", Some(650.0)),
                (100.0, "resnet", Some(300.0))
            ]
        );
        write(dir.path(), "t5.txt", "oops\n");
        let e = Trace::read_proteus_dir(dir.path()).unwrap_err().to_string();
        assert!(e.contains("t5.txt, line 1"), "{e}");
    }
}
