//! Row bookkeeping of a pipeline query: which of the request's rows each node ran on, the
//! switch conditions that choose them, and the combiners that merge several nodes' outputs.
//! Pure functions over tensors.

use infaas_core::pipeline::{Combiner, Condition};
use infaas_core::{Tensor, TensorData};

/// What a node produced: its outputs for the request's rows `rows` (sorted), in that order.
#[derive(Debug, Clone, Default)]
pub struct NodeRows {
    pub rows: Vec<usize>,
    pub outputs: Vec<Tensor>,
}

impl NodeRows {
    pub fn output(&self, name: &str) -> Option<&Tensor> {
        self.outputs.iter().find(|t| t.name == name)
    }
}

fn pick<T: Clone>(v: &[T], row_len: usize, idx: &[usize]) -> Vec<T> {
    let mut out = Vec::with_capacity(idx.len() * row_len);
    for &i in idx {
        out.extend_from_slice(&v[i * row_len..(i + 1) * row_len]);
    }
    out
}

/// The tensor's rows at positions `idx` (positions within the tensor, not request rows).
pub fn take(t: &Tensor, idx: &[usize]) -> Tensor {
    let r = t.row_len();
    let data = match &t.data {
        TensorData::Bool(v) => TensorData::Bool(pick(v, r, idx)),
        TensorData::Uint8(v) => TensorData::Uint8(pick(v, r, idx)),
        TensorData::Int8(v) => TensorData::Int8(pick(v, r, idx)),
        TensorData::Int16(v) => TensorData::Int16(pick(v, r, idx)),
        TensorData::Int32(v) => TensorData::Int32(pick(v, r, idx)),
        TensorData::Int64(v) => TensorData::Int64(pick(v, r, idx)),
        TensorData::Fp32(v) => TensorData::Fp32(pick(v, r, idx)),
        TensorData::Fp64(v) => TensorData::Fp64(pick(v, r, idx)),
        TensorData::Bytes(v) => TensorData::Bytes(pick(v, r, idx)),
    };
    let mut shape = t.shape.clone();
    if let Some(first) = shape.first_mut() {
        *first = idx.len();
    }
    Tensor {
        name: t.name.clone(),
        shape,
        data,
    }
}

/// Positions in `have` (sorted request rows) of the request rows `want` (a sorted subset).
pub fn positions(have: &[usize], want: &[usize]) -> Vec<usize> {
    want.iter()
        .filter_map(|r| have.binary_search(r).ok())
        .collect()
}

/// Rows present in both sorted lists.
pub fn intersect(a: &[usize], b: &[usize]) -> Vec<usize> {
    a.iter()
        .copied()
        .filter(|r| b.binary_search(r).is_ok())
        .collect()
}

fn row_values(t: &Tensor, i: usize) -> Vec<f64> {
    let r = t.row_len().max(1);
    (i * r..(i + 1) * r)
        .filter_map(|k| t.data.get_f64(k))
        .collect()
}

/// The row's label: the integer itself for a one-value integer row, else the argmax.
pub fn label(t: &Tensor, i: usize) -> Option<i64> {
    let v = row_values(t, i);
    let integer = matches!(
        t.data,
        TensorData::Int64(_)
            | TensorData::Int32(_)
            | TensorData::Int16(_)
            | TensorData::Int8(_)
            | TensorData::Uint8(_)
    );
    if integer && v.len() == 1 {
        return Some(v[0] as i64);
    }
    let mut best: Option<(usize, f64)> = None;
    for (k, x) in v.iter().enumerate() {
        if best.is_none_or(|(_, b)| *x > b) {
            best = Some((k, *x));
        }
    }
    best.map(|(k, _)| k as i64)
}

/// The row's top probability: the largest value when the row is a distribution (values in
/// [0, 1] summing to 1 within 1e-3), else the largest softmax probability.
pub fn top_probability(t: &Tensor, i: usize) -> Option<f64> {
    let v = row_values(t, i);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return None;
    }
    let sum: f64 = v.iter().sum();
    if v.iter().all(|x| (0.0..=1.0).contains(x)) && (sum - 1.0).abs() < 1e-3 {
        return Some(max);
    }
    let denom: f64 = v.iter().map(|x| (x - max).exp()).sum();
    Some(1.0 / denom)
}

/// The request rows of `source` (its rows and tensor) for which `c` holds.
pub fn condition_rows(c: &Condition, rows: &[usize], t: &Tensor) -> Vec<usize> {
    rows.iter()
        .enumerate()
        .filter(|(i, _)| match (&c.label_in, c.top_probability_below) {
            (Some(labels), _) => label(t, *i).is_some_and(|l| labels.contains(&l)),
            (None, Some(th)) => top_probability(t, *i).is_some_and(|p| p < th),
            (None, None) => true,
        })
        .map(|(_, r)| *r)
        .collect()
}

