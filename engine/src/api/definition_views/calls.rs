//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

impl dyn Client + '_ {
    /// Sends one call of this family and takes its view.
    fn definition_call(&self, request: DefinitionQuery) -> Result<DefinitionView, ApiError> {
        let asked = Request::Definition(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Definition(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Every action with the plans made from each ([`DefinitionQuery::Actions`]).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn actions(&self) -> Result<Vec<ActionRow>, ApiError> {
        match self.definition_call(DefinitionQuery::Actions)? {
            DefinitionView::Actions(v) => Ok(v),
            other => Err(unexpected("actions", &other)),
        }
    }

    /// One action with its invariants and history.
    ///
    /// # Errors
    /// The action registry's `NOT_FOUND`; see [`Client::call`].
    pub fn action(&self, action: &str) -> Result<ActionDetail, ApiError> {
        let q = DefinitionQuery::Action {
            action: action.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Action(v) => Ok(*v),
            other => Err(unexpected("action", &other)),
        }
    }

    /// Every actor row and the number of providers.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn actors(&self) -> Result<ActorList, ApiError> {
        match self.definition_call(DefinitionQuery::Actors)? {
            DefinitionView::Actors(v) => Ok(v),
            other => Err(unexpected("actors", &other)),
        }
    }

    /// One actor.
    ///
    /// # Errors
    /// The actor registry's errors; see [`Client::call`].
    pub fn actor(&self, name: &str) -> Result<ActorDetail, ApiError> {
        let q = DefinitionQuery::Actor {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Actor(v) => Ok(*v),
            other => Err(unexpected("actor", &other)),
        }
    }

    /// Every automation profile.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn profiles(&self) -> Result<Vec<Profile>, ApiError> {
        match self.definition_call(DefinitionQuery::Profiles)? {
            DefinitionView::Profiles(v) => Ok(v),
            other => Err(unexpected("profiles", &other)),
        }
    }

    /// One automation profile.
    ///
    /// # Errors
    /// The profile registry's errors; see [`Client::call`].
    pub fn profile(&self, name: &str) -> Result<Profile, ApiError> {
        let q = DefinitionQuery::Profile {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Profile(v) => Ok(*v),
            other => Err(unexpected("profile", &other)),
        }
    }

    /// A removable custom profile and who still names it (`globals`: the defaults in force).
    ///
    /// # Errors
    /// The profile registry's errors (a built-in, an unknown name); see [`Client::call`].
    pub fn profile_usage(
        &self,
        name: &str,
        globals: Vec<(String, String)>,
    ) -> Result<ProfileUsage, ApiError> {
        let q = DefinitionQuery::ProfileUsage {
            name: name.to_string(),
            globals,
        };
        match self.definition_call(q)? {
            DefinitionView::ProfileUsage(v) => Ok(*v),
            other => Err(unexpected("profile_usage", &other)),
        }
    }

    /// The built-in and registered tools.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn tools(&self) -> Result<ToolList, ApiError> {
        match self.definition_call(DefinitionQuery::Tools)? {
            DefinitionView::Tools(v) => Ok(v),
            other => Err(unexpected("tools", &other)),
        }
    }

    /// One tool as `tool show` names it.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn tool(&self, name: &str) -> Result<ToolView, ApiError> {
        let q = DefinitionQuery::Tool {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Tool(v) => Ok(*v),
            other => Err(unexpected("tool", &other)),
        }
    }

    /// Whether tool `name` is built in or registered (`None`: neither).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn tool_kind(&self, name: &str) -> Result<Option<DefinitionKind>, ApiError> {
        let q = DefinitionQuery::ToolKind {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Kind(v) => Ok(v),
            other => Err(unexpected("tool_kind", &other)),
        }
    }

    /// Every skill with the problems of discovery.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn skills(&self) -> Result<SkillList, ApiError> {
        match self.definition_call(DefinitionQuery::Skills)? {
            DefinitionView::Skills(v) => Ok(v),
            other => Err(unexpected("skills", &other)),
        }
    }

    /// One skill with the actors naming it.
    ///
    /// # Errors
    /// The skill registry's `NOT_FOUND`; see [`Client::call`].
    pub fn skill(&self, name: &str) -> Result<SkillDetail, ApiError> {
        let q = DefinitionQuery::Skill {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Skill(v) => Ok(*v),
            other => Err(unexpected("skill", &other)),
        }
    }

    /// One skill with its MCP servers' live tools added, and the problems reaching them.
    ///
    /// # Errors
    /// The skill registry's `NOT_FOUND`; see [`Client::call`].
    pub fn skill_tools(&self, name: &str) -> Result<(ResolvedSkill, Vec<String>), ApiError> {
        let q = DefinitionQuery::SkillTools {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Skills(mut v) if v.skills.len() == 1 => {
                Ok((v.skills.remove(0), v.problems))
            }
            other => Err(unexpected("skill_tools", &other)),
        }
    }

    /// Whether skill `name` is built in or registered (`None`: neither).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn skill_kind(&self, name: &str) -> Result<Option<DefinitionKind>, ApiError> {
        let q = DefinitionQuery::SkillKind {
            name: name.to_string(),
        };
        match self.definition_call(q)? {
            DefinitionView::Kind(v) => Ok(v),
            other => Err(unexpected("skill_kind", &other)),
        }
    }
}
