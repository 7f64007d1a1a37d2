//! The terminal side of a fleet run (`--hosts`, `--nodes`): checks the flags, starts the
//! coordinator of `isobench_fleet`, shows its events on stderr (each member's progress
//! prefixed with the member's name), then prints the fleet table and the members. With
//! `--json-stream` the events are written on stdout instead, as JSON lines (docs/events.md),
//! and nothing else is.

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use isobench_agent::RunScenario;
use isobench_experiment::stored::{with_linked, FleetLink, Trials};
use isobench_fleet::{Fleet, FleetEvent};

use crate::args::RunArgs;
use crate::crossrun::{show_set, write_event};
use crate::exit::{self, bad_input, session_error, store_error};
use crate::stores::open_store;

/// The scenario `a` asks for, as a host agent takes it: the text composed for it (`isobench
/// tune`'s flags written into its scenario), else its file or preset.
pub fn scenario_request(a: &RunArgs) -> anyhow::Result<RunScenario> {
    let mut r = isobench_fleet::scenario_request(
        a.scenario.as_deref(),
        a.preset.as_deref(),
        a.seed,
        a.platform.first().map(|p| p.as_str()),
    )
    .map_err(session_error)?;
    if let Some((name, text)) = &a.scenario_text {
        r.scenario = text.clone();
        r.file_name = name.clone();
        r.preset = None;
    }
    Ok(r)
}

/// Refuses what a fleet run cannot do: exports of one run, several platforms.
pub fn check_args(a: &RunArgs, flag: &str) -> anyhow::Result<()> {
    let e = &a.export;
    if e.export_json.is_some() || e.export_csv.is_some() || e.export_markdown.is_some() {
        return Err(bad_input(format!(
            "--export-json/--export-csv/--export-markdown take one run; with {flag} each \
             member's run is stored, and `isobench export RUN_ID` writes any of them (with the \
             fleet table); --report writes the fleet's report"
        )));
    }
    if a.platform.len() > 1 {
        return Err(bad_input(format!(
            "{flag} runs one platform on every member; give --platform once"
        )));
    }
    if a.max_time.is_some() {
        return Err(bad_input(format!(
            "--max-time is not sent to the members of {flag}; set the budget in the scenario \
             file instead (max_time under [repetitions], docs/scenario.md)"
        )));
    }
    if a.io_cost.is_some() {
        return Err(bad_input(format!(
            "--io-cost is not sent to the members of {flag}; set ISOBENCH_IO_COST in each \
             member's host agent environment instead"
        )));
    }
    Ok(())
}

/// A stop flag that Ctrl-C sets.
pub fn stop_on_signal() -> anyhow::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    crate::tenant::install_stop(stop.clone())?;
    Ok(stop)
}

/// Runs `fleet` (its stop flag set by Ctrl-C), shows its events, and prints the fleet.
pub fn coordinate(a: &RunArgs, mut fleet: Fleet) -> anyhow::Result<ExitCode> {
    let noun = fleet.driver.noun();
    let mut store = open_store(&a.db.path)?;
    fleet.progress = !a.quiet;
    fleet.stop = stop_on_signal()?;
    let outcome = isobench_fleet::coordinate(fleet, &mut store, &mut |ev| {
        if a.json_stream {
            write_event(&ev)
        } else {
            show_event(noun, ev)
        }
    })
    .map_err(session_error)?;
    let results = with_linked(&store, &outcome.first, Trials::Left).map_err(store_error)?;
    let worst = show_set(
        a,
        &results,
        &outcome.first,
        exit::for_ending(outcome.ending),
        || print_members(&outcome.link, noun),
    );
    Ok(ExitCode::from(worst))
}

/// Shows an event of a fleet run on stderr.
fn show_event(noun: &str, ev: FleetEvent) {
    let one = noun.trim_end_matches('s');
    match ev {
        FleetEvent::Started {
            scenario, members, ..
        } => eprintln!(
            "isobench: running {scenario} on {} {noun}: {}",
            members.len(),
            members.join(", ")
        ),
        FleetEvent::Note { text } => eprintln!("isobench: {text}"),
        FleetEvent::Progress(p) => eprintln!("[{}] {}", p.member, p.line),
        FleetEvent::NotRun { member, why } => eprintln!("isobench: {one} {member}: {why}"),
        FleetEvent::Imported { member, done } => eprintln!(
            "isobench: {one} {member}: run {} {} (exit code {}), imported",
            done.run_id, done.status, done.exit_code
        ),
        FleetEvent::Stopping => eprintln!(
            "isobench: interrupted; the {noun} stop their runs (what they stored stays there)"
        ),
        FleetEvent::Dropped { lines, backlog } => eprintln!(
            "isobench: {lines} progress lines of the {noun} were not shown: more than \
             {backlog} waited while runs were imported"
        ),
    }
}

/// The members of the fleet run, each with its labels and run.
fn print_members(link: &FleetLink, noun: &str) {
    let mut title = noun.to_string();
    title[..1].make_ascii_uppercase();
    println!("\n{title}");
    for m in &link.hosts {
        let labels: Vec<String> = m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("  {}  run {}  {}", m.host, m.run, labels.join(" "));
    }
    for n in &link.not_run {
        println!("  not run: {n}");
    }
}
