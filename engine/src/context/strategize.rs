//! The strategist's view of the project (spec sections 10 and 25): every target resource's
//! index opened at the plan's recorded base (the base commit of a git checkout, so the
//! strategy is reproducible; a directory as it is), the read-only tools over it
//! (`read_file`, `list_files` and the `code_intelligence` skill) and the initial context put
//! in its prompt: the repository overview, what `search_code` finds for the task's words and
//! the warm and cold decisions that share them, within `hot-max-tokens`.

use globset::GlobBuilder;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::policy::Resolved;
use super::{Budget, Hot, tiers};
use crate::domain::Id;
use crate::domain::messages::ToolSpec;
use crate::domain::tool_host::ToolOutcome;
use crate::index::skill::{self, Scope};
use crate::index::view::{FileHit, SearchQuery};
use crate::index::{self, View, overview};
use crate::paths::Paths;
use crate::registry::resources;
use crate::store::Store;
use crate::store::lifecycle_run::BaseKind;

/// Longest `read_file` answer, in bytes.
pub const READ_LIMIT: usize = 256 * 1024;

/// Opens the plan's resources' indexes at their bases (brought up to date first). Resources
/// the policy leaves out are skipped; one that cannot be indexed is reported, not fatal.
///
/// # Errors
/// [`crate::store::StoreError`].
pub fn scopes(
    paths: &Paths,
    store: &Store,
    plan_id: &Id,
    policy: &Resolved,
) -> Result<(Vec<Scope>, Vec<String>), crate::store::StoreError> {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let semantic = index::embed::setting(paths);
    for base in store.plan_bases(plan_id)? {
        if !policy.takes_resource(&base.resource_name) {
            continue;
        }
        let Ok(resource) = resources::find(store, &base.resource_name) else {
            problems.push(format!(
                "{}: the resource is no longer registered",
                base.resource_name
            ));
            continue;
        };
        let at = match base.kind {
            BaseKind::GitCheckout => base.base_commit.as_deref(),
            BaseKind::Directory => None,
        };
        match index::open(paths, &resource, at) {
            Ok(view) => out.push(Scope {
                resource: base.resource_name.clone(),
                alias: base.alias.clone(),
                view,
                semantic: semantic.clone(),
            }),
            Err(e) => problems.push(format!("{}: {e}", base.resource_name)),
        }
    }
    Ok((out, problems))
}

/// The strategist's initial context: each resource's overview, then the hits of
/// `search_code` for `task`, then the warm and cold `memory` items that share words with
/// `task` ([`tiers::promote`]), all within the policy's hot budget (paths the policy
/// excludes are left out).
pub fn initial_context(
    scopes: &[Scope],
    task: &str,
    policy: &Resolved,
    memory: &[tiers::Item],
) -> Hot {
    let mut b = Budget::for_policy(policy);
    if !scopes.is_empty() {
        overviews_and_hits(&mut b, scopes, task, policy);
    }
    tiers::promote(&mut b, memory, task);
    b.finish()
}

/// Share of `hot-max-tokens` the files matching the task may take (the rest is left to the
/// overview and promoted decisions).
pub const CODE_SHARE: u64 = 4;
/// A file scoring below this fraction of the best file is not shown.
pub const MIN_RELATIVE_SCORE: f32 = 0.2;
/// The best code files whose test files are shown after them.
pub const TESTS_FOR_TOP: usize = 5;
/// Most files named in the line saying what was left out for budget.
const LEFT_OUT_NAMED: usize = 10;
/// Longest snippet line in hot context, in characters.
const HOT_LINE_CHARS: usize = 120;

fn short(line: &str) -> String {
    let t = line.trim();
    if t.chars().count() <= HOT_LINE_CHARS {
        return t.to_string();
    }
    let mut s: String = t.chars().take(HOT_LINE_CHARS).collect();
    s.push('…');
    s
}

/// The test files that go with `path` (`x.go`: `x_test.go`; `pkg/x.py`: `pkg/test_x.py`,
/// `tests/test_x.py`; `x.ts`: `x.test.ts`, `x.spec.ts`), those among `files`.
fn companions(path: &str, files: &std::collections::HashSet<String>) -> Vec<String> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let Some((stem, ext)) = name.rsplit_once('.') else {
        return Vec::new();
    };
    let stem = stem.trim_start_matches('_');
    let join = |n: String| {
        if dir.is_empty() {
            n
        } else {
            format!("{dir}/{n}")
        }
    };
    let mut out = vec![
        join(format!("{stem}_test.{ext}")),
        join(format!("test_{stem}.{ext}")),
        join(format!("{stem}.test.{ext}")),
        join(format!("{stem}.spec.{ext}")),
        format!("tests/test_{stem}.{ext}"),
        format!("test/test_{stem}.{ext}"),
    ];
    out.retain(|c| c != path && files.contains(c));
    out
}

/// Why a file is shown in the hot context.
#[derive(Debug, Clone, PartialEq)]
enum Reason {
    /// It matched the task's words.
    Matched,
    /// It holds the tests of a file shown above it (by name) and did not match itself.
    TestsOf(String),
    /// It did not match, but changed together with a file that did.
    ChangesWith(ChangedWith),
    /// Too few files were found for the task; this one is among the files the history at
    /// the base changed most (in `changes` of its `of` commits).
    OftenChanged { changes: u32, of: u32 },
    /// It is the package entry file of the directory of a file shown above it and
    /// re-exports names from that file's module.
    EntryOf(String),
    /// It did not match, but a past commit whose subject says much of what the task says
    /// changed it (its subject).
    LikeCommit(String),
}

impl Reason {
    /// Why a file the task's words did not match is shown; `None` for a matched file.
    fn why(&self, resource: &str) -> Option<String> {
        match self {
            Reason::Matched => None,
            Reason::TestsOf(of) => Some(format!("tests of {of}")),
            Reason::ChangesWith(w) => Some(w.text(resource)),
            Reason::OftenChanged { changes, of } => {
                Some(format!("changed in {changes} of the last {of} commits"))
            }
            Reason::EntryOf(of) => Some(format!("package entry re-exporting from {of}")),
            Reason::LikeCommit(subject) => {
                Some(format!("changed by the past commit \"{subject}\""))
            }
        }
    }
}

/// The file shown above it that a file changed with most, in the history at the base.
#[derive(Debug, Clone, PartialEq)]
struct ChangedWith {
    path: String,
    shared: u32,
    of: u32,
}

impl ChangedWith {
    fn text(&self, resource: &str) -> String {
        format!(
            "changes with {resource}:{} (in {} of its {} commits)",
            self.path, self.shared, self.of
        )
    }
}

/// One file of the hot context, in the order shown.
struct Shown {
    resource: String,
    file: FileHit,
    reason: Reason,
    /// The file's rank: its search score relative to the best file, plus
    /// [`HISTORY_WEIGHT`] times what it shares with the best files' history.
    rank: f32,
    /// The matched file it changed with most, where history ranked it up.
    with: Option<ChangedWith>,
    /// The subject of the past commit worded like the task that ranked it up most
    /// ([`with_like_commits`]).
    like: Option<String>,
}

impl Shown {
    /// A file shown by its path alone, without search hits, for `reason` at `rank`.
    fn by_path(resource: String, path: String, reason: Reason, rank: f32) -> Shown {
        Shown {
            resource,
            file: empty_hit(path),
            reason,
            rank,
            with: None,
            like: None,
        }
    }
}

/// Orders files best rank first (ties by resource, then path, so the order is the same run
/// after run).
fn by_rank(files: &mut [Shown]) {
    files.sort_by(|a, b| {
        b.rank
            .total_cmp(&a.rank)
            .then(a.resource.cmp(&b.resource))
            .then(a.file.path.cmp(&b.file.path))
    });
}

/// The files ranked by search whose history brings related files: the best this many code
/// files (a changelog or a document among the best matches does not take a code file's
/// place).
pub const HISTORY_SEEDS: usize = 5;
/// Weight of a file's co-change with the best files, against its relative search score.
pub const HISTORY_WEIGHT: f32 = 1.0;
/// Share of what a top file lends a related file that follows the top file's own commits
/// ([`lent_share`]).
pub const FOLLOW_SHARE: f32 = 0.15;

