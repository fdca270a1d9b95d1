//! The decision tree of a plan and its child plans (`plan tree`; spec 27
//! "Correction CLI").
//!
//! Decisions nest by `parent_decision_id` in sequence order; a child plan nests under the
//! spawn decision linked to it by a `plan` dependency row (the agreed linking), and a child
//! plan no decision links (only `parent_plan_id` set) under its parent plan's root.
//! Superseded decisions (and what hangs under them) are left out unless asked for.
//! Everything is read with a few queries over the whole family of plans, so a tree of
//! 100,000 decisions loads in one pass.

use serde::Serialize;

use crate::domain::decision::DecisionType;
use crate::domain::id::{Id, IdHashMap as HashMap, IdHashSet as HashSet};
use crate::store::{Store, StoreError};

/// A node of the tree: a decision, or a child plan under its spawn decision.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct Node {
    /// `decision` or `plan`.
    pub kind: String,
    /// Decision id (decisions) or plan id (plans).
    pub id: Id,
    /// The decision's type (decisions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision_type: Option<DecisionType>,
    /// What was decided (decisions) or the plan's name (plans).
    pub label: String,
    /// The question (decisions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Confidence from 0 to 1 (decisions that have one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence_score: Option<f64>,
    /// Whether it is an executable step (decisions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executable: Option<bool>,
    /// Whether the decision was made by a correction.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub is_correction: Option<bool>,
    /// The decision that superseded it (shown with `--show-superseded`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub superseded_by: Option<Id>,
    /// `phase/state` (plans only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// Children in order.
    pub children: Vec<Node>,
}

/// Totals shown under the tree.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, serde::Deserialize, schemars::JsonSchema,
)]
pub struct Summary {
    /// Decision nodes shown.
    pub nodes: usize,
    /// Deepest decision level (the root is 1).
    pub depth: usize,
    /// Child plans in the tree.
    pub child_plans: usize,
    /// Current `invariant_enforced` decisions of the top plan.
    pub invariants: usize,
    /// Superseded decisions in the family of plans.
    pub superseded: usize,
    /// Whether superseded decisions are left out.
    pub superseded_hidden: bool,
}

/// A plan's whole tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PlanTree {
    /// The plan.
    pub plan_id: Id,
    /// Top-level nodes (normally the root `prompt_definition`).
    pub roots: Vec<Node>,
    /// Totals.
    pub summary: Summary,
}

struct Row {
    id: Id,
    plan: Id,
    parent: Option<Id>,
    kind: DecisionType,
    question: Option<String>,
    chosen: String,
    confidence: Option<f64>,
    executable: bool,
    correction: bool,
    superseded_by: Option<Id>,
}

fn corrupt(column: &'static str, m: impl ToString) -> StoreError {
    StoreError::Corrupt {
        table: "decisions",
        column,
        message: m.to_string(),
    }
}

