//! File and directory tools (spec section 18 "Built-in tools": `file_operations`,
//! `directory_operations`; section 11 `get_file_info`). Every path goes through
//! [`SandboxFs::check`](crate::sandbox::confined::SandboxFs::check) and kernel-confined
//! operations; every mutation records [`Change`]s with content hashes.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use super::change::{Change, ChangeOp};
use super::{Builtin, Capability, Tool, ToolContext, ToolError, ToolGroup};
use crate::sandbox::confined::{Content, EntryKind, FsError, RelPath, sha256_hex};

/// Largest file `read_file` and `edit_file` load, in bytes.
pub const READ_LIMIT: u64 = 4 * 1024 * 1024;
/// Largest file `copy_file` copies, in bytes.
pub const COPY_LIMIT: u64 = 1024 * 1024 * 1024;
/// Largest text `read_file` returns, in bytes (longer content is cut at a line boundary).
pub const RETURN_LIMIT: usize = 256 * 1024;

fn check(ctx: &ToolContext<'_>, path: &str) -> Result<RelPath, ToolError> {
    Ok(ctx.fs.check(path, false)?)
}

fn content_of(bytes: &[u8]) -> Content {
    Content {
        hash: sha256_hex(bytes),
        size: bytes.len() as u64,
    }
}

/// Whether bytes look binary: a NUL in the first 8000 bytes (git's rule) or not UTF-8.
pub fn looks_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(8000)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// Arguments of `read_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFile {
    /// File path relative to the resource root.
    pub path: String,
    /// First line to return (1-based).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub start_line: Option<u64>,
    /// Number of lines to return.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub line_count: Option<u64>,
}

fn read_file(ctx: &mut ToolContext<'_>, a: ReadFile) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let bytes = ctx.fs.read(&path, READ_LIMIT)?;
    if looks_binary(&bytes) {
        return Ok(json!({
            "path": path.as_str(), "binary": true, "size": bytes.len(),
            "content": null, "sha256": sha256_hex(&bytes),
        }));
    }
    let text = String::from_utf8(bytes).expect("checked as UTF-8");
    let total_lines = text.lines().count();
    let start = a.start_line.unwrap_or(1).max(1) as usize;
    let count = a.line_count.map(|c| c as usize).unwrap_or(usize::MAX);
    let mut out = String::new();
    let mut truncated = false;
    for line in text.split_inclusive('\n').skip(start - 1).take(count) {
        if out.len() + line.len() > RETURN_LIMIT {
            truncated = true;
            break;
        }
        out.push_str(line);
    }
    Ok(json!({
        "path": path.as_str(), "binary": false, "size": text.len(),
        "total_lines": total_lines, "start_line": start, "truncated": truncated, "content": out,
    }))
}

/// Arguments of `write_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFile {
    /// File path relative to the resource root.
    pub path: String,
    /// The complete new content (UTF-8).
    pub content: String,
    /// Create missing parent directories (default true).
    #[serde(default = "yes")]
    pub create_dirs: bool,
}

fn yes() -> bool {
    true
}

fn write_file(ctx: &mut ToolContext<'_>, a: WriteFile) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let old = ctx.fs.content(&path)?;
    let created = ctx.fs.write(&path, a.content.as_bytes(), a.create_dirs)?;
    for dir in &created {
        ctx.record(Change::dir(ChangeOp::CreateDir, dir));
    }
    let new = content_of(a.content.as_bytes());
    let status = if old.is_some() { "updated" } else { "created" };
    if let Some(change) = Change::between(&path, old, Some(new)) {
        ctx.record(change);
    }
    Ok(json!({"path": path.as_str(), "status": status, "size": a.content.len()}))
}

/// One exact search/replace edit.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// Text to find; must occur exactly once unless `replace_all` is set.
    #[schemars(length(min = 1))]
    pub old_text: String,
    /// Replacement text.
    pub new_text: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default)]
    pub replace_all: bool,
}

/// Arguments of `edit_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFile {
    /// File path relative to the resource root.
    pub path: String,
    /// Edits applied in order; if any fails, none is applied.
    #[schemars(length(min = 1))]
    pub edits: Vec<Edit>,
}

