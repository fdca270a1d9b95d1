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
    let mut out = Vec::new();
    write_json(outcome, elapsed, &mut out).expect("values always serialize");
    String::from_utf8(out).expect("JSON is UTF-8")
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
    let mut serializer = serde_json::Serializer::with_formatter(&mut buffered, Pretty::default());
    envelope(outcome, elapsed)
        .serialize(&mut serializer)
        .map_err(std::io::Error::from)?;
    buffered.write_all(b"\n")?;
    buffered.flush()
}

/// serde_json's pretty layout (two spaces), which also lays out a raw JSON fragment (a
/// [`serde_json::value::RawValue`], such as a file of `plan diff` serialized where it was
/// diffed) as if it had been serialized here: the same bytes as the typed value would give.
#[derive(Debug, Default)]
struct Pretty {
    depth: usize,
    has_value: bool,
}

/// A newline and the deepest indentation written in one piece.
static NEWLINE_INDENT: [u8; 257] = {
    let mut bytes = [b' '; 257];
    bytes[0] = b'\n';
    bytes
};

/// Writes a newline and the indentation of `depth` levels.
fn newline_indent<W: ?Sized + std::io::Write>(w: &mut W, depth: usize) -> std::io::Result<()> {
    let mut spaces = depth * 2;
    let first = spaces.min(NEWLINE_INDENT.len() - 1);
    w.write_all(&NEWLINE_INDENT[..=first])?;
    spaces -= first;
    while spaces > 0 {
        let n = spaces.min(NEWLINE_INDENT.len() - 1);
        w.write_all(&NEWLINE_INDENT[1..=n])?;
        spaces -= n;
    }
    Ok(())
}

impl Pretty {
    /// An array or object opens one level deeper, empty so far.
    fn open<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(bracket)
    }

    /// It closes on a line of its own unless it stayed empty.
    fn close<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        bracket: &[u8],
    ) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            newline_indent(w, self.depth)?;
        }
        w.write_all(bracket)
    }

    /// Each element or key starts a line, after a comma unless it is the first.
    fn item<W: ?Sized + std::io::Write>(&self, w: &mut W, first: bool) -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        newline_indent(w, self.depth)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _w: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn write_raw_fragment<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        let mut laid_out = Vec::with_capacity(fragment.len() * 2);
        lay_out(fragment.as_bytes(), self.depth, &mut laid_out)?;
        w.write_all(&laid_out)
    }
}

/// Writes the JSON text `json` (valid JSON, any whitespace) to `out` in [`Pretty`]'s layout,
/// its first line at `depth`: whitespace between tokens dropped, a newline and indentation
/// after each opening bracket of a non-empty array or object and after each comma, one
/// before each closing bracket, `": "` after each key; strings, numbers and literals copied
/// as they are.
fn lay_out(json: &[u8], depth: usize, out: &mut Vec<u8>) -> std::io::Result<()> {
    let is_space = |b: u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r');
    let mut depth = depth;
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            b'"' => {
                let end = string_end(json, i + 1);
                out.extend_from_slice(&json[i..end]);
                i = end;
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                let mut k = i + 1;
                while k < json.len() && is_space(json[k]) {
                    k += 1;
                }
                if json.get(k) == Some(&close) {
                    out.extend_from_slice(&[open, close]);
                    i = k + 1;
                } else {
                    depth += 1;
                    out.push(open);
                    newline_indent(out, depth)?;
                    i += 1;
                }
            }
            close @ (b'}' | b']') => {
                depth = depth.saturating_sub(1);
                newline_indent(out, depth)?;
                out.push(close);
                i += 1;
            }
            b',' => {
                out.push(b',');
                newline_indent(out, depth)?;
                i += 1;
            }
            b':' => {
                out.extend_from_slice(b": ");
                i += 1;
            }
            b if is_space(b) => i += 1,
            _ => {
                let start = i;
                while i < json.len()
                    && !matches!(json[i], b',' | b':' | b'}' | b']' | b'"')
                    && !is_space(json[i])
                {
                    i += 1;
                }
                out.extend_from_slice(&json[start..i]);
            }
        }
    }
    Ok(())
}

/// The index just past the closing quote of the JSON string whose contents start at `from`
/// (or the end of `json`), jumping from one quote or backslash to the next.
fn string_end(json: &[u8], from: usize) -> usize {
    let mut j = from;
    while let Some(k) = memchr::memchr2(b'"', b'\\', &json[j.min(json.len())..]) {
        j += k;
        if json[j] == b'"' {
            return j + 1;
        }
        j += 2;
    }
    json.len()
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
    fn a_raw_json_fragment_is_written_as_its_typed_value_would_be() {
        let value = serde_json::json!({
            "plan_id": "01J",
            "empty_list": [],
            "empty_map": {},
            "resources": [{
                "files": [
                    {"path": "a \"quoted\" \\ name, {with} [brackets]: yes", "hunks": [], "n": -1.5e3,
                     "lines": [{"text": "  let x = [1, {}];", "old": null, "ok": true}]},
                    {"path": "b", "deep": [[[{"x": [[]]}]]], "unicode": "é ✓ \u{1}", "tail": "\\\"\\"}
                ],
            }],
        });
        let pretty = serde_json::to_string_pretty(&value).unwrap();
        // The same document with its files as raw compact fragments (and one with spaces).
        let files: Vec<Box<serde_json::value::RawValue>> = value["resources"][0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let text = if i == 0 {
                    serde_json::to_string(f).unwrap()
                } else {
                    serde_json::to_string_pretty(f)
                        .unwrap()
                        .replace('\n', " \r\n\t")
                };
                serde_json::value::RawValue::from_string(text).unwrap()
            })
            .collect();
        #[derive(Serialize)]
        struct WithRaw<'a> {
            plan_id: &'a Value,
            empty_list: &'a Value,
            empty_map: &'a Value,
            resources: [Files<'a>; 1],
        }
        #[derive(Serialize)]
        struct Files<'a> {
            files: &'a [Box<serde_json::value::RawValue>],
        }
        let doc = WithRaw {
            plan_id: &value["plan_id"],
            empty_list: &value["empty_list"],
            empty_map: &value["empty_map"],
            resources: [Files { files: &files }],
        };
        let mut out = Vec::new();
        doc.serialize(&mut serde_json::Serializer::with_formatter(
            &mut out,
            Pretty::default(),
        ))
        .unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), pretty);
    }

    #[test]
    fn the_envelope_is_laid_out_as_serde_json_lays_it_out() {
        let data = serde_json::json!({"a": [1, {"b": []}], "c": {}, "d": "x\ny"});
        let out = Outcome::Done(Report::ok("x", data, "ok"));
        let ours = json(&out, Duration::from_millis(3));
        let theirs =
            serde_json::to_string_pretty(&envelope(&out, Duration::from_millis(3))).unwrap();
        assert_eq!(ours, theirs + "\n");
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
