//! The TUI attached to a server (`agents --server URL tui`, spec sections 20-21): the real
//! binary in a real terminal (tmux), its client's data directory empty, the plans on a real
//! `agents server start`. Same panes and keys as in process: it answers a gate, rejects a hunk,
//! and its live area shows a running step's output lines before the step ends.

use std::path::Path;
use std::time::Duration;

use crate::support::server::Server;
use crate::support::{Env, Tmux, git_out, shell_quote};

/// One step that prints a line, then waits for `go` to appear in the work tree.
const WAITING_ACTION: &str = r#"name: local/notes
description: Count while waiting for {{ version }}
definition-of-done: the step ended
strategy-actor: builtin/checklist-strategist
execution-actor: builtin/script-executor
arguments:
  - name: version
    type: string
    required: true
script:
  - name: count
    run: printf 'tick 1\n'; while [ ! -e go ]; do sleep 0.05; done; printf 'tick 2\n'
"#;

/// The TUI as a client of `server`, with `client`'s (empty) data directory; its exit code
/// goes to `exit`.
fn remote_tui(server: &Server, client: &Env, args: &str, exit: &Path) -> String {
    format!(
        "{}; echo $? > {}",
        client.terminal_command_with(
            &format!("AGENTS_TOKEN={}", server.token),
            &format!("--server {} tui {args}", server.url)
        ),
        shell_quote(exit)
    )
}

/// Quits; when the TUI has not yet seen its last command end, it asks first, and is told yes.
fn quit(tmux: &Tmux, exit: &Path) {
    tmux.keys(&["q"]);
    std::thread::sleep(Duration::from_millis(500));
    if !exit.exists() && tmux.screen().contains("Quit?") {
        tmux.keys(&["y"]);
    }
    assert_eq!(tmux.exit_code(exit, Duration::from_secs(15)), "0");
}

fn no_database(client: &Env) {
    assert!(
        !client.data_dir.join("cleveragents.db").exists(),
        "the client's data directory holds no database"
    );
}

#[test]
fn a_tui_attached_to_a_server_rejects_a_hunk_and_answers_the_apply_gate() {
    use crate::cli::apply::{plan_at_apply_gate, repo_with};
    let host = Env::new();
    let a: String = (1..=20).map(|i| format!("a{i}\n")).collect();
    let repo = repo_with(host.root(), "repo", &[("a.txt", &a)]);
    let plan = plan_at_apply_gate(
        &host,
        &[&repo],
        &["sed -i 's/^a1$/A1/; s/^a20$/A20/' a.txt"],
    );
    let server = Server::start(host);
    let client = Env::new();
    let exit = client.root().join("exit-code");
    let tmux = Tmux::new("remote-review");
    tmux.open(
        140,
        45,
        &remote_tui(&server, &client, &format!("--plan {plan}"), &exit),
    );
    tmux.wait_for("the diff with its marks", |sc| {
        sc.contains("a.txt") && sc.contains("·2 pending")
    });
    // A: the review; Space accepts the first hunk, x rejects the second.
    tmux.keys(&["A"]);
    tmux.wait_for("the review", |sc| sc.contains("REVIEW BEFORE APPLY"));
    tmux.keys(&["Space"]);
    tmux.wait_for("one accepted", |sc| sc.contains("✓1 ✗0 ·1 pending"));
    tmux.keys(&["x"]);
    tmux.wait_for("the reason prompt", |sc| sc.contains("Why (optional"));
    tmux.keys(&["-l", "keep a20"]);
    tmux.keys(&["Enter"]);
    // Once the server's review comes back, the hunk names who rejected it, and why.
    let by = format!("by {} ✗: keep a20", crate::support::server::SERVER_ADMIN);
    tmux.wait_for("one rejected", |sc| {
        sc.contains("✓1 ✗1 ·0 pending") && sc.contains(&by)
    });
    // The server holds the marks.
    let (review, code) = server.client_json(&client, &["plan", "review", &plan]);
    assert_eq!(code, 0, "{review:#}");
    let marks: Vec<&str> = review["data"]["files"][0]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["mark"].as_str().unwrap())
        .collect();
    assert_eq!(marks, ["accepted", "rejected"]);
    // Back to the panes; the approvals pane answers the apply gate.
    tmux.keys(&["Escape"]);
    // An Escape read together with the next key is Alt+key: wait until it has left the review.
    tmux.wait_for("the review closed", |sc| {
        !sc.contains("REVIEW BEFORE APPLY")
    });
    tmux.keys(&["4"]);
    tmux.wait_for("the pending gate", |sc| sc.contains("1 pending"));
    tmux.keys(&["a"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.keys(&["y"]);
    tmux.wait_up_to("the plan applied", Duration::from_secs(60), |sc| {
        sc.contains("applied") && sc.contains("0 pending")
    });
    assert_eq!(
        git_out(&repo, &["show", "HEAD:a.txt"]),
        a.replacen("a1\n", "A1\n", 1),
        "the accepted hunk is committed, the rejected one is not"
    );
    quit(&tmux, &exit);
    no_database(&client);
}

#[test]
fn the_live_area_of_a_tui_attached_to_a_server_shows_a_steps_output_while_it_runs() {
    let s = crate::cli::lifecycle::setup_with(WAITING_ACTION);
    // The step waits for a file written from outside while it runs: a running step of a
    // shared checkout does not see what another process's mount writes (docs/sandbox.md).
    s.env.use_full_checkouts();
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "supervised");
    assert_eq!(code, 3, "supervised stops before Execute: {doc:#}");
    let server = Server::start(s.env);
    let client = Env::new();
    let exit = client.root().join("exit-code");
    let tmux = Tmux::new("remote-live");
    tmux.open(
        140,
        45,
        &remote_tui(&server, &client, &format!("--plan {id}"), &exit),
    );
    tmux.wait_for("the plan", |sc| sc.contains(&id[..8]));
    tmux.keys(&["e"]);
    let screen = tmux.wait_up_to(
        "the step's first line in the live area",
        Duration::from_secs(60),
        |sc| sc.contains("Live · plan") && sc.contains("tick 1"),
    );
    assert!(!screen.contains("tick 2"), "{screen}");
    // The step has not ended: it waits for `go`.
    let (status, _) = server.client_json(&client, &["plan", "status", &id]);
    assert_eq!(
        (
            status["data"]["phase"].as_str(),
            status["data"]["state"].as_str()
        ),
        (Some("execute"), Some("processing")),
        "{status:#}"
    );
    crate::support::sandbox::write(&server.env, &id, "go", "");
    tmux.wait_up_to("the second line", Duration::from_secs(60), |sc| {
        sc.contains("tick 2")
    });
    tmux.wait_up_to("the run's end", Duration::from_secs(60), |sc| {
        sc.contains("done.") || sc.contains("waiting for you")
    });
    quit(&tmux, &exit);
    no_database(&client);
}
