//! Skills (spec section 19): named collections of tools that actors reference.
//!
//! Only the built-in skills exist so far; each names built-in tools (spec 18 "Built-in tool
//! groups"):
//!
//! | skill                  | tools                                                                 |
//! |------------------------|-----------------------------------------------------------------------|
//! | `file_operations`      | read_file, write_file, edit_file, delete_file, move_file, copy_file, get_file_info |
//! | `directory_operations` | create_directory, delete_directory, list_directory, list_files        |
//! | `search_operations`    | search_files, list_files                                              |
//! | `git_operations`       | git_status, git_diff, git_log                                         |
//! | `shell`                | shell_execute                                                         |
//! | `code_intelligence`    | search_code, find_definition, find_references, analyze_dependencies, suggest_refactoring_targets, repo_overview, search_code_semantically |
//!
//! Built-in skill names are bare (spec 15): a bare name resolves to a built-in first
//! ([`QualifiedName::resolve_user_input`]); any other bare name means `local/NAME`, a custom
//! skill, which cannot be registered yet (custom skill YAML and MCP servers are not yet
//! supported), so it is reported as unknown with the nearest built-in as a suggestion.
//!
//! An actor that names no skills gets [`default_tools`] for the phase it runs in; one that
//! names skills gets their union ([`resolve_skills`]), narrowed by [`offered_tools`] to the
//! read-only tools outside Execute (Strategize is read-only by construction).

use serde::Serialize;

use crate::config::nearest;
use crate::domain::Phase;
use crate::domain::name::{NameError, QualifiedName};
use crate::tools::{self, Capability};

/// A tool's name as actors call it (`read_file`). Built-in tools are bare.
pub type ToolName = String;

/// Where a skill or tool comes from (spec 19 "Tool sources"). Only `builtin` exists so far.
pub const SOURCES: [&str; 4] = ["builtin", "custom", "mcp", "agent_skill"];

/// A compiled-in skill definition.
#[derive(Debug, Clone, Copy)]
pub struct BuiltinSkill {
    /// Bare name (`file_operations`).
    pub name: &'static str,
    /// What the skill is for.
    pub description: &'static str,
    /// Built-in tool names, in the order shown.
    pub tools: &'static [&'static str],
}

/// The built-in skills, in the order `skill list` shows them.
pub const BUILTIN_SKILLS: [BuiltinSkill; 6] = [
    BuiltinSkill {
        name: "file_operations",
        description: "Read, write, edit, delete, move and copy files; file information",
        tools: &[
            "read_file",
            "write_file",
            "edit_file",
            "delete_file",
            "move_file",
            "copy_file",
            "get_file_info",
        ],
    },
    BuiltinSkill {
        name: "directory_operations",
        description: "Create, delete and list directories; list files by glob",
        tools: &[
            "create_directory",
            "delete_directory",
            "list_directory",
            "list_files",
        ],
    },
    BuiltinSkill {
        name: "search_operations",
        description: "Search file contents by regular expression; list files by glob",
        tools: &["search_files", "list_files"],
    },
    BuiltinSkill {
        name: "git_operations",
        description: "Inspect the plan's git changes: status, diff and log against the base commit",
        tools: &["git_status", "git_diff", "git_log"],
    },
    BuiltinSkill {
        name: "shell",
        description: "Run shell commands in the sandbox (kernel-confined where the system allows)",
        tools: &["shell_execute"],
    },
    BuiltinSkill {
        name: "code_intelligence",
        description: "Search and understand the project through its code index: ranked search, definitions, references, dependencies, refactoring targets, overview",
        tools: &crate::index::skill::TOOLS,
    },
];

/// One tool of a skill, with its capability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillTool {
    /// Tool name.
    pub name: ToolName,
    /// What it does.
    pub description: String,
    /// `builtin` (see [`SOURCES`]).
    pub source: &'static str,
    /// Capability metadata (spec 18). The shell's `unsafe` depends on whether this system's
    /// kernel can confine commands.
    pub capability: Capability,
}

