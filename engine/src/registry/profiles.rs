//! Automation profiles (spec section 27): named sets of 13 boolean flags deciding which
//! transitions, decisions, retries and child spawns proceed without a human.
//!
//! Six built-ins (bare names, not removable) and custom profiles registered from YAML
//! (`ns/name`). A plan's profile is resolved at `plan use` with the precedence plan, then
//! action, then project, then global (config key `automation-profile` or
//! `AGENTS_AUTOMATION_PROFILE`), then the default `manual`, and frozen on the plan.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::domain::name::{BUILTIN_PROFILES, NameError, QualifiedName, is_builtin_profile};
pub use crate::domain::profile::{Flags, Profile, ProfileSource, ResolvedFrom};
use crate::registry::yaml::{self, YamlError};
use crate::store::{Store, StoreError};

/// The display groups of `automation-profile show` and the flags in each, in order.
pub const FLAG_GROUPS: [(&str, &[&str]); 4] = [
    (
        "Phase Transitions",
        &["auto_strategize", "auto_execute", "auto_apply"],
    ),
    (
        "Decision Automation",
        &["auto_decisions_strategize", "auto_decisions_execute"],
    ),
    (
        "Self-Repair",
        &[
            "auto_validation_fix",
            "auto_strategy_revision",
            "auto_retry_transient",
            "auto_checkpoint_restore",
        ],
    ),
    (
        "Execution Controls",
        &[
            "auto_child_plans",
            "require_sandbox",
            "require_checkpoints",
            "allow_unsafe_tools",
        ],
    ),
];

impl Flags {
    /// The flags as `(name, value)` pairs in the spec's table order.
    pub fn pairs(&self) -> [(&'static str, bool); 13] {
        [
            ("auto_strategize", self.auto_strategize),
            ("auto_execute", self.auto_execute),
            ("auto_apply", self.auto_apply),
            ("auto_decisions_strategize", self.auto_decisions_strategize),
            ("auto_decisions_execute", self.auto_decisions_execute),
            ("auto_validation_fix", self.auto_validation_fix),
            ("auto_strategy_revision", self.auto_strategy_revision),
            ("auto_child_plans", self.auto_child_plans),
            ("auto_retry_transient", self.auto_retry_transient),
            ("auto_checkpoint_restore", self.auto_checkpoint_restore),
            ("require_sandbox", self.require_sandbox),
            ("require_checkpoints", self.require_checkpoints),
            ("allow_unsafe_tools", self.allow_unsafe_tools),
        ]
    }

    /// The value of a flag by name.
    pub fn get(&self, name: &str) -> Option<bool> {
        self.pairs()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// The coarse automation level stored on plans: `full_automation` when apply is automatic,
    /// `review_before_apply` when strategize and execute are, else `manual`.
    pub fn level(&self) -> crate::domain::AutomationLevel {
        use crate::domain::AutomationLevel;
        if self.auto_apply {
            AutomationLevel::FullAutomation
        } else if self.auto_strategize && self.auto_execute {
            AutomationLevel::ReviewBeforeApply
        } else {
            AutomationLevel::Manual
        }
    }

    const fn from_row(v: [bool; 13]) -> Self {
        Flags {
            auto_strategize: v[0],
            auto_execute: v[1],
            auto_apply: v[2],
            auto_decisions_strategize: v[3],
            auto_decisions_execute: v[4],
            auto_validation_fix: v[5],
            auto_strategy_revision: v[6],
            auto_child_plans: v[7],
            auto_retry_transient: v[8],
            auto_checkpoint_restore: v[9],
            require_sandbox: v[10],
            require_checkpoints: v[11],
            allow_unsafe_tools: v[12],
        }
    }
}

const T: bool = true;
const F: bool = false;

/// The built-in profiles: (name, description, flags), exactly as the table in spec section 27.
pub const BUILTINS: [(&str, &str, Flags); 6] = [
    (
        "locked-down",
        "Maximum human control",
        Flags::from_row([F, F, F, F, F, F, F, F, F, F, T, T, F]),
    ),
    (
        "manual",
        "Human-driven (default)",
        Flags::from_row([F, F, F, F, F, F, F, F, F, F, T, T, F]),
    ),
    (
        "supervised",
        "Auto-plan, manual exec",
        Flags::from_row([T, F, F, T, F, F, F, F, T, F, T, T, F]),
    ),
    (
        "trusted",
        "Auto-exec, manual apply",
        Flags::from_row([T, T, F, T, T, T, F, T, T, F, T, T, F]),
    ),
    (
        "autonomous",
        "Full auto except apply",
        Flags::from_row([T, T, F, T, T, T, T, T, T, T, T, T, F]),
    ),
    (
        "full-auto",
        "Complete automation",
        Flags::from_row([T, T, T, T, T, T, T, T, T, T, F, F, T]),
    ),
];

impl ProfileSource {
    /// `built-in` or `custom`.
    pub fn label(self) -> &'static str {
        match self {
            ProfileSource::BuiltIn => "built-in",
            ProfileSource::Custom => "custom",
        }
    }
}

/// The built-in profile of this name, if any.
pub fn builtin(name: &str) -> Option<Profile> {
    BUILTINS
        .iter()
        .find(|(n, ..)| *n == name)
        .map(|(n, d, f)| Profile {
            name: (*n).to_string(),
            description: Some((*d).to_string()),
            source: ProfileSource::BuiltIn,
            flags: *f,
            config_path: None,
            created_at: None,
            updated_at: None,
        })
}

/// A custom profile file: `{name, description, flags: {13 flags}}`.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Namespaced name (optional when given on the command line).
    pub name: Option<String>,
    /// One line saying what it is for.
    pub description: Option<String>,
    /// All 13 flags (none may be omitted).
    pub flags: Flags,
}

