//! Custom automation profiles (table `automation_profiles`). Built-ins are compiled in
//! ([`crate::registry::profiles::BUILTINS`]) and never stored.

use rusqlite::{OptionalExtension, params};

use super::codec::{from_json, to_json, ts};
use super::events::{registry_changed, upsert_change};
use super::{Store, StoreError};
use crate::domain::event::{Change, Registry};
use crate::domain::profile::{Profile, ProfileSource};

type Raw = (
    String,
    Option<String>,
    String,
    Option<String>,
    String,
    String,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn convert(
    (name, description, flags, config_path, created, updated): Raw,
) -> Result<Profile, StoreError> {
    const T: &str = "automation_profiles";
    Ok(Profile {
        name,
        description,
        source: ProfileSource::Custom,
        flags: from_json(T, "flags", &flags)?,
        config_path,
        created_at: Some(ts(T, "created_at", &created)?),
        updated_at: Some(ts(T, "updated_at", &updated)?),
    })
}

const COLS: &str = "name, description, flags, config_path, created_at, updated_at";

impl Store {
    /// A custom profile by exact name.
    ///
    /// # Errors
    /// Store errors.
    pub fn custom_profile(&self, name: &str) -> Result<Option<Profile>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM automation_profiles WHERE name = ?1"),
                [name],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every custom profile, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn custom_profiles(&self) -> Result<Vec<Profile>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLS} FROM automation_profiles ORDER BY name"
        ))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Inserts or replaces a custom profile (one transaction).
    ///
    /// # Errors
    /// Store errors.
    pub fn upsert_custom_profile(&mut self, p: &Profile) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let change = upsert_change(&tx, "automation_profiles", &p.name)?;
        tx.execute(
            "INSERT INTO automation_profiles (profile_id, name, description, flags, config_path, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
             ON CONFLICT(name) DO UPDATE SET description = excluded.description, flags = excluded.flags,
                 config_path = excluded.config_path, updated_at = excluded.updated_at",
            params![
                crate::domain::Id::generate().to_string(),
                p.name,
                p.description,
                to_json(&p.flags),
                p.config_path,
                p.created_at.unwrap_or_else(jiff::Timestamp::now).to_string(),
                p.updated_at.unwrap_or_else(jiff::Timestamp::now).to_string(),
            ],
        )?;
        registry_changed(&tx, Registry::Profile, &p.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a custom profile; returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_custom_profile(&mut self, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute("DELETE FROM automation_profiles WHERE name = ?1", [name])?;
        if n > 0 {
            registry_changed(&tx, Registry::Profile, name, Change::Removed)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }

    /// Names of projects whose automation profile is `name` (canonical form), by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn projects_with_profile(&self, name: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT name FROM projects WHERE automation_profile = ?1 ORDER BY name")?;
        Ok(stmt
            .query_map([name], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Names of draft or available actions whose `automation-profile` is `name` (archived
    /// actions are checked again when restored), by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn actions_with_profile(&self, name: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT name FROM actions WHERE automation_profile = ?1 AND state <> 'archived' ORDER BY name",
        )?;
        Ok(stmt
            .query_map([name], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }
}
