//! Syntax highlighting (syntect) and intraline highlights (similar's inline diff) of diff
//! hunks, computed off the draw path.
//!
//! The diff pane asks for the hunks it is about to show ([`crate::App::take_highlight_request`]);
//! a [`Worker`] thread answers with a [`HighlightResult`] that goes back in as
//! [`crate::Msg::Highlighted`]. The worker always works on the newest request (older queued ones
//! are dropped, and a request being worked on is abandoned between hunks when a newer one
//! arrives), and the pane drops results whose `generation` is not the diff it shows now.

use std::collections::BTreeSet;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};

use serde::{Deserialize, Serialize};
use similar::{ChangeTag, TextDiff};
use syntect::easy::HighlightLines;
use syntect::highlighting::ThemeSet;
use syntect::parsing::SyntaxSet;

use crate::model::DiffLineKind;

/// Runs of removed/added lines longer than this get no intraline highlights (the inline diff
/// is quadratic in the worst case, and a wholesale rewrite gains nothing from it).
pub const MAX_INTRALINE_RUN: usize = 200;

/// Hunks are highlighted in chunks of this many lines, so a huge hunk's visible part comes
/// back quickly (syntax state restarts at each chunk).
pub const CHUNK_LINES: usize = 256;

/// One hunk to highlight.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HunkSource {
    /// Index of the file in the diff.
    pub file: usize,
    /// Index of the hunk in the file.
    pub hunk: usize,
    /// Index in the hunk of the first line given (long hunks are highlighted in chunks of
    /// [`CHUNK_LINES`]).
    pub first_line: usize,
    /// The file's path (its extension picks the syntax).
    pub path: String,
    /// The hunk's lines.
    pub lines: Vec<(DiffLineKind, String)>,
}

/// What the diff pane wants highlighted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HighlightRequest {
    /// The diff this belongs to; results for another generation are dropped.
    pub generation: u64,
    /// The syntect theme for syntax colours (`None`: intraline highlights only).
    pub syntax_theme: Option<String>,
    /// The hunks, in display order.
    pub hunks: Vec<HunkSource>,
}

impl HighlightRequest {
    /// The (file, hunk, first line) chunks requested.
    pub fn keys(&self) -> BTreeSet<(usize, usize, usize)> {
        self.hunks
            .iter()
            .map(|h| (h.file, h.hunk, h.first_line))
            .collect()
    }
}

/// A piece of a line: a byte range of its text, its syntax colour, and whether the inline diff
/// emphasises it (the words that changed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Syntax colour as red, green, blue.
    pub rgb: Option<[u8; 3]>,
    /// Whether the words changed within a changed line.
    pub emphasis: bool,
}

/// The highlights of one chunk of a hunk: per line, segments covering the whole text in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HunkHighlight {
    /// Index of the file in the diff.
    pub file: usize,
    /// Index of the hunk in the file.
    pub hunk: usize,
    /// Index in the hunk of the first line.
    pub first_line: usize,
    /// One list of segments per line of the hunk.
    pub lines: Vec<Vec<Segment>>,
}

/// The answer to a [`HighlightRequest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HighlightResult {
    /// The request's generation.
    pub generation: u64,
    /// The highlighted hunks (all of the request's, unless it was abandoned for a newer one).
    pub hunks: Vec<HunkHighlight>,
}

/// Loaded syntaxes and syntect themes (loading takes tens of milliseconds: do it once, on the
/// worker thread).
pub struct Highlighter {
    syntaxes: SyntaxSet,
    themes: ThemeSet,
}

impl std::fmt::Debug for Highlighter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Highlighter").finish_non_exhaustive()
    }
}

impl Default for Highlighter {
    fn default() -> Self {
        Self::new()
    }
}

impl Highlighter {
    /// Loads syntect's default syntaxes and themes.
    pub fn new() -> Self {
        Self {
            syntaxes: SyntaxSet::load_defaults_newlines(),
            themes: ThemeSet::load_defaults(),
        }
    }

    /// The syntect theme names available for theme files' `syntax` key.
    pub fn theme_names(&self) -> Vec<&str> {
        self.themes.themes.keys().map(String::as_str).collect()
    }

