//! The team family's call on a [`Client`].

use super::super::protocol;
use super::super::{ApiError, Client};
use super::{TeamRequest, TeamView};

impl dyn Client + '_ {
    /// One call of the team family.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn team(&self, request: TeamRequest) -> Result<TeamView, ApiError> {
        let asked = protocol::Request::Team(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            protocol::Response::Team(v) => Ok(*v),
            other => Err(other),
        })
    }
}
