//! Property tests: the action, actor and profile YAML loaders and the tools' argument
//! validation return an error (or succeed) for any input; they never panic, and a refused
//! file leaves the registry as it was.

use std::path::Path;

use cleveragents_engine::config::Config;
use cleveragents_engine::registry::{actions, actors, profiles};
use cleveragents_engine::store::Store;
use proptest::prelude::*;
use serde_json::{Map, Value};

const ACTION: &str = include_str!("../../examples/license-header.yaml");
const BUMP: &str = include_str!("../../examples/bump-dependency.yaml");
const ACTOR: &str = "name: local/reviewer\nmodel: openai/gpt-4.1\ndescription: Reviews\nsystem-prompt: |\n  Review.\nskills: [git_operations]\noptions:\n  temperature: 0.2\nlimits:\n  max-turns: 20\n";
const PROFILE: &str = "name: local/careful\ndescription: Careful\nflags:\n  auto_strategize: true\n  auto_execute: false\n  auto_apply: false\n  auto_decisions_strategize: true\n  auto_decisions_execute: false\n  auto_validation_fix: false\n  auto_strategy_revision: false\n  auto_child_plans: false\n  auto_retry_transient: true\n  auto_checkpoint_restore: false\n  require_sandbox: true\n  require_checkpoints: true\n  allow_unsafe_tools: false\n";

/// Keys the loaders know, so that generated documents reach past "unknown field".
const KEYS: &[&str] = &[
    "name",
    "description",
    "definition-of-done",
    "strategy-actor",
    "execution-actor",
    "arguments",
    "script",
    "run",
    "tool",
    "args",
    "spawn",
    "action",
    "depends-on",
    "parallel-group",
    "sandbox",
    "network",
    "writable-paths",
    "env",
    "type",
    "required",
    "default",
    "invariants",
    "model",
    "system-prompt",
    "skills",
    "options",
    "limits",
    "flags",
    "auto_strategize",
    "auto_execute",
    "auto_apply",
    "require_sandbox",
    "allow_unsafe_tools",
    "reusable",
    "read-only",
    "max-turns",
];

fn yaml_value() -> impl Strategy<Value = serde_yaml::Value> {
    let leaf = prop_oneof![
        Just(serde_yaml::Value::Null),
        any::<bool>().prop_map(serde_yaml::Value::Bool),
        any::<i64>().prop_map(|n| serde_yaml::Value::Number(n.into())),
        "[ -~]{0,12}".prop_map(serde_yaml::Value::String),
        "\\{\\{ ?[a-z]{0,6} ?(\\| ?[a-z]{0,6})? ?\\}\\}".prop_map(serde_yaml::Value::String),
        prop::sample::select(KEYS).prop_map(|k| serde_yaml::Value::String(k.into())),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(serde_yaml::Value::Sequence),
            prop::collection::vec((prop::sample::select(KEYS), inner), 0..7).prop_map(|kv| {
                serde_yaml::Value::Mapping(
                    kv.into_iter()
                        .map(|(k, v)| (serde_yaml::Value::String(k.into()), v))
                        .collect(),
                )
            }),
        ]
    })
}

/// A valid file with random edits: bytes deleted, inserted or replaced, lines swapped.
fn mutated(base: &'static str) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        (0usize..4, any::<usize>(), any::<usize>(), any::<u8>()),
        1..6,
    )
    .prop_map(move |edits| {
        let mut b = base.as_bytes().to_vec();
        for (kind, at, len, byte) in edits {
            if b.is_empty() {
                break;
            }
            let at = at % b.len();
            match kind {
                0 => {
                    let end = (at + len % 40).min(b.len());
                    b.drain(at..end);
                }
                1 => b.insert(at, byte),
                2 => b[at] = byte,
                _ => {
                    let mut lines: Vec<Vec<u8>> =
                        b.split(|c| *c == b'\n').map(<[u8]>::to_vec).collect();
                    let n = lines.len();
                    lines.swap(at % n, len % n);
                    b = lines.join(&b'\n');
                }
            }
        }
        b
    })
}

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    file: std::path::PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("db.sqlite")).unwrap();
    let file = dir.path().join("input.yaml");
    Fixture {
        _dir: dir,
        store,
        file,
    }
}

fn providers() -> Vec<cleveragents_engine::config::Provider> {
    Config::load(Path::new("/nonexistent/config.toml"))
        .unwrap()
        .providers()
}

/// Each loader on `bytes`: whatever the outcome, no panic; a refusal saves nothing.
fn load_all(f: &mut Fixture, bytes: &[u8]) {
    std::fs::write(&f.file, bytes).unwrap();
    let p = providers();
    let before = f.store.actions().unwrap().len();
    let req = actions::CreateRequest {
        config: f.file.clone(),
        available: true,
        ..Default::default()
    };
    if actions::create(&mut f.store, &p, &req).is_err() {
        assert_eq!(
            f.store.actions().unwrap().len(),
            before,
            "refused but saved"
        );
    }
    let before = f.store.actors().unwrap().len();
    if actors::add(&mut f.store, &p, &f.file, None, &Default::default(), true).is_err() {
        assert_eq!(f.store.actors().unwrap().len(), before, "refused but saved");
    }
    let names: Vec<String> = p.iter().map(|x| x.name.clone()).collect();
    let _ = profiles::add(&mut f.store, &f.file, None, true, &names);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn loaders_never_panic_on_generated_documents(doc in yaml_value()) {
        let mut f = fixture();
        let text = serde_yaml::to_string(&doc).unwrap();
        load_all(&mut f, text.as_bytes());
    }

    #[test]
    fn loaders_never_panic_on_edited_valid_files(
        a in mutated(ACTION), b in mutated(BUMP), c in mutated(ACTOR), d in mutated(PROFILE)
    ) {
        let mut f = fixture();
        for bytes in [a, b, c, d] {
            load_all(&mut f, &bytes);
        }
    }

    #[test]
    fn tool_argument_validation_never_panics(
        tool in 0usize..64,
        fields in prop::collection::vec(("[a-z_]{1,12}", yaml_value()), 0..5),
        known in prop::collection::vec(yaml_value(), 0..5),
    ) {
        let tools = cleveragents_engine::tools::builtins();
        let tool = &tools[tool % tools.len()];
        let schema = tool.input_schema();
        let props: Vec<String> = schema["properties"]
            .as_object()
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default();
        let mut args = Map::new();
        for (k, v) in fields {
            args.insert(k, serde_json::to_value(v).unwrap_or(Value::Null));
        }
        // Known field names with random values reach the type and range checks.
        for (name, v) in props.iter().zip(known) {
            args.insert(name.clone(), serde_json::to_value(v).unwrap_or(Value::Null));
        }
        let result = cleveragents_engine::tools::validate(tool.as_ref(), &Value::Object(args));
        if let Err(e) = result {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn the_unmodified_inputs_are_accepted_so_the_properties_exercise_real_loaders() {
    let mut f = fixture();
    let p = providers();
    for text in [ACTION, BUMP] {
        std::fs::write(&f.file, text).unwrap();
        let req = actions::CreateRequest {
            config: f.file.clone(),
            available: true,
            ..Default::default()
        };
        actions::create(&mut f.store, &p, &req).unwrap();
    }
    std::fs::write(&f.file, ACTOR).unwrap();
    actors::add(&mut f.store, &p, &f.file, None, &Default::default(), false).unwrap();
    std::fs::write(&f.file, PROFILE).unwrap();
    let names: Vec<String> = p.iter().map(|x| x.name.clone()).collect();
    profiles::add(&mut f.store, &f.file, None, false, &names).unwrap();
}
