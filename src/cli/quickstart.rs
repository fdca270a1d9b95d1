//! `agents quickstart [PATH] [--headless] [--example NAME]`: the main job on
//! a real git repository with no network and no API key.
//!
//! It registers the repository (PATH, or a copy of the sample project shipped in
//! `examples/sample-project/`, kept at `<data dir>/quickstart/sample-project` so that a second
//! run finds it again), creates the offline example actions of `examples/`, and runs one of
//! them as a plan under the `trusted` profile through Strategize and Execute. The plan then
//! waits at the apply gate: in a terminal the TUI opens on the approval queue; otherwise (or
//! with `--headless`) the decision tree and the diff are printed and the command exits 3 with
//! `agents plan apply --yes PLAN` as the next command.
//!
//! Every `local/quickstart-*` item is reused when it already exists; a name taken by something
//! else (a resource at another path, a project without this resource) gets a numeric suffix.
//! The steps are the same commands a user would run (`resource add`, `project create`,
//! `action create`, `plan use`), called in-process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::{CliError, Context};
use crate::output::{Cell, Element, ErrorBody, Exit, Level, Message, Report, TreeNode};
use cleveragents_engine::api::registry_views::ResourceFilter;
use cleveragents_engine::domain::action::ActionState;
use cleveragents_engine::domain::decision::Decision;

/// Options of `agents quickstart`.
#[derive(Debug, Clone, clap::Args)]
pub struct QuickstartArgs {
    /// Print the decision tree and the diff and exit 3, instead of opening the TUI
    #[arg(long)]
    pub headless: bool,
    /// The example action to run
    #[arg(long, value_enum, default_value_t = Example::Format, value_name = "NAME")]
    pub example: Example,
    /// Top directory of a git checkout with at least one commit (default: a copy of the
    /// shipped sample project in the data directory)
    pub path: Option<PathBuf>,
}

/// The offline examples `--example` can run (each needs no argument).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Example {
    /// examples/format.yaml: each language's installed formatter, then whitespace tidying.
    Format,
    /// examples/license-header.yaml: an SPDX header in every source file.
    LicenseHeader,
}

impl Example {
    fn key(self) -> &'static str {
        match self {
            Example::Format => "format",
            Example::LicenseHeader => "license-header",
        }
    }
}

/// The offline example actions the quickstart registers, as (key, YAML); each becomes
/// `local/quickstart-KEY`.
pub const OFFLINE_EXAMPLES: [(&str, &str); 4] = [
    ("format", include_str!("../../examples/format.yaml")),
    (
        "license-header",
        include_str!("../../examples/license-header.yaml"),
    ),
    ("codemod", include_str!("../../examples/codemod.yaml")),
    (
        "bump-dependency",
        include_str!("../../examples/bump-dependency.yaml"),
    ),
];

/// The sample project's files, as (relative path, content, executable).
pub const SAMPLE_PROJECT: [(&str, &str, bool); 5] = [
    (
        "README.md",
        include_str!("../../examples/sample-project/README.md"),
        false,
    ),
    (
        "Cargo.toml",
        include_str!("../../examples/sample-project/Cargo.toml"),
        false,
    ),
    (
        "src/lib.rs",
        include_str!("../../examples/sample-project/src/lib.rs"),
        false,
    ),
    (
        "src/summary.py",
        include_str!("../../examples/sample-project/src/summary.py"),
        false,
    ),
    (
        "tests/run.sh",
        include_str!("../../examples/sample-project/tests/run.sh"),
        true,
    ),
];

/// What the quickstart found or made, for the report.
#[derive(Debug, Default)]
struct Made {
    created: Vec<String>,
    reused: Vec<String>,
}

impl Made {
    fn note(&mut self, created: bool, what: String) {
        if created {
            self.created.push(what);
        } else {
            self.reused.push(what);
        }
    }
}

