//! The control plane as one value: configuration, stores, tenancy, the cluster view, the
//! registry's queue, usage, recorded traffic and what-if runs. Its loops are started by
//! [`crate::loops`].

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use infaas_store::{open_object_store, Db, ObjectStore, ObjectStoreConfig};

use crate::cluster::Cluster;
use crate::config::Config;
use crate::error::Error;
use crate::registry::Registry;
use crate::tenancy::{KeyCache, RateLimiter, TokenIssuer};
use crate::traffic::TrafficRecorder;
use crate::usage::UsageRecorder;
use crate::whatif::runs::WhatIfRuns;

const JWT_SECRET_SETTING: &str = "jwt_hs256_secret";
const CLUSTER_TOKEN_SETTING: &str = "cluster_token";

/// Cheap to clone: everything lives behind one `Arc`.
#[derive(Clone)]
pub struct ControlPlane {
    inner: Arc<Parts>,
}

/// What the control plane is made of.
pub struct Parts {
    pub config: Config,
    pub db: Db,
    pub objects: Arc<dyn ObjectStore>,
    pub tokens: TokenIssuer,
    pub key_cache: KeyCache,
    pub limiter: RateLimiter,
    pub registry: Registry,
    pub cluster: Arc<Cluster>,
    pub usage: Arc<UsageRecorder>,
    /// Arrivals of online queries per tenant, application and second (recorded traffic).
    pub traffic: Arc<TrafficRecorder>,
    /// What-if runs under way on this controller.
    pub whatif: Arc<WhatIfRuns>,
    /// Forecasts of the arrival rates of applications (and pipelines), fed once a second.
    pub forecasts: Arc<crate::forecasts::Forecasts>,
    /// What the pipelines did recently (arrivals, switch branches), this controller.
    pub pipelines: Arc<crate::pipelines::activity::PipelineActivity>,
    /// This replica's side of the leader election among the replicas on one database.
    pub leadership: Arc<crate::leader::Leadership>,
    /// Shared secret of worker <-> controller traffic.
    pub cluster_token: String,
    /// The ONNX Runtime library in use, or why it could not be loaded.
    pub runtime: Result<std::path::PathBuf, String>,
}

impl std::ops::Deref for ControlPlane {
    type Target = Parts;
    fn deref(&self) -> &Parts {
        &self.inner
    }
}

/// The cluster token in force: configured, or generated once and kept in the database.
pub async fn cluster_token(config: &Config, db: &Db) -> anyhow::Result<String> {
    Ok(match &config.cluster_token {
        Some(t) => t.clone(),
        None => {
            let fresh = hex::encode(rand::random::<[u8; 24]>());
            db.setting_or_insert(CLUSTER_TOKEN_SETTING, &fresh).await?
        }
    })
}

impl ControlPlane {
    pub fn new(parts: Parts) -> ControlPlane {
        ControlPlane {
            inner: Arc::new(parts),
        }
    }

    /// Connects to the database and object store, loads ONNX Runtime and the serving
    /// catalog, and starts the embedded worker.
    pub async fn open(config: Config) -> anyhow::Result<ControlPlane> {
        let db_url = config.database_url();
        let db = Db::connect(&db_url)
            .await
            .with_context(|| format!("connecting to {}", infaas_store::db::redact(&db_url)))?;
        let store_cfg = ObjectStoreConfig::parse(
            &config.object_store(),
            config.s3_endpoint.clone(),
            config.s3_region.clone(),
        )?;
        let objects = open_object_store(&store_cfg)
            .await
            .with_context(|| format!("opening object store {}", config.object_store()))?;
        let secret = match &config.jwt_secret {
            Some(s) => s.clone(),
            None => {
                // Generated on first run and kept in the database, so every controller that
                // shares the database accepts the others' tokens and restarts keep sessions.
                let fresh = hex::encode(rand::random::<[u8; 32]>());
                db.setting_or_insert(JWT_SECRET_SETTING, &fresh).await?
            }
        };
        let tokens = TokenIssuer::new(secret.as_bytes(), Duration::from_secs(config.jwt_ttl_secs));
        let runtime = infaas_executors::runtime::init_runtime(config.ort_dylib_path.as_deref())
            .map_err(|e| e.to_string());
        match &runtime {
            Ok(path) => tracing::info!(library = %path.display(), "ONNX Runtime loaded"),
            Err(e) => {
                tracing::error!(error = %e, "ONNX Runtime is not available: models cannot be registered or served")
            }
        }
        let cluster_token = cluster_token(&config, &db).await?;
        crate::whatif::runs::fail_interrupted(&db).await;
        let embedded_id = uuid::Uuid::new_v4().simple().to_string();
        let node = Arc::new(infaas_worker::WorkerNode::new(
            crate::cluster::node_config(
                &config,
                format!("embedded-{embedded_id}"),
                // Unique among the replicas' embedded workers, which every replica lists.
                format!("embedded-{}", &embedded_id[..8]),
                None,
            )
            .context("the simulated GPU's latency profile")?,
            objects.clone(),
        ));
        let cluster = Cluster::new(db.clone(), &config, Some(node));
        if let Err(e) = cluster.refresh_catalog().await {
            tracing::error!(error = %e, "cannot load the serving catalog");
        }
        Ok(ControlPlane::new(Parts {
            cluster,
            usage: Arc::new(UsageRecorder::default()),
            traffic: Arc::new(TrafficRecorder::new(config.traffic_horizon_minutes)),
            whatif: WhatIfRuns::new(config.whatif.max_parallel_runs),
            forecasts: Default::default(),
            pipelines: Default::default(),
            leadership: crate::leader::Leadership::new(crate::leader::LeaseSettings::default()),
            cluster_token,
            db,
            objects,
            tokens,
            key_cache: KeyCache::default(),
            limiter: RateLimiter::default(),
            registry: Registry::default(),
            runtime,
            config,
        }))
    }

    /// Fails with [`Error::Unavailable`] when ONNX Runtime could not be loaded at start.
    pub fn runtime_ready(&self) -> Result<(), Error> {
        runtime_ready(&self.runtime)
    }
}

/// Fails with [`Error::Unavailable`] when ONNX Runtime could not be loaded at start
/// (`runtime` is [`Parts::runtime`]).
pub fn runtime_ready(runtime: &Result<std::path::PathBuf, String>) -> Result<(), Error> {
    match runtime {
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Unavailable(format!(
            "ONNX Runtime is not available on this server: {e}"
        ))),
    }
}
