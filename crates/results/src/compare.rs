//! Comparing runs ([`RunComparison`]): the same cells measured in two or more runs (another
//! platform, limit, host or version), each run's degradation beside the reference's (the first
//! run), the difference with its interval and whether it survives a correction for multiple
//! comparisons; the kinds' own sections side by side; and, listed plainly, what the runs do
//! not share (cells, sections, settings).
//!
//! Why here: it is built from the results documents alone, and says what it found as
//! [`Section`]s, so the terminal, Markdown and CSV renderers draw it as they draw a run. The
//! statistics are [`isobench_stats::degradation_difference`]'s: each run's interval read back
//! on its log-ratio scale, the two combined as independent, Holm across every difference.

use std::collections::BTreeMap;

use isobench_common::{Direction, Role};
use isobench_stats::{
    correct_differences, interval_df, log_difference, Comparison, Correction, DegradationCi,
    DegradationDifference, LogScale,
};
use serde::{Deserialize, Serialize};

use crate::headline::p_text;
use crate::{Cell, Column, Plot, Results, RunInfo, Section, Value, SOLO_PROBE, UNTRUSTWORTHY_MARK};

/// Version of the [`RunComparison`] document (JSON of `isobench compare`).
pub const COMPARISON_SCHEMA_VERSION: u32 = 1;

/// The id prefix of a kind's section set side by side (`kind-protection`).
pub const KIND_PREFIX: &str = "kind-";

/// The correction applied across every difference tested.
const CORRECTION: Correction = Correction::Holm;

/// A run as a comparison names it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedRun {
    /// `A` for the reference, then `B`, `C`, ...
    pub label: String,
    /// Run id.
    pub id: String,
    /// Scenario name.
    pub scenario: String,
    /// Experiment kind.
    pub kind: String,
    /// `complete`, `interrupted`, ...
    pub status: String,
    /// Platform.
    pub platform: String,
    /// Platform version / description.
    pub platform_version: String,
    /// Host in one line ([`RunInfo::host_summary`]).
    pub host: String,
    /// Start time, RFC 3339.
    pub started_at: String,
    /// Seed (free to differ).
    pub seed: u64,
    /// isobench version that ran it.
    pub tool_version: String,
    /// Confidence level of its intervals.
    pub confidence: f64,
}

/// One cell measured in the reference and in at least one other run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComparedCell {
    /// Victim cell, or the aggressor's own rate.
    pub role: Role,
    /// The tenant measured in each run (`None` where the run lacks the cell).
    pub tenants: Vec<Option<String>>,
    /// True when the runs' cells were matched by tenant name (a run has several tenants of
    /// this role); false when every run has one, whose names may differ.
    pub by_tenant_name: bool,
    /// Probe id ([`SOLO_PROBE`] for an aggressor's rate against its rate alone).
    pub probe: String,
    /// Metric.
    pub metric: String,
    /// Unit.
    pub unit: String,
    /// Better direction.
    pub direction: Direction,
    /// `stressor@intensity`.
    pub condition: String,
    /// Each run's degradation (percent, positive = worse) with its interval; `None` where the
    /// run lacks the cell or has no estimate for it.
    pub degradations: Vec<Option<DegradationCi>>,
    /// Whether each run flagged its figure untrustworthy (too few values, too noisy; a wide
    /// interval alone is not); `false` where it has none.
    pub untrustworthy: Vec<bool>,
    /// Each other run against the reference, in run order (`B`, `C`, ...).
    pub versus: Vec<Versus>,
}

/// One run against the reference for one cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Versus {
    /// The run's label.
    pub run: String,
    /// The difference, run minus reference, when it could be tested.
    pub difference: Option<DegradationDifference>,
    /// Why there is no test, when there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_test: Option<String>,
}

/// A setting whose value differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SettingDifference {
    /// What it is (`platform`, `limits of the victim`, `trial.duration`, ...).
    pub setting: String,
    /// Its value in each run, `-` where the run has none (listed when at least two runs have
    /// it and they differ).
    pub values: Vec<String>,
}

/// Something some runs have and others do not, or that cannot be set side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotShared {
    /// What (`condition cpu@100`, `probe metric cache-latency llc_ns`, a cell, a section).
    pub what: String,
    /// Labels of the runs that have it.
    pub runs: Vec<String>,
    /// Why it is not compared.
    pub why: String,
}

/// Two or more runs compared cell by cell against the first (the reference).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunComparison {
    /// [`COMPARISON_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// isobench version that made the comparison.
    pub tool_version: String,
    /// The runs, reference first.
    pub runs: Vec<ComparedRun>,
    /// Confidence level of the differences' intervals (the reference's).
    pub level: f64,
    /// Correction of the p-values across every difference tested.
    pub correction: Correction,
    /// Differences tested (the family of the correction).
    pub tested: usize,
    /// Of which significant after the correction.
    pub significant: usize,
    /// The cells shared by the reference and at least one other run: victims, then the
    /// aggressors' own rates.
    pub cells: Vec<ComparedCell>,
    /// Settings that differ (the seed is not listed: it is free to differ).
    pub settings: Vec<SettingDifference>,
    /// What the runs do not share.
    pub not_shared: Vec<NotShared>,
    /// Everything above as tables: `runs`, `victims`, `aggressor`, each shared kind section
    /// side by side (`kind-ID`), `settings`, `not-shared` (empty ones left out).
    pub sections: Vec<Section>,
}

