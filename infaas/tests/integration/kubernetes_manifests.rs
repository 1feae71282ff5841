//! deploy/kubernetes/ agrees with the configuration the binary reads and with what the
//! `kubernetes` worker provider does (no cluster runs in CI to apply them to).
#![cfg(feature = "kubernetes")]
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use infaas_control::config::{env_names, Config};
use infaas_provision::kubernetes::{KubernetesConfig, REQUIRED_RBAC};
use serde::Deserialize;
use serde_yaml::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/kubernetes")
}

/// Every document of every manifest, with the file it came from.
fn documents() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no manifests in deploy/kubernetes");
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for doc in serde_yaml::Deserializer::from_str(&text) {
            let v = Value::deserialize(doc)
                .unwrap_or_else(|e| panic!("{} is not YAML: {e}", f.display()));
            if !v.is_null() {
                docs.push((f.file_name().unwrap().to_string_lossy().into_owned(), v));
            }
        }
    }
    docs
}

fn find<'a>(docs: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .map(|(_, d)| d)
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} named {name} in deploy/kubernetes"))
}

fn s(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => panic!("not a string: {other:?}"),
    }
}

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_sequence()
        .unwrap_or_else(|| panic!("not a list: {v:?}"))
        .iter()
        .map(s)
        .collect()
}

fn labels(v: &Value) -> BTreeMap<String, String> {
    v.as_mapping()
        .unwrap_or_else(|| panic!("not a map: {v:?}"))
        .iter()
        .map(|(k, v)| (s(k), s(v)))
        .collect()
}

fn container(deployment: &Value) -> &Value {
    let containers = deployment["spec"]["template"]["spec"]["containers"]
        .as_sequence()
        .unwrap();
    assert_eq!(containers.len(), 1);
    &containers[0]
}

/// A container's environment by name (the value, or the `valueFrom` source).
fn env(container: &Value) -> BTreeMap<String, Value> {
    container["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|e| {
            let v = if e["value"].is_null() {
                e["valueFrom"].clone()
            } else {
                e["value"].clone()
            };
            (s(&e["name"]), v)
        })
        .collect()
}

/// `key=value,key=value` as a map.
fn selector(text: &str) -> BTreeMap<String, String> {
    text.split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.trim().to_string(), v.trim().to_string())
        })
        .collect()
}

fn cpu(v: &Value) -> usize {
    s(v).parse()
        .unwrap_or_else(|_| panic!("cpu {v:?} is not a whole number of cores"))
}

#[test]
fn manifests_are_namespace_agnostic() {
    for (file, d) in documents() {
        assert!(
            d["metadata"]["namespace"].is_null(),
            "{file}: {} {} sets a namespace",
            s(&d["kind"]),
            s(&d["metadata"]["name"])
        );
    }
}

