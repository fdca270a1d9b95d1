//! Reading an index (spec section 24 "Searching: instant"): ranked code search with path and
//! language filters and line-numbered snippets, definitions by name, references by name.
//!
//! A [`View`] reads a resource either as it is (the index as kept current) or at a plan's
//! recorded base commit: then the files that differ between the base and what the index
//! holds are left out of the index's answers and answered instead from a small in-memory
//! index of their base versions, and every snippet is read from the base commit. So a
//! strategy reads the project as it was when the plan was created, however the user's work
//! tree moved since.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use globset::GlobBuilder;
use serde::Serialize;
use tantivy::collector::TopDocs;
use tantivy::query::{Bm25StatisticsProvider, BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, Index, IndexReader, Score, Searcher, TantivyDocument, Term};

use super::IndexError;
use super::data_files;
use super::store::{self, Fields, Manifest, Source};
use super::structure;
use super::symbols::{self, Structure};
use super::tokenizer;
use super::walk::{self, Policy};

/// Most snippet lines per hit.
pub const SNIPPETS_PER_HIT: usize = 3;
/// Longest snippet line, in characters.
pub const SNIPPET_CHARS: usize = 240;

/// Words that carry no meaning in a task's wording.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it", "of",
    "on", "or", "so", "that", "the", "this", "to", "with", "we", "should", "must", "make",
];

/// Where file contents come from.
enum Content {
    /// The resource's directory as it is.
    WorkTree(PathBuf),
    /// A commit of a git checkout.
    Commit { repo: PathBuf, commit: git2::Oid },
}

impl Content {
    fn read(&self, path: &str) -> Option<String> {
        let safe = !path.starts_with('/')
            && Path::new(path).components().all(|c| {
                matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
        if !safe {
            return None;
        }
        match self {
            Content::WorkTree(root) => {
                let full = root.join(path);
                // Never through a link out of the resource.
                if std::fs::symlink_metadata(&full)
                    .ok()?
                    .file_type()
                    .is_symlink()
                {
                    return None;
                }
                std::fs::read_to_string(full).ok()
            }
            Content::Commit { repo, commit } => {
                let repo = git2::Repository::open(repo).ok()?;
                let tree = repo.find_commit(*commit).ok()?.tree().ok()?;
                let entry = tree.get_path(Path::new(path)).ok()?;
                let blob = repo.find_blob(entry.id()).ok()?;
                String::from_utf8(blob.content().to_vec()).ok()
            }
        }
    }
}

/// A search request.
#[derive(Debug, Clone, Default)]
pub struct SearchQuery {
    /// Words, identifiers or paths.
    pub query: String,
    /// Only paths matching this glob (`src/**/*.rs`).
    pub path_glob: Option<String>,
    /// Only this language (`rust`, `python`, ...).
    pub language: Option<String>,
    /// Most hits.
    pub limit: usize,
}

/// A line of a file.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Line {
    /// Line number (1-based).
    pub line: u64,
    /// Its text, shortened.
    pub text: String,
}

/// One search hit: a file or a definition.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Hit {
    /// Relative path.
    pub path: String,
    /// `file` or `symbol`.
    pub kind: String,
    /// Language.
    pub language: Option<String>,
    /// The definition's name (symbols).
    pub symbol: Option<String>,
    /// The definition's kind (symbols).
    pub symbol_kind: Option<String>,
    /// First line.
    pub start_line: u64,
    /// Last line.
    pub end_line: u64,
    /// Relevance (BM25).
    pub score: f32,
    /// Matching lines.
    pub snippets: Vec<Line>,
}

/// Most definitions shown under one file of a grouped search.
pub const DEFINITIONS_PER_FILE: usize = 3;
/// Most matching lines shown under one definition of a grouped search.
pub const SNIPPETS_PER_DEFINITION: usize = 2;

/// One file of a grouped search ([`View::search_files`]): its best definitions and its
/// matching lines under one entry.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FileHit {
    /// Relative path.
    pub path: String,
    /// Language.
    pub language: Option<String>,
    /// Relevance: the file's BM25 score, or its best definition's when higher.
    pub score: f32,
    /// The query's terms the file holds (in its text or path), in query order.
    pub terms: Vec<String>,
    /// The file's line count.
    pub lines: u64,
    /// Its definitions that name (or document) a query term, best first, at most
    /// [`DEFINITIONS_PER_FILE`].
    pub definitions: Vec<DefinitionHit>,
    /// How many more of its definitions matched.
    pub more_definitions: usize,
    /// Matching lines outside the definitions shown.
    pub snippets: Vec<Line>,
}

