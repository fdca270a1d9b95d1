//! The code structure store (spec section 24 "graph_index", kept in SQLite): per resource
//! index, `structure.db` holds the files, every definition (kind, span, cyclomatic
//! complexity, where its name and docstring are in the file), imports (resolved to indexed
//! files where possible, best effort), calls by name and TODO/FIXME/HACK markers.
//! Transitive imports are a recursive query; import cycles are the strongly connected
//! components of the import graph (Tarjan's algorithm).
//!
//! The store is compact by construction: paths and names are interned (`paths`, `strings`)
//! and every other table holds integers only (kinds, languages and call names are interned
//! strings too), clustered by file (`WITHOUT ROWID`). A file's definitions are one packed
//! column of `files` (`defs`: per definition, as LEB128 varints, its kind's string id, its
//! first line and name offset as deltas from the previous definition's, its length in lines,
//! complexity, name length and docstring span; see [`pack`]), read back by [`unpack`]. Text the
//! file already holds (a definition's name, signature and docstring, a marker's line) is
//! recorded as a position in the file and read from it (or from the base commit) when
//! asked; [`Definition::name`], [`Definition::signature`] and [`Definition::doc`] do so.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};
use serde::Serialize;

use super::IndexError;
use super::symbols::{self, Structure};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS paths (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS strings (id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS files (file INTEGER PRIMARY KEY, lang INTEGER, lines INTEGER NOT NULL,
  size INTEGER NOT NULL, defs BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS imports (file INTEGER NOT NULL, line INTEGER NOT NULL, module INTEGER NOT NULL,
  target INTEGER, PRIMARY KEY (file, line, module)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS imports_target ON imports(target);
CREATE TABLE IF NOT EXISTS calls (file INTEGER NOT NULL, name INTEGER NOT NULL, lines TEXT NOT NULL,
  PRIMARY KEY (file, name)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS calls_name ON calls(name);
CREATE TABLE IF NOT EXISTS markers (file INTEGER NOT NULL, line INTEGER NOT NULL, tag INTEGER NOT NULL,
  PRIMARY KEY (file, line)) WITHOUT ROWID;
";

/// Marker tags, by their code in `markers.tag`.
pub const TAGS: &[&str] = &["TODO", "FIXME", "HACK"];

fn code_of(table: &[&str], name: &str) -> Option<i64> {
    table.iter().position(|k| *k == name).map(|i| i as i64)
}

fn name_of(table: &'static [&'static str], code: Option<i64>) -> Option<&'static str> {
    code.and_then(|c| table.get(usize::try_from(c).ok()?).copied())
}

/// Opens (creating) `structure.db` in an index directory.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn open(dir: &Path) -> Result<Connection, IndexError> {
    let conn = Connection::open(dir.join("structure.db"))?;
    conn.execute_batch("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;")?;
    conn.execute_batch(SCHEMA)?;
    Ok(conn)
}

/// One file's facts, ready to store.
#[derive(Debug, Clone, Default)]
pub struct FileFacts {
    /// The file's id (`paths.id`), shared with the text index.
    pub id: i64,
    /// Relative path.
    pub path: String,
    /// Language.
    pub lang: Option<String>,
    /// Line count.
    pub lines: u64,
    /// Size in bytes.
    pub size: u64,
    /// Parsed structure.
    pub structure: Structure,
    /// TODO/FIXME/HACK markers: (line, tag).
    pub markers: Vec<(u64, &'static str)>,
}

/// The TODO/FIXME/HACK markers of a text: (line, tag).
pub fn markers(text: &str) -> Vec<(u64, &'static str)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some(tag) = marker_of(line) {
            out.push((i as u64 + 1, tag));
        }
    }
    out
}

/// The marker tag a line holds, if any.
fn marker_of(line: &str) -> Option<&'static str> {
    TAGS.iter().copied().find(|tag| {
        line.find(tag).is_some_and(|at| {
            let rest = &line[at + tag.len()..];
            rest.starts_with([':', '(', ' ']) || rest.is_empty()
        })
    })
}

