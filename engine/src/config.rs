//! The configuration file `config.toml`: its keys, validation, resolution chain and safe edits.
//!
//! Configuration lives only in this file (there is no config table in the database). Top-level
//! keys (spec section 06, `agents config`): `automation-profile`, `log-level`,
//! `invariant-actor`, `format`. Provider tables `[providers.NAME]` hold `kind`
//! (`openai` | `anthropic`), `base_url`, `api_key_env` (the *name* of the environment variable
//! holding the key, never the key itself), optional `headers`, `timeout_secs`, `max_retries`
//! and per-model prices under `[providers.NAME.models."MODEL"]`.
//!
//! Edits ([`set_value`]) preserve comments and formatting (`toml_edit`), hold an exclusive lock
//! on `config.toml.lock`, validate the whole resulting file, write a temporary file and rename
//! it over the old one, so a reader never sees a half-written file and concurrent writers never
//! lose each other's keys.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::name::is_builtin_profile;

/// The output formats accepted by the `format` key and `--format` (spec section 26).
pub const FORMATS: [&str; 6] = ["rich", "color", "table", "plain", "json", "yaml"];
/// The log levels accepted by the `log-level` key.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];
/// The automation profile used when none is configured (see `docs/decisions.md`).
pub const DEFAULT_AUTOMATION_PROFILE: &str = "manual";

/// Default number of days checkpoint refs are kept after a plan is applied, cancelled or
/// errored (`sandbox-retention-days`).
pub const DEFAULT_RETENTION_DAYS: u32 = 7;

/// How many children of one parallel group run at once unless `max-parallel-children` says
/// otherwise.
pub const DEFAULT_MAX_PARALLEL_CHILDREN: usize = 2;

/// The `lease-expiry-secs` a configuration may set: at least a few heartbeats (one every two
/// seconds), at most an hour.
const LEASE_EXPIRY_RANGE: std::ops::RangeInclusive<i64> = 5..=3600;

/// Where a resolved value came from, in precedence order (lowest level number wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A command-line flag (level 1).
    Flag,
    /// An environment variable (level 2).
    Env,
    /// The config file (level 3).
    File,
    /// The compiled-in default (level 4).
    Default,
}

impl Source {
    /// The level shown in the resolution chain: 1 (flag) to 4 (default).
    pub fn level(self) -> u8 {
        match self {
            Source::Flag => 1,
            Source::Env => 2,
            Source::File => 3,
            Source::Default => 4,
        }
    }

    /// Human label: `CLI flag`, `env var`, `config file`, `default`.
    pub fn label(self) -> &'static str {
        match self {
            Source::Flag => "CLI flag",
            Source::Env => "env var",
            Source::File => "config file",
            Source::Default => "default",
        }
    }
}

/// A provider's wire protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, Ollama, llama.cpp, vLLM, LM Studio).
    Openai,
    /// Anthropic Messages API.
    Anthropic,
}

impl ProviderKind {
    /// The lowercase name used in the config file.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Openai => "openai",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

/// Prices for one model, in US dollars per million tokens.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    /// USD per million input (prompt) tokens.
    pub input_usd_per_mtok: Option<f64>,
    /// USD per million output (completion) tokens.
    pub output_usd_per_mtok: Option<f64>,
    /// USD per million input tokens read from the prompt cache. Unset: a tenth of the input
    /// price for `anthropic` providers (the vendor's fixed multiplier), the input price for
    /// `openai` ones (an upper bound; the discount differs per model).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read_usd_per_mtok: Option<f64>,
    /// USD per million input tokens written to the prompt cache. Unset: 1.25 times the input
    /// price for `anthropic` providers, the input price for `openai` ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_usd_per_mtok: Option<f64>,
    /// The model's largest completion, in tokens: caps the default `max_tokens` sent to
    /// Anthropic (overrides the built-in table in `providers::anthropic`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
}

/// Which request field carries the completion token cap on the OpenAI-compatible wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_completion_tokens`: OpenAI's current field (o-series and gpt-5 reject
    /// `max_tokens`).
    MaxCompletionTokens,
    /// `max_tokens`: the older field most compatible servers (Ollama, llama.cpp, vLLM) read.
    MaxTokens,
}

impl MaxTokensField {
    /// The field's name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxTokens => "max_tokens",
        }
    }

    /// The default for a base URL: `max_completion_tokens` for OpenAI itself
    /// (`api.openai.com`), `max_tokens` for every other server.
    pub fn default_for(base_url: &str) -> Self {
        let host = base_url
            .split("://")
            .nth(1)
            .unwrap_or(base_url)
            .split(['/', ':'])
            .next()
            .unwrap_or("");
        if host.eq_ignore_ascii_case("api.openai.com") {
            MaxTokensField::MaxCompletionTokens
        } else {
            MaxTokensField::MaxTokens
        }
    }
}

/// One `[providers.NAME]` table as written in the file (every field optional so that built-in
/// providers can be partly overridden).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderTable {
    /// Wire protocol; required for providers that are not built in.
    pub kind: Option<ProviderKind>,
    /// Base URL of the API, e.g. `http://127.0.0.1:11434/v1` for Ollama.
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the API key; absent for keyless servers.
    pub api_key_env: Option<String>,
    /// Extra HTTP headers sent with every request.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Per-request read timeout in seconds.
    pub timeout_secs: Option<u64>,
    /// Maximum number of attempts for transient failures, in total.
    pub max_retries: Option<u32>,
    /// The field carrying the completion cap on the OpenAI-compatible wire
    /// (`max_completion_tokens` or `max_tokens`); default by base URL, see
    /// [`MaxTokensField::default_for`].
    pub max_tokens_field: Option<MaxTokensField>,
    /// Deadline of one model call, retries included, in seconds (default
    /// [`DEFAULT_CALL_DEADLINE_SECS`]).
    pub call_deadline_secs: Option<u64>,
    /// Deadline of one actor run (one step of a plan), in seconds (default
    /// [`DEFAULT_STEP_DEADLINE_SECS`]).
    pub step_deadline_secs: Option<u64>,
    /// Requests per minute this client sends at most; further calls wait their turn.
    pub requests_per_minute: Option<u32>,
    /// Tokens (input plus output) per minute this client uses at most; further calls wait.
    pub tokens_per_minute: Option<u64>,
    /// Prices per model name.
    #[serde(default)]
    pub models: BTreeMap<String, ModelPrice>,
}

/// The whole file, as parsed. Unknown keys are rejected.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ConfigFile {
    /// Default automation profile for new plans.
    pub automation_profile: Option<String>,
    /// Default log level for the log file.
    pub log_level: Option<String>,
    /// Default invariant reconciliation actor.
    pub invariant_actor: Option<String>,
    /// Default output format.
    pub format: Option<String>,
    /// Days that checkpoint refs and the sandboxes of finished plans are kept.
    pub sandbox_retention_days: Option<u32>,
    /// How many children of one parallel spawn group run at once.
    pub max_parallel_children: Option<u32>,
    /// Seconds a plan's driver may stay silent before another process (another server
    /// instance) takes the plan over.
    pub lease_expiry_secs: Option<u32>,
    /// A directory every server instance can read and write where sandboxes' checkpoints are
    /// also kept, so that another instance can rebuild a plan's sandbox (absolute path).
    pub checkpoint_store: Option<PathBuf>,
    /// Default budget of a new plan's model calls, in US dollars.
    pub max_cost_usd: Option<f64>,
    /// Default budget of a new plan's model calls, in tokens.
    pub max_tokens: Option<u64>,
    /// Directories searched for Agent Skill folders, separated like `PATH` (`:`).
    pub agent_skill_dirs: Option<String>,
    /// Whether the `.agents/skills/` folders of a plan's resources are searched too.
    pub agent_skills_in_resources: Option<bool>,
    /// Provider tables by name.
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderTable>,
    /// The code index policy (`[index]`, see [`crate::domain::index::IndexConfig`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<crate::domain::index::IndexConfig>,
    /// Servers this client knows by name (`[servers.NAME]`, written by `agents server login`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub servers: BTreeMap<String, ServerTable>,
    /// What `agents server start` uses when this machine is a server (`[server]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSettings>,
}

/// The `[server]` table: settings of this machine's server (spec section 21).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct ServerSettings {
    /// OIDC issuers whose JWTs the server accepts (`[[server.oidc]]`, one table each).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oidc: Vec<OidcIssuer>,
}

/// One `[[server.oidc]]` table: an issuer of JWTs (a CI system, a single sign-on provider)
/// whose tokens sign in as the server's user named by one of their claims.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct OidcIssuer {
    /// The issuer, exactly as its tokens' `iss` claim says it.
    pub issuer: String,
    /// The audience the tokens must name in `aud` (this server).
    pub audience: String,
    /// Where the issuer publishes its signing keys (a JWKS document, `https://...`).
    pub jwks_url: Option<String>,
    /// A JWKS document on this machine instead (an absolute path), read at start and when
    /// the configuration changes.
    pub jwks_file: Option<PathBuf>,
    /// The claim whose value is the user's name on this server (default `sub`).
    pub user_claim: Option<String>,
}