/// A skill with its tools resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skill {
    /// Name as actors reference it (bare for built-ins).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// `builtin` (see [`SOURCES`]).
    pub source: &'static str,
    /// Included skills (none for built-ins).
    pub includes: Vec<String>,
    /// Its tools, direct and (once includes exist) inherited, in order.
    pub tools: Vec<SkillTool>,
}

impl Skill {
    /// The distinct sources of its tools, sorted (`["builtin"]`).
    pub fn sources(&self) -> Vec<&'static str> {
        let mut s: Vec<&'static str> = self.tools.iter().map(|t| t.source).collect();
        s.sort_unstable();
        s.dedup();
        s
    }
}

/// Why a skill reference does not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The name breaks the naming rules.
    #[error("skill `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// No skill of that name exists.
    #[error("unknown skill `{name}`{}; the built-in skills are {}{}",
        if name.contains('/') { " (no custom skill of that name is registered)" } else { "" },
        builtin_names().join(", "),
        suggestion.as_ref().map(|s| format!("; did you mean `{s}`?")).unwrap_or_default())]
    Unknown {
        /// The name as given.
        name: String,
        /// The nearest built-in skill, when one is close.
        suggestion: Option<String>,
    },
}

/// The built-in skill names, in order.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN_SKILLS.iter().map(|s| s.name).collect()
}

fn tool(name: &str) -> SkillTool {
    let t = tools::builtin(name)
        .unwrap_or_else(|| panic!("built-in skill names unknown built-in tool `{name}`"));
    SkillTool {
        name: t.name().to_string(),
        description: t.description().to_string(),
        source: "builtin",
        capability: t.capability(),
    }
}

fn expand(def: &BuiltinSkill) -> Skill {
    Skill {
        name: def.name.to_string(),
        description: def.description.to_string(),
        source: "builtin",
        includes: Vec::new(),
        tools: def.tools.iter().map(|t| tool(t)).collect(),
    }
}

/// Every skill, built-ins first, with their tools.
pub fn list() -> Vec<Skill> {
    BUILTIN_SKILLS.iter().map(expand).collect()
}

/// The skill a user-typed name refers to: a bare built-in name (`shell`), or a namespaced
/// name (`local/x`, which never resolves while custom skills are not supported).
///
/// # Errors
/// [`SkillError::Name`] for a malformed name, [`SkillError::Unknown`] with the nearest
/// built-in skill otherwise.
pub fn lookup(input: &str) -> Result<Skill, SkillError> {
    let qualified =
        QualifiedName::resolve_user_input(input, &builtin_names()).map_err(|source| {
            SkillError::Name {
                name: input.to_string(),
                source,
            }
        })?;
    if qualified.is_builtin()
        && let Some(def) = BUILTIN_SKILLS.iter().find(|s| s.name == qualified.name)
    {
        return Ok(expand(def));
    }
    let bare = input.rsplit('/').next().unwrap_or(input);
    let suggestion = nearest(bare, builtin_names())
        .or_else(|| nearest(&bare.replace('-', "_"), builtin_names()));
    Err(SkillError::Unknown {
        name: input.to_string(),
        suggestion,
    })
}

/// The tools of the named skills: their union in first-seen order, without duplicates
/// (`list_files` is in two built-in skills).
///
/// # Errors
/// The first name that does not resolve ([`lookup`]).
pub fn resolve_skills<S: AsRef<str>>(names: &[S]) -> Result<Vec<ToolName>, SkillError> {
    let mut out: Vec<ToolName> = Vec::new();
    for name in names {
        for t in lookup(name.as_ref())?.tools {
            if !out.contains(&t.name) {
                out.push(t.name);
            }
        }
    }
    Ok(out)
}

/// The tools offered to an actor that names no skills: in Execute every built-in tool; in
/// every other phase the read-only ones (Strategize is read-only; Apply runs no actor tools
/// that write).
pub fn default_tools(phase: Phase) -> Vec<ToolName> {
    tools::builtins()
        .iter()
        .filter(|t| phase == Phase::Execute || t.capability().read_only)
        .map(|t| t.name().to_string())
        .collect()
}

