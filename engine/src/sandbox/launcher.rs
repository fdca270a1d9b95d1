//! The one way a confined command is started (spec sections 11 "Execution Workspace", 18
//! "respect sandbox boundaries", 22 and 23 "Sandbox strategy"; policy in `docs/sandbox.md`).
//!
//! Shell steps, `shell_execute` and validations call [`spawn`] with a program, its arguments,
//! a working directory, the complete environment (nothing is inherited) and a [`Policy`].
//! A supervisor thread then, before the command starts:
//! 1. joins a fresh cgroup (cgroup v1 `pids` and `memory`, when writable) so the child and
//!    everything it forks count against [`Limits::processes`] and [`Limits::memory`];
//! 2. enters new PID and mount namespaces and, with `network: false`, a new network namespace
//!    with only loopback up (tests listen on 127.0.0.1 inside; nothing reaches the host);
//! 3. hides every UNIX socket bound on the host (`/proc/net/unix`) under `/dev/null` bind
//!    mounts, and gives the command a private `/dev/shm`;
//! 4. drops every capability but a few harmless ones from its bounding set, so even a root
//!    command cannot mount, trace, load modules, make devices or raise its limits;
//! 5. builds the Landlock ruleset: reads only beneath an allow-list minus a deny-list
//!    that always wins (the user's keys, `/etc/shadow`, the user's `.git/config`), writes only
//!    beneath the writable paths, no signals to and no abstract sockets of processes outside;
//! 6. forks the command with rlimits and a parent-death signal ([`super::sys::limit_child`]);
//!    the child, PID 1 of its namespace, first mounts a fresh `proc` over `/proc` so that it
//!    sees no host process, then enforces the Landlock ruleset built in step 5 (Landlock
//!    forbids mounting, so the child enforces it itself: [`super::sys::fresh_proc_then`]).
//!
//! The command is PID 1 of its namespace: when it exits, is killed on timeout or
//! cancellation, or `agents` itself dies, the kernel kills every process it left behind
//! (`setsid` does not escape a PID namespace). The `agents` process is made non-dumpable so
//! its `/proc/<pid>/environ` is not readable by ordinary processes; Landlock denies it to the
//! command in any case. Output is capped and secrets are redacted
//! ([`crate::redact`]).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};
use serde::Serialize;

use super::landlock::{TARGET_ABI, probe as landlock_probe};
use super::sys::{self, ChildLimits, Namespaces};
pub use crate::domain::limits::{Limits, parse_size};

/// What a confined command may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Keep the host network (else: a private network namespace with only loopback).
    pub network: bool,
    /// Directories (or files) the command may write beneath, and read.
    pub writable: Vec<PathBuf>,
    /// Extra directories it may read beneath (toolchains, the sandbox's git directory).
    pub readable: Vec<PathBuf>,
    /// Extra paths never readable, `~/` and one-component `*`/`?` wildcards allowed
    /// (`~/.kube`, `/srv/*/secrets`).
    pub deny: Vec<String>,
    /// Resource limits.
    pub limits: Limits,
}

/// What a command's stdin and stdout are connected to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Io {
    /// stdin is `/dev/null`; stdout and stderr are captured (capped, secrets redacted) for
    /// [`Running::wait`]. Shell steps and validations.
    #[default]
    Captured,
    /// These bytes are written to stdin, which is then closed; stdout and stderr are
    /// captured. Command tools (their arguments as JSON).
    Input(Vec<u8>),
    /// stdin, stdout and stderr are pipes the caller takes with [`Running::take_pipes`]
    /// and speaks a protocol over (a stdio MCP server).
    Interactive,
}

/// The pipes of an [`Io::Interactive`] command.
pub type Pipes = (
    std::process::ChildStdin,
    std::process::ChildStdout,
    std::process::ChildStderr,
);

/// Receives each complete line of a captured command's output as it is written, with its
/// stream (`stdout` or `stderr`), secrets redacted; the whole (capped) output still comes back
/// from [`Running::wait`]. A line is cut at [`LINE_LIMIT`] bytes.
#[derive(Clone)]
pub struct LineSink(pub Arc<LineFn>);

/// What a [`LineSink`] calls: `(stream, line)`.
pub type LineFn = dyn Fn(&'static str, &str) + Send + Sync;

impl std::fmt::Debug for LineSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LineSink")
    }
}

/// The longest line a [`LineSink`] is given, in bytes (a longer one arrives in pieces).
pub const LINE_LIMIT: usize = 4096;

/// One command to start.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program (a path, or a name looked up on the `PATH` given in `env`).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The whole environment the command sees.
    pub env: Vec<(OsString, OsString)>,
    /// The confinement.
    pub policy: Policy,
    /// Bytes kept from each of stdout and stderr (the rest is read and dropped).
    pub output_cap: usize,
    /// How stdin and stdout are connected.
    pub io: Io,
    /// Where each line of captured output goes while the command runs, if anywhere.
    pub on_line: Option<LineSink>,
}

/// Why a command could not be started.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// The kernel cannot confine it here.
    #[error("the command cannot be confined here: {0}")]
    Unavailable(String),
    /// Setting up the confinement failed.
    #[error("cannot confine the command: {0}")]
    Setup(String),
    /// The process could not be started.
    #[error("cannot start {program}: {error}")]
    Spawn {
        /// The program.
        program: String,
        /// The error.
        error: std::io::Error,
    },
}

/// What the kernel offers the launcher here (cached; shown by `diagnostics`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// New network, mount and PID namespaces can be created.
    pub namespaces: bool,
    /// Why not, when not.
    pub namespaces_reason: Option<String>,
    /// cgroup v1 `pids`/`memory` directories the launcher can create groups in.
    pub cgroup: Option<String>,
    /// Landlock's probe.
    pub landlock: super::landlock::Probe,
}

