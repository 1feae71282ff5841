//! Failover of a cluster of controller replicas, each process on a network address of its own:
//! Linux network namespaces joined by veth pairs to a bridge, which the test creates (it needs
//! root and `ip` from iproute2), and nginx in front of the replicas. Postgres and S3 listen on
//! loopback; the test forwards the bridge's address to them. Under a steady load of queries
//! through nginx (to an application and a pipeline), with an offline job running: a kill -9 of the leader, a worker cut off from the
//! network and back, and a rolling restart of every replica; the job finishes with every item
//! exactly once.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use infaas_store::Db;
use infaas_testing::platform::backends::{skip_or_fail, Backends};
use infaas_testing::platform::{digit_row, open_quotas, ort_library, Registration};
use serde_json::Value;

const CLUSTER_TOKEN: &str = "failover-test-cluster-token";
const HEARTBEAT_TIMEOUT_MS: u64 = 1500;

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ip(args: &[&str]) {
    run(Command::new("ip").args(args));
}

/// A bridge in this namespace and `hosts` namespaces, each joined to it by a veth pair.
struct Net {
    bridge: String,
    /// The bridge's address (this namespace's side).
    gateway: Ipv4Addr,
    hosts: Vec<(String, String, Ipv4Addr)>,
}

impl Net {
    /// `None` (after a skip notice; a failure when `CI=true`) without root or `ip`.
    fn new(hosts: usize) -> Option<Net> {
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
        let has_ip = Command::new("ip").arg("-V").output().is_ok();
        if !root || !has_ip {
            skip_or_fail("network namespaces need root and iproute2's `ip`");
            return None;
        }
        let tag = std::process::id() % 10_000;
        let octet = 100 + (std::process::id() % 100) as u8;
        let bridge = format!("ifb{tag}");
        let gateway = Ipv4Addr::new(10, octet, 0, 1);
        let mut net = Net {
            bridge: bridge.clone(),
            gateway,
            hosts: Vec::new(),
        };
        ip(&["link", "add", &bridge, "type", "bridge"]);
        ip(&["addr", "add", &format!("{gateway}/24"), "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        for i in 0..hosts {
            let ns = format!("infaas-{tag}-{i}");
            let outside = format!("ifv{tag}x{i}");
            let inside = format!("ifv{tag}y{i}");
            let addr = Ipv4Addr::new(10, octet, 0, 10 + i as u8);
            net.hosts.push((ns.clone(), outside.clone(), addr));
            ip(&["netns", "add", &ns]);
            ip(&[
                "link", "add", &outside, "type", "veth", "peer", "name", &inside,
            ]);
            ip(&["link", "set", &inside, "netns", &ns]);
            ip(&["link", "set", &outside, "master", &bridge]);
            ip(&["link", "set", &outside, "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                &inside,
            ]);
            ip(&["-n", &ns, "link", "set", &inside, "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        Some(net)
    }

    fn addr(&self, host: usize) -> Ipv4Addr {
        self.hosts[host].2
    }

    /// A command run inside host `host`'s namespace.
    fn command(&self, host: usize, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.hosts[host].0]).arg(program);
        c
    }

    /// Drops (`false`) or restores (`true`) host `host`'s link; its processes keep running.
    fn link(&self, host: usize, up: bool) {
        ip(&[
            "link",
            "set",
            &self.hosts[host].1,
            if up { "up" } else { "down" },
        ]);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for (ns, outside, _) in &self.hosts {
            let _ = Command::new("ip").args(["link", "del", outside]).output();
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        let _ = Command::new("ip")
            .args(["link", "del", &self.bridge])
            .output();
    }
}

/// Forwards `listen` (an address on the bridge) to `target` (on loopback) until the test ends.
async fn forward(listen: Ipv4Addr, target: SocketAddr) -> u16 {
    let listener = tokio::net::TcpListener::bind((listen, 0))
        .await
        .expect("a forwarding port on the bridge");
    let port = listener.local_addr().expect("its address").port();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    port
}

/// `url` with its host and port replaced by `host:port`.
fn rehost(url: &str, host: Ipv4Addr, port: u16) -> String {
    let mut u = url::Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    u.set_host(Some(&host.to_string())).expect("a host");
    u.set_port(Some(port)).expect("a port");
    u.to_string()
}

fn host_port(url: &str) -> SocketAddr {
    let u = url::Url::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    let host = u.host_str().expect("a host");
    let host = if host == "localhost" {
        "127.0.0.1"
    } else {
        host
    };
    format!("{host}:{}", u.port_or_known_default().expect("a port"))
        .parse()
        .expect("an address")
}

/// What the processes in the namespaces are started with.
struct Setup {
    database_url: String,
    object_store: String,
    s3_endpoint: String,
    ort: PathBuf,
    dir: PathBuf,
}

struct Proc(Child);

impl Proc {
    fn signal(&self, signal: &str) {
        run(Command::new("kill").args([signal, &self.0.id().to_string()]));
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn infaas() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_infaas"))
}

/// `infaas serve` on host `host`, port 8080, its embedded worker hosting nothing.
fn replica(net: &Net, host: usize, s: &Setup) -> Proc {
    let addr = net.addr(host);
    let mut c = net.command(host, infaas());
    c.env_remove("INFAAS_CONFIG")
        .env("INFAAS_LISTEN", format!("{addr}:8080"))
        .env("INFAAS_ADVERTISE_URL", format!("http://{addr}:8080"))
        .env("INFAAS_GRPC_LISTEN", "off")
        .env(
            "INFAAS_DATA_DIR",
            s.dir.join(format!(
                "replica-{host}-{}",
                Instant::now().elapsed().as_nanos()
            )),
        )
        .env("INFAAS_DATABASE_URL", &s.database_url)
        .env("INFAAS_OBJECT_STORE", &s.object_store)
        .env("INFAAS_S3_ENDPOINT", &s.s3_endpoint)
        .env("INFAAS_CLUSTER_TOKEN", CLUSTER_TOKEN)
        .env("INFAAS_WORKER_THREAD_BUDGET", "0")
        .env(
            "INFAAS_HEARTBEAT_TIMEOUT_MS",
            HEARTBEAT_TIMEOUT_MS.to_string(),
        )
        .env("INFAAS_SHUTDOWN_GRACE_SECS", "10")
        .env("INFAAS_JOB_CHUNK_ROWS", "256")
        .env("INFAAS_JOB_LEASE_MS", "1000")
        .env("INFAAS_LOG_LEVEL", "warn")
        .arg("--ort-dylib-path")
        .arg(&s.ort)
        .arg("serve")
        .stdout(Stdio::null());
    Proc(c.spawn().expect("starting a replica"))
}

/// `infaas worker` on host `host`, reporting to `controller`.
fn worker(net: &Net, host: usize, name: &str, controller: &str, s: &Setup) -> Proc {
    let addr = net.addr(host);
    let mut c = net.command(host, infaas());
    c.env_remove("INFAAS_CONFIG")
        .env("INFAAS_OBJECT_STORE", &s.object_store)
        .env("INFAAS_S3_ENDPOINT", &s.s3_endpoint)
        .env("INFAAS_CLUSTER_TOKEN", CLUSTER_TOKEN)
        .env("INFAAS_LOG_LEVEL", "warn")
        .args(["--ort-dylib-path"])
        .arg(&s.ort)
        .args(["--worker-thread-budget", "2", "--worker-name", name])
        .args(["--worker-listen", &format!("{addr}:9000")])
        .args(["worker", "--controller", controller])
        .stdout(Stdio::null());
    Proc(c.spawn().expect("starting a worker"))
}

/// nginx on loopback in front of `upstreams`; connection failures go to the next replica.
fn nginx(dir: &Path, upstreams: &[Ipv4Addr]) -> Option<(Proc, String)> {
    let bin = ["/usr/sbin/nginx", "/usr/bin/nginx"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists());
    let Some(bin) = bin else {
        skip_or_fail("nginx is not installed (Debian's nginx-light; scripts/test.sh installs it)");
        return None;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let d = dir.join("nginx");
    std::fs::create_dir_all(&d).expect("nginx's directory");
    let servers: String = upstreams
        .iter()
        .map(|a| format!("    server {a}:8080 max_fails=0;\n"))
        .collect();
    let conf = format!(
        "worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 512; }}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n\
         fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         client_max_body_size 64m;\n  upstream replicas {{\n{servers}  }}\n\
         server {{\n    listen 127.0.0.1:{port};\n    location / {{\n      proxy_pass http://replicas;\n\
         proxy_next_upstream error timeout http_502 http_503 non_idempotent;\n      proxy_connect_timeout 1s;\n\
         proxy_read_timeout 30s;\n    }}\n  }}\n}}\n",
        d = d.display()
    );
    let file = d.join("nginx.conf");
    std::fs::write(&file, conf).expect("writing nginx.conf");
    let child = Command::new(bin)
        .arg("-c")
        .arg(&file)
        .args(["-g", "daemon off;"])
        .stdout(Stdio::null())
        .spawn()
        .expect("starting nginx");
    Some((Proc(child), format!("http://127.0.0.1:{port}")))
}

struct Client {
    http: reqwest::Client,
    token: String,
}

impl Client {
    /// Submits an offline job of `npz`'s rows to the digits application; its id.
    async fn submit_job(&self, base: &str, npz: Vec<u8>) -> String {
        let form = reqwest::multipart::Form::new()
            .part(
                "input",
                reqwest::multipart::Part::bytes(npz).file_name("digits.npz"),
            )
            .text("app", "digits");
        let r = self
            .http
            .post(format!("{base}/v1/jobs"))
            .bearer_auth(&self.token)
            .multipart(form)
            .send()
            .await
            .expect("submitting a job");
        assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
        let body: Value = r.json().await.expect("the job");
        body["id"].as_str().expect("the job's id").to_string()
    }

    /// The job's results: asserts every item in `0..items` is there exactly once.
    async fn results_exactly_once(&self, base: &str, id: &str, items: usize) {
        let r = self
            .http
            .get(format!("{base}/v1/jobs/{id}/results"))
            .bearer_auth(&self.token)
            .send()
            .await
            .expect("the job's results");
        assert_eq!(r.status(), reqwest::StatusCode::OK);
        assert_eq!(r.headers()["x-infaas-complete"], "true");
        let text = r.text().await.expect("the results");
        let mut seen = vec![0u32; items];
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).expect("a result line");
            let item = v["item"].as_u64().expect("the item") as usize;
            assert!(item < items, "item {item} of {items}");
            seen[item] += 1;
        }
        let wrong: Vec<(usize, u32)> = seen
            .iter()
            .enumerate()
            .filter(|(_, n)| **n != 1)
            .map(|(i, n)| (i, *n))
            .take(10)
            .collect();
        assert!(
            wrong.is_empty(),
            "items not written exactly once: {wrong:?}"
        );
    }

    async fn get(&self, url: &str) -> Option<Value> {
        let r = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .ok()?;
        r.json().await.ok()
    }

    /// One query (to the digits application, or to the one-node pipeline when `pipeline`);
    /// `Ok(worker id)` (empty for a pipeline) or the error.
    async fn query(&self, base: &str, pipeline: bool) -> Result<String, String> {
        let (path, input) = if pipeline {
            ("pipelines/one/infer", "image")
        } else {
            ("apps/digits/infer", "input")
        };
        let r = self
            .http
            .post(format!("{base}/v1/{path}"))
            .bearer_auth(&self.token)
            .json(&serde_json::json!({"inputs": [digit_row(input, 5)]}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let text = r.text().await.map_err(|e| e.to_string())?;
        match serde_json::from_str::<Value>(&text) {
            Ok(body) if status.is_success() => {
                Ok(body["worker"].as_str().unwrap_or_default().to_string())
            }
            _ => Err(format!(
                "{status}: {}",
                text.chars().take(300).collect::<String>()
            )),
        }
    }

    /// The live worker processes `replica` lists, by name.
    async fn workers(&self, replica: Ipv4Addr) -> Vec<String> {
        let Some(v) = self.get(&format!("http://{replica}:8080/v1/workers")).await else {
            return Vec::new();
        };
        v["workers"]
            .as_array()
            .map(|l| {
                l.iter()
                    .filter(|w| w["alive"] == true && w["address"].is_string())
                    .filter_map(|w| w["name"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Polls `check` every 100 ms until it holds; panics with `what` after `within`.
async fn eventually<F, Fut>(within: Duration, what: &str, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while !check().await {
        assert!(start.elapsed() < within, "{what} not within {within:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    start.elapsed()
}

/// One answered or failed query of the load, with when it was sent and how long it took.
#[derive(Debug, Clone)]
struct Outcome {
    sent: Instant,
    took: Duration,
    result: Result<String, String>,
}

/// Queries through `base` at `rate` per second until stopped; every outcome is kept.
fn load(
    client: Arc<Client>,
    base: String,
    rate: f64,
) -> (
    Arc<Mutex<Vec<Outcome>>>,
    tokio_util::sync::CancellationToken,
) {
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let stop = tokio_util::sync::CancellationToken::new();
    let (o, s) = (outcomes.clone(), stop.clone());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
        let mut n: u64 = 0;
        loop {
            tokio::select! {
                _ = s.cancelled() => break,
                _ = tick.tick() => {}
            }
            n += 1;
            // Every fourth query goes to the pipeline.
            let pipeline = n.is_multiple_of(4);
            let (client, base, o) = (client.clone(), base.clone(), o.clone());
            tokio::spawn(async move {
                let sent = Instant::now();
                let result = client.query(&base, pipeline).await;
                let outcome = Outcome {
                    sent,
                    took: sent.elapsed(),
                    result,
                };
                o.lock().unwrap_or_else(|e| e.into_inner()).push(outcome);
            });
        }
    });
    (outcomes, stop)
}

fn between(outcomes: &Mutex<Vec<Outcome>>, from: Instant, to: Instant) -> Vec<Outcome> {
    outcomes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .filter(|o| o.sent >= from && o.sent < to)
        .cloned()
        .collect()
}

fn errors(list: &[Outcome]) -> Vec<&String> {
    list.iter()
        .filter_map(|o| o.result.as_ref().err())
        .collect()
}

/// Three replicas behind nginx and two workers, each on a network address of its own, under
/// 20 queries/s through nginx:
/// 1. kill -9 of the leader: the queries keep being answered (errors only for those in flight
///    on the killed replica), and another replica leads within 10 s;
/// 2. a worker's link dropped: it leaves every replica's view within the liveness timeout, the
///    queries go to the other worker and none hangs; when the link returns it rejoins;
/// 3. a rolling restart of the replicas (SIGTERM, which drains, then a new process on the same
///    address): no query is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_nginx_survive_a_leader_kill_a_cut_worker_and_a_rolling_restart() {
    let Some(ort) = ort_library() else { return };
    let Some(b) = Backends::services().await else {
        return;
    };
    let Some(net) = Net::new(5) else { return };
    let s3 = b.s3_endpoint.clone().expect("the S3 endpoint");
    let pg_port = forward(net.gateway, host_port(&b.database_url)).await;
    let s3_port = forward(net.gateway, host_port(&s3)).await;
    let setup = Setup {
        database_url: rehost(&b.database_url, net.gateway, pg_port),
        object_store: b.object_store.clone(),
        s3_endpoint: rehost(&s3, net.gateway, s3_port),
        ort: ort.clone(),
        dir: b.dir.path().to_path_buf(),
    };
    let replica_hosts = [0usize, 1, 2];
    let mut replicas: Vec<Proc> = replica_hosts
        .iter()
        .map(|h| replica(&net, *h, &setup))
        .collect();
    let plain = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("a client");
    let ready = |h: usize| {
        let (plain, addr) = (plain.clone(), net.addr(h));
        async move {
            let r = plain
                .get(format!("http://{addr}:8080/readyz"))
                .send()
                .await
                .ok()?;
            r.json::<Value>().await.ok()
        }
    };
    for h in replica_hosts {
        eventually(Duration::from_secs(60), "a replica ready", || async move {
            ready(h).await.is_some_and(|v| v["status"] == "ready")
        })
        .await;
    }
    let Some((_nginx, lb)) = nginx(b.dir.path(), &replica_hosts.map(|h| net.addr(h))) else {
        return;
    };

    // A tenant, its token (through nginx), a model.
    let db = Db::connect(&b.database_url)
        .await
        .expect("the test's schema");
    let tenant = db
        .create_tenant("acme", open_quotas())
        .await
        .expect("a tenant");
    let key = generate_key();
    db.create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .expect("a key");
    let started = Instant::now();
    let token = loop {
        let r = plain
            .post(format!("{lb}/v1/auth/token"))
            .json(&serde_json::json!({ "api_key": key.secret }))
            .send()
            .await;
        if let Ok(r) = r {
            if let Ok(v) = r.json::<Value>().await {
                if let Some(t) = v["access_token"].as_str() {
                    break Some(t.to_string());
                }
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "nginx does not answer"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let client = Arc::new(Client {
        http: plain.clone(),
        token: token.expect("a token"),
    });
    let form = Registration::zoo("digits-logreg", "digits").form();
    let r = plain
        .post(format!("{lb}/v1/models"))
        .bearer_auth(&client.token)
        .multipart(form)
        .send()
        .await
        .expect("registering");
    assert_eq!(r.status(), reqwest::StatusCode::ACCEPTED);
    eventually(Duration::from_secs(180), "the model ready", || {
        let (c, lb) = (client.clone(), lb.clone());
        async move {
            c.get(&format!("{lb}/v1/models/digits-logreg"))
                .await
                .is_some_and(|m| m["status"] == "ready")
        }
    })
    .await;

    // A one-node pipeline over the application.
    let r = plain
        .post(format!("{lb}/v1/pipelines"))
        .bearer_auth(&client.token)
        .json(&serde_json::json!({
            "name": "one",
            "inputs": [{"name": "image", "datatype": "FP32", "shape": [64]}],
            "nodes": [{"name": "digits", "app": "digits", "inputs": {"input": "image"}}],
            "outputs": {"probabilities": "digits.probabilities"},
            "slo": {"latency_ms": 2000, "percentile": 99}
        }))
        .send()
        .await
        .expect("creating the pipeline");
    assert_eq!(r.status(), reqwest::StatusCode::CREATED);

    // Two workers, started against the first replica; every replica sees both.
    let first_url = format!("http://{}:8080", net.addr(0));
    let _w1 = worker(&net, 3, "w1", &first_url, &setup);
    let _w2 = worker(&net, 4, "w2", &first_url, &setup);
    for h in replica_hosts {
        let (c, addr) = (client.clone(), net.addr(h));
        eventually(
            Duration::from_secs(30),
            "both workers in every view",
            || {
                let c = c.clone();
                async move { c.workers(addr).await.len() == 2 }
            },
        )
        .await;
    }
    let (outcomes, stop) = load(client.clone(), lb.clone(), 20.0);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // An offline job, running on spare capacity through every event below.
    let (npz, items) = crate::jobs::repeated_npz(60);
    let job = client.submit_job(&lb, npz).await;
    let job_url = format!("{lb}/v1/jobs/{job}");
    eventually(Duration::from_secs(60), "the job started", || {
        let (c, url) = (client.clone(), job_url.clone());
        async move {
            c.get(&url)
                .await
                .is_some_and(|j| j["items_done"].as_i64().unwrap_or(0) > 0)
        }
    })
    .await;

    // 1. kill -9 of the leader.
    let mut leader = None;
    for h in replica_hosts {
        if ready(h).await.is_some_and(|v| v["leader"] == true) {
            leader = Some(h);
        }
    }
    let leader = leader.expect("a leader");
    let job_at_kill = client.get(&job_url).await.unwrap_or_default();
    assert_ne!(
        job_at_kill["state"], "succeeded",
        "the job finished before the leader's kill: {job_at_kill}"
    );
    replicas[leader].signal("-KILL");
    let killed = Instant::now();
    let rest: Vec<usize> = replica_hosts.into_iter().filter(|h| *h != leader).collect();
    let failover = eventually(Duration::from_secs(10), "a new leader", || {
        let rest = rest.clone();
        let ready = &ready;
        async move {
            let mut n = 0;
            for h in rest {
                n += usize::from(ready(h).await.is_some_and(|v| v["leader"] == true));
            }
            n == 1
        }
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let around_kill = between(&outcomes, killed - Duration::from_secs(1), Instant::now());
    let kill_errors = errors(&around_kill);
    assert!(
        kill_errors.len() <= 3,
        "only the queries in flight on the killed replica may fail: {kill_errors:?}"
    );

    // 2. A worker cut off: it leaves the views, queries go to the other worker.
    net.link(3, false);
    let cut = Instant::now();
    for h in &rest {
        let (c, addr) = (client.clone(), net.addr(*h));
        eventually(
            Duration::from_millis(HEARTBEAT_TIMEOUT_MS + 3000),
            "the cut worker out of the view",
            || {
                let c = c.clone();
                async move { c.workers(addr).await == ["w2"] }
            },
        )
        .await;
    }
    let left_view = cut.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let during_cut = between(&outcomes, cut, Instant::now());
    let slowest = during_cut.iter().map(|o| o.took).max().unwrap_or_default();
    let after_timeout: Vec<Outcome> = during_cut
        .iter()
        .filter(|o| o.sent > cut + Duration::from_millis(HEARTBEAT_TIMEOUT_MS + 1000))
        .cloned()
        .collect();
    if !errors(&after_timeout).is_empty() {
        for h in &rest {
            let v = client
                .get(&format!("http://{}:8080/v1/workers", net.addr(*h)))
                .await;
            eprintln!(
                "DEBUG replica {h}: {}",
                serde_json::to_string_pretty(&v).unwrap_or_default()
            );
        }
    }
    if !errors(&after_timeout).is_empty() || after_timeout.is_empty() {
        let mut views = String::new();
        for h in &rest {
            let v = client
                .get(&format!("http://{}:8080/v1/workers", net.addr(*h)))
                .await;
            views.push_str(&format!("replica {h}: {}\n", v.unwrap_or_default()));
        }
        panic!(
            "after the liveness timeout every query is answered by the other worker: {:?}\n{views}",
            errors(&after_timeout)
        );
    }
    net.link(3, true);
    let restored = Instant::now();
    for h in &rest {
        let (c, addr) = (client.clone(), net.addr(*h));
        eventually(
            Duration::from_secs(10),
            "the worker back in the view",
            || {
                let c = c.clone();
                async move { c.workers(addr).await.len() == 2 }
            },
        )
        .await;
    }
    let rejoined = restored.elapsed();

    // 3. A rolling restart: the killed leader's host first (it is down already), then each
    // other replica in turn: SIGTERM drains it, a new one starts on its address.
    let rolling = Instant::now();
    let order: Vec<usize> = std::iter::once(leader)
        .chain(rest.iter().copied())
        .collect();
    for h in order {
        if h != leader {
            replicas[h].signal("-TERM");
            let _ = replicas[h].0.wait();
        }
        replicas[h] = replica(&net, h, &setup);
        eventually(
            Duration::from_secs(60),
            "a restarted replica ready",
            || async move { ready(h).await.is_some_and(|v| v["status"] == "ready") },
        )
        .await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.cancel();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during_restart = between(&outcomes, rolling, Instant::now());
    let restart_errors = errors(&during_restart);
    assert!(
        restart_errors.is_empty(),
        "a rolling restart loses no query: {restart_errors:?}\nnginx's log:\n{}",
        std::fs::read_to_string(b.dir.path().join("nginx/error.log")).unwrap_or_default()
    );
    let job_at_end = client.get(&job_url).await.unwrap_or_default();
    eventually(Duration::from_secs(180), "the job finished", || {
        let (c, url) = (client.clone(), job_url.clone());
        async move {
            let j = c.get(&url).await.unwrap_or_default();
            assert_ne!(j["state"], "failed", "{j}");
            j["state"] == "succeeded"
        }
    })
    .await;
    client.results_exactly_once(&lb, &job, items).await;
    let all = outcomes.lock().unwrap_or_else(|e| e.into_inner()).len();
    println!(
        "{all} queries through nginx. Leader killed: a new leader after {:.1} s, {} of {} queries \
         around it failed. Worker cut: out of every view after {:.1} s, slowest query meanwhile \
         {:.1} s, back {:.1} s after its link returned. Rolling restart of 3 replicas: {} \
         queries, {} failed. Offline job of {items} items: {} done at the kill, {} when the load stopped, \
         finished with each item once.",
        failover.as_secs_f64(),
        kill_errors.len(),
        around_kill.len(),
        left_view.as_secs_f64(),
        slowest.as_secs_f64(),
        rejoined.as_secs_f64(),
        during_restart.len(),
        restart_errors.len(),
        job_at_kill["items_done"],
        job_at_end["items_done"]
    );
}
