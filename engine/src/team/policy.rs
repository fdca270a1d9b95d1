//! An organization's policy (spec section 22, "Approval Gates by Phase"; spec 21, "permission
//! boundaries"): rules the server enforces on every plan of the organization's namespace,
//! which no client setting can widen.
//!
//! A policy is a YAML mapping (`agents server policy set ORG --config policy.yaml`); every key
//! is optional and an absent key sets no rule. Unknown keys are refused, naming the key. The
//! check functions here read nothing: the engine works out what a call asks for and asks
//! them, and each refusal names the policy key that refused.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Role;
use crate::domain::name::{BUILTIN_PROFILES, QualifiedName};

/// Why a policy file is not a policy: the file, the line when known, the key and what is
/// accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {}{message}", file.display(), line.map(|l| format!(":{l}")).unwrap_or_default(), if field.is_empty() { String::new() } else { format!("field `{field}`: ") })]
pub struct PolicyError {
    /// The file, as named.
    pub file: PathBuf,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// The key (`apply.min_approvals`); empty for the document itself.
    pub field: String,
    /// What is wrong, and what is accepted.
    pub message: String,
}

impl PolicyError {
    /// The key the error names (empty for the document itself).
    pub fn field(&self) -> &str {
        &self.field
    }
}

/// A serde message in the words of a policy file's writer.
fn plain(message: &str) -> String {
    // The parser's own position (`at line 2 column 3`) is given as the error's line.
    let message = match message.find(" at line ") {
        Some(i) => &message[..i],
        None => message,
    };
    let mut m = message
        .replace("expected u32", "expected a whole number >= 0")
        .replace("expected f64", "expected a number")
        .replace("expected a boolean", "expected true or false")
        .replace("invalid type: sequence", "found a list")
        .replace("invalid type: map", "found a mapping")
        .replace("invalid type: ", "found ")
        .replace("invalid value: ", "found ");
    if let Some(i) = m.find("expected struct ") {
        let end = m[i + 16..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(m.len(), |e| i + 16 + e);
        m.replace_range(i..end, "expected a mapping");
    }
    if m.contains("unknown field") || m.contains("unknown variant") {
        m.push_str("; docs/server.md, \"Organization policies\", lists every key and value");
    }
    m
}

/// Why a policy refused a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PolicyDenial {
    /// The organization whose policy refused.
    pub org: String,
    /// The policy's key (`network`, `profiles.allowed`, `apply.min_approvals`, ...).
    pub key: String,
    /// What was refused and what the policy allows.
    pub message: String,
}

impl std::fmt::Display for PolicyDenial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the policy of `{}` refuses this ({}): {}",
            self.org, self.key, self.message
        )
    }
}

/// The policy keys, as written in a policy file and named by a [`PolicyDenial`].
pub mod keys {
    /// `apply.min_approvals`.
    pub const MIN_APPROVALS: &str = "apply.min_approvals";
    /// `apply.require_all_hunks_marked`.
    pub const REQUIRE_ALL_HUNKS_MARKED: &str = "apply.require_all_hunks_marked";
    /// `network`.
    pub const NETWORK: &str = "network";
    /// `profiles.allowed`.
    pub const PROFILES_ALLOWED: &str = "profiles.allowed";
    /// `budgets.max_cost_usd_per_plan`.
    pub const MAX_COST_USD_PER_PLAN: &str = "budgets.max_cost_usd_per_plan";
    /// `skills.require_approval`.
    pub const SKILLS_REQUIRE_APPROVAL: &str = "skills.require_approval";
    /// `skills.restricted`.
    pub const SKILLS_RESTRICTED: &str = "skills.restricted";
    /// `resources.restricted`.
    pub const RESOURCES_RESTRICTED: &str = "resources.restricted";
}

/// An organization's policy, as parsed from its YAML.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OrgPolicy {
    /// Rules on Apply.
    #[serde(default)]
    pub apply: ApplyPolicy,
    /// Whether a plan's sandbox may ask for the host network.
    #[serde(default)]
    pub network: NetworkPolicy,
    /// Which automation profiles the organization's plans may run under.
    #[serde(default)]
    pub profiles: ProfilesPolicy,
    /// What a plan may spend.
    #[serde(default)]
    pub budgets: BudgetsPolicy,
    /// Skills that need an approval per call, or a role.
    #[serde(default)]
    pub skills: SkillsPolicy,
    /// Resources that need a role.
    #[serde(default)]
    pub resources: ResourcesPolicy,
}

