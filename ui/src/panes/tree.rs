//! The decision tree of the selected plan.
//!
//! Navigation state (selected path, collapsed nodes) lives here, so key handling stays pure;
//! `tui-tree-widget` only draws, from a `TreeState` rebuilt on every frame.

use std::collections::BTreeSet;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{StatefulWidget, Widget};
use tui_tree_widget::{Tree, TreeItem, TreeState};

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
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.walk(self.nodes().unwrap_or_default(), &mut path, &mut out);
        out
    }

    fn walk<'a>(
        &self,
        nodes: &'a [DecisionNode],
        path: &mut Vec<String>,
        out: &mut Vec<VisibleNode<'a>>,
    ) {
        for node in nodes
            .iter()
            .filter(|n| self.show_superseded || !n.superseded)
        {
            path.push(node.decision_id.clone());
            out.push(VisibleNode {
                path: path.clone(),
                node,
            });
            if !self.closed.contains(path) {
                self.walk(&node.children, path, out);
            }
            path.pop();
        }
    }

    fn has_visible_children(&self, node: &DecisionNode) -> bool {
        node.children
            .iter()
            .any(|c| self.show_superseded || !c.superseded)
    }

    /// The selected node, if it is visible.
    pub fn selected_node(&self) -> Option<&DecisionNode> {
        self.visible()
            .into_iter()
            .find(|v| v.path == self.selected)
            .map(|v| v.node)
    }

    /// Selects the node drawn on `row` of a pane showing `height` rows (a mouse click); the
    /// tree scrolls like the widget does, keeping the selection on the last visible row.
    pub(crate) fn select_row(&mut self, row: usize, height: usize) {
        let visible = self.visible();
        let current = visible
            .iter()
            .position(|v| v.path == self.selected)
            .unwrap_or(0);
        let offset = current.saturating_sub(height.max(1) - 1);
        if let Some(v) = visible.get(offset + row) {
            self.selected = v.path.clone();
        }
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
        let visible = self.visible();
        if !visible.iter().any(|v| v.path == self.selected) {
            self.selected = visible.first().map(|v| v.path.clone()).unwrap_or_default();
        }
    }

    /// Handles a tree action; returns the decision id to explain for [`Action::Explain`].
    pub(crate) fn handle(&mut self, action: Action) -> Option<String> {
        match action {
            Action::Up | Action::Down | Action::First | Action::Last => {
                let visible = self.visible();
                let current = visible.iter().position(|v| v.path == self.selected);
                if let Some(index) = step(current, visible.len(), action) {
                    self.selected = visible[index].path.clone();
                }
                None
            }
            Action::Collapse => {
                let visible = self.visible();
                let current = visible.iter().find(|v| v.path == self.selected)?;
                if self.has_visible_children(current.node) && !self.closed.contains(&current.path) {
                    self.closed.insert(current.path.clone());
                } else if self.selected.len() > 1 {
                    self.selected.pop();
                }
                None
            }
            Action::Expand => {
                self.closed.remove(&self.selected);
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

fn node_line<'a>(node: &DecisionNode, theme: &Theme) -> Line<'a> {
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
    Line::from(spans)
}

fn items<'a>(
    pane: &TreePane,
    nodes: &[DecisionNode],
    theme: &Theme,
) -> std::io::Result<Vec<TreeItem<'a, String>>> {
    nodes
        .iter()
        .filter(|n| pane.show_superseded || !n.superseded)
        .map(|node| {
            TreeItem::new(
                node.decision_id.clone(),
                node_line(node, theme),
                items(pane, &node.children, theme)?,
            )
        })
        .collect()
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

    let nodes = match (pane.plan_id(), pane.nodes()) {
        (None, _) => return render_message(NO_PLAN, theme, inner, buf),
        (Some(_), None) => return render_message(LOADING, theme, inner, buf),
        (Some(_), Some([])) => return render_message(EMPTY, theme, inner, buf),
        (Some(_), Some(nodes)) => nodes,
    };
    let built = items(pane, nodes, theme);
    let items = match built {
        Ok(items) if items.is_empty() => return render_message(ALL_HIDDEN, theme, inner, buf),
        Ok(items) => items,
        Err(_) => return duplicate_ids(theme, inner, buf),
    };
    let Ok(tree) = Tree::new(&items) else {
        return duplicate_ids(theme, inner, buf);
    };
    let tree = tree
        .highlight_style(theme.style(Slot::ListSelected))
        .highlight_symbol("» ");
    let mut state = TreeState::default();
    let mut stack: Vec<(Vec<String>, &DecisionNode)> = nodes
        .iter()
        .map(|n| (vec![n.decision_id.clone()], n))
        .collect();
    while let Some((path, node)) = stack.pop() {
        if !node.children.is_empty() && !pane.closed.contains(&path) {
            for child in &node.children {
                let mut child_path = path.clone();
                child_path.push(child.decision_id.clone());
                stack.push((child_path, child));
            }
            state.open(path);
        }
    }
    if !pane.selected.is_empty() {
        state.select(pane.selected.clone());
    }
    StatefulWidget::render(tree, inner, buf, &mut state);
}

fn duplicate_ids(theme: &Theme, area: Rect, buf: &mut Buffer) {
    render_message(
        "Cannot draw this tree: two sibling decisions share an id. This is an engine bug; \
         please report it.",
        theme,
        area,
        buf,
    );
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
