//! Project validations (spec section 13): each target project's
//! validation commands, run with their timeouts and their output captured, in the plan's
//! sandboxes (the last step of Execute) or in a directory holding the merged tree (Apply).
//! Required failures block; informational ones are recorded.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use super::{Lifecycle, RunError};
use crate::domain::{Id, Plan};
use crate::registry::projects::Validation;
use crate::sandbox::Sandboxes;
use crate::sandbox::checkpoint::{self, CheckpointRequest};
use crate::sandbox::confined::SandboxFs;
use crate::sandbox::launcher;
use crate::tools::shell::{self, ShellPolicy};
use crate::tools::{ShellSettings, ToolContext};

/// Bytes of output kept per stream.
pub const OUTPUT_KEPT: usize = 8 * 1024;

/// One validation's result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationRun {
    /// `val_...`.
    pub validation_id: String,
    /// Its project.
    pub project: String,
    /// The resource it ran on.
    pub resource: String,
    /// The command.
    pub command: String,
    /// Whether a failure blocks.
    pub required: bool,
    /// Whether it passed.
    pub passed: bool,
    /// `passed`, `exit N`, `timed out after S s`, `could not run: ...`.
    pub result: String,
    /// Exit code, if it exited.
    pub exit_code: Option<i64>,
    /// stdout, shortened.
    pub stdout: String,
    /// stderr, shortened.
    pub stderr: String,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
}

fn clip(text: &str) -> String {
    if text.len() <= OUTPUT_KEPT {
        return text.to_string();
    }
    let mut end = OUTPUT_KEPT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// Every validation of the plan's target projects with the resource it runs on: its own
/// `--resource`, else the project's first sandboxable resource.
fn planned(engine: &Lifecycle, plan: &Plan) -> Result<Vec<(Validation, String)>, RunError> {
    let bases = engine.store().plan_bases(&plan.plan_id)?;
    let mut out = Vec::new();
    for pid in engine.store().plan_project_ids(&plan.plan_id)? {
        let Ok(project_id) = pid.parse::<Id>() else {
            continue;
        };
        let Some(project) = engine.store().project_by_id(&pid)? else {
            continue;
        };
        for v in engine.store().validations(&project_id)? {
            let resource = v
                .resource
                .clone()
                .filter(|r| bases.iter().any(|b| &b.resource_name == r))
                .or_else(|| {
                    bases
                        .iter()
                        .find(|b| b.project_name == project.name)
                        .map(|b| b.resource_name.clone())
                });
            if let Some(r) = resource {
                out.push((v, r));
            }
        }
    }
    Ok(out)
}

/// Whether any validation runs on `resource`.
///
/// # Errors
/// Store errors.
pub fn any_for(engine: &Lifecycle, plan: &Plan, resource: &str) -> Result<bool, RunError> {
    Ok(planned(engine, plan)?.iter().any(|(_, r)| r == resource))
}

/// The last `lines` lines of `text` (at most 2,000 bytes), for failure messages.
pub fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.trim_end().lines().rev().take(lines).collect();
    let mut out: String = kept.into_iter().rev().collect::<Vec<_>>().join("\n");
    if out.len() > 2000 {
        let mut start = out.len() - 2000;
        while !out.is_char_boundary(start) {
            start += 1;
        }
        out = format!("…{}", &out[start..]);
    }
    out
}

fn outcome(v: &Validation, resource: &str, result: &Value, started: Instant) -> ValidationRun {
    let exit = result["exit_code"].as_i64();
    let timed_out = result["timed_out"] == json!(true);
    let passed = exit == Some(0) && !timed_out;
    let stderr = result["stderr"].as_str().unwrap_or_default();
    let why = |head: String| {
        let t = tail(stderr, 5);
        if t.is_empty() {
            head
        } else {
            format!("{head}: {t}")
        }
    };
    ValidationRun {
        validation_id: v.validation_id.clone(),
        project: v.project.clone(),
        resource: resource.to_string(),
        command: v.command.clone(),
        required: v.required,
        passed,
        result: if passed {
            "passed".into()
        } else if timed_out {
            why(format!("timed out after {} s", v.timeout_secs))
        } else {
            why(match exit {
                Some(c) => format!("exit {c}"),
                None => "killed by a signal".into(),
            })
        },
        exit_code: exit,
        stdout: clip(result["stdout"].as_str().unwrap_or_default()),
        stderr: clip(result["stderr"].as_str().unwrap_or_default()),
        duration_ms: started.elapsed().as_millis() as u64,
    }
}

