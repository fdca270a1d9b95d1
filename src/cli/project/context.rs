//! `agents project context set|show` (spec 05/06): a project's context policy per view.

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use crate::cli::indexing::bytes;
use crate::cli::{CliError, Context, view};
use crate::output::{Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::registry_views::{
    CONTEXT_VIEWS, ContextPolicy, ResolvedPolicy as Resolved,
};

/// What `context show` says when summarization is on: it is stored but nothing is summarized.
const SUMMARIZE_STATUS: &str = "not yet supported: material is not summarized";

/// The view a policy applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ViewName {
    /// The strategist.
    Strategize,
    /// Execution steps.
    Execute,
    /// Apply's reviewers.
    Apply,
    /// Every phase without a view of its own.
    Default,
}

impl ViewName {
    fn as_str(self) -> &'static str {
        match self {
            ViewName::Strategize => "strategize",
            ViewName::Execute => "execute",
            ViewName::Apply => "apply",
            ViewName::Default => "default",
        }
    }
}

/// `agents project context ...`
#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Set a project's context policy for one view (fields not given keep their value)
    Set(Box<SetArgs>),
    /// Show a project's context policy for one view, as each phase resolves it
    Show {
        /// The view (default: default)
        #[arg(long, value_enum, default_value = "default")]
        view: ViewName,
        /// Project
        project: String,
    },
}

/// `agents project context set` flags.
#[derive(Debug, Args)]
pub struct SetArgs {
    /// The view (default: default)
    #[arg(long, value_enum, default_value = "default")]
    pub view: ViewName,
    /// Only these resources (repeatable)
    #[arg(long = "include-resource", value_name = "INCLUDE_RESOURCE")]
    pub include_resources: Vec<String>,
    /// Never these resources (repeatable)
    #[arg(long = "exclude-resource", value_name = "EXCLUDE_RESOURCE")]
    pub exclude_resources: Vec<String>,
    /// Only paths matching this glob (repeatable)
    #[arg(long = "include-path", value_name = "INCLUDE_GLOB")]
    pub include_paths: Vec<String>,
    /// Never paths matching this glob (repeatable)
    #[arg(long = "exclude-path", value_name = "EXCLUDE_GLOB")]
    pub exclude_paths: Vec<String>,
    /// Soft cap of the hot context, in tokens
    #[arg(long, value_name = "N")]
    pub hot_max_tokens: Option<u64>,
    /// Warm tier size, in decisions
    #[arg(long, value_name = "N_WARM_MAX")]
    pub warm_max_decisions: Option<u64>,
    /// Cold tier size, in decisions
    #[arg(long, value_name = "N_COLD_MAX")]
    pub cold_max_decisions: Option<u64>,
    /// Results per retrieval query
    #[arg(long, value_name = "N")]
    pub query_limit: Option<u64>,
    /// Largest file taken into context, in bytes
    #[arg(long, value_name = "MAX_FILE_BYTES")]
    pub max_file_size: Option<u64>,
    /// Largest total taken into context, in bytes
    #[arg(long, value_name = "MAX_TOTAL_BYTES")]
    pub max_total_size: Option<u64>,
    /// Summarize long material
    #[arg(long, overrides_with = "no_summarize")]
    pub summarize: bool,
    /// Do not summarize
    #[arg(long)]
    pub no_summarize: bool,
    /// Summary length, in tokens
    #[arg(long, value_name = "N")]
    pub summary_max_tokens: Option<u64>,
    /// Clear the view's policy (other flags are refused with it)
    #[arg(long)]
    pub clear: bool,
    /// Project
    pub project: String,
}

impl ContextCommand {
    /// `context set` / `context show`.
    pub fn name(&self) -> &'static str {
        match self {
            ContextCommand::Set(_) => "context set",
            ContextCommand::Show { .. } => "context show",
        }
    }
}

fn over(a: &SetArgs) -> ContextPolicy {
    ContextPolicy {
        include_resources: a.include_resources.clone(),
        exclude_resources: a.exclude_resources.clone(),
        include_paths: a.include_paths.clone(),
        exclude_paths: a.exclude_paths.clone(),
        hot_max_tokens: a.hot_max_tokens,
        warm_max_decisions: a.warm_max_decisions,
        cold_max_decisions: a.cold_max_decisions,
        query_limit: a.query_limit,
        max_file_size: a.max_file_size,
        max_total_size: a.max_total_size,
        summarize: if a.summarize {
            Some(true)
        } else if a.no_summarize {
            Some(false)
        } else {
            None
        },
        summary_max_tokens: a.summary_max_tokens,
    }
}

fn list(v: &[String]) -> String {
    if v.is_empty() {
        "(all)".into()
    } else {
        v.join(", ")
    }
}

