//! Checking a job before it is queued, as `isobench run` checks its scenario before it runs
//! (the same library session planning): the preset or uploaded scenario is parsed and its
//! plan resolved against this host, so a broken scenario is answered at once (422, each
//! problem at its line) instead of failing at its turn in the queue.

use isobench_experiment::session::{Mode, NewRun, SessionError};
use isobench_experiment::{PlatformChoice, ScenarioErrors};
use isobench_platform::PlatformKind;

use crate::error::{ApiError, Problem};

/// What to check: a preset by name, or a scenario's name and text.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A built-in preset.
    Preset(&'a str),
    /// An uploaded scenario.
    Scenario {
        /// Its file name.
        name: &'a str,
        /// Its text.
        text: &'a str,
    },
}

/// The platform choice of a `platform` field: `auto` or a platform of this build.
pub fn platform(name: &str) -> Result<PlatformChoice, ApiError> {
    if name.eq_ignore_ascii_case("auto") {
        return Ok(PlatformChoice::Auto);
    }
    name.parse::<PlatformKind>()
        .map(PlatformChoice::Named)
        .map_err(|e| ApiError::unprocessable(format!("platform {name}: {e}")))
}

/// The platforms of a `platforms` field (a run on each in turn): at least two, each a
/// platform of this build named once (`auto` is not one: it would be one of the others).
/// Each error names its place (`platforms[1]`).
pub fn platforms(names: &[String]) -> Result<Vec<String>, ApiError> {
    if names.len() < 2 {
        return Err(ApiError::field(
            "platforms",
            "names fewer than two platforms; for one platform, give platform instead",
        ));
    }
    let mut out: Vec<String> = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let at = format!("platforms[{i}]");
        let kind = name
            .trim()
            .parse::<PlatformKind>()
            .map_err(|e| ApiError::field(at.clone(), e))?;
        let name = kind.name().to_string();
        if out.contains(&name) {
            return Err(ApiError::field(
                at,
                format!("{name} is named twice; name each platform once"),
            ));
        }
        out.push(name);
    }
    Ok(out)
}

/// [`check`] on each of `platforms` (checked by [`platforms`]): a platform that cannot run
/// the scenario here is answered naming its place (`platforms[1]`).
pub fn check_on_each(
    input: Input<'_>,
    platforms: &[String],
    seed: Option<u64>,
    mode: Mode,
) -> Result<(), ApiError> {
    for (i, name) in platforms.iter().enumerate() {
        check(input, Some(name), seed, mode).map_err(|mut e| {
            if e.body.problems.is_none() {
                e.body.error = format!("platforms[{i}]: {}", e.body.error);
                e.body.field = Some(format!("platforms[{i}]"));
            }
            e
        })?;
    }
    Ok(())
}

/// Parses and plans `input` as `isobench run` would, on the host of `mode`.
pub fn check(
    input: Input<'_>,
    platform_name: Option<&str>,
    seed: Option<u64>,
    mode: Mode,
) -> Result<(), ApiError> {
    plan(input, platform_name, seed, mode)?.map_err(session_error)
}

/// [`check`] of a scenario that runs on other hosts (a fleet job): what this host cannot
/// run (a platform, a resource) is for those hosts to say, so only the scenario's own errors
/// are answered.
pub fn check_for_hosts(input: Input<'_>, seed: Option<u64>, mode: Mode) -> Result<(), ApiError> {
    match plan(input, None, seed, mode)? {
        Err(SessionError::Unsupported(_)) => Ok(()),
        planned => planned.map_err(session_error),
    }
}

/// Plans `input` on the host of `mode`: the planning's own outcome, inside the errors of
/// getting there.
fn plan(
    input: Input<'_>,
    platform_name: Option<&str>,
    seed: Option<u64>,
    mode: Mode,
) -> Result<Result<(), SessionError>, ApiError> {
    let mut run = match input {
        Input::Preset(name) => NewRun::preset(Some(name)).map_err(session_error)?,
        Input::Scenario { name, text } => NewRun::scenario(name, text),
    };
    run.platform = platform_name.map(platform).transpose()?;
    run.seed = seed;
    let host = mode
        .host()
        .map_err(|e| ApiError::internal(format!("{e:#}")))?;
    Ok(run.plan(&host).map(|_| ()))
}

fn session_error(e: SessionError) -> ApiError {
    match e {
        SessionError::Scenario(errors) => problems(errors),
        SessionError::BadInput(m) | SessionError::Unsupported(m) => ApiError::unprocessable(m),
        other => ApiError::internal(other),
    }
}

/// 422 with each problem at its place.
fn problems(e: ScenarioErrors) -> ApiError {
    let first_line = e.to_string().lines().next().unwrap_or_default().to_string();
    let mut err = ApiError::unprocessable(first_line);
    err.body.problems = Some(
        e.errors()
            .iter()
            .map(|p| Problem {
                line: p.line,
                column: p.column,
                field: p.field.clone(),
                message: p.problem.clone(),
                fix: p.fix.clone(),
            })
            .collect(),
    );
    err
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAKE: Mode = Mode::Fake {
        real_time: 0.0,
        effect_scale: 1.0,
    };

    #[test]
    fn a_broken_scenario_is_answered_with_its_problems_at_their_lines() {
        let text = "kind = \"matrix\"\n\n[[tenant]]\nname = 1\n";
        let e = check(
            Input::Scenario {
                name: "x.toml",
                text,
            },
            None,
            None,
            FAKE,
        )
        .unwrap_err();
        assert_eq!(e.status, 422);
        assert!(e.body.error.starts_with("x.toml:"), "{}", e.body.error);
        let problems = e.body.problems.unwrap();
        assert!(!problems.is_empty());
        assert!(problems.iter().all(|p| p.line >= 1));
    }

    #[test]
    fn presets_and_platforms_are_checked_by_name() {
        check(Input::Preset("quick"), None, None, FAKE).unwrap();
        let e = check(Input::Preset("nope"), None, None, FAKE).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(e.body.error.contains("quick"), "{}", e.body.error);
        let e = check(Input::Preset("quick"), Some("mars"), None, FAKE).unwrap_err();
        assert_eq!(e.status, 422);
    }

    #[test]
    fn platforms_are_checked_each_naming_its_place() {
        let names = |n: &[&str]| n.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            platforms(&names(&["host", " cgroup"])).unwrap(),
            ["host", "cgroup"]
        );
        let field = |n: &[&str]| platforms(&names(n)).unwrap_err().body.field.unwrap();
        assert_eq!(field(&["host"]), "platforms");
        assert_eq!(field(&[]), "platforms");
        assert_eq!(field(&["host", "mars"]), "platforms[1]");
        assert_eq!(field(&["host", "auto"]), "platforms[1]");
        assert_eq!(field(&["cgroup", "host", "cgroup"]), "platforms[2]");
        let e = platforms(&names(&["host", "mars"])).unwrap_err();
        assert_eq!(e.status, 422);
        assert!(
            e.body.error.starts_with("platforms[1]: "),
            "{}",
            e.body.error
        );
        let each = names(&["host", "cgroup"]);
        check_on_each(Input::Preset("quick"), &each, None, FAKE).unwrap();
    }
}
