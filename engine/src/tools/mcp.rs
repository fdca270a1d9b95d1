//! The MCP client (spec section 18 "MCP Integration Details"), built on `rmcp`, the official
//! Rust SDK, client side only.
//!
//! - A stdio server is started through [`super::command::spawn_confined`] (the confined
//!   launcher, with interactive pipes) with the sandbox as its working directory; it may read
//!   its own code (the `node_modules` tree, or the folder, of an absolute program or argument
//!   path, also inside a shell line argument, and the spec's `readable`), only the environment its spec names (values `${NAME}` read from
//!   the user's environment at start, never stored) plus `PATH`, `LANG` and a per-plan
//!   `HOME`, and the plan's network rule. `{sandbox}` in its arguments is the sandbox path.
//! - A Streamable HTTP server is reached at its URL with its headers and a bearer token read
//!   from the environment variable `token_env`.
//! - At connect the tools are listed and kept with the server's name and version; each is
//!   offered as `<server>.<tool>` with a capability from its annotations ([`capability_of`]).
//! - A call has a timeout (default 60 s); a timeout, a dead server or a protocol error is a
//!   [`ToolError`] for the model, never a failure of the plan.
//! - Servers live as long as their [`McpPool`]. A plan's pool ([`plan_pool`]) is opened with
//!   its Execute run ([`PlanServers`]): a server starts at the first step that offers its
//!   tools, every later step reuses it, and it is stopped when the run ends (the plan
//!   finishes Execute, pauses for a human, fails or is cancelled). A server found dead when
//!   a step starts is started again. `skill tools`, `diagnostics` and `actor run` use a pool
//!   of their own, stopped when it is dropped.
//!
//! The pool runs its own small tokio runtime, so synchronous callers (the tool runner inside
//! the model loop) can wait for a call without blocking the loop's runtime.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use rmcp::model::{CallToolRequest, CallToolRequestParams, ClientRequest, ProgressToken, ServerResult};
use rmcp::service::{Peer, PeerRequestOptions, RoleClient, RunningService, ServiceExt};
use serde::Serialize;
use serde_json::{Value, json};

use super::ToolError;
use super::command::{Launch, spawn_confined};
use super::custom::{McpServerSpec, ToolCapability};
use crate::domain::Id;
use crate::domain::messages::ToolImage;
use crate::sandbox::launcher::{Io, Limits, Running};
use crate::sandbox::overlay::MountGuard;

/// Default seconds an MCP call may take.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// Seconds a server has to start and answer `initialize` and `tools/list`.
pub const CONNECT_TIMEOUT_SECS: u64 = 30;
/// Argument names treated as paths when a server spec does not say.
pub const PATH_ARGUMENTS: [&str; 4] = ["path", "paths", "source", "destination"];

/// A tool a server offers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpTool {
    /// The server's name in the skill.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// `<server>.<tool>`, as offered to models.
    pub qualified: String,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its annotations, as sent.
    pub annotations: Option<Value>,
    /// Capability from the annotations and the spec's overrides.
    pub capability: ToolCapability,
}

/// The capability of an MCP tool from its annotations (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`): read-only only with `readOnlyHint: true`, so an
/// unannotated tool counts as writing; open-world tools have the side effect `open_world` and
/// need approval under every profile but `full-auto`.
pub fn capability_of(annotations: Option<&Value>) -> ToolCapability {
    let hint = |k: &str| annotations.and_then(|a| a.get(k)).and_then(Value::as_bool);
    let read_only = hint("readOnlyHint") == Some(true);
    let open_world = !read_only && hint("openWorldHint") == Some(true);
    let mut cap = ToolCapability {
        read_only,
        writes: !read_only,
        idempotent: read_only || hint("idempotentHint") == Some(true),
        checkpointable: !open_world,
        checkpoint_scope: (!read_only).then(|| "snapshot".to_string()),
        open_world,
        ..ToolCapability::default()
    };
    if !read_only && hint("destructiveHint") != Some(false) {
        cap.side_effects.push("destructive".into());
    }
    if open_world {
        cap.side_effects.push("open_world".into());
    }
    cap
}

/// Applies a spec's flat `overrides` entry for `tool`, if any.
///
/// # Errors
/// An override field that is not capability metadata.
pub fn overridden(
    spec: &McpServerSpec,
    tool: &str,
    cap: ToolCapability,
) -> Result<ToolCapability, String> {
    let Some(o) = spec
        .overrides
        .iter()
        .find(|o| o.get("tool").and_then(Value::as_str) == Some(tool))
    else {
        return Ok(cap);
    };
    let mut fields = o.as_object().cloned().unwrap_or_default();
    fields.remove("tool");
    if let Some(Value::Object(c)) = fields.remove("capability") {
        fields.extend(c);
    }
    cap.merged(&Value::Object(fields))
        .map_err(|e| format!("mcp_servers.{}.overrides ({tool}): {e}", spec.name))
}

/// Where a stdio server runs and what it may touch.
#[derive(Debug, Clone, Default)]
pub struct Placement {
    /// Working directory: the sandbox's work tree (or a scratch directory outside a plan).
    pub cwd: PathBuf,
    /// Directories it may write beneath.
    pub writable: Vec<PathBuf>,
    /// Base environment (`PATH`, `LANG`, per-plan `HOME` ...).
    pub env: Vec<(String, String)>,
    /// Paths never readable besides the built-in deny-list (the action's `deny-read`).
    pub deny: Vec<String>,
    /// Resource limits (the action's).
    pub limits: Limits,
    /// TCP allowed (the plan's network rule).
    pub network: bool,
    /// Start it unconfined where the kernel cannot confine it.
    pub allow_unconfined: bool,
    /// Where a stdio server's stderr goes (`<dir>/mcp-<name>.log`); dropped when `None`.
    pub log_dir: Option<PathBuf>,
    /// Keeps the sandbox's overlay mounted while a stdio server placed there runs (nothing
    /// for a full checkout). A server copies this process's mounts when it starts and keeps
    /// that copy: it must start with the mount in place, and the mount must stay the one the
    /// plan's steps read and write through, not be replaced by a fresh one between steps.
    pub mounted: MountGuard,
}

