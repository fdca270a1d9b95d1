//! Shared helpers: an isolated environment (data dir, config file, HOME) per test, and a
//! runner for the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Environment variables that would leak the developer's settings into a test.
const SCRUBBED: [&str; 13] = [
    "AGENTS_SERVER",
    "AGENTS_DATABASE_URL",
    "AGENTS_TOKEN",
    "AGENTS_DATA_DIR",
    "AGENTS_CONFIG",
    "AGENTS_FORMAT",
    "AGENTS_LOG",
    "AGENTS_AUTOMATION_PROFILE",
    "AGENTS_INVARIANT_ACTOR",
    "NO_COLOR",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "XDG_CONFIG_HOME",
];

/// An isolated CleverAgents environment in a temporary directory.
pub struct Env {
    /// Keeps the directory alive for the test's duration.
    pub dir: tempfile::TempDir,
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// `--config-path`.
    pub config_path: PathBuf,
    /// The server this environment's commands go to when the suite runs through one.
    served: through_server::ServedSlot,
    /// Whether its commands make a full checkout per sandbox ([`Env::use_full_checkouts`]).
    full_checkouts: std::sync::atomic::AtomicBool,
}

/// The action that [`LICENSE_ACTION`] spawns (`local/update-docs`, argument `topic`).
pub const UPDATE_DOCS_ACTION: &str = "name: local/update-docs\ndefinition-of-done: The docs mention {{ topic }}\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: topic\n    type: string\n    required: true\n";

/// Registers [`UPDATE_DOCS_ACTION`] as a draft, so that [`LICENSE_ACTION`]'s spawn step
/// resolves when it is made available.
pub fn register_update_docs(env: &Env) {
    let path = env.root().join("update-docs.yaml");
    std::fs::write(&path, UPDATE_DOCS_ACTION).unwrap();
    let (doc, code) = env.json(&["action", "create", "--config", path.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
}

impl Env {
    /// A fresh environment; `data_name` is the data directory's name (may be non-ASCII).
    pub fn with_data_dir(data_name: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let data_dir = dir.path().join(data_name);
        let config_path = dir.path().join("config").join("config.toml");
        Self {
            dir,
            data_dir,
            config_path,
            served: through_server::ServedSlot::default(),
            full_checkouts: false.into(),
        }
    }

    /// Makes this environment's commands give every sandbox a full checkout (the switch of
    /// docs/sandbox.md, "Shared checkouts", off), for a test that reads sandboxes through the
    /// engine in its own process: a shared checkout's tree is seen only inside `agents`.
    pub fn use_full_checkouts(&self) {
        self.full_checkouts
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Through a server, the server makes the sandboxes: it starts again with the setting.
        self.served.restart();
    }

    /// A fresh environment with an ASCII data directory name.
    pub fn new() -> Self {
        Self::with_data_dir("data")
    }

    /// The temp root.
    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A `Command` for the real binary with this environment's paths and a scrubbed
    /// environment; stdin is closed (not a terminal). When the suite runs through a server
    /// ([`through_server`]), the command is that server's client.
    pub fn command(&self, args: &[&str]) -> Command {
        if through_server::enabled() {
            return self.served_command(args);
        }
        self.local_command(args)
    }

    /// A `Command` on this machine's data directory, even when the suite runs through a
    /// server (for what only the server's host does: tokens, `server start`).
    pub fn local_command(&self, args: &[&str]) -> Command {
        let mut cmd = self.bare_command(&self.data_dir);
        cmd.args(args);
        cmd
    }

    /// The binary with `data_dir`, this environment's config file and a scrubbed environment.
    fn bare_command(&self, data_dir: &Path) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agents"));
        for var in SCRUBBED {
            cmd.env_remove(var);
        }
        cmd.env("HOME", self.root())
            .arg("--data-dir")
            .arg(data_dir)
            .arg("--config-path")
            .arg(&self.config_path)
            .stdin(Stdio::null());
        if self
            .full_checkouts
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            cmd.env("CLEVERAGENTS_SANDBOX_OVERLAY", "0");
        }
        // With servers on PostgreSQL, an environment's own commands keep their records where
        // its server does.
        if let Some(url) = server::server_database(self).or_else(|| server::known_database(self)) {
            cmd.env("AGENTS_DATABASE_URL", url);
        }
        cmd
    }

    /// A shell command line that runs the binary with `args` (shell text, e.g. `tui --focus
    /// approvals`) in a terminal: this environment's paths, HOME and a scrubbed environment as
    /// [`Env::command`] has, and `TERM=xterm-256color`; for [`Tmux::open`].
    pub fn terminal_command(&self, args: &str) -> String {
        self.terminal_command_with("", args)
    }

    /// [`Env::terminal_command`] with more variables, `vars` (shell text, `NAME=value ...`).
    pub fn terminal_command_with(&self, vars: &str, args: &str) -> String {
        let unset: String = SCRUBBED.iter().map(|v| format!("-u {v} ")).collect();
        let vars = if vars.is_empty() {
            String::new()
        } else {
            format!("{vars} ")
        };
        format!(
            "env {unset}HOME={home} TERM=xterm-256color {vars}{bin} --data-dir {data} --config-path {config} {args}",
            home = shell_quote(self.root()),
            bin = env!("CARGO_BIN_EXE_agents"),
            data = shell_quote(&self.data_dir),
            config = shell_quote(&self.config_path),
        )
    }

    /// Runs the binary and returns its output.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("the binary runs")
    }

    /// Runs with `--format json` and parses stdout.
    pub fn json(&self, args: &[&str]) -> (serde_json::Value, i32) {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = self.run(&all);
        let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
        let code = out.status.code().expect("exit code");
        through_server::record(self, args, &doc, code);
        (doc, code)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if through_server::enabled() && !std::thread::panicking() {
            self.check_client_kept_no_database();
        }
    }
}

