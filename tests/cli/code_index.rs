//! The code index and the context each phase sees (spec sections 24, 25, 10): built on
//! `resource add`, kept current, removed with the resource; the strategist reads the
//! project at the plan's base through read-only tools and gets an initial context within
//! `hot-max-tokens`; `project context set|show` round-trips every flag.

use serde_json::{Value, json};

use super::lifecycle::scripted_env;
use crate::support::provider_server::{ProviderServer, Turn};
use crate::support::{Env, git, git_repo, ok, run_keyed};

const AUTH: &str = "/// Checks a session token.\npub fn verify_token(token: &str) -> bool {\n    !token.is_empty()\n}\n";

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
    let paths = cleveragents_engine::Paths::at(&env.data_dir, &env.config_path);
    let store = cleveragents_engine::Store::open(&paths.database()).unwrap();
    let r = cleveragents_engine::registry::resources::find(&store, "local/repo").unwrap();
    let view = cleveragents_engine::index::open(&paths, &r, None).unwrap();
    let q = cleveragents_engine::index::view::SearchQuery {
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
    let events = ix["events"].as_array().expect("progress events");
    assert_eq!(events.last().unwrap()["done"], 4, "{events:?}");
    assert_eq!(events.last().unwrap()["total"], 4);
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
    assert!(index_dir.join("manifest.json.lz4").exists());
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
        prompt.contains("local/repo:src/auth.rs (score")
            && prompt.contains("function verify_token (lines 2-4)"),
        "one entry per file, its definitions under it: {prompt}"
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

    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
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
    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
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
    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
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
fn a_file_larger_than_max_file_size_is_left_out_of_the_step_context_and_counted() {
    let server = ProviderServer::start(vec![Turn::text("Nothing to read.", (10, 5))]);
    let env = Env::new();
    let repo = project(&env);
    ok(
        &env,
        &[
            "project",
            "context",
            "set",
            "--view",
            "execute",
            "--max-file-size",
            "20",
            "app",
        ],
    );
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
    let id: cleveragents_engine::domain::Id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .parse()
        .unwrap();
    let prompt = server.requests()[0].body["messages"].to_string();
    assert!(
        !prompt.contains("pub fn verify_token(token: &str)"),
        "src/auth.rs is larger than 20 bytes: {prompt}"
    );
    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&s.env)).unwrap();
    let output: Value =
        serde_json::from_str(st.plan_steps(&id).unwrap()[0].output.as_deref().unwrap()).unwrap();
    let hot = &output["hot_context"];
    assert!(hot["too_large_files"].as_u64().unwrap() >= 1, "{hot:#}");
    assert!(
        !hot["references"].to_string().contains("src/auth.rs"),
        "{hot:#}"
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
    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&env)).unwrap();
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

#[test]
fn the_index_policy_comes_from_the_index_table_of_the_config_file() {
    let env = Env::new();
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        "[index]\nmax-file-size = 80\nexclude = [\"docs/**\"]\n",
    )
    .unwrap();
    let (_repo, doc) = registered(&env);
    let ix = &doc["data"]["indexing"];
    assert_eq!(ix["skipped"]["generated"], 1, "docs/guide.md: {ix:#}");
    assert!(
        ix["skipped"]["too_large"].as_u64().unwrap() >= 1,
        "src/auth.rs is over 80 bytes: {ix:#}"
    );
    assert_eq!(
        ix["indexed_files"].as_u64().unwrap() + ix["skipped"]["total"].as_u64().unwrap(),
        4
    );
    assert!(!search(&env, "verify token").contains(&"src/auth.rs".to_string()));

    // A glob that does not parse is named with its key.
    std::fs::write(&env.config_path, "[index]\nexclude = [\"a/{b\"]\n").unwrap();
    let (doc, code) = env.json(&["resource", "reindex", "local/repo"]);
    assert_ne!(code, 0);
    assert!(doc.to_string().contains("index.exclude"), "{doc:#}");

    // Switched off: reindex refuses and says why; the status is `disabled`.
    std::fs::write(&env.config_path, "[index]\nenabled = false\n").unwrap();
    let (doc, code) = env.json(&["resource", "reindex", "local/repo"]);
    assert_ne!(code, 0);
    assert!(doc.to_string().contains("disabled"), "{doc:#}");
    let show = ok(&env, &["resource", "show", "local/repo"]);
    assert_eq!(
        show["data"]["indexing"]["text_index"], "disabled",
        "{show:#}"
    );
}

