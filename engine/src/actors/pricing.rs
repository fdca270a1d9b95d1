//! The cost of a model call from the provider's configured prices.
//!
//! Prices are `[providers.NAME.models."MODEL"]` `input_usd_per_mtok` /
//! `output_usd_per_mtok` (US dollars per million tokens). Without a price the cost is
//! unknown (`None`), never guessed. Cached input tokens are priced at
//! `cache_read_usd_per_mtok` / `cache_write_usd_per_mtok`, else (see [`cache_prices`]) at
//! Anthropic's fixed multipliers of the input price or, for OpenAI-compatible providers, at
//! the input price itself.

use crate::config::{ModelPrice, ProviderKind};

use super::messages::Usage;

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
