//! Custom resource types (table `resource_types`): each row holds a type's resolved definition
//! as JSON, which [`crate::registry::custom_types`] encodes and decodes; built-in types are
//! compiled in and never stored.

use rusqlite::{OptionalExtension, params};

use super::events::{registry_changed, upsert_change};
use super::{Store, StoreError};
use crate::domain::event::{Change, Registry};

/// A stored custom type: its name and definition JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredType {
    /// Namespaced name.
    pub name: String,
    /// The definition, JSON.
    pub definition: String,
}

impl Store {
    /// The definition of the custom type `name`, if registered.
    ///
    /// # Errors
    /// Store errors.
    pub fn resource_type_row(&self, name: &str) -> Result<Option<StoredType>, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT name, definition FROM resource_types WHERE name = ?1",
                [name],
                |r| {
                    Ok(StoredType {
                        name: r.get(0)?,
                        definition: r.get(1)?,
                    })
                },
            )
            .optional()?)
    }

    /// Every custom type, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn resource_type_rows(&self) -> Result<Vec<StoredType>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT name, definition FROM resource_types ORDER BY name")?;
        Ok(stmt
            .query_map([], |r| {
                Ok(StoredType {
                    name: r.get(0)?,
                    definition: r.get(1)?,
                })
            })?
            .collect::<Result<_, _>>()?)
    }

    /// Inserts or replaces a custom type (one transaction); timestamps are RFC 3339 text.
    ///
    /// # Errors
    /// Store errors.
    pub fn upsert_resource_type_row(
        &mut self,
        row: &StoredType,
        config_path: Option<&str>,
        created_at: &str,
        updated_at: &str,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let change = upsert_change(&tx, "resource_types", &row.name)?;
        tx.execute(
            "INSERT INTO resource_types (name, definition, config_path, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5)
             ON CONFLICT(name) DO UPDATE SET definition = excluded.definition,
                 config_path = excluded.config_path, updated_at = excluded.updated_at",
            params![
                row.name,
                row.definition,
                config_path,
                created_at,
                updated_at
            ],
        )?;
        registry_changed(&tx, Registry::ResourceType, &row.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a custom type; returns whether it existed.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_resource_type_row(&mut self, name: &str) -> Result<bool, StoreError> {
        let tx = self.conn_mut().transaction()?;
        let n = tx.execute("DELETE FROM resource_types WHERE name = ?1", [name])?;
        if n > 0 {
            registry_changed(&tx, Registry::ResourceType, name, Change::Removed)?;
        }
        tx.commit()?;
        Ok(n == 1)
    }
}
