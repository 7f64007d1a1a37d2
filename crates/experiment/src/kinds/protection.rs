//! `protection`: a latency-sensitive service holds its target load while an aggressor in a
//! neighbouring tenant starts, runs and stops: how much of its rate it keeps (isol%), how
//! far its tail latency rises (lat-imp%), how long and how far it breaks its SLO, how long
//! it takes to recover, and what the protection costs the aggressor (its work conserved),
//! each with an interval over repeated episodes (resctl-bench's protection scenarios;
//! Swan's SLO accounting).
//!
//! One episode is one trial of the victim's probe (a `service`, isobench's own or the
//! user's server under isobench's load generator) measuring in one-second windows: the
//! service holds its load for `stable`, the condition's stressors start in the aggressor
//! tenants and run for `aggressor` (or until they die), then the service runs on for
//! `recover` ([`crate::orchestrator`]'s episode design). Each condition (a stressor at an
//! intensity, given to every aggressor tenant) gets `episodes` episodes, and beside each an
//! "aggressor alone" trial of the same stressor with the service idle: the aggressor's rate
//! beside the service over its rate alone is its work conserved.
//!
//! The service's target rate is calibrated once per run when the probe's `rate` is 0
//! (the highest rate at which its p99 meets its SLO, times its `share`), and every episode
//! holds it. The figures are defined in [`isobench_stats::episode_figures`].

pub mod analysis;
mod settings;

pub use settings::{IsolationSetting, ProtectionSettings, SLO_PARAM};

use std::time::Duration;

use super::kind::{ExperimentKind, NothingToRun};
use super::matrix::Matrix;
use crate::cells::{Analysis, Inputs, Results};
use crate::fields::Fields;
use crate::plan::{Condition, Design, Estimate, KnobOverride, Overrides, Plan, Platform};
use crate::resolver::Resolver;
use crate::scenario::{Role, Scenario};
use crate::schedule::{Block, Needs, ScheduledTrial, TrialWhat};
use crate::source::Span;

/// The `protection` kind.
pub struct Protection;

