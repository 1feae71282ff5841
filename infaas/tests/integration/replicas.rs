//! Controller replicas on one database: one leader, failover after a kill -9 and after a
//! SIGTERM, and the refusal of a second replica on the embedded SQLite default. The replicas
//! are `infaas serve` processes (a kill -9 must be a real one); the test reads the lease from
//! the database beside them.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use infaas_store::{Db, LEADER_LEASE};
use infaas_testing::platform::backends::Backends;
use infaas_testing::platform::{
    digit_row, fast_config, open_quotas, ort_library, Platform, Registration, Tenant,
};
use serde_json::Value;

/// An `infaas serve` process on `b`, listening on a port of its own.
struct Replica {
    child: Child,
    base: String,
}

impl Replica {
    fn start(b: &Backends) -> Replica {
        Replica::start_with(b, &[])
    }

    /// A replica with more flags (before `serve`); its log goes to the test's stderr.
    fn start_with(b: &Backends, flags: &[&std::ffi::OsStr]) -> Replica {
        Replica::spawn(b, flags, Stdio::inherit())
    }

    /// A replica whose stderr the test reads (it must exit soon: nothing drains the pipe).
    fn start_capturing(b: &Backends) -> Replica {
        Replica::spawn(b, &[], Stdio::piped())
    }

