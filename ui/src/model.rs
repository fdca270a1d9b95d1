//! View models: the only data the UI knows about.
//!
//! The engine never reaches this crate; `src/tui_bridge.rs` in the root package maps engine
//! records onto these types. Ids are plain strings (ULIDs in practice) so that this crate has no
//! opinion about how the engine generates them.

use serde::{Deserialize, Serialize};

/// The phase a plan is in (spec: strategize, execute, apply, applied).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Deciding what to do; read-only tools only.
    Strategize,
    /// Working inside the sandbox.
    Execute,
    /// Merging the sandbox into the real resource.
    Apply,
    /// Terminal: the changes are in the real resource.
    Applied,
}

impl Phase {
    /// The lower-case name shown in the plans list.
    pub fn label(self) -> &'static str {
        match self {
            Self::Strategize => "strategize",
            Self::Execute => "execute",
            Self::Apply => "apply",
            Self::Applied => "applied",
        }
    }
}

/// The processing state of a plan within its phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessingState {
    /// Waiting for a worker.
    Queued,
    /// A worker is driving the plan.
    Processing,
    /// The phase failed and needs attention.
    Errored,
    /// The phase finished.
    Complete,
    /// The plan was cancelled.
    Cancelled,
}

impl ProcessingState {
    /// The lower-case name shown in the plans list.
    pub fn label(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Processing => "processing",
            Self::Errored => "errored",
            Self::Complete => "complete",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One row of the plans list.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanRow {
    /// The plan's id.
    pub plan_id: String,
    /// The name of the action the plan was made from.
    pub action: String,
    /// The name of the project the plan works on.
    pub project: String,
    /// The current phase.
    pub phase: Phase,
    /// The processing state within the phase.
    pub state: ProcessingState,
    /// Wall-clock time spent so far, in milliseconds.
    pub elapsed_ms: u64,
    /// Money spent on model calls so far, when known.
    pub cost_usd: Option<f64>,
    /// The user rejected the plan's phase gate and nothing else waits: the plan rests at its
    /// phase (`complete`, or `queued` before Strategize) until the phase is run after all or the
    /// plan is cancelled; `agents plan status` says "its gate was rejected".
    #[serde(default)]
    pub gate_rejected: bool,
}

/// A recorded decision, with the decisions and child plans that follow from it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionNode {
    /// The decision's id.
    pub decision_id: String,
    /// The kind of decision (for example `approach`, `tool_choice`).
    pub decision_type: String,
    /// One line saying what was decided about.
    pub summary: String,
    /// The option that was chosen.
    pub chosen: String,
    /// The actor's confidence in the choice, from 0.0 to 1.0, when it gave one.
    pub confidence: Option<f32>,
    /// Whether a correction replaced this decision.
    pub superseded: bool,
    /// Decisions taken downstream of this one.
    pub children: Vec<DecisionNode>,
    /// The child plan this decision spawned, if any.
    pub child_plan_id: Option<String>,
}

/// The changes a plan made in its sandbox.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiffView {
    /// The changed files, in display order.
    pub files: Vec<DiffFile>,
    /// For an applied plan: what the diff is, for the pane's title
    /// (`applied in 451487da7410`). The files are then what Apply wrote.
    #[serde(default)]
    pub applied: Option<String>,
}

impl DiffView {
    /// Total lines added across all files.
    pub fn added(&self) -> usize {
        self.files.iter().map(|f| f.added).sum()
    }

    /// Total lines removed across all files.
    pub fn removed(&self) -> usize {
        self.files.iter().map(|f| f.removed).sum()
    }

    /// Total number of hunks across all files.
    pub fn hunk_count(&self) -> usize {
        self.files.iter().map(|f| f.hunks.len()).sum()
    }

    /// How many review items are pending, accepted and rejected; `None` when the diff has no
    /// review (an applied plan's diff).
    pub fn review_counts(&self) -> Option<ReviewCounts> {
        let mut counts = ReviewCounts::default();
        let mut any = false;
        for item in self.files.iter().flat_map(DiffFile::review_items) {
            any = true;
            match item.mark {
                ReviewMark::Pending => counts.pending += 1,
                ReviewMark::Reviewed => counts.reviewed += 1,
                ReviewMark::Accepted => counts.accepted += 1,
                ReviewMark::Rejected => counts.rejected += 1,
            }
        }
        any.then_some(counts)
    }

