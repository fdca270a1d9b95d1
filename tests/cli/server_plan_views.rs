//! Plan inspection through a server (spec section 21): each command prints through
//! `--server` what it prints in process on the server host, and the client keeps no database.

use serde_json::Value;

use crate::support::server::{Server, masked, server_with_a_plan};
use crate::support::{Env, db_file, stdout};

/// Runs `args` in process on the server host and through the server from `client`, asserts
/// the same exit code, and returns both JSON documents (local first).
pub(crate) fn both(server: &Server, client: &Env, args: &[&str]) -> (Value, Value) {
    let (local, local_code) = server.env.json(args);
    let (remote, remote_code) = server.client_json(client, args);
    assert_eq!(
        remote_code, local_code,
        "{args:?}\nlocal: {local:#}\nremote: {remote:#}"
    );
    (local, remote)
}

/// Asserts that `args` answers with the same `data` (or the same error) both ways.
pub(crate) fn same_data(server: &Server, client: &Env, args: &[&str]) -> Value {
    let (local, remote) = both(server, client, args);
    assert_eq!(
        masked(remote["data"].clone()),
        masked(local["data"].clone()),
        "{args:?}"
    );
    assert_eq!(
        masked(remote["error"].clone()),
        masked(local["error"].clone()),
        "{args:?}"
    );
    remote
}

/// The plain text `args` prints in process and through the server.
pub(crate) fn plain_both(server: &Server, client: &Env, args: &[&str]) -> (String, String) {
    let mut all = vec!["--format", "plain"];
    all.extend_from_slice(args);
    let local = server.env.run(&all);
    let remote = server
        .client(client, &all)
        .output()
        .expect("the client runs");
    assert_eq!(remote.status.code(), local.status.code(), "{args:?}");
    (stdout(&local), stdout(&remote))
}

#[test]
fn plan_diff_through_a_server_equals_the_in_process_diff_with_every_option() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let whole = same_data(&server, &client, &["plan", "diff", &plan]);
    let files = whole["data"]["resources"][0]["files"].as_array().unwrap();
    assert!(!files.is_empty(), "{whole:#}");
    assert!(
        !files[0]["hunks"].as_array().unwrap().is_empty(),
        "the diff carries its hunks through the server: {whole:#}"
    );
    let resource = whole["data"]["resources"][0]["resource_name"]
        .as_str()
        .unwrap()
        .to_string();
    let path = files[0]["path"].as_str().unwrap().to_string();
    for extra in [
        &["--stat"][..],
        &["--path", &path][..],
        &["--resource", &resource][..],
    ] {
        let args: Vec<&str> = ["plan", "diff", &plan]
            .iter()
            .chain(extra)
            .copied()
            .collect();
        same_data(&server, &client, &args);
    }
    let missing = same_data(
        &server,
        &client,
        &["plan", "diff", &plan, "--resource", "nope"],
    );
    assert_eq!(missing["error"]["code"], "NOT_FOUND", "{missing:#}");

    // The human formats print the same table and unified text.
    let (local, remote) = plain_both(&server, &client, &["plan", "diff", &plan]);
    assert_eq!(remote, local);
    assert!(remote.contains("@@"), "{remote}");
    assert!(!db_file(&client).exists());
}

#[test]
fn plan_diff_json_through_a_server_is_the_in_process_text_byte_for_byte() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    // Everything before `timing` (command, status, exit code, data) as printed.
    let printed = |out: &std::process::Output, timing: &str| {
        let text = stdout(out);
        let end = text
            .find(timing)
            .unwrap_or_else(|| panic!("no {timing:?} in {text}"));
        text[..end].to_string()
    };
    for extra in [&[][..], &["--stat"][..]] {
        let mut args = vec!["--format", "json", "plan", "diff", &plan];
        args.extend_from_slice(extra);
        let local = server.env.run(&args);
        let remote = server
            .client(&client, &args)
            .output()
            .expect("the client runs");
        let json = printed(&local, "\n  \"timing\"");
        assert_eq!(printed(&remote, "\n  \"timing\""), json, "{args:?}");
        assert!(json.contains("\"files\": [\n"), "{json}");

        // The yaml, written from the typed files, holds the same data as the json.
        args[1] = "yaml";
        let yaml_out = server.env.run(&args);
        let remote_yaml = server
            .client(&client, &args)
            .output()
            .expect("the client runs");
        assert_eq!(
            printed(&remote_yaml, "\ntiming:"),
            printed(&yaml_out, "\ntiming:"),
            "{args:?}"
        );
        let from_yaml: Value = serde_yaml::from_str(&stdout(&yaml_out)).unwrap();
        let from_json: Value = serde_json::from_str(&stdout(&local)).unwrap();
        assert_eq!(from_yaml["data"], from_json["data"], "{args:?}");
    }
}

