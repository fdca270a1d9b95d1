//! `repo_overview` (spec section 25 "initial context": start high-level — repository tree,
//! languages, overview): the top directories with file counts and sizes, languages by size,
//! likely entry points and the README's opening.

use std::collections::BTreeMap;

use serde::Serialize;

use super::view::View;

/// Longest README excerpt, in characters.
pub const README_CHARS: usize = 1500;
/// Longest README summary ([`about`]), in characters.
pub const ABOUT_CHARS: usize = 600;
/// Fewest words a README summary must have to be shown.
const ABOUT_MIN_WORDS: usize = 8;

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
    /// The README as prose: its opening paragraphs without HTML, badges, images, code
    /// or link lists, at most [`ABOUT_CHARS`]; absent when it says little ([`about`]).
    pub about: Option<String>,
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
    let text = files
        .iter()
        .map(|(p, _, _)| p)
        .filter(|p| !p.contains('/') && p.to_ascii_lowercase().starts_with("readme"))
        .min()
        .and_then(|p| view.read(p));
    let about = text.as_deref().and_then(about);
    let readme = text.map(|t| {
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
        about,
    }
}

/// A README (Markdown, HTML or plain text) as a few sentences of prose: HTML tags and
/// comments, images and badges, fenced code, tables, headings, reference definitions and
/// lists go; links keep their text. Paragraphs are taken from the top until
/// [`ABOUT_CHARS`] (cut at a sentence end) or, once there is some prose, the next heading.
/// `None` when fewer than a few words of prose remain.
pub fn about(readme: &str) -> Option<String> {
    let mut paragraphs: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut fenced = false;
    let mut stop = false;
    let text = strip_html(readme);
    let end_paragraph = |current: &mut String, paragraphs: &mut Vec<String>| {
        let p = current.split_whitespace().collect::<Vec<_>>().join(" ");
        current.clear();
        // Prose: a few words, more letters than anything else, not a lead-in to a list.
        let letters = p.chars().filter(|c| c.is_alphabetic()).count();
        if p.split(' ').count() >= 4 && letters * 2 > p.len() && !p.ends_with(':') {
            paragraphs.push(p);
        }
    };
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            fenced = !fenced;
            end_paragraph(&mut current, &mut paragraphs);
            continue;
        }
        if fenced {
            continue;
        }
        let heading = t.starts_with('#')
            || (!t.is_empty() && t.chars().all(|c| c == '=' || c == '-'))
            || t.starts_with("---");
        let list = t.starts_with("* ")
            || t.starts_with("- ")
            || t.starts_with("+ ")
            || t.split_once(". ").is_some_and(|(n, _)| {
                !n.is_empty() && n.len() <= 3 && n.chars().all(|c| c.is_ascii_digit())
            });
        let skip = t.starts_with('|')
            || t.starts_with('>')
            || (t.starts_with('[') && t.contains("]:"))
            || line.starts_with("    ")
            || line.starts_with('\t');
        if t.is_empty() || heading || list || skip {
            end_paragraph(&mut current, &mut paragraphs);
            let total = paragraphs.iter().map(|p| p.len() + 1).sum::<usize>();
            if total >= ABOUT_CHARS || (heading && !paragraphs.is_empty()) {
                stop = true;
                break;
            }
            continue;
        }
        // A setext heading's text (the line above its underline) ends up a paragraph of
        // its own, too short to count as prose.
        current.push(' ');
        current.push_str(&inline_markdown(t));
    }
    if !stop {
        end_paragraph(&mut current, &mut paragraphs);
    }
    let joined = paragraphs.join(" ");
    if joined.split_whitespace().count() < ABOUT_MIN_WORDS {
        return None;
    }
    if joined.chars().count() <= ABOUT_CHARS {
        return Some(joined);
    }
    let cut: String = joined.chars().take(ABOUT_CHARS).collect();
    Some(match cut.rfind(". ") {
        Some(i) if i > ABOUT_CHARS / 3 => cut[..=i].to_string(),
        _ => format!("{}…", cut.trim_end()),
    })
}

/// `text` without HTML comments and tags (each tag becomes a line break, so block markup
/// ends a paragraph).
fn strip_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('<') {
        out.push_str(&rest[..i]);
        let after = &rest[i..];
        if let Some(body) = after.strip_prefix("<!--") {
            rest = body.find("-->").map_or("", |j| &body[j + 3..]);
            continue;
        }
        let tag = after[1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '/');
        match (tag, after.find('>')) {
            (true, Some(j)) => {
                out.push('\n');
                rest = &after[j + 1..];
            }
            _ => {
                out.push('<');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// One line of Markdown as plain text: images (badges) go, links keep their text, emphasis
/// and code marks go.
fn inline_markdown(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    // The end of a `[text](target)` or `[text][ref]` starting at `at` (on `[`): the text's
    // range and the index after the whole link.
    fn link(chars: &[char], at: usize) -> Option<(usize, usize, usize)> {
        let mut depth = 0;
        let mut j = at;
        while j < chars.len() {
            match chars[j] {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
            j += 1;
        }
        let close = j;
        let end_char = match chars.get(close + 1) {
            Some('(') => ')',
            Some('[') => ']',
            _ => return None,
        };
        let end = chars[close + 2..].iter().position(|c| *c == end_char)? + close + 2;
        Some((at + 1, close, end + 1))
    }
    while i < chars.len() {
        let c = chars[i];
        if c == '!'
            && chars.get(i + 1) == Some(&'[')
            && let Some((_, _, after)) = link(&chars, i + 1)
        {
            i = after;
            continue;
        }
        if c == '['
            && let Some((from, to, after)) = link(&chars, i)
        {
            let inner: String = chars[from..to].iter().collect();
            out.push_str(&inline_markdown(&inner));
            i = after;
            continue;
        }
        let emphasis = matches!(c, '*' | '`') || (c == '_' && chars.get(i + 1) == Some(&'_'));
        if !emphasis {
            out.push(c);
        } else if c == '_' {
            i += 1;
        }
        i += 1;
    }
    out
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
    if let Some(r) = &o.about {
        s.push_str(&format!("About (from the README): {r}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::about;

    #[test]
    fn a_readme_is_summarised_as_its_prose_without_html_badges_or_link_lists() {
        let readme = r#"<div align="center"><img src="logo.svg" alt=""></div>

# Tool

[![Build](https://ci.example/badge.svg)](https://ci.example)
[![Docs](https://docs.example/badge.svg)](https://docs.example)

Tool is a library for creating **powerful** command line applications,
used by [Kubernetes](https://kubernetes.io/) and others.

* [Installation](#installation)
* [User Guide](GUIDE.md)

```sh
tool --help
```

## Donate

Please donate to keep this project going for many years to come.
"#;
        assert_eq!(
            about(readme).as_deref(),
            Some(
                "Tool is a library for creating powerful command line applications, used by Kubernetes and others."
            )
        );
    }

    #[test]
    fn a_readme_that_says_little_is_left_out() {
        assert_eq!(about("# Demo\nA demo project.\n"), None);
        assert_eq!(
            about("[![a](b)](c) [![d](e)](f)\n\n* [Docs](docs.md)\n* [FAQ](faq.md)\n"),
            None
        );
    }

    #[test]
    fn a_long_readme_is_cut_at_a_sentence_end() {
        let readme = "This sentence has several words in it. ".repeat(40);
        let a = about(&readme).unwrap();
        assert!(a.chars().count() <= super::ABOUT_CHARS, "{a}");
        assert!(a.ends_with('.'), "{a}");
    }
}
