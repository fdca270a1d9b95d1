//! The code index (spec section 24): one index per resource under the data directory, built
//! eagerly when a resource is added or linked, kept current before anything reads it, and
//! removed with the resource.
//!
//! - [`walk`]: which files (`.gitignore` semantics, skip policy and counts).
//! - [`data_files`]: which files are test data (fixtures, snapshots) rather than code.
//! - [`tokenizer`]: the code tokenizer (camelCase, snake_case, paths).
//! - [`symbols`]: tree-sitter structure (definitions, imports, calls, docstrings, complexity).
//! - [`store`]: the on-disk layout, tantivy schema and manifest.
//! - [`structure`]: the SQLite structure store, transitive imports and import cycles.
//! - [`build`]: full builds and incremental updates.
//! - [`embed`]: symbol vectors for semantic search (`[index] embeddings`).
//! - [`view`]: search, definitions and references, as the work tree is or at a base commit.
//! - [`overview`]: the `repo_overview` answer.
//! - [`skill`]: the `code_intelligence` tools.
//! - [`watch`], [`watch_filter`]: following a work tree's changes while a face runs.
//!
//! The functions here are the operations the faces use, with typed results.

pub mod build;
pub mod data_files;
pub mod embed;
pub mod history;
pub mod overview;
pub mod skill;
pub mod store;
pub mod structure;
pub mod symbols;
pub mod synthetic;
pub mod tokenizer;
pub mod view;
pub mod walk;
pub mod watch;
pub mod watch_filter;

use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::Serialize;

pub use crate::domain::index::IndexConfig;
use crate::domain::resource::Resource;
use crate::paths::Paths;
pub use build::{BuildReport, UpdateReport};
pub use store::Source;
pub use view::View;
pub use walk::{Policy, Skipped};

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    /// tantivy failed.
    #[error("text index: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    /// The structure database failed.
    #[error("structure index: {0}")]
    Structure(#[from] rusqlite::Error),
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
    /// The git checkout could not be read.
    #[error("git: {0}")]
    Git(String),
    /// The resource has no index yet.
    #[error("the resource has no index yet")]
    Missing,
    /// Another process holds the index writer.
    #[error("the index is being written by another process; try again in a moment")]
    Busy,
    /// The path is not in the index.
    #[error("{0} is not in the index")]
    NotIndexed(String),
    /// The query cannot be run.
    #[error("{0}")]
    InvalidQuery(String),
    /// Indexing is switched off in the configuration.
    #[error("code indexing is disabled (`[index] enabled = false` in config.toml)")]
    Disabled,
    /// The embeddings provider failed or is misconfigured (the text index is unaffected).
    #[error("embeddings: {0}")]
    Embeddings(String),
}

impl IndexError {
    /// An I/O error on `path`.
    pub fn io(path: &Path, e: std::io::Error) -> Self {
        IndexError::Io(format!("{}: {e}", path.display()))
    }
}

/// The state of a resource's index (spec 06 `Text Index: ready`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum IndexState {
    /// Current.
    Ready,
    /// Being built.
    Indexing,
    /// Files changed since it was last updated (the next read updates it).
    Stale,
    /// The resource is not indexed (its type has no files, or no index exists).
    Disabled,
}

impl IndexState {
    /// `ready`, `indexing`, `stale`, `disabled`.
    pub fn as_str(self) -> &'static str {
        match self {
            IndexState::Ready => "ready",
            IndexState::Indexing => "indexing",
            IndexState::Stale => "stale",
            IndexState::Disabled => "disabled",
        }
    }
}

