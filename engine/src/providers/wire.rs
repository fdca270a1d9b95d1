//! Pieces shared by both wire formats: stream steps, provider error bodies, and the
//! classification of an HTTP failure as transient or permanent.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

/// A sampling temperature as the wire carries it: the `f32` widened to the decimal the user
/// wrote (0.3, not 0.30000001192092896), to four places.
pub fn temperature(t: f32) -> f64 {
    (f64::from(t) * 10_000.0).round() / 10_000.0
}

/// String formats of JSON Schema (draft 2020-12) that models' tool schemas may carry; any
/// other `format` (schemars' `uint64`, `int32`, `double`...) is dropped.
const STANDARD_FORMATS: [&str; 11] = [
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uri",
    "uuid",
    "regex",
];

/// Keywords that hold data, not subschemas: copied as they are.
const DATA_KEYWORDS: [&str; 5] = ["enum", "const", "default", "examples", "required"];

/// How deep `$ref`s are followed before a recursive definition is cut to `{}` (any value).
const MAX_REF_DEPTH: usize = 8;

/// A tool's argument schema as both wire formats accept it: `$ref`s into `$defs` /
/// `definitions` inlined, `$schema`, `$id`, `$comment`, `$defs` and `definitions` removed,
/// and `format` kept only where it is a standard string format (so a schema generated from
/// Rust types, with `format: uint64`, is still valid for OpenAI's strict mode and for
/// Anthropic).
pub fn standard_schema(schema: &Value) -> Value {
    let defs = schema
        .get("$defs")
        .or_else(|| schema.get("definitions"))
        .cloned()
        .unwrap_or(Value::Null);
    flatten(schema, &defs, 0)
}