/// A definition under a [`FileHit`].
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DefinitionHit {
    /// Its name.
    pub symbol: Option<String>,
    /// Its kind (`function`, `struct`, ...).
    pub kind: String,
    /// First line.
    pub start_line: u64,
    /// Last line.
    pub end_line: u64,
    /// Relevance (the file's BM25 score, boosted when the name holds a query term).
    pub score: f32,
    /// Matching lines inside it.
    pub snippets: Vec<Line>,
}

/// Other forms of an English word a query may use where the code uses another: plural
/// and singular, `-ing`, `-ed` and `-ion` stripped (`completions` gives `completion`,
/// `parsing` gives `pars`, `parse`). Only for plain words of 5 letters or more.
pub fn word_forms(term: &str) -> Vec<String> {
    let mut out = Vec::new();
    if term.len() < 5 || !term.chars().all(|c| c.is_ascii_lowercase()) {
        return out;
    }
    for suffix in ["ies", "es", "s", "ing", "ed", "ions", "ion"] {
        if let Some(base) = term.strip_suffix(suffix) {
            if base.len() >= 3 {
                out.push(base.to_string());
                match suffix {
                    "ies" => out.push(format!("{base}y")),
                    "ing" | "ed" | "ion" | "ions" => out.push(format!("{base}e")),
                    _ => {}
                }
            }
            break;
        }
    }
    if !term.ends_with('s') {
        out.push(format!("{term}s"));
    }
    out
}

/// Lines of `text` between `start` and `end` (1-based, inclusive) holding a wanted term,
/// outside `skip` ranges, at most `max`.
fn matching_lines(
    text: &str,
    wanted: &HashSet<&str>,
    (start, end): (u64, u64),
    skip: &[(u64, u64)],
    max: usize,
) -> Vec<Line> {
    let mut out = Vec::new();
    if max == 0 {
        return out;
    }
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        if n < start || (end > 0 && n > end) || skip.iter().any(|(a, b)| n >= *a && n <= *b) {
            continue;
        }
        if tokenizer::tokens(line)
            .iter()
            .any(|t| wanted.contains(t.as_str()))
        {
            out.push(Line {
                line: n,
                text: clip(line),
            });
            if out.len() == max {
                break;
            }
        }
    }
    out
}

/// A reference to a name.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Reference {
    /// Relative path.
    pub path: String,
    /// Line number.
    pub line: u64,
    /// The line.
    pub text: String,
}

struct Part {
    index: Index,
    reader: IndexReader,
}

/// A file of the base commit answered from the in-memory index (its id there is its
/// position in [`View::overlay_files`]).
struct OverlayFile {
    path: String,
    lines: u64,
    structure: Structure,
}

/// A file hit, resolved from its id, with its definitions.
struct Located {
    path: String,
    /// Its definitions, in line order.
    defs: Vec<LocatedDef>,
    /// The file's line count.
    lines: u64,
}

/// A definition of a file hit, its name and docstring read from the file.
struct LocatedDef {
    kind: String,
    start: u64,
    end: u64,
    name: Option<String>,
    doc: Option<String>,
}

/// Files read to find a definition by name (the most relevant files naming it).
const FIND_CANDIDATES: usize = 400;

/// How much a definition whose name holds a query term outranks its file.
const DEFINITION_BOOST: f32 = 1.5;

/// How much more a whole identifier of the query weighs than each of its sub-words.
const COMPOUND_BOOST: f32 = 3.0;

/// Whether `term` is a whole identifier whose sub-words are terms of the query too
/// (`parseexpression` beside `parse` and `expression`).
fn is_compound(term: &str, terms: &[String]) -> bool {
    terms
        .iter()
        .filter(|u| u.len() < term.len() && term.contains(u.as_str()))
        .count()
        >= 2
}

