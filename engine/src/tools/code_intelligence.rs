//! The `code_intelligence` tools as built-in tools of the tool runner (spec section 24), so
//! an execution actor and `tool:` steps can call them like any read-only tool. Each call
//! reads the bound resource's index at the sandbox's base (the plan's base commit of a git
//! checkout; a directory as it is), brought up to date first; see
//! [`crate::index::skill`] for what each tool answers.

use serde_json::Value;

use super::{Capability, Tool, ToolContext, ToolError, ToolGroup};
use crate::index::skill::{self, CallError, Scope};
use crate::index::{self, IndexError, View, store};
use crate::paths::Paths;
use crate::sandbox::TargetKind;

/// One `code_intelligence` tool.
pub struct CodeTool {
    name: &'static str,
    description: &'static str,
    schema: Value,
}

/// The data directory a sandbox lives in (`<data>/sandboxes/<plan>/<sandbox>`).
fn data_dir(ctx: &ToolContext<'_>) -> Option<std::path::PathBuf> {
    let root = &ctx.sandbox.record.root_dir;
    let sandboxes = root.parent()?.parent()?;
    (sandboxes.file_name()? == "sandboxes").then(|| sandboxes.parent().map(|p| p.to_path_buf()))?
}

impl Tool for CodeTool {
    fn name(&self) -> &'static str {
        self.name
    }
    fn description(&self) -> &'static str {
        self.description
    }
    fn group(&self) -> ToolGroup {
        ToolGroup::CodeIntelligence
    }
    fn capability(&self) -> Capability {
        Capability::read_only()
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn path_fields(&self) -> &'static [&'static str] {
        &[]
    }
    fn execute(&self, ctx: &mut ToolContext<'_>, args: Value) -> Result<Value, ToolError> {
        let data = data_dir(ctx).ok_or_else(|| {
            ToolError::Failed(
                "the sandbox is not under a data directory; the code index cannot be found".into(),
            )
        })?;
        let config = ctx
            .config_path
            .map_or_else(|| data.join("config.toml"), std::path::Path::to_path_buf);
        let paths = Paths::at(&data, config);
        let target = &ctx.sandbox.target;
        let dir = store::dir(&paths, &target.resource_name);
        let policy = index::policy_of(&paths);
        let missing = || {
            ToolError::Failed(format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "{} has no code index; build it with `agents resource reindex {}`",
                target.resource_name, target.resource_name
            ))
        };
        match index::build::update(&dir, &policy) {
            Err(IndexError::Missing) => return Err(missing()),
            Err(e) => return Err(ToolError::Failed(e.to_string())),
            Ok(_) => {}
        }
        let base = match &target.kind {
            TargetKind::GitCheckout { base_commit, .. } => Some(base_commit.as_str()),
            TargetKind::Directory { .. } => None,
        };
        let view = View::open(&dir, base, &policy).map_err(|e| ToolError::Failed(e.to_string()))?;
        let scopes = [Scope {
            resource: target.resource_name.clone(),
            alias: target.alias.clone(),
            view,
            semantic: index::embed::setting(&paths),
        }];
        skill::call(&scopes, self.name, args).map_err(|e| match e {
            CallError::Invalid(field, message) => ToolError::invalid(field, message),
            CallError::Index(e) => ToolError::Failed(e.to_string()),
        })
    }
}

/// The `code_intelligence` tools.
pub fn tools() -> Vec<Box<dyn Tool>> {
    skill::specs()
        .into_iter()
        .map(|(name, description, schema)| {
            Box::new(CodeTool {
                name,
                description,
                schema,
            }) as Box<dyn Tool>
        })
        .collect()
}