fn line_of(text: &str, byte: usize) -> usize {
    text[..byte].matches('\n').count() + 1
}

fn edit_file(ctx: &mut ToolContext<'_>, a: EditFile) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let bytes = ctx.fs.read(&path, READ_LIMIT)?;
    let old = content_of(&bytes);
    let mut text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "{} is not UTF-8 text; edit_file works on text",
            path.as_str()
        ))
    })?;
    let mut replaced = 0;
    for (i, edit) in a.edits.iter().enumerate() {
        let found: Vec<usize> = text
            .match_indices(&edit.old_text)
            .map(|(at, _)| at)
            .collect();
        match found.len() {
            0 => {
                return Err(ToolError::Failed(format!(
                    "edit {}: old_text was not found in {}; nothing was changed",
                    i + 1,
                    path.as_str()
                )));
            }
            n if n > 1 && !edit.replace_all => {
                let lines: Vec<String> = found
                    .iter()
                    .take(10)
                    .map(|&b| line_of(&text, b).to_string())
                    .collect();
                return Err(ToolError::Failed(format!(
                    "edit {}: old_text occurs {n} times in {} (lines {}); add surrounding text to make it unique, or set replace_all; nothing was changed",
                    i + 1,
                    path.as_str(),
                    lines.join(", ")
                )));
            }
            n => {
                replaced += n;
                text = text.replace(&edit.old_text, &edit.new_text);
            }
        }
    }
    let new = content_of(text.as_bytes());
    ctx.fs.write(&path, text.as_bytes(), false)?;
    if let Some(change) = Change::between(&path, Some(old), Some(new)) {
        ctx.record(change);
    }
    Ok(json!({"path": path.as_str(), "edits": a.edits.len(), "replacements": replaced}))
}

/// Arguments naming one path.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArg {
    /// Path relative to the resource root.
    pub path: String,
}

fn delete_file(ctx: &mut ToolContext<'_>, a: PathArg) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let old = ctx
        .fs
        .content(&path)?
        .ok_or_else(|| ToolError::NotFound(format!("{} does not exist", path.as_str())))?;
    ctx.fs.remove_file(&path)?;
    if let Some(change) = Change::between(&path, Some(old), None) {
        ctx.record(change);
    }
    Ok(json!({"path": path.as_str(), "status": "deleted"}))
}

/// Arguments of `move_file` and `copy_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TwoPaths {
    /// Existing path relative to the resource root.
    pub source: String,
    /// New path relative to the resource root.
    pub destination: String,
    /// Replace an existing destination file.
    #[serde(default)]
    pub overwrite: bool,
}

fn move_file(ctx: &mut ToolContext<'_>, a: TwoPaths) -> Result<Value, ToolError> {
    let from = check(ctx, &a.source)?;
    let to = check(ctx, &a.destination)?;
    let meta = ctx
        .fs
        .meta(&from)?
        .ok_or_else(|| ToolError::NotFound(format!("{} does not exist", from.as_str())))?;
    let replaced = if a.overwrite {
        ctx.fs.content(&to).ok().flatten()
    } else {
        None
    };
    if meta.kind == EntryKind::Directory {
        let files = ctx.fs.files_under(&from)?;
        ctx.fs.rename(&from, &to, false)?;
        for (old_path, content) in files {
            let rest = &old_path.as_str()[from.as_str().len()..];
            ctx.record(Change {
                operation: ChangeOp::Rename,
                path: format!("{}{rest}", to.as_str()),
                old_path: Some(old_path.as_str().to_string()),
                old_hash: Some(content.hash.clone()),
                new_hash: Some(content.hash),
                old_size: Some(content.size),
                new_size: Some(content.size),
            });
        }
    } else {
        let content = ctx
            .fs
            .content(&from)?
            .ok_or_else(|| ToolError::NotFound(format!("{} does not exist", from.as_str())))?;
        if let Some(existing) = ctx.fs.meta(&to)?
            && existing.kind == EntryKind::Directory
        {
            return Err(ToolError::Failed(format!(
                "{} is a directory; give the full destination file path",
                to.as_str()
            )));
        }
        ctx.fs.rename(&from, &to, a.overwrite)?;
        if let Some(old) = replaced {
            ctx.record(Change::between(&to, Some(old), None).expect("a deletion is a change"));
        }
        ctx.record(Change {
            operation: ChangeOp::Rename,
            path: to.as_str().to_string(),
            old_path: Some(from.as_str().to_string()),
            old_hash: Some(content.hash.clone()),
            new_hash: Some(content.hash),
            old_size: Some(content.size),
            new_size: Some(content.size),
        });
    }
    Ok(json!({"source": from.as_str(), "destination": to.as_str(), "status": "moved"}))
}

