//! Sandboxes, tools, checkpoints and confinement, driven through the real binary on
//! temp git repositories. Plans are created through the library (`plan use` belongs to the
//! registries) and sandboxed with the developer flag `tool run --target-path`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use cleveragents_engine::domain::lifecycle::{Phase, ProcessingState};
use cleveragents_engine::domain::plan::Plan;
use cleveragents_engine::store::Store;
use serde_json::{Value, json};

use crate::support::{Env, sandbox};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", dir)
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A user repository with committed files, one uncommitted edit and one untracked file.
pub(crate) fn user_repo(root: &Path) -> PathBuf {
    let repo = root.join("user-repo");
    fs::create_dir_all(repo.join("src")).unwrap();
    fs::create_dir_all(repo.join("docs")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    fs::write(repo.join("a.txt"), "alpha\n").unwrap();
    fs::write(repo.join("b.txt"), "bravo\n").unwrap();
    fs::write(repo.join("tracked.txt"), "tracked\n").unwrap();
    fs::write(
        repo.join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    41\n}\n",
    )
    .unwrap();
    fs::write(repo.join("docs/readme.md"), "# Docs\n\nSome text.\n").unwrap();
    fs::write(repo.join(".gitignore"), "*.log\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-q", "-m", "initial"]);
    git(&repo, &["tag", "v1"]);
    fs::write(repo.join("a.txt"), "alpha, edited but not committed\n").unwrap();
    fs::write(repo.join("untracked.txt"), "mine\n").unwrap();
    repo
}

/// A plan in execute/queued, inserted through the library.
pub(crate) fn plan_in(env: &Env, phase: Phase) -> String {
    let mut store = Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
    let mut plan = Plan::new("local/refactor", "refactor", jiff::Timestamp::now());
    plan.status.phase = phase;
    store.insert_plan(&plan).unwrap();
    plan.plan_id.to_string()
}

