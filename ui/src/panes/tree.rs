//! The decision tree of the selected plan.
//!
//! Navigation state (selected path, collapsed nodes) lives here, so key handling stays pure.
//! The visible nodes are kept flattened (rebuilt when the tree, the selection or what is open
//! changes), and a frame draws only the rows on screen: a 10,000-decision tree costs what a
//! small one does (tui-tree-widget rebuilt and flattened the whole tree every frame).

use std::collections::BTreeSet;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::{Pane, pane_block, render_message, step};
use crate::keymap::Action;
use crate::model::{DecisionNode, short_id};
use crate::theme::{Slot, Theme};

/// Shown while no plan is selected.
pub const NO_PLAN: &str = "Select a plan to see its decisions.";
/// Shown until the selected plan's tree arrives.
pub const LOADING: &str = "Loading decisions…";
/// Shown when the plan has recorded no decisions.
pub const EMPTY: &str = "No decisions recorded for this plan yet.";
/// Shown when every decision is superseded and those are hidden.
pub const ALL_HIDDEN: &str = "Every decision here is superseded — press s to show them.";

/// State of the decision tree pane.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TreePane {
    plan_id: Option<String>,
    nodes: Option<Vec<DecisionNode>>,
    selected: Vec<String>,
    closed: BTreeSet<Vec<String>>,
    show_superseded: bool,
    /// The visible nodes in display order, rebuilt when the tree, the selection or what is
    /// open changes, so a frame draws only the rows on screen whatever the tree's size.
    flat: Vec<FlatRow>,
    /// The selected row of `flat`.
    flat_selected: Option<usize>,
}

/// A visible node: where it is (child indices from the root list) and how it is drawn.
#[derive(Clone, Debug, PartialEq)]
struct FlatRow {
    index_path: Vec<u32>,
    has_children: bool,
    open: bool,
}

/// A node as currently visible: its path of decision ids from the root, and its depth.
#[derive(Clone, Debug, PartialEq)]
pub struct VisibleNode<'a> {
    /// Decision ids from the root down to this node.
    pub path: Vec<String>,
    /// The node.
    pub node: &'a DecisionNode,
}

impl TreePane {
    /// The plan whose tree is shown (or awaited).
    pub fn plan_id(&self) -> Option<&str> {
        self.plan_id.as_deref()
    }

    /// The root decisions, once loaded.
    pub fn nodes(&self) -> Option<&[DecisionNode]> {
        self.nodes.as_deref()
    }

    /// The path of the selected node (empty when nothing is selected).
    pub fn selected_path(&self) -> &[String] {
        &self.selected
    }

    /// Whether superseded decisions are shown.
    pub fn shows_superseded(&self) -> bool {
        self.show_superseded
    }

