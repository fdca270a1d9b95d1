//! Invariants (spec section 12): constraints at four scopes — global, project, action (carried
//! into plans at `plan use`), plan — with ids `inv_<ULID>`.
//!
//! Without an invariant reconciliation actor the effective view of a plan is computed
//! deterministically ([`reconcile`]): texts are normalised (case, whitespace, final
//! punctuation) and duplicates dropped keeping the narrowest scope; two invariants conflict
//! only when they share an explicit `--key`, and the narrowest scope wins
//! (plan > action > project > global; the newer one within a scope).

use serde::Serialize;

use crate::config::Provider;
pub use crate::domain::invariant::{Invariant, NewInvariant, normalize};
use crate::domain::{Id, InvariantScope, PlanInvariant};
use crate::registry::actions::{self, ActionError};
use crate::registry::actors;
use crate::registry::projects::{self, ProjectError};
use crate::store::{Store, StoreError};

/// Prefix of invariant ids.
pub const ID_PREFIX: &str = "inv_";

impl Invariant {
    /// The scope and its target, for display: `global`, `project local/api`,
    /// `action local/x`, `plan 01H...`, `plan 01H... (from action local/x)`.
    pub fn scope_label(&self) -> String {
        match (self.scope, &self.plan_id) {
            (InvariantScope::Global, _) => "global".into(),
            (InvariantScope::Project, _) => {
                format!("project {}", self.project.as_deref().unwrap_or("?"))
            }
            (InvariantScope::Action, Some(p)) => {
                format!(
                    "plan {p} (from action {})",
                    self.action.as_deref().unwrap_or("?")
                )
            }
            (InvariantScope::Action, None) => {
                format!("action {}", self.action.as_deref().unwrap_or("?"))
            }
            (InvariantScope::Plan, p) => {
                format!("plan {}", p.map(|p| p.to_string()).unwrap_or_default())
            }
        }
    }

    /// The plan-record form of a plan-scoped row.
    pub fn to_plan_invariant(&self) -> PlanInvariant {
        PlanInvariant {
            text: self.text.clone(),
            scope: self.scope,
            source_name: self.action.clone(),
            invariant_id: Some(self.invariant_id.clone()),
            key: self.key.clone(),
        }
    }
}

/// A new id `inv_<ULID>`.
pub fn new_id() -> String {
    format!("{ID_PREFIX}{}", Id::generate())
}

/// Errors from the invariant registry.
#[derive(Debug, thiserror::Error)]
pub enum InvariantError {
    /// No scope flag was given.
    #[error("give at least one scope: --global, --project P, --plan ID or --action A")]
    NoScope,
    /// The text is empty.
    #[error("the invariant text is empty")]
    Empty,
    /// The key breaks the character rules.
    #[error(
        "--key `{0}`: use lowercase letters, digits, `.`, `-` and `_`, starting with a letter or digit"
    )]
    InvalidKey(String),
    /// No invariant with that id.
    #[error("invariant `{0}` not found")]
    NotFound(crate::registry::lookup::Missing),
    /// An id prefix matches several items.
    #[error(transparent)]
    Ambiguous(crate::domain::IdPrefixError),
    /// `--effective` without `--plan`.
    #[error("--effective needs --plan ID (it shows one plan's reconciled view)")]
    EffectiveNeedsPlan,
    /// A plan id did not resolve.
    #[error("{0}")]
    Plan(String),
    /// A project did not resolve.
    #[error(transparent)]
    Project(#[from] ProjectError),
    /// An action did not resolve.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// A machine form (`paths-unchanged:`, `command:`) that does not parse.
    #[error("invariant `{text}`: {message}")]
    BadForm {
        /// The invariant as given.
        text: String,
        /// What is wrong and how to write it instead.
        message: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

pub use super::invariant_form::{COMMAND, MachineForm, PATHS_UNCHANGED, machine_form};

/// Resolves a plan id or unique prefix.
///
/// # Errors
/// [`InvariantError::Plan`] with the reason.
pub fn resolve_plan(store: &Store, input: &str) -> Result<Id, InvariantError> {
    store
        .resolve_plan_id(input)?
        .map_err(|e| InvariantError::Plan(e.to_string()))
}

/// Where `invariant add` attaches its text.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Targets {
    /// `--global`.
    pub global: bool,
    /// `--project`.
    pub project: Option<String>,
    /// `--plan`, repeatable.
    pub plans: Vec<String>,
    /// `--action`, repeatable.
    pub actions: Vec<String>,
}

fn check_key(key: Option<&str>) -> Result<Option<String>, InvariantError> {
    let Some(k) = key else { return Ok(None) };
    let ok = k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(Some(k.to_string()))
    } else {
        Err(InvariantError::InvalidKey(k.to_string()))
    }
}

