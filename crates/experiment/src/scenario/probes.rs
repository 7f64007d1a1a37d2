//! The `[[probe]]` tables: a probe, its parameters and the metrics to report.

use isobench_workloads::{nearest_names, ParamValues, Probe, PROBES};
use toml::Spanned;

use super::checker::{span_of, Checker};
use super::workloads::{check_params, check_workloads, Catalogue, RawWorkload};
use super::{ProbeSpec, RawProbe};

impl RawWorkload for RawProbe {
    fn name(&self) -> &Option<Spanned<String>> {
        &self.name
    }
    fn label(&self) -> &Option<Spanned<String>> {
        &self.label
    }
}

pub(super) fn check_probes(c: &mut Checker<'_>, raw: &[Spanned<RawProbe>]) -> Vec<ProbeSpec> {
    let catalogue = Catalogue {
        table: "probe",
        other: "stressor",
        example: "cpu-int",
        names: PROBES.iter().map(|p| p.name()).collect(),
        find: isobench_workloads::probe,
        in_other: |n| isobench_workloads::stressor(n).is_some(),
    };
    check_workloads(c, raw, &catalogue, |c, e| {
        let probe = e.workload;
        let params = check_params(
            c,
            probe.name(),
            probe.params(),
            &e.raw.params,
            &format!("{}.params", e.field),
        );
        let metrics = check_metrics(c, probe, &params, &e.raw.metrics, &e.field);
        ProbeSpec {
            id: e.id,
            name: probe.name().to_string(),
            params,
            metrics,
            span: e.span,
            name_span: span_of(e.name),
        }
    })
}

/// `metrics`: names of metrics the probe reports with these parameters.
fn check_metrics(
    c: &mut Checker<'_>,
    probe: &dyn Probe,
    params: &ParamValues,
    raw: &Option<Spanned<Vec<Spanned<String>>>>,
    field: &str,
) -> Vec<String> {
    let mut metrics = Vec::new();
    let Some(ms) = raw else { return metrics };
    let specs = probe.metrics_for(params);
    let declared: Vec<&str> = specs.iter().map(|m| m.name.as_str()).collect();
    if ms.get_ref().is_empty() {
        c.err(
            span_of(ms),
            &format!("{field}.metrics"),
            "the metric list is empty".into(),
            &declared.join(", "),
            "remove `metrics` to report every metric, or name at least one".into(),
        );
    }
    for m in ms.get_ref() {
        if declared.contains(&m.get_ref().as_str()) {
            metrics.push(m.get_ref().clone());
        } else {
            let near = nearest_names(m.get_ref(), declared.iter().copied());
            c.err(
                span_of(m),
                &format!("{field}.metrics"),
                format!(
                    "{} does not report a metric `{}`",
                    probe.name(),
                    m.get_ref()
                ),
                &declared.join(", "),
                match near.first() {
                    Some(n) => format!("did you mean \"{n}\"?"),
                    None => format!(
                        "name a metric {} reports with these params (allowed, above)",
                        probe.name()
                    ),
                },
            );
        }
    }
    metrics
}
