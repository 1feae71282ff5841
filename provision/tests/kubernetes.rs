//! The `kubernetes` provider against a fake Kubernetes API server: an HTTP server on port 0
//! that serves the endpoints the provider calls (the Deployment's scale subresource, the pod
//! list, pod patches), keeps the state a ReplicaSet would (pods created when replicas grow;
//! when they shrink, the pod of lowest `pod-deletion-cost` deleted, the newest among equals)
//! and records every request.
#![cfg(feature = "kubernetes")]
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::error::Error as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use infaas_core::HardwareKind;
use infaas_provision::kubernetes::{
    KubernetesConfig, KubernetesProvider, DELETION_COST_ANNOTATION, LEADER_TOKEN_ANNOTATION,
    REMOVAL_DELETION_COST,
};
use infaas_provision::{ProvisionError, WorkerProvider};
use serde_json::{json, Value};

const NS: &str = "inference";
const DEPLOYMENT: &str = "infaas-worker";
const LABEL: (&str, &str) = ("app.kubernetes.io/name", "infaas-worker");

#[derive(Debug, Clone)]
struct FakePod {
    name: String,
    annotations: BTreeMap<String, String>,
    /// Creation order (the fake's clock, seconds).
    created: u64,
}

impl FakePod {
    fn deletion_cost(&self) -> i64 {
        self.annotations
            .get(DELETION_COST_ANNOTATION)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    }

    fn json(&self) -> Value {
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": NS,
                "labels": { LABEL.0: LABEL.1 },
                "annotations": self.annotations,
                "creationTimestamp": format!("2026-01-01T00:{:02}:{:02}Z", self.created / 60, self.created % 60),
            },
            "spec": { "containers": [{ "name": "worker", "image": "infaas:latest" }] },
        })
    }
}

#[derive(Debug, Clone)]
struct Recorded {
    method: Method,
    path: String,
    body: Value,
}

#[derive(Default)]
struct FakeState {
    replicas: i32,
    pods: Vec<FakePod>,
    clock: u64,
    resource_version: u64,
    requests: Vec<Recorded>,
    /// Answer every request with this status (a Kubernetes `Status` body).
    refuse_with: Option<StatusCode>,
    /// Create no pods when replicas grow (a cluster without room).
    no_room: bool,
    /// The Deployment's annotations.
    annotations: BTreeMap<String, String>,
    /// Someone else changes the Deployment just before the next this many patches of it.
    interleave: usize,
}

impl FakeState {
    fn reconcile(&mut self) {
        if self.no_room {
            return;
        }
        while (self.pods.len() as i32) < self.replicas {
            self.clock += 1;
            self.pods.push(FakePod {
                name: format!("{DEPLOYMENT}-7d9c-{:05}", self.clock),
                annotations: BTreeMap::new(),
                created: self.clock,
            });
        }
        while (self.pods.len() as i32) > self.replicas.max(0) {
            // The ReplicaSet's order: lowest deletion cost first, then the newest.
            let victim = self
                .pods
                .iter()
                .enumerate()
                .min_by_key(|(_, p)| (p.deletion_cost(), std::cmp::Reverse(p.created)))
                .map(|(i, _)| i)
                .unwrap();
            self.pods.remove(victim);
        }
    }

    fn scale(&self) -> Value {
        json!({
            "apiVersion": "autoscaling/v1",
            "kind": "Scale",
            "metadata": { "name": DEPLOYMENT, "namespace": NS, "resourceVersion": self.resource_version.to_string() },
            "spec": { "replicas": self.replicas },
            "status": { "replicas": self.pods.len(), "selector": format!("{}={}", LABEL.0, LABEL.1) },
        })
    }
}

impl FakeState {
    fn deployment(&self) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": DEPLOYMENT, "namespace": NS,
                "resourceVersion": self.resource_version.to_string(),
                "annotations": self.annotations,
            },
            "spec": {
                "replicas": self.replicas,
                "selector": { "matchLabels": { LABEL.0: LABEL.1 } },
                "template": {
                    "metadata": { "labels": { LABEL.0: LABEL.1 } },
                    "spec": { "containers": [{ "name": "worker", "image": "infaas:latest" }] },
                },
            },
        })
    }
}

