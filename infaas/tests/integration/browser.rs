//! The dashboard in a real browser: headless Chromium driven over WebDriver (chromedriver)
//! signs in with an API key, registers a zoo model through the form, waits on the model's
//! page until its live-refreshed status says ready, sends a query from the application's
//! "try it" form, finds the query in the application's figures and charts, and submits an
//! offline job from the jobs page, whose progress the page follows until it has succeeded.
//! Screenshots of the application page and the jobs page are saved to
//! `$CARGO_TARGET_DIR/artifacts/dashboard.png` and `dashboard-jobs.png` (`target/artifacts/`
//! without `CARGO_TARGET_DIR`).
//!
//! `cargo nextest run -p infaas-api --test browser`. Needs `/usr/bin/chromedriver` and
//! `/usr/bin/chromium` (Debian `chromium-driver` and `chromium`, installed by
//! `scripts/test.sh`): without them the test fails. Needs ONNX Runtime like the registry
//! tests.
#![allow(clippy::unwrap_used)]

use infaas_testing::platform as registry_common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use registry_common::backends::Backends;
use registry_common::{fast_config, open_quotas, ort_library, zoo_dir, Platform};

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
const READY: Duration = Duration::from_secs(180);

/// chromedriver on a free port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    async fn start() -> Driver {
        for (path, package) in [(CHROMEDRIVER, "chromium-driver"), (CHROMIUM, "chromium")] {
            assert!(
                Path::new(path).is_file(),
                "the browser test needs {path}: install the Debian package {package} \
                 (`apt-get install -y chromium chromium-driver`; scripts/test.sh does it)"
            );
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {CHROMEDRIVER}: {e}"));
        let driver = Driver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let http = reqwest::Client::builder().no_proxy().build().unwrap();
        let start = Instant::now();
        loop {
            let status = http.get(format!("{}/status", driver.url)).send().await;
            if let Ok(resp) = status {
                let body: serde_json::Value = resp.json().await.unwrap_or_default();
                if body["value"]["ready"] == true {
                    return driver;
                }
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "chromedriver did not become ready on port {port} within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// A headless Chromium session with a fresh profile in `profile`.
    async fn browser(&self, profile: &Path) -> Client {
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--no-proxy-server",
            "--window-size=1280,1700",
        ]
        .map(String::from)
        .into_iter()
        .chain([format!("--user-data-dir={}", profile.display())])
        .collect::<Vec<_>>();
        // Both rustls providers are linked into this binary: name one for fantoccini's client.
        let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({ "binary": CHROMIUM, "args": args }),
        );
        ClientBuilder::rustls()
            .unwrap()
            .capabilities(caps)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| panic!("starting a Chromium session through chromedriver: {e}"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where the screenshot goes: `$CARGO_TARGET_DIR/artifacts`, else the workspace's
/// `target/artifacts`.
fn artifacts_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"))
        .join("artifacts")
}

/// Types `text` into the element with id `id`.
async fn type_into(c: &Client, id: &str, text: &str) {
    c.find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("no element #{id}: {e}"))
        .send_keys(text)
        .await
        .unwrap();
}

/// Clicks the element with id `id`, then waits for an element with id `then` to appear.
async fn click_then(c: &Client, id: &str, then: &str) {
    c.find(Locator::Id(id))
        .await
        .unwrap_or_else(|e| panic!("no element #{id}: {e}"))
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Id(then))
        .await
        .unwrap_or_else(|e| panic!("#{then} did not appear after clicking #{id}: {e}"));
}

