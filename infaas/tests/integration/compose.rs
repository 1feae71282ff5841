//! docker-compose.yml, Dockerfile and deploy/garage.toml agree with each other and with the
//! configuration the controller reads (there is no Docker engine to try them on in CI).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::{CommandFactory, Parser};
use infaas_control::config::{env_names, Config, LogFormat, Overrides};
use infaas_store::objects::S3Config;
use infaas_store::ObjectStoreConfig;
use reqwest::Url;
use serde_yaml::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(file: &str) -> String {
    let path = repo().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn compose() -> Value {
    serde_yaml::from_str(&read("docker-compose.yml")).expect("docker-compose.yml is YAML")
}

fn service<'a>(doc: &'a Value, name: &str) -> &'a Value {
    let s = &doc["services"][name];
    assert!(s.is_mapping(), "docker-compose.yml has no service '{name}'");
    s
}

fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => panic!("not a scalar: {other:?}"),
    }
}

/// A service's environment, written as a map or as a list of `NAME=value`.
fn environment(service: &Value) -> BTreeMap<String, String> {
    match &service["environment"] {
        Value::Mapping(m) => m.iter().map(|(k, v)| (scalar(k), scalar(v))).collect(),
        Value::Sequence(items) => items
            .iter()
            .map(|i| {
                let item = scalar(i);
                let (k, v) = item.split_once('=').unwrap_or((&item, ""));
                (k.to_string(), v.to_string())
            })
            .collect(),
        Value::Null => BTreeMap::new(),
        other => panic!("unexpected environment: {other:?}"),
    }
}

fn strings(v: &Value) -> Vec<String> {
    v.as_sequence()
        .map(|s| s.iter().map(scalar).collect())
        .unwrap_or_default()
}

/// Container ports a service publishes (`"8080:8080"`, `"127.0.0.1:80:8080/tcp"`, ...).
fn published_ports(service: &Value) -> Vec<u16> {
    strings(&service["ports"])
        .iter()
        .map(|p| {
            let container = p.rsplit(':').next().unwrap_or(p);
            let container = container.split('/').next().unwrap_or(container);
            container
                .parse()
                .unwrap_or_else(|_| panic!("port mapping {p}"))
        })
        .collect()
}

fn port_of(addr: &str) -> u16 {
    addr.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {addr}"))
}

fn garage_toml() -> toml::Value {
    toml::from_str(&read("deploy/garage.toml")).expect("deploy/garage.toml is TOML")
}

#[test]
fn services_exist_and_the_controller_depends_on_healthy_ones() {
    let doc = compose();
    let postgres = service(&doc, "postgres");
    let s3 = service(&doc, "s3");
    let controller = service(&doc, "controller");

    assert!(scalar(&postgres["image"]).starts_with("postgres:16"));
    assert!(strings(&postgres["healthcheck"]["test"])
        .join(" ")
        .contains("pg_isready"));
    assert!(
        !strings(&postgres["volumes"]).is_empty(),
        "postgres keeps its data in a volume"
    );

    assert_eq!(scalar(&s3["image"]), "dxflrs/garage:v2.5.0");
    assert!(
        strings(&s3["volumes"]).contains(&"./deploy/garage.toml:/etc/garage.toml:ro".to_string()),
        "{:?}",
        s3["volumes"]
    );
    assert!(published_ports(s3).contains(&3900));

    assert_eq!(scalar(&controller["build"]), ".");
    assert!(repo().join("Dockerfile").is_file());
    assert_eq!(strings(&controller["command"]), ["infaas", "serve"]);
    for dep in ["postgres", "s3"] {
        assert_eq!(
            scalar(&controller["depends_on"][dep]["condition"]),
            "service_healthy",
            "the controller waits for a healthy {dep}"
        );
        assert!(
            service(&doc, dep)["healthcheck"].is_mapping(),
            "{dep} has a healthcheck"
        );
    }
}

