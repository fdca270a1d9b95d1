//! The graph of a `type: graph` actor as written (spec section 16 "Actor Composition and
//! Graphs", "Nodes in the Graph"), and the checks made when it is registered.
//!
//! ```yaml
//! graph:
//!   entry: draft                 # or `entry_point`; default: the edge from `start`, else the first node
//!   limits: { max-steps: 8 }     # required when the edges form a cycle
//!   nodes:
//!     - { name: draft, type: llm, model: openai/gpt-4o, prompt: "{{ state.input }}" }
//!     - { name: notes, type: tool, tool: read_file, args: { path: NOTES.md } }
//!     - { name: review, type: actor, actor: local/reviewer }
//!   edges:
//!     - { source: start, target: draft }
//!     - { source: draft, target: notes }
//!     - { source: notes, target: review }
//!     - { source: review, target: draft, when: { contains: REVISE } }
//!     - { source: review, target: end }
//! ```
//!
//! `start` and `end` are pseudo-nodes. Edges leaving a node are tried in file order after it
//! ran; the first whose `when` holds on the node's output is taken; none taken ends the graph.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::actor::{ActorLimits, ActorOptions};

/// The pseudo-node every graph starts from.
pub const START: &str = "start";
/// The pseudo-node that ends a graph.
pub const END: &str = "end";

/// A graph as written in an actor file (`graph:`, or a `routes:` entry of the spec's file
/// shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GraphDef {
    /// `graph` (a route of the spec's file shape says so; nothing else is accepted).
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub graph_type: Option<String>,
    /// The first node; `start` or absent: the target of the edge from `start`, else the
    /// first node.
    #[serde(default, alias = "entry_point", alias = "entry-point")]
    pub entry: Option<String>,
    /// The nodes, in file order.
    #[serde(default)]
    pub nodes: Vec<NodeDef>,
    /// The edges, in file order.
    #[serde(default)]
    pub edges: Vec<EdgeDef>,
    /// Limits of one run of the graph.
    #[serde(default)]
    pub limits: GraphLimits,
}

/// Limits of a graph run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct GraphLimits {
    /// Node runs allowed per graph run; required when the graph has a cycle.
    #[serde(default, alias = "max_steps", skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
}

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NodeKind {
    /// A model call loop with its own model, prompt, skills and limits.
    Llm,
    /// A deterministic call of one tool (registered, or anonymous with `anonymous: true`).
    Tool,
    /// Another actor, by name (`agent` in the spec's routes).
    #[serde(alias = "agent")]
    Actor,
}

impl NodeKind {
    /// `llm`, `tool` or `actor`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Llm => "llm",
            NodeKind::Tool => "tool",
            NodeKind::Actor => "actor",
        }
    }
}

/// One node as written. Which fields apply depends on `type` (checked by [`check`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct NodeDef {
    /// Unique within the graph; not `start` or `end`.
    pub name: String,
    /// `llm`, `tool` or `actor`.
    #[serde(rename = "type")]
    pub kind: NodeKind,
    /// llm: `<provider>/<model>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// llm: the system prompt (a minijinja template).
    #[serde(
        default,
        alias = "system_prompt",
        skip_serializing_if = "Option::is_none"
    )]
    pub system_prompt: Option<String>,
    /// llm, actor: the prompt (a template over `state`); default: the previous node's output
    /// (the graph's input for the first node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// llm: skills whose built-in tools this node is offered (default: all the run's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<String>,
    /// llm: model options.
    #[serde(default)]
    pub options: ActorOptions,
    /// llm, actor: limits of this node's model calls.
    #[serde(default)]
    pub limits: ActorLimits,
    /// tool: the registered or built-in tool to call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// tool: arguments; string values are templates over `state`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<serde_json::Map<String, Value>>,
    /// tool: a metadata override at the point of use (`description`, `capability`; never
    /// persisted to the tool registry).
    #[serde(default, rename = "override", skip_serializing_if = "Option::is_none")]
    pub override_: Option<Value>,
    /// tool: an inline tool body instead of a registered tool.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub anonymous: bool,
    /// anonymous tool: what it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// anonymous tool: JSON Schema of its arguments.
    #[serde(
        default,
        alias = "input_schema",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_schema: Option<Value>,
    /// anonymous tool: capability metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capability: Option<Value>,
    /// anonymous tool: a script run with `/bin/sh`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    /// anonymous tool: a command line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// actor: the actor to run (`local/reviewer`, `openai/gpt-4o`).
    #[serde(default, alias = "agent", skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
}

