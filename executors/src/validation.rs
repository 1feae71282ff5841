//! Matching a validation set (arrays from an NPZ file) to a model's signature.
//!
//! Parse, don't validate: [`match_validation`] turns loose named arrays into a
//! [`ValidationSet`] whose inputs are named, typed and shaped as the model expects, with one
//! integer label per row. Every rejection names the array and the problem.
//!
//! Naming rules: a single-input model takes array `x` (or an array named like its input);
//! a multi-input model takes `x.<input name>` (or the bare input name). Labels are array `y`.

use infaas_core::{DataType, Tensor, TensorData};

use crate::engine::{Signature, TensorSpec};

/// The name of the label array.
pub const LABELS: &str = "y";
/// The name (or, with multi-input models, the prefix `x.`) of the input arrays.
pub const INPUTS: &str = "x";

/// Inputs and labels ready to feed a model.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidationSet {
    /// Named after the model's inputs, in the model's order; first dimension = `len`.
    pub inputs: Vec<Tensor>,
    /// One non-negative class index per row.
    pub labels: Vec<i64>,
    /// Number of rows (at least 1).
    pub len: usize,
}

impl ValidationSet {
    /// `n` rows starting at row `start`, wrapping around to row 0 when the set runs out
    /// (for fixed batch sizes larger than what is left, and profiling samples).
    pub fn rows_cyclic(&self, start: usize, n: usize) -> Vec<Tensor> {
        self.inputs
            .iter()
            .map(|t| {
                let start = start % self.len.max(1);
                if start + n <= self.len {
                    return t.slice_batch(start, start + n);
                }
                let mut rows = Vec::with_capacity(n);
                let mut at = start;
                let mut left = n;
                while left > 0 {
                    let end = (at + left).min(self.len);
                    rows.push(t.slice_batch(at, end));
                    left -= end - at;
                    at = 0;
                }
                concat_rows(&t.name, &rows)
            })
            .collect()
    }
}

/// Joins tensors of one dtype along the batch dimension.
fn concat_rows(name: &str, parts: &[Tensor]) -> Tensor {
    macro_rules! join {
        ($first:expr; $($variant:ident),*) => {
            match $first {
                $(TensorData::$variant(_) => TensorData::$variant(
                    parts
                        .iter()
                        .flat_map(|p| match &p.data {
                            TensorData::$variant(v) => v.clone(),
                            _ => Vec::new(),
                        })
                        .collect(),
                ),)*
            }
        };
    }
    let Some(first) = parts.first() else {
        return Tensor {
            name: name.to_string(),
            shape: vec![0],
            data: TensorData::Fp32(Vec::new()),
        };
    };
    let mut shape = first.shape.clone();
    if let Some(rows) = shape.first_mut() {
        *rows = parts.iter().map(Tensor::batch_len).sum();
    }
    let data = join!(&first.data; Bool, Uint8, Int8, Int16, Int32, Int64, Fp32, Fp64, Bytes);
    Tensor {
        name: name.to_string(),
        shape,
        data,
    }
}

/// Why a validation set does not fit a model.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValidationError {
    #[error("no validation array for input '{input}' of the model: expected {}; the set holds {}", quoted(.expected), quoted(.available))]
    MissingInput {
        input: String,
        expected: Vec<String>,
        available: Vec<String>,
    },
    #[error("validation arrays {} both match input '{input}' of the model; keep one", quoted(.arrays))]
    Ambiguous { input: String, arrays: Vec<String> },
    #[error("the validation set has no array 'y' (integer class labels); it holds {}", quoted(.available))]
    MissingLabels { available: Vec<String> },
    #[error("input '{input}' of the model is a scalar; validation needs a batch dimension")]
    ScalarInput { input: String },
    #[error("validation array '{array}' holds {got} values; input '{input}' of the model expects {expected}")]
    Dtype {
        array: String,
        input: String,
        expected: DataType,
        got: DataType,
    },
    #[error("validation array '{array}' has rank {got} (shape {shape:?}); input '{input}' of the model expects rank {expected} (shape {model_shape})")]
    Rank {
        array: String,
        input: String,
        got: usize,
        shape: Vec<usize>,
        expected: usize,
        model_shape: String,
    },
    #[error("validation array '{array}' has {got} features per row; input '{input}' of the model expects {expected}")]
    Features {
        array: String,
        input: String,
        got: usize,
        expected: usize,
    },
    #[error("validation array '{array}' has size {got} in dimension {axis}; input '{input}' of the model expects {expected} (shape {model_shape})")]
    Dimension {
        array: String,
        input: String,
        axis: usize,
        got: usize,
        expected: usize,
        model_shape: String,
    },
    #[error("validation array '{array}' has {got} rows but 'y' has {expected} labels")]
    Rows {
        array: String,
        got: usize,
        expected: usize,
    },
    #[error("validation array '{array}' has no rows")]
    Empty { array: String },
    #[error("validation array '{array}' holds {got} values; labels must be integers")]
    LabelType { array: String, got: DataType },
    #[error("validation array '{array}' holds {value} at row {row}; labels must be whole numbers")]
    FractionalLabel {
        array: String,
        row: usize,
        value: f64,
    },
    #[error(
        "validation array '{array}' has shape {shape:?}; labels must be a vector [N] or [N, 1]"
    )]
    LabelShape { array: String, shape: Vec<usize> },
    #[error("validation array '{array}' has a negative label {value} at row {row}")]
    NegativeLabel {
        array: String,
        row: usize,
        value: i64,
    },
    #[error("validation array '{array}': shape {shape:?} holds {expected} elements but {got} are stored")]
    Corrupt {
        array: String,
        shape: Vec<usize>,
        expected: usize,
        got: usize,
    },
}

