//! Overlay mounts of shared checkouts, inside the process's own mount namespace
//! (`docs/sandbox.md`, "Shared checkouts"; `docs/decisions.md` D-largerepo-2 to 4).
//!
//! At start, while it has one thread, the `agents` process enters a mount namespace of its own
//! ([`enter_own_namespace`]; unprivileged, inside a user namespace that maps its uid and gid
//! to themselves) and marks every mount private. A sandbox that shares its base's checkout is
//! then an overlay mounted at its `work/` path in this process only: nothing is mounted on the
//! host, and the launcher's children inherit the mount with the namespace they copy.
//!
//! A mount lives as long as a [`MountGuard`] of it does in this process: every [`Sandbox`]
//! holds one, so whoever resolved a sandbox reads the merged tree until it lets go, and a
//! long-lived process (the TUI, a server) mounts afresh for each use instead of keeping a
//! mount another process may have written around.
//!
//! [`Sandbox`]: super::Sandbox

use std::collections::HashMap;
use std::ffi::CString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, Weak};

use super::{Layout, SandboxError};

/// The environment variable that turns shared checkouts off (`0`): a full checkout per
/// sandbox. Shared checkouts are on otherwise, where the kernel allows them.
pub const SWITCH: &str = "CLEVERAGENTS_SANDBOX_OVERLAY";

/// Whether a process whose environment holds `value` for [`SWITCH`] asks for shared
/// checkouts: every value but `0` does, and so does no value.
pub fn wanted(value: Option<&std::ffi::OsStr>) -> bool {
    value.is_none_or(|v| v != "0")
}

/// How this process makes sandboxes of git checkouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// Sandboxes at one base share a checkout through an overlay in this process's own mount
    /// namespace.
    Overlay {
        /// Whether the namespace sits inside a user namespace of its own (an unprivileged
        /// process); a root process enters only a mount namespace.
        user_namespace: bool,
    },
    /// A full checkout per sandbox, and why.
    FullCheckouts(String),
}

impl Mode {
    /// One line for `agents diagnostics`.
    pub fn describe(&self) -> String {
        match self {
            Mode::Overlay {
                user_namespace: true,
            } => "sandboxes at one base share a checkout through an overlay (user and mount \
                  namespace of its own)"
                .into(),
            Mode::Overlay {
                user_namespace: false,
            } => "sandboxes at one base share a checkout through an overlay (mount namespace \
                  of its own)"
                .into(),
            Mode::FullCheckouts(why) => format!("a full checkout per sandbox ({why})"),
        }
    }
}

static MODE: OnceLock<Mode> = OnceLock::new();

/// Enters the process's own mount namespace when `wanted`, once, and records the outcome for
/// the process. Call it first thing in `main`, before any thread starts; later calls return
/// the recorded mode.
pub fn enter_own_namespace(wanted: bool) -> &'static Mode {
    MODE.get_or_init(|| {
        if !wanted {
            return Mode::FullCheckouts(format!("shared checkouts are off: {SWITCH}=0"));
        }
        match enter() {
            Ok(user_namespace) => Mode::Overlay { user_namespace },
            Err(why) => Mode::FullCheckouts(why),
        }
    })
}

/// Why this process stopped sharing checkouts after entering its namespace: an overlay
/// could not be mounted ([`refused`]).
static REFUSED: OnceLock<String> = OnceLock::new();

/// The mode this process recorded; a process that never entered a namespace of its own
/// (a library caller, a test) makes full checkouts.
pub fn mode() -> Mode {
    if let Some(why) = REFUSED.get() {
        return Mode::FullCheckouts(format!("an overlay could not be mounted here: {why}"));
    }
    MODE.get().cloned().unwrap_or_else(|| {
        Mode::FullCheckouts("this process did not enter a mount namespace of its own".into())
    })
}

/// Records that mounting an overlay failed for a new sandbox: this process makes full
/// checkouts from now on (sandboxes that share a checkout already are still mounted).
pub(crate) fn refused(why: &str) {
    let _ = REFUSED.set(why.to_string());
}

/// Whether new sandboxes of git checkouts share their base's checkout.
pub fn in_use() -> bool {
    matches!(mode(), Mode::Overlay { .. })
}

fn enter() -> Result<bool, String> {
    let threads = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u32>().ok())
        });
    if threads != Some(1) {
        return Err("the process had more than one thread when it started".into());
    }
    let user = !rustix::process::geteuid().is_root();
    // A user namespace entered but left without its uid map would leave the process as
    // nobody: a child tries first, and the process follows only where it succeeded.
    if user && !super::sys::succeeds_in_child(|| enter_namespaces(true).is_ok()) {
        return Err("user namespaces are refused to this user here".into());
    }
    enter_namespaces(user)?;
    Ok(user)
}

