//! Code structure with tree-sitter (spec section 24 "index_symbols", "index_dependencies",
//! "index_complexity_metrics"): for Rust, Python, JavaScript, TypeScript (and TSX) and Go,
//! the definitions (functions, methods, classes/structs/traits, modules...) with their line
//! spans, docstrings and cyclomatic complexity, the imports, and calls by name (best effort).
//! Definitions and calls come from each grammar's own tags query.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};
use tree_sitter::{Language, Node, Parser, Query, QueryCursor, StreamingIterator};

/// A language with a grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    /// Rust.
    Rust,
    /// Python.
    Python,
    /// JavaScript (and JSX).
    JavaScript,
    /// TypeScript.
    TypeScript,
    /// TSX.
    Tsx,
    /// Go.
    Go,
}

/// The language name of a path, by extension (`rust`, `python`, `markdown`, ...), or `None`.
pub fn language_of(path: &str) -> Option<&'static str> {
    let name = path.rsplit('/').next().unwrap_or(path);
    if name == "Dockerfile" {
        return Some("dockerfile");
    }
    if name == "Makefile" {
        return Some("make");
    }
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "rs" => "rust",
        "py" | "pyi" => "python",
        "js" | "mjs" | "cjs" | "jsx" => "javascript",
        "ts" | "mts" | "cts" => "typescript",
        "tsx" => "tsx",
        "go" => "go",
        "java" => "java",
        "c" | "h" => "c",
        "cc" | "cpp" | "hpp" | "cxx" => "cpp",
        "rb" => "ruby",
        "sh" | "bash" => "shell",
        "md" | "markdown" => "markdown",
        "toml" => "toml",
        "yaml" | "yml" => "yaml",
        "json" => "json",
        "html" | "htm" => "html",
        "css" => "css",
        "sql" => "sql",
        "txt" => "text",
        _ => return None,
    })
}

/// The grammar for a language name.
pub fn grammar(language: &str) -> Option<Grammar> {
    Some(match language {
        "rust" => Grammar::Rust,
        "python" => Grammar::Python,
        "javascript" => Grammar::JavaScript,
        "typescript" => Grammar::TypeScript,
        "tsx" => Grammar::Tsx,
        "go" => Grammar::Go,
        _ => return None,
    })
}

/// A definition.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Symbol {
    /// Its name.
    pub name: String,
    /// `function`, `method`, `class`, `interface`, `module`, `macro`, `type`, `constant`.
    pub kind: String,
    /// First line (1-based).
    pub start_line: u64,
    /// Last line (1-based, inclusive).
    pub end_line: u64,
    /// The comment above it or its docstring, shortened.
    pub doc: Option<String>,
    /// Cyclomatic complexity: 1 plus its decision points.
    pub complexity: u32,
    /// Its first line, trimmed.
    pub signature: String,
    /// Byte offset of its name in the file.
    #[serde(default)]
    pub name_at: u64,
    /// Lines of its comment or docstring (1-based, inclusive), if it has one.
    #[serde(default)]
    pub doc_lines: Option<(u64, u64)>,
}

/// An import: the module or path named, as written, and its line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Import {
    /// `crate::index`, `os.path`, `./util`, `net/http`.
    pub module: String,
    /// Line (1-based).
    pub line: u64,
}

/// The structure of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Structure {
    /// Definitions.
    pub symbols: Vec<Symbol>,
    /// Imports.
    pub imports: Vec<Import>,
    /// Calls by name, with their line.
    pub calls: Vec<(String, u64)>,
}

/// Longest docstring kept, in characters.
pub const DOC_CHARS: usize = 300;

struct Compiled {
    language: Language,
    query: Query,
}