impl ExperimentKind for Protection {
    fn name(&self) -> &'static str {
        "protection"
    }

    fn help(&self) -> &'static str {
        "a service at its target load while an aggressor starts, runs and stops: isol%, \
         lat-imp%, SLO seconds, recovery, and the aggressor's work conserved, over episodes"
    }

    fn settings(&self, f: &mut Fields<'_, '_>, sc: &Scenario) -> serde_json::Value {
        let probe = match f.string("probe") {
            Some(p) => {
                if !sc.probes.iter().any(|x| x.id == *p.get_ref()) {
                    let known: Vec<&str> = sc.probes.iter().map(|x| x.id.as_str()).collect();
                    f.error(
                        p.span().into(),
                        "probe",
                        format!("no [[probe]] has the id {}", p.get_ref()),
                        "the id (label or name) of a [[probe]] of this file",
                        format!("write probe = \"{}\"", known.first().unwrap_or(&"service")),
                    );
                }
                p.into_inner()
            }
            None => sc.probes.first().map(|p| p.id.clone()).unwrap_or_default(),
        };
        let victim = match f.string("victim") {
            Some(v) => {
                if !sc
                    .tenants
                    .iter()
                    .any(|t| t.name == *v.get_ref() && t.role == Role::Victim)
                {
                    f.error(
                        v.span().into(),
                        "victim",
                        format!("no victim tenant is named {}", v.get_ref()),
                        "the name of a [[tenant]] with role = \"victim\"",
                        "name a victim tenant, or leave victim out for the first one".into(),
                    );
                }
                v.into_inner()
            }
            None => sc
                .tenants
                .iter()
                .find(|t| t.role == Role::Victim)
                .map(|t| t.name.clone())
                .unwrap_or_default(),
        };
        let set = ProtectionSettings {
            probe,
            victim,
            settle: f.duration("settle", Duration::from_secs(3)),
            stable: f.duration("stable", Duration::from_secs(15)),
            aggressor: f.duration("aggressor", Duration::from_secs(30)),
            recover: f.duration("recover", Duration::from_secs(15)),
            episodes: f.int("episodes", (1, 1000), 3) as u32,
            window: f.duration("window", Duration::from_secs(1)),
            slo_ms: f.has("slo_ms").then(|| {
                f.float(
                    "slo_ms",
                    |x| x > 0.0 && x.is_finite(),
                    "a p99 bound in ms, above 0",
                    10.0,
                )
            }),
            sustain: f.int("sustain", (1, 100), 3) as u32,
            recovered_isol: f.float(
                "recovered_isol",
                |x| x > 0.0 && x <= 100.0,
                "an isol% in (0, 100]",
                90.0,
            ),
            settings: Vec::new(),
        };
        let mut set = set;
        set.settings = isolation_settings(f, sc);
        if set.settle >= set.stable {
            let span = f.span();
            f.error(
                span,
                "settle",
                format!(
                    "the warm-up ({:?}) leaves nothing of the stable period ({:?}) to compare \
                     against",
                    set.settle, set.stable
                ),
                "settle shorter than stable",
                "lengthen stable or shorten settle".into(),
            );
        }
        if set.window.is_zero() || set.window > set.aggressor {
            let span = f.span();
            f.error(
                span,
                "window",
                "the window must be above 0 and no longer than the aggressor's run".into(),
                "a duration such as \"1s\"",
                "write window = \"1s\"".into(),
            );
        }
        serde_json::to_value(set).expect("settings serialize")
    }

    /// Every stressor at each of its intensities, given to every aggressor tenant; the
    /// service probe must exist and run in a victim.
    fn conditions(&self, r: &mut Resolver, platform: Platform) -> Vec<Condition> {
        let sc = r.scenario();
        let Some(set) = ProtectionSettings::of(&sc.settings) else {
            return Vec::new();
        };
        if !sc.probes.iter().any(|p| p.id == set.probe) {
            r.error(sc.source.error(
                Span::default(),
                "probe",
                "a protection run needs the service it protects",
                "one [[probe]], typically name = \"service\"",
                "add [[probe]] name = \"service\" (see examples/protection.toml)",
            ));
            return Vec::new();
        }
        if !sc.tenants.iter().any(|t| t.role == Role::Aggressor) {
            r.error(sc.source.error(
                Span::default(),
                "tenant",
                "a protection run needs a tenant for the aggressor",
                "a [[tenant]] with role = \"aggressor\"",
                "add [[tenant]] name = \"batch\" role = \"aggressor\"",
            ));
            return Vec::new();
        }
        let base = Matrix.conditions(r, platform);
        let base: Vec<Condition> = base
            .into_iter()
            .map(|mut c| {
                c.design = Design::Paired;
                c.design_reason = "an episode: the aggressor starts after the service's \
                                   stable period and stops before its recovery"
                    .into();
                c
            })
            .collect();
        if set.settings.is_empty() {
            return base;
        }
        let v2 = platform == Platform::CGROUP
            && isobench_platform::CgroupFs::detect()
                .is_ok_and(|fs| fs.version() == isobench_platform::CgroupVersion::V2);
        let mut out = Vec::new();
        for s in &set.settings {
            if s.cgroup.as_deref() == Some("v2") && !v2 {
                r.note(format!(
                    "isolation setting {} left out: it needs cgroup v2 tenants, and this run's \
                     are not (run it on a cgroup v2 host, e.g. the v2 guest)",
                    s.name
                ));
                continue;
            }
            for c in &base {
                let mut c = c.clone();
                c.id = format!("{}/{}", s.name, c.id);
                c.limits = s.limits.clone();
                out.push(c);
            }
        }
        out
    }

    fn nothing_to_run(&self) -> NothingToRun {
        NothingToRun {
            field: "stressor",
            problem: "no aggressor is left to run on this platform",
            allowed: "stressors this platform supports (`isobench list`)",
            fix: "add a stressor this platform can run, or run as root for cgroup tenants",
        }
    }

    /// Per condition and episode: the episode and an aggressor-alone trial.
    fn estimate(&self, plan: &Plan) -> Estimate {
        let Some(set) = ProtectionSettings::of(&plan.settings) else {
            return Estimate {
                trials_per_round: 0,
                trials_min: 0,
                trials_max: 0,
                secs_min: 0.0,
                secs_max: 0.0,
            };
        };
        let n = plan.conditions.len() as u32 * set.episodes;
        let per = set.length() + plan.trial.solo + plan.trial.warmup * 2;
        let secs = n as f64 * per.as_secs_f64();
        Estimate {
            trials_per_round: n * 2,
            trials_min: n * 2,
            trials_max: n * 2,
            secs_min: secs,
            secs_max: secs,
        }
    }

    fn first_needs(&self, plan: &Plan) -> Needs {
        let mut n = Needs::default();
        if !plan.conditions.is_empty() {
            n.cells.insert((0, 0));
        }
        n
    }

    /// Round 0 holds everything: episode by episode, every condition once, its episode then
    /// its aggressor alone, the conditions' order rotated from one episode to the next so
    /// no condition always follows the same one.
    fn round_blocks(&self, plan: &Plan, round: u32, _needs: &Needs) -> Vec<Block> {
        let Some(set) = ProtectionSettings::of(&plan.settings) else {
            return Vec::new();
        };
        let Some(p) = plan.probes.iter().position(|x| x.id == set.probe) else {
            return Vec::new();
        };
        let n = plan.conditions.len();
        if round > 0 || n == 0 {
            return Vec::new();
        }
        let mut blocks = Vec::new();
        for e in 0..set.episodes as usize {
            for k in 0..n {
                let c = (k + e) % n;
                for what in [TrialWhat::Episode(p), TrialWhat::Solo] {
                    if what == TrialWhat::Solo && plan.trial.solo.is_zero() {
                        continue;
                    }
                    blocks.push(Block {
                        round,
                        index: blocks.len() as u32,
                        condition: Some(c),
                        trials: vec![ScheduledTrial { slot: 0, what }],
                    });
                }
            }
        }
        blocks
    }

    fn analyze(&self, i: Inputs<'_>) -> Analysis {
        analysis::analyze(i.run, i.plan, i.settings)
    }

    /// One round holds every episode; nothing is added after it.
    fn needs(&self, _plan: &Plan, _results: &Results) -> Needs {
        Needs::default()
    }

    fn finished(&self, plan: &Plan, _rounds: u32) -> String {
        let n = ProtectionSettings::of(&plan.settings).map_or(0, |s| s.episodes);
        format!("every aggressor ran its {n} episode(s), as planned")
    }
}