/// What share of a top file's rank a file related to it is lent: mostly how strongly the two
/// change together (`shared / sqrt(changes of one × changes of the other)`, small for a
/// file that also changes with much else), and [`FOLLOW_SHARE`] of the share of the top
/// file's commits that changed the file too (`shared / changes of the top file`): a test file that
/// changes in most of a source's commits belongs to that change, however many other
/// sources it tests.
fn lent_share(r: &index::history::Related) -> f32 {
    let follows = r.shared as f32 / r.of.max(1) as f32;
    r.strength * (1.0 - FOLLOW_SHARE) + FOLLOW_SHARE * follows
}

/// Share of a file's rank its test files (by name) are lent.
pub const TEST_SHARE: f32 = 0.5;
/// Highest rank, against its source's, a matched test file reaches with what its source
/// lends it: just below the source.
pub const TEST_CAP: f32 = 0.99;
/// Most files shown only for changing with the matched ones.
pub const RELATED_MAX: usize = 10;

/// What a matched file that is not code (prose, configuration, a changelog) ranks at,
/// against its relative search score: the strategist plans changes to code, and a
/// document describing a feature often repeats the task's words more than the code does.
pub const PROSE_FACTOR: f32 = 0.3;

/// Languages the index knows that are prose, markup or configuration rather than code.
const NOT_CODE: &[&str] = &["markdown", "toml", "yaml", "json", "html", "css", "text"];

/// Whether `path` is in a programming language the index knows (not prose, markup or
/// configuration, nor a file of a kind it does not know).
fn is_code(path: &str) -> bool {
    index::symbols::language_of(path).is_some_and(|l| !NOT_CODE.contains(&l))
}

fn empty_hit(path: String) -> FileHit {
    FileHit {
        path,
        language: None,
        score: 0.0,
        terms: Vec::new(),
        lines: 0,
        definitions: Vec::new(),
        more_definitions: 0,
        snippets: Vec::new(),
    }
}

/// What the hot context's rules read of each resource at its base, read once per task:
/// its files (at a base commit, a walk of its whole tree) and its history. Each rule used
/// to list the tree or read the history itself, three to four tree walks per task.
struct AtBase {
    files: std::collections::HashMap<String, std::collections::HashSet<String>>,
    history: std::collections::HashMap<String, index::history::History>,
}

impl AtBase {
    fn read(scopes: &[Scope]) -> AtBase {
        let mut at = AtBase {
            files: std::collections::HashMap::new(),
            history: std::collections::HashMap::new(),
        };
        for s in scopes {
            at.files
                .insert(s.resource.clone(), s.view.files().into_iter().collect());
            if let Some(h) = index::history::History::of_view(&s.view) {
                at.history.insert(s.resource.clone(), h);
            }
        }
        at
    }

    /// Whether `path` exists in `resource` at its base.
    fn exists(&self, resource: &str, path: &str) -> bool {
        self.files.get(resource).is_some_and(|f| f.contains(path))
    }
}

/// The matched files re-ranked by the history at the base (spec section 25): each of the
/// best [`HISTORY_SEEDS`] matched code files of a resource ([`is_code`]; a changelog or a
/// document changes with nearly everything, so what it would lend says little) lends the
/// files that changed with it its relative score times how strongly they changed together
/// ([`index::history::History::related`], [`lent_share`]); a file's rank is its own relative score plus
/// [`HISTORY_WEIGHT`] times what it is lent. A file lent something that did not match is
/// added (at most [`RELATED_MAX`] of them), so a change's usual companions (its tests, the
/// code reading a definition) are shown even when the task's words are not in them.
fn rank_with_history(
    scopes: &[Scope],
    base: &AtBase,
    files: Vec<(String, FileHit)>,
    policy: &Resolved,
) -> Vec<Shown> {
    let best = files.first().map_or(0.0, |f| f.1.score).max(f32::MIN_POSITIVE);
    let mut shown: Vec<Shown> = files
        .into_iter()
        .map(|(resource, f)| Shown {
            rank: f.score / best * if is_code(&f.path) { 1.0 } else { PROSE_FACTOR },
            resource,
            file: f,
            reason: Reason::Matched,
            with: None,
            like: None,
        })
        .collect();
    shown.sort_by(|a, b| b.rank.total_cmp(&a.rank));
    let mut added = Vec::new();
    for s in scopes {
        let Some(history) = base.history.get(&s.resource) else {
            continue;
        };
        // What each file is lent, and by which seed most.
        let mut lent: std::collections::HashMap<String, (f32, f32, ChangedWith)> =
            std::collections::HashMap::new();
        let seeds: Vec<(String, f32)> = shown
            .iter()
            .filter(|x| x.resource == s.resource && is_code(&x.file.path))
            .take(HISTORY_SEEDS)
            .map(|x| (x.file.path.clone(), x.rank))
            .collect();
        for (seed, rank) in &seeds {
            for r in history.related(seed) {
                if !is_code(&r.path)
                    || !base.exists(&s.resource, &r.path)
                    || !policy.takes_path(&r.path)
                {
                    continue;
                }
                let part = rank * lent_share(&r);
                let e = lent.entry(r.path.clone()).or_insert((
                    0.0,
                    0.0,
                    ChangedWith {
                        path: seed.clone(),
                        shared: r.shared,
                        of: r.of,
                    },
                ));
                e.0 += part;
                if part > e.1 {
                    e.1 = part;
                    e.2 = ChangedWith {
                        path: seed.clone(),
                        shared: r.shared,
                        of: r.of,
                    };
                }
            }
        }
        for (path, (total, _, with)) in lent {
            match shown
                .iter_mut()
                .find(|x| x.resource == s.resource && x.file.path == path)
            {
                Some(x) => {
                    x.rank += HISTORY_WEIGHT * total;
                    x.with = Some(with);
                }
                None => added.push(Shown {
                    with: Some(with.clone()),
                    ..Shown::by_path(
                        s.resource.clone(),
                        path,
                        Reason::ChangesWith(with),
                        HISTORY_WEIGHT * total,
                    )
                }),
            }
        }
    }
    added.sort_by(|a, b| {
        b.rank
            .total_cmp(&a.rank)
            .then(a.file.path.cmp(&b.file.path))
    });
    added.truncate(RELATED_MAX);
    shown.extend(added);
    by_rank(&mut shown);
    shown
}

/// Past commits read whose subjects match the task best ([`index::history::History::like`]).
pub const LIKE_COMMITS: usize = 40;
/// Least share of the task a past commit's subject must say ([`index::history::Like::share`])
/// to lend anything: many commits sharing one common word (`fix`) would otherwise add up
/// to rank the files changed most, not the files like the task.
pub const LIKE_MIN_SHARE: f32 = 0.25;
/// Most a past commit worded like the task lends a file it changed, against the file's
/// relative search score.
pub const LIKE_WEIGHT: f32 = 0.5;
/// Least a past commit must lend a file, as a share of [`LIKE_WEIGHT`], for the file's
/// entry to name it: a commit sharing one common word with the task lends a little and
/// says nothing worth the prompt's room.
pub const LIKE_NAMED: f32 = 0.2;
/// Least share of the task a past commit's subject must say for the code files it changed
/// to be shown when the task's words and the history did not bring them: a subject saying
/// half of the task or more (`v2.34.1` for the task `v2.34.2`) usually names the same kind
/// of change to the same files.
pub const LIKE_ADD_SHARE: f32 = 0.5;
/// Most files shown only because past commits worded like the task changed them.
pub const LIKE_ADDED: usize = 3;

