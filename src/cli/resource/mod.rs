//! `agents resource add|list|show|tree|remove|link-child|unlink-child` and
//! `agents resource type list|show|add|remove` (spec sections 06 and 23).

use std::path::PathBuf;

use clap::{Args, Subcommand};
use serde_json::json;

pub mod types;

use super::{CliError, Context, confirm::confirm, view};
use crate::output::{Cell, Column, Element, Level, Report, Tone, TreeNode};
use cleveragents_engine::api;
use cleveragents_engine::api::registry_views::{
    self as rv, AddArgs, Capabilities, Resource, ResourceError, ResourceFilter, ResourceType,
};
use types::TypeCommand;

/// `agents resource ...`
#[derive(Debug, Subcommand)]
pub enum ResourceCommand {
    /// Register a resource; its children are discovered (one subcommand per type)
    Add {
        /// Description
        #[arg(short, long, global = true, value_name = "TEXT")]
        description: Option<String>,
        /// Replace an existing resource of the same name (re-runs discovery)
        #[arg(long, global = true)]
        update: bool,
        /// The resource type
        #[command(subcommand)]
        kind: AddKind,
    },
    /// List registered resources (discovered children with --all or --type)
    List {
        /// Only this namespace
        #[arg(short, long, value_name = "NS")]
        namespace: Option<String>,
        /// Only this type (includes discovered resources)
        #[arg(short = 't', long = "type", value_name = "TYPE")]
        type_name: Option<String>,
        /// Include discovered children
        #[arg(long)]
        all: bool,
        /// Show only resources whose name matches this regular expression
        regex: Option<String>,
    },
    /// Show a resource: capabilities, parents, children, linked projects
    Show {
        /// Resource name
        name: String,
    },
    /// Show the resource DAG under a resource
    Tree {
        /// Levels to show (default 3)
        #[arg(short, long, default_value_t = 3, value_name = "N")]
        depth: u32,
        /// Only show resources of this type (and the path to them)
        #[arg(short = 't', long = "type", value_name = "TYPE")]
        type_name: Option<String>,
        /// Root resource name
        name: String,
    },
    /// Remove a resource and its discovered children (refused while a project links it)
    Remove {
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
        /// Resource name
        name: String,
    },
    /// Rebuild a resource's code index from scratch (git checkouts and directories)
    Reindex {
        /// Resource name
        name: String,
    },
    /// Link a registered resource under another by hand (type rules apply; no cycles)
    LinkChild(LinkArgs),
    /// Remove a manual parent/child link (discovered links stay)
    UnlinkChild {
        /// The link
        #[command(flatten)]
        link: LinkArgs,
        /// Do not ask for confirmation
        #[arg(short, long)]
        yes: bool,
    },
    /// Resource types: the built-in ones and custom types from YAML
    #[command(subcommand)]
    Type(TypeCommand),
}

/// The two resources of link-child and unlink-child: `PARENT CHILD` (spec 05) or
/// `--parent`/`--child`.
#[derive(Debug, Args)]
pub struct LinkArgs {
    /// Parent resource (or --parent)
    #[arg(
        value_name = "PARENT",
        required_unless_present = "parent",
        conflicts_with = "parent"
    )]
    parent_arg: Option<String>,
    /// Child resource (or --child)
    #[arg(
        value_name = "CHILD",
        required_unless_present = "child",
        conflicts_with = "child"
    )]
    child_arg: Option<String>,
    /// Parent resource
    #[arg(short, long, value_name = "RESOURCE")]
    parent: Option<String>,
    /// Child resource
    #[arg(short, long, value_name = "RESOURCE")]
    child: Option<String>,
}

impl LinkArgs {
    /// The parent, from either form.
    pub fn parent(&self) -> &str {
        self.parent
            .as_deref()
            .or(self.parent_arg.as_deref())
            .unwrap_or_default()
    }

    /// The child, from either form.
    pub fn child(&self) -> &str {
        self.child
            .as_deref()
            .or(self.child_arg.as_deref())
            .unwrap_or_default()
    }
}

