//! What a `[tune]` table says: the victim's figure and its SLO, the search's precision, and
//! the knobs searched, each over a range between its tight and its loose end.

use std::time::Duration;

use isobench_common::Direction;
use isobench_platform::{CpuList, Knob, Limits};
use isobench_stats::SearchConfig;

use serde::{Deserialize, Serialize};
use toml::Value;

use crate::fields::Fields;
use crate::scenario::{Role, Scenario};

/// Steps of the grid the searched positions are put on: every setting a search can visit is
/// one of the `GRID + 1` settings `tight + k/GRID x (loose - tight)` (or the same on a log
/// scale), so each is a condition of the plan. A position the search asks for is measured at
/// the nearest step, at most 1/512 of the range away (a tenth of the finest usual resolution,
/// 0.02); a bisection's first eight halvings fall on steps exactly.
pub const GRID: usize = 256;

/// What a `[tune]` table says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TuneSettings {
    /// The id of the victim's `[[probe]]` whose figure the SLO bounds.
    pub probe: String,
    /// The victim tenant it runs in.
    pub victim: String,
    /// The probe's metric the SLO bounds (`lat_p99_ms`).
    pub metric: String,
    /// The SLO.
    pub slo: Slo,
    /// The widest boundary interval the search stops at, as a share of each knob's range.
    pub resolution: f64,
    /// Trials (pairs) every setting visited gets before it is judged.
    pub min_trials: usize,
    /// Trials after which a setting still undecided is left at the edge.
    pub max_trials: usize,
    /// The probability that every verdict of one search is right.
    pub level: f64,
    /// Whether each point's test takes the variance pooled over the points visited (fewer
    /// trials a point; right when the noise is about the same along the knob).
    #[serde(default = "yes")]
    pub pool_variance: bool,
    /// The knobs, each searched on its own with the others as planned.
    pub knobs: Vec<KnobRange>,
}

/// The service level objective on the victim's figure.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Slo {
    /// The metric's value, trial by trial, stays at or below `bound` (a p99 in ms).
    Max {
        /// The bound, in the metric's unit.
        bound: f64,
    },
    /// The metric's value stays at or above `bound` (a rate).
    Min {
        /// The bound, in the metric's unit.
        bound: f64,
    },
    /// The victim loses at most `percent` % of its figure alone (each trial against the
    /// baseline trial paired with it).
    Loss {
        /// The largest loss, %.
        percent: f64,
    },
    /// The `service` probe keeps at least `percent` % of its target rate at the 1st
    /// percentile of its windows, trial by trial (isol% at p01, as resctl-bench and the
    /// `protection` kind define it): each window's rate (the metric, `rate_rps`) over the
    /// rate it was asked to hold (`target_rps`).
    IsolP01 {
        /// The least isol% at p01.
        percent: f64,
        /// The window length, ms.
        window_ms: u64,
    },
}

impl Slo {
    /// The search's bound and the direction in which its figure is better: a loss is lower
    /// is better, whatever the metric's own direction.
    pub fn bound(self) -> (f64, Direction) {
        match self {
            Slo::Max { bound } => (bound, Direction::Lower),
            Slo::Min { bound } => (bound, Direction::Higher),
            Slo::Loss { percent } => (percent, Direction::Lower),
            Slo::IsolP01 { percent, .. } => (percent, Direction::Higher),
        }
    }

    /// What the search's figure is, trial by trial (`lat_p99_ms`, `loss of lat_p99_ms, %`,
    /// `isol% at p01`), for labels.
    pub fn figure(self, metric: &str) -> String {
        match self {
            Slo::Max { .. } | Slo::Min { .. } => metric.to_string(),
            Slo::Loss { .. } => format!("loss of {metric}, %"),
            Slo::IsolP01 { window_ms, .. } => format!("isol% at p01 of {window_ms} ms windows"),
        }
    }

    /// How the SLO reads (`lat_p99_ms <= 10`, `loss of lat_p99_ms <= 5%`).
    pub fn text(self, metric: &str) -> String {
        match self {
            Slo::Max { bound } => format!("{metric} <= {bound}"),
            Slo::Min { bound } => format!("{metric} >= {bound}"),
            Slo::Loss { percent } => format!("{metric} at most {percent}% worse than alone"),
            Slo::IsolP01 { percent, window_ms } => {
                format!("isol% at p01 >= {percent}% ({metric} per {window_ms} ms window / target)")
            }
        }
    }
}

