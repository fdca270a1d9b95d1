//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

impl dyn Client + '_ {
    /// Every session (see [`SessionRequest::Sessions`]).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn sessions(&self) -> Result<Vec<SessionSummary>, ApiError> {
        match self.session_call(SessionRequest::Sessions)? {
            SessionView::Sessions(s) => Ok(s),
            other => Err(unexpected("sessions", &other)),
        }
    }

    /// Session `input` (see [`SessionRequest::Session`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn session(&self, input: &str) -> Result<SessionShown, ApiError> {
        match self.session_call(SessionRequest::Session {
            session: input.to_string(),
        })? {
            SessionView::Session(s) => Ok(*s),
            other => Err(unexpected("session", &other)),
        }
    }

    /// Sends one call of this family and takes its view.
    fn session_call(&self, request: SessionRequest) -> Result<SessionView, ApiError> {
        let asked = Request::Session(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Session(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Plan `plan`'s decision tree (see [`SessionRequest::PlanTree`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn plan_tree(&self, plan: &str) -> Result<Vec<TreeNode>, ApiError> {
        match self.session_call(SessionRequest::PlanTree {
            plan: plan.to_string(),
        })? {
            SessionView::PlanTree(t) => Ok(t),
            other => Err(unexpected("plan_tree", &other)),
        }
    }

    /// Why decision `decision` was taken (see [`SessionRequest::Explanation`]).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown decision; see [`Client::call`].
    pub fn explanation(&self, decision: &str) -> Result<Explained, ApiError> {
        match self.session_call(SessionRequest::Explanation {
            decision: decision.to_string(),
        })? {
            SessionView::Explanation(e) => Ok(*e),
            other => Err(unexpected("explanation", &other)),
        }
    }

    /// What correcting decision `decision` would touch (see
    /// [`SessionRequest::CorrectionPreview`]).
    ///
    /// # Errors
    /// `NOT_FOUND` for an unknown decision; see [`Client::call`].
    pub fn correction_preview(
        &self,
        decision: &str,
        append: bool,
    ) -> Result<CorrectionPreview, ApiError> {
        match self.session_call(SessionRequest::CorrectionPreview {
            decision: decision.to_string(),
            append,
        })? {
            SessionView::CorrectionPreview(p) => Ok(*p),
            other => Err(unexpected("correction_preview", &other)),
        }
    }

    /// Plan `plan`'s changes (see [`SessionRequest::PlanChanges`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn plan_changes(&self, plan: &str) -> Result<PlanChanges, ApiError> {
        match self.session_call(SessionRequest::PlanChanges {
            plan: plan.to_string(),
        })? {
            SessionView::PlanChanges(c) => Ok(*c),
            other => Err(unexpected("plan_changes", &other)),
        }
    }

    /// Plan `plan`'s checkpoints a rollback can go to (see [`SessionRequest::Checkpoints`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn rollback_checkpoints(&self, plan: &str) -> Result<Vec<CheckpointRecord>, ApiError> {
        match self.session_call(SessionRequest::Checkpoints {
            plan: plan.to_string(),
        })? {
            SessionView::Checkpoints(c) => Ok(c),
            other => Err(unexpected("checkpoints", &other)),
        }
    }

    /// Creates a session (see [`SessionRequest::Create`]).
    ///
    /// # Errors
    /// `INVALID_INPUT`, `CONFLICT` for a taken name, an actor that cannot orchestrate, an
    /// unknown profile; see [`Client::call`].
    pub fn create_session(
        &self,
        actor: Option<String>,
        name: Option<String>,
        automation_profile: Option<String>,
        max_history: u32,
    ) -> Result<SessionCreated, ApiError> {
        match self.session_call(SessionRequest::Create {
            actor,
            name,
            automation_profile,
            max_history,
        })? {
            SessionView::Created(c) => Ok(*c),
            other => Err(unexpected("create", &other)),
        }
    }

    /// Deletes session `input` (see [`SessionRequest::Delete`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn delete_session(&self, input: &str) -> Result<SessionDeleted, ApiError> {
        match self.session_call(SessionRequest::Delete {
            session: input.to_string(),
        })? {
            SessionView::Deleted(d) => Ok(d),
            other => Err(unexpected("delete", &other)),
        }
    }

    /// Session `input`'s export document (see [`SessionRequest::Export`]).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn export_session(&self, input: &str) -> Result<SessionExported, ApiError> {
        match self.session_call(SessionRequest::Export {
            session: input.to_string(),
        })? {
            SessionView::Exported(e) => Ok(*e),
            other => Err(unexpected("export", &other)),
        }
    }

    /// Stores an exported session (see [`SessionRequest::Import`]).
    ///
    /// # Errors
    /// `INVALID_INPUT` naming the file; see [`Client::call`].
    pub fn import_session(
        &self,
        source: &str,
        text: &str,
        keep_profile: bool,
    ) -> Result<SessionImported, ApiError> {
        match self.session_call(SessionRequest::Import {
            source: source.to_string(),
            text: text.to_string(),
            keep_profile,
        })? {
            SessionView::Imported(i) => Ok(*i),
            other => Err(unexpected("import", &other)),
        }
    }

    /// Runs one orchestrator turn (see [`SessionRequest::Tell`]); streamed events come back
    /// in [`Told::events`].
    ///
    /// # Errors
    /// See [`tell`] and [`Client::call`].
    pub fn tell_session(&self, request: TellRequest) -> Result<Told, ApiError> {
        match self.session_call(SessionRequest::Tell(request))? {
            SessionView::Told(t) => Ok(*t),
            other => Err(unexpected("tell", &other)),
        }
    }

    /// The use form's choices (see [`SessionRequest::UseChoices`]).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn use_choices(&self) -> Result<UseChoices, ApiError> {
        match self.session_call(SessionRequest::UseChoices)? {
            SessionView::UseChoices(c) => Ok(c),
            other => Err(unexpected("use_choices", &other)),
        }
    }
}