/// How much a definition that matches the query lifts its hit: [`DEFINITION_BOOST`] plus a
/// little per query word in its name, 1.0 when only its doc comment matches, `None` when
/// neither does (it is not a hit).
fn definition_boost(d: &LocatedDef, wanted: &HashSet<&str>, terms: usize) -> Option<f32> {
    let named = d.name.as_deref().map_or(0, |n| {
        tokenizer::tokens(n)
            .iter()
            .filter(|t| wanted.contains(t.as_str()))
            .count()
    });
    let documented = d.doc.as_deref().is_some_and(|doc| {
        tokenizer::tokens(doc)
            .iter()
            .any(|t| wanted.contains(t.as_str()))
    });
    match (named, documented) {
        (0, false) => None,
        (0, true) => Some(1.0),
        _ => Some(DEFINITION_BOOST + named as f32 / (terms as f32 * 10.0)),
    }
}

/// BM25 statistics over several searchers (the index and the overlay of a view at a base).
struct Together<'a>(Vec<&'a Searcher>);

impl Bm25StatisticsProvider for Together<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        self.0.iter().map(|s| s.total_num_tokens(field)).sum()
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        self.0
            .iter()
            .map(|s| Bm25StatisticsProvider::total_num_docs(*s))
            .sum()
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.0.iter().map(|s| s.doc_freq(term)).sum()
    }
}

/// A read-only view of one resource's index.
pub struct View {
    /// The resource.
    pub resource: String,
    dir: PathBuf,
    fields: Fields,
    main: Part,
    overlay: Option<Part>,
    /// Paths the index holds differently from the base (answered by the overlay).
    shadowed: HashSet<String>,
    overlay_files: Vec<OverlayFile>,
    content: Content,
    manifest: Manifest,
    conn: std::sync::Mutex<rusqlite::Connection>,
}

fn clip(s: &str) -> String {
    let t = s.trim_end();
    if t.chars().count() <= SNIPPET_CHARS {
        return t.to_string();
    }
    let mut out: String = t.chars().take(SNIPPET_CHARS).collect();
    out.push('…');
    out
}

impl View {
    /// A view of the index in `dir` as it is, or at `base` (a commit of its git checkout).
    ///
    /// # Errors
    /// [`IndexError::Missing`] without an index; [`IndexError::Git`] when the base commit
    /// cannot be read.
    pub fn open(dir: &Path, base: Option<&str>, policy: &Policy) -> Result<Self, IndexError> {
        let manifest = store::read_manifest(dir).ok_or(IndexError::Missing)?;
        let (index, fields) = store::open_text(dir)?;
        let reader = store::reader(&index)?;
        let conn = std::sync::Mutex::new(structure::open(dir)?);
        let mut view = View {
            resource: manifest.resource.clone(),
            dir: dir.to_path_buf(),
            fields,
            main: Part { index, reader },
            overlay: None,
            shadowed: HashSet::new(),
            overlay_files: Vec::new(),
            conn,
            content: Content::WorkTree(manifest.root.clone()),
            manifest,
        };
        if let (Some(base), Source::Git) = (base, view.manifest.source) {
            view.at_base(base, policy)?;
        }
        Ok(view)
    }

    fn at_base(&mut self, base: &str, policy: &Policy) -> Result<(), IndexError> {
        let git = |e: git2::Error| IndexError::Git(e.message().to_string());
        let root = self.manifest.root.clone();
        let repo = git2::Repository::open(&root).map_err(git)?;
        let base_oid = git2::Oid::from_str(base).map_err(git)?;
        let base_tree = repo
            .find_commit(base_oid)
            .and_then(|c| c.tree())
            .map_err(git)?;
        let mut shadowed: BTreeSet<String> = self.manifest.dirty.iter().cloned().collect();
        if let Some(indexed) = &self.manifest.indexed_commit
            && indexed != base
        {
            let oid = git2::Oid::from_str(indexed).map_err(git)?;
            let tree = repo.find_commit(oid).and_then(|c| c.tree()).map_err(git)?;
            let diff = repo
                .diff_tree_to_tree(Some(&base_tree), Some(&tree), None)
                .map_err(git)?;
            for d in diff.deltas() {
                for f in [d.old_file(), d.new_file()] {
                    if let Some(p) = f.path().and_then(|p| p.to_str()) {
                        shadowed.insert(p.to_string());
                    }
                }
            }
        }
        self.content = Content::Commit {
            repo: root,
            commit: base_oid,
        };
        if !shadowed.is_empty() {
            let (schema, fields) = store::schema();
            let index = Index::create_in_ram(schema);
            store::register(&index);
            let mut w = index.writer_with_num_threads::<TantivyDocument>(1, 15 << 20)?;
            for p in &shadowed {
                if policy.is_generated(p) {
                    continue;
                }
                let Some(text) = self.content.read(p) else {
                    continue;
                };
                if text.len() as u64 > policy.max_file_size || walk::is_binary(text.as_bytes()) {
                    continue;
                }
                let structure = symbols::language_of(p)
                    .and_then(symbols::grammar)
                    .map(|g| symbols::extract(g, &text))
                    .unwrap_or_default();
                let id = self.overlay_files.len() as u64;
                for d in super::build::documents_of(&fields, p, &text, id) {
                    w.add_document(d)?;
                }
                self.overlay_files.push(OverlayFile {
                    path: p.clone(),
                    lines: text.lines().count() as u64,
                    structure,
                });
            }
            w.commit()?;
            let reader = store::reader(&index)?;
            self.overlay = Some(Part { index, reader });
        }
        self.shadowed = shadowed.into_iter().collect();
        Ok(())
    }

