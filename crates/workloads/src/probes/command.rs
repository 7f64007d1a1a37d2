//! `command`: the user's own program as the victim. It runs to its end in the probe's
//! tenant, and one number is read from it: its wall time, or a figure it prints (a regular
//! expression on its output, a JSON path into the document it prints, a CSV cell).
//!
//! The probe runs inside its tenant's agent process, so the program, a child of that
//! process, is in the tenant's cgroup, limited with it (see [`crate::program`] for how it is
//! started, stopped and cleaned up). The metric's name, unit and better direction are
//! whatever the scenario declares (`name`, `unit`, `direction`); only `metric=runtime`
//! knows its own (seconds, lower is better).
//!
//! Whether the program can run here is known only from its parameters, so `supported` says
//! yes and a program that is not found fails its first run, with a message naming `cmd`. A
//! program that exits non-zero, is killed, outlives `timeout`, or whose output does not
//! hold the metric fails that run; the error quotes the last lines of its stderr and names
//! the parameter to fix.
//!
//! It is not windowed: one run is one value, so it is measured with paired trials only.

use std::time::{Duration, Instant};

use anyhow::bail;
use serde::Deserialize;

use crate::extract::{show_tail, Extract};
use crate::metric::{Aggregate, DeclaredMetric, Direction, Metric, MetricSpec};
use crate::params::{ParamKind, ParamSpec, ParamValues};
use crate::program::{split_command, Launch, Running, Stream};
use crate::{Class, Env, Probe, ProbeCtx, Unsupported};

/// The `command` probe.
pub struct Command;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Opts {
    cmd: Option<String>,
    metric: String,
    stream: String,
    name: String,
    unit: Option<String>,
    direction: Option<String>,
    timeout: f64,
    grace: f64,
}

const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "cmd",
        help: "required: the command line to run, split into words as a shell would but run \
               without one \
               (write `sh -c '...'` for pipes and redirections); it starts in the probe's \
               working directory",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "metric",
        help: "how the number is read: `runtime` (the program's wall time, s); \
               `regex:PATTERN` (first match on its output: the first capture group, or the \
               whole match; `regex-last:PATTERN` for the last match); `json:PATH` (a value of \
               the JSON it prints: jobs[0].read.clat_ns.percentile[\"99.000000\"] or RFC 9535 \
               $...); `csv:ROW/COLUMN` (a cell of CSV with a header row, the row named by its \
               first field)",
        kind: ParamKind::Text,
        default: "runtime",
    },
    ParamSpec {
        name: "stream",
        help: "which output `metric` reads",
        kind: ParamKind::Choice {
            options: &["stdout", "stderr"],
        },
        default: "stdout",
    },
    ParamSpec {
        name: "name",
        help: "the metric's name, snake_case",
        kind: ParamKind::Text,
        default: "value",
    },
    ParamSpec {
        name: "unit",
        help: "the metric's unit (ms, ops/s, ...); required unless metric=runtime (s)",
        kind: ParamKind::Text,
        default: "",
    },
    ParamSpec {
        name: "direction",
        help: "whether a higher or a lower value is better; required unless metric=runtime \
               (lower)",
        kind: ParamKind::Choice {
            options: &["higher", "lower"],
        },
        default: "",
    },
    ParamSpec {
        name: "timeout",
        help: "seconds the program may run before it is stopped and the run fails",
        kind: ParamKind::Float {
            min: 0.001,
            max: 86400.0,
        },
        default: "600",
    },
    ParamSpec {
        name: "grace",
        help: "seconds between SIGTERM and SIGKILL when the program is stopped",
        kind: ParamKind::Float {
            min: 0.0,
            max: 600.0,
        },
        default: "2",
    },
];

const METRICS: &[MetricSpec] = &[MetricSpec {
    name: "value",
    unit: "as set by `unit`",
    direction: Direction::Lower,
    aggregate: Aggregate::Mean,
}];

/// What the metric is read from.
enum Source {
    Runtime,
    Output(Extract),
}

