//! Loading user YAML files (actions, actors, automation profiles) into typed structs.
//!
//! Every file is read whole and deserialized through `serde_path_to_error`, so an error names
//! the file, the line and column (1-based) and the field path (`script[1].run`). The typed
//! structs use `deny_unknown_fields`, so a misspelt key is an error rather than silently
//! ignored.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Why a YAML file could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum YamlError {
    /// The file cannot be read (missing, unreadable, not UTF-8).
    #[error("cannot read {}: {message}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
    /// The file is not valid YAML, or a field is unknown, missing or of the wrong type.
    #[error("{}{}: {}{message}", path.display(), location(*line, *column), field_prefix(field))]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line of the problem, when known.
        line: Option<usize>,
        /// 1-based column of the problem, when known.
        column: Option<usize>,
        /// The field path (`script[1].run`), empty for the document root.
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The document is well-formed but a value breaks a rule (for example a duplicate step
    /// name); reported with the field path and, when it can be found, the line.
    #[error("{}{}: {}{message}", path.display(), location(*line, None), field_prefix(field))]
    Rule {
        /// The file.
        path: PathBuf,
        /// 1-based line of the field, when it can be found.
        line: Option<usize>,
        /// The field path.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

fn location(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() || field == "." {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}

impl YamlError {
    /// The field path the error names (empty for syntax errors at the root).
    pub fn field(&self) -> &str {
        match self {
            YamlError::Read { .. } => "",
            YamlError::Invalid { field, .. } | YamlError::Rule { field, .. } => field,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            YamlError::Read { path, .. }
            | YamlError::Invalid { path, .. }
            | YamlError::Rule { path, .. } => path,
        }
    }
}

/// Reads `path` and deserializes it into `T`.
///
/// # Errors
/// [`YamlError::Read`] when the file cannot be read; [`YamlError::Invalid`] with line, column
/// and field path for syntax errors, unknown or missing fields and wrong types.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<(T, String), YamlError> {
    let text = std::fs::read_to_string(path).map_err(|e| YamlError::Read {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    let value = parse(path, &text)?;
    Ok((value, text))
}

/// Deserializes YAML `text` (the content of `path`) into `T`.
///
/// # Errors
/// As [`load`].
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, YamlError> {
    if text.trim().is_empty() {
        return Err(YamlError::Invalid {
            path: path.to_path_buf(),
            line: Some(1),
            column: Some(1),
            field: String::new(),
            message: "the file is empty; expected a YAML mapping".to_string(),
        });
    }
    let de = serde_yaml::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        let loc = inner.location();
        YamlError::Invalid {
            path: path.to_path_buf(),
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
            field: if field == "." { String::new() } else { field },
            message: strip_location(&inner.to_string()),
        }
    })
}

/// Removes the ` at line N column M` suffix and a leading `path: ` that the YAML library puts
/// in its messages (we print both ourselves, in `file:line:column: field ...` form).
fn strip_location(message: &str) -> String {
    let mut m = message.to_string();
    if let Some(i) = m.find(" at line ") {
        m.truncate(i);
    }
    // "script[0]: unknown field ..." -> "unknown field ..."
    if let Some((head, rest)) = m.split_once(": ")
        && !head.contains(' ')
        && (head.contains('.')
            || head.contains('[')
            || head
                .chars()
                .all(|c| c.is_alphanumeric() || c == '-' || c == '_'))
        && !rest.is_empty()
        && head != "invalid"
    {
        return rest.to_string();
    }
    m
}

/// The 1-based line on which a top-level or nested key `key` first appears in `text`, used to
/// point rule errors at the field (best effort: the first line whose trimmed text starts with
/// `key:` or `- key:`).
pub fn line_of_key(text: &str, key: &str) -> Option<usize> {
    let wanted = format!("{key}:");
    text.lines()
        .position(|l| {
            let t = l.trim_start().trim_start_matches("- ");
            t.starts_with(&wanted)
        })
        .map(|i| i + 1)
}

/// A rule error for `field` in `path`, pointing at the line of `key` in `text` when found.
pub fn rule(
    path: &Path,
    text: &str,
    field: &str,
    key: &str,
    message: impl Into<String>,
) -> YamlError {
    YamlError::Rule {
        path: path.to_path_buf(),
        line: line_of_key(text, key),
        field: field.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Doc {
        #[allow(dead_code)]
        name: String,
        #[allow(dead_code)]
        #[serde(default)]
        steps: Vec<Step>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Step {
        #[allow(dead_code)]
        run: String,
    }

    fn err(text: &str) -> YamlError {
        parse::<Doc>(Path::new("a.yaml"), text).unwrap_err()
    }

    #[test]
    fn syntax_errors_have_line_and_column() {
        let e = err("name: x\nsteps: [\n  - run: a\n");
        let YamlError::Invalid { line, column, .. } = &e else {
            panic!("{e:?}")
        };
        assert!(line.is_some() && column.is_some(), "{e}");
        assert!(e.to_string().starts_with("a.yaml:"), "{e}");
    }

    #[test]
    fn unknown_fields_name_the_field_path_and_line() {
        let e = err("name: x\nsteps:\n  - run: a\n  - rn: b\n");
        assert_eq!(e.field(), "steps[1].rn", "{e}");
        let text = e.to_string();
        assert!(text.contains("unknown field `rn`"), "{text}");
        assert!(text.starts_with("a.yaml:4:"), "{text}");
    }

    #[test]
    fn wrong_types_and_missing_fields_are_reported() {
        let e = err("name: [1, 2]\n");
        assert_eq!(e.field(), "name", "{e}");
        let e = err("steps: []\n");
        assert!(e.to_string().contains("missing field `name`"), "{e}");
        let e = err("   \n");
        assert!(e.to_string().contains("empty"), "{e}");
    }
}
