//! The `process` provider: workers are `infaas worker --controller URL` child processes on
//! this machine.
//!
//! Each child gets its settings through the environment (`INFAAS_CLUSTER_TOKEN`,
//! `INFAAS_WORKER_NAME`, `INFAAS_OBJECT_STORE`, ...), so secrets do not show in the process
//! list, and listens on a free port of the loopback interface that its heartbeats advertise.
//! Removing a worker sends it SIGTERM (it finishes queued requests and exits) and SIGKILL after
//! a grace period. Children do not outlive the provider: dropping it kills them, and on Linux
//! each child also gets SIGTERM from the kernel when the thread that started it exits, which
//! covers a controller that is itself killed.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use infaas_core::HardwareKind;
use tokio::process::{Child, Command};

use crate::{ProvisionError, ProvisionedWorker, WorkerProvider};

/// What the provider needs to start workers.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessConfig {
    /// The `infaas` binary.
    pub binary: PathBuf,
    /// Base URL of the controller the workers send heartbeats to.
    pub controller_url: String,
    pub cluster_token: String,
    /// ONNX Runtime library the workers load (else they find it themselves).
    pub ort_dylib_path: Option<PathBuf>,
    /// Object store the workers read model files from (a directory or `s3://bucket/prefix`).
    pub object_store: String,
    pub s3_endpoint: Option<String>,
    pub s3_region: Option<String>,
    /// Most workers this provider runs at once.
    pub max_workers: usize,
    /// Time a worker gets to exit after SIGTERM before SIGKILL.
    pub stop_grace: Duration,
    /// Worker names are `{name_prefix}-{n}`, `n` counting from 1.
    pub name_prefix: String,
    /// Further environment of the children (`INFAAS_LOG_LEVEL`, ...).
    pub env: Vec<(String, String)>,
    /// Cores of this machine, which every worker on it shares.
    pub host_cores: usize,
    /// Cores of this machine that other workers already offer (the controller's embedded
    /// worker): a child is started only on cores nobody offers yet, since a second worker on
    /// the same cores adds no capacity, only a network hop.
    pub offered_cores: usize,
    /// Cores each child offers (`None`: all that are left).
    pub cores_per_worker: Option<usize>,
}

impl ProcessConfig {
    /// A configuration with 30 s of grace, names `worker-N`, and no extra environment.
    pub fn new(
        binary: PathBuf,
        controller_url: String,
        cluster_token: String,
        object_store: String,
        max_workers: usize,
    ) -> ProcessConfig {
        ProcessConfig {
            binary,
            controller_url,
            cluster_token,
            ort_dylib_path: None,
            object_store,
            s3_endpoint: None,
            s3_region: None,
            max_workers,
            stop_grace: Duration::from_secs(30),
            name_prefix: "worker".into(),
            env: Vec::new(),
            host_cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            offered_cores: 0,
            cores_per_worker: None,
        }
    }

    /// Cores a new child would offer, given the cores the running ones offer; an error that
    /// says why when none are left.
    pub fn cores_for_next(&self, children_cores: usize) -> Result<usize, ProvisionError> {
        let taken = self.offered_cores + children_cores;
        let left = self.host_cores.saturating_sub(taken);
        if left == 0 {
            return Err(ProvisionError::Exhausted(format!(
                "the {} cores of this machine are all offered by its workers ({} by the controller's embedded worker, {children_cores} by worker processes); another worker process on them would add no capacity (give the embedded worker fewer cores with worker_cores, or add machines with another provider)",
                self.host_cores, self.offered_cores
            )));
        }
        Ok(self.cores_per_worker.map_or(left, |c| c.clamp(1, left)))
    }

    /// The environment a child starts with (beside the controller's, which it inherits).
    fn child_env(&self, name: &str) -> Vec<(String, OsString)> {
        let mut env: Vec<(String, OsString)> = vec![
            (
                "INFAAS_CLUSTER_TOKEN".into(),
                self.cluster_token.clone().into(),
            ),
            ("INFAAS_WORKER_NAME".into(), name.into()),
            (
                "INFAAS_OBJECT_STORE".into(),
                self.object_store.clone().into(),
            ),
            // Each child needs its own port, whatever the controller was told.
            ("INFAAS_WORKER_LISTEN".into(), "127.0.0.1:0".into()),
        ];
        if let Some(p) = &self.ort_dylib_path {
            env.push(("INFAAS_ORT_DYLIB_PATH".into(), p.clone().into_os_string()));
        }
        if let Some(e) = &self.s3_endpoint {
            env.push(("INFAAS_S3_ENDPOINT".into(), e.into()));
        }
        if let Some(r) = &self.s3_region {
            env.push(("INFAAS_S3_REGION".into(), r.into()));
        }
        for (k, v) in &self.env {
            env.push((k.clone(), v.into()));
        }
        env
    }
}

