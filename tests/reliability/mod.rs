//! Reliability in CI time: bad input never panics and never half-writes
//! (property tests over the YAML loaders and tool-argument validation), and resource limits
//! give bounded memory and clear outcomes. The long runs (kill -9, concurrency, 1 GB output)
//! are `scripts/reliability.sh`.

mod bad_input;
mod crash;
mod limits;
