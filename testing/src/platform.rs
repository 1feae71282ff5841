//! For the platform tests (registry, serving, jobs, autoscaling) and the benches: an in-process server on one backend pair, tenants with
//! tokens, multipart registrations of zoo models, polling, and a snapshot of everything a
//! tenant has stored.
//!
//! Needs ONNX Runtime (`ORT_DYLIB_PATH`, else the `scripts/setup.sh` cache): without it a test
//! fails when `CI=true` and otherwise passes after a one-line skip notice, like the
//! Postgres/S3 tests of `backends`.

pub use crate::{backends, heavy, workers};

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use infaas_api::server::Server;
use infaas_control::config::Config;
use infaas_control::tenancy::generate_key;
use infaas_core::{Quotas, Role, Tensor};
use infaas_store::Db;
use reqwest::multipart::{Form, Part};
use reqwest::StatusCode;
use serde_json::Value;

use crate::backends::Backends;

/// The zoo's models of real architectures that run milliseconds a row (`scripts/make_real_zoo.py`):
/// name, file, validation set. Not in [`ZOO`], which tests register whole.
pub const REAL_ZOO: [(&str, &str, &str); 2] = [
    ("cifar-resnet", "cifar-resnet.onnx", "cifar-val.npz"),
    ("text-encoder", "text-encoder.onnx", "text-val.npz"),
];

/// The zoo's digits models: (name, file, validation set).
pub const ZOO: [(&str, &str, &str); 7] = [
    ("digits-logreg", "digits-logreg.onnx", "digits-val.npz"),
    ("digits-mlp-s", "digits-mlp-s.onnx", "digits-val.npz"),
    ("digits-mlp-m", "digits-mlp-m.onnx", "digits-val.npz"),
    ("digits-mlp-l", "digits-mlp-l.onnx", "digits-val.npz"),
    ("digits-forest", "digits-forest.onnx", "digits-val.npz"),
    (
        "digits-mlp-scores",
        "digits-mlp-scores.onnx",
        "digits-val.npz",
    ),
    (
        "digits-two-input",
        "digits-two-input.onnx",
        "digits-two-input-val.npz",
    ),
];

pub fn zoo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../zoo")
}

pub fn zoo_bytes(file: &str) -> Vec<u8> {
    let path = zoo_dir().join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The arrays of a zoo validation set.
pub fn zoo_arrays(file: &str) -> Vec<Tensor> {
    infaas_protocol::npz::read_npz(&zoo_bytes(file))
        .unwrap_or_else(|e| panic!("reading zoo/{file}: {e}"))
}

/// Row `i` of the digits validation set as a JSON tensor named `name` (a query's input).
pub fn digit_row(name: &str, i: usize) -> Value {
    let x = zoo_arrays("digits-val.npz")
        .into_iter()
        .find(|t| t.name == "x")
        .expect("array x in zoo/digits-val.npz");
    let row = x.slice_batch(i, i + 1);
    let data: Vec<f64> = (0..row.data.len())
        .filter_map(|k| row.data.get_f64(k))
        .collect();
    serde_json::json!({"name": name, "shape": [1, 64], "datatype": "FP32", "data": data})
}

pub fn npz(arrays: &[Tensor]) -> Vec<u8> {
    infaas_protocol::npz::write_npz(arrays).expect("writing an NPZ file")
}

/// Validation accuracy per zoo file name (`digits-mlp-l.onnx`), from the table of
/// zoo/README.md (its last column).
pub fn readme_accuracies() -> BTreeMap<String, f64> {
    let text = std::fs::read_to_string(zoo_dir().join("README.md")).expect("zoo/README.md");
    text.lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split('|').map(str::trim).collect();
            let file = cells.first()?.trim_matches('`').to_string();
            let acc: f64 = cells.last()?.parse().ok()?;
            Some((file, acc))
        })
        .collect()
}

/// Writes into `dir` the slow copy of `zoo/digits-mlp-l.onnx` that
/// `infaas/tests/python/make_heavy_model.py` makes with `args` (`[K [ROWS]]`: the same answers,
/// more work a row) and returns its path; `None` (the test skips) without onnx and numpy.
pub fn heavy_mlp(dir: &Path, args: &[&str]) -> Option<PathBuf> {
    if !python_has("onnx, numpy", "onnx and numpy") {
        return None;
    }
    let out_path = dir.join("digits-mlp-heavy.onnx");
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../infaas/tests/python/make_heavy_model.py");
    let out = std::process::Command::new("python3")
        .arg(&script)
        .arg(zoo_dir())
        .arg(&out_path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out_path)
}

