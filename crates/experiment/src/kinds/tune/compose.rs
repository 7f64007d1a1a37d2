//! Writing a tune's victim probe, SLO, stressors and knobs into a `kind = "tune"` scenario's
//! text: one composition for `isobench tune`'s flags and the web UI's tune form, so both
//! queue the same scenario for the same answers, and the run stores the scenario it ran.
//!
//! Composing only writes the `[tune]` keys, `[[probe]]` and `[[stressor]]`; whether the
//! result is a sound tune (a knob's tenant exists, its key is a live limit, its range spans
//! two settings) is for the scenario check to say, at the field it concerns.

use toml::{Table, Value};

use super::settings::{Slo, DEFAULT_ISOL_WINDOW, ISOL_RATE};

/// The name a SLO on a `service` probe's isol% at p01 is written with (`isol_p01>=90`).
pub const ISOL_P01: &str = "isol_p01";

/// What to write into a tune scenario; `None` and empty lists leave the scenario's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TuneFlags {
    /// The victim's probe (a probe's name): written as `tune.probe` and as the scenario's
    /// one `[[probe]]` (kept as it is, with its parameters, when it already is that probe).
    pub probe: Option<String>,
    /// The SLO on the victim's figure.
    pub slo: Option<SloFlag>,
    /// The aggressor's stressors, each at full intensity.
    pub stressors: Vec<String>,
    /// The knobs to search.
    pub knobs: Vec<KnobFlag>,
    /// The widest boundary interval to stop at, as a share of each knob's range.
    pub resolution: Option<f64>,
}

/// An SLO: the bounded metric and its bound.
#[derive(Debug, Clone, PartialEq)]
pub struct SloFlag {
    /// The probe's metric (`lat_p99_ms`).
    pub metric: String,
    /// The bound.
    pub slo: Slo,
}

/// How an SLO's bound compares, as written between the metric and the bound.
pub const SLO_OPS: [&str; 3] = ["<=", ">=", "loss<="];

impl SloFlag {
    /// The SLO of a metric, a comparison of [`SLO_OPS`] and a bound above 0; the metric
    /// [`ISOL_P01`] with `>=` bounds a `service` probe's isol% at p01 (in %, windows of the
    /// scenario's `window` or 100 ms).
    pub fn new(metric: &str, op: &str, bound: f64) -> Result<SloFlag, String> {
        let metric = metric.trim();
        if metric.is_empty() || metric.contains(char::is_whitespace) {
            return Err(format!(
                "metric `{metric}`: write one of the probe's metrics, e.g. lat_p99_ms"
            ));
        }
        if !(bound.is_finite() && bound > 0.0) {
            return Err(format!("bound {bound}: write a number above 0"));
        }
        if metric == ISOL_P01 {
            if op.trim() != ">=" || bound > 100.0 {
                return Err(format!(
                    "isol% at p01 is bounded from below, in % of the target rate: write \
                     {ISOL_P01}>=90"
                ));
            }
            return Ok(SloFlag {
                metric: ISOL_RATE.to_string(),
                slo: Slo::IsolP01 {
                    percent: bound,
                    window_ms: DEFAULT_ISOL_WINDOW.as_millis() as u64,
                },
            });
        }
        let slo = match op.trim() {
            "<=" => Slo::Max { bound },
            ">=" => Slo::Min { bound },
            "loss<=" => Slo::Loss { percent: bound },
            other => {
                return Err(format!(
                    "`{other}` is not a comparison; write one of {}",
                    SLO_OPS.join(", ")
                ))
            }
        };
        Ok(SloFlag {
            metric: metric.to_string(),
            slo,
        })
    }

    /// `METRIC<=BOUND`, `METRIC>=BOUND` or `METRIC loss<=PCT` (a trailing `%` allowed).
    pub fn parse(s: &str) -> Result<SloFlag, String> {
        let bad = || {
            "write METRIC<=BOUND (lat_p99_ms<=10), METRIC>=BOUND (rate_rps>=500), METRIC \
             loss<=PCT (ops_per_sec loss<=5) or isol_p01>=PCT (isol_p01>=90)"
                .to_string()
        };
        let number = |t: &str| t.trim().trim_end_matches('%').trim().parse::<f64>().ok();
        let (left, op, right) = if let Some((l, r)) = s.split_once("<=") {
            match l.trim().strip_suffix("loss") {
                Some(m) => (m, "loss<=", r),
                None => (l, "<=", r),
            }
        } else if let Some((l, r)) = s.split_once(">=") {
            (l, ">=", r)
        } else {
            return Err(bad());
        };
        let bound = number(right).ok_or_else(bad)?;
        SloFlag::new(left, op, bound).map_err(|_| bad())
    }

