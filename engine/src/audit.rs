//! The audit log's hash chain (spec sections 21 and 28, "auditing", "audit logs for apply"):
//! every row carries the SHA-256 of its own fields and of the row before it, so a row edited
//! by hand (without recomputing every later hash), a row deleted from the middle, or rows
//! reordered are found by [`Verifier`] at the first place the chain breaks.
//!
//! What the chain cannot find on its own (`docs/decisions.md`, D-audit-1): rows deleted from
//! the end of the log leave a shorter chain that is still whole, and someone who can write the
//! database can recompute every hash after an edit. Both are found by comparing the head
//! ([`AuditHead`], which `agents server audit verify` prints) with a copy kept elsewhere.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// The `prev_hash` of the first row: no row came before it.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// What the hash covers first, so that a chain of another format or version never matches.
const DOMAIN: &str = "cleveragents audit log v1\n";

/// One row of the audit log as stored: who did (or was refused) what, to which target, when,
/// from where, and the chain's two hashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditRecord {
    /// The row's place in the log: 1, 2, 3, ... without gaps.
    pub seq: i64,
    /// When it was appended.
    pub at: Timestamp,
    /// The user who made the request (`None`: the server host itself, or no credential).
    pub user: Option<String>,
    /// What was asked (`plan.apply`, `org.member.add`, ...).
    pub operation: String,
    /// The namespace of the target (an organization's rows are read by its owners).
    pub namespace: Option<String>,
    /// What it was asked of (a plan id, an item's name, a user).
    pub target: Option<String>,
    /// Where the request came from (the client's IP address), when it came over the network.
    pub address: Option<String>,
    /// Whether it was allowed.
    pub allowed: bool,
    /// Why it was refused (denied rows only).
    pub reason: Option<String>,
    /// The hash of the row before (of the first row: [`GENESIS`]).
    pub prev_hash: String,
    /// The SHA-256 of this row's fields and `prev_hash` ([`hash`]), lower-case hex.
    pub hash: String,
}

/// A row's fields exactly as the database holds them (the time as its stored text), which is
/// what the hash covers.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredRow {
    /// `seq`.
    pub seq: i64,
    /// `at`, as stored ([`stored_time`]).
    pub at: String,
    /// `user_name`.
    pub user: Option<String>,
    /// `operation`.
    pub operation: String,
    /// `namespace`.
    pub namespace: Option<String>,
    /// `target`.
    pub target: Option<String>,
    /// `address`.
    pub address: Option<String>,
    /// `allowed`.
    pub allowed: bool,
    /// `reason`.
    pub reason: Option<String>,
    /// `prev_hash`.
    pub prev_hash: String,
    /// `hash`.
    pub hash: String,
}

/// A time as the `at` column stores it: RFC 3339 in UTC with exactly six fractional digits,
/// so that the text sorts as the times do (`--since` compares it in SQL).
pub fn stored_time(at: Timestamp) -> String {
    format!("{at:.6}")
}

/// The hash of a row with these fields after a row whose hash is `prev_hash`: SHA-256 over a
/// canonical encoding in which every field is length-prefixed (an absent one is `-`), so no
/// two different rows encode alike.
pub fn hash(row: &StoredRow) -> String {
    fn field(out: &mut String, value: Option<&str>) {
        match value {
            Some(v) => {
                out.push('+');
                out.push_str(&v.len().to_string());
                out.push(':');
                out.push_str(v);
            }
            None => out.push('-'),
        }
        out.push('\n');
    }
    let mut text = String::from(DOMAIN);
    field(&mut text, Some(&row.seq.to_string()));
    field(&mut text, Some(&row.at));
    field(&mut text, row.user.as_deref());
    field(&mut text, Some(&row.operation));
    field(&mut text, row.namespace.as_deref());
    field(&mut text, row.target.as_deref());
    field(&mut text, row.address.as_deref());
    field(&mut text, Some(if row.allowed { "1" } else { "0" }));
    field(&mut text, row.reason.as_deref());
    field(&mut text, Some(&row.prev_hash));
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The newest row of the log: keep a copy elsewhere to find rows deleted from the end or a
/// rewritten chain later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditHead {
    /// Its `seq`.
    pub seq: i64,
    /// Its hash.
    pub hash: String,
}

/// How the chain breaks at a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BreakKind {
    /// The row's content does not hash to its stored hash: it was edited.
    Altered,
    /// Rows before this one are missing: its `seq` is not the next one.
    Missing,
    /// The row's `prev_hash` is not the previous row's hash: a row before it was removed and
    /// the rest renumbered, or the previous row was edited and its hash recomputed.
    Unlinked,
    /// A head recorded earlier is gone: rows were deleted from the end of the log.
    Truncated,
    /// A head recorded earlier has another hash now: the chain was rewritten up to it.
    Rewritten,
}

