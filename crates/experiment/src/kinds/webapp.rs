//! `webapp`: web servers in every tenant, each measured by an open-loop load generator of its
//! own outside the tenants, while one tenant misbehaves with each stressor in turn (paper
//! 001, Matthews et al., Table 2).
//!
//! Every tenant serves HTTP (the agent's `http` service, bound to the tenant's loopback); the
//! scenario's one `http` probe runs beside every tenant at once (on the host, in no tenant's
//! cgroups, in the tenant's network), so each tenant gets its own good-response rate in every
//! trial. The misbehaving tenants are the scenario's aggressors: they serve too, and run the
//! stressor. Planning, trial order and what needs more data are the matrix's (each stressor
//! at each intensity against paired baseline blocks); the analysis compares every tenant's
//! good-response rate under each stress test with its baseline, and the table reads as the
//! paper's: rows are the stress tests, columns the misbehaving tenant and the average of the
//! well-behaved ones, DNR where the load generator got no good answer at all.

use isobench_results::{Column, Plot, Section, Value};
use serde::{Deserialize, Serialize};

use super::kind::{the_one_probe, ExperimentKind};
use super::matrix::Matrix;
use crate::cells::{
    apply_design, cell_design, correct_significance, make_cell, paired_units, Analysis, Cell,
    CellOf, Inputs,
};
use crate::fields::Fields;
use crate::plan::{Condition, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Role, Scenario};
use crate::serving::{Keep, ProbeSite, ServiceSpec, Serving, Site};

/// The metric the paper reports: the share of responses good within the time limit.
pub const GOOD: &str = "good_pct";

/// The `webapp` kind.
pub struct Webapp;

/// What a `[webapp]` table says.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WebappSettings {
    /// How long the web servers live: a block (default: restarted between stress tests, so
    /// one test's damage does not carry into the next), the whole run, or one trial.
    pub keep: Keep,
}

impl WebappSettings {
    fn of(v: &serde_json::Value) -> WebappSettings {
        serde_json::from_value(v.clone()).unwrap_or(WebappSettings { keep: Keep::Block })
    }
}

impl ExperimentKind for Webapp {
    fn name(&self) -> &'static str {
        "webapp"
    }

    fn help(&self) -> &'static str {
        "web servers in every tenant, a load generator per tenant outside them, one tenant \
         misbehaving with each stressor: good-response rate per tenant against baseline, DNR"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, _sc: &Scenario) -> serde_json::Value {
        let keep = f.word(
            "keep",
            &[
                ("block", Keep::Block),
                ("run", Keep::Run),
                ("trial", Keep::Trial),
            ],
            Keep::Block,
        );
        serde_json::to_value(WebappSettings { keep }).expect("settings serialize")
    }

    /// The matrix's conditions, with the `http` probe served by every tenant and measured
    /// beside each.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let sc = r.scenario();
        let keep = WebappSettings::of(&sc.settings).keep;
        let others: Vec<_> = sc.probes.iter().filter(|p| p.name != "http").collect();
        if let Some(p) = others.first() {
            r.error(sc.source.error(
                p.name_span,
                "probe.name",
                format!(
                    "a webapp run measures web servers; probe {} is not http",
                    p.name
                ),
                "one [[probe]] with name = \"http\"",
                "remove this [[probe]] table, or use kind = \"matrix\" for other probes",
            ));
        }
        if let Some(p) = the_one_probe(
            r,
            "http",
            "a webapp run needs the http probe (its load generator)",
            "a webapp run has one http probe (the load generator beside every tenant)",
            "ibs.toml",
        ) {
            let mut serving = serving(sc.tenants.iter().map(|t| t.name.as_str()), &p.params);
            serving.keep = keep;
            r.serve(&p.id, serving);
        }
        Matrix.conditions(r, platform)
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let cells = tenant_cells(i);
        let sections = i
            .plan
            .map(|p| vec![paper_section(p, &cells)])
            .unwrap_or_default();
        Analysis {
            cells,
            aggressor: Vec::new(),
            classes: Vec::new(),
            sections,
        }
    }
}

/// An `http:<body>` server in each of `tenants` and the `http` probe beside each, pointed at
/// it; the servers live for a block, so a stressor's damage to one ends with its block.
pub fn serving<'a>(
    tenants: impl IntoIterator<Item = &'a str>,
    params: &isobench_workloads::ParamValues,
) -> Serving {
    let body = params
        .0
        .get("body")
        .and_then(|v| v.as_u64())
        .unwrap_or(4096);
    let tenants: Vec<&str> = tenants.into_iter().collect();
    Serving {
        services: tenants
            .iter()
            .map(|t| ServiceSpec {
                id: t.to_string(),
                tenant: t.to_string(),
                kind: format!("http:{body}"),
            })
            .collect(),
        reserve: Vec::new(),
        sites: tenants
            .iter()
            .map(|t| ProbeSite {
                tenant: t.to_string(),
                at: Site::Beside,
                params: [
                    ("addr".to_string(), format!("{{ip:{t}}}")),
                    ("port".to_string(), format!("{{port:{t}}}")),
                ]
                .into_iter()
                .collect(),
            })
            .collect(),
        keep: Keep::Block,
    }
}

