//! The sandbox diff of the selected plan: files with +/- counts, hunks, and for each hunk the
//! decisions that produced it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use super::{Pane, pane_block, render_message};
use crate::keymap::Action;
use crate::model::{DiffView, short_id};
use crate::theme::{Slot, Theme};

/// Shown while no plan is selected.
pub const NO_PLAN: &str = "Select a plan to see its changes.";
/// Shown until the selected plan's diff arrives.
pub const LOADING: &str = "Loading diff…";
/// Shown when the sandbox has no changes.
pub const EMPTY: &str = "No changes in this plan's sandbox yet.";

/// One display row of a diff.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiffRow {
    /// The header of file `file`.
    File {
        /// Index into [`DiffView::files`].
        file: usize,
    },
    /// The header of a hunk.
    Hunk {
        /// Index into [`DiffView::files`].
        file: usize,
        /// Index into that file's hunks.
        hunk: usize,
    },
    /// One line of a hunk.
    Line {
        /// Index into [`DiffView::files`].
        file: usize,
        /// Index into that file's hunks.
        hunk: usize,
        /// Index into that hunk's lines.
        line: usize,
    },
}

/// The display rows of a diff, in order.
pub fn rows(diff: &DiffView) -> Vec<DiffRow> {
    let mut rows = Vec::new();
    for (file, f) in diff.files.iter().enumerate() {
        rows.push(DiffRow::File { file });
        for (hunk, h) in f.hunks.iter().enumerate() {
            rows.push(DiffRow::Hunk { file, hunk });
            rows.extend((0..h.lines.len()).map(|line| DiffRow::Line { file, hunk, line }));
        }
    }
    rows
}

/// State of the diff pane: the diff and the first row shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffPane {
    plan_id: Option<String>,
    diff: Option<DiffView>,
    scroll: usize,
}

impl DiffPane {
    /// The plan whose diff is shown (or awaited).
    pub fn plan_id(&self) -> Option<&str> {
        self.plan_id.as_deref()
    }

    /// The diff, once loaded.
    pub fn diff(&self) -> Option<&DiffView> {
        self.diff.as_ref()
    }

    /// The index of the first row shown.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    /// Starts showing another plan (or none).
    pub(crate) fn reset(&mut self, plan_id: Option<String>) {
        *self = Self {
            plan_id,
            ..Self::default()
        };
    }

    /// Takes a diff from the engine; ignored unless it belongs to the shown plan. The scroll
    /// position is kept (clamped) so a live update does not jump.
    pub(crate) fn set_diff(&mut self, plan_id: &str, diff: DiffView) -> bool {
        if self.plan_id.as_deref() != Some(plan_id) {
            return false;
        }
        self.scroll = self.scroll.min(rows(&diff).len().saturating_sub(1));
        self.diff = Some(diff);
        true
    }

    /// Scrolls by line, hunk or file.
    pub(crate) fn handle(&mut self, action: Action) {
        let Some(diff) = &self.diff else { return };
        let rows = rows(diff);
        let last = rows.len().saturating_sub(1);
        let is_hunk = |r: &DiffRow| matches!(r, DiffRow::Hunk { .. });
        let is_file = |r: &DiffRow| matches!(r, DiffRow::File { .. });
        let after = |pred: &dyn Fn(&DiffRow) -> bool| {
            rows.iter()
                .enumerate()
                .skip(self.scroll + 1)
                .find(|(_, r)| pred(r))
                .map(|(i, _)| i)
        };
        let before = |pred: &dyn Fn(&DiffRow) -> bool| {
            rows.iter()
                .enumerate()
                .take(self.scroll)
                .rev()
                .find(|(_, r)| pred(r))
                .map(|(i, _)| i)
        };
        let target = match action {
            Action::Up => Some(self.scroll.saturating_sub(1)),
            Action::Down => Some((self.scroll + 1).min(last)),
            Action::First => Some(0),
            Action::Last => Some(last),
            Action::NextHunk => after(&is_hunk),
            Action::PrevHunk => before(&is_hunk),
            Action::NextFile => after(&is_file),
            Action::PrevFile => before(&is_file),
            _ => None,
        };
        if let Some(target) = target {
            self.scroll = target;
        }
    }

    /// The (file, hunk) the top row belongs to, if any.
    pub fn position(&self) -> Option<(usize, Option<usize>)> {
        let diff = self.diff.as_ref()?;
        match rows(diff).get(self.scroll)? {
            DiffRow::File { file } => Some((*file, None)),
            DiffRow::Hunk { file, hunk } | DiffRow::Line { file, hunk, .. } => {
                Some((*file, Some(*hunk)))
            }
        }
    }
}

