//! Resources and the DAG (tables `resources`, `resource_links`).

use rusqlite::{OptionalExtension, params};

use super::codec::{from_json, to_json, ts};
use super::events::{name_in, registry_changed};
use super::{Store, StoreError};
use crate::domain::Id;
use crate::domain::event::{Change, Registry};
use crate::domain::resource::{Edge, Resource};

const COLS: &str = "r.resource_id, r.name, r.type_name, r.description, r.properties, r.owner_id, r.created_at, r.updated_at";
type Raw = (
    String,
    String,
    String,
    Option<String>,
    String,
    Option<String>,
    String,
    String,
);

fn raw(r: &crate::store::db::Row<'_>) -> rusqlite::Result<Raw> {
    r.try_into()
}

fn id(column: &'static str, s: &str) -> Result<Id, StoreError> {
    s.parse()
        .map_err(|e: ulid::DecodeError| StoreError::Corrupt {
            table: "resources",
            column,
            message: e.to_string(),
        })
}

fn convert(
    (rid, name, type_name, description, properties, owner, created, updated): Raw,
) -> Result<Resource, StoreError> {
    const T: &str = "resources";
    Ok(Resource {
        resource_id: id("resource_id", &rid)?,
        name,
        type_name,
        description,
        properties: from_json(T, "properties", &properties)?,
        owner_id: owner.map(|o| id("owner_id", &o)).transpose()?,
        created_at: ts(T, "created_at", &created)?,
        updated_at: ts(T, "updated_at", &updated)?,
    })
}

impl Store {
    /// A resource by exact name.
    ///
    /// # Errors
    /// Store errors.
    pub fn resource_by_name(&self, name: &str) -> Result<Option<Resource>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM resources r WHERE r.name = ?1"),
                [name],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// A resource by id.
    ///
    /// # Errors
    /// Store errors.
    pub fn resource_by_id(&self, rid: &Id) -> Result<Option<Resource>, StoreError> {
        self.conn()
            .query_row(
                &format!("SELECT {COLS} FROM resources r WHERE r.resource_id = ?1"),
                [rid.to_string()],
                raw,
            )
            .optional()?
            .map(convert)
            .transpose()
    }