struct Conn {
    spec: McpServerSpec,
    peer: Peer<RoleClient>,
    service: Option<RunningService<RoleClient, Client>>,
    /// A stdio server's process tree (dropping it kills the tree).
    running: Option<Running>,
    version: Option<String>,
    tools: Vec<McpTool>,
    /// Set when the server said its tool list changed since [`Self::tools`] was listed.
    tools_changed: Arc<AtomicBool>,
    progress: Progressing,
    cwd: PathBuf,
    /// The placement's mount, held as long as the server runs ([`Placement::mounted`]).
    _mounted: MountGuard,
}

impl Conn {
    /// Whether the server still answers: its connection is open and (stdio) its process runs.
    fn alive(&self) -> bool {
        !self.peer.is_transport_closed() && self.running.as_ref().is_none_or(Running::is_running)
    }
}

/// Connected MCP servers, by name.
pub struct McpPool {
    rt: tokio::runtime::Runtime,
    conns: Mutex<HashMap<String, Conn>>,
}

fn expand_env(value: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`{value}` has an unclosed ${{"))?;
        let name = &after[..end];
        let v = std::env::var(name).map_err(|_| {
            format!("environment variable {name} is not set (it is read when the server starts and never stored)")
        })?;
        out.push_str(&v);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The text of a call result: every content block in order, one per line (text as it is,
/// a `resource_link` as its URI, name, type and description, an embedded text resource with
/// its text, and image, audio and binary blocks named with their type and size, as in
/// `[image image/png, 1.2 KB]`), else the structured content, else the content as JSON.
fn result_text(result: &Value) -> Value {
    let blocks: Vec<String> = result["content"]
        .as_array()
        .map(|c| c.iter().filter_map(block_text).collect())
        .unwrap_or_default();
    if !blocks.is_empty() {
        return Value::String(blocks.join("\n"));
    }
    if let Some(s) = result.get("structuredContent") {
        return s.clone();
    }
    result["content"].clone()
}

/// One content block as text for the model; `None` for a block with nothing to say.
fn block_text(b: &Value) -> Option<String> {
    let field = |k: &str| b[k].as_str().filter(|s| !s.is_empty());
    match b["type"].as_str()? {
        "text" => field("text").map(str::to_string),
        "resource_link" => {
            let mut line = format!("[resource link {}", field("uri")?);
            if let Some(name) = field("name") {
                line.push_str(&format!(" \"{name}\""));
            }
            if let Some(mime) = field("mimeType") {
                line.push_str(&format!(", {mime}"));
            }
            line.push(']');
            if let Some(d) = field("description") {
                line.push_str(&format!(" {d}"));
            }
            Some(line)
        }
        kind @ ("image" | "audio") => Some(format!(
            "[{kind} {}, {}]",
            field("mimeType").unwrap_or("of unknown type"),
            human_size(base64_len(field("data").unwrap_or_default()))
        )),
        "resource" => {
            let r = &b["resource"];
            let uri = r["uri"].as_str().unwrap_or("(no uri)");
            let mime = r["mimeType"].as_str().unwrap_or("of unknown type");
            match (r["text"].as_str(), r["blob"].as_str()) {
                (Some(text), _) => Some(format!("[resource {uri}, {mime}]\n{text}")),
                (None, Some(blob)) => Some(format!(
                    "[resource {uri}, {mime}, {}]",
                    human_size(base64_len(blob))
                )),
                (None, None) => Some(format!("[resource {uri}, {mime}]")),
            }
        }
        other => Some(format!("[{other} content]")),
    }
}

/// The largest image, decoded, passed to the model as an image; a larger one is only named
/// in the result's text (with its size).
pub const MAX_IMAGE_BYTES: usize = 1024 * 1024;

/// The `image` blocks of a call result that a model can take: each with a MIME type and at
/// most [`MAX_IMAGE_BYTES`] decoded (the text names every image, these included).
fn result_images(result: &Value) -> Vec<ToolImage> {
    result["content"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter(|b| b["type"] == "image")
                .filter_map(|b| {
                    let mime = b["mimeType"].as_str().filter(|m| !m.is_empty())?;
                    let data = b["data"].as_str().filter(|d| !d.is_empty())?;
                    let data: String = data.chars().filter(|c| !c.is_ascii_whitespace()).collect();
                    // A provider refuses a request whose image is not base64.
                    let base64 = data
                        .bytes()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'+' | b'/' | b'='));
                    (base64 && base64_len(&data) <= MAX_IMAGE_BYTES).then(|| ToolImage {
                        mime_type: mime.to_string(),
                        data,
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The decoded length of base64 `data`.
fn base64_len(data: &str) -> usize {
    let trimmed = data.trim_end_matches('=');
    let n = trimmed.bytes().filter(|b| !b.is_ascii_whitespace()).count();
    n * 3 / 4
}

/// `512 B`, `1.2 KB`, `3.4 MB` (binary units).
fn human_size(bytes: usize) -> String {
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    if bytes < 1024 {
        format!("{bytes} B")
    } else if b < 1024.0 * 1024.0 {
        format!("{:.1} KB", b / 1024.0)
    } else {
        format!("{:.1} MB", b / (1024.0 * 1024.0))
    }
}

/// One `notifications/progress` of a tool call: how far it is, of what total, and what it
/// is doing.
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    /// The progress so far (it increases with each notification).
    pub progress: f64,
    /// The total, when the server knows it.
    pub total: Option<f64>,
    /// What the server says it is doing.
    pub message: Option<String>,
}

/// Where a call's progress notifications go.
pub type ProgressSink = Arc<dyn Fn(McpProgress) + Send + Sync>;

/// The calls in flight that want their progress, by the progress token their request carries.
type Progressing = Arc<Mutex<HashMap<ProgressToken, ProgressSink>>>;

/// The client side of a connection: it introduces itself as this product in `initialize`,
/// marks the server's tool list stale when the server sends
/// `notifications/tools/list_changed`, so that the next use lists the tools again, and hands
/// each `notifications/progress` to the call whose progress token it names.
#[derive(Clone, Default)]
struct Client {
    tools_changed: Arc<AtomicBool>,
    progress: Progressing,
}

impl rmcp::ClientHandler for Client {
    fn get_info(&self) -> rmcp::model::ClientConfig {
        rmcp::model::ClientConfig::new(
            rmcp::model::ClientCapabilities::default(),
            rmcp::model::Implementation::new("cleveragents", env!("CARGO_PKG_VERSION")),
        )
    }

    fn on_tool_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        self.tools_changed.store(true, Ordering::SeqCst);
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: rmcp::model::ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) -> impl std::future::Future<Output = ()> + Send + '_ {
        let sink = self
            .progress
            .lock()
            .expect("progress lock")
            .get(&params.progress_token)
            .cloned();
        if let Some(sink) = sink {
            sink(McpProgress {
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
        std::future::ready(())
    }
}

impl McpPool {
    /// An empty pool with its runtime.
    ///
    /// # Errors
    /// The runtime cannot start.
    pub fn new() -> Result<Self, String> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("mcp-client")
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the MCP client runtime: {e}"))?;
        Ok(Self {
            rt,
            conns: Mutex::new(HashMap::new()),
        })
    }

    /// Runs a future on the pool's runtime from any thread and waits for it.
    fn wait<F>(&self, f: F) -> F::Output
    where
        F: std::future::Future + Send + 'static,
        F::Output: Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        self.rt.spawn(async move {
            let _ = tx.send(f.await);
        });
        rx.recv().expect("the MCP runtime answers every request")
    }

    /// Starts (stdio) or reaches (HTTP) a server, initializes it and lists its tools.
    /// Connecting a name already connected returns its tools.
    ///
    /// # Errors
    /// A message naming the server: it cannot start, does not answer, or its tools cannot be
    /// listed.
    pub fn connect(&self, spec: &McpServerSpec, place: &Placement) -> Result<Vec<McpTool>, String> {
        let dead = {
            let conns = self.conns.lock().expect("mcp lock");
            match conns.get(&spec.name) {
                Some(c) if c.alive() && !c.tools_changed.load(Ordering::SeqCst) => {
                    return Ok(c.tools.clone());
                }
                Some(c) if c.alive() => {
                    // The server said its tools changed: list them again.
                    c.tools_changed.store(false, Ordering::SeqCst);
                    let peer = c.peer.clone();
                    drop(conns);
                    let tools = self.list_tools(spec, peer)?;
                    if let Some(c) = self.conns.lock().expect("mcp lock").get_mut(&spec.name) {
                        c.tools = tools.clone();
                    }
                    return Ok(tools);
                }
                Some(_) => true,
                None => false,
            }
        };
        if dead {
            // It died (or was killed) since it was started: start it again.
            let old = self.conns.lock().expect("mcp lock").remove(&spec.name);
            if let Some(mut c) = old {
                tracing::info!(server = %spec.name, "MCP server found stopped; starting it again");
                self.stop_conn(&mut c);
            }
        }
        spec.check()
            .map_err(|e| format!("MCP server {}: {e}", spec.name))?;
        let name = spec.name.clone();
        let timeout = Duration::from_secs(CONNECT_TIMEOUT_SECS);
        let client = Client::default();
        let tools_changed = Arc::clone(&client.tools_changed);
        let progress = Arc::clone(&client.progress);
        let (service, running) = if let Some(url) = &spec.url {
            (self.open_http(spec, url, (client, timeout))?, None)
        } else {
            let (service, running) = self.open_stdio(spec, place, (client, timeout))?;
            (service, Some(running))
        };
        let peer = service.peer().clone();
        let version = service.peer_info().and_then(|i| {
            serde_json::to_value(&*i)
                .ok()
                .and_then(|v| v["serverInfo"]["version"].as_str().map(str::to_string))
        });
        let mut conn = Conn {
            spec: spec.clone(),
            peer: peer.clone(),
            service: Some(service),
            running,
            version,
            tools: Vec::new(),
            tools_changed,
            progress,
            cwd: place.cwd.clone(),
            _mounted: place.mounted.clone(),
        };
        // A change notified before this first listing is in it.
        conn.tools_changed.store(false, Ordering::SeqCst);
        let tools = match self.list_tools(spec, peer) {
            Ok(t) => t,
            Err(e) => {
                self.stop_conn(&mut conn);
                return Err(e);
            }
        };
        conn.tools = tools.clone();
        self.conns.lock().expect("mcp lock").insert(name, conn);
        Ok(tools)
    }

    /// Lists a connected server's tools, each with its capability.
    ///
    /// # Errors
    /// A message naming the server: it does not answer in time, or refuses.
    fn list_tools(&self, spec: &McpServerSpec, peer: Peer<RoleClient>) -> Result<Vec<McpTool>, String> {
        let timeout = Duration::from_secs(CONNECT_TIMEOUT_SECS);
        let name = spec.name.clone();
        let n = name.clone();
        let listed = self.wait(async move {
            tokio::time::timeout(timeout, peer.list_all_tools())
                .await
                .map_err(|_| {
                    format!(
                        "MCP server {n} did not list its tools within {} s",
                        timeout.as_secs()
                    )
                })?
                .map_err(|e| format!("MCP server {n} could not list its tools: {e}"))
        })?;
        let mut tools = Vec::new();
        for t in listed {
            let v = serde_json::to_value(&t).unwrap_or(Value::Null);
            let annotations = v.get("annotations").cloned();
            let tool = t.name.to_string();
            let capability = overridden(spec, &tool, capability_of(annotations.as_ref()))?;
            tools.push(McpTool {
                qualified: format!("{name}.{tool}"),
                server: name.clone(),
                description: t.description.as_deref().unwrap_or_default().to_string(),
                input_schema: Value::Object((*t.input_schema).clone()),
                annotations,
                capability,
                tool,
            });
        }
        Ok(tools)
    }

    /// Reaches a Streamable HTTP server and initializes the session.
    fn open_http(
        &self,
        spec: &McpServerSpec,
        url: &str,
        (client, timeout): (Client, Duration),
    ) -> Result<RunningService<RoleClient, Client>, String> {
        let name = spec.name.clone();
        let url = url.to_string();
        let mut config =
            rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig::with_uri(
                url,
            );
        if let Some(var) = &spec.token_env {
            let token = std::env::var(var)
                .map_err(|_| format!("MCP server {name}: token_env {var} is not set"))?;
            config = config.auth_header(token);
        }
        let mut headers = HashMap::new();
        for (k, v) in &spec.headers {
            let v = expand_env(v).map_err(|e| format!("MCP server {name}: headers.{k}: {e}"))?;
            let k: reqwest::header::HeaderName = k
                .parse()
                .map_err(|e| format!("MCP server {name}: header `{k}`: {e}"))?;
            let v: reqwest::header::HeaderValue = v
                .parse()
                .map_err(|e| format!("MCP server {name}: header value: {e}"))?;
            headers.insert(k, v);
        }
        if !headers.is_empty() {
            config = config.custom_headers(headers);
        }
        let n = name.clone();
        self.wait(async move {
            let transport = rmcp::transport::StreamableHttpClientTransport::from_config(config);
            tokio::time::timeout(timeout, client.serve(transport))
                .await
                .map_err(|_| {
                    format!(
                        "MCP server {n} did not answer within {} s",
                        timeout.as_secs()
                    )
                })?
                .map_err(|e| format!("MCP server {n}: {e}"))
        })
    }

    /// Starts a stdio server through the confined launcher and initializes the session; its
    /// stderr is appended to `mcp-<name>.log` in the placement's log directory.
    fn open_stdio(
        &self,
        spec: &McpServerSpec,
        place: &Placement,
        (client, timeout): (Client, Duration),
    ) -> Result<(RunningService<RoleClient, Client>, Running), String> {
        let name = spec.name.clone();
        let launch = self.launch(spec, place)?;
        let mut running = spawn_confined(&launch, Io::Interactive)
            .map_err(|e| format!("MCP server {name}: {e}"))?;
        let (stdin, stdout, stderr) = running
            .take_pipes()
            .ok_or_else(|| format!("MCP server {name}: its pipes are missing"))?;
        let log = place
            .log_dir
            .as_ref()
            .map(|d| d.join(format!("mcp-{name}.log")));
        std::thread::spawn(move || {
            let mut stderr = stderr;
            let file = log.and_then(|l| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(l)
                    .ok()
            });
            match file {
                Some(mut f) => {
                    let _ = std::io::copy(&mut stderr, &mut f);
                }
                None => {
                    let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                }
            }
        });
        let n = name.clone();
        let started = self.wait(async move {
            let stdout = tokio::process::ChildStdout::from_std(stdout)
                .map_err(|e| format!("MCP server {n}: {e}"))?;
            let stdin = tokio::process::ChildStdin::from_std(stdin)
                .map_err(|e| format!("MCP server {n}: {e}"))?;
            tokio::time::timeout(timeout, client.serve((stdout, stdin)))
                .await
                .map_err(|_| {
                    format!(
                        "MCP server {n} did not answer initialize within {} s",
                        timeout.as_secs()
                    )
                })?
                .map_err(|e| format!("MCP server {n} did not initialize: {e}"))
        });
        match started {
            Ok(s) => Ok((s, running)),
            Err(e) => {
                drop(running);
                Err(e)
            }
        }
    }

    fn launch(&self, spec: &McpServerSpec, place: &Placement) -> Result<Launch, String> {
        let name = &spec.name;
        let line = spec.command.as_deref().unwrap_or_default();
        let mut argv = if spec.args.is_empty() {
            shell_words::split(line).map_err(|e| format!("MCP server {name}: command: {e}"))?
        } else {
            let mut v = vec![line.to_string()];
            v.extend(spec.args.iter().cloned());
            v
        };
        let sandbox = place.cwd.display().to_string();
        for a in &mut argv {
            *a = a.replace("{sandbox}", &sandbox);
        }
        let program = argv.remove(0);
        let mut readable: Vec<PathBuf> = spec.readable.iter().map(PathBuf::from).collect();
        readable.extend(
            std::iter::once(&program)
                .chain(&argv)
                .flat_map(|a| path_words(a))
                .filter_map(|a| own_code(Path::new(&a))),
        );
        let mut env = place.env.clone();
        for (k, v) in &spec.env {
            let v = expand_env(v).map_err(|e| format!("MCP server {name}: env.{k}: {e}"))?;
            env.retain(|(n, _)| n != k);
            env.push((k.clone(), v));
        }
        Ok(Launch {
            program,
            args: argv,
            cwd: place.cwd.clone(),
            env,
            writable: place.writable.clone(),
            readable,
            deny: place.deny.clone(),
            limits: place.limits,
            network: place.network,
            allow_unconfined: place.allow_unconfined,
        })
    }

    /// The tools of a connected server, with its version.
    pub fn tools(&self, server: &str) -> Option<(Vec<McpTool>, Option<String>)> {
        self.conns
            .lock()
            .expect("mcp lock")
            .get(server)
            .map(|c| (c.tools.clone(), c.version.clone()))
    }

    /// The process id of a connected stdio server.
    pub fn pid(&self, server: &str) -> Option<u32> {
        self.conns
            .lock()
            .expect("mcp lock")
            .get(server)
            .and_then(|c| c.running.as_ref().map(Running::pid))
    }

    /// Calls `tool` on `server`. Path arguments are first confined to the server's working
    /// directory (the sandbox): relative paths are resolved in it, absolute paths and `..`
    /// that leave it are refused.
    ///
    /// # Errors
    /// [`ToolError::PermissionDenied`] for a path outside the sandbox; [`ToolError::Failed`]
    /// for a tool error (`isError`), a timeout, a dead server or a protocol error.
    pub fn call(&self, server: &str, tool: &str, args: Value) -> Result<Value, ToolError> {
        self.call_with_images(server, tool, args, None)
            .map(|(v, _)| v)
    }

    /// As [`McpPool::call`], with the images of the result that a model can take (see
    /// [`MAX_IMAGE_BYTES`]; the text names them all); each progress notification the server
    /// sends for the call goes to `progress`.
    ///
    /// # Errors
    /// As [`McpPool::call`].
    pub fn call_with_images(
        &self,
        server: &str,
        tool: &str,
        mut args: Value,
        progress: Option<ProgressSink>,
    ) -> Result<(Value, Vec<ToolImage>), ToolError> {
        let (peer, timeout, cwd, fields, progressing) = {
            let conns = self.conns.lock().expect("mcp lock");
            let c = conns.get(server).ok_or_else(|| {
                ToolError::Failed(format!("MCP server {server} is not connected"))
            })?;
            let fields: Vec<String> = c
                .spec
                .path_arguments
                .clone()
                .unwrap_or_else(|| PATH_ARGUMENTS.iter().map(|s| s.to_string()).collect());
            (
                c.peer.clone(),
                Duration::from_secs(c.spec.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS)),
                c.cwd.clone(),
                fields,
                Arc::clone(&c.progress),
            )
        };
        if remote(self, server) {
            // A server on another machine reads its own files; nothing to confine.
        } else {
            // A stdio server, or an HTTP one on this machine, reads this machine's files.
            confine_paths(&mut args, &cwd, &fields)?;
        }
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args.as_object().cloned();
        let s = server.to_string();
        let result = self.wait(async move {
            let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
            // The request carries a progress token (rmcp gives every request one); the
            // server's notifications naming it go to `progress` until the answer comes. One
            // sent before the token is registered here is not shown.
            let handle = peer
                .send_request_with_option(request, PeerRequestOptions::with_timeout(timeout))
                .await;
            let token = match (&handle, progress) {
                (Ok(h), Some(sink)) => {
                    let token = h.progress_token.clone();
                    progressing
                        .lock()
                        .expect("progress lock")
                        .insert(token.clone(), sink);
                    Some(token)
                }
                _ => None,
            };
            let answer = match handle {
                Ok(h) => h.await_response().await,
                Err(e) => Err(e),
            };
            if let Some(token) = token {
                // A notification read just before the answer is handled in a task of its
                // own: let it run before the call stops listening.
                tokio::task::yield_now().await;
                progressing.lock().expect("progress lock").remove(&token);
            }
            match answer {
                Err(rmcp::ServiceError::Timeout { .. }) => Err(format!(
                    "MCP server {s} did not answer within {} s; the call was abandoned",
                    timeout.as_secs()
                )),
                Err(rmcp::ServiceError::TransportClosed) => Err(format!(
                    "MCP server {s} is not running any more (its connection closed)"
                )),
                Err(e) => Err(format!("MCP server {s}: {e}")),
                Ok(ServerResult::CallToolResult(r)) => {
                    Ok(serde_json::to_value(&r).unwrap_or(Value::Null))
                }
                Ok(_) => Err(format!(
                    "MCP server {s} answered the tool call with something else than a result"
                )),
            }
        });
        let result = result.map_err(ToolError::Failed)?;
        let text = result_text(&result);
        if result["isError"] == Value::Bool(true) {
            let message = match &text {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return Err(ToolError::Failed(format!(
                "{server}.{tool} failed: {message}"
            )));
        }
        Ok((json!({"result": text}), result_images(&result)))
    }

    fn stop_conn(&self, c: &mut Conn) {
        if let Some(service) = c.service.take() {
            self.wait(async move {
                let _ = tokio::time::timeout(Duration::from_secs(2), service.cancel()).await;
            });
        }
        // Dropping the launcher's handle kills the server's whole tree.
        drop(c.running.take());
    }

    /// Stops every server (stdio processes are killed with their process group).
    pub fn shutdown(&self) {
        let conns: Vec<Conn> = self
            .conns
            .lock()
            .expect("mcp lock")
            .drain()
            .map(|(_, c)| c)
            .collect();
        for mut c in conns {
            self.stop_conn(&mut c);
        }
    }
}

/// The pools of the plans whose Execute run this process drives, by plan ([`PlanServers`]).
static PLAN_POOLS: LazyLock<Mutex<HashMap<Id, Option<Arc<McpPool>>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// The MCP servers of one plan's Execute run: while it is held, [`plan_pool`] hands every
/// step of the plan the same pool, so a stdio server is started once and reused; dropping it
/// stops every server of the plan. Opening it again for a plan already open (a nested run)
/// shares the outer run's pool and leaves stopping to it.
#[derive(Debug)]
pub struct PlanServers {
    plan_id: Id,
    owner: bool,
}

impl PlanServers {
    /// Opens the scope of `plan_id`'s servers (no server starts until a step offers one).
    pub fn open(plan_id: Id) -> Self {
        let mut pools = PLAN_POOLS.lock().expect("plan pools lock");
        let owner = !pools.contains_key(&plan_id);
        if owner {
            pools.insert(plan_id, None);
        }
        Self { plan_id, owner }
    }
}

impl Drop for PlanServers {
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        let pool = PLAN_POOLS
            .lock()
            .map(|mut p| p.remove(&self.plan_id).flatten())
            .ok()
            .flatten();
        if let Some(pool) = pool {
            pool.shutdown();
        }
    }
}

/// The pool of `plan_id`'s servers when its Execute run is open ([`PlanServers`]), created
/// at first use; `None` outside such a run.
///
/// # Errors
/// The pool's runtime cannot start.
pub fn plan_pool(plan_id: &Id) -> Option<Result<Arc<McpPool>, String>> {
    let mut pools = PLAN_POOLS.lock().ok()?;
    let slot = pools.get_mut(plan_id)?;
    if let Some(pool) = slot {
        return Some(Ok(Arc::clone(pool)));
    }
    Some(McpPool::new().map(|pool| {
        let pool = Arc::new(pool);
        *slot = Some(Arc::clone(&pool));
        pool
    }))
}

/// Checks MCP servers as `agents diagnostics` does: start (or reach) each in a scratch
/// directory, list its tools, stop it. `specs` are `(skill, server)` pairs (the registered
/// skills' servers: [`crate::skill_registry::mcp_servers`]). Returns
/// `(skill/server, Ok(summary) | Err(why))`.
pub fn check_configured(
    specs: Vec<(String, McpServerSpec)>,
) -> Vec<(String, Result<String, String>)> {
    let mut out = Vec::new();
    if specs.is_empty() {
        return out;
    }
    let scratch = std::env::temp_dir().join(format!("agents-mcp-check-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&scratch);
    let place = Placement {
        cwd: scratch.clone(),
        writable: vec![scratch.clone()],
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), scratch.display().to_string()),
        ],
        network: true,
        allow_unconfined: true,
        log_dir: None,
        ..Placement::default()
    };
    for (skill, spec) in specs {
        let label = format!("{skill}/{}", spec.name);
        let result = McpPool::new().and_then(|pool| {
            let tools = pool.connect(&spec, &place)?;
            let version = pool.tools(&spec.name).and_then(|(_, v)| v);
            pool.shutdown();
            Ok(format!(
                "starts and lists {} tool(s){}",
                tools.len(),
                version
                    .map(|v| format!(" (version {v})"))
                    .unwrap_or_default()
            ))
        });
        out.push((label, result));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    out
}

/// What a server needs to read of its own code when its program or an argument is an
/// absolute path that exists: the `node_modules` tree it lies in, else its folder.
/// An argument and, when it is a shell line (`sh -c "node /srv/x.js stdio"`), each of its
/// words: a server wrapped in a shell reads its code as a bare one does.
fn path_words(arg: &str) -> Vec<String> {
    let mut words = vec![arg.to_string()];
    if arg.contains(char::is_whitespace) {
        words.extend(shell_words::split(arg).unwrap_or_default());
    }
    words
}

fn own_code(path: &Path) -> Option<PathBuf> {
    if !path.is_absolute() || !path.exists() {
        return None;
    }
    if let Some(modules) = path
        .ancestors()
        .find(|a| a.file_name().is_some_and(|n| n == "node_modules"))
    {
        return Some(modules.to_path_buf());
    }
    if path.is_dir() {
        Some(path.to_path_buf())
    } else {
        path.parent().map(Path::to_path_buf)
    }
}

/// Whether `server` is reached over HTTP on another machine: a URL whose host is not this
/// machine's (`localhost`, `*.localhost`, a loopback or unspecified address).
fn remote(pool: &McpPool, server: &str) -> bool {
    pool.conns
        .lock()
        .expect("mcp lock")
        .get(server)
        .and_then(|c| c.spec.url.clone())
        .is_some_and(|url| !on_this_machine(&url))
}

/// Whether `url`'s host is this machine; an unparsable URL counts as this machine, so its
/// paths are confined.
fn on_this_machine(url: &str) -> bool {
    let Ok(u) = reqwest::Url::parse(url) else {
        return true;
    };
    let Some(host) = u.host_str() else {
        return true;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    match host.parse::<std::net::IpAddr>() {
        Ok(std::net::IpAddr::V4(ip)) => ip.is_loopback() || ip.is_unspecified(),
        Ok(std::net::IpAddr::V6(ip)) => {
            ip.is_loopback()
                || ip.is_unspecified()
                || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => {
            let d = host.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
    }
}

impl Drop for McpPool {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Confines path arguments to `root`: a relative path becomes `root/path`; an absolute path
/// must lie beneath `root`; `..` may not leave it.
///
/// # Errors
/// [`ToolError::PermissionDenied`] naming the argument.
pub fn confine_paths(args: &mut Value, root: &Path, fields: &[String]) -> Result<(), ToolError> {
    let Some(obj) = args.as_object_mut() else {
        return Ok(());
    };
    for field in fields {
        match obj.get_mut(field) {
            Some(Value::String(p)) => *p = confine(p, root, field)?,
            Some(Value::Array(items)) => {
                for item in items {
                    if let Value::String(p) = item {
                        *p = confine(p, root, field)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

fn confine(path: &str, root: &Path, field: &str) -> Result<String, ToolError> {
    let p = Path::new(path);
    let rel: PathBuf = if p.is_absolute() {
        p.strip_prefix(root)
            .map(Path::to_path_buf)
            .map_err(|_| {
                ToolError::PermissionDenied(format!(
                    "argument `{field}`: {path} is outside the plan's sandbox; use a path relative to the sandbox"
                ))
            })?
    } else {
        p.to_path_buf()
    };
    let mut depth: i32 = 0;
    for c in rel.components() {
        match c {
            Component::ParentDir => depth -= 1,
            Component::Normal(_) => depth += 1,
            _ => {}
        }
        if depth < 0 {
            return Err(ToolError::PermissionDenied(format!(
                "argument `{field}`: {path} leaves the plan's sandbox"
            )));
        }
    }
    Ok(root.join(rel).display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unannotated_tools_write_and_read_only_hints_make_them_read_only() {
        let c = capability_of(None);
        assert!(c.writes && !c.read_only);
        let c = capability_of(Some(&json!({"readOnlyHint": true})));
        assert!(c.read_only && !c.writes);
        let c = capability_of(Some(&json!({"readOnlyHint": false, "openWorldHint": true})));
        assert!(c.writes && c.open_world && !c.checkpointable);
    }

    #[test]
    fn path_arguments_stay_in_the_sandbox() {
        let root = Path::new("/tmp/sb/work");
        let mut a = json!({"path": "src/a.txt", "paths": ["b", "/tmp/sb/work/c"]});
        confine_paths(&mut a, root, &["path".into(), "paths".into()]).unwrap();
        assert_eq!(a["path"], "/tmp/sb/work/src/a.txt");
        assert_eq!(a["paths"][1], "/tmp/sb/work/c");
        for bad in ["/etc/passwd", "../x", "a/../../x"] {
            let mut a = json!({"path": bad});
            assert!(matches!(
                confine_paths(&mut a, root, &["path".into()]),
                Err(ToolError::PermissionDenied(_))
            ));
        }
    }
    #[test]
    fn an_http_server_on_this_machine_counts_as_local() {
        for url in [
            "http://127.0.0.1:8080/mcp",
            "http://127.1.2.3/mcp",
            "http://localhost:3000/mcp",
            "http://API.localhost/mcp",
            "http://[::1]:9000/mcp",
            "http://0.0.0.0:1/mcp",
            "http://[::ffff:127.0.0.1]/mcp",
            "not a url",
        ] {
            assert!(on_this_machine(url), "{url}");
        }
        for url in ["https://mcp.example.com/mcp", "http://10.0.0.5/mcp", "http://[2001:db8::1]/"] {
            assert!(!on_this_machine(url), "{url}");
        }
    }

    #[test]
    fn every_content_block_reaches_the_model_as_text() {
        let result = json!({"content": [
            {"type": "text", "text": "Here are 2 links:"},
            {"type": "resource_link", "uri": "demo://resource/2", "name": "Text Resource 2",
             "mimeType": "text/plain", "description": "a plaintext resource"},
            {"type": "image", "mimeType": "image/png", "data": "A".repeat(1640)},
            {"type": "audio", "mimeType": "audio/wav", "data": "QUJD"},
            {"type": "resource", "resource": {"uri": "file:///a.txt", "mimeType": "text/plain", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "file:///b.bin", "blob": "AAAA"}},
        ]});
        assert_eq!(
            result_text(&result),
            "Here are 2 links:\n\
             [resource link demo://resource/2 \"Text Resource 2\", text/plain] a plaintext resource\n\
             [image image/png, 1.2 KB]\n\
             [audio audio/wav, 3 B]\n\
             [resource file:///a.txt, text/plain]\nhello\n\
             [resource file:///b.bin, of unknown type, 3 B]"
        );
        // Without content blocks, the structured content.
        let structured = json!({"content": [], "structuredContent": {"sum": 3}});
        assert_eq!(result_text(&structured), json!({"sum": 3}));
    }

    #[test]
    fn images_up_to_a_mebibyte_go_to_the_model_and_larger_ones_are_only_named() {
        // Exactly 1 MiB decoded: 1_398_102 base64 characters and `==`; one byte more is
        // 1_398_103 and `=`.
        let at_limit = format!("{}==", "A".repeat(1_398_102));
        let too_big = format!("{}=", "A".repeat(1_398_103));
        assert_eq!(base64_len(&at_limit), MAX_IMAGE_BYTES);
        assert_eq!(base64_len(&too_big), MAX_IMAGE_BYTES + 1);
        let small = "iVBO\nRw0K";
        let result = json!({"content": [
            {"type": "text", "text": "pictures"},
            {"type": "image", "mimeType": "image/png", "data": small},
            {"type": "image", "mimeType": "image/webp", "data": at_limit},
            {"type": "image", "mimeType": "image/jpeg", "data": too_big},
            {"type": "image", "data": "QUJD"},
            {"type": "image", "mimeType": "image/gif", "data": "not base64!"},
            {"type": "audio", "mimeType": "audio/wav", "data": "QUJD"},
        ]});
        let images = result_images(&result);
        let kinds: Vec<&str> = images.iter().map(|i| i.mime_type.as_str()).collect();
        assert_eq!(kinds, ["image/png", "image/webp"]);
        assert_eq!(images[0].data, "iVBORw0K", "whitespace in the data is dropped");
        assert!(
            result_text(&result)
                .as_str()
                .unwrap()
                .contains("[image image/jpeg, 1.0 MB]")
        );
    }

    #[test]
    fn a_plans_pool_is_shared_while_its_run_is_open_and_gone_after() {
        let plan = Id::generate();
        assert!(plan_pool(&plan).is_none(), "no pool outside an Execute run");
        let run = PlanServers::open(plan);
        let first = plan_pool(&plan).unwrap().unwrap();
        let second = plan_pool(&plan).unwrap().unwrap();
        assert!(
            Arc::ptr_eq(&first, &second),
            "every step gets the same pool"
        );
        // A nested open shares the pool and does not close it.
        drop(PlanServers::open(plan));
        assert!(Arc::ptr_eq(&first, &plan_pool(&plan).unwrap().unwrap()));
        drop(run);
        assert!(plan_pool(&plan).is_none(), "closed with the run");
        assert!(first.conns.lock().unwrap().is_empty());
    }

    #[test]
    fn a_server_reads_the_code_its_shell_line_names() {
        let dir = tempfile::tempdir().unwrap();
        let js = dir.path().join("node_modules/pkg/dist/index.js");
        std::fs::create_dir_all(js.parent().unwrap()).unwrap();
        std::fs::write(&js, "").unwrap();
        let line = format!("exec node '{}' stdio", js.display());
        let read: Vec<PathBuf> = path_words(&line)
            .iter()
            .filter_map(|w| own_code(Path::new(w)))
            .collect();
        assert_eq!(read, vec![dir.path().join("node_modules")]);
        assert!(
            path_words("-c")
                .iter()
                .all(|w| own_code(Path::new(w)).is_none())
        );
    }
}

#[cfg(test)]
mod live {
    use super::*;

    fn everything() -> Option<String> {
        // The MCP test servers are installed at the workspace root (`tests/mcp`).
        let js = Path::new(env!("CARGO_MANIFEST_DIR")).join(
            "../tests/mcp/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        js.exists().then(|| js.display().to_string())
    }

    /// The test servers' folder; missing is a failure, never a silent pass.
    fn test_servers() -> PathBuf {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp");
        assert!(
            dir.join("node_modules/@modelcontextprotocol/sdk").exists(),
            "the MCP test servers are not installed: run `npm ci --prefix tests/mcp`"
        );
        dir
    }

    fn scratch_place(dir: &Path) -> Placement {
        Placement {
            cwd: dir.to_path_buf(),
            writable: vec![dir.to_path_buf()],
            env: vec![
                ("PATH".into(), std::env::var("PATH").unwrap()),
                ("HOME".into(), dir.display().to_string()),
            ],
            allow_unconfined: true,
            ..Placement::default()
        }
    }

    #[test]
    fn the_client_introduces_itself_as_this_product_and_follows_a_changed_tool_list() {
        let servers = std::fs::canonicalize(test_servers()).unwrap();
        let probe = servers.join("servers/probe.mjs");
        // It reads the SDK from the test servers' node_modules beside it.
        let spec: McpServerSpec = serde_json::from_value(json!({
            "name": "probe", "command": "node", "args": [probe.display().to_string()],
            "readable": [servers.display().to_string()],
        }))
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let place = scratch_place(dir.path());
        let pool = McpPool::new().unwrap();
        let names = |tools: &[McpTool]| tools.iter().map(|t| t.tool.clone()).collect::<Vec<_>>();
        let first = pool.connect(&spec, &place).unwrap();
        assert_eq!(names(&first), ["whoami", "add-tool"]);
        let who = pool.call("probe", "whoami", json!({})).unwrap();
        assert_eq!(
            who["result"],
            format!("cleveragents {}", env!("CARGO_PKG_VERSION")),
            "the name sent in initialize"
        );
        pool.call("probe", "add-tool", json!({})).unwrap();
        // The notification may follow the call's answer.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let again = loop {
            let tools = pool.connect(&spec, &place).unwrap();
            if tools.len() > 2 || std::time::Instant::now() > deadline {
                break tools;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(names(&again), ["whoami", "add-tool", "added"]);
        let added = pool.call("probe", "added", json!({})).unwrap();
        assert_eq!(added["result"], "added answers");
    }

    #[test]
    fn a_calls_progress_notifications_reach_its_sink_in_order() {
        let js = test_servers()
            .join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
            .display()
            .to_string();
        let dir = tempfile::tempdir().unwrap();
        let spec: McpServerSpec = serde_json::from_value(
            json!({"name": "e", "command": "node", "args": [js, "stdio"]}),
        )
        .unwrap();
        let pool = McpPool::new().unwrap();
        pool.connect(&spec, &scratch_place(dir.path())).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink: ProgressSink = {
            let seen = Arc::clone(&seen);
            Arc::new(move |p| seen.lock().unwrap().push(p))
        };
        let (r, images) = pool
            .call_with_images(
                "e",
                "trigger-long-running-operation",
                json!({"duration": 0.9, "steps": 3}),
                Some(sink),
            )
            .unwrap();
        assert!(
            r["result"].as_str().unwrap().contains("Steps: 3"),
            "{r}"
        );
        assert!(images.is_empty());
        let seen = seen.lock().unwrap().clone();
        let steps: Vec<(f64, Option<f64>)> = seen.iter().map(|p| (p.progress, p.total)).collect();
        // The last step's notification races the answer (rmcp handles each notification in a
        // task of its own), so it may be missing; the earlier ones arrive, in order.
        let all = [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))];
        assert!(steps == all || steps == all[..2], "{steps:?}");
        // A call without a sink still answers, and the finished call's sink is gone.
        pool.call("e", "trigger-long-running-operation", json!({"duration": 0.2, "steps": 2}))
            .unwrap();
        assert!(pool.conns.lock().unwrap()["e"].progress.lock().unwrap().is_empty());
        pool.shutdown();
    }

    #[test]
    fn a_confined_wrapped_server_answers_and_a_killed_one_is_a_tool_error() {
        let Some(js) = everything() else {
            assert_ne!(
                std::env::var("CI").as_deref(),
                Ok("true"),
                "npm ci tests/mcp first"
            );
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let line = format!(
            "exec 3<&0; node {js} stdio <&3 3<&- & P=$!; while [ ! -e STOP ]; do sleep 0.1; done; kill $P; wait $P"
        );
        let spec: McpServerSpec =
            serde_json::from_value(json!({"name": "e", "command": "sh", "args": ["-c", line]}))
                .unwrap();
        let place = Placement {
            cwd: dir.path().to_path_buf(),
            writable: vec![dir.path().to_path_buf()],
            env: vec![
                ("PATH".into(), std::env::var("PATH").unwrap()),
                ("HOME".into(), dir.path().display().to_string()),
            ],
            network: false,
            allow_unconfined: true,
            log_dir: None,
            ..Placement::default()
        };
        let pool = McpPool::new().unwrap();
        let tools = pool.connect(&spec, &place).unwrap();
        assert!(tools.iter().any(|t| t.tool == "echo"));
        let r = pool.call("e", "echo", json!({"message": "hi"})).unwrap();
        assert_eq!(r["result"], "Echo: hi");
        std::fs::write(dir.path().join("STOP"), "").unwrap();
        std::thread::sleep(Duration::from_millis(800));
        let e = pool
            .call("e", "echo", json!({"message": "again"}))
            .unwrap_err();
        assert!(
            matches!(&e, ToolError::Failed(m) if m.contains("not running")),
            "{e}"
        );
    }
}