/// Re-ranks the shown files by the past commits worded like the task (spec section 25): each
/// resource's best [`LIKE_COMMITS`] by [`index::history::History::like`] that say at least
/// [`LIKE_MIN_SHARE`] of the task lend each code file they changed [`LIKE_WEIGHT`] times how
/// fully the commit's subject says what the task says ([`index::history::Like::share`]),
/// shared among the files it changed by their square root.
/// A task worded like earlier work ("start 8.0" after "start 7.1", "ignore: fix ..." after
/// other fixes to `ignore`) usually changes what that work changed. A file's entry names
/// the commit that lent it most, when that is at least [`LIKE_NAMED`] of the weight
/// ([`Shown::like`]). The code files that the commits saying at least [`LIKE_ADD_SHARE`] of
/// the task changed, where nothing else brought them, are added (the best
/// [`LIKE_ADDED`], by what those commits lend them, as [`Reason::LikeCommit`]): a release
/// task finds the version file no word of it names. Files commits saying less of the task
/// changed are not added: those pushed matched files out more often than they helped.
fn with_like_commits(
    base: &AtBase,
    task: &str,
    mut files: Vec<Shown>,
    policy: &Resolved,
) -> Vec<Shown> {
    let terms = View::terms(task);
    let mut added: Vec<Shown> = Vec::new();
    for (resource, history) in &base.history {
        let like = history.like(&terms, LIKE_COMMITS);
        if like.is_empty() {
            continue;
        }
        for x in files
            .iter_mut()
            .filter(|x| &x.resource == resource && is_code(&x.file.path))
        {
            let lenders = like.iter().filter(|l| l.share >= LIKE_MIN_SHARE);
            let most = lend_like(&x.file.path, &mut x.rank, lenders);
            if let Some((part, subject)) = most
                && part >= LIKE_WEIGHT * LIKE_NAMED
            {
                x.like = Some(subject.to_string());
            }
        }
        for l in like.iter().filter(|l| l.share >= LIKE_ADD_SHARE) {
            for path in &l.files {
                let shown = |x: &Shown| &x.resource == resource && &x.file.path == path;
                if !is_code(path)
                    || !base.exists(resource, path)
                    || !policy.takes_path(path)
                    || files.iter().any(shown)
                    || added.iter().any(shown)
                {
                    continue;
                }
                let mut rank = 0.0;
                let lenders = like.iter().filter(|l| l.share >= LIKE_ADD_SHARE);
                if let Some((_, subject)) = lend_like(path, &mut rank, lenders) {
                    let why = Reason::LikeCommit(subject.to_string());
                    added.push(Shown::by_path(resource.clone(), path.clone(), why, rank));
                }
            }
        }
    }
    by_rank(&mut added);
    added.truncate(LIKE_ADDED);
    files.extend(added);
    by_rank(&mut files);
    files
}

/// Adds to `rank`, the rank of the file at `path`, what each of `lenders` that changed it
/// lends ([`with_like_commits`]); the one that lent most, and how much.
fn lend_like<'a>(
    path: &str,
    rank: &mut f32,
    lenders: impl Iterator<Item = &'a index::history::Like>,
) -> Option<(f32, &'a str)> {
    let mut most: Option<(f32, &str)> = None;
    for l in lenders.filter(|l| l.files.binary_search_by(|f| f.as_str().cmp(path)).is_ok()) {
        let part = LIKE_WEIGHT * l.share / (l.files.len() as f32).sqrt();
        *rank += part;
        if most.is_none_or(|(m, _)| part > m) {
            most = Some((part, &l.subject));
        }
    }
    most
}

/// Lends each of the best [`TESTS_FOR_TOP`] code files' test files (by name: [`companions`])
/// [`TEST_SHARE`] of its rank, adding those not shown, then orders all files by rank: the
/// tests of a file go where a change to it usually goes too, without crowding out other
/// files that rank better than half of it.
fn with_tests(base: &AtBase, mut files: Vec<Shown>, policy: &Resolved) -> Vec<Shown> {
    let top: Vec<(String, String, f32)> = files
        .iter()
        .filter(|x| is_code(&x.file.path))
        .take(TESTS_FOR_TOP)
        .map(|x| (x.resource.clone(), x.file.path.clone(), x.rank))
        .collect();
    for (resource, path, rank) in top {
        let tests = base
            .files
            .get(&resource)
            .map(|set| companions(&path, set))
            .unwrap_or_default();
        let lent = rank * TEST_SHARE;
        for t in tests {
            if !policy.takes_path(&t) {
                continue;
            }
            match files
                .iter_mut()
                .find(|g| g.resource == resource && g.file.path == t)
            {
                Some(g) => {
                    if g.reason == Reason::Matched {
                        // Matched by its own words too: what it is lent adds to its rank,
                        // up to just below its source's.
                        g.rank = (g.rank + lent).min(rank * TEST_CAP).max(g.rank);
                    } else if lent > g.rank {
                        g.rank = lent;
                        if g.reason != Reason::Matched {
                            g.reason = Reason::TestsOf(path.clone());
                        }
                    }
                }
                None => files.push(Shown::by_path(
                    resource.clone(),
                    t,
                    Reason::TestsOf(path.clone()),
                    lent,
                )),
            }
        }
    }
    by_rank(&mut files);
    files
}

/// The best files whose package entry file (of their directory) comes just after them.
pub const ENTRIES_FOR_TOP: usize = 3;
/// Names of a directory's package entry file, by language.
const ENTRY_NAMES: &[&str] = &[
    "__init__.py",
    "mod.rs",
    "lib.rs",
    "index.js",
    "index.ts",
    "index.jsx",
    "index.tsx",
];

/// The package entry file of `path`'s directory among `files` that re-exports names from
/// `path`'s module (`from .m import`, `pub use ...m::`, `export ... from './m'`), read
/// with `read`. A new public name is usually defined in a module and re-exported by its
/// package's entry file, so a change to the module often changes the entry file too.
fn entry_of(
    path: &str,
    files: &std::collections::HashSet<String>,
    read: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    if ENTRY_NAMES.contains(&name) {
        return None;
    }
    let stem = name.split_once('.').map_or(name, |(s, _)| s);
    if stem.is_empty() {
        return None;
    }
    // The lines that re-export from the module, made once for every line of every entry.
    let python = format!("from .{stem} import");
    let rust = [format!("::{stem}::"), format!(" {stem}::")];
    let js = [format!("from './{stem}'"), format!("from \"./{stem}\"")];
    for entry in ENTRY_NAMES {
        let candidate = if dir.is_empty() {
            (*entry).to_string()
        } else {
            format!("{dir}/{entry}")
        };
        if !files.contains(&candidate) {
            continue;
        }
        let Some(text) = read(&candidate) else {
            continue;
        };
        let reexports = text.lines().any(|l| {
            let l = l.trim();
            l.starts_with(&python)
                || (l.starts_with("pub use ") && rust.iter().any(|r| l.contains(r.as_str())))
                || (l.starts_with("export ") && js.iter().any(|j| l.contains(j.as_str())))
        });
        if reexports {
            return Some(candidate);
        }
    }
    None
}

/// Words of a task saying it adds something (a name, a feature, a type).
const ADDING_WORDS: &[&str] = &[
    "add",
    "adds",
    "added",
    "adding",
    "new",
    "introduce",
    "introduces",
    "introduced",
];

/// Whether the task's words say it adds something: only then is a new public name likely,
/// and with it a change to the package's exports.
fn adds_a_name(task: &str) -> bool {
    task.split(|c: char| !c.is_alphanumeric())
        .any(|w| ADDING_WORDS.contains(&w.to_lowercase().as_str()))
}

/// Places after each of the best [`ENTRIES_FOR_TOP`] files the package entry file of its
/// directory that re-exports from it ([`entry_of`]), where it is not already shown above,
/// when the task adds something ([`adds_a_name`]): a change adding a public name to a
/// module usually adds it to the package's exports too.
fn with_entries(
    scopes: &[Scope],
    base: &AtBase,
    task: &str,
    mut files: Vec<Shown>,
    policy: &Resolved,
) -> Vec<Shown> {
    if !adds_a_name(task) {
        return files;
    }
    let top: Vec<(String, String)> = files
        .iter()
        .take(ENTRIES_FOR_TOP)
        .filter(|x| is_code(&x.file.path))
        .map(|x| (x.resource.clone(), x.file.path.clone()))
        .collect();
    for (resource, path) in top {
        let (Some(s), Some(all)) = (
            scopes.iter().find(|s| s.resource == resource),
            base.files.get(&resource),
        ) else {
            continue;
        };
        let Some(entry) = entry_of(&path, all, |p| s.view.read(p)) else {
            continue;
        };
        if !policy.takes_path(&entry) {
            continue;
        }
        let Some(at) = files
            .iter()
            .position(|x| x.resource == resource && x.file.path == path)
        else {
            continue;
        };
        let found = files
            .iter()
            .position(|x| x.resource == resource && x.file.path == entry);
        let moved = match found {
            Some(i) if i < at => continue,
            Some(i) => files.remove(i),
            None => Shown::by_path(resource.clone(), entry, Reason::EntryOf(path.clone()), 0.0),
        };
        files.insert(at + 1, moved);
    }
    files
}