/// Errors from the profile registry.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    /// The YAML file is unreadable or invalid.
    #[error(transparent)]
    Yaml(#[from] YamlError),
    /// Neither the file nor the command line names the profile.
    #[error("{0}: the profile has no name; add `name: local/NAME` to the file or pass NAME")]
    NoName(String),
    /// The name is invalid or in a reserved namespace.
    #[error("profile name `{name}`: {source}")]
    Name {
        /// The name as given.
        name: String,
        /// Why.
        source: NameError,
    },
    /// A custom profile would shadow a built-in.
    #[error("`{0}` is a built-in profile and cannot be added, replaced or removed")]
    BuiltIn(String),
    /// A profile of that name exists and `--update` was not given.
    #[error("automation profile {0} already exists")]
    Exists(String),
    /// No profile of that name.
    #[error("automation profile `{0}` not found")]
    NotFound(crate::registry::lookup::Missing),
    /// The profile is still the default of the global config, a project or an action.
    #[error("automation profile {name} is still used by {}", usage.describe())]
    InUse {
        /// The canonical name.
        name: String,
        /// Who uses it.
        usage: Usage,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses a profile name a user typed: a built-in name stays bare, others get `local/`.
///
/// # Errors
/// [`ProfileError::Name`].
pub fn parse_name(input: &str) -> Result<String, ProfileError> {
    QualifiedName::resolve_user_input(input, &BUILTIN_PROFILES)
        .map(|n| n.to_string())
        .map_err(|source| ProfileError::Name {
            name: input.to_string(),
            source,
        })
}

/// Finds a built-in or custom profile by the name a user typed.
///
/// # Errors
/// [`ProfileError::NotFound`], [`ProfileError::Name`] or a store error.
pub fn find(store: &Store, input: &str) -> Result<Profile, ProfileError> {
    let name = parse_name(input)?;
    if let Some(p) = builtin(&name) {
        return Ok(p);
    }
    match store.custom_profile(&name)? {
        Some(p) => Ok(p),
        None => {
            let names: Vec<String> = list(store)?.into_iter().map(|p| p.name).collect();
            let mut missing =
                crate::registry::lookup::Missing::near(input, names.iter().map(String::as_str));
            missing.input = name;
            Err(ProfileError::NotFound(missing))
        }
    }
}

/// Every profile: the six built-ins in spec order, then custom profiles by name.
///
/// # Errors
/// Store errors.
pub fn list(store: &Store) -> Result<Vec<Profile>, ProfileError> {
    let mut out: Vec<Profile> = BUILTINS.iter().filter_map(|(n, ..)| builtin(n)).collect();
    out.extend(store.custom_profiles()?);
    Ok(out)
}

/// What `add` did.
#[derive(Debug, Clone, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Added {
    /// The registered profile.
    pub profile: Profile,
    /// Whether an existing profile was replaced (`--update`).
    pub replaced: bool,
}

/// Registers a custom profile from `path` (`name_arg` overrides the file's name). Nothing is
/// written when anything is wrong.
///
/// # Errors
/// YAML errors with line and column; a missing or reserved name; a built-in name;
/// [`ProfileError::Exists`] without `update`.
pub fn add(
    store: &mut Store,
    path: &Path,
    name_arg: Option<&str>,
    update: bool,
    providers: &[String],
) -> Result<Added, ProfileError> {
    add_given(store, (path, None), name_arg, update, providers)
}

/// [`add`] of the file `path` whose text was read elsewhere (`Some`: on a client, sent to a
/// server), or read here (`None`).
///
/// # Errors
/// As [`add`].
pub fn add_given(
    store: &mut Store,
    (path, given): (&Path, Option<&str>),
    name_arg: Option<&str>,
    update: bool,
    providers: &[String],
) -> Result<Added, ProfileError> {
    let (file, _text): (ProfileFile, String) = yaml::load_given(path, given)?;
    let raw = name_arg
        .map(str::to_string)
        .or(file.name.clone())
        .ok_or_else(|| ProfileError::NoName(path.display().to_string()))?;
    if is_builtin_profile(&raw) {
        return Err(ProfileError::BuiltIn(raw));
    }
    let qualified =
        QualifiedName::resolve_user_input(&raw, &[]).map_err(|source| ProfileError::Name {
            name: raw.clone(),
            source,
        })?;
    qualified
        .check_user_creatable(providers)
        .map_err(|source| ProfileError::Name {
            name: raw.clone(),
            source,
        })?;
    let name = qualified.to_string();
    let existing = store.custom_profile(&name)?;
    if existing.is_some() && !update {
        return Err(ProfileError::Exists(name));
    }
    let now = super::now();
    let profile = Profile {
        name,
        description: file.description,
        source: ProfileSource::Custom,
        flags: file.flags,
        config_path: Some(yaml::stored_path(path)),
        created_at: Some(existing.as_ref().and_then(|e| e.created_at).unwrap_or(now)),
        updated_at: Some(now),
    };
    store.upsert_custom_profile(&profile)?;
    Ok(Added {
        profile,
        replaced: existing.is_some(),
    })
}

/// Who still names a custom profile as their default (spec 27 resolution chain).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Usage {
    /// Where the global default names it (`config.toml automation-profile` or
    /// `AGENTS_AUTOMATION_PROFILE`), if it does.
    pub global: Option<String>,
    /// Projects whose profile it is.
    pub projects: Vec<String>,
    /// Draft or available actions whose `automation-profile` it is.
    pub actions: Vec<String>,
}