/// The ids of `paths`, adding the paths not known yet.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn ids(conn: &Connection, paths: &[&str]) -> Result<Vec<i64>, IndexError> {
    let mut add = conn.prepare_cached("INSERT OR IGNORE INTO paths (path) VALUES (?1)")?;
    let mut get = conn.prepare_cached("SELECT id FROM paths WHERE path = ?1")?;
    let mut out = Vec::with_capacity(paths.len());
    for p in paths {
        add.execute([p])?;
        out.push(get.query_row([p], |r| r.get(0))?);
    }
    Ok(out)
}

/// The id of an indexed file, if it is one.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn id_of(conn: &Connection, path: &str) -> Result<Option<i64>, IndexError> {
    Ok(conn
        .query_row(
            "SELECT f.file FROM paths p JOIN files f ON f.file = p.id WHERE p.path = ?1",
            [path],
            |r| r.get(0),
        )
        .optional()?)
}

/// The path of a file id.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn path_of(conn: &Connection, id: i64) -> Result<Option<String>, IndexError> {
    Ok(conn
        .prepare_cached("SELECT path FROM paths WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()?)
}

/// The path and line count of file `id`.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn file_row(conn: &Connection, id: i64) -> Result<Option<(String, u64)>, IndexError> {
    Ok(conn
        .prepare_cached(
            "SELECT p.path, f.lines FROM files f JOIN paths p ON p.id = f.file WHERE f.file = ?1",
        )?
        .query_row([id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64)))
        .optional()?)
}

fn intern(tx: &Connection, text: &str) -> Result<i64, IndexError> {
    tx.prepare_cached("INSERT OR IGNORE INTO strings (text) VALUES (?1)")?
        .execute([text])?;
    Ok(tx
        .prepare_cached("SELECT id FROM strings WHERE text = ?1")?
        .query_row([text], |r| r.get(0))?)
}

/// Replaces the facts of the `remove` paths and of `facts` in one transaction, then
/// resolves imports. With `full`, the store was empty and is compacted afterwards.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn replace(
    conn: &mut Connection,
    remove: &[String],
    facts: &[FileFacts],
    full: bool,
) -> Result<(), IndexError> {
    let tx = conn.transaction()?;
    for p in remove {
        if let Some(id) = id_of(&tx, p)? {
            delete_file(&tx, id)?;
            tx.execute("DELETE FROM paths WHERE id = ?1", [id])?;
        }
    }
    for f in facts {
        delete_file(&tx, f.id)?;
    }
    insert(&tx, facts)?;
    let only: Option<HashSet<i64>> = (!full).then(|| facts.iter().map(|f| f.id).collect());
    resolve_imports(&tx, only.as_ref())?;
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    if full {
        // Pages of the indexes filled in random order are rewritten full.
        conn.execute_batch("VACUUM; PRAGMA wal_checkpoint(TRUNCATE);")?;
    }
    Ok(())
}

fn delete_file(tx: &Connection, id: i64) -> Result<(), IndexError> {
    for table in ["imports", "calls", "markers"] {
        tx.prepare_cached(&format!("DELETE FROM {table} WHERE file = ?1"))?
            .execute([id])?;
    }
    tx.prepare_cached("DELETE FROM files WHERE file = ?1")?
        .execute([id])?;
    Ok(())
}

