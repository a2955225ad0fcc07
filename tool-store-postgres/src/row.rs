//! Reading a stored row back into an [`OperationRecord`], and the values written into one.

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;
use sqlx::{Postgres, Row};
use toolgate_core::store::{
    AttemptError, ClaimRequest, OperationRecord, OperationState, StoreError,
};

/// The columns of a record, in the order [`record`] reads them; `errors` as JSON text.
macro_rules! columns {
    () => {
        "tenant_id, idempotency_key, tool, request_hash, arguments, state, attempt, \
         lease_until_ms, result, errors::text AS errors, reconcile_tries, created_ms, updated_ms, \
         approval_id"
    };
}
pub(crate) use columns;

/// The `errors` column with the one-element JSON array in the parameter `$p` appended, as one
/// SQL expression. The column is `json`, the text as written (jsonb would refuse a NUL in an
/// error), so the element is spliced into that text: the last `]` (after any trailing
/// whitespace) gives way to `,` and the element. The row's `UPDATE` makes it atomic.
macro_rules! append_error {
    ($p:literal) => {
        concat!(
            "CASE WHEN json_array_length(errors) = 0 THEN (",
            $p,
            "::text)::json ELSE (left(rtrim(errors::text, E' \t\n\r'), -1) || ',' || substr(",
            $p,
            "::text, 2))::json END"
        )
    };
}
pub(crate) use append_error;

/// The record in `row`, selected with [`columns!`].
pub(crate) fn record(row: &PgRow) -> Result<OperationRecord, StoreError> {
    let state: String = get(row, "state")?;
    let errors: String = get(row, "errors")?;
    Ok(OperationRecord {
        tenant: get(row, "tenant_id")?,
        key: get(row, "idempotency_key")?,
        tool: get(row, "tool")?,
        request_hash: get(row, "request_hash")?,
        arguments: get(row, "arguments")?,
        state: OperationState::parse(&state)
            .ok_or_else(|| StoreError::Corrupt(format!("unknown state {state:?}")))?,
        attempt: count(get(row, "attempt")?, "attempt")?,
        lease_until_ms: get(row, "lease_until_ms")?,
        result: get(row, "result")?,
        errors: serde_json::from_str(&errors)
            .map_err(|e| StoreError::Corrupt(format!("errors {errors:?}: {e}")))?,
        reconcile_tries: count(get(row, "reconcile_tries")?, "reconcile_tries")?,
        created_ms: get(row, "created_ms")?,
        updated_ms: get(row, "updated_ms")?,
        approval_id: get(row, "approval_id")?,
    })
}

/// `error` as a one-element JSON array, to append to the `errors` column.
pub(crate) fn error_list(error: &AttemptError) -> Result<String, StoreError> {
    serde_json::to_string(&[error]).map_err(|e| {
        StoreError::backend_with_source(format!("cannot encode an attempt error: {e}"), e)
    })
}

/// An attempt number as stored (`BIGINT`).
pub(crate) fn attempt(attempt: u32) -> i64 {
    i64::from(attempt)
}

pub(crate) fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, sqlx::Postgres> + sqlx::Type<sqlx::Postgres>,
{
    row.try_get(column)
        .map_err(|e| StoreError::Corrupt(format!("column {column}: {e}")))
}

/// `text` as a JSON string, for a `json` column that keeps every character (NUL included).
pub(crate) fn json_text(text: &str) -> Result<String, StoreError> {
    encode(&text)
}

/// `value` as JSON text.
pub(crate) fn encode<T: serde::Serialize + ?Sized>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|e| {
        StoreError::backend_with_source(format!("cannot encode a stored value: {e}"), e)
    })
}

/// The value in the JSON text of `column` (selected as `column::text`).
pub(crate) fn decode<T: serde::de::DeserializeOwned>(
    row: &PgRow,
    column: &str,
) -> Result<T, StoreError> {
    let text: String = get(row, column)?;
    serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("{column} {text:?}: {e}")))
}

/// Like [`decode`], for a column that may be NULL.
pub(crate) fn decode_optional<T: serde::de::DeserializeOwned>(
    row: &PgRow,
    column: &str,
) -> Result<Option<T>, StoreError> {
    let text: Option<String> = get(row, column)?;
    text.map(|text| {
        serde_json::from_str(&text)
            .map_err(|e| StoreError::Corrupt(format!("{column} {text:?}: {e}")))
    })
    .transpose()
}

/// A `u64` as stored (`BIGINT`), which must fit an `i64`.
pub(crate) fn wide(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::backend(format!("{what} {value} is too large to store")))
}

/// A limit as SQL reads it (`LIMIT NULLIF($n, 0)`): 0 means none.
pub(crate) fn limit(limit: u32) -> i64 {
    i64::from(limit)
}

/// A counter as stored (`BIGINT`) that must fit a `u32`.
pub(crate) fn count(value: i64, column: &str) -> Result<u32, StoreError> {
    u32::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("{column} {value} is out of range")))
}

/// `query` with the parameters of the record a claim inserts bound as `$1` to `$7`: the tenant,
/// the key, the tool, the request's hash, the arguments kept, the end of the lease, and now.
pub(crate) fn bind_new_record<'q>(
    query: Query<'q, Postgres, PgArguments>,
    request: &ClaimRequest<'q>,
) -> Query<'q, Postgres, PgArguments> {
    query
        .bind(request.tenant)
        .bind(request.key)
        .bind(request.tool)
        .bind(request.request_hash)
        .bind(request.arguments)
        .bind(request.lease_until_ms())
        .bind(request.now_ms)
}
