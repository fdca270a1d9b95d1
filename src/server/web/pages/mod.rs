//! The page's handlers: each reads the signed-in caller, asks the engine the protocol's
//! requests the command line asks for the same view or action, and renders a template.

mod actions;
mod decision;
mod plan;
mod plans;
mod sign_in;

use std::collections::HashMap;

pub use actions::{approve, correct, reject, review};
pub use decision::decision;
pub use plan::{events, plan};
pub use plans::plan_list;
pub use sign_in::{login, login_form, logout};

/// `value` as a template value.
fn v(value: &impl serde::Serialize) -> minijinja::Value {
    minijinja::Value::from(minijinja::value::Serde(value))
}

/// A form's fields.
type Fields = HashMap<String, String>;

/// The caller of a POST and its form's fields, or the answer refusing it (no session, a
/// foreign origin, a missing or wrong form token). A body that is not a form has none of
/// its fields, so no form token: refused.
async fn posted(
    web: &super::Web,
    headers: &axum::http::HeaderMap,
    address: std::net::SocketAddr,
    form: Result<axum::Form<Fields>, axum::extract::rejection::FormRejection>,
) -> Result<(super::Caller, Fields), axum::response::Response> {
    let fields = form.map(|axum::Form(f)| f).unwrap_or_default();
    let caller = web.poster(headers, address, fields.get("csrf")).await?;
    Ok((caller, fields))
}

/// The field `name`, trimmed, when it is not empty.
fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields.get(name).map(|v| v.trim()).filter(|v| !v.is_empty())
}

/// The first 8 characters of an id, as the TUI shows ids.
fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

/// The first line of `text`, at most `max` characters.
fn first_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or("");
    let cut: String = line.chars().take(max).collect();
    if cut.len() < text.trim_end().len() {
        format!("{cut}…")
    } else {
        cut
    }
}
