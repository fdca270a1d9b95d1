//! Resources (spec section 23): independently registered things agents may touch, with
//! auto-discovered children forming a DAG.
//!
//! `add` validates the target, discovers children (for a git checkout: the repository, its
//! remotes and branches, and the work tree directory; commits, tags, files and directories are
//! counted in properties rather than registered one row each) and stores the resource, its
//! children and the edges in one transaction. A repository by a network URL is asked for its
//! default branch with the host's `git` (git2 is built without network transports) and has
//! no discovered children.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::domain::Id;
use crate::domain::name::QualifiedName;
pub use crate::domain::resource::{Edge, Resource};
use crate::registry::custom_types::{ArgType, CliArgument, CustomType, TypeError};
pub use crate::registry::resource_error::ResourceError;
use crate::registry::resource_error::PATH_MISSING;
use crate::registry::resource_types::{self, ResourceType};
use crate::store::Store;

impl Resource {
    /// The metadata of the built-in type that handles it (its own type, or for a resource
    /// of a custom type, its handler's; see [`Resource::handler_type`]).
    pub fn resource_type(&self) -> Option<&'static ResourceType> {
        resource_types::builtin(self.handler_type())
    }

    /// Whether discovery created it.
    pub fn is_discovered(&self) -> bool {
        self.owner_id.is_some()
    }

    /// A string property.
    pub fn prop(&self, key: &str) -> Option<&str> {
        self.properties.get(key).and_then(Value::as_str)
    }

    /// Counted (not registered) descendants: `(type, count)` pairs from the properties.
    pub fn counted(&self) -> Vec<(&'static str, u64)> {
        let keys: [(&str, &'static str); 8] = [
            ("commits", "git-commit"),
            ("tags", "git-tag"),
            ("stashes", "git-stash"),
            ("submodules", "git-submodule"),
            ("directories", "fs-directory"),
            ("files", "fs-file"),
            ("symlinks", "fs-symlink"),
            ("hardlinks", "fs-hardlink"),
        ];
        keys.iter()
            .filter_map(|(k, t)| {
                self.properties
                    .get(*k)
                    .and_then(Value::as_u64)
                    .filter(|n| *n > 0)
                    .map(|n| (*t, n))
            })
            .collect()
    }
}

/// Type-specific flags of `resource add`.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    /// `--path` (git-checkout, fs-directory).
    pub path: Option<PathBuf>,
    /// `--branch` (git-checkout).
    pub branch: Option<String>,
    /// `--url` (git).
    pub url: Option<String>,
    /// `--mount-path` (fs-mount).
    pub mount_path: Option<PathBuf>,
    /// `--description`.
    pub description: Option<String>,
    /// `--update`.
    pub update: bool,
    /// Set when the resource is of a custom type running on this handler.
    pub custom: Option<CustomAdd>,
}

/// What a custom type adds to a resource its handler discovers
/// ([`crate::registry::custom_types`]).
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct CustomAdd {
    /// The custom type's name, which the resource keeps as its type.
    pub type_name: String,
    /// The custom type's sandbox strategy (stored as the `sandbox_strategy` property).
    pub sandbox_strategy: String,
    /// The values of its extra arguments, stored as properties.
    pub properties: Map<String, Value>,
}

/// A resource to create during discovery.
#[derive(Debug, Clone, PartialEq)]
pub struct NewResource {
    /// Full name.
    pub name: String,
    /// Type.
    pub type_name: &'static str,
    /// Properties.
    pub properties: Map<String, Value>,
}

/// A node of a discovery: a new resource or an existing one that is reused.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Create it (owned by the root).
    New(NewResource),
    /// Link the existing resource (a registered directory at the same path).
    Existing(Resource),
}

impl Node {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            Node::New(n) => &n.name,
            Node::Existing(r) => &r.name,
        }
    }

    /// Its type.
    pub fn type_name(&self) -> &str {
        match self {
            Node::New(n) => n.type_name,
            Node::Existing(r) => &r.type_name,
        }
    }
}

/// What discovery found: `nodes[0]` is the root; edges are `(parent index, child index)`.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    /// Root first.
    pub nodes: Vec<Node>,
    /// Auto edges.
    pub edges: Vec<(usize, usize)>,
}

impl Discovery {
    fn push(&mut self, parent: Option<usize>, node: Node) -> usize {
        self.nodes.push(node);
        let i = self.nodes.len() - 1;
        if let Some(p) = parent {
            self.edges.push((p, i));
        }
        i
    }
}

/// What `add` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Added {
    /// The registered resource.
    pub resource: Resource,
    /// Discovered children with their status (`created` or `reused`).
    pub children: Vec<(Resource, std::borrow::Cow<'static, str>)>,
    /// Whether an existing resource was replaced.
    pub replaced: bool,
    /// Manual links (parent, child) that were lost because a discovered child they touched is
    /// no longer discovered (with `--update`; links to children found again are kept).
    pub dropped_links: Vec<(String, String)>,
}

fn check_user_name(input: &str, providers: &[String]) -> Result<String, ResourceError> {
    let err = |source| ResourceError::Name {
        name: input.to_string(),
        source,
    };
    let q = QualifiedName::resolve_user_input(input, &[]).map_err(err)?;
    q.check_user_creatable(providers).map_err(err)?;
    if q.name.contains(':') {
        return Err(ResourceError::ChildName(input.to_string()));
    }
    Ok(q.to_string())
}