/// The claim that names the user when `user-claim` is not set.
pub const DEFAULT_USER_CLAIM: &str = "sub";

impl OidcIssuer {
    /// The claim that names the user.
    pub fn user_claim(&self) -> &str {
        self.user_claim.as_deref().unwrap_or(DEFAULT_USER_CLAIM)
    }

    /// Checks one table: its field name and why, when it is unusable.
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.issuer.trim().is_empty() {
            return Err((
                "issuer",
                "is empty; expected the issuer's `iss` value".into(),
            ));
        }
        if self.audience.trim().is_empty() {
            return Err((
                "audience",
                "is empty; expected the `aud` its tokens name".into(),
            ));
        }
        match (&self.jwks_url, &self.jwks_file) {
            (Some(_), Some(_)) => {
                return Err((
                    "jwks-url",
                    "and jwks-file are both set; give one of them".into(),
                ));
            }
            (None, None) => {
                return Err((
                    "jwks-url",
                    "is missing; give jwks-url (the issuer's JWKS URL) or jwks-file (a JWKS file)"
                        .into(),
                ));
            }
            (Some(url), None) if !(url.starts_with("https://") || url.starts_with("http://")) => {
                return Err((
                    "jwks-url",
                    format!("is `{url}`; expected an https:// (or http://) URL"),
                ));
            }
            (None, Some(file)) if !file.is_absolute() => {
                return Err((
                    "jwks-file",
                    format!("is `{}`; expected an absolute path", file.display()),
                ));
            }
            _ => {}
        }
        if self.user_claim().trim().is_empty() {
            return Err((
                "user-claim",
                "is empty; expected a claim's name, e.g. sub".into(),
            ));
        }
        Ok(())
    }
}

impl Config {
    /// The OIDC issuers whose JWTs this machine's server accepts (`[[server.oidc]]`).
    pub fn oidc_issuers(&self) -> &[OidcIssuer] {
        self.file
            .server
            .as_ref()
            .map_or(&[][..], |s| s.oidc.as_slice())
    }
}

/// One `[servers.NAME]` table: where a server is. Its token is kept apart, in the credentials
/// file beside the config file ([`credentials_path`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerTable {
    /// The server's base URL (`http://127.0.0.1:7420`).
    pub url: String,
    /// A PEM file of the certificate authority that signed the server's TLS certificate,
    /// when no system authority did (`ca-cert`).
    #[serde(default, rename = "ca-cert")]
    pub ca_cert: Option<PathBuf>,
}

/// The credentials file beside `config_path` (`credentials.toml`, mode 0600): one
/// `[servers.NAME]` table with a `token` per server logged in to.
pub fn credentials_path(config_path: &Path) -> PathBuf {
    config_path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .join("credentials.toml")
}

/// Records server `name` at `url` in the config file (comments kept, file locked, atomic
/// rename, as `config set` does).
///
/// # Errors
/// [`ConfigError`] when the file cannot be read, parsed or written.
pub fn add_server(
    config_path: &Path,
    name: &str,
    url: &str,
    ca_cert: Option<&Path>,
) -> Result<(), ConfigError> {
    let key = |k: &str| ["servers".to_string(), name.to_string(), k.to_string()];
    edit_file(config_path, |doc| {
        set_in(doc, &key("url"), toml_edit::Value::from(url));
        match ca_cert {
            Some(p) => set_in(
                doc,
                &key("ca-cert"),
                toml_edit::Value::from(p.display().to_string()),
            ),
            None => {
                if let Some(t) = doc
                    .get_mut("servers")
                    .and_then(|s| s.get_mut(name))
                    .and_then(toml_edit::Item::as_table_like_mut)
                {
                    t.remove("ca-cert");
                }
            }
        }
    })?;
    Ok(())
}

/// The token stored for server `name`, if any.
///
/// # Errors
/// [`ConfigError::Read`] or [`ConfigError::Parse`] for an unreadable credentials file.
pub fn server_token(config_path: &Path, name: &str) -> Result<Option<String>, ConfigError> {
    let doc = read_credentials(&credentials_path(config_path))?;
    Ok(get_in(
        &doc,
        &["servers".to_string(), name.to_string(), "token".to_string()],
    ))
}

/// The credentials file at `path`, parsed (empty when there is none).
fn read_credentials(path: &Path) -> Result<toml_edit::DocumentMut, ConfigError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    text.parse().map_err(|e: toml_edit::TomlError| {
        let (message, snippet) = split_toml_error(&e.to_string());
        ConfigError::Parse {
            path: path.to_path_buf(),
            message,
            snippet,
        }
    })
}

/// Stores `token` for server `name` in the credentials file, created with mode 0600 and
/// replaced atomically.
///
/// # Errors
/// [`ConfigError`] when the file cannot be read, parsed or written.
pub fn save_server_token(config_path: &Path, name: &str, token: &str) -> Result<(), ConfigError> {
    let path = credentials_path(config_path);
    let dir = path
        .parent()
        .unwrap_or_else(|| Path::new("."))
        .to_path_buf();
    let write_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ConfigError::Write { path: p, source }
    };
    fs::create_dir_all(&dir).map_err(write_err(&dir))?;
    let _lock = crate::safe_write::lock_dir(&dir).map_err(write_err(&dir))?;
    let mut doc = read_credentials(&path)?;
    let segments = ["servers".to_string(), name.to_string(), "token".to_string()];
    set_in(&mut doc, &segments, toml_edit::Value::from(token));
    crate::safe_write::replace_file(&path, doc.to_string().as_bytes()).map_err(write_err(&path))?;
    // Kept private even when someone widened an existing file's mode.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(
        &path,
        fs::Permissions::from_mode(crate::safe_write::NEW_FILE_MODE),
    )
    .map_err(write_err(&path))
}

/// Forgets server `name`: its `[servers.NAME]` table in the config file and its token in the
/// credentials file (each locked and replaced atomically). Whether either held it.
///
/// # Errors
/// [`ConfigError`] when a file cannot be read, parsed or written.
pub fn remove_server(config_path: &Path, name: &str) -> Result<bool, ConfigError> {
    let remove = |doc: &mut toml_edit::DocumentMut| {
        doc.get_mut("servers")
            .and_then(toml_edit::Item::as_table_like_mut)
            .and_then(|t| t.remove(name))
            .is_some()
    };
    // A config file that is not there holds no server, and is not created to say so.
    let in_config = config_path.exists() && edit_file(config_path, remove)?.0;
    let path = credentials_path(config_path);
    if !path.exists() {
        return Ok(in_config);
    }
    let dir = path.parent().unwrap_or_else(|| Path::new("."));
    let write_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ConfigError::Write { path: p, source }
    };
    let _lock = crate::safe_write::lock_dir(dir).map_err(write_err(dir))?;
    let mut doc = read_credentials(&path)?;
    let in_credentials = remove(&mut doc);
    if in_credentials {
        crate::safe_write::replace_file(&path, doc.to_string().as_bytes())
            .map_err(write_err(&path))?;
    }
    Ok(in_config || in_credentials)
}

/// A provider after merging the file over the built-in defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Provider {
    /// Provider name; also the namespace of its model actors (`ollama/llama3`).
    pub name: String,
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Base URL of the API.
    pub base_url: String,
    /// Environment variable holding the key, if the provider needs one.
    pub api_key_env: Option<String>,
    /// Extra headers.
    pub headers: BTreeMap<String, String>,
    /// Read timeout in seconds (default 120).
    pub timeout_secs: u64,
    /// Maximum attempts for transient failures (default 3).
    pub max_retries: u32,
    /// The completion cap's field on the OpenAI-compatible wire; `None` picks by base URL
    /// ([`MaxTokensField::default_for`]).
    pub max_tokens_field: Option<MaxTokensField>,
    /// Deadline of one model call, retries included, in seconds.
    pub call_deadline_secs: u64,
    /// Deadline of one actor run (a plan step), in seconds.
    pub step_deadline_secs: u64,
    /// Requests per minute, if limited.
    pub requests_per_minute: Option<u32>,
    /// Tokens per minute, if limited.
    pub tokens_per_minute: Option<u64>,
    /// Prices per model.
    pub models: BTreeMap<String, ModelPrice>,
    /// Whether the provider is built in (`openai`, `anthropic`).
    pub builtin: bool,
}

impl Provider {
    /// A provider with every optional setting at its default.
    pub fn new(name: &str, kind: ProviderKind, base_url: &str) -> Self {
        Self {
            name: name.to_string(),
            kind,
            base_url: base_url.to_string(),
            api_key_env: None,
            headers: BTreeMap::new(),
            timeout_secs: DEFAULT_TIMEOUT_SECS,
            max_retries: DEFAULT_MAX_RETRIES,
            max_tokens_field: None,
            call_deadline_secs: DEFAULT_CALL_DEADLINE_SECS,
            step_deadline_secs: DEFAULT_STEP_DEADLINE_SECS,
            requests_per_minute: None,
            tokens_per_minute: None,
            models: BTreeMap::new(),
            builtin: false,
        }
    }

