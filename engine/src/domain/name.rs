//! Namespaced names: `[server:][namespace/]name` (spec section 15).
//!
//! Actors, projects, resources, actions, skills, tools and custom profiles or resource types
//! carry a namespace (`local/api-service`, `openai/gpt-4o`); built-in profiles, resource types
//! and skills are bare (`trusted`, `git-checkout`). A bare name given by a user matches a
//! built-in of that kind first, else it means `local/<name>`. Provider namespaces (`openai`,
//! `anthropic` and every configured provider) and `builtin` are reserved: users cannot create
//! items in them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The namespace used when a user gives a bare name that is not a built-in.
pub const LOCAL_NAMESPACE: &str = "local";
/// Namespaces no user-created item may use, besides configured provider names.
pub const RESERVED_NAMESPACES: [&str; 3] = ["builtin", "openai", "anthropic"];
thread_local! {
    /// The namespace bare names get on this thread while a server user's call runs.
    static DEFAULT_NAMESPACE: std::cell::RefCell<Option<String>> =
        const { std::cell::RefCell::new(None) };
}

/// The namespace a bare name gets: `local` on one machine and for a server's
/// administrators, the user's own on a server (spec section 15: "a user's default namespace
/// on a server is theirs").
pub fn default_namespace() -> String {
    DEFAULT_NAMESPACE
        .with(|d| d.borrow().clone())
        .unwrap_or_else(|| LOCAL_NAMESPACE.to_string())
}

/// Runs `f` with bare names meaning `namespace/NAME` on this thread.
pub fn with_default_namespace<T>(namespace: &str, f: impl FnOnce() -> T) -> T {
    struct Restore(Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            DEFAULT_NAMESPACE.with(|d| *d.borrow_mut() = previous);
        }
    }
    let previous = DEFAULT_NAMESPACE.with(|d| d.replace(Some(namespace.to_string())));
    let _restore = Restore(previous);
    f()
}

/// Longest accepted name, in bytes (server, namespace and name together).
pub const MAX_NAME_LEN: usize = 200;

/// The six built-in automation profiles (spec section 27), least to most automated.
pub const BUILTIN_PROFILES: [&str; 6] = [
    "locked-down",
    "manual",
    "supervised",
    "trusted",
    "autonomous",
    "full-auto",
];

/// Whether `name` is one of the built-in automation profiles.
pub fn is_builtin_profile(name: &str) -> bool {
    BUILTIN_PROFILES.contains(&name)
}

/// A parsed `[server:][namespace/]name`.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(try_from = "String", into = "String")]
pub struct QualifiedName {
    /// The server a remote name lives on (`dev` in `dev:freemo/x`); `None` for local items.
    pub server: Option<String>,
    /// The namespace (`local`, `openai`, an org or user); `None` for built-ins.
    pub namespace: Option<String>,
    /// The name within the namespace. Child resources append `:child` segments
    /// (`api-repo:repo:origin`).
    pub name: String,
}

/// Why a name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// The name is empty.
    #[error("name is empty")]
    Empty,
    /// The name is longer than [`MAX_NAME_LEN`].
    #[error("name `{0}` is longer than 200 characters")]
    TooLong(String),
    /// A part has a character that is not allowed.
    #[error("invalid {part} `{value}`{}: {rule}", if value == input { String::new() } else { format!(" in name `{input}`") })]
    InvalidPart {
        /// `server`, `namespace` or `name`.
        part: &'static str,
        /// The offending part.
        value: String,
        /// The whole input.
        input: String,
        /// What is allowed.
        rule: &'static str,
    },
    /// The namespace is reserved for built-ins or a provider.
    #[error(
        "namespace `{namespace}` is reserved for {owner}; use `local/{name}` or your own namespace"
    )]
    Reserved {
        /// The namespace.
        namespace: String,
        /// The bare name.
        name: String,
        /// What owns it (`built-in items`, `the provider openai`).
        owner: String,
    },
}

const NS_RULE: &str = "use lowercase letters, digits, `-` and `_`, starting with a letter or digit";
const NAME_RULE: &str = "use letters, digits, `.`, `-` and `_`, starting with a letter or digit";

