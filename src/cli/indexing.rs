//! The code index as the CLI shows it (spec 06: the `Indexing` panel of `resource add` and
//! `project link-resource`, `Text Index` in `project show`, `info`, `diagnostics`, json
//! `data.indexing`), and `agents resource reindex`.

use serde_json::{Value, json};

use super::{CliError, Context, view};
use crate::output::progress::Spinner;
use crate::output::{Cell, Element, Level, Report, Tone};
use cleveragents_engine::api::registry_views::{IndexState, IndexStatus};
use cleveragents_engine::api::{self, IndexOutcome, IndexRemoved, NotIndexed};

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

/// What a build or update of an index shows: its json, an `Indexing` panel, a warning.
pub type Built = (Value, Option<Element>, Option<String>);

/// Builds the index of resource `name` (with `update`, brings an existing one up to date),
/// where its data directory is, with a spinner (rich on a terminal). The json and an
/// `Indexing` panel, or a warning when the build failed (the resource stays registered; the
/// next read builds it).
///
/// # Errors
/// The resource's error; a transport failure.
pub fn build(ctx: &Context, name: &str, update: bool) -> Result<Built, CliError> {
    let spinner = Spinner::start(ctx.format, &ctx.terminal, &format!("Indexing {name}"));
    let outcome = ctx.change(api::BuildIndex {
        resource: name.to_string(),
        update,
    });
    drop(spinner);
    Ok(shown(name, outcome?))
}

/// How an index outcome is shown.
fn shown(name: &str, outcome: IndexOutcome) -> Built {
    match outcome {
        IndexOutcome::NotIndexed { .. } => (Value::Null, None, None),
        IndexOutcome::Built {
            status,
            duration_ms,
            progress,
        } => {
            let mut j = status_json(&status);
            j["duration_ms"] = json!(duration_ms);
            j["events"] = progress
                .iter()
                .map(|p| json!({"event": "progress", "done": p.done, "total": p.total}))
                .collect();
            let mut rows = status_entries(&status);
            rows.push((
                "Duration",
                format!("{:.1}s", duration_ms as f64 / 1000.0).into(),
            ));
            (j, Some(Element::panel("Indexing", rows)), None)
        }
        IndexOutcome::Updated { status } => (
            status_json(&status),
            Some(Element::panel("Indexing", status_entries(&status))),
            None,
        ),
        IndexOutcome::BuildFailed { error } => (
            json!({"resource": name, "text_index": "disabled", "error": error}),
            None,
            Some(format!(
                "indexing {name} failed: {error}; it is retried before the next read"
            )),
        ),
        IndexOutcome::UpdateFailed { error } => (
            json!({"error": error}),
            None,
            Some(format!("updating the index of {name} failed: {error}")),
        ),
    }
}

/// Adds the build's json, panel and warning to a report.
pub fn attach(mut report: Report, built: Built) -> Report {
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
    ctx.check_store()?;
    ctx.config()?;
    let spinner = Spinner::start(ctx.format, &ctx.terminal, &format!("Indexing {name}"));
    let outcome = ctx.change(api::BuildIndex {
        resource: name.to_string(),
        update: false,
    });
    drop(spinner);
    let outcome = outcome?;
    let (name, type_name) = match &outcome {
        IndexOutcome::Built { status, .. } => (status.resource.clone(), None),
        _ => {
            let r = ctx.client()?.resource(name)?.details.resource;
            (r.name, Some(r.type_name))
        }
    };
    match (&outcome, type_name) {
        (
            IndexOutcome::NotIndexed {
                why: NotIndexed::Off,
            },
            _,
        ) => {
            return Err(CliError::new(
                "INVALID_INPUT",
                format!("code indexing is disabled; {name} is not indexed"),
            )
            .detail("`[index] enabled = false` in config.toml")
            .hint(ctx.suggest("config list")));
        }
        (
            IndexOutcome::NotIndexed {
                why: NotIndexed::NoFiles,
            },
            Some(t),
        ) => {
            return Err(CliError::new(
                "INVALID_INPUT",
                format!("resource {name} ({t}) has no files to index"),
            )
            .detail("git-checkout and fs-directory resources are indexed")
            .hint(ctx.suggest("resource list")));
        }
        _ => {}
    }
    let (j, panel, warning) = shown(&name, outcome);
    if let Some(w) = warning {
        return Err(
            CliError::new("IO_ERROR", w).hint(ctx.suggest(&format!("resource show {name}")))
        );
    }
    let mut report = Report::ok(
        "resource reindex",
        json!({"resource": name, "indexing": j}),
        "Resource reindexed",
    );
    if let Some(p) = panel {
        report = report.with(p);
    }
    Ok(report)
}

/// Removes a resource's index after the resource is removed or unlinked; the panel says what
/// was cleaned up.
///
/// # Errors
/// A transport failure.
pub fn cleanup(ctx: &Context, name: &str) -> Result<(Value, Option<Element>), CliError> {
    let removed = ctx.change(api::RemoveIndex {
        resource: name.to_string(),
    })?;
    Ok(match removed {
        IndexRemoved::Removed { files } => (
            json!({"text_index_removed": files}),
            Some(Element::panel(
                "Index Cleanup",
                [
                    ("Text Index", format!("{files} files removed")),
                    ("Graph Store", "cleared".to_string()),
                ],
            )),
        ),
        IndexRemoved::Nothing => (Value::Null, None),
        IndexRemoved::Failed { error } => (json!({"error": error}), None),
    })
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
