//! Registering, reading and deleting pipelines, and the checked copy ([`Prepared`]) that
//! queries, plans and loops use.

use std::sync::Arc;

use infaas_core::pipeline::PipelineSpec;

use super::prepared::{depth_to_sink, Pipeline, Prepared};
use super::validate::{self, NodeShape};
use crate::error::Error;
use crate::platform::ControlPlane;

/// Largest pipeline document accepted, in bytes.
pub const MAX_DOCUMENT_BYTES: usize = 256 * 1024;

/// The pipeline `name` of `tenant`, checked (cached for a moment).
pub async fn prepared(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
) -> Result<Arc<Prepared>, Error> {
    if let Some(p) = state.pipelines.cached(tenant, name) {
        return Ok(p);
    }
    let pipeline = get(state, tenant, name).await?;
    let models = state.db.list_models(tenant, None).await?;
    let (order, shapes) = validate::check(&pipeline.spec, &validate::Registry { models: &models })
        .map_err(|e| match e {
            Error::NotFound(m) | Error::Conflict(m) | Error::Invalid(m) => Error::Conflict(
                format!("pipeline '{name}' no longer fits the registry: {m}"),
            ),
            other => other,
        })?;
    let parents = pipeline.spec.parents();
    let depth = depth_to_sink(&pipeline, &parents, &order);
    let fastest_rest_ms = fastest_rest(state, tenant, &pipeline.spec, &order, &parents, &shapes);
    let p = Arc::new(Prepared {
        pipeline,
        order,
        shapes,
        parents,
        depth,
        fastest_rest_ms,
    });
    state.pipelines.cache(tenant, name, p.clone());
    Ok(p)
}

/// Per node, the fastest time from its start to a sink: its own fastest profiled variant
/// (batch 1, p50) of the models it may run (0 for a combiner, or before any is profiled) plus
/// the slowest of its children's.
fn fastest_rest(
    state: &ControlPlane,
    tenant: &str,
    spec: &PipelineSpec,
    order: &[usize],
    parents: &[Vec<usize>],
    shapes: &[NodeShape],
) -> Vec<f64> {
    let catalog = state.cluster.catalog();
    let own: Vec<f64> = shapes
        .iter()
        .map(|s| {
            catalog
                .variants()
                .filter(|v| v.entry.tenant_id == tenant && s.models.contains(&v.entry.model))
                .filter_map(|v| v.entry.variant.latency.first().map(|p| p.p50_ms))
                .filter(|ms| ms.is_finite() && *ms >= 0.0)
                .fold(f64::INFINITY, f64::min)
        })
        .map(|ms| if ms.is_finite() { ms } else { 0.0 })
        .collect();
    let mut rest = own.clone();
    for &k in order.iter().rev() {
        let after = (0..spec.nodes.len())
            .filter(|&c| parents.get(c).is_some_and(|ps| ps.contains(&k)))
            .map(|c| rest[c])
            .fold(0.0, f64::max);
        rest[k] = own[k] + after;
    }
    rest
}

/// Reads a pipeline document, JSON or YAML (JSON is tried first).
pub fn parse_document(bytes: &[u8]) -> Result<PipelineSpec, Error> {
    if bytes.len() > MAX_DOCUMENT_BYTES {
        return Err(Error::TooLarge(format!(
            "a pipeline document is at most {MAX_DOCUMENT_BYTES} bytes; this one is {}",
            bytes.len()
        )));
    }
    let text = std::str::from_utf8(bytes)
        .map_err(|e| Error::Invalid(format!("the pipeline document is not UTF-8: {e}")))?;
    let trimmed = text.trim_start();
    if trimmed.starts_with('{') {
        // The error names the field where it is (`nodes[1].combine: unknown variant ...`), as
        // serde_yaml's do.
        let de = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if path == "." {
                Error::Invalid(format!("the pipeline document is not valid JSON: {inner}"))
            } else {
                Error::Invalid(format!(
                    "the pipeline document is not valid JSON: {path}: {inner}"
                ))
            }
        })
    } else {
        serde_yaml::from_str(text).map_err(|e| {
            Error::Invalid(format!(
                "the pipeline document is neither JSON nor valid YAML: {e}"
            ))
        })
    }
}

/// Registers a pipeline after checking it against the registry.
pub async fn create(
    state: &ControlPlane,
    tenant: &str,
    spec: PipelineSpec,
) -> Result<Pipeline, Error> {
    let models = state.db.list_models(tenant, None).await?;
    let (order, _) = validate::check(&spec, &validate::Registry { models: &models })?;
    if spec.overload.accuracy_scaling {
        validate::check_tree(&spec, &order)?;
    }
    // A pipeline is also a model on the Open Inference Protocol: its name must not hide an
    // application or model of the tenant.
    if models
        .iter()
        .any(|m| m.name == spec.name || m.app == spec.name)
    {
        return Err(Error::Conflict(format!(
            "'{}' already names an application or model of this tenant; a pipeline needs a name of its own (it is served as /v2/models/{{name}})",
            spec.name
        )));
    }
    let text = serde_json::to_string(&spec).map_err(Error::internal)?;
    let row = state
        .db
        .create_pipeline(tenant, &spec.name, &text, spec.slo.latency_ms)
        .await?;
    Pipeline::from_row(row)
}

pub async fn get(state: &ControlPlane, tenant: &str, name: &str) -> Result<Pipeline, Error> {
    Pipeline::from_row(state.db.get_pipeline(tenant, name).await?)
}

pub async fn list(state: &ControlPlane, tenant: &str) -> Result<Vec<Pipeline>, Error> {
    state
        .db
        .list_pipelines(tenant)
        .await?
        .into_iter()
        .map(Pipeline::from_row)
        .collect()
}

pub async fn delete(state: &ControlPlane, tenant: &str, name: &str) -> Result<(), Error> {
    let row = state.db.delete_pipeline(tenant, name).await?;
    if let Some(key) = row.validation_key {
        if let Err(e) = state.objects.delete(&key).await {
            tracing::warn!(key = %key, error = %e, "cannot delete a deleted pipeline's validation set");
        }
    }
    state.pipelines.forget(tenant, name);
    state.pipelines.tuners.remove(tenant, name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(doc: &str) -> String {
        match parse_document(doc.as_bytes()) {
            Err(Error::Invalid(m)) => m,
            other => panic!("{doc}: {other:?}"),
        }
    }

    /// Errors name the field: a missing one, and where an unknown value is, in JSON and YAML.
    #[test]
    fn document_errors_name_the_field() {
        let m = refused(r#"{"inputs": [], "nodes": [], "outputs": {}}"#);
        assert!(m.contains("missing field `name`"), "{m}");
        let m = refused(
            r#"{"name": "p", "inputs": [{"name": "x", "datatype": "FP32"}],
                "nodes": [{"name": "a", "app": "a"}, {"name": "m", "combine": "median", "from": ["a.y"]}],
                "outputs": {"y": "m.output"}}"#,
        );
        assert!(
            m.contains("nodes[1].combine") && m.contains("median"),
            "{m}"
        );
        assert!(m.contains("mean") && m.contains("first"), "{m}");
        let m =
            refused("name: p\ninputs: []\nnodes:\n  - name: m\n    combine: median\noutputs: {}\n");
        assert!(
            m.contains("nodes[0].combine") && m.contains("median"),
            "{m}"
        );
    }
}
