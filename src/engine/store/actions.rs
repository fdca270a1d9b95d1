//! Actions (table `actions`) and their action-level invariants.

use rusqlite::{Connection, OptionalExtension, params};

use super::codec::{from_json, opt_ts, to_json, ts};
use super::{Store, StoreError};
use crate::engine::domain::{ActionState, Id, InvariantScope};
use crate::engine::registry::actions::Action;
use crate::engine::registry::invariants::NewInvariant;

const COLS: &str = "action_id, name, state, description, long_description, definition_of_done, strategy_actor, \
    execution_actor, estimation_actor, invariant_actor, automation_profile, reusable, read_only, arguments, script, \
    sandbox, config_path, created_at, updated_at, archived_at";

struct Raw {
    s: Vec<Option<String>>,
    reusable: bool,
    read_only: bool,
}

fn raw(r: &rusqlite::Row<'_>) -> rusqlite::Result<Raw> {
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
    })
}

fn convert(raw: Raw) -> Result<Action, StoreError> {
    const T: &str = "actions";
    let Raw {
        mut s,
        reusable,
        read_only,
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
            &format!("INSERT INTO actions ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)"),
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
                &format!("SELECT {COLS} FROM actions WHERE name = ?1"),
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
                &format!("SELECT {COLS} FROM actions WHERE action_id = ?1"),
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
        let mut stmt = self.conn().prepare("SELECT action_id FROM actions")?;
        Ok(stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Every action, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn actions(&self) -> Result<Vec<Action>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {COLS} FROM actions ORDER BY name"))?;
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
        tx.commit()?;
        Ok(())
    }

    /// Names of actions that name `actor` as one of their actors.
    ///
    /// # Errors
    /// Store errors.
    pub fn actions_referencing_actor(&self, actor: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT name FROM actions WHERE ?1 IN (strategy_actor, execution_actor, estimation_actor, invariant_actor) ORDER BY name",
        )?;
        Ok(stmt
            .query_map([actor], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
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