fn compiled(g: Grammar) -> Option<&'static Compiled> {
    static CELLS: [OnceLock<Option<Compiled>>; 6] = [const { OnceLock::new() }; 6];
    let (i, language, queries): (usize, Language, Vec<&str>) = match g {
        Grammar::Rust => (
            0,
            tree_sitter_rust::LANGUAGE.into(),
            vec![tree_sitter_rust::TAGS_QUERY],
        ),
        Grammar::Python => (
            1,
            tree_sitter_python::LANGUAGE.into(),
            vec![tree_sitter_python::TAGS_QUERY],
        ),
        Grammar::JavaScript => (
            2,
            tree_sitter_javascript::LANGUAGE.into(),
            vec![tree_sitter_javascript::TAGS_QUERY],
        ),
        Grammar::TypeScript => (
            3,
            tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
            vec![
                tree_sitter_javascript::TAGS_QUERY,
                tree_sitter_typescript::TAGS_QUERY,
            ],
        ),
        Grammar::Tsx => (
            4,
            tree_sitter_typescript::LANGUAGE_TSX.into(),
            vec![
                tree_sitter_javascript::TAGS_QUERY,
                tree_sitter_typescript::TAGS_QUERY,
            ],
        ),
        Grammar::Go => (
            5,
            tree_sitter_go::LANGUAGE.into(),
            vec![tree_sitter_go::TAGS_QUERY],
        ),
    };
    CELLS[i]
        .get_or_init(|| {
            // The TypeScript tags extend JavaScript's; when the combination does not compile
            // the language's own query is used alone.
            let query = Query::new(&language, &queries.join("\n"))
                .or_else(|_| Query::new(&language, queries.last().copied().unwrap_or("")))
                .map_err(|e| tracing::warn!(?g, error = %e, "tags query does not compile"))
                .ok()?;
            Some(Compiled { language, query })
        })
        .as_ref()
}

/// Parses `source` and extracts its structure; an empty structure when the grammar fails.
pub fn extract(g: Grammar, source: &str) -> Structure {
    let Some(c) = compiled(g) else {
        return Structure::default();
    };
    let mut parser = Parser::new();
    if parser.set_language(&c.language).is_err() {
        return Structure::default();
    }
    let Some(tree) = parser.parse(source, None) else {
        return Structure::default();
    };
    let bytes = source.as_bytes();
    let lines: Vec<&str> = source.lines().collect();
    let names = c.query.capture_names();
    let mut out = Structure::default();
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(&c.query, tree.root_node(), bytes);
    while let Some(m) = matches.next() {
        let mut name = None;
        let mut name_at = 0;
        let mut def: Option<(Node, &str)> = None;
        let mut call = false;
        for cap in m.captures {
            let cname = names[cap.index as usize];
            if cname == "name" {
                name = cap.node.utf8_text(bytes).ok();
                name_at = cap.node.start_byte() as u64;
            } else if let Some(kind) = cname.strip_prefix("definition.") {
                def = Some((cap.node, kind));
            } else if cname == "reference.call" {
                call = true;
            }
        }
        let Some(name) = name else { continue };
        if let Some((node, kind)) = def {
            let start = node.start_position().row;
            if out
                .symbols
                .iter()
                .any(|s| s.name == name && s.start_line == start as u64 + 1)
            {
                continue;
            }
            let doc = doc_of(g, &lines, start);
            out.symbols.push(Symbol {
                name: name.to_string(),
                kind: kind.to_string(),
                start_line: start as u64 + 1,
                end_line: node.end_position().row as u64 + 1,
                doc_lines: doc.as_ref().map(|d| d.1),
                doc: doc.map(|d| d.0),
                name_at,
                complexity: complexity(g, node, bytes),
                signature: lines
                    .get(start)
                    .map(|l| l.trim().to_string())
                    .unwrap_or_default(),
            });
        } else if call {
            out.calls.push((
                name.to_string(),
                m.captures[0].node.start_position().row as u64 + 1,
            ));
        }
    }
    out.symbols.sort_by_key(|s| s.start_line);
    imports(g, tree.root_node(), bytes, &mut out.imports);
    out
}

