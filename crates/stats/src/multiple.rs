//! Corrections for multiple comparisons.
//!
//! Why: a run tests many (probe, stressor, metric) cells at once; at a 5% level one cell in
//! twenty is "significant" by chance alone. Adjusted p-values let a report say which
//! degradations survive the whole matrix.

use serde::{Deserialize, Serialize};

/// How p-values of a family of tests are adjusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Correction {
    /// No adjustment: each test at its own level.
    None,
    /// Holm's step-down procedure (Holm 1979, *A Simple Sequentially Rejective Multiple Test
    /// Procedure*, Scand. J. Statist. 6): controls the family-wise error rate, the chance of
    /// any false positive, under any dependence; uniformly more powerful than Bonferroni.
    #[default]
    Holm,
    /// Benjamini & Hochberg's step-up procedure (Benjamini & Hochberg 1995, *Controlling the
    /// False Discovery Rate*, JRSS B 57): controls the expected share of false positives among
    /// the rejections, under independence or positive dependence; more powerful than Holm.
    BenjaminiHochberg,
}

impl Correction {
    /// `"none"`, `"Holm"` or `"Benjamini-Hochberg"`, for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Correction::None => "none",
            Correction::Holm => "Holm",
            Correction::BenjaminiHochberg => "Benjamini-Hochberg",
        }
    }
}

/// Adjusted p-values, in the same order as `p`: a test is rejected at level `alpha` after the
/// correction exactly when its adjusted p-value is `<= alpha`.
///
/// With the `m` non-NaN p-values sorted ascending, `p_(1) <= ... <= p_(m)`:
/// - Holm: `adj_(i) = max_(j <= i) min(1, (m - j + 1) p_(j))` (Holm 1979; adjusted form as in
///   Wright 1992, *Adjusted P-Values for Simultaneous Inference*, Biometrics 48);
/// - Benjamini-Hochberg: `adj_(i) = min_(j >= i) min(1, m p_(j) / j)` (Benjamini & Hochberg
///   1995; adjusted form as R's `p.adjust`);
/// - none: the p-values themselves.
///
/// NaN inputs (a cell that could not be tested) stay NaN and are not counted in the family.
/// Adjusted values are never below the raw ones and never above 1.
pub fn adjust_p_values(p: &[f64], correction: Correction) -> Vec<f64> {
    let mut out = p.to_vec();
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    order.sort_by(|&a, &b| p[a].total_cmp(&p[b]).then(a.cmp(&b)));
    let m = order.len() as f64;
    match correction {
        Correction::None => {}
        Correction::Holm => {
            let mut running = 0.0f64;
            for (rank, &i) in order.iter().enumerate() {
                let scaled = ((m - rank as f64) * p[i]).min(1.0);
                running = running.max(scaled);
                out[i] = running;
            }
        }
        Correction::BenjaminiHochberg => {
            let mut running = 1.0f64;
            for (rank, &i) in order.iter().enumerate().rev() {
                // `p * (m / j)`: exact at j = m and j = 1, where it must equal the raw value and
                // Holm's factor, so rounding never puts BH above Holm or below the raw value.
                let scaled = (p[i] * (m / (rank + 1) as f64)).max(p[i]).min(1.0);
                running = running.min(scaled);
                out[i] = running;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: &[f64], b: &[f64]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x.is_nan() && y.is_nan()) || (x - y).abs() < 1e-12)
    }

    #[test]
    fn holm_textbook_example() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "holm") = 0.03 0.06 0.06 0.02
        let adj = adjust_p_values(&[0.01, 0.04, 0.03, 0.005], Correction::Holm);
        assert!(close(&adj, &[0.03, 0.06, 0.06, 0.02]), "{adj:?}");
    }

    #[test]
    fn bh_textbook_example() {
        // R: p.adjust(c(0.01, 0.04, 0.03, 0.005), "BH") = 0.02 0.04 0.04 0.02
        let adj = adjust_p_values(&[0.01, 0.04, 0.03, 0.005], Correction::BenjaminiHochberg);
        assert!(close(&adj, &[0.02, 0.04, 0.04, 0.02]), "{adj:?}");
        // Benjamini & Hochberg (1995), section 4: 15 p-values; at q = 0.05 the step-up
        // procedure rejects the four smallest.
        let p = [
            0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344, 0.0459, 0.3240, 0.4262,
            0.5719, 0.6528, 0.7590, 1.0000,
        ];
        let adj = adjust_p_values(&p, Correction::BenjaminiHochberg);
        let rejected = adj.iter().filter(|&&a| a <= 0.05).count();
        assert_eq!(rejected, 4, "{adj:?}");
        // Holm (Bonferroni-type) rejects only three of them.
        let holm = adjust_p_values(&p, Correction::Holm);
        assert_eq!(holm.iter().filter(|&&a| a <= 0.05).count(), 3, "{holm:?}");
    }

    #[test]
    fn nan_stays_nan_and_leaves_the_family() {
        let adj = adjust_p_values(&[0.01, f64::NAN, 0.02], Correction::Holm);
        assert!(close(&adj, &[0.02, f64::NAN, 0.02]), "{adj:?}");
        let none = adjust_p_values(&[0.3, f64::NAN], Correction::None);
        assert!(close(&none, &[0.3, f64::NAN]));
        assert!(adjust_p_values(&[], Correction::BenjaminiHochberg).is_empty());
    }

    #[test]
    fn names_and_json() {
        assert_eq!(Correction::Holm.name(), "Holm");
        assert_eq!(Correction::BenjaminiHochberg.name(), "Benjamini-Hochberg");
        assert_eq!(Correction::None.name(), "none");
        assert_eq!(
            serde_json::to_string(&Correction::BenjaminiHochberg).unwrap(),
            "\"benjamini_hochberg\""
        );
        let back: Correction = serde_json::from_str("\"holm\"").unwrap();
        assert_eq!(back, Correction::Holm);
    }
}