/// Loads the tree of `plan_id` and its descendant plans.
///
/// # Errors
/// [`StoreError`].
pub fn load(store: &Store, plan_id: &Id, show_superseded: bool) -> Result<PlanTree, StoreError> {
    let plans = store.family_plans(plan_id)?;
    let in_family: HashSet<Id> = plans.iter().map(|p| p.0).collect();
    let mut rows = store.tree_rows(plan_id)?;
    let place = original_places(&rows);
    // The original place of each shown row, when any decision was superseded.
    let mut row_place = Vec::new();
    let mut superseded = 0;
    // Kept in place (no copy of 100,000 rows when all are shown).
    let mut i = 0;
    rows.retain(|row| {
        let at = i;
        i += 1;
        if !in_family.contains(&row.plan) {
            return false;
        }
        if row.superseded_by.is_some() {
            superseded += 1;
            if !show_superseded {
                return false;
            }
        }
        if let Some(place) = &place {
            row_place.push(place[at]);
        }
        true
    });
    let ids: HashMap<Id, usize> = rows.iter().enumerate().map(|(i, r)| (r.id, i)).collect();
    // Each shown decision's children (rows of its own plan naming it as parent), and each
    // plan's top-level decisions, in sequence order; a decision whose parent is not shown
    // or belongs to another plan is under neither.
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); rows.len()];
    let mut tops: HashMap<Id, Vec<usize>> = HashMap::default();
    for (i, r) in rows.iter().enumerate() {
        match r.parent {
            None => tops.entry(r.plan).or_default().push(i),
            Some(p) => {
                if let Some(&pi) = ids.get(&p)
                    && rows[pi].plan == r.plan
                {
                    children[pi].push(i);
                }
            }
        }
    }
    // Siblings stand in their original order: a replacement where the decision it corrects
    // stood (just after it when superseded decisions are shown), not after every later one.
    // Without a superseded decision that is sequence order, as read.
    if place.is_some() {
        let key = |&i: &usize| (row_place[i], i);
        for siblings in children.iter_mut().chain(tops.values_mut()) {
            siblings.sort_by_key(key);
        }
    }
    // Child plans by spawn decision, and by parent plan when no decision links them.
    let mut linked: HashMap<Id, Vec<Id>> = HashMap::default();
    let mut linked_plans = HashSet::default();
    for (spawn, child) in store.family_spawns(plan_id)? {
        if in_family.contains(&child) {
            linked.entry(spawn).or_default().push(child);
            linked_plans.insert(child);
        }
    }
    let mut unlinked: HashMap<Id, Vec<Id>> = HashMap::default();
    let info: HashMap<Id, &FamilyPlan> = plans.iter().map(|p| (p.0, p)).collect();
    for p in &plans {
        if let Some(parent) = p.1
            && p.0 != *plan_id
            && !linked_plans.contains(&p.0)
        {
            unlinked.entry(parent).or_default().push(p.0);
        }
    }
    let mut summary = Summary {
        superseded,
        superseded_hidden: !show_superseded,
        ..Summary::default()
    };
    summary.invariants = rows
        .iter()
        .filter(|r| {
            r.plan == *plan_id
                && r.kind == DecisionType::InvariantEnforced
                && r.superseded_by.is_none()
        })
        .count();

    // Each decision's texts move into its node, unless a child plan can be shown more than
    // once (linked more than once, or unlinked under a plan with several top-level
    // decisions): then its decisions are shown more than once, and copied.
    let once = linked.values().map(Vec::len).sum::<usize>() == linked_plans.len()
        && unlinked
            .keys()
            .all(|p| tops.get(p).map_or(0, Vec::len) <= 1);
    let texts = rows
        .iter_mut()
        .map(|r| (std::mem::take(&mut r.chosen), r.question.take()))
        .collect();
    let cx = Ctx {
        rows: &rows,
        texts: std::cell::RefCell::new(texts),
        move_texts: once,
        children: &children,
        tops: &tops,
        linked: &linked,
        unlinked: &unlinked,
        info: &info,
    };
    let mut roots = plan_nodes(&cx, *plan_id, 0, &mut summary);
    // Decisions whose parent is not shown (superseded, hidden) still appear, at the top.
    for (i, r) in rows.iter().enumerate() {
        if r.plan == *plan_id
            && let Some(p) = r.parent
            && !ids.contains_key(&p)
        {
            roots.push(decision_node(&cx, i, 1, &mut summary));
        }
    }
    Ok(PlanTree {
        plan_id: *plan_id,
        roots,
        summary,
    })
}

/// The place of each decision among its siblings, by its position in `rows` (sequence
/// order): its own position, or, for a replacement, the place of the decision it superseded
/// (followed back through every correction of it). `None` when no decision was superseded:
/// then every decision stands in its own place.
fn original_places(rows: &[Row]) -> Option<Vec<usize>> {
    // Where each replacement stands (`None` for one outside the rows).
    let mut at: HashMap<Id, Option<usize>> =
        rows.iter().filter_map(|r| r.superseded_by).map(|next| (next, None)).collect();
    if at.is_empty() {
        return None;
    }
    for (i, r) in rows.iter().enumerate() {
        if let Some(slot) = at.get_mut(&r.id) {
            *slot = Some(i);
        }
    }
    let mut place: Vec<Option<usize>> = vec![None; rows.len()];
    for (i, r) in rows.iter().enumerate() {
        // A replacement comes later in sequence order than what it supersedes, so its
        // predecessor has already passed its place on.
        let own = *place[i].get_or_insert(i);
        if let Some(next) = r.superseded_by
            && let Some(&Some(j)) = at.get(&next)
        {
            place[j] = Some(own);
        }
    }
    Some(
        place
            .into_iter()
            .enumerate()
            .map(|(i, p)| p.unwrap_or(i))
            .collect(),
    )
}