type Shared = Arc<Mutex<FakeState>>;

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    (
        code,
        axum::Json(json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code.as_u16(),
        })),
    )
        .into_response()
}

/// Records the request; answers the configured refusal if there is one.
fn record(s: &Shared, method: Method, uri: &Uri, body: &Bytes) -> Option<Response> {
    let mut st = s.lock().unwrap();
    st.requests.push(Recorded {
        method,
        path: uri.path().to_string(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    });
    st.refuse_with.map(|code| {
        status(
            code,
            "Forbidden",
            format!(
                "deployments.apps \"{DEPLOYMENT}\" is forbidden: User \"system:serviceaccount:{NS}:infaas-controller\" cannot get resource \"deployments/scale\" in API group \"apps\" in the namespace \"{NS}\""
            ),
        )
    })
}

async fn scale(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = record(&s, method.clone(), &uri, &body) {
        return refused;
    }
    if ns != NS || name != DEPLOYMENT {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("deployments.apps \"{name}\" not found in {ns}"),
        );
    }
    let mut st = s.lock().unwrap();
    if method == Method::PATCH {
        let content_type = headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        assert_eq!(content_type, "application/merge-patch+json");
        let patch: Value = serde_json::from_slice(&body).unwrap();
        let Some(replicas) = patch["spec"]["replicas"].as_i64() else {
            return status(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "spec.replicas missing".into(),
            );
        };
        st.replicas = replicas as i32;
        st.resource_version += 1;
        st.reconcile();
    }
    axum::Json(st.scale()).into_response()
}

/// The Deployment: GET, and a merge PATCH that honours a `metadata.resourceVersion`
/// precondition (409 Conflict when it is not the current one), as the API server does.
async fn deployment(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    if let Some(refused) = record(&s, method.clone(), &uri, &body) {
        return refused;
    }
    if ns != NS || name != DEPLOYMENT {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("deployments.apps \"{name}\" not found in {ns}"),
        );
    }
    let mut st = s.lock().unwrap();
    if method == Method::PATCH {
        if st.interleave > 0 {
            // Another writer got there first: one more replica.
            st.interleave -= 1;
            st.replicas += 1;
            st.resource_version += 1;
            st.reconcile();
        }
        let patch: Value = serde_json::from_slice(&body).unwrap();
        if let Some(rv) = patch["metadata"]["resourceVersion"].as_str() {
            if rv != st.resource_version.to_string() {
                return status(
                    StatusCode::CONFLICT,
                    "Conflict",
                    "Operation cannot be fulfilled on deployments.apps: the object has been modified".into(),
                );
            }
        }
        if let Some(a) = patch["metadata"]["annotations"].as_object() {
            for (k, v) in a {
                st.annotations
                    .insert(k.clone(), v.as_str().unwrap_or_default().to_string());
            }
        }
        if let Some(replicas) = patch["spec"]["replicas"].as_i64() {
            st.replicas = replicas as i32;
        }
        st.resource_version += 1;
        st.reconcile();
    }
    axum::Json(st.deployment()).into_response()
}

async fn pods(
    State(s): State<Shared>,
    Path(ns): Path<String>,
    Query(q): Query<BTreeMap<String, String>>,
    uri: Uri,
) -> Response {
    if let Some(refused) = record(&s, Method::GET, &uri, &Bytes::new()) {
        return refused;
    }
    let st = s.lock().unwrap();
    let wanted = format!("{}={}", LABEL.0, LABEL.1);
    let items: Vec<Value> = if ns == NS && q.get("labelSelector") == Some(&wanted) {
        st.pods.iter().map(FakePod::json).collect()
    } else {
        Vec::new()
    };
    axum::Json(json!({
        "apiVersion": "v1", "kind": "PodList",
        "metadata": { "resourceVersion": st.resource_version.to_string() },
        "items": items,
    }))
    .into_response()
}