/// Runs the quickstart.
///
/// # Errors
/// `INVALID_INPUT` for a PATH that is not the top of a git checkout with a commit; the errors
/// of the commands it runs (`resource add`, `project create`, `action create`, `plan use`).
pub fn run(args: QuickstartArgs, ctx: &Context) -> Result<Report, CliError> {
    let mut made = Made::default();
    let (repo, sample) = match &args.path {
        Some(p) => (checkout(p)?, false),
        None => {
            let dir = ctx.paths.data_dir.join("quickstart").join("sample-project");
            let created = ensure_sample(&dir)?;
            made.note(created, format!("sample project {}", dir.display()));
            (std::fs::canonicalize(&dir).unwrap_or(dir), true)
        }
    };
    ctx.check_store()?;
    let slug = if sample {
        "sample".to_string()
    } else {
        slug(&repo)
    };
    let resource = ensure_resource(ctx, &repo, &slug, &mut made)?;
    let project = ensure_project(ctx, &resource, &slug, &mut made)?;
    let mut actions = Vec::new();
    for (key, yaml) in OFFLINE_EXAMPLES {
        actions.push(ensure_action(ctx, key, yaml, &mut made)?);
    }
    let action = format!("local/quickstart-{}", args.example.key());

    let used = super::plan::run(
        super::plan::PlanCommand::Use(super::plan::UseArgs {
            automation_profile: Some("trusted".into()),
            invariants: Vec::new(),
            strategy_actor: None,
            execution_actor: None,
            estimation_actor: None,
            invariant_actor: None,
            args: Vec::new(),
            max_cost_usd: None,
            max_tokens: None,
            stream: false,
            action: action.clone(),
            projects: vec![project.clone()],
        }),
        ctx,
    )?;
    let plan_id = used.data["plan_id"]
        .as_str()
        .ok_or_else(|| CliError::new("INTERNAL", "plan use reported no plan id"))?
        .to_string();
    let waiting = used.exit == Exit::NeedsHuman;
    // `plan use`'s warnings (uncommitted edits the plan cannot see, a detached HEAD) are the
    // quickstart's too.
    let warnings = used.messages.clone();
    let mut data = json!({
        "plan_id": plan_id,
        "repository": repo.display().to_string(),
        "sample_project": sample,
        "resource": resource,
        "project": project,
        "action": action,
        "actions": actions,
        "created": made.created,
        "reused": made.reused,
        "phase": used.data["phase"],
        "state": used.data["state"],
    });
    if !waiting {
        // Not at the apply gate (an errored step, nothing to apply...): show what plan use
        // said, with the quickstart's context added.
        let mut report = used;
        report.command = "quickstart".into();
        if let Value::Object(extra) = data {
            for (k, v) in extra {
                report.data[k.as_str()] = v;
            }
        }
        return Ok(report);
    }

    let apply = ctx.suggest(&format!("plan apply --yes {plan_id}"));
    if ctx.terminal.stdin_tty && ctx.terminal.stdout_tty && !args.headless {
        super::tui::run(
            super::tui::TuiArgs {
                plan: Some(plan_id.clone()),
                focus: Some(super::tui::FocusArg::Approvals),
                theme: None,
            },
            ctx,
        )?;
        return after_tui(ctx, &plan_id, data, warnings);
    }

    let decisions = ctx.client()?.decisions(&plan_id)?;
    data["decisions"] = decisions_json(&decisions);
    let diff = super::plan_sandbox::run(
        super::plan_sandbox::PlanSandboxCommand::Diff {
            plan: Some(plan_id.clone()),
            correction: None,
            resource: None,
            path: None,
            stat: false,
            remainder: false,
        },
        ctx,
    )?;
    data["diff"] = diff.data_value();
    let summary = diff.status.text.clone();
    let mut report = Report::ok("quickstart", data, String::new()).with(Element::panel(
        "Quickstart",
        [
            ("Plan ID", super::view::id(plan_id.clone())),
            ("Repository", repo.display().to_string().into()),
            ("Resource", resource.into()),
            ("Project", project.into()),
            ("Action", action.into()),
            ("Automation", "trusted (stops before Apply)".into()),
            ("Changes", summary.clone().into()),
        ],
    ));
    if !made.created.is_empty() {
        report = report.with(Element::List {
            title: "Created".into(),
            items: made.created.clone(),
        });
    }
    if !made.reused.is_empty() {
        report = report.with(Element::List {
            title: "Reused".into(),
            items: made.reused.clone(),
        });
    }
    report = report.with(Element::Tree {
        title: "Decision Tree".into(),
        roots: decision_tree(&decisions),
    });
    report.elements.extend(diff.elements);
    report = report.with(Element::List {
        title: "Next Steps".into(),
        items: vec![
            apply.clone(),
            ctx.suggest(&format!("tui --plan {plan_id} --focus approvals")),
            ctx.suggest(&format!("plan diff {plan_id}")),
        ],
    });
    Ok(waiting_for_apply(
        report, &plan_id, &summary, warnings, apply,
    ))
}