    /// The manifest of the index (files, sizes, languages).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the view reads a base commit rather than the work tree.
    pub fn at_commit(&self) -> Option<String> {
        match &self.content {
            Content::Commit { commit, .. } => Some(commit.to_string()),
            Content::WorkTree(_) => None,
        }
    }

    /// Every file the view sees: the base commit's tree, or the indexed files of a directory.
    pub fn files(&self) -> Vec<String> {
        match &self.content {
            Content::WorkTree(_) => self.manifest.files.keys().cloned().collect(),
            Content::Commit { repo, commit } => {
                let mut out = Vec::new();
                let Ok(repo) = git2::Repository::open(repo) else {
                    return out;
                };
                let Ok(tree) = repo.find_commit(*commit).and_then(|c| c.tree()) else {
                    return out;
                };
                let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
                    if entry.kind() == Some(git2::ObjectType::Blob)
                        && let Ok(name) = entry.name()
                    {
                        out.push(format!("{dir}{name}"));
                    }
                    git2::TreeWalkResult::Ok
                });
                out.sort();
                out
            }
        }
    }

    /// The files the view sees with their size and language: the index's, with the files
    /// that differ at the base replaced by their base versions.
    pub fn file_metas(&self) -> Vec<(String, u64, Option<String>)> {
        let mut out: Vec<(String, u64, Option<String>)> = self
            .manifest
            .files
            .iter()
            .filter(|(p, _)| !self.shadowed.contains(*p))
            .map(|(p, m)| (p.clone(), m.size, m.lang.clone()))
            .collect();
        for p in &self.shadowed {
            if let Some(text) = self.read(p) {
                out.push((
                    p.clone(),
                    text.len() as u64,
                    super::symbols::language_of(p).map(str::to_string),
                ));
            }
        }
        out.sort();
        out
    }

    /// Whether `path` is answered from the base rather than the index.
    pub fn is_shadowed(&self, path: &str) -> bool {
        self.shadowed.contains(path)
    }

    /// A file's contents as the index holds it (the work tree when last updated), whatever
    /// commit the view reads.
    pub fn read_indexed(&self, path: &str) -> Option<String> {
        Content::WorkTree(self.manifest.root.clone()).read(path)
    }

    /// A file's contents as the view sees it.
    pub fn read(&self, path: &str) -> Option<String> {
        self.content.read(path)
    }

    fn searchers(&self) -> Result<Vec<(Searcher, bool)>, IndexError> {
        self.main.reader.reload()?;
        let mut out = vec![(self.main.reader.searcher(), false)];
        if let Some(o) = &self.overlay {
            out.push((o.reader.searcher(), true));
        }
        let _ = &self.main.index;
        Ok(out)
    }

    /// The file a document stands for, with its definitions.
    fn locate(&self, overlay: bool, file: u64) -> Result<Option<Located>, IndexError> {
        if overlay {
            let Some(f) = self.overlay_files.get(file as usize) else {
                return Ok(None);
            };
            let defs = f
                .structure
                .symbols
                .iter()
                .map(|s| LocatedDef {
                    kind: s.kind.clone(),
                    start: s.start_line,
                    end: s.end_line,
                    name: Some(s.name.clone()),
                    doc: s.doc.clone(),
                })
                .collect();
            return Ok(Some(Located {
                path: f.path.clone(),
                defs,
                lines: f.lines,
            }));
        }
        let conn = self
            .conn
            .lock()
            .map_err(|_| IndexError::Io("the structure store is poisoned".into()))?;
        let Some((path, lines)) = structure::file_row(&conn, file as i64)? else {
            return Ok(None);
        };
        if self.shadowed.contains(&path) {
            return Ok(Some(Located {
                path,
                defs: Vec::new(),
                lines,
            }));
        }
        let found = structure::definitions(&conn, &path)?;
        drop(conn);
        let text = if found.is_empty() {
            None
        } else {
            self.read(&path)
        };
        let defs = found
            .into_iter()
            .map(|d| LocatedDef {
                name: text.as_deref().and_then(|t| d.name(t)),
                doc: text.as_deref().and_then(|t| d.doc(t)),
                kind: d.kind,
                start: d.start_line,
                end: d.end_line,
            })
            .collect();
        Ok(Some(Located { path, defs, lines }))
    }

    /// Runs `query` on the index and overlay; hits on shadowed paths of the index are dropped.
    /// Both are scored with the statistics of the two together, so a file answered from the
    /// base scores as it would in one index of the base (the overlay's few files alone
    /// would give every term a low rarity).
    fn run(&self, query: &dyn Query, limit: usize) -> Result<Vec<(Score, Located)>, IndexError> {
        let mut out = Vec::new();
        let searchers = self.searchers()?;
        let together = Together(searchers.iter().map(|(s, _)| s).collect());
        for (searcher, overlay) in &searchers {
            let overlay = *overlay;
            let extra = if overlay {
                0
            } else {
                self.shadowed.len().min(1000)
            };
            let top: Vec<(Score, DocAddress)> = searcher.search_with_statistics_provider(
                query,
                &TopDocs::with_limit(limit + extra).order_by_score(),
                &together,
            )?;
            for (score, addr) in top {
                let ff = searcher.segment_reader(addr.segment_ord).fast_fields();
                let file = ff.u64("file")?.first(addr.doc_id).unwrap_or(0);
                let Some(loc) = self.locate(overlay, file)? else {
                    continue;
                };
                if !overlay && self.shadowed.contains(&loc.path) {
                    continue;
                }
                out.push((score, loc));
            }
        }
        out.sort_by(|a, b| b.0.total_cmp(&a.0));
        Ok(out)
    }

    /// Runs `query` twice, for `limit` files each: over the files outside test data
    /// directories, then over all files ([`data_files`]). A large tree's fixtures, short and
    /// repeating the words of the code they exercise, would otherwise take every place of
    /// one ranking; the caller ranks the data files it gets apart.
    fn run_code_and_data(
        &self,
        query: &BooleanQuery,
        limit: usize,
    ) -> Result<Vec<(Score, Located)>, IndexError> {
        let data: Vec<(Occur, Box<dyn Query>)> = data_files::path_tokens()
            .into_iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(self.fields.path_text, &t),
                    IndexRecordOption::Basic,
                ));
                (Occur::Should, q)
            })
            .collect();
        let code = BooleanQuery::new(vec![
            (Occur::Must, Box::new(query.clone())),
            (Occur::MustNot, Box::new(BooleanQuery::new(data))),
        ]);
        let mut out = self.run(&code, limit)?;
        out.extend(self.run(query, limit)?);
        Ok(out)
    }

    /// The query's terms as the index tokenizes them, without stop words.
    pub fn terms(query: &str) -> Vec<String> {
        let mut seen = BTreeSet::new();
        tokenizer::tokens(query)
            .into_iter()
            .filter(|t| !STOP_WORDS.contains(&t.as_str()))
            .filter(|t| seen.insert(t.clone()))
            .collect()
    }

    /// The query's terms, its path glob and the index query for them.
    #[allow(clippy::type_complexity)]
    fn prepare(
        &self,
        q: &SearchQuery,
    ) -> Result<
        (
            Vec<String>,
            Vec<String>,
            Option<globset::GlobMatcher>,
            BooleanQuery,
        ),
        IndexError,
    > {
        let terms = Self::terms(&q.query);
        if terms.is_empty() {
            return Err(IndexError::InvalidQuery(format!(
                "`{}` has no searchable words",
                q.query
            )));
        }
        let glob = q
            .path_glob
            .as_deref()
            .map(|g| {
                GlobBuilder::new(g)
                    .literal_separator(false)
                    .build()
                    .map(|g| g.compile_matcher())
                    .map_err(|e| IndexError::InvalidQuery(format!("path glob `{g}`: {e}")))
            })
            .transpose()?;
        let f = self.fields;
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let mut forms: Vec<String> = Vec::new();
        for t in &terms {
            for v in word_forms(t) {
                if !terms.contains(&v) && !forms.contains(&v) {
                    forms.push(v);
                }
            }
        }
        for t in terms.iter().chain(&forms) {
            let tq = |field, boost: f32| -> Box<dyn Query> {
                let q = TermQuery::new(
                    Term::from_field_text(field, t),
                    IndexRecordOption::WithFreqs,
                );
                Box::new(BoostQuery::new(Box::new(q), boost))
            };
            // A whole identifier (`parseExpression`) outweighs its sub-words, which files
            // that only share them repeat.
            let whole = if is_compound(t, &terms) {
                COMPOUND_BOOST
            } else {
                1.0
            };
            should.push((Occur::Should, tq(f.content, whole)));
            should.push((Occur::Should, tq(f.path_text, 2.0 * whole)));
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> =
            vec![(Occur::Must, Box::new(BooleanQuery::new(should)))];
        if let Some(lang) = &q.language {
            clauses.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.lang, &lang.to_lowercase()),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        Ok((terms, forms, glob, BooleanQuery::new(clauses)))
    }

    /// Ranked search over contents, definition names and paths.
    ///
    /// # Errors
    /// [`IndexError::InvalidQuery`] for an empty query or a bad glob; [`IndexError`].
    pub fn search(&self, q: &SearchQuery) -> Result<Vec<Hit>, IndexError> {
        let (terms, forms, glob, query) = self.prepare(q)?;
        let limit = q.limit.max(1);
        let fetch = if glob.is_some() {
            limit * 20
        } else {
            limit * 2
        };
        let wanted: HashSet<&str> = terms.iter().chain(&forms).map(String::as_str).collect();
        let mut hits = Vec::new();
        let mut seen = HashSet::new();
        let mut ranked: Vec<(Score, Hit)> = Vec::new();
        for (score, loc) in self.run(&query, fetch)? {
            let path = loc.path;
            if let Some(g) = &glob
                && !g.is_match(&path)
            {
                continue;
            }
            let language = symbols::language_of(&path).map(str::to_string);
            for d in loc.defs {
                let Some(boost) = definition_boost(&d, &wanted, terms.len()) else {
                    continue;
                };
                let snippets = self.snippets(&path, &wanted, d.start, d.end);
                ranked.push((
                    score * boost,
                    Hit {
                        language: language.clone(),
                        symbol_kind: Some(d.kind),
                        symbol: d.name,
                        kind: "symbol".into(),
                        path: path.clone(),
                        start_line: d.start,
                        end_line: d.end,
                        score: score * boost,
                        snippets,
                    },
                ));
            }
            let end = loc.lines.max(1);
            let snippets = self.snippets(&path, &wanted, 1, end);
            ranked.push((
                score,
                Hit {
                    language,
                    symbol_kind: None,
                    symbol: None,
                    kind: "file".into(),
                    path,
                    start_line: 1,
                    end_line: end,
                    score,
                    snippets,
                },
            ));
        }
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (_, hit) in ranked {
            if !seen.insert((hit.path.clone(), hit.kind.clone(), hit.start_line)) {
                continue;
            }
            hits.push(hit);
            if hits.len() == limit {
                break;
            }
        }
        Ok(hits)
    }

    /// Ranked search grouped by file: at most `q.limit` files, each with its best
    /// definitions and matching lines, best file first (its score is the higher of its own
    /// and its best definition's, so a file defining what the query names comes first).
    ///
    /// # Errors
    /// [`IndexError::InvalidQuery`] for an empty query or a bad glob; [`IndexError`].
    pub fn search_files(&self, q: &SearchQuery) -> Result<Vec<FileHit>, IndexError> {
        let (terms, forms, glob, query) = self.prepare(q)?;
        let limit = q.limit.max(1);
        let fetch = if glob.is_some() {
            limit * 20
        } else {
            limit * 3 + 10
        };
        let wanted: HashSet<&str> = terms.iter().chain(&forms).map(String::as_str).collect();
        let mut seen = HashSet::new();
        let mut files: Vec<FileHit> = Vec::new();
        for (score, loc) in self.run_code_and_data(&query, fetch)? {
            let path = loc.path;
            if glob.as_ref().is_some_and(|g| !g.is_match(&path)) || !seen.insert(path.clone()) {
                continue;
            }
            let score = data_files::file_score(&path, score);
            let text = self.read(&path).unwrap_or_default();
            let mut defs: Vec<DefinitionHit> = Vec::new();
            for d in loc.defs {
                let Some(boost) = definition_boost(&d, &wanted, terms.len()) else {
                    continue;
                };
                defs.push(DefinitionHit {
                    symbol: d.name,
                    kind: d.kind,
                    start_line: d.start,
                    end_line: d.end,
                    score: score * boost,
                    snippets: Vec::new(),
                });
            }
            defs.sort_by(|a, b| {
                b.score
                    .total_cmp(&a.score)
                    .then(a.start_line.cmp(&b.start_line))
            });
            let more_definitions = defs.len().saturating_sub(DEFINITIONS_PER_FILE);
            defs.truncate(DEFINITIONS_PER_FILE);
            for d in &mut defs {
                d.snippets = matching_lines(
                    &text,
                    &wanted,
                    (d.start_line, d.end_line),
                    &[],
                    SNIPPETS_PER_DEFINITION,
                );
            }
            let shown: Vec<(u64, u64)> = defs.iter().map(|d| (d.start_line, d.end_line)).collect();
            let snippets = matching_lines(
                &text,
                &wanted,
                (1, loc.lines.max(1)),
                &shown,
                SNIPPETS_PER_HIT,
            );
            let held: HashSet<String> = tokenizer::tokens(&text)
                .into_iter()
                .chain(tokenizer::tokens(&path))
                .filter(|t| wanted.contains(t.as_str()))
                .collect();
            let matched: Vec<String> = terms
                .iter()
                .filter(|t| held.contains(*t) || word_forms(t).iter().any(|v| held.contains(v)))
                .cloned()
                .collect();
            // A file holding more of the query's terms ranks higher than one repeating a few.
            let coverage = 1.0 + matched.len() as f32 / terms.len() as f32;
            let best = defs.first().map_or(score, |d| d.score.max(score)) * coverage;
            files.push(FileHit {
                language: symbols::language_of(&path).map(str::to_string),
                terms: matched,
                path,
                score: best,
                lines: loc.lines,
                definitions: defs,
                more_definitions,
                snippets,
            });
        }
        self.lift_definitions_of_named_identifiers(&terms, &wanted, glob.as_ref(), &mut files)?;
        files.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.path.cmp(&b.path)));
        files.truncate(limit);
        Ok(files)
    }

    /// A whole identifier the query names (`parseExpression`): the files defining it come
    /// first, above files that only share its sub-words (in their paths, say), and are added
    /// when the ranking left them out.
    fn lift_definitions_of_named_identifiers(
        &self,
        terms: &[String],
        wanted: &HashSet<&str>,
        glob: Option<&globset::GlobMatcher>,
        files: &mut Vec<FileHit>,
    ) -> Result<(), IndexError> {
        let top = files.iter().map(|f| f.score).fold(0.0_f32, f32::max);
        for term in terms.iter().filter(|t| is_compound(t, terms)) {
            for d in self.find_definition(term, DEFINITIONS_PER_FILE)? {
                if glob.is_some_and(|g| !g.is_match(&d.path)) {
                    continue;
                }
                let lifted = data_files::file_score(&d.path, top + 1.0 + d.score);
                if let Some(f) = files.iter_mut().find(|f| f.path == d.path) {
                    f.score = f.score.max(lifted);
                    continue;
                }
                let text = self.read(&d.path).unwrap_or_default();
                let span = (d.start_line, d.end_line);
                files.push(FileHit {
                    language: d.language.clone(),
                    terms: vec![term.clone()],
                    path: d.path.clone(),
                    score: lifted,
                    lines: text.lines().count() as u64,
                    definitions: vec![DefinitionHit {
                        symbol: d.symbol.clone(),
                        kind: d.symbol_kind.clone().unwrap_or_default(),
                        start_line: d.start_line,
                        end_line: d.end_line,
                        score: lifted,
                        snippets: matching_lines(&text, wanted, span, &[], SNIPPETS_PER_DEFINITION),
                    }],
                    more_definitions: 0,
                    snippets: Vec::new(),
                });
            }
        }
        Ok(())
    }

    /// Lines of `path` between `start` and `end` holding a wanted term.
    fn snippets(&self, path: &str, wanted: &HashSet<&str>, start: u64, end: u64) -> Vec<Line> {
        let Some(text) = self.read(path) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let n = i as u64 + 1;
            if n < start || (end > 0 && n > end) {
                continue;
            }
            if tokenizer::tokens(line)
                .iter()
                .any(|t| wanted.contains(t.as_str()))
            {
                out.push(Line {
                    line: n,
                    text: clip(line),
                });
                if out.len() == SNIPPETS_PER_HIT {
                    break;
                }
            }
        }
        out
    }

    /// Definitions named `name` (case-insensitive; exact case first).
    ///
    /// # Errors
    /// [`IndexError`].
    pub fn find_definition(&self, name: &str, limit: usize) -> Result<Vec<Hit>, IndexError> {
        let lower = name.to_lowercase();
        let query = TermQuery::new(
            Term::from_field_text(self.fields.content, &lower),
            IndexRecordOption::WithFreqs,
        );
        let mut hits = Vec::new();
        let candidates = self.run(&query, (limit.max(1) * 20).max(FIND_CANDIDATES))?;
        for (score, loc) in candidates {
            let path = loc.path;
            for d in loc.defs {
                if d.name.as_deref().map(str::to_lowercase).as_deref() != Some(lower.as_str()) {
                    continue;
                }
                let path = path.clone();
                let (start, end) = (d.start, d.end);
                let text = self.read(&path).unwrap_or_default();
                let snippets: Vec<Line> = text
                    .lines()
                    .enumerate()
                    .skip(start.saturating_sub(1) as usize)
                    .take(3.min((end + 1).saturating_sub(start) as usize).max(1))
                    .map(|(i, l)| Line {
                        line: i as u64 + 1,
                        text: clip(l),
                    })
                    .collect();
                hits.push(Hit {
                    symbol: d.name,
                    symbol_kind: Some(d.kind),
                    language: symbols::language_of(&path).map(str::to_string),
                    kind: "symbol".into(),
                    path,
                    start_line: start,
                    end_line: end,
                    score,
                    snippets,
                });
            }
        }
        hits.sort_by_key(|h| {
            (
                h.symbol.as_deref() != Some(name),
                h.path.clone(),
                h.start_line,
            )
        });
        hits.truncate(limit.max(1));
        Ok(hits)
    }

    /// Lines that use `name` as a whole word, file by file (most relevant files first).
    ///
    /// # Errors
    /// [`IndexError::InvalidQuery`] for a name that is not one identifier; [`IndexError`].
    pub fn find_references(
        &self,
        name: &str,
        limit: usize,
    ) -> Result<(Vec<Reference>, bool), IndexError> {
        let words: Vec<&str> = tokenizer::words(name).map(|(_, w)| w).collect();
        let [word] = words.as_slice() else {
            return Err(IndexError::InvalidQuery(format!(
                "`{name}` is not one identifier"
            )));
        };
        let query = TermQuery::new(
            Term::from_field_text(self.fields.content, &word.to_lowercase()),
            IndexRecordOption::Basic,
        );
        let mut out = Vec::new();
        let mut truncated = false;
        'files: for (_, loc) in self.run(&query, 500)? {
            let path = loc.path;
            let Some(text) = self.read(&path) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if tokenizer::words(line).any(|(_, w)| w == *word) {
                    if out.len() == limit.max(1) {
                        truncated = true;
                        break 'files;
                    }
                    out.push(Reference {
                        path: path.clone(),
                        line: i as u64 + 1,
                        text: clip(line),
                    });
                }
            }
        }
        Ok((out, truncated))
    }
}
