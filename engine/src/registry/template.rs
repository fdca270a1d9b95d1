//! `{{ name }}` placeholders in action text and scripts (spec section 09: argument values are
//! "injected into the description and/or definition of done (via templating)").
//!
//! Templates are minijinja with strict undefined behaviour: a placeholder naming something that
//! is not an argument is an error, both when the action is created (checked statically against
//! the declared argument names) and when a plan renders it with real values.
//!
//! Shell text (`run:` steps, the `command` of `tool: shell_execute`) is rendered by
//! [`render_shell`]: every `{{ name }}` becomes one shell-quoted word, so a value is always
//! data and never code (`it's` renders as `'it'\''s'`). The `raw` filter (`{{ cmd | raw }}`)
//! pastes a value as it is, for the rare argument that is meant to be shell code.
//! [`shell_placeholders`] finds placeholders written inside quotes, comments or here-documents,
//! where a quoted word would not be one word; `action create` refuses those.

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior, Value};

/// Why a template was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The template text does not parse.
    #[error("invalid template syntax: {0}")]
    Syntax(String),
    /// A placeholder names something that is not a declared argument.
    #[error("placeholder `{{{{ {name} }}}}` does not name an argument (declared: {declared})")]
    Undefined {
        /// The undefined name.
        name: String,
        /// The declared argument names, comma-separated, or `none`.
        declared: String,
    },
    /// Rendering failed for another reason (an unknown filter, an attribute of a plain value).
    #[error("the template cannot be rendered: {0}")]
    Render(String),
}

/// The filter that pastes a value into shell text without quoting (`{{ cmd | raw }}`).
pub const RAW_FILTER: &str = "raw";

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // In plain text `raw` changes nothing; in shell text it skips the quoting.
    env.add_filter(RAW_FILTER, |v: Value| {
        Value::from_safe_string(v.to_string())
    });
    env
}

/// The environment for shell text: values that are not marked safe (by `raw`) are written
/// as one quoted word.
fn shell_env() -> Environment<'static> {
    let mut env = env();
    env.set_formatter(|out, _state, value| {
        // Booleans as JSON spells them (minijinja's `Display` says `True`).
        let text = match value.kind() {
            minijinja::value::ValueKind::Bool => value.is_true().to_string(),
            _ => value.to_string(),
        };
        let written = if value.is_safe() {
            out.write_str(&text)
        } else {
            out.write_str(&shell_quote(&text))
        };
        written.map_err(|_| minijinja::Error::from(minijinja::ErrorKind::WriteFailure))
    });
    env
}

/// `s` as one word of POSIX shell (`sh`, `bash`): unchanged when it holds only letters,
/// digits and `_ - . / : @ + ,`, else in single quotes with each `'` written `'\''`. The empty
/// string is `''`. NUL cannot be quoted; values holding it are refused before rendering.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars().all(|c| {
            c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/' | ':' | '@' | '+' | ',')
        });
    if plain {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn declared_list(declared: &[&str]) -> String {
    if declared.is_empty() {
        "none".to_string()
    } else {
        declared.join(", ")
    }
}

/// Checks that `text` parses and that every variable it uses is in `declared`.
///
/// # Errors
/// [`TemplateError::Syntax`] or [`TemplateError::Undefined`] (the alphabetically first
/// undefined name).
pub fn check(text: &str, declared: &[&str]) -> Result<(), TemplateError> {
    if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
        return Ok(());
    }
    let env = env();
    let tmpl = env
        .template_from_str(text)
        .map_err(|e| TemplateError::Syntax(e.to_string()))?;
    let mut undefined: Vec<String> = tmpl
        .undeclared_variables(false)
        .into_iter()
        .filter(|v| !declared.contains(&v.as_str()))
        .collect();
    undefined.sort();
    match undefined.into_iter().next() {
        Some(name) => Err(TemplateError::Undefined {
            name,
            declared: declared_list(declared),
        }),
        None => Ok(()),
    }
}

