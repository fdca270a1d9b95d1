//! System prompts: rendering actor templates (minijinja), the compiled-in role prompts of
//! model actors, and the schemas of the role tools (`record_decision`, `finish_strategy`,
//! `request_decision`).
//!
//! Spec sections 16 (`system_prompt` is a Jinja template over the actor's context), 08 (the
//! decision record) and 10/11 (strategist and executor roles). A role prompt is used unless the
//! actor's `system-prompt` overrides it ([`role_template`]).

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::messages::ToolSpec;

/// The strategist's compiled-in prompt template.
pub const STRATEGIST_TEMPLATE: &str = include_str!("prompts/strategist.j2");
/// The executor's compiled-in prompt template.
pub const EXECUTOR_TEMPLATE: &str = include_str!("prompts/executor.j2");
/// The invariant reconciler's compiled-in system prompt.
pub const INVARIANTS_TEMPLATE: &str = include_str!("prompts/invariants.j2");
/// The invariant actor's prompt when it checks a change against free-text invariants.
pub const INVARIANT_CHECK_TEMPLATE: &str = include_str!("prompts/invariant_check.j2");
/// The compiled-in estimation prompt (a model `--estimation-actor`, spec section 10).
pub const ESTIMATOR_TEMPLATE: &str = include_str!("prompts/estimator.j2");

/// A template that does not render.
#[derive(Debug, Clone, thiserror::Error)]
#[error("the system prompt template does not render: {message}")]
pub struct PromptError {
    /// minijinja's description, with the line.
    pub message: String,
}

/// Renders `template` with the top-level variables of `vars` (a JSON object). Printing an
/// undefined variable is an error (a misspelt `{{ contxt.x }}` is caught); testing one with
/// `{% if %}` is allowed.
///
/// # Errors
/// [`PromptError`] naming the problem and its line.
pub fn render(template: &str, vars: &Value) -> Result<String, PromptError> {
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::SemiStrict);
    env.render_str(
        template,
        minijinja::Value::from(minijinja::value::Serde(vars)),
    )
    .map_err(|e| {
        let mut message = e.to_string();
        if let Some(line) = e.line()
            && !message.contains("line")
        {
            message.push_str(&format!(" (line {line})"));
        }
        PromptError { message }
    })
}

/// The role a model actor plays in a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Strategize: records decisions with read-only tools.
    Strategist,
    /// Execute: carries out one step with the phase's tools.
    Executor,
    /// Strategize, first: reconciles the plan's candidate invariants.
    InvariantReconciler,
    /// After a step and before Apply: judges free-text invariants against the change.
    InvariantChecker,
    /// After Strategize: estimates the plan's cost and risk from its decision tree.
    Estimator,
}

/// The template for `role`: the actor's own `system-prompt` when it has one, else the
/// compiled-in role prompt.
pub fn role_template(role: Role, actor_override: Option<&str>) -> &str {
    match (actor_override, role) {
        (Some(own), _) => own,
        (None, Role::Strategist) => STRATEGIST_TEMPLATE,
        (None, Role::Executor) => EXECUTOR_TEMPLATE,
        (None, Role::InvariantReconciler) => INVARIANTS_TEMPLATE,
        (None, Role::InvariantChecker) => INVARIANT_CHECK_TEMPLATE,
        (None, Role::Estimator) => ESTIMATOR_TEMPLATE,
    }
}

/// The decision types a strategist may record. `prompt_definition` (the root) and
/// `invariant_enforced` are recorded by the engine; `error_recovery`, `validation_response` and
/// `user_intervention` arise during execution.
pub const STRATEGIST_DECISION_TYPES: [&str; 6] = [
    "strategy_choice",
    "implementation_choice",
    "resource_selection",
    "subplan_spawn",
    "subplan_parallel_spawn",
    "tool_invocation",
];

/// `record_decision`: the spec's decision record as the model fills it (spec section 08),
/// with the actor's own keys for `parent` and `depends_on` (the engine maps them to ids).
pub fn record_decision_tool() -> ToolSpec {
    ToolSpec {
        name: "record_decision".into(),
        description: "Record one decision of the strategy: a choice the task leaves open, \
            the option chosen, the alternatives, your confidence and why. Decisions carried \
            out as a step of work include `step`."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "key": {"type": "string", "minLength": 1, "description": "Your own short key for this decision (d1, d2, ...), unique in this strategy."},
                "decision_type": {"type": "string", "enum": STRATEGIST_DECISION_TYPES},
                "question": {"type": "string", "minLength": 1, "description": "The question this decision answers."},
                "chosen_option": {"type": "string", "minLength": 1, "description": "What was decided."},
                "alternatives_considered": {"type": "array", "items": {"type": "string"}, "description": "Other options evaluated."},
                "confidence_score": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "rationale": {"type": "string", "minLength": 1, "description": "Why this option was chosen."},
                "parent": {"type": ["string", "null"], "description": "Key of the decision this one refines."},
                "depends_on": {"type": "array", "items": {"type": "string"}, "description": "Keys of decisions that must be carried out before this one."},
                "step": {
                    "type": "object",
                    "additionalProperties": false,
                    "properties": {
                        "instructions": {"type": "string", "minLength": 1},
                        "expected_outputs": {"type": "array", "items": {"type": "string"}, "description": "Files (paths) the step must leave in the sandbox; a missing one fails the step."},
                        "optional_outputs": {"type": "array", "items": {"type": "string"}, "description": "Files the step may leave out: a missing one is only a warning."}
                    },
                    "required": ["instructions"]
                }
            },
            "required": ["key", "decision_type", "question", "chosen_option", "rationale"]
        }),
    }
}

