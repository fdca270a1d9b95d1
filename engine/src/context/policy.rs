//! Context policies (spec 05/06 `agents project context set|show`, spec 25 "actor-specific
//! views"): per project and per view (`strategize`, `execute`, `apply`, `default`), every
//! field optional. A phase resolves each field from its own view, then `default`, then the
//! built-in value; a plan freezes what it resolved the first time it reads context, so a
//! later policy change does not move a plan under way.

use std::collections::BTreeMap;

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::domain::Id;
use crate::domain::event::{Change, Registry};
use crate::store::{Store, StoreError, events};

/// The views a policy can be set for.
pub const VIEWS: [&str; 4] = ["strategize", "execute", "apply", "default"];

/// Built-in soft cap of the hot context, in tokens (spec 06 example `12000`).
pub const DEFAULT_HOT_MAX_TOKENS: u64 = 12_000;
/// Built-in warm tier size, in decisions.
pub const DEFAULT_WARM_MAX_DECISIONS: u64 = 50;
/// Built-in cold tier size, in decisions.
pub const DEFAULT_COLD_MAX_DECISIONS: u64 = 200;
/// Built-in results per retrieval query.
pub const DEFAULT_QUERY_LIMIT: u64 = 20;
/// Built-in largest file taken into context, in bytes (1 MiB).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 20;
/// Built-in largest total of files taken into context, in bytes (50 MiB).
pub const DEFAULT_MAX_TOTAL_SIZE: u64 = 50 << 20;
/// Built-in summary length, in tokens.
pub const DEFAULT_SUMMARY_MAX_TOKENS: u64 = 500;

/// One view's policy as set (every field optional).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextPolicy {
    /// Only these resources (names).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_resources: Vec<String>,
    /// Never these resources.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_resources: Vec<String>,
    /// Only paths matching these globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include_paths: Vec<String>,
    /// Never paths matching these globs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude_paths: Vec<String>,
    /// Soft cap of the hot context, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hot_max_tokens: Option<u64>,
    /// Warm tier size, in decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_max_decisions: Option<u64>,
    /// Cold tier size, in decisions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold_max_decisions: Option<u64>,
    /// Results per retrieval query.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_limit: Option<u64>,
    /// Largest file taken into context, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_file_size: Option<u64>,
    /// Largest total taken into context, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_size: Option<u64>,
    /// Whether long material is summarized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summarize: Option<bool>,
    /// Summary length, in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary_max_tokens: Option<u64>,
}

impl ContextPolicy {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// `self` with every field `over` sets taken from `over` (lists replace lists).
    #[must_use]
    pub fn merged(&self, over: &ContextPolicy) -> ContextPolicy {
        let list =
            |a: &Vec<String>, b: &Vec<String>| if b.is_empty() { a.clone() } else { b.clone() };
        ContextPolicy {
            include_resources: list(&self.include_resources, &over.include_resources),
            exclude_resources: list(&self.exclude_resources, &over.exclude_resources),
            include_paths: list(&self.include_paths, &over.include_paths),
            exclude_paths: list(&self.exclude_paths, &over.exclude_paths),
            hot_max_tokens: over.hot_max_tokens.or(self.hot_max_tokens),
            warm_max_decisions: over.warm_max_decisions.or(self.warm_max_decisions),
            cold_max_decisions: over.cold_max_decisions.or(self.cold_max_decisions),
            query_limit: over.query_limit.or(self.query_limit),
            max_file_size: over.max_file_size.or(self.max_file_size),
            max_total_size: over.max_total_size.or(self.max_total_size),
            summarize: over.summarize.or(self.summarize),
            summary_max_tokens: over.summary_max_tokens.or(self.summary_max_tokens),
        }
    }
}

/// A phase's policy with every value filled in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Resolved {
    /// Only these resources (empty: all).
    pub include_resources: Vec<String>,
    /// Never these resources.
    pub exclude_resources: Vec<String>,
    /// Only these path globs (empty: all).
    pub include_paths: Vec<String>,
    /// Never these path globs.
    pub exclude_paths: Vec<String>,
    /// Soft cap of the hot context, in tokens.
    pub hot_max_tokens: u64,
    /// Warm tier size.
    pub warm_max_decisions: u64,
    /// Cold tier size.
    pub cold_max_decisions: u64,
    /// Results per query.
    pub query_limit: u64,
    /// Largest file, bytes.
    pub max_file_size: u64,
    /// Largest total, bytes.
    pub max_total_size: u64,
    /// Summarize long material.
    pub summarize: bool,
    /// Summary length, tokens.
    pub summary_max_tokens: u64,
}

impl Resolved {
    /// Whether `resource` is in scope.
    pub fn takes_resource(&self, resource: &str) -> bool {
        let named = |list: &[String]| {
            list.iter()
                .any(|r| r == resource || resource.rsplit('/').next() == Some(r.as_str()))
        };
        (self.include_resources.is_empty() || named(&self.include_resources))
            && !named(&self.exclude_resources)
    }

    /// Whether `path` is in scope.
    pub fn takes_path(&self, path: &str) -> bool {
        let any = |globs: &[String]| {
            globs.iter().any(|g| {
                globset::Glob::new(g)
                    .map(|g| g.compile_matcher().is_match(path))
                    .unwrap_or(false)
            })
        };
        (self.include_paths.is_empty() || any(&self.include_paths)) && !any(&self.exclude_paths)
    }
}

