//! The server's users, organizations and members (spec sections 15 and 22), and the
//! principal a user's credential stands for. Users and organizations share one space of
//! names: each is a namespace.

use jiff::Timestamp;

use super::{ApiError, Engine};
use crate::domain::name::{LOCAL_NAMESPACE, QualifiedName, RESERVED_NAMESPACES};
pub use crate::store::team::{Member, Org, User};
use crate::team::{Credential, Principal, Role};

/// Why a user, organization or membership could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    /// The name cannot be a namespace.
    #[error("`{name}` cannot name a user or organization: {why}")]
    BadName {
        /// The name given.
        name: String,
        /// The rule it breaks.
        why: String,
    },
    /// A user or organization already has the name.
    #[error("the name `{0}` is taken by a user or organization of this server")]
    NameTaken(String),
    /// No user has the name.
    #[error("no user `{0}` on this server")]
    UnknownUser(String),
    /// No organization has the name.
    #[error("no organization `{0}` on this server")]
    UnknownOrg(String),
    /// The user is not a member of the organization.
    #[error("`{user}` is not a member of `{org}`")]
    NotMember {
        /// The organization.
        org: String,
        /// The user.
        user: String,
    },
    /// The change would leave the organization without an owner.
    #[error("`{user}` is the last owner of `{org}`; make another member an owner first")]
    LastOwner {
        /// The organization.
        org: String,
        /// The owner.
        user: String,
    },
}

/// Checks that `name` can be a namespace of its own.
fn check_name(name: &str) -> Result<(), TeamError> {
    let bad = |why: &str| TeamError::BadName {
        name: name.to_string(),
        why: why.to_string(),
    };
    let parsed = QualifiedName::parse(&format!("{name}/x")).map_err(|e| bad(&e.to_string()))?;
    if parsed.server.is_some() || parsed.namespace.as_deref() != Some(name) {
        return Err(bad("use letters, digits, `.`, `-` and `_` only"));
    }
    if name == LOCAL_NAMESPACE || name == "builtin" || RESERVED_NAMESPACES.contains(&name) {
        return Err(bad("the namespace is reserved"));
    }
    Ok(())
}

impl Engine {
    /// Adds the user `name`; `server_admin` makes an administrator.
    ///
    /// # Errors
    /// [`TeamError::BadName`], [`TeamError::NameTaken`], store errors.
    pub fn add_user(&self, name: &str, server_admin: bool) -> Result<User, ApiError> {
        check_name(name)?;
        let store = self.store()?;
        if store.user(name)?.is_some() || store.org(name)?.is_some() {
            return Err(TeamError::NameTaken(name.to_string()).into());
        }
        let user = User {
            name: name.to_string(),
            server_admin,
            created_at: Timestamp::now(),
        };
        store.insert_user(&user)?;
        Ok(user)
    }

