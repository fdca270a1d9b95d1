//! A plan as the CLI prints it in JSON (`data.plan`, and the top level of `plan status`):
//! the face's view of the engine's [`Plan`] record.

use serde_json::{Map, Value, json};

use cleveragents_engine::domain::Plan;
use cleveragents_engine::domain::approval::Approval;
use cleveragents_engine::lifecycle::driven::Stopped;

/// A plan as the ordered map the CLI prints (the specification's `as_cli_dict` key order): ids and
/// names; phase, state, description; definition of done; projects and automation; actors;
/// arguments and invariants; execution fields; error fields; tags; timestamps; hierarchy.
/// Optional groups appear only when set; times are RFC 3339 UTC.
pub fn plan_dict(plan: &Plan) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("plan_id".into(), json!(plan.plan_id.to_string()));
    m.insert("name".into(), json!(plan.name));
    m.insert("action_name".into(), json!(plan.action_name));
    m.insert("phase".into(), json!(plan.status.phase));
    m.insert("state".into(), json!(plan.status.state));
    m.insert("attempt".into(), json!(plan.status.attempt));
    m.insert("description".into(), json!(plan.description));
    if let Some(dod) = &plan.definition_of_done {
        m.insert("definition_of_done".into(), json!(dod));
    }
    m.insert("projects".into(), json!(plan.project_links));
    if let Some(p) = &plan.automation_profile {
        m.insert("automation_profile".into(), json!(p));
    }
    m.insert("automation_level".into(), json!(plan.automation_level));
    for (key, actor) in [
        ("strategy_actor", &plan.strategy_actor),
        ("execution_actor", &plan.execution_actor),
        ("estimation_actor", &plan.estimation_actor),
        ("invariant_actor", &plan.invariant_actor),
    ] {
        if let Some(a) = actor {
            m.insert(key.into(), json!(a));
        }
    }
    if !plan.arguments.is_empty() {
        m.insert("arguments".into(), Value::Object(plan.arguments.clone()));
    }
    if !plan.invariants.is_empty() {
        m.insert("invariants".into(), json!(plan.invariants));
    }
    if let Some(c) = &plan.changeset_id {
        m.insert("changeset_id".into(), json!(c));
    }
    if !plan.sandbox_refs.is_empty() {
        m.insert("sandbox_refs".into(), json!(plan.sandbox_refs));
    }
    if let Some(v) = &plan.validation_summary {
        m.insert("validation_summary".into(), v.clone());
    }
    if let Some(d) = &plan.decision_root_id {
        m.insert("decision_root_id".into(), json!(d.to_string()));
    }
    if let Some(code) = &plan.error_code {
        m.insert("error_code".into(), json!(code));
    }
    if let Some(msg) = &plan.error_message {
        m.insert("error_message".into(), json!(msg));
    }
    if !plan.tags.is_empty() {
        m.insert("tags".into(), json!(plan.tags));
    }
    m.insert("created_at".into(), json!(plan.created_at.to_string()));
    m.insert("updated_at".into(), json!(plan.updated_at.to_string()));
    if let Some(t) = &plan.started_at {
        m.insert("started_at".into(), json!(t.to_string()));
    }
    if let Some(t) = &plan.completed_at {
        m.insert("completed_at".into(), json!(t.to_string()));
    }
    if let Some(p) = &plan.parent_plan_id {
        m.insert("parent_plan_id".into(), json!(p.to_string()));
    }
    if let Some(r) = &plan.root_plan_id {
        m.insert("root_plan_id".into(), json!(r.to_string()));
    }
    m
}

/// An approval as it appears inside `data.stopped`: its fields in record order, with the
/// context as printed ([`super::next::approval_context`]) and `answer_command` after
/// `options`, written as `agents ...` without the global options (`data.approval` and
/// `data.approvals` carry the command for this environment).
pub fn approval_record(a: &Approval) -> Value {
    let Ok(Value::Object(fields)) = serde_json::to_value(a) else {
        return Value::Null;
    };
    let mut out = Map::new();
    for (key, value) in fields {
        let value = if key == "context" {
            super::next::approval_context(a)
        } else {
            value
        };
        let options = key == "options";
        out.insert(key, value);
        if options {
            out.insert(
                "answer_command".into(),
                json!(super::next::command(&a.next())),
            );
        }
    }
    Value::Object(out)
}

/// Why driving stopped, as `data.stopped` prints it: the engine's record, its approvals as
/// [`approval_record`] and a next step as its `agents ...` command.
pub fn stopped(s: &Stopped) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    match s {
        Stopped::Gate { approval } => v["approval"] = approval_record(approval),
        Stopped::Decisions { approvals } => {
            v["approvals"] = approvals.iter().map(approval_record).collect();
        }
        Stopped::NothingToDo { next } => v["next"] = json!(super::next::command(next)),
        _ => {}
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use cleveragents_engine::domain::{Id, ProjectLink};
    use jiff::Timestamp;

    #[test]
    fn cli_dict_follows_the_seed_key_order() {
        let mut plan = Plan::new("local/code-review", "review", Timestamp::UNIX_EPOCH);
        plan.definition_of_done = Some("tests pass".into());
        plan.project_links
            .push(ProjectLink::new("local/api", None, false).unwrap());
        plan.automation_profile = Some("supervised".into());
        plan.strategy_actor = Some("local/planner".into());
        plan.arguments.insert("target".into(), json!("src"));
        plan.tags.push("nightly".into());
        plan.parent_plan_id = Some(Id::generate());
        let keys: Vec<String> = plan_dict(&plan).keys().cloned().collect();
        assert_eq!(
            keys,
            [
                "plan_id",
                "name",
                "action_name",
                "phase",
                "state",
                "attempt",
                "description",
                "definition_of_done",
                "projects",
                "automation_profile",
                "automation_level",
                "strategy_actor",
                "arguments",
                "tags",
                "created_at",
                "updated_at",
                "parent_plan_id",
            ]
        );
        assert_eq!(
            plan_dict(&plan)["created_at"],
            json!("1970-01-01T00:00:00Z")
        );
    }

    /// Inside `data.stopped` an approval keeps its record's field order, `answer_command`
    /// after `options`, written without the global options.
    #[test]
    fn a_stopped_runs_approval_names_its_answer_command_after_its_options() {
        use cleveragents_engine::domain::approval::ApprovalKind;
        let plan = Plan::new("local/a", "a", Timestamp::UNIX_EPOCH);
        let mut a = Approval::new(
            plan.plan_id,
            ApprovalKind::PhaseGate,
            "gate",
            Timestamp::UNIX_EPOCH,
        );
        a.context = json!({"gate": "apply"});
        let v = stopped(&Stopped::Gate {
            approval: Box::new(a),
        });
        assert_eq!(v["stopped"], "gate");
        let keys: Vec<&str> = v["approval"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "approval_id",
                "plan_id",
                "kind",
                "status",
                "summary",
                "context",
                "options",
                "answer_command",
                "answer",
                "created_at",
                "resolved_at"
            ]
        );
        assert_eq!(
            v["approval"]["answer_command"],
            format!("agents plan apply {}", plan.plan_id)
        );
        let next = stopped(&Stopped::NothingToDo {
            next: cleveragents_engine::domain::Next::ExecutePlan { plan: plan.plan_id },
        });
        assert_eq!(
            next,
            json!({"stopped": "nothing_to_do", "next": format!("agents plan execute {}", plan.plan_id)})
        );
    }
}
