//! Running a graph actor: compile its nodes against providers, actors and skills once, then
//! walk the graph from its entry node, passing a state along.
//!
//! - An llm node (and an actor node naming an llm actor or a provider model) runs the
//!   ordinary tool-calling loop ([`runtime::run_actor`]) with its own model, prompt, options
//!   and limits, offered the run's tools (only the built-in tools of its `skills:` when it
//!   names some; tools of the role, such as `record_decision`, stay offered).
//! - A tool node calls its tool once through the same [`ToolHost`] a model's calls go
//!   through, so it is validated, policy-checked and recorded like any other tool call. A
//!   tool the run does not offer (a writing tool in Strategize) is refused with the reason.
//! - An actor node naming a graph actor runs that graph (nesting is limited to
//!   [`MAX_DEPTH`]).
//! - The state is `{input, last: {node, output, error, visits, json}, nodes: {NAME: {...}},
//!   steps}` (`json`: the output parsed, when it is a JSON object or array, as tool results
//!   are); prompts and tool arguments are templates over `state` and the run's context.
//! - After a node, its outgoing edges are tried in order ([`super::def::Condition`]); none
//!   taken, or `end`, ends the graph. Each node run is a step; the graph stops with
//!   [`Stop::StepLimit`] after `limits.max-steps` steps ([`DEFAULT_MAX_STEPS`] without one).
//! - A node's run that stops for any reason but an answer (a tool that ends the run, the
//!   turn limit, the budget, cancellation, a provider failure) stops the graph the same way.
//! - With a graph journal ([`RunRequest::graph`]) the walk records each node as it starts
//!   and, when it answered, what it gave; each llm node's loop journals its calls under the
//!   node's path. A run continued from its journal replays the finished nodes (their outputs
//!   decide the same edges) without running them and continues the node that was open.

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::def::{END, EdgeDef, GraphDef, NodeKind, START};
use crate::actors::budget::BudgetCheck;
use crate::actors::messages::{Message, Sampling, ToolSpec};
use crate::actors::prompts;
use crate::actors::runtime::{
    self, ActorEvent, ActorRun, GraphJournalAt, Limits, NodeDone, RunRequest, RuntimeError, Stop,
    ToolCallRecord, ToolHost, ToolOutcome,
};
use crate::domain::actor::{ActorRef, ActorType};
use crate::providers::ProviderClient;

/// Steps allowed per graph run when the graph sets no `limits.max-steps` (an acyclic graph
/// never reaches it unless it is larger).
pub const DEFAULT_MAX_STEPS: u32 = 50;

/// Graphs nested in graphs through actor nodes, at most.
pub const MAX_DEPTH: usize = 8;

/// The built-in tools of a list of skills, or why they do not resolve.
pub type SkillTools<'a> = dyn Fn(&[String]) -> Result<Vec<String>, String> + 'a;

/// What compiling needs from the caller.
pub struct CompileEnv<'a> {
    /// A client for `<provider>/<model>`.
    pub client: &'a dyn Fn(&str) -> Result<ProviderClient, String>,
    /// Resolves an actor reference.
    pub actor: &'a dyn Fn(&str) -> Result<ActorRef, String>,
    /// The built-in tools of skills.
    pub skill_tools: &'a SkillTools<'a>,
    /// The system prompt template of an llm node from its own (a plan's role prompt wraps
    /// it; `actor run` keeps it).
    pub template: &'a dyn Fn(Option<&str>) -> Option<String>,
}

/// A graph ready to run.
#[derive(Debug, Clone)]
pub struct Compiled {
    /// The actor it belongs to.
    pub name: String,
    nodes: Vec<Node>,
    edges: Vec<EdgeDef>,
    entry: usize,
    max_steps: u32,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    prompt: Option<String>,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    Llm(Box<LlmNode>),
    Tool {
        tool: String,
        args: serde_json::Map<String, Value>,
    },
    Anonymous,
    Graph(Box<Compiled>),
}