fn row_line<'a>(diff: &DiffView, row: DiffRow, theme: &Theme) -> Line<'a> {
    match row {
        DiffRow::File { file } => {
            let f = &diff.files[file];
            Line::from(vec![
                Span::styled(f.path.clone(), theme.style(Slot::DiffFile)),
                Span::raw("  "),
                Span::styled(format!("+{}", f.added), theme.style(Slot::DiffAdd)),
                Span::raw(" "),
                Span::styled(format!("-{}", f.removed), theme.style(Slot::DiffRemove)),
            ])
        }
        DiffRow::Hunk { file, hunk } => {
            let h = &diff.files[file].hunks[hunk];
            let mut spans = vec![Span::styled(h.header(), theme.style(Slot::DiffHunk))];
            if h.decision_ids.is_empty() {
                spans.push(Span::styled(
                    "  no recorded decision",
                    theme.style(Slot::TextDim),
                ));
            } else {
                let ids: Vec<&str> = h.decision_ids.iter().map(|id| short_id(id)).collect();
                spans.push(Span::styled("  from ", theme.style(Slot::TextDim)));
                spans.push(Span::styled(
                    ids.join(", "),
                    theme.style(Slot::DiffDecision),
                ));
            }
            Line::from(spans)
        }
        DiffRow::Line { file, hunk, line } => {
            let l = &diff.files[file].hunks[hunk].lines[line];
            let slot = match l.kind {
                crate::model::DiffLineKind::Context => Slot::DiffContext,
                crate::model::DiffLineKind::Added => Slot::DiffAdd,
                crate::model::DiffLineKind::Removed => Slot::DiffRemove,
            };
            let text = format!("{}{}", l.kind.marker(), l.text.replace('\t', "    "));
            Line::styled(text, theme.style(slot))
        }
    }
}

pub(crate) fn render(pane: &DiffPane, theme: &Theme, focused: bool, area: Rect, buf: &mut Buffer) {
    let detail = pane.diff().filter(|d| !d.files.is_empty()).map(|diff| {
        let mut detail = format!("+{} -{}", diff.added(), diff.removed());
        if let Some((file, hunk)) = pane.position() {
            detail.push_str(&format!(" · file {}/{}", file + 1, diff.files.len()));
            if let Some(hunk) = hunk {
                let count = diff.files[file].hunks.len();
                detail.push_str(&format!(" · hunk {}/{count}", hunk + 1));
            }
        }
        detail
    });
    let block = pane_block(Pane::Diff, detail, theme, focused);
    let inner = block.inner(area);
    block.render(area, buf);

    let diff = match (pane.plan_id(), pane.diff()) {
        (None, _) => return render_message(NO_PLAN, theme, inner, buf),
        (Some(_), None) => return render_message(LOADING, theme, inner, buf),
        (Some(_), Some(diff)) if diff.files.is_empty() => {
            return render_message(EMPTY, theme, inner, buf);
        }
        (Some(_), Some(diff)) => diff,
    };
    let lines: Vec<Line> = rows(diff)
        .into_iter()
        .skip(pane.scroll)
        .take(inner.height.into())
        .map(|row| row_line(diff, row, theme))
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn loaded() -> DiffPane {
        let mut pane = DiffPane::default();
        pane.reset(Some(fixtures::PLAN_A.to_owned()));
        assert!(pane.set_diff(fixtures::PLAN_A, fixtures::diff()));
        pane
    }

    #[test]
    fn rows_interleave_files_hunks_and_lines() {
        let diff = fixtures::diff();
        let rows = rows(&diff);
        assert_eq!(rows[0], DiffRow::File { file: 0 });
        assert_eq!(rows[1], DiffRow::Hunk { file: 0, hunk: 0 });
        assert_eq!(
            rows[2],
            DiffRow::Line {
                file: 0,
                hunk: 0,
                line: 0
            }
        );
        let lines: usize = diff
            .files
            .iter()
            .flat_map(|f| &f.hunks)
            .map(|h| h.lines.len())
            .sum();
        assert_eq!(rows.len(), diff.files.len() + diff.hunk_count() + lines);
    }

    #[test]
    fn hunk_and_file_jumps() {
        let mut pane = loaded();
        let rows = rows(pane.diff().expect("loaded"));
        let hunks: Vec<usize> = (0..rows.len())
            .filter(|i| matches!(rows[*i], DiffRow::Hunk { .. }))
            .collect();
        let files: Vec<usize> = (0..rows.len())
            .filter(|i| matches!(rows[*i], DiffRow::File { .. }))
            .collect();
        pane.handle(Action::NextHunk);
        assert_eq!(pane.scroll(), hunks[0]);
        pane.handle(Action::NextHunk);
        assert_eq!(pane.scroll(), hunks[1]);
        pane.handle(Action::PrevHunk);
        assert_eq!(pane.scroll(), hunks[0]);
        pane.handle(Action::NextFile);
        assert_eq!(pane.scroll(), files[1]);
        assert_eq!(pane.position(), Some((1, None)));
        pane.handle(Action::NextFile);
        assert_eq!(pane.scroll(), files[1], "no file after the last");
        pane.handle(Action::PrevFile);
        assert_eq!(pane.scroll(), 0);
        pane.handle(Action::Last);
        assert_eq!(pane.scroll(), rows.len() - 1);
        pane.handle(Action::Down);
        assert_eq!(pane.scroll(), rows.len() - 1);
    }

    #[test]
    fn diffs_for_other_plans_are_dropped_and_updates_clamp_the_scroll() {
        let mut pane = loaded();
        assert!(!pane.set_diff(fixtures::PLAN_B, DiffView::default()));
        pane.handle(Action::Last);
        assert!(pane.set_diff(fixtures::PLAN_A, DiffView::default()));
        assert_eq!(pane.scroll(), 0);
    }
}