    fn spawn(b: &Backends, flags: &[&std::ffi::OsStr], stderr: Stdio) -> Replica {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let data = b.dir.path().join(format!("replica-{port}"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_infaas"));
        cmd.env_remove("INFAAS_CONFIG")
            .env("INFAAS_LISTEN", format!("127.0.0.1:{port}"))
            .env("INFAAS_GRPC_LISTEN", "off")
            .env("INFAAS_DATA_DIR", &data)
            .env("INFAAS_DATABASE_URL", &b.database_url)
            .env("INFAAS_OBJECT_STORE", &b.object_store)
            .env("INFAAS_LOG_LEVEL", "warn")
            .args(flags)
            .arg("serve")
            .stdout(Stdio::null())
            .stderr(stderr);
        if let Some(endpoint) = &b.s3_endpoint {
            cmd.env("INFAAS_S3_ENDPOINT", endpoint);
        }
        Replica {
            child: cmd.spawn().expect("starting infaas serve"),
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    /// `/readyz`, or `None` while the replica does not answer.
    async fn ready(&self, http: &reqwest::Client) -> Option<Value> {
        let r = http
            .get(format!("{}/readyz", self.base))
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// Sends `signal` (`-KILL`, `-TERM`) to the process.
    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {signal}");
    }

    fn id(ready: &Value) -> String {
        ready["replica"].as_str().unwrap_or_default().to_string()
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until every replica answers `/readyz`; returns their ids.
async fn all_ready(replicas: &[Replica], http: &reqwest::Client) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut ids = vec![None; replicas.len()];
    while ids.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "replicas not ready: {ids:?}");
        for (i, r) in replicas.iter().enumerate() {
            if ids[i].is_none() {
                if let Some(v) = r.ready(http).await.filter(|v| v["status"] == "ready") {
                    ids[i] = Some(Replica::id(&v));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    ids.into_iter().flatten().collect()
}

/// The replica (by index, among `alive`) that says it leads, with the lease's token, once
/// exactly one does and the database agrees.
async fn one_leader(
    replicas: &[Replica],
    alive: &[usize],
    ids: &[String],
    db: &Db,
    http: &reqwest::Client,
    within: Duration,
) -> (usize, i64) {
    let deadline = Instant::now() + within;
    loop {
        let mut leaders = Vec::new();
        for &i in alive {
            if let Some(v) = replicas[i].ready(http).await {
                if v["leader"] == true {
                    leaders.push(i);
                }
            }
        }
        let lease = db.lease(LEADER_LEASE).await.expect("reading the lease");
        if let ([i], Some(l)) = (leaders.as_slice(), &lease) {
            if l.held_by(&ids[*i]) {
                return (*i, l.token);
            }
        }
        assert!(
            Instant::now() < deadline,
            "no single leader within {within:?}: leaders {leaders:?}, lease {lease:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Three replicas on Postgres and S3 elect one leader; a kill -9 of the leader hands the
/// lease to another replica within 10 s with a higher token; a SIGTERM of the next leader
/// hands it over at once (it releases the lease); the survivors keep answering throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_elect_one_leader_and_fail_over() {
    let Some(b) = Backends::services().await else {
        return;
    };
    let db = Db::connect(&b.database_url)
        .await
        .expect("the test's schema");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("a client");
    let mut replicas: Vec<Replica> = (0..3).map(|_| Replica::start(&b)).collect();
    let ids = all_ready(&replicas, &http).await;
    let (first, token) = one_leader(
        &replicas,
        &[0, 1, 2],
        &ids,
        &db,
        &http,
        Duration::from_secs(10),
    )
    .await;

    // kill -9: no release; the lease lapses and another replica takes it.
    replicas[first].signal("-KILL");
    let killed_at = Instant::now();
    let rest: Vec<usize> = (0..3).filter(|i| *i != first).collect();
    let (second, token2) =
        one_leader(&replicas, &rest, &ids, &db, &http, Duration::from_secs(10)).await;
    let failover = killed_at.elapsed();
    assert!(
        token2 > token,
        "the new leader's token {token2} is above {token}"
    );
    assert!(
        failover < Duration::from_secs(10),
        "failover took {failover:?}"
    );
    for &i in &rest {
        assert!(
            replicas[i].ready(&http).await.is_some(),
            "{} stopped answering",
            replicas[i].base
        );
    }

    // SIGTERM: the leader drains and releases the lease; the last replica leads at once.
    replicas[second].signal("-TERM");
    let termed_at = Instant::now();
    let last: Vec<usize> = rest.iter().copied().filter(|i| *i != second).collect();
    let (third, token3) =
        one_leader(&replicas, &last, &ids, &db, &http, Duration::from_secs(5)).await;
    let handover = termed_at.elapsed();
    assert!(token3 > token2);
    assert!(
        handover < Duration::from_secs(4),
        "a stopping leader hands over within a renewal or two, not a lease period: {handover:?}"
    );
    let exit = replicas[second]
        .child
        .wait()
        .expect("the stopped replica's status");
    assert!(exit.success(), "SIGTERM drains and exits 0: {exit:?}");
    println!(
        "leader {} (token {token}) killed: {} leads after {:.1} s (token {token2}); \
         it stopped by SIGTERM: {} leads after {:.1} s (token {token3})",
        ids[first],
        ids[second],
        failover.as_secs_f64(),
        ids[third],
        handover.as_secs_f64()
    );
    replicas.clear();
}

/// The embedded default (SQLite and a local directory) holds one replica: a second `serve`
/// on the same files exits with a message naming the way to run several.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replica_on_sqlite_is_refused() {
    let b = Backends::embedded();
    let http = reqwest::Client::new();
    let first = Replica::start(&b);
    all_ready(std::slice::from_ref(&first), &http).await;
    let second = Replica::start_capturing(&b);
    let out = tokio::task::spawn_blocking(move || {
        let mut second = second;
        let child = std::mem::replace(
            &mut second.child,
            Command::new("true").spawn().expect("a placeholder process"),
        );
        child.wait_with_output()
    })
    .await
    .expect("joined")
    .expect("the second replica's output");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the second replica ran: {stderr}");
    assert!(
        stderr.contains("SQLite") && stderr.contains("postgres://"),
        "the refusal names the problem and the way out: {stderr}"
    );
    // The first replica still serves.
    let v = first.ready(&http).await.expect("the first replica answers");
    assert_eq!(v["status"], "ready");
    assert_eq!(v["leader"], true);
}

/// Live workers with an address (worker processes) that `p` lists, by name.
async fn process_workers(p: &Platform, t: &Tenant) -> Vec<Value> {
    let w = p.get(t, "/v1/workers").await;
    assert_eq!(w.status, reqwest::StatusCode::OK, "{}", w.text);
    w.body["workers"]
        .as_array()
        .expect("a list of workers")
        .iter()
        .filter(|w| w["alive"] == true && w["address"].is_string())
        .cloned()
        .collect()
}

/// Two in-process replicas on `b` whose embedded workers have `first_threads` and
/// `second_threads` intra-op threads (a 1.5-s liveness timeout), a tenant, and the digits model
/// registered through the first and ready.
async fn two_replicas(
    b: &Backends,
    ort: &std::path::Path,
    first_threads: usize,
    second_threads: usize,
) -> (Platform, Platform, Tenant) {
    let config = |dir: &str, threads: usize| {
        let mut c = fast_config(b, ort);
        c.worker_thread_budget = Some(threads);
        c.heartbeat_timeout_ms = 1500;
        c.data_dir = b.dir.path().join(dir);
        c
    };
    let first = Platform::start(config("first", first_threads)).await;
    let second = Platform::start(config("second", second_threads)).await;
    let t = first.tenant("acme", open_quotas()).await;
    first
        .register_ok(&t, &Registration::zoo("digits-logreg", "digits"))
        .await;
    first
        .wait_ready(&t, "digits-logreg", Duration::from_secs(120))
        .await;
    (first, second, t)
}

/// A query for the digits application through `p`: the id of the worker that answered it.
async fn query(p: &Platform, t: &Tenant) -> String {
    let a = p
        .send(
            p.http
                .post(format!("{}/v1/apps/digits/infer", p.base))
                .bearer_auth(&t.token)
                .json(&serde_json::json!({"inputs": [digit_row("input", 3)]})),
        )
        .await;
    assert_eq!(a.status, reqwest::StatusCode::OK, "{}", a.text);
    a.body["worker"].as_str().expect("the worker").to_string()
}

/// Two replicas on Postgres and S3 whose embedded workers host nothing, and one worker
/// process started against the first: the worker learns the second replica from the first's
/// heartbeat answers and reports to both, so a query through either runs on it; when the first
/// replica stops, the second keeps serving on the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_against_one_replica_serves_queries_through_another() {
    let Some(ort) = ort_library() else { return };
    let Some(b) = Backends::services().await else {
        return;
    };
    let (first, second, t) = two_replicas(&b, &ort, 0, 0).await;

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infaas"));
    cmd.args(["--object-store", &b.object_store, "--log-level", "warn"])
        .arg("--ort-dylib-path")
        .arg(&ort)
        .args([
            "--worker-thread-budget",
            "2",
            "--worker-name",
            "shared-worker",
        ])
        .args(["worker", "--controller", &first.base])
        .env("INFAAS_CLUSTER_TOKEN", &first.server.state.cluster_token)
        .stdout(Stdio::null());
    if let Some(endpoint) = &b.s3_endpoint {
        cmd.args(["--s3-endpoint", endpoint]);
    }
    let mut worker = cmd.spawn().expect("starting a worker process");
    struct Reap<'a>(&'a mut Child);
    impl Drop for Reap<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _reap = Reap(&mut worker);

    // The second replica learns of the worker from the worker itself.
    let start = Instant::now();
    let id = loop {
        let seen = process_workers(&second, &t).await;
        if let Some(w) = seen.iter().find(|w| w["name"] == "shared-worker") {
            break w["id"].as_str().expect("the worker's id").to_string();
        }
        let names: Vec<&Value> = seen.iter().map(|w| &w["name"]).collect();
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the second replica never saw the worker started against the first: {names:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    println!(
        "the second replica saw the worker after {:.1} s",
        start.elapsed().as_secs_f64()
    );
    assert_eq!(query(&second, &t).await, id);
    assert_eq!(query(&first, &t).await, id);

    // The first replica stops: the worker goes on reporting to the second, which serves.
    first.stop().await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let alive: Vec<Value> = process_workers(&second, &t).await;
    assert!(
        alive.iter().any(|w| w["name"] == "shared-worker"),
        "the worker left the second replica's view when the first stopped: {alive:?}"
    );
    for _ in 0..5 {
        assert_eq!(query(&second, &t).await, id);
    }
    second.stop().await;
}

/// A registration whose replica is killed mid-way is finished by another replica: the first
/// holds the registration's claim while it profiles; after a kill -9 the claim lapses and the
/// second takes it over, profiling only what was left, each variant once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_whose_replica_dies_is_finished_by_another() {
    let Some(ort) = ort_library() else { return };
    let Some(b) = Backends::services().await else {
        return;
    };
    let survivor = Platform::start(infaas_control::config::Config {
        data_dir: b.dir.path().join("survivor"),
        ..fast_config(&b, &ort)
    })
    .await;
    let t = survivor.tenant("acme", open_quotas()).await;
    // The first replica profiles slowly, so it dies with the registration half done.
    let doomed = Replica::start_with(
        &b,
        &[
            "--ort-dylib-path".as_ref(),
            ort.as_os_str(),
            "--profile-runs".as_ref(),
            "200".as_ref(),
            "--profile-max-ms-per-batch".as_ref(),
            "300".as_ref(),
        ],
    );
    let http = reqwest::Client::new();
    all_ready(std::slice::from_ref(&doomed), &http).await;
    let name = "digits-mlp-l";
    let form = Registration::zoo(name, "digits").form();
    let r = http
        .post(format!("{}/v1/models", doomed.base))
        .bearer_auth(&t.token)
        .multipart(form)
        .send()
        .await
        .expect("registering through the first replica");
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    let id = survivor
        .db()
        .get_model(&t.id, name)
        .await
        .expect("the model")
        .id;
    let claim = format!("registration:{id}");

    // The first replica claims it and profiles some variants; then it is killed.
    let start = Instant::now();
    let first_holder = loop {
        let m = survivor.model(&t, name).await;
        let profiled = m["variants"]
            .as_array()
            .is_some_and(|v| v.iter().any(|v| v["status"] == "profiled"));
        let lease = survivor.db().lease(&claim).await.expect("the claim");
        if let (true, Some(l)) = (profiled, lease) {
            break l.holder;
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the first replica never got to profiling: {m}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_ne!(first_holder, survivor.server.state.leadership.replica());
    doomed.signal("-KILL");
    let killed_at = Instant::now();

    let m = survivor
        .wait_ready(&t, name, Duration::from_secs(240))
        .await;
    let names: Vec<&str> = m["variants"]
        .as_array()
        .expect("variants")
        .iter()
        .chain(m["pruned"].as_array().expect("pruned").iter())
        .filter_map(|v| v["name"].as_str())
        .collect();
    let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
    assert_eq!(
        names.len(),
        unique.len(),
        "a variant stored twice: {names:?}"
    );
    assert_eq!(
        unique.len(),
        42,
        "3 files x 2 thread counts x 7 batch sizes: {names:?}"
    );
    // The claim goes right after the model is marked ready.
    let start = Instant::now();
    while survivor
        .db()
        .lease(&claim)
        .await
        .expect("the claim")
        .is_some()
    {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "the finished registration's claim is not dropped"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!(
        "the registration was finished by the surviving replica {:.1} s after the kill",
        killed_at.elapsed().as_secs_f64()
    );
    drop(doomed);
    survivor.stop().await;
}

/// An offline job submitted through a replica that is killed -9 mid-job is finished by
/// another replica, every item exactly once: job chunks are claimed durably (a lease per
/// chunk), so the job runner runs on every replica without a leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_replica_dies_is_finished_by_another_each_item_once() {
    let Some(ort) = ort_library() else { return };
    let Some(b) = Backends::services().await else {
        return;
    };
    let survivor = Platform::start(infaas_control::config::Config {
        data_dir: b.dir.path().join("survivor"),
        job_chunk_rows: 64,
        job_lease_ms: 1000,
        ..fast_config(&b, &ort)
    })
    .await;
    let t = survivor.tenant("acme", open_quotas()).await;
    survivor
        .register_ok(&t, &Registration::zoo("digits-logreg", "digits"))
        .await;
    survivor
        .wait_ready(&t, "digits-logreg", Duration::from_secs(120))
        .await;
    let doomed = Replica::start_with(
        &b,
        &[
            "--ort-dylib-path".as_ref(),
            ort.as_os_str(),
            "--job-chunk-rows".as_ref(),
            "64".as_ref(),
            "--job-lease-ms".as_ref(),
            "1000".as_ref(),
        ],
    );
    let http = reqwest::Client::new();
    all_ready(std::slice::from_ref(&doomed), &http).await;
    let (bytes, items) = crate::jobs::repeated_npz(40);
    let form = reqwest::multipart::Form::new()
        .part(
            "input",
            reqwest::multipart::Part::bytes(bytes).file_name("digits.npz"),
        )
        .text("app", "digits");
    let r = http
        .post(format!("{}/v1/jobs", doomed.base))
        .bearer_auth(&t.token)
        .multipart(form)
        .send()
        .await
        .expect("submitting through the first replica");
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    let body: Value = r.json().await.expect("the job");
    let id = body["id"].as_str().expect("the job's id").to_string();
    let at_kill = crate::jobs::wait_job(&survivor, &t, &id, Duration::from_secs(60), |j| {
        j["items_done"].as_i64().unwrap_or(0) > 0
    })
    .await;
    doomed.signal("-KILL");
    let done_at_kill = at_kill["items_done"].as_i64().unwrap_or(0);
    assert!(
        done_at_kill < items as i64,
        "the job finished before the kill"
    );
    let done = crate::jobs::wait_job(&survivor, &t, &id, Duration::from_secs(180), |j| {
        assert_ne!(j["state"], "failed", "{j}");
        j["state"] == "succeeded"
    })
    .await;
    assert_eq!(done["items_done"], items);
    crate::jobs::results_exactly_once(&survivor, &t, &id, items).await;
    println!("killed a replica at {done_at_kill} of {items} items; the other finished the job, each item once");
    drop(doomed);
    survivor.stop().await;
}

/// Arrivals in `p`'s recorded traffic of the digits application over the last minutes.
async fn recorded_arrivals(p: &Platform, t: &Tenant) -> usize {
    let r = p.get(t, "/v1/traces/recorded?app=digits&minutes=10").await;
    assert_eq!(r.status, reqwest::StatusCode::OK, "{}", r.text);
    // A header line, then one line per arrival.
    r.text.lines().skip(1).filter(|l| !l.is_empty()).count()
}

/// Two replicas on Postgres and S3, the first's embedded worker hosting nothing, the second's
/// hosting: the first lists the second's embedded worker at the second's address and serves
/// its queries there; queries through either count once in both replicas' recorded traffic
/// (the arrival exchange), so the leader plans for all of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embedded_workers_and_arrivals_are_shared_by_the_replicas() {
    let Some(ort) = ort_library() else { return };
    let Some(b) = Backends::services().await else {
        return;
    };
    let (first, second, t) = two_replicas(&b, &ort, 0, 2).await;

    // The first replica learns of the second's embedded worker from its heartbeats.
    let address = format!("{}/worker", second.base);
    let start = Instant::now();
    let id = loop {
        let seen = process_workers(&first, &t).await;
        if let Some(w) = seen.iter().find(|w| w["address"] == address.as_str()) {
            assert!(
                w["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("embedded-")),
                "{w}"
            );
            break w["id"].as_str().expect("the worker's id").to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first replica never saw the second's embedded worker: {seen:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    // Neither replica lists its own embedded worker twice, nor the first's (it hosts nothing).
    let listed = second.get(&t, "/v1/workers").await;
    let ids: Vec<&str> = listed.body["workers"]
        .as_array()
        .expect("workers")
        .iter()
        .filter_map(|w| w["id"].as_str())
        .collect();
    assert_eq!(
        ids.iter().filter(|i| **i == id).count(),
        1,
        "the second lists its own embedded worker once: {ids:?}"
    );
    assert_eq!(process_workers(&second, &t).await.len(), 0, "{ids:?}");

    // Queries through the first run on the second's embedded worker.
    for _ in 0..3 {
        assert_eq!(query(&first, &t).await, id);
    }
    // And queries through the second (on its own embedded worker).
    for _ in 0..17 {
        assert_eq!(query(&second, &t).await, id);
    }
    let sent = 20;
    let start = Instant::now();
    loop {
        let (a, b) = (
            recorded_arrivals(&first, &t).await,
            recorded_arrivals(&second, &t).await,
        );
        if a == sent && b == sent {
            break;
        }
        assert!(
            a <= sent && b <= sent,
            "an arrival counted twice: first {a}, second {b} of {sent}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the replicas' recorded traffic does not add up to the {sent} queries: first {a}, second {b}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    println!(
        "both replicas recorded all {sent} queries {:.1} s after the last",
        start.elapsed().as_secs_f64()
    );
    // Still exactly once a few exchange periods later.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(recorded_arrivals(&first, &t).await, sent);
    assert_eq!(recorded_arrivals(&second, &t).await, sent);
    second.stop().await;
    first.stop().await;
}
