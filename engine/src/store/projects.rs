//! Projects, their linked resources and validations (tables `projects`,
//! `project_resources`, `project_validations`).

use rusqlite::{OptionalExtension, params};

use super::codec::ts;
use super::events::{name_in, registry_changed};
use super::{Store, StoreError};
use crate::domain::event::{Change, Registry};
use crate::domain::invariant::NewInvariant;
use crate::domain::project::{LinkedResource, Project, Validation};
use crate::domain::{Id, Plan, PlanStatus};

const COLS: &str =
    "project_id, name, description, invariant_actor, automation_profile, created_at, updated_at";
type Raw = (
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    String,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn convert(
    (pid, name, description, invariant_actor, automation_profile, created, updated): Raw,
) -> Result<Project, StoreError> {
    const T: &str = "projects";
    Ok(Project {
        project_id: pid
            .parse()
            .map_err(|e: ulid::DecodeError| StoreError::Corrupt {
                table: T,
                column: "project_id",
                message: e.to_string(),
            })?,
        name,
        description,
        invariant_actor,
        automation_profile,
        created_at: ts(T, "created_at", &created)?,
        updated_at: ts(T, "updated_at", &updated)?,
    })
}

impl Store {
    /// Inserts a project with its resource links and invariants in one transaction.
    ///
    /// # Errors
    /// Store errors (a duplicate name, for example); nothing is written then.
    pub fn insert_project(
        &mut self,
        p: &Project,
        links: &[LinkedResource],
        invariants: &[NewInvariant],
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            &format!("INSERT INTO projects ({COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
            params![
                p.project_id.to_string(),
                p.name,
                p.description,
                p.invariant_actor,
                p.automation_profile,
                p.created_at.to_string(),
                p.updated_at.to_string()
            ],
        )?;
        for (i, l) in links.iter().enumerate() {
            tx.execute(
                "INSERT INTO project_resources (project_id, resource_id, alias, read_only, position, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![p.project_id.to_string(), l.resource.resource_id.to_string(), l.alias, l.read_only, i as i64, p.created_at.to_string()],
            )?;
        }
        super::invariants::insert_rows(&tx, invariants, &p.created_at.to_string())?;
        registry_changed(&tx, Registry::Project, &p.name, Change::Added)?;
        tx.commit()?;
        Ok(())
    }

    /// A project by exact name.
    ///
    /// # Errors
    /// Store errors.
    pub fn project_by_name(&self, name: &str) -> Result<Option<Project>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM projects WHERE name = ?1"),
                [name],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// A project by full id.
    ///
    /// # Errors
    /// Store errors.
    pub fn project_by_id(&self, id: &str) -> Result<Option<Project>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM projects WHERE project_id = ?1"),
                [id.to_ascii_uppercase()],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every project id.
    ///
    /// # Errors
    /// Store errors.
    pub fn project_ids(&self) -> Result<Vec<String>, StoreError> {
        let mut stmt = self.conn().prepare("SELECT project_id FROM projects")?;
        Ok(stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// Every project, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn projects(&self) -> Result<Vec<Project>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {COLS} FROM projects ORDER BY name"))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// Names of projects whose invariant actor is `actor`.
    ///
    /// # Errors
    /// Store errors.
    pub fn projects_with_invariant_actor(&self, actor: &str) -> Result<Vec<String>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT name FROM projects WHERE invariant_actor = ?1 ORDER BY name")?;
        Ok(stmt
            .query_map([actor], |r| r.get(0))?
            .collect::<Result<_, _>>()?)
    }

    /// A project's linked resources, in link order.
    ///
    /// # Errors
    /// Store errors.
    pub fn project_resources(&self, project: &Id) -> Result<Vec<LinkedResource>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT resource_id, alias, read_only FROM project_resources WHERE project_id = ?1 ORDER BY position, created_at",
        )?;
        let rows: Vec<(String, Option<String>, bool)> = stmt
            .query_map([project.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        for (rid, alias, read_only) in rows {
            let rid: Id = rid
                .parse()
                .map_err(|e: ulid::DecodeError| StoreError::Corrupt {
                    table: "project_resources",
                    column: "resource_id",
                    message: e.to_string(),
                })?;
            if let Some(resource) = self.resource_by_id(&rid)? {
                out.push(LinkedResource {
                    resource,
                    alias,
                    read_only,
                });
            }
        }
        Ok(out)
    }

    /// Links a resource to a project at `position`.
    ///
    /// # Errors
    /// Store errors.
    pub fn insert_project_resource(
        &mut self,
        project: &Id,
        link: &LinkedResource,
        position: usize,
    ) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "INSERT INTO project_resources (project_id, resource_id, alias, read_only, position, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![project.to_string(), link.resource.resource_id.to_string(), link.alias, link.read_only, position as i64, now],
        )?;
        tx.execute(
            "UPDATE projects SET updated_at = ?2 WHERE project_id = ?1",
            params![project.to_string(), now],
        )?;
        let name = link_name(&tx, project, &link.resource.resource_id)?;
        registry_changed(&tx, Registry::ProjectResource, &name, Change::Added)?;
        tx.commit()?;
        Ok(())
    }

    /// Unlinks a resource from a project.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_project_resource(
        &mut self,
        project: &Id,
        resource: &Id,
    ) -> Result<(), StoreError> {
        let now = jiff::Timestamp::now().to_string();
        let tx = self.conn_mut().transaction()?;
        let name = link_name(&tx, project, resource)?;
        tx.execute(
            "DELETE FROM project_resources WHERE project_id = ?1 AND resource_id = ?2",
            params![project.to_string(), resource.to_string()],
        )?;
        tx.execute(
            "UPDATE projects SET updated_at = ?2 WHERE project_id = ?1",
            params![project.to_string(), now],
        )?;
        registry_changed(&tx, Registry::ProjectResource, &name, Change::Removed)?;
        tx.commit()?;
        Ok(())
    }

    /// Saves a project's automation profile.
    ///
    /// # Errors
    /// Store errors.
    pub fn update_project_profile(&mut self, p: &Project) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "UPDATE projects SET automation_profile = ?2, updated_at = ?3 WHERE project_id = ?1",
            params![
                p.project_id.to_string(),
                p.automation_profile,
                p.updated_at.to_string()
            ],
        )?;
        registry_changed(&tx, Registry::Project, &p.name, Change::Updated)?;
        tx.commit()?;
        Ok(())
    }

    /// A project's validations, oldest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn validations(&self, project: &Id) -> Result<Vec<Validation>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT v.validation_id, p.name, v.command, v.description, v.required, v.timeout_secs, r.name, v.created_at, v.network
             FROM project_validations v JOIN projects p ON p.project_id = v.project_id
             LEFT JOIN resources r ON r.resource_id = v.resource_id
             WHERE v.project_id = ?1 ORDER BY v.rowid",
        )?;
        type Row = (
            String,
            String,
            String,
            Option<String>,
            bool,
            i64,
            Option<String>,
            String,
            bool,
        );
        let rows: Vec<Row> = stmt
            .query_map([project.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(
                |(
                    validation_id,
                    project,
                    command,
                    description,
                    required,
                    timeout,
                    resource,
                    created,
                    network,
                )| {
                    Ok(Validation {
                        validation_id,
                        project,
                        command,
                        description,
                        required,
                        timeout_secs: u64::try_from(timeout).unwrap_or(0),
                        resource,
                        network,
                        created_at: ts("project_validations", "created_at", &created)?,
                    })
                },
            )
            .collect()
    }

    /// Inserts a validation.
    ///
    /// # Errors
    /// Store errors.
    pub fn insert_validation(
        &mut self,
        project: &Id,
        v: &Validation,
        resource: Option<&Id>,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "INSERT INTO project_validations (validation_id, project_id, command, description, required, timeout_secs, resource_id, created_at, network)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                v.validation_id,
                project.to_string(),
                v.command,
                v.description,
                v.required,
                v.timeout_secs as i64,
                resource.map(|r| r.to_string()),
                v.created_at.to_string(),
                v.network
            ],
        )?;
        registry_changed(&tx, Registry::Validation, &v.validation_id, Change::Added)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a validation.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_validation(&mut self, id: &str) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "DELETE FROM project_validations WHERE validation_id = ?1",
            [id],
        )?;
        registry_changed(&tx, Registry::Validation, id, Change::Removed)?;
        tx.commit()?;
        Ok(())
    }

    /// Plans that target a project, newest first.
    ///
    /// # Errors
    /// Store errors.
    pub fn plans_for_project(&self, project: &Id) -> Result<Vec<Plan>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT plan_id FROM plan_projects WHERE project_id = ?1 ORDER BY plan_id DESC",
        )?;
        let ids: Vec<String> = stmt
            .query_map([project.to_string()], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        for id in ids {
            let id: Id = id
                .parse()
                .map_err(|e: ulid::DecodeError| StoreError::Corrupt {
                    table: "plan_projects",
                    column: "plan_id",
                    message: e.to_string(),
                })?;
            if let Some(p) = self.plan(&id)? {
                out.push(p);
            }
        }
        Ok(out)
    }

    /// Deletes a project (its links, validations and invariants go with it) and saves the
    /// given plan statuses (cancellations), in one transaction; `record` writes what the
    /// caller records of it (the cancellations' events) in that same transaction.
    ///
    /// # Errors
    /// Store errors, also from `record`; nothing is written then.
    pub fn delete_project(
        &mut self,
        project: &Id,
        statuses: &[(Id, PlanStatus)],
        now: jiff::Timestamp,
        record: impl FnOnce(&crate::store::Transaction<'_>) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        for (id, s) in statuses {
            tx.execute(
                "UPDATE plans SET phase = ?2, state = ?3, attempt = ?4, updated_at = ?5, completed_at = ?5 WHERE plan_id = ?1",
                params![id.to_string(), s.phase.as_str(), s.state.as_str(), s.attempt, now.to_string()],
            )?;
        }
        let name = name_in(&tx, "projects", "project_id", &project.to_string())?;
        tx.execute(
            "DELETE FROM projects WHERE project_id = ?1",
            [project.to_string()],
        )?;
        record(&tx)?;
        registry_changed(&tx, Registry::Project, &name, Change::Removed)?;
        tx.commit()?;
        Ok(())
    }
}

/// A project-resource link as its event names it: `project -> resource`.
fn link_name(
    tx: &crate::store::Transaction<'_>,
    project: &Id,
    resource: &Id,
) -> Result<String, StoreError> {
    Ok(format!(
        "{} -> {}",
        name_in(tx, "projects", "project_id", &project.to_string())?,
        name_in(tx, "resources", "resource_id", &resource.to_string())?
    ))
}