fn existing_dir(flag: &'static str, path: &Path) -> Result<PathBuf, ResourceError> {
    let bad = |problem: &str| ResourceError::Path {
        flag,
        path: path.to_path_buf(),
        problem: problem.to_string(),
    };
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => std::fs::canonicalize(path).map_err(|e| bad(&e.to_string())),
        Ok(_) => Err(bad("is not a directory")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(bad(PATH_MISSING)),
        Err(e) => Err(bad(&e.to_string())),
    }
}

fn git_err(path: &Path, e: &git2::Error) -> ResourceError {
    ResourceError::Git {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    }
}

/// The checked-out branch of a repository (an unborn branch counts).
fn checked_out_branch(repo: &git2::Repository, path: &Path) -> Result<String, ResourceError> {
    if repo.head_detached().unwrap_or(false) {
        return Err(ResourceError::Detached {
            path: path.to_path_buf(),
        });
    }
    let head = repo.find_reference("HEAD").map_err(|e| git_err(path, &e))?;
    let target = head
        .symbolic_target()
        .ok()
        .flatten()
        .map(str::to_string)
        .ok_or_else(|| ResourceError::Detached {
            path: path.to_path_buf(),
        })?;
    Ok(target
        .strip_prefix("refs/heads/")
        .unwrap_or(&target)
        .to_string())
}

/// Opens the work tree at `path` and checks it is the top of a non-bare work tree.
fn open_work_tree(path: &Path) -> Result<(git2::Repository, PathBuf), ResourceError> {
    let dir = existing_dir("--path", path)?;
    let not = |problem: String| ResourceError::NotWorkTree {
        path: path.to_path_buf(),
        problem,
    };
    match git2::Repository::open(&dir) {
        Ok(repo) => {
            let Some(workdir) = repo.workdir().map(Path::to_path_buf) else {
                return Err(not("is a bare repository (no work tree); register it with `resource add git NAME --url PATH`".into()));
            };
            let workdir = std::fs::canonicalize(&workdir).unwrap_or(workdir);
            if workdir != dir {
                return Err(not(format!("is a git directory, not a work tree; the work tree is {}", workdir.display())));
            }
            Ok((repo, dir))
        }
        Err(_) => match git2::Repository::discover(&dir).ok().and_then(|r| r.workdir().map(Path::to_path_buf)) {
            Some(top) => Err(not(format!("is inside a git work tree but not its top; use --path {}", top.display()))),
            None => Err(not("is not a git work tree (no .git here); run `git init` there or choose the checkout's top directory".into())),
        },
    }
}

/// Turns an arbitrary ref or remote name into a name segment (`feature/x` -> `feature-x`).
fn segment(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        s.insert(0, 'x');
    }
    s
}

fn unique(name: String, taken: &mut HashSet<String>) -> String {
    if taken.insert(name.clone()) {
        return name;
    }
    (2..)
        .map(|i| format!("{name}-{i}"))
        .find(|n| taken.insert(n.clone()))
        .expect("some suffix is free")
}

fn props(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

/// Discovers a repository's remotes and branches (registered) and its commits, tags, stashes
/// and submodules (counted), under `parent` named `base`.
fn discover_repo(
    repo: &mut git2::Repository,
    path: &Path,
    base: &str,
    git_props: Map<String, Value>,
    d: &mut Discovery,
    parent: Option<usize>,
) -> Result<(), ResourceError> {
    let mut taken = HashSet::new();
    let mut remotes = Vec::new();
    for name in repo
        .remotes()
        .map_err(|e| git_err(path, &e))?
        .iter()
        .filter_map(|n| n.ok().flatten())
    {
        let url = repo
            .find_remote(name)
            .ok()
            .and_then(|r| r.url().ok().map(str::to_string));
        remotes.push((name.to_string(), url));
    }
    let mut branches = Vec::new();
    for b in repo
        .branches(Some(git2::BranchType::Local))
        .map_err(|e| git_err(path, &e))?
    {
        let (b, _) = b.map_err(|e| git_err(path, &e))?;
        let Some(name) = b.name().ok().flatten().map(str::to_string) else {
            continue;
        };
        let head = b.get().target();
        let commits = match head {
            Some(oid) => {
                let mut walk = repo.revwalk().map_err(|e| git_err(path, &e))?;
                walk.push(oid).map_err(|e| git_err(path, &e))?;
                walk.count() as u64
            }
            None => 0,
        };
        branches.push((name, head.map(|o| o.to_string()), commits, b.is_head()));
    }
    let commits = {
        let mut walk = repo.revwalk().map_err(|e| git_err(path, &e))?;
        let _ = walk.push_glob("refs/heads");
        walk.count() as u64
    };
    let tags = repo.tag_names(None).map(|t| t.len() as u64).unwrap_or(0);
    let submodules = repo.submodules().map(|s| s.len() as u64).unwrap_or(0);
    let mut stashes = 0u64;
    let _ = repo.stash_foreach(|_, _, _| {
        stashes += 1;
        true
    });
    let mut git_props = git_props;
    for (k, v) in [
        ("commits", commits),
        ("tags", tags),
        ("stashes", stashes),
        ("submodules", submodules),
        ("remotes", remotes.len() as u64),
        ("branches", branches.len() as u64),
    ] {
        git_props.insert(k.into(), json!(v));
    }
    let git_index = match parent {
        Some(p) => d.push(
            Some(p),
            Node::New(NewResource {
                name: base.to_string(),
                type_name: "git",
                properties: git_props,
            }),
        ),
        None => {
            if let Some(Node::New(root)) = d.nodes.get_mut(0) {
                root.properties.extend(git_props);
            }
            0
        }
    };
    for (name, url) in remotes {
        let full = unique(format!("{base}:{}", segment(&name)), &mut taken);
        d.push(
            Some(git_index),
            Node::New(NewResource {
                name: full,
                type_name: "git-remote",
                properties: props(json!({"remote": name, "url": url})),
            }),
        );
    }
    for (name, head, commits, checked_out) in branches {
        let full = unique(format!("{base}:{}", segment(&name)), &mut taken);
        d.push(
            Some(git_index),
            Node::New(NewResource { name: full, type_name: "git-branch", properties: props(json!({"branch": name, "head": head, "commits": commits, "checked_out": checked_out})) }),
        );
    }
    Ok(())
}

/// Counts what is under a directory (not following symlinks; `.git` at the top is skipped).
fn count_dir(dir: &Path) -> Map<String, Value> {
    use std::os::unix::fs::MetadataExt;
    let (mut files, mut dirs, mut links, mut hard, mut bytes) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            if d == dir && e.file_name() == ".git" {
                continue;
            }
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.file_type().is_symlink() {
                links += 1;
            } else if m.is_dir() {
                dirs += 1;
                stack.push(e.path());
            } else {
                files += 1;
                bytes += m.len();
                if m.nlink() > 1 {
                    hard += 1;
                }
            }
        }
    }
    props(
        json!({"files": files, "directories": dirs, "symlinks": links, "hardlinks": hard, "bytes": bytes}),
    )
}

