//! Configuration errors of the platform layer: each names the value and the fix.

use thiserror::Error;

use crate::limits::Limits;

/// A platform or tenant that cannot be set up as asked. Nothing has been created when one of
/// these is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlatformError {
    /// A platform name that isobench does not know.
    #[error(
        "unknown platform `{name}`{}; available platforms: host, cgroup",
        match suggestion { Some(s) => format!(" (did you mean `{s}`?)"), None => String::new() }
    )]
    UnknownPlatform {
        /// The name as written.
        name: String,
        /// The nearest known platform.
        suggestion: Option<&'static str>,
    },
    /// A platform that is known but cannot work on this host (or in this build).
    #[error("platform `{kind}` is not available here: {why}; {fix}")]
    Unavailable {
        /// The platform.
        kind: String,
        /// Why not.
        why: String,
        /// What to do.
        fix: String,
    },
    /// A limit whose cgroup controller is missing.
    #[error("limit `{key}` needs the cgroup controller `{controller}`, which is not available ({detail}); {fix}")]
    MissingController {
        /// The limit key.
        key: &'static str,
        /// The controller.
        controller: String,
        /// What is available.
        detail: String,
        /// What to do.
        fix: String,
    },
    /// A limit the platform cannot enforce.
    #[error("limit `{key}` cannot be enforced by the `{platform}` platform ({why}); remove it or use {fix}")]
    NotEnforceable {
        /// The limit key.
        key: &'static str,
        /// The platform.
        platform: &'static str,
        /// Why.
        why: &'static str,
        /// The alternative.
        fix: &'static str,
    },
    /// A limit the platform cannot enforce per tenant, for a reason known only at run time.
    #[error("limit `{key}` cannot be enforced by the `{platform}` platform ({why}); {fix}")]
    Refused {
        /// The limit key.
        key: &'static str,
        /// The platform.
        platform: &'static str,
        /// Why.
        why: String,
        /// What to do.
        fix: String,
    },
    /// A network rate for a tenant without its own network namespace.
    #[error("limit `{key}` shapes the tenant's own network namespace, but the tenant has none; give the tenant a network or remove `{key}`")]
    NetLimitWithoutNetwork {
        /// The limit key.
        key: &'static str,
    },
    /// io limits on a workdir without a block device.
    #[error("io limits apply to the block device of the tenant's workdir {path}, but {why}; choose a workdir on a disk (e.g. /var/tmp) or remove the io limits")]
    NoBlockDevice {
        /// The workdir.
        path: String,
        /// Why it has no device.
        why: String,
    },
    /// A tenant name unfit for cgroup, netns and file names.
    #[error("tenant name `{name}` is invalid: {why}; use 1 to 40 letters, digits, `_` or `-`, e.g. `victim`")]
    BadTenantName {
        /// The name.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
    /// Two tenants with the same name in one run.
    #[error("a tenant named `{name}` already exists in this run; give each tenant its own name")]
    DuplicateTenant {
        /// The name.
        name: String,
    },
    /// A run id that is not 8 lowercase hex digits.
    #[error("run id `{id}` is invalid: a run id is 8 lowercase hex digits, e.g. `1f2e3d4c`")]
    BadRunId {
        /// The id.
        id: String,
    },
}

impl PlatformError {
    /// Refuses the first limit of `table` (`(key, why)`, in order) that `limits` sets, as
    /// one the `platform` cannot enforce, to be done with `fix` instead.
    pub(crate) fn refuse_set(
        limits: &Limits,
        platform: &'static str,
        fix: &'static str,
        table: &[(&'static str, &'static str)],
    ) -> Result<(), PlatformError> {
        let set = limits.keys_set();
        match table.iter().find(|(key, _)| set.contains(key)) {
            Some(&(key, why)) => Err(PlatformError::NotEnforceable {
                key,
                platform,
                why,
                fix,
            }),
            None => Ok(()),
        }
    }
}
