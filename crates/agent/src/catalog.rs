//! What an agent can run: probes, stressors and network services.
//!
//! The agent looks workloads up here rather than in the workload tables directly, so tests
//! (and, later, restricted agents) can hand it a different set. [`Catalog::builtin`] is the
//! real one: every entry of [`PROBES`] and [`STRESSORS`] plus the network services.

use std::fmt;
use std::sync::Arc;

use isobench_workloads::{Probe, Stressor, PROBES, STRESSORS};

pub use crate::service::{RunningService, ServiceError, ServiceStarter};

/// The workloads an agent offers.
#[derive(Clone)]
pub struct Catalog {
    probes: Vec<&'static dyn Probe>,
    stressors: Vec<&'static dyn Stressor>,
    services: Option<Arc<dyn ServiceStarter>>,
}

impl fmt::Debug for Catalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Catalog")
            .field("probes", &self.probe_names())
            .field("stressors", &self.stressor_names())
            .field("services", &self.service_kinds())
            .finish()
    }
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog::builtin()
    }
}

impl Catalog {
    /// Every probe and stressor of the workload tables, and the built-in network services.
    pub fn builtin() -> Self {
        Catalog {
            probes: PROBES.to_vec(),
            stressors: STRESSORS.to_vec(),
            services: crate::services::builtin(),
        }
    }

    /// Nothing at all.
    pub fn empty() -> Self {
        Catalog {
            probes: Vec::new(),
            stressors: Vec::new(),
            services: None,
        }
    }

    /// Adds a probe, replacing one of the same name.
    pub fn with_probe(mut self, p: &'static dyn Probe) -> Self {
        self.probes.retain(|q| q.name() != p.name());
        self.probes.push(p);
        self
    }

    /// Adds a stressor, replacing one of the same name.
    pub fn with_stressor(mut self, s: &'static dyn Stressor) -> Self {
        self.stressors.retain(|q| q.name() != s.name());
        self.stressors.push(s);
        self
    }

    /// Replaces the network services.
    pub fn with_services(mut self, s: Arc<dyn ServiceStarter>) -> Self {
        self.services = Some(s);
        self
    }

    /// Finds a probe.
    pub fn probe(&self, name: &str) -> Option<&'static dyn Probe> {
        self.probes.iter().copied().find(|p| p.name() == name)
    }

    /// Finds a stressor.
    pub fn stressor(&self, name: &str) -> Option<&'static dyn Stressor> {
        self.stressors.iter().copied().find(|s| s.name() == name)
    }

    /// Probe names, in catalogue order.
    pub fn probe_names(&self) -> Vec<&'static str> {
        self.probes.iter().map(|p| p.name()).collect()
    }

    /// Stressor names, in catalogue order.
    pub fn stressor_names(&self) -> Vec<&'static str> {
        self.stressors.iter().map(|s| s.name()).collect()
    }

    /// Service kinds `start_service` accepts.
    pub fn service_kinds(&self) -> Vec<String> {
        self.services.as_ref().map_or_else(Vec::new, |s| s.kinds())
    }

    /// The service starter, when there is one.
    pub fn services(&self) -> Option<&Arc<dyn ServiceStarter>> {
        self.services.as_ref()
    }
}