    /// Every resource, by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn resources(&self) -> Result<Vec<Resource>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare(&format!("SELECT {COLS} FROM resources r ORDER BY r.name"))?;
        let rows = stmt.query_map([], raw)?.collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(convert).collect()
    }

    /// The resource and every resource its discovery created (the root first).
    ///
    /// # Errors
    /// Store errors.
    pub fn owned_ids(&self, root: &Id) -> Result<Vec<Id>, StoreError> {
        let mut stmt = self
            .conn()
            .prepare("SELECT resource_id FROM resources WHERE owner_id = ?1 ORDER BY rowid")?;
        let mut out = vec![*root];
        for s in stmt.query_map([root.to_string()], |r| r.get::<_, String>(0))? {
            out.push(id("resource_id", &s?)?);
        }
        Ok(out)
    }

    /// Project links of any of `resources`: `(project name, resource name, read_only)`.
    ///
    /// # Errors
    /// Store errors.
    pub fn project_links_of(
        &self,
        resources: &[Id],
    ) -> Result<Vec<(String, String, bool)>, StoreError> {
        let mut out = Vec::new();
        let mut stmt = self.conn().prepare(
            "SELECT p.name, r.name, l.read_only FROM project_resources l
             JOIN projects p ON p.project_id = l.project_id JOIN resources r ON r.resource_id = l.resource_id
             WHERE l.resource_id = ?1 ORDER BY p.name",
        )?;
        for rid in resources {
            for row in stmt.query_map([rid.to_string()], |r| r.try_into())? {
                out.push(row?);
            }
        }
        Ok(out)
    }

    /// Saves a discovery in one transaction: the root (inserted, or updated when `replace`,
    /// which first deletes what its previous discovery created and its auto edges), the new
    /// children and the auto edges.
    ///
    /// # Errors
    /// Store errors; nothing is written then.
    pub fn save_discovery(
        &mut self,
        resources: &[Resource],
        edges: &[(Id, Id)],
        replace: bool,
    ) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let root = &resources[0];
        if replace {
            // Children discovered again keep their ids (and so their manual links); the others
            // go, with every edge touching them.
            let keep: std::collections::HashSet<String> = resources
                .iter()
                .map(|r| r.resource_id.to_string())
                .collect();
            let owned: Vec<String> = tx
                .prepare("SELECT resource_id FROM resources WHERE owner_id = ?1")?
                .query_map([root.resource_id.to_string()], |r| r.get(0))?
                .collect::<Result<_, _>>()?;
            for gone in owned.iter().filter(|o| !keep.contains(*o)) {
                tx.execute("DELETE FROM resources WHERE resource_id = ?1", [gone])?;
            }
            tx.execute(
                "DELETE FROM resource_links WHERE auto = 1 AND parent_id IN
                    (SELECT resource_id FROM resources WHERE resource_id = ?1 OR owner_id = ?1)",
                [root.resource_id.to_string()],
            )?;
        }
        for r in resources {
            tx.execute(
                "INSERT INTO resources (resource_id, name, type_name, description, properties, owner_id, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT(resource_id) DO UPDATE SET type_name = excluded.type_name, description = excluded.description,
                    properties = excluded.properties, updated_at = excluded.updated_at",
                params![
                    r.resource_id.to_string(),
                    r.name,
                    r.type_name,
                    r.description,
                    to_json(&r.properties),
                    r.owner_id.map(|o| o.to_string()),
                    r.created_at.to_string(),
                    r.updated_at.to_string(),
                ],
            )?;
        }
        let now = root.updated_at.to_string();
        for (i, (p, c)) in edges.iter().enumerate() {
            tx.execute(
                "INSERT INTO resource_links (parent_id, child_id, auto, position, created_at) VALUES (?1, ?2, 1, ?3, ?4)
                 ON CONFLICT(parent_id, child_id) DO UPDATE SET auto = 1, position = excluded.position",
                params![p.to_string(), c.to_string(), i as i64, now],
            )?;
        }
        let change = if replace {
            Change::Updated
        } else {
            Change::Added
        };
        registry_changed(&tx, Registry::Resource, &root.name, change)?;
        tx.commit()?;
        Ok(())
    }

    /// Deletes a resource; what it discovered and every edge touching them go with it.
    ///
    /// # Errors
    /// Store errors (a project link left on a discovered child makes it fail, unchanged).
    pub fn delete_resource(&mut self, rid: &Id) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        let name = name_in(&tx, "resources", "resource_id", &rid.to_string())?;
        tx.execute(
            "DELETE FROM resources WHERE resource_id = ?1",
            [rid.to_string()],
        )?;
        registry_changed(&tx, Registry::Resource, &name, Change::Removed)?;
        tx.commit()?;
        Ok(())
    }

    fn edges(&self, sql: &str, rid: &Id) -> Result<Vec<Edge>, StoreError> {
        let mut stmt = self.conn().prepare(sql)?;
        let rows = stmt
            .query_map([rid.to_string()], |r| Ok((raw(r)?, r.get::<_, bool>(8)?)))?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter()
            .map(|(raw, auto)| {
                Ok(Edge {
                    resource: convert(raw)?,
                    auto,
                })
            })
            .collect()
    }

    /// Direct children, in discovery order then by name.
    ///
    /// # Errors
    /// Store errors.
    pub fn children(&self, rid: &Id) -> Result<Vec<Edge>, StoreError> {
        self.edges(
            &format!("SELECT {COLS}, l.auto FROM resource_links l JOIN resources r ON r.resource_id = l.child_id
                      WHERE l.parent_id = ?1 ORDER BY l.auto DESC, l.position, r.name"),
            rid,
        )
    }

    /// Direct parents.
    ///
    /// # Errors
    /// Store errors.
    pub fn parents(&self, rid: &Id) -> Result<Vec<Edge>, StoreError> {
        self.edges(
            &format!("SELECT {COLS}, l.auto FROM resource_links l JOIN resources r ON r.resource_id = l.parent_id
                      WHERE l.child_id = ?1 ORDER BY l.auto DESC, r.name"),
            rid,
        )
    }

    /// Whether `node` is reachable from `from` by following child edges.
    ///
    /// # Errors
    /// Store errors.
    pub fn is_descendant(&self, from: &Id, node: &Id) -> Result<bool, StoreError> {
        Ok(self
            .conn()
            .query_row(
                "WITH RECURSIVE d(id) AS (
                    SELECT child_id FROM resource_links WHERE parent_id = ?1
                    UNION SELECT l.child_id FROM resource_links l JOIN d ON l.parent_id = d.id)
                 SELECT 1 FROM d WHERE id = ?2",
                params![from.to_string(), node.to_string()],
                |_| Ok(()),
            )
            .optional()?
            .is_some())
    }

    /// Manual edges touching any of `ids`, as (parent name, child name), by parent name.
    ///
    /// # Errors
    /// Store errors.
    pub fn manual_links_touching(&self, ids: &[Id]) -> Result<Vec<(String, String)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "SELECT p.name, c.name FROM resource_links l
               JOIN resources p ON p.resource_id = l.parent_id
               JOIN resources c ON c.resource_id = l.child_id
             WHERE l.auto = 0 AND (l.parent_id = ?1 OR l.child_id = ?1)",
        )?;
        let mut out = Vec::new();
        for rid in ids {
            out.extend(
                stmt.query_map([rid.to_string()], |r| r.try_into())?
                    .collect::<Result<Vec<(String, String)>, _>>()?,
            );
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// Adds a manual edge.
    ///
    /// # Errors
    /// Store errors.
    pub fn insert_link(&mut self, parent: &Id, child: &Id) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "INSERT INTO resource_links (parent_id, child_id, auto, position, created_at) VALUES (?1, ?2, 0, 0, ?3)",
            params![parent.to_string(), child.to_string(), jiff::Timestamp::now().to_string()],
        )?;
        let name = edge_name(&tx, parent, child)?;
        registry_changed(&tx, Registry::ResourceLink, &name, Change::Added)?;
        tx.commit()?;
        Ok(())
    }

    /// Removes a manual edge.
    ///
    /// # Errors
    /// Store errors.
    pub fn delete_link(&mut self, parent: &Id, child: &Id) -> Result<(), StoreError> {
        let tx = self.conn_mut().transaction()?;
        tx.execute(
            "DELETE FROM resource_links WHERE parent_id = ?1 AND child_id = ?2 AND auto = 0",
            params![parent.to_string(), child.to_string()],
        )?;
        let name = edge_name(&tx, parent, child)?;
        registry_changed(&tx, Registry::ResourceLink, &name, Change::Removed)?;
        tx.commit()?;
        Ok(())
    }
}

/// A manual resource link as its event names it: `parent -> child`.
fn edge_name(
    tx: &crate::store::Transaction<'_>,
    parent: &Id,
    child: &Id,
) -> Result<String, StoreError> {
    Ok(format!(
        "{} -> {}",
        name_in(tx, "resources", "resource_id", &parent.to_string())?,
        name_in(tx, "resources", "resource_id", &child.to_string())?
    ))
}
