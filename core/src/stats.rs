//! Small statistics shared by the profiler, the batcher's figures, the load generator, the
//! simulator and the benchmarks: one nearest-rank percentile (sorted or not) and the median.

/// The nearest rank (1-based) of the quantile `q` (a fraction in [0, 1]) among `n` values:
/// `ceil(q n)`, clamped to `1..=n` (1 when `n` is 0).
pub fn nearest_rank(q: f64, n: usize) -> usize {
    ((q * n as f64).ceil() as usize).clamp(1, n.max(1))
}

/// Nearest-rank percentile of ascending `sorted` values, with `q` a fraction in [0, 1]; `None`
/// for no values. Any ordered values (durations in the benchmarks, for one).
pub fn percentile_of<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    Some(sorted[nearest_rank(q, sorted.len()) - 1])
}

/// Nearest-rank percentile of ascending `sorted` values, with `q` a fraction in [0, 1];
/// 0 for no values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    percentile_of(sorted, q).unwrap_or(0.0)
}

/// [`percentile`] of values in any order, which it reorders (a selection, not a sort); `None`
/// for no values.
pub fn select_percentile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let i = nearest_rank(q, values.len()) - 1;
    Some(*values.select_nth_unstable_by(i, f64::total_cmp).1)
}

/// The median of ascending `sorted` values: the upper one of an even count (`sorted[n / 2]`);
/// `None` for no values.
pub fn median_of<T: Copy>(sorted: &[T]) -> Option<T> {
    sorted.get(sorted.len() / 2).copied()
}

/// [`median_of`] values in any order (durations in the benchmarks, for one).
pub fn median<T: Copy + Ord>(mut values: Vec<T>) -> Option<T> {
    values.sort_unstable();
    median_of(&values)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&[3.0], 0.99), 3.0);
        assert_eq!(percentile(&[1.0, 2.0], 0.5), 1.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile_of(&[1u32, 2, 3, 4], 0.75), Some(3));
        assert_eq!(percentile_of::<u32>(&[], 0.5), None);
        assert_eq!(nearest_rank(0.0, 10), 1);
        assert_eq!(nearest_rank(1.0, 10), 10);
        assert_eq!(nearest_rank(0.5, 0), 1);
    }

    #[test]
    fn selection_agrees_with_sorting() {
        let mut v: Vec<f64> = (0..101).map(|i| f64::from((i * 37) % 101)).collect();
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        for q in [0.0, 0.01, 0.5, 0.9, 0.99, 0.995, 1.0] {
            assert_eq!(select_percentile(&mut v, q), Some(percentile(&sorted, q)));
        }
        assert_eq!(select_percentile(&mut [], 0.5), None);
    }

    #[test]
    fn the_median_is_the_upper_middle() {
        assert_eq!(median_of(&[1, 2, 3]), Some(2));
        assert_eq!(median_of(&[1, 2, 3, 4]), Some(3));
        assert_eq!(median_of::<f64>(&[]), None);
        assert_eq!(median(vec![4, 1, 3, 2]), Some(3));
    }
}
