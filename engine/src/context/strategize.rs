//! The strategist's view of the project (spec sections 10 and 25): every target resource's
//! index opened at the plan's recorded base (the base commit of a git checkout, so the
//! strategy is reproducible; a directory as it is), the read-only tools over it
//! (`read_file`, `list_files` and the `code_intelligence` skill) and the initial context put
//! in its prompt: the repository overview, what `search_code` finds for the task's words and
//! the warm and cold decisions that share them, within `hot-max-tokens`.

use globset::GlobBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::policy::Resolved;
use super::{Budget, Hot, tiers};
use crate::domain::Id;
use crate::domain::messages::ToolSpec;
use crate::domain::tool_host::ToolOutcome;
use crate::index::skill::{self, Scope};
use crate::index::view::{FileHit, SearchQuery};
use crate::index::{self, View, overview};
use crate::paths::Paths;
use crate::registry::resources;
use crate::store::Store;
use crate::store::lifecycle_run::BaseKind;

/// Longest `read_file` answer, in bytes.
pub const READ_LIMIT: usize = 256 * 1024;

/// Opens the plan's resources' indexes at their bases (brought up to date first). Resources
/// the policy leaves out are skipped; one that cannot be indexed is reported, not fatal.
///
/// # Errors
/// [`crate::store::StoreError`].
pub fn scopes(
    paths: &Paths,
    store: &Store,
    plan_id: &Id,
    policy: &Resolved,
) -> Result<(Vec<Scope>, Vec<String>), crate::store::StoreError> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let semantic = index::embed::setting(paths);
    for base in store.plan_bases(plan_id)? {
        if !policy.takes_resource(&base.resource_name) {
            continue;
        }
        let Ok(resource) = resources::find(store, &base.resource_name) else {
            problems.push(format!(
                "{}: the resource is no longer registered",
                base.resource_name
            ));
            continue;
        };
        let at = match base.kind {
            BaseKind::GitCheckout => base.base_commit.as_deref(),
            BaseKind::Directory => None,
        };
        match index::open(paths, &resource, at) {
            Ok(view) => out.push(Scope {
                resource: base.resource_name.clone(),
                alias: base.alias.clone(),
                view,
                semantic: semantic.clone(),
            }),
            Err(e) => problems.push(format!("{}: {e}", base.resource_name)),
        }
    }
    Ok((out, problems))
}

/// The strategist's initial context: each resource's overview, then the hits of
/// `search_code` for `task`, then the warm and cold `memory` items that share words with
/// `task` ([`tiers::promote`]), all within the policy's hot budget (paths the policy
/// excludes are left out).
pub fn initial_context(
    scopes: &[Scope],
    task: &str,
    policy: &Resolved,
    memory: &[tiers::Item],
) -> Hot {
    let mut b = Budget::for_policy(policy);
    if !scopes.is_empty() {
        overviews_and_hits(&mut b, scopes, task, policy);
    }
    tiers::promote(&mut b, memory, task);
    b.finish()
}

/// Share of `hot-max-tokens` the files matching the task may take (the rest is left to the
/// overview and promoted decisions).
pub const CODE_SHARE: u64 = 4;
/// A file scoring below this fraction of the best file is not shown.
pub const MIN_RELATIVE_SCORE: f32 = 0.2;
/// The best files whose test files are shown after them.
pub const TESTS_FOR_TOP: usize = 5;
/// Most files named in the line saying what was left out for budget.
const LEFT_OUT_NAMED: usize = 10;
/// Longest snippet line in hot context, in characters.
const HOT_LINE_CHARS: usize = 120;

fn short(line: &str) -> String {
    let t = line.trim();
    if t.chars().count() <= HOT_LINE_CHARS {
        return t.to_string();
    }
    let mut s: String = t.chars().take(HOT_LINE_CHARS).collect();
    s.push('…');
    s
}

