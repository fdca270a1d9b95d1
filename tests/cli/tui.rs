//! The real binary in a real terminal (tmux): launch, live updates from another process, quit.

use std::time::{Duration, Instant};

use cleveragents::engine::domain::plan::Plan;
use cleveragents::engine::store::Store;

use crate::support::{Env, Tmux, shell_quote};

#[test]
fn the_tui_shows_plans_follows_other_processes_and_quits_on_q() {
    let env = Env::new();
    let db = env.data_dir.join("cleveragents.db");
    let mut store = Store::open(&db).unwrap();
    let first = Plan::new("local/format-code", "fmt", jiff::Timestamp::now());
    store.insert_plan(&first).unwrap();

    let exit_file = env.root().join("exit-code");
    let command = format!(
        "env -u NO_COLOR HOME={home} TERM=xterm-256color {bin} --data-dir {data} --config-path {config} tui; echo $? > {exit}",
        home = shell_quote(env.root()),
        bin = env!("CARGO_BIN_EXE_agents"),
        data = shell_quote(&env.data_dir),
        config = shell_quote(&env.config_path),
        exit = shell_quote(&exit_file),
    );
    let tmux = Tmux::new("tui");
    let started = tmux.cmd(&[
        "new-session",
        "-d",
        "-s",
        "s",
        "-x",
        "120",
        "-y",
        "40",
        &command,
    ]);
    assert!(
        started.status.success(),
        "{}",
        String::from_utf8_lossy(&started.stderr)
    );

    let screen = tmux.wait_for("the first plan", |s| s.contains(&first.plan_id.short()));
    assert!(screen.contains("local/format-code"), "{screen}");
    assert!(screen.contains("Plans"), "{screen}");

    // Another process creates a plan: the TUI shows it without any key press.
    let second = Plan::new("local/add-license", "lic", jiff::Timestamp::now());
    store.insert_plan(&second).unwrap();
    tmux.wait_for("the second plan", |s| {
        s.contains(&second.plan_id.short()) && s.contains("local/add-license")
    });

    tmux.cmd(&["send-keys", "-t", "s", "q"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !exit_file.exists() {
        assert!(
            Instant::now() < deadline,
            "the TUI did not quit on q; screen:\n{}",
            tmux.screen()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(std::fs::read_to_string(&exit_file).unwrap().trim(), "0");
    let _ = tmux.alive();
}

#[test]
fn the_tui_refuses_to_start_without_a_terminal() {
    let env = Env::new();
    let (doc, code) = env.json(&["tui"]);
    assert_eq!(code, 1);
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("needs a terminal")
    );
}

#[test]
fn agents_alone_prints_help_when_not_in_a_terminal() {
    let env = Env::new();
    let out = env.run(&[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("Usage:"));
}

#[test]
fn approving_the_apply_gate_in_the_tui_applies_the_plan() {
    let s = crate::cli::lifecycle::setup();
    let (doc, code, id) = crate::cli::lifecycle::use_plan(&s, "trusted");
    assert_eq!(code, 3, "trusted waits at the apply gate: {doc:#}");
    let env = &s.env;
    let command = format!(
        "env -u NO_COLOR HOME={home} TERM=xterm-256color {bin} --data-dir {data} --config-path {config} tui --focus approvals",
        home = shell_quote(env.root()),
        bin = env!("CARGO_BIN_EXE_agents"),
        data = shell_quote(&env.data_dir),
        config = shell_quote(&env.config_path),
    );
    let tmux = Tmux::new("approve");
    assert!(
        tmux.cmd(&[
            "new-session",
            "-d",
            "-s",
            "s",
            "-x",
            "140",
            "-y",
            "45",
            &command
        ])
        .status
        .success()
    );
    tmux.wait_for("the pending gate", |sc| sc.contains("1 pending"));
    tmux.cmd(&["send-keys", "-t", "s", "a"]);
    std::thread::sleep(Duration::from_millis(300));
    tmux.cmd(&["send-keys", "-t", "s", "y"]);
    tmux.wait_for("the plan applied", |sc| {
        sc.contains("applied") && sc.contains("0 pending")
    });
    let log = std::process::Command::new("git")
        .arg("-C")
        .arg(&s.repo)
        .args(["log", "--format=%B", "-1"])
        .output()
        .unwrap();
    let message = String::from_utf8_lossy(&log.stdout);
    assert!(message.contains(&format!("Plan-Id: {id}")), "{message}");
    tmux.cmd(&["send-keys", "-t", "s", "q"]);
}
