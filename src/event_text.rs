//! One line of plain English for a stored event, shared by `plan events` and the TUI's live
//! area (spec section 28, "Observability": every phase emits events a person can read).

use cleveragents_engine::domain::event::{EventKind, PlanInterrupted, StateChanged};

/// `interrupted in execute by user (Ctrl-C), queued`: the reason only where it says more
/// than the word itself.
fn interrupted(p: &PlanInterrupted) -> String {
    let mut line = format!("interrupted in {}", p.phase);
    if let Some(by) = &p.by {
        line.push_str(&format!(" by {by}"));
    } else if let Some(Some(owner)) = &p.previous_owner {
        line.push_str(&format!(
            ": its process {} on {} ({}) is gone",
            owner.pid, owner.host, owner.kind
        ));
    }
    let reason = one_line(&p.reason);
    if !reason.is_empty() && reason != "interrupted" {
        line.push_str(&format!(" ({reason})"));
    }
    line.push_str(&format!(", {}", p.state));
    line
}

/// What `kind` says happened, in one line.
pub fn summary(kind: &EventKind) -> String {
    use EventKind as K;
    match kind {
        K::PlanCreated(p) => format!("plan created from {}", p.action),
        K::StrategizeStarted(p) => format!("Strategize started ({})", p.actor),
        K::StrategizeDecisions(p) => format!("{} decision(s) recorded", p.count),
        K::StrategizeComplete(p) => format!("Strategize recorded {} decision(s)", p.decisions),
        K::EstimateRecorded(_) => "estimate recorded".to_string(),
        K::ExecuteStarted(p) => format!("Execute started: {} step(s)", p.steps),
        K::ExecuteStep(p) => match &p.error {
            Some(e) => format!("{}: {} ({})", p.step, p.status, one_line(e)),
            None => format!("{}: {}", p.step, p.status),
        },
        K::ExecuteComplete(p) => format!("Execute complete: {} step(s)", p.steps),
        K::ApplyStarted(_) => "Apply started".to_string(),
        K::ApplyComplete(p) => format!(
            "applied: {} file(s), +{} -{}",
            p.files, p.additions, p.deletions
        ),
        K::ApprovalRequested(p) => format!(
            "waiting for approval ({}): {}",
            p.kind,
            one_line(&p.summary)
        ),
        K::ApprovalResolved(p) => format!("approval {} {}", p.approval_id, p.status),
        K::PlanErrored(p) => format!("errored in {}: {}", p.phase, one_line(&p.message)),
        K::PlanCancelled(p) => format!("cancelled: {}", one_line(&p.reason)),
        K::PlanInterrupted(p) => interrupted(p),
        K::StateChanged(s) => state_changed(s),
        K::ChildSpawned(p) => format!(
            "child plan {} spawned ({})",
            short(&p.child_plan_id),
            p.action
        ),
        K::ChildStarted(p) => format!("child plan {} started", short(&p.child_plan_id)),
        K::ChildFinished(p) => format!("child plan {} {}", short(&p.child_plan_id), p.status),
        K::ChildMerged(p) => format!(
            "child plan {} merged: {}",
            short(&p.child_plan_id),
            p.outcome
        ),
        K::InvariantChecked(p) => format!(
            "invariants checked {}: {} checked, {} not machine-checked",
            p.step,
            p.checked.len(),
            p.not_checked.len()
        ),
        K::InvariantViolated(p) => {
            format!("{} invariant(s) violated {}", p.violations.len(), p.step)
        }
        K::PlanExported(p) => match (&p.branch, &p.patch) {
            (Some(b), _) => format!("exported {} file(s) to branch {b}", p.files_changed),
            (None, Some(f)) => format!("exported {} file(s) to {f}", p.files_changed),
            (None, None) => format!("exported {} file(s)", p.files_changed),
        },
        K::ReviewMarked(p) => format!("{} review item(s) marked {}", p.items.len(), p.mark),
        K::SandboxCleaned(p) => format!("sandbox of {} {}: {}", p.resource, p.action, p.reason),
        K::RegistryChanged(p) => {
            format!("{} {} {}", p.registry.replace('_', " "), p.name, p.change)
        }
        K::Raw(r) => r.event_type.as_str().replace('_', " "),
    }
}

fn state_changed(s: &StateChanged) -> String {
    match s {
        StateChanged::Correction(c) => {
            format!("corrected ({}): attempt {}", c.mode, short(&c.attempt_id))
        }
        StateChanged::Rollback(r) => {
            format!("rolled back to checkpoint {}", short(&r.checkpoint_id))
        }
        StateChanged::ChildSpawnAnswered(c) => format!("child spawn {}", c.child_spawn),
        StateChanged::DecisionRecorded(d) => {
            format!("{} decision recorded by {}", d.decision_type, d.by)
        }
        StateChanged::Transition(t) => {
            let at = match (t.phase, t.state) {
                (Some(p), Some(s)) => format!("now {p}/{s}"),
                (Some(p), None) => format!("now in {p}"),
                (None, Some(s)) => format!("now {s}"),
                (None, None) => "state changed".to_string(),
            };
            match &t.reason {
                Some(r) => format!("{at} ({})", one_line(r)),
                None => at,
            }
        }
    }
}

fn short(id: &str) -> &str {
    &id[..id.len().min(8)]
}

/// `text` on one line, at most 120 characters.
fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(120) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cleveragents_engine::domain::event::LeaseOwner;
    use cleveragents_engine::domain::{Phase, ProcessingState};

    #[test]
    fn an_interruption_says_who_or_what_stopped_the_plan_not_the_word_twice() {
        let by_user = PlanInterrupted {
            phase: Phase::Execute,
            state: ProcessingState::Queued,
            reason: "interrupted".into(),
            previous_owner: None,
            by: Some("user (Ctrl-C)".into()),
            handover: false,
        };
        assert_eq!(
            summary(&EventKind::PlanInterrupted(by_user)),
            "interrupted in execute by user (Ctrl-C), queued"
        );
        let vanished = PlanInterrupted {
            phase: Phase::Strategize,
            state: ProcessingState::Queued,
            reason: "interrupted".into(),
            previous_owner: Some(Some(LeaseOwner {
                pid: 4242,
                host: "box".into(),
                kind: "execute".into(),
            })),
            by: None,
            handover: false,
        };
        assert_eq!(
            summary(&EventKind::PlanInterrupted(vanished)),
            "interrupted in strategize: its process 4242 on box (execute) is gone, queued"
        );
    }
}
