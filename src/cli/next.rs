//! Renders the engine's typed next steps ([`Next`]) as the commands a user types: the one
//! place where a suggested step becomes `agents ...` text (docs/architecture.md, "The API").
//!
//! [`command`] writes the step as `agents ...`; [`super::Context::next`] writes it for this
//! invocation, repeating `--data-dir` / `--config-path` when they were given (an error's
//! hints get the same treatment when the error is printed).

use serde_json::{Map, Value};

use cleveragents_engine::api::ApprovalAnswered as Answered;
use cleveragents_engine::domain::approval::{Approval, ApprovalKind};
use cleveragents_engine::domain::event::EngineEvent;
use cleveragents_engine::domain::next::{CorrectionMode, Next};

/// The command that takes `next`, as `agents ...` without global options.
///
/// An alternative ([`Next::Either`]) is written `FIRST (or: agents SECOND)`; only the first
/// command is rewritten to repeat the global options, as suggestions always have been.
pub fn command(next: &Next) -> String {
    format!("agents {}", rest(next))
}

/// The command after the program name.
pub(crate) fn rest(next: &Next) -> String {
    match next {
        Next::PlanStatus { plan } => format!("plan status {plan}"),
        Next::ExecutePlan { plan } => format!("plan execute {plan}"),
        Next::ApplyPlan { plan } => format!("plan apply {plan}"),
        Next::CancelPlan { plan } => format!("plan cancel {plan}"),
        Next::PlanDiff { plan } => format!("plan diff {plan}"),
        Next::PlanErrors { plan } => format!("plan errors {plan}"),
        Next::PlanLogs { plan } => format!("plan logs {plan}"),
        Next::PlanTree { plan } => format!("plan tree {plan}"),
        Next::PromptPlan { plan } => format!("plan prompt {plan} <guidance>"),
        Next::ListApprovals => "plan approvals".to_string(),
        Next::ListActors => "actor list".to_string(),
        Next::Decide { approval, option } => format!("plan decide {approval} --option {option}"),
        Next::RaiseBudget { approval } => {
            format!("plan decide {approval} --max-cost-usd USD (or --max-tokens N)")
        }
        Next::Reject { approval } => format!("plan reject {approval} --reason TEXT"),
        Next::Correct { mode, decision } => {
            format!(
                "plan correct --mode {} -g <guidance> {decision}",
                mode_name(*mode)
            )
        }
        Next::CorrectInPlan { mode, plan } => format!(
            "plan correct --mode {} -g <guidance> <decision> (the decisions: {})",
            mode_name(*mode),
            command(&Next::PlanTree { plan: *plan })
        ),
        Next::ConfigUnset { key } => format!("config unset {key}"),
        Next::Either { first, or } => format!("{} (or: {})", rest(first), command(or)),
    }
}

/// What answering an approval did, as printed: the step to take first, when there is one
/// (`to correct the step, run `agents plan correct ...`; ...`, repeating `--data-dir` /
/// `--config-path` when they were given), then the effect.
pub fn effect(ctx: &super::Context, answered: &Answered) -> String {
    match &answered.first {
        Some(first) => format!(
            "{}, run `{}`; {}",
            first.what,
            ctx.next(&first.next),
            answered.effect
        ),
        None => answered.effect.clone(),
    }
}

/// An approval's context as printed. An invariant violation's also names the commands of its
/// `correct` and `cancel` options, `correct_command` (null when found before Apply, where no
/// one step is to blame) after `attempt` and `cancel_command` last, where the context of an
/// approval raised before the commands became typed holds them too.
pub fn approval_context(a: &Approval) -> Value {
    let Value::Object(context) = &a.context else {
        return a.context.clone();
    };
    if a.kind != ApprovalKind::InvariantViolation {
        return a.context.clone();
    }
    let correct = (a.context["step_decision_id"].is_string()
        && (a.options.is_empty() || a.options.iter().any(|o| o == "correct")))
    .then(|| command(&cleveragents_engine::api::correct_step(a)));
    let cancel = command(&Next::decide(&a.approval_id, "cancel"));
    let mut out = Map::new();
    for (key, value) in context {
        match key.as_str() {
            "correct_command" | "cancel_command" => continue,
            _ => out.insert(key.clone(), value.clone()),
        };
        if key == "attempt" {
            out.insert("correct_command".into(), correct.clone().into());
        }
    }
    out.entry("correct_command")
        .or_insert_with(|| correct.into());
    out.insert("cancel_command".into(), cancel.into());
    Value::Object(out)
}

