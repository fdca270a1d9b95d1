//! What depends on a decision (spec 27 "Identify Downstream Impact").
//!
//! The dependents come from `decision_dependencies`: Strategize records that every decision
//! depends on the root `prompt_definition` and on every `invariant_enforced` decision, on its
//! tree parent and on what it declares (`depends-on` of script steps, `depends_on` of
//! `record_decision`); a spawn decision reaches its child plan's root through a `plan` row
//! (the agreed linking), and from there the child's own tree. Only current decisions count.
//!
//! From the affected decisions follow the steps (Execute's `plan_steps`): the affected ones
//! re-run, the unaffected ones after the first affected step are replayed from their recorded
//! delta, and a replayed step that changed a file an affected step also changed may conflict
//! and then re-run. The files are those the affected steps changed (their start and end
//! checkpoints compared), and the rollback target is the start checkpoint of the first
//! affected step.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::Serialize;

use crate::domain::decision::{Decision, DecisionType};
use crate::domain::id::Id;
use crate::registry::actors::CHECKLIST_STRATEGIST;
use crate::sandbox::diff::{self, DiffRequest};
use crate::sandbox::{CheckpointId, Sandbox, Sandboxes};
use crate::store::corrections::Reached;
use crate::store::lifecycle_run::PlanStep;
use crate::store::{Store, StoreError};


/// Model calls a model strategist makes to re-decide a correction, as the dry run counts them:
/// a turn recording the replacement decisions and a turn finishing the strategy.
pub const STRATEGIST_CALLS: u64 = 2;

/// A decision's downstream impact.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Impact {
    /// The decision asked about.
    pub decision_id: Id,
    /// Its plan.
    pub plan_id: Id,
    /// The decision and everything that depends on it: its own plan first in sequence order,
    /// then child plans' decisions by plan and sequence.
    pub decisions: Vec<Reached>,
    /// Executable decisions of the plan whose steps re-run, in step order.
    pub steps_rerun: Vec<Id>,
    /// Unaffected steps after the first affected one: replayed from their recorded delta.
    pub steps_replayed: Vec<Id>,
    /// Replayed steps that changed a file an affected step changed: if their replay
    /// conflicts, they re-run.
    pub steps_may_rerun: Vec<Id>,
    /// Steps before the first affected one: kept as they are.
    pub steps_kept: Vec<Id>,
    /// Child plans reached (spawned from affected decisions, and their descendants).
    pub child_plans: Vec<Id>,
    /// Files the affected steps changed (`resource:path` when the plan has several
    /// sandboxes, else `path`), sorted.
    pub files: Vec<String>,
    /// Checkpoints the affected steps recorded (start and end), in step order.
    pub checkpoints: Vec<String>,
    /// The checkpoint the sandbox returns to (start of the first affected step); `None`
    /// when that step started before any sandbox existed (the sandboxes go back to their
    /// base) or nothing ran yet.
    pub rollback_checkpoint: Option<String>,
    /// Current decisions of the plan that keep their ids.
    pub unaffected: Vec<Id>,
    /// Model calls a revert is expected to make: one strategist run (when the strategy actor
    /// is a model) plus, for a model execution actor, as many calls per re-run step as its
    /// last run made (at least one). Offline actors make none.
    pub estimated_model_calls: u64,
}

impl Impact {
    /// How far a correction of the decision reaches: `low` (up to 2 downstream decisions and
    /// child plans), `medium` (up to 10) or `high`.
    pub fn level(&self) -> &'static str {
        match self.decisions.len().saturating_sub(1) + self.child_plans.len() {
            0..=2 => "low",
            3..=10 => "medium",
            _ => "high",
        }
    }
}

/// What goes wrong computing an impact.
#[derive(Debug, thiserror::Error)]
pub enum ImpactError {
    /// No such decision.
    #[error("decision {0} not found")]
    NotFound(Id),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A sandbox could not be read.
    #[error("sandbox: {0}")]
    Sandbox(String),
}

