//! Direct runs (spec sections 05, 06, 18 and 21): `actor run`, `actor context ...` and `tool
//! run`, the developer commands that run an actor or a tool outside a plan's lifecycle.
//!
//! One family of calls of the protocol ([`Request::RunCall`]): its requests, its views, how an
//! [`Engine`] answers them and the typed calls on a [`Client`]. The work happens where the
//! data is: through a server, the model calls are made with the server's configuration and
//! keys, tools run in the server's sandboxes, and paths an argument names (`--context-dir`,
//! `--load-context FILE`, `--target-path`) are read on the server's host; the files a
//! command writes or reads for the user (`--output`, `actor context export|import`) are
//! written and read by the face.

mod calls;

mod actor_runs;
mod tool_runs;

use serde::{Deserialize, Serialize};

use super::{ApiError, Engine};

pub use crate::actor_run::OneShotError;
pub use crate::actor_run::contexts::{
    ContextDetail, ContextError, ContextItem, ContextSummary, ImportedContext, Removal, Removed,
    SCHEMA_VERSION as CONTEXT_SCHEMA_VERSION,
};
pub use crate::actors::messages::Message;
pub use crate::actors::providers::ProviderError;
pub use crate::actors::runtime::Stop;
pub use actor_runs::{ActorRan, ActorRunRequest, ModelCallShown, ToolCallShown, run_actor};
pub use tool_runs::{ToolChange, ToolRan, ToolRunRequest};

/// One call of this family.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum RunRequest {
    /// Every actor context (`actor context list`).
    Contexts,
    /// One actor context with its items (`actor context show`).
    Context {
        /// Context name.
        name: String,
    },
    /// A context's export document (`actor context export`; the face writes the file).
    ContextExport {
        /// Context name.
        name: String,
    },
    /// Stores an exported context (`actor context import`; the face reads the file).
    ContextImport {
        /// The file's name, for errors and the context's origin.
        source: String,
        /// The file's text.
        text: String,
        /// Context name (default: the name in the file).
        name: Option<String>,
        /// Replace an existing context of the same name.
        update: bool,
    },
    /// Removes contexts, their items or their files (`actor context delete|clear|rm`).
    ContextRemove {
        /// The contexts; every context when `None`.
        names: Option<Vec<String>>,
        /// What to remove.
        what: Removal,
    },
    /// Runs a built-in tool against a plan's sandbox (`tool run`).
    ToolRun(ToolRunRequest),
    /// Runs one model actor in isolation (`actor run`).
    ActorRun(ActorRunRequest),
}

impl RunRequest {
    /// The call's name as the protocol spells it.
    pub fn name(&self) -> &'static str {
        match self {
            RunRequest::Contexts => "contexts",
            RunRequest::Context { .. } => "context",
            RunRequest::ContextExport { .. } => "context_export",
            RunRequest::ContextImport { .. } => "context_import",
            RunRequest::ContextRemove { .. } => "context_remove",
            RunRequest::ToolRun(_) => "tool_run",
            RunRequest::ActorRun(_) => "actor_run",
        }
    }
}

/// A context's export document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ContextExported {
    /// The document, pretty-printed (without the final newline).
    pub text: String,
    /// Its checksum.
    pub checksum: String,
    /// The context exported.
    pub detail: ContextDetail,
}

/// The answer to a [`RunRequest`], one variant per call.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "view", rename_all = "snake_case")]
pub enum RunView {
    /// [`RunRequest::Contexts`].
    Contexts(Vec<ContextSummary>),
    /// [`RunRequest::Context`].
    Context(Box<ContextDetail>),
    /// [`RunRequest::ContextExport`].
    ContextExported(Box<ContextExported>),
    /// [`RunRequest::ContextImport`].
    ContextImported(Box<ImportedContext>),
    /// [`RunRequest::ContextRemove`].
    ContextRemoved(Vec<Removed>),
    /// [`RunRequest::ToolRun`].
    ToolRan(Box<ToolRan>),
    /// [`RunRequest::ActorRun`].
    ActorRan(Box<ActorRan>),
}

/// Answers `request` on `engine`.
///
/// # Errors
/// [`ApiError`] as each call documents.
pub(crate) fn answer(engine: &Engine, request: RunRequest) -> Result<RunView, ApiError> {
    use crate::actor_run::contexts;
    Ok(match request {
        RunRequest::Contexts => RunView::Contexts(contexts::list(&engine.store()?)?),
        RunRequest::Context { name } => {
            RunView::Context(Box::new(contexts::get(&engine.store()?, &name)?))
        }
        RunRequest::ContextExport { name } => {
            let (doc, checksum, detail) = contexts::export(&engine.store()?, &name)?;
            let text = serde_json::to_string_pretty(&doc).map_err(|e| ApiError::Protocol {
                message: format!("the export does not serialize: {e}"),
            })?;
            RunView::ContextExported(Box::new(ContextExported {
                text,
                checksum,
                detail,
            }))
        }
        RunRequest::ContextImport {
            source,
            text,
            name,
            update,
        } => RunView::ContextImported(Box::new(contexts::import_text(
            &mut engine.store()?,
            &source,
            &text,
            name.as_deref(),
            update,
        )?)),
        RunRequest::ContextRemove { names, what } => RunView::ContextRemoved(contexts::remove(
            &mut engine.store()?,
            names.as_deref(),
            what,
        )?),
        RunRequest::ToolRun(r) => RunView::ToolRan(Box::new(tool_runs::run(engine, r)?)),
        RunRequest::ActorRun(r) => {
            RunView::ActorRan(Box::new(actor_runs::run_actor(engine, &r, &|| false)?))
        }
    })
}

/// The protocol error for a call of this family answered with another call's view.
fn unexpected(asked: &str, got: &RunView) -> ApiError {
    let got = serde_json::to_value(got)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default();
    ApiError::Protocol {
        message: format!("the call `{asked}` was answered with the run view `{got}`"),
    }
}