impl RunInfo {
    /// The host in one line: name, CPU model, cores, kernel, cgroup version (those known).
    pub fn host_summary(&self) -> String {
        let h = &self.host;
        let text = |k: &str| h.get(k).and_then(|v| v.as_str()).filter(|s| !s.is_empty());
        let mut parts: Vec<String> = Vec::new();
        parts.extend(text("hostname").map(str::to_string));
        parts.extend(text("cpu_model").map(str::to_string));
        parts.extend(
            h.get("cores")
                .and_then(|v| v.as_u64())
                .map(|c| format!("{c} cores")),
        );
        parts.extend(text("kernel").map(|k| format!("kernel {k}")));
        parts.extend(text("cgroup_version").map(|v| format!("cgroup {v}")));
        parts.join(" · ")
    }
}

/// `A`, `B`, ... `Z`, then `R27`, `R28`, ...
fn label(i: usize) -> String {
    match u8::try_from(i) {
        Ok(k) if k < 26 => char::from(b'A' + k).to_string(),
        _ => format!("R{}", i + 1),
    }
}

impl RunComparison {
    /// Compares `runs` against the first. With fewer than two runs nothing is compared.
    pub fn new(runs: &[Results]) -> RunComparison {
        let labels: Vec<String> = (0..runs.len()).map(label).collect();
        let level = runs.first().map_or(0.95, |r| r.confidence);
        let (mut cells, mut not_shared) = match_cells(runs, &labels);
        correct_differences(
            cells
                .iter_mut()
                .flat_map(|c| c.versus.iter_mut())
                .filter_map(|v| v.difference.as_mut()),
            CORRECTION,
        );
        let differences = || {
            cells
                .iter()
                .flat_map(|c| &c.versus)
                .filter_map(|v| v.difference.as_ref())
        };
        let tested = differences().count();
        let significant = differences().filter(|d| d.significant).count();
        let (kind_sections, sections_not_shared) = compare_sections(runs, &labels);
        not_shared.extend(sections_not_shared);
        let mut c = RunComparison {
            schema_version: COMPARISON_SCHEMA_VERSION,
            tool_version: env!("CARGO_PKG_VERSION").to_string(),
            runs: runs
                .iter()
                .zip(&labels)
                .map(|(r, l)| compared_run(r, l))
                .collect(),
            level,
            correction: CORRECTION,
            tested,
            significant,
            cells,
            settings: setting_differences(runs),
            not_shared,
            sections: Vec::new(),
        };
        c.sections = c.build_sections(kind_sections);
        c
    }

    /// The kinds' own sections set side by side (a protection summary, a curve), in order.
    pub fn kind_sections(&self) -> impl Iterator<Item = &Section> {
        self.sections
            .iter()
            .filter(|s| s.id.starts_with(KIND_PREFIX))
    }

    /// The labels of the runs, reference first.
    pub fn labels(&self) -> Vec<&str> {
        self.runs.iter().map(|r| r.label.as_str()).collect()
    }

    /// One flat table of every compared cell, for CSV: role, tenant, probe, metric, unit,
    /// condition, each run's degradation with its interval, and for each other run the
    /// difference with its interval, p, adjusted p, significance and why there is no test.
    pub fn table(&self) -> Section {
        let labels = self.labels();
        let mut columns = ["role", "tenant", "probe", "metric", "unit", "condition"]
            .map(Column::text)
            .to_vec();
        columns.extend(labels.iter().map(|l| Column::unit(l, "%")));
        for l in &labels[1..] {
            let d = format!("{l}-{}", labels[0]);
            columns.push(Column::unit(&d, "points"));
            for what in ["p", "p adj", "significant", "no test"] {
                columns.push(Column::text(&format!("{d} {what}")));
            }
        }
        let mut s = Section::new("comparison", "Compared cells", columns);
        for c in &self.cells {
            let mut row: Vec<Value> = vec![
                Value::text_of(c.role.as_str()),
                Value::text_of(tenant_names(&c.tenants)),
                Value::text_of(&c.probe),
                Value::text_of(&c.metric),
                Value::text_of(&c.unit),
                Value::text_of(&c.condition),
            ];
            row.extend(c.degradations.iter().map(|d| match d {
                Some(d) => Value::estimate(d.estimate, d.lower, d.upper, 3),
                None => Value::Empty,
            }));
            for v in &c.versus {
                match &v.difference {
                    Some(d) => row.extend([
                        Value::estimate(d.estimate, d.lower, d.upper, 3),
                        Value::number(d.p_value, 6),
                        Value::number(d.p_adjusted, 6),
                        Value::text_of(if d.significant { "yes" } else { "no" }),
                        Value::Empty,
                    ]),
                    None => row.extend([
                        Value::Empty,
                        Value::Empty,
                        Value::Empty,
                        Value::Empty,
                        Value::text_of(v.no_test.clone().unwrap_or_default()),
                    ]),
                }
            }
            s.push(row);
        }
        s
    }

