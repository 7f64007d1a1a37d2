//! `isobench runs`: one line per stored run.

use std::fmt::Write as _;

use crate::grid::{pad_right, visible_width};
use isobench_store::RunSummary;

/// The list of runs as a table, newest last.
pub fn render_runs(runs: &[RunSummary]) -> String {
    if runs.is_empty() {
        return "no runs in this database yet; `isobench run` starts one\n".to_string();
    }
    let head = [
        "run",
        "scenario",
        "status",
        "started (UTC)",
        "took",
        "platform",
        "trials ok/all",
    ];
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            let took = r.ended_at.map_or_else(
                || "-".to_string(),
                |e| {
                    let s = (e.unix_millis() - r.started_at.unix_millis()).max(0) / 1000;
                    if s >= 60 {
                        format!("{}m{:02}s", s / 60, s % 60)
                    } else {
                        format!("{s}s")
                    }
                },
            );
            let started = r.started_at.to_rfc3339();
            [
                r.id.to_string(),
                r.scenario_name.clone(),
                r.status.to_string(),
                started.get(..19).unwrap_or(&started).replace('T', " "),
                took,
                r.platform.clone(),
                format!("{}/{}", r.trials_ok, r.trials),
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..head.len())
        .map(|i| {
            rows.iter()
                .map(|r| visible_width(&r[i]))
                .chain([visible_width(head[i])])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| pad_right(c, *w))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let _ = writeln!(out, "{}", line(head.to_vec()));
    for r in &rows {
        let _ = writeln!(out, "{}", line(r.iter().map(String::as_str).collect()));
    }
    out
}
