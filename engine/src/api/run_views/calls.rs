//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

impl dyn Client + '_ {
    /// Sends one call of this family and takes its view.
    fn run_call(&self, request: RunRequest) -> Result<RunView, ApiError> {
        let asked = Request::RunCall(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::RunCall(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Every actor context (see [`RunRequest::Contexts`]).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn actor_contexts(&self) -> Result<Vec<ContextSummary>, ApiError> {
        match self.run_call(RunRequest::Contexts)? {
            RunView::Contexts(c) => Ok(c),
            other => Err(unexpected("contexts", &other)),
        }
    }

    /// Actor context `name` (see [`RunRequest::Context`]).
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn actor_context(&self, name: &str) -> Result<ContextDetail, ApiError> {
        match self.run_call(RunRequest::Context {
            name: name.to_string(),
        })? {
            RunView::Context(c) => Ok(*c),
            other => Err(unexpected("context", &other)),
        }
    }

    /// Actor context `name`'s export document (see [`RunRequest::ContextExport`]).
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn export_actor_context(&self, name: &str) -> Result<ContextExported, ApiError> {
        match self.run_call(RunRequest::ContextExport {
            name: name.to_string(),
        })? {
            RunView::ContextExported(c) => Ok(*c),
            other => Err(unexpected("context_export", &other)),
        }
    }

    /// Stores an exported actor context (see [`RunRequest::ContextImport`]).
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the file, `CONFLICT` without `update`; see [`Client::call`].
    pub fn import_actor_context(
        &self,
        source: &str,
        text: &str,
        name: Option<&str>,
        update: bool,
    ) -> Result<ImportedContext, ApiError> {
        match self.run_call(RunRequest::ContextImport {
            source: source.to_string(),
            text: text.to_string(),
            name: name.map(str::to_string),
            update,
        })? {
            RunView::ContextImported(c) => Ok(*c),
            other => Err(unexpected("context_import", &other)),
        }
    }

    /// Removes from actor contexts what `what` says (see [`RunRequest::ContextRemove`]).
    ///
    /// # Errors
    /// `NOT_FOUND` for a name that is no context; see [`Client::call`].
    pub fn remove_actor_contexts(
        &self,
        names: Option<Vec<String>>,
        what: Removal,
    ) -> Result<Vec<Removed>, ApiError> {
        match self.run_call(RunRequest::ContextRemove { names, what })? {
            RunView::ContextRemoved(r) => Ok(r),
            other => Err(unexpected("context_remove", &other)),
        }
    }

    /// Runs a built-in tool against a plan's sandbox (see [`RunRequest::ToolRun`]).
    ///
    /// # Errors
    /// `NOT_FOUND` (plan), a failed call with its logged data ([`ApiError::Failed`]); see
    /// [`Client::call`].
    pub fn run_tool(&self, request: ToolRunRequest) -> Result<ToolRan, ApiError> {
        match self.run_call(RunRequest::ToolRun(request))? {
            RunView::ToolRan(r) => Ok(*r),
            other => Err(unexpected("tool_run", &other)),
        }
    }

    /// Runs one model actor (see [`RunRequest::ActorRun`]).
    ///
    /// # Errors
    /// See [`run_actor`] and [`Client::call`].
    pub fn run_actor(&self, request: ActorRunRequest) -> Result<ActorRan, ApiError> {
        match self.run_call(RunRequest::ActorRun(request))? {
            RunView::ActorRan(r) => Ok(*r),
            other => Err(unexpected("actor_run", &other)),
        }
    }
}
