//! One resolution under way ([`Resolver`]): the steps of [`crate::plan::Plan::resolve`] and
//! what they found so far.
//!
//! Each step is a method of [`Resolver`]: the platform, the tenants (limits, CPUs, memory,
//! pinning), the probes (supported here, sizes from the victims' limits), and the memory
//! each tenant's workloads need. A kind plans its conditions through it. Every step reports
//! all of its problems, located in the scenario file.

use std::collections::BTreeMap;

use isobench_common::format_size as fmt_bytes;
use isobench_platform::{LimitError, Limits};
use isobench_workloads::Unsupported;

use crate::plan::{
    cpu_list, tenant_env, Condition, HostView, PlanOptions, PlannedProbe, PlannedTenant, Platform,
    AGENT_OVERHEAD, MIN_TENANT_MEMORY, MIN_VICTIM_PIDS,
};
use crate::scenario::{Placement, PlatformChoice, Role, Scenario};
use crate::serving::{references, Serving};
use crate::source::{ScenarioError, Span};

const MIB: u64 = 1 << 20;

// Checked where the plan's tenants are known, so that serving.rs stays below the plan.
impl Serving {
    /// Whether every name is known and every address used is reachable on loopback: a
    /// service or a site may only use the address of a service in its own tenant, or of one
    /// in another tenant when neither has a network namespace of its own (then both are on
    /// the host's loopback). Reserved ports are on the host's loopback. The error names the
    /// service or site and the fix.
    pub fn check(&self, tenants: &[PlannedTenant]) -> Result<(), String> {
        let tenant = |name: &str| tenants.iter().find(|t| t.name == name);
        let mut owner: BTreeMap<&str, Option<&PlannedTenant>> = BTreeMap::new();
        for r in &self.reserve {
            owner.insert(r.as_str(), None);
        }
        let reach = |user: &PlannedTenant,
                     used: &str,
                     owner: &BTreeMap<&str, Option<&PlannedTenant>>| {
            match owner.get(used) {
                None => Err(format!(
                    "`{used}` is not a service or reserved port started before it"
                )),
                Some(None) if user.netns => Err(format!(
                    "tenant {} has its own network namespace, so the host's loopback port \
                     `{used}` is not reachable from it; services bind to loopback only: \
                     leave its network = {{ namespace = true }} out",
                    user.name
                )),
                Some(Some(o)) if o.name != user.name && (o.netns || user.netns) => Err(format!(
                    "`{used}` runs in tenant {} and is used from tenant {}, and one of them \
                     has its own network namespace; services bind to loopback only, so \
                     tenants that reach each other must share the host's network (leave \
                     network = {{ namespace = true }} out)",
                    o.name, user.name
                )),
                _ => Ok(()),
            }
        };
        for s in &self.services {
            let t = tenant(&s.tenant)
                .ok_or_else(|| format!("service {}: no tenant {}", s.id, s.tenant))?;
            for used in references(&s.kind) {
                reach(t, &used, &owner).map_err(|e| format!("service {}: {e}", s.id))?;
            }
            if owner.insert(s.id.as_str(), Some(t)).is_some() {
                return Err(format!("service {}: the name is used twice", s.id));
            }
        }
        for site in &self.sites {
            let t = tenant(&site.tenant)
                .ok_or_else(|| format!("probe site: no tenant {}", site.tenant))?;
            for v in site.params.values() {
                for used in references(v) {
                    reach(t, &used, &owner)
                        .map_err(|e| format!("probe in or beside {}: {e}", site.tenant))?;
                }
            }
        }
        Ok(())
    }
}

/// One resolution under way: the scenario, the host, and what was found so far. Each step
/// of [`crate::plan::Plan::resolve`] is one method, and every step reports all of its
/// problems.
pub struct Resolver<'a> {
    pub(crate) sc: &'a Scenario,
    pub(crate) host: &'a HostView,
    pub(crate) opts: &'a PlanOptions,
    /// Every problem found, located in the scenario file.
    pub(crate) errors: Vec<ScenarioError>,
    /// What was decided and why.
    pub(crate) notes: Vec<String>,
    /// Services a kind asked for, by probe id ([`Resolver::serve`]).
    pub(crate) serving: Vec<(String, crate::serving::Serving)>,
    /// The scenario's probes as planned (supported here, sized from the victims' limits).
    pub(crate) planned_probes: Vec<PlannedProbe>,
    /// The probes a kind derives from the scenario's, when it derives them
    /// ([`Resolver::replace_probes`]).
    pub(crate) probes_instead: Option<Vec<PlannedProbe>>,
}