fn dir_node(store: &Store, name: String, path: &Path) -> Result<Node, ResourceError> {
    let path_str = path.display().to_string();
    if let Some(existing) = store.resources()?.into_iter().find(|r| {
        r.type_name == "fs-directory"
            && !r.is_discovered()
            && r.prop("path") == Some(path_str.as_str())
    }) {
        return Ok(Node::Existing(existing));
    }
    let mut p = props(json!({"path": path_str}));
    p.extend(count_dir(path));
    Ok(Node::New(NewResource {
        name,
        type_name: "fs-directory",
        properties: p,
    }))
}

/// Parses a `--url` for the `git` type: a local path or `file://` URL.
/// The local path of a repository URL (`None`: a network URL).
fn local_repo_path(url: &str) -> Option<PathBuf> {
    if let Some(rest) = url.strip_prefix("file://") {
        return Some(PathBuf::from(rest));
    }
    let scp_like = url.contains('@') && url.contains(':') && !url.starts_with('/');
    if url.contains("://") || scp_like {
        return None;
    }
    Some(PathBuf::from(url))
}

/// Validates the target of `resource add` and discovers its children (nothing is written).
///
/// # Errors
/// Unknown or non-addable types, missing or wrong flags, paths that do not exist, directories
/// that are not git work trees, a branch that is not checked out, network URLs.
pub fn discover(
    store: &Store,
    type_name: &str,
    name: &str,
    args: &AddArgs,
) -> Result<Discovery, ResourceError> {
    let mut d = Discovery::default();
    let root = |props: Map<String, Value>, ty: &'static str| {
        Node::New(NewResource {
            name: name.to_string(),
            type_name: ty,
            properties: props,
        })
    };
    match type_name {
        "git-checkout" => {
            let path = args
                .path
                .clone()
                .ok_or_else(|| missing_flag("--path", "git-checkout"))?;
            let (mut repo, dir) = open_work_tree(&path)?;
            let branch = checked_out_branch(&repo, &path)?;
            if let Some(given) = &args.branch
                && given != &branch
            {
                return Err(ResourceError::BranchMismatch {
                    given: given.clone(),
                    checked_out: branch,
                    path,
                });
            }
            let head = repo
                .head()
                .ok()
                .and_then(|h| h.target())
                .map(|o| o.to_string());
            let git_dir =
                std::fs::canonicalize(repo.path()).unwrap_or_else(|_| repo.path().to_path_buf());
            d.push(
                None,
                root(
                    props(
                        json!({"path": dir.display().to_string(), "branch": branch, "head": head}),
                    ),
                    "git-checkout",
                ),
            );
            discover_repo(
                &mut repo,
                &path,
                &format!("{name}:repo"),
                props(json!({"git_dir": git_dir.display().to_string()})),
                &mut d,
                Some(0),
            )?;
            let node = dir_node(store, format!("{name}:worktree"), &dir)?;
            d.push(Some(0), node);
        }
        "git" => {
            let url = args
                .url
                .clone()
                .ok_or_else(|| missing_flag("--url", "git"))?;
            let Some(path) = local_repo_path(&url) else {
                let branch = crate::sandbox::remote::default_branch(&url).map_err(|message| {
                    ResourceError::Unreachable {
                        url: url.clone(),
                        message,
                    }
                })?;
                d.push(
                    None,
                    root(props(json!({"url": url, "branch": branch})), "git"),
                );
                return Ok(d);
            };
            let _ = existing_dir("--url", &path)?;
            let mut repo = git2::Repository::open(&path).map_err(|_| ResourceError::Path {
                flag: "--url",
                path: path.clone(),
                problem: "is not a git repository".into(),
            })?;
            let git_dir =
                std::fs::canonicalize(repo.path()).unwrap_or_else(|_| repo.path().to_path_buf());
            d.push(
                None,
                root(
                    props(json!({"url": url, "git_dir": git_dir.display().to_string()})),
                    "git",
                ),
            );
            discover_repo(&mut repo, &path, name, Map::new(), &mut d, None)?;
        }
        "fs-directory" => {
            let path = args
                .path
                .clone()
                .ok_or_else(|| missing_flag("--path", "fs-directory"))?;
            let dir = existing_dir("--path", &path)?;
            let mut p = props(json!({"path": dir.display().to_string()}));
            p.extend(count_dir(&dir));
            d.push(None, root(p, "fs-directory"));
        }
        "fs-mount" => {
            let path = args
                .mount_path
                .clone()
                .ok_or_else(|| missing_flag("--mount-path", "fs-mount"))?;
            let dir = existing_dir("--mount-path", &path)?;
            d.push(
                None,
                root(
                    props(json!({"mount_path": dir.display().to_string()})),
                    "fs-mount",
                ),
            );
            let node = dir_node(store, format!("{name}:root"), &dir)?;
            d.push(Some(0), node);
        }
        other => {
            return Err(match resource_types::builtin(other) {
                Some(_) => ResourceError::NotAddable {
                    name: other.to_string(),
                    why: format!(
                        "is discovered from its parent, not added by hand (addable types: {})",
                        resource_types::user_addable().join(", ")
                    ),
                },
                None => ResourceError::NotAddable {
                    name: other.to_string(),
                    why: format!(
                        "is not a known type (addable types: {}; custom types are not yet supported)",
                        resource_types::user_addable().join(", ")
                    ),
                },
            });
        }
    }
    Ok(d)
}

