//! A tenant with an `isobench agent` inside, driven over the agent's connection.
//!
//! Why a module of its own: a run's tenants ([`crate::real`]) and the lone tenant of
//! `isobench probe`/`stress --platform` are made the same way: containment limits filled in
//! for an aggressor where the platform can hold one, the tenant created, the agent started
//! with its log where the transport puts it, greeted, and at the end sent away before its
//! tenant is torn down. [`TenantAgent`] is that path; [`LoneTenant`] adds what a command
//! without a run needs around it (the run guard, the platform, the checks of the limits).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, Result};
use isobench_agent::{AgentClient, Hello};
use isobench_platform::{
    platform, AgentLaunch, AgentProcess, Limits, Platform, PlatformError, PlatformKind,
    PlatformOptions, Role, RunGuard, Tenant, TenantSpec, Transport,
};

use crate::error::SessionError;

/// How long a closing agent may take to exit before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// `limits` as a tenant on `platform` gets them: an aggressive workload on a platform that
/// contains aggressors has its missing containment limits filled with safe defaults (the
/// second value names each one filled in).
pub fn contained(
    platform: &dyn Platform,
    limits: Limits,
    aggressive: bool,
) -> (Limits, Vec<String>) {
    if aggressive && platform.capabilities().contains_aggressors {
        limits.with_safe_defaults(platform.host())
    } else {
        (limits, Vec::new())
    }
}

/// Creates the tenant `spec` describes on `platform`.
pub fn create_tenant(platform: &mut dyn Platform, spec: &TenantSpec) -> Result<Box<dyn Tenant>> {
    platform
        .create_tenant(spec)
        .with_context(|| format!("creating tenant {} on {}", spec.name, platform.kind()))
}

/// A started and greeted agent. Field order is drop order: the client, then the process.
pub struct Agent {
    /// The connection (shared with threads that wait for a probe).
    pub client: Arc<AgentClient>,
    /// The agent's process, or how it is reached.
    pub process: AgentProcess,
    /// The agent's answer to `hello`.
    pub hello: Hello,
}

impl Agent {
    /// Sends the agent away (when no probe thread still holds its client) and waits for its
    /// process to end.
    fn close(self) {
        let Agent {
            client,
            mut process,
            ..
        } = self;
        if let Ok(client) = Arc::try_unwrap(client) {
            let _ = client.bye();
        }
        process.close(CLOSE_GRACE);
    }
}

/// A tenant and the agent inside it. Field order is drop order: the agent goes first.
pub struct TenantAgent {
    agent: Option<Agent>,
    tenant: Box<dyn Tenant>,
    name: String,
    launch: AgentLaunch,
    timeout: Option<Duration>,
}

impl TenantAgent {
    /// `tenant`, named `name`, whose agent is started from `launch` (none runs yet: see
    /// [`TenantAgent::start_agent`]); `timeout` is the agent's default request deadline.
    pub fn new(
        name: &str,
        tenant: Box<dyn Tenant>,
        launch: AgentLaunch,
        timeout: Option<Duration>,
    ) -> TenantAgent {
        TenantAgent {
            agent: None,
            tenant,
            name: name.to_string(),
            launch,
            timeout,
        }
    }

    /// The tenant's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tenant.
    pub fn tenant(&self) -> &dyn Tenant {
        self.tenant.as_ref()
    }

    /// The running agent, if any.
    pub fn agent(&self) -> Option<&Agent> {
        self.agent.as_ref()
    }

    /// Starts the agent in the tenant and greets it.
    pub fn start_agent(&mut self) -> Result<()> {
        let conn = self
            .tenant
            .start_agent(&self.launch)
            .with_context(|| format!("starting the agent in tenant {}", self.name))?;
        let (reader, writer, process) = conn.split();
        let mut client = AgentClient::new(&self.name, reader, writer);
        if let Some(t) = self.timeout {
            client = client.with_timeout(t);
        }
        let hello = client
            .hello()
            .with_context(|| format!("greeting the agent of tenant {}", self.name))?;
        self.agent = Some(Agent {
            client: Arc::new(client),
            process,
            hello,
        });
        Ok(())
    }

    /// Kills the agent and whatever it left in the tenant (stressor workers, a fork bomb's
    /// children), then starts a fresh one.
    pub fn restart_agent(&mut self) -> Result<()> {
        if let Some(mut a) = self.agent.take() {
            a.process.kill();
        }
        let _ = self.tenant.killer().kill();
        self.start_agent()
    }