fn files_of(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            let t = e.file_type().unwrap();
            if t.is_dir() {
                if rel != ".git" {
                    stack.push(p);
                }
            } else if t.is_symlink() {
                out.insert(
                    rel,
                    fs::read_link(&p)
                        .unwrap()
                        .to_string_lossy()
                        .as_bytes()
                        .to_vec(),
                );
            } else {
                out.insert(rel, fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// Everything about the user's repository that must not change before Apply.
#[derive(Debug, PartialEq)]
struct RepoState {
    status: String,
    index: Vec<u8>,
    refs: String,
    head: Vec<u8>,
    packed_refs: Option<Vec<u8>>,
    worktrees: bool,
    config: Vec<u8>,
    work_tree: BTreeMap<String, Vec<u8>>,
}

fn repo_state(repo: &Path) -> RepoState {
    // Read the index before `git status`, and run status without optional locks so that it
    // does not refresh the index itself.
    let index = fs::read(repo.join(".git/index")).unwrap();
    RepoState {
        index,
        status: git(
            repo,
            &[
                "--no-optional-locks",
                "status",
                "--porcelain=v2",
                "--branch",
                "--untracked-files=all",
            ],
        ),
        refs: git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"]),
        head: fs::read(repo.join(".git/HEAD")).unwrap(),
        packed_refs: fs::read(repo.join(".git/packed-refs")).ok(),
        worktrees: repo.join(".git/worktrees").exists(),
        config: fs::read(repo.join(".git/config")).unwrap(),
        work_tree: files_of(repo),
    }
}

fn tool(env: &Env, plan: &str, target: &Path, name: &str, args: Value) -> (Value, i32) {
    env.json(&[
        "tool",
        "run",
        name,
        "--plan",
        plan,
        "--target-path",
        target.to_str().unwrap(),
        "--args",
        &args.to_string(),
    ])
}

fn ok_tool(env: &Env, plan: &str, target: &Path, name: &str, args: Value) -> Value {
    let (doc, code) = tool(env, plan, target, name, args);
    assert_eq!(code, 0, "{name}: {doc:#}");
    doc["data"].clone()
}

/// Whether `path` holds a file of the sandbox whose work path is `work`: under it, or under
/// the overlay's upper directory beside it, where a sandbox sharing its base's checkout
/// keeps what it wrote.
fn in_work_tree(work: &Path, path: &Path) -> bool {
    path.starts_with(work)
        || work
            .parent()
            .is_some_and(|root| path.starts_with(root.join("upper")))
}

fn work_dir(env: &Env, plan: &str) -> PathBuf {
    let store = Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
    let records = store.sandboxes_of_plan(&plan.parse().unwrap()).unwrap();
    assert_eq!(records.len(), 1);
    records[0].root_dir.join("work")
}

/// The tree hash of a directory's content as git computes it (independently of the sandbox's
/// own index): a throwaway repository adds everything and writes the tree.
fn tree_hash(dir: &Path) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let git_dir = tmp.path().join("g");
    let run = |args: &[&str]| {
        let out = Command::new("git")
            .arg("--git-dir")
            .arg(&git_dir)
            .arg("--work-tree")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", tmp.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&git_dir)
        .output()
        .unwrap();
    assert!(init.status.success());
    run(&["add", "-A"]);
    run(&["write-tree"])
}

#[test]
fn tools_change_only_the_sandbox_diff_shows_exactly_that_and_every_checkpoint_restores_exactly() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let before = repo_state(&repo);
    let plan = plan_in(&env, Phase::Execute);

    let first = tool(
        &env,
        &plan,
        &repo,
        "write_file",
        json!({"path": "new/file.txt", "content": "brand new\n"}),
    );
    assert_eq!(first.1, 0, "{:#}", first.0);
    assert!(
        first.0["messages"]
            .to_string()
            .contains("2 uncommitted files are not visible to this plan"),
        "{:#}",
        first.0["messages"]
    );
    let work = || sandbox::copy_out(&env, &plan);
    assert_eq!(
        sandbox::read(&env, &plan, "a.txt").as_deref(),
        Some("alpha\n"),
        "uncommitted edits are not carried in"
    );
    assert_eq!(sandbox::read(&env, &plan, "untracked.txt"), None);
    let mut states = vec![files_of(work().path())];
    ok_tool(
        &env,
        &plan,
        &repo,
        "edit_file",
        json!({"path": "src/lib.rs", "edits": [{"old_text": "41", "new_text": "42"}]}),
    );
    states.push(files_of(work().path()));
    ok_tool(
        &env,
        &plan,
        &repo,
        "move_file",
        json!({"source": "docs/readme.md", "destination": "docs/README.md"}),
    );
    states.push(files_of(work().path()));
    ok_tool(&env, &plan, &repo, "delete_file", json!({"path": "b.txt"}));
    states.push(files_of(work().path()));
    let shell = ok_tool(
        &env,
        &plan,
        &repo,
        "shell_execute",
        json!({"command": "echo from shell > made-by-shell.txt && rm tracked.txt && echo noise > build.log"}),
    );
    states.push(files_of(work().path()));
    assert_eq!(shell["result"]["exit_code"], 0, "{shell:#}");
    let shell_changes: Vec<(String, String)> = shell["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["operation"].as_str().unwrap().into(),
                c["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        shell_changes,
        [
            ("create".to_string(), "made-by-shell.txt".to_string()),
            ("delete".into(), "tracked.txt".into())
        ],
        "shell changes come from comparing snapshots; ignored files are not captured"
    );

    // The user's repository is exactly as it was.
    assert_eq!(repo_state(&repo), before);

    // `plan diff` shows exactly these changes.
    let (diff, code) = env.json(&["plan", "diff", &plan]);
    assert_eq!(code, 0, "{diff:#}");
    let files: BTreeMap<String, (String, Option<String>)> = diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["path"].as_str().unwrap().to_string(),
                (
                    f["status"].as_str().unwrap().to_string(),
                    f["old_path"].as_str().map(str::to_string),
                ),
            )
        })
        .collect();
    let expected: BTreeMap<String, (String, Option<String>)> = [
        ("b.txt", ("deleted", None)),
        ("docs/README.md", ("renamed", Some("docs/readme.md"))),
        ("made-by-shell.txt", ("added", None)),
        ("new/file.txt", ("added", None)),
        ("src/lib.rs", ("modified", None)),
        ("tracked.txt", ("deleted", None)),
    ]
    .into_iter()
    .map(|(p, (s, o))| (p.to_string(), (s.to_string(), o.map(str::to_string))))
    .collect();
    assert_eq!(files, expected);
    let lib = diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["path"] == "src/lib.rs")
        .unwrap();
    let lines: Vec<(String, String)> = lib["hunks"][0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["kind"] != "context")
        .map(|l| {
            (
                l["kind"].as_str().unwrap().into(),
                l["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("removed".to_string(), "    41".to_string()),
            ("added".into(), "    42".into())
        ]
    );
    assert_eq!(diff["data"]["stats"]["files_changed"], 6);

    // Checkpoints: one at the start (the base) and one after each call.
    let (cps, code) = env.json(&["plan", "checkpoints", &plan]);
    assert_eq!(code, 0);
    let cps = cps["data"]["checkpoints"].as_array().unwrap().clone();
    assert_eq!(cps.len(), 6, "{cps:#?}");
    assert_eq!(cps[0]["files_changed"], 0);
    assert_eq!(cps[1]["files_changed"], 1);
    assert!(
        cps.iter()
            .all(|c| c["checkpoint_id"].as_str().unwrap().starts_with("cp_"))
    );

    // Roll back to each checkpoint, newest first: the work tree matches byte for byte and its
    // independently computed tree hash is the checkpoint's.
    let base_files = {
        let mut m = BTreeMap::new();
        for (k, v) in &before.work_tree {
            if k != "untracked.txt" {
                m.insert(k.clone(), v.clone());
            }
        }
        m.insert("a.txt".into(), b"alpha\n".to_vec());
        m
    };
    let mut expected_states = vec![base_files];
    expected_states.extend(states.iter().cloned());
    for state in &mut expected_states {
        state.remove("build.log");
    }
    sandbox::write(&env, &plan, "stray.txt", "made after the last checkpoint");
    for (i, cp) in cps.iter().enumerate().rev() {
        let id = cp["checkpoint_id"].as_str().unwrap();
        let (out, code) = env.json(&["plan", "rollback", "--yes", &plan, id]);
        assert_eq!(code, 0, "{out:#}");
        assert_eq!(out["data"]["phase"], "execute");
        assert_eq!(out["data"]["state"], "queued");
        let copy = work();
        let mut now = files_of(copy.path());
        now.remove("build.log"); // ignored files are neither captured nor restored
        assert_eq!(now, expected_states[i], "checkpoint {i} ({id})");
        let tree = cp["states"][0]["tree_oid"].as_str().unwrap();
        assert_eq!(
            tree_hash(copy.path()),
            tree,
            "tree hash after rolling back to {id}"
        );
    }
    let (all, _) = env.json(&["plan", "checkpoints", "--all", &plan]);
    let discarded = all["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["discarded_at"].is_null())
        .count();
    assert_eq!(discarded, 5);
    let (after, _) = env.json(&["plan", "diff", &plan]);
    assert_eq!(after["data"]["stats"]["files_changed"], 0);
    assert_eq!(
        repo_state(&repo),
        before,
        "rollbacks do not touch the user's repository either"
    );
}

#[test]
fn invalid_arguments_name_the_field_and_the_plan_continues() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let (doc, code) = tool(
        &env,
        &plan,
        &repo,
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old_txt": "a", "new_text": "b"}]}),
    );
    assert_eq!(code, 1);
    assert_eq!(doc["error"]["code"], "INVALID_INPUT");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("edits[0]"), "{message}");
    assert_eq!(doc["data"]["call"]["outcome"], "invalid");
    let ok = ok_tool(
        &env,
        &plan,
        &repo,
        "write_file",
        json!({"path": "a.txt", "content": "fine\n"}),
    );
    assert_eq!(ok["call"]["seq"], 2);
    let store = Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
    let p = store.plan(&plan.parse().unwrap()).unwrap().unwrap();
    assert_eq!(
        (p.phase(), p.state()),
        (Phase::Execute, ProcessingState::Queued)
    );
}

