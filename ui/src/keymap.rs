//! Which key does what, in one table, which a keymap file can change.
//!
//! The help overlay and the status-line hints are generated from the [`Keymap`] in use, so they
//! can only list keys that [`Keymap::lookup`] actually resolves.
//!
//! A keymap file (`keys.toml` in the config directory) rebinds actions per scope; each entry
//! replaces that action's keys in that scope:
//!
//! ```toml
//! [global]
//! quit = ["q", "ctrl-c"]
//! help = ["?", "f1"]
//!
//! [plans]
//! execute = ["e"]
//! filter = ["/", "ctrl-f"]
//!
//! [diff]
//! next_hunk = ["n", "down"]
//! ```
//!
//! Scopes are `global`, `plans`, `tree`, `diff` and `approvals`. Keys are a character (`q`,
//! `Q`, `/`), `ctrl-X`, or one of `enter`, `esc`, `tab`, `shift-tab`, `backspace`, `delete`,
//! `up`, `down`, `left`, `right`, `home`, `end`, `pgup`, `pgdn`, `space`. A key bound twice
//! where both bindings can apply is an error.

use std::fmt;

use crate::model::Pane;
use crate::msg::Key;

/// What a key press means, before the focused pane interprets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Leave the TUI (asks first while commands started here still run).
    Quit,
    /// Open the help overlay.
    Help,
    /// Show the last errors, whole (the status bar shows the newest, cut to fit).
    ShowErrors,
    /// Focus the next pane.
    FocusNext,
    /// Focus the previous pane.
    FocusPrev,
    /// Focus a given pane.
    Focus(Pane),
    /// Show only the focused pane, or go back to all four.
    ToggleZoom,
    /// Move the selection (or scroll) up.
    Up,
    /// Move the selection (or scroll) down.
    Down,
    /// Jump to the first item.
    First,
    /// Jump to the last item.
    Last,
    /// Use an action on a project (opens a form).
    UseAction,
    /// Filter the plans list (fuzzy).
    Filter,
    /// Run the selected plan's next phase.
    Execute,
    /// Review the selected plan's diff, then apply it after a confirm.
    Apply,
    /// Cancel the selected plan (after a confirm).
    Cancel,
    /// Roll the selected plan back to a checkpoint (from a list, after a confirm).
    Rollback,
    /// Give the selected plan guidance.
    Prompt,
    /// Collapse the selected tree node, or go to its parent.
    Collapse,
    /// Expand the selected tree node.
    Expand,
    /// Open the explanation of the selected decision.
    Explain,
    /// Correct the selected decision (guidance, mode, dry-run impact, confirm).
    Correct,
    /// Show or hide superseded decisions.
    ToggleSuperseded,
    /// Scroll to the next hunk.
    NextHunk,
    /// Scroll to the previous hunk.
    PrevHunk,
    /// Scroll to the next file.
    NextFile,
    /// Scroll to the previous file.
    PrevFile,
    /// Switch between the unified and the side-by-side diff.
    ToggleDiffView,
    /// Accept the current hunk (or file without hunks) and go to the next.
    AcceptHunk,
    /// Reject the current hunk, with an optional reason.
    RejectHunk,
    /// Accept every pending item of the current file and go to the next file.
    AcceptFile,
    /// Set the current hunk back to pending.
    ResetHunk,
    /// Mark the current hunk reviewed (seen, no verdict yet) and go to the next.
    MarkReviewed,
    /// Correct the decision that produced the current (rejected) hunk, the rejection's reason
    /// as guidance.
    CorrectHunk,
    /// Scroll a page up.
    PageUp,
    /// Scroll a page down.
    PageDown,
    /// Approve the selected approval (after confirmation).
    Approve,
    /// Reject the selected approval with a reason.
    Reject,
    /// Choose one of the selected approval's options.
    Choose,
    /// Answer the selected approval with guidance.
    Guidance,
}