    /// Whether the files, paths and lines are the same (reviews and attributions aside), so
    /// that highlights computed for one hold for the other.
    pub fn same_text(&self, other: &DiffView) -> bool {
        self.files.len() == other.files.len()
            && self.files.iter().zip(&other.files).all(|(a, b)| {
                a.path == b.path
                    && a.hunks.len() == b.hunks.len()
                    && a.hunks
                        .iter()
                        .zip(&b.hunks)
                        .all(|(x, y)| x.lines == y.lines)
            })
    }
}

/// How a hunk, or a file without hunks, is reviewed before Apply (`docs/review.md`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReviewMark {
    /// Not reviewed yet.
    #[default]
    Pending,
    /// Seen, no verdict yet.
    Reviewed,
    /// Apply writes it.
    Accepted,
    /// Apply leaves it in the sandbox.
    Rejected,
}

impl ReviewMark {
    /// The one-cell sign the diff pane shows (`·`, `○`, `✓`, `✗`).
    pub fn glyph(self) -> &'static str {
        match self {
            Self::Pending => "·",
            Self::Reviewed => "○",
            Self::Accepted => "✓",
            Self::Rejected => "✗",
        }
    }

    /// The word (`pending`, `reviewed`, `accepted`, `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Reviewed => "reviewed",
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
        }
    }
}

/// One reviewable item: its id in the engine, its verdict from every reviewer's mark, the
/// reason given with it, and each reviewer's mark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewItem {
    /// The item's id (12 hex digits, as `agents plan review` lists it).
    pub id: String,
    /// Its verdict (a rejection by anyone wins, then an acceptance; `docs/review.md`).
    pub mark: ReviewMark,
    /// The reason given with the verdict.
    #[serde(default)]
    pub reason: Option<String>,
    /// Every reviewer's mark, in reviewer order.
    #[serde(default)]
    pub marks: Vec<ReviewerMark>,
}

impl ReviewItem {
    /// Whether the pane names the reviewers: when a server's user marked it or several
    /// reviewers did (the local user alone, who has no name, is not named).
    pub fn names_reviewers(&self) -> bool {
        self.marks.len() > 1 || self.marks.iter().any(|m| m.reviewer.is_some())
    }
}

/// One reviewer's mark of an item.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReviewerMark {
    /// The server user who set it; `None` for the local user.
    #[serde(default)]
    pub reviewer: Option<String>,
    /// The mark.
    pub mark: ReviewMark,
    /// The reason given with it.
    #[serde(default)]
    pub reason: Option<String>,
}

impl ReviewerMark {
    /// Who set it as the pane names them (`you` for the local user).
    pub fn who(&self) -> &str {
        self.reviewer.as_deref().unwrap_or("you")
    }
}

/// Items of a review by mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReviewCounts {
    /// Not reviewed yet.
    pub pending: usize,
    /// Seen, no verdict yet.
    pub reviewed: usize,
    /// Accepted.
    pub accepted: usize,
    /// Rejected.
    pub rejected: usize,
}

impl ReviewCounts {
    /// Whether anything is marked (then Apply writes only the accepted items).
    pub fn any_marked(self) -> bool {
        self.accepted + self.rejected > 0
    }

    /// Every item.
    pub fn total(self) -> usize {
        self.pending + self.reviewed + self.accepted + self.rejected
    }
}

/// One changed file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffFile {
    /// Path relative to the resource root.
    pub path: String,
    /// Lines added in this file.
    pub added: usize,
    /// Lines removed in this file.
    pub removed: usize,
    /// The hunks, in file order.
    pub hunks: Vec<DiffHunk>,
    /// How it changed: `A`, `M`, `D`, `R` or `T` (empty when unknown).
    #[serde(default)]
    pub status: String,
    /// The review of the whole file when it has no hunks (binary, mode change, pure rename).
    #[serde(default)]
    pub review: Option<ReviewItem>,
}

