//! `agents version`, `info`, `init` and `diagnostics` (spec section 06, top-level commands).

use std::time::Instant;

use serde_json::json;

use super::confirm::confirm;
use super::{CliError, Context, env_var, start_logging};
use crate::output::progress::Spinner;
use crate::output::{Cell, Column, Element, ErrorBody, Level, Message, Report, Tone};
use cleveragents_engine::api::registry_views::{self as sys, CheckStatus, latest_schema_version};
use cleveragents_engine::config::{self, KeyPath};

/// `agents version`.
///
/// # Errors
/// None in practice; the signature matches the other commands.
pub fn version(_ctx: &Context) -> Result<Report, CliError> {
    let data = json!({
        "version": sys::VERSION,
        "schema_version": latest_schema_version(),
        "platform": sys::platform(),
    });
    Ok(Report::ok("version", data, "Version reported")
        .with(Element::panel(
            "CLI Version",
            [("CleverAgents", sys::VERSION.to_string())],
        ))
        .with(Element::panel(
            "Build",
            [
                ("Schema", format!("v{}", latest_schema_version())),
                ("Platform", sys::platform()),
            ],
        )))
}

/// Human size: `812 B`, `4.0 KiB`, `1.2 MiB`.
fn size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn resolved(ctx: &Context, key: &str) -> Result<Option<String>, CliError> {
    let config = ctx.config()?;
    let path = KeyPath::parse(key)?;
    Ok(config::resolve(config, None, &path, &ctx.setting_flags(), &env_var).value)
}

/// The spec's `Server Mode:` line: `disabled` without a server, else where calls go.
fn server_mode(ctx: &Context) -> String {
    ctx.server_mode
        .clone()
        .unwrap_or_else(|| "disabled".to_string())
}

/// `agents info`.
///
/// # Errors
/// An unusable config file or database.
pub fn info(ctx: &Context) -> Result<Report, CliError> {
    ctx.check_store()?;
    ctx.config()?;
    let shown = ctx.client()?.info()?;
    let (info, indexes) = (shown.info, shown.indexes);
    let profile = resolved(ctx, "automation-profile")?.unwrap_or_default();
    let mut data = serde_json::to_value(&info).expect("info serializes");
    data["automation_profile"] = json!(profile);
    data["format"] = json!(ctx.format.as_str());
    let server_mode = server_mode(ctx);
    data["server_mode"] = json!(server_mode);
    data["indexing"] = json!({
        "text_index": if indexes.is_empty() { "disabled" } else { "ready" },
        "vector_index": if indexes.iter().any(|s| s.vectors.is_some()) { "ready" } else { "disabled" },
        "graph_store": if indexes.is_empty() { "disabled" } else { "sqlite" },
        "indexed_files": indexes.iter().map(|s| s.indexed_files).sum::<u64>(),
        "resources": indexes.iter().map(super::indexing::status_json).collect::<Vec<_>>(),
    });
    let config_label = if info.config_exists {
        info.config_path.display().to_string()
    } else {
        format!("{} (not created yet)", info.config_path.display())
    };
    let index_table = super::indexing::table(&indexes);
    Ok(Report::ok("info", data, "Environment details ready")
        .with(Element::panel(
            "Environment",
            [
                ("Data Dir", info.data_dir.display().to_string()),
                ("Config", config_label),
                ("Database", info.database_path.display().to_string()),
                ("Server Mode", server_mode),
                ("Logs", info.log_file.display().to_string()),
                ("Platform", info.platform.clone()),
            ],
        ))
        .with(Element::panel(
            "Runtime",
            [
                ("Version", info.version.clone()),
                ("Automation Profile", profile),
                ("Output Format", ctx.format.as_str().to_string()),
                (
                    "Providers",
                    format!(
                        "{} configured ({} usable now)",
                        info.providers, info.providers_ready
                    ),
                ),
            ],
        ))
        .with(Element::panel(
            "Storage",
            [
                (
                    "Schema",
                    format!(
                        "v{} (latest v{})",
                        info.schema_version, info.latest_schema_version
                    ),
                ),
                ("DB Size", size(info.database_size_bytes)),
                (
                    "Plans",
                    format!(
                        "{} total, {} active, {} processing, {} errored",
                        info.plans.total,
                        info.plans.active,
                        info.plans.processing,
                        info.plans.errored
                    ),
                ),
            ],
        ))
        .with(index_table))
}