/// `finish_strategy`: ends Strategize with a summary.
pub fn finish_strategy_tool() -> ToolSpec {
    ToolSpec {
        name: "finish_strategy".into(),
        description: "Finish the strategy once the recorded decisions cover the whole task.".into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {"summary": {"type": "string", "minLength": 1}},
            "required": ["summary"]
        }),
    }
}

/// `create_subplan`: the executor spawns a child plan of an action.
pub fn create_subplan_tool() -> ToolSpec {
    ToolSpec {
        name: "create_subplan".into(),
        description: "Spawn a child plan: a registered action applied with arguments, in a             sandbox branched from this plan's current sandbox; its changes are merged back into             this plan's sandbox when it finishes. Without `parallel_group` it runs now and the             result (merged files or the error) is returned. Calls sharing a `parallel_group`             are queued and run together, concurrently, when you call another tool or finish."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "action": {"type": "string", "minLength": 1, "description": "The action's name (local/update-docs)."},
                "args": {"type": "object", "description": "The action's arguments by name."},
                "parallel_group": {"type": "string", "minLength": 1, "description": "A label; children with the same label run concurrently."},
                "guidance": {"type": "string", "description": "Guidance for the child's strategy."}
            },
            "required": ["action"]
        }),
    }
}

/// `request_decision`: the executor asks the user a question with options.
pub fn request_decision_tool() -> ToolSpec {
    ToolSpec {
        name: "request_decision".into(),
        description: "Ask the user to decide something this step cannot decide alone. The \
            run pauses until the user answers."
            .into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "question": {"type": "string", "minLength": 1},
                "options": {"type": "array", "items": {"type": "string"}, "minItems": 2},
                "recommended": {"type": "string", "description": "The option you would choose."},
                "context": {"type": "string", "description": "What the user needs to know to decide."}
            },
            "required": ["question", "options"]
        }),
    }
}

/// The `step` of an executable decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepDraft {
    /// What the executor does.
    pub instructions: String,
    /// What it produces.
    #[serde(default)]
    pub expected_outputs: Vec<String>,
    /// What it may produce (a missing one is only a warning).
    #[serde(default)]
    pub optional_outputs: Vec<String>,
}

impl From<&StepDraft> for crate::domain::decision::Step {
    fn from(s: &StepDraft) -> Self {
        Self {
            instructions: s.instructions.clone(),
            expected_outputs: s.expected_outputs.clone(),
            optional_outputs: s.optional_outputs.clone(),
        }
    }
}

/// A decision as the strategist recorded it (the arguments of `record_decision`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecisionDraft {
    /// The actor's own key.
    pub key: String,
    /// One of [`STRATEGIST_DECISION_TYPES`].
    pub decision_type: String,
    /// The question.
    pub question: String,
    /// The choice.
    pub chosen_option: String,
    /// Alternatives evaluated.
    #[serde(default)]
    pub alternatives_considered: Vec<String>,
    /// 0.0 to 1.0, if given.
    #[serde(default)]
    pub confidence_score: Option<f64>,
    /// Why.
    pub rationale: String,
    /// Key of the parent decision.
    #[serde(default)]
    pub parent: Option<String>,
    /// Keys of decisions this one depends on.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// The step, for an executable decision.
    #[serde(default)]
    pub step: Option<StepDraft>,
}

/// The decisions recorded so far in one strategy, keyed by the actor's keys in order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StrategyDraft {
    /// Decisions in the order recorded.
    pub decisions: Vec<DecisionDraft>,
}

