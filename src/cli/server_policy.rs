//! `agents server policy set|show` (spec section 22): an organization's policy, on the server
//! host against its data directory (or `--database`), or through `--server`.

use std::path::PathBuf;

use clap::Subcommand;
use serde_json::json;

use super::server_host::{DatabaseArg, engine};
use super::{CliError, Context};
use crate::output::{Element, Report};
use cleveragents_engine::api::policies::{PolicyRecord, PolicyRequest, PolicyView};
use cleveragents_engine::api::{self, Client};

/// `agents server policy` subcommands.
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Set an organization's policy from a YAML file (replaces the one it had)
    Set {
        /// The organization
        org: String,
        /// The policy's YAML file (keys: docs/server.md, "Organization policies")
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// Show an organization's policy
    Show {
        /// The organization
        org: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
}

impl PolicyCommand {
    /// The subcommand's name as the envelope's `command` shows it.
    pub fn name(&self) -> String {
        match self {
            PolicyCommand::Set { .. } => "policy set".into(),
            PolicyCommand::Show { .. } => "policy show".into(),
        }
    }
}

/// The client the command goes through: the chosen server (which keeps its records where it
/// was started to; `--database` and `AGENTS_DATABASE_URL` are for the server host), or this
/// host's engine (on the server host, against its data directory or `--database`).
fn client(ctx: &Context, database: &DatabaseArg) -> Result<Box<dyn Client>, CliError> {
    if ctx.server.is_some() {
        return ctx.client();
    }
    if database.database.is_none() {
        ctx.open_store()?;
    }
    Ok(Box::new(engine(ctx, database)?))
}

/// Runs an `agents server policy` subcommand.
///
/// # Errors
/// `INVALID_INPUT` naming the file and key of a policy that does not parse; `NOT_FOUND` for
/// an unknown organization; store and transport errors.
pub fn run(c: PolicyCommand, ctx: &Context) -> Result<Report, CliError> {
    match c {
        PolicyCommand::Set {
            org,
            config,
            database,
        } => {
            let text = super::remote::read_config(&config)?;
            let view = client(ctx, &database)?.policy(PolicyRequest::Set {
                org,
                file: config.display().to_string(),
                text,
            })?;
            Ok(report("server policy set", &view, true))
        }
        PolicyCommand::Show { org, database } => {
            let view = client(ctx, &database)?.policy(PolicyRequest::Show { org })?;
            Ok(report("server policy show", &view, false))
        }
    }
}

fn report(command: &str, view: &PolicyView, set: bool) -> Report {
    let Some(record) = &view.record else {
        return Report::ok(
            command,
            json!({"org": view.org, "policy": null}),
            format!("{} has no policy: no rule applies to its plans", view.org),
        );
    };
    let status = if set {
        format!("Policy of {} set", view.org)
    } else {
        format!(
            "Policy of {}, set by {} at {}",
            view.org,
            record.updated_by,
            super::view::time(&record.updated_at)
        )
    };
    Report::ok(
        command,
        json!({
            "org": view.org,
            "policy": record.policy,
            "text": record.text,
            "updated_at": record.updated_at,
            "updated_by": record.updated_by,
        }),
        status,
    )
    .with(Element::panel(
        format!("Policy of {}", view.org),
        rules(record),
    ))
}

/// Every rule as `key: value` lines, in the order docs/server.md lists them.
fn rules(record: &PolicyRecord) -> Vec<(String, String)> {
    use api::policies::policy_keys as k;
    let p = &record.policy;
    let list = |items: &[String]| {
        if items.is_empty() {
            "-".to_string()
        } else {
            items.join(", ")
        }
    };
    let map = |m: &std::collections::BTreeMap<String, api::Role>| {
        if m.is_empty() {
            "-".to_string()
        } else {
            m.iter()
                .map(|(name, role)| format!("{name} ({role})"))
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    vec![
        (k::MIN_APPROVALS.into(), p.apply.min_approvals.to_string()),
        (
            k::REQUIRE_ALL_HUNKS_MARKED.into(),
            p.apply.require_all_hunks_marked.to_string(),
        ),
        (k::NETWORK.into(), p.network.as_str().to_string()),
        (
            k::PROFILES_ALLOWED.into(),
            p.profiles
                .allowed
                .as_deref()
                .map_or_else(|| "any".to_string(), list),
        ),
        (
            k::MAX_COST_USD_PER_PLAN.into(),
            p.budgets
                .max_cost_usd_per_plan
                .map_or_else(|| "-".to_string(), |c| format!("${c:.2}")),
        ),
        (
            k::SKILLS_REQUIRE_APPROVAL.into(),
            list(&p.skills.require_approval),
        ),
        (k::SKILLS_RESTRICTED.into(), map(&p.skills.restricted)),
        (k::RESOURCES_RESTRICTED.into(), map(&p.resources.restricted)),
        ("Set by".into(), record.updated_by.clone()),
        ("Set at".into(), super::view::time(&record.updated_at)),
    ]
}
