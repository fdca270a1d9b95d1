//! The plan record (spec sections 08 and 27).

use std::collections::HashSet;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::id::Id;
use super::lifecycle::{Phase, PlanStatus, ProcessingState, str_enum};
use std::fmt;
use std::str::FromStr;

/// How much of the lifecycle runs without a human (derived from the automation profile).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum AutomationLevel {
    /// A user triggers each phase transition.
    Manual,
    /// Strategize and execute run automatically; the plan pauses before apply.
    ReviewBeforeApply,
    /// Every phase runs automatically.
    FullAutomation,
}

str_enum!(AutomationLevel {
    Manual => "manual",
    ReviewBeforeApply => "review_before_apply",
    FullAutomation => "full_automation",
});

/// Where an invariant came from, highest precedence first.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum InvariantScope {
    /// Given for this plan.
    Plan,
    /// Carried from the action.
    Action,
    /// From a target project.
    Project,
    /// System-wide.
    Global,
}

str_enum!(InvariantScope { Plan => "plan", Action => "action", Project => "project", Global => "global" });

/// One constraint a plan must respect. Insertion order is kept for stable rendering.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanInvariant {
    /// The constraint text; never empty.
    pub text: String,
    /// Where it came from.
    pub scope: InvariantScope,
    /// The entity it came from (project or action name), if any.
    pub source_name: Option<String>,
    /// The invariant's id (`inv_...`) in the invariant registry, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invariant_id: Option<String>,
    /// Explicit conflict key (`invariant add --key`): invariants sharing a key conflict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// A plan's link to one target project.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProjectLink {
    /// Namespaced project name.
    pub project_name: String,
    /// Short alias used in the plan's context, lowercased.
    pub alias: Option<String>,
    /// Whether the plan may only read this project.
    pub read_only: bool,
}

/// Why a project link was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProjectLinkError {
    /// The alias breaks the character rules.
    #[error(
        "alias `{0}` is invalid: use lowercase letters, digits, `-` and `_`, starting with a letter or digit"
    )]
    InvalidAlias(String),
    /// Two links in one plan share an alias.
    #[error("alias `{0}` is used by two projects in this plan; give each project its own alias")]
    DuplicateAlias(String),
}

impl ProjectLink {
    /// A link with an optional alias, which is lowercased and checked.
    ///
    /// # Errors
    /// [`ProjectLinkError::InvalidAlias`].
    pub fn new(
        project_name: impl Into<String>,
        alias: Option<&str>,
        read_only: bool,
    ) -> Result<Self, ProjectLinkError> {
        let alias = alias.map(str::to_lowercase);
        if let Some(a) = &alias {
            let valid = a.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
                && a.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
            if !valid {
                return Err(ProjectLinkError::InvalidAlias(a.clone()));
            }
        }
        Ok(Self {
            project_name: project_name.into(),
            alias,
            read_only,
        })
    }

    /// Checks that no two links share an alias.
    ///
    /// # Errors
    /// [`ProjectLinkError::DuplicateAlias`].
    pub fn check_unique(links: &[ProjectLink]) -> Result<(), ProjectLinkError> {
        let mut seen = HashSet::new();
        for alias in links.iter().filter_map(|l| l.alias.as_deref()) {
            if !seen.insert(alias) {
                return Err(ProjectLinkError::DuplicateAlias(alias.to_string()));
            }
        }
        Ok(())
    }
}

