//! The `kubernetes` provider: workers are the pods of one Deployment, scaled through the
//! Kubernetes API (kube-rs).
//!
//! - `add` reads the Deployment's scale subresource, refuses at the configured maximum, sets
//!   `replicas + 1` and waits for the new pod to appear; the pod's name is the worker's name
//!   (the manifest sets `INFAAS_WORKER_NAME` from the downward API `metadata.name`).
//! - `remove` first marks the chosen pod with a low `controller.kubernetes.io/pod-deletion-cost`
//!   and then sets `replicas - 1`: the ReplicaSet controller deletes the pods of lowest cost
//!   first, so the pod that goes is the one the autoscaler chose (already drained), not another.
//! - `list` is the selector's pods that are not terminating.
//!
//! - With a fence ([`KubernetesProvider::with_fence`]: the controller's leader token), every
//!   change of the replica count reads the Deployment, refuses when this controller is deposed
//!   (a negative token) or when the Deployment's [`LEADER_TOKEN_ANNOTATION`] holds a newer
//!   token than its own, and patches the Deployment with its token in that annotation and the
//!   `resourceVersion` it read, so the API server refuses the patch (409 Conflict) if anyone
//!   changed the Deployment in between; a conflict is read and tried again, up to
//!   [`CONFLICT_RETRIES`] times. A deposed leader's late change is therefore refused, and two
//!   leaders never both apply a read-modify-write of the count. Without a fence (one controller)
//!   the scale subresource is read and patched.
//!
//! Only the verbs the RBAC Role in `deploy/kubernetes/` grants are used: get and patch on
//! `deployments` and `deployments/scale`, list, get and patch on `pods`.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use infaas_core::HardwareKind;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::Client;
use serde::{Deserialize, Serialize};

use crate::{ProvisionError, ProvisionedWorker, WorkerProvider};

/// The annotation that orders which pods a ReplicaSet deletes first when it scales down.
pub const DELETION_COST_ANNOTATION: &str = "controller.kubernetes.io/pod-deletion-cost";
/// The cost given to the pod chosen for removal (pods default to 0; lowest goes first).
pub const REMOVAL_DELETION_COST: &str = "-1000";

/// The RBAC rules the provider needs, as `(API group, resource, verbs)`: what the Role in
/// `deploy/kubernetes/rbac.yaml` grants, and nothing more.
pub const REQUIRED_RBAC: &[(&str, &str, &[&str])] = &[
    ("apps", "deployments", &["get", "patch"]),
    ("apps", "deployments/scale", &["get", "patch"]),
    ("", "pods", &["get", "list", "patch"]),
];

/// The annotation of the worker Deployment that holds the leader token of the last change of
/// its replica count.
pub const LEADER_TOKEN_ANNOTATION: &str = "infaas.dev/leader-lease-token";
/// How many times a fenced change is read and tried again after a 409 Conflict.
pub const CONFLICT_RETRIES: usize = 3;

/// The fencing token of the controller's leader lease, read at every change: positive while it
/// leads, negative once deposed, 0 when it never took part in an election.
pub type Fence = std::sync::Arc<dyn Fn() -> i64 + Send + Sync>;

/// Which Deployment the provider scales and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KubernetesConfig {
    /// Namespace of the worker Deployment; `None`: the client's default namespace (the pod's
    /// own namespace in a cluster, the kubeconfig context's namespace outside).
    pub namespace: Option<String>,
    /// Name of the worker Deployment.
    pub deployment: String,
    /// Label selector of the Deployment's pods, e.g. `app.kubernetes.io/name=infaas-worker`.
    pub selector: String,
    /// Most replicas the provider scales the Deployment to.
    pub max_workers: u32,
    /// The hardware every pod of the Deployment has (one kind per Deployment).
    pub hardware: HardwareKind,
    /// How long `add` waits for the new pod to appear.
    pub pod_timeout: Duration,
    /// How often `add` lists the pods while it waits.
    pub poll_interval: Duration,
}

impl Default for KubernetesConfig {
    /// The names the manifests in `deploy/kubernetes/` use.
    fn default() -> Self {
        KubernetesConfig {
            namespace: None,
            deployment: "infaas-worker".into(),
            selector: "app.kubernetes.io/name=infaas-worker".into(),
            max_workers: 8,
            hardware: HardwareKind::Cpu,
            pod_timeout: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
        }
    }
}

/// Scales a worker Deployment; see the module documentation.
pub struct KubernetesProvider {
    deployments: Api<Deployment>,
    pods: Api<Pod>,
    namespace: String,
    config: KubernetesConfig,
    /// Scaling is read-modify-write on the replica count: one change at a time.
    scaling: tokio::sync::Mutex<()>,
    fence: Option<Fence>,
}

fn backend(context: impl Into<String>, source: kube::Error) -> ProvisionError {
    ProvisionError::Backend {
        context: context.into(),
        source: Box::new(source),
    }
}

