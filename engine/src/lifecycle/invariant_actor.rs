//! The plan's invariant actor ("It reconciles invariants (the plan's
//! invariant actor if any, else the deterministic reconciler)"; spec section 12).
//!
//! When the plan, one of its projects or the configuration names an invariant actor, that
//! model actor gets every candidate invariant (what the deterministic reconciler kept and
//! dropped) and answers with one `reconcile_invariants` call: which invariants are effective
//! and which are dropped as a duplicate or a conflict, with the one kept in their place. The
//! answer is validated (every candidate exactly once, known ids, a kept id for every drop);
//! an invalid answer goes back to the model as a tool error. An actor that cannot run, or
//! ends without a valid answer, errors the plan's Strategize (the user can retry, or remove
//! the invariant actor to use the deterministic reconciler): the plan never proceeds on
//! invariants nobody reconciled as configured.

use std::collections::BTreeSet;
use std::sync::Mutex;

use serde_json::{Value, json};

use super::{Lifecycle, model};
use crate::actors::messages::ToolSpec;
use crate::actors::prompts::Role;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::Plan;
use crate::registry::invariants::{Dropped, EffectiveView, Invariant, ReconcilerChoice};

/// The actor's answer, validated.
#[derive(Debug, Clone)]
struct Answer {
    effective: Vec<String>,
    /// (dropped id, kept id, reason, why)
    dropped: Vec<(String, String, &'static str, String)>,
}

struct ReconcileTools {
    ids: Vec<String>,
    answer: Mutex<Option<Answer>>,
}

/// `reconcile_invariants`: the invariant actor's one tool.
fn reconcile_tool() -> ToolSpec {
    ToolSpec {
        name: "reconcile_invariants".into(),
        description: "Give the reconciled invariants: every candidate id either effective or dropped (with the id kept in its place)."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "effective": {"type": "array", "items": {"type": "string"}},
                "dropped": {"type": "array", "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "invariant_id": {"type": "string"},
                        "kept": {"type": "string", "description": "The effective invariant kept in its place."},
                        "reason": {"type": "string", "enum": ["duplicate", "conflict"]},
                        "why": {"type": "string"}
                    },
                    "required": ["invariant_id", "kept", "reason"]
                }}
            },
            "required": ["effective", "dropped"]
        }),
    }
}

fn parse(ids: &[String], args: &Value) -> Result<Answer, String> {
    let strings = |v: Option<&Value>, field: &str| -> Result<Vec<String>, String> {
        v.and_then(Value::as_array)
            .ok_or(format!("`{field}` must be an array"))?
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or(format!("`{field}` must hold invariant ids (strings)"))
            })
            .collect()
    };
    let effective = strings(args.get("effective"), "effective")?;
    let mut dropped = Vec::new();
    for (i, d) in args
        .get("dropped")
        .and_then(Value::as_array)
        .ok_or("`dropped` must be an array (empty when nothing is dropped)")?
        .iter()
        .enumerate()
    {
        let field = |k: &str| d.get(k).and_then(Value::as_str).map(str::to_string);
        let id = field("invariant_id").ok_or(format!("`dropped[{i}].invariant_id` is missing"))?;
        let kept = field("kept").ok_or(format!("`dropped[{i}].kept` is missing"))?;
        let reason = match field("reason").as_deref() {
            Some("duplicate") => "duplicate",
            Some("conflict") => "conflict",
            _ => {
                return Err(format!(
                    "`dropped[{i}].reason` must be `duplicate` or `conflict`"
                ));
            }
        };
        if !effective.contains(&kept) {
            return Err(format!(
                "`dropped[{i}].kept` ({kept}) must be one of the effective invariants"
            ));
        }
        dropped.push((id, kept, reason, field("why").unwrap_or_default()));
    }
    let mut seen = BTreeSet::new();
    for id in effective.iter().chain(dropped.iter().map(|d| &d.0)) {
        if !ids.contains(id) {
            return Err(format!(
                "`{id}` is not a candidate; the candidates are {}",
                ids.join(", ")
            ));
        }
        if !seen.insert(id.clone()) {
            return Err(format!(
                "`{id}` appears more than once; give each candidate once"
            ));
        }
    }
    let missing: Vec<&String> = ids.iter().filter(|i| !seen.contains(*i)).collect();
    if !missing.is_empty() {
        return Err(format!(
            "every candidate must be effective or dropped; missing: {}",
            missing
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(Answer { effective, dropped })
}

impl ToolHost for ReconcileTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![reconcile_tool()]
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if name != "reconcile_invariants" {
            return ToolOutcome::error(format!(
                "`{name}` is not available; answer with reconcile_invariants"
            ));
        }
        match parse(&self.ids, &args) {
            Ok(answer) => {
                if let Ok(mut slot) = self.answer.lock() {
                    *slot = Some(answer);
                }
                ToolOutcome::finish("invariants reconciled")
            }
            Err(message) => ToolOutcome::error(format!("reconcile_invariants: {message}")),
        }
    }
}

