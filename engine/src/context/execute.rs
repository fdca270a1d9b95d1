//! An execution step's hot context (spec section 25): the files and definitions its
//! decision names — as the sandbox holds them now (earlier steps' work included), or at the
//! plan's base where no earlier step changed them —,
//! then what earlier steps did ([`so_far`]: their recorded outputs and the diff so far), then
//! the warm and cold decisions that share its words, within the execute view's
//! `hot-max-tokens`.

use std::collections::HashSet;

use super::policy::Resolved;
use super::so_far::{self, SoFar};
use super::{Budget, Hot, tiers};
use crate::index::skill::Scope;
use crate::index::symbols::{self, Symbol};
use crate::index::tokenizer;
use crate::sandbox::diff::FileStatus;

/// Lines of a named file or definition taken at most.
pub const MAX_LINES: usize = 60;

/// Whether `word` reads as a file path: it has a `/` or a short alphanumeric extension.
pub fn looks_like_path(word: &str) -> bool {
    word.contains('/')
        || word.rsplit_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && (1..=5).contains(&b.len())
                && b.chars().all(|c| c.is_ascii_alphanumeric())
        })
}

fn looks_like_identifier(word: &str) -> bool {
    word.len() >= 3 && (word.contains('_') || word.chars().skip(1).any(char::is_uppercase))
}

/// The context of a step whose decision reads `text` (instructions, chosen option, expected
/// outputs): the files and definitions it names, then what the plan did `so_far`, then the
/// warm and cold `memory` items that share words with `text` ([`tiers::promote`]), within the
/// policy's hot budget. A file larger than `max-file-size` is left out and counted
/// (`too_large`).
pub fn step_context(
    scopes: &[Scope],
    text: &str,
    policy: &Resolved,
    memory: &[tiers::Item],
    so_far: &SoFar,
) -> Hot {
    let mut b = Budget::for_policy(policy);
    let files = named_files(scopes, text, policy, so_far);
    let mut names: Vec<String> = Vec::new();
    for (_, w) in tokenizer::words(text) {
        if looks_like_identifier(w) && !names.iter().any(|n| n == w) {
            names.push(w.to_string());
        }
    }
    if !files.is_empty() || !names.is_empty() {
        b.push("## Named in this step", None);
        push_files(&mut b, scopes, files, policy);
        let changed = if names.is_empty() {
            Changed::default()
        } else {
            changed_definitions(scopes, so_far, policy)
        };
        for n in names {
            push_definitions(&mut b, scopes, &n, policy, &changed);
        }
    }
    so_far::push(&mut b, so_far);
    tiers::promote(&mut b, memory, text);
    b.finish()
}

/// A named file: its scope, path, where it was read and its text.
struct Named {
    scope: usize,
    path: String,
    now: bool,
    content: String,
}

/// `path` of scope `s` as the sandbox holds it now, else at the plan's base: (text, now).
fn current_text(s: &Scope, path: &str, so_far: &SoFar) -> Option<(String, bool)> {
    match so_far.read(&s.resource, path) {
        Some(now) => now.map(|t| (t, true)),
        None => s.view.read(path).map(|t| (t, false)),
    }
}

/// The paths `text` names that exist in a scope (now, or at the base) and the policy takes.
fn named_files(scopes: &[Scope], text: &str, policy: &Resolved, so_far: &SoFar) -> Vec<Named> {
    let mut files: Vec<Named> = Vec::new();
    for raw in text
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | '`' | '"' | '\'' | '(' | ')'))
    {
        let word = raw.trim_end_matches([':', '.']).trim_start_matches("./");
        if !looks_like_path(word) || !policy.takes_path(word) {
            continue;
        }
        for (i, s) in scopes.iter().enumerate() {
            if files.iter().any(|f| f.scope == i && f.path == word) {
                continue;
            }
            if let Some((content, now)) = current_text(s, word, so_far) {
                files.push(Named {
                    scope: i,
                    path: word.to_string(),
                    now,
                    content,
                });
            }
        }
    }
    files
}

fn too_large(content: &str, policy: &Resolved) -> bool {
    content.len() as u64 > policy.max_file_size
}