impl NewInvariant {
    /// A row with a fresh id.
    pub fn new(text: &str, key: Option<String>, scope: InvariantScope) -> Self {
        Self {
            invariant_id: new_id(),
            text: text.trim().to_string(),
            key,
            scope,
            project_id: None,
            action_id: None,
            plan_id: None,
        }
    }
}

/// Adds `text` at every target (one row, one id per target) in one transaction.
///
/// # Errors
/// [`InvariantError::NoScope`], [`InvariantError::Empty`], an invalid key, unknown targets.
pub fn add(
    store: &mut Store,
    targets: &Targets,
    text: &str,
    key: Option<&str>,
) -> Result<Vec<Invariant>, InvariantError> {
    if text.trim().is_empty() {
        return Err(InvariantError::Empty);
    }
    machine_form(text).map_err(|message| InvariantError::BadForm {
        text: text.trim().to_string(),
        message,
    })?;
    if !targets.global
        && targets.project.is_none()
        && targets.plans.is_empty()
        && targets.actions.is_empty()
    {
        return Err(InvariantError::NoScope);
    }
    let key = check_key(key)?;
    let mut rows = Vec::new();
    if targets.global {
        rows.push(NewInvariant::new(text, key.clone(), InvariantScope::Global));
    }
    if let Some(p) = &targets.project {
        let project = projects::find(store, p)?;
        let mut r = NewInvariant::new(text, key.clone(), InvariantScope::Project);
        r.project_id = Some(project.project_id.to_string());
        rows.push(r);
    }
    for a in &targets.actions {
        let action = actions::find(store, a)?;
        let mut r = NewInvariant::new(text, key.clone(), InvariantScope::Action);
        r.action_id = Some(action.action_id.to_string());
        rows.push(r);
    }
    for p in &targets.plans {
        let id = resolve_plan(store, p)?;
        let mut r = NewInvariant::new(text, key.clone(), InvariantScope::Plan);
        r.plan_id = Some(id.to_string());
        rows.push(r);
    }
    store.insert_invariants(&rows)?;
    rows.iter()
        .map(|r| {
            store
                .invariant(&r.invariant_id)?
                .ok_or_else(|| InvariantError::NotFound(r.invariant_id.clone().into()))
        })
        .collect()
}

/// Removes an invariant by id (`inv_...`, or a unique prefix of the ULID part).
///
/// # Errors
/// [`InvariantError::NotFound`], store errors.
pub fn find(store: &Store, input: &str) -> Result<Invariant, InvariantError> {
    let bare = input.strip_prefix(ID_PREFIX).unwrap_or(input);
    let ids: Vec<String> = store
        .invariant_ids()?
        .into_iter()
        .map(|i| i.trim_start_matches(ID_PREFIX).to_string())
        .collect();
    let id = crate::domain::resolve_prefix("invariant", bare, ids).map_err(|e| match e {
        e @ crate::domain::IdPrefixError::Ambiguous { .. } => InvariantError::Ambiguous(e),
        _ => InvariantError::NotFound(input.into()),
    })?;
    store
        .invariant(&format!("{ID_PREFIX}{id}"))?
        .ok_or_else(|| InvariantError::NotFound(input.into()))
}

/// Removes an invariant (from whichever scope holds it).
///
/// # Errors
/// As [`find`].
pub fn remove(store: &mut Store, input: &str) -> Result<Invariant, InvariantError> {
    let inv = find(store, input)?;
    store.delete_invariant(&inv.invariant_id)?;
    Ok(inv)
}

/// Filters for `invariant list`; no filter lists every invariant.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Filter {
    /// `--global`.
    pub global: bool,
    /// `--project`.
    pub project: Option<String>,
    /// `--plan`.
    pub plan: Option<String>,
    /// `--action`.
    pub action: Option<String>,
}

