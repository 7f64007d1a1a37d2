//! Runs whose controller died: a run left `running` in its database by a process that is
//! gone (SIGKILL, a crash, a reboot) is marked `interrupted` by the next command that opens
//! the database, so it lists as what it is and can be resumed.
//!
//! Every run records its controller ([`claim`]) when it starts or resumes: host, boot id,
//! pid and start time, so a reused pid or a reboot is not taken for the run still going.

use std::fmt;
use std::path::Path;

use isobench_platform::{Liveness, RunController};
use isobench_store::{RunId, RunStatus, Store, StoreError, Timestamp};

/// A run found `running` with its controller gone, now marked interrupted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The run.
    pub run: RunId,
    /// The pid its controller had.
    pub pid: i32,
}

impl fmt::Display for Orphan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "run {} was left running by a process that is gone (pid {}); it is now marked \
             interrupted",
            self.run, self.pid
        )
    }
}

/// What the database holds as the reason of an orphan's interruption.
fn reason(pid: i32) -> String {
    format!("the process running it (pid {pid}) ended without finishing it (killed or crashed)")
}

/// Records this process as the controller of `run`.
pub fn claim(store: &mut Store, run: &RunId) -> anyhow::Result<()> {
    let me = RunController::current()?;
    store.claim_run(run, &serde_json::to_string(&me)?)?;
    Ok(())
}

/// Who runs `run` now, when the database says it is running and names another process
/// that still runs (or that this host cannot check).
pub fn running_elsewhere(store: &Store, run: &RunId) -> Result<Option<i32>, StoreError> {
    Ok(store
        .running_runs()?
        .into_iter()
        .filter(|(id, _)| id == run)
        .find_map(|(_, c)| {
            let c: RunController = serde_json::from_str(c.as_deref()?).ok()?;
            let me = std::process::id() as i32;
            (c.pid != me && c.liveness() != Liveness::Gone).then_some(c.pid)
        }))
}

/// Marks every run of `store` left `running` by a controller that is gone as interrupted,
/// and returns them. Runs without a recorded controller, or whose controller ran on another
/// host, are left alone: nothing says they are dead.
pub fn mark_orphans(store: &mut Store) -> Result<Vec<Orphan>, StoreError> {
    let mut orphans = Vec::new();
    for (run, controller) in store.running_runs()? {
        let Some(c) = controller
            .as_deref()
            .and_then(|c| serde_json::from_str::<RunController>(c).ok())
        else {
            continue;
        };
        if c.liveness() == Liveness::Gone {
            store.finish_run(
                &run,
                RunStatus::Interrupted,
                Some(&reason(c.pid)),
                Timestamp::now(),
            )?;
            orphans.push(Orphan { run, pid: c.pid });
        }
    }
    Ok(orphans)
}

/// The command that resumes `run` of the database `db`.
pub fn resume_command(run: &RunId, db: &Path) -> String {
    let db = db.display().to_string();
    if db == crate::DEFAULT_DB {
        format!("isobench run --resume {run}")
    } else {
        format!("isobench run --resume {run} --db {db}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isobench_store::NewRun;

    fn a_run(store: &mut Store) -> RunId {
        store
            .create_run(&NewRun {
                scenario_name: "s".into(),
                scenario_text: String::new(),
                seed: 1,
                tool_version: "0".into(),
                started_at: Timestamp::now(),
                host_facts: serde_json::json!({}),
                platform: "fake".into(),
                platform_version: "0".into(),
            })
            .unwrap()
    }

    #[test]
    fn a_run_whose_controller_is_gone_is_marked_interrupted_and_a_live_one_is_not() {
        let mut store = Store::open_in_memory().unwrap();
        let live = a_run(&mut store);
        claim(&mut store, &live).unwrap();
        let dead = a_run(&mut store);
        let mut gone = RunController::current().unwrap();
        gone.start += 1;
        store
            .claim_run(&dead, &serde_json::to_string(&gone).unwrap())
            .unwrap();
        let unknown = a_run(&mut store);

        let orphans = mark_orphans(&mut store).unwrap();
        assert_eq!(
            orphans,
            vec![Orphan {
                run: dead.clone(),
                pid: gone.pid
            }]
        );
        let runs = store.list_runs().unwrap();
        let status = |id: &RunId| runs.iter().find(|r| &r.id == id).unwrap().status;
        assert_eq!(status(&dead), RunStatus::Interrupted);
        assert_eq!(status(&live), RunStatus::Running);
        assert_eq!(status(&unknown), RunStatus::Running);
        // This process runs `live`: not elsewhere.
        assert_eq!(running_elsewhere(&store, &live).unwrap(), None);
        assert_eq!(running_elsewhere(&store, &dead).unwrap(), None);
        let mut other = RunController::current().unwrap();
        other.pid = 1;
        other.start = isobench_platform::procs::start_time(1).unwrap();
        store
            .claim_run(&unknown, &serde_json::to_string(&other).unwrap())
            .unwrap();
        assert_eq!(running_elsewhere(&store, &unknown).unwrap(), Some(1));
        // Marking twice finds nothing new.
        assert!(mark_orphans(&mut store).unwrap().is_empty());
    }

    #[test]
    fn the_resume_command_names_a_database_other_than_the_default() {
        let run = RunId::new("20261125-033942-817990");
        assert_eq!(
            resume_command(&run, Path::new(crate::DEFAULT_DB)),
            "isobench run --resume 20261125-033942-817990"
        );
        assert_eq!(
            resume_command(&run, Path::new("/tmp/k.db")),
            "isobench run --resume 20261125-033942-817990 --db /tmp/k.db"
        );
    }
}
