//! Sessions (spec section 20): a user's thread with the orchestrator across invocations.
//!
//! A session has a stable ULID id, is stored in SQLite (tables `sessions`,
//! `session_messages`, `session_plans`, migration 015) and is resumed by id on every
//! `session tell`. Each turn stores the user's message and the orchestrator's answer, the
//! commands the answer executed (as `agents` command lines), the plans it created, and its
//! tokens and cost. Turns older than the session's `max_history` leave the model's context
//! but stay stored; a summary of them is recorded on the session and given to the model.
//!
//! - [`export`]: portable JSON with a schema version and a sha256 checksum, and import.
//! - [`tools`]: the orchestrator's tools, each the equivalent of one `agents` command.
//! - [`orchestrator`]: one `session tell` turn: the model actor, its history and accounting.

pub mod export;
pub mod orchestrator;
pub mod tools;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use crate::domain::id::{Id, IdPrefixError, resolve_prefix};
use crate::store::codec::{from_json, to_json, ts};
use crate::store::{Store, StoreError};

/// The actor of a session created without `--actor`: the orchestrator prompt over the
/// configured default model.
pub const DEFAULT_ACTOR: &str = "builtin/orchestrator";

/// Turns kept in the model's context unless `--max-history` says otherwise.
pub const DEFAULT_MAX_HISTORY: u32 = 50;

/// A stored session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Session {
    /// Stable id (ULID).
    pub session_id: Id,
    /// Optional unique name.
    pub name: Option<String>,
    /// The orchestrator actor `session tell` uses (`builtin/orchestrator`, a provider model
    /// or a registered actor).
    pub actor: String,
    /// The automation profile plans created by the orchestrator get, and which decides
    /// whether it may apply a plan.
    pub automation_profile: String,
    /// Turns the model sees in full; older turns are summarised.
    pub max_history: u32,
    /// The recorded summary of the turns that left the model's context.
    pub summary: Option<String>,
    /// How many of the oldest turns the summary covers.
    pub summarized_turns: u32,
    /// For an imported session: the id it had in the exported file.
    pub imported_from: Option<String>,
    /// When it was created.
    pub created_at: jiff::Timestamp,
    /// When it last changed.
    pub updated_at: jiff::Timestamp,
}

/// One command a turn executed, with its equivalent `agents` command line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ExecutedCommand {
    /// `agents action create --config FILE` (shell-quoted).
    pub command: String,
    /// Whether it succeeded (exit 0, or 3 for a plan stopped at its gate).
    pub ok: bool,
    /// The envelope status: `ok`, `needs_approval`, `error`, or `refused` when the session's
    /// rules refused it before it ran.
    pub status: String,
    /// A one-line result or error.
    pub summary: String,
}

/// `user` or `assistant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// What the user said.
    User,
    /// What the orchestrator answered.
    Assistant,
}

impl Role {
    /// `user` / `assistant`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// One stored message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionMessage {
    /// Position in the session, from 1.
    pub seq: u32,
    /// The turn it belongs to, from 1.
    pub turn: u32,
    /// Who spoke.
    pub role: Role,
    /// The text.
    pub content: String,
    /// For an answer: the actor that gave it.
    pub actor: Option<String>,
    /// For an answer: the commands it executed, in order.
    pub commands: Vec<ExecutedCommand>,
    /// For an answer: the turn's input tokens.
    pub input_tokens: u64,
    /// For an answer: the turn's output tokens.
    pub output_tokens: u64,
    /// For an answer: the turn's cost in US dollars (`None`: unknown, no prices configured).
    pub cost_usd: Option<f64>,
    /// For an answer: tool calls made.
    pub tool_calls: u32,
    /// When it was stored.
    pub created_at: jiff::Timestamp,
}

/// A plan a session created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkedPlan {
    /// The plan's id.
    pub plan_id: Id,
    /// The turn that created it.
    pub turn: u32,
    /// When it was linked.
    pub created_at: jiff::Timestamp,
}

