//! Semantic themes.
//!
//! Widgets ask the theme for a [`Slot`] such as `diff.add` or `pane.border_focused`, never for a
//! raw colour. Themes are TOML files:
//!
//! ```toml
//! name = "mine"
//! extends = "dark"          # optional: slots not listed here come from this preset
//!
//! [slots]
//! "diff.add" = { fg = "#98c379" }
//! "pane.border_focused" = { fg = "cyan", modifiers = ["bold"] }
//! ```
//!
//! Colours are ratatui colour names (`red`, `lightblue`, `darkgray`, `reset`, ...), `#rrggbb`, or
//! a 256-colour index `0`-`255`. Modifiers are `bold`, `dim`, `italic`, `underlined`,
//! `reversed` and `crossed_out`. `syntax = "NAME"` picks the syntect theme that colours code in
//! the diff (`base16-ocean.dark`, `InspiredGitHub`, `Solarized (light)`, ... or `none`). The presets `dark` (default), `light` and `high-contrast` live in
//! `themes/` at the workspace root and are compiled in.

use std::ffi::OsStr;
use std::fmt;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};

macro_rules! slots {
    ($($(#[doc = $doc:literal])* $variant:ident => $name:literal,)*) => {
        /// A semantic style slot.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Slot {
            $($(#[doc = $doc])* $variant,)*
        }

        impl Slot {
            /// Every slot, in declaration order.
            pub const ALL: &'static [Slot] = &[$(Slot::$variant,)*];

            /// The slot's name in theme files, e.g. `diff.add`.
            pub fn name(self) -> &'static str {
                match self {
                    $(Slot::$variant => $name,)*
                }
            }
        }
    };
}

slots! {
    /// Border of an unfocused pane.
    PaneBorder => "pane.border",
    /// Border of the focused pane.
    PaneBorderFocused => "pane.border_focused",
    /// Pane titles.
    PaneTitle => "pane.title",
    /// The selected row of a list, tree or table.
    ListSelected => "list.selected",
    /// Column headers.
    ListHeader => "list.header",
    /// Phase `strategize`.
    PhaseStrategize => "phase.strategize",
    /// Phase `execute`.
    PhaseExecute => "phase.execute",
    /// Phase `apply`.
    PhaseApply => "phase.apply",
    /// Phase `applied`.
    PhaseApplied => "phase.applied",
    /// State `queued`.
    StateQueued => "state.queued",
    /// State `processing`.
    StateProcessing => "state.processing",
    /// State `errored`.
    StateErrored => "state.errored",
    /// State `complete`.
    StateComplete => "state.complete",
    /// State `cancelled`.
    StateCancelled => "state.cancelled",
    /// Added diff lines.
    DiffAdd => "diff.add",
    /// Removed diff lines.
    DiffRemove => "diff.remove",
    /// The words that changed within an added line (intraline highlight).
    DiffAddEmph => "diff.add_emph",
    /// The words that changed within a removed line (intraline highlight).
    DiffRemoveEmph => "diff.remove_emph",
    /// Context diff lines.
    DiffContext => "diff.context",
    /// Hunk headers.
    DiffHunk => "diff.hunk",
    /// File headers in the diff.
    DiffFile => "diff.file",
    /// The decision ids attached to a hunk.
    DiffDecision => "diff.decision",
    /// The type of a decision in the tree.
    DecisionType => "decision.type",
    /// The chosen option of a decision.
    DecisionChosen => "decision.chosen",
    /// A superseded decision.
    DecisionSuperseded => "decision.superseded",
    /// A child plan reference in the tree.
    DecisionChildPlan => "decision.child_plan",
    /// The kind label of an approval.
    ApprovalKind => "approval.kind",
    /// Good news in the status line.
    StatusOk => "status.ok",
    /// Warnings in the status line.
    StatusWarn => "status.warn",
    /// Errors in the status line and error popups.
    StatusError => "status.error",
    /// The status line's background.
    StatusBar => "status.bar",
    /// Key names in the status line and help.
    StatusKey => "status.key",
    /// Border of an overlay.
    OverlayBorder => "overlay.border",
    /// Title of an overlay.
    OverlayTitle => "overlay.title",
    /// Ordinary text.
    Text => "text",
    /// Secondary text.
    TextDim => "text.dim",
}

impl Slot {
    /// Looks a slot up by its name in theme files.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|s| s.name() == name)
    }
}

const DARK: &str = include_str!("../../themes/dark.toml");
const LIGHT: &str = include_str!("../../themes/light.toml");
const HIGH_CONTRAST: &str = include_str!("../../themes/high-contrast.toml");

const MODIFIERS: &[(&str, Modifier)] = &[
    ("bold", Modifier::BOLD),
    ("dim", Modifier::DIM),
    ("italic", Modifier::ITALIC),
    ("underlined", Modifier::UNDERLINED),
    ("reversed", Modifier::REVERSED),
    ("crossed_out", Modifier::CROSSED_OUT),
];

/// A complete set of styles, one per [`Slot`].
#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    name: String,
    styles: Vec<Style>,
    syntax: Option<String>,
}

