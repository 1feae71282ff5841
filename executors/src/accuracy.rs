//! Top-1 accuracy of a model on a validation set.
//!
//! The prediction comes from one output: the one named by the caller, else a label output
//! (integer or string, shape `[N]` or `[N, 1]`), else a score output `[N, C]` whose
//! row-wise argmax is the predicted class.

use infaas_core::{DataType, Tensor, TensorData};
use serde::{Deserialize, Serialize};

use crate::engine::{Engine, EngineError, Signature, TensorSpec};
use crate::validation::ValidationSet;

/// Rows per run when the model's batch dimension is dynamic.
pub const DEFAULT_BATCH: usize = 256;

/// How a prediction is read from the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PredictionKind {
    /// The output holds the predicted label per row.
    Label,
    /// The output holds one score per class; the highest wins.
    Argmax,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AccuracyReport {
    /// `correct / total`, in `[0, 1]`.
    pub accuracy: f64,
    pub correct: usize,
    pub total: usize,
    pub output_used: String,
    pub kind: PredictionKind,
}

#[derive(Debug, Clone, Default)]
pub struct AccuracyOptions {
    /// Output holding the prediction; chosen automatically when `None`.
    pub output: Option<String>,
    /// Class names indexed by label: string predictions are compared with `label_names[y]`.
    /// Without them string predictions must parse as integers.
    pub label_names: Option<Vec<String>>,
    /// Rows per run; 0 means [`DEFAULT_BATCH`]. A fixed batch dimension in the model wins.
    pub batch_size: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum AccuracyError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("the model has no output '{name}'; its outputs are {}", names(.outputs))]
    UnknownOutput { name: String, outputs: Vec<String> },
    #[error("output '{name}' cannot give a class prediction: {reason}")]
    UnusableOutput { name: String, reason: String },
    #[error("no output gives a class prediction (wanted an integer or string label [N] or [N, 1], or float scores [N, C]); the outputs are {}", names(.outputs))]
    NoPredictionOutput { outputs: Vec<String> },
    #[error(
        "label {label} (row {row}) is out of range: output '{output}' scores {classes} classes"
    )]
    LabelOutOfRange {
        label: i64,
        row: usize,
        output: String,
        classes: usize,
    },
    #[error("label {label} (row {row}) has no name: {count} label names were given")]
    NoLabelName {
        label: i64,
        row: usize,
        count: usize,
    },
    #[error("output '{output}' predicted '{value}', which is not an integer; give label names to compare string labels")]
    UnparsableLabel { output: String, value: String },
    #[error("output '{output}' returned shape {shape:?} for a batch of {rows} rows")]
    OutputShape {
        output: String,
        shape: Vec<usize>,
        rows: usize,
    },
}

fn names(outputs: &[String]) -> String {
    let quoted: Vec<String> = outputs.iter().map(|n| format!("'{n}'")).collect();
    quoted.join(", ")
}

/// Chooses the prediction output of a model (see the module documentation).
pub fn prediction_output(
    sig: &Signature,
    declared: Option<&str>,
) -> Result<(String, PredictionKind), AccuracyError> {
    let outputs = || sig.outputs.iter().map(|o| o.name.clone()).collect();
    if let Some(name) = declared {
        let spec = sig
            .output(name)
            .ok_or_else(|| AccuracyError::UnknownOutput {
                name: name.to_string(),
                outputs: outputs(),
            })?;
        return kind_of(spec)
            .map(|kind| (spec.name.clone(), kind))
            .map_err(|reason| AccuracyError::UnusableOutput {
                name: spec.name.clone(),
                reason,
            });
    }
    for wanted in [PredictionKind::Label, PredictionKind::Argmax] {
        if let Some(spec) = sig.outputs.iter().find(|o| kind_of(o) == Ok(wanted)) {
            return Ok((spec.name.clone(), wanted));
        }
    }
    Err(AccuracyError::NoPredictionOutput { outputs: outputs() })
}

fn kind_of(spec: &TensorSpec) -> Result<PredictionKind, String> {
    let label_type = matches!(
        spec.dtype,
        DataType::Int64
            | DataType::Int32
            | DataType::Int16
            | DataType::Int8
            | DataType::Uint8
            | DataType::Bytes
    );
    let score_type = matches!(spec.dtype, DataType::Fp32 | DataType::Fp64);
    match (spec.dims.as_slice(), label_type, score_type) {
        ([_], true, _) => Ok(PredictionKind::Label),
        // A dynamic second dimension is checked when the outputs arrive.
        ([_, Some(1) | None], true, _) => Ok(PredictionKind::Label),
        ([_, Some(1)], _, true) => Err("it scores a single class".to_string()),
        ([_, _], _, true) => Ok(PredictionKind::Argmax),
        (_, true, _) | (_, _, true) => Err(format!(
            "shape {} is neither a label vector [N] / [N, 1] nor scores [N, C]",
            spec.dims_text()
        )),
        _ => Err(format!(
            "{} values are neither labels nor scores",
            spec.dtype
        )),
    }
}