/// The status of one resource's index (json `data.indexing`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, schemars::JsonSchema)]
pub struct IndexStatus {
    /// The resource.
    pub resource: String,
    /// Text index state.
    pub text_index: IndexState,
    /// Indexed files.
    pub indexed_files: u64,
    /// Definitions indexed.
    pub symbols: u64,
    /// Skipped files by reason.
    pub skipped: Skipped,
    /// When last brought up to date.
    pub last_indexed_at: Option<Timestamp>,
    /// Size on disk in bytes.
    pub size_bytes: u64,
    /// The commit indexed (git checkouts).
    pub indexed_commit: Option<String>,
    /// Files changed since (when checked).
    pub pending: Option<u64>,
    /// Symbol chunks with stored vectors, and their model (`PROVIDER/MODEL`), when
    /// `[index] embeddings` made any ([`embed`]).
    pub vectors: Option<(u64, String)>,
}

/// The directory and kind of a resource that has files to index: git checkouts and
/// directories with a path, and a repository by URL once the engine has its clone (made at
/// the first `plan use` on it); `None` for other types.
pub fn target(paths: &Paths, resource: &Resource) -> Option<(PathBuf, Source)> {
    if resource.handler_type() == "git" {
        let clone = paths.remote_clone(&resource.resource_id.to_string());
        return clone.join(".git").is_dir().then_some((clone, Source::Git));
    }
    let path = PathBuf::from(resource.prop("path")?);
    match resource.handler_type() {
        "git-checkout" => Some((path, Source::Git)),
        "fs-directory" => Some((path, Source::Directory)),
        _ => None,
    }
}

impl IndexConfig {
    /// The skip policy these keys describe.
    ///
    /// # Errors
    /// `(key, message)` for a glob that does not parse, a zero size or a malformed
    /// `embeddings` value ([`IndexConfig::validate`]).
    pub fn policy(&self) -> Result<Policy, (String, String)> {
        self.validate()?;
        Policy::new(self.max_file_size(), self.generated_globs()).map_err(|m| ("exclude".into(), m))
    }
}

/// The `[index]` table of the configuration in `paths` (the defaults when the file is
/// missing or unreadable: its errors are reported by the commands that load it).
pub fn config(paths: &Paths) -> IndexConfig {
    crate::config::Config::load(&paths.config_path)
        .ok()
        .and_then(|c| c.file.index)
        .unwrap_or_default()
}

/// The index policy of the configuration in `paths` (`[index]`), or the defaults.
pub fn policy_of(paths: &Paths) -> Policy {
    config(paths).policy().unwrap_or_default()
}

/// The default index policy.
pub fn policy() -> Policy {
    Policy::default()
}