/// `apply:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyPolicy {
    /// Approvals of the Apply by distinct humans besides the plan's creator (0: no rule).
    #[serde(default, alias = "min-approvals")]
    pub min_approvals: u32,
    /// Apply only when every hunk of the review is marked.
    #[serde(default, alias = "require-all-hunks-marked")]
    pub require_all_hunks_marked: bool,
}

/// `network:`: whether a plan's action may ask for the host network (`sandbox: network:
/// true`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum NetworkPolicy {
    /// Refused.
    Never,
    /// Needs an approval (no approval for it exists yet: refused, saying so).
    Ask,
    /// Allowed (no rule).
    #[default]
    Allow,
}

impl NetworkPolicy {
    /// As written.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkPolicy::Never => "never",
            NetworkPolicy::Ask => "ask",
            NetworkPolicy::Allow => "allow",
        }
    }
}

/// `profiles:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProfilesPolicy {
    /// The automation profiles (built-in or custom, by name) plans may use; absent: any.
    #[serde(default)]
    pub allowed: Option<Vec<String>>,
}

/// `budgets:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BudgetsPolicy {
    /// The most a plan's `max-cost-usd` may be, in US dollars; also its budget when none is
    /// given.
    #[serde(default, alias = "max-cost-usd-per-plan")]
    pub max_cost_usd_per_plan: Option<f64>,
}

/// `skills:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillsPolicy {
    /// Skills each of whose tool calls needs a human's approval, under every profile.
    #[serde(default, alias = "require-approval")]
    pub require_approval: Vec<String>,
    /// Skills a plan may use only when its user holds at least this role.
    #[serde(default)]
    pub restricted: BTreeMap<String, Role>,
}

/// `resources:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResourcesPolicy {
    /// Resources that only this role or above may register, link or change.
    #[serde(default)]
    pub restricted: BTreeMap<String, Role>,
}

/// What kind of item a restriction names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RestrictedKind {
    /// `resources.restricted`.
    Resource,
    /// `skills.restricted`.
    Skill,
}

/// Whether the policy's entry `entry` names the item `name`: a qualified entry (`acme/db`)
/// names exactly that item; a bare one (`db`) the item of that name in any namespace.
pub fn names_item(entry: &str, name: &str) -> bool {
    if entry.contains('/') {
        entry == name
    } else {
        name.rsplit('/').next() == Some(entry)
    }
}

