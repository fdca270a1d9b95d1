//! Plan rows: insert, load, list, resolve ids and prefixes, count.

use rusqlite::{OptionalExtension, params};
use crate::store::db::Row;
use serde::de::DeserializeOwned;

use super::{Store, StoreError};
use crate::domain::id::{Id, IdPrefixError, resolve_prefix};
use crate::domain::lifecycle::{PlanStatus, ProcessingState};
use crate::domain::plan::Plan;

/// Plan counts by state, for `info`.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
pub struct PlanCounts {
    /// Every plan.
    pub total: u64,
    /// Plans currently being processed.
    pub processing: u64,
    /// Plans not yet finished (not applied and not cancelled).
    pub active: u64,
    /// Errored plans.
    pub errored: u64,
}

const COLUMNS: &str = "plan_id, name, action_name, phase, state, attempt, description, definition_of_done, \
    project_links, automation_profile, automation_level, effective_profile_snapshot, strategy_actor, \
    execution_actor, estimation_actor, invariant_actor, arguments, invariants, changeset_id, sandbox_refs, \
    validation_summary, decision_root_id, error_code, error_message, tags, created_at, updated_at, started_at, \
    completed_at, parent_plan_id, root_plan_id";

/// [`COLUMNS`] with the columns a listing does not show replaced by empty values.
const SUMMARY_COLUMNS: &str = "plan_id, name, action_name, phase, state, attempt, NULL, NULL, \
    project_links, automation_profile, automation_level, NULL, strategy_actor, \
    execution_actor, estimation_actor, invariant_actor, '{}', '[]', NULL, '[]', \
    NULL, decision_root_id, error_code, error_message, '[]', created_at, updated_at, started_at, \
    completed_at, parent_plan_id, root_plan_id";

fn to_json<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string(v).expect("plan fields always serialize")
}

fn from_json<T: DeserializeOwned>(column: &'static str, text: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table: "plans",
        column,
        message: e.to_string(),
    })
}

fn parse<T: std::str::FromStr>(column: &'static str, text: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.parse().map_err(|e: T::Err| StoreError::Corrupt {
        table: "plans",
        column,
        message: e.to_string(),
    })
}

fn opt_parse<T: std::str::FromStr>(
    column: &'static str,
    text: Option<String>,
) -> Result<Option<T>, StoreError>
where
    T::Err: std::fmt::Display,
{
    text.map(|t| parse(column, &t)).transpose()
}

/// Raw column values, converted after the row callback so that conversion errors are typed.
struct RawPlan(Vec<Option<String>>, i64);

fn raw(row: &Row<'_>) -> rusqlite::Result<RawPlan> {
    let mut cols = Vec::with_capacity(31);
    for i in 0..31 {
        if i == 5 {
            cols.push(None);
        } else {
            cols.push(row.get::<_, Option<String>>(i)?);
        }
    }
    Ok(RawPlan(cols, row.get(5)?))
}

impl RawPlan {
    fn into_plan(self) -> Result<Plan, StoreError> {
        let RawPlan(mut c, attempt) = self;
        let mut take = |i: usize| c[i].take();
        let req = |v: Option<String>, column: &'static str| {
            v.ok_or(StoreError::Corrupt {
                table: "plans",
                column,
                message: "unexpected NULL".into(),
            })
        };
        let plan_id = parse("plan_id", &req(take(0), "plan_id")?)?;
        let name = req(take(1), "name")?;
        let action_name = req(take(2), "action_name")?;
        let phase = parse("phase", &req(take(3), "phase")?)?;
        let state = parse("state", &req(take(4), "state")?)?;
        Ok(Plan {
            plan_id,
            name,
            action_name,
            status: PlanStatus {
                phase,
                state,
                attempt: u32::try_from(attempt).unwrap_or(1),
            },
            description: take(6),
            definition_of_done: take(7),
            project_links: from_json("project_links", &req(take(8), "project_links")?)?,
            automation_profile: take(9),
            automation_level: parse("automation_level", &req(take(10), "automation_level")?)?,
            effective_profile_snapshot: take(11)
                .map(|t| from_json("effective_profile_snapshot", &t))
                .transpose()?,
            strategy_actor: take(12),
            execution_actor: take(13),
            estimation_actor: take(14),
            invariant_actor: take(15),
            arguments: from_json("arguments", &req(take(16), "arguments")?)?,
            invariants: from_json("invariants", &req(take(17), "invariants")?)?,
            changeset_id: take(18),
            sandbox_refs: from_json("sandbox_refs", &req(take(19), "sandbox_refs")?)?,
            validation_summary: take(20)
                .map(|t| from_json("validation_summary", &t))
                .transpose()?,
            decision_root_id: opt_parse("decision_root_id", take(21))?,
            error_code: take(22),
            error_message: take(23),
            tags: from_json("tags", &req(take(24), "tags")?)?,
            created_at: parse("created_at", &req(take(25), "created_at")?)?,
            updated_at: parse("updated_at", &req(take(26), "updated_at")?)?,
            started_at: opt_parse("started_at", take(27))?,
            completed_at: opt_parse("completed_at", take(28))?,
            parent_plan_id: opt_parse("parent_plan_id", take(29))?,
            root_plan_id: opt_parse("root_plan_id", take(30))?,
        })
    }
}

