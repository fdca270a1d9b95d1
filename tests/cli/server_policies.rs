//! Organization policies (spec section 22) through a server: `agents server policy set|show`,
//! and a plan on an organization's project refused with POLICY_DENIED (exit 4), naming the
//! policy key, when its action's sandbox asks for the network under `network: never`, when
//! its automation profile is not in `profiles.allowed`, or when its budget is above
//! `budgets.max_cost_usd_per_plan`; a refused `plan use` creates nothing.

use serde_json::Value;

use crate::support::server::{Server, known_database};
use crate::support::{Env, git_repo};

const POLICY: &str = "\
network: never
profiles:
  allowed: [supervised]
budgets:
  max_cost_usd_per_plan: 5
apply:
  min_approvals: 2
skills:
  require_approval: [deploy]
";

const ACTION: &str = "definition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nreusable: true\nscript:\n  - name: hello\n    run: echo hello\n";

/// The engine of the server host's records, for what no command does yet (users and
/// organizations are added here directly).
fn host_engine(env: &Env) -> cleveragents_engine::api::Engine {
    let engine = cleveragents_engine::api::Engine::new(
        cleveragents_engine::paths::Paths::at(env.data_dir.clone(), env.config_path.clone()),
        cleveragents_engine::api::Settings::default(),
    );
    match known_database(env) {
        Some(url) => {
            engine.with_database(cleveragents_engine::api::DatabaseLocation::Postgres(url))
        }
        None => engine,
    }
}

fn write(env: &Env, name: &str, text: &str) -> String {
    let path = env.root().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// A server whose organization `acme` (owned by `ann`) has [`POLICY`] and a project
/// `acme/web`, with two actions: `acme/fetch`, whose sandbox asks for the network, and
/// `acme/tidy`, which does not.
fn acme_server(client: &Env) -> Server {
    let server = Server::start(Env::new());
    let host = host_engine(&server.env);
    host.add_user("ann", false).unwrap();
    host.add_org("acme", "ann").unwrap();
    let policy = write(client, "policy.yaml", POLICY);
    let (doc, code) = server.client_json(
        client,
        &["server", "policy", "set", "acme", "--config", &policy],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["policy"]["network"], "never", "{doc:#}");
    let repo = git_repo(client.root(), "web");
    let fetch = write(
        client,
        "fetch.yaml",
        &format!("name: acme/fetch\n{ACTION}sandbox:\n  network: true\n"),
    );
    let tidy = write(client, "tidy.yaml", &format!("name: acme/tidy\n{ACTION}"));
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "acme/web-repo",
            "--path",
            repo.to_str().unwrap(),
        ][..],
        &[
            "project",
            "create",
            "--resource",
            "acme/web-repo",
            "acme/web",
        ],
        &["action", "create", "--config", &fetch],
        &["action", "create", "--config", &tidy],
        &["action", "available", "acme/fetch"],
        &["action", "available", "acme/tidy"],
    ] {
        let (doc, code) = server.client_json(client, args);
        assert_eq!(code, 0, "{args:?}: {doc:#}");
    }
    server
}

fn plans(server: &Server, client: &Env) -> Value {
    let (doc, code) = server.client_json(client, &["plan", "list"]);
    assert_eq!(code, 0, "{doc:#}");
    doc["data"]["plans"].clone()
}

/// `plan use ARGS` through the server is refused by the policy's `key`; the error.
fn refused(server: &Server, client: &Env, args: &[&str], key: &str) -> Value {
    let before = plans(server, client);
    let (doc, code) = server.client_json(client, args);
    assert_eq!(code, 4, "{args:?}: {doc:#}");
    assert_eq!(doc["error"]["code"], "POLICY_DENIED", "{doc:#}");
    assert_eq!(doc["data"]["key"], key, "{doc:#}");
    assert_eq!(doc["data"]["org"], "acme", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(key) && message.contains("acme"),
        "{message}"
    );
    assert_eq!(
        plans(server, client),
        before,
        "a refused plan use created nothing"
    );
    doc
}

