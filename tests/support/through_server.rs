//! The suite through a server (spec section 21: output and exit codes are the same in process
//! and through a server).
//!
//! - `AGENTS_TEST_THROUGH_SERVER=1`: every command an [`Env`] runs goes to an `agents server
//!   start` that serves the environment's data directory and config file, from a client data
//!   directory of its own (which must hold no database afterwards). The server is started on
//!   the first command and restarted when the test rewrites the config file, so it always runs
//!   with the settings the test wrote.
//! - `AGENTS_TEST_RECORD=DIR`: the `data` of every JSON answer, masked ([`masked`]), is
//!   appended to `DIR/<test name>.jsonl` with the arguments and the exit code.
//!
//! `scripts/test-through-server.sh` runs chosen tests in process and through a server with
//! recording on, and compares the two records.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::Mutex;
use std::time::SystemTime;

use serde_json::Value;

use super::Env;

/// Whether the suite runs through a server.
pub fn enabled() -> bool {
    std::env::var_os("AGENTS_TEST_THROUGH_SERVER").is_some_and(|v| v == "1")
}

/// A server started for one [`Env`], and the config file it was started with.
pub struct Served {
    url: String,
    token: String,
    child: Child,
    config_stamp: Option<(SystemTime, u64)>,
}

/// The server of an [`Env`], if one was started.
#[derive(Default)]
pub struct ServedSlot(Mutex<Option<Served>>);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config_stamp(path: &Path) -> Option<(SystemTime, u64)> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.modified().ok()?, meta.len()))
}

/// Starts `agents server start` on `env`'s data directory with a new token.
fn start(env: &Env) -> Served {
    let config_stamp = config_stamp(&env.config_path);
    // A restarted server takes a token of its own: the first one's name is still active.
    static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("suite-{n}");
    let (url, token, child) = super::server::spawn(env, &name, &["--listen", "127.0.0.1:0"]);
    Served {
        url,
        token,
        child,
        config_stamp,
    }
}

impl ServedSlot {
    /// Stops this environment's server, if one runs: the next command starts one afresh,
    /// with the environment's settings as they are then.
    pub(super) fn restart(&self) {
        *self.0.lock().unwrap() = None;
    }
}

impl Env {
    /// The client's data directory when the suite runs through a server.
    pub fn client_data_dir(&self) -> PathBuf {
        self.root().join("client-data")
    }

    /// `args` as a client of this environment's server (started, or restarted after a config
    /// change, first).
    pub(super) fn served_command(&self, args: &[&str]) -> Command {
        let mut slot = self.served.0.lock().unwrap();
        let stale = slot
            .as_ref()
            .is_some_and(|s| s.config_stamp != config_stamp(&self.config_path));
        if stale {
            *slot = None;
        }
        let served = slot.get_or_insert_with(|| start(self));
        let mut cmd = self.bare_command(&self.client_data_dir());
        cmd.arg("--server")
            .arg(&served.url)
            .env("AGENTS_TOKEN", &served.token)
            .args(args);
        cmd
    }

    /// Panics when the suite ran through a server and the client's data directory holds a
    /// database: the client must keep nothing of the server's state.
    pub(super) fn check_client_kept_no_database(&self) {
        let db = self.client_data_dir().join("cleveragents.db");
        assert!(
            !db.exists(),
            "the client's data directory holds a database: {}",
            db.display()
        );
    }
}

/// Appends one JSON answer to the record of the running test, when recording.
pub fn record(env: &Env, args: &[&str], doc: &Value, code: i32) {
    let Some(dir) = std::env::var_os("AGENTS_TEST_RECORD") else {
        return;
    };
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", ".");
    std::fs::create_dir_all(&dir).unwrap();
    let line = serde_json::json!({
        "args": args.iter().map(|a| mask_text(env, a)).collect::<Vec<_>>(),
        "code": code,
        "data": masked(env, doc.get("data").cloned().unwrap_or(Value::Null)),
    });
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&dir).join(format!("{test}.jsonl")))
        .unwrap();
    writeln!(file, "{line}").unwrap();
}