impl<'a> Resolver<'a> {
    /// The scenario being resolved.
    pub fn scenario(&self) -> &'a Scenario {
        self.sc
    }

    /// The host it is resolved against.
    pub fn host(&self) -> &'a HostView {
        self.host
    }

    /// The command line's choices.
    pub fn options(&self) -> &'a PlanOptions {
        self.opts
    }

    /// Reports a problem.
    pub fn error(&mut self, e: ScenarioError) {
        self.errors.push(e);
    }

    /// Records a decision and why.
    pub fn note(&mut self, note: String) {
        self.notes.push(note);
    }

    /// Gives probe `probe_id` services in tenants and the sites it runs at (a kind that
    /// measures tenants from outside, or places a probe's peers in other tenants). Checked
    /// against the tenants when the plan is made.
    pub fn serve(&mut self, probe_id: &str, serving: crate::serving::Serving) {
        self.serving.push((probe_id.to_string(), serving));
    }

    /// The scenario's probes as planned so far: those supported here, sizes resolved from the
    /// victims' limits (what a kind that derives variants starts from).
    pub fn planned_probes(&self) -> &[PlannedProbe] {
        &self.planned_probes
    }

    /// Runs `probes` instead of the scenario's (a kind that measures one probe in several
    /// variants or placements derives them from the one declared).
    pub fn replace_probes(&mut self, probes: Vec<PlannedProbe>) {
        self.probes_instead = Some(probes);
    }

    /// Applies what [`Resolver::serve`] asked for, reporting services no tenant can reach.
    pub(crate) fn apply_serving(&mut self, probes: &mut [PlannedProbe], tenants: &[PlannedTenant]) {
        for (id, s) in std::mem::take(&mut self.serving) {
            if let Err(why) = s.check(tenants) {
                let e = self.sc.source.error(
                    Span::default(),
                    "tenant",
                    format!("probe {id}: {why}"),
                    "services on loopback, reached from their own tenant or from tenants \
                     sharing the host's network",
                    "give the tenants that reach each other no network namespace of their own",
                );
                self.error(e);
                continue;
            }
            if let Some(p) = probes.iter_mut().find(|p| p.id == id) {
                p.serving = Some(s);
            }
        }
    }

    /// A workload of the scenario's `[[table]]` number `index` that cannot run here: left out
    /// with a note when the options skip unsupported workloads, else an error at its name.
    pub fn unsupported(
        &mut self,
        table: &str,
        index: usize,
        id: &str,
        name: &str,
        name_span: Span,
        why: &Unsupported,
    ) {
        if self.opts.skip_unsupported {
            self.note(format!("{table} {id} left out: {why}"));
            return;
        }
        let e = self.sc.source.error(
            name_span,
            format!("{table}[{index}].name"),
            format!("{name} cannot run here: {why}"),
            format!("{table}s that `isobench list` shows as supported"),
            format!("remove this [[{table}]] table, or fix what the reason names"),
        );
        self.error(e);
    }

    /// The platform of the run: the command line's, else the tenants' and the scenario's,
    /// `auto` decided by whether cgroups can be used here.
    pub(crate) fn platform(&mut self) -> Platform {
        let (sc, host, opts) = (self.sc, self.host, self.opts);
        let (src, top) = (&sc.source, Span::default());
        let choice = opts.platform.unwrap_or(sc.platform);
        let mut choices: Vec<PlatformChoice> = sc
            .tenants
            .iter()
            .map(|t| opts.platform.or(t.platform).unwrap_or(choice))
            .collect();
        choices.dedup();
        if choices.len() > 1 {
            let t = sc
                .tenants
                .iter()
                .find(|t| t.platform.is_some())
                .map_or(top, |t| t.span);
            self.errors.push(src.error(
                t,
                "tenant.platform",
                "the tenants use different platforms; one run uses one platform",
                platform_words(),
                "set the same platform on every tenant, or only the top-level `platform`",
            ));
        }
        let choice = choices.first().copied().unwrap_or(choice);
        match choice {
            PlatformChoice::Named(kind) => {
                if let Some(why) = host.unavailable(kind) {
                    self.errors.push(src.error(
                        top,
                        "platform",
                        format!("the {kind} platform cannot be used here: {why}"),
                        platform_words(),
                        "fix what is named, or choose another platform (host runs without \
                         isolation)",
                    ));
                }
                kind
            }
            PlatformChoice::Auto => {
                let mut passed = Vec::new();
                for &kind in isobench_platform::AUTO {
                    match host.unavailable(kind) {
                        None => {
                            let note = if kind.capabilities().enforces_limits {
                                format!("platform auto: {kind}")
                            } else {
                                format!("platform auto: {kind}, no isolation")
                            };
                            self.notes.push(if passed.is_empty() {
                                note
                            } else {
                                format!("{note} ({})", passed.join("; "))
                            });
                            return kind;
                        }
                        Some(why) => passed.push(format!("{kind} unavailable: {why}")),
                    }
                }
                Platform::HOST
            }
        }
    }

    /// The tenants: limits checked against the host, CPUs (from the placement when the
    /// tenant has no cpuset of its own), memory, and where their probes are pinned.
    pub(crate) fn tenants(&mut self, platform: Platform) -> Vec<PlannedTenant> {
        let (sc, host) = (self.sc, self.host);
        let host_cpus = host.cpus();
        let host_avail = host.env.mem_usable.min(host.info.memory_bytes.max(1));
        let mut tenants = Vec::new();
        let chooses = platform.capabilities().chooses_cpus;
        let mut chosen = Vec::new();
        let placed = match sc.placement {
            Placement::Shared => vec![None; sc.tenants.len()],
            Placement::Split => {
                let (placed, note) = split_placement(sc, &host_cpus, host.disk_irq.as_ref());
                self.notes.push(note);
                placed
            }
        };
        for (ti, t) in sc.tenants.iter().enumerate() {
            let mut limits = self.limits(t.table, t);
            if let (None, Some(own)) = (&limits.cpuset, &placed[ti]) {
                limits.cpuset = Some(isobench_platform::CpuList::from_cpus(
                    own.iter().map(|&c| c as u32),
                ));
            }
            let cpus: Vec<usize> = match &limits.cpuset {
                Some(set) => set.iter().map(|c| c as usize).collect(),
                None => host_cpus.clone(),
            };
            let memory = limits.memory.map_or(host_avail, |m| m.min(host_avail));
            self.check_minimums(t.table, t, &limits);
            self.check_image(t, platform);
            // A platform that chooses the CPUs itself gives the tenant others than these
            // numbers: nothing is pinned to them.
            let (pin, pin_peer) = match &limits.cpuset {
                Some(_) if !chooses => {
                    (cpus.first().copied(), cpus.get(1).or(cpus.first()).copied())
                }
                _ => (None, None),
            };
            if chooses && limits.cpuset.is_some() {
                chosen.push(format!(
                    "{} {}",
                    t.name,
                    limits.cpuset.as_ref().map_or(0, |c| c.len())
                ));
            }
            if !platform.capabilities().enforces_limits && !limits.is_empty() {
                self.notes.push(format!(
                    "tenant {}: the {platform} platform does not enforce limits ({limits})",
                    t.name
                ));
            }
            tenants.push(PlannedTenant {
                name: t.name.clone(),
                role: t.role,
                limits,
                netns: t.netns,
                cpus,
                memory,
                mem_need: AGENT_OVERHEAD,
                pin,
                pin_peer,
                image: t.image.clone(),
            });
        }
        if !chosen.is_empty() {
            self.notes.push(format!(
                "the {platform} platform chooses each tenant's CPUs itself: a cpuset asks for \
                 that many CPUs of the tenant's own (here: {}), the CPU numbers above are not \
                 the tenants', nothing is pinned to them, and each tenant's notes say which \
                 CPUs it got",
                chosen.join(", ")
            ));
        }
        tenants
    }

    /// The limits of tenant `ti`: each key alone first, so each error points at its own line;
    /// the keys that parse are then combined and checked against the host.
    fn limits(&mut self, ti: usize, t: &crate::scenario::TenantSpec) -> Limits {
        let (sc, host) = (self.sc, self.host);
        let field = |k: &str| format!("tenant[{ti}].limits.{k}");
        let mut good: Vec<&crate::scenario::LimitEntry> = Vec::new();
        for e in &t.limits {
            match Limits::from_pairs([(e.key.as_str(), e.value.as_str())]) {
                Ok(_) => good.push(e),
                Err(err) => self.errors.push(limit_error(
                    sc,
                    e.key_span,
                    e.value_span,
                    &field(&e.key),
                    &err,
                )),
            }
        }
        let mut limits = match Limits::from_pairs(good.iter().map(|e| (&e.key, &e.value))) {
            Ok(l) => l,
            Err(err) => {
                let s = good.last().map_or(t.span, |e| e.key_span);
                self.errors.push(limit_error(sc, s, s, &field("*"), &err));
                good.clear();
                Limits::default()
            }
        };
        // Every key that does not fit the host, not only the first.
        for _ in 0..t.limits.len() {
            let Err(err) = limits.validate(&host.info) else {
                break;
            };
            let key = match &err {
                LimitError::NotOnHost { key, .. } => *key,
                _ => "",
            };
            let (ks, vs) = t
                .limits
                .iter()
                .find(|e| e.key == key)
                .map_or((t.span, t.span), |e| (e.key_span, e.value_span));
            self.errors.push(limit_error(sc, ks, vs, &field(key), &err));
            good.retain(|e| e.key != key);
            limits =
                Limits::from_pairs(good.iter().map(|e| (&e.key, &e.value))).unwrap_or_default();
            if key.is_empty() {
                break;
            }
        }
        limits
    }

    /// Refuses a tenant's own image on a platform that runs no images.
    fn check_image(&mut self, t: &crate::scenario::TenantSpec, platform: Platform) {
        let Some(image) = &t.image else {
            return;
        };
        if platform.capabilities().runs_images {
            return;
        }
        let e = self.sc.source.error(
            t.image_span.unwrap_or(t.span),
            format!("tenant[{}].image", t.table),
            format!(
                "tenant {} runs from the image `{image}`, but the {platform} platform runs no \
                 container images",
                t.name
            ),
            "`image` on the oci and k8s platforms",
            "set platform = \"oci\" (Docker or Podman) or platform = \"k8s\" (or pass \
             --platform oci), or remove `image`",
        );
        self.error(e);
    }

    /// Refuses limits too small for the agent: memory for any tenant, pids for a victim.
    fn check_minimums(&mut self, ti: usize, t: &crate::scenario::TenantSpec, limits: &Limits) {
        let src = &self.sc.source;
        let field = |k: &str| format!("tenant[{ti}].limits.{k}");
        if let Some(m) = limits.memory {
            if m < MIN_TENANT_MEMORY {
                let e = t.limits.iter().find(|e| e.key == "memory");
                self.errors.push(src.error(
                    e.map_or(t.span, |e| e.value_span),
                    field("memory"),
                    format!(
                        "{} is too little for a tenant: the agent alone needs about {}",
                        fmt_bytes(m),
                        fmt_bytes(MIN_TENANT_MEMORY)
                    ),
                    format!("{} or more", fmt_bytes(MIN_TENANT_MEMORY)),
                    "write memory = \"256M\" or more",
                ));
            }
        }
        if t.role == Role::Victim {
            if let Some(p) = limits.pids {
                if p < MIN_VICTIM_PIDS {
                    let e = t.limits.iter().find(|e| e.key == "pids");
                    self.errors.push(src.error(
                        e.map_or(t.span, |e| e.value_span),
                        field("pids"),
                        format!(
                            "pids = {p} is too few for a victim: the agent and the probes' \
                             helper threads need about {MIN_VICTIM_PIDS}"
                        ),
                        format!("{MIN_VICTIM_PIDS} or more"),
                        "write pids = 256",
                    ));
                }
            }
        }
    }

    /// The probes that can run here, with sizes derived from the smallest victim's limits.
    pub(crate) fn probes(&mut self, tenants: &[PlannedTenant]) -> Vec<PlannedProbe> {
        let (sc, host) = (self.sc, self.host);
        let victims: Vec<&PlannedTenant> =
            tenants.iter().filter(|t| t.role == Role::Victim).collect();
        let mut probes = Vec::new();
        for (pi, p) in sc.probes.iter().enumerate() {
            let probe = isobench_workloads::probe(&p.name).expect("validated name");
            let env = victims
                .first()
                .map_or_else(|| host.env.clone(), |v| tenant_env(host, v));
            if let Err(u) = probe.supported(&env) {
                self.unsupported("probe", pi, &p.id, &p.name, p.name_span, &u);
                continue;
            }
            let mut params = p.params.clone();
            // Sizes derived from the smallest victim, so every victim runs the same probe.
            if let Some(v) = victims.iter().min_by_key(|v| v.memory) {
                let budget = v.memory.saturating_sub(AGENT_OVERHEAD);
                if let Some(chosen) = probe.fit_sizes(&mut params, budget, &host.caches) {
                    self.notes.push(format!(
                        "probe {}: {chosen} (tenant memory {})",
                        p.id,
                        fmt_bytes(v.memory)
                    ));
                }
            }
            probes.push(PlannedProbe {
                id: p.id.clone(),
                name: p.name.clone(),
                class: probe.class(),
                params,
                metrics: p.metrics.clone(),
                windowed: probe.windowed(),
                serving: None,
            });
        }
        probes
    }

    /// Notes a usable last-level cache that differs from what sysfs reports.
    pub(crate) fn note_measured_llc(&mut self) {
        let host = self.host;
        let (llc, llc_sysfs) = (host.caches.llc(), host.caches.measured.llc_sysfs);
        if llc_sysfs.is_some_and(|s| s != llc) {
            self.notes.push(format!(
                "last-level cache: {} usable as measured ({} per sysfs); sizes use the measured one",
                fmt_bytes(llc),
                llc_sysfs.map_or("?".into(), fmt_bytes)
            ));
        }
    }

    /// Memory each tenant's workloads need (a victim's probes, an aggressor's own
    /// assignments), and whether its limit allows it.
    pub(crate) fn memory_needs(
        &mut self,
        tenants: &mut [PlannedTenant],
        probes: &[PlannedProbe],
        conditions: &[Condition],
    ) {
        let (sc, host) = (self.sc, self.host);
        let src = &sc.source;
        for t in tenants.iter_mut() {
            let env = tenant_env(host, t);
            let (need, what) = match t.role {
                Role::Victim => probes
                    .iter()
                    .map(|p| {
                        let probe = isobench_workloads::probe(&p.name).expect("validated name");
                        (
                            probe.memory_need(&p.params, host.caches.llc()),
                            p.id.clone(),
                        )
                    })
                    .max_by_key(|x| x.0)
                    .unwrap_or((0, String::new())),
                Role::Aggressor => conditions
                    .iter()
                    .filter_map(|c| Some((c.assignments.get(&t.name)?, &c.id)))
                    .map(|(a, id)| {
                        let st = isobench_workloads::stressor(&a.stressor).expect("validated name");
                        (
                            st.memory_need(&a.params, &env, a.intensity, host.caches.llc()),
                            id.clone(),
                        )
                    })
                    .max_by_key(|x| x.0)
                    .unwrap_or((0, String::new())),
            };
            t.mem_need = need + AGENT_OVERHEAD;
            if t.mem_need > t.memory {
                let ti = sc
                    .tenants
                    .iter()
                    .position(|s| s.name == t.name)
                    .expect("same tenants");
                let spec = &sc.tenants[ti];
                let at = spec
                    .limits
                    .iter()
                    .find(|e| e.key == "memory")
                    .map_or(spec.span, |e| e.value_span);
                self.errors.push(src.error(
                    at,
                    format!("tenant[{}].limits.memory", spec.table),
                    format!(
                        "the tenant may use {} but `{what}` needs about {} (with the agent): it \
                         would measure paging, not isolation",
                        fmt_bytes(t.memory),
                        fmt_bytes(t.mem_need)
                    ),
                    format!("{} or more", fmt_bytes(t.mem_need)),
                    format!(
                        "raise memory to \"{}\", or give `{what}` smaller sizes in its params",
                        fmt_bytes(round_up_mib(t.mem_need * 5 / 4))
                    ),
                ));
            }
        }
    }
}

