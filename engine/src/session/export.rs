//! Portable session files (`session export` / `session import`, spec section 06).
//!
//! The file is JSON: `{"format": "cleveragents-session", "schema_version": 1,
//! "checksum": "sha256:HEX", "content": {session, messages, plans}}`. The checksum is the
//! sha256 of the compact JSON of `content` (keys in file order), so reformatting the file
//! keeps it valid and changing any value does not. Import checks the format, the schema
//! version and the checksum, and always stores the session under a new id.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{LinkedPlan, Session, SessionDetail, SessionError, SessionMessage};
use crate::domain::id::Id;

/// The `format` field of an export file.
pub const FORMAT: &str = "cleveragents-session";

/// The schema version written; import accepts this version only.
pub const SCHEMA_VERSION: u32 = 1;

/// What an export file holds.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Content {
    /// The session as exported.
    pub session: Session,
    /// Its messages.
    pub messages: Vec<SessionMessage>,
    /// Its plan references.
    pub plans: Vec<LinkedPlan>,
}

/// `sha256:` and the lowercase hex digest of `bytes`.
pub fn checksum(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// A portable document `{format, schema_version, checksum, content}` around `content`, and
/// its checksum (the sha256 of the compact JSON of `content`). Session and actor context
/// exports share this envelope.
pub fn seal(format: &str, schema_version: u32, content: Value) -> (Value, String) {
    let sum = checksum(content.to_string().as_bytes());
    let doc = serde_json::json!({
        "format": format,
        "schema_version": schema_version,
        "checksum": sum,
        "content": content,
    });
    (doc, sum)
}

/// Opens a document made by [`seal`]: checks it is JSON of `format` (`what` names it in the
/// message, e.g. "a session export"), at `schema_version`, with a checksum that matches its
/// content. Returns the content and the checksum.
///
/// # Errors
/// A message saying what is wrong (without the file's name; the caller adds it).
pub fn unseal(
    format: &str,
    what: &str,
    schema_version: u32,
    text: &str,
) -> Result<(Value, String), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| format!("not valid JSON ({e})"))?;
    if doc.get("format").and_then(Value::as_str) != Some(format) {
        return Err(format!(
            "not {what} (the field `format` must be \"{format}\")"
        ));
    }
    let version = doc
        .get("schema_version")
        .and_then(Value::as_u64)
        .ok_or("the field `schema_version` is missing")?;
    if version != u64::from(schema_version) {
        return Err(format!(
            "schema version {version} is not supported (this CleverAgents reads version {schema_version})"
        ));
    }
    let stated = doc
        .get("checksum")
        .and_then(Value::as_str)
        .ok_or("the field `checksum` is missing")?;
    let content = doc.get("content").ok_or("the field `content` is missing")?;
    let actual = checksum(content.to_string().as_bytes());
    if actual != stated {
        return Err(format!(
            "checksum mismatch: the file states {stated} but its content hashes to {actual}; the file was changed after export"
        ));
    }
    Ok((content.clone(), actual))
}

/// The export document of a session and its checksum.
pub fn document(d: &SessionDetail) -> (Value, String) {
    let content = serde_json::to_value(Content {
        session: d.session.clone(),
        messages: d.messages.clone(),
        plans: d.plans.clone(),
    })
    .expect("session content serializes");
    seal(FORMAT, SCHEMA_VERSION, content)
}

/// A checked export file, ready to store.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The session under its new id, with its messages and plans.
    pub detail: SessionDetail,
    /// The id it had in the file.
    pub original_id: Id,
    /// The verified checksum.
    pub checksum: String,
    /// The schema version of the file.
    pub schema_version: u32,
}

/// Parses and checks an export file's text; `source` names it in errors.
///
/// # Errors
/// [`SessionError::Import`] naming the file and what is wrong: not JSON, not a session
/// export, another schema version, a checksum that does not match, content that does not
/// read back.
pub fn parse(source: &str, text: &str) -> Result<Imported, SessionError> {
    let err = |m: String| SessionError::Import(format!("{source}: {m}"));
    let (content, actual) =
        unseal(FORMAT, "a session export", SCHEMA_VERSION, text).map_err(err)?;
    let content: Content = serde_json::from_value(content)
        .map_err(|e| err(format!("the content does not read back ({e})")))?;
    // The name is checked as `session create --name` checks it: an edited file could hold
    // terminal escapes that every later `session list` would print.
    if let Some(name) = &content.session.name
        && super::check_name(name).is_err()
    {
        return Err(err(format!(
            "the session's name \"{}\" is not one `session create --name` accepts (1 to 64 letters, digits, `-`, `_` or `.`)",
            name.escape_default()
        )));
    }
    let original_id = content.session.session_id;
    let mut session = content.session;
    session.session_id = Id::generate();
    session.imported_from = Some(original_id.to_string());
    Ok(Imported {
        detail: SessionDetail {
            session,
            messages: content.messages,
            plans: content.plans,
        },
        original_id,
        checksum: actual,
        schema_version: SCHEMA_VERSION,
    })
}