/// Inserts a plan row on an open connection or transaction (the caller commits).
pub(crate) fn insert_plan_row(conn: &crate::store::Connection, plan: &Plan) -> Result<(), StoreError> {
    conn.execute(
            &format!("INSERT INTO plans ({COLUMNS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, \
                ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30, ?31)"),
            params![
                plan.plan_id.to_string(),
                plan.name,
                plan.action_name,
                plan.status.phase.as_str(),
                plan.status.state.as_str(),
                plan.status.attempt,
                plan.description,
                plan.definition_of_done,
                to_json(&plan.project_links),
                plan.automation_profile,
                plan.automation_level.as_str(),
                plan.effective_profile_snapshot.as_ref().map(to_json),
                plan.strategy_actor,
                plan.execution_actor,
                plan.estimation_actor,
                plan.invariant_actor,
                to_json(&plan.arguments),
                to_json(&plan.invariants),
                plan.changeset_id,
                to_json(&plan.sandbox_refs),
                plan.validation_summary.as_ref().map(to_json),
                plan.decision_root_id.map(|i| i.to_string()),
                plan.error_code,
                plan.error_message,
                to_json(&plan.tags),
                plan.created_at.to_string(),
                plan.updated_at.to_string(),
                plan.started_at.map(|t| t.to_string()),
                plan.completed_at.map(|t| t.to_string()),
                plan.parent_plan_id.map(|i| i.to_string()),
                plan.root_plan_id.map(|i| i.to_string()),
            ],
        )?;
    Ok(())
}