    /// The field carrying the completion cap on the OpenAI-compatible wire.
    pub fn max_tokens_field(&self) -> MaxTokensField {
        self.max_tokens_field
            .unwrap_or_else(|| MaxTokensField::default_for(&self.base_url))
    }
}

/// Default read timeout for provider requests, in seconds.
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Default deadline of one model call, retries included, in seconds (10 minutes).
pub const DEFAULT_CALL_DEADLINE_SECS: u64 = 600;
/// Default deadline of one actor run (one plan step), in seconds (1 hour).
pub const DEFAULT_STEP_DEADLINE_SECS: u64 = 3600;
/// Default maximum attempts for transient provider failures.
pub const DEFAULT_MAX_RETRIES: u32 = 3;

/// The built-in providers: (name, kind, base URL, key variable).
pub const BUILTIN_PROVIDERS: [(&str, ProviderKind, &str, &str); 2] = [
    (
        "openai",
        ProviderKind::Openai,
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
    ),
    (
        "anthropic",
        ProviderKind::Anthropic,
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
    ),
];

/// Errors from reading, validating or editing the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file exists but could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        /// The config file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a wrongly typed value.
    #[error("config file {path} is invalid: {message}")]
    Parse {
        /// The config file.
        path: PathBuf,
        /// The parser's one-line message, with line and column.
        message: String,
        /// The excerpt of the file the parser points at, if it gave one.
        snippet: Option<String>,
    },
    /// A key's value is well-typed but not acceptable.
    #[error("config file {path}: `{key}` {message}")]
    InvalidEntry {
        /// The config file.
        path: PathBuf,
        /// The offending key, dotted.
        key: String,
        /// What is wrong and what is accepted.
        message: String,
    },
    /// The key given on the command line is not a known configuration key.
    #[error("unknown config key `{key}`")]
    UnknownKey {
        /// The key as given.
        key: String,
        /// The nearest known key, if one is close.
        suggestion: Option<String>,
    },
    /// The value given on the command line is not acceptable for the key.
    #[error("invalid value `{value}` for `{key}`: {expected}")]
    InvalidValue {
        /// The key.
        key: String,
        /// The value as given.
        value: String,
        /// What the key accepts.
        expected: String,
    },
    /// Writing the file (or its lock or temporary file) failed; the old file is unchanged.
    #[error("cannot write config file {path}: {source}")]
    Write {
        /// The path being written.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// A loaded configuration: the file's parsed content and where it came from.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// The file's content (all `None` when the file does not exist).
    pub file: ConfigFile,
    /// The path it was read from.
    pub path: PathBuf,
    /// Whether the file exists.
    pub exists: bool,
}

