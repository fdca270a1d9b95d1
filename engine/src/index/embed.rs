//! Symbol vectors for `search_code_semantically` (spec section 24 "vector_index"): with
//! `[index] embeddings = "PROVIDER/MODEL"`, every definition of an indexed file (and the
//! opening of a file without definitions) is one chunk, embedded through the provider's
//! OpenAI-compatible `/v1/embeddings` endpoint
//! ([`crate::providers::ProviderClient::embed`]); a query is embedded the same way
//! and chunks are ranked by cosine similarity.
//!
//! Layout (`vectors.db`, SQLite, in the resource's index directory):
//! - `meta(key, value)`: `model` (`PROVIDER/MODEL`) and `dims`; vectors of another model are
//!   dropped and made again.
//! - `files(path, size, mtime_ns)`: the manifest's stamp of each file when it was embedded,
//!   so [`sync`] embeds only files whose stamp changed (and drops files no longer indexed).
//! - `chunks(path, ord, start_line, end_line, kind, name, vec)`: one row per chunk, `vec`
//!   the unit-length vector as little-endian `f32`s.
//!
//! Bounds: [`BATCH`] inputs per request, [`CHUNK_CHARS`] characters per chunk,
//! [`MAX_CHUNKS`] chunks per resource (files past it are not embedded and are counted).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rusqlite::{Connection, params};
use serde::Serialize;

use super::{IndexError, store, structure};
use crate::config::{Config, ProviderKind};
use crate::paths::Paths;
use crate::providers::{ClientOptions, ModelRef, ProviderClient};

/// Inputs per embeddings request.
pub const BATCH: usize = 64;
/// Longest chunk sent, in characters.
pub const CHUNK_CHARS: usize = 2000;
/// Most chunks embedded per resource.
pub const MAX_CHUNKS: usize = 20_000;
/// Lines of a definition's body (or a file's opening) put in its chunk.
const CHUNK_LINES: usize = 40;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER NOT NULL, mtime_ns TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (path TEXT NOT NULL, ord INTEGER NOT NULL, start_line INTEGER NOT NULL,
  end_line INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT, vec BLOB NOT NULL,
  PRIMARY KEY (path, ord)) WITHOUT ROWID;
";

/// The client embedding chunks and queries, with the `PROVIDER/MODEL` it was made for.
#[derive(Debug, Clone)]
pub struct Embedder {
    client: ProviderClient,
    name: String,
}

impl Embedder {
    /// A client for `name` (`PROVIDER/MODEL`) among `config`'s providers, its key read with
    /// `env`.
    ///
    /// # Errors
    /// A message naming `[index] embeddings` when the name is malformed, the provider is
    /// unknown or Anthropic, or its key is missing.
    pub fn connect(
        config: &Config,
        name: &str,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, String> {
        let key = "`[index] embeddings` in config.toml";
        let r = ModelRef::parse(name).map_err(|e| format!("{key}: {e}"))?;
        let providers = config.providers();
        if let Some(p) = providers.iter().find(|p| p.name == r.provider)
            && p.kind == ProviderKind::Anthropic
        {
            return Err(format!(
                "{key} names `{name}`, but provider `{}` is an Anthropic provider, which has no embeddings endpoint; name an OpenAI-compatible provider (`kind = \"openai\"`)",
                p.name
            ));
        }
        let client = ProviderClient::connect(&providers, &r, env, ClientOptions::default())
            .map_err(|e| format!("{key} (`{name}`): {e}"))?;
        Ok(Self {
            client,
            name: name.to_string(),
        })
    }

    /// `PROVIDER/MODEL`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Embeds `inputs` in one request, waiting for the reply on a thread of its own (so it
    /// works inside and outside an async runtime).
    ///
    /// # Errors
    /// [`IndexError::Embeddings`] with the provider's message.
    pub fn embed(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, IndexError> {
        let run = || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| IndexError::Embeddings(e.to_string()))?;
            rt.block_on(self.client.embed(inputs))
                .map_err(|e| IndexError::Embeddings(e.to_string()))
        };
        std::thread::scope(|s| {
            s.spawn(run)
                .join()
                .unwrap_or_else(|_| Err(IndexError::Embeddings("the request panicked".into())))
        })
    }
}

/// Whether (and how) semantic search is configured.
#[derive(Debug, Clone, Default)]
pub enum Setting {
    /// No `[index] embeddings`: semantic search falls back to text search.
    #[default]
    Off,
    /// Configured.
    On(Arc<Embedder>),
    /// Configured but unusable: the message says why.
    Broken(String),
}