impl Body {
    /// The node's kind as journaled.
    fn kind(&self) -> &'static str {
        match self {
            Body::Llm(_) => "llm",
            Body::Tool { .. } | Body::Anonymous => "tool",
            Body::Graph(_) => "graph",
        }
    }
}

#[derive(Debug, Clone)]
struct LlmNode {
    actor: String,
    client: ProviderClient,
    template: Option<String>,
    allowed: Option<BTreeSet<String>>,
    limits: Limits,
    sampling: Sampling,
    max_tokens: Option<u32>,
}

impl Compiled {
    /// Compiles the graph of actor `name`.
    ///
    /// # Errors
    /// A message naming the node: a model without a client (unknown provider, missing key),
    /// an actor that does not resolve or is an offline built-in, a skill that does not
    /// resolve, nesting deeper than [`MAX_DEPTH`].
    pub fn compile(name: &str, graph: &GraphDef, env: &CompileEnv<'_>) -> Result<Self, String> {
        compile_at(name, graph, env, &mut vec![name.to_string()])
    }

    /// The clients of its llm nodes, nested graphs included (for pricing their calls).
    pub fn clients(&self) -> Vec<&ProviderClient> {
        let mut out = Vec::new();
        for n in &self.nodes {
            match &n.body {
                Body::Llm(l) => out.push(&l.client),
                Body::Graph(g) => out.extend(g.clients()),
                Body::Tool { .. } | Body::Anonymous => {}
            }
        }
        out
    }
}

fn compile_at(
    name: &str,
    graph: &GraphDef,
    env: &CompileEnv<'_>,
    stack: &mut Vec<String>,
) -> Result<Compiled, String> {
    let mut nodes = Vec::with_capacity(graph.nodes.len());
    for n in &graph.nodes {
        let at = |m: String| format!("actor {name}, node `{}`: {m}", n.name);
        let body = match n.kind {
            NodeKind::Llm => {
                let model = n.model.clone().unwrap_or_default();
                let def = crate::domain::actor::ActorDefinition {
                    actor_type: ActorType::Llm,
                    model: Some(model),
                    description: None,
                    system_prompt: n.system_prompt.clone(),
                    skills: n.skills.clone(),
                    options: n.options.clone(),
                    limits: n.limits.clone(),
                    unsafe_: false,
                    graph: None,
                    memory: Default::default(),
                };
                Body::Llm(Box::new(llm_node(name, &def, env).map_err(at)?))
            }
            NodeKind::Tool if n.anonymous => Body::Anonymous,
            NodeKind::Tool => Body::Tool {
                tool: n.tool.clone().unwrap_or_default(),
                args: n.args.clone().unwrap_or_default(),
            },
            NodeKind::Actor => {
                let reference = n.actor.clone().unwrap_or_default();
                actor_body(&reference, n, env, stack).map_err(at)?
            }
        };
        nodes.push(Node {
            name: n.name.clone(),
            prompt: n.prompt.clone(),
            body,
        });
    }
    let entry_name = graph.entry_node().unwrap_or_default();
    let entry = nodes
        .iter()
        .position(|n| n.name == entry_name)
        .ok_or_else(|| format!("actor {name}: the graph's entry `{entry_name}` is not a node"))?;
    Ok(Compiled {
        name: name.to_string(),
        nodes,
        edges: graph.edges.clone(),
        entry,
        max_steps: graph.limits.max_steps.unwrap_or(DEFAULT_MAX_STEPS),
    })
}