/// The comment lines above line `row` (0-based), or a Python docstring below it: its text,
/// shortened, and its lines (1-based, inclusive).
pub fn doc_of(g: Grammar, lines: &[&str], row: usize) -> Option<(String, (u64, u64))> {
    let mut doc: Vec<String> = Vec::new();
    let span;
    if g == Grammar::Python {
        let first = lines.get(row + 1)?.trim();
        let quote = ["\"\"\"", "'''"]
            .into_iter()
            .find(|q| first.starts_with(q))?;
        let body = &first[3..];
        let at = row as u64 + 2;
        if let Some(end) = body.find(quote) {
            return Some((shorten(&body[..end]), (at, at))).filter(|d| !d.0.is_empty());
        }
        doc.push(body.to_string());
        let mut last = at;
        for l in lines.iter().skip(row + 2).take(20) {
            last += 1;
            if let Some(end) = l.find(quote) {
                doc.push(l[..end].trim().to_string());
                break;
            }
            doc.push(l.trim().to_string());
        }
        span = (at, last);
    } else {
        let mut r = row;
        let mut first = None;
        let mut last = None;
        while r > 0 {
            r -= 1;
            let l = lines[r].trim();
            if l.starts_with("#[") || l.starts_with('@') {
                continue;
            }
            let text = ["///", "//!", "//", "/**", "*/", "*"]
                .into_iter()
                .find_map(|p| l.strip_prefix(p));
            match text {
                Some(t) => {
                    doc.push(t.trim().trim_end_matches("*/").trim().to_string());
                    first = Some(r as u64 + 1);
                    last = last.or(Some(r as u64 + 1));
                }
                None => break,
            }
        }
        doc.reverse();
        span = (first?, last?);
    }
    let text = doc.join(" ").trim().to_string();
    (!text.is_empty()).then(|| (shorten(&text), span))
}

fn shorten(s: &str) -> String {
    let s = s.trim();
    if s.chars().count() <= DOC_CHARS {
        return s.to_string();
    }
    let mut out: String = s.chars().take(DOC_CHARS).collect();
    out.push('…');
    out
}

fn is_decision(g: Grammar, node: Node, bytes: &[u8]) -> bool {
    let kind = node.kind();
    let logical = |node: Node| {
        node.child_by_field_name("operator")
            .and_then(|o| o.utf8_text(bytes).ok())
            .is_some_and(|o| matches!(o, "&&" | "||" | "??" | "and" | "or"))
    };
    match g {
        Grammar::Rust => match kind {
            "if_expression" | "while_expression" | "for_expression" | "match_arm"
            | "try_expression" => true,
            "binary_expression" => logical(node),
            _ => false,
        },
        Grammar::Python => matches!(
            kind,
            "if_statement"
                | "elif_clause"
                | "for_statement"
                | "while_statement"
                | "except_clause"
                | "conditional_expression"
                | "boolean_operator"
                | "case_clause"
                | "for_in_clause"
        ),
        Grammar::JavaScript | Grammar::TypeScript | Grammar::Tsx => match kind {
            "if_statement" | "for_statement" | "for_in_statement" | "while_statement"
            | "do_statement" | "switch_case" | "catch_clause" | "ternary_expression" => true,
            "binary_expression" => logical(node),
            _ => false,
        },
        Grammar::Go => match kind {
            "if_statement" | "for_statement" | "expression_case" | "type_case"
            | "communication_case" => true,
            "binary_expression" => logical(node),
            _ => false,
        },
    }
}

/// 1 plus the decision points under `node`.
fn complexity(g: Grammar, node: Node, bytes: &[u8]) -> u32 {
    let mut n = 1;
    let mut cursor = node.walk();
    let mut depth = 0usize;
    loop {
        if is_decision(g, cursor.node(), bytes) {
            n += 1;
        }
        if cursor.goto_first_child() {
            depth += 1;
            continue;
        }
        loop {
            if depth == 0 {
                return n;
            }
            if cursor.goto_next_sibling() {
                break;
            }
            cursor.goto_parent();
            depth -= 1;
        }
    }
}

fn strip_quotes(s: &str) -> String {
    s.trim().trim_matches(['"', '\'', '`']).to_string()
}

