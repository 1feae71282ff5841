//! The served variants, indexed for the query path: by id, and per tenant by application
//! (with the distinct input schemas of its models) and by model. Built once per catalog
//! refresh; a query only does hashed look-ups by name and never clones a variant.

use std::collections::HashMap;
use std::sync::Arc;

use infaas_core::Tensor;
use infaas_scheduler::VariantEntry;
use infaas_store::CatalogEntry;

use super::schema::{self, InputSpec};

/// A variant in the index with what serving needs beyond the selector's entry.
#[derive(Debug, Clone)]
pub struct Served {
    pub entry: CatalogEntry,
    pub inputs: Vec<InputSpec>,
    /// [`schema::model_key`] of `inputs`.
    pub schema_key: String,
}

impl Served {
    /// The selector's entry of this variant, listed under `app` (the selection index keys
    /// an application by its input schema too; the simulator by its name).
    pub fn selector_entry(&self, app: String) -> VariantEntry {
        let v = &self.entry.variant;
        VariantEntry {
            id: v.id.clone(),
            name: v.name.clone(),
            model: self.entry.model.clone(),
            app,
            accuracy: v.accuracy.unwrap_or(0.0),
            hardware: v.hardware,
            threads: v.threads,
            max_batch: v.max_batch,
            load_ms: v.load_ms.unwrap_or(0.0),
            memory_bytes: v.memory_bytes.unwrap_or(0).max(0) as u64,
            latency: v.latency.clone(),
        }
    }
}

/// One input schema that some served model of an application takes.
#[derive(Debug, Clone)]
pub struct AppSchema {
    pub key: String,
    pub inputs: Vec<InputSpec>,
}

/// What an application serves.
#[derive(Debug, Clone)]
pub struct AppServing {
    /// Distinct input schemas, sorted by key.
    pub schemas: Vec<AppSchema>,
    /// A served variant of the application (the first by id), for metadata.
    pub example: Arc<Served>,
}

impl AppServing {
    /// The schema that takes `inputs`, if any.
    pub fn schema_for(&self, inputs: &[Tensor]) -> Option<&AppSchema> {
        self.schemas
            .iter()
            .find(|s| schema::accepts(&s.inputs, inputs))
    }
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Catalog {
    variants: HashMap<String, Arc<Served>>,
    apps: HashMap<String, HashMap<String, AppServing>>,
    models: HashMap<String, HashMap<String, Arc<Served>>>,
}

impl Catalog {
    pub fn build(entries: Vec<CatalogEntry>) -> Catalog {
        let mut served: Vec<Arc<Served>> = entries
            .into_iter()
            .map(|entry| {
                let inputs = schema::inputs_of(entry.signature.as_ref());
                let schema_key = schema::model_key(&inputs);
                Arc::new(Served {
                    entry,
                    inputs,
                    schema_key,
                })
            })
            .collect();
        served.sort_by(|a, b| a.entry.variant.id.cmp(&b.entry.variant.id));
        let mut c = Catalog::default();
        for s in served {
            let e = &s.entry;
            let app = c
                .apps
                .entry(e.tenant_id.clone())
                .or_default()
                .entry(e.app.clone())
                .or_insert_with(|| AppServing {
                    schemas: Vec::new(),
                    example: s.clone(),
                });
            if !app.schemas.iter().any(|k| k.key == s.schema_key) {
                app.schemas.push(AppSchema {
                    key: s.schema_key.clone(),
                    inputs: s.inputs.clone(),
                });
                app.schemas.sort_by(|a, b| a.key.cmp(&b.key));
            }
            c.models
                .entry(e.tenant_id.clone())
                .or_default()
                .entry(e.model.clone())
                .or_insert_with(|| s.clone());
            c.variants.insert(e.variant.id.clone(), s);
        }
        c
    }

    pub fn len(&self) -> usize {
        self.variants.len()
    }

    pub fn is_empty(&self) -> bool {
        self.variants.is_empty()
    }

    /// Whether both hold the same variant ids.
    pub fn same_variants(&self, other: &Catalog) -> bool {
        self.len() == other.len() && self.variants.keys().all(|k| other.variants.contains_key(k))
    }

    pub fn variant(&self, id: &str) -> Option<&Arc<Served>> {
        self.variants.get(id)
    }

    pub fn variants(&self) -> impl Iterator<Item = &Arc<Served>> {
        self.variants.values()
    }

    pub fn app(&self, tenant: &str, app: &str) -> Option<&AppServing> {
        self.apps.get(tenant)?.get(app)
    }

    /// A served variant of the model (the first by id).
    pub fn model(&self, tenant: &str, model: &str) -> Option<&Arc<Served>> {
        self.models.get(tenant)?.get(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use infaas_core::{FileKind, HardwareKind, TensorData, Variant};

    fn entry(tenant: &str, app: &str, model: &str, id: &str, input: &str) -> CatalogEntry {
        CatalogEntry {
            tenant_id: tenant.into(),
            app: app.into(),
            model: model.into(),
            model_id: format!("m-{model}"),
            object_key: format!("objects/{id}"),
            declared_output: None,
            signature: Some(serde_json::json!({
                "inputs": [{"name": input, "datatype": "FP32", "shape": [-1, 4]}]
            })),
            variant: Variant {
                id: id.into(),
                model_id: format!("m-{model}"),
                file_id: format!("f-{id}"),
                name: id.into(),
                file_kind: FileKind::Source,
                hardware: HardwareKind::Cpu,
                threads: 1,
                max_batch: 1,
                status: "profiled".into(),
                accuracy: Some(0.9),
                load_ms: Some(1.0),
                memory_bytes: Some(1),
                latency: Vec::new(),
            },
        }
    }

    #[test]
    fn indexes_by_tenant_app_and_model() {
        let c = Catalog::build(vec![
            entry("t1", "app", "a", "v2", "x"),
            entry("t1", "app", "a", "v1", "x"),
            entry("t1", "app", "b", "v3", "pixels"),
            entry("t2", "app", "a", "v4", "x"),
        ]);
        assert_eq!(c.len(), 4);
        let app = c.app("t1", "app").unwrap();
        // Both models take one FP32 [*, 4] tensor: one schema, whatever the input names.
        assert_eq!(app.schemas.len(), 1);
        assert_eq!(app.example.entry.variant.id, "v1");
        assert_eq!(c.model("t1", "a").unwrap().entry.variant.id, "v1");
        assert!(c.model("t1", "nope").is_none());
        assert!(c.app("t3", "app").is_none());
        assert_eq!(c.model("t2", "a").unwrap().entry.variant.id, "v4");
        let t = Tensor::new("whatever", vec![2, 4], TensorData::Fp32(vec![0.0; 8])).unwrap();
        assert!(app.schema_for(std::slice::from_ref(&t)).is_some());
        let wrong = Tensor::new("x", vec![2, 5], TensorData::Fp32(vec![0.0; 10])).unwrap();
        assert!(app.schema_for(&[wrong]).is_none());
        let same = Catalog::build(vec![
            entry("t1", "app", "a", "v1", "x"),
            entry("t1", "app", "a", "v2", "x"),
            entry("t1", "app", "b", "v3", "x"),
            entry("t2", "app", "a", "v4", "x"),
        ]);
        assert!(c.same_variants(&same));
        assert!(!c.same_variants(&Catalog::default()));
    }
}
