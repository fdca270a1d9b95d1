//! `agents server token|user|org` (spec sections 21 and 22): the users a server knows, its
//! organizations with their members' roles, and the tokens that sign in as a user. On the
//! server host they act on its data directory (or `--database`); with `--server` they are
//! calls of the protocol, answered by that server.

use serde_json::json;

use clap::Subcommand;

use super::server_host::{DatabaseArg, engine};
use super::{CliError, Context};
use crate::output::{Column, Element, Report};
use cleveragents_engine::api;
use cleveragents_engine::api::team::{Org, User};
use cleveragents_engine::api::team_views::{TeamRequest, TeamView};
use cleveragents_engine::api::tokens::{NewToken, TokenRecord, parse_lifetime};

/// `agents server token` subcommands.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Create a token for a user and print it once (plain: the token alone on stdout). The
    /// first token of a server without users makes its user, a server administrator
    Create {
        /// The token's name (`ci`, `alice-laptop`; default: the user's name); without
        /// --user, the user it signs in as
        name: Option<String>,
        /// The user it signs in as
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// How long it works: a number and a unit, s, m, h, d or w (`30d`; default: until
        /// revoked)
        #[arg(long, value_name = "DURATION")]
        expires: Option<String>,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// List tokens with their user and expiry (never their secrets)
    List(DatabaseArg),
    /// Revoke a token by id or name: its next request is refused
    Revoke {
        /// Token id (`tok_...`) or name
        token: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
}

/// `agents server user` subcommands.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user (their name is also their namespace on the server)
    Add {
        /// The user's name
        name: String,
        /// Make the user a server administrator (may do everything)
        #[arg(long)]
        admin: bool,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// List the server's users
    List(DatabaseArg),
}

/// `agents server org` subcommands.
#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Add an organization with its first owner (an existing user)
    Add {
        /// The organization's name (also its namespace)
        org: String,
        /// Its first owner
        #[arg(long, value_name = "USER")]
        owner: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// List the organizations with their members
    List(DatabaseArg),
    /// Show one organization and its members
    Show {
        /// The organization
        org: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// An organization's members
    #[command(subcommand)]
    Member(MemberCommand),
}

/// `agents server org member` subcommands.
#[derive(Debug, Subcommand)]
pub enum MemberCommand {
    /// Make a user a member of an organization, or change their role
    Add {
        /// The organization
        org: String,
        /// The user
        user: String,
        /// Their role
        #[arg(long, value_parser = ["owner", "maintainer", "member", "viewer"])]
        role: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
    /// Remove a member from an organization (its last owner stays)
    Remove {
        /// The organization
        org: String,
        /// The user
        user: String,
        /// Where the server keeps its records.
        #[command(flatten)]
        database: DatabaseArg,
    },
}

/// Answers `request` on the chosen server, else on this host's records.
fn call(ctx: &Context, database: &DatabaseArg, request: TeamRequest) -> Result<TeamView, CliError> {
    let client: Box<dyn api::Client> = match &ctx.server {
        Some(chosen) => {
            // An exported AGENTS_DATABASE_URL is ignored with --server, as by every served
            // command; a typed --database is refused.
            let exported = super::env_var("AGENTS_DATABASE_URL");
            if database.database.is_some() && database.database != exported {
                return Err(CliError::invalid_input(
                    "--database names the server host's records; through --server the server uses its own",
                )
                .hint("drop --database, or run the command on the server host without --server"));
            }
            chosen.client()?
        }
        None => Box::new(engine(ctx, database)?),
    };
    Ok(client.team(request)?)
}

fn unexpected(view: &TeamView) -> CliError {
    let kind = serde_json::to_value(view)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_default();
    CliError::new(
        "INTERNAL",
        format!("the server answered with the view `{kind}`"),
    )
}

fn time(t: Option<&jiff::Timestamp>) -> String {
    t.map_or("-".to_string(), super::view::time)
}

/// Runs an `agents server token` subcommand.
///
/// # Errors
/// `INVALID_INPUT` for a bad name or lifetime or a missing user; `NOT_FOUND` for an unknown
/// user or token; `CONFLICT` for a name an active token has.
pub fn token(c: TokenCommand, ctx: &Context) -> Result<Report, CliError> {
    match c {
        TokenCommand::Create {
            name,
            user,
            expires,
            database,
        } => {
            let (user, name) = match (user, name) {
                (Some(user), name) => (user, name),
                (None, Some(name)) => (name, None),
                (None, None) => {
                    return Err(CliError::invalid_input(
                        "server token create needs the user it signs in as",
                    )
                    .hint("agents server token create --user USER [--expires 30d] [NAME]"));
                }
            };
            let expires_in_secs = match expires.as_deref() {
                Some(text) => Some(
                    parse_lifetime(text)
                        .map_err(|e| CliError::invalid_input(format!("--expires: {e}")))?,
                ),
                None => None,
            };
            let new = NewToken {
                user,
                name,
                expires_in_secs,
            };
            match call(ctx, &database, TeamRequest::CreateToken(new))? {
                TeamView::CreatedToken(created) => Ok(token_created(&created)),
                other => Err(unexpected(&other)),
            }
        }
        TokenCommand::List(database) => match call(ctx, &database, TeamRequest::Tokens)? {
            TeamView::Tokens(tokens) => Ok(token_list(&tokens)),
            other => Err(unexpected(&other)),
        },
        TokenCommand::Revoke { token, database } => {
            match call(ctx, &database, TeamRequest::RevokeToken { token })? {
                TeamView::Revoked(revoked) => Ok(Report::ok(
                    "server token revoke",
                    json!({"token_id": revoked.token_id, "name": revoked.name, "user": revoked.user, "revoked_at": revoked.revoked_at}),
                    format!("Token {} ({}) revoked", revoked.token_id, revoked.name),
                )),
                other => Err(unexpected(&other)),
            }
        }
    }
}

fn token_created(created: &api::tokens::CreatedToken) -> Report {
    let r = &created.record;
    let user = r.user.clone().unwrap_or_else(|| r.name.clone());
    let mut status = format!(
        "Token {} for {user} created; it is shown only this once",
        r.token_id
    );
    if created.user_created {
        status.push_str(&format!(
            " ({user} was added as the server's first administrator)"
        ));
    }
    Report::ok(
        "server token create",
        json!({
            "token": created.token,
            "token_id": r.token_id,
            "name": r.name,
            "user": user,
            "user_created": created.user_created,
            "created_at": r.created_at,
            "expires_at": r.expires_at,
        }),
        status,
    )
    .with(Element::panel(
        "Token",
        [
            ("Id", r.token_id.clone()),
            ("Name", r.name.clone()),
            ("User", user),
            ("Expires", time(r.expires_at.as_ref())),
            ("Token", created.token.clone()),
        ],
    ))
    .plain_only(created.token.clone())
}

fn token_list(tokens: &[TokenRecord]) -> Report {
    let now = jiff::Timestamp::now();
    let rows = tokens
        .iter()
        .map(|t| {
            vec![
                t.token_id.clone().into(),
                t.name.clone().into(),
                t.user
                    .clone()
                    .unwrap_or_else(|| format!("{} (admin)", t.name))
                    .into(),
                super::view::time(&t.created_at).into(),
                time(t.last_used_at.as_ref()).into(),
                time(t.expires_at.as_ref()).into(),
                time(t.revoked_at.as_ref()).into(),
            ]
        })
        .collect();
    let active = tokens
        .iter()
        .filter(|t| t.revoked_at.is_none() && t.expires_at.is_none_or(|at| at > now))
        .count();
    Report::ok(
        "server token list",
        json!({"tokens": tokens}),
        format!("{active} active token(s), {} in all", tokens.len()),
    )
    .with(Element::Table {
        title: "Tokens".into(),
        columns: vec![
            Column::left("Id"),
            Column::left("Name"),
            Column::left("User"),
            Column::left("Created"),
            Column::left("Last used"),
            Column::left("Expires"),
            Column::left("Revoked"),
        ],
        rows,
        empty: "No tokens.".into(),
    })
}

/// Runs an `agents server user` subcommand.
///
/// # Errors
/// `INVALID_INPUT` for a name that cannot be a namespace; `CONFLICT` for a taken one.
pub fn user(c: UserCommand, ctx: &Context) -> Result<Report, CliError> {
    match c {
        UserCommand::Add {
            name,
            admin,
            database,
        } => match call(
            ctx,
            &database,
            TeamRequest::AddUser {
                name,
                server_admin: admin,
            },
        )? {
            TeamView::User(user) => {
                let role = if user.server_admin {
                    " (server administrator)"
                } else {
                    ""
                };
                Ok(Report::ok(
                    "server user add",
                    json!({"user": user}),
                    format!("User {}{role} added", user.name),
                )
                .with(user_panel(&user)))
            }
            other => Err(unexpected(&other)),
        },
        UserCommand::List(database) => match call(ctx, &database, TeamRequest::Users)? {
            TeamView::Users(users) => {
                let rows = users
                    .iter()
                    .map(|u| {
                        vec![
                            u.name.clone().into(),
                            (if u.server_admin { "yes" } else { "no" }).into(),
                            super::view::time(&u.created_at).into(),
                        ]
                    })
                    .collect();
                Ok(Report::ok(
                    "server user list",
                    json!({"users": users}),
                    format!("{} user(s)", users.len()),
                )
                .with(Element::Table {
                    title: "Users".into(),
                    columns: vec![
                        Column::left("Name"),
                        Column::left("Server admin"),
                        Column::left("Added"),
                    ],
                    rows,
                    empty: "No users.".into(),
                }))
            }
            other => Err(unexpected(&other)),
        },
    }
}

fn user_panel(user: &User) -> Element {
    Element::panel(
        "User",
        [
            ("Name", user.name.clone()),
            (
                "Server admin",
                (if user.server_admin { "yes" } else { "no" }).to_string(),
            ),
            ("Added", super::view::time(&user.created_at)),
        ],
    )
}

/// Runs an `agents server org` subcommand.
///
/// # Errors
/// `INVALID_INPUT` for a bad name or role; `NOT_FOUND` for an unknown user, organization or
/// member; `CONFLICT` for a taken name or the last owner stepping down.
pub fn org(c: OrgCommand, ctx: &Context) -> Result<Report, CliError> {
    let (command, database, request) = match c {
        OrgCommand::Add {
            org,
            owner,
            database,
        } => (
            "server org add",
            database,
            TeamRequest::AddOrg { name: org, owner },
        ),
        OrgCommand::List(database) => {
            return match call(ctx, &database, TeamRequest::Orgs)? {
                TeamView::Orgs(orgs) => Ok(org_list(&orgs)),
                other => Err(unexpected(&other)),
            };
        }
        OrgCommand::Show { org, database } => {
            ("server org show", database, TeamRequest::Org { name: org })
        }
        OrgCommand::Member(MemberCommand::Add {
            org,
            user,
            role,
            database,
        }) => {
            let role = api::Role::parse(&role).ok_or_else(|| {
                CliError::invalid_input(format!(
                    "--role {role}: expected owner, maintainer, member or viewer"
                ))
            })?;
            (
                "server org member add",
                database,
                TeamRequest::SetMember { org, user, role },
            )
        }
        OrgCommand::Member(MemberCommand::Remove {
            org,
            user,
            database,
        }) => (
            "server org member remove",
            database,
            TeamRequest::RemoveMember { org, user },
        ),
    };
    let status_of = |org: &Org| match command {
        "server org add" => format!("Organization {} added", org.name),
        "server org member add" => format!("Members of {} updated", org.name),
        "server org member remove" => format!("Member removed from {}", org.name),
        _ => format!("Organization {}: {} member(s)", org.name, org.members.len()),
    };
    match call(ctx, &database, request)? {
        TeamView::Org(org) => {
            Ok(Report::ok(command, json!({"org": org}), status_of(&org)).with(members_table(&org)))
        }
        other => Err(unexpected(&other)),
    }
}

fn members_table(org: &Org) -> Element {
    Element::Table {
        title: format!("Members of {}", org.name),
        columns: vec![
            Column::left("User"),
            Column::left("Role"),
            Column::left("Since"),
        ],
        rows: org
            .members
            .iter()
            .map(|m| {
                vec![
                    m.user.clone().into(),
                    m.role.as_str().into(),
                    super::view::time(&m.added_at).into(),
                ]
            })
            .collect(),
        empty: "No members.".into(),
    }
}

fn org_list(orgs: &[Org]) -> Report {
    let rows = orgs
        .iter()
        .map(|o| {
            let owners: Vec<&str> = o
                .members
                .iter()
                .filter(|m| m.role == api::Role::Owner)
                .map(|m| m.user.as_str())
                .collect();
            vec![
                o.name.clone().into(),
                owners.join(", ").into(),
                o.members.len().to_string().into(),
                super::view::time(&o.created_at).into(),
            ]
        })
        .collect();
    Report::ok(
        "server org list",
        json!({"orgs": orgs}),
        format!("{} organization(s)", orgs.len()),
    )
    .with(Element::Table {
        title: "Organizations".into(),
        columns: vec![
            Column::left("Name"),
            Column::left("Owners"),
            Column::right("Members"),
            Column::left("Added"),
        ],
        rows,
        empty: "No organizations.".into(),
    })
}