/// Whether the calling test must end here because it runs through a server and tests what
/// only a process that drives its own plans does (killing or interrupting the client, which
/// through a server stops only the client's wait). Says so on stderr and, when recording, in
/// `DIR/<test name>.in-process-only`, which `scripts/compare-records.py` lists.
pub fn in_process_only(why: &str) -> bool {
    if !enabled() {
        return false;
    }
    let test = std::thread::current()
        .name()
        .unwrap_or("unnamed")
        .replace("::", ".");
    // Said on stderr too, so a run that records nothing still shows which tests stayed local.
    let _ = writeln!(std::io::stderr(), "{test}: in process only: {why}");
    if let Some(dir) = std::env::var_os("AGENTS_TEST_RECORD") {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(Path::new(&dir).join(format!("{test}.in-process-only")), why).unwrap();
    }
    true
}

/// `data` with what differs between two runs of one test masked: the temporary root, ids,
/// times, durations, and the global options a suggested command repeats. Attribution (who
/// caused an event, created or approved a plan, set a review mark) is recorded only for a
/// server's users, so it is left out.
pub fn masked(env: &Env, mut data: Value) -> Value {
    fn walk(env: &Env, key: Option<&str>, v: &mut Value) {
        if let Value::Object(o) = v {
            o.remove("caused_by");
            o.remove("attribution");
            if o.contains_key("mark") && o.contains_key("reviewer") {
                o.remove("reviewer");
            }
        }
        // Times, and sizes of files whose bytes hold times (an index's segments).
        let timing = key.is_some_and(|k| {
            k == "size_bytes"
                || k == "pid"
                || k.ends_with("_ms")
                || k.ends_with("_secs")
                || k.contains("duration")
                || k.contains("elapsed")
        });
        match v {
            Value::Number(_) if timing => *v = Value::from(0),
            Value::String(s) if timing => *s = "<duration>".into(),
            Value::String(s) => *s = mask_text(env, s),
            Value::Array(a) => a.iter_mut().for_each(|x| walk(env, None, x)),
            Value::Object(o) => o.iter_mut().for_each(|(k, x)| walk(env, Some(k), x)),
            _ => {}
        }
    }
    walk(env, None, &mut data);
    data
}

fn mask_text(env: &Env, s: &str) -> String {
    let mut s = s.replace(&env.root().display().to_string(), "<root>");
    if s.contains("agents ") {
        // A suggested command repeats the global options of the command that printed it
        // (`--server URL`, the client's `--data-dir`): compare what it asks to do.
        for option in [" --server ", " --data-dir ", " --config-path "] {
            while let Some(i) = s.find(option) {
                let rest = &s[i + option.len()..];
                let after = rest.split_once(' ').map_or("", |(_, r)| r);
                s = format!("{} {after}", &s[..i]);
            }
        }
    }
    mask_ids_and_times(&s)
}

/// Ids (`plan_…`, `apr_…`, 26-character ULIDs), object ids, checksums, temporary roots and
/// times become placeholders.
fn mask_ids_and_times(s: &str) -> String {
    use std::sync::OnceLock;
    static PATTERNS: OnceLock<[(regex::Regex, &str); 7]> = OnceLock::new();
    let patterns = PATTERNS.get_or_init(|| {
        [
            // Commits and trees (their hashes hold commit times) and other test roots.
            (regex::Regex::new(r"\b[0-9a-f]{40}\b").unwrap(), "<oid>"),
            // Checksums of exported documents (they hold ids and times).
            (
                regex::Regex::new(r"sha256:[0-9a-f]{64}").unwrap(),
                "sha256:<sum>",
            ),
            (
                regex::Regex::new(r"/tmp/\.tmp[A-Za-z0-9]+").unwrap(),
                "<tmp>",
            ),
            (regex::Regex::new(r"\b\d{8}T\d{6}Z\b").unwrap(), "<time>"),
            (
                regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")
                    .unwrap(),
                "<time>",
            ),
            (
                regex::Regex::new(r"\b([a-z]+_)?[0-9A-HJKMNP-TV-Z]{26}\b").unwrap(),
                "${1}<id>",
            ),
            (
                regex::Regex::new(r"\b(plan|apr|dec|ses|chk|run|evt)_[0-9a-f]{6,}\b").unwrap(),
                "${1}_<id>",
            ),
        ]
    });
    patterns.iter().fold(s.to_string(), |acc, (re, to)| {
        re.replace_all(&acc, *to).into_owned()
    })
}
