//! For the HTTP tests: an in-process server on one backend pair, tenants made the way
//! `infaas admin create-tenant` makes them, tokens, and checks of the JSON error body.

pub use crate::backends;

use std::time::Duration;

use infaas_api::server::Server;
use infaas_control::config::Config;
use infaas_control::tenancy::generate_key;
use infaas_core::{Quotas, Role};
use infaas_store::Db;
use reqwest::{Method, Response, StatusCode};
use serde_json::Value;

use crate::backends::Backends;

/// A server configuration on `b`: port 0 (HTTP and gRPC), data under the test's directory,
/// the JWT secret generated (and kept in the database), 15-minute tokens.
pub fn config_for(b: &Backends) -> Config {
    Config {
        listen: "127.0.0.1:0".parse().expect("an address"),
        grpc_listen: Some("127.0.0.1:0".parse().expect("an address")),
        data_dir: b.dir.path().join("data"),
        database_url: Some(b.database_url.clone()),
        object_store: Some(b.object_store.clone()),
        s3_endpoint: b.s3_endpoint.clone(),
        jwt_secret: None,
        jwt_ttl_secs: 900,
        // A fixed configuration: the autoscaling tests turn the loops on.
        autoscale: infaas_control::config::AutoscaleConfig {
            enabled: false,
            ..Default::default()
        },
        ..Config::default()
    }
}

/// `http://` and the address of `server`'s gRPC service, for
/// `infaas_api::grpc::Client::connect`; panics when `grpc_listen` is off.
pub fn grpc_url(server: &Server) -> String {
    let addr = server
        .grpc_addr
        .expect("the server serves gRPC (grpc_listen is not off)");
    format!("http://{addr}")
}

/// A tenant with its first admin key.
#[derive(Debug, Clone)]
pub struct TestTenant {
    pub id: String,
    pub name: String,
    pub admin_key: String,
    pub admin_key_id: String,
}

/// An in-process server and an HTTP client for it.
pub struct TestServer {
    pub server: Server,
    pub http: reqwest::Client,
    pub base: String,
}

impl TestServer {
    pub async fn start(b: &Backends) -> TestServer {
        TestServer::start_with(b, |_| {}).await
    }

    /// Starts a server whose configuration `tweak` adjusts first.
    pub async fn start_with(b: &Backends, tweak: impl FnOnce(&mut Config)) -> TestServer {
        let mut config = config_for(b);
        tweak(&mut config);
        let server = Server::start(config)
            .await
            .unwrap_or_else(|e| panic!("{}: starting the server: {e:#}", b.name));
        let base = format!("http://{}", server.addr);
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(60))
            .build()
            .expect("an HTTP client");
        TestServer { server, http, base }
    }

    /// `http://` and the address of the gRPC service (the server must have it on).
    pub fn grpc_url(&self) -> String {
        grpc_url(&self.server)
    }

    pub async fn stop(self) {
        self.server
            .stop(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("stopping the server: {e:#}"));
    }

    pub fn db(&self) -> &Db {
        &self.server.state.db
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Creates a tenant and its admin key directly in the database, as `infaas admin
    /// create-tenant` does.
    pub async fn tenant(&self, name: &str) -> TestTenant {
        self.tenant_with(name, Quotas::default()).await
    }

    pub async fn tenant_with(&self, name: &str, quotas: Quotas) -> TestTenant {
        let t = self
            .db()
            .create_tenant(name, quotas)
            .await
            .unwrap_or_else(|e| panic!("creating tenant {name}: {e}"));
        let key = generate_key();
        let stored = self
            .db()
            .create_api_key(&t.id, "admin", Role::Admin, &key.prefix, &key.hash)
            .await
            .unwrap_or_else(|e| panic!("creating the admin key of {name}: {e}"));
        TestTenant {
            id: t.id,
            name: name.to_string(),
            admin_key: key.secret,
            admin_key_id: stored.id,
        }
    }

    /// POST /v1/auth/token with `api_key`.
    pub async fn exchange(&self, api_key: &str) -> Response {
        self.http
            .post(self.url("/v1/auth/token"))
            .json(&serde_json::json!({ "api_key": api_key }))
            .send()
            .await
            .expect("an answer from /v1/auth/token")
    }

    /// An access token for `api_key` (asserting the exchange succeeds).
    pub async fn token(&self, api_key: &str) -> String {
        let resp = self.exchange(api_key).await;
        let (status, body) = json(resp).await;
        assert_eq!(status, StatusCode::OK, "token exchange: {body}");
        body["access_token"]
            .as_str()
            .expect("an access_token")
            .to_string()
    }

    /// A request with `Authorization: Bearer <token>`.
    pub fn authed(&self, method: Method, path: &str, token: &str) -> reqwest::RequestBuilder {
        self.http.request(method, self.url(path)).bearer_auth(token)
    }

    /// GET `path` with a token; the status and JSON body.
    pub async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        json(self.send(self.authed(Method::GET, path, token)).await).await
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Response {
        req.send().await.expect("an HTTP answer")
    }
}

/// The status and the body parsed as JSON (`Null` when empty or not JSON).
pub async fn json(resp: Response) -> (StatusCode, Value) {
    let status = resp.status();
    let text = resp.text().await.expect("a body");
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Asserts an error answer: the status, a JSON body of exactly `{"error", "error_type"}`
/// with a non-empty message, and on 401 a `WWW-Authenticate` challenge. Returns the message.
pub async fn expect_error(resp: Response, status: StatusCode, error_type: &str) -> String {
    let www = resp
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .cloned();
    let content_type = resp
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let (got, body) = json(resp).await;
    assert_eq!(got, status, "unexpected status; body {body}");
    assert!(
        content_type.starts_with("application/json"),
        "error with content type {content_type:?}: {body}"
    );
    let fields = body.as_object().map(|o| o.len()).unwrap_or_default();
    assert_eq!(fields, 2, "error body is not {{error, error_type}}: {body}");
    assert_eq!(body["error_type"], error_type, "{body}");
    let message = body["error"].as_str().unwrap_or_default().to_string();
    assert!(!message.is_empty(), "empty error message: {body}");
    if status == StatusCode::UNAUTHORIZED {
        let www = www.expect("a 401 without a WWW-Authenticate header");
        assert!(
            www.to_str().unwrap_or_default().starts_with("Bearer"),
            "{www:?}"
        );
    }
    message
}
