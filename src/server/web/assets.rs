//! The page's style sheet and its small script, compiled into the binary and served under
//! `/assets/` (no Node toolchain: plain CSS and vanilla JavaScript).

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The style sheet: light and dark themes, a layout that fits a 390 px wide screen.
const CSS: &str = include_str!("assets/web.css");

/// The script: the theme toggle, the TUI's keys on the plan page, the live events box.
const JS: &str = include_str!("assets/web.js");

/// `GET /assets/FILE`.
pub async fn serve(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "web.css" => (CSS, "text/css; charset=utf-8"),
        "web.js" => (JS, "text/javascript; charset=utf-8"),
        _ => {
            return (
                StatusCode::NOT_FOUND,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                "no such asset\n",
            )
                .into_response();
        }
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
        .into_response()
}