    /// The legend of the cell tables: what the columns and marks mean, and the method.
    pub fn legend(&self) -> Vec<String> {
        let labels = self.labels();
        let level = (self.level * 100.0).round();
        let alpha = 1.0 - self.level;
        let reference = labels.first().copied().unwrap_or("A");
        let differences: Vec<String> = labels
            .iter()
            .skip(1)
            .map(|l| format!("{l}-{reference}"))
            .collect();
        vec![
            format!(
                "{}: each run's degradation, % (positive = worse; {UNTRUSTWORTHY_MARK} untrustworthy in \
                 that run). \
                 {}: the difference in points, with its {level}% interval, against {reference}",
                labels.join(", "),
                differences.join(", ")
            ),
            format!(
                "p adj: p-value of no difference, {}-corrected across the {} differences \
                 tested; * significant (p adj < {alpha:.2}): {} of {}",
                self.correction.name(),
                self.tested,
                self.significant,
                self.tested
            ),
            "method: each run's interval read back on the log-ratio scale it was built on, the \
             two combined as independent; t with Welch-Satterthwaite degrees of freedom, normal \
             where a run's interval is a bootstrap one"
                .to_string(),
        ]
    }

    fn build_sections(&self, kind_sections: Vec<Section>) -> Vec<Section> {
        let mut out = vec![self.runs_section()];
        let mut tables: Vec<Section> = [Role::Victim, Role::Aggressor]
            .into_iter()
            .filter_map(|role| self.cells_section(role))
            .collect();
        if let Some(last) = tables.last_mut() {
            let untested = std::mem::take(&mut last.notes);
            last.notes = self.legend();
            last.notes.extend(untested);
        }
        out.extend(tables);
        out.extend(kind_sections);
        if !self.settings.is_empty() {
            let mut s = Section::new(
                "settings",
                "Settings that differ (the seed may differ)",
                std::iter::once(Column::text("setting"))
                    .chain(self.labels().iter().map(|l| Column::text(l)))
                    .collect(),
            );
            for d in &self.settings {
                s.push(
                    std::iter::once(Value::text_of(&d.setting))
                        .chain(d.values.iter().map(Value::text_of))
                        .collect(),
                );
            }
            out.push(s);
        }
        if !self.not_shared.is_empty() {
            let mut s = Section::new(
                "not-shared",
                "Not shared (not compared)",
                vec![
                    Column::text("what"),
                    Column::text("in"),
                    Column::text("why"),
                ],
            );
            for n in &self.not_shared {
                s.push(vec![
                    Value::text_of(&n.what),
                    Value::text_of(n.runs.join(", ")),
                    Value::text_of(&n.why),
                ]);
            }
            out.push(s);
        }
        out
    }

    fn runs_section(&self) -> Section {
        let mut s = Section::new(
            "runs",
            "Runs compared (A is the reference)",
            [
                "run", "id", "scenario", "kind", "platform", "host", "started", "status",
            ]
            .map(Column::text)
            .to_vec(),
        );
        for r in &self.runs {
            s.push(
                [
                    &r.label,
                    &r.id,
                    &r.scenario,
                    &r.kind,
                    &r.platform,
                    &r.host,
                    &r.started_at,
                    &r.status,
                ]
                .map(Value::text_of)
                .to_vec(),
            );
        }
        s
    }

    /// The table of one role's cells: a row per cell, each run's degradation, then per other
    /// run the difference, its adjusted p-value and the significance mark; untested cells
    /// say why in the notes.
    fn cells_section(&self, role: Role) -> Option<Section> {
        let cells: Vec<&ComparedCell> = self.cells.iter().filter(|c| c.role == role).collect();
        if cells.is_empty() {
            return None;
        }
        let labels = self.labels();
        let (id, title, head) = match role {
            Role::Victim => (
                "victims",
                "Victim degradation, % (positive = worse): each run against A",
                "probe metric @ condition",
            ),
            Role::Aggressor => (
                "aggressor",
                "Aggressor's own degradation, % (its rate beside the victims against alone)",
                "aggressor @ condition",
            ),
        };
        let mut columns = vec![Column::text(head)];
        columns.extend(labels.iter().map(|l| Column::unit(l, "%")));
        for l in &labels[1..] {
            columns.push(Column::unit(&format!("{l}-{}", labels[0]), "points"));
            columns.push(Column::text("p adj"));
            columns.push(Column::text("sig"));
        }
        let mut s = Section::new(id, title, columns);
        for c in cells {
            let row_label = cell_label(c);
            let mut row = vec![Value::text_of(&row_label)];
            for ((d, t), bad) in c.degradations.iter().zip(&c.tenants).zip(&c.untrustworthy) {
                row.push(match d {
                    Some(d) if *bad => Value::text_of(format!(
                        "{}{UNTRUSTWORTHY_MARK}",
                        Value::number(d.estimate, 1).text()
                    )),
                    Some(d) => Value::number(d.estimate, 1),
                    None if t.is_some() => Value::text_of("none"),
                    None => Value::Empty,
                });
            }
            for v in &c.versus {
                match &v.difference {
                    Some(d) => row.extend([
                        Value::estimate(d.estimate, d.lower, d.upper, 1),
                        Value::text_of(p_text(d.p_adjusted)),
                        Value::text_of(if d.significant { "*" } else { "" }),
                    ]),
                    None => {
                        row.extend([Value::text_of("no test"), Value::Empty, Value::Empty]);
                        if let Some(why) = &v.no_test {
                            s.notes
                                .push(format!("no test for {row_label}, {}: {why}", v.run));
                        }
                    }
                }
            }
            s.push(row);
        }
        Some(s)
    }
}

