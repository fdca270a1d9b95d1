//! Paused actor runs ("at a pause the actor's transcript is persisted
//! so that any process can resume after the answer"): the `actor_pauses` table of migration
//! 009, one row per `request_decision` of a model execution actor.

use rusqlite::{OptionalExtension, params};
use crate::store::Transaction;

use super::{Store, StoreError};
use crate::domain::id::Id;
use crate::domain::messages::Message;

/// A paused execution actor run, waiting for (or resumed after) the user's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorPause {
    /// The `decision` approval that asks the user.
    pub approval_id: String,
    /// The plan.
    pub plan_id: Id,
    /// The step (executable decision) whose run paused.
    pub decision_id: Id,
    /// The provider's id of the `request_decision` call whose result is the answer.
    pub call_id: String,
    /// The conversation up to and including that call's (placeholder) result.
    pub transcript: Vec<Message>,
    /// When a run continued from it.
    pub resumed_at: Option<jiff::Timestamp>,
}

/// Inserts a pause inside a transaction (with its approval and the step's state).
///
/// # Errors
/// [`StoreError::Sqlite`]; [`StoreError::Corrupt`] when the transcript cannot be encoded.
pub(crate) fn insert_in(tx: &Transaction<'_>, pause: &ActorPause) -> Result<(), StoreError> {
    let transcript = serde_json::to_string(&pause.transcript).map_err(|e| corrupt(&e))?;
    tx.execute(
        "INSERT INTO actor_pauses (approval_id, plan_id, decision_id, call_id, transcript, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        params![
            pause.approval_id,
            pause.plan_id.to_string(),
            pause.decision_id.to_string(),
            pause.call_id,
            transcript,
            jiff::Timestamp::now().to_string()
        ],
    )?;
    Ok(())
}

fn corrupt(e: &serde_json::Error) -> StoreError {
    StoreError::Corrupt {
        table: "actor_pauses",
        column: "transcript",
        message: e.to_string(),
    }
}

impl Store {
    /// The newest pause of step `decision_id` that no run has continued from yet.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] or [`StoreError::Corrupt`].
    pub fn open_pause(
        &self,
        plan_id: &Id,
        decision_id: &Id,
    ) -> Result<Option<ActorPause>, StoreError> {
        let row: Option<(String, String, String)> = self
            .conn()
            .query_row(
                "SELECT approval_id, call_id, transcript FROM actor_pauses \
                 WHERE plan_id = ?1 AND decision_id = ?2 AND resumed_at IS NULL \
                 ORDER BY created_at DESC, rowid DESC LIMIT 1",
                params![plan_id.to_string(), decision_id.to_string()],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
            .optional()?;
        row.map(|(approval_id, call_id, transcript)| {
            Ok(ActorPause {
                approval_id,
                plan_id: *plan_id,
                decision_id: *decision_id,
                call_id,
                transcript: serde_json::from_str(&transcript).map_err(|e| corrupt(&e))?,
                resumed_at: None,
            })
        })
        .transpose()
    }

    /// Marks a pause as continued from (a run resumed with its answer).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn mark_pause_resumed(&mut self, approval_id: &str) -> Result<(), StoreError> {
        self.conn().execute(
            "UPDATE actor_pauses SET resumed_at = ?2 WHERE approval_id = ?1",
            params![approval_id, jiff::Timestamp::now().to_string()],
        )?;
        Ok(())
    }
}
