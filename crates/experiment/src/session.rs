//! A run as a library session: what `isobench run` and the web server both start.
//!
//! [`Session::open`] does everything that can refuse before a tenant exists (read and
//! resolve the scenario, or load a stored run to resume; open the database; start the run's
//! guard and its platform), so bad input never leaves anything behind. [`Session::execute`]
//! then runs the trials, reporting each step as an [`Event`](crate::progress::Event) to the
//! caller's sink, and tears everything down. A stop flag ends the run gracefully: the trials
//! stored so far are kept and the run is recorded `interrupted`, ready to resume.
//!
//! A real session measures alone: it holds the host's measurement slot from `open` to the
//! end of `execute`, and `open` refuses ([`SessionError::Busy`]) while another run holds it.
//! Right after taking the slot, before anything that can refuse, `open` removes what dead
//! runs left on the host, and opening the database marks the runs whose controller died as
//! interrupted ([`crate::orphans`]); both are noted to the caller's sink at once, so even a
//! command that then fails (a resume with nothing left to do, a bad flag) has healed the host.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use isobench_platform::{MeasureSlot, PlatformError, RunContext, RunGuard};
use isobench_store::{Fact, RunId, RunStatus, Store, StoreError, Timestamp};

use crate::backend::{Backend, Clock, SystemClock};
pub use crate::error::SessionError;
use crate::fake::{FakeBackend, FakeScript};
use crate::orchestrator::{
    create_run, prepare_resume, Engine, EngineIo, EngineOptions, RunOutcome,
};
use crate::orphans;
use crate::progress::Progress;
use crate::real::RealBackend;
use crate::scenario::{preset, PlatformChoice, Scenario, PRESETS, QUICK_NAME, QUICK_TOML};
use crate::source::Source;
use crate::{HostView, Plan, PlanOptions};

/// What a session runs.
#[derive(Debug, Clone)]
pub enum Start {
    /// A new run of a scenario.
    New(NewRun),
    /// The rest of a stored, interrupted run.
    Resume(RunId),
}

/// A new run: the scenario and what overrides it.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// The scenario.
    pub source: Source,
    /// A built-in scenario: its probes that cannot run here are skipped, not refused.
    pub builtin: bool,
    /// Platform instead of the scenario's.
    pub platform: Option<PlatformChoice>,
    /// Seed instead of the scenario's.
    pub seed: Option<u64>,
    /// Time budget instead of the scenario's `repetitions.max_time`.
    pub max_time: Option<std::time::Duration>,
    /// io.cost on the workdirs' disk for the run (the `cgroup` platform on cgroup v2).
    pub io_cost: Option<isobench_platform::IoCost>,
}

impl NewRun {
    /// The built-in scenario `name` (`quick` without one).
    pub fn preset(name: Option<&str>) -> Result<NewRun, SessionError> {
        let source = match name {
            None => Source::new(QUICK_NAME, QUICK_TOML),
            Some(name) => {
                let text = preset(name).ok_or_else(|| {
                    let names: Vec<&str> = PRESETS.iter().map(|p| p.0).collect();
                    SessionError::BadInput(format!(
                        "preset {name}: no such preset; the presets are {}",
                        names.join(", ")
                    ))
                })?;
                Source::new(format!("<builtin:{name}>"), text)
            }
        };
        Ok(NewRun {
            source,
            builtin: true,
            platform: None,
            seed: None,
            max_time: None,
            io_cost: None,
        })
    }

    /// A scenario file's text.
    pub fn scenario(name: impl Into<String>, text: impl Into<String>) -> NewRun {
        NewRun {
            source: Source::new(name, text),
            builtin: false,
            platform: None,
            seed: None,
            max_time: None,
            io_cost: None,
        }
    }

    /// Parses, validates and resolves the scenario against `host`: the plan, or every
    /// problem located in the scenario. Nothing runs and nothing is stored.
    pub fn plan(&self, host: &HostView) -> Result<Plan, SessionError> {
        let sc = Scenario::parse(self.source.clone()).map_err(SessionError::Scenario)?;
        let opts = PlanOptions {
            platform: self.platform,
            seed: self.seed,
            random_seed: now_seed(),
            skip_unsupported: self.builtin,
        };
        if let Some(PlatformChoice::Named(kind)) = opts.platform {
            if let Some(why) = host.unavailable(kind) {
                return Err(SessionError::Unsupported(format!(
                    "platform {kind}: {why}; fix that, or choose another platform (host runs \
                     without isolation)"
                )));
            }
        }
        let mut plan = Plan::resolve(&sc, host, &opts).map_err(SessionError::Scenario)?;
        if let Some(budget) = self.max_time {
            plan.repetitions.max_time = Some(budget);
        }
        plan.io_cost = self.io_cost.as_ref().map(|c| c.to_string());
        Ok(plan)
    }
}

