//! Model-call rows (migrations `004_actors.sql`, `012_providers.sql`, `022_step_journal.sql`): one per call to a provider, with tokens and
//! cost, rolled up per plan, per decision and per run.
//!
//! Cost is `None` ("unknown") for a call whose model has no configured price; a rollup keeps
//! the priced part and counts the unpriced calls, and its total is `None` if any call is
//! unpriced.

use rusqlite::params;
use serde::Serialize;

use super::{Store, StoreError};
use crate::domain::id::Id;

/// A model call to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewModelCall {
    /// The actor run this call belongs to.
    pub run_id: Id,
    /// The plan, if the call served one.
    pub plan_id: Option<Id>,
    /// The decision (or step) the call served, if known.
    pub decision_id: Option<String>,
    /// The actor that made the call (`local/coder` or `openai/gpt-4.1`).
    pub actor: String,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// 1-based turn in the run.
    pub turn: u32,
    /// Attempts made (retries included).
    pub attempts: u32,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Of the input tokens, those read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Of the input tokens, those written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Whether the provider reported usage.
    pub usage_reported: bool,
    /// The provider's stop reason (`length` / `max_tokens` marks a reply cut by the limit).
    pub stop_reason: Option<String>,
    /// Cost in US dollars; `None` when no price is configured.
    pub cost_usd: Option<f64>,
    /// For a failed call: its error kind and message (already free of secrets).
    pub error: Option<(String, String)>,
    /// When the call started.
    pub started_at: jiff::Timestamp,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Made again because the call before it was in flight when its driver vanished
    /// (docs/sandbox.md, "Resuming a step").
    pub retry: bool,
}

/// Totals over a set of model calls.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct UsageRollup {
    /// Calls made.
    pub calls: u64,
    /// Calls that failed.
    pub failed_calls: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost of the priced calls, in US dollars.
    pub priced_cost_usd: f64,
    /// Successful calls without a configured price (or without reported usage).
    pub unpriced_calls: u64,
    /// Total cost in US dollars; `None` ("unknown") when any successful call is unpriced.
    pub cost_usd: Option<f64>,
    /// Of the input tokens, those read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Of the input tokens, those written to the prompt cache.
    pub cache_write_tokens: u64,
    /// Successful calls whose provider reported no usage: their tokens are unknown, so the
    /// token totals are a lower bound when this is not zero.
    pub unreported_calls: u64,
    /// Successful calls whose reply was cut by the completion token limit.
    pub truncated_calls: u64,
    /// Calls made again because the one before them was in flight when the process driving
    /// the plan vanished (docs/sandbox.md, "Resuming a step"); each is also in `calls`.
    pub retried_calls: u64,
    /// Calls that were in flight when the process driving the plan vanished: made (the
    /// provider may have billed them) but never answered, so their tokens and cost are
    /// unknown; counted in `calls` and `failed_calls`.
    pub interrupted_calls: u64,
}

const ROLLUP: &str = "SELECT COUNT(*), \
    COALESCE(SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
    COALESCE(SUM(cost_usd), 0.0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND cost_usd IS NULL THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND usage_reported = 0 THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND stop_reason IN ('length', 'max_tokens') THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN retry = 1 THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'error' AND error_kind = 'interrupted' THEN 1 ELSE 0 END), 0) \
    FROM model_calls";

fn rollup_row(row: &crate::store::db::Row<'_>) -> rusqlite::Result<UsageRollup> {
    rollup_at(row, 0)
}

/// Reads the twelve rollup columns starting at column `base`.
fn rollup_at(row: &crate::store::db::Row<'_>, base: usize) -> rusqlite::Result<UsageRollup> {
    let n = |i: usize| {
        row.get::<_, i64>(base + i)
            .map(|v| u64::try_from(v).unwrap_or(0))
    };
    let priced: f64 = row.get(base + 4)?;
    let unpriced = n(5)?;
    Ok(UsageRollup {
        calls: n(0)?,
        failed_calls: n(1)?,
        input_tokens: n(2)?,
        output_tokens: n(3)?,
        priced_cost_usd: priced,
        unpriced_calls: unpriced,
        cost_usd: (unpriced == 0).then_some(priced),
        cache_read_tokens: n(6)?,
        cache_write_tokens: n(7)?,
        unreported_calls: n(8)?,
        truncated_calls: n(9)?,
        retried_calls: n(10)?,
        interrupted_calls: n(11)?,
    })
}

fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// Records one model call inside `tx`.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_in(
    tx: &crate::store::Transaction<'_>,
    c: &NewModelCall,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO model_calls (call_id, run_id, plan_id, decision_id, actor, provider, model, \
         turn, attempts, input_tokens, output_tokens, usage_reported, cost_usd, outcome, \
         error_kind, error_message, started_at, duration_ms, cache_read_tokens, \
         cache_write_tokens, stop_reason, retry) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)",
    )?
    .execute(params![
        Id::generate().to_string(),
        c.run_id.to_string(),
        c.plan_id.map(|p| p.to_string()),
        c.decision_id,
        c.actor,
        c.provider,
        c.model,
        c.turn.max(1),
        c.attempts.max(1),
        int(c.input_tokens),
        int(c.output_tokens),
        c.usage_reported,
        c.cost_usd,
        if c.error.is_some() { "error" } else { "ok" },
        c.error.as_ref().map(|e| e.0.as_str()),
        c.error
            .as_ref()
            .map(|e| crate::redact::redact(&e.1).into_owned()),
        c.started_at.to_string(),
        int(c.duration_ms),
        int(c.cache_read_tokens),
        int(c.cache_write_tokens),
        c.stop_reason,
        c.retry,
    ])?;
    Ok(())
}

