//! ULID identifiers and id-prefix resolution.
//!
//! Plans, decisions, actions and projects are identified by 26-character ULIDs. Commands also
//! accept a unique prefix of at least [`MIN_PREFIX`] characters; an ambiguous prefix is an error
//! that lists the matches.

use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use ulid::Ulid;

/// Shortest id prefix accepted in place of a full id.
pub const MIN_PREFIX: usize = 4;
/// Length of the short id shown in tables.
pub const SHORT_LEN: usize = 8;
/// Length of an id's text.
pub const TEXT_LEN: usize = ulid::ULID_LEN;

/// A ULID identifier, shown as 26 Crockford base32 characters.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Id(#[schemars(with = "String")] Ulid);

impl Id {
    /// A new id for the current time (monotonic within the process).
    pub fn generate() -> Self {
        Self(Ulid::generate())
    }

    /// The first [`SHORT_LEN`] characters, as shown in tables.
    pub fn short(&self) -> String {
        self.to_string()[..SHORT_LEN].to_string()
    }

    /// Milliseconds since the Unix epoch encoded in the id.
    pub fn timestamp_ms(&self) -> u64 {
        self.0.timestamp_ms()
    }

    /// The id's text written into `buf`, without allocating (the same text as `to_string`).
    pub fn encode<'b>(&self, buf: &'b mut [u8; TEXT_LEN]) -> &'b str {
        self.0.array_to_str(buf)
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written as is, width and fill ignored, as `Ulid`'s own `Display` writes it.
        f.write_str(self.encode(&mut [0; TEXT_LEN]))
    }
}

impl FromStr for Id {
    type Err = ulid::DecodeError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        // Crockford base32 decodes either case.
        Ulid::from_string(s).map(Self)
    }
}

/// Maps keyed by [`Id`], hashed by [`IdHasher`].
pub type IdHashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<IdHasher>>;
/// Sets of [`Id`], hashed by [`IdHasher`].
pub type IdHashSet<K> = std::collections::HashSet<K, BuildHasherDefault<IdHasher>>;

/// Hashes an [`Id`] by folding its 128 bits and multiplying: the low 80 bits of a ULID are
/// random, so this spreads ids as well as the default SipHash does, at a fraction of its cost
/// (a tree of 100,000 decisions hashes each id a few times).
#[derive(Default)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    fn write_u128(&mut self, n: u128) {
        self.0 = (self.0 ^ (n as u64) ^ ((n >> 64) as u64)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Why an id or prefix did not resolve to exactly one candidate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdPrefixError {
    /// The prefix is shorter than [`MIN_PREFIX`].
    #[error("id prefix `{0}` is too short: give at least 4 characters")]
    TooShort(String),
    /// No candidate starts with the prefix.
    #[error("no {kind} has an id starting with `{prefix}`")]
    NotFound {
        /// The kind of entity (`plan`, `decision`, ...).
        kind: &'static str,
        /// The prefix as given.
        prefix: String,
    },
    /// Several candidates start with the prefix.
    #[error("id prefix `{prefix}` matches {} {kind}s: {}", matches.len(), matches.join(", "))]
    Ambiguous {
        /// The kind of entity.
        kind: &'static str,
        /// The prefix as given.
        prefix: String,
        /// The full ids that match, sorted.
        matches: Vec<String>,
    },
}

/// Resolves `input` (a full id or a unique prefix of at least [`MIN_PREFIX`] characters,
/// case-insensitive) against `candidates` (full ids).
///
/// # Errors
/// [`IdPrefixError`] when the prefix is too short, matches nothing or matches several ids.
pub fn resolve_prefix<I, S>(
    kind: &'static str,
    input: &str,
    candidates: I,
) -> Result<String, IdPrefixError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let wanted = input.to_ascii_uppercase();
    if wanted.len() < MIN_PREFIX {
        return Err(IdPrefixError::TooShort(input.to_string()));
    }
    let mut matches: Vec<String> = candidates
        .into_iter()
        .filter(|c| c.as_ref().to_ascii_uppercase().starts_with(&wanted))
        .map(|c| c.as_ref().to_string())
        .collect();
    matches.sort();
    matches.dedup();
    if let Some(exact) = matches.iter().find(|m| m.eq_ignore_ascii_case(input)) {
        return Ok(exact.clone());
    }
    match matches.len() {
        0 => Err(IdPrefixError::NotFound {
            kind,
            prefix: input.to_string(),
        }),
        1 => Ok(matches.remove(0)),
        _ => Err(IdPrefixError::Ambiguous {
            kind,
            prefix: input.to_string(),
            matches,
        }),
    }
}

/// The shortest prefix of each of `ids` (at least [`SHORT_LEN`] characters, at most the whole
/// id) that no other id in `ids` shares, in input order: what a list shows so that every row
/// can be named by what is printed. Duplicated ids get their whole text.
pub fn unique_prefixes<S: AsRef<str>>(ids: &[S]) -> Vec<String> {
    // The longest prefix an id shares with any other id is the longer of the prefixes it
    // shares with its neighbours in case-folded sorted order: O(n log n) rather than comparing
    // every pair (10,000 plans took seconds).
    let folded: Vec<String> = ids
        .iter()
        .map(|i| i.as_ref().to_ascii_lowercase())
        .collect();
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| folded[a].cmp(&folded[b]));
    let sorted: Vec<&str> = order.iter().map(|&i| ids[i].as_ref()).collect();
    let mut out = vec![String::new(); ids.len()];
    for (at, &i) in order.iter().enumerate() {
        out[i] = unique_prefix_in_sorted(&sorted, at);
    }
    out
}