fn missing_flag(flag: &'static str, ty: &str) -> ResourceError {
    ResourceError::Path {
        flag,
        path: PathBuf::new(),
        problem: format!("is required for {ty}"),
    }
}

/// Registers a resource and its discovered children in one transaction.
///
/// # Errors
/// Name errors, [`ResourceError::Exists`] without `--update`, the errors of [`discover`], and
/// with `--update`, [`ResourceError::UsedByPlans`] while an unfinished plan targets a project
/// linking it, and [`ResourceError::Linked`] when a discovered child that a project links to
/// is no longer discovered.
pub fn add(
    store: &mut Store,
    providers: &[String],
    type_name: &str,
    name_input: &str,
    args: &AddArgs,
) -> Result<Added, ResourceError> {
    let name = check_user_name(name_input, providers)?;
    let existing = store.resource_by_name(&name)?;
    if let Some(e) = &existing {
        check_replaceable(store, &name, e, args)?;
    }
    let discovery = discover(store, type_name, &name, args)?;
    check_same_target(store, &name, &discovery)?;
    let now = super::now();
    let root_id = existing
        .as_ref()
        .map(|e| e.resource_id)
        .unwrap_or_else(Id::generate);
    let created_at = existing.as_ref().map(|e| e.created_at).unwrap_or(now);
    // With --update, children discovered again keep their ids, so manual links to them stay.
    let previous: Vec<Resource> = match &existing {
        Some(e) => store
            .resources()?
            .into_iter()
            .filter(|r| r.owner_id == Some(e.resource_id))
            .collect(),
        None => Vec::new(),
    };
    let again = |n: &NewResource| {
        previous
            .iter()
            .find(|p| p.name == n.name && p.type_name == n.type_name)
    };
    let gone: Vec<Id> = previous
        .iter()
        .filter(|p| {
            !discovery.nodes.iter().any(
                |n| matches!(n, Node::New(n) if n.name == p.name && n.type_name == p.type_name),
            )
        })
        .map(|p| p.resource_id)
        .collect();
    refuse_losing_linked_children(store, &gone, existing.as_ref())?;
    let dropped_links = store.manual_links_touching(&gone)?;
    let mut resources = Vec::new();
    let mut ids = Vec::new();
    for (i, node) in discovery.nodes.iter().enumerate() {
        match node {
            Node::New(n) => {
                let kept = if i == 0 { None } else { again(n) };
                let id = if i == 0 {
                    root_id
                } else {
                    kept.map_or_else(Id::generate, |k| k.resource_id)
                };
                ids.push(id);
                resources.push(Resource {
                    resource_id: id,
                    name: n.name.clone(),
                    type_name: n.type_name.to_string(),
                    description: if i == 0 {
                        args.description.clone()
                    } else {
                        None
                    },
                    properties: n.properties.clone(),
                    owner_id: if i == 0 { None } else { Some(root_id) },
                    created_at: if i == 0 {
                        created_at
                    } else {
                        kept.map_or(now, |k| k.created_at)
                    },
                    updated_at: now,
                });
            }
            Node::Existing(r) => ids.push(r.resource_id),
        }
    }
    if let Some(c) = &args.custom {
        mark_custom(&mut resources[0], c);
    }
    let edges: Vec<(Id, Id)> = discovery
        .edges
        .iter()
        .map(|(p, c)| (ids[*p], ids[*c]))
        .collect();
    store.save_discovery(&resources, &edges, existing.is_some())?;
    let root = resources[0].clone();
    let mut children = Vec::new();
    for node in discovery.nodes.iter().skip(1) {
        match node {
            Node::New(n) => {
                if let Some(r) = resources.iter().find(|r| r.name == n.name) {
                    children.push((r.clone(), "created".into()));
                }
            }
            Node::Existing(r) => children.push((r.clone(), "reused".into())),
        }
    }
    Ok(Added {
        resource: root,
        children,
        replaced: existing.is_some(),
        dropped_links,
    })
}

/// The plans that are not finished and target one of the projects in `links`.
fn plans_using(store: &Store, links: &[(String, String)]) -> Result<Vec<String>, ResourceError> {
    if links.is_empty() {
        return Ok(Vec::new());
    }
    Ok(store
        .plans()?
        .into_iter()
        .filter(|p| {
            !p.status.is_terminal()
                && p.project_links
                    .iter()
                    .any(|l| links.iter().any(|(project, _)| *project == l.project_name))
        })
        .map(|p| p.plan_id.to_string())
        .collect())
}

