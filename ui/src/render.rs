//! Pure rendering: the whole screen from an [`App`] and a [`Theme`].

use ratatui::buffer::Buffer;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph, Widget};

use crate::app::{App, Level};
pub use crate::app::{layout, pane_areas};
use crate::keymap::{Action, Scope};
use crate::overlay;
use crate::panes::{self, Pane};
use crate::theme::{Slot, Theme};

/// Below this size the panes cannot be drawn usefully.
pub const MIN_WIDTH: u16 = 40;
/// Below this size the panes cannot be drawn usefully.
pub const MIN_HEIGHT: u16 = 12;

/// Draws the whole UI into `buf` within `area`. Reads nothing but its arguments.
pub fn render(app: &App, theme: &Theme, area: Rect, buf: &mut Buffer) {
    // Start from blank cells so the result never depends on what the buffer held before.
    Clear.render(area, buf);
    buf.set_style(area, theme.style(Slot::Text));
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = format!(
            "Terminal too small ({}x{}); CleverAgents needs at least {MIN_WIDTH}x{MIN_HEIGHT}.",
            area.width, area.height
        );
        panes::render_message(&text, theme, area, buf);
        return;
    }
    let [main, status] = Layout::vertical([Constraint::Fill(1), Constraint::Length(1)]).areas(area);
    if app.is_zoomed() {
        render_pane(app, theme, app.focus(), main, buf);
    } else {
        let (panes, live) = layout(app, main);
        for (pane, rect) in panes {
            render_pane(app, theme, pane, rect, buf);
        }
        if let Some(rect) = live {
            let running = !app.running().is_empty();
            panes::live::render(app.live(), running, theme, rect, buf);
        }
    }
    render_status(app, theme, status, buf);
    for overlay in app.overlays() {
        overlay::render(overlay, app.keymap(), theme, main, buf);
    }
}

fn render_pane(app: &App, theme: &Theme, pane: Pane, area: Rect, buf: &mut Buffer) {
    let focused = app.focus() == pane;
    match pane {
        Pane::Plans => {
            let waiting: Vec<&str> = app
                .approvals()
                .items()
                .iter()
                .map(|a| a.plan_id.as_str())
                .collect();
            panes::plans::render(app.plans(), &waiting, theme, focused, area, buf);
        }
        Pane::Tree => panes::tree::render(app.tree(), theme, focused, area, buf),
        Pane::Diff => {
            let banner = app
                .apply_review()
                .map(|id| format!("REVIEW BEFORE APPLY {}", app.plans().short(id)));
            panes::diff::render_titled(app.diff(), theme, focused, banner, area, buf);
        }
        Pane::Approvals => {
            panes::approvals::render(app.approvals(), app.plans(), theme, focused, area, buf);
        }
    }
}

/// The right end of the status bar: what runs here, the last error, the zoom.
fn status_right<'a>(app: &App, theme: &Theme) -> Vec<Span<'a>> {
    let mut spans = Vec::new();
    let processing = app
        .plans()
        .rows()
        .iter()
        .filter(|r| r.state == crate::model::ProcessingState::Processing)
        .count();
    match app.running() {
        // Engine activity elsewhere (other terminals, other TUIs) when this one runs nothing.
        [] if processing > 0 => spans.push(Span::styled(
            format!(" ● {processing} processing "),
            theme.style(Slot::StateProcessing),
        )),
        [] => {}
        [one] => spans.push(Span::styled(
            format!(" ● {one} "),
            theme.style(Slot::StateProcessing),
        )),
        many => spans.push(Span::styled(
            format!(" ● {} running ", many.len()),
            theme.style(Slot::StateProcessing),
        )),
    }
    if let Some(error) = app.last_error() {
        let mut text: String = error.chars().take(40).collect();
        if text.len() < error.len() {
            text.push('…');
        }
        // The whole message (and the ones before it) is one key away; the key comes first so
        // that a cut still shows it.
        let key = app.keymap().key_for(Action::ShowErrors);
        spans.push(Span::styled(
            format!(" ✗ [{key}] {text} "),
            theme.style(Slot::StatusError),
        ));
    }
    if app.is_zoomed() {
        spans.push(Span::styled(
            format!(" zoom: {} ", app.focus().title()),
            theme.style(Slot::StatusKey),
        ));
    }
    spans
}