#[test]
fn network_never_refuses_a_plan_whose_sandbox_asks_for_the_network_and_creates_nothing() {
    let client = Env::new();
    let server = acme_server(&client);
    refused(
        &server,
        &client,
        &["plan", "use", "acme/fetch", "acme/web"],
        "network",
    );
    assert_eq!(plans(&server, &client), Value::Array(Vec::new()));
}

#[test]
fn a_profile_outside_profiles_allowed_is_refused_listing_the_allowed_ones() {
    let client = Env::new();
    let server = acme_server(&client);
    let doc = refused(
        &server,
        &client,
        &[
            "plan",
            "use",
            "--automation-profile",
            "full-auto",
            "acme/tidy",
            "acme/web",
        ],
        "profiles.allowed",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("full-auto") && message.contains("supervised"),
        "{message}"
    );
    // Nor may the project be set to run under it.
    let (doc, code) = server.client_json(
        &client,
        &[
            "config",
            "set",
            "automation-profile",
            "full-auto",
            "--project",
            "acme/web",
        ],
    );
    assert_eq!(code, 4, "{doc:#}");
    assert_eq!(doc["data"]["key"], "profiles.allowed", "{doc:#}");
}

#[test]
fn the_budget_cap_refuses_a_larger_budget_and_becomes_the_budget_when_none_is_given_and_the_plan_keeps_the_skills_needing_approval()
 {
    let client = Env::new();
    let server = acme_server(&client);
    refused(
        &server,
        &client,
        &[
            "plan",
            "use",
            "--automation-profile",
            "supervised",
            "--max-cost-usd",
            "9",
            "acme/tidy",
            "acme/web",
        ],
        "budgets.max_cost_usd_per_plan",
    );
    let (doc, code) = server.client_json(
        &client,
        &[
            "plan",
            "use",
            "--automation-profile",
            "supervised",
            "acme/tidy",
            "acme/web",
        ],
    );
    // Made, and waiting at the gate a supervised plan stops at.
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NEEDS_APPROVAL", "{doc:#}");
    let id = crate::support::plan_id(&doc);
    let (status, code) = server.client_json(&client, &["plan", "status", &id]);
    assert_eq!(code, 0, "{status:#}");
    assert_eq!(status["data"]["budget"]["max_cost_usd"], 5.0, "{status:#}");
    // The skills each of whose calls needs an approval are frozen with the plan's profile,
    // where the tool runner reads them.
    let rows = crate::support::query_rows(
        &server.env,
        &format!("SELECT effective_profile_snapshot FROM plans WHERE plan_id = '{id}'"),
    );
    let snapshot: Value = serde_json::from_str(&rows[0][0]).unwrap();
    assert_eq!(
        snapshot["org_policy"],
        serde_json::json!({"orgs": ["acme"], "skills_require_approval": ["deploy"]}),
        "{snapshot:#}"
    );
}

#[test]
fn a_policy_is_shown_on_the_host_and_through_the_server_and_a_bad_one_is_refused_by_key() {
    let client = Env::new();
    let server = Server::start(Env::new());
    let host = host_engine(&server.env);
    host.add_user("ann", false).unwrap();
    host.add_org("acme", "ann").unwrap();
    let (doc, code) = server.client_json(&client, &["server", "policy", "show", "acme"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["data"]["policy"], Value::Null, "no policy yet: {doc:#}");
    let bad = write(&client, "bad.yaml", "apply:\n  min_aprovals: 2\n");
    let (doc, code) = server.client_json(
        &client,
        &["server", "policy", "set", "acme", "--config", &bad],
    );
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "INVALID_INPUT", "{doc:#}");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("bad.yaml") && message.contains("apply.min_aprovals"),
        "{message}"
    );
    let (doc, code) = server.client_json(&client, &["server", "policy", "show", "acme"]);
    assert_eq!(code, 0);
    assert_eq!(
        doc["data"]["policy"],
        Value::Null,
        "nothing was set: {doc:#}"
    );
    let good = write(&server.env, "policy.yaml", POLICY);
    let out = server
        .env
        .local_command(&[
            "--format", "json", "server", "policy", "set", "acme", "--config", &good,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let (remote, code) = server.client_json(&client, &["server", "policy", "show", "acme"]);
    assert_eq!(code, 0, "{remote:#}");
    assert_eq!(remote["data"]["policy"]["apply"]["min_approvals"], 2);
    assert_eq!(remote["data"]["text"], POLICY);
    let out = server
        .env
        .local_command(&["--format", "json", "server", "policy", "show", "acme"])
        .output()
        .unwrap();
    let here: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(here["data"], remote["data"]);
    let plain = server
        .env
        .local_command(&["--format", "plain", "server", "policy", "show", "acme"])
        .output()
        .unwrap();
    let plain = String::from_utf8(plain.stdout).unwrap();
    assert!(
        plain.contains("profiles.allowed") && plain.contains("supervised"),
        "{plain}"
    );
    let (doc, code) = server.client_json(&client, &["server", "policy", "show", "nobody"]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "NOT_FOUND", "{doc:#}");
}

#[test]
fn a_budget_approval_cannot_raise_a_plan_above_the_cap_but_may_raise_it_within() {
    use super::lifecycle::{Setup, scripted_env};
    use crate::support::provider_server::{ProviderServer, Turn};
    use crate::support::{ok, run_keyed};
    let server = ProviderServer::start(vec![
        // $1.00 of input: over the plan's $0.01 once it is reported.
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "DRAFT.md", "content": "draft\n"}"#,
            )],
            (1_000_000, 10),
        ),
        Turn::text("Wrote DRAFT.md.", (100, 5)),
    ]);
    let env = Env::new();
    let repo = git_repo(env.root(), "repo");
    let s = Setup { env, repo };
    scripted_env(&s, &server, "openai");
    let mut config = std::fs::read_to_string(&s.env.config_path).unwrap();
    config.push_str(
        "[providers.scripted.models.m]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 1.0\n",
    );
    std::fs::write(&s.env.config_path, config).unwrap();
    ok(&s.env, &["info"]);
    let host = host_engine(&s.env);
    host.add_user("ann", false).unwrap();
    host.add_org("acme", "ann").unwrap();
    let policy = write(
        &s.env,
        "policy.yaml",
        "budgets:\n  max_cost_usd_per_plan: 2\n",
    );
    ok(
        &s.env,
        &["server", "policy", "set", "acme", "--config", &policy],
    );
    let action = write(
        &s.env,
        "notes.yaml",
        "name: acme/notes\ndefinition-of-done: DRAFT.md exists\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n",
    );
    for args in [
        &[
            "resource",
            "add",
            "git-checkout",
            "acme/repo",
            "--path",
            s.repo.to_str().unwrap(),
        ][..],
        &["project", "create", "--resource", "acme/repo", "acme/app"],
        &["action", "create", "--config", &action],
        &["action", "available", "acme/notes"],
    ] {
        ok(&s.env, args);
    }
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "--max-cost-usd",
            "0.01",
            "acme/notes",
            "acme/app",
        ],
    );
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (approvals, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
    let budget = approvals["data"]["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "budget" && a["status"] == "pending")
        .unwrap_or_else(|| panic!("{approvals:#}"))
        .clone();
    let apr = budget["approval_id"].as_str().unwrap().to_string();
    let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--max-cost-usd", "100"]);
    assert_eq!(code, 4, "{doc:#}");
    assert_eq!(
        doc["data"]["key"], "budgets.max_cost_usd_per_plan",
        "{doc:#}"
    );
    let (approvals, _) = run_keyed(&s.env, &["plan", "approvals", &id]);
    assert!(
        approvals["data"]["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["approval_id"] == apr && a["status"] == "pending"),
        "the refused answer left the approval pending: {approvals:#}"
    );
    let (doc, code) = run_keyed(&s.env, &["plan", "decide", &apr, "--max-cost-usd", "1.5"]);
    assert!(code == 0 || code == 3, "{doc:#}");
    assert_eq!(server.remaining(), 0, "the plan went on: {doc:#}");
}