/// `<0.001`, or three decimals.
/// The tenant names of a cell: one name, or each run's joined by `/` when they differ.
fn tenant_names(tenants: &[Option<String>]) -> String {
    let mut seen: Vec<&str> = Vec::new();
    for t in tenants.iter().flatten() {
        if !seen.contains(&t.as_str()) {
            seen.push(t);
        }
    }
    seen.join("/")
}

/// `probe metric @ condition` (victims) or `own rate @ condition` (aggressors), with the
/// tenant first when the cells were matched by its name.
fn cell_label(c: &ComparedCell) -> String {
    let what = match c.role {
        Role::Victim if c.metric.is_empty() => c.probe.clone(),
        Role::Victim => format!("{} {}", c.probe, c.metric),
        Role::Aggressor if c.probe == SOLO_PROBE => "own rate".to_string(),
        Role::Aggressor => format!("own rate beside {}", c.probe),
    };
    let who = if c.by_tenant_name {
        format!("{}: ", tenant_names(&c.tenants))
    } else {
        String::new()
    };
    format!("{who}{what} @ {}", c.condition)
}

fn compared_run(r: &Results, label: &str) -> ComparedRun {
    ComparedRun {
        label: label.to_string(),
        id: r.run.id.clone(),
        scenario: r.run.scenario.clone(),
        kind: r.kind.clone(),
        status: r.run.status.clone(),
        platform: r.run.platform.clone(),
        platform_version: r.run.platform_version.clone(),
        host: r.run.host_summary(),
        started_at: r.run.started_at.clone(),
        seed: r.run.seed,
        tool_version: r.run.tool_version.clone(),
        confidence: r.confidence,
    }
}

/// What identifies a cell across runs: the tenant only where a run has several of its role.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct CellKey {
    role: Role,
    tenant: Option<String>,
    probe: String,
    metric: String,
    condition: String,
}

impl CellKey {
    /// `probe metric @ condition`, as [`cell_label`] words it.
    fn label(&self) -> String {
        cell_label(&ComparedCell {
            role: self.role,
            tenants: vec![self.tenant.clone()],
            by_tenant_name: self.tenant.is_some(),
            probe: self.probe.clone(),
            metric: self.metric.clone(),
            unit: String::new(),
            direction: Direction::Higher,
            condition: self.condition.clone(),
            degradations: Vec::new(),
            untrustworthy: Vec::new(),
            versus: Vec::new(),
        })
    }

    /// The probe metric (or the aggressor's own rate) under every condition.
    fn metric_label(&self) -> String {
        let who = self
            .tenant
            .as_ref()
            .map_or(String::new(), |t| format!("{t}: "));
        match self.role {
            Role::Victim => format!("{who}probe metric {} {}", self.probe, self.metric)
                .trim_end()
                .to_string(),
            Role::Aggressor if self.probe == SOLO_PROBE => format!("{who}aggressor's own rate"),
            Role::Aggressor => format!("{who}aggressor's own rate beside {}", self.probe),
        }
    }
}

fn role_cells(r: &Results, role: Role) -> &[Cell] {
    match role {
        Role::Victim => &r.cells,
        Role::Aggressor => &r.aggressor,
    }
}

/// True when no run has cells of two tenants of `role`: cells then match whatever the
/// tenants are called (a run's only victim against another run's only victim).
fn one_tenant_each(runs: &[Results], role: Role) -> bool {
    runs.iter().all(|r| {
        let cells = role_cells(r, role);
        cells.iter().all(|c| c.tenant == cells[0].tenant)
    })
}

/// Each run's cell under each key (reference first), keys in the order first met.
type Found<'a> = (Vec<CellKey>, BTreeMap<CellKey, Vec<Option<&'a Cell>>>);

fn find_cells(runs: &[Results]) -> Found<'_> {
    let mut order: Vec<CellKey> = Vec::new();
    let mut found: BTreeMap<CellKey, Vec<Option<&Cell>>> = BTreeMap::new();
    for role in [Role::Victim, Role::Aggressor] {
        let by_name = !one_tenant_each(runs, role);
        for (i, r) in runs.iter().enumerate() {
            for c in role_cells(r, role) {
                let key = CellKey {
                    role,
                    tenant: by_name.then(|| c.tenant.clone()),
                    probe: c.probe.clone(),
                    metric: c.metric.clone(),
                    condition: c.condition.clone(),
                };
                let slot = found.entry(key.clone()).or_insert_with(|| {
                    order.push(key);
                    vec![None; runs.len()]
                });
                slot[i].get_or_insert(c);
            }
        }
    }
    (order, found)
}

