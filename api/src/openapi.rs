//! The OpenAPI document of the HTTP API (committed as openapi/openapi.json).

use utoipa::openapi::header::HeaderBuilder;
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{AllOfBuilder, OneOfBuilder, Schema};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, ObjectBuilder, Ref, RefOr, ResponseBuilder, Type};
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
        routes::pipelines::create,
        routes::pipelines::list,
        routes::pipelines::show,
        routes::pipelines::delete,
        routes::pipelines::infer,
        routes::pipelines::plan,
        routes::pipelines::put_validation,
        routes::pipelines::delete_validation,
        routes::cluster::workers,
        routes::cluster::cluster,
        routes::cluster::usage,
        routes::cluster::forecast,
        routes::scaling::scaling_events,
        routes::jobs::submit,
        routes::jobs::list,
        routes::jobs::show,
        routes::jobs::cancel,
        routes::jobs::results,
        routes::jobs::put_file,
        routes::jobs::get_file,
        routes::jobs::list_files,
        routes::whatif::recorded,
        routes::whatif::start,
        routes::whatif::list,
        routes::whatif::show,
        routes::whatif::plot,
        routes::whatif::delete,
    ),
    components(schemas(crate::error::ErrorBody)),
    modifiers(&BearerAuth, &StandardResponses),
    tags(
        (name = "health", description = "Liveness, readiness, metrics"),
        (name = "auth", description = "Access tokens"),
        (name = "api-keys", description = "API keys of a tenant (admin)"),
        (name = "models", description = "Model registry: registration, variants, profiles"),
        (name = "apps", description = "Applications"),
        (name = "inference", description = "Online queries: model-less by application, or by model. The Open Inference Protocol (v2) is served under /v2, and over gRPC (inference.GRPCInferenceService) on its own port, 8001 by default"),
        (name = "pipelines", description = "Pipelines: DAGs of applications, models and combiners (sequence, switch, ensemble) under one end-to-end SLO, served at /v1/pipelines/{name}/infer and, as a model, on the Open Inference Protocol; planned with InferLine's planner on the simulator"),
        (name = "cluster", description = "Workers and their instances"),
        (name = "jobs", description = "Offline (batch) jobs on spare capacity"),
        (name = "files", description = "The tenant's file area: job inputs and outputs"),
        (name = "whatif", description = "What-if planning: SIMULATED runs of a trace (recorded traffic, a CSV trace or a generator) on the tenant's applications under the simulator's policies, and the recorded traffic as a trace"),
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

/// The answers that every operation of a kind can give, whatever its handler does, added to
/// each operation that does not document them itself (a handler's own description wins):
/// - with a bearer token: 401 (missing, malformed, expired, forged or revoked token) and 429
///   (the tenant's rate limit, with `Retry-After`);
/// - with a body: 400 (malformed, or not the documented schema), 413 (over the body limit)
///   and 415 (a content type the operation does not take);
/// - with path or query parameters: 400 (a parameter outside its documented schema).
struct StandardResponses;

const BODY_LIMITS: &str = "JSON bodies: `max_body_bytes` (default 8 MiB); uploads (multipart \
     and file bodies): `max_upload_bytes` per file (default 512 MiB)";

impl Modify for StandardResponses {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        if let Some(components) = openapi.components.as_mut() {
            if let Some(job) = components.schemas.get_mut("JobRequest") {
                *job = one_target(job.clone());
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                standard_responses(op);
            }
        }
    }
}

/// A job names `app` (with an optional `min_accuracy`), `model` or `pipeline`, exactly one:
/// the object's own schema, and one of the three shapes.
fn one_target(object: RefOr<Schema>) -> RefOr<Schema> {
    let absent_or_null = || ObjectBuilder::new().schema_type(Type::Null);
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let by_app = ObjectBuilder::new()
        .required("app")
        .property("app", string())
        .property("model", absent_or_null())
        .property("pipeline", absent_or_null());
    let by_model = ObjectBuilder::new()
        .required("model")
        .property("model", string())
        .property("app", absent_or_null())
        .property("pipeline", absent_or_null())
        .property("min_accuracy", absent_or_null());
    let by_pipeline = ObjectBuilder::new()
        .required("pipeline")
        .property("pipeline", string())
        .property("app", absent_or_null())
        .property("model", absent_or_null())
        .property("min_accuracy", absent_or_null());
    AllOfBuilder::new()
        .item(object)
        .item(
            OneOfBuilder::new()
                .item(by_app)
                .item(by_model)
                .item(by_pipeline),
        )
        .into()
}

fn standard_responses(op: &mut Operation) {
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let content_types: Vec<String> = op
        .request_body
        .as_ref()
        .map(|b| b.content.keys().cloned().collect())
        .unwrap_or_default();
    let has_params = op.parameters.as_ref().is_some_and(|p| !p.is_empty());
    let retry_after = || {
        HeaderBuilder::new()
            .schema(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(0)),
            )
            .description(Some("Seconds to wait before retrying"))
            .build()
    };
    let mut add = |status: &str, description: String, with_retry_after: bool| {
        if let Some(RefOr::T(existing)) = op.responses.responses.get_mut(status) {
            // A handler's own description of the status stays; the header is added.
            if with_retry_after {
                existing
                    .headers
                    .entry("Retry-After".into())
                    .or_insert_with(retry_after);
            }
            return;
        }
        if op.responses.responses.contains_key(status) {
            return;
        }
        let mut r = ResponseBuilder::new().description(description).content(
            "application/json",
            ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build(),
        );
        if with_retry_after {
            r = r.header("Retry-After", retry_after());
        }
        op.responses
            .responses
            .insert(status.to_string(), r.build().into());
    };
    if !content_types.is_empty() {
        add(
            "400",
            "Malformed body, or a body outside the documented schema (the message names the field)"
                .into(),
            false,
        );
        add("413", format!("Body over the limit ({BODY_LIMITS})"), false);
        add(
            "415",
            format!("Content-Type is not {}", content_types.join(" or ")),
            false,
        );
    } else if has_params {
        add(
            "400",
            "A parameter outside its documented schema (the message names it)".into(),
            false,
        );
    }
    if secured {
        add(
            "401",
            "Missing, malformed, expired, forged or revoked bearer token".into(),
            false,
        );
        add(
            "429",
            "The tenant's rate limit is exceeded; retry after `Retry-After` seconds".into(),
            true,
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

/// `GET /openapi.json`: the OpenAPI document of this server.
pub async fn serve() -> impl axum::response::IntoResponse {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document(),
    )
}
