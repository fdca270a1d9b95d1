//! `shell_execute` (spec sections 18/19 `shell_operations`; issue 4).
//!
//! The command runs with `/bin/sh -c` (or `bash -c` when the caller passes `shell: bash`) in
//! the sandbox's work tree:
//! - in its own process group, killed as a whole (SIGKILL) when the timeout passes and again
//!   after the command exits, so no background process outlives the call;
//! - with a scrubbed environment: `PATH`, `LANG` and `TERM` are kept; `HOME`,
//!   `XDG_CACHE_HOME` and `TMPDIR` point into the per-plan directory; everything else, API
//!   keys included, is dropped unless the action's `sandbox: env:` names it; the plan's
//!   arguments are set as `AGENTS_ARG_<NAME>`;
//! - confined by Landlock ([`crate::engine::sandbox::landlock`]) to writing in the work tree,
//!   the per-plan directory and the action's `writable-paths`, without TCP unless the action
//!   allows network. Without Landlock the tool is classified unsafe and runs only when the
//!   plan allows unsafe tools;
//! - with stdout and stderr each capped at [`OUTPUT_CAP`] bytes (the rest is read and dropped).
//!
//! What the command changed is found by snapshotting the work tree before and after it.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::change::Change;
use super::{Builtin, Capability, Tool, ToolContext, ToolError, ToolGroup};
use crate::engine::sandbox::checkpoint::snapshot;
use crate::engine::sandbox::confined::EntryKind;
use crate::engine::sandbox::diff::{self, DiffRequest};
use crate::engine::sandbox::landlock::{self, Confinement};

/// Bytes kept from each of stdout and stderr.
pub const OUTPUT_CAP: usize = 256 * 1024;
/// Default timeout in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest timeout accepted, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// `PATH` when the parent has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The action's `sandbox:` key: how an action widens the shell's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ShellPolicy {
    /// Extra environment variables passed through by name.
    #[serde(default)]
    pub env: Vec<String>,
    /// Allow TCP connections.
    #[serde(default)]
    pub network: bool,
    /// Extra absolute directories the command may write beneath.
    #[serde(default)]
    pub writable_paths: Vec<PathBuf>,
    /// Variables set for every command (the plan's arguments as `AGENTS_ARG_<NAME>`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vars: std::collections::BTreeMap<String, String>,
}

/// The interpreter of a command (`shell:` of an action or a `run:` step, `shell` of
/// `shell_execute`): `sh` is `/bin/sh` (the default), `bash` is the first `bash` on `PATH`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Interpreter {
    /// `/bin/sh -c COMMAND` (POSIX shell; dash on Debian and Ubuntu).
    #[default]
    Sh,
    /// `bash -c COMMAND` (arrays, `[[ ]]`, `set -o pipefail`, ...).
    Bash,
}

impl Interpreter {
    /// The lowercase name.
    pub fn as_str(self) -> &'static str {
        match self {
            Interpreter::Sh => "sh",
            Interpreter::Bash => "bash",
        }
    }

    /// The program to run: `/bin/sh`, or `bash` found on `path` (a `PATH` value).
    ///
    /// # Errors
    /// A message when `bash` is not installed.
    pub fn program(self, path: &str) -> Result<PathBuf, String> {
        match self {
            Interpreter::Sh => Ok(PathBuf::from("/bin/sh")),
            Interpreter::Bash => std::env::split_paths(path)
                .map(|d| d.join("bash"))
                .find(|p| p.is_file())
                .ok_or_else(|| {
                    format!("`shell: bash` needs bash, and no bash is on PATH ({path}); install bash or use `shell: sh`")
                }),
        }
    }
}

/// Arguments of `shell_execute`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShellExecute {
    /// Shell command line, run with `/bin/sh -c` (or `bash -c` with `shell: bash`).
    #[schemars(length(min = 1))]
    pub command: String,
    /// The interpreter: `sh` (default, `/bin/sh`) or `bash`.
    #[serde(default)]
    pub shell: Option<Interpreter>,
    /// Seconds before the whole process group is killed (default 120, at most 3600).
    #[serde(default)]
    #[schemars(range(min = 1, max = 3600))]
    pub timeout_secs: Option<u64>,
    /// Working directory relative to the resource root (default: the root).
    #[serde(default)]
    pub cwd: Option<String>,
}