/// The cells the reference shares with another run, compared; and what is not shared.
fn match_cells(runs: &[Results], labels: &[String]) -> (Vec<ComparedCell>, Vec<NotShared>) {
    let (order, found) = find_cells(runs);
    let cells = order
        .iter()
        .filter_map(|k| {
            let f = &found[k];
            let reference = f.first().copied().flatten()?;
            f[1..]
                .iter()
                .any(Option::is_some)
                .then(|| compared_cell(k, reference, f, labels))
        })
        .collect();
    (cells, unshared_cells(&order, &found, labels))
}

fn compared_cell(
    key: &CellKey,
    reference: &Cell,
    found: &[Option<&Cell>],
    labels: &[String],
) -> ComparedCell {
    fn comparison<'a>(c: &Option<&'a Cell>) -> Option<&'a Comparison> {
        c.and_then(|c| c.comparison.as_ref())
    }
    ComparedCell {
        role: key.role,
        tenants: found.iter().map(|c| c.map(|c| c.tenant.clone())).collect(),
        by_tenant_name: key.tenant.is_some(),
        probe: reference.probe.clone(),
        metric: reference.metric.clone(),
        unit: reference.unit.clone(),
        direction: reference.direction,
        condition: reference.condition.clone(),
        degradations: found
            .iter()
            .map(|c| comparison(c).map(|x| x.degradation.clone()))
            .collect(),
        untrustworthy: found
            .iter()
            .map(|c| c.is_some_and(Cell::untrustworthy))
            .collect(),
        versus: found
            .iter()
            .zip(labels)
            .skip(1)
            .map(|(other, label)| {
                let (difference, no_test) = match difference(reference, *other, &labels[0], label) {
                    Ok(d) => (Some(d), None),
                    Err(why) => (None, Some(why)),
                };
                Versus {
                    run: label.clone(),
                    difference,
                    no_test,
                }
            })
            .collect(),
    }
}

/// Cell `b` of run `label` against cell `a` of the reference, or why they cannot be tested.
fn difference(
    a: &Cell,
    b: Option<&Cell>,
    reference: &str,
    label: &str,
) -> Result<DegradationDifference, String> {
    let b = b.ok_or_else(|| format!("not measured in {label}"))?;
    let ca = a
        .comparison
        .as_ref()
        .ok_or_else(|| format!("{reference} has no estimate: {}", why_none(a)))?;
    let cb = b
        .comparison
        .as_ref()
        .ok_or_else(|| format!("{label} has no estimate: {}", why_none(b)))?;
    if a.direction != b.direction {
        return Err(format!(
            "the metric's better direction differs ({reference}: {}, {label}: {})",
            a.direction.as_str(),
            b.direction.as_str()
        ));
    }
    let recover = |c: &Cell, ci: &DegradationCi, l: &str| {
        LogScale::recover(ci, c.direction, interval_df(ci, c.paired.as_ref()))
            .map_err(|e| format!("{l}: {e}"))
    };
    let la = recover(a, &ca.degradation, reference)?;
    let lb = recover(b, &cb.degradation, label)?;
    Ok(log_difference(&la, &lb, a.direction, ca.degradation.level))
}

/// Why a cell has no estimate.
fn why_none(c: &Cell) -> String {
    match (&c.dnr, &c.problem) {
        (Some(d), _) => format!("DNR in {} of {} trials ({})", d.count, d.of, d.reason),
        (None, Some(p)) => p.clone(),
        (None, None) => "no comparison was made".to_string(),
    }
}

/// The cells some runs lack: a whole condition, a whole probe metric (or aggressor rate), or
/// single cells, each once, with the runs that have it.
fn unshared_cells(
    order: &[CellKey],
    found: &BTreeMap<CellKey, Vec<Option<&Cell>>>,
    labels: &[String],
) -> Vec<NotShared> {
    let presence = |k: &CellKey| -> Vec<bool> { found[k].iter().map(Option::is_some).collect() };
    let merge = |into: &mut Vec<bool>, p: &[bool]| {
        for (x, y) in into.iter_mut().zip(p) {
            *x |= *y;
        }
    };
    let mut condition_in: BTreeMap<&str, Vec<bool>> = BTreeMap::new();
    let mut metric_in: BTreeMap<String, Vec<bool>> = BTreeMap::new();
    for k in order {
        let p = presence(k);
        merge(
            condition_in
                .entry(&k.condition)
                .or_insert_with(|| vec![false; labels.len()]),
            &p,
        );
        merge(
            metric_in
                .entry(k.metric_label())
                .or_insert_with(|| vec![false; labels.len()]),
            &p,
        );
    }
    let mut out: Vec<NotShared> = Vec::new();
    for k in order {
        let p = presence(k);
        if p.iter().all(|&x| x) {
            continue;
        }
        let what = if condition_in[k.condition.as_str()] == p {
            format!("condition {}", k.condition)
        } else if metric_in[&k.metric_label()] == p {
            k.metric_label()
        } else {
            k.label()
        };
        if out.iter().any(|n| n.what == what) {
            continue;
        }
        let pick = |want: bool| -> Vec<String> {
            labels
                .iter()
                .zip(&p)
                .filter(|(_, &x)| x == want)
                .map(|(l, _)| l.clone())
                .collect()
        };
        out.push(NotShared {
            what,
            runs: pick(true),
            why: format!("not measured in {}", pick(false).join(", ")),
        });
    }
    out
}

