//! Kernel confinement of shell commands with Landlock (`shell_execute`).
//!
//! A confined command is spawned from a short-lived thread that first restricts itself with a
//! Landlock ruleset; the child inherits the thread's domain at fork, and no `unsafe`
//! `pre_exec` hook is needed. The ruleset handles every filesystem right of ABI 7 and allows:
//! reading and executing everywhere, writing only beneath the given writable directories
//! (the sandbox's work tree, the per-plan home and the action's `writable-paths`) and to
//! `/dev/null`. Unless the action allows network, binding and connecting TCP sockets is denied
//! (ABI 4; Landlock does not cover UDP, hence "TCP only"). From ABI 6 the command may neither
//! signal processes outside its domain nor connect to abstract UNIX sockets created outside it.
//! `no_new_privs` is set, so set-uid programs cannot regain privileges.

use std::fmt;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
    RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use serde::Serialize;

/// The ABI this code is written and tested against.
pub const TARGET_ABI: ABI = ABI::V7;

/// What the kernel can enforce here.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// Landlock ABI version of the running kernel (0 when unavailable).
    pub abi: u8,
    /// Filesystem writes are confined.
    pub filesystem: bool,
    /// TCP bind/connect can be denied (ABI >= 4).
    pub tcp: bool,
    /// Signals and abstract UNIX sockets are scoped (ABI >= 6).
    pub scopes: bool,
    /// Why Landlock is unavailable, when it is.
    pub reason: Option<String>,
}

impl Probe {
    /// Whether shell commands are confined well enough to be classified safe: filesystem
    /// writes confined, and TCP denied (or not needed because the action allows network).
    pub fn enforced(&self, network_allowed: bool) -> bool {
        self.filesystem && (self.tcp || network_allowed)
    }

    /// The line `agents diagnostics` prints: `landlock: enforced (ABI 7; reads and writes, ...)`.
    pub fn describe(&self) -> String {
        if !self.filesystem {
            return format!(
                "landlock: unavailable ({}); shell_execute is classified unsafe",
                self.reason.as_deref().unwrap_or("not supported")
            );
        }
        if !self.tcp {
            return format!(
                "landlock: filesystem only (ABI {}; no network restriction); shell_execute is classified unsafe unless the action allows network",
                self.abi
            );
        }
        format!(
            "landlock: enforced (ABI {}; reads and writes{})",
            self.abi,
            if self.scopes {
                ", signals and abstract sockets scoped"
            } else {
                ""
            }
        )
    }
}

impl fmt::Display for Probe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

fn abi_number(abi: ABI) -> u8 {
    match abi {
        ABI::Unsupported => 0,
        ABI::V1 => 1,
        ABI::V2 => 2,
        ABI::V3 => 3,
        ABI::V4 => 4,
        ABI::V5 => 5,
        ABI::V6 => 6,
        ABI::V7 => 7,
        _ => 8,
    }
}

/// Probes Landlock once per process by restricting a throwaway thread (the rest of the
/// process is not affected).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        let outcome = std::thread::spawn(|| -> Result<(RulesetStatus, LandlockStatus), String> {
            let status = Ruleset::default()
                .set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(TARGET_ABI))
                .map_err(|e| e.to_string())?
                .create()
                .map_err(|e| e.to_string())?
                .restrict_self()
                .map_err(|e| e.to_string())?;
            Ok((status.ruleset, status.landlock))
        })
        .join();
        match outcome {
            Ok(Ok((ruleset, LandlockStatus::Available { effective_abi, .. })))
                if ruleset != RulesetStatus::NotEnforced =>
            {
                let abi = abi_number(effective_abi);
                Probe {
                    abi,
                    filesystem: abi >= 1,
                    tcp: abi >= 4,
                    scopes: abi >= 6,
                    reason: None,
                }
            }
            Ok(Ok((_, status))) => Probe {
                abi: 0,
                filesystem: false,
                tcp: false,
                scopes: false,
                reason: Some(match status {
                    LandlockStatus::NotEnabled => {
                        "Landlock is built in but not enabled at boot".into()
                    }
                    LandlockStatus::NotImplemented => "the kernel has no Landlock support".into(),
                    LandlockStatus::Available { .. } => "the ruleset was not enforced".into(),
                }),
            },
            Ok(Err(e)) => Probe {
                abi: 0,
                filesystem: false,
                tcp: false,
                scopes: false,
                reason: Some(e),
            },
            Err(_) => Probe {
                abi: 0,
                filesystem: false,
                tcp: false,
                scopes: false,
                reason: Some("the probe thread panicked".into()),
            },
        }
    })
}

/// What a confined command may do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// Directories the command may write beneath (missing ones are skipped).
    pub writable: Vec<PathBuf>,
    /// Whether TCP bind/connect is allowed.
    pub allow_network: bool,
}

/// Why a confined command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ConfineError {
    /// The ruleset could not be built or applied.
    #[error("cannot apply the Landlock ruleset: {0}")]
    Landlock(String),
    /// The kernel did not enforce the ruleset.
    #[error("Landlock is not enforced on this system: {0}")]
    NotEnforced(String),
    /// The process could not be started.
    #[error("cannot start the command: {0}")]
    Spawn(#[from] std::io::Error),
}

/// Spawns `command` inside a Landlock domain built from `confinement`. Refuses to start it
/// when the kernel does not enforce the filesystem rules, or the network rules when network
/// is not allowed.
///
/// # Errors
/// [`ConfineError`].
pub fn spawn(mut command: Command, confinement: &Confinement) -> Result<Child, ConfineError> {
    let probe = probe();
    if !probe.enforced(confinement.allow_network) {
        return Err(ConfineError::NotEnforced(probe.describe()));
    }
    let confinement = confinement.clone();
    std::thread::spawn(move || -> Result<Child, ConfineError> {
        let err = |e: landlock::RulesetError| ConfineError::Landlock(e.to_string());
        let abi = TARGET_ABI;
        let mut ruleset = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))
            .map_err(err)?;
        if !confinement.allow_network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(err)?;
        }
        if probe.scopes {
            ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
        }
        let status = ruleset
            .create()
            .map_err(err)?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
            .map_err(err)?
            .add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_file(abi)))
            .map_err(err)?
            .add_rules(path_beneath_rules(
                &confinement.writable,
                AccessFs::from_all(abi),
            ))
            .map_err(err)?
            .restrict_self()
            .map_err(err)?;
        if status.ruleset == RulesetStatus::NotEnforced {
            return Err(ConfineError::NotEnforced(
                "the kernel accepted no part of the ruleset".into(),
            ));
        }
        Ok(command.spawn()?)
    })
    .join()
    .map_err(|_| ConfineError::Landlock("the confinement thread panicked".into()))?
}
