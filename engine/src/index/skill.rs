//! The built-in skill `code_intelligence` (spec section 24 "Skill: code-intelligence"): all
//! read-only, over one or more resources' indexes (a [`Scope`] each):
//!
//! | tool | answers |
//! |---|---|
//! | `search_code` | ranked files and definitions for words, identifiers or paths; path and language filters; line-numbered snippets |
//! | `find_definition` | where a name is defined (kind, span, first lines) |
//! | `find_references` | lines that use a name as a whole word |
//! | `analyze_dependencies` | a file's direct, transitive and circular imports, and who imports it |
//! | `suggest_refactoring_targets` | complex and long definitions, large files, TODO/FIXME/HACK |
//! | `repo_overview` | tree with sizes, languages, entry points, README opening |
//! | `search_code_semantically` | definitions ranked by cosine similarity of their embeddings to the query (`[index] embeddings`), naming the model; without it, text search, and the result says so |
//!
//! The same functions serve the strategist's tool host (at the plan's base commits) and the
//! built-in tools the tool runner runs in Execute and in `tool:` steps.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::embed::{self, Setting};
use super::view::{SearchQuery, View};
use super::{IndexError, overview, structure};

/// The tool names of the skill, in the order `skill show` lists them.
pub const TOOLS: [&str; 7] = [
    "search_code",
    "find_definition",
    "find_references",
    "analyze_dependencies",
    "suggest_refactoring_targets",
    "repo_overview",
    "search_code_semantically",
];

/// One resource's index as the tools read it.
pub struct Scope {
    /// The resource's name.
    pub resource: String,
    /// Its alias in the project, if any.
    pub alias: Option<String>,
    /// The view (as the work tree is, or at a base commit).
    pub view: View,
    /// The embeddings setting `search_code_semantically` uses ([`embed::setting`]).
    pub semantic: Setting,
}

fn default_limit() -> usize {
    10
}

/// Arguments of `search_code`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchCode {
    /// Words, identifiers (`parseConfig`, `parse_config`) or path parts to look for.
    pub query: String,
    /// Only paths matching this glob (`src/**/*.rs`).
    #[serde(default)]
    pub path: Option<String>,
    /// Only this language (`rust`, `python`, `javascript`, `typescript`, `go`, ...).
    #[serde(default)]
    pub language: Option<String>,
    /// Only this resource (name or alias); default: every resource of the plan.
    #[serde(default)]
    pub resource: Option<String>,
    /// Most files (default 10); each comes with its best definitions and matching lines.
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: usize,
}

/// Arguments of `find_definition` and `find_references`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ByName {
    /// The name (`verify_token`, `AuthManager`).
    pub name: String,
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
    /// Most results (default 10 definitions, 50 references).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub limit: Option<usize>,
}

/// Arguments of `analyze_dependencies`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnalyzeDependencies {
    /// The file, relative to the resource root (`src/auth.py`).
    pub module_path: String,
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
}

/// Arguments of `suggest_refactoring_targets`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SuggestRefactoring {
    /// A path prefix to look under (`src/`); empty or `.` for everything.
    #[serde(default)]
    pub scope: String,
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
    /// Most findings per kind (default 10).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: usize,
}

/// Arguments of `repo_overview`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RepoOverview {
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
    /// Directory levels in the tree (default 2).
    #[serde(default)]
    #[schemars(range(min = 1, max = 6))]
    pub depth: Option<usize>,
}

/// Arguments of `search_code_semantically`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchSemantically {
    /// What the code does, in words.
    pub query: String,
    /// `all` or a resource (name or alias).
    #[serde(default)]
    pub scope: Option<String>,
    /// Most hits (default 10).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 200))]
    pub limit: usize,
}

/// The description and input schema of each tool.
pub fn specs() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "search_code",
            "Ranked search of the project's code index for words, identifiers or paths: the best files, each with its matching definitions and line-numbered snippets (filters: path glob, language)",
            schemars::schema_for!(SearchCode).to_value(),
        ),
        (
            "find_definition",
            "Where a name is defined: kind, file, line span and first lines",
            schemars::schema_for!(ByName).to_value(),
        ),
        (
            "find_references",
            "Lines that use a name as a whole word, across the project",
            schemars::schema_for!(ByName).to_value(),
        ),
        (
            "analyze_dependencies",
            "A file's imports: direct, transitive (with distance) and circular, plus the files that import it",
            schemars::schema_for!(AnalyzeDependencies).to_value(),
        ),
        (
            "suggest_refactoring_targets",
            "Refactoring candidates: the most complex and longest definitions, large files, TODO/FIXME/HACK markers",
            schemars::schema_for!(SuggestRefactoring).to_value(),
        ),
        (
            "repo_overview",
            "The project at a glance: directory tree with sizes, languages, entry points and the README's opening",
            schemars::schema_for!(RepoOverview).to_value(),
        ),
        (
            "search_code_semantically",
            "Search by meaning; without a configured embeddings provider it falls back to text search and says so",
            schemars::schema_for!(SearchSemantically).to_value(),
        ),
    ]
}