impl Action {
    /// The action's name in keymap files (`next_hunk`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Quit => "quit",
            Self::Help => "help",
            Self::ShowErrors => "errors",
            Self::FocusNext => "focus_next",
            Self::FocusPrev => "focus_prev",
            Self::Focus(Pane::Plans) => "focus_plans",
            Self::Focus(Pane::Tree) => "focus_tree",
            Self::Focus(Pane::Diff) => "focus_diff",
            Self::Focus(Pane::Approvals) => "focus_approvals",
            Self::ToggleZoom => "zoom",
            Self::Up => "up",
            Self::Down => "down",
            Self::First => "first",
            Self::Last => "last",
            Self::UseAction => "use_action",
            Self::Filter => "filter",
            Self::Execute => "execute",
            Self::Apply => "apply",
            Self::Cancel => "cancel",
            Self::Rollback => "rollback",
            Self::Prompt => "prompt",
            Self::Collapse => "collapse",
            Self::Expand => "expand",
            Self::Explain => "explain",
            Self::Correct => "correct",
            Self::ToggleSuperseded => "toggle_superseded",
            Self::NextHunk => "next_hunk",
            Self::PrevHunk => "prev_hunk",
            Self::NextFile => "next_file",
            Self::PrevFile => "prev_file",
            Self::ToggleDiffView => "toggle_view",
            Self::AcceptHunk => "accept",
            Self::RejectHunk => "reject_hunk",
            Self::AcceptFile => "accept_file",
            Self::ResetHunk => "reset",
            Self::MarkReviewed => "mark_reviewed",
            Self::CorrectHunk => "correct_hunk",
            Self::PageUp => "page_up",
            Self::PageDown => "page_down",
            Self::Approve => "approve",
            Self::Reject => "reject",
            Self::Choose => "choose",
            Self::Guidance => "guidance",
        }
    }
}

/// Where a binding applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere (unless an overlay is open).
    Global,
    /// Only while this pane is focused; takes precedence over global bindings.
    Pane(Pane),
}

impl Scope {
    /// Every scope, in the order the help overlay lists them.
    pub const ALL: [Scope; 5] = [
        Scope::Global,
        Scope::Pane(Pane::Plans),
        Scope::Pane(Pane::Tree),
        Scope::Pane(Pane::Diff),
        Scope::Pane(Pane::Approvals),
    ];

    /// The scope's table name in keymap files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::Pane(Pane::Plans) => "plans",
            Self::Pane(Pane::Tree) => "tree",
            Self::Pane(Pane::Diff) => "diff",
            Self::Pane(Pane::Approvals) => "approvals",
        }
    }

    /// A heading for the help overlay.
    pub fn heading(self) -> &'static str {
        match self {
            Self::Global => "Everywhere",
            Self::Pane(Pane::Plans) => "Plans pane",
            Self::Pane(Pane::Tree) => "Decisions pane",
            Self::Pane(Pane::Diff) => "Diff pane",
            Self::Pane(Pane::Approvals) => "Approvals pane",
        }
    }
}

/// One line of the keymap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Where the binding applies.
    pub scope: Scope,
    /// The keys that trigger it (empty: unbound).
    pub keys: Vec<Key>,
    /// What they do.
    pub action: Action,
    /// A few words for the help overlay and the status line.
    pub help: &'static str,
}

use Scope::Global;
const PLANS: Scope = Scope::Pane(Pane::Plans);
const TREE: Scope = Scope::Pane(Pane::Tree);
const DIFF: Scope = Scope::Pane(Pane::Diff);
const APPROVALS: Scope = Scope::Pane(Pane::Approvals);

