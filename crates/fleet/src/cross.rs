//! The same scenario on each of several platforms in turn, stored as linked runs (the layout
//! of paper 001's Table 2, with an isolation score per platform).
//!
//! The link is a fact of every run of the set (`isobench_experiment::stored`), so showing,
//! reporting or exporting any of them carries the table across the platforms. One run is
//! the caller's to start (it renders its progress); this module runs them in turn, keeps
//! going past a platform that cannot run, stops at an interrupted one, and links the set.

use isobench_experiment::session::SessionError;
use isobench_experiment::stored::link;
use isobench_experiment::PlatformChoice;
use isobench_store::{RunId, Store};
use serde::{Deserialize, Serialize};

use crate::Ending;

/// What happens during a run on several platforms. With `--json-stream` these are lines of
/// the event stream between the platforms' own runs (docs/events.md), so their tags and
/// fields are a public interface: [`CrossEvent::NAMES`] lists the tags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum CrossEvent {
    /// The run on a platform starts.
    #[serde(rename = "platform_started")]
    Platform {
        /// The platform.
        platform: String,
        /// Its place, from 1.
        n: usize,
        /// How many platforms.
        of: usize,
    },
    /// A platform could not run the scenario; the others still do.
    #[serde(rename = "platform_failed")]
    Failed {
        /// The platform.
        platform: String,
        /// Why.
        why: String,
    },
    /// The run on a platform was interrupted: the platforms after it are not run.
    #[serde(rename = "platform_interrupted")]
    Interrupted {
        /// The platform.
        platform: String,
    },
    /// The runs that were stored are linked as one set; the last event of the set.
    #[serde(rename = "platforms_linked")]
    Linked {
        /// Each platform's run, in the order they ran.
        runs: Vec<LinkedRun>,
    },
}

/// One run of a linked set, in [`CrossEvent::Linked`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkedRun {
    /// The platform.
    pub platform: String,
    /// Its stored run.
    pub run: String,
}

impl CrossEvent {
    /// Every event's tag, in the order docs/events.md declares them.
    pub const NAMES: &'static [&'static str] = &[
        "platform_started",
        "platform_failed",
        "platform_interrupted",
        "platforms_linked",
    ];

    /// The event's tag, as serialized (one of [`CrossEvent::NAMES`]).
    pub fn name(&self) -> &'static str {
        match self {
            CrossEvent::Platform { .. } => "platform_started",
            CrossEvent::Failed { .. } => "platform_failed",
            CrossEvent::Interrupted { .. } => "platform_interrupted",
            CrossEvent::Linked { .. } => "platforms_linked",
        }
    }
}

/// How a run on several platforms ended.
#[derive(Debug, Clone)]
pub struct CrossOutcome {
    /// Each platform's stored run, in the order they ran.
    pub runs: Vec<(String, RunId)>,
    /// The platforms that could not run, as `platform: why`.
    pub failed: Vec<String>,
    /// How the set ended.
    pub ending: Ending,
}

/// Refuses a platform named twice.
pub fn check_platforms(platforms: &[PlatformChoice]) -> Result<(), SessionError> {
    for (i, p) in platforms.iter().enumerate() {
        if platforms[..i].contains(p) {
            return Err(SessionError::BadInput(format!(
                "--platform names {} twice; name each platform once",
                p.as_str()
            )));
        }
    }
    Ok(())
}

/// Runs the scenario on each of `platforms` in turn through `run_one` (how the run ended,
/// and its stored run once there is one), and links the runs in the database `store` opens
/// once the runs are over, which it gives back. An error when no platform could run it.
pub fn run_each(
    platforms: &[PlatformChoice],
    run_one: &mut dyn FnMut(PlatformChoice) -> anyhow::Result<(Ending, Option<RunId>)>,
    events: &mut dyn FnMut(CrossEvent),
    store: impl FnOnce() -> Result<Store, SessionError>,
) -> Result<(CrossOutcome, Store), SessionError> {
    let of = platforms.len();
    let mut runs: Vec<(String, RunId)> = Vec::new();
    let mut failed: Vec<String> = Vec::new();
    let mut ending = Ending::Complete;
    for (i, p) in platforms.iter().enumerate() {
        let platform = p.as_str().to_string();
        events(CrossEvent::Platform {
            platform: platform.clone(),
            n: i + 1,
            of,
        });
        match run_one(*p) {
            Ok((ended, run)) => {
                ending = ending.worse(ended);
                if let Some(run) = run {
                    runs.push((platform.clone(), run));
                }
                if ended == Ending::Interrupted {
                    events(CrossEvent::Interrupted { platform });
                    break;
                }
            }
            Err(e) => {
                // One platform that cannot run here does not stop the others.
                let why = format!("{e:#}");
                failed.push(format!("{platform}: {why}"));
                events(CrossEvent::Failed { platform, why });
                ending = ending.worse(Ending::Partial);
            }
        }
    }
    if runs.is_empty() {
        return Err(SessionError::Other(anyhow::anyhow!(
            "no platform could run the scenario: {}",
            failed.join("; ")
        )));
    }
    let mut store = store()?;
    link(&mut store, &runs, &failed)?;
    events(CrossEvent::Linked {
        runs: runs
            .iter()
            .map(|(platform, run)| LinkedRun {
                platform: platform.clone(),
                run: run.as_str().to_string(),
            })
            .collect(),
    });
    let done = CrossOutcome {
        runs,
        failed,
        ending,
    };
    Ok((done, store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_platform_named_twice_is_refused() {
        let host = PlatformChoice::Named(isobench_platform::PlatformKind::HOST);
        let auto = PlatformChoice::Auto;
        assert!(check_platforms(&[host, auto]).is_ok());
        assert!(check_platforms(&[host, auto, host]).is_err());
    }

    #[test]
    fn each_event_is_written_with_its_declared_tag_and_read_back() {
        let each = [
            CrossEvent::Platform {
                platform: "host".into(),
                n: 1,
                of: 2,
            },
            CrossEvent::Failed {
                platform: "vm".into(),
                why: "no KVM".into(),
            },
            CrossEvent::Interrupted {
                platform: "host".into(),
            },
            CrossEvent::Linked {
                runs: vec![LinkedRun {
                    platform: "host".into(),
                    run: "R-1".into(),
                }],
            },
        ];
        let names: Vec<&str> = each.iter().map(CrossEvent::name).collect();
        assert_eq!(names, CrossEvent::NAMES);
        for e in each {
            let line = serde_json::to_value(&e).unwrap();
            assert_eq!(line["event"], e.name());
            assert_eq!(serde_json::from_value::<CrossEvent>(line).unwrap(), e);
        }
    }
}