/// One knob searched: a tenant's limit key between a tight and a loose setting.
///
/// A `cpuset` knob is a split of the CPUs: its range counts the CPUs given to the tenant
/// (`range = [1, N]`, whole numbers), and a count of k gives it the k highest-numbered of
/// CPUs 0..N-1, the list `N-k`..`N-1` (with N = 2: 1 is `1`, 2 is `0-1`). With the victim
/// pinned to CPU 0 by its own planned cpuset (which stays as planned), a small count keeps
/// the aggressor off the victim's CPU and N shares it. Its settings are whole CPUs: the
/// search visits whole counts only, to a resolution of at least one CPU.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KnobRange {
    /// The tenant whose knob moves.
    pub tenant: String,
    /// The limit key (`cpus`, `io_write_bps`, `memory_low`).
    pub key: String,
    /// The tightest setting (position 0), in the knob's number ([`knob_number`]).
    pub tight: f64,
    /// The loosest setting (position 1).
    pub loose: f64,
    /// Whether positions map to settings on a log scale (for ranges spanning decades).
    pub log: bool,
}

impl KnobRange {
    /// The knob.
    pub fn knob(&self) -> Knob {
        Knob::from_key(&self.key).expect("checked when read")
    }

    /// The setting at grid step `g` (0..=[`GRID`]), rounded as the knob is written.
    pub fn setting(&self, g: usize) -> f64 {
        let p = g as f64 / GRID as f64;
        let v = if self.log {
            self.tight * (self.loose / self.tight).powf(p)
        } else {
            self.tight + p * (self.loose - self.tight)
        };
        round_for(self.knob(), v)
    }

    /// The setting at grid step `g` in the limit syntax (`0.55`, `41943040`, `5000us`, a
    /// CPU list `1-3` for a cpuset).
    pub fn value_text(&self, g: usize) -> String {
        self.text(self.setting(g))
    }

    /// A setting `v` (in the knob's number, [`knob_number`]) in the limit syntax: a count of
    /// CPUs as its list for a cpuset (see the type's docs).
    pub fn text(&self, v: f64) -> String {
        match self.knob() {
            Knob::Cpuset => {
                let n = self.tight.max(self.loose) as u32;
                let k = (v.round() as u32).clamp(1, n);
                CpuList::from_cpus(n - k..n).to_string()
            }
            k => value_text(k, v),
        }
    }

    /// For a knob of whole settings (a count of CPUs), the number of steps between them
    /// across the range; `None` for a knob set anywhere in its range.
    pub fn steps(&self) -> Option<usize> {
        (self.knob() == Knob::Cpuset).then(|| (self.tight - self.loose).abs().round() as usize)
    }

    /// Decimals its settings are written with: hundredths of a CPU for a quota, whole
    /// units otherwise.
    pub fn digits(&self) -> u8 {
        if self.knob() == Knob::Cpus {
            2
        } else {
            0
        }
    }

    /// `tenant.key`.
    pub fn name(&self) -> String {
        format!("{}.{}", self.tenant, self.key)
    }
}

/// A knob's value as the limit syntax takes it (a cpuset's needs its range: [`KnobRange::text`]).
fn value_text(k: Knob, v: f64) -> String {
    match k {
        Knob::Cpus => format!("{v:.2}"),
        Knob::CpuBurst | Knob::IoLatency => format!("{v:.0}us"),
        _ => format!("{v:.0}"),
    }
}

/// `v` rounded to what the knob can hold: hundredths of a CPU, whole units otherwise (at
/// least 1).
fn round_for(k: Knob, v: f64) -> f64 {
    match k {
        Knob::Cpus => ((v * 100.0).round() / 100.0).max(0.01),
        _ => v.round().max(1.0),
    }
}

