//! A pipeline's validation set and the end-to-end accuracy measured on it.
//!
//! A validation set is an NPZ file like a model's (docs/registering-models.md, "Validation sets"): the pipeline's
//! inputs (`x` for a single-input pipeline, else `x.<input>` or the bare input name) and
//! integer labels `y`, graded against one of the pipeline's outputs (its argmax per row, or
//! the value itself for a one-value integer output). [`upload`] checks the set against the
//! pipeline's inputs and the graded output's classes, naming the array and the problem.
//!
//! [`measure`] runs the whole set through the pipeline once per combination of models (each
//! node pinned to one of the models it may run, switches and combiners as in serving) and
//! returns what the planner needs to judge configurations by measured, not estimated,
//! end-to-end accuracy ([`infaas_scheduler::pipeline::MeasuredAccuracy`]). Results are kept
//! per uploaded set, so a plan measures only combinations it has not seen.

use std::collections::HashMap;

use infaas_core::{DataType, Tensor};
use infaas_executors::engine::{Signature, TensorSpec};
use infaas_executors::validation::{match_validation, ValidationSet};
use infaas_scheduler::pipeline::MeasuredAccuracy;

pub use super::activity::Measured;
use super::prepared::Prepared;
pub use super::prepared::ValidationInfo;
use super::registered::prepared;
use super::{rows, run};
use crate::error::Error;
use crate::platform::ControlPlane;

/// Largest validation set accepted for a pipeline (it is held in memory while measured).
pub const MAX_VALIDATION_BYTES: usize = 64 * 1024 * 1024;
/// Most model combinations measured for one plan; the rest are estimated.
pub const MAX_COMBINATIONS: usize = 64;
/// Rows sent through the pipeline per measuring query.
const CHUNK_ROWS: usize = 64;

/// What [`measure`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Measurement {
    pub accuracy: MeasuredAccuracy,
    /// Combinations measured (from the cache or now).
    pub measured: usize,
    /// Combinations left to the estimate (over [`MAX_COMBINATIONS`], or a failed run).
    pub estimated: usize,
    pub rows: usize,
    /// Why a combination could not be measured, if one could not.
    pub failures: Vec<String>,
}

/// The pipeline's inputs as a model signature (batch dimension first), for matching a set.
fn signature(prepared: &Prepared) -> Result<Signature, Error> {
    let inputs = prepared
        .pipeline
        .spec
        .inputs
        .iter()
        .map(|i| {
            let dtype = DataType::parse(&i.datatype).ok_or_else(|| {
                Error::internal(anyhow::anyhow!(
                    "input '{}' has datatype '{}'",
                    i.name,
                    i.datatype
                ))
            })?;
            let dims = std::iter::once(None)
                .chain(i.shape.iter().map(|&d| usize::try_from(d).ok()))
                .collect();
            Ok(TensorSpec::new(i.name.clone(), dtype, dims))
        })
        .collect::<Result<_, Error>>()?;
    Ok(Signature {
        inputs,
        outputs: Vec::new(),
    })
}

/// Reads a set and checks it against the pipeline's inputs, off the async threads.
async fn read(prepared: &Prepared, bytes: bytes::Bytes) -> Result<ValidationSet, Error> {
    let sig = signature(prepared)?;
    let name = prepared.pipeline.spec.name.clone();
    tokio::task::spawn_blocking(move || {
        let arrays = infaas_protocol::npz::read_npz(&bytes).map_err(|e| {
            Error::Invalid(format!("the validation set is not a valid NPZ file: {e}"))
        })?;
        match_validation(&sig, arrays).map_err(|e| {
            Error::Invalid(format!(
                "the validation set does not fit pipeline '{name}': {}",
                e.to_string().replace("of the model", "of the pipeline")
            ))
        })
    })
    .await
    .map_err(Error::internal)?
}

