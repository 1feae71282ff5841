//! Wire shapes (`int64` dimensions) and datatype names checked into domain terms.

use infaas_core::DataType;

use crate::error::TensorProblem;

/// The dimensions as `usize` and their product; rejects negative dimensions and
/// products that overflow.
pub(crate) fn dims(shape: &[i64]) -> Result<(Vec<usize>, usize), TensorProblem> {
    let mut dims = Vec::with_capacity(shape.len());
    let mut count: usize = 1;
    for &d in shape {
        let d = usize::try_from(d).map_err(|_| {
            if d < 0 {
                TensorProblem::NegativeDimension(shape.to_vec())
            } else {
                TensorProblem::TooManyElements(shape.to_vec())
            }
        })?;
        count = count
            .checked_mul(d)
            .ok_or_else(|| TensorProblem::TooManyElements(shape.to_vec()))?;
        dims.push(d);
    }
    Ok((dims, count))
}

/// A domain shape as wire `int64` dimensions.
pub(crate) fn wire_dims(shape: &[usize]) -> Vec<i64> {
    shape
        .iter()
        .map(|&d| i64::try_from(d).unwrap_or(i64::MAX))
        .collect()
}

pub(crate) fn datatype(name: &str) -> Result<DataType, TensorProblem> {
    DataType::parse(name).ok_or_else(|| TensorProblem::UnsupportedDatatype(name.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dims_multiply_and_reject_bad_shapes() {
        assert_eq!(dims(&[2, 64]).unwrap(), (vec![2, 64], 128));
        assert_eq!(dims(&[]).unwrap(), (vec![], 1));
        assert_eq!(dims(&[3, 0]).unwrap(), (vec![3, 0], 0));
        assert_eq!(
            dims(&[-1, 3]).unwrap_err().to_string(),
            "shape [-1,3] has a negative dimension"
        );
        assert_eq!(
            dims(&[1 << 40, 1 << 40]).unwrap_err().to_string(),
            format!("shape [{0},{0}] holds too many elements", 1u64 << 40)
        );
    }
}
