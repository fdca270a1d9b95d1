//! The live tools of a skill's MCP servers (spec section 19, "MCP servers"): each server is
//! started in a scratch directory (or reached at its URL), listed and stopped, on the machine
//! that answers the call.

use std::path::{Path, PathBuf};

use crate::skill_registry::{ResolvedSkill, ResolvedTool};
use crate::tools::custom::ToolSource;
use crate::tools::mcp::{McpPool, Placement};

/// A scratch directory removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tools `skill`'s MCP servers list now, with the problems reaching them, in words.
pub(super) fn tools(skill: &ResolvedSkill) -> (Vec<ResolvedTool>, Vec<String>) {
    let mut tools = Vec::new();
    let mut problems = Vec::new();
    if skill.mcp_servers.is_empty() {
        return (tools, problems);
    }
    let scratch = Scratch(std::env::temp_dir().join(format!("agents-mcp-{}", std::process::id())));
    if let Err(e) = std::fs::create_dir_all(scratch.path()) {
        problems.push(format!("no scratch directory for the MCP servers: {e}"));
        return (tools, problems);
    }
    let pool = match McpPool::new() {
        Ok(p) => p,
        Err(e) => {
            problems.push(e);
            return (tools, problems);
        }
    };
    let place = placement(scratch.path());
    for (from, spec) in &skill.mcp_servers {
        match pool.connect(spec, &place) {
            Ok(list) => tools.extend(list.into_iter().map(|t| ResolvedTool {
                name: t.qualified,
                description: t.description,
                source: ToolSource::Mcp,
                capability: t.capability,
                from_skill: (from != &skill.name).then(|| from.clone()),
                external: None,
            })),
            Err(e) => problems.push(e),
        }
    }
    pool.shutdown();
    (tools, problems)
}

/// Where the servers run: in `scratch`, with a home of their own there, the network allowed.
fn placement(scratch: &Path) -> Placement {
    let home = scratch.join("home");
    let _ = std::fs::create_dir_all(&home);
    Placement {
        cwd: scratch.to_path_buf(),
        writable: vec![scratch.to_path_buf()],
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), home.display().to_string()),
        ],
        network: true,
        allow_unconfined: true,
        log_dir: None,
        ..Placement::default()
    }
}
