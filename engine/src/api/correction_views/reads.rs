//! How an [`Engine`] answers the correction views: each reads the database without writing it
//! (`query_only`) and never takes a sandbox snapshot.

use std::collections::{BTreeMap, HashMap};

use super::{
    AppendPreview, AttemptView, ChildPlan, ExplainView, Refusal, RevertPreview, ShortIds,
    StepLabel, TreeView,
};
use crate::api::protocol::RemoteError;
use crate::api::{ApiError, Engine, ErrorCode};
use crate::correction::impact::{self, Impact};
use crate::correction::{append, revert, tree};
use crate::domain::Id;
use crate::domain::decision::Decision;
use crate::domain::id::{TEXT_LEN, shared_prefix_len, unique_prefix_len};
use crate::lifecycle::RunError;
use crate::store::Store;

/// An error with its code, message and hints as every face shows it.
fn failure(code: ErrorCode, message: String, hints: Vec<String>) -> ApiError {
    ApiError::Remote(RemoteError {
        code,
        message,
        detail: None,
        hints,
        data: None,
    })
}

/// The database opened for reading only (`query_only`); the file is never written.
///
/// # Errors
/// `NOT_FOUND` when no database exists yet; store errors.
fn read_store(engine: &Engine) -> Result<Store, ApiError> {
    let crate::store::Location::Sqlite(db) = engine.database() else {
        return engine.store();
    };
    if !db.exists() {
        return Err(failure(
            ErrorCode::NotFound,
            format!("no database at {}: no plan exists yet", db.display()),
            vec!["agents plan use <action> <project>".into()],
        ));
    }
    Ok(Store::open_read_only(db)?)
}

/// Decision `input` (an id or unique prefix) as stored.
fn load_decision(store: &Store, input: &str) -> Result<Decision, ApiError> {
    let id = store.resolve_decision_id(input)??;
    store.decision(&id)?.ok_or_else(|| {
        failure(
            ErrorCode::NotFound,
            format!("decision {id} does not exist"),
            Vec::new(),
        )
    })
}

/// The plan `id` as stored.
fn load_plan(store: &Store, id: &Id) -> Result<crate::domain::Plan, ApiError> {
    store.plan(id)?.ok_or_else(|| {
        failure(
            ErrorCode::NotFound,
            format!("plan {id} does not exist"),
            Vec::new(),
        )
    })
}

/// What correcting `decision` reaches, files included.
fn impact_of(engine: &Engine, store: &Store, decision: &Id) -> Result<Impact, ApiError> {
    impact::impact(store, Some(&engine.sandboxes()), decision)
        .map_err(|e| failure(ErrorCode::CorrectionFailed, e.to_string(), Vec::new()))
}

/// `plan tree`: the plan's decision tree, its child plans and, when asked, the shortest
/// prefix of every decision id the tree shows.
pub(super) fn tree(
    engine: &Engine,
    plan: &str,
    show_superseded: bool,
    short_ids: bool,
) -> Result<TreeView, ApiError> {
    let store = read_store(engine)?;
    let id = store.resolve_plan_id(plan)??;
    let plan = load_plan(&store, &id)?;
    let t = tree::load(&store, &id, show_superseded)?;
    let child_plans = store
        .family_plans(&id)?
        .into_iter()
        .filter(|p| p.0 != id)
        .map(|(plan_id, parent_plan_id, name, status)| ChildPlan {
            plan_id,
            parent_plan_id,
            name,
            status,
        })
        .collect();
    let shorts = if short_ids {
        let mut ids = Vec::new();
        tree_ids(&t.roots, &mut ids);
        decision_shorts(&store, ids)?
    } else {
        ShortIds::default()
    };
    Ok(TreeView {
        plan,
        roots: t.roots,
        summary: t.summary,
        child_plans,
        short_ids: shorts,
    })
}

/// Every decision id a tree shows (its nodes and what superseded them).
fn tree_ids(nodes: &[tree::Node], out: &mut Vec<Id>) {
    for n in nodes {
        if n.kind != "plan" {
            out.push(n.id);
        }
        if let Some(by) = n.superseded_by {
            out.push(by);
        }
        tree_ids(&n.children, out);
    }
}

/// `plan explain`: the decision and what correcting it would reach.
pub(super) fn explain(engine: &Engine, decision: &str) -> Result<ExplainView, ApiError> {
    let store = read_store(engine)?;
    let d = load_decision(&store, decision)?;
    let impact = impact_of(engine, &store, &d.decision_id)?;
    let short_id = decision_short(&store, &d.decision_id)?;
    Ok(ExplainView {
        decision: d,
        short_id,
        impact,
    })
}