impl Config {
    /// Reads and validates the config file; a missing file yields the defaults.
    ///
    /// # Errors
    /// [`ConfigError::Read`], [`ConfigError::Parse`] (with line and column) or
    /// [`ConfigError::InvalidEntry`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match fs::read_to_string(path) {
            Ok(text) => {
                let file = parse_and_validate(path, &text)?;
                Ok(Self {
                    file,
                    path: path.to_path_buf(),
                    exists: true,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self {
                file: ConfigFile::default(),
                path: path.to_path_buf(),
                exists: false,
            }),
            Err(source) => Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Days that checkpoint refs and the sandboxes of finished plans are kept
    /// (`sandbox-retention-days`, default 7).
    pub fn sandbox_retention_days(&self) -> u32 {
        self.file
            .sandbox_retention_days
            .unwrap_or(DEFAULT_RETENTION_DAYS)
    }

    /// How long a plan's driver may stay silent (no heartbeat) before another process takes
    /// the plan over (`lease-expiry-secs`, default 30).
    pub fn lease_expiry(&self) -> std::time::Duration {
        self.file
            .lease_expiry_secs
            .map_or(crate::lease::DEFAULT_EXPIRY, |s| {
                std::time::Duration::from_secs(u64::from(s))
            })
    }

    /// Where sandboxes' checkpoints are also kept for other instances (`checkpoint-store`).
    pub fn checkpoint_store(&self) -> Option<&Path> {
        self.file.checkpoint_store.as_deref()
    }

    /// How many children of one `subplan_parallel_spawn` group run at once
    /// (`max-parallel-children`, default 2).
    pub fn max_parallel_children(&self) -> usize {
        self.file
            .max_parallel_children
            .map_or(DEFAULT_MAX_PARALLEL_CHILDREN, |n| n as usize)
    }

    /// The directories searched for Agent Skill folders (`agent-skill-dirs`, separated like
    /// `PATH`; `~/` is the home directory), in order; none by default.
    pub fn agent_skill_dirs(&self) -> Vec<PathBuf> {
        let Some(list) = self.file.agent_skill_dirs.as_deref() else {
            return Vec::new();
        };
        std::env::split_paths(list)
            .filter(|p| !p.as_os_str().is_empty())
            .map(|p| match (p.strip_prefix("~"), std::env::var_os("HOME")) {
                (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
                _ => p,
            })
            .collect()
    }

    /// Whether the `.agents/skills/` folders of a plan's resources are searched for Agent
    /// Skills (`agent-skills-in-resources`, default false: a repository's skills are offered
    /// only when the user opts in).
    pub fn agent_skills_in_resources(&self) -> bool {
        self.file.agent_skills_in_resources.unwrap_or(false)
    }

    /// All providers: the built-ins merged with the file's tables, sorted by name.
    pub fn providers(&self) -> Vec<Provider> {
        let mut out: BTreeMap<String, Provider> = BTreeMap::new();
        for (name, kind, url, env) in BUILTIN_PROVIDERS {
            out.insert(
                name.to_string(),
                Provider {
                    api_key_env: Some(env.to_string()),
                    builtin: true,
                    ..Provider::new(name, kind, url)
                },
            );
        }
        for (name, table) in &self.file.providers {
            let builtin = out.contains_key(name);
            let (Some(kind), Some(base_url)) = (table.kind, table.base_url.clone()) else {
                if !builtin {
                    // Incomplete: reported by `incomplete_providers`, unusable until fixed.
                    continue;
                }
                let entry = out.get_mut(name).expect("checked above");
                merge(entry, table);
                continue;
            };
            let entry = out
                .entry(name.clone())
                .or_insert_with(|| Provider::new(name, kind, &base_url));
            merge(entry, table);
        }
        out.into_values().collect()
    }

    /// Providers in the file that cannot be used yet, with what is missing and the command
    /// that fixes it: a provider that is not built in needs `kind` and `base_url`.
    pub fn incomplete_providers(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (name, table) in &self.file.providers {
            if BUILTIN_PROVIDERS.iter().any(|(n, ..)| n == name) {
                continue;
            }
            for (field, missing, example) in [
                ("kind", table.kind.is_none(), "openai"),
                (
                    "base_url",
                    table.base_url.is_none(),
                    "http://127.0.0.1:11434/v1",
                ),
            ] {
                if missing {
                    out.push((
                        name.clone(),
                        format!("`{field}` is missing: agents config set providers.{name}.{field} {example}"),
                    ));
                }
            }
        }
        out
    }
}

/// Applies the fields a table sets over a provider.
fn merge(entry: &mut Provider, table: &ProviderTable) {
    if let Some(kind) = table.kind {
        entry.kind = kind;
    }
    if let Some(url) = &table.base_url {
        entry.base_url.clone_from(url);
    }
    if let Some(env) = &table.api_key_env {
        entry.api_key_env = if env.is_empty() {
            None
        } else {
            Some(env.clone())
        };
    }
    entry.headers.extend(table.headers.clone());
    if let Some(t) = table.timeout_secs {
        entry.timeout_secs = t;
    }
    if let Some(r) = table.max_retries {
        entry.max_retries = r;
    }
    if table.max_tokens_field.is_some() {
        entry.max_tokens_field = table.max_tokens_field;
    }
    if let Some(d) = table.call_deadline_secs {
        entry.call_deadline_secs = d;
    }
    if let Some(d) = table.step_deadline_secs {
        entry.step_deadline_secs = d;
    }
    if table.requests_per_minute.is_some() {
        entry.requests_per_minute = table.requests_per_minute;
    }
    if table.tokens_per_minute.is_some() {
        entry.tokens_per_minute = table.tokens_per_minute;
    }
    entry.models.extend(table.models.clone());
}

/// The top-level keys, with their environment variable, flag and default.
#[derive(Debug, Clone, Copy)]
pub struct KeySpec {
    /// Key name as written in the file.
    pub name: &'static str,
    /// One-line description.
    pub description: &'static str,
    /// Environment variable that overrides the file, if any.
    pub env: Option<&'static str>,
    /// Command-line flag that overrides everything, if any.
    pub flag: Option<&'static str>,
    /// Compiled-in default, if any.
    pub default: Option<&'static str>,
    /// A valid value of the key's own type as a TOML literal (the default where there is
    /// one), shown commented out in the file `init` writes.
    pub example: &'static str,
}

/// Every top-level key, in display order.
pub const KEYS: [KeySpec; 12] = [
    KeySpec {
        name: "automation-profile",
        description: "automation profile for new plans (built-in name or namespaced custom profile)",
        env: Some("AGENTS_AUTOMATION_PROFILE"),
        flag: None,
        default: Some(DEFAULT_AUTOMATION_PROFILE),
        example: "\"manual\"",
    },
    KeySpec {
        name: "format",
        description: "default output format: rich, color, table, plain, json or yaml",
        env: Some("AGENTS_FORMAT"),
        flag: Some("--format"),
        default: Some("rich"),
        example: "\"rich\"",
    },
    KeySpec {
        name: "invariant-actor",
        description: "default actor that reconciles conflicting invariants",
        env: Some("AGENTS_INVARIANT_ACTOR"),
        flag: None,
        default: None,
        example: "\"local/reconciler\"",
    },
    KeySpec {
        name: "log-level",
        description: "log file level: error, warn, info, debug or trace",
        env: Some("AGENTS_LOG"),
        flag: Some("-v"),
        default: Some("info"),
        example: "\"info\"",
    },
    KeySpec {
        name: "sandbox-retention-days",
        description: "days checkpoint refs and the sandboxes of finished plans are kept",
        env: None,
        flag: None,
        default: Some("7"),
        example: "7",
    },
    KeySpec {
        name: "lease-expiry-secs",
        description: "seconds a plan's driver may stay silent before another server instance takes the plan over",
        env: None,
        flag: None,
        default: Some("30"),
        example: "30",
    },
    KeySpec {
        name: "checkpoint-store",
        description: "directory every server instance reads where sandboxes' checkpoints are also kept, so another instance can rebuild a plan's sandbox",
        env: None,
        flag: None,
        default: None,
        example: "\"/srv/agents/checkpoints\"",
    },
    KeySpec {
        name: "max-parallel-children",
        description: "how many child plans of one parallel spawn group run at once",
        env: None,
        flag: None,
        default: Some("2"),
        example: "2",
    },
    KeySpec {
        name: "max-cost-usd",
        description: "default budget of a new plan's model calls, in US dollars (plan use --max-cost-usd)",
        env: None,
        flag: None,
        default: None,
        example: "5.0",
    },
    KeySpec {
        name: "max-tokens",
        description: "default budget of a new plan's model calls, in tokens (plan use --max-tokens)",
        env: None,
        flag: None,
        default: None,
        example: "2000000",
    },
    KeySpec {
        name: "agent-skill-dirs",
        description: "directories of Agent Skill folders (SKILL.md) offered to model actors, separated by `:`",
        env: None,
        flag: None,
        default: None,
        example: "\"~/.agents/skills\"",
    },
    KeySpec {
        name: "agent-skills-in-resources",
        description: "also offer the Agent Skills in .agents/skills/ of a plan's resources: true or false",
        env: None,
        flag: None,
        default: Some("false"),
        example: "false",
    },
];

/// Fields of a `[providers.NAME]` table that `config set` accepts.
pub const PROVIDER_FIELDS: [&str; 12] = [
    "kind",
    "base_url",
    "api_key_env",
    "headers",
    "timeout_secs",
    "max_retries",
    "max_tokens_field",
    "call_deadline_secs",
    "step_deadline_secs",
    "requests_per_minute",
    "tokens_per_minute",
    "models",
];

/// Fields of a `[providers.NAME.models."MODEL"]` table that `config set` accepts.
pub const MODEL_FIELDS: [&str; 5] = [
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "cache_read_usd_per_mtok",
    "cache_write_usd_per_mtok",
    "max_output_tokens",
];

/// A parsed configuration key path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyPath {
    /// One of [`KEYS`].
    Top(&'static KeySpec),
    /// `providers.NAME.FIELD` (with one more segment for `headers.X`, two more for
    /// `models."M".input_usd_per_mtok`).
    Provider {
        /// Provider name.
        provider: String,
        /// Remaining segments after the provider name.
        rest: Vec<String>,
    },
}

impl PartialEq for KeySpec {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}
impl Eq for KeySpec {}

impl KeyPath {
    /// Parses a dotted key (`format`, `providers.ollama.base_url`,
    /// `providers.openai.models."gpt-4.1".input_usd_per_mtok`).
    ///
    /// # Errors
    /// [`ConfigError::UnknownKey`] with the nearest known key as a suggestion.
    pub fn parse(key: &str) -> Result<Self, ConfigError> {
        let unknown = |suggestion: Option<String>| ConfigError::UnknownKey {
            key: key.to_string(),
            suggestion,
        };
        let parts: Vec<String> = toml_edit::Key::parse(key)
            .map_err(|_| unknown(None))?
            .into_iter()
            .map(|k| k.get().to_string())
            .collect();
        match parts.as_slice() {
            [single] => KEYS
                .iter()
                .find(|spec| spec.name == single)
                .map(KeyPath::Top)
                .ok_or_else(|| {
                    unknown(nearest(
                        single,
                        KEYS.iter().map(|k| k.name).chain(["providers.NAME.FIELD"]),
                    ))
                }),
            [providers, name, field, rest @ ..] if providers == "providers" => {
                check_provider_name(name).map_err(|expected| ConfigError::InvalidValue {
                    key: format!("providers.{name}"),
                    value: name.clone(),
                    expected,
                })?;
                let ok = match (field.as_str(), rest.len()) {
                    ("headers", 1) => is_header_name(&rest[0]),
                    ("models", 2) => MODEL_FIELDS.contains(&rest[1].as_str()),
                    (f, 0) => {
                        PROVIDER_FIELDS[..PROVIDER_FIELDS.len() - 1].contains(&f) && f != "headers"
                    }
                    _ => false,
                };
                if ok {
                    let mut rest_all = vec![field.clone()];
                    rest_all.extend(rest.iter().cloned());
                    return Ok(KeyPath::Provider {
                        provider: name.clone(),
                        rest: rest_all,
                    });
                }
                let suggestion = match field.as_str() {
                    "headers" => format!("providers.{name}.headers.X-Header-Name"),
                    "models" => {
                        // `models.gpt-4.1.input_usd_per_mtok` splits the model name at its dots.
                        let price = rest
                            .last()
                            .filter(|p| MODEL_FIELDS.contains(&p.as_str()))
                            .cloned();
                        let model_parts = if price.is_some() {
                            &rest[..rest.len() - 1]
                        } else {
                            rest
                        };
                        let model = if model_parts.is_empty() {
                            "MODEL".to_string()
                        } else {
                            model_parts.join(".")
                        };
                        format!(
                            "providers.{name}.models.\"{model}\".{} (quote model names that contain dots)",
                            price.unwrap_or_else(|| "input_usd_per_mtok".to_string())
                        )
                    }
                    _ => match nearest(field, PROVIDER_FIELDS.iter().copied()) {
                        Some(f) => format!("providers.{name}.{f}"),
                        None => {
                            format!("one of providers.{name}.{{{}}}", PROVIDER_FIELDS.join(","))
                        }
                    },
                };
                Err(unknown(Some(suggestion)))
            }
            [first, ..] => Err(unknown(nearest(
                first,
                KEYS.iter().map(|k| k.name).chain(["providers"]),
            ))),
            [] => Err(unknown(None)),
        }
    }

    /// The path segments in the TOML document.
    pub fn segments(&self) -> Vec<String> {
        match self {
            KeyPath::Top(spec) => vec![spec.name.to_string()],
            KeyPath::Provider { provider, rest } => {
                let mut v = vec!["providers".to_string(), provider.clone()];
                v.extend(rest.iter().cloned());
                v
            }
        }
    }

    /// The canonical dotted form, quoting segments that need it.
    pub fn dotted(&self) -> String {
        self.segments()
            .iter()
            .map(|s| toml_edit::Key::new(s.as_str()).display_repr().into_owned())
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// The nearest candidate to `input` by edit distance, if it is plausibly a typo.
pub fn nearest<'a>(input: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let input = input.to_ascii_lowercase();
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(&input, &c.to_ascii_lowercase()), c))
        .filter(|(score, _)| *score >= 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c.to_string())
}

/// Validates one value for a key and converts it to the TOML value to store.
///
/// # Errors
/// [`ConfigError::InvalidValue`] naming what the key accepts.
pub fn typed_value(path: &KeyPath, value: &str) -> Result<toml_edit::Value, ConfigError> {
    let invalid = |expected: &str| ConfigError::InvalidValue {
        key: path.dotted(),
        value: value.to_string(),
        expected: expected.to_string(),
    };
    match path {
        KeyPath::Top(spec) if spec.name == "sandbox-retention-days" => match value.parse::<i64>() {
            Ok(n) if (0..=3650).contains(&n) => Ok(n.into()),
            _ => Err(invalid("a whole number of days from 0 to 3650")),
        },
        KeyPath::Top(spec) if spec.name == "lease-expiry-secs" => match value.parse::<i64>() {
            Ok(n) if (LEASE_EXPIRY_RANGE).contains(&n) => Ok(n.into()),
            _ => Err(invalid("a whole number of seconds from 5 to 3600")),
        },
        KeyPath::Top(spec) if spec.name == "max-parallel-children" => match value.parse::<i64>() {
            Ok(n) if (1..=64).contains(&n) => Ok(n.into()),
            _ => Err(invalid("a whole number from 1 to 64")),
        },
        KeyPath::Top(spec) if spec.name == "max-cost-usd" => match value.parse::<f64>() {
            Ok(n) if n.is_finite() && n >= 0.0 => Ok(n.into()),
            _ => Err(invalid("a non-negative number of US dollars")),
        },
        KeyPath::Top(spec) if spec.name == "agent-skills-in-resources" => match value {
            "true" => Ok(true.into()),
            "false" => Ok(false.into()),
            _ => Err(invalid("true or false")),
        },
        KeyPath::Top(spec) if spec.name == "max-tokens" => match value.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n.into()),
            _ => Err(invalid("a whole number of tokens of at least 1")),
        },
        KeyPath::Top(spec) => {
            check_top_value(spec.name, value).map_err(|e| invalid(&e))?;
            Ok(value.into())
        }
        KeyPath::Provider { provider, rest } => {
            let builtin = BUILTIN_PROVIDERS.iter().find(|(n, ..)| n == provider);
            match rest[0].as_str() {
                "kind" => match (value, builtin) {
                    (_, Some((name, kind, ..))) if value != kind.as_str() => {
                        Err(invalid(&format!(
                            "`{}`: the built-in provider `{name}` always speaks its own protocol; \
                         add your server under another name, e.g. providers.my-{name}.kind",
                            kind.as_str()
                        )))
                    }
                    ("openai" | "anthropic", _) => Ok(value.into()),
                    (
                        "ollama" | "llama.cpp" | "llamacpp" | "vllm" | "lmstudio" | "lm-studio"
                        | "localai",
                        _,
                    ) => Err(invalid(
                        "`openai`: Ollama, llama.cpp, vLLM and LM Studio all speak the OpenAI-compatible \
                             protocol (kind openai, with base_url pointing at the server)",
                    )),
                    _ => Err(invalid("one of: openai, anthropic")),
                },
                "base_url" => check_url(value)
                    .map(|()| value.into())
                    .map_err(|e| invalid(&e)),
                "api_key_env" => check_env_name(value)
                    .map(|()| value.into())
                    .map_err(|e| invalid(&e)),
                "headers"
                    if value.chars().all(|c| {
                        c == ' ' || c.is_ascii_graphic() || (!c.is_ascii() && !c.is_control())
                    }) =>
                {
                    Ok(value.into())
                }
                "headers" => Err(invalid(
                    "a header value without control characters (no newlines, tabs or escapes)",
                )),
                "timeout_secs" => match value.parse::<i64>() {
                    Ok(n) if (1..=3600).contains(&n) => Ok(n.into()),
                    _ => Err(invalid("a whole number of seconds from 1 to 3600")),
                },
                "max_retries" => match value.parse::<i64>() {
                    Ok(n) if (0..=20).contains(&n) => Ok(n.into()),
                    _ => Err(invalid("a whole number from 0 to 20")),
                },
                "max_tokens_field" => match value {
                    "max_tokens" | "max_completion_tokens" => Ok(value.into()),
                    _ => Err(invalid("one of: max_completion_tokens, max_tokens")),
                },
                "call_deadline_secs" | "step_deadline_secs" => match value.parse::<i64>() {
                    Ok(n) if (1..=86_400).contains(&n) => Ok(n.into()),
                    _ => Err(invalid("a whole number of seconds from 1 to 86400")),
                },
                "requests_per_minute" | "tokens_per_minute" => match value.parse::<i64>() {
                    Ok(n) if n >= 1 => Ok(n.into()),
                    _ => Err(invalid("a whole number of at least 1")),
                },
                "models" if rest.get(2).map(String::as_str) == Some("max_output_tokens") => {
                    match value.parse::<i64>() {
                        Ok(n) if (1..=i64::from(u32::MAX)).contains(&n) => Ok(n.into()),
                        _ => Err(invalid("a whole number of tokens of at least 1")),
                    }
                }
                "models" => match value.parse::<f64>() {
                    Ok(n) if n.is_finite() && n >= 0.0 => Ok(n.into()),
                    _ => Err(invalid(
                        "a non-negative number of US dollars per million tokens",
                    )),
                },
                _ => Err(invalid("a known provider field")),
            }
        }
    }
}