/// The tools offered to an actor with `skills` in `phase`: [`default_tools`] when it names
/// none, else the union of its skills' tools, keeping only read-only tools outside Execute.
///
/// # Errors
/// A skill that does not resolve.
pub fn offered_tools<S: AsRef<str>>(
    skills: &[S],
    phase: Phase,
) -> Result<Vec<ToolName>, SkillError> {
    if skills.is_empty() {
        return Ok(default_tools(phase));
    }
    let names = resolve_skills(skills)?;
    if phase == Phase::Execute {
        return Ok(names);
    }
    Ok(names
        .into_iter()
        .filter(|n| tools::builtin(n).is_some_and(|t| t.capability().read_only))
        .collect())
}

/// The skills that contain `tool`, by name.
pub fn skills_with_tool(tool: &str) -> Vec<&'static str> {
    BUILTIN_SKILLS
        .iter()
        .filter(|s| s.tools.contains(&tool))
        .map(|s| s.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_tool_belongs_to_a_builtin_skill() {
        for t in tools::builtins() {
            assert!(
                !skills_with_tool(t.name()).is_empty(),
                "{} is in no built-in skill",
                t.name()
            );
        }
    }

    #[test]
    fn every_tool_a_builtin_skill_names_exists() {
        for s in BUILTIN_SKILLS {
            for t in s.tools {
                assert!(tools::builtin(t).is_some(), "{}: unknown tool {t}", s.name);
            }
        }
        assert_eq!(list().len(), BUILTIN_SKILLS.len());
    }

    #[test]
    fn skills_resolve_to_the_union_of_their_tools_without_duplicates() {
        let tools = resolve_skills(&["directory_operations", "search_operations"]).unwrap();
        assert_eq!(
            tools,
            [
                "create_directory",
                "delete_directory",
                "list_directory",
                "list_files",
                "search_files"
            ]
        );
        assert_eq!(resolve_skills(&["shell"]).unwrap(), ["shell_execute"]);
        assert!(resolve_skills::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn an_unknown_skill_is_named_with_the_nearest_builtin() {
        let err = resolve_skills(&["git_operations", "file_operatons"]).unwrap_err();
        assert_eq!(
            err,
            SkillError::Unknown {
                name: "file_operatons".into(),
                suggestion: Some("file_operations".into())
            }
        );
        let text = err.to_string();
        assert!(text.contains("did you mean `file_operations`?"), "{text}");
        assert!(text.contains("shell"), "{text}");
    }

    #[test]
    fn a_namespaced_skill_that_is_not_registered_is_unknown() {
        let err = lookup("local/git-ops").unwrap_err();
        assert!(
            matches!(&err, SkillError::Unknown { suggestion: Some(s), .. } if s == "git_operations"),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .contains("no custom skill of that name is registered")
        );
        // A built-in's name in a namespace is not the built-in.
        assert!(lookup("local/shell").is_err());
        assert!(matches!(
            lookup("Bad Name").unwrap_err(),
            SkillError::Name { .. }
        ));
        assert!(matches!(
            lookup("nothing_like_it").unwrap_err(),
            SkillError::Unknown {
                suggestion: None,
                ..
            }
        ));
    }

    #[test]
    fn strategize_offers_only_read_only_tools_and_execute_offers_all() {
        let strategize = default_tools(Phase::Strategize);
        let execute = default_tools(Phase::Execute);
        assert_eq!(execute.len(), tools::builtins().len());
        assert!(strategize.contains(&"read_file".to_string()));
        assert!(strategize.contains(&"git_diff".to_string()));
        assert!(!strategize.contains(&"write_file".to_string()));
        assert!(!strategize.contains(&"shell_execute".to_string()));
        for name in &strategize {
            assert!(
                tools::builtin(name).unwrap().capability().read_only,
                "{name}"
            );
        }
        assert_eq!(
            offered_tools(&["file_operations"], Phase::Strategize).unwrap(),
            ["read_file", "get_file_info"]
        );
        assert_eq!(
            offered_tools(&["file_operations"], Phase::Execute)
                .unwrap()
                .len(),
            7
        );
        assert_eq!(
            offered_tools::<&str>(&[], Phase::Strategize).unwrap(),
            strategize
        );
    }
}