/// The default bindings, in the order the help overlay lists them.
pub const DEFAULTS: &[(Scope, &[Key], Action, &str)] = &[
    (
        Global,
        &[Key::Char('q'), Key::Ctrl('c')],
        Action::Quit,
        "quit",
    ),
    (Global, &[Key::Char('?')], Action::Help, "help"),
    (Global, &[Key::Char('!')], Action::ShowErrors, "last errors"),
    (Global, &[Key::Tab], Action::FocusNext, "next pane"),
    (Global, &[Key::BackTab], Action::FocusPrev, "previous pane"),
    (
        Global,
        &[Key::Char('1')],
        Action::Focus(Pane::Plans),
        "plans pane",
    ),
    (
        Global,
        &[Key::Char('2')],
        Action::Focus(Pane::Tree),
        "decisions pane",
    ),
    (
        Global,
        &[Key::Char('3')],
        Action::Focus(Pane::Diff),
        "diff pane",
    ),
    (
        Global,
        &[Key::Char('4')],
        Action::Focus(Pane::Approvals),
        "approvals pane",
    ),
    (Global, &[Key::Char('z')], Action::ToggleZoom, "zoom pane"),
    (Global, &[Key::Char('k'), Key::Up], Action::Up, "up"),
    (Global, &[Key::Char('j'), Key::Down], Action::Down, "down"),
    (Global, &[Key::Home], Action::First, "first"),
    (Global, &[Key::End], Action::Last, "last"),
    (Global, &[Key::PageUp], Action::PageUp, "page up"),
    (Global, &[Key::PageDown], Action::PageDown, "page down"),
    (
        Global,
        &[Key::Char('u')],
        Action::UseAction,
        "use an action",
    ),
    (PLANS, &[Key::Char('/')], Action::Filter, "filter"),
    (PLANS, &[Key::Char('e')], Action::Execute, "execute"),
    (PLANS, &[Key::Char('A')], Action::Apply, "review & apply"),
    (PLANS, &[Key::Char('x')], Action::Cancel, "cancel plan"),
    (PLANS, &[Key::Char('R')], Action::Rollback, "roll back"),
    (PLANS, &[Key::Char('g')], Action::Prompt, "guidance"),
    (
        TREE,
        &[Key::Char('h'), Key::Left],
        Action::Collapse,
        "collapse",
    ),
    (
        TREE,
        &[Key::Char('l'), Key::Right],
        Action::Expand,
        "expand",
    ),
    (TREE, &[Key::Enter], Action::Explain, "explain"),
    (TREE, &[Key::Char('c')], Action::Correct, "correct"),
    (
        TREE,
        &[Key::Char('s')],
        Action::ToggleSuperseded,
        "superseded",
    ),
    (DIFF, &[Key::Char('n')], Action::NextHunk, "next hunk"),
    (DIFF, &[Key::Char('p')], Action::PrevHunk, "prev hunk"),
    (DIFF, &[Key::Char(']')], Action::NextFile, "next file"),
    (DIFF, &[Key::Char('[')], Action::PrevFile, "prev file"),
    (
        DIFF,
        &[Key::Char('v')],
        Action::ToggleDiffView,
        "side by side",
    ),
    (DIFF, &[Key::Char(' ')], Action::AcceptHunk, "accept"),
    (DIFF, &[Key::Char('x')], Action::RejectHunk, "reject"),
    (DIFF, &[Key::Char('a')], Action::AcceptFile, "accept file"),
    (DIFF, &[Key::Char('r')], Action::ResetHunk, "reset mark"),
    (
        DIFF,
        &[Key::Char('m')],
        Action::MarkReviewed,
        "mark reviewed",
    ),
    (DIFF, &[Key::Char('c')], Action::CorrectHunk, "correct it"),
    (APPROVALS, &[Key::Char('a')], Action::Approve, "approve"),
    (APPROVALS, &[Key::Char('r')], Action::Reject, "reject"),
    (APPROVALS, &[Key::Char('c')], Action::Choose, "choose"),
    (APPROVALS, &[Key::Char('g')], Action::Guidance, "guidance"),
];