fn flatten(v: &Value, defs: &Value, depth: usize) -> Value {
    match v {
        Value::Object(map) => {
            let mut out = serde_json::Map::new();
            if let Some(target) = map.get("$ref").and_then(Value::as_str) {
                let name = target
                    .strip_prefix("#/$defs/")
                    .or_else(|| target.strip_prefix("#/definitions/"));
                match name.and_then(|n| defs.get(n)) {
                    Some(def) if depth < MAX_REF_DEPTH => {
                        if let Value::Object(d) = flatten(def, defs, depth + 1) {
                            out.extend(d);
                        }
                    }
                    _ => {}
                }
            }
            for (k, val) in map {
                match k.as_str() {
                    "$ref" | "$schema" | "$id" | "$comment" | "$defs" | "definitions" => {}
                    "format" => {
                        if val.as_str().is_some_and(|f| STANDARD_FORMATS.contains(&f)) {
                            out.insert(k.clone(), val.clone());
                        }
                    }
                    "properties" | "patternProperties" => {
                        let props = val
                            .as_object()
                            .map(|p| {
                                p.iter()
                                    .map(|(name, s)| (name.clone(), flatten(s, defs, depth)))
                                    .collect()
                            })
                            .unwrap_or_default();
                        out.insert(k.clone(), Value::Object(props));
                    }
                    _ if DATA_KEYWORDS.contains(&k.as_str()) => {
                        out.insert(k.clone(), val.clone());
                    }
                    _ => {
                        out.insert(k.clone(), flatten(val, defs, depth));
                    }
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => {
            Value::Array(items.iter().map(|i| flatten(i, defs, depth)).collect())
        }
        other => other.clone(),
    }
}

/// What one SSE event contributed to a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamStep {
    /// Nothing visible (a tool-call piece, usage, a ping).
    Nothing,
    /// A piece of the reply's text.
    Text(String),
    /// The stream says the reply is complete.
    Done,
}

/// Why a stream could not be assembled.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamFailure {
    /// A payload is not what the wire format allows.
    Malformed(String),
    /// The provider sent an error object inside the stream.
    Provider(Value),
}

/// A non-negative integer field of `v`, or 0.
///
/// See also [`pointer_number`] for nested fields.
pub fn number(v: &Value, field: &str) -> u64 {
    v.get(field).and_then(Value::as_u64).unwrap_or(0)
}

/// Whether every one of `fields` that `usage` holds is a non-negative integer. A usage
/// object with a negative or non-integer count is taken as not reported (its call counts
/// at the estimate), never as a free call.
pub fn counts_valid(usage: &Value, fields: &[&str]) -> bool {
    let ok = fields
        .iter()
        .filter_map(|f| usage.get(*f))
        .all(|v| v.is_null() || v.as_u64().is_some());
    if !ok {
        tracing::warn!(%usage, "the provider reported invalid token counts; they are estimated");
    }
    ok
}

/// A non-negative integer at JSON pointer `ptr` of `v`, or 0.
pub fn pointer_number(v: &Value, ptr: &str) -> u64 {
    v.pointer(ptr).and_then(Value::as_u64).unwrap_or(0)
}

/// What a provider's error body says: `(type or code, message)`. Both wire formats put it
/// under `error` (`{"error": {"message", "type", "code"}}`); anything else is taken as text.
pub fn error_detail(body: &str) -> (String, String) {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let err = parsed.as_ref().and_then(|v| v.get("error"));
    match err {
        Some(Value::String(message)) => (String::new(), message.clone()),
        Some(e) => (
            e.get("code")
                .and_then(Value::as_str)
                .or_else(|| e.get("type").and_then(Value::as_str))
                .unwrap_or_default()
                .to_string(),
            e.get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
        ),
        None => (String::new(), body.chars().take(300).collect()),
    }
}

/// How an HTTP failure status is to be treated.
#[derive(Debug, Clone, PartialEq)]
pub enum StatusClass {
    /// Try again: 408, 409, 429, 5xx (Anthropic's 529 included).
    Transient,
    /// The key was refused: 401, 403.
    Auth,
    /// The model does not exist on this provider.
    UnknownModel,
    /// The conversation does not fit the model's context window.
    ContextTooLong,
    /// The URL does not exist (usually a wrong `base_url`).
    NotFound,
    /// Any other refusal.
    Rejected,
}

/// Classifies a failure status together with the provider's `(code, message)`.
pub fn classify(status: u16, code: &str, message: &str) -> StatusClass {
    let text = format!("{code} {message}").to_ascii_lowercase();
    let mentions_model = text.contains("model");
    let too_long = text.contains("context_length")
        || text.contains("context length")
        || text.contains("context window")
        || text.contains("maximum context")
        || text.contains("prompt is too long")
        || text.contains("too many tokens");
    match status {
        408 | 409 | 429 | 500..=599 => StatusClass::Transient,
        401 | 403 => StatusClass::Auth,
        413 => StatusClass::ContextTooLong,
        _ if too_long => StatusClass::ContextTooLong,
        404 if mentions_model => StatusClass::UnknownModel,
        404 => StatusClass::NotFound,
        400 | 422
            if mentions_model
                && (text.contains("not found")
                    || text.contains("does not exist")
                    || text.contains("unknown")
                    || text.contains("invalid model")) =>
        {
            StatusClass::UnknownModel
        }
        _ => StatusClass::Rejected,
    }
}

/// Whether an error object sent inside a stream describes a transient condition
/// (`overloaded_error`, `api_error`, `rate_limit_error`, `server_error`, ...).
pub fn stream_error_is_transient(code: &str) -> bool {
    let code = code.to_ascii_lowercase();
    [
        "overloaded",
        "api_error",
        "rate_limit",
        "server_error",
        "timeout",
    ]
    .iter()
    .any(|k| code.contains(k))
}

/// The wait a response asks for: `retry-after-ms`, else `retry-after` as seconds or as an
/// HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = get("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let when = jiff::fmt::rfc2822::parse(value).ok()?.timestamp();
    let wait = when.duration_since(jiff::Timestamp::now());
    Some(Duration::try_from(wait).unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified_as_the_issue_lists() {
        for s in [408, 409, 429, 500, 502, 503, 529] {
            assert_eq!(classify(s, "", ""), StatusClass::Transient, "{s}");
        }
        assert_eq!(classify(401, "", ""), StatusClass::Auth);
        assert_eq!(
            classify(404, "model_not_found", "The model `x` does not exist"),
            StatusClass::UnknownModel
        );
        assert_eq!(classify(404, "", "Not Found"), StatusClass::NotFound);
        assert_eq!(
            classify(400, "context_length_exceeded", "too long"),
            StatusClass::ContextTooLong
        );
        assert_eq!(
            classify(
                400,
                "invalid_request_error",
                "prompt is too long: 210000 tokens"
            ),
            StatusClass::ContextTooLong
        );
        assert_eq!(
            classify(400, "invalid_request_error", "temperature out of range"),
            StatusClass::Rejected
        );
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", "250".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
        let mut h = HeaderMap::new();
        h.insert(
            "retry-after",
            "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
    }

    #[test]
    fn schemas_lose_refs_meta_keywords_and_nonstandard_formats() {
        let schema = serde_json::json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "Args",
            "type": "object",
            "properties": {
                "count": {"type": "integer", "format": "uint64", "minimum": 0},
                "when": {"type": "string", "format": "date-time"},
                "format": {"$ref": "#/$defs/Mode"},
                "edits": {"type": "array", "items": {"$ref": "#/$defs/Edit"}}
            },
            "required": ["count"],
            "$defs": {
                "Mode": {"type": "string", "enum": ["a", "b"]},
                "Edit": {"type": "object", "properties": {"old": {"type": "string"}}}
            }
        });
        let flat = standard_schema(&schema);
        assert_eq!(
            flat,
            serde_json::json!({
                "title": "Args",
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 0},
                    "when": {"type": "string", "format": "date-time"},
                    "format": {"type": "string", "enum": ["a", "b"]},
                    "edits": {"type": "array", "items": {"type": "object", "properties": {"old": {"type": "string"}}}}
                },
                "required": ["count"]
            })
        );
    }

    #[test]
    fn a_recursive_definition_is_cut_instead_of_looping() {
        let schema = serde_json::json!({
            "$ref": "#/definitions/Node",
            "definitions": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/definitions/Node"}}}}
        });
        let flat = standard_schema(&schema);
        assert!(!flat.to_string().contains("$ref"), "{flat}");
        assert_eq!(flat["type"], "object");
    }

    #[test]
    fn error_bodies_of_both_formats_are_read() {
        let (code, msg) = error_detail(
            r#"{"error":{"message":"Incorrect API key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
        );
        assert_eq!(
            (code.as_str(), msg.as_str()),
            ("invalid_api_key", "Incorrect API key")
        );
        let (code, msg) = error_detail(
            r#"{"type":"error","error":{"type":"not_found_error","message":"model: x"}}"#,
        );
        assert_eq!(
            (code.as_str(), msg.as_str()),
            ("not_found_error", "model: x")
        );
        assert_eq!(error_detail("Bad Gateway").1, "Bad Gateway");
    }
}
