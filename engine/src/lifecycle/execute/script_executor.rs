//! `builtin/script-executor`: performs each script step as written, in
//! the plan's sandboxes, through the tool runner: `run:` as `shell_execute`, `tool:` with
//! `args:` as that tool. `spawn:` steps (child plans) are run by [`super::children`] before a
//! step reaches this module. No model is called.

use serde_json::{Value, json};

use super::step_end::StepEnd;
use crate::domain::Id;
use crate::registry::actions::ScriptStep;
use crate::sandbox::launcher::LineSink;
use crate::tools::runner::{CallRequest, Policy, RunnerError, ToolRunner};

fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// The step's output lines as live events of the plan while its command runs (nothing when
/// no face in this process listens).
fn live_lines(plan: Id, step: &str) -> Option<LineSink> {
    if !crate::events::live::has_subscribers() {
        return None;
    }
    let step = step.to_string();
    Some(LineSink(std::sync::Arc::new(move |stream, line| {
        crate::events::live::publish(
            plan,
            crate::events::live::LiveKind::StepOutput {
                step: step.clone(),
                stream: stream.to_string(),
                line: line.to_string(),
            },
        );
    })))
}

/// Runs one script step (its JSON as stored in the decision's context snapshot).
///
/// # Errors
/// [`RunnerError`] when the runner itself fails (database, sandbox creation).
pub fn run_step(
    runner: &mut ToolRunner<'_>,
    plan_id: &Id,
    policy: &Policy,
    step: Option<&Value>,
    cancelled: &dyn Fn() -> bool,
) -> Result<StepEnd, RunnerError> {
    let Some(raw) = step else {
        return Ok(StepEnd::Failed {
            code: "NOT_SUPPORTED".into(),
            message: "builtin/script-executor can only run an action's script steps, and this step is an item of the definition of done; give the action a `script` or use a model execution actor".into(),
            output: Value::Null,
        });
    };
    let step: ScriptStep = match serde_json::from_value(raw.clone()) {
        Ok(s) => s,
        Err(e) => {
            return Ok(StepEnd::Failed {
                code: "STEP_FAILED".into(),
                message: format!("the stored script step cannot be read: {e}"),
                output: raw.clone(),
            });
        }
    };
    if let Some(spawn) = &step.spawn {
        return Ok(StepEnd::Failed {
            code: "STEP_FAILED".into(),
            message: format!(
                "step {} spawns a child plan of {}, but its decision is not a subplan_spawn",
                step.name, spawn.action
            ),
            output: Value::Null,
        });
    }
    let request = if let Some(cmd) = &step.run {
        // The interpreter is chosen here, per step; the tool runs the program it is given.
        let mut arguments = json!({"command": cmd});
        if let Some(shell) = step.shell {
            arguments["shell"] = json!(shell.as_str());
        }
        CallRequest {
            tool: "shell_execute".into(),
            arguments,
            parent_skill: None,
            resource: step.resource.clone(),
        }
    } else if let Some(tool) = &step.tool {
        CallRequest {
            tool: tool.clone(),
            arguments: Value::Object(step.args.clone().unwrap_or_default()),
            parent_skill: None,
            resource: step.resource.clone(),
        }
    } else {
        return Ok(StepEnd::Failed {
            code: "STEP_FAILED".into(),
            message: format!("step {} has nothing to run", step.name),
            output: Value::Null,
        });
    };
    runner.set_output_lines(live_lines(*plan_id, &step.name));
    let call = runner.call(plan_id, policy, request);
    runner.set_output_lines(None);
    let call = call?;
    if cancelled() {
        return Ok(StepEnd::Stopped);
    }
    let record = &call.record;
    match call.result {
        Err(e) => Ok(StepEnd::Failed {
            code: "STEP_FAILED".into(),
            message: format!("step {}: {} failed: {e}", step.name, record.tool),
            output: json!({"tool": record.tool, "call_seq": record.seq, "error": e.to_string()}),
        }),
        // A shell command fails its step on a non-zero exit or a timeout, whether written as
        // `run:` or as `tool: shell_execute` (which used to count a timed-out command as done).
        Ok(result) if step.run.is_some() || record.tool == "shell_execute" => {
            let exit = result["exit_code"].as_i64();
            let output = json!({
                "tool": "shell_execute",
                "call_seq": record.seq,
                "exit_code": exit,
                "timed_out": result["timed_out"],
                // Whole (the shell tool keeps at most its output cap): `plan logs` shows it all;
                // events carry only its tail (see `execute::event_output`).
                "stdout": result["stdout"].as_str().unwrap_or_default(),
                "stderr": result["stderr"].as_str().unwrap_or_default(),
                "stdout_truncated": result["stdout_truncated"],
                "stderr_truncated": result["stderr_truncated"],
                "files_changed": result["files_changed"],
            });
            if result["cancelled"] == json!(true) {
                return Ok(StepEnd::Stopped);
            }
            if exit == Some(0) && result["timed_out"] != json!(true) {
                Ok(StepEnd::Done { output })
            } else {
                let why = if result["timed_out"] == json!(true) {
                    "timed out".to_string()
                } else {
                    match exit {
                        Some(code) => format!("exited with status {code}"),
                        None => "was killed by a signal".to_string(),
                    }
                };
                let mut message = failure_message(
                    &step.name,
                    &why,
                    result["stderr"].as_str().unwrap_or_default(),
                    step.run.as_deref().or(request_command(&step)),
                );
                if !policy.shell.network
                    && (looks_offline(result["stderr"].as_str().unwrap_or_default())
                        || looks_offline(result["stdout"].as_str().unwrap_or_default()))
                {
                    message.push_str(
                        "; the step ran with no network (the sandbox's default): if it needs it, set `sandbox: network: true` in the action",
                    );
                }
                Ok(StepEnd::Failed {
                    code: "STEP_FAILED".into(),
                    message,
                    output,
                })
            }
        }
        Ok(result) => Ok(StepEnd::Done {
            output: json!({"tool": record.tool, "call_seq": record.seq, "result": result, "changes": call.changes.len()}),
        }),
    }
}