/// `agents init [--yes]`.
///
/// # Errors
/// `CONFLICT` while a plan is processing; `NEEDS_APPROVAL` (exit 3) without a terminal and
/// without `--yes`; `ABORTED` when declined; I/O and database errors.
pub fn init(ctx: &Context, yes: bool) -> Result<Report, CliError> {
    // With someone at the terminal, refuse before asking a question whose answer cannot be
    // acted on. Without one, stop at once and read nothing: `reset` checks again anyway.
    if ctx.terminal.stdin_tty && !yes {
        let processing = cleveragents_engine::api::processing_plans(&ctx.paths)?;
        if processing > 0 {
            return Err(
                cleveragents_engine::api::failures::InitError::PlansProcessing(processing).into(),
            );
        }
    }
    let question = format!(
        "Reset {} and {} (both are backed up first)?",
        ctx.paths.data_dir.display(),
        ctx.paths.config_path.display()
    );
    let answer_with = ctx.suggest("init --yes");
    confirm(&question, yes, &ctx.terminal, &answer_with)?;
    let outcome = cleveragents_engine::api::reset_data_dir(&ctx.paths)?;
    let _guard = start_logging(ctx);
    tracing::info!(backup = ?outcome.data_backup, "environment reset");
    let mut data = serde_json::to_value(&outcome).expect("outcome serializes");
    data["next"] = json!(ctx.suggest("info"));
    let shown = |p: &Option<std::path::PathBuf>| {
        p.as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(nothing to back up)".into())
    };
    Ok(Report::ok("init", data, "Environment initialized")
        .with(Element::panel(
            "Environment Reset",
            [
                ("Data Dir", outcome.data_dir.display().to_string()),
                ("Config", outcome.config_path.display().to_string()),
                ("Database", outcome.database_path.display().to_string()),
                ("Schema", format!("v{}", outcome.schema_version)),
            ],
        ))
        .with(Element::panel(
            "Backups",
            [
                ("Data", shown(&outcome.data_backup)),
                ("Config", shown(&outcome.config_backup)),
            ],
        ))
        .with(Element::List {
            title: "Next Steps".into(),
            items: vec![ctx.suggest("info")],
        }))
}

/// A check's fix as printed: its advice, or its step as the command for this environment
/// (advice that is itself an `agents ...` command repeats `--data-dir` / `--config-path`).
fn fix_text(ctx: &Context, c: &cleveragents_engine::domain::check::Check) -> Option<String> {
    match (&c.fix, &c.fix_step) {
        (Some(f), _) => Some(ctx.rewrite(f)),
        (None, Some(step)) => Some(ctx.next(step)),
        (None, None) => None,
    }
}

/// `agents diagnostics`.
///
/// # Errors
/// None: every problem found is a check result. Exits 1 when any check is an error.
pub fn diagnostics(ctx: &Context) -> Result<Report, CliError> {
    let started = Instant::now();
    let spinner = Spinner::start(ctx.format, &ctx.terminal, "Running checks");
    let checks = ctx.client()?.diagnostics();
    drop(spinner);
    let checks = checks?;
    let count = |s: CheckStatus| checks.iter().filter(|c| c.status == s).count();
    let (warnings, errors) = (count(CheckStatus::Warn), count(CheckStatus::Error));
    let rows = checks
        .iter()
        .map(|c| {
            let tone = match c.status {
                CheckStatus::Ok => Tone::Good,
                CheckStatus::Warn => Tone::Warn,
                CheckStatus::Error => Tone::Bad,
            };
            vec![
                Cell::from(c.name.as_str()),
                Cell::new(c.status.label(), tone),
                Cell::from(c.details.as_str()),
            ]
        })
        .collect();
    // Fix commands repeat --data-dir / --config-path so that they act on this environment.
    let fixes_for = |status: CheckStatus| -> Vec<String> {
        checks
            .iter()
            .filter(|c| c.status == status)
            .filter_map(|c| fix_text(ctx, c).map(|f| format!("{}: {f}", c.name)))
            .collect()
    };
    let (must_fix, recommended) = (fixes_for(CheckStatus::Error), fixes_for(CheckStatus::Warn));
    let elapsed_ms = started.elapsed().as_millis();
    let data = json!({
        "checks": checks.iter().map(|c| {
            let mut v = serde_json::to_value(c).expect("checks serialize");
            v["fix"] = json!(fix_text(ctx, c));
            v
        }).collect::<Vec<_>>(),
        "summary": {"total": checks.len(), "warnings": warnings, "errors": errors, "duration_ms": elapsed_ms},
    });
    let mut report = Report::ok("diagnostics", data, "")
        .with(Element::Table {
            title: "Checks".into(),
            columns: vec![
                Column::left("Check"),
                Column::left("Status"),
                Column::left("Details"),
            ],
            rows,
            empty: "No checks ran.".into(),
        })
        .with(Element::panel(
            "Summary",
            [
                ("Checks", format!("{} total", checks.len())),
                ("Warnings", warnings.to_string()),
                ("Errors", errors.to_string()),
                ("Duration", format!("{elapsed_ms} ms")),
            ],
        ));
    if !must_fix.is_empty() {
        report = report.with(Element::List {
            title: "Errors (must fix)".into(),
            items: must_fix.clone(),
        });
    }
    if !recommended.is_empty() {
        report = report.with(Element::List {
            title: "Recommendations".into(),
            items: recommended,
        });
    }
    if errors > 0 {
        let message = format!(
            "{} must be resolved before CleverAgents can operate",
            plural(errors, "error", "errors")
        );
        return Ok(report.failed(ErrorBody {
            code: "CHECKS_FAILED",
            message,
            detail: None,
            suggestions: must_fix,
            exit: super::error::exit_of_str("CHECKS_FAILED"),
        }));
    }
    report.status = if warnings > 0 {
        Message {
            level: Level::Warn,
            text: format!(
                "{} require attention",
                plural(warnings, "warning", "warnings")
            ),
        }
    } else {
        Message {
            level: Level::Ok,
            text: format!("All {} checks passed", checks.len()),
        }
    };
    Ok(report)
}

/// `1 error`, `2 errors`.
pub fn plural(n: usize, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

#[cfg(test)]
mod tests {
    use super::size;

    #[test]
    fn sizes_are_human_readable() {
        assert_eq!(size(812), "812 B");
        assert_eq!(size(4096), "4.0 KiB");
        assert_eq!(size(3 * 1024 * 1024 + 200_000), "3.2 MiB");
    }
}
