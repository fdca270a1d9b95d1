//! Context for each phase (spec section 25): what an actor sees without asking.
//!
//! - Hot: the small set of material put in the actor's prompt — for the strategist the
//!   repository overview and what `search_code` finds for the task's words; for an execution
//!   step the files and definitions its decision names. Always within `hot-max-tokens`
//!   ([`Budget`]; tokens are estimated as 4 characters each).
//! - Warm and cold ([`tiers`]): the plan family's decisions and those of earlier applied
//!   plans of the project; the ones sharing words with the current query are promoted into
//!   hot context after the rest, within the same budget.
//! - [`policy`]: the per-project, per-view policy (`project context set|show`), resolved
//!   per phase and frozen on the plan.
//! - [`correction`]: what a correction's strategist is shown of the attempt it corrects.
//! - [`so_far`]: what earlier steps of the plan did, for a step's prompt.
//! - [`strategize`]: the strategist's scopes (indexes at the plan's base commits), read-only
//!   tools over them and its initial context.

pub mod execute;
pub mod correction;
pub mod policy;
pub mod so_far;
pub mod strategize;
pub mod tiers;

use serde::Serialize;
use serde_json::{Value, json};

/// Longest hot-context text kept verbatim in a decision's `context_snapshot`, in bytes.
pub const SNAPSHOT_TEXT_LIMIT: usize = 16 * 1024;

/// The estimated tokens of a text: one per 4 characters, rounded up.
pub fn tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Hot context assembled within a token budget.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Hot {
    /// The text put in the prompt.
    pub text: String,
    /// Its estimated tokens (never above the budget).
    pub tokens: u64,
    /// The budget.
    pub budget: u64,
    /// What it holds (`resource:path[:line]`, `overview:resource`).
    pub references: Vec<String>,
    /// Parts left out because the budget was spent.
    pub dropped: usize,
    /// Warm and cold items promoted into the text, with their tier.
    pub promoted: Vec<tiers::Promoted>,
    /// Warm-tier decisions considered for promotion.
    pub considered_warm: usize,
    /// Cold-tier decisions considered for promotion.
    pub considered_cold: usize,
    /// Files left out because they are larger than `max-file-size`.
    pub too_large: usize,
    /// Whether the policy asks for summarization (not yet supported: nothing is summarized).
    pub summarize_requested: bool,
    /// Why each item is in the text, in order.
    pub items: Vec<Why>,
    /// Items that were relevant but left out because the budget was spent, best first.
    pub left_out: Vec<LeftOut>,
}

/// Why an item entered the hot context.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Why {
    /// Its reference (`resource:path`, `overview:resource`, `decision:<id>`, ...).
    pub reference: String,
    /// `hot` (retrieved for the query: overview, files), `warm` or `cold` (promoted).
    pub tier: String,
    /// Its relevance: BM25 score for a file, shared words for a decision, 0 for an overview.
    pub score: f64,
    /// The query terms it holds.
    pub terms: Vec<String>,
    /// What else brought it in, where not only its own match: the file above it whose
    /// tests it holds, or the file it changed with in the history at the base and how often.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// An item left out for budget.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftOut {
    /// Its reference.
    pub reference: String,
    /// Its tier (`hot`, `warm`, `cold`).
    pub tier: String,
    /// Its relevance, as in [`Why`].
    pub score: f64,
    /// The tokens it would have taken.
    pub tokens: u64,
}

impl Hot {
    /// The `context_snapshot` record: hash, references, token counts and the text itself up
    /// to [`SNAPSHOT_TEXT_LIMIT`].
    pub fn snapshot(&self) -> Value {
        let mut text = self.text.clone();
        let truncated = text.len() > SNAPSHOT_TEXT_LIMIT;
        if truncated {
            let mut end = SNAPSHOT_TEXT_LIMIT;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
        }
        json!({
            "hash": crate::registry::actors::fingerprint(self.text.as_bytes()),
            "tokens": self.tokens,
            "budget": self.budget,
            "references": self.references,
            "dropped": self.dropped,
            "promoted": self.promoted,
            "items": self.items,
            "left_out": self.left_out,
            "tiers": {"warm_considered": self.considered_warm, "cold_considered": self.considered_cold},
            "too_large_files": self.too_large,
            "summarization": if self.summarize_requested { "not yet supported: nothing was summarized" } else { "off" },
            "text": text,
            "text_truncated": truncated,
        })
    }
}

