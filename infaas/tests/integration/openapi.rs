//! The committed OpenAPI document (openapi/openapi.json) matches the code.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use std::path::Path;

const REGENERATE: &str = "cargo run -p infaas -- openapi > openapi/openapi.json";

#[test]
fn openapi_document_is_committed() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../openapi/openapi.json");
    let current = infaas_api::openapi::document();
    let committed = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => panic!(
            "cannot read {}: {e}; generate it with `{REGENERATE}`",
            path.display()
        ),
    };
    if committed != current {
        let (line, (was, now)) = committed
            .lines()
            .chain(std::iter::repeat("<end of file>"))
            .zip(current.lines().chain(std::iter::repeat("<end of file>")))
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .map(|(i, pair)| (i + 1, pair))
            .unwrap_or((0, ("", "")));
        panic!(
            "openapi/openapi.json is out of date with the code (first difference at line {line}: \
             committed {was:?}, now {now:?}); regenerate it with `{REGENERATE}` and commit it"
        );
    }
}

#[test]
fn openapi_document_describes_the_api() {
    let doc: serde_json::Value =
        serde_json::from_str(&infaas_api::openapi::document()).expect("the document is JSON");
    assert!(doc["openapi"]
        .as_str()
        .unwrap_or_default()
        .starts_with("3."));
    assert_eq!(doc["info"]["version"], env!("CARGO_PKG_VERSION"));
    for path in [
        "/healthz",
        "/readyz",
        "/metrics",
        "/v1/auth/token",
        "/v1/me",
        "/v1/api-keys",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is not documented");
    }
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"]["scheme"],
        "bearer"
    );
}

/// Operation ids are unique: the SDK generators (scripts/gen-clients.sh) key operations by
/// them, and a repeated id makes one route's types stand for another's.
#[test]
fn operation_ids_are_unique() {
    let doc: serde_json::Value =
        serde_json::from_str(&infaas_api::openapi::document()).expect("the document is JSON");
    let mut seen = std::collections::BTreeMap::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let id = op["operationId"].as_str().unwrap_or_default().to_string();
            assert!(!id.is_empty(), "{method} {path} has no operationId");
            if let Some(other) = seen.insert(id.clone(), format!("{method} {path}")) {
                panic!(
                    "operationId '{id}' of {method} {path} is also that of {other}: \
                     give one an `operation_id = \"...\"` in its #[utoipa::path]"
                );
            }
        }
    }
}

/// Every operation documents the answers its kind can give whatever its handler does: 401 and
/// 429 with a token, 400, 413 and 415 with a body, 400 with parameters; every error answer
/// carries the error body. Fails when a route is added without them.
#[test]
fn every_operation_documents_the_answers_of_its_kind() {
    let doc: serde_json::Value =
        serde_json::from_str(&infaas_api::openapi::document()).expect("the document is JSON");
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            let responses = op["responses"].as_object().expect("responses");
            let has = |status: &str| responses.contains_key(status);
            let secured = op["security"].as_array().is_some_and(|s| !s.is_empty());
            let body = op.get("requestBody").is_some();
            let params = op["parameters"].as_array().is_some_and(|p| !p.is_empty());
            let mut expected = Vec::new();
            if secured {
                expected.extend(["401", "429"]);
            }
            if body {
                expected.extend(["400", "413", "415"]);
            }
            if params {
                expected.push("400");
            }
            for status in expected {
                assert!(has(status), "{method} {path} does not document {status}");
            }
            if secured {
                assert!(
                    responses["429"]["headers"]["Retry-After"].is_object(),
                    "{method} {path}: 429 without Retry-After"
                );
            }
            // Health endpoints answer their own documents; everything behind a token answers
            // errors with the error body.
            for (status, r) in responses.iter().filter(|_| secured) {
                if status.starts_with('4') || status.starts_with('5') {
                    let schema = &r["content"]["application/json"]["schema"]["$ref"];
                    assert_eq!(
                        schema, "#/components/schemas/ErrorBody",
                        "{method} {path} {status} has no error body"
                    );
                }
            }
        }
    }
}

/// The limits the server enforces are in the schemas (a generated client checks them before
/// sending): spot checks of each kind, tied to the server's rules by the API fuzzer in CI.
#[test]
fn request_limits_are_in_the_schemas() {
    let doc: serde_json::Value =
        serde_json::from_str(&infaas_api::openapi::document()).expect("the document is JSON");
    let schemas = &doc["components"]["schemas"];
    let infer = &schemas["InferRequest"]["properties"];
    assert_eq!(infer["inputs"]["minItems"], 1);
    assert_eq!(infer["min_accuracy"]["maximum"], 1.0);
    assert_eq!(infer["latency_ms"]["exclusiveMinimum"], 0.0);
    let tensor = &schemas["TensorJson"]["properties"];
    assert_eq!(tensor["shape"]["items"]["type"], "integer");
    assert_eq!(tensor["shape"]["items"]["minimum"], 1);
    assert_eq!(tensor["shape"]["minItems"], 1);
    assert_eq!(
        schemas["Datatype"]["enum"].as_array().map(Vec::len),
        Some(9)
    );
    assert_eq!(
        schemas["KeyRole"]["enum"],
        serde_json::json!(["admin", "member"])
    );
    // A job names an application, a model or a pipeline: exactly one.
    let job = &schemas["JobRequest"]["allOf"];
    assert_eq!(job[1]["oneOf"].as_array().map(Vec::len), Some(3));
    let files = &doc["paths"]["/v1/files/{path}"]["put"];
    assert_eq!(files["requestBody"]["required"], true);
    assert!(files["parameters"][0]["schema"]["pattern"].is_string());
    let events = &doc["paths"]["/v1/apps/{app}/scaling-events"]["get"]["parameters"];
    let limit = events
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "limit"))
        .expect("limit");
    assert_eq!(limit["schema"]["minimum"], 1);
    assert_eq!(limit["schema"]["maximum"], 1000);
    // What-if runs: the policies are the simulator's, at most each once.
    let whatif = &schemas["WhatIfRequest"]["properties"];
    assert_eq!(
        schemas["WhatIfPolicyName"]["enum"],
        serde_json::json!(infaas_sim::policy::NAMES)
    );
    assert_eq!(whatif["policies"]["minItems"], 1);
    assert_eq!(
        whatif["policies"]["maxItems"],
        infaas_sim::policy::NAMES.len()
    );
    assert_eq!(whatif["cpu_workers"]["maximum"], 256);
    let recorded = &doc["paths"]["/v1/traces/recorded"]["get"]["parameters"];
    let minutes = recorded
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "minutes"))
        .expect("minutes");
    assert_eq!(minutes["schema"]["maximum"], 10080);
    let start = &doc["paths"]["/v1/whatif"]["post"]["responses"];
    for status in ["202", "400", "413", "422", "429"] {
        assert!(
            start[status].is_object(),
            "POST /v1/whatif documents {status}"
        );
    }
}
