//! The server's audit log (spec sections 21 and 28, "auditing", "audit logs for apply"):
//! every mutation and every denied request is appended with who asked, what, of which target,
//! when, from where and whether it was allowed; each row is chained to the one before by hash
//! ([`crate::audit`]), so [`Engine::audit_verify`] finds the first row edited or missing. The
//! API appends and reads only: there is no update and no delete.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::audit::Verifier;
pub use crate::audit::{AuditBreak, AuditHead, AuditRecord, AuditVerdict, BreakKind};
use crate::store::audit_log::{NewRow, RowFilter};

/// Rows [`Engine::audit_log`] returns when no limit is given.
pub const DEFAULT_LIMIT: u32 = 100;

/// Most rows one [`Engine::audit_log`] returns.
pub const MAX_LIMIT: u32 = 10_000;

/// Rows read per query while verifying.
const VERIFY_PAGE: u32 = 1_000;

/// Whether a request was carried out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum AuditOutcome {
    /// It was allowed (and, for a mutation, carried out).
    Allowed,
    /// It was refused.
    Denied {
        /// Why: the role or policy that would have allowed it.
        reason: String,
    },
}

/// One request to record: [`Engine::audit`] adds the time and the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditEntry {
    /// The user who asked (`None`: the server host itself, or no credential).
    pub user: Option<String>,
    /// What was asked (`plan.apply`, `org.member.add`, ...).
    pub operation: String,
    /// The namespace of the target (`acme` for `acme/deploy`).
    pub namespace: Option<String>,
    /// The target (a plan id, an item's name, a user).
    pub target: Option<String>,
    /// Where the request came from (the client's IP address).
    pub address: Option<String>,
    /// Allowed, or denied and why.
    #[serde(flatten)]
    pub outcome: AuditOutcome,
}

/// Which rows [`Engine::audit_log`] returns.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AuditFilter {
    /// Only this user's requests.
    #[serde(default)]
    pub user: Option<String>,
    /// Only requests whose target is in this namespace (an organization's, `agents server
    /// audit --org`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Only rows appended at or after this time.
    #[serde(default)]
    pub since: Option<Timestamp>,
    /// At most this many rows, the newest ([`DEFAULT_LIMIT`] when `None`, at most
    /// [`MAX_LIMIT`]).
    #[serde(default)]
    pub limit: Option<u32>,
}

/// The audit log's calls as the protocol carries them (`agents --server X server audit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "audit", rename_all = "snake_case")]
pub enum AuditRequest {
    /// The rows that pass the filter.
    List(AuditFilter),
    /// Checks the chain, and that it still holds a head recorded earlier.
    Verify {
        /// A head reported by an earlier verification.
        #[serde(default)]
        head: Option<AuditHead>,
    },
}

/// What an [`AuditRequest`] answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "audit", content = "data", rename_all = "snake_case")]
pub enum AuditView {
    /// [`AuditRequest::List`], oldest first.
    List(Vec<AuditRecord>),
    /// [`AuditRequest::Verify`].
    Verdict(AuditVerdict),
}

/// Answers `request` on `engine`.
///
/// # Errors
/// As [`Engine::audit_log`] and [`Engine::audit_verify_against`].
pub fn answer(engine: &Engine, request: AuditRequest) -> Result<AuditView, ApiError> {
    Ok(match request {
        AuditRequest::List(filter) => AuditView::List(engine.audit_log(&filter)?),
        AuditRequest::Verify { head } => {
            AuditView::Verdict(engine.audit_verify_against(head.as_ref())?)
        }
    })
}

fn invalid(message: impl Into<String>) -> ApiError {
    ApiError::InvalidInput {
        message: message.into(),
    }
}

