//! Retrieval benchmark: how well the strategist's initial context (hot context) and
//! `search_code` put the right files in front of a model, against BM25 over the same files.
//!
//! Tasks come from the repositories' histories: the query is a commit's subject, the right
//! answer the source files the commit changed that already existed at its parent, and the
//! index is read at the parent commit (as a plan reads its base). Per repository and over
//! all of them it prints recall@5, recall@10 and MRR@20 of the ranked distinct files each
//! system shows, the median number of distinct files and (hot context) the median tokens.
//!
//! Usage: `bench_retrieval [--tasks N] CHECKOUT...` (each a git work tree; its directory
//! name names it). Driven by `scripts/bench-retrieval.sh`; not run by CI.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use cleveragents_engine::context::{policy, strategize};
use cleveragents_engine::index::skill::{self, Scope, SearchCode};
use cleveragents_engine::index::{Policy, Source, View, build, embed, symbols, tokenizer};

/// Languages whose files count as source files a commit changed.
const SOURCE_LANGUAGES: &[&str] = &[
    "rust",
    "python",
    "javascript",
    "typescript",
    "tsx",
    "go",
    "java",
    "c",
    "cpp",
    "ruby",
];

/// Most changed source files a task may have (larger commits are sweeping changes whose
/// subject says little about any one file).
const MAX_TARGETS: usize = 6;

struct Task {
    commit: git2::Oid,
    parent: git2::Oid,
    subject: String,
    targets: Vec<String>,
}

#[derive(Default, Clone)]
struct Scores {
    r5: f64,
    r10: f64,
    mrr: f64,
    files: Vec<usize>,
    tokens: Vec<u64>,
    /// Milliseconds each task's ranking took (hot context only).
    millis: Vec<u64>,
    n: usize,
}

impl Scores {
    fn add(&mut self, ranked: &[String], targets: &[String], tokens: Option<u64>) {
        let hit = |k: usize| {
            targets
                .iter()
                .filter(|t| ranked.iter().take(k).any(|r| r == *t))
                .count() as f64
                / targets.len() as f64
        };
        self.r5 += hit(5);
        self.r10 += hit(10);
        self.mrr += ranked
            .iter()
            .take(20)
            .position(|r| targets.contains(r))
            .map_or(0.0, |i| 1.0 / (i as f64 + 1.0));
        self.files.push(ranked.len());
        if let Some(t) = tokens {
            self.tokens.push(t);
        }
        self.n += 1;
    }

    fn merge(&mut self, o: &Scores) {
        self.r5 += o.r5;
        self.r10 += o.r10;
        self.mrr += o.mrr;
        self.files.extend(&o.files);
        self.tokens.extend(&o.tokens);
        self.millis.extend(&o.millis);
        self.n += o.n;
    }

    fn recall10(&self) -> f64 {
        self.r10 / self.n.max(1) as f64
    }

    fn mrr(&self) -> f64 {
        self.mrr / self.n.max(1) as f64
    }

    /// The hot context's time per task: median and mean, in milliseconds.
    fn timing(&self) -> String {
        let mut v = self.millis.clone();
        v.sort_unstable();
        let mean = v.iter().sum::<u64>() as f64 / v.len().max(1) as f64;
        format!(
            "hot context time per task: median {} ms, mean {mean:.0} ms",
            v.get(v.len() / 2).copied().unwrap_or(0)
        )
    }

    fn line(&self, name: &str) -> String {
        let n = self.n.max(1) as f64;
        let med = |v: &[u64]| {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.get(v.len() / 2).copied()
        };
        let files: Vec<u64> = self.files.iter().map(|f| *f as u64).collect();
        format!(
            "  {name:<28} {:>8.2} {:>9.2} {:>7.2} {:>8} {:>8}",
            self.r5 / n,
            self.r10 / n,
            self.mrr / n,
            med(&files).map_or("-".into(), |f| f.to_string()),
            med(&self.tokens).map_or("-".into(), |t| t.to_string()),
        )
    }
}

const SYSTEMS: [&str; 4] = [
    "hot context",
    "search_code (default limit)",
    "search_code (limit 100)",
    "BM25 over files",
];

fn is_source(path: &str) -> bool {
    symbols::language_of(path).is_some_and(|l| SOURCE_LANGUAGES.contains(&l))
}