fn valid_ns(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

fn valid_segment(s: &str) -> bool {
    s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
}

impl QualifiedName {
    /// Parses `[server:][namespace/]name`.
    ///
    /// # Errors
    /// [`NameError`] naming the part that breaks the rules and what is allowed.
    pub fn parse(input: &str) -> Result<Self, NameError> {
        if input.is_empty() {
            return Err(NameError::Empty);
        }
        if input.len() > MAX_NAME_LEN {
            return Err(NameError::TooLong(input.to_string()));
        }
        let bad = |part, value: &str, rule| NameError::InvalidPart {
            part,
            value: value.to_string(),
            input: input.to_string(),
            rule,
        };
        let (server, rest) = match (input.find(':'), input.find('/')) {
            (Some(colon), Some(slash)) if colon < slash => {
                (Some(&input[..colon]), &input[colon + 1..])
            }
            _ => (None, input),
        };
        let (namespace, name) = match rest.split_once('/') {
            Some((ns, name)) => (Some(ns), name),
            None => (None, rest),
        };
        if let Some(s) = server
            && !valid_ns(s)
        {
            return Err(bad("server", s, NS_RULE));
        }
        if let Some(ns) = namespace
            && !valid_ns(ns)
        {
            return Err(bad("namespace", ns, NS_RULE));
        }
        if name.is_empty() || !name.split(':').all(valid_segment) {
            return Err(bad("name", name, NAME_RULE));
        }
        Ok(Self {
            server: server.map(str::to_string),
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        })
    }

    /// Parses a name a user typed for an item of some kind: a bare name that is one of
    /// `builtins` stays bare (the built-in); any other bare name gets the caller's default
    /// namespace ([`default_namespace`]: `local`, or a server user's own).
    ///
    /// # Errors
    /// As [`QualifiedName::parse`].
    pub fn resolve_user_input(input: &str, builtins: &[&str]) -> Result<Self, NameError> {
        let mut parsed = Self::parse(input)?;
        if parsed.namespace.is_none()
            && parsed.server.is_none()
            && !builtins.contains(&parsed.name.as_str())
        {
            parsed.namespace = Some(default_namespace());
        }
        Ok(parsed)
    }

    /// Checks that a user may create an item under this name: the namespace must not be
    /// `builtin`, a built-in provider's or one of `providers` (configured provider names).
    ///
    /// # Errors
    /// [`NameError::Reserved`].
    pub fn check_user_creatable(&self, providers: &[String]) -> Result<(), NameError> {
        let Some(ns) = &self.namespace else {
            return Err(NameError::Reserved {
                namespace: "(none)".to_string(),
                name: self.name.clone(),
                owner: "built-in items (bare names)".to_string(),
            });
        };
        let owner = if ns == "builtin" {
            Some("built-in items".to_string())
        } else if RESERVED_NAMESPACES.contains(&ns.as_str()) || providers.iter().any(|p| p == ns) {
            Some(format!("the provider {ns}"))
        } else {
            None
        };
        match owner {
            Some(owner) => Err(NameError::Reserved {
                namespace: ns.clone(),
                name: self.name.clone(),
                owner,
            }),
            None => Ok(()),
        }
    }

    /// Whether this names a built-in (no namespace, no server).
    pub fn is_builtin(&self) -> bool {
        self.namespace.is_none() && self.server.is_none()
    }
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(s) = &self.server {
            write!(f, "{s}:")?;
        }
        if let Some(ns) = &self.namespace {
            write!(f, "{ns}/")?;
        }
        write!(f, "{}", self.name)
    }
}

impl TryFrom<String> for QualifiedName {
    type Error = NameError;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::parse(&value)
    }
}

impl From<QualifiedName> for String {
    fn from(value: QualifiedName) -> Self {
        value.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_every_documented_shape() {
        let n = QualifiedName::parse("dev:freemo/x").unwrap();
        assert_eq!(
            (n.server.as_deref(), n.namespace.as_deref(), n.name.as_str()),
            (Some("dev"), Some("freemo"), "x")
        );
        let n = QualifiedName::parse("local/api-repo:repo:origin").unwrap();
        assert_eq!(
            (n.server, n.namespace.as_deref(), n.name.as_str()),
            (None, Some("local"), "api-repo:repo:origin")
        );
        let n = QualifiedName::parse("trusted").unwrap();
        assert!(n.is_builtin());
        assert_eq!(
            QualifiedName::parse("openai/gpt-4.1").unwrap().name,
            "gpt-4.1"
        );
    }

    #[test]
    fn bare_names_prefer_builtins_then_local() {
        let builtins = ["git-checkout", "trusted"];
        assert_eq!(
            QualifiedName::resolve_user_input("trusted", &builtins)
                .unwrap()
                .to_string(),
            "trusted"
        );
        assert_eq!(
            QualifiedName::resolve_user_input("api", &builtins)
                .unwrap()
                .to_string(),
            "local/api"
        );
        assert_eq!(
            QualifiedName::resolve_user_input("org/api", &builtins)
                .unwrap()
                .to_string(),
            "org/api"
        );
    }

    #[test]
    fn reserved_namespaces_are_refused_for_user_items() {
        let providers = vec!["ollama".to_string()];
        for reserved in ["builtin/x", "openai/x", "anthropic/x", "ollama/x"] {
            let err = QualifiedName::parse(reserved)
                .unwrap()
                .check_user_creatable(&providers)
                .unwrap_err();
            assert!(matches!(err, NameError::Reserved { .. }), "{reserved}");
        }
        QualifiedName::parse("local/x")
            .unwrap()
            .check_user_creatable(&providers)
            .unwrap();
    }

    #[test]
    fn invalid_parts_are_named_in_the_error() {
        let err = QualifiedName::parse("Local/x").unwrap_err();
        assert!(
            matches!(
                err,
                NameError::InvalidPart {
                    part: "namespace",
                    ..
                }
            ),
            "{err}"
        );
        assert!(matches!(
            QualifiedName::parse("local/").unwrap_err(),
            NameError::InvalidPart { part: "name", .. }
        ));
        assert!(matches!(
            QualifiedName::parse("local/a b").unwrap_err(),
            NameError::InvalidPart { part: "name", .. }
        ));
        assert_eq!(QualifiedName::parse(""), Err(NameError::Empty));
    }

    fn segment() -> impl Strategy<Value = String> {
        "[a-z0-9][a-z0-9_-]{0,10}"
    }

    proptest! {
        #[test]
        fn display_round_trips_through_parse(
            server in proptest::option::of(segment()),
            ns in proptest::option::of(segment()),
            name in "[A-Za-z0-9][A-Za-z0-9._-]{0,12}(:[a-z0-9][a-z0-9._-]{0,6}){0,2}",
        ) {
            // A server only exists together with a namespace (`dev:org/x`).
            let ns = if server.is_some() && ns.is_none() { Some("local".to_string()) } else { ns };
            let original = QualifiedName { server, namespace: ns, name };
            let parsed = QualifiedName::parse(&original.to_string()).unwrap();
            prop_assert_eq!(parsed, original);
        }

        #[test]
        fn parse_never_panics_and_accepted_names_round_trip(input in "\\PC{0,40}") {
            if let Ok(parsed) = QualifiedName::parse(&input) {
                prop_assert_eq!(parsed.to_string(), input);
            }
        }
    }
}