/// The kinds' own sections that every run has with the same columns, side by side, their
/// rows matched by label (a protection run's `setting/aggressor`, a curve's setting); the
/// rows only some runs have, and the sections that cannot be set side by side, as not shared.
fn compare_sections(runs: &[Results], labels: &[String]) -> (Vec<Section>, Vec<NotShared>) {
    let mut ids: Vec<&str> = Vec::new();
    for s in runs.iter().flat_map(|r| &r.sections) {
        if !ids.contains(&s.id.as_str()) {
            ids.push(&s.id);
        }
    }
    let mut side_by_side = Vec::new();
    let mut not_shared = Vec::new();
    if let Some((answers, unshared)) = crate::tune::compared(runs, labels) {
        let skipped: Vec<&str> = ids
            .iter()
            .copied()
            .filter(|id| crate::tune::compared_instead(id) && !crate::tune::holds_answers(id))
            .collect();
        ids.retain(|id| !crate::tune::compared_instead(id));
        side_by_side.push(answers);
        not_shared.extend(unshared);
        if !skipped.is_empty() {
            not_shared.push(NotShared {
                what: format!("sections {}", skipped.join(", ")),
                runs: labels.to_vec(),
                why: "the points each run's searches visited, at settings of their own: the \
                      runs are compared by their answers"
                    .to_string(),
            });
        }
    }
    for id in ids {
        let found: Vec<Option<&Section>> = runs
            .iter()
            .map(|r| r.sections.iter().find(|s| s.id == id))
            .collect();
        let title = found
            .iter()
            .flatten()
            .next()
            .map_or("", |s| s.title.as_str());
        let what = format!("section {id} ({title})");
        let having: Vec<String> = labels
            .iter()
            .zip(&found)
            .filter(|(_, s)| s.is_some())
            .map(|(l, _)| l.clone())
            .collect();
        let all: Vec<&Section> = found.iter().flatten().copied().collect();
        let aligned = if all.len() < runs.len() {
            let missing: Vec<&str> = labels
                .iter()
                .zip(&found)
                .filter(|(_, s)| s.is_none())
                .map(|(l, _)| l.as_str())
                .collect();
            Err(format!("not in {}", missing.join(", ")))
        } else {
            align(&all, labels)
        };
        match aligned {
            Err(why) => not_shared.push(NotShared {
                what,
                runs: having,
                why,
            }),
            Ok(rows) if runs.len() > 1 => {
                not_shared.extend(unshared_rows(id, &rows, labels));
                side_by_side.push(beside(&all, labels, &rows));
            }
            Ok(_) => {}
        }
    }
    (side_by_side, not_shared)
}

/// The first value of each row, as text: what a row is about.
fn row_labels(s: &Section) -> Vec<String> {
    s.rows
        .iter()
        .map(|r| r.first().map_or_else(String::new, Value::text))
        .collect()
}

/// One row of sections set side by side: its label, and its index in each run's section
/// (`None` where the run has no row of that label).
type AlignedRow = (String, Vec<Option<usize>>);