/// With `--update`, a discovered child that a project links to must be discovered again.
fn refuse_losing_linked_children(
    store: &Store,
    gone: &[Id],
    existing: Option<&Resource>,
) -> Result<(), ResourceError> {
    let Some(e) = existing else { return Ok(()) };
    let links: Vec<(String, String)> = store
        .project_links_of(gone)?
        .into_iter()
        .map(|(project, resource, _)| (project, resource))
        .collect();
    if links.is_empty() {
        return Ok(());
    }
    Err(ResourceError::Linked {
        name: e.name.clone(),
        projects: links
            .iter()
            .map(|(project, resource)| format!("{project} (via {resource}, no longer discovered)"))
            .collect(),
        links,
    })
}

/// Gives the root of a discovery its custom type, the handler it runs on and its extra
/// properties.
fn mark_custom(root: &mut Resource, c: &CustomAdd) {
    let handler = std::mem::replace(&mut root.type_name, c.type_name.clone());
    root.properties
        .insert("handler".into(), Value::from(handler));
    root.properties.insert(
        "sandbox_strategy".into(),
        Value::from(c.sandbox_strategy.clone()),
    );
    for (k, v) in &c.properties {
        root.properties
            .entry(k.clone())
            .or_insert_with(|| v.clone());
    }
}

/// `resource add --update` may replace `existing` only when the user added it (not
/// discovered under another resource) and no plan that is not finished uses it through a
/// project.
fn check_replaceable(
    store: &Store,
    name: &str,
    e: &Resource,
    args: &AddArgs,
) -> Result<(), ResourceError> {
    if !args.update {
        return Err(ResourceError::Exists(name.to_string()));
    }
    if let Some(owner) = e.owner_id {
        let owner = store
            .resource_by_id(&owner)?
            .map(|o| o.name)
            .unwrap_or_default();
        return Err(ResourceError::Discovered {
            name: name.to_string(),
            owner,
        });
    }
    let links: Vec<(String, String)> = store
        .project_links_of(&store.owned_ids(&e.resource_id)?)?
        .into_iter()
        .map(|(project, resource, _)| (project, resource))
        .collect();
    let plans = plans_using(store, &links)?;
    if !plans.is_empty() {
        return Err(ResourceError::UsedByPlans {
            name: name.to_string(),
            plans,
        });
    }
    Ok(())
}

/// A second resource of the same type for the same checkout, directory, mount or repository
/// is refused (it would be linked and sandboxed twice).
fn check_same_target(
    store: &Store,
    name: &str,
    discovery: &Discovery,
) -> Result<(), ResourceError> {
    if let Some(Node::New(root)) = discovery.nodes.first() {
        let key = match root.type_name {
            "git-checkout" => Some(("path", "checkout")),
            "fs-directory" => Some(("path", "directory")),
            "fs-mount" => Some(("mount_path", "mount")),
            "git" => Some(("git_dir", "repository")),
            _ => None,
        };
        if let Some((key, what)) = key
            && let Some(target) = root.properties.get(key).and_then(Value::as_str)
            && let Some(other) = store.resources()?.into_iter().find(|r| {
                r.name != name
                    && !r.is_discovered()
                    && r.handler_type() == root.type_name
                    && r.prop(key) == Some(target)
            })
        {
            return Err(ResourceError::SameTarget {
                name: name.to_string(),
                existing: other.name,
                what,
                target: target.to_string(),
            });
        }
    }
    Ok(())
}

/// Finds a resource by name (bare names mean `local/NAME`).
///
/// # Errors
/// [`ResourceError::NotFound`].
pub fn find(store: &Store, input: &str) -> Result<Resource, ResourceError> {
    let by_id = |i: &str| -> Result<Option<Resource>, crate::store::StoreError> {
        match i.parse::<Id>() {
            Ok(id) => store.resource_by_id(&id),
            Err(_) => Ok(None),
        }
    };
    Ok(crate::registry::lookup::Lookup {
        kind: "resource",
        by_name: &|n| store.resource_by_name(n),
        by_id: &by_id,
        ids: &|| {
            Ok(store
                .resources()?
                .into_iter()
                .map(|r| r.resource_id.to_string())
                .collect())
        },
        names: &|| Ok(store.resources()?.into_iter().map(|r| r.name).collect()),
    }
    .find(input)??)
}

/// What removing a resource would remove.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct RemovalPlan {
    /// The resource.
    pub resource: Resource,
    /// Discovered children removed with it.
    pub children: u64,
}

/// Checks that a resource can be removed: registered by a user (not discovered) and neither it
/// nor its discovered children linked to a project.
///
/// # Errors
/// [`ResourceError::Discovered`], [`ResourceError::Linked`], [`ResourceError::NotFound`].
pub fn plan_removal(store: &Store, input: &str) -> Result<RemovalPlan, ResourceError> {
    let r = find(store, input)?;
    if let Some(owner) = r.owner_id {
        let owner = store
            .resource_by_id(&owner)?
            .map(|o| o.name)
            .unwrap_or_default();
        return Err(ResourceError::Discovered {
            name: r.name,
            owner,
        });
    }
    let owned = store.owned_ids(&r.resource_id)?;
    let links: Vec<(String, String)> = store
        .project_links_of(&owned)?
        .into_iter()
        .map(|(project, resource, _)| (project, resource))
        .collect();
    let linked: Vec<String> = links
        .iter()
        .cloned()
        .map(|(project, resource)| {
            if resource == r.name {
                project
            } else {
                format!("{project} (via {resource})")
            }
        })
        .collect();
    if !linked.is_empty() {
        return Err(ResourceError::Linked {
            name: r.name,
            projects: linked,
            links,
        });
    }
    Ok(RemovalPlan {
        children: owned.len().saturating_sub(1) as u64,
        resource: r,
    })
}

