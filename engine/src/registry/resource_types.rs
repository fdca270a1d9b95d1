//! Built-in resource types (spec section 23): 15 physical and 9 virtual types, 4 of them
//! user-addable (`git-checkout`, `git`, `fs-directory`, `fs-mount`), with the parent/child
//! rules the resource DAG must follow. Custom types (`resource type add`) live in
//! [`super::custom_types`].

use serde::Serialize;

/// A command-line argument of `resource add <TYPE>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CliArg {
    /// The flag (`--path`).
    pub flag: &'static str,
    /// Whether it must be given.
    pub required: bool,
    /// `path`, `string` or `url`.
    pub value_type: &'static str,
    /// What it means.
    pub description: &'static str,
}

/// Which children a type may have, how many, and whether discovery or users create the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChildRule {
    /// Child type.
    pub type_name: &'static str,
    /// Minimum count (informational: discovery creates required children).
    pub min: u32,
    /// Maximum count (`None`: unbounded).
    pub max: Option<u32>,
    /// Created by discovery.
    pub auto: bool,
    /// May be linked by hand (`resource link-child`).
    pub manual: bool,
    /// What the child is.
    pub description: &'static str,
}

/// Which parents a type may have and how many of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParentRule {
    /// Parent type.
    pub type_name: &'static str,
    /// Maximum parents of this type (`None`: unbounded).
    pub max: Option<u32>,
}

/// What a resource of a type can do.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Capabilities {
    /// Can be read.
    pub readable: bool,
    /// Can be written.
    pub writable: bool,
    /// Can be sandboxed for Execute.
    pub sandboxable: bool,
    /// Supports checkpoints and rollback.
    pub checkpointable: bool,
}

/// A resource type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ResourceType {
    /// Bare name (`git-checkout`).
    pub name: &'static str,
    /// What it represents.
    pub description: &'static str,
    /// Physical (a real thing) or virtual (an equivalence class of physical things).
    pub physical: bool,
    /// Whether `resource add` accepts it.
    pub user_addable: bool,
    /// `git_worktree`, `copy_on_write`, `none`, or `inherit` (from the nearest ancestor).
    pub sandbox_strategy: &'static str,
    /// The handler implementation.
    pub handler: &'static str,
    /// May be registered without a parent.
    pub top_level: bool,
    /// Allowed parents.
    pub parents: &'static [ParentRule],
    /// Allowed children.
    pub children: &'static [ChildRule],
    /// `resource add` arguments.
    pub cli_args: &'static [CliArg],
    /// Capabilities.
    pub capabilities: Capabilities,
}

impl ResourceType {
    /// `physical` or `virtual`.
    pub fn kind(&self) -> &'static str {
        if self.physical { "physical" } else { "virtual" }
    }

    /// Child types created by discovery.
    pub fn auto_children(&self) -> Vec<&'static str> {
        self.children
            .iter()
            .filter(|c| c.auto)
            .map(|c| c.type_name)
            .collect()
    }
}

const RWSC: Capabilities = Capabilities {
    readable: true,
    writable: true,
    sandboxable: true,
    checkpointable: true,
};
const RO: Capabilities = Capabilities {
    readable: true,
    writable: false,
    sandboxable: false,
    checkpointable: false,
};
const VIRTUAL: Capabilities = Capabilities {
    readable: false,
    writable: false,
    sandboxable: false,
    checkpointable: false,
};

const fn child(
    type_name: &'static str,
    min: u32,
    max: Option<u32>,
    auto: bool,
    manual: bool,
    description: &'static str,
) -> ChildRule {
    ChildRule {
        type_name,
        min,
        max,
        auto,
        manual,
        description,
    }
}

const fn parent(type_name: &'static str, max: Option<u32>) -> ParentRule {
    ParentRule { type_name, max }
}

const fn leaf(
    name: &'static str,
    description: &'static str,
    parent_type: &'static str,
    handler: &'static str,
    capabilities: Capabilities,
) -> ResourceType {
    ResourceType {
        name,
        description,
        physical: true,
        user_addable: false,
        sandbox_strategy: if capabilities.writable {
            "inherit"
        } else {
            "none"
        },
        handler,
        top_level: false,
        parents: match parent_type.as_bytes()[0] {
            b'g' => &[ParentRule {
                type_name: "git",
                max: Some(1),
            }],
            _ => &[ParentRule {
                type_name: "fs-directory",
                max: Some(1),
            }],
        },
        children: &[],
        cli_args: &[],
        capabilities,
    }
}

