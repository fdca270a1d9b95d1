//! Actions (table `actions`) and their action-level invariants.

use rusqlite::{OptionalExtension, params};
use crate::store::Connection;

use super::codec::{from_json, opt_ts, to_json, ts};
use super::events::registry_changed;
use super::{Store, StoreError};
use crate::domain::action::Action;
use crate::domain::event::{Change, Registry};
use crate::domain::invariant::NewInvariant;
use crate::domain::{ActionState, Id, InvariantScope};

const COLS: &str = "action_id, name, state, description, long_description, definition_of_done, strategy_actor, \
    execution_actor, estimation_actor, invariant_actor, automation_profile, reusable, read_only, arguments, script, \
    sandbox, config_path, created_at, updated_at, archived_at, version";

/// Rows of actions that exist (a deleted action that finished plans still point to is kept,
/// hidden, with `deleted_at` set).
const LIVE: &str = "deleted_at IS NULL";

struct Raw {
    s: Vec<Option<String>>,
    reusable: bool,
    read_only: bool,
    version: i64,
}

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    let mut s = Vec::with_capacity(20);
    for i in 0..20 {
        if i == 11 || i == 12 {
            s.push(None);
        } else {
            s.push(r.get::<_, Option<String>>(i)?);
        }
    }
    Ok(Raw {
        s,
        reusable: r.get(11)?,
        read_only: r.get(12)?,
        version: r.get(20)?,
    })
}

fn convert(raw: Raw) -> Result<Action, StoreError> {
    const T: &str = "actions";
    let Raw {
        mut s,
        reusable,
        read_only,
        version,
    } = raw;
    let mut take = |i: usize| s[i].take();
    let req = |v: Option<String>, column: &'static str| {
        v.ok_or(StoreError::Corrupt {
            table: T,
            column,
            message: "unexpected NULL".into(),
        })
    };
    let corrupt = |column, message: String| StoreError::Corrupt {
        table: T,
        column,
        message,
    };
    Ok(Action {
        action_id: req(take(0), "action_id")?
            .parse()
            .map_err(|e: ulid::DecodeError| corrupt("action_id", e.to_string()))?,
        name: req(take(1), "name")?,
        state: req(take(2), "state")?
            .parse::<ActionState>()
            .map_err(|e| corrupt("state", e))?,
        description: take(3),
        long_description: take(4),
        definition_of_done: req(take(5), "definition_of_done")?,
        strategy_actor: req(take(6), "strategy_actor")?,
        execution_actor: req(take(7), "execution_actor")?,
        estimation_actor: take(8),
        invariant_actor: take(9),
        automation_profile: take(10),
        reusable,
        read_only,
        arguments: from_json(T, "arguments", &req(take(13), "arguments")?)?,
        script: take(14).map(|t| from_json(T, "script", &t)).transpose()?,
        sandbox: take(15).map(|t| from_json(T, "sandbox", &t)).transpose()?,
        config_path: take(16),
        created_at: ts(T, "created_at", &req(take(17), "created_at")?)?,
        updated_at: ts(T, "updated_at", &req(take(18), "updated_at")?)?,
        archived_at: opt_ts(T, "archived_at", take(19))?,
        version: u32::try_from(version).map_err(|e| corrupt("version", e.to_string()))?,
    })
}

/// Sets an action's state on an open connection or transaction.
pub(crate) fn set_state(conn: &Connection, a: &Action) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE actions SET state = ?2, updated_at = ?3, archived_at = ?4 WHERE action_id = ?1",
        params![
            a.action_id.to_string(),
            a.state.as_str(),
            a.updated_at.to_string(),
            a.archived_at.map(|t| t.to_string())
        ],
    )?;
    Ok(())
}

