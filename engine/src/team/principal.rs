//! Who a call comes from (spec section 22): the user a token or JWT names on a server, or the
//! single local user, who may do everything, on one machine.

use serde::{Deserialize, Serialize};

/// The user name a local principal gets when the environment names none.
const LOCAL_FALLBACK: &str = "local";

/// How the caller proved who they are.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Credential {
    /// The command line or TUI on the machine that holds the records.
    Local,
    /// A bearer token of `agents server token create`.
    Token {
        /// The token's id (`tok_...`).
        token_id: String,
    },
    /// A JWT from a configured OIDC issuer.
    Jwt {
        /// The issuer (`iss`).
        issuer: String,
    },
}

/// The caller of one request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Principal {
    /// The user's name (also their personal namespace on a server).
    pub user: String,
    /// A server administrator may do everything, on every namespace.
    pub server_admin: bool,
    /// How the caller was recognised.
    pub credential: Credential,
    /// The client's network address, when the call came over the network.
    pub address: Option<String>,
}

impl Principal {
    /// The single local user: named by `$USER` (else `local`), allowed everything.
    pub fn local() -> Self {
        let user = std::env::var("USER")
            .ok()
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty() && !u.chars().any(char::is_control))
            .unwrap_or_else(|| LOCAL_FALLBACK.to_string());
        Self {
            user,
            server_admin: true,
            credential: Credential::Local,
            address: None,
        }
    }

    /// Whether this caller is the local user of a machine without a server.
    pub fn is_local(&self) -> bool {
        self.credential == Credential::Local
    }
}
