//! Which engine a command talks to (spec section 21, "Client-only vs server mode"): this
//! machine's, in process (the default), or a server's, chosen with `--server NAME|URL` or
//! `AGENTS_SERVER`, with the token from `AGENTS_TOKEN` or the credentials file that
//! `agents server login` writes.

use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};

use super::{CliError, Context, env_var};
use cleveragents_engine::api::{self, Client, Followed};
use cleveragents_engine::config as engine_config;
use cleveragents_engine::domain::Id;

/// A chosen server.
#[derive(Debug, Clone)]
pub struct ServerChoice {
    /// Its name in `[servers.NAME]`, when it was chosen by name.
    pub name: Option<String>,
    /// Its base URL.
    pub url: String,
    /// The token sent with every call.
    pub token: Option<String>,
    /// A PEM file of the authority that signed the server's TLS certificate, trusted beside
    /// the system's (`AGENTS_CA_CERT`, else `ca-cert` of `[servers.NAME]`).
    pub ca_cert: Option<std::path::PathBuf>,
}

impl ServerChoice {
    /// A client of this server.
    ///
    /// # Errors
    /// `IO_ERROR` when the HTTP client cannot be built.
    pub fn client(&self) -> Result<Box<dyn Client>, CliError> {
        let roots = match &self.ca_cert {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                CliError::invalid_input(format!("certificate authority {}: {e}", path.display()))
                    .hint("AGENTS_CA_CERT or `ca-cert` of [servers.NAME] names a PEM file")
            })?),
            None => None,
        };
        let remote = api::Remote::trusting(&self.url, self.token.clone(), roots.as_deref())
            .map_err(|e| match (e, &self.ca_cert) {
                (api::ApiError::InvalidInput { message }, Some(path)) => {
                    CliError::invalid_input(format!("{}: {message}", path.display()))
                }
                (e, _) => e.into(),
            })?;
        Ok(Box::new(remote))
    }
}

/// The server named or located by `given` (`NAME` from `agents server login`, or a URL).
///
/// # Errors
/// `NOT_FOUND` for an unknown name; `CONFIG_INVALID` for an unusable config or credentials
/// file.
pub fn choose(ctx: &Context, given: &str) -> Result<ServerChoice, CliError> {
    let from_env = env_var("AGENTS_TOKEN");
    if given.contains("://") {
        return Ok(ServerChoice {
            name: None,
            url: given.trim_end_matches('/').to_string(),
            token: from_env,
            ca_cert: env_var("AGENTS_CA_CERT").map(Into::into),
        });
    }
    let config = ctx.config()?;
    let Some(table) = config.file.servers.get(given) else {
        let known: Vec<&str> = config.file.servers.keys().map(String::as_str).collect();
        if given.contains([':', '.', '/']) {
            return Err(CliError::invalid_input(format!(
                "--server {given}: a server URL starts with http:// or https://"
            ))
            .hint(format!("--server http://{given}")));
        }
        let err = CliError::new("NOT_FOUND", format!("no server named `{given}`"))
            .hint(format!("agents server login {given} URL --token-stdin"));
        return Err(if known.is_empty() {
            err
        } else {
            err.hint(format!("known servers: {}", known.join(", ")))
        });
    };
    let token = match from_env {
        Some(t) => Some(t),
        None => engine_config::server_token(&ctx.paths.config_path, given)?,
    };
    Ok(ServerChoice {
        name: Some(given.to_string()),
        url: table.url.trim_end_matches('/').to_string(),
        token,
        ca_cert: env_var("AGENTS_CA_CERT")
            .map(Into::into)
            .or_else(|| table.ca_cert.clone()),
    })
}

/// `path` made absolute against this process's directory: a relative path an argument gives
/// names a place where the user typed it, not where a server runs (unchanged when the
/// directory cannot be read).
pub fn absolute(path: std::path::PathBuf) -> std::path::PathBuf {
    std::path::absolute(&path).unwrap_or(path)
}

/// A repository location: a URL (`https://...`, `file://...`, `user@host:repo`) unchanged, a
/// local path made [`absolute`].
pub fn absolute_repository(location: &str) -> String {
    let scp_like = location
        .split_once(':')
        .is_some_and(|(before, _)| !before.is_empty() && !before.contains('/'));
    if location.contains("://") || scp_like || location.is_empty() {
        return location.to_string();
    }
    absolute(location.into()).display().to_string()
}

/// Largest `--config` file sent to a server: the largest definition file the engine reads.
pub const CONFIG_MAX: u64 = cleveragents_engine::api::DEFINITION_MAX_BYTES;