/// How sections of the same id line up, or why they cannot be set side by side: the same
/// columns are needed; rows are matched by position when every run has the same row labels,
/// else by label when no section repeats one (in the reference's order, then each other
/// run's rows it lacks), and at least one row must be in two runs.
fn align(all: &[&Section], labels: &[String]) -> Result<Vec<AlignedRow>, String> {
    let first = all[0];
    for (s, l) in all.iter().zip(labels).skip(1) {
        if s.headers() != first.headers() {
            return Err(format!(
                "columns differ: {}: {}; {l}: {}",
                labels[0],
                first.headers().join(", "),
                s.headers().join(", ")
            ));
        }
    }
    if first.columns.is_empty() {
        return Err("the section has no columns".to_string());
    }
    let per_run: Vec<Vec<String>> = all.iter().map(|s| row_labels(s)).collect();
    if per_run.iter().all(|r| *r == per_run[0]) {
        return Ok(per_run[0]
            .iter()
            .enumerate()
            .map(|(i, l)| (l.clone(), vec![Some(i); all.len()]))
            .collect());
    }
    let unique = per_run.iter().all(|r| {
        let mut seen: Vec<&String> = r.iter().collect();
        seen.sort();
        seen.dedup();
        seen.len() == r.len()
    });
    if !unique {
        // Repeated labels: rows can only be matched by position.
        let a = &per_run[0];
        for (b, l) in per_run.iter().zip(labels).skip(1) {
            if a.len() != b.len() {
                return Err(format!(
                    "{} has {} rows, {l} has {}",
                    labels[0],
                    a.len(),
                    b.len()
                ));
            }
            if let Some((x, y)) = a.iter().zip(b).find(|(x, y)| x != y) {
                return Err(format!(
                    "row labels differ: {} `{x}` where {l} has `{y}`",
                    labels[0]
                ));
            }
        }
    }
    // A row a run adds goes before the next of its rows already placed (else last), so
    // orders (settings, times) are kept.
    let mut rows: Vec<AlignedRow> = Vec::new();
    for (r, run_labels) in per_run.iter().enumerate() {
        for (i, l) in run_labels.iter().enumerate() {
            if let Some(k) = rows.iter().position(|(x, _)| x == l) {
                rows[k].1[r] = Some(i);
                continue;
            }
            let mut at = vec![None; all.len()];
            at[r] = Some(i);
            let before = run_labels[i + 1..]
                .iter()
                .find_map(|next| rows.iter().position(|(x, _)| x == next))
                .unwrap_or(rows.len());
            rows.insert(before, (l.clone(), at));
        }
    }
    if !rows
        .iter()
        .any(|(_, at)| at.iter().filter(|x| x.is_some()).count() > 1)
    {
        return Err(format!(
            "no row in common: {}",
            labels
                .iter()
                .zip(&per_run)
                .map(|(l, r)| format!("{l}: {}", r.join(", ")))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(rows)
}

/// Most row labels a not-shared line names.
const ROWS_NAMED: usize = 6;

/// The rows of section `id` some runs lack, one line per set of runs that have them.
fn unshared_rows(id: &str, rows: &[AlignedRow], labels: &[String]) -> Vec<NotShared> {
    let mut groups: Vec<(Vec<bool>, Vec<&str>)> = Vec::new();
    for (label, at) in rows {
        let present: Vec<bool> = at.iter().map(Option::is_some).collect();
        if present.iter().all(|&x| x) {
            continue;
        }
        match groups.iter_mut().find(|(p, _)| *p == present) {
            Some((_, ls)) => ls.push(label),
            None => groups.push((present, vec![label])),
        }
    }
    groups
        .into_iter()
        .map(|(present, ls)| {
            let mut named: Vec<String> = ls
                .iter()
                .take(ROWS_NAMED)
                .map(|l| format!("`{l}`"))
                .collect();
            if ls.len() > ROWS_NAMED {
                named.push(format!("{} more", ls.len() - ROWS_NAMED));
            }
            let pick = |want: bool| -> Vec<String> {
                labels
                    .iter()
                    .zip(&present)
                    .filter(|(_, &x)| x == want)
                    .map(|(l, _)| l.clone())
                    .collect()
            };
            NotShared {
                what: format!(
                    "{} {} of section {id}",
                    if ls.len() == 1 { "row" } else { "rows" },
                    named.join(", ")
                ),
                runs: pick(true),
                why: format!("not in {}", pick(false).join(", ")),
            }
        })
        .collect()
}

/// Sections with the same columns side by side, rows as [`align`] matched them: the label
/// column once, then each other column once per run (empty where the run lacks the row).
/// A bar chart or a time series is kept, a bar or a line per run.
fn beside(all: &[&Section], labels: &[String], rows: &[AlignedRow]) -> Section {
    let first = all[0];
    let mut columns = vec![first.columns[0].clone()];
    for c in &first.columns[1..] {
        for l in labels {
            columns.push(Column {
                name: format!("{} {l}", c.name),
                unit: c.unit.clone(),
            });
        }
    }
    let mut s = Section::new(
        &format!("{KIND_PREFIX}{}", first.id),
        format!("{} ({})", first.title, labels.join(" | ")),
        columns,
    );
    for (label, at) in rows {
        let mut row = vec![Value::text_of(label)];
        if let Some(v) = all
            .iter()
            .zip(at)
            .find_map(|(o, i)| i.and_then(|i| o.rows[i].first()))
        {
            row[0] = v.clone();
        }
        for c in 1..first.columns.len() {
            for (other, i) in all.iter().zip(at) {
                row.push(
                    i.and_then(|i| other.rows[i].get(c))
                        .cloned()
                        .unwrap_or(Value::Empty),
                );
            }
        }
        s.push(row);
    }
    s.plot = first.plot.as_ref().and_then(|p| plot_beside(p, all.len()));
    // A note every run has is said once; the others with the run they belong to.
    let everywhere = |n: &String| all.iter().all(|o| o.notes.contains(n));
    for (o, l) in all.iter().zip(labels) {
        s.notes.extend(
            o.notes
                .iter()
                .filter(|n| !everywhere(n))
                .map(|n| format!("{l}: {n}")),
        );
    }
    s.notes
        .extend(first.notes.iter().filter(|n| everywhere(n)).cloned());
    s
}

/// A section's bar chart or time series for its columns set side by side for `n` runs: the
/// label (time) column stays the first, each value column becomes its `n` copies. `None` for
/// the other plots, whose columns say which line a row is on.
fn plot_beside(plot: &Plot, n: usize) -> Option<Plot> {
    let copies = |c: usize| (0..n).map(move |r| 1 + (c - 1) * n + r);
    let values = |y: &[usize]| -> Option<Vec<usize>> {
        y.iter()
            .all(|&c| c >= 1)
            .then(|| y.iter().flat_map(|&c| copies(c)).collect())
    };
    match plot {
        Plot::Bars {
            label,
            y,
            reference,
        } if label == &[0] => Some(Plot::Bars {
            label: vec![0],
            y: values(y)?,
            reference: *reference,
        }),
        Plot::Series { x: 0, y, spans } => Some(Plot::Series {
            x: 0,
            y: values(y)?,
            spans: spans.clone(),
        }),
        _ => None,
    }
}

/// The value of a setting a run does not have.
const ABSENT: &str = "-";

/// Settings whose values differ between the runs that have them, in the order first met.
fn setting_differences(runs: &[Results]) -> Vec<SettingDifference> {
    let single = |role: &str| {
        runs.iter()
            .all(|r| r.tenants.iter().filter(|t| t.role == role).count() == 1)
    };
    let (one_victim, one_aggressor) = (single("victim"), single("aggressor"));
    let per_run: Vec<Vec<(String, String)>> = runs
        .iter()
        .map(|r| settings_of(r, one_victim, one_aggressor))
        .collect();
    let mut names: Vec<&str> = Vec::new();
    for (n, _) in per_run.iter().flatten() {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    names
        .into_iter()
        .filter_map(|name| {
            let values: Vec<String> = per_run
                .iter()
                .map(|s| {
                    s.iter()
                        .find(|(n, _)| n == name)
                        .map_or_else(|| ABSENT.to_string(), |(_, v)| v.clone())
                })
                .collect();
            // A setting of something only some runs have (a condition, a probe) differs
            // only among those that have it; the thing itself is listed as not shared.
            let present: Vec<&String> = values.iter().filter(|v| *v != ABSENT).collect();
            let differs = present.len() >= 2 && present.iter().any(|v| *v != present[0]);
            differs.then(|| SettingDifference {
                setting: name.to_string(),
                values,
            })
        })
        .collect()
}

/// One run's settings as (name, value) text: scenario, kind, platform, host, version,
/// confidence, tenants and their limits, and the plan's trial, repetition, probe, condition
/// and kind settings. The seed is left out: it is free to differ.
fn settings_of(r: &Results, one_victim: bool, one_aggressor: bool) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![
        ("scenario".into(), r.run.scenario.clone()),
        ("kind".into(), r.kind.clone()),
        ("platform".into(), r.run.platform.clone()),
        ("platform version".into(), r.run.platform_version.clone()),
        ("host".into(), r.run.host_summary()),
        ("tool version".into(), r.run.tool_version.clone()),
        (
            "confidence".into(),
            format!("{}%", (r.confidence * 100.0).round()),
        ),
    ];
    for role in ["victim", "aggressor"] {
        let names: Vec<&str> = r
            .tenants
            .iter()
            .filter(|t| t.role == role)
            .map(|t| t.name.as_str())
            .collect();
        out.push((format!("{role} tenants"), names.join(", ")));
    }
    for t in &r.tenants {
        let single = match t.role.as_str() {
            "victim" => one_victim,
            "aggressor" => one_aggressor,
            _ => false,
        };
        let name = if single {
            format!("limits of the {}", t.role)
        } else {
            format!("limits of {} {}", t.role, t.name)
        };
        out.push((name, limits_text(&t.limits)));
    }
    if let Some(plan) = &r.plan {
        for part in ["trial", "repetitions", "settings"] {
            flatten(part, &plan[part], &mut out);
        }
        for p in plan["probes"].as_array().into_iter().flatten() {
            if let Some(id) = p["id"].as_str() {
                flatten(&format!("probe {id}"), &p["params"], &mut out);
            }
        }
        for c in plan["conditions"].as_array().into_iter().flatten() {
            if let Some(id) = c["id"].as_str() {
                flatten(&format!("condition {id} design"), &c["design"], &mut out);
                flatten(&format!("condition {id}"), &c["params"], &mut out);
            }
        }
    }
    // Said once, above, as `confidence`.
    out.retain(|(n, _)| n != "repetitions.confidence");
    out
}

/// The limits a tenant ran with: as applied, else as requested, else as recorded.
fn limits_text(limits: &serde_json::Value) -> String {
    ["applied", "requested"]
        .iter()
        .find_map(|k| limits[*k].as_str())
        .map_or_else(|| leaf_text(limits), str::to_string)
}

/// `value` as (dotted path, text) pairs under `prefix`; objects are walked, the rest is text.
fn flatten(prefix: &str, value: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match value {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                flatten(&format!("{prefix}.{k}"), v, out);
            }
        }
        serde_json::Value::Null if prefix.contains('.') => out.push((prefix.into(), "none".into())),
        serde_json::Value::Null => {}
        v => out.push((prefix.to_string(), leaf_text(v))),
    }
}

fn leaf_text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => "none".to_string(),
        other => other.to_string(),
    }
}
