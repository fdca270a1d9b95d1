//! `{{ name }}` placeholders in action text and scripts (spec section 09: argument values are
//! "injected into the description and/or definition of done (via templating)").
//!
//! Templates are minijinja with strict undefined behaviour: a placeholder naming something that
//! is not an argument is an error, both when the action is created (checked statically against
//! the declared argument names) and when a plan renders it with real values.

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

fn env() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
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
    if !text.contains("{{") && !text.contains("{%") && !text.contains("{#") {
        return Ok(text.to_string());
    }
    let declared: Vec<&str> = values.keys().map(String::as_str).collect();
    check(text, &declared)?;
    let env = env();
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