impl Probe {
    /// Whether commands are fully confined: Landlock filesystem rules and namespaces.
    pub fn confines(&self) -> bool {
        self.landlock.filesystem && self.namespaces
    }

    /// Lines for `agents diagnostics`: Landlock, then namespaces.
    pub fn describe(&self) -> Vec<String> {
        let mut out = vec![self.landlock.describe()];
        out.push(if self.namespaces {
            "namespaces: pid, mount, network".into()
        } else {
            format!(
                "namespaces: unavailable ({}); shell commands are classified unsafe",
                self.namespaces_reason.as_deref().unwrap_or("unknown")
            )
        });
        out
    }

    /// The default limits and what enforces the process and memory ones, for
    /// `agents diagnostics`.
    pub fn describe_limits(&self) -> String {
        format!(
            "{} ({})",
            Limits::default().describe(),
            if self.cgroup.is_some() {
                "cgroup v1 and rlimits"
            } else {
                "rlimits only; no cgroup"
            }
        )
    }
}

/// Probes namespaces and cgroups once per process (a throwaway thread unshares).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(|| {
        let ns = std::thread::spawn(|| {
            sys::unshare(Namespaces {
                net: true,
                mount: true,
                pid: true,
            })
            .map_err(|e| e.to_string())
        })
        .join()
        .unwrap_or_else(|_| Err("the probe thread panicked".into()));
        Probe {
            namespaces: ns.is_ok(),
            namespaces_reason: ns.err(),
            cgroup: cgroup_root().map(|p| p.display().to_string()),
            landlock: landlock_probe().clone(),
        }
    })
}

/// Makes this process non-dumpable, so that other processes of the same user cannot read its
/// `/proc/<pid>/environ` or memory. Idempotent.
pub fn harden_self() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let _ =
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    });
}

/// How a command ended.
#[derive(Debug, Clone, Default)]
pub struct Finished {
    /// Its exit status (None when it could not be reaped).
    pub status: Option<ExitStatus>,
    /// stdout, capped, secrets redacted.
    pub stdout: Vec<u8>,
    /// stderr, capped, secrets redacted.
    pub stderr: Vec<u8>,
    /// More stdout was produced than kept.
    pub stdout_truncated: bool,
    /// More stderr was produced than kept.
    pub stderr_truncated: bool,
    /// Killed because the timeout passed.
    pub timed_out: bool,
    /// Killed because the caller cancelled.
    pub cancelled: bool,
    /// Wall time.
    pub duration: Duration,
}

impl Finished {
    /// The exit code, when it exited.
    pub fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// The signal that killed it, when one did.
    pub fn signal(&self) -> Option<i32> {
        use std::os::unix::process::ExitStatusExt;
        self.status.and_then(|s| s.signal())
    }
}

/// A running confined command. Dropping it kills the whole tree.
pub struct Running {
    pid: u32,
    started: Instant,
    kill: Arc<AtomicBool>,
    done: mpsc::Receiver<Option<ExitStatus>>,
    supervisor: Option<JoinHandle<()>>,
    cgroup: Option<Cgroup>,
    stdout: Option<mpsc::Receiver<(Vec<u8>, bool)>>,
    stderr: Option<mpsc::Receiver<(Vec<u8>, bool)>>,
    pipes: Option<Pipes>,
}

impl std::fmt::Debug for Running {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Running").field("pid", &self.pid).finish()
    }
}

impl Running {
    /// The command's process id (as seen from `agents`).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The stdin, stdout and stderr pipes of an [`Io::Interactive`] command (once).
    pub fn take_pipes(&mut self) -> Option<Pipes> {
        self.pipes.take()
    }