/// The number a knob's value is searched in: CPUs (a quota, or a cpuset's count of CPUs),
/// bytes, bytes/s, operations/s, the weight, microseconds, processes.
pub fn knob_number(k: Knob, l: &Limits) -> Option<f64> {
    let u = |x: Option<u64>| x.map(|n| n as f64);
    match k {
        Knob::Cpus => l.cpus,
        Knob::CpuWeight => l.cpu_weight.map(|w| w.as_weight() as f64),
        Knob::CpuBurst => u(l.cpu_burst),
        Knob::Cpuset => l.cpuset.as_ref().map(|s| s.len() as f64),
        Knob::Memory => u(l.memory),
        Knob::MemoryMin => u(l.memory_min),
        Knob::MemoryLow => u(l.memory_low),
        Knob::MemoryHigh => u(l.memory_high),
        Knob::Swap => u(l.swap),
        Knob::Pids => u(l.pids),
        Knob::IoReadBps => u(l.io_read_bps),
        Knob::IoWriteBps => u(l.io_write_bps),
        Knob::IoReadIops => u(l.io_read_iops),
        Knob::IoWriteIops => u(l.io_write_iops),
        Knob::IoWeight => u(l.io_weight),
        Knob::IoLatency => u(l.io_latency),
    }
}

/// Defaults.
const DEFAULT_RESOLUTION: f64 = 0.05;

/// The `[tune]` table through `f`, every problem reported there.
pub fn read(f: &mut Fields<'_, '_>, sc: &Scenario) -> TuneSettings {
    let probe = match f.string("probe") {
        Some(p) => {
            if !sc.probes.iter().any(|x| x.id == *p.get_ref()) {
                f.error(
                    p.span().into(),
                    "probe",
                    format!("no [[probe]] has the id {}", p.get_ref()),
                    "the id (label or name) of a [[probe]] of this file",
                    "write probe = \"service\" and add [[probe]] name = \"service\"".into(),
                );
            }
            p.into_inner()
        }
        None => sc.probes.first().map(|p| p.id.clone()).unwrap_or_default(),
    };
    let victim = sc
        .tenants
        .iter()
        .find(|t| t.role == Role::Victim)
        .map(|t| t.name.clone())
        .unwrap_or_default();
    let slo = read_slo(f);
    let metric = match (f.string("metric"), slo) {
        (Some(m), Slo::IsolP01 { .. }) if m.get_ref() != ISOL_RATE => {
            f.error(
                m.span().into(),
                "metric",
                format!(
                    "slo_isol_p01 is measured on the service's {ISOL_RATE}, not {}",
                    m.get_ref()
                ),
                "rate_rps with slo_isol_p01",
                "leave metric out, or write metric = \"rate_rps\"".into(),
            );
            ISOL_RATE.to_string()
        }
        (Some(m), _) => m.into_inner(),
        (None, Slo::IsolP01 { .. }) => ISOL_RATE.to_string(),
        (None, _) => {
            f.missing(
                "metric",
                "the victim probe's metric the SLO bounds",
                "metric = \"lat_p99_ms\"",
            );
            String::new()
        }
    };
    if let Slo::IsolP01 { .. } = slo {
        let name = sc
            .probes
            .iter()
            .find(|x| x.id == probe)
            .map(|x| x.name.as_str());
        if name.is_some_and(|n| n != "service") {
            let span = f.span();
            f.error(
                span,
                "slo_isol_p01",
                format!(
                    "isol% is the share of its target rate a `service` probe holds; probe {probe} \
                     is {} and has no target rate",
                    name.unwrap_or_default()
                ),
                "slo_isol_p01 with probe = the id of a [[probe]] name = \"service\"",
                "bound another figure (slo_max on lat_p99_ms), or measure a service probe".into(),
            );
        }
    }
    let resolution = f.float(
        "resolution",
        |x| x > 0.0 && x < 0.5,
        "a share of each knob's range, above 0 and below 0.5",
        DEFAULT_RESOLUTION,
    );
    let min_trials = f.int("min_trials", (2, 50), 3) as usize;
    let max_trials = f.int("max_trials", (2, 200), 12) as usize;
    if max_trials < min_trials {
        let span = f.span();
        f.error(
            span,
            "max_trials",
            format!("max_trials ({max_trials}) is below min_trials ({min_trials})"),
            "max_trials >= min_trials",
            format!("write max_trials = {}", min_trials * 4),
        );
    }
    let level = f.float(
        "level",
        |x| x > 0.5 && x < 1.0,
        "a probability above 0.5 and below 1",
        0.95,
    );
    // Off unless asked: a p99's spread grows many times where the SLO fails (822 +/- 300 ms
    // beside 1 ms here), and pooled over the points it leaves the points that hold undecided.
    let pool_variance = f.word("pool_variance", &[("on", true), ("off", false)], false);
    let knobs = read_knobs(f, sc);
    TuneSettings {
        probe,
        victim,
        metric,
        slo,
        resolution,
        min_trials,
        max_trials,
        level,
        pool_variance,
        knobs,
    }
}

