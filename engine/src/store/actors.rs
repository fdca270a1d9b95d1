//! Custom actors (table `actors`).

use rusqlite::{OptionalExtension, params};

use super::codec::{from_json, to_json, ts};
use super::events::{registry_changed, upsert_change};
use super::{Store, StoreError};
use crate::domain::actor::Actor;
use crate::domain::event::{Change, Registry};

const COLS: &str = "actor_id, name, definition, config_path, config_hash, created_at, updated_at";
type Raw = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    String,
    String,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn convert(
    (actor_id, name, def, config_path, config_hash, created, updated): Raw,
) -> Result<Actor, StoreError> {
    Ok(Actor {
        actor_id,
        name,
        definition: from_json("actors", "definition", &def)?,
        config_path,
        config_hash,
        created_at: ts("actors", "created_at", &created)?,
        updated_at: ts("actors", "updated_at", &updated)?,
    })
}

impl Store {
    /// A custom actor by exact name.
    ///
    /// # Errors
    /// Store errors.
    pub fn actor(&self, name: &str) -> Result<Option<Actor>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM actors WHERE name = ?1"),
                [name],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every custom actor, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn actors(&self) -> Result<Vec<Actor>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {COLS} FROM actors ORDER BY name"))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Inserts or replaces a custom actor (one transaction).
    ///
    /// # Errors
    /// Store errors.
    pub fn upsert_actor(&mut self, a: &Actor) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let change = upsert_change(&tx, "actors", &a.name)?;
        tx.execute(
            "INSERT INTO actors (actor_id, name, actor_type, model, description, unsafe, definition, config_path, config_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
             ON CONFLICT(name) DO UPDATE SET actor_type = excluded.actor_type, model = excluded.model,
                description = excluded.description, unsafe = excluded.unsafe, definition = excluded.definition,
                config_path = excluded.config_path, config_hash = excluded.config_hash, updated_at = excluded.updated_at",
            params![
                a.actor_id,
                a.name,
                a.definition.actor_type.as_str(),
                a.definition.model,
                a.definition.description,
                a.definition.unsafe_,
                to_json(&a.definition),
                a.config_path,
                a.config_hash,
                a.created_at.to_string(),
                a.updated_at.to_string(),
            ],
        )?;
        registry_changed(&tx, Registry::Actor, &a.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a custom actor; returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_actor(&mut self, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute("DELETE FROM actors WHERE name = ?1", [name])?;
        if n > 0 {
            registry_changed(&tx, Registry::Actor, name, Change::Removed)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }
}
