//! The [`Client`] every face holds (spec section 21, "Client-only vs server mode"): the same
//! calls answered in process (an [`Engine`], the embedded database: the default) or by a server
//! ([`super::Remote`]). [`serve`] answers a [`Request`] on an [`Engine`]; the server answers
//! with the same function, so both transports give the same views.

use std::ops::ControlFlow;
use std::time::Duration;

use super::protocol::{self, EVENTS_PAGE_MAX, Hello, Request, Response};
use super::{ApiError, Engine, Op, Outcome, PlanFilter, PlanListView, PlanStatusView};
use crate::domain::Id;
use crate::domain::Plan;
use crate::domain::approval::Approval;
use crate::domain::event::EngineEvent;
use crate::store::events::Follower;

/// How often an in-process follower looks for new events (a committed write changes SQLite's
/// `data_version`, which is cheap to read).
pub const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// What a follower is told: an event, or that nothing came for a while (so it can stop on
/// Ctrl-C).
#[derive(Debug, Clone, PartialEq)]
pub enum Followed {
    /// The next event, in `seq` order.
    Event(Box<EngineEvent>),
    /// Nothing new since the last call.
    Idle,
}

/// The engine's API as one set of calls, whichever transport carries them.
pub trait Client: Send + Sync {
    /// Answers one call.
    ///
    /// # Errors
    /// [`ApiError`]; through a server, [`ApiError::Remote`] carries the server's failure and
    /// [`ApiError::Unreachable`] a transport failure.
    fn call(&self, request: Request) -> Result<Response, ApiError>;

    /// Hands `sink` every event after `after` (of `plan` when given) in `seq` order, then each
    /// new one as it is committed, until the plan is final (applied or cancelled) or `sink`
    /// breaks. Resuming with the last `seq` seen repeats and loses nothing.
    ///
    /// # Errors
    /// [`ApiError`] for an unknown plan or a failed transport.
    fn follow(
        &self,
        plan: Option<&Id>,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    ) -> Result<(), ApiError>;

    /// Where the calls go: `in-process` or the server's URL.
    fn location(&self) -> String;

    /// Like [`Client::follow`] for every plan, without end (until `sink` breaks), and hands
    /// `live` the live-only events (model text, tool calls, step output lines) of the plans
    /// the answering engine drives, as they happen (see [`super::follow_store_live`]). A
    /// client that cannot carry live events follows the stored ones only.
    ///
    /// # Errors
    /// [`ApiError`] for a failed store or transport.
    fn follow_live(
        &self,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
        live: &mut dyn FnMut(super::LiveEvent),
    ) -> Result<(), ApiError> {
        let _ = live;
        self.follow(None, after, sink)
    }
}

