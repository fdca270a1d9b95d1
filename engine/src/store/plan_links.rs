//! What links a plan to the registries: its target projects (`plan_projects`) and its origin
//! (`plan_origins`: action, profile source, rendered script and sandbox).

use rusqlite::{OptionalExtension, params};

use super::codec::{from_json, to_json};
use super::{Store, StoreError};
use crate::domain::action::{Action, SandboxSpec, ScriptStep};
use crate::domain::invariant::NewInvariant;
use crate::domain::profile::ResolvedFrom;
use crate::domain::{Id, Plan};

/// Where a plan came from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Origin {
    /// The action used.
    pub action_id: Id,
    /// Where the automation profile came from.
    pub profile_source: ResolvedFrom,
    /// Whether the plan may only read.
    pub read_only: bool,
    /// The action's script with the plan's argument values filled in.
    pub script: Option<Vec<ScriptStep>>,
    /// The action's sandbox widening.
    pub sandbox: Option<SandboxSpec>,
}

impl Store {
    /// Creates a plan in one transaction: the plan row, its project links in order, its origin,
    /// its invariants (the plan record's `invariants` is filled from them), optionally the
    /// action's new state (a non-reusable action is archived by its first use), the bases of
    /// its target resources, its link to its parent when it is a child plan, the creating
    /// process's lease when it drives the plan next ([`super::leases::LeaseRow`]), and a `plan_created`
    /// event.
    ///
    /// # Errors
    /// Store errors; nothing is written then.
    #[allow(clippy::too_many_arguments)]
    pub fn create_plan(
        &mut self,
        plan: &Plan,
        projects: &[Id],
        origin: &Origin,
        invariants: &[NewInvariant],
        archive: Option<&Action>,
        bases: &[super::lifecycle_run::PlanBase],
        child: Option<&super::children::ChildLink>,
        creator: Option<&super::leases::LeaseRow>,
    ) -> Result<(), StoreError> {
        let human = self.human.clone();
        let tx = self.conn_mut().transaction()?;
        super::plans::insert_plan_row(&tx, plan)?;
        // Attribution: the human whose call creates the plan; a child plan's is its parent's
        // driver.
        tx.execute(
            "UPDATE plans SET created_by = COALESCE(?2, (SELECT p.driven_by FROM plans p WHERE p.plan_id = ?3)), \
             driven_by = COALESCE(?2, (SELECT p.driven_by FROM plans p WHERE p.plan_id = ?3)) WHERE plan_id = ?1",
            params![
                plan.plan_id.to_string(),
                human,
                plan.parent_plan_id.map(|p| p.to_string())
            ],
        )?;
        for (i, p) in projects.iter().enumerate() {
            tx.execute(
                "INSERT INTO plan_projects (plan_id, project_id, position) VALUES (?1, ?2, ?3)",
                params![plan.plan_id.to_string(), p.to_string(), i as i64],
            )?;
        }
        tx.execute(
            "INSERT INTO plan_origins (plan_id, action_id, profile_source, read_only, script, sandbox, action_version) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, (SELECT version FROM actions WHERE action_id = ?2))",
            params![
                plan.plan_id.to_string(),
                origin.action_id.to_string(),
                serde_json::to_value(origin.profile_source).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
                origin.read_only,
                origin.script.as_ref().map(to_json),
                origin.sandbox.as_ref().map(to_json),
            ],
        )?;
        super::invariants::insert_rows(&tx, invariants, &plan.created_at.to_string())?;
        if let Some(a) = archive {
            super::actions::set_state(&tx, a)?;
        }
        super::lifecycle_run::insert_bases(&tx, &plan.plan_id, bases)?;
        if let Some(link) = child {
            super::children::insert_in(&tx, link)?;
        }
        if let Some(lease) = creator {
            super::leases::write_in(&tx, &plan.plan_id, lease)?;
        }
        super::events::append(
            &tx,
            Some(&plan.plan_id),
            &crate::domain::event::EventKind::PlanCreated(crate::domain::event::PlanCreated {
                action: plan.action_name.clone(),
                projects: plan
                    .project_names()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                automation_profile: plan.automation_profile.clone(),
                bases: serde_json::json!(bases),
                parent_plan_id: plan.parent_plan_id.map(|p| p.to_string()),
            }),
        )?;
        tx.commit()?;
        Ok(())
    }

    /// A plan's target project ids, in order.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_project_ids(&self, plan: &Id) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT project_id FROM plan_projects WHERE plan_id = ?1 ORDER BY position")?;
        Ok(stmt
            .query_map([plan.to_string()], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// A plan's origin, if it was created by `plan use`.
    ///
    /// # Errors
    /// Store errors.
    pub fn plan_origin(&self, plan: &Id) -> Result<Option<Origin>, StoreError> {
        type Row = (String, String, bool, Option<String>, Option<String>);
        let row: Option<Row> = self
            .conn()
            .query_row(
                "SELECT action_id, profile_source, read_only, script, sandbox FROM plan_origins WHERE plan_id = ?1",
                [plan.to_string()],
                |r| r.try_into(),
            )
            .optional()?;
        const T: &str = "plan_origins";
        row.map(|(action_id, source, read_only, script, sandbox)| {
            Ok(Origin {
                action_id: action_id.parse().map_err(|e: ulid::DecodeError| {
                    StoreError::Corrupt {
                        table: T,
                        column: "action_id",
                        message: e.to_string(),
                    }
                })?,
                profile_source: from_json(T, "profile_source", &format!("\"{source}\""))?,
                read_only,
                script: script.map(|s| from_json(T, "script", &s)).transpose()?,
                sandbox: sandbox.map(|s| from_json(T, "sandbox", &s)).transpose()?,
            })
        })
        .transpose()
    }
}
