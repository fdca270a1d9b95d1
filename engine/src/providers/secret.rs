//! [`ApiKey`]: a provider API key that cannot be printed, logged or serialized by accident.
//!
//! Spec section 16 ("keys come from the environment or config and never appear in logs or
//! output"). The key is read from the environment variable a provider names
//! (`api_key_env`), kept only in memory, and revealed in exactly one place: the HTTP header
//! built by the provider client, which is marked sensitive. `Debug` and `Display` print
//! `[redacted]`; there is no `Serialize`. [`ApiKey::scrub`] removes the key from text that
//! came back from a provider (some echo a part of a rejected key) before that text can reach
//! an error, an event, a log line or the database.

use std::fmt;

/// What a redacted key looks like wherever it would have been shown.
pub const REDACTED: &str = "[redacted]";

/// A provider API key. Never printed: `Debug` / `Display` show `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key. Surrounding whitespace (a trailing newline from `export K=$(cat file)`)
    /// is removed; returns `None` for an empty key.
    pub fn new(key: impl Into<String>) -> Option<Self> {
        let key = key.into();
        let trimmed = key.trim();
        (!trimmed.is_empty()).then(|| Self(trimmed.to_string()))
    }

    /// The key itself, for building the authentication header and nothing else.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key, and of any 8-character piece of it, replaced
    /// by `[redacted]`: providers sometimes echo a masked key such as `sk-abc1****wxyz` back.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.replace(&self.0, REDACTED);
        let chars: Vec<char> = self.0.chars().collect();
        const PIECE: usize = 8;
        if chars.len() > PIECE {
            for start in 0..=chars.len() - PIECE {
                let piece: String = chars[start..start + PIECE].iter().collect();
                if out.contains(&piece) {
                    out = out.replace(&piece, REDACTED);
                }
            }
        }
        out
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-test-0123456789abcdefSECRET";

    #[test]
    fn debug_and_display_never_show_the_key() {
        let key = ApiKey::new(KEY).unwrap();
        let shown = format!("{key} {key:?} {:?}", Some(key.clone()));
        assert!(!shown.contains("0123456789"), "{shown}");
        assert!(shown.contains(REDACTED));
        #[derive(Debug)]
        #[allow(dead_code)]
        struct Holder {
            key: ApiKey,
        }
        let nested = format!("{:#?}", Holder { key });
        assert!(!nested.contains("SECRET"), "{nested}");
    }

    #[test]
    fn scrub_removes_the_key_and_echoed_pieces_of_it() {
        let key = ApiKey::new(format!("  {KEY}\n")).unwrap();
        assert_eq!(key.expose(), KEY);
        let echoed = format!("Incorrect API key provided: {KEY}. Also sk-test-0123****");
        let clean = key.scrub(&echoed);
        assert!(!clean.contains(KEY), "{clean}");
        assert!(!clean.contains("sk-test-0123"), "{clean}");
        assert!(clean.starts_with("Incorrect API key provided: "));
        assert_eq!(key.scrub("nothing to hide"), "nothing to hide");
    }

    #[test]
    fn an_empty_key_is_no_key() {
        assert!(ApiKey::new("  \n").is_none());
    }
}
