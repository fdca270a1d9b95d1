//! The plans list: id, action, project, phase, state, elapsed, cost.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::Span;
use ratatui::widgets::{Cell, HighlightSpacing, Row, StatefulWidget, Table, TableState, Widget};

use super::{Pane, pane_block, render_message, step};
use crate::keymap::Action;
use crate::model::{Phase, PlanRow, ProcessingState, format_cost, format_elapsed, unique_prefixes};
use crate::theme::{Slot, Theme};

/// Shown when the engine reported no plans at all.
pub const EMPTY: &str = "No plans yet — run `agents plan use ...`";
/// Shown when the filter matches no plan.
pub const NO_MATCH: &str = "No plan matches the filter — Backspace to widen it, Esc to clear it.";
/// Shown until the first list of plans arrives.
pub const LOADING: &str = "Loading plans…";

/// State of the plans pane. The selection follows the plan id, so it survives live updates.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PlansPane {
    rows: Option<Vec<PlanRow>>,
    selected: Option<String>,
    filter: String,
    editing_filter: bool,
    /// Indices into `rows` of the plans shown: all of them, or the fuzzy matches of `filter`,
    /// best first.
    shown: Vec<usize>,
}

/// What a key did to the filter being typed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FilterOutcome {
    /// The key edited the filter (the selection may have changed).
    Edited {
        /// Whether the selected plan changed.
        selection_changed: bool,
    },
    /// Typing finished; the filter stays.
    Done,
}

/// The fields a filter word is matched against, each on its own: a word that picks letters
/// from several fields (or from a plan id's 26 random characters) matches nothing a user meant.
fn fields(row: &PlanRow) -> [&str; 4] {
    [
        row.action.as_str(),
        row.project.as_str(),
        row.phase.label(),
        row.state.label(),
    ]
}

/// The least fuzzy score per character of a word for a field to match: about what nucleo gives
/// a run of the word's characters at the start of a word in the field. Letters scattered over
/// a field score far less (`rust` in `rust-clippy` scores 109, in `reuse-strategy` 90).
pub const MIN_SCORE_PER_CHAR: u32 = 24;

/// The score of one filter word against a row: a plan id matches by prefix (as typed on the
/// command line); the other fields fuzzily (nucleo, smart case), each on its own, scoring at
/// least [`MIN_SCORE_PER_CHAR`] per character.
fn word_score(
    word: &str,
    row: &PlanRow,
    matcher: &mut nucleo_matcher::Matcher,
    buf: &mut Vec<char>,
) -> Option<u32> {
    use nucleo_matcher::Utf32Str;
    use nucleo_matcher::pattern::{CaseMatching, Normalization, Pattern};
    if row
        .plan_id
        .to_ascii_lowercase()
        .starts_with(&word.to_ascii_lowercase())
    {
        return Some(u32::from(u16::MAX));
    }
    let least = MIN_SCORE_PER_CHAR * u32::try_from(word.chars().count()).unwrap_or(u32::MAX);
    let pattern = Pattern::parse(word, CaseMatching::Smart, Normalization::Smart);
    fields(row)
        .into_iter()
        .filter_map(|field| pattern.score(Utf32Str::new(field, buf), matcher))
        .filter(|score| *score >= least)
        .max()
}

