//! The `[[stressor]]` tables: a stressor, its intensities and its parameters.

use isobench_workloads::STRESSORS;
use toml::{Spanned, Value};

use super::checker::{span_of, value_text, Checker};
use super::workloads::{check_params, check_workloads, Catalogue, RawWorkload};
use super::{RawStressor, StressorSpec};

impl RawWorkload for RawStressor {
    fn name(&self) -> &Option<Spanned<String>> {
        &self.name
    }
    fn label(&self) -> &Option<Spanned<String>> {
        &self.label
    }
}

pub(super) fn check_stressors(
    c: &mut Checker<'_>,
    raw: &[Spanned<RawStressor>],
) -> Vec<StressorSpec> {
    let catalogue = Catalogue {
        table: "stressor",
        other: "probe",
        example: "cpu",
        names: STRESSORS.iter().map(|s| s.name()).collect(),
        find: isobench_workloads::stressor,
        in_other: |n| isobench_workloads::probe(n).is_some(),
    };
    check_workloads(c, raw, &catalogue, |c, e| {
        let stressor = e.workload;
        let intensities = check_intensity(c, &e.raw.intensity, &e.field);
        let params = check_params(
            c,
            stressor.name(),
            stressor.params(),
            &e.raw.params,
            &format!("{}.params", e.field),
        );
        StressorSpec {
            id: e.id,
            name: stressor.name().to_string(),
            intensities,
            params,
            span: e.span,
            name_span: span_of(e.name),
        }
    })
}

/// `intensity`: one or more distinct intensities in 0..=100; 100 when absent.
fn check_intensity(c: &mut Checker<'_>, raw: &Option<Spanned<Value>>, field: &str) -> Vec<u8> {
    let Some(v) = raw else { return vec![100] };
    let mut intensities = Vec::new();
    let ifield = format!("{field}.intensity");
    let allowed = "an integer 0..=100, or an array of them such as [50, 100]";
    let items: Vec<&Value> = match v.get_ref() {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    if items.is_empty() {
        c.err(
            span_of(v),
            &ifield,
            "the intensity list is empty".into(),
            allowed,
            "write intensity = 100".into(),
        );
    }
    for it in items {
        match it {
            Value::Integer(n) if (0..=100).contains(n) => {
                let n = *n as u8;
                if intensities.contains(&n) {
                    c.err(
                        span_of(v),
                        &ifield,
                        format!("intensity {n} is listed twice"),
                        allowed,
                        format!("remove the second {n}"),
                    );
                } else {
                    intensities.push(n);
                }
            }
            other => c.err(
                span_of(v),
                &ifield,
                format!(
                    "{} is not an intensity",
                    value_text(other).map_or("this".into(), |t| format!("`{t}`"))
                ),
                allowed,
                "write intensity = 100 (`isobench list` says what it sets for this stressor)"
                    .to_string(),
            ),
        }
    }
    intensities
}
