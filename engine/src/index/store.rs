//! Where a resource's index lives and what it records (spec section 24 "text_index"): one
//! directory per resource under `<data>/indexes/`, holding the tantivy index (`text/`), the
//! code structure (`structure.db`, see [`super::structure`]) and the manifest (state,
//! indexed commit, per-file size and mtime, skip counts, last indexed time).
//!
//! The tantivy schema holds postings and one small integer per document, nothing stored:
//! a document is a file, with `file` (its id in `structure.db`, which holds its path and
//! its definitions), `content` (code-tokenized, with frequencies and field norms),
//! `path_text` and `lang`. No field has positions; snippets are read from the files or the
//! base commit. Definitions are not documents of their own: a search joins each file hit to
//! the file's definitions whose name or docstring holds a query term (see
//! [`super::view`]), which answers the same questions without a second copy of every name.
//! A full build merges its segments into one.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, ReloadPolicy};

use super::IndexError;
use super::tokenizer::{self, CodeTokenizer};
use super::walk::Skipped;
use crate::paths::Paths;

/// Version of the on-disk layout; an index of another version is rebuilt.
pub const LAYOUT_VERSION: u32 = 2;

/// The fields of the text index.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// The file's id (`structure.db` `paths.id`), indexed (to delete a file's document) and
    /// fast (to resolve a hit).
    pub file: Field,
    /// Relative path, tokenized.
    pub path_text: Field,
    /// Language name, exact.
    pub lang: Field,
    /// The file's contents, tokenized.
    pub content: Field,
}

/// The schema and its fields.
pub fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let code = |freqs: bool, norms: bool| {
        TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(tokenizer::NAME)
                .set_fieldnorms(norms)
                .set_index_option(if freqs {
                    IndexRecordOption::WithFreqs
                } else {
                    IndexRecordOption::Basic
                }),
        )
    };
    let exact = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer("raw")
            .set_fieldnorms(false)
            .set_index_option(IndexRecordOption::Basic),
    );
    let fields = Fields {
        file: b.add_u64_field("file", NumericOptions::default().set_indexed().set_fast()),
        path_text: b.add_text_field("path_text", code(false, false)),
        lang: b.add_text_field("lang", exact),
        content: b.add_text_field("content", code(true, true)),
    };
    (b.build(), fields)
}

/// Registers the code tokenizer on an index.
pub fn register(index: &Index) {
    index
        .tokenizers()
        .register(tokenizer::NAME, CodeTokenizer::default());
}

/// A reader that sees a commit as soon as [`IndexReader::reload`] is called.
///
/// # Errors
/// [`IndexError::Tantivy`].
pub fn reader(index: &Index) -> Result<IndexReader, IndexError> {
    Ok(index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?)
}

/// Kind of resource an index follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// A git checkout: changes come from the diff against the indexed commit and `git status`.
    Git,
    /// A directory: changes come from size and mtime.
    Directory,
}

/// What is known of one indexed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileMeta {
    /// Size in bytes when indexed.
    pub size: u64,
    /// Modification time in nanoseconds when indexed.
    pub mtime_ns: u128,
    /// Language, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lang: Option<String>,
    /// Definitions found.
    #[serde(default)]
    pub symbols: u32,
    /// Binary contents: seen, not indexed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
}

/// The manifest ([`MANIFEST`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Manifest {
    /// [`LAYOUT_VERSION`].
    pub version: u32,
    /// The resource's name.
    pub resource: String,
    /// The indexed root directory.
    pub root: PathBuf,
    /// What follows changes.
    pub source: Source,
    /// `ready` or `indexing`.
    pub state: String,
    /// HEAD when last indexed (git checkouts).
    pub indexed_commit: Option<String>,
    /// Paths that differed from `indexed_commit` in the work tree when last indexed.
    #[serde(default)]
    pub dirty: Vec<String>,
    /// Indexed files.
    pub files: BTreeMap<String, FileMeta>,
    /// Binary files seen (not indexed), so an update does not read them again.
    #[serde(default)]
    pub binary: BTreeMap<String, FileMeta>,
    /// Skipped files by reason.
    pub skipped: Skipped,
    /// When last brought up to date.
    pub last_indexed_at: Option<Timestamp>,
    /// Wall time of the last full build, in milliseconds.
    #[serde(default)]
    pub build_ms: u64,
    /// Embedding model, when symbol vectors are stored (`PROVIDER/MODEL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embeddings: Option<String>,
}

/// The directory holding every resource index.
pub fn indexes_dir(paths: &Paths) -> PathBuf {
    paths.data_dir.join("indexes")
}

/// The directory of one resource's index (`local/api` -> `indexes/local+api`).
pub fn dir(paths: &Paths, resource: &str) -> PathBuf {
    let key: String = resource
        .chars()
        .map(|c| match c {
            '/' => '+',
            ':' => '=',
            c if c.is_alphanumeric() || matches!(c, '-' | '_' | '.') => c,
            _ => '_',
        })
        .collect();
    indexes_dir(paths).join(key)
}

/// The tantivy directory inside an index directory.
pub fn text_dir(dir: &Path) -> PathBuf {
    dir.join("text")
}

/// The manifest's file name in an index directory: JSON, LZ4-compressed (its per-file
/// paths and times compress several times over).
pub const MANIFEST: &str = "manifest.json.lz4";

/// Reads the manifest, or `None` when there is none (or of another layout version).
pub fn read_manifest(dir: &Path) -> Option<Manifest> {
    let packed = std::fs::read(dir.join(MANIFEST)).ok()?;
    let text = lz4_flex::decompress_size_prepended(&packed).ok()?;
    serde_json::from_slice::<Manifest>(&text)
        .ok()
        .filter(|m| m.version == LAYOUT_VERSION)
}

/// Writes the manifest atomically.
///
/// # Errors
/// [`IndexError::Io`].
pub fn write_manifest(dir: &Path, m: &Manifest) -> Result<(), IndexError> {
    let text = serde_json::to_vec(m).map_err(|e| IndexError::Io(e.to_string()))?;
    let tmp = dir.join(format!("{MANIFEST}.tmp"));
    std::fs::write(&tmp, lz4_flex::compress_prepend_size(&text))
        .map_err(|e| IndexError::io(&tmp, e))?;
    std::fs::rename(&tmp, dir.join(MANIFEST)).map_err(|e| IndexError::io(&dir.join(MANIFEST), e))
}

/// Total size of the files under `dir`, in bytes.
pub fn size_of(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

/// Opens the text index of an index directory, creating it when absent.
///
/// # Errors
/// [`IndexError`].
pub fn open_text(dir: &Path) -> Result<(Index, Fields), IndexError> {
    let (schema, fields) = schema();
    let text = text_dir(dir);
    std::fs::create_dir_all(&text).map_err(|e| IndexError::io(&text, e))?;
    let directory = tantivy::directory::MmapDirectory::open(&text)
        .map_err(|e| IndexError::Io(format!("{}: {e}", text.display())))?;
    let index = Index::open_or_create(directory, schema)?;
    register(&index);
    Ok((index, fields))
}