/// The indices of the rows matching every word of `filter` (see [`word_score`]), best total
/// score first and engine order among equals; every row for an empty filter.
pub fn fuzzy_filter(rows: &[PlanRow], filter: &str) -> Vec<usize> {
    use nucleo_matcher::{Config, Matcher};
    let words: Vec<&str> = filter.split_whitespace().collect();
    if words.is_empty() {
        return (0..rows.len()).collect();
    }
    let mut matcher = Matcher::new(Config::DEFAULT);
    let mut buf = Vec::new();
    let mut scored: Vec<(u32, usize)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, row)| {
            words
                .iter()
                .map(|w| word_score(w, row, &mut matcher, &mut buf))
                .sum::<Option<u32>>()
                .map(|score| (score, i))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

impl PlansPane {
    /// Plan `id` as `plan list` prints it: its shortest prefix (at least eight characters)
    /// that no other plan listed here shares.
    pub fn short(&self, id: &str) -> String {
        let mut ids: Vec<&str> = self.rows().iter().map(|r| r.plan_id.as_str()).collect();
        if !ids.contains(&id) {
            ids.push(id);
        }
        let at = ids.iter().position(|i| *i == id).unwrap_or_default();
        unique_prefixes(&ids).swap_remove(at)
    }

    /// The plans, in engine order (empty until loaded).
    pub fn rows(&self) -> &[PlanRow] {
        self.rows.as_deref().unwrap_or_default()
    }

    /// The plans shown, in display order (the filter's matches, or all).
    pub fn shown(&self) -> impl Iterator<Item = &PlanRow> {
        self.shown.iter().filter_map(|i| self.rows().get(*i))
    }

    /// How many plans are shown.
    pub fn shown_len(&self) -> usize {
        self.shown.len()
    }

    /// The fuzzy filter ("" when none).
    pub fn filter(&self) -> &str {
        &self.filter
    }

    /// Whether the user is typing the filter.
    pub fn is_editing_filter(&self) -> bool {
        self.editing_filter
    }

    /// Starts typing the filter.
    pub(crate) fn start_filter(&mut self) {
        self.editing_filter = true;
    }

    /// Handles a key while the filter is being typed: characters and Backspace edit it, Enter
    /// keeps it, Esc clears it.
    pub(crate) fn filter_key(&mut self, key: crate::msg::Key) -> FilterOutcome {
        use crate::msg::Key;
        match key {
            Key::Enter => {
                self.editing_filter = false;
                return FilterOutcome::Done;
            }
            Key::Esc => {
                self.editing_filter = false;
                self.filter.clear();
            }
            Key::Backspace => {
                self.filter.pop();
            }
            Key::Char(c) => self.filter.push(c),
            Key::Down | Key::Up => {
                let action = if key == Key::Down {
                    Action::Down
                } else {
                    Action::Up
                };
                return FilterOutcome::Edited {
                    selection_changed: self.handle(action),
                };
            }
            _ => {
                return FilterOutcome::Edited {
                    selection_changed: false,
                };
            }
        }
        let before = self.selected.clone();
        self.refilter();
        FilterOutcome::Edited {
            selection_changed: self.selected != before,
        }
    }

    /// Recomputes the shown rows; a selection filtered out moves to the best match.
    fn refilter(&mut self) {
        self.shown = fuzzy_filter(self.rows(), &self.filter);
        // With no match at all the selection stays, so widening the filter again is calm.
        if !self.filter.is_empty() && self.shown_index().is_none() && !self.shown.is_empty() {
            self.selected = self.shown.first().map(|i| self.rows()[*i].plan_id.clone());
        }
    }

    /// The position of the selected plan among the shown ones.
    pub fn shown_index(&self) -> Option<usize> {
        let index = self.selected_index()?;
        self.shown.iter().position(|i| *i == index)
    }

    /// Selects the `n`th shown plan (a mouse click); returns whether the selection changed.
    pub(crate) fn select_shown(&mut self, n: usize) -> bool {
        let Some(row) = self.shown.get(n).and_then(|i| self.rows().get(*i)) else {
            return false;
        };
        let id = row.plan_id.clone();
        let changed = self.selected.as_deref() != Some(id.as_str());
        self.selected = Some(id);
        changed
    }

    /// Whether a list of plans has arrived yet.
    pub fn is_loaded(&self) -> bool {
        self.rows.is_some()
    }

    /// The id of the selected plan.
    pub fn selected_id(&self) -> Option<&str> {
        self.selected.as_deref()
    }

    /// The index of the selected plan in [`PlansPane::rows`].
    pub fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_deref()?;
        self.rows().iter().position(|row| row.plan_id == id)
    }

    /// Replaces the list. Keeps the selected plan if it is still there; otherwise selects the
    /// plan now at the old position (or the first). Returns whether the selection changed (on
    /// the first list, whether anything is selected).
    pub(crate) fn set_rows(&mut self, rows: Vec<PlanRow>) -> bool {
        let old_index = self.selected_index();
        let before = self.selected.clone();
        let first_load = !self.is_loaded();
        self.rows = Some(rows);
        self.shown = fuzzy_filter(self.rows(), &self.filter);
        if self.selected_index().is_none() {
            let rows = self.rows();
            let index = old_index.unwrap_or(0).min(rows.len().saturating_sub(1));
            self.selected = rows.get(index).map(|row| row.plan_id.clone());
        }
        if !self.filter.is_empty() && self.shown_index().is_none() && !self.shown.is_empty() {
            self.selected = self.shown.first().map(|i| self.rows()[*i].plan_id.clone());
        }
        // A selection remembered before the first list arrived counts as new once it loads.
        self.selected != before || (first_load && self.selected.is_some())
    }

    /// Selects the plan with `id`. Before the first list arrives the id is remembered and kept
    /// if the list contains it. Returns whether the selection changed.
    pub(crate) fn select(&mut self, id: &str) -> bool {
        if self.is_loaded() && !self.rows().iter().any(|row| row.plan_id == id) {
            return false;
        }
        let changed = self.selected.as_deref() != Some(id);
        self.selected = Some(id.to_owned());
        changed && self.is_loaded()
    }

    /// Selects the listed plan `id`, clearing a filter that hides it (a plan made from this
    /// TUI is shown at once). Returns whether the selection changed.
    pub(crate) fn reveal(&mut self, id: &str) -> bool {
        let Some(index) = self.rows().iter().position(|row| row.plan_id == id) else {
            return false;
        };
        if !self.shown.contains(&index) {
            self.filter.clear();
            self.editing_filter = false;
            self.shown = fuzzy_filter(self.rows(), &self.filter);
        }
        self.select(id)
    }

    /// Moves the selection among the shown plans; returns whether it changed.
    pub(crate) fn handle(&mut self, action: Action) -> bool {
        let Some(index) = step(self.shown_index(), self.shown.len(), action) else {
            return false;
        };
        let id = self.rows()[self.shown[index]].plan_id.clone();
        if self.selected.as_deref() == Some(id.as_str()) {
            return false;
        }
        self.selected = Some(id);
        true
    }
}

