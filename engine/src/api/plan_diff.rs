//! A plan's diff (spec section 11, "Diff and review"): the change of its live sandboxes against
//! their bases, or, once applied, what Apply wrote. Computed here, rendered by each face; the
//! view carries every file with its hunks, so it reads the same through a server.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};
use crate::domain::event::EventKind;
use crate::domain::{Id, Phase, Plan};
use crate::sandbox::applied::{self, AppliedResource};
use crate::sandbox::diff::{self, DiffRequest, DiffStats, FileDiff};
use crate::sandbox::{Sandbox, Strategy, attribution, lifetime};
use crate::store::Store;

/// What `plan diff` asks for.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DiffQuery {
    /// Plan id or unique prefix.
    pub plan: String,
    /// Only the sandbox (or applied resource) answering to this name.
    pub resource: Option<String>,
    /// Only files at or under this path.
    pub path: Option<String>,
    /// With hunks (`false`: files and line counts only).
    pub hunks: bool,
    /// After a partial Apply: the sandbox's whole change instead of what Apply wrote.
    pub remainder: bool,
    /// Attribute each hunk to its decisions and give it its review id (`docs/review.md`);
    /// the unified text needs neither.
    pub marks: bool,
    /// Each file as its JSON text ([`ResourceDiff::files_json`]) instead of a typed
    /// [`FileDiff`]: serialized on the thread that diffed it, for output that prints the
    /// files as JSON and nothing else (the json format of `plan diff`).
    #[serde(default)]
    pub encoded: bool,
    /// Without marks: each file's unified text ([`ResourceDiff::texts`]) made on the thread
    /// that diffed it, and its hunks dropped there, for output that shows the text and the
    /// file list only (the human formats of `plan diff`).
    #[serde(default)]
    pub unified: bool,
}

/// `plan diff`'s answer.
///
/// Read with the tag first, as it is written, so that a large diff is read in one pass and its
/// [`ResourceDiff::files_json`] kept as they came (see the `Deserialize` impl).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum DiffView {
    /// The change of the plan's live sandboxes.
    Sandboxes(SandboxesDiff),
    /// What the plan's Apply wrote.
    Applied(AppliedDiff),
}

/// [`DiffView::Sandboxes`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxesDiff {
    /// The plan.
    pub plan_id: Id,
    /// The selected live sandboxes' changes (empty when the plan has none, or when none
    /// answers to the query's resource).
    pub resources: Vec<ResourceDiff>,
    /// The names of every live sandbox of the plan.
    pub names: Vec<String>,
    /// Whether the plan had sandboxes that were released or removed since.
    pub released: bool,
}

/// One sandbox's part of [`SandboxesDiff`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ResourceDiff {
    /// The resource the sandbox holds.
    pub resource_name: String,
    /// How it is sandboxed.
    pub strategy: Strategy,
    /// The commit it started from (git checkouts).
    pub base_commit: Option<String>,
    /// Totals over [`Self::files`].
    pub stats: DiffStats,
    /// The changed files (empty when [`DiffQuery::encoded`] was asked for).
    pub files: Vec<FileDiff>,
    /// With [`DiffQuery::encoded`]: each changed file as compact JSON text (the
    /// serialization of its [`FileDiff`]), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<FileDiff>")]
    pub files_json: Vec<Box<serde_json::value::RawValue>>,
    /// With [`DiffQuery::encoded`]: the files whose added lines hold a secret's value, with
    /// those lines (what [`FileDiff::secrets`] holds inside [`Self::files_json`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<FileSecrets>,
    /// With [`DiffQuery::unified`]: the unified text of each of [`Self::files`] (whose hunks
    /// are then dropped), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub texts: Vec<String>,
}

/// A changed file's lines that hold a secret's value ([`ResourceDiff::secrets`]).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileSecrets {
    /// The file's path.
    pub path: String,
    /// Its lines holding a secret.
    pub lines: Vec<crate::sandbox::diff::SecretLine>,
}

/// The tag of [`DiffView`].
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum DiffState {
    Sandboxes,
    Applied,
}

impl<'de> Deserialize<'de> for DiffView {
    /// serde's derived reader of an internally tagged enum buffers the whole value before it
    /// looks at the tag, which doubles the work for a large diff and cannot keep a file's JSON
    /// text as it came. This one reads the tag first (as [`DiffView`] is written) and the rest
    /// straight into its variant; with the tag elsewhere it falls back to a JSON value.
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, Visitor, value::MapAccessDeserializer};
        struct Tagged;
        fn variant<'de, D: serde::Deserializer<'de>>(
            state: DiffState,
            rest: D,
        ) -> Result<DiffView, D::Error> {
            Ok(match state {
                DiffState::Sandboxes => DiffView::Sandboxes(SandboxesDiff::deserialize(rest)?),
                DiffState::Applied => DiffView::Applied(AppliedDiff::deserialize(rest)?),
            })
        }
        impl<'de> Visitor<'de> for Tagged {
            type Value = DiffView;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a diff view with its `state`")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DiffView, A::Error> {
                let first: Option<String> = map.next_key()?;
                if first.as_deref() == Some("state") {
                    let state: DiffState = map.next_value()?;
                    return variant(state, MapAccessDeserializer::new(map));
                }
                let mut fields = serde_json::Map::new();
                if let Some(key) = first {
                    fields.insert(key, map.next_value()?);
                }
                while let Some((key, value)) = map.next_entry::<String, serde_json::Value>()? {
                    fields.insert(key, value);
                }
                let state = fields
                    .remove("state")
                    .ok_or_else(|| A::Error::missing_field("state"))?;
                let state = DiffState::deserialize(state).map_err(A::Error::custom)?;
                variant(state, serde_json::Value::Object(fields)).map_err(A::Error::custom)
            }
        }
        deserializer.deserialize_map(Tagged)
    }
}