/// The quickstart's report after the TUI closed: where the plan is now.
fn after_tui(
    ctx: &Context,
    plan_id: &str,
    mut data: Value,
    warnings: Vec<Message>,
) -> Result<Report, CliError> {
    let plan = ctx.client()?.plan(plan_id)?;
    data["phase"] = json!(plan.phase());
    data["state"] = json!(plan.state());
    let mut report = Report::ok(
        "quickstart",
        data,
        format!(
            "Quickstart plan {plan_id} is at {}/{}",
            plan.phase(),
            plan.state()
        ),
    );
    report.messages = warnings;
    Ok(report)
}

/// Marks the headless quickstart's report as waiting for the apply approval (exit 3).
fn waiting_for_apply(
    mut report: Report,
    plan_id: &str,
    summary: &str,
    warnings: Vec<Message>,
    apply: String,
) -> Report {
    let nothing = report.data["diff"]["stats"]["files_changed"].as_u64() == Some(0);
    let message = if nothing {
        format!("plan {plan_id} found nothing to change; applying it records that without a commit")
    } else {
        format!("plan {plan_id} waits for your approval to apply: {summary}")
    };
    report.status = Message {
        level: Level::Warn,
        text: message.clone(),
    };
    report.messages = warnings;
    report.exit = Exit::NeedsHuman;
    report.error = Some(ErrorBody {
        code: "NEEDS_APPROVAL",
        message,
        detail: Some(
            "review the decision tree and the diff above; applying makes one commit on the \
             repository's current branch"
                .into(),
        ),
        suggestions: vec![apply],
        exit: super::error::exit_of_str("NEEDS_APPROVAL"),
    });
    report
}

/// Checks that `path` is the top directory of a git work tree with at least one commit and
/// returns it canonicalized.
fn checkout(path: &Path) -> Result<PathBuf, CliError> {
    let shown = path.display();
    let dir = std::fs::canonicalize(path).map_err(|e| {
        CliError::invalid_input(format!("PATH {shown}: {e}"))
            .hint("give the top directory of a git checkout, or no PATH to use the sample project")
    })?;
    let repo = git2::Repository::discover(&dir).map_err(|_| {
        CliError::invalid_input(format!("PATH {shown} is not a git checkout"))
            .hint(format!("run `git init && git add -A && git commit -m init` in {shown}, or give no PATH to use the sample project"))
    })?;
    let top = repo
        .workdir()
        .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.to_path_buf()));
    if top.as_deref() != Some(dir.as_path()) {
        return Err(CliError::invalid_input(format!(
            "PATH {shown} is not the top directory of a git work tree"
        ))
        .hint(match top {
            Some(t) => format!("agents quickstart {}", t.display()),
            None => "give a checkout with a work tree, not a bare repository".into(),
        }));
    }
    if repo.head().ok().and_then(|h| h.target()).is_none() {
        return Err(
            CliError::invalid_input(format!("PATH {shown} has no commit yet"))
                .hint(format!("commit something first: git -C {shown} commit")),
        );
    }
    Ok(dir)
}