impl DiffFile {
    /// Its review items: the whole file's, or its hunks' (none without a review).
    pub fn review_items(&self) -> impl Iterator<Item = &ReviewItem> {
        self.review
            .iter()
            .chain(self.hunks.iter().filter_map(|h| h.review.as_ref()))
    }

    /// [`DiffFile::review_items`], to change.
    pub fn review_items_mut(&mut self) -> impl Iterator<Item = &mut ReviewItem> {
        self.review
            .iter_mut()
            .chain(self.hunks.iter_mut().filter_map(|h| h.review.as_mut()))
    }

    /// The file's mark when every item has the same one; `None` for a mix or no review.
    pub fn mark(&self) -> Option<ReviewMark> {
        let mut items = self.review_items();
        let first = items.next()?.mark;
        items.all(|i| i.mark == first).then_some(first)
    }
}

/// One contiguous change inside a file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffHunk {
    /// First line of the hunk in the old file (1-based).
    pub old_start: u32,
    /// Number of old lines the hunk covers.
    pub old_lines: u32,
    /// First line of the hunk in the new file (1-based).
    pub new_start: u32,
    /// Number of new lines the hunk covers.
    pub new_lines: u32,
    /// The lines of the hunk, context included.
    pub lines: Vec<DiffLine>,
    /// The decisions that produced this hunk.
    pub decision_ids: Vec<String>,
    /// Its review, while the plan's changes can still be reviewed.
    #[serde(default)]
    pub review: Option<ReviewItem>,
}

impl DiffHunk {
    /// The unified-diff header, `@@ -a,b +c,d @@`.
    pub fn header(&self) -> String {
        format!(
            "@@ -{},{} +{},{} @@",
            self.old_start, self.old_lines, self.new_start, self.new_lines
        )
    }
}

/// One line of a hunk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiffLine {
    /// Whether the line was added, removed or is context.
    pub kind: DiffLineKind,
    /// The line's text without the leading marker or trailing newline.
    pub text: String,
}

/// What a diff line is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiffLineKind {
    /// Unchanged line shown for context.
    Context,
    /// Line present only in the new file.
    Added,
    /// Line present only in the old file.
    Removed,
}

impl DiffLineKind {
    /// The unified-diff marker for this kind of line.
    pub fn marker(self) -> char {
        match self {
            Self::Context => ' ',
            Self::Added => '+',
            Self::Removed => '-',
        }
    }
}

/// Something waiting for a human.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalItem {
    /// The approval's id.
    pub approval_id: String,
    /// The plan it belongs to.
    pub plan_id: String,
    /// What kind of question this is.
    pub kind: ApprovalKind,
    /// One line of context for the human.
    pub summary: String,
    /// The options to choose from (empty when the answer is a plain yes or no).
    pub options: Vec<String>,
}

/// The kinds of questions the engine asks a human.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalKind {
    /// Moving the plan to its next phase.
    PhaseGate,
    /// Picking an option for a decision.
    DecisionChoice,
    /// Letting the plan spawn a child plan.
    ChildSpawn,
    /// Retrying after a transient failure.
    TransientFailure,
    /// Deciding what to do with a plan that errored.
    ErroredPlan,
    /// Raising a plan's budget, or cancelling, before a model call that would pass it.
    Budget,
}

impl ApprovalKind {
    /// A short human label.
    pub fn label(self) -> &'static str {
        match self {
            Self::PhaseGate => "phase gate",
            Self::DecisionChoice => "decision",
            Self::ChildSpawn => "child spawn",
            Self::TransientFailure => "transient failure",
            Self::ErroredPlan => "errored plan",
            Self::Budget => "budget",
        }
    }
}

/// A decision named in an impact list: what it is and what it chose.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRef {
    /// The decision's id.
    pub decision_id: String,
    /// Its type (`implementation_choice`, ...).
    pub decision_type: String,
    /// What it chose.
    pub chosen: String,
}

