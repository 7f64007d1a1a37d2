//! The median, one implementation for measurement, analysis and statistics.
//!
//! With an even count it is the midpoint of the two middle values, the type-7 0.5-quantile
//! (Hyndman & Fan 1996), computed as `lo + (hi - lo) / 2` so that it never leaves
//! `[lo, hi]` and stays defined when one of them is infinite.

/// Median of `values`, which are left as they are (NaN when empty). Copies, then selects in
/// linear time.
pub fn median(values: &[f64]) -> f64 {
    median_in_place(&mut values.to_vec())
}

/// Median of `buf`, reordering it (NaN when empty). Linear time: no full sort.
pub fn median_in_place(buf: &mut [f64]) -> f64 {
    let n = buf.len();
    if n == 0 {
        return f64::NAN;
    }
    let (left, &mut hi, _) = buf.select_nth_unstable_by(n / 2, f64::total_cmp);
    if n % 2 == 1 {
        return hi;
    }
    let lo = left.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    midpoint(lo, hi)
}

/// Median of values already in ascending order (NaN when empty), in constant time.
pub fn median_of_sorted(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        midpoint(sorted[n / 2 - 1], sorted[n / 2])
    }
}

/// The point halfway between `lo <= hi`.
fn midpoint(lo: f64, hi: f64) -> f64 {
    if lo == hi {
        return lo;
    }
    let v = lo + 0.5 * (hi - lo);
    if v.is_nan() {
        // Only with an infinite end (the nearer one is `hi`) or a NaN value.
        return if lo.is_nan() || hi.is_nan() {
            f64::NAN
        } else {
            hi
        };
    }
    if lo <= hi {
        v.clamp(lo, hi)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&[7.0]), 7.0);
        assert!(median(&[]).is_nan());
        assert!(median_of_sorted(&[]).is_nan());
        assert!(median_in_place(&mut []).is_nan());
    }

    #[test]
    fn leaves_its_input_alone() {
        let v = [5.0, 1.0, 4.0];
        assert_eq!(median(&v), 4.0);
        assert_eq!(v, [5.0, 1.0, 4.0]);
    }

    #[test]
    fn the_three_forms_agree() {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for n in 1..40 {
            let v: Vec<f64> = (0..n)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state % 1000) as f64 / 7.0
                })
                .collect();
            let mut sorted = v.clone();
            sorted.sort_by(f64::total_cmp);
            let m = median_of_sorted(&sorted);
            assert_eq!(median(&v), m);
            assert_eq!(median_in_place(&mut v.clone()), m);
        }
    }

    #[test]
    fn infinite_ends_give_no_nan() {
        assert_eq!(median(&[f64::NEG_INFINITY, f64::INFINITY]), f64::INFINITY);
        assert_eq!(median(&[1.0, f64::INFINITY]), f64::INFINITY);
        assert_eq!(median(&[f64::MAX, f64::MAX]), f64::MAX);
    }
}