fn quoted(names: &[String]) -> String {
    if names.is_empty() {
        return "no arrays".to_string();
    }
    let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    names.join(", ")
}

/// Picks and checks the arrays a model needs from a validation set. Arrays the model does not
/// use are ignored; float64 arrays are converted for float32 inputs.
pub fn match_validation(
    sig: &Signature,
    arrays: Vec<Tensor>,
) -> Result<ValidationSet, ValidationError> {
    let available: Vec<String> = arrays.iter().map(|a| a.name.clone()).collect();
    for a in &arrays {
        let expected: usize = a.shape.iter().product();
        if expected != a.data.len() {
            return Err(ValidationError::Corrupt {
                array: a.name.clone(),
                shape: a.shape.clone(),
                expected,
                got: a.data.len(),
            });
        }
    }
    let mut arrays: Vec<Option<Tensor>> = arrays.into_iter().map(Some).collect();
    let mut take = |name: &str| -> Option<Tensor> {
        arrays
            .iter_mut()
            .find(|a| a.as_ref().is_some_and(|a| a.name == name))
            .and_then(Option::take)
    };

    let y = take(LABELS).ok_or_else(|| ValidationError::MissingLabels {
        available: available.clone(),
    })?;
    let labels = labels(&y)?;
    let len = labels.len();
    if len == 0 {
        return Err(ValidationError::Empty {
            array: LABELS.to_string(),
        });
    }

    let single = sig.inputs.len() == 1;
    let mut inputs = Vec::with_capacity(sig.inputs.len());
    for spec in &sig.inputs {
        let primary = if single {
            INPUTS.to_string()
        } else {
            format!("{INPUTS}.{}", spec.name)
        };
        let mut candidates = vec![primary];
        if candidates[0] != spec.name {
            candidates.push(spec.name.clone());
        }
        let present: Vec<String> = candidates
            .iter()
            .filter(|c| available.contains(c))
            .cloned()
            .collect();
        if present.len() > 1 {
            return Err(ValidationError::Ambiguous {
                input: spec.name.clone(),
                arrays: present,
            });
        }
        let array = present.first().and_then(|name| take(name)).ok_or_else(|| {
            ValidationError::MissingInput {
                input: spec.name.clone(),
                expected: candidates.clone(),
                available: available.clone(),
            }
        })?;
        inputs.push(fit_input(spec, array, len)?);
    }
    Ok(ValidationSet {
        inputs,
        labels,
        len,
    })
}

fn fit_input(spec: &TensorSpec, array: Tensor, len: usize) -> Result<Tensor, ValidationError> {
    let array_name = array.name.clone();
    if spec.dims.is_empty() {
        return Err(ValidationError::ScalarInput {
            input: spec.name.clone(),
        });
    }
    if array.shape.len() != spec.dims.len() {
        return Err(ValidationError::Rank {
            array: array_name,
            input: spec.name.clone(),
            got: array.shape.len(),
            shape: array.shape,
            expected: spec.dims.len(),
            model_shape: spec.dims_text(),
        });
    }
    // The first dimension is the batch: it is checked against the labels, not the model.
    for (axis, (&got, want)) in array.shape.iter().zip(&spec.dims).enumerate().skip(1) {
        let Some(expected) = *want else { continue };
        if got == expected {
            continue;
        }
        return Err(if spec.dims.len() == 2 {
            ValidationError::Features {
                array: array_name,
                input: spec.name.clone(),
                got,
                expected,
            }
        } else {
            ValidationError::Dimension {
                array: array_name,
                input: spec.name.clone(),
                axis,
                got,
                expected,
                model_shape: spec.dims_text(),
            }
        });
    }
    let rows = array.batch_len();
    if rows != len {
        return Err(if rows == 0 {
            ValidationError::Empty { array: array_name }
        } else {
            ValidationError::Rows {
                array: array_name,
                got: rows,
                expected: len,
            }
        });
    }
    let data = match (spec.dtype, array.data) {
        (DataType::Fp32, TensorData::Fp64(v)) => {
            TensorData::Fp32(v.into_iter().map(|x| x as f32).collect())
        }
        (want, data) if data.dtype() == want => data,
        (want, data) => {
            return Err(ValidationError::Dtype {
                array: array_name,
                input: spec.name.clone(),
                expected: want,
                got: data.dtype(),
            })
        }
    };
    Ok(Tensor {
        name: spec.name.clone(),
        shape: array.shape,
        data,
    })
}

