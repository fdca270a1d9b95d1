//! Failures as the server answers them: the status for each stable code, and the same error
//! body the CLI prints as JSON (`{"error": {code, message, detail, hints}}`).

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use cleveragents_engine::api::protocol::{ErrorEnvelope, RemoteError};
use cleveragents_engine::api::{ApiError, ErrorCode};

use super::Render;

/// The HTTP status of a failure with `code`.
pub fn status_of(code: ErrorCode) -> StatusCode {
    use ErrorCode as C;
    match code {
        C::NotFound => StatusCode::NOT_FOUND,
        C::Ambiguous | C::InvalidInput | C::Usage => StatusCode::BAD_REQUEST,
        C::Conflict | C::NeedsApproval | C::Cancelled | C::PlanErrored => StatusCode::CONFLICT,
        C::Unauthenticated => StatusCode::UNAUTHORIZED,
        C::PermissionDenied | C::PolicyDenied => StatusCode::FORBIDDEN,
        C::AlreadyExists => StatusCode::CONFLICT,
        C::NotSupported => StatusCode::NOT_IMPLEMENTED,
        C::ProviderUnavailable => StatusCode::BAD_GATEWAY,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// An error body with `code` (a stable code's spelling), `message` and `hints`.
pub fn body(code: &str, message: String, hints: Vec<String>) -> Json<ErrorEnvelope> {
    Json(ErrorEnvelope {
        error: RemoteError {
            code: code.parse().unwrap_or(ErrorCode::Internal),
            message,
            detail: None,
            hints,
            data: None,
        },
    })
}

/// An engine failure as an answer: its code's status and the body `render` makes of it.
pub fn api_failure(render: Render, e: ApiError) -> Response {
    let envelope = ErrorEnvelope { error: render(e) };
    (status_of(envelope.error.code), Json(envelope)).into_response()
}

/// `400`: the request could not be read.
pub fn bad_request(message: &str) -> Response {
    (
        StatusCode::BAD_REQUEST,
        body("INVALID_INPUT", message.to_string(), vec![]),
    )
        .into_response()
}

/// `500`: something the server should never do.
pub fn internal(message: &str) -> Response {
    tracing::error!(message, "internal server failure");
    (
        StatusCode::INTERNAL_SERVER_ERROR,
        body("INTERNAL", message.to_string(), vec![]),
    )
        .into_response()
}