/// Why a call failed, for the actor.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// Bad arguments.
    #[error("invalid argument `{0}`: {1}")]
    Invalid(String, String),
    /// The index failed.
    #[error(transparent)]
    Index(#[from] IndexError),
}

fn parse<A: serde::de::DeserializeOwned>(args: Value) -> Result<A, CallError> {
    serde_json::from_value(args)
        .map_err(|e| CallError::Invalid("(arguments)".into(), e.to_string()))
}

fn pick<'a>(scopes: &'a [Scope], resource: Option<&str>) -> Result<Vec<&'a Scope>, CallError> {
    match resource.filter(|r| !r.is_empty() && *r != "all") {
        None => Ok(scopes.iter().collect()),
        Some(r) => {
            let found: Vec<&Scope> = scopes
                .iter()
                .filter(|s| {
                    s.resource == r
                        || s.alias.as_deref() == Some(r)
                        || s.resource.rsplit('/').next() == Some(r)
                })
                .collect();
            if found.is_empty() {
                let names: Vec<&str> = scopes.iter().map(|s| s.resource.as_str()).collect();
                return Err(CallError::Invalid(
                    "resource".into(),
                    format!(
                        "the plan has no indexed resource `{r}` (resources: {})",
                        names.join(", ")
                    ),
                ));
            }
            Ok(found)
        }
    }
}