/// The `[[protection.setting]]` tables, checked: a unique `name`, `limits` as a table of
/// tenant tables of knobs (a value in the limit syntax, or `"none"` to lift the knob), and
/// optionally `cgroup = "v2"`. Problems are reported at the array.
fn isolation_settings(f: &mut Fields<'_, '_>, sc: &Scenario) -> Vec<IsolationSetting> {
    let Some((span, items)) = f.array("setting") else {
        return Vec::new();
    };
    let fix = "[[protection.setting]] name = \"v1-limits\" limits = { batch = { cpus = 0.5, \
               memory = \"512M\" } }";
    let mut out: Vec<IsolationSetting> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let key = format!("setting[{i}]");
        let bad = |f: &mut Fields<'_, '_>, problem: String| {
            f.error(span, &key, problem, "name, limits and cgroup", fix.into())
        };
        let Some(t) = item.as_table() else {
            bad(f, "is not a table".into());
            continue;
        };
        if let Some(k) = t
            .keys()
            .find(|k| !["name", "limits", "cgroup"].contains(&k.as_str()))
        {
            bad(f, format!("`{k}` is not a key of a setting"));
            continue;
        }
        let Some(name) = t.get("name").and_then(|v| v.as_str()) else {
            bad(f, "has no name (a string)".into());
            continue;
        };
        if name.is_empty() || name.contains('/') || out.iter().any(|s| s.name == name) {
            bad(
                f,
                format!("name `{name}` is empty, holds a `/` or is given twice"),
            );
            continue;
        }
        let cgroup = match t.get("cgroup").map(|v| v.as_str()) {
            None => None,
            Some(Some("v2")) => Some("v2".to_string()),
            Some(_) => {
                bad(f, "cgroup must be \"v2\" when given".into());
                continue;
            }
        };
        let mut limits = Overrides::default();
        let empty = toml::value::Table::new();
        let lt = match t.get("limits") {
            None => &empty,
            Some(toml::Value::Table(lt)) => lt,
            Some(_) => {
                bad(f, "limits is not a table of tenants".into());
                continue;
            }
        };
        let mut ok = true;
        for (tenant, knobs) in lt {
            if !sc.tenants.iter().any(|x| &x.name == tenant) {
                bad(
                    f,
                    format!("limits names tenant {tenant}, which the file lacks"),
                );
                ok = false;
                continue;
            }
            let Some(knobs) = knobs.as_table() else {
                bad(f, format!("limits.{tenant} is not a table of knobs"));
                ok = false;
                continue;
            };
            let mut pairs: Vec<(String, Option<String>)> = Vec::new();
            for (k, v) in knobs {
                let v = match v {
                    toml::Value::String(s) if s == "none" => None,
                    toml::Value::String(s) => Some(s.clone()),
                    toml::Value::Integer(n) => Some(n.to_string()),
                    toml::Value::Float(x) => Some(x.to_string()),
                    other => {
                        bad(
                            f,
                            format!("limits.{tenant}.{k}: {other} is not a limit value"),
                        );
                        ok = false;
                        continue;
                    }
                };
                pairs.push((k.clone(), v));
            }
            match KnobOverride::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_deref()))) {
                Ok(o) => {
                    limits.insert(tenant.clone(), o);
                }
                Err(e) => {
                    bad(f, format!("limits.{tenant}: {e}"));
                    ok = false;
                }
            }
        }
        if ok {
            out.push(IsolationSetting {
                name: name.to_string(),
                limits,
                cgroup,
            });
        }
    }
    out
}