fn yes() -> bool {
    true
}

/// The service's metric an isol% is measured on.
pub const ISOL_RATE: &str = "rate_rps";

/// The service's metric an isol% is measured against: the rate it was asked to hold.
pub const ISOL_TARGET: &str = "target_rps";

/// The window of `slo_isol_p01` when `window` is not given: a tenth of a second, so that a
/// trial of a few seconds holds tens of windows and its p01 is not its one worst window
/// alone (resctl-bench takes seconds over runs of minutes).
pub const DEFAULT_ISOL_WINDOW: Duration = Duration::from_millis(100);

/// Exactly one of `slo_max`, `slo_min`, `slo_loss` and `slo_isol_p01`.
fn read_slo(f: &mut Fields<'_, '_>) -> Slo {
    let given: Vec<&str> = ["slo_max", "slo_min", "slo_loss", "slo_isol_p01"]
        .into_iter()
        .filter(|k| f.has(k))
        .collect();
    if given.len() != 1 {
        let span = f.span();
        f.error(
            span,
            "slo_max",
            format!(
                "the SLO needs exactly one of slo_max, slo_min, slo_loss and slo_isol_p01; the \
                 table gives {}",
                if given.is_empty() {
                    "none".to_string()
                } else {
                    given.join(" and ")
                }
            ),
            "slo_max = bound (a p99 in ms), slo_min = bound (a rate), slo_loss = % worse \
             than alone, or slo_isol_p01 = % of the service's target rate",
            "write slo_max = 10 with metric = \"lat_p99_ms\"".into(),
        );
    }
    let positive = |x: f64| x > 0.0 && x.is_finite();
    if f.has("slo_min") {
        return Slo::Min {
            bound: f.float("slo_min", positive, "a bound above 0", 1.0),
        };
    }
    if f.has("slo_isol_p01") {
        let percent = f.float(
            "slo_isol_p01",
            |x| x > 0.0 && x <= 100.0,
            "a share of the target rate in %, above 0 and at most 100",
            90.0,
        );
        let window = f.duration("window", DEFAULT_ISOL_WINDOW);
        if window < Duration::from_millis(10) || window > Duration::from_secs(10) {
            let span = f.span();
            f.error(
                span,
                "window",
                format!("window {window:?} is out of range"),
                "10ms to 10s",
                "write window = \"100ms\"".into(),
            );
        }
        return Slo::IsolP01 {
            percent,
            window_ms: window.as_millis() as u64,
        };
    }
    if f.has("slo_loss") {
        return Slo::Loss {
            percent: f.float(
                "slo_loss",
                |x| x > 0.0 && x < 100.0,
                "a loss in %, above 0 and below 100",
                5.0,
            ),
        };
    }
    Slo::Max {
        bound: f.float("slo_max", positive, "a bound above 0", 10.0),
    }
}

/// The `[[tune.knob]]` tables.
fn read_knobs(f: &mut Fields<'_, '_>, sc: &Scenario) -> Vec<KnobRange> {
    let fix = "[[tune.knob]] tenant = \"batch\" key = \"cpus\" range = [0.1, 2]";
    let Some((span, items)) = f.array("knob") else {
        f.missing("knob", "one or more [[tune.knob]] tables", fix);
        return Vec::new();
    };
    let mut out: Vec<KnobRange> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let key = format!("knob[{i}]");
        let bad = |f: &mut Fields<'_, '_>, problem: String| {
            f.error(
                span,
                &key,
                problem,
                "tenant, key, range and scale",
                fix.into(),
            )
        };
        match knob_range(item, sc) {
            Ok(k) if out.iter().any(|o| o.name() == k.name()) => {
                bad(f, format!("{} is searched twice", k.name()))
            }
            Ok(k) => out.push(k),
            Err(problem) => bad(f, problem),
        }
    }
    out
}