    /// Whether the command is still running.
    pub fn is_running(&self) -> bool {
        !self.kill.load(Ordering::SeqCst)
            && self.supervisor.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Asks the supervisor to kill the whole tree now.
    pub fn kill(&self) {
        self.kill.store(true, Ordering::SeqCst);
    }

    /// Waits until the command ends, `timeout` passes or `cancel` is set; then kills every
    /// process the command left and returns its status and output.
    pub fn wait(mut self, timeout: Duration, cancel: Option<&AtomicBool>) -> Finished {
        let mut timed_out = false;
        let mut cancelled = false;
        let status = loop {
            match self.done.recv_timeout(Duration::from_millis(10)) {
                Ok(status) => break status,
                Err(mpsc::RecvTimeoutError::Disconnected) => break None,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if !timed_out && !cancelled {
                if self.started.elapsed() >= timeout {
                    timed_out = true;
                    self.kill();
                } else if cancel.is_some_and(|c| c.load(Ordering::SeqCst)) {
                    cancelled = true;
                    self.kill();
                }
            }
        };
        self.finish();
        let grace = Duration::from_secs(2);
        let take = |rx: Option<mpsc::Receiver<(Vec<u8>, bool)>>| {
            rx.and_then(|r| r.recv_timeout(grace).ok())
                .unwrap_or_default()
        };
        let (stdout, stdout_truncated) = take(self.stdout.take());
        let (stderr, stderr_truncated) = take(self.stderr.take());
        Finished {
            status,
            stdout: crate::redact::redact_bytes(&stdout),
            stderr: crate::redact::redact_bytes(&stderr),
            stdout_truncated,
            stderr_truncated,
            timed_out,
            cancelled,
            duration: self.started.elapsed(),
        }
    }

    fn finish(&mut self) {
        self.kill();
        if let Some(t) = self.supervisor.take() {
            let _ = t.join();
        }
        if let Some(cg) = self.cgroup.take() {
            cg.destroy();
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.finish();
    }
}

/// Starts `launch` confined by its policy.
///
/// # Errors
/// [`LaunchError::Unavailable`] when the kernel cannot confine commands here (no Landlock
/// or no namespaces); [`LaunchError::Setup`] and [`LaunchError::Spawn`] otherwise.
pub fn spawn(launch: Launch) -> Result<Running, LaunchError> {
    harden_self();
    let probe = probe();
    if !probe.confines() {
        let why = if probe.landlock.filesystem {
            probe.describe()[1].clone()
        } else {
            probe.landlock.describe()
        };
        return Err(LaunchError::Unavailable(why));
    }
    start(launch, true)
}

/// Starts `launch` without kernel confinement (its own process group, killed as a whole; the
/// environment is still only `launch.env`). Only for plans that allow unsafe tools on a
/// machine where [`spawn`] is unavailable.
///
/// # Errors
/// [`LaunchError::Spawn`].
pub fn spawn_unconfined(launch: Launch) -> Result<Running, LaunchError> {
    harden_self();
    start(launch, false)
}

/// What the supervisor reports once the command runs: its pid, the supervisor's thread id,
/// and the output pipes.
type Started = Result<
    (
        u32,
        String,
        Option<std::process::ChildStdin>,
        Option<std::process::ChildStdout>,
        Option<std::process::ChildStderr>,
    ),
    LaunchError,
>;

fn start(launch: Launch, confine: bool) -> Result<Running, LaunchError> {
    let cgroup = if confine {
        Cgroup::create(&launch.policy.limits)
    } else {
        None
    };
    let cap = launch.output_cap;
    let io = launch.io.clone();
    let on_line = launch.on_line.clone();
    let kill = Arc::new(AtomicBool::new(false));
    let (start_tx, start_rx) = mpsc::channel::<Started>();
    let (done_tx, done_rx) = mpsc::channel();
    let supervisor = {
        let kill = kill.clone();
        let cgroup_tasks = cgroup.as_ref().map(|c| c.dirs.clone());
        std::thread::spawn(move || {
            supervise(launch, confine, cgroup_tasks, start_tx, done_tx, kill);
        })
    };
    let started = Instant::now();
    let failed = |e: LaunchError, cgroup: Option<Cgroup>, supervisor: JoinHandle<()>| {
        let _ = supervisor.join();
        if let Some(cg) = cgroup {
            cg.destroy();
        }
        Err(e)
    };
    match start_rx.recv() {
        Ok(Ok((pid, tid, stdin, stdout, stderr))) => {
            if let Some(cg) = &cgroup {
                cg.release(&tid);
            }
            let mut running = Running {
                pid,
                started,
                kill,
                done: done_rx,
                supervisor: Some(supervisor),
                cgroup,
                stdout: None,
                stderr: None,
                pipes: None,
            };
            match (io, stdin, stdout, stderr) {
                (Io::Interactive, Some(i), Some(o), Some(e)) => running.pipes = Some((i, o, e)),
                (io, stdin, stdout, stderr) => {
                    if let (Io::Input(bytes), Some(mut stdin)) = (io, stdin) {
                        std::thread::spawn(move || {
                            use std::io::Write;
                            let _ = stdin.write_all(&bytes);
                        });
                    }
                    running.stdout = stdout.map(|s| drain(s, cap, lines("stdout", &on_line)));
                    running.stderr = stderr.map(|s| drain(s, cap, lines("stderr", &on_line)));
                }
            }
            Ok(running)
        }
        Ok(Err(e)) => failed(e, cgroup, supervisor),
        Err(_) => failed(
            LaunchError::Setup("the supervisor thread ended early".into()),
            cgroup,
            supervisor,
        ),
    }
}

/// A [`LineSplitter`] for `stream` when output lines are wanted.
fn lines(stream: &'static str, sink: &Option<LineSink>) -> Option<LineSplitter> {
    sink.clone().map(|sink| LineSplitter {
        stream,
        sink,
        partial: Vec::new(),
    })
}

/// Cuts a stream's bytes into lines for a [`LineSink`].
struct LineSplitter {
    stream: &'static str,
    sink: LineSink,
    partial: Vec<u8>,
}

impl LineSplitter {
    fn feed(&mut self, bytes: &[u8]) {
        for &b in bytes {
            if b == b'\n' {
                self.emit();
            } else {
                self.partial.push(b);
                if self.partial.len() >= LINE_LIMIT {
                    self.emit();
                }
            }
        }
    }

    fn emit(&mut self) {
        let line = String::from_utf8_lossy(&self.partial);
        let line = line.strip_suffix('\r').unwrap_or(&line);
        (self.sink.0)(self.stream, &crate::redact::redact(line));
        self.partial.clear();
    }

    fn finish(mut self) {
        if !self.partial.is_empty() {
            self.emit();
        }
    }
}

fn drain(
    mut stream: impl Read + Send + 'static,
    cap: usize,
    mut lines: Option<LineSplitter>,
) -> mpsc::Receiver<(Vec<u8>, bool)> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let mut truncated = false;
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    let room = cap.saturating_sub(kept.len());
                    kept.extend_from_slice(&buf[..n.min(room)]);
                    truncated |= n > room;
                    if let Some(l) = lines.as_mut() {
                        l.feed(&buf[..n]);
                    }
                }
            }
        }
        if let Some(l) = lines {
            l.finish();
        }
        let _ = tx.send((kept, truncated));
    });
    rx
}

