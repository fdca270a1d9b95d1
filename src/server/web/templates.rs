//! The page templates (minijinja), compiled into the binary: each file of `templates/` is
//! embedded with `include_str!`, and every value is HTML-escaped (the templates' names end in
//! `.html`, which turns minijinja's auto-escaping on).

use std::sync::OnceLock;

use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use minijinja::Environment;

/// Every template, by name.
const TEMPLATES: [(&str, &str); 6] = [
    ("base.html", include_str!("templates/base.html")),
    ("login.html", include_str!("templates/login.html")),
    ("plans.html", include_str!("templates/plans.html")),
    ("plan.html", include_str!("templates/plan.html")),
    ("decision.html", include_str!("templates/decision.html")),
    ("error.html", include_str!("templates/error.html")),
];

/// The pages' content security policy.
const POLICY: &str = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'; object-src 'none'";

fn environment() -> &'static Environment<'static> {
    static ENV: OnceLock<Environment<'static>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Environment::new();
        for (name, source) in TEMPLATES {
            // The templates are part of the binary: one that does not parse is a build defect
            // the page tests catch; it renders as an internal error rather than stopping.
            if let Err(e) = env.add_template(name, source) {
                tracing::error!(template = name, error = %e, "a page template does not parse");
            }
        }
        env
    })
}

/// `name` rendered with `context` as an HTML answer with `status`.
pub fn render(status: StatusCode, name: &str, context: minijinja::Value) -> Response {
    let rendered = environment()
        .get_template(name)
        .and_then(|t| t.render(context));
    match rendered {
        Ok(html) => (
            status,
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-store"),
                // Only this server's style sheet, script, forms and event stream; never framed.
                (header::CONTENT_SECURITY_POLICY, POLICY),
                (header::X_FRAME_OPTIONS, "DENY"),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                (header::REFERRER_POLICY, "same-origin"),
            ],
            html,
        )
            .into_response(),
        Err(e) => {
            tracing::error!(template = name, error = %e, "a page could not be rendered");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
                "<!doctype html><title>Error</title><p>The page could not be rendered; the server's log says why.</p>",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_parses() {
        let env = environment();
        for (name, _) in TEMPLATES {
            assert!(env.get_template(name).is_ok(), "{name} does not parse");
        }
    }

    #[test]
    fn values_are_html_escaped() {
        let page = environment()
            .get_template("error.html")
            .unwrap()
            .render(minijinja::context! { title => "x", message => "<script>alert(1)</script>" })
            .unwrap();
        assert!(page.contains("&lt;script&gt;"), "{page}");
        assert!(!page.contains("<script>alert"), "{page}");
    }
}