/// The affected decisions only (the decision first), without steps or files: what the
/// benchmark and `plan tree` markers need.
///
/// # Errors
/// [`ImpactError`].
pub fn affected_decisions(store: &Store, decision: &Decision) -> Result<Vec<Reached>, ImpactError> {
    // Correcting a plan's root prompt invalidates everything downstream, child plans included
    // (spec 08): every current decision of the plan and its descendant plans, read in one
    // pass instead of walking every dependency row.
    let mut reached = if decision.decision_type == DecisionType::PromptDefinition
        && decision.parent_decision_id.is_none()
    {
        store.family_current_decisions(&decision.plan_id, &decision.decision_id)?
    } else {
        store.transitive_dependents(&decision.decision_id)?
    };
    reached.sort_by(|a, b| {
        let own = |r: &Reached| r.plan_id != decision.plan_id;
        (own(a), a.plan_id, a.sequence_number).cmp(&(own(b), b.plan_id, b.sequence_number))
    });
    let mut out = vec![Reached {
        decision_id: decision.decision_id,
        plan_id: decision.plan_id,
        decision_type: decision.decision_type,
        chosen_option: decision.chosen_option.clone(),
        sequence_number: decision.sequence_number,
    }];
    out.extend(reached);
    Ok(out)
}

/// The paths one step changed in each sandbox: its end checkpoint against its start
/// checkpoint (or the sandbox's base when it started before the sandbox existed).
///
/// # Errors
/// [`ImpactError::Sandbox`] for unreadable git objects.
pub fn step_files(
    store: &Store,
    active: &[Sandbox],
    step: &PlanStep,
) -> Result<Vec<(String, String)>, ImpactError> {
    let cp = |m: &serde_json::Map<String, serde_json::Value>| -> Result<_, ImpactError> {
        match m
            .get("checkpoint")
            .and_then(|v| v.as_str())
            .and_then(|s| s.parse::<CheckpointId>().ok())
        {
            Some(id) => Ok(store.checkpoint(&id)?),
            None => Ok(None),
        }
    };
    let (Some(end), start) = (cp(&step.end_checkpoints)?, cp(&step.start_checkpoints)?) else {
        return Ok(Vec::new());
    };
    let sb_err = |e: crate::sandbox::SandboxError| ImpactError::Sandbox(e.to_string());
    let mut out = Vec::new();
    for state in &end.states {
        let Some(sb) = active
            .iter()
            .find(|s| s.record.sandbox_id == state.sandbox_id)
        else {
            continue;
        };
        let repo = sb.repo().map_err(sb_err)?;
        let old = match start
            .as_ref()
            .and_then(|s| s.states.iter().find(|x| x.sandbox_id == state.sandbox_id))
        {
            Some(s) => git2::Oid::from_str(&s.tree_oid).ok(),
            None => repo
                .find_commit(sb.base_commit().map_err(sb_err)?)
                .and_then(|c| c.tree())
                .map(|t| t.id())
                .ok(),
        };
        let new = git2::Oid::from_str(&state.tree_oid).ok();
        if old == new {
            continue;
        }
        for f in diff::trees(&repo, old, new, &DiffRequest::default()).map_err(sb_err)? {
            if let Some(o) = f.old_path {
                out.push((sb.record.resource_name.clone(), o));
            }
            out.push((sb.record.resource_name.clone(), f.path));
        }
    }
    Ok(out)
}

