//! The code structure store (spec section 24 "graph_index", kept in SQLite): per resource
//! index, `structure.db` holds the files, definitions (with complexity and docstrings),
//! imports (resolved to indexed files where possible, best effort), calls by name and
//! TODO/FIXME/HACK markers. Transitive imports are a recursive query; import cycles are the
//! strongly connected components of the import graph (Tarjan's algorithm).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, params};
use serde::Serialize;

use super::IndexError;
use super::symbols::Structure;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, lang TEXT, lines INTEGER NOT NULL, size INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS symbols (path TEXT NOT NULL, name TEXT NOT NULL, kind TEXT NOT NULL,
  start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, complexity INTEGER NOT NULL, doc TEXT, signature TEXT);
CREATE INDEX IF NOT EXISTS symbols_path ON symbols(path);
CREATE INDEX IF NOT EXISTS symbols_name ON symbols(name);
CREATE TABLE IF NOT EXISTS imports (path TEXT NOT NULL, module TEXT NOT NULL, line INTEGER NOT NULL, target TEXT);
CREATE INDEX IF NOT EXISTS imports_path ON imports(path);
CREATE INDEX IF NOT EXISTS imports_target ON imports(target);
CREATE TABLE IF NOT EXISTS calls (path TEXT NOT NULL, name TEXT NOT NULL, line INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS calls_path ON calls(path);
CREATE TABLE IF NOT EXISTS markers (path TEXT NOT NULL, line INTEGER NOT NULL, tag TEXT NOT NULL, text TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS markers_path ON markers(path);
";

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
    /// TODO/FIXME/HACK markers: (line, tag, text).
    pub markers: Vec<(u64, String, String)>,
}

/// The TODO/FIXME/HACK markers of a text.
pub fn markers(text: &str) -> Vec<(u64, String, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        for tag in ["TODO", "FIXME", "HACK"] {
            if let Some(at) = line.find(tag) {
                let rest = &line[at + tag.len()..];
                if rest.starts_with([':', '(', ' ']) || rest.is_empty() {
                    out.push((
                        i as u64 + 1,
                        tag.to_string(),
                        line.trim().chars().take(200).collect(),
                    ));
                    break;
                }
            }
        }
    }
    out
}

