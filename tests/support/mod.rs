//! Shared helpers: an isolated environment (data dir, config file, HOME) per test, and a
//! runner for the real binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Environment variables that would leak the developer's settings into a test.
const SCRUBBED: [&str; 12] = [
    "AGENTS_SERVER",
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
        }
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
        cmd
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

    pub fn wait_for(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(15);
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
pub mod file_tools;
#[allow(dead_code)]
pub mod provider_server;
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