/// The output the labels grade (`asked`, or the pipeline's only output) and its classes
/// (`None` when its rows are one integer label each).
fn graded_output(
    prepared: &Prepared,
    asked: Option<&str>,
) -> Result<(String, Option<usize>), Error> {
    let spec = &prepared.pipeline.spec;
    let names: Vec<&str> = spec.outputs.keys().map(String::as_str).collect();
    let name = match (asked, names.as_slice()) {
        (Some(a), _) if names.contains(&a) => a.to_string(),
        (Some(a), _) => {
            return Err(Error::Invalid(format!(
                "pipeline '{}' has no output '{a}'; its outputs are {}",
                spec.name,
                names.join(", ")
            )))
        }
        (None, [one]) => (*one).to_string(),
        (None, _) => {
            return Err(Error::Invalid(format!(
                "pipeline '{}' has outputs {}; say which one the labels grade (output=NAME)",
                spec.name,
                names.join(", ")
            )))
        }
    };
    let (_, outputs) = prepared.signature();
    let classes = outputs
        .iter()
        .find(|(n, _, _)| *n == name)
        .and_then(|(_, dtype, shape)| {
            let features: i64 = shape.iter().skip(1).product();
            let integer = dtype.starts_with("INT") || dtype.starts_with("UINT");
            match (integer && features == 1, features) {
                (true, _) => None,
                (false, f) => usize::try_from(f).ok().filter(|&f| f > 0),
            }
        });
    Ok((name, classes))
}

/// Registers (or replaces) the validation set of pipeline `name`.
pub async fn upload(
    state: &ControlPlane,
    tenant: &str,
    name: &str,
    bytes: bytes::Bytes,
    output: Option<&str>,
) -> Result<ValidationInfo, Error> {
    if bytes.len() > MAX_VALIDATION_BYTES {
        return Err(Error::TooLarge(format!(
            "a pipeline's validation set is at most {MAX_VALIDATION_BYTES} bytes; this one is {}",
            bytes.len()
        )));
    }
    let prepared = prepared(state, tenant, name).await?;
    let (output, classes) = graded_output(&prepared, output)?;
    let set = read(&prepared, bytes.clone()).await?;
    if let Some(c) = classes {
        if let Some((row, label)) = set
            .labels
            .iter()
            .enumerate()
            .find(|(_, &l)| l as usize >= c)
        {
            return Err(Error::Invalid(format!(
                "validation label {label} at row {row} is out of range: output '{output}' has {c} classes (labels 0..{})",
                c - 1
            )));
        }
    }
    let key = format!(
        "tenants/{tenant}/pipelines/{}/validation-{}.npz",
        prepared.pipeline.id,
        infaas_core::time::now_ms()
    );
    state.objects.put_bytes(&key, bytes).await?;
    let replaced = state
        .db
        .set_pipeline_validation(tenant, name, Some((&key, &output, set.len as i64)))
        .await;
    let replaced = match replaced {
        Ok(r) => r,
        Err(e) => {
            // The pipeline went away meanwhile: do not leave its set behind.
            let _ = state.objects.delete(&key).await;
            return Err(e.into());
        }
    };
    if let Some(old) = replaced {
        if let Err(e) = state.objects.delete(&old).await {
            tracing::warn!(key = %old, error = %e, "cannot delete a replaced pipeline validation set");
        }
    }
    state.pipelines.invalidate(tenant, name);
    Ok(ValidationInfo {
        output,
        rows: set.len,
        key,
    })
}

/// Removes the validation set of pipeline `name` (plans estimate accuracy again).
pub async fn remove(state: &ControlPlane, tenant: &str, name: &str) -> Result<(), Error> {
    let old = state.db.set_pipeline_validation(tenant, name, None).await?;
    match old {
        Some(key) => {
            if let Err(e) = state.objects.delete(&key).await {
                tracing::warn!(key = %key, error = %e, "cannot delete a pipeline validation set");
            }
            state.pipelines.invalidate(tenant, name);
            Ok(())
        }
        None => Err(Error::NotFound(format!(
            "pipeline '{name}' has no validation set"
        ))),
    }
}

/// Every combination of one model per node, most accurate first (by the product of the
/// models' own accuracies); at most `cap`.
fn combinations(models: &[Vec<(String, f64)>], cap: usize) -> (Vec<Vec<String>>, usize) {
    let mut all: Vec<(Vec<String>, f64)> = vec![(Vec::new(), 1.0)];
    for node in models {
        let mut next = Vec::with_capacity(all.len() * node.len());
        for (combo, acc) in &all {
            for (m, a) in node {
                let mut c = combo.clone();
                c.push(m.clone());
                next.push((c, acc * a));
            }
        }
        all = next;
        // Keep the search bounded: beyond a few times the cap the tail is never measured.
        if all.len() > cap * 16 {
            all.sort_by(|a, b| b.1.total_cmp(&a.1));
            all.truncate(cap * 16);
        }
    }
    let total: usize = models.iter().map(Vec::len).product();
    all.sort_by(|a, b| b.1.total_cmp(&a.1));
    all.truncate(cap);
    let kept = all.len();
    (all.into_iter().map(|(c, _)| c).collect(), total - kept)
}

