//! The short ids of a printed tree: for each decision id, how many of its first characters
//! name it alone among every decision of the database.
//!
//! Kept as a length by id (a tree of 100,000 decisions would otherwise hold 200,000 strings
//! and hash each id's text twice); written, and read back from a server, as a map from full
//! id to shown prefix, as `TreeView::short_ids` always was.

use std::collections::HashMap;
use std::fmt;

use serde::de::Error as _;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::domain::Id;
use crate::domain::id::{IdHashMap, SHORT_LEN, TEXT_LEN};

/// The shortest prefix of each decision id a tree shows that is unique among every decision
/// of the database, by full id.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ShortIds(IdHashMap<Id, u8>);

impl ShortIds {
    /// Empty, with room for `n` ids.
    pub fn with_capacity(n: usize) -> Self {
        Self(IdHashMap::with_capacity_and_hasher(n, Default::default()))
    }

    /// Records that the first `len` characters of `id` name it alone.
    pub fn insert(&mut self, id: Id, len: usize) {
        self.0.insert(id, len.min(TEXT_LEN) as u8);
    }

    /// The unique prefix of `id`, when it was recorded.
    pub fn get(&self, id: &Id) -> Option<String> {
        let len = usize::from(*self.0.get(id)?);
        Some(id.encode(&mut [0; TEXT_LEN])[..len].to_owned())
    }

    /// The prefix of `id` to show: the recorded one, else its first [`SHORT_LEN`] characters.
    pub fn shown(&self, id: &Id) -> String {
        let mut out = String::with_capacity(TEXT_LEN);
        self.push_shown(&mut out, id);
        out
    }

    /// Appends [`ShortIds::shown`] of `id` to `out`.
    pub fn push_shown(&self, out: &mut String, id: &Id) {
        let len = self.0.get(id).map_or(SHORT_LEN, |n| usize::from(*n));
        out.push_str(&id.encode(&mut [0; TEXT_LEN])[..len]);
    }

    /// How many ids are recorded.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no id is recorded.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Debug for ShortIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.keys().map(|id| (id.to_string(), self.shown(id))))
            .finish()
    }
}

impl Serialize for ShortIds {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (id, len) in &self.0 {
            let mut buf = [0; TEXT_LEN];
            let text = id.encode(&mut buf);
            map.serialize_entry(text, &text[..usize::from(*len)])?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ShortIds {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = HashMap::<String, String>::deserialize(deserializer)?;
        let mut out = Self::with_capacity(map.len());
        for (full, short) in map {
            let id: Id = full.parse().map_err(D::Error::custom)?;
            let text = id.to_string();
            // Ids are Crockford base32, which reads either case.
            if short.len() > text.len() || !text[..short.len()].eq_ignore_ascii_case(&short) {
                return Err(D::Error::custom(format!(
                    "short id `{short}` is not a prefix of `{full}`"
                )));
            }
            out.insert(id, short.len());
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_ids_travel_as_a_map_from_full_id_to_prefix() {
        let a: Id = "01M8MK9C00AAAAAAAAAAAAAAAA".parse().unwrap();
        let b: Id = "01M8MK9C00BBBBBBBBBBBBBBBB".parse().unwrap();
        let c: Id = "01M8MKZZ00CCCCCCCCCCCCCCCC".parse().unwrap();
        let mut shorts = ShortIds::with_capacity(2);
        shorts.insert(a, 11);
        shorts.insert(b, 11);
        let json = serde_json::to_value(&shorts).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "01M8MK9C00AAAAAAAAAAAAAAAA": "01M8MK9C00A",
                "01M8MK9C00BBBBBBBBBBBBBBBB": "01M8MK9C00B",
            })
        );
        let back: ShortIds = serde_json::from_value(json).unwrap();
        assert_eq!(back, shorts);
        assert_eq!(back.get(&a).as_deref(), Some("01M8MK9C00A"));
        assert_eq!(back.get(&c), None);
        assert_eq!(
            back.shown(&c),
            "01M8MKZZ",
            "an id not recorded shows 8 characters"
        );
        let mut line = String::from("id ");
        back.push_shown(&mut line, &b);
        assert_eq!(line, "id 01M8MK9C00B");
        let wrong = serde_json::json!({ "01M8MK9C00AAAAAAAAAAAAAAAA": "01M8MK9D" });
        assert!(serde_json::from_value::<ShortIds>(wrong).is_err());
    }
}
