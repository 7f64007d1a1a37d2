//! `artifacts`: the relay ring of Matthews, Coady and Neville (paper 004), placed in one
//! tenant or spread over several, with its "null test" variants; runs x iterations, a
//! summary per placement (mean, std, min, max, Table 1) and every iteration kept for the
//! run x iteration surface (Figure 2).
//!
//! The scenario declares one `relay-ring` probe (its `runs`, `iterations`, `warmup`); the
//! kind measures it as four variants, each in the first victim:
//! - `one`: N hops, master and forwarders all in that tenant (Figure 1a);
//! - `spread`: N hops, the master there and one forwarder in each other victim, chained
//!   tenant to tenant and back to the master (Figure 1b; the tenants share the host's
//!   network, everything on loopback);
//! - `nosyscall` and `write`: the null tests (the timed loop with no system call, and with
//!   one `write(2)`).
//!
//! The `[artifacts]` table chooses the variants (`placements`, `null_tests`), N (`hops`,
//! default the number of victims) and the size (`runs` x `iterations`, default the paper's
//! 50 x 10,000). Each variant keeps every iteration (`raw = true`). Trials are
//! the matrix's (baseline blocks, and the scenario's stressors in the aggressors beside the
//! ring), so the ring's artifacts idle and beside a busy neighbour compare the same way.

use std::collections::BTreeMap;

use isobench_results::{Column, Plot, Section, Value};
use isobench_store::TrialRecord;

use super::kind::{the_one_probe, ExperimentKind};
use super::matrix::Matrix;
use crate::cells::{condition_text, Analysis, Inputs};
use crate::fields::Fields;
use crate::plan::{Condition, Plan, PlannedProbe, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Role, Scenario};
use crate::serving::{Keep, ProbeSite, ServiceSpec, Serving, Site};
use serde::{Deserialize, Serialize};

/// The variants measured, in order: placements, then null tests.
pub const VARIANTS: &[&str] = &["one", "spread", "nosyscall", "write"];

/// The `artifacts` kind.
pub struct Artifacts;

/// What an `[artifacts]` table says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactsSettings {
    /// Variants measured, of [`VARIANTS`], in that order.
    pub variants: Vec<String>,
    /// Hops of the ring (N): the master plus N - 1 forwarders; spread needs N victims.
    pub hops: u32,
    /// Runs, each on fresh connections (the paper: 50).
    pub runs: u64,
    /// Timed iterations per run (the paper: 10,000).
    pub iterations: u64,
}

impl ArtifactsSettings {
    fn of(v: &serde_json::Value) -> Option<ArtifactsSettings> {
        serde_json::from_value(v.clone()).ok()
    }
}