/// Renders `text` with argument `values` (strict: an undefined name is an error).
///
/// # Errors
/// [`TemplateError`].
pub fn render(
    text: &str,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, TemplateError> {
    render_with(&env(), text, values)
}

/// Renders shell text: each placeholder becomes one shell-quoted word ([`shell_quote`])
/// unless it goes through the `raw` filter.
///
/// # Errors
/// [`TemplateError`].
pub fn render_shell(
    text: &str,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, TemplateError> {
    render_with(&shell_env(), text, values)
}

fn render_with(
    env: &Environment<'static>,
    text: &str,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<String, TemplateError> {
    if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
        return Ok(text.to_string());
    }
    let declared: Vec<&str> = values.keys().map(String::as_str).collect();
    check(text, &declared)?;
    let tmpl = env
        .template_from_str(text)
        .map_err(|e| TemplateError::Syntax(e.to_string()))?;
    let ctx: BTreeMap<String, Value> = values
        .iter()
        .map(|(k, v)| (k.clone(), to_value(v)))
        .collect();
    tmpl.render(ctx).map_err(|e| render_error(&e, text))
}

/// A render failure in the user's terms: what went wrong and the placeholder text at fault,
/// never minijinja's internal wording.
fn render_error(e: &minijinja::Error, text: &str) -> TemplateError {
    let snippet = e
        .range()
        .and_then(|r| text.get(r))
        .map(|s| format!(" in `{s}`"))
        .unwrap_or_default();
    let line = match (e.line(), text.contains('\n')) {
        (Some(l), true) => format!(" (line {l} of the text)"),
        _ => String::new(),
    };
    TemplateError::Render(match e.kind() {
        minijinja::ErrorKind::UndefinedError => format!(
            "an attribute or item that does not exist{snippet}{line}; arguments are plain values (string, integer, number, boolean or path)"
        ),
        minijinja::ErrorKind::UnknownFilter
        | minijinja::ErrorKind::UnknownTest
        | minijinja::ErrorKind::UnknownFunction
        | minijinja::ErrorKind::UnknownMethod => format!(
            "{}{snippet}{line}",
            e.detail().unwrap_or("unknown filter, test or function")
        ),
        kind => format!(
            "{}{snippet}{line}",
            e.detail().map_or_else(|| kind.to_string(), str::to_string)
        ),
    })
}

fn to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::from(()),
        serde_json::Value::Bool(b) => Value::from(*b),
        serde_json::Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(f)) => Value::from(f),
            _ => Value::from(n.to_string()),
        },
        serde_json::Value::String(s) => Value::from(s.clone()),
        serde_json::Value::Array(a) => Value::from(a.iter().map(to_value).collect::<Vec<_>>()),
        serde_json::Value::Object(o) => Value::from(
            o.iter()
                .map(|(k, v)| (k.clone(), to_value(v)))
                .collect::<BTreeMap<String, Value>>(),
        ),
    }
}