/// stdout as UTF-8.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

/// Runs with `--format json` and expects exit 0: the answer.
pub fn ok(env: &Env, args: &[&str]) -> serde_json::Value {
    let (doc, code) = env.json(args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

/// Runs with `--format json` and expects a failure (any non-zero exit) with the error `code`:
/// the answer.
pub fn fails(env: &Env, args: &[&str], code: &str) -> serde_json::Value {
    let (doc, exit) = env.json(args);
    assert_ne!(exit, 0, "{args:?}: {doc:#}");
    assert_eq!(doc["error"]["code"], code, "{args:?}: {doc:#}");
    doc
}

/// Runs with `--format json` and the scripted provider's key (`SCRIPTED_API_KEY`) set, for
/// plans whose actors are models: the answer and the exit code.
pub fn run_keyed(env: &Env, args: &[&str]) -> (serde_json::Value, i32) {
    let mut all = vec!["--format", "json"];
    all.extend_from_slice(args);
    let out = env
        .command(&all)
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)));
    (doc, out.status.code().unwrap())
}

/// `plan use ACTION app --automation-profile PROFILE EXTRA...`: the answer, the exit code and
/// the id of the plan it created.
pub fn use_plan(
    env: &Env,
    action: &str,
    profile: &str,
    extra: &[&str],
) -> (serde_json::Value, i32, String) {
    use_plan_by(|args| env.json(args), action, profile, extra)
}

/// [`use_plan`] with the scripted provider's key set ([`run_keyed`]).
pub fn use_plan_keyed(
    env: &Env,
    action: &str,
    profile: &str,
    extra: &[&str],
) -> (serde_json::Value, i32, String) {
    use_plan_by(|args| run_keyed(env, args), action, profile, extra)
}

fn use_plan_by(
    run: impl FnOnce(&[&str]) -> (serde_json::Value, i32),
    action: &str,
    profile: &str,
    extra: &[&str],
) -> (serde_json::Value, i32, String) {
    let mut args = vec![
        "plan",
        "use",
        action,
        "app",
        "--automation-profile",
        profile,
    ];
    args.extend_from_slice(extra);
    let (doc, code) = run(&args);
    let id = plan_id(&doc);
    (doc, code, id)
}