/// `agents resource add <TYPE> ...`
#[derive(Debug, Subcommand)]
pub enum AddKind {
    /// A checked-out git repository: discovers the repository, remotes, branches and work tree
    #[command(name = "git-checkout")]
    GitCheckout {
        /// Top directory of the work tree
        #[arg(long, value_name = "PATH")]
        path: PathBuf,
        /// Branch (default: the checked-out branch; must match it)
        #[arg(long, value_name = "BRANCH")]
        branch: Option<String>,
        /// Resource name (e.g. local/api-repo)
        name: String,
    },
    /// A git repository (local path or file:// URL): discovers remotes and branches
    Git {
        /// Repository path or file:// URL
        #[arg(long, value_name = "URL")]
        url: String,
        /// Resource name
        name: String,
    },
    /// A directory (files and subdirectories are counted)
    #[command(name = "fs-directory")]
    FsDirectory {
        /// The directory
        #[arg(long, value_name = "PATH")]
        path: PathBuf,
        /// Resource name
        name: String,
    },
    /// A mounted filesystem: discovers its root directory
    #[command(name = "fs-mount")]
    FsMount {
        /// Mount point
        #[arg(long, value_name = "PATH")]
        mount_path: PathBuf,
        /// Resource name
        name: String,
    },
    /// Any other type (refused with the list of addable types)
    #[command(external_subcommand)]
    Other(Vec<String>),
}

impl ResourceCommand {
    /// Whether the subcommand can run against a server (`--server`): every one, since each
    /// reaches the engine only through the API.
    pub fn served_remotely(&self) -> bool {
        match self {
            ResourceCommand::Type(t) => t.served_remotely(),
            _ => true,
        }
    }

    /// The subcommand path below `resource`.
    pub fn name(&self) -> String {
        match self {
            ResourceCommand::Add { .. } => "add".into(),
            ResourceCommand::List { .. } => "list".into(),
            ResourceCommand::Show { .. } => "show".into(),
            ResourceCommand::Tree { .. } => "tree".into(),
            ResourceCommand::Remove { .. } => "remove".into(),
            ResourceCommand::Reindex { .. } => "reindex".into(),
            ResourceCommand::LinkChild(_) => "link-child".into(),
            ResourceCommand::UnlinkChild { .. } => "unlink-child".into(),
            ResourceCommand::Type(t) => format!(
                "type {}",
                match t {
                    TypeCommand::List { .. } => "list",
                    TypeCommand::Show { .. } => "show",
                    TypeCommand::Add { .. } => "add",
                    TypeCommand::Remove { .. } => "remove",
                }
            ),
        }
    }
}

/// Runs a resource subcommand.
///
/// # Errors
/// Bad targets (named by flag), duplicates without `--update`, links from projects, type rules,
/// cycles, unknown resources.
pub fn run(command: ResourceCommand, ctx: &Context) -> Result<Report, CliError> {
    match command {
        ResourceCommand::Add {
            description,
            update,
            kind,
        } => add(ctx, kind, description, update),
        ResourceCommand::List {
            namespace,
            type_name,
            all,
            regex,
        } => list(
            ctx,
            namespace.as_deref(),
            type_name.as_deref(),
            all,
            regex.as_deref(),
        ),
        ResourceCommand::Show { name } => show(ctx, &name),
        ResourceCommand::Tree {
            depth,
            type_name,
            name,
        } => tree(ctx, &name, depth, type_name.as_deref()),
        ResourceCommand::Remove { yes, name } => remove(ctx, &name, yes),
        ResourceCommand::Reindex { name } => super::indexing::reindex(ctx, &name),
        ResourceCommand::LinkChild(l) => link(ctx, &l),
        ResourceCommand::UnlinkChild { link, yes } => unlink(ctx, &link, yes),
        ResourceCommand::Type(t) => types::run(t, ctx),
    }
}

/// The resource as structured data.
pub fn resource_json(r: &Resource) -> serde_json::Value {
    json!({
        "resource_id": r.resource_id.to_string(),
        "name": r.name,
        "type": r.type_name,
        "kind": r.resource_type().map(ResourceType::kind).unwrap_or("physical"),
        "description": r.description,
        "properties": r.properties,
        "discovered": r.is_discovered(),
        "created_at": r.created_at.to_string(),
        "updated_at": r.updated_at.to_string(),
    })
}

fn location_entries(r: &Resource) -> Vec<(&'static str, Cell)> {
    let mut e = Vec::new();
    for (key, label) in [
        ("path", "Path"),
        ("branch", "Branch"),
        ("url", "URL"),
        ("mount_path", "Mount Path"),
        ("remote", "Remote"),
        ("git_dir", "Git Dir"),
    ] {
        if let Some(v) = r.properties.get(key).and_then(|v| v.as_str()) {
            e.push((label, Cell::from(v)));
        }
    }
    e
}