/// One edge as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct EdgeDef {
    /// A node or `start`.
    #[serde(alias = "from")]
    pub source: String,
    /// A node or `end`.
    #[serde(alias = "to")]
    pub target: String,
    /// When to take it (default: always).
    #[serde(default, alias = "condition", skip_serializing_if = "Option::is_none")]
    pub when: Option<Condition>,
}

/// A test on the output of an edge's source node; every test given must hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Condition {
    /// The output contains this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// The output does not contain this text.
    #[serde(
        default,
        alias = "not_contains",
        skip_serializing_if = "Option::is_none"
    )]
    pub not_contains: Option<String>,
    /// The output matches this regular expression.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// The output, trimmed, equals this text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub equals: Option<String>,
    /// The node failed (a tool error) or did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<bool>,
}

impl Condition {
    /// Whether the condition holds for `output` (`is_error`: the node failed). A
    /// `matches` that does not compile never holds ([`check`] refuses it at add time).
    pub fn holds(&self, output: &str, is_error: bool) -> bool {
        self.contains.as_deref().is_none_or(|t| output.contains(t))
            && self
                .not_contains
                .as_deref()
                .is_none_or(|t| !output.contains(t))
            && self.equals.as_deref().is_none_or(|t| output.trim() == t)
            && self.error.is_none_or(|e| e == is_error)
            && self
                .matches
                .as_deref()
                .is_none_or(|re| regex::Regex::new(re).is_ok_and(|re| re.is_match(output)))
    }

    /// A short description (`contains "REVISE"`), for `actor show`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = &self.contains {
            parts.push(format!("contains {t:?}"));
        }
        if let Some(t) = &self.not_contains {
            parts.push(format!("not contains {t:?}"));
        }
        if let Some(t) = &self.matches {
            parts.push(format!("matches /{t}/"));
        }
        if let Some(t) = &self.equals {
            parts.push(format!("equals {t:?}"));
        }
        if let Some(e) = self.error {
            parts.push(if e { "error" } else { "no error" }.to_string());
        }
        parts.join(" and ")
    }
}

/// What is wrong with a graph: the field (`nodes[2].tool`, relative to the graph), the key
/// to look for in the file, and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphProblem {
    /// The field path inside the graph.
    pub field: String,
    /// The key whose line to report.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

fn problem(field: impl Into<String>, key: &str, message: impl Into<String>) -> GraphProblem {
    GraphProblem {
        field: field.into(),
        key: key.to_string(),
        message: message.into(),
    }
}

impl GraphDef {
    /// Reads a stored graph.
    ///
    /// # Errors
    /// The JSON does not have the graph's shape (a message naming the field).
    pub fn from_value(value: &Value) -> Result<Self, String> {
        serde_path_to_error::deserialize(value.clone())
            .map_err(|e| format!("graph.{}: {}", e.path(), e.inner()))
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Option<&NodeDef> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The first node to run, by the rule of the module documentation; `None` for a graph
    /// without nodes or whose only edges from `start` are conditional.
    pub fn entry_node(&self) -> Option<&str> {
        match self.entry.as_deref() {
            Some(e) if e != START => Some(e),
            _ => self
                .edges
                .iter()
                .find(|e| e.source == START)
                .map(|e| e.target.as_str())
                .or_else(|| self.nodes.first().map(|n| n.name.as_str())),
        }
    }

    /// The first cycle among the nodes, as node names from a node back to itself
    /// (`[draft, review, draft]`), or `None` for an acyclic graph.
    pub fn cycle(&self) -> Option<Vec<String>> {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for e in &self.edges {
            if e.source != START && e.target != END {
                next.entry(&e.source).or_default().push(&e.target);
            }
        }
        // Depth-first search with an explicit path; the first back edge closes the cycle.
        let mut done: BTreeSet<&str> = BTreeSet::new();
        for n in &self.nodes {
            let mut path: Vec<&str> = Vec::new();
            if let Some(c) = visit(&n.name, &next, &mut path, &mut done) {
                return Some(c);
            }
        }
        None
    }
}

fn visit<'a>(
    node: &'a str,
    next: &BTreeMap<&'a str, Vec<&'a str>>,
    path: &mut Vec<&'a str>,
    done: &mut BTreeSet<&'a str>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|p| *p == node) {
        let mut cycle: Vec<String> = path[at..].iter().map(|s| s.to_string()).collect();
        cycle.push(node.to_string());
        return Some(cycle);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node);
    for t in next.get(node).into_iter().flatten() {
        if let Some(c) = visit(t, next, path, done) {
            return Some(c);
        }
    }
    path.pop();
    done.insert(node);
    None
}