#[test]
fn plan_apply_asks_through_a_server_with_the_preview_it_shows_in_process() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    // Without a terminal and without --yes, Apply asks: NEEDS_APPROVAL with the changes.
    let remote = same_data(&server, &client, &["plan", "apply", &plan]);
    assert_eq!(remote["error"]["code"], "NEEDS_APPROVAL", "{remote:#}");
    assert!(remote["data"]["files"].as_u64().unwrap() >= 2, "{remote:#}");

    // With a hunk rejected, the preview is the accepted part and what is left out.
    let (review, code) = server.env.json(&["plan", "review", &plan]);
    assert_eq!(code, 0, "{review:#}");
    let first = review["data"]["files"][0]["path"]
        .as_str()
        .unwrap()
        .to_string();
    let (doc, code) = server
        .env
        .json(&["plan", "review", &plan, "--reject", &first]);
    assert_eq!(code, 0, "{doc:#}");
    let remote = same_data(&server, &client, &["plan", "apply", &plan]);
    assert_eq!(remote["error"]["code"], "NEEDS_APPROVAL", "{remote:#}");
    assert!(
        !remote["data"]["left_out"].as_array().unwrap().is_empty(),
        "{remote:#}"
    );

    // Once applied, `plan diff` shows what Apply wrote, the same both ways.
    let (doc, code) = server.client_json(&client, &["plan", "apply", "--yes", &plan]);
    assert_eq!(code, 0, "{doc:#}");
    let applied = same_data(&server, &client, &["plan", "diff", &plan]);
    assert_eq!(applied["data"]["applied"], true, "{applied:#}");
    let finished = same_data(&server, &client, &["plan", "apply", &plan]);
    assert_eq!(finished["error"]["code"], "CONFLICT", "{finished:#}");
    assert!(!db_file(&client).exists());
}

/// `data` of a rollback with what names this plan's own records replaced by what they are.
fn rollback_shape(mut data: Value) -> Value {
    for key in ["plan_id", "checkpoint_id"] {
        data[key] = Value::from(data[key].as_str().map_or(0, str::len));
    }
    let withdrawn = data["withdrawn_approvals"].as_array().map_or(0, Vec::len);
    data["withdrawn_approvals"] = Value::from(withdrawn);
    data
}

#[test]
fn checkpoints_artifacts_and_rollback_through_a_server_answer_as_in_process() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let listed = same_data(&server, &client, &["plan", "checkpoints", &plan]);
    assert!(
        listed["data"]["checkpoints"].as_array().unwrap().len() >= 2,
        "{listed:#}"
    );
    let made = same_data(&server, &client, &["plan", "artifacts", &plan]);
    assert!(
        !made["data"]["files"].as_array().unwrap().is_empty(),
        "{made:#}"
    );

    // Without a terminal and without --yes, a rollback asks; an unknown checkpoint is named.
    let asked = same_data(&server, &client, &["plan", "rollback", &plan, "2"]);
    assert_eq!(asked["error"]["code"], "NEEDS_APPROVAL", "{asked:#}");
    let unknown = same_data(
        &server,
        &client,
        &["plan", "rollback", "--yes", &plan, "cp_nope"],
    );
    assert_eq!(unknown["exit_code"], 1, "{unknown:#}");

    // The same rollback of two plans alike, one in process and one through the server.
    let (doc, code) = server.env.json(&["quickstart", "--headless"]);
    assert_eq!(code, 3, "{doc:#}");
    let other = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (local, code) = server.env.json(&["plan", "rollback", "--yes", &other, "2"]);
    assert_eq!(code, 0, "{local:#}");
    let (remote, code) = server.client_json(&client, &["plan", "rollback", "--yes", &plan, "2"]);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(remote["data"]["plan_id"], plan.as_str());
    assert_eq!(
        rollback_shape(remote["data"].clone()),
        rollback_shape(local["data"].clone())
    );
    let all = same_data(&server, &client, &["plan", "checkpoints", "--all", &plan]);
    let discarded = all["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["discarded_at"].is_null())
        .count();
    assert!(discarded >= 1, "{all:#}");
    assert!(!db_file(&client).exists());
}

#[test]
fn plan_logs_and_errors_through_a_server_answer_as_in_process() {
    let (server, plan) = server_with_a_plan();
    let client = Env::new();
    let logs = same_data(&server, &client, &["plan", "logs", &plan]);
    let steps = logs["data"]["steps"].as_array().unwrap();
    assert!(!steps.is_empty(), "{logs:#}");
    let first = steps[0]["position"].to_string();
    same_data(&server, &client, &["plan", "logs", &plan, &first]);
    let missing = same_data(&server, &client, &["plan", "logs", &plan, "no-such-step"]);
    assert_eq!(missing["error"]["code"], "NOT_FOUND", "{missing:#}");
    let errors = same_data(&server, &client, &["plan", "errors", &plan]);
    assert_eq!(errors["data"]["plan_id"], plan.as_str(), "{errors:#}");
    let unknown = same_data(&server, &client, &["plan", "errors", "01NOPE"]);
    assert_eq!(unknown["exit_code"], 1, "{unknown:#}");
    assert!(!db_file(&client).exists());
}
