//! Metrics: a value with its unit, its direction and how repeated values combine, so no later
//! layer has to guess. Latency metrics also carry the full HdrHistogram of the events timed.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

pub use isobench_common::Direction;

/// How repeated values of one metric combine into one figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Aggregate {
    /// Arithmetic mean (latencies, times).
    Mean,
    /// Harmonic mean (rates: ops/s, MB/s).
    HarmonicMean,
    /// Sum (counts, bytes).
    Total,
    /// Maximum (worst case).
    Max,
}

/// The declared shape of a metric a workload returns (for `isobench list`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MetricSpec {
    /// Metric name, snake_case (`read_mbps`, `rtt_p99_ns`).
    pub name: &'static str,
    /// Unit (`ns`, `MB/s`, `Mbit/s`, `ops/s`, `GB/s`, `%`).
    pub unit: &'static str,
    /// Better direction.
    pub direction: Direction,
    /// How repeated values combine.
    pub aggregate: Aggregate,
}

impl MetricSpec {
    /// A metric value of this shape.
    pub fn value(&self, value: f64) -> Metric {
        Metric {
            name: self.name.to_string(),
            unit: self.unit.to_string(),
            value,
            direction: self.direction,
            aggregate: self.aggregate,
            histogram: None,
            series: None,
        }
    }
}

/// A metric a probe reports with given parameters: a [`MetricSpec`] whose name and unit may
/// come from those parameters (the `command` probe's `name` and `unit`), so a scenario can
/// select it and a plan can read its direction without running the probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeclaredMetric {
    /// Metric name, snake_case.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// Better direction.
    pub direction: Direction,
    /// How repeated values combine.
    pub aggregate: Aggregate,
}

impl From<&MetricSpec> for DeclaredMetric {
    fn from(m: &MetricSpec) -> Self {
        DeclaredMetric {
            name: m.name.to_string(),
            unit: m.unit.to_string(),
            direction: m.direction,
            aggregate: m.aggregate,
        }
    }
}

impl DeclaredMetric {
    /// A metric value of this shape.
    pub fn value(&self, value: f64) -> Metric {
        Metric::new(
            self.name.clone(),
            self.unit.clone(),
            value,
            self.direction,
            self.aggregate,
        )
    }
}

/// One measured value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// Metric name, snake_case.
    pub name: String,
    /// Unit.
    pub unit: String,
    /// The value.
    pub value: f64,
    /// Better direction.
    pub direction: Direction,
    /// How repeated values combine.
    pub aggregate: Aggregate,
    /// For latency metrics: the distribution of the individual events, in the metric's unit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<LatencyHistogram>,
    /// When the probe ran with a window length ([`crate::ProbeCtx::window`]): the metric's
    /// value in consecutive windows of the run, in time order, so a controller can compare
    /// windows in which a neighbour was running against windows in which it was frozen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub series: Option<Vec<Window>>,
}

/// The value of a metric over one stretch of a probe run.
///
/// Times are `CLOCK_MONOTONIC` nanoseconds ([`crate::timer::now_ns`]), the clock every
/// process of the machine shares, so windows line up with events a controller records.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Window {
    /// Start of the window, ns.
    pub start_ns: u64,
    /// End of the window, ns.
    pub end_ns: u64,
    /// The metric's value over the window, in the metric's unit.
    pub value: f64,
}

impl Metric {
    /// A metric with no histogram.
    pub fn new(
        name: impl Into<String>,
        unit: impl Into<String>,
        value: f64,
        direction: Direction,
        aggregate: Aggregate,
    ) -> Self {
        Metric {
            name: name.into(),
            unit: unit.into(),
            value,
            direction,
            aggregate,
            histogram: None,
            series: None,
        }
    }

    /// Attaches a window series.
    pub fn with_series(mut self, series: Vec<Window>) -> Self {
        self.series = Some(series);
        self
    }

    /// Attaches a histogram.
    pub fn with_histogram(mut self, h: LatencyHistogram) -> Self {
        self.histogram = Some(h);
        self
    }
}