/// Something a plan driven by this TUI is doing right now, for the live area (never stored).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum LiveUpdate {
    /// A model call started.
    Turn {
        /// The actor (`openai/gpt-4o`).
        actor: String,
        /// 1-based turn of its run.
        turn: u32,
    },
    /// A piece of the model's streamed reply.
    Text {
        /// The text as streamed (may end mid-word or mid-line).
        text: String,
    },
    /// The model call failed transiently and is retried.
    Retrying {
        /// The attempt that failed.
        attempt: u32,
        /// What failed.
        reason: String,
    },
    /// A tool call started.
    ToolStarted {
        /// The tool.
        name: String,
        /// Its arguments as the model sent them (JSON text).
        arguments: String,
    },
    /// A tool call finished.
    ToolFinished {
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// How long it took, in milliseconds.
        duration_ms: u64,
    },
    /// A running tool reported progress; it replaces the tool's previous progress line.
    ToolProgress {
        /// The tool.
        name: String,
        /// The progress so far.
        progress: f64,
        /// The total, when known.
        total: Option<f64>,
        /// What the tool says it is doing.
        message: Option<String>,
    },
    /// Where the plan is in its lifecycle (a phase or step started or ended, an approval).
    Progress {
        /// What happened, one line.
        text: String,
    },
    /// A line a step printed.
    Output {
        /// The step's name.
        step: String,
        /// The line.
        line: String,
    },
}

/// Why a decision was taken and what depends on it (`agents plan explain`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    /// The decision explained.
    pub decision_id: String,
    /// The plan it belongs to.
    pub plan_id: String,
    /// Its type.
    pub decision_type: String,
    /// The question it answered, when recorded.
    pub question: Option<String>,
    /// The option chosen.
    pub chosen: String,
    /// The other options that were considered.
    pub alternatives: Vec<String>,
    /// Why, in the actor's words, when recorded.
    pub rationale: Option<String>,
    /// Confidence from 0.0 to 1.0, when given.
    pub confidence: Option<f32>,
    /// The decision that replaced it, when a correction superseded it.
    pub superseded_by: Option<String>,
    /// Every decision downstream of it (through recorded dependencies), nearest first.
    pub impact: Vec<DecisionRef>,
    /// Child plans spawned downstream of it.
    pub impact_child_plans: Vec<String>,
    /// Steps a correction would run again.
    pub impact_steps: usize,
    /// Files those steps changed.
    pub impact_files: Vec<String>,
    /// How far a correction reaches: `low`, `medium` or `high` (as `plan explain` says).
    pub impact_level: String,
}

/// How a correction treats the corrected decision (spec 27, correction modes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorrectionMode {
    /// Replace the decision and recompute its downstream subtree.
    Revert,
    /// Keep the decision and add the guidance on top of it.
    Append,
}

impl CorrectionMode {
    /// The name `agents plan correct --mode` takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revert => "revert",
            Self::Append => "append",
        }
    }

    /// The other mode.
    #[must_use]
    pub fn toggled(self) -> Self {
        match self {
            Self::Revert => Self::Append,
            Self::Append => Self::Revert,
        }
    }
}

/// What a correction would recompute, from `agents plan correct --dry-run --format json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CorrectionPreview {
    /// Decisions that would be recomputed.
    pub decisions: Vec<DecisionRef>,
    /// Steps that would run again (decision ids).
    pub steps_rerun: Vec<String>,
    /// Steps whose recorded results would be replayed.
    pub steps_replayed: Vec<String>,
    /// Steps that may run again depending on the new choices.
    pub steps_may_rerun: Vec<String>,
    /// Child plans that would be recomputed.
    pub child_plans: Vec<String>,
    /// Files whose changes would be redone.
    pub files: Vec<String>,
    /// How many model calls the correction is expected to make.
    pub estimated_model_calls: Option<u64>,
    /// Why the correction would be refused (the dry run's `refused`): then the overlay offers
    /// editing or the other mode, never a confirm.
    #[serde(default)]
    pub refused: Option<String>,
}

/// One checkpoint a plan can be rolled back to (`agents plan checkpoints`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointItem {
    /// `cp_...`.
    pub checkpoint_id: String,
    /// 1, 2, ... within the plan.
    pub seq: u32,
    /// A short label (`start`, `end`).
    pub label: String,
    /// The step it belongs to, when recorded.
    pub step: Option<String>,
    /// Files that differ from the previous checkpoint.
    pub files_changed: u64,
    /// When it was taken, as displayed (`2026-12-01 07:40:12`).
    pub taken: String,
}