    /// The `[tune]` key of the bound: `slo_max`, `slo_min` or `slo_loss`.
    pub fn key(&self) -> &'static str {
        match self.slo {
            Slo::Max { .. } => "slo_max",
            Slo::Min { .. } => "slo_min",
            Slo::Loss { .. } => "slo_loss",
            Slo::IsolP01 { .. } => "slo_isol_p01",
        }
    }

    /// The bound, in the metric's unit (a loss: %).
    pub fn bound(&self) -> f64 {
        self.slo.bound().0
    }
}

/// A knob to search: a tenant's live limit between two settings.
#[derive(Debug, Clone, PartialEq)]
pub struct KnobFlag {
    /// The tenant.
    pub tenant: String,
    /// Its limit's key (`cpus`).
    pub key: String,
    /// One end of the range, as a limit value (`0.05`, `1M`).
    pub from: String,
    /// The other end.
    pub to: String,
}

impl KnobFlag {
    /// A knob of its parts, none empty.
    pub fn new(tenant: &str, key: &str, from: &str, to: &str) -> Result<KnobFlag, String> {
        let parts = [
            ("tenant", tenant),
            ("key", key),
            ("the range's one end", from),
            ("the range's other end", to),
        ];
        if let Some((what, _)) = parts.iter().find(|(_, v)| v.trim().is_empty()) {
            return Err(format!(
                "{what} is empty; a knob is a tenant, its limit's key and a range, e.g. \
                 batch.cpus from 0.05 to 1"
            ));
        }
        Ok(KnobFlag {
            tenant: tenant.trim().into(),
            key: key.trim().into(),
            from: from.trim().into(),
            to: to.trim().into(),
        })
    }

    /// `TENANT.KEY=A..B`.
    pub fn parse(s: &str) -> Result<KnobFlag, String> {
        let bad = || {
            "write TENANT.KEY=A..B, e.g. batch.cpus=0.05..1 or batch.io_write_bps=1M..200M"
                .to_string()
        };
        let (name, range) = s.split_once('=').ok_or_else(bad)?;
        let (tenant, key) = name.split_once('.').ok_or_else(bad)?;
        let (a, b) = range.split_once("..").ok_or_else(bad)?;
        KnobFlag::new(tenant, key, a, b).map_err(|_| bad())
    }

    /// The `[[tune.knob]]` table.
    pub fn table(&self) -> Table {
        let mut t = Table::new();
        t.insert("tenant".into(), Value::String(self.tenant.clone()));
        t.insert("key".into(), Value::String(self.key.clone()));
        let ends = [&self.from, &self.to].map(|v| Value::String(v.clone()));
        t.insert("range".into(), Value::Array(ends.into()));
        t
    }
}

/// `base` (a tune scenario's TOML) with `flags` written in; `None` when `flags` give
/// nothing to write, so the scenario runs as its text says. The error says what is wrong
/// with `base`.
pub fn compose(base: &str, flags: &TuneFlags) -> Result<Option<String>, String> {
    let mut doc: Table = base.parse().map_err(|e| format!("not TOML: {e}"))?;
    if doc.get("kind").and_then(Value::as_str) != Some("tune") {
        return Err(
            "kind is not \"tune\"; a tune runs a tune scenario (kind = \"tune\" with a \
                    [tune] table, see examples/tune-cpu.toml)"
                .into(),
        );
    }
    if !write(&mut doc, flags)? {
        return Ok(None);
    }
    toml::to_string(&doc).map(Some).map_err(|e| e.to_string())
}