    /// Sends the agent away and tears the tenant down.
    pub fn teardown(&mut self) -> Result<()> {
        if let Some(a) = self.agent.take() {
            a.close();
        }
        self.tenant.teardown()
    }
}

/// What a command asks for its lone tenant, validated.
#[derive(Debug, Clone)]
pub struct TenantRequest {
    /// The platform.
    pub kind: PlatformKind,
    /// The limits asked for (checked against the host when the tenant is opened).
    pub limits: Limits,
}

/// The only tenant of a run of its own, with its agent. Field order is drop order: the agent
/// and tenant go first, then the platform, and last the run guard that removes whatever is
/// left.
pub struct LoneTenant {
    inner: TenantAgent,
    platform: Box<dyn Platform>,
    guard: RunGuard,
    /// Containment limits filled in for an aggressive workload, for the record.
    pub filled: Vec<String>,
}

impl LoneTenant {
    /// Starts a run (sweeping what dead runs left), creates the tenant `name` on `req.kind`
    /// and starts the agent in it. `on_run` is called once the run exists, before anything
    /// is created in it (to arrange for the run's removal on Ctrl-C, to report the sweep).
    ///
    /// `aggressive`: the workload is a fork bomb, memory hog or disk flood, so on a platform
    /// that contains aggressors the missing containment limits are filled with safe
    /// defaults. `deadline`: the tenant's watchdog kills it after this long.
    ///
    /// Errors: [`SessionError::Unsupported`] when the platform cannot run here,
    /// [`SessionError::BadInput`] when the limits do not fit the host.
    pub fn open(
        req: &TenantRequest,
        name: &str,
        role: Role,
        aggressive: bool,
        deadline: Option<Duration>,
        on_run: impl FnOnce(&RunGuard) -> Result<()>,
    ) -> Result<LoneTenant, SessionError> {
        let guard = RunGuard::start()
            .context("starting a run")
            .map_err(SessionError::Other)?;
        on_run(&guard).map_err(SessionError::Other)?;
        let mut platform =
            platform(req.kind, PlatformOptions::new(guard.context())).map_err(|e| {
                match e.downcast_ref::<PlatformError>() {
                    Some(pe) => SessionError::Unsupported(pe.to_string()),
                    None => SessionError::Other(e),
                }
            })?;
        req.limits
            .validate(platform.host())
            .map_err(|e| SessionError::BadInput(e.to_string()))?;
        let (limits, filled) = contained(platform.as_ref(), req.limits.clone(), aggressive);
        let mut spec = TenantSpec::new(name, role).with_limits(limits);
        if let Some(d) = deadline {
            spec = spec.with_deadline(d);
        }
        let inner = Self::start(platform.as_mut(), &spec, req.kind).map_err(SessionError::Other)?;
        Ok(LoneTenant {
            inner,
            platform,
            guard,
            filled,
        })
    }

    /// Creates the tenant and starts its agent, whose complaints go where this process's
    /// do (a guest's console, its kernel's messages, to a file in its workdir).
    fn start(
        platform: &mut dyn Platform,
        spec: &TenantSpec,
        kind: PlatformKind,
    ) -> Result<TenantAgent> {
        let tenant = create_tenant(platform, spec)?;
        let launch = AgentLaunch {
            exe: std::env::current_exe().context("locating the isobench binary")?,
            log: if kind.capabilities().agent == Transport::Stdio {
                PathBuf::from("/dev/stderr")
            } else {
                tenant.workdir().join("console.log")
            },
        };
        let mut inner = TenantAgent::new(&spec.name, tenant, launch, None);
        inner.start_agent()?;
        Ok(inner)
    }

    /// The tenant.
    pub fn tenant(&self) -> &dyn Tenant {
        self.inner.tenant()
    }

    /// The agent's connection.
    pub fn client(&self) -> &AgentClient {
        &self
            .inner
            .agent()
            .expect("a lone tenant's agent runs until it is closed")
            .client
    }

    /// Sends the agent away, tears the tenant and the platform down and removes the run's
    /// objects; what could not be removed is logged.
    pub fn close(self) -> Result<()> {
        let LoneTenant {
            mut inner,
            mut platform,
            guard,
            ..
        } = self;
        inner.teardown()?;
        platform.teardown()?;
        let report = guard.finish();
        for f in &report.failed {
            tracing::warn!("could not remove {f}");
        }
        Ok(())
    }
}
