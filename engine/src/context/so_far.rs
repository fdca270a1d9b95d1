//! What the plan did before a step (spec section 11, "steps build on each other"; section 25,
//! hot context): the earlier steps' recorded outputs and the sandbox's changes against the
//! plan's base, put in the step's prompt within the execute view's budget, and the sandbox
//! work trees the step's named files are read from as they are now.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::Budget;
use crate::sandbox::diff::{FileDiff, unified};

/// Share of the hot budget the diff of earlier steps may take (a quarter).
pub const DIFF_SHARE: u64 = 4;
/// Longest recorded output of one earlier step shown, in characters.
pub const OUTPUT_CHARS: usize = 600;
/// Longest instructions of one earlier step shown, in characters.
pub const INSTRUCTIONS_CHARS: usize = 200;

/// One earlier step of the plan, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct EarlierStep {
    /// Its position in the plan, from 1.
    pub position: u32,
    /// The strategist's key of its decision (`d1`), or empty.
    pub key: String,
    /// Its instructions.
    pub instructions: String,
    /// What it recorded as its outcome (a model's answer, a command's output).
    pub outcome: String,
}

/// The changes of one sandbox against the plan's base.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    /// The resource the sandbox holds.
    pub resource: String,
    /// Its work tree, where files are read as they are now.
    pub work_dir: PathBuf,
    /// The changed files, with hunks.
    pub files: Vec<FileDiff>,
    /// Keeps the work tree readable while these changes are (a sandbox that shares its
    /// base's checkout is an overlay mounted while someone holds it).
    pub mounted: crate::sandbox::overlay::MountGuard,
}

/// What the plan did before the step: earlier steps in order, and each sandbox's changes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SoFar {
    /// Earlier steps that finished, in plan order.
    pub steps: Vec<EarlierStep>,
    /// One entry per active sandbox.
    pub changes: Vec<Changes>,
}

impl SoFar {
    /// `path` of `resource` as the sandbox holds it now: `None` when no sandbox holds the
    /// resource (read it at the plan's base then), `Some(None)` when the sandbox has no such
    /// file (or it is not text, or the path leaves the work tree).
    pub fn read(&self, resource: &str, path: &str) -> Option<Option<String>> {
        let c = self.changes.iter().find(|c| c.resource == resource)?;
        Some(inside(&c.work_dir, path).and_then(|p| std::fs::read_to_string(p).ok()))
    }

    /// Whether nothing was done before the step.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.changes.iter().all(|c| c.files.is_empty())
    }
}

/// `path` under `root` when it is relative and stays inside it.
pub fn inside(root: &Path, path: &str) -> Option<PathBuf> {
    let p = Path::new(path);
    let plain = p
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    (plain && !path.is_empty()).then(|| root.join(p))
}

/// A step's recorded outcome in words: a model's answer, a command's output, a replay.
pub fn outcome(output: &Value) -> String {
    if let Some(rerun) = output.get("rerun") {
        return outcome(rerun);
    }
    if output.get("replayed").is_some() {
        return "(replayed its recorded change)".into();
    }
    if let Some(answer) = output["answer"].as_str() {
        return answer.to_string();
    }
    let mut parts = Vec::new();
    for key in ["stdout", "stderr"] {
        if let Some(t) = output[key].as_str().filter(|t| !t.trim().is_empty()) {
            parts.push(format!("{key}: {}", t.trim()));
        }
    }
    parts.join("\n")
}

fn shorten(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_string();
    }
    let head: String = text.chars().take(max).collect();
    format!("{head} …")
}

/// Adds the earlier steps (each its instructions and recorded outcome) and the diff of the
/// changes so far (the file list, then each file's hunks while they fit in a
/// [`DIFF_SHARE`] of the budget; a file whose hunks do not fit is named as such).
pub fn push(b: &mut Budget, so_far: &SoFar) {
    if so_far.is_empty() {
        return;
    }
    push_steps(b, &so_far.steps);
    push_changes(b, &so_far.changes);
}