fn resource_panel(title: &str, r: &Resource) -> Element {
    let mut entries = vec![
        ("Name", view::id(r.name.clone())),
        ("Type", r.type_name.clone().into()),
        (
            "Physical/Virtual",
            r.resource_type()
                .map(ResourceType::kind)
                .unwrap_or("physical")
                .into(),
        ),
    ];
    entries.extend(location_entries(r));
    if let Some(d) = &r.description {
        entries.push(("Description", d.clone().into()));
    }
    entries.push(("Created", view::time(&r.created_at).into()));
    Element::panel(title, entries)
}

fn capabilities_panel(r: &Resource, strategy: &str) -> Element {
    let c = r.capabilities();
    let b = |f: fn(&Capabilities) -> bool| view::yes_no(c.as_ref().is_some_and(f)).to_string();
    Element::panel(
        "Capabilities",
        [
            ("Readable", b(|c| c.readable)),
            ("Writable", b(|c| c.writable)),
            (
                "Sandboxable",
                // A type that could be sandboxed is not, when nothing above it provides a
                // strategy (a branch of a bare repository, for example).
                if c.as_ref().is_some_and(|c| c.sandboxable) && strategy == "none" {
                    "no (no sandbox strategy applies)".to_string()
                } else {
                    b(|c| c.sandboxable)
                },
            ),
            ("Checkpointable", b(|c| c.checkpointable)),
            ("Sandbox Strategy", strategy.to_string()),
        ],
    )
}

fn counted_line(n: u64, ty: &str) -> String {
    format!("+ {n} {ty} (counted, not registered one by one)")
}

fn add(
    ctx: &Context,
    kind: AddKind,
    description: Option<String>,
    update: bool,
) -> Result<Report, CliError> {
    let mut args = AddArgs {
        description,
        update,
        ..Default::default()
    };
    // A relative path or local repository names a place in this shell's directory, also
    // when a server registers it: it is made absolute here, before it is sent.
    let (type_name, name, flags): (String, String, String) = match kind {
        AddKind::GitCheckout { path, branch, name } => {
            let path = super::remote::absolute(path);
            let f = format!(
                "--path {}{}",
                shell_words::quote(&path.display().to_string()),
                branch
                    .as_ref()
                    .map(|b| format!(" --branch {b}"))
                    .unwrap_or_default()
            );
            args.path = Some(path);
            args.branch = branch;
            ("git-checkout".into(), name, f)
        }
        AddKind::Git { url, name } => {
            let url = super::remote::absolute_repository(&url);
            let f = format!("--url {}", shell_words::quote(&url));
            args.url = Some(url);
            ("git".into(), name, f)
        }
        AddKind::FsDirectory { path, name } => {
            let path = super::remote::absolute(path);
            let f = format!("--path {}", shell_words::quote(&path.display().to_string()));
            args.path = Some(path);
            ("fs-directory".into(), name, f)
        }
        AddKind::FsMount { mount_path, name } => {
            let mount_path = super::remote::absolute(mount_path);
            let f = format!(
                "--mount-path {}",
                shell_words::quote(&mount_path.display().to_string())
            );
            args.mount_path = Some(mount_path);
            ("fs-mount".into(), name, f)
        }
        AddKind::Other(words) => {
            let ty = words.first().cloned().unwrap_or_default();
            if let Some(custom) = types::custom(ctx, &ty)? {
                return types::add_resource(ctx, &custom, &words, args);
            }
            return Err(ResourceError::NotAddable {
                name: ty.clone(),
                why: match rv::builtin_type(&ty) {
                    Some(_) => format!("is discovered from its parent, not added by hand (addable types: {})", rv::user_addable().join(", ")),
                    None => format!("is not a known type (addable types: {}, or a custom type from `agents resource type add`)", rv::user_addable().join(", ")),
                },
            }
            .into());
        }
    };
    ctx.check_store()?;
    ctx.config()?;
    let change = api::AddResource {
        type_name: type_name.clone(),
        name: name.clone(),
        args: args.clone(),
    };
    let added = ctx.change(change).map_err(|e| match e.into_registry() {
        Ok(api::RegistryError::Resource(ResourceError::Exists(n))) => {
            CliError::new("CONFLICT", format!("Resource {n} already exists."))
                .detail("use --update to replace it")
                .hint(ctx.suggest(&format!("resource add --update {type_name} {n} {flags}")))
        }
        Ok(api::RegistryError::Resource(ResourceError::SameTarget {
            name,
            existing,
            what,
            target,
        })) => {
            let message = ResourceError::SameTarget {
                name,
                existing: existing.clone(),
                what,
                target,
            }
            .to_string();
            let hint = ctx.suggest(&format!(
                "resource add --update {type_name} {existing} {flags}"
            ));
            CliError::new("CONFLICT", message)
                .detail("one target is registered once; update the existing resource instead")
                .hint(hint)
                .hint(ctx.suggest(&format!("resource show {existing}")))
        }
        Ok(other) => other.into(),
        Err(other) => other.into(),
    })?;
    added_report(ctx, &added)
}