/// `add` gave up waiting for the new pod.
#[derive(Debug, thiserror::Error)]
#[error("no new pod of selector '{selector}' appeared within {waited:?}")]
pub struct PodTimeout {
    pub selector: String,
    pub waited: Duration,
}

impl KubernetesProvider {
    /// A provider with a client configured from the environment: the kubeconfig
    /// (`KUBECONFIG` or `~/.kube/config`) when there is one, else the pod's service account.
    pub async fn new(config: KubernetesConfig) -> Result<Self, ProvisionError> {
        let kube_config = kube::Config::infer()
            .await
            .map_err(|e| ProvisionError::Backend {
                context:
                    "cannot configure a Kubernetes client (no kubeconfig and not in a cluster)"
                        .into(),
                source: Box::new(e),
            })?;
        let client = Self::client_for(kube_config)?;
        Ok(Self::with_client(client, config))
    }

    /// Builds a client from an explicit configuration (rustls with the aws-lc-rs provider).
    pub fn client_for(kube_config: kube::Config) -> Result<Client, ProvisionError> {
        // Several crypto providers are compiled into the workspace; rustls needs one chosen
        // for the process (a no-op when one already is).
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        Client::try_from(kube_config).map_err(|e| backend("cannot build a Kubernetes client", e))
    }