/// The text of a `--config` file on this machine, to send to a server: a regular file of at
/// most [`CONFIG_MAX`] bytes.
///
/// # Errors
/// `INVALID_INPUT` naming the file when it is missing, not a regular file, too large or not
/// UTF-8.
pub fn read_config(path: &std::path::Path) -> Result<String, CliError> {
    let shown = path.display();
    let meta = std::fs::metadata(path)
        .map_err(|e| CliError::invalid_input(format!("--config {shown}: {e}")))?;
    if !meta.is_file() {
        return Err(CliError::invalid_input(format!(
            "--config {shown}: not a regular file"
        )));
    }
    if meta.len() > CONFIG_MAX {
        return Err(CliError::invalid_input(format!(
            "--config {shown}: {} bytes is more than the {CONFIG_MAX} a server accepts",
            meta.len()
        )));
    }
    std::fs::read_to_string(path)
        .map_err(|e| CliError::invalid_input(format!("--config {shown}: {e}")))
}

/// A server's client that prints the events of the plan an operation drives as JSON Lines
/// while the server runs it (`--stream` through a server), as the in-process observer does.
pub struct Streaming {
    /// Runs the calls.
    run: Box<dyn Client>,
    /// Follows the plan's events meanwhile (a client of its own: one call at a time each).
    follow: Box<dyn Client>,
}

impl Streaming {
    /// Streams the operations `choice`'s server runs.
    ///
    /// # Errors
    /// `IO_ERROR` when an HTTP client cannot be built.
    pub fn new(choice: &ServerChoice) -> Result<Self, CliError> {
        Ok(Self {
            run: choice.client()?,
            follow: choice.client()?,
        })
    }

    /// Prints `plan`'s events after `after`, in order.
    fn print_after(&self, plan: &Id, after: i64) -> Result<(), api::ApiError> {
        let mut last = after;
        loop {
            let page = self
                .run
                .events(Some(plan), last, api::protocol::EVENTS_PAGE_MAX)?;
            let Some(end) = page.last().map(|e| e.seq) else {
                return Ok(());
            };
            page.iter().for_each(print);
            last = end;
        }
    }

    /// The plan `op` drives, if it names one.
    fn plan_of(&self, op: &api::Op) -> Result<Option<Id>, api::ApiError> {
        use api::Op;
        Ok(match op {
            Op::Execute { plan }
            | Op::Apply { plan, .. }
            | Op::Cancel { plan, .. }
            | Op::Rollback { plan, .. }
            | Op::Prompt { plan, .. } => Some(*plan),
            Op::Decide { approval, .. } | Op::Reject { approval, .. } => {
                self.run.approval(approval)?.map(|a| a.plan_id)
            }
            _ => None,
        })
    }
}

fn print(e: &cleveragents_engine::domain::event::EngineEvent) {
    let _ = crate::output::stream_line(&super::next::streamed_event(e));
}

impl Client for Streaming {
    fn call(
        &self,
        request: api::protocol::Request,
    ) -> Result<api::protocol::Response, api::ApiError> {
        let api::protocol::Request::Run(op) = &request else {
            return self.run.call(request);
        };
        let after = self.run.last_seq()?;
        let Some(plan) = self.plan_of(op)? else {
            // A plan made by the operation (`plan use`): its events once it has run.
            let answer = self.run.call(request)?;
            if let api::protocol::Response::Outcome(o) = &answer
                && let api::Outcome::Used(u) = o.as_ref()
            {
                self.print_after(&u.plan.plan_id, after)?;
            }
            return Ok(answer);
        };
        let stop = AtomicBool::new(false);
        let printed = AtomicI64::new(after);
        let answer = std::thread::scope(|scope| {
            scope.spawn(|| {
                // A broken stream only ends the printing; the events are read again below.
                let _ = self.follow.follow(Some(&plan), after, &mut |f| match f {
                    Followed::Event(e) => {
                        print(&e);
                        printed.store(e.seq, Ordering::SeqCst);
                        ControlFlow::Continue(())
                    }
                    Followed::Idle if stop.load(Ordering::SeqCst) => ControlFlow::Break(()),
                    Followed::Idle => ControlFlow::Continue(()),
                });
            });
            let answer = self.run.call(request.clone());
            stop.store(true, Ordering::SeqCst);
            answer
        });
        // What the stream had not delivered when the operation ended, in order.
        let mut last = printed.load(Ordering::SeqCst);
        loop {
            let page = self
                .run
                .events(Some(&plan), last, api::protocol::EVENTS_PAGE_MAX)?;
            let Some(end) = page.last().map(|e| e.seq) else {
                break;
            };
            page.iter().for_each(print);
            last = end;
        }
        answer
    }

    fn follow(
        &self,
        plan: Option<&Id>,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    ) -> Result<(), api::ApiError> {
        self.run.follow(plan, after, sink)
    }

    fn location(&self) -> String {
        self.run.location()
    }
}
