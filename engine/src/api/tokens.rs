//! Bearer tokens of `agents server` (spec section 21): created on the server host, shown
//! once, stored as a SHA-256 of the secret, revoked by id or name. A request's token is
//! looked up by that hash, so the secret itself is never compared or kept.

use jiff::Timestamp;
use sha2::{Digest, Sha256};

use super::{ApiError, Engine};
use crate::store::server_tokens::Found;
pub use crate::store::server_tokens::TokenRecord;
use crate::team::{Credential, Principal};

/// What every secret starts with, so that a leaked one is recognisable.
pub const SECRET_PREFIX: &str = "agt_";

/// Random bytes in a secret.
const SECRET_BYTES: usize = 32;

/// Longest lifetime `--expires` takes: ten years.
const MAX_LIFETIME_SECS: u64 = 10 * 366 * 24 * 3600;

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
    /// The lifetime is not a number with a unit.
    #[error(
        "`{0}` is not a token lifetime: give a whole number and a unit, s, m, h, d or w (`30d`, `12h`), up to ten years"
    )]
    BadLifetime(String),
}

/// A token just created: its record and the secret, which is not stored and cannot be shown
/// again.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct CreatedToken {
    /// The stored record.
    pub record: TokenRecord,
    /// The secret to send as `Authorization: Bearer SECRET`.
    pub token: String,
    /// Whether this token's user was created with it, as the server's first administrator.
    #[serde(default)]
    pub user_created: bool,
}

/// What a token to create is for.
#[derive(
    Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct NewToken {
    /// The user it signs in as.
    pub user: String,
    /// Its name (default: the user's name).
    pub name: Option<String>,
    /// Seconds it works for from now (default: until it is revoked).
    pub expires_in_secs: Option<u64>,
}

/// Why a bearer token was refused. The wording says which without telling a caller anything
/// else (whether a name or user exists).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The token's lifetime ran out.
    #[error("the token has expired")]
    Expired,
    /// No active token has this secret: it was revoked, mistyped or never existed.
    #[error("the token is not valid (revoked, unknown or mistyped)")]
    RevokedOrUnknown,
}

/// Parses a token lifetime: a whole number and a unit, `s`, `m`, `h`, `d` or `w` (`30d`);
/// the number of seconds.
///
/// # Errors
/// [`TokenError::BadLifetime`].
pub fn parse_lifetime(text: &str) -> Result<u64, TokenError> {
    let bad = || TokenError::BadLifetime(text.to_string());
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = t.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let unit_secs = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 7 * 86_400,
        _ => return Err(bad()),
    };
    let secs = n.checked_mul(unit_secs).ok_or_else(bad)?;
    if secs == 0 || secs > MAX_LIFETIME_SECS {
        return Err(bad());
    }
    Ok(secs)
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

fn check_token_name(name: &str) -> Result<(), TokenError> {
    if name.is_empty() || name.len() > 100 || name.chars().any(char::is_control) {
        return Err(TokenError::BadName(name.to_string()));
    }
    Ok(())
}