/// Token and cost totals of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Totals {
    /// Input tokens over all turns.
    pub input_tokens: u64,
    /// Output tokens over all turns.
    pub output_tokens: u64,
    /// Cost in US dollars; `None` when no turn's cost is known.
    pub cost_usd: Option<f64>,
}

/// A session with its messages and plans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionDetail {
    /// The session.
    pub session: Session,
    /// Every message, oldest first.
    pub messages: Vec<SessionMessage>,
    /// Plans it created, oldest first.
    pub plans: Vec<LinkedPlan>,
}

impl SessionDetail {
    /// Token and cost totals.
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for m in &self.messages {
            t.input_tokens += m.input_tokens;
            t.output_tokens += m.output_tokens;
            if let Some(c) = m.cost_usd {
                t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
            }
        }
        t
    }

    /// Turns stored.
    pub fn turns(&self) -> u32 {
        self.messages.iter().map(|m| m.turn).max().unwrap_or(0)
    }
}

/// A row of `session list`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SessionSummary {
    /// The session.
    pub session: Session,
    /// Messages stored.
    pub messages: u32,
    /// Bytes of stored message text.
    pub bytes: u64,
}

/// Errors of the session store and commands.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No session has this id (or prefix or name).
    #[error(transparent)]
    Prefix(#[from] IdPrefixError),
    /// No session has this name, and none has an id starting with it.
    #[error("no session is named `{0}`, and no session id starts with it")]
    NotFound(String),
    /// Another session has this name.
    #[error("a session named `{0}` already exists")]
    NameTaken(String),
    /// An argument is not acceptable.
    #[error("{0}")]
    Invalid(String),
    /// An export file is unreadable, of another schema, or fails its checksum.
    #[error("{0}")]
    Import(String),
    /// The database failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<rusqlite::Error> for SessionError {
    fn from(e: rusqlite::Error) -> Self {
        SessionError::Store(e.into())
    }
}

const T: &str = "sessions";
const COLS: &str = "session_id, name, actor, automation_profile, max_history, summary, \
                    summarized_turns, imported_from, created_at, updated_at";

type Raw = (
    String,
    Option<String>,
    String,
    String,
    u32,
    Option<String>,
    u32,
    Option<String>,
    String,
    String,
);

fn convert(r: Raw) -> Result<Session, StoreError> {
    let bad = |m: String| StoreError::Corrupt {
        table: T,
        column: "session_id",
        message: m,
    };
    Ok(Session {
        session_id: r.0.parse().map_err(|e| bad(format!("{e}")))?,
        name: r.1,
        actor: r.2,
        automation_profile: r.3,
        max_history: r.4,
        summary: r.5,
        summarized_turns: r.6,
        imported_from: r.7,
        created_at: ts(T, "created_at", &r.8)?,
        updated_at: ts(T, "updated_at", &r.9)?,
    })
}

/// Validates a session name: 1 to 64 letters, digits, `-`, `_` or `.`.
///
/// # Errors
/// [`SessionError::Invalid`] naming `--name`.
pub fn check_name(name: &str) -> Result<(), SessionError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(SessionError::Invalid(format!(
            "--name `{name}`: use 1 to 64 letters, digits, `-`, `_` or `.`"
        )))
    }
}

/// Stores a new session.
///
/// # Errors
/// [`SessionError::NameTaken`]; store errors.
pub fn insert(store: &Store, s: &Session) -> Result<(), SessionError> {
    if let Some(name) = &s.name
        && find_by_name(store, name)?.is_some()
    {
        return Err(SessionError::NameTaken(name.clone()));
    }
    store.conn().execute(
        &format!("INSERT INTO sessions ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            s.session_id.to_string(),
            s.name,
            s.actor,
            s.automation_profile,
            s.max_history,
            s.summary,
            s.summarized_turns,
            s.imported_from,
            s.created_at.to_string(),
            s.updated_at.to_string()
        ],
    )?;
    Ok(())
}