/// Reconciles the plan's candidate invariants (everything `view` kept or dropped) with the
/// invariant actor `choice`. Returns the actor's effective view and what to record about it.
///
/// # Errors
/// `(code, message)`: `ACTOR_UNAVAILABLE` when the actor cannot run, `ACTOR_FAILED` when it
/// ended without a valid answer.
pub(crate) fn reconcile(
    engine: &mut Lifecycle,
    plan: &Plan,
    choice: &ReconcilerChoice,
    view: &EffectiveView,
) -> Result<(EffectiveView, Value), (String, String)> {
    let mut candidates: Vec<Invariant> = view.effective.clone();
    candidates.extend(view.duplicates.iter().map(|d| d.dropped.clone()));
    candidates.extend(view.conflicts.iter().map(|d| d.dropped.clone()));
    if candidates.is_empty() {
        return Ok((
            view.clone(),
            json!({"used": "invariant_actor", "invariant_actor": choice.actor, "from": choice.from, "note": "no candidate invariants, so the actor was not asked"}),
        ));
    }
    let actor =
        model::resolve(engine, plan, &choice.actor, Role::InvariantReconciler).map_err(|m| {
            (
                "ACTOR_UNAVAILABLE".to_string(),
                format!(
                    "the invariant actor {} ({}) cannot run: {m}",
                    choice.actor, choice.from
                ),
            )
        })?;
    let ids: Vec<String> = candidates.iter().map(|c| c.invariant_id.clone()).collect();
    let tools = ReconcileTools {
        ids,
        answer: Mutex::new(None),
    };
    let context = json!({
        "description": plan.description,
        "candidates": candidates.iter().map(|c| json!({
            "invariant_id": c.invariant_id,
            "text": c.text,
            "scope": c.scope_label(),
            "key": c.key,
        })).collect::<Vec<_>>(),
    });
    let prompt = format!(
        "Reconcile these {} candidate invariants and answer with reconcile_invariants.",
        candidates.len()
    );
    let mut input = model::Input {
        context,
        prompt,
        history: Vec::new(),
        ..model::Input::default()
    };
    let (answer, turns) = match journal_input(engine, plan, &actor, &tools.ids, &mut input) {
        Journaled::Answered { answer, turns } => (Some(answer), turns),
        Journaled::Run => {
            let run = model::run(engine, &plan.plan_id, None, &actor, input, &tools)
                .map_err(|m| ("ACTOR_FAILED".to_string(), m))?;
            let answer = tools.answer.into_inner().ok().flatten();
            if answer.is_none() {
                return Err((
                    "ACTOR_FAILED".to_string(),
                    format!(
                        "the invariant actor {} did not reconcile the invariants: {}",
                        choice.actor,
                        run.stop.describe()
                    ),
                ));
            }
            (answer, run.turns)
        }
    };
    let answer = answer.expect("an answer, or the error returned above");
    let find = |id: &str| {
        candidates
            .iter()
            .find(|c| c.invariant_id == id)
            .cloned()
            .expect("validated ids are candidates")
    };
    let mut out = EffectiveView {
        effective: candidates
            .iter()
            .filter(|c| answer.effective.contains(&c.invariant_id))
            .cloned()
            .collect(),
        duplicates: Vec::new(),
        conflicts: Vec::new(),
    };
    for (id, kept, reason, _) in &answer.dropped {
        let d = Dropped {
            dropped: find(id),
            kept: find(kept),
            reason: (*reason).into(),
        };
        if *reason == "duplicate" {
            out.duplicates.push(d);
        } else {
            out.conflicts.push(d);
        }
    }
    let note = json!({
        "used": "invariant_actor",
        "invariant_actor": choice.actor,
        "from": choice.from,
        "turns": turns,
        "dropped": answer.dropped.iter().map(|(id, kept, reason, why)| json!({"invariant_id": id, "kept": kept, "reason": reason, "why": why})).collect::<Vec<_>>(),
    });
    Ok((out, note))
}

/// The journal key of the plan's invariant actor run (a step's journal is keyed by its
/// decision id, the strategist's by `strategize`).
pub(crate) const INVARIANTS_KEY: &str = "invariants";

/// What the invariant actor's journal holds.
enum Journaled {
    /// Its valid answer (a run whose driver vanished before Strategize recorded it): the
    /// actor is not asked again.
    Answered { answer: Answer, turns: u32 },
    /// The actor runs, journaled, continuing from where its journal ends when it holds calls.
    Run,
}

