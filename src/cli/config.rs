//! `agents config set|get|list` (spec section 06, `agents config`).

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, env_var};
use crate::output::{Cell, Column, Element, Level, Report, Tone};
use cleveragents_engine::config::{self, KeyPath, Resolution, Source};

/// `agents config ...`
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Set a key in config.toml (comments and layout are kept)
    Set {
        /// Key: automation-profile, format, invariant-actor, log-level, or providers.NAME.FIELD
        key: String,
        /// New value
        value: String,
        /// Set the automation profile of this project instead of the global one (only with
        /// `automation-profile`; the value `inherit` clears it)
        #[arg(long, value_name = "PROJECT")]
        project: Option<String>,
    },
    /// Remove a key from config.toml (or a whole provider with `providers.NAME`), so that
    /// the default applies again
    Unset {
        /// Key: automation-profile, format, invariant-actor, log-level, providers.NAME.FIELD
        /// or providers.NAME
        key: String,
    },
    /// Show a key's value and where it comes from (flag, env, file, default)
    Get {
        /// Key to read
        key: String,
    },
    /// List every key with its value and source
    List {
        /// Show only keys whose value matches this regular expression
        #[arg(long, value_name = "REGEX")]
        filter_values: Option<String>,
        /// Show only keys matching this regular expression
        regex: Option<String>,
    },
}

impl ConfigCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them. The keys of
    /// `config.toml` are this machine's file (read and written here, with no database opened
    /// here); a project's automation profile and a custom profile's registration are the
    /// server's registry.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// `set`, `get` or `list`.
    pub fn name(&self) -> &'static str {
        match self {
            ConfigCommand::Set { .. } => "set",
            ConfigCommand::Unset { .. } => "unset",
            ConfigCommand::Get { .. } => "get",
            ConfigCommand::List { .. } => "list",
        }
    }
}

/// Runs a config subcommand.
///
/// # Errors
/// Unknown keys (`NOT_FOUND`, with the nearest key), invalid values (`INVALID_INPUT`), an
/// invalid config file (`CONFIG_INVALID`), I/O failures.
pub fn run(command: ConfigCommand, ctx: &Context) -> Result<crate::output::Report, CliError> {
    match command {
        ConfigCommand::Set {
            key,
            value,
            project: Some(project),
        } => set_project(ctx, &key, &value, &project),
        ConfigCommand::Set {
            key,
            value,
            project: None,
        } => set(ctx, &key, &value),
        ConfigCommand::Unset { key } => unset(ctx, &key),
        ConfigCommand::Get { key } => get(ctx, &key),
        ConfigCommand::List {
            filter_values,
            regex,
        } => list(ctx, regex.as_deref(), filter_values.as_deref()),
    }
}

fn not_set(v: &Option<String>) -> String {
    v.clone().unwrap_or_else(|| "(not set)".to_string())
}

/// `config set automation-profile --project P NAME`: the project-level profile (spec 27 names
/// this flag; spec 06 omits it; see docs/decisions.md). It is stored on the project, not in
/// config.toml.
fn set_project(ctx: &Context, key: &str, value: &str, project: &str) -> Result<Report, CliError> {
    if key != "automation-profile" {
        return Err(CliError::invalid_input(format!(
            "--project applies only to automation-profile, not `{key}`"
        ))
        .hint(ctx.suggest(&format!("config set {key} {value}"))));
    }
    ctx.check_store()?;
    let clear = value == "inherit";
    let (p, previous) = ctx.change(cleveragents_engine::api::SetProjectProfile {
        project: project.to_string(),
        profile: (!clear).then(|| value.to_string()),
    })?;
    let shown = p
        .automation_profile
        .clone()
        .unwrap_or_else(|| "(inherits global)".into());
    Ok(Report::ok(
        "config set",
        json!({
            "key": "automation-profile",
            "scope": "project",
            "project": p.name,
            "value": p.automation_profile,
            "previous": previous,
        }),
        format!("Set automation-profile = {shown} for {}", p.name),
    )
    .with(Element::panel(
        "Config Updated",
        [
            ("Key", Cell::new("automation-profile", Tone::Id)),
            ("Value", shown.into()),
            (
                "Previous",
                previous
                    .unwrap_or_else(|| "(inherits global)".into())
                    .into(),
            ),
            ("Scope", format!("project {}", p.name).into()),
        ],
    ))
    .with(Element::panel(
        "Effective",
        [
            (
                "Plans",
                "future plans targeting this project (unless the plan or action sets one)",
            ),
            ("Existing", "unchanged"),
        ],
    )))
}