/// The id of the plan a `plan use` answer names (it fails the test when there is none).
pub fn plan_id(doc: &serde_json::Value) -> String {
    doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no plan id: {doc:#}"))
        .to_string()
}

/// A tmux server of our own (its own socket), killed on drop.
pub struct Tmux {
    socket: String,
}

impl Tmux {
    pub fn new(tag: &str) -> Self {
        Self {
            socket: format!("agents-test-{tag}-{}", std::process::id()),
        }
    }

    pub fn cmd(&self, args: &[&str]) -> std::process::Output {
        Command::new("tmux")
            .arg("-L")
            .arg(&self.socket)
            .args(args)
            .output()
            .expect("tmux is installed")
    }

    pub fn screen(&self) -> String {
        String::from_utf8_lossy(&self.cmd(&["capture-pane", "-p", "-t", "s"]).stdout).into_owned()
    }

    /// Opens the session `s`, `width` columns by `height` rows, running the shell command
    /// line `command` (see [`Env::terminal_command`]).
    pub fn open(&self, width: u16, height: u16, command: &str) {
        let (width, height) = (width.to_string(), height.to_string());
        let started = self.cmd(&[
            "new-session",
            "-d",
            "-s",
            "s",
            "-x",
            &width,
            "-y",
            &height,
            command,
        ]);
        assert!(
            started.status.success(),
            "{}",
            String::from_utf8_lossy(&started.stderr)
        );
    }

    /// Types `keys` (tmux key names, or `-l` then literal text).
    pub fn keys(&self, keys: &[&str]) {
        let mut args = vec!["send-keys", "-t", "s"];
        args.extend_from_slice(keys);
        self.cmd(&args);
    }

    /// Waits up to 15 s for a screen that `pred` accepts, and returns it.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        self.wait_up_to(what, Duration::from_secs(15), pred)
    }

    /// Waits up to `limit` for a screen that `pred` accepts, and returns it.
    pub fn wait_up_to(&self, what: &str, limit: Duration, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let screen = self.screen();
            if pred(&screen) {
                return screen;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting for {what}; screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits up to `limit` for the command to write its exit code to `file` (`echo $? > FILE`
    /// after it), and returns that code.
    pub fn exit_code(&self, file: &Path, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        while !file.exists() {
            assert!(
                Instant::now() < deadline,
                "the command did not end; screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        // The file exists once the shell opened it: let `echo` write.
        std::thread::sleep(Duration::from_millis(100));
        std::fs::read_to_string(file).unwrap().trim().to_owned()
    }

    pub fn alive(&self) -> bool {
        self.cmd(&["has-session", "-t", "s"]).status.success()
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd(&["kill-server"]);
    }
}

pub fn shell_quote(p: &Path) -> String {
    shell_words::quote(&p.display().to_string()).into_owned()
}
// Shared with later lifecycle and TUI tests; not every helper is used by every module yet.
#[allow(dead_code)]
pub mod browser;
pub mod file_tools;
pub mod kill;
pub mod postgres;
#[allow(dead_code)]
pub mod provider_server;
pub mod sandbox;
pub mod server;
pub mod through_server;
/// Runs git in `dir` with a fixed identity and fixed dates (so commits are reproducible).
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=Test",
            "-c",
            "user.email=test@example.invalid",
            "-c",
            "init.defaultBranch=main",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .env_remove("GIT_DIR")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs git in `dir` as it is (no fixed identity or dates, unlike [`git`]) and expects it to
/// succeed: its stdout.
pub fn git_out(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A real git repository under `parent/name`: two commits on `main` (README, src/lib.rs,
/// docs/guide.md), a branch `dev`, a remote `origin`. Returns its path.
pub fn git_repo(parent: &Path, name: &str) -> PathBuf {
    let dir = parent.join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("docs")).unwrap();
    git(&dir, &["init", "-q"]);
    std::fs::write(dir.join("README"), "demo\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.join("docs/guide.md"), "# Guide\n").unwrap();
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-q", "-m", "second"]);
    git(&dir, &["branch", "dev"]);
    git(
        &dir,
        &[
            "remote",
            "add",
            "origin",
            "https://example.invalid/demo.git",
        ],
    );
    dir
}

/// The database file of an environment.
pub fn db_file(env: &Env) -> PathBuf {
    env.data_dir.join("cleveragents.db")
}

/// An action file with a script, arguments and an action invariant (the acceptance scenario).
pub const LICENSE_ACTION: &str = r#"name: local/add-license
description: Add a {{ license }} license file
definition-of-done: A LICENSE file with the {{ license }} text exists and `{{ check }}` passes
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
reusable: true
invariants:
  - Never rewrite git history
arguments:
  - name: license
    type: string
    required: true
    description: SPDX identifier
  - name: year
    type: integer
    default: 2026
  - name: check
    type: string
    default: test -f LICENSE
script:
  - name: write
    run: "echo {{ license }} {{ year }} > LICENSE"
  - name: verify
    run: "{{ check | raw }}"
  - name: docs
    spawn:
      action: local/update-docs
      args: {topic: "{{ license }}"}
    parallel-group: docs
    depends-on: [write]
sandbox:
  network: false
  writable-paths: []
"#;

/// What a read leaves as it was: the database's bytes in process; through a server, whose
/// every request records its token's last use, the rows of every other table.
pub fn database_state(env: &Env) -> Vec<Vec<u8>> {
    if through_server::enabled() {
        return database_rows(env);
    }
    let db = db_file(env);
    ["", "-wal"]
        .iter()
        .map(|ext| std::fs::read(format!("{}{ext}", db.display())).unwrap_or_default())
        .collect()
}

/// The store where `env`'s commands keep their records: its server's PostgreSQL database when
/// servers run on PostgreSQL, else its data directory's SQLite file.
pub fn open_store(env: &Env) -> cleveragents_engine::store::Store {
    match server::known_database(env) {
        Some(url) => cleveragents_engine::store::Location::Postgres(url).open(),
        None => cleveragents_engine::store::Store::open(&db_file(env)),
    }
    .unwrap()
}

/// The rows of one query, each column as text, read where `env`'s records live: its SQLite
/// file, or its server's PostgreSQL database. `query` takes no parameters (ids are ULIDs, safe
/// to write in it).
pub fn query_rows(env: &Env, query: &str) -> Vec<Vec<String>> {
    if let Some(url) = server::known_database(env) {
        return postgres::sql(&url, query)
            .lines()
            .filter(|l| !l.is_empty())
            .map(|l| l.split('|').map(str::to_string).collect())
            .collect();
    }
    let conn = rusqlite::Connection::open_with_flags(
        db_file(env),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let mut stmt = conn.prepare(query).unwrap();
    let columns = stmt.column_count();
    stmt.query_map([], |r| {
        (0..columns)
            .map(|i| r.get::<_, String>(i))
            .collect::<Result<Vec<_>, _>>()
    })
    .unwrap()
    .collect::<Result<_, _>>()
    .unwrap()
}

/// Every row of every table but the server tokens, each as text.
fn database_rows(env: &Env) -> Vec<Vec<u8>> {
    if let Some(url) = server::server_database(env) {
        return vec![postgres::rows(&url)];
    }
    let conn = rusqlite::Connection::open_with_flags(
        db_file(env),
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY,
    )
    .unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'server_tokens' ORDER BY name")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut rows = Vec::new();
    for table in tables {
        let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
        let width = stmt.column_count();
        let mut found = stmt.query([]).unwrap();
        while let Some(row) = found.next().unwrap() {
            let values: Vec<rusqlite::types::Value> =
                (0..width).map(|i| row.get(i).unwrap()).collect();
            rows.push(format!("{table}: {values:?}").into_bytes());
        }
    }
    rows
}