/// Whether `python3` imports `modules` (comma-separated, e.g. `"tritonclient.http, numpy"`);
/// `false` after a skip notice, a panic when `CI=true` (CI installs them: `scripts/test.sh`).
pub fn python_has(modules: &str, packages: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI=true needs python3 with {packages}"
        );
        eprintln!("SKIPPED: python3 with {packages} is not available");
    }
    ok
}

/// Runs one of the Python client scripts (`infaas/tests/python/`) against a server with
/// `url token name zoo/digits-logreg.onnx zoo/digits-val.npz`; panics with its output unless
/// it succeeds, else returns its standard output.
pub async fn run_client_script(
    script: &'static str,
    url: String,
    token: String,
    name: &str,
) -> String {
    let zoo = zoo_dir();
    let owned = name.to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(script)
            .arg(&url)
            .arg(&token)
            .arg(&owned)
            .arg(zoo.join("digits-logreg.onnx"))
            .arg(zoo.join("digits-val.npz"))
            .output()
    })
    .await
    .expect("the script's thread")
    .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{script} against '{name}' failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The ONNX Runtime library, or `None` after a skip notice (a panic when `CI=true`).
pub fn ort_library() -> Option<PathBuf> {
    let candidate = std::env::var_os("ORT_DYLIB_PATH")
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| {
                infaas_executors::runtime::default_library_path(
                    &PathBuf::from(h).join(".cache/infaas"),
                )
            })
        });
    match candidate {
        Some(p) if p.is_file() => Some(p),
        other => {
            let why = match other {
                Some(p) => format!("ONNX Runtime library {} does not exist", p.display()),
                None => "ORT_DYLIB_PATH is not set".to_string(),
            };
            let test = std::thread::current()
                .name()
                .unwrap_or("a registry test")
                .to_string();
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!("{test} needs ONNX Runtime when CI=true: {why}; run scripts/setup.sh or set ORT_DYLIB_PATH");
            }
            let _ = writeln!(
                std::io::stderr(),
                "SKIPPED {test}: {why} (run scripts/setup.sh or set ORT_DYLIB_PATH)"
            );
            None
        }
    }
}

/// A server configuration on `b` with profiling cut down so a whole zoo registers in seconds.
pub fn fast_config(b: &Backends, ort: &Path) -> Config {
    Config {
        ort_dylib_path: Some(ort.to_path_buf()),
        worker_cores: Some(2),
        profile_runs: 3,
        profile_max_ms_per_batch: 50,
        // Test webhook receivers listen on loopback.
        job_webhook_allow_private: true,
        ..crate::server::config_for(b)
    }
}

/// A tenant with an access token.
#[derive(Debug, Clone)]
pub struct Tenant {
    pub id: String,
    pub name: String,
    pub token: String,
}

/// Quotas generous enough that only the limit under test can be hit (tests poll fast).
pub fn open_quotas() -> Quotas {
    Quotas {
        requests_per_second: 100_000.0,
        max_models: 100,
        max_stored_bytes: 1 << 34,
    }
}

/// An HTTP answer: status and JSON body (`Null` when empty or not JSON).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Value,
    pub text: String,
}

impl Answer {
    /// The `error` message of an error body.
    pub fn error(&self) -> &str {
        self.body["error"].as_str().unwrap_or_default()
    }

    pub fn error_type(&self) -> &str {
        self.body["error_type"].as_str().unwrap_or_default()
    }
}

/// What a tenant has stored, to show that a rejected request stored nothing.
#[derive(Debug, PartialEq, Eq)]
pub struct Stored {
    pub models: Vec<String>,
    pub stored_bytes: i64,
    pub object_keys: Vec<String>,
    pub upload_dirs: Vec<String>,
}

/// A multipart registration, built field by field.
#[derive(Clone, Default)]
pub struct Registration {
    fields: Vec<(String, Field)>,
}

#[derive(Clone)]
enum Field {
    Text(String),
    File(Vec<u8>, String),
}

