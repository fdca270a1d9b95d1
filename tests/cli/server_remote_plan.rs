//! A plan that runs on the server, reviewed from any machine (spec section 21: "start a complex
//! task on your laptop, check progress from your phone, and review results from any
//! machine"): one client starts a plan on a repository by URL and exits, another's TUI shows it,
//! a reviewer in Chromium rejects one hunk and approves, a second human approves from the command
//! line, and the repository's branch gets one commit holding exactly the accepted hunks, with
//! both humans named; the audit log has every step with its human.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::browser::{Browser, screenshot_dir};
use crate::support::server::Server;
use crate::support::{Env, Tmux, git, git_out, shell_quote};

/// Lines of `big.txt`; the action changes every tenth, each change a hunk of its own.
const LINES: usize = 60;

fn text_with(changed: &[usize]) -> String {
    (1..=LINES)
        .map(|n| {
            if changed.contains(&n) {
                format!("line {n} CHANGED\n")
            } else {
                format!("line {n}\n")
            }
        })
        .collect()
}

/// The organization `acme`: alice owns it, rita and bob maintain it; each has a token.
struct Team {
    server: Server,
    admin: Env,
    alice: String,
    rita: String,
    bob: String,
}

impl Team {
    fn new() -> Self {
        let server = Server::start(Env::new());
        let admin = Env::new();
        let members = [
            ("owner", "alice"),
            ("maintainer", "rita"),
            ("maintainer", "bob"),
        ];
        let [alice, rita, bob]: [String; 3] = server
            .organization(&admin, "acme", &members)
            .try_into()
            .unwrap();
        Self {
            server,
            admin,
            alice,
            rita,
            bob,
        }
    }

    /// Runs `args` through the server with `token`, from a machine of its own.
    fn run_with(&self, token: &str, args: &[&str]) -> (Value, i32) {
        let mut cmd = self
            .server
            .client(&Env::new(), &[&["--format", "json"], args].concat());
        cmd.env("AGENTS_TOKEN", token);
        let out = cmd.output().expect("the binary runs");
        let doc = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
        (doc, out.status.code().unwrap_or(-1))
    }

