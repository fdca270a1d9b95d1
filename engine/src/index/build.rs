//! Building and updating a resource's index (spec section 24 "Real-time Index
//! Synchronization"): a full build walks the resource, parses every file once (text and
//! structure) on all cores and commits; an update re-indexes only what changed since —
//! for a git checkout the diff from the indexed commit plus `git status` (and what was
//! dirty last time), for a directory every file whose size or mtime moved — so no plan
//! reads a stale index.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use serde::Serialize;
use tantivy::{IndexWriter, TantivyDocument, Term, doc};

use super::IndexError;
use super::store::{self, Fields, FileMeta, Manifest, Source};
use super::structure::{self, FileFacts};
use super::symbols;
use super::walk::{self, Found, Policy, Skipped};

/// Memory budget of a full build's writer, in bytes (split over its threads).
pub const BUILD_MEMORY: usize = 96 << 20;
/// Memory budget of an update's writer, in bytes.
pub const UPDATE_MEMORY: usize = 20 << 20;

/// What a full build did.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BuildReport {
    /// Files indexed.
    pub files: u64,
    /// Definitions indexed.
    pub symbols: u64,
    /// Files skipped, by reason.
    pub skipped: Skipped,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// Size of the index on disk, in bytes.
    pub size_bytes: u64,
    /// Total size of the indexed files, in bytes.
    pub source_bytes: u64,
}

/// What an update did.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct UpdateReport {
    /// Files (re-)indexed.
    pub indexed: Vec<String>,
    /// Files dropped from the index.
    pub removed: Vec<String>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

impl UpdateReport {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.indexed.is_empty() && self.removed.is_empty()
    }
}

/// One parsed file: its documents and facts.
struct Parsed {
    docs: Vec<TantivyDocument>,
    facts: FileFacts,
    meta: FileMeta,
}

fn parse(fields: &Fields, found: &Found, text: &str, id: i64) -> Parsed {
    let lang = symbols::language_of(&found.path);
    let structure = lang
        .and_then(symbols::grammar)
        .map(|g| symbols::extract(g, text))
        .unwrap_or_default();
    let lines = text.lines().count() as u64;
    let docs = documents_of(fields, &found.path, text, id as u64);
    let meta = FileMeta {
        size: found.size,
        mtime_ns: found.mtime_ns,
        lang: lang.map(str::to_string),
        symbols: structure.symbols.len() as u32,
        binary: false,
    };
    Parsed {
        docs,
        facts: FileFacts {
            id,
            path: found.path.clone(),
            lang: lang.map(str::to_string),
            lines,
            size: found.size,
            markers: structure::markers(text),
            structure,
        },
        meta,
    }
}

/// The document of one file with id `file` (its definitions are answered from the
/// structure store, joined to the file's hits).
pub(super) fn documents_of(
    fields: &Fields,
    path: &str,
    text: &str,
    file: u64,
) -> Vec<TantivyDocument> {
    let mut doc = doc!(
        fields.file => file,
        fields.path_text => path,
        fields.content => text,
    );
    if let Some(l) = symbols::language_of(path) {
        doc.add_text(fields.lang, l);
    }
    vec![doc]
}

/// Reads and parses one file; `None` for a binary or unreadable file.
fn read_and_parse(root: &Path, fields: &Fields, found: &Found, id: i64) -> Option<Parsed> {
    let bytes = std::fs::read(root.join(&found.path)).ok()?;
    if walk::is_binary(&bytes) {
        return None;
    }
    let text = String::from_utf8(bytes).ok()?;
    Some(parse(fields, found, &text, id))
}

fn writer(
    index: &tantivy::Index,
    threads: usize,
    memory: usize,
) -> Result<IndexWriter, IndexError> {
    // Another process may hold the writer for a moment (an update racing a build).
    let mut waited = Duration::ZERO;
    loop {
        match index.writer_with_num_threads::<TantivyDocument>(threads, memory) {
            Ok(w) => return Ok(w),
            Err(tantivy::TantivyError::LockFailure(..)) if waited < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50));
                waited += Duration::from_millis(50);
            }
            Err(tantivy::TantivyError::LockFailure(..)) => return Err(IndexError::Busy),
            Err(e) => return Err(e.into()),
        }
    }
}