fn insert(tx: &Connection, facts: &[FileFacts]) -> Result<(), IndexError> {
    let mut path = tx.prepare_cached("INSERT OR IGNORE INTO paths (id, path) VALUES (?1, ?2)")?;
    let mut file = tx.prepare_cached("INSERT INTO files VALUES (?1, ?2, ?3, ?4, ?5)")?;
    let mut imp = tx.prepare_cached("INSERT OR IGNORE INTO imports VALUES (?1, ?2, ?3, NULL)")?;
    let mut call = tx.prepare_cached("INSERT INTO calls VALUES (?1, ?2, ?3)")?;
    let mut mark = tx.prepare_cached("INSERT OR IGNORE INTO markers VALUES (?1, ?2, ?3)")?;
    for f in facts {
        path.execute(params![f.id, f.path])?;
        let lang = f.lang.as_deref().map(|l| intern(tx, l)).transpose()?;
        let mut kinds = Vec::with_capacity(f.structure.symbols.len());
        for s in &f.structure.symbols {
            kinds.push(intern(tx, &s.kind)? as u64);
        }
        let defs = pack(&f.structure.symbols, &kinds);
        file.execute(params![f.id, lang, f.lines as i64, f.size as i64, defs])?;
        for i in &f.structure.imports {
            imp.execute(params![f.id, i.line as i64, intern(tx, &i.module)?])?;
        }
        let mut by_name: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for (name, line) in &f.structure.calls {
            by_name.entry(name).or_default().push(line.to_string());
        }
        for (name, lines) in by_name {
            call.execute(params![f.id, intern(tx, name)?, lines.join(",")])?;
        }
        for (line, tag) in &f.markers {
            mark.execute(params![f.id, *line as i64, code_of(TAGS, tag).unwrap_or(0)])?;
        }
    }
    Ok(())
}

/// Resolves import targets to indexed files (best effort, by language rules): every import,
/// or (after an update) only the imports of the files in `only`, so an update stays
/// proportional to what changed.
fn resolve_imports(conn: &Connection, only: Option<&HashSet<i64>>) -> Result<(), IndexError> {
    let ids: HashMap<String, i64> = conn
        .prepare("SELECT p.path, p.id FROM paths p JOIN files f ON f.file = p.id")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let files: HashSet<String> = ids.keys().cloned().collect();
    let by_id: HashMap<i64, &str> = ids.iter().map(|(p, i)| (*i, p.as_str())).collect();
    let mut dirs: HashMap<String, String> = HashMap::new();
    let mut sorted: Vec<&String> = files.iter().collect();
    sorted.sort();
    for f in sorted {
        if let Some((d, _)) = f.rsplit_once('/')
            && f.ends_with(".go")
        {
            dirs.entry(d.to_string()).or_insert_with(|| f.clone());
        }
    }
    let rows: Vec<(i64, i64, i64, String)> = conn
        .prepare("SELECT i.file, i.line, i.module, s.text FROM imports i JOIN strings s ON s.id = i.module")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<Result<_, _>>()?;
    let mut set = conn
        .prepare("UPDATE imports SET target = ?4 WHERE file = ?1 AND line = ?2 AND module = ?3")?;
    for (file, line, module, text) in rows {
        if only.is_some_and(|o| !o.contains(&file)) {
            continue;
        }
        let Some(from) = by_id.get(&file) else {
            continue;
        };
        let target = resolve(&files, &dirs, from, &text).and_then(|t| ids.get(&t).copied());
        set.execute(params![file, line, module, target])?;
    }
    Ok(())
}

/// One definition as stored: where it is, what it is, where its name and docstring are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Definition {
    /// Its file.
    pub path: String,
    /// Its position among the file's definitions (1-based, in line order).
    pub ord: u64,
    /// `function`, `method`, `class`, ...
    pub kind: String,
    /// First line (1-based).
    pub start_line: u64,
    /// Last line (1-based, inclusive).
    pub end_line: u64,
    /// Cyclomatic complexity.
    pub complexity: u32,
    /// Byte offset of its name in the file.
    pub name_at: u64,
    /// Length of its name in bytes.
    pub name_len: u64,
    /// Lines of its comment or docstring (1-based, inclusive), if it has one.
    pub doc_lines: Option<(u64, u64)>,
}