impl Store {
    /// Inserts a new action and its action-level invariants in one transaction; returns the
    /// invariants' `(id, text)`.
    ///
    /// # Errors
    /// Store errors (for example a duplicate name).
    pub fn insert_action(
        &mut self,
        a: &Action,
        invariants: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            &format!("INSERT INTO actions ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)"),
            params![
                a.action_id.to_string(),
                a.name,
                a.state.as_str(),
                a.description,
                a.long_description,
                a.definition_of_done,
                a.strategy_actor,
                a.execution_actor,
                a.estimation_actor,
                a.invariant_actor,
                a.automation_profile,
                a.reusable,
                a.read_only,
                to_json(&a.arguments),
                a.script.as_ref().map(to_json),
                a.sandbox.as_ref().map(to_json),
                a.config_path,
                a.created_at.to_string(),
                a.updated_at.to_string(),
                a.archived_at.map(|t| t.to_string()),
                a.version,
            ],
        )?;
        let rows: Vec<NewInvariant> = invariants
            .iter()
            .map(|t| {
                let mut r = NewInvariant::new(t, None, InvariantScope::Action);
                r.action_id = Some(a.action_id.to_string());
                r
            })
            .collect();
        super::invariants::insert_rows(&tx, &rows, &a.created_at.to_string())?;
        registry_changed(&tx, Registry::Action, &a.name, Change::Added)?;
        tx.commit()?;
        Ok(rows.into_iter().map(|r| (r.invariant_id, r.text)).collect())
    }

    /// An action by exact name.
    ///
    /// # Errors
    /// Store errors.
    pub fn action_by_name(&self, name: &str) -> Result<Option<Action>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM actions WHERE name = ?1 AND {LIVE}"),
                [name],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// An action by full id.
    ///
    /// # Errors
    /// Store errors.
    pub fn action_by_id(&self, id: &str) -> Result<Option<Action>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM actions WHERE action_id = ?1 AND {LIVE}"),
                [id.to_ascii_uppercase()],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every action id.
    ///
    /// # Errors
    /// Store errors.
    pub fn action_ids(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT action_id FROM actions WHERE {LIVE}"))?;
        Ok(stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Every action, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn actions(&self) -> Result<Vec<Action>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLS} FROM actions WHERE {LIVE} ORDER BY name"
        ))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Saves an action's state and times (one transaction).
    ///
    /// # Errors
    /// Store errors.
    pub fn update_action_state(&mut self, a: &Action) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        set_state(&tx, a)?;
        registry_changed(&tx, Registry::Action, &a.name, Change::Updated)?;
        tx.commit()?;
        Ok(())
    }

    /// Names of actions that name `actor` as one of their actors.
    ///
    /// # Errors
    /// Store errors.
    pub fn actions_referencing_actor(&self, actor: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT name FROM actions WHERE deleted_at IS NULL AND ?1 IN (strategy_actor, execution_actor, estimation_actor, invariant_actor) ORDER BY name",
        )?;
        Ok(stmt
            .query_map([actor], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Replaces an action's definition in place (same id; `version` as given) and adds the
    /// action-level invariants `new_invariants`, in one transaction; returns the added
    /// invariants' `(id, text)`.
    ///
    /// # Errors
    /// Store errors; nothing is written then.
    pub fn update_action(
        &mut self,
        a: &Action,
        new_invariants: &[String],
    ) -> Result<Vec<(String, String)>, StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "UPDATE actions SET state = ?2, description = ?3, long_description = ?4, definition_of_done = ?5, \
             strategy_actor = ?6, execution_actor = ?7, estimation_actor = ?8, invariant_actor = ?9, \
             automation_profile = ?10, reusable = ?11, read_only = ?12, arguments = ?13, script = ?14, \
             sandbox = ?15, config_path = ?16, updated_at = ?17, archived_at = ?18, version = ?19 \
             WHERE action_id = ?1",
            params![
                a.action_id.to_string(),
                a.state.as_str(),
                a.description,
                a.long_description,
                a.definition_of_done,
                a.strategy_actor,
                a.execution_actor,
                a.estimation_actor,
                a.invariant_actor,
                a.automation_profile,
                a.reusable,
                a.read_only,
                to_json(&a.arguments),
                a.script.as_ref().map(to_json),
                a.sandbox.as_ref().map(to_json),
                a.config_path,
                a.updated_at.to_string(),
                a.archived_at.map(|t| t.to_string()),
                a.version,
            ],
        )?;
        let rows: Vec<NewInvariant> = new_invariants
            .iter()
            .map(|t| {
                let mut r = NewInvariant::new(t, None, InvariantScope::Action);
                r.action_id = Some(a.action_id.to_string());
                r
            })
            .collect();
        super::invariants::insert_rows(&tx, &rows, &a.updated_at.to_string())?;
        registry_changed(&tx, Registry::Action, &a.name, Change::Updated)?;
        tx.commit()?;
        Ok(rows.into_iter().map(|r| (r.invariant_id, r.text)).collect())
    }

    /// Plans made from an action that are not finished (neither applied nor cancelled), as
    /// `(plan id, phase, state)`.
    ///
    /// # Errors
    /// Store errors.
    pub fn unfinished_plans_of_action(
        &self,
        action: &Id,
    ) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT p.plan_id, p.phase, p.state FROM plan_origins o JOIN plans p ON p.plan_id = o.plan_id \
             WHERE o.action_id = ?1 AND p.phase != 'applied' AND p.state != 'cancelled' ORDER BY p.created_at",
        )?;
        Ok(stmt
            .query_map([action.to_string()], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })?
            .collect::<Result<_, _>>()?)
    }

    /// Deletes an action: the row and its action-level invariant definitions go when no plan
    /// was made from it; otherwise the row stays for those plans, hidden, with `deleted_at`
    /// set and its name freed (`NAME#deleted-ID`). Returns whether the row was kept.
    ///
    /// # Errors
    /// Store errors; nothing is written then.
    pub fn delete_action(&mut self, a: &Action, now: jiff::Timestamp) -> Result<bool, StoreError> {
        let id = a.action_id.to_string();
        let tx = self.conn_mut().transaction()?;
        let used: i64 = tx.query_row(
            "SELECT count(*) FROM plan_origins WHERE action_id = ?1",
            [&id],
            |r| r.get(0),
        )?;
        tx.execute(
            "DELETE FROM invariants WHERE action_id = ?1 AND plan_id IS NULL",
            [&id],
        )?;
        if used == 0 {
            tx.execute("DELETE FROM actions WHERE action_id = ?1", [&id])?;
        } else {
            tx.execute(
                "UPDATE actions SET name = ?2, deleted_at = ?3, updated_at = ?3 WHERE action_id = ?1",
                params![id, format!("{}#deleted-{id}", a.name), now.to_string()],
            )?;
        }
        registry_changed(&tx, Registry::Action, &a.name, Change::Removed)?;
        tx.commit()?;
        Ok(used > 0)
    }

    /// The version of its action a plan was made from (`None` for plans older than versions).
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_action_version(&self, plan: &Id) -> Result<Option<u32>, StoreError> {
        let v: Option<Option<i64>> = self
            .conn()
            .query_row(
                "SELECT action_version FROM plan_origins WHERE plan_id = ?1",
                [plan.to_string()],
                |r| r.get(0),
            )
            .optional()?;
        Ok(v.flatten().and_then(|v| u32::try_from(v).ok()))
    }

    /// How many plans were created from an action: (total, applied, errored).
    ///
    /// # Errors
    /// Store errors.
    pub fn action_plan_counts(&self, action: &Id) -> Result<(u64, u64, u64), StoreError> {
        Ok(self.conn().query_row(
            "SELECT count(*), count(*) FILTER (WHERE p.phase = 'applied'), count(*) FILTER (WHERE p.state = 'errored')
             FROM plan_origins o JOIN plans p ON p.plan_id = o.plan_id WHERE o.action_id = ?1",
            [action.to_string()],
            |r| {
                let n = |i| r.get::<_, i64>(i).map(|v| u64::try_from(v).unwrap_or(0));
                Ok((n(0)?, n(1)?, n(2)?))
            },
        )?)
    }
}