/// What building the nodes of a plan family reads.
struct Ctx<'a> {
    rows: &'a [Row],
    /// What each row decided and its question, by row position.
    texts: std::cell::RefCell<Vec<(String, Option<String>)>>,
    /// Whether every row is shown once, so its texts can be moved into its node.
    move_texts: bool,
    /// The shown children of each row, by row position.
    children: &'a [Vec<usize>],
    /// The top-level decisions of each plan.
    tops: &'a HashMap<Id, Vec<usize>>,
    linked: &'a HashMap<Id, Vec<Id>>,
    unlinked: &'a HashMap<Id, Vec<Id>>,
    info: &'a HashMap<Id, &'a FamilyPlan>,
}

/// The top-level decision nodes of `plan`.
fn plan_nodes(cx: &Ctx<'_>, plan: Id, depth: usize, s: &mut Summary) -> Vec<Node> {
    cx.tops
        .get(&plan)
        .map(|v| {
            v.iter()
                .map(|i| decision_node(cx, *i, depth + 1, s))
                .collect()
        })
        .unwrap_or_default()
}

/// The node of child plan `child`, with its decisions under it.
fn child_plan_node(cx: &Ctx<'_>, child: Id, depth: usize, s: &mut Summary) -> Node {
    s.child_plans += 1;
    let (name, status) = cx
        .info
        .get(&child)
        .map(|p| (p.2.clone(), p.3.clone()))
        .unwrap_or_default();
    Node {
        kind: "plan".into(),
        id: child,
        decision_type: None,
        label: name,
        question: None,
        confidence_score: None,
        executable: None,
        is_correction: None,
        superseded_by: None,
        status: Some(status),
        children: plan_nodes(cx, child, depth, s),
    }
}

/// The node of decision row `i`, with its decisions and linked child plans under it.
fn decision_node(cx: &Ctx<'_>, i: usize, depth: usize, s: &mut Summary) -> Node {
    let r = &cx.rows[i];
    let (label, question) = if cx.move_texts {
        std::mem::take(&mut cx.texts.borrow_mut()[i])
    } else {
        cx.texts.borrow()[i].clone()
    };
    s.nodes += 1;
    s.depth = s.depth.max(depth);
    let mut children: Vec<Node> = cx.children[i]
        .iter()
        .map(|c| decision_node(cx, *c, depth + 1, s))
        .collect();
    for child in cx.linked.get(&r.id).into_iter().flatten() {
        children.push(child_plan_node(cx, *child, depth, s));
    }
    if r.parent.is_none() {
        for child in cx.unlinked.get(&r.plan).into_iter().flatten() {
            children.push(child_plan_node(cx, *child, depth, s));
        }
    }
    Node {
        kind: "decision".into(),
        id: r.id,
        decision_type: Some(r.kind),
        label,
        question,
        confidence_score: r.confidence,
        executable: Some(r.executable),
        is_correction: Some(r.correction),
        superseded_by: r.superseded_by,
        status: None,
        children,
    }
}

/// The last text read from a column and the id decoded from it.
#[derive(Default)]
struct Cached {
    text: Option<String>,
    id: Option<Id>,
}

/// One plan of a family: (plan id, parent plan id, name, `phase/state`).
pub type FamilyPlan = (Id, Option<Id>, String, String);

