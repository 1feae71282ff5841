//! Pipelines on the dashboard over plain HTTP (no browser), against real zoo models: the
//! registration form (a refused document shows the server's reason with the API's status and
//! stores nothing; an accepted one redirects to the pipeline's page), the page's SVG graph
//! with every node, its served variant and the edges (the switch dashed and labelled), the
//! SLO attainment chart after queries, the cost per second the controller samples and its
//! chart, tenant isolation and deletion through the form.
//!
//! `cargo nextest run -p infaas --test integration dashboard_pipelines`. Needs ONNX Runtime.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use infaas_control::tenancy::generate_key;
use infaas_core::Role;
use infaas_testing::platform::{
    backends::Backends, fast_config, open_quotas, ort_library, zoo_arrays, Platform, Registration,
    Tenant,
};
use reqwest::header::LOCATION;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::dashboard_jobs::{unescape, Browser};

const READY: Duration = Duration::from_secs(180);

/// A tenant with an admin key: the API's token, and the key's secret (for signing in).
async fn tenant_with_key(p: &Platform, name: &str) -> (Tenant, String) {
    let tenant = p.db().create_tenant(name, open_quotas()).await.unwrap();
    let key = generate_key();
    p.db()
        .create_api_key(&tenant.id, "admin", Role::Admin, &key.prefix, &key.hash)
        .await
        .unwrap();
    let a = p
        .send(
            p.http
                .post(format!("{}/v1/auth/token", p.base))
                .json(&json!({ "api_key": key.secret })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.text);
    let t = Tenant {
        id: tenant.id,
        name: name.into(),
        token: a.body["access_token"].as_str().unwrap().to_string(),
    };
    (t, key.secret)
}

/// Rows `from..from + rows` of the validation set as a JSON tensor named `image`.
fn images(from: usize, rows: usize) -> Value {
    let arrays = zoo_arrays("digits-val.npz");
    let x = arrays.iter().find(|t| t.name == "x").unwrap();
    let x = x.slice_batch(from, from + rows);
    let data: Vec<f64> = (0..x.data.len())
        .filter_map(|k| x.data.get_f64(k))
        .collect();
    json!({"name": "image", "shape": [rows, 64], "datatype": "FP32", "data": data})
}

/// The linear model answers every row; the MLP re-answers the rows it is unsure of.
const CASCADE: &str = r#"name: cascade
description: linear model, MLP when unsure
inputs:
  - {name: image, datatype: FP32, shape: [64]}
nodes:
  - {name: cheap, app: linear, inputs: {input: image}}
  - name: expert
    model: digits-mlp-s
    inputs: {input: image}
    when: {source: cheap.probabilities, top_probability_below: 0.9}
  - {name: answer, combine: first, from: [expert.probabilities, cheap.probabilities]}
outputs:
  probabilities: answer.output
slo:
  latency_ms: 5000
"#;

/// The part of `html` from `start` to the first `end` after it.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    let from = html
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {html}"));
    let rest = &html[from..];
    &rest[..rest.find(end).map_or(rest.len(), |e| e + end.len())]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelines_are_registered_drawn_and_deleted_from_the_dashboard() {
    let Some(ort) = ort_library() else { return };
    let b = Backends::embedded();
    let p = Platform::start(fast_config(&b, &ort)).await;
    let (t, key) = tenant_with_key(&p, "acme").await;
    for (model, app) in [("digits-logreg", "linear"), ("digits-mlp-s", "small")] {
        p.register_ok(&t, &Registration::zoo(model, app)).await;
    }
    for model in ["digits-logreg", "digits-mlp-s"] {
        p.wait_ready(&t, model, READY).await;
    }
    let browser = Browser::sign_in(&p.base, &key).await;
    let stored = || async {
        let a = p.get(&t, "/v1/pipelines").await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        a.body["pipelines"].as_array().unwrap().len()
    };

    // The list: empty, the form with an example over the tenant's applications, the entry
    // highlighted in the navigation.
    let (status, html) = browser.get("/ui/pipelines").await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains("No pipeline yet."), "{html}");
    assert!(html.contains(r#"<a href="/ui/pipelines" class="active">Pipelines</a>"#));
    assert!(html.contains(r#"id="pipeline-form""#));
    let example = unescape(between(&html, "placeholder=\"", "\">"));
    assert!(example.contains("app: linear"), "{example}");

    // A form without this session's token is refused.
    let resp = browser
        .post_fields("/ui/pipelines", &[("csrf", "00ff"), ("document", CASCADE)])
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(stored().await, 0);

    // Refused documents: the server's reason on the form (naming the node and the tensor),
    // the API's status, the document kept, nothing stored.
    let cases = [
        (
            CASCADE.replace("shape: [64]", "shape: [32]"),
            StatusCode::BAD_REQUEST,
            vec!["node 'cheap'", "input", "[-1, 32]"],
        ),
        (
            CASCADE.replace("model: digits-mlp-s", "model: digits-missing"),
            StatusCode::NOT_FOUND,
            vec!["node 'expert'", "digits-missing"],
        ),
        (
            CASCADE.replace("source: cheap.probabilities", "source: cheap.scores"),
            StatusCode::BAD_REQUEST,
            vec!["node 'expert'", "'cheap.scores'"],
        ),
        (
            CASCADE.replace("name: cascade", "name: linear"),
            StatusCode::CONFLICT,
            vec!["'linear'", "application or model"],
        ),
        (
            "   ".to_string(),
            StatusCode::BAD_REQUEST,
            vec!["paste a pipeline document"],
        ),
    ];
    for (document, want, words) in cases {
        let resp = browser
            .post_fields(
                "/ui/pipelines",
                &[
                    ("csrf", browser.csrf.as_str()),
                    ("document", document.as_str()),
                ],
            )
            .await;
        assert_eq!(resp.status(), want, "{document}");
        let html = resp.text().await.unwrap();
        let error = unescape(between(&html, r#"id="pipeline-error">"#, "</p>"));
        for w in words {
            assert!(error.contains(w), "'{w}' not in '{error}'");
        }
        let kept = unescape(between(&html, r#"name="document""#, "</textarea>"));
        assert!(kept.contains(document.trim()), "{kept}");
    }
    assert_eq!(stored().await, 0);

    // Accepted (YAML): to the pipeline's page.
    let resp = browser
        .post_fields(
            "/ui/pipelines",
            &[("csrf", browser.csrf.as_str()), ("document", CASCADE)],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[LOCATION], "/ui/pipelines/cascade");
    assert_eq!(stored().await, 1);

    // A few queries; the variant each model node last served.
    let mut served: BTreeMap<String, String> = BTreeMap::new();
    for q in 0..3 {
        let a = p
            .send(
                p.http
                    .post(format!("{}/v1/pipelines/cascade/infer", p.base))
                    .bearer_auth(&t.token)
                    .json(&json!({"inputs": [images(q * 100, 100)]})),
            )
            .await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        for n in a.body["nodes"].as_array().unwrap() {
            if let (Some(v), true) = (n["variant"].as_str(), n["rows"].as_u64().unwrap_or(0) > 0) {
                served.insert(n["node"].as_str().unwrap().to_string(), v.to_string());
            }
        }
    }
    assert!(
        served.contains_key("cheap") && served.contains_key("expert"),
        "both model nodes ran: {served:?}"
    );

    // The page: the graph with every node, its served variant and the edges, the switch
    // dashed and labelled; the node table; the attainment chart.
    let (status, html) = browser.get("/ui/pipelines/cascade").await;
    assert_eq!(status, StatusCode::OK, "{html}");
    let svg = between(&html, r#"<svg class="pipeline-graph""#, "</svg>");
    for node in ["cheap", "expert", "answer"] {
        assert!(
            svg.contains(&format!(r#"data-node="{node}""#)),
            "{node}: {svg}"
        );
        assert!(svg.contains(&format!(">{node}</text>")), "{node}: {svg}");
    }
    for (node, variant) in &served {
        let drawn = between(svg, &format!(r#"data-node="{node}""#), "</g>");
        assert!(
            drawn.contains(variant.as_str()),
            "{node} {variant}: {drawn}"
        );
        assert!(drawn.contains("(served)"), "{drawn}");
        assert!(
            html.contains(&format!("<td>{variant}</td>")),
            "table: {variant}"
        );
    }
    assert!(svg.contains(">app linear</text>") && svg.contains(">model digits-mlp-s</text>"));
    let switch = between(
        svg,
        r#"<path class="edge switch" data-from="cheap" data-to="expert""#,
        "</path>",
    );
    assert!(switch.contains("stroke-dasharray"), "{switch}");
    assert!(switch.contains("marker-end"), "{switch}");
    for (from, to) in [("expert", "answer"), ("cheap", "answer")] {
        assert!(
            svg.contains(&format!(
                r#"<path class="edge" data-from="{from}" data-to="{to}""#
            )),
            "{from} -> {to}: {svg}"
        );
    }
    let label = between(
        svg,
        r#"<g class="edge-label" data-from="cheap" data-to="expert">"#,
        "</g>",
    );
    assert!(label.contains("top p &lt; 0.9"), "{label}");
    assert!(
        label.contains(">ran ") && label.contains(" %</text>"),
        "the measured branch probability: {label}"
    );
    assert!(
        html.contains(r#"<tr id="row-expert"><td>expert</td>"#),
        "{html}"
    );
    assert!(html.contains(r#"id="e2e-queries">3<"#), "{html}");
    assert!(html.contains(r#"id="e2e-slo">5000 ms at p99<"#), "{html}");
    let chart = between(&html, r#"<figure id="chart-attainment">"#, "</figure>");
    assert!(chart.contains(r#"<svg class="chart""#), "{chart}");
    assert!(chart.contains("SLO attainment per second"));
    assert!(
        !chart.contains(r#"data-points="0""#),
        "the chart has points: {chart}"
    );
    assert!(html.contains(r#"id="pipeline-plan-none""#));

    // The cost over time: the controller samples what the loaded instances cost once a second
    // (reading the status records none), one point per second; the page charts it beside the
    // accuracy and the load.
    let waited = std::time::Instant::now();
    let cost = loop {
        let a = p.get(&t, "/v1/pipelines/cascade").await;
        assert_eq!(a.status, StatusCode::OK, "{}", a.text);
        let cost: Vec<(i64, f64)> = a.body["status"]["cost"]
            .as_array()
            .unwrap_or_else(|| panic!("status.cost: {}", a.text))
            .iter()
            .map(|s| (s[0].as_i64().unwrap(), s[1].as_f64().unwrap()))
            .collect();
        if cost.len() >= 2 {
            break cost;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(30),
            "two seconds of cost sampled: {}",
            a.text
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        cost.windows(2).all(|w| w[0].0 < w[1].0) && cost.iter().all(|c| c.0 % 1000 == 0),
        "one sample per second, oldest first: {cost:?}"
    );
    assert!(
        cost.last().is_some_and(|c| c.1 > 0.0),
        "the cheap and expert instances cost: {cost:?}"
    );
    let (_, html) = browser.get("/ui/pipelines/cascade").await;
    let chart = between(&html, r#"<figure id="chart-cost">"#, "</figure>");
    assert!(chart.contains(r#"<svg class="chart""#), "{chart}");
    assert!(chart.contains("cost ($/h)"), "{chart}");
    assert!(
        !chart.contains(r#"data-points="0""#) && chart.contains("data-value="),
        "the cost chart has points: {chart}"
    );
    assert!(
        html.find(r#"id="chart-accuracy""#) < html.find(r#"id="chart-cost""#)
            && html.find(r#"id="chart-load""#) < html.find(r#"id="chart-cost""#),
        "beside the accuracy and the load"
    );

    // The list shows it with its figures.
    let (_, html) = browser.get("/ui/pipelines").await;
    let row = between(&html, r#"<tr id="pipeline-cascade">"#, "</tr>");
    assert!(row.contains("3: cheap, expert, answer"), "{row}");
    assert!(
        row.contains("5000 ms at p99") && row.contains("not planned"),
        "{row}"
    );
    assert!(row.contains("<td>3</td>"), "{row}");

    // Another tenant neither sees nor deletes it.
    let (_, other_key) = tenant_with_key(&p, "beta").await;
    let other = Browser::sign_in(&p.base, &other_key).await;
    let (status, html) = other.get("/ui/pipelines/cascade").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{html}");
    let (_, html) = other.get("/ui/pipelines").await;
    assert!(!html.contains(r#"id="pipeline-cascade""#), "{html}");
    assert!(html.contains("No pipeline yet."), "{html}");
    let resp = other
        .post_fields(
            "/ui/pipelines/cascade/delete",
            &[("csrf", other.csrf.as_str())],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    assert_eq!(stored().await, 1);

    // Deleting: refused without the token, then back to the list.
    let resp = browser
        .post_fields("/ui/pipelines/cascade/delete", &[("csrf", "00ff")])
        .await;
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(stored().await, 1);
    let resp = browser
        .post_fields(
            "/ui/pipelines/cascade/delete",
            &[("csrf", browser.csrf.as_str())],
        )
        .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(resp.headers()[LOCATION], "/ui/pipelines");
    assert_eq!(stored().await, 0);
    let (status, _) = browser.get("/ui/pipelines/cascade").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, html) = browser.get("/ui/pipelines").await;
    assert!(html.contains("No pipeline yet."), "{html}");
    p.stop().await;
}
