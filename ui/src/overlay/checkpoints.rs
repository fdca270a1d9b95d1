//! The checkpoint list a rollback chooses from, and the confirm it leads to.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::{Outcome, Overlay, footer, move_index, render_box};
use crate::model::{CheckpointItem, short_id};
use crate::msg::{Cmd, Key};
use crate::theme::{Slot, Theme};

/// The confirm overlay for rolling a plan back to a checkpoint.
fn rollback_confirm(plan_id: &str, cp: &CheckpointItem) -> Overlay {
    Overlay::Confirm {
        title: "Roll back?".to_owned(),
        body: format!(
            "Roll plan {} back to checkpoint #{} {} ({})?\nLater work in the sandbox is discarded \
             and its steps run again.",
            short_id(plan_id),
            cp.seq,
            cp.checkpoint_id,
            cp.label
        ),
        on_yes: Cmd::Rollback {
            plan_id: plan_id.to_owned(),
            checkpoint_id: cp.checkpoint_id.clone(),
        },
    }
}

pub(super) fn handle_key(
    plan_id: &str,
    items: &[CheckpointItem],
    selected: &mut usize,
    key: Key,
) -> Outcome {
    match key {
        Key::Esc => Outcome::Close,
        Key::Enter => match items.get(*selected) {
            Some(cp) => Outcome::Replace(Box::new(rollback_confirm(plan_id, cp))),
            None => Outcome::Close,
        },
        _ => {
            move_index(selected, items.len(), key);
            Outcome::Stay
        }
    }
}

/// The checkpoint list a rollback chooses from, scrolled to keep the selection in view.
pub(super) fn render(
    plan_id: &str,
    items: &[CheckpointItem],
    selected: usize,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let height = usize::from(area.height.saturating_sub(6)).max(1);
    let offset = selected.saturating_sub(height - 1);
    let mut lines: Vec<Line> = items
        .iter()
        .enumerate()
        .skip(offset)
        .take(height)
        .map(|(i, cp)| {
            let text = format!(
                "#{:<3} {:<5} {} · {} file(s) · {}",
                cp.seq,
                cp.label,
                cp.taken,
                cp.files_changed,
                cp.step.as_deref().unwrap_or("-"),
            );
            if i == selected {
                Line::styled(format!("» {text}"), theme.style(Slot::ListSelected))
            } else {
                Line::styled(format!("  {text}"), theme.style(Slot::Text))
            }
        })
        .collect();
    lines.push(Line::default());
    lines.push(footer(
        &[
            ("j/k", "move"),
            ("Enter", "roll back to it"),
            ("Esc", "cancel"),
        ],
        theme,
    ));
    render_box(
        &format!("Checkpoints of plan {}", short_id(plan_id)),
        lines,
        theme,
        false,
        area,
        buf,
    );
}