impl Usage {
    /// Whether nothing uses the profile.
    pub fn is_empty(&self) -> bool {
        self.global.is_none() && self.projects.is_empty() && self.actions.is_empty()
    }

    /// `the global default (config.toml), project local/p, action local/a`.
    pub fn describe(&self) -> String {
        let mut who: Vec<String> = self
            .global
            .iter()
            .map(|g| format!("the global default ({g})"))
            .collect();
        who.extend(self.projects.iter().map(|p| format!("project {p}")));
        who.extend(self.actions.iter().map(|a| format!("action {a}")));
        who.join(", ")
    }
}

/// The global default as the user set it, and where (`config.toml`, or the environment
/// variable's name).
#[derive(Debug, Clone, Copy)]
pub struct GlobalDefault<'a> {
    /// The profile name as written.
    pub value: &'a str,
    /// Where it was set, shown to the user.
    pub origin: &'a str,
}

/// Who uses the custom profile `name` (canonical) as a default.
///
/// # Errors
/// Store errors.
pub fn usage(
    store: &Store,
    name: &str,
    globals: &[GlobalDefault<'_>],
) -> Result<Usage, ProfileError> {
    Ok(Usage {
        global: globals
            .iter()
            .find(|g| parse_name(g.value).is_ok_and(|n| n == name))
            .map(|g| g.origin.to_string()),
        projects: store.projects_with_profile(name)?,
        actions: store.actions_with_profile(name)?,
    })
}

/// Removes a custom profile. Built-ins are refused, and so is a profile that the global
/// default (`globals`), a project or a draft or available action still names, since every
/// `plan use` relying on it would fail.
///
/// # Errors
/// [`ProfileError::BuiltIn`], [`ProfileError::NotFound`], [`ProfileError::InUse`], store
/// errors.
pub fn remove(
    store: &mut Store,
    input: &str,
    globals: &[GlobalDefault<'_>],
) -> Result<Profile, ProfileError> {
    let name = parse_name(input)?;
    if is_builtin_profile(&name) {
        return Err(ProfileError::BuiltIn(name));
    }
    let profile = store
        .custom_profile(&name)?
        .ok_or_else(|| ProfileError::NotFound(name.clone().into()))?;
    let usage = usage(store, &name, globals)?;
    if !usage.is_empty() {
        return Err(ProfileError::InUse { name, usage });
    }
    store.delete_custom_profile(&name)?;
    Ok(profile)
}

impl ResolvedFrom {
    /// `plan flag`, `action`, `project`, `global config`, `default`.
    pub fn label(self) -> &'static str {
        match self {
            ResolvedFrom::Plan => "plan (--automation-profile)",
            ResolvedFrom::Action => "action default",
            ResolvedFrom::Project => "project default",
            ResolvedFrom::Global => "global config",
            ResolvedFrom::Default => "default",
        }
    }
}

/// Resolves the profile for a new plan: the first of `plan`, `action`, `project`, `global`
/// that is set, else [`crate::config::DEFAULT_AUTOMATION_PROFILE`].
///
/// # Errors
/// [`ProfileError::NotFound`] when the chosen name is not a known profile.
pub fn resolve(
    store: &Store,
    plan: Option<&str>,
    action: Option<&str>,
    project: Option<&str>,
    global: Option<&str>,
) -> Result<(Profile, ResolvedFrom), ProfileError> {
    let (name, from) = match (plan, action, project, global) {
        (Some(p), ..) => (p, ResolvedFrom::Plan),
        (None, Some(a), ..) => (a, ResolvedFrom::Action),
        (None, None, Some(p), _) => (p, ResolvedFrom::Project),
        (None, None, None, Some(g)) => (g, ResolvedFrom::Global),
        (None, None, None, None) => (
            crate::config::DEFAULT_AUTOMATION_PROFILE,
            ResolvedFrom::Default,
        ),
    };
    Ok((find(store, name)?, from))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_match_the_spec_table_row_by_row() {
        // Columns: locked-down manual supervised trusted autonomous full-auto (spec 27).
        let table: [(&str, [bool; 6]); 13] = [
            ("auto_strategize", [F, F, T, T, T, T]),
            ("auto_execute", [F, F, F, T, T, T]),
            ("auto_apply", [F, F, F, F, F, T]),
            ("auto_decisions_strategize", [F, F, T, T, T, T]),
            ("auto_decisions_execute", [F, F, F, T, T, T]),
            ("auto_validation_fix", [F, F, F, T, T, T]),
            ("auto_strategy_revision", [F, F, F, F, T, T]),
            ("auto_child_plans", [F, F, F, T, T, T]),
            ("auto_retry_transient", [F, F, T, T, T, T]),
            ("auto_checkpoint_restore", [F, F, F, F, T, T]),
            ("require_sandbox", [T, T, T, T, T, F]),
            ("require_checkpoints", [T, T, T, T, T, F]),
            ("allow_unsafe_tools", [F, F, F, F, F, T]),
        ];
        for (flag, row) in table {
            for (i, (name, _, flags)) in BUILTINS.iter().enumerate() {
                assert_eq!(flags.get(flag), Some(row[i]), "{name}.{flag}");
            }
        }
    }

    #[test]
    fn levels_follow_the_phase_flags() {
        use crate::domain::AutomationLevel;
        assert_eq!(
            builtin("manual").unwrap().flags.level(),
            AutomationLevel::Manual
        );
        assert_eq!(
            builtin("trusted").unwrap().flags.level(),
            AutomationLevel::ReviewBeforeApply
        );
        assert_eq!(
            builtin("full-auto").unwrap().flags.level(),
            AutomationLevel::FullAutomation
        );
    }

    #[test]
    fn resolution_takes_the_narrowest_scope_that_is_set() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        let r = |p, a, pr, g| resolve(&store, p, a, pr, g).unwrap();
        assert_eq!(r(None, None, None, None).1, ResolvedFrom::Default);
        assert_eq!(r(None, None, None, None).0.name, "manual");
        assert_eq!(r(None, None, None, Some("trusted")).1, ResolvedFrom::Global);
        assert_eq!(
            r(None, None, Some("supervised"), Some("trusted")).0.name,
            "supervised"
        );
        assert_eq!(
            r(None, Some("autonomous"), Some("supervised"), None).1,
            ResolvedFrom::Action
        );
        assert_eq!(
            r(Some("full-auto"), Some("autonomous"), None, None).0.name,
            "full-auto"
        );
        assert!(matches!(
            resolve(&store, Some("local/nope"), None, None, None),
            Err(ProfileError::NotFound(_))
        ));
    }
}