/// Every tenant's tracked http metrics under every condition against its baseline, with
/// paired trials, significance corrected across them; tenants in plan order (well-behaved
/// first, as the scenario lists them).
pub(crate) fn tenant_cells(i: Inputs<'_>) -> Vec<Cell> {
    let (plan, stored, settings) = (i.plan, i.stored, i.settings);
    let mut tenants: Vec<String> = plan
        .map(|p| p.tenants.iter().map(|t| t.name.clone()).collect())
        .unwrap_or_default();
    let mut rows: Vec<(String, String, String, isobench_stats::Direction)> = Vec::new();
    let mut conditions: Vec<String> = plan
        .map(|p| p.conditions.iter().map(|c| c.id.clone()).collect())
        .unwrap_or_default();
    // Tenants measured, in plan order.
    tenants.retain(|n| stored.trials.iter().any(|t| &t.tenant == n));
    for t in stored.trials {
        if !tenants.contains(&t.tenant) {
            tenants.push(t.tenant.clone());
        }
        let c = crate::cells::condition_text(&t.condition);
        if c != "baseline" && !conditions.contains(&c) {
            conditions.push(c);
        }
        for s in &t.samples {
            if plan.is_some_and(|p| !p.tracks(&t.probe, &s.metric)) {
                continue;
            }
            if !rows.iter().any(|r| r.0 == t.probe && r.1 == s.metric) {
                rows.push((
                    t.probe.clone(),
                    s.metric.clone(),
                    s.unit.clone(),
                    s.direction,
                ));
            }
        }
    }
    // The paper's metric first.
    rows.sort_by_key(|r| r.1 != GOOD);
    if rows.is_empty() {
        if let Some(p) = plan.and_then(|p| p.probes.first()) {
            rows.push((
                p.id.clone(),
                GOOD.into(),
                "%".into(),
                isobench_stats::Direction::Higher,
            ));
        }
    }
    let mut cells = Vec::new();
    for (probe, metric, unit, direction) in &rows {
        for tenant in &tenants {
            for cond in &conditions {
                let label = format!("{tenant}/{probe}/{metric}@{cond}");
                let mut c = make_cell(
                    CellOf {
                        tenant,
                        probe,
                        probe_class: Some(isobench_workloads::Class::App),
                        metric,
                        unit,
                        direction: *direction,
                        condition: cond,
                        stressor_class: plan
                            .and_then(|p| p.conditions.iter().find(|x| &x.id == cond))
                            .map(|x| x.class),
                    },
                    stored.values(tenant, probe, "baseline", metric),
                    stored.values(tenant, probe, cond, metric),
                    stored.dnr(tenant, probe, cond),
                    &label,
                    settings,
                );
                c.disturbed = stored.disturbed(tenant, probe, cond);
                let usable = |t: &isobench_store::TrialRecord| stored.usable(t);
                let design = cell_design(plan, Some(probe), cond, stored.trials);
                let units = paired_units(stored.trials, &usable, tenant, probe, cond, metric);
                apply_design(&mut c, design, &units, &[], &label, settings);
                cells.push(c);
            }
        }
    }
    correct_significance(&mut cells, settings);
    cells
}

/// One row of the paper's table: a stress test, the misbehaving tenants' degradation of the
/// good-response rate, and the well-behaved tenants' average.
#[derive(Debug, Clone, PartialEq)]
pub struct PaperRow {
    /// The stress test as the paper names it (`Fork`), or the condition id when the paper
    /// has no such test.
    pub test: String,
    /// Condition id (`forkbomb@100`).
    pub condition: String,
    /// The misbehaving tenants' degradation, percent (their mean when several); `None`
    /// with `bad_dnr` when none of them answered.
    pub bad: Option<f64>,
    /// Every misbehaving tenant's load generator got no good answer in some trial.
    pub bad_dnr: bool,
    /// The well-behaved tenants' mean degradation, percent, over those that answered.
    pub good: Option<f64>,
    /// Well-behaved tenants with a DNR trial under this condition, and how many there are.
    pub good_dnr: (usize, usize),
}

