//! `agents server audit` and `agents server audit verify` (spec sections 21 and 28,
//! "auditing"): the server's audit log, read with filters, and the check of its hash chain.
//! On the server host they read its data directory (or `--database`); with `--server` the
//! server answers.

use clap::{Args, Subcommand};
use jiff::{SignedDuration, Timestamp};
use serde_json::json;

use super::{CliError, Context};
use crate::output::{Cell, Column, Element, ErrorBody, Report, Tone};
use cleveragents_engine::api::{self, AuditFilter, AuditHead, AuditRecord, Client};

/// `agents server audit` arguments: the filters of the listing, or a subcommand.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct AuditArgs {
    /// Check the log instead of listing it
    #[command(subcommand)]
    pub command: Option<AuditCommand>,
    /// Only this user's requests
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Only requests whose target is in this organization's namespace
    #[arg(long, value_name = "ORG")]
    pub org: Option<String>,
    /// Only rows since this time: RFC 3339 (`2026-12-01T00:00:00Z`) or an age (`30m`, `1h`,
    /// `7d`, `2w`)
    #[arg(long, value_name = "TIME")]
    pub since: Option<String>,
    /// At most this many rows, the newest (default 100, at most 10000)
    #[arg(long, value_name = "N")]
    pub limit: Option<u32>,
    /// PostgreSQL database of the server's records, on the server host
    /// (`postgres://USER:PASSWORD@HOST:PORT/DB`; default: AGENTS_DATABASE_URL, else the SQLite
    /// file in --data-dir)
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
}

/// `agents server audit` subcommands.
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check the hash chain: exit 0 when intact, else name the first row altered or missing
    Verify(VerifyArgs),
}

/// `agents server audit verify` arguments.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// Also check that the log still holds a head printed by an earlier verify (`SEQ:HASH`):
    /// finds rows deleted from the end and a chain rewritten after an edit
    #[arg(long, value_name = "SEQ:HASH")]
    pub head: Option<String>,
    /// PostgreSQL database of the server's records, on the server host
    /// (`postgres://USER:PASSWORD@HOST:PORT/DB`; default: AGENTS_DATABASE_URL, else the SQLite
    /// file in --data-dir)
    #[arg(long, value_name = "URL")]
    pub database: Option<String>,
}

impl AuditArgs {
    /// The subcommand's name as the envelope's `command` shows it (after `server`).
    pub fn name(&self) -> &'static str {
        match self.command {
            Some(AuditCommand::Verify(_)) => "audit verify",
            None => "audit",
        }
    }
}

/// The engine of this host's data directory, keeping its records in the `--database` given.
pub type HostEngine<'a> = dyn Fn(Option<String>) -> Result<api::Engine, CliError> + 'a;

/// Runs `agents server audit [verify]`; `host` makes the engine on the server host.
///
/// # Errors
/// `INVALID_INPUT` for a bad `--since`, `--limit` or `--head`, or `--database` with
/// `--server`; the engine's and the transport's errors.
pub fn run(a: AuditArgs, ctx: &Context, host: &HostEngine<'_>) -> Result<Report, CliError> {
    match a.command {
        Some(AuditCommand::Verify(v)) => {
            let head = v.head.as_deref().map(parse_head).transpose()?;
            verify(&*client(ctx, v.database, host)?, head, ctx)
        }
        None => {
            let filter = AuditFilter {
                user: a.user,
                namespace: a.org,
                since: a.since.as_deref().map(parse_since).transpose()?,
                limit: a.limit,
            };
            list(&*client(ctx, a.database, host)?, filter)
        }
    }
}

/// The chosen server's API, or this host's engine on its data directory or `--database`.
fn client(
    ctx: &Context,
    database: Option<String>,
    host: &HostEngine<'_>,
) -> Result<Box<dyn Client>, CliError> {
    match &ctx.server {
        Some(chosen) => {
            // AGENTS_DATABASE_URL exported on a client is ignored, as by every command sent
            // to a server; the flag typed with --server is refused rather than ignored.
            if database.is_some() {
                return Err(CliError::invalid_input(
                    "--database names the server host's own database; through --server the server reads its own",
                )
                .hint("drop --database, or run the command on the server host without --server"));
            }
            chosen.client()
        }
        None => Ok(Box::new(host(
            database.or_else(|| super::env_var("AGENTS_DATABASE_URL")),
        )?)),
    }
}

/// `--since`: an RFC 3339 time, or an age counted back from now (`90s`, `30m`, `1h`, `7d`,
/// `2w`).
fn parse_since(text: &str) -> Result<Timestamp, CliError> {
    let bad = || {
        CliError::invalid_input(format!(
            "--since {text}: give an RFC 3339 time or an age such as 30m, 1h, 7d or 2w"
        ))
        .hint("e.g. --since 2026-12-01T00:00:00Z, or --since 24h")
    };
    let text = text.trim();
    if let Ok(t) = text.parse::<Timestamp>() {
        return Ok(t);
    }
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (count, unit) = text.split_at(split);
    let count: i64 = count.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3_600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(bad()),
    };
    let age = count
        .checked_mul(seconds)
        .map(SignedDuration::from_secs)
        .ok_or_else(bad)?;
    Timestamp::now().checked_sub(age).map_err(|_| bad())
}