/// The metric's source, name, unit and direction, checked.
fn metric_of(o: &Opts) -> anyhow::Result<(Source, String, String, Direction)> {
    let source = if o.metric.trim() == "runtime" {
        Source::Runtime
    } else {
        Source::Output(Extract::parse("metric", o.metric.trim())?)
    };
    let name = o.name.trim();
    if !is_metric_name(name) {
        bail!("`name={name}` is not a metric name: use snake_case letters, digits and `_`");
    }
    let (unit, direction) = match source {
        Source::Runtime => (
            o.unit
                .clone()
                .filter(|u| !u.trim().is_empty())
                .unwrap_or_else(|| "s".into()),
            o.direction.as_deref().map_or(Direction::Lower, direction),
        ),
        Source::Output(_) => {
            let Some(unit) = o.unit.clone().filter(|u| !u.trim().is_empty()) else {
                bail!(
                    "metric={} needs its unit: set `unit` (e.g. unit=ms or unit=ops/s)",
                    o.metric
                );
            };
            let Some(d) = o.direction.as_deref() else {
                bail!(
                    "metric={} needs its better direction: set `direction` to higher (a rate) \
                     or lower (a latency, a time)",
                    o.metric
                );
            };
            (unit, direction(d))
        }
    };
    Ok((source, name.to_string(), unit, direction))
}

/// Whether `name` is snake_case letters, digits and `_`.
fn is_metric_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The metric the parameters declare: checked when they are whole, else the name as given
/// with what unit and direction they hold (the run reports what is missing). `None` when
/// the parameters do not decode or the name is not a metric name.
fn declared(params: &ParamValues) -> Option<DeclaredMetric> {
    let o: Opts = params.decode("command").ok()?;
    let (name, unit, direction) = match metric_of(&o) {
        Ok((_, name, unit, direction)) => (name, unit, direction),
        Err(_) => {
            let name = o.name.trim();
            if !is_metric_name(name) {
                return None;
            }
            (
                name.to_string(),
                o.unit.clone().unwrap_or_default(),
                o.direction.as_deref().map_or(Direction::Lower, direction),
            )
        }
    };
    Some(DeclaredMetric {
        name,
        unit,
        direction,
        aggregate: Aggregate::Mean,
    })
}

fn direction(word: &str) -> Direction {
    if word == "higher" {
        Direction::Higher
    } else {
        Direction::Lower
    }
}