impl ExperimentKind for Artifacts {
    fn name(&self) -> &'static str {
        "artifacts"
    }

    fn help(&self) -> &'static str {
        "relay ring over N hops in one tenant or spread over N tenants, and its null tests: \
         runs x iterations, mean/std/min/max per placement, every iteration kept"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let victims = sc.tenants.iter().filter(|t| t.role == Role::Victim).count();
        let mut variants: Vec<String> = Vec::new();
        for key in ["placements", "null_tests"] {
            let (allowed, default): (&[&str], &[&str]) = if key == "placements" {
                (&VARIANTS[..2], &VARIANTS[..2])
            } else {
                (&VARIANTS[2..], &VARIANTS[2..])
            };
            let chosen: Vec<String> = match f.array(key) {
                None => default.iter().map(|s| s.to_string()).collect(),
                Some((span, vs)) => {
                    let mut out = Vec::new();
                    for v in vs {
                        match v.as_str() {
                            Some(w) if allowed.contains(&w) && !out.contains(&w.to_string()) => {
                                out.push(w.to_string())
                            }
                            _ => f.error(
                                span,
                                key,
                                format!("`{v}` is not one of {} (each once)", allowed.join(", ")),
                                &allowed.join(", "),
                                format!(
                                    "write {key} = [{}]",
                                    default
                                        .iter()
                                        .map(|d| format!("\"{d}\""))
                                        .collect::<Vec<_>>()
                                        .join(", ")
                                ),
                            ),
                        }
                    }
                    out
                }
            };
            variants.extend(chosen);
        }
        let hops = f.int("hops", (1, 64), victims.max(1) as i64) as u32;
        if variants.iter().any(|v| v == "spread") && hops as usize > victims {
            f.error(
                f.span(),
                "hops",
                format!(
                    "the spread ring puts each of its {hops} hops in a victim of its own, and \
                     the scenario has {victims}"
                ),
                &format!("1..={victims}"),
                format!("add victims, or write hops = {victims}"),
            );
        }
        let runs = f.int("runs", (1, 100_000), 50) as u64;
        let iterations = f.int("iterations", (1, 100_000_000), 10_000) as u64;
        if variants.is_empty() {
            f.error(
                f.span(),
                "placements",
                "no placement and no null test is left to measure".into(),
                "at least one of one, spread, nosyscall, write",
                "write placements = [\"one\", \"spread\"]".into(),
            );
        }
        serde_json::to_value(ArtifactsSettings {
            variants,
            hops,
            runs,
            iterations,
        })
        .expect("settings serialize")
    }

    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let sc = r.scenario();
        let set = ArtifactsSettings::of(&sc.settings).unwrap_or(ArtifactsSettings {
            variants: VARIANTS.iter().map(|s| s.to_string()).collect(),
            hops: 1,
            runs: 50,
            iterations: 10_000,
        });
        if let Some(p) = sc.probes.iter().find(|p| p.name != "relay-ring") {
            r.error(sc.source.error(
                p.name_span,
                "probe.name",
                format!(
                    "an artifacts run measures the relay ring; probe {} is not",
                    p.name
                ),
                "one [[probe]] with name = \"relay-ring\"",
                "remove this [[probe]] table, or use kind = \"matrix\" for other probes",
            ));
        }
        let victims: Vec<String> = sc
            .tenants
            .iter()
            .filter(|t| t.role == Role::Victim)
            .map(|t| t.name.clone())
            .collect();
        if let Some(p) = the_one_probe(
            r,
            "relay-ring",
            "an artifacts run needs the relay-ring probe",
            "an artifacts run has one relay-ring probe (the kind derives its variants)",
            "artifacts.toml",
        ) {
            for t in sc
                .tenants
                .iter()
                .filter(|t| t.role == Role::Victim && t.netns)
            {
                r.error(sc.source.error(
                    t.span,
                    "tenant.network",
                    format!(
                        "tenant {} has its own network namespace, and the spread ring \
                         reaches its forwarders on loopback only",
                        t.name
                    ),
                    "victims that share the host's network",
                    "leave network = { namespace = true } out of the victims",
                ));
            }
            let mut params = p.params.clone();
            params.set("runs", serde_json::Value::from(set.runs));
            params.set("iterations", serde_json::Value::from(set.iterations));
            let mut probes = variants(&p.id, &params, &victims, set.hops as usize);
            probes.retain(|(probe, _)| {
                set.variants
                    .iter()
                    .any(|v| probe.id == format!("{}-{v}", p.id))
            });
            for (probe, _) in &mut probes {
                probe.metrics = p.metrics.clone();
            }
            for (probe, serving) in &probes {
                r.serve(&probe.id, serving.clone());
            }
            r.replace_probes(probes.into_iter().map(|(p, _)| p).collect());
        }
        Matrix.conditions(r, platform)
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        let (plan, stored) = (i.plan, i.stored);
        let cells = super::webapp::tenant_cells(i);
        let sections = plan
            .map(|p| {
                let usable = |t: &TrialRecord| stored.usable(t);
                let mut s = summary_section(&summaries(p, stored.trials, &usable));
                let kept = stored
                    .trials
                    .iter()
                    .filter(|t| stored.kept_disturbed(t))
                    .count();
                if kept > 0 {
                    s.notes.push(format!(
                        "{kept} of the trials behind it were disturbed by load from outside \
                         the run (kept, flagged: see the trust line)"
                    ));
                }
                let mut all = vec![s];
                all.extend(surface_sections(p, stored.trials, &usable));
                all.extend(histogram_section(p, stored.trials, &usable));
                all
            })
            .unwrap_or_default();
        Analysis {
            cells,
            aggressor: Vec::new(),
            classes: Vec::new(),
            sections,
        }
    }
}

