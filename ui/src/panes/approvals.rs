//! Everything waiting for a human, across all plans.

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, HighlightSpacing, Row, StatefulWidget, Table, TableState, Widget};

use super::{Pane, pane_block, render_message, step};
use crate::keymap::Action;
use crate::model::ApprovalItem;
use crate::panes::plans::PlansPane;
use crate::theme::{Slot, Theme};

/// Shown when nothing is pending.
pub const EMPTY: &str = "Nothing is waiting for you.";
/// Shown until the first list of approvals arrives.
pub const LOADING: &str = "Loading approvals…";

/// State of the approvals pane. The selection follows the approval id; when it leaves the
/// list, the same plan's next approval, else the row now in its place (the one after it, or the
/// last row). There is no selection only while the queue is empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ApprovalsPane {
    items: Option<Vec<ApprovalItem>>,
    selected: Option<String>,
    /// The plan whose approval was selected when the queue emptied: its approval is selected
    /// first when approvals arrive again.
    follow_plan: Option<String>,
}

/// How a new list moved the selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Moved {
    /// The same approval, the same plan's next one, or the first of a new queue.
    Kept,
    /// The selected approval left and its plan has no other: the selection is on another
    /// plan's approval (`from` and `to` are plan ids).
    ToAnotherPlan {
        /// The plan whose approval left.
        from: String,
        /// The plan of the approval selected now.
        to: String,
    },
}

impl ApprovalsPane {
    /// The pending approvals (empty until loaded).
    pub fn items(&self) -> &[ApprovalItem] {
        self.items.as_deref().unwrap_or_default()
    }

    /// Whether a list of approvals has arrived yet.
    pub fn is_loaded(&self) -> bool {
        self.items.is_some()
    }

    /// The selected approval.
    pub fn selected(&self) -> Option<&ApprovalItem> {
        let id = self.selected.as_deref()?;
        self.items().iter().find(|item| item.approval_id == id)
    }

    fn selected_index(&self) -> Option<usize> {
        let id = self.selected.as_deref()?;
        self.items().iter().position(|item| item.approval_id == id)
    }

    /// Replaces the list. The selection stays on the same approval while it is pending, else
    /// moves to the same plan's next approval, else to the row now at its position (clamped
    /// to the last row): answering one approval leaves the cursor on the next, as in any list.
    /// Every answer key asks first, naming the plan, so a cursor on another plan's approval
    /// cannot answer it unseen; the result says when the cursor moved to another plan.
    pub(crate) fn set_items(&mut self, items: Vec<ApprovalItem>) -> Moved {
        let old = self
            .selected_index()
            .map(|at| (at, self.items()[at].plan_id.clone()));
        self.items = Some(items);
        if self.selected_index().is_some() {
            return Moved::Kept;
        }
        self.selected = None;
        if self.items().is_empty() {
            if let Some((_, plan)) = old {
                self.follow_plan = Some(plan);
            }
            return Moved::Kept;
        }
        let Some((at, plan)) = old else {
            // A queue after none: the plan selected last, else the first row.
            let first = self.items()[0].approval_id.clone();
            if !self
                .follow_plan
                .take()
                .is_some_and(|p| self.select_plan(&p))
            {
                self.selected = Some(first);
            }
            return Moved::Kept;
        };
        if self.select_plan(&plan) {
            return Moved::Kept;
        }
        let item = &self.items()[at.min(self.items().len() - 1)];
        let to = item.plan_id.clone();
        self.selected = Some(item.approval_id.clone());
        Moved::ToAnotherPlan { from: plan, to }
    }

    /// Selects the first pending approval of `plan_id`; returns whether there was one.
    pub(crate) fn select_plan(&mut self, plan_id: &str) -> bool {
        let Some(item) = self.items().iter().find(|item| item.plan_id == plan_id) else {
            return false;
        };
        self.selected = Some(item.approval_id.clone());
        self.follow_plan = None;
        true
    }

    /// Whether an approval is still pending.
    pub fn contains(&self, approval_id: &str) -> bool {
        self.items()
            .iter()
            .any(|item| item.approval_id == approval_id)
    }

    /// Selects the approval drawn on `row` of a table showing `height` rows (a mouse click).
    pub(crate) fn select_row(&mut self, row: usize, height: usize) {
        let offset = self
            .selected_index()
            .unwrap_or(0)
            .saturating_sub(height.max(1) - 1);
        if let Some(item) = self.items().get(offset + row) {
            self.selected = Some(item.approval_id.clone());
            self.follow_plan = None;
        }
    }

