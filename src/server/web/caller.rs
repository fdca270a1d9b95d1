//! The signed-in user as a [`Client`]: every call the page makes is the protocol request the
//! command line sends, answered by [`api::access::serve_as`] exactly as `POST /v1/call`
//! answers it, so the page's actions leave the same events, attribution and audit rows.

use std::ops::ControlFlow;

use cleveragents_engine::api::{self, ApiError, Client, Engine, Followed, Principal, protocol};
use cleveragents_engine::domain::Id;

/// One user's calls on the server's engine.
pub struct AsUser {
    /// The server's engine.
    pub engine: Engine,
    /// Who asks.
    pub principal: Principal,
}

impl Client for AsUser {
    fn call(&self, request: protocol::Request) -> Result<protocol::Response, ApiError> {
        tracing::info!(
            call = request.name(),
            user = %self.principal.user,
            address = self.principal.address.as_deref().unwrap_or("-"),
            face = "web",
            "call"
        );
        api::access::serve_as(&self.engine, &self.principal, request)
    }

    fn follow(
        &self,
        _plan: Option<&Id>,
        _after: i64,
        _sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    ) -> Result<(), ApiError> {
        // The page follows events through its own event stream (`/plans/PLAN/events`).
        Err(ApiError::NotSupported {
            what: "following events through a page's call".to_string(),
        })
    }

    fn location(&self) -> String {
        "web".to_string()
    }
}