/// The test files that go with `path` (`x.go`: `x_test.go`; `pkg/x.py`: `pkg/test_x.py`,
/// `tests/test_x.py`; `x.ts`: `x.test.ts`, `x.spec.ts`), those among `files`.
fn companions(path: &str, files: &std::collections::HashSet<String>) -> Vec<String> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return Vec::new();
    };
    let stem = stem.trim_start_matches('_');
    let join = |n: String| {
        if dir.is_empty() {
            n
        } else {
            format!("{dir}/{n}")
        }
    };
    let mut out = vec![
        join(format!("{stem}_test.{ext}")),
        join(format!("test_{stem}.{ext}")),
        join(format!("{stem}.test.{ext}")),
        join(format!("{stem}.spec.{ext}")),
        format!("tests/test_{stem}.{ext}"),
        format!("test/test_{stem}.{ext}"),
    ];
    out.retain(|c| c != path && files.contains(c));
    out
}

/// The files to show: each of the best [`TESTS_FOR_TOP`] files followed by its test files
/// (moved up when ranked lower, added when not matched at all), where a change to it
/// usually goes too.
fn with_tests(
    scopes: &[Scope],
    files: Vec<(String, FileHit)>,
    policy: &Resolved,
) -> Vec<(String, FileHit, Option<String>)> {
    let mut all = std::collections::HashMap::new();
    for s in scopes {
        all.insert(
            s.resource.clone(),
            s.view
                .files()
                .into_iter()
                .collect::<std::collections::HashSet<_>>(),
        );
    }
    let mut out: Vec<(String, FileHit, Option<String>)> = Vec::new();
    let mut rest: Vec<Option<(String, FileHit)>> = files.into_iter().map(Some).collect();
    for i in 0..rest.len() {
        let Some((resource, f)) = rest[i].take() else {
            continue;
        };
        let tests = if i < TESTS_FOR_TOP {
            all.get(&resource)
                .map(|set| companions(&f.path, set))
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        let path = f.path.clone();
        out.push((resource.clone(), f, None));
        for t in tests {
            if !policy.takes_path(&t) || out.iter().any(|(r, g, _)| *r == resource && g.path == t) {
                continue;
            }
            let ranked = rest.iter_mut().find(|x| {
                x.as_ref()
                    .is_some_and(|(r, g)| *r == resource && g.path == t)
            });
            match ranked.and_then(Option::take) {
                Some((r, g)) => out.push((r, g, None)),
                None => out.push((
                    resource.clone(),
                    FileHit {
                        path: t,
                        language: None,
                        score: 0.0,
                        terms: Vec::new(),
                        lines: 0,
                        definitions: Vec::new(),
                        more_definitions: 0,
                        snippets: Vec::new(),
                    },
                    Some(path.clone()),
                )),
            }
        }
    }
    out
}

/// The entry of a test file shown for the file it tests.
fn test_entry(resource: &str, f: &FileHit, of: &str) -> String {
    format!("- {resource}:{} (tests of {of})", f.path)
}

/// One file's entry: its path, score and matched terms, its best definitions with a
/// matching line each, then its other matching lines.
fn file_entry(resource: &str, f: &FileHit) -> String {
    let mut block = format!(
        "- {resource}:{} (score {:.1}; terms: {})",
        f.path,
        f.score,
        f.terms.join(", ")
    );
    for d in &f.definitions {
        block.push_str(&format!(
            "\n    {} {} (lines {}-{})",
            d.kind,
            d.symbol.as_deref().unwrap_or("?"),
            d.start_line,
            d.end_line
        ));
        for l in d.snippets.iter().take(1) {
            block.push_str(&format!("\n      {}: {}", l.line, short(&l.text)));
        }
    }
    if f.more_definitions > 0 {
        block.push_str(&format!(
            "\n    ({} more matching definitions)",
            f.more_definitions
        ));
    }
    for l in f.snippets.iter().take(2) {
        block.push_str(&format!("\n    {}: {}", l.line, short(&l.text)));
    }
    block
}

fn overviews_and_hits(b: &mut Budget, scopes: &[Scope], task: &str, policy: &Resolved) {
    b.push("## Project overview (at the plan's base)", None);
    for s in scopes {
        let o = overview::overview(&s.view, 2, 12);
        let reference = format!("overview:{}", s.resource);
        if b.push_lines(&overview::render(&o), Some(reference.clone())) {
            b.why(reference, "hot", 0.0, Vec::new());
        }
    }
    let q = SearchQuery {
        query: task.to_string(),
        limit: policy.query_limit as usize,
        ..Default::default()
    };
    let mut files = Vec::new();
    for s in scopes {
        if let Ok(found) = s.view.search_files(&q) {
            files.extend(found.into_iter().map(|f| (s.resource.clone(), f)));
        }
    }
    files.retain(|(_, f)| policy.takes_path(&f.path));
    files.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
    let best = files.first().map_or(0.0, |f| f.1.score);
    files.retain(|(_, f)| f.score >= best * MIN_RELATIVE_SCORE);
    files.truncate(policy.query_limit as usize);
    if files.is_empty() {
        return;
    }
    let files = with_tests(scopes, files, policy);
    let heading = format!(
        "## Code that matches the task (search_code; terms: {})",
        View::terms(task).join(", ")
    );
    if !b.push(&heading, None) {
        return;
    }
    // The files share a part of the budget, so what follows keeps room.
    let share = (policy.hot_max_tokens / CODE_SHARE).min(b.left());
    let floor = b.left().saturating_sub(share);
    let mut left_out = Vec::new();
    for (resource, f, tests_of) in &files {
        let entry = match tests_of {
            Some(of) => test_entry(resource, f, of),
            None => file_entry(resource, f),
        };
        let cost = b.cost(&entry);
        let reference = format!("{resource}:{}", f.path);
        if b.left().saturating_sub(cost) < floor || !b.push(&entry, None) {
            left_out.push((reference, f, cost));
            continue;
        }
        b.reference(reference.clone());
        for d in &f.definitions {
            b.reference(format!("{resource}:{}:{}", f.path, d.start_line));
        }
        b.why(reference, "hot", f64::from(f.score), f.terms.clone());
    }
    if left_out.is_empty() {
        return;
    }
    let mut names: Vec<String> = left_out
        .iter()
        .take(LEFT_OUT_NAMED)
        .map(|(r, _, _)| r.clone())
        .collect();
    if left_out.len() > LEFT_OUT_NAMED {
        names.push("…".into());
    }
    b.push(
        &format!(
            "(left out for budget, {} more matching files: {})",
            left_out.len(),
            names.join(", ")
        ),
        None,
    );
    for (reference, f, cost) in left_out {
        b.left_out(reference, "hot", f64::from(f.score), cost);
    }
}

fn default_max() -> usize {
    1000
}

/// Arguments of the strategist's `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// File path relative to the resource root (or `path://RESOURCE/...`).
    pub path: String,
    /// First line to return (1-based).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Number of lines to return.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub line_count: Option<u64>,
}

