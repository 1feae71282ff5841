//! The controller's client for a worker running in another process ([`crate::server`]).

use std::time::Duration;

use async_trait::async_trait;
use infaas_core::Tensor;

use crate::call::{CallError, Worker};
use crate::wire::{LoadRequest, LoadedReport};

/// Longest a worker may take to fetch a model file and start its session.
const LOAD_TIMEOUT: Duration = Duration::from_secs(120);

fn unreachable(e: reqwest::Error) -> CallError {
    CallError::Worker(format!("worker unreachable: {e}"))
}

fn protocol(e: impl std::fmt::Display) -> CallError {
    CallError::Worker(format!("invalid answer from the worker: {e}"))
}

/// The controller's client for a worker running in another process.
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

    async fn check(resp: reqwest::Response) -> Result<reqwest::Response, CallError> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let body = resp.text().await.unwrap_or_default();
        let message = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or(body);
        Err(CallError::from_status(status.as_u16(), message))
    }

    /// POSTs `body` as JSON to `path` (load and resize read the model file: long timeout).
    async fn post_json(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        timeout: Option<Duration>,
    ) -> Result<reqwest::Response, CallError> {
        let mut req = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body);
        if let Some(t) = timeout {
            req = req.timeout(t);
        }
        let resp = req.send().await.map_err(unreachable)?;
        Self::check(resp).await
    }

    async fn loaded_report(resp: reqwest::Response) -> Result<LoadedReport, CallError> {
        resp.json().await.map_err(protocol)
    }
}

#[async_trait]
impl Worker for RemoteWorker {
    async fn load(&self, req: &LoadRequest) -> Result<LoadedReport, CallError> {
        let resp = self
            .post_json("/cluster/load", req, Some(LOAD_TIMEOUT))
            .await?;
        Self::loaded_report(resp).await
    }

    /// Swaps the instance of `variant_id` for one with `threads` intra-op threads.
    async fn resize(&self, variant_id: &str, threads: usize) -> Result<LoadedReport, CallError> {
        let body = serde_json::json!({ "variant_id": variant_id, "threads": threads });
        let resp = self
            .post_json("/cluster/resize", &body, Some(LOAD_TIMEOUT))
            .await?;
        Self::loaded_report(resp).await
    }

    async fn unload(&self, variant_id: &str) -> Result<(), CallError> {
        let body = serde_json::json!({ "variant_id": variant_id });
        self.post_json("/cluster/unload", &body, None).await?;
        Ok(())
    }

    /// Runs a request on the worker, moving tensors in the binary tensor encoding.
    async fn infer(&self, variant_id: &str, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, CallError> {
        let (body, header_len) = infaas_protocol::encode_tensors(&inputs).map_err(protocol)?;
        let resp = self
            .http
            .post(format!("{}/cluster/infer/{variant_id}", self.base))
            .bearer_auth(&self.token)
            .header("Inference-Header-Content-Length", header_len.to_string())
            .body(body)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(unreachable)?;
        let resp = Self::check(resp).await?;
        let header_len = resp
            .headers()
            .get("Inference-Header-Content-Length")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<usize>().ok())
            .ok_or_else(|| protocol("missing Inference-Header-Content-Length"))?;
        let bytes = resp.bytes().await.map_err(unreachable)?;
        infaas_protocol::decode_tensors(&bytes, header_len).map_err(protocol)
    }

    fn is_embedded(&self) -> bool {
        false
    }
}