/// The full impact of correcting `decision_id`. `sandboxes` is where the plan's sandboxes
/// live (files are computed from their checkpoints; `None` leaves `files` empty). Reads
/// only: nothing in the database or a sandbox is written.
///
/// # Errors
/// [`ImpactError`].
pub fn impact(
    store: &Store,
    sandboxes: Option<&Sandboxes>,
    decision_id: &Id,
) -> Result<Impact, ImpactError> {
    let decision = store
        .decision(decision_id)?
        .ok_or(ImpactError::NotFound(*decision_id))?;
    let plan_id = decision.plan_id;
    let decisions = affected_decisions(store, &decision)?;
    let affected: HashSet<Id> = decisions.iter().map(|r| r.decision_id).collect();
    let mut child_plans: Vec<Id> = Vec::new();
    for r in &decisions {
        if r.plan_id != plan_id && !child_plans.contains(&r.plan_id) {
            child_plans.push(r.plan_id);
        }
    }
    for (spawn, child) in store.spawned_children(&plan_id)? {
        if affected.contains(&spawn) && !child_plans.contains(&child) {
            child_plans.push(child);
        }
    }
    let all = store.decisions(&plan_id)?;
    let by_id: HashMap<Id, &Decision> = all.iter().map(|d| (d.decision_id, d)).collect();
    let steps = store.plan_steps(&plan_id)?;
    let first = steps.iter().position(|s| affected.contains(&s.decision_id));
    let mut steps_rerun = Vec::new();
    let mut steps_replayed = Vec::new();
    let mut steps_kept = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        if affected.contains(&s.decision_id) {
            steps_rerun.push(s.decision_id);
        } else if first.is_some_and(|f| i > f) {
            steps_replayed.push(s.decision_id);
        } else {
            steps_kept.push(s.decision_id);
        }
    }
    // Affected executable decisions that have no step yet (Execute has not run) still run.
    for r in &decisions {
        if r.plan_id == plan_id
            && by_id.get(&r.decision_id).is_some_and(|d| d.step.is_some())
            && !steps_rerun.contains(&r.decision_id)
        {
            steps_rerun.push(r.decision_id);
        }
    }
    let active = match sandboxes {
        Some(sbs) => sbs
            .active(store, &plan_id)
            .map_err(|e| ImpactError::Sandbox(e.to_string()))?,
        None => Vec::new(),
    };
    let several = active.len() > 1;
    let label = |(res, path): &(String, String)| {
        if several {
            format!("{res}:{path}")
        } else {
            path.clone()
        }
    };
    let mut files = BTreeSet::new();
    let mut checkpoints = Vec::new();
    for s in steps.iter().filter(|s| affected.contains(&s.decision_id)) {
        for f in step_files(store, &active, s)? {
            files.insert(label(&f));
        }
        for m in [&s.start_checkpoints, &s.end_checkpoints] {
            if let Some(cp) = m.get("checkpoint").and_then(|v| v.as_str()) {
                checkpoints.push(cp.to_string());
            }
        }
    }
    let mut steps_may_rerun = Vec::new();
    for s in steps
        .iter()
        .filter(|s| steps_replayed.contains(&s.decision_id))
    {
        if step_files(store, &active, s)?
            .iter()
            .any(|f| files.contains(&label(f)))
        {
            steps_may_rerun.push(s.decision_id);
        }
    }
    let rollback_checkpoint = first.and_then(|f| {
        steps[f]
            .start_checkpoints
            .get("checkpoint")
            .and_then(|v| v.as_str())
            .map(str::to_string)
    });
    let unaffected = all
        .iter()
        .filter(|d| d.is_current() && !affected.contains(&d.decision_id))
        .map(|d| d.decision_id)
        .collect();
    let plan = store.plan(&plan_id)?;
    let model_strategist = plan
        .as_ref()
        .and_then(|p| p.strategy_actor.as_deref())
        .is_some_and(|a| a != CHECKLIST_STRATEGIST);
    let model_executor = plan
        .as_ref()
        .and_then(|p| p.execution_actor.as_deref())
        .is_some_and(|a| a != crate::registry::actors::SCRIPT_EXECUTOR);
    // A model strategist re-decides in at least two turns: one recording the replacement
    // decisions and one calling `finish_strategy` after seeing them recorded.
    let mut estimated_model_calls = if model_strategist {
        STRATEGIST_CALLS
    } else {
        0
    };
    if model_executor {
        for d in &steps_rerun {
            let calls = store
                .usage_for_decision(&plan_id, &d.to_string())?
                .calls
                .max(1);
            estimated_model_calls += calls;
        }
    }
    Ok(Impact {
        decision_id: *decision_id,
        plan_id,
        decisions,
        steps_rerun,
        steps_replayed,
        steps_may_rerun,
        steps_kept,
        child_plans,
        files: files.into_iter().collect(),
        checkpoints,
        rollback_checkpoint,
        unaffected,
        estimated_model_calls,
    })
}

