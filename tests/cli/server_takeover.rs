//! A server instance that dies loses nothing (spec section 21): the plan it was driving is
//! taken over by the next instance that finds its lease stale (a restarted server on the same
//! data directory, or another instance on the same PostgreSQL database), resumed from its last
//! checkpoint and driven to the gate it would have reached. The driver is killed with SIGKILL
//! in the middle of a step; the tests compare the result with an uninterrupted run's.

use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::postgres::fresh_database;
use crate::support::server::Server;
use crate::support::{Env, git_repo};

/// Two steps; the second takes long enough to be killed in.
const SLOW_NOTES: &str = "name: local/slow-notes\ndefinition-of-done: ONE.md and TWO.md exist\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: first\n    run: printf 'one\\n' > ONE.md\n  - name: slow\n    run: sleep 3 && printf 'two\\n' > TWO.md\n";

/// A server host whose leases expire after 5 s (the shortest allowed), so that an instance
/// that stops beating is found within seconds.
fn host() -> Env {
    host_with("")
}

/// [`host`] with more lines of `config.toml`.
fn host_with(extra: &str) -> Env {
    let env = Env::new();
    let config = env.root().join("config");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("lease-expiry-secs = 5\n{extra}"),
    )
    .unwrap();
    env
}

/// Registers a repository, the slow action and a project through `server` from `client`.
fn define(server: &Server, client: &Env, repo: &std::path::Path) {
    define_with(client, repo, |args| server.client_json(client, args));
}