/// Enters a mount namespace (and a user namespace mapping the uid and gid to themselves,
/// when `user`) and makes every mount in it private.
fn enter_namespaces(user: bool) -> Result<(), String> {
    use rustix::mount::MountPropagationFlags;
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    super::sys::unshare_process(user).map_err(|e| format!("no namespace of its own: {e}"))?;
    if user {
        let write = |file: &str, text: String| {
            std::fs::write(file, text).map_err(|e| format!("cannot write {file}: {e}"))
        };
        write("/proc/self/setgroups", "deny".into())?;
        write("/proc/self/uid_map", format!("{uid} {uid} 1"))?;
        write("/proc/self/gid_map", format!("{gid} {gid} 1"))?;
    }
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )
    .map_err(|e| format!("cannot make the mounts private: {e}"))
}

/// Whether overlay options can name these directories (the kernel splits them at `,` and
/// `:`; no escaping is attempted).
pub(crate) fn nameable(paths: &[&Path]) -> bool {
    paths.iter().all(|p| {
        p.to_str()
            .is_some_and(|s| !s.contains([',', ':', '\\', '\0']))
    })
}

/// One overlay mounted by this process.
#[derive(Debug)]
struct Mounted {
    work: PathBuf,
    generation: u64,
    /// The overlay's work directory of this mount alone (see [`mount`]).
    scratch: PathBuf,
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let mut mounts = registry();
        let current = mounts
            .get(&self.work)
            .is_some_and(|(g, _)| *g == self.generation);
        if current {
            mounts.remove(&self.work);
            detach(&self.work);
        }
        remove_scratch(&self.scratch);
    }
}

/// Removes a mount's own overlay work directory once it is detached (the kernel leaves a
/// directory without permissions in it).
fn remove_scratch(scratch: &Path) {
    open_scratch(scratch);
    let _ = std::fs::remove_dir_all(scratch);
}

/// Lets the owner read what the kernel left in an overlay work directory.
pub(crate) fn open_scratch(scratch: &Path) {
    use std::os::unix::fs::PermissionsExt;
    for name in ["work", "index"] {
        let dir = scratch.join(name);
        let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
    }
}

/// Keeps a sandbox's overlay mounted while any copy of it lives (none for a full checkout).
#[derive(Debug, Clone, Default)]
pub struct MountGuard(Option<Arc<Mounted>>);

impl MountGuard {
    /// Whether this guard keeps an overlay mounted (false for a full checkout).
    pub fn holds_mount(&self) -> bool {
        self.0.is_some()
    }
}

