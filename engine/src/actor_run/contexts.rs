//! Actor contexts (spec sections 05 and 06, `actor context list|show|export|import|delete|
//! clear|rm` and `actor run --context NAME | --context-dir DIR | --load-context NAME`): a
//! named, persisted conversation (and set of text files) that `actor run` continues.
//!
//! - `--context NAME`: the run sees the context's conversation and files; its prompt and
//!   answer are appended to it (the context is created on first use).
//! - `--load-context NAME|FILE`: the run sees that context's conversation (or the one in an
//!   exported file) without changing it.
//! - `--context-dir DIR`: the text files under DIR (ignore rules honoured, at most
//!   [`MAX_FILE_BYTES`] each and [`MAX_TOTAL_BYTES`] in all) are stored in the `--context`
//!   context, replacing its files, and shown to the model with the prompt.
//! - An actor's `memory_enabled: false` hides a loaded conversation; `max_history: N` shows
//!   the last N messages.
//!
//! Export files are the envelope of [`crate::session::export::seal`] with format
//! [`FORMAT`].

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::OneShot;
use crate::actors::messages::Message;
use crate::actors::runtime::ActorRun;
use crate::domain::actor::ActorMemory;
use crate::store::{Store, StoreError};

/// The `format` field of an exported context.
pub const FORMAT: &str = "cleveragents-actor-context";
/// The schema version written and read.
pub const SCHEMA_VERSION: u32 = 1;
/// Largest file taken from a `--context-dir`, in bytes.
pub const MAX_FILE_BYTES: u64 = 256 * 1024;
/// Most bytes taken from a `--context-dir` in all.
pub const MAX_TOTAL_BYTES: u64 = 1024 * 1024;

/// Errors about contexts.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// No context of that name.
    #[error("no actor context `{name}`{}", near.as_ref().map(|n| format!("; did you mean `{n}`?")).unwrap_or_default())]
    NotFound {
        /// The name given.
        name: String,
        /// A close existing name.
        near: Option<String>,
    },
    /// The name is empty or has characters other than letters, digits, `-`, `_`, `.`.
    #[error("context name `{0}`: use letters, digits, `-`, `_` and `.` (at most 64)")]
    BadName(String),
    /// Import over an existing context without `--update`.
    #[error("actor context `{0}` already exists")]
    Exists(String),
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
    /// An export file is not a valid context export.
    #[error("{path}: {message}")]
    Import {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for ContextError {
    fn from(e: rusqlite::Error) -> Self {
        ContextError::Store(StoreError::from(e))
    }
}

/// A context's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextSummary {
    /// Its name.
    pub name: String,
    /// The actor that last used it.
    pub actor: Option<String>,
    /// Where it was imported from (the file), if it was.
    pub imported_from: Option<String>,
    /// Messages in its conversation.
    pub messages: u64,
    /// Files it holds.
    pub files: u64,
    /// Bytes of message and file content.
    pub bytes: u64,
    /// When it was made.
    pub created_at: jiff::Timestamp,
    /// When it last changed.
    pub updated_at: jiff::Timestamp,
}

/// One item of a context: a message or a file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContextItem {
    /// A message of the conversation.
    Message {
        /// The message.
        message: Message,
        /// The actor that spoke or was spoken to.
        actor: Option<String>,
        /// The `actor run` it came from.
        run_id: Option<String>,
        /// When it was added.
        added_at: jiff::Timestamp,
    },
    /// A text file.
    File {
        /// Its path relative to the `--context-dir`.
        path: String,
        /// Its text.
        content: String,
        /// When it was added.
        added_at: jiff::Timestamp,
    },
}

/// A context with its items, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextDetail {
    /// The summary.
    pub summary: ContextSummary,
    /// The items.
    pub items: Vec<ContextItem>,
}

impl ContextDetail {
    /// The conversation.
    pub fn messages(&self) -> Vec<Message> {
        self.items
            .iter()
            .filter_map(|i| match i {
                ContextItem::Message { message, .. } => Some(message.clone()),
                ContextItem::File { .. } => None,
            })
            .collect()
    }

    /// The files, as (path, text).
    pub fn files(&self) -> Vec<(String, String)> {
        self.items
            .iter()
            .filter_map(|i| match i {
                ContextItem::File { path, content, .. } => Some((path.clone(), content.clone())),
                ContextItem::Message { .. } => None,
            })
            .collect()
    }
}

/// Checks a context name.
///
/// # Errors
/// [`ContextError::BadName`].
pub fn check_name(name: &str) -> Result<(), ContextError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ContextError::BadName(name.to_string()))
    }
}

