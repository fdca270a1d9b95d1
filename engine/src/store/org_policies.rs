//! The `org_policies` table (spec section 22): each organization's policy, as the YAML it was
//! set with, and who set it when.

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};

use super::codec::ts;
use super::{Store, StoreError};
use crate::domain::name::QualifiedName;
use crate::team::policy::{OrgPolicy, Policies};

/// One organization's stored policy.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredPolicy {
    /// The organization.
    pub org: String,
    /// The policy's YAML, as set.
    pub text: String,
    /// When it was set.
    pub updated_at: Timestamp,
    /// Who set it.
    pub updated_by: String,
}

impl StoredPolicy {
    /// The rules of the stored YAML.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when it no longer parses (it was checked when set).
    pub fn parsed(&self) -> Result<OrgPolicy, StoreError> {
        let file = format!("the policy of {}", self.org);
        OrgPolicy::parse(std::path::Path::new(&file), &self.text).map_err(|e| {
            StoreError::Corrupt {
                table: "org_policies",
                column: "policy",
                message: e.to_string(),
            }
        })
    }
}

/// The namespace of the item `name` (`acme` of `acme/web`), if it names one.
pub fn namespace_of(name: &str) -> Option<String> {
    QualifiedName::parse(name).ok().and_then(|q| q.namespace)
}

impl Store {
    /// The policy binding the items of `namespace` (an organization's), with the
    /// organization's name; `None` when the namespace is no organization's or its
    /// organization has no policy.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn policy_of_namespace(
        &self,
        namespace: &str,
    ) -> Result<Option<(String, OrgPolicy)>, StoreError> {
        let Some(stored) = self.org_policy(namespace)? else {
            return Ok(None);
        };
        Ok(Some((stored.org.clone(), stored.parsed()?)))
    }

    /// The policies binding the items named `names` (projects, resources): each
    /// organization's whose namespace one of them lives in, each once, by organization.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn policies_of_items<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
    ) -> Result<Policies, StoreError> {
        let mut each: Vec<(String, OrgPolicy)> = Vec::new();
        for name in names {
            let Some(ns) = namespace_of(name) else {
                continue;
            };
            if each.iter().any(|(org, _)| *org == ns) {
                continue;
            }
            each.extend(self.policy_of_namespace(&ns)?);
        }
        each.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Policies { each })
    }

    /// Sets (or replaces) the policy of `org`.
    ///
    /// # Errors
    /// [`StoreError`]; a constraint error when there is no such organization.
    pub fn set_org_policy(
        &self,
        org: &str,
        text: &str,
        at: Timestamp,
        by: &str,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO org_policies (org, policy, updated_at, updated_by) VALUES (?1, ?2, ?3, ?4) \
             ON CONFLICT (org) DO UPDATE SET policy = excluded.policy, \
             updated_at = excluded.updated_at, updated_by = excluded.updated_by",
            params![org, text, at.to_string(), by],
        )?;
        Ok(())
    }

    /// The policy of `org`; `None` when it has none.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn org_policy(&self, org: &str) -> Result<Option<StoredPolicy>, StoreError> {
        let row: Option<(String, String, String)> = self
            .conn()
            .query_row(
                "SELECT policy, updated_at, updated_by FROM org_policies WHERE org = ?1",
                [org],
                |r| r.try_into(),
            )
            .optional()?;
        row.map(|(text, at, by)| {
            Ok(StoredPolicy {
                org: org.to_string(),
                text,
                updated_at: ts("org_policies", "updated_at", &at)?,
                updated_by: by,
            })
        })
        .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_policy_is_set_replaced_and_read_back_with_who_and_when() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let now = Timestamp::now();
        store
            .insert_user(&crate::store::team::User {
                name: "ann".into(),
                server_admin: false,
                created_at: now,
            })
            .unwrap();
        store.insert_org("acme", "ann", now).unwrap();
        assert_eq!(store.org_policy("acme").unwrap(), None);
        store.set_org_policy("acme", "network: never\n", now, "ann").unwrap();
        store.set_org_policy("acme", "network: ask\n", now, "bob").unwrap();
        let got = store.org_policy("acme").unwrap().unwrap();
        assert_eq!(got.text, "network: ask\n");
        assert_eq!(got.updated_by, "bob");
        assert!(store.set_org_policy("nobody", "network: ask\n", now, "bob").is_err());
    }
}
