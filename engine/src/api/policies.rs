//! Organization policies (spec section 22): setting and reading an organization's policy, and
//! finding the policies that bind an item or a plan from the namespaces it lives in.

use std::path::Path;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::team::TeamError;
use super::{ApiError, Engine};
use crate::domain::Id;
pub use crate::team::policy::{
    NetworkPolicy, OrgPolicy, Policies, PolicyDenial, RestrictedKind, keys as policy_keys,
};

/// An organization's policy as set: the parsed rules, the YAML they came from, who set them
/// and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyRecord {
    /// The organization.
    pub org: String,
    /// The rules.
    pub policy: OrgPolicy,
    /// The YAML as set.
    pub text: String,
    /// When it was set.
    pub updated_at: Timestamp,
    /// Who set it.
    pub updated_by: String,
}

/// `agents server policy`: set or read an organization's policy.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "policy_call", rename_all = "snake_case")]
pub enum PolicyRequest {
    /// Sets the policy of `org` from YAML `text`, read from the file `file` (named in errors).
    Set {
        /// The organization.
        org: String,
        /// The file the YAML was read from, as the user named it.
        file: String,
        /// The YAML.
        text: String,
    },
    /// The policy of `org`.
    Show {
        /// The organization.
        org: String,
    },
}

/// What a [`PolicyRequest`] answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyView {
    /// The organization.
    pub org: String,
    /// Its policy; `None` when it has none (no rule applies).
    pub record: Option<PolicyRecord>,
}

/// Answers `r` on `engine`; a set is recorded as made by `by`.
///
/// # Errors
/// See [`Engine::set_policy`] and [`Engine::policy`].
pub fn answer(engine: &Engine, r: PolicyRequest, by: &str) -> Result<PolicyView, ApiError> {
    match r {
        PolicyRequest::Set { org, file, text } => {
            let record = engine.set_policy_from(&org, Path::new(&file), &text, by)?;
            Ok(PolicyView {
                org,
                record: Some(record),
            })
        }
        PolicyRequest::Show { org } => {
            engine.org(&org)?;
            Ok(PolicyView {
                record: engine.policy(&org)?,
                org,
            })
        }
    }
}

impl From<PolicyDenial> for ApiError {
    fn from(d: PolicyDenial) -> Self {
        ApiError::PolicyDenied(Box::new(d))
    }
}

impl Engine {
    /// Sets the policy of `org` from the YAML `text`, recorded as set by `by`.
    ///
    /// # Errors
    /// [`ApiError::InvalidInput`] naming the key and the fix when the YAML is not a policy;
    /// [`TeamError::UnknownOrg`]; store errors. Nothing is written on an error.
    pub fn set_policy(&self, org: &str, text: &str, by: &str) -> Result<PolicyRecord, ApiError> {
        self.set_policy_from(org, Path::new("policy.yaml"), text, by)
    }

    /// [`Engine::set_policy`] of the YAML read from `file` (named in errors).
    ///
    /// # Errors
    /// As [`Engine::set_policy`].
    pub fn set_policy_from(
        &self,
        org: &str,
        file: &Path,
        text: &str,
        by: &str,
    ) -> Result<PolicyRecord, ApiError> {
        let store = self.store()?;
        if store.org(org)?.is_none() {
            return Err(TeamError::UnknownOrg(org.to_string()).into());
        }
        let policy = OrgPolicy::parse(file, text).map_err(|e| ApiError::InvalidInput {
            message: e.to_string(),
        })?;
        if let Some(allowed) = &policy.profiles.allowed {
            for name in allowed {
                crate::registry::profiles::find(&store, name).map_err(|e| {
                    ApiError::InvalidInput {
                        message: format!(
                            "{}: field `{}`: {e}; list profiles `agents automation-profile list` shows",
                            file.display(),
                            policy_keys::PROFILES_ALLOWED
                        ),
                    }
                })?;
            }
        }
        let now = Timestamp::now();
        store.set_org_policy(org, text, now, by)?;
        Ok(PolicyRecord {
            org: org.to_string(),
            policy,
            text: text.to_string(),
            updated_at: now,
            updated_by: by.to_string(),
        })
    }

    /// The policy of `org` with its text and who set it when; `None` when it has none.
    ///
    /// # Errors
    /// Store errors (a stored policy that no longer parses is one).
    pub fn policy(&self, org: &str) -> Result<Option<PolicyRecord>, ApiError> {
        let Some(stored) = self.store()?.org_policy(org)? else {
            return Ok(None);
        };
        Ok(Some(PolicyRecord {
            policy: stored.parsed()?,
            org: stored.org,
            text: stored.text,
            updated_at: stored.updated_at,
            updated_by: stored.updated_by,
        }))
    }

    /// The policy binding the items of namespace `namespace` (an organization's), with the
    /// organization's name; `None` when the namespace is no organization's or its
    /// organization has no policy.
    ///
    /// # Errors
    /// Store errors.
    pub fn policy_for_namespace(
        &self,
        namespace: &str,
    ) -> Result<Option<(String, OrgPolicy)>, ApiError> {
        Ok(self.store()?.policy_of_namespace(namespace)?)
    }

    /// The policies binding plan `plan`: each organization's whose namespace one of its
    /// projects lives in.
    ///
    /// # Errors
    /// Store errors.
    pub fn policies_for_plan(&self, plan: &Id) -> Result<Policies, ApiError> {
        let store = self.store()?;
        let names: Vec<String> = store
            .plan(plan)?
            .map(|p| {
                p.project_links
                    .into_iter()
                    .map(|l| l.project_name)
                    .collect()
            })
            .unwrap_or_default();
        Ok(store.policies_of_items(names.iter().map(String::as_str))?)
    }
}