/// Removes a resource and its discovered children (after [`plan_removal`] passed).
///
/// # Errors
/// As [`plan_removal`] (checked again inside), store errors.
pub fn remove(store: &mut Store, input: &str) -> Result<RemovalPlan, ResourceError> {
    let plan = plan_removal(store, input)?;
    store.delete_resource(&plan.resource.resource_id)?;
    Ok(plan)
}

/// Links `child` under `parent` by hand, after the type rules and a cycle check.
///
/// # Errors
/// [`ResourceError::LinkRule`], [`ResourceError::Cycle`], [`ResourceError::AlreadyLinked`].
pub fn link_child(
    store: &mut Store,
    parent: &str,
    child: &str,
) -> Result<(Resource, Resource), ResourceError> {
    let p = find(store, parent)?;
    let c = find(store, child)?;
    let rule = |reason: String| ResourceError::LinkRule {
        parent: p.name.clone(),
        child: c.name.clone(),
        reason,
    };
    if p.resource_id == c.resource_id {
        return Err(rule("a resource cannot be its own child".into()));
    }
    let children = store.children(&p.resource_id)?;
    if children
        .iter()
        .any(|e| e.resource.resource_id == c.resource_id)
    {
        return Err(ResourceError::AlreadyLinked {
            parent: p.name,
            child: c.name,
        });
    }
    if store.is_descendant(&c.resource_id, &p.resource_id)? {
        return Err(ResourceError::Cycle {
            parent: p.name,
            child: c.name,
        });
    }
    let same_type_children = children
        .iter()
        .filter(|e| e.resource.type_name == c.type_name)
        .count() as u32;
    let same_type_parents = store
        .parents(&c.resource_id)?
        .iter()
        .filter(|e| e.resource.type_name == p.type_name)
        .count() as u32;
    match super::custom_types::link_rule(store, &p.type_name, &c.type_name)? {
        Some(custom) => custom.map_err(rule)?,
        None => resource_types::check_manual_link(
            &p.type_name,
            &c.type_name,
            same_type_children,
            same_type_parents,
        )
        .map_err(rule)?,
    }
    store.insert_link(&p.resource_id, &c.resource_id)?;
    Ok((p, c))
}

/// Checks that a manual link exists and may be removed.
///
/// # Errors
/// [`ResourceError::NotLinked`], [`ResourceError::AutoLink`].
pub fn check_unlink(
    store: &Store,
    parent: &str,
    child: &str,
) -> Result<(Resource, Resource), ResourceError> {
    let p = find(store, parent)?;
    let c = find(store, child)?;
    match store
        .children(&p.resource_id)?
        .into_iter()
        .find(|e| e.resource.resource_id == c.resource_id)
    {
        None => Err(ResourceError::NotLinked {
            parent: p.name,
            child: c.name,
        }),
        Some(e) if e.auto => Err(ResourceError::AutoLink {
            parent: p.name,
            child: c.name,
        }),
        Some(_) => Ok((p, c)),
    }
}

/// Removes a manual link.
///
/// # Errors
/// As [`check_unlink`].
pub fn unlink_child(
    store: &mut Store,
    parent: &str,
    child: &str,
) -> Result<(Resource, Resource), ResourceError> {
    let (p, c) = check_unlink(store, parent, child)?;
    store.delete_link(&p.resource_id, &c.resource_id)?;
    Ok((p, c))
}

/// A node of `resource tree`.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct TreeNode {
    /// Resource name.
    pub name: String,
    /// Type.
    pub type_name: String,
    /// `physical` or `virtual`.
    pub kind: String,
    /// Created by discovery (edge from the parent).
    pub auto: bool,
    /// Registered children (within the depth limit).
    pub children: Vec<TreeNode>,
    /// Counted descendants (`{type: count}`), not registered one row each.
    pub counted: BTreeMap<String, u64>,
    /// Children not shown because of the depth limit.
    pub hidden_children: u64,
}

/// Builds the tree under a resource, `depth` levels deep, optionally only showing nodes of
/// `type_filter` (and the nodes on the way to them).
///
/// # Errors
/// [`ResourceError::NotFound`], store errors.
pub fn tree(
    store: &Store,
    input: &str,
    depth: u32,
    type_filter: Option<&str>,
) -> Result<TreeNode, ResourceError> {
    let root = find(store, input)?;
    let mut seen = HashSet::new();
    Ok(
        build(store, &root, false, depth, type_filter, &mut seen)?.unwrap_or(TreeNode {
            name: root.name.clone(),
            type_name: root.type_name.clone(),
            kind: root
                .resource_type()
                .map_or("physical", |t| t.kind())
                .to_string(),
            auto: false,
            children: vec![],
            counted: BTreeMap::new(),
            hidden_children: 0,
        }),
    )
}

fn build(
    store: &Store,
    r: &Resource,
    auto: bool,
    depth: u32,
    filter: Option<&str>,
    seen: &mut HashSet<Id>,
) -> Result<Option<TreeNode>, ResourceError> {
    seen.insert(r.resource_id);
    let edges = store.children(&r.resource_id)?;
    let mut children = Vec::new();
    let mut hidden = 0;
    if depth == 0 {
        hidden = edges.len() as u64;
    } else {
        for e in edges {
            if seen.contains(&e.resource.resource_id) {
                continue;
            }
            if let Some(n) = build(store, &e.resource, e.auto, depth - 1, filter, seen)? {
                children.push(n);
            }
        }
    }
    let counted: BTreeMap<String, u64> = r
        .counted()
        .into_iter()
        .filter(|(t, _)| filter.is_none_or(|f| f == *t))
        .map(|(t, n)| (t.to_string(), n))
        .collect();
    let matches = filter.is_none_or(|f| f == r.type_name);
    if !matches && children.is_empty() && counted.is_empty() {
        return Ok(None);
    }
    Ok(Some(TreeNode {
        name: r.name.clone(),
        type_name: r.type_name.clone(),
        kind: r
            .resource_type()
            .map_or("physical", |t| t.kind())
            .to_string(),
        auto,
        children,
        counted,
        hidden_children: hidden,
    }))
}

