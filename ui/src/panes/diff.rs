//! The sandbox diff of the selected plan: files with +/- counts, hunks, and for each hunk the
//! decisions that produced it.

use std::collections::{BTreeSet, HashMap};

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Color;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{Pane, pane_block, render_message};
use crate::highlight::{CHUNK_LINES, HighlightRequest, HighlightResult, HunkSource, Segment};
use crate::keymap::Action;
use crate::model::{DiffLineKind, DiffView, ReviewItem, ReviewMark};
use crate::theme::{Slot, Theme};

/// Shown while no plan is selected.
pub const NO_PLAN: &str = "Select a plan to see its changes.";
/// Shown until the selected plan's diff arrives.
pub const LOADING: &str = "Loading diff…";
/// Shown when the sandbox has no changes.
pub const EMPTY: &str = "No changes in this plan's sandbox yet.";

/// How hunks are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Layout {
    /// One column, `-` lines above `+` lines.
    #[default]
    Unified,
    /// Old on the left, new on the right, changed lines paired.
    SideBySide,
}

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
    /// One line of a hunk (unified layout).
    Line {
        /// Index into [`DiffView::files`].
        file: usize,
        /// Index into that file's hunks.
        hunk: usize,
        /// Index into that hunk's lines.
        line: usize,
    },
    /// An old line beside a new line (side-by-side layout); context lines are on both sides.
    Pair {
        /// Index into [`DiffView::files`].
        file: usize,
        /// Index into that file's hunks.
        hunk: usize,
        /// The hunk's line shown on the left (removed or context).
        old: Option<usize>,
        /// The hunk's line shown on the right (added or context).
        new: Option<usize>,
    },
}

impl DiffRow {
    fn file_hunk(self) -> (usize, Option<usize>) {
        match self {
            Self::File { file } => (file, None),
            Self::Hunk { file, hunk }
            | Self::Line { file, hunk, .. }
            | Self::Pair { file, hunk, .. } => (file, Some(hunk)),
        }
    }
}

/// The display rows of a diff in the unified layout, in order.
pub fn rows(diff: &DiffView) -> Vec<DiffRow> {
    layout_rows(diff, Layout::Unified)
}

/// The display rows of a diff in a layout, in order.
pub fn layout_rows(diff: &DiffView, layout: Layout) -> Vec<DiffRow> {
    let mut rows = Vec::new();
    for (file, f) in diff.files.iter().enumerate() {
        rows.push(DiffRow::File { file });
        for (hunk, h) in f.hunks.iter().enumerate() {
            rows.push(DiffRow::Hunk { file, hunk });
            match layout {
                Layout::Unified => {
                    rows.extend((0..h.lines.len()).map(|line| DiffRow::Line { file, hunk, line }));
                }
                Layout::SideBySide => side_by_side(file, hunk, &h.lines, &mut rows),
            }
        }
    }
    rows
}

fn side_by_side(
    file: usize,
    hunk: usize,
    lines: &[crate::model::DiffLine],
    rows: &mut Vec<DiffRow>,
) {
    let mut i = 0;
    while i < lines.len() {
        if lines[i].kind == DiffLineKind::Context {
            rows.push(DiffRow::Pair {
                file,
                hunk,
                old: Some(i),
                new: Some(i),
            });
            i += 1;
            continue;
        }
        let removed = i;
        while i < lines.len() && lines[i].kind == DiffLineKind::Removed {
            i += 1;
        }
        let added = i;
        while i < lines.len() && lines[i].kind == DiffLineKind::Added {
            i += 1;
        }
        let (old_n, new_n) = (added - removed, i - added);
        for k in 0..old_n.max(new_n) {
            rows.push(DiffRow::Pair {
                file,
                hunk,
                old: (k < old_n).then_some(removed + k),
                new: (k < new_n).then_some(added + k),
            });
        }
    }
}

/// A chunk of a hunk as the highlight cache keys it: (file, hunk, first line of the chunk).
type ChunkKey = (usize, usize, usize);