    /// Moves the selection.
    pub(crate) fn handle(&mut self, action: Action) {
        if let Some(index) = step(self.selected_index(), self.items().len(), action) {
            self.selected = Some(self.items()[index].approval_id.clone());
            self.follow_plan = None;
        }
    }
}

pub(crate) fn render(
    pane: &ApprovalsPane,
    plans: &PlansPane,
    theme: &Theme,
    focused: bool,
    area: Rect,
    buf: &mut Buffer,
) {
    let detail = pane
        .is_loaded()
        .then(|| format!("{} pending", pane.items().len()));
    let block = pane_block(Pane::Approvals, detail, theme, focused);
    let inner = block.inner(area);
    block.render(area, buf);
    if pane.items().is_empty() {
        let text = if pane.is_loaded() { EMPTY } else { LOADING };
        render_message(text, theme, inner, buf);
        return;
    }

    let header = Row::new(["kind", "plan", "question"]).style(theme.style(Slot::ListHeader));
    let shorts: Vec<String> = pane
        .items()
        .iter()
        .map(|i| plans.short(&i.plan_id))
        .collect();
    let id_width = shorts.iter().map(String::len).max().unwrap_or(8);
    let rows = pane.items().iter().zip(shorts).map(|(item, short)| {
        let mut question = vec![Span::styled(item.summary.clone(), theme.style(Slot::Text))];
        if !item.options.is_empty() {
            question.push(Span::styled(
                format!("  [{}]", item.options.join(" | ")),
                theme.style(Slot::TextDim),
            ));
        }
        Row::new([
            Cell::from(Span::styled(
                item.kind.label(),
                theme.style(Slot::ApprovalKind),
            )),
            Cell::from(short),
            Cell::from(Line::from(question)),
        ])
        .style(theme.style(Slot::Text))
    });
    let widths = [
        Constraint::Length(17),
        Constraint::Length(u16::try_from(id_width).unwrap_or(u16::MAX)),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .header(header)
        .column_spacing(1)
        .row_highlight_style(theme.style(Slot::ListSelected))
        .highlight_symbol("» ")
        .highlight_spacing(HighlightSpacing::Always);
    let mut state = TableState::default().with_selected(pane.selected_index());
    StatefulWidget::render(table, inner, buf, &mut state);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn selection_follows_the_approval_then_its_plan_then_the_row_in_its_place() {
        let id = |pane: &ApprovalsPane| pane.selected().map(|a| a.approval_id.clone());
        let mut pane = ApprovalsPane::default();
        let mut items = fixtures::approvals();
        pane.set_items(items.clone());
        assert_eq!(id(&pane).as_deref(), Some("A1"));
        pane.handle(Action::Down);
        assert_eq!(id(&pane).as_deref(), Some("A2"));
        // Plan B's next approval is pending too: the cursor goes to it, wherever it is.
        let mut b_next = items[1].clone();
        b_next.approval_id = "A4".into();
        items.push(b_next);
        let a2 = items.remove(1);
        pane.set_items(items.clone());
        assert_eq!(id(&pane).as_deref(), Some("A4"));
        pane.handle(Action::Up);
        assert_eq!(id(&pane).as_deref(), Some("A3"));
        // Nothing else of plan C: the row now in its place (plan B's), not none, not the top.
        items.retain(|a| a.approval_id != "A3");
        pane.set_items(items.clone());
        assert_eq!(id(&pane).as_deref(), Some("A4"));
        // The last row leaves: the row above.
        items.pop();
        pane.set_items(items.clone());
        assert_eq!(id(&pane).as_deref(), Some("A1"));
        assert!(!pane.contains("A2"));
        // An empty queue selects nothing; the plan last selected is preferred when they arrive.
        pane.set_items(Vec::new());
        assert_eq!(pane.selected(), None);
        assert!(pane.is_loaded());
        let mut a_next = fixtures::approvals()[0].clone();
        a_next.approval_id = "A5".into();
        pane.set_items(vec![a2.clone(), a_next]);
        assert_eq!(
            id(&pane).as_deref(),
            Some("A5"),
            "plan A's, the plan last selected"
        );
        pane.set_items(Vec::new());
        pane.handle(Action::Down);
        pane.set_items(vec![a2]);
        assert_eq!(id(&pane).as_deref(), Some("A2"), "else the first");
    }
}
