//! Secret redaction (spec section 22 "secrets never reach logs or output"; `docs/sandbox.md`).
//!
//! The secrets are the values of this process's environment variables that name keys:
//! `*_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD` (provider keys such as `OPENAI_API_KEY`
//! included), at least [`MIN_SECRET_LEN`] bytes long. [`redact`] replaces each occurrence
//! with `[redacted]`; stored step output, tool results, validation output, the log file and
//! CLI errors go through it. [`find`] tells Apply whether a diff holds one.

use std::borrow::Cow;

/// What a secret looks like wherever it would have been shown.
pub const REDACTED: &str = "[redacted]";

/// Shorter values are not treated as secrets (they would match ordinary text).
pub const MIN_SECRET_LEN: usize = 8;

/// Whether an environment variable's name marks its value as a secret.
pub fn is_secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ["_KEY", "_TOKEN", "_SECRET", "_PASSWORD"]
        .iter()
        .any(|s| upper.ends_with(s))
        || matches!(upper.as_str(), "KEY" | "TOKEN" | "SECRET" | "PASSWORD")
}

/// `(variable name, value)` of every secret in this process's environment, longest value
/// first (so a secret containing another is replaced whole).
pub fn secrets() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
        .filter(|(k, v)| is_secret_name(k) && v.trim().len() >= MIN_SECRET_LEN)
        .map(|(k, v)| (k, v.trim().to_string()))
        .collect();
    out.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    out
}

/// Whether this process's environment holds any secret (when it holds none, output needs no
/// redaction and can be written as it is produced).
pub fn any_secret() -> bool {
    !secrets().is_empty()
}

/// `text` with every secret replaced by `[redacted]`.
pub fn redact(text: &str) -> Cow<'_, str> {
    let secrets = secrets();
    if !secrets.iter().any(|(_, v)| text.contains(v.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for (_, v) in &secrets {
        out = out.replace(v.as_str(), REDACTED);
    }
    Cow::Owned(out)
}

/// Bytes with every secret replaced (non-UTF-8 output is matched byte-wise).
pub fn redact_bytes(bytes: &[u8]) -> Vec<u8> {
    redact_bytes_of(bytes, &secrets())
}

/// As [`redact_bytes`], without a copy when no secret occurs (the common case: a command's
/// whole output, megabytes for a large diff, is written as it is).
pub fn redacted_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let secrets = secrets();
    if !secrets.iter().any(|(_, v)| occurs(bytes, v)) {
        return Cow::Borrowed(bytes);
    }
    Cow::Owned(redact_bytes_of(bytes, &secrets))
}

/// Whether `needle` occurs in `bytes` (a literal search, as fast as `memmem`).
fn occurs(bytes: &[u8], needle: &str) -> bool {
    match regex::bytes::Regex::new(&regex::escape(needle)) {
        Ok(literal) => literal.is_match(bytes),
        Err(_) => bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
    }
}

/// `bytes` with each value of `secrets` replaced by `[redacted]`, longest first.
fn redact_bytes_of(bytes: &[u8], secrets: &[(String, String)]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    for (_, v) in secrets {
        let needle = v.as_bytes();
        if needle.is_empty() || out.len() < needle.len() {
            continue;
        }
        let mut result = Vec::with_capacity(out.len());
        let mut i = 0;
        while i < out.len() {
            if out[i..].starts_with(needle) {
                result.extend_from_slice(REDACTED.as_bytes());
                i += needle.len();
            } else {
                result.push(out[i]);
                i += 1;
            }
        }
        out = result;
    }
    out
}

/// The name of the first variable whose secret value occurs in `text`.
pub fn find(text: &str) -> Option<String> {
    secrets()
        .into_iter()
        .find(|(_, v)| text.contains(v.as_str()))
        .map(|(k, _)| k)
}

/// The first file that `new_tree` adds or changes relative to `old_tree` whose content holds a
/// secret: `(path, variable name)`. Apply refuses such a plan (spec section 22).
///
/// # Errors
/// git errors reading the trees.
pub fn find_in_diff(
    repo: &git2::Repository,
    old_tree: git2::Oid,
    new_tree: git2::Oid,
) -> Result<Option<(String, String)>, git2::Error> {
    let secrets = secrets();
    if secrets.is_empty() {
        return Ok(None);
    }
    let old = repo.find_tree(old_tree)?;
    let new = repo.find_tree(new_tree)?;
    let diff = repo.diff_tree_to_tree(Some(&old), Some(&new), None)?;
    for delta in diff.deltas() {
        let file = delta.new_file();
        if file.id().is_zero() {
            continue;
        }
        let Ok(blob) = repo.find_blob(file.id()) else {
            continue;
        };
        let content = blob.content();
        for (name, value) in &secrets {
            let needle = value.as_bytes();
            if content.windows(needle.len()).any(|w| w == needle) {
                let path = file
                    .path()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default();
                return Ok(Some((path, name.clone())));
            }
        }
    }
    Ok(None)
}

/// A writer that redacts each buffer before passing it on (for the log file).
pub struct RedactingWriter<W>(pub W);

impl<W: std::io::Write> std::io::Write for RedactingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write_all(&redact_bytes(buf))?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_that_hold_keys_are_secret() {
        for n in [
            "OPENAI_API_KEY",
            "GITHUB_TOKEN",
            "AWS_SECRET",
            "db_password",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in ["PATH", "KEYBOARD", "HOME"] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn every_occurrence_of_a_secret_is_replaced_the_longest_first() {
        let secrets = vec![
            ("LONG_TOKEN".to_string(), "abcdefgh-12345678".to_string()),
            ("SHORT_KEY".to_string(), "abcdefgh".to_string()),
        ];
        let text = b"x abcdefgh-12345678 y abcdefgh z \xff abcdefgh";
        assert_eq!(
            redact_bytes_of(text, &secrets),
            b"x [redacted] y [redacted] z \xff [redacted]".to_vec()
        );
        assert_eq!(redact_bytes_of(b"plain", &secrets), b"plain".to_vec());
    }

    #[test]
    fn a_secret_is_found_as_literal_bytes_and_output_without_one_is_not_copied() {
        assert!(occurs(b"x a.b*c(d) y", "a.b*c(d)"));
        assert!(!occurs(b"x aXb*c(d) y", "a.b*c(d)"));
        assert!(occurs(b"\xff\xfe k3y-value \xff", "k3y-value"));
        let text = b"no secret value is in this text \xff";
        assert!(
            secrets().iter().any(|(_, v)| occurs(text, v))
                || matches!(redacted_bytes(text), Cow::Borrowed(_))
        );
    }
}