fn find_by_name(store: &Store, name: &str) -> Result<Option<Session>, SessionError> {
    Ok(store
        .conn()
        .query_row(
            &format!("SELECT {COLS} FROM sessions WHERE name = ?1"),
            [name],
            |r| r.try_into(),
        )
        .optional()?
        .map(convert)
        .transpose()?)
}

/// Every session, most recently updated first.
///
/// # Errors
/// Store errors.
pub fn list(store: &Store) -> Result<Vec<SessionSummary>, SessionError> {
    let mut stmt = store.conn().prepare(&format!(
        "SELECT {COLS}, (SELECT COUNT(*) FROM session_messages m WHERE m.session_id = s.session_id), \
         (SELECT COALESCE(SUM(LENGTH(content) + LENGTH(commands)), 0) FROM session_messages m \
          WHERE m.session_id = s.session_id) \
         FROM sessions s ORDER BY updated_at DESC, session_id DESC"
    ))?;
    let rows = stmt.query_map([], |r| {
        let raw: Raw = (
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
            r.get(6)?,
            r.get(7)?,
            r.get(8)?,
            r.get(9)?,
        );
        Ok((raw, r.get::<_, u32>(10)?, r.get::<_, i64>(11)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (raw, messages, bytes) = row?;
        out.push(SessionSummary {
            session: convert(raw)?,
            messages,
            bytes: bytes.max(0) as u64,
        });
    }
    Ok(out)
}

/// Finds a session by full id, unique id prefix (4+ characters) or name.
///
/// # Errors
/// [`SessionError::Prefix`] (not found, ambiguous, too short); store errors.
pub fn find(store: &Store, input: &str) -> Result<Session, SessionError> {
    if let Some(s) = find_by_name(store, input)? {
        return Ok(s);
    }
    let ids: Vec<String> = store
        .conn()
        .prepare("SELECT session_id FROM sessions")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let id = match resolve_prefix("session", input, ids) {
        Ok(id) => id,
        // A name is what most people type: say that nothing answers to it, not how long an
        // id prefix must be.
        Err(IdPrefixError::TooShort(_) | IdPrefixError::NotFound { .. }) => {
            return Err(SessionError::NotFound(input.to_string()));
        }
        Err(e) => return Err(e.into()),
    };
    let raw: Raw = store.conn().query_row(
        &format!("SELECT {COLS} FROM sessions WHERE session_id = ?1"),
        [id],
        |r| r.try_into(),
    )?;
    Ok(convert(raw)?)
}

/// A session with its messages and plans.
///
/// # Errors
/// As [`find`].
pub fn detail(store: &Store, input: &str) -> Result<SessionDetail, SessionError> {
    let session = find(store, input)?;
    let id = session.session_id.to_string();
    let mut stmt = store.conn().prepare(
        "SELECT seq, turn, role, content, actor, commands, input_tokens, output_tokens, cost_usd, \
         tool_calls, created_at FROM session_messages WHERE session_id = ?1 ORDER BY seq",
    )?;
    type M = (
        u32,
        u32,
        String,
        String,
        Option<String>,
        String,
        i64,
        i64,
        Option<f64>,
        u32,
        String,
    );
    let raws: Vec<M> = stmt
        .query_map([&id], |r| r.try_into())?
        .collect::<Result<_, _>>()?;
    let mut messages = Vec::new();
    for m in raws {
        messages.push(SessionMessage {
            seq: m.0,
            turn: m.1,
            role: if m.2 == "user" {
                Role::User
            } else {
                Role::Assistant
            },
            content: m.3,
            actor: m.4,
            commands: from_json("session_messages", "commands", &m.5)?,
            input_tokens: m.6.max(0) as u64,
            output_tokens: m.7.max(0) as u64,
            cost_usd: m.8,
            tool_calls: m.9,
            created_at: ts("session_messages", "created_at", &m.10)?,
        });
    }
    let plans: Vec<(String, u32, String)> = store
        .conn()
        .prepare(
            "SELECT plan_id, turn, created_at FROM session_plans WHERE session_id = ?1 \
             ORDER BY created_at, plan_id",
        )?
        .query_map([&id], |r| r.try_into())?
        .collect::<Result<_, _>>()?;
    let plans = plans
        .into_iter()
        .map(|(p, turn, at)| {
            Ok(LinkedPlan {
                plan_id: p.parse().map_err(|e| StoreError::Corrupt {
                    table: "session_plans",
                    column: "plan_id",
                    message: format!("{e}"),
                })?,
                turn,
                created_at: ts("session_plans", "created_at", &at)?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(SessionDetail {
        session,
        messages,
        plans,
    })
}

/// Deletes a session with its messages and plan links (the plans themselves stay).
///
/// # Errors
/// Store errors.
pub fn delete(store: &mut Store, id: &Id) -> Result<(), SessionError> {
    let tx = store.conn_mut().transaction()?;
    tx.execute(
        "DELETE FROM session_messages WHERE session_id = ?1",
        [id.to_string()],
    )?;
    tx.execute(
        "DELETE FROM session_plans WHERE session_id = ?1",
        [id.to_string()],
    )?;
    tx.execute(
        "DELETE FROM sessions WHERE session_id = ?1",
        [id.to_string()],
    )?;
    tx.commit()?;
    Ok(())
}

/// Stores a whole session (an import): the session row, its messages and plan links, in one
/// transaction.
///
/// # Errors
/// [`SessionError::NameTaken`]; store errors.
pub fn insert_detail(store: &mut Store, d: &SessionDetail) -> Result<(), SessionError> {
    if let Some(name) = &d.session.name
        && find_by_name(store, name)?.is_some()
    {
        return Err(SessionError::NameTaken(name.clone()));
    }
    let tx = store.conn_mut().transaction()?;
    let s = &d.session;
    tx.execute(
        &format!("INSERT INTO sessions ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"),
        params![
            s.session_id.to_string(),
            s.name,
            s.actor,
            s.automation_profile,
            s.max_history,
            s.summary,
            s.summarized_turns,
            s.imported_from,
            s.created_at.to_string(),
            s.updated_at.to_string()
        ],
    )?;
    for m in &d.messages {
        insert_message(&tx, &s.session_id, m)?;
    }
    for p in &d.plans {
        tx.execute(
            "INSERT OR IGNORE INTO session_plans (session_id, plan_id, turn, created_at) \
             VALUES (?1, ?2, ?3, ?4)",
            params![
                s.session_id.to_string(),
                p.plan_id.to_string(),
                p.turn,
                p.created_at.to_string()
            ],
        )?;
    }
    tx.commit()?;
    Ok(())
}

fn insert_message(
    conn: &crate::store::Connection,
    id: &Id,
    m: &SessionMessage,
) -> Result<(), rusqlite::Error> {
    conn.execute(
        "INSERT INTO session_messages (session_id, seq, turn, role, content, actor, commands, \
         input_tokens, output_tokens, cost_usd, tool_calls, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
        params![
            id.to_string(),
            m.seq,
            m.turn,
            m.role.as_str(),
            m.content,
            m.actor,
            to_json(&m.commands),
            m.input_tokens as i64,
            m.output_tokens as i64,
            m.cost_usd,
            m.tool_calls,
            m.created_at.to_string()
        ],
    )?;
    Ok(())
}

/// One finished turn to record.
#[derive(Debug, Clone)]
pub struct TurnRecord {
    /// The user's prompt.
    pub prompt: String,
    /// The answer (the stop reason's description when the model gave no text).
    pub answer: String,
    /// The actor that answered.
    pub actor: String,
    /// Commands executed.
    pub commands: Vec<ExecutedCommand>,
    /// Plans created.
    pub plans: Vec<Id>,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Cost in US dollars, if known.
    pub cost_usd: Option<f64>,
    /// Tool calls made.
    pub tool_calls: u32,
}

/// Records a turn in one transaction: the two messages, the plan links, and (when the
/// session now holds more than `max_history` turns) the summary of the turns that leave the
/// model's context. Returns the turn number.
///
/// # Errors
/// Store errors.
pub fn record_turn(
    store: &mut Store,
    session: &Session,
    t: &TurnRecord,
) -> Result<u32, SessionError> {
    let d = detail(store, &session.session_id.to_string())?;
    let turn = d.turns() + 1;
    let seq = d.messages.len() as u32;
    let now = jiff::Timestamp::now();
    let user = SessionMessage {
        seq: seq + 1,
        turn,
        role: Role::User,
        content: t.prompt.clone(),
        actor: None,
        commands: Vec::new(),
        input_tokens: 0,
        output_tokens: 0,
        cost_usd: None,
        tool_calls: 0,
        created_at: now,
    };
    let answer = SessionMessage {
        seq: seq + 2,
        turn,
        role: Role::Assistant,
        content: t.answer.clone(),
        actor: Some(t.actor.clone()),
        commands: t.commands.clone(),
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        cost_usd: t.cost_usd,
        tool_calls: t.tool_calls,
        created_at: now,
    };
    let mut all = d.messages.clone();
    all.push(user.clone());
    all.push(answer.clone());
    let keep_from = turn.saturating_sub(session.max_history);
    let (summary, summarized) = if keep_from > d.session.summarized_turns {
        (Some(summarize(&all, keep_from)), keep_from)
    } else {
        (d.session.summary.clone(), d.session.summarized_turns)
    };
    let tx = store.conn_mut().transaction()?;
    insert_message(&tx, &session.session_id, &user)?;
    insert_message(&tx, &session.session_id, &answer)?;
    for p in &t.plans {
        tx.execute(
            "INSERT OR IGNORE INTO session_plans (session_id, plan_id, turn, created_at) \
             VALUES (?1, ?2, ?3, ?4)",
            params![
                session.session_id.to_string(),
                p.to_string(),
                turn,
                now.to_string()
            ],
        )?;
    }
    tx.execute(
        "UPDATE sessions SET summary = ?2, summarized_turns = ?3, updated_at = ?4 \
         WHERE session_id = ?1",
        params![
            session.session_id.to_string(),
            summary,
            summarized,
            now.to_string()
        ],
    )?;
    tx.commit()?;
    Ok(turn)
}

/// Changes the actor a session's next turns use.
///
/// # Errors
/// Store errors.
pub fn set_actor(store: &Store, id: &Id, actor: &str) -> Result<(), SessionError> {
    store.conn().execute(
        "UPDATE sessions SET actor = ?2 WHERE session_id = ?1",
        params![id.to_string(), actor],
    )?;
    Ok(())
}

fn clip(text: &str, max: usize) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}...", one_line.chars().take(max).collect::<String>())
    }
}

/// The recorded summary of turns `1..=upto`: one line per message (clipped to 200
/// characters) with the commands each answer ran. It is extractive, so that it costs no
/// model call and says only what was stored.
pub fn summarize(messages: &[SessionMessage], upto: u32) -> String {
    let mut lines = vec![format!("Turns 1 to {upto} (summarised):")];
    for m in messages.iter().filter(|m| m.turn <= upto) {
        let mut line = format!(
            "- turn {} {}: {}",
            m.turn,
            m.role.as_str(),
            clip(&m.content, 200)
        );
        if !m.commands.is_empty() {
            let cmds: Vec<&str> = m.commands.iter().map(|c| c.command.as_str()).collect();
            line.push_str(&format!(" [ran: {}]", cmds.join("; ")));
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// The messages the model sees in full: those of the turns after the summarised ones.
pub fn recent(d: &SessionDetail) -> impl Iterator<Item = &SessionMessage> {
    let from = d.session.summarized_turns;
    d.messages.iter().filter(move |m| m.turn > from)
}
