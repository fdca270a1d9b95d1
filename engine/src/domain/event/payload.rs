//! The payload of each kind of stored event: the `data` object of an `events` row.
//!
//! Field names and their order are those the event log has always stored (JSON objects keep
//! insertion order), so a typed payload serialises to the same bytes as the ad-hoc objects
//! written before. Conventions:
//! - a plain `Option<T>` is always written, as `null` when `None`;
//! - `#[serde(skip_serializing_if = "Option::is_none")]` marks a field only some emitters write;
//! - `Option<Option<T>>` (read with [`present`]) is a field some emitters write and others omit,
//!   which may be `null` where it is written;
//! - identifiers are strings as stored; nested documents whose shape belongs to another module
//!   (estimates, validation results, step output) stay JSON values.
//!
//! Strings, numbers and lists default when an older row lacks them; a row whose payload does
//! not fit at all is read as [`super::RawEvent`].

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::domain::approval::{ApprovalKind, ApprovalStatus};
use crate::domain::lifecycle::{Phase, ProcessingState};
use crate::domain::next::Next;

/// Reads a field that is present (even as `null`) as `Some`: with `#[serde(default)]`, an
/// absent field stays `None`, so "omitted" and "written as null" read back as they were.
///
/// # Errors
/// The inner type's deserialisation errors.
pub fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `plan_created`: a plan was created by `plan use` (or as a child plan).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PlanCreated {
    /// The action's name.
    pub action: String,
    /// The plan's project names.
    pub projects: Vec<String>,
    /// The automation profile frozen on the plan, if any.
    pub automation_profile: Option<String>,
    /// The frozen bases, one per resource (the `plan_bases` rows).
    pub bases: Value,
    /// The parent plan of a child plan.
    pub parent_plan_id: Option<String>,
}

/// `strategize_started`: Strategize began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StrategizeStarted {
    /// The plan's attempt.
    pub attempt: u32,
    /// The strategy actor.
    pub actor: String,
}

/// One decision as `strategize_decisions` lists it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DecisionSummary {
    /// The decision.
    pub decision_id: String,
    /// Its type (`action_selection`, ...).
    pub decision_type: String,
    /// What was chosen.
    pub chosen_option: String,
    /// Whether it has a step Execute runs.
    pub executable: bool,
}

/// `strategize_decisions`: Strategize recorded its decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StrategizeDecisions {
    /// Decisions recorded, the root included.
    pub count: u64,
    /// The root decision.
    pub decision_root_id: String,
    /// The decisions below the root.
    pub decisions: Vec<DecisionSummary>,
}

/// `strategize_complete`: Strategize finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct StrategizeComplete {
    /// Decisions recorded.
    pub decisions: u64,
    /// The root decision.
    pub decision_root_id: Option<String>,
}

/// `estimate_recorded`: the model estimation actor's estimate (or the built-in's).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct EstimateRecorded {
    /// The estimate, as `crate::actors::estimate::Estimate` serialises.
    pub estimate: Value,
}

/// `execute_started`: Execute began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ExecuteStarted {
    /// The plan's attempt.
    pub attempt: u32,
    /// The execution actor.
    pub actor: String,
    /// Steps to run.
    pub steps: u64,
    /// The step an interrupted run left running and what became of it, `null` when nothing
    /// was resumed.
    pub resumed: Value,
    /// Why Execute works in sandboxes.
    pub sandbox: String,
}

