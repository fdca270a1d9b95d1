//! Decision rows and their dependencies (spec section 08, "Decision-tree SQL").

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};
use crate::domain::decision::{Decision, Step};
use crate::domain::id::Id;

const COLUMNS: &str = "decision_id, plan_id, parent_decision_id, sequence_number, attempt, decision_type, question, \
    chosen_option, alternatives_considered, confidence_score, rationale, actor_reasoning, context_snapshot, step, \
    is_correction, corrects_decision_id, correction_reason, superseded_by, created_at";

fn corrupt(column: &'static str, message: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: "decisions",
        column,
        message: message.to_string(),
    }
}

fn opt_id(column: &'static str, v: Option<String>) -> Result<Option<Id>, StoreError> {
    v.map(|s| s.parse().map_err(|e| corrupt(column, e)))
        .transpose()
}

fn read(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Result<Decision, StoreError>> {
    let text = |i| r.get::<_, String>(i);
    let opt = |i| r.get::<_, Option<String>>(i);
    let (id, plan, parent, seq, attempt, kind) = (
        text(0)?,
        text(1)?,
        opt(2)?,
        r.get::<_, i64>(3)?,
        r.get::<_, i64>(4)?,
        text(5)?,
    );
    let (question, chosen, alternatives, confidence) =
        (opt(6)?, text(7)?, text(8)?, r.get::<_, Option<f64>>(9)?);
    let (rationale, reasoning, snapshot, step) = (opt(10)?, opt(11)?, text(12)?, opt(13)?);
    let (is_correction, corrects, reason, superseded, created) = (
        r.get::<_, i64>(14)?,
        opt(15)?,
        opt(16)?,
        opt(17)?,
        text(18)?,
    );
    Ok((|| {
        Ok(Decision {
            decision_id: id.parse().map_err(|e| corrupt("decision_id", e))?,
            plan_id: plan.parse().map_err(|e| corrupt("plan_id", e))?,
            parent_decision_id: opt_id("parent_decision_id", parent)?,
            sequence_number: u32::try_from(seq).map_err(|e| corrupt("sequence_number", e))?,
            attempt: u32::try_from(attempt).map_err(|e| corrupt("attempt", e))?,
            decision_type: kind
                .parse()
                .map_err(|e: String| corrupt("decision_type", e))?,
            question,
            chosen_option: chosen,
            alternatives_considered: serde_json::from_str(&alternatives)
                .map_err(|e| corrupt("alternatives_considered", e))?,
            confidence_score: confidence,
            rationale,
            actor_reasoning: reasoning,
            context_snapshot: serde_json::from_str(&snapshot)
                .map_err(|e| corrupt("context_snapshot", e))?,
            step: step
                .map(|s| serde_json::from_str::<Step>(&s).map_err(|e| corrupt("step", e)))
                .transpose()?,
            is_correction: is_correction != 0,
            corrects_decision_id: opt_id("corrects_decision_id", corrects)?,
            correction_reason: reason,
            superseded_by: opt_id("superseded_by", superseded)?,
            created_at: created
                .parse()
                .map_err(|e: jiff::Error| corrupt("created_at", e))?,
        })
    })())
}

impl Store {
    /// Stores a decision, giving it the plan's next sequence number (returned).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (for example an unknown plan or parent).
    pub fn insert_decision(&mut self, decision: &Decision) -> Result<u32, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let seq = insert_in(&tx, decision)?;
        tx.commit()?;
        Ok(seq)
    }

    /// One decision by id.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn decision(&self, id: &Id) -> Result<Option<Decision>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM decisions WHERE decision_id = ?1"),
                [id.to_string()],
                read,
            )
            .optional()?
            .transpose()
    }

    /// Every decision of a plan in sequence order (superseded ones included).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn decisions(&self, plan_id: &Id) -> Result<Vec<Decision>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM decisions WHERE plan_id = ?1 ORDER BY sequence_number"
        ))?;
        let rows = stmt
            .query_map([plan_id.to_string()], read)?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().collect()
    }

    /// Records that `downstream` depends on `upstream` (`dependency_type`: `decision`, `plan`,
    /// `artifact`, `step` or `checkpoint`; `downstream_ref` names the dependent thing).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn add_decision_dependency(
        &mut self,
        upstream: &Id,
        downstream: &Id,
        dependency_type: &str,
        downstream_ref: &str,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT OR IGNORE INTO decision_dependencies VALUES (?1, ?2, ?3, ?4)",
            params![
                upstream.to_string(),
                downstream.to_string(),
                dependency_type,
                downstream_ref
            ],
        )?;
        Ok(())
    }

    /// Decisions that depend directly on `upstream`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn dependents(&self, upstream: &Id) -> Result<Vec<Id>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT DISTINCT downstream_decision_id FROM decision_dependencies WHERE upstream_decision_id = ?1 AND dependency_type = 'decision' ORDER BY 1",
        )?;
        let ids: Vec<String> = stmt
            .query_map([upstream.to_string()], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        ids.into_iter()
            .map(|s| s.parse().map_err(|e| corrupt("downstream_decision_id", e)))
            .collect()
    }
}

