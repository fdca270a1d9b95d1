//! A [`ToolHost`] over the tool runner: what a model actor's tool calls go through, inside a
//! plan's Execute phase or in an isolated `agents actor run` (spec section 18 "Execution
//! flow"). Every call is validated, checked against the policy, bound to a resource, run in
//! its (lazily created) sandbox and logged with its changes, on the host's own database
//! connection.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::offer::Offer;
use crate::domain::Id;
use crate::domain::messages::ToolSpec;
use crate::domain::tool_host::{ToolHost, ToolOutcome};
use crate::sandbox::Sandboxes;
use crate::store::Store;
use crate::tools::runner::{CallRequest, Policy, ToolRunner};

/// The built-in tools a policy allows (optionally only some of them), run by the tool runner
/// for one plan (or actor run).
pub struct RunnerHost {
    plan_id: Id,
    policy: Policy,
    only: Option<Vec<String>>,
    store: Mutex<Store>,
    sandboxes: Sandboxes,
    cancel: Arc<AtomicBool>,
    offer: Offer,
}

impl RunnerHost {
    /// A host for `plan_id` offering every built-in tool `policy` allows. Once `cancel` is
    /// set, calls are refused and a running shell command is killed.
    pub fn new(
        store: Store,
        sandboxes: Sandboxes,
        plan_id: Id,
        policy: Policy,
        cancel: Arc<AtomicBool>,
    ) -> Self {
        Self {
            plan_id,
            policy,
            only: None,
            store: Mutex::new(store),
            sandboxes,
            cancel,
            offer: Offer::empty(),
        }
    }

    /// Also offers these command, MCP and Agent Skill tools (spec 18, 19).
    #[must_use]
    pub fn with_offer(mut self, offer: Offer) -> Self {
        self.offer = offer;
        self
    }

    /// The external tools offered.
    pub fn offer(&self) -> &Offer {
        &self.offer
    }

    /// Offers only these tools (still only those the policy allows), e.g. a run's skills.
    #[must_use]
    pub fn only(mut self, tools: Vec<String>) -> Self {
        self.only = Some(tools);
        self
    }

    /// The real name of the tool the model called `name` and why each call to it needs a
    /// human's approval under this host's policy (a `tool_approval`), or `None`.
    pub fn approval_needed(&self, name: &str) -> Option<(String, String)> {
        self.offer.approval_needed(&self.policy, name)
    }

    /// Runs a call a human approved (after a `tool_approval`): as [`ToolHost::call`], but
    /// the approval rule is met.
    pub fn call_approved(&self, name: &str, args: Value) -> ToolOutcome {
        if self.cancel.load(Ordering::SeqCst) {
            return ToolOutcome::error("the run was cancelled; stop");
        }
        let site = super::offer::Site {
            store: &self.store,
            sandboxes: &self.sandboxes,
            plan_id: &self.plan_id,
            policy: &self.policy,
            cancel: &self.cancel,
        };
        self.offer.call(&site, name, args, true)
    }

    /// Whether a call to `name` may write to a sandbox: a built-in tool whose capability
    /// under the policy is not read-only (the shell, the file-writing tools), or a command,
    /// MCP or Agent Skill tool not declared read-only. Unknown names run nothing.
    pub fn may_write(&self, name: &str) -> bool {
        if let Some(writes) = self.offer.may_write(name) {
            return writes;
        }
        crate::tools::builtins()
            .iter()
            .find(|t| t.name() == name)
            .is_some_and(|t| !self.policy.capability(t.as_ref()).read_only)
    }

    /// The names of the tools offered, in the runner's order.
    pub fn names(&self) -> Vec<String> {
        self.specs().into_iter().map(|s| s.name).collect()
    }
}

impl ToolHost for RunnerHost {
    fn specs(&self) -> Vec<ToolSpec> {
        self.policy
            .offered()
            .into_iter()
            .filter(|t| {
                self.only
                    .as_ref()
                    .is_none_or(|only| only.iter().any(|n| n == t.name()))
            })
            .map(|t| ToolSpec {
                name: t.name().to_string(),
                description: t.description().to_string(),
                input_schema: t.input_schema(),
            })
            .chain(self.offer.specs(&self.policy))
            .collect()
    }

    async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        if self.cancel.load(Ordering::SeqCst) {
            return ToolOutcome::error("the run was cancelled; stop");
        }
        if self.offer.has(name) {
            let site = super::offer::Site {
                store: &self.store,
                sandboxes: &self.sandboxes,
                plan_id: &self.plan_id,
                policy: &self.policy,
                cancel: &self.cancel,
            };
            return self.offer.call(&site, name, args, false);
        }
        let Ok(mut store) = self.store.lock() else {
            return ToolOutcome::error("the tool runner is unavailable");
        };
        let mut runner =
            ToolRunner::new(&mut store, &self.sandboxes).with_cancel(Arc::clone(&self.cancel));
        let request = CallRequest {
            tool: name.to_string(),
            arguments: args,
            parent_skill: None,
            resource: None,
        };
        match runner.call(&self.plan_id, &self.policy, request) {
            Ok(call) => match call.result {
                Ok(v) => ToolOutcome::ok(v.to_string()),
                Err(e) => ToolOutcome::error(format!("{}: {e}", e.code())),
            },
            Err(e) => ToolOutcome::error(format!("the tool runner failed: {e}")),
        }
    }
}

/// The strategist's share of its skills' external tools (read-only ones only; no MCP
/// servers are started in Strategize), as a host with no built-ins, or `None` when its
/// skills have none.
pub fn strategist_host(
    engine: &crate::lifecycle::Lifecycle,
    plan: &crate::domain::Plan,
    actor: &str,
) -> Option<RunnerHost> {
    let mut store = engine.store().reopen().ok()?;
    let policy = Policy::for_plan(plan);
    let offer = Offer::for_actor(engine, &mut store, &plan.plan_id, &policy, actor, false).ok()?;
    if offer.specs(&policy).is_empty() {
        return None;
    }
    Some(
        RunnerHost::new(
            store,
            Sandboxes::new(engine.paths()),
            plan.plan_id,
            policy,
            Arc::new(AtomicBool::new(false)),
        )
        .only(Vec::new())
        .with_offer(offer),
    )
}
