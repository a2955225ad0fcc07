//! sqlx's errors in the store's words.

use tool_core::store::StoreError;

/// Maps a failed statement to [`StoreError::Backend`], saying what the store was doing.
pub(crate) fn backend(doing: &'static str) -> impl FnOnce(sqlx::Error) -> StoreError {
    move |err| StoreError::Backend(format!("SQLite: could not {doing}: {err}"))
}