const fn virt(
    name: &'static str,
    description: &'static str,
    children: &'static [ChildRule],
) -> ResourceType {
    ResourceType {
        name,
        description,
        physical: false,
        user_addable: false,
        sandbox_strategy: "none",
        handler: "VirtualHandler",
        top_level: true,
        parents: &[],
        children,
        cli_args: &[],
        capabilities: VIRTUAL,
    }
}

/// Every built-in type, in the order of `resource type list` (spec 06).
pub const BUILTIN_TYPES: [ResourceType; 24] = [
    ResourceType {
        name: "git-checkout",
        description: "A locally checked-out git repository with its work tree",
        physical: true,
        user_addable: true,
        sandbox_strategy: "git_worktree",
        handler: "GitCheckoutHandler",
        top_level: true,
        parents: &[],
        children: &[
            child(
                "git",
                1,
                Some(1),
                true,
                false,
                "Repository object database and history",
            ),
            child(
                "fs-directory",
                1,
                Some(1),
                true,
                false,
                "Work tree root directory",
            ),
        ],
        cli_args: &[
            CliArg {
                flag: "--path",
                required: true,
                value_type: "path",
                description: "Top directory of the work tree",
            },
            CliArg {
                flag: "--branch",
                required: false,
                value_type: "string",
                description: "Branch (default: the checked-out branch; must match it)",
            },
        ],
        capabilities: RWSC,
    },
    ResourceType {
        name: "git",
        description: "A git repository (object database, refs, history); local path or file:// URL",
        physical: true,
        user_addable: true,
        sandbox_strategy: "none",
        handler: "GitHandler",
        top_level: true,
        parents: &[parent("git-checkout", Some(1))],
        children: &[
            child("git-remote", 0, None, true, false, "Configured remotes"),
            child("git-branch", 0, None, true, false, "Local branches"),
            child("git-tag", 0, None, true, false, "Tags (counted)"),
            child("git-commit", 0, None, true, false, "Commits (counted)"),
            child("git-stash", 0, None, true, false, "Stash entries (counted)"),
            child(
                "git-submodule",
                0,
                None,
                true,
                false,
                "Submodules (counted)",
            ),
        ],
        cli_args: &[CliArg {
            flag: "--url",
            required: true,
            value_type: "url",
            description: "Repository path or file:// URL (network URLs are not supported)",
        }],
        capabilities: RO,
    },
    leaf(
        "git-remote",
        "A configured remote of a repository",
        "git",
        "GitConfigHandler",
        RO,
    ),
    ResourceType {
        name: "git-branch",
        description: "A local branch",
        physical: true,
        user_addable: false,
        sandbox_strategy: "inherit",
        handler: "GitRefHandler",
        top_level: false,
        parents: &[parent("git", Some(1))],
        children: &[child(
            "git-commit",
            0,
            None,
            true,
            false,
            "Commits reachable from the branch (counted)",
        )],
        cli_args: &[],
        capabilities: RWSC,
    },
    leaf("git-tag", "A tag", "git", "GitRefHandler", RWSC),
    ResourceType {
        name: "git-commit",
        description: "A commit",
        physical: true,
        user_addable: false,
        sandbox_strategy: "inherit",
        handler: "GitObjectHandler",
        top_level: false,
        parents: &[parent("git-branch", None), parent("git", Some(1))],
        children: &[child(
            "git-tree",
            1,
            Some(1),
            true,
            false,
            "Root tree of the commit",
        )],
        cli_args: &[],
        capabilities: RO,
    },
    ResourceType {
        name: "git-tree",
        description: "A tree object (a directory in a commit)",
        physical: true,
        user_addable: false,
        sandbox_strategy: "inherit",
        handler: "GitObjectHandler",
        top_level: false,
        parents: &[parent("git-commit", None), parent("git-tree", None)],
        children: &[
            child("git-tree-entry", 0, None, true, false, "Files in the tree"),
            child("git-tree", 0, None, true, false, "Subtrees"),
        ],
        cli_args: &[],
        capabilities: RO,
    },
    ResourceType {
        name: "git-tree-entry",
        description: "A file in a tree object",
        physical: true,
        user_addable: false,
        sandbox_strategy: "inherit",
        handler: "GitObjectHandler",
        top_level: false,
        parents: &[parent("git-tree", Some(1))],
        children: &[],
        cli_args: &[],
        capabilities: RO,
    },
    leaf("git-stash", "A stash entry", "git", "GitRefHandler", RWSC),
    leaf(
        "git-submodule",
        "A submodule",
        "git",
        "GitConfigHandler",
        RO,
    ),
    ResourceType {
        name: "fs-mount",
        description: "A mounted filesystem (its root directory is discovered)",
        physical: true,
        user_addable: true,
        sandbox_strategy: "copy_on_write",
        handler: "FilesystemHandler",
        top_level: true,
        parents: &[],
        children: &[child(
            "fs-directory",
            1,
            Some(1),
            true,
            false,
            "Root directory of the mount",
        )],
        cli_args: &[CliArg {
            flag: "--mount-path",
            required: true,
            value_type: "path",
            description: "Mount point",
        }],
        capabilities: RWSC,
    },
    ResourceType {
        name: "fs-directory",
        description: "A directory (files and subdirectories are counted)",
        physical: true,
        user_addable: true,
        sandbox_strategy: "copy_on_write",
        handler: "FilesystemHandler",
        top_level: true,
        parents: &[
            parent("git-checkout", Some(1)),
            parent("fs-mount", Some(1)),
            parent("fs-directory", Some(1)),
        ],
        children: &[
            child(
                "fs-directory",
                0,
                None,
                true,
                true,
                "Subdirectories (counted; link registered ones by hand)",
            ),
            child("fs-file", 0, None, true, true, "Files (counted)"),
            child(
                "fs-symlink",
                0,
                None,
                true,
                true,
                "Symbolic links (counted)",
            ),
            child(
                "fs-hardlink",
                0,
                None,
                true,
                true,
                "Files with more than one link (counted)",
            ),
        ],
        cli_args: &[CliArg {
            flag: "--path",
            required: true,
            value_type: "path",
            description: "The directory",
        }],
        capabilities: RWSC,
    },
    leaf(
        "fs-file",
        "A file",
        "fs-directory",
        "FilesystemHandler",
        RWSC,
    ),
    leaf(
        "fs-symlink",
        "A symbolic link",
        "fs-directory",
        "FilesystemHandler",
        RWSC,
    ),
    leaf(
        "fs-hardlink",
        "A file with more than one hard link",
        "fs-directory",
        "FilesystemHandler",
        RWSC,
    ),
    virt(
        "file",
        "Files with equal content, name and mode",
        &[
            child("fs-file", 0, None, true, false, "Physical copies"),
            child("git-tree-entry", 0, None, true, false, "Copies in commits"),
        ],
    ),
    virt(
        "directory",
        "Directories with equal recursive content",
        &[
            child("fs-directory", 0, None, true, false, "Physical copies"),
            child("git-tree", 0, None, true, false, "Copies in commits"),
        ],
    ),
    virt(
        "symlink",
        "Symbolic links with equal name and target",
        &[
            child("fs-symlink", 0, None, true, false, "Physical links"),
            child("git-tree-entry", 0, None, true, false, "Links in commits"),
        ],
    ),
    virt(
        "commit",
        "The same commit in several repositories",
        &[child("git-commit", 0, None, true, false, "Copies")],
    ),
    virt(
        "branch",
        "Branches with equal name and head",
        &[child("git-branch", 0, None, true, false, "Copies")],
    ),
    virt(
        "tag",
        "Tags with equal name and target",
        &[child("git-tag", 0, None, true, false, "Copies")],
    ),
    virt(
        "remote",
        "Remotes with equal URL",
        &[child("git-remote", 0, None, true, false, "Copies")],
    ),
    virt(
        "submodule",
        "Submodules with equal URL and path",
        &[child("git-submodule", 0, None, true, false, "Copies")],
    ),
    virt(
        "tree",
        "Trees with equal hash",
        &[child("git-tree", 0, None, true, false, "Copies")],
    ),
];