/// Where the tenants live: this machine, or the fake platform of the tests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// Real tenants on the plan's platform.
    Real,
    /// The fake platform and clock; `real_time` is how much real time passes per simulated
    /// second (0: instant).
    Fake {
        /// Real seconds per simulated second.
        real_time: f64,
        /// Every stressor's effect is multiplied by this (a host with worse isolation).
        effect_scale: f64,
    },
}

impl Mode {
    /// The host a plan is resolved against in this mode.
    pub fn host(self) -> anyhow::Result<HostView> {
        match self {
            Mode::Real => HostView::detect().context("reading this host's CPUs and memory"),
            Mode::Fake { .. } => Ok(HostView::synthetic(2, 8 << 30, true)),
        }
    }
}

/// A run ready to execute: planned, stored, its platform up.
pub struct Session {
    plan: Plan,
    text: Option<String>,
    resumed: Option<RunId>,
    store: Store,
    backend: Box<dyn Backend>,
    clock: Box<dyn Clock>,
    guard: Option<RunGuard>,
    host: serde_json::Value,
    stop: Arc<AtomicBool>,
    options: EngineOptions,
    /// The host's measurement slot (real runs).
    slot: Option<MeasureSlot>,
    db: PathBuf,
}

impl Session {
    /// Plans (or loads for resume) the run, opens the database at `db`, and starts the
    /// platform. The scenario is checked before the database is touched; the database is
    /// opened before any tenant exists.
    pub fn open(
        start: Start,
        db: PathBuf,
        mode: Mode,
        sink: &mut dyn Progress,
    ) -> Result<Session, SessionError> {
        // A new run's scenario is checked before anything else happens.
        let start = match start {
            Start::New(new) => {
                let host = mode.host().map_err(SessionError::Other)?;
                Ok((new.plan(&host)?, new.source.text))
            }
            Start::Resume(id) => Err(id),
        };
        // Only a real run measures this host.
        let slot = match mode {
            Mode::Real => Some(
                MeasureSlot::try_take()
                    .map_err(SessionError::Other)?
                    .map_err(SessionError::Busy)?,
            ),
            Mode::Fake { .. } => None,
        };
        if slot.is_some() {
            for line in isobench_platform::cleanup(false).summary() {
                sink.note(&format!("removed what a dead run left: {line}"));
            }
        }
        let mut store = Store::open(&db)?;
        for o in orphans::mark_orphans(&mut store)? {
            sink.note(&format!(
                "{o}; resume it with `{}`",
                orphans::resume_command(&o.run, &db)
            ));
        }
        let (plan, text, resumed) = match start {
            Ok((plan, text)) => (plan, Some(text), None),
            Err(id) => {
                if let Some(pid) = orphans::running_elsewhere(&store, &id)? {
                    return Err(SessionError::BadInput(format!(
                        "run {id} is running now (pid {pid}); stop it before resuming it"
                    )));
                }
                let plan = prepare_resume(&mut store, &id).map_err(|e| {
                    match e.downcast::<StoreError>() {
                        Ok(se) => SessionError::Store(se),
                        Err(e) => SessionError::BadInput(format!("{e:#}")),
                    }
                })?;
                orphans::claim(&mut store, &id).map_err(SessionError::Other)?;
                (plan, None, Some(id))
            }
        };
        let platform = match mode {
            Mode::Fake {
                real_time,
                effect_scale,
            } => Platform::fake(&plan, real_time, effect_scale),
            Mode::Real => match Platform::real(&plan) {
                Ok(p) => p,
                Err(e) => {
                    // A resumed run goes back to `interrupted`, ready for another attempt.
                    if let Some(id) = &resumed {
                        let _ = store.finish_run(
                            id,
                            RunStatus::Interrupted,
                            Some(&format!("could not resume here: {e:#}")),
                            Timestamp::now(),
                        );
                    }
                    return Err(match e.downcast::<PlatformError>() {
                        Ok(pe) => SessionError::Unsupported(pe.to_string()),
                        Err(e) => SessionError::Other(e),
                    });
                }
            },
        };
        Ok(Session {
            plan,
            text,
            resumed,
            store,
            backend: platform.backend,
            clock: platform.clock,
            guard: platform.guard,
            host: platform.host,
            stop: Arc::new(AtomicBool::new(false)),
            options: EngineOptions::default(),
            slot,
            db,
        })
    }

