//! Warm and cold context (spec section 25, "Tiered Context Architecture") and their
//! promotion into hot context.
//!
//! - Warm: the current decisions (not superseded) of the plan family — the plan itself, its
//!   root and every plan under that root (parent, children, siblings) — newest first, at most
//!   `warm-max-decisions`.
//! - Cold: the current decisions of plans of the same project that reached Applied and are
//!   not in the family, newest plan first, at most `cold-max-decisions`.
//!
//! Promotion scores each item by the distinct words it shares with the current query (the
//! task text when strategizing, the step's decision text when executing) and adds the best
//! into the hot context after what is already there, while they fit ([`promote`]).

use std::collections::BTreeSet;

use rusqlite::params;
use serde::Serialize;

use super::Budget;
use crate::domain::Id;
use crate::store::{Store, StoreError};

/// Where a promoted item came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tier {
    /// A decision of the plan family.
    Warm,
    /// A decision of an earlier applied plan of the project.
    Cold,
}

/// One decision a tier holds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    /// The tier it was read from.
    pub tier: Tier,
    /// The plan that recorded it.
    pub plan_id: String,
    /// The decision's id.
    pub decision_id: String,
    /// The question it answered (may be empty).
    pub question: String,
    /// The chosen answer.
    pub chosen: String,
    /// Why (may be empty).
    pub rationale: String,
}

impl Item {
    /// The reference recorded in the snapshot: `decision:<id>` (warm) or
    /// `history:<plan id>:<decision id>` (cold).
    pub fn reference(&self) -> String {
        match self.tier {
            Tier::Warm => format!("decision:{}", self.decision_id),
            Tier::Cold => format!("history:{}:{}", self.plan_id, self.decision_id),
        }
    }

    /// The text put in the prompt: one block, question, answer and rationale.
    pub fn render(&self) -> String {
        let mut out = format!("- [{}] ", self.reference());
        if !self.question.is_empty() {
            out.push_str(&format!("{} → ", one_line(&self.question)));
        }
        out.push_str(&one_line(&self.chosen));
        if !self.rationale.is_empty() {
            out.push_str(&format!("\n    why: {}", one_line(&self.rationale)));
        }
        out
    }

    fn text(&self) -> String {
        format!("{} {} {}", self.question, self.chosen, self.rationale)
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Words too common to count as overlap.
const STOP_WORDS: [&str; 24] = [
    "the", "and", "for", "with", "that", "this", "from", "are", "was", "its", "not", "but", "all",
    "any", "can", "has", "have", "into", "then", "than", "each", "one", "out", "our",
];

/// The distinct lowercase words of `text` that count for overlap: runs of letters, digits
/// and `_`, at least 3 characters, stop words left out. Identifiers are also split into
/// their parts (`verify_token` gives `verify_token`, `verify`, `token`).
pub fn words(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |w: &str| {
        let w = w.to_lowercase();
        if w.chars().count() >= 3 && !STOP_WORDS.contains(&w.as_str()) {
            out.insert(w);
        }
    };
    for (_, w) in crate::index::tokenizer::words(text) {
        add(w);
        let parts = crate::index::tokenizer::split_identifier(w);
        if parts.len() > 1 {
            for (a, b) in parts {
                add(&w[a..b]);
            }
        }
    }
    out
}

/// The score of `text` for a query: how many of the query's words it holds.
pub fn score(query: &BTreeSet<String>, text: &str) -> usize {
    words(text).intersection(query).count()
}

/// The items worth promoting, best first: those sharing at least one word with `query`,
/// by score, then warm before cold, then in the order given (newest first).
pub fn rank<'a>(items: &'a [Item], query: &str) -> Vec<(&'a Item, usize)> {
    let q = words(query);
    let mut scored: Vec<(usize, &Item, usize)> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (i, it, score(&q, &it.text())))
        .filter(|(_, _, s)| *s > 0)
        .collect();
    scored.sort_by(|a, b| {
        b.2.cmp(&a.2)
            .then((a.1.tier == Tier::Cold).cmp(&(b.1.tier == Tier::Cold)))
            .then(a.0.cmp(&b.0))
    });
    scored.into_iter().map(|(_, it, s)| (it, s)).collect()
}