/// The shortest prefix of `sorted[at]` (at least [`SHORT_LEN`] characters, at most the whole
/// id) that no other id of `sorted` shares; `sorted` is in case-folded order, so only the
/// neighbours of `at` can share more of it than any other id.
pub fn unique_prefix_in_sorted<S: AsRef<str>>(sorted: &[S], at: usize) -> String {
    let id = sorted[at].as_ref();
    let before = at
        .checked_sub(1)
        .map_or(0, |i| shared_prefix_len(sorted[i].as_ref(), id));
    let after = sorted
        .get(at + 1)
        .map_or(0, |next| shared_prefix_len(id, next.as_ref()));
    unique_prefix(id, before.max(after))
}

/// How many leading characters `a` and `b` share, ASCII case folded.
pub fn shared_prefix_len(a: &str, b: &str) -> usize {
    a.chars()
        .zip(b.chars())
        .take_while(|(x, y)| x.eq_ignore_ascii_case(y))
        .count()
}

/// The prefix of `id` one character longer than `shared` (what it shares with the ids nearest
/// to it), at least [`SHORT_LEN`] characters and at most the whole id.
pub fn unique_prefix(id: &str, shared: usize) -> String {
    let len = (shared + 1).max(SHORT_LEN);
    match id.char_indices().nth(len) {
        Some((end, _)) => id[..end].to_owned(),
        None => id.to_owned(),
    }
}

/// The length in characters of [`unique_prefix`] of `id`.
pub fn unique_prefix_len(id: &str, shared: usize) -> usize {
    (shared + 1).max(SHORT_LEN).min(id.chars().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_created_in_the_same_second_get_longer_unique_prefixes_in_lists() {
        let a = "01M8MK9C00AAAAAAAAAAAAAAAA";
        let b = "01M8MK9C00BBBBBBBBBBBBBBBB";
        let c = "01M8MKZZ00CCCCCCCCCCCCCCCC";
        let shown = unique_prefixes(&[a, b, c]);
        assert_eq!(shown, ["01M8MK9C00A", "01M8MK9C00B", "01M8MKZZ"]);
        // Each shown prefix resolves to its own id.
        for (prefix, full) in shown.iter().zip([a, b, c]) {
            assert_eq!(resolve_prefix("plan", prefix, [a, b, c]).unwrap(), full);
        }
        assert_eq!(unique_prefixes(&[a]), ["01M8MK9C"]);
    }

    const A: &str = "01HXM7A9AAAAAAAAAAAAAAAAAA";
    const B: &str = "01HXM7A9BBBBBBBBBBBBBBBBBB";
    const C: &str = "01HXQ000CCCCCCCCCCCCCCCCCC";

    #[test]
    fn unique_prefixes_match_the_every_pair_definition_with_duplicates_and_mixed_case() {
        let ids = [
            "01M8MK9C00AAAA",
            "01m8mk9c00aaab",
            "01M8MK9C00AAAA",
            "01M8MKZZ00CCCC",
            "01M8",
            "01M8MK9D",
            "ZZZZZZZZZZZZ",
        ];
        let pairwise: Vec<String> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let shared = ids
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, o)| {
                        id.chars()
                            .zip(o.chars())
                            .take_while(|(x, y)| x.eq_ignore_ascii_case(y))
                            .count()
                    })
                    .max()
                    .unwrap_or(0);
                id.chars()
                    .take((shared + 1).max(SHORT_LEN).min(id.len()))
                    .collect()
            })
            .collect();
        assert_eq!(unique_prefixes(&ids), pairwise);
        assert_eq!(
            unique_prefixes(&ids)[0],
            "01M8MK9C00AAAA",
            "duplicates get their whole text"
        );
        assert_eq!(unique_prefixes(&ids)[1], "01m8mk9c00aaab");
        assert!(unique_prefixes::<&str>(&[]).is_empty());
    }

    #[test]
    fn unique_prefix_resolves_case_insensitively() {
        assert_eq!(resolve_prefix("plan", "01hxq", [A, B, C]).unwrap(), C);
    }

    #[test]
    fn ambiguous_prefix_lists_every_match() {
        let err = resolve_prefix("plan", "01HXM7", [A, B, C]).unwrap_err();
        assert_eq!(
            err,
            IdPrefixError::Ambiguous {
                kind: "plan",
                prefix: "01HXM7".into(),
                matches: vec![A.into(), B.into()]
            }
        );
        assert!(err.to_string().contains(A) && err.to_string().contains(B));
    }

    #[test]
    fn short_or_unknown_prefixes_are_refused() {
        assert_eq!(
            resolve_prefix("plan", "01H", [A]),
            Err(IdPrefixError::TooShort("01H".into()))
        );
        assert!(matches!(
            resolve_prefix("plan", "ZZZZ", [A]),
            Err(IdPrefixError::NotFound { .. })
        ));
    }

    #[test]
    fn ids_round_trip_and_shorten_to_eight_characters() {
        let id = Id::generate();
        let parsed: Id = id.to_string().to_lowercase().parse().unwrap();
        assert_eq!(parsed, id);
        assert_eq!(id.short().len(), 8);
        assert!(id.to_string().starts_with(&id.short()));
    }
}