/// A keymap file could not be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeymapError {
    /// Not valid TOML.
    Syntax(String),
    /// A table that is not a scope.
    UnknownScope(String),
    /// An action that does not exist in that scope.
    UnknownAction {
        /// The scope's table.
        scope: String,
        /// The name given.
        action: String,
        /// The actions of that scope.
        known: Vec<&'static str>,
    },
    /// A key that cannot be parsed.
    BadKey {
        /// `scope.action`.
        at: String,
        /// The key as written.
        key: String,
    },
    /// A value that is not a list of strings.
    WrongType {
        /// Where.
        at: String,
    },
    /// The same key would trigger two bindings.
    Conflict {
        /// The key as written.
        key: String,
        /// `scope.action` of both bindings.
        first: String,
        /// `scope.action` of both bindings.
        second: String,
    },
}

impl fmt::Display for KeymapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(e) => write!(f, "not valid TOML: {e}"),
            Self::UnknownScope(s) => write!(
                f,
                "unknown table [{s}]; use global, plans, tree, diff or approvals"
            ),
            Self::UnknownAction {
                scope,
                action,
                known,
            } => write!(
                f,
                "unknown action {action:?} in [{scope}]; known there: {}",
                known.join(", ")
            ),
            Self::BadKey { at, key } => write!(
                f,
                "{at}: cannot read key {key:?}; write a character, ctrl-X, or one of enter, esc, \
                 tab, shift-tab, backspace, delete, up, down, left, right, home, end, pgup, pgdn, space"
            ),
            Self::WrongType { at } => write!(f, "{at}: expected a list of keys, like [\"q\"]"),
            Self::Conflict { key, first, second } => {
                write!(f, "key {key:?} is bound to both {first} and {second}")
            }
        }
    }
}

impl std::error::Error for KeymapError {}

/// Reads a key as written in keymap files (`q`, `ctrl-c`, `shift-tab`, `pgdn`).
pub fn parse_key(text: &str) -> Option<Key> {
    let mut chars = text.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return Some(Key::Char(c));
    }
    let lower = text.to_ascii_lowercase();
    if let Some(rest) = lower.strip_prefix("ctrl-") {
        let mut chars = rest.chars();
        return match (chars.next(), chars.next()) {
            (Some(c), None) => Some(Key::Ctrl(c)),
            _ => None,
        };
    }
    Some(match lower.as_str() {
        "enter" | "return" => Key::Enter,
        "esc" | "escape" => Key::Esc,
        "tab" => Key::Tab,
        "shift-tab" | "backtab" => Key::BackTab,
        "backspace" => Key::Backspace,
        "delete" | "del" => Key::Delete,
        "up" => Key::Up,
        "down" => Key::Down,
        "left" => Key::Left,
        "right" => Key::Right,
        "home" => Key::Home,
        "end" => Key::End,
        "pgup" | "pageup" => Key::PageUp,
        "pgdn" | "pagedown" => Key::PageDown,
        "space" => Key::Char(' '),
        _ => return None,
    })
}

/// The keymap in use: the defaults, possibly changed by a keymap file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keymap {
    bindings: Vec<Binding>,
}

impl Default for Keymap {
    fn default() -> Self {
        Self {
            bindings: DEFAULTS
                .iter()
                .map(|(scope, keys, action, help)| Binding {
                    scope: *scope,
                    keys: keys.to_vec(),
                    action: *action,
                    help,
                })
                .collect(),
        }
    }
}