/// The theme slot for a phase.
pub fn phase_slot(phase: Phase) -> Slot {
    match phase {
        Phase::Strategize => Slot::PhaseStrategize,
        Phase::Execute => Slot::PhaseExecute,
        Phase::Apply => Slot::PhaseApply,
        Phase::Applied => Slot::PhaseApplied,
    }
}

/// The theme slot for a processing state.
pub fn state_slot(state: ProcessingState) -> Slot {
    match state {
        ProcessingState::Queued => Slot::StateQueued,
        ProcessingState::Processing => Slot::StateProcessing,
        ProcessingState::Errored => Slot::StateErrored,
        ProcessingState::Complete => Slot::StateComplete,
        ProcessingState::Cancelled => Slot::StateCancelled,
    }
}

/// The state column's word for a plan whose gate was rejected.
pub const GATE_REJECTED: &str = "gate rejected";

/// The state column of `row`: `waiting`, `gate rejected` or the processing state.
fn state_cell<'a>(row: &PlanRow, waiting: &[&str], theme: &Theme) -> Span<'a> {
    if row.state == ProcessingState::Errored {
        Span::styled(row.state.label(), theme.style(state_slot(row.state)))
    } else if waiting.contains(&row.plan_id.as_str()) {
        Span::styled("waiting", theme.style(Slot::StatusWarn))
    } else if row.gate_rejected {
        Span::styled(GATE_REJECTED, theme.style(Slot::StatusWarn))
    } else {
        Span::styled(row.state.label(), theme.style(state_slot(row.state)))
    }
}

