//! The built-in estimation actor `builtin/usage-estimator` (spec section 10, "cost_estimate
//! and risk_estimate"): after Strategize, estimates the tokens and cost of a plan and of each
//! of its executable decisions from the usage recorded for the same action's earlier plans
//! (their median and range), and the risk as the share of those plans that errored or were
//! cancelled. Without history it says so instead of guessing. Informational only.

use serde::{Deserialize, Serialize};

use crate::domain::id::Id;
use crate::domain::plan::Plan;
use crate::store::{Store, StoreError};

/// The built-in estimator's name.
pub const USAGE_ESTIMATOR: &str = "builtin/usage-estimator";

/// A median and the range around it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest recorded value.
    pub min: f64,
    /// The largest recorded value.
    pub max: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    pub fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Some(Spread {
            median,
            min: values[0],
            max: values[n - 1],
        })
    }

    fn times(self, k: f64) -> Spread {
        Spread {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
        }
    }
}

/// What the estimator says about a plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Estimate {
    /// The estimator (`builtin/usage-estimator`, or the plan's model estimation actor).
    pub estimator: String,
    /// Earlier plans of the action with recorded usage.
    pub history_plans: usize,
    /// Tokens of the whole plan (the earlier plans' totals), if there is history.
    pub plan_tokens: Option<Spread>,
    /// Cost of the whole plan in US dollars, if the earlier plans were all priced.
    pub plan_cost_usd: Option<Spread>,
    /// Tokens per executable decision (earlier steps' totals).
    pub step_tokens: Option<Spread>,
    /// Cost per executable decision in US dollars.
    pub step_cost_usd: Option<Spread>,
    /// Executable decisions of this plan.
    pub steps: usize,
    /// Share of the earlier plans that errored or were cancelled (0 to 1).
    pub risk: Option<f64>,
    /// One line for the user.
    pub summary: String,
    /// Why this is the built-in's estimate although the plan names a model estimation actor
    /// (it failed or gave no valid answer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

/// Estimates `plan` from its action's earlier plans.
///
/// # Errors
/// [`StoreError`].
pub fn estimate(store: &Store, plan: &Plan) -> Result<Estimate, StoreError> {
    let earlier = store.earlier_plans_of_action(&plan.action_name, &plan.plan_id)?;
    let mut plan_tokens = Vec::new();
    let mut plan_cost = Vec::new();
    let mut all_priced = true;
    let mut step_tokens = Vec::new();
    let mut step_cost = Vec::new();
    let mut failed = 0usize;
    for (id, ended_badly) in &earlier {
        let usage = store.usage_for_plan(id)?;
        if usage.calls == 0 {
            continue;
        }
        failed += usize::from(*ended_badly);
        plan_tokens.push((usage.input_tokens + usage.output_tokens) as f64);
        match usage.cost_usd {
            Some(c) => plan_cost.push(c),
            None => all_priced = false,
        }
        for (decision, u) in store.usage_by_decision(id)? {
            if decision.is_none() || u.calls == 0 {
                continue;
            }
            step_tokens.push((u.input_tokens + u.output_tokens) as f64);
            if let Some(c) = u.cost_usd {
                step_cost.push(c);
            }
        }
    }
    let history = plan_tokens.len();
    let steps = executable_steps(store, &plan.plan_id)?;
    let step_tokens = Spread::of(step_tokens);
    let step_cost = Spread::of(step_cost);
    let tokens = Spread::of(plan_tokens);
    let cost = if all_priced {
        Spread::of(plan_cost)
    } else {
        None
    };
    let summary = match tokens {
        None => format!(
            "no history: no earlier plan of {} recorded model usage, so there is nothing to estimate from",
            plan.action_name
        ),
        Some(t) => format!(
            "est. {:.0} tokens (range {:.0} to {:.0}){} from {history} earlier plan{}",
            t.median,
            t.min,
            t.max,
            cost.map(|c| format!(", ${:.4} (range ${:.4} to ${:.4})", c.median, c.min, c.max))
                .unwrap_or_else(|| ", cost unknown".into()),
            if history == 1 { "" } else { "s" }
        ),
    };
    Ok(Estimate {
        estimator: USAGE_ESTIMATOR.into(),
        history_plans: history,
        plan_tokens: tokens,
        plan_cost_usd: cost,
        step_tokens,
        step_cost_usd: step_cost,
        steps,
        risk: (history > 0).then(|| failed as f64 / history as f64),
        summary,
        warning: None,
    })
}

/// The cost of re-running `steps` of a plan, from what they used when they last ran.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct RerunCost {
    /// Tokens the steps used.
    pub tokens: u64,
    /// Their cost in US dollars; `None` when any of their calls is unpriced.
    pub cost_usd: Option<f64>,
}

/// What re-running `steps` of `plan_id` is estimated to cost: their recorded usage.
///
/// # Errors
/// [`StoreError`].
pub fn rerun_cost(store: &Store, plan_id: &Id, steps: &[Id]) -> Result<RerunCost, StoreError> {
    let mut out = RerunCost {
        tokens: 0,
        cost_usd: Some(0.0),
    };
    for s in steps {
        let u = store.usage_for_decision(plan_id, &s.to_string())?;
        out.tokens += u.input_tokens + u.output_tokens;
        out.cost_usd = match (out.cost_usd, u.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            _ => None,
        };
    }
    Ok(out)
}

/// The plan's current executable decisions (its steps).
pub(crate) fn executable_steps(store: &Store, plan_id: &Id) -> Result<usize, StoreError> {
    Ok(store
        .decisions(plan_id)?
        .iter()
        .filter(|d| d.is_current() && d.step.is_some())
        .count())
}

/// The estimate scaled to this plan's steps when per-step history exists.
pub fn for_steps(e: &Estimate) -> Option<Spread> {
    e.step_tokens.map(|s| s.times(e.steps as f64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value_and_the_range_its_ends() {
        let s = Spread::of(vec![30.0, 10.0, 20.0]).unwrap();
        assert_eq!((s.median, s.min, s.max), (20.0, 10.0, 30.0));
        assert_eq!(Spread::of(vec![10.0, 20.0]).unwrap().median, 15.0);
        assert!(Spread::of(vec![]).is_none());
    }
}
