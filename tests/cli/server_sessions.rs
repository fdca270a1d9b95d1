//! Session reads through a server (spec sections 19 and 21): `session list` and `session show`
//! give the same `data` and exit code in process and through `--server`, and the client's data
//! directory holds no database afterwards.

use serde_json::Value;

use crate::cli::sessions::{create, ok, orchestration_script, setup};
use crate::support::Env;
use crate::support::server::Server;

/// `data` of a JSON envelope with what differs between two machines masked: suggested
/// commands repeat their own global options.
fn masked(mut data: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::String(s) if s.starts_with("agents ") => {
                if let Some(i) = s.find(" session ") {
                    *s = format!("agents{}", &s[i..]);
                }
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            Value::Object(o) => o.values_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut data);
    data
}

#[test]
fn session_list_and_show_through_a_server_print_what_they_print_in_process() {
    let s = setup(orchestration_script());
    let id = create(&s, &["--name", "ops"]);
    create(&s, &["--name", "idle"]);
    ok(
        &s,
        &[
            "session",
            "tell",
            "--session",
            "ops",
            "Create an action that refreshes the lock files and add it to the app project",
        ],
    );
    let calls: [&[&str]; 5] = [
        &["session", "list"],
        &["session", "show", "ops"],
        &["session", "show", &id[..8]],
        &["session", "show", "idle"],
        &["session", "show", "nope"],
    ];
    let local: Vec<(Value, i32)> = calls.iter().map(|args| s.env.json(args)).collect();
    assert_eq!(
        local[1].0["data"]["plans"].as_array().map(Vec::len),
        Some(1),
        "the session linked its plan: {:#}",
        local[1].0
    );
    assert_eq!(local[4].1, 1, "an unknown session: {:#}", local[4].0);
    let _provider = s.server;
    let server = Server::start(s.env);
    let client = Env::new();
    for (args, (doc, code)) in calls.iter().zip(local) {
        let (remote, remote_code) = server.client_json(&client, args);
        assert_eq!(remote_code, code, "{args:?}: {remote:#}");
        if code == 0 {
            assert_eq!(
                masked(remote["data"].clone()),
                masked(doc["data"].clone()),
                "{args:?}"
            );
        } else {
            assert_eq!(remote["error"]["code"], doc["error"]["code"], "{args:?}");
            assert_eq!(
                remote["error"]["message"], doc["error"]["message"],
                "{args:?}"
            );
        }
    }
    assert!(
        !client.data_dir.join("cleveragents.db").exists(),
        "the client's data directory holds no database"
    );
}