impl Registration {
    /// A zoo model under `name` in `app`, with its validation set.
    pub fn zoo(name: &str, app: &str) -> Registration {
        let (_, file, val) = ZOO
            .iter()
            .chain(REAL_ZOO.iter())
            .find(|(n, _, _)| *n == name)
            .unwrap_or_else(|| panic!("no zoo model '{name}'"));
        Registration::default()
            .text("name", name)
            .text("app", app)
            .file("model", zoo_bytes(file), file)
            .file("validation", zoo_bytes(val), val)
    }

    /// Sets (or replaces) a text field.
    pub fn text(self, key: &str, value: &str) -> Registration {
        self.set(key, Field::Text(value.to_string()))
    }

    /// Sets (or replaces) a file field.
    pub fn file(self, key: &str, bytes: Vec<u8>, file_name: &str) -> Registration {
        self.set(key, Field::File(bytes, file_name.to_string()))
    }

    pub fn without(mut self, key: &str) -> Registration {
        self.fields.retain(|(k, _)| k != key);
        self
    }

    fn set(mut self, key: &str, field: Field) -> Registration {
        match self.fields.iter_mut().find(|(k, _)| k == key) {
            Some(slot) => slot.1 = field,
            None => self.fields.push((key.to_string(), field)),
        }
        self
    }

    /// The registration as the multipart form `POST /v1/models` takes.
    pub fn form(&self) -> Form {
        self.fields
            .iter()
            .fold(Form::new(), |form, (key, field)| match field {
                Field::Text(v) => form.text(key.clone(), v.clone()),
                Field::File(bytes, name) => form.part(
                    key.clone(),
                    Part::bytes(bytes.clone()).file_name(name.clone()),
                ),
            })
    }
}

/// An in-process server with an HTTP client.
pub struct Platform {
    pub server: Server,
    pub config: Config,
    pub http: reqwest::Client,
    pub base: String,
}

impl Platform {
    pub async fn start(config: Config) -> Platform {
        let server = Server::start(config.clone())
            .await
            .unwrap_or_else(|e| panic!("starting the server: {e:#}"));
        let base = format!("http://{}", server.addr);
        Platform {
            server,
            config,
            http: reqwest::Client::new(),
            base,
        }
    }

    /// `http://` and the address of the gRPC service (the server must have it on).
    pub fn grpc_url(&self) -> String {
        crate::server::grpc_url(&self.server)
    }

    /// Stops the server (the database pool closes; background work pauses).
    pub async fn stop(self) {
        self.server
            .stop(Duration::from_secs(10))
            .await
            .unwrap_or_else(|e| panic!("stopping the server: {e:#}"));
    }

    pub fn db(&self) -> &Db {
        &self.server.state.db
    }

    /// Creates a tenant with an admin key and exchanges the key for a token.
    pub async fn tenant(&self, name: &str, quotas: Quotas) -> Tenant {
        let t = self
            .db()
            .create_tenant(name, quotas)
            .await
            .expect("creating a tenant");
        let key = generate_key();
        self.db()
            .create_api_key(&t.id, "admin", Role::Admin, &key.prefix, &key.hash)
            .await
            .expect("creating an API key");
        let a = self
            .send(
                self.http
                    .post(format!("{}/v1/auth/token", self.base))
                    .json(&serde_json::json!({ "api_key": key.secret })),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "token: {}", a.text);
        Tenant {
            id: t.id,
            name: name.to_string(),
            token: a.body["access_token"]
                .as_str()
                .expect("an access token")
                .to_string(),
        }
    }

