//! `shell_execute` (spec sections 18/19 `shell_operations`; `docs/sandbox.md`).
//!
//! The command runs with `/bin/sh -c` (or `bash -c` when the caller passes `shell: bash`) in
//! the sandbox's work tree through the launcher
//! ([`crate::sandbox::launcher`]):
//! - in its own PID namespace and cgroup, so it and everything it started die when it exits,
//!   times out, is cancelled or `agents` exits;
//! - with an environment built from nothing ([`step_env`]): `PATH`, `LANG`, `TERM`; `HOME`,
//!   `XDG_CACHE_HOME` and `TMPDIR` in the per-plan directory; the user's toolchain homes
//!   (`RUSTUP_HOME`, `CARGO_HOME`, `PYENV_ROOT`, `NVM_DIR`, `GOPATH`) resolved before `HOME`
//!   is redirected and readable only; `GIT_DIR`/`GIT_WORK_TREE` of the sandbox's private
//!   repository for read-only git; the plan's arguments as `AGENTS_ARG_<NAME>`; and the names
//!   the action's `sandbox: env:` lists;
//! - reading only the system, the toolchains and the sandbox, writing only the work tree, the
//!   per-plan directory and the action's `writable-paths`; with `network: false` in a network
//!   namespace of its own with loopback only;
//! - under the action's `sandbox: limits:` (or the defaults);
//! - with stdout and stderr each capped at [`OUTPUT_CAP`] bytes and secrets redacted.
//!
//! Without Landlock or namespaces the tool is classified unsafe and runs, unconfined, only
//! when the plan allows unsafe tools. What the command changed is found by snapshotting the
//! work tree before and after it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::change::Change;
use super::{Builtin, Capability, ShellSettings, Tool, ToolContext, ToolError, ToolGroup};
pub use crate::domain::action::Interpreter;
use crate::sandbox::checkpoint;
use crate::sandbox::confined::EntryKind;
use crate::sandbox::diff::{self, DiffRequest};
use crate::sandbox::launcher::{self, Finished, Launch, Limits, Policy};

/// Bytes kept from each of stdout and stderr.
pub const OUTPUT_CAP: usize = 256 * 1024;
/// Default timeout in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest timeout accepted, in seconds.
pub const MAX_TIMEOUT_SECS: u64 = 3600;
/// `PATH` when the parent has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The action's `sandbox:` key: how an action widens the shell's defaults.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ShellPolicy {
    /// Extra environment variables passed through by name.
    #[serde(default)]
    pub env: Vec<String>,
    /// Allow TCP connections.
    #[serde(default)]
    pub network: bool,
    /// Extra absolute directories the command may write beneath (relative ones are taken
    /// relative to the sandbox's work tree).
    #[serde(default)]
    pub writable_paths: Vec<PathBuf>,
    /// Resource limits (defaults: [`Limits::default`]).
    #[serde(default)]
    pub limits: Limits,
    /// Extra paths the command may never read (`~/.kube`, `/srv/*/secrets`).
    #[serde(default)]
    pub deny_read: Vec<String>,
    /// Variables set for every command (the plan's arguments as `AGENTS_ARG_<NAME>`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub vars: std::collections::BTreeMap<String, String>,
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
        is_unsafe: !confined_here(network_allowed),
        side_effects,
    }
}

/// Whether shell commands are kernel-confined on this machine (Landlock and namespaces).
pub fn confined_here(_network_allowed: bool) -> bool {
    launcher::probe().confines()
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
    // What the command writes is unknown until the closing snapshot has looked at it.
    let before = checkpoint::before_command(&repo).map_err(|e| ToolError::Failed(e.to_string()))?;

    let settings = ctx.shell;
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.into());
    let program = a
        .shell
        .unwrap_or_default()
        .program(&path)
        .map_err(|m| ToolError::invalid("shell", m))?;
    let work = ctx.sandbox.work_dir().to_path_buf();
    let git = Some((ctx.sandbox.layout.git_dir.clone(), work.clone()));
    let launch = step_launch(
        settings,
        &work,
        git.as_ref().map(|(g, w)| (g.as_path(), w.as_path())),
        work.join(cwd.as_str()),
        &program.to_string_lossy(),
        vec!["-c".into(), a.command.clone().into()],
    );
    // A marker next to the plan's HOME names the running command, so that a driver that
    // takes over after this process died can kill what it left behind ([`kill_orphans`]).
    let confined = confined_here(settings.policy.network);
    let running = if confined {
        launcher::spawn(launch)
    } else {
        // Reached only when the runner allowed unsafe tools.
        launcher::spawn_unconfined(launch)
    }
    .map_err(|e| ToolError::Failed(e.to_string()))?;
    let marker = settings
        .home
        .parent()
        .map(|dir| dir.join(format!("running-{}", running.pid())));
    if let Some(m) = &marker {
        let _ = std::fs::write(m, running.pid().to_string());
    }
    let done = running.wait(timeout, settings.cancel.as_deref());
    if let Some(m) = &marker {
        let _ = std::fs::remove_file(m);
    }
    let Finished {
        stdout,
        stderr,
        stdout_truncated,
        stderr_truncated,
        timed_out,
        cancelled,
        duration,
        ..
    } = &done;
    let duration_ms = duration.as_millis() as u64;

    // Without its own PID namespace, what the command left running may still write.
    let after = checkpoint::after_command(&repo, !confined)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
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
    Ok(json!({
        "exit_code": done.code(),
        "signal": done.signal(),
        "timed_out": timed_out,
        "cancelled": cancelled,
        "confined": confined,
        "stdout": String::from_utf8_lossy(stdout),
        "stderr": String::from_utf8_lossy(stderr),
        "stdout_truncated": stdout_truncated,
        "stderr_truncated": stderr_truncated,
        "duration_ms": duration_ms,
        "files_changed": files.len(),
    }))
}