/// The four variants of the declared ring `id` (parameters `params`) of `hops` hops (N)
/// over the tenants `victims`, each with where it runs: the master always in the first
/// victim; for `spread`, one forwarder in each other victim, the last relaying back to the
/// master's reserved loopback port.
pub fn variants(
    id: &str,
    params: &isobench_workloads::ParamValues,
    victims: &[String],
    hops: usize,
) -> Vec<(PlannedProbe, Serving)> {
    let Some(first) = victims.first() else {
        return Vec::new();
    };
    let n = hops.clamp(1, victims.len().max(1));
    VARIANTS
        .iter()
        .map(|v| {
            let mut p = params.clone();
            p.set("raw", serde_json::Value::from(true));
            p.set("hops", serde_json::Value::from(n as u64));
            p.set(
                "variant",
                serde_json::Value::from(match *v {
                    "one" | "spread" => "network",
                    other => other,
                }),
            );
            let mut site = ProbeSite {
                tenant: first.clone(),
                at: Site::In,
                params: BTreeMap::new(),
            };
            let mut serving = Serving {
                services: Vec::new(),
                reserve: Vec::new(),
                sites: Vec::new(),
                keep: Keep::Block,
            };
            if *v == "spread" && n > 1 {
                // Forwarders last hop first: each must know its next hop.
                let hops: Vec<&String> = victims[1..n].iter().collect();
                serving.reserve.push("master".into());
                for (k, t) in hops.iter().enumerate().rev() {
                    let next = if k + 1 == hops.len() {
                        "master".to_string()
                    } else {
                        format!("f{}", k + 2)
                    };
                    serving.services.push(ServiceSpec {
                        id: format!("f{}", k + 1),
                        tenant: (*t).clone(),
                        kind: format!("relay-forwarder:{{addr:{next}}}"),
                    });
                }
                site.params.insert("first_hop".into(), "{addr:f1}".into());
                site.params.insert("listen".into(), "{addr:master}".into());
            }
            serving.sites.push(site);
            (
                PlannedProbe {
                    id: format!("{id}-{v}"),
                    name: "relay-ring".into(),
                    class: isobench_workloads::Class::Net,
                    params: p,
                    metrics: Vec::new(),
                    windowed: false,
                    serving: None,
                },
                serving,
            )
        })
        .collect()
}

/// Summary of one variant under one condition, over every timed iteration (Table 1 of the
/// paper): mean, standard deviation, min and max, in ns.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Variant (probe id).
    pub variant: String,
    /// `baseline` or the condition id.
    pub condition: String,
    /// Iterations behind it.
    pub iterations: u64,
    /// Runs behind it.
    pub runs: u64,
    /// Mean, ns.
    pub mean: f64,
    /// Standard deviation, ns.
    pub std: f64,
    /// Fastest iteration, ns.
    pub min: f64,
    /// Slowest iteration, ns.
    pub max: f64,
}