impl Store {
    /// Records model calls in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (e.g. an unknown `plan_id`); nothing is written then.
    pub fn record_model_calls(&mut self, calls: &[NewModelCall]) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        for c in calls {
            insert_in(&tx, c)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Totals of a plan's model calls.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn usage_for_plan(&self, plan_id: &Id) -> Result<UsageRollup, StoreError> {
        Ok(self.conn().query_row(
            &format!("{ROLLUP} WHERE plan_id = ?1"),
            [plan_id.to_string()],
            rollup_row,
        )?)
    }

    /// Totals of the model calls that served one decision of a plan.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn usage_for_decision(
        &self,
        plan_id: &Id,
        decision_id: &str,
    ) -> Result<UsageRollup, StoreError> {
        Ok(self.conn().query_row(
            &format!("{ROLLUP} WHERE plan_id = ?1 AND decision_id = ?2"),
            params![plan_id.to_string(), decision_id],
            rollup_row,
        )?)
    }

    /// A plan's totals per decision, ordered by decision id; calls that served no decision
    /// come first under `None`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn usage_by_decision(
        &self,
        plan_id: &Id,
    ) -> Result<Vec<(Option<String>, UsageRollup)>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "{ROLLUP_BY_DECISION} ORDER BY decision_id IS NOT NULL, decision_id"
        ))?;
        let rows = stmt.query_map([plan_id.to_string()], |row| {
            Ok((row.get::<_, Option<String>>(0)?, rollup_at(row, 1)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Totals of one actor run.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn usage_for_run(&self, run_id: &Id) -> Result<UsageRollup, StoreError> {
        Ok(self.conn().query_row(
            &format!("{ROLLUP} WHERE run_id = ?1"),
            [run_id.to_string()],
            rollup_row,
        )?)
    }
}

const ROLLUP_BY_DECISION: &str = "SELECT decision_id, COUNT(*), \
    COALESCE(SUM(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0), \
    COALESCE(SUM(cost_usd), 0.0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND cost_usd IS NULL THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND usage_reported = 0 THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'ok' AND stop_reason IN ('length', 'max_tokens') THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN retry = 1 THEN 1 ELSE 0 END), 0), \
    COALESCE(SUM(CASE WHEN outcome = 'error' AND error_kind = 'interrupted' THEN 1 ELSE 0 END), 0) \
    FROM model_calls WHERE plan_id = ?1 GROUP BY decision_id";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    fn call(
        plan: Option<Id>,
        decision: Option<&str>,
        tokens: (u64, u64),
        cost: Option<f64>,
    ) -> NewModelCall {
        NewModelCall {
            run_id: Id::generate(),
            plan_id: plan,
            decision_id: decision.map(str::to_string),
            actor: "openai/gpt-test".into(),
            provider: "openai".into(),
            model: "gpt-test".into(),
            turn: 1,
            attempts: 1,
            input_tokens: tokens.0,
            output_tokens: tokens.1,
            cache_read_tokens: 0,
            cache_write_tokens: 0,
            usage_reported: true,
            stop_reason: None,
            cost_usd: cost,
            error: None,
            started_at: jiff::Timestamp::now(),
            duration_ms: 5,
            retry: false,
        }
    }

    #[test]
    fn usage_rolls_up_per_plan_and_per_decision_and_unpriced_cost_is_unknown() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let p = plan.plan_id;
        let mut failed = call(Some(p), Some("D1"), (0, 0), None);
        failed.error = Some(("transient".into(), "HTTP 503".into()));
        store
            .record_model_calls(&[
                call(Some(p), Some("D1"), (100, 10), Some(0.5)),
                call(Some(p), Some("D1"), (50, 5), Some(0.25)),
                call(Some(p), Some("D2"), (10, 1), None),
                failed,
                call(Some(p), None, (1, 1), Some(0.01)),
                call(None, None, (999, 999), Some(9.0)),
            ])
            .unwrap();
        let d1 = store.usage_for_decision(&p, "D1").unwrap();
        assert_eq!(
            (d1.calls, d1.failed_calls, d1.input_tokens, d1.output_tokens),
            (3, 1, 150, 15)
        );
        assert_eq!(d1.cost_usd, Some(0.75));
        let d2 = store.usage_for_decision(&p, "D2").unwrap();
        assert_eq!((d2.cost_usd, d2.unpriced_calls), (None, 1));
        let all = store.usage_for_plan(&p).unwrap();
        assert_eq!(
            (all.calls, all.input_tokens, all.output_tokens),
            (5, 161, 17)
        );
        assert_eq!(all.cost_usd, None);
        assert!((all.priced_cost_usd - 0.76).abs() < 1e-9);
        let by = store.usage_by_decision(&p).unwrap();
        let keys: Vec<Option<&str>> = by.iter().map(|(k, _)| k.as_deref()).collect();
        assert_eq!(keys, [None, Some("D1"), Some("D2")]);
        assert_eq!(by[1].1, d1);
    }

    #[test]
    fn a_call_for_an_unknown_plan_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let run = Id::generate();
        let mut ok = call(None, None, (1, 1), None);
        ok.run_id = run;
        let err = store.record_model_calls(&[ok, call(Some(Id::generate()), None, (1, 1), None)]);
        assert!(err.is_err());
        assert_eq!(store.usage_for_run(&run).unwrap().calls, 0);
    }
}