fn copy_file(ctx: &mut ToolContext<'_>, a: TwoPaths) -> Result<Value, ToolError> {
    let from = check(ctx, &a.source)?;
    let to = check(ctx, &a.destination)?;
    let bytes = ctx.fs.read(&from, COPY_LIMIT)?;
    let old = ctx.fs.content(&to)?;
    if old.is_some() && !a.overwrite {
        return Err(ToolError::AlreadyExists(format!(
            "{} already exists; pass overwrite: true to replace it",
            to.as_str()
        )));
    }
    let created = ctx.fs.write(&to, &bytes, true)?;
    for dir in &created {
        ctx.record(Change::dir(ChangeOp::CreateDir, dir));
    }
    if let Some(change) = Change::between(&to, old, Some(content_of(&bytes))) {
        ctx.record(change);
    }
    Ok(
        json!({"source": from.as_str(), "destination": to.as_str(), "status": "copied", "size": bytes.len()}),
    )
}

fn create_directory(ctx: &mut ToolContext<'_>, a: PathArg) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let created = ctx.fs.create_dir_all(&path)?;
    for dir in &created {
        ctx.record(Change::dir(ChangeOp::CreateDir, dir));
    }
    let status = if created.is_empty() {
        "exists"
    } else {
        "created"
    };
    Ok(json!({"path": path.as_str(), "status": status}))
}

/// Arguments of `delete_directory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteDirectory {
    /// Directory path relative to the resource root.
    pub path: String,
    /// Delete its contents too (default false: the directory must be empty).
    #[serde(default)]
    pub recursive: bool,
}

fn delete_directory(ctx: &mut ToolContext<'_>, a: DeleteDirectory) -> Result<Value, ToolError> {
    let path = check(ctx, &a.path)?;
    let files = ctx.fs.files_under(&path)?;
    if !files.is_empty() && !a.recursive {
        return Err(FsError::NotEmpty(path.as_str().to_string()).into());
    }
    ctx.fs.remove_dir(&path, a.recursive)?;
    let n = files.len();
    for (file, content) in files {
        ctx.record(Change::between(&file, Some(content), None).expect("a deletion is a change"));
    }
    ctx.record(Change::dir(ChangeOp::DeleteDir, &path));
    Ok(json!({"path": path.as_str(), "status": "deleted", "files_deleted": n}))
}

/// Arguments of `list_directory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListDirectory {
    /// Directory relative to the resource root (default: the root).
    #[serde(default = "dot")]
    pub path: String,
    /// Glob on entry names (default `*`).
    #[serde(default = "star")]
    pub pattern: String,
}

fn dot() -> String {
    ".".into()
}
fn star() -> String {
    "*".into()
}

fn list_directory(ctx: &mut ToolContext<'_>, a: ListDirectory) -> Result<Value, ToolError> {
    let path = ctx.fs.check(&a.path, true)?;
    let glob = globset::Glob::new(&a.pattern)
        .map_err(|e| ToolError::invalid("pattern", e.to_string()))?
        .compile_matcher();
    let entries: Vec<Value> = ctx
        .fs
        .list(&path)?
        .into_iter()
        .filter(|e| glob.is_match(&e.name))
        .filter(|e| ctx.fs.check(path.join(&e.name).as_str(), false).is_ok())
        .map(|e| json!({"name": e.name, "kind": e.kind, "size": e.size}))
        .collect();
    Ok(json!({"path": path.display(), "entries": entries}))
}