/// The shell tool's capability: writes, checkpointable by snapshot; unsafe when the kernel
/// cannot confine it.
pub fn capability(network_allowed: bool) -> Capability {
    let mut side_effects = vec!["process_execution"];
    if network_allowed {
        side_effects.push("network");
    }
    Capability {
        read_only: false,
        writes: true,
        checkpointable: true,
        checkpoint_scope: Some("snapshot"),
        idempotent: false,
        is_unsafe: !landlock::probe().enforced(network_allowed),
        side_effects,
    }
}

/// A buffer that keeps the first `cap` bytes of a stream and counts the rest.
fn drain(mut stream: impl Read + Send + 'static, tx: mpsc::Sender<(Vec<u8>, bool)>) {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let mut truncated = false;
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = OUTPUT_CAP.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    truncated |= n > room;
                }
            }
        }
        let _ = tx.send((kept, truncated));
    });
}

fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

/// Kills the process groups that shell commands of a plan left running when their driver died
/// (`kill -9`): each `running-<pid>` marker in `plan_dir` names a group; it is killed only
/// if a process of that group still works inside `plan_dir`. Returns the groups killed.
pub fn kill_orphans(plan_dir: &std::path::Path) -> Vec<u32> {
    let mut killed = Vec::new();
    let canonical = std::fs::canonicalize(plan_dir).unwrap_or_else(|_| plan_dir.to_path_buf());
    let plan_dir = canonical.as_path();
    let Ok(entries) = std::fs::read_dir(plan_dir) else {
        return killed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pgid) = name
            .strip_prefix("running-")
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let in_plan = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|p| p.file_name().to_str().and_then(|n| n.parse::<u32>().ok()))
            .any(|pid| {
                let group = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .ok()
                    .and_then(|st| {
                        st.rsplit_once(')').and_then(|(_, rest)| {
                            rest.split_whitespace().nth(2)?.parse::<u32>().ok()
                        })
                    });
                group == Some(pgid)
                    && std::fs::read_link(format!("/proc/{pid}/cwd"))
                        .is_ok_and(|cwd| cwd.starts_with(plan_dir))
            });
        if in_plan {
            kill_group(pgid);
            killed.push(pgid);
        }
        let _ = std::fs::remove_file(entry.path());
    }
    killed
}