/// Adds parts to a hot context while they fit.
#[derive(Debug, Clone)]
pub struct Budget {
    hot: Hot,
}

impl Budget {
    /// An empty context with `max_tokens` to spend.
    pub fn new(max_tokens: u64) -> Self {
        Self {
            hot: Hot {
                budget: max_tokens,
                ..Hot::default()
            },
        }
    }

    /// An empty context with the budget of `policy`, noting whether it asks for
    /// summarization.
    pub fn for_policy(policy: &policy::Resolved) -> Self {
        let mut b = Self::new(policy.hot_max_tokens);
        b.hot.summarize_requested = policy.summarize;
        b
    }

    /// Counts a file left out for being larger than `max-file-size`.
    pub fn too_large(&mut self) {
        self.hot.too_large += 1;
    }

    /// Tokens left.
    pub fn left(&self) -> u64 {
        self.hot.budget.saturating_sub(self.hot.tokens)
    }

    /// Adds `part` (a line or block, newline added) when it fits whole; `false` otherwise.
    pub fn push(&mut self, part: &str, reference: Option<String>) -> bool {
        let mut text = part.to_string();
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let t = tokens(&format!("{}{text}", self.hot.text)) - self.hot.tokens;
        if t > self.left() {
            self.hot.dropped += 1;
            return false;
        }
        self.hot.text.push_str(&text);
        self.hot.tokens = tokens(&self.hot.text);
        if let Some(r) = reference
            && !self.hot.references.contains(&r)
        {
            self.hot.references.push(r);
        }
        true
    }

    /// Adds the lines of `block` one by one while they fit; `true` when all did.
    pub fn push_lines(&mut self, block: &str, reference: Option<String>) -> bool {
        let mut all = true;
        let mut any = false;
        for line in block.lines() {
            if self.push(line, None) {
                any = true;
            } else {
                all = false;
                break;
            }
        }
        if any
            && let Some(r) = reference
            && !self.hot.references.contains(&r)
        {
            self.hot.references.push(r);
        }
        all
    }

    /// Adds `reference` to what the context holds (once).
    pub fn reference(&mut self, reference: String) {
        if !self.hot.references.contains(&reference) {
            self.hot.references.push(reference);
        }
    }

    /// Records why the item `reference` was included.
    pub fn why(
        &mut self,
        reference: String,
        tier: &str,
        score: f64,
        terms: Vec<String>,
        via: Option<String>,
    ) {
        self.hot.items.push(Why {
            reference,
            tier: tier.into(),
            score,
            terms,
            via,
        });
    }

    /// Records an item left out for budget.
    pub fn left_out(&mut self, reference: String, tier: &str, score: f64, tokens: u64) {
        self.hot.left_out.push(LeftOut {
            reference,
            tier: tier.into(),
            score,
            tokens,
        });
    }

    /// Tokens `part` would take if pushed now.
    pub fn cost(&self, part: &str) -> u64 {
        tokens(&format!("{}{part}\n", self.hot.text)) - self.hot.tokens
    }

    /// The assembled context.
    pub fn finish(self) -> Hot {
        self.hot
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hot_context_never_exceeds_its_budget() {
        let mut b = Budget::new(10);
        assert!(b.push("12345678", Some("a".into())));
        assert!(!b.push(&"x".repeat(100), Some("b".into())));
        assert!(!b.push_lines("ab\ncd\n".repeat(20).as_str(), Some("c".into())));
        let hot = b.finish();
        assert!(hot.tokens <= 10, "{hot:?}");
        assert_eq!(hot.tokens, tokens(&hot.text));
        assert_eq!(hot.references, ["a", "c"]);
        assert!(hot.dropped >= 2);
    }
}
