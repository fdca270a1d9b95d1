//! Attribution (spec section 22): the humans behind a plan's records on a server: who
//! created it, who last drove it (its actors' work is theirs), who approved its Apply.

use jiff::Timestamp;
use rusqlite::params;
use serde::{Deserialize, Serialize};

use super::codec::ts;
use super::{Store, StoreError};
use crate::domain::Id;

/// The humans behind one plan.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attribution {
    /// Who created it.
    pub created_by: Option<String>,
    /// Who last started, resumed, answered, corrected or applied it.
    pub driven_by: Option<String>,
    /// Who approved its Apply, in order.
    pub apply_approvals: Vec<ApplyApproval>,
    /// Who set its current review marks, by name.
    pub reviewers: Vec<String>,
}

/// One human's approval of a plan's Apply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ApplyApproval {
    /// Who.
    pub user: String,
    /// When.
    pub approved_at: Timestamp,
}

impl Store {
    /// Records that the human this store acts for drives `plan` from now on; nothing on one
    /// machine.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn drive_as_human(&self, plan: &Id) -> Result<(), StoreError> {
        if let Some(human) = &self.human {
            self.conn().execute(
                "UPDATE plans SET driven_by = ?2 WHERE plan_id = ?1",
                params![plan.to_string(), human],
            )?;
        }
        Ok(())
    }

    /// Records the approval of `plan`'s Apply by the human this store acts for (once per
    /// human); `false` on one machine.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn approve_apply(&self, plan: &Id) -> Result<bool, StoreError> {
        let Some(human) = &self.human else {
            return Ok(false);
        };
        self.conn().execute(
            "INSERT INTO apply_approvals (plan_id, user_name, approved_at) VALUES (?1, ?2, ?3) \
             ON CONFLICT (plan_id, user_name) DO NOTHING",
            params![plan.to_string(), human, Timestamp::now().to_string()],
        )?;
        Ok(true)
    }

    /// The humans behind `plan`.
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn attribution(&self, plan: &Id) -> Result<Attribution, StoreError> {
        let id = plan.to_string();
        let (created_by, driven_by): (Option<String>, Option<String>) = self.conn().query_row(
            "SELECT created_by, driven_by FROM plans WHERE plan_id = ?1",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )?;
        let mut stmt = self.conn().prepare(
            "SELECT user_name, approved_at FROM apply_approvals WHERE plan_id = ?1 \
             ORDER BY approved_at, user_name",
        )?;
        let rows: Vec<(String, String)> = stmt
            .query_map([&id], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        let apply_approvals = rows
            .into_iter()
            .map(|(user, at)| {
                Ok(ApplyApproval {
                    user,
                    approved_at: ts("apply_approvals", "approved_at", &at)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        let mut stmt = self.conn().prepare(
            "SELECT DISTINCT reviewer FROM review_marks WHERE plan_id = ?1 \
             AND reviewer <> '' AND mark <> 'pending' ORDER BY reviewer",
        )?;
        let reviewers = stmt
            .query_map([&id], |r| r.get(0))?
            .collect::<Result<Vec<String>, _>>()?;
        Ok(Attribution {
            created_by,
            driven_by,
            apply_approvals,
            reviewers,
        })
    }
}