/// Inserts a decision on an open transaction, giving it the plan's next sequence number
/// (returned).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn insert_in(tx: &crate::store::Connection, decision: &Decision) -> Result<u32, StoreError> {
    let seq: i64 = tx.query_row(
        "SELECT coalesce(max(sequence_number), 0) + 1 FROM decisions WHERE plan_id = ?1",
        [decision.plan_id.to_string()],
        |r| r.get(0),
    )?;
    tx.execute(
        &format!("INSERT INTO decisions ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)"),
        params![
            decision.decision_id.to_string(),
            decision.plan_id.to_string(),
            decision.parent_decision_id.map(|i| i.to_string()),
            seq,
            decision.attempt,
            decision.decision_type.as_str(),
            decision.question,
            decision.chosen_option,
            serde_json::to_string(&decision.alternatives_considered).expect("strings serialize"),
            decision.confidence_score,
            decision.rationale,
            decision.actor_reasoning,
            decision.context_snapshot.to_string(),
            decision.step.as_ref().map(|s| serde_json::to_string(s).expect("steps serialize")),
            i64::from(decision.is_correction),
            decision.corrects_decision_id.map(|i| i.to_string()),
            decision.correction_reason,
            decision.superseded_by.map(|i| i.to_string()),
            decision.created_at.to_string(),
        ],
    )?;
    Ok(u32::try_from(seq).unwrap_or(u32::MAX))
}

/// Records a `decision` dependency `upstream -> downstream` on an open transaction.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn depend_in(
    tx: &crate::store::Connection,
    upstream: &Id,
    downstream: &Id,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT OR IGNORE INTO decision_dependencies VALUES (?1, ?2, 'decision', ?2)",
        params![upstream.to_string(), downstream.to_string()],
    )?;
    Ok(())
}

/// Updates what a decision chose and its alternatives (a human picked another option), on an
/// open transaction.
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn rechoose_in(
    tx: &crate::store::Connection,
    decision: &Id,
    chosen: &str,
    alternatives: &[String],
    rationale: &str,
) -> Result<(), StoreError> {
    tx.execute(
        "UPDATE decisions SET chosen_option = ?2, alternatives_considered = ?3, rationale = ?4 WHERE decision_id = ?1",
        params![
            decision.to_string(),
            chosen,
            serde_json::to_string(alternatives).expect("strings serialize"),
            rationale
        ],
    )?;
    Ok(())
}

/// Marks every current decision of a plan except `keep` as superseded by `by`, on an open
/// transaction (a re-run of Strategize replaces the old tree; the old one stays for audit).
///
/// # Errors
/// [`StoreError::Sqlite`].
pub(crate) fn supersede_all_in(
    tx: &crate::store::Connection,
    plan: &Id,
    by: &Id,
    keep: &[Id],
) -> Result<usize, StoreError> {
    let keep: Vec<String> = keep.iter().map(Id::to_string).collect();
    let mut stmt = tx.prepare(
        "SELECT decision_id FROM decisions WHERE plan_id = ?1 AND superseded_by IS NULL AND decision_id != ?2",
    )?;
    let ids: Vec<String> = stmt
        .query_map(params![plan.to_string(), by.to_string()], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut n = 0;
    for id in ids.into_iter().filter(|i| !keep.contains(i)) {
        n += tx.execute(
            "UPDATE decisions SET superseded_by = ?2 WHERE decision_id = ?1",
            params![id, by.to_string()],
        )?;
    }
    Ok(n)
}

impl Store {
    /// Decisions that `downstream` depends on directly.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn dependencies_of(&self, downstream: &Id) -> Result<Vec<Id>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT DISTINCT upstream_decision_id FROM decision_dependencies WHERE downstream_decision_id = ?1 AND dependency_type = 'decision' ORDER BY 1",
        )?;
        let ids: Vec<String> = stmt
            .query_map([downstream.to_string()], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        ids.into_iter()
            .map(|s| s.parse().map_err(|e| corrupt("upstream_decision_id", e)))
            .collect()
    }
}

