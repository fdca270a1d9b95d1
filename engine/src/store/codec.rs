//! Column encodings shared by the registry repositories: JSON text and RFC 3339 times.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::StoreError;

/// Serializes a value for a JSON text column.
pub(crate) fn to_json<T: Serialize + ?Sized>(v: &T) -> String {
    serde_json::to_string(v).expect("registry fields always serialize")
}

/// Reads a JSON text column back, reporting the table and column when it is not valid.
pub(crate) fn from_json<T: DeserializeOwned>(
    table: &'static str,
    column: &'static str,
    text: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::Corrupt {
        table,
        column,
        message: e.to_string(),
    })
}

/// Reads an RFC 3339 time column.
pub(crate) fn ts(
    table: &'static str,
    column: &'static str,
    text: &str,
) -> Result<jiff::Timestamp, StoreError> {
    text.parse().map_err(|e: jiff::Error| StoreError::Corrupt {
        table,
        column,
        message: e.to_string(),
    })
}

/// Reads an optional RFC 3339 time column.
pub(crate) fn opt_ts(
    table: &'static str,
    column: &'static str,
    text: Option<String>,
) -> Result<Option<jiff::Timestamp>, StoreError> {
    text.map(|t| ts(table, column, &t)).transpose()
}
