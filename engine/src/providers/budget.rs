//! Budgets and rate limits (spec section 27, cost): what a plan may spend, checked before
//! every model call, and how many requests and tokens per minute a provider is sent.
//!
//! - A plan's budget ([`PlanBudget`]: `max-cost-usd`, `max-tokens`) is checked before each
//!   model call against what the plan has spent so far plus an estimate of the call's input
//!   (its characters / 4, priced at the input price). A call that would pass the budget is
//!   not made: the run stops with `Stop::Budget` and the lifecycle raises a `budget`
//!   approval, answered with a higher limit. A run never stops mid-tool-call.
//! - Calls whose provider reported no usage count at their character estimate.
//! - Rate limits ([`RateLimiter`]) queue calls: a call waits until the provider's window
//!   (one minute) has room for one more request and its estimated tokens.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::{Duration, Instant};

pub use crate::domain::budget::PlanBudget;
use serde::Serialize;

/// Tokens estimated from text: a quarter of its characters, rounded up.
pub fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

/// A run's budget: the plan's limits and what the plan spent before the run.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BudgetCheck {
    /// The limits.
    pub limit: PlanBudget,
    /// Dollars spent before this run.
    pub spent_usd: f64,
    /// Tokens spent before this run.
    pub spent_tokens: u64,
}

/// Why a call was not made: the budget it would pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BudgetStop {
    /// `max-cost-usd` or `max-tokens`.
    pub limit: &'static str,
    /// The limit's value.
    pub value: f64,
    /// Spent so far (this run included), in the limit's unit.
    pub spent: f64,
    /// The next call's estimate, in the limit's unit.
    pub next: f64,
}

impl BudgetStop {
    /// One line for the user.
    pub fn describe(&self) -> String {
        let (spent, next, value) = if self.limit == "max-cost-usd" {
            (
                format!("${:.4}", self.spent),
                format!("${:.4}", self.next),
                format!("${:.4}", self.value),
            )
        } else {
            (
                format!("{} tokens", self.spent),
                format!("about {} tokens", self.next),
                format!("{} tokens", self.value),
            )
        };
        format!(
            "the plan's budget ({} {value}) would be exceeded: {spent} spent, the next model call needs {next}; raise the limit to continue",
            self.limit
        )
    }
}

impl BudgetCheck {
    /// Checks the next call: `run_tokens` / `run_usd` spent by this run so far, the next
    /// call's estimated input tokens and its price per million input tokens (if known).
    pub fn check(
        &self,
        run_tokens: u64,
        run_usd: f64,
        next_tokens: u64,
        input_usd_per_mtok: Option<f64>,
    ) -> Option<BudgetStop> {
        if let Some(max) = self.limit.max_tokens {
            let spent = self.spent_tokens + run_tokens;
            if spent + next_tokens > max {
                return Some(BudgetStop {
                    limit: "max-tokens",
                    value: max as f64,
                    spent: spent as f64,
                    next: next_tokens as f64,
                });
            }
        }
        if let Some(max) = self.limit.max_cost_usd {
            let spent = self.spent_usd + run_usd;
            let next = input_usd_per_mtok.map_or(0.0, |p| next_tokens as f64 * p / 1e6);
            if spent + next > max {
                return Some(BudgetStop {
                    limit: "max-cost-usd",
                    value: max,
                    spent,
                    next,
                });
            }
        }
        None
    }
}

/// Requests and tokens sent to one provider within a sliding window.
#[derive(Debug)]
pub struct RateLimiter {
    requests_per_window: Option<u32>,
    tokens_per_window: Option<u64>,
    window: Duration,
    sent: Mutex<VecDeque<(Instant, u64)>>,
}

/// One limiter per provider base URL and key of the process, shared by all its clients.
static LIMITERS: LazyLock<Mutex<HashMap<String, Arc<RateLimiter>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

impl RateLimiter {
    /// The process's limiter for `key` (a provider's name and base URL), made on first use.
    pub fn shared(
        key: &str,
        requests_per_window: Option<u32>,
        tokens_per_window: Option<u64>,
        window: Duration,
    ) -> Arc<RateLimiter> {
        let mut all = LIMITERS.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(all.entry(key.to_string()).or_insert_with(|| {
            Arc::new(RateLimiter {
                requests_per_window,
                tokens_per_window,
                window,
                sent: Mutex::new(VecDeque::new()),
            })
        }))
    }

    /// How long a call of `tokens` must wait now; `None` when it may go (and is counted).
    fn admit(&self, tokens: u64) -> Option<Duration> {
        let now = Instant::now();
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        while sent
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) >= self.window)
        {
            sent.pop_front();
        }
        let requests_full = self
            .requests_per_window
            .is_some_and(|max| sent.len() as u64 >= u64::from(max));
        let used: u64 = sent.iter().map(|(_, t)| t).sum();
        // A call larger than the whole window still goes once the window is empty.
        let tokens_full = self
            .tokens_per_window
            .is_some_and(|max| !sent.is_empty() && used + tokens > max);
        if requests_full || tokens_full {
            let oldest = sent.front().map_or(now, |(at, _)| *at);
            return Some((oldest + self.window).saturating_duration_since(now));
        }
        sent.push_back((now, tokens));
        None
    }

    /// Waits until a call of about `tokens` fits the window, then counts it.
    pub async fn acquire(&self, tokens: u64) {
        while let Some(wait) = self.admit(tokens) {
            tracing::info!(
                wait_ms = wait.as_millis() as u64,
                "provider rate limit reached; the call waits its turn"
            );
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    /// Corrects the last counted call's tokens to what the provider reported.
    pub fn settle(&self, estimated: u64, actual: u64) {
        let mut sent = self.sent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = sent.iter_mut().rev().find(|(_, t)| *t == estimated) {
            entry.1 = actual;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_call_is_refused_when_it_would_pass_either_limit() {
        let check = BudgetCheck {
            limit: PlanBudget {
                max_cost_usd: Some(0.01),
                max_tokens: Some(10_000),
            },
            spent_usd: 0.009,
            spent_tokens: 1_000,
        };
        assert_eq!(check.check(0, 0.0, 100, Some(1.0)), None);
        let stop = check.check(0, 0.0, 2_000, Some(1.0)).unwrap();
        assert_eq!(stop.limit, "max-cost-usd");
        assert!(
            stop.describe().contains("raise the limit"),
            "{}",
            stop.describe()
        );
        assert_eq!(
            check.check(9_000, 0.0, 1, None).unwrap().limit,
            "max-tokens"
        );
    }

    #[test]
    fn a_raised_budget_keeps_the_limits_it_does_not_name() {
        let b = PlanBudget {
            max_cost_usd: Some(1.0),
            max_tokens: Some(5),
        };
        let r = b.raised(PlanBudget {
            max_cost_usd: Some(2.0),
            max_tokens: None,
        });
        assert_eq!((r.max_cost_usd, r.max_tokens), (Some(2.0), Some(5)));
    }

    #[test]
    fn a_full_window_makes_the_next_call_wait() {
        let l = RateLimiter::shared("test-window", Some(2), None, Duration::from_secs(60));
        assert_eq!(l.admit(1), None);
        assert_eq!(l.admit(1), None);
        assert!(l.admit(1).is_some_and(|w| w > Duration::from_secs(59)));
    }
}