/// A config whose `[index] embeddings` names the local server's `/v1/embeddings`.
fn embeddings_config(env: &Env, server: &ProviderServer) {
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\n\n[index]\nembeddings = \"scripted/test-embed\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
}

/// Calls a `code_intelligence` tool over `local/repo` as the tools see it (index brought up
/// to date, the configured embeddings setting).
fn call_tool(env: &Env, name: &str, args: Value) -> Value {
    use cleveragents_engine::index::{self, embed, skill};
    let paths = cleveragents_engine::Paths::at(&env.data_dir, &env.config_path);
    let store = cleveragents_engine::Store::open(&paths.database()).unwrap();
    let r = cleveragents_engine::registry::resources::find(&store, "local/repo").unwrap();
    let scopes = [skill::Scope {
        resource: r.name.clone(),
        alias: None,
        view: index::open(&paths, &r, None).unwrap(),
        semantic: embed::setting(&paths),
    }];
    skill::call(&scopes, name, args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn inputs_of(r: &crate::support::provider_server::Recorded) -> Vec<String> {
    r.body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn symbols_are_embedded_in_batches_ranked_by_cosine_and_only_changed_files_are_embedded_again() {
    let env = Env::new();
    let server = ProviderServer::start(vec![]);
    embeddings_config(&env, &server);
    let repo = git_repo(env.root(), "repo");
    std::fs::write(repo.join("src/auth.rs"), AUTH).unwrap();
    let many: String = (0..70)
        .map(|i| format!("pub fn helper_{i}() -> u32 {{ {i} }}\n"))
        .collect();
    std::fs::write(repo.join("src/many.rs"), many).unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "code"]);
    let doc = ok(
        &env,
        &[
            "resource",
            "add",
            "git-checkout",
            "local/repo",
            "--path",
            repo.to_str().unwrap(),
        ],
    );
    let ix = &doc["data"]["indexing"];
    assert_eq!(ix["vector_index"], "ready", "{doc:#}");
    assert_eq!(ix["embeddings"]["model"], "scripted/test-embed");
    // README, docs/guide.md, src/lib.rs (1 definition), src/auth.rs (1), src/many.rs (70).
    assert_eq!(ix["embeddings"]["chunks"], 74, "{ix:#}");
    let sent = server.embedding_requests();
    assert!(sent.len() >= 2, "74 chunks need more than one request");
    assert!(
        sent.iter().all(|r| inputs_of(r).len() <= 64),
        "batches of 64 at most"
    );
    assert_eq!(sent.iter().map(|r| inputs_of(r).len()).sum::<usize>(), 74);
    assert!(sent.iter().all(|r| r.body["model"] == "test-embed"));

    let found = call_tool(
        &env,
        "search_code_semantically",
        json!({"query": "does the session token check out", "limit": 3}),
    );
    assert_eq!(found["mode"], "semantic", "{found:#}");
    assert_eq!(found["model"], "scripted/test-embed");
    assert_eq!(found["hits"][0]["path"], "src/auth.rs", "{found:#}");
    assert_eq!(found["hits"][0]["symbol"], "verify_token");
    assert!(
        found["hits"][0]["snippet"]
            .as_str()
            .unwrap()
            .contains("verify_token")
    );
    let s0 = found["hits"][0]["score"].as_f64().unwrap();
    let s1 = found["hits"][1]["score"].as_f64().unwrap();
    assert!(s0 > s1, "{found:#}");

    // One file edited: only its chunks are embedded again (plus the query).
    let before = server.embedding_requests().len();
    std::fs::write(
        repo.join("src/auth.rs"),
        format!("{AUTH}\n/// Compares a password hash.\npub fn compare_password_hash() {{}}\n"),
    )
    .unwrap();
    let found = call_tool(
        &env,
        "search_code_semantically",
        json!({"query": "compare password hash"}),
    );
    assert_eq!(
        found["hits"][0]["symbol"], "compare_password_hash",
        "{found:#}"
    );
    let again: Vec<Vec<String>> = server.embedding_requests()[before..]
        .iter()
        .map(inputs_of)
        .collect();
    let chunks: Vec<&String> = again
        .iter()
        .filter(|i| i.as_slice() != ["compare password hash"])
        .flatten()
        .collect();
    assert_eq!(
        chunks.len(),
        2,
        "the two definitions of src/auth.rs: {again:?}"
    );
    assert!(
        chunks.iter().all(|c| c.starts_with("src/auth.rs\n")),
        "{again:?}"
    );
}

#[test]
fn semantic_search_without_embeddings_falls_back_to_text_and_an_anthropic_provider_is_a_config_error()
 {
    let env = Env::new();
    let _ = registered(&env);
    let found = call_tool(
        &env,
        "search_code_semantically",
        json!({"query": "verify token"}),
    );
    assert_eq!(found["mode"], "text_fallback", "{found:#}");
    assert!(
        found["note"]
            .as_str()
            .unwrap()
            .contains("[index] embeddings")
    );
    assert_eq!(found["files"][0]["path"], "src/auth.rs");

    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        "[index]\nembeddings = \"anthropic/claude-sonnet-4\"\n",
    )
    .unwrap();
    let (doc, code) = env.json(&["resource", "reindex", "local/repo"]);
    assert_ne!(code, 0, "{doc:#}");
    let text = doc.to_string();
    assert!(text.contains("[index] embeddings"), "{doc:#}");
    assert!(text.contains("Anthropic"), "{doc:#}");
}