impl Engine {
    /// Creates a token for `new.user` and returns its secret (once). On a server without
    /// users, the first token makes its user, a server administrator; otherwise the user must
    /// exist.
    ///
    /// # Errors
    /// [`TokenError::BadName`], [`TokenError::NameTaken`], [`TokenError::BadLifetime`],
    /// [`TeamError::UnknownUser`](super::team::TeamError::UnknownUser), the user name's
    /// errors when it is created, store errors.
    pub fn create_token(&self, new: &NewToken) -> Result<CreatedToken, ApiError> {
        let user = new.user.trim();
        let name = new.name.as_deref().unwrap_or(user).trim();
        check_token_name(name)?;
        let now = Timestamp::now();
        let expires_at = match new.expires_in_secs {
            None => None,
            Some(secs) if secs == 0 || secs > MAX_LIFETIME_SECS => {
                return Err(TokenError::BadLifetime(format!("{secs}s")).into());
            }
            Some(secs) => Some(
                now.checked_add(jiff::SignedDuration::from_secs(
                    i64::try_from(secs).unwrap_or(i64::MAX),
                ))
                .map_err(|_| TokenError::BadLifetime(format!("{secs}s")))?,
            ),
        };
        let mut user_created = false;
        {
            let store = self.store()?;
            if store
                .server_tokens()?
                .iter()
                .any(|t| t.name == name && t.revoked_at.is_none())
            {
                return Err(TokenError::NameTaken(name.to_string()).into());
            }
            if store.user(user)?.is_none() {
                if !store.users()?.is_empty() {
                    return Err(super::team::TeamError::UnknownUser(user.to_string()).into());
                }
                drop(store);
                // The first token of a server without users makes its first administrator.
                self.add_user(user, true)?;
                user_created = true;
            }
        }
        let token = new_secret()?;
        let record = TokenRecord {
            token_id: format!(
                "tok_{}",
                crate::domain::Id::generate().to_string().to_lowercase()
            ),
            name: name.to_string(),
            created_at: now,
            last_used_at: None,
            revoked_at: None,
            user: Some(user.to_string()),
            expires_at,
        };
        self.store()?.insert_server_token(&record, &hash(&token))?;
        Ok(CreatedToken {
            record,
            token,
            user_created,
        })
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

    /// The principal of a request carrying `secret` from `address`, or why it is refused.
    /// A token stored before users existed (no user) signs in as a server administrator
    /// named by the token's name.
    ///
    /// # Errors
    /// Store errors.
    pub fn authenticate(
        &self,
        secret: &str,
        address: Option<String>,
    ) -> Result<Result<Principal, Refusal>, ApiError> {
        self.authenticate_at(secret, address, Timestamp::now())
    }

    /// [`Engine::authenticate`] at the time `now`.
    ///
    /// # Errors
    /// Store errors.
    pub fn authenticate_at(
        &self,
        secret: &str,
        address: Option<String>,
        now: Timestamp,
    ) -> Result<Result<Principal, Refusal>, ApiError> {
        if !secret.starts_with(SECRET_PREFIX) {
            return Ok(Err(Refusal::RevokedOrUnknown));
        }
        let store = self.store()?;
        let token = match store.use_server_token(&hash(secret), now)? {
            Found::Unknown | Found::Revoked(_) => return Ok(Err(Refusal::RevokedOrUnknown)),
            Found::Expired(_) => return Ok(Err(Refusal::Expired)),
            Found::Active(token) => token,
        };
        let credential = Credential::Token {
            token_id: token.token_id.clone(),
        };
        let Some(user) = token.user else {
            return Ok(Ok(Principal {
                user: token.name,
                server_admin: true,
                credential,
                address,
            }));
        };
        Ok(match store.user(&user)? {
            Some(found) => Ok(Principal {
                user: found.name,
                server_admin: found.server_admin,
                credential,
                address,
            }),
            // The user is gone: the token is no one's.
            None => Err(Refusal::RevokedOrUnknown),
        })
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

    fn token_for(user: &str, name: Option<&str>) -> NewToken {
        NewToken {
            user: user.to_string(),
            name: name.map(str::to_string),
            expires_in_secs: None,
        }
    }

    #[test]
    fn a_created_token_authenticates_as_its_user_until_it_is_revoked() {
        let (_dir, engine) = engine();
        let created = engine.create_token(&token_for("ci", None)).unwrap();
        assert!(created.token.starts_with(SECRET_PREFIX));
        let who = engine
            .authenticate(&created.token, Some("127.0.0.1:9".into()))
            .unwrap()
            .unwrap();
        assert_eq!(who.user, "ci");
        assert_eq!(who.address.as_deref(), Some("127.0.0.1:9"));
        assert_eq!(
            who.credential,
            Credential::Token {
                token_id: created.record.token_id.clone()
            }
        );
        assert_eq!(
            engine.authenticate("agt_wrong", None).unwrap(),
            Err(Refusal::RevokedOrUnknown)
        );
        engine.revoke_token("ci").unwrap();
        assert_eq!(
            engine.authenticate(&created.token, None).unwrap(),
            Err(Refusal::RevokedOrUnknown)
        );
    }

    #[test]
    fn the_first_token_of_a_server_without_users_makes_an_administrator_and_later_ones_need_a_user()
    {
        let (_dir, engine) = engine();
        let first = engine
            .create_token(&token_for("ann", Some("laptop")))
            .unwrap();
        assert!(first.user_created);
        let who = engine.authenticate(&first.token, None).unwrap().unwrap();
        assert_eq!((who.user.as_str(), who.server_admin), ("ann", true));

        let err = engine.create_token(&token_for("bob", None)).unwrap_err();
        assert!(
            matches!(
                err,
                ApiError::Team(super::super::team::TeamError::UnknownUser(_))
            ),
            "{err:?}"
        );
        engine.add_user("bob", false).unwrap();
        let second = engine.create_token(&token_for("bob", None)).unwrap();
        assert!(!second.user_created);
        let who = engine.authenticate(&second.token, None).unwrap().unwrap();
        assert_eq!((who.user.as_str(), who.server_admin), ("bob", false));
    }

    #[test]
    fn a_token_stops_working_when_its_lifetime_ends() {
        let (_dir, engine) = engine();
        let mut new = token_for("ci", None);
        new.expires_in_secs = Some(parse_lifetime("30d").unwrap());
        let created = engine.create_token(&new).unwrap();
        let expires = created.record.expires_at.unwrap();
        let day = jiff::SignedDuration::from_hours(24);
        let within = expires.checked_sub(day).unwrap();
        assert!(
            engine
                .authenticate_at(&created.token, None, within)
                .unwrap()
                .is_ok()
        );
        let after = expires
            .checked_add(jiff::SignedDuration::from_secs(1))
            .unwrap();
        assert_eq!(
            engine.authenticate_at(&created.token, None, after).unwrap(),
            Err(Refusal::Expired)
        );
        // At the very instant it ends, it no longer works.
        assert_eq!(
            engine
                .authenticate_at(&created.token, None, expires)
                .unwrap(),
            Err(Refusal::Expired)
        );
        assert_eq!(engine.tokens().unwrap()[0].expires_at, Some(expires));
    }

    #[test]
    fn a_token_of_an_older_release_signs_in_as_an_administrator_named_by_the_token() {
        let (dir, engine) = engine();
        let created = engine.create_token(&token_for("ci", Some("old"))).unwrap();
        let db = rusqlite::Connection::open(dir.path().join("cleveragents.db")).unwrap();
        db.execute("UPDATE server_tokens SET user_name = NULL", [])
            .unwrap();
        db.execute("DELETE FROM users", []).unwrap();
        let who = engine.authenticate(&created.token, None).unwrap().unwrap();
        assert_eq!((who.user.as_str(), who.server_admin), ("old", true));
    }

    #[test]
    fn lifetimes_are_a_number_and_a_unit() {
        assert_eq!(parse_lifetime("30d").unwrap(), 30 * 86_400);
        assert_eq!(parse_lifetime("2w").unwrap(), 14 * 86_400);
        assert_eq!(parse_lifetime("90s").unwrap(), 90);
        for bad in ["", "30", "d", "0d", "-1d", "1y", "30 d", "99999999999w"] {
            assert!(parse_lifetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_secret_is_not_stored() {
        let (dir, engine) = engine();
        let created = engine.create_token(&token_for("laptop", None)).unwrap();
        let db = std::fs::read(dir.path().join("cleveragents.db")).unwrap();
        let needle = created.token.as_bytes();
        assert!(!db.windows(needle.len()).any(|w| w == needle));
    }

    #[test]
    fn two_active_tokens_cannot_share_a_name() {
        let (_dir, engine) = engine();
        engine.create_token(&token_for("ci", None)).unwrap();
        let err = engine.create_token(&token_for("ci", None)).unwrap_err();
        assert!(
            matches!(err, ApiError::Token(TokenError::NameTaken(_))),
            "{err:?}"
        );
        engine.revoke_token("ci").unwrap();
        engine.create_token(&token_for("ci", None)).unwrap();
    }
}
