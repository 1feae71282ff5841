//! Requests as rows: checking a request's batch dimension, concatenating requests into one
//! batch, splitting a batch's outputs back, and cutting an oversized request into chunks.

use infaas_core::{Tensor, TensorData};

use crate::engine::{EngineError, Signature};

/// How a model's requests may be batched, decided once from its signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Batching {
    /// Every input has a dynamic first dimension: requests are rows that can be concatenated.
    Rows,
    /// Some input has a fixed first dimension, no dimension at all, or the model has no
    /// inputs: each request runs alone, as given.
    Whole,
}

impl Batching {
    pub(crate) fn of(signature: &Signature) -> Batching {
        let dynamic_first = |dims: &[Option<usize>]| matches!(dims.first(), Some(None));
        if !signature.inputs.is_empty() && signature.inputs.iter().all(|s| dynamic_first(&s.dims)) {
            Batching::Rows
        } else {
            Batching::Whole
        }
    }
}

/// What must agree for two requests to share a batch: the non-batch dimensions of every
/// input, in the signature's order. Names and element types are fixed by the signature once
/// a request passed `check_inputs`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RowShape(pub(crate) Vec<Vec<usize>>);

/// A request that passed the checks: inputs in the signature's order and its row count.
#[derive(Debug)]
pub(crate) struct Request {
    pub inputs: Vec<Tensor>,
    pub rows: usize,
    pub shape: RowShape,
}

/// Checks a request against the signature ("parse, don't validate"): the inputs the model
/// declares, and under [`Batching::Rows`] one shared first dimension of at least one row.
pub(crate) fn parse_request(
    signature: &Signature,
    batching: Batching,
    inputs: Vec<Tensor>,
) -> Result<Request, EngineError> {
    signature.check_inputs(&inputs)?;
    let inputs = in_signature_order(signature, inputs);
    let shape = RowShape(
        inputs
            .iter()
            .map(|t| t.shape.get(1..).unwrap_or_default().to_vec())
            .collect(),
    );
    let rows = match batching {
        Batching::Whole => inputs.first().map_or(1, Tensor::batch_len),
        Batching::Rows => shared_rows(&inputs)?,
    };
    Ok(Request {
        inputs,
        rows,
        shape,
    })
}

fn in_signature_order(signature: &Signature, inputs: Vec<Tensor>) -> Vec<Tensor> {
    let position = |t: &Tensor| signature.inputs.iter().position(|s| s.name == t.name);
    let mut inputs = inputs;
    inputs.sort_by_key(position);
    inputs
}

fn shared_rows(inputs: &[Tensor]) -> Result<usize, EngineError> {
    let Some(first) = inputs.first() else {
        return Ok(1);
    };
    let rows = first.batch_len();
    if rows == 0 {
        return Err(bad_input(
            &first.name,
            "has 0 rows; a request carries at least one row along the first dimension",
        ));
    }
    for t in &inputs[1..] {
        if t.batch_len() != rows {
            return Err(bad_input(
                &t.name,
                format!(
                    "has {} rows but '{}' has {rows}; all inputs of a request share the first \
                     (batch) dimension",
                    t.batch_len(),
                    first.name
                ),
            ));
        }
    }
    Ok(rows)
}

fn bad_input(tensor: &str, reason: impl Into<String>) -> EngineError {
    EngineError::BadInput {
        tensor: tensor.to_string(),
        reason: reason.into(),
    }
}

/// Concatenates requests (each a list of tensors in the same order, with equal non-batch
/// dimensions and element types) along the first dimension.
pub(crate) fn concat(parts: Vec<Vec<Tensor>>) -> Result<Vec<Tensor>, EngineError> {
    let mut parts = parts.into_iter();
    let Some(mut batch) = parts.next() else {
        return Ok(Vec::new());
    };
    for part in parts {
        if part.len() != batch.len() {
            return Err(bad_input(
                "",
                "requests with different inputs cannot be concatenated",
            ));
        }
        for (dst, src) in batch.iter_mut().zip(part) {
            append_rows(dst, src)?;
        }
    }
    Ok(batch)
}