/// Renders every string inside a JSON value (used for script steps and tool arguments).
///
/// # Errors
/// [`TemplateError`].
pub fn render_json(
    value: &serde_json::Value,
    values: &serde_json::Map<String, serde_json::Value>,
) -> Result<serde_json::Value, TemplateError> {
    Ok(match value {
        serde_json::Value::String(s) => serde_json::Value::String(render(s, values)?),
        serde_json::Value::Array(a) => serde_json::Value::Array(
            a.iter()
                .map(|v| render_json(v, values))
                .collect::<Result<_, _>>()?,
        ),
        serde_json::Value::Object(o) => serde_json::Value::Object(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), render_json(v, values)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

/// Checks that every string inside a JSON value renders with `samples` (one sample value per
/// declared argument), returning the path of the first that does not: catches undefined
/// names, unknown filters and attributes of plain values before any plan uses the action.
///
/// # Errors
/// `(path suffix, error)`.
pub fn check_json_renders(
    value: &serde_json::Value,
    samples: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), (String, TemplateError)> {
    match value {
        serde_json::Value::String(s) => {
            render(s, samples).map(drop).map_err(|e| (String::new(), e))
        }
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                check_json_renders(v, samples).map_err(|(p, e)| (format!("[{i}]{p}"), e))?;
            }
            Ok(())
        }
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                check_json_renders(v, samples).map_err(|(p, e)| (format!(".{k}{p}"), e))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks every string inside a JSON value, returning the path of the first bad one.
///
/// # Errors
/// `(path suffix, error)`.
pub fn check_json(
    value: &serde_json::Value,
    declared: &[&str],
) -> Result<(), (String, TemplateError)> {
    match value {
        serde_json::Value::String(s) => check(s, declared).map_err(|e| (String::new(), e)),
        serde_json::Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                check_json(v, declared).map_err(|(p, e)| (format!("[{i}]{p}"), e))?;
            }
            Ok(())
        }
        serde_json::Value::Object(o) => {
            for (k, v) in o {
                check_json(v, declared).map_err(|(p, e)| (format!(".{k}{p}"), e))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Where a placeholder stands in shell text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShellContext {
    /// Outside any quotes: the quoted word is one word, as intended.
    Word,
    /// Inside `'...'`: the value's own quotes would end the quoting.
    SingleQuotes,
    /// Inside `"..."`: the quotes of the value would become part of the text.
    DoubleQuotes,
    /// In a `#` comment: a newline in the value would end the comment.
    Comment,
    /// In a here-document body: quoting means nothing there.
    HereDoc,
}

impl ShellContext {
    /// How a user would say it.
    pub fn describe(self) -> &'static str {
        match self {
            ShellContext::Word => "a plain word",
            ShellContext::SingleQuotes => "single quotes",
            ShellContext::DoubleQuotes => "double quotes",
            ShellContext::Comment => "a `#` comment",
            ShellContext::HereDoc => "a here-document",
        }
    }
}

/// One `{{ ... }}` of shell text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placeholder {
    /// The expression between the braces, trimmed (`from`, `cmd | raw`).
    pub expr: String,
    /// Where it stands.
    pub context: ShellContext,
    /// Whether it goes through `raw` (or minijinja's `safe`), so it is pasted unquoted.
    pub raw: bool,
}

fn is_raw(expr: &str) -> bool {
    expr.split('|').skip(1).any(|f| {
        let name = f.trim().split(['(', ' ']).next().unwrap_or_default();
        name == RAW_FILTER || name == "safe"
    })
}

/// Lexical state of the shell text around placeholders.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lex {
    Word,
    Single,
    Double,
    Comment,
}

/// The placeholders of shell `text` with where each stands: a small POSIX-shell lexer that
/// follows quotes, backslashes, `#` comments and here-documents (`<<WORD`, `<<-WORD`) over the
/// literal text, skipping `{% %}` and `{# #}` tags. Command substitutions are not followed
/// (a placeholder inside `"$(...)"` counts as inside double quotes).
pub fn shell_placeholders(text: &str) -> Vec<Placeholder> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut lex = Lex::Word;
    let mut word_start = true;
    let mut pending: std::collections::VecDeque<(String, bool)> = Default::default();
    let mut heredoc: Option<(String, bool)> = None;
    let mut line_start = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'{' && matches!(b.get(i + 1), Some(b'{' | b'%' | b'#')) {
            let close = match b[i + 1] {
                b'{' => "}}",
                b'%' => "%}",
                _ => "#}",
            };
            let end = text[i + 2..].find(close).map_or(b.len(), |e| i + 2 + e);
            if b[i + 1] == b'{' {
                let expr = text[i + 2..end].trim_matches(|c: char| c == '-' || c.is_whitespace());
                let context = match (&heredoc, lex) {
                    (Some(_), _) => ShellContext::HereDoc,
                    (None, Lex::Word) => ShellContext::Word,
                    (None, Lex::Single) => ShellContext::SingleQuotes,
                    (None, Lex::Double) => ShellContext::DoubleQuotes,
                    (None, Lex::Comment) => ShellContext::Comment,
                };
                out.push(Placeholder {
                    expr: expr.to_string(),
                    context,
                    raw: is_raw(expr),
                });
                word_start = false;
            }
            i = (end + close.len()).min(b.len());
            continue;
        }
        let c = b[i];
        if let Some((delim, strip)) = &heredoc {
            if c == b'\n' {
                let line = &text[line_start..i];
                let line = if *strip {
                    line.trim_start_matches('\t')
                } else {
                    line
                };
                if line == delim {
                    heredoc = pending.pop_front();
                }
                line_start = i + 1;
            }
            i += 1;
            continue;
        }
        match (lex, c) {
            (Lex::Word | Lex::Double, b'\\') => i += 1,
            (Lex::Word, b'\'') => lex = Lex::Single,
            (Lex::Word, b'"') => lex = Lex::Double,
            (Lex::Word, b'#') if word_start => lex = Lex::Comment,
            (Lex::Word, b'<') if b.get(i + 1) == Some(&b'<') && b.get(i + 2) != Some(&b'<') => {
                let mut j = i + 2;
                let strip = b.get(j) == Some(&b'-');
                if strip {
                    j += 1;
                }
                while matches!(b.get(j), Some(b' ' | b'\t')) {
                    j += 1;
                }
                let start = j;
                while j < b.len() && !b" \t\n;|&<>()".contains(&b[j]) {
                    j += 1;
                }
                let delim: String = text[start..j]
                    .chars()
                    .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                    .collect();
                // `$(( 1 << 2 ))` shifts; a here-document's delimiter is a word.
                if !delim.is_empty() && !delim.chars().all(|c| c.is_ascii_digit()) {
                    pending.push_back((delim, strip));
                }
                i = j;
                word_start = false;
                continue;
            }
            (Lex::Single, b'\'') | (Lex::Double, b'"') => lex = Lex::Word,
            (Lex::Comment, b'\n') => lex = Lex::Word,
            _ => {}
        }
        if c == b'\n' && lex == Lex::Word {
            line_start = i + 1;
            if heredoc.is_none() {
                heredoc = pending.pop_front();
            }
        }
        word_start = lex == Lex::Word && b" \t\n;&|()".contains(&c);
        i += 1;
    }
    out
}