fn actor_body(
    reference: &str,
    node: &super::def::NodeDef,
    env: &CompileEnv<'_>,
    stack: &mut Vec<String>,
) -> Result<Body, String> {
    match (env.actor)(reference)? {
        ActorRef::Provider { name, .. } => {
            let def = crate::domain::actor::ActorDefinition {
                actor_type: ActorType::Llm,
                model: Some(name.clone()),
                description: None,
                system_prompt: None,
                skills: Vec::new(),
                options: Default::default(),
                limits: node.limits.clone(),
                unsafe_: false,
                graph: None,
                memory: Default::default(),
            };
            Ok(Body::Llm(Box::new(llm_node(&name, &def, env)?)))
        }
        ActorRef::Custom { actor } if actor.definition.actor_type == ActorType::Graph => {
            if stack.contains(&actor.name) || stack.len() >= MAX_DEPTH {
                return Err(format!(
                    "actor {} would run inside itself ({} -> {}); graphs may nest {MAX_DEPTH} deep and never recursively",
                    actor.name,
                    stack.join(" -> "),
                    actor.name
                ));
            }
            let graph = actor
                .definition
                .graph
                .as_ref()
                .ok_or_else(|| format!("graph actor {} has no graph", actor.name))
                .and_then(GraphDef::from_value)?;
            stack.push(actor.name.clone());
            let compiled = compile_at(&actor.name, &graph, env, stack);
            stack.pop();
            Ok(Body::Graph(Box::new(compiled?)))
        }
        ActorRef::Custom { actor } => {
            let mut def = actor.definition.clone();
            if node.limits.max_turns.is_some() {
                def.limits.max_turns = node.limits.max_turns;
            }
            if node.limits.max_tokens.is_some() {
                def.limits.max_tokens = node.limits.max_tokens;
            }
            Ok(Body::Llm(Box::new(llm_node(&actor.name, &def, env)?)))
        }
        ActorRef::Builtin { name, .. } => Err(format!(
            "{name} is an offline built-in actor; a graph node runs a model actor, a graph actor or a tool"
        )),
    }
}

fn llm_node(
    actor: &str,
    def: &crate::domain::actor::ActorDefinition,
    env: &CompileEnv<'_>,
) -> Result<LlmNode, String> {
    let model = def
        .model
        .as_deref()
        .ok_or_else(|| format!("actor {actor} names no model"))?;
    let client = (env.client)(model)?;
    let allowed = if def.skills.is_empty() {
        None
    } else {
        Some((env.skill_tools)(&def.skills)?.into_iter().collect())
    };
    let mut limits = Limits::default();
    if let Some(t) = def.limits.max_turns {
        limits.max_turns = t;
    }
    limits.token_budget = def.limits.max_tokens;
    Ok(LlmNode {
        actor: actor.to_string(),
        client,
        template: (env.template)(def.system_prompt.as_deref()),
        allowed,
        limits,
        sampling: def.options.sampling(),
        max_tokens: def.options.max_tokens,
    })
}

/// The run's tools as one node sees them: when the node names skills, the built-in tools
/// outside them are neither offered nor callable.
struct NodeTools<'a, H> {
    inner: &'a H,
    allowed: Option<&'a BTreeSet<String>>,
    builtins: BTreeSet<String>,
}

impl<H: ToolHost> NodeTools<'_, H> {
    fn permits(&self, name: &str) -> bool {
        self.allowed
            .is_none_or(|a| a.contains(name) || !self.builtins.contains(name))
    }
}

impl<H: ToolHost> ToolHost for NodeTools<'_, H> {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner
            .specs()
            .into_iter()
            .filter(|s| self.permits(&s.name))
            .collect()
    }

    fn call(&self, name: &str, args: Value) -> impl Future<Output = ToolOutcome> + Send {
        let permitted = self.permits(name);
        let name = name.to_string();
        async move {
            if permitted {
                self.inner.call(&name, args).await
            } else {
                ToolOutcome::error(format!("`{name}` is not among this node's skills"))
            }
        }
    }
}

/// The walk of one graph: what it has done so far.
struct Walk<'r> {
    request: &'r RunRequest,
    started: Instant,
    state: Value,
    run: ActorRun,
    /// Dollars spent by this graph's calls so far (priced ones).
    spent_usd: f64,
}