/// Writes the sample project to `dir` as a git repository with one commit, unless it is
/// already there. Returns whether it was created.
fn ensure_sample(dir: &Path) -> Result<bool, CliError> {
    if dir.join(".git").exists() {
        return Ok(false);
    }
    let io = |e: std::io::Error| {
        CliError::new(
            "IO_ERROR",
            format!("cannot write the sample project to {}: {e}", dir.display()),
        )
        .hint("check the data directory's permissions, or pass a checkout as PATH")
    };
    // A previous attempt interrupted before the commit leaves no .git: start again.
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(io)?;
    }
    for (rel, content, executable) in SAMPLE_PROJECT {
        let file = dir.join(rel);
        if let Some(parent) = file.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::write(&file, content).map_err(io)?;
        if executable {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
    }
    let git = |e: git2::Error| {
        CliError::new(
            "GIT_ERROR",
            format!("cannot make the sample project a git repository: {e}"),
        )
    };
    let mut opts = git2::RepositoryInitOptions::new();
    opts.initial_head("main");
    let repo = git2::Repository::init_opts(dir, &opts).map_err(git)?;
    let mut index = repo.index().map_err(git)?;
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .map_err(git)?;
    index.write().map_err(git)?;
    let tree = repo
        .find_tree(index.write_tree().map_err(git)?)
        .map_err(git)?;
    let who = git2::Signature::now("CleverAgents quickstart", "quickstart@cleveragents.invalid")
        .map_err(git)?;
    repo.commit(
        Some("HEAD"),
        &who,
        &who,
        "Sample project for agents quickstart",
        &tree,
        &[],
    )
    .map_err(git)?;
    Ok(true)
}

/// A name fragment from the checkout's directory name: lowercase letters, digits and `-`.
fn slug(dir: &Path) -> String {
    let raw = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let mut s: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    let s = s.trim_matches('-');
    if s.is_empty() {
        "repo".into()
    } else {
        s.chars().take(40).collect()
    }
}

/// `base`, then `base-2`, `base-3`, ... : the first name `taken` refuses.
fn free_name(
    base: &str,
    taken: impl Fn(&str) -> Result<bool, CliError>,
) -> Result<String, CliError> {
    for n in 1..1000 {
        let name = if n == 1 {
            base.to_string()
        } else {
            format!("{base}-{n}")
        };
        if !taken(&name)? {
            return Ok(name);
        }
    }
    Err(CliError::new(
        "CONFLICT",
        format!("every name from {base} to {base}-999 is taken"),
    ))
}

/// The registered git checkout at `repo`, or a new `local/quickstart-SLUG`.
fn ensure_resource(
    ctx: &Context,
    repo: &Path,
    slug: &str,
    made: &mut Made,
) -> Result<String, CliError> {
    let path = repo.display().to_string();
    let all: Vec<_> = ctx
        .client()?
        .resources(ResourceFilter {
            all: true,
            ..ResourceFilter::default()
        })?
        .into_iter()
        .map(|row| row.resource)
        .collect();
    if let Some(r) = all.iter().find(|r| {
        r.type_name == "git-checkout" && !r.is_discovered() && r.prop("path") == Some(&path)
    }) {
        made.note(false, format!("resource {}", r.name));
        return Ok(r.name.clone());
    }
    let name = free_name(&format!("local/quickstart-{slug}"), |n| {
        Ok(all.iter().any(|r| r.name == n))
    })?;
    super::resource::run(
        super::resource::ResourceCommand::Add {
            description: Some("Registered by agents quickstart".into()),
            update: false,
            kind: super::resource::AddKind::GitCheckout {
                path: repo.to_path_buf(),
                branch: None,
                name: name.clone(),
            },
        },
        ctx,
    )?;
    made.note(true, format!("resource {name} ({path})"));
    Ok(name)
}

/// `local/quickstart-SLUG` linking `resource` (reused when it links it already).
fn ensure_project(
    ctx: &Context,
    resource: &str,
    slug: &str,
    made: &mut Made,
) -> Result<String, CliError> {
    let client = ctx.client()?;
    let projects = client.projects(None, None)?;
    let links = |name: &str| -> Result<Option<bool>, CliError> {
        if !projects.iter().any(|s| s.project.name == name) {
            return Ok(None);
        }
        Ok(Some(
            client
                .project(name)?
                .details
                .resources
                .iter()
                .any(|l| l.resource.name == resource),
        ))
    };
    let base = format!("local/quickstart-{slug}");
    let mut candidate = base.clone();
    for n in 2..1000 {
        match links(&candidate)? {
            Some(true) => {
                made.note(false, format!("project {candidate}"));
                return Ok(candidate);
            }
            Some(false) => candidate = format!("{base}-{n}"),
            None => break,
        }
    }
    super::project::run(
        super::project::ProjectCommand::Create {
            description: Some("Made by agents quickstart".into()),
            resources: vec![resource.to_string()],
            invariants: Vec::new(),
            invariant_actor: None,
            name: candidate.clone(),
        },
        ctx,
    )?;
    made.note(true, format!("project {candidate}"));
    Ok(candidate)
}

