//! Which engine a command talks to (spec section 21, "Client-only vs server mode"): this
//! machine's, in process (the default), or a server's, chosen with `--server NAME|URL` or
//! `AGENTS_SERVER`, with the token from `AGENTS_TOKEN` or the credentials file that
//! `agents server login` writes.

use super::{CliError, Context, env_var};
use cleveragents_engine::api::{self, Client};
use cleveragents_engine::config as engine_config;

/// A chosen server.
#[derive(Debug, Clone)]
pub struct ServerChoice {
    /// Its name in `[servers.NAME]`, when it was chosen by name.
    pub name: Option<String>,
    /// Its base URL.
    pub url: String,
    /// The token sent with every call.
    pub token: Option<String>,
}

impl ServerChoice {
    /// A client of this server.
    ///
    /// # Errors
    /// `IO_ERROR` when the HTTP client cannot be built.
    pub fn client(&self) -> Result<Box<dyn Client>, CliError> {
        Ok(Box::new(api::Remote::new(&self.url, self.token.clone())?))
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
        });
    }
    let config = ctx.config()?;
    let Some(table) = config.file.servers.get(given) else {
        let known: Vec<&str> = config.file.servers.keys().map(String::as_str).collect();
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
    })
}
