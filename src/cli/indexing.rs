//! The code index as the CLI shows it (spec 06: the `Indexing` panel of `resource add` and
//! `project link-resource`, `Text Index` in `project show`, `info`, `diagnostics`, json
//! `data.indexing`), and `agents resource reindex`.

use serde_json::{Value, json};

use super::{CliError, Context, view};
use crate::output::progress::Bar;
use crate::output::{Cell, Element, Level, Report, Tone};
use cleveragents_engine::index::{self, IndexState, IndexStatus};
use cleveragents_engine::registry::resources::{self, Resource};

/// `1536` -> `1.5 KiB`.
pub fn bytes(n: u64) -> String {
    let mut v = n as f64;
    for unit in ["B", "KiB", "MiB", "GiB"] {
        if v < 1024.0 || unit == "GiB" {
            return if unit == "B" {
                format!("{n} B")
            } else {
                format!("{v:.1} {unit}")
            };
        }
        v /= 1024.0;
    }
    format!("{n} B")
}

/// A status as json (`data.indexing`).
pub fn status_json(s: &IndexStatus) -> Value {
    let mut v = json!({
        "resource": s.resource,
        "text_index": s.text_index,
        "vector_index": if s.vectors.is_some() { "ready" } else { "disabled" },
        "graph_store": if s.text_index == IndexState::Disabled { "disabled" } else { "sqlite" },
        "indexed_files": s.indexed_files,
        "symbols": s.symbols,
        "skipped": {"binary": s.skipped.binary, "too_large": s.skipped.too_large, "generated": s.skipped.generated, "total": s.skipped.total()},
        "last_indexed_at": s.last_indexed_at.map(|t| t.to_string()),
        "size_bytes": s.size_bytes,
        "indexed_commit": s.indexed_commit,
        "pending_files": s.pending,
    });
    if let Some((chunks, model)) = &s.vectors {
        v["embeddings"] = json!({"model": model, "chunks": chunks});
    }
    v
}

fn state_cell(s: &IndexStatus) -> Cell {
    let tone = match s.text_index {
        IndexState::Ready => Tone::Good,
        IndexState::Indexing | IndexState::Stale => Tone::Warn,
        IndexState::Disabled => Tone::Dim,
    };
    let text = match (s.text_index, s.pending) {
        (IndexState::Stale, Some(n)) => {
            format!("stale ({n} files changed; updated before the next read)")
        }
        (state, _) => state.as_str().to_string(),
    };
    Cell::new(text, tone)
}

/// The rows of an index panel.
pub fn status_entries(s: &IndexStatus) -> Vec<(&'static str, Cell)> {
    let mut rows = vec![("Text Index", state_cell(s))];
    if s.text_index == IndexState::Disabled {
        return rows;
    }
    rows.push(("Indexed Files", s.indexed_files.to_string().into()));
    rows.push(("Symbols", s.symbols.to_string().into()));
    rows.push((
        "Skipped",
        format!(
            "{} (binary {}, too large {}, generated {})",
            s.skipped.total(),
            s.skipped.binary,
            s.skipped.too_large,
            s.skipped.generated
        )
        .into(),
    ));
    rows.push(("Index Size", bytes(s.size_bytes).into()));
    rows.push((
        "Last Indexed",
        s.last_indexed_at
            .as_ref()
            .map(view::time)
            .unwrap_or_else(|| "(never)".into())
            .into(),
    ));
    rows
}

/// Builds a resource's index with a progress bar (rich on a terminal). The json and an
/// `Indexing` panel, or a warning when the build failed (the resource stays registered; the
/// next read builds it).
pub fn build(ctx: &Context, r: &Resource) -> (Value, Option<Element>, Option<String>) {
    if index::target(r).is_none() {
        return (Value::Null, None, None);
    }
    let bar = Bar::start(ctx.format, &ctx.terminal, &format!("Indexing {}", r.name));
    // The json's progress events: one per twentieth of the files at most.
    let events = std::sync::Mutex::new(Vec::<Value>::new());
    let result = index::build_resource(&ctx.paths, r, &|done, total| {
        bar.set(done, total);
        if let Ok(mut e) = events.lock() {
            let step = (total / 20).max(1);
            let last = e.last().and_then(|v| v["done"].as_u64()).unwrap_or(0);
            if done == total || done >= last + step {
                e.push(json!({"event": "progress", "done": done, "total": total}));
            }
        }
    });
    drop(bar);
    match result {
        Ok(Some(b)) => {
            let s = index::status(&ctx.paths, r, false);
            let mut j = status_json(&s);
            j["duration_ms"] = json!(b.duration_ms);
            j["events"] = json!(events.into_inner().unwrap_or_default());
            let mut rows = status_entries(&s);
            rows.push((
                "Duration",
                format!("{:.1}s", b.duration_ms as f64 / 1000.0).into(),
            ));
            (j, Some(Element::panel("Indexing", rows)), None)
        }
        Ok(None) => (Value::Null, None, None),
        Err(e) => (
            json!({"resource": r.name, "text_index": "disabled", "error": e.to_string()}),
            None,
            Some(format!(
                "indexing {} failed: {e}; it is retried before the next read",
                r.name
            )),
        ),
    }
}

