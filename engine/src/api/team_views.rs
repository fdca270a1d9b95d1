//! The team family of the protocol ([`super::protocol::Request::Team`]): the server's users,
//! organizations, members and tokens, as `agents server user|org|token` ask for them on the
//! server host or through a server (spec sections 21 and 22).

mod calls;

use serde::{Deserialize, Serialize};

use super::team::{Org, User};
use super::{ApiError, Engine};
use crate::team::Role;

/// One call of the team family of the protocol ([`super::protocol::Request::Team`]): the
/// server's users, organizations, members and tokens.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "query", rename_all = "snake_case")]
pub enum TeamRequest {
    /// Adds a user (`server user add`).
    AddUser {
        /// The user's name.
        name: String,
        /// Whether the user administers the server.
        server_admin: bool,
    },
    /// Every user (`server user list`).
    Users,
    /// Adds an organization with its owner (`server org add`).
    AddOrg {
        /// The organization's name.
        name: String,
        /// Its first owner, an existing user.
        owner: String,
    },
    /// Every organization with its members (`server org list`).
    Orgs,
    /// One organization with its members (`server org show`).
    Org {
        /// The organization's name.
        name: String,
    },
    /// Makes a user a member of an organization, or changes their role (`server org member
    /// add`).
    SetMember {
        /// The organization.
        org: String,
        /// The user.
        user: String,
        /// Their role.
        role: Role,
    },
    /// Removes a member (`server org member remove`).
    RemoveMember {
        /// The organization.
        org: String,
        /// The user.
        user: String,
    },
    /// Creates a token (`server token create`).
    CreateToken(super::tokens::NewToken),
    /// Every token, never a secret (`server token list`).
    Tokens,
    /// Revokes a token by id or name (`server token revoke`).
    RevokeToken {
        /// Token id (`tok_...`), unique id prefix or name.
        token: String,
    },
}

impl TeamRequest {
    /// The call's name (`add_user`, `tokens`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            TeamRequest::AddUser { .. } => "add_user",
            TeamRequest::Users => "users",
            TeamRequest::AddOrg { .. } => "add_org",
            TeamRequest::Orgs => "orgs",
            TeamRequest::Org { .. } => "org",
            TeamRequest::SetMember { .. } => "set_member",
            TeamRequest::RemoveMember { .. } => "remove_member",
            TeamRequest::CreateToken(_) => "create_token",
            TeamRequest::Tokens => "tokens",
            TeamRequest::RevokeToken { .. } => "revoke_token",
        }
    }
}

/// The answer to a [`TeamRequest`].
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum TeamView {
    /// [`TeamRequest::AddUser`].
    User(User),
    /// [`TeamRequest::Users`].
    Users(Vec<User>),
    /// [`TeamRequest::AddOrg`], [`TeamRequest::Org`], [`TeamRequest::SetMember`],
    /// [`TeamRequest::RemoveMember`].
    Org(Org),
    /// [`TeamRequest::Orgs`].
    Orgs(Vec<Org>),
    /// [`TeamRequest::CreateToken`]: the secret, shown once.
    CreatedToken(super::tokens::CreatedToken),
    /// [`TeamRequest::Tokens`].
    Tokens(Vec<super::tokens::TokenRecord>),
    /// [`TeamRequest::RevokeToken`].
    Revoked(super::tokens::TokenRecord),
}

/// Answers `request` on `engine`.
///
/// # Errors
/// The engine's [`ApiError`] of each call.
pub fn answer(engine: &Engine, request: TeamRequest) -> Result<TeamView, ApiError> {
    Ok(match request {
        TeamRequest::AddUser { name, server_admin } => {
            TeamView::User(engine.add_user(&name, server_admin)?)
        }
        TeamRequest::Users => TeamView::Users(engine.users()?),
        TeamRequest::AddOrg { name, owner } => TeamView::Org(engine.add_org(&name, &owner)?),
        TeamRequest::Orgs => TeamView::Orgs(engine.orgs()?),
        TeamRequest::Org { name } => TeamView::Org(engine.org(&name)?),
        TeamRequest::SetMember { org, user, role } => {
            TeamView::Org(engine.set_member(&org, &user, role)?)
        }
        TeamRequest::RemoveMember { org, user } => {
            TeamView::Org(engine.remove_member(&org, &user)?)
        }
        TeamRequest::CreateToken(new) => TeamView::CreatedToken(engine.create_token(&new)?),
        TeamRequest::Tokens => TeamView::Tokens(engine.tokens()?),
        TeamRequest::RevokeToken { token } => TeamView::Revoked(engine.revoke_token(&token)?),
    })
}
