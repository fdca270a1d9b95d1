//! Graph actors (spec sections 16 and 17): a `type: graph` actor is a graph of llm nodes,
//! tool nodes (a registered tool or an anonymous one) and actor nodes, joined by edges with
//! conditions on the node's output, walked from an entry point with a state passed along.
//!
//! - [`def`]: the graph as written, and its structural checks at `actor add` (a cycle is
//!   refused without a step limit, naming the cycle).
//! - [`run`]: compiling a graph against providers, actors and skills, and running it through
//!   the same [`ToolHost`](crate::actors::runtime::ToolHost) a single model actor uses.

pub mod def;
pub mod run;

pub use def::{Condition, EdgeDef, GraphDef, GraphLimits, GraphProblem, NodeDef, NodeKind, check};
pub use run::{CompileEnv, Compiled, DEFAULT_MAX_STEPS, MAX_DEPTH, run_graph};