/// Runs a compiled graph with `tools`, as [`runtime::run_actor`] runs one model actor: the
/// same request (its prompt is the graph's input; its system template, when set, is appended
/// to every llm node's own), the same events, and one [`ActorRun`] holding every node's model
/// and tool calls in order. The transcript is the input and the graph's answer.
///
/// # Errors
/// [`RuntimeError::Prompt`] when a node's prompt or system prompt does not render.
pub fn run_graph<'a, H: ToolHost>(
    graph: &'a Compiled,
    request: &'a RunRequest,
    tools: &'a H,
    cancel: &'a CancellationToken,
    on_event: &'a (dyn Fn(ActorEvent) + Send + Sync),
) -> Pin<Box<dyn Future<Output = Result<ActorRun, RuntimeError>> + 'a>> {
    Box::pin(async move {
        let mut walk = Walk {
            request,
            started: Instant::now(),
            state: json!({"input": request.prompt, "last": Value::Null, "nodes": {}, "steps": 0}),
            run: ActorRun {
                stop: Stop::Answered,
                answer: String::new(),
                system: None,
                transcript: Vec::new(),
                tool_calls: Vec::new(),
                model_calls: Vec::new(),
                usage: Default::default(),
                turns: 0,
            },
            spent_usd: 0.0,
        };
        let at = request.graph.clone();
        let mut current = Some(graph.entry);
        let mut steps = 0u32;
        if let Some(at) = &at {
            (current, steps) = replay(graph, &mut walk, at);
        }
        while let Some(i) = current {
            if cancel.is_cancelled() {
                walk.run.stop = Stop::Cancelled;
                break;
            }
            if steps >= graph.max_steps {
                walk.run.stop = Stop::StepLimit {
                    steps: graph.max_steps,
                };
                break;
            }
            steps += 1;
            let node = &graph.nodes[i];
            let before = Before::of(&walk);
            let child = at.as_ref().map(|at| {
                at.journal
                    .node_started(&at.path, steps, &node.name, node.body.kind());
                GraphJournalAt {
                    journal: std::sync::Arc::clone(&at.journal),
                    path: format!("{}/{steps}:{}", at.path, node.name),
                    offset: at.offset + walk.run.turns,
                }
            });
            let (output, is_error, stop) =
                run_node(graph, node, &mut walk, tools, cancel, on_event, child.as_ref()).await?;
            record(&mut walk.state, &node.name, &output, is_error, steps);
            walk.run.answer = output.clone();
            if let Some(stop) = stop {
                walk.run.stop = stop;
                break;
            }
            if let Some(at) = &at {
                at.journal
                    .node_done(&at.path, &before.done(&walk, steps, node, &output, is_error));
            }
            current = next_node(graph, &node.name, &output, is_error);
        }
        let mut run = walk.run;
        run.transcript = vec![
            Message::User {
                text: request.prompt.clone(),
            },
            Message::Assistant {
                text: run.answer.clone(),
                tool_calls: Vec::new(),
            },
        ];
        Ok(run)
    })
}

/// The walk's counters before a node runs, to journal what the node added.
struct Before {
    turns: u32,
    usage: crate::actors::messages::Usage,
    spent_usd: f64,
    tool_calls: usize,
}

impl Before {
    fn of(walk: &Walk<'_>) -> Self {
        Self {
            turns: walk.run.turns,
            usage: walk.run.usage,
            spent_usd: walk.spent_usd,
            tool_calls: walk.run.tool_calls.len(),
        }
    }