async fn pod(
    State(s): State<Shared>,
    Path((ns, name)): Path<(String, String)>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    if let Some(refused) = record(&s, method.clone(), &uri, &body) {
        return refused;
    }
    let mut st = s.lock().unwrap();
    let Some(p) = st.pods.iter_mut().find(|p| ns == NS && p.name == name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    if method == Method::PATCH {
        let patch: Value = serde_json::from_slice(&body).unwrap();
        if let Some(a) = patch["metadata"]["annotations"].as_object() {
            for (k, v) in a {
                p.annotations
                    .insert(k.clone(), v.as_str().unwrap_or_default().to_string());
            }
        }
    }
    axum::Json(p.json()).into_response()
}

struct Fake {
    state: Shared,
    url: String,
}

impl Fake {
    async fn start() -> Fake {
        let state: Shared = Arc::default();
        let app = Router::new()
            .route(
                "/apis/apps/v1/namespaces/{ns}/deployments/{name}",
                get(deployment).patch(deployment),
            )
            .route(
                "/apis/apps/v1/namespaces/{ns}/deployments/{name}/scale",
                get(scale).patch(scale),
            )
            .route("/api/v1/namespaces/{ns}/pods", get(pods))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(pod).patch(pod))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Fake { state, url }
    }

    fn provider(&self, max_workers: u32) -> KubernetesProvider {
        let config = kube::Config::new(self.url.parse().unwrap());
        let client = KubernetesProvider::client_for(config).unwrap();
        KubernetesProvider::with_client(
            client,
            KubernetesConfig {
                namespace: Some(NS.into()),
                max_workers,
                pod_timeout: Duration::from_millis(500),
                poll_interval: Duration::from_millis(20),
                ..KubernetesConfig::default()
            },
        )
    }

    /// A provider fenced with the token `token` holds.
    fn fenced(&self, token: Arc<std::sync::atomic::AtomicI64>) -> KubernetesProvider {
        self.provider(8).with_fence(Arc::new(move || {
            token.load(std::sync::atomic::Ordering::SeqCst)
        }))
    }

    fn annotation(&self) -> Option<String> {
        let st = self.state.lock().unwrap();
        st.annotations.get(LEADER_TOKEN_ANNOTATION).cloned()
    }

    fn pod_names(&self) -> Vec<String> {
        let st = self.state.lock().unwrap();
        st.pods.iter().map(|p| p.name.clone()).collect()
    }

    fn replicas(&self) -> i32 {
        self.state.lock().unwrap().replicas
    }

    fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }
}

#[tokio::test]
async fn add_scales_up_and_returns_the_new_pod() {
    let fake = Fake::start().await;
    let provider = fake.provider(4);
    assert_eq!(provider.kind(), "kubernetes");
    assert!(provider.list().await.unwrap().is_empty());

    let first = provider.add(HardwareKind::Cpu).await.unwrap();
    assert_eq!(fake.replicas(), 1);
    assert_eq!(fake.pod_names(), vec![first.name.clone()]);
    assert_eq!(first.hardware, HardwareKind::Cpu);
    // 2026-01-01T00:00:01Z, the fake's creation time of its first pod.
    assert_eq!(first.started_at_ms, 1_767_225_601_000);

    let second = provider.add(HardwareKind::Cpu).await.unwrap();
    assert_eq!(fake.replicas(), 2);
    assert_ne!(first.name, second.name);
    let mut listed: Vec<String> = provider
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.name)
        .collect();
    listed.sort();
    let mut expected = vec![first.name, second.name];
    expected.sort();
    assert_eq!(listed, expected);

    let patches: Vec<Value> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == Method::PATCH && r.path.ends_with("/scale"))
        .map(|r| r.body)
        .collect();
    assert_eq!(
        patches,
        vec![
            json!({"spec": {"replicas": 1}}),
            json!({"spec": {"replicas": 2}})
        ]
    );
}