/// Runs the validations in the plan's sandboxes (creating a sandbox that does not exist yet:
/// it then holds the base). What they write is rolled back afterwards: validations never
/// change the plan's result.
///
/// # Errors
/// Sandbox and store errors; a validation that fails or cannot start is an [`ValidationRun`].
pub fn run_in_sandboxes(
    engine: &mut Lifecycle,
    sandboxes: &Sandboxes,
    plan: &Plan,
) -> Result<Vec<ValidationRun>, RunError> {
    let list = planned(engine, plan)?;
    if list.is_empty() {
        return Ok(Vec::new());
    }
    for (_, resource) in &list {
        sandboxes.ensure(engine.store_mut(), &plan.plan_id, resource)?;
    }
    let before = checkpoint::create(
        engine.store_mut(),
        sandboxes,
        &plan.plan_id,
        &CheckpointRequest {
            step: Some("validations".into()),
            label: "validations".into(),
            reuse_if_unchanged: true,
            ..Default::default()
        },
    )?;
    let (home, cache, tmp) = sandboxes.plan_home(&plan.plan_id)?;
    let shell_tool = crate::tools::shell::tool();
    let mut out = Vec::new();
    for (v, resource) in &list {
        let Some(sb) = sandboxes.existing(engine.store(), &plan.plan_id, resource)? else {
            continue;
        };
        let started = Instant::now();
        let settings = ShellSettings {
            home: home.clone(),
            cache: cache.clone(),
            tmp: tmp.clone(),
            policy: ShellPolicy {
                network: v.network,
                ..Default::default()
            },
            cancel: None,
            on_line: None,
        };
        let result = {
            let _lock = sb.lock()?;
            let fs = SandboxFs::open(sb.work_dir(), &[])
                .map_err(|e| RunError::Sandbox(e.to_string()))?;
            let mut ctx = ToolContext {
                sandbox: &sb,
                fs: &fs,
                shell: &settings,
                changes: Vec::new(),
                config_path: None,
            };
            shell_tool.execute(
                &mut ctx,
                json!({"command": v.command, "timeout_secs": v.timeout_secs.clamp(1, 3600)}),
            )
        };
        out.push(match result {
            Ok(r) => outcome(v, resource, &r, started),
            Err(e) => ValidationRun {
                validation_id: v.validation_id.clone(),
                project: v.project.clone(),
                resource: resource.clone(),
                command: v.command.clone(),
                required: v.required,
                passed: false,
                result: format!("could not run: {e}"),
                exit_code: None,
                stdout: String::new(),
                stderr: String::new(),
                duration_ms: started.elapsed().as_millis() as u64,
            },
        });
    }
    if let Some(cp) = before {
        for sb in sandboxes.active(engine.store(), &plan.plan_id)? {
            if let Some(state) = cp
                .states
                .iter()
                .find(|s| s.sandbox_id == sb.record.sandbox_id)
            {
                let _lock = sb.lock()?;
                let commit = git2::Oid::from_str(&state.commit_oid)
                    .map_err(|e| RunError::Sandbox(e.to_string()))?;
                checkpoint::restore(&sb, commit)?;
            }
        }
    }
    Ok(out)
}