/// `views[phase]` over `views["default"]` over the built-in values.
pub fn resolve(views: &BTreeMap<String, ContextPolicy>, phase: &str) -> Resolved {
    let empty = ContextPolicy::default();
    let p = views
        .get("default")
        .unwrap_or(&empty)
        .merged(views.get(phase).unwrap_or(&empty));
    Resolved {
        include_resources: p.include_resources,
        exclude_resources: p.exclude_resources,
        include_paths: p.include_paths,
        exclude_paths: p.exclude_paths,
        hot_max_tokens: p.hot_max_tokens.unwrap_or(DEFAULT_HOT_MAX_TOKENS),
        warm_max_decisions: p.warm_max_decisions.unwrap_or(DEFAULT_WARM_MAX_DECISIONS),
        cold_max_decisions: p.cold_max_decisions.unwrap_or(DEFAULT_COLD_MAX_DECISIONS),
        query_limit: p.query_limit.unwrap_or(DEFAULT_QUERY_LIMIT),
        max_file_size: p.max_file_size.unwrap_or(DEFAULT_MAX_FILE_SIZE),
        max_total_size: p.max_total_size.unwrap_or(DEFAULT_MAX_TOTAL_SIZE),
        summarize: p.summarize.unwrap_or(false),
        summary_max_tokens: p.summary_max_tokens.unwrap_or(DEFAULT_SUMMARY_MAX_TOKENS),
    }
}

fn decode(text: &str) -> ContextPolicy {
    serde_json::from_str(text).unwrap_or_default()
}

/// A project's policies by view (views never set are absent).
///
/// # Errors
/// [`StoreError`].
pub fn project_policies(
    store: &Store,
    project_id: &Id,
) -> Result<BTreeMap<String, ContextPolicy>, StoreError> {
    let mut q = store
        .conn()
        .prepare("SELECT view, policy FROM project_context_policies WHERE project_id = ?1")?;
    let rows = q.query_map([project_id.to_string()], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = BTreeMap::new();
    for r in rows {
        let (view, text) = r?;
        out.insert(view, decode(&text));
    }
    Ok(out)
}

/// Sets (or with an empty policy, clears) one view of a project's policy.
///
/// # Errors
/// [`StoreError`].
pub fn set_project_policy(
    store: &mut Store,
    project_id: &Id,
    view: &str,
    policy: &ContextPolicy,
) -> Result<(), StoreError> {
    let tx = store.conn_mut().transaction()?;
    if policy.is_empty() {
        tx.execute(
            "DELETE FROM project_context_policies WHERE project_id = ?1 AND view = ?2",
            params![project_id.to_string(), view],
        )?;
    } else {
        tx.execute(
            "INSERT INTO project_context_policies VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (project_id, view) DO UPDATE SET policy = excluded.policy, updated_at = excluded.updated_at",
            params![
                project_id.to_string(),
                view,
                serde_json::to_string(policy).unwrap_or_default(),
                Timestamp::now().to_string()
            ],
        )?;
    }
    // A project's context policy is part of the project (spec section 25).
    let name = events::name_in(&tx, "projects", "project_id", &project_id.to_string())?;
    events::registry_changed(&tx, Registry::Project, &name, Change::Updated)?;
    tx.commit()?;
    Ok(())
}

/// The policy a plan resolved for `phase`: frozen on the plan the first time it is asked for
/// (from its first target project's views), read back from then on.
///
/// # Errors
/// [`StoreError`].
pub fn for_plan(
    store: &Store,
    plan_id: &Id,
    projects: &[String],
    phase: &str,
) -> Result<Resolved, StoreError> {
    let frozen: Option<String> = store
        .conn()
        .query_row(
            "SELECT policies FROM plan_context_policies WHERE plan_id = ?1",
            [plan_id.to_string()],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(text) = frozen
        && let Ok(all) = serde_json::from_str::<BTreeMap<String, Resolved>>(&text)
        && let Some(r) = all.get(phase)
    {
        return Ok(r.clone());
    }
    let mut views = BTreeMap::new();
    for name in projects {
        let id: Option<String> = store
            .conn()
            .query_row(
                "SELECT project_id FROM projects WHERE name = ?1",
                [name],
                |r| r.get(0),
            )
            .optional()?;
        let Some(p) = id.and_then(|i| i.parse::<Id>().ok()) else {
            continue;
        };
        for (view, policy) in project_policies(store, &p)? {
            views.entry(view).or_insert(policy);
        }
    }
    let all: BTreeMap<String, Resolved> = ["strategize", "execute", "apply"]
        .into_iter()
        .map(|ph| (ph.to_string(), resolve(&views, ph)))
        .collect();
    store.conn().execute(
        "INSERT OR IGNORE INTO plan_context_policies VALUES (?1, ?2, ?3)",
        params![
            plan_id.to_string(),
            serde_json::to_string(&all).unwrap_or_default(),
            Timestamp::now().to_string()
        ],
    )?;
    Ok(all
        .get(phase)
        .cloned()
        .unwrap_or_else(|| resolve(&views, phase)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_takes_its_view_then_default_then_the_builtin_values() {
        let mut views = BTreeMap::new();
        views.insert(
            "default".to_string(),
            ContextPolicy {
                hot_max_tokens: Some(100),
                query_limit: Some(5),
                ..Default::default()
            },
        );
        views.insert(
            "execute".to_string(),
            ContextPolicy {
                hot_max_tokens: Some(300),
                exclude_paths: vec!["**/*.lock".into()],
                ..Default::default()
            },
        );
        let s = resolve(&views, "strategize");
        let e = resolve(&views, "execute");
        assert_eq!((s.hot_max_tokens, s.query_limit), (100, 5));
        assert_eq!((e.hot_max_tokens, e.query_limit), (300, 5));
        assert_eq!(s.warm_max_decisions, DEFAULT_WARM_MAX_DECISIONS);
        assert!(s.takes_path("Cargo.lock") && !e.takes_path("Cargo.lock"));
    }
}
