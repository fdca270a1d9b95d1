//! The code index policy (spec section 24 "file-path indexing", section 14 ignore patterns):
//! the `[index]` table of `config.toml` and its validation. Building the skip matcher and
//! walking files live in `crate::index`.

use globset::Glob;
use serde::{Deserialize, Serialize};

/// Default largest file indexed, in bytes (1 MiB, spec 06 `--max-file-size`).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 1 << 20;

/// Paths that are generated or vendored by default (globs over paths relative to the root).
pub const DEFAULT_GENERATED: &[&str] = &[
    "**/node_modules/**",
    "**/vendor/**",
    "**/target/**",
    "**/dist/**",
    "**/build/**",
    "**/__pycache__/**",
    "**/*.min.js",
    "**/*.min.css",
    "**/*.map",
    "**/package-lock.json",
    "**/yarn.lock",
    "**/pnpm-lock.yaml",
    "**/Cargo.lock",
    "**/go.sum",
];

/// The `[index]` table of `config.toml`: what the code index holds.
///
/// ```toml
/// [index]
/// enabled = true                  # false: no resource is indexed (status `disabled`)
/// max-file-size = 1048576         # bytes; larger files are skipped and counted
/// exclude = ["**/fixtures/**"]    # generated or vendored path globs, added to the defaults
/// default-excludes = true         # false: only `exclude` (no built-in node_modules, target, ...)
/// embeddings = "openai/text-embedding-3-small"  # PROVIDER/MODEL for search_code_semantically
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct IndexConfig {
    /// Whether resources are indexed at all (default true).
    pub enabled: Option<bool>,
    /// Largest file indexed, in bytes (default [`DEFAULT_MAX_FILE_SIZE`]).
    pub max_file_size: Option<u64>,
    /// Generated or vendored path globs skipped besides the defaults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Whether the built-in generated/vendored globs ([`DEFAULT_GENERATED`]) apply
    /// (default true).
    pub default_excludes: Option<bool>,
    /// `PROVIDER/MODEL` whose OpenAI-compatible `/v1/embeddings` endpoint embeds definitions
    /// for `search_code_semantically`.
    pub embeddings: Option<String>,
}

impl IndexConfig {
    /// Whether indexing is enabled.
    pub fn enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }

    /// Largest file indexed, in bytes (`max-file-size`, default [`DEFAULT_MAX_FILE_SIZE`]).
    pub fn max_file_size(&self) -> u64 {
        self.max_file_size.unwrap_or(DEFAULT_MAX_FILE_SIZE)
    }

    /// The generated or vendored path globs skipped: the defaults (unless
    /// `default-excludes = false`), then `exclude`.
    pub fn generated_globs(&self) -> Vec<String> {
        let mut globs: Vec<String> = if self.default_excludes.unwrap_or(true) {
            DEFAULT_GENERATED.iter().map(|g| (*g).to_string()).collect()
        } else {
            Vec::new()
        };
        globs.extend(self.exclude.iter().cloned());
        globs
    }

    /// Checks the keys as `config.toml` is loaded.
    ///
    /// # Errors
    /// `(key, message)` for a zero `max-file-size`, a malformed `embeddings` value or an
    /// `exclude` glob that does not parse.
    pub fn validate(&self) -> Result<(), (String, String)> {
        if self.max_file_size() == 0 {
            return Err((
                "max-file-size".into(),
                "is `0`; expected a size in bytes, at least 1".into(),
            ));
        }
        if let Some(e) = &self.embeddings
            && e.split_once('/')
                .is_none_or(|(p, m)| p.is_empty() || m.is_empty())
        {
            return Err((
                "embeddings".into(),
                format!(
                    "is `{e}`; expected PROVIDER/MODEL, such as `openai/text-embedding-3-small`"
                ),
            ));
        }
        for g in self.generated_globs() {
            Glob::new(&g).map_err(|e| {
                (
                    "exclude".to_string(),
                    format!("generated path glob `{g}`: {e}"),
                )
            })?;
        }
        Ok(())
    }
}
