//! Bring your own tools (spec sections 18 and 19): registered command tools, custom skills
//! with includes and overrides, MCP servers over stdio and Streamable HTTP (the real
//! `@modelcontextprotocol/server-everything` and `server-filesystem` from tests/mcp), and
//! Agent Skills folders, each driven by a scripted model through a real plan.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::lifecycle::{Setup, run_keyed, scripted_env, setup_with};
use crate::support::provider_server::{ProviderServer, Turn};

const ONE_STEP: &str = "name: local/notes\ndescription: Write release notes\ndefinition-of-done: NOTES.md names the release\nstrategy-actor: builtin/checklist-strategist\nexecution-actor: builtin/script-executor\narguments:\n  - name: version\n    type: string\n    required: true\n";

const STAMP: &str = r#"cleveragents:
  version: "3.0"
tool:
  name: local/stamp
  description: Write a stamp file with the given text
  source: command
  input_schema:
    type: object
    properties:
      text: {type: string}
    required: [text]
    additionalProperties: false
  capability:
    writes: true
    checkpointable: true
  command: "printf '%s\n' {{ text }} > STAMP.txt && echo '{\"stamped\": true}'"
"#;

const COUNT: &str = r#"tool:
  name: local/count-lines
  description: Count the lines of a file
  input_schema:
    type: object
    properties:
      path: {type: string}
    required: [path]
  capability:
    read_only: true
  command: "wc -l < {{ path }}"
"#;

fn ok(env: &crate::support::Env, args: &[&str]) -> Value {
    let (doc, code) = run_keyed(env, args);
    assert_eq!(code, 0, "{args:?}: {doc:#}");
    doc
}

fn fails(env: &crate::support::Env, args: &[&str], code: &str) -> Value {
    let (doc, exit) = run_keyed(env, args);
    assert_ne!(exit, 0, "{args:?}: {doc:#}");
    assert_eq!(doc["error"]["code"], code, "{args:?}: {doc:#}");
    doc
}