/// `local/quickstart-KEY` from an example's YAML, available (reused when it exists).
fn ensure_action(
    ctx: &Context,
    key: &str,
    yaml: &str,
    made: &mut Made,
) -> Result<String, CliError> {
    let name = format!("local/quickstart-{key}");
    if let Some(state) = ctx.client()?.action_state(&name)? {
        if state != ActionState::Available {
            super::action::run(
                super::action::ActionCommand::Available {
                    action: name.clone(),
                },
                ctx,
            )?;
        }
        made.note(false, format!("action {name}"));
        return Ok(name);
    }
    let dir = ctx.paths.data_dir.join("quickstart").join("actions");
    let file = dir.join(format!("{key}.yaml"));
    std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&file, yaml))
        .map_err(|e| {
            CliError::new("IO_ERROR", format!("cannot write {}: {e}", file.display()))
                .hint("check the data directory's permissions")
        })?;
    super::action::run(
        super::action::ActionCommand::Create {
            config: file.clone(),
            strategy_actor: None,
            execution_actor: None,
            estimation_actor: None,
            invariant_actor: None,
            definition_of_done: None,
            description: None,
            long_description: None,
            automation_profile: None,
            reusable: false,
            no_reusable: false,
            read_only: false,
            available: true,
            invariants: Vec::new(),
            args: Vec::new(),
            update: false,
            name: Some(name.clone()),
        },
        ctx,
    )?;
    made.note(true, format!("action {name} ({})", file.display()));
    Ok(name)
}

/// The current decisions (not superseded), nested by parent, in sequence order.
fn current(decisions: &[Decision]) -> Vec<&Decision> {
    let mut v: Vec<&Decision> = decisions
        .iter()
        .filter(|d| d.superseded_by.is_none())
        .collect();
    v.sort_by_key(|d| d.sequence_number);
    v
}

/// `TYPE: first line of the chosen option` (at most 90 characters of it) and the decision id
/// that `plan correct` / `plan explain` take.
fn label(d: &Decision) -> String {
    let first = d
        .chosen_option
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end();
    let mut text: String = first.chars().take(90).collect();
    if text.len() < d.chosen_option.trim_end().len() {
        text.push_str(" ...");
    }
    format!("{}: {text} [{}]", d.decision_type.as_str(), d.decision_id)
}

fn decision_tree(decisions: &[Decision]) -> Vec<TreeNode> {
    let current = current(decisions);
    let mut children: HashMap<Option<String>, Vec<&Decision>> = HashMap::new();
    let ids: Vec<String> = current.iter().map(|d| d.decision_id.to_string()).collect();
    for d in &current {
        // A parent that is not current (superseded) shows its children at the top.
        let parent = d
            .parent_decision_id
            .map(|p| p.to_string())
            .filter(|p| ids.contains(p));
        children.entry(parent).or_default().push(d);
    }
    fn build(
        parent: Option<String>,
        children: &HashMap<Option<String>, Vec<&Decision>>,
    ) -> Vec<TreeNode> {
        children
            .get(&parent)
            .map(|ds| {
                ds.iter()
                    .map(|d| TreeNode {
                        label: Cell::from(label(d)),
                        children: build(Some(d.decision_id.to_string()), children),
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    build(None, &children)
}

fn decisions_json(decisions: &[Decision]) -> Value {
    current(decisions)
        .iter()
        .map(|d| {
            json!({
                "decision_id": d.decision_id.to_string(),
                "parent_decision_id": d.parent_decision_id.map(|p| p.to_string()),
                "decision_type": d.decision_type.as_str(),
                "chosen_option": d.chosen_option,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_short_lowercase_names() {
        assert_eq!(slug(Path::new("/x/My Repo_v2")), "my-repo-v2");
        assert_eq!(slug(Path::new("/x/---")), "repo");
        assert_eq!(slug(Path::new("/x/ünï")), "n");
    }

    #[test]
    fn free_names_get_a_numeric_suffix() {
        let taken = ["local/q", "local/q-2"];
        let name = free_name("local/q", |n| Ok(taken.contains(&n))).unwrap();
        assert_eq!(name, "local/q-3");
    }
}
