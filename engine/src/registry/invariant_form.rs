//! An invariant's machine form (spec section 12): `paths-unchanged: GLOBS` and `command: CMD`
//! are checked by the engine after each step and before Apply; any other text is judged by
//! the invariant actor. Parsing it is all this file does, so that actions and projects can
//! check the invariants they carry without the invariant registry.

/// How an invariant is checked after each step and before Apply (spec section 12).
#[derive(Debug, Clone)]
pub enum MachineForm {
    /// `paths-unchanged: GLOB[, GLOB...]`: no changed path may match a glob.
    PathsUnchanged {
        /// The globs as written (quotes removed).
        globs: Vec<String>,
        /// The compiled set.
        set: globset::GlobSet,
    },
    /// `command: CMD`: the command must exit 0 on the changed tree.
    Command(String),
    /// Anything else: judged by the invariant actor, when there is one.
    FreeText,
}

impl MachineForm {
    /// `paths-unchanged`, `command` or `free-text`.
    pub fn name(&self) -> &'static str {
        match self {
            MachineForm::PathsUnchanged { .. } => "paths-unchanged",
            MachineForm::Command(_) => "command",
            MachineForm::FreeText => "free-text",
        }
    }
}

/// Prefix of the paths form.
pub const PATHS_UNCHANGED: &str = "paths-unchanged:";
/// Prefix of the command form.
pub const COMMAND: &str = "command:";

/// Parses an invariant's machine form. Globs are separated by commas, may be quoted, match
/// paths relative to the resource root with `/` as separator (`*` stays within one directory,
/// `**` crosses directories), and a glob ending in `/` means everything beneath it.
///
/// # Errors
/// A message naming the problem and the fix: an empty glob list or glob, an invalid glob, an
/// empty command.
pub fn machine_form(text: &str) -> Result<MachineForm, String> {
    let text = text.trim();
    near_miss(text)?;
    if let Some(rest) = text.strip_prefix(PATHS_UNCHANGED) {
        let mut globs = Vec::new();
        let mut builder = globset::GlobSetBuilder::new();
        for part in rest.split(',') {
            let g = unquote(part.trim())?;
            if g.is_empty() {
                return Err(format!(
                    "`{PATHS_UNCHANGED}` needs one or more globs separated by commas, none empty, e.g. `{PATHS_UNCHANGED} \"migrations/**\", Cargo.lock`"
                ));
            }
            let pattern = match g.strip_suffix('/') {
                Some(dir) => format!("{dir}/**"),
                None => g.to_string(),
            };
            let glob = globset::GlobBuilder::new(&pattern)
                .literal_separator(true)
                .build()
                .map_err(|e| {
                    format!(
                        "`{g}` is not a valid glob ({}); write globs like `migrations/**`, `*.lock` or `src/**/*.sql`",
                        e.kind()
                    )
                })?;
            builder.add(glob);
            globs.push(g.to_string());
        }
        let set = builder
            .build()
            .map_err(|e| format!("the globs do not compile: {e}"))?;
        return Ok(MachineForm::PathsUnchanged { globs, set });
    }
    if let Some(rest) = text.strip_prefix(COMMAND) {
        let cmd = rest.trim();
        if cmd.is_empty() {
            return Err(format!(
                "`{COMMAND}` needs the command that must exit 0, e.g. `{COMMAND} cargo test --offline`"
            ));
        }
        return Ok(MachineForm::Command(cmd.to_string()));
    }
    Ok(MachineForm::FreeText)
}

/// Refuses a text whose head before `:` is a machine form's name spelled another way
/// (`Paths-Unchanged:`, `paths_unchanged:`, `Command:`), so a typo never turns a check into
/// free text nobody checks.
fn near_miss(text: &str) -> Result<(), String> {
    let Some((head, _)) = text.split_once(':') else {
        return Ok(());
    };
    let folded = head.trim().to_lowercase().replace(['_', ' '], "-");
    for form in [PATHS_UNCHANGED, COMMAND] {
        let name = form.trim_end_matches(':');
        if folded == name && head != name {
            return Err(format!(
                "`{head}:` looks like the machine form `{form}` spelled another way; write `{form}` exactly (lowercase, with `-`), or reword the invariant if it is free text"
            ));
        }
    }
    Ok(())
}

/// One glob of a `paths-unchanged` list without its quotes; a quote opened and not closed
/// (or closed and not opened) is refused.
fn unquote(part: &str) -> Result<&str, String> {
    let quoted = |c: char| c == '"' || c == '\'';
    let (first, last) = (part.chars().next(), part.chars().last());
    let opens = first.is_some_and(quoted);
    let closes = part.len() > 1 && last.is_some_and(quoted);
    if opens != closes || (opens && first != last) {
        return Err(format!(
            "`{part}` has an unbalanced quote; quote the whole glob (`\"migrations/**\"`) or not at all"
        ));
    }
    Ok(if opens {
        part[1..part.len() - 1].trim()
    } else {
        part
    })
}
