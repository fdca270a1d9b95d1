//! Loading user YAML files (actions, actors, automation profiles) into typed structs.
//!
//! Every file is read whole and deserialized through `serde_path_to_error`, so an error names
//! the file, the line and column (1-based) and the field path (`script[1].run`). The typed
//! structs use `deny_unknown_fields`, so a misspelt key is an error rather than silently
//! ignored.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Largest definition file (`--config`) read, in bytes; a client sends at most this much to a
/// server too.
pub const MAX_BYTES: u64 = 1024 * 1024;

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
    /// The file is not one a definition is read from: not a regular file, or larger than
    /// [`MAX_BYTES`].
    #[error("{}: {reason}", path.display())]
    NotLoadable {
        /// The file.
        path: PathBuf,
        /// Why it is not read.
        reason: String,
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
            YamlError::Read { .. } | YamlError::NotLoadable { .. } => "",
            YamlError::Invalid { field, .. } | YamlError::Rule { field, .. } => field,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            YamlError::Read { path, .. }
            | YamlError::NotLoadable { path, .. }
            | YamlError::Invalid { path, .. }
            | YamlError::Rule { path, .. } => path,
        }
    }
}

/// `path` as stored in the registry: absolute (relative to the working directory at
/// registration), symlinks kept, so that a later `show` names the file from anywhere.
pub fn stored_path(path: &Path) -> String {
    std::path::absolute(path)
        .unwrap_or_else(|_| path.to_path_buf())
        .display()
        .to_string()
}

/// Reads `path` and deserializes it into `T`.
///
/// # Errors
/// [`YamlError::Read`] when the file cannot be read; [`YamlError::Invalid`] with line, column
/// and field path for syntax errors, unknown or missing fields and wrong types.
pub fn load<T: DeserializeOwned>(path: &Path) -> Result<(T, String), YamlError> {
    use crate::safe_read::{ReadError, read_regular_text};
    let not_loadable = |reason: String| YamlError::NotLoadable {
        path: path.to_path_buf(),
        reason,
    };
    // A device such as `/dev/zero` would be read without end: refused before reading.
    let mut text = read_regular_text(path, MAX_BYTES).map_err(|e| match e {
        ReadError::NotRegular => not_loadable(e.to_string()),
        ReadError::TooBig { len, .. } => not_loadable(format!(
            "{len} bytes is more than the {MAX_BYTES} a definition may have"
        )),
        ReadError::Io(_) | ReadError::NotUtf8 => YamlError::Read {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    })?;
    // Editors on Windows write a UTF-8 byte order mark; it is not part of the document.
    if let Some(rest) = text.strip_prefix('\u{feff}') {
        text = rest.to_string();
    }
    let value = parse(path, &text)?;
    Ok((value, text))
}

/// [`load`], or with `text` given (a file read on the client and sent to a server), [`parse`]
/// of that text under the file's name.
///
/// # Errors
/// As [`load`].
pub fn load_given<T: DeserializeOwned>(
    path: &Path,
    text: Option<&str>,
) -> Result<(T, String), YamlError> {
    match text {
        Some(t) => {
            let t = t.strip_prefix('\u{feff}').unwrap_or(t);
            Ok((parse(path, t)?, t.to_string()))
        }
        None => load(path),
    }
}

/// Deserializes YAML `text` (the content of `path`) into `T`.
///
/// # Errors
/// As [`load`].
pub fn parse<T: DeserializeOwned>(path: &Path, text: &str) -> Result<T, YamlError> {
    // A leading byte order mark would read as a second document.
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(YamlError::Invalid {
            path: path.to_path_buf(),
            line: Some(1),
            column: Some(1),
            field: String::new(),
            message: "the file is empty; expected a YAML mapping".to_string(),
        });
    }
    // Syntax first, so that a broken document is reported as such and not as a type error
    // of whatever the parser had seen so far (`[unclosed` is not "a sequence").
    if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(text) {
        let loc = e.location();
        return Err(YamlError::Invalid {
            path: path.to_path_buf(),
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
            field: String::new(),
            message: syntax_message(&strip_location(&e.to_string())),
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
            field: if field == "." || field == "?" {
                String::new()
            } else {
                field
            },
            message: plain_types(&strip_location(&inner.to_string())),
        }
    })
}