fn render_status(app: &App, theme: &Theme, area: Rect, buf: &mut Buffer) {
    let bar = theme.style(Slot::StatusBar);
    buf.set_style(area, bar);
    let right = Line::from(status_right(app, theme));
    // The left part (hints or the notice) keeps at least half the bar.
    let right_width = u16::try_from(right.width())
        .unwrap_or(u16::MAX)
        .min(area.width / 2);
    let [left, right_area] =
        Layout::horizontal([Constraint::Fill(1), Constraint::Length(right_width)]).areas(area);
    let keymap = app.keymap();
    let hint = |spans: &mut Vec<Span<'_>>, key: String, what: &str| {
        spans.push(Span::styled(key, theme.style(Slot::StatusKey)));
        spans.push(Span::styled(format!(" {what}  "), bar));
    };
    let line = if let Some(notice) = app.notice() {
        let slot = match notice.level {
            Level::Ok => Slot::StatusOk,
            Level::Warn => Slot::StatusWarn,
            Level::Error => Slot::StatusError,
        };
        Line::from(vec![
            Span::raw(" "),
            Span::styled(notice.text.clone(), theme.style(slot)),
        ])
    } else if app.plans().is_editing_filter() {
        let mut spans = vec![Span::raw(" ")];
        hint(&mut spans, "type".to_owned(), "to filter");
        hint(&mut spans, "Enter".to_owned(), "keep");
        hint(&mut spans, "Esc".to_owned(), "clear");
        Line::from(spans)
    } else if app.apply_review().is_some() {
        let mut spans = vec![Span::raw(" ")];
        hint(&mut spans, "A/Enter".to_owned(), "apply…");
        hint(&mut spans, "Esc".to_owned(), "back");
        hint(&mut spans, keymap.key_for(Action::AcceptHunk), "accept");
        hint(&mut spans, keymap.key_for(Action::RejectHunk), "reject");
        hint(
            &mut spans,
            keymap.key_for(Action::AcceptFile),
            "accept file",
        );
        hint(
            &mut spans,
            format!(
                "{}/{}",
                keymap.key_for(Action::NextHunk),
                keymap.key_for(Action::PrevHunk)
            ),
            "hunks",
        );
        hint(
            &mut spans,
            keymap.key_for(Action::ToggleDiffView),
            "side by side",
        );
        Line::from(spans)
    } else {
        // Help first: when the line is cut, the way to every other key is still visible.
        let mut spans = vec![Span::raw(" ")];
        hint(&mut spans, keymap.key_for(Action::Help), "help");
        for binding in keymap.bindings_for(Scope::Pane(app.focus())) {
            if let Some(key) = binding.keys.first() {
                hint(&mut spans, key.label(), binding.help);
            }
        }
        for action in [Action::FocusNext, Action::ToggleZoom, Action::Quit] {
            if let Some(b) = keymap.binding(action) {
                hint(&mut spans, keymap.key_for(action), b.help);
            }
        }
        Line::from(spans)
    };
    Paragraph::new(line).style(bar).render(left, buf);
    Paragraph::new(right).style(bar).render(right_area, buf);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;
    use crate::msg::{Key, Msg};

    fn draw(app: &App, theme: &Theme, width: u16, height: u16) -> Buffer {
        let area = Rect::new(0, 0, width, height);
        let mut buf = Buffer::empty(area);
        render(app, theme, area, &mut buf);
        buf
    }

    /// The buffer's text, one line per row, trailing spaces kept visible with a `│` fence.
    fn text(buf: &Buffer) -> String {
        let mut out = String::new();
        for y in 0..buf.area.height {
            let mut line = String::new();
            let mut skip = 0;
            for x in 0..buf.area.width {
                let cell = &buf[(x, y)];
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                line.push_str(cell.symbol());
                skip = unicode_width(cell.symbol()).saturating_sub(1);
            }
            out.push_str(&line);
            out.push('\n');
        }
        out
    }

    fn unicode_width(s: &str) -> usize {
        Line::raw(s.to_owned()).width()
    }

    fn snapshot(name: &str, app: &App, theme: &Theme, width: u16, height: u16) {
        let buf = draw(app, theme, width, height);
        // Times are masked (same width, so columns stay aligned); ids are the fixtures' fixed
        // values, and a full ULID never fits a column, so none is left to mask.
        insta::with_settings!({
            snapshot_path => "../../snapshots/ui",
            prepend_module_to_snapshot => false,
            omit_expression => true,
            filters => vec![
                (r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", "YYYY-MM-DD hh:mm:ss"),
                (r"\b\d{2}:\d{2}:\d{2}\b", "hh:mm:ss"),
                (r"\b01[0-9A-HJKMNP-TV-Z]{24}\b", "[ULID]"),
            ],
        }, {
            insta::assert_snapshot!(format!("{name}_{width}x{height}"), text(&buf));
        });
    }

    fn loaded() -> App {
        let mut app = App::new();
        for msg in fixtures::load_all() {
            app.update(msg);
        }
        app
    }

    fn press(app: &mut App, keys: &[Key]) {
        for key in keys {
            app.update(Msg::Key(*key));
        }
    }

    const SIZES: [(u16, u16); 2] = [(80, 24), (120, 40)];

    #[test]
    fn snapshot_before_any_data() {
        for (w, h) in SIZES {
            snapshot("loading", &App::new(), &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_no_plans() {
        let mut app = App::new();
        app.update(Msg::PlansUpdated(Vec::new()));
        app.update(Msg::ApprovalsUpdated(Vec::new()));
        for (w, h) in SIZES {
            snapshot("empty", &app, &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_loaded() {
        let app = loaded();
        for (w, h) in SIZES {
            snapshot("loaded", &app, &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_a_plan_whose_gate_was_rejected_is_not_shown_complete() {
        // PLAN_D rests at execute/complete after its apply gate was rejected; nothing waits.
        let mut plans = fixtures::plans();
        plans[3].phase = crate::model::Phase::Execute;
        plans[3].gate_rejected = true;
        let mut app = loaded();
        app.update(Msg::PlansUpdated(plans));
        for (w, h) in SIZES {
            snapshot("plans_gate_rejected", &app, &Theme::default(), w, h);
        }
        let row = text(&draw(&app, &Theme::default(), 80, 24))
            .lines()
            .find(|l| l.contains("bump-deps"))
            .map(str::to_owned)
            .unwrap_or_default();
        assert!(
            row.contains("execute") && row.contains("gate rejected") && !row.contains("complete"),
            "{row}"
        );
    }

    #[test]
    fn snapshot_live_area_while_a_plan_runs() {
        use crate::model::LiveUpdate;
        let mut app = loaded();
        app.update(Msg::Activity(vec!["plan execute 01ARZ3ND".into()]));
        let plan = fixtures::PLAN_A.to_owned();
        let updates = [
            LiveUpdate::Turn {
                actor: "openai/gpt-4o".into(),
                turn: 1,
            },
            LiveUpdate::Text {
                text: "I will read the session module ".into(),
            },
            LiveUpdate::Text {
                text: "first.\nThen run the tests.".into(),
            },
            LiveUpdate::ToolStarted {
                name: "file_read".into(),
                arguments: "{\"path\": \"src/auth/session.rs\"}".into(),
            },
            LiveUpdate::ToolFinished {
                name: "file_read".into(),
                is_error: false,
                duration_ms: 4,
            },
            LiveUpdate::Output {
                step: "tests".into(),
                line: "test result: ok. 12 passed".into(),
            },
            LiveUpdate::Text {
                text: "All tests pass; writing".into(),
            },
        ];
        for update in updates {
            app.update(Msg::Live {
                plan_id: plan.clone(),
                update,
            });
        }
        for (w, h) in SIZES {
            snapshot("live_running", &app, &Theme::default(), w, h);
        }
        app.update(Msg::Activity(Vec::new()));
        snapshot("live_finished", &app, &Theme::default(), 80, 24);
    }

    #[test]
    fn snapshot_live_area_with_a_tools_progress_line() {
        use crate::model::LiveUpdate;
        let mut app = loaded();
        app.update(Msg::Activity(vec!["plan execute 01ARZ3ND".into()]));
        let plan = fixtures::PLAN_A.to_owned();
        let progress = |progress: f64, message: Option<&str>| LiveUpdate::ToolProgress {
            name: "everything.trigger-long-running-operation".into(),
            progress,
            total: Some(5.0),
            message: message.map(Into::into),
        };
        let updates = [
            LiveUpdate::Turn {
                actor: "openai/gpt-4o".into(),
                turn: 1,
            },
            LiveUpdate::ToolStarted {
                name: "everything.trigger-long-running-operation".into(),
                arguments: "{\"duration\": 10, \"steps\": 5}".into(),
            },
            progress(1.0, None),
            progress(2.0, Some("halfway there")),
            progress(3.0, Some("copying the last files")),
        ];
        for update in updates {
            app.update(Msg::Live {
                plan_id: plan.clone(),
                update,
            });
        }
        snapshot("live_tool_progress", &app, &Theme::default(), 80, 24);
    }

    #[test]
    fn snapshot_tree_focused_with_superseded_and_diff_scrolled() {
        let mut app = loaded();
        press(
            &mut app,
            &[
                Key::Char('2'),
                Key::Char('s'),
                Key::Char('j'),
                Key::Char('3'),
                Key::Char('n'),
                Key::Char('n'),
            ],
        );
        for (w, h) in SIZES {
            snapshot("tree_and_diff", &app, &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_zoomed_diff() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('3'), Key::Char('z')]);
        for (w, h) in SIZES {
            snapshot("zoomed_diff", &app, &Theme::default(), w, h);
        }
    }

    /// The zoomed diff pane with [`fixtures::reviewed_diff`] loaded.
    fn reviewing() -> App {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: fixtures::PLAN_A.into(),
            diff: fixtures::reviewed_diff(),
        });
        press(&mut app, &[Key::Char('3'), Key::Char('z')]);
        app
    }

    #[test]
    fn snapshot_review_marks_file_list_and_counters() {
        let app = reviewing();
        both("review_marks", &app);
    }

    #[test]
    fn snapshot_review_marks_of_two_reviewers_name_each_reviewer() {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: fixtures::PLAN_A.into(),
            diff: fixtures::diff_reviewed_by_two(),
        });
        press(&mut app, &[Key::Char('3'), Key::Char('z')]);
        both("review_marks_two_reviewers", &app);
    }

    #[test]
    fn snapshot_review_reject_asks_for_an_optional_reason() {
        let mut app = reviewing();
        // The third item: the hunk of src/auth/mod.rs.
        press(&mut app, &[Key::Char(']'), Key::Char('x')]);
        press(&mut app, &[Key::Char('n'), Key::Char('o')]);
        both("review_reject_reason", &app);
    }

    #[test]
    fn snapshot_review_a_rejected_hunk_offers_correcting_its_decision() {
        let mut app = reviewing();
        press(&mut app, &[Key::Char('n'), Key::Char('n'), Key::Char('c')]);
        both("review_correct_offer", &app);
    }

    #[test]
    fn snapshot_review_apply_confirms_only_the_accepted_part() {
        let mut app = reviewing();
        press(&mut app, &[Key::Char('1'), Key::Char('A'), Key::Enter]);
        both("review_apply_confirm", &app);
    }

    #[test]
    fn snapshot_help_overlay() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('?')]);
        for (w, h) in SIZES {
            snapshot("help", &app, &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_approval_popups() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('4'), Key::Char('j'), Key::Char('r')]);
        for c in "not this way".chars() {
            press(&mut app, &[Key::Char(c)]);
        }
        for (w, h) in SIZES {
            snapshot("reject_prompt", &app, &Theme::default(), w, h);
        }
        let mut app = loaded();
        press(
            &mut app,
            &[
                Key::Char('4'),
                Key::Char('j'),
                Key::Char('c'),
                Key::Char('j'),
            ],
        );
        for (w, h) in SIZES {
            snapshot("choose_popup", &app, &Theme::default(), w, h);
        }
        let mut app = loaded();
        press(&mut app, &[Key::Char('4'), Key::Char('a')]);
        for (w, h) in SIZES {
            snapshot("approve_confirm", &app, &Theme::default(), w, h);
        }
    }

    fn typed(app: &mut App, text: &str) {
        for c in text.chars() {
            let key = if c == '\n' { Key::Enter } else { Key::Char(c) };
            app.update(Msg::Key(key));
        }
    }

    fn both(name: &str, app: &App) {
        for (w, h) in SIZES {
            snapshot(name, app, &Theme::default(), w, h);
        }
    }

    #[test]
    fn snapshot_explanation() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('j')]);
        app.update(Msg::Explanation(fixtures::explanation("D2")));
        both("explain", &app);
    }

    #[test]
    fn snapshot_correction_stages() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('2'), Key::Char('j'), Key::Char('c')]);
        typed(
            &mut app,
            "Use cargo test: nextest is not installed in CI.\nKeep the flaky tests isolated.",
        );
        both("correct_editor", &app);
        let mut refused = app.clone();
        press(&mut refused, &[Key::Ctrl('s')]);
        refused.update(Msg::CorrectionPreview {
            decision_id: "D2".into(),
            result: Ok(crate::model::CorrectionPreview {
                refused: Some("decision D2 has an applied descendant; revert the plan's apply first or correct with --mode append".into()),
                ..fixtures::preview()
            }),
        });
        both("correct_refused", &refused);
        press(&mut app, &[Key::Tab, Key::Ctrl('s')]);
        both("correct_waiting", &app);
        let mut failed = app.clone();
        app.update(Msg::CorrectionPreview {
            decision_id: "D2".into(),
            result: Ok(fixtures::preview()),
        });
        both("correct_preview", &app);
        failed.update(Msg::CorrectionPreview {
            decision_id: "D2".into(),
            result: Err("CONFLICT: plan 01JDQ4V6 is being driven by pid 4242\nhint: wait for it, or cancel it first".into()),
        });
        both("correct_failed", &failed);
    }

    #[test]
    fn snapshot_checkpoints_and_rollback_confirm() {
        let mut app = loaded();
        app.update(Msg::Checkpoints {
            plan_id: fixtures::PLAN_A.into(),
            items: fixtures::checkpoints(),
        });
        both("checkpoints", &app);
        press(&mut app, &[Key::Char('k'), Key::Enter]);
        both("rollback_confirm", &app);
    }

    #[test]
    fn snapshot_use_form() {
        let mut app = loaded();
        app.update(Msg::UseChoices(fixtures::use_choices()));
        press(&mut app, &[Key::Tab, Key::Char('j')]);
        both("use_form", &app);
        press(&mut app, &[Key::BackTab, Key::Char('j'), Key::Enter]);
        typed(&mut app, "tantivy");
        both("use_form_arguments", &app);
        // The profile field: `trusted` chosen (third of the registered ones, after the default).
        press(
            &mut app,
            &[Key::BackTab, Key::Right, Key::Right, Key::Right],
        );
        both("use_form_profile", &app);
    }

    #[test]
    fn snapshot_plan_actions() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('g')]);
        typed(&mut app, "focus on the session tests");
        both("prompt_input", &app);
        let mut app = loaded();
        press(&mut app, &[Key::Char('x')]);
        both("cancel_confirm", &app);
        let mut app = loaded();
        press(&mut app, &[Key::Char('A')]);
        both("apply_review", &app);
        press(&mut app, &[Key::Char('A')]);
        both("apply_confirm", &app);
    }

    #[test]
    fn snapshot_quit_question_with_activity_and_last_error() {
        let mut app = loaded();
        app.update(Msg::Activity(vec!["plan execute 01JDQ4V6".into()]));
        app.update(Msg::Finished {
            ok: false,
            text: "plan apply 01JDQ6B3 failed: validation `tests` failed".into(),
        });
        press(&mut app, &[Key::Char('j')]);
        both("status_activity", &app);
        press(&mut app, &[Key::Char('q')]);
        both("quit_confirm", &app);
    }

    #[test]
    fn snapshot_last_errors_overlay_shows_whole_messages() {
        let mut app = loaded();
        app.update(Msg::Finished {
            ok: false,
            text: "plan apply 01JDQ6B3 failed: local/repo: NOTES.md has uncommitted changes (in the working tree); the plan changes this file too. Commit or stash your edit and retry".into(),
        });
        app.update(Msg::Error {
            title: "Could not run plan execute".into(),
            detail:
                "plan 01JDQ4V6 is at apply/errored; `plan execute` runs Strategize and Execute only"
                    .into(),
        });
        press(&mut app, &[Key::Esc]);
        both("status_last_error", &app);
        press(&mut app, &[Key::Char('!')]);
        both("last_errors", &app);
    }

    #[test]
    fn snapshot_filter() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('/')]);
        typed(&mut app, "web");
        both("filter_typing", &app);
        typed(&mut app, "zzz");
        both("filter_no_match", &app);
    }

    #[test]
    fn snapshot_applied_diff_is_marked_with_its_commit() {
        let mut app = loaded();
        app.update(Msg::DiffUpdated {
            plan_id: fixtures::PLAN_A.into(),
            diff: crate::model::DiffView {
                applied: Some("applied in 451487da7410".into()),
                ..fixtures::diff()
            },
        });
        both("diff_applied", &app);
    }

    #[test]
    fn snapshot_side_by_side() {
        let mut app = loaded();
        press(&mut app, &[Key::Char('3'), Key::Char('v')]);
        both("side_by_side", &app);
        press(&mut app, &[Key::Char('z')]);
        both("side_by_side_zoomed", &app);
    }

    #[test]
    fn snapshot_error_message() {
        let mut app = loaded();
        app.update(Msg::Error {
            title: "Could not run plan apply".into(),
            detail: "cannot start /usr/bin/agents: No such file or directory".into(),
        });
        both("error_message", &app);
    }

    #[test]
    fn highlighted_lines_are_coloured_and_changed_words_emphasised() {
        let theme = Theme::default();
        let mut app = loaded();
        press(&mut app, &[Key::Char('3'), Key::Char('z')]);
        app.update(Msg::Resize {
            width: 80,
            height: 24,
        });
        let request = app.take_highlight_request(theme.syntax()).expect("request");
        let result = crate::highlight::Highlighter::new().highlight(&request, &mut || false);
        let plain = draw(&app, &theme, 80, 24);
        app.update(Msg::Highlighted(result));
        let coloured = draw(&app, &theme, 80, 24);
        assert_eq!(
            text(&plain),
            text(&coloured),
            "highlighting changes colours only"
        );
        // Row 4 is `-pub struct Sessions {`, row 5 `+pub struct SessionStore {`.
        let row =
            |buf: &Buffer, y: u16| -> String { (0..80).map(|x| buf[(x, y)].symbol()).collect() };
        assert!(
            row(&coloured, 4).contains("-pub struct Sessions {"),
            "{}",
            row(&coloured, 4)
        );
        // The code starts after the file list.
        let start = (0..79)
            .find(|x| coloured[(*x, 5)].symbol() == "+" && coloured[(*x + 1, 5)].symbol() == "p")
            .expect("the added line");
        let fgs: std::collections::HashSet<_> = (start + 1..start + 19)
            .map(|x| coloured[(x, 5)].fg)
            .collect();
        assert!(fgs.len() >= 2, "syntax colours on the added line: {fgs:?}");
        let emph = theme.style(Slot::DiffAddEmph);
        let emphasised: String = (1..79)
            .filter(|x| coloured[(*x, 5)].bg == emph.bg.expect("emphasis has a background"))
            .map(|x| coloured[(x, 5)].symbol())
            .collect();
        assert_eq!(emphasised, "SessionStore", "only the changed word");
        // NO_COLOR: no syntax colours, emphasis by modifiers only.
        let mono = Theme::no_color();
        let buf = draw(&app, &mono, 80, 24);
        assert!(
            buf.content()
                .iter()
                .all(|c| c.fg == ratatui::style::Color::Reset)
        );
    }

    #[test]
    fn a_frame_with_a_huge_tree_and_diff_draws_only_what_fits() {
        let mut app = loaded();
        app.update(Msg::TreeUpdated {
            plan_id: fixtures::PLAN_A.into(),
            nodes: fixtures::big_tree(10_000),
        });
        app.update(Msg::DiffUpdated {
            plan_id: fixtures::PLAN_A.into(),
            diff: fixtures::big_diff(50_000),
        });
        press(&mut app, &[Key::Char('3'), Key::Char(']'), Key::Char(']')]);
        let buf = draw(&app, &Theme::default(), 120, 40);
        let screen = text(&buf);
        assert!(screen.contains("src/module_2.rs"), "{screen}");
        assert!(screen.contains("file 3/50"), "{screen}");
    }

    #[test]
    fn snapshot_too_small() {
        snapshot("too_small", &loaded(), &Theme::default(), 30, 8);
    }

    #[test]
    fn focused_border_uses_the_focused_slot() {
        let theme = Theme::default();
        let mut app = loaded();
        let areas = pane_areas(&app, Rect::new(0, 0, 80, 23));
        for pane in Pane::ALL {
            press(
                &mut app,
                &[Key::Char(char::from(b'0' + pane.number() as u8))],
            );
            let buf = draw(&app, &theme, 80, 24);
            for (other, rect) in areas {
                let corner = &buf[(rect.x, rect.y)];
                let (slot, symbol) = if other == pane {
                    (Slot::PaneBorderFocused, "┏")
                } else {
                    (Slot::PaneBorder, "┌")
                };
                assert_eq!(corner.symbol(), symbol, "{other:?} with {pane:?} focused");
                let expected = theme.style(slot);
                assert_eq!(
                    Some(corner.fg),
                    expected.fg,
                    "{other:?} with {pane:?} focused"
                );
                assert!(corner.modifier.contains(expected.add_modifier));
            }
        }
    }

    #[test]
    fn plan_cells_use_phase_and_state_slots() {
        let theme = Theme::default();
        let buf = draw(&loaded(), &theme, 120, 40);
        let plans = fixtures::plans();
        let approvals = fixtures::approvals();
        let mut waiting = 0;
        for (i, plan) in plans.iter().enumerate() {
            let y = 2 + u16::try_from(i).expect("few rows");
            let row: String = (0..120).map(|x| buf[(x, y)].symbol()).collect();
            let phase_x =
                u16::try_from(row.find(plan.phase.label()).expect("phase shown")).expect("narrow");
            // A plan with a pending approval says so instead of its processing state.
            let (label, slot) = if plan.state != crate::model::ProcessingState::Errored
                && approvals.iter().any(|a| a.plan_id == plan.plan_id)
            {
                waiting += 1;
                ("waiting", Slot::StatusWarn)
            } else {
                (plan.state.label(), panes::plans::state_slot(plan.state))
            };
            let state_x = u16::try_from(row.find(&format!(" {label} ")).expect("state shown") + 1)
                .expect("narrow");
            let phase_fg = theme.style(panes::plans::phase_slot(plan.phase)).fg;
            let state_fg = theme.style(slot).fg;
            assert_eq!(buf[(phase_x, y)].fg, phase_fg.expect("coloured"), "row {i}");
            assert_eq!(buf[(state_x, y)].fg, state_fg.expect("coloured"), "row {i}");
        }
        assert!(
            waiting > 0,
            "the fixtures have a plan waiting for an approval"
        );
    }

    #[test]
    fn no_color_renders_without_colours() {
        let theme = Theme::no_color();
        let buf = draw(&loaded(), &theme, 120, 40);
        for cell in buf.content() {
            assert_eq!(cell.fg, ratatui::style::Color::Reset, "{cell:?}");
            assert_eq!(cell.bg, ratatui::style::Color::Reset, "{cell:?}");
        }
        assert_eq!(
            text(&buf),
            text(&draw(&loaded(), &Theme::default(), 120, 40))
        );
    }

    #[test]
    fn plans_made_in_the_same_second_are_shown_by_the_prefix_plan_list_prints() {
        // Two plans whose ids share their first eight characters (made in the same second).
        let twin_a = "01M947R8X1AAAAAAAAAAAAAAAA";
        let twin_b = "01M947R8X2BBBBBBBBBBBBBBBB";
        let mut plans = fixtures::plans();
        plans[0].plan_id = twin_a.to_owned();
        plans[1].plan_id = twin_b.to_owned();
        let mut approvals = fixtures::approvals();
        approvals[0].plan_id = twin_a.to_owned();
        approvals[1].plan_id = twin_b.to_owned();
        let mut app = App::new();
        app.update(Msg::PlansUpdated(plans));
        app.update(Msg::ApprovalsUpdated(approvals));
        let screen = text(&draw(&app, &Theme::default(), 160, 40));
        for shown in ["01M947R8X1", "01M947R8X2"] {
            // Once in Plans, once in Approvals.
            assert_eq!(screen.matches(shown).count(), 2, "{shown}:\n{screen}");
        }
        // The status bar names the plan the same way.
        press(&mut app, &[Key::Char('e')]);
        let screen = text(&draw(&app, &Theme::default(), 160, 40));
        assert!(
            screen.contains("Running plan execute 01M947R8X1"),
            "{screen}"
        );
    }

    #[test]
    fn snapshot_plans_pane_styles() {
        // One snapshot with styles, so a theme or slot change shows up in review.
        let app = loaded();
        let theme = Theme::default();
        let area = Rect::new(0, 0, 80, 8);
        let mut buf = Buffer::empty(area);
        panes::plans::render(app.plans(), &[], &theme, true, area, &mut buf);
        insta::with_settings!({
            snapshot_path => "../../snapshots/ui",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!("plans_styles_80x8", format!("{buf:?}"));
        });
    }

    #[test]
    fn render_overwrites_whatever_the_buffer_held() {
        let app = loaded();
        let area = Rect::new(0, 0, 120, 40);
        let mut dirty = Buffer::filled(
            area,
            ratatui::buffer::Cell::new("x")
                .set_bg(ratatui::style::Color::Red)
                .clone(),
        );
        render(&app, &Theme::default(), area, &mut dirty);
        assert_eq!(dirty, draw(&app, &Theme::default(), 120, 40));
    }

    #[test]
    fn odd_sizes_and_every_overlay_render_without_panicking() {
        let mut states = vec![App::new(), loaded()];
        for keys in [
            &[Key::Char('?')][..],
            &[Key::Char('4'), Key::Char('a')],
            &[Key::Char('4'), Key::Char('j'), Key::Char('c')],
            &[Key::Char('4'), Key::Char('g')],
            &[Key::Char('3'), Key::Char('z'), Key::End],
            &[Key::Char('3'), Key::Char('v'), Key::Char('z')],
            &[Key::Char('2'), Key::Char('c'), Key::Char('x')],
            &[Key::Char('A')],
            &[Key::Char('x')],
            &[Key::Char('/'), Key::Char('w')],
        ] {
            let mut app = loaded();
            press(&mut app, keys);
            states.push(app);
        }
        let mut app = loaded();
        app.update(Msg::Error {
            title: "Failed".into(),
            detail: "a\nb\nc".into(),
        });
        states.push(app);
        for app in &states {
            for (w, h) in [
                (0, 0),
                (1, 1),
                (40, 12),
                (41, 13),
                (57, 19),
                (200, 60),
                (400, 120),
            ] {
                let buf = draw(app, &Theme::default(), w, h);
                assert_eq!(buf.area, Rect::new(0, 0, w, h));
            }
        }
    }
}