/// HEAD's commit and the work tree's changed paths (tracked or untracked, not ignored).
fn git_state(root: &Path) -> Result<(Option<String>, BTreeSet<String>), IndexError> {
    let repo =
        git2::Repository::open(root).map_err(|e| IndexError::Git(e.message().to_string()))?;
    let head = repo
        .head()
        .ok()
        .and_then(|h| h.peel_to_commit().ok())
        .map(|c| c.id().to_string());
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(true);
    let statuses = repo
        .statuses(Some(&mut opts))
        .map_err(|e| IndexError::Git(e.message().to_string()))?;
    let dirty = statuses
        .iter()
        .filter_map(|s| s.path().ok().map(str::to_string))
        .collect();
    Ok((head, dirty))
}

/// Paths that differ between two commits.
fn diff_paths(root: &Path, from: &str, to: &str) -> Result<BTreeSet<String>, IndexError> {
    let git = |e: git2::Error| IndexError::Git(e.message().to_string());
    let repo = git2::Repository::open(root).map_err(git)?;
    let tree = |id: &str| -> Result<git2::Tree<'_>, IndexError> {
        let oid = git2::Oid::from_str(id).map_err(git)?;
        repo.find_commit(oid).and_then(|c| c.tree()).map_err(git)
    };
    let (a, b) = (tree(from)?, tree(to)?);
    let diff = repo
        .diff_tree_to_tree(Some(&a), Some(&b), None)
        .map_err(git)?;
    let mut out = BTreeSet::new();
    for d in diff.deltas() {
        for f in [d.old_file(), d.new_file()] {
            if let Some(p) = f.path().and_then(|p| p.to_str()) {
                out.insert(p.to_string());
            }
        }
    }
    Ok(out)
}

/// What one build thread produced: facts, file metadata, binary files skipped.
type Part = (Vec<FileFacts>, Vec<(String, FileMeta)>, u64);

/// Paths that may have changed, HEAD now and the dirty paths now.
type Candidates = (BTreeSet<String>, Option<String>, Vec<String>);