/// A failed shell step, reason first and on one line: `step NAME exited with status 3: STDERR
/// (command `FIRST LINE …`)`. The command is shown by its first line, clipped, never whole.
fn failure_message(name: &str, why: &str, stderr: &str, command: Option<&str>) -> String {
    let mut message = format!("step {name} {why}");
    let stderr = stderr.trim();
    if !stderr.is_empty() {
        let last_lines: Vec<&str> = stderr.lines().rev().take(3).collect();
        let joined = last_lines.into_iter().rev().collect::<Vec<_>>().join(" ⏎ ");
        message.push_str(&format!(": {}", clip(&joined, 240)));
    }
    if let Some(command) = command {
        message.push_str(&format!(" (command `{}`)", command_label(command)));
    }
    message
}

/// Whether a failed command's output reads like a name lookup or connection that found no
/// network (curl, wget, git, pip, npm, cargo, Python and Go say it in these words).
fn looks_offline(output: &str) -> bool {
    const SIGNS: [&str; 9] = [
        "could not resolve host",
        "temporary failure in name resolution",
        "name or service not known",
        "network is unreachable",
        "no address associated with hostname",
        "failed to lookup address",
        "getaddrinfo enotfound",
        "getaddrinfo eai_again",
        "dial tcp: lookup",
    ];
    let lower = output.to_ascii_lowercase();
    SIGNS.iter().any(|s| lower.contains(s))
}

/// The first line of a command, at most 60 characters, with `…` when more follows.
fn command_label(command: &str) -> String {
    let trimmed = command.trim();
    let first = trimmed.lines().next().unwrap_or_default();
    let short: String = first.chars().take(60).collect();
    let short = short.trim_end().to_string();
    if short.len() < trimmed.len() {
        format!("{short} …")
    } else {
        short
    }
}

/// The command of a `tool: shell_execute` step.
fn request_command(step: &ScriptStep) -> Option<&str> {
    step.args.as_ref()?.get("command")?.as_str()
}