impl Store {
    /// Inserts a new plan in one transaction.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (for example a duplicate id or a missing parent plan).
    pub fn insert_plan(&mut self, plan: &Plan) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        insert_plan_row(&tx, plan)?;
        tx.commit()?;
        Ok(())
    }

    /// Inserts the plans row of an isolated actor run (`agents actor run`): kind
    /// `actor_run`, so that plan listings and counts leave it out and the lifecycle refuses
    /// to drive it, while its sandbox, checkpoints and execution log work as for a plan.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn insert_actor_run_plan(&mut self, plan: &Plan) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        insert_plan_row(&tx, plan)?;
        tx.execute(
            "UPDATE plans SET kind = 'actor_run' WHERE plan_id = ?1",
            [plan.plan_id.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Whether `id` is an isolated actor run rather than a plan.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn is_actor_run(&self, id: &Id) -> Result<bool, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT kind = 'actor_run' FROM plans WHERE plan_id = ?1",
                [id.to_string()],
                |r| r.get::<_, bool>(0),
            )
            .optional()?
            .unwrap_or(false))
    }

    /// Loads a plan by full id.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn plan(&self, id: &Id) -> Result<Option<Plan>, StoreError> {
        let raw = self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM plans WHERE plan_id = ?1"),
                [id.to_string()],
                raw,
            )
            .optional()?;
        raw.map(RawPlan::into_plan).transpose()
    }

    /// Every plan, newest first (isolated actor runs are not plans and are left out).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn plans(&self) -> Result<Vec<Plan>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM plans WHERE kind = 'plan' ORDER BY plan_id DESC"
        ))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(RawPlan::into_plan).collect()
    }

    /// Every plan, newest first, as [`Store::plans`] but reading only what a listing shows
    /// (id, name, action, phase, state, attempt, projects, profile, level, actors, parent and
    /// root, times, error): the description, definition of done, profile snapshot, arguments,
    /// invariants, change set, sandbox refs, validation summary and tags come back empty.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn plan_summaries(&self) -> Result<Vec<Plan>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {SUMMARY_COLUMNS} FROM plans WHERE kind = 'plan' ORDER BY plan_id DESC"
        ))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(RawPlan::into_plan).collect()
    }

    /// Resolves a full plan id or a unique prefix of at least 4 characters.
    ///
    /// # Errors
    /// `Ok(Err(..))` with [`IdPrefixError`] when nothing or several plans match.
    pub fn resolve_plan_id(&self, input: &str) -> Result<Result<Id, IdPrefixError>, StoreError> {
        let prefix = input.to_ascii_uppercase();
        let mut stmt = self.conn().prepare("SELECT plan_id FROM plans WHERE substr(plan_id, 1, length(?1)) = ?1 ORDER BY plan_id LIMIT 20")?;
        let ids: Vec<String> = stmt
            .query_map([&prefix], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(resolve_prefix("plan", input, ids)
            .map(|s| s.parse().expect("stored plan ids are ULIDs")))
    }

    /// Saves a new lifecycle status (phase, state, attempt) for a plan and touches `updated_at`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn update_plan_status(
        &mut self,
        id: &Id,
        status: PlanStatus,
        now: jiff::Timestamp,
    ) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute(
            "UPDATE plans SET phase = ?2, state = ?3, attempt = ?4, updated_at = ?5 WHERE plan_id = ?1",
            params![id.to_string(), status.phase.as_str(), status.state.as_str(), status.attempt, now.to_string()],
        )?;
        tx.commit()?;
        Ok(n == 1)
    }

    /// Counts plans by state.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn plan_counts(&self) -> Result<PlanCounts, StoreError> {
        let processing = ProcessingState::Processing.as_str();
        let errored = ProcessingState::Errored.as_str();
        Ok(self.conn().query_row(
            "SELECT count(*), \
                    count(*) FILTER (WHERE state = ?1), \
                    count(*) FILTER (WHERE phase != 'applied' AND state != 'cancelled'), \
                    count(*) FILTER (WHERE state = ?2) \
             FROM plans WHERE kind = 'plan'",
            [processing, errored],
            |r| {
                let n = |i| r.get::<_, i64>(i).map(|v| u64::try_from(v).unwrap_or(0));
                Ok(PlanCounts {
                    total: n(0)?,
                    processing: n(1)?,
                    active: n(2)?,
                    errored: n(3)?,
                })
            },
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::lifecycle::Phase;
    use crate::domain::plan::{InvariantScope, PlanInvariant, ProjectLink};
    use jiff::Timestamp;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        (dir, store)
    }

    #[test]
    fn a_plan_round_trips_with_every_field() {
        let (_dir, mut store) = store();
        let mut plan = Plan::new("local/review", "review", Timestamp::now());
        plan.project_links
            .push(ProjectLink::new("local/api", Some("api"), true).unwrap());
        plan.invariants.push(PlanInvariant {
            text: "no new deps".into(),
            scope: InvariantScope::Plan,
            source_name: None,
            invariant_id: None,
            key: None,
        });
        plan.arguments.insert("b".into(), serde_json::json!(2));
        plan.arguments.insert("a".into(), serde_json::json!("x"));
        plan.effective_profile_snapshot = Some(serde_json::json!({"auto_apply": false}));
        plan.started_at = Some(Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let loaded = store.plan(&plan.plan_id).unwrap().unwrap();
        assert_eq!(loaded, plan);
        assert_eq!(
            loaded.arguments.keys().collect::<Vec<_>>(),
            ["b", "a"],
            "argument order is kept"
        );
    }

    #[test]
    fn prefixes_resolve_and_counts_follow_states() {
        let (_dir, mut store) = store();
        let a = Plan::new("local/a", "a", Timestamp::now());
        let mut b = Plan::new("local/b", "b", Timestamp::now());
        store.insert_plan(&a).unwrap();
        store.insert_plan(&b).unwrap();
        let full = a.plan_id.to_string();
        assert_eq!(
            store
                .resolve_plan_id(&full[..20].to_lowercase())
                .unwrap()
                .unwrap(),
            a.plan_id
        );
        assert!(matches!(
            store.resolve_plan_id("ZZZZ").unwrap(),
            Err(IdPrefixError::NotFound { .. })
        ));
        b.status.set_state(ProcessingState::Processing).unwrap();
        store
            .update_plan_status(&b.plan_id, b.status, Timestamp::now())
            .unwrap();
        let counts = store.plan_counts().unwrap();
        assert_eq!(
            counts,
            PlanCounts {
                total: 2,
                processing: 1,
                active: 2,
                errored: 0
            }
        );
        assert_eq!(store.plans().unwrap().len(), 2);
        assert_eq!(
            store.plan(&b.plan_id).unwrap().unwrap().phase(),
            Phase::Strategize
        );
    }
}