#[test]
fn strategize_plans_refuse_writing_tools_with_permission_denied() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Strategize);
    for (name, args) in [
        ("write_file", json!({"path": "x", "content": "y"})),
        ("shell_execute", json!({"command": "touch x"})),
    ] {
        let (doc, code) = tool(&env, &plan, &repo, name, args);
        assert_eq!(code, 4, "a refused tool call exits 4 (D-team-4)");
        assert_eq!(doc["error"]["code"], "PERMISSION_DENIED", "{doc:#}");
        assert!(
            doc["error"]["message"]
                .as_str()
                .unwrap()
                .contains("strategize")
        );
    }
    let read = ok_tool(&env, &plan, &repo, "read_file", json!({"path": "a.txt"}));
    assert_eq!(read["result"]["content"], "alpha\n");
}

fn landlock_enforced() -> bool {
    cleveragents_engine::sandbox::landlock::probe().enforced(false)
}

#[test]
fn landlock_is_enforced_under_ci_and_diagnostics_says_so() {
    let env = Env::new();
    let (doc, _) = env.json(&["diagnostics"]);
    let check = doc["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Shell sandbox")
        .cloned()
        .unwrap();
    if std::env::var("CI").as_deref() == Ok("true") {
        assert!(
            landlock_enforced(),
            "CI must run where Landlock confines shell commands"
        );
        assert_eq!(check["status"], "ok");
    }
    if landlock_enforced() {
        assert!(
            check["details"]
                .as_str()
                .unwrap()
                .starts_with("landlock: enforced (ABI "),
            "{check}"
        );
    } else {
        assert_eq!(check["status"], "warn");
    }
}