/// Builds the index of `root` from scratch into `dir`, calling `progress(done, total)` as
/// files are parsed.
///
/// # Errors
/// [`IndexError`]; the previous index is gone either way (a new build starts clean).
pub fn build(
    dir: &Path,
    resource: &str,
    root: &Path,
    source: Source,
    policy: &Policy,
    progress: &(dyn Fn(u64, u64) + Sync),
) -> Result<BuildReport, IndexError> {
    let started = Instant::now();
    if !root.is_dir() {
        return Err(IndexError::Io(format!(
            "{} is not a directory",
            root.display()
        )));
    }
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
    let (found, mut skipped) = walk::walk(root, policy);
    let (indexed_commit, dirty) = match source {
        Source::Git => git_state(root)?,
        Source::Directory => (None, BTreeSet::new()),
    };
    let mut manifest = Manifest {
        version: store::LAYOUT_VERSION,
        resource: resource.to_string(),
        root: root.to_path_buf(),
        source,
        state: "indexing".into(),
        indexed_commit,
        dirty: dirty.into_iter().collect(),
        files: Default::default(),
        binary: Default::default(),
        skipped,
        last_indexed_at: None,
        build_ms: 0,
        embeddings: None,
    };
    store::write_manifest(dir, &manifest)?;
    let (index, fields) = store::open_text(dir)?;
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .clamp(1, 8);
    let writer = writer(&index, threads, BUILD_MEMORY)?;
    let done = AtomicU64::new(0);
    let total = found.len() as u64;
    let chunk = found.len().div_ceil(threads).max(1);
    let results: Vec<Result<Part, IndexError>> = std::thread::scope(|s| {
        let handles: Vec<_> = found
            .chunks(chunk)
            .enumerate()
            .map(|(n, part)| {
                let (writer, fields, done) = (&writer, &fields, &done);
                s.spawn(move || {
                    let mut facts = Vec::new();
                    let mut metas = Vec::new();
                    let mut binary = 0;
                    for (k, f) in part.iter().enumerate() {
                        // Ids follow the sorted walk, from 1.
                        let id = (n * chunk + k) as i64 + 1;
                        match read_and_parse(root, fields, f, id) {
                            Some(p) => {
                                for d in p.docs {
                                    writer.add_document(d)?;
                                }
                                metas.push((f.path.clone(), p.meta));
                                facts.push(p.facts);
                            }
                            None => {
                                binary += 1;
                                metas.push((
                                    f.path.clone(),
                                    FileMeta {
                                        size: f.size,
                                        mtime_ns: f.mtime_ns,
                                        lang: None,
                                        symbols: 0,
                                        binary: true,
                                    },
                                ));
                            }
                        }
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n.is_multiple_of(256) || n == total {
                            progress(n, total);
                        }
                    }
                    Ok((facts, metas, binary))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(IndexError::Io("an indexing thread panicked".into())))
            })
            .collect()
    });
    let mut writer = writer;
    let mut all_facts = Vec::new();
    let mut source_bytes = 0;
    for r in results {
        let (facts, metas, binary) = r?;
        skipped.binary += binary;
        for (p, m) in metas {
            if m.binary {
                manifest.binary.insert(p, m);
            } else {
                source_bytes += m.size;
                manifest.files.insert(p, m);
            }
        }
        all_facts.extend(facts);
    }
    writer.commit()?;
    // One segment: one term dictionary instead of one per thread and flush.
    let segments = index.searchable_segment_ids()?;
    if segments.len() > 1 {
        writer.merge(&segments).wait()?;
    }
    writer.wait_merging_threads()?;
    let mut conn = structure::open(dir)?;
    structure::replace(&mut conn, &[], &all_facts, true)?;
    manifest.skipped = skipped;
    manifest.state = "ready".into();
    manifest.last_indexed_at = Some(Timestamp::now());
    manifest.build_ms = started.elapsed().as_millis() as u64;
    store::write_manifest(dir, &manifest)?;
    Ok(BuildReport {
        files: manifest.files.len() as u64,
        symbols: manifest.files.values().map(|m| u64::from(m.symbols)).sum(),
        skipped,
        duration_ms: manifest.build_ms,
        size_bytes: store::size_of(dir),
        source_bytes,
    })
}

/// The paths that may have changed since the manifest was written.
fn candidates(m: &Manifest, policy: &Policy) -> Result<Candidates, IndexError> {
    match m.source {
        Source::Git => {
            let (head, dirty) = git_state(&m.root)?;
            let mut out: BTreeSet<String> = dirty.clone();
            out.extend(m.dirty.iter().cloned());
            if let (Some(old), Some(new)) = (&m.indexed_commit, &head)
                && old != new
            {
                out.extend(diff_paths(&m.root, old, new)?);
            }
            Ok((out, head, dirty.into_iter().collect()))
        }
        Source::Directory => {
            let (found, _) = walk::walk(&m.root, policy);
            let mut out = BTreeSet::new();
            let mut seen = BTreeSet::new();
            for f in found {
                match m.files.get(&f.path) {
                    Some(meta) if meta.size == f.size && meta.mtime_ns == f.mtime_ns => {}
                    _ => {
                        out.insert(f.path.clone());
                    }
                }
                seen.insert(f.path);
            }
            out.extend(m.files.keys().filter(|p| !seen.contains(*p)).cloned());
            Ok((out, None, Vec::new()))
        }
    }
}

/// What an update would do: files to (re-)index, files to drop, binary files seen, HEAD and
/// the dirty paths now.
struct Changes {
    index: Vec<Found>,
    remove: Vec<String>,
    binary: Vec<Found>,
    head: Option<String>,
    dirty: Vec<String>,
}

fn changes(m: &Manifest, policy: &Policy) -> Result<Changes, IndexError> {
    let (paths, head, dirty) = candidates(m, policy)?;
    Ok(changes_of(m, policy, paths, head, dirty))
}

/// What an update of `paths` would do, recording `head` and `dirty` as the state after it.
fn changes_of(
    m: &Manifest,
    policy: &Policy,
    paths: BTreeSet<String>,
    head: Option<String>,
    dirty: Vec<String>,
) -> Changes {
    let mut c = Changes {
        index: Vec::new(),
        remove: Vec::new(),
        binary: Vec::new(),
        head,
        dirty,
    };
    for rel in paths {
        let kept = !policy.is_generated(&rel);
        match walk::stat(&m.root.join(&rel))
            .filter(|(size, _)| kept && *size <= policy.max_file_size)
        {
            Some((size, mtime_ns)) => {
                let same = |f: &FileMeta| f.size == size && f.mtime_ns == mtime_ns;
                if m.files.get(&rel).is_some_and(same) || m.binary.get(&rel).is_some_and(same) {
                    continue;
                }
                c.index.push(Found {
                    path: rel,
                    size,
                    mtime_ns,
                });
            }
            None if m.files.contains_key(&rel) => c.remove.push(rel),
            None => {}
        }
    }
    c
}

/// How many files an update would touch (0: the index is current).
///
/// # Errors
/// [`IndexError::Missing`] when there is no index; [`IndexError`] otherwise.
pub fn pending(dir: &Path, policy: &Policy) -> Result<usize, IndexError> {
    let m = store::read_manifest(dir).ok_or(IndexError::Missing)?;
    let c = changes(&m, policy)?;
    Ok(c.index.len() + c.remove.len())
}

/// Brings the index in `dir` up to date with its resource; a no-op when nothing changed.
///
/// # Errors
/// [`IndexError::Missing`] when there is no index; [`IndexError`] otherwise.
pub fn update(dir: &Path, policy: &Policy) -> Result<UpdateReport, IndexError> {
    let started = Instant::now();
    let m = store::read_manifest(dir).ok_or(IndexError::Missing)?;
    let c = changes(&m, policy)?;
    apply(dir, m, c, started)
}

/// Brings the index in `dir` up to date for these work-tree paths only (relative, with `/`;
/// a directory stands for every indexed file under it), as a watcher that saw them change
/// does: no status and no walk of the rest of the tree. The paths join the manifest's dirty
/// set, so the next full [`update`] looks at them again whatever git says then.
///
/// # Errors
/// [`IndexError::Missing`] when there is no index; [`IndexError`] otherwise.
pub fn update_paths(
    dir: &Path,
    policy: &Policy,
    paths: &BTreeSet<String>,
) -> Result<UpdateReport, IndexError> {
    let started = Instant::now();
    let m = store::read_manifest(dir).ok_or(IndexError::Missing)?;
    let mut wanted = BTreeSet::new();
    for p in paths {
        let under = format!("{p}/");
        wanted.extend(
            m.files
                .range(under.clone()..)
                .take_while(|(k, _)| k.starts_with(&under))
                .map(|(k, _)| k.clone()),
        );
        wanted.insert(p.clone());
    }
    let mut dirty: BTreeSet<String> = m.dirty.iter().cloned().collect();
    if m.source == Source::Git {
        dirty.extend(wanted.iter().cloned());
    }
    let c = changes_of(
        &m,
        policy,
        wanted,
        m.indexed_commit.clone(),
        dirty.into_iter().collect(),
    );
    apply(dir, m, c, started)
}

/// Re-indexes and drops what `c` names and records the manifest.
fn apply(
    dir: &Path,
    mut m: Manifest,
    mut c: Changes,
    started: Instant,
) -> Result<UpdateReport, IndexError> {
    let mut report = UpdateReport::default();
    let (_, fields) = store::schema();
    let mut conn = structure::open(dir)?;
    let wanted: Vec<&str> = c.index.iter().map(|f| f.path.as_str()).collect();
    let ids = structure::ids(&conn, &wanted)?;
    let mut parsed = Vec::new();
    for (found, id) in std::mem::take(&mut c.index).into_iter().zip(ids) {
        match read_and_parse(&m.root, &fields, &found, id) {
            Some(p) => {
                m.binary.remove(&found.path);
                parsed.push(p);
            }
            None => {
                if m.files.contains_key(&found.path) {
                    report.removed.push(found.path.clone());
                }
                c.binary.push(found);
            }
        }
    }
    report.removed.extend(c.remove);
    for b in c.binary {
        m.binary.insert(
            b.path,
            FileMeta {
                size: b.size,
                mtime_ns: b.mtime_ns,
                lang: None,
                symbols: 0,
                binary: true,
            },
        );
    }
    let (head, dirty) = (c.head, c.dirty);
    if parsed.is_empty() && report.removed.is_empty() {
        m.indexed_commit = head;
        m.dirty = dirty;
        store::write_manifest(dir, &m)?;
        report.duration_ms = started.elapsed().as_millis() as u64;
        return Ok(report);
    }
    let (index, fields) = store::open_text(dir)?;
    let mut w = writer(&index, 1, UPDATE_MEMORY)?;
    for p in &report.removed {
        if let Some(id) = structure::ids(&conn, &[p.as_str()])?.first() {
            w.delete_term(Term::from_field_u64(fields.file, *id as u64));
        }
    }
    for p in &parsed {
        w.delete_term(Term::from_field_u64(fields.file, p.facts.id as u64));
    }
    let mut facts = Vec::new();
    for p in parsed {
        for d in p.docs {
            w.add_document(d)?;
        }
        report.indexed.push(p.facts.path.clone());
        m.files.insert(p.facts.path.clone(), p.meta);
        facts.push(p.facts);
    }
    w.commit()?;
    drop(w);
    for r in &report.removed {
        m.files.remove(r);
    }
    structure::replace(&mut conn, &report.removed, &facts, false)?;
    m.indexed_commit = head;
    m.dirty = dirty;
    m.last_indexed_at = Some(Timestamp::now());
    store::write_manifest(dir, &m)?;
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}