fn supervise(
    launch: Launch,
    confine: bool,
    cgroup_tasks: Option<Vec<PathBuf>>,
    start_tx: mpsc::Sender<Started>,
    done_tx: mpsc::Sender<Option<ExitStatus>>,
    kill: Arc<AtomicBool>,
) {
    let mut child = match prepare_and_spawn(&launch, confine, cgroup_tasks.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            let _ = start_tx.send(Err(e));
            return;
        }
    };
    let tid = rustix::thread::gettid().as_raw_nonzero().get().to_string();
    let _ = start_tx.send(Ok((
        child.id(),
        tid,
        child.stdin.take(),
        child.stdout.take(),
        child.stderr.take(),
    )));
    let pid = i32::try_from(child.id())
        .ok()
        .and_then(rustix::process::Pid::from_raw);
    loop {
        let exited = match pid {
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
        if exited || kill.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // PID 1 of the namespace (or the group leader, unconfined) dies first, taking every
    // process it left with it; the leader is reaped only afterwards, so its id cannot be
    // reused while the group is killed.
    if let Some(p) = pid {
        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
        let _ = rustix::process::kill_process_group(p, rustix::process::Signal::KILL);
    }
    let status = child.wait().ok();
    let _ = done_tx.send(status);
}

fn setup_err(what: &str) -> impl FnOnce(std::io::Error) -> LaunchError + '_ {
    move |e| LaunchError::Setup(format!("{what}: {e}"))
}

/// Runs on the supervisor thread: everything done here affects this thread and the child it
/// forks, never the rest of `agents`.
fn prepare_and_spawn(
    launch: &Launch,
    confine: bool,
    cgroup_tasks: Option<&[PathBuf]>,
) -> Result<std::process::Child, LaunchError> {
    let mut command = Command::new(&launch.program);
    command
        .args(&launch.args)
        .current_dir(&launch.cwd)
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .stdin(if launch.io == Io::Captured {
            Stdio::null()
        } else {
            Stdio::piped()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let policy = &launch.policy;
    if confine {
        if let Some(dirs) = cgroup_tasks {
            let tid = rustix::thread::gettid().as_raw_nonzero().get().to_string();
            for dir in dirs {
                fs::write(dir.join("tasks"), &tid).map_err(setup_err("joining the cgroup"))?;
            }
        }
        let sockets = host_unix_sockets();
        sys::unshare(Namespaces {
            net: !policy.network,
            mount: true,
            pid: true,
        })
        .map_err(setup_err("creating namespaces"))?;
        if !policy.network {
            sys::loopback_up().map_err(setup_err("bringing up loopback"))?;
        }
        hide_sockets(&sockets, policy)?;
        drop_capabilities();
        let created = ruleset(policy)?;
        let fd: Option<std::os::fd::OwnedFd> = created
            .try_clone()
            .map_err(|e| LaunchError::Setup(format!("Landlock: {e}")))?
            .into();
        let fd = fd.ok_or_else(|| {
            LaunchError::Unavailable("the kernel accepted no part of the Landlock ruleset".into())
        })?;
        let mut ruleset = Some(created);
        sys::fresh_proc_then(&mut command, fd, move || {
            let Some(r) = ruleset.take() else {
                return Ok(());
            };
            match r.restrict_self() {
                Ok(status) if status.ruleset != RulesetStatus::NotEnforced => Ok(()),
                _ => Err(std::io::Error::from_raw_os_error(libc::EPERM)),
            }
        });
    }
    // RLIMIT_NPROC counts every process of the user, so without a pids cgroup the limit is
    // what the user runs already plus the command's share; with one, the cgroup counts.
    let processes = match (cgroup_tasks.is_some(), policy.limits.processes) {
        (_, 0) | (true, _) => 0,
        (false, n) => n + user_processes(),
    };
    sys::limit_child(
        &mut command,
        ChildLimits {
            processes,
            address_space: policy.limits.address_space,
            file_size: policy.limits.file_size,
            open_files: policy.limits.open_files,
        },
    );
    command.spawn().map_err(|error| LaunchError::Spawn {
        program: launch.program.display().to_string(),
        error,
    })
}

/// How many processes (threads count too) this process's real user runs now.
fn user_processes() -> u64 {
    let uid = rustix::process::getuid().as_raw();
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| fs::read_to_string(e.path().join("status")).ok())
        .filter(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().next())
                .is_some_and(|u| u == uid.to_string())
        })
        .map(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u64>().ok())
                .unwrap_or(1)
        })
        .sum()
}

/// Paths of the UNIX sockets bound in this network namespace (`/proc/net/unix`).
fn host_unix_sockets() -> Vec<PathBuf> {
    let Ok(text) = fs::read_to_string("/proc/net/unix") else {
        return Vec::new();
    };
    text.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// In the thread's new mount namespace: no propagation back to the host, a private
/// `/dev/shm`, and `/dev/null` mounted over every host socket outside the writable paths.
fn hide_sockets(sockets: &[PathBuf], policy: &Policy) -> Result<(), LaunchError> {
    use rustix::mount::{MountFlags, MountPropagationFlags};
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::PRIVATE | MountPropagationFlags::REC,
    )
    .map_err(|e| setup_err("making mounts private")(e.into()))?;
    if Path::new("/dev/shm").is_dir() {
        let _ = rustix::mount::mount(
            "tmpfs",
            "/dev/shm",
            "tmpfs",
            MountFlags::NOSUID | MountFlags::NODEV,
            c"size=256m,mode=1777",
        );
    }
    for socket in sockets {
        if policy.writable.iter().any(|w| socket.starts_with(w)) {
            continue;
        }
        // Best effort: a socket removed since /proc/net/unix was read needs no hiding.
        let _ = rustix::mount::mount_bind("/dev/null", socket);
    }
    Ok(())
}

/// Capabilities a command keeps (as root): file ownership and permission bits in the paths
/// Landlock lets it write, signals inside its namespace, user switching, low ports.
const KEPT_CAPABILITIES: [u32; 9] = [0, 1, 3, 4, 5, 6, 7, 10, 29];

fn drop_capabilities() {
    for cap in 0..64u32 {
        if KEPT_CAPABILITIES.contains(&cap) {
            continue;
        }
        let set = rustix::thread::CapabilitySet::from_bits_retain(1u64 << cap);
        // Capabilities beyond the kernel's last one report EINVAL; nothing to drop there.
        let _ = rustix::thread::remove_capability_from_bounding_set(set);
    }
}

