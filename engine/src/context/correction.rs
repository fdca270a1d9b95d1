//! What a correction's strategist is shown of the attempt it corrects (spec section 27,
//! "Revert flow"; section 25): the corrected decisions' steps (instructions and expected
//! outputs), why the work was rejected (the hunks rejected in review and their reasons; the
//! user's guidance is stated once, by the prompt that holds this) and what the original
//! attempt changed (its diff, the hunks the corrected decisions produced), within a budget.

use super::Budget;
use crate::sandbox::diff::{FileDiff, Hunk, unified};

/// One decision being re-decided, as the original attempt had it.
#[derive(Debug, Clone, PartialEq)]
pub struct Corrected {
    /// The strategist's key (`d5`).
    pub key: String,
    /// The question and the chosen option, in a line.
    pub choice: String,
    /// Its step's instructions, when it is executable.
    pub instructions: Option<String>,
    /// Its step's expected outputs.
    pub expected_outputs: Vec<String>,
    /// Its step's optional outputs.
    pub optional_outputs: Vec<String>,
    /// The step's recorded outcome (answer, command output), if it ran.
    pub outcome: String,
}

/// A hunk (or whole file) the user rejected in review.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    /// The resource.
    pub resource: String,
    /// The path.
    pub path: String,
    /// The hunk, `None` for a whole file.
    pub hunk: Option<Hunk>,
    /// The reason given with the mark.
    pub reason: Option<String>,
}

/// The original attempt of the decisions a correction re-decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Original {
    /// The decisions re-decided, the corrected one first.
    pub decisions: Vec<Corrected>,
    /// Hunks rejected in review that these decisions produced.
    pub rejected: Vec<Rejected>,
    /// What the original attempt of these decisions changed, per resource.
    pub diff: Vec<(String, Vec<FileDiff>)>,
}

/// Adds the original attempt: the decisions' steps, the rejection, then the diff (each file
/// while it fits; one that does not is named and left out).
pub fn push(b: &mut Budget, original: &Original) {
    push_steps(b, &original.decisions);
    push_rejection(b, original);
    push_diff(b, &original.diff);
}

fn push_steps(b: &mut Budget, decisions: &[Corrected]) {
    b.push("## The original attempt of the decisions to re-decide", None);
    for d in decisions {
        let mut block = format!("- {}: {}", d.key, d.choice);
        if let Some(i) = &d.instructions {
            block.push_str(&format!("\n  step instructions: {i}"));
        }
        if !d.expected_outputs.is_empty() {
            block.push_str(&format!(
                "\n  expected outputs: {}",
                d.expected_outputs.join(", ")
            ));
        }
        if !d.optional_outputs.is_empty() {
            block.push_str(&format!(
                "\n  optional outputs: {}",
                d.optional_outputs.join(", ")
            ));
        }
        if !d.outcome.trim().is_empty() {
            block.push_str(&format!(
                "\n  recorded output: {}",
                d.outcome.trim().replace('\n', "\n  ")
            ));
        }
        b.push_lines(&block, Some(format!("decision:{}", d.key)));
    }
}

/// The hunks rejected in review, under a heading that points at the guidance (given once,
/// before this section); nothing when review rejected none.
fn push_rejection(b: &mut Budget, original: &Original) {
    if original.rejected.is_empty() {
        return;
    }
    b.push("## Why it is corrected (besides the guidance above)", None);
    for r in &original.rejected {
        let (range, text) = match &r.hunk {
            Some(h) => (
                format!(
                    " @@ -{},{} +{},{} @@",
                    h.old_start, h.old_lines, h.new_start, h.new_lines
                ),
                hunk_text(h),
            ),
            None => (" (whole file)".to_string(), String::new()),
        };
        let reason = r.reason.as_deref().unwrap_or("no reason given");
        let head = format!(
            "Rejected in review: {}:{}{range} — reason: {reason}",
            r.resource, r.path
        );
        if !b.push(&format!("{head}\n{text}"), None) {
            b.push(&head, None);
        }
    }
}

fn hunk_text(h: &Hunk) -> String {
    unified(&[FileDiff {
        hunks: vec![h.clone()],
        ..FileDiff::default()
    }])
    .lines()
    .skip_while(|l| !l.starts_with("@@"))
    .skip(1)
    .collect::<Vec<_>>()
    .join("\n")
}

fn push_diff(b: &mut Budget, diff: &[(String, Vec<FileDiff>)]) {
    if diff.iter().all(|(_, f)| f.is_empty()) {
        b.push(
            "## What the original attempt changed\n(nothing in the sandbox)",
            None,
        );
        return;
    }
    b.push("## What the original attempt changed", None);
    for (resource, files) in diff {
        for f in files {
            let reference = format!("diff:{resource}:{}", f.path);
            let text = unified(std::slice::from_ref(f));
            if !b.push(&text, Some(reference.clone())) {
                b.left_out(reference, "hot", 0.0, b.cost(&text));
                b.push(
                    &format!(
                        "(the diff of {resource}:{} is too long for the context budget; read_file it)",
                        f.path
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

    fn original() -> Original {
        let hunk = text_hunks("", "five\n").remove(0);
        Original {
            decisions: vec![Corrected {
                key: "d5".into(),
                choice: "What goes into e.txt? -> write e.txt".into(),
                instructions: Some("Write e.txt".into()),
                expected_outputs: vec!["e.txt".into()],
                optional_outputs: vec![],
                outcome: "done".into(),
            }],
            rejected: vec![Rejected {
                resource: "local/repo".into(),
                path: "e.txt".into(),
                hunk: Some(hunk.clone()),
                reason: Some("lower case".into()),
            }],
            diff: vec![(
                "local/repo".into(),
                vec![FileDiff {
                    path: "e.txt".into(),
                    status: FileStatus::Added,
                    additions: 1,
                    hunks: vec![hunk],
                    ..FileDiff::default()
                }],
            )],
        }
    }

    #[test]
    fn the_original_attempt_is_shown_steps_rejection_then_diff() {
        let mut b = Budget::new(4000);
        push(&mut b, &original());
        let text = b.finish().text;
        for needle in [
            "- d5: What goes into e.txt? -> write e.txt",
            "step instructions: Write e.txt",
            "expected outputs: e.txt",
            "Rejected in review: local/repo:e.txt @@ -0,0 +1,1 @@ — reason: lower case",
            "+five",
            "## What the original attempt changed",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
    }

    #[test]
    fn a_small_budget_is_kept_and_the_diff_left_out() {
        let mut b = Budget::new(60);
        push(&mut b, &original());
        let hot = b.finish();
        assert!(hot.tokens <= 60, "{hot:?}");
        assert!(!hot.text.contains("diff --git"), "{}", hot.text);
    }
}