    /// Every user, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn users(&self) -> Result<Vec<User>, ApiError> {
        Ok(self.store()?.users()?)
    }

    /// Adds the organization `name` owned by the user `owner`.
    ///
    /// # Errors
    /// [`TeamError::BadName`], [`TeamError::NameTaken`], [`TeamError::UnknownUser`], store
    /// errors.
    pub fn add_org(&self, name: &str, owner: &str) -> Result<Org, ApiError> {
        check_name(name)?;
        let mut store = self.store()?;
        if store.user(name)?.is_some() || store.org(name)?.is_some() {
            return Err(TeamError::NameTaken(name.to_string()).into());
        }
        if store.user(owner)?.is_none() {
            return Err(TeamError::UnknownUser(owner.to_string()).into());
        }
        store.insert_org(name, owner, Timestamp::now())?;
        Ok(store
            .org(name)?
            .ok_or_else(|| TeamError::UnknownOrg(name.to_string()))?)
    }

    /// The organization `name` with its members.
    ///
    /// # Errors
    /// [`TeamError::UnknownOrg`], store errors.
    pub fn org(&self, name: &str) -> Result<Org, ApiError> {
        Ok(self
            .store()?
            .org(name)?
            .ok_or_else(|| TeamError::UnknownOrg(name.to_string()))?)
    }

    /// Every organization with its members, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn orgs(&self) -> Result<Vec<Org>, ApiError> {
        let store = self.store()?;
        let mut orgs = Vec::new();
        for name in store.org_names()? {
            orgs.extend(store.org(&name)?);
        }
        Ok(orgs)
    }

    /// Makes `user` a member of `org` with `role` (or changes their role).
    ///
    /// # Errors
    /// [`TeamError::UnknownOrg`], [`TeamError::UnknownUser`], [`TeamError::LastOwner`] when
    /// the last owner would step down, store errors.
    pub fn set_member(&self, org: &str, user: &str, role: Role) -> Result<Org, ApiError> {
        let store = self.store()?;
        let found = store
            .org(org)?
            .ok_or_else(|| TeamError::UnknownOrg(org.to_string()))?;
        if store.user(user)?.is_none() {
            return Err(TeamError::UnknownUser(user.to_string()).into());
        }
        if role != Role::Owner && is_last_owner(&found, user) {
            return Err(TeamError::LastOwner {
                org: org.to_string(),
                user: user.to_string(),
            }
            .into());
        }
        store.set_member(org, user, role)?;
        self.org(org)
    }

    /// Removes `user` from `org`.
    ///
    /// # Errors
    /// [`TeamError::UnknownOrg`], [`TeamError::NotMember`], [`TeamError::LastOwner`], store
    /// errors.
    pub fn remove_member(&self, org: &str, user: &str) -> Result<Org, ApiError> {
        let store = self.store()?;
        let found = store
            .org(org)?
            .ok_or_else(|| TeamError::UnknownOrg(org.to_string()))?;
        if is_last_owner(&found, user) {
            return Err(TeamError::LastOwner {
                org: org.to_string(),
                user: user.to_string(),
            }
            .into());
        }
        if !store.remove_member(org, user)? {
            return Err(TeamError::NotMember {
                org: org.to_string(),
                user: user.to_string(),
            }
            .into());
        }
        self.org(org)
    }

    /// The principal of the user `name` recognised by `credential`; `None` when the server
    /// has no such user.
    ///
    /// # Errors
    /// Store errors.
    pub fn principal_of(
        &self,
        name: &str,
        credential: Credential,
        address: Option<String>,
    ) -> Result<Option<Principal>, ApiError> {
        Ok(self.store()?.user(name)?.map(|user| Principal {
            user: user.name,
            server_admin: user.server_admin,
            credential,
            address,
        }))
    }

    /// The organizations `user` belongs to, with their role in each.
    ///
    /// # Errors
    /// Store errors.
    pub fn memberships(&self, user: &str) -> Result<Vec<(String, Role)>, ApiError> {
        Ok(self.store()?.memberships(user)?)
    }
}

fn is_last_owner(org: &Org, user: &str) -> bool {
    let owners: Vec<&Member> = org
        .members
        .iter()
        .filter(|m| m.role == Role::Owner)
        .collect();
    matches!(owners.as_slice(), [only] if only.user == user)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn engine() -> (tempfile::TempDir, Engine) {
        let dir = tempfile::tempdir().unwrap();
        let paths = crate::paths::Paths::at(dir.path(), dir.path().join("config.toml"));
        (dir, Engine::new(paths, super::super::Settings::default()))
    }

    #[test]
    fn users_and_organizations_share_one_space_of_names() {
        let (_dir, engine) = engine();
        engine.add_user("ann", false).unwrap();
        engine.add_org("acme", "ann").unwrap();
        for taken in ["ann", "acme"] {
            let err = engine.add_user(taken, false).unwrap_err();
            assert!(
                matches!(err, ApiError::Team(TeamError::NameTaken(_))),
                "{err:?}"
            );
        }
        let err = engine.add_user("local", false).unwrap_err();
        assert!(
            matches!(err, ApiError::Team(TeamError::BadName { .. })),
            "{err:?}"
        );
    }

    #[test]
    fn an_organization_keeps_at_least_one_owner() {
        let (_dir, engine) = engine();
        engine.add_user("ann", false).unwrap();
        engine.add_user("bob", false).unwrap();
        engine.add_org("acme", "ann").unwrap();
        engine.set_member("acme", "bob", Role::Viewer).unwrap();
        let err = engine.set_member("acme", "ann", Role::Member).unwrap_err();
        assert!(
            matches!(err, ApiError::Team(TeamError::LastOwner { .. })),
            "{err:?}"
        );
        engine.set_member("acme", "bob", Role::Owner).unwrap();
        engine.remove_member("acme", "ann").unwrap();
        assert_eq!(
            engine.memberships("bob").unwrap(),
            vec![("acme".to_string(), Role::Owner)]
        );
        assert!(engine.memberships("ann").unwrap().is_empty());
    }
}