/// The first place the chain breaks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditBreak {
    /// The row where it breaks.
    pub seq: i64,
    /// How.
    pub kind: BreakKind,
    /// What the chain expects there: the hash of the row's content ([`BreakKind::Altered`]),
    /// the `seq` that should come next ([`BreakKind::Missing`]), the previous row's hash
    /// ([`BreakKind::Unlinked`]) or the recorded head's hash ([`BreakKind::Truncated`],
    /// [`BreakKind::Rewritten`]).
    pub expected: String,
    /// What the row holds instead.
    pub found: String,
}

impl AuditBreak {
    /// One sentence naming the row and what differs.
    pub fn describe(&self) -> String {
        match self.kind {
            BreakKind::Altered => format!(
                "row {} was altered: its content hashes to {}, but the row stores {}",
                self.seq, self.expected, self.found
            ),
            BreakKind::Missing => format!(
                "rows are missing before row {}: the next row should be {}, found {}",
                self.seq, self.expected, self.found
            ),
            BreakKind::Unlinked => format!(
                "row {} does not follow the row before it: its prev_hash is {}, but the previous row's hash is {}",
                self.seq, self.found, self.expected
            ),
            BreakKind::Truncated => format!(
                "rows were deleted from the end: the recorded head, row {} with hash {}, is gone ({})",
                self.seq, self.expected, self.found
            ),
            BreakKind::Rewritten => format!(
                "the chain was rewritten: row {} was recorded with hash {}, it now has {}",
                self.seq, self.expected, self.found
            ),
        }
    }
}

/// What `agents server audit verify` finds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditVerdict {
    /// Whether the whole chain holds.
    pub intact: bool,
    /// The rows checked (all of them when intact; up to and including the break otherwise).
    pub rows: u64,
    /// The newest row when intact (`None`: the log is empty).
    pub head: Option<AuditHead>,
    /// The first break, when not intact.
    pub first_break: Option<AuditBreak>,
}

/// Checks rows in `seq` order, one at a time, and stops at the first break.
#[derive(Debug)]
pub struct Verifier {
    rows: u64,
    last: Option<AuditHead>,
    broken: Option<AuditBreak>,
}

impl Default for Verifier {
    fn default() -> Self {
        Self::new()
    }
}

impl Verifier {
    /// A check of a log from its first row.
    pub fn new() -> Self {
        Self {
            rows: 0,
            last: None,
            broken: None,
        }
    }

    /// Checks the next row; `false` once the chain is broken (further rows are not looked at).
    pub fn check(&mut self, row: &StoredRow) -> bool {
        if self.broken.is_some() {
            return false;
        }
        self.rows += 1;
        let at = |kind, expected: String, found: String| AuditBreak {
            seq: row.seq,
            kind,
            expected,
            found,
        };
        let computed = hash(row);
        let (next_seq, prev_hash) = match &self.last {
            Some(h) => (h.seq + 1, h.hash.as_str()),
            None => (1, GENESIS),
        };
        self.broken = if computed != row.hash {
            Some(at(BreakKind::Altered, computed, row.hash.clone()))
        } else if row.seq != next_seq {
            Some(at(
                BreakKind::Missing,
                next_seq.to_string(),
                row.seq.to_string(),
            ))
        } else if row.prev_hash != prev_hash {
            Some(at(
                BreakKind::Unlinked,
                prev_hash.to_string(),
                row.prev_hash.clone(),
            ))
        } else {
            None
        };
        self.last = Some(AuditHead {
            seq: row.seq,
            hash: row.hash.clone(),
        });
        self.broken.is_none()
    }