/// An event as `--stream` prints it: an `approval_requested` event's `answer_command` (the
/// typed step the engine records) as its `agents ...` command, as it was always printed.
pub fn streamed_event(event: &EngineEvent) -> std::borrow::Cow<'_, EngineEvent> {
    use cleveragents_engine::domain::event::{AnswerStep, EventKind};
    use std::borrow::Cow;
    match &event.kind {
        EventKind::ApprovalRequested(p) => match &p.answer_command {
            AnswerStep::Step(step) => {
                let mut shown = p.clone();
                shown.answer_command = AnswerStep::Command(command(step));
                Cow::Owned(EngineEvent {
                    kind: EventKind::ApprovalRequested(shown),
                    ..event.clone()
                })
            }
            AnswerStep::Command(_) => Cow::Borrowed(event),
        },
        _ => Cow::Borrowed(event),
    }
}

/// `--mode`'s value.
fn mode_name(mode: CorrectionMode) -> &'static str {
    match mode {
        CorrectionMode::Revert => "revert",
        CorrectionMode::Append => "append",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cleveragents_engine::domain::approval::{Approval, ApprovalKind};
    use cleveragents_engine::domain::{Id, Plan};
    use serde_json::json;

    /// Every step renders to the command a user runs (the texts printed since the first
    /// release: `answer_command`, hints, recovery hints, `next`).
    #[test]
    fn each_next_step_renders_to_its_command() {
        let (plan, decision) = (Id::generate(), Id::generate());
        let apr = "apr_1";
        let cases: Vec<(Next, String)> = vec![
            (Next::PlanStatus { plan }, format!("agents plan status {plan}")),
            (Next::ExecutePlan { plan }, format!("agents plan execute {plan}")),
            (Next::ApplyPlan { plan }, format!("agents plan apply {plan}")),
            (Next::CancelPlan { plan }, format!("agents plan cancel {plan}")),
            (Next::PlanDiff { plan }, format!("agents plan diff {plan}")),
            (Next::PlanErrors { plan }, format!("agents plan errors {plan}")),
            (Next::PlanLogs { plan }, format!("agents plan logs {plan}")),
            (Next::PlanTree { plan }, format!("agents plan tree {plan}")),
            (
                Next::PromptPlan { plan },
                format!("agents plan prompt {plan} <guidance>"),
            ),
            (Next::ListApprovals, "agents plan approvals".into()),
            (Next::ListActors, "agents actor list".into()),
            (
                Next::decide(apr, "spawn"),
                "agents plan decide apr_1 --option spawn".into(),
            ),
            (
                Next::RaiseBudget {
                    approval: apr.into(),
                },
                "agents plan decide apr_1 --max-cost-usd USD (or --max-tokens N)".into(),
            ),
            (
                Next::Reject {
                    approval: apr.into(),
                },
                "agents plan reject apr_1 --reason TEXT".into(),
            ),
            (
                Next::Correct {
                    mode: CorrectionMode::Append,
                    decision,
                },
                format!("agents plan correct --mode append -g <guidance> {decision}"),
            ),
            (
                Next::CorrectInPlan {
                    mode: CorrectionMode::Revert,
                    plan,
                },
                format!(
                    "agents plan correct --mode revert -g <guidance> <decision> (the decisions: agents plan tree {plan})"
                ),
            ),
            (
                Next::ConfigUnset {
                    key: "automation-profile".into(),
                },
                "agents config unset automation-profile".into(),
            ),
            (
                Next::either(
                    Next::decide(apr, "approve"),
                    Next::Reject {
                        approval: apr.into(),
                    },
                ),
                "agents plan decide apr_1 --option approve (or: agents plan reject apr_1 --reason TEXT)"
                    .into(),
            ),
        ];
        for (next, text) in cases {
            assert_eq!(command(&next), text, "{next:?}");
        }
    }

    /// The global options are repeated after the program name, and only there.
    #[test]
    fn a_step_for_this_invocation_repeats_the_global_options() {
        let globals = vec!["--data-dir".to_string(), "/my data".to_string()];
        let either = Next::either(
            Next::decide("apr_1", "approve"),
            Next::Reject {
                approval: "apr_1".into(),
            },
        );
        assert_eq!(
            super::super::with_globals(&globals, &rest(&either)),
            format!(
                "{} --data-dir '/my data' plan decide apr_1 --option approve (or: agents plan reject apr_1 --reason TEXT)",
                super::super::bin_name()
            )
        );
    }

    /// An approval's answer follows from its kind (and, for gates and errors, the phase).
    #[test]
    fn an_approvals_answer_command_follows_from_its_kind() {
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        let id = plan.plan_id;
        let answer = |kind: ApprovalKind, context: serde_json::Value| {
            let mut a = Approval::new(id, kind, "?", jiff::Timestamp::now());
            a.approval_id = "apr_1".into();
            a.context = context;
            command(&a.next())
        };
        let cases = [
            (ApprovalKind::PhaseGate, json!({"gate": "strategize"}), format!("agents plan execute {id}")),
            (ApprovalKind::PhaseGate, json!({"gate": "execute"}), format!("agents plan execute {id}")),
            (ApprovalKind::PhaseGate, json!({"gate": "apply"}), format!("agents plan apply {id}")),
            (ApprovalKind::Decision, json!({}), "agents plan decide apr_1 --option N".into()),
            (ApprovalKind::ChildSpawn, json!({}), "agents plan decide apr_1 --option spawn".into()),
            (ApprovalKind::Errored, json!({"phase": "strategize"}), format!("agents plan execute {id}")),
            (ApprovalKind::Errored, json!({"phase": "execute"}), format!("agents plan execute {id}")),
            (ApprovalKind::Errored, json!({"phase": "apply"}), format!("agents plan apply {id}")),
            (ApprovalKind::TransientFailure, json!({"phase": "execute"}), format!("agents plan execute {id}")),
            (ApprovalKind::ErrorRecovery, json!({"phase": "execute"}), format!("agents plan execute {id}")),
            (
                ApprovalKind::Budget,
                json!({"phase": "execute"}),
                "agents plan decide apr_1 --max-cost-usd USD (or --max-tokens N)".into(),
            ),
            (
                ApprovalKind::ToolApproval,
                json!({}),
                "agents plan decide apr_1 --option approve (or: agents plan reject apr_1 --reason TEXT)".into(),
            ),
            (ApprovalKind::InvariantViolation, json!({}), "agents plan decide apr_1 --option accept".into()),
        ];
        for (kind, context, text) in cases {
            assert_eq!(answer(kind, context.clone()), text, "{kind} {context}");
        }
    }

    /// An invariant violation's context prints the commands of its `correct` and `cancel`
    /// options where the engine once stored them: after `attempt`, and last; a context that
    /// still holds them (raised by an older version) prints the same.
    #[test]
    fn a_violations_context_names_its_correct_and_cancel_commands() {
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        let decision = Id::generate();
        let mut a = Approval::new(
            plan.plan_id,
            ApprovalKind::InvariantViolation,
            "invariant violated",
            jiff::Timestamp::now(),
        );
        a.approval_id = "apr_1".into();
        a.context = json!({"invariant_id": "inv_1", "step_decision_id": decision.to_string(), "phase": "execute", "attempt": 1});
        let printed = approval_context(&a);
        let keys: Vec<&str> = printed
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "invariant_id",
                "step_decision_id",
                "phase",
                "attempt",
                "correct_command",
                "cancel_command"
            ]
        );
        assert_eq!(
            printed["correct_command"],
            format!("agents plan correct --mode revert -g <guidance> {decision}")
        );
        assert_eq!(
            printed["cancel_command"],
            "agents plan decide apr_1 --option cancel"
        );
        let mut old = a.clone();
        old.context = printed.clone();
        assert_eq!(approval_context(&old), printed);
        // Found before Apply: no one step to correct.
        a.context = json!({"step_decision_id": null, "attempt": 1});
        assert_eq!(
            approval_context(&a)["correct_command"],
            serde_json::Value::Null
        );
        // Another kind's context is printed as stored.
        a.kind = ApprovalKind::Decision;
        assert_eq!(approval_context(&a), a.context);
    }
}
