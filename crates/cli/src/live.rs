//! Live progress of a run on the terminal (indicatif), drawn from the run's events: trial n of m, the condition and the
//! probe, the estimated time left; anything unusual (DNR, a disturbed trial, a restarted
//! agent) as a line above the bar. Writes to stderr, so results on stdout stay clean.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use isobench_experiment::plan::fmt_secs;
use isobench_experiment::progress::{Event, Progress, TrialDone, TrialView};

/// The indicatif display. When stderr is not a terminal there is no bar: the same lines are
/// written plainly, with one line per round.
pub struct LiveProgress {
    bar: ProgressBar,
    color: bool,
    plain: bool,
    last: Option<TrialView>,
}

impl LiveProgress {
    /// A display on stderr; `color` false gives a plain bar (NO_COLOR).
    pub fn new(color: bool) -> Self {
        let bar = ProgressBar::with_draw_target(Some(1), ProgressDrawTarget::stderr());
        let template = if color {
            "{prefix:.bold} [{bar:30.cyan/blue}] {pos}/{len} {msg}"
        } else {
            "{prefix} [{bar:30}] {pos}/{len} {msg}"
        };
        bar.set_style(
            ProgressStyle::with_template(template)
                .expect("the template is valid")
                .progress_chars("=> "),
        );
        bar.set_prefix("isobench");
        let plain = !std::io::stderr().is_terminal();
        if plain {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        LiveProgress {
            bar,
            color,
            plain,
            last: None,
        }
    }

    fn line(&self, s: &str) {
        if self.plain {
            eprintln!("{s}");
        } else {
            self.bar.println(s);
        }
    }
}

impl Progress for LiveProgress {
    fn event(&mut self, event: &Event) {
        match event {
            Event::Planned {
                run,
                summary,
                trials,
                done,
                ..
            } => self.planned(run, summary, *trials, *done),
            Event::TenantsReady { tenants } => {
                for t in tenants {
                    let limits = if t.limits.is_empty() {
                        "none"
                    } else {
                        &t.limits
                    };
                    self.line(&format!("tenant {} ready, limits: {limits}", t.name));
                    for n in &t.notes {
                        self.line(&format!("  {n}"));
                    }
                }
                self.bar.set_message("checking memory");
            }
            Event::MemoryChecked { text, .. } => self.line(&format!("memory check: {text}")),
            Event::Waiting { why, seconds } => {
                self.line(&format!("waiting {}: {why}", fmt_secs(*seconds)));
            }
            Event::BlockStarted { condition } => {
                self.bar.set_message(format!("{condition}: warm-up"));
            }
            Event::TrialStarted(t) => self.trial_started(t),
            Event::TrialEnded(t) => self.trial_ended(t),
            Event::RoundEnded { round, open } => self.round_ended(*round, *open),
            Event::Note { text } => self.line(text),
            Event::Finished { .. } => self.bar.finish_and_clear(),
        }
    }
}

impl LiveProgress {
    fn planned(&mut self, run: &str, summary: &str, trials: usize, done: usize) {
        self.bar.set_length(trials.max(1) as u64);
        self.bar.set_position(done as u64);
        self.line(&format!("run {run}"));
        for l in summary.lines() {
            self.line(l);
        }
        if done > 0 {
            self.line(&format!("resuming: {done} trials already stored are kept"));
        }
        self.bar.set_message("creating tenants");
    }

    fn trial_started(&mut self, t: &TrialView) {
        self.last = Some(t.clone());
        self.bar.set_length(t.of as u64);
        self.bar.set_position(t.n.saturating_sub(1) as u64);
        let eta = t
            .eta_s
            .map(|d| format!(" · ETA {}", fmt_secs(d)))
            .unwrap_or_default();
        self.bar.set_message(format!(
            "round {} · {} · {}{eta}",
            t.round + 1,
            t.condition,
            t.what
        ));
    }

    fn trial_ended(&mut self, t: &TrialDone) {
        self.bar.set_position(t.view.n as u64);
        if t.status != "ok" {
            let word = if self.color {
                format!("\x1b[33m{}\x1b[0m", t.status)
            } else {
                t.status.clone()
            };
            self.line(&format!(
                "trial {} ({} · {}): {word}{}",
                t.view.n,
                t.view.condition,
                t.view.what,
                t.reason
                    .as_ref()
                    .map_or(String::new(), |r| format!(": {r}"))
            ));
        }
    }

    fn round_ended(&mut self, round: u32, open: usize) {
        if self.plain {
            if let Some(t) = &self.last {
                let eta = t
                    .eta_s
                    .map(|d| format!(", ETA {}", fmt_secs(d)))
                    .unwrap_or_default();
                self.line(&format!(
                    "round {}: trial {} of {}{eta}",
                    round + 1,
                    t.n,
                    t.of
                ));
            }
        }
        if open > 0 {
            self.line(&format!(
                "round {} done: {open} result(s) still wider than the target",
                round + 1
            ));
        }
    }
}