#[test]
fn controller_variables_are_real_and_point_at_the_services() {
    let doc = compose();
    let env = environment(service(&doc, "controller"));
    let known = env_names();
    for name in env.keys().filter(|n| n.starts_with("INFAAS_")) {
        assert!(
            known.contains(name) || name == "INFAAS_CONTROLLER",
            "{name} is not a configuration variable (known: {known:?})"
        );
    }

    // The database is the postgres service, with its user, password and database.
    let pg = environment(service(&doc, "postgres"));
    let db = Url::parse(&env["INFAAS_DATABASE_URL"]).expect("a database URL");
    assert_eq!(db.scheme(), "postgres");
    assert_eq!(db.host_str(), Some("postgres"));
    assert_eq!(db.port().unwrap_or(5432), 5432);
    assert_eq!(db.username(), pg["POSTGRES_USER"]);
    assert_eq!(db.password(), Some(pg["POSTGRES_PASSWORD"].as_str()));
    assert_eq!(db.path().trim_start_matches('/'), pg["POSTGRES_DB"]);

    // The object store is the s3 service's bucket, reached on its S3 port with its key.
    let garage = environment(service(&doc, "s3"));
    let toml = garage_toml();
    let store = ObjectStoreConfig::parse(
        &env["INFAAS_OBJECT_STORE"],
        Some(env["INFAAS_S3_ENDPOINT"].clone()),
        Some(env["INFAAS_S3_REGION"].clone()),
    )
    .expect("a valid object store");
    let ObjectStoreConfig::S3(S3Config { bucket, .. }) = store else {
        panic!(
            "INFAAS_OBJECT_STORE is not s3://: {}",
            env["INFAAS_OBJECT_STORE"]
        );
    };
    assert_eq!(bucket, garage["GARAGE_DEFAULT_BUCKET"]);
    let endpoint = Url::parse(&env["INFAAS_S3_ENDPOINT"]).expect("an endpoint URL");
    assert_eq!(endpoint.host_str(), Some("s3"));
    let s3_port = port_of(toml["s3_api"]["api_bind_addr"].as_str().unwrap());
    assert_eq!(endpoint.port_or_known_default(), Some(s3_port));
    assert_eq!(
        env["INFAAS_S3_REGION"],
        toml["s3_api"]["s3_region"].as_str().unwrap(),
        "requests are signed for the region Garage serves"
    );
    assert_eq!(
        env["AWS_ACCESS_KEY_ID"],
        garage["GARAGE_DEFAULT_ACCESS_KEY"]
    );
    assert_eq!(
        env["AWS_SECRET_ACCESS_KEY"],
        garage["GARAGE_DEFAULT_SECRET_KEY"]
    );

    // The API ports (HTTP and gRPC) are published.
    for var in ["INFAAS_LISTEN", "INFAAS_GRPC_LISTEN"] {
        let listen = port_of(&env[var]);
        assert!(
            published_ports(service(&doc, "controller")).contains(&listen),
            "port {listen} of {var} is not published"
        );
    }
}

#[test]
fn onnx_runtime_path_matches_the_dockerfile() {
    let doc = compose();
    let env = environment(service(&doc, "controller"));
    let dockerfile = read("Dockerfile");
    let final_stage = dockerfile.rsplit("\nFROM ").next().expect("a final stage");
    let copied_to: Vec<&str> = final_stage
        .lines()
        .filter(|l| l.starts_with("COPY --from=") && l.contains("libonnxruntime"))
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    assert_eq!(copied_to.len(), 1, "one COPY of the library into the image");
    assert_eq!(env["INFAAS_ORT_DYLIB_PATH"], copied_to[0]);
    // The image's own default agrees too.
    assert!(
        final_stage.contains(&format!("INFAAS_ORT_DYLIB_PATH={}", copied_to[0])),
        "the Dockerfile's ENV names another path"
    );
    // Same ONNX Runtime version as the one the test suite uses (scripts/lib.sh).
    let lib = read("scripts/lib.sh");
    let version = lib
        .lines()
        .find_map(|l| l.strip_prefix("ORT_VERSION="))
        .map(|v| v.trim_matches('"'))
        .expect("ORT_VERSION in scripts/lib.sh");
    assert!(dockerfile.contains(&format!("onnxruntime=={version}")));
    assert!(copied_to[0].ends_with(&format!("libonnxruntime.so.{version}")));
}

/// Command-line parser over the configuration flags (each flag also reads its variable).
#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    overrides: Overrides,
}

#[test]
fn controller_environment_is_a_valid_configuration() {
    let doc = compose();
    let env = environment(service(&doc, "controller"));
    // Each variable becomes the flag that reads it, so the test process's own environment
    // stays untouched.
    let command = Flags::command();
    let mut args = vec!["infaas".to_string()];
    for (name, value) in env.iter().filter(|(n, _)| n.starts_with("INFAAS_")) {
        let flag = command
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name.as_str()))
            .and_then(|a| a.get_long())
            .unwrap_or_else(|| panic!("no flag reads {name}"));
        args.push(format!("--{flag}={value}"));
    }
    let flags = Flags::try_parse_from(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let config = Config::load(&flags.overrides).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert_eq!(config.listen.to_string(), "0.0.0.0:8080");
    assert_eq!(config.database_url(), env["INFAAS_DATABASE_URL"]);
    assert_eq!(config.object_store(), env["INFAAS_OBJECT_STORE"]);
    assert_eq!(config.s3_endpoint.as_deref(), Some("http://s3:3900"));
    assert_eq!(config.s3_region.as_deref(), Some("garage"));
    assert_eq!(config.log_format, LogFormat::Json);
    assert_eq!(
        config.ort_dylib_path.as_deref(),
        Some(Path::new(&env["INFAAS_ORT_DYLIB_PATH"]))
    );
}