/// [`DiffView::Applied`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AppliedDiff {
    /// The plan.
    pub plan_id: Id,
    /// The selected resources Apply wrote (empty when none answers to the query's resource).
    pub resources: Vec<AppliedResource>,
    /// The names of every resource Apply wrote.
    pub names: Vec<String>,
    /// What the plan's last Apply left out (its `apply_complete` event), `[]` when nothing.
    pub left_out: serde_json::Value,
    /// The plan's sandboxes were released (`plan cleanup`) or removed: what Apply left out
    /// is no longer anywhere to diff (`--remainder` has nothing to show).
    #[serde(default)]
    pub sandbox_released: bool,
}

/// Answers `query` on `engine`; orphaned and expired sandboxes are swept first, as every
/// sandbox command does.
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS` for the plan; store, sandbox and git failures.
pub(crate) fn diff(engine: &Engine, query: &DiffQuery) -> Result<DiffView, ApiError> {
    let (store, plan) = open_swept(engine, &query.plan)?;
    let sandboxes = engine.sandboxes();
    let active = sandboxes.active(&store, &plan.plan_id)?;
    let request = DiffRequest {
        path: query.path.clone(),
        hunks: query.hunks,
    };
    if plan.phase() == Phase::Applied && (active.is_empty() || !query.remainder) {
        let mut view = applied_diff(&store, &plan, query.resource.as_deref(), &request)?;
        if let DiffView::Applied(a) = &mut view {
            a.sandbox_released = active.is_empty();
        }
        return Ok(view);
    }
    let mut resources = Vec::new();
    for sb in active.iter().filter(|s| {
        query
            .resource
            .as_deref()
            .is_none_or(|r| s.target.answers_to(r))
    }) {
        resources.push(resource_diff(&store, sb, &request, query)?);
    }
    let released = active.is_empty() && !store.sandboxes_of_plan(&plan.plan_id)?.is_empty();
    Ok(DiffView::Sandboxes(SandboxesDiff {
        plan_id: plan.plan_id,
        resources,
        names: active
            .iter()
            .map(|s| s.target.resource_name.clone())
            .collect(),
        released,
    }))
}

/// A store with the plan `input` resolved, after sweeping orphaned and expired sandboxes
/// (a failed sweep is logged, not fatal).
///
/// # Errors
/// `NOT_FOUND`, `AMBIGUOUS`, store failures.
pub(crate) fn open_swept(engine: &Engine, input: &str) -> Result<(Store, Plan), ApiError> {
    let mut store = engine.store()?;
    let retention = engine.settings().sandbox_retention_days;
    if let Err(e) = lifetime::sweep(&mut store, &engine.sandboxes(), Timestamp::now(), retention) {
        tracing::warn!(error = %e, "sandbox sweep failed");
    }
    let id = store.resolve_plan_id(input)??;
    let plan = store
        .plan(&id)?
        .ok_or(crate::lifecycle::RunError::NotFound(id))?;
    Ok((store, plan))
}

/// One live sandbox's change.
fn resource_diff(
    store: &Store,
    sb: &Sandbox,
    request: &DiffRequest,
    query: &DiffQuery,
) -> Result<ResourceDiff, ApiError> {
    if query.encoded && query.marks {
        return encoded_resource_diff(store, sb, request);
    }
    let mut texts = Vec::new();
    let files = if query.marks {
        let mut files = attribution::attributed_diff(store, sb, request)?;
        // Without hunks there are no review items to name.
        if request.hunks {
            crate::review::assign_ids(&sb.record.resource_name, &mut files);
        }
        files
    } else if query.unified {
        let each = diff::sandbox_diff_each(sb, request, &|mut file| {
            let text = diff::unified(std::slice::from_ref(&file));
            file.hunks = Vec::new();
            (file, text)
        })?;
        let mut files = Vec::with_capacity(each.len());
        texts.reserve(each.len());
        for (file, text) in each {
            files.push(file);
            texts.push(text);
        }
        files
    } else {
        diff::sandbox_diff(sb, request)?
    };
    Ok(ResourceDiff {
        resource_name: sb.target.resource_name.clone(),
        strategy: sb.record.strategy,
        base_commit: sb.record.base_commit.clone(),
        stats: diff::stats(&files),
        files,
        files_json: Vec::new(),
        secrets: Vec::new(),
        texts,
    })
}

/// [`resource_diff`] with attribution and review ids, each file serialized to its JSON text
/// on the thread that diffed it (and its lines dropped there).
fn encoded_resource_diff(
    store: &Store,
    sb: &Sandbox,
    request: &DiffRequest,
) -> Result<ResourceDiff, ApiError> {
    let resource = &sb.record.resource_name;
    let hunks = request.hunks;
    let encoded = attribution::attributed_diff_each(store, sb, request, &|mut file| {
        // Without hunks there are no review items to name.
        if hunks {
            crate::review::assign_file_ids(resource, &mut file);
        }
        let json = serde_json::value::to_raw_value(&file);
        let secrets = (!file.secrets.is_empty()).then(|| FileSecrets {
            path: file.path.clone(),
            lines: std::mem::take(&mut file.secrets),
        });
        (json, DiffStats::of(&file), secrets)
    })?;
    let mut stats = DiffStats::default();
    let mut files_json = Vec::with_capacity(encoded.len());
    let mut secrets = Vec::new();
    for (json, file_stats, file_secrets) in encoded {
        files_json.push(json.map_err(|e| ApiError::Failed {
            code: super::ErrorCode::Internal,
            message: format!("serializing a file of the diff: {e}"),
            detail: None,
            hints: Vec::new(),
            data: Box::new(serde_json::Value::Null),
        })?);
        stats += file_stats;
        secrets.extend(file_secrets);
    }
    Ok(ResourceDiff {
        resource_name: sb.target.resource_name.clone(),
        strategy: sb.record.strategy,
        base_commit: sb.record.base_commit.clone(),
        stats,
        files: Vec::new(),
        files_json,
        secrets,
        texts: Vec::new(),
    })
}

/// What an applied plan wrote, from stored records (the applied commit, else the sandbox's
/// history, else the journal).
fn applied_diff(
    store: &Store,
    plan: &Plan,
    resource: Option<&str>,
    request: &DiffRequest,
) -> Result<DiffView, ApiError> {
    let all = applied::applied_changes(store, &plan.plan_id, request)?;
    let names = all.iter().map(|a| a.resource_name.clone()).collect();
    let resources = all
        .into_iter()
        .filter(|a| {
            resource
                .is_none_or(|r| a.resource_name == r || a.resource_name.ends_with(&format!("/{r}")))
        })
        .collect();
    Ok(DiffView::Applied(AppliedDiff {
        plan_id: plan.plan_id,
        resources,
        names,
        left_out: last_left_out(store, &plan.plan_id)?,
        sandbox_released: false,
    }))
}

/// The items the plan's last Apply left out (its `apply_complete` event), `[]` when none.
pub(crate) fn last_left_out(store: &Store, plan: &Id) -> Result<serde_json::Value, ApiError> {
    let events = crate::store::events::after(store, 0, Some(plan), u32::MAX)?;
    Ok(events
        .into_iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::ApplyComplete(c) => Some(c.left_out),
            _ => None,
        })
        .filter(|l| !l.is_null())
        .unwrap_or_else(|| serde_json::json!([])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::diff::FileStatus;

    fn a_view() -> DiffView {
        let file = FileDiff {
            path: "src/a.rs".into(),
            status: FileStatus::Added,
            new_size: Some(3),
            additions: 1,
            ..FileDiff::default()
        };
        DiffView::Sandboxes(SandboxesDiff {
            plan_id: Id::generate(),
            resources: vec![ResourceDiff {
                resource_name: "local/app".into(),
                strategy: Strategy::GitWorktree,
                base_commit: Some("abc".into()),
                stats: diff::stats(std::slice::from_ref(&file)),
                files: Vec::new(),
                files_json: vec![serde_json::value::to_raw_value(&file).unwrap()],
                secrets: Vec::new(),
                texts: Vec::new(),
            }],
            names: vec!["local/app".into()],
            released: false,
        })
    }

    #[test]
    fn a_diff_view_reads_back_with_its_files_json_as_written() {
        let written = serde_json::to_string(&a_view()).unwrap();
        assert!(written.starts_with(r#"{"state":"sandboxes","#), "{written}");
        let read: DiffView = serde_json::from_str(&written).unwrap();
        assert_eq!(serde_json::to_string(&read).unwrap(), written);
    }

    #[test]
    fn a_diff_view_with_its_state_last_reads_the_same() {
        let written = serde_json::to_value(a_view()).unwrap();
        let mut fields = written.as_object().unwrap().clone();
        let state = fields.shift_remove("state").unwrap();
        fields.insert("state".into(), state);
        let reordered = serde_json::to_string(&serde_json::Value::Object(fields)).unwrap();
        assert!(
            reordered.ends_with(r#""state":"sandboxes"}"#),
            "{reordered}"
        );
        let read: DiffView = serde_json::from_str(&reordered).unwrap();
        assert_eq!(serde_json::to_value(&read).unwrap(), written);
        let err = serde_json::from_str::<DiffView>(r#"{"plan_id":"x"}"#).unwrap_err();
        assert!(err.to_string().contains("state"), "{err}");
    }
}
