//! Command tools (spec section 18 "Adapter-Specific Execution", custom source) and the one
//! place where tools start processes: [`spawn_confined`], through the confined launcher
//! ([`crate::sandbox::launcher`]: namespaces, Landlock, cgroup and rlimits, output capped and
//! secrets redacted).
//!
//! A command tool runs in the plan's sandbox work tree:
//! - `command:` is a command line; each `{{ name }}` placeholder becomes the argument's value,
//!   shell-quoted (arrays: each element quoted, space-separated; objects: their JSON), and the
//!   line runs with `/bin/sh -c`. `code:` is a script run with `/bin/sh -c` as it is.
//! - The arguments are also written to stdin as one JSON object.
//! - The environment is scrubbed as for `shell_execute`: `PATH`, `LANG`, a per-plan `HOME`,
//!   `XDG_CACHE_HOME` and `TMPDIR`, plus the variables the tool names in `env`.
//! - Writes are confined to the work tree and the per-plan directory; reads to the system,
//!   the toolchains and `PATH`, the tool's own folder and the writable paths, minus the
//!   deny-list; the network is a private namespace unless the action allows network.
//! - The result is stdout parsed as JSON, or as text when it is not JSON; a non-zero exit
//!   is a tool error carrying the exit code and stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use serde_json::{Value, json};

use super::ToolError;
use crate::sandbox::launcher::{self, Io, Limits, Running};

/// Bytes kept of stdout and of stderr.
pub const OUTPUT_CAP: usize = 256 * 1024;
/// Default timeout of a command tool, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;

/// A process to start confined: program, arguments, working directory, the only environment
/// it gets, and where it may write.
#[derive(Debug, Clone, Default)]
pub struct Launch {
    /// The program (looked up on `PATH` when not absolute).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Working directory (the sandbox's work tree).
    pub cwd: PathBuf,
    /// The complete environment.
    pub env: Vec<(String, String)>,
    /// Directories it may write beneath.
    pub writable: Vec<PathBuf>,
    /// Directories it may read beneath besides the system, the toolchains, `PATH` and the
    /// writable ones (the tool's own folder, a server's code).
    pub readable: Vec<PathBuf>,
    /// Paths never readable besides the built-in deny-list (the action's `deny-read`).
    pub deny: Vec<String>,
    /// Resource limits (the action's).
    pub limits: Limits,
    /// The host network (else a private network namespace with only loopback).
    pub network: bool,
    /// Start it even where the kernel cannot confine it (the plan allows unsafe tools).
    pub allow_unconfined: bool,
}

/// Starts `launch` through the confined launcher with `io` (arguments on stdin for command
/// tools, interactive pipes for stdio MCP servers). This is the single place command tools
/// and stdio MCP servers are started. Where the kernel cannot confine it, it starts
/// unconfined (still with only its environment, killed as a whole) only when
/// `allow_unconfined`.
///
/// # Errors
/// A message when it cannot be confined (and unconfined starts are not allowed) or cannot
/// be started.
pub fn spawn_confined(launch: &Launch, io: Io) -> Result<Running, String> {
    let mut readable = launch.readable.clone();
    readable.extend(super::shell::tool_readable());
    let confined = launcher::probe().confines();
    let l = launcher::Launch {
        program: PathBuf::from(&launch.program),
        args: launch.args.iter().map(Into::into).collect(),
        cwd: launch.cwd.clone(),
        env: launch
            .env
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
        policy: launcher::Policy {
            network: launch.network,
            writable: launch.writable.clone(),
            readable,
            deny: launch.deny.clone(),
            limits: launch.limits,
        },
        output_cap: OUTPUT_CAP,
        on_line: None,
        io,
    };
    if confined {
        launcher::spawn(l).map_err(|e| format!("{}: {e}", launch.program))
    } else if launch.allow_unconfined {
        launcher::spawn_unconfined(l).map_err(|e| e.to_string())
    } else {
        Err(format!(
            "{} cannot be confined here ({}) and the plan's automation profile sets allow_unsafe_tools = false",
            launch.program,
            launcher::probe().describe().join("; ")
        ))
    }
}

/// Whether processes started by [`spawn_confined`] are confined by the kernel here
/// (Landlock and namespaces; else command tools are classified unsafe).
pub fn confined(_network: bool) -> bool {
    launcher::probe().confines()
}

fn placeholder_re() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| regex::Regex::new(r"\{\{\s*([^}]*?)\s*\}\}").expect("valid regex"))
}

/// The argument names a command line's placeholders use, in order.
///
/// # Errors
/// A placeholder that is not a plain argument name.
pub fn placeholders(line: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for c in placeholder_re().captures_iter(line) {
        let name = c[1].to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|ch| ch.is_ascii_alphanumeric() || ch == '_' || ch == '-')
        {
            return Err(format!(
                "placeholder `{}` must be an argument name such as {{{{ path }}}}",
                &c[0]
            ));
        }
        out.push(name);
    }
    Ok(out)
}