/// Collects the imports under `root`.
fn imports(g: Grammar, root: Node, bytes: &[u8], out: &mut Vec<Import>) {
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        let line = node.start_position().row as u64 + 1;
        let text = |n: Node| n.utf8_text(bytes).unwrap_or_default().to_string();
        let found: Vec<String> = match (g, node.kind()) {
            (Grammar::Rust, "use_declaration") => node
                .child_by_field_name("argument")
                .map(|a| vec![rust_module(&text(a))])
                .unwrap_or_default(),
            (Grammar::Python, "import_statement") => {
                let mut c = node.walk();
                node.children_by_field_name("name", &mut c)
                    .map(|n| {
                        let t = text(n);
                        t.split(" as ").next().unwrap_or(&t).trim().to_string()
                    })
                    .collect()
            }
            (Grammar::Python, "import_from_statement") => node
                .child_by_field_name("module_name")
                .map(|m| vec![text(m)])
                .unwrap_or_default(),
            (Grammar::JavaScript | Grammar::TypeScript | Grammar::Tsx, "import_statement") => node
                .child_by_field_name("source")
                .map(|s| vec![strip_quotes(&text(s))])
                .unwrap_or_default(),
            (Grammar::Go, "import_spec") => node
                .child_by_field_name("path")
                .map(|p| vec![strip_quotes(&text(p))])
                .unwrap_or_default(),
            _ => {
                let mut c = node.walk();
                let children: Vec<Node> = node.children(&mut c).collect();
                stack.extend(children.into_iter().rev());
                continue;
            }
        };
        out.extend(
            found
                .into_iter()
                .filter(|m| !m.is_empty())
                .map(|module| Import { module, line }),
        );
    }
    out.sort_by_key(|i| i.line);
}

/// `crate::a::b::{C, D}` -> `crate::a::b`; `std::fmt::Write as _` -> `std::fmt::Write`.
fn rust_module(arg: &str) -> String {
    let arg = arg.split('{').next().unwrap_or(arg);
    let arg = arg.split(" as ").next().unwrap_or(arg);
    arg.trim()
        .trim_end_matches("::")
        .trim_end_matches("::*")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_definitions_docs_complexity_imports_and_calls() {
        let src = "use crate::index::{walk, symbols};\n\n/// Parses the config.\nfn parse_config(x: i32) -> i32 {\n    if x > 1 && x < 5 { helper(x) } else { 0 }\n}\n\nstruct Widget;\n";
        let s = extract(Grammar::Rust, src);
        let f = s.symbols.iter().find(|s| s.name == "parse_config").unwrap();
        assert_eq!(f.kind, "function");
        assert_eq!((f.start_line, f.end_line), (4, 6));
        assert_eq!(f.doc.as_deref(), Some("Parses the config."));
        assert_eq!(f.complexity, 3);
        assert!(
            s.symbols
                .iter()
                .any(|s| s.name == "Widget" && s.kind == "class")
        );
        assert_eq!(s.imports[0].module, "crate::index");
        assert!(s.calls.iter().any(|(n, l)| n == "helper" && *l == 5));
    }

    #[test]
    fn python_javascript_typescript_and_go_definitions() {
        let py = extract(
            Grammar::Python,
            "import os.path\nfrom .util import x\n\nclass Auth:\n    def login(self):\n        \"\"\"Logs in.\"\"\"\n        if a or b:\n            pass\n",
        );
        assert!(
            py.symbols
                .iter()
                .any(|s| s.name == "Auth" && s.kind == "class")
        );
        let login = py.symbols.iter().find(|s| s.name == "login").unwrap();
        assert_eq!(login.doc.as_deref(), Some("Logs in."));
        assert_eq!(login.complexity, 3);
        let mods: Vec<_> = py.imports.iter().map(|i| i.module.as_str()).collect();
        assert_eq!(mods, ["os.path", ".util"]);
        let js = extract(
            Grammar::JavaScript,
            "import { a } from './util';\nfunction renderPage(p) { return p ? a(p) : null; }\n",
        );
        assert!(js.symbols.iter().any(|s| s.name == "renderPage"));
        assert_eq!(js.imports[0].module, "./util");
        let ts = extract(
            Grammar::TypeScript,
            "interface Shape { area(): number }\nexport function makeShape(): Shape { return null as any; }\n",
        );
        assert!(ts.symbols.iter().any(|s| s.name == "makeShape"), "{ts:?}");
        let go = extract(
            Grammar::Go,
            "package main\nimport \"net/http\"\n// Serve runs.\nfunc Serve() { if x { y() } }\n",
        );
        let serve = go.symbols.iter().find(|s| s.name == "Serve").unwrap();
        assert_eq!(serve.doc.as_deref(), Some("Serve runs."));
        assert_eq!(go.imports[0].module, "net/http");
    }
}