/// `--head SEQ:HASH`.
fn parse_head(text: &str) -> Result<AuditHead, CliError> {
    let bad = || {
        CliError::invalid_input(format!(
            "--head {text}: give the head an earlier verify printed, as SEQ:HASH"
        ))
        .hint("use the Head an earlier `server audit verify` printed, e.g. --head 12:3f9a… (64 hex digits)")
    };
    let (seq, hash) = text.trim().split_once(':').ok_or_else(bad)?;
    let seq: i64 = seq.parse().map_err(|_| bad())?;
    let hex = hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit());
    if seq < 1 || !hex {
        return Err(bad());
    }
    Ok(AuditHead {
        seq,
        hash: hash.to_ascii_lowercase(),
    })
}

fn or_dash(v: Option<&str>) -> Cell {
    super::view::or(v, "-")
}

fn outcome(r: &AuditRecord) -> Cell {
    match (&r.allowed, &r.reason) {
        (true, _) => Cell::new("allowed", Tone::Good),
        (false, Some(reason)) => Cell::new(format!("denied: {reason}"), Tone::Bad),
        (false, None) => Cell::new("denied", Tone::Bad),
    }
}

fn list(client: &dyn Client, filter: AuditFilter) -> Result<Report, CliError> {
    let rows = client.audit_log(filter.clone())?;
    let table = rows
        .iter()
        .map(|r| {
            vec![
                Cell::new(r.seq.to_string(), Tone::Id),
                super::view::time(&r.at).into(),
                or_dash(r.user.as_deref()),
                r.operation.clone().into(),
                or_dash(r.namespace.as_deref()),
                or_dash(r.target.as_deref()),
                or_dash(r.address.as_deref()),
                outcome(r),
            ]
        })
        .collect();
    let limit = filter.limit.unwrap_or(api::audit::DEFAULT_LIMIT);
    let status = if rows.len() as u64 == u64::from(limit) {
        format!(
            "{} audit row(s), the newest (raise --limit for more)",
            rows.len()
        )
    } else {
        format!("{} audit row(s)", rows.len())
    };
    Ok(Report::ok(
        "server audit",
        json!({"rows": rows, "filter": filter}),
        status,
    )
    .with(Element::Table {
        title: "Audit log".into(),
        columns: vec![
            Column::right("Seq"),
            Column::left("Time"),
            Column::left("User"),
            Column::left("Operation"),
            Column::left("Namespace"),
            Column::left("Target"),
            Column::left("Address"),
            Column::left("Outcome"),
        ],
        rows: table,
        empty: "No audit rows.".into(),
    }))
}

fn verify(client: &dyn Client, head: Option<AuditHead>, ctx: &Context) -> Result<Report, CliError> {
    let verdict = client.audit_verify(head)?;
    let report = Report::ok(
        "server audit verify",
        &verdict,
        format!("audit log intact: {} rows", verdict.rows),
    );
    let Some(broken) = verdict.first_break.clone() else {
        let shown = verdict
            .head
            .as_ref()
            .map_or("(empty log)".to_string(), |h| {
                format!("{}:{}", h.seq, h.hash)
            });
        return Ok(report.with(Element::panel(
            "Audit log",
            [("Rows", verdict.rows.to_string()), ("Head", shown)],
        )));
    };
    let trusted = match broken.kind {
        api::AuditBreakKind::Truncated | api::AuditBreakKind::Rewritten => {
            "the log no longer holds the head recorded earlier: no row can be trusted".to_string()
        }
        _ if broken.seq > 1 => format!(
            "rows 1 to {} are intact; row {} and every row after it cannot be trusted",
            broken.seq - 1,
            broken.seq
        ),
        _ => "row 1 and every row after it cannot be trusted".to_string(),
    };
    let hints = vec![
        "keep a copy of the database as it is now (evidence), then restore it from a backup taken before the change".to_string(),
        format!(
            "list the rows: {}",
            ctx.suggest("server audit --limit 10000 --format json")
        ),
    ];
    let kind = serde_json::to_value(broken.kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let body = ErrorBody {
        code: "CHECKS_FAILED",
        message: format!(
            "audit log broken at row {}: {}",
            broken.seq,
            broken.describe()
        ),
        detail: Some(trusted.clone()),
        suggestions: hints.clone(),
        exit: super::error::exit_of_str("CHECKS_FAILED"),
    };
    // A report that fails draws its own elements only: the break and the hints are shown here.
    Ok(report
        .with(Element::panel(
            "Audit log broken",
            [
                ("Row", broken.seq.to_string()),
                ("Kind", kind),
                ("Expected", broken.expected.clone()),
                ("Found", broken.found.clone()),
                ("Trust", trusted),
            ],
        ))
        .with(Element::List {
            title: "Try".into(),
            items: hints,
        })
        .failed(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_takes_a_time_or_an_age() {
        let t = parse_since("2026-12-01T00:00:00Z").unwrap();
        assert_eq!(t.to_string(), "2026-12-01T00:00:00Z");
        let age = |text| {
            Timestamp::now()
                .duration_since(parse_since(text).unwrap())
                .as_secs()
        };
        assert!((3_599..=3_601).contains(&age("1h")));
        assert!((604_799..=604_801).contains(&age("7d")));
        for bad in ["", "h", "1y", "yesterday", "99999999999999999w", "-1h"] {
            let err = parse_since(bad).unwrap_err();
            assert_eq!(err.body.code, "INVALID_INPUT", "{bad}");
        }
    }

    #[test]
    fn head_is_seq_colon_a_sha256() {
        let hash = "AB".repeat(32);
        let head = parse_head(&format!("12:{hash}")).unwrap();
        assert_eq!(head.seq, 12);
        assert_eq!(head.hash, "ab".repeat(32));
        for bad in ["12", "x:ab", "0:ab", &format!("3:{}", "g".repeat(64))] {
            assert!(parse_head(bad).is_err(), "{bad}");
        }
    }
}