impl Keymap {
    /// The defaults changed by a keymap file's text (see the module docs for the format).
    ///
    /// # Errors
    /// [`KeymapError`] naming the table, action or key at fault.
    pub fn from_toml_str(text: &str) -> Result<Self, KeymapError> {
        let table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| KeymapError::Syntax(e.to_string()))?;
        let mut map = Self::default();
        for (scope_name, entries) in &table {
            let scope = Scope::ALL
                .into_iter()
                .find(|s| s.name() == scope_name)
                .ok_or_else(|| KeymapError::UnknownScope(scope_name.clone()))?;
            let entries = entries.as_table().ok_or_else(|| KeymapError::WrongType {
                at: scope_name.clone(),
            })?;
            for (action_name, keys) in entries {
                let at = format!("{scope_name}.{action_name}");
                let binding = map
                    .bindings
                    .iter_mut()
                    .find(|b| b.scope == scope && b.action.name() == action_name);
                let Some(binding) = binding else {
                    return Err(KeymapError::UnknownAction {
                        scope: scope_name.clone(),
                        action: action_name.clone(),
                        known: DEFAULTS
                            .iter()
                            .filter(|d| d.0 == scope)
                            .map(|d| d.2.name())
                            .collect(),
                    });
                };
                let list = keys
                    .as_array()
                    .ok_or_else(|| KeymapError::WrongType { at: at.clone() })?;
                let mut parsed = Vec::new();
                for key in list {
                    let text = key
                        .as_str()
                        .ok_or_else(|| KeymapError::WrongType { at: at.clone() })?;
                    parsed.push(parse_key(text).ok_or_else(|| KeymapError::BadKey {
                        at: at.clone(),
                        key: text.to_owned(),
                    })?);
                }
                binding.keys = parsed;
            }
        }
        map.check_conflicts()?;
        Ok(map)
    }

    fn check_conflicts(&self) -> Result<(), KeymapError> {
        for pane in Pane::ALL {
            let mut seen: Vec<(Key, &Binding)> = Vec::new();
            for binding in self
                .bindings
                .iter()
                .filter(|b| b.scope == Global || b.scope == Scope::Pane(pane))
            {
                for key in &binding.keys {
                    if let Some((_, first)) = seen.iter().find(|(k, _)| k == key) {
                        let name = |b: &Binding| format!("{}.{}", b.scope.name(), b.action.name());
                        return Err(KeymapError::Conflict {
                            key: key.label(),
                            first: name(first),
                            second: name(binding),
                        });
                    }
                    seen.push((*key, binding));
                }
            }
        }
        Ok(())
    }

    /// Resolves a key for the focused pane: pane bindings first, then global ones.
    pub fn lookup(&self, focus: Pane, key: Key) -> Option<Action> {
        let find = |scope: Scope| {
            self.bindings
                .iter()
                .find(|b| b.scope == scope && b.keys.contains(&key))
                .map(|b| b.action)
        };
        find(Scope::Pane(focus)).or_else(|| find(Global))
    }

    /// The bindings of one scope, for the help overlay and status hints.
    pub fn bindings_for(&self, scope: Scope) -> impl Iterator<Item = &Binding> {
        self.bindings.iter().filter(move |b| b.scope == scope)
    }

    /// The first binding of an action in any scope.
    pub fn binding(&self, action: Action) -> Option<&Binding> {
        self.bindings.iter().find(|b| b.action == action)
    }

    /// The first key of an action, as written in hints (`?`), or `-` when unbound.
    pub fn key_for(&self, action: Action) -> String {
        self.binding(action)
            .and_then(|b| b.keys.first())
            .map_or_else(|| "-".to_owned(), |k| k.label())
    }
}