#[test]
fn shell_commands_cannot_write_outside_the_sandbox_or_open_tcp_connections() {
    if !landlock_enforced() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "Landlock must be enforced under CI"
        );
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let before = repo_state(&repo);
    ok_tool(&env, &plan, &repo, "read_file", json!({"path": "a.txt"}));
    let work = work_dir(&env, &plan);
    let outside_root = work.parent().unwrap().to_path_buf();
    let listing = |p: &Path| -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(p)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    };
    let sandbox_dir_before = listing(&outside_root);

    let run = |command: String| -> Value {
        let data = ok_tool(
            &env,
            &plan,
            &repo,
            "shell_execute",
            json!({"command": command}),
        );
        data["result"].clone()
    };
    let r = run("touch ../outside".into());
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(
        r["stderr"].as_str().unwrap().contains("ermission denied"),
        "{r}"
    );
    let target = repo.join("pwned.txt");
    let r = run(format!("echo x > {}", target.display()));
    assert_ne!(r["exit_code"], 0, "{r}");
    let r = run("touch /tmp/cleveragents-escape-probe".into());
    assert_ne!(r["exit_code"], 0, "{r}");

    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let r = run(format!("bash -c 'echo hello > /dev/tcp/127.0.0.1/{port}'"));
    assert_ne!(r["exit_code"], 0, "{r}");
    assert!(
        listener.accept().is_err(),
        "no connection reached the listener"
    );

    // Positive controls: the sandbox and the per-plan home are writable.
    let r = run("touch inside.txt && echo cached > \"$XDG_CACHE_HOME/c\" && echo t > \"$TMPDIR/t\" && echo h > \"$HOME/h\"".into());
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(sandbox::read(&env, &plan, "inside.txt").is_some());

    assert!(!target.exists());
    assert!(!work.parent().unwrap().join("outside").exists());
    assert_eq!(listing(&outside_root), sandbox_dir_before);
    assert!(!Path::new("/tmp/cleveragents-escape-probe").exists());
    assert_eq!(repo_state(&repo), before);
}

