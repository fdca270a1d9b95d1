//! The human formats: `plain` (ASCII, no escapes), `color` (plain layout with ANSI colour) and
//! `table` / `rich` (box-drawing panels and tables with colour).
//!
//! User content is shown as given (non-ASCII included), except that control characters are
//! made visible in caret notation (`^[` for ESC) and tabs become spaces, so that nothing a
//! model or a file wrote can move the cursor or recolour the terminal.

use anstyle::{AnsiColor, Effects, Style as Ansi};
use unicode_width::UnicodeWidthStr;

use super::format::{Format, Terminal};
use super::report::{Align, Cell, Column, Element, Level, Message, Tone, TreeNode};
use super::{Outcome, Report};

/// How human output is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Box drawing and Unicode markers (table, rich) or ASCII (plain, color).
    pub boxes: bool,
    /// ANSI colour.
    pub color: bool,
}

impl Style {
    /// The style for a human format, honouring `NO_COLOR`.
    pub fn for_format(format: Format, terminal: &Terminal) -> Self {
        let color = !terminal.no_color;
        match format {
            Format::Plain | Format::Json | Format::Yaml => Style {
                boxes: false,
                color: false,
            },
            Format::Color => Style {
                boxes: false,
                color,
            },
            Format::Table | Format::Rich => Style { boxes: true, color },
        }
    }

    fn paint(self, style: Ansi, text: &str) -> String {
        if self.color && !text.is_empty() {
            format!("{}{text}{}", style.render(), style.render_reset())
        } else {
            text.to_string()
        }
    }

    fn title(self, text: &str) -> String {
        self.paint(AnsiColor::Cyan.on_default().effects(Effects::BOLD), text)
    }

    fn key(self, text: &str) -> String {
        self.paint(AnsiColor::Blue.on_default().effects(Effects::BOLD), text)
    }

    fn dim(self, text: &str) -> String {
        self.paint(Ansi::new().effects(Effects::DIMMED), text)
    }

    fn tone(self, tone: Tone, text: &str) -> String {
        let style = match tone {
            Tone::Normal => return text.to_string(),
            Tone::Good => AnsiColor::Green.on_default(),
            Tone::Warn => AnsiColor::Yellow.on_default(),
            Tone::Bad => AnsiColor::Red.on_default(),
            Tone::Id => AnsiColor::Cyan.on_default(),
            Tone::Dim => Ansi::new().effects(Effects::DIMMED),
        };
        self.paint(style, text)
    }

    fn level_tone(level: Level) -> Tone {
        match level {
            Level::Ok => Tone::Good,
            Level::Warn => Tone::Warn,
            Level::Error => Tone::Bad,
            Level::Info => Tone::Id,
        }
    }

    /// The marker and label of a status or message line: `[OK] ` or `✓ OK `.
    fn marker(self, level: Level) -> String {
        let text = if self.boxes {
            let icon = match level {
                Level::Ok => "\u{2713}",
                Level::Warn => "\u{26a0}",
                Level::Error => "\u{2717}",
                Level::Info => "\u{2139}",
            };
            format!("{icon} {}", level.label())
        } else {
            format!("[{}]", level.label())
        };
        self.tone(Self::level_tone(level), &text)
    }
}

/// Makes user content safe to print: control characters in caret notation, tabs as spaces.
/// Newlines are kept when `keep_newlines`, else shown as spaces.
pub fn sanitize(text: &str, keep_newlines: bool) -> String {
    let mut out = String::new();
    push_sanitized(&mut out, text, keep_newlines);
    out
}

/// Appends `text` made safe to print to `out`, as [`sanitize`] makes it.
fn push_sanitized(out: &mut String, text: &str, keep_newlines: bool) {
    // Most text has nothing to replace: one byte scan, one copy. (0xC2 leads the two-byte
    // forms of U+0080..U+00BF, among them the C1 controls.) Each chunk is checked whole,
    // without stopping at the first byte, which the compiler turns into wide compares.
    let plain = |b: u8| (b >= 0x20 && b != 0x7f && b != 0xc2) || (b == b'\n' && keep_newlines);
    if text
        .as_bytes()
        .chunks(32)
        .all(|chunk| chunk.iter().fold(true, |ok, &b| ok & plain(b)))
    {
        out.push_str(text);
        return;
    }
    out.reserve(text.len());
    for c in text.chars() {
        match c {
            '\n' if keep_newlines => out.push('\n'),
            '\n' | '\r' => out.push(' '),
            '\t' => out.push_str("    "),
            c if (c as u32) < 0x20 => {
                out.push('^');
                out.push(char::from(b'@' + c as u8));
            }
            '\u{7f}' => out.push_str("^?"),
            c if ('\u{80}'..='\u{9f}').contains(&c) => {
                out.push_str(&format!("<U+{:04X}>", c as u32))
            }
            c => out.push(c),
        }
    }
}