/// State of the diff pane: the diff, the first row shown, the layout and the highlights
/// received so far for this diff.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffPane {
    plan_id: Option<String>,
    diff: Option<DiffView>,
    scroll: usize,
    layout: Layout,
    rows: Vec<DiffRow>,
    generation: u64,
    highlights: HashMap<ChunkKey, Vec<Vec<Segment>>>,
    requested: BTreeSet<ChunkKey>,
    /// Marks made here that no diff from the engine has shown yet, by review item id.
    unconfirmed: HashMap<String, LocalMark>,
}

/// A mark shown before the engine's diff confirms it.
#[derive(Clone, Debug, PartialEq)]
struct LocalMark {
    mark: ReviewMark,
    reason: Option<String>,
    at: std::time::Instant,
}

/// How long a mark made here outweighs the engine's diffs that do not show it: a diff read
/// before the mark was stored can arrive after it, and must not undo it on screen; a mark the
/// engine never stored gives way after this.
const UNCONFIRMED_FOR: std::time::Duration = std::time::Duration::from_secs(10);

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

    /// The layout in use.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The display rows of the diff in the current layout.
    pub fn display_rows(&self) -> &[DiffRow] {
        &self.rows
    }

    /// Counts diffs received with different content; highlights carry it back.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// How many chunks have highlights.
    pub fn highlighted_chunks(&self) -> usize {
        self.highlights.len()
    }

    /// Starts showing another plan (or none); keeps the layout.
    pub(crate) fn reset(&mut self, plan_id: Option<String>) {
        *self = Self {
            plan_id,
            layout: self.layout,
            generation: self.generation + 1,
            ..Self::default()
        };
    }

    /// Takes a diff from the engine; ignored unless it belongs to the shown plan. The scroll
    /// position is kept (clamped) so a live update does not jump, and an unchanged diff keeps
    /// its highlights.
    pub(crate) fn set_diff(&mut self, plan_id: &str, mut diff: DiffView) -> bool {
        if self.plan_id.as_deref() != Some(plan_id) {
            return false;
        }
        self.keep_unconfirmed_marks(&mut diff);
        if self.diff.as_ref() == Some(&diff) {
            return true;
        }
        if self.diff.as_ref().is_some_and(|d| d.same_text(&diff)) {
            // Only marks or attributions changed: same rows, same highlights.
            self.diff = Some(diff);
            return true;
        }
        self.rows = layout_rows(&diff, self.layout);
        self.scroll = self.scroll.min(self.rows.len().saturating_sub(1));
        self.diff = Some(diff);
        self.generation += 1;
        self.highlights.clear();
        self.requested.clear();
        true
    }

    /// Stores highlights for the diff shown; drops them when they belong to another diff.
    pub(crate) fn set_highlights(&mut self, result: HighlightResult) -> bool {
        if result.generation != self.generation || self.diff.is_none() {
            return false;
        }
        for hunk in result.hunks {
            let key = (hunk.file, hunk.hunk, hunk.first_line);
            self.requested.remove(&key);
            self.highlights.insert(key, hunk.lines);
        }
        true
    }

    /// The chunks around the visible rows (`height` rows from the top, and as many again
    /// below) that have no highlights yet, as a request, unless the same chunks were the last
    /// ones requested.
    pub(crate) fn highlight_request(
        &mut self,
        height: usize,
        syntax_theme: Option<&str>,
    ) -> Option<HighlightRequest> {
        let diff = self.diff.as_ref()?;
        let end = (self.scroll + height.max(1) * 2).min(self.rows.len());
        let mut wanted: BTreeSet<ChunkKey> = BTreeSet::new();
        for row in &self.rows[self.scroll.min(end)..end] {
            let lines: [Option<usize>; 2] = match *row {
                DiffRow::Line { line, .. } => [Some(line), None],
                DiffRow::Pair { old, new, .. } => [old, new],
                _ => continue,
            };
            let (file, Some(hunk)) = row.file_hunk() else {
                continue;
            };
            for line in lines.into_iter().flatten() {
                let key = (file, hunk, line / CHUNK_LINES * CHUNK_LINES);
                if !self.highlights.contains_key(&key) {
                    wanted.insert(key);
                }
            }
        }
        if wanted.is_empty() || wanted == self.requested {
            return None;
        }
        let hunks = wanted
            .iter()
            .map(|&(file, hunk, first_line)| {
                let f = &diff.files[file];
                let lines = &f.hunks[hunk].lines;
                let last = (first_line + CHUNK_LINES).min(lines.len());
                HunkSource {
                    file,
                    hunk,
                    first_line,
                    path: f.path.clone(),
                    lines: lines[first_line..last]
                        .iter()
                        .map(|l| (l.kind, l.text.clone()))
                        .collect(),
                }
            })
            .collect();
        self.requested = wanted;
        Some(HighlightRequest {
            generation: self.generation,
            syntax_theme: syntax_theme.map(str::to_owned),
            hunks,
        })
    }

    fn segments(&self, file: usize, hunk: usize, line: usize) -> Option<&[Segment]> {
        let first = line / CHUNK_LINES * CHUNK_LINES;
        self.highlights
            .get(&(file, hunk, first))
            .and_then(|lines| lines.get(line - first))
            .map(Vec::as_slice)
    }

    /// Scrolls by line, page, hunk or file, or switches the layout; `page` is the number of
    /// rows visible.
    pub(crate) fn handle(&mut self, action: Action, page: usize) {
        if action == Action::ToggleDiffView {
            self.toggle_layout();
            return;
        }
        if self.diff.is_none() {
            return;
        }
        let rows = &self.rows;
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
        let page = page.max(1);
        let target = match action {
            Action::Up => Some(self.scroll.saturating_sub(1)),
            Action::Down => Some((self.scroll + 1).min(last)),
            Action::PageUp => Some(self.scroll.saturating_sub(page)),
            Action::PageDown => Some((self.scroll + page).min(last)),
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

    /// Switches between unified and side by side, keeping the same hunk at the top.
    fn toggle_layout(&mut self) {
        self.layout = match self.layout {
            Layout::Unified => Layout::SideBySide,
            Layout::SideBySide => Layout::Unified,
        };
        let Some(diff) = &self.diff else { return };
        let top = self.rows.get(self.scroll).map(|r| r.file_hunk());
        self.rows = layout_rows(diff, self.layout);
        self.scroll = top
            .and_then(|top| self.rows.iter().position(|r| r.file_hunk() == top))
            .unwrap_or(0);
    }

    /// The (file, hunk) the top row belongs to, if any.
    pub fn position(&self) -> Option<(usize, Option<usize>)> {
        self.diff.as_ref()?;
        self.rows.get(self.scroll).map(|r| r.file_hunk())
    }

    /// The review item the marking keys act on: the hunk at the top row, the first hunk of the
    /// file whose header is there, or that file itself when it has no hunks. `None` without a
    /// diff or when the diff has no review (an applied plan).
    pub fn current_item(&self) -> Option<(usize, Option<usize>, &ReviewItem)> {
        let diff = self.diff.as_ref()?;
        let (file, hunk) = self.position()?;
        let f = &diff.files[file];
        match hunk.or(if f.hunks.is_empty() { None } else { Some(0) }) {
            Some(h) => f.hunks[h].review.as_ref().map(|r| (file, Some(h), r)),
            None => f.review.as_ref().map(|r| (file, None, r)),
        }
    }

    /// The ids of the items of `file` without a verdict (pending or only reviewed).
    pub fn pending_items_of(&self, file: usize) -> Vec<String> {
        self.diff
            .as_ref()
            .and_then(|d| d.files.get(file))
            .map(|f| {
                f.review_items()
                    .filter(|r| matches!(r.mark, ReviewMark::Pending | ReviewMark::Reviewed))
                    .map(|r| r.id.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Shows `mark` (and `reason`) on the items `ids` at once, before the engine's diff
    /// confirms it.
    pub(crate) fn set_marks(&mut self, ids: &[String], mark: ReviewMark, reason: Option<&str>) {
        let at = std::time::Instant::now();
        for id in ids {
            let local = LocalMark {
                mark,
                reason: reason.map(str::to_owned),
                at,
            };
            self.unconfirmed.insert(id.clone(), local);
        }
        let Some(diff) = self.diff.as_mut() else {
            return;
        };
        for f in &mut diff.files {
            for item in f.review_items_mut().filter(|i| ids.contains(&i.id)) {
                item.mark = mark;
                item.reason = reason.map(str::to_owned);
            }
        }
    }

    /// Puts back on `diff` the marks made here that it does not show yet (it was read before
    /// they were stored); a mark it shows is confirmed and forgotten, and one older than
    /// [`UNCONFIRMED_FOR`] gives way to the engine.
    fn keep_unconfirmed_marks(&mut self, diff: &mut DiffView) {
        self.unconfirmed
            .retain(|_, local| local.at.elapsed() < UNCONFIRMED_FOR);
        if self.unconfirmed.is_empty() {
            return;
        }
        for f in &mut diff.files {
            for item in f.review_items_mut() {
                let Some(local) = self.unconfirmed.get(&item.id) else {
                    continue;
                };
                if item.mark == local.mark && item.reason == local.reason {
                    self.unconfirmed.remove(&item.id);
                } else {
                    item.mark = local.mark;
                    item.reason.clone_from(&local.reason);
                }
            }
        }
    }

    /// Moves to the review item after the current one (the next hunk, or the next file
    /// without hunks); stays at the last.
    pub(crate) fn next_item(&mut self) {
        let (Some(diff), Some((file, hunk, _))) = (self.diff.as_ref(), self.current_item()) else {
            return;
        };
        let anchor = self.rows.iter().position(|r| match (*r, hunk) {
            (DiffRow::Hunk { file: f, hunk: h }, Some(hunk)) => f == file && h == hunk,
            (DiffRow::File { file: f }, None) => f == file,
            _ => false,
        });
        let Some(anchor) = anchor else { return };
        let next = self
            .rows
            .iter()
            .enumerate()
            .skip(anchor + 1)
            .find(|(_, r)| match r {
                DiffRow::Hunk { .. } => true,
                DiffRow::File { file } => diff.files[*file].hunks.is_empty(),
                _ => false,
            });
        if let Some((i, _)) = next {
            self.scroll = i;
        }
    }

    /// Moves to the header of the file after `file`, if any.
    pub(crate) fn next_file_after(&mut self, file: usize) {
        if let Some(i) = self
            .rows
            .iter()
            .position(|r| matches!(*r, DiffRow::File { file: f } if f > file))
        {
            self.scroll = i;
        }
    }
}

/// The style slot of a mark's sign.
fn mark_slot(mark: ReviewMark) -> Slot {
    match mark {
        ReviewMark::Pending => Slot::StatusWarn,
        ReviewMark::Reviewed => Slot::TextDim,
        ReviewMark::Accepted => Slot::StatusOk,
        ReviewMark::Rejected => Slot::StatusError,
    }
}

/// `✓ ` / `✗ ` / `· ` before a reviewed hunk or file header.
fn mark_span<'a>(review: Option<&ReviewItem>, theme: &Theme) -> Option<Span<'a>> {
    review.map(|r| {
        Span::styled(
            format!("{} ", r.mark.glyph()),
            theme.style(mark_slot(r.mark)),
        )
    })
}

/// A rejection's reason after a header (when the reviewers are named, each mark carries its
/// own reason instead: [`reviewers_span`]).
fn reason_span<'a>(review: Option<&ReviewItem>, theme: &Theme) -> Option<Span<'a>> {
    let r = review.filter(|r| r.mark == ReviewMark::Rejected && !r.names_reviewers())?;
    let reason = r
        .reason
        .as_deref()
        .map_or(String::new(), |t| format!(": {t}"));
    Some(Span::styled(
        format!("  rejected{reason}"),
        theme.style(Slot::StatusError),
    ))
}

/// Who marked an item what after a header (`  by alice ✓ · bob ✗: too broad`), when a
/// server's user marked it or several reviewers did.
fn reviewers_span<'a>(review: Option<&ReviewItem>, theme: &Theme) -> Vec<Span<'a>> {
    let Some(r) = review.filter(|r| r.names_reviewers()) else {
        return Vec::new();
    };
    let mut spans = vec![Span::styled("  by ", theme.style(Slot::TextDim))];
    for (n, m) in r.marks.iter().enumerate() {
        if n > 0 {
            spans.push(Span::styled(" · ", theme.style(Slot::TextDim)));
        }
        spans.push(Span::styled(
            format!("{} {}", m.who(), m.mark.glyph()),
            theme.style(mark_slot(m.mark)),
        ));
        if let Some(reason) = &m.reason {
            spans.push(Span::styled(
                format!(": {reason}"),
                theme.style(Slot::TextDim),
            ));
        }
    }
    spans
}

/// The narrowest pane text that gets a file list beside the diff.
pub const FILE_LIST_MIN_WIDTH: u16 = 70;

/// The file list: one row per file with its mark, status, path and +/-, the current file
/// selected.
fn render_file_list(pane: &DiffPane, diff: &DiffView, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let current = pane.position().map(|(f, _)| f);
    let height = usize::from(area.height).max(1);
    let offset = current.unwrap_or(0).saturating_sub(height - 1);
    let width = usize::from(area.width);
    for (y, (i, f)) in (area.y..area.bottom()).zip(diff.files.iter().enumerate().skip(offset)) {
        let mark = match (f.mark(), f.review_items().next()) {
            (Some(m), _) => Span::styled(m.glyph(), theme.style(mark_slot(m))),
            (None, Some(_)) => Span::styled("~", theme.style(Slot::StatusWarn)),
            (None, None) => Span::raw(" "),
        };
        let counts = format!(" +{} -{}", f.added, f.removed);
        let status = if f.status.is_empty() {
            "M"
        } else {
            f.status.as_str()
        };
        let room = width.saturating_sub(4 + counts.chars().count());
        let chars: Vec<char> = f.path.chars().collect();
        let path = if chars.len() > room && room > 1 {
            let tail: String = chars[chars.len() - (room - 1)..].iter().collect();
            format!("…{tail}")
        } else {
            f.path.clone()
        };
        let pad = room.saturating_sub(path.chars().count());
        let line = Line::from(vec![
            mark,
            Span::raw(" "),
            Span::styled(status.to_owned(), theme.style(Slot::TextDim)),
            Span::raw(" "),
            Span::styled(path, theme.style(Slot::DiffFile)),
            Span::raw(" ".repeat(pad)),
            Span::styled(format!(" +{}", f.added), theme.style(Slot::DiffAdd)),
            Span::styled(format!(" -{}", f.removed), theme.style(Slot::DiffRemove)),
        ]);
        buf.set_line(area.x, y, &line, area.width);
        if Some(i) == current {
            buf.set_style(
                Rect::new(area.x, y, area.width, 1),
                theme.style(Slot::ListSelected),
            );
        }
    }
}

fn file_line<'a>(diff: &DiffView, file: usize, theme: &Theme) -> Line<'a> {
    let f = &diff.files[file];
    let mut spans: Vec<Span<'a>> = mark_span(f.review.as_ref(), theme).into_iter().collect();
    spans.extend([
        Span::styled(f.path.clone(), theme.style(Slot::DiffFile)),
        Span::raw("  "),
        Span::styled(format!("+{}", f.added), theme.style(Slot::DiffAdd)),
        Span::raw(" "),
        Span::styled(format!("-{}", f.removed), theme.style(Slot::DiffRemove)),
    ]);
    spans.extend(reason_span(f.review.as_ref(), theme));
    spans.extend(reviewers_span(f.review.as_ref(), theme));
    Line::from(spans)
}

fn hunk_line<'a>(diff: &DiffView, file: usize, hunk: usize, theme: &Theme) -> Line<'a> {
    let h = &diff.files[file].hunks[hunk];
    let mut spans: Vec<Span<'a>> = mark_span(h.review.as_ref(), theme).into_iter().collect();
    spans.push(Span::styled(h.header(), theme.style(Slot::DiffHunk)));
    // Hunks without recorded decisions show nothing more (the engine may not attribute them).
    if !h.decision_ids.is_empty() {
        // Long enough to be typed back into `plan explain` / `plan correct`.
        let len = crate::model::unique_prefix_len(
            diff.files
                .iter()
                .flat_map(|f| &f.hunks)
                .flat_map(|h| &h.decision_ids)
                .map(String::as_str),
            12,
        );
        let ids: Vec<&str> = h
            .decision_ids
            .iter()
            .map(|id| crate::model::prefix(id, len))
            .collect();
        spans.push(Span::styled("  from ", theme.style(Slot::TextDim)));
        spans.push(Span::styled(
            ids.join(", "),
            theme.style(Slot::DiffDecision),
        ));
    }
    spans.extend(reason_span(h.review.as_ref(), theme));
    spans.extend(reviewers_span(h.review.as_ref(), theme));
    Line::from(spans)
}

/// One hunk line: its marker in the kind's colour, then its text, split into syntax-coloured
/// and emphasised segments once highlights arrived.
fn code_line<'a>(
    pane: &DiffPane,
    diff: &DiffView,
    (file, hunk, line): (usize, usize, usize),
    theme: &Theme,
) -> Line<'a> {
    let l = &diff.files[file].hunks[hunk].lines[line];
    let (slot, emph_slot) = match l.kind {
        DiffLineKind::Context => (Slot::DiffContext, Slot::DiffContext),
        DiffLineKind::Added => (Slot::DiffAdd, Slot::DiffAddEmph),
        DiffLineKind::Removed => (Slot::DiffRemove, Slot::DiffRemoveEmph),
    };
    let base = theme.style(slot);
    let mut spans = vec![Span::styled(l.kind.marker().to_string(), base)];
    let untab = |s: &str| s.replace('\t', "    ");
    match pane.segments(file, hunk, line) {
        Some(segments) if !segments.is_empty() => {
            for seg in segments {
                let Some(text) = l.text.get(seg.start..seg.end) else {
                    spans.truncate(1);
                    spans.push(Span::styled(untab(&l.text), base));
                    break;
                };
                let mut style = base;
                if let (Some([r, g, b]), true) = (seg.rgb, theme.syntax().is_some()) {
                    style = style.fg(Color::Rgb(r, g, b));
                }
                if seg.emphasis {
                    style = style.patch(theme.style(emph_slot));
                }
                spans.push(Span::styled(untab(text), style));
            }
        }
        _ => spans.push(Span::styled(untab(&l.text), base)),
    }
    Line::from(spans)
}

/// Draws the pane; `banner` replaces the title's detail (the apply review says so there).
pub(crate) fn render_titled(
    pane: &DiffPane,
    theme: &Theme,
    focused: bool,
    banner: Option<String>,
    area: Rect,
    buf: &mut Buffer,
) {
    let detail = pane.diff().filter(|d| !d.files.is_empty()).map(|diff| {
        let mut detail = format!("+{} -{}", diff.added(), diff.removed());
        if let Some((file, hunk)) = pane.position() {
            detail.push_str(&format!(" · file {}/{}", file + 1, diff.files.len()));
            if let Some(hunk) = hunk {
                let count = diff.files[file].hunks.len();
                detail.push_str(&format!(" · hunk {}/{count}", hunk + 1));
            }
        }
        if pane.layout == Layout::SideBySide {
            detail.push_str(" · side by side");
        }
        if let Some(c) = diff.review_counts() {
            detail.push_str(&format!(" · ✓{} ✗{}", c.accepted, c.rejected));
            if c.reviewed > 0 {
                detail.push_str(&format!(" ○{}", c.reviewed));
            }
            detail.push_str(&format!(" ·{} pending", c.pending));
        }
        detail
    });
    let detail = match (banner, detail) {
        (Some(banner), Some(detail)) => Some(format!("{banner} · {detail}")),
        (banner, detail) => banner.or(detail),
    };
    let detail = match (pane.diff().and_then(|d| d.applied.clone()), detail) {
        (Some(applied), Some(detail)) => Some(format!("{applied} · {detail}")),
        (applied, detail) => applied.or(detail),
    };
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
    let inner = if inner.width >= FILE_LIST_MIN_WIDTH {
        let list_w = (inner.width / 4).clamp(24, 40);
        let list = Rect::new(inner.x, inner.y, list_w, inner.height);
        render_file_list(pane, diff, theme, list, buf);
        for y in inner.y..inner.bottom() {
            buf.set_stringn(inner.x + list_w, y, "│", 1, theme.style(Slot::PaneBorder));
        }
        Rect::new(
            inner.x + list_w + 2,
            inner.y,
            inner.width - list_w - 2,
            inner.height,
        )
    } else {
        inner
    };
    let half = inner.width.saturating_sub(1) / 2;
    let right_x = inner.x + half + 1;
    let right_w = inner.width.saturating_sub(half + 1);
    // Only the visible rows are built and drawn, whatever the size of the diff.
    for (y, row) in (inner.y..inner.bottom()).zip(pane.rows.iter().skip(pane.scroll)) {
        match *row {
            DiffRow::File { file } => {
                buf.set_line(inner.x, y, &file_line(diff, file, theme), inner.width);
            }
            DiffRow::Hunk { file, hunk } => {
                buf.set_line(inner.x, y, &hunk_line(diff, file, hunk, theme), inner.width);
            }
            DiffRow::Line { file, hunk, line } => {
                let l = code_line(pane, diff, (file, hunk, line), theme);
                buf.set_line(inner.x, y, &l, inner.width);
            }
            DiffRow::Pair {
                file,
                hunk,
                old,
                new,
            } => {
                if let Some(old) = old {
                    let l = code_line(pane, diff, (file, hunk, old), theme);
                    buf.set_line(inner.x, y, &l, half);
                }
                buf.set_stringn(inner.x + half, y, "│", 1, theme.style(Slot::PaneBorder));
                if let Some(new) = new {
                    let l = code_line(pane, diff, (file, hunk, new), theme);
                    buf.set_line(right_x, y, &l, right_w);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn a_diff_read_before_a_mark_was_stored_does_not_undo_it_on_screen() {
        let mut pane = DiffPane::default();
        pane.reset(Some(fixtures::PLAN_A.to_owned()));
        let before = fixtures::reviewed_diff();
        assert!(pane.set_diff(fixtures::PLAN_A, before.clone()));
        let pending = |p: &DiffPane| p.diff().and_then(DiffView::review_counts).unwrap().pending;
        assert_eq!(pending(&pane), 2);
        pane.set_marks(&["11aa22bb33cc".to_owned()], ReviewMark::Rejected, None);
        assert_eq!(pending(&pane), 1);
        // A refresh the engine answered before it stored the mark.
        pane.set_diff(fixtures::PLAN_A, before.clone());
        assert_eq!(
            pending(&pane),
            1,
            "the stale diff put the mark back to pending"
        );
        // The engine's diff with the mark confirms it; a later change by someone else shows.
        let mut stored = before.clone();
        stored.files[1].hunks[0].review.as_mut().unwrap().mark = ReviewMark::Rejected;
        pane.set_diff(fixtures::PLAN_A, stored);
        assert!(pane.unconfirmed.is_empty());
        pane.set_diff(fixtures::PLAN_A, before);
        assert_eq!(pending(&pane), 2);
    }

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
        pane.handle(Action::NextHunk, 10);
        assert_eq!(pane.scroll(), hunks[0]);
        pane.handle(Action::NextHunk, 10);
        assert_eq!(pane.scroll(), hunks[1]);
        pane.handle(Action::PrevHunk, 10);
        assert_eq!(pane.scroll(), hunks[0]);
        pane.handle(Action::NextFile, 10);
        assert_eq!(pane.scroll(), files[1]);
        assert_eq!(pane.position(), Some((1, None)));
        pane.handle(Action::NextFile, 10);
        assert_eq!(pane.scroll(), files[1], "no file after the last");
        pane.handle(Action::PrevFile, 10);
        assert_eq!(pane.scroll(), 0);
        pane.handle(Action::Last, 10);
        assert_eq!(pane.scroll(), rows.len() - 1);
        pane.handle(Action::Down, 10);
        assert_eq!(pane.scroll(), rows.len() - 1);
    }

    #[test]
    fn diffs_for_other_plans_are_dropped_and_updates_clamp_the_scroll() {
        let mut pane = loaded();
        assert!(!pane.set_diff(fixtures::PLAN_B, DiffView::default()));
        pane.handle(Action::Last, 10);
        assert!(pane.set_diff(fixtures::PLAN_A, DiffView::default()));
        assert_eq!(pane.scroll(), 0);
    }
}
