//! What a git checkout's history says about which files change together (spec section 25,
//! hot context): the files each of the newest commits reachable from the view's commit
//! changed, so the strategist's initial context can show, beside the files that match the
//! task's words, the files that usually change with them (a source and its tests, a flag's
//! definition and the code reading it).
//!
//! Only history the view can see is read: the commits reachable from the commit the view
//! reads (its base, itself included), never a later one. Each commit's changed files depend
//! only on the commit, so they are remembered per commit id for the process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use super::View;
use super::store::Source;

/// Newest commits read (merges are walked past, not counted).
pub const WINDOW: usize = 1000;
/// A commit changing more files than this is a sweeping change (a rename, a formatting
/// pass, a dependency bump) that says nothing about which files belong together.
pub const MAX_COMMIT_FILES: usize = 12;
/// Fewest commits two files must share before one is said to change with the other.
pub const MIN_SHARED: u32 = 2;

/// What the history keeps of one counted commit.
#[derive(Debug)]
struct Counted {
    /// The files it changed, sorted.
    files: Vec<String>,
    /// Its subject's terms ([`View::terms`]), for [`History::like`].
    terms: Vec<String>,
    /// Its subject line, to say why a file it changed is shown.
    subject: String,
}

/// Counted commits by id (none for a merge or a sweeping change).
type Cache = HashMap<git2::Oid, Option<Arc<Counted>>>;

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The files a commit changed against its only parent (a root commit against nothing), and
/// its message; `None` for a merge or a commit changing more than [`MAX_COMMIT_FILES`] files.
fn changed(repo: &git2::Repository, oid: git2::Oid) -> Option<Arc<Counted>> {
    if let Some(known) = cache().lock().ok().and_then(|c| c.get(&oid).cloned()) {
        return known;
    }
    let compute = || -> Option<Arc<Counted>> {
        let c = repo.find_commit(oid).ok()?;
        if c.parent_count() > 1 {
            return None;
        }
        let tree = c.tree().ok()?;
        let parent = c.parent(0).ok().and_then(|p| p.tree().ok());
        let diff = repo
            .diff_tree_to_tree(parent.as_ref(), Some(&tree), None)
            .ok()?;
        if diff.deltas().len() > MAX_COMMIT_FILES {
            return None;
        }
        let mut files: Vec<String> = diff
            .deltas()
            .filter_map(|d| {
                d.new_file()
                    .path()
                    .or_else(|| d.old_file().path())
                    .and_then(|p| p.to_str())
                    .map(str::to_string)
            })
            .collect();
        files.sort();
        files.dedup();
        // The subject line is what is matched: a body often lists unrelated detail, and
        // matching it too measured no better.
        let message = c.message().unwrap_or_default();
        let subject = message.lines().next().unwrap_or_default().trim().to_string();
        Some(Arc::new(Counted {
            files,
            terms: View::terms(&subject),
            subject,
        }))
    };
    let out = compute();
    if let Ok(mut c) = cache().lock() {
        if c.len() > 200_000 {
            c.clear();
        }
        c.insert(oid, out.clone());
    }
    out
}

/// The changed files of the newest commits reachable from one commit.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Each counted commit, newest first.
    commits: Vec<Arc<Counted>>,
    /// For each file, the positions in `commits` of the commits that changed it.
    by_file: HashMap<String, Vec<usize>>,
}

/// A past commit whose subject shares words with a task ([`History::like`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Like {
    /// Its subject line.
    pub subject: String,
    /// The files it changed.
    pub files: Vec<String>,
    /// Its score (BM25 over the counted commits' subjects) against the sum of the task terms'
    /// idf, about what a subject holding every term of the task once, at the average length,
    /// scores: near 1 when it says what the task says, small when it shares only common words.
    pub share: f32,
}

/// BM25's term-frequency saturation and length normalisation, as usual.
const BM25_K1: f32 = 1.2;
const BM25_B: f32 = 0.75;

/// A file that changes with another one.
#[derive(Debug, Clone, PartialEq)]
pub struct Related {
    /// The file.
    pub path: String,
    /// Commits that changed both.
    pub shared: u32,
    /// Commits that changed the file it is related to.
    pub of: u32,
    /// How strongly: `shared / sqrt(changes of one * changes of the other)` (1 when the two
    /// always change together, small when either also changes often without the other).
    pub strength: f32,
}

impl History {
    /// The history behind what `view` reads: the commits reachable from its base commit,
    /// or from `HEAD` for a git checkout read as it is; `None` for a directory or when the
    /// repository cannot be read.
    pub fn of_view(view: &View) -> Option<History> {
        let m = view.manifest();
        if m.source != Source::Git {
            return None;
        }
        let repo = git2::Repository::open(&m.root).ok()?;
        let at = match view.at_commit() {
            Some(c) => git2::Oid::from_str(&c).ok()?,
            None => repo.head().ok()?.peel_to_commit().ok()?.id(),
        };
        Some(Self::at(&repo, at, WINDOW))
    }