/// One output line: its styled text and its display width (without escape codes).
struct Line {
    text: String,
    width: usize,
}

impl Line {
    fn new(style: Style, plain: &str, styled: impl FnOnce(Style, &str) -> String) -> Self {
        Line {
            width: plain.width(),
            text: styled(style, plain),
        }
    }
    fn raw(text: String, width: usize) -> Self {
        Line { text, width }
    }
}

/// Renders an outcome in a human format; the text ends with the status line and a newline.
pub fn render(outcome: &Outcome, style: Style) -> String {
    let mut out = Vec::new();
    write(outcome, style, &mut out).expect("writing to memory does not fail");
    String::from_utf8(out).expect("rendered text is UTF-8")
}

/// Writes [`render`]'s text to `out` a block at a time, without a copy of the whole (a tree
/// of 100,000 decisions is megabytes).
///
/// # Errors
/// I/O errors from `out`.
pub fn write(outcome: &Outcome, style: Style, out: &mut dyn std::io::Write) -> std::io::Result<()> {
    let (blocks, status) = blocks(outcome, style);
    // The blocks joined by blank lines, then a newline unless that is empty.
    for (i, block) in blocks.iter().enumerate() {
        if i > 0 {
            out.write_all(b"\n")?;
        }
        out.write_all(block.as_bytes())?;
    }
    if blocks.len() > 1 || blocks.first().is_some_and(|b| !b.is_empty()) {
        out.write_all(b"\n")?;
    }
    let mut last = status_line(&status, style);
    last.push('\n');
    out.write_all(last.as_bytes())
}

/// The rendered elements of `outcome` and its status line's message.
fn blocks(outcome: &Outcome, style: Style) -> (Vec<String>, Message) {
    let mut blocks: Vec<String> = Vec::new();
    let status = match outcome {
        Outcome::Done(report) => {
            render_report_blocks(report, style, &mut blocks);
            report.status.clone()
        }
        Outcome::Failed { error, .. } => {
            let mut entries: Vec<(String, Cell)> =
                vec![("Code".into(), Cell::new(error.code, Tone::Dim))];
            if let Some(detail) = &error.detail {
                entries.push(("Detail".into(), Cell::from(detail.as_str())));
            }
            // Exit 3 is not a failure: the command stopped because a human must answer.
            let waiting = error.exit == crate::output::Exit::NeedsHuman;
            blocks.push(render_element(
                &Element::Panel {
                    title: if waiting { "Waiting For You" } else { "Error" }.into(),
                    entries,
                },
                style,
            ));
            if !error.suggestions.is_empty() {
                blocks.push(render_element(
                    &Element::List {
                        title: if waiting { "Answer With" } else { "Try" }.into(),
                        items: error.suggestions.clone(),
                    },
                    style,
                ));
            }
            Message {
                level: if waiting { Level::Warn } else { Level::Error },
                text: error.message.clone(),
            }
        }
    };
    (blocks, status)
}

fn render_report_blocks(report: &Report, style: Style, blocks: &mut Vec<String>) {
    for element in &report.elements {
        blocks.push(render_element(element, style));
    }
    if !report.messages.is_empty() {
        let mut text = String::new();
        for m in &report.messages {
            text.push_str(&status_line(m, style));
            text.push('\n');
        }
        blocks.push(text);
    }
}

fn status_line(message: &Message, style: Style) -> String {
    format!(
        "{} {}",
        style.marker(message.level),
        sanitize(&message.text, false)
    )
}