impl dyn Client + '_ {
    /// [`Request::Hello`].
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn hello(&self) -> Result<Hello, ApiError> {
        let asked = Request::Hello;
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Hello(h) => Ok(h),
            other => Err(other),
        })
    }

    /// The full id of plan `input` (an id or unique prefix).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn resolve_plan(&self, input: &str) -> Result<Id, ApiError> {
        let asked = Request::ResolvePlan {
            plan: input.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::PlanId(id) => Ok(id),
            other => Err(other),
        })
    }

    /// The plans that pass `filter`.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn plan_list(&self, filter: PlanFilter) -> Result<PlanListView, ApiError> {
        let asked = Request::PlanList(filter);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::PlanList(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// The row of plan `input` (an id or unique prefix).
    ///
    /// # Errors
    /// `NOT_FOUND`, `AMBIGUOUS`; see [`Client::call`].
    pub fn plan(&self, input: &str) -> Result<Plan, ApiError> {
        let asked = Request::Plan {
            plan: input.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Plan(p) => Ok(*p),
            other => Err(other),
        })
    }

    /// Pending approvals, oldest first, of plan `input` or of every plan.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn approvals(&self, plan: Option<&str>) -> Result<Vec<Approval>, ApiError> {
        let asked = Request::Approvals {
            plan: plan.map(str::to_string),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Approvals(a) => Ok(a),
            other => Err(other),
        })
    }

    /// Approval `id`, whatever its status; `None` when there is none.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn approval(&self, id: &str) -> Result<Option<Approval>, ApiError> {
        let asked = Request::Approval {
            approval: id.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Approval(a) => Ok(a.map(|a| *a)),
            other => Err(other),
        })
    }

    /// The review of plan `input`'s changes.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn review(&self, input: &str) -> Result<crate::review::Review, ApiError> {
        let asked = Request::Review {
            plan: input.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Review(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Every decision of plan `input`, in sequence.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn decisions(
        &self,
        input: &str,
    ) -> Result<Vec<crate::domain::decision::Decision>, ApiError> {
        let asked = Request::Decisions {
            plan: input.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Decisions(d) => Ok(d),
            other => Err(other),
        })
    }

    /// Runs one registry change and returns its own result.
    ///
    /// # Errors
    /// The registry's error (see [`Engine::change`]); see [`Client::call`].
    pub fn change<C: super::TakeOutcome>(&self, change: C) -> Result<C::Output, ApiError> {
        let asked = Request::Change(Box::new(change.into()));
        match self.call(asked)? {
            Response::Changed(o) => C::take(*o).map_err(|other| ApiError::Protocol {
                message: format!("the change was answered with the outcome of `{other}`"),
            }),
            other => Err(ApiError::Protocol {
                message: format!(
                    "the call `change` was answered with the view `{}`",
                    other.name()
                ),
            }),
        }
    }

    /// The sequence number of the newest event (0 when there is none).
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn last_seq(&self) -> Result<i64, ApiError> {
        let asked = Request::LastSeq;
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Seq(s) => Ok(s),
            other => Err(other),
        })
    }

    /// Runs `op` to its end (see [`Engine::run`]).
    ///
    /// # Errors
    /// See [`Engine::run`] and [`Client::call`].
    pub fn run(&self, op: Op) -> Result<Outcome, ApiError> {
        let asked = Request::Run(Box::new(op));
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Outcome(o) => Ok(*o),
            other => Err(other),
        })
    }

    /// Everything `plan status` shows about plan `input`.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn plan_status(&self, input: &str) -> Result<PlanStatusView, ApiError> {
        let asked = Request::PlanStatus {
            plan: input.to_string(),
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::PlanStatus(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Sets or reads an organization's policy.
    ///
    /// # Errors
    /// See [`Engine::set_policy`], [`Engine::policy`] and [`Client::call`].
    pub fn policy(
        &self,
        request: super::policies::PolicyRequest,
    ) -> Result<super::policies::PolicyView, ApiError> {
        let asked = Request::Policy(request);
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Policy(v) => Ok(*v),
            other => Err(other),
        })
    }

    /// Up to `limit` events after `after` (of `plan` when given), oldest first.
    ///
    /// # Errors
    /// See [`Client::call`].
    pub fn events(
        &self,
        plan: Option<&Id>,
        after: i64,
        limit: u32,
    ) -> Result<Vec<EngineEvent>, ApiError> {
        let asked = Request::Events {
            plan: plan.map(Id::to_string),
            after,
            limit,
        };
        protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Events(e) => Ok(e),
            other => Err(other),
        })
    }
}

impl dyn Client + '_ {
    /// The audit log's rows that pass `filter`, oldest first.
    ///
    /// # Errors
    /// See [`Engine::audit_log`] and [`Client::call`].
    pub fn audit_log(
        &self,
        filter: super::AuditFilter,
    ) -> Result<Vec<super::AuditRecord>, ApiError> {
        let asked = Request::Audit(super::AuditRequest::List(filter));
        match protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Audit(v) => Ok(*v),
            other => Err(other),
        })? {
            super::AuditView::List(rows) => Ok(rows),
            super::AuditView::Verdict(_) => Err(ApiError::Protocol {
                message: "the audit log's rows were answered with a verdict".into(),
            }),
        }
    }

    /// The check of the audit log's chain, and that it still holds `head` when given.
    ///
    /// # Errors
    /// See [`Engine::audit_verify_against`] and [`Client::call`].
    pub fn audit_verify(
        &self,
        head: Option<super::AuditHead>,
    ) -> Result<super::AuditVerdict, ApiError> {
        let asked = Request::Audit(super::AuditRequest::Verify { head });
        match protocol::expect(asked.name(), self.call(asked)?, |r| match r {
            Response::Audit(v) => Ok(*v),
            other => Err(other),
        })? {
            super::AuditView::Verdict(v) => Ok(v),
            super::AuditView::List(_) => Err(ApiError::Protocol {
                message: "the audit log's check was answered with its rows".into(),
            }),
        }
    }
}