/// `plan correct --mode revert`'s preview; with `require_revertable`, a revert that would
/// be refused is this call's error.
pub(super) fn revert_preview(
    engine: &Engine,
    decision: &str,
    require_revertable: bool,
) -> Result<RevertPreview, ApiError> {
    let store = read_store(engine)?;
    let d = load_decision(&store, decision)?;
    let plan = load_plan(&store, &d.plan_id)?;
    let refused = revert::check_revertable(&plan, &d).err();
    if require_revertable && let Some(e) = refused {
        return Err(e.into());
    }
    let impact = impact_of(engine, &store, &d.decision_id)?;
    let rerun = crate::actors::estimate::rerun_cost(&store, &d.plan_id, &impact.steps_rerun)?;
    let short_id = decision_short(&store, &d.decision_id)?;
    let steps = step_labels(&store, &impact)?;
    let refused = refused.map(|e| Refusal {
        message: e.to_string(),
        hints: match e {
            RunError::WrongState { hints, .. } => Some(hints),
            _ => None,
        },
    });
    Ok(RevertPreview {
        script_executor: plan.execution_actor.as_deref()
            == Some(crate::registry::actors::SCRIPT_EXECUTOR),
        decision: d,
        plan,
        short_id,
        impact,
        rerun,
        refused,
        steps,
    })
}

/// The short id and chosen option of each step an impact lists: the shortest prefix unique
/// among the plan's decisions.
fn step_labels(store: &Store, imp: &Impact) -> Result<BTreeMap<String, StepLabel>, ApiError> {
    let chosen: HashMap<String, String> = store
        .decisions(&imp.plan_id)?
        .into_iter()
        .map(|d| (d.decision_id.to_string(), d.chosen_option))
        .collect();
    let mut all: Vec<String> = chosen
        .keys()
        .cloned()
        .chain(
            imp.steps_rerun
                .iter()
                .chain(&imp.steps_replayed)
                .chain(&imp.steps_may_rerun)
                .map(Id::to_string),
        )
        .collect();
    all.sort();
    all.dedup();
    let shorts = crate::domain::id::unique_prefixes(&all);
    let short_of: HashMap<&str, &String> = all.iter().map(String::as_str).zip(&shorts).collect();
    Ok(imp
        .steps_rerun
        .iter()
        .chain(&imp.steps_replayed)
        .chain(&imp.steps_may_rerun)
        .map(|id| {
            let id = id.to_string();
            let label = StepLabel {
                short: short_of
                    .get(id.as_str())
                    .map_or_else(|| id.chars().take(8).collect(), |s| (*s).clone()),
                chosen: chosen.get(&id).cloned().unwrap_or_default(),
            };
            (id, label)
        })
        .collect())
}

/// `plan correct --mode append`'s preview: whether the child plan's execution actor can
/// carry the guidance and, when `bases`, what the child plan would be based on.
pub(super) fn append_preview(
    engine: &Engine,
    decision: &str,
    execution_actor: Option<&str>,
    bases: bool,
) -> Result<AppendPreview, ApiError> {
    let store = read_store(engine)?;
    let d = load_decision(&store, decision)?;
    drop(store);
    let lc = engine.lifecycle()?;
    let parent = lc.plan(&d.plan_id)?;
    let actor = append::child_execution_actor(&lc, &parent, execution_actor);
    let actor_unavailable = actor
        .as_ref()
        .ok()
        .and_then(|a| append::child_actor_unavailable(&lc, &parent, a));
    let actor_refusal = actor.err();
    let bases = if bases && actor_refusal.is_none() {
        append::child_bases(&lc, &parent)?
    } else {
        Vec::new()
    };
    Ok(AppendPreview {
        decision: d,
        parent_phase: parent.phase(),
        actor_refusal,
        actor_unavailable,
        bases,
    })
}

/// `plan diff --correction`: a correction attempt and its comparison per resource.
pub(super) fn attempt(engine: &Engine, attempt: &str) -> Result<AttemptView, ApiError> {
    let store = read_store(engine)?;
    let a = store.correction_attempt(attempt)??;
    let resources = crate::correction::compare::compare(&store, &engine.sandboxes(), &a)?;
    Ok(AttemptView {
        attempt: a,
        resources,
    })
}

/// The shortest prefix of one decision id that names it alone ([`decision_shorts`]).
fn decision_short(store: &Store, id: &Id) -> Result<String, ApiError> {
    Ok(decision_shorts(store, vec![*id])?.shown(id))
}

/// Shortest prefixes of decision ids, unique among every decision of the database
/// (superseded ones and other plans' included), so that `plan explain` takes back any id
/// printed.
fn decision_shorts(store: &Store, mut wanted: Vec<Id>) -> Result<ShortIds, ApiError> {
    // Sorted as ids: the order of their text.
    wanted.sort_unstable();
    wanted.dedup();
    let (Some(first), Some(last)) = (wanted.first(), wanted.last()) else {
        return Ok(ShortIds::default());
    };
    let (first, last) = (first.to_string(), last.to_string());
    // Only an id's neighbours in the sorted list of every decision decide its prefix; both
    // lists are sorted, so one merge as the stored ids are read pairs each wanted id with
    // its neighbours. (ULID text, digits and capitals, sorts the same folded or not.)
    let mut merge = Shorts::new(wanted);
    store.each_decision_id_around(&first, &last, |id| merge.stored(id))?;
    Ok(merge.finish())
}