fn check_top_value(key: &str, value: &str) -> Result<(), String> {
    match key {
        "format" if FORMATS.contains(&value) => Ok(()),
        "checkpoint-store" if Path::new(value).is_absolute() => Ok(()),
        "checkpoint-store" => Err("an absolute directory path".into()),
        "format" => Err(format!("one of: {}", FORMATS.join(", "))),
        "log-level" if LOG_LEVELS.contains(&value.to_ascii_lowercase().as_str()) => Ok(()),
        "log-level" => Err(format!("one of: {}", LOG_LEVELS.join(", "))),
        "automation-profile" => {
            if is_builtin_profile(value) {
                return Ok(());
            }
            match crate::domain::name::QualifiedName::parse(value) {
                Ok(n) if n.namespace.is_some() => Ok(()),
                _ => Err("a built-in profile (locked-down, manual, supervised, trusted, autonomous, full-auto) \
                          or a namespaced custom profile such as local/careful"
                    .to_string()),
            }
        }
        "invariant-actor" => crate::domain::name::QualifiedName::parse(value)
            .map(|_| ())
            .map_err(|e| format!("an actor name such as local/reconciler ({e})")),
        _ => Ok(()),
    }
}

/// Whether `name` is a valid HTTP header name (an RFC 9110 token).
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c))
}

fn check_provider_name(name: &str) -> Result<(), String> {
    let valid = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if !valid {
        return Err("a provider name of lowercase letters, digits, `-` and `_`".to_string());
    }
    if matches!(name, "local" | "builtin") {
        return Err(format!(
            "a provider name other than the reserved namespace `{name}`"
        ));
    }
    Ok(())
}

fn check_url(value: &str) -> Result<(), String> {
    let ok = (value.starts_with("http://") || value.starts_with("https://"))
        && value.len() > "http://".len()
        && !value.chars().any(char::is_whitespace);
    if ok {
        Ok(())
    } else {
        Err("an http:// or https:// URL such as http://127.0.0.1:11434/v1".to_string())
    }
}

fn check_env_name(value: &str) -> Result<(), String> {
    let ok = value
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
        && value
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(
            "the NAME of an environment variable (such as OPENAI_API_KEY), never the key itself"
                .to_string(),
        )
    }
}

/// Splits a TOML error into its one-line message (`... at line 2, column 18: unclosed table`)
/// and the excerpt of the file it shows.
fn split_toml_error(text: &str) -> (String, Option<String>) {
    let mut lines = text.trim_end().lines();
    let head = lines.next().unwrap_or("invalid TOML").trim().to_string();
    let mut excerpt = Vec::new();
    let mut reason = None;
    for line in lines {
        if line.trim_start().starts_with('|')
            || line.trim().chars().all(|c| c.is_ascii_digit())
            || line.contains(" | ")
        {
            excerpt.push(line.to_string());
        } else if !line.trim().is_empty() {
            reason = Some(line.trim().to_string());
        }
    }
    let message = match reason {
        Some(r) => format!("{head}: {r}"),
        None => head,
    };
    (message, (!excerpt.is_empty()).then(|| excerpt.join("\n")))
}