struct Running {
    worker: ProvisionedWorker,
    child: Child,
    /// Cores the child offers.
    cores: usize,
}

/// See the module documentation.
pub struct ProcessProvider {
    cfg: ProcessConfig,
    children: Mutex<BTreeMap<String, Running>>,
    next: AtomicU64,
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn backend(context: String, e: impl std::error::Error + Send + Sync + 'static) -> ProvisionError {
    ProvisionError::Backend {
        context,
        source: Box::new(e),
    }
}

impl ProcessProvider {
    pub fn new(cfg: ProcessConfig) -> ProcessProvider {
        ProcessProvider {
            cfg,
            children: Mutex::new(BTreeMap::new()),
            next: AtomicU64::new(1),
        }
    }

    pub fn config(&self) -> &ProcessConfig {
        &self.cfg
    }

    /// Process id of a running worker (for logs and tests).
    pub fn pid(&self, name: &str) -> Option<u32> {
        self.children
            .lock()
            .ok()?
            .get(name)
            .and_then(|r| r.child.id())
    }

    /// Forgets children that have exited on their own; returns their names.
    fn reap(&self) -> Vec<String> {
        let Ok(mut children) = self.children.lock() else {
            return Vec::new();
        };
        let exited: Vec<String> = children
            .iter_mut()
            .filter_map(|(n, r)| (!matches!(r.child.try_wait(), Ok(None))).then(|| n.clone()))
            .collect();
        for n in &exited {
            children.remove(n);
            tracing::warn!(worker = %n, "worker process exited on its own");
        }
        exited
    }

    /// Stops every worker (SIGTERM, then SIGKILL after the grace period).
    pub async fn shutdown(&self) {
        let all: Vec<Running> = match self.children.lock() {
            Ok(mut c) => std::mem::take(&mut *c).into_values().collect(),
            Err(_) => return,
        };
        let grace = self.cfg.stop_grace;
        futures::future::join_all(all.into_iter().map(|r| stop(r.child, grace))).await;
    }
}

/// SIGTERM, wait up to `grace`, then SIGKILL; reaps the child.
async fn stop(mut child: Child, grace: Duration) {
    if let Some(pid) = child.id() {
        terminate(pid);
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        tracing::warn!(pid, "worker process ignored SIGTERM; killing it");
    }
    let _ = child.kill().await;
}

#[cfg(unix)]
fn terminate(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // SAFETY: kill(2) has no memory-safety preconditions; `pid` is a child we have not reaped,
    // so the id cannot have been reused by another process.
    unsafe {
        libc::kill(pid, libc::SIGTERM);
    }
}

#[cfg(not(unix))]
fn terminate(_pid: u32) {}

#[cfg(target_os = "linux")]
fn die_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the child between fork and exec and only calls prctl(2),
    // which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_cmd: &mut Command) {}

#[async_trait]
impl WorkerProvider for ProcessProvider {
    fn kind(&self) -> &'static str {
        "process"
    }

    async fn add(&self, hardware: HardwareKind) -> Result<ProvisionedWorker, ProvisionError> {
        if hardware == HardwareKind::Gpu {
            // A process on this machine has the machine's hardware; the controller's embedded
            // worker already covers a GPU if there is one.
            return Err(ProvisionError::Unsupported("gpu"));
        }
        self.reap();
        let (running, children_cores) = self
            .children
            .lock()
            .map(|c| (c.len(), c.values().map(|r| r.cores).sum::<usize>()))
            .unwrap_or((usize::MAX, usize::MAX));
        if running >= self.cfg.max_workers {
            return Err(ProvisionError::Exhausted(format!(
                "{running} worker processes run, the configured maximum is {}",
                self.cfg.max_workers
            )));
        }
        let cores = self.cfg.cores_for_next(children_cores)?;
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}-{n}", self.cfg.name_prefix);
        let mut cmd = Command::new(&self.cfg.binary);
        cmd.args(["worker", "--controller", &self.cfg.controller_url])
            .envs(self.cfg.child_env(&name))
            .env("INFAAS_WORKER_CORES", cores.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        die_with_parent(&mut cmd);
        let child = cmd.spawn().map_err(|e| {
            backend(
                format!("cannot start {} worker", self.cfg.binary.display()),
                e,
            )
        })?;
        let worker = ProvisionedWorker {
            name: name.clone(),
            hardware,
            started_at_ms: now_ms(),
        };
        tracing::info!(worker = %name, pid = ?child.id(), cores, "worker process started");
        if let Ok(mut c) = self.children.lock() {
            c.insert(
                name,
                Running {
                    worker: worker.clone(),
                    child,
                    cores,
                },
            );
        }
        Ok(worker)
    }

