//! Apply journal entry kinds (spec section 13): what one entry of the crash-safe apply journal
//! records, as the store keeps it. The journal itself lives in `crate::lifecycle::apply`.

use serde::{Deserialize, Serialize};

/// What a journal entry records.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum EntryOp {
    /// A file, symbolic link or deletion at `path`.
    #[default]
    File,
    /// A directory Apply creates.
    MakeDir,
    /// A directory Apply removes (it becomes a file).
    RemoveDir,
}