/// Merges `sources` (each its request rows and tensor), row by row, into tensor `name`.
pub fn combine(c: Combiner, sources: &[(&[usize], &Tensor)], name: &str) -> NodeRows {
    let mut all: Vec<usize> = sources
        .iter()
        .flat_map(|(r, _)| r.iter().copied())
        .collect();
    all.sort_unstable();
    all.dedup();
    let rows: Vec<usize> = match c {
        Combiner::Concat => all
            .into_iter()
            .filter(|r| sources.iter().all(|(rs, _)| rs.binary_search(r).is_ok()))
            .collect(),
        _ => all,
    };
    let at = |s: usize, r: usize| sources[s].0.binary_search(&r).ok();
    let tensor = match c {
        Combiner::First => {
            let mut parts = Vec::with_capacity(rows.len());
            for &r in &rows {
                if let Some((s, i)) = (0..sources.len()).find_map(|s| at(s, r).map(|i| (s, i))) {
                    parts.push(take(sources[s].1, &[i]));
                }
            }
            stack(&parts, name)
        }
        Combiner::Mean => {
            let width = sources[0].1.row_len();
            let mut data = Vec::with_capacity(rows.len() * width);
            for &r in &rows {
                let mut acc = vec![0.0f64; width];
                let mut n = 0.0;
                for (s, (_, t)) in sources.iter().enumerate() {
                    if let Some(i) = at(s, r) {
                        for (a, x) in acc.iter_mut().zip(row_values(t, i)) {
                            *a += x;
                        }
                        n += 1.0;
                    }
                }
                data.extend(acc.iter().map(|a| a / n));
            }
            let mut shape = sources[0].1.shape.clone();
            shape[0] = rows.len();
            let data = match sources[0].1.data {
                TensorData::Fp64(_) => TensorData::Fp64(data),
                _ => TensorData::Fp32(data.iter().map(|x| *x as f32).collect()),
            };
            Tensor {
                name: name.into(),
                shape,
                data,
            }
        }
        Combiner::Vote => {
            let mut labels = Vec::with_capacity(rows.len());
            for &r in &rows {
                let votes: Vec<i64> = (0..sources.len())
                    .filter_map(|s| at(s, r).and_then(|i| label(sources[s].1, i)))
                    .collect();
                // The most frequent label; among equals, the one voted first.
                let winner = votes
                    .iter()
                    .enumerate()
                    .max_by(|(ia, a), (ib, b)| {
                        let ca = votes.iter().filter(|v| v == a).count();
                        let cb = votes.iter().filter(|v| v == b).count();
                        ca.cmp(&cb).then(ib.cmp(ia))
                    })
                    .map_or(-1, |(_, l)| *l);
                labels.push(winner);
            }
            Tensor {
                name: name.into(),
                shape: vec![rows.len()],
                data: TensorData::Int64(labels),
            }
        }
        Combiner::Concat => {
            let mut parts = Vec::with_capacity(rows.len());
            for &r in &rows {
                let pieces: Vec<Tensor> = (0..sources.len())
                    .filter_map(|s| at(s, r).map(|i| take(sources[s].1, &[i])))
                    .collect();
                parts.push(concat_last(&pieces));
            }
            stack(&parts, name)
        }
    };
    NodeRows {
        rows,
        outputs: vec![tensor],
    }
}

/// One-row tensors of one type stacked into one tensor.
fn stack(parts: &[Tensor], name: &str) -> Tensor {
    let Some(first) = parts.first() else {
        return Tensor {
            name: name.into(),
            shape: vec![0],
            data: TensorData::Fp32(Vec::new()),
        };
    };
    let mut shape = first.shape.clone();
    shape[0] = parts.len();
    let mut data = first.data.clone();
    for p in &parts[1..] {
        append(&mut data, &p.data);
    }
    Tensor {
        name: name.into(),
        shape,
        data,
    }
}

fn append(into: &mut TensorData, from: &TensorData) {
    match (into, from) {
        (TensorData::Bool(a), TensorData::Bool(b)) => a.extend_from_slice(b),
        (TensorData::Uint8(a), TensorData::Uint8(b)) => a.extend_from_slice(b),
        (TensorData::Int8(a), TensorData::Int8(b)) => a.extend_from_slice(b),
        (TensorData::Int16(a), TensorData::Int16(b)) => a.extend_from_slice(b),
        (TensorData::Int32(a), TensorData::Int32(b)) => a.extend_from_slice(b),
        (TensorData::Int64(a), TensorData::Int64(b)) => a.extend_from_slice(b),
        (TensorData::Fp32(a), TensorData::Fp32(b)) => a.extend_from_slice(b),
        (TensorData::Fp64(a), TensorData::Fp64(b)) => a.extend_from_slice(b),
        (TensorData::Bytes(a), TensorData::Bytes(b)) => a.extend_from_slice(b),
        // Types are checked at registration; a mismatch here leaves the data as it was.
        _ => {}
    }
}