/// The report of a registered (or updated) resource: the resource, its discovered and counted
/// children, capabilities, and the index build.
///
/// # Errors
/// A transport failure while building the index.
pub(super) fn added_report(ctx: &Context, added: &rv::Added) -> Result<Report, CliError> {
    let r = &added.resource;
    let mut rows: Vec<Vec<Cell>> = Vec::new();
    let mut counted_total = 0u64;
    let mut counted = Vec::new();
    for (c, status) in &added.children {
        rows.push(vec![
            view::id(c.name.clone()),
            c.type_name.clone().into(),
            Cell::new(status.as_ref(), Tone::Good),
        ]);
    }
    // Branch commit counts overlap the repository's, so the summary counts per repository and
    // per directory only (`resource tree` shows them per branch).
    for src in std::iter::once(r)
        .chain(added.children.iter().map(|(c, _)| c))
        .filter(|s| s.type_name != "git-branch")
    {
        for (ty, n) in src.counted() {
            counted_total += n;
            counted.push(json!({"under": src.name, "type": ty, "count": n}));
            rows.push(vec![
                Cell::new(format!("  + {n} under {}", src.name), Tone::Dim),
                ty.into(),
                Cell::new("counted", Tone::Dim),
            ]);
        }
    }
    let strategy = r.sandbox_strategy();
    let n = added.children.len();
    let mut report = Report::ok(
        "resource add",
        json!({
            "resource": resource_json(r),
            "replaced": added.replaced,
            "children": added.children.iter().map(|(c, s)| { let mut j = resource_json(c); j["status"] = json!(s); j }).collect::<Vec<_>>(),
            "counted": counted,
            "dropped_links": added.dropped_links.iter().map(|(p, c)| json!({"parent": p, "child": c})).collect::<Vec<_>>(),
        }),
        format!(
            "Resource {} ({n} child resource{} discovered{})",
            if added.replaced { "updated" } else { "registered" },
            if n == 1 { "" } else { "s" },
            if counted_total > 0 { format!(", {counted_total} more counted") } else { String::new() }
        ),
    )
    .with(resource_panel("Resource", r))
    .with(Element::Table {
        title: "Auto-discovered Children".into(),
        columns: ["Name", "Type", "Status"].map(Column::left).into(),
        rows,
        empty: "(none)".into(),
    })
    .with(capabilities_panel(r, strategy));
    report = super::indexing::attach(report, super::indexing::build(ctx, &r.name, false)?);
    for (p, c) in &added.dropped_links {
        report = report.message(
            Level::Warn,
            format!("manual link {p} -> {c} was removed: {c} is no longer discovered"),
        );
    }
    Ok(report)
}

fn list(
    ctx: &Context,
    ns: Option<&str>,
    ty: Option<&str>,
    all: bool,
    regex: Option<&str>,
) -> Result<Report, CliError> {
    view::regex(regex, "agents resource list 'api'")?;
    let listed = ctx.client()?.resources(ResourceFilter {
        namespace: ns.map(str::to_string),
        type_name: ty.map(str::to_string),
        all,
        regex: regex.map(str::to_string),
    })?;
    let mut rows = Vec::new();
    let mut data = Vec::new();
    let mut total_children = 0;
    for row in &listed {
        let (r, children, projects) = (&row.resource, row.children, &row.projects);
        total_children += children;
        rows.push(vec![
            view::id(r.name.clone()),
            r.type_name.clone().into(),
            r.resource_type()
                .map(ResourceType::kind)
                .unwrap_or("physical")
                .into(),
            children.to_string().into(),
            view::or(Some(&projects.join(", ")), "-"),
        ]);
        let mut j = resource_json(r);
        j["children"] = json!(children);
        j["projects"] = json!(projects);
        data.push(j);
    }
    let resources: Vec<&Resource> = listed.iter().map(|row| &row.resource).collect();
    let n = resources.len();
    let physical = resources
        .iter()
        .filter(|r| r.resource_type().is_none_or(|t| t.physical))
        .count();
    Ok(Report::ok(
        "resource list",
        json!({"resources": data}),
        format!("{n} resource{} listed", if n == 1 { "" } else { "s" }),
    )
    .with(Element::Table {
        title: "Resources".into(),
        columns: vec![
            Column::left("Name"),
            Column::left("Type"),
            Column::left("Phys/Virt"),
            Column::right("Children"),
            Column::left("Projects"),
        ],
        rows,
        empty: "No resources found.".into(),
    })
    .with(Element::panel(
        "Summary",
        [
            ("Total", n.to_string()),
            ("Physical", physical.to_string()),
            ("Virtual", (n - physical).to_string()),
            ("Total Children", total_children.to_string()),
        ],
    )))
}

