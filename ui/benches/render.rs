//! Render benchmark (spec section 26, TUI responsiveness): one frame of the TUI with a 10,000-decision tree and a
//! 50,000-line diff loaded (highlights for the visible hunks received), at 120x40 and 200x60,
//! with the tree and then the diff focused. Criterion measures each case; then the median of
//! 200 frames per case is printed with PASS/MISS against the 8 ms budget.
//!
//! Run with `scripts/bench-tui.sh` (release build); CI never runs it.

// A benchmark program reports on stdout; that is its whole output.
#![allow(clippy::print_stdout, missing_docs)]

use std::time::{Duration, Instant};

use cleveragents_ui::highlight::Highlighter;
use cleveragents_ui::{App, Key, Msg, Theme, fixtures, render};
use criterion::Criterion;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use std::hint::black_box;

/// The frame budget (a frame at 120x40 and 200x60 draws within 8 ms).
const BUDGET: Duration = Duration::from_millis(8);

fn loaded(width: u16, height: u16, keys: &[Key]) -> App {
    let mut app = App::new();
    for msg in fixtures::load_all() {
        app.update(msg);
    }
    app.update(Msg::Resize { width, height });
    app.update(Msg::TreeUpdated {
        plan_id: fixtures::PLAN_A.into(),
        nodes: fixtures::big_tree(10_000),
    });
    app.update(Msg::DiffUpdated {
        plan_id: fixtures::PLAN_A.into(),
        diff: fixtures::big_diff(50_000),
    });
    for key in keys {
        app.update(Msg::Key(*key));
    }
    let theme = Theme::default();
    if let Some(request) = app.take_highlight_request(theme.syntax()) {
        let result = Highlighter::new().highlight(&request, &mut || false);
        app.update(Msg::Highlighted(result));
    }
    app
}

fn frame(app: &App, theme: &Theme, buf: &mut Buffer) {
    let area = buf.area;
    render(black_box(app), theme, area, buf);
}

fn cases() -> Vec<(String, App, u16, u16)> {
    let mut out = Vec::new();
    for (w, h) in [(120, 40), (200, 60)] {
        // Tree focused, a few levels down; diff focused, scrolled into the middle of a file.
        let tree = loaded(w, h, &[Key::Char('2'), Key::Char('j'), Key::Char('j')]);
        let diff = loaded(
            w,
            h,
            &[
                Key::Char('3'),
                Key::Char(']'),
                Key::Char(']'),
                Key::Char('n'),
            ],
        );
        out.push((format!("tree focused {w}x{h}"), tree, w, h));
        out.push((format!("diff focused {w}x{h}"), diff, w, h));
    }
    out
}

fn main() {
    let theme = Theme::default();
    let cases = cases();
    let mut criterion = Criterion::default()
        .configure_from_args()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    for (name, app, w, h) in &cases {
        let mut buf = Buffer::empty(Rect::new(0, 0, *w, *h));
        criterion.bench_function(&format!("render frame, {name}"), |b| {
            b.iter(|| frame(app, &theme, &mut buf));
        });
    }
    criterion.final_summary();

    println!();
    println!("Frame render with a 10,000-decision tree and a 50,000-line diff (budget 8 ms):");
    let mut all_pass = true;
    for (name, app, w, h) in &cases {
        let mut buf = Buffer::empty(Rect::new(0, 0, *w, *h));
        let mut times: Vec<Duration> = (0..200)
            .map(|_| {
                let start = Instant::now();
                frame(app, &theme, &mut buf);
                start.elapsed()
            })
            .collect();
        times.sort_unstable();
        let median = times[times.len() / 2];
        let p95 = times[times.len() * 95 / 100];
        let pass = median <= BUDGET;
        all_pass &= pass;
        println!(
            "  {name:<24} median {:>7.3} ms  p95 {:>7.3} ms  {}",
            median.as_secs_f64() * 1e3,
            p95.as_secs_f64() * 1e3,
            if pass { "PASS" } else { "MISS" }
        );
    }
    println!("overall: {}", if all_pass { "PASS" } else { "MISS" });
}
