//! The tables `users`, `orgs` and `org_members` (spec sections 15 and 22): who may sign in to
//! a server and which organizations they belong to, in which role.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::codec::ts;
use super::{Store, StoreError};
use crate::team::Role;

/// A user of the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct User {
    /// The name, also their personal namespace.
    pub name: String,
    /// May do everything on the server.
    pub server_admin: bool,
    /// When the user was added.
    pub created_at: Timestamp,
}

/// An organization and its members.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Org {
    /// The name, also the organization's namespace.
    pub name: String,
    /// When it was added.
    pub created_at: Timestamp,
    /// Its members, by name.
    pub members: Vec<Member>,
}

/// One member of an organization.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Member {
    /// The user.
    pub user: String,
    /// Their role.
    pub role: Role,
    /// Since when.
    pub added_at: Timestamp,
}

fn user((name, admin, created): (String, i64, String)) -> Result<User, StoreError> {
    Ok(User {
        name,
        server_admin: admin != 0,
        created_at: ts("users", "created_at", &created)?,
    })
}

fn role(table: &'static str, text: &str) -> Result<Role, StoreError> {
    Role::parse(text).ok_or_else(|| StoreError::Corrupt {
        table,
        column: "role",
        message: format!("unknown role `{text}`"),
    })
}

impl Store {
    /// Adds a user.
    ///
    /// # Errors
    /// [`StoreError`]; a constraint error when the name is taken.
    pub fn insert_user(&self, user: &User) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO users (name, server_admin, created_at) VALUES (?1, ?2, ?3)",
            params![
                user.name,
                i64::from(user.server_admin),
                user.created_at.to_string()
            ],
        )?;
        Ok(())
    }

    /// The user named `name`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn user(&self, name: &str) -> Result<Option<User>, StoreError> {
        self.conn()
            .query_row(
                "SELECT name, server_admin, created_at FROM users WHERE name = ?1",
                [name],
                |r| r.try_into(),
            )
            .optional()?
            .map(user)
            .transpose()
    }

    /// Every user, by name.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn users(&self) -> Result<Vec<User>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT name, server_admin, created_at FROM users ORDER BY name")?;
        let rows = stmt
            .query_map([], |r| r.try_into())?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(user).collect()
    }

    /// Adds an organization with its first member, its owner, in one transaction.
    ///
    /// # Errors
    /// [`StoreError`]; a constraint error when the name is taken or the owner is unknown.
    pub fn insert_org(&mut self, name: &str, owner: &str, at: Timestamp) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "INSERT INTO orgs (name, created_at) VALUES (?1, ?2)",
            params![name, at.to_string()],
        )?;
        tx.execute(
            "INSERT INTO org_members (org, user_name, role, added_at) VALUES (?1, ?2, 'owner', ?3)",
            params![name, owner, at.to_string()],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The organization named `name`, with its members.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn org(&self, name: &str) -> Result<Option<Org>, StoreError> {
        let created: Option<String> = self
            .conn()
            .query_row("SELECT created_at FROM orgs WHERE name = ?1", [name], |r| {
                r.get(0)
            })
            .optional()?;
        let Some(created) = created else {
            return Ok(None);
        };
        let mut stmt = self.conn().prepare(
            "SELECT user_name, role, added_at FROM org_members WHERE org = ?1 ORDER BY user_name",
        )?;
        let rows: Vec<(String, String, String)> = stmt
            .query_map([name], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        let members = rows
            .into_iter()
            .map(|(user, text, added)| {
                Ok(Member {
                    user,
                    role: role("org_members", &text)?,
                    added_at: ts("org_members", "added_at", &added)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(Some(Org {
            name: name.to_string(),
            created_at: ts("orgs", "created_at", &created)?,
            members,
        }))
    }

    /// Every organization's name.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn org_names(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare("SELECT name FROM orgs ORDER BY name")?;
        let names = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(names)
    }

    /// Makes `user` a member of `org` with `role`, or changes their role.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn set_member(&self, org: &str, user: &str, role: Role) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO org_members (org, user_name, role, added_at) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (org, user_name) DO UPDATE SET role = excluded.role",
            params![org, user, role.as_str(), Timestamp::now().to_string()],
        )?;
        Ok(())
    }

    /// Removes `user` from `org`; `false` when they were not a member.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn remove_member(&self, org: &str, user: &str) -> Result<bool, StoreError> {
        let removed = self.conn().execute(
            "DELETE FROM org_members WHERE org = ?1 AND user_name = ?2",
            params![org, user],
        )?;
        Ok(removed == 1)
    }

    /// The organizations `user` belongs to, with their role in each.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn memberships(&self, user: &str) -> Result<Vec<(String, Role)>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT org, role FROM org_members WHERE user_name = ?1 ORDER BY org")?;
        let rows: Vec<(String, String)> = stmt
            .query_map([user], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(org, text)| Ok((org, role("org_members", &text)?)))
            .collect()
    }
}