/// Parses the file text and checks every value.
fn parse_and_validate(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
    let file: ConfigFile = toml::from_str(text).map_err(|e| {
        let (message, snippet) = split_toml_error(&e.to_string());
        ConfigError::Parse {
            path: path.to_path_buf(),
            message,
            snippet,
        }
    })?;
    let bad = |key: String, message: String| ConfigError::InvalidEntry {
        path: path.to_path_buf(),
        key,
        message,
    };
    for (key, value) in [
        ("automation-profile", &file.automation_profile),
        ("format", &file.format),
        ("log-level", &file.log_level),
        ("invariant-actor", &file.invariant_actor),
    ] {
        if let Some(v) = value {
            check_top_value(key, v)
                .map_err(|e| bad(key.to_string(), format!("is `{v}`; expected {e}")))?;
        }
    }
    if let Some(index) = &file.index {
        index
            .validate()
            .map_err(|(key, message)| bad(format!("index.{key}"), message))?;
    }
    if let Some(server) = &file.server {
        let mut issuers = std::collections::BTreeSet::new();
        for (i, issuer) in server.oidc.iter().enumerate() {
            issuer
                .validate()
                .map_err(|(key, message)| bad(format!("server.oidc[{i}].{key}"), message))?;
            if !issuers.insert(issuer.issuer.as_str()) {
                return Err(bad(
                    format!("server.oidc[{i}].issuer"),
                    format!(
                        "`{}` is configured twice; give each issuer one table",
                        issuer.issuer
                    ),
                ));
            }
        }
    }
    if let Some(n) = file.max_parallel_children
        && !(1..=64).contains(&n)
    {
        return Err(bad(
            "max-parallel-children".to_string(),
            format!("is `{n}`; expected a whole number from 1 to 64"),
        ));
    }
    if let Some(secs) = file.lease_expiry_secs
        && !LEASE_EXPIRY_RANGE.contains(&i64::from(secs))
    {
        return Err(bad(
            "lease-expiry-secs".to_string(),
            format!("is `{secs}`; expected a whole number of seconds from 5 to 3600"),
        ));
    }
    if let Some(dir) = &file.checkpoint_store
        && !dir.is_absolute()
    {
        return Err(bad(
            "checkpoint-store".to_string(),
            format!(
                "is `{}`; expected an absolute directory path",
                dir.display()
            ),
        ));
    }
    if let Some(days) = file.sandbox_retention_days
        && days > 3650
    {
        return Err(bad(
            "sandbox-retention-days".to_string(),
            format!("is `{days}`; expected a whole number of days from 0 to 3650"),
        ));
    }
    for (name, table) in &file.providers {
        let key = |field: &str| format!("providers.{name}.{field}");
        check_provider_name(name)
            .map_err(|e| bad(format!("providers.{name}"), format!("needs {e}")))?;
        for (header, value) in &table.headers {
            if !is_header_name(header) {
                return Err(bad(
                    format!("providers.{name}.headers"),
                    format!("has an invalid header name `{header}`"),
                ));
            }
            if value.chars().any(char::is_control) {
                return Err(bad(
                    key(&format!("headers.{header}")),
                    "contains control characters (newlines, tabs or escapes)".to_string(),
                ));
            }
        }
        if let Some(url) = &table.base_url {
            check_url(url)
                .map_err(|e| bad(key("base_url"), format!("is `{url}`; expected {e}")))?;
        }
        if let Some(env) = &table.api_key_env
            && !env.is_empty()
        {
            check_env_name(env).map_err(|e| bad(key("api_key_env"), format!("must be {e}")))?;
        }
    }
    Ok(file)
}

/// The result of resolving one key through flag, environment, file and default.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Resolution {
    /// The dotted key.
    pub key: String,
    /// The winning value, if any level has one.
    pub value: Option<String>,
    /// The level that won, if any.
    pub source: Option<Source>,
    /// Every level, in precedence order, with its value (`None` when not set).
    pub chain: Vec<ChainEntry>,
    /// 1-based line in the config file where the key is set, if it is.
    pub file_line: Option<usize>,
}

/// One level of a [`Resolution`] chain.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ChainEntry {
    /// Which level.
    pub source: Source,
    /// Its name: the flag, the variable, the file path or `default`.
    pub origin: String,
    /// The value at this level, if set.
    pub value: Option<String>,
}

/// Values given on the command line that take part in resolution.
#[derive(Debug, Clone, Default)]
pub struct FlagValues {
    /// `--format`, if given.
    pub format: Option<String>,
    /// Number of `-v` flags.
    pub verbose: u8,
}

impl FlagValues {
    fn value_for(&self, key: &str) -> Option<String> {
        match key {
            "format" => self.format.clone(),
            "log-level" => match self.verbose {
                0 => None,
                1 => Some("debug".to_string()),
                _ => Some("trace".to_string()),
            },
            _ => None,
        }
    }
}

/// Resolves a key through flag, environment, file and default.
///
/// `env` looks up environment variables (injected so tests need not mutate the process
/// environment). `text` is the config file's text, used to report the line of the key.
pub fn resolve(
    config: &Config,
    text: Option<&str>,
    path: &KeyPath,
    flags: &FlagValues,
    env: &dyn Fn(&str) -> Option<String>,
) -> Resolution {
    let mut chain = Vec::new();
    let file_value = file_value(&config.file, path);
    match path {
        KeyPath::Top(spec) => {
            if let Some(flag) = spec.flag {
                chain.push(ChainEntry {
                    source: Source::Flag,
                    origin: flag.to_string(),
                    value: flags.value_for(spec.name),
                });
            }
            if let Some(var) = spec.env {
                chain.push(ChainEntry {
                    source: Source::Env,
                    origin: var.to_string(),
                    value: env(var).filter(|v| !v.is_empty()),
                });
            }
            chain.push(ChainEntry {
                source: Source::File,
                origin: config.path.display().to_string(),
                value: file_value,
            });
            chain.push(ChainEntry {
                source: Source::Default,
                origin: "default".to_string(),
                value: spec.default.map(str::to_string),
            });
        }
        KeyPath::Provider { provider, rest } => {
            chain.push(ChainEntry {
                source: Source::File,
                origin: config.path.display().to_string(),
                value: file_value,
            });
            chain.push(ChainEntry {
                source: Source::Default,
                origin: "default".to_string(),
                value: provider_default(provider, &rest[0]),
            });
        }
    }
    let winner = chain.iter().find(|e| e.value.is_some());
    Resolution {
        key: path.dotted(),
        value: winner.and_then(|e| e.value.clone()),
        source: winner.map(|e| e.source),
        file_line: text.and_then(|t| line_of(t, &path.segments())),
        chain,
    }
}

fn provider_default(provider: &str, field: &str) -> Option<String> {
    let builtin = BUILTIN_PROVIDERS.iter().find(|(n, ..)| *n == provider);
    match (field, builtin) {
        ("kind", Some((_, kind, _, _))) => Some(kind.as_str().to_string()),
        ("base_url", Some((_, _, url, _))) => Some((*url).to_string()),
        ("api_key_env", Some((_, _, _, env))) => Some((*env).to_string()),
        ("timeout_secs", _) => Some(DEFAULT_TIMEOUT_SECS.to_string()),
        ("max_retries", _) => Some(DEFAULT_MAX_RETRIES.to_string()),
        ("call_deadline_secs", _) => Some(DEFAULT_CALL_DEADLINE_SECS.to_string()),
        ("step_deadline_secs", _) => Some(DEFAULT_STEP_DEADLINE_SECS.to_string()),
        _ => None,
    }
}

/// The value of a key in the parsed file, rendered as a string.
fn file_value(file: &ConfigFile, path: &KeyPath) -> Option<String> {
    match path {
        KeyPath::Top(spec) => match spec.name {
            "automation-profile" => file.automation_profile.clone(),
            "format" => file.format.clone(),
            "invariant-actor" => file.invariant_actor.clone(),
            "log-level" => file.log_level.clone(),
            "sandbox-retention-days" => file.sandbox_retention_days.map(|d| d.to_string()),
            "max-parallel-children" => file.max_parallel_children.map(|d| d.to_string()),
            "lease-expiry-secs" => file.lease_expiry_secs.map(|d| d.to_string()),
            "checkpoint-store" => file
                .checkpoint_store
                .as_ref()
                .map(|p| p.display().to_string()),
            "max-cost-usd" => file.max_cost_usd.map(|d| d.to_string()),
            "max-tokens" => file.max_tokens.map(|d| d.to_string()),
            "agent-skill-dirs" => file.agent_skill_dirs.clone(),
            "agent-skills-in-resources" => file.agent_skills_in_resources.map(|b| b.to_string()),
            _ => None,
        },
        KeyPath::Provider { provider, rest } => {
            let table = file.providers.get(provider)?;
            match (rest[0].as_str(), rest.get(1), rest.get(2)) {
                ("kind", ..) => table.kind.map(|k| k.as_str().to_string()),
                ("base_url", ..) => table.base_url.clone(),
                ("api_key_env", ..) => table.api_key_env.clone(),
                ("timeout_secs", ..) => table.timeout_secs.map(|v| v.to_string()),
                ("max_retries", ..) => table.max_retries.map(|v| v.to_string()),
                ("max_tokens_field", ..) => table.max_tokens_field.map(|f| f.as_str().into()),
                ("call_deadline_secs", ..) => table.call_deadline_secs.map(|v| v.to_string()),
                ("step_deadline_secs", ..) => table.step_deadline_secs.map(|v| v.to_string()),
                ("requests_per_minute", ..) => table.requests_per_minute.map(|v| v.to_string()),
                ("tokens_per_minute", ..) => table.tokens_per_minute.map(|v| v.to_string()),
                ("headers", Some(h), _) => table.headers.get(h).cloned(),
                ("models", Some(m), Some(field)) => {
                    let price = table.models.get(m)?;
                    match field.as_str() {
                        "input_usd_per_mtok" => price.input_usd_per_mtok.map(|v| v.to_string()),
                        "cache_read_usd_per_mtok" => {
                            price.cache_read_usd_per_mtok.map(|v| v.to_string())
                        }
                        "cache_write_usd_per_mtok" => {
                            price.cache_write_usd_per_mtok.map(|v| v.to_string())
                        }
                        "max_output_tokens" => price.max_output_tokens.map(|v| v.to_string()),
                        _ => price.output_usd_per_mtok.map(|v| v.to_string()),
                    }
                }
                _ => None,
            }
        }
    }
}