fn panels(
    mut report: Report,
    project: &str,
    view_name: &str,
    r: &Resolved,
    set: &ContextPolicy,
    others: &[(String, bool)],
) -> Report {
    let mark = |is_set: bool| if is_set { "" } else { " (default)" };
    report = report
        .with(Element::panel(
            "Context Policy",
            [
                ("Project", view::id(project.to_string())),
                ("View", view_name.to_string().into()),
                (
                    "Include",
                    format!(
                        "resources: {}; paths: {}",
                        list(&r.include_resources),
                        list(&r.include_paths)
                    )
                    .into(),
                ),
                (
                    "Exclude",
                    format!(
                        "resources: {}; paths: {}",
                        if r.exclude_resources.is_empty() {
                            "(none)".into()
                        } else {
                            r.exclude_resources.join(", ")
                        },
                        if r.exclude_paths.is_empty() {
                            "(none)".into()
                        } else {
                            r.exclude_paths.join(", ")
                        }
                    )
                    .into(),
                ),
            ],
        ))
        .with(Element::panel(
            "Limits",
            [
                (
                    "Hot Tokens",
                    format!(
                        "{} (soft cap){}",
                        r.hot_max_tokens,
                        mark(set.hot_max_tokens.is_some())
                    ),
                ),
                (
                    "Warm Decisions",
                    format!(
                        "{}{}",
                        r.warm_max_decisions,
                        mark(set.warm_max_decisions.is_some())
                    ),
                ),
                (
                    "Cold Decisions",
                    format!(
                        "{}{}",
                        r.cold_max_decisions,
                        mark(set.cold_max_decisions.is_some())
                    ),
                ),
                (
                    "Query Limit",
                    format!("{}{}", r.query_limit, mark(set.query_limit.is_some())),
                ),
                (
                    "Max File Size",
                    format!(
                        "{}{}",
                        bytes(r.max_file_size),
                        mark(set.max_file_size.is_some())
                    ),
                ),
                (
                    "Max Total Size",
                    format!(
                        "{}{}",
                        bytes(r.max_total_size),
                        mark(set.max_total_size.is_some())
                    ),
                ),
            ],
        ))
        .with(Element::panel(
            "Summarization",
            [
                ("Enabled", view::yes_no(r.summarize).to_string()),
                ("Max Tokens", r.summary_max_tokens.to_string()),
            ]
            .into_iter()
            .chain(
                r.summarize
                    .then(|| ("Status", SUMMARIZE_STATUS.to_string())),
            ),
        ));
    report.with(Element::panel(
        "Other Views",
        others
            .iter()
            .map(|(v, is_set)| {
                (
                    v.clone(),
                    if *is_set {
                        "(set)".to_string()
                    } else {
                        "(default)".to_string()
                    },
                )
            })
            .collect::<Vec<_>>(),
    ))
}

/// Runs `project context ...`.
///
/// # Errors
/// Unknown project; `--clear` with other flags.
pub fn run(command: ContextCommand, ctx: &Context) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let (project, view_name, set_args) = match &command {
        ContextCommand::Set(a) => (a.project.clone(), a.view.as_str(), Some(a.as_ref())),
        ContextCommand::Show { view, project } => (project.clone(), view.as_str(), None),
    };
    let mut shown = client.project_context(&project, view_name)?;
    let p = shown.project.clone();
    let status = if let Some(a) = set_args {
        let new = if a.clear {
            if !over(a).is_empty() {
                return Err(CliError::new(
                    "INVALID_INPUT",
                    "--clear cannot be combined with other policy flags",
                )
                .hint(ctx.suggest(&format!(
                    "project context set --view {view_name} --clear {}",
                    p.name
                ))));
            }
            ContextPolicy::default()
        } else {
            shown
                .views
                .get(view_name)
                .cloned()
                .unwrap_or_default()
                .merged(&over(a))
        };
        ctx.change(api::SetContextPolicy {
            project: p.project_id,
            view: view_name.to_string(),
            policy: new,
        })?;
        shown = client.project_context(&p.project_id.to_string(), view_name)?;
        "Context policy updated"
    } else {
        "Context policy loaded"
    };
    let (views, resolved) = (shown.views, shown.resolved);
    let set = views.get(view_name).cloned().unwrap_or_default();
    let others: Vec<(String, bool)> = CONTEXT_VIEWS
        .iter()
        .filter(|v| **v != view_name)
        .map(|v| (v.to_string(), views.contains_key(*v)))
        .collect();
    let data = json!({
        "project": p.name,
        "view": view_name,
        "policy": set,
        "resolved": resolved,
        "context": {
            "include_resources": resolved.include_resources, "exclude_resources": resolved.exclude_resources,
            "include_paths": resolved.include_paths, "exclude_paths": resolved.exclude_paths,
            "hot_max_tokens": resolved.hot_max_tokens, "warm_max_decisions": resolved.warm_max_decisions,
            "cold_max_decisions": resolved.cold_max_decisions, "query_limit": resolved.query_limit,
            "max_file_size_bytes": resolved.max_file_size, "max_total_size_bytes": resolved.max_total_size,
            "summarize": resolved.summarize, "summary_max_tokens": resolved.summary_max_tokens,
            "summarization": if resolved.summarize { SUMMARIZE_STATUS } else { "off" },
        },
        "views": views,
    });
    let command_name = if set_args.is_some() {
        "project context set"
    } else {
        "project context show"
    };
    Ok(panels(
        Report::ok(command_name, data, status),
        &p.name,
        view_name,
        &resolved,
        &set,
        &others,
    ))
}