/// The paper's Table 2 from a run's cells: per condition, the misbehaving tenants (the
/// plan's aggressors) and the average of the well-behaved ones (its victims), in
/// degradation of the good-response rate.
pub fn paper_rows(plan: &Plan, cells: &[Cell]) -> Vec<PaperRow> {
    let of =
        |role: Role| -> Vec<&str> { plan.tenants_with(role).map(|t| t.name.as_str()).collect() };
    let (bad, good) = (of(Role::Aggressor), of(Role::Victim));
    plan.conditions
        .iter()
        .map(|cond| {
            let mine = |names: &[&str]| -> Vec<&Cell> {
                cells
                    .iter()
                    .filter(|c| {
                        c.metric == GOOD
                            && c.condition == cond.id
                            && names.contains(&c.tenant.as_str())
                    })
                    .collect()
            };
            let mean = |cs: &[&Cell]| -> Option<f64> {
                let v: Vec<f64> = cs
                    .iter()
                    .filter(|c| c.dnr.is_none())
                    .filter_map(|c| c.estimate())
                    .collect();
                (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
            };
            let (b, g) = (mine(&bad), mine(&good));
            PaperRow {
                test: paper_test(&cond.name)
                    .map_or_else(|| cond.id.clone(), |t| format!("{t} ({})", cond.id)),
                condition: cond.id.clone(),
                bad: mean(&b),
                bad_dnr: !b.is_empty() && b.iter().all(|c| c.dnr.is_some()),
                good: mean(&g),
                good_dnr: (g.iter().filter(|c| c.dnr.is_some()).count(), g.len()),
            }
        })
        .collect()
}

/// The name paper 001's Table 2 gives the stress test that stressor `name` implements.
fn paper_test(name: &str) -> Option<&'static str> {
    Some(match name {
        "memhog" => "Memory",
        "forkbomb" => "Fork",
        "cpu" => "CPU",
        "disk" => "Disk Intensive",
        "net-tx" => "Network Server Transmits",
        "net-rx" => "Network Server Receives",
        _ => return None,
    })
}

/// The paper's Table 2 as a section: one row per stress test, the misbehaving tenant's
/// degradation of the good-response rate (with its interval when there is one tenant) and the
/// well-behaved tenants' average, in percent; DNR where no good answer came back.
pub fn paper_section(plan: &Plan, cells: &[Cell]) -> Section {
    let rows = paper_rows(plan, cells);
    let bad: Vec<&str> = plan
        .tenants_with(Role::Aggressor)
        .map(|t| t.name.as_str())
        .collect();
    let n_good = plan.tenants_with(Role::Victim).count();
    let mut s = Section::new(
        "table2",
        format!("Degradation of the good-response rate ({GOOD}), as Table 2 of paper 001"),
        vec![
            Column::text("stress test"),
            Column::unit(&format!("misbehaving ({})", bad.join(", ")), "%"),
            Column::unit(&format!("well-behaved (avg of {n_good})"), "%"),
            Column::text("well-behaved DNR"),
        ],
    )
    .with_plot(Plot::Bars {
        label: vec![0],
        y: vec![1, 2],
        reference: Some(0.0),
    });
    for r in &rows {
        let own: Vec<&Cell> = cells
            .iter()
            .filter(|c| {
                c.metric == GOOD && c.condition == r.condition && bad.contains(&c.tenant.as_str())
            })
            .collect();
        let bad_value = if r.bad_dnr {
            Value::Dnr {
                reason: own
                    .iter()
                    .find_map(|c| c.dnr.as_ref().map(|d| d.reason.clone()))
                    .unwrap_or_default(),
            }
        } else {
            match (own.as_slice(), r.bad) {
                ([c], Some(v)) => match c.comparison.as_ref() {
                    Some(cmp) => {
                        let e = Value::estimate(v, cmp.degradation.lower, cmp.degradation.upper, 2);
                        if cmp.trustworthy {
                            e
                        } else {
                            e.flagged("untrustworthy: see the notes of the run")
                        }
                    }
                    None => Value::number(v, 2),
                },
                (_, Some(v)) => Value::number(v, 2),
                (_, None) => Value::Empty,
            }
        };
        let (k, n) = r.good_dnr;
        let good_value = if n > 0 && k == n {
            Value::Dnr {
                reason: "every well-behaved tenant".into(),
            }
        } else {
            r.good.map_or(Value::Empty, |v| Value::number(v, 2))
        };
        s.push(vec![
            Value::text_of(r.test.clone()),
            bad_value,
            good_value,
            Value::text_of(format!("{k} of {n}")),
        ]);
    }
    s.notes.push(
        "positive = fewer good responses than in the baseline; DNR: the load generator beside \
         the tenant got no good answer in some trial"
            .into(),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tenant_serves_and_is_measured_beside_itself() {
        let params = isobench_workloads::ParamValues(
            [("body".to_string(), serde_json::Value::from(1024))]
                .into_iter()
                .collect(),
        );
        let s = serving(["a", "b"], &params);
        assert_eq!(s.services.len(), 2);
        assert_eq!(s.services[1].kind, "http:1024");
        assert_eq!(s.services[1].tenant, "b");
        assert!(s.sites.iter().all(|x| x.at == Site::Beside));
        assert_eq!(s.sites[0].params["port"], "{port:a}");
        assert_eq!(s.keep, Keep::Block);
    }
}