    /// A provider over an existing client (tests point one at a fake API server).
    pub fn with_client(client: Client, config: KubernetesConfig) -> Self {
        let namespace = config
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_string());
        KubernetesProvider {
            deployments: Api::namespaced(client.clone(), &namespace),
            pods: Api::namespaced(client, &namespace),
            namespace,
            config,
            scaling: tokio::sync::Mutex::new(()),
            fence: None,
        }
    }

    /// Fences every change of the replica count with the leader token `fence` returns (see the
    /// module documentation).
    pub fn with_fence(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    pub fn config(&self) -> &KubernetesConfig {
        &self.config
    }

    fn deployment_ref(&self) -> String {
        format!("deployment {}/{}", self.namespace, self.config.deployment)
    }

    fn check_hardware(&self, hardware: HardwareKind) -> Result<(), ProvisionError> {
        if hardware == self.config.hardware {
            Ok(())
        } else {
            Err(ProvisionError::Unsupported(hardware.as_str()))
        }
    }

    /// The selector's pods that are not terminating.
    async fn live_pods(&self) -> Result<Vec<Pod>, ProvisionError> {
        let list = self
            .pods
            .list(&ListParams::default().labels(&self.config.selector))
            .await
            .map_err(|e| {
                backend(
                    format!(
                        "listing the pods of '{}' in namespace {}",
                        self.config.selector, self.namespace
                    ),
                    e,
                )
            })?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none() && p.metadata.name.is_some())
            .collect())
    }

    async fn replicas(&self) -> Result<i32, ProvisionError> {
        let scale = self
            .deployments
            .get_scale(&self.config.deployment)
            .await
            .map_err(|e| backend(format!("reading the scale of {}", self.deployment_ref()), e))?;
        Ok(scale.spec.and_then(|s| s.replicas).unwrap_or(0))
    }

    /// Refuses at once when the fence says this controller was deposed.
    fn check_deposed(&self) -> Result<(), ProvisionError> {
        match &self.fence {
            Some(fence) if fence() < 0 => Err(ProvisionError::Fenced {
                ours: fence(),
                holder: None,
            }),
            _ => Ok(()),
        }
    }

    /// Changes the replica count to `change(current)`; returns the new count.
    async fn change_replicas(
        &self,
        change: impl Fn(i32) -> Result<i32, ProvisionError>,
    ) -> Result<i32, ProvisionError> {
        let Some(fence) = &self.fence else {
            let want = change(self.replicas().await?)?;
            self.patch_scale(want).await?;
            return Ok(want);
        };
        for _ in 0..=CONFLICT_RETRIES {
            let ours = fence();
            if ours < 0 {
                return Err(ProvisionError::Fenced { ours, holder: None });
            }
            let d = self
                .deployments
                .get(&self.config.deployment)
                .await
                .map_err(|e| backend(format!("reading {}", self.deployment_ref()), e))?;
            let holder = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(LEADER_TOKEN_ANNOTATION))
                .and_then(|t| t.parse::<i64>().ok());
            if let Some(h) = holder.filter(|h| *h > ours) {
                return Err(ProvisionError::Fenced {
                    ours,
                    holder: Some(h),
                });
            }
            // Kubernetes' default when the field is unset.
            let current = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let want = change(current)?;
            let mut metadata =
                serde_json::json!({ "resourceVersion": d.metadata.resource_version });
            if ours > 0 {
                metadata["annotations"] =
                    serde_json::json!({ LEADER_TOKEN_ANNOTATION: ours.to_string() });
            }
            let patch = serde_json::json!({ "metadata": metadata, "spec": { "replicas": want } });
            match self
                .deployments
                .patch(
                    &self.config.deployment,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => return Ok(want),
                Err(kube::Error::Api(status)) if status.is_conflict() => {
                    tracing::info!(deployment = %self.deployment_ref(), "the worker deployment changed meanwhile; reading it again");
                }
                Err(e) => {
                    return Err(backend(
                        format!("scaling {} to {want} replicas", self.deployment_ref()),
                        e,
                    ))
                }
            }
        }
        Err(ProvisionError::Exhausted(format!(
            "{} changed under every one of {} attempts to scale it",
            self.deployment_ref(),
            CONFLICT_RETRIES + 1
        )))
    }

    async fn patch_scale(&self, replicas: i32) -> Result<(), ProvisionError> {
        let patch = serde_json::json!({ "spec": { "replicas": replicas } });
        self.deployments
            .patch_scale(
                &self.config.deployment,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|e| {
                backend(
                    format!("scaling {} to {replicas} replicas", self.deployment_ref()),
                    e,
                )
            })?;
        Ok(())
    }

    fn worker(&self, pod: &Pod) -> Option<ProvisionedWorker> {
        Some(ProvisionedWorker {
            name: pod.metadata.name.clone()?,
            hardware: self.config.hardware,
            started_at_ms: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map_or_else(now_ms, |t| t.0.as_millisecond()),
        })
    }

    /// Waits for a live pod whose name is not in `before`; the newest when several appear.
    async fn wait_for_new_pod(&self, before: &HashSet<String>) -> Result<Pod, ProvisionError> {
        let started = Instant::now();
        loop {
            let mut new: Vec<Pod> = self
                .live_pods()
                .await?
                .into_iter()
                .filter(|p| {
                    p.metadata
                        .name
                        .as_ref()
                        .is_some_and(|n| !before.contains(n))
                })
                .collect();
            new.sort_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
            if let Some(pod) = new.pop() {
                return Ok(pod);
            }
            if started.elapsed() >= self.config.pod_timeout {
                return Err(ProvisionError::Backend {
                    context: format!(
                        "{} was scaled up but its new pod did not appear",
                        self.deployment_ref()
                    ),
                    source: Box::new(PodTimeout {
                        selector: self.config.selector.clone(),
                        waited: started.elapsed(),
                    }),
                });
            }
            tokio::time::sleep(self.config.poll_interval).await;
        }
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

#[async_trait]
impl WorkerProvider for KubernetesProvider {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    async fn add(&self, hardware: HardwareKind) -> Result<ProvisionedWorker, ProvisionError> {
        self.check_hardware(hardware)?;
        self.check_deposed()?;
        let _scaling = self.scaling.lock().await;
        let before: HashSet<String> = self
            .live_pods()
            .await?
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let max = i32::try_from(self.config.max_workers).unwrap_or(i32::MAX);
        let deployment = self.deployment_ref();
        let replicas = self
            .change_replicas(|replicas| {
                if replicas >= max {
                    return Err(ProvisionError::Exhausted(format!(
                        "{deployment} has {replicas} replicas, the configured maximum is {max}"
                    )));
                }
                Ok(replicas + 1)
            })
            .await?;
        tracing::info!(deployment = %self.deployment_ref(), replicas, "scaled the worker deployment up");
        let pod = self.wait_for_new_pod(&before).await?;
        self.worker(&pod)
            .ok_or_else(|| ProvisionError::Unknown("a new pod without a name".to_string()))
    }

    async fn remove(&self, worker: &ProvisionedWorker) -> Result<(), ProvisionError> {
        self.check_deposed()?;
        let _scaling = self.scaling.lock().await;
        let live = self.live_pods().await?;
        if !live
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(worker.name.as_str()))
        {
            return Err(ProvisionError::Unknown(worker.name.clone()));
        }
        // The cost first: once replicas drop, the ReplicaSet picks its victim at once.
        let patch = serde_json::json!({
            "metadata": { "annotations": { DELETION_COST_ANNOTATION: REMOVAL_DELETION_COST } }
        });
        self.pods
            .patch(&worker.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| {
                backend(
                    format!("marking pod {}/{} for removal", self.namespace, worker.name),
                    e,
                )
            })?;
        let replicas = self
            .change_replicas(|replicas| Ok((replicas - 1).max(0)))
            .await?;
        tracing::info!(deployment = %self.deployment_ref(), pod = %worker.name, replicas, "scaled the worker deployment down");
        Ok(())
    }

    async fn list(&self) -> Result<Vec<ProvisionedWorker>, ProvisionError> {
        Ok(self
            .live_pods()
            .await?
            .iter()
            .filter_map(|p| self.worker(p))
            .collect())
    }
}