fn ts(s: String) -> jiff::Timestamp {
    s.parse().unwrap_or_default()
}

/// Every context, by name.
///
/// # Errors
/// Store errors.
pub fn list(store: &Store) -> Result<Vec<ContextSummary>, ContextError> {
    let mut stmt = store.conn().prepare(
        "SELECT c.name, c.actor, c.imported_from, c.created_at, c.updated_at,
                (SELECT COUNT(*) FROM actor_context_items i WHERE i.context_name = c.name AND i.kind = 'message'),
                (SELECT COUNT(*) FROM actor_context_items i WHERE i.context_name = c.name AND i.kind = 'file'),
                (SELECT COALESCE(SUM(LENGTH(CAST(i.content AS BLOB))), 0) FROM actor_context_items i WHERE i.context_name = c.name)
         FROM actor_contexts c ORDER BY c.name",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok(ContextSummary {
                name: r.get(0)?,
                actor: r.get(1)?,
                imported_from: r.get(2)?,
                created_at: ts(r.get(3)?),
                updated_at: ts(r.get(4)?),
                messages: r.get::<_, i64>(5)? as u64,
                files: r.get::<_, i64>(6)? as u64,
                bytes: r.get::<_, i64>(7)? as u64,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

fn not_found(store: &Store, name: &str) -> ContextError {
    let names: Vec<String> = list(store)
        .map(|l| l.into_iter().map(|c| c.name).collect())
        .unwrap_or_default();
    let near = crate::registry::lookup::Missing::near(name, names.iter().map(String::as_str));
    ContextError::NotFound {
        name: name.to_string(),
        near: near.suggestion.map(|s| s.to_string()),
    }
}

/// The context called `name`, or `None`.
///
/// # Errors
/// Store errors.
pub fn find(store: &Store, name: &str) -> Result<Option<ContextDetail>, ContextError> {
    let Some(summary) = list(store)?.into_iter().find(|c| c.name == name) else {
        return Ok(None);
    };
    let mut stmt = store.conn().prepare(
        "SELECT kind, path, content, actor, run_id, added_at FROM actor_context_items
         WHERE context_name = ?1 ORDER BY seq",
    )?;
    let raw = stmt
        .query_map([name], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, Option<String>>(3)?,
                r.get::<_, Option<String>>(4)?,
                r.get::<_, String>(5)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut items = Vec::with_capacity(raw.len());
    for (kind, path, content, actor, run_id, added_at) in raw {
        let added_at = ts(added_at);
        if kind == "file" {
            items.push(ContextItem::File {
                path: path.unwrap_or_default(),
                content,
                added_at,
            });
        } else if let Ok(message) = serde_json::from_str(&content) {
            items.push(ContextItem::Message {
                message,
                actor,
                run_id,
                added_at,
            });
        }
    }
    Ok(Some(ContextDetail { summary, items }))
}

/// The context called `name`.
///
/// # Errors
/// [`ContextError::NotFound`] with a close name; store errors.
pub fn get(store: &Store, name: &str) -> Result<ContextDetail, ContextError> {
    find(store, name)?.ok_or_else(|| not_found(store, name))
}

/// Appends `items` to context `name` (created if missing) in one transaction; `actor` is
/// recorded as its last user. `replace_files` first drops its files.
fn append(
    store: &mut Store,
    name: &str,
    actor: Option<&str>,
    items: &[ContextItem],
    replace_files: bool,
) -> Result<(), ContextError> {
    check_name(name)?;
    let now = jiff::Timestamp::now().to_string();
    let tx = store.conn_mut().transaction()?;
    tx.execute(
        "INSERT INTO actor_contexts (name, actor, created_at, updated_at) VALUES (?1, ?2, ?3, ?3)
         ON CONFLICT(name) DO UPDATE SET actor = COALESCE(?2, actor), updated_at = ?3",
        rusqlite::params![name, actor, now],
    )?;
    if replace_files {
        tx.execute(
            "DELETE FROM actor_context_items WHERE context_name = ?1 AND kind = 'file'",
            [name],
        )?;
    }
    let mut seq: i64 = tx.query_row(
        "SELECT COALESCE(MAX(seq), 0) FROM actor_context_items WHERE context_name = ?1",
        [name],
        |r| r.get(0),
    )?;
    for item in items {
        seq += 1;
        insert_item(&tx, name, seq, item)?;
    }
    tx.commit()?;
    Ok(())
}

fn insert_item(
    tx: &crate::store::Transaction<'_>,
    name: &str,
    seq: i64,
    item: &ContextItem,
) -> Result<(), ContextError> {
    match item {
        ContextItem::Message {
            message,
            actor,
            run_id,
            added_at,
        } => {
            let role = match message {
                Message::User { .. } => "user",
                Message::Assistant { .. } => "assistant",
                Message::ToolResults { .. } => "tool_results",
            };
            tx.execute(
                "INSERT INTO actor_context_items (context_name, seq, kind, role, content, actor, run_id, added_at)
                 VALUES (?1, ?2, 'message', ?3, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    name,
                    seq,
                    role,
                    serde_json::to_string(message).expect("a message serializes"),
                    actor,
                    run_id,
                    added_at.to_string()
                ],
            )?;
        }
        ContextItem::File {
            path,
            content,
            added_at,
        } => {
            tx.execute(
                "INSERT INTO actor_context_items (context_name, seq, kind, path, content, added_at)
                 VALUES (?1, ?2, 'file', ?3, ?4, ?5)",
                rusqlite::params![name, seq, path, content, added_at.to_string()],
            )?;
        }
    }
    Ok(())
}

/// What `delete`, `clear` or `rm` removed from one context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Removed {
    /// The context.
    pub name: String,
    /// Items removed.
    pub items: u64,
    /// Bytes removed.
    pub bytes: u64,
}

/// What to remove.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Removal {
    /// The whole context (`delete`).
    Context,
    /// Every item, keeping the context (`clear`).
    Items,
    /// Its files, keeping its conversation (`rm`).
    Files,
}

/// Removes from the contexts `names` (every context when `None`) what `what` says, in one
/// transaction.
///
/// # Errors
/// [`ContextError::NotFound`] for a name that is not a context (nothing is removed).
pub fn remove(
    store: &mut Store,
    names: Option<&[String]>,
    what: Removal,
) -> Result<Vec<Removed>, ContextError> {
    let all = list(store)?;
    let targets: Vec<&ContextSummary> = match names {
        None => all.iter().collect(),
        Some(names) => {
            let mut out = Vec::new();
            for n in names {
                out.push(
                    all.iter()
                        .find(|c| &c.name == n)
                        .ok_or_else(|| not_found(store, n))?,
                );
            }
            out
        }
    };
    let mut removed = Vec::new();
    let now = jiff::Timestamp::now().to_string();
    let tx = store.conn_mut().transaction()?;
    for c in targets {
        let filter = match what {
            Removal::Files => " AND kind = 'file'",
            Removal::Context | Removal::Items => "",
        };
        let (items, bytes): (i64, i64) = tx.query_row(
            &format!("SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(content AS BLOB))), 0) FROM actor_context_items WHERE context_name = ?1{filter}"),
            [&c.name],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        tx.execute(
            &format!("DELETE FROM actor_context_items WHERE context_name = ?1{filter}"),
            [&c.name],
        )?;
        if what == Removal::Context {
            tx.execute("DELETE FROM actor_contexts WHERE name = ?1", [&c.name])?;
        } else {
            tx.execute(
                "UPDATE actor_contexts SET updated_at = ?2 WHERE name = ?1",
                [&c.name, &now],
            )?;
        }
        removed.push(Removed {
            name: c.name.clone(),
            items: items as u64,
            bytes: bytes as u64,
        });
    }
    tx.commit()?;
    Ok(removed)
}

/// The export document of context `name` and its checksum.
///
/// # Errors
/// [`ContextError::NotFound`]; store errors.
pub fn export(
    store: &Store,
    name: &str,
) -> Result<(serde_json::Value, String, ContextDetail), ContextError> {
    let detail = get(store, name)?;
    let content = serde_json::to_value(&detail).expect("a context serializes");
    let (doc, sum) = crate::session::export::seal(FORMAT, SCHEMA_VERSION, content);
    Ok((doc, sum, detail))
}

/// Reads and checks an export file.
///
/// # Errors
/// [`ContextError::File`] when it cannot be read, [`ContextError::Import`] naming what is
/// wrong (not JSON, another format or schema version, a checksum mismatch).
pub fn read_export(path: &Path) -> Result<(ContextDetail, String), ContextError> {
    let text = crate::safe_read::read_regular_text(path, crate::safe_read::IMPORT_MAX_BYTES)
        .map_err(|e| ContextError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    parse_export(&path.display().to_string(), &text)
}

/// Checks an export file's `text`; `source` names the file in errors.
///
/// # Errors
/// [`ContextError::Import`] naming what is wrong (not JSON, another format or schema
/// version, a checksum mismatch).
pub fn parse_export(source: &str, text: &str) -> Result<(ContextDetail, String), ContextError> {
    let bad = |message: String| ContextError::Import {
        path: source.to_string(),
        message,
    };
    let (content, sum) =
        crate::session::export::unseal(FORMAT, "an actor context export", SCHEMA_VERSION, text)
            .map_err(bad)?;
    let detail: ContextDetail = serde_json::from_value(content)
        .map_err(|e| bad(format!("the content does not read back ({e})")))?;
    Ok((detail, sum))
}

/// What `import` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ImportedContext {
    /// The stored context.
    pub summary: ContextSummary,
    /// The verified checksum.
    pub checksum: String,
    /// Whether an existing context was replaced.
    pub replaced: bool,
}

/// Imports an export file as context `name` (default: the name in the file), replacing an
/// existing one only with `update`.
///
/// # Errors
/// File and import errors, a bad name, [`ContextError::Exists`] without `update`.
pub fn import(
    store: &mut Store,
    path: &Path,
    name: Option<&str>,
    update: bool,
) -> Result<ImportedContext, ContextError> {
    let text = crate::safe_read::read_regular_text(path, crate::safe_read::IMPORT_MAX_BYTES)
        .map_err(|e| ContextError::File {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    import_text(store, &path.display().to_string(), &text, name, update)
}

/// [`import`] of an export file's `text`, read elsewhere; `source` names the file.
///
/// # Errors
/// Import errors, a bad name, [`ContextError::Exists`] without `update`.
pub fn import_text(
    store: &mut Store,
    source: &str,
    text: &str,
    name: Option<&str>,
    update: bool,
) -> Result<ImportedContext, ContextError> {
    let (detail, checksum) = parse_export(source, text)?;
    let name = name.unwrap_or(&detail.summary.name).to_string();
    check_name(&name)?;
    let replaced = find(store, &name)?.is_some();
    if replaced && !update {
        return Err(ContextError::Exists(name));
    }
    let now = jiff::Timestamp::now().to_string();
    let tx = store.conn_mut().transaction()?;
    tx.execute("DELETE FROM actor_contexts WHERE name = ?1", [&name])?;
    tx.execute(
        "INSERT INTO actor_contexts (name, actor, imported_from, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        rusqlite::params![
            name,
            detail.summary.actor,
            source,
            detail.summary.created_at.to_string(),
            now
        ],
    )?;
    for (i, item) in detail.items.iter().enumerate() {
        insert_item(&tx, &name, i as i64 + 1, item)?;
    }
    tx.commit()?;
    Ok(ImportedContext {
        summary: get(store, &name)?.summary,
        checksum,
        replaced,
    })
}

/// The text files under `dir` (ignore rules honoured), sorted by path, within the size caps.
///
/// # Errors
/// [`ContextError::File`] when `dir` is not a directory.
pub fn read_dir(dir: &Path) -> Result<Vec<(String, String)>, ContextError> {
    if !dir.is_dir() {
        return Err(ContextError::File {
            path: dir.display().to_string(),
            message: "not a directory (--context-dir takes a directory of text files)".into(),
        });
    }
    let mut paths: Vec<PathBuf> = ignore::WalkBuilder::new(dir)
        .build()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| e.into_path())
        .collect();
    paths.sort();
    let mut total = 0;
    let mut out = Vec::new();
    for p in paths {
        let size = p.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        if size > MAX_FILE_BYTES || total + size > MAX_TOTAL_BYTES {
            tracing::warn!(path = %p.display(), size, "context file skipped: over the size cap");
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&p) else {
            continue; // not text
        };
        total += size;
        let rel = p.strip_prefix(dir).unwrap_or(&p).display().to_string();
        out.push((rel, text));
    }
    Ok(out)
}

/// The conversation a run starts from: the loaded context's (`--load-context`, else
/// `--context`), cut by the actor's memory settings, then the prompt (with the context's
/// files before it). Empty when there is nothing to continue (the run starts from its
/// prompt). `--context-dir` files are stored in the `--context` context first.
///
/// # Errors
/// A context or file that cannot be read; `--context-dir` without `--context`.
pub fn history_for(
    store: &mut Store,
    request: &OneShot,
    memory: &ActorMemory,
) -> Result<Vec<Message>, ContextError> {
    if let Some(dir) = &request.context_dir {
        let Some(name) = &request.context else {
            return Err(ContextError::File {
                path: dir.display().to_string(),
                message: "--context-dir needs --context NAME, the context its files are kept in"
                    .into(),
            });
        };
        let now = jiff::Timestamp::now();
        let files: Vec<ContextItem> = read_dir(dir)?
            .into_iter()
            .map(|(path, content)| ContextItem::File {
                path,
                content,
                added_at: now,
            })
            .collect();
        append(store, name, Some(&request.actor), &files, true)?;
    }
    let loaded = match (&request.load_context, &request.context) {
        (Some(source), _) => Some(load(store, source)?),
        (None, Some(name)) => find(store, name)?,
        (None, None) => None,
    };
    let Some(detail) = loaded else {
        return Ok(Vec::new());
    };
    let mut messages = if memory.enabled == Some(false) {
        Vec::new()
    } else {
        detail.messages()
    };
    if let Some(max) = memory.max_history {
        let skip = messages.len().saturating_sub(max as usize);
        messages.drain(..skip);
    }
    // A conversation starts with the user.
    while messages
        .first()
        .is_some_and(|m| !matches!(m, Message::User { .. }))
    {
        messages.remove(0);
    }
    let files = detail.files();
    if messages.is_empty() && files.is_empty() {
        return Ok(Vec::new());
    }
    let mut text = String::new();
    if !files.is_empty() {
        text.push_str("Context files:\n");
        for (path, content) in &files {
            text.push_str(&format!("\n--- {path} ---\n{content}\n"));
        }
        text.push('\n');
    }
    text.push_str(&request.prompt);
    messages.push(Message::User { text });
    Ok(messages)
}

/// A context by name, or an exported context file when `source` is a path to a file.
fn load(store: &Store, source: &str) -> Result<ContextDetail, ContextError> {
    let path = Path::new(source);
    if path.is_file() {
        return Ok(read_export(path)?.0);
    }
    get(store, source)
}

/// Saves a finished run to its `--context`: the prompt and the answer.
///
/// # Errors
/// Store errors.
pub fn save_run(
    store: &mut Store,
    request: &OneShot,
    actor: &str,
    run_id: &crate::domain::Id,
    run: &ActorRun,
) -> Result<(), ContextError> {
    let Some(name) = &request.context else {
        return Ok(());
    };
    if run.answer.trim().is_empty() {
        return Ok(());
    }
    let now = jiff::Timestamp::now();
    let item = |message| ContextItem::Message {
        message,
        actor: Some(actor.to_string()),
        run_id: Some(run_id.to_string()),
        added_at: now,
    };
    append(
        store,
        name,
        Some(actor),
        &[
            item(Message::User {
                text: request.prompt.clone(),
            }),
            item(Message::Assistant {
                text: run.answer.clone(),
                tool_calls: Vec::new(),
            }),
        ],
        false,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("db")).unwrap();
        (dir, store)
    }

    fn msg(text: &str) -> ContextItem {
        ContextItem::Message {
            message: Message::User { text: text.into() },
            actor: None,
            run_id: None,
            added_at: jiff::Timestamp::now(),
        }
    }

    #[test]
    fn export_and_import_round_trip_and_a_changed_file_is_refused() {
        let (dir, mut store) = store();
        append(
            &mut store,
            "notes",
            Some("local/a"),
            &[msg("hello"), msg("again")],
            false,
        )
        .unwrap();
        let (doc, sum, detail) = export(&store, "notes").unwrap();
        assert_eq!(detail.messages().len(), 2);
        let file = dir.path().join("notes.json");
        std::fs::write(&file, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        assert!(matches!(
            import(&mut store, &file, None, false),
            Err(ContextError::Exists(_))
        ));
        let copy = import(&mut store, &file, Some("copy"), false).unwrap();
        assert_eq!(copy.checksum, sum);
        assert_eq!(get(&store, "copy").unwrap().messages(), detail.messages());
        let tampered = std::fs::read_to_string(&file)
            .unwrap()
            .replace("hello", "HELLO");
        std::fs::write(&file, tampered).unwrap();
        let e = import(&mut store, &file, Some("x"), false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("checksum mismatch"), "{e}");
        assert!(find(&store, "x").unwrap().is_none());
    }

    #[test]
    fn clear_keeps_the_context_and_delete_removes_it() {
        let (_dir, mut store) = store();
        append(&mut store, "a", None, &[msg("one")], false).unwrap();
        append(&mut store, "b", None, &[msg("two")], false).unwrap();
        let r = remove(&mut store, Some(&["a".to_string()]), Removal::Items).unwrap();
        assert_eq!(r[0].items, 1);
        assert_eq!(get(&store, "a").unwrap().items.len(), 0);
        remove(&mut store, None, Removal::Context).unwrap();
        assert!(list(&store).unwrap().is_empty());
        let e = remove(&mut store, Some(&["zz".to_string()]), Removal::Context).unwrap_err();
        assert!(matches!(e, ContextError::NotFound { .. }));
        assert!(check_name("bad name").is_err());
    }
}