/// Everything `resource show` displays.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Details {
    /// The resource.
    pub resource: Resource,
    /// Its sandbox strategy (inherited ones resolved).
    pub sandbox_strategy: String,
    /// Parents.
    pub parents: Vec<Edge>,
    /// Direct children with their own child counts.
    pub children: Vec<(Edge, u64)>,
    /// Projects linking it: (project, read_only).
    pub projects: Vec<(String, bool)>,
}

/// Loads the details of a resource.
///
/// # Errors
/// [`ResourceError::NotFound`], store errors.
pub fn details(store: &Store, input: &str) -> Result<Details, ResourceError> {
    let resource = find(store, input)?;
    let parents = store.parents(&resource.resource_id)?;
    let mut children = Vec::new();
    for e in store.children(&resource.resource_id)? {
        // Direct children that are rows, as `resource list` counts them (counted items such
        // as commits are shown separately).
        let n = store.children(&e.resource.resource_id)?.len() as u64;
        children.push((e, n));
    }
    let projects = store
        .project_links_of(&[resource.resource_id])?
        .into_iter()
        .map(|(p, _, ro)| (p, ro))
        .collect();
    // Ancestor types for strategy inheritance: follow first parents upward.
    let mut ancestors = Vec::new();
    let mut cur = parents.first().map(|e| e.resource.clone());
    let mut guard = 0;
    while let Some(a) = cur {
        ancestors.push(a.type_name.clone());
        cur = store
            .parents(&a.resource_id)?
            .first()
            .map(|e| e.resource.clone());
        guard += 1;
        if guard > 64 {
            break;
        }
    }
    let anc: Vec<&str> = ancestors.iter().map(String::as_str).collect();
    Ok(Details {
        sandbox_strategy: match resource.prop("sandbox_strategy") {
            Some(custom) => custom.to_string(),
            None => resource_types::effective_strategy(&resource.type_name, &anc).to_string(),
        },
        resource,
        parents,
        children,
        projects,
    })
}

/// Checks the values given to `resource add <type>` (by argument name; booleans as
/// `"true"`) and turns them into the handler's inputs plus stored properties.
///
/// # Errors
/// [`TypeError::Value`] naming the flag; [`TypeError::NotAddable`].
pub fn add_args(
    custom: &CustomType,
    values: &BTreeMap<String, String>,
) -> Result<(String, AddArgs), TypeError> {
    let handler = match (&custom.handler, custom.user_addable) {
        (Some(h), true) => h.clone(),
        _ => return Err(TypeError::NotAddable(custom.name.clone())),
    };
    let mut args = AddArgs::default();
    let mut properties = Map::new();
    for a in &custom.cli_arguments {
        let value = match (values.get(&a.name), &a.default) {
            (Some(v), _) => Some(typed(a, v)?),
            (None, Some(d)) => Some(d.clone()),
            (None, None) if a.required => {
                return Err(TypeError::Value {
                    flag: a.name.clone(),
                    message: format!("is required for {}", custom.name),
                });
            }
            (None, None) => None,
        };
        let Some(value) = value else { continue };
        let text = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_string);
        match a.input(&handler) {
            Some("path") => args.path = Some(PathBuf::from(text)),
            Some("branch") => args.branch = Some(text),
            Some("url") => args.url = Some(text),
            Some("mount-path") => args.mount_path = Some(PathBuf::from(text)),
            _ => {
                properties.insert(a.name.clone(), value);
            }
        }
    }
    args.custom = Some(CustomAdd {
        type_name: custom.name.clone(),
        sandbox_strategy: custom.sandbox_strategy.clone(),
        properties,
    });
    Ok((handler, args))
}

fn typed(a: &CliArgument, v: &str) -> Result<Value, TypeError> {
    let bad = |m: String| TypeError::Value {
        flag: a.name.clone(),
        message: m,
    };
    if let Some(p) = a.validation.as_ref().and_then(|x| x.pattern.as_deref())
        && !regex::Regex::new(p).is_ok_and(|r| r.is_match(v))
    {
        return Err(bad(format!("`{v}` does not match the pattern `{p}`")));
    }
    Ok(match a.value_type {
        ArgType::Boolean => Value::Bool(v == "true"),
        ArgType::Integer => Value::from(
            v.parse::<i64>()
                .map_err(|_| bad(format!("`{v}` is not a whole number")))?,
        ),
        ArgType::Path => Value::from(
            std::fs::canonicalize(v)
                .map(|p| p.display().to_string())
                .unwrap_or_else(|_| v.to_string()),
        ),
        ArgType::String | ArgType::Url => Value::from(v),
    })
}

/// Registers a resource of a custom type: the handler discovers it as its built-in type would,
/// the resource keeps the custom type's name, and the extra arguments are its properties.
///
/// # Errors
/// [`TypeError::Value`], [`TypeError::NotAddable`], and the errors of [`add`].
pub fn add_custom(
    store: &mut Store,
    providers: &[String],
    custom: &CustomType,
    name: &str,
    values: &BTreeMap<String, String>,
    description: Option<String>,
    update: bool,
) -> Result<Added, TypeError> {
    let (handler, mut args) = add_args(custom, values)?;
    args.description = description;
    args.update = update;
    add(store, providers, &handler, name, &args).map_err(|e| own_flag(custom, &handler, e))
}