fn limit_error(
    sc: &Scenario,
    key_span: Span,
    value_span: Span,
    field: &str,
    err: &LimitError,
) -> ScenarioError {
    use isobench_platform::limits::LIMIT_KEYS;
    let keys = LIMIT_KEYS
        .iter()
        .map(|k| k.key)
        .collect::<Vec<_>>()
        .join(", ");
    let (span, allowed, fix) = match err {
        LimitError::UnknownKey { suggestion, .. } => (
            key_span,
            format!("the limit keys {keys}"),
            match suggestion {
                Some(s) => format!("did you mean `{s}`?"),
                None => "remove it (docs/scenario.md lists every limit)".into(),
            },
        ),
        LimitError::BadValue { example, key, .. } => (
            value_span,
            LIMIT_KEYS
                .iter()
                .find(|k| k.key == *key)
                .map_or(String::new(), |k| k.help.to_string()),
            format!("write it like {}", toml_example(example)),
        ),
        LimitError::NotOnHost { fix, key, .. } => (
            value_span,
            LIMIT_KEYS
                .iter()
                .find(|k| k.key == *key)
                .map_or(String::new(), |k| k.help.to_string()),
            fix.clone(),
        ),
        LimitError::Conflict { first, second, .. } => (
            key_span,
            format!("only one of `{first}` and `{second}`"),
            format!("remove `{first}` or `{second}`"),
        ),
        LimitError::Duplicate { key } => (key_span, String::new(), format!("keep one `{key}`")),
        LimitError::NotKeyValue { .. } => (key_span, keys, "write key = value".into()),
        LimitError::Requires {
            key,
            needs,
            example,
            ..
        } => (
            key_span,
            format!("`{key}` together with `{needs}`"),
            format!("add `{needs}` (e.g. {example}) or remove `{key}`"),
        ),
        LimitError::Order { lower, upper, .. } => (
            value_span,
            "memory_min <= memory_low <= memory_high <= memory; cpu_burst within the quota".into(),
            format!("lower `{lower}` or raise `{upper}`"),
        ),
    };
    sc.source.error(span, field, err.to_string(), allowed, fix)
}

