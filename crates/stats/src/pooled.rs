//! Pooling one figure measured on several hosts: the hosts of one type in a fleet run.
//!
//! Each host gives an estimate on a log scale with its standard error ([`LogScale`]). Hosts
//! of one type are not exact replicas (each has its own neighbours, firmware and wear), so
//! the pool is a random-effects one (DerSimonian and Laird): the spread between hosts beyond
//! what their own errors explain (tau squared) widens every host's error before weighting,
//! and the pooled interval uses Student's t with k - 1 degrees of freedom, k the hosts. A
//! fixed-effect pool would claim the type is known to within one host's error divided by
//! the square root of k, however much the hosts disagree.

use crate::between_runs::LogScale;

/// The random-effects pool of `hosts`, with the between-host variance it estimated:
/// `(pool, tau_squared)`. One host is its own pool (tau squared 0); `None` when there is none
/// or an estimate or error is not finite.
pub fn pool_random_effects(hosts: &[LogScale]) -> Option<(LogScale, f64)> {
    if hosts.is_empty()
        || hosts
            .iter()
            .any(|h| !(h.log_ratio.is_finite() && h.se.is_finite() && h.se >= 0.0))
    {
        return None;
    }
    if hosts.len() == 1 {
        return Some((hosts[0], 0.0));
    }
    let k = hosts.len() as f64;
    // Hosts without spread (se 0) would take every weight: floor the variance at a tiny
    // fraction of the others', or of the estimates' own spread.
    let floor = {
        let vs: Vec<f64> = hosts
            .iter()
            .map(|h| h.se * h.se)
            .filter(|v| *v > 0.0)
            .collect();
        let m = vs.iter().cloned().fold(f64::INFINITY, f64::min);
        if m.is_finite() {
            m * 1e-6
        } else {
            1e-12
        }
    };
    let var: Vec<f64> = hosts.iter().map(|h| (h.se * h.se).max(floor)).collect();
    let w: Vec<f64> = var.iter().map(|v| 1.0 / v).collect();
    let sw: f64 = w.iter().sum();
    let fixed = hosts
        .iter()
        .zip(&w)
        .map(|(h, w)| w * h.log_ratio)
        .sum::<f64>()
        / sw;
    let q: f64 = hosts
        .iter()
        .zip(&w)
        .map(|(h, w)| w * (h.log_ratio - fixed).powi(2))
        .sum();
    let c = sw - w.iter().map(|w| w * w).sum::<f64>() / sw;
    let tau2 = if c > 0.0 {
        ((q - (k - 1.0)) / c).max(0.0)
    } else {
        0.0
    };
    let wr: Vec<f64> = var.iter().map(|v| 1.0 / (v + tau2)).collect();
    let swr: f64 = wr.iter().sum();
    let pooled = hosts
        .iter()
        .zip(&wr)
        .map(|(h, w)| w * h.log_ratio)
        .sum::<f64>()
        / swr;
    Some((
        LogScale {
            log_ratio: pooled,
            se: (1.0 / swr).sqrt(),
            df: Some(k - 1.0),
        },
        tau2,
    ))
}

/// A host's level of a metric on the log scale: the mean of the logarithms of its positive
/// values, its standard error and n - 1 degrees of freedom. `None` with fewer than two
/// values or any value that is not positive and finite (a level without a logarithm).
pub fn log_level(values: &[f64]) -> Option<LogScale> {
    if values.len() < 2 || values.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
        return None;
    }
    let n = values.len() as f64;
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some(LogScale {
        log_ratio: mean,
        se: (var / n).sqrt(),
        df: Some(n - 1.0),
    })
}