/// Renders one element, ending with a newline.
pub fn render_element(element: &Element, style: Style) -> String {
    if !style.boxes {
        match element {
            Element::List { title, items } => return indented_list(title, items, style),
            Element::Tree { title, roots } => return indented_tree(title, roots, style),
            _ => {}
        }
    }
    let (title, body) = match element {
        Element::Panel { title, entries } => (title, panel_lines(entries, style)),
        Element::Table {
            title,
            columns,
            rows,
            empty,
        } => (title, table_lines(columns, rows, empty, style)),
        Element::Tree { title, roots } => (title, tree_lines(roots, style)),
        Element::List { title, items } => (
            title,
            items
                .iter()
                .flat_map(|i| {
                    sanitize(i, true)
                        .lines()
                        .map(str::to_string)
                        .collect::<Vec<_>>()
                })
                .map(|l| Line::new(style, &l, |_, s| s.to_string()))
                .collect(),
        ),
    };
    let title = sanitize(title, false);
    if style.boxes {
        boxed(&title, &body, style)
    } else {
        indented(&title, &body, style)
    }
}

/// A list in the indented layout, written line by line into one string (the same text as
/// [`indented`] of its lines, without a copy per line: a list item can be a whole diff).
fn indented_list(title: &str, items: &[String], style: Style) -> String {
    let mut out = style.title(&sanitize(title, false));
    out.push('\n');
    for item in items {
        let clean = sanitize(item, true);
        out.reserve(clean.len() + clean.len() / 16);
        for line in clean.lines() {
            if line.width() != 0 {
                out.push_str("  ");
                out.push_str(line);
            }
            out.push('\n');
        }
    }
    out
}

/// A tree in the indented layout, written node by node into one string (the same text as
/// [`indented`] of [`tree_lines`], without a string per line: a plan's tree can have 100,000
/// decisions).
fn indented_tree(title: &str, roots: &[TreeNode], style: Style) -> String {
    fn walk(nodes: &[TreeNode], prefix: &mut String, style: Style, out: &mut String) {
        for (i, node) in nodes.iter().enumerate() {
            let is_last = i + 1 == nodes.len();
            let at = prefix.len();
            // Plain glyphs: the last child's branch is drawn as the others'.
            prefix.push_str("+-- ");
            out.push_str("  ");
            if style.color {
                out.push_str(&style.dim(prefix));
                let label = sanitize(&node.label.text, false);
                out.push_str(&style.tone(node.label.tone, &label));
            } else {
                out.push_str(prefix);
                push_sanitized(out, &node.label.text, false);
            }
            out.push('\n');
            prefix.truncate(at);
            prefix.push_str(if is_last { "    " } else { "|   " });
            walk(&node.children, prefix, style, out);
            prefix.truncate(at);
        }
    }
    let mut out = style.title(&sanitize(title, false));
    out.push('\n');
    walk(roots, &mut String::new(), style, &mut out);
    out
}

fn indented(title: &str, body: &[Line], style: Style) -> String {
    let mut out = style.title(title);
    out.push('\n');
    for line in body {
        if line.width == 0 {
            out.push('\n');
        } else {
            out.push_str("  ");
            out.push_str(&line.text);
            out.push('\n');
        }
    }
    out
}

fn boxed(title: &str, body: &[Line], style: Style) -> String {
    let inner = body
        .iter()
        .map(|l| l.width)
        .max()
        .unwrap_or(0)
        .max(title.width() + 2);
    let mut out = String::new();
    // ╭─ Title ───╮ : the top border is inner + 2 wide between the corners.
    let fill = (inner + 2).saturating_sub(title.width() + 3);
    out.push_str(&style.dim("\u{256d}\u{2500} "));
    out.push_str(&style.title(title));
    out.push_str(&style.dim(&format!(" {}\u{256e}", "\u{2500}".repeat(fill))));
    out.push('\n');
    for line in body {
        out.push_str(&style.dim("\u{2502} "));
        out.push_str(&line.text);
        out.push_str(&" ".repeat(inner - line.width));
        out.push_str(&style.dim(" \u{2502}"));
        out.push('\n');
    }
    out.push_str(&style.dim(&format!("\u{2570}{}\u{256f}", "\u{2500}".repeat(inner + 2))));
    out.push('\n');
    out
}

fn panel_lines(entries: &[(String, Cell)], style: Style) -> Vec<Line> {
    let mut lines = Vec::new();
    for (key, value) in entries {
        let key = sanitize(key, false);
        let value_text = sanitize(&value.text, true);
        let mut parts = value_text.split('\n');
        let first = parts.next().unwrap_or("");
        let prefix_width = key.width() + 2;
        lines.push(Line::raw(
            format!("{}: {}", style.key(&key), style.tone(value.tone, first)),
            prefix_width + first.width(),
        ));
        for more in parts {
            lines.push(Line::raw(
                format!(
                    "{}{}",
                    " ".repeat(prefix_width),
                    style.tone(value.tone, more)
                ),
                prefix_width + more.width(),
            ));
        }
    }
    lines
}