/// `memory=512M` -> `memory = "512M"`.
fn toml_example(kv: &str) -> String {
    match kv.split_once('=') {
        Some((k, v)) if v.parse::<f64>().is_ok() => format!("{k} = {v}"),
        Some((k, v)) => format!("{k} = \"{v}\""),
        None => kv.to_string(),
    }
}

fn round_up_mib(b: u64) -> u64 {
    b.div_ceil(64 * MIB) * 64 * MIB
}

/// CPUs of each tenant under `placement = "split"` (`None` for a tenant with a cpuset of its
/// own, which it keeps), and the plan's note saying what was chosen and why.
///
/// The victims as a group get the larger half of the host's CPUs, the CPUs that take the
/// disk's interrupts first: an I/O completion then wakes the victim's probe on its own CPU,
/// not across from a busy aggressor (on this kind of virtual machine a completion for a
/// sleeping task on the other vCPU stalls for milliseconds). The aggressors get the rest.
/// CPUs claimed by a tenant's own cpuset are left out. Within a group each tenant gets an
/// even contiguous share; a group with more tenants than CPUs shares them round robin; a
/// group with nobody to place leaves the other every CPU. With a single free CPU nothing can
/// be split.
fn split_placement(
    sc: &Scenario,
    host_cpus: &[usize],
    disk_irq: Option<&crate::cause::DiskIrq>,
) -> (Vec<Option<Vec<usize>>>, String) {
    fn own_cpuset(t: &crate::scenario::TenantSpec) -> Option<&crate::scenario::LimitEntry> {
        t.limits.iter().find(|e| e.key == "cpuset")
    }
    let mut placed = vec![None; sc.tenants.len()];
    // CPUs a tenant claimed with a cpuset of its own are left to it.
    let claimed: Vec<usize> = sc
        .tenants
        .iter()
        .filter_map(|t| isobench_platform::CpuList::parse(&own_cpuset(t)?.value).ok())
        .flat_map(|c| c.iter().map(|c| c as usize).collect::<Vec<_>>())
        .collect();
    let mut pool: Vec<usize> = host_cpus
        .iter()
        .copied()
        .filter(|c| !claimed.contains(c))
        .collect();
    if pool.is_empty() {
        pool = host_cpus.to_vec();
    }
    // Indices of the tenants of a role that have no cpuset of their own.
    let to_place = |role: Role| -> Vec<usize> {
        (0..sc.tenants.len())
            .filter(|&i| sc.tenants[i].role == role && own_cpuset(&sc.tenants[i]).is_none())
            .collect()
    };
    let (victims, aggressors) = (
        to_place(Role::Victim).len(),
        to_place(Role::Aggressor).len(),
    );
    if victims > 0 && aggressors > 0 && pool.len() < 2 {
        return (
            placed,
            format!(
                "placement split: only cpu {} is free to place tenants on, so they share it",
                cpu_list(&pool)
            ),
        );
    }
    let irq: Vec<usize> = disk_irq
        .map(|d| d.cpus.clone())
        .unwrap_or_default()
        .into_iter()
        .filter(|c| pool.contains(c))
        .collect();
    // The IRQ CPUs first, unless they are all of them.
    let mut order: Vec<usize> = if irq.len() < pool.len() {
        irq.clone()
    } else {
        Vec::new()
    };
    let rest: Vec<usize> = pool
        .iter()
        .copied()
        .filter(|c| !order.contains(c))
        .collect();
    order.extend(rest);
    let n_victims = match (victims, aggressors) {
        (_, 0) => order.len(),
        (0, _) => 0,
        _ => order.len() - order.len() / 2,
    };
    let groups = [
        (Role::Victim, &order[..n_victims]),
        (Role::Aggressor, &order[n_victims..]),
    ];
    let mut said = Vec::new();
    for (role, cpus) in groups {
        let mut cpus = cpus.to_vec();
        cpus.sort_unstable();
        let members = to_place(role);
        let k = members.len();
        let mut group = Vec::new();
        for (j, &i) in members.iter().enumerate() {
            let mine = if k <= cpus.len() {
                // Even contiguous shares, the first tenants taking one more.
                let (base, extra) = (cpus.len() / k, cpus.len() % k);
                let from = j * base + j.min(extra);
                cpus[from..from + base + usize::from(j < extra)].to_vec()
            } else {
                vec![cpus[j % cpus.len()]]
            };
            group.push(format!("{} on cpu {}", sc.tenants[i].name, cpu_list(&mine)));
            placed[i] = Some(mine);
        }
        if k > cpus.len() {
            group.push(format!("{k} {role}s sharing {} CPU(s)", cpus.len()));
        }
        if !group.is_empty() {
            said.push(format!("{role}s: {}", group.join(", ")));
        }
    }
    let why = match disk_irq {
        Some(d) if !irq.is_empty() && irq.len() < pool.len() && victims > 0 => format!(
            " ({}'s interrupts are delivered to cpu {}, so the victims take it)",
            d.device,
            cpu_list(&irq)
        ),
        _ => String::new(),
    };
    if said.is_empty() {
        return (
            placed,
            "placement split: every tenant has a cpuset of its own".into(),
        );
    }
    (placed, format!("placement split: {}{why}", said.join("; ")))
}

/// `auto` and the platforms of this build, for error messages.
fn platform_words() -> String {
    let mut words = vec!["auto"];
    words.extend(isobench_platform::platform_names());
    format!("one of {}", words.join(", "))
}
