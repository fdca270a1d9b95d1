//! Plan ownership (spec section 08): the process driving a plan holds a lease row
//! (pid, host, kind) and refreshes its heartbeat every [`HEARTBEAT_INTERVAL`]. Others may read
//! the plan but cannot drive it. A lease whose process is gone or defunct (a zombie), whose pid
//! now belongs to another process (recycled: its start time differs from the one recorded), or
//! whose heartbeat is older than the expiry its owner declared (`lease-expiry-secs`, default
//! [`DEFAULT_EXPIRY`]), is stale: the next command moves the plan back to (same phase, queued)
//! with reason `interrupted`, and the next driver takes it over. An owner is a process on a
//! host: instances of a server on several machines share the database (spec section 21), and
//! their pids may coincide.


use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::domain::event::{LeaseOwner, PlanInterrupted};
use super::domain::id::Id;
use super::domain::lifecycle::{Phase, ProcessingState};
use super::events::{self, EventKind};
use super::store::leases::LeaseRow;
use super::store::{Location, Store, StoreError};

/// How often the owner refreshes its heartbeat.
pub const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(2);
/// How old a heartbeat may be before the lease counts as stale, unless `lease-expiry-secs`
/// says otherwise.
pub const DEFAULT_EXPIRY: Duration = Duration::from_secs(30);

/// The expiry this process declares on the leases it takes, in seconds (one per process: the
/// engine sets it from its settings).
static EXPIRY_SECS: std::sync::atomic::AtomicU64 =
    std::sync::atomic::AtomicU64::new(DEFAULT_EXPIRY.as_secs());

/// Sets the expiry this process declares on the leases it takes from now on.
pub fn set_expiry(expiry: Duration) {
    EXPIRY_SECS.store(expiry.as_secs().max(1), Ordering::SeqCst);
}

/// The expiry this process declares on the leases it takes.
pub fn expiry() -> Duration {
    Duration::from_secs(EXPIRY_SECS.load(Ordering::SeqCst))
}

/// A lease row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Lease {
    /// The plan driven.
    pub plan_id: Id,
    /// The owner's process id.
    pub pid: u32,
    /// The owner's host name.
    pub host: String,
    /// What the owner is doing (`strategize`, `execute`, `apply`, ...).
    pub kind: String,
    /// When it took the lease.
    pub acquired_at: Timestamp,
    /// Its last heartbeat.
    pub heartbeat_at: Timestamp,
    /// How long its heartbeat may be silent before the lease is stale.
    #[serde(skip)]
    pub expiry: Option<Duration>,
    /// The owner's start time (clock ticks after boot, `/proc/PID/stat`), when it could be
    /// read: a live process with this pid but another start time is not the owner.
    #[serde(skip)]
    pub started: Option<u64>,
}

/// Why a lease could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// Another live process drives the plan.
    #[error("plan is being run by pid {pid} on {host} ({kind})")]
    Held {
        /// The plan.
        plan_id: Id,
        /// The owner's pid.
        pid: u32,
        /// The owner's host.
        host: String,
        /// What it is doing.
        kind: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for LeaseError {
    fn from(e: rusqlite::Error) -> Self {
        LeaseError::Store(StoreError::Sqlite(e))
    }
}

/// This machine's host name (`localhost` when it cannot be read).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// Whether a process with this pid is running on this machine (zombies count as gone).
pub fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the parenthesised command name.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|s| s != "Z" && s != "X"),
        Err(_) => false,
    }
}