/// Files of one family past this many (in rank order) rank lower ([`FAMILY_FACTOR`]).
pub const FAMILY_KEEP: usize = 2;
/// What a file ranks at, against its rank, once [`FAMILY_KEEP`] files of its family rank
/// above it.
pub const FAMILY_FACTOR: f32 = 0.5;

/// The words of a file name's stem (split at `_`, `-`, `.` and lower-to-upper case
/// changes, lowercased), test markers (`test`, `tests`, `spec`) and words holding a digit
/// left out.
fn name_words(path: &str) -> Vec<String> {
    let name = path.rsplit('/').next().unwrap_or(path);
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in stem.chars() {
        if !c.is_alphanumeric() {
            words.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_uppercase() && prev_lower {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        cur.extend(c.to_lowercase());
    }
    words.push(cur);
    words.retain(|w| {
        !w.is_empty()
            && !["test", "tests", "spec"].contains(&w.as_str())
            && !w.chars().any(|c| c.is_ascii_digit())
    });
    words
}

/// The families a file belongs to: files of one directory whose names start with the same
/// word (`typing_options.py`, `typing_help_option.py`) or end with it (`bash_completions.go`,
/// `zsh_completions.go`). A name of one word (`command.go`, `core.py`) is in no family.
fn families(resource: &str, path: &str) -> Vec<String> {
    let words = name_words(path);
    if words.len() < 2 {
        return Vec::new();
    }
    let dir = path.rsplit_once('/').map_or("", |(d, _)| d);
    let (first, last) = (&words[0], &words[words.len() - 1]);
    vec![
        format!("{resource}:{dir}/{first}_*"),
        format!("{resource}:{dir}/*_{last}"),
    ]
}

/// Fewest files the hot context shows when the project has them: a task whose words
/// find fewer files (a subject naming no code, such as `Micro-optimizations`) is shown
/// the code files the history at the base changed most, after the files it found.
pub const MIN_FILES: usize = 10;

/// Tops `files` up to [`MIN_FILES`] with each resource's most changed code files in the
/// history at the base ([`index::history::History::most_changed`]) that exist there, the
/// policy takes and are not tests ([`is_test`]: a change lands in the code, and a source's
/// tests are found by name once it is), most changed first (by share of each resource's
/// commits).
fn often_changed(scopes: &[Scope], base: &AtBase, files: &mut Vec<Shown>, policy: &Resolved) {
    let found = files.len();
    if found >= MIN_FILES {
        return;
    }
    let mut candidates: Vec<(String, String, u32, u32)> = Vec::new();
    for s in scopes {
        let Some(history) = base.history.get(&s.resource) else {
            continue;
        };
        let of = history.commits() as u32;
        candidates.extend(
            history
                .most_changed()
                .into_iter()
                .filter(|(p, _)| is_code(p) && base.exists(&s.resource, p) && policy.takes_path(p))
                .filter(|(p, _)| !is_test(p))
                .filter(|(p, _)| {
                    !files
                        .iter()
                        .any(|x| x.resource == s.resource && &x.file.path == p)
                })
                .take(MIN_FILES)
                .map(|(p, n)| (s.resource.clone(), p, n, of)),
        );
    }
    candidates.sort_by(|a, b| {
        (u64::from(b.2) * u64::from(a.3.max(1)))
            .cmp(&(u64::from(a.2) * u64::from(b.3.max(1))))
            .then(a.0.cmp(&b.0))
            .then(a.1.cmp(&b.1))
    });
    for (resource, path, changes, of) in candidates.into_iter().take(MIN_FILES - found) {
        files.push(Shown::by_path(
            resource,
            path,
            Reason::OftenChanged { changes, of },
            0.0,
        ));
    }
}

/// Whether `path` holds tests: under a `test`, `tests`, `spec` or `__tests__` directory,
/// or named as tests are (`x_test.go`, `test_x.py`, `x.test.ts`, `x.spec.ts`,
/// `conftest.py`).
fn is_test(path: &str) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let name = parts.pop().unwrap_or(path);
    if parts
        .iter()
        .any(|d| ["test", "tests", "spec", "specs", "__tests__"].contains(d))
    {
        return true;
    }
    let stem = name.split_once('.').map_or(name, |(s, _)| s);
    stem.starts_with("test_")
        || stem.ends_with("_test")
        || stem.ends_with("_spec")
        || stem == "conftest"
        || name.contains(".test.")
        || name.contains(".spec.")
}

/// Orders the files so that one family of similarly named files (spec section 25: distinct,
/// relevant files) does not fill the first places: going down the ranking, a file of which
/// [`FAMILY_KEEP`] files of one of its families ([`families`]) are already placed ranks at
/// [`FAMILY_FACTOR`] of its rank, and the best rank left is placed next.
fn diversify(mut files: Vec<Shown>) -> Vec<Shown> {
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::with_capacity(files.len());
    let keys: Vec<Vec<String>> = files
        .iter()
        .map(|x| families(&x.resource, &x.file.path))
        .collect();
    let mut keys: Vec<Option<Vec<String>>> = keys.into_iter().map(Some).collect();
    let mut left: Vec<usize> = (0..files.len()).collect();
    let effective = |i: usize, keys: &[Option<Vec<String>>], seen: &std::collections::HashMap<String, usize>, rank: f32| {
        let crowded = keys[i]
            .as_ref()
            .is_some_and(|k| k.iter().any(|k| seen.get(k).copied().unwrap_or(0) >= FAMILY_KEEP));
        if crowded { rank * FAMILY_FACTOR } else { rank }
    };
    let mut order = Vec::with_capacity(files.len());
    while !left.is_empty() {
        let mut best = 0;
        for (j, &i) in left.iter().enumerate() {
            let (a, b) = (
                effective(i, &keys, &seen, files[i].rank),
                effective(left[best], &keys, &seen, files[left[best]].rank),
            );
            if a > b {
                best = j;
            }
        }
        let i = left.remove(best);
        for k in keys[i].take().unwrap_or_default() {
            *seen.entry(k).or_insert(0) += 1;
        }
        order.push(i);
    }
    let mut slots: Vec<Option<Shown>> = files.drain(..).map(Some).collect();
    for i in order {
        if let Some(x) = slots[i].take() {
            out.push(x);
        }
    }
    out
}

/// The entry of a file shown for a file above it (its tests, or a file it changes with).
fn short_entry(resource: &str, f: &FileHit, why: &str) -> String {
    format!("- {resource}:{} ({why})", f.path)
}

/// What ranked a matched file up beyond its own words: the file above it it changes with,
/// and the past commit worded like the task that changed it.
fn ranked_up(x: &Shown) -> Option<String> {
    let with = x.with.as_ref().map(|w| w.text(&x.resource));
    let like = x
        .like
        .as_ref()
        .map(|subject| format!("changed by the past commit \"{}\"", short(subject)));
    match (with, like) {
        (Some(w), Some(l)) => Some(format!("{w}; {l}")),
        (w, l) => w.or(l),
    }
}

/// One file's entry: its path, score and matched terms (and what ranked it up), its best
/// definitions with a matching line each, then its other matching lines.
fn file_entry(resource: &str, f: &FileHit, up: Option<&str>) -> String {
    let mut block = format!(
        "- {resource}:{} (score {:.1}; terms: {}",
        f.path,
        f.score,
        f.terms.join(", ")
    );
    if let Some(up) = up {
        block.push_str("; ");
        block.push_str(up);
    }
    block.push(')');
    for d in &f.definitions {
        block.push_str(&format!(
            "\n    {} {} (lines {}-{})",
            d.kind,
            d.symbol.as_deref().unwrap_or("?"),
            d.start_line,
            d.end_line
        ));
        for l in d.snippets.iter().take(1) {
            block.push_str(&format!("\n      {}: {}", l.line, short(&l.text)));
        }
    }
    if f.more_definitions > 0 {
        block.push_str(&format!(
            "\n    ({} more matching definitions)",
            f.more_definitions
        ));
    }
    for l in f.snippets.iter().take(2) {
        block.push_str(&format!("\n    {}: {}", l.line, short(&l.text)));
    }
    block
}

fn overviews_and_hits(b: &mut Budget, scopes: &[Scope], task: &str, policy: &Resolved) {
    b.push("## Project overview (at the plan's base)", None);
    for s in scopes {
        let o = overview::overview(&s.view, 2, 12);
        let reference = format!("overview:{}", s.resource);
        if b.push_lines(&overview::render(&o), Some(reference.clone())) {
            b.why(reference, "hot", 0.0, Vec::new(), None);
        }
    }
    let q = SearchQuery {
        query: task.to_string(),
        limit: policy.query_limit as usize,
        ..Default::default()
    };
    let mut files = Vec::new();
    for s in scopes {
        if let Ok(found) = s.view.search_files(&q) {
            files.extend(found.into_iter().map(|f| (s.resource.clone(), f)));
        }
    }
    files.retain(|(_, f)| policy.takes_path(&f.path));
    files.sort_by(|a, b| b.1.score.total_cmp(&a.1.score));
    let best = files.first().map_or(0.0, |f| f.1.score);
    files.retain(|(_, f)| f.score >= best * MIN_RELATIVE_SCORE);
    files.truncate(policy.query_limit as usize);
    let base = AtBase::read(scopes);
    let mut files = if files.is_empty() {
        Vec::new()
    } else {
        let ranked = with_like_commits(
            &base,
            task,
            rank_with_history(scopes, &base, files, policy),
            policy,
        );
        with_entries(
            scopes,
            &base,
            task,
            diversify(with_tests(&base, ranked, policy)),
            policy,
        )
    };
    often_changed(scopes, &base, &mut files, policy);
    if files.is_empty() {
        return;
    }
    let mut heading = format!(
        "## Code that matches the task (search_code; terms: {}), and files that changed with it",
        View::terms(task).join(", ")
    );
    if files
        .iter()
        .any(|x| matches!(x.reason, Reason::OftenChanged { .. }))
    {
        heading.push_str("; too few files matched, so also the code the history changed most");
    }
    if !b.push(&heading, None) {
        return;
    }
    // The files share a part of the budget, so what follows keeps room.
    let share = (policy.hot_max_tokens / CODE_SHARE).min(b.left());
    let floor = b.left().saturating_sub(share);
    let mut left_out = Vec::new();
    for x in &files {
        let (resource, f) = (&x.resource, &x.file);
        let (entry, score, via) = match x.reason.why(resource) {
            None => {
                let up = ranked_up(x);
                (file_entry(resource, f, up.as_deref()), f64::from(f.score), up)
            }
            Some(why) => {
                // A file lent its rank by a related one is scored by that rank.
                let score = match x.reason {
                    Reason::ChangesWith(_) | Reason::LikeCommit(_) => f64::from(x.rank),
                    _ => 0.0,
                };
                (short_entry(resource, f, &why), score, Some(why))
            }
        };
        let cost = b.cost(&entry);
        let reference = format!("{resource}:{}", f.path);
        if b.left().saturating_sub(cost) < floor || !b.push(&entry, None) {
            left_out.push((reference, score, cost));
            continue;
        }
        b.reference(reference.clone());
        for d in &f.definitions {
            b.reference(format!("{resource}:{}:{}", f.path, d.start_line));
        }
        b.why(reference, "hot", score, f.terms.clone(), via);
    }
    if left_out.is_empty() {
        return;
    }
    let mut names: Vec<String> = left_out
        .iter()
        .take(LEFT_OUT_NAMED)
        .map(|(r, _, _)| r.clone())
        .collect();
    if left_out.len() > LEFT_OUT_NAMED {
        names.push("…".into());
    }
    b.push(
        &format!(
            "(left out for budget, {} more files: {})",
            left_out.len(),
            names.join(", ")
        ),
        None,
    );
    for (reference, score, cost) in left_out {
        b.left_out(reference, "hot", score, cost);
    }
}

fn default_max() -> usize {
    1000
}

/// Arguments of the strategist's `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// File path relative to the resource root (or `path://RESOURCE/...`).
    pub path: String,
    /// First line to return (1-based).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Number of lines to return.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub line_count: Option<u64>,
}

