//! The second configuration phase: a [`Scenario`] resolved against this host into a
//! [`Plan`].
//!
//! [`Plan::resolve`] runs the steps of a [`Resolver`] (the platform, the tenants, the
//! probes, the memory each tenant's workloads need) and asks the scenario's kind for its
//! conditions. Every step reports all of its problems, located in the scenario file.

use crate::plan::{Condition, Estimate, HostView, Plan, PlanOptions, PlannedProbe};
pub use crate::resolver::Resolver;
use crate::scenario::Scenario;
use crate::source::{ScenarioErrors, Span};

impl Plan {
    /// Resolves a scenario against a host. Every problem is reported at once, located in
    /// the scenario file.
    pub fn resolve(
        sc: &Scenario,
        host: &HostView,
        opts: &PlanOptions,
    ) -> Result<Plan, ScenarioErrors> {
        let mut r = Resolver {
            sc,
            host,
            opts,
            errors: Vec::new(),
            notes: Vec::new(),
            serving: Vec::new(),
            planned_probes: Vec::new(),
            probes_instead: None,
        };
        let platform = r.platform();
        let mut tenants = r.tenants(platform);
        let mut probes = r.probes(&tenants);
        r.planned_probes = probes.clone();
        let kind = sc.kind.experiment();
        let conditions = kind.conditions(&mut r, platform);
        if let Some(ps) = r.probes_instead.take() {
            probes = ps;
        }
        r.apply_serving(&mut probes, &tenants);
        r.require_workloads(&probes, &conditions);
        r.note_measured_llc();
        r.memory_needs(&mut tenants, &probes, &conditions);
        if !r.errors.is_empty() {
            let mut errors = r.errors;
            errors.sort_by_key(|e| (e.line, e.column));
            errors.dedup();
            return Err(ScenarioErrors(errors));
        }
        let seed = opts.seed.or(sc.seed).unwrap_or(opts.random_seed);
        let mut plan = Plan {
            scenario: sc.name.clone(),
            description: sc.description.clone(),
            kind: sc.kind,
            settings: sc.settings.clone(),
            seed,
            platform,
            tenants,
            probes,
            conditions,
            trial: sc.trial.clone(),
            repetitions: sc.repetitions.clone(),
            notes: r.notes,
            io_cost: None,
            estimate: Estimate {
                trials_per_round: 0,
                trials_min: 0,
                trials_max: 0,
                secs_min: 0.0,
                secs_max: 0.0,
            },
        };
        plan.estimate = kind.estimate(&plan);
        if let Err(why) = plan.check_live_knobs() {
            return Err(ScenarioErrors(vec![sc.source.error(
                Span::default(),
                "limits",
                why,
                "knobs the platform can change while its tenants run (`isobench list`)",
                "drop that knob from the condition, or run on a platform that can change it",
            )]));
        }
        Ok(plan)
    }
}

impl Resolver<'_> {
    /// Refuses a plan left with no probe or no condition.
    fn require_workloads(&mut self, probes: &[PlannedProbe], conditions: &[Condition]) {
        let (src, top) = (&self.sc.source, Span::default());
        if probes.is_empty() && self.errors.is_empty() {
            self.errors.push(src.error(
                top,
                "probe",
                "no probe can run here",
                "probes `isobench list` shows as supported",
                "add a probe that is supported on this machine",
            ));
        }
        if conditions.is_empty() && self.errors.is_empty() {
            let e = self.sc.kind.experiment().nothing_to_run().error(src);
            self.errors.push(e);
        }
    }
}