/// Runs the whole set through the model in batches and counts top-1 hits. Blocks; in async
/// code call it from `spawn_blocking`.
pub fn accuracy(
    engine: &Engine,
    set: &ValidationSet,
    opts: &AccuracyOptions,
) -> Result<AccuracyReport, AccuracyError> {
    let sig = engine.signature();
    let (output, kind) = prediction_output(sig, opts.output.as_deref())?;
    let index = sig
        .outputs
        .iter()
        .position(|o| o.name == output)
        .ok_or_else(|| AccuracyError::UnknownOutput {
            name: output.clone(),
            outputs: sig.outputs.iter().map(|o| o.name.clone()).collect(),
        })?;
    let fixed_batch = sig
        .inputs
        .iter()
        .find_map(|i| i.dims.first().copied().flatten());
    let batch = match (fixed_batch, opts.batch_size) {
        (Some(fixed), _) => fixed,
        (None, 0) => DEFAULT_BATCH,
        (None, b) => b,
    }
    .max(1);

    let mut judge = Judge {
        output: &output,
        label_names: opts.label_names.as_deref(),
        classes_checked: false,
    };
    let mut correct = 0;
    let mut start = 0;
    while start < set.len {
        let rows = batch.min(set.len - start);
        // A fixed batch dimension is filled by wrapping around; the extra rows are ignored.
        let run_rows = if fixed_batch.is_some() { batch } else { rows };
        let outputs = engine.run_blocking(set.rows_cyclic(start, run_rows))?;
        let out = outputs
            .get(index)
            .ok_or_else(|| AccuracyError::UnusableOutput {
                name: output.clone(),
                reason: "the engine returned fewer outputs than the signature lists".into(),
            })?;
        let labels = &set.labels[start..start + rows];
        correct += match kind {
            PredictionKind::Label => judge.labels(out, labels, start)?,
            PredictionKind::Argmax => judge.argmax(out, labels, &set.labels)?,
        };
        start += rows;
    }
    Ok(AccuracyReport {
        accuracy: correct as f64 / set.len as f64,
        correct,
        total: set.len,
        output_used: output,
        kind,
    })
}

struct Judge<'a> {
    output: &'a str,
    label_names: Option<&'a [String]>,
    classes_checked: bool,
}

impl Judge<'_> {
    fn shape_error(&self, out: &Tensor, rows: usize) -> AccuracyError {
        AccuracyError::OutputShape {
            output: self.output.to_string(),
            shape: out.shape.clone(),
            rows,
        }
    }

    /// Hits among `labels` (rows `first..` of the set) for a label output.
    fn labels(&self, out: &Tensor, labels: &[i64], first: usize) -> Result<usize, AccuracyError> {
        let per_row = out.row_len();
        if out.batch_len() < labels.len() || (out.shape.len() == 2 && per_row != 1) {
            return Err(self.shape_error(out, labels.len()));
        }
        let mut hits = 0;
        for (i, &y) in labels.iter().enumerate() {
            let hit = match &out.data {
                TensorData::Bytes(v) => match v.get(i) {
                    Some(predicted) => self.string_hit(predicted, y, first + i)?,
                    None => return Err(self.shape_error(out, labels.len())),
                },
                data => data.get_f64(i).is_some_and(|p| p == y as f64),
            };
            hits += usize::from(hit);
        }
        Ok(hits)
    }

    fn string_hit(&self, predicted: &str, y: i64, row: usize) -> Result<bool, AccuracyError> {
        match self.label_names {
            Some(names) => {
                let name = usize::try_from(y).ok().and_then(|i| names.get(i)).ok_or(
                    AccuracyError::NoLabelName {
                        label: y,
                        row,
                        count: names.len(),
                    },
                )?;
                Ok(name == predicted)
            }
            None => predicted
                .trim()
                .parse::<i64>()
                .map(|p| p == y)
                .map_err(|_| AccuracyError::UnparsableLabel {
                    output: self.output.to_string(),
                    value: predicted.to_string(),
                }),
        }
    }

    /// Hits for a score output; on the first batch every label of the set is checked
    /// against the number of classes.
    fn argmax(
        &mut self,
        out: &Tensor,
        labels: &[i64],
        all_labels: &[i64],
    ) -> Result<usize, AccuracyError> {
        let classes = out.row_len();
        if out.shape.len() != 2 || out.batch_len() < labels.len() || classes == 0 {
            return Err(self.shape_error(out, labels.len()));
        }
        if !self.classes_checked {
            if let Some((row, &label)) = all_labels
                .iter()
                .enumerate()
                .find(|(_, &y)| y as u64 >= classes as u64)
            {
                return Err(AccuracyError::LabelOutOfRange {
                    label,
                    row,
                    output: self.output.to_string(),
                    classes,
                });
            }
            self.classes_checked = true;
        }
        let mut hits = 0;
        for (i, &y) in labels.iter().enumerate() {
            let row = (i * classes..(i + 1) * classes).filter_map(|k| out.data.get_f64(k));
            hits += usize::from(argmax(row) == Some(y as usize));
        }
        Ok(hits)
    }
}

