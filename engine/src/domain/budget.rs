//! A plan's budget (spec section 27, cost): the limits `max-cost-usd` and `max-tokens` frozen on
//! the plan. Checking calls against it lives in `crate::actors::budget`.

use serde::{Deserialize, Serialize};

/// What a plan may spend; `None` is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PlanBudget {
    /// US dollars over all model calls of the plan (priced calls only).
    pub max_cost_usd: Option<f64>,
    /// Input plus output tokens over all model calls of the plan.
    pub max_tokens: Option<u64>,
}

impl PlanBudget {
    /// Whether any limit is set.
    pub fn is_set(&self) -> bool {
        self.max_cost_usd.is_some() || self.max_tokens.is_some()
    }

    /// `self` with the limits `other` sets replacing these.
    pub fn raised(self, other: PlanBudget) -> PlanBudget {
        PlanBudget {
            max_cost_usd: other.max_cost_usd.or(self.max_cost_usd),
            max_tokens: other.max_tokens.or(self.max_tokens),
        }
    }
}