/// Runs the validations whose resource is `resource` in `dir` (a checkout of the merged tree),
/// kernel-confined to writing beneath `dir` and `tmp`, with their timeouts.
///
/// # Errors
/// Store errors; a validation that fails or cannot start is an [`ValidationRun`].
pub fn run_in_dir(
    engine: &Lifecycle,
    plan: &Plan,
    resource: &str,
    dir: &Path,
    tmp: &Path,
) -> Result<Vec<ValidationRun>, RunError> {
    let mut out = Vec::new();
    for (v, r) in planned(engine, plan)? {
        if r != resource {
            continue;
        }
        let started = Instant::now();
        let result = run_command(
            &v.command,
            dir,
            tmp,
            v.network,
            Duration::from_secs(v.timeout_secs.clamp(1, 3600)),
        );
        out.push(match result {
            Ok(r) => outcome(&v, resource, &r, started),
            Err(e) => ValidationRun {
                validation_id: v.validation_id.clone(),
                project: v.project.clone(),
                resource: resource.to_string(),
                command: v.command.clone(),
                required: v.required,
                passed: false,
                result: format!("could not run: {e}"),
                exit_code: None,
                stdout: String::new(),
                stderr: String::new(),
                duration_ms: started.elapsed().as_millis() as u64,
            },
        });
    }
    Ok(out)
}

/// Runs `command` with `/bin/sh -c` in `dir` through the launcher, writing only beneath
/// `dir` and `tmp`, with its own network namespace unless `network`.
pub(crate) fn run_command(
    command: &str,
    dir: &Path,
    tmp: &Path,
    network: bool,
    timeout: Duration,
) -> Result<Value, String> {
    let settings = ShellSettings {
        home: tmp.to_path_buf(),
        cache: tmp.join(".cache"),
        tmp: tmp.to_path_buf(),
        policy: ShellPolicy {
            network,
            ..Default::default()
        },
        cancel: None,
        on_line: None,
    };
    let _ = std::fs::create_dir_all(&settings.cache);
    let launch = shell::step_launch(
        &settings,
        dir,
        None,
        dir.to_path_buf(),
        "/bin/sh",
        vec!["-c".into(), command.into()],
    );
    let running = if shell::confined_here(network) {
        launcher::spawn(launch)
    } else {
        launcher::spawn_unconfined(launch)
    }
    .map_err(|e| e.to_string())?;
    let done = running.wait(timeout, None);
    Ok(json!({
        "exit_code": done.code(),
        "timed_out": done.timed_out,
        "stdout": String::from_utf8_lossy(&done.stdout),
        "stderr": String::from_utf8_lossy(&done.stderr),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_validation_may_serve_http_on_its_own_loopback_and_reports_its_stderr_tail() {
        if !launcher::probe().confines() {
            assert_ne!(std::env::var("CI").as_deref(), Ok("true"));
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let (work, tmp) = (dir.path().join("work"), dir.path().join("tmp"));
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(work.join("index.html"), "served\n").unwrap();
        let serve = "/usr/bin/python3 -m http.server 18765 --bind 127.0.0.1 >/dev/null 2>&1 & \
                     for i in $(seq 50); do /usr/bin/python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:18765/index.html\").read().decode())' 2>/dev/null && exit 0; sleep 0.1; done; exit 1";
        let r = run_command(serve, &work, &tmp, false, Duration::from_secs(30)).unwrap();
        assert_eq!(r["exit_code"], 0, "{r:#}");
        assert_eq!(r["stdout"].as_str().unwrap().trim(), "served");
        let failing = run_command(
            "echo first >&2; echo the real reason >&2; exit 3",
            &work,
            &tmp,
            false,
            Duration::from_secs(30),
        )
        .unwrap();
        let v = Validation {
            validation_id: "val_x".into(),
            project: "p".into(),
            command: "c".into(),
            description: None,
            required: true,
            timeout_secs: 30,
            resource: None,
            network: false,
            created_at: jiff::Timestamp::now(),
        };
        let o = outcome(&v, "r", &failing, Instant::now());
        assert!(!o.passed);
        assert!(o.result.starts_with("exit 3: "), "{}", o.result);
        assert!(o.result.contains("the real reason"), "{}", o.result);
    }
}