    /// Highlights every hunk of the request; `abandon` is asked between hunks and stops the
    /// work early when it says true (a newer request is waiting).
    pub fn highlight(
        &self,
        request: &HighlightRequest,
        abandon: &mut dyn FnMut() -> bool,
    ) -> HighlightResult {
        let mut hunks = Vec::with_capacity(request.hunks.len());
        for source in &request.hunks {
            if abandon() {
                break;
            }
            hunks.push(self.hunk(source, request.syntax_theme.as_deref()));
        }
        HighlightResult {
            generation: request.generation,
            hunks,
        }
    }

    fn hunk(&self, source: &HunkSource, theme: Option<&str>) -> HunkHighlight {
        let emphasis = intraline(&source.lines);
        let syntax = theme
            .and_then(|name| self.themes.themes.get(name))
            .and_then(|theme| {
                let ext = source.path.rsplit('/').next().unwrap_or_default();
                let ext = ext.rsplit_once('.').map_or(ext, |(_, e)| e);
                let syntax = self.syntaxes.find_syntax_by_extension(ext)?;
                Some((syntax, theme))
            });
        let colours: Vec<Vec<(usize, usize, [u8; 3])>> = match syntax {
            None => vec![Vec::new(); source.lines.len()],
            Some((syntax, theme)) => {
                // Two parse states: the old side (context and removed lines) and the new side
                // (context and added lines), so each side is parsed as the text it belongs to.
                let mut old = HighlightLines::new(syntax, theme);
                let mut new = HighlightLines::new(syntax, theme);
                source
                    .lines
                    .iter()
                    .map(|(kind, text)| {
                        let line = format!("{text}\n");
                        let colour = |h: &mut HighlightLines| {
                            let mut out = Vec::new();
                            let mut pos = 0;
                            for (style, piece) in
                                h.highlight_line(&line, &self.syntaxes).unwrap_or_default()
                            {
                                let end = (pos + piece.len()).min(text.len());
                                if end > pos {
                                    let c = style.foreground;
                                    out.push((pos, end, [c.r, c.g, c.b]));
                                }
                                pos += piece.len();
                            }
                            out
                        };
                        match kind {
                            DiffLineKind::Removed => colour(&mut old),
                            DiffLineKind::Added => colour(&mut new),
                            DiffLineKind::Context => {
                                colour(&mut old);
                                colour(&mut new)
                            }
                        }
                    })
                    .collect()
            }
        };
        let lines = source
            .lines
            .iter()
            .zip(colours)
            .zip(emphasis)
            .map(|(((_, text), colours), emphasis)| merge(text.len(), &colours, &emphasis))
            .collect();
        HunkHighlight {
            file: source.file,
            hunk: source.hunk,
            first_line: source.first_line,
            lines,
        }
    }
}

/// The byte ranges the inline diff emphasises, per line: each run of removed lines followed
/// by added lines is diffed as two texts, and the changed words of paired lines are marked.
pub fn intraline(lines: &[(DiffLineKind, String)]) -> Vec<Vec<(usize, usize)>> {
    let mut out = vec![Vec::new(); lines.len()];
    let mut i = 0;
    while i < lines.len() {
        if lines[i].0 != DiffLineKind::Removed {
            i += 1;
            continue;
        }
        let removed = i;
        while i < lines.len() && lines[i].0 == DiffLineKind::Removed {
            i += 1;
        }
        let added = i;
        while i < lines.len() && lines[i].0 == DiffLineKind::Added {
            i += 1;
        }
        let (old_n, new_n) = (added - removed, i - added);
        if new_n == 0 || old_n > MAX_INTRALINE_RUN || new_n > MAX_INTRALINE_RUN {
            continue;
        }
        let join = |range: std::ops::Range<usize>| -> String {
            lines[range].iter().map(|(_, t)| format!("{t}\n")).collect()
        };
        let (old, new) = (join(removed..added), join(added..i));
        let diff = TextDiff::from_lines(&old, &new);
        for op in diff.ops() {
            for change in diff.iter_inline_changes(op) {
                let line = match change.tag() {
                    ChangeTag::Delete => change.old_index().map(|n| removed + n),
                    ChangeTag::Insert => change.new_index().map(|n| added + n),
                    ChangeTag::Equal => None,
                };
                let Some(line) = line.filter(|l| *l < lines.len()) else {
                    continue;
                };
                let len = lines[line].1.len();
                let mut pos = 0;
                let values: Vec<(bool, String)> = change
                    .iter_strings_lossy()
                    .map(|(e, s)| (e, s.into_owned()))
                    .collect();
                // A line with every word emphasised was not paired: leave it plain.
                if values.iter().all(|(e, _)| *e) {
                    continue;
                }
                for (emphasised, text) in values {
                    let end = (pos + text.len()).min(len);
                    if emphasised && end > pos {
                        out[line].push((pos, end));
                    }
                    pos += text.len();
                }
            }
        }
    }
    out
}