/// Adds the build's json, panel and warning to a report.
pub fn attach(mut report: Report, built: (Value, Option<Element>, Option<String>)) -> Report {
    let (j, panel, warning) = built;
    if j.is_null() {
        return report;
    }
    report.data["indexing"] = j;
    if let Some(p) = panel {
        report = report.with(p);
    }
    if let Some(w) = warning {
        report = report.message(Level::Warn, w);
    }
    report
}

/// `agents resource reindex NAME`: rebuilds the resource's index from scratch.
///
/// # Errors
/// Unknown resource; a resource type without files; index failures.
pub fn reindex(ctx: &Context, name: &str) -> Result<Report, CliError> {
    let store = ctx.store()?;
    let r = resources::find(&store, name)?;
    let config = ctx.config()?;
    if !config.file.index.as_ref().is_none_or(|i| i.enabled()) {
        return Err(CliError::new(
            "INVALID_INPUT",
            format!("code indexing is disabled; {} is not indexed", r.name),
        )
        .detail("`[index] enabled = false` in config.toml")
        .hint(ctx.suggest("config list")));
    }
    if index::target(&r).is_none() {
        return Err(CliError::new(
            "INVALID_INPUT",
            format!(
                "resource {} ({}) has no files to index",
                r.name, r.type_name
            ),
        )
        .detail("git-checkout and fs-directory resources are indexed")
        .hint(ctx.suggest("resource list")));
    }
    let (j, panel, warning) = build(ctx, &r);
    if let Some(w) = warning {
        return Err(
            CliError::new("IO_ERROR", w).hint(ctx.suggest(&format!("resource show {}", r.name)))
        );
    }
    let mut report = Report::ok(
        "resource reindex",
        json!({"resource": r.name, "indexing": j}),
        "Resource reindexed",
    );
    if let Some(p) = panel {
        report = report.with(p);
    }
    Ok(report)
}

/// Removes a resource's index after the resource is removed or unlinked; the panel says what
/// was cleaned up.
pub fn cleanup(ctx: &Context, name: &str) -> (Value, Option<Element>) {
    match index::remove_resource(&ctx.paths, name) {
        Ok(Some(files)) => (
            json!({"text_index_removed": files}),
            Some(Element::panel(
                "Index Cleanup",
                [
                    ("Text Index", format!("{files} files removed")),
                    ("Graph Store", "cleared".to_string()),
                ],
            )),
        ),
        Ok(None) => (Value::Null, None),
        Err(e) => (json!({"error": e.to_string()}), None),
    }
}

/// The `Code Index` table of several resources (`project show`, `info`).
pub fn table(statuses: &[IndexStatus]) -> Element {
    Element::Table {
        title: "Code Index".into(),
        columns: vec![
            crate::output::Column::left("Resource"),
            crate::output::Column::left("Text Index"),
            crate::output::Column::right("Indexed Files"),
            crate::output::Column::right("Skipped"),
            crate::output::Column::left("Last Indexed"),
        ],
        rows: statuses
            .iter()
            .map(|s| {
                vec![
                    view::id(s.resource.clone()),
                    state_cell(s),
                    s.indexed_files.to_string().into(),
                    s.skipped.total().to_string().into(),
                    s.last_indexed_at
                        .as_ref()
                        .map(view::time)
                        .unwrap_or_else(|| "(never)".into())
                        .into(),
                ]
            })
            .collect(),
        empty: "No indexed resources.".into(),
    }
}