/// The embeddings setting of the configuration in `paths` (keys read from the process
/// environment).
pub fn setting(paths: &Paths) -> Setting {
    let Ok(config) = Config::load(&paths.config_path) else {
        return Setting::Off;
    };
    let Some(name) = config
        .file
        .index
        .as_ref()
        .and_then(|i| i.embeddings.clone())
    else {
        return Setting::Off;
    };
    match Embedder::connect(&config, &name, |v| std::env::var(v).ok()) {
        Ok(e) => Setting::On(Arc::new(e)),
        Err(m) => Setting::Broken(m),
    }
}

/// What [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SyncReport {
    /// Files embedded (new or changed).
    pub files: Vec<String>,
    /// Chunks embedded.
    pub chunks: u64,
    /// Requests sent.
    pub requests: u64,
    /// Files whose vectors were dropped.
    pub removed: u64,
    /// Files not embedded because the resource reached [`MAX_CHUNKS`].
    pub over_limit: u64,
}

fn open(dir: &Path) -> Result<Connection, IndexError> {
    let conn = Connection::open(dir.join("vectors.db"))?;
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

fn meta(conn: &Connection, key: &str) -> Option<String> {
    conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
        .ok()
}

/// One chunk to embed.
struct Chunk {
    ord: i64,
    start_line: u64,
    end_line: u64,
    kind: String,
    name: Option<String>,
    text: String,
}

fn clip(text: String) -> String {
    match text.char_indices().nth(CHUNK_CHARS) {
        Some((at, _)) => text[..at].to_string(),
        None => text,
    }
}

/// The chunks of one file: its definitions, or its opening when it has none.
fn chunks_of(path: &str, text: &str, defs: &[structure::Definition]) -> Vec<Chunk> {
    let lines: Vec<&str> = text.lines().collect();
    let body = |from: u64, to: u64| {
        let a = from.saturating_sub(1) as usize;
        let b = (to as usize).min(lines.len()).min(a + CHUNK_LINES);
        lines.get(a..b).unwrap_or_default().join("\n")
    };
    if defs.is_empty() {
        let end = lines.len().max(1) as u64;
        return vec![Chunk {
            ord: 0,
            start_line: 1,
            end_line: end,
            kind: "file".into(),
            name: None,
            text: clip(format!("{path}\n{}", body(1, end))),
        }];
    }
    defs.iter()
        .map(|d| {
            let name = d.name(text);
            let doc = d.doc(text).unwrap_or_default();
            Chunk {
                ord: d.ord as i64,
                start_line: d.start_line,
                end_line: d.end_line,
                kind: d.kind.clone(),
                text: clip(format!(
                    "{path}\n{} {}\n{doc}\n{}",
                    d.kind,
                    name.as_deref().unwrap_or(""),
                    body(d.start_line, d.end_line)
                )),
                name,
            }
        })
        .collect()
}

fn unit(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn to_blob(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_blob(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Files waiting to be embedded, with their chunks.
type Pending = Vec<(String, store::FileMeta, Vec<Chunk>)>;

/// Embeds the pending files' chunks ([`BATCH`] per request) and stores them with the files'
/// stamps in one transaction.
fn flush(
    conn: &mut Connection,
    e: &Embedder,
    pending: &mut Pending,
    report: &mut SyncReport,
) -> Result<(), IndexError> {
    let texts: Vec<String> = pending
        .iter()
        .flat_map(|(_, _, c)| c.iter().map(|c| c.text.clone()))
        .collect();
    let mut vectors = Vec::with_capacity(texts.len());
    for batch in texts.chunks(BATCH) {
        vectors.extend(e.embed(batch)?);
        report.requests += 1;
    }
    let dims = vectors.first().map_or(0, Vec::len);
    let tx = conn.transaction()?;
    if dims > 0 {
        tx.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('dims', ?1)",
            [dims.to_string()],
        )?;
    }
    let mut vectors = vectors.into_iter();
    for (path, m, chunks) in pending.drain(..) {
        tx.execute("DELETE FROM chunks WHERE path = ?1", [&path])?;
        for c in chunks {
            let v = unit(vectors.next().unwrap_or_default());
            tx.execute(
                "INSERT INTO chunks (path, ord, start_line, end_line, kind, name, vec) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                params![path, c.ord, c.start_line as i64, c.end_line as i64, c.kind, c.name, to_blob(&v)],
            )?;
            report.chunks += 1;
        }
        tx.execute(
            "INSERT OR REPLACE INTO files (path, size, mtime_ns) VALUES (?1, ?2, ?3)",
            params![path, m.size as i64, m.mtime_ns.to_string()],
        )?;
        report.files.push(path);
    }
    tx.commit()?;
    Ok(())
}

/// Brings the vectors of the index in `dir` in line with its manifest: embeds the files
/// that are new or changed since they were embedded, drops those no longer indexed, and
/// starts over when the model changed. Cheap when nothing changed (a comparison of stamps).
///
/// # Errors
/// [`IndexError::Missing`] without an index; [`IndexError::Embeddings`] when the provider
/// fails (what was stored before the failure is kept).
pub fn sync(dir: &Path, e: &Embedder) -> Result<SyncReport, IndexError> {
    let m = store::read_manifest(dir).ok_or(IndexError::Missing)?;
    let mut conn = open(dir)?;
    if meta(&conn, "model").as_deref() != Some(e.name()) {
        conn.execute_batch("DELETE FROM chunks; DELETE FROM files; DELETE FROM meta;")?;
        conn.execute(
            "INSERT INTO meta (key, value) VALUES ('model', ?1)",
            [e.name()],
        )?;
    }
    let stamps: BTreeMap<String, (u64, String)> = {
        let mut st = conn.prepare("SELECT path, size, mtime_ns FROM files")?;
        let rows = st.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                (r.get::<_, i64>(1)? as u64, r.get::<_, String>(2)?),
            ))
        })?;
        rows.collect::<Result<_, _>>()?
    };
    let mut report = SyncReport::default();
    let gone: Vec<&String> = stamps
        .keys()
        .filter(|p| !m.files.contains_key(*p))
        .collect();
    for p in gone {
        conn.execute("DELETE FROM chunks WHERE path = ?1", [p])?;
        conn.execute("DELETE FROM files WHERE path = ?1", [p])?;
        report.removed += 1;
    }
    let mut stored: usize = conn.query_row("SELECT COUNT(*) FROM chunks", [], |r| {
        r.get::<_, i64>(0).map(|n| n as usize)
    })?;
    let sconn = structure::open(dir)?;
    let mut pending: Pending = Vec::new();
    let mut queued = 0;
    for (path, fm) in &m.files {
        let stamp = (fm.size, fm.mtime_ns.to_string());
        if stamps.get(path) == Some(&stamp) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(m.root.join(path)) else {
            continue;
        };
        let chunks = chunks_of(path, &text, &structure::definitions(&sconn, path)?);
        if stored + queued + chunks.len() > MAX_CHUNKS {
            report.over_limit += 1;
            continue;
        }
        queued += chunks.len();
        pending.push((path.clone(), fm.clone(), chunks));
        if queued >= BATCH {
            flush(&mut conn, e, &mut pending, &mut report)?;
            stored += queued;
            queued = 0;
        }
    }
    if !pending.is_empty() {
        flush(&mut conn, e, &mut pending, &mut report)?;
    }
    Ok(report)
}