#[test]
fn code_intelligence_tools_in_a_plan_read_with_the_configured_index_policy() {
    let env = Env::new();
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    // The config file lives outside the data directory, as `--config-path` allows.
    std::fs::write(&env.config_path, "[index]\nmax-file-size = 80\n").unwrap();
    let dir = env.root().join("site");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("small.rs"), "pub fn tiny() {}\n").unwrap();
    std::fs::write(dir.join("big.rs"), AUTH).unwrap();
    let doc = ok(
        &env,
        &[
            "resource",
            "add",
            "fs-directory",
            "local/site",
            "--path",
            dir.to_str().unwrap(),
        ],
    );
    assert_eq!(
        doc["data"]["indexing"]["skipped"]["too_large"], 1,
        "{doc:#}"
    );
    ok(
        &env,
        &["project", "create", "--resource", "local/site", "app"],
    );
    let file = env.root().join("find.yaml");
    std::fs::write(
        &file,
        "name: local/find\ndefinition-of-done: the definitions are looked up\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: big\n    tool: find_definition\n    args: {name: verify_token}\n  - name: small\n    tool: find_definition\n    args: {name: tiny}\n",
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
    let st = cleveragents_engine::store::Store::open(&crate::support::db_file(&env)).unwrap();
    let calls = st.tool_calls(&id.parse().unwrap()).unwrap();
    let summary = |n: usize| calls[n].result_summary.clone().unwrap_or_default();
    assert_eq!(calls.len(), 2, "{calls:#?}");
    // The default policy (1 MiB) would index big.rs on the tool's update; 80 bytes keeps it out.
    assert!(!summary(0).contains("big.rs"), "{calls:#?}");
    assert!(summary(1).contains("small.rs"), "{calls:#?}");
}