/// Cuts a line of `len` bytes into segments at every colour and emphasis boundary.
fn merge(
    len: usize,
    colours: &[(usize, usize, [u8; 3])],
    emphasis: &[(usize, usize)],
) -> Vec<Segment> {
    let mut cuts: BTreeSet<usize> = BTreeSet::from([0, len]);
    for (s, e, _) in colours {
        cuts.insert(*s);
        cuts.insert(*e);
    }
    for (s, e) in emphasis {
        cuts.insert(*s);
        cuts.insert(*e);
    }
    let cuts: Vec<usize> = cuts.into_iter().filter(|c| *c <= len).collect();
    let mut out: Vec<Segment> = Vec::new();
    for pair in cuts.windows(2) {
        let (start, end) = (pair[0], pair[1]);
        if start == end {
            continue;
        }
        let rgb = colours
            .iter()
            .find(|(s, e, _)| *s <= start && start < *e)
            .map(|c| c.2);
        let emph = emphasis.iter().any(|(s, e)| *s <= start && start < *e);
        match out.last_mut() {
            Some(last) if last.rgb == rgb && last.emphasis == emph && last.end == start => {
                last.end = end;
            }
            _ => out.push(Segment {
                start,
                end,
                rgb,
                emphasis: emph,
            }),
        }
    }
    out
}

/// A highlighting thread: send requests, collect results without blocking.
#[derive(Debug)]
pub struct Worker {
    requests: Sender<HighlightRequest>,
    results: Receiver<HighlightResult>,
}

impl Worker {
    /// Starts the thread (it loads syntect's sets first, off the caller's thread).
    pub fn spawn() -> Self {
        let (req_tx, req_rx) = mpsc::channel::<HighlightRequest>();
        let (res_tx, res_rx) = mpsc::channel();
        std::thread::spawn(move || {
            let highlighter = Highlighter::new();
            let mut next: Option<HighlightRequest> = None;
            loop {
                let mut request = match next.take() {
                    Some(r) => r,
                    None => match req_rx.recv() {
                        Ok(r) => r,
                        Err(_) => return,
                    },
                };
                // Newest request wins: skip everything queued behind it.
                while let Ok(newer) = req_rx.try_recv() {
                    request = newer;
                }
                let mut abandon = || match req_rx.try_recv() {
                    Ok(newer) => {
                        next = Some(newer);
                        true
                    }
                    Err(TryRecvError::Empty | TryRecvError::Disconnected) => false,
                };
                let result = highlighter.highlight(&request, &mut abandon);
                if res_tx.send(result).is_err() {
                    return;
                }
            }
        });
        Self {
            requests: req_tx,
            results: res_rx,
        }
    }

    /// Queues a request (the worker skips to the newest).
    pub fn request(&self, request: HighlightRequest) {
        let _ = self.requests.send(request);
    }

    /// The results that are ready, oldest first.
    pub fn ready(&self) -> Vec<HighlightResult> {
        self.results.try_iter().collect()
    }

