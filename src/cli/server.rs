//! `agents server start|token|user|org|login|status` (spec section 21): run the engine's
//! protocol over HTTP for other machines, manage the users, organizations and tokens it
//! accepts ([`super::server_team`]), and point this client at a server.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, Subcommand};
use serde_json::json;

use super::{CliError, Context};
use crate::output::{Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::config as engine_config;

pub use super::server_host::{DatabaseArg, engine};
pub use super::server_team::{MemberCommand, OrgCommand, TokenCommand, UserCommand};

/// `agents server` subcommands.
#[derive(Debug, Subcommand)]
pub enum ServerCommand {
    /// Serve this data directory's engine over HTTP (protocol v1, Server-Sent Events)
    Start(StartArgs),
    /// Tokens the server accepts (on the server host against its --data-dir, or --server
    /// SERVER)
    #[command(subcommand)]
    Token(TokenCommand),
    /// An organization's policy (on the server host, or through --server)
    #[command(subcommand)]
    Policy(super::server_policy::PolicyCommand),
    /// The server's users (on the server host, or --server SERVER)
    #[command(subcommand)]
    User(UserCommand),
    /// The server's organizations and their members (on the server host, or --server SERVER)
    #[command(subcommand)]
    Org(OrgCommand),
    /// Remember a server under NAME, with a token read from standard input
    Login(LoginArgs),
    /// Forget a server remembered by `server login`: its entry and its stored token
    Logout {
        /// The name given to `agents server login`
        name: String,
    },
    /// Migrate the server's database to this version's schema and exit (for deploys that
    /// migrate before starting instances; `server start` migrates too)
    Migrate(DatabaseArg),
    /// The audit log: who did or was refused what, when, from where (`verify` checks its chain)
    Audit(super::server_audit::AuditArgs),
    /// Whether a server answers: its URL, version, protocol and schema
    Status {
        /// A server name from `agents server login` (default: --server / AGENTS_SERVER)
        name: Option<String>,
    },
}

/// `agents server start` arguments.
#[derive(Debug, Args)]
pub struct StartArgs {
    /// Address to listen on (port 0 picks a free port)
    #[arg(long, value_name = "ADDR", default_value = crate::server::DEFAULT_LISTEN)]
    pub listen: SocketAddr,
    /// Allow a non-loopback address without TLS (only behind a TLS proxy or on a trusted network)
    #[arg(long)]
    pub insecure_http: bool,
    /// TLS certificate chain (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// TLS private key (PEM)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Where the server keeps its records.
    #[command(flatten)]
    pub database: DatabaseArg,
}

/// `agents server login` arguments.
#[derive(Debug, Args)]
pub struct LoginArgs {
    /// The name to use with --server
    pub name: String,
    /// The server's URL (`http://127.0.0.1:7420`)
    pub url: String,
    /// Read the token from standard input (keeps it out of the shell history)
    #[arg(long)]
    pub token_stdin: bool,
    /// PEM file of the authority that signed the server's TLS certificate (when no system
    /// authority did, e.g. a self-signed certificate)
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
}

impl ServerCommand {
    /// The subcommand's name as the envelope's `command` shows it.
    pub fn name(&self) -> String {
        match self {
            ServerCommand::Start(_) => "start".into(),
            ServerCommand::Token(t) => format!(
                "token {}",
                match t {
                    TokenCommand::Create { .. } => "create",
                    TokenCommand::List(_) => "list",
                    TokenCommand::Revoke { .. } => "revoke",
                }
            ),
            ServerCommand::Policy(p) => p.name(),
            ServerCommand::User(u) => format!(
                "user {}",
                match u {
                    UserCommand::Add { .. } => "add",
                    UserCommand::List(_) => "list",
                }
            ),
            ServerCommand::Org(o) => format!(
                "org {}",
                match o {
                    OrgCommand::Add { .. } => "add",
                    OrgCommand::List(_) => "list",
                    OrgCommand::Show { .. } => "show",
                    OrgCommand::Member(MemberCommand::Add { .. }) => "member add",
                    OrgCommand::Member(MemberCommand::Remove { .. }) => "member remove",
                }
            ),
            ServerCommand::Login(_) => "login".into(),
            ServerCommand::Logout { .. } => "logout".into(),
            ServerCommand::Migrate(_) => "migrate".into(),
            ServerCommand::Status { .. } => "status".into(),
            ServerCommand::Audit(a) => a.name().into(),
        }
    }

    /// Whether the command works on this machine's data directory (start, migrate; tokens,
    /// users and organizations when no server is chosen) rather than on a chosen server.
    pub fn uses_data_dir(&self) -> bool {
        matches!(
            self,
            ServerCommand::Start(_)
                | ServerCommand::Token(_)
                | ServerCommand::User(_)
                | ServerCommand::Org(_)
                | ServerCommand::Policy(_)
                | ServerCommand::Migrate(_)
        )
    }

    /// Whether the command administers a server's tokens, users or organizations: on the
    /// server host (its data directory or --database) without --server, or through the
    /// protocol with it.
    pub fn administers(&self) -> bool {
        matches!(
            self,
            ServerCommand::Token(_)
                | ServerCommand::User(_)
                | ServerCommand::Org(_)
                | ServerCommand::Policy(_)
        )
    }

    /// Whether the command runs against a chosen server.
    pub fn served_remotely(&self) -> bool {
        !self.uses_data_dir() || self.administers()
    }
}

/// Runs an `agents server` subcommand.
///
/// # Errors
/// See each subcommand.
pub fn run(c: ServerCommand, ctx: &Context) -> Result<Report, CliError> {
    match c {
        ServerCommand::Start(a) => start(&a, ctx),
        ServerCommand::Token(c) => super::server_team::token(c, ctx),
        ServerCommand::User(c) => super::server_team::user(c, ctx),
        ServerCommand::Org(c) => super::server_team::org(c, ctx),
        ServerCommand::Policy(p) => super::server_policy::run(p, ctx),
        ServerCommand::Migrate(database) => migrate(&engine(ctx, &database)?),
        ServerCommand::Login(a) => login(ctx, &a),
        ServerCommand::Logout { name } => logout(ctx, &name),
        ServerCommand::Status { name } => status(ctx, name.as_deref()),
        ServerCommand::Audit(a) => {
            super::server_audit::run(a, ctx, &|database| engine(ctx, &DatabaseArg { database }))
        }
    }
}

/// Refuses plain HTTP off loopback: tokens would cross the network in clear text.
fn check_listen(a: &StartArgs) -> Result<(), CliError> {
    if !a.listen.ip().is_loopback() && !a.insecure_http && a.tls_cert.is_none() {
        return Err(CliError::invalid_input(format!(
            "--listen {}: refusing plain HTTP on a non-loopback address (tokens would cross the network in clear text)",
            a.listen
        ))
        .hint(format!("listen on loopback: --listen 127.0.0.1:{}", a.listen.port()))
        .hint("or serve TLS: --tls-cert CHAIN.pem --tls-key KEY.pem")
        .hint("or, behind a TLS proxy or on a trusted network only, add --insecure-http"));
    }
    Ok(())
}

fn migrate(engine: &api::Engine) -> Result<Report, CliError> {
    let schema = engine.schema_version()?;
    let database = engine.database().to_string();
    Ok(Report::ok(
        "server migrate",
        json!({"database": database, "schema": schema}),
        format!("{database} is at schema v{schema}"),
    ))
}

fn start(a: &StartArgs, ctx: &Context) -> Result<Report, CliError> {
    check_listen(a)?;
    let stopping = crate::server::Stopping::default();
    let engine = engine(ctx, &a.database)?.with_observer(Arc::new(stopping.clone()));
    let schema = engine.schema_version()?;
    let verifier = oidc_verifier(ctx.config()?.oidc_issuers())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            CliError::new(
                "ENVIRONMENT",
                format!("cannot start the server's runtime: {e}"),
            )
        })?;
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind(a.listen))
        .map_err(|e| {
            CliError::new("IO_ERROR", format!("cannot listen on {}: {e}", a.listen))
                .hint("choose another address with --listen, or port 0 for a free one")
        })?;
    let bound = listener
        .local_addr()
        .map_err(|e| CliError::new("IO_ERROR", format!("cannot read the bound address: {e}")))?;
    let tls = match (&a.tls_cert, &a.tls_key) {
        (Some(cert), Some(key)) => Some(runtime.block_on(tls_config(cert, key))?),
        _ => None,
    };
    runtime
        .block_on(async { stopping.watch_signals() })
        .map_err(|e| {
            CliError::new(
                "ENVIRONMENT",
                format!("cannot watch for SIGTERM and Ctrl-C: {e}"),
            )
        })?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{bound}");
    announce(ctx, &url, schema, &engine.database().to_string());
    // The engine is made again when config.toml changes on the server host.
    let rebuild = {
        let (paths, flags, format, terminal, repeat_args) = (
            ctx.paths.clone(),
            ctx.flags.clone(),
            ctx.format,
            ctx.terminal,
            ctx.repeat_args.clone(),
        );
        let stopping = stopping.clone();
        let database = engine.database().clone();
        move || {
            let config = cleveragents_engine::Config::load(&paths.config_path)
                .map_err(|e| CliError::from(e).body.message)?;
            let verifier = crate::server::oidc::Verifier::new(config.oidc_issuers())?;
            let fresh = Context {
                paths: paths.clone(),
                config: Ok(config),
                flags: flags.clone(),
                format,
                terminal,
                repeat_args: repeat_args.clone(),
                server: None,
                server_mode: None,
            };
            Ok((
                fresh
                    .registry_engine()
                    .with_database(database.clone())
                    .with_observer(Arc::new(stopping.clone())),
                verifier,
            ))
        }
    };
    let shared = Arc::new(crate::server::Shared {
        engine: crate::server::Live::new(engine, verifier, ctx.paths.config_path.clone(), rebuild),
        render: remote_error,
        stopping: stopping.clone(),
        tls: scheme == "https",
    });
    let router = crate::server::router(Arc::clone(&shared));
    runtime
        .block_on(async {
            // Plans whose driver is gone are resumed here (spec section 21).
            crate::server::takeover::spawn(shared);
            match tls {
                Some(tls) => crate::server::serve_tls(listener, router, tls, stopping).await,
                None => crate::server::serve(listener, router, stopping).await,
            }
        })
        .map_err(|e| CliError::new("IO_ERROR", format!("the server failed: {e}")))?;
    // In json the listening line was the command's one document (a script reads it to find
    // the URL); the stop is its exit code.
    Ok(Report::ok(
        "server start",
        json!({"url": url, "stopped": true}),
        format!("Server at {url} stopped"),
    )
    .announced())
}