    /// The nodes a user can currently see, in display order.
    pub fn visible(&self) -> Vec<VisibleNode<'_>> {
        self.flat
            .iter()
            .map(|row| VisibleNode {
                path: self.id_path(&row.index_path),
                node: self.node_at(&row.index_path),
            })
            .collect()
    }

    fn node_at(&self, index_path: &[u32]) -> &DecisionNode {
        let mut nodes = self.nodes().unwrap_or_default();
        let mut node = &nodes[index_path[0] as usize];
        for i in &index_path[1..] {
            nodes = &node.children;
            node = &nodes[*i as usize];
        }
        node
    }

    fn id_path(&self, index_path: &[u32]) -> Vec<String> {
        let mut nodes = self.nodes().unwrap_or_default();
        let mut out = Vec::with_capacity(index_path.len());
        for i in index_path {
            let node = &nodes[*i as usize];
            out.push(node.decision_id.clone());
            nodes = &node.children;
        }
        out
    }

    fn has_visible_children(&self, node: &DecisionNode) -> bool {
        node.children
            .iter()
            .any(|c| self.show_superseded || !c.superseded)
    }

    /// Rebuilds the flattened visible rows and finds the selected one.
    fn reflat(&mut self) {
        fn walk<'a>(
            pane: &TreePane,
            nodes: &'a [DecisionNode],
            ids: &mut Vec<&'a str>,
            index: &mut Vec<u32>,
            rows: &mut Vec<FlatRow>,
            selected: &mut Option<usize>,
        ) {
            for (i, node) in nodes.iter().enumerate() {
                if node.superseded && !pane.show_superseded {
                    continue;
                }
                ids.push(&node.decision_id);
                index.push(u32::try_from(i).unwrap_or(u32::MAX));
                let has_children = pane.has_visible_children(node);
                let closed = pane
                    .closed
                    .iter()
                    .any(|c| c.iter().map(String::as_str).eq(ids.iter().copied()));
                if pane
                    .selected
                    .iter()
                    .map(String::as_str)
                    .eq(ids.iter().copied())
                {
                    *selected = Some(rows.len());
                }
                rows.push(FlatRow {
                    index_path: index.clone(),
                    has_children,
                    open: has_children && !closed,
                });
                if has_children && !closed {
                    walk(pane, &node.children, ids, index, rows, selected);
                }
                ids.pop();
                index.pop();
            }
        }
        let mut rows = Vec::new();
        let mut selected = None;
        walk(
            self,
            self.nodes().unwrap_or_default(),
            &mut Vec::new(),
            &mut Vec::new(),
            &mut rows,
            &mut selected,
        );
        self.flat = rows;
        self.flat_selected = selected;
    }

    /// Starts showing another plan (or none): forgets the old tree and its navigation.
    pub(crate) fn reset(&mut self, plan_id: Option<String>) {
        *self = Self {
            plan_id,
            show_superseded: self.show_superseded,
            ..Self::default()
        };
    }

    /// Takes a tree from the engine; ignored unless it belongs to the shown plan.
    pub(crate) fn set_nodes(&mut self, plan_id: &str, nodes: Vec<DecisionNode>) -> bool {
        if self.plan_id.as_deref() != Some(plan_id) {
            return false;
        }
        self.nodes = Some(nodes);
        self.fix_selection();
        true
    }

    fn fix_selection(&mut self) {
        self.reflat();
        if self.flat_selected.is_none() {
            self.selected = self
                .flat
                .first()
                .map(|row| self.id_path(&row.index_path))
                .unwrap_or_default();
            self.reflat();
        }
    }

    fn select_flat(&mut self, index: usize) {
        if let Some(row) = self.flat.get(index) {
            self.selected = self.id_path(&row.index_path);
            self.flat_selected = Some(index);
        }
    }

    /// The selected node, if it is visible.
    pub fn selected_node(&self) -> Option<&DecisionNode> {
        let row = self.flat.get(self.flat_selected?)?;
        Some(self.node_at(&row.index_path))
    }

    /// The first row drawn in a pane showing `height` rows: the selection stays on screen,
    /// on the last row when it is further down.
    fn offset(&self, height: usize) -> usize {
        self.flat_selected
            .unwrap_or(0)
            .saturating_sub(height.max(1) - 1)
    }

    /// Selects the node drawn on `row` of a pane showing `height` rows (a mouse click).
    pub(crate) fn select_row(&mut self, row: usize, height: usize) {
        let index = self.offset(height) + row;
        self.select_flat(index);
    }

    /// Handles a tree action; returns the decision id to explain for [`Action::Explain`].
    pub(crate) fn handle(&mut self, action: Action) -> Option<String> {
        match action {
            Action::Up | Action::Down | Action::First | Action::Last => {
                if let Some(index) = step(self.flat_selected, self.flat.len(), action) {
                    self.select_flat(index);
                }
                None
            }
            Action::Collapse => {
                let row = self.flat.get(self.flat_selected?)?;
                if row.has_children && row.open {
                    self.closed.insert(self.selected.clone());
                } else if self.selected.len() > 1 {
                    self.selected.pop();
                }
                self.reflat();
                None
            }
            Action::Expand => {
                self.closed.remove(&self.selected);
                self.reflat();
                None
            }
            Action::ToggleSuperseded => {
                self.show_superseded = !self.show_superseded;
                self.fix_selection();
                None
            }
            Action::Explain => self.selected.last().cloned(),
            _ => None,
        }
    }
}

fn node_line<'a>(node: &DecisionNode, theme: &Theme) -> Vec<Span<'a>> {
    let mut spans = vec![
        Span::styled(node.decision_type.clone(), theme.style(Slot::DecisionType)),
        Span::styled(": ", theme.style(Slot::TextDim)),
        Span::styled(node.summary.clone(), theme.style(Slot::Text)),
        Span::styled(" → ", theme.style(Slot::TextDim)),
        Span::styled(node.chosen.clone(), theme.style(Slot::DecisionChosen)),
    ];
    if let Some(confidence) = node.confidence {
        let percent = (confidence.clamp(0.0, 1.0) * 100.0).round();
        spans.push(Span::styled(
            format!(" ({percent:.0}%)"),
            theme.style(Slot::TextDim),
        ));
    }
    if let Some(child) = &node.child_plan_id {
        spans.push(Span::styled(" ⇢ ", theme.style(Slot::TextDim)));
        spans.push(Span::styled(
            format!("plan {}", short_id(child)),
            theme.style(Slot::DecisionChildPlan),
        ));
    }
    if node.superseded {
        // Marked in text as well as style, so it survives truncation and NO_COLOR.
        for span in &mut spans {
            span.style = theme.style(Slot::DecisionSuperseded);
        }
        spans.insert(
            0,
            Span::styled("[superseded] ", theme.style(Slot::DecisionSuperseded)),
        );
    }
    spans
}