/// The merge of [`decision_shorts`]: walks the stored ids and the wanted ones (some of which
/// may not be stored) as one sorted list of texts without duplicates, and gives each wanted
/// id the prefix one character longer than what it shares with the id before or after it.
struct Shorts {
    wanted: std::vec::IntoIter<Id>,
    /// The next wanted id and its text.
    next: Option<Id>,
    next_text: String,
    /// The text walked last (empty before the first).
    prev: String,
    /// The id walked last when it is wanted, with what it shares with the one before it.
    open: Option<(Id, usize)>,
    out: ShortIds,
}

impl Shorts {
    fn new(wanted: Vec<Id>) -> Self {
        let mut merge = Self {
            out: ShortIds::with_capacity(wanted.len()),
            wanted: wanted.into_iter(),
            next: None,
            next_text: String::with_capacity(TEXT_LEN),
            prev: String::with_capacity(TEXT_LEN),
            open: None,
        };
        merge.advance();
        merge
    }

    fn advance(&mut self) {
        self.next = self.wanted.next();
        self.next_text.clear();
        if let Some(id) = self.next {
            self.next_text.push_str(id.encode(&mut [0; TEXT_LEN]));
        }
    }

    /// A stored id, in order.
    fn stored(&mut self, text: &str) {
        while self.next.is_some() && self.next_text.as_str() < text {
            self.walk_wanted();
        }
        if self.next.is_some() && self.next_text == text {
            self.walk_wanted();
        } else {
            let shared = shared_prefix_len(&self.prev, text);
            self.close(shared);
            self.prev.clear();
            self.prev.push_str(text);
        }
    }

    /// Walks the next wanted id.
    fn walk_wanted(&mut self) {
        let Some(id) = self.next else { return };
        let shared = shared_prefix_len(&self.prev, &self.next_text);
        self.close(shared);
        std::mem::swap(&mut self.prev, &mut self.next_text);
        self.open = Some((id, shared));
        self.advance();
    }

    /// Gives the open wanted id (the text walked last) its prefix, now that what follows it
    /// shares `after`.
    fn close(&mut self, after: usize) {
        if let Some((id, before)) = self.open.take() {
            self.out
                .insert(id, unique_prefix_len(&self.prev, before.max(after)));
        }
    }

    fn finish(mut self) -> ShortIds {
        while self.next.is_some() {
            self.walk_wanted();
        }
        self.close(0);
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::Shorts;
    use crate::domain::Id;
    use crate::domain::id::unique_prefixes;

    #[test]
    fn merged_prefixes_are_those_of_the_sorted_union_of_stored_and_wanted_ids() {
        let stored = [
            "01M8MK9C00AAAAAAAAAAAAAAAA",
            "01M8MK9C00AAAAAAAAAAAAAAAB",
            "01M8MK9C00BBBBBBBBBBBBBBBB",
            "01M8MKZZ00CCCCCCCCCCCCCCCC",
            "01M9000000000000000000000Z",
        ];
        // Stored ones, one missing from the store between two stored, one after every
        // stored id, and one before.
        let wanted = [
            "01M8MK9C00AAAAAAAAAAAAAAAB",
            "01M8MKZZ00CCCCCCCCCCCCCCCC",
            "01M8MK9C00BBBBBBBBBBBBBBBC",
            "01MA000000000000000000000Z",
            "01M0000000000000000000000Z",
        ];
        // Sorted, as `decision_shorts` hands them.
        let mut sorted: Vec<Id> = wanted.iter().map(|w| w.parse().unwrap()).collect();
        sorted.sort();
        let mut merge = Shorts::new(sorted);
        for id in stored {
            merge.stored(id);
        }
        let got = merge.finish();
        let mut union: Vec<&str> = stored.iter().chain(&wanted).copied().collect();
        union.sort_unstable();
        union.dedup();
        let expected = unique_prefixes(&union);
        assert_eq!(got.len(), wanted.len());
        let shown = |w: &str| got.get(&w.parse().unwrap()).unwrap();
        for w in wanted {
            let at = union.iter().position(|u| *u == w).unwrap();
            assert_eq!(shown(w), expected[at], "{w}");
        }
        assert_eq!(
            shown("01M8MK9C00AAAAAAAAAAAAAAAB"),
            "01M8MK9C00AAAAAAAAAAAAAAAB"
        );
        assert_eq!(
            shown("01M8MK9C00BBBBBBBBBBBBBBBC"),
            "01M8MK9C00BBBBBBBBBBBBBBBC"
        );
        assert_eq!(shown("01MA000000000000000000000Z"), "01MA0000");
    }
}