/// The verifier of the JWTs of the OIDC issuers `config.toml` names (`[[server.oidc]]`),
/// their JWKS files read now.
///
/// # Errors
/// `INVALID_INPUT` naming the file that cannot be read.
fn oidc_verifier(
    issuers: &[engine_config::OidcIssuer],
) -> Result<crate::server::oidc::Verifier, CliError> {
    crate::server::oidc::Verifier::new(issuers).map_err(|why| {
        CliError::invalid_input(format!("[[server.oidc]]: {why}"))
            .hint("fix jwks-file in config.toml (a JWK set as JSON), or use jwks-url")
    })
}

/// The TLS settings of `--tls-cert` and `--tls-key` (PEM files).
///
/// # Errors
/// `INVALID_INPUT` naming both files when they cannot be read or do not hold a certificate
/// chain and its private key.
async fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<axum_server::tls_rustls::RustlsConfig, CliError> {
    axum_server::tls_rustls::RustlsConfig::from_pem_file(cert, key)
        .await
        .map_err(|e| {
            CliError::invalid_input(format!(
                "--tls-cert {} --tls-key {}: {e}",
                cert.display(),
                key.display()
            ))
            .hint("--tls-cert takes the PEM certificate chain, --tls-key its PEM private key (PKCS#8, PKCS#1 or SEC1)")
        })
}

