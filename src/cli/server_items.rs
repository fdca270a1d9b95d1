//! Server items in local plans (spec section 21, "Client-only vs server mode"; item names,
//! `SERVER:namespace/item`): a server-qualified action such as `dev:acme/review` given to
//! `plan use` on this machine is fetched from `[servers.dev]` with its version, registered
//! here under its server-qualified name and remembered in
//! `<data dir>/server-cache/<server>.json`; when the server cannot be reached, the copy
//! registered at the last fetch is used and the report says so.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::{CliError, Context, remote};
use crate::output::Level;
use cleveragents_engine::api::{self, definition_views::CreateRequest};
use cleveragents_engine::domain::QualifiedName;

/// What a server's cache file remembers of one fetched item.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Cached {
    /// The item's version on the server when it was fetched.
    version: u32,
    /// When it was fetched (RFC 3339).
    fetched_at: String,
}

/// One server's cache file: the fetched actions by their name on the server.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct CacheFile {
    #[serde(default)]
    actions: BTreeMap<String, Cached>,
}

fn cache_path(ctx: &Context, server: &str) -> PathBuf {
    ctx.paths
        .data_dir
        .join("server-cache")
        .join(format!("{server}.json"))
}

fn read_cache(path: &Path) -> CacheFile {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

/// Writes the cache file whole or not at all: a temporary file beside it, then a rename.
fn write_cache(path: &Path, cache: &CacheFile) -> Result<(), CliError> {
    let io = |e: std::io::Error| {
        CliError::new("IO_ERROR", format!("server cache {}: {e}", path.display()))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = path.with_extension(format!("json.tmp-{}", std::process::id()));
    let text = serde_json::to_vec_pretty(cache).expect("the cache serializes");
    std::fs::write(&tmp, text).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io(e)
    })
}

/// Object keys as an action file spells them (`writable-paths`), at every depth of `v`.
fn kebab_keys(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k.replace('_', "-"), kebab_keys(v)))
                .collect(),
        ),
        other => other,
    }
}

/// The action file (JSON, which YAML reads) that registers `detail`'s action here as `name`.
fn action_file(detail: &api::definition_views::ActionDetail, name: &str) -> String {
    let a = &detail.action;
    let mut f = Map::new();
    f.insert("name".into(), json!(name));
    f.insert("definition-of-done".into(), json!(a.definition_of_done));
    f.insert("strategy-actor".into(), json!(a.strategy_actor));
    f.insert("execution-actor".into(), json!(a.execution_actor));
    f.insert("reusable".into(), json!(a.reusable));
    f.insert("read-only".into(), json!(a.read_only));
    let optional = [
        ("description", &a.description),
        ("long-description", &a.long_description),
        ("estimation-actor", &a.estimation_actor),
        ("invariant-actor", &a.invariant_actor),
        ("automation-profile", &a.automation_profile),
    ];
    for (key, value) in optional {
        if let Some(v) = value {
            f.insert(key.into(), json!(v));
        }
    }
    let invariants: Vec<&str> = detail.invariants.iter().map(|i| i.text.as_str()).collect();
    f.insert("invariants".into(), json!(invariants));
    f.insert("arguments".into(), json!(a.arguments));
    if let Some(script) = &a.script {
        // Steps read their two-word keys in either spelling; the tool arguments inside them
        // keep theirs.
        f.insert("script".into(), json!(script));
    }
    if let Some(sandbox) = &a.sandbox {
        f.insert("sandbox".into(), kebab_keys(json!(sandbox)));
    }
    serde_json::to_string_pretty(&Value::Object(f)).expect("the action file serializes")
}