/// One item promoted into hot context, as the snapshot records it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Promoted {
    /// `decision:<id>` or `history:<plan id>:<decision id>`.
    pub reference: String,
    /// The tier it came from.
    pub tier: Tier,
    /// Its overlap score with the query (shared words).
    pub score: usize,
}

/// Adds the items of `items` that share words with `query` to `b` under a heading, best
/// first, while they fit; one that does not fit is counted as dropped and the next is
/// tried. Records each promoted item with its tier, and how many each tier held.
pub fn promote(b: &mut Budget, items: &[Item], query: &str) {
    b.hot.considered_warm = items.iter().filter(|i| i.tier == Tier::Warm).count();
    b.hot.considered_cold = items.len() - b.hot.considered_warm;
    let ranked = rank(items, query);
    if ranked.is_empty() {
        return;
    }
    if !b.push(
        "## Earlier decisions (warm: this plan family; cold: applied plans of the project)",
        None,
    ) {
        b.hot.dropped += ranked.len();
        return;
    }
    let q = words(query);
    for (item, score) in ranked {
        let reference = item.reference();
        let tier = match item.tier {
            Tier::Warm => "warm",
            Tier::Cold => "cold",
        };
        let text = item.render();
        let cost = b.cost(&text);
        if b.push(&text, Some(reference.clone())) {
            let terms = words(&item.text()).intersection(&q).cloned().collect();
            b.why(reference.clone(), tier, score as f64, terms, None);
            b.hot.promoted.push(Promoted {
                reference,
                tier: item.tier,
                score,
            });
        } else {
            b.left_out(reference, tier, score as f64, cost);
        }
    }
}

fn read_item(tier: Tier) -> impl Fn(&crate::store::db::Row<'_>) -> rusqlite::Result<Item> {
    move |r| {
        Ok(Item {
            tier,
            plan_id: r.get(0)?,
            decision_id: r.get(1)?,
            question: r.get::<_, Option<String>>(2)?.unwrap_or_default(),
            chosen: r.get(3)?,
            rationale: r.get::<_, Option<String>>(4)?.unwrap_or_default(),
        })
    }
}