/// What the "use an action" form offers (`agents action list`, `agents project list`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UseChoices {
    /// Names of the actions that can be used.
    pub actions: Vec<String>,
    /// Names of the projects.
    pub projects: Vec<String>,
    /// The arguments each action declares, by action name (absent: none).
    #[serde(default)]
    pub arguments: std::collections::BTreeMap<String, Vec<ArgumentField>>,
    /// The registered automation profiles (`agents profile list`), built-in ones first.
    #[serde(default)]
    pub profiles: Vec<String>,
    /// The profile a plan gets when none is chosen, when the configuration names one
    /// (`automation-profile`); an action's or project's own profile still comes first.
    #[serde(default)]
    pub configured_profile: Option<String>,
}

/// One argument an action declares, as the "use an action" form asks for it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArgumentField {
    /// The name (`--arg NAME=...`).
    pub name: String,
    /// Whether the plan cannot be created without it.
    pub required: bool,
    /// The value used when none is given, as text.
    pub default: Option<String>,
    /// What it means.
    pub description: Option<String>,
}

/// The first eight characters of an id, as shown in narrow columns.
pub fn short_id(id: &str) -> &str {
    match id.char_indices().nth(8) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// The shortest prefix length, at least `min` (12 for ULIDs: the millisecond and two random
/// characters), at which every distinct id of `ids` differs from the others, so a prefix shown
/// can be typed back into a command. Ids made in the same second share their first eight
/// characters, which is why [`short_id`] alone is not enough where the user copies an id.
pub fn unique_prefix_len<'a>(ids: impl IntoIterator<Item = &'a str>, min: usize) -> usize {
    let mut ids: Vec<&str> = ids.into_iter().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut len = min;
    for pair in ids.windows(2) {
        let common = pair[0]
            .chars()
            .zip(pair[1].chars())
            .take_while(|(a, b)| a == b)
            .count();
        len = len.max(common + 1);
    }
    len
}

/// The shortest prefix of each of `ids` (at least eight characters, at most the whole id)
/// that no other id of `ids` shares, compared without case, in input order: what `plan list`
/// prints, so that a plan shown can be typed back into a command. Duplicates get their whole
/// text.
pub fn unique_prefixes(ids: &[&str]) -> Vec<String> {
    let folded: Vec<String> = ids.iter().map(|i| i.to_ascii_lowercase()).collect();
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| folded[a].cmp(&folded[b]));
    let common = |a: &str, b: &str| {
        a.chars()
            .zip(b.chars())
            .take_while(|(x, y)| x.eq_ignore_ascii_case(y))
            .count()
    };
    let mut out = vec![String::new(); ids.len()];
    for (at, &i) in order.iter().enumerate() {
        let id = ids[i];
        let before = at.checked_sub(1).map_or(0, |p| common(ids[order[p]], id));
        let after = order.get(at + 1).map_or(0, |&n| common(id, ids[n]));
        let len = (before.max(after) + 1).max(8).min(id.chars().count());
        out[i] = id.chars().take(len).collect();
    }
    out
}

/// The first `len` characters of `id` (all of it when shorter).
pub fn prefix(id: &str, len: usize) -> &str {
    match id.char_indices().nth(len) {
        Some((end, _)) => &id[..end],
        None => id,
    }
}

/// Formats a duration in milliseconds as `HH:MM:SS` (hours keep growing past 99).
pub fn format_elapsed(elapsed_ms: u64) -> String {
    let secs = elapsed_ms / 1000;
    format!(
        "{:02}:{:02}:{:02}",
        secs / 3600,
        (secs / 60) % 60,
        secs % 60
    )
}

/// Formats a cost as `$0.12`, or `-` when unknown.
pub fn format_cost(cost_usd: Option<f64>) -> String {
    match cost_usd {
        Some(cost) if cost.is_finite() => format!("${cost:.2}"),
        _ => "-".to_owned(),
    }
}

/// One of the four panes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Pane {
    /// The plans list.
    Plans,
    /// The decision tree of the selected plan.
    Tree,
    /// The sandbox diff of the selected plan.
    Diff,
    /// Everything waiting for a human.
    Approvals,
}

impl Pane {
    /// All panes in focus order (also the order of the `1`-`4` keys).
    pub const ALL: [Pane; 4] = [Pane::Plans, Pane::Tree, Pane::Diff, Pane::Approvals];