/// One `[[tune.knob]]` table, or what is wrong with it.
fn knob_range(item: &Value, sc: &Scenario) -> Result<KnobRange, String> {
    let t = item.as_table().ok_or("is not a table")?;
    if let Some(k) = t
        .keys()
        .find(|k| !["tenant", "key", "range", "scale"].contains(&k.as_str()))
    {
        return Err(format!("`{k}` is not a key of a knob"));
    }
    let tenant = t
        .get("tenant")
        .and_then(Value::as_str)
        .ok_or("has no tenant (a string)")?;
    let Some(spec) = sc.tenants.iter().find(|x| x.name == tenant) else {
        return Err(format!("names tenant {tenant}, which the file lacks"));
    };
    let key = t.get("key").and_then(Value::as_str).ok_or("has no key")?;
    let knob = Knob::from_key(key).ok_or_else(|| {
        format!(
            "`{key}` is not a knob that can change while tenants run (those that can: {})",
            Knob::ALL.map(Knob::key).join(", ")
        )
    })?;
    let ends = match t.get("range").and_then(Value::as_array) {
        Some(a) if a.len() == 2 => a,
        _ => return Err("range must be [tight, loose]: two values".into()),
    };
    if knob == Knob::Cpuset {
        return cpu_split(tenant, spec.role, ends, t.get("scale"));
    }
    let mut nums = [0.0; 2];
    for (n, v) in nums.iter_mut().zip(ends) {
        let text = match v {
            Value::String(s) => s.clone(),
            Value::Integer(i) => i.to_string(),
            Value::Float(x) => x.to_string(),
            other => return Err(format!("range value {other} is not a limit value")),
        };
        let l = Limits::parse(&format!("{key}={text}")).map_err(|e| format!("range: {e}"))?;
        *n = knob_number(knob, &l)
            .filter(|x| *x > 0.0)
            .ok_or_else(|| format!("range value {text} is not a {key} above 0"))?;
    }
    // The tight end holds the aggressor back most; for a victim, protects it most.
    let protects = spec.role == Role::Victim;
    let (lo, hi) = (nums[0].min(nums[1]), nums[0].max(nums[1]));
    if lo == hi {
        return Err("range must span two different settings".into());
    }
    let (tight, loose) = if protects { (hi, lo) } else { (lo, hi) };
    let log = match t.get("scale").map(Value::as_str) {
        None => hi / lo >= 100.0,
        Some(Some("log")) => true,
        Some(Some("linear")) => false,
        Some(_) => return Err("scale must be \"linear\" or \"log\"".into()),
    };
    Ok(KnobRange {
        tenant: tenant.to_string(),
        key: key.to_string(),
        tight,
        loose,
        log,
    })
}

/// Most CPUs a split counts: each count must be a step of the grid of its own.
const MOST_SPLIT_CPUS: i64 = GRID as i64;

