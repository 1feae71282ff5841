//! Measured profiles as the simulator's catalogue of variants: the Proteus catalogue
//! (`aggregate_profiled.csv`: models of several families on a CPU and two GPU generations,
//! latency per batch size, accuracy) read into the scheduler's own [`VariantEntry`] type, so
//! that the policies see simulated variants exactly as they see registered ones.
//!
//! Columns: `Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,
//! Normalized_Accuracy`. The catalogue has no p99: the 90th percentile stands for it (the
//! SLO checks of the policies read `p99_ms`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use infaas_core::{HardwareKind, LatencyPoint};
use infaas_scheduler::VariantEntry;

/// Hardware a profile was measured on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Accelerator {
    Cpu,
    /// A GPU of the Pascal generation (GTX 1080 Ti in the Proteus catalogue).
    GpuPascal,
    /// A GPU of the Ampere generation.
    GpuAmpere,
}

impl Accelerator {
    pub fn parse(s: &str) -> Option<Accelerator> {
        match s {
            "onnxruntime_cpu" | "cpu" => Some(Accelerator::Cpu),
            "onnxruntime_gpu_pascal" | "gpu_pascal" => Some(Accelerator::GpuPascal),
            "onnxruntime_gpu_ampere" | "gpu_ampere" => Some(Accelerator::GpuAmpere),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Accelerator::Cpu => "cpu",
            Accelerator::GpuPascal => "gpu_pascal",
            Accelerator::GpuAmpere => "gpu_ampere",
        }
    }

    /// The hardware kind the scheduler knows.
    pub fn kind(self) -> HardwareKind {
        match self {
            Accelerator::Cpu => HardwareKind::Cpu,
            Accelerator::GpuPascal | Accelerator::GpuAmpere => HardwareKind::Gpu,
        }
    }
}

/// One profiled (model, accelerator) pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Profile {
    pub model: String,
    /// The family (application) the model serves, e.g. `resnet` for `resnet50_v1`.
    pub family: String,
    pub accelerator: Accelerator,
    /// Accuracy in [0, 1].
    pub accuracy: f64,
    /// Sorted by batch size.
    pub latency: Vec<LatencyPoint>,
}

impl Profile {
    /// A synthetic profile, for what-if runs and tests: batches of 1, 2, 4 and 8 rows, a
    /// batch of `b` rows taking `base_ms * (1 + slope * (b - 1))` (p50 and mean), its p99
    /// 1.1 times that.
    pub fn linear(
        model: &str,
        family: &str,
        accelerator: Accelerator,
        accuracy: f64,
        base_ms: f64,
        slope: f64,
    ) -> Profile {
        Profile {
            model: model.into(),
            family: family.into(),
            accelerator,
            accuracy,
            latency: [1usize, 2, 4, 8]
                .iter()
                .map(|&b| {
                    let ms = base_ms * (1.0 + slope * (b as f64 - 1.0));
                    LatencyPoint {
                        batch: b,
                        p50_ms: ms,
                        p99_ms: ms * 1.1,
                        mean_ms: ms,
                        throughput_per_s: b as f64 * 1e3 / ms,
                    }
                })
                .collect(),
        }
    }

    /// A synthetic catalogue: per `(family, base_ms)`, three models `{family}0..2` from fast
    /// and inaccurate (accuracy 0.6, `base_ms` on the GPU) to slow and accurate (0.9, four
    /// times slower), each on a Pascal GPU and on the CPU (four times slower again), batch
    /// cost slope 0.4.
    pub fn ladder(families: &[(&str, f64)]) -> Vec<Profile> {
        let mut out = Vec::new();
        for &(family, base) in families {
            for (m, (accuracy, scale)) in [(0.6, 1.0), (0.75, 2.0), (0.9, 4.0)].iter().enumerate() {
                for (accel, speed) in [(Accelerator::Cpu, 4.0), (Accelerator::GpuPascal, 1.0)] {
                    out.push(Profile::linear(
                        &format!("{family}{m}"),
                        family,
                        accel,
                        *accuracy,
                        base * scale * speed,
                        0.4,
                    ));
                }
            }
        }
        out
    }