/// Index of the first largest value, ignoring NaN (as numpy's argmax on clean data).
fn argmax(values: impl Iterator<Item = f64>) -> Option<usize> {
    let mut best: Option<(usize, f64)> = None;
    for (i, v) in values.enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn sig(outputs: Vec<TensorSpec>) -> Signature {
        Signature {
            inputs: vec![],
            outputs,
        }
    }

    #[test]
    fn prefers_a_label_output_then_scores() {
        let s = sig(vec![
            TensorSpec::new("probabilities", DataType::Fp32, vec![None, Some(10)]),
            TensorSpec::new("label", DataType::Int64, vec![None]),
        ]);
        assert_eq!(
            prediction_output(&s, None).unwrap(),
            ("label".to_string(), PredictionKind::Label)
        );
        assert_eq!(
            prediction_output(&s, Some("probabilities")).unwrap(),
            ("probabilities".to_string(), PredictionKind::Argmax)
        );
        let s = sig(vec![TensorSpec::new(
            "logits",
            DataType::Fp32,
            vec![None, Some(10)],
        )]);
        assert_eq!(
            prediction_output(&s, None).unwrap().1,
            PredictionKind::Argmax
        );
        let s = sig(vec![TensorSpec::new(
            "label",
            DataType::Bytes,
            vec![None, Some(1)],
        )]);
        assert_eq!(
            prediction_output(&s, None).unwrap().1,
            PredictionKind::Label
        );
    }

    #[test]
    fn rejects_unknown_and_unusable_outputs() {
        let s = sig(vec![
            TensorSpec::new("value", DataType::Fp32, vec![None, Some(1)]),
            TensorSpec::new("mask", DataType::Bool, vec![None]),
        ]);
        let msg = prediction_output(&s, Some("nope")).unwrap_err().to_string();
        assert_eq!(
            msg,
            "the model has no output 'nope'; its outputs are 'value', 'mask'"
        );
        let msg = prediction_output(&s, Some("value"))
            .unwrap_err()
            .to_string();
        assert!(msg.contains("scores a single class"), "{msg}");
        let msg = prediction_output(&s, None).unwrap_err().to_string();
        assert!(
            msg.starts_with("no output gives a class prediction"),
            "{msg}"
        );
    }

    #[test]
    fn argmax_takes_the_first_maximum_and_skips_nan() {
        assert_eq!(argmax([0.1, 0.7, 0.7].into_iter()), Some(1));
        assert_eq!(argmax([f64::NAN, -1.0].into_iter()), Some(1));
        assert_eq!(argmax(std::iter::empty()), None);
    }

    fn judge(names: Option<&[String]>) -> Judge<'_> {
        Judge {
            output: "out",
            label_names: names,
            classes_checked: false,
        }
    }

    #[test]
    fn string_labels_use_names_or_parse() {
        let out = Tensor::new(
            "out",
            vec![3],
            TensorData::Bytes(vec!["one".into(), "two".into(), "zero".into()]),
        )
        .unwrap();
        let names: Vec<String> = ["zero", "one", "two"].map(String::from).to_vec();
        assert_eq!(judge(Some(&names)).labels(&out, &[1, 2, 1], 0).unwrap(), 2);
        let err = judge(None).labels(&out, &[1, 2, 1], 0).unwrap_err();
        assert!(err.to_string().contains("predicted 'one'"), "{err}");
        let err = judge(Some(&names[..2]))
            .labels(&out, &[1, 2, 1], 10)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "label 2 (row 11) has no name: 2 label names were given"
        );

        let digits = Tensor::new(
            "out",
            vec![2],
            TensorData::Bytes(vec!["3".into(), "4".into()]),
        )
        .unwrap();
        assert_eq!(judge(None).labels(&digits, &[3, 3], 0).unwrap(), 1);
    }

    #[test]
    fn out_of_range_labels_are_named() {
        let scores = Tensor::new("out", vec![2, 3], TensorData::Fp32(vec![0.0; 6])).unwrap();
        let err = judge(None)
            .argmax(&scores, &[0, 1], &[0, 1, 7])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "label 7 (row 2) is out of range: output 'out' scores 3 classes"
        );
    }
}
