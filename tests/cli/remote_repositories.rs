//! Plans on repositories by URL (spec section 21, "where a plan runs"): a `git` resource is
//! worked on in a clone the engine keeps on its host, and Apply lands one commit on the
//! resource's branch in the repository itself, refused, naming the new tip, when the branch
//! moved since the plan's base.

use std::path::{Path, PathBuf};

use super::apply::{script_action, use_script_action};
use crate::support::{Env, git, git_out};

/// A bare repository `up.git` whose `main` holds `files`, and its `file://` URL.
fn upstream(env: &Env, files: &[(&str, &str)]) -> (PathBuf, String) {
    let work = super::apply::repo_with(env.root(), "seed", files);
    git(&work, &["branch", "-M", "main"]);
    let bare = env.root().join("up.git");
    git(
        env.root(),
        &["clone", "-q", "--bare", work.to_str().unwrap(), "up.git"],
    );
    let url = format!("file://{}", bare.display());
    (bare, url)
}

/// Registers `url` as `local/up` in project `app` and starts the script action on it: the
/// plan stops at its apply gate. Returns the plan id.
fn plan_on(env: &Env, url: &str, steps: &[&str]) -> String {
    let (doc, code) = env.json(&["resource", "add", "git", "local/up", "--url", url]);
    assert_eq!(code, 0, "{doc:#}");
    let (doc, code) = env.json(&["project", "create", "--resource", "local/up", "app"]);
    assert_eq!(code, 0, "{doc:#}");
    script_action(env, steps);
    let (doc, code) = use_script_action(env, "app");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    doc["data"]["plan_id"].as_str().unwrap().to_string()
}

fn tip(bare: &Path, branch: &str) -> String {
    git_out(bare, &["rev-parse", &format!("refs/heads/{branch}")])
        .trim()
        .to_string()
}

#[test]
fn a_plan_on_a_repository_by_url_lands_one_commit_on_its_branch() {
    let env = Env::new();
    let (bare, url) = upstream(&env, &[("a.txt", "one\n")]);
    let base = tip(&bare, "main");
    let plan = plan_on(&env, &url, &["echo two > a.txt && echo new > b.txt"]);
    assert_eq!(tip(&bare, "main"), base, "nothing lands before Apply");
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let new = tip(&bare, "main");
    assert_eq!(
        git_out(&bare, &["rev-parse", &format!("{new}~1")]).trim(),
        base,
        "exactly one commit on the base"
    );
    assert_eq!(git_out(&bare, &["show", "main:a.txt"]), "two\n");
    assert_eq!(git_out(&bare, &["show", "main:b.txt"]), "new\n");
}

#[test]
fn apply_is_refused_naming_the_new_tip_when_the_branch_moved_and_the_repository_is_unchanged() {
    let env = Env::new();
    let (bare, url) = upstream(&env, &[("a.txt", "one\n")]);
    let plan = plan_on(&env, &url, &["echo two > a.txt"]);
    // Someone else pushes meanwhile.
    let other = env.root().join("other");
    git(env.root(), &["clone", "-q", &url, "other"]);
    std::fs::write(other.join("c.txt"), "theirs\n").unwrap();
    git(&other, &["add", "-A"]);
    git(&other, &["commit", "-q", "-m", "theirs"]);
    git(&other, &["push", "-q", "origin", "HEAD:main"]);
    let moved = tip(&bare, "main");
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_ne!(code, 0, "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&moved[..12]),
        "names the new tip: {message}"
    );
    assert!(message.contains("main"), "names the branch: {message}");
    assert_eq!(tip(&bare, "main"), moved, "the repository is unchanged");
}

#[test]
fn plan_export_branch_creates_the_branch_in_the_repository() {
    let env = Env::new();
    let (bare, url) = upstream(&env, &[("a.txt", "one\n")]);
    let base = tip(&bare, "main");
    let plan = plan_on(&env, &url, &["echo two > a.txt"]);
    let (doc, code) = env.json(&["plan", "export", "--branch", "agent/change", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(git_out(&bare, &["show", "agent/change:a.txt"]), "two\n");
    assert_eq!(tip(&bare, "main"), base, "main is untouched");
}

/// A `git daemon` serving `root` on a free loopback port, pushes allowed; stopped on drop.
struct GitDaemon(std::process::Child);

impl GitDaemon {
    fn serve(root: &Path) -> (Self, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // The daemon itself, not `git daemon`: `git` runs it as a child of its own, which
        // killing `git` would leave serving (and holding the test's output open).
        let exec_path = git_out(Path::new("."), &["--exec-path"]);
        let child = std::process::Command::new(Path::new(exec_path.trim()).join("git-daemon"))
            .args([
                "--export-all",
                "--enable=receive-pack",
                "--listen=127.0.0.1",
                &format!("--port={port}"),
                &format!("--base-path={}", root.display()),
                &root.display().to_string(),
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("git-daemon (Debian's git) starts");
        let daemon = Self(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return (daemon, port);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("git daemon did not listen on port {port}");
    }
}

impl Drop for GitDaemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_repository_by_a_network_url_is_registered_worked_on_and_applied_to() {
    let env = Env::new();
    let (bare, _) = upstream(&env, &[("a.txt", "one\n")]);
    let base = tip(&bare, "main");
    let (_daemon, port) = GitDaemon::serve(env.root());
    let url = format!("git://127.0.0.1:{port}/up.git");
    let plan = plan_on(&env, &url, &["echo two > a.txt"]);
    let (doc, code) = env.json(&["resource", "show", "local/up"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(
        doc["data"]["resource"]["properties"]["branch"], "main",
        "{doc:#}"
    );
    let (doc, code) = env.json(&["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(git_out(&bare, &["show", "main:a.txt"]), "two\n");
    assert_eq!(
        git_out(&bare, &["rev-parse", "main~1"]).trim(),
        base,
        "one commit on the base"
    );
}

#[test]
fn a_network_url_that_does_not_answer_is_refused_and_nothing_is_stored() {
    let env = Env::new();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("git://127.0.0.1:{port}/none.git");
    let (doc, code) = env.json(&["resource", "add", "git", "local/up", "--url", &url]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT")),
        "{doc:#}"
    );
    let message = doc["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&url), "names the URL: {message}");
    let (doc, _) = env.json(&["resource", "list"]);
    assert_eq!(doc["data"]["resources"], serde_json::json!([]), "{doc:#}");
}

#[test]
fn the_code_of_a_repository_by_url_is_indexed_from_the_engines_clone_and_searched() {
    let env = Env::new();
    let (_, url) = upstream(
        &env,
        &[(
            "src/auth.rs",
            "/// Verifies a token.\npub fn verify_token(t: &str) -> bool { !t.is_empty() }\n",
        )],
    );
    let plan = plan_on(&env, &url, &["echo note > NOTES.md"]);
    let (doc, code) = env.json(&[
        "tool",
        "run",
        "search_code",
        "--plan",
        &plan,
        "--args",
        r#"{"query":"verify_token"}"#,
    ]);
    assert_eq!(code, 0, "{doc:#}");
    assert!(
        doc.to_string().contains("src/auth.rs"),
        "the definition is found: {doc:#}"
    );
    let (doc, code) = env.json(&["resource", "show", "local/up"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["indexing"]["text_index"], "ready", "{doc:#}");
}
