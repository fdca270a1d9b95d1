//! Plan budgets (migration `012_providers.sql`): the most a plan may spend on model calls.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError};
use crate::domain::budget::PlanBudget;
use crate::domain::id::Id;

impl Store {
    /// Sets (or replaces) a plan's budget; `source` says where it came from (`flag`,
    /// `config`, `approval`). A budget with no limit removes the row.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`] (e.g. an unknown plan).
    pub fn set_plan_budget(
        &mut self,
        plan_id: &Id,
        budget: &PlanBudget,
        source: &str,
    ) -> Result<(), StoreError> {
        if !budget.is_set() {
            self.conn().execute(
                "DELETE FROM plan_budgets WHERE plan_id = ?1",
                [plan_id.to_string()],
            )?;
            return Ok(());
        }
        self.conn().execute(
            "INSERT INTO plan_budgets (plan_id, max_cost_usd, max_tokens, source, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT(plan_id) DO UPDATE SET \
             max_cost_usd = excluded.max_cost_usd, max_tokens = excluded.max_tokens, \
             source = excluded.source, updated_at = excluded.updated_at",
            params![
                plan_id.to_string(),
                budget.max_cost_usd,
                budget
                    .max_tokens
                    .map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
                source,
                jiff::Timestamp::now().to_string(),
            ],
        )?;
        Ok(())
    }

    /// Plans of `action_name` other than `except` (kind `plan`), oldest first, each with
    /// whether it ended errored or cancelled.
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn earlier_plans_of_action(
        &self,
        action_name: &str,
        except: &Id,
    ) -> Result<Vec<(Id, bool)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT plan_id, state IN ('errored', 'cancelled') FROM plans \
             WHERE action_name = ?1 AND plan_id != ?2 AND kind = 'plan' ORDER BY created_at",
        )?;
        let rows = stmt.query_map(params![action_name, except.to_string()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, bool>(1)?))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (id, bad) = row?;
            if let Ok(id) = id.parse() {
                out.push((id, bad));
            }
        }
        Ok(out)
    }

    /// A plan's budget (no limits when none was set).
    ///
    /// # Errors
    /// [`StoreError::Sqlite`].
    pub fn plan_budget(&self, plan_id: &Id) -> Result<PlanBudget, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "SELECT max_cost_usd, max_tokens FROM plan_budgets WHERE plan_id = ?1",
                [plan_id.to_string()],
                |r| {
                    Ok(PlanBudget {
                        max_cost_usd: r.get(0)?,
                        max_tokens: r
                            .get::<_, Option<i64>>(1)?
                            .map(|t| u64::try_from(t).unwrap_or(0)),
                    })
                },
            )
            .optional()?
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::plan::Plan;

    #[test]
    fn a_budget_is_set_raised_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(&dir.path().join("db")).unwrap();
        let plan = Plan::new("local/a", "a", jiff::Timestamp::now());
        store.insert_plan(&plan).unwrap();
        let id = plan.plan_id;
        assert!(!store.plan_budget(&id).unwrap().is_set());
        let b = PlanBudget {
            max_cost_usd: Some(0.01),
            max_tokens: None,
        };
        store.set_plan_budget(&id, &b, "flag").unwrap();
        assert_eq!(store.plan_budget(&id).unwrap(), b);
        let raised = b.raised(PlanBudget {
            max_cost_usd: Some(5.0),
            max_tokens: Some(100),
        });
        store.set_plan_budget(&id, &raised, "approval").unwrap();
        assert_eq!(store.plan_budget(&id).unwrap(), raised);
        store
            .set_plan_budget(&id, &PlanBudget::default(), "flag")
            .unwrap();
        assert!(!store.plan_budget(&id).unwrap().is_set());
    }
}