pub(crate) fn render(pane: &TreePane, theme: &Theme, focused: bool, area: Rect, buf: &mut Buffer) {
    let detail = pane.plan_id().map(|id| {
        let mut detail = format!("plan {}", short_id(id));
        if pane.show_superseded {
            detail.push_str(" · with superseded");
        }
        detail
    });
    let block = pane_block(Pane::Tree, detail, theme, focused);
    let inner = block.inner(area);
    block.render(area, buf);

    match (pane.plan_id(), pane.nodes()) {
        (None, _) => return render_message(NO_PLAN, theme, inner, buf),
        (Some(_), None) => return render_message(LOADING, theme, inner, buf),
        (Some(_), Some([])) => return render_message(EMPTY, theme, inner, buf),
        (Some(_), Some(_)) if pane.flat.is_empty() => {
            return render_message(ALL_HIDDEN, theme, inner, buf);
        }
        (Some(_), Some(_)) => {}
    }
    // Only the rows on screen are built: `» ` marks the selection, two spaces per level,
    // `▼`/`▶` an open/closed node with children.
    let height = usize::from(inner.height);
    let offset = pane.offset(height);
    for (i, (y, row)) in (inner.y..inner.bottom())
        .zip(pane.flat.iter().skip(offset))
        .enumerate()
    {
        let selected = pane.flat_selected == Some(offset + i);
        let depth = row.index_path.len() - 1;
        let symbol = match (row.has_children, row.open) {
            (false, _) => "  ",
            (true, true) => "▼ ",
            (true, false) => "▶ ",
        };
        let mut spans = vec![Span::raw(if selected { "» " } else { "  " })];
        spans.push(Span::raw(format!("{}{symbol}", "  ".repeat(depth))));
        spans.extend(node_line(pane.node_at(&row.index_path), theme));
        buf.set_line(inner.x, y, &Line::from(spans), inner.width);
        if selected {
            buf.set_style(
                Rect::new(inner.x, y, inner.width, 1),
                theme.style(Slot::ListSelected),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    fn loaded() -> TreePane {
        let mut pane = TreePane::default();
        pane.reset(Some(fixtures::PLAN_A.to_owned()));
        assert!(pane.set_nodes(fixtures::PLAN_A, fixtures::decisions()));
        pane
    }

    fn visible_ids(pane: &TreePane) -> Vec<String> {
        pane.visible().iter().map(|v| v.path.join("/")).collect()
    }

    #[test]
    fn trees_for_other_plans_are_dropped() {
        let mut pane = TreePane::default();
        pane.reset(Some(fixtures::PLAN_A.to_owned()));
        assert!(!pane.set_nodes(fixtures::PLAN_B, fixtures::decisions()));
        assert_eq!(pane.nodes(), None);
    }

    #[test]
    fn superseded_decisions_are_hidden_until_toggled() {
        let mut pane = loaded();
        assert_eq!(
            visible_ids(&pane),
            ["D1", "D1/D2", "D1/D3", "D1/D3/D5", "D6"]
        );
        pane.handle(Action::ToggleSuperseded);
        assert_eq!(
            visible_ids(&pane),
            ["D1", "D1/D2", "D1/D3", "D1/D3/D5", "D1/D4", "D6"],
        );
    }

    #[test]
    fn navigation_collapse_and_expand() {
        let mut pane = loaded();
        assert_eq!(pane.selected_path(), ["D1"]);
        pane.handle(Action::Down);
        pane.handle(Action::Down);
        assert_eq!(pane.selected_path(), ["D1", "D3"]);
        pane.handle(Action::Collapse);
        assert_eq!(visible_ids(&pane), ["D1", "D1/D2", "D1/D3", "D6"]);
        pane.handle(Action::Collapse);
        assert_eq!(
            pane.selected_path(),
            ["D1"],
            "second collapse goes to the parent"
        );
        pane.handle(Action::Collapse);
        assert_eq!(visible_ids(&pane), ["D1", "D6"]);
        pane.handle(Action::Expand);
        assert_eq!(visible_ids(&pane), ["D1", "D1/D2", "D1/D3", "D6"]);
        pane.handle(Action::Last);
        assert_eq!(pane.handle(Action::Explain), Some("D6".to_owned()));
    }

    #[test]
    fn hiding_the_selected_node_moves_the_selection() {
        let mut pane = loaded();
        pane.handle(Action::ToggleSuperseded);
        for _ in 0..4 {
            pane.handle(Action::Down);
        }
        assert_eq!(pane.selected_path(), ["D1", "D4"]);
        pane.handle(Action::ToggleSuperseded);
        assert_eq!(pane.selected_path(), ["D1"]);
    }

    #[test]
    fn reset_keeps_the_superseded_preference_only() {
        let mut pane = loaded();
        pane.handle(Action::ToggleSuperseded);
        pane.handle(Action::Down);
        pane.reset(Some(fixtures::PLAN_B.to_owned()));
        assert!(pane.shows_superseded());
        assert_eq!(pane.nodes(), None);
        assert!(pane.selected_path().is_empty());
    }
}