impl Default for Theme {
    fn default() -> Self {
        Self::preset("dark").expect("the dark preset is compiled in")
    }
}

impl Theme {
    /// The names of the compiled-in presets; the first is the default.
    pub const PRESETS: &'static [&'static str] = &["dark", "light", "high-contrast"];

    /// A compiled-in preset by name, or `None` for an unknown name.
    ///
    /// # Panics
    ///
    /// Only if a compiled-in theme file is invalid, which the crate's tests rule out.
    pub fn preset(name: &str) -> Option<Self> {
        let text = match name {
            "dark" => DARK,
            "light" => LIGHT,
            "high-contrast" => HIGH_CONTRAST,
            _ => return None,
        };
        match Self::from_toml_str(text) {
            Ok(theme) => Some(theme),
            Err(err) => panic!("compiled-in theme {name:?} is invalid: {err}"),
        }
    }

    /// The monochrome theme used when `NO_COLOR` is set: no colours at all, only the bold,
    /// reversed and underlined modifiers.
    pub fn no_color() -> Self {
        let styles = Slot::ALL
            .iter()
            .map(|slot| {
                let modifier = match slot {
                    Slot::PaneBorderFocused
                    | Slot::PaneTitle
                    | Slot::DiffHunk
                    | Slot::DecisionType
                    | Slot::ApprovalKind
                    | Slot::StatusWarn
                    | Slot::StatusKey
                    | Slot::OverlayBorder
                    | Slot::OverlayTitle
                    | Slot::StateErrored => Modifier::BOLD,
                    Slot::ListSelected | Slot::StatusBar => Modifier::REVERSED,
                    Slot::ListHeader | Slot::DecisionChildPlan => Modifier::UNDERLINED,
                    Slot::DiffAddEmph | Slot::DiffRemoveEmph => {
                        Modifier::UNDERLINED | Modifier::BOLD
                    }
                    Slot::DiffFile | Slot::StatusError => Modifier::BOLD | Modifier::UNDERLINED,
                    _ => Modifier::empty(),
                };
                Style::new().add_modifier(modifier)
            })
            .collect();
        Self {
            name: "no-color".to_owned(),
            styles,
            syntax: None,
        }
    }

    /// Parses a theme file. Every slot must be given unless `extends` names a preset; unknown
    /// keys, unknown slots, bad colours and bad modifiers are errors that name the culprit.
    pub fn from_toml_str(text: &str) -> Result<Self, ThemeError> {
        let table: toml::Table = text
            .parse()
            .map_err(|err: toml::de::Error| ThemeError::Syntax(err.to_string()))?;
        let mut name = None;
        let mut base = None;
        let mut slots = None;
        let mut syntax = None;
        for (key, value) in &table {
            match key.as_str() {
                "name" => name = Some(expect_str(value, "name")?.to_owned()),
                "syntax" => syntax = Some(expect_str(value, "syntax")?.to_owned()),
                "extends" => {
                    let preset = expect_str(value, "extends")?;
                    base = Some(
                        Self::preset(preset).ok_or_else(|| ThemeError::UnknownPreset {
                            name: preset.to_owned(),
                        })?,
                    );
                }
                "slots" => {
                    slots = Some(value.as_table().ok_or_else(|| ThemeError::WrongType {
                        at: "slots".to_owned(),
                        expected: "a table",
                    })?);
                }
                other => {
                    return Err(ThemeError::UnknownKey {
                        key: other.to_owned(),
                    });
                }
            }
        }

        let mut styles: Vec<Option<Style>> = vec![None; Slot::ALL.len()];
        for (slot_name, value) in slots.into_iter().flatten() {
            let slot = Slot::from_name(slot_name).ok_or_else(|| ThemeError::UnknownSlot {
                slot: slot_name.clone(),
            })?;
            styles[slot as usize] = Some(parse_style(slot, value)?);
        }

        let missing: Vec<&'static str> = Slot::ALL
            .iter()
            .filter(|slot| styles[**slot as usize].is_none())
            .map(|slot| slot.name())
            .collect();
        let syntax = match (syntax, &base) {
            (Some(name), _) if name == "none" => None,
            (Some(name), _) => Some(name),
            (None, Some(base)) => base.syntax.clone(),
            (None, None) => None,
        };
        let styles = match base {
            Some(base) => styles
                .into_iter()
                .zip(base.styles)
                .map(|(own, inherited)| own.unwrap_or(inherited))
                .collect(),
            None if missing.is_empty() => styles.into_iter().flatten().collect(),
            None => return Err(ThemeError::MissingSlots { slots: missing }),
        };
        Ok(Self {
            name: name.unwrap_or_else(|| "custom".to_owned()),
            styles,
            syntax,
        })
    }

    /// The theme's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The syntect theme that colours code in the diff (`syntax = "..."` in theme files;
    /// `None`, or `"none"`, for no syntax colours).
    pub fn syntax(&self) -> Option<&str> {
        self.syntax.as_deref()
    }

    /// The style of a slot.
    pub fn style(&self, slot: Slot) -> Style {
        self.styles[slot as usize]
    }

    /// Returns [`Theme::no_color`] when `no_color` is true and `self` otherwise; pass whether the
    /// `NO_COLOR` variable is set (see [`no_color_requested`]).
    #[must_use]
    pub fn unless_no_color(self, no_color: bool) -> Self {
        if no_color { Self::no_color() } else { self }
    }
}