impl Engine {
    /// Appends `entry` to the audit log, stamped with the time now, and returns the row.
    ///
    /// # Errors
    /// [`ApiError::InvalidInput`] for an empty operation or an empty reason of a denial;
    /// store errors (nothing is appended then).
    pub fn audit(&self, entry: &AuditEntry) -> Result<AuditRecord, ApiError> {
        if entry.operation.trim().is_empty() {
            return Err(invalid("an audit row needs an operation"));
        }
        let (allowed, reason) = match &entry.outcome {
            AuditOutcome::Allowed => (true, None),
            AuditOutcome::Denied { reason } if reason.trim().is_empty() => {
                return Err(invalid("a denied request's audit row needs its reason"));
            }
            AuditOutcome::Denied { reason } => (false, Some(reason.clone())),
        };
        Ok(self.store()?.append_audit(&NewRow {
            at: Timestamp::now(),
            user: entry.user.clone(),
            operation: entry.operation.clone(),
            namespace: entry.namespace.clone(),
            target: entry.target.clone(),
            address: entry.address.clone(),
            allowed,
            reason,
        })?)
    }

    /// The newest rows that pass `filter`, oldest first.
    ///
    /// # Errors
    /// [`ApiError::InvalidInput`] for a limit of 0 or over [`MAX_LIMIT`]; store errors.
    pub fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditRecord>, ApiError> {
        let limit = filter.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_LIMIT {
            return Err(invalid(format!(
                "limit {limit}: give a number from 1 to {MAX_LIMIT}"
            )));
        }
        Ok(self.store()?.audit_rows(&RowFilter {
            user: filter.user.clone(),
            namespace: filter.namespace.clone(),
            since: filter.since,
            limit,
        })?)
    }

    /// Checks the whole chain from its first row and names the first row edited or missing.
    ///
    /// # Errors
    /// Store errors.
    pub fn audit_verify(&self) -> Result<AuditVerdict, ApiError> {
        self.audit_verify_against(None)
    }

