//! Actions and their scripts on real repositories, each test named after what broke: argument
//! quoting, the shell interpreter, YAML byte order
//! marks, names git refuses, append dry runs, rollback approvals, updating and deleting
//! actions.

use serde_json::Value;

use crate::support::{Env, fails, ok};

/// Writes `text` to `<root>/<name>` and returns its path.
fn file(env: &Env, name: &str, text: &str) -> String {
    let path = env.root().join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn yaml_files_starting_with_a_byte_order_mark_load_as_one_document() {
    let env = Env::new();
    let bom = "\u{feff}";
    let action = file(
        &env,
        "a.yaml",
        &format!(
            "{bom}name: local/bom\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\n"
        ),
    );
    let doc = ok(&env, &["action", "create", "--config", &action]);
    assert_eq!(doc["data"]["action"]["name"], "local/bom");
    let actor = file(
        &env,
        "actor.yaml",
        &format!(
            "{bom}name: corp/rev\nmodel: anthropic/claude-sonnet-4-5\nsystem-prompt: You review.\n"
        ),
    );
    ok(&env, &["actor", "add", "--config", &actor]);
    let profile = file(
        &env,
        "profile.yaml",
        &format!(
            "{bom}name: local/careful\nflags:\n  auto_strategize: true\n  auto_execute: false\n  auto_apply: false\n  auto_decisions_strategize: true\n  auto_decisions_execute: false\n  auto_validation_fix: false\n  auto_strategy_revision: false\n  auto_child_plans: false\n  auto_retry_transient: true\n  auto_checkpoint_restore: false\n  require_sandbox: true\n  require_checkpoints: true\n  allow_unsafe_tools: false\n"
        ),
    );
    ok(&env, &["automation-profile", "add", "--config", &profile]);
    // A mark anywhere else is still an error.
    let late = file(&env, "late.yaml", &format!("name: local/late\n{bom}x: 1\n"));
    fails(
        &env,
        &["action", "create", "--config", &late],
        "INVALID_INPUT",
    );
}

/// A git checkout `local/repo` in project `local/app`.
fn project(env: &Env) -> std::path::PathBuf {
    let repo = crate::support::git_repo(env.root(), "repo");
    ok(
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
    ok(
        env,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    repo
}

fn create_available(env: &Env, name: &str, yaml: &str) -> Value {
    let path = file(env, name, yaml);
    ok(env, &["action", "create", "--available", "--config", &path])
}

/// The values a user might pass that a shell would otherwise run or split.
const TRICKY: [(&str, &str); 5] = [
    ("a", "'use strict'"),
    ("b", "\"use strict\""),
    ("c", "x'; echo INJECTED > INJECTED.txt; echo '"),
    (
        "d",
        "$(echo SUBSTITUTED > SUB.txt) `echo TICKS > TICKS.txt`",
    ),
    ("e", "first line\nsecond; echo NEWLINE > NL.txt\n"),
];

/// An action whose `run:` step writes each argument twice: from `{{ x }}` and from
/// `$AGENTS_ARG_X`.
fn echo_action(name: &str) -> String {
    let mut y = format!(
        "name: {name}\ndefinition-of-done: the values are written\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n"
    );
    for (n, _) in TRICKY {
        y.push_str(&format!(
            "  - {{name: {n}, type: string, required: true}}\n"
        ));
    }
    y.push_str("script:\n  - name: write\n    run: |\n      mkdir -p out\n");
    for (n, _) in TRICKY {
        let upper = n.to_ascii_uppercase();
        y.push_str(&format!(
            "      printf %s {{{{ {n} }}}} > out/{n}.txt\n      printf %s \"$AGENTS_ARG_{upper}\" > out/{n}.env\n"
        ));
    }
    y
}

fn assert_written_literally(repo: &std::path::Path, prefix: &str) {
    for (n, v) in TRICKY {
        for ext in ["txt", "env"] {
            let got = std::fs::read_to_string(repo.join(format!("{prefix}{n}.{ext}")))
                .unwrap_or_else(|e| panic!("{prefix}{n}.{ext}: {e}"));
            assert_eq!(got, v, "{prefix}{n}.{ext}");
        }
    }
    for f in ["INJECTED.txt", "SUB.txt", "TICKS.txt", "NL.txt"] {
        assert!(!repo.join(f).exists(), "{f} was created: a value ran");
        assert!(
            !repo.join("out").join(f).exists(),
            "{f} was created: a value ran"
        );
    }
}

fn plan_args() -> Vec<String> {
    TRICKY.iter().map(|(n, v)| format!("{n}={v}")).collect()
}

#[test]
fn run_steps_get_each_argument_as_one_word_and_as_agents_arg_variables() {
    let env = Env::new();
    let repo = project(&env);
    create_available(&env, "echo.yaml", &echo_action("local/echo"));
    let mut args = vec![
        "plan",
        "use",
        "local/echo",
        "app",
        "--automation-profile",
        "trusted",
    ];
    let given = plan_args();
    for g in &given {
        args.extend(["--arg", g]);
    }
    let (doc, code) = env.json(&args);
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    ok(&env, &["plan", "apply", "--yes", &id]);
    assert_written_literally(&repo, "out/");
}

#[test]
fn a_child_plan_gets_its_arguments_quoted_the_same_way() {
    let env = Env::new();
    let repo = project(&env);
    create_available(&env, "echo.yaml", &echo_action("local/echo"));
    let mut parent = String::from(
        "name: local/parent\ndefinition-of-done: the child wrote the values\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n",
    );
    for (n, _) in TRICKY {
        parent.push_str(&format!(
            "  - {{name: {n}, type: string, required: true}}\n"
        ));
    }
    parent
        .push_str("script:\n  - name: child\n    spawn:\n      action: local/echo\n      args:\n");
    for (n, _) in TRICKY {
        parent.push_str(&format!("        {n}: \"{{{{ {n} }}}}\"\n"));
    }
    create_available(&env, "parent.yaml", &parent);
    let mut args = vec![
        "plan",
        "use",
        "local/parent",
        "app",
        "--automation-profile",
        "trusted",
    ];
    let given = plan_args();
    for g in &given {
        args.extend(["--arg", g]);
    }
    let (doc, code) = env.json(&args);
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    ok(&env, &["plan", "apply", "--yes", &id]);
    assert_written_literally(&repo, "out/");
}

#[test]
fn values_holding_nul_are_refused_with_a_clear_error() {
    let env = Env::new();
    project(&env);
    // A default (YAML can spell NUL as "\0").
    let bad_default = file(
        &env,
        "default.yaml",
        "name: local/nul\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - {name: v, type: string, default: \"a\\0b\"}\n",
    );
    let doc = fails(
        &env,
        &["action", "create", "--config", &bad_default],
        "INVALID_INPUT",
    );
    let text = doc["error"].to_string();
    assert!(
        text.contains("NUL") && text.contains("arguments[0].default"),
        "{text}"
    );
    // A spawn argument, checked before any plan runs.
    create_available(&env, "echo.yaml", &echo_action("local/echo"));
    let spawn = file(
        &env,
        "spawn.yaml",
        "name: local/spawn-nul\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: child\n    spawn:\n      action: local/echo\n      args: {a: \"x\\0y\", b: b, c: c, d: d, e: e}\n",
    );
    let doc = fails(
        &env,
        &["action", "create", "--config", &spawn],
        "INVALID_INPUT",
    );
    let text = doc["error"].to_string();
    assert!(
        text.contains("NUL") && text.contains("script[0].spawn.args.a"),
        "{text}"
    );
}

#[test]
fn a_model_spawning_a_child_with_a_nul_argument_gets_a_clear_refusal() {
    use crate::support::provider_server::{ProviderServer, Turn};
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[(
                "create_subplan",
                r#"{"action":"local/echo","args":{"a":"x\u0000y","b":"b","c":"c","d":"d","e":"e"}}"#,
            )],
            (10, 5),
        ),
        Turn::text("Could not delegate.", (10, 5)),
    ]);
    let env = Env::new();
    project(&env);
    create_available(&env, "echo.yaml", &echo_action("local/echo"));
    std::fs::create_dir_all(env.config_path.parent().unwrap()).unwrap();
    std::fs::write(
        &env.config_path,
        format!(
            "[providers.scripted]\nkind = \"openai\"\nbase_url = \"{}\"\napi_key_env = \"SCRIPTED_API_KEY\"\n",
            server.openai_base()
        ),
    )
    .unwrap();
    create_available(
        &env,
        "delegate.yaml",
        "name: local/delegate\ndefinition-of-done: delegated\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: scripted/m\n",
    );
    let out = env
        .command(&[
            "--format",
            "json",
            "plan",
            "use",
            "local/delegate",
            "app",
            "--automation-profile",
            "trusted",
        ])
        .env("SCRIPTED_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert_eq!(
        server.remaining(),
        0,
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let answer = server.requests()[1].body.to_string();
    assert!(
        answer.contains("argument `a`") && answer.contains("NUL character"),
        "{answer}"
    );
}

#[test]
fn run_steps_use_bin_sh_unless_the_action_or_the_step_says_shell_bash() {
    let env = Env::new();
    let repo = project(&env);
    create_available(
        &env,
        "shells.yaml",
        "name: local/shells\ndefinition-of-done: each step wrote its shell\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nshell: bash\nscript:\n  - name: action-default\n    run: set -o pipefail && echo \"${BASH_VERSION:-none}\" > action.txt\n  - name: step-sh\n    shell: sh\n    run: echo \"${BASH_VERSION:-none}\" > step.txt\n  - name: tool\n    tool: shell_execute\n    args: {command: 'echo \"${BASH_VERSION:-none}\" > tool.txt', shell: bash}\n",
    );
    create_available(
        &env,
        "plain.yaml",
        "name: local/plain\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: default\n    run: echo \"${BASH_VERSION:-none}\" > default.txt\n",
    );
    for action in ["local/shells", "local/plain"] {
        let (doc, code) = env.json(&[
            "plan",
            "use",
            action,
            "app",
            "--automation-profile",
            "trusted",
        ]);
        assert_eq!(code, 3, "{doc:#}");
        let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
        ok(&env, &["plan", "apply", "--yes", &id]);
    }
    let read = |f: &str| std::fs::read_to_string(repo.join(f)).unwrap();
    assert_ne!(
        read("action.txt").trim(),
        "none",
        "the action's shell: bash"
    );
    assert_ne!(
        read("tool.txt").trim(),
        "none",
        "shell_execute's shell: bash"
    );
    assert_eq!(read("step.txt").trim(), "none", "the step's shell: sh wins");
    assert_eq!(read("default.txt").trim(), "none", "/bin/sh by default");
    let bad = file(
        &env,
        "zsh.yaml",
        "name: local/zsh\ndefinition-of-done: done\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: z\n    shell: zsh\n    run: true\n",
    );
    let doc = fails(
        &env,
        &["action", "create", "--config", &bad],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"].to_string().contains("script[0].shell"),
        "{doc:#}"
    );
}

/// The checkpoint ids of a plan, oldest first.
fn checkpoints(env: &Env, plan: &str) -> Vec<String> {
    let doc = ok(env, &["plan", "checkpoints", plan]);
    let mut cps: Vec<(u64, String)> = doc["data"]["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["seq"].as_u64().unwrap_or_default(),
                c["checkpoint_id"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    cps.sort();
    cps.into_iter().map(|(_, id)| id).collect()
}

fn pending_approvals(env: &Env, plan: &str) -> Vec<Value> {
    let doc = ok(env, &["plan", "approvals"]);
    doc["data"]["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["plan_id"] == plan)
        .cloned()
        .collect()
}

const TWO_STEPS: &str = "name: local/two\ndefinition-of-done: a and b exist\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: a\n    run: echo a > a.txt\n  - name: b\n    run: echo b > b.txt\n";

#[test]
fn rollback_withdraws_the_apply_approval_it_invalidates() {
    let env = Env::new();
    let repo = project(&env);
    create_available(&env, "two.yaml", TWO_STEPS);
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/two",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let before = pending_approvals(&env, &id);
    assert_eq!(before.len(), 1, "the apply gate waits: {before:#?}");
    let first = checkpoints(&env, &id)[0].clone();
    let doc = ok(&env, &["plan", "rollback", "--yes", &id, &first]);
    assert_eq!(
        doc["data"]["withdrawn_approvals"][0], before[0]["approval_id"],
        "{doc:#}"
    );
    assert!(
        pending_approvals(&env, &id).is_empty(),
        "nothing stale waits"
    );
    // The event log says why.
    let (events, code) = env.json(&["plan", "events", &id]);
    assert_eq!(code, 0, "{events:#}");
    let data = events["data"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.to_string())
        .rfind(|e| e.contains("state_changed"))
        .expect("a state change");
    assert!(data.contains("\"reason\":\"rollback\""), "{data}");
    // Execute again reaches a fresh gate, and approving it applies.
    let (doc, code) = env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    let again = pending_approvals(&env, &id);
    assert_eq!(again.len(), 1);
    assert_ne!(again[0]["approval_id"], before[0]["approval_id"]);
    ok(&env, &["plan", "apply", "--yes", &id]);
    assert!(repo.join("a.txt").exists() && repo.join("b.txt").exists());
}

#[test]
fn names_git_refuses_made_by_a_shell_step_do_not_wedge_snapshots_rollback_or_apply() {
    let env = Env::new();
    let repo = project(&env);
    create_available(
        &env,
        "aliases.yaml",
        "name: local/aliases\ndefinition-of-done: kept.txt exists\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nscript:\n  - name: first\n    run: echo one > one.txt\n  - name: aliases\n    run: |\n      for n in .git. git~1 GIT~1 '.git ' '.git::$INDEX_ALLOCATION'; do echo x > \"$n\"; done\n      mkdir -p sub/.git. && echo y > sub/.git./config\n      echo kept > kept.txt\n",
    );
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/aliases",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(
        code, 3,
        "the step succeeds and the plan reaches the gate: {doc:#}"
    );
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let diff = ok(&env, &["plan", "diff", &id]);
    let mut paths: Vec<String> = diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    paths.sort();
    assert_eq!(
        paths,
        ["kept.txt", "one.txt"],
        "the aliases are never recorded"
    );
    // Rolling back past the step and running it again works.
    let cps = checkpoints(&env, &id);
    ok(&env, &["plan", "rollback", "--yes", &id, &cps[1]]);
    let (doc, code) = env.json(&["plan", "execute", &id]);
    assert_eq!(code, 3, "{doc:#}");
    ok(&env, &["plan", "apply", "--yes", &id]);
    assert!(repo.join("kept.txt").exists());
    for n in [".git.", "git~1", "GIT~1", ".git ", "sub"] {
        assert!(!repo.join(n).exists(), "{n} reached the project");
    }
}

fn versioned(text: &str) -> String {
    format!(
        "name: local/notes\ndefinition-of-done: notes.txt says {text}\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\ninvariants:\n  - Keep it short\nscript:\n  - name: write\n    run: echo {text} > notes.txt\n"
    )
}

fn diff_text(env: &Env, plan: &str) -> String {
    ok(env, &["plan", "diff", plan]).to_string()
}

#[test]
fn action_create_update_raises_the_version_and_plans_keep_the_definition_they_were_made_from() {
    let env = Env::new();
    project(&env);
    let v1 = file(&env, "v1.yaml", &versioned("first"));
    let doc = ok(&env, &["action", "create", "--available", "--config", &v1]);
    assert_eq!(doc["data"]["action"]["version"], 1);
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "manual",
    ]);
    assert_eq!(code, 3, "waits at the strategize gate: {doc:#}");
    let old_plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    // Without --update the name is taken, and the hint says how to replace it.
    let v2 = file(&env, "v2.yaml", &versioned("second"));
    let doc = fails(&env, &["action", "create", "--config", &v2], "CONFLICT");
    assert!(doc["error"].to_string().contains("--update"), "{doc:#}");
    let doc = ok(&env, &["action", "create", "--update", "--config", &v2]);
    assert_eq!(doc["data"]["action"]["version"], 2, "{doc:#}");
    assert_eq!(doc["data"]["replaced_version"], 1);
    assert_eq!(
        doc["data"]["action"]["state"], "available",
        "it stays usable"
    );
    assert_eq!(
        doc["data"]["invariants"],
        serde_json::json!([]),
        "no duplicate invariant"
    );
    let shown = ok(&env, &["action", "show", "local/notes"]);
    assert_eq!(shown["data"]["action"]["version"], 2);
    let human = env.run(&["action", "show", "local/notes"]);
    assert!(
        crate::support::stdout(&human).contains("Version"),
        "shows its version"
    );
    // The plan made from version 1 runs version 1.
    let (mut doc, mut code) = env.json(&["plan", "execute", &old_plan]);
    if doc["data"]["approval"]["context"]["gate"] == "execute" {
        // manual: the execute gate first; its answer is `plan execute` again.
        (doc, code) = env.json(&["plan", "execute", &old_plan]);
    }
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(
        doc["data"]["approval"]["context"]["gate"], "apply",
        "{doc:#}"
    );
    let old_diff = diff_text(&env, &old_plan);
    assert!(
        old_diff.contains("first") && !old_diff.contains("second"),
        "{old_diff}"
    );
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    let new_plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    assert!(diff_text(&env, &new_plan).contains("second"));
    let st = crate::support::open_store(&env);
    assert_eq!(
        st.plan_action_version(&old_plan.parse().unwrap()).unwrap(),
        Some(1)
    );
    assert_eq!(
        st.plan_action_version(&new_plan.parse().unwrap()).unwrap(),
        Some(2)
    );
}

#[test]
fn action_delete_is_refused_while_a_plan_is_unfinished_and_then_frees_the_name() {
    let env = Env::new();
    project(&env);
    let v1 = file(&env, "v1.yaml", &versioned("first"));
    ok(&env, &["action", "create", "--available", "--config", &v1]);
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/notes",
        "app",
        "--automation-profile",
        "trusted",
    ]);
    assert_eq!(code, 3, "{doc:#}");
    let plan = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let doc = fails(
        &env,
        &["action", "delete", "--yes", "local/notes"],
        "CONFLICT",
    );
    let text = doc["error"].to_string();
    assert!(text.contains(&plan), "names the unfinished plan: {text}");
    ok(&env, &["plan", "apply", "--yes", &plan]);
    let doc = ok(&env, &["action", "delete", "--yes", "local/notes"]);
    assert_eq!(doc["data"]["finished_plans"], 1);
    fails(&env, &["action", "show", "local/notes"], "NOT_FOUND");
    // The applied plan still shows where it came from, and the name is free again.
    ok(&env, &["plan", "status", &plan]);
    let doc = ok(&env, &["action", "create", "--config", &v1]);
    assert_eq!(doc["data"]["action"]["version"], 1);
    // An action no plan used is deleted outright.
    ok(&env, &["action", "delete", "--yes", "local/notes"]);
    let list = ok(&env, &["action", "list", "--state", "all"]);
    assert_eq!(list["data"]["actions"], serde_json::json!([]), "{list:#}");
}