/// The text of the element `css` selects. Pages refresh parts of themselves while they are
/// watched, so an element found may be replaced before it is read: find it again then.
async fn text_of(c: &Client, css: &str) -> String {
    let mut last = None;
    for _ in 0..50 {
        match c.find(Locator::Css(css)).await {
            Ok(e) => match e.text().await {
                Ok(text) => return text,
                Err(err) => last = Some(err),
            },
            Err(err) => last = Some(err),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no readable element {css}: {last:?}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn register_query_and_watch_in_chromium() {
    // Fail at once without a browser, whatever else is missing.
    let driver = Driver::start().await;
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let tenant = p.db().create_tenant("acme", open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    let profile = tempfile::tempdir().unwrap();
    let c = driver.browser(profile.path()).await;

    // Signing in: the API key goes into the form, the session into an HttpOnly cookie.
    c.goto(&format!("{}/ui/apps", p.base)).await.unwrap();
    assert_eq!(c.current_url().await.unwrap().path(), "/ui/login");
    type_into(&c, "api_key", &key.secret).await;
    click_then(&c, "login", "tenant").await;
    assert_eq!(c.current_url().await.unwrap().path(), "/ui/apps");
    assert_eq!(text_of(&c, "#tenant").await, "acme");
    // Scripts cannot read the session.
    let visible = c.execute("return document.cookie;", vec![]).await.unwrap();
    assert!(
        !visible
            .as_str()
            .unwrap_or_default()
            .contains("infaas_session"),
        "{visible}"
    );

    // Registering the zoo's logistic regression through the form.
    c.goto(&format!("{}/ui/models/new", p.base)).await.unwrap();
    let zoo = zoo_dir().canonicalize().unwrap();
    for (id, value) in [
        ("name", "digits-logreg".to_string()),
        ("app", "digits".to_string()),
        (
            "model",
            zoo.join("digits-logreg.onnx").display().to_string(),
        ),
        (
            "validation",
            zoo.join("digits-val.npz").display().to_string(),
        ),
    ] {
        type_into(&c, id, &value).await;
    }
    click_then(&c, "register", "model-status").await;
    assert_eq!(
        c.current_url().await.unwrap().path(),
        "/ui/models/digits-logreg"
    );

    // The page follows the registration by itself (live refresh) until it is ready.
    let started = Instant::now();
    let mut seen: Vec<String> = Vec::new();
    loop {
        let status = text_of(&c, "#model-status").await;
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        let page = || async { text_of(&c, "body").await };
        assert_ne!(status, "failed", "registration failed: {}", page().await);
        if status == "ready" {
            break;
        }
        assert!(
            started.elapsed() < READY,
            "the model is not ready after {READY:?}; the page shows:\n{}",
            page().await
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    println!(
        "registration seen in the page as {} ({:.1} s)",
        seen.join(" -> "),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(text_of(&c, "#model-progress").await, "100 %");
    let variants = c
        .find_all(Locator::Css("#variants tbody tr"))
        .await
        .unwrap();
    assert!(variants.len() > 1, "{} variant rows", variants.len());
    let first = variants[0].text().await.unwrap();
    assert!(first.starts_with("digits-logreg."), "{first}");

    // "Try it": the example inputs fit the model; a 1 s SLO and 0.9 accuracy.
    c.goto(&format!("{}/ui/apps/digits", p.base)).await.unwrap();
    let inputs = c
        .find(Locator::Id("inputs"))
        .await
        .unwrap()
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default();
    assert!(inputs.contains(r#""shape": [1, 64]"#), "{inputs}");
    assert_eq!(text_of(&c, "#app-requests").await, "0");
    for (id, value) in [("latency_ms", "1000"), ("min_accuracy", "0.9")] {
        c.find(Locator::Id(id))
            .await
            .unwrap()
            .send_keys(value)
            .await
            .unwrap();
    }
    c.find(Locator::Id("try"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Id("try-result"))
        .await
        .unwrap();
    let variant = text_of(&c, "#result-variant").await;
    assert!(variant.starts_with("digits-logreg."), "{variant}");
    assert!(!text_of(&c, "#result-worker").await.is_empty());
    assert!(!text_of(&c, "#result-reason").await.is_empty());
    for id in ["#result-predicted", "#result-latency"] {
        let ms = text_of(&c, id).await;
        assert!(ms.ends_with(" ms"), "{id}: {ms}");
    }
    let outputs = text_of(&c, "#result-outputs").await;
    assert!(outputs.contains("\"label\""), "{outputs}");

    // The query is in the application's figures and charts.
    c.goto(&format!("{}/ui/apps/digits", p.base)).await.unwrap();
    assert_eq!(text_of(&c, "#app-requests").await, "1");
    assert_eq!(text_of(&c, "#app-slos").await, "1000 ms");
    assert_eq!(text_of(&c, "#app-attainment").await, "100 %");
    let latency = c.find(Locator::Css("#chart-latency svg")).await.unwrap();
    // Mean, max and the SLO for the minute of the query.
    assert_eq!(
        latency.attr("data-points").await.unwrap().as_deref(),
        Some("3")
    );
    let dots = c
        .find_all(Locator::Css("#chart-throughput circle[data-value='1']"))
        .await
        .unwrap();
    assert_eq!(dots.len(), 1, "one minute with one request");
    let usage_row = text_of(&c, "#variant-usage tbody tr").await;
    assert!(usage_row.contains(&variant), "{usage_row}");
    // Put the "try it" answer back on screen for the picture.
    c.find(Locator::Id("latency_ms"))
        .await
        .unwrap()
        .send_keys("1000")
        .await
        .unwrap();
    c.find(Locator::Id("try"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.wait()
        .for_element(Locator::Id("try-result"))
        .await
        .unwrap();
    assert_eq!(text_of(&c, "#app-requests").await, "2");

    let png = c.screenshot().await.unwrap();
    assert!(png.starts_with(b"\x89PNG"), "not a PNG");
    let dir = artifacts_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("dashboard.png");
    std::fs::write(&path, &png).unwrap();
    println!("screenshot: {}", path.display());

    // An offline job from the jobs page's form, followed there until it has succeeded.
    c.goto(&format!("{}/ui/jobs", p.base)).await.unwrap();
    type_into(&c, "job-app", "digits").await;
    type_into(&c, "job-min-accuracy", "0.9").await;
    type_into(
        &c,
        "job-input",
        &zoo.join("digits-val.npz").display().to_string(),
    )
    .await;
    click_then(&c, "job-submit", "jobs").await;
    assert_eq!(c.current_url().await.unwrap().path(), "/ui/jobs");
    let started = Instant::now();
    let row = loop {
        let row = text_of(&c, "#jobs tbody tr").await;
        if row.contains("succeeded") {
            break row;
        }
        assert!(!row.contains("failed"), "the job failed: {row}");
        assert!(
            started.elapsed() < READY,
            "the job has not succeeded after {READY:?}: {row}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(row.contains("application digits"), "{row}");
    assert!(row.contains("540 / 540"), "{row}");
    let png = c.screenshot().await.unwrap();
    let path = dir.join("dashboard-jobs.png");
    std::fs::write(&path, &png).unwrap();
    println!("screenshot: {}", path.display());

    c.close().await.unwrap();
    p.stop().await;
}