/// A new provider `NAME` would turn every `NAME/...` reference into a provider model, hiding
/// custom actors, projects and the rest registered in that namespace: refused, naming them.
/// A provider that is already configured (or built in) is not new.
fn refuse_shadowing_provider(ctx: &Context, key: &str, provider: &str) -> Result<(), CliError> {
    let known = ctx
        .config
        .as_ref()
        .is_ok_and(|c| c.providers().iter().any(|p| p.name == provider))
        || ctx
            .config
            .as_ref()
            .is_ok_and(|c| c.file.providers.contains_key(provider));
    if known {
        return Ok(());
    }
    // Without a database nothing can be shadowed.
    if ctx.check_store().is_err() {
        return Ok(());
    }
    let users = ctx.client()?.namespace_users(provider)?;
    if users.is_empty() {
        return Ok(());
    }
    let listed: Vec<String> = users.iter().map(|(k, n)| format!("{k} {n}")).collect();
    Err(CliError::new(
        "CONFLICT",
        format!(
            "a provider named `{provider}` would hide what is registered in the namespace {provider}/: {}",
            listed.join(", ")
        ),
    )
    .detail(format!(
        "references such as {provider}/NAME would name provider models instead"
    ))
    .hint(format!(
        "choose another provider name, e.g. {}",
        key.replacen(
            &format!("providers.{provider}."),
            &format!("providers.{provider}-llm."),
            1
        )
    ))
    .data(json!({"provider": provider, "registered": users.iter().map(|(k, n)| json!({"kind": k, "name": n})).collect::<Vec<_>>()})))
}

fn unset(ctx: &Context, key: &str) -> Result<Report, CliError> {
    let outcome = config::unset_value(&ctx.paths.config_path, key)?;
    let status = match &outcome.previous {
        Some(_) => format!("Unset {}{}", outcome.key, on_this_machine(ctx)).replacen(
            "; set in",
            "; unset in",
            1,
        ),
        None => format!("{} was not set; nothing changed", outcome.key),
    };
    Ok(
        Report::ok("config unset", &outcome, status).with(Element::panel(
            "Config Updated",
            [
                ("Key", Cell::new(outcome.key.clone(), Tone::Id)),
                ("Previous", not_set(&outcome.previous).into()),
                ("File", outcome.path.display().to_string().into()),
            ],
        )),
    )
}

/// Through `--server`, where a global key was written: this machine's `config.toml`; the
/// server reads its own (empty without a server).
fn on_this_machine(ctx: &Context) -> String {
    match &ctx.server {
        Some(s) => format!(
            "; set in this machine's config; the server at {} is unchanged (edit config.toml on the server host: the server reads it again when it changes)",
            s.name.as_deref().unwrap_or(&s.url)
        ),
        None => String::new(),
    }
}