impl OrgPolicy {
    /// Parses a policy from YAML `text`, the content of `file` (named in errors).
    ///
    /// # Errors
    /// [`YamlError`] naming the file, the line, the key and what is accepted.
    pub fn parse(file: &Path, text: &str) -> Result<Self, PolicyError> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let error = |line: Option<usize>, field: String, message: String| PolicyError {
            file: file.to_path_buf(),
            line,
            field,
            message,
        };
        if text.trim().is_empty() {
            return Err(error(
                Some(1),
                String::new(),
                "the file is empty; expected a YAML mapping of policy keys".to_string(),
            ));
        }
        // Syntax first, so that a broken document is reported as such.
        if let Err(e) = serde_yaml::from_str::<serde_yaml::Value>(text) {
            return Err(error(
                e.location().map(|l| l.line()),
                String::new(),
                format!("YAML syntax error: {}", plain(&e.to_string())),
            ));
        }
        let de = serde_yaml::Deserializer::from_str(text);
        let policy: OrgPolicy = serde_path_to_error::deserialize(de).map_err(|e| {
            let field = e.path().to_string();
            let inner = e.into_inner();
            error(
                inner.location().map(|l| l.line()),
                if field == "." || field == "?" {
                    String::new()
                } else {
                    field
                },
                plain(&inner.to_string()),
            )
        })?;
        policy.check(file, text)?;
        Ok(policy)
    }

    /// The rules a well-formed document may still break.
    fn check(&self, file: &Path, text: &str) -> Result<(), PolicyError> {
        let rule = |field: &str, message: String| PolicyError {
            file: file.to_path_buf(),
            line: line_of(text, field.rsplit('.').next().unwrap_or(field)),
            field: field.to_string(),
            message,
        };
        if let Some(cap) = self.budgets.max_cost_usd_per_plan
            && (!cap.is_finite() || cap < 0.0)
        {
            return Err(rule(
                keys::MAX_COST_USD_PER_PLAN,
                format!("{cap} is not a number of US dollars >= 0; write e.g. `max_cost_usd_per_plan: 5.00`"),
            ));
        }
        if let Some(allowed) = &self.profiles.allowed {
            if allowed.is_empty() {
                return Err(rule(
                    keys::PROFILES_ALLOWED,
                    "an empty list would refuse every plan; name at least one profile (e.g. `[supervised]`), or remove the key to allow any".to_string(),
                ));
            }
            for name in allowed {
                QualifiedName::resolve_user_input(name, &BUILTIN_PROFILES).map_err(|e| {
                    rule(
                        keys::PROFILES_ALLOWED,
                        format!("{e}; name a built-in profile ({}) or a custom one (`ns/name`)", BUILTIN_PROFILES.join(", ")),
                    )
                })?;
            }
        }
        for (key, list) in [(keys::SKILLS_REQUIRE_APPROVAL, &self.skills.require_approval)] {
            if let Some(empty) = list.iter().find(|s| s.trim().is_empty()) {
                return Err(rule(key, format!("`{empty}` is not a skill name; list skills by name")));
            }
        }
        for (key, map) in [
            (keys::SKILLS_RESTRICTED, &self.skills.restricted),
            (keys::RESOURCES_RESTRICTED, &self.resources.restricted),
        ] {
            if let Some(empty) = map.keys().find(|s| s.trim().is_empty()) {
                return Err(rule(key, format!("`{empty}` is not an item name; write `NAME: maintainer` (or `owner`, `member`, `viewer`)")));
            }
        }
        Ok(())
    }

    /// Whether any rule is set.
    pub fn is_empty(&self) -> bool {
        *self == OrgPolicy::default()
    }

    /// The least role a restriction on the item `name` of `kind` asks for; `None` when the
    /// policy restricts it not.
    pub fn restriction_of(&self, kind: RestrictedKind, name: &str) -> Option<Role> {
        let map = match kind {
            RestrictedKind::Resource => &self.resources.restricted,
            RestrictedKind::Skill => &self.skills.restricted,
        };
        map.iter()
            .filter(|(entry, _)| names_item(entry, name))
            .map(|(_, role)| *role)
            .max()
    }

    /// Whether each tool call of the skill `name` needs a human's approval.
    pub fn skill_needs_approval(&self, name: &str) -> bool {
        self.skills
            .require_approval
            .iter()
            .any(|entry| names_item(entry, name))
    }

    /// Refuses a plan whose sandbox asks for the host network when `network` is `never` or
    /// `ask` (no approval of a sandbox's network exists yet, so `ask` refuses too, saying so).
    ///
    /// # Errors
    /// [`PolicyDenial`] naming `network`.
    pub fn check_network(&self, org: &str, asks_network: bool) -> Result<(), PolicyDenial> {
        if !asks_network {
            return Ok(());
        }
        let message = match self.network {
            NetworkPolicy::Allow => return Ok(()),
            NetworkPolicy::Never => {
                "the action's sandbox asks for the host network (`sandbox: network: true`) and the policy says `network: never`".to_string()
            }
            NetworkPolicy::Ask => {
                "the action's sandbox asks for the host network (`sandbox: network: true`) and the policy says `network: ask`, \
                 which needs an approval of the sandbox's network; no such approval exists yet, so the plan is refused \
                 (an owner may set `network: allow`, or use an action without `network: true`)"
                    .to_string()
            }
        };
        Err(PolicyDenial {
            org: org.to_string(),
            key: keys::NETWORK.to_string(),
            message,
        })
    }

    /// Refuses the automation profile `profile` when `profiles.allowed` does not list it.
    ///
    /// # Errors
    /// [`PolicyDenial`] naming `profiles.allowed` and listing what it allows.
    pub fn check_profile(&self, org: &str, profile: &str) -> Result<(), PolicyDenial> {
        let Some(allowed) = &self.profiles.allowed else {
            return Ok(());
        };
        // A bare custom name is read as `plan use` reads it (`careful` is `local/careful`).
        let names_it = |a: &String| {
            a == profile
                || QualifiedName::resolve_user_input(a, &BUILTIN_PROFILES)
                    .is_ok_and(|q| q.to_string() == profile)
        };
        if allowed.iter().any(names_it) {
            return Ok(());
        }
        Err(PolicyDenial {
            org: org.to_string(),
            key: keys::PROFILES_ALLOWED.to_string(),
            message: format!(
                "automation profile `{profile}` is not allowed; allowed: {}",
                allowed.join(", ")
            ),
        })
    }

    /// The `max-cost-usd` a plan gets when `requested` was asked for: the request when the
    /// policy has no cap or the request is within it, the cap when nothing was requested.
    ///
    /// # Errors
    /// [`PolicyDenial`] naming `budgets.max_cost_usd_per_plan` when the request is larger
    /// than the cap.
    pub fn check_budget(&self, org: &str, requested: Option<f64>) -> Result<Option<f64>, PolicyDenial> {
        let Some(cap) = self.budgets.max_cost_usd_per_plan else {
            return Ok(requested);
        };
        match requested {
            None => Ok(Some(cap)),
            Some(r) if r <= cap => Ok(Some(r)),
            Some(r) => Err(PolicyDenial {
                org: org.to_string(),
                key: keys::MAX_COST_USD_PER_PLAN.to_string(),
                message: format!(
                    "a budget of ${r:.2} is more than the ${cap:.2} a plan may have; give --max-cost-usd {cap} or less"
                ),
            }),
        }
    }
}