fn show(ctx: &Context, name: &str) -> Result<Report, CliError> {
    let shown = ctx.client()?.resource(name)?;
    let (d, indexing) = (shown.details, shown.indexing);
    let r = &d.resource;
    let mut report = Report::ok(
        "resource show",
        json!({
            "resource": resource_json(r),
            "sandbox_strategy": d.sandbox_strategy,
            "sandboxable": r.resource_type().is_some_and(|t| t.capabilities.sandboxable) && d.sandbox_strategy != "none",
            "capabilities": r.capabilities(),
            "parents": d.parents.iter().map(|e| json!({"name": e.resource.name, "type": e.resource.type_name, "auto": e.auto})).collect::<Vec<_>>(),
            "children": d.children.iter().map(|(e, n)| json!({"name": e.resource.name, "type": e.resource.type_name, "auto": e.auto, "children": n})).collect::<Vec<_>>(),
            "counted": r.counted().into_iter().map(|(t, n)| json!({"type": t, "count": n})).collect::<Vec<_>>(),
            "projects": d.projects.iter().map(|(p, ro)| json!({"project": p, "read_only": ro})).collect::<Vec<_>>(),
            "indexing": indexing.as_ref().map(super::indexing::status_json),
        }),
        "Resource details loaded",
    )
    .with(resource_panel("Resource", r))
    .with(capabilities_panel(r, &d.sandbox_strategy))
    .with(Element::List {
        title: "Parents".into(),
        items: if d.parents.is_empty() {
            vec!["(top-level)".into()]
        } else {
            d.parents.iter().map(|e| format!("- {} ({}{})", e.resource.name, e.resource.type_name, if e.auto { ", discovered" } else { ", manual" })).collect()
        },
    });
    let mut rows: Vec<Vec<Cell>> = d
        .children
        .iter()
        .map(|(e, n)| {
            vec![
                view::id(e.resource.name.clone()),
                e.resource.type_name.clone().into(),
                view::flag_cell(e.auto),
                n.to_string().into(),
            ]
        })
        .collect();
    for (ty, n) in r.counted() {
        rows.push(vec![
            Cell::new(counted_line(n, ty), Tone::Dim),
            "".into(),
            "".into(),
            "".into(),
        ]);
    }
    report = report
        .with(Element::Table {
            title: "Direct Children".into(),
            columns: vec![
                Column::left("Name"),
                Column::left("Type"),
                Column::left("Auto"),
                Column::right("Children"),
            ],
            rows,
            empty: "(none)".into(),
        })
        .with(Element::List {
            title: "Linked Projects".into(),
            items: if d.projects.is_empty() {
                vec!["(none)".into()]
            } else {
                d.projects
                    .iter()
                    .map(|(p, ro)| format!("- {p} ({})", if *ro { "read-only" } else { "r/w" }))
                    .collect()
            },
        });
    if let Some(s) = &indexing {
        report = report.with(Element::panel(
            "Code Index",
            super::indexing::status_entries(s),
        ));
    }
    Ok(report)
}

fn to_view(n: &rv::TreeNode, root: bool) -> TreeNode {
    let label = if root
        || n.type_name == "git-checkout"
        || n.type_name == "git"
        || n.type_name == "fs-directory"
        || n.type_name == "fs-mount"
    {
        format!("{} ({}, {})", n.name, n.type_name, n.kind)
    } else {
        format!("{} ({})", n.name, n.type_name)
    };
    let mut children: Vec<TreeNode> = n.children.iter().map(|c| to_view(c, false)).collect();
    for (ty, count) in &n.counted {
        children.push(TreeNode {
            label: Cell::new(format!("... {count} {ty} (counted)"), Tone::Dim),
            children: vec![],
        });
    }
    if n.hidden_children > 0 {
        children.push(TreeNode {
            label: Cell::new(
                format!("... {} more (deeper than --depth)", n.hidden_children),
                Tone::Dim,
            ),
            children: vec![],
        });
    }
    TreeNode {
        label: Cell::new(label, if root { Tone::Id } else { Tone::Normal }),
        children,
    }
}