/// Builds a resource's index from scratch. `Ok(None)` for a resource without files to index.
///
/// # Errors
/// [`IndexError`].
pub fn build_resource(
    paths: &Paths,
    resource: &Resource,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<Option<BuildReport>, IndexError> {
    let Some((root, source)) = target(paths, resource) else {
        return Ok(None);
    };
    let config = config(paths);
    if !config.enabled() {
        return Ok(None);
    }
    let policy = config.policy().unwrap_or_default();
    let dir = store::dir(paths, &resource.name);
    let report = build::build(&dir, &resource.name, &root, source, &policy, progress)?;
    match embed::setting(paths) {
        embed::Setting::Off => {}
        embed::Setting::Broken(m) => return Err(IndexError::Embeddings(m)),
        embed::Setting::On(e) => {
            embed::sync(&dir, &e).map_err(|err| {
                IndexError::Embeddings(format!(
                    "the text index is ready, but the symbols were not embedded: {err}"
                ))
            })?;
        }
    }
    Ok(Some(report))
}

/// Embeds what changed in a resource's index when `[index] embeddings` is configured; a
/// failure is logged, not returned (text search goes on; semantic search reports it).
fn sync_embeddings(paths: &Paths, name: &str) {
    if let embed::Setting::On(e) = embed::setting(paths)
        && let Err(err) = embed::sync(&store::dir(paths, name), &e)
    {
        tracing::warn!(resource = %name, error = %err, "symbols not embedded");
    }
}

/// Brings a resource's index up to date (building it when it has none). `Ok(None)` for a
/// resource without files to index.
///
/// # Errors
/// [`IndexError`].
pub fn refresh_resource(
    paths: &Paths,
    resource: &Resource,
) -> Result<Option<UpdateReport>, IndexError> {
    let Some(_) = target(paths, resource) else {
        return Ok(None);
    };
    if !config(paths).enabled() {
        return Ok(None);
    }
    let dir = store::dir(paths, &resource.name);
    match build::update(&dir, &policy_of(paths)) {
        Err(IndexError::Missing) => {
            let r = build_resource(paths, resource, &|_, _| {})?;
            Ok(r.map(|b| UpdateReport {
                indexed: vec![format!("({} files, full build)", b.files)],
                removed: Vec::new(),
                duration_ms: b.duration_ms,
            }))
        }
        other => {
            let r = other?;
            sync_embeddings(paths, &resource.name);
            Ok(Some(r))
        }
    }
}

/// Removes a resource's index; the number of files it held, or `None` when it had none.
///
/// # Errors
/// [`IndexError::Io`] when the directory cannot be removed.
pub fn remove_resource(paths: &Paths, name: &str) -> Result<Option<u64>, IndexError> {
    let dir = store::dir(paths, name);
    if !dir.exists() {
        return Ok(None);
    }
    let files = store::read_manifest(&dir).map(|m| m.files.len() as u64);
    std::fs::remove_dir_all(&dir).map_err(|e| IndexError::io(&dir, e))?;
    Ok(Some(files.unwrap_or(0)))
}

/// A resource's index status; with `check`, whether files changed since (a walk or `git
/// status`), which turns a ready index `stale`.
pub fn status(paths: &Paths, resource: &Resource, check: bool) -> IndexStatus {
    let dir = store::dir(paths, &resource.name);
    match target(paths, resource) {
        Some(_) if config(paths).enabled() => {
            status_of_dir(&dir, &resource.name, check, &policy_of(paths))
        }
        _ => status_of_dir(Path::new(""), &resource.name, false, &policy()),
    }
}

fn status_of_dir(dir: &Path, name: &str, check: bool, policy: &Policy) -> IndexStatus {
    let Some(m) = store::read_manifest(dir) else {
        return IndexStatus {
            resource: name.to_string(),
            text_index: IndexState::Disabled,
            indexed_files: 0,
            symbols: 0,
            skipped: Skipped::default(),
            last_indexed_at: None,
            size_bytes: 0,
            indexed_commit: None,
            pending: None,
            vectors: None,
        };
    };
    let pending = (check && m.state == "ready")
        .then(|| build::pending(dir, policy).ok().map(|n| n as u64))
        .flatten();
    IndexStatus {
        resource: m.resource.clone(),
        text_index: match (m.state.as_str(), pending) {
            ("indexing", _) => IndexState::Indexing,
            (_, Some(n)) if n > 0 => IndexState::Stale,
            _ => IndexState::Ready,
        },
        indexed_files: m.files.len() as u64,
        symbols: m.files.values().map(|f| u64::from(f.symbols)).sum(),
        skipped: m.skipped,
        last_indexed_at: m.last_indexed_at,
        size_bytes: store::size_of(dir),
        indexed_commit: m.indexed_commit,
        pending,
        vectors: embed::stored(dir),
    }
}

/// The status of every index in the data directory, by resource name.
pub fn statuses(paths: &Paths, check: bool) -> Vec<IndexStatus> {
    let Ok(entries) = std::fs::read_dir(store::indexes_dir(paths)) else {
        return Vec::new();
    };
    let policy = policy_of(paths);
    let mut out: Vec<IndexStatus> = entries
        .flatten()
        .filter(|e| e.path().join(store::MANIFEST).exists())
        .map(|e| status_of_dir(&e.path(), "", check, &policy))
        .filter(|s| !s.resource.is_empty())
        .collect();
    out.sort_by(|a, b| a.resource.cmp(&b.resource));
    out
}

/// The `Text index` check of `agents diagnostics`: the engine, how many resources are
/// indexed, and which are stale or unreadable.
pub fn check(paths: &Paths) -> crate::domain::check::Check {
    use crate::domain::check::{Check, CheckStatus};
    let all = statuses(paths, true);
    let stale: Vec<&str> = all
        .iter()
        .filter(|s| s.text_index == IndexState::Stale)
        .map(|s| s.resource.as_str())
        .collect();
    let files: u64 = all.iter().map(|s| s.indexed_files).sum();
    let details = format!(
        "tantivy 0.27, {} resource(s), {files} files{}",
        all.len(),
        if stale.is_empty() {
            String::new()
        } else {
            format!(
                "; stale (updated before the next read): {}",
                stale.join(", ")
            )
        }
    );
    Check::new("Text index", CheckStatus::Ok, details, None)
}

/// Opens a resource's index for reading after bringing it up to date: as the work tree is,
/// or at `base` (a commit of its git checkout).
///
/// # Errors
/// [`IndexError`].
pub fn open(paths: &Paths, resource: &Resource, base: Option<&str>) -> Result<View, IndexError> {
    if !config(paths).enabled() {
        return Err(IndexError::Disabled);
    }
    refresh_resource(paths, resource)?;
    View::open(&store::dir(paths, &resource.name), base, &policy_of(paths))
}

/// The structure database of a resource's index.
///
/// # Errors
/// [`IndexError`].
pub fn structure_of(paths: &Paths, name: &str) -> Result<rusqlite::Connection, IndexError> {
    let dir = store::dir(paths, name);
    if store::read_manifest(&dir).is_none() {
        return Err(IndexError::Missing);
    }
    structure::open(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{git, repo_with_files};
    use view::SearchQuery;

    fn search(v: &View, q: &str) -> Vec<String> {
        v.search(&SearchQuery {
            query: q.into(),
            limit: 10,
            ..Default::default()
        })
        .unwrap()
        .into_iter()
        .map(|h| format!("{}:{}", h.path, h.kind))
        .collect()
    }

    #[test]
    fn a_file_defining_the_whole_identifier_outranks_files_that_only_repeat_its_sub_words() {
        let tmp = tempfile::tempdir().unwrap();
        // Fixtures whose paths and text share the identifier's sub-words, and a long file
        // that defines it once.
        let mut files: Vec<(String, String)> = (0..40)
            .map(|i| {
                (
                    format!("test/parse-expression-{i}/options.json"),
                    "{\"parse\": \"expression\"}\n".to_string(),
                )
            })
            .collect();
        let filler: String = (0..400)
            .map(|i| format!("const value{i} = compute({i});\n"))
            .collect();
        files.push((
            "src/parser/index.ts".into(),
            format!("{filler}export function parseExpression(input) {{\n  return input;\n}}\n"),
        ));
        let v = indexed_repo(tmp.path(), &files);
        let files = v
            .search_files(&SearchQuery {
                query: "parseExpression".into(),
                limit: 5,
                ..Default::default()
            })
            .unwrap();
        assert_eq!(
            files.first().map(|f| f.path.as_str()),
            Some("src/parser/index.ts"),
            "{:?}",
            files.iter().map(|f| &f.path).collect::<Vec<_>>()
        );
        assert_eq!(
            files[0].definitions[0].symbol.as_deref(),
            Some("parseExpression")
        );
    }

    #[test]
    fn a_git_index_follows_commits_edits_and_reads_a_base_as_it_was() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = repo_with_files(
            &repo,
            &[
                (
                    "src/auth.rs",
                    "/// Verifies a token.\npub fn verify_token(t: &str) -> bool { !t.is_empty() }\n",
                ),
                ("README.md", "# Demo\nA demo project.\n"),
            ],
        );
        let dir = tmp.path().join("index");
        let report = build::build(
            &dir,
            "local/demo",
            &repo,
            Source::Git,
            &Policy::default(),
            &|_, _| {},
        )
        .unwrap();
        assert_eq!(report.files, 2);
        assert_eq!(report.symbols, 1);
        let v = View::open(&dir, None, &Policy::default()).unwrap();
        assert!(search(&v, "verify token").contains(&"src/auth.rs:symbol".to_string()));
        let def = v.find_definition("verify_token", 5).unwrap();
        assert_eq!(
            (def[0].path.as_str(), def[0].start_line),
            ("src/auth.rs", 2)
        );
        assert_eq!(def[0].symbol.as_deref(), Some("verify_token"));

        // A commit and an edit in the work tree: both become searchable after an update.
        std::fs::write(
            repo.join("src/session.rs"),
            "pub fn open_session() { verify_token(\"x\"); }\n",
        )
        .unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "session"]);
        std::fs::write(repo.join("src/auth.rs"), "pub fn check_password() {}\n").unwrap();
        assert_eq!(build::pending(&dir, &Policy::default()).unwrap(), 2);
        let u = build::update(&dir, &Policy::default()).unwrap();
        assert_eq!(u.indexed, ["src/auth.rs", "src/session.rs"]);
        assert_eq!(build::pending(&dir, &Policy::default()).unwrap(), 0);
        let v = View::open(&dir, None, &Policy::default()).unwrap();
        assert!(search(&v, "open_session").contains(&"src/session.rs:file".to_string()));
        assert!(search(&v, "check_password").contains(&"src/auth.rs:file".to_string()));
        let (refs, _) = v.find_references("verify_token", 10).unwrap();
        assert_eq!(refs.len(), 1, "{refs:?}");

        // At the base commit: the old auth.rs, and no session.rs.
        let at = View::open(&dir, Some(&base), &Policy::default()).unwrap();
        let hits = search(&at, "verify_token");
        assert!(hits.contains(&"src/auth.rs:file".to_string()), "{hits:?}");
        assert!(search_or_empty(&at, "check_password").is_empty());
        assert!(search_or_empty(&at, "open_session").is_empty());
        assert!(at.read("src/auth.rs").unwrap().contains("verify_token"));
        let o = overview::overview(&at, 2, 10);
        assert_eq!(o.readme.as_deref(), Some("# Demo\nA demo project.\n"));
    }

    #[test]
    fn a_file_read_at_the_base_scores_as_its_twin_kept_in_the_index() {
        // src/a.rs changed after the base, so a view at the base answers it from its base
        // version; src/b.rs, unchanged, is answered by the index. At the base the two are
        // the same text, so they score the same.
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let same = "pub fn parse_config(text: &str) -> usize { text.len() }\n";
        let mut files = vec![
            ("src/a.rs".to_string(), same.to_string()),
            ("src/b.rs".to_string(), same.to_string()),
        ];
        for i in 0..6 {
            files.push((
                format!("src/other{i}.rs"),
                format!("pub fn other_{i}() -> u32 {{ {i} }}\n"),
            ));
        }
        let refs: Vec<(&str, &str)> = files
            .iter()
            .map(|(p, t)| (p.as_str(), t.as_str()))
            .collect();
        let base = repo_with_files(&repo, &refs);
        std::fs::write(repo.join("src/a.rs"), format!("{same}// moved on\n")).unwrap();
        git(&repo, &["commit", "-q", "-am", "later"]);
        let dir = tmp.path().join("index");
        build::build(
            &dir,
            "local/demo",
            &repo,
            Source::Git,
            &Policy::default(),
            &|_, _| {},
        )
        .unwrap();
        let at = View::open(&dir, Some(&base), &Policy::default()).unwrap();
        assert!(at.is_shadowed("src/a.rs") && !at.is_shadowed("src/b.rs"));
        let found = at
            .search_files(&SearchQuery {
                query: "parse config".into(),
                limit: 10,
                ..Default::default()
            })
            .unwrap();
        let score = |p: &str| {
            found
                .iter()
                .find(|f| f.path == p)
                .unwrap_or_else(|| panic!("{p} is found: {found:?}"))
                .score
        };
        let (a, b) = (score("src/a.rs"), score("src/b.rs"));
        assert!((a - b).abs() < 1e-3 * b, "a.rs {a} and b.rs {b} score the same");
    }

    #[test]
    fn a_fixture_repeating_the_task_words_ranks_below_the_code_file_it_exercises() {
        let tmp = tempfile::tempdir().unwrap();
        // More fixtures holding every word of the task than a search fetches, repeating
        // and defining some, and the code file that handles them, naming each word once:
        // by BM25 alone every fixture outranks it.
        let mut files: Vec<(String, String)> = (0..60)
            .map(|i| {
                (
                    format!("packages/classes/test/fixtures/case-{i}/input.js"),
                    "// A super call in a class method.\nclass A extends B { method() { super.method(); } }\n"
                        .to_string(),
                )
            })
            .collect();
        files.push((
            "packages/classes/src/transform.ts".into(),
            "// Rewrites a super call in a class method.\nexport function rewrite() {}\n".into(),
        ));
        let v = indexed_repo(tmp.path(), &files);
        let found: Vec<String> = v
            .search_files(&SearchQuery {
                query: "super call in a class method".into(),
                limit: 5,
                ..Default::default()
            })
            .unwrap()
            .into_iter()
            .map(|f| f.path)
            .collect();
        assert_eq!(
            found.first().map(String::as_str),
            Some("packages/classes/src/transform.ts"),
            "{found:?}"
        );
        // The fixtures are still found after it.
        assert!(found.len() > 1 && found[1..].iter().all(|p| data_files::is_data(p)), "{found:?}");
    }

    /// A git repository of `files` (path, content) under `tmp`, indexed: its view.
    fn indexed_repo(tmp: &std::path::Path, files: &[(String, String)]) -> View {
        let repo = tmp.join("repo");
        let borrowed: Vec<(&str, &str)> =
            files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
        repo_with_files(&repo, &borrowed);
        let dir = tmp.join("index");
        build::build(&dir, "local/demo", &repo, Source::Git, &Policy::default(), &|_, _| {})
            .unwrap();
        View::open(&dir, None, &Policy::default()).unwrap()
    }

    fn search_or_empty(v: &View, q: &str) -> Vec<String> {
        search(v, q)
    }

    #[test]
    fn a_directory_index_follows_size_and_mtime_and_drops_deleted_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("d");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(root.join("a.py"), "def alpha():\n    return 1\n").unwrap();
        std::fs::write(root.join("b.bin"), b"\0\0\0").unwrap();
        let dir = tmp.path().join("index");
        let r = build::build(
            &dir,
            "d",
            &root,
            Source::Directory,
            &Policy::default(),
            &|_, _| {},
        )
        .unwrap();
        assert_eq!((r.files, r.skipped.binary), (1, 1));
        std::fs::write(root.join("c.py"), "def gamma_ray():\n    pass\n").unwrap();
        std::fs::remove_file(root.join("a.py")).unwrap();
        let u = build::update(&dir, &Policy::default()).unwrap();
        assert_eq!(
            (u.indexed.as_slice(), u.removed.as_slice()),
            (&["c.py".to_string()][..], &["a.py".to_string()][..])
        );
        assert_eq!(
            build::pending(&dir, &Policy::default()).unwrap(),
            0,
            "binary files are not pending again"
        );
        let v = View::open(&dir, None, &Policy::default()).unwrap();
        assert_eq!(search(&v, "gamma")[0], "c.py:symbol");
        assert!(
            v.search(&SearchQuery {
                query: "alpha".into(),
                limit: 5,
                ..Default::default()
            })
            .unwrap()
            .is_empty()
        );
    }
}