fn push_steps(b: &mut Budget, steps: &[EarlierStep]) {
    if steps.is_empty() {
        return;
    }
    b.push("## Earlier steps of this plan (done)", None);
    for s in steps {
        let key = if s.key.is_empty() {
            String::new()
        } else {
            format!(" ({})", s.key)
        };
        let mut block = format!(
            "- step {}{key}: {}",
            s.position,
            shorten(&s.instructions, INSTRUCTIONS_CHARS)
        );
        if !s.outcome.trim().is_empty() {
            block.push_str(&format!(
                "\n  recorded output: {}",
                shorten(&s.outcome, OUTPUT_CHARS).replace('\n', "\n  ")
            ));
        }
        b.push(&block, Some(format!("step:{}", s.position)));
    }
}

fn push_changes(b: &mut Budget, changes: &[Changes]) {
    if changes.iter().all(|c| c.files.is_empty()) {
        return;
    }
    b.push(
        "## Changes so far (the sandbox against the plan's base)",
        None,
    );
    for c in changes.iter().filter(|c| !c.files.is_empty()) {
        let list: Vec<String> = c
            .files
            .iter()
            .map(|f| {
                format!(
                    "{} {}:{} (+{} -{})",
                    f.status.letter(),
                    c.resource,
                    f.path,
                    f.additions,
                    f.deletions
                )
            })
            .collect();
        b.push_lines(&list.join("\n"), None);
    }
    let mut share = b.left() / DIFF_SHARE;
    for c in changes {
        for f in &c.files {
            let text = unified(std::slice::from_ref(f));
            let cost = b.cost(&text);
            if cost <= share && b.push(&text, Some(format!("diff:{}:{}", c.resource, f.path))) {
                share -= cost;
            } else {
                b.left_out(format!("diff:{}:{}", c.resource, f.path), "hot", 0.0, cost);
                b.push(
                    &format!(
                        "(the diff of {}:{} is too long for the context budget; read_file it)",
                        c.resource, f.path
                    ),
                    None,
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::diff::{FileStatus, text_hunks};

    fn changed(path: &str, old: &str, new: &str) -> FileDiff {
        FileDiff {
            path: path.into(),
            status: FileStatus::Modified,
            additions: 1,
            deletions: 1,
            hunks: text_hunks(old, new),
            ..FileDiff::default()
        }
    }

    #[test]
    fn earlier_steps_and_their_diff_are_shown_within_budget() {
        let so_far = SoFar {
            steps: vec![EarlierStep {
                position: 1,
                key: "d1".into(),
                instructions: "Write a.txt".into(),
                outcome: "Wrote a.txt".into(),
            }],
            changes: vec![Changes {
                resource: "local/repo".into(),
                work_dir: PathBuf::from("/nonexistent"),
                files: vec![changed("a.txt", "one\n", "ONE\n")],
                mounted: Default::default(),
            }],
        };
        let mut b = Budget::new(2000);
        push(&mut b, &so_far);
        let hot = b.finish();
        for needle in [
            "step 1 (d1): Write a.txt",
            "recorded output: Wrote a.txt",
            "M local/repo:a.txt (+1 -1)",
            "+ONE",
        ] {
            assert!(hot.text.contains(needle), "{needle}: {}", hot.text);
        }
        let mut small = Budget::new(60);
        push(&mut small, &so_far);
        let hot = small.finish();
        assert!(hot.tokens <= 60, "{hot:?}");
        assert!(!hot.text.contains("+ONE"), "{}", hot.text);
    }

    #[test]
    fn a_path_leaving_the_work_tree_is_never_read() {
        assert!(inside(Path::new("/w"), "../etc/passwd").is_none());
        assert!(inside(Path::new("/w"), "/etc/passwd").is_none());
        assert_eq!(
            inside(Path::new("/w"), "src/a.rs"),
            Some(PathBuf::from("/w/src/a.rs"))
        );
    }
}