/// The keys of a binding joined for display, e.g. `q/Ctrl-c`.
pub fn keys_label(binding: &Binding) -> String {
    binding
        .keys
        .iter()
        .map(|k| k.label())
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pane_bindings_shadow_nothing_and_globals_resolve_everywhere() {
        let map = Keymap::default();
        for pane in Pane::ALL {
            assert_eq!(map.lookup(pane, Key::Char('q')), Some(Action::Quit));
            assert_eq!(map.lookup(pane, Key::Tab), Some(Action::FocusNext));
            assert_eq!(map.lookup(pane, Key::Down), Some(Action::Down));
        }
        assert_eq!(
            map.lookup(Pane::Approvals, Key::Char('a')),
            Some(Action::Approve)
        );
        assert_eq!(map.lookup(Pane::Plans, Key::Char('a')), None);
        assert_eq!(
            map.lookup(Pane::Diff, Key::Char('n')),
            Some(Action::NextHunk)
        );
        assert_eq!(map.lookup(Pane::Tree, Key::Char('n')), None);
        assert_eq!(
            map.lookup(Pane::Tree, Key::Char('c')),
            Some(Action::Correct)
        );
        assert_eq!(
            map.lookup(Pane::Approvals, Key::Char('c')),
            Some(Action::Choose)
        );
    }

    #[test]
    fn the_defaults_bind_no_key_twice_in_a_reachable_scope() {
        assert_eq!(Keymap::default().check_conflicts(), Ok(()));
    }

    #[test]
    fn every_action_name_is_unique_within_its_scope() {
        for scope in Scope::ALL {
            let names: Vec<&str> = DEFAULTS
                .iter()
                .filter(|d| d.0 == scope)
                .map(|d| d.2.name())
                .collect();
            let mut sorted = names.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), names.len(), "{scope:?}");
        }
    }

    #[test]
    fn keys_label_joins_alternatives() {
        let map = Keymap::default();
        let quit = map.binding(Action::Quit).expect("quit bound");
        assert_eq!(keys_label(quit), "q/Ctrl-c");
    }

    #[test]
    fn a_keymap_file_rebinds_actions_per_scope() {
        let map = Keymap::from_toml_str(
            "[global]\nquit = [\"ctrl-q\"]\n[diff]\nnext_hunk = [\"N\", \"space\"]\naccept = [\"y\"]\n",
        )
        .expect("valid");
        assert_eq!(map.lookup(Pane::Plans, Key::Ctrl('q')), Some(Action::Quit));
        assert_eq!(map.lookup(Pane::Plans, Key::Char('q')), None);
        assert_eq!(
            map.lookup(Pane::Diff, Key::Char('N')),
            Some(Action::NextHunk)
        );
        assert_eq!(
            map.lookup(Pane::Diff, Key::Char(' ')),
            Some(Action::NextHunk)
        );
        assert_eq!(
            map.lookup(Pane::Diff, Key::Char('y')),
            Some(Action::AcceptHunk)
        );
        assert_eq!(map.lookup(Pane::Diff, Key::Char('n')), None);
        assert_eq!(map.key_for(Action::Quit), "Ctrl-q");
    }

    #[test]
    fn bad_keymap_files_name_what_is_wrong() {
        let err = |text: &str| Keymap::from_toml_str(text).expect_err(text).to_string();
        assert!(err("[pane]\nquit = [\"q\"]").contains("unknown table [pane]"));
        let unknown = err("[diff]\nnext_hunks = [\"n\"]");
        assert!(unknown.contains("\"next_hunks\""), "{unknown}");
        assert!(unknown.contains("next_hunk,"), "{unknown}");
        assert!(err("[global]\nquit = [\"ctrl-\"]").contains("global.quit"));
        assert!(err("[global]\nquit = \"q\"").contains("list of keys"));
        let conflict = err("[plans]\nexecute = [\"j\"]");
        assert!(
            conflict.contains("global.down") && conflict.contains("plans.execute"),
            "{conflict}"
        );
        assert!(err("[global").contains("TOML"));
    }

    #[test]
    fn keys_parse_as_documented() {
        assert_eq!(parse_key("q"), Some(Key::Char('q')));
        assert_eq!(parse_key("Q"), Some(Key::Char('Q')));
        assert_eq!(parse_key("ctrl-C"), Some(Key::Ctrl('c')));
        assert_eq!(parse_key("Shift-Tab"), Some(Key::BackTab));
        assert_eq!(parse_key("pgdn"), Some(Key::PageDown));
        assert_eq!(parse_key("space"), Some(Key::Char(' ')));
        assert_eq!(parse_key("f5"), None);
    }
}