/// Writes `flags` into `doc`; whether any was given.
fn write(doc: &mut Table, flags: &TuneFlags) -> Result<bool, String> {
    let tune = doc
        .entry("tune")
        .or_insert_with(|| Value::Table(Table::new()))
        .as_table_mut()
        .ok_or("the scenario's `tune` is not a table")?;
    let mut changed = false;
    if let Some(p) = &flags.probe {
        tune.insert("probe".into(), Value::String(p.clone()));
        changed = true;
    }
    if let Some(slo) = &flags.slo {
        for k in ["slo_max", "slo_min", "slo_loss", "slo_isol_p01"] {
            tune.remove(k);
        }
        tune.insert("metric".into(), Value::String(slo.metric.clone()));
        tune.insert(slo.key().into(), Value::Float(slo.bound()));
        changed = true;
    }
    if let Some(r) = flags.resolution {
        tune.insert("resolution".into(), Value::Float(r));
        changed = true;
    }
    if !flags.knobs.is_empty() {
        let knobs = flags.knobs.iter().map(|k| Value::Table(k.table()));
        tune.insert("knob".into(), Value::Array(knobs.collect()));
        changed = true;
    }
    if let Some(p) = &flags.probe {
        if !is_only_probe(doc, p) {
            let mut t = Table::new();
            t.insert("name".into(), Value::String(p.clone()));
            doc.insert("probe".into(), Value::Array(vec![Value::Table(t)]));
        }
    }
    if !flags.stressors.is_empty() {
        let list = flags.stressors.iter().map(|s| {
            let mut t = Table::new();
            t.insert("name".into(), Value::String(s.clone()));
            t.insert("intensity".into(), Value::Integer(100));
            Value::Table(t)
        });
        doc.insert("stressor".into(), Value::Array(list.collect()));
        changed = true;
    }
    Ok(changed)
}

/// Whether the scenario's `[[probe]]` is one probe named `name` (its parameters are kept).
fn is_only_probe(doc: &Table, name: &str) -> bool {
    match doc
        .get("probe")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
    {
        Some([only]) => only.get("name").and_then(Value::as_str) == Some(name),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = include_str!("../../../../../examples/tune-cpu.toml");

    #[test]
    fn slo_parts_are_checked_each() {
        let s = SloFlag::new("rate_rps", ">=", 500.0).unwrap();
        assert_eq!((s.key(), s.bound()), ("slo_min", 500.0));
        assert!(SloFlag::new("", "<=", 1.0).unwrap_err().contains("metric"));
        assert!(SloFlag::new("a b", "<=", 1.0).is_err());
        assert!(SloFlag::new("x", "<=", 0.0).unwrap_err().contains("bound"));
        assert!(SloFlag::new("x", "<", 1.0).unwrap_err().contains("<="));
        let isol = SloFlag::parse("isol_p01>=90").unwrap();
        assert_eq!((isol.key(), isol.bound()), ("slo_isol_p01", 90.0));
        assert_eq!(isol.metric, "rate_rps");
        assert!(SloFlag::new("isol_p01", "<=", 90.0).is_err());
        assert!(SloFlag::new("isol_p01", ">=", 120.0).is_err());
        assert!(KnobFlag::new("batch", "cpus", "0.1", " ")
            .unwrap_err()
            .contains("other end"));
    }

    #[test]
    fn nothing_to_write_keeps_the_text_and_flags_are_written() {
        assert_eq!(compose(BASE, &TuneFlags::default()), Ok(None));
        let flags = TuneFlags {
            probe: Some("service".into()),
            slo: Some(SloFlag::parse("ops_per_sec loss<=5").unwrap()),
            stressors: vec!["memory".into()],
            knobs: vec![KnobFlag::parse("batch.cpus=0.1..2").unwrap()],
            resolution: Some(0.1),
        };
        let doc: Table = compose(BASE, &flags).unwrap().unwrap().parse().unwrap();
        let tune = doc["tune"].as_table().unwrap();
        assert_eq!(tune["metric"].as_str(), Some("ops_per_sec"));
        assert_eq!(tune["slo_loss"].as_float(), Some(5.0));
        assert!(!tune.contains_key("slo_max"));
        assert_eq!(tune["knob"].as_array().unwrap().len(), 1);
        assert_eq!(doc["stressor"][0]["name"].as_str(), Some("memory"));
        // The preset's service probe keeps its parameters.
        assert!(doc["probe"][0].get("params").is_some());
        let other = TuneFlags {
            probe: Some("cpu".into()),
            ..TuneFlags::default()
        };
        let doc: Table = compose(BASE, &other).unwrap().unwrap().parse().unwrap();
        assert!(doc["probe"][0].get("params").is_none());
        assert!(compose("kind = \"matrix\"", &flags)
            .unwrap_err()
            .contains("kind"));
    }
}