/// One `decision_dependencies` row seen from its upstream decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DownstreamLink {
    /// The dependent decision.
    pub downstream: Id,
    /// `decision`, `plan`, `artifact`, `step` or `checkpoint`.
    pub dependency_type: String,
    /// What depends (for `plan`: the child plan's id).
    pub downstream_ref: String,
}

impl Store {
    /// Every dependency row whose upstream is `upstream`, of any type, ordered by downstream
    /// id (read-only; the TUI's explanation walks these for a decision's impact).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn downstream_links(&self, upstream: &Id) -> Result<Vec<DownstreamLink>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT downstream_decision_id, dependency_type, downstream_ref FROM decision_dependencies WHERE upstream_decision_id = ?1 ORDER BY 1, 2, 3",
        )?;
        let rows: Vec<(String, String, String)> = stmt
            .query_map([upstream.to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(d, t, r)| {
                Ok(DownstreamLink {
                    downstream: d
                        .parse()
                        .map_err(|e| corrupt("downstream_decision_id", e))?,
                    dependency_type: t,
                    downstream_ref: r,
                })
            })
            .collect()
    }

    /// The child plans spawned by a plan's decisions: (spawning decision, child plan id) for
    /// every `plan` dependency whose upstream decision belongs to `plan_id` (interfaces:
    /// children -> tree).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn child_plan_links(&self, plan_id: &Id) -> Result<Vec<(Id, String)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT d.upstream_decision_id, d.downstream_ref FROM decision_dependencies d \
             JOIN decisions u ON u.decision_id = d.upstream_decision_id \
             WHERE u.plan_id = ?1 AND d.dependency_type = 'plan' ORDER BY u.sequence_number, 2",
        )?;
        let rows: Vec<(String, String)> = stmt
            .query_map([plan_id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(u, child)| {
                Ok((
                    u.parse().map_err(|e| corrupt("upstream_decision_id", e))?,
                    child,
                ))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::decision::DecisionType;
    use crate::domain::plan::Plan;
    use jiff::Timestamp;

    #[test]
    fn decisions_get_sequence_numbers_and_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let root = Decision::new(
            plan.plan_id,
            DecisionType::PromptDefinition,
            "Format the code",
            Timestamp::now(),
        );
        let mut step = Decision::new(
            plan.plan_id,
            DecisionType::ImplementationChoice,
            "run rustfmt",
            Timestamp::now(),
        );
        step.parent_decision_id = Some(root.decision_id);
        step.alternatives_considered = vec!["run rustfmt".into(), "leave as is".into()];
        step.confidence_score = Some(0.9);
        step.step = Some(Step {
            instructions: "cargo fmt".into(),
            expected_outputs: vec![],
            ..Default::default()
        });
        assert_eq!(store.insert_decision(&root).unwrap(), 1);
        assert_eq!(store.insert_decision(&step).unwrap(), 2);
        store
            .add_decision_dependency(
                &root.decision_id,
                &step.decision_id,
                "decision",
                &step.decision_id.to_string(),
            )
            .unwrap();
        let all = store.decisions(&plan.plan_id).unwrap();
        assert_eq!(all.len(), 2);
        let mut expected = step.clone();
        expected.sequence_number = 2;
        assert_eq!(all[1], expected);
        assert_eq!(
            store.dependents(&root.decision_id).unwrap(),
            [step.decision_id]
        );
    }

    #[test]
    fn confidence_outside_zero_to_one_is_refused_by_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let mut d = Decision::new(
            plan.plan_id,
            DecisionType::StrategyChoice,
            "x",
            Timestamp::now(),
        );
        d.confidence_score = Some(1.5);
        assert!(store.insert_decision(&d).is_err());
        assert!(store.decisions(&plan.plan_id).unwrap().is_empty());
    }
}
