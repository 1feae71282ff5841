//! A small authenticated HTTP client for the CLI.

use anyhow::Context;
use serde::de::DeserializeOwned;

pub struct Client {
    pub base: String,
    http: reqwest::Client,
    token: String,
}

/// Turns an error answer into a message with the server's explanation.
async fn check(resp: reqwest::Response) -> anyhow::Result<reqwest::Response> {
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let body = resp.text().await.unwrap_or_default();
    let msg = serde_json::from_str::<serde_json::Value>(&body)
        .ok()
        .and_then(|v| v["error"].as_str().map(str::to_string))
        .unwrap_or(body);
    anyhow::bail!("server answered {status}: {msg}")
}

impl Client {
    /// Exchanges the API key for an access token.
    pub async fn connect(server: &str, api_key: &str) -> anyhow::Result<Client> {
        let base = server.trim_end_matches('/').to_string();
        let http = reqwest::Client::builder()
            .build()
            .context("building the HTTP client")?;
        let resp = http
            .post(format!("{base}/v1/auth/token"))
            .json(&serde_json::json!({ "api_key": api_key }))
            .send()
            .await
            .with_context(|| format!("cannot reach the infaas server at {base}"))?;
        let v: serde_json::Value = check(resp).await?.json().await?;
        let token = v["access_token"]
            .as_str()
            .context("the server's token answer has no access_token")?
            .to_string();
        Ok(Client { base, http, token })
    }

    /// Another handle with the same connection pool and token.
    pub fn clone_handle(&self) -> Client {
        Client {
            base: self.base.clone(),
            http: self.http.clone(),
            token: self.token.clone(),
        }
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    /// Sends a request; an error answer becomes an error with the server's message.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> anyhow::Result<reqwest::Response> {
        let resp = req.send().await.context("request failed")?;
        check(resp).await
    }

    pub async fn send_json<T: DeserializeOwned>(
        &self,
        req: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        Ok(self.send(req).await?.json().await?)
    }

    pub async fn get_json<T: DeserializeOwned>(&self, path: &str) -> anyhow::Result<T> {
        self.send_json(self.request(reqwest::Method::GET, path))
            .await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<()> {
        let resp = self.request(reqwest::Method::DELETE, path).send().await?;
        check(resp).await?;
        Ok(())
    }
}
