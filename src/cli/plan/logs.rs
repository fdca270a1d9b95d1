//! `agents plan logs PLAN [STEP]`: what each Execute step printed, whole (spec section 06,
//! plan commands; section 13, Execute's steps). `plan status` shows the tail of the same
//! output under its Steps table.

use clap::Args;
use serde_json::{Value, json};

use crate::cli::{CliError, Context};
use crate::output::{Element, Report};
use cleveragents_engine::api::PlanStep;
use cleveragents_engine::api::{self, StepView};
use cleveragents_engine::domain::decision::Decision;

/// Lines of stdout and of stderr that `plan status` shows per step.
pub const STATUS_TAIL_LINES: usize = 5;

/// `agents plan logs` arguments.
#[derive(Debug, Args)]
pub struct LogsArgs {
    /// Plan id or unique prefix
    pub plan: String,
    /// Only this step: its name (a script step's `name`) or its number in `plan status`
    pub step: Option<String>,
}

/// A step's name: the strategy's key for it (a script step's name), else its decision's
/// choice, shortened.
pub(crate) fn step_name(decisions: &[Decision], step: &PlanStep) -> String {
    cleveragents_engine::api::step_name(decisions, step)
}

/// What one step printed, from its stored output.
#[derive(Debug, Clone, PartialEq)]
struct StepOutput {
    /// The shell command's exit code (`run:` and `shell_execute` steps).
    exit_code: Option<i64>,
    /// Its standard output (for other tools: their result as JSON).
    stdout: String,
    /// Its standard error.
    stderr: String,
    /// Whether the shell tool cut stdout / stderr at its output cap.
    truncated: (bool, bool),
}

impl StepOutput {
    fn of(step: &PlanStep) -> Option<Self> {
        let raw = step.output.as_deref()?;
        let Ok(v) = serde_json::from_str::<Value>(raw) else {
            return Some(Self {
                exit_code: None,
                stdout: raw.to_string(),
                stderr: String::new(),
                truncated: (false, false),
            });
        };
        if v.get("stdout").is_some() || v.get("stderr").is_some() {
            return Some(Self {
                exit_code: v["exit_code"].as_i64(),
                stdout: v["stdout"].as_str().unwrap_or_default().to_string(),
                stderr: v["stderr"].as_str().unwrap_or_default().to_string(),
                truncated: (
                    v["stdout_truncated"] == json!(true),
                    v["stderr_truncated"] == json!(true),
                ),
            });
        }
        let shown = match (&v["result"], &v["error"]) {
            (Value::Null, Value::Null) => return None,
            (Value::Null, e) => e.as_str().map(str::to_string).unwrap_or(e.to_string()),
            (r, _) => serde_json::to_string_pretty(r).unwrap_or_default(),
        };
        Some(Self {
            exit_code: None,
            stdout: shown,
            stderr: String::new(),
            truncated: (false, false),
        })
    }
}

/// The last `n` lines of `text`, with a first line saying how many were left out.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.trim_end_matches('\n').lines().collect();
    if lines.len() <= n {
        return lines.join("\n");
    }
    let skipped = lines.len() - n;
    format!(
        "... ({skipped} earlier line{})\n{}",
        if skipped == 1 { "" } else { "s" },
        lines[skipped..].join("\n")
    )
}

/// `plan status`: one list per step that printed something, with the last
/// [`STATUS_TAIL_LINES`] lines of its stdout and stderr and the command for the rest.
pub(crate) fn status_tails(ctx: &Context, plan_id: &str, steps: &[StepView]) -> Vec<Element> {
    steps
        .iter()
        .filter_map(|StepView { step: st, name, .. }| {
            let out = StepOutput::of(st)?;
            let mut items = Vec::new();
            for (stream, text) in [("stdout", &out.stdout), ("stderr", &out.stderr)] {
                if !text.trim().is_empty() {
                    items.push(format!("{stream}:\n{}", tail(text, STATUS_TAIL_LINES)));
                }
            }
            if items.is_empty() {
                return None;
            }
            let arg = if name.is_empty() {
                st.position.to_string()
            } else {
                shell_words::quote(name).into_owned()
            };
            items.push(format!(
                "all of it: {}",
                ctx.suggest(&format!("plan logs {plan_id} {arg}"))
            ));
            Some(Element::List {
                title: format!("Output of Step {} ({name}, {})", st.position, st.status),
                items,
            })
        })
        .collect()
}