/// Arguments of the strategist's `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFiles {
    /// Glob over paths relative to the resource root (`**/*.rs`).
    pub pattern: String,
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
    /// Most paths returned (default 1000).
    #[serde(default = "default_max")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_results: usize,
}

/// Read-only tools over the plan's bases: `read_file`, `list_files` and `code_intelligence`.
pub struct BaseTools {
    scopes: Vec<Scope>,
}

impl BaseTools {
    /// Tools over these scopes.
    pub fn new(scopes: Vec<Scope>) -> Self {
        Self { scopes }
    }

    /// The scopes.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    /// The tools offered.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut out = vec![
            ToolSpec {
                name: "read_file".into(),
                description:
                    "Read a file of the project as it was at the plan's base (line range optional)"
                        .into(),
                input_schema: schemars::schema_for!(ReadFile).to_value(),
            },
            ToolSpec {
                name: "list_files".into(),
                description: "List the project's files at the plan's base whose paths match a glob"
                    .into(),
                input_schema: schemars::schema_for!(ListFiles).to_value(),
            },
        ];
        out.extend(
            skill::specs()
                .into_iter()
                .map(|(name, description, input_schema)| ToolSpec {
                    name: name.into(),
                    description: description.into(),
                    input_schema,
                }),
        );
        out
    }

    /// Whether `name` is one of these tools.
    pub fn offers(&self, name: &str) -> bool {
        name == "read_file" || name == "list_files" || skill::TOOLS.contains(&name)
    }

    /// Runs a tool (synchronously).
    pub fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let result = match name {
            "read_file" => self.read_file(args),
            "list_files" => self.list_files(args),
            _ => skill::call(&self.scopes, name, args).map_err(|e| e.to_string()),
        };
        match result {
            Ok(v) => ToolOutcome::ok(v.to_string()),
            Err(e) => ToolOutcome::error(e),
        }
    }

    fn scope_of<'a>(&'a self, path: &'a str) -> Result<(&'a Scope, &'a str), String> {
        if let Some(rest) = path.strip_prefix("path://") {
            let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
            let s = self
                .scopes
                .iter()
                .find(|s| {
                    s.resource == name
                        || s.alias.as_deref() == Some(name)
                        || s.resource.rsplit('/').next() == Some(name)
                })
                .ok_or_else(|| {
                    format!("invalid argument `path`: the plan has no resource `{name}`")
                })?;
            return Ok((s, tail));
        }
        match self.scopes.as_slice() {
            [only] => Ok((only, path)),
            [] => Err("the plan has no readable resources".into()),
            _ => Err("invalid argument `path`: the plan has several resources; write path://RESOURCE/PATH".into()),
        }
    }

    fn read_file(&self, args: Value) -> Result<Value, String> {
        let a: ReadFile =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let (s, rel) = self.scope_of(&a.path)?;
        let rel = rel.trim_start_matches("./");
        let text = s.view.read(rel).ok_or_else(|| {
            format!(
                "NOT_FOUND: {rel} does not exist in {} at the plan's base (or is not text)",
                s.resource
            )
        })?;
        let start = a.start_line.unwrap_or(1).max(1) as usize;
        let count = a.line_count.map_or(usize::MAX, |c| c as usize);
        let mut out = String::new();
        let mut truncated = false;
        for line in text.split_inclusive('\n').skip(start - 1).take(count) {
            if out.len() + line.len() > READ_LIMIT {
                truncated = true;
                break;
            }
            out.push_str(line);
        }
        Ok(json!({
            "resource": s.resource, "path": rel, "commit": s.view.at_commit(), "size": text.len(),
            "total_lines": text.lines().count(), "start_line": start, "truncated": truncated, "content": out,
        }))
    }

    fn list_files(&self, args: Value) -> Result<Value, String> {
        let a: ListFiles =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let glob = GlobBuilder::new(&a.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid argument `pattern`: {e}"))?
            .compile_matcher();
        let mut files = Vec::new();
        let mut truncated = false;
        for s in &self.scopes {
            if let Some(r) = &a.resource
                && s.resource != *r
                && s.alias.as_deref() != Some(r)
            {
                continue;
            }
            for f in s.view.files() {
                if glob.is_match(&f) {
                    if files.len() == a.max_results {
                        truncated = true;
                        break;
                    }
                    files.push(if self.scopes.len() > 1 {
                        format!("path://{}/{f}", s.resource)
                    } else {
                        f
                    });
                }
            }
        }
        Ok(
            json!({"pattern": a.pattern, "files": files, "count": files.len(), "truncated": truncated}),
        )
    }
}
