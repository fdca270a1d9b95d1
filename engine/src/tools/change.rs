//! Change records (spec section 18 "Change tracking"): what each mutating tool call
//! did, with content hashes, never derived from model text.

use crate::sandbox::confined::{Content, RelPath};
use crate::sandbox::diff::{FileDiff, FileStatus};

pub use crate::domain::tool_call::{Change, ChangeOp, ChangeRecord};

impl Change {
    /// A change between two content states of `path` (create, modify or delete), or `None`
    /// when nothing changed.
    pub fn between(path: &RelPath, old: Option<Content>, new: Option<Content>) -> Option<Change> {
        let operation = match (&old, &new) {
            (None, None) => return None,
            (None, Some(_)) => ChangeOp::Create,
            (Some(_), None) => ChangeOp::Delete,
            (Some(a), Some(b)) if a == b => return None,
            (Some(_), Some(_)) => ChangeOp::Modify,
        };
        Some(Change {
            operation,
            path: path.as_str().to_string(),
            old_path: None,
            old_hash: old.as_ref().map(|c| c.hash.clone()),
            new_hash: new.as_ref().map(|c| c.hash.clone()),
            old_size: old.map(|c| c.size),
            new_size: new.map(|c| c.size),
        })
    }

    /// A directory created or removed.
    pub fn dir(operation: ChangeOp, path: &RelPath) -> Change {
        Change {
            operation,
            path: path.as_str().to_string(),
            old_path: None,
            old_hash: None,
            new_hash: None,
            old_size: None,
            new_size: None,
        }
    }

    /// A change from a diff entry between two snapshots (used around shell commands); hashes
    /// are computed from the blobs' bytes.
    pub fn from_diff(file: &FileDiff, old: Option<&[u8]>, new: Option<&[u8]>) -> Change {
        use crate::sandbox::confined::sha256_hex;
        let operation = match file.status {
            FileStatus::Added => ChangeOp::Create,
            FileStatus::Deleted => ChangeOp::Delete,
            FileStatus::Renamed => ChangeOp::Rename,
            FileStatus::Modified | FileStatus::TypeChanged => ChangeOp::Modify,
        };
        Change {
            operation,
            path: file.path.clone(),
            old_path: file.old_path.clone(),
            old_hash: old.map(sha256_hex),
            new_hash: new.map(sha256_hex),
            old_size: old.map(|b| b.len() as u64),
            new_size: new.map(|b| b.len() as u64),
        }
    }
}