/// The first placeholder of shell `text` that would not render as one word: written inside
/// quotes, a comment or a here-document without `raw`. The message says what to write instead.
pub fn shell_quoting_problem(text: &str) -> Option<String> {
    let p = shell_placeholders(text)
        .into_iter()
        .find(|p| !p.raw && p.context != ShellContext::Word)?;
    let fix = match p.context {
        ShellContext::Comment => {
            "leave placeholders out of comments (a value holding a newline would end the comment)"
        }
        ShellContext::HereDoc => "pass the value on a command line instead",
        _ => "remove the quotes around it",
    };
    Some(format!(
        "`{{{{ {} }}}}` is written inside {}, but an argument already renders as one shell-quoted word (`it's` becomes `'it'\\''s'`), so the value would not arrive as written; {fix}, or read it from `\"$AGENTS_ARG_{}\"`; only a value meant to be shell code takes `{{{{ {} | raw }}}}`",
        p.expr,
        p.context.describe(),
        p.expr
            .split('|')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_uppercase(),
        p.expr.split('|').next().unwrap_or_default().trim(),
    ))
}

/// The placeholders of shell `text` that go through `raw` (pasted unquoted), as written.
pub fn raw_placeholders(text: &str) -> Vec<String> {
    shell_placeholders(text)
        .into_iter()
        .filter(|p| p.raw)
        .map(|p| format!("{{{{ {} }}}}", p.expr))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(pairs: &[(&str, &str)]) -> serde_json::Map<String, serde_json::Value> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
            .collect()
    }

    #[test]
    fn shell_text_gets_each_value_as_one_quoted_word_and_raw_pastes_it() {
        let values = strings(&[
            ("from", "'use strict'"),
            ("to", "\"use strict\""),
            ("evil", "x'; echo INJECTED > INJECTED.txt; echo '"),
            ("sub", "$(touch pwned) `touch pwned2`\nsecond line"),
            ("plain", "src/main.rs"),
            ("empty", ""),
            ("cmd", "test -f LICENSE"),
        ]);
        let out = render_shell(
            "grep -e {{ from }} -e {{ to }} {{ evil }} {{ sub }} {{ plain }} {{ empty }}; {{ cmd | raw }}",
            &values,
        )
        .unwrap();
        assert_eq!(
            out,
            r#"grep -e ''\''use strict'\''' -e '"use strict"' 'x'\''; echo INJECTED > INJECTED.txt; echo '\''' '$(touch pwned) `touch pwned2`
second line' src/main.rs ''; test -f LICENSE"#
        );
        // Plain text is unchanged, and `raw` means nothing there.
        assert_eq!(
            render("{{ from }} / {{ cmd | raw }}", &values).unwrap(),
            "'use strict' / test -f LICENSE"
        );
        let typed = serde_json::json!({"n": 85, "f": true});
        assert_eq!(
            render_shell("x {{ n }} {{ f }}", typed.as_object().unwrap()).unwrap(),
            "x 85 true"
        );
    }

    #[test]
    fn a_real_shell_reads_every_quoted_value_back_exactly() {
        let values = [
            "'use strict'",
            "\"use strict\"",
            "x'; echo INJECTED > INJECTED.txt; echo '",
            "$(echo pwned) `echo pwned` ${HOME} \\ \\n",
            "two\nlines\n",
            "*.js",
            "{a,b} ~ !x #c",
            "",
        ];
        for shell in ["/bin/sh", "bash"] {
            for v in values {
                let out = std::process::Command::new(shell)
                    .arg("-c")
                    .arg(format!("printf %s {}", shell_quote(v)))
                    .output()
                    .unwrap();
                assert_eq!(String::from_utf8_lossy(&out.stdout), v, "{shell} {v:?}");
            }
        }
    }

    #[test]
    fn placeholders_inside_quotes_comments_or_heredocs_are_found() {
        let ctx = |t: &str| {
            shell_placeholders(t)
                .into_iter()
                .map(|p| (p.expr, p.context, p.raw))
                .collect::<Vec<_>>()
        };
        use ShellContext::*;
        assert_eq!(
            ctx(r#"a {{ x }} '{{ y }}' "{{ z }}" it\'s {{ w | raw }}"#),
            vec![
                ("x".into(), Word, false),
                ("y".into(), SingleQuotes, false),
                ("z".into(), DoubleQuotes, false),
                ("w | raw".into(), Word, true),
            ]
        );
        assert_eq!(
            ctx("# note {{ x }}\necho a#{{ y }}\ncat <<-EOF\n\t{{ z }}\n\tEOF\necho {{ v }}"),
            vec![
                ("x".into(), Comment, false),
                ("y".into(), Word, false),
                ("z".into(), HereDoc, false),
                ("v".into(), Word, false),
            ]
        );
        assert_eq!(ctx("{% if x %}--flag={{ x }}{% endif %}")[0].1, Word);
        assert_eq!(ctx("echo $((1 << 2))\necho {{ x }}")[0].1, Word);
        assert!(shell_quoting_problem("grep -e {{ from }} --include={{ glob }} .").is_none());
        let text = shell_quoting_problem(r"printf '{{ text }}\n'").unwrap();
        assert!(text.contains("single quotes"), "{text}");
        assert!(text.contains("AGENTS_ARG_TEXT"), "{text}");
        assert!(shell_quoting_problem("'{{ cmd | raw }}'").is_none());
        assert_eq!(
            raw_placeholders("{{ a }} {{ b | raw }}"),
            vec!["{{ b | raw }}"]
        );
    }

    #[test]
    fn templates_that_can_never_render_are_refused_with_a_clean_message() {
        let values = json!({"check": "test -f LICENSE", "x": "a"});
        let values = values.as_object().unwrap();
        let e = render("run {{ check.attr }}", values).unwrap_err();
        let text = e.to_string();
        assert!(matches!(e, TemplateError::Render(_)), "{e:?}");
        assert!(text.contains("`check.attr`"), "{text}");
        assert!(!text.contains("undefined value"), "{text}");
        let text = render("{{ x | nosuchfilter }}", values)
            .unwrap_err()
            .to_string();
        assert!(text.contains("nosuchfilter"), "{text}");
        assert!(!text.contains("<string>"), "{text}");
    }

    #[test]
    fn declared_placeholders_pass_and_undefined_ones_are_named() {
        check("Raise coverage to {{ target }}%", &["target"]).unwrap();
        let e = check("Run {{ tets_cmd }}", &["test_cmd"]).unwrap_err();
        assert_eq!(
            e,
            TemplateError::Undefined {
                name: "tets_cmd".into(),
                declared: "test_cmd".into()
            }
        );
        assert!(matches!(check("{{ x", &[]), Err(TemplateError::Syntax(_))));
        check("no placeholders at all", &[]).unwrap();
    }

    #[test]
    fn rendering_fills_values_and_refuses_undefined_names() {
        let values = json!({"target": 85, "name": "api"});
        let values = values.as_object().unwrap();
        assert_eq!(
            render("{{ name }}: {{ target }}%", values).unwrap(),
            "api: 85%"
        );
        assert!(render("{{ other }}", values).is_err());
        let rendered = render_json(&json!({"cmd": ["echo {{ name }}"]}), values).unwrap();
        assert_eq!(rendered, json!({"cmd": ["echo api"]}));
        assert_eq!(
            check_json(&json!({"a": ["ok", "{{ nope }}"]}), &[])
                .unwrap_err()
                .0,
            ".a[1]"
        );
    }
}
