//! The `server_tokens` table: the bearer tokens `agents server` accepts, by the SHA-256 of
//! their secret (spec section 21).

use jiff::Timestamp;
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::codec::{opt_ts, ts};
use super::{Store, StoreError};

const T: &str = "server_tokens";
const COLUMNS: &str = "token_id, name, created_at, last_used_at, revoked_at, user_name, expires_at";

/// One token as listed: never its secret, which is not stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TokenRecord {
    /// `tok_` and a ULID.
    pub token_id: String,
    /// The name it was created with (who or what uses it).
    pub name: String,
    /// When it was created.
    pub created_at: Timestamp,
    /// When a request last carried it.
    pub last_used_at: Option<Timestamp>,
    /// When it was revoked; a revoked token is refused.
    pub revoked_at: Option<Timestamp>,
    /// The user it signs in as; `None` for a token of a release before users, which signs
    /// in as a server administrator named by the token's name.
    #[serde(default)]
    pub user: Option<String>,
    /// When it stops working; `None`: when it is revoked.
    #[serde(default)]
    pub expires_at: Option<Timestamp>,
}

/// A token found by its secret, whatever its state.
#[derive(Debug, Clone, PartialEq)]
pub enum Found {
    /// No token has this secret.
    Unknown,
    /// The token was revoked.
    Revoked(TokenRecord),
    /// The token expired.
    Expired(TokenRecord),
    /// The token works; it is marked as used now.
    Active(TokenRecord),
}

type Row = (
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<String>,
);

fn row(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Row> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
    ))
}

fn record(
    (token_id, name, created, used, revoked, user, expires): Row,
) -> Result<TokenRecord, StoreError> {
    Ok(TokenRecord {
        token_id,
        name,
        created_at: ts(T, "created_at", &created)?,
        last_used_at: opt_ts(T, "last_used_at", used)?,
        revoked_at: opt_ts(T, "revoked_at", revoked)?,
        user,
        expires_at: opt_ts(T, "expires_at", expires)?,
    })
}

impl Store {
    /// Records a new token whose secret hashes to `secret_hash`.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`]; a constraint error when an active token has this name.
    pub fn insert_server_token(
        &mut self,
        token: &TokenRecord,
        secret_hash: &str,
    ) -> Result<(), StoreError> {
        self.conn().execute(
            "INSERT INTO server_tokens \
             (token_id, name, secret_hash, created_at, user_name, expires_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                token.token_id,
                token.name,
                secret_hash,
                token.created_at.to_string(),
                token.user,
                token.expires_at.map(|t| t.to_string())
            ],
        )?;
        Ok(())
    }

    /// Every token, revoked ones too, oldest first.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn server_tokens(&self) -> Result<Vec<TokenRecord>, StoreError> {
        let mut stmt = self.conn().prepare(&format!(
            "SELECT {COLUMNS} FROM {T} ORDER BY created_at, token_id"
        ))?;
        let rows = stmt.query_map([], row)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(record).collect()
    }

    /// The token whose secret hashes to `secret_hash` and its state at `now`; an active one
    /// is marked as used now.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn use_server_token(&self, secret_hash: &str, now: Timestamp) -> Result<Found, StoreError> {
        let found = self
            .conn()
            .query_row(
                &format!("SELECT {COLUMNS} FROM {T} WHERE secret_hash = ?1"),
                params![secret_hash],
                row,
            )
            .optional()?;
        let Some(found) = found else {
            return Ok(Found::Unknown);
        };
        let token = record(found)?;
        if token.revoked_at.is_some() {
            return Ok(Found::Revoked(token));
        }
        if token.expires_at.is_some_and(|at| at <= now) {
            return Ok(Found::Expired(token));
        }
        self.conn().execute(
            "UPDATE server_tokens SET last_used_at = ?1 WHERE token_id = ?2",
            params![now.to_string(), token.token_id],
        )?;
        Ok(Found::Active(token))
    }

    /// Revokes the active token `token_id`; `false` when there is none.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn revoke_server_token(&self, token_id: &str) -> Result<bool, StoreError> {
        let changed = self.conn().execute(
            "UPDATE server_tokens SET revoked_at = ?1 WHERE token_id = ?2 AND revoked_at IS NULL",
            params![Timestamp::now().to_string(), token_id],
        )?;
        Ok(changed == 1)
    }
}
