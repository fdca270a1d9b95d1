//! A generated source tree of Rust and Python files, for the index benchmark and the size
//! tests: each file has a module comment, an import, six documented functions with a branch,
//! a loop or a call, and (Rust) a struct, with names drawn from a fixed vocabulary so every
//! term occurs in many files.

use std::path::Path;

const WORDS: &[&str] = &[
    "account", "token", "session", "parse", "config", "render", "widget", "cache", "retry",
    "client", "server", "handler", "request", "response", "queue", "worker", "schedule", "invoice",
    "ledger", "report", "metric", "user", "profile", "search", "index", "buffer", "stream",
    "socket", "packet", "route",
];

fn word(i: usize, k: usize) -> &'static str {
    WORDS[(i * 7 + k * 13 + i / 31) % WORDS.len()]
}

fn capital(w: &str) -> String {
    let mut c = w.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

/// The text of generated file `i` and its extension (`py` for every third file, else `rs`).
pub fn file_text(i: usize) -> (String, &'static str) {
    let mut s = String::new();
    if i.is_multiple_of(3) {
        s.push_str(&format!(
            "\"\"\"Module {i}: {} and {}.\"\"\"\nimport os\nfrom .m{} import helper\n\n",
            word(i, 1),
            word(i, 2),
            i / 3
        ));
        for f in 0..6 {
            s.push_str(&format!(
                "def {}_{}_{i}_{f}(value, limit=10):\n    \"\"\"Handles the {} {}.\"\"\"\n    if value > limit:\n        return helper(value) + {f}\n    for item in range(value):\n        value -= item\n    return value\n\n",
                word(i, f), word(i, f + 3), word(i, f + 1), word(i, f + 2)
            ));
        }
        (s, "py")
    } else {
        s.push_str(&format!(
            "//! Module {i}: {} {}.\nuse crate::m{}::Helper;\n\n",
            word(i, 1),
            word(i, 2),
            i / 100
        ));
        for f in 0..6 {
            let (a, b) = (word(i, f), word(i, f + 3));
            s.push_str(&format!(
                "/// Computes the {a} {b} for record {i}.\npub fn {a}_{b}_{i}_{f}(input: u64) -> u64 {{\n    if input > {f} && input < 1000 {{\n        return Helper::apply(input * {i});\n    }}\n    input + {f}\n}}\n\n"
            ));
        }
        s.push_str(&format!(
            "pub struct {}{}Record{i} {{ pub id: u64 }}\n",
            capital(word(i, 4)),
            capital(word(i, 5))
        ));
        (s, "rs")
    }
}

/// Writes `files` generated files under `root` (`pkgNNN/mNNNNN.rs|py`, 100 per directory);
/// the total bytes written.
///
/// # Errors
/// The first write that fails.
pub fn write_tree(root: &Path, files: usize) -> std::io::Result<u64> {
    let mut total = 0;
    for i in 0..files {
        let (text, ext) = file_text(i);
        let p = root.join(format!("pkg{:03}/m{i:05}.{ext}", i / 100));
        if i.is_multiple_of(100) {
            std::fs::create_dir_all(p.parent().unwrap_or(root))?;
        }
        total += text.len() as u64;
        std::fs::write(p, text)?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Policy, Source, build, store};

    fn sizes(dir: &Path) -> Vec<(String, u64)> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            out.push((
                e.file_name().to_string_lossy().into_owned(),
                store::size_of(&e.path()).max(e.metadata().map(|m| m.len()).unwrap_or(0)),
            ));
        }
        out.sort();
        out
    }

    #[test]
    fn the_index_of_a_generated_tree_is_at_most_30_percent_of_its_source() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("repo");
        let source = write_tree(&root, 1500).unwrap();
        let dir = tmp.path().join("index");
        let r = build::build(
            &dir,
            "gen",
            &root,
            Source::Directory,
            &Policy::default(),
            &|_, _| {},
        )
        .unwrap();
        assert_eq!(r.source_bytes, source);
        if let Ok(keep) = std::env::var("INDEX_SIZE_KEEP") {
            let _ = std::process::Command::new("cp")
                .args(["-r"])
                .arg(&dir)
                .arg(keep)
                .status();
        }
        let size = store::size_of(&dir);
        let ratio = size as f64 / source as f64;
        let parts = sizes(&dir);
        let text: Vec<(String, u64)> = std::fs::read_dir(store::text_dir(&dir))
            .unwrap()
            .flatten()
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    e.metadata().unwrap().len(),
                )
            })
            .collect();
        assert!(
            ratio <= 0.30,
            "{:.1} % of the source: {parts:?} {text:?}",
            ratio * 100.0
        );
    }
}