/// `execute_step`: one step (or the validations, or a validation fix) started, finished,
/// failed, was retried, replayed or waits. Which fields are written depends on `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ExecuteStep {
    /// The step's label (`validations`, `validation fix: CMD` for those).
    pub step: String,
    /// The step's position (absent for validations and validation fixes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u32>,
    /// The step's decision (absent for validations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_id: Option<String>,
    /// `started`, `done`, `replayed`, `failed`, `retrying`, `replay_conflict`,
    /// `awaiting_approval`, `stopped`, ...
    pub status: String,
    /// Which run of the step this is (`started`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
    /// The failure (`failed`, `retrying`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What a retry rolled back (`retrying`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolled_back: Option<Value>,
    /// The replay that conflicted (`replay_conflict`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replay: Option<Value>,
    /// The checkpoint taken, `null` when none was (start and end of a run).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub checkpoint: Option<Option<String>>,
    /// The approval whose answer resumed the step, `null` when none (`started`).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub resumed_after: Option<Option<String>>,
    /// What the step produced, long output cut to its tail (`done`, `failed`).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub output: Option<Value>,
    /// The validation results (the `validations` step).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validations: Option<Value>,
    /// The approvals the step waits for (`awaiting_approval`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approvals: Option<Vec<String>>,
    /// Why (`retrying`, `replay_conflict`, validation fixes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl ExecuteStep {
    /// An `execute_step` of `step` with `status` and nothing else set.
    pub fn new(step: &str, status: &str) -> Self {
        Self {
            step: step.to_owned(),
            status: status.to_owned(),
            ..Self::default()
        }
    }
}

/// `execute_complete`: Execute finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ExecuteComplete {
    /// Steps run.
    pub steps: u64,
    /// Tool calls kept (not discarded by a rollback).
    pub tool_calls: u64,
    /// The resources with an active sandbox.
    pub sandboxes: Vec<String>,
    /// The latest checkpoint.
    pub checkpoint: Option<String>,
}

/// `apply_started`: Apply began.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ApplyStarted {
    /// The plan's attempt.
    pub attempt: u32,
    /// Whether Apply writes without committing.
    pub no_commit: bool,
}

/// `apply_complete`: Apply finished; also the summary `plan apply` reports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ApplyComplete {
    /// What was written, per resource.
    pub resources: Value,
    /// Files changed.
    pub files: u64,
    /// Lines added.
    pub additions: u64,
    /// Lines deleted.
    pub deletions: u64,
    /// The validation results before writing.
    pub validations: Value,
    /// How long Apply took.
    pub duration_ms: u64,
    /// What the plan's model calls cost.
    pub cost_usd: Option<f64>,
    /// Input plus output tokens of the plan.
    pub tokens: u64,
    /// Whether the changes were committed.
    pub committed: bool,
    /// What happened to git hooks.
    pub git_hooks: String,
    /// The reviewed tree, per resource.
    pub trees: Map<String, Value>,
    /// What a partial Apply left out.
    pub left_out: Value,
    /// What became of what was left out (`discarded`, `kept in the sandbox`), `null` when
    /// nothing was.
    pub remainder: Option<String>,
}

/// `approval_requested`: a human must act.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalRequested {
    /// The approval.
    pub approval_id: String,
    /// Its kind.
    pub kind: ApprovalKind,
    /// One line for the human.
    #[serde(default)]
    pub summary: String,
    /// The options.
    #[serde(default)]
    pub options: Vec<String>,
    /// The step that answers it (the key keeps its stored name).
    pub answer_command: AnswerStep,
}

/// How an `approval_requested` event records its answer: the typed step (rows written since
/// steps became typed, D-commands-2) or the command text older rows hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
pub enum AnswerStep {
    /// The step, as the engine suggests it; a face renders it.
    Step(Next),
    /// The command text an older row stored, or a face's rendering of a step.
    Command(String),
}

/// `approval_resolved`: a human acted (or the approval was withdrawn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApprovalResolved {
    /// The approval.
    pub approval_id: String,
    /// How it was resolved.
    pub status: ApprovalStatus,
    /// The answer recorded.
    #[serde(default)]
    pub answer: Value,
}

/// `plan_errored`: the plan errored (also a budget stop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanErrored {
    /// The phase that errored.
    pub phase: Phase,
    /// The state (`errored`).
    pub state: ProcessingState,
    /// The error code.
    #[serde(default)]
    pub code: String,
    /// The message.
    #[serde(default)]
    pub message: String,
    /// Details.
    #[serde(default)]
    pub details: Value,
    /// The `errored` (or `budget`) approval raised.
    #[serde(default)]
    pub approval_id: String,
}

