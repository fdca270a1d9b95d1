//! Token and cost accounting: the cost of a call from the provider's configured prices, and
//! the rows that record a run's model calls (see `store::model_calls` for the rollups).
//!
//! Prices are `[providers.NAME.models."MODEL"]` `input_usd_per_mtok` /
//! `output_usd_per_mtok` (US dollars per million tokens). Without a price the cost is
//! unknown (`None`), never guessed. Cached input tokens are priced at
//! `cache_read_usd_per_mtok` / `cache_write_usd_per_mtok`, else (see [`cache_prices`]) at
//! Anthropic's fixed multipliers of the input price or, for OpenAI-compatible providers, at
//! the input price itself. A call whose provider reported no usage has an unknown cost.

use crate::config::{ModelPrice, Provider, ProviderKind};
use crate::domain::id::Id;
use crate::store::model_calls::NewModelCall;

use super::messages::Usage;
use super::runtime::ActorRun;

/// Anthropic prices a cache read at a tenth of the input price and a (five-minute) cache
/// write at 1.25 times it.
pub const ANTHROPIC_CACHE_MULTIPLIERS: (f64, f64) = (0.1, 1.25);

/// The (read, write) prices of cached input tokens per million: the configured ones, else
/// derived from the input price (Anthropic's multipliers; for OpenAI-compatible providers
/// the input price, an upper bound since their discount differs per model).
pub fn cache_prices(kind: ProviderKind, price: &ModelPrice) -> (Option<f64>, Option<f64>) {
    let (read, write) = match kind {
        ProviderKind::Anthropic => ANTHROPIC_CACHE_MULTIPLIERS,
        ProviderKind::Openai => (1.0, 1.0),
    };
    (
        price
            .cache_read_usd_per_mtok
            .or(price.input_usd_per_mtok.map(|p| p * read)),
        price
            .cache_write_usd_per_mtok
            .or(price.input_usd_per_mtok.map(|p| p * write)),
    )
}

/// The cost of `usage` in US dollars for a provider of `kind`, or `None` when a needed price
/// is not configured (a kind of token that was not used needs no price).
pub fn cost_usd(kind: ProviderKind, price: Option<&ModelPrice>, usage: Usage) -> Option<f64> {
    let price = price?;
    let side = |tokens: u64, per_mtok: Option<f64>| -> Option<f64> {
        if tokens == 0 {
            return Some(0.0);
        }
        Some(tokens as f64 * per_mtok? / 1_000_000.0)
    };
    let (read, write) = cache_prices(kind, price);
    Some(
        side(usage.uncached_input(), price.input_usd_per_mtok)?
            + side(usage.cache_read_tokens, read)?
            + side(usage.cache_write_tokens, write)?
            + side(usage.output_tokens, price.output_usd_per_mtok)?,
    )
}

/// Whether `c` was abandoned at the run's deadline (its usage is unknown, not zero).
fn abandoned(c: &super::runtime::ModelCallRecord) -> bool {
    c.error
        .as_ref()
        .is_some_and(|e| e.0 == super::runtime::ABANDONED)
}

/// The cost of one recorded call: zero for a failed call, unknown for an abandoned one or
/// when the provider reported no usage, else priced by [`cost_usd`].
fn call_cost(provider: &Provider, c: &super::runtime::ModelCallRecord) -> Option<f64> {
    if abandoned(c) {
        return None;
    }
    if c.error.is_some() {
        return Some(0.0);
    }
    if !c.usage_reported {
        return None;
    }
    cost_usd(provider.kind, provider.models.get(&c.model), c.usage)
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
        .map(|c| call_row(ctx, provider, c))
        .collect()
}

/// The row recording one model call, priced with `provider`'s configured prices.
pub fn call_row(
    ctx: &CallContext,
    provider: &Provider,
    c: &super::runtime::ModelCallRecord,
) -> NewModelCall {
    NewModelCall {
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
        cache_read_tokens: c.usage.cache_read_tokens,
        cache_write_tokens: c.usage.cache_write_tokens,
        usage_reported: c.usage_reported,
        stop_reason: c.stop_reason.clone(),
        cost_usd: call_cost(provider, c),
        error: c.error.clone(),
        started_at: c.started_at,
        duration_ms: c.duration_ms,
        retry: false,
    }
}

