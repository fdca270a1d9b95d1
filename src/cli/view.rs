//! Small formatting helpers shared by the registry command groups (times, booleans, empty
//! markers, short ids).

use crate::output::{Cell, Tone};

/// A time as `YYYY-MM-DD HH:MM` in the local time zone (spec 06 examples).
pub fn time(t: &jiff::Timestamp) -> String {
    t.to_zoned(jiff::tz::TimeZone::system())
        .strftime("%Y-%m-%d %H:%M")
        .to_string()
}

/// `yes` / `no` for panels.
pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// A table cell for a boolean: `yes` (normal) or `no` (dim).
pub fn flag_cell(b: bool) -> Cell {
    Cell::new(yes_no(b), if b { Tone::Normal } else { Tone::Dim })
}

/// The value, or a dim marker such as `(none)` when absent.
pub fn or(v: Option<&str>, marker: &str) -> Cell {
    match v {
        Some(s) if !s.is_empty() => Cell::from(s),
        _ => Cell::new(marker, Tone::Dim),
    }
}

/// `text` on one line, cut to `max` characters with `...`.
pub fn clip(text: &str, max: usize) -> String {
    let one_line = text.replace(['\n', '\r'], " ");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}...", one_line.chars().take(max).collect::<String>())
    }
}

/// The first 8 characters of an id (tables).
pub fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// The ids of a list's rows as shown: each the shortest prefix (at least 8 characters) that
/// is unique among `ids`, so that every row can be named by what is printed.
pub fn short_ids<S: AsRef<str>>(ids: &[S]) -> Vec<String> {
    cleveragents_engine::domain::id::unique_prefixes(ids)
}

/// Shortest unique prefixes (at least 8 characters) of every id in `ids`, by full id: for
/// output that names ids in several places (a tree, step lists) so that what is printed can
/// be typed back. Duplicates count once.
pub fn short_map<I, S>(ids: I) -> std::collections::HashMap<String, String>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let mut all: Vec<String> = ids.into_iter().map(Into::into).collect();
    all.sort();
    all.dedup();
    let shorts = short_ids(&all);
    all.into_iter().zip(shorts).collect()
}

/// The entry of `map` for `id`, else its first 8 characters.
pub fn short_in(map: &std::collections::HashMap<String, String>, id: &str) -> String {
    map.get(id).cloned().unwrap_or_else(|| short(id))
}

/// An identifier cell.
pub fn id(s: impl Into<String>) -> Cell {
    Cell::new(s, Tone::Id)
}

/// Compiles an optional REGEX argument.
///
/// # Errors
/// `INVALID_INPUT` naming the argument.
pub fn regex(
    pattern: Option<&str>,
    example: &str,
) -> Result<Option<regex::Regex>, super::CliError> {
    pattern.map(regex::Regex::new).transpose().map_err(|e| {
        // The regex crate's message is a multi-line diagram (pattern, caret, reason): the first
        // line that says what is wrong goes in the message, the diagram in the detail.
        let text = e.to_string();
        let reason = text
            .lines()
            .rev()
            .find(|l| l.trim_start().starts_with("error:"))
            .map(|l| {
                l.trim_start()
                    .trim_start_matches("error:")
                    .trim()
                    .to_string()
            })
            .unwrap_or_else(|| text.lines().next().unwrap_or_default().to_string());
        super::CliError::invalid_input(format!("invalid REGEX: {reason}"))
            .detail(text)
            .hint(format!("e.g. `{example}`"))
    })
}