/// Each named file whole when it fits, else its first [`MAX_LINES`] lines, else a line
/// saying to read it.
fn push_files(b: &mut Budget, scopes: &[Scope], files: Vec<Named>, policy: &Resolved) {
    for f in files {
        let resource = &scopes[f.scope].resource;
        let (path, content) = (&f.path, &f.content);
        if too_large(content, policy) {
            b.too_large();
            continue;
        }
        let reference = Some(format!("{resource}:{path}"));
        let title = format!(
            "### {resource}:{path} ({})",
            if f.now {
                "as the sandbox holds it now"
            } else {
                "at the plan's base"
            }
        );
        let whole = format!("{title}\n{content}");
        if b.cost(&whole) <= b.left() {
            b.push(&whole, reference);
            continue;
        }
        let head: Vec<&str> = content.lines().take(MAX_LINES).collect();
        let more = content.lines().count().saturating_sub(head.len());
        let mut block = format!("{title}\n{}", head.join("\n"));
        if more > 0 {
            block.push_str(&format!("\n… {more} more lines (read_file for the rest)"));
        }
        if !b.push(&block, reference) {
            b.push(
                &format!("### {resource}:{path} (too long for the context budget; read_file it)"),
                None,
            );
        }
    }
}

/// A file an earlier step changed, as the sandbox holds it now, with its definitions.
struct ChangedFile {
    scope: usize,
    path: String,
    content: String,
    symbols: Vec<Symbol>,
}

/// The files earlier steps changed: parsed as they are now, and every changed path (old and
/// new names, deleted files too), whose definitions at the plan's base no longer stand.
#[derive(Default)]
struct Changed {
    files: Vec<ChangedFile>,
    paths: HashSet<(usize, String)>,
}

fn changed_definitions(scopes: &[Scope], so_far: &SoFar, policy: &Resolved) -> Changed {
    let mut out = Changed::default();
    for (i, s) in scopes.iter().enumerate() {
        let Some(c) = so_far.changes.iter().find(|c| c.resource == s.resource) else {
            continue;
        };
        for f in &c.files {
            out.paths.insert((i, f.path.clone()));
            if let Some(old) = &f.old_path {
                out.paths.insert((i, old.clone()));
            }
            if f.status == FileStatus::Deleted || !policy.takes_path(&f.path) {
                continue;
            }
            let Some(Some(content)) = so_far.read(&s.resource, &f.path) else {
                continue;
            };
            let Some(grammar) = symbols::language_of(&f.path).and_then(symbols::grammar) else {
                continue;
            };
            if too_large(&content, policy) {
                continue;
            }
            let defined = symbols::extract(grammar, &content).symbols;
            out.files.push(ChangedFile {
                scope: i,
                path: f.path.clone(),
                content,
                symbols: defined,
            });
        }
    }
    out
}

/// A definition to show: where it is, its lines' text and whether it is read from the
/// sandbox now.
struct FoundDefinition<'a> {
    path: String,
    kind: String,
    start: u64,
    end: u64,
    content: std::borrow::Cow<'a, str>,
    now: bool,
}

/// The definitions named `n`: in the files earlier steps changed as the sandbox holds them
/// now, then in the other files at the plan's base (from the index).
fn push_definitions(
    b: &mut Budget,
    scopes: &[Scope],
    n: &str,
    policy: &Resolved,
    changed: &Changed,
) {
    for (i, s) in scopes.iter().enumerate() {
        let mut found: Vec<FoundDefinition<'_>> = Vec::new();
        for f in changed.files.iter().filter(|f| f.scope == i) {
            for d in f.symbols.iter().filter(|d| d.name == n) {
                found.push(FoundDefinition {
                    path: f.path.clone(),
                    kind: d.kind.clone(),
                    start: d.start_line,
                    end: d.end_line,
                    content: f.content.as_str().into(),
                    now: true,
                });
            }
        }
        let at_base = s.view.find_definition(n, 2).unwrap_or_default();
        for d in at_base
            .iter()
            .filter(|d| d.symbol.as_deref() == Some(n))
            .filter(|d| !changed.paths.contains(&(i, d.path.clone())))
        {
            let Some(content) = s.view.read(&d.path) else {
                continue;
            };
            if too_large(&content, policy) {
                b.too_large();
                continue;
            }
            found.push(FoundDefinition {
                path: d.path.clone(),
                kind: d.symbol_kind.clone().unwrap_or_else(|| "definition".into()),
                start: d.start_line,
                end: d.end_line,
                content: content.into(),
                now: false,
            });
        }
        for d in found {
            let lines: Vec<String> = d
                .content
                .lines()
                .enumerate()
                .skip(d.start.saturating_sub(1) as usize)
                .take((d.end + 1).saturating_sub(d.start).min(MAX_LINES as u64) as usize)
                .map(|(k, l)| format!("{}: {l}", k + 1))
                .collect();
            let block = format!(
                "### {} {n} in {}:{} ({})\n{}",
                d.kind,
                s.resource,
                d.path,
                if d.now {
                    "as the sandbox holds it now"
                } else {
                    "at the plan's base"
                },
                lines.join("\n")
            );
            b.push(
                &block,
                Some(format!("{}:{}:{}", s.resource, d.path, d.start)),
            );
        }
    }
}