/// Grades one answer's rows against `labels` (rows `start..`): how many are right.
fn correct(outputs: &[Tensor], output: &str, labels: &[i64]) -> usize {
    let Some(t) = outputs.iter().find(|t| t.name == output) else {
        return 0;
    };
    labels
        .iter()
        .enumerate()
        .filter(|&(i, &y)| rows::label(t, i) == Some(y))
        .count()
}

/// Measures the end-to-end accuracy of every combination of models (`models`: per plan node,
/// the models it may run and their own accuracy; `nodes`: the pipeline node each plan node
/// is) on the pipeline's validation set. `None` when the pipeline has no set.
pub async fn measure(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    nodes: &[usize],
    models: &[Vec<(String, f64)>],
) -> Result<Option<Measurement>, Error> {
    let Some(info) = prepared.pipeline.validation.clone() else {
        return Ok(None);
    };
    let spec = &prepared.pipeline.spec;
    let name = spec.name.as_str();
    let bytes = state.objects.get_bytes(&info.key).await?;
    let set = read(prepared, bytes).await?;
    let (combos, estimated) = combinations(models, MAX_COMBINATIONS);
    let mut out = Measurement {
        estimated,
        rows: set.len,
        ..Measurement::default()
    };
    for combo in combos {
        let cached = state.pipelines.measured(tenant, name, &info.key, &combo);
        let m = match cached {
            Some(m) => m,
            None => {
                let pins: HashMap<String, String> = nodes
                    .iter()
                    .zip(&combo)
                    .map(|(&k, m)| (spec.nodes[k].name.clone(), m.clone()))
                    .collect();
                match run_set(state, tenant, prepared, &set, &info.output, &pins).await {
                    Ok(m) => {
                        state.pipelines.remember_measured(
                            tenant,
                            name,
                            &info.key,
                            &combo,
                            m.clone(),
                        );
                        m
                    }
                    Err(e) => {
                        out.estimated += 1;
                        out.failures.push(format!("{}: {e}", combo.join(" + ")));
                        continue;
                    }
                }
            }
        };
        for (model, a) in &m.variants {
            out.accuracy.reference.insert(model.clone(), *a);
        }
        out.accuracy.table.insert(combo, m.accuracy);
        out.measured += 1;
    }
    Ok(Some(out))
}

/// Runs the whole set through the pipeline with `pins`, [`CHUNK_ROWS`] rows per query.
async fn run_set(
    state: &ControlPlane,
    tenant: &str,
    prepared: &Prepared,
    set: &ValidationSet,
    output: &str,
    pins: &HashMap<String, String>,
) -> Result<Measured, Error> {
    let mut right = 0usize;
    let mut variants: HashMap<String, f64> = HashMap::new();
    let mut start = 0;
    while start < set.len {
        let end = (start + CHUNK_ROWS).min(set.len);
        let inputs = set
            .inputs
            .iter()
            .map(|t| t.slice_batch(start, end))
            .collect();
        let answer = run::infer_pinned(state, tenant, prepared, inputs, pins).await?;
        right += correct(&answer.outputs, output, &set.labels[start..end]);
        for r in &answer.nodes {
            if let (Some(m), Some(a)) = (&r.model, r.accuracy) {
                variants.insert(m.clone(), a);
            }
        }
        start = end;
    }
    let mut variants: Vec<(String, f64)> = variants.into_iter().collect();
    variants.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(Measured {
        accuracy: right as f64 / set.len.max(1) as f64,
        variants,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_come_most_accurate_first_and_cap() {
        let models = vec![
            vec![("a1".to_string(), 0.9), ("a2".to_string(), 0.6)],
            vec![("b1".to_string(), 0.5), ("b2".to_string(), 0.8)],
        ];
        let (all, left) = combinations(&models, 10);
        assert_eq!(left, 0);
        assert_eq!(all.len(), 4);
        assert_eq!(all[0], vec!["a1".to_string(), "b2".to_string()]);
        assert_eq!(all[3], vec!["a2".to_string(), "b1".to_string()]);
        let (some, left) = combinations(&models, 3);
        assert_eq!((some.len(), left), (3, 1));
        assert!(!some.contains(&vec!["a2".to_string(), "b1".to_string()]));
    }
}
