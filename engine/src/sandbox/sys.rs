//! The few system calls the launcher needs that have no safe wrapper (spec section 23
//! "Sandbox strategy"; `docs/sandbox.md`). This is the only module of the crate allowed to use
//! `unsafe`; each block says why it is sound (see `docs/decisions.md`, "Sandbox").
//!
//! - [`unshare`]: `unshare(2)` of the calling thread for new network, mount and PID
//!   namespaces. Never with `CLONE_FILES`, which is what makes rustix mark it unsafe.
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