/// An HdrHistogram of event durations (3 significant digits), serialized as base64 of the
/// standard V2+DEFLATE encoding so any HdrHistogram implementation can read it back.
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyHistogram(pub Histogram<u64>);

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencyHistogram {
    /// An empty histogram tracking 1 .. 2^62 with 3 significant digits.
    pub fn new() -> Self {
        LatencyHistogram(Histogram::new(3).expect("3 significant digits is valid"))
    }

    /// Records one value (clamped to at least 1). The histogram grows to hold any value.
    pub fn record(&mut self, v: u64) {
        let v = v.max(1);
        if self.0.record(v).is_err() {
            self.0.saturating_record(v);
        }
    }

    /// Number of values recorded.
    pub fn len(&self) -> u64 {
        self.0.len()
    }

    /// True when nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Value at a percentile (0..=100).
    pub fn percentile(&self, p: f64) -> u64 {
        self.0.value_at_quantile(p / 100.0)
    }

    /// Merges another histogram in.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.0
            .add(&other.0)
            .expect("histograms with auto-resize merge");
    }

    /// Base64 of the V2+DEFLATE encoding.
    pub fn to_base64(&self) -> String {
        let mut buf = Vec::new();
        V2DeflateSerializer::new()
            .serialize(&self.0, &mut buf)
            .expect("serializing to memory cannot fail");
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// Decodes [`LatencyHistogram::to_base64`] output.
    pub fn from_base64(s: &str) -> Result<Self, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|e| format!("histogram is not base64: {e}"))?;
        let h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut &bytes[..])
            .map_err(|e| format!("histogram does not decode: {e:?}"))?;
        Ok(LatencyHistogram(h))
    }
}

impl Serialize for LatencyHistogram {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_base64())
    }
}

impl<'de> Deserialize<'de> for LatencyHistogram {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        LatencyHistogram::from_base64(&s).map_err(serde::de::Error::custom)
    }
}

/// Standard latency metrics from one histogram: mean, p50, p99, p99.9 and max, named
/// `{prefix}_mean_{unit}`, `{prefix}_p50_{unit}`, ... The histogram rides on the p50 metric.
pub fn latency_metrics(prefix: &str, unit: &str, h: &LatencyHistogram) -> Vec<Metric> {
    let mk = |suffix: &str, v: f64, agg: Aggregate| {
        Metric::new(
            format!("{prefix}_{suffix}_{unit}"),
            unit,
            v,
            Direction::Lower,
            agg,
        )
    };
    vec![
        mk("mean", h.0.mean(), Aggregate::Mean),
        mk("p50", h.percentile(50.0) as f64, Aggregate::Mean).with_histogram(h.clone()),
        mk("p99", h.percentile(99.0) as f64, Aggregate::Mean),
        mk("p999", h.percentile(99.9) as f64, Aggregate::Mean),
        mk("max", h.0.max() as f64, Aggregate::Max),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_round_trips_through_json() {
        let mut h = LatencyHistogram::new();
        for v in [10, 20, 30, 1000, 5_000_000_000] {
            h.record(v);
        }
        let m = Metric::new("rtt_p50_ns", "ns", 20.0, Direction::Lower, Aggregate::Mean)
            .with_histogram(h.clone());
        let json = serde_json::to_string(&m).unwrap();
        let back: Metric = serde_json::from_str(&json).unwrap();
        let back = back.histogram.unwrap();
        assert_eq!(back.len(), 5);
        // Large values are kept, not clamped to the initial bound.
        assert!(back.0.max() >= 4_990_000_000, "max {}", back.0.max());
    }

    #[test]
    fn latency_metrics_are_ordered() {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000 {
            h.record(v);
        }
        let ms = latency_metrics("op", "ns", &h);
        let get = |n: &str| ms.iter().find(|m| m.name == n).unwrap().value;
        assert!(get("op_p50_ns") <= get("op_p99_ns"));
        assert!(get("op_p99_ns") <= get("op_p999_ns"));
        assert!(get("op_p999_ns") <= get("op_max_ns"));
    }
}