    fn ok_with(&self, token: &str, args: &[&str]) -> Value {
        let (doc, code) = self.run_with(token, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
        doc
    }
}

/// A bare repository `up.git` whose `main` holds `big.txt`, and its `file://` URL.
fn upstream(root: &Path) -> (std::path::PathBuf, String) {
    let seed = root.join("seed");
    std::fs::create_dir_all(&seed).unwrap();
    git(&seed, &["init", "-q", "-b", "main"]);
    std::fs::write(seed.join("big.txt"), text_with(&[])).unwrap();
    git(&seed, &["add", "-A"]);
    git(&seed, &["commit", "-q", "-m", "base"]);
    git(
        root,
        &["clone", "-q", "--bare", seed.to_str().unwrap(), "up.git"],
    );
    let bare = root.join("up.git");
    let url = format!("file://{}", bare.display());
    (bare, url)
}

#[test]
fn a_plan_on_a_repository_by_url_runs_on_the_server_and_lands_what_two_humans_reviewed_and_approved()
 {
    let team = Team::new();
    let root = team.admin.root().to_path_buf();
    let (bare, url) = upstream(&root);
    let base = git_out(&bare, &["rev-parse", "main"]).trim().to_string();
    // The organization asks two approvals besides the plan's creator.
    let policy = root.join("policy.yaml");
    std::fs::write(&policy, "apply:\n  min_approvals: 2\n").unwrap();
    team.ok_with(
        &team.alice,
        &[
            "server",
            "policy",
            "set",
            "acme",
            "--config",
            policy.to_str().unwrap(),
        ],
    );
    // alice (client A) registers the repository by URL, a project and an action.
    team.ok_with(
        &team.alice,
        &["resource", "add", "git", "acme/up", "--url", &url],
    );
    team.ok_with(
        &team.alice,
        &["project", "create", "--resource", "acme/up", "acme/web"],
    );
    let changed: Vec<usize> = (1..=LINES / 10).map(|n| n * 10).collect();
    let action = root.join("action.yaml");
    std::fs::write(
        &action,
        format!(
            "name: acme/shout\ndefinition-of-done: every tenth line is changed\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: shout\n    run: {}\n",
            serde_json::json!(format!(
                "printf '{}' > big.txt",
                text_with(&changed).replace('\n', "\\n")
            ))
        ),
    )
    .unwrap();
    team.ok_with(
        &team.alice,
        &[
            "action",
            "create",
            "--available",
            "--config",
            action.to_str().unwrap(),
        ],
    );
    // alice starts the plan; the server drives it to its apply gate, and her client exits.
    let (doc, code) = team.run_with(
        &team.alice,
        &[
            "plan",
            "use",
            "acme/shout",
            "acme/web",
            "--automation-profile",
            "trusted",
        ],
    );
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert_eq!(
        git_out(&bare, &["rev-parse", "main"]).trim(),
        base,
        "nothing lands before Apply"
    );

    // bob's TUI (client B), on a machine without the plan, shows it waiting.
    let b = Env::new();
    let exit = b.root().join("tui-exit");
    let tmux = Tmux::new("remote-plan");
    tmux.open(
        140,
        40,
        &format!(
            "{}; echo $? > {}",
            b.terminal_command_with(
                &format!("AGENTS_TOKEN={}", team.bob),
                &format!("--server {} tui", team.server.url)
            ),
            shell_quote(&exit)
        ),
    );
    tmux.wait_for("the plan in bob's TUI", |sc| {
        sc.contains(&plan[..8]) && sc.contains("shout")
    });
    tmux.keys(&["q"]);
    std::thread::sleep(Duration::from_millis(500));
    if !exit.exists() && tmux.screen().contains("Quit?") {
        tmux.keys(&["y"]);
    }

    // rita, in Chromium, rejects the first hunk with a reason, accepts the rest, approves.
    let browser = Browser::start(1280, 800);
    browser.goto(&format!("{}/login", team.server.url));
    browser.fill("#token", &team.rita);
    browser.click("form[action='/login'] button[type=submit]");
    browser.goto(&format!("{}/plans/{plan}", team.server.url));
    let hunks: Vec<String> =
        serde_json::from_value(browser.js(
            "return [...document.querySelectorAll('.hunk[data-hunk]')].map(h => h.dataset.hunk)",
        ))
        .unwrap();
    assert_eq!(hunks.len(), changed.len(), "one hunk per changed line");
    let reason = "line 10 stays as it is";
    browser.fill(
        &format!("#hunk-{} .reject-form input[name=reason]", hunks[0]),
        reason,
    );
    browser.click(&format!("#hunk-{} button.reject", hunks[0]));
    browser.notice("rejected");
    for hunk in &hunks[1..] {
        browser.click(&format!("#hunk-{hunk} button.accept"));
        // The page comes back with the hunk marked (the notice alone may be the last one's).
        browser.wait_for(&format!(
            "const h = document.querySelector('#hunk-{hunk}'); return h && h.textContent.includes('accepted') ? true : null"
        ));
    }
    browser.screenshot(&screenshot_dir().join("remote-plan-reviewed-1280x800.png"));
    browser.click(".approval button.approve");
    let waiting = browser.wait_for(
        "const m = document.querySelector('main'); return m && m.textContent.includes('1 of 2') ? m.textContent : null",
    );
    assert!(
        waiting.to_string().contains("needs 2 approvals"),
        "{waiting}"
    );
    assert_eq!(
        git_out(&bare, &["rev-parse", "main"]).trim(),
        base,
        "one approval of two lands nothing"
    );

    // bob approves from the command line: the second approval applies the plan.
    team.ok_with(&team.bob, &["plan", "apply", "--yes", &plan]);
    let tip = git_out(&bare, &["rev-parse", "main"]).trim().to_string();
    assert_eq!(
        git_out(&bare, &["rev-parse", &format!("{tip}~1")]).trim(),
        base,
        "exactly one commit on the base"
    );
    assert_eq!(
        git_out(&bare, &["show", "main:big.txt"]),
        text_with(&changed[1..]),
        "exactly the accepted hunks"
    );
    let message = git_out(&bare, &["log", "-1", "--format=%B", "main"]);
    for trailer in ["Approved-by: rita", "Approved-by: bob", "Reviewed-by: rita"] {
        assert!(message.contains(trailer), "{trailer} in: {message}");
    }

    // The audit log has every step with its human.
    let (audit, code) = team
        .server
        .client_json(&team.admin, &["server", "audit", "--limit", "500"]);
    assert_eq!(
        code, 0,
        "the server's administrator reads the log: {audit:#}"
    );
    let rows = audit["data"]["rows"].as_array().unwrap();
    let by = |operation: &str, user: &str, target: &str| {
        rows.iter().any(|r| {
            r["operation"] == operation
                && r["user"] == user
                && r["target"].as_str().unwrap_or_default().contains(target)
        })
    };
    let this_plan = format!("plan {plan}");
    for (operation, user, target) in [
        ("change.add_resource", "alice", "acme/up"),
        ("run.use", "alice", "acme/shout, acme/web"),
        ("run.review", "rita", this_plan.as_str()),
        ("run.apply", "rita", this_plan.as_str()),
        ("run.apply", "bob", this_plan.as_str()),
    ] {
        assert!(
            by(operation, user, target),
            "no {operation} row of {user}: {audit:#}"
        );
    }
    let reviews = rows
        .iter()
        .filter(|r| r["operation"] == "run.review")
        .count();
    assert_eq!(reviews, hunks.len(), "one row per mark: {audit:#}");
}