    /// [`Engine::audit_verify`], and that the log still holds `head` (reported by an earlier
    /// verification): this finds rows deleted from the end, and a chain rewritten from an
    /// edited row on, which the chain alone cannot show (D-audit-1).
    ///
    /// # Errors
    /// Store errors.
    pub fn audit_verify_against(&self, head: Option<&AuditHead>) -> Result<AuditVerdict, ApiError> {
        let store = self.store()?;
        let mut verifier = Verifier::new();
        let mut after = 0;
        let mut at_head: Option<String> = None;
        'pages: loop {
            let page = store.audit_page(after, VERIFY_PAGE)?;
            let Some(last) = page.last() else { break };
            after = last.seq;
            let full = page.len() == VERIFY_PAGE as usize;
            for row in &page {
                if head.is_some_and(|h| h.seq == row.seq) {
                    at_head = Some(row.hash.clone());
                }
                if !verifier.check(row) {
                    break 'pages;
                }
            }
            if !full {
                break;
            }
        }
        let mut verdict = verifier.finish();
        if let (true, Some(head)) = (verdict.intact, head) {
            let ends = verdict.head.as_ref().map_or(0, |h| h.seq);
            let broken = match at_head {
                None => Some(AuditBreak {
                    seq: head.seq,
                    kind: BreakKind::Truncated,
                    expected: head.hash.clone(),
                    found: format!("no row {} (the log ends at row {ends})", head.seq),
                }),
                Some(hash) if hash != head.hash => Some(AuditBreak {
                    seq: head.seq,
                    kind: BreakKind::Rewritten,
                    expected: head.hash.clone(),
                    found: hash,
                }),
                Some(_) => None,
            };
            if broken.is_some() {
                verdict.intact = false;
                verdict.head = None;
                verdict.first_break = broken;
            }
        }
        Ok(verdict)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::paths::Paths::at(dir.path(), dir.path().join("config.toml"));
        (dir, Engine::new(paths, super::super::Settings::default()))
    }

    fn entry(user: &str, operation: &str, outcome: AuditOutcome) -> AuditEntry {
        AuditEntry {
            user: Some(user.into()),
            operation: operation.into(),
            namespace: Some("acme".into()),
            target: Some("acme/deploy".into()),
            address: Some("192.0.2.7".into()),
            outcome,
        }
    }

    /// Runs one statement on the engine's SQLite file, as someone editing it by hand would.
    fn by_hand(engine: &Engine, sql: &str) {
        let conn = rusqlite::Connection::open(engine.paths().database()).unwrap();
        assert_eq!(conn.execute(sql, []).unwrap(), 1, "{sql}");
    }

    fn appended(engine: &Engine, n: usize) -> Vec<AuditRecord> {
        (0..n)
            .map(|i| {
                let outcome = if i % 3 == 2 {
                    AuditOutcome::Denied {
                        reason: "viewers may not apply".into(),
                    }
                } else {
                    AuditOutcome::Allowed
                };
                engine
                    .audit(&entry(&format!("user{}", i % 2), "plan.apply", outcome))
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn appended_rows_form_one_chain_from_the_genesis_value_and_verify_intact() {
        let (_dir, engine) = engine();
        let rows = appended(&engine, 4);
        assert_eq!(rows[0].seq, 1);
        assert_eq!(rows[0].prev_hash, crate::audit::GENESIS);
        for pair in rows.windows(2) {
            assert_eq!(pair[1].seq, pair[0].seq + 1);
            assert_eq!(pair[1].prev_hash, pair[0].hash);
        }
        assert!(!rows[2].allowed);
        assert_eq!(rows[2].reason.as_deref(), Some("viewers may not apply"));
        let verdict = engine.audit_verify().unwrap();
        assert!(verdict.intact, "{verdict:?}");
        assert_eq!(verdict.rows, 4);
        assert_eq!(
            verdict.head,
            Some(AuditHead {
                seq: 4,
                hash: rows[3].hash.clone()
            })
        );
        // What was appended is what is read back.
        assert_eq!(engine.audit_log(&AuditFilter::default()).unwrap(), rows);
    }

    #[test]
    fn a_row_edited_in_the_database_is_named() {
        let (_dir, engine) = engine();
        appended(&engine, 5);
        by_hand(
            &engine,
            "UPDATE audit_log SET allowed = 1, reason = NULL WHERE seq = 3",
        );
        let verdict = engine.audit_verify().unwrap();
        assert!(!verdict.intact);
        let b = verdict.first_break.unwrap();
        assert_eq!((b.seq, b.kind), (3, BreakKind::Altered));
        assert!(verdict.head.is_none());
    }

    #[test]
    fn a_row_deleted_from_the_middle_is_named_by_its_place() {
        let (_dir, engine) = engine();
        appended(&engine, 5);
        by_hand(&engine, "DELETE FROM audit_log WHERE seq = 2");
        let b = engine.audit_verify().unwrap().first_break.unwrap();
        assert_eq!((b.seq, b.kind), (3, BreakKind::Missing));
        assert_eq!(b.expected, "2");
    }

    #[test]
    fn rows_deleted_from_the_end_are_found_only_against_a_recorded_head() {
        let (_dir, engine) = engine();
        appended(&engine, 5);
        let head = engine.audit_verify().unwrap().head.unwrap();
        by_hand(&engine, "DELETE FROM audit_log WHERE seq = 5");
        // The chain alone is whole (D-audit-1) ...
        let alone = engine.audit_verify().unwrap();
        assert!(alone.intact && alone.rows == 4, "{alone:?}");
        // ... the head recorded before is not there any more.
        let against = engine.audit_verify_against(Some(&head)).unwrap();
        let b = against.first_break.unwrap();
        assert_eq!((b.seq, b.kind), (5, BreakKind::Truncated));
        // A log that grew since still holds its old head.
        appended(&engine, 2);
        let older = AuditHead {
            seq: 3,
            hash: engine.audit_log(&AuditFilter::default()).unwrap()[2]
                .hash
                .clone(),
        };
        assert!(engine.audit_verify_against(Some(&older)).unwrap().intact);
    }

    #[test]
    fn a_chain_rewritten_after_an_edit_is_found_against_a_recorded_head() {
        let (_dir, engine) = engine();
        let rows = appended(&engine, 3);
        let head = engine.audit_verify().unwrap().head.unwrap();
        // Rewrite the whole chain from row 1 with row 1's target changed: every hash is
        // recomputed, so the chain alone is whole.
        let conn = rusqlite::Connection::open(engine.paths().database()).unwrap();
        let mut prev = crate::audit::GENESIS.to_string();
        for r in &rows {
            let mut row = crate::audit::StoredRow {
                seq: r.seq,
                at: crate::audit::stored_time(r.at),
                user: r.user.clone(),
                operation: r.operation.clone(),
                namespace: r.namespace.clone(),
                target: if r.seq == 1 {
                    Some("something else".into())
                } else {
                    r.target.clone()
                },
                address: r.address.clone(),
                allowed: r.allowed,
                reason: r.reason.clone(),
                prev_hash: prev.clone(),
                hash: String::new(),
            };
            row.hash = crate::audit::hash(&row);
            conn.execute(
                "UPDATE audit_log SET target = ?1, prev_hash = ?2, hash = ?3 WHERE seq = ?4",
                rusqlite::params![row.target, row.prev_hash, row.hash, row.seq],
            )
            .unwrap();
            prev = row.hash;
        }
        assert!(engine.audit_verify().unwrap().intact);
        let b = engine
            .audit_verify_against(Some(&head))
            .unwrap()
            .first_break
            .unwrap();
        assert_eq!((b.seq, b.kind), (3, BreakKind::Rewritten));
    }

    #[test]
    fn concurrent_appends_from_two_threads_keep_one_chain() {
        let (_dir, engine) = engine();
        engine.schema_version().unwrap();
        std::thread::scope(|s| {
            for t in 0..2 {
                let engine = &engine;
                s.spawn(move || {
                    for i in 0..40 {
                        engine
                            .audit(&entry(
                                &format!("thread{t}"),
                                &format!("op{i}"),
                                AuditOutcome::Allowed,
                            ))
                            .unwrap();
                    }
                });
            }
        });
        let verdict = engine.audit_verify().unwrap();
        assert!(verdict.intact, "{verdict:?}");
        assert_eq!(verdict.rows, 80);
    }

    #[test]
    fn the_log_is_filtered_by_user_namespace_and_time_newest_rows_kept() {
        let (_dir, engine) = engine();
        let rows = appended(&engine, 6);
        let mut other = entry("user0", "org.member.add", AuditOutcome::Allowed);
        other.namespace = Some("globex".into());
        let globex = engine.audit(&other).unwrap();
        let by_user = engine
            .audit_log(&AuditFilter {
                user: Some("user1".into()),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(by_user.iter().map(|r| r.seq).collect::<Vec<_>>(), [2, 4, 6]);
        let by_org = engine
            .audit_log(&AuditFilter {
                namespace: Some("globex".into()),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(by_org, std::slice::from_ref(&globex));
        let newest = engine
            .audit_log(&AuditFilter {
                limit: Some(2),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(
            newest.iter().map(|r| r.seq).collect::<Vec<_>>(),
            [6, 7],
            "the newest rows, oldest first"
        );
        let since = engine
            .audit_log(&AuditFilter {
                since: Some(rows[5].at),
                ..AuditFilter::default()
            })
            .unwrap();
        assert_eq!(since.first().map(|r| r.seq), Some(6));
        assert!(matches!(
            engine.audit_log(&AuditFilter {
                limit: Some(0),
                ..AuditFilter::default()
            }),
            Err(ApiError::InvalidInput { .. })
        ));
    }

    #[test]
    fn an_entry_without_an_operation_or_a_denial_without_a_reason_is_refused_and_not_appended() {
        let (_dir, engine) = engine();
        let mut e = entry("alice", " ", AuditOutcome::Allowed);
        assert!(matches!(
            engine.audit(&e),
            Err(ApiError::InvalidInput { .. })
        ));
        e.operation = "plan.apply".into();
        e.outcome = AuditOutcome::Denied {
            reason: String::new(),
        };
        assert!(matches!(
            engine.audit(&e),
            Err(ApiError::InvalidInput { .. })
        ));
        assert!(
            engine
                .audit_log(&AuditFilter::default())
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn an_entry_crosses_the_protocol_with_its_outcome_flattened() {
        let e = entry(
            "alice",
            "plan.apply",
            AuditOutcome::Denied {
                reason: "viewer".into(),
            },
        );
        let json = serde_json::to_value(&e).unwrap();
        assert_eq!(json["outcome"], "denied");
        assert_eq!(json["reason"], "viewer");
        assert_eq!(serde_json::from_value::<AuditEntry>(json).unwrap(), e);
    }
}