/// The provider called `name` among `providers`, else `fallback`.
fn provider_named<'a>(
    providers: &'a [Provider],
    fallback: &'a Provider,
    name: &str,
) -> &'a Provider {
    providers
        .iter()
        .find(|p| p.name == name)
        .unwrap_or(fallback)
}

/// [`call_rows`] for a run whose calls went to several providers (a graph actor's nodes):
/// each call is priced with its own provider's prices (`fallback` for an unknown name).
pub fn call_rows_for(
    ctx: &CallContext,
    providers: &[Provider],
    fallback: &Provider,
    run: &ActorRun,
) -> Vec<NewModelCall> {
    let mut rows = call_rows(ctx, fallback, run);
    for (row, c) in rows.iter_mut().zip(&run.model_calls) {
        row.cost_usd = call_cost(provider_named(providers, fallback, &c.provider), c);
    }
    rows
}

/// [`run_cost_usd`] for a run whose calls went to several providers.
pub fn run_cost_usd_for(
    providers: &[Provider],
    fallback: &Provider,
    run: &ActorRun,
) -> Option<f64> {
    run.model_calls
        .iter()
        .map(|c| call_cost(provider_named(providers, fallback, &c.provider), c))
        .sum::<Option<f64>>()
        // An empty sum of floats is -0.0, printed `$-0.000000`.
        .map(|c| c + 0.0)
}

/// The cost of a run: `Some` when every successful call is priced and reported its usage.
pub fn run_cost_usd(provider: &Provider, run: &ActorRun) -> Option<f64> {
    run.model_calls
        .iter()
        .map(|c| call_cost(provider, c))
        .sum::<Option<f64>>()
        .map(|c| c + 0.0)
}

/// Whether every successful call of `run` reported its usage and none was abandoned (else
/// its tokens are unknown).
pub fn usage_known(run: &ActorRun) -> bool {
    run.model_calls
        .iter()
        .all(|c| c.usage_reported || (c.error.is_some() && !abandoned(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OA: ProviderKind = ProviderKind::Openai;

    #[test]
    fn cost_is_per_million_tokens_and_unknown_without_a_price() {
        let price = ModelPrice {
            input_usd_per_mtok: Some(2.0),
            output_usd_per_mtok: Some(8.0),
            ..ModelPrice::default()
        };
        let usage = Usage {
            input_tokens: 500_000,
            output_tokens: 250_000,
            ..Usage::default()
        };
        assert_eq!(cost_usd(OA, Some(&price), usage), Some(3.0));
        assert_eq!(cost_usd(OA, None, usage), None);
        let input_only = ModelPrice {
            input_usd_per_mtok: Some(2.0),
            ..ModelPrice::default()
        };
        assert_eq!(cost_usd(OA, Some(&input_only), usage), None);
        let no_output = Usage {
            input_tokens: 1_000_000,
            ..Usage::default()
        };
        assert_eq!(cost_usd(OA, Some(&input_only), no_output), Some(2.0));
    }

    #[test]
    fn cached_tokens_are_priced_at_the_cache_prices() {
        let price = ModelPrice {
            input_usd_per_mtok: Some(3.0),
            output_usd_per_mtok: Some(15.0),
            ..ModelPrice::default()
        };
        // 1M input of which 800k read from the cache and 100k written to it.
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
            cache_read_tokens: 800_000,
            cache_write_tokens: 100_000,
        };
        let anthropic = cost_usd(ProviderKind::Anthropic, Some(&price), usage).unwrap();
        // 100k * 3 + 800k * 0.3 + 100k * 3.75, per million.
        assert!(
            (anthropic - (0.3 + 0.24 + 0.375)).abs() < 1e-9,
            "{anthropic}"
        );
        let configured = ModelPrice {
            cache_read_usd_per_mtok: Some(0.75),
            ..price.clone()
        };
        let openai = cost_usd(OA, Some(&configured), usage).unwrap();
        assert!((openai - (0.3 + 0.6 + 0.3)).abs() < 1e-9, "{openai}");
    }
}