/// Whether a subject says something a search could use (not a merge, release or bump).
fn useful_subject(subject: &str) -> bool {
    let s = subject.to_lowercase();
    let skip = [
        "merge ",
        "bump ",
        "release ",
        "revert ",
        "version ",
        "prepare ",
        "update changelog",
        "changelog",
        "cargo fmt",
        "rustfmt",
        "typo",
        "format code",
        "lint",
        "clippy",
    ];
    if skip.iter().any(|p| s.starts_with(p) || s.contains(p)) {
        return false;
    }
    View::terms(subject).len() >= 3
}

/// The newest tasks of `repo` along its first-parent history, at most `max`.
fn tasks(repo: &git2::Repository, max: usize) -> Vec<Task> {
    let mut out = Vec::new();
    let Ok(mut walk) = repo.revwalk() else {
        return out;
    };
    let _ = walk.push_head();
    let _ = walk.simplify_first_parent();
    for oid in walk.flatten() {
        if out.len() == max {
            break;
        }
        let Ok(c) = repo.find_commit(oid) else {
            continue;
        };
        if c.parent_count() != 1 {
            continue;
        }
        let message = String::from_utf8_lossy(c.message_bytes()).into_owned();
        let subject = message
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string();
        if !useful_subject(&subject) {
            continue;
        }
        let Ok(parent) = c.parent(0) else { continue };
        let (Ok(pt), Ok(ct)) = (parent.tree(), c.tree()) else {
            continue;
        };
        let Ok(diff) = repo.diff_tree_to_tree(Some(&pt), Some(&ct), None) else {
            continue;
        };
        let mut targets = Vec::new();
        let mut sources = 0;
        for d in diff.deltas() {
            let Some(new) = d.new_file().path().and_then(|p| p.to_str()) else {
                continue;
            };
            if !is_source(new) {
                continue;
            }
            sources += 1;
            if let Some(old) = d.old_file().path().and_then(|p| p.to_str())
                && d.status() != git2::Delta::Added
                && is_source(old)
                && pt.get_path(Path::new(old)).is_ok()
            {
                targets.push(old.to_string());
            }
        }
        if targets.is_empty() || sources > MAX_TARGETS {
            continue;
        }
        targets.sort();
        targets.dedup();
        out.push(Task {
            commit: oid,
            parent: parent.id(),
            subject,
            targets,
        });
    }
    out
}

/// BM25 over whole files (k1 1.2, b 0.75) with the index's tokenizer, token counts cached
/// per blob so each task only tokenizes what changed.
struct Bm25 {
    cache: HashMap<git2::Oid, std::sync::Arc<HashMap<String, u32>>>,
}

