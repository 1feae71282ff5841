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

/// The schema `$ref` points at, or the schema itself; through a nullable `oneOf`.
fn resolve<'a>(doc: &'a serde_json::Value, schema: &'a serde_json::Value) -> &'a serde_json::Value {
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    if let Some(options) = schema["oneOf"].as_array() {
        if let Some(other) = options.iter().find(|o| o["type"] != "null") {
            if options.len() == 2 {
                return resolve(doc, other);
            }
        }
    }
    schema
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// The pipeline document is a schema, not an object: what a strict fuzzer sends is what the
/// server takes. `name` and the other required fields are required, a node's combiner and an
/// input's datatype are enums of the server's sets, a model's `task` the platform's tasks;
/// the plan is a typed answer; a what-if cluster's sizes say that one worker is needed.
#[test]
fn the_schemas_state_what_the_server_enforces() {
    let doc: serde_json::Value =
        serde_json::from_str(&infaas_api::openapi::document()).expect("the document is JSON");
    let create = &doc["paths"]["/v1/pipelines"]["post"];
    let spec = resolve(
        &doc,
        &create["requestBody"]["content"]["application/json"]["schema"],
    );
    assert_eq!(spec["type"], "object", "{spec}");
    assert_eq!(spec["additionalProperties"], false);
    let required = strings(&spec["required"]);
    for field in ["name", "inputs", "nodes", "outputs"] {
        assert!(required.iter().any(|r| r == field), "{field}: {required:?}");
    }
    assert!(spec["properties"]["name"]["pattern"].is_string());
    assert_eq!(spec["properties"]["nodes"]["maxItems"], 32);
    let node = resolve(&doc, &spec["properties"]["nodes"]["items"]);
    assert_eq!(strings(&node["required"]), ["name"]);
    let combine = resolve(&doc, &node["properties"]["combine"]);
    assert_eq!(
        strings(&combine["enum"]),
        ["mean", "vote", "concat", "first"]
    );
    // Every value the server takes, and no other (serde's names of the Combiner).
    for c in strings(&combine["enum"]) {
        let parsed: infaas_core::pipeline::Combiner =
            serde_json::from_value(serde_json::json!(c)).unwrap();
        assert_eq!(parsed.as_str(), c);
    }
    let input = resolve(&doc, &spec["properties"]["inputs"]["items"]);
    let datatypes = strings(&input["properties"]["datatype"]["enum"]);
    assert_eq!(
        datatypes,
        infaas_core::DataType::ALL.map(|d| d.as_str().to_string())
    );
    assert!(datatypes
        .iter()
        .all(|d| infaas_core::DataType::parse(d).is_some()));

    let form = resolve(
        &doc,
        &doc["paths"]["/v1/models"]["post"]["requestBody"]["content"]["multipart/form-data"]
            ["schema"],
    );
    let task = resolve(&doc, &form["properties"]["task"]);
    assert_eq!(
        strings(&task["enum"]),
        infaas_control::registry::upload::TASKS
    );

    let plan = resolve(
        &doc,
        &doc["paths"]["/v1/pipelines/{name}/plan"]["post"]["responses"]["200"]["content"]
            ["application/json"]["schema"],
    );
    assert_eq!(plan["type"], "object");
    for field in [
        "nodes",
        "predicted_latency_ms",
        "cost_per_hour",
        "trace",
        "applied",
    ] {
        assert!(
            strings(&plan["required"]).iter().any(|r| r == field),
            "{field}"
        );
    }
    let view = &doc["components"]["schemas"]["PipelineView"]["properties"];
    assert_eq!(resolve(&doc, &view["spec"]), spec);
    assert_eq!(resolve(&doc, &view["plan"]), plan);

    let whatif = &doc["components"]["schemas"]["WhatIfRequest"]["properties"];
    for field in ["cpu_workers", "gpu_workers"] {
        let d = whatif[field]["description"].as_str().unwrap_or_default();
        assert!(d.contains("422") && d.contains("worker"), "{field}: {d}");
    }
    let answers = &doc["paths"]["/v1/whatif"]["post"]["responses"]["422"]["description"];
    assert!(
        answers
            .as_str()
            .unwrap_or_default()
            .contains("without a worker"),
        "{answers}"
    );
}