fn one<'a>(scopes: &'a [Scope], resource: Option<&str>) -> Result<&'a Scope, CallError> {
    let found = pick(scopes, resource)?;
    match found.as_slice() {
        [only] => Ok(only),
        [] => Err(CallError::Invalid(
            "resource".into(),
            "the plan has no indexed resources".into(),
        )),
        several => Err(CallError::Invalid(
            "resource".into(),
            format!(
                "the plan has several resources ({}); name one",
                several
                    .iter()
                    .map(|s| s.resource.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `search_code` over every scope: files merged by score, at most `limit`, each with its
/// best definitions and matching lines.
///
/// # Errors
/// [`CallError`].
pub fn search_code(scopes: &[Scope], a: &SearchCode) -> Result<Value, CallError> {
    let q = SearchQuery {
        query: a.query.clone(),
        path_glob: a.path.clone(),
        language: a.language.clone(),
        limit: a.limit,
    };
    let mut files = Vec::new();
    for s in pick(scopes, a.resource.as_deref())? {
        for f in s.view.search_files(&q).map_err(|e| match e {
            IndexError::InvalidQuery(m) => CallError::Invalid("query".into(), m),
            e => e.into(),
        })? {
            files.push((s.resource.clone(), f));
        }
    }
    files.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
    files.truncate(a.limit);
    Ok(json!({
        "query": a.query,
        "terms": View::terms(&a.query),
        "count": files.len(),
        "files": files.iter().map(|(r, f)| { let mut v = serde_json::to_value(f).unwrap_or_default(); v["resource"] = json!(r); v }).collect::<Vec<_>>(),
    }))
}

fn run(scopes: &[Scope], name: &str, args: Value) -> Result<Value, CallError> {
    match name {
        "search_code" => search_code(scopes, &parse::<SearchCode>(args)?),
        "find_definition" | "find_references" => {
            let a: ByName = parse(args)?;
            let mut out = Vec::new();
            let mut truncated = false;
            for s in pick(scopes, a.resource.as_deref())? {
                if name == "find_definition" {
                    for h in s.view.find_definition(&a.name, a.limit.unwrap_or(10))? {
                        let mut v = serde_json::to_value(&h).unwrap_or_default();
                        v["resource"] = json!(s.resource);
                        out.push(v);
                    }
                } else {
                    let (refs, t) = s
                        .view
                        .find_references(&a.name, a.limit.unwrap_or(50))
                        .map_err(|e| match e {
                            IndexError::InvalidQuery(m) => CallError::Invalid("name".into(), m),
                            e => e.into(),
                        })?;
                    truncated |= t;
                    out.extend(refs.into_iter().map(|r| json!({"resource": s.resource, "path": r.path, "line": r.line, "text": r.text})));
                }
            }
            let key = if name == "find_definition" {
                "definitions"
            } else {
                "references"
            };
            Ok(json!({"name": a.name, "count": out.len(), key: out, "truncated": truncated}))
        }
        "analyze_dependencies" => {
            let a: AnalyzeDependencies = parse(args)?;
            let s = one(scopes, a.resource.as_deref())?;
            let conn = structure::open(s.view.dir())?;
            let path = a.module_path.trim_start_matches("./");
            let d = structure::dependencies(&conn, path).map_err(|e| match e {
                IndexError::NotIndexed(p) => CallError::Invalid(
                    "module_path".into(),
                    format!("{p} is not an indexed file of {}", s.resource),
                ),
                e => e.into(),
            })?;
            Ok(json!({
                "resource": s.resource, "module_path": d.path,
                "direct_deps": d.direct, "external_deps": d.external,
                "transitive_deps": d.transitive.iter().map(|(p, n)| json!({"path": p, "distance": n})).collect::<Vec<_>>(),
                "imported_by": d.imported_by, "circular_deps": d.circular,
                "note": if s.view.at_commit().is_some() { "structure is read from the index as kept current, not from the base commit" } else { "" },
            }))
        }
        "suggest_refactoring_targets" => {
            let a: SuggestRefactoring = parse(args)?;
            let scope = if a.scope == "." { "" } else { a.scope.as_str() };
            let mut out = Vec::new();
            for s in pick(scopes, a.resource.as_deref())? {
                let conn = structure::open(s.view.dir())?;
                let read = |p: &str| s.view.read_indexed(p);
                for t in structure::refactoring_targets(&conn, scope, a.limit, &read)? {
                    let mut v = serde_json::to_value(&t).unwrap_or_default();
                    v["resource"] = json!(s.resource);
                    out.push(v);
                }
            }
            let of = |r: &str| {
                out.iter()
                    .filter(|v| v["reason"] == r)
                    .cloned()
                    .collect::<Vec<_>>()
            };
            let debt: Vec<Value> = out
                .iter()
                .filter(|v| matches!(v["reason"].as_str(), Some("TODO" | "FIXME" | "HACK")))
                .cloned()
                .collect();
            Ok(json!({
                "scope": a.scope,
                "high_priority": of("complexity"),
                "code_smells": of("long_definition").into_iter().chain(of("large_file")).collect::<Vec<_>>(),
                "technical_debt": debt,
            }))
        }
        "repo_overview" => {
            let a: RepoOverview = parse(args)?;
            let mut out = Vec::new();
            for s in pick(scopes, a.resource.as_deref())? {
                out.push(
                    serde_json::to_value(overview::overview(&s.view, a.depth.unwrap_or(2), 40))
                        .unwrap_or_default(),
                );
            }
            Ok(json!({"resources": out}))
        }
        "search_code_semantically" => semantic(scopes, parse::<SearchSemantically>(args)?),
        other => Err(CallError::Invalid(
            "(tool)".into(),
            format!("`{other}` is not a code_intelligence tool"),
        )),
    }
}

/// `search_code_semantically`: with embeddings configured, the chunks closest to the query
/// across the scopes (each brought up to date first), with their opening lines; without,
/// `search_code`'s hits marked `text_fallback`.
fn semantic(scopes: &[Scope], a: SearchSemantically) -> Result<Value, CallError> {
    let picked = pick(scopes, a.scope.as_deref())?;
    let embedder = match picked.first().map(|s| &s.semantic) {
        Some(Setting::On(e)) => e.clone(),
        Some(Setting::Broken(m)) => {
            return Err(CallError::Index(IndexError::Embeddings(m.clone())));
        }
        Some(Setting::Off) | None => {
            let mut v = search_code(
                scopes,
                &SearchCode {
                    query: a.query,
                    path: None,
                    language: None,
                    resource: a.scope,
                    limit: a.limit,
                },
            )?;
            v["mode"] = json!("text_fallback");
            v["note"] = json!(
                "no embeddings model is configured (`[index] embeddings = \"PROVIDER/MODEL\"` in config.toml); these are text search results"
            );
            return Ok(v);
        }
    };
    let query = embedder
        .embed(std::slice::from_ref(&a.query))?
        .into_iter()
        .next()
        .unwrap_or_default();
    let mut hits = Vec::new();
    let mut at_base = false;
    for s in picked {
        embed::sync(s.view.dir(), &embedder)?;
        at_base |= s.view.at_commit().is_some();
        for h in embed::nearest(s.view.dir(), &query, a.limit)? {
            hits.push((s, h));
        }
    }
    hits.sort_by(|x, y| y.1.score.total_cmp(&x.1.score));
    hits.truncate(a.limit);
    let out: Vec<Value> = hits
        .iter()
        .map(|(s, h)| {
            let mut v = serde_json::to_value(h).unwrap_or_default();
            v["resource"] = json!(s.resource);
            if let Some(text) = s.view.read(&h.path) {
                let from = h.start_line.saturating_sub(1) as usize;
                let n = (h.end_line.saturating_sub(h.start_line) + 1).min(6) as usize;
                v["snippet"] = json!(
                    text.lines()
                        .skip(from)
                        .take(n)
                        .collect::<Vec<_>>()
                        .join("\n")
                );
            }
            v
        })
        .collect();
    let mut v = json!({
        "query": a.query,
        "mode": "semantic",
        "model": embedder.name(),
        "count": out.len(),
        "hits": out,
    });
    if at_base {
        v["note"] = json!(
            "ranked over the index as kept current with the work tree; snippets are read at the plan's base"
        );
    }
    Ok(v)
}

/// Runs one of [`TOOLS`]; `Err` is the message for the actor.
pub fn call(scopes: &[Scope], name: &str, args: Value) -> Result<Value, CallError> {
    run(scopes, name, args)
}