/// Whether a `NO_COLOR` value asks for no colour: set and not empty (<https://no-color.org>).
pub fn no_color_requested(value: Option<&OsStr>) -> bool {
    value.is_some_and(|v| !v.is_empty())
}

fn expect_str<'a>(value: &'a toml::Value, at: &str) -> Result<&'a str, ThemeError> {
    value.as_str().ok_or_else(|| ThemeError::WrongType {
        at: at.to_owned(),
        expected: "a string",
    })
}

fn parse_style(slot: Slot, value: &toml::Value) -> Result<Style, ThemeError> {
    let table = value.as_table().ok_or_else(|| ThemeError::WrongType {
        at: slot.name().to_owned(),
        expected: "a table such as { fg = \"red\", modifiers = [\"bold\"] }",
    })?;
    let mut style = Style::new();
    for (field, value) in table {
        match field.as_str() {
            "fg" => style = style.fg(parse_colour(slot, "fg", value)?),
            "bg" => style = style.bg(parse_colour(slot, "bg", value)?),
            "modifiers" => {
                let list = value.as_array().ok_or_else(|| ThemeError::WrongType {
                    at: format!("{}.modifiers", slot.name()),
                    expected: "a list of strings",
                })?;
                for item in list {
                    let name = expect_str(item, &format!("{}.modifiers", slot.name()))?;
                    let modifier = MODIFIERS
                        .iter()
                        .find(|(n, _)| *n == name)
                        .map(|(_, m)| *m)
                        .ok_or_else(|| ThemeError::BadModifier {
                            slot: slot.name(),
                            value: name.to_owned(),
                        })?;
                    style = style.add_modifier(modifier);
                }
            }
            other => {
                return Err(ThemeError::UnknownField {
                    slot: slot.name(),
                    field: other.to_owned(),
                });
            }
        }
    }
    Ok(style)
}

fn parse_colour(slot: Slot, field: &'static str, value: &toml::Value) -> Result<Color, ThemeError> {
    let text = expect_str(value, &format!("{}.{field}", slot.name()))?;
    Color::from_str(text).map_err(|_| ThemeError::BadColour {
        slot: slot.name(),
        field,
        value: text.to_owned(),
    })
}

/// Why a theme file was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ThemeError {
    /// The file is not valid TOML.
    Syntax(String),
    /// A top-level key other than `name`, `extends` and `slots`.
    UnknownKey {
        /// The key.
        key: String,
    },
    /// `extends` names no preset.
    UnknownPreset {
        /// The name given.
        name: String,
    },
    /// A slot name that does not exist.
    UnknownSlot {
        /// The name given.
        slot: String,
    },
    /// A key inside a slot other than `fg`, `bg` and `modifiers`.
    UnknownField {
        /// The slot.
        slot: &'static str,
        /// The key given.
        field: String,
    },
    /// A colour that is neither a name, `#rrggbb`, nor an index.
    BadColour {
        /// The slot.
        slot: &'static str,
        /// `fg` or `bg`.
        field: &'static str,
        /// The value given.
        value: String,
    },
    /// A modifier name that does not exist.
    BadModifier {
        /// The slot.
        slot: &'static str,
        /// The value given.
        value: String,
    },
    /// A value of the wrong type.
    WrongType {
        /// Where, as a dotted path.
        at: String,
        /// What was expected.
        expected: &'static str,
    },
    /// Slots left out of a theme that does not `extends` a preset.
    MissingSlots {
        /// The names of the missing slots.
        slots: Vec<&'static str>,
    },
}

