//! The committed OpenAPI document (openapi/openapi.json) matches the code.
#![allow(clippy::unwrap_used)] // test helpers outside #[test] fns unwrap too

use std::path::Path;

const REGENERATE: &str = "cargo run -p infaas-api --bin infaas -- openapi > openapi/openapi.json";

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