/// Directories every command may read: the system and its configuration.
pub const SYSTEM_READABLE: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc",
    "/sys", "/nix", "/snap",
];

/// Device files every command may read and write.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// Files beneath the user's home that are never readable (spec section 22; `docs/sandbox.md`).
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".aws",
    ".azure",
    ".config/gh",
    ".config/gcloud",
    ".config/cleveragents",
    ".netrc",
    ".gnupg",
    ".git-credentials",
    ".docker/config.json",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
];

/// System files that are never readable.
pub const SYSTEM_SECRETS: &[&str] = &[
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/ssh/ssh_host_*_key",
];

fn home_dirs() -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = Vec::new();
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        homes.push(PathBuf::from(h));
    }
    homes.push(PathBuf::from("/root"));
    homes
}

/// The deny-list of `policy`, as concrete existing paths (wildcards expanded).
pub fn deny_paths(policy: &Policy) -> Vec<PathBuf> {
    let mut patterns: Vec<PathBuf> = SYSTEM_SECRETS.iter().map(PathBuf::from).collect();
    for home in home_dirs() {
        patterns.extend(HOME_SECRETS.iter().map(|s| home.join(s)));
    }
    for extra in &policy.deny {
        patterns.push(match extra.strip_prefix("~/") {
            Some(rest) => home_dirs()[0].join(rest),
            None => PathBuf::from(extra),
        });
    }
    let mut out = BTreeSet::new();
    for p in patterns {
        for found in expand_wildcards(&p) {
            out.insert(fs::canonicalize(&found).unwrap_or(found));
        }
    }
    out.into_iter().collect()
}

/// Expands `*` and `?` inside single components by listing directories.
fn expand_wildcards(pattern: &Path) -> Vec<PathBuf> {
    let mut current = vec![PathBuf::from("/")];
    for comp in pattern.components().skip(1) {
        let text = comp.as_os_str().to_string_lossy();
        let mut next = Vec::new();
        if text.contains(['*', '?', '[']) {
            let Ok(glob) = globset::Glob::new(&text) else {
                continue;
            };
            let m = glob.compile_matcher();
            for dir in &current {
                for e in fs::read_dir(dir).into_iter().flatten().flatten() {
                    if m.is_match(e.file_name()) {
                        next.push(e.path());
                    }
                }
            }
        } else {
            next = current.iter().map(|d| d.join(comp)).collect();
        }
        current = next;
    }
    current
        .into_iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect()
}

/// `roots` minus `deny`: each root as is when no denied path lies beneath it, else its
/// entries, recursively, leaving out the denied ones. Symbolic links met on the way are
/// replaced by their targets, checked the same way. Missing roots are skipped.
pub fn allowed(roots: &[PathBuf], deny: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = BTreeSet::new();
    for root in roots {
        if let Ok(canonical) = fs::canonicalize(root) {
            walk(&canonical, deny, &mut out, 0);
        }
    }
    out.into_iter().collect()
}

fn walk(path: &Path, deny: &[PathBuf], out: &mut BTreeSet<PathBuf>, depth: usize) {
    if deny.iter().any(|d| path.starts_with(d)) {
        return;
    }
    if !deny.iter().any(|d| d.starts_with(path)) {
        out.insert(path.to_path_buf());
        return;
    }
    if depth > 12 {
        return;
    }
    for entry in fs::read_dir(path).into_iter().flatten().flatten() {
        let p = entry.path();
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        let p = if is_link {
            match fs::canonicalize(&p) {
                Ok(t) => t,
                Err(_) => continue,
            }
        } else {
            p
        };
        walk(&p, deny, out, depth + 1);
    }
}