/// The 1-based line of the first `key:` in `text`, for a rule error.
fn line_of(text: &str, key: &str) -> Option<usize> {
    text.lines()
        .position(|l| {
            let t = l.trim_start();
            t.strip_prefix(key).is_some_and(|rest| rest.trim_start().starts_with(':'))
        })
        .map(|i| i + 1)
}

/// The policies that bind one plan or item: each organization's whose namespace it touches
/// (a plan on projects of two organizations is bound by both). Every check asks each policy,
/// so the strictest wins.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Policies {
    /// Each organization with its policy, by organization name.
    pub each: Vec<(String, OrgPolicy)>,
}

impl Policies {
    /// Whether no organization's policy applies.
    pub fn is_empty(&self) -> bool {
        self.each.is_empty()
    }

    /// [`OrgPolicy::check_network`] of each policy.
    ///
    /// # Errors
    /// The first refusal.
    pub fn check_network(&self, asks_network: bool) -> Result<(), PolicyDenial> {
        self.each
            .iter()
            .try_for_each(|(org, p)| p.check_network(org, asks_network))
    }

    /// [`OrgPolicy::check_profile`] of each policy.
    ///
    /// # Errors
    /// The first refusal.
    pub fn check_profile(&self, profile: &str) -> Result<(), PolicyDenial> {
        self.each
            .iter()
            .try_for_each(|(org, p)| p.check_profile(org, profile))
    }