/// Lists invariants matching any given filter (all when none is given), oldest first.
///
/// # Errors
/// Unknown targets; store errors.
pub fn list(store: &Store, filter: &Filter) -> Result<Vec<Invariant>, InvariantError> {
    let all = store.invariants()?;
    let none = !filter.global
        && filter.project.is_none()
        && filter.plan.is_none()
        && filter.action.is_none();
    if none {
        return Ok(all);
    }
    let project = filter
        .project
        .as_deref()
        .map(|p| projects::find(store, p))
        .transpose()?;
    let plan = filter
        .plan
        .as_deref()
        .map(|p| resolve_plan(store, p))
        .transpose()?;
    let action = filter
        .action
        .as_deref()
        .map(|a| actions::find(store, a))
        .transpose()?;
    Ok(all
        .into_iter()
        .filter(|i| {
            (filter.global && i.scope == InvariantScope::Global)
                || project.as_ref().is_some_and(|p| {
                    i.scope == InvariantScope::Project
                        && i.project.as_deref() == Some(p.name.as_str())
                })
                || plan.is_some_and(|p| i.plan_id == Some(p))
                || action.as_ref().is_some_and(|a| {
                    i.scope == InvariantScope::Action
                        && i.plan_id.is_none()
                        && i.action.as_deref() == Some(a.name.as_str())
                })
        })
        .collect())
}

/// How an invariant left the effective view.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Dropped {
    /// The invariant that was dropped.
    pub dropped: Invariant,
    /// The one kept in its place.
    pub kept: Invariant,
    /// `duplicate` (same normalised text) or `conflict` (same key).
    pub reason: std::borrow::Cow<'static, str>,
}

/// A plan's reconciled invariants.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct EffectiveView {
    /// What the plan must respect, broad scopes first (global, project, action, plan).
    pub effective: Vec<Invariant>,
    /// Duplicates dropped (same normalised text; the narrower scope kept).
    pub duplicates: Vec<Dropped>,
    /// Key conflicts resolved (the narrower scope won).
    pub conflicts: Vec<Dropped>,
}

/// Deterministic reconciliation (no invariant actor): see the module documentation.
pub fn reconcile(candidates: Vec<Invariant>) -> EffectiveView {
    // Duplicates: narrowest scope first, and within a scope the original (oldest) spelling.
    let mut ordered = candidates;
    ordered.sort_by(|a, b| {
        a.scope
            .cmp(&b.scope)
            .then(a.created_at.cmp(&b.created_at))
            .then(a.seq.cmp(&b.seq))
    });
    let mut unique: Vec<Invariant> = Vec::new();
    let mut duplicates = Vec::new();
    for inv in ordered {
        let norm = normalize(&inv.text);
        if let Some(k) = unique.iter().find(|k| normalize(&k.text) == norm) {
            duplicates.push(Dropped {
                dropped: inv,
                kept: k.clone(),
                reason: "duplicate".into(),
            });
            continue;
        }
        unique.push(inv);
    }
    // Key conflicts: narrowest scope first, and within a scope the newer invariant.
    unique.sort_by(|a, b| {
        a.scope
            .cmp(&b.scope)
            .then(b.created_at.cmp(&a.created_at))
            .then(b.seq.cmp(&a.seq))
    });
    let mut kept: Vec<Invariant> = Vec::new();
    let mut conflicts = Vec::new();
    for inv in unique {
        if let Some(key) = &inv.key
            && let Some(k) = kept.iter().find(|k| k.key.as_ref() == Some(key))
        {
            conflicts.push(Dropped {
                dropped: inv,
                kept: k.clone(),
                reason: "conflict".into(),
            });
            continue;
        }
        kept.push(inv);
    }
    kept.sort_by(|a, b| {
        b.scope
            .cmp(&a.scope)
            .then(a.created_at.cmp(&b.created_at))
            .then(a.seq.cmp(&b.seq))
    });
    EffectiveView {
        effective: kept,
        duplicates,
        conflicts,
    }
}

/// Which invariant actor would reconcile a plan's invariants, and where it was found.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ReconcilerChoice {
    /// The actor reference.
    pub actor: String,
    /// `plan`, `project <name>` or `global config`.
    pub from: String,
    /// Whether the reference resolves now.
    pub resolves: bool,
}