/// Per variant and condition, the summary over every iteration kept in the usable trials.
pub fn summaries(
    plan: &Plan,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) -> Vec<Summary> {
    let mut conds = vec!["baseline".to_string()];
    conds.extend(plan.conditions.iter().map(|c| c.id.clone()));
    let mut out = Vec::new();
    for p in &plan.probes {
        for c in &conds {
            let mut xs: Vec<f64> = Vec::new();
            let mut runs = 0u64;
            for t in trials
                .iter()
                .filter(|t| t.probe == p.id && condition_text(&t.condition) == *c && usable(t))
            {
                if let Some(s) = t.series.iter().find(|s| s.metric == "iter_ns") {
                    xs.extend(s.windows.iter().map(|w| w.value));
                }
                if let Some(s) = t.series.iter().find(|s| s.metric == "run_mean_ns") {
                    runs += s.windows.len() as u64;
                }
            }
            if xs.is_empty() {
                // No iterations kept: the trials' own summaries.
                if let Some(s) = from_samples(trials, usable, &p.id, c) {
                    out.push(s);
                }
                continue;
            }
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let var = if xs.len() > 1 {
                xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)
            } else {
                0.0
            };
            out.push(Summary {
                variant: p.id.clone(),
                condition: c.clone(),
                iterations: xs.len() as u64,
                runs,
                mean,
                std: var.sqrt(),
                min: xs.iter().copied().fold(f64::INFINITY, f64::min),
                max: xs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
    }
    out
}

/// A summary from the trials' own statistics (runs stored without every iteration): the
/// mean of their means and standard deviations, the smallest minimum, the largest maximum.
fn from_samples(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    probe: &str,
    cond: &str,
) -> Option<Summary> {
    let ts: Vec<&TrialRecord> = trials
        .iter()
        .filter(|t| t.probe == probe && condition_text(&t.condition) == cond && usable(t))
        .copied()
        .collect();
    let vals = |m: &str| -> Vec<f64> {
        ts.iter()
            .filter_map(|t| t.samples.iter().find(|s| s.metric == m).map(|s| s.value))
            .collect()
    };
    let avg = |v: Vec<f64>| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    Some(Summary {
        variant: probe.to_string(),
        condition: cond.to_string(),
        iterations: vals("iterations").iter().sum::<f64>() as u64,
        runs: 0,
        mean: avg(vals("iter_mean_ns"))?,
        std: avg(vals("iter_std_ns")).unwrap_or(0.0),
        min: vals("iter_min_ns")
            .into_iter()
            .fold(f64::INFINITY, f64::min),
        max: vals("iter_max_ns")
            .into_iter()
            .fold(f64::NEG_INFINITY, f64::max),
    })
}

/// Runs shown in a run x iteration surface; iterations are averaged into at most
/// [`SURFACE_BINS`] columns.
const SURFACE_RUNS: usize = 60;
const SURFACE_BINS: usize = 40;

/// Every kept run of `probe` under `condition`: its iterations in order (the trial's
/// `iter_ns` series cut into its runs, `run_mean_ns` having one window per run).
fn runs_of(
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
    probe: &str,
    condition: &str,
) -> Vec<Vec<f64>> {
    let mut runs = Vec::new();
    for t in trials
        .iter()
        .filter(|t| t.probe == probe && condition_text(&t.condition) == condition && usable(t))
    {
        let Some(iters) = t.series.iter().find(|s| s.metric == "iter_ns") else {
            continue;
        };
        let n_runs = t
            .series
            .iter()
            .find(|s| s.metric == "run_mean_ns")
            .map_or(1, |s| s.windows.len().max(1));
        let per = iters.windows.len() / n_runs;
        if per == 0 {
            continue;
        }
        runs.extend(
            iters
                .windows
                .chunks(per)
                .take(n_runs)
                .map(|c| c.iter().map(|w| w.value).collect::<Vec<f64>>()),
        );
    }
    runs
}

/// Per variant and condition, the run x iteration surface of paper 004 (figures 3-6): each
/// run's iterations in order, averaged into at most [`SURFACE_BINS`] spans, in microseconds.
fn surface_sections(
    plan: &Plan,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) -> Vec<Section> {
    let mut conds = vec!["baseline".to_string()];
    conds.extend(plan.conditions.iter().map(|c| c.id.clone()));
    let mut out = Vec::new();
    for p in &plan.probes {
        for c in &conds {
            let runs = runs_of(trials, usable, &p.id, c);
            let Some(len) = runs.iter().map(Vec::len).min().filter(|&l| l > 0) else {
                continue;
            };
            let bins = len.min(SURFACE_BINS);
            let mut s = Section::new(
                &format!("surface-{}-{c}", p.id),
                format!(
                    "Run x iteration: {} under {c}, mean per span of iterations",
                    p.id
                ),
                vec![
                    Column::text("run"),
                    Column::text("iterations"),
                    Column::unit("mean", "us"),
                ],
            )
            .with_plot(Plot::Heat {
                row: 0,
                col: 1,
                value: 2,
            });
            for (r, run) in runs.iter().take(SURFACE_RUNS).enumerate() {
                for b in 0..bins {
                    let (lo, hi) = (b * len / bins, (b + 1) * len / bins);
                    let span = &run[lo..hi];
                    let mean = span.iter().sum::<f64>() / span.len() as f64;
                    s.push(vec![
                        Value::text_of(format!("{}", r + 1)),
                        Value::text_of(if hi == lo + 1 {
                            hi.to_string()
                        } else {
                            format!("{}-{hi}", lo + 1)
                        }),
                        Value::number(mean / 1e3, 2),
                    ]);
                }
            }
            if runs.len() > SURFACE_RUNS {
                s.notes.push(format!(
                    "the first {SURFACE_RUNS} of {} runs shown",
                    runs.len()
                ));
            }
            out.push(s);
        }
    }
    out
}

/// The distribution of iteration times per variant and condition: the share of iterations
/// in each of 30 logarithmic bins (paper 004's histograms).
fn histogram_section(
    plan: &Plan,
    trials: &[&TrialRecord],
    usable: &dyn Fn(&TrialRecord) -> bool,
) -> Option<Section> {
    const BINS: usize = 30;
    let mut conds = vec!["baseline".to_string()];
    conds.extend(plan.conditions.iter().map(|c| c.id.clone()));
    let mut groups: Vec<(String, String, Vec<f64>)> = Vec::new();
    for p in &plan.probes {
        for c in &conds {
            let xs: Vec<f64> = runs_of(trials, usable, &p.id, c)
                .into_iter()
                .flatten()
                .filter(|x| *x > 0.0)
                .collect();
            if !xs.is_empty() {
                groups.push((p.id.clone(), c.clone(), xs));
            }
        }
    }
    let lo = groups
        .iter()
        .flat_map(|g| &g.2)
        .copied()
        .fold(f64::INFINITY, f64::min);
    let hi = groups
        .iter()
        .flat_map(|g| &g.2)
        .copied()
        .fold(0.0, f64::max);
    if groups.is_empty() || hi <= lo {
        return None;
    }
    let (l0, l1) = (lo.ln(), hi.ln());
    let step = (l1 - l0) / BINS as f64;
    let mut s = Section::new(
        "histogram",
        "Iteration times: share of iterations per logarithmic bin",
        vec![
            Column::text("variant"),
            Column::text("condition"),
            Column::unit("iteration", "us"),
            Column::unit("share", "%"),
        ],
    )
    .with_plot(Plot::Curve {
        x: 2,
        y: vec![3],
        by: vec![0, 1],
        limit: None,
        marks: Vec::new(),
        y2: Vec::new(),
    });
    for (variant, condition, xs) in &groups {
        let mut counts = [0usize; BINS];
        for x in xs {
            counts[(((x.ln() - l0) / step) as usize).min(BINS - 1)] += 1;
        }
        for (i, n) in counts.iter().enumerate() {
            let mid = (l0 + step * (i as f64 + 0.5)).exp();
            s.push(vec![
                Value::text_of(variant.clone()),
                Value::text_of(condition.clone()),
                Value::number(mid / 1e3, 3),
                Value::number(*n as f64 * 100.0 / xs.len() as f64, 2),
            ]);
        }
    }
    Some(s)
}

/// The summaries as a section, in microseconds as Table 1 of paper 004.
pub fn summary_section(rows: &[Summary]) -> Section {
    let mut s = Section::new(
        "table1",
        "Relay ring, one iteration (round trip), as Table 1 of paper 004",
        vec![
            Column::text("variant"),
            Column::text("condition"),
            Column::text("runs"),
            Column::text("iterations"),
            Column::unit("mean", "us"),
            Column::unit("std", "us"),
            Column::unit("min", "us"),
            Column::unit("max", "us"),
        ],
    )
    .with_plot(Plot::Bars {
        label: vec![0, 1],
        y: vec![4],
        reference: None,
    });
    for r in rows {
        s.push(vec![
            Value::text_of(r.variant.clone()),
            Value::text_of(r.condition.clone()),
            Value::text_of(r.runs.to_string()),
            Value::text_of(r.iterations.to_string()),
            Value::number(r.mean / 1e3, 2),
            Value::number(r.std / 1e3, 2),
            Value::number(r.min / 1e3, 2),
            Value::number(r.max / 1e3, 2),
        ]);
    }
    s.notes.push(
        "every iteration is kept with its trial: series iter_ns (one window per iteration) and \
         run_mean_ns (one per run) in `isobench export --format json`, for the run x \
         iteration surface"
            .into(),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_ring_chains_the_other_victims_back_to_the_master() {
        let victims: Vec<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
        let params = isobench_workloads::ParamValues::default();
        let vs = variants("ring", &params, &victims, 3);
        let ids: Vec<&str> = vs.iter().map(|(p, _)| p.id.as_str()).collect();
        assert_eq!(
            ids,
            ["ring-one", "ring-spread", "ring-nosyscall", "ring-write"]
        );
        let (p, s) = &vs[1];
        assert_eq!(p.params.0["hops"], 3);
        assert_eq!(p.params.0["raw"], true);
        let chain: Vec<(&str, &str, &str)> = s
            .services
            .iter()
            .map(|x| (x.id.as_str(), x.tenant.as_str(), x.kind.as_str()))
            .collect();
        assert_eq!(
            chain,
            [
                ("f2", "c", "relay-forwarder:{addr:master}"),
                ("f1", "b", "relay-forwarder:{addr:f2}"),
            ]
        );
        assert_eq!(s.sites[0].tenant, "a");
        assert_eq!(s.sites[0].params["first_hop"], "{addr:f1}");
        // The other variants run in the first victim on their own.
        assert!(vs[0].1.services.is_empty() && vs[0].1.sites[0].tenant == "a");
        assert_eq!(vs[2].0.params.0["variant"], "nosyscall");
    }
}
