//! Listing and searching (spec section 18 `search_operations`, section 30 `list_files`):
//! `list_files` (glob, with globset) and `search_files` (regex over contents with the ripgrep
//! library crates). Both respect `.gitignore` / `.ignore` files, never follow symbolic links,
//! skip deny-listed paths and open files through the confined file layer.

use std::path::Path;

use globset::GlobBuilder;
use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Builtin, Capability, Tool, ToolContext, ToolError, ToolGroup};
use crate::sandbox::confined::{EntryKind, RelPath};

/// Longest line text returned by `search_files`, in characters.
pub const MAX_LINE_CHARS: usize = 500;

/// Files under `start` (relative), respecting ignore files unless `include_ignored`, as
/// checked relative paths in walk order (sorted by name).
fn walk(
    ctx: &ToolContext<'_>,
    start: &RelPath,
    include_ignored: bool,
) -> Result<Vec<RelPath>, ToolError> {
    match ctx.fs.meta(start)? {
        Some(m) if m.kind == EntryKind::Directory => {}
        Some(_) => {
            return Err(ToolError::Failed(format!(
                "{} is not a directory",
                start.display()
            )));
        }
        None => {
            return Err(ToolError::NotFound(format!(
                "{} does not exist",
                start.display()
            )));
        }
    }
    let root = ctx.fs.root_path().to_path_buf();
    let walker = ignore::WalkBuilder::new(root.join(start.as_str()))
        .hidden(false)
        .parents(false)
        .ignore(!include_ignored)
        .git_ignore(!include_ignored)
        .git_global(false)
        .git_exclude(false)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| !e.file_name().eq_ignore_ascii_case(".git"))
        .build();
    let mut out = Vec::new();
    for entry in walker.flatten() {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(&root) else {
            continue;
        };
        let Some(rel) = rel.to_str() else { continue };
        if let Ok(checked) = ctx.fs.check(rel, false) {
            out.push(checked);
        }
    }
    Ok(out)
}

fn glob(field: &str, pattern: &str) -> Result<globset::GlobMatcher, ToolError> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::invalid(field, e.to_string()))?
        .compile_matcher())
}

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFiles {
    /// Glob over paths relative to the resource root (`**/*.rs`, `src/*.toml`).
    pub pattern: String,
    /// Directory to search under (default: the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Include files that ignore files exclude.
    #[serde(default)]
    pub include_ignored: bool,
    /// Most paths returned (default 1000).
    #[serde(default = "thousand")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_results: usize,
}

fn dot() -> String {
    ".".into()
}
fn thousand() -> usize {
    1000
}
fn two_hundred() -> usize {
    200
}

fn list_files(ctx: &mut ToolContext<'_>, a: ListFiles) -> Result<Value, ToolError> {
    let matcher = glob("pattern", &a.pattern)?;
    let start = ctx.fs.check(&a.path, true)?;
    let mut files = Vec::new();
    let mut truncated = false;
    for rel in walk(ctx, &start, a.include_ignored)? {
        if matcher.is_match(Path::new(rel.as_str())) {
            if files.len() == a.max_results {
                truncated = true;
                break;
            }
            files.push(rel.as_str().to_string());
        }
    }
    Ok(json!({"pattern": a.pattern, "files": files, "count": files.len(), "truncated": truncated}))
}

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchFiles {
    /// Regular expression searched for in file contents (Rust regex syntax).
    pub content_pattern: String,
    /// Only files whose path matches this glob (`**/*.rs`).
    #[serde(default)]
    pub pattern: Option<String>,
    /// Directory to search under (default: the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Match case-insensitively.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Most matches returned (default 200).
    #[serde(default = "two_hundred")]
    #[schemars(range(min = 1, max = 10000))]
    pub max_results: usize,
}

fn search_files(ctx: &mut ToolContext<'_>, a: SearchFiles) -> Result<Value, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(a.case_insensitive)
        .build(&a.content_pattern)
        .map_err(|e| ToolError::invalid("content_pattern", e.to_string()))?;
    let filter = a
        .pattern
        .as_deref()
        .map(|p| glob("pattern", p))
        .transpose()?;
    let start = ctx.fs.check(&a.path, true)?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        .build();
    let mut matches = Vec::new();
    let mut files_searched = 0;
    let mut truncated = false;
    'files: for rel in walk(ctx, &start, false)? {
        if let Some(f) = &filter
            && !f.is_match(Path::new(rel.as_str()))
        {
            continue;
        }
        // Opened through the confined layer: a file swapped for a link meanwhile is refused.
        let Ok(file) = ctx.fs.open_file(&rel) else {
            continue;
        };
        files_searched += 1;
        let mut found = Vec::new();
        let limit = a.max_results - matches.len();
        let _ = searcher.search_file(
            &matcher,
            &file,
            Lossy(|line_number, line| {
                let text: String = line
                    .trim_end_matches(['\n', '\r'])
                    .chars()
                    .take(MAX_LINE_CHARS)
                    .collect();
                found.push(json!({"path": rel.as_str(), "line_number": line_number, "line": text}));
                Ok(found.len() < limit + 1)
            }),
        );
        for m in found {
            if matches.len() == a.max_results {
                truncated = true;
                break 'files;
            }
            matches.push(m);
        }
    }
    Ok(json!({
        "content_pattern": a.content_pattern, "matches": matches, "count": matches.len(),
        "files_searched": files_searched, "truncated": truncated,
    }))
}

/// The search tools.
pub fn tools() -> Vec<Box<dyn Tool>> {
    use ToolGroup::SearchOperations as S;
    vec![
        Box::new(Builtin::<ListFiles>::new(
            "list_files",
            "List files whose paths match a glob (respects .gitignore)",
            S,
            Capability::read_only,
            &["path"],
            list_files,
        )),
        Box::new(Builtin::<SearchFiles>::new(
            "search_files",
            "Search file contents with a regular expression (respects .gitignore)",
            S,
            Capability::read_only,
            &["path"],
            search_files,
        )),
    ]
}