    /// Waits up to `timeout` for one result (for tests and tools).
    pub fn wait(&self, timeout: std::time::Duration) -> Option<HighlightResult> {
        self.results.recv_timeout(timeout).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use DiffLineKind::{Added, Context, Removed};

    fn lines(items: &[(DiffLineKind, &str)]) -> Vec<(DiffLineKind, String)> {
        items.iter().map(|(k, t)| (*k, (*t).to_owned())).collect()
    }

    #[test]
    fn intraline_marks_only_the_changed_words_of_paired_lines() {
        let hunk = lines(&[
            (Context, "fn main() {"),
            (Removed, "    let total = price * 2;"),
            (Added, "    let total = price * 3;"),
            (Context, "}"),
        ]);
        let marks = intraline(&hunk);
        assert_eq!(marks[0], []);
        assert_eq!(marks[3], []);
        let old = &hunk[1].1;
        let new = &hunk[2].1;
        let words = |text: &str, ranges: &[(usize, usize)]| -> Vec<String> {
            ranges
                .iter()
                .map(|(s, e)| text[*s..*e].to_owned())
                .collect()
        };
        // similar's inline diff works on words (punctuation sticks to its word).
        assert_eq!(words(old, &marks[1]), ["2;"]);
        assert_eq!(words(new, &marks[2]), ["3;"]);
    }

    #[test]
    fn unpaired_lines_get_no_intraline_marks() {
        let hunk = lines(&[(Added, "brand new line"), (Removed, "gone")]);
        assert_eq!(intraline(&hunk), [vec![], vec![]]);
    }

    #[test]
    fn rust_code_gets_syntax_colours_and_segments_cover_each_line() {
        let highlighter = Highlighter::new();
        let request = HighlightRequest {
            generation: 7,
            syntax_theme: Some("base16-ocean.dark".into()),
            hunks: vec![HunkSource {
                file: 0,
                hunk: 1,
                first_line: 0,
                path: "src/lib.rs".into(),
                lines: lines(&[(Removed, "let x = 1;"), (Added, "let x = 2;")]),
            }],
        };
        let result = highlighter.highlight(&request, &mut || false);
        assert_eq!(result.generation, 7);
        let hunk = &result.hunks[0];
        assert_eq!((hunk.file, hunk.hunk), (0, 1));
        for (line, (_, text)) in hunk.lines.iter().zip(&request.hunks[0].lines) {
            assert_eq!(line.first().map(|s| s.start), Some(0));
            assert_eq!(line.last().map(|s| s.end), Some(text.len()));
            assert!(line.windows(2).all(|w| w[0].end == w[1].start));
            let colours: BTreeSet<_> = line.iter().filter_map(|s| s.rgb).collect();
            assert!(colours.len() >= 2, "keyword and number differ: {line:?}");
        }
        let emphasised: String = hunk.lines[1]
            .iter()
            .filter(|s| s.emphasis)
            .map(|s| &request.hunks[0].lines[1].1[s.start..s.end])
            .collect();
        assert_eq!(emphasised, "2;");
    }

    #[test]
    fn unknown_languages_and_no_theme_give_plain_segments() {
        let highlighter = Highlighter::new();
        for (path, theme) in [
            ("notes.unknownext", Some("base16-ocean.dark")),
            ("a.rs", None),
        ] {
            let request = HighlightRequest {
                generation: 1,
                syntax_theme: theme.map(str::to_owned),
                hunks: vec![HunkSource {
                    file: 0,
                    hunk: 0,
                    first_line: 0,
                    path: path.into(),
                    lines: lines(&[(Context, "plain text")]),
                }],
            };
            let result = highlighter.highlight(&request, &mut || false);
            assert_eq!(
                result.hunks[0].lines,
                [vec![Segment {
                    start: 0,
                    end: 10,
                    rgb: None,
                    emphasis: false
                }]]
            );
        }
    }

    #[test]
    fn an_abandoned_request_stops_between_hunks() {
        let highlighter = Highlighter::new();
        let hunk = |n| HunkSource {
            file: 0,
            hunk: n,
            first_line: 0,
            path: "a.txt".into(),
            lines: lines(&[(Context, "x")]),
        };
        let request = HighlightRequest {
            generation: 1,
            syntax_theme: None,
            hunks: vec![hunk(0), hunk(1), hunk(2)],
        };
        let mut calls = 0;
        let result = highlighter.highlight(&request, &mut || {
            calls += 1;
            calls > 1
        });
        assert_eq!(result.hunks.len(), 1);
    }

    #[test]
    fn the_worker_answers_with_the_newest_request() {
        let worker = Worker::spawn();
        for generation in 1..=3 {
            worker.request(HighlightRequest {
                generation,
                syntax_theme: None,
                hunks: vec![],
            });
        }
        let mut seen = Vec::new();
        while let Some(result) = worker.wait(std::time::Duration::from_secs(10)) {
            seen.push(result.generation);
            if result.generation == 3 {
                break;
            }
        }
        assert_eq!(seen.last(), Some(&3));
        assert!(seen.len() <= 3);
    }
}