/// Draws the plans list; a plan with a pending approval in `waiting` (plan ids) shows its state
/// as `waiting` (a user looks here first, and `execute complete` alone does not say that the
/// plan waits for them), a plan whose gate the user rejected as `gate rejected` (as `agents
/// plan status` words it: not done, resting until its phase is run after all); an errored plan
/// keeps saying `errored`.
pub(crate) fn render(
    pane: &PlansPane,
    waiting: &[&str],
    theme: &Theme,
    focused: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let detail = pane.is_loaded().then(|| {
        let mut detail = match pane.rows().len() {
            1 => "1 plan".to_owned(),
            n => format!("{n} plans"),
        };
        if pane.editing_filter || !pane.filter.is_empty() {
            let cursor = if pane.editing_filter { "▏" } else { "" };
            detail.push_str(&format!(
                " · /{}{cursor} ({} shown)",
                pane.filter,
                pane.shown.len()
            ));
        }
        detail
    });
    let block = pane_block(Pane::Plans, detail, theme, focused);
    let inner = block.inner(area);
    block.render(area, buf);
    if pane.rows().is_empty() {
        let text = if pane.is_loaded() { EMPTY } else { LOADING };
        render_message(text, theme, inner, buf);
        return;
    }
    if pane.shown.is_empty() {
        render_message(NO_MATCH, theme, inner, buf);
        return;
    }

    let text = theme.style(Slot::Text);
    let header = Row::new([
        "id", "action", "project", "phase", "state", "elapsed", "cost",
    ])
    .style(theme.style(Slot::ListHeader));
    let ids: Vec<&str> = pane.rows().iter().map(|r| r.plan_id.as_str()).collect();
    let shorts = unique_prefixes(&ids);
    let id_width = shorts.iter().map(String::len).max().unwrap_or(8);
    let short_of = |row: &PlanRow| {
        ids.iter()
            .position(|i| *i == row.plan_id)
            .map_or_else(String::new, |at| shorts[at].clone())
    };
    // Ten cells hold every processing state; the column widens while a row says more.
    let state_width = pane
        .shown()
        .map(|row| state_cell(row, waiting, theme).width())
        .max()
        .unwrap_or_default()
        .max(10);
    let state_width = u16::try_from(state_width).unwrap_or(u16::MAX);
    let rows = pane.shown().map(|row| {
        Row::new([
            Cell::from(short_of(row)),
            Cell::from(row.action.clone()),
            Cell::from(row.project.clone()),
            Cell::from(Span::styled(
                row.phase.label(),
                theme.style(phase_slot(row.phase)),
            )),
            Cell::from(state_cell(row, waiting, theme)),
            Cell::from(format_elapsed(row.elapsed_ms)),
            Cell::from(format_cost(row.cost_usd)),
        ])
        .style(text)
    });
    let widths = [
        Constraint::Length(u16::try_from(id_width).unwrap_or(u16::MAX)),
        Constraint::Fill(3),
        Constraint::Fill(2),
        Constraint::Length(10),
        Constraint::Length(state_width),
        Constraint::Length(8),
        Constraint::Length(7),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(theme.style(Slot::ListSelected))
        .highlight_symbol("» ")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default().with_selected(pane.shown_index());
    StatefulWidget::render(table, inner, buf, &mut state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn ids(pane: &PlansPane) -> Vec<&str> {
        pane.rows().iter().map(|r| r.plan_id.as_str()).collect()
    }

    #[test]
    fn first_update_selects_the_first_plan() {
        let mut pane = PlansPane::default();
        assert!(!pane.is_loaded());
        assert!(pane.set_rows(fixtures::plans()));
        assert_eq!(pane.selected_index(), Some(0));
        assert_eq!(ids(&pane).len(), 4);
    }

    #[test]
    fn selection_follows_the_plan_id_across_reorders() {
        let mut pane = PlansPane::default();
        pane.set_rows(fixtures::plans());
        assert!(pane.handle(Action::Down));
        let chosen = pane.selected_id().map(str::to_owned);
        let mut reordered = fixtures::plans();
        reordered.reverse();
        assert!(!pane.set_rows(reordered));
        assert_eq!(pane.selected_id().map(str::to_owned), chosen);
        assert_eq!(pane.selected_index(), Some(2));
    }

    #[test]
    fn a_vanished_selection_moves_to_the_same_position() {
        let mut pane = PlansPane::default();
        let mut plans = fixtures::plans();
        pane.set_rows(plans.clone());
        pane.handle(Action::Last);
        plans.pop();
        assert!(pane.set_rows(plans.clone()));
        assert_eq!(pane.selected_id(), Some(plans[2].plan_id.as_str()));
        assert!(pane.set_rows(Vec::new()));
        assert_eq!(pane.selected_id(), None);
    }

    #[test]
    fn the_fuzzy_filter_keeps_matches_best_first_and_moves_the_selection() {
        use crate::msg::Key;
        let mut pane = PlansPane::default();
        pane.set_rows(fixtures::plans());
        assert_eq!(pane.selected_id(), Some(fixtures::PLAN_A));
        pane.start_filter();
        for c in "fix web".chars() {
            pane.filter_key(Key::Char(c));
        }
        let shown: Vec<&str> = pane.shown().map(|r| r.action.as_str()).collect();
        assert_eq!(shown, ["fix-flaky-tests"]);
        assert_eq!(
            pane.selected_id(),
            Some(fixtures::PLAN_C),
            "moved to the match"
        );
        assert_eq!(pane.filter_key(Key::Enter), FilterOutcome::Done);
        assert!(!pane.is_editing_filter());
        // Live updates keep the filter.
        pane.set_rows(fixtures::plans());
        assert_eq!(pane.shown_len(), 1);
        pane.start_filter();
        for _ in 0..4 {
            pane.filter_key(Key::Backspace);
        }
        assert_eq!(pane.filter(), "fix");
        pane.filter_key(Key::Esc);
        pane.start_filter();
        for c in "web".chars() {
            pane.filter_key(Key::Char(c));
        }
        let shown: Vec<&str> = pane.shown().map(|r| r.project.as_str()).collect();
        assert_eq!(shown, ["webshop", "webshop"]);
        pane.filter_key(Key::Esc);
        assert_eq!(pane.filter(), "");
        assert_eq!(pane.shown_len(), 4);
    }

    /// Plans as a new user has them after a few quickstarts on real repositories.
    fn many_plans() -> Vec<PlanRow> {
        let mut rows = Vec::new();
        let actions = [
            "local/quickstart-format",
            "local/quickstart-license-header",
            "local/codemod",
            "local/reuse-strategy",
            "local/rust-clippy-fix",
        ];
        let projects = [
            "local/quickstart-fd",
            "local/quickstart-click",
            "local/express",
            "local/mypy",
        ];
        for (n, action) in actions.iter().cycle().take(17).enumerate() {
            let mut row = fixtures::plans()[n % 4].clone();
            row.plan_id = format!("01M8S{n:02}RSTQXYZ7ABCDEFGHJKMN");
            row.action = (*action).to_owned();
            row.project = projects[n % projects.len()].to_owned();
            rows.push(row);
        }
        rows
    }

    #[test]
    fn the_filter_matches_what_a_word_means_not_letters_scattered_over_every_plan() {
        let rows = many_plans();
        let actions_of = |filter: &str| -> Vec<String> {
            fuzzy_filter(&rows, filter)
                .into_iter()
                .map(|i| format!("{} {}", rows[i].action, rows[i].project))
                .collect()
        };
        let rust = actions_of("rust");
        assert_eq!(rust.len(), 3, "{rust:#?}");
        assert!(
            rust.iter().all(|a| a.starts_with("local/rust-clippy-fix")),
            "{rust:#?}"
        );
        let fd = actions_of("fd");
        assert!(
            !fd.is_empty() && fd.iter().all(|a| a.ends_with("quickstart-fd")),
            "{fd:#?}"
        );
        // Word starts still match; two words may match two fields.
        assert_eq!(
            actions_of("lic head").len(),
            4,
            "{:#?}",
            actions_of("lic head")
        );
        assert_eq!(actions_of("codemod express").len(), 1);
        // A plan id by its prefix, as printed elsewhere.
        assert_eq!(fuzzy_filter(&rows, "01m8s07"), [7]);
    }

    #[test]
    fn moving_past_the_ends_changes_nothing() {
        let mut pane = PlansPane::default();
        assert!(!pane.handle(Action::Down), "nothing to move through");
        pane.set_rows(fixtures::plans());
        assert!(!pane.handle(Action::Up));
        assert!(pane.handle(Action::Last));
        assert!(!pane.handle(Action::Down));
    }
}