/// Checks the structure of a graph: at least one node, unique node names, the fields each
/// kind needs, edges between known nodes, conditions that compile, and a step limit when the
/// edges form a cycle. Models, tools and actors named by nodes are checked by the registry.
///
/// # Errors
/// The first [`GraphProblem`].
pub fn check(graph: &GraphDef) -> Result<(), GraphProblem> {
    if let Some(t) = &graph.graph_type
        && t != "graph"
    {
        return Err(problem(
            "type",
            "type",
            format!("`{t}`: a graph's type is `graph`"),
        ));
    }
    if graph.nodes.is_empty() {
        return Err(problem(
            "nodes",
            "nodes",
            "a graph needs at least one node; e.g. `- {name: answer, type: llm, model: openai/gpt-4o}`",
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, n) in graph.nodes.iter().enumerate() {
        if n.name.trim().is_empty() || n.name == START || n.name == END {
            return Err(problem(
                format!("nodes[{i}].name"),
                "name",
                format!(
                    "`{}` cannot name a node; `start` and `end` are the graph's pseudo-nodes",
                    n.name
                ),
            ));
        }
        if !seen.insert(n.name.as_str()) {
            return Err(problem(
                format!("nodes[{i}].name"),
                "name",
                format!(
                    "a node called `{}` is already defined; node names are unique",
                    n.name
                ),
            ));
        }
        check_node(i, n)?;
    }
    check_edges(graph)?;
    if let Some(entry) = graph.entry.as_deref()
        && entry != START
        && graph.node(entry).is_none()
    {
        return Err(problem(
            "entry",
            "entry",
            format!("`{entry}` is not a node; nodes: {}", names(graph)),
        ));
    }
    if graph.entry_node().is_none() {
        return Err(problem("edges", "edges", "the graph has no entry node"));
    }
    if graph.limits.max_steps == Some(0) {
        return Err(problem(
            "limits.max-steps",
            "max-steps",
            "must be at least 1",
        ));
    }
    if let Some(cycle) = graph.cycle()
        && graph.limits.max_steps.is_none()
    {
        return Err(problem(
            "edges",
            "edges",
            format!(
                "the edges form a cycle {}; a cycle needs a step limit: add `limits: {{max-steps: N}}` to the graph",
                cycle.join(" -> ")
            ),
        ));
    }
    Ok(())
}

fn names(graph: &GraphDef) -> String {
    graph
        .nodes
        .iter()
        .map(|n| n.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn check_node(i: usize, n: &NodeDef) -> Result<(), GraphProblem> {
    let at = |f: &str| format!("nodes[{i}].{f}");
    let tool_fields = n.tool.is_some() || n.args.is_some() || n.anonymous || n.code.is_some();
    match n.kind {
        NodeKind::Llm => {
            if n.model.is_none() {
                return Err(problem(
                    at("model"),
                    "type",
                    format!("llm node `{}` needs `model: <provider>/<model>`", n.name),
                ));
            }
            if tool_fields || n.actor.is_some() {
                return Err(problem(
                    at("type"),
                    "type",
                    format!(
                        "llm node `{}` takes model, system-prompt, prompt, skills, options and limits; `tool`, `args`, `code` and `actor` belong to tool and actor nodes",
                        n.name
                    ),
                ));
            }
        }
        NodeKind::Tool => {
            match (n.anonymous, &n.tool) {
                (false, None) => {
                    return Err(problem(
                        at("tool"),
                        "type",
                        format!(
                            "tool node `{}` needs `tool: NAME`, or `anonymous: true` with `code:` or `command:`",
                            n.name
                        ),
                    ));
                }
                (true, Some(_)) => {
                    return Err(problem(
                        at("tool"),
                        "tool",
                        format!(
                            "tool node `{}` is anonymous and names a tool; give one or the other",
                            n.name
                        ),
                    ));
                }
                (true, None) if n.code.is_none() == n.command.is_none() => {
                    return Err(problem(
                        at("code"),
                        "anonymous",
                        format!(
                            "anonymous tool node `{}` needs exactly one of `code:` (a /bin/sh script) and `command:`",
                            n.name
                        ),
                    ));
                }
                _ => {}
            }
            if n.model.is_some() || n.actor.is_some() || !n.skills.is_empty() {
                return Err(problem(
                    at("type"),
                    "type",
                    format!(
                        "tool node `{}` takes tool, args and override (or an anonymous tool body); `model`, `skills` and `actor` belong to llm and actor nodes",
                        n.name
                    ),
                ));
            }
        }
        NodeKind::Actor => {
            if n.actor.is_none() {
                return Err(problem(
                    at("actor"),
                    "type",
                    format!(
                        "actor node `{}` needs `actor: NAME` (a registered actor or <provider>/<model>)",
                        n.name
                    ),
                ));
            }
            if tool_fields || n.model.is_some() {
                return Err(problem(
                    at("type"),
                    "type",
                    format!("actor node `{}` takes actor, prompt and limits", n.name),
                ));
            }
        }
    }
    Ok(())
}

fn check_edges(graph: &GraphDef) -> Result<(), GraphProblem> {
    for (i, e) in graph.edges.iter().enumerate() {
        if e.source == END || (e.source != START && graph.node(&e.source).is_none()) {
            return Err(problem(
                format!("edges[{i}].source"),
                "source",
                format!(
                    "`{}` is not a node or `start`; nodes: {}",
                    e.source,
                    names(graph)
                ),
            ));
        }
        if e.target == START || (e.target != END && graph.node(&e.target).is_none()) {
            return Err(problem(
                format!("edges[{i}].target"),
                "target",
                format!(
                    "`{}` is not a node or `end`; nodes: {}",
                    e.target,
                    names(graph)
                ),
            ));
        }
        if let Some(c) = &e.when {
            if c == &Condition::default() {
                return Err(problem(
                    format!("edges[{i}].when"),
                    "when",
                    "a condition needs one of contains, not-contains, matches, equals, error",
                ));
            }
            if let Some(re) = &c.matches
                && let Err(err) = regex::Regex::new(re)
            {
                return Err(problem(
                    format!("edges[{i}].when.matches"),
                    "matches",
                    format!("`{re}` is not a regular expression: {err}"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(yaml: &str) -> GraphDef {
        serde_yaml::from_str(yaml).unwrap()
    }

    const LOOP: &str = "nodes:\n  - {name: draft, type: llm, model: openai/m}\n  - {name: notes, type: tool, tool: read_file}\n  - {name: review, type: llm, model: openai/m}\nedges:\n  - {source: start, target: draft}\n  - {source: draft, target: notes}\n  - {source: notes, target: review}\n  - {source: review, target: draft, when: {contains: REVISE}}\n  - {source: review, target: end}\n";

    #[test]
    fn a_cycle_needs_a_step_limit_and_the_refusal_names_it() {
        let g = graph(LOOP);
        let p = check(&g).unwrap_err();
        assert_eq!(p.field, "edges");
        assert!(
            p.message.contains("draft -> notes -> review -> draft"),
            "{}",
            p.message
        );
        let g = graph(&format!("{LOOP}limits: {{max-steps: 7}}\n"));
        check(&g).unwrap();
        assert_eq!(g.entry_node(), Some("draft"));
    }

    #[test]
    fn edges_must_join_known_nodes_and_kinds_need_their_fields() {
        let g = graph(
            "nodes:\n  - {name: a, type: llm, model: openai/m}\nedges:\n  - {source: a, target: b}\n",
        );
        let p = check(&g).unwrap_err();
        assert_eq!(p.field, "edges[0].target");
        assert!(p.message.contains("`b` is not a node"), "{}", p.message);
        let g = graph("nodes:\n  - {name: a, type: tool}\n");
        assert_eq!(check(&g).unwrap_err().field, "nodes[0].tool");
        let g = graph("nodes:\n  - {name: a, type: agent}\n");
        assert_eq!(check(&g).unwrap_err().field, "nodes[0].actor");
        let g = graph("nodes:\n  - {name: end, type: llm, model: openai/m}\n");
        assert_eq!(check(&g).unwrap_err().field, "nodes[0].name");
        let g = graph(
            "nodes:\n  - {name: a, type: tool, tool: x}\nedges:\n  - {source: a, target: end, when: {matches: '('}}\n",
        );
        assert_eq!(check(&g).unwrap_err().field, "edges[0].when.matches");
    }

    #[test]
    fn conditions_test_the_output() {
        let c = Condition {
            contains: Some("REVISE".into()),
            error: Some(false),
            ..Default::default()
        };
        assert!(c.holds("please REVISE it", false));
        assert!(!c.holds("please REVISE it", true));
        assert!(!c.holds("fine", false));
        let m = Condition {
            matches: Some("^ok\\b".into()),
            ..Default::default()
        };
        assert!(m.holds("ok then", false));
        assert_eq!(c.describe(), "contains \"REVISE\" and no error");
    }
}