    /// [`OrgPolicy::check_budget`] of each policy: the smallest cap applies.
    ///
    /// # Errors
    /// The first refusal.
    pub fn check_budget(&self, requested: Option<f64>) -> Result<Option<f64>, PolicyDenial> {
        let mut budget = requested;
        for (org, p) in &self.each {
            let capped = p.check_budget(org, requested)?;
            budget = match (budget, capped) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Ok(budget)
    }

    /// The smallest `budgets.max_cost_usd_per_plan` of any policy; `None`: no cap.
    pub fn cost_cap(&self) -> Option<f64> {
        self.each
            .iter()
            .filter_map(|(_, p)| p.budgets.max_cost_usd_per_plan)
            .reduce(f64::min)
    }

    /// The most `apply.min_approvals` of any policy (0: no rule).
    pub fn min_approvals(&self) -> u32 {
        self.each
            .iter()
            .map(|(_, p)| p.apply.min_approvals)
            .max()
            .unwrap_or(0)
    }

    /// The organization whose `apply.min_approvals` is the largest, with it; `None` when no
    /// policy asks for approvals (for the Apply's "N of M" message).
    pub fn strictest_min_approvals(&self) -> Option<(&str, u32)> {
        self.each
            .iter()
            .map(|(org, p)| (org.as_str(), p.apply.min_approvals))
            .filter(|(_, n)| *n > 0)
            .max_by_key(|(_, n)| *n)
    }

    /// Whether any policy sets `apply.require_all_hunks_marked`.
    pub fn require_all_hunks_marked(&self) -> bool {
        self.each.iter().any(|(_, p)| p.apply.require_all_hunks_marked)
    }

    /// The first organization whose policy sets `apply.require_all_hunks_marked` (for the
    /// denial naming it); `None` when no policy does.
    pub fn org_requiring_all_hunks_marked(&self) -> Option<&str> {
        self.each
            .iter()
            .find(|(_, p)| p.apply.require_all_hunks_marked)
            .map(|(org, _)| org.as_str())
    }

    /// Whether any policy lists the skill `name` under `skills.require_approval`.
    pub fn skill_needs_approval(&self, name: &str) -> bool {
        self.each.iter().any(|(_, p)| p.skill_needs_approval(name))
    }

    /// The skills of every policy's `skills.require_approval`, each once.
    pub fn skills_requiring_approval(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .each
            .iter()
            .flat_map(|(_, p)| p.skills.require_approval.iter().cloned())
            .collect();
        all.sort();
        all.dedup();
        all
    }

    /// The highest role any policy's restriction on the item asks for.
    pub fn restriction_of(&self, kind: RestrictedKind, name: &str) -> Option<Role> {
        self.each
            .iter()
            .filter_map(|(_, p)| p.restriction_of(kind, name))
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FULL: &str = "\
apply:
  min_approvals: 2
  require_all_hunks_marked: true
network: never
profiles:
  allowed: [supervised, acme/careful]
budgets:
  max_cost_usd_per_plan: 5.5
skills:
  require_approval: [deploy]
  restricted:
    release: owner
resources:
  restricted:
    prod-db: maintainer
    acme/keys: owner
";

    fn parse(text: &str) -> Result<OrgPolicy, PolicyError> {
        OrgPolicy::parse(Path::new("policy.yaml"), text)
    }

    #[test]
    fn every_key_is_read() {
        let p = parse(FULL).unwrap();
        assert_eq!(p.apply.min_approvals, 2);
        assert!(p.apply.require_all_hunks_marked);
        assert_eq!(p.network, NetworkPolicy::Never);
        assert_eq!(
            p.profiles.allowed,
            Some(vec!["supervised".to_string(), "acme/careful".to_string()])
        );
        assert_eq!(p.budgets.max_cost_usd_per_plan, Some(5.5));
        assert_eq!(p.skills.require_approval, vec!["deploy".to_string()]);
        assert_eq!(p.skills.restricted.get("release"), Some(&Role::Owner));
        assert_eq!(p.resources.restricted.get("prod-db"), Some(&Role::Maintainer));
    }

    #[test]
    fn absent_keys_set_no_rule() {
        let p = parse("network: allow\n").unwrap();
        assert!(p.is_empty());
        assert_eq!(p.apply.min_approvals, 0);
        assert_eq!(p.profiles.allowed, None);
        assert!(p.check_network("acme", true).is_ok());
        assert!(p.check_profile("acme", "full-auto").is_ok());
        assert_eq!(p.check_budget("acme", None).unwrap(), None);
    }

    #[test]
    fn an_unknown_key_is_refused_naming_the_file_and_the_key() {
        for (text, field, unknown) in [
            ("netwrok: never\n", "netwrok", "netwrok"),
            ("apply:\n  min_aprovals: 2\n", "apply.min_aprovals", "min_aprovals"),
            ("skills:\n  restricted:\n    x: admin\n", "skills.restricted.x", "admin"),
        ] {
            let err = parse(text).unwrap_err();
            let shown = err.to_string();
            assert!(shown.starts_with("policy.yaml:"), "{shown}");
            assert!(shown.contains(unknown), "{shown}");
            assert_eq!(err.field(), field, "{shown}");
            assert!(shown.contains("docs/server.md"), "{shown}");
        }
    }

    #[test]
    fn a_wrong_value_names_its_key_and_the_fix() {
        let err = parse("network: sometimes\n").unwrap_err().to_string();
        assert!(err.contains("network") && err.contains("`never`"), "{err}");
        let err = parse("apply:\n  min_approvals: -1\n").unwrap_err().to_string();
        assert!(err.contains("apply.min_approvals"), "{err}");
        let err = parse("budgets:\n  max_cost_usd_per_plan: -3\n").unwrap_err();
        assert_eq!(err.field(), keys::MAX_COST_USD_PER_PLAN);
        assert!(err.to_string().contains("policy.yaml:2"), "{err}");
        let err = parse("profiles:\n  allowed: []\n").unwrap_err();
        assert_eq!(err.field(), keys::PROFILES_ALLOWED);
        assert!(err.to_string().contains("at least one profile"), "{err}");
    }

    #[test]
    fn network_never_and_ask_refuse_a_sandbox_that_asks_for_network() {
        let mut p = parse(FULL).unwrap();
        assert!(p.check_network("acme", false).is_ok());
        let denial = p.check_network("acme", true).unwrap_err();
        assert_eq!(denial.key, "network");
        assert_eq!(denial.org, "acme");
        assert!(denial.to_string().contains("network: never"), "{denial}");
        p.network = NetworkPolicy::Ask;
        let denial = p.check_network("acme", true).unwrap_err();
        assert!(denial.message.contains("no such approval exists yet"), "{denial}");
        p.network = NetworkPolicy::Allow;
        assert!(p.check_network("acme", true).is_ok());
    }

    #[test]
    fn a_profile_outside_the_allowed_list_is_refused_listing_the_allowed() {
        let p = parse(FULL).unwrap();
        assert!(p.check_profile("acme", "supervised").is_ok());
        assert!(p.check_profile("acme", "acme/careful").is_ok());
        let bare = parse("profiles:\n  allowed: [careful]\n").unwrap();
        assert!(bare.check_profile("acme", "local/careful").is_ok());
        let denial = p.check_profile("acme", "full-auto").unwrap_err();
        assert_eq!(denial.key, "profiles.allowed");
        assert!(
            denial.message.contains("`full-auto`")
                && denial.message.contains("supervised, acme/careful"),
            "{denial}"
        );
    }

    #[test]
    fn the_budget_cap_refuses_more_and_fills_in_when_none_is_given() {
        let p = parse(FULL).unwrap();
        assert_eq!(p.check_budget("acme", None).unwrap(), Some(5.5));
        assert_eq!(p.check_budget("acme", Some(2.0)).unwrap(), Some(2.0));
        let denial = p.check_budget("acme", Some(9.0)).unwrap_err();
        assert_eq!(denial.key, "budgets.max_cost_usd_per_plan");
        assert!(denial.message.contains("5.5"), "{denial}");
    }

    #[test]
    fn restrictions_name_items_bare_or_qualified_and_skills_may_need_approval() {
        let p = parse(FULL).unwrap();
        use RestrictedKind::{Resource, Skill};
        assert_eq!(p.restriction_of(Resource, "acme/prod-db"), Some(Role::Maintainer));
        assert_eq!(p.restriction_of(Resource, "prod-db"), Some(Role::Maintainer));
        assert_eq!(p.restriction_of(Resource, "acme/keys"), Some(Role::Owner));
        assert_eq!(p.restriction_of(Resource, "other/keys"), None);
        assert_eq!(p.restriction_of(Skill, "acme/release"), Some(Role::Owner));
        assert_eq!(p.restriction_of(Skill, "prod-db"), None);
        assert!(p.skill_needs_approval("acme/deploy"));
        assert!(!p.skill_needs_approval("acme/lint"));
    }

    #[test]
    fn of_several_policies_the_strictest_wins() {
        let strict = parse("budgets:\n  max_cost_usd_per_plan: 1\napply:\n  min_approvals: 3\n").unwrap();
        let loose = parse("budgets:\n  max_cost_usd_per_plan: 4\nnetwork: never\n").unwrap();
        let both = Policies {
            each: vec![("a".into(), strict), ("b".into(), loose)],
        };
        assert_eq!(both.check_budget(None).unwrap(), Some(1.0));
        assert_eq!(both.cost_cap(), Some(1.0));
        let denial = both.check_budget(Some(2.0)).unwrap_err();
        assert_eq!(denial.org, "a");
        assert_eq!(both.check_network(true).unwrap_err().org, "b");
        assert_eq!(both.min_approvals(), 3);
        assert_eq!(both.strictest_min_approvals(), Some(("a", 3)));
        assert_eq!(Policies::default().strictest_min_approvals(), None);
        assert!(Policies::default().check_budget(Some(7.0)).unwrap() == Some(7.0));
    }
}