    /// The plan this session runs.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// Set it to end the run gracefully after the current trial.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// The run's objects on the platform, for a handler that must remove them at once (a
    /// second Ctrl-C, a panic); `None` on the fake platform.
    pub fn run_context(&self) -> Option<RunContext> {
        self.guard.as_ref().map(RunGuard::context)
    }

    /// Runs the trials to the end (or the stop flag), reporting to `sink`, tears the
    /// tenants down, and gives back the outcome and the database.
    pub fn execute(mut self, sink: &mut dyn Progress) -> Result<(RunOutcome, Store), SessionError> {
        if let Some(guard) = &self.guard {
            for other in guard.others_live() {
                sink.note(&format!(
                    "warning: run {other} is measuring on this host at the same time; each \
                     disturbs the other (its trials are flagged when the load shows)"
                ));
            }
        }
        let out = self.execute_engine(sink);
        drop(self.backend);
        if let Some(guard) = self.guard {
            for f in &guard.finish().failed {
                sink.note(&format!("warning: could not remove {f}"));
            }
        }
        let out = out?;
        // The run's results, stored once where it ends: no reader analyses it again.
        if let Err(e) = crate::stored::store_results(&mut self.store, &out.run) {
            sink.note(&format!(
                "warning: the run's results document was not stored ({e}); each reader \
                 analyses the run again"
            ));
        }
        Ok((out, self.store))
    }

    fn execute_engine(&mut self, sink: &mut dyn Progress) -> Result<RunOutcome, SessionError> {
        let run = match self.resumed.clone() {
            Some(id) => id,
            None => create_run(
                &mut self.store,
                &self.plan,
                self.text.as_deref().unwrap_or_default(),
                &self.backend.describe(),
                self.host.clone(),
                self.clock.unix_ms(),
            )?,
        };
        if self.resumed.is_none() {
            orphans::claim(&mut self.store, &run).map_err(SessionError::Other)?;
        }
        if let Some(slot) = &mut self.slot {
            slot.describe(run.as_str(), &self.db)
                .map_err(SessionError::Other)?;
        }
        let caveats = self.backend.caveats();
        if !caveats.is_empty() {
            for c in &caveats {
                sink.note(&format!("warning: {c}"));
            }
            self.store.record_fact(
                &run,
                &Fact {
                    scope: "platform".into(),
                    key: "caveats".into(),
                    value: serde_json::json!(caveats),
                },
            )?;
        }
        Engine::new(
            &self.plan,
            run,
            EngineIo {
                store: &mut self.store,
                backend: self.backend.as_mut(),
                clock: self.clock.as_ref(),
                progress: sink,
                stop: self.stop.clone(),
            },
            self.options.clone(),
        )
        .execute()
        .map_err(SessionError::Other)
    }
}

/// The backend, clock and guard a session runs on, and the host facts it records.
struct Platform {
    backend: Box<dyn Backend>,
    clock: Box<dyn Clock>,
    guard: Option<RunGuard>,
    host: serde_json::Value,
}

impl Platform {
    fn fake(plan: &Plan, real_time: f64, effect_scale: f64) -> Platform {
        let (backend, clock) = FakeBackend::new(
            plan.seed,
            FakeScript {
                real_time,
                effect_scale,
                ..FakeScript::default()
            },
        );
        Platform {
            backend: Box::new(backend),
            clock: Box::new(clock),
            guard: None,
            host: serde_json::json!({"hostname": "fake", "cores": 2}),
        }
    }

    fn real(plan: &Plan) -> anyhow::Result<Platform> {
        // `Session::open` has just swept the dead runs.
        let guard = RunGuard::start_without_sweep().context("starting a run")?;
        let exe = std::env::current_exe().context("locating the isobench binary")?;
        let backend = RealBackend::new(plan, guard.context(), exe)?;
        let mut host =
            serde_json::to_value(isobench_workloads::HostFacts::detect()).unwrap_or_default();
        // Where the disks' and network devices' interrupts go: a result caused by the IRQ's
        // CPU is named from this.
        if let (Some(h), Ok(irqs)) = (
            host.as_object_mut(),
            isobench_platform::noise::irq_affinity(),
        ) {
            h.insert(
                "device_irqs".into(),
                serde_json::to_value(irqs).unwrap_or_default(),
            );
        }
        Ok(Platform {
            backend: Box::new(backend),
            clock: Box::new(SystemClock::new()),
            guard: Some(guard),
            host,
        })
    }
}

fn now_seed() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64 ^ std::process::id() as u64)
}