/// A sample's level on the log scale, robustly: the median of the logarithms, with the
/// standard error of a median from their median absolute deviation (1.4826 MAD as the
/// spread, 1.2533 sd / sqrt(n) as the median's error). On/off cycles' values have heavy
/// tails (a window in which the probe hardly ran reads thousands of times lower), and one
/// such value moves a mean of logarithms by more than the whole difference between hosts.
/// A zero counts as the lowest value. `None` below 3 values, for a negative or non-finite
/// value, or when half the values or more are zero.
pub fn robust_log_level(values: &[f64]) -> Option<LogScale> {
    if values.len() < 3 || values.iter().any(|v| !(v.is_finite() && *v >= 0.0)) {
        return None;
    }
    let n = values.len() as f64;
    let mut logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let med = median_sorted(&mut logs);
    let mut dev: Vec<f64> = logs.iter().map(|l| (l - med).abs()).collect();
    let mad = median_sorted(&mut dev);
    if !(med.is_finite() && mad.is_finite()) {
        return None;
    }
    let sd = if mad > 0.0 {
        1.4826 * mad
    } else {
        // More than half the values equal: the spread of the rest, as a mean would see it.
        let mean = logs.iter().sum::<f64>() / n;
        (logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    };
    if !sd.is_finite() {
        return None;
    }
    Some(LogScale {
        log_ratio: med,
        se: 1.2533 * sd / n.sqrt(),
        df: Some(n - 1.0),
    })
}

/// The median of `v` (sorted in place; -inf sorts first).
fn median_sorted(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(l: f64, se: f64) -> LogScale {
        LogScale {
            log_ratio: l,
            se,
            df: Some(10.0),
        }
    }

    #[test]
    fn agreeing_hosts_pool_like_a_fixed_effect() {
        let (p, tau2) = pool_random_effects(&[h(0.1, 0.02), h(0.1, 0.02), h(0.1, 0.02)]).unwrap();
        assert_eq!(tau2, 0.0);
        assert!((p.log_ratio - 0.1).abs() < 1e-12);
        assert!((p.se - 0.02 / 3f64.sqrt()).abs() < 1e-12);
        assert_eq!(p.df, Some(2.0));
    }

    #[test]
    fn disagreeing_hosts_widen_the_pool() {
        let hosts = [h(0.0, 0.01), h(0.3, 0.01), h(0.15, 0.01)];
        let (p, tau2) = pool_random_effects(&hosts).unwrap();
        assert!(tau2 > 0.01, "{tau2}");
        // Far wider than the fixed-effect error of 0.0058.
        assert!(p.se > 0.05, "{}", p.se);
        assert!((p.log_ratio - 0.15).abs() < 1e-9);
    }

    #[test]
    fn one_host_is_its_own_pool_and_nothing_pools_nothing() {
        let (p, tau2) = pool_random_effects(&[h(0.2, 0.05)]).unwrap();
        assert_eq!((p.log_ratio, p.se, tau2), (0.2, 0.05, 0.0));
        assert!(pool_random_effects(&[]).is_none());
        assert!(pool_random_effects(&[h(f64::NAN, 0.1), h(0.1, 0.1)]).is_none());
    }

    #[test]
    fn a_level_is_the_mean_log_with_its_error() {
        let l = log_level(&[100.0, 100.0 * 1f64.exp()]).unwrap();
        assert!((l.log_ratio - (100f64.ln() + 0.5)).abs() < 1e-12);
        assert!((l.se - 0.5).abs() < 1e-12);
        assert_eq!(l.df, Some(1.0));
        assert!(log_level(&[1.0]).is_none());
        assert!(log_level(&[1.0, 0.0]).is_none());
    }

    #[test]
    fn a_robust_level_ignores_a_window_in_which_the_probe_hardly_ran() {
        let mut v = vec![28.0e6, 29.0e6, 28.5e6, 27.9e6, 28.2e6, 29.1e6, 28.8e6];
        let clean = robust_log_level(&v).unwrap();
        v.push(7455.0);
        v.push(0.0);
        let tailed = robust_log_level(&v).unwrap();
        assert!(
            (tailed.log_ratio - clean.log_ratio).abs() < 0.02,
            "{tailed:?} {clean:?}"
        );
        assert!(tailed.se < 0.05, "{tailed:?}");
        // The mean of logarithms is dragged down by orders of magnitude.
        assert!(log_level(&v).is_none());
        assert!(log_level(&v[..8]).unwrap().log_ratio < clean.log_ratio - 1.0);
        // Half zeros or more: no level.
        assert!(robust_log_level(&[0.0, 0.0, 1.0, 2.0]).is_none());
        assert!(robust_log_level(&[1.0, 2.0]).is_none());
        // Mostly equal values still have a spread.
        let eq = robust_log_level(&[5.0, 5.0, 5.0, 5.0, 6.0]).unwrap();
        assert!(eq.se > 0.0);
    }
}