/// 1-based line where the key path is defined in `text`, if it is.
pub fn line_of(text: &str, segments: &[String]) -> Option<usize> {
    let doc = toml_edit::Document::parse(text.to_string()).ok()?;
    let mut table: &dyn toml_edit::TableLike = doc.as_table();
    let (last, parents) = segments.split_last()?;
    for seg in parents {
        table = table.get(seg)?.as_table_like()?;
    }
    let (key, _) = table.get_key_value(last)?;
    let start = key.span()?.start;
    Some(text[..start].matches('\n').count() + 1)
}

/// What [`set_value`] changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SetOutcome {
    /// The dotted key.
    pub key: String,
    /// The value now stored.
    pub value: String,
    /// The value stored before, if any.
    pub previous: Option<String>,
    /// The file written.
    pub path: PathBuf,
    /// 1-based line of the key in the new file.
    pub line: Option<usize>,
    /// Whether the file was created by this call.
    pub created: bool,
}

/// Sets one key in the config file, preserving comments and layout.
///
/// Holds an exclusive lock on `<config>.lock` for the whole read-modify-write, validates the
/// resulting file, writes a temporary file in the same directory and renames it into place.
///
/// # Errors
/// [`ConfigError::UnknownKey`] / [`ConfigError::InvalidValue`] for bad input (nothing is
/// written), [`ConfigError::Parse`] / [`ConfigError::InvalidEntry`] when the edited file would
/// not be valid, [`ConfigError::Read`] / [`ConfigError::Write`] for I/O failures.
pub fn set_value(config_path: &Path, key: &str, value: &str) -> Result<SetOutcome, ConfigError> {
    let path = KeyPath::parse(key)?;
    let typed = typed_value(&path, value)?;
    let segments = path.segments();
    let (previous, new_text, created) = edit_file(config_path, |doc| {
        let previous = get_in(doc, &segments);
        set_in(doc, &segments, typed);
        previous
    })?;
    Ok(SetOutcome {
        key: path.dotted(),
        value: value.to_string(),
        previous,
        path: config_path.to_path_buf(),
        line: line_of(&new_text, &segments),
        created,
    })
}

/// What [`unset_value`] changed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnsetOutcome {
    /// The dotted key (`format`, `providers.corp.base_url`, or `providers.corp` for a whole
    /// provider table).
    pub key: String,
    /// The value removed (a whole table is shown as `{...}` TOML), or `None` when the key was
    /// not set (nothing is written then).
    pub previous: Option<String>,
    /// The config file.
    pub path: PathBuf,
}

/// Removes one key from the config file (or a whole `[providers.NAME]` table when `key` is
/// `providers.NAME`) with the same lock, validation and atomic replace as [`set_value`].
/// Removing the last key of a provider table removes the table. A key that is not set is not
/// an error: nothing is written and `previous` is `None`.
///
/// # Errors
/// [`ConfigError::UnknownKey`] for a key that is not a config key, [`ConfigError::Parse`] /
/// [`ConfigError::InvalidEntry`] when the file is invalid, I/O errors.
pub fn unset_value(config_path: &Path, key: &str) -> Result<UnsetOutcome, ConfigError> {
    let parts: Vec<String> = toml_edit::Key::parse(key)
        .map(|ks| ks.into_iter().map(|k| k.get().to_string()).collect())
        .unwrap_or_default();
    let (dotted, segments) = match parts.as_slice() {
        [providers, name] if providers == "providers" => {
            check_provider_name(name).map_err(|expected| ConfigError::InvalidValue {
                key: key.to_string(),
                value: name.clone(),
                expected,
            })?;
            (key.to_string(), parts.clone())
        }
        _ => {
            let path = KeyPath::parse(key)?;
            (path.dotted(), path.segments())
        }
    };
    if !config_path.exists() {
        return Ok(UnsetOutcome {
            key: dotted,
            previous: None,
            path: config_path.to_path_buf(),
        });
    }
    let mut removed = None;
    edit_file(config_path, |doc| {
        removed = remove_in(doc.as_table_mut(), &segments);
    })?;
    Ok(UnsetOutcome {
        key: dotted,
        previous: removed,
        path: config_path.to_path_buf(),
    })
}

/// Removes `segments` under `table`; returns the removed item as text. Tables left empty on
/// the way (an emptied `[providers.NAME]` or `models."m"`) are removed too.
fn remove_in(table: &mut dyn toml_edit::TableLike, segments: &[String]) -> Option<String> {
    let (first, rest) = segments.split_first()?;
    if rest.is_empty() {
        let item = table.remove(first)?;
        return Some(match item.as_value() {
            Some(v) => v
                .as_str()
                .map_or_else(|| v.to_string().trim().to_string(), str::to_string),
            None => item.to_string().trim().to_string(),
        });
    }
    let child = table.get_mut(first)?.as_table_like_mut()?;
    let removed = remove_in(child, rest)?;
    if child.is_empty() && first != "providers" {
        table.remove(first);
    }
    Some(removed)
}

/// Read-modify-write of the config file under the directory lock: applies `edit` to the parsed
/// document, validates the result and replaces the file atomically. Returns what `edit`
/// returned, the new text, and whether the file was created. Nothing is written when the
/// document did not change.
fn edit_file<R>(
    config_path: &Path,
    edit: impl FnOnce(&mut toml_edit::DocumentMut) -> R,
) -> Result<(R, String, bool), ConfigError> {
    let dir = config_path.parent().unwrap_or_else(|| Path::new("."));
    let write_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| ConfigError::Write { path: p, source }
    };
    let _lock = crate::safe_write::lock_dir(dir).map_err(write_err(dir))?;

    let (old_text, created) = match fs::read_to_string(config_path) {
        Ok(t) => (t, false),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), true),
        Err(source) => {
            return Err(ConfigError::Read {
                path: config_path.to_path_buf(),
                source,
            });
        }
    };
    let mut doc: toml_edit::DocumentMut = old_text.parse().map_err(|e: toml_edit::TomlError| {
        let (message, snippet) = split_toml_error(&e.to_string());
        ConfigError::Parse {
            path: config_path.to_path_buf(),
            message,
            snippet,
        }
    })?;
    let comments_only = doc.as_table().is_empty();
    let had_root_values = !doc.as_table().get_values().is_empty();
    let result = edit(&mut doc);
    keep_leading_comments_first(&mut doc, comments_only, had_root_values);
    let new_text = doc.to_string();
    if new_text == old_text && !created {
        return Ok((result, new_text, created));
    }
    if let Err(after) = parse_and_validate(config_path, &new_text) {
        // Report a problem the file already had with its own line numbers; a problem the edit
        // itself causes is named by its key.
        return Err(parse_and_validate(config_path, &old_text)
            .err()
            .unwrap_or(after));
    }
    crate::safe_write::replace_file(config_path, new_text.as_bytes())
        .map_err(write_err(config_path))?;
    Ok((result, new_text, created))
}

/// Keeps a file's leading comments (the header and commented examples `init` writes) above
/// what an edit added. A file of comments only holds them as the document's trailing text,
/// printed after every item; a file whose root has no keys holds them before its first table,
/// and root keys print before every table. Either way the comments become the document's
/// leading text, so a new root key follows them and a new table goes at the end.
fn keep_leading_comments_first(
    doc: &mut toml_edit::DocumentMut,
    comments_only: bool,
    had_root_values: bool,
) {
    let separated = |c: &str| {
        if c.ends_with("\n\n") {
            c.to_string()
        } else {
            format!("{c}\n")
        }
    };
    if comments_only {
        let trailing = doc.trailing().as_str().unwrap_or_default().to_string();
        if !doc.as_table().is_empty() && !trailing.trim().is_empty() {
            doc.decor_mut().set_prefix(separated(&trailing));
            doc.set_trailing("");
        }
        return;
    }
    if had_root_values || doc.as_table().get_values().is_empty() {
        return;
    }
    // Root keys were added to a file that had only tables: the first table's leading comments
    // are the file's header.
    let mut first: Option<(isize, Vec<String>)> = None;
    fn visit(
        t: &toml_edit::Table,
        path: &mut Vec<String>,
        first: &mut Option<(isize, Vec<String>)>,
    ) {
        for (k, item) in t.iter() {
            if let Some(sub) = item.as_table() {
                path.push(k.to_string());
                if let Some(pos) = sub.position()
                    && !sub.is_implicit()
                    && first.as_ref().is_none_or(|(p, _)| pos < *p)
                {
                    *first = Some((pos, path.clone()));
                }
                visit(sub, path, first);
                path.pop();
            }
        }
    }
    visit(doc.as_table(), &mut Vec::new(), &mut first);
    let Some((_, path)) = first else { return };
    let mut table = doc.as_table_mut();
    for k in &path {
        match table.get_mut(k).and_then(toml_edit::Item::as_table_mut) {
            Some(t) => table = t,
            None => return,
        }
    }
    let leading = table
        .decor()
        .prefix()
        .and_then(|p| p.as_str())
        .unwrap_or_default()
        .to_string();
    if leading.trim().is_empty() {
        return;
    }
    table.decor_mut().set_prefix("\n");
    doc.decor_mut().set_prefix(separated(&leading));
}