/// The Landlock ruleset of `policy`, built (its paths opened) before the fork and enforced
/// by the child itself once its fresh `/proc` is mounted ([`sys::fresh_proc_then`]). A kernel
/// that would enforce none of it is refused here.
fn ruleset(policy: &Policy) -> Result<landlock::RulesetCreated, LaunchError> {
    let err = |e: landlock::RulesetError| LaunchError::Setup(format!("Landlock: {e}"));
    let abi: ABI = TARGET_ABI;
    let deny = deny_paths(policy);
    let mut read_roots: Vec<PathBuf> = SYSTEM_READABLE.iter().map(PathBuf::from).collect();
    read_roots.extend(policy.readable.iter().cloned());
    let readable = allowed(&read_roots, &deny);
    let writable = allowed(&policy.writable, &deny);
    let write_access = AccessFs::from_all(abi) & !(AccessFs::MakeChar | AccessFs::MakeBlock);
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(AccessFs::from_all(abi))
        .map_err(err)?;
    if !probe().namespaces {
        // Without a private network namespace TCP is the only thing Landlock can deny.
        if !policy.network {
            ruleset = ruleset
                .handle_access(AccessNet::from_all(abi))
                .map_err(err)?;
        }
    }
    if landlock_probe().scopes {
        ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
    }
    let devices: Vec<&str> = DEVICES
        .iter()
        .copied()
        .filter(|d| Path::new(d).exists())
        .collect();
    let mut created = ruleset
        .create()
        .map_err(err)?
        .add_rules(path_beneath_rules(&readable, AccessFs::from_read(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(&devices, AccessFs::from_file(abi)))
        .map_err(err)?
        .add_rules(path_beneath_rules(&writable, write_access))
        .map_err(err)?;
    if Path::new("/dev/shm").is_dir() {
        created = created
            .add_rules(path_beneath_rules(["/dev/shm"], write_access))
            .map_err(err)?;
    }
    if !landlock_probe().filesystem {
        return Err(LaunchError::Unavailable(
            "the kernel accepted no part of the Landlock ruleset".into(),
        ));
    }
    Ok(created)
}

/// A cgroup v1 group (one directory per controller) holding one command's tree.
#[derive(Debug)]
struct Cgroup {
    dirs: Vec<PathBuf>,
    origins: Vec<PathBuf>,
}

/// `/sys/fs/cgroup` when its v1 `pids` controller is mounted and writable here.
fn cgroup_root() -> Option<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup");
    let pids = root.join("pids");
    if !pids.join("cgroup.procs").exists() {
        return None;
    }
    let parent = pids.join("cleveragents");
    fs::create_dir_all(&parent).ok()?;
    Some(root)
}

impl Cgroup {
    fn create(limits: &Limits) -> Option<Cgroup> {
        let root = PathBuf::from(probe().cgroup.as_ref()?);
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let name = format!(
            "{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::SeqCst)
        );
        let mut dirs = Vec::new();
        let mut origins = Vec::new();
        for (controller, file, value) in [
            ("pids", "pids.max", limits.processes),
            ("memory", "memory.limit_in_bytes", limits.memory),
        ] {
            let base = root.join(controller);
            if !base.join("tasks").exists() {
                continue;
            }
            let parent = base.join("cleveragents");
            let _ = fs::create_dir_all(&parent);
            remove_stale(&parent);
            let dir = parent.join(&name);
            if fs::create_dir(&dir).is_err() {
                continue;
            }
            if value > 0 && fs::write(dir.join(file), value.to_string()).is_err() {
                let _ = fs::remove_dir(&dir);
                continue;
            }
            if controller == "memory" {
                let _ = fs::write(dir.join("memory.memsw.limit_in_bytes"), value.to_string());
            }
            origins.push(own_group(&base, controller));
            dirs.push(dir);
        }
        (!dirs.is_empty()).then_some(Cgroup { dirs, origins })
    }

    /// Moves the supervisor thread `tid` back to its own groups once the child has been
    /// forked, so only the command's tree is limited (and seen by the OOM killer).
    fn release(&self, tid: &str) {
        for origin in &self.origins {
            let _ = fs::write(origin.join("tasks"), tid);
        }
    }

    /// Kills whatever is left in the group and removes it.
    fn destroy(self) {
        for dir in &self.dirs {
            for _ in 0..50 {
                let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
                if procs.trim().is_empty() {
                    break;
                }
                for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                    if pid as u32 == std::process::id() {
                        continue;
                    }
                    if let Some(p) = rustix::process::Pid::from_raw(pid) {
                        let _ = rustix::process::kill_process(p, rustix::process::Signal::KILL);
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = fs::remove_dir(dir);
        }
    }
}

/// This process's group of `controller` (from `/proc/self/cgroup`), beneath `base`.
fn own_group(base: &Path, controller: &str) -> PathBuf {
    let text = fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        if controllers.is_some_and(|c| c.split(',').any(|c| c == controller))
            && let Some(path) = path
        {
            return base.join(path.trim_start_matches('/'));
        }
    }
    base.to_path_buf()
}

/// Removes groups left by earlier runs of processes that are gone (a group still holding
/// processes cannot be removed, so a live command is never affected).
fn remove_stale(parent: &Path) {
    for e in fs::read_dir(parent).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let owner = name.split('-').next().unwrap_or_default();
        if !Path::new("/proc").join(owner).exists() {
            let _ = fs::remove_dir(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::limits::{GIB, MIB};

    /// Whether this machine confines commands; elsewhere the tests only check that the
    /// launcher refuses (CI runs them confined).
    fn confines() -> bool {
        let ok = probe().confines();
        if !ok {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"), "{:?}", probe());
        }
        ok
    }

    struct Fixture {
        dir: tempfile::TempDir,
        work: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        fs::create_dir_all(&work).unwrap();
        Fixture { dir, work }
    }

    impl Fixture {
        fn launch(&self, script: &str) -> Launch {
            Launch {
                program: "/bin/sh".into(),
                args: vec!["-c".into(), script.into()],
                cwd: self.work.clone(),
                env: vec![
                    ("PATH".into(), "/usr/bin:/bin".into()),
                    ("HOME".into(), self.work.clone().into()),
                ],
                policy: Policy {
                    network: false,
                    writable: vec![self.work.clone()],
                    ..Default::default()
                },
                output_cap: 64 * 1024,
                on_line: None,
                io: Io::Captured,
            }
        }

        fn run(&self, launch: Launch) -> Finished {
            spawn(launch)
                .expect("the launcher starts the command")
                .wait(Duration::from_secs(60), None)
        }

        fn sh(&self, script: &str) -> Finished {
            self.run(self.launch(script))
        }
    }

    fn out(f: &Finished) -> String {
        String::from_utf8_lossy(&f.stdout).into_owned()
    }

    fn err(f: &Finished) -> String {
        String::from_utf8_lossy(&f.stderr).into_owned()
    }

    #[test]
    fn the_environment_of_agents_and_other_processes_is_not_readable() {
        if !confines() {
            return;
        }
        let f = fixture();
        let me = std::process::id();
        let r = f.sh(&format!(
            "cat /proc/{me}/environ > /dev/null 2>&1 && echo parent-readable; \
             cat /proc/$PPID/environ > /dev/null 2>&1 && echo ppid-readable; \
             n=0; for e in /proc/[0-9]*/environ; do cat $e > /dev/null 2>&1 && n=$((n+1)); done; \
             echo readable=$n; env"
        ));
        let text = out(&r);
        assert!(!text.contains("parent-readable"), "{text}");
        assert!(!text.contains("ppid-readable"), "{text}");
        // Only the command's own processes (the shell and its `cat`) may be readable.
        let n: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("readable="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(n <= 3, "{text}");
        let names: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split_once('=').map(|(k, _)| k))
            .filter(|k| *k != "readable")
            .collect();
        assert!(
            names
                .iter()
                .all(|k| ["PATH", "HOME", "PWD", "SHLVL", "_", "OLDPWD"].contains(k)),
            "{names:?}"
        );
    }

    #[test]
    fn a_command_sees_only_its_own_processes_not_the_hosts() {
        if !confines() {
            return;
        }
        let f = fixture();
        let me = std::process::id();
        let r = f.sh(&format!(
            "test -e /proc/{me} && echo agents-visible; \
             echo procs=$(ls /proc | grep -c '^[0-9]'); \
             tr '\\0' ' ' < /proc/1/cmdline; echo"
        ));
        let text = out(&r);
        assert!(
            !text.lines().any(|l| l == "agents-visible"),
            "{text}{}",
            err(&r)
        );
        let n: usize = text
            .lines()
            .find_map(|l| l.strip_prefix("procs="))
            .unwrap_or_else(|| panic!("{text}{}", err(&r)))
            .parse()
            .unwrap();
        // The shell, `ls` and `grep`: nothing of the host.
        assert!(n <= 4, "{text}");
        assert!(
            text.lines()
                .last()
                .unwrap_or_default()
                .contains("sh -c test -e"),
            "PID 1 is the command: {text}{}",
            err(&r)
        );
    }

    #[test]
    fn a_setsid_process_does_not_outlive_its_command() {
        if !confines() {
            return;
        }
        let f = fixture();
        let r = f.sh("setsid sleep 777.25 > /dev/null 2>&1 & (sleep 778.25 &) ; echo started");
        assert_eq!(out(&r).trim(), "started");
        std::thread::sleep(Duration::from_millis(100));
        let survivors: Vec<String> = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.contains("777.25") || c.contains("778.25"))
            .collect();
        assert!(survivors.is_empty(), "{survivors:?}");
    }

    #[test]
    fn output_lines_reach_the_sink_while_the_command_runs() {
        let f = fixture();
        let (tx, rx) = mpsc::channel::<(&'static str, String)>();
        let tx = std::sync::Mutex::new(tx);
        let mut launch = f.launch(
            "printf 'one\\n'; printf 'oops\\n' >&2; \
             while [ ! -e go ]; do sleep 0.05; done; printf 'two\\nthree'",
        );
        launch.on_line = Some(LineSink(Arc::new(move |stream, line| {
            let _ = tx.lock().unwrap().send((stream, line.to_string()));
        })));
        let running = if confines() {
            spawn(launch)
        } else {
            spawn_unconfined(launch)
        }
        .unwrap();
        let mut early = vec![
            rx.recv_timeout(Duration::from_secs(60)).unwrap(),
            rx.recv_timeout(Duration::from_secs(60)).unwrap(),
        ];
        early.sort();
        // The command is still waiting for `go`: these lines came while it ran.
        assert_eq!(
            early,
            [
                ("stderr", "oops".to_string()),
                ("stdout", "one".to_string())
            ]
        );
        fs::write(f.work.join("go"), "").unwrap();
        let done = running.wait(Duration::from_secs(60), None);
        assert_eq!(String::from_utf8_lossy(&done.stdout), "one\ntwo\nthree");
        let rest: Vec<(&str, String)> = rx.try_iter().collect();
        assert_eq!(
            rest,
            [
                ("stdout", "two".to_string()),
                ("stdout", "three".to_string())
            ],
            "the last line is given at the end even without its newline"
        );
    }

    #[test]
    fn a_timed_out_command_is_killed_with_everything_it_started() {
        if !confines() {
            return;
        }
        let f = fixture();
        let started = Instant::now();
        let r = spawn(f.launch("setsid sleep 779.5 & sleep 600"))
            .unwrap()
            .wait(Duration::from_millis(300), None);
        assert!(r.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(100));
        let left = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains("779.5"));
        assert!(!left);
    }

    #[test]
    fn a_cancelled_command_is_killed_at_once() {
        if !confines() {
            return;
        }
        let f = fixture();
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            flag.store(true, Ordering::SeqCst);
        });
        let started = Instant::now();
        let r = spawn(f.launch("setsid sleep 781.5 & sleep 600"))
            .unwrap()
            .wait(Duration::from_secs(600), Some(&cancel));
        assert!(r.cancelled && !r.timed_out);
        assert!(started.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(100));
        let left = fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .any(|c| String::from_utf8_lossy(&c).contains("781.5"));
        assert!(!left);
    }

    #[test]
    fn host_unix_sockets_cannot_be_reached() {
        if !confines() {
            return;
        }
        let f = fixture();
        let sock = f.dir.path().join("host.sock");
        let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        listener.set_nonblocking(true).unwrap();
        let r = f.sh(&format!(
            "/usr/bin/python3 -c 'import socket; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); s.send(b\"leak\"); print(\"connected\")'",
            sock.display()
        ));
        assert!(!out(&r).contains("connected"), "{}{}", out(&r), err(&r));
        assert!(
            listener.accept().is_err(),
            "the host socket saw a connection"
        );
    }

    #[test]
    fn udp_and_tcp_to_the_host_loopback_are_not_delivered_without_network() {
        if !confines() {
            return;
        }
        let f = fixture();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let tcp = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        tcp.set_nonblocking(true).unwrap();
        let (up, tp) = (
            udp.local_addr().unwrap().port(),
            tcp.local_addr().unwrap().port(),
        );
        let r = f.sh(&format!(
            "/usr/bin/python3 -c '\nimport socket\nu=socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ntry:\n  u.sendto(b\"leak\", (\"127.0.0.1\", {up})); print(\"udp-sent\")\nexcept OSError as e: print(\"udp\", e)\ntry:\n  socket.create_connection((\"127.0.0.1\", {tp}), timeout=2); print(\"tcp-connected\")\nexcept OSError as e: print(\"tcp\", e)\ntry:\n  socket.getaddrinfo(\"example.com\", 80); print(\"dns-resolved\")\nexcept OSError as e: print(\"dns\", e)\n'"
        ));
        let text = out(&r);
        assert!(!text.contains("tcp-connected"), "{text}");
        assert!(!text.contains("dns-resolved"), "{text}");
        let mut buf = [0u8; 16];
        assert!(
            udp.recv_from(&mut buf).is_err(),
            "the host received UDP: {text}"
        );
        assert!(tcp.accept().is_err(), "the host accepted TCP: {text}");
    }

    #[test]
    fn a_command_without_network_can_listen_and_connect_on_its_own_loopback() {
        if !confines() {
            return;
        }
        let f = fixture();
        let r = f.sh(
            "/usr/bin/python3 -c '\nimport socket, threading\ns=socket.socket(); s.bind((\"127.0.0.1\", 0)); s.listen()\nport=s.getsockname()[1]\nthreading.Thread(target=lambda: s.accept()[0].sendall(b\"hello\"), daemon=True).start()\nc=socket.create_connection((\"127.0.0.1\", port)); print(c.recv(5).decode())\n'",
        );
        assert_eq!(out(&r).trim(), "hello", "{}", err(&r));
    }

    #[test]
    fn secrets_are_unreadable_even_beneath_a_readable_directory() {
        if !confines() {
            return;
        }
        let f = fixture();
        let home = f.dir.path().join("home");
        fs::create_dir_all(home.join(".ssh")).unwrap();
        fs::write(home.join(".ssh/id_ed25519"), "PRIVATE KEY").unwrap();
        fs::write(home.join("notes.txt"), "public").unwrap();
        let mut launch = f.launch(&format!(
            "cat {h}/.ssh/id_ed25519; cat {h}/notes.txt; cat /etc/shadow; head -c 4 /etc/passwd; echo; \
             ln -s {h}/.ssh/id_ed25519 link && cat link; cp -r {h}/.ssh copied",
            h = home.display()
        ));
        launch.policy.readable = vec![home.clone()];
        launch.policy.deny = vec![format!("{}/.ss?", home.display())];
        let r = f.run(launch);
        let text = out(&r);
        assert!(!text.contains("PRIVATE"), "{text}");
        assert!(text.contains("public"), "{text}{}", err(&r));
        assert!(text.contains("root"), "/etc/passwd stays readable: {text}");
        assert!(!text.contains("root:"), "/etc/shadow is not readable");
        assert!(!f.work.join("copied/id_ed25519").exists());
        // Outside the allow-list nothing is readable at all.
        let r = f.sh(&format!("cat {}/notes.txt", home.display()));
        assert!(!out(&r).contains("public"));
    }

    #[test]
    fn a_fork_loop_and_a_large_allocation_stop_at_the_limits() {
        if !confines() {
            return;
        }
        let f = fixture();
        let mut launch = f.launch(
            "/usr/bin/python3 -c '\nimport os, time\nn = 0\nfor _ in range(2000):\n  try:\n    if os.fork() == 0:\n      time.sleep(30); os._exit(0)\n    n += 1\n  except OSError:\n    break\nprint(n)\n'",
        );
        launch.policy.limits.processes = 64;
        let started = Instant::now();
        let r = spawn(launch).unwrap().wait(Duration::from_secs(20), None);
        assert!(started.elapsed() < Duration::from_secs(20), "{}", err(&r));
        let forked: usize = out(&r)
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{}", err(&r)));
        // Root ignores RLIMIT_NPROC: without a pids cgroup nothing counts its processes.
        if probe().cgroup.is_some() || !rustix::process::getuid().is_root() {
            assert!(forked < 64, "{forked} processes were started");
        }
        // The default memory limit is a cgroup's; without one, the address-space limit holds.
        let mut big = f.launch(
            "/usr/bin/python3 -c 'b = bytearray(3 * 1024**3); b[::4096] = b\"x\" * len(b[::4096]); print(\"allocated\")'",
        );
        if probe().cgroup.is_none() {
            big.policy.limits.address_space = 2 * GIB;
        }
        let r2 = f.run(big);
        assert!(!out(&r2).contains("allocated"), "{}", err(&r2));
        assert_ne!(r2.code(), Some(0));
    }

    #[test]
    fn limits_default_to_the_documented_values() {
        assert_eq!(
            Limits::default().describe(),
            "processes 512, memory 2 GiB, address space 16 GiB, file size 4 GiB, open files 4096"
        );
    }

    #[test]
    fn writes_stay_beneath_the_writable_paths() {
        if !confines() {
            return;
        }
        let f = fixture();
        let outside = f.dir.path().join("outside.txt");
        let r = f.sh(&format!(
            "echo in > inside.txt; echo out > {}; mknod dev c 1 3 2>/dev/null; echo done",
            outside.display()
        ));
        assert_eq!(out(&r).trim(), "done");
        assert!(f.work.join("inside.txt").exists());
        assert!(!outside.exists());
        assert!(!f.work.join("dev").exists());
    }

    #[test]
    fn allowed_paths_leave_out_denied_ones() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().canonicalize().unwrap();
        fs::create_dir_all(root.join("a/secret")).unwrap();
        fs::create_dir_all(root.join("a/b")).unwrap();
        fs::write(root.join("a/c.txt"), "").unwrap();
        std::os::unix::fs::symlink(root.join("a/secret"), root.join("a/link")).unwrap();
        let got = allowed(&[root.join("a")], &[root.join("a/secret")]);
        assert_eq!(got, vec![root.join("a/b"), root.join("a/c.txt")]);
        assert!(allowed(&[root.join("a/secret")], &[root.join("a")]).is_empty());
        assert_eq!(allowed(&[root.join("a")], &[]), vec![root.join("a")]);
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("2GiB").unwrap(), 2 * GIB);
        assert_eq!(parse_size("512MiB").unwrap(), 512 * MIB);
        assert_eq!(parse_size("100").unwrap(), 100);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }
}
