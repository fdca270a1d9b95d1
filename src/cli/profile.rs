//! `agents automation-profile add|remove|list|show` (spec sections 06 and 27).

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::{CliError, Context, confirm::confirm, view};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::definition_views::{FLAG_GROUPS, ProfileError};
use cleveragents_engine::domain::profile::{Profile, ProfileSource};

/// `agents automation-profile ...`
#[derive(Debug, Subcommand)]
pub enum ProfileCommand {
    /// Register a custom profile from a YAML file (name, description, flags)
    Add {
        /// Profile YAML file
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Replace an existing custom profile of the same name
        #[arg(long)]
        update: bool,
        /// Profile name (default: `name` in the file)
        name: Option<String>,
    },
    /// Remove a custom profile (built-ins cannot be removed)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Profile name
        name: String,
    },
    /// List built-in and custom profiles
    List {
        /// Show only profiles whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show a profile's 13 flags
    Show {
        /// Profile name
        name: String,
    },
}

impl ProfileCommand {
    /// Whether the subcommand can run against a server (`--server`): all of them.
    pub fn served_remotely(&self) -> bool {
        true
    }

    /// The subcommand name.
    pub fn name(&self) -> &'static str {
        match self {
            ProfileCommand::Add { .. } => "add",
            ProfileCommand::Remove { .. } => "remove",
            ProfileCommand::List { .. } => "list",
            ProfileCommand::Show { .. } => "show",
        }
    }
}

/// Runs an automation-profile subcommand.
///
/// # Errors
/// YAML errors with line and column, duplicates without `--update`, built-in names,
/// unknown profiles.
pub fn run(command: ProfileCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ProfileCommand::Add {
            config,
            update,
            name,
        } => add(ctx, &config, update, name.as_deref()),
        ProfileCommand::Remove { yes, name } => remove(ctx, &name, yes),
        ProfileCommand::List { regex } => list(ctx, regex.as_deref()),
        ProfileCommand::Show { name } => show(ctx, &name),
    }
}

/// The profile as structured data: name, source, description, flags (all 13).
pub fn profile_json(p: &Profile) -> serde_json::Value {
    json!({
        "name": p.name,
        "source": p.source.label(),
        "description": p.description,
        "flags": p.flags,
        "config_path": p.config_path,
        "created_at": p.created_at.map(|t| t.to_string()),
        "updated_at": p.updated_at.map(|t| t.to_string()),
    })
}

fn flag_panels(p: &Profile) -> Vec<Element> {
    FLAG_GROUPS
        .iter()
        .map(|(title, names)| {
            Element::panel(
                *title,
                names
                    .iter()
                    .map(|n| (n.to_string(), p.flags.get(n).unwrap_or(false).to_string())),
            )
        })
        .collect()
}

fn add(
    ctx: &Context,
    config: &std::path::Path,
    update: bool,
    name: Option<&str>,
) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let (file, config_text) = super::action::sent_config(ctx, config)?;
    let change = api::AddProfile {
        file,
        name: name.map(str::to_string),
        update,
        config_text,
    };
    let added = ctx.change(change).map_err(|e| match e.into_registry() {
        Ok(api::RegistryError::Profile(ProfileError::Exists(n))) => {
            CliError::new("CONFLICT", format!("automation profile {n} already exists")).hint(
                ctx.suggest(&format!(
                    "automation-profile add --update --config {} {n}",
                    shell_words::quote(&config.display().to_string())
                )),
            )
        }
        Ok(other) => other.into(),
        Err(other) => other.into(),
    })?;
    let p = &added.profile;
    let mut report = Report::ok(
        "automation-profile add",
        json!({"profile": profile_json(p), "replaced": added.replaced}),
        if added.replaced {
            "Profile updated"
        } else {
            "Profile registered"
        },
    )
    .with(Element::panel(
        if added.replaced {
            "Profile Updated"
        } else {
            "Profile Registered"
        },
        [
            ("Name", view::id(p.name.clone())),
            ("Description", view::or(p.description.as_deref(), "(none)")),
            ("Config", p.config_path.clone().unwrap_or_default().into()),
        ],
    ));
    report = report.with(Element::panel(
        "Flags",
        p.flags
            .pairs()
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string())),
    ));
    Ok(report)
}