impl Bm25 {
    fn rank(
        &mut self,
        repo: &git2::Repository,
        at: git2::Oid,
        files: &HashSet<String>,
        terms: &[String],
    ) -> Vec<String> {
        let Ok(tree) = repo.find_commit(at).and_then(|c| c.tree()) else {
            return Vec::new();
        };
        let mut docs: Vec<(String, std::sync::Arc<HashMap<String, u32>>)> = Vec::new();
        let _ = tree.walk(git2::TreeWalkMode::PreOrder, |dir, entry| {
            let path = format!("{dir}{}", entry.name().unwrap_or_default());
            if entry.kind() != Some(git2::ObjectType::Blob) || !files.contains(&path) {
                return git2::TreeWalkResult::Ok;
            }
            let tf = self.cache.entry(entry.id()).or_insert_with(|| {
                let text = repo
                    .find_blob(entry.id())
                    .map(|b| String::from_utf8_lossy(b.content()).into_owned())
                    .unwrap_or_default();
                let mut tf = HashMap::new();
                for t in tokenizer::tokens(&text) {
                    *tf.entry(t).or_insert(0u32) += 1;
                }
                // Path words count as content, as in BM25 over a file's path and text.
                for t in tokenizer::tokens(&path) {
                    *tf.entry(t).or_insert(0u32) += 1;
                }
                std::sync::Arc::new(tf)
            });
            docs.push((path, tf.clone()));
            git2::TreeWalkResult::Ok
        });
        let n = docs.len() as f64;
        let len = |tf: &HashMap<String, u32>| tf.values().map(|v| f64::from(*v)).sum::<f64>();
        let avg = docs.iter().map(|(_, tf)| len(tf)).sum::<f64>() / n.max(1.0);
        let idf: Vec<f64> = terms
            .iter()
            .map(|t| {
                let df = docs.iter().filter(|(_, tf)| tf.contains_key(t)).count() as f64;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
        let mut scored: Vec<(f64, String)> = docs
            .iter()
            .map(|(p, tf)| {
                let dl = len(tf);
                let s: f64 = terms
                    .iter()
                    .zip(&idf)
                    .map(|(t, idf)| {
                        let f = f64::from(*tf.get(t).unwrap_or(&0));
                        idf * f * 2.2 / (f + 1.2 * (0.25 + 0.75 * dl / avg.max(1.0)))
                    })
                    .sum();
                (s, p.clone())
            })
            .filter(|(s, _)| *s > 0.0)
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().map(|(_, p)| p).collect()
    }
}

fn distinct(paths: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = HashSet::new();
    paths
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect()
}

/// The files of a hot context in the order it shows them (from its references).
fn hot_files(references: &[String], resource: &str) -> Vec<String> {
    let prefix = format!("{resource}:");
    distinct(references.iter().filter_map(|r| {
        let rest = r.strip_prefix(&prefix)?;
        let path = match rest.rsplit_once(':') {
            Some((p, line)) if line.chars().all(|c| c.is_ascii_digit()) => p,
            _ => rest,
        };
        Some(path.to_string())
    }))
}

fn search_files(scopes: &[Scope], query: &str, limit: Option<usize>) -> Vec<String> {
    let mut args = serde_json::json!({ "query": query });
    if let Some(l) = limit {
        args["limit"] = l.into();
    }
    let Ok(a) = serde_json::from_value::<SearchCode>(args) else {
        return Vec::new();
    };
    let Ok(v) = skill::search_code(scopes, &a) else {
        return Vec::new();
    };
    let hits = v["files"].as_array().or(v["hits"].as_array());
    distinct(
        hits.into_iter()
            .flatten()
            .filter_map(|h| h["path"].as_str().map(str::to_string)),
    )
}

/// How many files the tree at HEAD holds, in all its directories.
fn files_at_head(repo: &git2::Repository) -> usize {
    let mut n = 0;
    if let Ok(tree) = repo.head().and_then(|h| h.peel_to_tree()) {
        let _ = tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
            n += usize::from(entry.kind() == Some(git2::ObjectType::Blob));
            git2::TreeWalkResult::Ok
        });
    }
    n
}