    /// The journal entry of `node`, finished at `step` with `output`.
    fn done(&self, walk: &Walk<'_>, step: u32, node: &Node, output: &str, is_error: bool) -> NodeDone {
        let u = walk.run.usage;
        NodeDone {
            step,
            node: node.name.clone(),
            output: output.to_string(),
            is_error,
            turns: walk.run.turns - self.turns,
            usage: crate::actors::messages::Usage {
                input_tokens: u.input_tokens.saturating_sub(self.usage.input_tokens),
                output_tokens: u.output_tokens.saturating_sub(self.usage.output_tokens),
                cache_read_tokens: u.cache_read_tokens.saturating_sub(self.usage.cache_read_tokens),
                cache_write_tokens: u
                    .cache_write_tokens
                    .saturating_sub(self.usage.cache_write_tokens),
            },
            spent_usd: walk.spent_usd - self.spent_usd,
            tool_calls: walk.run.tool_calls[self.tool_calls..].to_vec(),
        }
    }
}

/// Replays what the walk's journal recorded: each finished node's output goes into the
/// state, its calls and cost into the run, and the walk takes the same edges (a node's
/// output decides them). Returns the node to run next and the steps taken. A journal that no
/// longer matches the graph (the actor was changed) is followed as far as it matches.
fn replay(graph: &Compiled, walk: &mut Walk<'_>, at: &GraphJournalAt) -> (Option<usize>, u32) {
    let journaled = at.journal.walk(&at.path);
    let mut current = Some(graph.entry);
    let mut steps = 0;
    for d in &journaled.done {
        let Some(i) = current else { break };
        if graph.nodes[i].name != d.node || d.step != steps + 1 {
            tracing::warn!(node = %d.node, step = d.step, "the graph's journal no longer matches its nodes; the walk goes on from here");
            break;
        }
        steps += 1;
        walk.run.turns += d.turns;
        walk.run.usage += d.usage;
        walk.spent_usd += d.spent_usd;
        walk.run.tool_calls.extend(d.tool_calls.iter().cloned());
        record(&mut walk.state, &d.node, &d.output, d.is_error, steps);
        walk.run.answer.clone_from(&d.output);
        current = next_node(graph, &d.node, &d.output, d.is_error);
    }
    if !journaled.done.is_empty() || journaled.open {
        at.journal
            .resumed(&at.path, at.offset + walk.run.turns + 1);
    }
    (current, steps)
}

fn next_node(graph: &Compiled, from: &str, output: &str, is_error: bool) -> Option<usize> {
    let edge = graph
        .edges
        .iter()
        .filter(|e| e.source == from)
        .find(|e| e.when.as_ref().is_none_or(|c| c.holds(output, is_error)))?;
    if edge.target == END || edge.target == START {
        return None;
    }
    graph.nodes.iter().position(|n| n.name == edge.target)
}

fn record(state: &mut Value, node: &str, output: &str, is_error: bool, steps: u32) {
    let visits = state["nodes"][node]["visits"].as_u64().unwrap_or(0) + 1;
    // A JSON output (a tool's result) is also readable field by field.
    let parsed = serde_json::from_str::<Value>(output)
        .ok()
        .filter(|v| v.is_object() || v.is_array());
    let mut entry = json!({"node": node, "output": output, "error": is_error, "visits": visits});
    if let Some(v) = parsed {
        entry["json"] = v;
    }
    state["nodes"][node] = entry.clone();
    state["last"] = entry;
    state["steps"] = json!(steps);
}

/// The template variables of a node: the run's context with `state` added.
fn vars(walk: &Walk<'_>) -> Value {
    let mut vars = match &walk.request.context {
        Value::Object(m) => Value::Object(m.clone()),
        Value::Null => json!({}),
        other => json!({"context": other}),
    };
    vars["state"] = walk.state.clone();
    vars
}

/// The prompt of a node: its template, else the last output, else the graph's input.
fn node_prompt(node: &Node, walk: &Walk<'_>) -> Result<String, RuntimeError> {
    match &node.prompt {
        Some(t) => Ok(prompts::render(t, &vars(walk))?),
        None => Ok(walk.state["last"]["output"]
            .as_str()
            .unwrap_or(&walk.request.prompt)
            .to_string()),
    }
}

