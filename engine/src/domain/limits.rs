//! Resource limits of a confined command (spec section 22, sandbox limits): the `limits` block
//! of an action's `sandbox` section and of `config.toml`, as the store keeps them. Enforcing
//! them lives in `crate::sandbox::launcher`.

use serde::{Deserialize, Serialize};

/// Bytes in a GiB.
pub const GIB: u64 = 1024 * 1024 * 1024;
/// Bytes in a MiB.
pub const MIB: u64 = 1024 * 1024;

/// Resource limits of one confined command and everything it starts. Sizes are bytes and
/// accept `512MiB`, `2GiB`, `4G` in action files; 0 means unlimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct Limits {
    /// Processes and threads at once (cgroup `pids.max`; `RLIMIT_NPROC` for non-root users).
    pub processes: u64,
    /// Resident memory of the whole tree (cgroup `memory.limit_in_bytes`).
    #[serde(deserialize_with = "size")]
    pub memory: u64,
    /// Address space of each process (`RLIMIT_AS`).
    #[serde(deserialize_with = "size")]
    pub address_space: u64,
    /// Largest file a process may write (`RLIMIT_FSIZE`).
    #[serde(deserialize_with = "size")]
    pub file_size: u64,
    /// Open files per process (`RLIMIT_NOFILE`).
    pub open_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            processes: 512,
            memory: 2 * GIB,
            address_space: 16 * GIB,
            file_size: 4 * GIB,
            open_files: 4096,
        }
    }
}

impl Limits {
    /// One line for `diagnostics`: `processes 512, memory 2 GiB, ...`.
    pub fn describe(&self) -> String {
        let size = |b: u64| {
            if b == 0 {
                "unlimited".to_string()
            } else if b.is_multiple_of(GIB) {
                format!("{} GiB", b / GIB)
            } else {
                format!("{} MiB", b / MIB)
            }
        };
        format!(
            "processes {}, memory {}, address space {}, file size {}, open files {}",
            self.processes,
            size(self.memory),
            size(self.address_space),
            size(self.file_size),
            self.open_files
        )
    }

    /// The narrower of two limits for each resource (0 is unlimited).
    pub fn narrower(&self, other: &Limits) -> Limits {
        let min = |a: u64, b: u64| match (a, b) {
            (0, x) | (x, 0) => x,
            (a, b) => a.min(b),
        };
        Limits {
            processes: min(self.processes, other.processes),
            memory: min(self.memory, other.memory),
            address_space: min(self.address_space, other.address_space),
            file_size: min(self.file_size, other.file_size),
            open_files: min(self.open_files, other.open_files),
        }
    }
}

/// Parses `2GiB`, `512MiB`, `4G`, `100k` or a plain number of bytes.
///
/// # Errors
/// A message naming the accepted forms.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size; write e.g. 512MiB, 2GiB or a byte count"))?;
    let mult = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1024,
        "m" | "mb" | "mib" => MIB,
        "g" | "gb" | "gib" => GIB,
        "t" | "tb" | "tib" => 1024 * GIB,
        _ => {
            return Err(format!(
                "`{text}` has an unknown unit; use KiB, MiB, GiB or TiB"
            ));
        }
    };
    n.checked_mul(mult)
        .ok_or_else(|| format!("`{text}` is too large"))
}

fn size<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    #[derive(Deserialize, schemars::JsonSchema)]
    #[serde(untagged)]
    enum Raw {
        Bytes(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Bytes(b) => Ok(b),
        Raw::Text(t) => parse_size(&t).map_err(serde::de::Error::custom),
    }
}
