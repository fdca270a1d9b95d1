//! The code index and the context each phase sees (spec sections 24, 25, 10): built on
//! `resource add`, kept current, removed with the resource; the strategist reads the
//! project at the plan's base through read-only tools and gets an initial context within
//! `hot-max-tokens`; `project context set|show` round-trips every flag.

use serde_json::{Value, json};

use super::lifecycle::{run_keyed, scripted_env};
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, git, git_repo};

const AUTH: &str = "/// Checks a session token.\npub fn verify_token(token: &str) -> bool {\n    !token.is_empty()\n}\n";

fn ok(env: &Env, args: &[&str]) -> Value {
    let (doc, code) = env.json(args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

/// A git checkout `local/repo` with `src/auth.rs`, registered.
fn registered(env: &Env) -> (std::path::PathBuf, Value) {
    let repo = git_repo(env.root(), "repo");
    std::fs::write(repo.join("src/auth.rs"), AUTH).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "auth"]);
    let doc = ok(
        env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    (repo, doc)
}

fn search(env: &Env, query: &str) -> Vec<String> {
    let paths = cleveragents::engine::Paths::at(&env.data_dir, &env.config_path);
    let store = cleveragents::engine::Store::open(&paths.database()).unwrap();
    let r = cleveragents::engine::registry::resources::find(&store, "local/repo").unwrap();
    let view = cleveragents::engine::index::open(&paths, &r, None).unwrap();
    let q = cleveragents::engine::index::view::SearchQuery {
        query: query.into(),
        limit: 10,
        ..Default::default()
    };
    let mut out: Vec<String> = Vec::new();
    for h in view.search(&q).unwrap() {
        if !out.contains(&h.path) {
            out.push(h.path);
        }
    }
    out
}

#[test]
fn the_index_is_built_on_resource_add_kept_current_after_a_commit_and_an_edit_and_removed_with_the_resource()
 {
    let env = Env::new();
    let (repo, doc) = registered(&env);
    let ix = &doc["data"]["indexing"];
    assert_eq!(ix["text_index"], "ready", "{doc:#}");
    assert_eq!(
        ix["indexed_files"], 4,
        "README, src/lib.rs, docs/guide.md, src/auth.rs: {ix:#}"
    );
    assert_eq!(ix["symbols"], 2);
    assert!(search(&env, "verify token").contains(&"src/auth.rs".to_string()));

    // A commit and an uncommitted edit: the status says stale, the next read updates it.
    std::fs::write(repo.join("src/session.rs"), "pub fn open_session() {}\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "session"]);
    std::fs::write(repo.join("src/lib.rs"), "pub fn renamed_entry() {}\n").unwrap();
    let show = ok(&env, &["resource", "show", "local/repo"]);
    assert_eq!(show["data"]["indexing"]["text_index"], "stale", "{show:#}");
    assert_eq!(show["data"]["indexing"]["pending_files"], 2);
    assert_eq!(search(&env, "open_session")[0], "src/session.rs");
    assert_eq!(search(&env, "renamed_entry"), ["src/lib.rs"]);
    let show = ok(&env, &["resource", "show", "local/repo"]);
    assert_eq!(show["data"]["indexing"]["text_index"], "ready");
    assert_eq!(show["data"]["indexing"]["indexed_files"], 5);

    let info = ok(&env, &["info"]);
    assert_eq!(info["data"]["indexing"]["indexed_files"], 5, "{info:#}");
    let diag = env.json(&["diagnostics"]).0;
    let check = diag["data"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "Text index")
        .cloned()
        .unwrap();
    assert!(
        check["details"]
            .as_str()
            .unwrap()
            .contains("1 resource(s), 5 files"),
        "{check:#}"
    );

    let re = ok(&env, &["resource", "reindex", "local/repo"]);
    assert_eq!(re["data"]["indexing"]["indexed_files"], 5);

    let index_dir = env.data_dir.join("indexes").join("local+repo");
    assert!(index_dir.join("manifest.json").exists());
    let rm = ok(&env, &["resource", "remove", "--yes", "local/repo"]);
    assert_eq!(
        rm["data"]["index_cleanup"]["text_index_removed"], 5,
        "{rm:#}"
    );
    assert!(!index_dir.exists());
}

const ACTION: &str = "name: local/harden\ndescription: Harden verify_token against blank tokens\ndefinition-of-done: verify_token rejects blank tokens\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n";

/// The repo registered, project `app` over it, the action above.
fn project(env: &Env) -> std::path::PathBuf {
    let (repo, _) = registered(env);
    ok(
        env,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    let file = env.root().join("action.yaml");
    std::fs::write(&file, ACTION).unwrap();
    ok(
        env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    repo
}

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            t["function"]["name"]
                .as_str()
                .or(t["name"].as_str())
                .unwrap()
                .to_string()
        })
        .collect()
}

#[test]
fn a_model_strategist_reads_the_project_at_the_plan_base_through_read_only_tools_and_code_intelligence()
 {
    let decision = r#"{"key":"d1","decision_type":"implementation_choice","question":"How?","chosen_option":"trim then check","confidence_score":0.9,"rationale":"simple","step":{"instructions":"edit src/auth.rs"}}"#;
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[
                ("search_code", r#"{"query":"verify_token"}"#),
                ("read_file", r#"{"path":"src/auth.rs"}"#),
                ("find_definition", r#"{"name":"verify_token"}"#),
                ("write_file", r#"{"path":"NOTES.md","content":"x"}"#),
            ],
            (10, 5),
        ),
        Turn::tools("", &[("record_decision", decision)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary":"one step"}"#)],
            (10, 5),
        ),
    ]);
    let env = Env::new();
    let repo = project(&env);
    let s = super::lifecycle::Setup {
        env,
        repo: repo.clone(),
    };
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "local/harden",
            "app",
        ],
    );
    assert_eq!(code, 3, "the plan waits at its strategize gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();

    // The user moves on after plan use: the function is renamed and committed, and the work
    // tree has an uncommitted file too. The strategy still reads the base.
    std::fs::write(
        repo.join("src/auth.rs"),
        "pub fn check_token(t: &str) -> bool { true }\n",
    )
    .unwrap();
    git(&repo, &["commit", "-q", "-am", "rename"]);
    std::fs::write(repo.join("src/wip.rs"), "pub fn verify_token_later() {}\n").unwrap();

    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert!(code == 0 || code == 3, "{doc:#}");
    let requests = server.requests();
    let first = &requests[0].body;
    let names = tool_names(first);
    for t in [
        "record_decision",
        "finish_strategy",
        "read_file",
        "list_files",
        "search_code",
        "find_definition",
        "find_references",
        "analyze_dependencies",
        "suggest_refactoring_targets",
        "repo_overview",
        "search_code_semantically",
    ] {
        assert!(names.contains(&t.to_string()), "{t} offered: {names:?}");
    }
    for t in ["write_file", "edit_file", "shell_execute", "delete_file"] {
        assert!(
            !names.contains(&t.to_string()),
            "{t} is not offered: {names:?}"
        );
    }
    let prompt = first["messages"].to_string();
    assert!(prompt.contains("## Project overview"), "{prompt}");
    assert!(
        prompt.contains("at commit") && prompt.contains(": 4 files"),
        "the overview is of the base: {prompt}"
    );
    assert!(prompt.contains("## Code that matches the task"), "{prompt}");
    assert!(
        prompt.contains("src/auth.rs lines 2-4 (function verify_token)"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("check_token") && !prompt.contains("wip.rs"),
        "the base, not the work tree: {prompt}"
    );

    // The tools' results, as the model got them in the second request.
    let second = requests[1].body["messages"].to_string();
    assert!(second.contains(r#"\"path\":\"src/auth.rs\""#), "{second}");
    assert!(
        second.contains("pub fn verify_token(token: &str) -> bool"),
        "read_file reads the base: {second}"
    );
    assert!(
        !second.contains("check_token") && !second.contains("verify_token_later"),
        "{second}"
    );
    assert!(
        second.contains("unknown tool `write_file`"),
        "write_file refused: {second}"
    );

    let st = cleveragents::engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let ds = st.decisions(&id.parse().unwrap()).unwrap();
    let strategist = &ds[0].context_snapshot["strategist"];
    assert_eq!(strategist["refused_tool_calls"][0]["tool"], "write_file");
    let read: Vec<&str> = strategist["read"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    assert_eq!(read, ["search_code", "read_file", "find_definition"]);
    let hot = &strategist["hot_context"];
    assert!(
        hot["references"]
            .as_array()
            .unwrap()
            .contains(&json!("local/repo:src/auth.rs:2")),
        "{hot:#}"
    );
    let step = ds.iter().find(|d| d.step.is_some()).unwrap();
    assert_eq!(step.context_snapshot["hot_context"]["hash"], hot["hash"]);
}

#[test]
fn the_strategist_hot_context_never_exceeds_hot_max_tokens() {
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[(
                "record_decision",
                r#"{"key":"d1","decision_type":"implementation_choice","question":"How?","chosen_option":"x","rationale":"r","step":{"instructions":"x"}}"#,
            )],
            (10, 5),
        ),
        Turn::tools("", &[("finish_strategy", r#"{"summary":"s"}"#)], (10, 5)),
    ]);
    let env = Env::new();
    let repo = project(&env);
    for i in 0..30 {
        std::fs::write(
            repo.join(format!("src/token_{i}.rs")),
            format!("pub fn verify_token_{i}() {{ verify_token(\"{i}\"); }}\n"),
        )
        .unwrap();
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "many"]);
    ok(
        &env,
        &[
            "project",
            "context",
            "set",
            "--view",
            "strategize",
            "--hot-max-tokens",
            "120",
            "app",
        ],
    );
    let s = super::lifecycle::Setup { env, repo };
    scripted_env(&s, &server, "openai");
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            "scripted/m",
            "local/harden",
            "app",
        ],
    );
    assert_eq!(code, 3, "the plan waits at its strategize gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let (doc, code) = run_keyed(&s.env, &["plan", "execute", &id]);
    assert!(code == 0 || code == 3, "{doc:#}");
    let st = cleveragents::engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let ds = st.decisions(&id.parse().unwrap()).unwrap();
    let hot = &ds[0].context_snapshot["strategist"]["hot_context"];
    assert_eq!(hot["budget"], 120);
    let tokens = hot["tokens"].as_u64().unwrap();
    assert!(tokens <= 120 && tokens > 40, "{hot:#}");
    assert!(
        hot["dropped"].as_u64().unwrap() > 0,
        "the budget cut something: {hot:#}"
    );
    let text = hot["text"].as_str().unwrap();
    assert_eq!(tokens, (text.chars().count() as u64).div_ceil(4));
    let prompt = server.requests()[0].body["messages"].to_string();
    assert!(prompt.contains("## Project overview"));
}

#[test]
fn project_context_set_and_show_round_trip_every_flag_and_views_differ_per_phase() {
    let env = Env::new();
    project(&env);
    let set = ok(
        &env,
        &[
            "project",
            "context",
            "set",
            "--view",
            "execute",
            "--include-resource",
            "local/repo",
            "--exclude-resource",
            "local/other",
            "--include-path",
            "src/**",
            "--exclude-path",
            "**/*.lock",
            "--hot-max-tokens",
            "3000",
            "--warm-max-decisions",
            "7",
            "--cold-max-decisions",
            "9",
            "--query-limit",
            "4",
            "--max-file-size",
            "2048",
            "--max-total-size",
            "4096",
            "--summarize",
            "--summary-max-tokens",
            "77",
            "app",
        ],
    );
    assert_eq!(set["data"]["view"], "execute");
    let show = ok(
        &env,
        &["project", "context", "show", "--view", "execute", "app"],
    );
    assert_eq!(
        show["data"]["policy"],
        json!({
            "include_resources": ["local/repo"], "exclude_resources": ["local/other"],
            "include_paths": ["src/**"], "exclude_paths": ["**/*.lock"],
            "hot_max_tokens": 3000, "warm_max_decisions": 7, "cold_max_decisions": 9, "query_limit": 4,
            "max_file_size": 2048, "max_total_size": 4096, "summarize": true, "summary_max_tokens": 77,
        }),
        "{show:#}"
    );
    assert_eq!(show["data"]["context"]["max_file_size_bytes"], 2048);
    // Other views keep the built-in values; a default view fills what a phase leaves unset.
    ok(
        &env,
        &[
            "project",
            "context",
            "set",
            "--hot-max-tokens",
            "500",
            "--no-summarize",
            "app",
        ],
    );
    let strat = ok(
        &env,
        &["project", "context", "show", "--view", "strategize", "app"],
    );
    assert_eq!(strat["data"]["resolved"]["hot_max_tokens"], 500);
    assert_eq!(strat["data"]["resolved"]["query_limit"], 20);
    let exec = ok(
        &env,
        &["project", "context", "show", "--view", "execute", "app"],
    );
    assert_eq!(exec["data"]["resolved"]["hot_max_tokens"], 3000);
    assert_eq!(exec["data"]["resolved"]["summarize"], true);
    let cleared = ok(
        &env,
        &[
            "project", "context", "set", "--view", "execute", "--clear", "app",
        ],
    );
    assert_eq!(cleared["data"]["resolved"]["hot_max_tokens"], 500);
    let (doc, code) = env.json(&[
        "project",
        "context",
        "set",
        "--clear",
        "--query-limit",
        "3",
        "app",
    ]);
    assert_eq!(
        (code, doc["error"]["code"].as_str()),
        (1, Some("INVALID_INPUT"))
    );
}

#[test]
fn an_execution_step_gets_the_definitions_its_decision_names_and_can_call_code_intelligence() {
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[
                ("search_code", r#"{"query":"blank token"}"#),
                ("find_references", r#"{"name":"verify_token"}"#),
            ],
            (10, 5),
        ),
        Turn::text("Looked it up.", (10, 5)),
    ]);
    let env = Env::new();
    let repo = project(&env);
    let s = super::lifecycle::Setup { env, repo };
    scripted_env(&s, &server, "openai");
    let (doc, _) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--execution-actor",
            "scripted/m",
            "--automation-profile",
            "trusted",
            "local/harden",
            "app",
        ],
    );
    let id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .to_string();
    let first = &server.requests()[0].body;
    let prompt = first["messages"].to_string();
    assert!(prompt.contains("## Named in this step"), "{prompt}");
    assert!(
        prompt.contains("function verify_token in local/repo:src/auth.rs"),
        "{prompt}"
    );
    assert!(tool_names(first).contains(&"search_code".to_string()));
    let st = cleveragents::engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let calls = st.tool_calls(&id.parse().unwrap()).unwrap();
    let seen: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| (c.tool.as_str(), c.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [("search_code", "ok"), ("find_references", "ok")],
        "{calls:#?}"
    );
}

#[test]
fn a_tool_step_calls_code_intelligence_offline() {
    let env = Env::new();
    let (_repo, _) = registered(&env);
    ok(
        &env,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    let file = env.root().join("find.yaml");
    std::fs::write(
        &file,
        "name: local/find\ndefinition-of-done: the definition is found\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: find\n    tool: find_definition\n    args: {name: verify_token}\n",
    )
    .unwrap();
    ok(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            file.to_str().unwrap(),
        ],
    );
    let (doc, _) = env.json(&[
        "plan",
        "use",
        "--automation-profile",
        "trusted",
        "local/find",
        "app",
    ]);
    let id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .to_string();
    let st = cleveragents::engine::store::Store::open(&crate::support::db_file(&env)).unwrap();
    let calls = st.tool_calls(&id.parse().unwrap()).unwrap();
    assert_eq!(
        (calls[0].tool.as_str(), calls[0].outcome.as_str()),
        ("find_definition", "ok"),
        "{calls:#?}"
    );
    assert!(
        calls[0]
            .result_summary
            .as_deref()
            .unwrap_or_default()
            .contains("src/auth.rs"),
        "{calls:#?}"
    );
}