/// Toolchain homes of the user, resolved from this process's environment before `HOME` is
/// redirected: `(variable, directory)` for each that exists. A standard rustup install
/// (no `RUSTUP_HOME`) gives `RUSTUP_HOME=~/.rustup` and `CARGO_HOME=~/.cargo`.
pub fn toolchain_homes() -> Vec<(&'static str, PathBuf)> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let from = |var: &str, default: Option<&str>| -> Option<PathBuf> {
        match std::env::var_os(var).filter(|v| !v.is_empty()) {
            Some(v) => Some(PathBuf::from(v)),
            None => Some(home.as_ref()?.join(default?)),
        }
    };
    let mut out = Vec::new();
    for (var, default) in [
        ("RUSTUP_HOME", Some(".rustup")),
        ("CARGO_HOME", Some(".cargo")),
        ("PYENV_ROOT", Some(".pyenv")),
        ("NVM_DIR", Some(".nvm")),
        ("GOPATH", Some("go")),
        ("GOMODCACHE", None),
        ("GOROOT", None),
    ] {
        if let Some(dir) = from(var, default).filter(|d| d.is_dir()) {
            out.push((var, dir));
        }
    }
    out
}

/// Caches that tools must write, redirected beneath the per-plan cache directory.
pub const REDIRECTED_CACHES: &[(&str, &str)] = &[
    ("npm_config_cache", "npm"),
    ("GOCACHE", "go-build"),
    ("PIP_CACHE_DIR", "pip"),
    ("YARN_CACHE_FOLDER", "yarn"),
];

/// The environment of a confined step, built from nothing: see the module documentation.
/// `git` is `(private git dir, work tree)` of the sandbox, when it has one.
pub fn step_env(
    settings: &ShellSettings,
    git: Option<(&Path, &Path)>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = Vec::new();
    let mut set = |k: &str, v: OsString| {
        env.retain(|(name, _)| name != k);
        env.push((k.into(), v));
    };
    let mut path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    if let Some(bin) = git.and(git_wrapper(settings)) {
        let mut p = bin.into_os_string();
        p.push(":");
        p.push(&path);
        path = p;
    }
    set("PATH", path);
    set(
        "LANG",
        std::env::var_os("LANG").unwrap_or_else(|| "C.UTF-8".into()),
    );
    if let Some(term) = std::env::var_os("TERM") {
        set("TERM", term);
    }
    set("HOME", settings.home.clone().into());
    set("XDG_CACHE_HOME", settings.cache.clone().into());
    set("TMPDIR", settings.tmp.clone().into());
    for (var, dir) in toolchain_homes() {
        set(var, dir.into());
    }
    for (var, sub) in REDIRECTED_CACHES {
        set(var, settings.cache.join(sub).into());
    }
    if let Some((git_dir, work)) = git {
        set("GIT_DIR", git_dir.into());
        set("GIT_WORK_TREE", work.into());
        set("GIT_CONFIG_NOSYSTEM", "1".into());
        set("GIT_CONFIG_GLOBAL", "/dev/null".into());
        set("GIT_OPTIONAL_LOCKS", "0".into());
        set("GIT_TERMINAL_PROMPT", "0".into());
    }
    for name in &settings.policy.env {
        if let Some(value) = std::env::var_os(name) {
            set(name, value);
        }
    }
    for (name, value) in &settings.policy.vars {
        set(name, value.into());
    }
    env
}

/// The directories a sandbox's git commands read: its private repository and the object
/// directories it borrows through `objects/info/alternates` (the user's `.git/objects`, never
/// the user's `.git/config`).
fn git_readable(git_dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![git_dir.to_path_buf()];
    let alternates =
        std::fs::read_to_string(git_dir.join("objects/info/alternates")).unwrap_or_default();
    for line in alternates
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        out.push(PathBuf::from(line));
    }
    out
}