#[test]
fn shell_environment_is_scrubbed_and_timeouts_kill_the_whole_process_group() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    if !landlock_enforced() {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "Landlock must be enforced under CI"
        );
        return;
    }
    let mut cmd = env.command(&[
        "--format",
        "json",
        "tool",
        "run",
        "shell_execute",
        "--plan",
        &plan,
        "--target-path",
        repo.to_str().unwrap(),
        "--args",
        &json!({"command": "env | sort"}).to_string(),
    ]);
    cmd.env("OPENAI_API_KEY", "sk-should-not-leak")
        .env("MY_SECRET", "hunter2");
    let out = cmd.output().unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let stdout = doc["data"]["result"]["stdout"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert!(
        !stdout.contains("sk-should-not-leak") && !stdout.contains("hunter2"),
        "{stdout}"
    );
    let names: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    for name in &names {
        assert!(
            [
                "PATH",
                "LANG",
                "TERM",
                "HOME",
                "XDG_CACHE_HOME",
                "TMPDIR",
                "PWD",
                "SHLVL",
                "_",
                "OLDPWD",
                // The user's toolchains and redirected caches (docs/sandbox.md).
                "RUSTUP_HOME",
                "CARGO_HOME",
                "PYENV_ROOT",
                "NVM_DIR",
                "GOPATH",
                "GOMODCACHE",
                "GOROOT",
                "npm_config_cache",
                "GOCACHE",
                "PIP_CACHE_DIR",
                "YARN_CACHE_FOLDER",
                // Read-only git against the sandbox's private repository.
                "GIT_DIR",
                "GIT_WORK_TREE",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_CONFIG_GLOBAL",
                "GIT_OPTIONAL_LOCKS",
                "GIT_TERMINAL_PROMPT",
            ]
            .contains(name),
            "unexpected variable {name} in {stdout}"
        );
    }
    let home_line = stdout.lines().find(|l| l.starts_with("HOME=")).unwrap();
    assert!(
        home_line.contains(&env.data_dir.join("sandboxes").display().to_string()),
        "{home_line}"
    );

    let started = std::time::Instant::now();
    let data = ok_tool(
        &env,
        &plan,
        &repo,
        "shell_execute",
        json!({"command": "setsid sleep 31.75 & sleep 30.75", "timeout_secs": 1}),
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
    assert_eq!(data["result"]["timed_out"], true, "{data:#}");
    // The command ran in its own PID namespace: look for the sleeps by their arguments.
    let alive = || {
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .any(|c| {
                let c = String::from_utf8_lossy(&c);
                c.contains("31.75") || c.contains("30.75")
            })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(!alive(), "a background process survived the timeout");
}

#[test]
fn export_creates_a_branch_or_a_patch_only_on_request() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    ok_tool(
        &env,
        &plan,
        &repo,
        "write_file",
        json!({"path": "src/new.rs", "content": "pub fn new() {}\n"}),
    );
    ok_tool(&env, &plan, &repo, "delete_file", json!({"path": "b.txt"}));
    let refs_before = git(&repo, &["for-each-ref", "--format=%(refname)"]);
    assert!(!refs_before.contains("exported"));

    let patch = env.root().join("plan.patch");
    let (doc, code) = env.json(&["plan", "export", &plan, "--patch", patch.to_str().unwrap()]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["files_changed"], 2);
    let clone = env.root().join("clone");
    git(
        env.root(),
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    let (doc, code) = env.json(&["plan", "export", &plan, "--patch", patch.to_str().unwrap()]);
    assert_eq!(code, 1, "an existing file is not replaced: {doc:#}");

    let (doc, code) = env.json(&["plan", "export", &plan, "--branch", "exported"]);
    assert_eq!(code, 0, "{doc:#}");
    let commit = doc["data"]["commit"].as_str().unwrap().to_string();
    assert_eq!(git(&repo, &["rev-parse", "exported"]).trim(), commit);
    assert_eq!(
        git(&repo, &["show", "exported:src/new.rs"]),
        "pub fn new() {}\n"
    );
    git(&repo, &["fsck", "--connectivity-only"]);
    assert_eq!(
        git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main",
        "the user's checkout is not switched"
    );
    let (doc, code) = env.json(&["plan", "export", &plan, "--branch", "exported"]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("already exists")
    );
}

#[test]
fn directory_resources_are_copied_with_a_private_git_dir_and_diffed_the_same_way() {
    let env = Env::new();
    let dir = env.root().join("plain-dir");
    fs::create_dir_all(dir.join("notes")).unwrap();
    fs::write(dir.join("notes/todo.md"), "- one\n").unwrap();
    fs::write(dir.join(".gitignore"), "cache/\n").unwrap();
    fs::create_dir_all(dir.join("cache")).unwrap();
    fs::write(dir.join("cache/blob"), "big").unwrap();
    let plan = plan_in(&env, Phase::Execute);
    let before = files_of(&dir);
    ok_tool(
        &env,
        &plan,
        &dir,
        "edit_file",
        json!({"path": "notes/todo.md", "edits": [{"old_text": "- one", "new_text": "- one\n- two"}]}),
    );
    let work = work_dir(&env, &plan);
    assert!(
        !work.join("cache").exists(),
        "ignored directories are not copied"
    );
    assert!(
        !work.join(".git").exists(),
        "the private git directory is outside the copy"
    );
    assert_eq!(files_of(&dir), before, "the directory itself is untouched");
    let (diff, _) = env.json(&["plan", "diff", &plan]);
    assert_eq!(diff["data"]["resources"][0]["strategy"], "copy_on_write");
    assert_eq!(
        diff["data"]["resources"][0]["files"][0]["path"],
        "notes/todo.md"
    );
    assert_eq!(diff["data"]["resources"][0]["files"][0]["additions"], 1);
    let (doc, code) = env.json(&["plan", "export", &plan, "--branch", "x"]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--patch")
    );
    let (doc, code) = tool(&env, &plan, &dir, "git_status", json!({}));
    assert_eq!(code, 4, "a refused tool call exits 4 (D-team-4)");
    assert_eq!(doc["error"]["code"], "PERMISSION_DENIED");
}

#[test]
fn cleanup_removes_sandboxes_of_cancelled_plans_and_orphaned_directories() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    ok_tool(
        &env,
        &plan,
        &repo,
        "write_file",
        json!({"path": "x.txt", "content": "x"}),
    );
    let work = work_dir(&env, &plan);
    let orphan = env
        .data_dir
        .join("sandboxes")
        .join("01ARZ3NDEKTSV4RRFFQ69G5FAV");
    fs::create_dir_all(orphan.join("01ARZ3NDEKTSV4RRFFQ69G5FAW/work")).unwrap();
    let unrelated = env.data_dir.join("sandboxes").join("not-ours");
    fs::create_dir_all(&unrelated).unwrap();

    let (doc, code) = env.json(&["plan", "cleanup"]);
    assert_eq!(code, 3, "cleanup asks first: {doc:#}");
    let (doc, code) = env.json(&["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(work.exists(), "an active plan's sandbox stays");
    assert!(!orphan.exists(), "a directory with no plan is removed");
    assert!(
        unrelated.exists(),
        "directories not named by an id are never removed"
    );

    {
        let mut store = Store::open(&env.data_dir.join("cleveragents.db")).unwrap();
        let id = plan.parse().unwrap();
        let mut p = store.plan(&id).unwrap().unwrap();
        p.status.set_state(ProcessingState::Cancelled).unwrap();
        store
            .update_plan_status(&id, p.status, jiff::Timestamp::now())
            .unwrap();
    }
    let (doc, code) = env.json(&["plan", "cleanup", "--yes"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["sandboxes"][0]["action"], "removed");
    assert!(!work.parent().unwrap().exists());
    assert!(repo.join("a.txt").exists());
}

/// Snapshots of the sandbox commands as users and scripts see them; ids, hashes, times,
/// durations and temp paths are masked.
fn snap(name: &str, env: &Env, args: &[&str]) {
    let out = env.run(args);
    let text = format!(
        "exit: {}\n--- stdout\n{}--- stderr\n{}",
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots/cli");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    let root = env.root().display().to_string();
    let ulid = regex::Regex::new(r"[0-9A-HJKMNP-TV-Z]{26}").unwrap();
    let description = ulid
        .replace_all(&format!("agents {}", args.join(" ")), "[ID]")
        .replace(&root, "[TMP]");
    settings.set_description(description);
    settings.add_filter(&regex::escape(&root), "[TMP]");
    settings.add_filter(r"[0-9A-HJKMNP-TV-Z]{26}", "[ID]");
    settings.add_filter(r"\b[0-9a-f]{64}\b", "[SHA256]");
    settings.add_filter(r"\b[0-9a-f]{40}\b", "[OID]");
    settings.add_filter(
        r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?Z?",
        "[TIME]",
    );
    settings.add_filter(r#""duration_ms": \d+"#, r#""duration_ms": "[MS]""#);
    settings.add_filter(r"\b\d+ ms\b", "[MS] ms");
    settings.bind(|| insta::assert_snapshot!(name, text));
}

#[test]
fn sandbox_commands_as_users_see_them() {
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let target = repo.to_str().unwrap();
    let write = json!({"path": "src/lib.rs", "content": "pub fn answer() -> u32 {\n    42\n}\n"})
        .to_string();
    snap(
        "tool_run_write_plain",
        &env,
        &[
            "--format",
            "plain",
            "tool",
            "run",
            "write_file",
            "--plan",
            &plan,
            "--target-path",
            target,
            "--args",
            &write,
        ],
    );
    snap(
        "tool_run_escape_plain",
        &env,
        &[
            "--format",
            "plain",
            "tool",
            "run",
            "read_file",
            "--plan",
            &plan,
            "--args",
            r#"{"path": "../secret"}"#,
        ],
    );
    snap(
        "plan_diff_plain",
        &env,
        &["--format", "plain", "plan", "diff", &plan],
    );
    snap(
        "plan_diff_json",
        &env,
        &["--format", "json", "plan", "diff", &plan],
    );
    snap(
        "plan_checkpoints_plain",
        &env,
        &["--format", "plain", "plan", "checkpoints", &plan],
    );
    snap(
        "plan_artifacts_plain",
        &env,
        &["--format", "plain", "plan", "artifacts", &plan],
    );
    snap(
        "plan_rollback_needs_confirmation_plain",
        &env,
        &["--format", "plain", "plan", "rollback", &plan, "1"],
    );
    snap(
        "plan_rollback_plain",
        &env,
        &["--format", "plain", "plan", "rollback", "--yes", &plan, "1"],
    );
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() && !p.is_symlink() {
                stack.push(p);
            } else if fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_key_of_agents_is_not_readable_from_a_step_and_a_printed_key_is_stored_redacted() {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let key = "sk-live-0123456789abcdef";
    let mut cmd = env.command(&[
        "--format",
        "json",
        "tool",
        "run",
        "shell_execute",
        "--plan",
        &plan,
        "--target-path",
        repo.to_str().unwrap(),
        "--args",
        &json!({"command": "for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e; done 2>/dev/null | grep -c '^OPENAI_API_KEY='; printf '%s%s\\n' sk-live- 0123456789abcdef; printf '%s%s\\n' sk-live- 0123456789abcdef > printed.txt"}).to_string(),
    ]);
    cmd.env("OPENAI_API_KEY", key);
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}"));
    let stdout = doc["data"]["result"]["stdout"].as_str().unwrap_or_default();
    assert_eq!(stdout.lines().next(), Some("0"), "{doc:#}");
    assert!(stdout.contains("[redacted]"), "{stdout}");
    assert!(!text.contains(key), "the CLI printed the key: {text}");
    let leaks: Vec<PathBuf> = files_containing(&env.data_dir, key.as_bytes())
        .into_iter()
        .filter(|p| !in_work_tree(&work_dir(&env, &plan), p))
        .collect();
    assert!(leaks.is_empty(), "the key is stored in {leaks:?}");
}

#[test]
fn a_step_sees_its_changes_with_read_only_git_and_cannot_move_refs_or_read_the_users_git_config() {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    git(
        &repo,
        &[
            "config",
            "http.extraHeader",
            "Authorization: Bearer ghp_usertoken123",
        ],
    );
    let plan = plan_in(&env, Phase::Execute);
    let config = repo.join(".git/config");
    let data = ok_tool(
        &env,
        &plan,
        &repo,
        "shell_execute",
        json!({"command": format!(
            "echo more >> b.txt; echo new > new.txt; git status --short; echo --; git diff --name-only HEAD; echo --; \
             git commit -qam sneaky; echo commit=$?; cat {} ; echo --; git log --format=%s | grep -c sneaky",
            config.display()
        )}),
    );
    let stdout = data["result"]["stdout"].as_str().unwrap();
    let stderr = data["result"]["stderr"].as_str().unwrap();
    let parts: Vec<&str> = stdout.split("--\n").collect();
    assert!(parts[0].contains(" M b.txt"), "{stdout}\n{stderr}");
    assert!(parts[0].contains("?? new.txt"), "{stdout}\n{stderr}");
    assert!(parts[1].lines().any(|l| l == "b.txt"), "{stdout}\n{stderr}");
    assert!(parts[2].contains("commit=1"), "{stdout}\n{stderr}");
    assert!(stderr.contains("checkpoints"), "{stderr}");
    assert!(!stdout.contains("ghp_usertoken123"), "{stdout}");
    assert!(!stdout.contains("extraHeader"), "{stdout}");
    assert_eq!(
        parts[3].trim(),
        "0",
        "no commit was made: {stdout}\n{stderr}"
    );
}

#[test]
fn relative_writable_paths_are_refused_at_action_create_naming_the_field() {
    let env = Env::new();
    let file = env.root().join("action.yaml");
    fs::write(
        &file,
        "name: local/relative\ndescription: d\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nsandbox:\n  writable-paths: [\".\"]\nscript:\n  - name: one\n    run: echo hi\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["action", "create", "--config", file.to_str().unwrap()]);
    assert_ne!(code, 0, "{doc:#}");
    let shown = doc.to_string();
    assert!(shown.contains("writable-paths[0]"), "{shown}");
    assert!(shown.contains("relative"), "{shown}");
}

#[test]
fn a_plan_whose_result_holds_a_known_key_is_refused_at_apply_and_the_key_is_stored_nowhere() {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    git(&repo, &["checkout", "-q", "--", "."]);
    let key = "sk-proj-abcdef0123456789";
    let run = |args: &[&str]| -> (Value, i32) {
        let mut all = vec!["--format", "json"];
        all.extend_from_slice(args);
        let out = env
            .command(&all)
            .env("OPENAI_API_KEY", key)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains(key), "printed: {text}");
        (
            serde_json::from_str(&text).unwrap_or_else(|_| panic!("{text}")),
            out.status.code().unwrap_or(-1),
        )
    };
    let file = env.root().join("leak.yaml");
    fs::write(
        &file,
        "name: local/leak\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: leak\n    run: \"printf '%s%s\\\\n' sk-proj- abcdef0123456789 > config.txt; cat config.txt\"\n",
    )
    .unwrap();
    for args in [
        vec![
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
        vec!["project", "create", "--resource", "local/repo", "app"],
        vec![
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    ] {
        let (doc, code) = run(&args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
    let (doc, code) = run(&[
        "plan",
        "use",
        "local/leak",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = run(&["plan", "apply", "--yes", &id]);
    assert_ne!(code, 0, "{doc:#}");
    let shown = doc.to_string();
    assert!(shown.contains("APPLY_REFUSED"), "{shown}");
    assert!(
        shown.contains("config.txt") && shown.contains("OPENAI_API_KEY"),
        "{shown}"
    );
    assert!(!repo.join("config.txt").exists());
    let leaks: Vec<PathBuf> = files_containing(&env.data_dir, key.as_bytes())
        .into_iter()
        .filter(|p| {
            !p.components().any(|c| {
                ["work", "upper", "git", "apply-check"]
                    .contains(&c.as_os_str().to_str().unwrap_or(""))
            })
        })
        .collect();
    assert!(leaks.is_empty(), "the key is stored in {leaks:?}");
}

#[test]
fn a_step_cannot_read_the_users_ssh_keys_under_a_fake_home() {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    let ssh = env.root().join(".ssh");
    fs::create_dir_all(&ssh).unwrap();
    fs::write(
        ssh.join("id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    let plan = plan_in(&env, Phase::Execute);
    let data = ok_tool(
        &env,
        &plan,
        &repo,
        "shell_execute",
        json!({"command": format!("cat {0}/id_ed25519; cp {0}/id_ed25519 stolen; ls {0}; cat /etc/shadow; echo end", ssh.display())}),
    );
    let stdout = data["result"]["stdout"].as_str().unwrap();
    assert!(!stdout.contains("PRIVATE KEY"), "{stdout}");
    assert!(!stdout.contains("id_ed25519"), "{stdout}");
    assert!(!stdout.contains("root:"), "{stdout}");
    assert!(stdout.contains("end"));
    assert_eq!(sandbox::read(&env, &plan, "stolen"), None);
}

/// `resource add` + `project create app` + `action create` of a one-step script action.
pub(crate) fn script_project(env: &Env, repo: &Path, run: &str) {
    let file = env.root().join("step.yaml");
    fs::write(
        &file,
        format!("name: local/step\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: step\n    run: {run}\n"),
    )
    .unwrap();
    for args in [
        vec![
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
        vec!["project", "create", "--resource", "local/repo", "app"],
        vec![
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    ] {
        let (doc, code) = env.json(&args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
}

#[test]
fn a_validation_serving_http_on_loopback_passes_and_one_reaching_the_hosts_loopback_fails_with_its_stderr()
 {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    git(&repo, &["checkout", "-q", "--", "."]);
    script_project(&env, &repo, "echo changed > a.txt");
    let serve = "/usr/bin/python3 -m http.server 18766 --bind 127.0.0.1 >/dev/null 2>&1 & for i in $(seq 50); do /usr/bin/python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:18766/\")' 2>/dev/null && exit 0; sleep 0.1; done; exit 1";
    let (doc, code) = env.json(&["project", "validation", "add", "app", serve]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["validation"]["network"], false, "{doc:#}");
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/step",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(
        code, 3,
        "the loopback validation passed and the plan waits at Apply: {doc:#}"
    );

    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    host.set_nonblocking(true).unwrap();
    let port = host.local_addr().unwrap().port();
    let reach = format!(
        "/usr/bin/python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), timeout=3)' || {{ echo cannot reach the host listener >&2; exit 4; }}"
    );
    let (doc, code) = env.json(&["project", "validation", "add", "app", &reach]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/step",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_ne!(code, 3, "{doc:#}");
    let shown = doc.to_string();
    assert!(
        shown.contains("cannot reach the host listener"),
        "the stderr tail is in the message: {shown}"
    );
    assert!(host.accept().is_err(), "the host listener was reached");
}

#[test]
fn processes_a_step_started_die_when_agents_is_killed() {
    if !landlock_enforced() {
        return;
    }
    let env = Env::new();
    let repo = user_repo(env.root());
    let plan = plan_in(&env, Phase::Execute);
    let mut child = env
        .command(&[
            "--format",
            "json",
            "tool",
            "run",
            "shell_execute",
            "--plan",
            &plan,
            "--target-path",
            repo.to_str().unwrap(),
            "--args",
            &json!({"command": "setsid sleep 611.25 & (sleep 612.25 &); sleep 613.25"}).to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let alive = || {
        fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|e| fs::read(e.path().join("cmdline")).ok())
            .filter(|c| {
                let c = String::from_utf8_lossy(c);
                c.starts_with("sleep\0")
                    && ["611.25", "612.25", "613.25"].iter().any(|n| c.contains(n))
            })
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while alive() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(alive(), 3, "the step started its processes");
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while alive() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(alive(), 0, "processes outlived agents");
}