fn bench_repo(root: &Path, max_tasks: usize, verbose: bool) -> Option<(String, Vec<Scores>)> {
    let name = root.file_name()?.to_string_lossy().into_owned();
    let repo = match git2::Repository::open(root) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("{}: not a git checkout: {e}", root.display());
            return None;
        }
    };
    let tmp = std::env::temp_dir().join(format!("bench-retrieval-index-{}", std::process::id()));
    let dir = tmp.join(&name);
    let policy = Policy::default();
    let started = Instant::now();
    if let Err(e) = build::build(&dir, &name, root, Source::Git, &policy, &|_, _| {}) {
        eprintln!("{name}: index build failed: {e}");
        return None;
    }
    let built = started.elapsed();
    let tasks = tasks(&repo, max_tasks);
    let resolved = policy::resolve(&BTreeMap::new(), "strategize");
    let mut scores = vec![Scores::default(); SYSTEMS.len()];
    let mut bm25 = Bm25 {
        cache: HashMap::new(),
    };
    for t in &tasks {
        let parent = t.parent.to_string();
        let view = match View::open(&dir, Some(&parent), &policy) {
            Ok(v) => v,
            Err(e) => {
                eprintln!("{name} {}: {e}", t.commit);
                continue;
            }
        };
        let files: HashSet<String> = view.file_metas().into_iter().map(|f| f.0).collect();
        let scopes = [Scope {
            resource: name.clone(),
            alias: None,
            view,
            semantic: embed::Setting::Off,
        }];
        let timer = Instant::now();
        let hot = strategize::initial_context(&scopes, &t.subject, &resolved, &[]);
        scores[0].millis.push(timer.elapsed().as_millis() as u64);
        let ranked = [
            hot_files(&hot.references, &name),
            search_files(&scopes, &t.subject, None),
            search_files(&scopes, &t.subject, Some(100)),
            bm25.rank(&repo, t.parent, &files, &View::terms(&t.subject)),
        ];
        for (i, r) in ranked.iter().enumerate() {
            scores[i].add(r, &t.targets, (i == 0).then_some(hot.tokens));
        }
        if verbose {
            let rank_of = |r: &[String]| {
                t.targets
                    .iter()
                    .map(|x| {
                        r.iter()
                            .position(|p| p == x)
                            .map_or("-".into(), |i| (i + 1).to_string())
                    })
                    .collect::<Vec<_>>()
                    .join(",")
            };
            println!(
                "  {} {:<60} targets {:?} hot [{}] sc [{}] bm25 [{}] tokens {}",
                &t.commit.to_string()[..8],
                t.subject.chars().take(60).collect::<String>(),
                t.targets,
                rank_of(&ranked[0]),
                rank_of(&ranked[1]),
                rank_of(&ranked[3]),
                hot.tokens,
            );
            if t.targets
                .iter()
                .any(|x| !ranked[0].iter().take(10).any(|p| p == x))
            {
                let shown: Vec<String> = ranked[0]
                    .iter()
                    .take(12)
                    .map(|p| {
                        if t.targets.contains(p) {
                            format!("*{p}")
                        } else {
                            p.clone()
                        }
                    })
                    .collect();
                println!("      hot top 12: {}", shown.join(" "));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{name}: {} tasks (index built in {:.1} s, {} files at HEAD)",
        tasks.len(),
        built.as_secs_f64(),
        files_at_head(&repo)
    );
    Some((name, scores))
}

fn header() {
    println!(
        "  {:<28} {:>8} {:>9} {:>7} {:>8} {:>8}",
        "system", "recall@5", "recall@10", "MRR@20", "files", "tokens"
    );
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mut max_tasks = 40;
    let mut verbose = false;
    let mut roots: Vec<PathBuf> = Vec::new();
    while let Some(a) = args.next() {
        match a.as_str() {
            "--tasks" => {
                max_tasks = args.next().and_then(|n| n.parse().ok()).unwrap_or_else(|| {
                    eprintln!("--tasks takes a number");
                    std::process::exit(2)
                });
            }
            "--verbose" | "-v" => verbose = true,
            _ => roots.push(PathBuf::from(a)),
        }
    }
    if roots.is_empty() {
        eprintln!("usage: bench_retrieval [--tasks N] [--verbose] CHECKOUT...");
        std::process::exit(2);
    }
    let mut total = vec![Scores::default(); SYSTEMS.len()];
    for root in &roots {
        let Some((_, scores)) = bench_repo(root, max_tasks, verbose) else {
            continue;
        };
        header();
        for (i, s) in scores.iter().enumerate() {
            println!("{}", s.line(SYSTEMS[i]));
            total[i].merge(s);
        }
    }
    println!("all repositories: {} tasks", total[0].n);
    header();
    for (i, s) in total.iter().enumerate() {
        println!("{}", s.line(SYSTEMS[i]));
    }
    let (hot, bm) = (&total[0], &total[3]);
    let tokens = {
        let mut v = hot.tokens.clone();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let goal = |name: &str, ok: bool, detail: String| {
        println!(
            "goal {name:<40} {detail:<28} {}",
            if ok { "PASS" } else { "MISS" }
        );
    };
    goal(
        "hot context recall@10 >= 0.90",
        hot.recall10() >= 0.90,
        format!("{:.4}", hot.recall10()),
    );
    goal(
        "hot context recall@10 >= BM25 + 0.10",
        hot.recall10() >= bm.recall10() + 0.10,
        format!("{:.4} vs {:.4}", hot.recall10(), bm.recall10()),
    );
    goal(
        "hot context MRR@20 >= 0.75",
        hot.mrr() >= 0.75,
        format!("{:.4}", hot.mrr()),
    );
    goal(
        "hot context median tokens <= 4000",
        tokens <= 4000,
        format!("{tokens}"),
    );
    println!("{}", hot.timing());
}