/// Registers a repository, the slow action and a project with `run` (a command and its
/// answer); the action file is written in `env`.
fn define_with(env: &Env, repo: &std::path::Path, run: impl Fn(&[&str]) -> (Value, i32)) {
    let file = env.root().join("slow.yaml");
    std::fs::write(&file, SLOW_NOTES).unwrap();
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ][..],
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
        &["project", "create", "app"],
        &["project", "link-resource", "app", "local/repo"],
    ] {
        let (doc, code) = run(args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
}

const USE: [&str; 5] = [
    "plan",
    "use",
    "local/slow-notes",
    "app",
    "--automation-profile=trusted",
];

/// Starts `plan use` through `server` without waiting for it (it runs until the apply gate).
fn start_plan(server: &Server, client: &Env) -> Child {
    server
        .client(client, &USE)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn status(server: &Server, client: &Env, plan: &str) -> Value {
    server.client_json(client, &["plan", "status", plan]).0
}

/// Waits up to `limit` for `done`, polling every 200 ms; panics naming `what` with the last
/// status seen.
fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> (bool, Value)) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let (ok, last) = done();
        if ok {
            return last;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}: {last:#}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The id of the one plan `server` knows.
fn the_plan(server: &Server, client: &Env) -> String {
    let doc = wait_for("the plan to exist", Duration::from_secs(60), || {
        let (doc, _) = server.client_json(client, &["plan", "list"]);
        (
            doc["data"]["plans"]
                .as_array()
                .is_some_and(|p| p.len() == 1),
            doc,
        )
    });
    doc["data"]["plans"][0]["plan_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits until the slow step of `plan` runs (then SIGKILL hits it mid-step).
fn wait_for_slow_step(server: &Server, client: &Env, plan: &str) {
    wait_for("the slow step to run", Duration::from_secs(60), || {
        let doc = status(server, client, plan);
        (doc["data"]["steps"][1]["status"] == "running", doc)
    });
    std::thread::sleep(Duration::from_millis(500));
}

/// Waits until `plan` rests at its apply gate with both steps done.
fn wait_for_gate(server: &Server, client: &Env, plan: &str) -> Value {
    wait_for(
        "the plan to reach its apply gate",
        Duration::from_secs(90),
        || {
            let doc = status(server, client, plan);
            let steps_done = doc["data"]["steps"]
                .as_array()
                .is_some_and(|s| s.len() == 2 && s.iter().all(|s| s["status"] == "done"));
            (steps_done && doc["data"]["state"] != "processing", doc)
        },
    )
}

/// The files of the plan's diff: paths, statuses and hunks, without the ids of the plan's own
/// decisions (two plans' ids differ; everything else must not).
fn diff_files(server: &Server, client: &Env, plan: &str) -> Value {
    let (doc, code) = server.client_json(client, &["plan", "diff", plan]);
    assert_eq!(code, 0, "{doc:#}");
    let mut files = doc["data"]["resources"][0]["files"].clone();
    for file in files.as_array_mut().unwrap() {
        for hunk in file["hunks"].as_array_mut().unwrap() {
            hunk.as_object_mut().unwrap().remove("decision_ids");
        }
    }
    files
}

/// The events of `plan` as a follower reads them: their seqs increase, and the takeover is in
/// them (the interruption naming the vanished driver, then both steps done once each).
fn assert_events_tell_the_takeover(server: &Server, client: &Env, plan: &str) {
    let (doc, code) = server.client_json(client, &["plan", "events", plan]);
    assert_eq!(code, 0, "{doc:#}");
    let events = doc["data"]["events"].as_array().unwrap();
    let seqs: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    let interrupted: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "plan_interrupted")
        .collect();
    assert_eq!(interrupted.len(), 1, "{doc:#}");
    assert!(
        interrupted[0]["data"]["previous_owner"].is_object(),
        "the interruption names the driver that vanished: {doc:#}"
    );
    let completed_slow = events
        .iter()
        .filter(|e| {
            e["type"] == "execute_step"
                && e["data"]["status"] == "done"
                && e["data"]["step"] == "step 2 of 2: slow"
        })
        .count();
    assert_eq!(completed_slow, 1, "{doc:#}");
}

/// What the same plan produces when nothing interrupts it, on `server`.
fn uninterrupted_files(server: &Server, client: &Env) -> Value {
    let (doc, code) = server.client_json(client, &USE);
    assert_eq!(code, 3, "{doc:#}");
    diff_files(server, client, doc["data"]["plan_id"].as_str().unwrap())
}

#[test]
fn a_server_restarted_after_sigkill_resumes_the_plan_it_was_driving_to_its_gate() {
    let env = host();
    let repo = git_repo(env.root(), "repo");
    let client = Env::new();
    let mut first = Server::start(env);
    define(&first, &client, &repo);
    let mut waiting = start_plan(&first, &client);
    let plan = the_plan(&first, &client);
    wait_for_slow_step(&first, &client, &plan);

    first.kill_hard();
    let _ = waiting.wait();
    first.start_again();

    let at_gate = wait_for_gate(&first, &client, &plan);
    assert_ne!(at_gate["data"]["state"], "errored", "{at_gate:#}");
    assert_events_tell_the_takeover(&first, &client, &plan);
    let files = diff_files(&first, &client, &plan);
    assert_eq!(files, uninterrupted_files(&first, &client));
    assert_eq!(files.as_array().unwrap().len(), 2, "{files:#}");
}

/// Two instances on one fresh database, and a plan started through the first whose slow step
/// runs: (first, second, client, plan, the client's waiting `plan use`).
fn two_instances_mid_step() -> (Server, Server, Env, String, Child) {
    two_instances_mid_step_with("")
}

/// [`two_instances_mid_step`] with more lines in both instances' `config.toml`.
fn two_instances_mid_step_with(extra: &str) -> (Server, Server, Env, String, Child) {
    let database = fresh_database();
    let a = Server::start_on_postgres(host_with(extra), &database);
    let b = Server::start_on_postgres(host_with(extra), &database);
    let repo = git_repo(a.env.root(), "repo");
    let client = Env::new();
    define(&a, &client, &repo);
    let waiting = start_plan(&a, &client);
    let plan = the_plan(&b, &client);
    wait_for_slow_step(&b, &client, &plan);
    (a, b, client, plan, waiting)
}

#[test]
fn an_instance_killed_mid_step_leaves_its_plan_to_another_instance_on_the_same_database() {
    let (mut a, b, client, plan, mut waiting) = two_instances_mid_step();
    a.kill_hard();
    let _ = waiting.wait();

    let at_gate = wait_for_gate(&b, &client, &plan);
    assert_ne!(at_gate["data"]["state"], "errored", "{at_gate:#}");
    assert_events_tell_the_takeover(&b, &client, &plan);
    let files = diff_files(&b, &client, &plan);
    assert_eq!(files, uninterrupted_files(&b, &client));
    assert_eq!(files.as_array().unwrap().len(), 2, "{files:#}");
}

/// The sandboxes of the plan `plan` under `server`'s data directory.
fn sandboxes_of(server: &Server, plan: &str) -> std::path::PathBuf {
    server.env.data_dir.join("sandboxes").join(plan)
}

#[test]
fn a_takeover_on_another_machine_rebuilds_the_sandbox_from_the_shared_checkpoint_store() {
    let shared = tempfile::tempdir().unwrap();
    let store = shared.path().join("checkpoints");
    let (mut a, b, client, plan, mut waiting) = two_instances_mid_step_with(&format!(
        "checkpoint-store = {:?}\n",
        store.display().to_string()
    ));
    assert!(
        sandboxes_of(&a, &plan).is_dir(),
        "the plan's sandbox lives on the disk of its driver"
    );
    a.kill_hard();
    let _ = waiting.wait();
    // The machine is gone, and its disk with it.
    std::fs::remove_dir_all(a.env.data_dir.join("sandboxes")).unwrap();

    let at_gate = wait_for_gate(&b, &client, &plan);
    assert_ne!(at_gate["data"]["state"], "errored", "{at_gate:#}");
    assert_events_tell_the_takeover(&b, &client, &plan);
    assert!(
        sandboxes_of(&b, &plan).is_dir(),
        "the survivor rebuilt the sandbox in its own data directory"
    );
    assert!(!sandboxes_of(&a, &plan).exists());
    let files = diff_files(&b, &client, &plan);
    assert_eq!(files, uninterrupted_files(&b, &client));
    assert_eq!(files.as_array().unwrap().len(), 2, "{files:#}");
}

#[test]
fn without_a_checkpoint_store_a_sandbox_lost_with_its_machine_is_named_with_the_key_that_would_keep_it()
 {
    let (mut a, b, client, plan, mut waiting) = two_instances_mid_step();
    let lost = sandboxes_of(&a, &plan);
    a.kill_hard();
    let _ = waiting.wait();
    std::fs::remove_dir_all(a.env.data_dir.join("sandboxes")).unwrap();

    // The survivor finds the plan abandoned and fails to resume it.
    wait_for("the takeover to be tried", Duration::from_secs(60), || {
        let (doc, _) = b.client_json(&client, &["plan", "events", &plan]);
        let tried = doc["data"]["events"]
            .as_array()
            .is_some_and(|e| e.iter().any(|e| e["type"] == "plan_interrupted"));
        (tried, doc)
    });
    for command in [["plan", "diff"], ["plan", "execute"]] {
        let (doc, code) = b.client_json(&client, &[command[0], command[1], &plan]);
        assert_ne!(code, 0, "{doc:#}");
        let error = doc["error"].to_string();
        assert!(
            error.contains(&lost.display().to_string()),
            "the error names the missing sandbox: {doc:#}"
        );
        assert!(
            error.contains("checkpoint-store"),
            "the error names the key that keeps sandboxes restorable: {doc:#}"
        );
    }
}

#[test]
fn an_instance_stopped_mid_step_hands_its_plan_over_to_another_instance() {
    let (mut a, b, client, plan, mut waiting) = two_instances_mid_step();
    // SIGTERM: the instance stops the plan at its next safe point and hands it over.
    assert!(
        a.terminate(Duration::from_secs(60)).is_some(),
        "the instance stops"
    );
    let _ = waiting.wait();

    let at_gate = wait_for_gate(&b, &client, &plan);
    assert_ne!(at_gate["data"]["state"], "errored", "{at_gate:#}");
    let (doc, _) = b.client_json(&client, &["plan", "events", &plan]);
    let handed: Vec<&Value> = doc["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "plan_interrupted")
        .collect();
    assert_eq!(handed.len(), 1, "{doc:#}");
    assert_eq!(handed[0]["data"]["handover"], true, "{doc:#}");
    let files = diff_files(&b, &client, &plan);
    assert_eq!(files, uninterrupted_files(&b, &client));
}

#[test]
fn a_plan_stopped_by_ctrl_c_is_not_taken_over_by_a_server() {
    let env = host();
    let repo = git_repo(env.root(), "repo");
    define_with(&env, &repo, |args| env.json(args));
    let mut driver = env
        .local_command(&USE)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let plan = wait_for("the plan to exist", Duration::from_secs(60), || {
        let (doc, _) = env.json(&["plan", "list"]);
        (
            doc["data"]["plans"]
                .as_array()
                .is_some_and(|p| p.len() == 1),
            doc,
        )
    })["data"]["plans"][0]["plan_id"]
        .as_str()
        .unwrap()
        .to_string();
    wait_for("the slow step to run", Duration::from_secs(60), || {
        let (doc, _) = env.json(&["plan", "status", &plan]);
        (doc["data"]["steps"][1]["status"] == "running", doc)
    });
    let interrupt = std::process::Command::new("kill")
        .args(["-INT", &driver.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupt.success());
    let _ = driver.wait();

    let server = Server::start(env);
    // Several of the server's looks for abandoned plans (one at start, then every 1.7 s).
    std::thread::sleep(Duration::from_secs(5));
    let doc = status(&server, &Env::new(), &plan);
    assert_eq!(doc["data"]["state"], "queued", "{doc:#}");
    assert_eq!(doc["data"]["state_reason"], "interrupted", "{doc:#}");
}