fn shell_execute(ctx: &mut ToolContext<'_>, a: ShellExecute) -> Result<Value, ToolError> {
    let timeout = Duration::from_secs(
        a.timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(MAX_TIMEOUT_SECS),
    );
    let cwd = ctx.fs.check(a.cwd.as_deref().unwrap_or("."), true)?;
    match ctx.fs.meta(&cwd)? {
        Some(m) if m.kind == EntryKind::Directory => {}
        _ => {
            return Err(ToolError::invalid(
                "cwd",
                format!("{} is not a directory in the sandbox", cwd.display()),
            ));
        }
    }
    let repo = ctx
        .sandbox
        .repo()
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let before = snapshot(&repo).map_err(|e| ToolError::Failed(e.to_string()))?;

    let settings = ctx.shell;
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into());
    let program = a
        .shell
        .unwrap_or_default()
        .program(&path)
        .map_err(|m| ToolError::invalid("shell", m))?;
    let mut command = Command::new(&program);
    command
        .arg("-c")
        .arg(&a.command)
        .current_dir(ctx.sandbox.work_dir().join(cwd.as_str()))
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into()),
        )
        .env(
            "LANG",
            std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
        )
        .env("HOME", &settings.home)
        .env("XDG_CACHE_HOME", &settings.cache)
        .env("TMPDIR", &settings.tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(term) = std::env::var("TERM") {
        command.env("TERM", term);
    }
    for name in &settings.policy.env {
        if let Ok(value) = std::env::var(name) {
            command.env(name, value);
        }
    }
    command.envs(&settings.policy.vars);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let confined = landlock::probe().enforced(settings.policy.network);
    let started = Instant::now();
    let mut child = if confined {
        let mut writable = vec![ctx.sandbox.work_dir().to_path_buf(), settings.home.clone()];
        writable.extend(settings.policy.writable_paths.iter().cloned());
        landlock::spawn(
            command,
            &Confinement {
                writable,
                allow_network: settings.policy.network,
            },
        )
        .map_err(|e| ToolError::Failed(e.to_string()))?
    } else {
        // Reached only when the runner allowed unsafe tools.
        command
            .spawn()
            .map_err(|e| ToolError::Failed(format!("cannot start {}: {e}", program.display())))?
    };
    let pid = child.id();
    // A marker next to the plan's HOME names the running process group, so that a driver
    // that takes over after this process died can kill what it left behind
    // ([`kill_orphans`]).
    let marker = settings
        .home
        .parent()
        .map(|dir| dir.join(format!("running-{pid}")));
    if let Some(m) = &marker {
        let _ = std::fs::write(m, pid.to_string());
    }
    let (out_tx, out_rx) = mpsc::channel();
    let (err_tx, err_rx) = mpsc::channel();
    drain(child.stdout.take().expect("stdout is piped"), out_tx);
    drain(child.stderr.take().expect("stderr is piped"), err_tx);
    // Wait without reaping (WNOWAIT): while the leader is an unreaped zombie its process
    // group id cannot be reused, so killing the group can never hit an unrelated process.
    let leader = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    let mut timed_out = false;
    let mut cancelled = false;
    loop {
        let exited = match leader {
            Some(p) => rustix::process::waitid(
                rustix::process::WaitId::Pid(p),
                rustix::process::WaitIdOptions::EXITED
                    | rustix::process::WaitIdOptions::NOWAIT
                    | rustix::process::WaitIdOptions::NOHANG,
            )
            .map(|s| s.is_some())
            .unwrap_or(true),
            None => true,
        };
        if exited {
            break;
        }
        if started.elapsed() >= timeout {
            timed_out = true;
            break;
        }
        if ctx
            .shell
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst))
        {
            cancelled = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // The whole group dies: on timeout, and after a normal exit so that background
    // processes do not outlive the call. Only then is the leader reaped.
    kill_group(pid);
    let status = child.wait().ok();
    if let Some(m) = &marker {
        let _ = std::fs::remove_file(m);
    }
    let grace = Duration::from_secs(2);
    let (stdout, stdout_truncated) = out_rx.recv_timeout(grace).unwrap_or_default();
    let (stderr, stderr_truncated) = err_rx.recv_timeout(grace).unwrap_or_default();
    let duration_ms = started.elapsed().as_millis() as u64;

    let after = snapshot(&repo).map_err(|e| ToolError::Failed(e.to_string()))?;
    let files = diff::trees(&repo, Some(before), Some(after), &DiffRequest::default())
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let blob = |oid: Option<git2::Oid>| {
        oid.and_then(|o| repo.find_blob(o).ok())
            .map(|b| b.content().to_vec())
    };
    let old_tree = repo
        .find_tree(before)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let new_tree = repo
        .find_tree(after)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    let entry = |tree: &git2::Tree<'_>, path: &str| {
        tree.get_path(std::path::Path::new(path))
            .ok()
            .map(|e| e.id())
    };
    for f in &files {
        let old_path = f.old_path.as_deref().unwrap_or(&f.path);
        let old = blob(entry(&old_tree, old_path));
        let new = blob(entry(&new_tree, &f.path));
        ctx.record(Change::from_diff(f, old.as_deref(), new.as_deref()));
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(json!({
        "exit_code": status.and_then(|s| s.code()),
        "signal": status.and_then(|s| s.signal()),
        "timed_out": timed_out,
        "cancelled": cancelled,
        "confined": confined,
        "stdout": String::from_utf8_lossy(&stdout),
        "stderr": String::from_utf8_lossy(&stderr),
        "stdout_truncated": stdout_truncated,
        "stderr_truncated": stderr_truncated,
        "duration_ms": duration_ms,
        "files_changed": files.len(),
    }))
}

/// The shell tool.
pub fn tool() -> Box<dyn Tool> {
    Box::new(Builtin::<ShellExecute>::new(
        "shell_execute",
        "Run a shell command in the sandbox (kernel-confined, timeout, scrubbed environment)",
        ToolGroup::ShellOperations,
        || capability(false),
        &["cwd"],
        shell_execute,
    ))
}