/// Journals the invariant actor's run as a step's run is (docs/sandbox.md, "Resuming a
/// step"): each model call and tool call is recorded as it happens, so that a driver killed
/// during it, or after it answered and before Strategize recorded the answer, does not buy
/// its answered calls again. A journal continues only when it starts from the same prompt
/// and a recorded answer still holds for the candidates; otherwise it is cleared. The actor's
/// one tool writes nothing, so nothing is checkpointed or restored.
fn journal_input(
    engine: &mut Lifecycle,
    plan: &Plan,
    actor: &model::ModelActor,
    ids: &[String],
    input: &mut model::Input,
) -> Journaled {
    use super::journal::{self, StepJournal, rebuild};
    let entries = engine
        .store()
        .journal(&plan.plan_id, INVARIANTS_KEY)
        .unwrap_or_default();
    let same_start = |history: &[crate::actors::messages::Message]| {
        matches!(history.first(), Some(crate::actors::messages::Message::User { text }) if *text == input.prompt)
    };
    if let Some(answered) = recorded_answer(&entries, ids) {
        return answered;
    }
    let continued = rebuild(&entries).filter(|r| same_start(&r.history));
    if continued.is_none()
        && let Err(e) = engine
            .store_mut()
            .journal_clear(&plan.plan_id, INVARIANTS_KEY)
    {
        tracing::warn!(error = %e, "the invariant actor runs without a journal");
        return Journaled::Run;
    }
    let step = journal::Journaled {
        plan_id: plan.plan_id,
        key: INVARIANTS_KEY.to_string(),
        decision_id: None,
        actor: actor.name.clone(),
        providers: engine.providers().to_vec(),
        fallback: actor.client.provider().clone(),
        writers: Default::default(),
        unnoted: Default::default(),
    };
    let journal = match StepJournal::open(
        engine.store().location(),
        crate::sandbox::Sandboxes::new(engine.paths()),
        step,
    ) {
        Ok(j) => std::sync::Arc::new(j),
        Err(e) => {
            tracing::warn!(error = %e, "the invariant actor runs without a journal");
            return Journaled::Run;
        }
    };
    if let Some(rebuilt) = continued {
        let call = rebuilt.call();
        engine.observer().progress(&format!(
            "Strategize: resuming the invariant actor at model call {call}"
        ));
        journal.resumed(call, &rebuilt.point, rebuilt.lost.as_ref());
        input.history = rebuilt.history;
        input.resume_at = Some(rebuilt.point);
    }
    input.journal = Some(journal);
    Journaled::Run
}

/// The valid `reconcile_invariants` answer a journal recorded, with the model calls made.
fn recorded_answer(
    entries: &[crate::store::step_journal::JournalEntry],
    ids: &[String],
) -> Option<Journaled> {
    let mut turns = 0;
    for e in entries {
        let v = &e.entry;
        match e.kind.as_str() {
            "model" => {
                turns = turns.max(v["record"]["turn"].as_u64().and_then(|t| u32::try_from(t).ok())?);
            }
            "tool"
                if v["record"]["name"] == "reconcile_invariants"
                    && v["record"]["is_error"] == false =>
            {
                let args: Value =
                    serde_json::from_str(v["record"]["arguments"].as_str()?).ok()?;
                return parse(ids, &args)
                    .ok()
                    .map(|answer| Journaled::Answered { answer, turns });
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_must_place_every_candidate_exactly_once_with_a_kept_id_for_each_drop() {
        let ids = vec!["inv_a".to_string(), "inv_b".to_string()];
        let ok = parse(
            &ids,
            &json!({"effective": ["inv_a"], "dropped": [{"invariant_id": "inv_b", "kept": "inv_a", "reason": "duplicate"}]}),
        )
        .unwrap();
        assert_eq!(ok.effective, ["inv_a"]);
        let e = parse(&ids, &json!({"effective": ["inv_a"], "dropped": []})).unwrap_err();
        assert!(e.contains("missing: inv_b"), "{e}");
        let e = parse(
            &ids,
            &json!({"effective": ["inv_a", "inv_a", "inv_b"], "dropped": []}),
        )
        .unwrap_err();
        assert!(e.contains("more than once"), "{e}");
        let e = parse(
            &ids,
            &json!({"effective": ["inv_a", "inv_x"], "dropped": []}),
        )
        .unwrap_err();
        assert!(e.contains("`inv_x` is not a candidate"), "{e}");
        let e = parse(
            &ids,
            &json!({"effective": ["inv_a"], "dropped": [{"invariant_id": "inv_b", "kept": "inv_b", "reason": "conflict"}]}),
        )
        .unwrap_err();
        assert!(e.contains("must be one of the effective"), "{e}");
        let e = parse(
            &ids,
            &json!({"effective": ["inv_a"], "dropped": [{"invariant_id": "inv_b", "kept": "inv_a", "reason": "better"}]}),
        )
        .unwrap_err();
        assert!(e.contains("`duplicate` or `conflict`"), "{e}");
    }
}
