//! `repo_overview` (spec section 25 "initial context": start high-level — repository tree,
//! languages, overview): the top directories with file counts and sizes, languages by size,
//! likely entry points and the README's opening.

use std::collections::BTreeMap;

use serde::Serialize;

use super::view::View;

/// Longest README excerpt, in characters.
pub const README_CHARS: usize = 1500;

/// A directory of the tree.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct DirEntry {
    /// Path (`src/engine`); `.` for files at the root.
    pub path: String,
    /// Files under it.
    pub files: u64,
    /// Their total size in bytes.
    pub bytes: u64,
}

/// A language's share.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LanguageShare {
    /// Language name.
    pub language: String,
    /// Files.
    pub files: u64,
    /// Bytes.
    pub bytes: u64,
}

/// The overview of one resource.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Overview {
    /// The resource.
    pub resource: String,
    /// The commit it is read at, if a base.
    pub commit: Option<String>,
    /// Indexed files.
    pub files: u64,
    /// Their size in bytes.
    pub bytes: u64,
    /// Directories down to `depth`, largest first.
    pub tree: Vec<DirEntry>,
    /// Languages by size.
    pub languages: Vec<LanguageShare>,
    /// Likely entry points and manifests.
    pub entry_points: Vec<String>,
    /// The README's opening.
    pub readme: Option<String>,
}

const ENTRY_NAMES: &[&str] = &[
    "main.rs",
    "lib.rs",
    "Cargo.toml",
    "main.py",
    "__main__.py",
    "app.py",
    "manage.py",
    "setup.py",
    "pyproject.toml",
    "package.json",
    "index.js",
    "index.ts",
    "main.ts",
    "main.js",
    "server.js",
    "main.go",
    "go.mod",
    "Makefile",
    "Dockerfile",
];

/// The overview of a view, with directories down to `depth` levels (at most `max_dirs`).
pub fn overview(view: &View, depth: usize, max_dirs: usize) -> Overview {
    let mut dirs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut langs: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut entry_points = Vec::new();
    let mut bytes = 0;
    let files = view.file_metas();
    for (path, size, lang) in &files {
        bytes += size;
        let parts: Vec<&str> = path.split('/').collect();
        let dir = if parts.len() == 1 {
            ".".to_string()
        } else {
            parts[..(parts.len() - 1).min(depth)].join("/")
        };
        let e = dirs.entry(dir).or_default();
        e.0 += 1;
        e.1 += size;
        if let Some(l) = lang {
            let e = langs.entry(l.clone()).or_default();
            e.0 += 1;
            e.1 += size;
        }
        let name = parts.last().copied().unwrap_or_default();
        if ENTRY_NAMES.contains(&name) && parts.len() <= 3 {
            entry_points.push(path.clone());
        }
    }
    let mut tree: Vec<DirEntry> = dirs
        .into_iter()
        .map(|(path, (files, bytes))| DirEntry { path, files, bytes })
        .collect();
    tree.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.path.cmp(&b.path)));
    tree.truncate(max_dirs);
    let mut languages: Vec<LanguageShare> = langs
        .into_iter()
        .map(|(language, (files, bytes))| LanguageShare {
            language,
            files,
            bytes,
        })
        .collect();
    languages.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.language.cmp(&b.language)));
    entry_points.sort_by_key(|p| (p.matches('/').count(), p.clone()));
    entry_points.truncate(20);
    let readme = files
        .iter()
        .map(|(p, _, _)| p)
        .filter(|p| !p.contains('/') && p.to_ascii_lowercase().starts_with("readme"))
        .min()
        .and_then(|p| view.read(p))
        .map(|t| {
            let mut s: String = t.chars().take(README_CHARS).collect();
            if t.chars().count() > README_CHARS {
                s.push('…');
            }
            s
        });
    Overview {
        resource: view.resource.clone(),
        commit: view.at_commit(),
        files: files.len() as u64,
        bytes,
        tree,
        languages,
        entry_points,
        readme,
    }
}

/// The overview as a few lines of text for a prompt.
pub fn render(o: &Overview) -> String {
    let mut s = format!(
        "Resource {}{}: {} files, {} KiB.\n",
        o.resource,
        o.commit
            .as_deref()
            .map(|c| format!(" at commit {}", &c[..c.len().min(12)]))
            .unwrap_or_default(),
        o.files,
        o.bytes / 1024
    );
    if !o.languages.is_empty() {
        let l: Vec<String> = o
            .languages
            .iter()
            .take(6)
            .map(|l| format!("{} ({} files)", l.language, l.files))
            .collect();
        s.push_str(&format!("Languages: {}.\n", l.join(", ")));
    }
    if !o.entry_points.is_empty() {
        s.push_str(&format!("Entry points: {}.\n", o.entry_points.join(", ")));
    }
    s.push_str("Tree:\n");
    for d in &o.tree {
        s.push_str(&format!(
            "  {}/ {} files, {} KiB\n",
            d.path,
            d.files,
            d.bytes / 1024
        ));
    }
    if let Some(r) = &o.readme {
        s.push_str("README:\n");
        s.push_str(r);
        s.push('\n');
    }
    s
}