    /// The newest `window` commits reachable from `at` (itself included), newest first.
    pub fn at(repo: &git2::Repository, at: git2::Oid, window: usize) -> History {
        let mut h = History::default();
        let Ok(mut walk) = repo.revwalk() else {
            return h;
        };
        let _ = walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::TIME);
        if walk.push(at).is_err() {
            return h;
        }
        for oid in walk.flatten().take(window) {
            let Some(counted) = changed(repo, oid) else {
                continue;
            };
            let i = h.commits.len();
            for f in &counted.files {
                h.by_file.entry(f.clone()).or_default().push(i);
            }
            h.commits.push(counted);
        }
        h
    }

    /// Commits counted (merges and sweeping changes are not).
    pub fn commits(&self) -> usize {
        self.commits.len()
    }

    /// How many counted commits changed `path`.
    pub fn changes(&self, path: &str) -> u32 {
        self.by_file.get(path).map_or(0, |v| v.len() as u32)
    }

    /// Every file the counted commits changed, with how many of them changed it, most
    /// changed first (ties by path).
    pub fn most_changed(&self) -> Vec<(String, u32)> {
        let mut out: Vec<(String, u32)> = self
            .by_file
            .iter()
            .map(|(f, v)| (f.clone(), v.len() as u32))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// The `most` counted commits whose subjects match `terms` best (BM25 over the counted
    /// commits' subjects), best first; none when no subject holds any of the terms. A task
    /// worded like a past commit ("start 8.0" after "start 7.1", "ignore: ..." after other
    /// "ignore: ..." commits) usually changes what that commit changed.
    pub fn like(&self, terms: &[String], most: usize) -> Vec<Like> {
        let n = self.commits.len() as f32;
        if self.commits.is_empty() || terms.is_empty() {
            return Vec::new();
        }
        let average = self.commits.iter().map(|c| c.terms.len()).sum::<usize>() as f32 / n;
        let idf: Vec<f32> = terms
            .iter()
            .map(|t| {
                let df = self.commits.iter().filter(|c| c.terms.contains(t)).count() as f32;
                (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
            })
            .collect();
        let mut scored: Vec<(f32, usize)> = self
            .commits
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let len = c.terms.len() as f32;
                let score: f32 = terms
                    .iter()
                    .zip(&idf)
                    .map(|(t, idf)| {
                        let tf = c.terms.iter().filter(|x| *x == t).count() as f32;
                        idf * tf * (BM25_K1 + 1.0)
                            / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * len / average.max(1.0)))
                    })
                    .sum();
                (score > 0.0).then_some((score, i))
            })
            .collect();
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let full: f32 = idf.iter().sum::<f32>().max(f32::MIN_POSITIVE);
        scored
            .into_iter()
            .take(most)
            .map(|(score, i)| Like {
                subject: self.commits[i].subject.clone(),
                files: self.commits[i].files.clone(),
                share: score / full,
            })
            .collect()
    }

    /// The files that changed in at least [`MIN_SHARED`] of the commits that changed
    /// `path`, strongest first.
    pub fn related(&self, path: &str) -> Vec<Related> {
        let Some(mine) = self.by_file.get(path) else {
            return Vec::new();
        };
        let mut shared: HashMap<&str, u32> = HashMap::new();
        for &i in mine {
            for f in &self.commits[i].files {
                if f != path {
                    *shared.entry(f.as_str()).or_insert(0) += 1;
                }
            }
        }
        let of = mine.len() as u32;
        let mut out: Vec<Related> = shared
            .into_iter()
            .filter(|(_, n)| *n >= MIN_SHARED)
            .map(|(f, n)| Related {
                path: f.to_string(),
                shared: n,
                of,
                strength: n as f32 / ((of * self.changes(f)) as f32).sqrt(),
            })
            .collect();
        out.sort_by(|a, b| {
            b.strength
                .total_cmp(&a.strength)
                .then(b.shared.cmp(&a.shared))
                .then(a.path.cmp(&b.path))
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::testing::{git, repo_with_files};
    use std::path::Path;

    /// Writes `files` (path, content) and commits them with `message`; the new commit id.
    fn commit(repo: &Path, files: &[(&str, &str)], message: &str) -> git2::Oid {
        for (path, content) in files {
            let p = repo.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", message]);
        git2::Oid::from_str(git(repo, &["rev-parse", "HEAD"]).trim()).unwrap()
    }

    #[test]
    fn files_changed_together_in_two_commits_are_related_strongest_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        repo_with_files(dir, &[("src/flags.rs", "0"), ("src/args.rs", "0"), ("src/log.rs", "0")]);
        commit(dir, &[("src/flags.rs", "1"), ("src/args.rs", "1")], "a");
        commit(dir, &[("src/flags.rs", "2"), ("src/args.rs", "2")], "b");
        commit(dir, &[("src/flags.rs", "3"), ("src/log.rs", "1")], "c");
        let at = commit(dir, &[("src/log.rs", "2")], "d");
        let repo = git2::Repository::open(dir).unwrap();
        let h = History::at(&repo, at, WINDOW);
        // The first commit adds all three: it counts too.
        assert_eq!(h.commits(), 5);
        assert_eq!(h.changes("src/flags.rs"), 4);
        let related = h.related("src/flags.rs");
        let names: Vec<&str> = related.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(names, ["src/args.rs", "src/log.rs"], "{related:?}");
        assert_eq!((related[0].shared, related[0].of), (3, 4));
        // args.rs changed in 3 commits, all with flags.rs: 3 / sqrt(4 * 3).
        assert!((related[0].strength - 3.0 / 12f32.sqrt()).abs() < 1e-6);
        // log.rs shares the first commit and c: 2 / sqrt(4 * 3).
        assert_eq!(related[1].shared, 2);
        assert!(related[1].strength < related[0].strength);
    }

    #[test]
    fn past_commits_are_found_by_the_words_of_their_subjects_best_first() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        repo_with_files(dir, &[("pkg/__init__.py", "0"), ("CHANGES", "0"), ("pkg/core.py", "0")]);
        commit(dir, &[("pkg/__init__.py", "7.0"), ("CHANGES", "7.0")], "start 7.0");
        commit(dir, &[("pkg/core.py", "1")], "fix a crash at start of a command\n\nThe body is not read: version.");
        let at = commit(dir, &[("pkg/__init__.py", "7.1"), ("CHANGES", "7.1")], "start 7.1");
        let repo = git2::Repository::open(dir).unwrap();
        let h = History::at(&repo, at, WINDOW);
        let terms = View::terms("start 8.0");
        let like = h.like(&terms, 10);
        let subjects: Vec<&str> = like.iter().map(|l| l.subject.as_str()).collect();
        // "start 7.0" shares two of the task's three words, "start 7.1" one in a short subject,
        // the fix one in a longer subject.
        assert_eq!(subjects, ["start 7.0", "start 7.1", "fix a crash at start of a command"]);
        assert_eq!(like[0].files, ["CHANGES", "pkg/__init__.py"]);
        assert!(like[0].share > like[1].share && like[1].share > like[2].share, "{like:?}");
        assert!(like[0].share < 1.0, "it does not hold the task's 8: {like:?}");
        assert!(h.like(&View::terms("version"), 10).is_empty(), "a body's words are not matched");
        assert_eq!(h.like(&terms, 1).len(), 1);
    }

    #[test]
    fn a_file_sharing_one_commit_is_not_related() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        repo_with_files(dir, &[("a.rs", "0")]);
        commit(dir, &[("a.rs", "1"), ("b.rs", "1")], "b added with a");
        let at = commit(dir, &[("a.rs", "2")], "a alone");
        let repo = git2::Repository::open(dir).unwrap();
        assert!(History::at(&repo, at, WINDOW).related("a.rs").is_empty());
    }

    #[test]
    fn commits_after_the_base_and_sweeping_changes_are_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        repo_with_files(dir, &[("a.rs", "0"), ("b.rs", "0")]);
        let base = commit(dir, &[("a.rs", "1")], "a alone");
        // After the base: a.rs and later.rs change together twice.
        commit(dir, &[("a.rs", "2"), ("later.rs", "1")], "later 1");
        commit(dir, &[("a.rs", "3"), ("later.rs", "2")], "later 2");
        // A sweeping change touching more than MAX_COMMIT_FILES files, twice.
        for round in ["x", "y"] {
            let many: Vec<(String, String)> = (0..=MAX_COMMIT_FILES)
                .map(|i| (format!("gen/f{i}.rs"), round.to_string()))
                .chain([("b.rs".to_string(), round.to_string())])
                .collect();
            let refs: Vec<(&str, &str)> =
                many.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
            commit(dir, &refs, "sweep");
        }
        let repo = git2::Repository::open(dir).unwrap();
        let at_base = History::at(&repo, base, WINDOW);
        assert_eq!(at_base.changes("later.rs"), 0);
        assert!(at_base.related("a.rs").is_empty());
        let head = repo.head().unwrap().peel_to_commit().unwrap().id();
        let now = History::at(&repo, head, WINDOW);
        assert_eq!(now.related("a.rs")[0].path, "later.rs");
        assert_eq!(now.changes("gen/f0.rs"), 0, "sweeping commits are not counted");
        assert_eq!(now.changes("b.rs"), 1, "only the first commit, not the sweeps");
    }
}