impl Definition {
    /// Its name, read from the file's `text`.
    pub fn name(&self, text: &str) -> Option<String> {
        let (a, b) = (
            self.name_at as usize,
            (self.name_at + self.name_len) as usize,
        );
        text.get(a..b).map(str::to_string)
    }

    /// Its signature: its first line, trimmed, read from `text`.
    pub fn signature(&self, text: &str) -> Option<String> {
        text.lines()
            .nth(self.start_line.saturating_sub(1) as usize)
            .map(|l| l.trim().to_string())
    }

    /// Its comment or docstring, read from `text` as the index extracted it.
    pub fn doc(&self, text: &str) -> Option<String> {
        self.doc_lines?;
        let g = symbols::language_of(&self.path).and_then(symbols::grammar)?;
        let lines: Vec<&str> = text.lines().collect();
        symbols::doc_of(g, &lines, self.start_line.saturating_sub(1) as usize).map(|(d, _)| d)
    }
}

fn put(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

fn get(bytes: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Packs a file's definitions (in line order) with their kinds' string ids: per definition
/// eight varints (kind, first line delta, length in lines, complexity, name offset delta,
/// name length, docstring start relative to the first line (zigzag, 0 for none) and
/// docstring length in lines).
pub fn pack(defs: &[symbols::Symbol], kinds: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(defs.len() * 9);
    let (mut line, mut at) = (0i64, 0i64);
    for (s, kind) in defs.iter().zip(kinds) {
        put(&mut out, *kind);
        put(&mut out, zigzag(s.start_line as i64 - line));
        put(&mut out, s.end_line.saturating_sub(s.start_line));
        put(&mut out, u64::from(s.complexity));
        put(&mut out, zigzag(s.name_at as i64 - at));
        put(&mut out, s.name.len() as u64);
        match s.doc_lines {
            Some((a, b)) => {
                put(&mut out, zigzag(a as i64 - s.start_line as i64) + 1);
                put(&mut out, b.saturating_sub(a));
            }
            None => {
                put(&mut out, 0);
                put(&mut out, 0);
            }
        }
        line = s.start_line as i64;
        at = s.name_at as i64;
    }
    out
}

/// A packed definition before its kind is named: ([`Definition`] without path and kind, the
/// kind's string id).
type Unpacked = (Definition, u64);

/// Unpacks what [`pack`] wrote; the definitions of `path`, numbered from 1, with their
/// kinds' string ids (the kind field left empty).
pub fn unpack(path: &str, bytes: &[u8]) -> Vec<Unpacked> {
    let mut out = Vec::new();
    let mut at = 0;
    let (mut line, mut name_at) = (0i64, 0i64);
    while at < bytes.len() {
        let mut next = || get(bytes, &mut at);
        let (Some(kind), Some(dl), Some(len), Some(cx), Some(dn), Some(nl), Some(ds), Some(dlen)) = (
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
            next(),
        ) else {
            break;
        };
        line += unzigzag(dl);
        name_at += unzigzag(dn);
        let start = line.max(0) as u64;
        let doc_lines = (ds > 0).then(|| {
            let a = (start as i64 + unzigzag(ds - 1)).max(1) as u64;
            (a, a + dlen)
        });
        out.push((
            Definition {
                path: path.to_string(),
                ord: out.len() as u64 + 1,
                kind: String::new(),
                start_line: start,
                end_line: start + len,
                complexity: u32::try_from(cx).unwrap_or(u32::MAX),
                name_at: name_at.max(0) as u64,
                name_len: nl,
                doc_lines,
            },
            kind,
        ));
    }
    out
}

/// The definitions of the files whose path matches the SQL `LIKE` pattern `like` (or the
/// file `id`), with their kinds named.
fn definitions_where(
    conn: &Connection,
    filter: &str,
    arg: &dyn rusqlite::ToSql,
) -> Result<Vec<Definition>, IndexError> {
    let rows: Vec<(String, Vec<u8>)> = conn
        .prepare_cached(&format!(
            "SELECT p.path, f.defs FROM files f JOIN paths p ON p.id = f.file WHERE {filter}"
        ))?
        .query_map([arg], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let mut kinds: HashMap<u64, String> = HashMap::new();
    let mut out = Vec::new();
    for (path, defs) in rows {
        for (mut d, kind) in unpack(&path, &defs) {
            if let std::collections::hash_map::Entry::Vacant(slot) = kinds.entry(kind) {
                let k: Option<String> = conn
                    .prepare_cached("SELECT text FROM strings WHERE id = ?1")?
                    .query_row([kind as i64], |r| r.get(0))
                    .optional()?;
                slot.insert(k.unwrap_or_else(|| "definition".into()));
            }
            d.kind.clone_from(&kinds[&kind]);
            out.push(d);
        }
    }
    Ok(out)
}

/// Definition `ord` of file `id`.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn definition(conn: &Connection, id: i64, ord: u64) -> Result<Option<Definition>, IndexError> {
    Ok(definitions_where(conn, "f.file = ?1", &id)?
        .into_iter()
        .nth(ord.saturating_sub(1) as usize))
}

/// Every definition of a file, in line order.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn definitions(conn: &Connection, path: &str) -> Result<Vec<Definition>, IndexError> {
    definitions_where(conn, "p.path = ?1", &path)
}

/// Where `name` is called (by name, best effort): (file, line), by file.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn callers(conn: &Connection, name: &str) -> Result<Vec<(String, u64)>, IndexError> {
    let rows: Vec<(String, String)> = conn
        .prepare(
            "SELECT p.path, c.lines FROM calls c JOIN strings s ON s.id = c.name
               JOIN paths p ON p.id = c.file WHERE s.text = ?1 ORDER BY p.path",
        )?
        .query_map([name], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    Ok(rows
        .into_iter()
        .flat_map(|(p, lines)| {
            lines
                .split(',')
                .filter_map(|l| l.parse().ok())
                .map(|l| (p.clone(), l))
                .collect::<Vec<_>>()
        })
        .collect())
}

fn normalize(parts: Vec<&str>) -> String {
    let mut out: Vec<&str> = Vec::new();
    for p in parts.into_iter().flat_map(|p| p.split('/')) {
        match p {
            "" | "." => {}
            ".." => {
                out.pop();
            }
            p => out.push(p),
        }
    }
    out.join("/")
}

fn parent_dir(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// The indexed file an import names, if any.
pub fn resolve(
    files: &HashSet<String>,
    go_dirs: &HashMap<String, String>,
    from: &str,
    module: &str,
) -> Option<String> {
    let dir = parent_dir(from);
    let first = |cands: Vec<String>| cands.into_iter().find(|c| files.contains(c));
    if from.ends_with(".py") {
        let dots = module.chars().take_while(|c| *c == '.').count();
        let rest = module[dots..].replace('.', "/");
        let base = if dots > 0 {
            let mut d = dir.to_string();
            for _ in 1..dots {
                d = parent_dir(&d).to_string();
            }
            normalize(vec![&d, &rest])
        } else {
            rest.clone()
        };
        let mut c = vec![format!("{base}.py"), format!("{base}/__init__.py")];
        if dots == 0 {
            c.push(normalize(vec![dir, &format!("{rest}.py")]));
        }
        return first(c).or_else(|| {
            let tail = format!("/{rest}.py");
            files.iter().filter(|f| f.ends_with(&tail)).min().cloned()
        });
    }
    if [".js", ".jsx", ".mjs", ".cjs", ".ts", ".tsx", ".mts"]
        .iter()
        .any(|e| from.ends_with(e))
    {
        if !module.starts_with('.') {
            return None;
        }
        let base = normalize(vec![dir, module]);
        let exts = [
            "",
            ".ts",
            ".tsx",
            ".js",
            ".jsx",
            ".mjs",
            "/index.ts",
            "/index.tsx",
            "/index.js",
        ];
        return first(exts.iter().map(|e| format!("{base}{e}")).collect());
    }
    if from.ends_with(".rs") {
        let segs: Vec<&str> = module.split("::").collect();
        let (root, rest): (String, &[&str]) = match segs.first() {
            Some(&"crate") => {
                let src = from.find("src/").map(|i| &from[..i + 3]).unwrap_or("src");
                (src.to_string(), &segs[1..])
            }
            Some(&"super") => (parent_dir(dir).to_string(), &segs[1..]),
            Some(&"self") => (dir.to_string(), &segs[1..]),
            _ => return None,
        };
        for k in (1..=rest.len()).rev() {
            let p = normalize(
                std::iter::once(root.as_str())
                    .chain(rest[..k].iter().copied())
                    .collect(),
            );
            if let Some(f) = first(vec![format!("{p}.rs"), format!("{p}/mod.rs")]) {
                return Some(f);
            }
        }
        return first(vec![format!("{root}/lib.rs"), format!("{root}/main.rs")]);
    }
    if from.ends_with(".go") {
        let mut best: Option<(&String, &String)> = None;
        for (d, f) in go_dirs {
            if (module == d || module.ends_with(&format!("/{d}")))
                && best.is_none_or(|(b, _)| d.len() > b.len())
            {
                best = Some((d, f));
            }
        }
        return best.map(|(_, f)| f.clone());
    }
    None
}

/// What `analyze_dependencies` answers for a file.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Dependencies {
    /// The file.
    pub path: String,
    /// Direct imports resolved to indexed files.
    pub direct: Vec<String>,
    /// Imports that name no indexed file (external or unresolved), as written.
    pub external: Vec<String>,
    /// Every file reachable through imports, with its distance.
    pub transitive: Vec<(String, u32)>,
    /// Files that import this one directly.
    pub imported_by: Vec<String>,
    /// Import cycles this file is part of (each a list of files).
    pub circular: Vec<Vec<String>>,
}

/// Direct, transitive and circular dependencies of `path`.
///
/// # Errors
/// [`IndexError::Structure`]; [`IndexError::NotIndexed`] for a path not in the index.
pub fn dependencies(conn: &Connection, path: &str) -> Result<Dependencies, IndexError> {
    let Some(id) = id_of(conn, path)? else {
        return Err(IndexError::NotIndexed(path.to_string()));
    };
    let strings = |sql: &str| -> Result<Vec<String>, IndexError> {
        Ok(conn
            .prepare(sql)?
            .query_map([id], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    };
    let direct = strings(
        "SELECT DISTINCT p.path FROM imports i JOIN paths p ON p.id = i.target
           WHERE i.file = ?1 AND i.target != ?1 ORDER BY 1",
    )?;
    let external = strings(
        "SELECT DISTINCT s.text FROM imports i JOIN strings s ON s.id = i.module
           WHERE i.file = ?1 AND i.target IS NULL ORDER BY 1",
    )?;
    let imported_by = strings(
        "SELECT DISTINCT p.path FROM imports i JOIN paths p ON p.id = i.file
           WHERE i.target = ?1 AND i.file != ?1 ORDER BY 1",
    )?;
    let transitive: Vec<(String, u32)> = conn
        .prepare(
            "WITH RECURSIVE reach(f, d) AS (
               SELECT target, 1 FROM imports WHERE file = ?1 AND target IS NOT NULL
               UNION
               SELECT i.target, r.d + 1 FROM imports i JOIN reach r ON i.file = r.f
                 WHERE i.target IS NOT NULL AND r.d < 64)
             SELECT p.path, min(d) FROM reach JOIN paths p ON p.id = reach.f
               WHERE f != ?1 GROUP BY f ORDER BY 2, 1",
        )?
        .query_map([id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    let circular = cycles(conn)?
        .into_iter()
        .filter(|c| c.iter().any(|p| p == path))
        .collect();
    Ok(Dependencies {
        path: path.to_string(),
        direct,
        external,
        transitive,
        imported_by,
        circular,
    })
}

/// Every import cycle of the resource: the strongly connected components with two or more
/// files, or one file importing itself (Tarjan's algorithm), each sorted.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn cycles(conn: &Connection) -> Result<Vec<Vec<String>>, IndexError> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let edges: Vec<(String, String)> = conn
        .prepare(
            "SELECT DISTINCT a.path, b.path FROM imports i JOIN paths a ON a.id = i.file
               JOIN paths b ON b.id = i.target",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (a, b) in edges {
        graph.entry(b.clone()).or_default();
        graph.entry(a).or_default().insert(b);
    }
    Ok(tarjan(&graph))
}

/// Strongly connected components with a cycle, iteratively (no recursion limit).
pub fn tarjan(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let names: Vec<&String> = graph.keys().collect();
    let id: HashMap<&String, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let adj: Vec<Vec<usize>> = names
        .iter()
        .map(|n| {
            graph[*n]
                .iter()
                .filter_map(|m| id.get(m).copied())
                .collect()
        })
        .collect();
    let n = names.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut out, mut next) = (Vec::new(), Vec::new(), 0);
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i == 0 && index[v] == usize::MAX {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if *i < adj[v].len() {
                let w = adj[v][*i];
                *i += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(u, _)) = work.last() {
                low[u] = low[u].min(low[v]);
            }
            if low[v] == index[v] {
                let mut comp = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    comp.push(names[w].clone());
                    if w == v {
                        break;
                    }
                }
                if comp.len() > 1 || adj[v].contains(&v) {
                    comp.sort();
                    out.push(comp);
                }
            }
        }
    }
    out.sort();
    out
}