/// Answers `request` on `engine`: the one implementation of every call, in process and on
/// the server.
///
/// # Errors
/// The engine's [`ApiError`].
pub fn serve(engine: &Engine, request: Request) -> Result<Response, ApiError> {
    Ok(match request {
        Request::Hello => Response::Hello(Hello {
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: protocol::VERSION.to_string(),
            schema: engine.store()?.schema_version()?,
            mode: "in-process".to_string(),
        }),
        Request::ResolvePlan { plan } => Response::PlanId(engine.resolve_plan(&plan)?),
        Request::PlanList(filter) => Response::PlanList(Box::new(engine.plan_list(&filter)?)),
        Request::Plan { plan } => {
            let id = engine.resolve_plan(&plan)?;
            let row = engine.store()?.plan(&id)?;
            Response::Plan(Box::new(
                row.ok_or(crate::lifecycle::RunError::NotFound(id))?,
            ))
        }
        Request::Approvals { plan } => {
            let store = engine.store()?;
            let plan = match plan {
                Some(p) => Some(store.resolve_plan_id(&p)??),
                None => None,
            };
            Response::Approvals(store.pending_approvals(plan.as_ref())?)
        }
        Request::Approval { approval } => {
            Response::Approval(engine.store()?.approval(&approval)?.map(Box::new))
        }
        Request::Review { plan } => {
            let id = engine.resolve_plan(&plan)?;
            Response::Review(Box::new(engine.review(&id)?))
        }
        Request::Decisions { plan } => {
            let store = engine.store()?;
            let id = store.resolve_plan_id(&plan)??;
            Response::Decisions(store.decisions(&id)?)
        }
        Request::LastSeq => Response::Seq(crate::store::events::last_seq(&engine.store()?)?),
        Request::Change(op) => Response::Changed(Box::new(super::registry::run(engine, *op)?)),
        Request::Run(op) => Response::Outcome(Box::new(engine.run(*op)?)),
        Request::PlanStatus { plan } => {
            let id = engine.resolve_plan(&plan)?;
            Response::PlanStatus(Box::new(engine.plan_status(&id)?))
        }
        Request::Events { plan, after, limit } => {
            let store = engine.store()?;
            let plan = match plan {
                Some(p) => Some(store.resolve_plan_id(&p)??),
                None => None,
            };
            let limit = limit.clamp(1, EVENTS_PAGE_MAX);
            Response::Events(crate::store::events::after(
                &store,
                after,
                plan.as_ref(),
                limit,
            )?)
        }
        Request::PlanView(r) => Response::PlanView(Box::new(super::plan_views::answer(engine, r)?)),
        Request::Registry(r) => {
            Response::Registry(Box::new(super::registry_views::answer(engine, r)?))
        }
        Request::Definition(r) => {
            Response::Definition(Box::new(super::definition_views::answer(engine, r)?))
        }
        Request::Session(r) => {
            Response::Session(Box::new(super::session_views::answer(engine, r)?))
        }
        Request::CorrectionView(r) => {
            Response::CorrectionView(Box::new(super::correction_views::answer(engine, r)?))
        }
        Request::RunCall(r) => Response::RunCall(Box::new(super::run_views::answer(engine, r)?)),
        Request::Policy(r) => {
            // Recorded as set by the caller's human; the local user on one machine.
            let by = engine
                .human()
                .unwrap_or_else(|| crate::team::Principal::local().user);
            Response::Policy(Box::new(super::policies::answer(engine, r, &by)?))
        }
        Request::Team(r) => Response::Team(Box::new(super::team_views::answer(engine, r)?)),
        Request::Audit(r) => Response::Audit(Box::new(super::audit::answer(engine, r)?)),
    })
}

/// The in-process client: an [`Engine`] on this machine's data directory answers the calls
/// itself.
impl Client for Engine {
    fn call(&self, request: Request) -> Result<Response, ApiError> {
        super::access::serve_as(self, &self.caller(), request)
    }

    fn follow(
        &self,
        plan: Option<&Id>,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
    ) -> Result<(), ApiError> {
        follow_store(self, plan, after, FOLLOW_POLL, sink)
    }

    fn location(&self) -> String {
        "in-process".to_string()
    }

    fn follow_live(
        &self,
        after: i64,
        sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
        live: &mut dyn FnMut(super::LiveEvent),
    ) -> Result<(), ApiError> {
        super::follow_store_live(self, after, FOLLOW_POLL, sink, live)
    }
}

/// [`Client::follow`] on a local database, polling every `poll`: the in-process follower
/// and the server's event stream both run this loop.
///
/// # Errors
/// Store errors.
pub fn follow_store(
    engine: &Engine,
    plan: Option<&Id>,
    after: i64,
    poll: Duration,
    sink: &mut dyn FnMut(Followed) -> ControlFlow<()>,
) -> Result<(), ApiError> {
    let store = engine.store()?;
    let mut follower = Follower::new(after, plan.copied());
    loop {
        let new = follower.poll(&store)?;
        let idle = new.is_empty();
        for e in new {
            if sink(Followed::Event(Box::new(e))).is_break() {
                return Ok(());
            }
        }
        let done = match plan {
            Some(p) => store.plan(p)?.is_none_or(|p| p.status.is_terminal()),
            None => false,
        };
        // A final plan's last events were read by the poll above: nothing can follow them.
        if done && idle {
            return Ok(());
        }
        if idle && sink(Followed::Idle).is_break() {
            return Ok(());
        }
        if idle {
            std::thread::sleep(poll);
        }
    }
}