/// Appends the rows of `src` to `dst` (same element type and non-batch dimensions).
fn append_rows(dst: &mut Tensor, src: Tensor) -> Result<(), EngineError> {
    if dst.shape.is_empty() || dst.shape.get(1..) != src.shape.get(1..) {
        return Err(bad_input(
            &src.name,
            format!(
                "shape {:?} cannot be stacked under shape {:?}",
                src.shape, dst.shape
            ),
        ));
    }
    match (&mut dst.data, src.data) {
        (TensorData::Bool(a), TensorData::Bool(b)) => a.extend(b),
        (TensorData::Uint8(a), TensorData::Uint8(b)) => a.extend(b),
        (TensorData::Int8(a), TensorData::Int8(b)) => a.extend(b),
        (TensorData::Int16(a), TensorData::Int16(b)) => a.extend(b),
        (TensorData::Int32(a), TensorData::Int32(b)) => a.extend(b),
        (TensorData::Int64(a), TensorData::Int64(b)) => a.extend(b),
        (TensorData::Fp32(a), TensorData::Fp32(b)) => a.extend(b),
        (TensorData::Fp64(a), TensorData::Fp64(b)) => a.extend(b),
        (TensorData::Bytes(a), TensorData::Bytes(b)) => a.extend(b),
        (a, b) => {
            return Err(bad_input(
                &src.name,
                format!(
                    "{} rows cannot be stacked under {} rows",
                    b.dtype(),
                    a.dtype()
                ),
            ))
        }
    }
    dst.shape[0] += src.shape[0];
    Ok(())
}

/// Splits a batch's outputs back per request (`rows[i]` rows for request `i`, in order).
/// Outputs whose first dimension equals the batch's rows are cut into rows; any other output
/// (no batch dimension) is copied to every request.
pub(crate) fn split(outputs: Vec<Tensor>, rows: &[usize]) -> Vec<Vec<Tensor>> {
    if rows.len() == 1 {
        return vec![outputs];
    }
    let total: usize = rows.iter().sum();
    let mut per_request: Vec<Vec<Tensor>> = rows
        .iter()
        .map(|_| Vec::with_capacity(outputs.len()))
        .collect();
    for output in &outputs {
        let batched = output.shape.first() == Some(&total);
        let mut start = 0;
        for (request, &n) in per_request.iter_mut().zip(rows) {
            request.push(if batched {
                output.slice_batch(start, start + n)
            } else {
                output.clone()
            });
            start += n;
        }
    }
    per_request
}

/// Cuts a request into runs of at most `max_rows` rows.
pub(crate) fn chunks(inputs: &[Tensor], rows: usize, max_rows: usize) -> Vec<Vec<Tensor>> {
    let max_rows = max_rows.max(1);
    (0..rows)
        .step_by(max_rows)
        .map(|start| {
            let end = (start + max_rows).min(rows);
            inputs.iter().map(|t| t.slice_batch(start, end)).collect()
        })
        .collect()
}