/// `plan_cancelled`: the plan was cancelled.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanCancelled {
    /// The phase it was in.
    pub phase: Phase,
    /// Why.
    #[serde(default)]
    pub reason: String,
    /// The project whose forced deletion cancelled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project_deleted: Option<String>,
}

/// The process that held a plan's lease.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct LeaseOwner {
    /// Its process id.
    pub pid: u32,
    /// Its host.
    pub host: String,
    /// What it was doing (`execute`, ...).
    pub kind: String,
}

/// `plan_interrupted`: the driving process stopped (Ctrl-C) or vanished; the plan is queued.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanInterrupted {
    /// The phase.
    pub phase: Phase,
    /// The state now (`queued`).
    pub state: ProcessingState,
    /// `interrupted`.
    #[serde(default)]
    pub reason: String,
    /// The stale lease's holder, `null` when there was none (written when a vanished
    /// process's lease is recovered).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub previous_owner: Option<Option<LeaseOwner>>,
    /// Who interrupted (written on Ctrl-C).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The server driving the plan stopped: another instance may resume it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub handover: bool,
}

/// `child_spawned`: a spawn step created (or reused) a child plan, on the parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ChildSpawned {
    /// The child plan.
    pub child_plan_id: String,
    /// Its action.
    pub action: String,
    /// The spawn decision.
    pub spawn_decision_id: String,
    /// The parallel group, if any.
    pub parallel_group: Option<String>,
    /// Whether a child of an earlier run was reused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// Why it was reused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Its position in the spawn order (a new child).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position: Option<u64>,
    /// The parent checkpoint it branched from, `null` when none (a new child).
    #[serde(skip_serializing_if = "Option::is_none", deserialize_with = "present")]
    pub branched_from: Option<Option<String>>,
}

/// `child_started`: a child plan started running, on the parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ChildStarted {
    /// The child plan.
    pub child_plan_id: String,
    /// Its action.
    pub action: String,
}

/// `child_finished`: a child plan's run ended, on the parent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ChildFinished {
    /// The child plan.
    pub child_plan_id: String,
    /// Its action.
    pub action: String,
    /// `succeeded`, `failed` or `cancelled` (a child status).
    pub status: String,
    /// The failure (`code`, `message`) or how it stopped (`stopped`).
    pub detail: Value,
}

/// `child_merged`: a child plan's results were merged into the parent's sandbox, or conflicted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ChildMerged {
    /// The child plan.
    pub child_plan_id: String,
    /// `merged` or `conflict`.
    pub outcome: String,
    /// The resource that conflicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// The conflicting paths.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
    /// What was merged, per resource.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Map<String, Value>>,
}

/// One invariant checked, in `invariant_checked`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct CheckedInvariant {
    /// The invariant.
    pub invariant_id: String,
    /// Its text.
    pub text: String,
    /// How it was checked (`paths`, `command`, `actor`).
    pub check: String,
    /// Whether it held.
    pub held: bool,
    /// What the check saw.
    pub evidence: Value,
}

/// One invariant not machine-checked, in `invariant_checked`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct UncheckedInvariant {
    /// The invariant.
    pub invariant_id: String,
    /// Its text.
    pub text: String,
    /// Why it was not checked.
    pub why: String,
}

/// `invariant_checked`: the effective invariants were checked after a step or before Apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct InvariantChecked {
    /// `step` or `apply`.
    pub at: String,
    /// The step's label, or `before apply`.
    pub step: String,
    /// The step's decision, `null` before Apply.
    pub decision_id: Option<String>,
    /// What was checked.
    pub checked: Vec<CheckedInvariant>,
    /// What was not.
    pub not_checked: Vec<UncheckedInvariant>,
}

/// One violation, in `invariant_violated` (fields as the approval's context holds them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct Violation {
    /// The `invariant_violation` approval.
    pub approval_id: String,
    /// The invariant.
    pub invariant_id: Value,
    /// Its text.
    pub invariant: Value,
    /// How it was checked.
    pub check: Value,
    /// What the check saw.
    pub evidence: Value,
}