/// Makes the server-qualified action `given` usable by a local `plan use`: fetched from its
/// server (registered or replaced here when the server's version differs from the cached
/// one), or, with the server unreachable, the copy cached at the last fetch. Returns the
/// message the report carries; `None` when `given` names no server or the command already
/// runs through one.
///
/// # Errors
/// `INVALID_INPUT` for a server not in `[servers]`; `IO_ERROR` for an unreachable server
/// with no cached copy; the server's and the registry's errors otherwise.
pub fn fetch_action(ctx: &Context, given: &str) -> Result<Option<(Level, String)>, CliError> {
    if ctx.server.is_some() {
        return Ok(None);
    }
    let Ok(qualified) = QualifiedName::parse(given) else {
        return Ok(None);
    };
    let Some(server) = qualified.server.clone() else {
        return Ok(None);
    };
    let config = ctx.config()?;
    if !config.file.servers.contains_key(&server) {
        return Err(CliError::invalid_input(format!(
            "{given}: no server named `{server}` in [servers] of {}",
            ctx.paths.config_path.display()
        ))
        .hint(format!("agents server login {server} URL --token-stdin")));
    }
    let on_server = QualifiedName {
        server: None,
        ..qualified.clone()
    }
    .to_string();
    let local_name = qualified.to_string();
    let path = cache_path(ctx, &server);
    let mut cache = read_cache(&path);
    let choice = remote::choose(ctx, &server)?;
    let detail = match choice.client()?.action(&on_server) {
        Ok(d) => d,
        Err(api::ApiError::Unreachable { reason, .. }) => {
            return offline(
                ctx,
                &server,
                &reason,
                &local_name,
                cache.actions.get(&on_server),
            );
        }
        Err(e) => {
            let mut e: CliError = e.into();
            e.body.message = format!("server {server}: {}", e.body.message);
            return Err(e);
        }
    };
    let version = detail.action.version;
    let local = ctx.registry_engine();
    let local_client: &dyn api::Client = &local;
    let registered = local_client.action(&local_name).is_ok();
    let current = registered
        && cache
            .actions
            .get(&on_server)
            .is_some_and(|c| c.version == version);
    if !current {
        register(ctx, &server, &detail, &local_name, &path, registered)?;
    }
    let fetched_at = jiff::Timestamp::now().to_string();
    cache.actions.insert(
        on_server,
        Cached {
            version,
            fetched_at,
        },
    );
    write_cache(&path, &cache)?;
    Ok(Some((
        Level::Info,
        format!("fetched {local_name} version {version} from {server}"),
    )))
}

/// With `server` unreachable: the copy of `local_name` cached at its last fetch.
fn offline(
    ctx: &Context,
    server: &str,
    reason: &str,
    local_name: &str,
    cached: Option<&Cached>,
) -> Result<Option<(Level, String)>, CliError> {
    let local = ctx.registry_engine();
    let local: &dyn api::Client = &local;
    match (cached, local.action(local_name)) {
        (Some(c), Ok(_)) => Ok(Some((
            Level::Warn,
            format!(
                "server {server} unreachable: using the cached copy of {local_name} (version {}, fetched at {})",
                c.version, c.fetched_at
            ),
        ))),
        _ => Err(CliError::new(
            "IO_ERROR",
            format!(
                "server {server} unreachable ({reason}) and no cached copy of {local_name} exists"
            ),
        )
        .hint(format!("agents server status {server}"))),
    }
}

/// Registers (or, when `replace`, replaces) `detail`'s action here as `local_name`, available;
/// `path`, the server's cache file, names where its definition came from.
fn register(
    ctx: &Context,
    server: &str,
    detail: &api::definition_views::ActionDetail,
    local_name: &str,
    path: &Path,
    replace: bool,
) -> Result<(), CliError> {
    let req = CreateRequest {
        config: path.to_path_buf(),
        config_text: Some(action_file(detail, local_name)),
        name: None,
        strategy_actor: None,
        execution_actor: None,
        estimation_actor: None,
        invariant_actor: None,
        definition_of_done: None,
        description: None,
        long_description: None,
        automation_profile: None,
        reusable: None,
        read_only: None,
        available: true,
        invariants: Vec::new(),
        args: Vec::new(),
        update: replace,
    };
    ctx.change(api::CreateAction(req)).map_err(|e| {
        let mut e: CliError = e.into();
        e.body.message = format!(
            "{local_name} from server {server} cannot be registered here: {}",
            e.body.message
        );
        e
    })?;
    Ok(())
}