/// One-row tensors side by side along the last axis (flattened rows of 1-D features).
fn concat_last(pieces: &[Tensor]) -> Tensor {
    let Some(first) = pieces.first() else {
        return stack(&[], "");
    };
    let mut data = first.data.clone();
    let mut last = first.shape.last().copied().unwrap_or(1);
    for p in &pieces[1..] {
        append(&mut data, &p.data);
        last += p.shape.last().copied().unwrap_or(1);
    }
    let mut shape = first.shape.clone();
    if let Some(l) = shape.last_mut() {
        *l = last;
    }
    Tensor {
        name: first.name.clone(),
        shape,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probs(rows: &[[f32; 3]]) -> Tensor {
        Tensor::new(
            "p",
            vec![rows.len(), 3],
            TensorData::Fp32(rows.iter().flatten().copied().collect()),
        )
        .unwrap()
    }

    #[test]
    fn conditions_pick_rows_by_label_and_confidence() {
        let t = probs(&[[0.1, 0.8, 0.1], [0.4, 0.3, 0.3], [0.0, 0.05, 0.95]]);
        let rows = [3, 5, 9];
        let unsure = Condition {
            source: "a.p".into(),
            label_in: None,
            top_probability_below: Some(0.9),
        };
        assert_eq!(condition_rows(&unsure, &rows, &t), vec![3, 5]);
        let twos = Condition {
            source: "a.p".into(),
            label_in: Some(vec![2]),
            top_probability_below: None,
        };
        assert_eq!(condition_rows(&twos, &rows, &t), vec![9]);
        // Logits go through a softmax: [0, 0, 10] is sure, [1, 1, 1] is not.
        let logits = probs(&[[0.0, 0.0, 10.0], [1.0, 1.0, 1.0]]);
        assert_eq!(condition_rows(&unsure, &[0, 1], &logits), vec![1]);
    }

    #[test]
    fn first_closes_a_cascade_row_by_row() {
        let fast = probs(&[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]);
        let slow = probs(&[[0.5, 0.5, 0.0]]);
        let out = combine(
            Combiner::First,
            &[(&[1], &slow), (&[0, 1, 2], &fast)],
            "output",
        );
        assert_eq!(out.rows, vec![0, 1, 2]);
        assert_eq!(
            out.outputs[0].data,
            TensorData::Fp32(vec![1.0, 0.0, 0.0, 0.5, 0.5, 0.0, 0.0, 0.0, 1.0])
        );
    }

    #[test]
    fn mean_vote_and_concat_merge_rows() {
        let a = probs(&[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]);
        let b = probs(&[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]]);
        let c = probs(&[[0.0, 0.0, 1.0]]);
        let mean = combine(Combiner::Mean, &[(&[0, 1], &a), (&[0, 1], &b)], "m");
        assert_eq!(
            mean.outputs[0].data,
            TensorData::Fp32(vec![0.5, 0.0, 0.5, 0.0, 1.0, 0.0])
        );
        let vote = combine(
            Combiner::Vote,
            &[(&[0, 1], &a), (&[0, 1], &b), (&[0], &c)],
            "v",
        );
        assert_eq!(vote.outputs[0].data, TensorData::Int64(vec![2, 1]));
        // A tie goes to the earliest source.
        let tie = combine(Combiner::Vote, &[(&[0, 1], &a), (&[0, 1], &b)], "v");
        assert_eq!(tie.outputs[0].data, TensorData::Int64(vec![0, 1]));
        let cat = combine(Combiner::Concat, &[(&[0, 1], &a), (&[0], &c)], "c");
        assert_eq!(cat.rows, vec![0]);
        assert_eq!(cat.outputs[0].shape, vec![1, 6]);
    }

    #[test]
    fn take_and_positions_follow_request_rows() {
        let t = probs(&[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]);
        let idx = positions(&[2, 4, 7], &[4, 7]);
        assert_eq!(idx, vec![1, 2]);
        let sub = take(&t, &idx);
        assert_eq!(sub.shape, vec![2, 3]);
        assert_eq!(label(&sub, 1), Some(2));
        assert_eq!(intersect(&[1, 2, 3], &[2, 3, 4]), vec![2, 3]);
    }
}
