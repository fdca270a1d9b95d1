//! Plan inspection through a server (spec section 21): each command prints through
//! `--server` what it prints in process on the server host, and the client keeps no database.

use serde_json::Value;

use crate::support::server::{Server, masked, server_with_a_plan};
use crate::support::{Env, db_file, stdout};

/// Runs `args` in process on the server host and through the server from `client`, asserts
/// the same exit code, and returns both JSON documents (local first).
fn both(server: &Server, client: &Env, args: &[&str]) -> (Value, Value) {
    let (local, local_code) = server.env.json(args);
    let (remote, remote_code) = server.client_json(client, args);
    assert_eq!(
        remote_code, local_code,
        "{args:?}\nlocal: {local:#}\nremote: {remote:#}"
    );
    (local, remote)
}

/// Asserts that `args` answers with the same `data` (or the same error) both ways.
fn same_data(server: &Server, client: &Env, args: &[&str]) -> Value {
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
fn plain_both(server: &Server, client: &Env, args: &[&str]) -> (String, String) {
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
