//! A proportional split with floors and caps (weighted water-filling), for the host's fair
//! shares of tenants and for the policies' shares of CPU, GPU and tenants alike.

/// Splits `total` in proportion to `weights`, each share clamped to `[floors[i], caps[i]]`.
///
/// Finds the level λ at which Σ clamp(λ·wᵢ, floorᵢ, capᵢ) = total. When the floors alone
/// exceed `total` they are scaled down to fit; when the caps alone fall short, every share
/// is its cap and the rest stays unallocated. Weights that are all zero count as equal.
/// Negative or NaN weights count as zero.
///
/// # Panics
/// When the three slices differ in length.
pub fn proportional_split(total: f64, weights: &[f64], floors: &[f64], caps: &[f64]) -> Vec<f64> {
    assert!(weights.len() == floors.len() && floors.len() == caps.len(), "proportional_split: slices differ in length");
    let n = weights.len();
    if n == 0 || total <= 0.0 {
        return vec![0.0; n];
    }
    let caps: Vec<f64> = caps.iter().zip(floors).map(|(c, f)| c.max(*f)).collect();
    let floor_sum: f64 = floors.iter().sum();
    if floor_sum >= total {
        return floors.iter().map(|f| f * total / floor_sum).collect();
    }
    if caps.iter().sum::<f64>() <= total {
        return caps;
    }
    let clean = |w: f64| if w.is_finite() && w > 0.0 { w } else { 0.0 };
    let all_zero = weights.iter().all(|w| clean(*w) == 0.0);
    let w: Vec<f64> = weights.iter().map(|w| if all_zero { 1.0 } else { clean(*w) }).collect();
    let at = |level: f64| -> f64 { (0..n).map(|i| (level * w[i]).clamp(floors[i], caps[i])).sum() };
    // The sum is non-decreasing in the level: bisect.
    let mut hi = 1.0;
    while at(hi) < total && hi < 1e300 {
        hi *= 2.0;
    }
    let mut lo = 0.0;
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if at(mid) < total { lo = mid } else { hi = mid }
    }
    (0..n).map(|i| (hi * w[i]).clamp(floors[i], caps[i])).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-6
    }

    #[test]
    fn split_is_proportional_when_no_bound_binds() {
        let s = proportional_split(8.0, &[1.0, 3.0], &[0.0, 0.0], &[8.0, 8.0]);
        assert!(close(s[0], 2.0) && close(s[1], 6.0), "{s:?}");
    }

    #[test]
    fn split_lifts_small_shares_to_their_floor_and_takes_it_from_the_rest() {
        let s = proportional_split(10.0, &[1.0, 99.0], &[2.0, 0.0], &[10.0, 10.0]);
        assert!(close(s[0], 2.0) && close(s[1], 8.0), "{s:?}");
    }

    #[test]
    fn split_caps_large_shares_and_gives_the_excess_to_the_rest() {
        let s = proportional_split(10.0, &[9.0, 1.0], &[0.0, 0.0], &[4.0, 10.0]);
        assert!(close(s[0], 4.0) && close(s[1], 6.0), "{s:?}");
    }

    #[test]
    fn split_scales_floors_down_when_they_exceed_the_total() {
        let s = proportional_split(3.0, &[1.0, 1.0], &[2.0, 4.0], &[10.0, 10.0]);
        assert!(close(s[0], 1.0) && close(s[1], 2.0), "{s:?}");
    }

    #[test]
    fn split_with_only_zero_weights_is_equal() {
        let s = proportional_split(6.0, &[0.0, 0.0, f64::NAN], &[0.0; 3], &[6.0; 3]);
        assert!(s.iter().all(|x| close(*x, 2.0)), "{s:?}");
    }

    #[test]
    fn split_leaves_the_rest_unallocated_when_every_cap_binds() {
        assert_eq!(proportional_split(10.0, &[1.0, 1.0], &[0.0, 0.0], &[1.0, 2.0]), vec![1.0, 2.0]);
    }
}
