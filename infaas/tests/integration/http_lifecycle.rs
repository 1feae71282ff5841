//! The server's life: graceful shutdown of an in-process server, and the `infaas` binary
//! (`admin` commands, `serve` until SIGTERM).
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use infaas_testing::server as common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use infaas_control::tenancy::hash_key;
use infaas_core::Role;
use infaas_store::Db;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::backends::Backends;
use common::TestServer;

/// Reads from `conn` until the end of a response head.
async fn read_head(conn: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), conn.read(&mut byte))
            .await
            .expect("a response head within 10 s")
            .unwrap();
        assert_eq!(
            n,
            1,
            "connection closed after {:?}",
            String::from_utf8_lossy(&head)
        );
        head.push(byte[0]);
    }
    String::from_utf8(head).unwrap()
}

async fn refuses_connections(addr: SocketAddr, within: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < within {
        if TcpStream::connect(addr).await.is_err() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_finishes_in_flight_requests_then_closes_the_port() {
    let b = Backends::embedded();
    let s = TestServer::start(&b).await;
    let t = s.tenant("acme").await;
    let addr = s.server.addr;
    let body = format!(r#"{{"api_key":"{}"}}"#, t.admin_key);

    // Requests whose handlers are running and waiting for their bodies: `100 Continue` is
    // sent only once the handler starts reading the body.
    let mut in_flight = Vec::new();
    for _ in 0..4 {
        let mut conn = TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /v1/auth/token HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nExpect: 100-continue\r\n\r\n",
            body.len()
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let interim = read_head(&mut conn).await;
        assert!(interim.starts_with("HTTP/1.1 100"), "{interim}");
        in_flight.push(conn);
    }

    let server = s.server;
    let stopping = tokio::spawn(server.stop(Duration::from_secs(20)));
    // New connections are refused at once, while the four requests are still open.
    assert!(
        refuses_connections(addr, Duration::from_secs(5)).await,
        "the port still accepts connections after stop()"
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !stopping.is_finished(),
        "stop() returned with requests in flight"
    );

    for mut conn in in_flight {
        conn.write_all(body.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), conn.read_to_end(&mut answer))
            .await
            .expect("the answer within 10 s")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(answer.contains("access_token"), "{answer}");
    }
    tokio::time::timeout(Duration::from_secs(10), stopping)
        .await
        .expect("stop() returns once the requests are done")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the port is open after stop()"
    );
}

/// The `infaas` binary with `INFAAS_*` variables of the caller's environment removed, so
/// only the flags given here configure it.
fn infaas(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_infaas"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("INFAAS_") {
            cmd.env_remove(&name);
        }
    }
    cmd.env("RUST_LOG", "info").env("NO_COLOR", "1").args(args);
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_commands_create_and_list_tenants() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_str().unwrap();

    let out = infaas(&["--data-dir", data, "admin", "create-tenant", "acme"])
        .output()
        .unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "create-tenant failed: {stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "stdout is the key alone: {stdout:?}");
    let key = lines[0];
    assert!(key.starts_with("infaas_") && key.len() > 30, "{key}");
    assert!(!stderr.contains(key), "the key is printed on stdout only");

    // The key is the tenant's admin key in the database the command used.
    let db = Db::connect(&format!("sqlite://{data}/infaas.db"))
        .await
        .unwrap();
    let stored = db
        .find_active_api_key(&hash_key(key))
        .await
        .unwrap()
        .expect("the printed key is stored");
    assert_eq!(stored.role, Role::Admin);
    assert_eq!(db.get_tenant(&stored.tenant_id).await.unwrap().name, "acme");
    db.close().await;

    let again = infaas(&["--data-dir", data, "admin", "create-tenant", "acme"])
        .output()
        .unwrap();
    assert!(!again.status.success());
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("already exists"), "{stderr}");
    assert!(again.stdout.is_empty(), "no key for a failed create");

    let list = infaas(&["--data-dir", data, "admin", "list-tenants"])
        .output()
        .unwrap();
    assert!(list.status.success());
    let table = String::from_utf8(list.stdout).unwrap();
    assert_eq!(
        table.lines().filter(|l| l.starts_with("acme ")).count(),
        1,
        "{table}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_runs_until_sigterm_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = infaas(&[
        "--data-dir",
        dir.path().to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--grpc-listen",
        "127.0.0.1:0",
        "serve",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Stderr is drained on a thread so the server never blocks on a full pipe.
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut log = Vec::new();
    let mut logged = |marker: &str| -> SocketAddr {
        loop {
            let line = match rx.recv_timeout(Duration::from_secs(60)) {
                Ok(line) => line,
                Err(e) => {
                    let _ = child.kill();
                    panic!("no '{marker}' line ({e}); log so far:\n{}", log.join("\n"));
                }
            };
            let found = line.split(marker).nth(1).map(|rest| {
                rest.split(|c: char| c.is_whitespace() || c == '\u{1b}')
                    .next()
                    .unwrap_or_default()
                    .parse()
            });
            log.push(line);
            if let Some(parsed) = found {
                break parsed.unwrap_or_else(|e| panic!("an address after '{marker}': {e}"));
            }
        }
    };
    let addr = logged("listening on http://");
    assert_ne!(addr.port(), 0, "the real port is logged");
    // The gRPC service's address is logged next.
    let grpc_addr = logged("gRPC listening on ");
    assert_ne!(grpc_addr.port(), 0, "the real gRPC port is logged");
    let mut grpc = infaas_api::grpc::Client::connect(format!("http://{grpc_addr}"))
        .await
        .unwrap();
    let live = grpc
        .server_live(infaas_api::grpc::pb::ServerLiveRequest {})
        .await
        .unwrap();
    assert!(live.get_ref().live);
    drop(grpc);

    let resp = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);

    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            panic!("still running 30 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    log.extend(rx.try_iter());
    let log = log.join("\n");
    assert_eq!(status.code(), Some(0), "exit status {status}; log:\n{log}");
    assert!(
        log.lines().any(|l| l.contains("stopped")),
        "no 'stopped' line:\n{log}"
    );
    assert!(
        TcpStream::connect(addr).await.is_err(),
        "the port is open after exit"
    );
    assert!(
        TcpStream::connect(grpc_addr).await.is_err(),
        "the gRPC port is open after exit"
    );
}