fn count_nodes(n: &rv::TreeNode) -> (u64, u64) {
    n.children
        .iter()
        .map(count_nodes)
        .fold((1, n.counted.values().sum()), |(a, b), (c, d)| {
            (a + c, b + d)
        })
}

fn tree(ctx: &Context, name: &str, depth: u32, ty: Option<&str>) -> Result<Report, CliError> {
    if let Some(t) = ty
        && rv::builtin_type(t).is_none()
    {
        return Err(
            CliError::invalid_input(format!("--type `{t}` is not a resource type"))
                .hint("agents resource type list"),
        );
    }
    let t = ctx.client()?.resource_tree(name, depth, ty)?;
    let (shown, counted) = count_nodes(&t);
    Ok(Report::ok(
        "resource tree",
        json!({"tree": t, "depth": depth, "type": ty}),
        "Resource tree displayed",
    )
    .with(Element::Tree {
        title: format!("Resource Tree: {}", t.name),
        roots: vec![to_view(&t, true)],
    })
    .with(Element::panel(
        "Summary",
        [
            ("Registered Shown", shown.to_string()),
            ("Counted", counted.to_string()),
            ("Max Depth", depth.to_string()),
        ],
    )))
}

fn remove(ctx: &Context, name: &str, yes: bool) -> Result<Report, CliError> {
    let plan = ctx.client()?.resource_removal(name)?;
    confirm(
        &format!(
            "Remove resource {} and {} child resources?",
            plan.resource.name, plan.children
        ),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!("resource remove --yes {}", plan.resource.name)),
    )?;
    let removed = ctx.change(api::RemoveResource {
        resource: name.to_string(),
    })?;
    let (cleanup, cleanup_panel) = super::indexing::cleanup(ctx, &removed.resource.name)?;
    let report = Report::ok(
        "resource remove",
        json!({"resource": resource_json(&removed.resource), "children_removed": removed.children, "index_cleanup": cleanup}),
        "Resource removed",
    )
    .with(Element::panel(
        "Resource Removed",
        [
            ("Name", view::id(removed.resource.name.clone())),
            ("Type", removed.resource.type_name.clone().into()),
            ("Children Removed", removed.children.to_string().into()),
        ],
    ));
    Ok(match cleanup_panel {
        Some(p) => report.with(p),
        None => report,
    })
}

fn link(ctx: &Context, l: &LinkArgs) -> Result<Report, CliError> {
    ctx.check_store()?;
    let (p, c) = ctx.change(api::LinkResources {
        parent: l.parent().to_string(),
        child: l.child().to_string(),
    })?;
    Ok(Report::ok(
        "resource link-child",
        json!({"parent": resource_json(&p), "child": resource_json(&c)}),
        "Child resource linked",
    )
    .with(Element::panel(
        "Child Linked",
        [
            ("Parent", view::id(p.name.clone())),
            ("Child", view::id(c.name.clone())),
            ("Child Type", c.type_name.clone().into()),
            ("Status", "linked".into()),
        ],
    )))
}

fn unlink(ctx: &Context, l: &LinkArgs, yes: bool) -> Result<Report, CliError> {
    let (p, c) = ctx.client()?.manual_link(l.parent(), l.child())?;
    confirm(
        &format!("Unlink {} from parent {}?", c.name, p.name),
        yes,
        &ctx.terminal,
        &ctx.suggest(&format!(
            "resource unlink-child --yes --parent {} --child {}",
            p.name, c.name
        )),
    )?;
    let (p, c) = ctx.change(api::UnlinkResources {
        parent: l.parent().to_string(),
        child: l.child().to_string(),
    })?;
    Ok(Report::ok(
        "resource unlink-child",
        json!({"parent": resource_json(&p), "child": resource_json(&c)}),
        "Child resource unlinked",
    )
    .with(Element::panel(
        "Child Unlinked",
        [
            ("Parent", view::id(p.name.clone())),
            ("Child", view::id(c.name.clone())),
            ("Status", "unlinked".into()),
        ],
    )))
}