fn remove(ctx: &Context, name: &str, yes: bool) -> Result<Report, CliError> {
    ctx.check_store()?;
    // Check first, so that refusals never prompt.
    let levels = super::global_setting_levels(ctx, "automation-profile");
    let found = ctx.client()?.profile_usage(name, levels.clone())?;
    let (profile, usage) = (found.profile, found.usage);
    if !usage.is_empty() {
        return Err(in_use(ctx, &profile.name, usage));
    }
    confirm(
        &format!("Remove automation profile {}?", profile.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("automation-profile remove --yes {}", profile.name)),
    )?;
    let removed = ctx.change(api::RemoveProfile {
        profile: name.to_string(),
        globals: levels.clone(),
    })?;
    Ok(Report::ok(
        "automation-profile remove",
        json!({"profile": profile_json(&removed)}),
        "Profile removed",
    )
    .with(Element::panel(
        "Profile Removed",
        [("Name", view::id(removed.name.clone()))],
    )))
}

/// The refusal of `remove` for a profile still in use: who uses it, and one command per user
/// that moves it to another profile.
fn in_use(
    ctx: &Context,
    name: &str,
    usage: cleveragents_engine::api::definition_views::Usage,
) -> CliError {
    let mut err = CliError::new(
        "CONFLICT",
        format!(
            "automation profile {name} is still used by {}",
            usage.describe()
        ),
    )
    .detail("plan use would fail with \"automation profile not found\" for each of them");
    if let Some(origin) = &usage.global {
        err = if origin.starts_with("AGENTS_") {
            err.hint(format!("unset {origin} (or set it to another profile)"))
        } else {
            err.hint(ctx.suggest("config unset automation-profile"))
        };
    }
    for p in &usage.projects {
        err = err.hint(ctx.suggest(&format!(
            "config set automation-profile --project {} inherit",
            shell_words::quote(p)
        )));
    }
    for a in &usage.actions {
        err = err.hint(ctx.suggest(&format!("action archive {}", shell_words::quote(a))));
    }
    err.data(json!({"profile": name, "usage": usage}))
}

fn list(ctx: &Context, regex: Option<&str>) -> Result<Report, CliError> {
    ctx.check_store()?;
    let re = view::regex(regex, "agents automation-profile list '^local/'")?;
    let all: Vec<Profile> = ctx
        .client()?
        .profiles()?
        .into_iter()
        .filter(|p| re.as_ref().is_none_or(|r| r.is_match(&p.name)))
        .collect();
    let builtin = all
        .iter()
        .filter(|p| p.source == ProfileSource::BuiltIn)
        .count();
    let n = all.len();
    let rows = all
        .iter()
        .map(|p| {
            vec![
                view::id(p.name.clone()),
                p.source.label().into(),
                view::flag_cell(p.flags.auto_apply),
                view::flag_cell(p.flags.require_sandbox),
                view::or(p.description.as_deref(), ""),
            ]
        })
        .collect();
    Ok(Report::ok(
        "automation-profile list",
        json!({"profiles": all.iter().map(profile_json).collect::<Vec<_>>()}),
        format!("{n} profile{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Automation Profiles".into(),
        columns: ["Name", "Source", "Auto-Apply", "Sandbox", "Description"]
            .map(Column::left)
            .into(),
        rows,
        empty: "No profiles match.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Built-in", builtin.to_string()),
            ("Custom", (n - builtin).to_string()),
            ("Total", n.to_string()),
        ],
    )))
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    ctx.check_store()?;
    let p = ctx.client()?.profile(name)?;
    let mut report = Report::ok(
        "automation-profile show",
        json!({"profile": profile_json(&p)}),
        "Profile loaded",
    )
    .with(Element::panel(
        "Automation Profile",
        [
            ("Name", view::id(p.name.clone())),
            ("Source", p.source.label().into()),
            ("Description", view::or(p.description.as_deref(), "(none)")),
        ],
    ));
    for e in flag_panels(&p) {
        report = report.with(e);
    }
    Ok(report)
}