impl StrategyDraft {
    /// Validates `args` of a `record_decision` call and adds the decision. `parent` and
    /// `depends_on` must name keys recorded earlier, so the result is acyclic.
    ///
    /// # Errors
    /// A message for the model saying which field is wrong and how to fix it.
    pub fn record(&mut self, args: Value) -> Result<&DecisionDraft, String> {
        let d: DecisionDraft = serde_json::from_value(args)
            .map_err(|e| format!("invalid decision: {e}; see the schema of record_decision"))?;
        let blank = |field: &str, v: &str| {
            if v.trim().is_empty() {
                Err(format!("invalid decision: `{field}` is empty"))
            } else {
                Ok(())
            }
        };
        blank("key", &d.key)?;
        blank("question", &d.question)?;
        blank("chosen_option", &d.chosen_option)?;
        blank("rationale", &d.rationale)?;
        if !STRATEGIST_DECISION_TYPES.contains(&d.decision_type.as_str()) {
            return Err(format!(
                "invalid decision: `decision_type` is `{}`; use one of {}",
                d.decision_type,
                STRATEGIST_DECISION_TYPES.join(", ")
            ));
        }
        if let Some(c) = d.confidence_score
            && !(0.0..=1.0).contains(&c)
        {
            return Err(format!(
                "invalid decision: `confidence_score` is {c}; give a number from 0 to 1"
            ));
        }
        if let Some(step) = &d.step {
            blank("step.instructions", &step.instructions)?;
        }
        let known = |k: &str| self.decisions.iter().any(|x| x.key == k);
        if known(&d.key) {
            return Err(format!(
                "invalid decision: key `{}` is already used; give this decision a new key",
                d.key
            ));
        }
        if let Some(p) = &d.parent
            && !known(p)
        {
            return Err(format!(
                "invalid decision: `parent` is `{p}`, which names no decision recorded before; record the parent first"
            ));
        }
        if let Some(missing) = d.depends_on.iter().find(|k| !known(k)) {
            return Err(format!(
                "invalid decision: `depends_on` names `{missing}`, which is no decision recorded before; record it first"
            ));
        }
        self.decisions.push(d);
        Ok(self.decisions.last().expect("just pushed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_strategist_prompt_renders_description_done_and_invariants() {
        let text = render(
            STRATEGIST_TEMPLATE,
            &json!({
                "description": "Add a --verbose flag",
                "definition_of_done": "cargo test passes",
                "invariants": ["public API unchanged"],
            }),
        )
        .unwrap();
        assert!(text.contains("Add a --verbose flag"));
        assert!(text.contains("cargo test passes"));
        assert!(text.contains("- public API unchanged"));
        let without = render(STRATEGIST_TEMPLATE, &json!({"description": "x"})).unwrap();
        assert!(without.contains("(none given)"), "{without}");
        assert!(!without.contains("Invariants"));
    }

    #[test]
    fn the_executor_prompt_renders_the_step_and_guidance() {
        let text = render(
            EXECUTOR_TEMPLATE,
            &json!({
                "decision": {"question": "Where?", "chosen_option": "in main.rs", "rationale": "simplest"},
                "step": {"instructions": "Edit main.rs", "expected_outputs": ["src/main.rs"]},
                "definition_of_done": "done",
                "invariants": [],
                "guidance": ["keep it short"],
            }),
        )
        .unwrap();
        assert!(text.contains("Edit main.rs") && text.contains("- src/main.rs"));
        assert!(text.contains("- keep it short"));
    }

    #[test]
    fn an_actor_prompt_overrides_the_role_prompt_and_misspelt_variables_are_errors() {
        let own = "You review {{ context.task_description }}.";
        assert_eq!(role_template(Role::Executor, Some(own)), own);
        let out = render(own, &json!({"context": {"task_description": "PR 7"}})).unwrap();
        assert_eq!(out, "You review PR 7.");
        let err = render("{{ contxt.task }}", &json!({})).unwrap_err();
        assert!(err.message.contains("undefined"), "{}", err.message);
    }

    #[test]
    fn decisions_are_validated_with_errors_the_model_can_act_on() {
        let mut s = StrategyDraft::default();
        let base = json!({"key": "d1", "decision_type": "strategy_choice", "question": "How?",
            "chosen_option": "Incrementally", "rationale": "safer", "confidence_score": 0.8});
        s.record(base.clone()).unwrap();
        assert!(s.record(base.clone()).unwrap_err().contains("already used"));
        let mut bad = base.clone();
        bad["key"] = json!("d2");
        bad["depends_on"] = json!(["d9"]);
        assert!(s.record(bad).unwrap_err().contains("`d9`"));
        let mut bad = base.clone();
        bad["key"] = json!("d2");
        bad["confidence_score"] = json!(1.5);
        assert!(s.record(bad).unwrap_err().contains("from 0 to 1"));
        let mut bad = base.clone();
        bad["key"] = json!("d2");
        bad["colour"] = json!("red");
        assert!(s.record(bad).unwrap_err().contains("colour"));
        let mut ok = base;
        ok["key"] = json!("d2");
        ok["decision_type"] = json!("implementation_choice");
        ok["parent"] = json!("d1");
        ok["depends_on"] = json!(["d1"]);
        ok["step"] = json!({"instructions": "edit a.txt", "expected_outputs": ["a.txt"]});
        let d = s.record(ok).unwrap();
        assert_eq!(d.step.as_ref().unwrap().expected_outputs, ["a.txt"]);
        assert_eq!(s.decisions.len(), 2);
    }

    #[test]
    fn role_tool_schemas_require_the_decision_record_fields() {
        let schema = record_decision_tool().input_schema;
        let required: Vec<&str> = schema["required"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(
            required,
            [
                "key",
                "decision_type",
                "question",
                "chosen_option",
                "rationale"
            ]
        );
        for field in [
            "alternatives_considered",
            "confidence_score",
            "parent",
            "depends_on",
            "step",
        ] {
            assert!(schema["properties"].get(field).is_some(), "{field}");
        }
        assert_eq!(
            finish_strategy_tool().input_schema["required"][0],
            "summary"
        );
        assert_eq!(
            request_decision_tool().input_schema["properties"]["options"]["minItems"],
            2
        );
    }
}
