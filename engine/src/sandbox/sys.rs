//! The few system calls the launcher needs that have no safe wrapper (spec section 23
//! "Sandbox strategy"; `docs/sandbox.md`). This is the only module of the crate allowed to use
//! `unsafe`; each block says why it is sound (see `docs/decisions.md`, "Sandbox").
//!
//! - [`unshare`]: `unshare(2)` of the calling thread for new network, mount and PID
//!   namespaces. Never with `CLONE_FILES`, which is what makes rustix mark it unsafe.
//! - [`unshare_process`]: the process's own mount (and user) namespace, entered at start.
//! - [`succeeds_in_child`]: `fork(2)` of the single-threaded process at start, to try entering
//!   a user namespace where a failure half-way cannot strand the process itself.
//! - [`loopback_up`]: `ioctl(SIOCSIFFLAGS)` to bring `lo` up in a fresh network namespace.
//! - [`limit_child`]: a `pre_exec` hook that applies rlimits and the parent-death signal in
//!   the forked child, with async-signal-safe raw system calls only.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{Resource, Rlimit, Signal};
use rustix::thread::UnshareFlags;

/// Namespaces the launcher asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Namespaces {
    /// A network namespace (only loopback).
    pub net: bool,
    /// A mount namespace (to hide sockets).
    pub mount: bool,
    /// A PID namespace for the next child (it becomes PID 1 there).
    pub pid: bool,
}

/// Moves the calling thread into new namespaces.
///
/// # Errors
/// The system call's error (`EPERM` without `CAP_SYS_ADMIN`).
pub fn unshare(ns: Namespaces) -> io::Result<()> {
    let mut flags = UnshareFlags::empty();
    if ns.net {
        flags |= UnshareFlags::NEWNET;
    }
    if ns.mount {
        flags |= UnshareFlags::NEWNS;
    }
    if ns.pid {
        flags |= UnshareFlags::NEWPID;
    }
    // SAFETY: `unshare_unsafe` is unsafe only because `CLONE_FILES` would give this thread a
    // file table other threads do not see; these flags never include it. New network, mount
    // and PID namespaces affect this thread (and the PID namespace only its future children).
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)
}

/// Moves the whole process into a new mount namespace, and first into a new user namespace
/// when `user` is set (an unprivileged process). Only sound while the process has one thread:
/// the kernel refuses a new user namespace to a multi-threaded process, and a mount namespace
/// entered by one thread would not be the other threads'.
///
/// # Errors
/// The system call's error (`EINVAL` with other threads, `EPERM` where namespaces are
/// forbidden).
pub fn unshare_process(user: bool) -> io::Result<()> {
    let mut flags = UnshareFlags::NEWNS;
    if user {
        flags |= UnshareFlags::NEWUSER;
    }
    // SAFETY: as in [`unshare`]: the flags never include `CLONE_FILES`.
    unsafe { rustix::thread::unshare_unsafe(flags) }.map_err(io::Error::from)
}

/// Whether `attempt` returns `true` when run in a forked child, which then exits; `false`
/// when the fork fails. Only call it while the process has one thread (at start), so the
/// child is a whole copy of it.
pub fn succeeds_in_child(attempt: impl FnOnce() -> bool) -> bool {
    // SAFETY: with one thread there is no lock another thread could hold at the fork, so the
    // child may allocate; it never returns into the caller (it leaves by `_exit`).
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = attempt();
        // SAFETY: `_exit` ends the child without running the parent's exit handlers.
        unsafe { libc::_exit(i32::from(!ok)) };
    }
    if pid < 0 {
        return false;
    }
    let mut status = 0;
    // SAFETY: waits for the child forked above, with a valid pointer to its status.
    let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
    waited == pid && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Brings the loopback interface up in the calling thread's network namespace.