/// `plan logs PLAN [STEP]`.
///
/// # Errors
/// Unknown plans (`NOT_FOUND`), a step the plan does not have (`NOT_FOUND`, listing its
/// steps), store errors.
pub fn logs(ctx: &Context, args: &LogsArgs) -> Result<Report, CliError> {
    let client = ctx.client()?;
    let api::StepsView { plan_id: id, steps } = client.plan_steps(&args.plan)?;
    let decisions = client.decisions(&id.to_string())?;
    let named: Vec<(String, &PlanStep)> = steps
        .iter()
        .map(|st| (step_name(&decisions, st), st))
        .collect();
    let chosen: Vec<&(String, &PlanStep)> = match &args.step {
        None => named.iter().collect(),
        Some(want) => {
            let found: Vec<_> = named
                .iter()
                .filter(|(name, st)| name == want || st.position.to_string() == *want)
                .collect();
            if found.is_empty() {
                let known: Vec<String> = named
                    .iter()
                    .map(|(n, st)| format!("{} ({n})", st.position))
                    .collect();
                return Err(
                    CliError::new("NOT_FOUND", format!("plan {id} has no step `{want}`"))
                        .detail(if known.is_empty() {
                            "the plan has not run a step yet".to_string()
                        } else {
                            format!("its steps: {}", known.join(", "))
                        })
                        .hint(ctx.suggest(&format!("plan logs {id}"))),
                );
            }
            found
        }
    };
    let mut rows = Vec::new();
    let mut elements = Vec::new();
    for (name, st) in chosen {
        let out = StepOutput::of(st);
        let exit = out.as_ref().and_then(|o| o.exit_code);
        rows.push(json!({
            "position": st.position,
            "name": name,
            "decision_id": st.decision_id.to_string(),
            "status": st.status.as_str(),
            "runs": st.runs,
            "error": st.error,
            "exit_code": exit,
            "stdout": out.as_ref().map(|o| o.stdout.as_str()),
            "stderr": out.as_ref().map(|o| o.stderr.as_str()),
            "stdout_truncated": out.as_ref().is_some_and(|o| o.truncated.0),
            "stderr_truncated": out.as_ref().is_some_and(|o| o.truncated.1),
        }));
        let mut panel = vec![
            ("Status", st.status.as_str().to_string()),
            ("Runs", st.runs.to_string()),
        ];
        if let Some(code) = exit {
            panel.push(("Exit Code", code.to_string()));
        }
        if let Some(e) = &st.error {
            panel.push(("Error", e.clone()));
        }
        elements.push(Element::panel(
            format!("Step {}: {name}", st.position),
            panel,
        ));
        let Some(out) = out else { continue };
        for (stream, text, cut) in [
            ("stdout", &out.stdout, out.truncated.0),
            ("stderr", &out.stderr, out.truncated.1),
        ] {
            if text.is_empty() {
                continue;
            }
            let mut items = vec![text.trim_end_matches('\n').to_string()];
            if cut {
                items.push("(cut at the shell tool's output limit)".into());
            }
            elements.push(Element::List {
                title: format!("{stream} of step {}", st.position),
                items,
            });
        }
    }
    let n = rows.len();
    let data = json!({"plan_id": id.to_string(), "steps": rows});
    let status = if n == 0 {
        format!("plan {id} has not run a step yet")
    } else {
        format!(
            "output of {n} step{} of plan {id}",
            if n == 1 { "" } else { "s" }
        )
    };
    Ok(elements
        .into_iter()
        .fold(Report::ok("plan logs", data, status), Report::with))
}
