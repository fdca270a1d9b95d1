//! Which key does what, in one table.
//!
//! The help overlay and the status-line hints are generated from [`BINDINGS`], so they can only
//! list keys that [`lookup`] actually resolves.

use crate::msg::Key;
use crate::panes::Pane;

/// What a key press means, before the focused pane interprets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Leave the TUI.
    Quit,
    /// Open the help overlay.
    Help,
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
    /// Collapse the selected tree node, or go to its parent.
    Collapse,
    /// Expand the selected tree node.
    Expand,
    /// Open the explanation of the selected decision.
    Explain,
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
    /// Approve the selected approval (after confirmation).
    Approve,
    /// Reject the selected approval with a reason.
    Reject,
    /// Choose one of the selected approval's options.
    Choose,
    /// Answer the selected approval with guidance.
    Guidance,
}

/// Where a binding applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Everywhere (unless an overlay is open).
    Global,
    /// Only while this pane is focused; takes precedence over global bindings.
    Pane(Pane),
}

/// One line of the keymap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Binding {
    /// Where the binding applies.
    pub scope: Scope,
    /// The keys that trigger it.
    pub keys: &'static [Key],
    /// What they do.
    pub action: Action,
    /// A few words for the help overlay and the status line.
    pub help: &'static str,
}

const fn bind(scope: Scope, keys: &'static [Key], action: Action, help: &'static str) -> Binding {
    Binding {
        scope,
        keys,
        action,
        help,
    }
}

use Scope::Global;

/// Every key binding, in the order the help overlay lists them.
pub const BINDINGS: &[Binding] = &[
    bind(
        Global,
        &[Key::Char('q'), Key::Ctrl('c')],
        Action::Quit,
        "quit",
    ),
    bind(Global, &[Key::Char('?')], Action::Help, "help"),
    bind(Global, &[Key::Tab], Action::FocusNext, "next pane"),
    bind(Global, &[Key::BackTab], Action::FocusPrev, "previous pane"),
    bind(
        Global,
        &[Key::Char('1')],
        Action::Focus(Pane::Plans),
        "focus plans",
    ),
    bind(
        Global,
        &[Key::Char('2')],
        Action::Focus(Pane::Tree),
        "focus decisions",
    ),
    bind(
        Global,
        &[Key::Char('3')],
        Action::Focus(Pane::Diff),
        "focus diff",
    ),
    bind(
        Global,
        &[Key::Char('4')],
        Action::Focus(Pane::Approvals),
        "focus approvals",
    ),
    bind(Global, &[Key::Char('z')], Action::ToggleZoom, "zoom pane"),
    bind(Global, &[Key::Char('k'), Key::Up], Action::Up, "up"),
    bind(Global, &[Key::Char('j'), Key::Down], Action::Down, "down"),
    bind(Global, &[Key::Home], Action::First, "first"),
    bind(Global, &[Key::End], Action::Last, "last"),
    bind(
        Scope::Pane(Pane::Tree),
        &[Key::Char('h'), Key::Left],
        Action::Collapse,
        "collapse",
    ),
    bind(
        Scope::Pane(Pane::Tree),
        &[Key::Char('l'), Key::Right],
        Action::Expand,
        "expand",
    ),
    bind(
        Scope::Pane(Pane::Tree),
        &[Key::Enter],
        Action::Explain,
        "explain",
    ),
    bind(
        Scope::Pane(Pane::Tree),
        &[Key::Char('s')],
        Action::ToggleSuperseded,
        "superseded",
    ),
    bind(
        Scope::Pane(Pane::Diff),
        &[Key::Char('n')],
        Action::NextHunk,
        "next hunk",
    ),
    bind(
        Scope::Pane(Pane::Diff),
        &[Key::Char('p')],
        Action::PrevHunk,
        "prev hunk",
    ),
    bind(
        Scope::Pane(Pane::Diff),
        &[Key::Char(']')],
        Action::NextFile,
        "next file",
    ),
    bind(
        Scope::Pane(Pane::Diff),
        &[Key::Char('[')],
        Action::PrevFile,
        "prev file",
    ),
    bind(
        Scope::Pane(Pane::Approvals),
        &[Key::Char('a')],
        Action::Approve,
        "approve",
    ),
    bind(
        Scope::Pane(Pane::Approvals),
        &[Key::Char('r')],
        Action::Reject,
        "reject",
    ),
    bind(
        Scope::Pane(Pane::Approvals),
        &[Key::Char('c')],
        Action::Choose,
        "choose",
    ),
    bind(
        Scope::Pane(Pane::Approvals),
        &[Key::Char('g')],
        Action::Guidance,
        "guidance",
    ),
];

/// Resolves a key for the focused pane: pane bindings first, then global ones.
pub fn lookup(focus: Pane, key: Key) -> Option<Action> {
    let find = |scope: Scope| {
        BINDINGS
            .iter()
            .find(|b| b.scope == scope && b.keys.contains(&key))
            .map(|b| b.action)
    };
    find(Scope::Pane(focus)).or_else(|| find(Global))
}

/// The bindings of one scope, for the help overlay and status hints.
pub fn bindings_for(scope: Scope) -> impl Iterator<Item = &'static Binding> {
    BINDINGS.iter().filter(move |b| b.scope == scope)
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
        for pane in Pane::ALL {
            assert_eq!(lookup(pane, Key::Char('q')), Some(Action::Quit));
            assert_eq!(lookup(pane, Key::Tab), Some(Action::FocusNext));
            assert_eq!(lookup(pane, Key::Down), Some(Action::Down));
        }
        assert_eq!(
            lookup(Pane::Approvals, Key::Char('a')),
            Some(Action::Approve)
        );
        assert_eq!(lookup(Pane::Plans, Key::Char('a')), None);
        assert_eq!(lookup(Pane::Diff, Key::Char('n')), Some(Action::NextHunk));
        assert_eq!(lookup(Pane::Tree, Key::Char('n')), None);
    }

    #[test]
    fn no_key_is_bound_twice_in_a_reachable_scope() {
        for pane in Pane::ALL {
            let mut seen = Vec::new();
            for binding in BINDINGS
                .iter()
                .filter(|b| b.scope == Global || b.scope == Scope::Pane(pane))
            {
                for key in binding.keys {
                    assert!(!seen.contains(key), "{key:?} bound twice for {pane:?}");
                    seen.push(*key);
                }
            }
        }
    }

    #[test]
    fn keys_label_joins_alternatives() {
        let quit = BINDINGS
            .iter()
            .find(|b| b.action == Action::Quit)
            .expect("quit bound");
        assert_eq!(keys_label(quit), "q/Ctrl-c");
    }
}