/// An engine failure as the protocol carries it: what this command line would print.
fn remote_error(e: api::ApiError) -> api::protocol::RemoteError {
    let rendered = match e {
        // The lease is the server's own: another request of this server drives the plan. It
        // is not someone else's process to cancel.
        api::ApiError::Run(api::failures::RunError::Busy {
            plan_id, pid, kind, ..
        }) if pid == std::process::id() => CliError::new(
            "CONFLICT",
            format!("the server is running this plan ({kind}) for another request"),
        )
        .detail("wait for it to finish, or follow it as it runs")
        .hint(format!("agents plan events --follow {plan_id}"))
        .hint(format!("agents plan status {plan_id}"))
        .data(json!({"owner": {"server": true, "kind": kind}})),
        e => CliError::from(e),
    };
    api::protocol::RemoteError {
        code: rendered
            .body
            .code
            .parse()
            .unwrap_or(api::ErrorCode::Internal),
        message: rendered.body.message,
        detail: rendered.body.detail,
        hints: rendered.body.suggestions,
        data: (!rendered.data.is_null()).then(|| Box::new(rendered.data)),
    }
}

/// Says where the server listens, on stdout at once (a script waits for this line).
fn announce(ctx: &Context, url: &str, schema: u32, database: &str) {
    let line = if ctx.format == crate::output::Format::Json {
        json!({"listening": url, "protocol": api::protocol::VERSION, "schema": schema, "database": database}).to_string()
    } else {
        format!(
            "Listening on {url} (protocol {}, schema v{schema}, data dir {}, database {database})",
            api::protocol::VERSION,
            ctx.paths.data_dir.display()
        )
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn login(ctx: &Context, a: &LoginArgs) -> Result<Report, CliError> {
    if !a.token_stdin {
        return Err(
            CliError::invalid_input("server login needs --token-stdin").hint(format!(
                "echo \"$TOKEN\" | {}",
                ctx.suggest(&format!("server login {} {} --token-stdin", a.name, a.url))
            )),
        );
    }
    check_server_name(&a.name)?;
    let url = a.url.trim_end_matches('/');
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(CliError::invalid_input(format!(
            "{url}: a server URL starts with http:// or https://"
        ))
        .hint("e.g. http://127.0.0.1:7420"));
    }
    let mut token = String::new();
    std::io::stdin()
        .take(4096)
        .read_to_string(&mut token)
        .map_err(|e| CliError::new("IO_ERROR", format!("reading the token from stdin: {e}")))?;
    let token = token.trim().to_string();
    if token.is_empty() {
        return Err(CliError::invalid_input("no token on standard input")
            .hint("create one on the server host: agents server token create --user USER"));
    }
    let ca_cert = match &a.ca_cert {
        Some(p) => Some(
            std::path::absolute(p)
                .map_err(|e| CliError::invalid_input(format!("--ca-cert {}: {e}", p.display())))?,
        ),
        None => None,
    };
    let chosen = super::remote::ServerChoice {
        name: Some(a.name.clone()),
        url: url.to_string(),
        token: Some(token.clone()),
        ca_cert: ca_cert.clone(),
    };
    let hello = chosen.client()?.hello()?;
    engine_config::add_server(&ctx.paths.config_path, &a.name, url, ca_cert.as_deref())?;
    engine_config::save_server_token(&ctx.paths.config_path, &a.name, &token)?;
    Ok(Report::ok(
        "server login",
        json!({"name": a.name, "url": url, "server": hello}),
        format!(
            "Logged in to {} at {url} (version {}, schema v{}); use --server {}",
            a.name, hello.version, hello.schema, a.name
        ),
    ))
}

fn logout(ctx: &Context, name: &str) -> Result<Report, CliError> {
    check_server_name(name)?;
    if !engine_config::remove_server(&ctx.paths.config_path, name)? {
        return Err(CliError::new(
            "NOT_FOUND",
            format!("no server named `{name}` is remembered here"),
        )
        .hint("agents config get servers")
        .hint(format!("agents server login {name} URL --token-stdin")));
    }
    Ok(Report::ok(
        "server logout",
        json!({"name": name}),
        format!("Forgot server {name} and its token"),
    ))
}

/// A server name: letters, digits, `-`, `_` (it becomes a TOML key and a flag value).
fn check_server_name(name: &str) -> Result<(), CliError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if ok {
        return Ok(());
    }
    Err(CliError::invalid_input(format!(
        "server name `{name}`: use letters, digits, `-` and `_`"
    )))
}

fn status(ctx: &Context, name: Option<&str>) -> Result<Report, CliError> {
    let chosen = match name {
        Some(n) => super::remote::choose(ctx, n)?,
        None => ctx.server.clone().ok_or_else(|| {
            CliError::invalid_input("no server chosen")
                .hint("agents server status NAME, or --server NAME|URL, or AGENTS_SERVER")
        })?,
    };
    let client = chosen.client()?;
    let hello = client.hello()?;
    Ok(Report::ok(
        "server status",
        json!({"url": chosen.url, "reachable": true, "server": hello}),
        format!("Server at {} answers", chosen.url),
    )
    .with(Element::panel(
        "Server",
        [
            ("URL", chosen.url.clone()),
            ("Version", hello.version.clone()),
            ("Protocol", hello.protocol.clone()),
            ("Schema", format!("v{}", hello.schema)),
        ],
    )))
}
