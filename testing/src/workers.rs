//! `infaas worker` processes for tests that need workers outside the controller.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::platform::Platform;

/// A worker process, killed and reaped when dropped (also when a test fails).
pub struct WorkerProcess(Child);

impl WorkerProcess {
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A worker process of the `infaas` binary at `bin` (a test has it as
/// `env!("CARGO_BIN_EXE_infaas")`), started with the controller's cluster token and reading
/// model files from `objects`; its instances may reserve `thread_budget` threads.
pub fn spawn_worker(
    bin: &Path,
    p: &Platform,
    ort: &Path,
    objects: &str,
    thread_budget: usize,
) -> WorkerProcess {
    let child = Command::new(bin)
        .args(["--object-store", objects, "--log-level", "warn"])
        .arg("--worker-thread-budget")
        .arg(thread_budget.to_string())
        .arg("--ort-dylib-path")
        .arg(ort)
        .args(["worker", "--controller", &p.base])
        .env("INFAAS_CLUSTER_TOKEN", &p.server.state.cluster_token)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("starting a worker process: {e}"));
    WorkerProcess(child)
}
