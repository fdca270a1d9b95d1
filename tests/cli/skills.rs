//! `agents skill` and `agents tool list|show`: the built-in skills and tools as users and
//! scripts see them, actors naming skills, and the parts that say "not yet supported".

use serde_json::{Value, json};

use crate::cli::snapshots::{output_text, settings};
use crate::support::{Env, ok};

fn fails(env: &Env, args: &[&str], code: &str) -> Value {
    let (doc, exit) = env.json(args);
    assert_eq!(exit, 1, "{args:?}: {doc:#}");
    assert_eq!(doc["error"]["code"], code, "{args:?}: {doc:#}");
    doc
}

fn names(list: &Value) -> Vec<&str> {
    list.as_array()
        .expect("a list")
        .iter()
        .map(|v| v["name"].as_str().expect("a name"))
        .collect()
}

#[test]
fn skill_list_shows_the_six_builtin_skills_with_counts_and_sources() {
    let env = Env::new();
    let doc = ok(&env, &["skill", "list"]);
    assert_eq!(doc["command"], "skill list");
    let skills = &doc["data"]["skills"];
    assert_eq!(
        names(skills),
        [
            "file_operations",
            "directory_operations",
            "search_operations",
            "git_operations",
            "shell",
            "code_intelligence"
        ]
    );
    let git = &skills[3];
    assert_eq!(git["tool_count"], 3);
    assert_eq!(git["tools"], json!(["git_status", "git_diff", "git_log"]));
    assert_eq!(git["sources"], json!(["builtin"]));
    assert_eq!(git["source"], "builtin");
    assert_eq!(git["includes"], json!([]));

    // Built-in skills are bare; `-n builtin` selects them and no other namespace has any.
    assert_eq!(
        ok(&env, &["skill", "list", "-n", "builtin"])["data"]["skills"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
    assert_eq!(
        ok(&env, &["skill", "list", "--namespace", "local"])["data"]["skills"],
        json!([])
    );
    assert_eq!(
        ok(&env, &["skill", "list", "--source", "mcp"])["data"]["skills"],
        json!([])
    );
    assert_eq!(
        names(&ok(&env, &["skill", "list", "--source", "builtin"])["data"]["skills"]).len(),
        6
    );
    let bad = fails(
        &env,
        &["skill", "list", "--source", "github"],
        "INVALID_INPUT",
    );
    let message = bad["error"]["message"].as_str().unwrap();
    assert!(message.contains("--source `github`"), "{message}");
    assert!(message.contains("agent_skill"), "{message}");
}

#[test]
fn skill_show_lists_direct_tools_with_capability_and_the_actors_that_use_it() {
    let env = Env::new();
    let doc = ok(&env, &["skill", "show", "file_operations"]);
    let skill = &doc["data"]["skill"];
    assert_eq!(skill["name"], "file_operations");
    let tools = skill["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 7);
    let read = &tools[0];
    assert_eq!(read["name"], "read_file");
    assert_eq!(read["source"], "builtin");
    assert_eq!(read["capability"]["read_only"], true);
    assert_eq!(read["capability"]["writes"], false);
    let write = &tools[1];
    assert_eq!(write["name"], "write_file");
    assert_eq!(write["capability"]["writes"], true);
    assert_eq!(write["capability"]["checkpointable"], true);
    assert_eq!(write["capability"]["checkpoint_scope"], "file");
    assert_eq!(write["capability"]["unsafe"], false);
    assert_eq!(doc["data"]["referenced_by"]["actors"], json!([]));

    let file = env.root().join("reviewer.yaml");
    std::fs::write(
        &file,
        "name: reviewer\nmodel: openai/gpt-4o\nskills: [file_operations, git_operations]\n",
    )
    .unwrap();
    ok(&env, &["actor", "add", "--config", file.to_str().unwrap()]);
    let doc = ok(&env, &["skill", "show", "file_operations"]);
    assert_eq!(
        doc["data"]["referenced_by"]["actors"],
        json!(["local/reviewer"])
    );
    assert_eq!(
        ok(&env, &["skill", "show", "shell"])["data"]["referenced_by"]["actors"],
        json!([])
    );
}

#[test]
fn skill_tools_lists_the_flattened_set_with_where_each_tool_comes_from() {
    let env = Env::new();
    let doc = ok(&env, &["skill", "tools", "search_operations"]);
    assert_eq!(doc["data"]["skill"], "search_operations");
    let tools = &doc["data"]["tools"];
    assert_eq!(names(tools), ["search_files", "list_files"]);
    assert_eq!(tools[0]["from_skill"], Value::Null);
    assert_eq!(tools[0]["capability"]["read_only"], true);
    let shell = ok(&env, &["skill", "tools", "shell"]);
    let cap = &shell["data"]["tools"][0]["capability"];
    assert_eq!(cap["writes"], true);
    assert_eq!(cap["checkpoint_scope"], "snapshot");
    assert!(cap["unsafe"].is_boolean());
}

#[test]
fn an_unknown_skill_is_not_found_with_the_nearest_builtin_suggested() {
    let env = Env::new();
    for sub in ["show", "tools"] {
        let doc = fails(&env, &["skill", sub, "git-operations"], "NOT_FOUND");
        let message = doc["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("did you mean `git_operations`?"),
            "{message}"
        );
        assert!(
            doc["error"]["suggestions"]
                .as_array()
                .unwrap()
                .iter()
                .any(|s| s.as_str().unwrap().ends_with("skill show git_operations")),
            "{doc:#}"
        );
    }
    let doc = fails(&env, &["skill", "show", "local/file-ops"], "NOT_FOUND");
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no custom skill of that name is registered"),
        "{message}"
    );
}

#[test]
fn skill_add_refuses_bad_input_and_remove_refuses_builtins_changing_nothing() {
    let env = Env::new();
    let file = env.root().join("ops.yaml");
    std::fs::write(&file, "skill:\n  name: local/ops\n").unwrap();
    let doc = fails(
        &env,
        &[
            "skill",
            "add",
            "--config",
            file.to_str().unwrap(),
            "--mcp-server",
            "npx x",
            "local/ops",
        ],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("--mcp-server"),
        "{doc:#}"
    );
    fails(
        &env,
        &["skill", "remove", "--yes", "local/ops"],
        "NOT_FOUND",
    );
    let doc = fails(&env, &["skill", "remove", "--yes", "shell"], "CONFLICT");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("built-in skill"),
        "{doc:#}"
    );
    assert_eq!(
        ok(&env, &["skill", "list"])["data"]["skills"]
            .as_array()
            .unwrap()
            .len(),
        6
    );
}

#[test]
fn every_tool_in_tool_list_belongs_to_a_skill_in_skill_list() {
    let env = Env::new();
    let tools = ok(&env, &["tool", "list"]);
    let listed = names(&tools["data"]["tools"]);
    assert_eq!(listed.len(), 23);
    let skills = ok(&env, &["skill", "list"]);
    let in_skills: Vec<&str> = skills["data"]["skills"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["tools"].as_array().unwrap().iter())
        .map(|t| t.as_str().unwrap())
        .collect();
    for t in &listed {
        assert!(in_skills.contains(t), "{t} is in no skill");
    }
    for t in tools["data"]["tools"].as_array().unwrap() {
        assert!(!t["skills"].as_array().unwrap().is_empty(), "{t:#}");
    }
}

#[test]
fn tool_list_filters_by_regex_and_tool_show_gives_capability_and_schema() {
    let env = Env::new();
    let git = ok(&env, &["tool", "list", "^git_"]);
    assert_eq!(
        names(&git["data"]["tools"]),
        ["git_status", "git_diff", "git_log"]
    );
    assert_eq!(git["data"]["tools"][0]["group"], "git_operations");
    fails(&env, &["tool", "list", "("], "INVALID_INPUT");

    let doc = ok(&env, &["tool", "show", "edit_file"]);
    let tool = &doc["data"]["tool"];
    assert_eq!(tool["name"], "edit_file");
    assert_eq!(tool["source"], "builtin");
    assert_eq!(tool["skills"], json!(["file_operations"]));
    assert_eq!(tool["capability"]["idempotent"], false);
    let schema = &tool["input_schema"];
    assert_eq!(schema["type"], "object");
    let required = schema["required"].as_array().unwrap();
    assert!(required.contains(&json!("path")) && required.contains(&json!("edits")));

    let list_files = ok(&env, &["tool", "show", "list_files"]);
    assert_eq!(
        list_files["data"]["tool"]["skills"],
        json!(["directory_operations", "search_operations"])
    );

    let doc = fails(&env, &["tool", "show", "read_fil"], "NOT_FOUND");
    assert!(
        doc["error"]["suggestions"][0]
            .as_str()
            .unwrap()
            .ends_with("tool show read_file"),
        "{doc:#}"
    );
}

#[test]
fn actor_add_refuses_an_unknown_skill_naming_the_field_and_saves_nothing() {
    let env = Env::new();
    let file = env.root().join("reviewer.yaml");
    std::fs::write(
        &file,
        "name: reviewer\nmodel: openai/gpt-4o\nskills:\n  - git_operations\n  - local/file-ops\n",
    )
    .unwrap();
    let doc = fails(
        &env,
        &["actor", "add", "--config", file.to_str().unwrap()],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(message.contains("reviewer.yaml:5"), "{message}");
    assert!(message.contains("skills[1]"), "{message}");
    assert!(
        message.contains("did you mean `file_operations`?"),
        "{message}"
    );
    let doc = fails(
        &env,
        &[
            "actor",
            "add",
            "--config",
            file.to_str().unwrap(),
            "--skill",
            "shel",
        ],
        "INVALID_INPUT",
    );
    // The file's error is found first.
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("skills[1]")
    );

    std::fs::write(&file, "name: reviewer\nmodel: openai/gpt-4o\n").unwrap();
    let doc = fails(
        &env,
        &[
            "actor",
            "add",
            "--config",
            file.to_str().unwrap(),
            "--skill",
            "shel",
        ],
        "INVALID_INPUT",
    );
    let message = doc["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("--skill unknown skill `shel`"),
        "{message}"
    );
    assert!(message.contains("did you mean `shell`?"), "{message}");
    assert_eq!(
        names(&ok(&env, &["actor", "list"])["data"]["actors"])
            .iter()
            .filter(|n| n.starts_with("local/"))
            .count(),
        0
    );
    let added = ok(
        &env,
        &[
            "actor",
            "add",
            "--config",
            file.to_str().unwrap(),
            "--skill",
            "shell",
        ],
    );
    assert_eq!(added["data"]["actor"]["skills"], json!(["shell"]));
}

#[test]
fn skill_and_tool_commands_render_in_all_six_formats() {
    let env = Env::new();
    let commands: [&[&str]; 5] = [
        &["skill", "list"],
        &["skill", "show", "git_operations"],
        &["skill", "tools", "directory_operations"],
        &["tool", "list"],
        &["tool", "show", "search_files"],
    ];
    for args in commands {
        for format in ["rich", "color", "table", "plain", "json", "yaml"] {
            let mut all = vec!["--format", format];
            all.extend_from_slice(args);
            let out = env.run(&all);
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(out.status.code(), Some(0), "{all:?}: {text}");
            match format {
                "json" => {
                    let doc: Value = serde_json::from_str(&text).unwrap();
                    assert_eq!(doc["command"], args[..2].join(" "));
                }
                "yaml" => assert!(text.contains("data:"), "{all:?}: {text}"),
                _ => {
                    let name = args.get(2).copied().unwrap_or("Name");
                    assert!(text.contains(name), "{all:?}: {text}");
                }
            }
        }
    }
}

fn check(name: &str, env: &Env, args: &[&str]) {
    let out = env.run(args);
    let text = output_text(&out);
    settings(env, args).bind(|| insta::assert_snapshot!(name, text));
}

#[test]
fn skill_and_tool_snapshots() {
    let env = Env::new();
    for (name, args) in [
        ("skill_list", &["skill", "list"][..]),
        ("skill_show", &["skill", "show", "file_operations"][..]),
        ("skill_tools", &["skill", "tools", "git_operations"][..]),
        ("tool_list", &["tool", "list"][..]),
        ("tool_show", &["tool", "show", "edit_file"][..]),
        (
            "skill_add_without_tools",
            &["skill", "add", "local/ops"][..],
        ),
    ] {
        // The shell's `unsafe` depends on the kernel, so no json snapshot lists it.
        let formats: &[&str] = if name == "tool_list" {
            &["plain"]
        } else {
            &["plain", "json"]
        };
        for format in formats {
            let mut all = vec!["--format", *format];
            all.extend_from_slice(args);
            check(&format!("{name}_{format}"), &env, &all);
        }
    }
}

#[test]
fn bare_tool_and_skill_names_resolve_to_local_as_other_registries_do() {
    let env = Env::new();
    let ex = |rel: &str| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(rel)
            .display()
            .to_string()
    };
    for t in ["tools/count-lines.yaml", "tools/changelog-entry.yaml"] {
        ok(&env, &["tool", "add", "-c", &ex(t)]);
    }
    for k in ["skills/filesystem-mcp.yaml", "skills/project-tools.yaml"] {
        ok(&env, &["skill", "add", "-c", &ex(k)]);
    }
    let shown = ok(&env, &["tool", "show", "count-lines"]);
    assert_eq!(
        shown["data"]["tool"]["name"], "local/count-lines",
        "{shown:#}"
    );
    let shown = ok(&env, &["skill", "show", "project-tools"]);
    assert_eq!(
        shown["data"]["skill"]["name"], "local/project-tools",
        "{shown:#}"
    );
    let actor = env.root().join("a.yaml");
    std::fs::write(
        &actor,
        "name: builder\nmodel: openai/gpt-4o\nskills: [project-tools, git_operations]\n",
    )
    .unwrap();
    ok(&env, &["actor", "add", "--config", actor.to_str().unwrap()]);
    // A built-in keeps its bare name.
    let shown = ok(&env, &["skill", "show", "git_operations"]);
    assert_eq!(shown["data"]["skill"]["name"], "git_operations");
}
