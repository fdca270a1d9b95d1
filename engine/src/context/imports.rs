//! Import edges at the plan's base for the strategist's hot context: the files a matched
//! code file imports, read and parsed as the base has them and resolved by the index's
//! rules ([`structure::resolve`]), so the modules a change reaches from the file the task
//! names are known without the index's import table (built at the index's commit, not the
//! base).

use std::collections::{HashMap, HashSet};

use crate::index::{View, structure, symbols};

/// The files of the base a resolver needs: every path, and each Go package directory's
/// first file (a Go import names a directory).
pub struct Resolver {
    files: HashSet<String>,
    go_dirs: HashMap<String, String>,
}

impl Resolver {
    /// A resolver over `files`.
    pub fn new(files: HashSet<String>) -> Self {
        let mut sorted: Vec<&String> = files.iter().collect();
        sorted.sort();
        let mut go_dirs = HashMap::new();
        for f in sorted {
            if let Some((d, _)) = f.rsplit_once('/')
                && f.ends_with(".go")
            {
                go_dirs.entry(d.to_string()).or_insert_with(|| f.clone());
            }
        }
        Self { files, go_dirs }
    }

    /// Whether the base has `path`.
    pub fn has(&self, path: &str) -> bool {
        self.files.contains(path)
    }

    /// The files `path` imports at the base, each once, in the order imported; none when
    /// its language has no grammar or it cannot be read.
    pub fn imports_of(&self, view: &View, path: &str) -> Vec<String> {
        let Some(text) = view.read(path) else {
            return Vec::new();
        };
        self.imports_in(path, &text)
    }

    /// The files the text `text` of `path` imports, each once, in the order imported.
    pub fn imports_in(&self, path: &str, text: &str) -> Vec<String> {
        let Some(grammar) = symbols::language_of(path).and_then(symbols::grammar) else {
            return Vec::new();
        };
        let mut out: Vec<String> = Vec::new();
        for i in symbols::extract(grammar, text).imports {
            let Some(target) = structure::resolve(&self.files, &self.go_dirs, path, &i.module)
            else {
                continue;
            };
            if target != path && !out.contains(&target) {
                out.push(target);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolver(paths: &[&str]) -> Resolver {
        Resolver::new(paths.iter().map(|p| (*p).to_string()).collect())
    }

    #[test]
    fn relative_imports_resolve_to_the_files_of_the_base_once_each() {
        let r = resolver(&["src/index.ts", "src/client.ts", "src/types.ts"]);
        let text = "import type { A } from \"./types.ts\";\nimport { B } from \"./types.ts\";\n\
                    import { C } from \"./client\";\nimport fs from \"node:fs\";\n";
        assert_eq!(
            r.imports_in("src/index.ts", text),
            vec!["src/types.ts".to_string(), "src/client.ts".to_string()]
        );
    }

    #[test]
    fn an_import_of_a_file_the_base_does_not_have_is_not_an_edge() {
        let r = resolver(&["pkg/core.py", "pkg/__init__.py"]);
        let text = "from .core import run\nfrom .gone import lost\n";
        assert_eq!(r.imports_in("pkg/__init__.py", text), vec!["pkg/core.py".to_string()]);
    }
}