fn get_in(doc: &toml_edit::DocumentMut, segments: &[String]) -> Option<String> {
    let mut item = doc.as_item();
    for seg in segments {
        item = item.get(seg)?;
    }
    item.as_value().map(|v| match v.as_str() {
        Some(s) => s.to_string(),
        None => v.to_string().trim().to_string(),
    })
}

fn set_in(doc: &mut toml_edit::DocumentMut, segments: &[String], value: toml_edit::Value) {
    set_in_table(doc.as_table_mut(), segments, value, false);
}

/// Sets `segments` under `table`, creating missing tables as it goes: standard tables that stay
/// implicit (no empty `[providers]` header), or inline tables inside a hand-written inline
/// table, which is kept inline with its comments.
fn set_in_table(
    table: &mut dyn toml_edit::TableLike,
    segments: &[String],
    value: toml_edit::Value,
    inline: bool,
) {
    let (first, rest) = segments
        .split_first()
        .expect("key paths have at least one segment");
    if rest.is_empty() {
        match table.get_mut(first).and_then(|i| i.as_value_mut()) {
            Some(existing) => {
                // Keep the comment and whitespace decorations of the old value.
                let decor = existing.decor().clone();
                *existing = value;
                *existing.decor_mut() = decor;
            }
            None => {
                table.insert(first, toml_edit::Item::Value(value));
            }
        }
        return;
    }
    if !table.get(first).is_some_and(toml_edit::Item::is_table_like) {
        let child = if inline {
            toml_edit::Item::Value(toml_edit::Value::InlineTable(toml_edit::InlineTable::new()))
        } else {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        };
        table.insert(first, child);
    }
    let child = table.get_mut(first).expect("inserted above");
    let child_inline = child.is_inline_table();
    let child = child.as_table_like_mut().expect("ensured a table above");
    set_in_table(child, rest, value, child_inline);
}

/// The text of a new config file: every key documented and commented out.
pub fn default_file_text() -> String {
    let mut s = String::from(
        "# CleverAgents configuration.\n\
         # Edit with `agents config set KEY VALUE` (comments are preserved) or by hand.\n\n",
    );
    for spec in KEYS {
        s.push_str(&format!("# {}\n", spec.description));
        s.push_str(&format!("# {} = {}\n\n", spec.name, spec.example));
    }
    s.push_str(
        "# Providers: built in are `openai` (OPENAI_API_KEY) and `anthropic` (ANTHROPIC_API_KEY).\n\
         # A local OpenAI-compatible server (Ollama, llama.cpp, vLLM, LM Studio) needs no key:\n\
         # [providers.ollama]\n\
         # kind = \"openai\"\n\
         # base_url = \"http://127.0.0.1:11434/v1\"\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn oidc_issuers_are_tables_of_server_oidc_each_with_one_source_of_keys() {
        let path = Path::new("/x/config.toml");
        let ok = "[[server.oidc]]\nissuer = \"https://a\"\naudience = \"agents\"\njwks-url = \"https://a/jwks\"\n\n[[server.oidc]]\nissuer = \"https://b\"\naudience = \"agents\"\njwks-file = \"/etc/b.json\"\nuser-claim = \"email\"\n";
        let file = parse_and_validate(path, ok).unwrap();
        let config = Config {
            file,
            path: path.to_path_buf(),
            exists: true,
        };
        let issuers = config.oidc_issuers();
        assert_eq!(issuers.len(), 2);
        assert_eq!(issuers[0].user_claim(), "sub");
        assert_eq!(issuers[1].user_claim(), "email");
        for (text, key) in [
            (
                "[[server.oidc]]\nissuer = \"https://a\"\naudience = \"x\"\n",
                "server.oidc[0].jwks-url",
            ),
            (
                "[[server.oidc]]\nissuer = \"https://a\"\naudience = \"x\"\njwks-file = \"rel.json\"\n",
                "server.oidc[0].jwks-file",
            ),
            (
                "[[server.oidc]]\nissuer = \"\"\naudience = \"x\"\njwks-url = \"https://a\"\n",
                "server.oidc[0].issuer",
            ),
        ] {
            match parse_and_validate(path, text) {
                Err(ConfigError::InvalidEntry { key: k, .. }) => assert_eq!(k, key, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        assert!(matches!(
            parse_and_validate(path, "[server]\nport = 1\n"),
            Err(ConfigError::Parse { .. })
        ));
    }

    #[test]
    fn unknown_top_level_key_suggests_the_nearest() {
        match KeyPath::parse("formt") {
            Err(ConfigError::UnknownKey { suggestion, .. }) => {
                assert_eq!(suggestion.as_deref(), Some("format"))
            }
            other => panic!("expected UnknownKey, got {other:?}"),
        }
    }

    #[test]
    fn provider_keys_parse_with_quoted_model_names() {
        let p = KeyPath::parse("providers.openai.models.\"gpt-4.1\".input_usd_per_mtok").unwrap();
        assert_eq!(
            p.segments(),
            [
                "providers",
                "openai",
                "models",
                "gpt-4.1",
                "input_usd_per_mtok"
            ]
        );
        assert_eq!(
            p.dotted(),
            "providers.openai.models.\"gpt-4.1\".input_usd_per_mtok"
        );
        assert!(KeyPath::parse("providers.openai.colour").is_err());
    }

    #[test]
    fn api_key_env_refuses_something_that_looks_like_a_key() {
        let p = KeyPath::parse("providers.openai.api_key_env").unwrap();
        assert!(typed_value(&p, "sk-abc123").is_err());
        assert!(typed_value(&p, "MY_KEY").is_ok());
    }

    #[test]
    fn set_preserves_comments_and_reports_previous_value() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, "# keep me\nformat = \"json\" # trailing\n").unwrap();
        let out = set_value(&path, "format", "yaml").unwrap();
        assert_eq!(out.previous.as_deref(), Some("json"));
        assert_eq!(out.line, Some(2));
        let text = fs::read_to_string(&path).unwrap();
        assert_eq!(text, "# keep me\nformat = \"yaml\" # trailing\n");
    }

    #[test]
    fn set_provider_key_creates_a_provider_table() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/config.toml");
        set_value(&path, "providers.ollama.kind", "openai").unwrap();
        set_value(
            &path,
            "providers.ollama.base_url",
            "http://127.0.0.1:11434/v1",
        )
        .unwrap();
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains("[providers.ollama]"), "{text}");
        let config = Config::load(&path).unwrap();
        let ollama = config
            .providers()
            .into_iter()
            .find(|p| p.name == "ollama")
            .unwrap();
        assert_eq!(ollama.kind, ProviderKind::Openai);
        assert_eq!(ollama.api_key_env, None);
    }

    #[test]
    fn an_incomplete_provider_is_kept_out_of_use_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        set_value(&path, "providers.ollama.base_url", "http://localhost:1/v1").unwrap();
        let config = Config::load(&path).unwrap();
        assert!(config.providers().iter().all(|p| p.name != "ollama"));
        let problems = config.incomplete_providers();
        assert_eq!(problems.len(), 1);
        assert!(
            problems[0].1.contains("providers.ollama.kind"),
            "{problems:?}"
        );
    }

    #[test]
    fn invalid_file_reports_line_and_column() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, "format = \"json\"\ncolour = 1\n").unwrap();
        let err = Config::load(&path).unwrap_err().to_string();
        assert!(err.contains("line 2"), "{err}");
        assert!(err.contains("colour"), "{err}");
    }

    #[test]
    fn resolution_chain_prefers_flag_then_env_then_file_then_default() {
        let config = Config {
            file: ConfigFile {
                format: Some("table".into()),
                ..Default::default()
            },
            path: "/c.toml".into(),
            exists: true,
        };
        let key = KeyPath::parse("format").unwrap();
        let env = |v: &str| (v == "AGENTS_FORMAT").then(|| "json".to_string());
        let flags = FlagValues {
            format: Some("yaml".into()),
            verbose: 0,
        };
        assert_eq!(
            resolve(&config, None, &key, &flags, &env).source,
            Some(Source::Flag)
        );
        let r = resolve(&config, None, &key, &FlagValues::default(), &env);
        assert_eq!(
            (r.value.as_deref(), r.source),
            (Some("json"), Some(Source::Env))
        );
        let r = resolve(&config, None, &key, &FlagValues::default(), &no_env);
        assert_eq!(
            (r.value.as_deref(), r.source),
            (Some("table"), Some(Source::File))
        );
        let r = resolve(
            &Config::default(),
            None,
            &key,
            &FlagValues::default(),
            &no_env,
        );
        assert_eq!(
            (r.value.as_deref(), r.source),
            (Some("rich"), Some(Source::Default))
        );
    }

    #[test]
    fn default_file_text_is_valid_config() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, default_file_text()).unwrap();
        assert_eq!(Config::load(&path).unwrap().file, ConfigFile::default());
    }
}
