//! A [`ToolHost`] with real file operations confined to one directory, standing in for the
//! tool runner in actor tests: `read_file`, `write_file`, `edit_file`, `list_directory`.
//! Paths are relative to the root; absolute paths and `..` are refused with an error result.
//! Optionally cancels a token after a given number of calls (to test cancellation).

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use cleveragents_engine::actors::messages::ToolSpec;
use cleveragents_engine::actors::runtime::{ToolHost, ToolOutcome};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// File tools over `root`.
pub struct FileTools {
    root: PathBuf,
    cancel_after: Option<(usize, CancellationToken)>,
    calls: Mutex<Vec<(String, Value)>>,
}

impl FileTools {
    /// Tools over `root`.
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            cancel_after: None,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// Cancels `token` once `n` calls have completed.
    pub fn cancelling_after(mut self, n: usize, token: CancellationToken) -> Self {
        self.cancel_after = Some((n, token));
        self
    }

    /// Calls that reached the tools (after the runtime's own checks), in order.
    pub fn calls(&self) -> Vec<(String, Value)> {
        self.calls.lock().unwrap().clone()
    }

    fn resolve(&self, args: &Value) -> Result<PathBuf, String> {
        let rel = args["path"]
            .as_str()
            .ok_or("`path` is required and must be a string")?;
        let p = Path::new(rel);
        if p.components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(format!(
                "`{rel}` is outside the working directory; use a relative path without `..`"
            ));
        }
        Ok(self.root.join(p))
    }

    fn run(&self, name: &str, args: &Value) -> Result<String, String> {
        match name {
            "read_file" => {
                let path = self.resolve(args)?;
                std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", args["path"]))
            }
            "write_file" => {
                let path = self.resolve(args)?;
                let content = args["content"]
                    .as_str()
                    .ok_or("`content` must be a string")?;
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
                }
                std::fs::write(&path, content).map_err(|e| e.to_string())?;
                Ok(format!("wrote {} bytes", content.len()))
            }
            "edit_file" => {
                let path = self.resolve(args)?;
                let old = args["old"].as_str().ok_or("`old` must be a string")?;
                let new = args["new"].as_str().ok_or("`new` must be a string")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("cannot read {}: {e}", args["path"]))?;
                match text.matches(old).count() {
                    1 => {
                        std::fs::write(&path, text.replacen(old, new, 1))
                            .map_err(|e| e.to_string())?;
                        Ok("edited 1 occurrence".into())
                    }
                    0 => Err(format!("`{old}` does not occur in {}", args["path"])),
                    n => Err(format!(
                        "`{old}` occurs {n} times; give more context so it occurs once"
                    )),
                }
            }
            "list_directory" => {
                let dir = if args.get("path").is_some() {
                    self.resolve(args)?
                } else {
                    self.root.clone()
                };
                let mut names: Vec<String> = std::fs::read_dir(&dir)
                    .map_err(|e| e.to_string())?
                    .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect();
                names.sort();
                Ok(names.join("\n"))
            }
            other => Err(format!("no tool `{other}`")),
        }
    }
}

fn path_schema(extra: Value) -> Value {
    let mut props = json!({"path": {"type": "string", "description": "relative path"}});
    let mut required = vec![json!("path")];
    if let Value::Object(m) = extra {
        for (k, v) in m {
            required.push(json!(k));
            props[k] = v;
        }
    }
    json!({"type": "object", "properties": props, "required": required})
}

impl ToolHost for FileTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a text file".into(),
                input_schema: path_schema(json!({})),
            },
            ToolSpec {
                name: "write_file".into(),
                description: "Write a text file".into(),
                input_schema: path_schema(json!({"content": {"type": "string"}})),
            },
            ToolSpec {
                name: "edit_file".into(),
                description: "Replace the one occurrence of `old` with `new`".into(),
                input_schema: path_schema(
                    json!({"old": {"type": "string"}, "new": {"type": "string"}}),
                ),
            },
            ToolSpec {
                name: "list_directory".into(),
                description: "List a directory".into(),
                input_schema: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
            },
        ]
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let result = self.run(name, &args);
        let n = {
            let mut calls = self.calls.lock().unwrap();
            calls.push((name.to_string(), args));
            calls.len()
        };
        if let Some((after, token)) = &self.cancel_after
            && n >= *after
        {
            token.cancel();
        }
        match result {
            Ok(s) => ToolOutcome::ok(s),
            Err(e) => ToolOutcome::error(e),
        }
    }
}
