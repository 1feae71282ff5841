//! `infaas worker --controller URL`: a worker node in its own process, configured like the
//! controller (object store, cores, budgets), serving the worker protocol.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use infaas_control::config::Config;
use infaas_store::{open_object_store, ObjectStoreConfig};
use infaas_worker::server::{self, ServeOptions};
use infaas_worker::WorkerNode;

/// Runs the worker process until SIGTERM / Ctrl-C.
pub async fn run(config: Config, controller: String) -> anyhow::Result<()> {
    let token = config.cluster_token.clone().context(
        "a worker needs the cluster token: pass --cluster-token or INFAAS_CLUSTER_TOKEN (print it on the controller with `infaas admin cluster-token`)",
    )?;
    if let Err(e) = infaas_executors::runtime::init_runtime(config.ort_dylib_path.as_deref()) {
        anyhow::bail!("ONNX Runtime is not available: {e}");
    }
    let store_cfg = ObjectStoreConfig::parse(
        &config.object_store(),
        config.s3_endpoint.clone(),
        config.s3_region.clone(),
    )?;
    let objects = open_object_store(&store_cfg).await?;
    let listener = tokio::net::TcpListener::bind(config.worker_listen)
        .await
        .with_context(|| format!("binding {}", config.worker_listen))?;
    let addr = listener.local_addr()?;
    let id = uuid::Uuid::new_v4().to_string();
    let name = config
        .worker_name
        .clone()
        .unwrap_or_else(|| format!("worker-{}", &id[..8]));
    let advertise = config
        .worker_advertise_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let node = Arc::new(WorkerNode::new(
        infaas_control::cluster::node_config(&config, id, name, Some(advertise))
            .context("the simulated GPU's latency profile")?,
        objects,
    ));
    let options = ServeOptions {
        controller,
        token,
        max_body_bytes: config.max_body_bytes.max(64 << 20),
        shutdown_grace: Duration::from_secs(config.shutdown_grace_secs),
    };
    server::run(node, listener, options).await?;
    Ok(())
}