/// Arguments of the strategist's `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFiles {
    /// Glob over paths relative to the resource root (`**/*.rs`).
    pub pattern: String,
    /// Only this resource (name or alias).
    #[serde(default)]
    pub resource: Option<String>,
    /// Most paths returned (default 1000).
    #[serde(default = "default_max")]
    #[schemars(range(min = 1, max = 100000))]
    pub max_results: usize,
}

/// Read-only tools over the plan's bases: `read_file`, `list_files` and `code_intelligence`.
pub struct BaseTools {
    scopes: Vec<Scope>,
}

impl BaseTools {
    /// Tools over these scopes.
    pub fn new(scopes: Vec<Scope>) -> Self {
        Self { scopes }
    }

    /// The scopes.
    pub fn scopes(&self) -> &[Scope] {
        &self.scopes
    }

    /// The tools offered.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut out = vec![
            ToolSpec {
                name: "read_file".into(),
                description:
                    "Read a file of the project as it was at the plan's base (line range optional)"
                        .into(),
                input_schema: schemars::schema_for!(ReadFile).to_value(),
            },
            ToolSpec {
                name: "list_files".into(),
                description: "List the project's files at the plan's base whose paths match a glob"
                    .into(),
                input_schema: schemars::schema_for!(ListFiles).to_value(),
            },
        ];
        out.extend(
            skill::specs()
                .into_iter()
                .map(|(name, description, input_schema)| ToolSpec {
                    name: name.into(),
                    description: description.into(),
                    input_schema,
                }),
        );
        out
    }

    /// Whether `name` is one of these tools.
    pub fn offers(&self, name: &str) -> bool {
        name == "read_file" || name == "list_files" || skill::TOOLS.contains(&name)
    }

    /// Runs a tool (synchronously).
    pub fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let result = match name {
            "read_file" => self.read_file(args),
            "list_files" => self.list_files(args),
            _ => skill::call(&self.scopes, name, args).map_err(|e| e.to_string()),
        };
        match result {
            Ok(v) => ToolOutcome::ok(v.to_string()),
            Err(e) => ToolOutcome::error(e),
        }
    }

    fn scope_of<'a>(&'a self, path: &'a str) -> Result<(&'a Scope, &'a str), String> {
        if let Some(rest) = path.strip_prefix("path://") {
            let (name, tail) = rest.split_once('/').unwrap_or((rest, ""));
            let s = self
                .scopes
                .iter()
                .find(|s| {
                    s.resource == name
                        || s.alias.as_deref() == Some(name)
                        || s.resource.rsplit('/').next() == Some(name)
                })
                .ok_or_else(|| {
                    format!("invalid argument `path`: the plan has no resource `{name}`")
                })?;
            return Ok((s, tail));
        }
        match self.scopes.as_slice() {
            [only] => Ok((only, path)),
            [] => Err("the plan has no readable resources".into()),
            _ => Err("invalid argument `path`: the plan has several resources; write path://RESOURCE/PATH".into()),
        }
    }

    fn read_file(&self, args: Value) -> Result<Value, String> {
        let a: ReadFile =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let (s, rel) = self.scope_of(&a.path)?;
        let rel = rel.trim_start_matches("./");
        let text = s.view.read(rel).ok_or_else(|| {
            format!(
                "NOT_FOUND: {rel} does not exist in {} at the plan's base (or is not text)",
                s.resource
            )
        })?;
        let start = a.start_line.unwrap_or(1).max(1) as usize;
        let count = a.line_count.map_or(usize::MAX, |c| c as usize);
        let mut out = String::new();
        let mut truncated = false;
        for line in text.split_inclusive('\n').skip(start - 1).take(count) {
            if out.len() + line.len() > READ_LIMIT {
                truncated = true;
                break;
            }
            out.push_str(line);
        }
        Ok(json!({
            "resource": s.resource, "path": rel, "commit": s.view.at_commit(), "size": text.len(),
            "total_lines": text.lines().count(), "start_line": start, "truncated": truncated, "content": out,
        }))
    }

    fn list_files(&self, args: Value) -> Result<Value, String> {
        let a: ListFiles =
            serde_json::from_value(args).map_err(|e| format!("invalid arguments: {e}"))?;
        let glob = GlobBuilder::new(&a.pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("invalid argument `pattern`: {e}"))?
            .compile_matcher();
        let mut files = Vec::new();
        let mut truncated = false;
        for s in &self.scopes {
            if let Some(r) = &a.resource
                && s.resource != *r
                && s.alias.as_deref() != Some(r)
            {
                continue;
            }
            for f in s.view.files() {
                if glob.is_match(&f) {
                    if files.len() == a.max_results {
                        truncated = true;
                        break;
                    }
                    files.push(if self.scopes.len() > 1 {
                        format!("path://{}/{f}", s.resource)
                    } else {
                        f
                    });
                }
            }
        }
        Ok(
            json!({"pattern": a.pattern, "files": files, "count": files.len(), "truncated": truncated}),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Policy, Source, build, embed};
    use crate::sandbox::testing::{git, repo_with_files};
    use std::collections::BTreeMap;
    use std::path::Path;

    fn commit(repo: &Path, files: &[(&str, &str)], message: &str) -> String {
        for (path, content) in files {
            std::fs::write(repo.join(path), content).unwrap();
        }
        git(repo, &["add", "-A"]);
        git(repo, &["commit", "-q", "-m", message]);
        git(repo, &["rev-parse", "HEAD"]).trim().to_string()
    }

    /// The strategist's initial context for `task` over `repo`'s index read at `base`.
    fn hot_at(tmp: &Path, repo: &Path, base: &str, task: &str) -> Hot {
        let dir = tmp.join("index");
        let policy = Policy::default();
        build::build(&dir, "local/demo", repo, Source::Git, &policy, &|_, _| {}).unwrap();
        let view = View::open(&dir, Some(base), &policy).unwrap();
        let scopes = [Scope {
            resource: "local/demo".into(),
            alias: None,
            view,
            semantic: embed::Setting::Off,
        }];
        let resolved = super::super::policy::resolve(&BTreeMap::new(), "strategize");
        initial_context(&scopes, task, &resolved, &[])
    }

    fn position(hot: &Hot, path: &str) -> Option<usize> {
        let r = format!("local/demo:{path}");
        hot.references
            .iter()
            .filter(|x| x.matches(':').count() == 1 && !x.starts_with("overview:"))
            .position(|x| *x == r)
    }

    #[test]
    fn a_file_that_changed_with_the_best_match_before_the_base_is_shown_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let flags = |n: u32| format!("/// Disables the index flags.\npub fn disable_index_flags() -> u32 {{ {n} }}\n");
        let plain = |name: &str, n: u32| format!("pub fn {name}() -> u32 {{ {n} }}\n");
        repo_with_files(
            &repo,
            &[
                ("src/flags.rs", &flags(0)),
                ("src/hiargs.rs", &plain("build_matcher", 0)),
                ("src/printer.rs", &plain("print_line", 0)),
            ],
        );
        for n in 1..=2 {
            commit(
                &repo,
                &[("src/flags.rs", &flags(n)), ("src/hiargs.rs", &plain("build_matcher", n))],
                "together",
            );
        }
        let base = commit(&repo, &[("src/printer.rs", &plain("print_line", 1))], "alone");
        // After the base, printer.rs changes with flags.rs twice: not visible at the base.
        for n in 3..=4 {
            commit(
                &repo,
                &[("src/flags.rs", &flags(n)), ("src/printer.rs", &plain("print_line", n))],
                "later",
            );
        }
        let hot = hot_at(tmp.path(), &repo, &base, "disable the index flags");
        assert_eq!(position(&hot, "src/flags.rs"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "src/hiargs.rs"), Some(1), "{}", hot.text);
        // printer.rs is shown only to top the short list up, not as changing with flags.rs.
        assert!(
            !hot.text.contains("local/demo:src/printer.rs (changes with"),
            "{}",
            hot.text
        );
        let why = "changes with local/demo:src/flags.rs (in 3 of its 3 commits)";
        assert!(
            hot.text.contains(&format!("- local/demo:src/hiargs.rs ({why})")),
            "{}",
            hot.text
        );
        let item = hot
            .items
            .iter()
            .find(|i| i.reference == "local/demo:src/hiargs.rs")
            .unwrap();
        assert_eq!(item.via.as_deref(), Some(why));
        assert!(item.score > 0.0 && item.terms.is_empty(), "{item:?}");
    }

    #[test]
    fn documents_among_the_best_matches_leave_the_history_to_the_best_code_files() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let code = |name: &str, n: u32| format!("pub fn {name}() -> u32 {{ {n} }}\n");
        let mut files: Vec<(String, String)> = (1..=5)
            .map(|i| (format!("docs/guide{i}.md"), "# Index flags\n".to_string()))
            .collect();
        files.push(("src/opts.rs".into(), code("run", 0)));
        files.push(("src/hiargs.rs".into(), code("build_matcher", 0)));
        let refs: Vec<(&str, &str)> = files.iter().map(|(p, c)| (p.as_str(), c.as_str())).collect();
        repo_with_files(&repo, &refs);
        let mut base = String::new();
        for n in 1..=2 {
            base = commit(
                &repo,
                &[("src/opts.rs", &code("run", n)), ("src/hiargs.rs", &code("build_matcher", n))],
                "together",
            );
        }
        let dir = tmp.path().join("index");
        let policy = Policy::default();
        build::build(&dir, "local/demo", &repo, Source::Git, &policy, &|_, _| {}).unwrap();
        let scopes = [Scope {
            resource: "local/demo".into(),
            alias: None,
            view: View::open(&dir, Some(&base), &policy).unwrap(),
            semantic: embed::Setting::Off,
        }];
        // Five documents match best (at half their score, 0.5 of the best) and the code
        // file after them (0.4): the code file's history is read all the same.
        let hit = |path: &str, score: f32| ("local/demo".to_string(), FileHit { score, ..empty_hit(path.into()) });
        let mut hits: Vec<(String, FileHit)> = (1..=5).map(|i| hit(&format!("docs/guide{i}.md"), 10.0)).collect();
        hits.push(hit("src/opts.rs", 4.0));
        let resolved = super::super::policy::resolve(&BTreeMap::new(), "strategize");
        let ranked = rank_with_history(&scopes, &AtBase::read(&scopes), hits, &resolved);
        let order: Vec<&str> = ranked.iter().map(|x| x.file.path.as_str()).collect();
        let lent = ranked
            .iter()
            .find(|x| x.file.path == "src/hiargs.rs")
            .unwrap_or_else(|| panic!("{order:?}"));
        assert!(
            matches!(&lent.reason, Reason::ChangesWith(w) if w.path == "src/opts.rs"),
            "{order:?}"
        );
    }

    /// A repository whose history at `base` changed `src/core.py` in 4 commits,
    /// `src/util.py` in 3, `README.md` in 6 and `src/rare.py` once, and after `base`
    /// `src/rare.py` in 5 more. Its code's words are `parse`, `render`, `spare`.
    fn often_changed_repo(repo: &Path) -> String {
        let core = |n: u32| format!("def parse():\n    return {n}\n");
        let util = |n: u32| format!("def render():\n    return {n}\n");
        let rare = |n: u32| format!("def spare():\n    return {n}\n");
        repo_with_files(
            repo,
            &[
                ("src/core.py", &core(0)),
                ("src/util.py", &util(0)),
                ("src/rare.py", &rare(0)),
                ("README.md", "# demo\n0\n"),
            ],
        );
        for n in 1..=3 {
            commit(repo, &[("src/core.py", &core(n)), ("README.md", &format!("# demo\n{n}\n"))], "core");
        }
        for n in 1..=2 {
            commit(repo, &[("src/util.py", &util(n)), ("README.md", &format!("# demo\n{}\n", n + 3))], "util");
        }
        let base = git(repo, &["rev-parse", "HEAD"]).trim().to_string();
        for n in 1..=5 {
            commit(repo, &[("src/rare.py", &rare(n))], "rare after the base");
        }
        base
    }

    #[test]
    fn a_task_whose_words_find_nothing_is_shown_the_code_changed_most_at_the_base() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = often_changed_repo(&repo);
        let hot = hot_at(tmp.path(), &repo, &base, "Micro-optimizations everywhere");
        // Most changed first; the README changed most but is not code; what rare.py's
        // history after the base says is not read.
        assert_eq!(position(&hot, "src/core.py"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "src/util.py"), Some(1), "{}", hot.text);
        assert_eq!(position(&hot, "src/rare.py"), Some(2), "{}", hot.text);
        assert_eq!(position(&hot, "README.md"), None, "{}", hot.text);
        let why = "changed in 4 of the last 6 commits";
        assert!(
            hot.text.contains(&format!("- local/demo:src/core.py ({why})")),
            "{}",
            hot.text
        );
        let item = hot
            .items
            .iter()
            .find(|i| i.reference == "local/demo:src/core.py")
            .unwrap();
        assert_eq!(item.via.as_deref(), Some(why));
    }

    #[test]
    fn too_few_files_found_are_topped_up_with_the_code_changed_most_after_them() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = often_changed_repo(&repo);
        let hot = hot_at(tmp.path(), &repo, &base, "spare the rare cases");
        assert_eq!(position(&hot, "src/rare.py"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "src/core.py"), Some(1), "{}", hot.text);
        assert_eq!(position(&hot, "src/util.py"), Some(2), "{}", hot.text);
    }

    #[test]
    fn a_document_repeating_the_task_words_ranks_below_the_code_that_matches_them() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = repo_with_files(
            &repo,
            &[
                (
                    "docs/pager.md",
                    "# Pager\nThe pager file writes to the pager file. The pager file pages.\n",
                ),
                ("src/pager.py", "def page(out):\n    return out  # the pager file\n"),
                ("src/other.py", "def unrelated():\n    return 1\n"),
            ],
        );
        let hot = hot_at(tmp.path(), &repo, &base, "add a pager file");
        let score = |p: &str| {
            let r = format!("local/demo:{p}");
            hot.items.iter().find(|i| i.reference == r).unwrap().score
        };
        // The document scores higher, but not twice as high.
        assert!(score("docs/pager.md") > score("src/pager.py"), "{}", hot.text);
        assert!(score("docs/pager.md") < 2.0 * score("src/pager.py"), "{}", hot.text);
        let code = position(&hot, "src/pager.py").expect("code shown");
        let doc = position(&hot, "docs/pager.md").expect("document shown");
        assert!(code < doc, "{}", hot.text);
    }

    #[test]
    fn a_matched_files_tests_are_shown_with_half_its_rank_and_say_whose_tests_they_are() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = repo_with_files(
            &repo,
            &[
                ("command.go", "package cobra\n\nfunc HelpTemplate() string { return \"help template\" }\n"),
                ("command_test.go", "package cobra\n\nfunc TestNothing() {}\n"),
            ],
        );
        let hot = hot_at(tmp.path(), &repo, &base, "fix the help template");
        assert_eq!(position(&hot, "command.go"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "command_test.go"), Some(1), "{}", hot.text);
        assert!(
            hot.text
                .contains("- local/demo:command_test.go (tests of command.go)"),
            "{}",
            hot.text
        );
        let item = hot
            .items
            .iter()
            .find(|i| i.reference == "local/demo:command_test.go")
            .unwrap();
        assert_eq!(item.via.as_deref(), Some("tests of command.go"));
    }

    #[test]
    fn a_matched_test_of_the_best_file_adds_half_its_rank_but_stays_below_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = repo_with_files(
            &repo,
            &[
                (
                    "src/pager.py",
                    "def pager_file():\n    return open_pager()\n",
                ),
                (
                    "src/echo.py",
                    "def echo_via_pager(text):\n    \"Echoes to the pager file.\"\n    pager_file = open_pager_file()\n    return pager_file.write(text)\n",
                ),
                (
                    "tests/test_pager.py",
                    "def test_it():\n    assert run() == 1\n",
                ),
                ("src/other.py", "def unrelated():\n    return 1\n"),
            ],
        );
        let hot = hot_at(tmp.path(), &repo, &base, "pager file");
        // The test matched less than echo.py; its own rank plus half its source's
        // puts it above echo.py, never above the source itself.
        assert_eq!(position(&hot, "src/pager.py"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "tests/test_pager.py"), Some(1), "{}", hot.text);
        assert_eq!(position(&hot, "src/echo.py"), Some(2), "{}", hot.text);
    }

    #[test]
    fn the_package_entry_re_exporting_from_a_top_file_comes_just_after_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let base = repo_with_files(
            &repo,
            &[
                (
                    "src/pkg/pager.py",
                    "def get_pager():\n    \"Opens a scrolling viewer for long listings.\"\n    return scrolling_viewer(listings)\n",
                ),
                (
                    "src/pkg/echo.py",
                    "def echo(text):\n    \"Writes text, or long listings to a viewer.\"\n    return text\n",
                ),
                (
                    "src/pkg/__init__.py",
                    "from .pager import get_pager as get_pager\nfrom .echo import echo as echo\n",
                ),
                ("src/pkg/other.py", "def unrelated():\n    return 1\n"),
            ],
        );
        let hot = hot_at(tmp.path(), &repo, &base, "Add a scrolling viewer for listings");
        assert_eq!(position(&hot, "src/pkg/pager.py"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "src/pkg/__init__.py"), Some(1), "{}", hot.text);
        assert_eq!(position(&hot, "src/pkg/echo.py"), Some(2), "{}", hot.text);
        assert!(
            hot.text
                .contains("package entry re-exporting from src/pkg/pager.py"),
            "{}",
            hot.text
        );
        // A task adding nothing leaves the entry file where its own rank puts it.
        let tmp2 = tempfile::tempdir().unwrap();
        let hot = hot_at(tmp2.path(), &repo, &base, "Fix the scrolling viewer listings");
        assert_eq!(position(&hot, "src/pkg/echo.py"), Some(1), "{}", hot.text);
        assert!(!hot.text.contains("package entry"), "{}", hot.text);
    }

    #[test]
    fn an_entry_file_re_exports_only_from_the_modules_it_imports_names_from() {
        let files: std::collections::HashSet<String> = [
            "src/pkg/__init__.py",
            "src/pkg/core.py",
            "src/pkg/_impl.py",
            "crates/x/src/lib.rs",
            "crates/x/src/walk.rs",
            "crates/x/src/dir.rs",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let read = |p: &str| match p {
            "src/pkg/__init__.py" => Some("from .core import Command as Command\n".to_string()),
            "crates/x/src/lib.rs" => {
                Some("pub use crate::walk::{Walk, WalkBuilder};\nmod dir;\nmod walk;\n".into())
            }
            _ => None,
        };
        assert_eq!(
            entry_of("src/pkg/core.py", &files, read).as_deref(),
            Some("src/pkg/__init__.py")
        );
        assert_eq!(entry_of("src/pkg/_impl.py", &files, read), None);
        assert_eq!(entry_of("src/pkg/__init__.py", &files, read), None);
        assert_eq!(
            entry_of("crates/x/src/walk.rs", &files, read).as_deref(),
            Some("crates/x/src/lib.rs")
        );
        assert_eq!(entry_of("crates/x/src/dir.rs", &files, read), None);
    }

    #[test]
    fn similarly_named_files_past_two_rank_below_a_differently_named_match() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let shell = |sh: &str| {
            format!("package cobra\n\n// {sh} completion descriptions: completion descriptions for {sh}.\nfunc Gen{sh}Completion() string {{ return \"completion descriptions\" }}\n")
        };
        let (bash, zsh, fish, pwsh) = (shell("bash"), shell("zsh"), shell("fish"), shell("powershell"));
        let base = repo_with_files(
            &repo,
            &[
                ("bash_completions.go", bash.as_str()),
                ("zsh_completions.go", zsh.as_str()),
                ("fish_completions.go", fish.as_str()),
                ("powershell_completions.go", pwsh.as_str()),
                ("args.go", "package cobra\n\nfunc NoArgs() int { return 0 }\n"),
                ("flags.go", "package cobra\n\nfunc ParseFlags() int { return 1 }\n"),
                ("usage.go", "package cobra\n\nfunc UsageString() int { return 2 }\n"),
                ("version.go", "package cobra\n\nfunc Version() int { return 3 }\n"),
                ("hooks.go", "package cobra\n\nfunc RunHooks() int { return 4 }\n"),
                ("errors.go", "package cobra\n\nfunc Fail() int { return 5 }\n"),
                (
                    "active_help.go",
                    "package cobra\n\n// Active help next to completion descriptions.\nfunc CompletionDescriptionsHelp() string { return \"completion descriptions: completion descriptions, completion descriptions\" }\n",
                ),
            ],
        );
        let hot = hot_at(tmp.path(), &repo, &base, "show completion descriptions");
        let family = ["bash_completions.go", "zsh_completions.go", "fish_completions.go", "powershell_completions.go"];
        let active = position(&hot, "active_help.go").unwrap_or_else(|| panic!("{}", hot.text));
        // The differently named file scores lower than every shell file...
        let score = |p: &str| {
            let r = format!("local/demo:{p}");
            hot.items.iter().find(|i| i.reference == r).unwrap().score
        };
        assert!(family.iter().all(|f| score(f) > score("active_help.go")), "{}", hot.text);
        // ...yet only two of the family come before it.
        let before = family
            .iter()
            .filter(|f| position(&hot, f).expect("shown") < active)
            .count();
        assert_eq!(before, 2, "{}", hot.text);
    }

    #[test]
    fn file_families_are_a_directory_and_a_shared_first_or_last_name_word() {
        assert_eq!(
            families("r", "tests/typing/typing_help_option.py"),
            ["r:tests/typing/typing_*", "r:tests/typing/*_option"]
        );
        assert_eq!(
            families("r", "bash_completionsV2_test.go"),
            ["r:/bash_*", "r:/*_completions"]
        );
        assert!(families("r", "command.go").is_empty());
        assert!(families("r", "tests/test_options.py").is_empty());
        assert!(families("r", "src/click/_termui_impl.py").len() == 2);
    }

    #[test]
    fn a_matched_file_that_past_commits_worded_like_the_task_changed_ranks_up_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let release = |n: u32| {
            format!(
                "def release(version):\n    \"\"\"Release a version.\"\"\"\n    return version + {n}\n\n\ndef release_notes(version):\n    return release(version)\n"
            )
        };
        let meta = |v: &str| format!("# The version of the next release.\ndef version():\n    return \"{v}\"\n");
        let other = |name: &str| format!("def {name}():\n    return None\n");
        repo_with_files(
            &repo,
            &[
                ("src/release.py", &release(0)),
                ("src/meta.py", &meta("1.0")),
                ("src/parse.py", &other("parse")),
                ("src/render.py", &other("render")),
                ("src/serve.py", &other("serve")),
            ],
        );
        commit(&repo, &[("src/release.py", &release(1))], "fix the notes of a release");
        commit(&repo, &[("src/meta.py", &meta("1.1"))], "bump version for release 1.1");
        commit(&repo, &[("src/release.py", &release(2))], "speed up the notes");
        let base = commit(&repo, &[("src/meta.py", &meta("1.2"))], "bump version for release 1.2");
        let hot = hot_at(tmp.path(), &repo, &base, "bump version for release");
        // release.py repeats the task's words more; the past commits worded like the task
        // changed meta.py.
        assert_eq!(position(&hot, "src/meta.py"), Some(0), "{}", hot.text);
        assert_eq!(position(&hot, "src/release.py"), Some(1), "{}", hot.text);
        assert!(
            hot.text.contains("changed by the past commit \"bump version for release 1."),
            "{}",
            hot.text
        );
    }

    #[test]
    fn past_commits_sharing_only_a_common_word_with_the_task_lend_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        repo_with_files(dir, &[("src/busy.py", "0"), ("src/parser.py", "0")]);
        for n in 1..=6 {
            commit(dir, &[("src/busy.py", &n.to_string())], &format!("fix typo {n}"));
        }
        let at = commit(dir, &[("src/parser.py", "1")], "fix parser crash on empty input");
        let repo = git2::Repository::open(dir).unwrap();
        let history = index::history::History::at(&repo, git2::Oid::from_str(&at).unwrap(), 100);
        let base = AtBase {
            files: std::collections::HashMap::new(),
            history: [("local/demo".to_string(), history)].into_iter().collect(),
        };
        let shown =
            |path: &str| Shown::by_path("local/demo".into(), path.into(), Reason::Matched, 1.0);
        let files = with_like_commits(
            &base,
            "fix parser crash on unicode input",
            vec![shown("src/busy.py"), shown("src/parser.py")],
            &super::super::policy::resolve(&BTreeMap::new(), "strategize"),
        );
        let rank = |path: &str| files.iter().find(|x| x.file.path == path).unwrap().rank;
        // Six commits share only `fix` with the task: under LIKE_MIN_SHARE each.
        assert_eq!(rank("src/busy.py"), 1.0);
        assert!(rank("src/parser.py") > 1.0);
        assert_eq!(files[0].file.path, "src/parser.py");
        assert_eq!(
            files[0].like.as_deref(),
            Some("fix parser crash on empty input")
        );
    }

    #[test]
    fn a_file_past_commits_saying_most_of_the_task_changed_is_shown_though_no_word_found_it() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        let version = |n: u32| format!("from ._build import stamp\n__version__ = stamp({n})\n");
        let history = |lines: &str| format!("# History\n\n{lines}");
        repo_with_files(
            &repo,
            &[
                ("src/pkg/version.py", &version(100)),
                ("src/pkg/api.py", "def get(url):\n    return url\n"),
                ("HISTORY.md", &history("")),
            ],
        );
        let files = |n: u32, notes: &str| {
            [("src/pkg/version.py", version(n)), ("HISTORY.md", history(notes))]
        };
        let [a, b] = files(101, "- v2.34.0: faster get\n");
        commit(&repo, &[(a.0, &a.1), (b.0, &b.1)], "v2.34.0");
        let api = "def get(url):\n    return url.strip()\n";
        commit(&repo, &[("src/pkg/api.py", api)], "strip urls");
        let [a, b] = files(102, "- v2.34.1: strip urls\n- v2.34.0: faster get\n");
        let base = commit(&repo, &[(a.0, &a.1), (b.0, &b.1)], "v2.34.1");
        let hot = hot_at(tmp.path(), &repo, &base, "v2.34.2");
        // Only the changelog holds the task's words; the past releases changed version.py.
        let entry = "- local/demo:src/pkg/version.py (changed by the past commit \"v2.34.";
        assert!(hot.text.contains(entry), "{}", hot.text);
        assert_eq!(position(&hot, "src/pkg/version.py"), Some(0), "{}", hot.text);
    }

    #[test]
    fn a_file_only_commits_saying_under_half_of_the_task_changed_is_not_added() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let names = ["src/lexer.py", "src/parser.py", "src/cli.py"];
        repo_with_files(dir, &names.map(|n| (n, "0")));
        commit(dir, &[("src/lexer.py", "1")], "parser crash on tabs");
        commit(dir, &[("src/cli.py", "1")], "add a verbose flag");
        let at = commit(dir, &[("src/cli.py", "2")], "add a quiet flag");
        let repo = git2::Repository::open(dir).unwrap();
        let history = index::history::History::at(&repo, git2::Oid::from_str(&at).unwrap(), 100);
        let task = "parser crash on unicode escapes";
        let lexer = history.like(&View::terms(task), LIKE_COMMITS);
        // The past fix (in the lexer) says some of the task: enough to lend a shown file,
        // not to add one.
        assert_eq!(lexer.len(), 1);
        let share = lexer[0].share;
        assert!((LIKE_MIN_SHARE..LIKE_ADD_SHARE).contains(&share), "{share}");
        let base = AtBase {
            files: [("local/demo".to_string(), names.map(String::from).into())]
                .into_iter()
                .collect(),
            history: [("local/demo".to_string(), history)].into_iter().collect(),
        };
        let parser = "src/parser.py".to_string();
        let parser = Shown::by_path("local/demo".into(), parser, Reason::Matched, 1.0);
        let resolved = super::super::policy::resolve(&BTreeMap::new(), "strategize");
        let files = with_like_commits(&base, task, vec![parser], &resolved);
        let paths: Vec<&str> = files.iter().map(|x| x.file.path.as_str()).collect();
        assert_eq!(paths, ["src/parser.py"]);
    }

    #[test]
    fn a_file_changed_in_most_of_a_top_files_commits_is_lent_more_than_their_strength() {
        let related = |shared: u32, of: u32, changes: u32| index::history::Related {
            path: "tests/regression.rs".into(),
            shared,
            of,
            strength: shared as f32 / ((of * changes) as f32).sqrt(),
        };
        // Always together, and only together: all of it.
        assert!((lent_share(&related(4, 4, 4)) - 1.0).abs() < 1e-6);
        // In all 4 of the top file's commits, and in 36 others: more than the strength says.
        let test = related(4, 4, 40);
        assert!(lent_share(&test) > test.strength + 0.1);
        // In 2 of the top file's 40 commits: about its strength.
        let rare = related(2, 40, 40);
        assert!(lent_share(&rare) < rare.strength + 0.01);
    }
}