    /// The verdict on the rows checked.
    pub fn finish(self) -> AuditVerdict {
        let intact = self.broken.is_none();
        AuditVerdict {
            intact,
            rows: self.rows,
            head: if intact { self.last } else { None },
            first_break: self.broken,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(n: i64) -> Vec<StoredRow> {
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|seq| {
                let mut row = StoredRow {
                    seq,
                    at: stored_time(Timestamp::from_second(1_800_000_000 + seq).unwrap()),
                    user: Some("alice".into()),
                    operation: "plan.apply".into(),
                    namespace: Some("acme".into()),
                    target: Some(format!("plan-{seq}")),
                    address: None,
                    allowed: seq % 2 == 0,
                    reason: (seq % 2 == 1).then(|| "viewer may not apply".into()),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                row.hash = hash(&row);
                prev = row.hash.clone();
                row
            })
            .collect()
    }

    fn verify(rows: &[StoredRow]) -> AuditVerdict {
        let mut v = Verifier::new();
        for r in rows {
            if !v.check(r) {
                break;
            }
        }
        v.finish()
    }

    #[test]
    fn stored_times_have_six_fractional_digits_so_the_text_sorts_as_the_times_do() {
        let whole = Timestamp::from_second(1_800_000_000).unwrap();
        let later = whole + jiff::SignedDuration::from_millis(100);
        assert_eq!(stored_time(whole), "2027-01-15T08:00:00.000000Z");
        assert!(stored_time(whole) < stored_time(later));
        assert_eq!(
            stored_time(whole).parse::<Timestamp>().unwrap(),
            whole,
            "the stored text reads back as the same time"
        );
    }

    #[test]
    fn every_field_changes_the_hash_and_absent_differs_from_empty() {
        let base = chain(1).remove(0);
        type Change = Box<dyn Fn(&mut StoredRow)>;
        let variants: Vec<Change> = vec![
            Box::new(|r| r.seq = 2),
            Box::new(|r| r.at.push('0')),
            Box::new(|r| r.user = None),
            Box::new(|r| r.user = Some(String::new())),
            Box::new(|r| r.operation = "plan.cancel".into()),
            Box::new(|r| r.namespace = Some("other".into())),
            Box::new(|r| r.target = None),
            Box::new(|r| r.address = Some("10.0.0.1".into())),
            Box::new(|r| r.allowed = !r.allowed),
            Box::new(|r| r.reason = None),
            Box::new(|r| r.prev_hash = "1".repeat(64)),
        ];
        for (i, change) in variants.iter().enumerate() {
            let mut row = base.clone();
            change(&mut row);
            assert_ne!(hash(&row), base.hash, "variant {i} kept the hash");
        }
        // Moving text from one field into the next does not collide.
        let mut a = base.clone();
        a.user = Some("al".into());
        a.operation = "iceplan.apply".into();
        let mut b = base.clone();
        b.user = Some("alice".into());
        b.operation = "plan.apply".into();
        assert_ne!(hash(&a), hash(&b));
    }

    #[test]
    fn an_untouched_chain_is_intact_and_names_its_head() {
        let rows = chain(5);
        let v = verify(&rows);
        assert!(v.intact, "{v:?}");
        assert_eq!(v.rows, 5);
        assert_eq!(
            v.head,
            Some(AuditHead {
                seq: 5,
                hash: rows[4].hash.clone()
            })
        );
        assert_eq!(rows[0].prev_hash, GENESIS);
        let empty = verify(&[]);
        assert!(empty.intact && empty.rows == 0 && empty.head.is_none());
    }

    #[test]
    fn an_edited_row_is_named_as_the_first_break() {
        let mut rows = chain(5);
        rows[2].reason = Some("edited by hand".into());
        rows[3].operation = "edited too".into();
        let v = verify(&rows);
        assert!(!v.intact);
        let b = v.first_break.unwrap();
        assert_eq!((b.seq, b.kind), (3, BreakKind::Altered));
        assert_eq!(b.found, rows[2].hash);
        assert_eq!(b.expected, hash(&rows[2]));
        assert_eq!(v.rows, 3);
        assert!(b.describe().starts_with("row 3 was altered"), "{}", b.describe());
    }

    #[test]
    fn a_deleted_middle_row_is_named_by_the_gap_it_leaves() {
        let mut rows = chain(5);
        rows.remove(2);
        let b = verify(&rows).first_break.unwrap();
        assert_eq!((b.seq, b.kind), (4, BreakKind::Missing));
        assert_eq!((b.expected.as_str(), b.found.as_str()), ("3", "4"));
        let mut first_gone = chain(3);
        first_gone.remove(0);
        let b = verify(&first_gone).first_break.unwrap();
        assert_eq!((b.seq, b.kind), (2, BreakKind::Missing));
    }

    #[test]
    fn a_row_whose_hash_was_recomputed_after_an_edit_breaks_the_next_rows_link() {
        let mut rows = chain(4);
        rows[1].target = Some("another plan".into());
        rows[1].hash = hash(&rows[1]);
        let b = verify(&rows).first_break.unwrap();
        assert_eq!((b.seq, b.kind), (3, BreakKind::Unlinked));
        assert_eq!(b.expected, rows[1].hash);
        assert_eq!(b.found, rows[2].prev_hash);
    }

    #[test]
    fn rows_deleted_from_the_end_leave_a_whole_chain_only_the_head_tells_apart() {
        // The limitation D-audit-1 records: the chain alone cannot see a truncated tail; the
        // head a verification reported earlier can.
        let rows = chain(5);
        let before = verify(&rows).head.unwrap();
        let truncated = verify(&rows[..3]);
        assert!(truncated.intact);
        assert_ne!(truncated.head.unwrap(), before);
    }
}