/// What every confined command may read besides the system: the toolchain homes and every
/// absolute directory on `PATH` (the user's own tools; the deny-list still wins).
pub fn tool_readable() -> Vec<PathBuf> {
    let mut readable: Vec<PathBuf> = toolchain_homes().into_iter().map(|(_, d)| d).collect();
    let path = std::env::var_os("PATH").unwrap_or_else(|| DEFAULT_PATH.into());
    readable.extend(std::env::split_paths(&path).filter(|d| d.is_absolute()));
    readable
}

/// The launch of one confined step command in a sandbox whose work tree is `work`.
pub fn step_launch(
    settings: &ShellSettings,
    work: &Path,
    git: Option<(&Path, &Path)>,
    cwd: PathBuf,
    program: &str,
    args: Vec<OsString>,
) -> Launch {
    let policy = &settings.policy;
    let mut writable = vec![work.to_path_buf(), settings.home.clone()];
    writable.extend(policy.writable_paths.iter().map(|p| {
        if p.is_absolute() {
            p.clone()
        } else {
            work.join(p)
        }
    }));
    let mut readable = tool_readable();
    if let Some(bin) = settings.home.parent() {
        readable.push(bin.join("bin"));
    }
    let mut deny = policy.deny_read.clone();
    if let Some((git_dir, _)) = git {
        for objects in git_readable(git_dir) {
            readable.push(objects.clone());
            // The user's repository configuration may hold credentials.
            if let Some(user_git) = objects.parent().filter(|p| !p.starts_with(git_dir)) {
                deny.push(user_git.join("config").display().to_string());
            }
        }
    }
    Launch {
        program: program.into(),
        args,
        cwd,
        env: step_env(settings, git),
        policy: Policy {
            network: policy.network,
            writable,
            readable,
            deny,
            limits: policy.limits,
        },
        output_cap: OUTPUT_CAP,
        io: launcher::Io::Captured,
        on_line: settings.on_line.clone(),
    }
}

/// Git subcommands that only read (run through the wrapper `git` in a step's `PATH`).
pub const READ_ONLY_GIT: &[&str] = &[
    "status",
    "diff",
    "log",
    "show",
    "ls-files",
    "ls-tree",
    "grep",
    "blame",
    "rev-parse",
    "rev-list",
    "cat-file",
    "describe",
    "shortlog",
    "show-ref",
    "for-each-ref",
    "name-rev",
    "merge-base",
    "diff-tree",
    "diff-files",
    "diff-index",
    "var",
    "version",
    "help",
    "--version",
    "--help",
    "check-ignore",
    "check-attr",
    "whatchanged",
    "count-objects",
];

/// Writes the per-plan `bin/git` wrapper (once) and returns its directory: read-only
/// subcommands run the real git; others are refused with a pointer to checkpoints. The
/// kernel enforces the same (the private repository is not writable by steps).
fn git_wrapper(settings: &ShellSettings) -> Option<PathBuf> {
    let bin = settings.home.parent()?.join("bin");
    let real = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .map(|d| d.join("git"))
        .find(|g| g.is_file() && !g.starts_with(&bin))?;
    let allowed = READ_ONLY_GIT.join("|");
    let script = format!(
        r#"#!/bin/sh
# Read-only git for sandboxed steps (written by agents; see docs/sandbox.md).
sub=""
skip=""
for a in "$@"; do
  if [ -n "$skip" ]; then skip=""; continue; fi
  case "$a" in
    -C|-c|--git-dir|--work-tree|--namespace) skip=1 ;;
    --version|--help) sub="$a"; break ;;
    -*) ;;
    *) sub="$a"; break ;;
  esac
done
case "$sub" in
  {allowed}) exec "{real}" "$@" ;;
  branch|tag|stash|config|remote|worktree|notes)
    for a in "$@"; do case "$a" in --list|-l|--show-current|--get|--get-all|--get-regexp|-v|-vv|-a|-r) exec "{real}" "$@" ;; esac; done ;;
esac
echo "git $sub is refused in a sandboxed step: it would move refs or write the index." >&2
echo "The plan's checkpoints record the sandbox's history; read with git status, diff, log or show." >&2
exit 1
"#,
        real = real.display()
    );
    let path = bin.join("git");
    if std::fs::read_to_string(&path).ok().as_deref() != Some(script.as_str()) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(&bin).ok()?;
        let tmp = bin.join(format!(".git.{}", std::process::id()));
        std::fs::write(&tmp, &script).ok()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).ok()?;
        std::fs::rename(&tmp, &path).ok()?;
    }
    Some(bin)
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
