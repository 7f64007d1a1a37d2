//! Owning a run from its start to its end: the [`RunGuard`] sweeps what dead runs left,
//! creates the run's state directory and holds its lock, and at the end removes every
//! object of the run that is still there. Above both the run's names ([`crate::run`]) and
//! the sweeps ([`mod@crate::cleanup`]), which it ties together.

use std::path::Path;

use anyhow::Result;

use crate::cleanup::{sweep, Scope};
use crate::leftovers::CleanupReport;
use crate::lockfile::LockFile;
use crate::run::{self, RunContext, RunId};

/// Owns one run: creates its state directory (after sweeping dead runs), and on
/// [`RunGuard::finish`] or drop removes every object of the run that is still there.
///
/// Create it before the platform and drop it after the tenants.
#[derive(Debug)]
pub struct RunGuard {
    ctx: RunContext,
    swept: CleanupReport,
    done: bool,
    /// Held while the run lives; released by the kernel however the process ends.
    _lock: Option<LockFile>,
}

impl RunGuard {
    /// Starts a run: removes the objects of dead runs (see [`crate::cleanup()`]), then creates
    /// the state directory of a new run id.
    pub fn start() -> Result<RunGuard> {
        let swept = sweep(Scope::Dead);
        let mut g = RunGuard::create(&run::state_root(), false)?;
        g.swept = swept;
        Ok(g)
    }

    /// Starts a run without sweeping dead runs first: for `isobench doctor`, which only
    /// reports, and for a caller that has just swept ([`crate::cleanup()`]).
    pub fn start_without_sweep() -> Result<RunGuard> {
        RunGuard::create(&run::state_root(), false)
    }

    /// Starts the run of a coordinator (a fleet run's): it owns objects like any run (a
    /// fleet's runner pods) and they are swept when it dies, but it measures nothing here,
    /// so the runs measuring on this host do not count it as a run that disturbs theirs.
    pub fn start_coordinator() -> Result<RunGuard> {
        let swept = sweep(Scope::Dead);
        let mut g = RunGuard::create(&run::state_root(), true)?;
        g.swept = swept;
        Ok(g)
    }

    fn create(root: &Path, coordinator: bool) -> Result<RunGuard> {
        let (ctx, lock) = run::create_state_dir(root, coordinator)?;
        Ok(RunGuard {
            ctx,
            swept: CleanupReport::default(),
            done: false,
            _lock: Some(lock),
        })
    }

    /// The run id.
    pub fn id(&self) -> &RunId {
        self.ctx.id()
    }

    /// A handle for platforms and signal handlers.
    pub fn context(&self) -> RunContext {
        self.ctx.clone()
    }

    /// Other runs live on this host now (their controllers are running): their measuring
    /// disturbs this run's, and this run's theirs.
    pub fn others_live(&self) -> Vec<String> {
        run::others_live(self.ctx.id())
    }

    /// What the sweep of dead runs removed when this run started.
    pub fn swept(&self) -> &CleanupReport {
        &self.swept
    }

    /// Ends the run: removes whatever of it is left and its state directory.
    pub fn finish(mut self) -> CleanupReport {
        self.done = true;
        self.ctx.cleanup_now()
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        if !self.done {
            let r = self.ctx.cleanup_now();
            for f in &r.failed {
                tracing::warn!("cleanup of run {}: {f}", self.ctx.id());
            }
        }
    }
}

// A method of the run's handle, written here because the sweep it calls stands above
// `run`, which only names the run's objects.
impl RunContext {
    /// Removes every object of this run at once (processes, cgroups, namespaces, links,
    /// workdirs, the state directory), without needing the tenant handles: what a Ctrl-C
    /// handler or a panic hook calls before exiting.
    pub fn cleanup_now(&self) -> CleanupReport {
        sweep(Scope::Run(self.id()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::state_dir_live;

    #[test]
    fn a_run_sees_the_other_live_runs_but_not_itself_nor_finished_ones() {
        let a = RunGuard::start_without_sweep().unwrap();
        let b = RunGuard::start_without_sweep().unwrap();
        let seen = a.others_live();
        assert!(seen.contains(&b.id().to_string()), "{seen:?}");
        assert!(!seen.contains(&a.id().to_string()), "{seen:?}");
        let b_id = b.id().to_string();
        b.finish();
        crate::lockfile::eventually("the finished run is gone", || {
            (!a.others_live().contains(&b_id)).then_some(())
        });
        a.finish();
    }

    #[test]
    fn a_run_is_dead_once_its_lock_is_free() {
        let g = RunGuard::start_without_sweep().unwrap();
        let dir = g.context().state_dir().to_path_buf();
        assert!(state_dir_live(&dir));
        // What SIGKILL does to the controller: its lock goes, its state directory stays.
        let mut g = g;
        g.done = true;
        drop(g._lock.take());
        assert!(dir.is_dir());
        crate::lockfile::eventually("the run is dead", || (!state_dir_live(&dir)).then_some(()));
        g.context().cleanup_now();
        assert!(!dir.exists());
    }
}