#[tokio::test]
async fn remove_marks_the_chosen_pod_before_scaling_down_and_that_pod_goes() {
    let fake = Fake::start().await;
    let provider = fake.provider(4);
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(provider.add(HardwareKind::Cpu).await.unwrap());
    }
    // The oldest pod: without the deletion cost the ReplicaSet would delete the newest.
    let chosen = workers[0].clone();
    let before = fake.requests().len();

    provider.remove(&chosen).await.unwrap();

    assert_eq!(fake.replicas(), 2);
    let left = fake.pod_names();
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&chosen.name), "{left:?}");
    assert!(left.contains(&workers[1].name) && left.contains(&workers[2].name));

    let patches: Vec<Recorded> = fake.requests()[before..]
        .iter()
        .filter(|r| r.method == Method::PATCH)
        .cloned()
        .collect();
    assert_eq!(patches.len(), 2, "{patches:?}");
    assert_eq!(
        patches[0].path,
        format!("/api/v1/namespaces/{NS}/pods/{}", chosen.name)
    );
    assert_eq!(
        patches[0].body,
        json!({"metadata": {"annotations": {DELETION_COST_ANNOTATION: REMOVAL_DELETION_COST}}})
    );
    assert_eq!(
        patches[1].path,
        format!("/apis/apps/v1/namespaces/{NS}/deployments/{DEPLOYMENT}/scale")
    );
    assert_eq!(patches[1].body, json!({"spec": {"replicas": 2}}));

    // The removed worker is no longer the provider's.
    let listed: Vec<String> = provider
        .list()
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.name)
        .collect();
    assert!(!listed.contains(&chosen.name));
    match provider.remove(&chosen).await {
        Err(ProvisionError::Unknown(name)) => assert_eq!(name, chosen.name),
        other => panic!("expected Unknown, got {other:?}"),
    }
    assert_eq!(fake.replicas(), 2);
}

#[tokio::test]
async fn add_at_the_maximum_is_exhausted_without_scaling() {
    let fake = Fake::start().await;
    let provider = fake.provider(2);
    provider.add(HardwareKind::Cpu).await.unwrap();
    provider.add(HardwareKind::Cpu).await.unwrap();
    let scale_patches = |f: &Fake| {
        f.requests()
            .iter()
            .filter(|r| r.method == Method::PATCH && r.path.ends_with("/scale"))
            .count()
    };
    assert_eq!(scale_patches(&fake), 2);
    match provider.add(HardwareKind::Cpu).await {
        Err(ProvisionError::Exhausted(why)) => {
            assert!(why.contains("maximum is 2"), "{why}");
            assert!(why.contains(&format!("{NS}/{DEPLOYMENT}")), "{why}");
        }
        other => panic!("expected Exhausted, got {other:?}"),
    }
    assert_eq!(fake.replicas(), 2);
    assert_eq!(scale_patches(&fake), 2);
}