fn set(ctx: &Context, key: &str, value: &str) -> Result<Report, CliError> {
    if key == "automation-profile" && value == "inherit" {
        return Err(CliError::invalid_input(
            "`inherit` is only a value for a project's profile (--project PROJECT)",
        )
        .hint(ctx.suggest("config unset automation-profile"))
        .hint("that clears the global default, so `manual` applies"));
    }
    if key == "automation-profile" && !cleveragents_engine::domain::name::is_builtin_profile(value)
    {
        // A custom profile must be registered before it can be the default.
        ctx.check_store()?;
        ctx.client()?.profile_registered(value)?;
    }
    if let Ok(KeyPath::Provider { provider, .. }) = KeyPath::parse(key) {
        refuse_shadowing_provider(ctx, key, &provider)?;
    }
    let outcome = config::set_value(&ctx.paths.config_path, key, value)?;
    let path = KeyPath::parse(key)?;
    let mut report = Report::ok(
        "config set",
        &outcome,
        format!(
            "Set {} = {}{}",
            outcome.key,
            outcome.value,
            on_this_machine(ctx)
        ),
    )
    .with(Element::panel(
        "Config Updated",
        [
            ("Key", Cell::new(outcome.key.clone(), Tone::Id)),
            ("Value", outcome.value.clone().into()),
            ("Previous", not_set(&outcome.previous).into()),
            ("File", outcome.path.display().to_string().into()),
            (
                "Line",
                outcome
                    .line
                    .map(|l| l.to_string())
                    .unwrap_or_default()
                    .into(),
            ),
        ],
    ));
    if ctx.server.is_some() {
        let text = on_this_machine(ctx);
        report = report.message(Level::Warn, text.trim_start_matches("; "));
    }
    // Warn when a higher level hides the value just written.
    let config = cleveragents_engine::Config::load(&ctx.paths.config_path)?;
    let resolved = config::resolve(&config, None, &path, &ctx.setting_flags(), &env_var);
    if let Some(src @ (Source::Flag | Source::Env)) = resolved.source {
        let origin = resolved
            .chain
            .iter()
            .find(|c| c.source == src)
            .map(|c| c.origin.clone())
            .unwrap_or_default();
        report = report.message(
            Level::Warn,
            format!("{origin} is set and overrides this value for now"),
        );
    }
    Ok(report)
}

fn resolution_items(r: &Resolution) -> Vec<String> {
    let mut items: Vec<String> = r
        .chain
        .iter()
        .map(|e| {
            format!(
                "{}. {} ({}): {}",
                e.source.level(),
                e.source.label(),
                e.origin,
                not_set(&e.value)
            )
        })
        .collect();
    items.push(match r.source {
        Some(s) => format!("Winner: {} (level {})", s.label(), s.level()),
        None => "Winner: none (not set at any level)".to_string(),
    });
    items
}

fn get(ctx: &Context, key: &str) -> Result<Report, CliError> {
    let path = KeyPath::parse(key)?;
    let config = ctx.config()?;
    let text = std::fs::read_to_string(&ctx.paths.config_path).ok();
    let r = config::resolve(
        config,
        text.as_deref(),
        &path,
        &ctx.setting_flags(),
        &env_var,
    );
    let data = json!({
        "key": r.key,
        "value": r.value,
        "source": r.source,
        "file": ctx.paths.config_path,
        "line": r.file_line,
        "chain": r.chain,
    });
    Ok(Report::ok("config get", data, "Config read")
        .with(Element::panel(
            "Config",
            [
                ("Key", Cell::new(r.key.clone(), Tone::Id)),
                ("Value", not_set(&r.value).into()),
                (
                    "Source",
                    r.source
                        .map(|s| s.label().to_string())
                        .unwrap_or_else(|| "(none)".into())
                        .into(),
                ),
            ],
        ))
        .with(Element::panel(
            "Origin",
            [
                ("File", ctx.paths.config_path.display().to_string()),
                (
                    "Line",
                    r.file_line
                        .map(|l| l.to_string())
                        .unwrap_or_else(|| "(not in file)".into()),
                ),
            ],
        ))
        .with(Element::List {
            title: "Resolution Chain".into(),
            items: resolution_items(&r),
        }))
}

