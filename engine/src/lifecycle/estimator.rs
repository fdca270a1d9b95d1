//! A model estimation actor (`--estimation-actor NAME`, spec section 10, "cost_estimate and
//! risk_estimate").
//!
//! When Strategize completes and the plan names an estimation actor other than
//! `builtin/usage-estimator`, that actor runs with the decision tree as its input and one
//! tool, `report_estimate`, whose answer has the built-in's shape (token and cost spreads,
//! risk, summary). An invalid answer goes back to the model as a tool error. An actor that
//! cannot run or ends without a valid answer is replaced by the built-in's estimate with a
//! `warning` saying why. The estimate is recorded as an `estimate_recorded` event, which
//! `plan status` and the execute gate show. Informational only: it never stops the plan.

use std::sync::Mutex;

use serde_json::{Value, json};

use super::model;
use super::state::commit;
use super::{Lifecycle, RunError};
use crate::actors::estimate::{self, Estimate, Spread, USAGE_ESTIMATOR};
use crate::actors::messages::ToolSpec;
use crate::actors::prompts::Role;
use crate::actors::runtime::{ToolHost, ToolOutcome};
use crate::domain::Plan;
use crate::domain::event::EstimateRecorded;
use crate::events::EventKind;
use crate::store::{Store, StoreError};

/// The one tool of a model estimator.
pub const REPORT_ESTIMATE: &str = "report_estimate";

fn spread_schema() -> Value {
    json!({
        "type": ["object", "null"],
        "additionalProperties": false,
        "properties": {
            "median": {"type": "number", "minimum": 0},
            "min": {"type": "number", "minimum": 0},
            "max": {"type": "number", "minimum": 0}
        },
        "required": ["median", "min", "max"]
    })
}

fn report_tool() -> ToolSpec {
    ToolSpec {
        name: REPORT_ESTIMATE.into(),
        description: "Report the plan's estimate: token and cost spreads (median, min, max), the risk of failure from 0 to 1, and a one-line summary.".into(),
        input_schema: json!({
            "type": "object",
            "additionalProperties": false,
            "properties": {
                "plan_tokens": spread_schema(),
                "plan_cost_usd": spread_schema(),
                "step_tokens": spread_schema(),
                "step_cost_usd": spread_schema(),
                "risk": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                "summary": {"type": "string"}
            },
            "required": ["plan_tokens", "summary"]
        }),
    }
}

/// The spread in `field` of `args` (`None` when absent or null).
fn spread(args: &Value, field: &str) -> Result<Option<Spread>, String> {
    let v = match args.get(field) {
        None | Some(Value::Null) => return Ok(None),
        Some(v) => v,
    };
    let num = |k: &str| {
        v.get(k)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or(format!("`{field}.{k}` must be a number of at least 0"))
    };
    let s = Spread {
        median: num("median")?,
        min: num("min")?,
        max: num("max")?,
    };
    if !(s.min <= s.median && s.median <= s.max) {
        return Err(format!(
            "`{field}` must have min <= median <= max (got {} <= {} <= {})",
            s.min, s.median, s.max
        ));
    }
    Ok(Some(s))
}

/// Checks a `report_estimate` answer and makes it an [`Estimate`] by `actor` for a plan
/// with `steps` executable decisions.
///
/// # Errors
/// A message naming the field that is wrong.
pub fn parse(actor: &str, steps: usize, args: &Value) -> Result<Estimate, String> {
    let plan_tokens = spread(args, "plan_tokens")?
        .ok_or("`plan_tokens` is required: the median, min and max tokens of the whole plan")?;
    let risk = match args.get("risk") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_f64()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or("`risk` must be a number from 0 to 1")?,
        ),
    };
    let summary = args
        .get("summary")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or("`summary` must be a non-empty line")?
        .to_string();
    Ok(Estimate {
        estimator: actor.to_string(),
        history_plans: 0,
        plan_tokens: Some(plan_tokens),
        plan_cost_usd: spread(args, "plan_cost_usd")?,
        step_tokens: spread(args, "step_tokens")?,
        step_cost_usd: spread(args, "step_cost_usd")?,
        steps,
        risk,
        summary,
        warning: None,
    })
}

struct EstimateTools {
    actor: String,
    steps: usize,
    answer: Mutex<Option<Estimate>>,
}

impl ToolHost for EstimateTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![report_tool()]
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if name != REPORT_ESTIMATE {
            return ToolOutcome::error(format!(
                "`{name}` is not available; answer with {REPORT_ESTIMATE}"
            ));
        }
        match parse(&self.actor, self.steps, &args) {
            Ok(e) => {
                if let Ok(mut slot) = self.answer.lock() {
                    *slot = Some(e);
                }
                ToolOutcome::finish("estimate recorded")
            }
            Err(m) => ToolOutcome::error(format!("{REPORT_ESTIMATE}: {m}")),
        }
    }
}