fn write(s: &Setup, name: &str, text: &str) -> String {
    let p = s.env.root().join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// Registers `local/exec`, a model actor on the scripted provider with `skills`.
fn exec_actor(s: &Setup, skills: &[&str]) {
    let file = write(
        s,
        "exec.yaml",
        &format!(
            "name: exec\nmodel: scripted/m\nskills: [{}]\n",
            skills.join(", ")
        ),
    );
    ok(&s.env, &["actor", "add", "--config", &file]);
}

fn use_plan(s: &Setup, strategist: &str) -> (Value, i32, String) {
    let (doc, code) = run_keyed(
        &s.env,
        &[
            "plan",
            "use",
            "--strategy-actor",
            strategist,
            "--execution-actor",
            "local/exec",
            "--automation-profile",
            "trusted",
            "local/notes",
            "app",
            "--arg",
            "version=1.2",
        ],
    );
    let id = doc["data"]["plan_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{doc:#}"))
        .to_string();
    (doc, code, id)
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .or(t["name"].as_str())
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn diff_paths(s: &Setup, id: &str) -> Vec<String> {
    let (diff, _) = run_keyed(&s.env, &["plan", "diff", "--stat", id]);
    diff["data"]["resources"][0]["files"]
        .as_array()
        .unwrap_or_else(|| panic!("{diff:#}"))
        .iter()
        .map(|f| f["path"].as_str().unwrap().to_string())
        .collect()
}

const DECISION: &str = r#"{"key": "stamp", "decision_type": "implementation_choice", "question": "How is the release stamped?", "chosen_option": "STAMP.txt", "confidence_score": 0.9, "rationale": "the convention", "step": {"instructions": "stamp the release"}}"#;

#[test]
fn a_command_tool_is_offered_by_capability_runs_in_the_sandbox_and_rolls_back() {
    let server = ProviderServer::start(vec![
        Turn::tools("", &[("record_decision", DECISION)], (10, 5)),
        Turn::tools(
            "",
            &[("finish_strategy", r#"{"summary": "one step"}"#)],
            (10, 5),
        ),
        Turn::tools("", &[("local_stamp", r#"{"text": 7}"#)], (10, 5)),
        Turn::tools(
            "",
            &[("local_stamp", r#"{"text": "release 1.2; rm -rf /"}"#)],
            (10, 5),
        ),
        Turn::text("Stamped.", (10, 5)),
    ]);
    let s = setup_with(ONE_STEP);
    scripted_env(&s, &server, "openai");
    let stamp = write(&s, "stamp.yaml", STAMP);
    let count = write(&s, "count.yaml", COUNT);
    ok(&s.env, &["tool", "add", "-c", &stamp]);
    ok(&s.env, &["tool", "add", "-c", &count]);
    fails(&s.env, &["tool", "add", "-c", &stamp], "CONFLICT");
    ok(&s.env, &["tool", "add", "-c", &stamp, "--update"]);
    let skill = write(
        &s,
        "mine.yaml",
        "skill:\n  name: local/mine\n  description: stamp and count\n  tools: [local/stamp, local/count-lines]\n",
    );
    ok(&s.env, &["skill", "add", "-c", &skill]);
    exec_actor(&s, &["local/mine"]);
    let (doc, code, id) = use_plan(&s, "local/exec");
    assert_eq!(code, 3, "stops at the apply gate: {doc:#}");

    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    // Strategize offers the read-only tool and not the writing one; Execute offers both.
    let strategize = tool_names(&requests[0].body);
    assert!(
        strategize.contains(&"local_count-lines".to_string()),
        "{strategize:?}"
    );
    assert!(
        !strategize.contains(&"local_stamp".to_string()),
        "{strategize:?}"
    );
    let execute = tool_names(&requests[2].body);
    assert!(execute.contains(&"local_stamp".to_string()), "{execute:?}");
    assert!(
        execute.contains(&"local_count-lines".to_string()),
        "{execute:?}"
    );
    // Invalid arguments come back to the model with the schema error, naming the field.
    let after_invalid = requests[3].body.to_string();
    assert!(
        after_invalid.contains("INVALID_ARGUMENTS"),
        "{after_invalid}"
    );
    assert!(
        after_invalid.contains("invalid argument `text`"),
        "{after_invalid}"
    );
    assert!(requests[4].body.to_string().contains("stamped"));

    // The change is in the plan's diff, never in the user's repository; quoting kept the
    // argument one word.
    assert_eq!(diff_paths(&s, &id), ["STAMP.txt"]);
    let (diff, _) = run_keyed(&s.env, &["plan", "diff", &id]);
    assert!(
        diff.to_string().contains("release 1.2; rm -rf /"),
        "{diff:#}"
    );
    assert!(!s.repo.join("STAMP.txt").exists());

    // The writing call was bracketed by checkpoints; rolling back to the first restores.
    let (cps, _) = run_keyed(&s.env, &["plan", "checkpoints", &id]);
    let cps = cps["data"]["checkpoints"].as_array().unwrap().clone();
    assert!(cps.len() >= 2, "{cps:#?}");
    let first = cps[0]["checkpoint_id"].as_str().unwrap();
    ok(&s.env, &["plan", "rollback", "--yes", &id, first]);
    assert!(diff_paths(&s, &id).is_empty());

    // A tool a skill names cannot be removed; the read-only one shows how it is offered.
    fails(
        &s.env,
        &["tool", "remove", "--yes", "local/stamp"],
        "CONFLICT",
    );
    let shown = ok(&s.env, &["tool", "show", "local/count-lines"]);
    assert_eq!(shown["data"]["tool"]["capability"]["read_only"], true);
    let listed = ok(&s.env, &["tool", "list", "--source", "command"]);
    assert_eq!(listed["data"]["tools"].as_array().unwrap().len(), 2);
}

#[test]
fn tool_add_refuses_invalid_schemas_and_incoherent_capability_naming_the_field() {
    let s = setup_with(ONE_STEP);
    let bad = write(
        &s,
        "bad.yaml",
        "tool:\n  name: local/bad\n  description: d\n  input_schema: {type: object, properties: {x: {type: 7}}}\n  command: echo\n",
    );
    let doc = fails(&s.env, &["tool", "add", "-c", &bad], "INVALID_INPUT");
    assert!(doc.to_string().contains("tool.input_schema"), "{doc:#}");
    let both = write(
        &s,
        "both.yaml",
        "tool:\n  name: local/both\n  description: d\n  capability: {read_only: true, writes: true}\n  command: echo\n",
    );
    let doc = fails(&s.env, &["tool", "add", "-c", &both], "INVALID_INPUT");
    assert!(doc.to_string().contains("tool.capability"), "{doc:#}");
    let doc = fails(
        &s.env,
        &["tool", "add", "--code", "echo hi", "bare"],
        "INVALID_INPUT",
    );
    assert!(doc.to_string().contains("namespace"), "{doc:#}");
    ok(
        &s.env,
        &[
            "tool",
            "add",
            "--code",
            "cat",
            "-d",
            "Echo the arguments",
            "--no-writes",
            "local/echo",
        ],
    );
    let shown = ok(&s.env, &["tool", "show", "local/echo"]);
    assert_eq!(shown["data"]["tool"]["capability"]["read_only"], true);
    ok(&s.env, &["tool", "remove", "--yes", "local/echo"]);
    fails(&s.env, &["tool", "show", "local/echo"], "NOT_FOUND");
}

#[test]
fn skills_flatten_includes_with_overrides_and_refuse_cycles_naming_them() {
    let s = setup_with(ONE_STEP);
    ok(
        &s.env,
        &["tool", "add", "-c", &write(&s, "stamp.yaml", STAMP)],
    );
    ok(
        &s.env,
        &["tool", "add", "-c", &write(&s, "count.yaml", COUNT)],
    );
    let base = write(
        &s,
        "base.yaml",
        "skill:\n  name: local/base\n  description: base\n  tools: [local/stamp]\n",
    );
    ok(&s.env, &["skill", "add", "-c", &base]);
    let top = write(
        &s,
        "top.yaml",
        "skill:\n  name: local/top\n  description: top\n  builtins: [git_operations]\n  tools:\n    - name: local/count-lines\n      override: {description: Count lines (override)}\n  includes:\n    - name: local/base\n      tool_overrides:\n        - tool: local/stamp\n          override: {capability: {human_approval_required: true}}\n  anonymous_tools:\n    - name: hello\n      description: Say hello\n      capability: {read_only: true}\n      code: echo hello\n",
    );
    ok(&s.env, &["skill", "add", "-c", &top]);
    let doc = ok(&s.env, &["skill", "tools", "local/top"]);
    let tools = doc["data"]["tools"].as_array().unwrap();
    let find = |n: &str| {
        tools
            .iter()
            .find(|t| t["name"] == n)
            .unwrap_or_else(|| panic!("{n} in {doc:#}"))
            .clone()
    };
    assert_eq!(find("git_status")["source"], "builtin");
    assert_eq!(
        find("local/count-lines")["description"],
        "Count lines (override)"
    );
    assert_eq!(find("local/count-lines")["from_skill"], Value::Null);
    let stamp = find("local/stamp");
    assert_eq!(stamp["from_skill"], "local/base");
    assert_eq!(stamp["source"], "command");
    assert_eq!(stamp["capability"]["human_approval_required"], true);
    assert_eq!(
        stamp["capability"]["writes"], true,
        "shallow merge keeps the rest"
    );
    assert_eq!(find("hello")["capability"]["read_only"], true);
    // The override applies at the point of use only.
    let doc = ok(&s.env, &["skill", "tools", "local/base"]);
    assert_eq!(
        doc["data"]["tools"][0]["capability"]["human_approval_required"],
        false
    );

    // base including top closes a cycle: refused, naming it; nothing changes.
    let cyc = write(
        &s,
        "cyc.yaml",
        "skill:\n  name: local/base\n  description: base\n  tools: [local/stamp]\n  includes: [local/top]\n",
    );
    let doc = fails(
        &s.env,
        &["skill", "add", "-c", &cyc, "--update"],
        "INVALID_INPUT",
    );
    assert!(
        doc["error"]["message"]
            .as_str()
            .unwrap()
            .contains("local/base -> local/top -> local/base"),
        "{doc:#}"
    );
    let doc = ok(&s.env, &["skill", "show", "local/base"]);
    assert_eq!(doc["data"]["skill"]["includes"], json!([]));
    // Built-in metadata is authoritative; schemas are never overridable.
    let over = write(
        &s,
        "over.yaml",
        "skill:\n  name: local/over\n  tools:\n    - name: read_file\n      override: {capability: {writes: true}}\n",
    );
    let doc = fails(&s.env, &["skill", "add", "-c", &over], "INVALID_INPUT");
    assert!(doc.to_string().contains("built-in tool"), "{doc:#}");
    let schema = write(
        &s,
        "schema.yaml",
        "skill:\n  name: local/schema\n  tools:\n    - name: local/stamp\n      override: {input_schema: {type: object}}\n",
    );
    fails(&s.env, &["skill", "add", "-c", &schema], "INVALID_INPUT");
    let unknown = write(
        &s,
        "unknown.yaml",
        "skill:\n  name: local/unknown\n  tools: [local/nope]\n",
    );
    fails(&s.env, &["skill", "add", "-c", &unknown], "NOT_FOUND");
    // A skill still included cannot be removed.
    fails(
        &s.env,
        &["skill", "remove", "--yes", "local/base"],
        "CONFLICT",
    );
    ok(&s.env, &["skill", "remove", "--yes", "local/top"]);
    ok(&s.env, &["skill", "remove", "--yes", "local/base"]);
}

/// tests/mcp/node_modules, installed by `npm ci` (.ci/run). Missing is a failure, never a
/// silent pass.
fn mcp_modules() -> PathBuf {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/node_modules/@modelcontextprotocol");
    assert!(
        dir.join("server-everything/dist/index.js").exists()
            && dir.join("server-filesystem/dist/index.js").exists(),
        "the MCP test servers are not installed: run `npm ci --prefix tests/mcp` (.ci/run does) — {} is missing",
        dir.display()
    );
    dir
}

fn everything() -> String {
    mcp_modules()
        .join("server-everything/dist/index.js")
        .display()
        .to_string()
}

fn mcp_skill(s: &Setup, server: &str) {
    let file = write(
        s,
        "mcp.yaml",
        &format!(
            "skill:\n  name: local/mcp\n  description: MCP test servers\n  mcp_servers:\n{server}"
        ),
    );
    ok(&s.env, &["skill", "add", "-c", &file]);
}

fn stdio_everything() -> String {
    let js = everything();
    format!("    - name: everything\n      command: node\n      args: [{js:?}, stdio]\n")
}

/// The pid of the server-everything process running in a directory beneath `root`.
fn server_pid(root: &Path) -> Option<u32> {
    let root = std::fs::canonicalize(root).ok()?;
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?;
        (String::from_utf8_lossy(&cmd).contains("server-everything") && cwd.starts_with(&root))
            .then_some(pid)
    })
}

fn echo_and_error_round_trip(s: &Setup, server: &ProviderServer) {
    exec_actor(s, &["local/mcp"]);
    let (doc, code, id) = use_plan(s, "builtin/checklist-strategist");
    assert_eq!(code, 3, "{doc:#}");
    let requests = server.requests();
    let offered = tool_names(&requests[0].body);
    assert!(
        offered.contains(&"everything_echo".to_string()),
        "{offered:?}"
    );
    let results = requests[1].body.to_string();
    assert!(results.contains("Echo: hello over MCP"), "{results}");
    assert!(
        results.contains("Invalid resourceId"),
        "the server's tool error reaches the model: {results}"
    );
    assert!(results.contains("TOOL_FAILED"), "{results}");
    let (status, _) = run_keyed(&s.env, &["plan", "status", &id]);
    assert_eq!(status["data"]["phase"], "execute", "{status:#}");
}

fn echo_script() -> Vec<Turn> {
    vec![
        Turn::tools(
            "",
            &[
                ("everything_echo", r#"{"message": "hello over MCP"}"#),
                (
                    "everything_get-resource-reference",
                    r#"{"resourceType": "Text", "resourceId": -3}"#,
                ),
            ],
            (10, 5),
        ),
        Turn::text("Done.", (10, 5)),
    ]
}

#[test]
fn a_stdio_mcp_server_lists_its_tools_and_its_results_and_errors_reach_the_model() {
    let s = setup_with(ONE_STEP);
    mcp_skill(&s, &stdio_everything());
    let doc = ok(&s.env, &["skill", "tools", "local/mcp"]);
    let tools = doc["data"]["tools"].as_array().unwrap();
    let echo = tools
        .iter()
        .find(|t| t["name"] == "everything.echo")
        .unwrap_or_else(|| panic!("{doc:#}"));
    assert_eq!(echo["source"], "mcp");
    assert_eq!(echo["capability"]["read_only"], true, "readOnlyHint");
    assert!(tools.len() >= 5, "{doc:#}");
    // `diagnostics` starts each configured server, lists its tools and stops it.
    let (diag, _) = run_keyed(&s.env, &["diagnostics"]);
    let text = diag.to_string();
    assert!(text.contains("MCP server local/mcp/everything"), "{diag:#}");
    assert!(text.contains("starts and lists"), "{diag:#}");
    let server = ProviderServer::start(echo_script());
    scripted_env(&s, &server, "openai");
    echo_and_error_round_trip(&s, &server);
}

#[test]
fn a_stdio_mcp_server_that_dies_mid_plan_gives_a_tool_error_and_the_plan_continues() {
    let s = setup_with(ONE_STEP);
    mcp_skill(&s, &stdio_everything());
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[("everything_echo", r#"{"message": "first"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[("shell_execute", r#"{"command": "sleep 3"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[("everything_echo", r#"{"message": "second"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[(
                "write_file",
                r#"{"path": "AFTER.md", "content": "carried on\n"}"#,
            )],
            (10, 5),
        ),
        Turn::text("Done despite the server.", (10, 5)),
    ]);
    scripted_env(&s, &server, "openai");
    exec_actor(&s, &["local/mcp"]);
    let root = s.env.root().to_path_buf();
    let (doc, code, id, killed) = std::thread::scope(|scope| {
        // While the model's `sleep 3` runs, the server is killed from outside.
        let killer = scope.spawn(|| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while server.requests().len() < 2 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            let pid = server_pid(&root)?;
            std::process::Command::new("kill")
                .args(["-9", &pid.to_string()])
                .status()
                .ok()?;
            Some(pid)
        });
        let (doc, code, id) = use_plan(&s, "builtin/checklist-strategist");
        (doc, code, id, killer.join().unwrap())
    });
    assert!(killed.is_some(), "the server process was found and killed");
    assert_eq!(code, 3, "{doc:#}");
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    assert!(requests[1].body.to_string().contains("Echo: first"));
    let dead = requests[3].body.to_string();
    assert!(
        dead.contains("TOOL_FAILED") && dead.contains("MCP server everything"),
        "{dead}"
    );
    assert!(!dead.contains("Echo: second"), "{dead}");
    assert!(diff_paths(&s, &id).contains(&"AFTER.md".to_string()));
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_streamable_http_mcp_server_works_the_same() {
    let port = free_port();
    let child = std::process::Command::new("node")
        .args([everything().as_str(), "streamableHttp"])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("node starts");
    let _guard = Kill(child);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the HTTP server did not listen"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let s = setup_with(ONE_STEP);
    mcp_skill(
        &s,
        &format!("    - name: everything\n      url: http://127.0.0.1:{port}/mcp\n"),
    );
    let doc = ok(&s.env, &["skill", "tools", "local/mcp"]);
    assert!(doc.to_string().contains("everything.echo"), "{doc:#}");
    let server = ProviderServer::start(echo_script());
    scripted_env(&s, &server, "openai");
    echo_and_error_round_trip(&s, &server);
}

#[test]
fn server_filesystem_writes_land_in_the_sandbox_checkpointed_and_outside_paths_are_refused() {
    let fs_js = mcp_modules()
        .join("server-filesystem/dist/index.js")
        .display()
        .to_string();
    let s = setup_with(ONE_STEP);
    mcp_skill(
        &s,
        &format!("    - name: fs\n      command: node\n      args: [{fs_js:?}, \"{{sandbox}}\"]\n"),
    );
    let outside = s.env.root().join("outside.txt");
    let outside_args =
        json!({"path": outside.display().to_string(), "content": "escaped"}).to_string();
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[
                (
                    "fs_write_file",
                    r#"{"path": "MCP.md", "content": "written through MCP\n"}"#,
                ),
                ("fs_write_file", outside_args.as_str()),
                (
                    "fs_write_file",
                    r#"{"path": "../escape.txt", "content": "escaped"}"#,
                ),
            ],
            (10, 5),
        ),
        Turn::text("Done.", (10, 5)),
    ]);
    scripted_env(&s, &server, "openai");
    exec_actor(&s, &["local/mcp"]);
    let (doc, code, id) = use_plan(&s, "builtin/checklist-strategist");
    assert_eq!(code, 3, "{doc:#}");
    let results = server.requests()[1].body.to_string();
    assert_eq!(results.matches("PERMISSION_DENIED").count(), 2, "{results}");
    assert!(!outside.exists());
    assert!(
        !s.repo.join("MCP.md").exists(),
        "never the user's repository"
    );
    assert_eq!(diff_paths(&s, &id), ["MCP.md"]);
    let (artifacts, _) = run_keyed(&s.env, &["plan", "artifacts", &id]);
    assert!(artifacts.to_string().contains("MCP.md"), "{artifacts:#}");
    let (cps, _) = run_keyed(&s.env, &["plan", "checkpoints", &id]);
    assert!(cps.to_string().contains("tool: fs.write_file"), "{cps:#}");
}

#[test]
fn an_agent_skill_is_described_in_the_prompt_loaded_on_demand_and_its_script_runs_confined() {
    let s = setup_with(ONE_STEP);
    let dir = s.env.root().join("release-stamp");
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    let outside = s.env.root().join("outside-from-script.txt");
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: release-stamp\ndescription: Stamp a release into RELEASE.txt\n---\n# Release stamp\nRun the stamp script with the version as its argument.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("scripts/stamp.sh"),
        format!("echo \"release $1\" > RELEASE.txt\necho escaped > {} 2>/dev/null\necho '{{\"ok\": true}}'\n", outside.display()),
    )
    .unwrap();
    ok(
        &s.env,
        &["skill", "add", "--agent-skill", dir.to_str().unwrap()],
    );
    let server = ProviderServer::start(vec![
        Turn::tools(
            "",
            &[("load_skill", r#"{"name": "release-stamp"}"#)],
            (10, 5),
        ),
        Turn::tools(
            "",
            &[("release-stamp_stamp", r#"{"args": ["1.2"]}"#)],
            (10, 5),
        ),
        Turn::text("Stamped.", (10, 5)),
    ]);
    scripted_env(&s, &server, "openai");
    exec_actor(&s, &["local/release-stamp"]);
    let (doc, code, id) = use_plan(&s, "builtin/checklist-strategist");
    assert_eq!(code, 3, "{doc:#}");
    let requests = server.requests();
    let first = requests[0].body.to_string();
    assert!(first.contains("<available_agent_skills>"), "{first}");
    assert!(
        first.contains("Stamp a release into RELEASE.txt"),
        "{first}"
    );
    assert!(
        !first.contains("Run the stamp script"),
        "the body loads on demand only"
    );
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("Run the stamp script")
    );
    assert_eq!(diff_paths(&s, &id), ["RELEASE.txt"]);
    assert!(!outside.exists(), "the script is confined to the sandbox");
}

#[test]
fn the_tool_and_skill_examples_register_as_documented() {
    let s = setup_with(ONE_STEP);
    let ex = |rel: &str| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(rel)
            .display()
            .to_string()
    };
    for t in [
        "tools/count-lines.yaml",
        "tools/changelog-entry.yaml",
        "tools/github-issue.yaml",
    ] {
        ok(&s.env, &["tool", "add", "-c", &ex(t)]);
    }
    let shown = ok(&s.env, &["tool", "show", "local/changelog-entry"]);
    assert_eq!(
        shown["data"]["tool"]["resources"][0]["binding"],
        "contextual"
    );
    ok(
        &s.env,
        &["skill", "add", "-c", &ex("skills/filesystem-mcp.yaml")],
    );
    let doc = ok(
        &s.env,
        &["skill", "add", "-c", &ex("skills/project-tools.yaml")],
    );
    let tools = doc["data"]["skill"]["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for n in [
        "search_files",
        "local/count-lines",
        "local/changelog-entry",
        "todo-count",
    ] {
        assert!(names.contains(&n), "{n} in {names:?}");
    }
    let servers = &doc["data"]["skill"]["mcp_servers"];
    assert_eq!(servers[0]["name"], "fs", "{doc:#}");
    let doc = ok(
        &s.env,
        &["skill", "add", "--agent-skill", &ex("skills/release-notes")],
    );
    assert_eq!(doc["data"]["skill"]["name"], "local/release-notes");
    assert!(doc.to_string().contains("release-notes.render"), "{doc:#}");
}
