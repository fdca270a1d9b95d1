//! Bearer tokens of `agents server` (spec section 21): created on the server host, shown
//! once, stored as a SHA-256 of the secret, revoked by id or name. A request's token is
//! looked up by that hash, so the secret itself is never compared or kept.

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::{ApiError, Engine};
pub use crate::store::server_tokens::TokenRecord;

/// What every secret starts with, so that a leaked one is recognisable.
pub const SECRET_PREFIX: &str = "agt_";

/// Random bytes in a secret.
const SECRET_BYTES: usize = 32;

/// Why a token could not be created or revoked.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The name is empty or has control characters.
    #[error("token name `{0}` is not usable: give a short name of printable characters")]
    BadName(String),
    /// An active token already has the name.
    #[error("an active token is already named `{0}`")]
    NameTaken(String),
    /// No active token has this id or name.
    #[error("no active token with id or name `{0}`")]
    NotFound(String),
    /// The system's random source failed.
    #[error("cannot draw a random secret: {0}")]
    Random(String),
}

/// A token just created: its record and the secret, which is not stored and cannot be shown
/// again.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CreatedToken {
    /// The stored record.
    pub record: TokenRecord,
    /// The secret to send as `Authorization: Bearer SECRET`.
    pub token: String,
}

/// Who a request comes from: the token it carried.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Principal {
    /// The token's id.
    pub token_id: String,
    /// The token's name.
    pub name: String,
}

/// The SHA-256 of a secret, as stored (lower-case hex).
fn hash(secret: &str) -> String {
    Sha256::digest(secret.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn new_secret() -> Result<String, TokenError> {
    let mut bytes = [0u8; SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("{SECRET_PREFIX}{hex}"))
}

impl Engine {
    /// Creates a token named `name` and returns its secret (once).
    ///
    /// # Errors
    /// [`TokenError::BadName`], [`TokenError::NameTaken`], store errors.
    pub fn create_token(&self, name: &str) -> Result<CreatedToken, ApiError> {
        let name = name.trim();
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
            return Err(TokenError::BadName(name.to_string()).into());
        }
        let mut store = self.store()?;
        if store
            .server_tokens()?
            .iter()
            .any(|t| t.name == name && t.revoked_at.is_none())
        {
            return Err(TokenError::NameTaken(name.to_string()).into());
        }
        let token = new_secret()?;
        let record = TokenRecord {
            token_id: format!(
                "tok_{}",
                crate::domain::Id::generate().to_string().to_lowercase()
            ),
            name: name.to_string(),
            created_at: Timestamp::now(),
            last_used_at: None,
            revoked_at: None,
        };
        store.insert_server_token(&record, &hash(&token))?;
        Ok(CreatedToken { record, token })
    }

    /// Every token, revoked ones too, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn tokens(&self) -> Result<Vec<TokenRecord>, ApiError> {
        Ok(self.store()?.server_tokens()?)
    }

    /// Revokes the active token with id (or unique id prefix) or name `which`; it is refused
    /// from its next request on.
    ///
    /// # Errors
    /// [`TokenError::NotFound`], store errors.
    pub fn revoke_token(&self, which: &str) -> Result<TokenRecord, ApiError> {
        let store = self.store()?;
        let active: Vec<TokenRecord> = store
            .server_tokens()?
            .into_iter()
            .filter(|t| t.revoked_at.is_none())
            .collect();
        let by_id: Vec<&TokenRecord> = active
            .iter()
            .filter(|t| t.token_id == which || (which.len() >= 8 && t.token_id.starts_with(which)))
            .collect();
        let found = match by_id.as_slice() {
            [one] => Some(*one),
            _ => active.iter().find(|t| t.name == which),
        }
        .ok_or_else(|| TokenError::NotFound(which.to_string()))?;
        store.revoke_server_token(&found.token_id)?;
        let mut revoked = found.clone();
        revoked.revoked_at = Some(Timestamp::now());
        Ok(revoked)
    }

    /// The principal of a request carrying `secret`, or `None` when no active token has it.
    ///
    /// # Errors
    /// Store errors.
    pub fn authenticate(&self, secret: &str) -> Result<Option<Principal>, ApiError> {
        if !secret.starts_with(SECRET_PREFIX) {
            return Ok(None);
        }
        let found: Option<TokenRecord> = self.store()?.use_server_token(&hash(secret))?;
        Ok(found.map(|t| Principal {
            token_id: t.token_id,
            name: t.name,
        }))
    }
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
    fn a_created_token_authenticates_until_it_is_revoked() {
        let (_dir, engine) = engine();
        let created = engine.create_token("ci").unwrap();
        assert!(created.token.starts_with(SECRET_PREFIX));
        let who = engine.authenticate(&created.token).unwrap().unwrap();
        assert_eq!(who.name, "ci");
        assert_eq!(engine.authenticate("agt_wrong").unwrap(), None);
        engine.revoke_token("ci").unwrap();
        assert_eq!(engine.authenticate(&created.token).unwrap(), None);
    }

    #[test]
    fn the_secret_is_not_stored() {
        let (dir, engine) = engine();
        let created = engine.create_token("laptop").unwrap();
        let db = std::fs::read(dir.path().join("cleveragents.db")).unwrap();
        let needle = created.token.as_bytes();
        assert!(!db.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn two_active_tokens_cannot_share_a_name() {
        let (_dir, engine) = engine();
        engine.create_token("ci").unwrap();
        let err = engine.create_token("ci").unwrap_err();
        assert!(
            matches!(err, ApiError::Token(TokenError::NameTaken(_))),
            "{err:?}"
        );
        engine.revoke_token("ci").unwrap();
        engine.create_token("ci").unwrap();
    }
}
