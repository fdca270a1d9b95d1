//! The typed calls of this family on a [`Client`], whichever transport answers them.

use super::*;
use crate::api::protocol::{self, Request, Response};
use crate::api::{ApiError, Client};

impl dyn Client + '_ {
    /// Sends one call of this family and takes its view.
    fn registry_call(&self, request: RegistryQuery) -> Result<RegistryView, ApiError> {
        let asked = Request::Registry(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Registry(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// The rows of `resource list`.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn resources(&self, filter: ResourceFilter) -> Result<Vec<ResourceRow>, ApiError> {
        match self.registry_call(RegistryQuery::Resources(filter))? {
            RegistryView::Resources(v) => Ok(v),
            _ => Err(unexpected("resources")),
        }
    }

    /// `resource show` of resource `resource` (name or id).
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn resource(&self, resource: &str) -> Result<ResourceShown, ApiError> {
        let q = RegistryQuery::Resource {
            resource: resource.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Resource(v) => Ok(*v),
            _ => Err(unexpected("resource")),
        }
    }

    /// The tree under `resource`, `depth` levels deep, optionally only nodes of `type_name`.
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn resource_tree(
        &self,
        resource: &str,
        depth: u32,
        type_name: Option<&str>,
    ) -> Result<TreeNode, ApiError> {
        let q = RegistryQuery::ResourceTree {
            resource: resource.to_string(),
            depth,
            type_name: type_name.map(str::to_string),
        };
        match self.registry_call(q)? {
            RegistryView::ResourceTree(v) => Ok(*v),
            _ => Err(unexpected("resource_tree")),
        }
    }

    /// What removing `resource` would remove; refused as the removal would be.
    ///
    /// # Errors
    /// The resource's error; see [`Client::call`].
    pub fn resource_removal(&self, resource: &str) -> Result<RemovalPlan, ApiError> {
        let q = RegistryQuery::ResourceRemoval {
            resource: resource.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::ResourceRemoval(v) => Ok(*v),
            _ => Err(unexpected("resource_removal")),
        }
    }

    /// Parent and child of a manual link that may be removed.
    ///
    /// # Errors
    /// The resource's error (not linked, discovered link); see [`Client::call`].
    pub fn manual_link(&self, parent: &str, child: &str) -> Result<(Resource, Resource), ApiError> {
        let q = RegistryQuery::ManualLink {
            parent: parent.to_string(),
            child: child.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::ManualLink(v) => Ok(*v),
            _ => Err(unexpected("manual_link")),
        }
    }

    /// Every custom resource type.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn custom_types(&self) -> Result<Vec<CustomType>, ApiError> {
        match self.registry_call(RegistryQuery::CustomTypes)? {
            RegistryView::CustomTypes(v) => Ok(v),
            _ => Err(unexpected("custom_types")),
        }
    }

    /// The custom resource type `name`.
    ///
    /// # Errors
    /// `NOT_FOUND`, a built-in name; see [`Client::call`].
    pub fn custom_type(&self, name: &str) -> Result<CustomType, ApiError> {
        let q = RegistryQuery::CustomType {
            name: name.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::CustomType(Some(t)) => Ok(*t),
            _ => Err(unexpected("custom_type")),
        }
    }

    /// The custom resource type a `resource add` word names, if there is one.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn custom_type_named(&self, word: &str) -> Result<Option<CustomType>, ApiError> {
        let q = RegistryQuery::CustomTypeNamed {
            name: word.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::CustomType(t) => Ok(t.map(|t| *t)),
            _ => Err(unexpected("custom_type_named")),
        }
    }

    /// The rows of `project list`.
    ///
    /// # Errors
    /// An invalid regular expression; see [`Client::call`].
    pub fn projects(
        &self,
        namespace: Option<&str>,
        regex: Option<&str>,
    ) -> Result<Vec<projects::Summary>, ApiError> {
        let q = RegistryQuery::Projects {
            namespace: namespace.map(str::to_string),
            regex: regex.map(str::to_string),
        };
        match self.registry_call(q)? {
            RegistryView::Projects(v) => Ok(v),
            _ => Err(unexpected("projects")),
        }
    }

    /// `project show` of `project` (name or id).
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn project(&self, project: &str) -> Result<ProjectShown, ApiError> {
        let q = RegistryQuery::Project {
            project: project.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Project(v) => Ok(*v),
            _ => Err(unexpected("project")),
        }
    }

    /// The project, the link and the active plans of an unlink that may go ahead.
    ///
    /// # Errors
    /// The project's error; see [`Client::call`].
    pub fn project_unlink(
        &self,
        project: &str,
        resource: &str,
    ) -> Result<(Project, LinkedResource, Vec<Plan>), ApiError> {
        let q = RegistryQuery::ProjectUnlink {
            project: project.to_string(),
            resource: resource.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::ProjectPlans(v) => match *v {
                (p, Some(l), active) => Ok((p, l, active)),
                _ => Err(unexpected("project_unlink")),
            },
            _ => Err(unexpected("project_unlink")),
        }
    }

    /// How many resources `project` links, and how many projects link `resource`.
    ///
    /// # Errors
    /// `NOT_FOUND` for the project; see [`Client::call`].
    pub fn link_counts(&self, project: &str, resource: &str) -> Result<(usize, usize), ApiError> {
        let q = RegistryQuery::LinkCounts {
            project: project.to_string(),
            resource: resource.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::LinkCounts(linked, projects) => Ok((linked, projects)),
            _ => Err(unexpected("link_counts")),
        }
    }

    /// The project and the active plans a deletion would cancel.
    ///
    /// # Errors
    /// Active plans without `force`; see [`Client::call`].
    pub fn project_deletion(
        &self,
        project: &str,
        force: bool,
    ) -> Result<(Project, Vec<Plan>), ApiError> {
        let q = RegistryQuery::ProjectDeletion {
            project: project.to_string(),
            force,
        };
        match self.registry_call(q)? {
            RegistryView::ProjectPlans(v) => Ok((v.0, v.2)),
            _ => Err(unexpected("project_deletion")),
        }
    }

    /// One validation of a project.
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn validation(
        &self,
        project: &str,
        validation: &str,
    ) -> Result<(Project, Validation), ApiError> {
        let q = RegistryQuery::Validation {
            project: project.to_string(),
            validation: validation.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Validations(p, mut vs) if vs.len() == 1 => Ok((*p, vs.remove(0))),
            _ => Err(unexpected("validation")),
        }
    }

    /// A project's validations.
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn validations(&self, project: &str) -> Result<(Project, Vec<Validation>), ApiError> {
        let q = RegistryQuery::Validations {
            project: project.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Validations(p, vs) => Ok((*p, vs)),
            _ => Err(unexpected("validations")),
        }
    }

    /// A project's context policy for `view`.
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn project_context(
        &self,
        project: &str,
        view: &str,
    ) -> Result<ProjectContextView, ApiError> {
        let q = RegistryQuery::ProjectContext {
            project: project.to_string(),
            view: view.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::ProjectContext(v) => Ok(*v),
            _ => Err(unexpected("project_context")),
        }
    }

    /// The invariants `filter` selects whose text matches `regex`.
    ///
    /// # Errors
    /// Unknown targets; see [`Client::call`].
    pub fn invariants(
        &self,
        filter: InvariantFilter,
        regex: Option<&str>,
    ) -> Result<Vec<Invariant>, ApiError> {
        let q = RegistryQuery::Invariants {
            filter,
            regex: regex.map(str::to_string),
        };
        match self.registry_call(q)? {
            RegistryView::Invariants(v) => Ok(v),
            _ => Err(unexpected("invariants")),
        }
    }

    /// Invariant `invariant` (id or unique prefix).
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn invariant(&self, invariant: &str) -> Result<Invariant, ApiError> {
        let q = RegistryQuery::Invariant {
            invariant: invariant.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Invariants(mut v) if v.len() == 1 => Ok(v.remove(0)),
            _ => Err(unexpected("invariant")),
        }
    }

    /// `agents info`: the environment of the data directory that answers.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn info(&self) -> Result<InfoView, ApiError> {
        match self.registry_call(RegistryQuery::Info)? {
            RegistryView::Info(v) => Ok(*v),
            _ => Err(unexpected("info")),
        }
    }

    /// `agents diagnostics`: every health check, each with the step that fixes it.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn diagnostics(&self) -> Result<Vec<Check>, ApiError> {
        match self.registry_call(RegistryQuery::Diagnostics)? {
            RegistryView::Diagnostics(v) => Ok(v
                .into_iter()
                .map(|(mut c, step)| {
                    c.fix_step = step;
                    c
                })
                .collect()),
            _ => Err(unexpected("diagnostics")),
        }
    }

    /// What is registered in `namespace`: (kind, name) pairs.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn namespace_users(&self, namespace: &str) -> Result<Vec<(String, String)>, ApiError> {
        let q = RegistryQuery::NamespaceUsers {
            namespace: namespace.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Names(v) => Ok(v),
            _ => Err(unexpected("namespace_users")),
        }
    }

    /// Checks that custom automation profile `name` is registered.
    ///
    /// # Errors
    /// `NOT_FOUND`; see [`Client::call`].
    pub fn profile_registered(&self, name: &str) -> Result<(), ApiError> {
        let q = RegistryQuery::Profile {
            name: name.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::Found => Ok(()),
            _ => Err(unexpected("profile")),
        }
    }

    /// The state of action `name`, if there is one.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn action_state(&self, name: &str) -> Result<Option<ActionState>, ApiError> {
        let q = RegistryQuery::ActionState {
            name: name.to_string(),
        };
        match self.registry_call(q)? {
            RegistryView::ActionState(v) => Ok(v),
            _ => Err(unexpected("action_state")),
        }
    }

    /// The effective invariants of `plan`.
    ///
    /// # Errors
    /// Unknown plan; see [`Client::call`].
    pub fn effective_invariants(
        &self,
        plan: &str,
        global_actor: Option<&str>,
        regex: Option<&str>,
    ) -> Result<EffectiveInvariants, ApiError> {
        let q = RegistryQuery::EffectiveInvariants {
            plan: plan.to_string(),
            global_actor: global_actor.map(str::to_string),
            regex: regex.map(str::to_string),
        };
        match self.registry_call(q)? {
            RegistryView::EffectiveInvariants(v) => Ok(*v),
            _ => Err(unexpected("effective_invariants")),
        }
    }
}