/// A `cpuset` knob: a split of CPUs 0..N-1 counted from `range = [1, N]` (see
/// [`KnobRange`]), or what is wrong with it.
fn cpu_split(
    tenant: &str,
    role: Role,
    ends: &[Value],
    scale: Option<&Value>,
) -> Result<KnobRange, String> {
    if role == Role::Victim {
        return Err(format!(
            "`cpuset` splits the CPUs away from the victim, so it is searched on an aggressor; \
             {tenant} is the victim: give it its own cpuset in its limits (cpuset = \"0\") and \
             search the aggressor's"
        ));
    }
    let mut counts = [0; 2];
    for (n, v) in counts.iter_mut().zip(ends) {
        // `isobench tune --knob` writes its ends as strings: a whole number there counts too.
        let count = match v {
            Value::Integer(i) => Some(*i),
            Value::String(s) if s.bytes().all(|b| b.is_ascii_digit()) => s.parse().ok(),
            _ => None,
        };
        *n = match count {
            Some(i) if (1..=MOST_SPLIT_CPUS).contains(&i) => i,
            _ => {
                return Err(format!(
                    "range value {v} is not a count of CPUs: a cpuset range counts the CPUs \
                     given to the tenant, whole numbers from 1 to {MOST_SPLIT_CPUS} (range = \
                     [1, 2] splits CPUs 0-1), not CPU lists"
                ));
            }
        };
    }
    let (lo, hi) = (counts[0].min(counts[1]), counts[0].max(counts[1]));
    if lo == hi {
        return Err("range must span two different counts of CPUs".into());
    }
    match scale.map(Value::as_str) {
        None | Some(Some("linear")) => {}
        Some(Some("log")) => {
            return Err(
                "scale = \"log\" does not fit a count of CPUs: a cpuset is searched one CPU \
                 at a time; leave scale out"
                    .into(),
            )
        }
        Some(_) => return Err("scale must be \"linear\" or \"log\"".into()),
    }
    Ok(KnobRange {
        tenant: tenant.to_string(),
        key: Knob::Cpuset.key().to_string(),
        tight: lo as f64,
        loose: hi as f64,
        log: false,
    })
}

impl TuneSettings {
    /// The windows the victim's probe records in each trial: the isol% SLO's, else none.
    pub fn window(&self) -> Option<Duration> {
        match self.slo {
            Slo::IsolP01 { window_ms, .. } => Some(Duration::from_millis(window_ms)),
            _ => None,
        }
    }

    /// What the search's figure is, for labels ([`Slo::figure`]).
    pub fn figure(&self) -> String {
        self.slo.figure(&self.metric)
    }

    /// The settings of a plan, when its `settings` are a tune's.
    pub fn of(v: &serde_json::Value) -> Option<TuneSettings> {
        serde_json::from_value(v.clone()).ok()
    }

    /// The search's configuration.
    pub fn config(&self) -> SearchConfig {
        let (bound, direction) = self.slo.bound();
        SearchConfig {
            bound,
            direction,
            resolution: self.resolution,
            min_trials: self.min_trials,
            max_trials: self.max_trials,
            level: self.level,
            pool_variance: self.pool_variance,
            steps: None,
        }
    }

    /// The search's configuration for knob `ki`: [`TuneSettings::config`], on a lattice of
    /// whole settings for a knob that has them ([`KnobRange::steps`]), to a resolution of
    /// at least one of its steps.
    pub fn config_for(&self, ki: usize) -> SearchConfig {
        let mut c = self.config();
        if let Some(n) = self.knobs[ki].steps() {
            c.steps = Some(n);
            c.resolution = c.resolution.max(1.0 / n as f64);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(n: f64) -> KnobRange {
        KnobRange {
            tenant: "batch".into(),
            key: "cpuset".into(),
            tight: 1.0,
            loose: n,
            log: false,
        }
    }

    #[test]
    fn a_split_gives_the_highest_cpus_and_counts_its_list() {
        let k = split(4.0);
        let lists: Vec<String> = (1..=4).map(|c| k.text(c as f64)).collect();
        assert_eq!(lists, ["3", "2-3", "1-3", "0-3"]);
        assert_eq!(split(2.0).text(1.0), "1");
        assert_eq!(split(2.0).text(2.0), "0-1");
        // Between counts the nearer one; the grid's steps round to the four counts.
        assert_eq!(k.text(2.4), "2-3");
        let mut steps: Vec<String> = (0..=GRID).map(|g| k.value_text(g)).collect();
        steps.dedup();
        assert_eq!(steps, lists);
        assert_eq!(k.steps(), Some(3));
        let l = Limits::parse("cpuset=1-3").unwrap();
        assert_eq!(knob_number(Knob::Cpuset, &l), Some(3.0));
        let cpus = KnobRange {
            key: "cpus".into(),
            ..split(4.0)
        };
        assert_eq!((cpus.steps(), cpus.text(0.5)), (None, "0.50".to_string()));
    }
}