    /// The scheduler's entries for this profile as variants of application `app` holding
    /// `threads` cores (CPU) or one GPU, with the given load time and memory: one per profiled
    /// batch size, as the largest batch the variant runs (a variant is a model, hardware and
    /// batch size, as in INFaaS), so that a policy can trade throughput for latency.
    pub fn variants(
        &self,
        app: &str,
        threads: usize,
        load_ms: f64,
        memory_bytes: u64,
    ) -> Vec<VariantEntry> {
        self.latency
            .iter()
            .map(|top| {
                let name = format!(
                    "{}@{}#b{}",
                    self.model,
                    self.accelerator.as_str(),
                    top.batch
                );
                VariantEntry {
                    id: name.clone(),
                    name,
                    model: self.model.clone(),
                    app: app.to_string(),
                    accuracy: self.accuracy,
                    hardware: self.accelerator.kind(),
                    threads,
                    max_batch: top.batch,
                    load_ms,
                    memory_bytes,
                    latency: self
                        .latency
                        .iter()
                        .filter(|p| p.batch <= top.batch)
                        .cloned()
                        .collect(),
                }
            })
            .collect()
    }
}

/// Why a catalogue could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CatalogueError {
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
    #[error("{0} holds no profiles")]
    Empty(PathBuf),
}

/// The family a Proteus model belongs to (the trace files are named after families), or
/// `None` for a model of no known family.
pub fn family_of(model: &str) -> Option<&'static str> {
    let m = model.rsplit('/').next().unwrap_or(model);
    const FAMILIES: &[(&str, &[&str])] = &[
        ("yolo", &["yolov5"]),
        ("resnest", &["resnest"]),
        ("resnet", &["resnet"]),
        ("densenet", &["densenet"]),
        ("efficientnet", &["efficientnet"]),
        ("mobilenet", &["mobilenet"]),
        ("gpt2", &["gpt2"]),
        ("t5", &["t5-"]),
        ("bert", &["bert", "albert", "roberta"]),
    ];
    FAMILIES
        .iter()
        .find(|(_, prefixes)| prefixes.iter().any(|p| m.starts_with(p)))
        .map(|(f, _)| *f)
}