/// Whether correcting a decision of this type redoes the whole plan.
pub fn redoes_everything(kind: DecisionType) -> bool {
    kind == DecisionType::PromptDefinition
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::correction::tree;
    use crate::domain::plan::Plan;
    use jiff::Timestamp;

    fn decision(
        store: &mut Store,
        plan: &Id,
        kind: DecisionType,
        text: &str,
        parent: Option<Id>,
    ) -> Id {
        let mut d = Decision::new(*plan, kind, text, Timestamp::now());
        d.parent_decision_id = parent;
        if matches!(
            kind,
            DecisionType::ImplementationChoice | DecisionType::SubplanSpawn
        ) {
            d.step = Some(crate::domain::decision::Step {
                instructions: text.into(),
                expected_outputs: vec![],
                ..Default::default()
            });
        }
        store.insert_decision(&d).unwrap();
        d.decision_id
    }

    fn depend(store: &mut Store, up: &Id, down: &Id) {
        store
            .add_decision_dependency(up, down, "decision", &down.to_string())
            .unwrap();
    }

    /// A plan with a spawn decision linked (agreed rows) to a child plan, which spawns a
    /// grandchild; and an independent step.
    struct Family {
        store: Store,
        _dir: tempfile::TempDir,
        plan: Id,
        root: Id,
        spawn: Id,
        other: Id,
        child: Id,
        child_step: Id,
        grandchild: Id,
        grand_step: Id,
    }

    fn child_plan(store: &mut Store, parent: &Id, root: &Id, spawn: &Id) -> (Id, Id, Id) {
        let mut p = Plan::new("local/child", "child", Timestamp::now());
        p.parent_plan_id = Some(*parent);
        p.root_plan_id = Some(*root);
        store.insert_plan(&p).unwrap();
        let croot = decision(
            store,
            &p.plan_id,
            DecisionType::PromptDefinition,
            "child prompt",
            None,
        );
        let cstep = decision(
            store,
            &p.plan_id,
            DecisionType::SubplanSpawn,
            "child step",
            Some(croot),
        );
        depend(store, &croot, &cstep);
        store
            .add_decision_dependency(spawn, &croot, "plan", &p.plan_id.to_string())
            .unwrap();
        (p.plan_id, croot, cstep)
    }

    fn family() -> Family {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let p = plan.plan_id;
        let root = decision(
            &mut store,
            &p,
            DecisionType::PromptDefinition,
            "do it",
            None,
        );
        let inv = decision(
            &mut store,
            &p,
            DecisionType::InvariantEnforced,
            "no breaking",
            Some(root),
        );
        let spawn = decision(
            &mut store,
            &p,
            DecisionType::SubplanSpawn,
            "spawn docs",
            Some(root),
        );
        let other = decision(
            &mut store,
            &p,
            DecisionType::ImplementationChoice,
            "fmt",
            Some(root),
        );
        for d in [inv, spawn, other] {
            depend(&mut store, &root, &d);
        }
        depend(&mut store, &inv, &spawn);
        depend(&mut store, &inv, &other);
        let (child, _croot, child_step) = child_plan(&mut store, &p, &p, &spawn);
        let (grandchild, _groot, grand_step) = child_plan(&mut store, &child, &p, &child_step);
        Family {
            store,
            _dir: dir,
            plan: p,
            root,
            spawn,
            other,
            child,
            child_step,
            grandchild,
            grand_step,
        }
    }

    #[test]
    fn the_affected_set_crosses_into_child_plans_through_plan_rows() {
        let f = family();
        let imp = impact(&f.store, None, &f.spawn).unwrap();
        let ids: Vec<Id> = imp.decisions.iter().map(|r| r.decision_id).collect();
        assert_eq!(ids[0], f.spawn, "the decision itself comes first");
        assert!(
            ids.contains(&f.child_step) && ids.contains(&f.grand_step),
            "{ids:?}"
        );
        assert!(
            !ids.contains(&f.other),
            "the independent step is not affected"
        );
        assert_eq!(
            ids.len(),
            5,
            "spawn, child root and step, grandchild root and step"
        );
        let mut children = imp.child_plans.clone();
        children.sort();
        let mut expected = vec![f.child, f.grandchild];
        expected.sort();
        assert_eq!(children, expected);
        assert_eq!(
            imp.steps_rerun,
            [f.spawn],
            "no plan_steps yet: its executable decision"
        );
        let all = impact(&f.store, None, &f.root).unwrap();
        assert_eq!(
            all.decisions.len(),
            8,
            "the root reaches every decision of the family"
        );
        assert_eq!(all.child_plans.len(), 2);
        let independent = impact(&f.store, None, &f.other).unwrap();
        assert_eq!(independent.decisions.len(), 1);
        assert!(independent.child_plans.is_empty());
    }

    #[test]
    fn superseded_decisions_do_not_spread_a_correction() {
        let mut f = family();
        let tx = f.store.conn_mut().transaction().unwrap();
        crate::store::corrections::supersede_in(&tx, &f.child_step, &f.other).unwrap();
        tx.commit().unwrap();
        let imp = impact(&f.store, None, &f.spawn).unwrap();
        let ids: Vec<Id> = imp.decisions.iter().map(|r| r.decision_id).collect();
        assert!(
            !ids.contains(&f.child_step),
            "a superseded decision is not current"
        );
    }

    #[test]
    fn the_tree_nests_child_plans_under_their_spawn_decisions() {
        let f = family();
        let t = tree::load(&f.store, &f.plan, false).unwrap();
        assert_eq!(t.roots.len(), 1);
        let root = &t.roots[0];
        let spawn = root.children.iter().find(|n| n.id == f.spawn).unwrap();
        let child = &spawn.children[0];
        assert_eq!((child.kind.as_str(), child.id), ("plan", f.child));
        let child_step = &child.children[0].children[0];
        assert_eq!(child_step.id, f.child_step);
        assert_eq!(child_step.children[0].id, f.grandchild);
        assert_eq!(t.summary.child_plans, 2);
        assert_eq!(t.summary.nodes, 8, "4 in the plan, 2 per child plan");
        let json = serde_json::to_value(&t.roots).unwrap();
        assert_eq!(json[0]["children"][1]["children"][0]["kind"], "plan");
    }

    /// The labels of a node's decisions, depth first.
    fn labels(nodes: &[tree::Node], out: &mut Vec<String>) {
        for n in nodes {
            if n.kind == "decision" {
                out.push(n.label.clone());
            }
            labels(&n.children, out);
        }
    }

    #[test]
    fn a_child_plan_linked_from_two_spawn_decisions_shows_its_decisions_under_both() {
        let mut f = family();
        let croot = f.store.decisions(&f.child).unwrap()[0].decision_id;
        f.store
            .add_decision_dependency(&f.other, &croot, "plan", &f.child.to_string())
            .unwrap();
        let t = tree::load(&f.store, &f.plan, false).unwrap();
        let root = &t.roots[0];
        let under = |d: Id| -> Vec<String> {
            let node = root.children.iter().find(|n| n.id == d).unwrap();
            let mut out = Vec::new();
            labels(&node.children, &mut out);
            out
        };
        assert_eq!(under(f.spawn), under(f.other));
        assert_eq!(
            under(f.spawn),
            ["child prompt", "child step", "child prompt", "child step"],
            "the child plan and its grandchild, with their texts"
        );
    }

    #[test]
    fn an_unlinked_child_plan_shows_its_decisions_under_each_top_level_decision() {
        let mut f = family();
        let mut p = Plan::new("local/loose", "loose", Timestamp::now());
        p.parent_plan_id = Some(f.plan);
        p.root_plan_id = Some(f.plan);
        f.store.insert_plan(&p).unwrap();
        decision(
            &mut f.store,
            &p.plan_id,
            DecisionType::PromptDefinition,
            "loose prompt",
            None,
        );
        decision(
            &mut f.store,
            &f.plan,
            DecisionType::PromptDefinition,
            "second prompt",
            None,
        );
        let t = tree::load(&f.store, &f.plan, false).unwrap();
        assert_eq!(t.roots.len(), 2);
        for top in &t.roots {
            let loose = top.children.iter().find(|n| n.id == p.plan_id).unwrap();
            let mut out = Vec::new();
            labels(&loose.children, &mut out);
            assert_eq!(out, ["loose prompt"], "under {}", top.label);
        }
    }
}
