//! Registered tools and custom skills (tables `registered_tools`, `custom_skills`; spec
//! sections 18 and 19). Each row holds the validated definition as JSON.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::codec::{from_json, to_json, ts};
use super::events::{registry_changed, upsert_change};
use super::{Store, StoreError};
use crate::domain::event::{Change, Registry};

/// A stored registration: a tool or a skill definition with where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Registration<T> {
    /// Namespaced name.
    pub name: String,
    /// The validated definition.
    pub definition: T,
    /// The YAML file it was read from, if any.
    pub config_path: Option<String>,
    /// A fingerprint of that file's bytes.
    pub config_hash: Option<String>,
    /// First registered.
    pub created_at: jiff::Timestamp,
    /// Last updated.
    pub updated_at: jiff::Timestamp,
}

type Raw = (
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

fn convert<T: DeserializeOwned>(
    table: &'static str,
    (name, def, path, hash, c, u): Raw,
) -> Result<Registration<T>, StoreError> {
    Ok(Registration {
        name,
        definition: from_json(table, "definition", &def)?,
        config_path: path,
        config_hash: hash,
        created_at: ts(table, "created_at", &c)?,
        updated_at: ts(table, "updated_at", &u)?,
    })
}

const COLS: &str = "name, definition, config_path, config_hash, created_at, updated_at";

/// The registry a registration table holds.
fn registry_of(table: &str) -> Registry {
    if table == "custom_skills" {
        Registry::Skill
    } else {
        Registry::Tool
    }
}

/// `name`, or `local/<name>` when it has no namespace.
fn local_if_bare(name: &str) -> std::borrow::Cow<'_, str> {
    if name.contains('/') {
        std::borrow::Cow::Borrowed(name)
    } else {
        std::borrow::Cow::Owned(format!("{}/{name}", crate::domain::name::LOCAL_NAMESPACE))
    }
}

impl Store {
    fn registration<T: DeserializeOwned>(
        &self,
        table: &'static str,
        name: &str,
    ) -> Result<Option<Registration<T>>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM {table} WHERE name = ?1"),
                [name],
                raw,
            )
            .optional()?
            .map(|r| convert(table, r))
            .transpose()
    }

    fn registrations<T: DeserializeOwned>(
        &self,
        table: &'static str,
    ) -> Result<Vec<Registration<T>>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {COLS} FROM {table} ORDER BY name"))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(|r| convert(table, r)).collect()
    }

    fn delete_registration(&mut self, table: &'static str, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute(&format!("DELETE FROM {table} WHERE name = ?1"), [name])?;
        if n > 0 {
            registry_changed(&tx, registry_of(table), name, Change::Removed)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }

    /// A registered tool by name; a bare name means `local/<name>`, as in every registry
    /// (`crate::domain::name`: built-ins, which have bare names, are looked up first by the
    /// callers).
    ///
    /// # Errors
    /// Store errors.
    pub fn registered_tool<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<Registration<T>>, StoreError> {
        self.registration("registered_tools", &local_if_bare(name))
    }

    /// Every registered tool, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn registered_tools<T: DeserializeOwned>(
        &self,
    ) -> Result<Vec<Registration<T>>, StoreError> {
        self.registrations("registered_tools")
    }

    /// Inserts or replaces a registered tool (the creation time is kept on update).
    ///
    /// # Errors
    /// Store errors.
    pub fn upsert_tool<T: Serialize>(
        &mut self,
        source: &str,
        r: &Registration<T>,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let change = upsert_change(&tx, "registered_tools", &r.name)?;
        tx.execute(
            "INSERT INTO registered_tools (name, source, definition, config_path, config_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(name) DO UPDATE SET source = excluded.source, definition = excluded.definition,
                config_path = excluded.config_path, config_hash = excluded.config_hash, updated_at = excluded.updated_at",
            params![r.name, source, to_json(&r.definition), r.config_path, r.config_hash, r.created_at.to_string(), r.updated_at.to_string()],
        )?;
        registry_changed(&tx, Registry::Tool, &r.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a registered tool; returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_tool(&mut self, name: &str) -> Result<bool, StoreError> {
        self.delete_registration("registered_tools", name)
    }

    /// A custom skill by name; a bare name means `local/<name>` (as [`Store::registered_tool`]).
    ///
    /// # Errors
    /// Store errors.
    pub fn custom_skill<T: DeserializeOwned>(
        &self,
        name: &str,
    ) -> Result<Option<Registration<T>>, StoreError> {
        self.registration("custom_skills", &local_if_bare(name))
    }

    /// Every custom skill, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn custom_skills<T: DeserializeOwned>(&self) -> Result<Vec<Registration<T>>, StoreError> {
        self.registrations("custom_skills")
    }

    /// Inserts or replaces a custom skill (the creation time is kept on update).
    ///
    /// # Errors
    /// Store errors.
    pub fn upsert_skill<T: Serialize>(&mut self, r: &Registration<T>) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let change = upsert_change(&tx, "custom_skills", &r.name)?;
        tx.execute(
            "INSERT INTO custom_skills (name, definition, config_path, config_hash, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)
             ON CONFLICT(name) DO UPDATE SET definition = excluded.definition,
                config_path = excluded.config_path, config_hash = excluded.config_hash, updated_at = excluded.updated_at",
            params![r.name, to_json(&r.definition), r.config_path, r.config_hash, r.created_at.to_string(), r.updated_at.to_string()],
        )?;
        registry_changed(&tx, Registry::Skill, &r.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a custom skill; returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_skill(&mut self, name: &str) -> Result<bool, StoreError> {
        self.delete_registration("custom_skills", name)
    }
}