    /// The pane after this one, wrapping around.
    pub fn next(self) -> Self {
        Self::ALL[(self.index() + 1) % Self::ALL.len()]
    }

    /// The pane before this one, wrapping around.
    pub fn prev(self) -> Self {
        Self::ALL[(self.index() + Self::ALL.len() - 1) % Self::ALL.len()]
    }

    /// The pane's title.
    pub fn title(self) -> &'static str {
        match self {
            Self::Plans => "Plans",
            Self::Tree => "Decisions",
            Self::Diff => "Diff",
            Self::Approvals => "Approvals",
        }
    }

    /// The digit that focuses the pane.
    pub fn number(self) -> usize {
        self.index() + 1
    }

    fn index(self) -> usize {
        match self {
            Self::Plans => 0,
            Self::Tree => 1,
            Self::Diff => 2,
            Self::Approvals => 3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_prefixes_grow_past_ids_made_in_the_same_millisecond() {
        let ids = ["01M8RFCP8XQVAAAA", "01M8RFCP8XQVBBBB", "01M8RFE0DKJPDJHS"];
        let len = unique_prefix_len(ids.iter().copied(), 12);
        assert_eq!(len, 13);
        assert_eq!(prefix(ids[0], len), "01M8RFCP8XQVA");
        assert_eq!(unique_prefix_len(["01M8RFCP8XQVAAAA"], 12), 12);
        assert_eq!(prefix("abc", 12), "abc");
    }

    #[test]
    fn short_id_takes_eight_chars_and_tolerates_short_ids() {
        assert_eq!(short_id("01JABCDEFGHJKMNPQRSTVWXYZ0"), "01JABCDE");
        assert_eq!(short_id("abc"), "abc");
        assert_eq!(short_id("12345678"), "12345678");
        assert_eq!(short_id("ééééééééé"), "éééééééé");
    }

    #[test]
    fn elapsed_is_hours_minutes_seconds() {
        assert_eq!(format_elapsed(0), "00:00:00");
        assert_eq!(format_elapsed(999), "00:00:00");
        assert_eq!(format_elapsed(61_000), "00:01:01");
        assert_eq!(format_elapsed(3_723_000), "01:02:03");
        assert_eq!(format_elapsed(360_000_000), "100:00:00");
    }

    #[test]
    fn cost_has_two_decimals_or_a_dash() {
        assert_eq!(format_cost(Some(0.1234)), "$0.12");
        assert_eq!(format_cost(Some(12.0)), "$12.00");
        assert_eq!(format_cost(None), "-");
        assert_eq!(format_cost(Some(f64::NAN)), "-");
    }

    #[test]
    fn view_models_round_trip_through_serde() {
        let item = ApprovalItem {
            approval_id: "a1".into(),
            plan_id: "p1".into(),
            kind: ApprovalKind::TransientFailure,
            summary: "retry?".into(),
            options: vec!["retry".into()],
        };
        let text = toml::to_string(&item).expect("serializes");
        assert!(text.contains("kind = \"transient_failure\""), "{text}");
        let back: ApprovalItem = toml::from_str(&text).expect("deserializes");
        assert_eq!(back, item);
    }

    #[test]
    fn diff_totals_add_up() {
        let hunk = DiffHunk {
            old_start: 1,
            old_lines: 2,
            new_start: 1,
            new_lines: 3,
            lines: vec![],
            decision_ids: vec![],
            review: None,
        };
        let diff = DiffView {
            applied: None,
            files: vec![
                DiffFile {
                    path: "a".into(),
                    added: 3,
                    removed: 1,
                    hunks: vec![hunk.clone()],
                    status: "M".into(),
                    review: None,
                },
                DiffFile {
                    path: "b".into(),
                    added: 2,
                    removed: 5,
                    hunks: vec![hunk.clone(), hunk],
                    status: "M".into(),
                    review: None,
                },
            ],
        };
        assert_eq!((diff.added(), diff.removed(), diff.hunk_count()), (5, 6, 3));
        assert_eq!(diff.files[0].hunks[0].header(), "@@ -1,2 +1,3 @@");
    }
}