fn table_lines(columns: &[Column], rows: &[Vec<Cell>], empty: &str, style: Style) -> Vec<Line> {
    if rows.is_empty() {
        let text = sanitize(empty, false);
        return vec![Line::new(style, &text, |s, t| s.dim(t))];
    }
    let cells: Vec<Vec<(String, Tone)>> = rows
        .iter()
        .map(|row| {
            row.iter()
                .map(|c| (sanitize(&c.text, false), c.tone))
                .collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, col)| {
            cells
                .iter()
                .filter_map(|r| r.get(i))
                .map(|(t, _)| t.width())
                .max()
                .unwrap_or(0)
                .max(col.name.width())
        })
        .collect();
    let rule = if style.boxes { "\u{2500}" } else { "-" };
    let last = columns.len().saturating_sub(1);
    // Pads a cell to its column width; the last column is not padded on the right, so that no
    // line ends with spaces (and `color` stays `plain` plus escape codes).
    let pad = |i: usize, text: &str, align: Align| {
        let gap = " ".repeat(widths[i] - text.width());
        match align {
            Align::Left if i == last => text.to_string(),
            Align::Left => format!("{text}{gap}"),
            Align::Right => format!("{gap}{text}"),
        }
    };
    let line = |parts: Vec<(String, usize)>| {
        let width = parts.iter().map(|(_, w)| w).sum::<usize>() + 2 * parts.len().saturating_sub(1);
        Line::raw(
            parts
                .into_iter()
                .map(|(t, _)| t)
                .collect::<Vec<_>>()
                .join("  "),
            width,
        )
    };
    let visible = |i: usize, text: &str, align: Align| {
        if i == last && align == Align::Left {
            text.width()
        } else {
            widths[i]
        }
    };
    let mut lines = Vec::new();
    lines.push(line(
        columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                (
                    style.title(&pad(i, &c.name, c.align)),
                    visible(i, &c.name, c.align),
                )
            })
            .collect(),
    ));
    lines.push(line(
        widths
            .iter()
            .map(|w| (style.dim(&rule.repeat(*w)), *w))
            .collect(),
    ));
    for row in &cells {
        lines.push(line(
            columns
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    let (text, tone) = row.get(i).cloned().unwrap_or_default();
                    (
                        style.tone(tone, &pad(i, &text, c.align)),
                        visible(i, &text, c.align),
                    )
                })
                .collect(),
        ));
    }
    lines
}