#[tokio::test]
async fn other_hardware_is_unsupported_and_calls_nothing() {
    let fake = Fake::start().await;
    let provider = fake.provider(2);
    match provider.add(HardwareKind::Gpu).await {
        Err(ProvisionError::Unsupported(hw)) => assert_eq!(hw, "gpu"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
    assert!(fake.requests().is_empty());
    assert_eq!(fake.replicas(), 0);
}

#[tokio::test]
async fn api_refusals_surface_as_backend_errors_with_their_cause() {
    let fake = Fake::start().await;
    fake.state.lock().unwrap().refuse_with = Some(StatusCode::FORBIDDEN);
    let provider = fake.provider(2);
    let err = provider.add(HardwareKind::Cpu).await.unwrap_err();
    let ProvisionError::Backend { context, .. } = &err else {
        panic!("expected Backend, got {err:?}");
    };
    assert!(context.contains(NS), "{context}");
    let cause = err.source().unwrap().to_string();
    assert!(cause.contains("is forbidden"), "{cause}");
    assert!(cause.contains("403"), "{cause}");

    assert!(matches!(
        provider.list().await,
        Err(ProvisionError::Backend { .. })
    ));
    assert_eq!(fake.replicas(), 0);
}

#[tokio::test]
async fn a_pod_that_never_appears_is_a_backend_error() {
    let fake = Fake::start().await;
    fake.state.lock().unwrap().no_room = true;
    let provider = fake.provider(2);
    let err = provider.add(HardwareKind::Cpu).await.unwrap_err();
    let ProvisionError::Backend { context, source } = &err else {
        panic!("expected Backend, got {err:?}");
    };
    assert!(context.contains("did not appear"), "{context}");
    assert!(source.to_string().contains("no new pod"), "{source}");
    // The Deployment was asked for the pod; Kubernetes creates it once it has room.
    assert_eq!(fake.replicas(), 1);
}

/// A fenced provider changes the Deployment itself, with its token in the annotation and the
/// resourceVersion it read; a leader with an older token is refused without a change, and a
/// deposed one without a request.
#[tokio::test]
async fn a_fenced_provider_carries_its_token_and_a_stale_leader_is_refused() {
    use std::sync::atomic::{AtomicI64, Ordering};
    let fake = Fake::start().await;
    let new_leader = Arc::new(AtomicI64::new(7));
    let added = fake
        .fenced(new_leader.clone())
        .add(HardwareKind::Cpu)
        .await
        .unwrap();
    assert_eq!(fake.replicas(), 1);
    assert_eq!(fake.pod_names(), std::slice::from_ref(&added.name));
    assert_eq!(fake.annotation().as_deref(), Some("7"));
    let patches: Vec<Recorded> = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == Method::PATCH)
        .collect();
    assert_eq!(patches.len(), 1, "{patches:?}");
    assert!(patches[0]
        .path
        .ends_with(&format!("/deployments/{DEPLOYMENT}")));
    assert_eq!(
        patches[0].body["metadata"]["annotations"][LEADER_TOKEN_ANNOTATION],
        "7"
    );
    assert!(
        patches[0].body["metadata"]["resourceVersion"].is_string(),
        "{:?}",
        patches[0]
    );

    // The old leader (token 6) wakes up late: refused, nothing changed.
    let old_leader = Arc::new(AtomicI64::new(6));
    let before = fake.requests().len();
    let err = fake
        .fenced(old_leader.clone())
        .add(HardwareKind::Cpu)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            ProvisionError::Fenced {
                ours: 6,
                holder: Some(7)
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("token 6") && err.to_string().contains("token 7"),
        "{err}"
    );
    assert_eq!(fake.replicas(), 1);
    assert!(
        fake.requests()[before..]
            .iter()
            .all(|r| r.method != Method::PATCH),
        "a stale leader patched"
    );
    let err = fake.fenced(old_leader).remove(&added).await.unwrap_err();
    assert!(matches!(err, ProvisionError::Fenced { .. }), "{err}");
    assert_eq!(fake.pod_names(), std::slice::from_ref(&added.name));

    // Deposed (-1): refused before any request.
    new_leader.store(-1, Ordering::SeqCst);
    let before = fake.requests().len();
    let err = fake
        .fenced(new_leader)
        .add(HardwareKind::Cpu)
        .await
        .unwrap_err();
    assert!(
        matches!(err, ProvisionError::Fenced { ours: -1, .. }),
        "{err}"
    );
    assert_eq!(
        fake.requests().len(),
        before,
        "a deposed leader called the API"
    );
}

/// Someone changes the Deployment between the provider's read and its patch: the patch is
/// refused (409), read again and applied on the new count.
#[tokio::test]
async fn a_change_in_between_is_read_again_and_not_lost() {
    use std::sync::atomic::AtomicI64;
    let fake = Fake::start().await;
    fake.state.lock().unwrap().interleave = 1;
    let provider = fake.fenced(Arc::new(AtomicI64::new(3)));
    provider.add(HardwareKind::Cpu).await.unwrap();
    // The other writer's replica and ours: 2, not 1.
    assert_eq!(fake.replicas(), 2);
    let patches = fake
        .requests()
        .into_iter()
        .filter(|r| r.method == Method::PATCH)
        .count();
    assert_eq!(patches, 2, "one refused patch, one applied");
    assert_eq!(fake.annotation().as_deref(), Some("3"));
}
