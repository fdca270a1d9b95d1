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
    /// Rendering failed for another reason (a filter error, for example).
    #[error("cannot render template: {0}")]
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
    tmpl.render(ctx).map_err(|e| {
        if e.kind() == minijinja::ErrorKind::UndefinedError {
            TemplateError::Undefined {
                name: e.to_string(),
                declared: declared_list(&declared),
            }
        } else {
            TemplateError::Render(e.to_string())
        }
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