impl PartialEq for MountGuard {
    /// A guard carries no data: values that hold one compare by their other fields.
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

type Registry = HashMap<PathBuf, (u64, Weak<Mounted>)>;

static MOUNTS: LazyLock<Mutex<(Registry, u64)>> = LazyLock::new(Default::default);

struct Mounts(std::sync::MutexGuard<'static, (Registry, u64)>);

impl std::ops::Deref for Mounts {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        &self.0.0
    }
}

impl std::ops::DerefMut for Mounts {
    fn deref_mut(&mut self) -> &mut Registry {
        &mut self.0.0
    }
}

fn registry() -> Mounts {
    Mounts(MOUNTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// Whether this process holds an overlay mounted at `work` (a sandbox's work path), so what
/// is read there is the merged tree.
pub(crate) fn held(work: &Path) -> bool {
    let mounts = registry();
    if mounts.get(work).is_some_and(|(_, w)| w.strong_count() > 0) {
        return true;
    }
    // The same directory by another spelling (libgit2 reports paths resolved).
    let Ok(real) = std::fs::canonicalize(work) else {
        return false;
    };
    mounts.iter().any(|(at, (_, w))| {
        w.strong_count() > 0 && std::fs::canonicalize(at).is_ok_and(|at| at == real)
    })
}

/// Whether `dir` is the root of a mount (its device differs from its parent's).
fn is_mount_root(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Some(Ok(parent))) = (
        std::fs::symlink_metadata(dir),
        dir.parent().map(std::fs::symlink_metadata),
    ) else {
        return false;
    };
    here.dev() != parent.dev()
}

/// Detaches every mount stacked at `dir` in this namespace.
fn detach(dir: &Path) {
    for _ in 0..8 {
        if !is_mount_root(dir)
            || rustix::mount::unmount(dir, rustix::mount::UnmountFlags::DETACH).is_err()
        {
            return;
        }
    }
}

/// Mounts the overlay of `layout` over the shared checkout `lower` at its work path, or
/// shares the mount this process holds already.
///
/// # Errors
/// [`SandboxError::Overlay`] when this process cannot mount overlays or the kernel refuses.
pub(crate) fn mount(layout: &Layout, lower: &Path) -> Result<MountGuard, SandboxError> {
    // The namespace entered, even where a refused mount turned new sandboxes into full
    // checkouts: the sandboxes that share a checkout already are mounted as before.
    let Some(Mode::Overlay { user_namespace }) = MODE.get().cloned() else {
        return Err(SandboxError::Overlay(format!(
            "the sandbox at {} shares a checkout through an overlay, which this process \
             cannot mount: {}; run agents without {SWITCH}=0",
            layout.root.display(),
            mode().describe()
        )));
    };
    let mut mounts = registry();
    if let Some(held) = mounts.get(&layout.work_dir).and_then(|(_, w)| w.upgrade()) {
        return Ok(MountGuard(Some(held)));
    }
    // A mount inherited from the process that started this one may be stale: this process
    // mounts its own.
    detach(&layout.work_dir);
    // Each mount has a work directory of its own: mounting prepares (empties) it, which would
    // break the copy-ups of another process's mount of the same sandbox using the same one.
    let generation = mounts.0.1 + 1;
    let scratch = layout
        .overlay_work_dir
        .join(format!("{}-{generation}", std::process::id()));
    remove_scratch(&scratch);
    std::fs::create_dir_all(&scratch).map_err(|e| {
        SandboxError::Overlay(format!("cannot create {}: {e}", scratch.display()))
    })?;
    mount_at(layout, lower, &scratch, user_namespace).inspect_err(|_| remove_scratch(&scratch))?;
    mounts.0.1 = generation;
    let held = Arc::new(Mounted {
        work: layout.work_dir.clone(),
        generation,
        scratch,
    });
    mounts.insert(layout.work_dir.clone(), (generation, Arc::downgrade(&held)));
    Ok(MountGuard(Some(held)))
}

/// Mounts the overlay, `volatile` where the kernel has it (Linux 5.10 and later), else
/// without.
///
/// A volatile overlay does not flush its upper directory's file system when it is synced or
/// unmounted. Without it every unmount syncs the whole file system holding the sandboxes (the
/// kernel's overlay `sync_fs`), which took 20 to 115 ms of each command that read a sandbox,
/// the time depending on what anyone else had written lately. Nothing relies on that flush:
/// a checkpoint stores the step's files in the sandbox's own repository, outside the overlay,
/// and a crash loses no more than it loses of any file written without `fsync`. Each mount
/// has its own overlay work directory, so the marker a volatile mount leaves there after a
/// crash never stops a later mount.
fn mount_at(
    layout: &Layout,
    lower: &Path,
    scratch: &Path,
    user_namespace: bool,
) -> Result<(), SandboxError> {
    let mount = |volatile: bool| -> Result<(), SandboxError> {
        let data = options(layout, lower, scratch, user_namespace, volatile)?;
        rustix::mount::mount(
            "overlay",
            &layout.work_dir,
            "overlay",
            rustix::mount::MountFlags::empty(),
            Some(data.as_c_str()),
        )
        .map_err(|e| {
            SandboxError::Overlay(format!(
                "cannot mount the overlay at {}: {e}",
                layout.work_dir.display()
            ))
        })
    };
    // An older kernel refuses the option it does not know.
    mount(true).or_else(|_| mount(false))
}

/// The overlay's mount options for `layout` over `lower`.
fn options(
    layout: &Layout,
    lower: &Path,
    scratch: &Path,
    user_namespace: bool,
    volatile: bool,
) -> Result<CString, SandboxError> {
    let dirs = [lower, &layout.upper_dir, scratch];
    if !nameable(&dirs) {
        return Err(SandboxError::Overlay(format!(
            "overlay options cannot name {}",
            layout.root.display()
        )));
    }
    let options = format!(
        "lowerdir={},upperdir={},workdir={}{}{}",
        lower.display(),
        layout.upper_dir.display(),
        scratch.display(),
        if user_namespace {
            ",userxattr"
        } else {
            // Moving a directory of the shared checkout needs redirects; an unprivileged
            // mount cannot have them (such a move copies instead, as `mv` does).
            ",redirect_dir=on"
        },
        if volatile { ",volatile" } else { "" }
    );
    CString::new(options)
        .map_err(|_| SandboxError::Overlay("an overlay option holds a NUL byte".into()))
}

/// Unmounts the overlay at `work` now, whoever in this process still holds it (they keep
/// reading the detached tree until they let go): a sandbox's work tree is being taken away.
pub(crate) fn unmount_now(work: &Path) {
    let mut mounts = registry();
    mounts.remove(work);
    detach(work);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_did_not_enter_its_namespace_makes_full_checkouts_and_says_why() {
        // Unit tests run on many threads: the mode is never recorded here.
        assert!(!in_use());
        let layout = Layout::at(Path::new("/nonexistent/sb"));
        let err = mount(&layout, Path::new("/nonexistent/base")).unwrap_err();
        assert!(
            err.to_string().contains("cannot mount") && err.to_string().contains(SWITCH),
            "{err}"
        );
    }

    #[test]
    fn overlay_options_refuse_paths_the_kernel_would_split() {
        assert!(nameable(&[Path::new("/data/sandboxes/bases/x/work")]));
        assert!(!nameable(&[Path::new("/data,upperdir=/etc/work")]));
        assert!(!nameable(&[Path::new("/data/a:b")]));
    }
}
