//! For unit tests: a cluster view over scripted workers (no process, no ONNX Runtime) and a
//! catalog of CPU variants of one tenant, each taking `x` (FP32, 4 features) and answering
//! `y`. A worker answers a variant of model `double` with `2x` and any other with `x + 1`; it
//! records the loads and queries it was sent, and fails every query while told to.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use infaas_core::{FileKind, HardwareKind, LatencyPoint, Tensor, TensorData, Variant};
use infaas_store::{CatalogEntry, Db};
use infaas_worker::{Heartbeat, LoadRequest, LoadedReport, Worker, WorkerInfo};

use super::{CallError, Catalog, Cluster};
use crate::config::Config;

/// The tenant of the fake catalog.
pub(crate) const TENANT: &str = "t";

/// A variant of the fake catalog: application, model, variant id, profiled p50 (ms, at every
/// batch size), load time (ms).
pub(crate) struct FakeVariant {
    pub app: &'static str,
    pub model: &'static str,
    pub id: &'static str,
    pub p50_ms: f64,
    pub load_ms: f64,
}

impl FakeVariant {
    /// The variant's name in outcomes and usage.
    pub fn name(&self) -> String {
        format!("{}.cpu.t1.b8", self.id)
    }

    fn entry(&self) -> CatalogEntry {
        let point = |batch: usize| LatencyPoint {
            batch,
            p50_ms: self.p50_ms,
            p99_ms: self.p50_ms,
            mean_ms: self.p50_ms,
            throughput_per_s: batch as f64 * 1e3 / self.p50_ms,
        };
        CatalogEntry {
            tenant_id: TENANT.into(),
            app: self.app.into(),
            model: self.model.into(),
            model_id: format!("model-{}", self.model),
            object_key: format!("{}.onnx", self.model),
            declared_output: None,
            signature: Some(serde_json::json!({
                "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            })),
            variant: Variant {
                id: self.id.into(),
                model_id: format!("model-{}", self.model),
                file_id: format!("file-{}", self.id),
                name: self.name(),
                file_kind: FileKind::Source,
                hardware: HardwareKind::Cpu,
                threads: 1,
                max_batch: 8,
                status: "profiled".into(),
                accuracy: Some(0.9),
                load_ms: Some(self.load_ms),
                memory_bytes: Some(1_000_000),
                latency: vec![point(1), point(8)],
            },
        }
    }

    /// What a worker is sent to load this variant.
    fn load_request(&self) -> LoadRequest {
        LoadRequest {
            variant_id: self.id.into(),
            variant_name: self.name(),
            object_key: format!("{}.onnx", self.model),
            hardware: HardwareKind::Cpu,
            threads: 1,
            max_batch: 8,
            memory_bytes: 1_000_000,
        }
    }
}

/// A scripted worker (see the module documentation).
#[derive(Default)]
pub(crate) struct FakeWorker {
    /// Fail every query (a worker error) while set.
    pub failing: AtomicBool,
    /// Variant ids it was asked to load, in order.
    pub loads: Mutex<Vec<String>>,
    /// Variant ids it was sent queries for, in order.
    pub queries: Mutex<Vec<String>>,
}

impl FakeWorker {
    pub fn loads(&self) -> Vec<String> {
        self.loads.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn queries(&self) -> Vec<String> {
        self.queries.lock().map(|q| q.clone()).unwrap_or_default()
    }
}

#[async_trait]
impl Worker for FakeWorker {
    async fn load(&self, req: &LoadRequest) -> Result<LoadedReport, CallError> {
        if let Ok(mut l) = self.loads.lock() {
            l.push(req.variant_id.clone());
        }
        Ok(LoadedReport {
            variant_id: req.variant_id.clone(),
            load_ms: 1.0,
        })
    }

    async fn resize(&self, variant_id: &str, _threads: usize) -> Result<LoadedReport, CallError> {
        Ok(LoadedReport {
            variant_id: variant_id.into(),
            load_ms: 1.0,
        })
    }

    async fn unload(&self, _variant_id: &str) -> Result<(), CallError> {
        Ok(())
    }

    async fn infer(&self, variant_id: &str, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CallError> {
        if let Ok(mut q) = self.queries.lock() {
            q.push(variant_id.to_string());
        }
        if self.failing.load(Ordering::Relaxed) {
            return Err(CallError::Worker("scripted failure".into()));
        }
        let x = inputs
            .first()
            .ok_or_else(|| CallError::BadInput("no input".into()))?;
        let TensorData::Fp32(values) = &x.data else {
            return Err(CallError::BadInput("x is not FP32".into()));
        };
        let double = variant_id.starts_with("double");
        let y = values
            .iter()
            .map(|v| if double { 2.0 * v } else { v + 1.0 })
            .collect();
        Ok(vec![Tensor {
            name: "y".into(),
            shape: x.shape.clone(),
            data: TensorData::Fp32(y),
        }])
    }

    fn is_embedded(&self) -> bool {
        false
    }
}

/// A cluster view with its database (SQLite in a directory removed on drop) and workers.
pub(crate) struct FakeCluster {
    pub cluster: Arc<Cluster>,
    pub db: Db,
    /// By the order of the `workers` given to [`FakeCluster::start`]; worker `i` is `w{i}`.
    pub workers: Vec<Arc<FakeWorker>>,
    _dir: tempfile::TempDir,
}

impl FakeCluster {
    /// `variants` served; per worker, the variants (indices into `variants`) it holds loaded.
    pub async fn start(variants: &[FakeVariant], workers: &[&[usize]]) -> FakeCluster {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let db = Db::connect(&format!("sqlite://{}", dir.path().join("t.db").display()))
            .await
            .expect("an SQLite database");
        let cluster = Cluster::new(db.clone(), &Config::default(), None);
        cluster.install_catalog(Catalog::build(
            variants.iter().map(FakeVariant::entry).collect(),
        ));
        let mut fakes = Vec::new();
        for (i, loaded) in workers.iter().enumerate() {
            let id = format!("w{i}");
            let fake = Arc::new(FakeWorker::default());
            cluster.upsert_worker(
                fake.clone(),
                Heartbeat {
                    worker: WorkerInfo {
                        id: id.clone(),
                        name: id.clone(),
                        address: None,
                        hardware: vec![HardwareKind::Cpu],
                        cores: 4,
                        thread_budget: 16,
                        memory_budget_bytes: 8 << 30,
                        simulated_gpu: None,
                    },
                    threads_used: 0,
                    memory_used_bytes: 0,
                    utilisation: 0.0,
                    own_utilisation: 0.0,
                    instances: Vec::new(),
                },
            );
            for &v in loaded.iter() {
                cluster.loaded(&id, &variants[v].load_request());
            }
            fakes.push(fake);
        }
        cluster.rebuild();
        FakeCluster {
            cluster,
            db,
            workers: fakes,
            _dir: dir,
        }
    }
}

/// `x` with one row per item of `rows`.
pub(crate) fn x(rows: &[[f32; 4]]) -> Tensor {
    Tensor {
        name: "x".into(),
        shape: vec![rows.len(), 4],
        data: TensorData::Fp32(rows.iter().flatten().copied().collect()),
    }
}

/// The FP32 values of `t`.
pub(crate) fn values(t: &Tensor) -> Vec<f32> {
    match &t.data {
        TensorData::Fp32(v) => v.clone(),
        other => panic!("{} is not FP32: {other:?}", t.name),
    }
}
