//! The OpenAPI document of the HTTP API (committed as openapi/openapi.json).

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::routes;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "infaas",
        description = "Model-less inference serving: register models, query by SLO and accuracy.",
        license(name = "Apache-2.0")
    ),
    paths(
        routes::health::healthz,
        routes::health::readyz,
        routes::health::metrics,
        routes::auth::token,
        routes::auth::me,
        routes::api_keys::create,
        routes::api_keys::list,
        routes::api_keys::revoke,
        routes::models::register,
        routes::models::list,
        routes::models::show,
        routes::models::delete,
        routes::models::list_apps,
        routes::models::show_app,
        routes::infer::infer_app,
        routes::infer::infer_model,
        routes::cluster::workers,
        routes::cluster::usage,
        routes::scaling::scaling_events,
        routes::jobs::submit,
        routes::jobs::list,
        routes::jobs::show,
        routes::jobs::cancel,
        routes::jobs::results,
        routes::jobs::put_file,
        routes::jobs::get_file,
        routes::jobs::list_files,
    ),
    components(schemas(crate::error::ErrorBody)),
    modifiers(&BearerAuth),
    tags(
        (name = "health", description = "Liveness, readiness, metrics"),
        (name = "auth", description = "Access tokens"),
        (name = "api-keys", description = "API keys of a tenant (admin)"),
        (name = "models", description = "Model registry: registration, variants, profiles"),
        (name = "apps", description = "Applications"),
        (name = "inference", description = "Online queries: model-less by application, or by model. The Open Inference Protocol (v2) is served under /v2"),
        (name = "cluster", description = "Workers and their instances"),
        (name = "jobs", description = "Offline (batch) jobs on spare capacity"),
        (name = "files", description = "The tenant's file area: job inputs and outputs"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .build(),
            ),
        );
    }
}

/// The document as pretty JSON with a trailing newline (the committed form).
pub fn document() -> String {
    let mut doc = ApiDoc::openapi();
    doc.info.version = env!("CARGO_PKG_VERSION").to_string();
    let mut s = doc
        .to_pretty_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"));
    s.push('\n');
    s
}
