//! The json and yaml formats: one envelope document on stdout.
//!
//! `{command, status, exit_code, data, timing: {duration_ms}, messages: [{level, text}]}`, plus
//! `error: {code, message, detail, suggestions}` on failure. YAML keeps the JSON key order and
//! writes multi-line strings as block scalars.

use std::io::Write as _;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use super::Outcome;
use super::report::{ErrorBody, Message};

/// `{duration_ms}`.
#[derive(Debug, Serialize)]
struct Timing {
    duration_ms: u64,
}

/// The envelope, in its documented key order.
#[derive(Debug, Serialize)]
struct Envelope<'a> {
    command: &'a str,
    status: &'static str,
    exit_code: u8,
    data: Data<'a>,
    timing: Timing,
    messages: Vec<&'a Message>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorBody>,
}

/// The envelope's `data`: a value, or a typed payload serialized as it is.
#[derive(Debug, Serialize)]
#[serde(untagged)]
enum Data<'a> {
    Value(&'a Value),
    Payload(&'a super::report::Payload),
}

/// The envelope, borrowing the outcome's data (serialized as it is: copying a large `data`
/// into another value first would double the memory of a large diff).
fn envelope(outcome: &Outcome, elapsed: Duration) -> Envelope<'_> {
    let timing = Timing {
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
    };
    match outcome {
        Outcome::Done(report) => Envelope {
            command: &report.command,
            status: report.exit.status(),
            exit_code: report.exit.code(),
            data: match &report.payload {
                Some(p) => Data::Payload(p),
                None => Data::Value(&report.data),
            },
            timing,
            messages: report
                .messages
                .iter()
                .chain(std::iter::once(&report.status))
                .collect(),
            error: report.error.as_ref(),
        },
        Outcome::Failed {
            command,
            error,
            data,
        } => Envelope {
            command,
            status: error.exit.status(),
            exit_code: error.exit.code(),
            data: Data::Value(data),
            timing,
            messages: Vec::new(),
            error: Some(error),
        },
    }
}

/// The envelope as pretty-printed JSON, ending with a newline.
pub fn json(outcome: &Outcome, elapsed: Duration) -> String {
    let mut s =
        serde_json::to_string_pretty(&envelope(outcome, elapsed)).expect("values always serialize");
    s.push('\n');
    s
}

/// As [`json`], written to `out` as it is serialized (no copy of the whole document).
///
/// # Errors
/// I/O errors from `out`.
pub fn write_json(
    outcome: &Outcome,
    elapsed: Duration,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    let mut buffered = std::io::BufWriter::with_capacity(1 << 16, out);
    serde_json::to_writer_pretty(&mut buffered, &envelope(outcome, elapsed))
        .map_err(std::io::Error::from)?;
    buffered.write_all(b"\n")?;
    buffered.flush()
}

/// The envelope as compact JSON on one line, ending with a newline (the last line of a
/// `--stream` run, after the JSON Lines events).
pub fn json_line(outcome: &Outcome, elapsed: Duration) -> String {
    let mut s =
        serde_json::to_string(&envelope(outcome, elapsed)).expect("values always serialize");
    s.push('\n');
    s
}

/// The envelope as YAML (same structure and key order as the JSON).
pub fn yaml(outcome: &Outcome, elapsed: Duration) -> String {
    serde_yaml::to_string(&envelope(outcome, elapsed)).expect("values always serialize")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::report::{Exit, Report};

    #[test]
    fn success_envelope_has_the_documented_keys_in_order() {
        let out = Outcome::Done(Report::ok(
            "config get",
            serde_json::json!({"key": "format"}),
            "Config read",
        ));
        let v: Value = serde_json::from_str(&json(&out, Duration::from_millis(7))).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "command",
                "status",
                "exit_code",
                "data",
                "timing",
                "messages"
            ]
        );
        assert_eq!(v["timing"]["duration_ms"], 7);
        assert_eq!(
            v["messages"][0],
            serde_json::json!({"level": "ok", "text": "Config read"})
        );
    }

    #[test]
    fn yaml_parses_to_the_same_document_and_uses_block_scalars() {
        let out = Outcome::Done(Report::ok(
            "x",
            serde_json::json!({"text": "line one\nline two\n", "n": 1}),
            "ok",
        ));
        let y = yaml(&out, Duration::ZERO);
        assert!(y.contains("text: |"), "{y}");
        let from_yaml: Value = serde_yaml::from_str(&y).unwrap();
        let from_json: Value = serde_json::from_str(&json(&out, Duration::ZERO)).unwrap();
        assert_eq!(from_yaml, from_json);
        assert!(y.starts_with("command:"), "key order is kept: {y}");
    }

    #[test]
    fn failure_envelope_carries_the_error() {
        let out = Outcome::Failed {
            command: "config get".into(),
            error: ErrorBody {
                code: "NOT_FOUND",
                message: "unknown".into(),
                detail: None,
                suggestions: vec!["agents config list".into()],
                exit: Exit::Failure,
            },
            data: Value::Null,
        };
        let v: Value = serde_json::from_str(&json(&out, Duration::ZERO)).unwrap();
        assert_eq!(v["status"], "error");
        assert_eq!(v["exit_code"], 1);
        assert_eq!(v["error"]["code"], "NOT_FOUND");
        assert_eq!(v["error"]["suggestions"][0], "agents config list");
    }
}