type NodeResult = Result<(String, bool, Option<Stop>), RuntimeError>;

async fn run_node<H: ToolHost>(
    graph: &Compiled,
    node: &Node,
    walk: &mut Walk<'_>,
    tools: &H,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    journal: Option<&GraphJournalAt>,
) -> NodeResult {
    match &node.body {
        Body::Llm(llm) => run_llm(node, llm, walk, tools, cancel, on_event, journal).await,
        Body::Tool { tool, args } => run_tool(node, tool, args, walk, tools, on_event).await,
        Body::Anonymous => Ok((
            format!(
                // A command inside a sentence stays (D-commands-2): it explains the error rather than suggesting the next step.
                "anonymous tool nodes are not yet supported (node `{}` of {}); register the tool with `agents tool add` and name it with `tool:`",
                node.name, graph.name
            ),
            true,
            None,
        )),
        Body::Graph(sub) => {
            let prompt = node_prompt(node, walk)?;
            let request = RunRequest {
                prompt,
                history: Vec::new(),
                limits: remaining_limits(walk),
                // Passed on so that each call is recorded as it is made; with a graph
                // journal the nested walk journals its own nodes under this node's path.
                journal: walk.request.journal.clone(),
                resume_at: None,
                graph: journal.cloned(),
                ..walk.request.clone()
            };
            let inner = run_graph(sub, &request, tools, cancel, on_event).await?;
            let answer = inner.answer.clone();
            let stop = absorb(walk, inner, None);
            Ok((answer, false, stop))
        }
    }
}

/// The request's limits less what the graph used: the deadline shrinks, the plan's budget
/// counts this graph's calls as spent.
fn remaining_limits(walk: &Walk<'_>) -> Limits {
    let mut limits = walk.request.limits;
    if let Some(d) = limits.deadline {
        limits.deadline = Some(
            d.saturating_sub(walk.started.elapsed())
                .max(Duration::from_millis(1)),
        );
    }
    if let Some(b) = limits.budget {
        limits.budget = Some(BudgetCheck {
            limit: b.limit,
            spent_usd: b.spent_usd + walk.spent_usd,
            spent_tokens: b.spent_tokens + walk.run.usage.total(),
        });
    }
    limits
}

/// Adds a node's run to the graph's, renumbering its turns after the graph's; returns the
/// stop that ends the graph, if the node's run did not simply answer.
fn absorb(
    walk: &mut Walk<'_>,
    node_run: ActorRun,
    client: Option<&ProviderClient>,
) -> Option<Stop> {
    let offset = walk.run.turns;
    if let Some(c) = client {
        walk.spent_usd +=
            crate::actors::accounting::run_cost_usd(c.provider(), &node_run).unwrap_or(0.0);
    }
    walk.run.turns += node_run.turns;
    walk.run.usage += node_run.usage;
    walk.run
        .model_calls
        .extend(node_run.model_calls.into_iter().map(|mut c| {
            c.turn += offset;
            c
        }));
    walk.run
        .tool_calls
        .extend(node_run.tool_calls.into_iter().map(|mut c| {
            c.turn += offset;
            c
        }));
    if walk.run.system.is_none() {
        walk.run.system = node_run.system;
    }
    match node_run.stop {
        Stop::Answered => None,
        other => Some(other),
    }
}