impl Probe for Command {
    fn name(&self) -> &'static str {
        "command"
    }
    fn help(&self) -> &'static str {
        "Runs your own program (cmd) to its end in the victim tenant and reads one number: its \
         wall time (metric=runtime), or a figure it prints (regex:, json: or csv: on its \
         output). The metric's name, unit and direction are yours to declare (name, unit, \
         direction). Whether the program exists is checked when it runs: a program not found, \
         a non-zero exit or an output without the number fails the run with the program's \
         stderr. Not windowed: paired trials only."
    }
    fn class(&self) -> Class {
        Class::App
    }
    fn params(&self) -> &'static [ParamSpec] {
        PARAMS
    }
    fn metrics(&self) -> &'static [MetricSpec] {
        METRICS
    }
    fn metrics_for(&self, params: &ParamValues) -> Vec<DeclaredMetric> {
        match declared(params) {
            Some(m) => vec![m],
            None => METRICS.iter().map(DeclaredMetric::from).collect(),
        }
    }
    fn supported(&self, _env: &Env) -> Result<(), Unsupported> {
        // The program is a parameter: it is looked for when the probe runs.
        Ok(())
    }
    fn run(&self, ctx: &ProbeCtx, params: &ParamValues) -> anyhow::Result<Vec<Metric>> {
        let o: Opts = params.decode("command")?;
        let (source, name, unit, direction) = metric_of(&o)?;
        let argv = split_command("cmd", o.cmd.as_deref().unwrap_or(""))?;
        let stream = Stream::from_word(&o.stream);
        let launch = Launch {
            argv: &argv,
            workdir: &ctx.workdir,
            cpu: ctx.pin,
            keep_all: match source {
                Source::Runtime => None,
                Source::Output(_) => Some(stream),
            },
            on_line: None,
        };
        let deadline = Instant::now() + Duration::from_secs_f64(o.timeout);
        let running = Running::start("cmd", launch)?;
        let done = running.finish(
            &|| ctx.stopped(),
            Some(deadline),
            libc::SIGTERM,
            Duration::from_secs_f64(o.grace),
        );
        let program = &argv[0];
        match done.end {
            crate::program::End::Stopped => {
                bail!("`{program}` was stopped before it finished (the probe was told to stop)")
            }
            crate::program::End::TimedOut => bail!(
                "`{program}` ran longer than timeout={}s and was stopped: raise `timeout` or \
                 shorten the program (`cmd`){}",
                o.timeout,
                done.stderr_tail()
            ),
            crate::program::End::Exited => {}
        }
        if !done.status.success() {
            bail!(
                "`{program}` failed ({}): fix `cmd`{}",
                done.status,
                done.stderr_tail()
            );
        }
        let value = match &source {
            Source::Runtime => done.wall.as_secs_f64(),
            Source::Output(x) => {
                let out = done.stream(stream);
                x.value("metric", stream.as_str(), &out.text).map_err(|e| {
                    let mut msg = e.0;
                    if stream == Stream::Stdout {
                        msg.push_str(&done.stderr_tail());
                    } else {
                        msg.push_str(&show_tail("stdout", &done.stdout.text));
                    }
                    if out.truncated {
                        msg.push_str("\n  (only the output's last 64 MiB were kept)");
                    }
                    anyhow::anyhow!(msg)
                })?
            }
        };
        Ok(vec![Metric::new(
            name,
            unit,
            value,
            direction,
            Aggregate::Mean,
        )])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(settings: &[&str]) -> ParamValues {
        ParamValues::from_settings("command", PARAMS, settings).expect("valid settings")
    }

    #[test]
    fn metrics_for_is_the_metric_the_params_declare() {
        let p = params(&[
            "cmd=fio --output-format=json",
            "metric=json:jobs[0].read.clat_ns.percentile[\"99.000000\"]",
            "name=read_p99_ns",
            "unit=ns",
            "direction=lower",
        ]);
        assert_eq!(
            Command.metrics_for(&p),
            vec![DeclaredMetric {
                name: "read_p99_ns".into(),
                unit: "ns".into(),
                direction: Direction::Lower,
                aggregate: Aggregate::Mean,
            }]
        );
        let p = params(&[
            "cmd=true",
            "metric=regex:(\\d+) ops",
            "name=ops",
            "unit=ops/s",
            "direction=higher",
        ]);
        let m = Command.metrics_for(&p);
        assert_eq!(
            (m[0].unit.as_str(), m[0].direction),
            ("ops/s", Direction::Higher)
        );
    }

    #[test]
    fn metrics_for_runtime_is_seconds_lower_is_better() {
        let m = Command.metrics_for(&params(&["cmd=true"]));
        assert_eq!(m.len(), 1);
        assert_eq!(
            (m[0].name.as_str(), m[0].unit.as_str(), m[0].direction),
            ("value", "s", Direction::Lower)
        );
        let m = Command.metrics_for(&params(&["cmd=true", "name=build_s"]));
        assert_eq!(m[0].name, "build_s");
    }

    #[test]
    fn metrics_for_keeps_the_declared_name_when_the_unit_is_missing() {
        // The run reports the missing unit; the name is still the one to select.
        let m = Command.metrics_for(&params(&["cmd=true", "metric=regex:x", "name=p99"]));
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].name, "p99");
    }

    #[test]
    fn metrics_for_falls_back_to_the_catalogue_on_a_bad_name() {
        let m = Command.metrics_for(&params(&["cmd=true", "name=Read P99"]));
        assert_eq!(
            m,
            METRICS.iter().map(DeclaredMetric::from).collect::<Vec<_>>()
        );
    }
}