/// A parser message as a plain syntax error, with the usual cause for the common ones.
fn syntax_message(message: &str) -> String {
    let hint = if message.contains("mapping values are not allowed") {
        " (often a key indented differently from its siblings, or a value containing `: `; quote the value or fix the indentation)"
    } else if message.contains("did not find expected") {
        " (an unclosed `[`, `{` or quote, or a wrongly indented line)"
    } else {
        ""
    };
    format!("YAML syntax error: {message}{hint}")
}

/// Replaces Rust type names in serde's messages with what a user would write.
fn plain_types(message: &str) -> String {
    let mut m = message.to_string();
    for (rust, plain) in [
        ("expected u8", "expected a whole number >= 0"),
        ("expected u16", "expected a whole number >= 0"),
        ("expected u32", "expected a whole number >= 0"),
        ("expected u64", "expected a whole number >= 0"),
        ("expected usize", "expected a whole number >= 0"),
        ("expected i32", "expected a whole number"),
        ("expected i64", "expected a whole number"),
        ("expected f32", "expected a number"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
    ] {
        if let Some(i) = m.find(rust)
            && !m[i + rust.len()..].starts_with(|c: char| c.is_ascii_alphanumeric())
        {
            m.replace_range(i..i + rust.len(), plain);
        }
    }
    // "expected struct ActionFile" -> "expected a mapping of action fields".
    if let Some(i) = m.find("expected struct ") {
        let name: String = m[i + 16..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        let what = match name
            .strip_suffix("File")
            .or(name.strip_suffix("Definition"))
        {
            Some(kind) if !kind.is_empty() => {
                format!("a mapping of {} fields", kind.to_lowercase())
            }
            _ => "a mapping".to_string(),
        };
        m.replace_range(i + 9..i + 16 + name.len(), &what);
    }
    m.replace("invalid type: sequence", "found a list")
        .replace("invalid type: map", "found a mapping")
        .replace("invalid type: ", "found ")
        .replace("invalid value: ", "found ")
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

/// The 1-based line where the field path `field` (`arguments[1].name`, `options.max-tokens`,
/// `script[0].spawn.args.topic`) is written in block-style YAML `text`; falls back to the
/// deepest part of the path that could be found (flow-style values such as `{a: b}` are found
/// up to their key). `None` when not even the first part is found.
pub fn line_of_path(text: &str, field: &str) -> Option<usize> {
    // (line number, indent, content) of every line that is not blank or a comment.
    let lines: Vec<(usize, usize, String)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(i, l)| {
            (
                i + 1,
                l.len() - l.trim_start().len(),
                l.trim_start().to_string(),
            )
        })
        .collect();
    let mut block: Vec<(usize, usize, String)> = lines;
    let mut found = None;
    for seg in parse_path(field) {
        let Some(first) = block.first() else { break };
        let indent = first.1;
        match seg {
            Seg::Key(k) => {
                let alt = k.replace('-', "_");
                let is_key = |c: &str| {
                    [k.as_str(), alt.as_str()].iter().any(|k| {
                        let c = c.trim_start_matches(['"', '\'']);
                        c.strip_prefix(k).is_some_and(|rest| {
                            rest.trim_start_matches(['"', '\'']).starts_with(':')
                        })
                    })
                };
                let Some(pos) = block
                    .iter()
                    .position(|(_, ind, c)| *ind == indent && is_key(c))
                else {
                    break;
                };
                let (line, key_indent, _) = block[pos].clone();
                found = Some(line);
                // The value's lines: deeper ones, or a sequence written at the key's own
                // indentation (`key:\n- item`).
                block = block[pos + 1..]
                    .iter()
                    .take_while(|(_, ind, c)| {
                        *ind > key_indent
                            || (*ind == key_indent && (c == "-" || c.starts_with("- ")))
                    })
                    .cloned()
                    .collect();
            }
            Seg::Index(n) => {
                let items: Vec<usize> = block
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, ind, c))| *ind == indent && (c == "-" || c.starts_with("- ")))
                    .map(|(i, _)| i)
                    .collect();
                let Some(&start) = items.get(n) else { break };
                let end = items.get(n + 1).copied().unwrap_or(block.len());
                let (line, ind, content) = block[start].clone();
                found = Some(line);
                let rest = content.trim_start_matches('-');
                let inner = rest.trim_start();
                let mut item: Vec<(usize, usize, String)> = Vec::new();
                if !inner.is_empty() {
                    item.push((
                        line,
                        ind + 1 + (rest.len() - inner.len()),
                        inner.to_string(),
                    ));
                }
                item.extend(block[start + 1..end].iter().cloned());
                block = item;
            }
        }
    }
    found
}