/// A refactoring candidate.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Target {
    /// File.
    pub path: String,
    /// Definition name, for complexity findings.
    pub name: Option<String>,
    /// First line.
    pub line: u64,
    /// `complexity`, `long_definition`, `large_file`, `TODO`, `FIXME` or `HACK`.
    pub reason: String,
    /// The measure (complexity, lines) or the marker's text.
    pub detail: String,
}

/// Refactoring candidates under a path prefix (`""` for all): the most complex and longest
/// definitions, the largest files, and TODO/FIXME/HACK markers. Names and marker lines are
/// read with `read` (a file's text by path).
///
/// # Errors
/// [`IndexError::Structure`].
pub fn refactoring_targets(
    conn: &Connection,
    scope: &str,
    limit: usize,
    read: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Target>, IndexError> {
    let like = format!("{}%", scope.trim_start_matches("./").replace('%', "\\%"));
    let lim = limit as i64;
    let mut texts: HashMap<String, Option<String>> = HashMap::new();
    let mut text_of = |p: &str| -> Option<String> {
        texts
            .entry(p.to_string())
            .or_insert_with(|| read(p))
            .clone()
    };
    let mut out: Vec<Target> = Vec::new();
    let all = definitions_where(conn, "p.path LIKE ?1 ESCAPE '\\'", &like)?;
    let mut complex: Vec<&Definition> = all.iter().filter(|d| d.complexity > 5).collect();
    complex.sort_by(|a, b| b.complexity.cmp(&a.complexity).then(a.path.cmp(&b.path)));
    for d in complex.into_iter().take(limit) {
        let name = text_of(&d.path).and_then(|t| d.name(&t));
        out.push(Target {
            path: d.path.clone(),
            name,
            line: d.start_line,
            reason: "complexity".into(),
            detail: format!(
                "cyclomatic complexity {}, {} lines",
                d.complexity,
                d.end_line + 1 - d.start_line
            ),
        });
    }
    let mut long: Vec<&Definition> = all
        .iter()
        .filter(|d| matches!(d.kind.as_str(), "function" | "method"))
        .filter(|d| d.end_line + 1 - d.start_line > 60)
        .collect();
    long.sort_by(|a, b| {
        (b.end_line - b.start_line)
            .cmp(&(a.end_line - a.start_line))
            .then(a.path.cmp(&b.path))
    });
    for d in long.into_iter().take(limit) {
        let name = text_of(&d.path).and_then(|t| d.name(&t));
        out.push(Target {
            path: d.path.clone(),
            name,
            line: d.start_line,
            reason: "long_definition".into(),
            detail: format!("{} lines", d.end_line + 1 - d.start_line),
        });
    }
    let mut q = conn.prepare("SELECT p.path, f.lines FROM files f JOIN paths p ON p.id = f.file WHERE p.path LIKE ?1 ESCAPE '\\' AND f.lines > 500 ORDER BY f.lines DESC, p.path LIMIT ?2")?;
    for r in q.query_map(params![like, lim], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })? {
        let (path, lines) = r?;
        out.push(Target {
            path,
            name: None,
            line: 1,
            reason: "large_file".into(),
            detail: format!("{lines} lines"),
        });
    }
    let mut q = conn.prepare("SELECT p.path, m.line, m.tag FROM markers m JOIN paths p ON p.id = m.file WHERE p.path LIKE ?1 ESCAPE '\\' ORDER BY CASE m.tag WHEN 1 THEN 0 WHEN 2 THEN 1 ELSE 2 END, p.path, m.line LIMIT ?2")?;
    let rows: Vec<(String, i64, i64)> = q
        .query_map(params![like, lim], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    for (path, line, tag) in rows {
        let text = text_of(&path)
            .and_then(|t| {
                t.lines()
                    .nth(line.saturating_sub(1) as usize)
                    .map(|l| l.trim().chars().take(200).collect::<String>())
            })
            .unwrap_or_default();
        out.push(Target {
            path,
            name: None,
            line: line as u64,
            reason: name_of(TAGS, Some(tag)).unwrap_or("TODO").to_string(),
            detail: text,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tarjan_finds_each_cycle_once_and_ignores_chains() {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut edge = |a: &str, b: &str| {
            g.entry(b.into()).or_default();
            g.entry(a.into()).or_default().insert(b.into());
        };
        edge("a", "b");
        edge("b", "c");
        edge("c", "a");
        edge("c", "d");
        edge("e", "e");
        assert_eq!(
            tarjan(&g),
            vec![
                vec!["a".to_string(), "b".into(), "c".into()],
                vec!["e".to_string()]
            ]
        );
    }

    #[test]
    fn imports_resolve_per_language() {
        let files: HashSet<String> = [
            "pkg/a.py",
            "pkg/b.py",
            "web/util.ts",
            "src/engine/index/mod.rs",
            "src/lib.rs",
            "cmd/util/u.go",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut go = HashMap::new();
        go.insert("cmd/util".to_string(), "cmd/util/u.go".to_string());
        assert_eq!(
            resolve(&files, &go, "pkg/a.py", ".b").as_deref(),
            Some("pkg/b.py")
        );
        assert_eq!(
            resolve(&files, &go, "pkg/a.py", "pkg.b").as_deref(),
            Some("pkg/b.py")
        );
        assert_eq!(
            resolve(&files, &go, "web/app.ts", "./util").as_deref(),
            Some("web/util.ts")
        );
        assert_eq!(
            resolve(&files, &go, "src/main.rs", "crate::engine::index::walk").as_deref(),
            Some("src/engine/index/mod.rs")
        );
        assert_eq!(
            resolve(&files, &go, "main.go", "example.com/x/cmd/util").as_deref(),
            Some("cmd/util/u.go")
        );
        assert_eq!(resolve(&files, &go, "pkg/a.py", "os"), None);
    }
}