fn labels(y: &Tensor) -> Result<Vec<i64>, ValidationError> {
    let array = || y.name.clone();
    if !matches!(y.shape.as_slice(), [_] | [_, 1]) {
        return Err(ValidationError::LabelShape {
            array: array(),
            shape: y.shape.clone(),
        });
    }
    let values: Vec<i64> = match &y.data {
        TensorData::Uint8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::Int8(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::Int16(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::Int32(v) => v.iter().map(|&x| i64::from(x)).collect(),
        TensorData::Int64(v) => v.clone(),
        TensorData::Fp32(_) | TensorData::Fp64(_) => {
            let mut out = Vec::with_capacity(y.data.len());
            for row in 0..y.data.len() {
                let value = y.data.get_f64(row).unwrap_or(f64::NAN);
                // Whole numbers only; 2^53 bounds what a float holds exactly.
                if value.fract() != 0.0 || !value.is_finite() || value.abs() > 9.0e15 {
                    return Err(ValidationError::FractionalLabel {
                        array: array(),
                        row,
                        value,
                    });
                }
                out.push(value as i64);
            }
            out
        }
        other => {
            return Err(ValidationError::LabelType {
                array: array(),
                got: other.dtype(),
            })
        }
    };
    if let Some((row, &value)) = values.iter().enumerate().find(|(_, &v)| v < 0) {
        return Err(ValidationError::NegativeLabel {
            array: array(),
            row,
            value,
        });
    }
    Ok(values)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn one_input() -> Signature {
        Signature {
            inputs: vec![TensorSpec::new(
                "input",
                DataType::Fp32,
                vec![None, Some(4)],
            )],
            outputs: vec![],
        }
    }

    fn two_inputs() -> Signature {
        Signature {
            inputs: vec![
                TensorSpec::new("left", DataType::Fp32, vec![None, Some(2)]),
                TensorSpec::new("right", DataType::Fp32, vec![None, Some(2)]),
            ],
            outputs: vec![],
        }
    }

    fn arr(name: &str, shape: Vec<usize>, data: TensorData) -> Tensor {
        Tensor::new(name, shape, data).unwrap()
    }

    fn x(rows: usize, cols: usize) -> Tensor {
        arr(
            "x",
            vec![rows, cols],
            TensorData::Fp32((0..rows * cols).map(|v| v as f32).collect()),
        )
    }

    fn y(labels: Vec<i64>) -> Tensor {
        arr("y", vec![labels.len()], TensorData::Int64(labels))
    }

    fn err(sig: &Signature, arrays: Vec<Tensor>) -> String {
        match_validation(sig, arrays).unwrap_err().to_string()
    }

    #[test]
    fn single_input_takes_x_and_renames_it() {
        let set = match_validation(&one_input(), vec![y(vec![0, 1, 2]), x(3, 4)]).unwrap();
        assert_eq!(set.len, 3);
        assert_eq!(set.labels, vec![0, 1, 2]);
        assert_eq!(set.inputs[0].name, "input");
        assert_eq!(set.inputs[0].shape, vec![3, 4]);
    }

    #[test]
    fn single_input_takes_an_array_named_like_the_input() {
        let mut a = x(2, 4);
        a.name = "input".into();
        let set = match_validation(&one_input(), vec![a, y(vec![1, 1])]).unwrap();
        assert_eq!(set.inputs[0].name, "input");
    }

    #[test]
    fn both_names_present_is_ambiguous() {
        let mut a = x(2, 4);
        a.name = "input".into();
        let msg = err(&one_input(), vec![a, x(2, 4), y(vec![1, 1])]);
        assert!(msg.contains("'x', 'input'"), "{msg}");
    }

    #[test]
    fn multi_input_takes_prefixed_or_bare_names_in_model_order() {
        let mut right = x(2, 2);
        right.name = "x.right".into();
        let mut left = x(2, 2);
        left.name = "left".into();
        let set = match_validation(&two_inputs(), vec![right, y(vec![0, 1]), left]).unwrap();
        let names: Vec<&str> = set.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, vec!["left", "right"]);
    }

    #[test]
    fn missing_input_lists_what_would_fit() {
        let mut left = x(2, 2);
        left.name = "x.left".into();
        let msg = err(&two_inputs(), vec![left, y(vec![0, 1])]);
        assert_eq!(
            msg,
            "no validation array for input 'right' of the model: expected 'x.right', 'right'; \
             the set holds 'x.left', 'y'"
        );
    }

    #[test]
    fn feature_mismatch_names_array_and_input() {
        let msg = err(&one_input(), vec![x(2, 3), y(vec![0, 1])]);
        assert_eq!(
            msg,
            "validation array 'x' has 3 features per row; input 'input' of the model expects 4"
        );
    }

    #[test]
    fn rank_mismatch_is_rejected() {
        let a = arr("x", vec![8], TensorData::Fp32(vec![0.0; 8]));
        let msg = err(&one_input(), vec![a, y(vec![0; 8])]);
        assert!(msg.contains("validation array 'x' has rank 1"), "{msg}");
        assert!(msg.contains("expects rank 2 (shape [?, 4])"), "{msg}");
    }

    #[test]
    fn row_count_must_match_labels() {
        let msg = err(&one_input(), vec![x(3, 4), y(vec![0, 1])]);
        assert_eq!(msg, "validation array 'x' has 3 rows but 'y' has 2 labels");
    }

    #[test]
    fn float64_inputs_are_converted_other_dtypes_rejected() {
        let a = arr("x", vec![1, 4], TensorData::Fp64(vec![0.5; 4]));
        let set = match_validation(&one_input(), vec![a, y(vec![3])]).unwrap();
        assert_eq!(set.inputs[0].data, TensorData::Fp32(vec![0.5; 4]));

        let a = arr("x", vec![1, 4], TensorData::Int32(vec![1; 4]));
        let msg = err(&one_input(), vec![a, y(vec![3])]);
        assert_eq!(
            msg,
            "validation array 'x' holds INT32 values; input 'input' of the model expects FP32"
        );
    }

    #[test]
    fn labels_accept_any_int_type_column_vectors_and_whole_floats() {
        for labels in [
            arr("y", vec![2], TensorData::Uint8(vec![1, 2])),
            arr("y", vec![2, 1], TensorData::Int32(vec![1, 2])),
            arr("y", vec![2], TensorData::Fp64(vec![1.0, 2.0])),
        ] {
            let set = match_validation(&one_input(), vec![x(2, 4), labels]).unwrap();
            assert_eq!(set.labels, vec![1, 2]);
        }
    }

    #[test]
    fn bad_labels_are_rejected_with_the_reason() {
        let cases = [
            (
                arr("y", vec![2], TensorData::Fp32(vec![1.0, 2.5])),
                "validation array 'y' holds 2.5 at row 1; labels must be whole numbers",
            ),
            (
                arr("y", vec![2], TensorData::Int64(vec![1, -1])),
                "validation array 'y' has a negative label -1 at row 1",
            ),
            (
                arr("y", vec![1, 2], TensorData::Int64(vec![1, 1])),
                "validation array 'y' has shape [1, 2]; labels must be a vector [N] or [N, 1]",
            ),
            (
                arr("y", vec![2], TensorData::Bool(vec![true, false])),
                "validation array 'y' holds BOOL values; labels must be integers",
            ),
        ];
        for (labels, want) in cases {
            assert_eq!(err(&one_input(), vec![x(2, 4), labels]), want);
        }
    }

    #[test]
    fn missing_labels_and_empty_sets_are_rejected() {
        let msg = err(&one_input(), vec![x(2, 4)]);
        assert_eq!(
            msg,
            "the validation set has no array 'y' (integer class labels); it holds 'x'"
        );
        let msg = err(&one_input(), vec![x(0, 4), y(vec![])]);
        assert_eq!(msg, "validation array 'y' has no rows");
        let msg = err(&one_input(), vec![]);
        assert!(msg.contains("holds no arrays"), "{msg}");
    }

    #[test]
    fn rows_cyclic_wraps_around() {
        let set = match_validation(&one_input(), vec![x(3, 4), y(vec![0, 1, 2])]).unwrap();
        let rows = set.rows_cyclic(2, 4);
        assert_eq!(rows[0].shape, vec![4, 4]);
        let TensorData::Fp32(v) = &rows[0].data else {
            panic!("dtype changed")
        };
        let firsts: Vec<f32> = v.chunks(4).map(|r| r[0]).collect();
        assert_eq!(firsts, vec![8.0, 0.0, 4.0, 8.0]);
        assert_eq!(set.rows_cyclic(0, 2)[0].shape, vec![2, 4]);
    }
}