fn get_file_info(ctx: &mut ToolContext<'_>, a: PathArg) -> Result<Value, ToolError> {
    let path = ctx.fs.check(&a.path, true)?;
    let meta = ctx
        .fs
        .meta(&path)?
        .ok_or_else(|| ToolError::NotFound(format!("{} does not exist", path.display())))?;
    let modified = jiff::Timestamp::from_second(meta.modified)
        .map(|t| t.to_string())
        .unwrap_or_default();
    let mut info = json!({
        "path": path.display(), "kind": meta.kind, "size": meta.size,
        "mode": format!("{:o}", meta.mode), "modified": modified,
    });
    match meta.kind {
        EntryKind::File if meta.size <= READ_LIMIT => {
            let bytes = ctx.fs.read(&path, READ_LIMIT)?;
            let binary = looks_binary(&bytes);
            info["binary"] = json!(binary);
            info["sha256"] = json!(sha256_hex(&bytes));
            if !binary {
                let lines = bytes.iter().filter(|b| **b == b'\n').count()
                    + usize::from(!bytes.is_empty() && !bytes.ends_with(b"\n"));
                info["line_count"] = json!(lines);
            }
        }
        EntryKind::File => {
            use std::io::Read;
            let mut head = vec![0u8; 8000];
            let n = ctx
                .fs
                .open_file(&path)?
                .read(&mut head)
                .map_err(|e| ToolError::Failed(e.to_string()))?;
            info["binary"] = json!(head[..n].contains(&0));
        }
        EntryKind::Symlink => {
            info["symlink_target"] = json!(ctx.fs.read_link(&path)?);
        }
        _ => {}
    }
    Ok(info)
}

/// The file and directory tools.
pub fn tools() -> Vec<Box<dyn Tool>> {
    use ToolGroup::{DirectoryOperations as Dir, FileOperations as File};
    vec![
        Box::new(Builtin::<ReadFile>::new(
            "read_file",
            "Read a text file (or a range of its lines)",
            File,
            Capability::read_only,
            &["path"],
            read_file,
        )),
        Box::new(Builtin::<WriteFile>::new(
            "write_file",
            "Create or overwrite a file with the given content",
            File,
            || Capability::writes_files(true),
            &["path"],
            write_file,
        )),
        Box::new(Builtin::<EditFile>::new(
            "edit_file",
            "Apply exact search/replace edits to a file; fails if a search text is absent or ambiguous",
            File,
            || Capability::writes_files(false),
            &["path"],
            edit_file,
        )),
        Box::new(Builtin::<PathArg>::new(
            "delete_file",
            "Delete a file",
            File,
            || Capability::writes_files(true),
            &["path"],
            delete_file,
        )),
        Box::new(Builtin::<TwoPaths>::new(
            "move_file",
            "Move or rename a file or directory",
            File,
            || Capability::writes_files(false),
            &["source", "destination"],
            move_file,
        )),
        Box::new(Builtin::<TwoPaths>::new(
            "copy_file",
            "Copy a file",
            File,
            || Capability::writes_files(true),
            &["source", "destination"],
            copy_file,
        )),
        Box::new(Builtin::<PathArg>::new(
            "create_directory",
            "Create a directory and its missing parents",
            Dir,
            || Capability::writes_files(true),
            &["path"],
            create_directory,
        )),
        Box::new(Builtin::<DeleteDirectory>::new(
            "delete_directory",
            "Delete a directory (recursive: true to delete its contents)",
            Dir,
            || Capability::writes_files(true),
            &["path"],
            delete_directory,
        )),
        Box::new(Builtin::<ListDirectory>::new(
            "list_directory",
            "List a directory's entries, optionally filtered by a glob",
            Dir,
            Capability::read_only,
            &["path"],
            list_directory,
        )),
        Box::new(Builtin::<PathArg>::new(
            "get_file_info",
            "Size, kind, mode, time, line count and binary detection for a path",
            File,
            Capability::read_only,
            &["path"],
            get_file_info,
        )),
    ]
}