/// The effective view of a plan plus the invariant actor lookup (plan -> project -> global).
///
/// # Errors
/// Unknown plan; store errors.
pub fn effective(
    store: &Store,
    providers: &[Provider],
    plan_input: &str,
    global_actor: Option<&str>,
) -> Result<(Id, EffectiveView, Option<ReconcilerChoice>), InvariantError> {
    let plan_id = resolve_plan(store, plan_input)?;
    let plan = store
        .plan(&plan_id)?
        .ok_or_else(|| InvariantError::Plan(format!("plan {plan_id} not found")))?;
    let project_ids = store.plan_project_ids(&plan_id)?;
    let candidates: Vec<Invariant> = store
        .invariants()?
        .into_iter()
        .filter(|i| match i.scope {
            InvariantScope::Global => true,
            InvariantScope::Project => i
                .project
                .as_ref()
                .is_some_and(|p| plan.project_names().contains(&p.as_str())),
            InvariantScope::Action | InvariantScope::Plan => i.plan_id == Some(plan_id),
        })
        .collect();
    let view = reconcile(candidates);
    let mut choice = plan
        .invariant_actor
        .clone()
        .map(|a| (a, "plan".to_string()));
    if choice.is_none() {
        for pid in &project_ids {
            if let Some(p) = store.project_by_id(pid)?
                && let Some(a) = p.invariant_actor
            {
                choice = Some((a, format!("project {}", p.name)));
                break;
            }
        }
    }
    if choice.is_none() {
        choice = global_actor.map(|a| (a.to_string(), "global config".to_string()));
    }
    let choice = choice.map(|(actor, from)| ReconcilerChoice {
        resolves: actors::resolve(store, providers, &actor).is_ok(),
        actor,
        from,
    });
    Ok((plan_id, view, choice))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(id: &str, text: &str, scope: InvariantScope, key: Option<&str>, t: i64) -> Invariant {
        Invariant {
            invariant_id: id.into(),
            text: text.into(),
            key: key.map(str::to_string),
            scope,
            project: None,
            action: None,
            plan_id: None,
            created_at: jiff::Timestamp::from_second(t).unwrap(),
            seq: t,
        }
    }

    #[test]
    fn machine_forms_parse_and_bad_ones_name_the_fix() {
        let MachineForm::PathsUnchanged { globs, set } =
            machine_form(r#"paths-unchanged: "migrations/**", Cargo.lock, docs/"#).unwrap()
        else {
            panic!("paths form expected");
        };
        assert_eq!(globs, ["migrations/**", "Cargo.lock", "docs/"]);
        assert!(set.is_match("migrations/001.sql"));
        assert!(set.is_match("migrations/a/b.sql"));
        assert!(set.is_match("Cargo.lock"));
        assert!(set.is_match("docs/x.md"));
        assert!(!set.is_match("src/migrations.rs"));
        assert!(
            !set.is_match("sub/Cargo.lock"),
            "`*`-free globs match from the root"
        );
        let MachineForm::PathsUnchanged { set, .. } =
            machine_form("paths-unchanged: *.sql").unwrap()
        else {
            panic!()
        };
        assert!(
            set.is_match("a.sql") && !set.is_match("m/a.sql"),
            "`*` stays in one directory"
        );
        assert!(matches!(
            machine_form("command:  test -f X ").unwrap(),
            MachineForm::Command(c) if c == "test -f X"
        ));
        assert!(matches!(
            machine_form("Never touch the public API").unwrap(),
            MachineForm::FreeText
        ));
        let e = machine_form("paths-unchanged:").unwrap_err();
        assert!(e.contains("one or more globs"), "{e}");
        let e = machine_form("paths-unchanged: a/**, ,b").unwrap_err();
        assert!(e.contains("none empty"), "{e}");
        let e = machine_form("paths-unchanged: src/[abc").unwrap_err();
        assert!(e.contains("`src/[abc` is not a valid glob"), "{e}");
        let e = machine_form("command:   ").unwrap_err();
        assert!(e.contains("must exit 0"), "{e}");
    }

    #[test]
    fn a_machine_form_spelled_another_way_or_quoted_halfway_is_refused() {
        for text in [
            "Paths-Unchanged: a/",
            "paths_unchanged: a/",
            "paths unchanged: a/",
            "COMMAND: make",
        ] {
            let e = machine_form(text).unwrap_err();
            assert!(e.contains("spelled another way"), "{text}: {e}");
        }
        for text in [
            r#"paths-unchanged: "migrations/**"#,
            r#"paths-unchanged: migrations/**""#,
            r#"paths-unchanged: "migrations/**'"#,
            r#"paths-unchanged: ""#,
        ] {
            let e = machine_form(text).unwrap_err();
            assert!(e.contains("unbalanced quote"), "{text}: {e}");
        }
        let MachineForm::PathsUnchanged { globs, .. } =
            machine_form("paths-unchanged: 'a/**', \"b.lock\"").unwrap()
        else {
            panic!("paths form expected");
        };
        assert_eq!(globs, ["a/**", "b.lock"]);
        assert!(matches!(
            machine_form("Note: keep the public API stable").unwrap(),
            MachineForm::FreeText
        ));
    }

    #[test]
    fn normalisation_ignores_case_spacing_and_final_punctuation() {
        assert_eq!(normalize("  No  new   deps. "), "no new deps");
        assert_eq!(normalize("NO NEW DEPS!"), normalize("no new deps"));
        assert_ne!(normalize("no new deps"), normalize("no new dep"));
    }

    #[test]
    fn equivalent_invariants_in_one_scope_keep_the_original_spelling() {
        let v = reconcile(vec![
            inv(
                "old",
                "No new dependencies",
                InvariantScope::Global,
                None,
                1,
            ),
            inv(
                "new",
                "no new dependencies.",
                InvariantScope::Global,
                None,
                2,
            ),
        ]);
        assert_eq!(v.effective.len(), 1);
        assert_eq!(v.effective[0].invariant_id, "old");
        assert_eq!(v.duplicates[0].dropped.invariant_id, "new");
    }

    #[test]
    fn duplicates_keep_the_narrowest_scope() {
        let v = reconcile(vec![
            inv("g", "Tests must pass", InvariantScope::Global, None, 1),
            inv("p", "tests must pass.", InvariantScope::Plan, None, 2),
            inv("j", "Use tabs", InvariantScope::Project, None, 3),
        ]);
        let ids: Vec<&str> = v
            .effective
            .iter()
            .map(|i| i.invariant_id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["j", "p"],
            "broad scopes first; the global duplicate is dropped"
        );
        assert_eq!(v.duplicates.len(), 1);
        assert_eq!(v.duplicates[0].dropped.invariant_id, "g");
        assert!(v.conflicts.is_empty());
    }

    #[test]
    fn only_shared_keys_conflict_and_the_narrowest_scope_wins() {
        let v = reconcile(vec![
            inv(
                "g",
                "Use the shared DB pool",
                InvariantScope::Global,
                Some("db"),
                1,
            ),
            inv(
                "a",
                "Open one connection per test",
                InvariantScope::Action,
                Some("db"),
                2,
            ),
            inv(
                "j",
                "Use the shared DB pool for reads",
                InvariantScope::Project,
                Some("db"),
                3,
            ),
            inv("x", "Something unrelated", InvariantScope::Global, None, 4),
        ]);
        let ids: Vec<&str> = v
            .effective
            .iter()
            .map(|i| i.invariant_id.as_str())
            .collect();
        assert_eq!(ids, ["x", "a"]);
        let lost: Vec<&str> = v
            .conflicts
            .iter()
            .map(|d| d.dropped.invariant_id.as_str())
            .collect();
        assert_eq!(lost, ["j", "g"]);
        assert!(v.conflicts.iter().all(|d| d.kept.invariant_id == "a"));
    }

    #[test]
    fn within_one_scope_the_newer_keyed_invariant_wins() {
        let v = reconcile(vec![
            inv("old", "A", InvariantScope::Plan, Some("k"), 1),
            inv("new", "B", InvariantScope::Plan, Some("k"), 2),
        ]);
        assert_eq!(v.effective[0].invariant_id, "new");
        assert_eq!(v.conflicts[0].dropped.invariant_id, "old");
    }
}