///
/// # Errors
/// Socket or ioctl errors.
pub fn loopback_up() -> io::Result<()> {
    let socket = rustix::net::socket(
        rustix::net::AddressFamily::INET,
        rustix::net::SocketType::DGRAM,
        None,
    )?;
    // SAFETY: `ifreq` is a plain C struct for which all-zero bytes are valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in req.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: the descriptor is an open socket owned by this function, and `req` is a valid,
    // NUL-terminated `ifreq` that outlives both calls; SIOCGIFFLAGS/SIOCSIFFLAGS read and
    // write only `ifr_name` and `ifru_flags` inside it.
    unsafe {
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) < 0 {
            return Err(io::Error::last_os_error());
        }
        req.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(socket.as_raw_fd(), libc::SIOCSIFFLAGS, &req) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Resource limits applied in the child before `exec` (0 leaves a resource unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChildLimits {
    /// `RLIMIT_NPROC`.
    pub processes: u64,
    /// `RLIMIT_AS`, bytes.
    pub address_space: u64,
    /// `RLIMIT_FSIZE`, bytes.
    pub file_size: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
}

/// Landlock's rights to read beneath a directory: execute, read files, list directories
/// (ABI 1; every Landlock kernel handles them).
const LANDLOCK_READ: u64 = (1 << 0) | (1 << 2) | (1 << 3);

/// `struct landlock_path_beneath_attr` of the kernel's UAPI.
#[repr(C, packed)]
struct PathBeneath {
    allowed_access: u64,
    parent_fd: i32,
}

/// Mounts a fresh `proc` over `/proc` in the calling process (PID 1 of a new PID namespace,
/// in a private mount namespace) and lets the Landlock ruleset `ruleset` read it: a rule on
/// the old `/proc` does not cover a filesystem mounted over it. Returns whether it did; when
/// the kernel refuses either step, the inherited `/proc` is left in place. Raw system calls
/// only, with static C strings: safe between fork and exec.
fn mount_fresh_proc(ruleset: i32) -> bool {
    use rustix::mount::{MountFlags, UnmountFlags};
    let mounted = rustix::mount::mount(
        c"proc",
        c"/proc",
        c"proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        c"",
    );
    if mounted.is_err() {
        return false;
    }
    let Ok(dir) = rustix::fs::open(
        c"/proc",
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        let _ = rustix::mount::unmount(c"/proc", UnmountFlags::DETACH);
        return false;
    };
    let attr = PathBeneath {
        allowed_access: LANDLOCK_READ,
        parent_fd: dir.as_raw_fd(),
    };
    // SAFETY: landlock_add_rule(2) with a ruleset fd, LANDLOCK_RULE_PATH_BENEATH (1) and a
    // pointer to a live, correctly laid out attribute struct; it reads nothing else.
    let added =
        unsafe { libc::syscall(libc::SYS_landlock_add_rule, ruleset, 1, &raw const attr, 0) };
    if added != 0 {
        let _ = rustix::mount::unmount(c"/proc", UnmountFlags::DETACH);
        return false;
    }
    true
}

/// Installs a `pre_exec` hook on `command`, PID 1 of a new PID namespace in a private mount
/// namespace: it mounts a fresh `proc` over `/proc`, readable through the Landlock ruleset
/// whose descriptor is `ruleset` ([`mount_fresh_proc`]), so the command sees only its own
/// processes; then it runs `then` (Landlock's `restrict_self`, which forbids mounting, so it
/// comes after). A `proc` the kernel refuses to mount (a container that masks parts of the
/// host's) leaves the inherited one in place.
pub fn fresh_proc_then(
    command: &mut Command,
    ruleset: std::os::fd::OwnedFd,
    mut then: impl FnMut() -> io::Result<()> + Send + Sync + 'static,
) {
    let hook = move || -> io::Result<()> {
        mount_fresh_proc(ruleset.as_raw_fd());
        then()
    };
    // SAFETY: the hook runs between fork and exec. [`mount_fresh_proc`] makes raw system
    // calls only; `then` must be async-signal-safe as well (the caller's is two raw system
    // calls on a ruleset built before the fork: prctl and landlock_restrict_self), so the
    // hook allocates nothing on its way to exec.
    unsafe {
        command.pre_exec(hook);
    }
}

/// Installs a `pre_exec` hook on `command`: sets `limits` (soft and hard) and asks the kernel
/// to SIGKILL the child when the thread that spawned it ends (so nothing outlives `agents`).
pub fn limit_child(command: &mut Command, limits: ChildLimits) {
    let hook = move || -> io::Result<()> {
        for (resource, value) in [
            (Resource::Nproc, limits.processes),
            (Resource::As, limits.address_space),
            (Resource::Fsize, limits.file_size),
            (Resource::Nofile, limits.open_files),
        ] {
            if value > 0 {
                let limit = Rlimit {
                    current: Some(value),
                    maximum: Some(value),
                };
                rustix::process::setrlimit(resource, limit)?;
            }
        }
        rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
        Ok(())
    };
    // SAFETY: the hook runs between fork and exec. It only makes raw system calls
    // (setrlimit, prctl) through rustix, allocates nothing, takes no locks and touches no
    // state shared with other threads, so it is async-signal-safe.
    unsafe {
        command.pre_exec(hook);
    }
}
