//! The built-in network services: the server halves of the network probes from
//! [`isobench_workloads::netserve`], so a probe in one tenant can measure the path to a
//! server in another.

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use isobench_workloads::netserve::{
    start_server_with, ServerHandle, ServerKind, ServerOptions, ServerStats, KIND_NAMES,
};

use crate::service::{RunningService, ServiceError, ServiceStarter};

/// The services of the workloads crate.
pub(crate) fn builtin() -> Option<Arc<dyn ServiceStarter>> {
    Some(Arc::new(NetServe))
}

/// Starts [`isobench_workloads::netserve`] servers. Kinds are written as that module parses
/// them: `udp-echo`, `tcp-echo`, `tcp-sink`, `udp-sink`, `http[:<body size>]`,
/// `relay-forwarder:<ip:port>`.
pub struct NetServe;

impl ServiceStarter for NetServe {
    fn kinds(&self) -> Vec<String> {
        KIND_NAMES.iter().map(|s| s.to_string()).collect()
    }

    fn start(
        &self,
        kind: &str,
        bind: &str,
        pin: Option<usize>,
    ) -> Result<Box<dyn RunningService>, ServiceError> {
        let kind: ServerKind = kind.parse().map_err(ServiceError::Invalid)?;
        let bind: SocketAddr = bind.trim().parse().map_err(|_| {
            ServiceError::Invalid(format!(
                "bind address `{bind}` is not ip:port (for example 0.0.0.0:0 for any free port)"
            ))
        })?;
        let opts = ServerOptions {
            pin,
            ..ServerOptions::default()
        };
        let handle = start_server_with(kind, bind, Arc::new(AtomicBool::new(false)), opts)
            .map_err(|e| ServiceError::Failed(e.to_string()))?;
        Ok(Box::new(Served(handle)))
    }
}

struct Served(ServerHandle);

impl RunningService for Served {
    fn addr(&self) -> String {
        self.0.local_addr().to_string()
    }

    fn stop(self: Box<Self>) -> Result<ServerStats, String> {
        self.0.stop().map_err(|e| e.to_string())
    }
}