/// A handler's complaint about one of its inputs, named by the custom type's own argument
/// (`--root`, not the handler's `--path`).
fn own_flag(custom: &CustomType, handler: &str, e: ResourceError) -> TypeError {
    let arg_for = |input: &str| {
        custom
            .cli_arguments
            .iter()
            .find(|a| a.input(handler) == Some(input))
            .map(|a| a.name.clone())
    };
    match e {
        ResourceError::Path {
            flag,
            path,
            problem,
        } => match arg_for(flag.trim_start_matches("--")) {
            Some(name) => TypeError::Value {
                flag: name,
                message: format!("{}: {problem}", path.display()),
            },
            None => ResourceError::Path {
                flag,
                path,
                problem,
            }
            .into(),
        },
        ResourceError::NotWorkTree { path, problem } => match arg_for("path") {
            Some(name) => TypeError::Value {
                flag: name,
                message: format!("{}: {problem}", path.display()),
            },
            None => ResourceError::NotWorkTree { path, problem }.into(),
        },
        other => other.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=T",
                "-c",
                "user.email=t@example.invalid",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    }

    fn repo() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        git(dir.path(), &["init", "-q"]);
        std::fs::create_dir(dir.path().join("src")).unwrap();
        std::fs::write(dir.path().join("src/lib.rs"), "fn x() {}\n").unwrap();
        std::fs::write(dir.path().join("README"), "hi\n").unwrap();
        git(dir.path(), &["add", "."]);
        git(dir.path(), &["commit", "-q", "-m", "one"]);
        git(dir.path(), &["branch", "feature/x"]);
        git(
            dir.path(),
            &["remote", "add", "origin", "https://example.invalid/x.git"],
        );
        dir
    }

    fn store() -> (tempfile::TempDir, Store) {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(&d.path().join("db")).unwrap();
        (d, s)
    }

    #[test]
    fn a_checkout_discovers_repo_remotes_branches_and_worktree() {
        let r = repo();
        let (_d, mut s) = store();
        let added = add(
            &mut s,
            &[],
            "git-checkout",
            "api",
            &AddArgs {
                path: Some(r.path().into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert_eq!(added.resource.name, "local/api");
        assert_eq!(added.resource.prop("branch"), Some("main"));
        let names: Vec<&str> = added
            .children
            .iter()
            .map(|(c, _)| c.name.as_str())
            .collect();
        assert_eq!(
            names,
            [
                "local/api:repo",
                "local/api:repo:origin",
                "local/api:repo:feature-x",
                "local/api:repo:main",
                "local/api:worktree"
            ]
        );
        let wt = &added.children[4].0;
        assert_eq!(wt.properties["files"], json!(2));
        assert_eq!(wt.properties["directories"], json!(1));
        let t = tree(&s, "api", 3, None).unwrap();
        assert_eq!(t.children.len(), 2);
        assert_eq!(t.children[0].counted.get("git-commit"), Some(&1));
    }

    #[test]
    fn bad_targets_are_refused_with_the_argument_named() {
        let r = repo();
        let (_d, mut s) = store();
        let add = |s: &mut Store, args: AddArgs| add(s, &[], "git-checkout", "x", &args);
        let e = add(
            &mut s,
            AddArgs {
                path: Some(r.path().join("nope")),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(
            e.to_string().contains("--path") && e.to_string().contains("does not exist"),
            "{e}"
        );
        let e = add(
            &mut s,
            AddArgs {
                path: Some(r.path().join("src")),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("not its top"), "{e}");
        let plain = tempfile::tempdir().unwrap();
        let e = add(
            &mut s,
            AddArgs {
                path: Some(plain.path().into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("not a git work tree"), "{e}");
        let e = add(
            &mut s,
            AddArgs {
                path: Some(r.path().into()),
                branch: Some("feature/x".into()),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert!(matches!(e, ResourceError::BranchMismatch { .. }), "{e}");
        assert!(s.resources().unwrap().is_empty(), "nothing was written");
    }

    #[test]
    fn cycles_and_wrong_types_are_refused_and_auto_links_stay() {
        let (_d, mut s) = store();
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        add(
            &mut s,
            &[],
            "fs-directory",
            "a",
            &AddArgs {
                path: Some(a.path().into()),
                ..Default::default()
            },
        )
        .unwrap();
        add(
            &mut s,
            &[],
            "fs-directory",
            "b",
            &AddArgs {
                path: Some(b.path().into()),
                ..Default::default()
            },
        )
        .unwrap();
        link_child(&mut s, "a", "b").unwrap();
        assert!(matches!(
            link_child(&mut s, "b", "a"),
            Err(ResourceError::Cycle { .. })
        ));
        let r = repo();
        add(
            &mut s,
            &[],
            "git-checkout",
            "c",
            &AddArgs {
                path: Some(r.path().into()),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(matches!(
            link_child(&mut s, "c", "a"),
            Err(ResourceError::LinkRule { .. })
        ));
        assert!(matches!(
            unlink_child(&mut s, "c", "c:repo"),
            Err(ResourceError::AutoLink { .. })
        ));
        unlink_child(&mut s, "a", "b").unwrap();
        let removed = remove(&mut s, "c").unwrap();
        assert_eq!(removed.children, 5);
        assert_eq!(s.resources().unwrap().len(), 2);
    }
}
