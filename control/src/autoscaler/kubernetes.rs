//! The `kubernetes` worker provider as the autoscaler uses it: the Kubernetes client is
//! configured (in-cluster or from a kubeconfig) on first use, so the controller starts even
//! when the API server is not reachable yet, and a failure is reported on every attempt.

use async_trait::async_trait;
use infaas_core::HardwareKind;
use infaas_provision::kubernetes::{Fence, KubernetesConfig, KubernetesProvider};
use infaas_provision::{ProvisionError, ProvisionedWorker, WorkerProvider};
use tokio::sync::OnceCell;

pub struct LazyKubernetes {
    config: KubernetesConfig,
    fence: Fence,
    provider: OnceCell<KubernetesProvider>,
}

impl LazyKubernetes {
    /// A provider whose changes of the Deployment carry the leader token `fence` returns.
    pub fn new(config: KubernetesConfig, fence: Fence) -> LazyKubernetes {
        LazyKubernetes {
            config,
            fence,
            provider: OnceCell::new(),
        }
    }

    async fn get(&self) -> Result<&KubernetesProvider, ProvisionError> {
        self.provider
            .get_or_try_init(|| async {
                Ok(KubernetesProvider::new(self.config.clone())
                    .await?
                    .with_fence(self.fence.clone()))
            })
            .await
    }
}

#[async_trait]
impl WorkerProvider for LazyKubernetes {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }

    async fn add(&self, hardware: HardwareKind) -> Result<ProvisionedWorker, ProvisionError> {
        self.get().await?.add(hardware).await
    }

    async fn remove(&self, worker: &ProvisionedWorker) -> Result<(), ProvisionError> {
        self.get().await?.remove(worker).await
    }

    async fn list(&self) -> Result<Vec<ProvisionedWorker>, ProvisionError> {
        self.get().await?.list().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unreachable_cluster_is_reported_on_use_with_its_cause() {
        // No kubeconfig and not in a pod: configuring the client fails when first used.
        if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
            return; // inside a cluster the in-cluster configuration applies
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        // SAFETY: nextest runs this test alone in its process; nothing reads the environment
        // concurrently.
        unsafe { std::env::set_var("KUBECONFIG", dir.path().join("missing")) };
        let p = LazyKubernetes::new(KubernetesConfig::default(), std::sync::Arc::new(|| 0));
        assert_eq!(p.kind(), "kubernetes");
        let err = p.list().await.expect_err("no cluster to reach");
        assert!(
            matches!(err, ProvisionError::Backend { .. }),
            "unexpected error: {err}"
        );
        assert!(err.to_string().contains("Kubernetes"), "{err}");
    }
}