enum Seg {
    Key(String),
    Index(usize),
}

/// `a.b[2].c` -> [Key a, Key b, Index 2, Key c].
fn parse_path(field: &str) -> Vec<Seg> {
    let mut out = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (key, mut rest) = part.split_at(part.find('[').unwrap_or(part.len()));
        if !key.is_empty() {
            out.push(Seg::Key(key.to_string()));
        }
        while let Some(close) = rest.find(']') {
            if let Ok(n) = rest[1..close].parse() {
                out.push(Seg::Index(n));
            }
            rest = &rest[close + 1..];
        }
    }
    out
}

/// A rule error for `field` in `path`, pointing at the line of `field` in `text` (or of `key`
/// when the path cannot be followed).
pub fn rule(
    path: &Path,
    text: &str,
    field: &str,
    key: &str,
    message: impl Into<String>,
) -> YamlError {
    YamlError::Rule {
        path: path.to_path_buf(),
        line: line_of_path(text, field).or_else(|| line_of_key(text, key)),
        field: field.to_string(),
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields, rename_all = "kebab-case")]
    struct Doc {
        #[allow(dead_code)]
        name: String,
        #[allow(dead_code)]
        #[serde(default)]
        steps: Vec<Step>,
    }

    #[derive(Debug, Deserialize, schemars::JsonSchema)]
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
    fn rule_errors_point_at_the_line_of_their_field_not_line_1() {
        let text = "name: x\narguments:\n  - name: a\n    type: string\n  - name: b\n    type: integer\n    default: 3\noptions:\n  temperature: 0.2\n  max-tokens: 0\nscript:\n  - name: s\n    spawn: {action: y}\n";
        assert_eq!(line_of_path(text, "arguments[1].name"), Some(5));
        assert_eq!(line_of_path(text, "arguments[1].default"), Some(7));
        assert_eq!(line_of_path(text, "arguments[0].type"), Some(4));
        assert_eq!(line_of_path(text, "options.max-tokens"), Some(10));
        assert_eq!(line_of_path(text, "script[0].spawn.action"), Some(13));
        assert_eq!(line_of_path(text, "name"), Some(1));
        // A sequence at its key's own indentation.
        let flat =
            "name: x\narguments:\n- name: a\n  type: string\n- name: b\n  type: int\nother: 1\n";
        assert_eq!(line_of_path(flat, "arguments[1].type"), Some(6));
        assert_eq!(line_of_path(flat, "other"), Some(7));
        let e = rule(
            Path::new("a.yaml"),
            text,
            "arguments[1].name",
            "name",
            "bad",
        );
        assert!(e.to_string().starts_with("a.yaml:5:"), "{e}");
    }

    #[test]
    fn syntax_errors_and_type_errors_are_worded_for_users() {
        let e = err("name: x\nsteps:\n  - run: a\n   run: b\n").to_string();
        assert!(e.contains("YAML syntax error"), "{e}");
        assert!(!e.contains("field `?`"), "{e}");
        let e = err("- name: x\n").to_string();
        assert!(e.contains("expected a mapping"), "{e}");
        assert!(!e.contains("struct"), "{e}");
        let e = err("name: [unclosed\n").to_string();
        assert!(e.contains("YAML syntax error"), "{e}");
        assert!(!e.contains("expected a string"), "{e}");
        #[derive(Debug, Deserialize, schemars::JsonSchema)]
        struct Limits {
            #[allow(dead_code)]
            turns: u32,
        }
        let e = parse::<Limits>(Path::new("a.yaml"), "turns: -1\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("expected a whole number >= 0"), "{e}");
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
