//! What a plan's frozen automation profile lets happen without a human (spec section
//! 27).
//!
//! The profile is frozen on the plan at `plan use` (`effective_profile_snapshot.flags`); a
//! plan without a snapshot (older rows) is treated as `manual`.

use serde::Serialize;

use crate::domain::{Phase, Plan};
use crate::registry::profiles::{self, Flags};

/// The gates of one plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Gates {
    /// The frozen flags.
    pub flags: Flags,
}

/// Flags the engine reads but does not act on yet, with what happens instead (shown by
/// `plan status`): none now.
pub const NOT_YET_SUPPORTED: [(&str, &str); 0] = [];

impl Gates {
    /// The gates of `plan` (its frozen flags; `manual` when it has none).
    pub fn of(plan: &Plan) -> Self {
        let flags = plan
            .effective_profile_snapshot
            .as_ref()
            .and_then(|s| s.get("flags"))
            .and_then(|f| serde_json::from_value::<Flags>(f.clone()).ok())
            .or_else(|| profiles::builtin("manual").map(|p| p.flags))
            .expect("manual is a built-in profile");
        Self { flags }
    }

    /// Whether the phase after `from` (complete) starts without a human: execute after
    /// strategize (`auto_execute`), apply after execute (`auto_apply`).
    pub fn auto_after(&self, from: Phase) -> bool {
        match from {
            Phase::Strategize => self.flags.auto_execute,
            Phase::Execute => self.flags.auto_apply,
            Phase::Apply | Phase::Applied => false,
        }
    }

    /// Whether Strategize starts right after `plan use`.
    pub fn auto_strategize(&self) -> bool {
        self.flags.auto_strategize
    }

    /// Whether an actor's multi-option decision in `phase` is taken without asking.
    pub fn auto_decisions(&self, phase: Phase) -> bool {
        match phase {
            Phase::Strategize => self.flags.auto_decisions_strategize,
            _ => self.flags.auto_decisions_execute,
        }
    }

    /// How many times a failing required validation sends the step back to the execution
    /// actor with the failure output (`auto_validation_fix`: 2, else 0).
    pub fn validation_fix_rounds(&self) -> u32 {
        if self.flags.auto_validation_fix { 2 } else { 0 }
    }

    /// How many times a failed step is rolled back to its start and retried
    /// (`auto_checkpoint_restore`: once).
    pub fn step_retries(&self) -> u32 {
        u32::from(self.flags.auto_checkpoint_restore)
    }

    /// Whether a step that failed after its retries sends the plan back to re-decide the
    /// failed step's decision and its downstream subtree (`auto_strategy_revision`, within
    /// `super::revision::REVISION_LIMIT`).
    pub fn auto_strategy_revision(&self) -> bool {
        self.flags.auto_strategy_revision
    }
}

/// The confidence below which a decision goes to a human even when its phase's
/// `auto_decisions_*` flag is on (spec section 27, "Semantic Escalation"; the spec names no
/// figure).
pub const CONFIDENCE_THRESHOLD: f64 = 0.5;

/// The only profile under which semantic escalation is off: everything proceeds unattended.
pub const NO_ESCALATION_PROFILE: &str = "full-auto";

/// Why a decision must go to a human despite its profile: its confidence is below the
/// threshold (spec section 27, "Semantic Escalation").
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Escalation {
    /// The confidence the actor gave, from 0.0 to 1.0.
    pub confidence: f64,
    /// The threshold it fell below.
    pub threshold: f64,
}

impl Escalation {
    /// One line for the approval's summary (shown by `plan status`).
    pub fn describe(&self) -> String {
        format!(
            "confidence {:.2} is below the escalation threshold {:.2}",
            self.confidence, self.threshold
        )
    }
}

/// The escalation threshold of `plan`: [`CONFIDENCE_THRESHOLD`], or `None` when its frozen
/// profile is [`NO_ESCALATION_PROFILE`].
pub fn escalation_threshold(plan: &Plan) -> Option<f64> {
    let name = plan
        .effective_profile_snapshot
        .as_ref()
        .and_then(|s| s.get("name"))
        .and_then(|n| n.as_str());
    (name != Some(NO_ESCALATION_PROFILE)).then_some(CONFIDENCE_THRESHOLD)
}

/// Whether a decision with `confidence` escalates under `plan`'s profile. A decision
/// without a confidence never escalates (the actor did not say it was unsure).
pub fn escalation(plan: &Plan, confidence: Option<f64>) -> Option<Escalation> {
    let threshold = escalation_threshold(plan)?;
    let confidence = confidence?;
    (confidence < threshold).then_some(Escalation {
        confidence,
        threshold,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plan_with(profile: &str) -> Plan {
        let mut p = Plan::new("local/a", "a", jiff::Timestamp::now());
        let flags = profiles::builtin(profile).unwrap().flags;
        p.effective_profile_snapshot = Some(json!({"name": profile, "flags": flags}));
        p
    }

    #[test]
    fn the_phase_gates_follow_the_profile_table() {
        // (profile, auto_strategize, execute after strategize, apply after execute)
        let table = [
            ("locked-down", false, false, false),
            ("manual", false, false, false),
            ("supervised", true, false, false),
            ("trusted", true, true, false),
            ("autonomous", true, true, false),
            ("full-auto", true, true, true),
        ];
        for (name, strategize, execute, apply) in table {
            let g = Gates::of(&plan_with(name));
            assert_eq!(
                (
                    g.auto_strategize(),
                    g.auto_after(Phase::Strategize),
                    g.auto_after(Phase::Execute)
                ),
                (strategize, execute, apply),
                "{name}"
            );
            assert_eq!(
                g.auto_strategy_revision(),
                matches!(name, "autonomous" | "full-auto"),
                "{name}"
            );
        }
    }

    #[test]
    fn low_confidence_escalates_under_every_profile_but_full_auto() {
        for name in crate::domain::name::BUILTIN_PROFILES {
            let p = plan_with(name);
            let low = escalation(&p, Some(0.3));
            assert_eq!(low.is_none(), name == NO_ESCALATION_PROFILE, "{name}");
            assert_eq!(escalation(&p, Some(0.5)), None, "{name}: at the threshold");
            assert_eq!(escalation(&p, None), None, "{name}: no confidence given");
        }
        let e = escalation(&plan_with("trusted"), Some(0.3)).unwrap();
        assert_eq!(
            e.describe(),
            "confidence 0.30 is below the escalation threshold 0.50"
        );
    }

    #[test]
    fn a_plan_without_a_snapshot_is_manual() {
        let p = Plan::new("local/a", "a", jiff::Timestamp::now());
        assert_eq!(
            Gates::of(&p).flags,
            profiles::builtin("manual").unwrap().flags
        );
    }
}