#[test]
fn worker_deployment_is_the_one_the_provider_scales() {
    let docs = documents();
    let defaults = Config::default();
    let provider = KubernetesConfig::default();
    assert_eq!(defaults.kubernetes(), provider);

    let worker = find(&docs, "Deployment", &provider.deployment);
    let wanted = selector(&provider.selector);
    assert_eq!(labels(&worker["spec"]["selector"]["matchLabels"]), wanted);
    let pod_labels = labels(&worker["spec"]["template"]["metadata"]["labels"]);
    for (k, v) in &wanted {
        assert_eq!(pod_labels.get(k), Some(v), "pod label {k}");
    }

    let c = container(worker);
    assert_eq!(
        strings(&c["command"]),
        ["infaas", "worker"].map(String::from).into()
    );
    let e = env(c);
    // The worker registers under its pod's name: what `add` returns and `remove` takes.
    assert_eq!(
        e["INFAAS_WORKER_NAME"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    // The controller reaches it at its pod IP, on the port it listens on.
    let listen = s(&e["INFAAS_WORKER_LISTEN"]);
    let port = listen.rsplit(':').next().unwrap();
    assert_eq!(e["POD_IP"]["fieldRef"]["fieldPath"], "status.podIP");
    assert_eq!(
        s(&e["INFAAS_WORKER_ADVERTISE_URL"]),
        format!("http://$(POD_IP):{port}")
    );
    assert!(c["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .any(|p| s(&p["containerPort"]) == port));
    // The cores it offers are the cores it requests.
    let requests = &c["resources"]["requests"];
    assert!(
        !requests["memory"].is_null(),
        "the worker requests no memory"
    );
    assert_eq!(
        cpu(&requests["cpu"]),
        s(&e["INFAAS_WORKER_CORES"]).parse::<usize>().unwrap()
    );
}

#[test]
fn every_variable_is_one_the_binary_reads() {
    let docs = documents();
    let mut known: BTreeSet<String> = env_names().into_iter().collect();
    // `infaas worker --controller` and the standard AWS credentials.
    known.extend(
        [
            "INFAAS_CONTROLLER",
            "AWS_ACCESS_KEY_ID",
            "AWS_SECRET_ACCESS_KEY",
        ]
        .map(String::from),
    );
    for name in ["infaas-worker", "infaas-controller"] {
        let e = env(container(find(&docs, "Deployment", name)));
        for var in e.keys().filter(|v| *v != "POD_IP") {
            assert!(
                known.contains(var),
                "{name} sets {var}, which infaas does not read"
            );
        }
    }
}

#[test]
fn controller_service_secret_and_provider_settings_agree() {
    let docs = documents();
    let controller = find(&docs, "Deployment", "infaas-controller");
    let worker = find(&docs, "Deployment", "infaas-worker");
    let ce = env(container(controller));
    let we = env(container(worker));

    // The worker's controller URL is the Service, on the port the controller listens on.
    let service = find(&docs, "Service", "infaas-controller");
    let listen_port = s(&ce["INFAAS_LISTEN"])
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let svc_port = &service["spec"]["ports"][0];
    assert_eq!(
        s(&we["INFAAS_CONTROLLER"]),
        format!("http://infaas-controller:{}", s(&svc_port["port"]))
    );
    let named_port = container(controller)["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == svc_port["targetPort"])
        .expect("the Service's targetPort names a controller port");
    assert_eq!(s(&named_port["containerPort"]), listen_port);
    // The gRPC service (Open Inference Protocol) listens on the port the Service names.
    let grpc_port = s(&ce["INFAAS_GRPC_LISTEN"])
        .rsplit(':')
        .next()
        .unwrap()
        .to_string();
    let grpc_svc = service["spec"]["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "grpc")
        .expect("the Service has a grpc port");
    let grpc_named = container(controller)["ports"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|p| p["name"] == grpc_svc["targetPort"])
        .expect("the Service's grpc targetPort names a controller port");
    assert_eq!(s(&grpc_named["containerPort"]), grpc_port);
    let pod_labels = labels(&controller["spec"]["template"]["metadata"]["labels"]);
    for (k, v) in labels(&service["spec"]["selector"]) {
        assert_eq!(pod_labels.get(&k), Some(&v));
    }

    // Both read the same cluster token.
    assert_eq!(
        ce["INFAAS_CLUSTER_TOKEN"]["secretKeyRef"],
        we["INFAAS_CLUSTER_TOKEN"]["secretKeyRef"]
    );
    assert!(!ce["INFAAS_CLUSTER_TOKEN"]["secretKeyRef"].is_null());

    // The controller's provider settings name the worker Deployment above.
    let provider = KubernetesConfig::default();
    assert_eq!(
        s(&ce["INFAAS_KUBERNETES_WORKER_DEPLOYMENT"]),
        s(&worker["metadata"]["name"])
    );
    assert_eq!(
        s(&ce["INFAAS_KUBERNETES_WORKER_SELECTOR"]),
        provider.selector
    );
    assert!(
        s(&ce["INFAAS_KUBERNETES_MAX_WORKERS"])
            .parse::<u32>()
            .unwrap()
            >= 1
    );
    assert_eq!(
        ce["INFAAS_KUBERNETES_NAMESPACE"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
}

#[test]
fn rbac_grants_exactly_what_the_provider_uses() {
    let docs = documents();
    let controller = find(&docs, "Deployment", "infaas-controller");
    let account = s(&controller["spec"]["template"]["spec"]["serviceAccountName"]);
    find(&docs, "ServiceAccount", &account);

    let bindings: Vec<&Value> = docs
        .iter()
        .map(|(_, d)| d)
        .filter(|d| d["kind"] == "RoleBinding")
        .collect();
    assert_eq!(bindings.len(), 1);
    let binding = bindings[0];
    assert_eq!(binding["subjects"][0]["kind"], "ServiceAccount");
    assert_eq!(s(&binding["subjects"][0]["name"]), account);
    assert_eq!(binding["roleRef"]["kind"], "Role");
    let role = find(&docs, "Role", &s(&binding["roleRef"]["name"]));
    assert!(
        !docs.iter().any(|(_, d)| d["kind"] == "ClusterRole"),
        "the provider needs no cluster-wide rights"
    );

    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_sequence().unwrap() {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                if resource.starts_with("deployments") {
                    // Only the worker Deployment may be read, changed and scaled.
                    assert_eq!(
                        strings(&rule["resourceNames"]),
                        [KubernetesConfig::default().deployment].into()
                    );
                }
                granted.insert((group.clone(), resource, strings(&rule["verbs"])));
            }
        }
    }
    let required: BTreeSet<(String, String, BTreeSet<String>)> = REQUIRED_RBAC
        .iter()
        .map(|(g, r, verbs)| {
            (
                g.to_string(),
                r.to_string(),
                verbs.iter().map(|v| v.to_string()).collect(),
            )
        })
        .collect();
    assert_eq!(granted, required);
}

/// Several controller replicas behind the Service: each advertises its pod IP to the workers
/// and the other replicas, hosts nothing on its embedded worker, is ready on `/readyz`, drains
/// within its termination grace period, and a PodDisruptionBudget keeps all but one up.
#[test]
fn the_controller_runs_as_several_replicas() {
    let docs = documents();
    let controller = find(&docs, "Deployment", "infaas-controller");
    let replicas = controller["spec"]["replicas"].as_u64().expect("replicas");
    assert!(
        replicas >= 3,
        "one leader and two replicas to fail over to: {replicas}"
    );
    let e = env(container(controller));
    assert_eq!(s(&e["POD_IP"]["fieldRef"]["fieldPath"]), "status.podIP");
    assert_eq!(s(&e["INFAAS_ADVERTISE_URL"]), "http://$(POD_IP):8080");
    assert_eq!(s(&e["INFAAS_WORKER_THREAD_BUDGET"]), "0");
    assert_eq!(
        s(&container(controller)["readinessProbe"]["httpGet"]["path"]),
        "/readyz"
    );
    let grace = controller["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("a termination grace period");
    let drain = infaas_control::config::Config::default().shutdown_grace_secs;
    assert!(
        grace > drain,
        "the kubelet waits {grace} s, the drain takes up to {drain} s"
    );
    let pdb = find(&docs, "PodDisruptionBudget", "infaas-controller");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    assert_eq!(
        labels(&pdb["spec"]["selector"]["matchLabels"]),
        labels(&controller["spec"]["selector"]["matchLabels"])
    );
}