fn quoted(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "''".into(),
        Some(Value::String(s)) => shell_words::quote(s).into_owned(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| quoted(Some(v)))
            .collect::<Vec<_>>()
            .join(" "),
        Some(Value::Object(_)) => {
            shell_words::quote(&value.expect("some").to_string()).into_owned()
        }
        Some(other) => shell_words::quote(&other.to_string()).into_owned(),
    }
}

/// Fills a command line's placeholders with the arguments, each shell-quoted.
pub fn render(line: &str, args: &Value) -> String {
    placeholder_re()
        .replace_all(line, |c: &regex::Captures<'_>| quoted(args.get(&c[1])))
        .into_owned()
}

/// What a command run needs besides the command.
pub struct RunSpec<'a> {
    /// The shell line (rendered command or script).
    pub line: String,
    /// Arguments (written to stdin as JSON).
    pub args: &'a Value,
    /// Where and how it starts.
    pub launch: Launch,
    /// Seconds before the process group is killed.
    pub timeout: Duration,
    /// Set when the plan is cancelled: the group is killed at once.
    pub cancel: Option<Arc<AtomicBool>>,
}

/// Runs a command tool to completion (or its timeout) and returns its result.
///
/// # Errors
/// [`ToolError::Failed`] when it cannot start, times out, is cancelled or exits non-zero
/// (with the exit code and stderr).
pub fn run(spec: RunSpec<'_>) -> Result<Value, ToolError> {
    let mut launch = spec.launch;
    launch.program = "/bin/sh".into();
    launch.args = vec!["-c".into(), spec.line.clone()];
    let running = spawn_confined(&launch, Io::Input(spec.args.to_string().into_bytes()))
        .map_err(ToolError::PermissionDenied)?;
    let done = running.wait(spec.timeout, spec.cancel.as_deref());
    let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
    if done.timed_out {
        return Err(ToolError::Failed(format!(
            "the command timed out after {} s and was killed; stderr: {}",
            spec.timeout.as_secs(),
            stderr.trim()
        )));
    }
    if done.cancelled {
        return Err(ToolError::Failed(
            "the plan was cancelled; the command was killed".into(),
        ));
    }
    let code = done.code();
    if code != Some(0) {
        return Err(ToolError::Failed(format!(
            "the command exited with {}; stderr: {}",
            code.map_or_else(|| "a signal".to_string(), |c| format!("code {c}")),
            if stderr.trim().is_empty() {
                "(empty)"
            } else {
                stderr.trim()
            }
        )));
    }
    let result = serde_json::from_str::<Value>(stdout.trim())
        .unwrap_or_else(|_| Value::String(stdout.clone()));
    Ok(json!({
        "result": result,
        "exit_code": 0,
        "stderr": stderr,
        "stdout_truncated": done.stdout_truncated,
        "duration_ms": done.duration.as_millis() as u64,
    }))
}

/// The scrubbed environment of a tool process: `PATH`, `LANG`, `TERM`, the per-plan `HOME`,
/// `XDG_CACHE_HOME`, `TMPDIR`, then `extra` (name, value) pairs.
pub fn base_env(
    settings: &super::ShellSettings,
    extra: impl IntoIterator<Item = (String, String)>,
) -> Vec<(String, String)> {
    let mut env = vec![
        (
            "PATH".to_string(),
            std::env::var("PATH").unwrap_or_else(|_| super::shell::DEFAULT_PATH.into()),
        ),
        (
            "LANG".to_string(),
            std::env::var("LANG").unwrap_or_else(|_| "C.UTF-8".into()),
        ),
        ("HOME".to_string(), settings.home.display().to_string()),
        (
            "XDG_CACHE_HOME".to_string(),
            settings.cache.display().to_string(),
        ),
        ("TMPDIR".to_string(), settings.tmp.display().to_string()),
    ];
    env.extend(extra);
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_shell_quoted_so_arguments_cannot_inject_commands() {
        let line = "grep -n {{ pattern }} {{files}}";
        assert_eq!(placeholders(line).unwrap(), ["pattern", "files"]);
        let out = render(
            line,
            &json!({"pattern": "a'; rm -rf / #", "files": ["x y", "z"]}),
        );
        assert_eq!(out, r#"grep -n 'a'\''; rm -rf / #' 'x y' z"#);
        assert_eq!(shell_words::split(&out).unwrap()[2], "a'; rm -rf / #");
        assert_eq!(render("echo {{ n }}", &json!({})), "echo ''");
        assert!(placeholders("echo {{ a.b }}").is_err());
    }
}