/// `invariant_violated`: an invariant did not hold; approvals stop the plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct InvariantViolated {
    /// `step` or `apply`.
    pub at: String,
    /// The step's label, or `before apply`.
    pub step: String,
    /// The step's decision, `null` before Apply.
    pub decision_id: Option<String>,
    /// The violations.
    pub violations: Vec<Violation>,
}

/// `plan_exported`: a plan's sandbox was exported as a branch of the user's repository or as
/// a patch file (spec section 11, `plan export`); the project itself is unchanged.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PlanExported {
    /// The resource whose sandbox was exported.
    pub resource: String,
    /// The branch created (`--branch`), `null` for a patch.
    pub branch: Option<String>,
    /// The patch file written (`--patch`, absolute), `null` for a branch.
    pub patch: Option<String>,
    /// The sandbox's base commit.
    pub base_commit: String,
    /// Files changed in what was exported.
    pub files_changed: u64,
}

/// `review_marked`: items of a plan's review were marked (`plan review`, the TUI's hunk
/// review; `docs/review.md`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ReviewMarked {
    /// The mark set: `accepted`, `rejected` or `pending` (reset).
    pub mark: String,
    /// The ids of the items marked.
    pub items: Vec<String>,
    /// Why, when one was given.
    pub reason: Option<String>,
}

/// `sandbox_cleaned`: a plan's sandbox was released (work tree gone, repository kept) or
/// removed by `plan cleanup` or the retention sweep (spec section 11).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SandboxCleaned {
    /// The sandbox.
    pub sandbox_id: String,
    /// Its resource.
    pub resource: String,
    /// `released` or `removed`.
    pub action: String,
    /// Why (`plan cancelled`, `plan applied more than 7 days ago`, ...).
    pub reason: String,
}

/// `registry_changed`: an item of a registry was added, changed or removed (spec sections 09,
/// 14-19 and 23). Not about one plan: its row's `plan_id` is `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct RegistryChanged {
    /// The registry: `resource`, `resource_link`, `project`, `project_resource`,
    /// `validation`, `action`, `actor`, `invariant`, `profile`, `tool`, `skill` or
    /// `resource_type`.
    pub registry: String,
    /// The item, by its name (a link as `parent -> child`, a validation by its id).
    pub name: String,
    /// `added`, `updated` or `removed`.
    pub change: String,
}

/// The registries a [`RegistryChanged`] event names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Registry {
    /// A resource (with what it discovered).
    Resource,
    /// A manual link between two resources.
    ResourceLink,
    /// A project.
    Project,
    /// A resource linked to a project.
    ProjectResource,
    /// A project's validation.
    Validation,
    /// An action.
    Action,
    /// An actor.
    Actor,
    /// An invariant.
    Invariant,
    /// A custom automation profile.
    Profile,
    /// A custom tool.
    Tool,
    /// A custom skill.
    Skill,
    /// A custom resource type.
    ResourceType,
}

impl Registry {
    /// The name stored in `registry`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Resource => "resource",
            Self::ResourceLink => "resource_link",
            Self::Project => "project",
            Self::ProjectResource => "project_resource",
            Self::Validation => "validation",
            Self::Action => "action",
            Self::Actor => "actor",
            Self::Invariant => "invariant",
            Self::Profile => "profile",
            Self::Tool => "tool",
            Self::Skill => "skill",
            Self::ResourceType => "resource_type",
        }
    }
}

/// What a [`RegistryChanged`] event says happened to the item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// It was added.
    Added,
    /// It was changed in place.
    Updated,
    /// It was removed.
    Removed,
}

impl Change {
    /// The word stored in `change`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "added",
            Self::Updated => "updated",
            Self::Removed => "removed",
        }
    }
}

impl RegistryChanged {
    /// The event of `change` to the item `name` of `registry`.
    pub fn new(registry: Registry, name: impl Into<String>, change: Change) -> Self {
        Self {
            registry: registry.as_str().to_string(),
            name: name.into(),
            change: change.as_str().to_string(),
        }
    }
}