fn list(ctx: &Context, filter: Option<&str>, values: Option<&str>) -> Result<Report, CliError> {
    let config = ctx.config()?;
    let pattern = filter.map(regex::Regex::new).transpose().map_err(|e| {
        CliError::invalid_input(format!("invalid REGEX: {e}"))
            .hint("e.g. `agents config list '^providers'`")
    })?;
    let value_pattern = values.map(regex::Regex::new).transpose().map_err(|e| {
        CliError::invalid_input(format!("--filter-values: invalid regular expression: {e}"))
            .hint("e.g. `agents config list --filter-values 'anthropic'`")
    })?;
    let text = std::fs::read_to_string(&ctx.paths.config_path).ok();
    let mut keys: Vec<KeyPath> = config::KEYS.iter().map(KeyPath::Top).collect();
    // Built-in providers and every provider table in the file, complete or not.
    let mut names: std::collections::BTreeSet<String> =
        config.providers().into_iter().map(|p| p.name).collect();
    names.extend(config.file.providers.keys().cloned());
    for name in names {
        let provider_key = |rest: Vec<String>| KeyPath::Provider {
            provider: name.clone(),
            rest,
        };
        for field in [
            "kind",
            "base_url",
            "api_key_env",
            "timeout_secs",
            "max_retries",
        ] {
            keys.push(provider_key(vec![field.to_string()]));
        }
        let Some(table) = config.file.providers.get(&name) else {
            continue;
        };
        for header in table.headers.keys() {
            keys.push(provider_key(vec!["headers".into(), header.clone()]));
        }
        for (model, price) in &table.models {
            for (field, v) in [
                ("input_usd_per_mtok", price.input_usd_per_mtok),
                ("output_usd_per_mtok", price.output_usd_per_mtok),
                ("cache_read_usd_per_mtok", price.cache_read_usd_per_mtok),
                ("cache_write_usd_per_mtok", price.cache_write_usd_per_mtok),
                ("max_output_tokens", price.max_output_tokens.map(f64::from)),
            ] {
                if v.is_some() {
                    keys.push(provider_key(vec![
                        "models".into(),
                        model.clone(),
                        field.into(),
                    ]));
                }
            }
        }
    }
    let settings: Vec<Resolution> = keys
        .iter()
        .map(|k| config::resolve(config, text.as_deref(), k, &ctx.setting_flags(), &env_var))
        .filter(|r| pattern.as_ref().is_none_or(|p| p.is_match(&r.key)))
        .filter(|r| {
            value_pattern
                .as_ref()
                .is_none_or(|p| r.value.as_deref().is_some_and(|v| p.is_match(v)))
        })
        .filter(|r| r.value.is_some() || matches!(r.key.as_str(), "invariant-actor"))
        .collect();
    let rows = settings
        .iter()
        .map(|r| {
            let modified = !matches!(r.source, Some(Source::Default) | None);
            vec![
                Cell::new(r.key.clone(), Tone::Id),
                not_set(&r.value).into(),
                r.source
                    .map(|s| s.label().to_string())
                    .unwrap_or_else(|| "-".into())
                    .into(),
                Cell::new(
                    if modified { "yes" } else { "no" },
                    if modified { Tone::Normal } else { Tone::Dim },
                ),
            ]
        })
        .collect();
    let n = settings.len();
    let data = json!({
        "settings": settings.iter().map(|r| json!({
            "key": r.key, "value": r.value, "source": r.source, "line": r.file_line,
        })).collect::<Vec<_>>(),
        "file": {"path": ctx.paths.config_path, "exists": config.exists},
    });
    Ok(Report::ok(
        "config list",
        data,
        super::system::plural(n, "setting", "settings") + " listed",
    )
    .with(Element::Table {
        title: "Config".into(),
        columns: vec![
            Column::left("Key"),
            Column::left("Value"),
            Column::left("Source"),
            Column::left("Modified"),
        ],
        rows,
        empty: "No settings match.".into(),
    })
    .with(Element::panel(
        "Config File",
        [
            ("Path", ctx.paths.config_path.display().to_string()),
            (
                "Exists",
                if config.exists {
                    "yes"
                } else {
                    "no (defaults apply)"
                }
                .to_string(),
            ),
        ],
    )))
}