/// Joins the outputs of a request's chunks (`rows[i]` rows in chunk `i`): outputs whose first
/// dimension is the chunk's rows are concatenated; any other output is taken from the first
/// chunk.
pub(crate) fn join(parts: Vec<Vec<Tensor>>, rows: &[usize]) -> Result<Vec<Tensor>, EngineError> {
    let mut parts = parts.into_iter().zip(rows);
    let Some((mut joined, &first_rows)) = parts.next() else {
        return Ok(Vec::new());
    };
    let batched: Vec<bool> = joined
        .iter()
        .map(|t| t.shape.first() == Some(&first_rows))
        .collect();
    for (part, &n) in parts {
        for ((dst, src), &is_batched) in joined.iter_mut().zip(part).zip(&batched) {
            if is_batched && src.shape.first() == Some(&n) {
                append_rows(dst, src)?;
            }
        }
    }
    Ok(joined)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use infaas_core::DataType;

    use super::*;
    use crate::engine::TensorSpec;

    fn sig() -> Signature {
        Signature {
            inputs: vec![
                TensorSpec::new("a", DataType::Fp32, vec![None, Some(2)]),
                TensorSpec::new("b", DataType::Int64, vec![None]),
            ],
            outputs: vec![],
        }
    }

    fn a(rows: usize, base: f32) -> Tensor {
        let data = (0..rows * 2).map(|i| base + i as f32).collect();
        Tensor::new("a", vec![rows, 2], TensorData::Fp32(data)).unwrap()
    }

    fn b(rows: usize, base: i64) -> Tensor {
        let data = (0..rows as i64).map(|i| base + i).collect();
        Tensor::new("b", vec![rows], TensorData::Int64(data)).unwrap()
    }

    fn reason(err: EngineError) -> String {
        match err {
            EngineError::BadInput { tensor, reason } => format!("{tensor}: {reason}"),
            other => panic!("expected BadInput, got {other:?}"),
        }
    }

    #[test]
    fn batching_needs_a_dynamic_first_dimension_everywhere() {
        assert_eq!(Batching::of(&sig()), Batching::Rows);
        let mut fixed = sig();
        fixed.inputs[1].dims = vec![Some(3)];
        assert_eq!(Batching::of(&fixed), Batching::Whole);
        let mut scalar = sig();
        scalar.inputs[1].dims = vec![];
        assert_eq!(Batching::of(&scalar), Batching::Whole);
        assert_eq!(Batching::of(&Signature::default()), Batching::Whole);
    }

    #[test]
    fn parse_orders_inputs_and_counts_rows() {
        let r = parse_request(&sig(), Batching::Rows, vec![b(3, 0), a(3, 0.0)]).unwrap();
        assert_eq!(r.rows, 3);
        assert_eq!(r.inputs[0].name, "a");
        assert_eq!(r.inputs[1].name, "b");
        assert_eq!(r.shape, RowShape(vec![vec![2], vec![]]));
    }

    #[test]
    fn parse_rejects_disagreeing_or_empty_batches() {
        let err = parse_request(&sig(), Batching::Rows, vec![a(2, 0.0), b(3, 0)]).unwrap_err();
        let text = reason(err);
        assert!(text.starts_with("b: has 3 rows but 'a' has 2"), "{text}");
        let err = parse_request(&sig(), Batching::Rows, vec![a(0, 0.0), b(0, 0)]).unwrap_err();
        assert!(reason(err).contains("has 0 rows"));
        // The signature's own checks come first.
        let err = parse_request(&sig(), Batching::Rows, vec![a(1, 0.0)]).unwrap_err();
        assert!(reason(err).starts_with("b: missing"));
    }

    #[test]
    fn concat_then_split_gives_every_request_its_rows() {
        let requests = vec![vec![a(1, 0.0), b(1, 10)], vec![a(2, 100.0), b(2, 20)]];
        let batch = concat(requests.clone()).unwrap();
        assert_eq!(batch[0].shape, vec![3, 2]);
        assert_eq!(
            batch[1].data,
            TensorData::Int64(vec![10, 20, 21]),
            "rows stay in request order"
        );
        let scalar = Tensor::new("total", vec![], TensorData::Fp32(vec![7.0])).unwrap();
        let mut outputs = batch.clone();
        outputs.push(scalar.clone());
        let back = split(outputs, &[1, 2]);
        assert_eq!(back.len(), 2);
        for (request, got) in requests.iter().zip(&back) {
            assert_eq!(&got[..2], &request[..]);
            assert_eq!(
                got[2], scalar,
                "outputs without a batch dimension are copied"
            );
        }
    }

    #[test]
    fn concat_refuses_mismatched_rows_instead_of_panicking() {
        let wide = Tensor::new("a", vec![1, 3], TensorData::Fp32(vec![0.0; 3])).unwrap();
        let err = concat(vec![vec![a(1, 0.0)], vec![wide]]).unwrap_err();
        assert!(reason(err).contains("cannot be stacked"));
        let ints = Tensor::new("a", vec![1, 2], TensorData::Int64(vec![0; 2])).unwrap();
        let err = concat(vec![vec![a(1, 0.0)], vec![ints]]).unwrap_err();
        assert!(reason(err).contains("INT64 rows cannot be stacked under FP32"));
    }

    #[test]
    fn chunks_and_join_round_trip() {
        let inputs = vec![a(5, 0.0), b(5, 0)];
        let parts = chunks(&inputs, 5, 2);
        let rows: Vec<usize> = parts.iter().map(|p| p[0].batch_len()).collect();
        assert_eq!(rows, vec![2, 2, 1]);
        let scalar = Tensor::new("s", vec![], TensorData::Int32(vec![1])).unwrap();
        let outputs: Vec<Vec<Tensor>> = parts
            .into_iter()
            .map(|mut p| {
                p.push(scalar.clone());
                p
            })
            .collect();
        let joined = join(outputs, &rows).unwrap();
        assert_eq!(&joined[..2], &inputs[..]);
        assert_eq!(joined[2], scalar);
    }
}