impl Store {
    /// The plan and its descendants (by `root_plan_id`, and by `parent_plan_id` for plans
    /// whose root is not set): (plan id, parent plan id, name, `phase/state`).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn family_plans(&self, plan_id: &Id) -> Result<Vec<FamilyPlan>, StoreError> {
        let mut stmt = self.conn().prepare(
            "WITH RECURSIVE fam(id) AS (SELECT CAST(?1 AS TEXT) UNION SELECT p.plan_id FROM plans p JOIN fam f ON p.parent_plan_id = f.id) \
             SELECT p.plan_id, p.parent_plan_id, p.name, p.phase || '/' || p.state FROM plans p JOIN fam f ON p.plan_id = f.id ORDER BY p.plan_id",
        )?;
        let rows: Vec<(String, Option<String>, String, String)> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(id, parent, name, status)| {
                Ok((
                    id.parse().map_err(|e| corrupt("plan_id", e))?,
                    parent
                        .map(|p| p.parse().map_err(|e| corrupt("parent_plan_id", e)))
                        .transpose()?,
                    name,
                    status,
                ))
            })
            .collect()
    }

    /// The decision columns the tree shows, for the plan and every descendant plan, in plan
    /// and sequence order. `plan_id IN (SELECT id FROM fam)` (not a join) lets SQLite walk the
    /// `(plan_id, sequence_number)` index in order instead of building a transient index
    /// over every decision and sorting the result.
    fn tree_rows(&self, plan_id: &Id) -> Result<Vec<Row>, StoreError> {
        let mut stmt = self.conn().prepare(
            "WITH RECURSIVE fam(id) AS (SELECT CAST(?1 AS TEXT) UNION SELECT p.plan_id FROM plans p JOIN fam f ON p.parent_plan_id = f.id) \
             SELECT d.decision_id, d.plan_id, d.parent_decision_id, d.decision_type, d.question, d.chosen_option, \
             d.confidence_score, d.step IS NOT NULL, d.is_correction != 0, d.superseded_by \
             FROM decisions d WHERE d.plan_id IN (SELECT id FROM fam) ORDER BY d.plan_id, d.sequence_number",
        )?;
        // Ids and types are decoded from the row's own text, without a string per column.
        let id = |r: &crate::store::db::Row<'_>,
                  i: usize,
                  column: &'static str|
         -> Result<Option<Id>, StoreError> {
            r.get_ref(i)?
                .as_str_or_null()
                .map_err(|e| corrupt(column, e))?
                .map(|text| text.parse().map_err(|e| corrupt(column, e)))
                .transpose()
        };
        let required = |value: Option<Id>, column: &'static str| {
            value.ok_or_else(|| corrupt(column, "missing"))
        };
        // Rows come by plan, and siblings share a parent: the plan and the parent of the
        // previous row are reused when their text is the same, instead of decoded again.
        let mut plan = Cached::default();
        let mut parent = Cached::default();
        let cached = |cache: &mut Cached,
                          r: &crate::store::db::Row<'_>,
                          i: usize,
                          column: &'static str|
         -> Result<Option<Id>, StoreError> {
            let text = r.get_ref(i)?.as_str_or_null().map_err(|e| corrupt(column, e))?;
            if text != cache.text.as_deref() {
                cache.id = id(r, i, column)?;
                cache.text = text.map(str::to_owned);
            }
            Ok(cache.id)
        };
        let mut rows = Vec::new();
        stmt.for_each([plan_id.to_string()], |r| {
            rows.push(Row {
                id: required(id(r, 0, "decision_id")?, "decision_id")?,
                plan: required(cached(&mut plan, r, 1, "plan_id")?, "plan_id")?,
                parent: cached(&mut parent, r, 2, "parent_decision_id")?,
                kind: r
                    .get_ref(3)?
                    .as_str()
                    .map_err(|e| corrupt("decision_type", e))?
                    .parse()
                    .map_err(|e: String| corrupt("decision_type", e))?,
                question: r.get(4)?,
                chosen: r.get(5)?,
                confidence: r.get(6)?,
                executable: r.get(7)?,
                correction: r.get(8)?,
                superseded_by: id(r, 9, "superseded_by")?,
            });
            Ok::<_, StoreError>(())
        })?;
        Ok(rows)
    }

    /// Every (spawn decision, child plan) `plan` link in the plan's family.
    ///
    /// `CROSS JOIN` keeps SQLite scanning the few `plan` links first and looking up each
    /// spawn decision, instead of probing the dependency rows of every family decision
    /// (100,000 probes in the scale benchmark).
    ///
    /// # Errors
    /// [`StoreError`].
    pub fn family_spawns(&self, plan_id: &Id) -> Result<Vec<(Id, Id)>, StoreError> {
        let mut stmt = self.conn().prepare(
            "WITH RECURSIVE fam(id) AS (SELECT CAST(?1 AS TEXT) UNION SELECT p.plan_id FROM plans p JOIN fam f ON p.parent_plan_id = f.id) \
             SELECT dd.upstream_decision_id, dd.downstream_ref FROM decision_dependencies dd \
             CROSS JOIN decisions d ON d.decision_id = dd.upstream_decision_id \
             WHERE dd.dependency_type = 'plan' AND d.plan_id IN (SELECT id FROM fam) ORDER BY dd.downstream_ref",
        )?;
        let rows: Vec<(String, String)> = stmt
            .query_map([plan_id.to_string()], |r| r.try_into())?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(d, p)| {
                Ok((
                    d.parse().map_err(|e| corrupt("upstream_decision_id", e))?,
                    p.parse().map_err(|e| corrupt("downstream_ref", e))?,
                ))
            })
            .collect()
    }
}