/// A chunk ranked by similarity to a query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SemanticHit {
    /// The file.
    pub path: String,
    /// First line (1-based).
    pub start_line: u64,
    /// Last line (1-based, inclusive).
    pub end_line: u64,
    /// `function`, `class`, ... or `file` for a file's opening.
    pub kind: String,
    /// The definition's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub symbol: Option<String>,
    /// Cosine similarity to the query, -1 to 1.
    pub score: f32,
}

/// The `limit` chunks of the index in `dir` closest to `query` (a vector of the same model),
/// best first.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn nearest(dir: &Path, query: &[f32], limit: usize) -> Result<Vec<SemanticHit>, IndexError> {
    let q = unit(query.to_vec());
    let conn = open(dir)?;
    let mut st = conn.prepare("SELECT path, start_line, end_line, kind, name, vec FROM chunks")?;
    let rows = st.query_map([], |r| {
        Ok((
            SemanticHit {
                path: r.get(0)?,
                start_line: r.get::<_, i64>(1)? as u64,
                end_line: r.get::<_, i64>(2)? as u64,
                kind: r.get(3)?,
                symbol: r.get(4)?,
                score: 0.0,
            },
            r.get::<_, Vec<u8>>(5)?,
        ))
    })?;
    let mut hits = Vec::new();
    for row in rows {
        let (mut h, blob) = row?;
        let v = from_blob(&blob);
        if v.len() != q.len() {
            continue;
        }
        h.score = v.iter().zip(&q).map(|(a, b)| a * b).sum();
        hits.push(h);
    }
    hits.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.cmp(&b.path))
            .then(a.start_line.cmp(&b.start_line))
    });
    hits.truncate(limit);
    Ok(hits)
}

/// How many chunks the index in `dir` holds vectors for, and their model.
pub fn stored(dir: &Path) -> Option<(u64, String)> {
    if !dir.join("vectors.db").exists() {
        return None;
    }
    let conn = open(dir).ok()?;
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM chunks", [], |r| r.get(0))
        .ok()?;
    Some((n as u64, meta(&conn, "model")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_chunks_are_clipped() {
        let v = unit(vec![3.0, 4.0]);
        assert_eq!(from_blob(&to_blob(&v)), vec![0.6, 0.8]);
        let long = "x".repeat(CHUNK_CHARS + 10);
        let c = chunks_of("a.txt", &long, &[]);
        assert_eq!((c.len(), c[0].text.chars().count()), (1, CHUNK_CHARS));
        assert_eq!(c[0].kind, "file");
    }
}