/// A plan: one application of an action to projects (spec section 08).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Plan {
    /// Plan id.
    pub plan_id: Id,
    /// Display name.
    pub name: String,
    /// Namespaced name of the originating action.
    pub action_name: String,
    /// Phase, state and attempt.
    pub status: PlanStatus,
    /// What the plan is for.
    pub description: Option<String>,
    /// When the work counts as done.
    pub definition_of_done: Option<String>,
    /// Target projects.
    pub project_links: Vec<ProjectLink>,
    /// Resolved automation profile name.
    pub automation_profile: Option<String>,
    /// Automation level derived from the profile.
    pub automation_level: AutomationLevel,
    /// The profile's flags frozen at creation.
    pub effective_profile_snapshot: Option<Value>,
    /// Strategize actor.
    pub strategy_actor: Option<String>,
    /// Execute actor.
    pub execution_actor: Option<String>,
    /// Estimation actor.
    pub estimation_actor: Option<String>,
    /// Invariant reconciliation actor.
    pub invariant_actor: Option<String>,
    /// Resolved arguments, in the action's argument order.
    pub arguments: Map<String, Value>,
    /// Constraints, in insertion order.
    pub invariants: Vec<PlanInvariant>,
    /// Changeset produced by execute.
    pub changeset_id: Option<String>,
    /// Sandboxes in use.
    pub sandbox_refs: Vec<String>,
    /// Validation results at apply time.
    pub validation_summary: Option<Value>,
    /// Root of the decision tree.
    pub decision_root_id: Option<Id>,
    /// Machine-readable error code when errored.
    pub error_code: Option<String>,
    /// Human error message when errored.
    pub error_message: Option<String>,
    /// Free-form tags.
    pub tags: Vec<String>,
    /// Creation time.
    pub created_at: Timestamp,
    /// Last change.
    pub updated_at: Timestamp,
    /// When processing first started.
    pub started_at: Option<Timestamp>,
    /// When the plan reached a terminal state.
    pub completed_at: Option<Timestamp>,
    /// Parent plan, for child plans.
    pub parent_plan_id: Option<Id>,
    /// Root of the plan hierarchy, for child plans.
    pub root_plan_id: Option<Id>,
}

impl Plan {
    /// A new plan for `action_name` in strategize/queued, attempt 1.
    pub fn new(action_name: impl Into<String>, name: impl Into<String>, now: Timestamp) -> Self {
        Self {
            plan_id: Id::generate(),
            name: name.into(),
            action_name: action_name.into(),
            status: PlanStatus::new(),
            description: None,
            definition_of_done: None,
            project_links: Vec::new(),
            automation_profile: None,
            automation_level: AutomationLevel::Manual,
            effective_profile_snapshot: None,
            strategy_actor: None,
            execution_actor: None,
            estimation_actor: None,
            invariant_actor: None,
            arguments: Map::new(),
            invariants: Vec::new(),
            changeset_id: None,
            sandbox_refs: Vec::new(),
            validation_summary: None,
            decision_root_id: None,
            error_code: None,
            error_message: None,
            tags: Vec::new(),
            created_at: now,
            updated_at: now,
            started_at: None,
            completed_at: None,
            parent_plan_id: None,
            root_plan_id: None,
        }
    }

    /// Current phase.
    pub fn phase(&self) -> Phase {
        self.status.phase
    }

    /// Current state.
    pub fn state(&self) -> ProcessingState {
        self.status.state
    }

    /// Names of the target projects, in link order.
    pub fn project_names(&self) -> Vec<&str> {
        self.project_links
            .iter()
            .map(|l| l.project_name.as_str())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_are_lowercased_and_checked() {
        assert_eq!(
            ProjectLink::new("local/api", Some("Repo"), false)
                .unwrap()
                .alias
                .as_deref(),
            Some("repo")
        );
        assert_eq!(
            ProjectLink::new("local/api", Some("-x"), false),
            Err(ProjectLinkError::InvalidAlias("-x".into()))
        );
        assert!(ProjectLink::new("local/api", Some("a b"), false).is_err());
    }

    #[test]
    fn duplicate_aliases_in_one_plan_are_refused() {
        let links = vec![
            ProjectLink::new("local/a", Some("x"), false).unwrap(),
            ProjectLink::new("local/b", Some("X"), true).unwrap(),
        ];
        assert_eq!(
            ProjectLink::check_unique(&links),
            Err(ProjectLinkError::DuplicateAlias("x".into()))
        );
    }
}