/// When the process with this pid started (clock ticks after boot, field 22 of
/// `/proc/PID/stat`), if it runs.
pub fn process_started(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name start with the state (field 3).
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

impl Lease {
    /// Whether the lease no longer protects anything: its heartbeat is older than its expiry
    /// ([`DEFAULT_EXPIRY`] when it declared none), or its owner ran on this host and is gone,
    /// defunct, or not the process that now has its pid (a recycled pid).
    pub fn is_stale(&self, now: Timestamp, this_host: &str) -> bool {
        let age = now.duration_since(self.heartbeat_at);
        let expiry = self.expiry.unwrap_or(DEFAULT_EXPIRY);
        let too_old = age.as_secs_f64() > expiry.as_secs_f64();
        let recycled = || {
            self.started
                .is_some_and(|t| process_started(self.pid).is_some_and(|now| now != t))
        };
        too_old || (self.host == this_host && (!process_alive(self.pid) || recycled()))
    }
}

fn read_lease(conn: &crate::store::Connection, plan_id: &Id) -> Result<Option<Lease>, StoreError> {
    let row = conn
        .query_row(
            "SELECT pid, host, kind, acquired_at, heartbeat_at, started, expiry_secs FROM plan_leases WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| {
                Ok((
                    (
                        r.get::<_, i64>(0)?,
                        r.get::<_, Option<i64>>(5)?,
                        r.get::<_, Option<i64>>(6)?,
                    ),
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            },
        )
        .optional()?;
    let corrupt = |m: String| StoreError::Corrupt {
        table: "plan_leases",
        column: "acquired_at",
        message: m,
    };
    row.map(|((pid, started, expiry), host, kind, acquired, heartbeat)| {
        Ok(Lease {
            plan_id: *plan_id,
            pid: u32::try_from(pid).unwrap_or(0),
            started: started.and_then(|t| u64::try_from(t).ok()),
            expiry: expiry
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
            host,
            kind,
            acquired_at: acquired
                .parse()
                .map_err(|e: jiff::Error| corrupt(e.to_string()))?,
            heartbeat_at: heartbeat
                .parse()
                .map_err(|e: jiff::Error| corrupt(e.to_string()))?,
        })
    })
    .transpose()
}

/// The current lease of a plan, if any (stale or not).
///
/// # Errors
/// [`StoreError`].
pub fn holder(store: &Store, plan_id: &Id) -> Result<Option<Lease>, StoreError> {
    read_lease(store.conn(), plan_id)
}

/// Moves a plan whose driver vanished back to (same phase, queued) with reason `interrupted`,
/// removing the stale lease, in one transaction with a `plan_interrupted` event. A plan left in
/// `processing` with no lease at all is treated the same. Returns whether anything changed.
///
/// # Errors
/// [`StoreError`].
pub fn recover_if_stale(store: &mut Store, plan_id: &Id) -> Result<bool, StoreError> {
    let host = host_name();
    // A live lease is the common case (every sweep and command asks): it is read without
    // taking the write lock; the transaction below checks again.
    if read_lease(store.conn(), plan_id)?.is_some_and(|l| !l.is_stale(Timestamp::now(), &host)) {
        return Ok(false);
    }
    let tx = store
        .conn_mut()
        .transaction()?;
    let changed = recover_in(&tx, plan_id, &host)?;
    tx.commit()?;
    Ok(changed)
}

fn recover_in(
    tx: &crate::store::Transaction<'_>,
    plan_id: &Id,
    host: &str,
) -> Result<bool, StoreError> {
    let lease = read_lease(tx, plan_id)?;
    if let Some(lease) = &lease
        && !lease.is_stale(Timestamp::now(), host)
    {
        return Ok(false);
    }
    let state: Option<(String, String)> = tx
        .query_row(
            "SELECT phase, state FROM plans WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| r.try_into(),
        )
        .optional()?;
    let Some((phase, state)) = state else {
        return Ok(false);
    };
    tx.execute(
        "DELETE FROM plan_leases WHERE plan_id = ?1",
        [plan_id.to_string()],
    )?;
    let state: ProcessingState = state.parse().map_err(|m| StoreError::Corrupt {
        table: "plans",
        column: "state",
        message: m,
    })?;
    let phase: Phase = phase.parse().map_err(|m| StoreError::Corrupt {
        table: "plans",
        column: "phase",
        message: m,
    })?;
    let after = match state {
        ProcessingState::Processing => ProcessingState::Queued,
        // Between two pieces of work (just created, or one phase done and the next not yet
        // begun): the driver would have moved on by itself unless the plan waits for a human.
        ProcessingState::Queued | ProcessingState::Complete
            if lease.is_some()
                && phase != Phase::Applied
                && crate::store::approvals::pending_ids_in(tx, plan_id, None)?.is_empty() =>
        {
            state
        }
        _ => return Ok(lease.is_some()),
    };
    tx.execute(
        "UPDATE plans SET state = ?2, state_reason = 'interrupted', updated_at = ?3 WHERE plan_id = ?1",
        params![plan_id.to_string(), after.as_str(), Timestamp::now().to_string()],
    )?;
    events::append(
        tx,
        Some(plan_id),
        &EventKind::PlanInterrupted(PlanInterrupted {
            phase,
            state: after,
            reason: "interrupted".into(),
            previous_owner: Some(lease.as_ref().map(|l| LeaseOwner {
                pid: l.pid,
                host: l.host.clone(),
                kind: l.kind.clone(),
            })),
            by: None,
            handover: false,
        }),
    )?;
    Ok(true)
}

/// This process's lease row for doing `kind`: what [`acquire`] writes, and what
/// `Store::create_plan` writes for the plan's creator, in the transaction that creates it, so
/// that the plan is never without a driver before its driver takes the lease (which this
/// process may do without a conflict). A creator that dies in between leaves a stale lease, so
/// the plan is taken over rather than left queued.
pub fn this_process(kind: &str) -> LeaseRow {
    let pid = std::process::id();
    LeaseRow {
        pid,
        host: host_name(),
        kind: kind.to_string(),
        started: process_started(pid),
        expiry: expiry(),
    }
}

/// A held lease. Its heartbeat runs on a background thread with its own connection; dropping
/// the guard stops the heartbeat and releases the lease.
#[derive(Debug)]
pub struct LeaseGuard {
    plan_id: Id,
    db: Location,
    host: String,
    stop: Option<mpsc::Sender<()>>,
    heartbeat: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl LeaseGuard {
    /// The plan this guard drives.
    pub fn plan_id(&self) -> &Id {
        &self.plan_id
    }

    /// Whether the heartbeat found the lease taken over (another process judged it stale);
    /// the owner must stop driving the plan.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(handle) = self.heartbeat.take() {
            let _ = handle.join();
        }
        // The row goes before this process may take the lease again (see `held_here`).
        let mut held = held_here();
        if let Ok(store) = self.db.open() {
            let _ = store.conn().execute(
                "DELETE FROM plan_leases WHERE plan_id = ?1 AND pid = ?2 AND host = ?3",
                params![self.plan_id.to_string(), std::process::id(), self.host],
            );
        }
        held.remove(&(self.db.clone(), self.plan_id));
    }
}

/// The leases this process holds, by database and plan: a server drives many plans in one
/// process, so the row's pid alone cannot tell a driver of this process from another request
/// of it (a second `plan execute`, a `plan cancel`) that must wait or be refused.
fn held_here() -> PlanSetGuard {
    static HELD: PlanSet = std::sync::OnceLock::new();
    locked(&HELD)
}

/// A process-wide set of (database, plan), made on first use.
type PlanSet = std::sync::OnceLock<std::sync::Mutex<std::collections::HashSet<(Location, Id)>>>;
type PlanSetGuard = std::sync::MutexGuard<'static, std::collections::HashSet<(Location, Id)>>;

/// `set`, locked (a panic elsewhere while it was held does not make it unusable).
fn locked(set: &'static PlanSet) -> PlanSetGuard {
    set.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Takes the lease on a plan for this process, recovering a stale lease first.
///
/// # Errors
/// [`LeaseError::Held`] naming the live owner (this process too, when another of its drivers
/// holds the plan); [`LeaseError::Store`].
pub fn acquire(store: &mut Store, plan_id: &Id, kind: &str) -> Result<LeaseGuard, LeaseError> {
    let host = host_name();
    let pid = std::process::id();
    let key = (store.location().clone(), *plan_id);
    let mut held = held_here();
    let tx = store
        .conn_mut()
        .transaction()?;
    recover_in(&tx, plan_id, &host)?;
    if let Some(lease) = read_lease(&tx, plan_id)?
        && (lease.pid != pid || lease.host != host || held.contains(&key))
    {
        return Err(LeaseError::Held {
            plan_id: *plan_id,
            pid: lease.pid,
            host: lease.host,
            kind: doing(&tx, plan_id, lease.kind)?,
        });
    }
    crate::store::leases::write_in(&tx, plan_id, &this_process(kind))?;
    tx.commit()?;
    lost_here().remove(&key);
    held.insert(key.clone());
    Ok(start_heartbeat(key, host))
}

/// What the holder of a lease is doing: a driver takes its lease under the phase the plan was
/// in and runs on through the next ones, so a phase name reads as the plan's phase now.
fn doing(tx: &crate::store::Transaction<'_>, plan_id: &Id, kind: String) -> Result<String, LeaseError> {
    if !["strategize", "execute", "apply"].contains(&kind.as_str()) {
        return Ok(kind);
    }
    let phase: Option<String> = tx
        .query_row(
            "SELECT phase FROM plans WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| r.get(0),
        )
        .optional()?;
    Ok(phase.unwrap_or(kind))
}

/// The leases of this process that another process took over (its heartbeat found the row
/// gone or another owner's): the work under them stops at its next check ([`is_lost`]).
fn lost_here() -> PlanSetGuard {
    static LOST: PlanSet = std::sync::OnceLock::new();
    locked(&LOST)
}

/// Whether this process's lease on `plan_id` in `db` was taken over by another process (one
/// that judged it stale, for instance while this process was frozen): whoever works under it
/// must stop without writing more.
pub fn is_lost(db: &Location, plan_id: &Id) -> bool {
    lost_here().contains(&(db.clone(), *plan_id))
}

fn start_heartbeat(key: (Location, Id), host: String) -> LeaseGuard {
    let guard_host = host.clone();
    let (stop, stopped) = mpsc::channel::<()>();
    let lost = Arc::new(AtomicBool::new(false));
    let thread_lost = Arc::clone(&lost);
    let (db, plan_id) = key.clone();
    let location = db.clone();
    let heartbeat = std::thread::Builder::new()
        .name(format!("lease-{}", plan_id.short()))
        .spawn(move || {
            let Ok(store) = location.open() else {
                return;
            };
            while let Err(mpsc::RecvTimeoutError::Timeout) =
                stopped.recv_timeout(HEARTBEAT_INTERVAL)
            {
                let updated = store.conn().execute(
                    "UPDATE plan_leases SET heartbeat_at = ?3 WHERE plan_id = ?1 AND pid = ?2 AND host = ?4",
                    params![
                        plan_id.to_string(),
                        std::process::id(),
                        Timestamp::now().to_string(),
                        host
                    ],
                );
                if matches!(updated, Ok(0)) {
                    thread_lost.store(true, Ordering::SeqCst);
                    lost_here().insert(key);
                    tracing::warn!(plan = %plan_id, "another process took this plan's lease over; its work here stops");
                    return;
                }
            }
        })
        .ok();
    LeaseGuard {
        plan_id,
        db,
        host: guard_host,
        stop: Some(stop),
        heartbeat,
        lost,
    }
}

/// Asks the owner of a plan to cancel it (`plan cancel`): sets `cancel_requested` with the
/// reason. The owner checks it at every model turn and tool call.
///
/// # Errors
/// [`StoreError`]. Returns false when the plan does not exist.
pub fn request_cancel(
    store: &mut Store,
    plan_id: &Id,
    reason: Option<&str>,
) -> Result<bool, StoreError> {
    let n = store.conn().execute(
        "UPDATE plans SET cancel_requested = 1, cancel_reason = ?2, updated_at = ?3 WHERE plan_id = ?1",
        params![plan_id.to_string(), reason, Timestamp::now().to_string()],
    )?;
    Ok(n == 1)
}

/// Whether cancellation was requested for a plan.
///
/// # Errors
/// [`StoreError`].
pub fn cancel_requested(store: &Store, plan_id: &Id) -> Result<bool, StoreError> {
    Ok(store
        .conn()
        .query_row(
            "SELECT cancel_requested FROM plans WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| r.get::<_, i64>(0),
        )
        .optional()?
        .is_some_and(|v| v != 0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    fn setup() -> (tempfile::TempDir, Store, Id) {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        (dir, store, plan.plan_id)
    }

    fn insert_lease(store: &Store, plan: &Id, pid: u32, heartbeat: Timestamp) {
        store
            .conn()
            .execute(
                "INSERT INTO plan_leases (plan_id, pid, host, kind, acquired_at, heartbeat_at) VALUES (?1, ?2, ?3, 'execute', ?4, ?4)",
                params![plan.to_string(), pid, host_name(), heartbeat.to_string()],
            )
            .unwrap();
    }

    #[test]
    fn a_second_process_cannot_drive_a_plan_with_a_live_owner() {
        let (_dir, mut store, plan) = setup();
        // A live process that is not us: our parent (the test runner's parent shell or cargo).
        let other = std::os::unix::process::parent_id();
        insert_lease(&store, &plan, other, Timestamp::now());
        match acquire(&mut store, &plan, "execute") {
            Err(LeaseError::Held { pid, .. }) => assert_eq!(pid, other),
            other => panic!("expected Held, got {other:?}"),
        }
    }

    #[test]
    fn a_held_lease_names_the_phase_the_plan_is_in_now() {
        let (_dir, mut store, plan) = setup();
        let other = std::os::unix::process::parent_id();
        // Taken under strategize; the driver has since moved the plan on to Apply.
        insert_lease(&store, &plan, other, Timestamp::now());
        store
            .conn()
            .execute(
                "UPDATE plan_leases SET kind = 'strategize' WHERE plan_id = ?1",
                [plan.to_string()],
            )
            .unwrap();
        store
            .conn()
            .execute(
                "UPDATE plans SET phase = 'apply' WHERE plan_id = ?1",
                [plan.to_string()],
            )
            .unwrap();
        match acquire(&mut store, &plan, "execute") {
            Err(LeaseError::Held { kind, .. }) => assert_eq!(kind, "apply"),
            other => panic!("expected Held, got {other:?}"),
        }
    }

    #[test]
    fn a_lease_of_a_dead_process_is_recovered_and_the_plan_requeued() {
        let (_dir, mut store, plan) = setup();
        store
            .conn()
            .execute(
                "UPDATE plans SET phase = 'execute', state = 'processing' WHERE plan_id = ?1",
                [plan.to_string()],
            )
            .unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        insert_lease(&store, &plan, dead, Timestamp::now());
        assert!(recover_if_stale(&mut store, &plan).unwrap());
        let p = store.plan(&plan).unwrap().unwrap();
        assert_eq!(
            (p.phase(), p.state()),
            (Phase::Execute, ProcessingState::Queued)
        );
        let events = events::after(&store, 0, Some(&plan), 10).unwrap();
        let EventKind::PlanInterrupted(last) = &events.last().unwrap().kind else {
            panic!("not plan_interrupted: {:?}", events.last());
        };
        assert_eq!(last.reason, "interrupted");
        assert!(holder(&store, &plan).unwrap().is_none());
    }

    fn lease_of(pid: u32, started: Option<u64>) -> Lease {
        Lease {
            plan_id: Id::generate(),
            pid,
            host: host_name(),
            kind: "execute".into(),
            acquired_at: Timestamp::now(),
            heartbeat_at: Timestamp::now(),
            started,
            expiry: None,
        }
    }

    #[test]
    fn a_zombie_owner_does_not_hold_its_lease() {
        // Killed and not yet reaped: defunct, its pid still listed.
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let started = process_started(pid);
        assert!(started.is_some());
        assert!(!lease_of(pid, started).is_stale(Timestamp::now(), &host_name()));
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while process_alive(pid) {
            assert!(
                std::time::Instant::now() < deadline,
                "never became a zombie"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok(),
            "still listed as a zombie"
        );
        assert!(lease_of(pid, started).is_stale(Timestamp::now(), &host_name()));
        child.wait().unwrap();
    }

    #[test]
    fn a_recycled_pid_does_not_hold_the_lease_of_the_process_that_had_it() {
        let (_dir, mut store, plan) = setup();
        let other = std::os::unix::process::parent_id();
        let started = process_started(other).unwrap();
        // The recorded owner started at another time: the live process is not it.
        insert_lease(&store, &plan, other, Timestamp::now());
        store
            .conn()
            .execute(
                "UPDATE plan_leases SET started = ?2 WHERE plan_id = ?1",
                params![plan.to_string(), i64::try_from(started + 1).unwrap()],
            )
            .unwrap();
        assert!(lease_of(other, Some(started + 1)).is_stale(Timestamp::now(), &host_name()));
        assert!(!lease_of(other, Some(started)).is_stale(Timestamp::now(), &host_name()));
        let guard = acquire(&mut store, &plan, "execute").unwrap();
        let lease = holder(&store, &plan).unwrap().unwrap();
        assert_eq!(
            (lease.pid, lease.started),
            (std::process::id(), process_started(std::process::id()))
        );
        drop(guard);
    }

    #[test]
    fn an_old_heartbeat_is_stale_even_if_the_pid_exists() {
        let lease = Lease {
            plan_id: Id::generate(),
            pid: std::process::id(),
            host: host_name(),
            kind: "execute".into(),
            acquired_at: Timestamp::now(),
            heartbeat_at: Timestamp::now() - jiff::SignedDuration::from_secs(31),
            started: None,
            expiry: None,
        };
        assert!(lease.is_stale(Timestamp::now(), &host_name()));
        let fresh = Lease {
            heartbeat_at: Timestamp::now(),
            ..lease
        };
        assert!(!fresh.is_stale(Timestamp::now(), &host_name()));
    }

    #[test]
    fn a_lease_is_judged_by_the_expiry_its_owner_declared() {
        let lease = Lease {
            heartbeat_at: Timestamp::now() - jiff::SignedDuration::from_secs(6),
            expiry: Some(Duration::from_secs(5)),
            ..lease_of(std::process::id(), None)
        };
        assert!(lease.is_stale(Timestamp::now(), &host_name()));
        let patient = Lease {
            expiry: Some(Duration::from_secs(60)),
            ..lease
        };
        assert!(!patient.is_stale(Timestamp::now(), &host_name()));
    }

    #[test]
    fn a_live_owner_on_another_host_holds_its_lease_until_its_heartbeat_expires() {
        // Its pid may well be alive here: on another machine it is another process.
        let elsewhere = Lease {
            host: format!("{}-elsewhere", host_name()),
            ..lease_of(1, None)
        };
        assert!(!elsewhere.is_stale(Timestamp::now(), &host_name()));
        let silent = Lease {
            heartbeat_at: Timestamp::now() - jiff::SignedDuration::from_secs(31),
            ..elsewhere
        };
        assert!(silent.is_stale(Timestamp::now(), &host_name()));
    }

    #[test]
    fn acquiring_then_dropping_releases_the_lease() {
        let (_dir, mut store, plan) = setup();
        let guard = acquire(&mut store, &plan, "strategize").unwrap();
        let lease = holder(&store, &plan).unwrap().unwrap();
        assert_eq!(
            (lease.pid, lease.kind.as_str()),
            (std::process::id(), "strategize")
        );
        assert!(!guard.is_lost());
        drop(guard);
        assert!(holder(&store, &plan).unwrap().is_none());
    }

    #[test]
    fn cancellation_is_a_flag_the_owner_can_read() {
        let (_dir, mut store, plan) = setup();
        assert!(!cancel_requested(&store, &plan).unwrap());
        assert!(request_cancel(&mut store, &plan, Some("wrong approach")).unwrap());
        assert!(cancel_requested(&store, &plan).unwrap());
        assert!(!request_cancel(&mut store, &Id::generate(), None).unwrap());
    }
}