impl fmt::Display for ThemeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(err) => write!(f, "theme file is not valid TOML: {err}"),
            Self::UnknownKey { key } => write!(
                f,
                "unknown theme key {key:?}: a theme has only `name`, `extends` and `[slots]`"
            ),
            Self::UnknownPreset { name } => write!(
                f,
                "`extends = {name:?}` names no preset; presets are: {}",
                Theme::PRESETS.join(", ")
            ),
            Self::UnknownSlot { slot } => {
                write!(f, "unknown theme slot {slot:?}")?;
                let group = slot.split('.').next().unwrap_or_default();
                let related: Vec<&str> = Slot::ALL
                    .iter()
                    .map(|s| s.name())
                    .filter(|n| n.split('.').next() == Some(group))
                    .collect();
                if related.is_empty() {
                    write!(f, "; see themes/dark.toml for every slot")
                } else {
                    write!(f, "; did you mean one of: {}", related.join(", "))
                }
            }
            Self::UnknownField { slot, field } => write!(
                f,
                "theme slot {slot:?}: unknown key {field:?} (use fg, bg and modifiers)"
            ),
            Self::BadColour { slot, field, value } => write!(
                f,
                "theme slot {slot:?}: invalid {field} colour {value:?} \
                 (use a name such as \"green\", \"#rrggbb\", or an index 0-255)"
            ),
            Self::BadModifier { slot, value } => write!(
                f,
                "theme slot {slot:?}: unknown modifier {value:?} (use {})",
                MODIFIERS
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Self::WrongType { at, expected } => write!(f, "theme key {at:?} must be {expected}"),
            Self::MissingSlots { slots } => write!(
                f,
                "theme is missing slots {} (list them, or add `extends = \"dark\"`)",
                slots.join(", ")
            ),
        }
    }
}

