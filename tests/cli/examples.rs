//! The actions in `examples/`: every file is accepted by
//! `action create --config`, and each offline one runs end to end on a temp repository:
//! Strategize and Execute under `trusted`, the diff checked, Apply making one commit.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::support::{Env, git, git_out, ok};

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(name)
}

/// A repository `repo` with `files` committed, registered and in project `local/app`; the
/// example action created and available.
fn setup(files: &[(&str, &[u8])], action_file: &str) -> (Env, PathBuf) {
    let env = Env::new();
    let repo = env.root().join("repo");
    for (rel, content) in files {
        let f = repo.join(rel);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(f, content).unwrap();
    }
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    ok(
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
    ok(
        &env,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    ok(
        &env,
        &[
            "action",
            "create",
            "--available",
            "--config",
            example(action_file).to_str().unwrap(),
        ],
    );
    (env, repo)
}

/// `plan use ACTION app --automation-profile trusted --arg ...`: runs to the apply gate.
fn run_to_apply(env: &Env, action: &str, args: &[&str]) -> (String, Value) {
    let mut all = vec![
        "plan",
        "use",
        action,
        "app",
        "--automation-profile",
        "trusted",
    ];
    for a in args {
        all.extend(["--arg", a]);
    }
    let (doc, code) = env.json(&all);
    assert_eq!(code, 3, "stops before Apply: {doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap().to_string();
    let diff = ok(env, &["plan", "diff", &id]);
    (id, diff)
}

fn changed(diff: &Value) -> Vec<String> {
    let mut v: Vec<String> = diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect();
    v.sort();
    v
}

fn apply_one_commit(env: &Env, repo: &Path, id: &str) {
    let before: u32 = git_out(repo, &["rev-list", "--count", "HEAD"])
        .trim()
        .parse()
        .unwrap();
    ok(env, &["plan", "apply", "--yes", id]);
    let after: u32 = git_out(repo, &["rev-list", "--count", "HEAD"])
        .trim()
        .parse()
        .unwrap();
    assert_eq!(after, before + 1, "exactly one commit");
    assert_eq!(git_out(repo, &["status", "--porcelain"]), "");
}

fn read(repo: &Path, rel: &str) -> String {
    std::fs::read_to_string(repo.join(rel)).unwrap()
}

#[test]
fn every_example_is_accepted_by_action_create_and_made_available() {
    let env = Env::new();
    // refactor-per-module spawns refactor-module, which must exist first.
    let mut files: Vec<String> = std::fs::read_dir(example(""))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    files.sort_by_key(|n| (n == "refactor-per-module.yaml", n.clone()));
    assert!(files.len() >= 8, "{files:?}");
    for f in &files {
        let doc = ok(
            &env,
            &[
                "action",
                "create",
                "--available",
                "--config",
                example(f).to_str().unwrap(),
            ],
        );
        assert_eq!(doc["data"]["action"]["state"], "available", "{f}: {doc:#}");
    }
    let (list, _) = env.json(&["action", "list"]);
    assert_eq!(
        list["data"]["actions"].as_array().unwrap().len(),
        files.len()
    );
    // The quickstart embeds the offline ones: the same bytes as the files.
    for (key, yaml) in cleveragents::cli::quickstart::OFFLINE_EXAMPLES {
        assert_eq!(
            std::fs::read_to_string(example(&format!("{key}.yaml"))).unwrap(),
            yaml
        );
    }
}

#[test]
fn the_format_example_formats_and_tidies_source_files_and_leaves_the_rest_alone() {
    // rustup installed the usual way: `~/.rustup` and `~/.cargo`, no RUSTUP_HOME.
    let real_home = std::env::var_os("HOME").map(PathBuf::from);
    let rust_ok = Command::new("rustfmt")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let (env, repo) = setup(
        &[
            (
                "Cargo.toml",
                b"[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            ("src/lib.rs", b"pub fn add(a:i32,b:i32)->i32{a+b}\n"),
            ("tool.py", b"x = 1   \ny = 2"),
            ("notes.md", b"line with a break  \nnext\n"),
            ("data.toml", b"bin\0ary   \n"),
            ("conf.yaml", b"a: 1  \r\nb: 2\r\n"),
            ("tests/fixtures/input.py", b"kept   \n"),
            ("doc.txt", b"text files are data   \n"),
            ("src/lit.rs", b"pub const S: &str = \"two  \nlines\";\n"),
        ],
        "format.yaml",
    );
    for dir in [".rustup", ".cargo"] {
        if let Some(real) = real_home
            .as_ref()
            .map(|h| h.join(dir))
            .filter(|d| d.is_dir())
        {
            std::os::unix::fs::symlink(real, env.root().join(dir)).unwrap();
        }
    }
    let (id, diff) = run_to_apply(&env, "local/format", &[]);
    let mut expected = vec!["conf.yaml", "tool.py"];
    if rust_ok {
        expected.insert(1, "src/lib.rs");
    }
    assert_eq!(changed(&diff), expected, "{diff:#}");
    apply_one_commit(&env, &repo, &id);
    assert_eq!(read(&repo, "tool.py"), "x = 1\ny = 2\n");
    assert_eq!(
        read(&repo, "conf.yaml"),
        "a: 1\r\nb: 2\r\n",
        "line endings kept"
    );
    assert_eq!(
        read(&repo, "notes.md"),
        "line with a break  \nnext\n",
        "markdown untouched"
    );
    assert_eq!(
        read(&repo, "tests/fixtures/input.py"),
        "kept   \n",
        "test data untouched"
    );
    assert_eq!(
        read(&repo, "src/lit.rs"),
        "pub const S: &str = \"two  \nlines\";\n",
        "literals kept"
    );
    if rust_ok {
        assert_eq!(
            read(&repo, "src/lib.rs"),
            "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n"
        );
    }
}

#[test]
fn the_codemod_example_replaces_a_literal_in_matching_files_only() {
    let (env, repo) = setup(
        &[
            ("src/a.rs", b"fn old_name() {}\nfn main() { old_name(); }\n"),
            ("src/b.rs", b"// old_name.* is not a regex here\n"),
            ("README.md", b"old_name stays in docs\n"),
        ],
        "codemod.yaml",
    );
    let (id, diff) = run_to_apply(
        &env,
        "local/codemod",
        &["from=old_name", "to=new_name", "glob=*.rs"],
    );
    assert_eq!(changed(&diff), ["src/a.rs", "src/b.rs"]);
    apply_one_commit(&env, &repo, &id);
    assert_eq!(
        read(&repo, "src/a.rs"),
        "fn new_name() {}\nfn main() { new_name(); }\n"
    );
    assert_eq!(
        read(&repo, "src/b.rs"),
        "// new_name.* is not a regex here\n"
    );
    assert_eq!(read(&repo, "README.md"), "old_name stays in docs\n");
}

#[test]
fn the_license_header_example_adds_one_header_after_shebangs_and_skips_files_that_have_one() {
    let (env, repo) = setup(
        &[
            ("run.sh", b"#!/bin/sh\necho hi\n"),
            ("lib.rs", b"pub fn f() {}\n"),
            ("done.py", b"# SPDX-License-Identifier: MIT\nprint(1)\n"),
            ("README.md", b"# Title\n"),
        ],
        "license-header.yaml",
    );
    let (id, diff) = run_to_apply(
        &env,
        "local/license-header",
        &["license=MIT", "holder=Jane Doe"],
    );
    assert_eq!(changed(&diff), ["lib.rs", "run.sh"]);
    apply_one_commit(&env, &repo, &id);
    assert_eq!(
        read(&repo, "run.sh"),
        "#!/bin/sh\n# SPDX-License-Identifier: MIT\n# Copyright 2026 Jane Doe\n\necho hi\n"
    );
    assert!(
        read(&repo, "lib.rs")
            .starts_with("// SPDX-License-Identifier: MIT\n// Copyright 2026 Jane Doe\n\npub fn f")
    );
}

#[test]
fn the_bump_dependency_example_is_gated_by_the_tests_as_a_required_validation() {
    let (env, repo) = setup(
        &[
            ("requirements.txt", b"requests==2.30.0\nidna>=3.4\n"),
            // The project's "tests": this dependency must stay on 2.x.
            ("tests.sh", b"grep -Eq '^requests==2\\.' requirements.txt\n"),
        ],
        "bump-dependency.yaml",
    );
    ok(
        &env,
        &[
            "project",
            "validation",
            "add",
            "--required",
            "-d",
            "tests",
            "app",
            "sh tests.sh",
        ],
    );
    let (id, diff) = run_to_apply(
        &env,
        "local/bump-dependency",
        &[
            "name=requests",
            "version=2.31.0",
            "manifest=requirements.txt",
        ],
    );
    assert_eq!(changed(&diff), ["requirements.txt"]);
    apply_one_commit(&env, &repo, &id);
    assert_eq!(
        read(&repo, "requirements.txt"),
        "requests==2.31.0\nidna>=3.4\n"
    );

    // A bump that breaks the tests: the required validation fails at the end of Execute, the
    // plan errors naming it, and the repository keeps its commit and content.
    let head = git_out(&repo, &["rev-parse", "HEAD"]);
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/bump-dependency",
        "app",
        "--automation-profile",
        "trusted",
        "--arg",
        "name=requests",
        "--arg",
        "version=3.0.0",
        "--arg",
        "manifest=requirements.txt",
    ]);
    assert_eq!(code, 1, "{doc:#}");
    assert_eq!(doc["error"]["code"], "PLAN_ERRORED");
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("required validation `sh tests.sh` failed"),
        "{doc:#}"
    );
    let id = doc["data"]["plan_id"].as_str().unwrap();
    let (doc, code) = env.json(&["plan", "apply", "--yes", id]);
    assert_ne!(code, 0, "an errored plan is not applied: {doc:#}");
    assert_eq!(git_out(&repo, &["rev-parse", "HEAD"]), head);
    assert_eq!(
        read(&repo, "requirements.txt"),
        "requests==2.31.0\nidna>=3.4\n"
    );

    // A dependency the manifest does not have fails the step with a clear message.
    let (doc, code) = env.json(&[
        "plan",
        "use",
        "local/bump-dependency",
        "app",
        "--automation-profile",
        "trusted",
        "--arg",
        "name=nosuch",
        "--arg",
        "version=1",
        "--arg",
        "manifest=requirements.txt",
    ]);
    assert_ne!(code, 0, "{doc:#}");
    let id = doc["data"]["plan_id"].as_str().unwrap();
    let (errors, _) = env.json(&["plan", "errors", id]);
    assert!(
        errors
            .to_string()
            .contains("nosuch not found in requirements.txt"),
        "{errors:#}"
    );
}

#[test]
fn an_action_passes_only_the_environment_variables_it_names_to_shell_steps() {
    let env = Env::new();
    let repo = env.root().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    std::fs::write(repo.join("README"), "x\n").unwrap();
    git(&repo, &["init", "-q"]);
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "init"]);
    ok(
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
    ok(
        &env,
        &["project", "create", "--resource", "local/repo", "app"],
    );
    let file = env.root().join("a.yaml");
    let action = "name: local/envs\ndefinition-of-done: env.txt\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\nsandbox:\n  env: [QS_PASSED]\nscript:\n  - name: env\n    run: env | sort > env.txt\n";
    std::fs::write(&file, action.replace("[QS_PASSED]", "[QS_PASSED, 1BAD]")).unwrap();
    let (doc, code) = env.json(&["action", "create", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 1, "{doc:#}");
    assert!(
        doc["error"].to_string().contains("sandbox.env[1]"),
        "names the field: {doc:#}"
    );
    std::fs::write(&file, action).unwrap();
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
    let out = env
        .command(&[
            "--format",
            "json",
            "plan",
            "use",
            "local/envs",
            "app",
            "--automation-profile",
            "trusted",
        ])
        .env("QS_PASSED", "yes")
        .env("QS_NOT_NAMED", "no")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = doc["data"]["plan_id"].as_str().unwrap();
    let diff = ok(&env, &["plan", "diff", id]).to_string();
    assert!(diff.contains("QS_PASSED=yes"), "{diff}");
    assert!(!diff.contains("QS_NOT_NAMED"), "{diff}");
}

#[test]
fn the_codemod_example_replaces_quotes_literally_and_never_runs_a_value() {
    let (env, repo) = setup(
        &[
            (
                "lib/app.js",
                b"'use strict'\nvar app = {};\napp.use(x);\n" as &[u8],
            ),
            ("lib/router.js", b"'use strict'\nrouter.use(y);\n"),
            ("docs/notes.md", b"'use strict' stays in docs\n"),
            ("lib/evil.js", b"x'; echo INJECTED > INJECTED.txt; echo '\n"),
        ],
        "codemod.yaml",
    );
    let (id, diff) = run_to_apply(
        &env,
        "local/codemod",
        &["from='use strict'", "to=\"use strict\"", "glob=*.js"],
    );
    assert_eq!(changed(&diff), ["lib/app.js", "lib/router.js"]);
    apply_one_commit(&env, &repo, &id);
    assert_eq!(
        read(&repo, "lib/app.js"),
        "\"use strict\"\nvar app = {};\napp.use(x);\n"
    );
    assert_eq!(
        read(&repo, "lib/router.js"),
        "\"use strict\"\nrouter.use(y);\n"
    );
    assert_eq!(read(&repo, "docs/notes.md"), "'use strict' stays in docs\n");
    // A value written to break out of quotes is text to find, not a command to run.
    let (id, diff) = run_to_apply(
        &env,
        "local/codemod",
        &[
            "from=x'; echo INJECTED > INJECTED.txt; echo '",
            "to=safe",
            "glob=*.js",
        ],
    );
    assert_eq!(changed(&diff), ["lib/evil.js"], "{diff:#}");
    apply_one_commit(&env, &repo, &id);
    assert_eq!(read(&repo, "lib/evil.js"), "safe\n");
    assert!(!repo.join("INJECTED.txt").exists());
}

/// A `grep` that answers "nothing found" (1) the first time and "cannot search" (2) after.
fn failing_grep(env: &Env) -> String {
    let bin = env.root().join("fake-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let grep = bin.join("grep");
    std::fs::write(
        &grep,
        "#!/bin/sh\nif [ -e \"$TMPDIR/grep-ran\" ]; then echo 'grep: simulated read error' >&2; exit 2; fi\n: > \"$TMPDIR/grep-ran\"\nexit 1\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&grep, std::fs::Permissions::from_mode(0o755)).unwrap();
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn the_codemod_verify_step_fails_when_grep_cannot_search() {
    let (env, _repo) = setup(&[("a.js", b"'use strict'\n" as &[u8])], "codemod.yaml");
    let out = env
        .command(&[
            "--format",
            "json",
            "plan",
            "use",
            "local/codemod",
            "app",
            "--automation-profile",
            "trusted",
            "--arg",
            "from=old",
            "--arg",
            "to=new",
        ])
        .env("PATH", failing_grep(&env))
        .output()
        .unwrap();
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_ne!(out.status.code(), Some(3), "must not reach Apply: {doc:#}");
    assert_ne!(out.status.code(), Some(0), "{doc:#}");
    let id = doc["data"]["plan_id"]
        .as_str()
        .or(doc["error"]["details"]["plan_id"].as_str())
        .map(str::to_string);
    let text = doc.to_string();
    let status = id
        .map(|id| ok(&env, &["plan", "status", &id]).to_string())
        .unwrap_or_default();
    assert!(
        text.contains("grep failed with status 2") || status.contains("grep failed with status 2"),
        "{text}\n{status}"
    );
}
