//! The controller's client for a worker running in another process.

use std::time::Duration;

use infaas_core::Tensor;
use infaas_worker::{LoadRequest, LoadedReport};

/// Longest a worker may take to fetch a model file and start its session.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

/// Why a call to a remote worker failed.
#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    /// The worker could not be reached or broke the connection: try another instance.
    #[error("worker unreachable: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// The worker answered with an error status.
    #[error("worker answered {status}: {message}")]
    Status {
        status: reqwest::StatusCode,
        message: String,
    },
    #[error("invalid answer from the worker: {0}")]
    Protocol(String),
}

#[derive(Clone)]
pub struct RemoteWorker {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl RemoteWorker {
    pub fn new(base: &str, token: &str) -> RemoteWorker {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            .pool_idle_timeout(Duration::from_secs(30))
            .build()
            .unwrap_or_default();
        RemoteWorker {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            http,
        }
    }

    async fn check(resp: reqwest::Response) -> Result<reqwest::Response, RemoteError> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(body);
        Err(RemoteError::Status { status, message })
    }

    /// POSTs `body` as JSON to `path` (load and resize read the model file: long timeout).
    async fn post_json(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, RemoteError> {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(RemoteError::Unreachable)?;
        Self::check(resp).await
    }

    async fn loaded_report(resp: reqwest::Response) -> Result<LoadedReport, RemoteError> {
        resp.json()
            .await
            .map_err(|e| RemoteError::Protocol(e.to_string()))
    }

    pub async fn load(&self, req: &LoadRequest) -> Result<LoadedReport, RemoteError> {
        let resp = self
            .post_json("/cluster/load", req, Some(LOAD_TIMEOUT))
            .await?;
        Self::loaded_report(resp).await
    }

    /// Swaps the instance of `variant_id` for one with `threads` intra-op threads.
    pub async fn resize(
        &self,
        variant_id: &str,
        threads: usize,
    ) -> Result<LoadedReport, RemoteError> {
        let body = serde_json::json!({ "variant_id": variant_id, "threads": threads });
        let resp = self
            .post_json("/cluster/resize", &body, Some(LOAD_TIMEOUT))
            .await?;
        Self::loaded_report(resp).await
    }

    pub async fn unload(&self, variant_id: &str) -> Result<(), RemoteError> {
        let body = serde_json::json!({ "variant_id": variant_id });
        self.post_json("/cluster/unload", &body, None).await?;
        Ok(())
    }

    /// Runs a request on the worker, moving tensors in the binary tensor encoding.
    pub async fn infer(
        &self,
        variant_id: &str,
        inputs: Vec<Tensor>,
    ) -> Result<Vec<Tensor>, RemoteError> {
        let (body, header_len) = infaas_protocol::encode_tensors(&inputs)
            .map_err(|e| RemoteError::Protocol(e.to_string()))?;
        let resp = self
            .http
            .post(format!("{}/cluster/infer/{variant_id}", self.base))
            .bearer_auth(&self.token)
            .header("Inference-Header-Content-Length", header_len.to_string())
            .body(body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(RemoteError::Unreachable)?;
        let resp = Self::check(resp).await?;
        let header_len = resp
            .headers()
            .get("Inference-Header-Content-Length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or_else(|| {
                RemoteError::Protocol("missing Inference-Header-Content-Length".into())
            })?;
        let bytes = resp.bytes().await.map_err(RemoteError::Unreachable)?;
        infaas_protocol::decode_tensors(&bytes, header_len)
            .map_err(|e| RemoteError::Protocol(e.to_string()))
    }
}
