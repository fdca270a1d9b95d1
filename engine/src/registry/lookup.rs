//! Finding a registered item by what a user typed: its name (bare names mean `local/NAME`),
//! its full id, or a unique id prefix of at least
//! [`MIN_PREFIX`](crate::domain::id::MIN_PREFIX) characters. The same rules hold for
//! projects, actions, resources and invariants; a miss suggests the nearest registered name.

use std::fmt;

use crate::domain::{IdPrefixError, QualifiedName, resolve_prefix};
use crate::store::StoreError;

/// What was not found, with the nearest registered name when one is close (strsim
/// Jaro-Winkler >= 0.8, as `config get` does for keys). Displays as the input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    /// The text the user gave.
    pub input: String,
    /// The nearest registered name, if any is close.
    pub suggestion: Option<String>,
}

impl Missing {
    /// A miss for `input`, suggesting the nearest of `names`.
    pub fn near<'a>(input: &str, names: impl IntoIterator<Item = &'a str>) -> Self {
        let qualified = QualifiedName::resolve_user_input(input, &[])
            .map(|q| q.to_string())
            .unwrap_or_else(|_| input.to_string());
        let split = |n: &str| -> (String, String) {
            match n.rsplit_once('/') {
                Some((ns, name)) => (ns.to_ascii_lowercase(), name.to_ascii_lowercase()),
                None => (String::new(), n.to_ascii_lowercase()),
            }
        };
        let (want_ns, want_name) = split(&qualified);
        // Within one namespace only the names are compared (a shared `local/` says nothing);
        // bare built-in names are compared with the input as typed.
        let score = |candidate: &str| {
            let (ns, name) = split(candidate);
            let by_name = if ns == want_ns {
                strsim::jaro_winkler(&want_name, &name)
            } else {
                strsim::jaro_winkler(
                    &qualified.to_ascii_lowercase(),
                    &candidate.to_ascii_lowercase(),
                )
            };
            by_name.max(
                strsim::jaro_winkler(&input.to_ascii_lowercase(), &candidate.to_ascii_lowercase())
                    * f64::from(u8::from(!candidate.contains('/'))),
            )
        };
        let suggestion = names
            .into_iter()
            .filter(|n| *n != qualified && *n != input)
            .map(|n| (score(n), n))
            .filter(|(s, _)| *s >= 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, n)| n.to_string());
        Self {
            input: input.to_string(),
            suggestion,
        }
    }
}

impl From<String> for Missing {
    fn from(input: String) -> Self {
        Self {
            input,
            suggestion: None,
        }
    }
}

impl From<&str> for Missing {
    fn from(input: &str) -> Self {
        input.to_string().into()
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.input)
    }
}

/// Why a lookup failed (store failures are separate).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookupError {
    /// Neither a name nor an id matched.
    NotFound(Missing),
    /// An id prefix matched several items.
    Ambiguous(IdPrefixError),
}

/// How to look one kind of item up.
pub(crate) struct Lookup<'s, T> {
    /// `project`, `action`, ... (for the ambiguity message).
    pub kind: &'static str,
    /// By exact (qualified) name.
    pub by_name: &'s dyn Fn(&str) -> Result<Option<T>, StoreError>,
    /// By full id.
    pub by_id: &'s dyn Fn(&str) -> Result<Option<T>, StoreError>,
    /// Every id.
    pub ids: &'s dyn Fn() -> Result<Vec<String>, StoreError>,
    /// Every name (for the suggestion).
    pub names: &'s dyn Fn() -> Result<Vec<String>, StoreError>,
}

impl<T> Lookup<'_, T> {
    /// Finds the item `input` names: a name first, then a full id or a unique id prefix.
    ///
    /// # Errors
    /// The outer error is the store's; the inner one says what was not found or which ids an
    /// ambiguous prefix matches.
    pub fn find(&self, input: &str) -> Result<Result<T, LookupError>, StoreError> {
        if let Ok(q) = QualifiedName::resolve_user_input(input, &[])
            && let Some(found) = (self.by_name)(&q.to_string())?
        {
            return Ok(Ok(found));
        }
        if input.len() >= crate::domain::id::MIN_PREFIX
            && input.chars().all(|c| c.is_ascii_alphanumeric())
        {
            match resolve_prefix(self.kind, input, (self.ids)()?) {
                Ok(id) => {
                    if let Some(found) = (self.by_id)(&id)? {
                        return Ok(Ok(found));
                    }
                }
                Err(e @ IdPrefixError::Ambiguous { .. }) => {
                    return Ok(Err(LookupError::Ambiguous(e)));
                }
                Err(_) => {}
            }
        }
        let names = (self.names)()?;
        Ok(Err(LookupError::NotFound(Missing::near(
            input,
            names.iter().map(String::as_str),
        ))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup<'s>(
        by_name: &'s dyn Fn(&str) -> Result<Option<String>, StoreError>,
        by_id: &'s dyn Fn(&str) -> Result<Option<String>, StoreError>,
        ids: &'s dyn Fn() -> Result<Vec<String>, StoreError>,
        names: &'s dyn Fn() -> Result<Vec<String>, StoreError>,
    ) -> Lookup<'s, String> {
        Lookup {
            kind: "project",
            by_name,
            by_id,
            ids,
            names,
        }
    }

    const A: &str = "01M8MK9C00AAAAAAAAAAAAAAAA";
    const B: &str = "01M8MK9C00BBBBBBBBBBBBBBBB";

    #[test]
    fn names_full_ids_and_unique_prefixes_resolve_and_ambiguous_prefixes_list_matches() {
        let by_name = |n: &str| Ok((n == "local/api-service").then(|| "by name".to_string()));
        let by_id = |i: &str| Ok(Some(format!("by id {i}")));
        let ids = || Ok(vec![A.to_string(), B.to_string()]);
        let names = || Ok(vec!["local/api-service".to_string()]);
        let l = lookup(&by_name, &by_id, &ids, &names);
        assert_eq!(l.find("api-service").unwrap().unwrap(), "by name");
        assert_eq!(l.find(A).unwrap().unwrap(), format!("by id {A}"));
        assert_eq!(
            l.find("01m8mk9c00b").unwrap().unwrap(),
            format!("by id {B}")
        );
        assert!(matches!(
            l.find("01M8MK9C").unwrap(),
            Err(LookupError::Ambiguous(IdPrefixError::Ambiguous { matches, .. })) if matches.len() == 2
        ));
    }

    #[test]
    fn a_misspelt_name_suggests_the_nearest_registered_one() {
        let none = |_: &str| Ok(None);
        let ids = || Ok(Vec::new());
        let names = || {
            Ok(vec![
                "local/api-service".to_string(),
                "local/web".to_string(),
            ])
        };
        let l = lookup(&none, &none, &ids, &names);
        let Err(LookupError::NotFound(missing)) = l.find("local/api-servic").unwrap() else {
            panic!("not found expected");
        };
        assert_eq!(missing.suggestion.as_deref(), Some("local/api-service"));
        let Err(LookupError::NotFound(missing)) = l.find("zzz").unwrap() else {
            panic!("not found expected");
        };
        assert_eq!(missing.suggestion, None);
    }
}