/// Replaces the facts of `remove` and `facts` paths in one transaction, then resolves imports.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn replace(
    conn: &mut Connection,
    remove: &[String],
    facts: &[FileFacts],
) -> Result<(), IndexError> {
    let tx = conn.transaction()?;
    for p in remove.iter().chain(facts.iter().map(|f| &f.path)) {
        for table in ["files", "symbols", "imports", "calls", "markers"] {
            tx.execute(&format!("DELETE FROM {table} WHERE path = ?1"), [p])?;
        }
    }
    {
        let mut file = tx.prepare("INSERT INTO files VALUES (?1, ?2, ?3, ?4)")?;
        let mut sym = tx.prepare("INSERT INTO symbols VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?;
        let mut imp = tx.prepare("INSERT INTO imports VALUES (?1, ?2, ?3, NULL)")?;
        let mut call = tx.prepare("INSERT INTO calls VALUES (?1, ?2, ?3)")?;
        let mut mark = tx.prepare("INSERT INTO markers VALUES (?1, ?2, ?3, ?4)")?;
        for f in facts {
            file.execute(params![f.path, f.lang, f.lines as i64, f.size as i64])?;
            for s in &f.structure.symbols {
                sym.execute(params![
                    f.path,
                    s.name,
                    s.kind,
                    s.start_line as i64,
                    s.end_line as i64,
                    s.complexity,
                    s.doc,
                    s.signature
                ])?;
            }
            for i in &f.structure.imports {
                imp.execute(params![f.path, i.module, i.line as i64])?;
            }
            for (name, line) in &f.structure.calls {
                call.execute(params![f.path, name, *line as i64])?;
            }
            for (line, tag, text) in &f.markers {
                mark.execute(params![f.path, *line as i64, tag, text])?;
            }
        }
    }
    let only: Option<HashSet<&str>> = (!remove.is_empty() || facts.len() < 1000)
        .then(|| facts.iter().map(|f| f.path.as_str()).collect());
    resolve_imports(&tx, only.as_ref())?;
    tx.commit()?;
    conn.execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")?;
    Ok(())
}

/// Resolves import targets to indexed files (best effort, by language rules): every import,
/// or (after an update) only the imports of the files in `only`, so an update stays
/// proportional to what changed.
fn resolve_imports(conn: &Connection, only: Option<&HashSet<&str>>) -> Result<(), IndexError> {
    let files: HashSet<String> = conn
        .prepare("SELECT path FROM files")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
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
    let rows: Vec<(i64, String, String)> = conn
        .prepare("SELECT rowid, path, module FROM imports")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    let mut set = conn.prepare("UPDATE imports SET target = ?2 WHERE rowid = ?1")?;
    for (rowid, path, module) in rows {
        if only.is_some_and(|o| !o.contains(path.as_str())) {
            continue;
        }
        let target = resolve(&files, &dirs, &path, &module);
        set.execute(params![rowid, target])?;
    }
    Ok(())
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
    let known: i64 = conn.query_row("SELECT count(*) FROM files WHERE path = ?1", [path], |r| {
        r.get(0)
    })?;
    if known == 0 {
        return Err(IndexError::NotIndexed(path.to_string()));
    }
    let strings = |sql: &str| -> Result<Vec<String>, IndexError> {
        Ok(conn
            .prepare(sql)?
            .query_map([path], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    };
    let direct = strings(
        "SELECT DISTINCT target FROM imports WHERE path = ?1 AND target IS NOT NULL AND target != ?1 ORDER BY 1",
    )?;
    let external = strings(
        "SELECT DISTINCT module FROM imports WHERE path = ?1 AND target IS NULL ORDER BY 1",
    )?;
    let imported_by =
        strings("SELECT DISTINCT path FROM imports WHERE target = ?1 AND path != ?1 ORDER BY 1")?;
    let transitive: Vec<(String, u32)> = conn
        .prepare(
            "WITH RECURSIVE reach(p, d) AS (
               SELECT target, 1 FROM imports WHERE path = ?1 AND target IS NOT NULL
               UNION
               SELECT i.target, r.d + 1 FROM imports i JOIN reach r ON i.path = r.p
                 WHERE i.target IS NOT NULL AND r.d < 64)
             SELECT p, min(d) FROM reach WHERE p != ?1 GROUP BY p ORDER BY 2, 1",
        )?
        .query_map([path], |r| Ok((r.get(0)?, r.get(1)?)))?
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
        .prepare("SELECT DISTINCT path, target FROM imports WHERE target IS NOT NULL")?
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
/// definitions, the largest files, and TODO/FIXME/HACK markers.
///
/// # Errors
/// [`IndexError::Structure`].
pub fn refactoring_targets(
    conn: &Connection,
    scope: &str,
    limit: usize,
) -> Result<Vec<Target>, IndexError> {
    let like = format!("{}%", scope.trim_start_matches("./").replace('%', "\\%"));
    let lim = limit as i64;
    let mut out: Vec<Target> = Vec::new();
    let mut q = conn.prepare("SELECT path, name, start_line, complexity, end_line - start_line + 1 FROM symbols WHERE path LIKE ?1 ESCAPE '\\' AND complexity > 5 ORDER BY complexity DESC, path LIMIT ?2")?;
    for r in q.query_map(params![like, lim], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
            r.get::<_, i64>(4)?,
        ))
    })? {
        let (path, name, line, c, len) = r?;
        out.push(Target {
            path,
            name: Some(name),
            line: line as u64,
            reason: "complexity".into(),
            detail: format!("cyclomatic complexity {c}, {len} lines"),
        });
    }
    let mut q = conn.prepare("SELECT path, name, start_line, end_line - start_line + 1 AS len FROM symbols WHERE path LIKE ?1 ESCAPE '\\' AND kind IN ('function', 'method') AND len > 60 ORDER BY len DESC, path LIMIT ?2")?;
    for r in q.query_map(params![like, lim], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, i64>(2)?,
            r.get::<_, i64>(3)?,
        ))
    })? {
        let (path, name, line, len) = r?;
        out.push(Target {
            path,
            name: Some(name),
            line: line as u64,
            reason: "long_definition".into(),
            detail: format!("{len} lines"),
        });
    }
    let mut q = conn.prepare("SELECT path, lines FROM files WHERE path LIKE ?1 ESCAPE '\\' AND lines > 500 ORDER BY lines DESC, path LIMIT ?2")?;
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
    let mut q = conn.prepare("SELECT path, line, tag, text FROM markers WHERE path LIKE ?1 ESCAPE '\\' ORDER BY CASE tag WHEN 'FIXME' THEN 0 WHEN 'HACK' THEN 1 ELSE 2 END, path, line LIMIT ?2")?;
    for r in q.query_map(params![like, lim], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
        ))
    })? {
        let (path, line, tag, text) = r?;
        out.push(Target {
            path,
            name: None,
            line: line as u64,
            reason: tag,
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
