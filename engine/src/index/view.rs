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
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{DocAddress, Index, IndexReader, Score, Searcher, TantivyDocument, Term};

use super::IndexError;
use super::store::{self, Fields, Manifest, Source};
use super::tokenizer;
use super::walk::{self, Found, Policy};

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
    content: Content,
    manifest: Manifest,
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
        let mut view = View {
            resource: manifest.resource.clone(),
            dir: dir.to_path_buf(),
            fields,
            main: Part { index, reader },
            overlay: None,
            shadowed: HashSet::new(),
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
                let found = Found {
                    path: p.clone(),
                    size: text.len() as u64,
                    mtime_ns: 0,
                };
                for d in super::build::documents(&fields, &found, &text) {
                    w.add_document(d)?;
                }
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

    fn text(&self, doc: &TantivyDocument, field: tantivy::schema::Field) -> Option<String> {
        doc.get_first(field)
            .and_then(|v| v.as_str())
            .map(str::to_string)
    }

    fn num(&self, doc: &TantivyDocument, field: tantivy::schema::Field) -> u64 {
        doc.get_first(field).and_then(|v| v.as_u64()).unwrap_or(0)
    }

    /// Runs `query` on the index and overlay; hits on shadowed paths of the index are dropped.
    fn run(
        &self,
        query: &dyn Query,
        limit: usize,
    ) -> Result<Vec<(Score, TantivyDocument)>, IndexError> {
        let mut out = Vec::new();
        for (searcher, overlay) in self.searchers()? {
            let top: Vec<(Score, DocAddress)> = searcher.search(
                query,
                &TopDocs::with_limit(
                    limit
                        + if overlay {
                            0
                        } else {
                            self.shadowed.len().min(1000)
                        },
                )
                .order_by_score(),
            )?;
            for (score, addr) in top {
                let doc: TantivyDocument = searcher.doc(addr)?;
                let path = self.text(&doc, self.fields.path).unwrap_or_default();
                if !overlay && self.shadowed.contains(&path) {
                    continue;
                }
                out.push((score, doc));
            }
        }
        out.sort_by(|a, b| b.0.total_cmp(&a.0));
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

    /// Ranked search over contents, definition names and paths.
    ///
    /// # Errors
    /// [`IndexError::InvalidQuery`] for an empty query or a bad glob; [`IndexError`].
    pub fn search(&self, q: &SearchQuery) -> Result<Vec<Hit>, IndexError> {
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
        for t in &terms {
            let tq = |field, boost: f32| -> Box<dyn Query> {
                let q = TermQuery::new(
                    Term::from_field_text(field, t),
                    IndexRecordOption::WithFreqs,
                );
                Box::new(BoostQuery::new(Box::new(q), boost))
            };
            should.push((Occur::Should, tq(f.content, 1.0)));
            should.push((Occur::Should, tq(f.symbols, 3.0)));
            should.push((Occur::Should, tq(f.path_text, 2.0)));
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
        let query = BooleanQuery::new(clauses);
        let limit = q.limit.max(1);
        let fetch = if glob.is_some() {
            limit * 20
        } else {
            limit * 2
        };
        let wanted: HashSet<&str> = terms.iter().map(String::as_str).collect();
        let mut hits = Vec::new();
        let mut seen = HashSet::new();
        for (score, doc) in self.run(&query, fetch)? {
            let path = self.text(&doc, f.path).unwrap_or_default();
            if let Some(g) = &glob
                && !g.is_match(&path)
            {
                continue;
            }
            let kind = self.text(&doc, f.kind).unwrap_or_default();
            let symbol = self.text(&doc, f.name).and(self.symbol_name(&doc));
            let (start, end) = (self.num(&doc, f.start_line), self.num(&doc, f.end_line));
            if !seen.insert((path.clone(), kind.clone(), start)) {
                continue;
            }
            let snippets = self.snippets(&path, &wanted, start, end);
            hits.push(Hit {
                language: self.text(&doc, f.lang),
                symbol_kind: self.text(&doc, f.symbol_kind),
                symbol,
                kind,
                path,
                start_line: start,
                end_line: end,
                score,
                snippets,
            });
            if hits.len() == limit {
                break;
            }
        }
        Ok(hits)
    }

    /// A symbol document's name as written (read from its first line).
    fn symbol_name(&self, doc: &TantivyDocument) -> Option<String> {
        let lower = self.text(doc, self.fields.name)?;
        let path = self.text(doc, self.fields.path)?;
        let line = self.num(doc, self.fields.start_line);
        let text = self.read(&path)?;
        let l = text.lines().nth(line.saturating_sub(1) as usize)?;
        Some(
            tokenizer::words(l)
                .map(|(_, w)| w)
                .find(|w| w.to_lowercase() == lower)
                .unwrap_or(&lower)
                .to_string(),
        )
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
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.name, &name.to_lowercase()),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, "symbol"),
                    IndexRecordOption::Basic,
                )),
            ),
        ]);
        let mut hits = Vec::new();
        for (score, doc) in self.run(&query, limit.max(1) * 4)? {
            let path = self.text(&doc, f.path).unwrap_or_default();
            let (start, end) = (self.num(&doc, f.start_line), self.num(&doc, f.end_line));
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
                symbol: self.symbol_name(&doc),
                symbol_kind: self.text(&doc, f.symbol_kind),
                language: self.text(&doc, f.lang),
                kind: "symbol".into(),
                path,
                start_line: start,
                end_line: end,
                score,
                snippets,
            });
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
        let f = self.fields;
        let query = BooleanQuery::new(vec![
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.content, &word.to_lowercase()),
                    IndexRecordOption::Basic,
                )) as Box<dyn Query>,
            ),
            (
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.kind, "file"),
                    IndexRecordOption::Basic,
                )),
            ),
        ]);
        let mut out = Vec::new();
        let mut truncated = false;
        'files: for (_, doc) in self.run(&query, 500)? {
            let path = self.text(&doc, f.path).unwrap_or_default();
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
