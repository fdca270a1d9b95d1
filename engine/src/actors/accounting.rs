//! Token and cost accounting: the cost of a run's recorded calls (priced by
//! [`super::pricing`]), and the rows that record a run's model calls (see
//! `store::model_calls` for the rollups). A call whose provider reported no usage has an
//! unknown cost.

use crate::config::Provider;
use crate::domain::id::Id;
use crate::store::model_calls::NewModelCall;

use super::pricing::cost_usd;
use super::runtime::ActorRun;

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
