//! Decisions and their corrections through a server (spec sections 13 and 21): `plan tree`,
//! `plan explain`, `plan correct` and `plan diff --correction` print through `--server` what
//! they print in process on the server host, a correction made through a server is the one
//! made in process, and the client keeps no database.

use serde_json::Value;

use super::correction::{by_key, offline_plan, store};
use super::server_plan_views::same_data;
use crate::support::server::Server;
use crate::support::{Env, db_file};

/// The plain text `args` prints in process and through the server, each suggested command
/// cut to what follows `agents` and its global options (they name each side's own data
/// directory and server).
fn plain_both(server: &Server, client: &Env, args: &[&str]) -> (String, String) {
    let (local, remote) = super::server_plan_views::plain_both(server, client, args);
    let cut = |text: String| -> String {
        text.lines()
            .map(|line| match (line.find("agents "), line.find(" plan ")) {
                (Some(a), Some(p)) if a < p => format!("{}agents{}", &line[..a], &line[p..]),
                _ => line.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    (cut(local), cut(remote))
}

/// A server on an offline eight-step plan waiting at its apply gate: the server, the plan id
/// and the id of its step `s5`.
fn server_with_steps() -> (Server, String, String) {
    let (s, id, pid) = offline_plan();
    let st = store(&s.env);
    let s5 = by_key(&st, &pid)["s5"].decision_id.to_string();
    drop(st);
    (Server::start(s.env), id, s5)
}

#[test]
fn tree_explain_and_correction_previews_through_a_server_answer_as_in_process() {
    let (server, plan, s5) = server_with_steps();
    let client = Env::new();
    let tree = same_data(&server, &client, &["plan", "tree", &plan]);
    assert_eq!(tree["data"]["summary"]["nodes"], 10, "{tree:#}");
    same_data(
        &server,
        &client,
        &["plan", "tree", "--show-superseded", &plan],
    );
    let (local, remote) = plain_both(&server, &client, &["plan", "tree", &plan]);
    assert_eq!(remote, local);
    assert!(remote.contains(&s5[..8]), "{remote}");

    let explained = same_data(&server, &client, &["plan", "explain", &s5]);
    assert_eq!(
        explained["data"]["decision_id"],
        s5.as_str(),
        "{explained:#}"
    );
    same_data(
        &server,
        &client,
        &["plan", "explain", "--show-context", "--show-reasoning", &s5],
    );
    let (local, remote) = plain_both(&server, &client, &["plan", "explain", &s5]);
    assert_eq!(remote, local);

    let revert = [
        "plan",
        "correct",
        "--mode",
        "revert",
        "-g",
        "use a fixed value",
    ];
    let dry: Vec<&str> = revert.iter().copied().chain(["--dry-run", &s5]).collect();
    let preview = same_data(&server, &client, &dry);
    assert_eq!(
        preview["data"]["affected"]["steps_rerun"]
            .as_array()
            .unwrap()
            .len(),
        2,
        "{preview:#}"
    );
    let (local, remote) = plain_both(&server, &client, &dry);
    assert_eq!(remote, local);
    // Without --yes and without a terminal, the revert asks both ways.
    let asked: Vec<&str> = revert.iter().copied().chain([s5.as_str()]).collect();
    let asked = same_data(&server, &client, &asked);
    assert_eq!(asked["error"]["code"], "NEEDS_APPROVAL", "{asked:#}");
    // The offline executor cannot carry guidance: an appended child plan is refused alike.
    let append = [
        "plan",
        "correct",
        "--mode",
        "append",
        "-g",
        "x",
        "--dry-run",
        &s5,
    ];
    let (local, local_code) = server.env.json(&append);
    let (refused, code) = server.client_json(&client, &append);
    assert_eq!((code, local_code), (1, 1), "{refused:#}");
    assert_eq!(refused["error"]["code"], "NOT_SUPPORTED", "{refused:#}");
    assert_eq!(without_ids(&refused["error"]), without_ids(&local["error"]));
    let unknown = same_data(&server, &client, &["plan", "explain", "01NOPE"]);
    assert_eq!(unknown["exit_code"], 1, "{unknown:#}");
    assert!(!db_file(&client).exists());
}

/// `value` with what differs between two plans alike replaced: every id (a ULID or a
/// prefix of one, an approval's or a checkpoint's), git object ids, times, and the global
/// options a suggested command repeats (each side's own data directory and server).
fn without_ids(value: &Value) -> Value {
    let masks = [
        (r"--(data-dir|config-path|server) \S+ ", ""),
        // Object ids first: a hex id ending in eight digits would otherwise lose its tail
        // to the id mask and no longer read as an object id.
        (r"\b[0-9a-f]{40}\b", "<oid>"),
        (r"[0-9A-HJKMNP-TV-Z]{8,26}\b", "<id>"),
        (r"\d{4}-\d\d-\d\dT[0-9:.<>a-z]+Z?", "<time>"),
    ]
    .map(|(re, to)| (regex::Regex::new(re).unwrap(), to));
    match value {
        Value::String(s) => Value::from(masks.iter().fold(s.clone(), |s, (re, to)| {
            re.replace_all(&s, *to).into_owned()
        })),
        Value::Array(a) => a.iter().map(without_ids).collect(),
        Value::Object(o) => o
            .iter()
            .map(|(k, v)| (k.clone(), without_ids(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => other.clone(),
    }
}

#[test]
fn a_revert_through_a_server_is_the_revert_in_process_and_its_comparison_reads_alike() {
    let (server, plan, s5) = server_with_steps();
    let client = Env::new();
    // A second plan alike on the server host, corrected in process.
    let (doc, code) = server.env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--arg",
        "version=1",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    let other = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let st = store(&server.env);
    let other_s5 = by_key(&st, &other.parse().unwrap())["s5"]
        .decision_id
        .to_string();
    drop(st);

    let revert = [
        "plan", "correct", "--mode", "revert", "-g", "again", "--yes",
    ];
    let args: Vec<&str> = revert.iter().copied().chain([other_s5.as_str()]).collect();
    let (local, code) = server.env.json(&args);
    assert_eq!(code, 0, "{local:#}");
    let args: Vec<&str> = revert.iter().copied().chain([s5.as_str()]).collect();
    let (remote, code) = server.client_json(&client, &args);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(remote["data"]["plan_id"], plan.as_str(), "{remote:#}");
    assert_eq!(
        without_ids(&remote["data"]),
        without_ids(&local["data"]),
        "the revert through the server is the one in process"
    );

    // What the correction did reads the same both ways.
    let attempt = remote["data"]["attempt_id"].as_str().unwrap().to_string();
    let compared = same_data(
        &server,
        &client,
        &["plan", "diff", "--correction", &attempt, &plan],
    );
    assert_eq!(compared["data"]["attempt_id"], attempt.as_str());
    let (local, remote) = plain_both(
        &server,
        &client,
        &["plan", "diff", "--correction", &attempt],
    );
    assert_eq!(remote, local);
    let elsewhere = same_data(
        &server,
        &client,
        &["plan", "diff", "--correction", &attempt, &other],
    );
    assert_eq!(elsewhere["error"]["code"], "INVALID_INPUT", "{elsewhere:#}");
    let missing = same_data(
        &server,
        &client,
        &["plan", "diff", "--correction", "01NOPE", &plan],
    );
    assert_eq!(missing["error"]["code"], "NOT_FOUND", "{missing:#}");
    let tree = same_data(
        &server,
        &client,
        &["plan", "tree", "--show-superseded", &plan],
    );
    assert!(
        tree["data"]["summary"]["superseded"].as_u64().unwrap() >= 2,
        "{tree:#}"
    );
    let (local, remote) = plain_both(&server, &client, &["plan", "tree", &plan]);
    assert_eq!(remote, local);
    assert!(!db_file(&client).exists());
}

#[test]
fn export_and_cleanup_through_a_server_answer_as_in_process() {
    let (server, plan, _) = server_with_steps();
    let client = Env::new();
    let local_patch = server.env.root().join("local.patch");
    let remote_patch = server.env.root().join("remote.patch");
    let local_arg = local_patch.display().to_string();
    let remote_arg = remote_patch.display().to_string();
    let (local, code) = server
        .env
        .json(&["plan", "export", &plan, "--patch", &local_arg]);
    assert_eq!(code, 0, "{local:#}");
    let (remote, code) =
        server.client_json(&client, &["plan", "export", &plan, "--patch", &remote_arg]);
    assert_eq!(code, 0, "{remote:#}");
    let patch_free = |doc: &Value, file: &str| -> Value {
        Value::from(doc["data"].to_string().replace(file, "<patch>"))
    };
    assert_eq!(
        patch_free(&remote, &remote_arg),
        patch_free(&local, &local_arg)
    );
    let written = std::fs::read_to_string(&remote_patch).unwrap();
    assert!(written.contains("+++ "), "{written}");
    assert_eq!(written, std::fs::read_to_string(&local_patch).unwrap());
    // An existing file is refused alike without --force.
    let again = same_data(
        &server,
        &client,
        &["plan", "export", &plan, "--patch", &remote_arg],
    );
    assert_ne!(again["exit_code"], 0, "{again:#}");
    let unknown = same_data(
        &server,
        &client,
        &["plan", "export", "01NOPE", "--branch", "x"],
    );
    assert_eq!(unknown["exit_code"], 1, "{unknown:#}");

    // Without --yes and without a terminal, a cleanup asks both ways; with it, a plan at its
    // apply gate keeps its sandbox.
    let asked = same_data(&server, &client, &["plan", "cleanup"]);
    assert_eq!(asked["error"]["code"], "NEEDS_APPROVAL", "{asked:#}");
    let cleaned = same_data(&server, &client, &["plan", "cleanup", "--yes"]);
    assert_eq!(cleaned["exit_code"], 0, "{cleaned:#}");
    assert!(!db_file(&client).exists());
}

#[test]
fn the_comparison_masks_an_object_id_whole_even_when_it_ends_in_digits() {
    let oid = "f694a4a872a41f1308967fb28e12345678901234";
    let masked = without_ids(&Value::from(format!("commit {oid} of 01JCX3Z7Q2")));
    assert_eq!(masked, Value::from("commit <oid> of <id>"));
}