fn tree_lines(roots: &[TreeNode], style: Style) -> Vec<Line> {
    let (branch, last, pipe, space) = if style.boxes {
        (
            "\u{251c}\u{2500}\u{2500} ",
            "\u{2514}\u{2500}\u{2500} ",
            "\u{2502}   ",
            "    ",
        )
    } else {
        ("+-- ", "+-- ", "|   ", "    ")
    };
    fn walk(
        nodes: &[TreeNode],
        prefix: &str,
        glyphs: (&str, &str, &str, &str),
        style: Style,
        out: &mut Vec<Line>,
    ) {
        let (branch, last, pipe, space) = glyphs;
        for (i, node) in nodes.iter().enumerate() {
            let is_last = i + 1 == nodes.len();
            let label = sanitize(&node.label.text, false);
            let guide = format!("{prefix}{}", if is_last { last } else { branch });
            out.push(Line::raw(
                format!(
                    "{}{}",
                    style.dim(&guide),
                    style.tone(node.label.tone, &label)
                ),
                guide.width() + label.width(),
            ));
            let child_prefix = format!("{prefix}{}", if is_last { space } else { pipe });
            walk(&node.children, &child_prefix, glyphs, style, out);
        }
    }
    let mut out = Vec::new();
    walk(roots, "", (branch, last, pipe, space), style, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::report::Report;

    const PLAIN: Style = Style {
        boxes: false,
        color: false,
    };

    /// The layout the one-pass list replaced: sanitize, measure each line, indent.
    fn list_by_lines(title: &str, items: &[String], style: Style) -> String {
        let body: Vec<Line> = items
            .iter()
            .flat_map(|i| {
                sanitize(i, true)
                    .lines()
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .map(|l| Line::new(style, &l, |_, s| s.to_string()))
            .collect();
        indented(&sanitize(title, false), &body, style)
    }

    #[test]
    fn a_list_renders_as_its_measured_lines_did() {
        let items = vec![
            "diff --git a/x b/x\n@@ -1,2 +1,2 @@\n-a\tb\n+\u{1}c\r\n\n \u{301}\n\u{200b}\n\u{85}é\u{7f}"
                .to_string(),
            String::new(),
            "last line without newline".to_string(),
        ];
        for style in [PLAIN, COLOR] {
            let element = Element::List {
                title: "Diff\tout".into(),
                items: items.clone(),
            };
            assert_eq!(
                render_element(&element, style),
                list_by_lines("Diff\tout", &items, style)
            );
        }
        assert_eq!(sanitize("a\u{9f}b\u{a0}", true), "a<U+009F>b\u{a0}");
        assert_eq!(sanitize("plain text\n", true), "plain text\n");
        assert_eq!(sanitize("plain text\n", false), "plain text ");
    }
    const COLOR: Style = Style {
        boxes: false,
        color: true,
    };
    const TABLE: Style = Style {
        boxes: true,
        color: false,
    };

    fn strip_ansi(s: &str) -> String {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\u{1b}' {
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    fn sample() -> Outcome {
        Outcome::Done(
            Report::ok("x", serde_json::json!({}), "Done")
                .with(Element::panel(
                    "Paths",
                    [("Data Dir", "/tmp/d\u{e9}"), ("Notes", "one\ntwo")],
                ))
                .with(Element::Table {
                    title: "Checks".into(),
                    columns: vec![Column::left("Check"), Column::right("N")],
                    rows: vec![
                        vec![Cell::new("Git", Tone::Good), "12".into()],
                        vec!["Database".into(), "3".into()],
                    ],
                    empty: "No checks.".into(),
                })
                .with(Element::Tree {
                    title: "Tree".into(),
                    roots: vec![TreeNode {
                        label: "root".into(),
                        children: vec![
                            TreeNode {
                                label: "a".into(),
                                children: vec![TreeNode {
                                    label: "a1".into(),
                                    children: vec![],
                                }],
                            },
                            TreeNode {
                                label: "b".into(),
                                children: vec![],
                            },
                        ],
                    }],
                })
                .message(Level::Warn, "careful"),
        )
    }

    #[test]
    fn plain_is_ascii_with_indented_panels_tables_and_trees() {
        let text = render(&sample(), PLAIN);
        assert_eq!(
            text,
            "Paths\n  Data Dir: /tmp/d\u{e9}\n  Notes: one\n         two\n\nChecks\n  Check      N\n  --------  --\n  Git       12\n  Database   3\n\n\
             Tree\n  +-- root\n      +-- a\n      |   +-- a1\n      +-- b\n\n[WARN] careful\n\n[OK] Done\n"
        );
    }

    #[test]
    fn color_is_plain_plus_escape_codes() {
        let colored = render(&sample(), COLOR);
        assert!(colored.contains('\u{1b}'));
        assert_eq!(strip_ansi(&colored), render(&sample(), PLAIN));
    }

    #[test]
    fn table_draws_boxes_around_each_element() {
        let text = render(&sample(), TABLE);
        assert!(
            text.starts_with("\u{256d}\u{2500} Paths \u{2500}"),
            "{text}"
        );
        assert!(text.ends_with("\u{2713} OK Done\n"));
        for line in text.lines().filter(|l| l.starts_with('\u{2502}')) {
            assert!(line.ends_with('\u{2502}'), "{line:?}");
        }
        let widths: Vec<usize> = text.lines().take(4).map(UnicodeWidthStr::width).collect();
        assert!(
            widths.windows(2).all(|w| w[0] == w[1]),
            "box lines share one width: {widths:?}"
        );
    }

    #[test]
    fn control_characters_in_content_are_made_visible() {
        assert_eq!(sanitize("a\u{1b}[31mb\tc\u{7}", false), "a^[[31mb    c^G");
        let out = Outcome::Done(Report::ok("x", serde_json::json!({}), "ok\u{1b}[2J"));
        assert!(!render(&out, PLAIN).contains('\u{1b}'));
    }

    #[test]
    fn empty_tables_say_so() {
        let e = Element::Table {
            title: "Plans".into(),
            columns: vec![Column::left("ID")],
            rows: vec![],
            empty: "No plans found.".into(),
        };
        assert_eq!(render_element(&e, PLAIN), "Plans\n  No plans found.\n");
    }
}