/// The built-in type of this name.
pub fn builtin(name: &str) -> Option<&'static ResourceType> {
    BUILTIN_TYPES.iter().find(|t| t.name == name)
}

/// Names of the user-addable types.
pub fn user_addable() -> Vec<&'static str> {
    BUILTIN_TYPES
        .iter()
        .filter(|t| t.user_addable)
        .map(|t| t.name)
        .collect()
}

/// The sandbox strategy a resource of type `name` gets, following `inherit` up `ancestors`
/// (nearest first).
pub fn effective_strategy(name: &str, ancestors: &[&str]) -> &'static str {
    let own = builtin(name).map(|t| t.sandbox_strategy).unwrap_or("none");
    if own != "inherit" {
        return own;
    }
    ancestors
        .iter()
        .filter_map(|a| builtin(a))
        .map(|t| t.sandbox_strategy)
        .find(|s| *s != "inherit")
        .unwrap_or("none")
}

/// Checks a manual link `parent -> child` against the type rules, given how many children of
/// the child's type the parent already has and how many parents of the parent's type the
/// child already has.
///
/// # Errors
/// What rule is broken, naming the allowed alternatives.
pub fn check_manual_link(
    parent_type: &str,
    child_type: &str,
    parent_children_of_type: u32,
    child_parents_of_type: u32,
) -> Result<(), String> {
    let p = builtin(parent_type).ok_or_else(|| format!("unknown resource type `{parent_type}`"))?;
    let c = builtin(child_type).ok_or_else(|| format!("unknown resource type `{child_type}`"))?;
    let Some(rule) = p.children.iter().find(|r| r.type_name == child_type) else {
        let manual: Vec<&str> = p
            .children
            .iter()
            .filter(|r| r.manual)
            .map(|r| r.type_name)
            .collect();
        return Err(format!(
            "a {parent_type} cannot have a {child_type} child (it may have: {})",
            if manual.is_empty() {
                "no manually linked children".to_string()
            } else {
                manual.join(", ")
            }
        ));
    };
    if !rule.manual {
        return Err(format!(
            "{child_type} children of a {parent_type} are created by discovery and cannot be linked by hand"
        ));
    }
    if rule.max.is_some_and(|m| parent_children_of_type >= m) {
        return Err(format!(
            "a {parent_type} can have at most {} {child_type} child(ren)",
            rule.max.unwrap_or(0)
        ));
    }
    match c.parents.iter().find(|r| r.type_name == parent_type) {
        None => Err(format!("a {child_type} cannot have a {parent_type} parent")),
        Some(r) if r.max.is_some_and(|m| child_parents_of_type >= m) => Err(format!(
            "a {child_type} can have at most {} {parent_type} parent(s), and this one already has one",
            r.max.unwrap_or(0)
        )),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_four_builtins_fifteen_physical_four_addable() {
        assert_eq!(BUILTIN_TYPES.len(), 24);
        assert_eq!(BUILTIN_TYPES.iter().filter(|t| t.physical).count(), 15);
        assert_eq!(
            user_addable(),
            ["git-checkout", "git", "fs-mount", "fs-directory"]
        );
        let mut names: Vec<_> = BUILTIN_TYPES.iter().map(|t| t.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 24, "names are unique");
        for t in &BUILTIN_TYPES {
            for c in t.children {
                assert!(
                    builtin(c.type_name).is_some(),
                    "{} -> {}",
                    t.name,
                    c.type_name
                );
            }
        }
    }

    #[test]
    fn children_inherit_the_strategy_of_their_ancestors() {
        assert_eq!(
            effective_strategy("fs-file", &["fs-directory"]),
            "copy_on_write"
        );
        assert_eq!(
            effective_strategy("git-branch", &["git", "git-checkout"]),
            "none"
        );
        assert_eq!(effective_strategy("git-checkout", &[]), "git_worktree");
    }

    #[test]
    fn manual_links_follow_the_type_rules() {
        check_manual_link("fs-directory", "fs-directory", 3, 0).unwrap();
        assert!(
            check_manual_link("fs-directory", "fs-directory", 0, 1)
                .unwrap_err()
                .contains("at most 1")
        );
        assert!(
            check_manual_link("git-checkout", "fs-mount", 0, 0)
                .unwrap_err()
                .contains("cannot have")
        );
        assert!(
            check_manual_link("git-checkout", "fs-directory", 0, 0)
                .unwrap_err()
                .contains("discovery")
        );
    }
}