impl std::error::Error for ThemeError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn preset_text(name: &str) -> &'static str {
        match name {
            "dark" => DARK,
            "light" => LIGHT,
            "high-contrast" => HIGH_CONTRAST,
            other => panic!("no preset {other}"),
        }
    }

    #[test]
    fn every_preset_parses_and_lists_every_slot_itself() {
        for name in Theme::PRESETS {
            let text = preset_text(name);
            let table: toml::Table = text.parse().expect("valid TOML");
            assert!(!table.contains_key("extends"), "{name} must not inherit");
            let slots = table["slots"].as_table().expect("slots table");
            for slot in Slot::ALL {
                assert!(
                    slots.contains_key(slot.name()),
                    "{name} lacks {}",
                    slot.name()
                );
            }
            let theme = Theme::preset(name).expect("preset exists");
            assert_eq!(theme.name(), *name);
        }
    }

    #[test]
    fn default_is_dark_and_unknown_presets_are_none() {
        assert_eq!(Theme::default(), Theme::preset("dark").expect("dark"));
        assert_eq!(Theme::preset("solarized"), None);
    }

    #[test]
    fn presets_differ_where_it_matters() {
        let dark = Theme::preset("dark").expect("dark");
        let light = Theme::preset("light").expect("light");
        let contrast = Theme::preset("high-contrast").expect("high-contrast");
        assert_ne!(dark, light);
        assert_ne!(dark, contrast);
        for theme in [&dark, &light, &contrast] {
            assert_ne!(
                theme.style(Slot::PaneBorder),
                theme.style(Slot::PaneBorderFocused)
            );
            assert_ne!(theme.style(Slot::DiffAdd), theme.style(Slot::DiffRemove));
            assert_ne!(
                theme.style(Slot::StateErrored),
                theme.style(Slot::StateComplete)
            );
        }
    }

    #[test]
    fn slot_names_are_unique_and_round_trip() {
        for slot in Slot::ALL {
            assert_eq!(Slot::from_name(slot.name()), Some(*slot));
        }
        assert_eq!(Slot::from_name("diff.added"), None);
    }

    #[test]
    fn parses_colours_and_modifiers() {
        let theme = Theme::from_toml_str(
            r##"
            name = "mine"
            extends = "dark"
            [slots]
            "diff.add" = { fg = "#00ff00", bg = "236", modifiers = ["bold", "italic"] }
            "text" = { fg = "light blue" }
            "##,
        )
        .expect("valid theme");
        assert_eq!(theme.name(), "mine");
        assert_eq!(
            theme.style(Slot::DiffAdd),
            Style::new()
                .fg(Color::Rgb(0, 255, 0))
                .bg(Color::Indexed(236))
                .add_modifier(Modifier::BOLD | Modifier::ITALIC)
        );
        assert_eq!(theme.style(Slot::Text), Style::new().fg(Color::LightBlue));
        let dark = Theme::preset("dark").expect("dark");
        assert_eq!(theme.style(Slot::DiffRemove), dark.style(Slot::DiffRemove));
    }

    fn error_of(text: &str) -> String {
        Theme::from_toml_str(text)
            .expect_err("must be refused")
            .to_string()
    }

    #[test]
    fn bad_colour_names_the_slot_field_and_value() {
        let err = error_of("extends = \"dark\"\n[slots]\n\"diff.add\" = { fg = \"grean\" }\n");
        assert!(err.contains("\"diff.add\""), "{err}");
        assert!(err.contains("fg colour \"grean\""), "{err}");
        let err = error_of("extends = \"dark\"\n[slots]\n\"text\" = { bg = \"#12345\" }\n");
        assert!(
            err.contains("\"text\": invalid bg colour \"#12345\""),
            "{err}"
        );
    }

    #[test]
    fn unknown_slot_is_named_with_its_siblings() {
        let err = error_of("extends = \"dark\"\n[slots]\n\"diff.added\" = { fg = \"green\" }\n");
        assert!(err.contains("unknown theme slot \"diff.added\""), "{err}");
        assert!(err.contains("diff.add,"), "{err}");
        let err = error_of("extends = \"dark\"\n[slots]\n\"bogus\" = { fg = \"green\" }\n");
        assert!(
            err.contains("\"bogus\"") && err.contains("themes/dark.toml"),
            "{err}"
        );
    }

    #[test]
    fn other_mistakes_are_named() {
        let err =
            error_of("extends = \"dark\"\n[slots]\n\"text\" = { fg = \"red\", blink = true }\n");
        assert!(err.contains("\"text\": unknown key \"blink\""), "{err}");
        let err = error_of("extends = \"dark\"\n[slots]\n\"text\" = { modifiers = [\"blink\"] }\n");
        assert!(err.contains("unknown modifier \"blink\""), "{err}");
        let err = error_of("extends = \"dark\"\n[slots]\n\"text\" = \"red\"\n");
        assert!(err.contains("\"text\" must be a table"), "{err}");
        let err = error_of("extends = \"solarized\"\n");
        assert!(
            err.contains("`extends = \"solarized\"` names no preset"),
            "{err}"
        );
        let err = error_of("colour = \"red\"\n");
        assert!(err.contains("unknown theme key \"colour\""), "{err}");
        let err = error_of("[slots\n");
        assert!(err.starts_with("theme file is not valid TOML"), "{err}");
    }

    #[test]
    fn a_theme_without_extends_must_list_every_slot() {
        let err = error_of("[slots]\n\"text\" = { fg = \"red\" }\n");
        assert!(
            err.contains("missing slots pane.border, pane.border_focused"),
            "{err}"
        );
        assert!(!err.contains(" text,"), "{err}");
    }

    #[test]
    fn no_color_uses_only_bold_reversed_and_underlined() {
        let theme = Theme::no_color();
        let allowed = Modifier::BOLD | Modifier::REVERSED | Modifier::UNDERLINED;
        for slot in Slot::ALL {
            let style = theme.style(*slot);
            assert_eq!(
                (style.fg, style.bg),
                (None, None),
                "{} has a colour",
                slot.name()
            );
            assert!(
                allowed.contains(style.add_modifier),
                "{} modifier",
                slot.name()
            );
        }
        assert_ne!(
            theme.style(Slot::PaneBorder),
            theme.style(Slot::PaneBorderFocused)
        );
        assert_ne!(theme.style(Slot::Text), theme.style(Slot::ListSelected));
    }

    #[test]
    fn no_color_env_follows_the_convention() {
        assert!(!no_color_requested(None));
        assert!(!no_color_requested(Some(OsStr::new(""))));
        assert!(no_color_requested(Some(OsStr::new("1"))));
        let dark = Theme::default();
        assert_eq!(dark.clone().unless_no_color(false), dark);
        assert_eq!(dark.unless_no_color(true), Theme::no_color());
    }
}