/// The warm tier of `plan_id`: the current decisions of its family (the plans sharing its
/// root, the root included), newest first, at most `limit`, leaving out `except` (the
/// decision whose step is being run).
///
/// # Errors
/// [`StoreError`].
pub fn warm(
    store: &Store,
    plan_id: &Id,
    except: Option<&Id>,
    limit: u64,
) -> Result<Vec<Item>, StoreError> {
    let mut q = store.conn().prepare(
        "WITH fam(root) AS (SELECT COALESCE(root_plan_id, plan_id) FROM plans WHERE plan_id = ?1)
         SELECT d.plan_id, d.decision_id, d.question, d.chosen_option, d.rationale
         FROM decisions d JOIN plans p ON p.plan_id = d.plan_id, fam
         WHERE (p.plan_id = fam.root OR p.root_plan_id = fam.root)
           AND d.superseded_by IS NULL AND d.decision_id != ?2
         ORDER BY d.created_at DESC, d.sequence_number DESC
         LIMIT ?3",
    )?;
    let except = except.map(ToString::to_string).unwrap_or_default();
    let rows = q.query_map(
        params![plan_id.to_string(), except, limit as i64],
        read_item(Tier::Warm),
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// The cold tier of `plan_id`: the current decisions of other plans that share one of its
/// projects, reached Applied and are not of its family; newest plan first (by completion),
/// at most `limit`.
///
/// # Errors
/// [`StoreError`].
pub fn cold(store: &Store, plan_id: &Id, limit: u64) -> Result<Vec<Item>, StoreError> {
    let mut q = store.conn().prepare(
        "WITH me(root) AS (SELECT COALESCE(root_plan_id, plan_id) FROM plans WHERE plan_id = ?1)
         SELECT d.plan_id, d.decision_id, d.question, d.chosen_option, d.rationale
         FROM decisions d JOIN plans p ON p.plan_id = d.plan_id, me
         WHERE p.phase = 'applied'
           AND COALESCE(p.root_plan_id, p.plan_id) != me.root
           AND d.superseded_by IS NULL
           AND EXISTS (SELECT 1 FROM plan_projects a JOIN plan_projects b
                       ON a.project_id = b.project_id
                       WHERE a.plan_id = p.plan_id AND b.plan_id = ?1)
         ORDER BY COALESCE(p.completed_at, p.updated_at) DESC, d.created_at DESC,
                  d.sequence_number DESC
         LIMIT ?2",
    )?;
    let rows = q.query_map(
        params![plan_id.to_string(), limit as i64],
        read_item(Tier::Cold),
    )?;
    Ok(rows.collect::<Result<Vec<_>, _>>()?)
}

/// Both tiers of `plan_id` under `policy`'s sizes (warm first). A store error leaves the
/// tiers empty rather than failing the phase: the actor then works without them.
pub fn read(
    store: &Store,
    plan_id: &Id,
    except: Option<&Id>,
    policy: &super::policy::Resolved,
) -> Vec<Item> {
    let mut out = warm(store, plan_id, except, policy.warm_max_decisions).unwrap_or_default();
    out.extend(cold(store, plan_id, policy.cold_max_decisions).unwrap_or_default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(tier: Tier, id: &str, chosen: &str, rationale: &str) -> Item {
        Item {
            tier,
            plan_id: "p".into(),
            decision_id: id.into(),
            question: String::new(),
            chosen: chosen.into(),
            rationale: rationale.into(),
        }
    }

    #[test]
    fn words_are_lowercased_split_at_identifier_parts_and_skip_short_and_common_ones() {
        let w = words("Trim the token in verify_token, a Parser and the HTTPServer");
        for expected in [
            "trim",
            "token",
            "verify_token",
            "verify",
            "parser",
            "httpserver",
            "server",
        ] {
            assert!(w.contains(expected), "{expected}: {w:?}");
        }
        assert!(!w.contains("the") && !w.contains("in") && !w.contains("a"));
    }

    #[test]
    fn items_are_ranked_by_shared_words_then_warm_before_cold_then_newest_first() {
        let items = vec![
            item(Tier::Cold, "c1", "trim tokens", "blank tokens are rejected"),
            item(Tier::Warm, "w1", "write the changelog", "release notes"),
            item(Tier::Warm, "w2", "trim tokens", "blank input"),
            item(Tier::Warm, "w3", "trim tokens", "blank input"),
            item(Tier::Cold, "c2", "unrelated", "nothing shared"),
        ];
        let ranked: Vec<(&str, usize)> = rank(&items, "Reject blank tokens: trim first")
            .into_iter()
            .map(|(i, s)| (i.decision_id.as_str(), s))
            .collect();
        assert_eq!(ranked, [("w2", 3), ("w3", 3), ("c1", 3)]);
    }

    #[test]
    fn promotion_stops_at_the_budget_and_counts_what_was_left_out() {
        let items = vec![
            item(Tier::Warm, "w1", "trim tokens", &"long reason ".repeat(40)),
            item(Tier::Cold, "c1", "trim tokens", "short"),
        ];
        let mut b = Budget::new(60);
        promote(&mut b, &items, "trim tokens");
        let hot = b.finish();
        assert!(hot.tokens <= 60, "{hot:?}");
        assert_eq!(hot.dropped, 1, "the long warm item did not fit: {hot:?}");
        assert_eq!(
            hot.promoted,
            [Promoted {
                reference: "history:p:c1".into(),
                tier: Tier::Cold,
                score: 2
            }]
        );
        assert_eq!((hot.considered_warm, hot.considered_cold), (1, 1));
        assert!(hot.references.contains(&"history:p:c1".to_string()));
    }
}