/// Runs the model estimator `actor` on `plan`'s decision tree.
fn ask(engine: &mut Lifecycle, plan: &Plan, actor: &str) -> Result<Estimate, String> {
    let model_actor = model::resolve(engine, plan, actor, Role::Estimator)?;
    let decisions: Vec<Value> = engine
        .store()
        .decisions(&plan.plan_id)
        .map_err(|e| e.to_string())?
        .into_iter()
        .filter(|d| d.is_current())
        .map(|d| {
            json!({
                "decision_type": d.decision_type,
                "question": d.question,
                "chosen_option": d.chosen_option,
                "instructions": d.step.as_ref().map(|s| s.instructions.clone()),
            })
        })
        .collect();
    let steps =
        estimate::executable_steps(engine.store(), &plan.plan_id).map_err(|e| e.to_string())?;
    let tools = EstimateTools {
        actor: actor.to_string(),
        steps,
        answer: Mutex::new(None),
    };
    let context = json!({"description": plan.description, "decisions": decisions});
    let prompt =
        format!("Estimate this plan of {steps} step(s) and answer with {REPORT_ESTIMATE}.");
    let run = model::run(
        engine,
        &plan.plan_id,
        None,
        &model_actor,
        model::Input {
            context,
            prompt,
            history: Vec::new(),
            ..model::Input::default()
        },
        &tools,
    )?;
    tools
        .answer
        .into_inner()
        .ok()
        .flatten()
        .ok_or_else(|| format!("it gave no valid estimate ({})", run.stop.describe()))
}

/// Runs the plan's model estimation actor, if it names one, and records its estimate (or the
/// built-in's with a warning when the actor fails). Does nothing for plans without one or
/// with `builtin/usage-estimator`.
///
/// # Errors
/// [`RunError`] for store failures only; the actor's failures become the warning.
pub fn after_strategize(engine: &mut Lifecycle, plan: &mut Plan) -> Result<(), RunError> {
    let Some(actor) = plan
        .estimation_actor
        .clone()
        .filter(|a| a != USAGE_ESTIMATOR)
    else {
        return Ok(());
    };
    engine
        .observer()
        .progress(&format!("Estimating the plan with {actor}"));
    let e = match ask(engine, plan, &actor) {
        Ok(e) => e,
        Err(why) => {
            let mut e = estimate::estimate(engine.store(), plan)?;
            e.warning = Some(format!(
                "the estimation actor {actor} failed: {why}; this is {USAGE_ESTIMATOR}'s estimate"
            ));
            e
        }
    };
    commit(
        engine.store_mut(),
        plan,
        EventKind::EstimateRecorded(EstimateRecorded { estimate: json!(e) }),
        |_| Ok(()),
    )?;
    engine.flush(&plan.plan_id)?;
    Ok(())
}

/// The plan's latest recorded estimate from its model estimation actor, if any.
///
/// # Errors
/// [`StoreError`].
pub fn recorded(store: &Store, plan: &Plan) -> Result<Option<Estimate>, StoreError> {
    let data: Option<String> = store
        .conn()
        .query_row(
            "SELECT data FROM events WHERE plan_id = ?1 AND type = 'estimate_recorded' ORDER BY seq DESC LIMIT 1",
            [plan.plan_id.to_string()],
            |r| r.get(0),
        )
        .map(Some)
        .or_else(|e| match e {
            rusqlite::Error::QueryReturnedNoRows => Ok(None),
            e => Err(e),
        })?;
    Ok(data
        .and_then(|d| serde_json::from_str::<EstimateRecorded>(&d).ok())
        .and_then(|p| serde_json::from_value(p.estimate).ok()))
}

/// The estimate to show for `plan`: its model estimator's when recorded, else the built-in's.
///
/// # Errors
/// [`StoreError`].
pub fn current(store: &Store, plan: &Plan) -> Result<Estimate, StoreError> {
    match recorded(store, plan)? {
        Some(e) => Ok(e),
        None => estimate::estimate(store, plan),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_in_the_builtins_shape_parses_and_a_bad_one_names_its_field() {
        let ok = json!({"plan_tokens": {"median": 1000, "min": 500, "max": 2000}, "risk": 0.2, "summary": "about 1k tokens"});
        let e = parse("local/est", 2, &ok).unwrap();
        assert_eq!(e.plan_tokens.unwrap().median, 1000.0);
        assert_eq!(
            (e.steps, e.risk, e.estimator.as_str()),
            (2, Some(0.2), "local/est")
        );
        let bad = json!({"plan_tokens": {"median": 10, "min": 50, "max": 20}, "summary": "x"});
        assert!(
            parse("a", 1, &bad)
                .unwrap_err()
                .contains("min <= median <= max")
        );
        let risky =
            json!({"plan_tokens": {"median": 1, "min": 1, "max": 1}, "risk": 3, "summary": "x"});
        assert!(parse("a", 1, &risky).unwrap_err().contains("`risk`"));
        assert!(
            parse("a", 1, &json!({"summary": "x"}))
                .unwrap_err()
                .contains("plan_tokens")
        );
    }
}