/// Reads a catalogue in the Proteus format; models of no known family keep their own name as
/// family.
pub fn read_proteus(path: &Path) -> Result<Vec<Profile>, CatalogueError> {
    let text = std::fs::read_to_string(path).map_err(|source| CatalogueError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let bad = |line: usize, message: String| CatalogueError::Line {
        path: path.to_path_buf(),
        line,
        message,
    };
    let mut by_key: BTreeMap<(String, Accelerator), Profile> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if i == 0 || line.is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split(',').map(str::trim).collect();
        if f.len() < 10 {
            return Err(bad(i + 1, format!("expected 11 fields, found {}", f.len())));
        }
        let accelerator = Accelerator::parse(f[1])
            .ok_or_else(|| bad(i + 1, format!("unknown accelerator '{}'", f[1])))?;
        let num = |k: usize, what: &str| {
            f[k].parse::<f64>()
                .ok()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| bad(i + 1, format!("{what} '{}' is not a number", f[k])))
        };
        let batch = num(3, "batchsize")? as usize;
        if batch == 0 {
            return Err(bad(i + 1, "batchsize 0".into()));
        }
        let p50_ms = num(4, "50th_pct")?;
        // Some rows leave the tail or the mean empty: the median stands for them.
        let p90_ms = if f[5].is_empty() {
            p50_ms
        } else {
            num(5, "90th_pct")?
        };
        let mean_ms = if f[6].is_empty() {
            p50_ms
        } else {
            num(6, "avg_latency(ms)")?
        };
        let accuracy = num(9, "Accuracy")? / 100.0;
        let model = f[0].to_string();
        let entry = by_key
            .entry((model.clone(), accelerator))
            .or_insert_with(|| Profile {
                family: family_of(&model).unwrap_or(&model).to_string(),
                model,
                accelerator,
                accuracy,
                latency: Vec::new(),
            });
        entry.latency.push(LatencyPoint {
            batch,
            p50_ms,
            p99_ms: p90_ms.max(p50_ms),
            mean_ms,
            throughput_per_s: if mean_ms > 0.0 {
                batch as f64 * 1e3 / mean_ms
            } else {
                0.0
            },
        });
    }
    let mut profiles: Vec<Profile> = by_key.into_values().collect();
    for p in &mut profiles {
        p.latency.sort_by_key(|l| l.batch);
        p.latency.dedup_by_key(|l| l.batch);
    }
    if profiles.is_empty() {
        return Err(CatalogueError::Empty(path.to_path_buf()));
    }
    Ok(profiles)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn families_cover_the_trace_files() {
        for (model, family) in [
            ("resnet50_v1", "resnet"),
            ("resnest269", "resnest"),
            ("yolov5n", "yolo"),
            ("prajjwal1/bert-tiny", "bert"),
            ("albert-base-v2", "bert"),
            ("roberta-large", "bert"),
            ("gpt2-xl", "gpt2"),
            ("t5-small", "t5"),
            ("efficientnet-b7", "efficientnet"),
            ("mobilenet0.25", "mobilenet"),
            ("densenet121", "densenet"),
        ] {
            assert_eq!(family_of(model), Some(family), "{model}");
        }
        assert_eq!(family_of("vgg16"), None);
    }

    #[test]
    fn synthetic_profiles_follow_their_formula() {
        let p = Profile::linear("m", "f", Accelerator::Cpu, 0.7, 4.0, 0.25);
        let batches: Vec<usize> = p.latency.iter().map(|l| l.batch).collect();
        assert_eq!(batches, [1, 2, 4, 8]);
        let b8 = &p.latency[3];
        assert_eq!((b8.mean_ms, b8.p50_ms), (11.0, 11.0));
        assert!((b8.p99_ms - 12.1).abs() < 1e-9);
        assert!((b8.throughput_per_s - 8e3 / 11.0).abs() < 1e-9);

        let c = Profile::ladder(&[("yolo", 6.0), ("bert", 3.0)]);
        assert_eq!(c.len(), 12);
        let most = c
            .iter()
            .find(|p| p.model == "yolo2" && p.accelerator == Accelerator::Cpu)
            .unwrap();
        // 6 ms x 4 (the slow model) x 4 (the CPU) at batch 1.
        assert_eq!((most.accuracy, most.latency[0].mean_ms), (0.9, 96.0));
        assert_eq!(most.family, "yolo");
    }

    #[test]
    fn a_catalogue_reads_into_sorted_profiles_and_variants() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("profiles.csv");
        std::fs::write(
            &path,
            "Model,Accel,Trials,batchsize,50th_pct,90th_pct,avg_latency(ms),Min,Max,Accuracy,Normalized_Accuracy\n\
             resnet18_v1,onnxruntime_cpu,100,4,20,24,21,18,30,69.8,80\n\
             resnet18_v1,onnxruntime_cpu,100,1,8,9,8.5,7,12,69.8,80\n\
             resnet18_v1,onnxruntime_gpu_ampere,100,1,1,1.2,1.1,0.9,2,69.8,80\n\
             resnet18_v1,onnxruntime_gpu_ampere,,2,1.5,,,0.9,2,69.8,80\n",
        )
        .unwrap();
        let p = read_proteus(&path).unwrap();
        assert_eq!(p.len(), 2);
        let cpu = p
            .iter()
            .find(|p| p.accelerator == Accelerator::Cpu)
            .unwrap();
        assert_eq!(cpu.family, "resnet");
        assert_eq!(
            cpu.latency.iter().map(|l| l.batch).collect::<Vec<_>>(),
            [1, 4]
        );
        assert!((cpu.accuracy - 0.698).abs() < 1e-9);
        let vs = cpu.variants("resnet", 2, 500.0, 1 << 28);
        assert_eq!(vs.iter().map(|v| v.max_batch).collect::<Vec<_>>(), [1, 4]);
        assert_eq!(
            vs[0].latency.len(),
            1,
            "a batch-1 variant knows only batch 1"
        );
        let v = &vs[1];
        assert_eq!(v.hardware, HardwareKind::Cpu);
        assert!((v.latency_ms(1) - 9.0).abs() < 1e-9, "p90 stands for p99");
        assert!((v.peak_qps() - 4.0 * 1e3 / 21.0).abs() < 1e-6);
        let gpu = p
            .iter()
            .find(|p| p.accelerator == Accelerator::GpuAmpere)
            .unwrap();
        let b2 = &gpu.latency[1];
        assert_eq!(
            (b2.batch, b2.p99_ms, b2.mean_ms),
            (2, 1.5, 1.5),
            "empty cells take the median"
        );

        std::fs::write(&path, "header\nresnet18_v1,tpu,1,1,1,1,1,1,1,50,50\n").unwrap();
        let e = read_proteus(&path).unwrap_err().to_string();
        assert!(
            e.contains("line 2") && e.contains("unknown accelerator 'tpu'"),
            "{e}"
        );
    }
}