    async fn remove(&self, worker: &ProvisionedWorker) -> Result<(), ProvisionError> {
        let running = self
            .children
            .lock()
            .ok()
            .and_then(|mut c| c.remove(&worker.name))
            .ok_or_else(|| ProvisionError::Unknown(worker.name.clone()))?;
        tracing::info!(worker = %worker.name, pid = ?running.child.id(), "stopping worker process");
        stop(running.child, self.cfg.stop_grace).await;
        Ok(())
    }

    async fn list(&self) -> Result<Vec<ProvisionedWorker>, ProvisionError> {
        self.reap();
        Ok(self
            .children
            .lock()
            .map(|c| c.values().map(|r| r.worker.clone()).collect())
            .unwrap_or_default())
    }
}

impl Drop for ProcessProvider {
    fn drop(&mut self) {
        // `kill_on_drop` sends SIGKILL as each child handle drops; send SIGTERM first so the
        // ones that exit at once do so cleanly.
        if let Ok(children) = self.children.get_mut() {
            for r in children.values() {
                if let Some(pid) = r.child.id() {
                    terminate(pid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(binary: &str, max: usize) -> ProcessConfig {
        let mut c = ProcessConfig::new(
            binary.into(),
            "http://127.0.0.1:9".into(),
            "secret".into(),
            "/tmp/objects".into(),
            max,
        );
        c.stop_grace = Duration::from_secs(5);
        c.host_cores = 64;
        c.cores_per_worker = Some(1);
        c
    }

    fn alive(pid: u32) -> bool {
        // A zombie still has a /proc entry; its state is Z.
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    }

    /// A stand-in for the binary that records its environment and arguments
    /// (`worker --controller URL`), then waits for a signal.
    fn script(dir: &std::path::Path) -> PathBuf {
        let path = dir.join("fake-infaas");
        std::fs::write(
            &path,
            "#!/bin/sh\necho \"$INFAAS_WORKER_NAME $INFAAS_CLUSTER_TOKEN $INFAAS_WORKER_LISTEN $1 $2 $3\" > \"$(dirname \"$0\")/$INFAAS_WORKER_NAME.env\"\necho \"$INFAAS_WORKER_CORES\" > \"$(dirname \"$0\")/$INFAAS_WORKER_NAME.cores\"\nexec sleep 600\n",
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    #[tokio::test]
    async fn starts_named_children_up_to_the_maximum_and_stops_them() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path());
        let p = ProcessProvider::new(config(bin.to_str().unwrap(), 2));
        let a = p.add(HardwareKind::Cpu).await.unwrap();
        let b = p.add(HardwareKind::Cpu).await.unwrap();
        assert_eq!((a.name.as_str(), b.name.as_str()), ("worker-1", "worker-2"));
        assert!(matches!(
            p.add(HardwareKind::Cpu).await,
            Err(ProvisionError::Exhausted(_))
        ));
        assert!(matches!(
            p.add(HardwareKind::Gpu).await,
            Err(ProvisionError::Unsupported("gpu"))
        ));
        let mut names: Vec<String> = p
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|w| w.name)
            .collect();
        names.sort();
        assert_eq!(names, ["worker-1", "worker-2"]);
        // The child saw its name, the token, a free port and the controller URL.
        let env_file = dir.path().join("worker-1.env");
        let mut seen = String::new();
        for _ in 0..100 {
            seen = std::fs::read_to_string(&env_file).unwrap_or_default();
            if !seen.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            seen.trim(),
            "worker-1 secret 127.0.0.1:0 worker --controller http://127.0.0.1:9"
        );
        let pid = p.pid("worker-1").unwrap();
        assert!(alive(pid));
        p.remove(&a).await.unwrap();
        assert!(!alive(pid), "SIGTERM did not stop the child");
        assert!(matches!(
            p.remove(&a).await,
            Err(ProvisionError::Unknown(_))
        ));
        // Room again for one more.
        let c = p.add(HardwareKind::Cpu).await.unwrap();
        assert_eq!(c.name, "worker-3");
        let pids: Vec<u32> = ["worker-2", "worker-3"]
            .iter()
            .map(|n| p.pid(n).unwrap())
            .collect();
        drop(p);
        // Dropping the provider kills the rest.
        for pid in pids {
            let mut gone = false;
            for _ in 0..100 {
                if !alive(pid) {
                    gone = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(gone, "child {pid} outlived the provider");
        }
    }

    async fn read_when_written(path: &std::path::Path) -> String {
        for _ in 0..100 {
            let seen = std::fs::read_to_string(path).unwrap_or_default();
            if !seen.is_empty() {
                return seen.trim().to_owned();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        String::new()
    }

    #[tokio::test]
    async fn children_only_get_cores_no_other_worker_offers() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path());
        let mut cfg = config(bin.to_str().unwrap(), 8);
        // A 6-core machine whose embedded worker offers 2 cores; children take what is left.
        (cfg.host_cores, cfg.offered_cores, cfg.cores_per_worker) = (6, 2, Some(3));
        let p = ProcessProvider::new(cfg);
        let a = p.add(HardwareKind::Cpu).await.unwrap();
        let b = p.add(HardwareKind::Cpu).await.unwrap();
        let cores = |n: &str| dir.path().join(format!("{n}.cores"));
        assert_eq!(read_when_written(&cores(&a.name)).await, "3");
        assert_eq!(
            read_when_written(&cores(&b.name)).await,
            "1",
            "only 1 core was left"
        );
        // Every core is offered: a third worker would add no capacity.
        match p.add(HardwareKind::Cpu).await {
            Err(ProvisionError::Exhausted(why)) => {
                assert!(why.contains("6 cores of this machine"), "{why}");
                assert!(
                    why.contains("2 by the controller's embedded worker"),
                    "{why}"
                );
            }
            other => panic!("a worker on cores already offered: {other:?}"),
        }
        p.remove(&b).await.unwrap();
        let c = p.add(HardwareKind::Cpu).await.unwrap();
        assert_eq!(read_when_written(&cores(&c.name)).await, "1");
    }

    #[tokio::test]
    async fn on_a_machine_the_embedded_worker_covers_no_child_starts() {
        let dir = tempfile::tempdir().unwrap();
        let bin = script(dir.path());
        let mut cfg = config(bin.to_str().unwrap(), 4);
        // The default: the embedded worker offers all of the machine's cores.
        (cfg.host_cores, cfg.offered_cores, cfg.cores_per_worker) = (2, 2, None);
        let p = ProcessProvider::new(cfg);
        assert!(matches!(
            p.add(HardwareKind::Cpu).await,
            Err(ProvisionError::Exhausted(_))
        ));
        assert!(p.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_child_that_ignores_sigterm_is_killed_after_the_grace_period() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stubborn");
        std::fs::write(&path, "#!/bin/sh\ntrap '' TERM\nexec sleep 600\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cfg = config(path.to_str().unwrap(), 1);
        cfg.stop_grace = Duration::from_millis(300);
        let p = ProcessProvider::new(cfg);
        let w = p.add(HardwareKind::Cpu).await.unwrap();
        let pid = p.pid(&w.name).unwrap();
        // Let the shell install its trap.
        tokio::time::sleep(Duration::from_millis(200)).await;
        p.remove(&w).await.unwrap();
        assert!(!alive(pid));
        assert!(p.list().await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_missing_binary_is_a_backend_error() {
        let p = ProcessProvider::new(config("/nonexistent/infaas", 1));
        let err = p.add(HardwareKind::Cpu).await.unwrap_err();
        assert!(matches!(err, ProvisionError::Backend { .. }), "{err}");
        assert!(err.to_string().contains("/nonexistent/infaas"), "{err}");
        assert!(p.list().await.unwrap().is_empty());
    }
}
