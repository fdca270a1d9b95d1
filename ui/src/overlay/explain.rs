//! The explanation overlay: why a decision was taken and what depends on it.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

use super::{
    CorrectForm, Outcome, Overlay, decision_refs, first_line, footer, labelled, labelled_lines,
    render_box,
};
use crate::model::{Explanation, short_id};
use crate::msg::Key;
use crate::theme::{Slot, Theme};

fn explanation_lines<'a>(e: &Explanation, theme: &Theme) -> Vec<Line<'a>> {
    let mut lines = vec![
        labelled("Decision", e.decision_id.clone(), theme),
        labelled(
            "Question",
            e.question
                .clone()
                .unwrap_or_else(|| "(not recorded)".to_owned()),
            theme,
        ),
    ];
    let mut chosen = labelled_lines("Chosen", &e.chosen, Slot::DecisionChosen, 12, theme);
    if let Some(c) = e.confidence {
        chosen[0].spans.push(Span::styled(
            format!("  (confidence {:.0}%)", (c.clamp(0.0, 1.0) * 100.0).round()),
            theme.style(Slot::TextDim),
        ));
    }
    lines.extend(chosen);
    if e.alternatives.is_empty() {
        lines.push(labelled("Alternatives", "none recorded".to_owned(), theme));
    } else {
        lines.push(Line::styled("Alternatives:", theme.style(Slot::TextDim)));
        for alt in &e.alternatives {
            lines.push(Line::styled(
                format!("  · {}", first_line(alt)),
                theme.style(Slot::Text),
            ));
        }
    }
    lines.extend(labelled_lines(
        "Rationale",
        e.rationale.as_deref().unwrap_or("(not recorded)"),
        Slot::Text,
        6,
        theme,
    ));
    if let Some(by) = &e.superseded_by {
        lines.push(Line::styled(
            format!("Superseded by decision {by}"),
            theme.style(Slot::StatusWarn),
        ));
    }
    lines.push(Line::default());
    let impact = match (e.impact.len(), e.impact_child_plans.len()) {
        (0, 0) => "nothing downstream depends on it".to_owned(),
        (1, 0) => "1 downstream decision".to_owned(),
        (n, 0) => format!("{n} downstream decisions"),
        (n, c) => format!("{n} downstream decisions, {c} child plan(s)"),
    };
    lines.push(labelled(
        "Impact of a correction",
        format!(
            "{impact}; {} step(s) run again, {} file(s) ({})",
            e.impact_steps,
            e.impact_files.len(),
            e.impact_level
        ),
        theme,
    ));
    lines.extend(decision_refs(&e.impact, 8, theme));
    for file in e.impact_files.iter().take(5) {
        lines.push(Line::styled(
            format!("  {file}"),
            theme.style(Slot::TextDim),
        ));
    }
    if e.impact_files.len() > 5 {
        lines.push(Line::styled(
            format!("  … {} more file(s)", e.impact_files.len() - 5),
            theme.style(Slot::TextDim),
        ));
    }
    for plan in &e.impact_child_plans {
        lines.push(Line::styled(
            format!("  child plan {}", short_id(plan)),
            theme.style(Slot::DecisionChildPlan),
        ));
    }
    lines
}

pub(super) fn handle_key(explanation: &Explanation, scroll: &mut usize, key: Key) -> Outcome {
    match key {
        Key::Esc | Key::Enter | Key::Char('q') => Outcome::Close,
        Key::Char('j') | Key::Down => {
            *scroll += 1;
            Outcome::Stay
        }
        Key::Char('k') | Key::Up => {
            *scroll = scroll.saturating_sub(1);
            Outcome::Stay
        }
        Key::Char('c') => Outcome::Replace(Box::new(Overlay::Correct(Box::new(CorrectForm::new(
            explanation.decision_id.clone(),
            format!("{} → {}", explanation.decision_type, explanation.chosen),
        ))))),
        _ => Outcome::Stay,
    }
}

pub(super) fn render(
    explanation: &Explanation,
    scroll: usize,
    theme: &Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let mut lines = explanation_lines(explanation, theme);
    let skip = scroll.min(lines.len().saturating_sub(1));
    lines.drain(..skip);
    lines.push(Line::default());
    lines.push(footer(
        &[("c", "correct it"), ("j/k", "scroll"), ("Esc", "close")],
        theme,
    ));
    let title = format!("Why {}", explanation.decision_type);
    render_box(&title, lines, theme, false, area, buf);
}