    pub async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        let resp = req.send().await.expect("an HTTP answer");
        let status = resp.status();
        let text = resp.text().await.expect("an HTTP body");
        let body = serde_json::from_str(&text).unwrap_or(Value::Null);
        Answer { status, body, text }
    }

    pub async fn get(&self, t: &Tenant, path: &str) -> Answer {
        self.send(
            self.http
                .get(format!("{}{path}", self.base))
                .bearer_auth(&t.token),
        )
        .await
    }

    pub async fn delete(&self, t: &Tenant, path: &str) -> Answer {
        self.send(
            self.http
                .delete(format!("{}{path}", self.base))
                .bearer_auth(&t.token),
        )
        .await
    }

    pub async fn register(&self, t: &Tenant, r: &Registration) -> Answer {
        self.send(
            self.http
                .post(format!("{}/v1/models", self.base))
                .bearer_auth(&t.token)
                .multipart(r.form()),
        )
        .await
    }

    /// Registers and asserts 202.
    pub async fn register_ok(&self, t: &Tenant, r: &Registration) -> Value {
        let a = self.register(t, r).await;
        assert_eq!(a.status, StatusCode::ACCEPTED, "registration: {}", a.text);
        a.body
    }

    pub async fn model(&self, t: &Tenant, name: &str) -> Value {
        let a = self.get(t, &format!("/v1/models/{name}")).await;
        assert_eq!(a.status, StatusCode::OK, "GET model {name}: {}", a.text);
        a.body
    }

    /// Polls until the model's status is `ready` and the stored files of its pruned variants
    /// are gone (the registration deletes them right after it marks the model ready, so a
    /// test comparing what is stored reads a settled state); panics with its error and
    /// progress when it fails or `timeout` passes.
    pub async fn wait_ready(&self, t: &Tenant, name: &str, timeout: Duration) -> Value {
        let start = Instant::now();
        let m = self
            .wait_for(t, name, timeout, |m| m["status"] == "ready")
            .await;
        let model = self.db().get_model(&t.id, name).await.expect("the model");
        let files = self
            .db()
            .list_model_files(&model.id)
            .await
            .expect("the model's files");
        let variants = self
            .db()
            .list_variants(&model.id)
            .await
            .expect("the model's variants");
        let mut keep: Vec<String> = files
            .iter()
            .filter(|f| variants.iter().any(|v| v.file_id == f.id))
            .map(|f| f.object_key.clone())
            .chain([model.validation_key.clone()])
            .collect();
        keep.sort();
        let prefix = keep
            .last()
            .and_then(|k| k.rsplit_once('/'))
            .map(|(dir, _)| format!("{dir}/"))
            .unwrap_or_default();
        loop {
            let mut accounted: Vec<String> = self
                .db()
                .objects_of("model", &model.id)
                .await
                .expect("the model's objects")
                .into_iter()
                .map(|o| o.key)
                .collect();
            accounted.sort();
            let mut stored: Vec<String> = self
                .server
                .state
                .objects
                .list(&prefix)
                .await
                .expect("listing objects")
                .into_iter()
                .map(|o| o.key)
                .collect();
            stored.sort();
            if accounted == keep && stored == keep {
                return m;
            }
            assert!(
                start.elapsed() < timeout,
                "model {name}: the files of pruned variants remain: accounted {accounted:?}, \
                 stored {stored:?}, kept {keep:?}"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Polls (every 20 ms) until `done(model)`; panics when the model fails or `timeout` passes.
    pub async fn wait_for(
        &self,
        t: &Tenant,
        name: &str,
        timeout: Duration,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let m = self.model(t, name).await;
            if done(&m) {
                return m;
            }
            let summary = || {
                format!(
                    "status {}, progress {}, detail {}, error {}",
                    m["status"], m["progress"], m["progress_detail"], m["error"]
                )
            };
            assert_ne!(m["status"], "failed", "model {name} failed: {}", summary());
            assert!(
                start.elapsed() < timeout,
                "model {name} not done after {timeout:?}: {}",
                summary()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// What `t` has stored: model names, accounted bytes, object keys, upload leftovers.
    pub async fn stored(&self, t: &Tenant) -> Stored {
        let list = self.get(t, "/v1/models").await;
        assert_eq!(list.status, StatusCode::OK, "{}", list.text);
        let models = list.body["models"]
            .as_array()
            .expect("a model list")
            .iter()
            .map(|m| m["name"].as_str().unwrap_or_default().to_string())
            .collect();
        let object_keys = self
            .server
            .state
            .objects
            .list(&format!("tenants/{}/", t.id))
            .await
            .expect("listing objects")
            .into_iter()
            .map(|o| o.key)
            .collect();
        let upload_dirs = match std::fs::read_dir(self.config.tmp_dir()) {
            Ok(entries) => entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("upload-"))
                .collect(),
            Err(_) => Vec::new(),
        };
        Stored {
            models,
            stored_bytes: self.db().stored_bytes(&t.id).await.expect("stored bytes"),
            object_keys,
            upload_dirs,
        }
    }
}
