//! Token and cost accounting: the cost of a call from the provider's configured prices, and
//! the rows that record a run's model calls (see `store::model_calls` for the rollups).
//!
//! Prices are `[providers.NAME.models."MODEL"]` `input_usd_per_mtok` /
//! `output_usd_per_mtok` (US dollars per million tokens). Without a price the cost is
//! unknown (`None`), never guessed.

use crate::engine::config::{ModelPrice, Provider};
use crate::engine::domain::id::Id;
use crate::engine::store::model_calls::NewModelCall;

use super::messages::Usage;
use super::runtime::ActorRun;

/// The cost of `usage` in US dollars, or `None` when a needed price is not configured (a
/// side with zero tokens needs no price).
pub fn cost_usd(price: Option<&ModelPrice>, usage: Usage) -> Option<f64> {
    let price = price?;
    let side = |tokens: u64, per_mtok: Option<f64>| -> Option<f64> {
        if tokens == 0 {
            return Some(0.0);
        }
        Some(tokens as f64 * per_mtok? / 1_000_000.0)
    };
    Some(
        side(usage.input_tokens, price.input_usd_per_mtok)?
            + side(usage.output_tokens, price.output_usd_per_mtok)?,
    )
}

/// Where a run's calls are accounted.
#[derive(Debug, Clone, PartialEq)]
pub struct CallContext {
    /// The run.
    pub run_id: Id,
    /// The plan the run served, if any.
    pub plan_id: Option<Id>,
    /// The decision (or step) the run served, if any.
    pub decision_id: Option<String>,
    /// The actor's name.
    pub actor: String,
}

/// The rows recording `run`'s model calls, priced with `provider`'s configured prices.
pub fn call_rows(ctx: &CallContext, provider: &Provider, run: &ActorRun) -> Vec<NewModelCall> {
    run.model_calls
        .iter()
        .map(|c| NewModelCall {
            run_id: ctx.run_id,
            plan_id: ctx.plan_id,
            decision_id: ctx.decision_id.clone(),
            actor: ctx.actor.clone(),
            provider: c.provider.clone(),
            model: c.model.clone(),
            turn: c.turn,
            attempts: c.attempts,
            input_tokens: c.usage.input_tokens,
            output_tokens: c.usage.output_tokens,
            usage_reported: c.usage_reported,
            cost_usd: if c.error.is_some() {
                Some(0.0)
            } else {
                cost_usd(provider.models.get(&c.model), c.usage)
            },
            error: c.error.clone(),
            started_at: c.started_at,
            duration_ms: c.duration_ms,
        })
        .collect()
}

/// The cost of a run: `Some` when every successful call is priced.
pub fn run_cost_usd(provider: &Provider, run: &ActorRun) -> Option<f64> {
    run.model_calls
        .iter()
        .filter(|c| c.error.is_none())
        .map(|c| cost_usd(provider.models.get(&c.model), c.usage))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cost_is_per_million_tokens_and_unknown_without_a_price() {
        let price = ModelPrice {
            input_usd_per_mtok: Some(2.0),
            output_usd_per_mtok: Some(8.0),
        };
        let usage = Usage {
            input_tokens: 500_000,
            output_tokens: 250_000,
        };
        assert_eq!(cost_usd(Some(&price), usage), Some(3.0));
        assert_eq!(cost_usd(None, usage), None);
        let input_only = ModelPrice {
            input_usd_per_mtok: Some(2.0),
            output_usd_per_mtok: None,
        };
        assert_eq!(cost_usd(Some(&input_only), usage), None);
        let no_output = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
        };
        assert_eq!(cost_usd(Some(&input_only), no_output), Some(2.0));
    }
}