async fn run_llm<H: ToolHost>(
    node: &Node,
    llm: &LlmNode,
    walk: &mut Walk<'_>,
    tools: &H,
    cancel: &CancellationToken,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
    journal: Option<&GraphJournalAt>,
) -> NodeResult {
    let prompt = node_prompt(node, walk)?;
    let suffix = walk
        .request
        .system_template
        .as_deref()
        .filter(|s| !s.trim().is_empty());
    let system_template = match (&llm.template, suffix) {
        (Some(t), Some(s)) => Some(format!("{t}\n\n{s}")),
        (Some(t), None) => Some(t.clone()),
        (None, s) => s.map(str::to_string),
    };
    let mut limits = remaining_limits(walk);
    limits.max_turns = llm.limits.max_turns;
    limits.token_budget = llm.limits.token_budget.or(walk.request.limits.token_budget);
    let mut history = if walk.run.turns == 0 && !walk.request.history.is_empty() {
        walk.request.history.clone()
    } else {
        Vec::new()
    };
    // With a graph journal the node's loop keeps a journal of its own, and a node that had
    // begun continues from it at the exact call; without one each call is only recorded.
    let (node_journal, resume_at) = match journal {
        Some(at) => {
            let (j, resumed) = at.journal.node_run(&at.path, at.offset);
            let resume_at = resumed.map(|(h, point)| {
                history = h;
                point
            });
            (Some(j), resume_at)
        }
        None => (walk.request.journal.clone(), None),
    };
    let request = RunRequest {
        system_template,
        context: vars(walk),
        prompt,
        max_tokens: llm.max_tokens,
        sampling: llm.sampling.clone(),
        stream: walk.request.stream,
        limits,
        history,
        journal: node_journal,
        resume_at,
        graph: None,
    };
    let builtins = crate::tools::builtins()
        .iter()
        .map(|t| t.name().to_string())
        .collect();
    let host = NodeTools {
        inner: tools,
        allowed: llm.allowed.as_ref(),
        builtins,
    };
    tracing::debug!(node = %node.name, actor = %llm.actor, "graph node: model run");
    let node_run = runtime::run_actor(&llm.client, &request, &host, cancel, on_event).await?;
    let answer = node_run.answer.clone();
    let stop = absorb(walk, node_run, Some(&llm.client));
    Ok((answer, false, stop))
}

/// Renders string argument values as templates over the state.
fn render_args(args: &serde_json::Map<String, Value>, vars: &Value) -> Result<Value, RuntimeError> {
    let mut out = serde_json::Map::new();
    for (k, v) in args {
        let v = match v {
            Value::String(s) if s.contains("{{") || s.contains("{%") => {
                Value::String(prompts::render(s, vars)?)
            }
            other => other.clone(),
        };
        out.insert(k.clone(), v);
    }
    Ok(Value::Object(out))
}

async fn run_tool<H: ToolHost>(
    node: &Node,
    tool: &str,
    args: &serde_json::Map<String, Value>,
    walk: &mut Walk<'_>,
    tools: &H,
    on_event: &(dyn Fn(ActorEvent) + Send + Sync),
) -> NodeResult {
    let arguments = render_args(args, &vars(walk))?;
    let turn = walk.run.turns;
    let call_id = format!("node-{}-{}", node.name, walk.run.tool_calls.len() + 1);
    on_event(ActorEvent::ToolCallStarted {
        turn,
        call_id: call_id.clone(),
        name: tool.to_string(),
        arguments: arguments.to_string(),
    });
    let clock = Instant::now();
    let offered = tools.specs().iter().any(|s| s.name == tool);
    let outcome = if offered {
        tools.call(tool, arguments.clone()).await
    } else {
        ToolOutcome::error(format!(
            "tool node `{}`: `{tool}` is not offered in this run (a writing tool outside Execute, a tool of a skill the actor lacks, or an unknown name)",
            node.name
        ))
    };
    let duration_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
    on_event(ActorEvent::ToolCallFinished {
        turn,
        call_id: call_id.clone(),
        name: tool.to_string(),
        is_error: outcome.is_error,
        duration_ms,
    });
    walk.run.tool_calls.push(ToolCallRecord {
        turn,
        call_id,
        name: tool.to_string(),
        arguments: arguments.to_string(),
        result: outcome.content.clone(),
        is_error: outcome.is_error,
        duration_ms,
    });
    let stop = outcome.ends_run.then(|| Stop::ToolEnded {
        tool: tool.to_string(),
    });
    Ok((outcome.content, outcome.is_error, stop))
}
